"""act_bpf for real: a classifier in classic mode (direct_action false) and act_bpf actions after it,
with real traffic: an action that counts, one that rewrites the IPv4 DSCP with bpf_skb_store_bytes()
(the receiving socket sees it, so the header checksum was mended), one that drops. Replace in place,
DELETE, dry run, drift repair, restart adoption with maps kept, their maps and /metrics.

These need a kernel with act_bpf (CONFIG_NET_ACT_BPF): this repository's test host (6.18) has none, so
they skip there, and tests/vm/run runs them on Debian 12's own kernel (6.1), which has it as a module.
tc, `tc actions ls`, bpftool and sockets are the independent observers."""

import json
import os
import re
import socket

import pytest
import yaml


from harness.api import assert_error
from harness.base import ADDR_A, CLSD, file_digest, filt, run, status_of, wait_for
from harness.metrics import parse_exposition, scrape, value
from harness.observe import bpftool_json, ping, prog_map_id, read_counter, read_u64, tc_monitor, udp_exchange
from harness.openapi import Contract, SPEC_PATH

pytestmark = pytest.mark.vm

IP_RECVTOS = getattr(socket, "IP_RECVTOS", 13)
IP_TOS = getattr(socket, "IP_TOS", 1)
TOS_EF = 46 << 2


@pytest.fixture
def act(net, clsd, bpf):
    """clsd in net.a, on a kernel with act_bpf, with the objects the tests use uploaded."""
    if clsd.api.get("/version").json["act_bpf"] != "available":
        pytest.skip("this kernel has no act_bpf (CONFIG_NET_ACT_BPF); tests/vm/run runs this on Debian's 6.1")
    net.quiet()

    class Act:
        pass

    a = Act()
    a.api, a.clsd, a.net, a.bpf = clsd.api, clsd, net, bpf
    a.custom = a.api.upload_ok(bpf.custom_sec)
    a.count = a.api.upload_ok(bpf.count)
    return a


def udp_only(act, actions, name="udp", priority=10, **kw):
    """A filter whose classic-mode classifier matches IPv4 UDP (custom-sec's match_udp)."""
    return filt(name, act.custom, program="match_udp", priority=priority, actions=actions, **kw)


def put(act, doc, status=200):
    r = act.api.put_classifier(act.net.if_a, doc)
    assert r.status == status, r
    return r


def tc_filter_text(ns, dev, hook="ingress"):
    return ns.run("tc", "-s", "filter", "show", "dev", dev, hook).stdout


def tc_actions(ns):
    """`tc actions ls action bpf` as JSON: the act_bpf actions of the namespace."""
    out = ns.run("tc", "-j", "actions", "ls", "action", "bpf").stdout
    data = json.loads(out) if out.strip() else []
    acts = []
    for group in data:
        acts.extend(group.get("actions", []))
    return acts


def filter_json(ns, dev, pref, hook="ingress"):
    for f in json.loads(ns.run("tc", "-j", "filter", "show", "dev", dev, hook).stdout):
        if f.get("pref") == pref and "options" in f:
            return f
    return None


def action_prog_ids(ns, dev, pref, hook="ingress"):
    """The program ids of the filter's actions, in order, as tc shows them."""
    f = filter_json(ns, dev, pref, hook)
    assert f is not None, "no filter at pref %d" % pref
    return [a["prog"]["id"] for a in f["options"].get("actions", [])]


