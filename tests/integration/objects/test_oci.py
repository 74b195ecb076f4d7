"""Objects pulled from a real OCI registry (Debian's docker-registry over TLS, in a namespace): plain
images and bpfman's bytecode images (OCI and Docker media types, pushed through the registry's API and
with skopeo), tags moving, bytes that do not match their digests, credentials (htpasswd and bearer
tokens), a registry that is down, a layer past the object limit, and cosign-format signatures made with
openssl. Every refusal leaves what was attached in place."""

import json
import os
import subprocess
import time

import pytest

from harness.api import assert_error
from harness.base import CLSD, file_digest, filt, run, status_of
from harness.observe import udp_exchange
from harness.registry import oci_layout, Registry

REPO = "ebpf/count"


def start_puller(net, clsd_factory, registry, workdir, *extra, name="puller", **creds):
    path = registry.registries_file(os.path.join(workdir, "registries-%s.json" % name), **creds)
    return clsd_factory(net.a, name=name, args=("--registries", path, *extra))


@pytest.fixture
def puller(net, clsd_factory, registry, workdir):
    """clsd in net.a with the registry's credentials and CA in its registries file."""
    return start_puller(net, clsd_factory, registry, workdir)


def ref(registry, tag_or_digest, repo=REPO):
    sep = "@" if tag_or_digest.startswith("sha256:") else ":"
    return "oci://%s/%s%s%s" % (registry.host, repo, sep, tag_or_digest)


def read(path):
    with open(path, "rb") as f:
        return f.read()


def put(clsd, net, obj, name="count", **kw):
    return clsd.api.put_classifier(net.if_a, {"ingress": [filt(name, obj, **kw)]})


def attached(clsd, net):
    doc = clsd.api.get_classifier(net.if_a).json
    return doc["document"]["ingress"][0], status_of(doc, doc["document"]["ingress"][0]["name"])


def counted(net, n=5):
    """n datagrams from b to a: True when they arrived (the filter's program runs on va)."""
    return udp_exchange(net.b, net.a, net.addr_a, n)


def test_a_plain_image_is_pulled_verified_and_attached_and_a_restart_pulls_nothing(net, registry, puller, bpf):
    md = registry.push_image(REPO, "v1", read(bpf.count))
    r = put(puller, net, ref(registry, "v1"))
    assert r.status == 200, r.body
    f = r.json["document"]["ingress"][0]
    # the stored document records what the tag named then, and the object's own digest
    assert f["object"] == "oci://%s/%s:v1@%s" % (registry.host, REPO, md)
    assert f["digest"] == file_digest(bpf.count)
    assert status_of(r.json, "count")["attached"] is True
    assert "plain image" in puller.log_this_run()
    # the GET's body put back pulls nothing: the pinned digest is known
    before = puller.log().count("pulled oci://")
    assert puller.api.put_classifier(net.if_a, puller.api.get_classifier(net.if_a).json["document"]).status == 200
    puller.restart()
    f2, st = attached(puller, net)
    assert f2["object"] == f["object"] and st["attached"] is True
    assert puller.log().count("pulled oci://") == before
    m = puller.api.get("/metrics").body.decode()
    assert "clsd_image_pulls_total 0" in m  # counted per run: this run pulled nothing


