"""Signed objects (--trusted-keys): an object is loaded only if a trusted key signed it, with minisign
(prehashed or legacy, its trusted comment signed too) or OpenBSD signify; for uploads (Clsd-Signature),
files named by path and hogs (FILE.minisig or FILE.sig beside them), and the store's at start, so that a
key removed revokes what it signed."""

import base64
import os
import shutil
import signal
import subprocess
import time


from harness.api import start_refused
from harness.base import CLSD, filt, run, status_of, wait_for
from harness.daemon import write_hog
from harness.metrics import parse_exposition, value
from harness.objects import setup_keys, sign


def sig_header(path):
    with open(path, "rb") as f:
        return {"Clsd-Signature": base64.b64encode(f.read()).decode()}


def upload(c, obj, sig=None, headers=None):
    with open(obj, "rb") as f:
        data = f.read()
    return c.api.request("POST", "/objects", body=data, content_type="application/octet-stream",
                         headers=headers if headers is not None else (sig_header(sig) if sig else None))


def refused(r, code, *words):
    assert r.status == 422 and r.json["error"]["code"] == code, r
    for w in words:
        assert w in r.json["error"]["message"], r.json
    return r.json["error"]["message"]


def key_id(pub):
    with open(pub) as f:
        return f.readline().split()[-1]


