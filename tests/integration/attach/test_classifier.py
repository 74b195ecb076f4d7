"""PUT/GET/DELETE /ifaces/{if}/classifier and GET /ifaces against what tc, bpftool and real traffic
show."""

import os

import pytest

from harness.api import assert_error
from harness.base import ADDR_A, file_digest, filt, status_of, wait_for
from harness.observe import ping, prog_map_id, read_counter, read_u64, tc_monitor, udp_exchange


@pytest.mark.vm
def test_put_attaches_and_counts_real_packets(api, bpf, net):
    digest = api.upload_ok(bpf.count)
    r = api.put_classifier(net.if_a, {"ingress": [filt("web", digest, program="count_pkts", priority=10)]})
    assert r.status == 200, r
    body = r.json
    assert body["ifname"] == net.if_a
    assert body["state"] == "configured"
    assert body["source"] == "api"
    assert isinstance(body["generation"], int) and body["generation"] >= 1
    assert r.headers["ETag"] == '"%d"' % body["generation"]
    doc = body["document"]["ingress"]
    assert len(doc) == 1
    assert doc[0]["name"] == "web" and doc[0]["object"] == digest and doc[0]["digest"] == digest
    assert doc[0]["program"] == "count_pkts" and doc[0]["priority"] == 10 and doc[0]["direct_action"] is True
    assert body["document"]["egress"] == [] and body["status"]["egress"] == []

    st = body["status"]["ingress"][0]
    assert st["name"] == "web" and st["attached"] is True and st["program"] == "count_pkts"
    assert st["pref"] == 10
    assert isinstance(st["handle"], int) and st["handle"] > 0
    assert isinstance(st["id"], int) and st["id"] > 0
    assert isinstance(st["tag"], str) and len(st["tag"]) == 16

    # The kernel, seen by tc, agrees.
    f = net.a.filter_at(net.if_a, 10)
    assert f is not None, net.a.filters(net.if_a)
    assert f.name == "clsd:web"
    assert (f.id, f.tag, f.handle) == (st["id"], st["tag"], st["handle"])
    assert f.prog_name == "count_pkts"
    assert net.a.has_clsact(net.if_a)

    # And the program really runs on the hook: pings from b arrive on a's ingress.
    counters = prog_map_id(st["id"], "counters")
    before, _ = read_counter(counters)
    ping(net.b, ADDR_A, count=20)
    after, nbytes = read_counter(counters)
    assert after - before >= 20, (before, after)
    assert nbytes >= 20 * 84

    # GET answers the same, with the same ETag.
    g = api.get_classifier(net.if_a)
    assert g.status == 200
    assert g.headers["ETag"] == r.headers["ETag"]
    assert g.json["document"] == body["document"]
    assert status_of(g.json, "web")["id"] == st["id"]


def test_the_generation_and_etag_advance_only_when_the_document_changes(api, bpf, net):
    digest = api.upload_ok(bpf.count)
    r1 = api.put_classifier(net.if_a, {"ingress": [filt("web", digest)]})
    r2 = api.put_classifier(net.if_a, {"ingress": [filt("web", digest, priority=5)]})
    assert r1.status == 200 and r2.status == 200, (r1, r2)
    assert r2.json["generation"] == r1.json["generation"] + 1
    assert r2.headers["ETag"] == '"%d"' % r2.json["generation"]
    # The move from pref 1 to pref 5 leaves nothing behind at pref 1.
    assert [f.pref for f in net.a.filters(net.if_a)] == [5]

    # If-Match with the current generation is accepted; the same document again keeps its generation,
    # another one advances it.
    r3 = api.put_classifier(net.if_a, {"ingress": [filt("web", digest, priority=5)]},
                            headers={"If-Match": r2.headers["ETag"]})
    assert r3.status == 200, r3
    assert r3.json["generation"] == r2.json["generation"] and r3.headers["ETag"] == r2.headers["ETag"]
    r4 = api.put_classifier(net.if_a, {"ingress": [filt("web", digest, priority=6)]},
                            headers={"If-Match": r3.headers["ETag"]})
    assert r4.status == 200 and r4.json["generation"] == r3.json["generation"] + 1, r4


