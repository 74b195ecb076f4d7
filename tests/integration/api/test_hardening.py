"""What a client may make clsd read, and what it may not learn: objects named by path only from the
object directories (--object-dir), one answer for every other path whatever the file is; a token file
every user may read is refused at start; what one peer's connections may hold (dripping headers, changes
waiting for a slow registry)."""

import contextlib
import json
import os
import re
import shutil
import socket
import threading
import time

import pytest


from harness.api import (Api, assert_error, Conn, free_port, head_request, NetnsHTTPSConnection,
    start_refused, tls_server, token_file)
from harness.base import ADDR_A, ADDR_B, filt, status_of, wait_for
from harness.daemon import write_hog
from harness.metrics import parse_exposition, value


def refused(resp, path):
    """The one answer for a path outside the object directories: 403, nothing of the file in it."""
    assert resp.status == 403, (resp.status, resp.body)
    err = resp.json["error"]
    assert err["code"] == "object_path_refused", err
    assert path in err["message"] and "sha256:" not in err["message"], err
    return err["message"].replace(path, "PATH")


def test_objects_by_path_only_from_the_object_directories(net, clsd_factory, bpf, workdir):
    objdir = os.path.join(workdir, "objects")
    os.makedirs(os.path.join(objdir, "sub"))
    inside = os.path.join(objdir, "sub", "count.bpf.o")
    shutil.copy(bpf.count, inside)
    outside = os.path.join(workdir, "count.bpf.o")
    shutil.copy(bpf.count, outside)
    os.symlink(outside, os.path.join(objdir, "link.bpf.o"))  # inside by name, outside by its real path
    c = clsd_factory(net.a, args=("--object-dir", objdir))
    # inside: read and used as ever
    r = c.api.put_classifier(net.if_a, {"ingress": [filt("web", inside, priority=10)]})
    assert r.status == 200 and status_of(r.json, "web")["attached"], r.body
    # every other path gets the same answer, whatever the file is, and nothing changes
    answers = set()
    for path in ("/etc/shadow", "/etc/passwd", "/etc/nonexistent", "/proc/self/environ", outside,
                 os.path.join(objdir, "link.bpf.o"), os.path.join(objdir, "sub", "..", "..", "count.bpf.o"),
                 objdir, "/tmp/nothing-here/x.o"):
        for body in ({"ingress": [filt("x", path, priority=20)]},
                     {"ingress": [filt("x", inside, priority=20, actions=[{"object": path}])]}):
            answers.add(refused(c.api.put_classifier(net.if_a, body), path))
            answers.add(refused(c.api.request("PUT", "/ifaces/%s/classifier?dry_run=1" % net.if_a, body), path))
            answers.add(refused(c.api.request("PUT", "/policies/p", dict(body, match={"ifname": ["zz*"]})), path))
    assert len({a.split(": ", 1)[1] for a in answers}) == 1, answers
    # a file missing inside an object directory is said to be missing
    r = c.api.put_classifier(net.if_a, {"ingress": [filt("x", os.path.join(objdir, "missing.bpf.o"), priority=20)]})
    assert r.status == 404 and r.json["error"]["code"] == "object_file_not_found", r.body
    assert c.api.get("/policies").json["policies"] == []
    assert [f.pref for f in net.a.filters(net.if_a) if f.name and f.name.startswith("clsd:")] == [10]
    # digests stay the way in
    digest = c.api.upload_ok(bpf.count)
    assert c.api.put_classifier(net.if_a, {"ingress": [filt("web", digest, priority=10)]}).status == 200


def test_a_hog_names_objects_by_any_absolute_path(net, clsd_factory, bpf, workdir):
    """A hog is the host's configuration, not a client's request: --object-dir does not bind it."""
    hogs_dir = os.path.join(workdir, "hogs.d")
    write_hog(hogs_dir, "a.json", net.if_a, ingress=[filt("h", bpf.count, priority=30)])
    c = clsd_factory(net.a, args=("--object-dir", "", "--hogs-dir", hogs_dir))
    wait_for(lambda: [f.pref for f in net.a.filters(net.if_a) if f.name and f.name.startswith("clsd:")] == [30],
             timeout=5, what="the hog's filter")
    assert c.api.get_classifier(net.if_a).json["source"] == "hog"


def test_no_object_directory_means_digests_only(net, clsd_factory, bpf):
    c = clsd_factory(net.a, args=("--object-dir", ""))
    msg = refused(c.api.put_classifier(net.if_a, {"ingress": [filt("web", bpf.count, priority=10)]}), bpf.count)
    assert "this clsd has none" in msg
    digest = c.api.upload_ok(bpf.count)
    assert c.api.put_classifier(net.if_a, {"ingress": [filt("web", digest, priority=10)]}).status == 200


