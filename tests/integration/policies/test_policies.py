"""Policies: one document for every interface that matches (PUT /policies/{name}), now and later;
precedence per hook (a hog, then the interface's document, then policies by order); conflicts; the
per-interface answer; dry runs; restarts."""

import json
import os
import signal
import time

import pytest

from harness.api import assert_error
from harness.base import CLSD, filt, run, wait_for
from harness.daemon import find_table, reload, write_doc
from harness.metrics import parse_exposition, scrape, value
from harness.observe import parse_tc_filters
from harness.policies import clsd_filters, policy, put_policy, results, veths


def test_a_policy_applies_to_every_matching_interface_and_answers_for_each(api, bpf, net):
    names = veths(net.a, "pa", 3)
    veths(net.a, "other", 1)
    r = put_policy(api, "web", policy({"ifname": ["pa*"]}, ingress=[filt("count", bpf.count, priority=10)]))
    assert r.status == 200, r
    assert r.headers["ETag"] == '"1"'
    got = results(r)
    assert sorted(got) == sorted(names), got
    assert all(x["state"] == "configured" and x["matched"] for x in got.values()), got
    for dev in names:
        (f,) = clsd_filters(net.a, dev)
        assert f.name == "clsd:count" and f.pref == 10
    assert clsd_filters(net.a, "other0") == []
    # One program, loaded once, shared by every interface.
    assert len({clsd_filters(net.a, dev)[0].id for dev in names}) == 1
    g = api.get("/policies/web")
    assert g.status == 200 and g.headers["ETag"] == '"1"'
    assert g.json["summary"] == {"matched": 3, "configured": 3, "pending": 0, "failed": 0, "conflict": 0,
                                 "overridden": 0}
    assert {i["ifname"]: i["ingress"]["state"] for i in g.json["ifaces"]} == {n: "applied" for n in names}
    assert [p["name"] for p in api.get("/policies").json["policies"]] == ["web"]


def test_interfaces_that_appear_later_or_are_renamed_or_vanish_follow_the_policy(api, bpf, net):
    r = put_policy(api, "late", policy({"ifname": ["lt*"]}, ingress=[filt("count", bpf.count, priority=10)]))
    assert r.status == 200 and r.json["results"] == [], r
    veths(net.a, "lt", 2)
    wait_for(lambda: all(len(clsd_filters(net.a, d)) == 1 for d in ("lt0", "lt1")), what="applied to new links")
    wait_for(lambda: api.get("/policies/late").json["summary"]["configured"] == 2)
    # Renamed away: the policy's filters go with the name.
    net.a.run("ip", "link", "set", "lt0", "down")
    net.a.run("ip", "link", "set", "lt0", "name", "zz0")
    wait_for(lambda: clsd_filters(net.a, "zz0") == [], what="filters removed from a renamed link")
    wait_for(lambda: [i["ifname"] for i in api.get("/policies/late").json["ifaces"]] == ["lt1"])
    # Renamed back: applied again.
    net.a.run("ip", "link", "set", "zz0", "name", "lt0")
    wait_for(lambda: len(clsd_filters(net.a, "lt0")) == 1, what="applied to a link renamed into the match")
    # Vanished: forgotten.
    net.a.run("ip", "link", "del", "lt1")
    wait_for(lambda: [i["ifname"] for i in api.get("/policies/late").json["ifaces"]] == ["lt0"])
    assert [i["ifname"] for i in api.get("/ifaces").json["ifaces"] if i["ifname"].startswith("lt")] == ["lt0"]


def test_kind_and_master_select_links(api, bpf, net):
    veths(net.a, "k", 2)
    net.a.run("ip", "link", "add", "br0", "type", "bridge")
    net.a.run("ip", "link", "set", "k1", "master", "br0")
    r = put_policy(api, "bridged", policy({"ifname": ["*"], "kind": ["veth"], "master": ["br*"]},
                                          egress=[filt("count", bpf.count, priority=5)]))
    assert r.status == 200, r
    assert sorted(results(r)) == ["k1"], r.json
    # Enslaving another link brings it into the match; releasing takes it out.
    net.a.run("ip", "link", "set", "k0", "master", "br0")
    wait_for(lambda: len(clsd_filters(net.a, "k0", "egress")) == 1, what="applied on enslave")
    net.a.run("ip", "link", "set", "k1", "nomaster")
    wait_for(lambda: clsd_filters(net.a, "k1", "egress") == [], what="removed on release")