def test_defaults_program_priorities_direct_action(api, bpf, net):
    count, drop = api.upload_ok(bpf.count), api.upload_ok(bpf.drop_port)
    r = api.put_classifier(net.if_a, {"ingress": [filt("first", count), filt("second", drop)]})
    assert r.status == 200, r
    doc = r.json["document"]["ingress"]
    assert [(f["name"], f["program"], f["priority"], f["direct_action"]) for f in doc] == [
        ("first", "count_pkts", 1, True), ("second", "drop_port", 2, True)]
    filters = net.a.filters(net.if_a)
    assert [(f.pref, f.name, f.prog_name) for f in filters] == [
        (1, "clsd:first", "count_pkts"), (2, "clsd:second", "drop_port")]
    assert all(f.direct_action for f in filters), filters
    for f in filters:
        assert f.id == status_of(r.json, f.name[len("clsd:"):])["id"]


def test_priorities_continue_from_the_previous_one(api, bpf, net):
    count = api.upload_ok(bpf.count)
    r = api.put_classifier(net.if_a, {"ingress": [filt("a", count, priority=7), filt("b", count)],
                                      "egress": [filt("c", count)]})
    assert r.status == 200, r
    assert [f["priority"] for f in r.json["document"]["ingress"]] == [7, 8]
    assert [f.pref for f in net.a.filters(net.if_a)] == [7, 8]
    assert [f.pref for f in net.a.filters(net.if_a, "egress")] == [1]


@pytest.mark.vm
def test_direct_action_false_and_classid(api, bpf, net):
    digest = api.upload_ok(bpf.classid)
    r = api.put_classifier(net.if_a, {"egress": [filt("cls", digest, direct_action=False, classid="1:10")]})
    assert r.status == 200, r
    f = net.a.filter_at(net.if_a, 1, "egress")
    assert f is not None and f.name == "clsd:cls"
    assert not f.direct_action, f
    assert f.classid == "1:10", f
    assert r.json["document"]["egress"][0]["classid"] == "1:10"
    assert status_of(r.json, "cls", "egress")["attached"] is True


@pytest.mark.vm
def test_an_object_named_by_a_host_path_is_stored_and_pinned_by_digest(api, bpf, net):
    r = api.put_classifier(net.if_a, {"ingress": [filt("web", bpf.count, priority=3)]})
    assert r.status == 200, r
    digest = file_digest(bpf.count)
    f = r.json["document"]["ingress"][0]
    assert f["object"] == bpf.count
    assert f["digest"] == digest
    assert status_of(r.json, "web")["attached"] is True
    assert net.a.filter_at(net.if_a, 3).id == status_of(r.json, "web")["id"]
    objects = api.get("/objects").json["objects"]
    assert [o["digest"] for o in objects] == [digest]
    assert objects[0]["used_by"] == [net.if_a]


def test_an_object_path_that_names_no_file_is_404_naming_it(api, net, workdir):
    err = assert_error(api.put_classifier(net.if_a, {"ingress": [filt("web", workdir + "/nothing.o")]}),
                       404, "object_file_not_found")
    assert "nothing.o" in err["message"]


