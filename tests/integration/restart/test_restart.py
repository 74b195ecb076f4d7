"""Stopping clsd leaves the kernel as it is; starting again adopts what is attached instead of reloading,
so that maps keep their state; foreign filters are never touched."""

import signal

import pytest

from harness.base import ADDR_A, filt, status_of, wait_for
from harness.observe import ping, prog_map_id, prog_show, read_counter


@pytest.mark.vm
def test_restart_adopts_attached_programs_and_keeps_counting(net, clsd_factory, bpf):
    c = clsd_factory(net.a)
    digest = c.api.upload_ok(bpf.count)
    r = c.api.put_classifier(net.if_a, {"ingress": [filt("web", digest, priority=10)]})
    assert r.status == 200, r
    st = status_of(r.json, "web")
    counters = prog_map_id(st["id"], "counters")
    ping(net.b, ADDR_A, count=10)
    before_stop, _ = read_counter(counters)
    assert before_stop >= 10

    assert c.stop(signal.SIGTERM) == 0
    f = net.a.filter_at(net.if_a, 10)
    assert f is not None, "SIGTERM detached the filter"
    assert (f.id, f.tag, f.name) == (st["id"], st["tag"], "clsd:web")
    # With clsd gone the program still runs.
    ping(net.b, ADDR_A, count=10)
    while_stopped, _ = read_counter(counters)
    assert while_stopped >= before_stop + 10

    c.start()
    log = c.log_this_run()
    assert "adopted program count_pkts (id %d" % st["id"] in log, log
    assert "loaded program count_pkts" not in log, log
    f = net.a.filter_at(net.if_a, 10)
    assert (f.id, f.handle) == (st["id"], st["handle"])
    g = c.api.get_classifier(net.if_a)
    assert g.status == 200
    assert g.json["state"] == "configured"
    assert g.json["generation"] == r.json["generation"]
    gs = status_of(g.json, "web")
    assert gs["attached"] is True and gs["id"] == st["id"] and gs["tag"] == st["tag"]

    # The same map, not reset, and still counting.
    assert prog_map_id(gs["id"], "counters") == counters
    after_start, _ = read_counter(counters)
    assert after_start >= while_stopped
    ping(net.b, ADDR_A, count=10)
    assert read_counter(counters)[0] >= while_stopped + 10


def test_sigint_also_leaves_programs_attached(net, clsd_factory, bpf):
    c = clsd_factory(net.a)
    r = c.api.put_classifier(net.if_a, {"egress": [filt("out", bpf.count)]})
    assert r.status == 200, r
    assert c.stop(signal.SIGINT) == 0
    assert net.a.filter_at(net.if_a, 1, "egress").id == status_of(r.json, "out", "egress")["id"]


def test_foreign_filter_survives_put_restart_delete(net, clsd_factory, bpf):
    foreign = net.a.add_foreign_filter(net.if_a, 20, bpf.drop_port)
    same = lambda f: f is not None and (f.id, f.pref, f.name, f.tag) == (
        foreign.id, foreign.pref, foreign.name, foreign.tag)

    c = clsd_factory(net.a)
    assert same(net.a.filter_at(net.if_a, 20))
    digest = c.api.upload_ok(bpf.count)
    r = c.api.put_classifier(net.if_a, {"ingress": [filt("web", digest, priority=10)]})
    assert r.status == 200, r
    assert same(net.a.filter_at(net.if_a, 20)), net.a.filters(net.if_a)

    owners = {f["pref"]: f["owner"] for i in c.api.get("/ifaces").json["ifaces"] if i["ifname"] == net.if_a
              for f in i["filters"]}
    assert owners == {10: "clsd", 20: "foreign"}

    c.restart()
    assert same(net.a.filter_at(net.if_a, 20)), net.a.filters(net.if_a)
    assert net.a.filter_at(net.if_a, 10).id == status_of(r.json, "web")["id"]

    assert c.api.delete_classifier(net.if_a).status == 204
    assert [f.pref for f in net.a.filters(net.if_a)] == [20]
    assert same(net.a.filter_at(net.if_a, 20))
    assert net.a.has_clsact(net.if_a)


@pytest.mark.vm
def test_start_restores_a_filter_removed_while_stopped(net, clsd_factory, bpf):
    c = clsd_factory(net.a)
    r = c.api.put_classifier(net.if_a, {"ingress": [filt("web", bpf.count, priority=10)]})
    assert r.status == 200, r
    assert c.stop() == 0
    net.a.run("tc", "filter", "del", "dev", net.if_a, "ingress", "pref", "10")
    assert net.a.filter_at(net.if_a, 10) is None

    c.start()
    f = net.a.filter_at(net.if_a, 10)
    assert f is not None and f.name == "clsd:web" and f.prog_name == "count_pkts"
    g = c.api.get_classifier(net.if_a).json
    assert g["state"] == "configured"
    assert status_of(g, "web")["attached"] is True and status_of(g, "web")["id"] == f.id