def test_a_counting_action_runs_only_on_what_the_classifier_matches(act):
    """match_udp (classic mode) hands the UDP destination port to count_by_cb in skb->cb[0]; pings do
    not match, so the action never sees them, and they pass."""
    doc = {"ingress": [udp_only(act, [{"object": act.custom, "program": "count_by_cb"}])]}
    r = put(act, doc)
    st = status_of(r.json, "udp")
    assert st["attached"] and st["id"]
    assert [a["program"] for a in st["actions"]] == ["count_by_cb"]
    a0 = st["actions"][0]
    assert a0["attached"] and a0["id"] and a0["index"] and a0["tag"]
    # The stored document says classic mode: actions run only there.
    assert r.json["document"]["ingress"][0]["direct_action"] is False

    got = udp_exchange(act.net.b, act.net.a, ADDR_A, {7001: 2, 7002: 3})
    assert got == {7001: 2, 7002: 3}
    ping(act.net.b, ADDR_A, count=5)

    # The kernel's view: tc shows the classifier and its action by clsd's names.
    text = tc_filter_text(act.net.a, act.net.if_a)
    assert "clsd:udp" in text and "clsd:udp/1" in text, text
    assert not re.search(r"\bdirect-action\b", text), text
    listed = [a for a in tc_actions(act.net.a) if a.get("bpf_name") == "clsd:udp/1"]
    assert len(listed) == 1 and listed[0]["prog"]["id"] == a0["id"], tc_actions(act.net.a)

    # What it counted, through bpftool by the action program's map and through clsd's maps.
    map_id = prog_map_id(a0["id"], "per_port")
    counts = {e["formatted"]["key"]: e["formatted"]["value"] for e in bpftool_json("map", "dump", "id", str(map_id))}
    assert counts == {7001: 2, 7002: 3, 40000: 1}  # and the marker; no ICMP
    r = act.api.get("/ifaces/%s/classifier/maps/per_port" % act.net.if_a)
    assert r.status == 200, r
    assert r.json["btf"] == {"key": "__u32", "value": "__u64"}
    assert r.json["filters"] == [{"ifname": act.net.if_a, "direction": "ingress", "pref": 10, "name": "udp"}]
    assert {e["key"]: e["value"] for e in r.json["entries"]} == counts

    # The kernel counts what went through the action too.
    st = status_of(act.api.get_classifier(act.net.if_a).json, "udp")
    assert st["actions"][0]["packets"] == 6 and st["actions"][0]["drops"] == 0


def test_an_action_rewrites_dscp_and_the_receiver_sees_it(act):
    """set-dscp rewrites the TOS byte with bpf_skb_store_bytes() and mends the checksum with
    bpf_l3_csum_replace(): IPv4 drops a packet with a bad header checksum, so a socket that reads the
    new TOS got a sound packet. The ECN bits stay."""
    dscp = act.api.upload_ok(act.bpf.set_dscp)
    put(act, {"ingress": [udp_only(act, [{"object": dscp}])]})
    st = status_of(act.api.get_classifier(act.net.if_a).json, "udp")
    assert st["actions"][0]["program"] == "set_dscp"

    rx = act.net.a.socket(socket.AF_INET, socket.SOCK_DGRAM)
    tx = act.net.b.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        rx.bind((ADDR_A, 7300))
        rx.setsockopt(socket.IPPROTO_IP, IP_RECVTOS, 1)
        rx.settimeout(3)
        tx.setsockopt(socket.IPPROTO_IP, IP_TOS, 0x02)  # ECT(0), DSCP 0
        seen = []
        for i in range(5):
            tx.sendto(b"tos %d" % i, (ADDR_A, 7300))
            data, anc, _, _ = rx.recvmsg(2048, socket.CMSG_SPACE(4))
            tos = [c[2][0] for c in anc if c[0] == socket.IPPROTO_IP and c[1] == IP_TOS]
            seen.append((data, tos))
    finally:
        rx.close()
        tx.close()
    assert seen == [(b"tos %d" % i, [TOS_EF | 0x02]) for i in range(5)]
    assert read_u64(prog_map_id(st["actions"][0]["id"], "rewritten")) == 5
    # Nothing was dropped for a bad checksum on the way in.
    snmp = act.net.a.run("cat", "/proc/net/snmp").stdout
    hdr, vals = [l.split() for l in snmp.splitlines() if l.startswith("Ip:")][:2]
    assert dict(zip(hdr, vals))["InHdrErrors"] == "0"