def test_bpfman_images_in_both_media_types_through_the_api_and_skopeo(net, registry, puller, bpf, workdir):
    """bpfman's bytecode image: the object in the layer's tar, the programs in io.ebpf.* labels; OCI's
    media types pushed through the API, Docker's (application/vnd.docker.image.rootfs.diff.tar.gzip)
    by skopeo --format v2s2 from an OCI layout; and an object whose name io.ebpf.filename gives among
    others in the layer."""
    labels = {"io.ebpf.programs": json.dumps({"count_pkts": "tc"}), "io.ebpf.maps": json.dumps({"counters": "array"})}
    registry.push_image("bpfman/count", "oci", read(bpf.count), labels=labels)
    r = put(puller, net, ref(registry, "oci", "bpfman/count"))
    assert r.status == 200, r.body
    assert "bpfman image" in puller.log_this_run()
    layout = os.path.join(workdir, "layout")
    oci_layout(layout, "v2s2", read(bpf.drop_port), dict(labels, **{"io.ebpf.programs": json.dumps({"drop_port": "tc"})}))
    md, mt = registry.skopeo_copy(layout, "v2s2", "bpfman/drop", fmt="v2s2")
    assert mt == "application/vnd.docker.distribution.manifest.v2+json"
    r = puller.api.put_classifier(net.if_a, {"ingress": [filt("count", ref(registry, "oci", "bpfman/count")),
                                                         filt("drop", ref(registry, "v2s2", "bpfman/drop"), priority=20)]})
    assert r.status == 200, r.body
    assert r.json["document"]["ingress"][1]["object"].endswith("@" + md)
    assert r.json["document"]["ingress"][1]["digest"] == file_digest(bpf.drop_port)
    # several files in the layer: io.ebpf.filename names the object; without it, two .o are refused
    registry.push_image("bpfman/two", "named", None, files={"./a.o": read(bpf.count), "./b.o": read(bpf.drop_port)},
                        labels={"io.ebpf.filename": "b.o", "io.ebpf.programs": json.dumps({"drop_port": "tc"})})
    registry.push_image("bpfman/two", "unnamed", None, files={"./a.o": read(bpf.count), "./b.o": read(bpf.drop_port)})
    r = put(puller, net, ref(registry, "named", "bpfman/two"))
    assert r.status == 200 and r.json["document"]["ingress"][0]["digest"] == file_digest(bpf.drop_port), r.body
    e = assert_error(put(puller, net, ref(registry, "unnamed", "bpfman/two")), 422, "image_invalid")
    assert "2 .o files" in e["message"] and "io.ebpf.filename" in e["message"]
    # a layer that is the object itself (an artifact)
    registry.push_image("raw/count", "v1", read(bpf.count), layer="raw")
    assert put(puller, net, ref(registry, "v1", "raw/count")).status == 200


def test_a_moved_tag_changes_nothing_until_the_document_is_applied_again(net, registry, puller, bpf):
    first = registry.push_image(REPO, "stable", read(bpf.count))
    assert put(puller, net, ref(registry, "stable")).status == 200
    second = registry.push_image(REPO, "stable", read(bpf.count_v2))
    assert second != first
    # a reconcile, a restart: the stored document still names the first image's object
    puller.restart()
    f, st = attached(puller, net)
    assert f["object"].endswith("@" + first) and f["digest"] == file_digest(bpf.count) and st["attached"] is True
    # applied again: the tag is read again
    r = put(puller, net, ref(registry, "stable"))
    assert r.status == 200
    assert r.json["document"]["ingress"][0]["object"].endswith("@" + second)
    assert r.json["document"]["ingress"][0]["digest"] == file_digest(bpf.count_v2)
    # by digest, the first one again
    r = put(puller, net, ref(registry, first))
    assert r.status == 200 and r.json["document"]["ingress"][0]["digest"] == file_digest(bpf.count)


def test_bytes_that_do_not_match_their_digest_are_refused_and_nothing_is_lost(net, registry, puller, bpf):
    assert put(puller, net, bpf.count).status == 200  # what is attached, and must stay
    md = registry.push_image("bad/layer", "v1", read(bpf.drop_port))
    manifest = json.loads(registry.request("GET", "/v2/bad/layer/manifests/v1",
                                           headers={"Accept": "application/vnd.oci.image.manifest.v1+json"})[2])
    layer = registry.blob_path(manifest["layers"][0]["digest"])
    with open(layer, "r+b") as f:  # the registry serves what its disk holds
        f.seek(20)
        f.write(b"\xff\xff\xff\xff")
    e = assert_error(put(puller, net, ref(registry, "v1", "bad/layer"), name="other"), 422, "image_digest_mismatch")
    assert "the layer" in e["message"] and manifest["layers"][0]["digest"] in e["message"]
    # a manifest whose bytes are not the digest it is asked by
    md2 = registry.push_image("bad/manifest", "v1", read(bpf.drop_port))
    with open(registry.blob_path(md2), "r+b") as f:  # the same length, still JSON, other bytes
        body = f.read()
        altered = body.replace(b'"schemaVersion": 2', b'"schemaVersion":2 ')
        assert altered != body
        f.seek(0)
        f.write(altered)
    e = assert_error(put(puller, net, ref(registry, md2, "bad/manifest"), name="other"), 422, "image_digest_mismatch")
    assert md2 in e["message"]
    f, st = attached(puller, net)
    assert f["name"] == "count" and f["digest"] == file_digest(bpf.count) and st["attached"] is True
    assert md  # (the first image's manifest was fine; its layer was not)


