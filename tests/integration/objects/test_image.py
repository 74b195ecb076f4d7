"""From an object file to an image a fleet pulls, with clsctl alone: `clsctl image push` builds bpfman's
bytecode image (one gzipped tar layer holding the object; the configuration's io.ebpf.programs and
io.ebpf.maps labels from the object's own inspection), pushes it through the registry's HTTP API v2 to
Debian's docker-registry (TLS, htpasswd or a token service) and signs it as cosign does with an ECDSA
P-256 key; skopeo reads it as bpfman's, clsd pulls and attaches it with the public key trusted and
refuses it with another; `image build` writes the same image as an OCI layout that skopeo copies;
`image inspect` shows what an image holds, bpfman's own documented labels byte for byte."""
import json
import os
import shutil
import subprocess
import sys

from harness.api import assert_error
from harness.base import CLSCTL, file_digest, filt, run, status_of, wait_for
from harness.observe import udp_exchange
from harness.base import ADDR_A
from harness.registry import MT_OCI_LAYER, MT_OCI_MANIFEST, Registry

REPO = "ebpf/count"


def ec_key(workdir, name):
    """An ECDSA P-256 key pair as openssl genpkey makes it (what cosign import-key-pair takes)."""
    key = os.path.join(workdir, name + ".key")
    run(["openssl", "genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", key])
    pub = os.path.join(workdir, name + ".pub")
    run(["openssl", "pkey", "-in", key, "-pubout", "-out", pub])
    return key, pub


def ctl(net, *args, check=0):
    """clsctl in net.a, where the registry (in net.b) is reached; check: the exit status wanted."""
    p = net.a.run(CLSCTL, *args, check=False, timeout=60)
    assert p.returncode == check, p
    return p


def skopeo(net, registry, *args):
    certs = os.path.join(registry.dir, "skopeo-certs")
    os.makedirs(certs, exist_ok=True)
    shutil.copy(registry.ca, os.path.join(certs, "ca.crt"))
    return net.b.run("skopeo", *args[:1], "--cert-dir", certs, "--creds",
                     "%s:%s" % (registry.user, registry.password), *args[1:], timeout=60).stdout


def puller(net, clsd_factory, registry, workdir, name, *extra):
    path = registry.registries_file(os.path.join(workdir, "registries-%s.json" % name))
    return clsd_factory(net.a, name=name, args=("--registries", path, *extra))


def trusting(workdir, name, pub):
    d = os.path.join(workdir, "trusted-" + name)
    os.makedirs(d)
    shutil.copy(pub, os.path.join(d, "cosign.pub"))
    return d


