"""tcx: "attach":"tcx" through bpf_link, pinned in bpffs so links outlive clsd, run in priority order
among clsd's; observed with BPF_PROG_QUERY (bpftool 7.1 predates tcx) and real traffic."""
import os
import time

from harness.api import assert_error
from harness.base import ADDR_A, filt, status_of, wait_for
from harness.daemon import write_hog
from harness.netns import block_store_write, tcx_detach_pinned
from harness.observe import prog_map_id, read_counter, udp_exchange


def tcx_doc(bpf, **prios):
    """ingress filters "count" (count.bpf.o) and "drop" (drop-port.bpf.o) at the given priorities."""
    objs = {"count": bpf.count, "drop": bpf.drop_port}
    return {"ingress": [filt(n, objs[n], priority=p, attach="tcx") for n, p in prios.items()]}


def warm_up(net, counters):
    """One exchange first, so that neighbour resolution is done; returns the count after it."""
    udp_exchange(net.b, net.a, ADDR_A, {7777: 1})
    return read_counter(counters)[0]


def ids(body, *names):
    return [(status_of(body, n)["id"], status_of(body, n)["link_id"]) for n in names]


def test_tcx_attaches_in_priority_order_and_counts_traffic(api, bpf, net, clsd):
    net.quiet()  # the counts below are exact
    r = api.put_classifier("va", tcx_doc(bpf, count=20, drop=10))
    assert r.status == 200, r
    body = r.json
    assert [status_of(body, n)["attach"] for n in ("count", "drop")] == ["tcx", "tcx"]
    assert all(status_of(body, n)["attached"] for n in ("count", "drop"))
    # The kernel runs drop (10) before count (20); no cls_bpf filter or clsact qdisc is involved.
    assert net.a.tcx("va") == ids(body, "drop", "count")
    assert net.a.filters("va") == [] and not net.a.has_clsact("va")
    assert sorted(os.listdir(os.path.join(clsd.bpffs_dir, "tcx"))) == [
        "%d-ingress-10-drop" % net.a.ifindex("va"), "%d-ingress-20-count" % net.a.ifindex("va")]
    counters = prog_map_id(status_of(body, "count")["id"], "counters")
    before = warm_up(net, counters)
    got = udp_exchange(net.b, net.a, ADDR_A, {9: 10, 7777: 10})
    assert got == {9: 0, 7777: 10}
    # The dropper ran first: the counter saw the 10 datagrams to 7777 and the marker, not port 9's.
    assert read_counter(counters)[0] - before == 11

    # A filter in between goes in between; the others keep their links.
    doc = tcx_doc(bpf, count=20, drop=10)
    doc["ingress"].append(filt("early", bpf.count_wide, priority=15, attach="tcx"))
    body2 = api.put_classifier("va", doc).json
    assert net.a.tcx("va") == ids(body2, "drop", "early", "count")
    assert ids(body2, "drop", "count") == ids(body, "drop", "count")


def test_tcx_runs_a_program_once_per_hook(api, bpf, net):
    doc = tcx_doc(bpf, count=20)
    doc["ingress"].append(filt("again", bpf.count, priority=30, attach="tcx"))
    r = api.put_classifier("va", doc)
    assert_error(r, 422, "duplicate_program")
    assert "ingress[1]" in r.json["error"]["message"] and "\"count\"" in r.json["error"]["message"]
    assert net.a.tcx("va") == []
    # On the other hook, or as cls_bpf beside it, the same program is fine.
    doc["ingress"][1]["attach"] = "cls_bpf"
    doc["egress"] = [filt("out", bpf.count, priority=1, attach="tcx")]
    assert api.put_classifier("va", doc).status == 200
    assert len(net.a.tcx("va")) == 1 and len(net.a.tcx("va", "egress")) == 1


def test_tcx_order_decides_what_runs(api, bpf, net):
    net.quiet()
    body = api.put_classifier("va", tcx_doc(bpf, count=5, drop=10)).json
    counters = prog_map_id(status_of(body, "count")["id"], "counters")
    before = warm_up(net, counters)
    assert udp_exchange(net.b, net.a, ADDR_A, {9: 10, 7777: 10}) == {9: 0, 7777: 10}
    # The counter runs first now: it sees the dropped datagrams too.
    assert read_counter(counters)[0] - before == 21


def test_tcx_replace_in_place_keeps_the_link_and_its_place(api, bpf, net):
    body = api.put_classifier("va", tcx_doc(bpf, count=20, drop=10)).json
    doc = tcx_doc(bpf, count=20, drop=10)
    doc["ingress"][0]["object"] = bpf.count_wide  # another program, same name and place
    doc["ingress"][0]["maps"] = {"counters": {"reuse": False}}  # its map is larger
    body2 = api.put_classifier("va", doc).json
    (old_prog, old_link), (new_prog, new_link) = ids(body, "count")[0], ids(body2, "count")[0]
    assert new_link == old_link and new_prog != old_prog
    assert net.a.tcx("va") == ids(body2, "drop", "count")


