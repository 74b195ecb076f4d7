"""Who may talk to clsd: the unix socket, TCP with a bearer token, and start-up refusals."""

import json
import os
import socket
import stat
import subprocess
import time

import pytest

from harness.api import (Api, assert_error, free_port, NetnsHTTPConnection, NetnsHTTPSConnection,
    start_refused, tls_server, token_file, UnixHTTPConnection)
from harness.base import ADDR_A, CLSCTL, filt, run, status_of, wait_for


def test_the_unix_socket_is_a_socket_of_mode_0660(clsd):
    st = os.stat(clsd.socket)
    assert stat.S_ISSOCK(st.st_mode)
    assert stat.S_IMODE(st.st_mode) == 0o660


def _kernel_config(option):
    """y, m or "n" from /proc/config.gz; None if the kernel does not publish its configuration."""
    import gzip
    try:
        with gzip.open("/proc/config.gz", "rt") as f:
            for line in f:
                if line.startswith(option + "="):
                    return line.strip().split("=", 1)[1]
                if line.startswith("# %s is not set" % option):
                    return "n"
    except OSError:
        return None
    return "n"


def test_version_names_clsd_the_running_kernel_libbpf_and_what_the_kernel_has(api):
    r = api.get("/version")
    assert r.status == 200
    assert set(r.json) == {"version", "kernel", "libbpf", "act_bpf", "tcx", "bpf_stats"}
    assert r.json["kernel"] == os.uname().release
    # The probe's answer matches the kernel's own configuration, where the kernel tells it.
    want = _kernel_config("CONFIG_NET_ACT_BPF")
    if want is not None:
        assert r.json["act_bpf"] == ("available" if want in ("y", "m") else "unavailable"), want
    else:
        assert r.json["act_bpf"] in ("available", "unavailable")
    # tcx came with Linux 6.6 (CONFIG_NET_XGRESS).
    want = _kernel_config("CONFIG_NET_XGRESS")
    if want is not None:
        assert r.json["tcx"] == ("available" if want == "y" else "unavailable"), want


def test_tcp_needs_the_token_for_changes(net, clsd_factory, bpf, workdir):
    token = "t0k3n-" + os.urandom(12).hex()
    port = free_port(net.a, "127.0.0.1")
    c = clsd_factory(net.a, args=["--listen", "127.0.0.1:%d" % port, "--token-file", token_file(workdir, token)])
    digest = c.api.upload_ok(bpf.count)  # over the unix socket: no token needed
    tcp = Api(lambda: NetnsHTTPConnection(net.a, "127.0.0.1", port))
    doc = {"ingress": [filt("web", digest, priority=10)]}

    # Reading needs no token.
    assert tcp.get("/healthz").status == 200
    assert tcp.get("/objects").json["objects"][0]["digest"] == digest
    assert_error(tcp.get_classifier(net.if_a), 404, "document_not_found")

    # Changing does.
    r = tcp.put_classifier(net.if_a, doc)
    assert_error(r, 401, "unauthorized")
    assert "Bearer" in r.headers.get("WWW-Authenticate", "")
    assert_error(tcp.put_classifier(net.if_a, doc, headers={"Authorization": "Bearer wrong-" + token}), 401,
                 "unauthorized")
    assert_error(tcp.put_classifier(net.if_a, doc, headers={"Authorization": "Bearer " + token[:-1]}), 401,
                 "unauthorized")
    assert_error(tcp.put_classifier(net.if_a, doc, headers={"Authorization": token}), 401, "unauthorized")
    assert_error(tcp.upload(bpf.drop_port), 401, "unauthorized")
    assert_error(tcp.delete("/objects/" + digest), 401, "unauthorized")
    # Whatever the path, even one that does not exist; reads of it are still 404.
    assert_error(tcp.request("POST", "/nope", body=b"{}"), 401, "unauthorized")
    assert_error(tcp.get("/nope"), 404, "route_not_found")
    assert net.a.filters(net.if_a) == []
    assert_error(c.api.get_classifier(net.if_a), 404, "document_not_found")

    # The scheme is case-insensitive (RFC 9110 11.1).
    assert tcp.put_classifier(net.if_a, doc, headers={"Authorization": "bearer " + token}).status == 200
    auth = {"Authorization": "Bearer " + token}
    r = tcp.put_classifier(net.if_a, doc, headers=auth)
    assert r.status == 200, r
    assert net.a.filter_at(net.if_a, 10).id == status_of(r.json, "web")["id"]
    assert_error(tcp.delete_classifier(net.if_a), 401, "unauthorized")
    assert net.a.filter_at(net.if_a, 10) is not None
    assert tcp.delete_classifier(net.if_a, headers=auth).status == 204
    assert net.a.filters(net.if_a) == []

    # The unix socket stays token-free.
    assert c.api.put_classifier(net.if_a, doc).status == 200