def test_a_pushed_and_signed_image_is_bpfmans_to_skopeo_attached_by_clsd_and_refused_under_another_key(
        net, registry, clsd_factory, bpf, workdir):
    key, pub = ec_key(workdir, "cosign")
    _, other_pub = ec_key(workdir, "other")
    regs = registry.registries_file(os.path.join(workdir, "push.json"))
    ref = "oci://%s/%s:v1" % (registry.host, REPO)
    pinned = ctl(net, "--registries", regs, "image", "push", bpf.count, ref, "--sign", key).stdout.strip()
    manifest_digest = pinned.rsplit("@", 1)[1]
    assert pinned == "%s@%s" % (ref, manifest_digest) and manifest_digest.startswith("sha256:"), pinned
    # skopeo reads it as bpfman's image: OCI media types, one gzipped tar layer, the labels bpfman writes
    info = json.loads(skopeo(net, registry, "inspect", "docker://%s/%s:v1" % (registry.host, REPO)))
    assert info["Labels"] == {"io.ebpf.programs": '{"count_pkts":"tc"}', "io.ebpf.maps": '{"counters":"array"}'}
    assert info["Digest"] == manifest_digest and info["Os"] == "linux"
    raw = json.loads(skopeo(net, registry, "inspect", "--raw", "docker://%s/%s:v1" % (registry.host, REPO)))
    assert raw["mediaType"] == MT_OCI_MANIFEST and [l["mediaType"] for l in raw["layers"]] == [MT_OCI_LAYER]
    # the signature tag cosign's verify reads: the simple-signing payload, the annotation
    sig = json.loads(skopeo(net, registry, "inspect", "--raw", "docker://%s/%s:sha256-%s.sig" % (
        registry.host, REPO, manifest_digest[7:])))
    assert sig["layers"][0]["mediaType"] == "application/vnd.dev.cosign.simplesigning.v1+json"
    assert sig["layers"][0]["annotations"]["dev.cosignproject.cosign/signature"]
    # clsctl image inspect: what the image holds, as a node pulls it
    seen = json.loads(ctl(net, "--json", "--registries", regs, "image", "inspect", ref).stdout)
    assert seen["format"] == "bpfman" and seen["cosign_signatures"] == 1, seen
    assert seen["object_digest"] == file_digest(bpf.count) and seen["reference"] == pinned
    assert [p["name"] for p in seen["programs"]] == ["count_pkts"] and [m["name"] for m in seen["maps"]] == ["counters"]
    table = ctl(net, "--registries", regs, "image", "inspect", ref).stdout
    assert "1 cosign signature" in table and "count_pkts" in table and "io.ebpf.programs=" in table, table
    # clsd trusting the key pulls it, checks the signature and attaches it; traffic is counted
    c = puller(net, clsd_factory, registry, workdir, "trusting", "--trusted-keys", trusting(workdir, "good", pub))
    r = c.api.put_classifier(net.if_a, {"ingress": [filt("count", ref)]})
    assert r.status == 200, r.body
    st = status_of(r.json, "count")
    assert st["attached"] is True and r.json["document"]["ingress"][0]["digest"] == file_digest(bpf.count)
    udp_exchange(net.b, net.a, ADDR_A, {7001: 3})
    # a clsd that trusts another key refuses it, and keeps what it had
    o = puller(net, clsd_factory, registry, workdir, "other", "--trusted-keys", trusting(workdir, "other", other_pub))
    e = assert_error(o.api.put_classifier(net.if_a, {"ingress": [filt("count", ref)]}), 422,
                     "object_signature_invalid")
    assert "no trusted key" in e["message"]
    assert o.api.get("/objects").json["objects"] == []


def test_a_push_through_a_token_service_and_the_same_object_pushed_twice_is_the_same_image(
        net, clsd_factory, bpf, workdir):
    r = Registry(net.b, workdir, "198.18.0.2", port=5473, auth="token")
    try:
        r.start()
        regs = r.registries_file(os.path.join(workdir, "token.json"))
        ref = "oci://%s/%s:v2" % (r.host, REPO)
        first = ctl(net, "--registries", regs, "image", "push", bpf.drop_port, ref).stdout.strip()
        before = r.token_requests
        again = ctl(net, "--registries", regs, "image", "push", bpf.drop_port, ref).stdout.strip()
        assert first == again  # the same bytes: tar times 0, keys sorted
        assert r.token_requests > before  # a bearer token with push in its scope, from the token service
        c = puller(net, clsd_factory, r, workdir, "token")
        assert c.api.put_classifier(net.if_a, {"ingress": [filt("d", ref)]}).status == 200
    finally:
        r.close()


