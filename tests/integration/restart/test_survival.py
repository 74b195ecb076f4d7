"""Restart survival without systemd: a new build of an object takes over its maps (or not, when the
document says so), programs are pinned in bpffs and taken back from there, `clsd --flush` removes only
what clsd attached, and one state directory serves one clsd. The systemd side (fd store, Type=notify,
watchdog, socket activation) is in test_systemd.py."""

import os

import pytest

from harness.api import assert_error
from harness.base import ADDR_A, CLSD, file_digest, filt, status_of
from harness.observe import ping, prog_map_id, read_counter, tc_monitor


def pin_of(clsd, obj, program="count_pkts"):
    return os.path.join(clsd.bpffs_dir, "progs", "%s-%s" % (file_digest(obj)[len("sha256:"):], program))


@pytest.mark.vm
def test_a_new_build_keeps_the_counts_of_the_one_it_replaces(net, clsd, bpf):
    api = clsd.api
    r = api.put_classifier(net.if_a, {"ingress": [filt("c", bpf.count, priority=10)]})
    assert r.status == 200, r
    old = status_of(r.json, "c")
    counters = prog_map_id(old["id"], "counters")
    ping(net.b, ADDR_A, count=10)
    before, _ = read_counter(counters)
    assert before >= 10

    r = api.put_classifier(net.if_a, {"ingress": [filt("c", bpf.count_v2, priority=10)]})
    assert r.status == 200, r
    new = status_of(r.json, "c")
    assert new["id"] != old["id"] and new["tag"] != old["tag"] and new["attached"]
    # The same map: the new program counts on from where the old one stopped.
    assert prog_map_id(new["id"], "counters") == counters
    assert read_counter(counters)[0] >= before
    ping(net.b, ADDR_A, count=10)
    assert read_counter(counters)[0] >= before + 10
    # A map the old build did not have starts empty, and only counts what came after.
    v2 = prog_map_id(new["id"], "v2_packets")
    assert v2 != counters
    assert "map counters keeps its contents: reusing map id %d" % counters in clsd.log_this_run()


def test_reuse_false_starts_the_map_empty(net, clsd, bpf):
    net.quiet()  # no IPv6 MLD report may land in the fresh map before it is read
    api = clsd.api
    old = status_of(api.put_classifier(net.if_a, {"ingress": [filt("c", bpf.count)]}).json, "c")
    counters = prog_map_id(old["id"], "counters")
    ping(net.b, ADDR_A, count=5)
    f = filt("c", bpf.count_v2, maps={"counters": {"reuse": False}})
    r = api.put_classifier(net.if_a, {"ingress": [f]})
    assert r.status == 200, r
    assert r.json["document"]["ingress"][0]["maps"] == {"counters": {"reuse": False}}
    fresh = prog_map_id(status_of(r.json, "c")["id"], "counters")
    assert fresh != counters
    assert read_counter(fresh)[0] == 0
    assert 'filter c: map counters starts empty ("reuse": false)' in clsd.log_this_run()
    # GET gives the document back as it was PUT, and it can be PUT again as it is.
    g = api.get_classifier(net.if_a)
    assert g.json["document"]["ingress"][0]["maps"] == {"counters": {"reuse": False}}
    assert api.put_classifier(net.if_a, g.json["document"]).status == 200


def test_an_incompatible_map_is_refused_and_nothing_changes(net, clsd, bpf):
    api = clsd.api
    r = api.put_classifier(net.if_a, {"ingress": [filt("c", bpf.count)]})
    before = (net.a.filter_at(net.if_a, 1).id, r.json["generation"])
    with tc_monitor(net.a) as events:
        r = api.put_classifier(net.if_a, {"ingress": [filt("c", bpf.count_wide)]})
    assert_error(r, 422, "map_incompatible")
    msg = r.json["error"]["message"]
    assert "max_entries 1" in msg and "max_entries 2" in msg and '"reuse": false' in msg, msg
    assert events == [], events
    g = api.get_classifier(net.if_a)
    assert (net.a.filter_at(net.if_a, 1).id, g.json["generation"]) == before


def test_maps_must_name_maps_of_the_object(net, clsd, bpf):
    api = clsd.api
    r = api.put_classifier(net.if_a, {"ingress": [filt("c", bpf.count, maps={"nope": {"reuse": False}})]})
    assert_error(r, 422, "map_not_found")
    assert '"nope"' in r.json["error"]["message"]
    assert api.get_classifier(net.if_a).status == 404


def test_the_maps_field_is_checked_strictly(net, clsd, bpf):
    api = clsd.api
    cases = [([], "wrong_type"), ({"counters": True}, "wrong_type"), ({"counters": {}}, "missing_field"),
             ({"counters": {"reuse": 1}}, "wrong_type"), ({"counters": {"reuse": False, "x": 1}}, "unknown_field"),
             ({"bad name!": {"reuse": False}}, "invalid_value")]
    for maps, code in cases:
        r = api.put_classifier(net.if_a, {"ingress": [filt("c", bpf.count, maps=maps)]})
        assert_error(r, 400, code)
        assert "ingress[0].maps" in r.json["error"]["message"], r.json


