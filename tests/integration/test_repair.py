"""Drift repair: clsd follows tc events (RTNLGRP_TC) and puts its filters back at once."""
import statistics
import time

from conftest import filt, status_of, wait_for


def _repair_ms(net, check):
    t0 = time.monotonic()
    wait_for(check, timeout=2, interval=0.001, what="the repair")
    return (time.monotonic() - t0) * 1000


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


def test_clsact_deleted_is_put_back_with_every_filter(api, bpf, net):
    doc = {"ingress": [filt("a", bpf.count, priority=10)], "egress": [filt("b", bpf.count, priority=3)]}
    assert api.put_classifier(net.if_a, doc).status == 200
    net.a.run("tc", "qdisc", "del", "dev", net.if_a, "clsact")
    wait_for(lambda: net.a.filter_at(net.if_a, 10) and net.a.filter_at(net.if_a, 3, "egress"), timeout=2,
             interval=0.005, what="clsact and both filters back")
    g = api.get_classifier(net.if_a).json
    assert g["repairs"] >= 1 and "clsact qdisc missing" in g["last_repair"]["what"], g


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