def test_tcx_links_outlive_clsd_and_are_adopted(api, bpf, net, clsd):
    net.quiet()
    body = api.put_classifier("va", tcx_doc(bpf, count=20)).json
    counters = prog_map_id(status_of(body, "count")["id"], "counters")
    before = warm_up(net, counters)
    assert clsd.stop() == 0
    # clsd is gone; the pinned link still runs the program.
    assert net.a.tcx("va") == ids(body, "count")
    udp_exchange(net.b, net.a, ADDR_A, {7777: 5})
    assert read_counter(counters)[0] - before == 6
    clsd.start()
    assert "adopted program count_pkts" in clsd.log_this_run()
    assert ids(api.get_classifier("va").json, "count") == ids(body, "count")
    assert net.a.tcx("va") == ids(body, "count")


def test_tcx_link_detached_by_someone_is_repaired(bpf, net, clsd_factory):
    c = clsd_factory(net.a, name="clsd", args=("--resync-interval", "1"))
    body = c.api.put_classifier("va", tcx_doc(bpf, count=20, drop=10)).json
    pin = os.path.join(c.bpffs_dir, "tcx", "%d-ingress-20-count" % net.a.ifindex("va"))
    tcx_detach_pinned(pin)
    assert [l for _, l in net.a.tcx("va")] == [ids(body, "drop")[0][1]]
    # tcx changes raise no netlink event: the periodic resync finds and repairs it.
    body2 = wait_for(lambda: (lambda b: b if b["repairs"] == 1 and status_of(b, "count")["attached"] else None)(
        c.api.get_classifier("va").json), timeout=5, what="the detached link repaired")
    assert "tcx ingress pref 20" in body2["last_repair"]["what"]
    assert net.a.tcx("va") == ids(body2, "drop", "count")
    assert ids(body2, "drop") == ids(body, "drop")


def test_tcx_delete_and_switch_to_cls_bpf(api, bpf, net, clsd):
    assert api.put_classifier("va", tcx_doc(bpf, count=20)).status == 200
    # The same filter as cls_bpf: the link goes, a cls_bpf filter comes.
    body = api.put_classifier("va", {"ingress": [filt("count", bpf.count, priority=20)]}).json
    assert status_of(body, "count")["attach"] == "cls_bpf" and status_of(body, "count")["attached"]
    assert net.a.tcx("va") == []
    assert [f.name for f in net.a.filters("va")] == ["clsd:count"]
    assert api.put_classifier("va", tcx_doc(bpf, count=20)).status == 200
    assert net.a.filters("va") == [] and len(net.a.tcx("va")) == 1
    assert api.delete_classifier("va").status == 204
    assert net.a.tcx("va") == []
    assert os.listdir(os.path.join(clsd.bpffs_dir, "tcx")) == []


def test_attach_auto_and_bad_combinations(api, bpf, net):
    assert api.get("/version").json["tcx"] == "available"
    body = api.put_classifier("va", {"ingress": [filt("a", bpf.count, attach="auto")],
                                     "egress": [filt("c", bpf.classid, attach="auto", direct_action=False,
                                                     classid="1:10")]}).json
    assert status_of(body, "a")["attach"] == "tcx" and status_of(body, "a")["attached"]
    assert status_of(body, "c", "egress")["attach"] == "cls_bpf"  # tcx has no classic mode
    assert body["document"]["ingress"][0]["attach"] == "auto"
    before = net.a.tcx("va")
    for bad, field in ((filt("x", bpf.count, attach="tcx", direct_action=False), "attach"),
                       (filt("x", bpf.count, attach="tcx", classid="1:1"), "attach"),
                       (filt("x", bpf.count, attach="xdp"), "attach"),
                       (filt("x", bpf.count, attach=1), "attach")):
        r = api.put_classifier("va", {"ingress": [bad]})
        assert r.status == 400 and "ingress[0].attach" in r.json["error"]["message"], r
    assert net.a.tcx("va") == before


def test_a_tcx_link_follows_its_interface_renamed_away(api, bpf, net):
    net.a.add_veth("vx0", "vx1")
    assert api.put_classifier("vx0", tcx_doc(bpf, count=20)).status == 200
    assert len(net.a.tcx("vx0")) == 1
    net.a.run("ip", "link", "set", "vx0", "name", "vy0")
    wait_for(lambda: net.a.tcx("vy0") == [], what="clsd's tcx link to leave the renamed device")
    net.a.add_veth("vx0", "vx2")
    wait_for(lambda: len(net.a.tcx("vx0")) == 1, what="the document applied to the new vx0")
    time.sleep(0.05)
    assert api.get_classifier("vx0").json["state"] == "configured"