def test_image_build_writes_an_oci_layout_skopeo_copies_and_clsd_pulls(net, registry, clsd_factory, bpf, workdir):
    layout = os.path.join(workdir, "layout")
    out = ctl(net, "image", "build", bpf.proto_stats, "--out", layout + ":stats").stdout.split()
    assert out[0] == "oci:%s:stats" % layout and out[1].startswith("sha256:")
    # a per-CPU map is spelt as bpfman spells it
    info = json.loads(run(["skopeo", "inspect", "oci:%s:stats" % layout]).stdout)
    maps = json.loads(info["Labels"]["io.ebpf.maps"])
    assert "per_cpu_array" in maps.values(), maps
    assert json.loads(info["Labels"]["io.ebpf.programs"]) and info["Digest"] == out[1]
    # a second image in the same layout keeps the first
    ctl(net, "image", "build", bpf.count, "--out", layout + ":count")
    index = json.load(open(os.path.join(layout, "index.json")))
    assert sorted(m["annotations"]["org.opencontainers.image.ref.name"] for m in index["manifests"]) == ["count", "stats"]
    digest, _ = registry.skopeo_copy(layout, "stats", "air/stats")
    assert digest == out[1]  # copied whole: the registry holds the very manifest built
    c = puller(net, clsd_factory, registry, workdir, "air")
    r = c.api.put_classifier(net.if_a, {"ingress": [filt("s", "oci://%s/air/stats:stats" % registry.host)]})
    assert r.status == 200, r.body


def test_bpfmans_documented_labels_round_trip_through_image_inspect(net, registry, bpf, workdir):
    """The labels of bpfman's shipping-bytecode guide, verbatim, on an image pushed as any client would:
    clsctl image inspect gives them back byte for byte."""
    labels = {"io.ebpf.maps": "{\"xdp_stats_map\":\"per_cpu_array\"}", "io.ebpf.programs": "{\"xdp_stats\":\"xdp\"}"}
    with open(bpf.count, "rb") as f:
        registry.push_image("bpfman/doc", "v1", f.read(), labels=labels)
    regs = registry.registries_file(os.path.join(workdir, "doc.json"))
    seen = json.loads(ctl(net, "--json", "--registries", regs, "image", "inspect",
                          "oci://%s/bpfman/doc:v1" % registry.host).stdout)
    assert seen["labels"] == labels and seen["format"] == "bpfman" and seen["cosign_signatures"] == 0


def test_bad_pushes_exit_1_with_one_line_and_push_nothing(net, registry, bpf, workdir):
    regs = registry.registries_file(os.path.join(workdir, "r.json"))
    bad_regs = registry.registries_file(os.path.join(workdir, "bad.json"), password="nope")
    rsa = os.path.join(workdir, "rsa.key")
    run(["openssl", "genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", rsa])
    garbage = os.path.join(workdir, "garbage.o")
    with open(garbage, "wb") as f:
        f.write(b"not an object")
    base = "oci://%s/bad/push" % registry.host
    cases = [
        (("--registries", regs, "image", "push", bpf.count, base), "tag"),  # no tag
        (("--registries", regs, "image", "push", bpf.count, base + ":v1", "--sign", rsa), "ECDSA P-256"),
        (("--registries", regs, "image", "push", garbage, base + ":v1"), "garbage.o"),
        (("image", "build", bpf.count), "--out"),
        (("image", "build", bpf.count, "--out", os.path.join(workdir, "l") + ":"), "neither empty"),
    ]
    for args, said in cases:
        p = ctl(net, *args, check=1)
        assert len(p.stderr.strip().splitlines()) == 1 and said in p.stderr, (args, p.stderr)
    p = ctl(net, "--registries", bad_regs, "image", "push", bpf.count, base + ":v1", check=1)
    assert "refused" in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr
    # usage errors: 2
    ctl(net, "image", "push", bpf.count, check=2)
    ctl(net, "--sign", "k", "image", "build", bpf.count, "--out", "x", check=2)
    # nothing of the refused pushes is in the registry
    status, _, _ = registry.request("GET", "/v2/bad/push/tags/list")
    assert status == 404, status


