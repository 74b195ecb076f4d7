"""Every failure answers {"error":{"code","message"}} with the status of the contract's table, and
changes nothing."""

import os
import stat

import pytest

from harness.api import assert_error, Response, UnixHTTPConnection
from harness.base import file_digest, filt


UNKNOWN_DIGEST = "sha256:" + "ab" * 32


def put_raw(api, ifname, body, content_type="application/json", headers=None):
    return api.request("PUT", "/ifaces/%s/classifier" % ifname, body=body, content_type=content_type,
                       headers=headers)


# ---- 400


@pytest.mark.parametrize("body", [b"{", b"", b"not json", b'{"ingress": [}', b'{"ingress":[],"ingress":[]}'])
def test_malformed_json_is_400_and_stores_nothing(api, net, body):
    assert_error(put_raw(api, net.if_a, body), 400, "malformed_json")
    assert_error(api.get_classifier(net.if_a), 404, "document_not_found")


def test_an_unknown_top_level_field_is_400_naming_it(api, net):
    err = assert_error(api.put_classifier(net.if_a, {"ingress": [], "sideways": []}), 400, "unknown_field")
    assert "sideways" in err["message"]


def test_an_unknown_field_of_a_filter_is_400_naming_it(api, bpf, net):
    digest = api.upload_ok(bpf.count)
    err = assert_error(api.put_classifier(net.if_a, {"ingress": [filt("web", digest, colour="red")]}), 400,
                       "unknown_field")
    assert "colour" in err["message"]
    assert_error(api.get_classifier(net.if_a), 404, "document_not_found")
    assert net.a.filters(net.if_a) == []


@pytest.mark.parametrize("doc", [
    {"ingress": [{"name": "web", "object": "@", "priority": "x"}]},
    {"ingress": [{"name": "web", "object": "@", "direct_action": "yes"}]},
    {"ingress": [{"name": 7, "object": "@"}]},
    {"ingress": {"name": "web"}},
    [],
], ids=["priority", "direct_action", "name", "ingress", "document"])
def test_a_field_of_the_wrong_type_is_400(api, bpf, net, doc):
    digest = api.upload_ok(bpf.count)
    if isinstance(doc, dict) and isinstance(doc.get("ingress"), list):
        doc["ingress"][0]["object"] = digest
    assert_error(api.put_classifier(net.if_a, doc), 400, "wrong_type")


def test_wrong_type_names_the_field(api, bpf, net):
    digest = api.upload_ok(bpf.count)
    err = assert_error(api.put_classifier(net.if_a, {"ingress": [filt("web", digest, priority="x")]}), 400,
                       "wrong_type")
    assert "priority" in err["message"]


@pytest.mark.parametrize("missing", ["name", "object"])
def test_a_missing_required_field_is_400_naming_it(api, bpf, net, missing):
    f = filt("web", api.upload_ok(bpf.count))
    del f[missing]
    err = assert_error(api.put_classifier(net.if_a, {"ingress": [f]}), 400, "missing_field")
    assert missing in err["message"]


@pytest.mark.parametrize("field,value", [("priority", 0), ("priority", 65536), ("name", "no spaces"),
                                         ("name", "x" * 33), ("classid", "nope"), ("classid", " 1: 10"),
                                         ("classid", "0x1:0x10"), ("classid", "+1:-0"), ("classid", "00001:10"),
                                         ("classid", "1:10000"), ("object", "relative.o")])
def test_a_value_out_of_range_is_400_naming_the_field(api, bpf, net, field, value):
    f = filt("web", api.upload_ok(bpf.count))
    f[field] = value
    err = assert_error(api.put_classifier(net.if_a, {"ingress": [f]}), 400, "invalid_value")
    assert field in err["message"]


def test_duplicate_priorities_and_names_are_422(api, bpf, net):
    d = api.upload_ok(bpf.count)
    assert_error(api.put_classifier(net.if_a, {"ingress": [filt("a", d, priority=3), filt("b", d, priority=3)]}),
                 422, "duplicate_priority")
    assert_error(api.put_classifier(net.if_a, {"ingress": [filt("a", d)], "egress": [filt("a", d)]}), 422,
                 "duplicate_name")
    assert net.a.filters(net.if_a) == [] and net.a.filters(net.if_a, "egress") == []


# ---- 404, 405


def test_an_unknown_route_is_404_route_not_found(api):
    for path in ("/nope", "/ifaces/va", "/ifaces/va/classifier/x", "/objects/a/b", "/"):
        assert_error(api.get(path), 404, "route_not_found")