def test_a_tcx_dry_run_says_what_would_be_linked_and_changes_nothing(api, bpf, net, clsd):
    assert api.put_classifier("va", tcx_doc(bpf, count=20, drop=10)).status == 200
    clsd.restart()
    doc = tcx_doc(bpf, count=20)
    doc["ingress"].append(filt("wide", bpf.count_wide, priority=30, attach="tcx"))
    before = net.a.tcx("va")
    r = api.request("PUT", "/ifaces/va/classifier?dry_run=1", body=doc)
    assert r.status == 200, r
    plan = {(s["action"], s["name"]) for s in r.json["filters"]}
    assert plan == {("keep", "clsd:count"), ("add", "clsd:wide"), ("remove", "clsd:drop")}, r.json
    assert {p["filter"]: p["load"] for p in r.json["programs"]} == {"count": "shared", "wide": "load"}  # adopted at the restart
    assert net.a.tcx("va") == before


def test_a_failed_put_takes_back_its_tcx_links_and_puts_the_old_ones_back(api, bpf, net, clsd):
    body = api.put_classifier("va", tcx_doc(bpf, count=20)).json
    before = net.a.tcx("va")
    assert before == ids(body, "count")
    pins = sorted(os.listdir(os.path.join(clsd.bpffs_dir, "tcx")))
    block_store_write(clsd, "va")
    # A new link (drop at 10) and a new program for the old one (count at 20), then the store fails.
    doc = tcx_doc(bpf, count=20, drop=10)
    doc["ingress"][0]["object"] = bpf.count_v2
    assert_error(api.put_classifier("va", doc), 500, "store_error")
    assert net.a.tcx("va") == before, "the failed PUT left tcx links behind or changed the old one"
    assert sorted(os.listdir(os.path.join(clsd.bpffs_dir, "tcx"))) == pins
    g = api.get_classifier("va").json
    assert g["generation"] == body["generation"] and ids(g, "count") == before


def test_a_failed_first_put_leaves_no_tcx_link(api, bpf, net, clsd):
    block_store_write(clsd, "va")
    assert_error(api.put_classifier("va", tcx_doc(bpf, count=20, drop=10)), 500, "store_error")
    assert net.a.tcx("va") == []
    assert os.listdir(os.path.join(clsd.bpffs_dir, "tcx")) == []


def test_two_tcx_filters_can_swap_their_programs(api, bpf, net):
    """The kernel runs a program once per hook, so a swap cannot be two updates in place: clsd
    re-attaches one of the two links."""
    one = {"ingress": [filt("a", bpf.count, priority=10, attach="tcx"),
                       filt("b", bpf.drop_port, priority=20, attach="tcx")]}
    body = api.put_classifier("va", one).json
    count_id, drop_id = status_of(body, "a")["id"], status_of(body, "b")["id"]
    two = {"ingress": [filt("a", bpf.drop_port, priority=10, attach="tcx"),
                       filt("b", bpf.count, priority=20, attach="tcx")]}
    r = api.put_classifier("va", two)
    assert r.status == 200, r
    assert [p for p, _ in net.a.tcx("va")] == [drop_id, count_id]
    assert net.a.tcx("va") == ids(r.json, "a", "b")
    # And back again, with nothing left over.
    r = api.put_classifier("va", one)
    assert r.status == 200, r
    assert [p for p, _ in net.a.tcx("va")] == [count_id, drop_id]
    assert api.get_classifier("va").json["state"] == "configured"


def test_a_link_left_by_a_hog_filter_made_cls_bpf_between_runs_goes_at_the_resync(bpf, net, workdir, clsd_factory):
    """A start reads only the hooks an interface's filters use (tcx pins are listed for filters that are
    tcx): a link that an edited hog's filter left behind is found and taken away by the resync, and the
    filter runs as cls_bpf meanwhile."""
    hogs_dir = os.path.join(workdir, "hogs.d")
    write_hog(hogs_dir, "va.json", "va", ingress=[filt("count", bpf.count, priority=20, attach="tcx")])
    c = clsd_factory(net.a, name="clsd", args=("--hogs-dir", hogs_dir, "--resync-interval", "1"))
    assert len(net.a.tcx("va")) == 1 and net.a.filters("va") == []
    assert c.stop() == 0
    write_hog(hogs_dir, "va.json", "va", ingress=[filt("count", bpf.count, priority=20)])
    c.start()
    assert [f.name for f in net.a.filters("va")] == ["clsd:count"]
    wait_for(lambda: net.a.tcx("va") == [], timeout=5, what="the tcx link left by the edited hog taken away")
    assert os.listdir(os.path.join(c.bpffs_dir, "tcx")) == []
    assert status_of(c.api.get_classifier("va").json, "count")["attached"]
