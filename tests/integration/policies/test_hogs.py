"""Hogs: documents declared in configuration, applied at start and when their interface appears,
read-only to the API, winning over an API document on their hooks; SIGHUP applies the difference."""
import json
import os

from harness.api import assert_error
from harness.base import CLSD, file_digest, filt, run, status_of, wait_for
from harness.daemon import reload, write_hog
from harness.observe import tc_monitor


def hogged(clsd_factory, net, workdir, **hogs):
    """A clsd in net.a with --hogs-dir; hogs: file name -> (ifname, hooks)."""
    hogs_dir = os.path.join(workdir, "hogs.d")
    paths = {name: write_hog(hogs_dir, name, ifname, **hooks) for name, (ifname, hooks) in hogs.items()}
    c = clsd_factory(net.a, name="clsd", args=("--hogs-dir", hogs_dir))
    return c, hogs_dir, paths


def names(ns, dev, hook="ingress"):
    return [(f.pref, f.name) for f in ns.filters(dev, hook)]


def test_hog_applied_at_start_and_read_only(clsd_factory, net, workdir, bpf):
    c, _, paths = hogged(clsd_factory, net, workdir,
                         **{"va.json": ("va", {"ingress": [filt("web", bpf.count, priority=10)]})})
    assert names(net.a, "va") == [(10, "clsd:web")]
    body = c.api.get_classifier("va").json
    assert body["source"] == "hog" and body["hog"] == paths["va.json"]
    assert body["generation"] is None and body["overridden"] == []
    assert status_of(body, "web")["attached"] and status_of(body, "web")["source"] == "hog"
    prog_id = net.a.filter_at("va", 10).id

    r = c.api.put_classifier("va", {"ingress": [filt("other", bpf.drop_port, priority=11)]})
    assert_error(r, 409, "hog_owned")
    assert paths["va.json"] in r.json["error"]["message"]
    r = c.api.delete_classifier("va")
    assert_error(r, 409, "hog_owned")
    assert paths["va.json"] in r.json["error"]["message"]
    # The object a hog uses cannot be deleted under it either.
    assert_error(c.api.delete("/objects/" + file_digest(bpf.count)), 409, "object_in_use")
    assert names(net.a, "va") == [(10, "clsd:web")]
    assert net.a.filter_at("va", 10).id == prog_id
    assert c.api.get("/ifaces").json  # the link list still answers

    # clsctl says so too, with the file, and exits 1.
    p = c.ctl("delete", "va", check=1)
    assert paths["va.json"] in p.stderr and len(p.stderr.strip().splitlines()) == 1


def test_api_document_on_the_other_hook_and_delete_keeps_the_hog(clsd_factory, net, workdir, bpf):
    c, _, _ = hogged(clsd_factory, net, workdir,
                     **{"va.json": ("va", {"ingress": [filt("web", bpf.count, priority=10)]})})
    prog_id = net.a.filter_at("va", 10).id
    r = c.api.put_classifier("va", {"egress": [filt("out", bpf.count, priority=5)]})
    assert r.status == 200, r
    body = r.json
    assert body["generation"] == 1 and body["source"] == "hog"
    assert status_of(body, "web")["source"] == "hog"
    assert status_of(body, "out", "egress")["source"] == "api" and status_of(body, "out", "egress")["attached"]
    assert names(net.a, "va", "egress") == [(5, "clsd:out")]
    assert c.api.delete_classifier("va").status == 204
    assert names(net.a, "va", "egress") == []
    assert names(net.a, "va") == [(10, "clsd:web")]
    assert net.a.filter_at("va", 10).id == prog_id
    body = c.api.get_classifier("va").json
    assert body["source"] == "hog" and body["generation"] is None


def test_hog_applied_when_its_interface_appears(clsd_factory, net, workdir, bpf):
    c, _, _ = hogged(clsd_factory, net, workdir,
                     **{"vh0.json": ("vh0", {"ingress": [filt("web", bpf.count, priority=10)]})})
    assert c.api.get_classifier("vh0").json["state"] == "pending"
    net.a.add_veth("vh0", "vh1")
    wait_for(lambda: names(net.a, "vh0") == [(10, "clsd:web")], what="the hog applied to the new vh0")
    assert c.api.get_classifier("vh0").json["state"] == "configured"
    net.a.run("ip", "link", "del", "vh0")
    wait_for(lambda: c.api.get_classifier("vh0").json["state"] == "pending", what="pending again")
    net.a.add_veth("vh0", "vh1")
    wait_for(lambda: names(net.a, "vh0") == [(10, "clsd:web")], what="the hog applied again")


def test_hog_overrides_an_api_document_until_it_goes(clsd_factory, net, workdir, bpf):
    hogs_dir = os.path.join(workdir, "hogs.d")
    os.makedirs(hogs_dir)
    c = clsd_factory(net.a, name="clsd", args=("--hogs-dir", hogs_dir))
    doc = {"ingress": [filt("api", bpf.drop_port, priority=20)], "egress": [filt("out", bpf.count, priority=5)]}
    assert c.api.put_classifier("va", doc).status == 200
    path = write_hog(hogs_dir, "va.json", "va", ingress=[filt("hog", bpf.count, priority=10)])
    reload(c)
    assert names(net.a, "va") == [(10, "clsd:hog")]
    assert names(net.a, "va", "egress") == [(5, "clsd:out")]  # the API's other hook is untouched
    body = c.api.get_classifier("va").json
    assert body["overridden"] == ["ingress"] and body["hog"] == path and body["generation"] == 1
    head = c.ctl("get", "va", check=0).stdout.splitlines()[0]
    assert head == "va: configured (generation 1, hog %s, overriding the API's ingress)" % path
    # The API document is kept: once the hog goes, it applies again.
    os.unlink(path)
    reload(c)
    assert names(net.a, "va") == [(20, "clsd:api")]
    body = c.api.get_classifier("va").json
    assert body["source"] == "api" and body["hog"] is None and body["overridden"] == []


