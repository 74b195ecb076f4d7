"""Maps shared or each filter's own: "maps": {"NAME": {"shared": false}} gives every filter (interface
and hook) a program instance with its own NAME, while the program's other maps stay one table for all of
them; loads, restarts, scope changes and /metrics' labels follow."""

import json
import os
import signal


from harness.api import assert_error
from harness.base import ADDR_A, filt, run, status_of, wait_for
from harness.daemon import write_hog
from harness.metrics import parse_exposition, scrape
from harness.observe import ping, prog_map_id, read_counter
from harness.policies import clsd_filters, policy, put_policy, results, veths

OWN = {"counters": {"shared": False}}
METRICS = [{"map": "counters", "name": "scope_packets_total", "type": "counter", "value": "packets"},
           {"map": "v2_packets", "name": "scope_v2_total", "type": "counter"}]


def u64(map_id):
    """A map of one u64 at key 0 (count-v2's v2_packets)."""
    out = run(["bpftool", "-j", "map", "lookup", "id", str(map_id), "key", "0", "0", "0", "0"]).stdout
    v = json.loads(out)
    if "formatted" in v:
        return int(v["formatted"]["value"])
    return int.from_bytes(bytes(int(b, 16) for b in v["value"]), "little")


def both_hooks(obj, maps=None, **kw):
    extra = {"maps": maps} if maps else {}
    extra.update(kw)
    return {"ingress": [filt("cin", obj, priority=10, **extra)], "egress": [filt("cout", obj, priority=10, **extra)]}


def test_own_maps_count_each_hook_apart_and_shared_ones_stay_one(net, clsd, bpf):
    net.quiet()
    api = clsd.api
    r = api.put_classifier(net.if_a, both_hooks(bpf.count_v2, OWN))
    assert r.status == 200, r
    assert r.json["document"]["ingress"][0]["maps"] == {"counters": {"reuse": True, "shared": False}}
    ing, eg = status_of(r.json, "cin"), status_of(r.json, "cout", "egress")
    # Two instances of the program: one load each, each with its own counters.
    assert ing["id"] != eg["id"]
    assert prog_map_id(ing["id"], "counters") != prog_map_id(eg["id"], "counters")
    # v2_packets is not named: every instance shares one.
    assert prog_map_id(ing["id"], "v2_packets") == prog_map_id(eg["id"], "v2_packets")
    assert clsd.log_this_run().count("loaded program count_pkts, instance ") == 2
    ping(net.b, ADDR_A, count=10)
    in_pkts = read_counter(prog_map_id(ing["id"], "counters"))[0]
    out_pkts = read_counter(prog_map_id(eg["id"], "counters"))[0]
    shared = u64(prog_map_id(ing["id"], "v2_packets"))
    assert in_pkts >= 10 and out_pkts >= 10
    assert shared == in_pkts + out_pkts


def test_by_default_one_program_and_one_table_serve_every_hook(net, clsd, bpf):
    net.quiet()
    r = clsd.api.put_classifier(net.if_a, both_hooks(bpf.count_v2))
    assert r.status == 200, r
    ing, eg = status_of(r.json, "cin"), status_of(r.json, "cout", "egress")
    assert ing["id"] == eg["id"]
    assert clsd.log_this_run().count("loaded program count_pkts") == 1


def test_a_policy_gives_each_interface_its_own_counters_and_metrics_label_them_honestly(clsd, api, bpf, net):
    names = veths(net.a, "mo", 3)
    f = filt("c", bpf.count_v2, priority=10, maps=OWN, metrics=METRICS)
    r = put_policy(api, "own", policy({"ifname": ["mo*"]}, ingress=[f]))
    assert r.status == 200, r
    assert all(x["state"] == "configured" for x in results(r).values()), r.json
    ids = {d: clsd_filters(net.a, d)[0].id for d in names}
    assert len(set(ids.values())) == 3
    # The instances' loads waited their turn and went on in the worker of the load before them.
    assert "goes on with the next load of sha256:" in clsd.log_this_run()
    counters = {prog_map_id(i, "counters") for i in ids.values()}
    shared = {prog_map_id(i, "v2_packets") for i in ids.values()}
    assert len(counters) == 3 and len(shared) == 1
    samples, _ = parse_exposition(scrape(api))
    own = samples["scope_packets_total"]
    # One series per interface, each labelled with its own interface.
    assert sorted(lab["ifname"] for lab, _ in own) == sorted(names), own
    # The shared table is one series; the interfaces it is shared by differ, so ifname reads "*".
    (one,) = samples["scope_v2_total"]
    assert one[0]["ifname"] == "*" and one[0]["direction"] == "ingress", one


def test_ingress_and_egress_sharing_a_map_are_not_labelled_ingress(net, clsd, bpf):
    f = {"metrics": METRICS}
    r = clsd.api.put_classifier(net.if_a, both_hooks(bpf.count_v2, **f))
    assert r.status == 200, r
    samples, _ = parse_exposition(scrape(clsd.api))
    (one,) = samples["scope_packets_total"]
    assert one[0]["direction"] == "*" and one[0]["ifname"] == net.if_a, one