def test_precedence_hog_then_document_then_policies_by_order(api, bpf, net):
    (dev,) = veths(net.a, "pr", 1)
    low = put_policy(api, "low", policy({"ifname": ["pr*"]}, order=10,
                                        ingress=[filt("p-low", bpf.count, priority=30)],
                                        egress=[filt("p-egress", bpf.count, priority=30)]))
    assert low.status == 200, low
    high = put_policy(api, "high", policy({"ifname": ["pr*"]}, order=1,
                                          ingress=[filt("p-high", bpf.count, priority=20)]))
    assert high.status == 200, high
    assert [f.name for f in clsd_filters(net.a, dev)] == ["clsd:p-high"]
    assert [f.name for f in clsd_filters(net.a, dev, "egress")] == ["clsd:p-egress"]
    g = api.get("/policies/low").json
    (i,) = g["ifaces"]
    assert i["ingress"] == {"state": "overridden", "by": "high"} and i["egress"] == {"state": "applied"}
    # The interface's own document wins over every policy on the hooks it declares, only there.
    r = api.put_classifier(dev, {"ingress": [filt("doc", bpf.count, priority=10)]})
    assert r.status == 200, r
    assert [f.name for f in clsd_filters(net.a, dev)] == ["clsd:doc"]
    assert [f.name for f in clsd_filters(net.a, dev, "egress")] == ["clsd:p-egress"]
    (i,) = api.get("/policies/high").json["ifaces"]
    assert i["ingress"] == {"state": "overridden", "by": "document"}
    # The document goes: the policies hold the interface again.
    assert api.delete_classifier(dev).status == 204
    wait_for(lambda: [f.name for f in clsd_filters(net.a, dev)] == ["clsd:p-high"])
    # DELETE a policy: the next one in order takes the hook.
    r = api.delete("/policies/high")
    assert r.status == 200, r
    assert [f.name for f in clsd_filters(net.a, dev)] == ["clsd:p-low"]
    assert_error(api.get("/policies/high"), 404, "policy_not_found")


def test_equal_order_on_one_hook_is_a_conflict_reported_on_both(api, bpf, net):
    (dev,) = veths(net.a, "cf", 1)
    assert put_policy(api, "a", policy({"ifname": ["cf*"]}, ingress=[filt("a", bpf.count, priority=10)])).status == 200
    r = put_policy(api, "b", policy({"ifname": ["cf0"]}, ingress=[filt("b", bpf.count, priority=20)],
                                   egress=[filt("b-e", bpf.count, priority=20)]))
    assert r.status == 200, r
    assert clsd_filters(net.a, dev) == [], "a conflict applied one of the two"
    assert [f.name for f in clsd_filters(net.a, dev, "egress")] == ["clsd:b-e"]
    for name, other in (("a", "b"), ("b", "a")):
        (i,) = api.get("/policies/%s" % name).json["ifaces"]
        assert i["ingress"]["state"] == "conflict" and other in i["ingress"]["with"], i
    # Resolved by an order: applied at once.
    r = put_policy(api, "b", policy({"ifname": ["cf0"]}, order=-1, ingress=[filt("b", bpf.count, priority=20)]))
    assert r.status == 200, r
    assert [f.name for f in clsd_filters(net.a, dev)] == ["clsd:b"]


def test_bad_policies_are_refused_and_nothing_is_lost(api, bpf, net):
    (dev,) = veths(net.a, "bd", 1)
    good = policy({"ifname": ["bd*"]}, ingress=[filt("count", bpf.count, priority=10)])
    assert put_policy(api, "keep", good).status == 200
    before = repr(clsd_filters(net.a, dev))
    for body, code in (
            ({"ingress": [filt("x", bpf.count)]}, "missing_field"),
            (policy({"ifname": []}, ingress=[filt("x", bpf.count)]), "invalid_value"),
            (policy({"ifname": ["a/b"]}, ingress=[filt("x", bpf.count)]), "invalid_value"),
            (policy({"ifname": ["bd*"], "colour": ["red"]}, ingress=[filt("x", bpf.count)]), "unknown_field"),
            (policy({"ifname": ["bd*"]}), "invalid_value"),
            (policy({"ifname": ["bd*"]}, order="first", ingress=[filt("x", bpf.count)]), "wrong_type"),
            (dict(good, extra=1), "unknown_field")):
        assert_error(put_policy(api, "keep", body), 400, code)
    assert_error(put_policy(api, "keep", policy({"ifname": ["bd*"]}, ingress=[filt("x", "/nonexistent.o")])),
                 403, "object_path_refused")
    assert_error(put_policy(api, "keep", policy({"ifname": ["bd*"]}, ingress=[filt("x", "/tmp/nonexistent.o")])),
                 404, "object_file_not_found")
    assert_error(put_policy(api, "keep", policy({"ifname": ["bd*"]}, ingress=[filt("x", bpf.rejected)])),
                 422, "verifier_rejected")
    assert_error(put_policy(api, "bad%20name", good), 400, "invalid_value")
    assert_error(put_policy(api, "keep", good, headers={"If-Match": '"7"'}), 412, "precondition_failed")
    assert_error(api.request("PATCH", "/policies/keep"), 405, "method_not_allowed")
    assert_error(api.delete("/policies/nope"), 404, "policy_not_found")
    assert api.get("/policies/keep").json["generation"] == 1
    assert repr(clsd_filters(net.a, dev)) == before
    r = put_policy(api, "keep", good, headers={"If-Match": '"1"'})
    assert r.status == 200 and r.json["generation"] == 2