def test_sighup_reconciles_every_interface(net, clsd_factory, bpf):
    c = clsd_factory(net.a)
    r = c.api.put_classifier(net.if_a, {"ingress": [filt("web", bpf.count, priority=10)]})
    assert r.status == 200, r
    net.a.run("tc", "filter", "del", "dev", net.if_a, "ingress", "pref", "10")
    c.proc.send_signal(signal.SIGHUP)
    f = wait_for(lambda: net.a.filter_at(net.if_a, 10), timeout=2, what="the filter back after SIGHUP")
    assert f.name == "clsd:web"
    assert c.api.healthy()


def test_restart_with_the_interface_gone_is_pending(net, clsd_factory, bpf):
    net.a.add_veth("vx0", "vx1")
    c = clsd_factory(net.a)
    r = c.api.put_classifier("vx0", {"ingress": [filt("web", bpf.count)]})
    assert r.status == 200, r
    assert c.stop() == 0
    net.a.run("ip", "link", "del", "vx0")
    c.start()
    g = c.api.get_classifier("vx0")
    assert g.status == 200 and g.json["state"] == "pending", g
    net.a.add_veth("vx0", "vx1")
    f = wait_for(lambda: net.a.filter_at("vx0", 1), timeout=2, what="the filter on the new vx0")
    assert f.name == "clsd:web"


def test_interface_removed_while_running_goes_pending_and_comes_back(net, clsd_factory, bpf):
    net.a.add_veth("vx0", "vx1")
    c = clsd_factory(net.a)
    r = c.api.put_classifier("vx0", {"ingress": [filt("web", bpf.count)]})
    assert r.status == 200, r
    net.a.run("ip", "link", "del", "vx0")
    wait_for(lambda: c.api.get_classifier("vx0").json["state"] == "pending", timeout=2, what="pending")
    assert c.api.get_classifier("vx0").json["ifindex"] is None
    net.a.add_veth("vx0", "vx1")
    f = wait_for(lambda: net.a.filter_at("vx0", 1), timeout=2, what="the filter on the new vx0")
    g = c.api.get_classifier("vx0").json
    assert g["state"] == "configured" and status_of(g, "web")["id"] == f.id
    # The program was kept loaded: the same id as before the interface went.
    assert f.id == status_of(r.json, "web")["id"]
    assert prog_show(f.id)["name"] == "count_pkts"


def test_start_with_the_priority_taken_is_failed_and_leaves_the_foreign_filter(net, clsd_factory, bpf):
    c = clsd_factory(net.a)
    assert c.api.put_classifier(net.if_a, {"ingress": [filt("web", bpf.count, priority=10)]}).status == 200
    assert c.stop() == 0
    net.a.run("tc", "filter", "del", "dev", net.if_a, "ingress", "pref", "10")
    foreign = net.a.add_foreign_filter(net.if_a, 10, bpf.drop_port)

    c.start()
    g = c.api.get_classifier(net.if_a)
    assert g.status == 200
    assert g.json["state"] == "failed"
    assert g.json["error"]["code"] == "priority_taken" and g.json["error"]["message"]
    assert status_of(g.json, "web")["attached"] is False
    f = net.a.filter_at(net.if_a, 10)
    assert (f.id, f.name, f.tag) == (foreign.id, foreign.name, foreign.tag)
    va = [i for i in c.api.get("/ifaces").json["ifaces"] if i["ifname"] == net.if_a][0]
    assert va["state"] == "failed"
    assert [x["owner"] for x in va["filters"]] == ["foreign"]


def test_same_tag_other_object_is_attached_and_not_adopted_for_the_other(net, clsd, bpf):
    """Two objects with the same instructions share a program tag; clsd tells them apart by id."""
    api = clsd.api
    narrow, wide = api.upload_ok(bpf.count), api.upload_ok(bpf.count_wide)
    assert narrow != wide
    r = api.put_classifier(net.if_a, {"ingress": [filt("c", narrow, priority=10)]})
    old = status_of(r.json, "c")
    # The wide object's map has more entries: it cannot take over the attached one's.
    r = api.put_classifier(net.if_a, {"ingress": [filt("c", wide, priority=10)]})
    assert r.status == 422 and r.json["error"]["code"] == "map_incompatible", r
    assert net.a.filter_at(net.if_a, 10).id == old["id"]
    wide_filter = dict(filt("c", wide, priority=10), maps={"counters": {"reuse": False}})
    r = api.put_classifier(net.if_a, {"ingress": [wide_filter]})
    new = status_of(r.json, "c")
    assert new["tag"] == old["tag"]  # same instructions
    assert new["id"] != old["id"], "the new object's program was never attached"
    assert net.a.filter_at(net.if_a, 10).id == new["id"]
    assert new["attached"] is True
    # after a restart the wide object's program is adopted, the narrow one is not attached anywhere
    assert clsd.stop() == 0
    clsd.start()
    st = status_of(api.get_classifier(net.if_a).json, "c")
    assert st["id"] == new["id"] and st["attached"] is True
    assert "adopted program count_pkts (id %d" % new["id"] in clsd.log_this_run()