@pytest.mark.vm
def test_replace_program_keeps_pref_handle_and_hook_never_empty(api, bpf, net):
    count, drop = api.upload_ok(bpf.count), api.upload_ok(bpf.drop_port)
    r1 = api.put_classifier(net.if_a, {"ingress": [filt("web", count, priority=10)]})
    assert r1.status == 200, r1
    old = status_of(r1.json, "web")

    with tc_monitor(net.a) as events:
        r2 = api.put_classifier(net.if_a, {"ingress": [filt("web", drop, priority=10)]})
        assert r2.status == 200, r2
    new = status_of(r2.json, "web")
    assert new["attached"] is True and new["program"] == "drop_port"
    assert (new["pref"], new["handle"]) == (old["pref"], old["handle"])
    assert new["id"] != old["id"]

    ours = [l for l in events if "filter" in l and " pref 10 " in l]
    assert ours, "tc monitor saw no change at pref 10: %r" % events
    deleted = [l for l in events if l.startswith("deleted filter") and " pref 10 " in l]
    assert deleted == [], "the hook was empty for a moment: %r" % events
    assert "id %d " % new["id"] in ours[-1], events

    f = net.a.filter_at(net.if_a, 10)
    assert (f.id, f.handle, f.name, f.prog_name) == (new["id"], old["handle"], "clsd:web", "drop_port")
    assert len(net.a.filters(net.if_a)) == 1


@pytest.mark.vm
def test_a_rejected_program_leaves_the_previous_document_attached(api, bpf, net):
    count, rejected = api.upload_ok(bpf.count), api.upload_ok(bpf.rejected)
    good = {"ingress": [filt("web", count, priority=10)]}
    r1 = api.put_classifier(net.if_a, good)
    assert r1.status == 200, r1
    before_doc = api.get_classifier(net.if_a)
    before_tc = [(f.pref, f.id, f.tag, f.name) for f in net.a.filters(net.if_a)]

    bad = {"ingress": [filt("web", count, priority=10), filt("broken", rejected, priority=20)]}
    err = assert_error(api.put_classifier(net.if_a, bad), 422, "verifier_rejected")
    assert "invalid access to packet" in err.get("detail", ""), err

    after_doc = api.get_classifier(net.if_a)
    assert after_doc.status == 200
    assert after_doc.json["generation"] == before_doc.json["generation"]
    assert after_doc.headers["ETag"] == before_doc.headers["ETag"]
    assert after_doc.json["document"] == before_doc.json["document"]
    assert after_doc.json["status"] == before_doc.json["status"]
    assert [(f.pref, f.id, f.tag, f.name) for f in net.a.filters(net.if_a)] == before_tc
    assert net.a.filter_at(net.if_a, 20) is None


def test_rejected_program_on_a_new_document_leaves_no_trace(api, bpf, net):
    rejected = api.upload_ok(bpf.rejected)
    assert_error(api.put_classifier(net.if_a, {"ingress": [filt("broken", rejected)]}), 422,
                 "verifier_rejected")
    assert_error(api.get_classifier(net.if_a), 404, "document_not_found")
    assert net.a.filters(net.if_a) == []
    assert not net.a.has_clsact(net.if_a)


@pytest.mark.vm
def test_drop_port_drops_only_port_9(api, bpf, net):
    drop = api.upload_ok(bpf.drop_port)
    r = api.put_classifier(net.if_a, {"ingress": [filt("drop", drop)]})
    assert r.status == 200, r
    dropped = prog_map_id(status_of(r.json, "drop")["id"], "dropped")
    assert read_u64(dropped) == 0
    ping(net.b, ADDR_A, count=1)  # neighbours resolved before the datagrams go
    got = udp_exchange(net.b, net.a, ADDR_A, {9: 15, 7777: 15})
    assert got == {9: 0, 7777: 15}
    assert read_u64(dropped) == 15

    got6 = udp_exchange(net.b, net.a, net.addr6_a, {9: 5, 7777: 5})
    assert got6 == {9: 0, 7777: 5}
    assert read_u64(dropped) == 20

    # Without the document, port 9 arrives again.
    assert api.delete_classifier(net.if_a).status == 204
    assert udp_exchange(net.b, net.a, ADDR_A, {9: 5}) == {9: 5}