def test_a_dry_run_plans_each_interface_and_changes_nothing(api, bpf, net):
    names = veths(net.a, "dr", 2)
    r = api.request("PUT", "/policies/plan?dry_run=1",
                    body=policy({"ifname": ["dr*"]}, ingress=[filt("count", bpf.count, priority=10)]))
    assert r.status == 200, r
    assert r.json["dry_run"] is True
    got = results(r)
    assert sorted(got) == names
    for x in got.values():
        assert [s["action"] for s in x["plan"]["filters"]] == ["add"], x
    assert all(clsd_filters(net.a, d) == [] for d in names)
    assert_error(api.get("/policies/plan"), 404, "policy_not_found")


def test_a_dry_run_answers_what_the_apply_then_does_over_foreign_filters_and_conflicts(api, bpf, net):
    """Three veths, a foreign filter holding the policy's priority on one, a policy of the same order on
    another: the dry run answers, interface by interface, the states the apply then reaches and that
    GET reports afterwards (failed priority_taken, conflict, configured), never "configured" for all."""
    a, b, c = veths(net.a, "dx", 3)
    net.a.add_foreign_filter(b, 10, bpf.drop_port)
    assert put_policy(api, "other", policy({"ifname": [c]}, ingress=[filt("o", bpf.count, priority=30)])).status == 200
    body = policy({"ifname": ["dx*"]}, ingress=[filt("count", bpf.count, priority=10)])
    dry = api.request("PUT", "/policies/p?dry_run=1", body=body)
    assert dry.status == 200, dry
    want = {a: "configured", b: "failed", c: "conflict"}
    assert {k: v["state"] for k, v in results(dry).items()} == want, dry.json
    assert results(dry)[b]["error"]["code"] == "priority_taken"
    assert "other" in results(dry)[c]["with"]
    r = put_policy(api, "p", body)
    assert {k: v["state"] for k, v in results(r).items()} == want, r.json
    assert results(r)[b]["error"]["code"] == "priority_taken"
    got = {i["ifname"]: i["policy_state"] for i in api.get("/policies/p").json["ifaces"]}
    assert got == want
    assert api.get("/policies/p").json["summary"]["conflict"] == 1


def test_a_foreign_filter_fails_that_interface_only_and_it_is_retried(api, bpf, net):
    a, b = veths(net.a, "ff", 2)
    net.a.add_foreign_filter(b, 10, bpf.drop_port)
    r = put_policy(api, "fx", policy({"ifname": ["ff*"]}, ingress=[filt("count", bpf.count, priority=10)]))
    assert r.status == 200, r
    got = results(r)
    assert got[a]["state"] == "configured"
    assert got[b]["state"] == "failed" and got[b]["error"]["code"] == "priority_taken", got[b]
    # GET says the same of that hook: failed, not applied; the summary counts it failed
    ifaces = {i["ifname"]: i for i in api.get("/policies/fx").json["ifaces"]}
    assert ifaces[b]["ingress"]["state"] == "failed" and ifaces[b]["policy_state"] == "failed", ifaces[b]
    assert ifaces[a]["ingress"]["state"] == "applied" and ifaces[a]["policy_state"] == "configured"
    assert api.get("/policies/fx").json["summary"] == {"matched": 2, "configured": 1, "pending": 0, "failed": 1,
                                                       "conflict": 0, "overridden": 0}
    # The foreign filter goes: the policy is applied there too (a retry, like a document's).
    net.a.run("tc", "filter", "del", "dev", b, "ingress", "pref", "10")
    wait_for(lambda: len(clsd_filters(net.a, b)) == 1, timeout=5, what="applied after the foreign filter went")


def test_policies_survive_a_restart_without_reloading(net, clsd_factory, bpf):
    c = clsd_factory(net.a)
    names = veths(net.a, "rs", 3)
    r = put_policy(c.api, "keep", policy({"ifname": ["rs*"]}, ingress=[filt("count", bpf.count, priority=10)]))
    assert r.status == 200, r
    ids = {d: clsd_filters(net.a, d)[0].id for d in names}
    c.stop(signal.SIGTERM)
    c.start()
    wait_for(lambda: c.api.get("/policies/keep").json["summary"]["configured"] == 3, timeout=5)
    assert {d: clsd_filters(net.a, d)[0].id for d in names} == ids
    assert "loaded program" not in c.log().split("listening")[-1]
    # A link that came while clsd was stopped is matched at start.
    c.stop(signal.SIGTERM)
    veths(net.a, "rsx", 1)
    net.a.run("ip", "link", "set", "rsx0", "name", "rs9")
    c.start()
    wait_for(lambda: len(clsd_filters(net.a, "rs9")) == 1, timeout=5)