@pytest.mark.vm
def test_programs_are_pinned_and_taken_back_from_the_pin(net, clsd, bpf):
    """A filter removed by hand while clsd was down: the pinned program, maps and all, goes back."""
    net.quiet()  # the count must not move between the two reads
    api = clsd.api
    st = status_of(api.put_classifier(net.if_a, {"ingress": [filt("c", bpf.count, priority=10)]}).json, "c")
    pin = pin_of(clsd, bpf.count)
    assert os.path.exists(pin)
    counters = prog_map_id(st["id"], "counters")
    ping(net.b, ADDR_A, count=10)
    before, _ = read_counter(counters)
    assert clsd.stop() == 0
    f = net.a.filter_at(net.if_a, 10)
    net.a.run("tc", "filter", "del", "dev", net.if_a, "ingress", "pref", "10", "handle", hex(f.handle), "bpf")
    assert net.a.filter_at(net.if_a, 10) is None
    clsd.start()
    log = clsd.log_this_run()
    assert "adopted program count_pkts (id %d" % st["id"] in log and "from its bpffs pin" in log, log
    assert "loaded program" not in log
    assert net.a.filter_at(net.if_a, 10).id == st["id"]
    assert read_counter(counters)[0] == before
    ping(net.b, ADDR_A, count=5)
    assert read_counter(counters)[0] >= before + 5


def test_delete_unpins_and_a_stale_pin_is_swept_at_start(net, clsd, bpf):
    api = clsd.api
    api.put_classifier(net.if_a, {"ingress": [filt("c", bpf.count)]})
    api.put_classifier("lo", {"ingress": [filt("d", bpf.drop_port)]})
    assert os.path.exists(pin_of(clsd, bpf.count))
    assert api.delete_classifier(net.if_a).status == 204
    assert not os.path.exists(pin_of(clsd, bpf.count))
    drop_pin = pin_of(clsd, bpf.drop_port, "drop_port")
    assert os.path.exists(drop_pin)
    # The document goes while clsd is down: its pin is not wanted any more.
    assert clsd.stop() == 0
    for name in os.listdir(os.path.join(clsd.state_dir, "documents")):
        os.unlink(os.path.join(clsd.state_dir, "documents", name))
    clsd.start()
    assert not os.path.exists(drop_pin)
    assert "no document uses it" in clsd.log_this_run()


def test_flush_removes_only_what_clsd_attached_and_keeps_the_store(net, clsd, clsd_factory, bpf):
    api = clsd.api
    foreign = net.a.add_foreign_filter(net.if_a, 30, bpf.drop_port)
    # another clsd on the host (its own state and pins), its filter in another namespace: its filters
    # are clsd-named too, and not this clsd's to flush
    other = clsd_factory(net.b, name="other")
    assert other.api.put_classifier(net.if_b, {"ingress": [filt("o", bpf.count, priority=10)]}).status == 200
    doc = {"ingress": [filt("c", bpf.count, priority=10), filt("t", bpf.drop_port, priority=20, attach="tcx")]}
    r = api.put_classifier(net.if_a, doc)
    assert r.status == 200, r
    assert len(net.a.tcx(net.if_a)) == 1
    def flush():
        return net.a.run(CLSD, "--flush", "--state-dir", clsd.state_dir, "--bpffs-dir", clsd.bpffs_dir,
                         check=False)

    # Refused while clsd runs: it would put everything back at once.
    p = flush()
    assert p.returncode == 1 and p.stderr.count("\n") == 1 and "in use by a running clsd" in p.stderr, p
    assert net.a.filter_at(net.if_a, 10) is not None

    assert clsd.stop() == 0
    p = flush()
    assert p.returncode == 0, p
    assert "removed 1 filter(s), 1 tcx link(s) and 2 program pin(s)" in p.stdout, p.stdout
    assert net.a.filter_at(net.if_a, 10) is None and net.a.tcx(net.if_a) == []
    f = net.a.filter_at(net.if_a, 30)
    assert (f.id, f.name) == (foreign.id, foreign.name), "the foreign filter was touched"
    assert os.listdir(os.path.join(clsd.bpffs_dir, "progs")) == []
    assert net.b.filter_at(net.if_b, 10) is not None, "another clsd's filter was flushed"
    assert other.api.get_classifier(net.if_b).json["repairs"] == 0
    # The store is kept: the next start attaches the document again.
    clsd.start()
    g = api.get_classifier(net.if_a)
    assert g.json["state"] == "configured" and all(s["attached"] for s in g.json["status"]["ingress"])
    assert net.a.filter_at(net.if_a, 10) is not None and len(net.a.tcx(net.if_a)) == 1


def test_one_clsd_per_state_directory(net, clsd, bpf, workdir):
    p = net.a.run(CLSD, "--state-dir", clsd.state_dir, "--socket", os.path.join(workdir, "second.sock"),
                  "--bpffs-dir", clsd.bpffs_dir, "--hogs-dir", os.path.join(workdir, "none"), check=False)
    assert p.returncode == 1 and "in use by a running clsd" in p.stderr, p
    assert clsd.api.healthy()


def test_a_dry_run_says_what_the_put_would_say_about_maps(net, clsd, bpf):
    api = clsd.api
    api.put_classifier(net.if_a, {"ingress": [filt("c", api.upload_ok(bpf.count))]})
    wide = api.upload_ok(bpf.count_wide)
    url = "/ifaces/%s/classifier?dry_run=1" % net.if_a
    r = api.request("PUT", url, body={"ingress": [filt("c", wide)]})
    assert_error(r, 422, "map_incompatible")
    r = api.request("PUT", url, body={"ingress": [filt("c", wide, maps={"counters": {"reuse": False}})]})
    assert r.status == 200, r
    v2 = api.upload_ok(bpf.count_v2)
    assert api.request("PUT", url, body={"ingress": [filt("c", v2)]}).status == 200
    assert "starts empty" not in clsd.log_this_run()