def test_get_and_delete_of_an_interface_without_a_document_are_404(api, net):
    assert_error(api.get_classifier(net.if_a), 404, "document_not_found")
    assert_error(api.delete_classifier(net.if_a), 404, "document_not_found")


def test_object_not_found_in_document(api, net):
    err = assert_error(api.put_classifier(net.if_a, {"ingress": [filt("web", UNKNOWN_DIGEST)]}), 404,
                       "object_not_found")
    assert UNKNOWN_DIGEST in err["message"]
    assert_error(api.get_classifier(net.if_a), 404, "document_not_found")


@pytest.mark.parametrize("method,path,allowed", [
    ("PATCH", "/ifaces/va/classifier", {"GET", "PUT", "DELETE"}),
    ("POST", "/ifaces/va/classifier", {"GET", "PUT", "DELETE"}),
    ("PATCH", "/objects", {"GET", "POST"}),
    ("PUT", "/objects/" + UNKNOWN_DIGEST, {"GET", "DELETE"}),
    ("DELETE", "/ifaces", {"GET"}),
    ("POST", "/healthz", {"GET"}),
])
def test_a_method_a_route_does_not_take_is_405_with_allow(api, method, path, allowed):
    r = api.request(method, path, body=b"{}", content_type="application/json")
    assert_error(r, 405, "method_not_allowed")
    allow = {m.strip() for m in r.headers.get("Allow", "").split(",")}
    assert allowed <= allow, r.headers.get("Allow")
    assert method not in allow


# ---- 409


def test_priority_taken_by_a_foreign_filter(api, bpf, net):
    foreign = net.a.add_foreign_filter(net.if_a, 20, bpf.drop_port)
    digest = api.upload_ok(bpf.count)
    err = assert_error(api.put_classifier(net.if_a, {"ingress": [filt("web", digest, priority=20)]}), 409,
                       "priority_taken")
    assert "20" in err["message"]
    after = net.a.filters(net.if_a)
    assert [(f.pref, f.id, f.tag, f.name, f.handle) for f in after] == [
        (20, foreign.id, foreign.tag, foreign.name, foreign.handle)]
    assert_error(api.get_classifier(net.if_a), 404, "document_not_found")


def test_priority_taken_leaves_the_old_document(api, bpf, net):
    digest = api.upload_ok(bpf.count)
    r = api.put_classifier(net.if_a, {"ingress": [filt("web", digest, priority=10)]})
    assert r.status == 200, r
    foreign = net.a.add_foreign_filter(net.if_a, 20, bpf.drop_port)
    assert_error(api.put_classifier(net.if_a, {"ingress": [filt("web", digest, priority=10),
                                                           filt("more", digest, priority=20)]}),
                 409, "priority_taken")
    g = api.get_classifier(net.if_a)
    assert g.json["generation"] == r.json["generation"]
    assert [(f.pref, f.id) for f in net.a.filters(net.if_a)] == [
        (10, r.json["status"]["ingress"][0]["id"]), (20, foreign.id)]


# ---- 413


def test_bodies_over_their_limits_are_413(net, clsd_factory, bpf):
    c = clsd_factory(net.a, name="small", args=["--max-json-size", "1024", "--max-object-size", "4096"])
    api = c.api
    big_doc = {"ingress": [filt("web", "sha256:" + "0" * 64)], "egress": [], "pad": "x" * 2000}
    assert_error(api.put_classifier(net.if_a, big_doc), 413, "payload_too_large")
    assert os.path.getsize(bpf.count) > 4096
    assert_error(api.upload(bpf.count), 413, "payload_too_large")
    assert_error(api.upload(b"\x7fELF" + b"\0" * 5000), 413, "payload_too_large")
    assert api.healthy()
    assert api.get("/objects").json["objects"] == []
    # Under the limits, the same daemon reads bodies: refused for what they are, not for their size.
    assert_error(api.upload(b"\x7fELF" + b"\0" * 3000), 422, "invalid_object")
    assert_error(api.put_classifier(net.if_a, {"ingress": [filt("web", "sha256:" + "0" * 64)],
                                               "pad": "x" * 700}), 400, "unknown_field")


def test_an_object_file_over_max_object_size_is_413(net, clsd_factory, bpf):
    c = clsd_factory(net.a, name="small", args=["--max-object-size", "4096"])
    assert_error(c.api.put_classifier(net.if_a, {"ingress": [filt("web", bpf.count)]}), 413, "payload_too_large")
    assert c.api.healthy()


# ---- 415


