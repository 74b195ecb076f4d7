"""Named network namespaces: /netns/{name}/ifaces/{ifname}/classifier manages an interface inside
/run/netns/NAME from a clsd running elsewhere; clsd follows namespaces that appear and vanish."""
import os

from harness.api import assert_error
from harness.base import ADDR_B, filt, status_of, wait_for
from harness.netns import netns_create, netns_destroy
from harness.observe import prog_map_id, read_counter, udp_exchange


def classifier(ns_name, ifname):
    return "/netns/%s/ifaces/%s/classifier" % (ns_name, ifname)


def put(api, ns_name, ifname, doc):
    return api.request("PUT", classifier(ns_name, ifname), body=doc)


def netns_entry(api, name):
    for e in api.get("/netns").json["netns"]:
        if e["name"] == name:
            return e
    return None


def test_manages_an_interface_in_another_namespace(api, bpf, net):
    # clsd runs in net.a; vb is in net.b.
    net.quiet()  # the count below is exact
    r = put(api, net.b.name, "vb", {"ingress": [filt("web", bpf.count, priority=10)]})
    assert r.status == 200, r
    body = r.json
    assert body["netns"] == net.b.name and body["state"] == "configured"
    assert [f.name for f in net.b.filters("vb")] == ["clsd:web"]
    assert net.a.filters("va") == []  # clsd's own namespace is untouched
    counters = prog_map_id(status_of(body, "web")["id"], "counters")
    udp_exchange(net.a, net.b, ADDR_B, {7777: 1})
    before = read_counter(counters)[0]
    udp_exchange(net.a, net.b, ADDR_B, {7777: 10})
    assert read_counter(counters)[0] - before == 11

    assert netns_entry(api, net.b.name) == {"name": net.b.name, "present": True, "followed": True,
                                            "documents": 1}
    links = api.get("/netns/%s/ifaces" % net.b.name).json["ifaces"]
    vb = [l for l in links if l["ifname"] == "vb"][0]
    assert vb["state"] == "configured" and [f["name"] for f in vb["filters"]] == ["clsd:web"]
    # /ifaces is clsd's own namespace: the document is not there.
    assert api.get_classifier("vb").status == 404
    assert api.get(classifier(net.b.name, "vb")).json["generation"] == 1

    # Drift in that namespace is repaired from its events.
    net.b.run("tc", "filter", "del", "dev", "vb", "ingress", "pref", "10")
    wait_for(lambda: [f.name for f in net.b.filters("vb")] == ["clsd:web"], what="the repair in net.b")
    assert api.get(classifier(net.b.name, "vb")).json["repairs"] == 1

    assert api.request("DELETE", classifier(net.b.name, "vb")).status == 204
    assert net.b.filters("vb") == []
    assert netns_entry(api, net.b.name)["followed"] is False


def test_namespace_that_appears_later_and_goes(api, bpf, net):
    name = "clsdt-late%x" % (os.getpid() & 0xffff)
    r = put(api, name, "vq1", {"ingress": [filt("web", bpf.count, priority=10)]})
    assert r.status == 202 and r.json["state"] == "pending", r
    assert netns_entry(api, name) == {"name": name, "present": False, "followed": False, "documents": 1}
    late = None
    try:
        late = netns_create(name)
        # A veth pair from clsd's own namespace into the new one: vq0 lives as long as the namespace.
        net.a.run("ip", "link", "add", "vq0", "type", "veth", "peer", "name", "vq1", "netns", name)
        late.run("ip", "link", "set", "vq1", "up")
        wait_for(lambda: [f.name for f in late.filters("vq1")] == ["clsd:web"], timeout=5,
                 what="the document applied once the namespace and vq1 exist")
        assert api.get(classifier(name, "vq1")).json["state"] == "configured"
        run_ns = late
        late = None
        netns_destroy(run_ns)
        wait_for(lambda: api.get(classifier(name, "vq1")).json["state"] == "pending", timeout=5,
                 what="pending once the namespace is gone")
        # clsd let go of it: the namespace really dies, and vq0 with it.
        wait_for(lambda: "vq0" not in net.a.link_names(), timeout=5, what="the namespace to be destroyed")
        assert netns_entry(api, name)["followed"] is False
    finally:
        if late:
            netns_destroy(late)


def test_netns_document_survives_restart_and_tcx_works_there(api, bpf, net, clsd):
    doc = {"ingress": [filt("web", bpf.count, priority=10)],
           "egress": [filt("out", bpf.count, priority=5, attach="tcx")]}
    body = put(api, net.b.name, "vb", doc).json
    assert status_of(body, "out", "egress")["attached"], body
    assert net.b.tcx("vb", "egress") == [(status_of(body, "out", "egress")["id"],
                                          status_of(body, "out", "egress")["link_id"])]
    assert os.listdir(os.path.join(clsd.bpffs_dir, "tcx@" + net.b.name)) == [
        "%d-egress-5-out" % net.b.ifindex("vb")]
    clsd.restart()
    assert "adopted program count_pkts" in clsd.log_this_run()
    again = api.get(classifier(net.b.name, "vb")).json
    assert again["state"] == "configured"
    assert status_of(again, "web")["id"] == status_of(body, "web")["id"]
    assert status_of(again, "out", "egress")["link_id"] == status_of(body, "out", "egress")["link_id"]
    assert api.request("DELETE", classifier(net.b.name, "vb")).status == 204
    assert net.b.tcx("vb", "egress") == [] and net.b.filters("vb") == []