def test_pending_until_the_interface_appears(api, bpf, net):
    digest = api.upload_ok(bpf.count)
    r = api.put_classifier("late0", {"ingress": [filt("web", digest, priority=4)]})
    assert r.status == 202, r
    assert r.json["state"] == "pending"
    assert r.json["ifindex"] is None
    assert status_of(r.json, "web")["attached"] is False
    assert r.headers["ETag"] == '"%d"' % r.json["generation"]
    listed = {i["ifname"]: i for i in api.get("/ifaces").json["ifaces"]}
    assert listed["late0"]["state"] == "pending"

    net.a.add_veth("late0", "late1")
    f = wait_for(lambda: net.a.filter_at("late0", 4), timeout=2, what="the filter on late0")
    assert f.name == "clsd:web" and f.prog_name == "count_pkts"

    def configured():
        g = api.get_classifier("late0")
        return g if g.json["state"] == "configured" else None

    g = wait_for(configured, timeout=2, what="late0 configured")
    st = status_of(g.json, "web")
    assert st["attached"] is True and st["id"] == f.id
    assert g.json["ifindex"] > 0


def test_one_program_is_loaded_once_for_every_interface_that_runs_it(api, bpf, net):
    net.a.add_veth("vx0", "vx1")
    digest = api.upload_ok(bpf.count)
    doc = {"ingress": [filt("web", digest)]}
    r1 = api.put_classifier(net.if_a, doc)
    r2 = api.put_classifier("vx0", doc)
    assert r1.status == 200 and r2.status == 200, (r1, r2)
    id1, id2 = status_of(r1.json, "web")["id"], status_of(r2.json, "web")["id"]
    assert id1 == id2
    assert net.a.filter_at(net.if_a, 1).id == net.a.filter_at("vx0", 1).id == id1
    assert sorted(api.get("/objects/" + digest).json["used_by"]) == sorted([net.if_a, "vx0"])

    # Dropping one interface's document leaves the other's program attached.
    assert api.delete_classifier("vx0").status == 204
    assert net.a.filter_at(net.if_a, 1).id == id1
    assert status_of(api.get_classifier(net.if_a).json, "web")["attached"] is True


@pytest.mark.vm
def test_delete_removes_ours_and_the_clsact_it_created(api, bpf, net):
    digest = api.upload_ok(bpf.count)
    assert not net.a.has_clsact(net.if_a)
    r = api.put_classifier(net.if_a, {"ingress": [filt("a", digest)], "egress": [filt("b", digest)]})
    assert r.status == 200, r
    assert net.a.has_clsact(net.if_a)
    d = api.delete_classifier(net.if_a)
    assert d.status == 204, d
    assert d.body == b""
    assert net.a.filters(net.if_a) == [] and net.a.filters(net.if_a, "egress") == []
    assert not net.a.has_clsact(net.if_a), net.a.qdiscs(net.if_a)
    assert_error(api.get_classifier(net.if_a), 404, "document_not_found")
    assert_error(api.delete_classifier(net.if_a), 404, "document_not_found")


def test_delete_keeps_foreign_filters_and_their_clsact(api, bpf, net):
    digest = api.upload_ok(bpf.count)
    r = api.put_classifier(net.if_a, {"ingress": [filt("web", digest, priority=10)]})
    assert r.status == 200, r
    # clsd created the clsact; a foreign filter comes to use it too.
    foreign = net.a.add_foreign_filter(net.if_a, 20, bpf.drop_port)
    assert api.delete_classifier(net.if_a).status == 204
    left = net.a.filters(net.if_a)
    assert [(f.pref, f.id, f.name) for f in left] == [(20, foreign.id, foreign.name)]
    assert net.a.has_clsact(net.if_a)


def test_delete_keeps_a_clsact_it_did_not_create(api, bpf, net):
    net.a.run("tc", "qdisc", "add", "dev", net.if_a, "clsact")
    digest = api.upload_ok(bpf.count)
    assert api.put_classifier(net.if_a, {"ingress": [filt("web", digest)]}).status == 200
    assert api.delete_classifier(net.if_a).status == 204
    assert net.a.filters(net.if_a) == []
    assert net.a.has_clsact(net.if_a), net.a.qdiscs(net.if_a)