def test_uploads_need_a_trusted_signature(net, clsd_factory, bpf, workdir):
    trusted, key1, key2, _ = setup_keys(workdir)
    obj = os.path.join(workdir, "count.bpf.o")
    shutil.copy(bpf.count, obj)
    c = clsd_factory(net.a, args=("--trusted-keys", trusted))
    refused(upload(c, obj), "object_unsigned", "not signed", "--trusted-keys")
    other = sign(key2, obj, os.path.join(workdir, "other.minisig"))
    refused(upload(c, obj, other), "object_signature_invalid",
            "signed by key %s, which is not a trusted key" % key_id(os.path.join(workdir, "signing", "k2.pub")))
    good = sign(key1, obj)
    # the bytes changed after signing: one byte of the ELF flipped
    tampered = os.path.join(workdir, "tampered.bpf.o")
    with open(obj, "rb") as f:
        data = bytearray(f.read())
    data[len(data) // 2] ^= 0xFF
    with open(tampered, "wb") as f:
        f.write(data)
    refused(upload(c, tampered, good), "object_signature_invalid", "does not match its bytes")
    # minisign's trusted comment is signed too
    with open(good) as f:
        lines = f.read().splitlines()
    lines[2] = lines[2].replace("file:", "file:evil-")
    forged = os.path.join(workdir, "forged.minisig")
    with open(forged, "w") as f:
        f.write("\n".join(lines) + "\n")
    refused(upload(c, obj, forged), "object_signature_invalid", "trusted comment")
    for bad in ({"Clsd-Signature": "***"}, {"Clsd-Signature": base64.b64encode(b"hello\nworld\n").decode()}):
        r = upload(c, obj, headers=bad)
        assert r.status in (400, 422) and r.json["error"]["code"] in ("invalid_value", "object_signature_invalid"), r
    assert c.api.get("/objects").json["objects"] == []
    assert not [f for f in os.listdir(os.path.join(c.state_dir, "objects")) if f.endswith(".o")]
    # signed: stored, with its signature
    r = upload(c, obj, good)
    assert r.status == 201, r
    digest = r.json["digest"]
    assert os.path.exists(os.path.join(c.state_dir, "objects", digest[7:] + ".o.sig"))
    # minisign's legacy (not prehashed) signature, and signify's
    legacy = sign(key1, obj, os.path.join(workdir, "legacy.minisig"), legacy=True)
    assert upload(c, obj, legacy).status == 200
    sd = os.path.join(workdir, "signify")
    os.makedirs(sd)
    subprocess.run(["signify-openbsd", "-G", "-n", "-p", os.path.join(sd, "s.pub"), "-s", os.path.join(sd, "s.sec")],
                   check=True, capture_output=True)
    subprocess.run(["signify-openbsd", "-S", "-s", os.path.join(sd, "s.sec"), "-m", obj, "-x", os.path.join(sd, "o.sig")],
                   check=True, capture_output=True)
    refused(upload(c, obj, os.path.join(sd, "o.sig")), "object_signature_invalid", "not a trusted key")
    c.stop()
    shutil.copy(os.path.join(sd, "s.pub"), trusted)
    c.start()
    assert upload(c, obj, os.path.join(sd, "o.sig")).status == 200


def test_objects_by_path_and_hogs_need_a_signature_beside_them(net, clsd_factory, bpf, workdir):
    trusted, key1, key2, _ = setup_keys(workdir)
    objdir = os.path.join(workdir, "objects")
    os.makedirs(objdir)
    signed, unsigned, foreign = (os.path.join(objdir, n) for n in ("signed.bpf.o", "unsigned.bpf.o", "foreign.bpf.o"))
    shutil.copy(bpf.count, signed)
    sign(key1, signed)
    shutil.copy(bpf.drop_port, unsigned)
    shutil.copy(bpf.classid, foreign)
    sign(key2, foreign, foreign + ".sig")  # the other suffix, by a key clsd does not trust
    hogs_dir = os.path.join(workdir, "hogs.d")
    write_hog(hogs_dir, "a.json", net.if_a, ingress=[filt("h", unsigned, priority=30)])
    c = clsd_factory(net.a, args=("--trusted-keys", trusted, "--object-dir", objdir, "--hogs-dir", hogs_dir))
    # the hog's object is not signed: never loaded, and the log says why (clsd --check too)
    log = c.log_this_run()
    assert os.path.join(hogs_dir, "a.json") in log and "%s is not signed" % unsigned in log, log
    assert c.api.get_classifier(net.if_a).status == 404
    assert not [f for f in net.a.filters(net.if_a) if f.name and f.name.startswith("clsd:")]
    p = run([CLSD, "--check", "--hogs-dir", hogs_dir, "--trusted-keys", trusted], check=False)
    assert p.returncode == 1 and "not signed" in p.stderr, p
    # over the API
    r = c.api.put_classifier(net.if_a, {"ingress": [filt("x", unsigned, priority=10)]})
    refused(r, "object_unsigned", unsigned)
    refused(c.api.put_classifier(net.if_a, {"ingress": [filt("x", foreign, priority=10)]}, headers={}),
            "object_signature_invalid", "not a trusted key")
    refused(c.api.request("PUT", "/ifaces/%s/classifier?dry_run=1" % net.if_a,
                          {"ingress": [filt("x", unsigned, priority=10)]}), "object_unsigned")
    assert c.api.get("/objects").json["objects"] == []
    # the hog's object signed: it applies (hogs are read again on SIGHUP)
    sign(key1, unsigned)
    p = run([CLSD, "--check", "--hogs-dir", hogs_dir, "--trusted-keys", trusted], check=False)
    assert p.returncode == 0, p
    c.proc.send_signal(1)
    wait_for(lambda: [f.pref for f in net.a.filters(net.if_a) if f.name and f.name.startswith("clsd:")] == [30],
             timeout=5, what="the signed hog's filter")
    assert len(c.api.get("/objects").json["objects"]) == 1


def untrusted(c, ifname, digest):
    """The interface failed with object_untrusted naming the object; clsd's filters gone from the kernel."""
    g = c.api.get_classifier(ifname).json
    assert g["state"] == "failed" and g["error"]["code"] == "object_untrusted", g
    assert digest in g["error"]["message"] and "not a trusted key" in g["error"]["message"], g
    return g


def clsd_filters(ns, dev, hook="ingress"):
    return [f for f in ns.filters(dev, hook) if f.name and f.name.startswith("clsd:")]


def test_a_key_removed_revokes_what_it_signed(net, clsd_factory, bpf, workdir):
    """Revoked at start: the program is neither adopted nor repaired; its filter is removed, the
    interface failed object_untrusted (GET, /metrics, the log); what another key signed stays."""
    trusted, key1, key2, pub1 = setup_keys(workdir)
    obj, other = os.path.join(workdir, "count.bpf.o"), os.path.join(workdir, "drop-port.bpf.o")
    shutil.copy(bpf.count, obj)
    shutil.copy(bpf.drop_port, other)
    pub2 = os.path.join(workdir, "signing", "k2.pub")
    shutil.copy(pub2, trusted)
    c = clsd_factory(net.a, args=("--trusted-keys", trusted))
    digest = upload(c, obj, sign(key1, obj)).json["digest"]
    kept = upload(c, other, sign(key2, other)).json["digest"]
    r = c.api.put_classifier(net.if_a, {"ingress": [filt("web", digest, priority=10),
                                                    filt("drop", kept, priority=11)]})
    assert r.status == 200 and status_of(r.json, "web")["attached"], r
    c.stop()
    os.unlink(os.path.join(trusted, os.path.basename(pub1)))
    c.start()
    assert [o["digest"] for o in c.api.get("/objects").json["objects"]] == [kept]
    assert "object %s revoked" % digest in c.log_this_run() and "not a trusted key" in c.log_this_run()
    wait_for(lambda: [f.pref for f in clsd_filters(net.a, net.if_a)] == [11], timeout=5,
             what="the revoked filter removed, the other kept")
    untrusted(c, net.if_a, digest)
    # not repaired: the periodic resync and a SIGHUP leave it out
    c.proc.send_signal(signal.SIGHUP)
    wait_for(lambda: "trusted keys: 1 read" in c.log_this_run(), timeout=5, what="the keys read again")
    time.sleep(0.5)
    assert [f.pref for f in clsd_filters(net.a, net.if_a)] == [11]
    untrusted(c, net.if_a, digest)
    samples, _ = parse_exposition(c.api.get("/metrics").body.decode())
    assert value(samples, "clsd_errors_total", code="object_untrusted") >= 1
    # a document naming it cannot be applied again, and a new upload is refused
    refused(upload(c, obj, obj + ".minisig"), "object_signature_invalid", "not a trusted key")
    r = c.api.put_classifier(net.if_a, {"ingress": [filt("web", digest, priority=12)]})
    refused(r, "object_untrusted", digest)
    # the key back: on SIGHUP the stored object loads again, and its filter comes back
    shutil.copy(pub1, trusted)
    c.proc.send_signal(signal.SIGHUP)
    wait_for(lambda: c.api.get_classifier(net.if_a).json["state"] == "configured", timeout=5,
             what="configured again")
    assert [f.pref for f in clsd_filters(net.a, net.if_a)] == [10, 11]
    assert sorted(o["digest"] for o in c.api.get("/objects").json["objects"]) == sorted([digest, kept])


def test_a_key_removed_while_clsd_runs_revokes_on_sighup(net, clsd_factory, bpf, workdir):
    """The same without a restart: SIGHUP reads the keys again; the filters of a document, a policy and a
    hog that use the object go at once, are not repaired, and come back with the key."""
    trusted, key1, _, pub1 = setup_keys(workdir)
    obj = os.path.join(workdir, "count.bpf.o")
    shutil.copy(bpf.count, obj)
    sign(key1, obj)
    net.a.run("ip", "link", "add", "vh", "type", "veth", "peer", "name", "vhp")
    net.a.run("ip", "link", "set", "vh", "up")
    hogs_dir = os.path.join(workdir, "hogs.d")
    write_hog(hogs_dir, "vh.json", "vh", ingress=[filt("h", obj, priority=30)])
    c = clsd_factory(net.a, args=("--trusted-keys", trusted, "--hogs-dir", hogs_dir))
    digest = upload(c, obj, obj + ".minisig").json["digest"]
    wait_for(lambda: clsd_filters(net.a, "vh"), timeout=5, what="the hog's filter")
    assert c.api.put_classifier(net.if_a, {"ingress": [filt("web", digest, priority=10)]}).status == 200
    r = c.api.request("PUT", "/policies/lo", body={"match": {"ifname": ["lo"]},
                                                   "ingress": [filt("count", digest, priority=20)]})
    assert r.status == 200, r
    wait_for(lambda: clsd_filters(net.a, "lo"), timeout=5, what="the policy's filter on lo")
    os.unlink(os.path.join(trusted, os.path.basename(pub1)))
    c.proc.send_signal(signal.SIGHUP)
    wait_for(lambda: not clsd_filters(net.a, net.if_a) and not clsd_filters(net.a, "lo") and
             not clsd_filters(net.a, "vh"), timeout=5, what="the document's, the policy's and the hog's filters removed")
    untrusted(c, net.if_a, digest)
    untrusted(c, "lo", digest)
    untrusted(c, "vh", digest)
    c.proc.send_signal(signal.SIGHUP)
    time.sleep(0.5)
    assert not clsd_filters(net.a, net.if_a)
    shutil.copy(pub1, trusted)
    c.proc.send_signal(signal.SIGHUP)
    wait_for(lambda: clsd_filters(net.a, net.if_a) and clsd_filters(net.a, "lo") and clsd_filters(net.a, "vh"),
             timeout=5, what="every filter back")
    wait_for(lambda: c.api.get_classifier(net.if_a).json["state"] == "configured", timeout=5, what="configured")


def test_a_key_directory_that_is_not_one_is_refused_at_start(net, workdir):
    bad = os.path.join(workdir, "bad")
    os.makedirs(bad)
    with open(os.path.join(bad, "x.pub"), "w") as f:
        f.write("untrusted comment: nothing\nnot base64 at all\n")
    for d, why in (("/nonexistent-dir", "No such file"), (bad, "not a minisign, signify or cosign (ECDSA, PEM) public key")):
        p = start_refused(net.a, workdir, "--trusted-keys", d)
        assert p.returncode == 1 and why in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr


def test_clsctl_object_add_sends_the_signature_beside_the_file(net, clsd_factory, bpf, workdir):
    trusted, key1, _, _ = setup_keys(workdir)
    obj = os.path.join(workdir, "drop.bpf.o")
    shutil.copy(bpf.drop_port, obj)
    c = clsd_factory(net.a, args=("--trusted-keys", trusted))
    p = c.ctl("object", "add", obj)
    assert p.returncode == 1 and "object_unsigned" in p.stderr, p
    sign(key1, obj)
    p = c.ctl("object", "add", obj)
    assert p.returncode == 0, p
    assert len(c.api.get("/objects").json["objects"]) == 1


def stored_signature(c, digest):
    """The signature file stored beside the object, or None."""
    try:
        with open(os.path.join(c.state_dir, "objects", digest[7:] + ".o.sig"), "rb") as f:
            return f.read()
    except FileNotFoundError:
        return None


def read(path):
    with open(path, "rb") as f:
        return f.read()


def test_a_signed_upload_signs_an_object_stored_unsigned(net, clsd_factory, bpf, workdir):
    """An object stored before --trusted-keys is revoked at start; the same bytes uploaded again with a
    trusted signature attach it (stored beside the object): the object is trusted again, its filter comes
    back and a PUT naming it applies, also after a restart. A signature that does not verify changes
    nothing."""
    trusted, key1, key2, _ = setup_keys(workdir)
    obj = os.path.join(workdir, "count.bpf.o")
    shutil.copy(bpf.count, obj)
    c = clsd_factory(net.a)
    r = upload(c, obj)
    assert r.status == 201, r
    digest = r.json["digest"]
    assert c.api.put_classifier(net.if_a, {"ingress": [filt("web", digest, priority=10)]}).status == 200
    c.stop()
    c.args += ["--trusted-keys", trusted]
    c.start()
    assert "object %s revoked" % digest in c.log_this_run()
    wait_for(lambda: c.api.get_classifier(net.if_a).json["state"] == "failed", timeout=5, what="failed")
    g = c.api.get_classifier(net.if_a).json
    assert g["error"]["code"] == "object_untrusted" and "is not signed" in g["error"]["message"], g
    refused(c.api.put_classifier(net.if_a, {"ingress": [filt("web", digest, priority=10)]}), "object_untrusted",
            "is not signed")
    # a signature by a key not trusted, or over other bytes: refused, nothing stored or changed
    refused(upload(c, obj, sign(key2, obj, os.path.join(workdir, "other.minisig"))), "object_signature_invalid",
            "not a trusted key")
    assert stored_signature(c, digest) is None
    refused(c.api.put_classifier(net.if_a, {"ingress": [filt("web", digest, priority=10)]}), "object_untrusted")
    # the same bytes with a trusted signature: attached, the object trusted again, a PUT naming it applies
    good = sign(key1, obj)
    r = upload(c, obj, good)
    assert r.status == 200 and r.json["digest"] == digest, r
    assert stored_signature(c, digest) == read(good)
    r = c.api.put_classifier(net.if_a, {"ingress": [filt("web", digest, priority=10),
                                                    filt("more", digest, priority=11)]})
    assert r.status == 200 and status_of(r.json, "more")["attached"], r
    assert c.api.get_classifier(net.if_a).json["state"] == "configured"
    assert [f.pref for f in clsd_filters(net.a, net.if_a)] == [10, 11]
    # a restart verifies the stored signature again: nothing revoked
    c.restart()
    assert "revoked" not in c.log_this_run(), c.log_this_run()
    assert [o["digest"] for o in c.api.get("/objects").json["objects"]] == [digest]
    wait_for(lambda: c.api.get_classifier(net.if_a).json["state"] == "configured", timeout=5, what="configured")
    assert [f.pref for f in clsd_filters(net.a, net.if_a)] == [10, 11]
    assert stored_signature(c, digest) == read(good)


def test_a_signed_upload_keeps_the_stored_signature_that_verifies(net, clsd_factory, bpf, workdir):
    """Uploading a signed object again with another trusted signature keeps the stored one while it
    verifies; once its key is removed (SIGHUP), an upload signed by a key still trusted replaces it and
    the filters come back; a bad signature never touches the stored one."""
    trusted, key1, key2, pub1 = setup_keys(workdir)
    shutil.copy(os.path.join(workdir, "signing", "k2.pub"), trusted)
    obj = os.path.join(workdir, "count.bpf.o")
    shutil.copy(bpf.count, obj)
    first, second = sign(key1, obj), sign(key2, obj, os.path.join(workdir, "k2.minisig"))
    c = clsd_factory(net.a, args=("--trusted-keys", trusted))
    r = upload(c, obj, first)
    assert r.status == 201, r
    digest = r.json["digest"]
    assert upload(c, obj, second).status == 200
    assert stored_signature(c, digest) == read(first)
    with open(first) as f:
        lines = f.read().splitlines()
    lines[2] = lines[2].replace("file:", "file:evil-")
    forged = os.path.join(workdir, "forged.minisig")
    with open(forged, "w") as f:
        f.write("\n".join(lines) + "\n")
    refused(upload(c, obj, forged), "object_signature_invalid", "trusted comment")
    assert stored_signature(c, digest) == read(first)
    assert c.api.put_classifier(net.if_a, {"ingress": [filt("web", digest, priority=10)]}).status == 200
    # the key of the stored signature removed: revoked
    os.unlink(os.path.join(trusted, os.path.basename(pub1)))
    c.proc.send_signal(signal.SIGHUP)
    wait_for(lambda: not clsd_filters(net.a, net.if_a), timeout=5, what="the revoked filter removed")
    untrusted(c, net.if_a, digest)
    refused(upload(c, obj, forged), "object_signature_invalid")
    assert stored_signature(c, digest) == read(first)
    # a signature a trusted key makes replaces the one no key verifies any more
    assert upload(c, obj, second).status == 200
    assert stored_signature(c, digest) == read(second)
    wait_for(lambda: c.api.get_classifier(net.if_a).json["state"] == "configured", timeout=5,
             what="configured again")
    assert [f.pref for f in clsd_filters(net.a, net.if_a)] == [10]
    c.proc.send_signal(signal.SIGHUP)
    wait_for(lambda: c.log_this_run().count("trusted keys: 1 read") == 2, timeout=5, what="the keys read again")
    time.sleep(0.5)
    assert c.api.get_classifier(net.if_a).json["state"] == "configured"
    c.restart()
    assert "revoked" not in c.log_this_run(), c.log_this_run()
    wait_for(lambda: c.api.get_classifier(net.if_a).json["state"] == "configured", timeout=5, what="configured")
    assert [f.pref for f in clsd_filters(net.a, net.if_a)] == [10]


def test_an_object_revoked_at_start_leaves_the_kernel(net, clsd_factory, bpf, workdir):
    """An object stored unsigned, then revoked at a start with --trusted-keys, runs nowhere: tc shows none
    of its filters (an interface's only one, one beside another's on the other hook, a tcx link, a
    policy's), each interface failed object_untrusted, and what it does not use (another object's filter,
    a foreign filter) stays; signed by an upload, every filter comes back."""
    trusted, key1, _, _ = setup_keys(workdir)
    obj, other = os.path.join(workdir, "count.bpf.o"), os.path.join(workdir, "drop-port.bpf.o")
    shutil.copy(bpf.count, obj)
    shutil.copy(bpf.drop_port, other)
    for dev in ("vb", "vc"):
        net.a.run("ip", "link", "add", dev, "type", "veth", "peer", "name", dev + "p")
        net.a.run("ip", "link", "set", dev, "up")
    c = clsd_factory(net.a, args=("--trusted-keys", trusted))
    kept = upload(c, other, sign(key1, other)).json["digest"]
    c.stop()
    c.args.remove("--trusted-keys")
    c.args.remove(trusted)
    c.start()
    r = upload(c, obj)
    assert r.status == 201, r
    digest = r.json["digest"]
    assert c.api.put_classifier(net.if_a, {"ingress": [filt("web", digest, priority=10)]}).status == 200
    foreign = net.a.add_foreign_filter(net.if_a, 20, bpf.drop_port)
    assert c.api.put_classifier("vb", {"ingress": [filt("web", digest, priority=10)],
                                       "egress": [filt("keep", kept, priority=12)]}).status == 200
    assert c.api.put_classifier("vc", {"egress": [filt("t", digest, priority=5, attach="tcx")]}).status == 200
    assert len(net.a.tcx("vc", "egress")) == 1
    r = c.api.request("PUT", "/policies/lo", body={"match": {"ifname": ["lo"]},
                                                   "ingress": [filt("count", digest, priority=20)]})
    assert r.status == 200 and clsd_filters(net.a, "lo"), r
    keep_id = clsd_filters(net.a, "vb", "egress")[0].id
    c.stop()
    c.args += ["--trusted-keys", trusted]
    c.start()
    assert "object %s revoked" % digest in c.log_this_run()
    devs = (net.if_a, "vb", "vc", "lo")

    def kernel():
        return ([f.pref for f in clsd_filters(net.a, net.if_a)], [f.pref for f in clsd_filters(net.a, "vb")],
                [f.pref for f in clsd_filters(net.a, "vb", "egress")],
                len(net.a.tcx("vc", "egress")), [f.pref for f in clsd_filters(net.a, "lo")])
    wait_for(lambda: kernel() == ([], [], [12], 0, []), timeout=5, what="the revoked object's filters removed")
    assert [(f.pref, f.id) for f in net.a.filters(net.if_a)] == [(20, foreign.id)]
    assert clsd_filters(net.a, "vb", "egress")[0].id == keep_id
    for dev in devs:
        g = c.api.get_classifier(dev).json
        assert g["state"] == "failed" and g["error"]["code"] == "object_untrusted", g
        assert digest in g["error"]["message"] and "is not signed" in g["error"]["message"], g
    time.sleep(0.5)  # not repaired by a later reconcile
    assert kernel() == ([], [], [12], 0, [])
    # signed by an upload: trusted again, and every filter back
    assert upload(c, obj, sign(key1, obj)).status == 200
    wait_for(lambda: all(c.api.get_classifier(d).json["state"] == "configured" for d in devs), timeout=5,
             what="configured again")
    assert kernel() == ([10], [10], [12], 1, [20])
    assert net.a.filter_at(net.if_a, 20).id == foreign.id
    assert clsd_filters(net.a, "vb", "egress")[0].id == keep_id