def test_missing_tag_bad_credentials_registry_down_and_a_layer_past_the_limit(net, registry, clsd_factory, workdir, bpf):
    good = start_puller(net, clsd_factory, registry, workdir, "--max-object-size", "1048576")
    assert put(good, net, bpf.count).status == 200
    registry.push_image(REPO, "v1", read(bpf.count))
    e = assert_error(put(good, net, ref(registry, "nosuchtag"), name="x"), 422, "image_not_found")
    assert "nosuchtag" in e["message"]
    e = assert_error(put(good, net, ref(registry, "v1", "no/such/repo"), name="x"), 422, "image_not_found")
    # a layer of 100 MB: refused from its manifest's size, before a byte of it is fetched
    big = os.urandom(1024) * (100 * 1024)
    registry.push_image("big/layer", "v1", big, layer="raw")
    t = time.monotonic()
    e = assert_error(put(good, net, ref(registry, "v1", "big/layer"), name="x"), 413, "payload_too_large")
    assert time.monotonic() - t < 2.0 and "104857600 bytes" in e["message"], e
    # wrong password
    bad = start_puller(net, clsd_factory, registry, workdir, name="badcreds", password="wrong")
    e = assert_error(put(bad, net, ref(registry, "v1"), name="x"), 422, "registry_auth_failed")
    assert registry.host in e["message"]
    # no CA: the registry's certificate is not trusted
    noca = start_puller(net, clsd_factory, registry, workdir, name="noca", ca=False)
    e = assert_error(put(noca, net, ref(registry, "v1"), name="x"), 422, "registry_unreachable")
    # the registry down
    registry.stop()
    e = assert_error(put(good, net, ref(registry, "v1"), name="x"), 422, "registry_unreachable")
    assert registry.host in e["message"]
    registry.start()
    assert put(good, net, ref(registry, "v1"), name="x").status == 200
    # a bad reference is the document's error
    assert_error(put(good, net, "oci://%s/UPPER:v1" % registry.host, name="y"), 400, "invalid_value")
    assert_error(put(good, net, "oci://%s/ebpf/count" % registry.host, name="y"), 400, "invalid_value")


def test_bearer_tokens_from_the_registrys_token_service(net, clsd_factory, workdir, bpf):
    r = Registry(net.b, workdir, "198.18.0.2", port=5453, auth="token")
    try:
        r.start()
        r.push_image(REPO, "v1", read(bpf.count))
        c = start_puller(net, clsd_factory, r, workdir, name="token")
        before = r.token_requests
        assert put(c, net, ref(r, "v1")).status == 200
        assert r.token_requests == before + 1  # one token for the session's requests
        bad = start_puller(net, clsd_factory, r, workdir, name="token-bad", password="nope")
        e = assert_error(put(bad, net, ref(r, "v1"), name="x"), 422, "registry_auth_failed")
        assert "token service" in e["message"]
    finally:
        r.close()