def test_empty_document_removes_our_filters(api, bpf, net):
    digest = api.upload_ok(bpf.count)
    assert api.put_classifier(net.if_a, {"ingress": [filt("a", digest), filt("b", digest)]}).status == 200
    assert len(net.a.filters(net.if_a)) == 2
    r = api.put_classifier(net.if_a, {"ingress": [filt("b", digest, priority=2)]})
    assert r.status == 200, r
    assert [(f.pref, f.name) for f in net.a.filters(net.if_a)] == [(2, "clsd:b")]
    r = api.put_classifier(net.if_a, {})
    assert r.status == 200, r
    assert r.json["document"] == {"ingress": [], "egress": []}
    assert net.a.filters(net.if_a) == []


def test_ifaces_lists_every_interface_with_owners(api, bpf, net):
    digest = api.upload_ok(bpf.count)
    r = api.put_classifier(net.if_a, {"ingress": [filt("web", digest, priority=10)]})
    assert r.status == 200, r
    foreign = net.a.add_foreign_filter(net.if_a, 20, bpf.drop_port)
    net.a.add_veth("vx0", "vx1")

    listed = api.get("/ifaces")
    assert listed.status == 200
    ifaces = {i["ifname"]: i for i in listed.json["ifaces"]}
    assert sorted(ifaces) == sorted(net.a.link_names())
    assert {"lo", net.if_a, "vx0", "vx1"} <= set(ifaces)

    va = ifaces[net.if_a]
    assert va["state"] == "configured" and va["generation"] == r.json["generation"]
    by_pref = {f["pref"]: f for f in va["filters"]}
    assert set(by_pref) == {10, 20}
    ours, theirs = by_pref[10], by_pref[20]
    assert ours["owner"] == "clsd" and ours["name"] == "clsd:web" and ours["direction"] == "ingress"
    assert ours["id"] == status_of(r.json, "web")["id"] and ours["kind"] == "bpf"
    assert ours["direct_action"] is True
    assert theirs["owner"] == "foreign" and theirs["id"] == foreign.id and theirs["name"] == foreign.name
    assert theirs["tag"] == foreign.tag

    assert ifaces["lo"]["state"] == "unmanaged" and ifaces["lo"]["filters"] == []
    assert "generation" not in ifaces["lo"]
    assert ifaces["vx0"]["ifindex"] > 0


@pytest.mark.vm
def test_an_egress_filter_counts_outgoing_packets(api, bpf, net):
    r = api.put_classifier(net.if_a, {"egress": [filt("out", bpf.count)]})
    assert r.status == 200, r
    st = status_of(r.json, "out", "egress")
    assert st["attached"] is True
    f = net.a.filter_at(net.if_a, 1, "egress")
    assert f.id == st["id"] and f.name == "clsd:out"
    assert net.a.filters(net.if_a) == []
    counters = prog_map_id(st["id"], "counters")
    before, _ = read_counter(counters)
    ping(net.b, ADDR_A, count=10)  # the echo replies leave a through egress
    assert read_counter(counters)[0] - before >= 10


def test_same_document_again_changes_nothing_in_the_kernel(api, bpf, net):
    doc = {"ingress": [filt("web", bpf.count, priority=10)], "egress": [filt("cls", bpf.classid, classid="1:10",
                                                                          direct_action=False)]}
    r1 = api.put_classifier(net.if_a, doc)
    assert r1.status == 200, r1
    with tc_monitor(net.a) as events:
        r2 = api.put_classifier(net.if_a, doc)
        assert r2.status == 200, r2
    assert [l for l in events if "filter" in l or "qdisc" in l] == [], events
    assert r2.json["generation"] == r1.json["generation"]  # the same document: the same generation
    assert r2.json["status"] == r1.json["status"]