def test_an_upload_without_octet_stream_is_415_and_stores_nothing(api, bpf, net):
    data = open(bpf.count, "rb").read()
    assert_error(api.upload(data, content_type="application/json"), 415, "unsupported_media_type")
    assert_error(api.upload(data, content_type=None), 415, "unsupported_media_type")
    assert api.get("/objects").json["objects"] == []
    digest = api.upload_ok(bpf.count)
    body = b'{"ingress":[{"name":"web","object":"%s"}]}' % digest.encode()
    assert_error(put_raw(api, net.if_a, body, content_type="text/plain"), 415, "unsupported_media_type")
    assert_error(api.get_classifier(net.if_a), 404, "document_not_found")
    assert put_raw(api, net.if_a, body, content_type="application/json; charset=utf-8").status == 200


# ---- 422


def test_an_xdp_program_for_a_tc_hook_is_422_wrong_program_type(api, bpf, net):
    digest = api.upload_ok(bpf.xdp)
    err = assert_error(api.put_classifier(net.if_a, {"ingress": [filt("x", digest, program="xdp_pass")]}), 422,
                       "wrong_program_type")
    assert "xdp_pass" in err["message"]
    assert net.a.filters(net.if_a) == []


def test_a_program_the_object_lacks_is_422_naming_it(api, bpf, net):
    digest = api.upload_ok(bpf.count)
    err = assert_error(api.put_classifier(net.if_a, {"ingress": [filt("x", digest, program="nope")]}), 422,
                       "program_not_found")
    assert "nope" in err["message"]


def test_an_object_with_two_classifiers_needs_one_named(api, bpf, net):
    digest = api.upload_ok(bpf.xdp)
    assert_error(api.put_classifier(net.if_a, {"ingress": [filt("x", digest)]}), 422, "program_ambiguous")
    # Naming one of the two resolves it.
    r = api.put_classifier(net.if_a, {"ingress": [filt("x", digest, program="tc_pass_too")]})
    assert r.status == 200, r
    assert net.a.filter_at(net.if_a, 1).prog_name == "tc_pass_too"


def test_invalid_object_no_tc_program(api, bpf):
    assert_error(api.upload(bpf.xdp_only), 422, "invalid_object")
    assert api.get("/objects").json["objects"] == []


@pytest.mark.parametrize("data", [os.urandom(3000), b"\x7fELF" + os.urandom(2000), b"x"],
                         ids=["random", "elf-magic", "one-byte"])
def test_garbage_uploaded_is_422_invalid_object_and_clsd_stays_healthy(api, data):
    err = assert_error(api.upload(data), 422, "invalid_object")
    assert "Unknown error" not in err["message"], err  # libbpf's own error numbers are named
    assert api.get("/objects").json["objects"] == []
    assert api.healthy()


def test_a_program_the_verifier_rejects_is_422_with_the_verifiers_log(api, bpf, net):
    digest = api.upload_ok(bpf.rejected)
    err = assert_error(api.put_classifier(net.if_a, {"ingress": [filt("bad", digest)]}), 422,
                       "verifier_rejected")
    assert "invalid access to packet" in err["detail"]
    assert "unchecked_read" in err["message"] or "bad" in err["message"]


def test_pinned_digest_of_a_path_must_match(api, bpf, net):
    other = api.upload_ok(bpf.drop_port)
    err = assert_error(api.put_classifier(net.if_a, {"ingress": [filt("web", bpf.count, digest=other)]}), 400,
                       "invalid_value")
    assert other in err["message"]
    r = api.put_classifier(net.if_a, {"ingress": [filt("web", bpf.count, digest=file_digest(bpf.count))]})
    assert r.status == 200, r


def test_digest_object_with_another_digest_is_invalid_value(api, bpf, net):
    # The document contradicts itself: 400, whether or not either object is stored.
    count, other = api.upload_ok(bpf.count), api.upload_ok(bpf.drop_port)
    err = assert_error(api.put_classifier(net.if_a, {"ingress": [filt("web", count, digest=other)]}), 400,
                       "invalid_value")
    assert "ingress[0].digest" in err["message"]


def test_empty_upload_is_invalid_object(api):
    assert_error(api.upload(b""), 422, "invalid_object")


def test_content_length_over_the_limit_on_any_route(net, clsd_factory):
    c = clsd_factory(net.a, name="small", args=["--max-json-size", "1024"])
    for method, path in (("GET", "/healthz"), ("DELETE", "/ifaces/va/classifier"), ("POST", "/nope")):
        r = c.api.request(method, path, body=b"x" * 5000, content_type="application/json")
        assert_error(r, 413, "payload_too_large")
    assert c.api.healthy()