def test_own_instances_come_back_after_a_restart_without_a_load(net, clsd_factory, bpf):
    c = clsd_factory(net.a)
    names = veths(net.a, "mr", 2)
    f, g = (filt(n, bpf.count_v2, priority=10, maps=OWN) for n in ("cin", "cout"))
    r = put_policy(c.api, "keep", policy({"ifname": ["mr*"]}, ingress=[f], egress=[g]))
    assert r.status == 200, r
    ids = {(d, h): clsd_filters(net.a, d, h)[0].id for d in names for h in ("ingress", "egress")}
    assert len(set(ids.values())) == 4
    pins = sorted(os.listdir(os.path.join(c.bpffs_dir, "progs")))
    assert len([p for p in pins if p.count("-") == 2]) == 4, pins
    c.stop(signal.SIGTERM)
    c.start()
    wait_for(lambda: c.api.get("/policies/keep").json["summary"]["configured"] == 2, timeout=5)
    assert {(d, h): clsd_filters(net.a, d, h)[0].id for d in names for h in ("ingress", "egress")} == ids
    this_run = c.log().split("listening")[-1]
    assert "loaded program" not in this_run
    assert sorted(os.listdir(os.path.join(c.bpffs_dir, "progs"))) == pins


def test_a_map_that_changes_scope_starts_empty(net, clsd, bpf):
    net.quiet()
    api = clsd.api
    r = api.put_classifier(net.if_a, {"ingress": [filt("c", bpf.count_v2, priority=10)]})
    old = status_of(r.json, "c")
    v2 = prog_map_id(old["id"], "v2_packets")
    ping(net.b, ADDR_A, count=5)
    r = api.put_classifier(net.if_a, {"ingress": [filt("c", bpf.count_v2, priority=10, maps=OWN)]})
    assert r.status == 200, r
    new = status_of(r.json, "c")
    assert new["id"] != old["id"]
    assert read_counter(prog_map_id(new["id"], "counters"))[0] == 0
    # the map not named keeps its contents
    assert prog_map_id(new["id"], "v2_packets") == v2
    assert "filter c: map counters starts empty (now the filter's own)" in clsd.log_this_run()
    ping(net.b, ADDR_A, count=5)
    r = api.put_classifier(net.if_a, {"ingress": [filt("c", bpf.count_v2, priority=10)]})
    back = status_of(r.json, "c")
    assert read_counter(prog_map_id(back["id"], "counters"))[0] == 0
    assert "filter c: map counters starts empty (now shared)" in clsd.log_this_run()


def test_shared_is_checked_strictly_and_nothing_is_lost(net, clsd, bpf):
    api = clsd.api
    assert api.put_classifier(net.if_a, {"ingress": [filt("c", bpf.count, priority=10)]}).status == 200
    before = api.get_classifier(net.if_a).json["document"]
    for maps, code in (({"counters": {"shared": 1}}, "wrong_type"), ({"counters": {"shared": None}}, "wrong_type"),
                       ({"counters": {"shared": False, "own": 1}}, "unknown_field")):
        r = api.put_classifier(net.if_a, {"ingress": [filt("c", bpf.count, maps=maps)]})
        assert_error(r, 400, code)
        assert "ingress[0].maps.counters" in r.json["error"]["message"], r.json
    r = api.put_classifier(net.if_a, {"ingress": [filt("c", bpf.count, maps={"nope": {"shared": False}})]})
    assert_error(r, 422, "map_not_found")
    assert api.get_classifier(net.if_a).json["document"] == before


def test_a_hog_that_turns_its_map_its_own_while_clsd_is_stopped_is_not_given_the_shared_program(
        net, clsd_factory, bpf, workdir):
    """The store remembers which instance a filter's program was: a hog edited between two runs from
    shared maps to a map of its own does not adopt the shared program attached (its counters would
    still be everyone's) but loads its own instance."""
    net.quiet()
    hogs_dir = os.path.join(workdir, "hogs.d")
    write_hog(hogs_dir, "a.json", net.if_a, ingress=[filt("c", bpf.count_v2, priority=10)])
    c = clsd_factory(net.a, args=("--hogs-dir", hogs_dir))
    wait_for(lambda: c.api.get_classifier(net.if_a).json.get("state") == "configured", timeout=5)
    shared = net.a.filter_at(net.if_a, 10).id
    ping(net.b, ADDR_A, count=5)
    c.stop(signal.SIGTERM)
    write_hog(hogs_dir, "a.json", net.if_a, ingress=[filt("c", bpf.count_v2, priority=10, maps=OWN)])
    c.start()
    wait_for(lambda: c.api.get_classifier(net.if_a).json.get("state") == "configured", timeout=5)
    own = net.a.filter_at(net.if_a, 10).id
    assert own != shared
    assert "loaded program count_pkts, instance " in c.log().split("listening")[-1]
    assert read_counter(prog_map_id(own, "counters"))[0] == 0