def test_status_is_read_from_the_kernel(api, bpf, net):
    r = api.put_classifier(net.if_a, {"ingress": [filt("web", bpf.count, priority=10)]})
    assert r.status == 200, r
    # Another tool swaps clsd's filter for its own (clsd repairs deletions at once, but never
    # overwrites a filter it does not own): the status says what the kernel has, not what was sent.
    net.a.run("tc", "filter", "replace", "dev", net.if_a, "ingress", "pref", "10", "handle", "1", "bpf", "obj",
              bpf.drop_port, "sec", "tc", "da")
    st = status_of(api.get_classifier(net.if_a).json, "web")
    assert st["attached"] is False and st["id"] is None and st["tag"] is None
    va = [i for i in api.get("/ifaces").json["ifaces"] if i["ifname"] == net.if_a][0]
    assert [(f["pref"], f["owner"]) for f in va["filters"]] == [(10, "foreign")]


@pytest.mark.vm
def test_store_failure_rolls_the_kernel_back(clsd, bpf, net):
    api = clsd.api
    r1 = api.put_classifier(net.if_a, {"ingress": [filt("web", bpf.count, priority=10)]})
    assert r1.status == 200, r1
    before = [(f.pref, f.id, f.tag, f.name) for f in net.a.filters(net.if_a)]
    # A directory where write_file_atomic() puts its temp file (".NAME.PID.tmp") makes the save fail
    # after the kernel was changed.
    docs = os.path.join(clsd.state_dir, "documents")
    os.mkdir(os.path.join(docs, ".%s.json.%d.tmp" % (net.if_a, clsd.proc.pid)))
    bad = {"ingress": [filt("web", bpf.drop_port, priority=10), filt("more", bpf.count, priority=20)]}
    assert_error(api.put_classifier(net.if_a, bad), 500, "store_error")
    assert [(f.pref, f.id, f.tag, f.name) for f in net.a.filters(net.if_a)] == before
    g = api.get_classifier(net.if_a)
    assert g.json["generation"] == r1.json["generation"]
    assert g.json["document"] == r1.json["document"]
    assert status_of(g.json, "web")["attached"] is True

    # A new document is undone completely, clsact included.
    net.a.add_veth("vx0", "vx1")
    os.mkdir(os.path.join(docs, ".vx0.json.%d.tmp" % clsd.proc.pid))
    assert_error(api.put_classifier("vx0", {"ingress": [filt("web", bpf.count)]}), 500, "store_error")
    assert net.a.filters("vx0") == []
    assert not net.a.has_clsact("vx0")
    assert_error(api.get_classifier("vx0"), 404, "document_not_found")


def test_foreign_filters_of_other_kinds(api, bpf, net):
    net.a.run("tc", "qdisc", "add", "dev", net.if_a, "clsact")
    net.a.run("tc", "filter", "add", "dev", net.if_a, "ingress", "pref", "40", "u32", "match", "u32", "0", "0",
              "classid", "1:1")
    # A classic BPF (bytecode) filter: kind bpf, no eBPF program id, no name.
    net.a.run("tc", "filter", "add", "dev", net.if_a, "egress", "pref", "41", "bpf", "bytecode",
              "1,6 0 0 4294967295,", "classid", "1:1")
    before_in = net.a.run("tc", "filter", "show", "dev", net.if_a, "ingress").stdout
    before_eg = net.a.run("tc", "filter", "show", "dev", net.if_a, "egress").stdout

    va = [i for i in api.get("/ifaces").json["ifaces"] if i["ifname"] == net.if_a][0]
    kinds = {(f["direction"], f["pref"], f["kind"], f["owner"]) for f in va["filters"]}
    assert kinds == {("ingress", 40, "u32", "foreign"), ("egress", 41, "bpf", "foreign")}, va

    assert_error(api.put_classifier(net.if_a, {"ingress": [filt("web", bpf.count, priority=40)]}), 409,
                 "priority_taken")
    assert_error(api.put_classifier(net.if_a, {"egress": [filt("web", bpf.count, priority=41)]}), 409,
                 "priority_taken")
    r = api.put_classifier(net.if_a, {"ingress": [filt("web", bpf.count, priority=5)]})
    assert r.status == 200, r
    assert api.delete_classifier(net.if_a).status == 204
    assert net.a.run("tc", "filter", "show", "dev", net.if_a, "ingress").stdout == before_in
    assert net.a.run("tc", "filter", "show", "dev", net.if_a, "egress").stdout == before_eg