def test_chunked_body_over_the_limit(net, clsd_factory):
    c = clsd_factory(net.a, name="small", args=["--max-json-size", "1024"])
    conn = UnixHTTPConnection(c.socket)
    try:
        chunks = (b'{"pad":"' + b"x" * 300 + b'"}' for _ in range(10))
        conn.request("PUT", "/ifaces/va/classifier", body=chunks, headers={"Content-Type": "application/json"},
                     encode_chunked=True)
        r = conn.getresponse()
        assert_error(Response(r.status, r.reason, r.headers, r.read()), 413, "payload_too_large")
    finally:
        conn.close()
    assert c.api.healthy()


def test_checks_run_in_the_documented_order(api, bpf, net):
    digest = api.upload_ok(bpf.count)
    rejected = api.upload_ok(bpf.rejected)
    assert api.put_classifier(net.if_a, {"ingress": [filt("web", digest, priority=10)]}).status == 200
    net.a.add_foreign_filter(net.if_a, 20, bpf.drop_port)
    stale = {"If-Match": '"99"'}
    # Content-Type before JSON syntax.
    assert_error(put_raw(api, net.if_a, b"{", content_type="text/plain"), 415, "unsupported_media_type")
    # JSON syntax before the interface name.
    assert_error(put_raw(api, "bad:name", b"{"), 400, "malformed_json")
    # The interface name before the document.
    assert_error(api.put_classifier("bad:name", {"x": 1}), 400, "invalid_value")
    # The document before If-Match.
    assert_error(api.put_classifier(net.if_a, {"x": 1}, headers=stale), 400, "unknown_field")
    # If-Match before objects.
    assert_error(api.put_classifier(net.if_a, {"ingress": [filt("web", UNKNOWN_DIGEST)]}, headers=stale), 412,
                 "precondition_failed")
    # Objects before conflicts.
    assert_error(api.put_classifier(net.if_a, {"ingress": [filt("web", UNKNOWN_DIGEST, priority=20)]}), 404,
                 "object_not_found")
    # Conflicts before loading programs.
    assert_error(api.put_classifier(net.if_a, {"ingress": [filt("web", rejected, priority=20)]}), 409,
                 "priority_taken")
    assert_error(api.put_classifier(net.if_a, {"ingress": [filt("web", rejected, priority=30)]}), 422,
                 "verifier_rejected")
    assert [f.pref for f in net.a.filters(net.if_a)] == [10, 20]


@pytest.mark.parametrize("method", ["GET", "PUT", "DELETE"])
@pytest.mark.parametrize("ifname", ["x" * 16, "x" * 63, "x" * 64, "x" * 300, "bad:name"])
def test_invalid_ifname_is_400_on_every_method(api, method, ifname):
    r = api.request(method, "/ifaces/%s/classifier" % ifname, body=b"{}" if method == "PUT" else None,
                    content_type="application/json" if method == "PUT" else None)
    assert_error(r, 400, "invalid_value")


@pytest.mark.parametrize("kind", ["fifo", "directory", "device"])
def test_object_path_that_is_not_a_regular_file(api, net, workdir, kind):
    """A FIFO without a writer must not block the daemon: it is refused at once."""
    path = {"fifo": os.path.join(workdir, "obj.fifo"), "directory": workdir,
            "device": os.path.join(workdir, "zero")}[kind]
    if kind == "fifo":
        os.mkfifo(path)
    if kind == "device":  # /dev/zero's twin inside an object directory (/dev is not one)
        os.mknod(path, 0o600 | stat.S_IFCHR, os.makedev(1, 5))
    err = assert_error(api.put_classifier(net.if_a, {"ingress": [filt("web", path)]}), 400, "invalid_value")
    assert "not a regular file" in err["message"], err
    assert api.healthy()


def test_actions_without_act_bpf_are_refused_with_the_alternative(api, bpf, net):
    if api.get("/version").json["act_bpf"] == "available":
        import pytest
        pytest.skip("this kernel has act_bpf; the refusal is for kernels without it")
    digest = api.upload_ok(bpf.count)
    doc = {"ingress": [filt("web", digest, actions=[{"object": digest, "program": "count_pkts"}])]}
    err = assert_error(api.put_classifier(net.if_a, doc), 422, "act_bpf_unavailable")
    assert "direct_action" in err["message"] and "CONFIG_NET_ACT_BPF" in err["message"]
    assert net.a.filters(net.if_a) == []
    assert_error(api.get_classifier(net.if_a), 404, "document_not_found")