def test_credentials_go_with_the_first_request_and_a_token_registry_still_challenges(net, clsd_factory, workdir,
                                                                                     bpf):
    """A registry the registries file gives credentials for gets them with the pull's first request: no
    anonymous request answered 401 first (a request in four, a round trip each pull); one of bearer tokens
    answers them with its challenge, and the pull goes on with a token."""
    r = Registry(net.b, workdir, "198.18.0.2", port=5463, access_log=True)
    try:
        r.start()
        r.push_image(REPO, "v1", read(bpf.count))
        c = start_puller(net, clsd_factory, r, workdir, name="eager")
        before = len(r.access_lines(net.addr_a))
        assert put(c, net, ref(r, "v1")).status == 200
        time.sleep(0.3)  # the access log's last line
        seen = r.access_lines(net.addr_a)[before:]
        assert [status for _, _, status in seen] == [200, 200, 200], seen  # manifest, configuration, layer
        assert [path.split("/")[-2] for _, path, _ in seen] == ["manifests", "blobs", "blobs"], seen
        # wrong credentials: refused as before, and nothing attached is lost
        bad = start_puller(net, clsd_factory, r, workdir, name="eager-bad", password="nope")
        assert_error(put(bad, net, ref(r, "v1"), name="x"), 422, "registry_auth_failed")
    finally:
        r.close()


def cosign_key(workdir, name):
    key = os.path.join(workdir, name + ".key")
    run(["openssl", "ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", key])
    return key


def test_cosign_signatures_valid_another_key_another_digest_missing(net, registry, clsd_factory, workdir, bpf):
    trusted = os.path.join(workdir, "trusted")
    os.makedirs(trusted)
    key, other = cosign_key(workdir, "cosign"), cosign_key(workdir, "other")
    run(["openssl", "ec", "-in", key, "-pubout", "-out", os.path.join(trusted, "cosign.pub")])
    c = start_puller(net, clsd_factory, registry, workdir, "--trusted-keys", trusted)
    signed = registry.push_image("signed/count", "v1", read(bpf.count))
    registry.sign("signed/count", signed, key)
    r = put(c, net, ref(registry, "v1", "signed/count"))
    assert r.status == 200, r.body
    # by another key
    md = registry.push_image("other/key", "v1", read(bpf.drop_port))
    registry.sign("other/key", md, other)
    e = assert_error(put(c, net, ref(registry, "v1", "other/key"), name="x"), 422, "object_signature_invalid")
    assert "no trusted key" in e["message"]
    # a signature over another image's digest, copied to this one's signature tag
    md = registry.push_image("other/digest", "v1", read(bpf.drop_port))
    registry.sign("other/digest", md, key, signs=signed)
    e = assert_error(put(c, net, ref(registry, "v1", "other/digest"), name="x"), 422, "object_signature_invalid")
    assert signed in e["message"] and "another image" in e["message"]
    # none at all
    registry.push_image("unsigned/count", "v1", read(bpf.drop_port))
    assert_error(put(c, net, ref(registry, "v1", "unsigned/count"), name="x"), 422, "object_unsigned")
    # nothing of the refused ones was stored; the signed one runs, and survives a restart (verified again)
    objs = c.api.get("/objects").json["objects"]
    assert [o["digest"] for o in objs] == [file_digest(bpf.count)]
    c.restart()
    f, st = attached(c, net)
    assert st["attached"] is True and f["digest"] == file_digest(bpf.count)
    # the key taken away: the object is revoked on SIGHUP
    os.unlink(os.path.join(trusted, "cosign.pub"))
    with open(os.path.join(trusted, "minisign.pub"), "w") as fh:
        fh.write("untrusted comment: minisign public key 0\nRWQf6LRCGA9i53mlYecO4IzT51TGPpvWucNSCh1CBM0QTaLn73Y7GFO3\n")
    c.proc.send_signal(1)
    wait = time.monotonic() + 5
    while time.monotonic() < wait and "revoked" not in c.log_this_run():
        time.sleep(0.05)
    assert "revoked" in c.log_this_run()


