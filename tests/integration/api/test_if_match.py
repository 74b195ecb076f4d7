"""If-Match, in one place: a document's and a policy's generation is their ETag; a PUT or DELETE with an
If-Match that is not the current generation is 412 precondition_failed and changes nothing (the kernel
included); "*" asks only that it exist; a dry run honours it as the change would; clsctl's --if-match is
the same header. (test_errors.py's order of checks puts If-Match after the document and before objects.)"""

from harness.api import assert_error
from harness.base import filt
from harness.policies import put_policy


def test_a_stale_if_match_is_412_for_put_and_delete_and_changes_nothing(api, bpf, net):
    digest = api.upload_ok(bpf.count)
    doc = {"ingress": [filt("web", digest)]}
    # No document yet: nothing can match a generation.
    assert_error(api.put_classifier(net.if_a, doc, headers={"If-Match": '"1"'}), 412, "precondition_failed")
    r = api.put_classifier(net.if_a, doc)
    assert r.status == 200, r
    stale = '"%d"' % (r.json["generation"] + 5)
    err = assert_error(api.put_classifier(net.if_a, {"ingress": [filt("web", digest, priority=9)]},
                                          headers={"If-Match": stale}), 412, "precondition_failed")
    assert err["message"]
    assert api.get_classifier(net.if_a).json["generation"] == r.json["generation"]
    assert [f.pref for f in net.a.filters(net.if_a)] == [1]
    assert_error(api.delete_classifier(net.if_a, headers={"If-Match": stale}), 412, "precondition_failed")
    assert api.get_classifier(net.if_a).status == 200
    assert api.delete_classifier(net.if_a, headers={"If-Match": r.headers["ETag"]}).status == 204





def test_star_a_bare_generation_policies_dry_runs_and_clsctl_speak_the_same_precondition(clsd, api, bpf, net, workdir):
    digest = api.upload_ok(bpf.count)
    doc = {"ingress": [filt("web", digest, priority=10)]}
    # "*": only if it exists; nothing is there yet
    assert_error(api.put_classifier(net.if_a, doc, headers={"If-Match": "*"}), 412, "precondition_failed")
    r = api.put_classifier(net.if_a, doc)
    assert r.status == 200 and r.headers["ETag"] == '"%d"' % r.json["generation"], r
    gen = r.json["generation"]
    moved = {"ingress": [filt("web", digest, priority=11)]}

    def dry(body, headers):
        return api.request("PUT", "/ifaces/%s/classifier?dry_run=1" % net.if_a, body=body, headers=headers)
    # a dry run answers what the change would, the precondition included, and changes nothing
    assert_error(dry(moved, {"If-Match": '"%d"' % (gen + 1)}), 412,
                 "precondition_failed")
    assert dry(moved, {"If-Match": str(gen)}).status == 200
    # anything that is not a generation meets none
    for bad in ('"abc"', "W/\"%d\"" % gen, "", '"-1"'):
        assert_error(api.put_classifier(net.if_a, moved, headers={"If-Match": bad}), 412, "precondition_failed")
    assert [f.pref for f in net.a.filters(net.if_a) if f.name == "clsd:web"] == [10]
    # a bare generation and "*" both match the document that is there
    r = api.put_classifier(net.if_a, moved, headers={"If-Match": str(gen)})
    assert r.status == 200 and r.json["generation"] == gen + 1, r
    assert api.put_classifier(net.if_a, doc, headers={"If-Match": "*"}).status == 200
    assert [f.pref for f in net.a.filters(net.if_a) if f.name == "clsd:web"] == [10]
    # clsctl --if-match is the same header: a stale one exits 1 with one line, the current one applies
    path = "%s/doc.json" % workdir
    with open(path, "w") as f:
        f.write('{"ingress": [{"name": "web", "object": "%s", "priority": 12}]}' % digest)
    now = api.get_classifier(net.if_a).json["generation"]
    p = clsd.ctl("--if-match", str(now - 1), "apply", net.if_a, path, check=1)
    assert len(p.stderr.strip().splitlines()) == 1, p.stderr
    clsd.ctl("--if-match", str(now), "apply", net.if_a, path, check=0)
    assert [f.pref for f in net.a.filters(net.if_a) if f.name == "clsd:web"] == [12]
    # a policy: its generation is its ETag too, for PUT and DELETE
    pol = {"match": {"ifname": ["nothing-matches-*"]}, "ingress": [filt("p", digest, priority=30)]}
    r = put_policy(api, "pol", pol)
    assert r.status == 200 and r.headers["ETag"] == '"%d"' % r.json["generation"], r
    stale = {"If-Match": '"%d"' % (r.json["generation"] + 1)}
    assert_error(put_policy(api, "pol", dict(pol, order=5), headers=stale), 412, "precondition_failed")
    assert_error(api.delete("/policies/pol", headers=stale), 412, "precondition_failed")
    assert api.get("/policies/pol").status == 200
    assert api.delete("/policies/pol", headers={"If-Match": r.headers["ETag"]}).status in (200, 204)
    assert api.get("/policies/pol").status == 404