def test_sighup_applies_only_the_difference(clsd_factory, net, workdir, bpf):
    hooks = {"ingress": [filt("a", bpf.count, priority=10), filt("b", bpf.drop_port, priority=20)]}
    c, hogs_dir, _ = hogged(clsd_factory, net, workdir, **{"va.json": ("va", hooks)})
    a = net.a.filter_at("va", 10)
    # Nothing changed: nothing is touched.
    with tc_monitor(net.a) as events:
        reload(c)
    assert [e for e in events if "dev va" in e] == []
    # One filter changed: only that one moves; the other keeps its program and handle.
    hooks["ingress"][1]["priority"] = 30
    write_hog(hogs_dir, "va.json", "va", **hooks)
    with tc_monitor(net.a) as events:
        reload(c)
    assert names(net.a, "va") == [(10, "clsd:a"), (30, "clsd:b")]
    a2 = net.a.filter_at("va", 10)
    assert (a2.id, a2.handle) == (a.id, a.handle)
    assert not [e for e in events if "pref 10 " in e], events
    # A hog file removed: what it attached goes.
    os.unlink(os.path.join(hogs_dir, "va.json"))
    reload(c)
    assert names(net.a, "va") == []
    assert c.api.get_classifier("va").status == 404


def test_hog_adopted_across_restart_and_removed_while_down(clsd_factory, net, workdir, bpf):
    c, hogs_dir, paths = hogged(clsd_factory, net, workdir,
                                **{"va.json": ("va", {"ingress": [filt("web", bpf.count, priority=10)]})})
    prog_id = net.a.filter_at("va", 10).id
    c.restart()
    assert "adopted" in c.log_this_run()
    assert net.a.filter_at("va", 10).id == prog_id
    assert c.stop() == 0
    os.unlink(paths["va.json"])
    c.start()
    wait_for(lambda: names(net.a, "va") == [], what="the gone hog's filter removed")
    assert "its hog is gone" in c.log_this_run()


def test_bad_hog_file_is_reported_and_the_others_apply(clsd_factory, net, workdir, bpf):
    hogs_dir = os.path.join(workdir, "hogs.d")
    write_hog(hogs_dir, "good.json", "va", ingress=[filt("web", bpf.count, priority=10)])
    bad = write_hog(hogs_dir, "bad.json", "vb0", ingress=[filt("x", bpf.count, priority=10, colour="red")])
    c = clsd_factory(net.a, name="clsd", args=("--hogs-dir", hogs_dir))
    assert names(net.a, "va") == [(10, "clsd:web")]
    log = c.log_this_run()
    assert bad in log and "colour" in log
    assert c.api.get_classifier("vb0").status == 404


def test_check_validates_hogs_without_starting(workdir, bpf):
    hogs_dir = os.path.join(workdir, "hogs.d")
    good = write_hog(hogs_dir, "a.json", "eth0", ingress=[filt("web", bpf.count, priority=10)])
    p = run([CLSD, "--check", "--hogs-dir", hogs_dir], check=False)
    assert p.returncode == 0 and "1 hog(s), all valid" in p.stdout, p
    cases = [
        ("b.json", {"ifname": "eth1", "ingress": [{"name": "x", "object": bpf.count, "prio": 1}]}, "prio"),
        ("c.json", {"ingress": []}, "ifname"),
        ("d.json", {"ifname": "eth2", "ingress": [filt("x", "/nonexistent/x.o")]}, "/nonexistent/x.o"),
        ("e.json", {"ifname": "eth3", "ingress": [filt("x", file_digest(bpf.count))]}, "absolute path"),
        ("f.json", {"ifname": "eth0", "egress": [filt("x", bpf.count)]}, good),
        ("g.json", {"ifname": "eth4", "ingress": [filt("x", bpf.xdp_only)]}, "x"),
    ]
    for name, doc, _ in cases:
        with open(os.path.join(hogs_dir, name), "w") as f:
            json.dump(doc, f)
    with open(os.path.join(hogs_dir, "h.json"), "w") as f:
        f.write("{not json")
    p = run([CLSD, "--check", "--hogs-dir", hogs_dir], check=False)
    assert p.returncode == 1, p
    lines = p.stderr.strip().splitlines()
    assert len(lines) == len(cases) + 1, p.stderr
    for (name, _, why), line in zip(cases, lines):
        assert os.path.join(hogs_dir, name) in line and why in line, (name, line)
    assert "h.json" in lines[-1] and "malformed JSON" in lines[-1]


def test_hog_in_a_named_namespace(clsd_factory, net, workdir, bpf):
    c, _, _ = hogged(clsd_factory, net, workdir,
                     **{"b.json": ("vb", {"netns": net.b.name, "ingress": [filt("web", bpf.count, priority=10)]})})
    assert names(net.b, "vb") == [(10, "clsd:web")]
    body = c.api.get("/netns/%s/ifaces/vb/classifier" % net.b.name).json
    assert body["source"] == "hog" and body["netns"] == net.b.name
    assert c.api.get_classifier("vb").status == 404  # not clsd's own namespace's
