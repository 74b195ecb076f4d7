"""PUT ?dry_run=1 and clsctl diff: the plan, with reasons; nothing loaded, stored or changed."""
import json
import os

import pytest

from harness.api import assert_error
from harness.base import filt
from harness.observe import tc_monitor


def _plan(r):
    assert r.status == 200, r
    return _steps(r.json)


def _steps(j):
    assert j["dry_run"] is True
    return {(s["action"], s["direction"], s["pref"], s["name"]): s["reason"] for s in j["filters"]}


@pytest.mark.vm
def test_a_dry_run_answers_the_plan_and_changes_nothing(api, bpf, net):
    digest = api.upload_ok(bpf.count)
    drop = api.upload_ok(bpf.drop_port)
    r1 = api.put_classifier(net.if_a, {"ingress": [filt("a", digest, priority=10), filt("b", digest, priority=11)]})
    before = [(f.pref, f.id, f.name) for f in net.a.filters(net.if_a)]
    net.a.add_foreign_filter(net.if_a, 30, bpf.drop_port)
    doc = {"ingress": [filt("a", digest, priority=10), filt("c", drop, priority=12),
                       filt("x", digest, priority=30)]}
    with tc_monitor(net.a) as events:
        r = api.request("PUT", "/ifaces/%s/classifier?dry_run=1" % net.if_a, body=doc)
    # the apply would be refused (x's priority is the foreign filter's): the dry run answers that, its plan
    # beside the error
    assert r.status == 409 and set(r.json) == {"error", "plan"}, r
    assert r.json["error"]["code"] == "priority_taken" and "foreign" in r.json["error"]["message"], r.json
    dry = r.json["plan"]
    plan = _steps(dry)
    assert [l for l in events if "filter" in l or "qdisc" in l] == [], events
    assert plan[("keep", "ingress", 10, "clsd:a")].startswith("attached as declared")
    assert ("remove", "ingress", 11, "clsd:b") in plan
    assert plan[("add", "ingress", 12, "clsd:c")] == "nothing at this pref"
    assert "foreign" in plan[("conflict", "ingress", 30, "clsd:x")]
    loads = {(p["filter"], p["load"]) for p in dry["programs"]}
    assert loads == {("a", "shared"), ("c", "load"), ("x", "shared")}
    assert dry["generation"] == r1.json["generation"] + 1
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


def test_clsctl_diff_shows_the_plan_and_exits_1_when_something_would_change(clsd, api, bpf, net, workdir):
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


# ---------------------------------------------------------------------------------------------
# A dry run answers what the apply then does: over random small states

DRY_SEEDS = [int(s) for s in os.environ.get("CLSD_DRY_SEEDS", "1,2,3").split(",")]
DRY_STEPS = int(os.environ.get("CLSD_DRY_STEPS", "25"))


def _outcome(r):
    """What a PUT answered, comparable between its dry run and its apply: its status and error code; for a
    policy, each interface's state (and error code); for a document, whether it is pending."""
    if r.status >= 400:
        return (r.status, r.json["error"]["code"])
    if "results" in r.json:
        return (r.status, tuple(sorted((x["ifname"], x["state"], (x.get("error") or {}).get("code"))
                                       for x in r.json["results"])))
    return (r.status, r.json.get("state") == "pending" or r.json.get("pending") is True)


@pytest.mark.parametrize("seed", DRY_SEEDS)
def test_random_states_a_dry_run_answers_what_the_apply_does(api, bpf, net, seed):
    """Four veths, foreign filters coming and going at some priorities, an HTB qdisc that egress filters
    under it need coming and going, documents, and policies of two orders matching some of the veths, in
    a seeded random order: before each PUT, its dry run; the dry run
    and the apply answer the same (status, error, each interface's state), and GET then says the states
    the apply answered."""
    import random
    rnd = random.Random(seed)
    devs = ["rd%d" % i for i in range(4)]
    net.a.run("ip", "-batch", "-", input="".join("link add %s type veth peer name z%s\nlink set %s up\n" % (d, d, d)
                                                 for d in devs))
    digests = [api.upload_ok(bpf.count), api.upload_ok(bpf.drop_port)]
    prios = [10, 20, 30]
    foreign = set()
    htb = set()
    log = []
    for step in range(DRY_STEPS):
        op = rnd.choice(["policy", "policy", "document", "document", "foreign", "unforeign", "rm_policy",
                         "rm_document", "qdisc", "unqdisc"])
        dev = rnd.choice(devs)
        if op in ("qdisc", "unqdisc"):
            # an HTB qdisc 7: that egress filters with "parent": "7:" need, there or not
            if (op == "qdisc") != (dev in htb):
                net.a.run("tc", "qdisc", "add" if op == "qdisc" else "del", "dev", dev, "root",
                          *(("handle", "7:", "htb") if op == "qdisc" else ()))
                htb.symmetric_difference_update({dev})
                log.append("%s %s" % (op, dev))
            continue
        if op == "foreign":
            pref = rnd.choice(prios)
            if (dev, pref) not in foreign and net.a.filter_at(dev, pref) is None:
                net.a.add_foreign_filter(dev, pref, bpf.drop_port)
                foreign.add((dev, pref))
                log.append("foreign %s %d" % (dev, pref))
            continue
        if op == "unforeign":
            if foreign:
                dev, pref = sorted(foreign)[rnd.randrange(len(foreign))]
                net.a.run("tc", "filter", "del", "dev", dev, "ingress", "pref", str(pref))
                foreign.discard((dev, pref))
                log.append("unforeign %s %d" % (dev, pref))
            continue
        if op == "rm_policy":
            name = rnd.choice(["pa", "pb", "pc"])
            log.append("rm policy %s" % name)
            api.delete("/policies/%s" % name)
            continue
        if op == "rm_document":
            log.append("rm document %s" % dev)
            api.delete_classifier(dev)
            continue
        filters = [filt("f%d" % i, rnd.choice(digests), priority=p)
                   for i, p in enumerate(rnd.sample(prios, rnd.randint(1, 2)))]
        egress = [filt("e", rnd.choice(digests), priority=5, parent="7:")] if rnd.random() < 0.3 else []
        if op == "policy":
            name = rnd.choice(["pa", "pb", "pc"])
            match = sorted(rnd.sample(devs, rnd.randint(1, 3)))
            body = {"match": {"ifname": match}, "order": rnd.choice([0, 0, 5]), "ingress": filters,
                    "egress": egress}
            path = "/policies/%s" % name
        else:
            body = {"ingress": filters, "egress": egress}
            path = "/ifaces/%s/classifier" % dev
        log.append("PUT %s %s" % (path, json.dumps(body, sort_keys=True)))
        dry = api.request("PUT", path + "?dry_run=1", body=body)
        got = api.request("PUT", path, body=body)
        where = "seed %d step %d:\n  %s" % (seed, step, "\n  ".join(log))
        assert _outcome(dry) == _outcome(got), "%s\ndry run: %s\napply:   %s" % (where, dry.json, got.json)
        if op == "policy" and got.status == 200:
            states = {i["ifname"]: i["policy_state"] for i in api.get(path).json["ifaces"]}
            answered = {x["ifname"]: x["state"] for x in got.json["results"] if x["matched"]}
            assert states == answered, "%s\nGET: %s\napply: %s" % (where, states, answered)