def test_same_ifname_in_two_namespaces_is_two_documents(api, bpf, net):
    net.b.add_veth("vz", "vzp")
    net.a.add_veth("vz", "vzp")
    assert api.put_classifier("vz", {"ingress": [filt("a", bpf.count, priority=1)]}).status == 200
    assert put(api, net.b.name, "vz", {"ingress": [filt("b", bpf.drop_port, priority=2)]}).status == 200
    assert [f.name for f in net.a.filters("vz")] == ["clsd:a"]
    assert [f.name for f in net.b.filters("vz")] == ["clsd:b"]
    assert api.delete_classifier("vz").status == 204
    assert [f.name for f in net.b.filters("vz")] == ["clsd:b"]


def test_unknown_or_malformed_namespaces_are_404_or_400(api, bpf, net):
    assert_error(api.get("/netns/no.such.ns/ifaces"), 404, "netns_not_found")
    assert_error(api.get("/netns/bad%20name/ifaces"), 400, "invalid_value")
    assert_error(api.get("/netns/%s/ifaces" % ("x" * 65)), 400, "invalid_value")
    assert_error(api.get("/netns/%s" % net.b.name), 404, "route_not_found")
    assert_error(api.get("/netns/%s/other" % net.b.name), 404, "route_not_found")
    assert_error(api.request("POST", "/netns"), 405, "method_not_allowed")
    assert_error(api.get(classifier(net.b.name, "vb")), 404, "document_not_found")
    r = put(api, net.b.name, "vb", {"ingress": [filt("x", bpf.xdp_only)]})
    assert r.status == 422, r
    assert net.b.filters("vb") == []


def test_clsctl_n_applies_and_lists_in_a_named_namespace(clsd, bpf, net, workdir):
    doc = os.path.join(workdir, "doc.json")
    with open(doc, "w") as f:
        f.write('{"ingress": [{"name": "web", "object": "%s", "priority": 10}]}' % bpf.count)
    clsd.ctl("-n", net.b.name, "apply", "vb", doc, check=0)
    assert [f.name for f in net.b.filters("vb")] == ["clsd:web"]
    out = clsd.ctl("--netns", net.b.name, "get", "vb", check=0).stdout
    assert out.splitlines()[0] == "vb: configured (generation 1)"
    assert "vb" in clsd.ctl("-n", net.b.name, "ls", check=0).stdout
    listing = clsd.ctl("netns", check=0).stdout.splitlines()
    assert listing[0].split() == ["NAME", "PRESENT", "FOLLOWED", "DOCUMENTS"]
    assert [net.b.name, "yes", "yes", "1"] in [l.split() for l in listing[1:]]
    p = clsd.ctl("-n", "no.such.ns", "ls", check=1)
    assert "no.such.ns" in p.stderr and len(p.stderr.strip().splitlines()) == 1
    clsd.ctl("-n", net.b.name, "delete", "vb", check=0)
    assert net.b.filters("vb") == []
    assert clsd.ctl("-n", check=2).returncode == 2


def test_looking_at_a_namespace_does_not_keep_it_followed(api, bpf, net):
    """A namespace is followed only while a document names it: listing its interfaces, a dry run or
    a failed PUT lets it go again."""
    assert api.get("/netns/%s/ifaces" % net.b.name).status == 200
    assert netns_entry(api, net.b.name)["followed"] is False
    r = api.request("PUT", classifier(net.b.name, "vb") + "?dry_run=1", body={"ingress": [filt("w", bpf.count)]})
    assert r.status == 200, r
    assert netns_entry(api, net.b.name)["followed"] is False
    net.b.add_foreign_filter("vb", 10, bpf.drop_port)
    r = put(api, net.b.name, "vb", {"ingress": [filt("w", bpf.count, priority=10)]})
    assert_error(r, 409, "priority_taken")
    assert netns_entry(api, net.b.name)["followed"] is False
    assert put(api, net.b.name, "vb", {"ingress": [filt("w", bpf.count, priority=20)]}).status == 200
    assert netns_entry(api, net.b.name)["followed"] is True


def test_tcx_pins_of_a_namespace_gone_while_clsd_was_down_are_swept(clsd, bpf, net):
    api = clsd.api
    c = netns_create()
    try:
        c.run("ip", "link", "add", "d0", "type", "veth", "peer", "name", "d1")
        c.run("ip", "link", "set", "d0", "up")
        r = put(api, c.name, "d0", {"ingress": [filt("t", bpf.count, attach="tcx")]})
        assert r.status == 200, r
        pin_dir = os.path.join(clsd.bpffs_dir, "tcx@" + c.name)
        assert len(os.listdir(pin_dir)) == 1
        assert clsd.stop() == 0
    finally:
        netns_destroy(c)
    clsd.start()
    assert not os.path.exists(pin_dir), "the dead namespace's tcx pins were not swept"
    assert "its link no longer runs anywhere; unpinned" in clsd.log_this_run()
    assert api.request("GET", classifier(c.name, "d0")).json["state"] == "pending"