def test_an_action_that_drops_and_actions_in_a_row(act):
    """count, then drop-port: both see every UDP datagram, the second drops those to port 9 (the
    kernel counts the drops at the action); the rest arrive."""
    drop = act.api.upload_ok(act.bpf.drop_port)
    put(act, {"ingress": [udp_only(act, [{"object": act.count}, {"object": drop}])]})
    got = udp_exchange(act.net.b, act.net.a, ADDR_A, {9: 4, 7001: 3})
    assert got == {9: 0, 7001: 3}
    st = status_of(act.api.get_classifier(act.net.if_a).json, "udp")
    count, dropper = st["actions"]
    assert count["program"] == "count_pkts" and dropper["program"] == "drop_port"
    assert read_counter(prog_map_id(count["id"], "counters"))[0] == 8  # 4 + 3 + the marker
    assert read_u64(prog_map_id(dropper["id"], "dropped")) == 4
    assert dropper["drops"] == 4 and dropper["packets"] == 8
    # The same program as a classifier elsewhere is another load (sched_cls, not sched_act).
    assert bpftool_json("prog", "show", "id", str(count["id"]))["type"] == "sched_act"


def test_actions_are_replaced_in_place_and_keep_their_maps(act):
    put(act, {"ingress": [udp_only(act, [{"object": act.count}])]})
    udp_exchange(act.net.b, act.net.a, ADDR_A, {7001: 5})
    before = status_of(act.api.get_classifier(act.net.if_a).json, "udp")
    v2 = act.api.upload_ok(act.bpf.count_v2)

    with tc_monitor(act.net.a) as events:
        r = put(act, {"ingress": [udp_only(act, [{"object": v2, "program": "count_pkts"}])]})
    after = status_of(r.json, "udp")
    assert after["handle"] == before["handle"] and after["pref"] == before["pref"]
    assert after["id"] == before["id"]  # the classifier is shared, not reloaded
    assert after["actions"][0]["id"] != before["actions"][0]["id"]
    # One replace of the filter, never a deletion: the hook was never without it.
    assert not [l for l in events if l.startswith("deleted filter")], events
    # The new build took over the counters: they go on from 6 (5 and the marker).
    udp_exchange(act.net.b, act.net.a, ADDR_A, {7001: 2})
    assert read_counter(prog_map_id(after["actions"][0]["id"], "counters"))[0] == 6 + 3
    assert "map counters keeps its contents" in act.clsd.log_this_run()


def test_delete_removes_the_filter_and_its_actions(act):
    put(act, {"ingress": [udp_only(act, [{"object": act.count}])]})
    assert [a for a in tc_actions(act.net.a) if a.get("bpf_name") == "clsd:udp/1"]
    r = act.api.delete_classifier(act.net.if_a)
    assert r.status == 204, r
    assert act.net.a.filters(act.net.if_a) == []
    assert not [a for a in tc_actions(act.net.a) if str(a.get("bpf_name", "")).startswith("clsd:")]


def test_dry_run_plans_the_actions(act):
    put(act, {"ingress": [udp_only(act, [{"object": act.count}])]})
    v2 = act.api.upload_ok(act.bpf.count_v2)
    doc = {"ingress": [udp_only(act, [{"object": v2, "program": "count_pkts"}, {"object": act.count}])]}
    r = act.api.request("PUT", "/ifaces/%s/classifier?dry_run=1" % act.net.if_a, body=doc)
    assert r.status == 200, r
    progs = {(p["filter"], p.get("action")): p["load"] for p in r.json["programs"]}
    # The classifier is shared; action 1 is a new build, loaded; action 2 is count_pkts as an action,
    # which is loaded already (action 1 of the attached filter).
    assert progs == {("udp", None): "shared", ("udp", 1): "load", ("udp", 2): "shared"}, r.json
    steps = r.json["filters"]
    assert [(s["action"], s["name"]) for s in steps] == [("replace", "clsd:udp")]
    assert "1 action(s) attached, 2 declared" in steps[0]["reason"], steps
    # Nothing changed.
    assert len(action_prog_ids(act.net.a, act.net.if_a, 10)) == 1