def test_an_object_directory_that_is_not_one_is_refused_at_start(net, workdir):
    for d, why in (("/nonexistent-dir", "No such file"), ("/etc/passwd", "not a directory"), ("/", "whole file system")):
        p = start_refused(net.a, workdir, "--object-dir", d)
        assert p.returncode == 1 and why in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr


def test_a_token_file_every_user_may_read_is_refused(net, clsd_factory, workdir):
    path = token_file(workdir, "0123456789abcdef0123")
    os.chmod(path, 0o644)
    p = start_refused(net.a, workdir, "--listen", "127.0.0.1:%d" % free_port(net.a, "127.0.0.1"), "--token-file", path)
    assert p.returncode == 1 and "every user may read or write it (mode 0644)" in p.stderr, p.stderr
    os.chmod(path, 0o640)  # the group may read it: clsd starts
    c = clsd_factory(net.a, args=("--listen", "127.0.0.1:%d" % free_port(net.a, "127.0.0.1"), "--token-file", path))
    assert c.api.healthy()


def test_text_that_is_not_utf8_is_shown_escaped_never_dropped(net, clsd_factory, bpf, workdir):
    c = clsd_factory(net.a)
    # an error naming bytes of the URL that are not UTF-8 keeps its message
    r = c.api.get("/ifaces/a%ffb/classifier")
    assert r.status == 400 and r.json["error"]["code"] == "invalid_value", r.body
    assert "a\\xffb" in r.json["error"]["message"], r.body
    # an object whose program's name is not printable ASCII is refused, uploaded or named by path (the
    # stored document and every answer name its programs): nothing is stored or attached
    data = bytearray(open(bpf.count, "rb").read())
    strtab = data.rfind(b"\x00count_pkts\x00") + 1
    data[strtab] = 0xff
    path = os.path.join(workdir, "odd.bpf.o")
    with open(path, "wb") as f:
        f.write(data)
    for r in (c.api.upload(path), c.api.put_classifier(net.if_a, {"ingress": [filt("web", path, priority=10)]})):
        assert r.status == 422 and r.json["error"]["code"] == "invalid_object", r.body
        assert "not printable ASCII" in r.json["error"]["message"], r.body
    assert c.api.get_classifier(net.if_a).status == 404 and c.api.get("/objects").json["objects"] == []
    assert not [f for f in net.a.filters(net.if_a) if f.name and f.name.startswith("clsd:")]


def raw(c, data):
    """Sends data as it is to clsd's unix socket; the answer's status and body."""
    import socket as sk
    s = sk.socket(sk.AF_UNIX, sk.SOCK_STREAM)
    s.settimeout(5)
    s.connect(c.socket)
    s.sendall(data)
    out = b""
    while True:
        try:
            chunk = s.recv(65536)
        except sk.timeout:
            break
        if not chunk:
            break
        out += chunk
        if b"\r\n\r\n" in out:
            head, body = out.split(b"\r\n\r\n", 1)
            length = [int(l.split(b":")[1]) for l in head.split(b"\r\n") if l.lower().startswith(b"content-length:")]
            if length and len(body) >= length[0]:
                break
    s.close()
    head, _, body = out.partition(b"\r\n\r\n")
    return int(head.split()[1]), body