def test_answers_are_rendered_in_a_stable_form(api, bpf, net):
    digest = api.upload_ok(bpf.count)
    r = api.put_classifier(net.if_a, {"ingress": [filt("web", digest, classid="1:10")]})
    assert r.status == 200, r
    assert r.headers["Content-Type"] == "application/json"
    assert r.body.endswith(b"}\n")
    assert list(r.json) == ["ifname", "netns", "ifindex", "state", "source", "hog", "overridden", "policies", "generation",
                            "document", "status", "repairs", "last_repair"]
    assert list(r.json["document"]["ingress"][0]) == ["name", "object", "digest", "program", "priority",
                                                      "direct_action", "classid"]
    assert list(r.json["status"]["ingress"][0]) == ["name", "source", "attached", "pref", "handle", "id", "tag",
                                                    "run_count", "run_time_ns", "program", "attach"]
    assert list(api.get("/objects/" + digest).json) == ["digest", "size", "programs", "maps", "used_by"]

    head = api.request("HEAD", "/ifaces/%s/classifier" % net.if_a)
    get = api.get_classifier(net.if_a)
    assert head.status == 200 and head.body == b""
    assert head.headers["ETag"] == get.headers["ETag"]
    assert int(head.headers["Content-Length"]) == len(get.body)

    d = api.delete_classifier(net.if_a)
    assert d.status == 204 and d.body == b"" and "Content-Type" not in d.headers


def test_ifaces_order_kernel_first_then_absent_documents(api, bpf, net):
    net.a.add_veth("vx0", "vx1")
    assert api.put_classifier("zz-absent", {"ingress": [filt("web", bpf.count)]}).status == 202
    ifaces = api.get("/ifaces").json["ifaces"]
    assert [i["ifname"] for i in ifaces] == net.a.link_names() + ["zz-absent"]
    absent = ifaces[-1]
    assert absent["ifindex"] is None and absent["filters"] == [] and absent["state"] == "pending"
    assert absent["generation"] == 1
    # Trailing slash and query string: the same route.
    assert api.get("/ifaces/").json == api.get("/ifaces?x=1").json


def test_filters_run_in_priority_order(api, bpf, net):
    # The counter (pref 1) passes everything on (TC_ACT_UNSPEC), so the dropper (pref 2) still runs; the
    # same pair the other way round counts only what was not dropped.
    r = api.put_classifier(net.if_a, {"ingress": [filt("count", bpf.count), filt("drop", bpf.drop_port)]})
    assert r.status == 200, r
    counters = prog_map_id(status_of(r.json, "count")["id"], "counters")
    dropped = prog_map_id(status_of(r.json, "drop")["id"], "dropped")
    ping(net.b, ADDR_A, count=1)
    c0, d0 = read_counter(counters)[0], read_u64(dropped)
    assert udp_exchange(net.b, net.a, ADDR_A, {9: 10, 7777: 10}) == {9: 0, 7777: 10}
    assert read_u64(dropped) - d0 == 10
    assert read_counter(counters)[0] - c0 >= 21  # both ports and the marker

    r = api.put_classifier(net.if_a, {"ingress": [filt("drop", bpf.drop_port, priority=1),
                                                  filt("count", bpf.count, priority=2)]})
    assert r.status == 200, r
    assert [f.prog_name for f in net.a.filters(net.if_a)] == ["drop_port", "count_pkts"]
    counters = prog_map_id(status_of(r.json, "count")["id"], "counters")
    c0 = read_counter(counters)[0]
    assert udp_exchange(net.b, net.a, ADDR_A, {9: 10, 7777: 10}) == {9: 0, 7777: 10}
    seen = read_counter(counters)[0] - c0
    assert 11 <= seen < 21, seen  # the dropped ones never reached the counter


