"""Classic mode: direct_action false under a classful root qdisc the operator made (HTB); the program
returns the classid (classid.bpf.c: 1:10 for UDP, 1:20 otherwise) and real traffic lands in that class."""
import re

import pytest

from harness.api import assert_error
from harness.base import ADDR_B, filt
from harness.observe import ping


def _class_packets(ns, dev):
    out = ns.run("tc", "-s", "class", "show", "dev", dev).stdout
    counts = {}
    for m in re.finditer(r"class htb (\S+) .*?\n\s*Sent \d+ bytes (\d+) pkt", out):
        counts[m.group(1)] = int(m.group(2))
    return counts


def _htb(ns, dev):
    ns.run("tc", "qdisc", "add", "dev", dev, "root", "handle", "1:", "htb", "default", "30")
    for minor in ("10", "20", "30"):
        ns.run("tc", "class", "add", "dev", dev, "parent", "1:", "classid", "1:" + minor, "htb", "rate", "1gbit")


def _send_udp(ns, addr, n):
    code = ("import socket\ns = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
            "for _ in range(%d): s.sendto(b'x' * 32, (%r, 9999))\n" % (n, addr))
    ns.run("/usr/bin/python3", "-c", code)


@pytest.mark.vm
def test_classid_program_puts_traffic_in_htb_classes(api, bpf, net):
    _htb(net.a, net.if_a)
    doc = {"egress": [filt("cls", bpf.classid, direct_action=False, parent="1:", classid="1:30")]}
    r = api.put_classifier(net.if_a, doc)
    assert r.status == 200, r
    assert r.json["document"]["egress"][0]["parent"] == "1:"
    f = [l for l in net.a.run("tc", "filter", "show", "dev", net.if_a).stdout.splitlines() if "clsd:cls" in l]
    assert len(f) == 1 and "direct-action" not in f[0], f
    assert not net.a.has_clsact(net.if_a)  # classic mode needs no clsact
    before = _class_packets(net.a, net.if_a)
    _send_udp(net.a, ADDR_B, 50)
    ping(net.a, ADDR_B, count=20)
    after = _class_packets(net.a, net.if_a)
    assert after["1:10"] - before.get("1:10", 0) >= 50, (before, after)  # UDP
    assert after["1:20"] - before.get("1:20", 0) >= 20, (before, after)  # ICMP and the rest
    assert api.get_classifier(net.if_a).json["status"]["egress"][0]["attached"] is True
    # drift repair and DELETE work under the HTB parent too
    net.a.run("tc", "filter", "del", "dev", net.if_a, "parent", "1:", "pref", "1")
    import time
    for _ in range(200):
        if "clsd:cls" in net.a.run("tc", "filter", "show", "dev", net.if_a).stdout:
            break
        time.sleep(0.01)
    assert "clsd:cls" in net.a.run("tc", "filter", "show", "dev", net.if_a).stdout
    assert api.delete_classifier(net.if_a).status == 204
    assert "clsd:cls" not in net.a.run("tc", "filter", "show", "dev", net.if_a).stdout
    assert "htb" in net.a.run("tc", "qdisc", "show", "dev", net.if_a).stdout  # the operator's qdisc stays


def test_a_parent_that_is_malformed_or_on_ingress_is_400(api, bpf, net):
    for bad in ("ffff:", "0:", "1", "x:"):
        assert_error(api.put_classifier(net.if_a, {"egress": [filt("c", bpf.classid, parent=bad)]}), 400,
                     "invalid_value")
    assert_error(api.put_classifier(net.if_a, {"ingress": [filt("c", bpf.classid, parent="1:")]}), 400,
                 "invalid_value")


def test_delete_removes_clsact_even_with_filters_under_the_root_qdisc(api, bpf, net):
    """Filters under an HTB root do not use clsact: clsd's own clsact still goes on DELETE."""
    _htb(net.a, net.if_a)
    net.a.run("tc", "filter", "add", "dev", net.if_a, "parent", "1:", "pref", "5", "bpf", "obj", bpf.classid,
              "sec", "classifier")
    assert api.put_classifier(net.if_a, {"ingress": [filt("web", bpf.count)]}).status == 200
    assert net.a.has_clsact(net.if_a)
    assert api.delete_classifier(net.if_a).status == 204
    assert not net.a.has_clsact(net.if_a)
    assert "classid.bpf.o" in net.a.run("tc", "filter", "show", "dev", net.if_a, "parent", "1:").stdout