def test_hogs_and_clsctl_name_images(net, registry, clsd_factory, workdir, bpf):
    registry.push_image(REPO, "v1", read(bpf.count))
    hogs = os.path.join(workdir, "hogs")
    os.makedirs(hogs)
    with open(os.path.join(hogs, "va.json"), "w") as f:
        json.dump({"ifname": net.if_a, "ingress": [filt("count", ref(registry, "v1"))]}, f)
    c = start_puller(net, clsd_factory, registry, workdir, "--hogs-dir", hogs)
    f, st = attached(c, net)
    assert st["attached"] is True and f["digest"] == file_digest(bpf.count)
    # clsctl passes a reference through
    doc = os.path.join(workdir, "doc.json")
    with open(doc, "w") as fh:
        json.dump({"egress": [filt("count", ref(registry, "v1"))]}, fh)
    c2 = start_puller(net, clsd_factory, registry, workdir, name="ctl")
    p = c2.ctl("apply", net.if_a, doc, check=0)
    got = c2.api.get_classifier(net.if_a).json["document"]["egress"][0]
    assert got["digest"] == file_digest(bpf.count) and "@sha256:" in got["object"], p.stdout


def test_the_registries_file_is_read_again_on_sighup(net, registry, clsd_factory, workdir, bpf):
    registry.push_image(REPO, "v1", read(bpf.count))
    c = start_puller(net, clsd_factory, registry, workdir, name="hup", password="wrong")
    path = os.path.join(workdir, "registries-hup.json")
    assert_error(put(c, net, ref(registry, "v1")), 422, "registry_auth_failed")
    # a file that does not parse: said, and the one in use stays
    with open(path, "w") as f:
        f.write("{not json")
    c.proc.send_signal(1)
    deadline = time.monotonic() + 5
    while "the registries in use stay" not in c.log_this_run() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert "the registries in use stay" in c.log_this_run()
    assert_error(put(c, net, ref(registry, "v1")), 422, "registry_auth_failed")
    # the right password: the next pull uses it
    registry.registries_file(path)
    c.proc.send_signal(1)
    deadline = time.monotonic() + 5
    while "reloaded the registries file (1 registries)" not in c.log_this_run() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert put(c, net, ref(registry, "v1")).status == 200