def test_a_port_leaving_a_bridge_is_not_its_device_going(clsd, api, bpf, net):
    """The bridge tells of a port leaving with an AF_BRIDGE RTM_DELLINK: the device is still there, and
    its document stays configured (it once went pending)."""
    (dev,) = veths(net.a, "bp", 1)
    net.a.run("ip", "link", "add", "br1", "type", "bridge")
    net.a.run("ip", "link", "set", dev, "master", "br1")
    assert api.put_classifier(dev, {"ingress": [filt("count", bpf.count, priority=10)]}).status == 200
    net.a.run("ip", "link", "set", dev, "nomaster")
    net.a.run("ip", "link", "set", dev, "master", "br1")
    net.a.run("ip", "link", "set", dev, "nomaster")
    r = api.get_classifier(dev)
    assert r.json["state"] == "configured", r.json
    assert len(clsd_filters(net.a, dev)) == 1
    assert "interface removed" not in clsd.log()


def test_clsctl_policy_apply_diff_get_ls_rm(clsd, bpf, net, workdir):
    a, b = veths(net.a, "ct", 2)
    net.a.add_foreign_filter(b, 10, bpf.drop_port)
    doc = write_doc(workdir, "p.json", policy({"ifname": ["ct*"]}, ingress=[filt("count", bpf.count, priority=10)]))
    p = clsd.ctl("policy", "diff", "web", doc, check=1)  # 1: applying it would change something
    assert "dry run, nothing changed" in p.stdout
    rows = find_table(p.stdout, ["IFNAME", "ACTION", "DIRECTION", "PREF", "NAME", "REASON"])
    assert [r[:2] for r in rows[1:]] == [[a, "add"], [b, "conflict"]], rows
    assert clsd_filters(net.a, a) == []
    # apply: one row per interface; the one that failed makes the exit status 1, with one line.
    p = clsd.ctl("policy", "apply", "web", doc, check=1)
    rows = find_table(p.stdout, ["NETNS", "IFNAME", "STATE", "MATCHED", "ERROR"])
    assert [r[1:4] for r in rows[1:]] == [[a, "configured", "yes"], [b, "failed", "yes"]], rows
    assert p.stderr.count("\n") == 1 and "priority_taken" in p.stderr, p.stderr
    assert len(clsd_filters(net.a, a)) == 1
    p = clsd.ctl("policy", "ls", check=0)
    assert find_table(p.stdout, ["NAME", "GENERATION", "ORDER", "MATCHED", "CONFIGURED", "PENDING",
                                 "FAILED", "CONFLICT", "OVERRIDDEN"])[1] == ["web", "1", "0", "2", "1", "0", "1", "0", "0"]
    p = clsd.ctl("policy", "get", "web", check=0)
    rows = find_table(p.stdout, ["NETNS", "IFNAME", "STATE", "INGRESS", "EGRESS"])
    assert rows[1][1:4] == [a, "configured", "applied"], rows
    p = clsd.ctl("--if-match", "5", "policy", "apply", "web", doc, check=1)
    assert "precondition_failed" in p.stderr
    clsd.ctl("policy", "rm", "web", check=0)
    assert clsd_filters(net.a, a) == []
    p = clsd.ctl("policy", "get", "web", check=1)
    assert p.stderr.startswith("clsctl: web: policy_not_found"), p.stderr
    p = clsd.ctl("policy", check=2)
    assert "missing command after 'policy'" in p.stderr


def test_an_object_a_policy_uses_cannot_be_removed(api, bpf, net):
    veths(net.a, "ou", 1)
    digest = api.upload_ok(bpf.count)
    assert put_policy(api, "uses", policy({"ifname": ["ou*"]}, ingress=[filt("c", digest, priority=10)])).status == 200
    err = assert_error(api.delete("/objects/" + digest), 409, "object_in_use")
    assert "policy uses" in err["message"]
    assert api.delete("/policies/uses").status == 200
    assert api.delete("/objects/" + digest).status == 204


def test_metrics_count_each_policys_interfaces_by_state(api, bpf, net):
    a, b = veths(net.a, "mt", 2)
    net.a.add_foreign_filter(b, 10, bpf.drop_port)
    assert put_policy(api, "m", policy({"ifname": ["mt*"]}, ingress=[filt("c", bpf.count, priority=10)])).status == 200
    samples, types = parse_exposition(scrape(api))
    assert types["clsd_policy_interfaces"] == "gauge"
    assert value(samples, "clsd_policy_interfaces", policy="m", state="configured") == 1
    assert value(samples, "clsd_policy_interfaces", policy="m", state="failed") == 1
    assert value(samples, "clsd_documents", source="policy", state="configured") == 1