def test_removing_ours_keeps_a_foreign_filter_at_the_same_pref(api, bpf, net):
    """A pref can hold another handle that is not ours: removal is by (pref, protocol, handle)."""
    digest = api.upload_ok(bpf.count)
    assert api.put_classifier(net.if_a, {"ingress": [filt("c", digest, priority=5)]}).status == 200
    net.a.run("tc", "filter", "add", "dev", net.if_a, "ingress", "pref", "5", "handle", "2", "protocol", "all",
              "bpf", "obj", bpf.drop_port, "sec", "tc", "da")
    foreign = [f for f in net.a.filters(net.if_a) if f.handle == 2]
    assert len(foreign) == 1
    assert api.put_classifier(net.if_a, {"ingress": []}).status == 200
    left = net.a.filters(net.if_a)
    assert [(f.pref, f.handle, f.id) for f in left] == [(5, 2, foreign[0].id)], left
    assert api.delete_classifier(net.if_a).status == 204
    assert [(f.pref, f.handle, f.id) for f in net.a.filters(net.if_a)] == [(5, 2, foreign[0].id)]


def test_failed_put_without_old_document_keeps_filters_it_did_not_add(clsd, bpf, net):
    """A clsd filter with no document (its file was lost) is not this PUT's to remove on rollback."""
    api = clsd.api
    assert api.put_classifier(net.if_a, {"ingress": [filt("orphan", bpf.count, priority=5)]}).status == 200
    orphan = net.a.filter_at(net.if_a, 5)
    assert clsd.stop() == 0
    os.unlink(os.path.join(clsd.state_dir, "documents", net.if_a + ".json"))
    clsd.start()
    os.mkdir(os.path.join(clsd.state_dir, "documents", ".%s.json.%d.tmp" % (net.if_a, clsd.proc.pid)))
    assert_error(api.put_classifier(net.if_a, {"ingress": [filt("x", bpf.count, priority=6)]}), 500,
                 "store_error")
    assert [(f.pref, f.id, f.name) for f in net.a.filters(net.if_a)] == [(5, orphan.id, "clsd:orphan")]


def test_rollback_after_a_failed_put_over_a_failed_document(clsd, bpf, net):
    """The old document is failed (a foreign filter took its priority): rolling back must not need it
    to apply, and must not leave the new filters behind."""
    api = clsd.api
    assert api.put_classifier(net.if_a, {"ingress": [filt("a", bpf.count, priority=5)]}).status == 200
    assert clsd.stop() == 0
    net.a.run("tc", "filter", "del", "dev", net.if_a, "ingress", "pref", "5")
    net.a.add_foreign_filter(net.if_a, 5, bpf.drop_port)
    clsd.start()
    assert api.get_classifier(net.if_a).json["state"] == "failed"
    before = [(f.pref, f.id, f.name) for f in net.a.filters(net.if_a)]
    os.mkdir(os.path.join(clsd.state_dir, "documents", ".%s.json.%d.tmp" % (net.if_a, clsd.proc.pid)))
    assert_error(api.put_classifier(net.if_a, {"ingress": [filt("d", bpf.count, priority=6),
                                                           filt("e", bpf.count, priority=7)]}), 500, "store_error")
    assert [(f.pref, f.id, f.name) for f in net.a.filters(net.if_a)] == before
    assert api.healthy()