def test_a_control_byte_in_the_path_and_a_body_framed_twice_are_400(net, clsd_factory, bpf):
    c = clsd_factory(net.a)
    digest = c.api.upload_ok(bpf.count)
    assert c.api.put_classifier(net.if_a, {"ingress": [filt("web", digest, priority=10)]}).status == 200
    # "%00" would have cut the path short: DELETE …/classifier%00zzz deleted …/classifier
    for method, path in (("DELETE", "/ifaces/%s/classifier%%00zzz" % net.if_a), ("GET", "/ifaces/%s%%0a/classifier" % net.if_a),
                         ("GET", "/version%7f")):
        status, body = raw(c, b"%s %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n" % (method.encode(), path.encode()))
        assert status == 400 and json.loads(body)["error"]["code"] == "bad_request", (path, body)
        assert "control byte" in json.loads(body)["error"]["message"]
    assert c.api.get_classifier(net.if_a).status == 200
    # a body whose length is said twice, two ways: refused, nothing applied
    doc = json.dumps({"ingress": [filt("web", digest, priority=20)]}).encode()
    for headers in (b"Content-Length: %d\r\nContent-Length: 2\r\n" % len(doc),
                    b"Content-Length: %d\r\nTransfer-Encoding: chunked\r\n" % len(doc)):
        status, body = raw(c, b"PUT /ifaces/%s/classifier HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                              b"Connection: close\r\n%s\r\n%s" % (net.if_a.encode(), headers, doc))
        assert status == 400 and json.loads(body)["error"]["code"] == "bad_request", body
        assert "length is given twice" in json.loads(body)["error"]["message"]
    assert [f.pref for f in net.a.filters(net.if_a) if f.name and f.name.startswith("clsd:")] == [10]


def test_clients_dripping_headers_hold_no_slot_and_one_peer_holds_a_few(net, clsd_factory, workdir):
    """20 clients from one address each send a header byte every half second, as slowloris does: four
    (the per-peer limit) are let in, the others are closed at once, and those four are closed when the
    header deadline passes; other peers and the unix socket are served all along."""
    import socket as sk
    import time
    port = free_port(net.a, ADDR_A)
    pki, tls = tls_server(workdir)
    c = clsd_factory(net.a, args=("--listen", "%s:%d" % (ADDR_A, port), "--token-file",
                                  token_file(workdir, "0123456789abcdef0123"), "--header-timeout", "2",
                                  "--max-connections-per-peer", "4", *tls))
    # over TLS, the slow part is the handshake: a record header announcing a 512-byte ClientHello,
    # whose bytes then come one at a time
    drippers = []
    for _ in range(20):
        s = net.b.socket()
        s.settimeout(0.2)
        s.connect((ADDR_A, port))
        s.sendall(b"\x16\x03\x01\x02\x00")
        drippers.append(s)

    def open_ones():
        alive = []
        for s in drippers:
            try:
                s.sendall(b"\x01")
                if s.recv(1, sk.MSG_PEEK) == b"":
                    continue
            except sk.timeout:
                pass  # nothing to read: still open
            except OSError:
                continue
            alive.append(s)
        return alive
    time.sleep(0.5)
    assert len(open_ones()) == 4
    # another peer (ADDR_A, over TCP) and the unix socket are served meanwhile
    assert Api(lambda: NetnsHTTPSConnection(net.a, ADDR_A, port, pki.cert)).get("/healthz").status == 200
    assert c.api.get("/healthz").status == 200
    start = time.monotonic()
    wait_for(lambda: not open_ones(), timeout=5, interval=0.3, what="the dripping clients closed")
    assert time.monotonic() - start < 3.5
    log = c.log_this_run()
    assert "ip %s: already 4 connections; another refused" % ADDR_B in log
    assert "ip %s: no request within 2s; connection closed" % ADDR_B in log
    for s in drippers:
        s.close()
    # the address may connect again
    assert Api(lambda: NetnsHTTPSConnection(net.b, ADDR_A, port, pki.cert)).get("/healthz").status == 200


@contextlib.contextmanager
def trickling_registry(ns):
    """A registry on ns's loopback that answers one byte a second: a pull from it takes the whole of the
    pull's timeout (30 s). Its port and the connections it took (a list); every socket closed, and its
    threads ended, on the way out."""
    srv = ns.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(64)
    srv.settimeout(0.1)
    stop, threads, taken = threading.Event(), [], []

    def trickle(conn):
        with conn:
            for b in b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n":
                if stop.wait(1.0):
                    return
                with contextlib.suppress(OSError):
                    conn.sendall(bytes([b]))

    def serve():
        while not stop.is_set():
            with contextlib.suppress(socket.timeout):
                taken.append(srv.accept()[0])
                t = threading.Thread(target=trickle, args=(taken[-1],))
                t.start()
                threads.append(t)

    server = threading.Thread(target=serve)
    server.start()
    try:
        yield srv.getsockname()[1], taken
    finally:
        stop.set()
        server.join()
        for t in threads:
            t.join()
        srv.close()


def test_changes_waiting_for_a_pull_leave_root_its_connections_and_the_next_is_429(net, clsd_factory, workdir):
    """Sixteen PUTs naming an image on a registry that sends a byte a second wait the pull's 30 s: they
    held root's sixteen connections on the unix socket (--max-connections-per-peer), and /healthz, reads
    and other changes got no answer at all. A connection waiting for the daemon is not one of the peer's
    slots but one of as many waiting requests: reads are served meanwhile, and the 17th change is 429
    too_many_requests at once."""
    with trickling_registry(net.a) as (port, taken):
        path = os.path.join(workdir, "registries.json")
        with open(path, "w") as f:
            json.dump({"registries": {"127.0.0.1:%d" % port: {"plain_http": True}}}, f)
        c = clsd_factory(net.a, args=("--registries", path))
        doc = json.dumps({"ingress": [filt("slow", "oci://127.0.0.1:%d/ebpf/count:v1" % port)]}).encode()
        put = head_request(b"PUT", b"/ifaces/%s/classifier" % net.if_a.encode(),
                           b"Content-Type: application/json\r\nContent-Length: %d\r\n" % len(doc), doc)
        waiting = []

        def waiting_now():
            r = c.api.get("/metrics")
            assert r.status == 200, r
            return int(re.search(r"^clsd_api_requests_waiting (\d+)", r.body.decode(), re.M).group(1))
        try:
            # one after the other: a PUT not yet read holds one of root's connections, as the GET does
            for n in range(1, 17):
                waiting.append(Conn(c))
                waiting[-1].send(put)
                wait_for(lambda: waiting_now() == n, timeout=10, what="%d PUTs waiting" % n)
            wait_for(lambda: taken, timeout=10, what="the pull's connection to the registry")
            t0 = time.monotonic()
            assert c.api.get("/healthz").status == 200
            assert c.api.get("/ifaces").status == 200
            r = c.api.put_classifier(net.if_a, {"ingress": []})
            assert_error(r, 429, "too_many_requests")
            assert "uid 0 has 16 requests waiting" in r.json["error"]["message"], r.json
            assert time.monotonic() - t0 < 5
            # the sixteen wait on: none was answered
            for conn in waiting:
                conn.s.setblocking(False)
                with pytest.raises(BlockingIOError):
                    conn.s.recv(1)
        finally:
            for conn in waiting:
                conn.close()


def test_quotas_on_what_clients_may_store(net, clsd_factory, bpf, workdir):
    """Objects (count and bytes), documents and policies are bounded: past a quota, 507 quota_exceeded
    with a JSON body, and what is stored stays; replacing what exists is no new thing."""
    sizes = [os.path.getsize(p) for p in (bpf.count, bpf.drop_port, bpf.classid)]
    c = clsd_factory(net.a, args=("--max-objects", "2", "--max-documents", "2", "--max-policies", "1"))

    def quota(r, what):
        assert r.status == 507, (r.status, r.body)
        assert r.json["error"]["code"] == "quota_exceeded" and what in r.json["error"]["message"], r.body
    a, b = c.api.upload_ok(bpf.count), c.api.upload_ok(bpf.drop_port)
    quota(c.api.upload(bpf.classid), "--max-objects")
    assert c.api.upload(bpf.count).status == 200  # stored already: fine
    # named by path in a PUT, a third object is refused the same way, and nothing is attached
    quota(c.api.put_classifier(net.if_a, {"ingress": [filt("x", bpf.classid, priority=5, direct_action=False,
                                                           classid="1:10")]}), "--max-objects")
    assert len(c.api.get("/objects").json["objects"]) == 2
    # documents: two (one for an interface that is not there yet); a third is refused, a replacement is not
    assert c.api.put_classifier(net.if_a, {"ingress": [filt("web", a, priority=10)]}).status == 200
    assert c.api.put_classifier("later0", {"ingress": [filt("web", a, priority=10)]}).status == 202
    quota(c.api.put_classifier("later1", {"ingress": [filt("web", a, priority=10)]}), "--max-documents")
    quota(c.api.request("PUT", "/ifaces/later1/classifier?dry_run=1", {"ingress": [filt("web", a, priority=10)]}),
          "--max-documents")
    assert c.api.put_classifier(net.if_a, {"ingress": [filt("web", b, priority=10)]}).status == 200
    # policies
    pol = {"match": {"ifname": ["zz*"]}, "ingress": [filt("p", a, priority=30)]}
    assert c.api.request("PUT", "/policies/one", pol).status == 200
    quota(c.api.request("PUT", "/policies/two", pol), "--max-policies")
    assert c.api.request("PUT", "/policies/one", dict(pol, order=2)).status == 200
    assert [p["name"] for p in c.api.get("/policies").json["policies"]] == ["one"]
    # bytes: the objects together
    c2 = clsd_factory(net.b, name="bytes", args=("--max-objects-size", str(sizes[0] + sizes[1] - 1)))
    c2.api.upload_ok(bpf.count)
    quota(c2.api.upload(bpf.drop_port), "--max-objects-size")


def test_a_parent_the_interface_has_no_qdisc_of_is_422_not_500(net, clsd_factory, bpf):
    c = clsd_factory(net.a)
    digest = c.api.upload_ok(bpf.count)
    assert c.api.put_classifier(net.if_a, {"ingress": [filt("web", digest, priority=10)]}).status == 200
    doc = {"ingress": [filt("web", digest, priority=10)], "egress": [filt("c", digest, priority=5, parent="7:")]}
    # the dry run answers what the PUT does, with the plan beside it
    dry = c.api.request("PUT", "/ifaces/%s/classifier?dry_run=1" % net.if_a, doc)
    assert dry.status == 422 and dry.json["error"]["code"] == "parent_not_found" and "plan" in dry.json, dry.body
    r = c.api.put_classifier(net.if_a, doc)
    assert r.status == 422 and r.json["error"]["code"] == "parent_not_found", r.body
    assert "parent 7:0 is not a qdisc or class of %s" % net.if_a in r.json["error"]["message"], r.body
    # the change was rolled back: the document and the kernel as before
    doc = c.api.get_classifier(net.if_a).json["document"]
    assert [f["name"] for f in doc["ingress"]] == ["web"] and doc["egress"] == []
    assert [f.pref for f in net.a.filters(net.if_a) if f.name and f.name.startswith("clsd:")] == [10]


def test_every_change_and_every_refused_one_is_audited_once(net, clsd_factory, bpf, workdir):
    port = free_port(net.a, ADDR_A)
    pki, tls = tls_server(workdir)
    c = clsd_factory(net.a, args=("--listen", "%s:%d" % (ADDR_A, port), "--token-file",
                                  token_file(workdir, "0123456789abcdef0123"), *tls))
    me = "uid 0 pid %d (unix socket)" % os.getpid()
    digest = c.api.upload_ok(bpf.count)
    doc = {"ingress": [filt("web", digest, priority=10)]}
    assert c.api.put_classifier(net.if_a, doc).status == 200
    assert c.api.request("PUT", "/ifaces/%s/classifier?dry_run=1" % net.if_a, doc).status == 200  # not a change
    assert c.api.request("PUT", "/ifaces/%s/classifier" % net.if_a, b"{", content_type="application/json").status == 400
    assert c.api.get_classifier(net.if_a).status == 200  # a read
    tcp = Api(lambda: NetnsHTTPSConnection(net.b, ADDR_A, port, pki.cert))
    assert tcp.delete("/ifaces/%s/classifier" % net.if_a).status == 401
    assert c.api.delete("/ifaces/%s/classifier" % net.if_a).status == 204
    audits = [l.split("audit: ", 1)[1] for l in c.log_this_run().splitlines() if "audit: " in l]
    assert audits == [
        "POST /objects by %s: 201 ok digest=%s" % (me, digest),
        "PUT /ifaces/%s/classifier by %s: 200 ok generation=1" % (net.if_a, me),
        "PUT /ifaces/%s/classifier by %s: 400 malformed_json" % (net.if_a, me),
        "DELETE /ifaces/%s/classifier by 198.18.0.2 without the token (TLS): 401 unauthorized" % net.if_a,
        "DELETE /ifaces/%s/classifier by %s: 204 ok" % (net.if_a, me),
    ], audits
    samples, _ = parse_exposition(c.api.get("/metrics").body.decode())
    assert value(samples, "clsd_audit_records_total", result="ok") == 3
    assert value(samples, "clsd_audit_records_total", result="refused") == 2


def test_a_path_is_read_once_and_a_link_put_there_later_is_not_followed(net, clsd_factory, bpf, workdir):
    """The path is read when the change is made, without following links; a stored document's path is not
    read again (its object is known by digest): a symbolic link swapped in afterwards leads nowhere."""
    import signal
    objdir = os.path.join(workdir, "objects")
    os.makedirs(objdir)
    path = os.path.join(objdir, "count.bpf.o")
    shutil.copy(bpf.count, path)
    c = clsd_factory(net.a, args=("--object-dir", objdir))
    assert c.api.put_classifier(net.if_a, {"ingress": [filt("web", path, priority=10)]}).status == 200
    os.unlink(path)
    os.symlink("/etc/passwd", path)
    c.proc.send_signal(signal.SIGHUP)  # every interface reconciled again
    wait_for(lambda: "hogs re-read" in c.log_this_run(), timeout=5, what="the SIGHUP")
    st = c.api.get_classifier(net.if_a).json
    assert st["state"] == "configured" and "sha256:" not in json.dumps(st.get("error")), st
    # a new change naming it is refused, the link not followed
    r = c.api.put_classifier(net.if_a, {"ingress": [filt("web", path, priority=11)]})
    assert r.status == 403 and r.json["error"]["code"] == "object_path_refused", r.body