def test_a_policy_changed_over_1000_interfaces_applies_only_the_difference(api, bpf, net):
    names = veths(net.a, "m", 1000)
    samples, _ = parse_exposition(scrape(api))
    dumps, sends = (value(samples, "clsd_netlink_requests_total", type="dump"),
                    value(samples, "clsd_netlink_sends_total"))
    t = time.monotonic()
    r = put_policy(api, "many", policy({"ifname": ["m*"]}, ingress=[filt("count", bpf.count, priority=10)]))
    first = time.monotonic() - t
    assert r.status == 200, r
    assert sum(1 for x in r.json["results"] if x["state"] == "configured") == 1000
    before = {d: net.a.filter_at(d, 10).id for d in ("m0", "m500", "m999")}
    samples, _ = parse_exposition(scrape(api))
    # Links clsd saw appear have no clsact: nothing to dump, and each one's clsact goes out with its
    # filter in one sendmsg (one round trip per interface).
    dumps = value(samples, "clsd_netlink_requests_total", type="dump") - dumps
    sends = value(samples, "clsd_netlink_sends_total") - sends
    print("first PUT: %d dumps, %d sendmsg" % (dumps, sends))
    assert dumps <= 2 and 1000 <= sends <= 1010, (dumps, sends)
    changes = value(samples, "clsd_netlink_requests_total", type="other")
    # The same filters, eleven interfaces fewer (m99 and m990-m999 leave the match).
    t = time.monotonic()
    r = put_policy(api, "many", policy({"ifname": ["m[0-8]*", "m9[0-8]*", "m9"]},
                                       ingress=[filt("count", bpf.count, priority=10)]))
    second = time.monotonic() - t
    assert r.status == 200, r
    removed = sorted(x["ifname"] for x in r.json["results"] if not x["matched"])
    assert removed == ["m99"] + ["m99%d" % i for i in range(10)], removed
    samples, _ = parse_exposition(scrape(api))
    made = value(samples, "clsd_netlink_requests_total", type="other") - changes
    print("1000 interfaces: first PUT %.0f ms, second %.0f ms, %d netlink changes for the second"
          % (first * 1000, second * 1000, made))
    # Only the difference reached the kernel: eleven filters (and their clsact) removed, nothing else.
    assert made <= 30, made
    assert net.a.filter_at("m999", 10) is None
    assert {d: net.a.filter_at(d, 10).id for d in ("m0", "m500")} == {d: before[d] for d in ("m0", "m500")}


@pytest.mark.parametrize("delay_ms", [0, 5, 20, 60])
def test_a_kill_during_a_bulk_apply_leaves_the_old_or_the_new_policy_and_the_kernel_matching(
        net, clsd_factory, bpf, delay_ms):
    """kill -9 while a policy is applied to 200 interfaces; after the restart the store holds the
    old or the new policy, and every interface runs exactly what the stored one declares."""
    import threading
    c = clsd_factory(net.a)
    names = veths(net.a, "k", 200)
    old = policy({"ifname": ["k*"]}, ingress=[filt("f", bpf.count, priority=10)])
    new = policy({"ifname": ["k*"]}, ingress=[filt("f", bpf.drop_port, priority=10)])
    assert put_policy(c.api, "bulk", old).status == 200
    answers = []

    def put():
        try:
            answers.append(put_policy(c.api, "bulk", new).status)
        except OSError:
            answers.append(None)

    t = threading.Thread(target=put)
    t.start()
    time.sleep(delay_ms / 1000)
    c.proc.kill()
    c.proc.wait()
    c.proc = None
    t.join(10)
    c.start()
    g = c.api.get("/policies/bulk").json
    assert g["generation"] in (1, 2), g
    want = "count_pkts" if g["generation"] == 1 else "drop_port"
    if answers == [200]:
        assert g["generation"] == 2, "answered 200 but the store lost the policy"
    wait_for(lambda: c.api.get("/policies/bulk").json["summary"]["configured"] == 200, timeout=10)
    progs = {net.a.filter_at(d, 10).prog_name for d in names}
    assert progs == {want}, (g["generation"], progs)


def write_match_hog(hogs_dir, file, body):
    os.makedirs(hogs_dir, exist_ok=True)
    path = os.path.join(hogs_dir, file)
    with open(path + ".tmp", "w") as f:
        json.dump(body, f)
    os.rename(path + ".tmp", path)
    return path