def test_tcp_on_the_namespace_address_with_a_token(net, clsd_factory, bpf, workdir):
    token = os.urandom(16).hex()
    port = free_port(net.a, ADDR_A)
    pki, tls = tls_server(workdir)
    clsd_factory(net.a, args=["--listen", "%s:%d" % (ADDR_A, port), "--token-file", token_file(workdir, token), *tls])
    # Reached from the other namespace, across the veth, over TLS.
    tcp = Api(lambda: NetnsHTTPSConnection(net.b, ADDR_A, port, pki.cert))
    assert tcp.get("/healthz").status == 200
    # away from loopback, reads need the token too
    assert_error(tcp.get("/objects"), 401, "unauthorized")
    assert tcp.get("/objects", headers={"Authorization": "Bearer " + token}).status == 200
    assert_error(tcp.put_classifier(net.if_a, {}), 401, "unauthorized")
    assert tcp.put_classifier(net.if_a, {}, headers={"Authorization": "Bearer " + token}).status == 200


def test_tcp_loopback_without_a_token_refuses_changes(net, clsd_factory, bpf):
    port = free_port(net.a, "127.0.0.1")
    c = clsd_factory(net.a, args=["--listen", "127.0.0.1:%d" % port])
    tcp = Api(lambda: NetnsHTTPConnection(net.a, "127.0.0.1", port))
    assert tcp.get("/healthz").status == 200
    assert_error(tcp.put_classifier(net.if_a, {}), 401, "unauthorized")
    assert_error(tcp.put_classifier(net.if_a, {}, headers={"Authorization": "Bearer "}), 401, "unauthorized")
    assert c.api.get_classifier(net.if_a).status == 404


def test_non_loopback_listen_without_tls_or_a_way_to_authenticate_is_refused(net, workdir):
    port = free_port(net.a, ADDR_A)
    # a token over clear text only on loopback
    p = start_refused(net.a, workdir, "--listen", "%s:%d" % (ADDR_A, port), "--token-file",
                      token_file(workdir, os.urandom(16).hex()))
    assert p.returncode == 1, p
    last = p.stderr.strip().splitlines()[-1]
    assert last.startswith("clsd: ") and "needs TLS (--tls-cert, --tls-key)" in last, p.stderr
    _, tls = tls_server(workdir)
    p = start_refused(net.a, workdir, "--listen", "%s:%d" % (ADDR_A, port), *tls)
    assert p.returncode == 1 and "needs a way to authenticate" in p.stderr, p.stderr
    # Nothing listens on the port afterwards.
    s = net.a.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.bind((ADDR_A, port))
    finally:
        s.close()


def test_non_loopback_listen_without_token_file_is_one_line(net, workdir):
    port = free_port(net.a, ADDR_A)
    p = start_refused(net.a, workdir, "--listen", "%s:%d" % (ADDR_A, port))
    assert p.returncode == 1
    assert len(p.stderr.splitlines()) == 1, p.stderr


@pytest.mark.parametrize("args,code", [
    # A malformed flag value is a usage error (2), found before anything starts.
    (["--listen", "nonsense"], 2),
    (["--listen", "127.0.0.1:0"], 2),
    (["--max-json-size", "0"], 2),
    (["--max-object-size", "-5"], 2),
    (["--log-level", "loud"], 2),
    (["--bogus"], 2),
    (["extra-argument"], 2),
])
def test_a_bad_flag_stops_the_start_with_its_exit_code_and_a_line_on_stderr(net, workdir, args, code):
    p = start_refused(net.a, workdir, *args)
    assert p.returncode == code, p
    assert p.stderr.strip(), p


def test_a_token_shorter_than_the_minimum_is_refused_at_start(net, workdir):
    p = start_refused(net.a, workdir, "--listen", "127.0.0.1:%d" % free_port(net.a, "127.0.0.1"),
                      "--token-file", token_file(workdir, "short"))
    assert p.returncode == 1, p
    assert "token" in p.stderr.strip().splitlines()[-1]


def test_a_put_with_plain_curl_on_the_socket_attaches_the_filter(clsd, bpf, net, workdir):
    digest = clsd.api.upload_ok(bpf.count)
    spec = os.path.join(workdir, "spec.json")
    with open(spec, "w") as f:
        f.write('{"ingress": [{"name": "web", "object": "%s", "priority": 10}]}\n' % digest)
    p = run(["curl", "-sS", "-o", os.path.join(workdir, "out.json"), "-w", "%{http_code}", "--unix-socket",
             clsd.socket, "-X", "PUT", "http://localhost/ifaces/%s/classifier" % net.if_a, "--data", "@" + spec])
    assert p.stdout == "200", p
    f = net.a.filter_at(net.if_a, 10)
    assert f is not None and f.name == "clsd:web"
    assert clsd.api.get_classifier(net.if_a).json["status"]["ingress"][0]["id"] == f.id


