"""PUT ?dry_run=1 and clsctl diff: the plan, with reasons; nothing loaded, stored or changed."""
import json
import os

import pytest

from conftest import assert_error, filt, tc_monitor


def _plan(r):
    assert r.status == 200, r
    assert r.json["dry_run"] is True
    return {(s["action"], s["direction"], s["pref"], s["name"]): s["reason"] for s in r.json["filters"]}


@pytest.mark.vm
def test_dry_run_changes_nothing(api, bpf, net):
    digest = api.upload_ok(bpf.count)
    drop = api.upload_ok(bpf.drop_port)
    r1 = api.put_classifier(net.if_a, {"ingress": [filt("a", digest, priority=10), filt("b", digest, priority=11)]})
    before = [(f.pref, f.id, f.name) for f in net.a.filters(net.if_a)]
    net.a.add_foreign_filter(net.if_a, 30, bpf.drop_port)
    doc = {"ingress": [filt("a", digest, priority=10), filt("c", drop, priority=12),
                       filt("x", digest, priority=30)]}
    with tc_monitor(net.a) as events:
        r = api.request("PUT", "/ifaces/%s/classifier?dry_run=1" % net.if_a, body=doc)
    plan = _plan(r)
    assert [l for l in events if "filter" in l or "qdisc" in l] == [], events
    assert plan[("keep", "ingress", 10, "clsd:a")].startswith("attached as declared")
    assert ("remove", "ingress", 11, "clsd:b") in plan
    assert plan[("add", "ingress", 12, "clsd:c")] == "nothing at this pref"
    assert "foreign" in plan[("conflict", "ingress", 30, "clsd:x")]
    loads = {(p["filter"], p["load"]) for p in r.json["programs"]}
    assert loads == {("a", "shared"), ("c", "load"), ("x", "shared")}
    assert r.json["generation"] == r1.json["generation"] + 1
    # nothing changed: kernel, document, objects
    assert [(f.pref, f.id, f.name) for f in net.a.filters(net.if_a) if f.pref != 30] == before
    assert api.get_classifier(net.if_a).json["generation"] == r1.json["generation"]


def test_dry_run_does_not_store_an_object_given_by_path(api, bpf, net):
    r = api.request("PUT", "/ifaces/%s/classifier?dry_run=1" % net.if_a,
                    body={"ingress": [filt("a", bpf.classid, direct_action=False)]})
    plan = _plan(r)
    assert ("add", "ingress", 1, "clsd:a") in plan
    assert api.get("/objects").json["objects"] == []
    assert net.a.filters(net.if_a) == []
    assert_error(api.get_classifier(net.if_a), 404, "document_not_found")


def test_dry_run_pending_and_errors(api, bpf, net):
    digest = api.upload_ok(bpf.count)
    r = api.request("PUT", "/ifaces/nosuch0/classifier?dry_run=1", body={"ingress": [filt("a", digest)]})
    assert r.status == 200 and r.json["state"] == "pending" and r.json["filters"] == []
    assert_error(api.request("PUT", "/ifaces/%s/classifier?dry_run=maybe" % net.if_a, body={}), 400,
                 "invalid_value")
    assert_error(api.request("PUT", "/ifaces/%s/classifier?dry_run=1" % net.if_a,
                             body={"ingress": [filt("a", "sha256:" + "0" * 64)]}), 404, "object_not_found")


def test_clsctl_diff(clsd, api, bpf, net, workdir):
    digest = api.upload_ok(bpf.count)
    spec = os.path.join(workdir, "spec.json")
    with open(spec, "w") as f:
        json.dump({"ingress": [filt("web", digest, priority=10)]}, f)
    # as diff(1) and kubectl diff: 1 when applying would change something, 0 when nothing, 2 trouble
    p = clsd.ctl("diff", net.if_a, spec, check=1)
    assert "dry run, nothing changed; applying it would change what is below" in p.stdout and not p.stderr
    assert "add" in p.stdout and "clsd:web" in p.stdout and "nothing at this pref" in p.stdout
    assert net.a.filters(net.if_a) == []
    j = json.loads(clsd.ctl("--json", "diff", net.if_a, spec, check=1).stdout)
    assert j["filters"][0]["action"] == "add" and j["changed"] is True
    clsd.ctl("apply", net.if_a, spec, check=0)
    p = clsd.ctl("diff", net.if_a, spec, check=0)
    assert "applying it would change nothing" in p.stdout
    p = clsd.ctl("diff", net.if_a, os.path.join(workdir, "missing.json"), check=2)
    assert p.stderr.startswith("clsctl: ") and len(p.stderr.splitlines()) == 1, p.stderr


def test_dry_run_says_whether_the_put_would_change_anything(api, bpf, net):
    """"changed": the stored document (whatever its generation) or the kernel; what idempotent clients
    (the Ansible collection) report. A policy's dry run says it for the policy and all its interfaces."""
    doc = {"ingress": [filt("web", bpf.count, priority=10)]}
    dry = lambda path, body: api.request("PUT", path + "?dry_run=1", body).json
    path = "/ifaces/%s/classifier" % net.if_a
    assert dry(path, doc)["changed"] is True  # no document yet
    assert api.put_classifier(net.if_a, doc).status == 200
    assert dry(path, doc)["changed"] is False
    assert dry(path, {"ingress": [filt("web", bpf.count, priority=11)]})["changed"] is True
    pol = {"match": {"ifname": [net.if_a]}, "egress": [filt("cnt", bpf.count, priority=20)]}
    assert dry("/policies/p", pol)["changed"] is True
    assert api.request("PUT", "/policies/p", pol).status == 200
    answer = dry("/policies/p", pol)
    assert answer["changed"] is False and "changed" not in answer["results"][0]["plan"], answer
    assert dry("/policies/p", dict(pol, order=5))["changed"] is True
    assert dry("/policies/p", dict(pol, match={"ifname": ["nothing*"]}))["changed"] is True  # it would lose an interface