def test_drift_of_the_filter_or_its_action_is_repaired(act):
    r = put(act, {"ingress": [udp_only(act, [{"object": act.count}])]})
    st = status_of(r.json, "udp")
    act_id = st["actions"][0]["id"]

    # Someone deletes the filter: it comes back with its action, the same programs.
    act.net.a.run("tc", "filter", "del", "dev", act.net.if_a, "ingress", "pref", "10")
    wait_for(lambda: action_prog_ids(act.net.a, act.net.if_a, 10) == [act_id] if filter_json(
        act.net.a, act.net.if_a, 10) else False, timeout=5, what="the filter and its action back")

    # Someone replaces the action's program through its index: clsd puts its own back.
    index = status_of(act.api.get_classifier(act.net.if_a).json, "udp")["actions"][0]["index"]
    act.net.a.run("tc", "actions", "replace", "action", "bpf", "obj", act.bpf.drop_port, "sec", "tc", "index",
                  str(index))
    wait_for(lambda: action_prog_ids(act.net.a, act.net.if_a, 10) == [act_id], timeout=5,
             what="clsd's action program back")
    body = act.api.get_classifier(act.net.if_a).json
    assert body["repairs"] == 2 and status_of(body, "udp")["actions"][0]["attached"], body

    # A bound action cannot be deleted on its own: the kernel refuses, and nothing changes.
    index = status_of(body, "udp")["actions"][0]["index"]
    p = act.net.a.run("tc", "actions", "del", "action", "bpf", "index", str(index), check=False)
    assert p.returncode != 0
    assert action_prog_ids(act.net.a, act.net.if_a, 10) == [act_id]

    # Traffic still goes through clsd's action.
    udp_exchange(act.net.b, act.net.a, ADDR_A, {7001: 3})
    assert read_counter(prog_map_id(act_id, "counters"))[0] == 4


def test_restart_adopts_the_actions_and_their_maps(act):
    r = put(act, {"ingress": [udp_only(act, [{"object": act.custom, "program": "count_by_cb"}])]})
    st = status_of(r.json, "udp")
    udp_exchange(act.net.b, act.net.a, ADDR_A, {7001: 4})
    with tc_monitor(act.net.a) as events:
        act.clsd.restart()
    log = act.clsd.log_this_run()
    assert "adopted program count_by_cb as an action (id %d" % st["actions"][0]["id"] in log, log
    assert "adopted program match_udp (id %d" % st["id"] in log, log
    assert "loaded program" not in log, log
    assert not [l for l in events if "filter" in l], events  # nothing detached or attached again
    after = status_of(act.api.get_classifier(act.net.if_a).json, "udp")
    assert after["actions"][0]["id"] == st["actions"][0]["id"] and after["attached"]
    udp_exchange(act.net.b, act.net.a, ADDR_A, {7001: 2})
    r = act.api.get("/ifaces/%s/classifier/maps/per_port" % act.net.if_a)
    assert {e["key"]: e["value"] for e in r.json["entries"]} == {7001: 6, 40000: 2}


def test_an_actions_map_metrics_show_in_the_scrape(act):
    metrics = [{"map": "per_port", "name": "udp_port_packets_total", "type": "counter",
                "labels": [{"name": "port", "from": "key"}]}]
    put(act, {"ingress": [udp_only(act, [{"object": act.custom, "program": "count_by_cb"}], metrics=metrics)]})
    udp_exchange(act.net.b, act.net.a, ADDR_A, {7001: 3})
    samples, types = parse_exposition(scrape(act.api))
    labels = dict(ifname=act.net.if_a, name="udp", action="1", program="count_by_cb")
    assert value(samples, "clsd_action_attached", **labels) == 1
    assert value(samples, "clsd_action_packets_total", **labels) == 4
    assert value(samples, "clsd_action_drops_total", **labels) == 0
    assert types["clsd_action_packets_total"] == "counter"
    # A metric the filter declares over its action's map.
    assert value(samples, "udp_port_packets_total", ifname=act.net.if_a, port="7001") == 3