def test_a_hog_with_match_is_a_policy_of_the_configuration(net, clsd_factory, bpf, workdir):
    """A file of hogs.d with "match" instead of "ifname": applied like a policy, read-only to the API,
    winning over an interface's own document on its hooks; SIGHUP applies what changed."""
    hogs_dir = os.path.join(workdir, "hogs.d")
    a, b = veths(net.a, "hg", 2)
    path = write_match_hog(hogs_dir, "edge.json", policy({"ifname": ["hg*"]},
                                                        ingress=[filt("cfg", bpf.count, priority=10)]))
    c = clsd_factory(net.a, name="clsd", args=("--hogs-dir", hogs_dir))
    assert [f.name for f in clsd_filters(net.a, a)] == ["clsd:cfg"]
    g = c.api.get("/policies/edge").json
    assert g["hog"] == path and g["summary"]["configured"] == 2, g
    # Read-only to the API.
    assert_error(put_policy(c.api, "edge", policy({"ifname": ["x"]}, ingress=[filt("x", bpf.count)])),
                 409, "hog_owned")
    assert_error(c.api.delete("/policies/edge"), 409, "hog_owned")
    # It wins over the interface's own document on its hook; the document is kept, overridden.
    r = c.api.put_classifier(a, {"ingress": [filt("doc", bpf.count, priority=20)]})
    assert r.status == 200, r
    assert r.json["overridden"] == ["ingress"], r.json
    assert [f.name for f in clsd_filters(net.a, a)] == ["clsd:cfg"]
    # An API policy ranks below it.
    assert put_policy(c.api, "api", policy({"ifname": ["hg*"]}, order=-100,
                                           ingress=[filt("p", bpf.count, priority=30)])).status == 200
    assert [f.name for f in clsd_filters(net.a, b)] == ["clsd:cfg"]
    # SIGHUP after the file changed: applied; an unchanged one would touch nothing.
    write_match_hog(hogs_dir, "edge.json", policy({"ifname": ["hg1"]}, ingress=[filt("cfg", bpf.count, priority=10)]))
    reload(c)
    wait_for(lambda: [f.name for f in clsd_filters(net.a, a)] == ["clsd:doc"], timeout=5,
             what="the document back on hg0")
    assert c.api.get_classifier(a).json["repairs"] == 0, "a policy's change was counted as a repair"
    assert [f.name for f in clsd_filters(net.a, b)] == ["clsd:cfg"]
    # The file goes: the API's policy takes hg1.
    os.unlink(path)
    reload(c)
    wait_for(lambda: [f.name for f in clsd_filters(net.a, b)] == ["clsd:p"], timeout=5)
    assert_error(c.api.get("/policies/edge"), 404, "policy_not_found")
    # clsd --check validates such files too.
    write_match_hog(hogs_dir, "bad.json", policy({"ifname": []}, ingress=[filt("x", bpf.count)]))
    p = run([CLSD, "--check", "--hogs-dir", hogs_dir], check=False)
    assert p.returncode == 1 and "bad.json" in p.stderr and "match.ifname" in p.stderr, p.stderr


def test_a_policys_configuration_map_is_the_policys_or_each_interfaces_own(clsd, api, bpf, net):
    names = veths(net.a, "pb", 2)

    def body(**m):
        return policy({"ifname": ["pb*"]}, ingress=[filt("drop", bpf.drop_port, priority=10,
                                                         maps={"blocked_ports": dict(config=True, **m)})])

    def entries(dev):
        r = api.get("/ifaces/%s/classifier/maps/blocked_ports" % dev)
        assert r.status == 200, r
        return {e["key"]: e["value"] for e in r.json["entries"]}, r.json["config"]

    def write(method, dev, key, value=None):
        b = {"key": key} if value is None else {"key": key, "value": value}
        r = api.request(method, "/ifaces/%s/classifier/maps/blocked_ports/entries" % dev, body=b)
        assert r.status == 204, r

    assert put_policy(api, "bl", body()).status == 200
    write("PUT", names[0], 7777, 1)  # one map, shared: both interfaces have it
    assert [entries(d) for d in names] == [({7777: 1}, {"stored": 1})] * 2
    # each interface's own map (a new load each) starts with the policy's entries
    shared_id = api.get("/ifaces/pb0/classifier/maps/blocked_ports").json["id"]
    assert put_policy(api, "bl", body(shared=False)).status == 200
    ids = {api.get("/ifaces/%s/classifier/maps/blocked_ports" % d).json["id"] for d in names}
    assert len(ids) == 2 and shared_id not in ids, (shared_id, ids)
    assert [entries(d) for d in names] == [({7777: 1}, {"stored": 1})] * 2
    write("PUT", names[1], 7778, 1)
    write("DELETE", names[0], 7777)
    assert [entries(d)[0] for d in names] == [{}, {7777: 1, 7778: 1}]
    with open(os.path.join(clsd.state_dir, "map-entries.json")) as f:
        owners = json.load(f)["owners"]
    assert owners == {"policy:bl": {"drop": {"blocked_ports": [{"key": 7777, "value": 1}]}},
                      "policy:bl@/pb0": {"drop": {"blocked_ports": []}},
                      "policy:bl@/pb1": {"drop": {"blocked_ports": [{"key": 7777, "value": 1},
                                                                    {"key": 7778, "value": 1}]}}}, owners
    # written through the policy: into every interface's map, and the policy's set that a new one starts with
    r = api.request("PUT", "/policies/bl/maps/blocked_ports/entries", body={"key": 7779, "value": 1})
    assert r.status == 204, r
    assert [entries(d)[0] for d in names] == [{7779: 1}, {7777: 1, 7778: 1, 7779: 1}]
    net.a.run("ip", "link", "add", "pb9", "type", "veth", "peer", "name", "zpb9")
    net.a.run("ip", "link", "set", "pb9", "up")
    wait_for(lambda: api.get("/ifaces/pb9/classifier").json.get("state") == "configured", what="pb9 configured")
    assert entries("pb9") == ({7777: 1, 7779: 1}, {"stored": 2})
    listed = api.get("/policies/bl/maps").json
    own = [m for m in listed["maps"] if m["name"] == "blocked_ports"]
    assert sorted(u["ifname"] for m in own for u in m["filters"]) == ["pb0", "pb1", "pb9"], listed
    assert_error(api.get("/policies/bl/maps/blocked_ports"), 409, "map_ambiguous")
    clsd.ctl("map", "set", "policy:bl", "blocked_ports", "7781", "1", check=0)
    clsd.ctl("map", "rm", "policy:bl", "blocked_ports", "7781", check=0)
    out = clsd.ctl("maps", "policy:bl", check=0).stdout
    assert "pb0:ingress/drop" in out and "pb9:ingress/drop" in out, out
    assert clsd.ctl("map", "rm", "policy:nope", "blocked_ports", "1", check=1).stderr.count("\n") == 1
    r = api.request("DELETE", "/policies/bl/maps/blocked_ports/entries", body={"key": 7779})
    assert r.status == 204, r
    assert [entries(d)[0] for d in names + ["pb9"]] == [{}, {7777: 1, 7778: 1}, {7777: 1}]
    # one interface's map, a page at a time through the policy (by its id: each interface has its own)
    own_id = api.get("/ifaces/pb1/classifier/maps/blocked_ports").json["id"]
    first = api.get("/policies/bl/maps/%d?limit=1" % own_id).json
    assert first["count"] == 1 and first["next_cursor"], first
    rest = api.get("/policies/bl/maps/%d?limit=10&cursor=%s" % (own_id, first["next_cursor"])).json
    assert {e["key"] for e in first["entries"] + rest["entries"]} == {7777, 7778} and rest["next_cursor"] is None
    assert_error(api.get("/policies/bl/maps?cursor=" + first["next_cursor"]), 400, "invalid_value")
    # an interface that leaves takes its own set with it
    net.a.run("ip", "link", "del", "pb1")
    wait_for(lambda: "policy:bl@/pb1" not in json.load(open(os.path.join(clsd.state_dir, "map-entries.json")))["owners"],
             what="pb1's own set forgotten")
    assert api.request("DELETE", "/policies/bl").status in (200, 204)
    with open(os.path.join(clsd.state_dir, "map-entries.json")) as f:
        assert json.load(f)["owners"] == {}