def test_hostile_and_odd_images_are_refused_and_wide_ones_taken(net, registry, clsd_factory, workdir, bpf):
    """What an attacker (or a confused pipeline) pushes: a layer that inflates past the object limit from
    a few KiB, two layers, a layer that is no ELF, an index without this machine's platform, a tar whose
    only object is outside its root; and an object of 64 programs, taken."""
    import gzip
    import io
    import tarfile
    from harness.registry import MT_OCI_CONFIG, MT_OCI_INDEX, MT_OCI_LAYER, MT_OCI_MANIFEST
    c = start_puller(net, clsd_factory, registry, workdir, "--max-object-size", "1048576")
    assert put(c, net, bpf.count).status == 200
    # 8 MiB of zeros in a tar, gzipped to a few KiB: refused while inflating, not unpacked
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as t:
        info = tarfile.TarInfo("./bomb.o")
        info.size = 8 << 20
        t.addfile(info, io.BytesIO(b"\0" * (8 << 20)))
    bomb = gzip.compress(raw.getvalue())
    assert len(bomb) < 64 * 1024
    registry.push_image("bad/bomb", "v1", bomb, layer="raw")
    e = assert_error(put(c, net, ref(registry, "v1", "bad/bomb"), name="x"), 413, "payload_too_large")
    assert "inflates" in e["message"], e
    # the same bomb whose gzip trailer claims 100 bytes (the size clsd sizes its buffer by): still bounded
    # by the limit, and a trailer that does not match what inflates is no whole gzip stream
    registry.push_image("bad/liar", "v1", bomb[:-4] + (100).to_bytes(4, "little"), layer="raw")
    e = assert_error(put(c, net, ref(registry, "v1", "bad/liar"), name="x"), 413, "payload_too_large")
    assert "inflates" in e["message"], e
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as t:
        data = read(bpf.count)
        info = tarfile.TarInfo("./prog.o")
        info.size = len(data)
        t.addfile(info, io.BytesIO(data))
    layer = gzip.compress(raw.getvalue())
    registry.push_image("bad/trailer", "v1", layer[:-4] + (len(raw.getvalue()) // 2).to_bytes(4, "little"), layer="raw")
    e = assert_error(put(c, net, ref(registry, "v1", "bad/trailer"), name="x"), 422, "image_invalid")
    assert "not a whole gzip stream" in e["message"], e
    # two layers
    cfg = b"{}"
    cd, l1, l2 = registry.push_blob("bad/two", cfg), registry.push_blob("bad/two", b"a"), registry.push_blob("bad/two", b"b")
    registry.push_manifest("bad/two", "v1", {"schemaVersion": 2, "mediaType": MT_OCI_MANIFEST,
                                             "config": {"mediaType": MT_OCI_CONFIG, "digest": cd, "size": 2},
                                             "layers": [{"mediaType": MT_OCI_LAYER, "digest": l1, "size": 1},
                                                        {"mediaType": MT_OCI_LAYER, "digest": l2, "size": 1}]})
    e = assert_error(put(c, net, ref(registry, "v1", "bad/two"), name="x"), 422, "image_invalid")
    assert "2 layers" in e["message"]
    # a layer that is not an object
    registry.push_image("bad/text", "v1", b"#!/bin/sh\necho not an object\n", layer="raw")
    e = assert_error(put(c, net, ref(registry, "v1", "bad/text"), name="x"), 422, "image_invalid")
    assert "not an ELF" in e["message"]
    # the object only below a directory (../ or sub/): no object at the layer's root
    registry.push_image("bad/nested", "v1", None, files={"sub/prog.o": read(bpf.count)})
    assert_error(put(c, net, ref(registry, "v1", "bad/nested"), name="x"), 422, "image_invalid")
    # an index for other platforms only
    md = registry.push_image("multi/count", "arm", read(bpf.count))
    registry.push_manifest("multi/count", "v1", {"schemaVersion": 2, "mediaType": MT_OCI_INDEX, "manifests": [
        {"mediaType": MT_OCI_MANIFEST, "digest": md, "size": 10, "platform": {"os": "linux", "architecture": "arm64"}},
        {"mediaType": MT_OCI_MANIFEST, "digest": md, "size": 10, "platform": {"os": "linux", "architecture": "s390x"}}]})
    e = assert_error(put(c, net, ref(registry, "v1", "multi/count"), name="x"), 422, "image_not_found")
    assert "no manifest for linux/amd64" in e["message"]
    # one with this platform among others: its manifest is taken
    registry.push_manifest("multi/count", "v2", {"schemaVersion": 2, "mediaType": MT_OCI_INDEX, "manifests": [
        {"mediaType": MT_OCI_MANIFEST, "digest": md, "size": 10, "platform": {"os": "linux", "architecture": "arm64"}},
        {"mediaType": MT_OCI_MANIFEST, "digest": md, "size": 10, "platform": {"os": "linux", "architecture": "amd64"}}]})
    r = put(c, net, ref(registry, "v2", "multi/count"), name="x")
    assert r.status == 200 and r.json["document"]["ingress"][0]["digest"] == file_digest(bpf.count), r.body
    # nothing of the refused ones was stored
    assert [o["digest"] for o in c.api.get("/objects").json["objects"]] == [file_digest(bpf.count)]
    # an object of 64 programs: pulled, one of them attached
    wide = bpf.wide["programs-64"]
    registry.push_image("wide/programs", "v1", read(wide))
    big = start_puller(net, clsd_factory, registry, workdir, name="wide")
    r = put(big, net, ref(registry, "v1", "wide/programs"), name="w", program="prog_63")
    assert r.status == 200, r.body
    assert status_of(r.json, "w")["attached"] is True


class BusyRegistry:
    """A registry of one image on ns's loopback (plain HTTP, its entry plain_http), in Python: the first
    `busy` manifest requests are answered 429 with Retry-After: `after`, then it serves. It keeps when each
    request came, to show it was asked again as it said, not sooner."""

    def __init__(self, ns, obj, busy, after):
        import http.server
        import threading
        from harness.registry import MT_OCI_CONFIG, MT_OCI_LAYER, MT_OCI_MANIFEST, digest, tar_gz
        layer = tar_gz({"./prog.o": obj})
        config = json.dumps({"architecture": "amd64", "os": "linux", "config": {"Labels": {}},
                             "rootfs": {"type": "layers", "diff_ids": []}}).encode()
        manifest = json.dumps({"schemaVersion": 2, "mediaType": MT_OCI_MANIFEST,
                               "config": {"mediaType": MT_OCI_CONFIG, "digest": digest(config), "size": len(config)},
                               "layers": [{"mediaType": MT_OCI_LAYER, "digest": digest(layer), "size": len(layer)}]}).encode()
        blobs = {digest(config): config, digest(layer): layer}
        self.manifest_times = []
        reg = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_GET(self):
                body, mt = b"{}", "application/json"
                if "/manifests/" in self.path:
                    reg.manifest_times.append(time.monotonic())
                    if len(reg.manifest_times) <= busy:
                        self.send_response(429)
                        self.send_header("Retry-After", str(after))
                        self.send_header("Content-Length", "0")
                        self.end_headers()
                        return
                    body, mt = manifest, MT_OCI_MANIFEST
                elif "/blobs/" in self.path:
                    body, mt = blobs.get(self.path.rsplit("/", 1)[1]), "application/octet-stream"
                    if body is None:
                        self.send_error(404)
                        return
                self.send_response(200)
                self.send_header("Content-Type", mt)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = ns.call(lambda: http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler))
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def test_a_busy_registry_is_asked_again_after_its_retry_after_not_sooner(net, clsd_factory, workdir, bpf):
    """A registry that answers 429 Retry-After: 1 twice is asked again after a second each time: the
    PUT applies, a little over two seconds later, with three manifest requests in all (a pull that gave
    up at once would fail the PUT; one that hurried would ask more often)."""
    reg = BusyRegistry(net.a, read(bpf.count), busy=2, after=1)
    try:
        path = os.path.join(workdir, "registries.json")
        with open(path, "w") as f:
            json.dump({"registries": {"127.0.0.1:%d" % reg.port: {"plain_http": True, "pulls_per_second": 50}}}, f)
        clsd = clsd_factory(net.a, name="busy", args=("--registries", path))
        t0 = time.monotonic()
        r = clsd.api.put_classifier(net.if_a, {"ingress": [filt("c", "oci://127.0.0.1:%d/busy/img:v1" % reg.port)]})
        took = time.monotonic() - t0
        assert r.status == 200, r
        assert len(reg.manifest_times) == 3, reg.manifest_times
        gaps = [b - a for a, b in zip(reg.manifest_times, reg.manifest_times[1:])]
        assert all(g >= 0.95 for g in gaps), gaps
        assert 1.9 <= took < 15, took
        assert clsd.api.get_classifier(net.if_a).json["state"] == "configured"
    finally:
        reg.close()


def test_pulls_per_second_is_a_count_in_the_registries_file(workdir):
    """A registries file whose pulls_per_second is no count is refused at the start, saying where."""
    path = os.path.join(workdir, "registries.json")
    for bad in (0, "10", 1.5):
        with open(path, "w") as f:
            json.dump({"registries": {"r.example:5000": {"pulls_per_second": bad}}}, f)
        p = subprocess.run([CLSD, "--state-dir", os.path.join(workdir, "s"), "--hogs-dir", os.path.join(workdir, "h"),
                            "--bpffs-dir", "/sys/fs/bpf/clsdt-pps", "--socket", os.path.join(workdir, "sock"),
                            "--config", "", "--registries", path], capture_output=True, text=True, timeout=20)
        assert p.returncode != 0, p
        assert "pulls_per_second" in p.stderr and "a count from 1 to 100000" in p.stderr, p.stderr
    run(["rm", "-rf", "/sys/fs/bpf/clsdt-pps"], check=False)