def test_actions_need_classic_mode_and_programs_tc_can_run(act):
    doc = {"ingress": [udp_only(act, [{"object": act.count}], direct_action=True)]}
    err = assert_error(act.api.put_classifier(act.net.if_a, doc), 400, "invalid_value")
    assert "classic mode" in err["message"], err
    xdp = act.api.request("POST", "/objects", body=open(act.bpf.xdp, "rb").read(),
                          content_type="application/octet-stream").json["digest"]
    doc = {"ingress": [udp_only(act, [{"object": xdp, "program": "xdp_pass"}])]}
    err = assert_error(act.api.put_classifier(act.net.if_a, doc), 422, "wrong_program_type")
    assert "action 1" in err["message"] and "xdp" in err["message"], err
    # An object with two programs that could be the action: name one.
    doc = {"ingress": [udp_only(act, [{"object": act.custom}])]}
    err = assert_error(act.api.put_classifier(act.net.if_a, doc), 422, "program_ambiguous")
    assert "count_by_cb" in err["message"], err
    assert act.net.a.filters(act.net.if_a) == []


def test_answers_with_actions_are_as_the_spec_says(act):
    """The OpenAPI contract (test_openapi.py) for what only a kernel with act_bpf answers: a document
    with actions, its status, the kernel's filters with actions, a dry run with action programs."""
    with open(SPEC_PATH) as f:
        contract = Contract(yaml.safe_load(f), act.api)
    doc = {"ingress": [udp_only(act, [{"object": act.count}, {"object": act.custom, "program": "count_by_cb"}])]}
    assert contract.request("PUT", "/ifaces/%s/classifier" % act.net.if_a, body=doc).status == 200
    assert contract.request("GET", "/ifaces/%s/classifier" % act.net.if_a).status == 200
    assert contract.request("PUT", "/ifaces/%s/classifier?dry_run=1" % act.net.if_a, body=doc).status == 200
    r = contract.request("GET", "/ifaces")
    acts = [f["actions"] for i in r.json["ifaces"] for f in i.get("filters", []) if "actions" in f]
    assert acts and [a["name"] for a in acts[0]] == ["clsd:udp/1", "clsd:udp/2"], r.json
    assert contract.request("GET", "/ifaces/%s/classifier/maps" % act.net.if_a).status == 200


def test_a_hog_with_actions_is_applied_and_checked(act, clsd_factory, workdir):
    """A hog names its objects by path, the actions' too; clsd --check validates them on this kernel."""
    hogs_dir = os.path.join(workdir, "hogs.d")
    os.makedirs(hogs_dir, exist_ok=True)
    hog = {"ifname": act.net.if_a, "ingress": [
        filt("udp", act.bpf.custom_sec, program="match_udp", priority=10,
             actions=[{"object": act.bpf.custom_sec, "program": "count_by_cb"}, {"object": act.bpf.drop_port}])]}
    with open(os.path.join(hogs_dir, "va.json"), "w") as f:
        json.dump(hog, f)
    p = run([CLSD, "--hogs-dir", hogs_dir, "--check"], check=False)
    assert p.returncode == 0 and "1 hog(s), all valid" in p.stdout, (p.stdout, p.stderr)
    act.clsd.stop()
    c = clsd_factory(act.net.a, name="hogged", args=("--hogs-dir", hogs_dir))
    body = c.api.get_classifier(act.net.if_a).json
    st = status_of(body, "udp")
    assert body["source"] == "hog" and st["attached"], body
    assert [a["program"] for a in st["actions"]] == ["count_by_cb", "drop_port"]
    assert udp_exchange(act.net.b, act.net.a, ADDR_A, {9: 2, 7001: 1}) == {9: 0, 7001: 1}
    # A hog whose action object is not a path is refused, naming the field.
    hog["ingress"][0]["actions"][1]["object"] = file_digest(act.bpf.drop_port)
    with open(os.path.join(hogs_dir, "va.json"), "w") as f:
        json.dump(hog, f)
    p = run([CLSD, "--hogs-dir", hogs_dir, "--check"], check=False)
    assert p.returncode == 1 and "ingress[0].actions[1].object: a hog names its object by absolute path" in p.stderr, p