# when the deletes begin after the PUT (negative: the PUT that long after them): the apply of 100 takes
# ~30 ms, deleting 50 links longer; at -5 ms the last interfaces the apply reaches are the ones deleted
DELETE_AFTER = float(os.environ.get("CLSD_HALF_WAY_DELAY", "-0.005"))


def test_an_apply_the_kernel_refuses_half_way_leaves_each_interface_wholly_old_or_new_and_says_which(clsd, api, bpf,
                                                                                                   net):
    """A policy on both hooks of 100 veths changes to another filter while half of the veths are deleted
    under it (every other one, from the last, as the apply goes): every interface left holds the old filter on both hooks or the new one on both, never one
    of each, and the answer and GET say which (configured: the new one; pending: its link went under the
    apply, not a kernel_error)."""
    import threading
    names = veths(net.a, "hw", 100)
    old = policy({"ifname": ["hw*"]}, ingress=[filt("old-in", bpf.count, priority=10)],
                 egress=[filt("old-out", bpf.count, priority=10)])
    assert put_policy(api, "hw", old).status == 200
    for dev in names:
        assert [f.name for f in clsd_filters(net.a, dev)] == ["clsd:old-in"]
    new = policy({"ifname": ["hw*"]}, ingress=[filt("new-in", bpf.drop_port, priority=10)],
                 egress=[filt("new-out", bpf.drop_port, priority=10)])
    doomed = names[1::2]
    started = threading.Event()

    def delete():
        started.wait(5)
        time.sleep(max(DELETE_AFTER, 0))
        net.a.run("ip", "-batch", "-", input="".join("link del %s\n" % d for d in reversed(doomed)))

    t = threading.Thread(target=delete)
    t.start()
    started.set()
    time.sleep(max(-DELETE_AFTER, 0))  # a negative delay: the PUT goes that long after the deletes began
    r = put_policy(api, "hw", new)
    t.join()
    assert r.status == 200, r
    answered = results(r)
    present = set(net.a.link_names())
    mixed, told = [], []
    for dev in names:
        if dev not in present:
            continue
        ing = [f.name.split("-")[0] for f in clsd_filters(net.a, dev)]
        eg = [f.name.split("-")[0] for f in clsd_filters(net.a, dev, "egress")]
        if ing != eg:
            mixed.append((dev, ing, eg))
        state = answered[dev]["state"] if dev in answered else None
        if (ing == ["clsd:new"]) != (state == "configured"):
            told.append((dev, ing, answered.get(dev)))
    assert mixed == [], mixed
    assert told == [], told
    # a link that went under the apply is pending there, not a kernel error
    assert [d for d, a in answered.items() if a["state"] == "failed"] == [], answered
    # every interface that stayed is reconciled to the new one (a failure retried), and GET says so
    stayed = [d for d in names if d in present]
    wait_for(lambda: all([f.name for f in clsd_filters(net.a, d, h)] == ["clsd:new-" + ("in" if h == "ingress" else "out")]
                         for d in stayed for h in ("ingress", "egress")), timeout=10, what="the new filter everywhere")
    seen = {}

    def all_configured():
        seen.clear()
        seen.update({i["ifname"]: i for i in api.get("/policies/hw").json["ifaces"]})
        return {d: i["policy_state"] for d, i in seen.items()} == {d: "configured" for d in stayed}
    try:
        wait_for(all_configured, timeout=10, what="GET saying configured on each")
    except AssertionError:
        wrong = [i for i in seen.values() if i["policy_state"] != "configured"]
        said = [l for l in clsd.log().splitlines() if any(i["ifname"] + ":" in l for i in wrong)]
        raise AssertionError("GET /policies/hw: %r; clsd said: %s" % (wrong, "\n".join(said)))