def test_an_upload_with_plain_curl_answers_201_with_the_digest(clsd, bpf, workdir):
    p = run(["curl", "-sS", "--unix-socket", clsd.socket, "-H", "Content-Type: application/octet-stream",
             "--data-binary", "@" + bpf.count, "-w", "\n%{http_code}", "http://localhost/objects"])
    body, code = p.stdout.rsplit("\n", 1)
    assert code == "201", p
    assert json.loads(body)["programs"][0]["name"] == "count_pkts"


def test_a_slow_client_does_not_block_others(clsd):
    s = socket.socket(socket.AF_UNIX)
    s.connect(clsd.socket)
    try:
        s.sendall(b"PUT /ifaces/va/classifier HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Content-Length: 100\r\n\r\n{\"ingr")
        quick = Api(lambda: UnixHTTPConnection(clsd.socket, timeout=2))
        assert quick.healthy()
        assert quick.get("/ifaces").status == 200
    finally:
        s.close()


def test_a_connection_idle_past_request_timeout_is_dropped(net, clsd_factory):
    c = clsd_factory(net.a, args=["--request-timeout", "1"])
    s = socket.socket(socket.AF_UNIX)
    s.connect(c.socket)
    s.settimeout(4)
    try:
        assert s.recv(100) == b""  # closed by clsd, not by our timeout
    finally:
        s.close()
    assert c.api.healthy()


def test_past_max_connections_new_ones_are_closed_and_served_again_once_under(net, clsd_factory):
    c = clsd_factory(net.a, args=["--max-connections", "2"])
    quick = Api(lambda: UnixHTTPConnection(c.socket, timeout=0.5))

    def healthy():
        try:
            return quick.healthy()
        except OSError:
            return False

    # The failure is a race: repeat the cycle so that a broken clsd is caught with near certainty.
    for cycle in range(20):
        held = []
        for _ in range(2):
            # A request answered on each, kept alive: both connections are accepted and open at once.
            conn = UnixHTTPConnection(c.socket, timeout=2)
            conn.request("GET", "/healthz")
            r = conn.getresponse()
            assert r.status == 200
            r.read()
            held.append(conn)
        for conn in held:
            conn.close()
        time.sleep(0.02)
        wait_for(healthy, timeout=1, what="clsd to answer again after cycle %d" % cycle)


def test_refused_start_up_does_not_touch_the_kernel(net, clsd_factory, bpf):
    c = clsd_factory(net.a)
    assert c.api.put_classifier(net.if_a, {"ingress": [filt("web", bpf.count, priority=10)]}).status == 200
    assert c.stop() == 0
    net.a.run("tc", "filter", "del", "dev", net.if_a, "ingress", "pref", "10")
    p = net.a.run(*c.argv(["--listen", "%s:%d" % (ADDR_A, free_port(net.a, ADDR_A))]), check=False)
    assert p.returncode == 1, p
    assert net.a.filter_at(net.if_a, 10) is None, "a refused start attached filters"


def test_clsctl_sends_a_token_in_clear_only_to_loopback(net, clsd_factory, workdir):
    """A token over http:// crosses the network readable: clsctl refuses before connecting, and names
    https://; to this host's loopback it goes (the test's clsd listens there)."""
    token = os.urandom(16).hex()
    port = free_port(net.a, "127.0.0.1")
    clsd_factory(net.a, args=["--listen", "127.0.0.1:%d" % port, "--token-file", token_file(workdir, token)])
    env = dict(os.environ, CLSD_TOKEN=token)
    for url in ("http://%s:%d" % (ADDR_A, port), "http://[2001:db8::1]:%d" % port, "http://clsd.example:80",
                "http://localhost:%d@%s:%d" % (port, ADDR_A, port)):
        p = subprocess.run(net.a.argv(CLSCTL, "--host", url, "ls"), env=env, capture_output=True, text=True,
                           timeout=15)
        assert p.returncode == 1 and p.stderr.count("\n") == 1, p
        assert "a token is sent over https:// only" in p.stderr, p.stderr
    for url in ("http://127.0.0.1:%d" % port, "http://localhost:%d" % port):
        p = subprocess.run(net.a.argv(CLSCTL, "--host", url, "ls"), env=env, capture_output=True, text=True,
                           timeout=15)
        assert p.returncode == 0, p
