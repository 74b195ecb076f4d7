"""Drift repair: clsd follows tc events (RTNLGRP_TC) and puts its filters back at once."""
import statistics
import time

import pytest

from harness.base import filt, status_of, wait_for


def _repair_ms(net, check):
    t0 = time.monotonic()
    wait_for(check, timeout=2, interval=0.001, what="the repair")
    return (time.monotonic() - t0) * 1000


@pytest.mark.vm
def test_filter_deleted_by_hand_is_put_back(api, bpf, net):
    r = api.put_classifier(net.if_a, {"ingress": [filt("web", bpf.count, priority=10)]})
    want = status_of(r.json, "web")["id"]
    assert api.get_classifier(net.if_a).json["repairs"] == 0
    latencies = []
    for _ in range(5):
        net.a.run("tc", "filter", "del", "dev", net.if_a, "ingress", "pref", "10")
        latencies.append(_repair_ms(net, lambda: (net.a.filter_at(net.if_a, 10) or None) and
                                    net.a.filter_at(net.if_a, 10).id == want))
    g = api.get_classifier(net.if_a).json
    assert g["repairs"] == 5, g
    assert "ingress pref 10 missing" in g["last_repair"]["what"]
    assert status_of(g, "web")["attached"] is True
    print("repair latency ms: median %.1f, worst %.1f" % (statistics.median(latencies), max(latencies)))
    assert max(latencies) < 1000


@pytest.mark.vm
def test_clsact_deleted_is_put_back_with_every_filter(api, bpf, net):
    doc = {"ingress": [filt("a", bpf.count, priority=10)], "egress": [filt("b", bpf.count, priority=3)]}
    assert api.put_classifier(net.if_a, doc).status == 200
    net.a.run("tc", "qdisc", "del", "dev", net.if_a, "clsact")
    wait_for(lambda: net.a.filter_at(net.if_a, 10) and net.a.filter_at(net.if_a, 3, "egress"), timeout=2,
             interval=0.005, what="clsact and both filters back")
    g = api.get_classifier(net.if_a).json
    assert g["repairs"] >= 1 and "clsact qdisc missing" in g["last_repair"]["what"], g


@pytest.mark.vm
def test_filter_replaced_by_another_tool_is_reported_not_overwritten(api, bpf, net):
    """tc replaces clsd's filter in place with one of its own name: the pref now holds a filter clsd
    does not own, so clsd reports the conflict instead of overwriting it."""
    assert api.put_classifier(net.if_a, {"ingress": [filt("web", bpf.count, priority=10)]}).status == 200
    net.a.run("tc", "filter", "replace", "dev", net.if_a, "ingress", "pref", "10", "handle", "1", "bpf", "obj",
              bpf.drop_port, "sec", "tc", "da")
    theirs = net.a.filter_at(net.if_a, 10)
    g = wait_for(lambda: (lambda j: j if j["state"] == "failed" else None)(api.get_classifier(net.if_a).json),
                 timeout=2, interval=0.005, what="the document to turn failed")
    assert g["error"]["code"] == "priority_taken", g
    assert net.a.filter_at(net.if_a, 10).id == theirs.id


def test_foreign_changes_elsewhere_are_not_repairs(api, bpf, net):
    assert api.put_classifier(net.if_a, {"ingress": [filt("web", bpf.count, priority=10)]}).status == 200
    net.a.add_foreign_filter(net.if_a, 20, bpf.drop_port)
    net.a.run("tc", "filter", "del", "dev", net.if_a, "ingress", "pref", "20")
    time.sleep(0.2)
    assert api.get_classifier(net.if_a).json["repairs"] == 0
    assert net.a.filter_at(net.if_a, 20) is None  # a foreign filter is never put back either


def test_periodic_resync_repairs_without_events(net, clsd_factory, bpf):
    # With events lost (simulated: clsd stopped while the filter goes), the resync timer repairs.
    c = clsd_factory(net.a, args=["--resync-interval", "1"])
    assert c.api.put_classifier(net.if_a, {"ingress": [filt("web", bpf.count, priority=10)]}).status == 200
    c.proc.send_signal(__import__("signal").SIGSTOP)
    try:
        net.a.run("tc", "filter", "del", "dev", net.if_a, "ingress", "pref", "10")
    finally:
        c.proc.send_signal(__import__("signal").SIGCONT)
    wait_for(lambda: net.a.filter_at(net.if_a, 10), timeout=3, interval=0.02, what="the repair")


def test_a_failed_interface_backs_off_instead_of_retrying_on_every_event(net, clsd, bpf):
    """A flapping link must not make clsd reload and re-verify on every event: after a failure the
    next attempts come from a timer with backoff (1 s, 2 s, ...), and the document still gets applied
    once the cause is gone."""
    api = clsd.api
    assert api.put_classifier(net.if_a, {"ingress": [filt("web", bpf.count, priority=10)]}).status == 200
    assert clsd.stop() == 0
    net.a.run("tc", "filter", "del", "dev", net.if_a, "ingress", "pref", "10")
    foreign = net.a.add_foreign_filter(net.if_a, 10, bpf.drop_port)
    clsd.start()
    assert api.get_classifier(net.if_a).json["state"] == "failed"
    for _ in range(20):  # 40 link events in well under a second
        net.a.run("ip", "link", "set", net.if_a, "down")
        net.a.run("ip", "link", "set", net.if_a, "up")
    attempts = clsd.log_this_run().count("reconcile failed")
    assert attempts <= 3, "%d attempts for 40 link events" % attempts
    assert "next attempt in" in clsd.log_this_run()
    assert net.a.filter_at(net.if_a, 10).id == foreign.id  # never overwritten
    # the cause goes away: a retry applies the document
    net.a.run("tc", "filter", "del", "dev", net.if_a, "ingress", "pref", "10")
    wait_for(lambda: (net.a.filter_at(net.if_a, 10) or None) and net.a.filter_at(net.if_a, 10).name == "clsd:web",
             timeout=10, interval=0.05, what="the retry to apply the document")
    assert api.get_classifier(net.if_a).json["state"] == "configured"