def test_a_policy_the_kernel_refuses_on_one_hook_leaves_that_interface_wholly_old_and_retries_it(api, bpf, net):
    """A policy whose new version adds an egress filter under the qdisc 7:, which one veth has (HTB), one
    lacks and one has as a pfifo that cannot hold filters. The one that lacks it is refused at the look,
    before anything changes; the pfifo one only when the kernel refuses the egress filter after the new
    ingress filter was made there: that one is rolled back. Both keep the old version wholly (never the
    new ingress beside nothing on egress), fail with parent_not_found in the answer and in GET, and the
    first says so in the dry run too (the pfifo's refusal no look can foresee). The HTB one takes the new
    version whole; once the operator mends the qdiscs, the retries apply it on the others."""
    a, b, c = veths(net.a, "pq", 3)

    def under_7(dev):
        out = net.a.run("tc", "filter", "show", "dev", dev, "parent", "7:", check=False).stdout
        return [f.name for f in parse_tc_filters(out) if f.name.startswith("clsd:")]

    net.a.run("tc", "qdisc", "add", "dev", a, "root", "handle", "7:", "htb")
    net.a.run("tc", "qdisc", "add", "dev", c, "root", "handle", "7:", "pfifo")
    old = policy({"ifname": ["pq*"]}, ingress=[filt("old", bpf.count, priority=10)])
    assert put_policy(api, "pq", old).status == 200
    new = policy({"ifname": ["pq*"]}, ingress=[filt("new", bpf.drop_port, priority=10)],
                 egress=[filt("cls", bpf.count, priority=5, parent="7:")])
    want = {a: "configured", b: "failed", c: "failed"}
    dry = api.request("PUT", "/policies/pq?dry_run=1", body=new)
    assert {k: v["state"] for k, v in results(dry).items()} == dict(want, **{c: "configured"}), dry.json
    assert results(dry)[b]["error"]["code"] == "parent_not_found", dry.json
    r = put_policy(api, "pq", new)
    assert r.status == 200, r
    assert {k: v["state"] for k, v in results(r).items()} == want, r.json
    for dev in (b, c):
        assert results(r)[dev]["error"]["code"] == "parent_not_found", r.json
        assert "parent 7:0 is not a qdisc or class of %s" % dev in results(r)[dev]["error"]["message"], r.json
        # wholly old: the old filter, nothing of the new version
        assert [f.name for f in clsd_filters(net.a, dev)] == ["clsd:old"], dev
        assert under_7(dev) == [], dev
        assert api.get_classifier(dev).json["state"] == "failed"
    assert [f.name for f in clsd_filters(net.a, a)] == ["clsd:new"]
    assert under_7(a) == ["clsd:cls"]
    got = {i["ifname"]: i["policy_state"] for i in api.get("/policies/pq").json["ifaces"]}
    assert got == want, got
    # its retries (the first after 1 s) apply it whole or put the kernel back, as the change did
    time.sleep(2.5)
    for dev in (b, c):
        assert [f.name for f in clsd_filters(net.a, dev)] == ["clsd:old"], dev
        assert under_7(dev) == [], dev
        assert api.get_classifier(dev).json["state"] == "failed"
    # the operator mends the qdiscs: the retries (with their backoff) apply the new version there
    net.a.run("tc", "qdisc", "add", "dev", b, "root", "handle", "7:", "htb")
    net.a.run("tc", "qdisc", "del", "dev", c, "root")
    net.a.run("tc", "qdisc", "add", "dev", c, "root", "handle", "7:", "htb")
    for dev in (b, c):
        wait_for(lambda: [f.name for f in clsd_filters(net.a, dev)] == ["clsd:new"], timeout=15,
                 what="the new version on %s after its qdisc was mended" % dev)
    wait_for(lambda: {i["ifname"]: i["policy_state"] for i in api.get("/policies/pq").json["ifaces"]} ==
             {d: "configured" for d in (a, b, c)}, timeout=10, what="GET configured on all three")