def test_a_second_signature_by_another_key_keeps_the_first(net, registry, clsd_factory, bpf, workdir):
    """The same object signed again with another key (a release key after CI's): the tag's signatures are
    both there afterwards, as cosign keeps them, and a clsd that trusts only the first still takes it."""
    first, first_pub = ec_key(workdir, "ci")
    second, _ = ec_key(workdir, "release")
    regs = registry.registries_file(os.path.join(workdir, "two.json"))
    ref = "oci://%s/%s:twice" % (registry.host, REPO)
    ctl(net, "--registries", regs, "image", "push", bpf.count, ref, "--sign", first)
    ctl(net, "--registries", regs, "image", "push", bpf.count, ref, "--sign", second)
    seen = json.loads(ctl(net, "--json", "--registries", regs, "image", "inspect", ref).stdout)
    assert seen["cosign_signatures"] == 2, seen
    c = puller(net, clsd_factory, registry, workdir, "first", "--trusted-keys", trusting(workdir, "ci", first_pub))
    assert c.api.put_classifier(net.if_a, {"ingress": [filt("count", ref)]}).status == 200


# A plain-HTTP front for the registry (in net.b) that passes every request on over TLS and turns the Location
# of each upload the registry opens into one relative to the POST's URL, without a leading slash, as RFC 3986
# allows a registry to send it ("UUID?_state=…" from .../blobs/uploads/); on stdout, a line each.
RELATIVE_FRONT = r"""
import http.client, http.server, ssl, sys

listen, port, upstream, ca = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
host, uport = upstream.rsplit(":", 1)
tls = ssl.create_default_context(cafile=ca)

class H(http.server.BaseHTTPRequestHandler):
    def relay(self):
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n) if n else None
        c = http.client.HTTPSConnection(host, int(uport), context=tls, timeout=30)
        hdrs = {k: v for k, v in self.headers.items() if k.lower() in ("authorization", "content-type", "accept")}
        c.request(self.command, self.path, body, hdrs)
        a = c.getresponse()
        text = a.read()
        self.send_response(a.status)
        for k, v in a.getheaders():
            if k.lower() in ("content-length", "transfer-encoding", "connection"):
                continue
            if k.lower() == "location" and self.command == "POST" and "/blobs/uploads/" in v:
                v = v.split("/blobs/uploads/", 1)[1]
                print("relative", v.split("?")[0], flush=True)
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(text)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(text)
    do_GET = do_HEAD = do_POST = do_PUT = do_PATCH = relay
    def log_message(self, *a):
        pass

http.server.ThreadingHTTPServer((listen, port), H).serve_forever()
"""


def test_a_push_follows_an_upload_location_relative_to_its_post(net, registry, bpf, workdir):
    """A registry may answer an upload's POST with a Location relative to the POST's URL (no leading slash):
    the blob's PUT goes to .../blobs/uploads/THAT, not to the repository's root."""
    front = "198.18.0.2:5080"
    proc = net.b.popen(sys.executable, "-c", RELATIVE_FRONT, "198.18.0.2", "5080", registry.host, registry.ca,
                       stdout=subprocess.PIPE, text=True)
    try:
        regs = os.path.join(workdir, "front.json")
        with open(regs, "w") as f:
            json.dump({"registries": {front: {"username": registry.user, "password": registry.password,
                                              "plain_http": True}}}, f)
        os.chmod(regs, 0o600)
        wait_for(lambda: net.a.run("curl", "-s", "-o", "/dev/null", "http://%s/v2/" % front,
                                   check=False).returncode == 0, timeout=10, what="the front listening")
        pinned = ctl(net, "--registries", regs, "image", "push", bpf.count, "oci://%s/ebpf/rel:v1" % front).stdout
    finally:
        proc.kill()
        out, _ = proc.communicate(timeout=10)
    # both blobs (configuration, layer) went up through a relative Location, and the image is whole
    assert len([l for l in out.splitlines() if l.startswith("relative ")]) == 2, out
    info = json.loads(skopeo(net, registry, "inspect", "docker://%s/ebpf/rel:v1" % registry.host))
    assert info["Digest"] == pinned.strip().rsplit("@", 1)[1], (info, pinned)
    assert info["Labels"]["io.ebpf.programs"] == '{"count_pkts":"tc"}'
