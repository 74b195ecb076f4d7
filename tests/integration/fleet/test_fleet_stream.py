"""A node's watch stream as etcd's Go HTTP server sees it.

A node asks for its five watches in one streamed request: the body is their create requests, one JSON
text a line, which etcd's JSON gateway reads one by one while it already answers the first. Go's HTTP/1.1
server, when a handler writes its first answer before the body is read to its end, reads the rest itself
and throws it away (golang/go#15527), unless the request said "Expect: 100-continue". Without it, a loaded
machine had etcd make only the stream's first one or two watches (once in some hundred streams; bench/
etcd-watch-creates measures it): the node waited out its deadline and began the stream again, late by
seconds for the tests that waited for it (a fleet's D-Bus "connected", a halted rollout's status).

These tests put a TCP proxy between a node and its etcd member that relays every byte and writes down the
order of what passes: each request's head, etcd's "100 Continue", the first bytes of each body."""
import json
import subprocess
import sys

from harness.base import wait_for
from harness.etcd import count_policy, member_url

# Relays 127.0.0.1:PORT to the member, one thread a direction a connection; on stdout, a line a thing seen:
# {"c": connection, "head": {"path", "expect"}}, {"c", "continue": true} (etcd's 100), {"c", "body": bytes}
# (the first body bytes the client sent after its head).
RECORDING_PROXY = r"""
import json, socket, sys, threading

upstream, port = sys.argv[1], int(sys.argv[2])
host, uport = upstream.split(":")
out = threading.Lock()

def say(**kw):
    with out:
        sys.stdout.write(json.dumps(kw) + "\n")
        sys.stdout.flush()

def down(c, up, n):
    while True:
        b = up.recv(65536)
        if not b:
            break
        if b.startswith(b"HTTP/1.1 100"):  # (an answer's own: the one before it was read whole)
            say(c=n, **{"continue": True})
        c.sendall(b)
    c.close()

def relay(c, n):
    up = socket.create_connection((host, int(uport)))
    threading.Thread(target=down, args=(c, up, n), daemon=True).start()
    buf, left = b"", None  # left: the body bytes still to come of the request under way (None: a head)
    while True:
        b = c.recv(65536)
        if not b:
            break
        buf += b
        while buf:
            if left is None:
                if b"\r\n\r\n" not in buf:
                    break
                head, buf = buf.split(b"\r\n\r\n", 1)
                lines = head.decode().split("\r\n")
                h = {l.split(":", 1)[0].lower(): l.split(":", 1)[1].strip() for l in lines[1:] if ":" in l}
                say(c=n, head={"c": n, "path": lines[0].split()[1], "expect": h.get("expect")})
                left = int(h.get("content-length", "0"))
                if left == 0:
                    left = None
                continue
            take = min(left, len(buf))
            say(c=n, body=take)
            buf, left = buf[take:], left - take
            if left == 0:
                left = None
        # passed on once written down: etcd's answer to it (a 100) comes after its head's line
        up.sendall(b)
    up.close()

s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", port))
s.listen(64)
n = 0
while True:
    c, _ = s.accept()
    n += 1
    threading.Thread(target=relay, args=(c, n), daemon=True).start()
"""


def recording_proxy(ns, port):
    return ns.popen(sys.executable, "-c", RECORDING_PROXY, member_url(0)[len("http://"):], str(port),
                    stdout=subprocess.PIPE, text=True)


def test_a_nodes_stream_waits_for_etcd_to_take_its_body_and_its_calls_do_not(fleet, bpf, workdir):
    port = 23780
    h1 = fleet.host("h1", start=False)
    proxy = recording_proxy(h1.ns, port)
    try:
        plain = h1.args
        # the node's etcd is the proxy, in its own namespace (a later --fleet is the one taken)
        h1.args = lambda: (*plain(), "--fleet", "http://127.0.0.1:%d" % port)
        h1.start(fleet.factory)

        def connected():
            m = h1.clsd.api.get("/metrics").body.decode()
            return 'clsd_fleet_connected{node="h1",endpoint="http://127.0.0.1:%d"} 1' % port in m
        wait_for(connected, timeout=20, interval=0.2, what="h1 connected through the proxy")
        rev = fleet.apply(count_policy(bpf), workdir)
        fleet.wait_converged("edge-count", rev, {"h1"}, timeout=20)
        assert h1.send(3) == 3
        assert h1.clsd.stop() == 0
    finally:
        proxy.kill()
        out, _ = proxy.communicate(timeout=10)
    seen = [json.loads(l) for l in out.splitlines()]
    # each request: its head and what its connection saw after it, up to the next head
    requests = []
    for s in seen:
        if "head" in s:
            requests.append((s["head"], []))
        else:
            r = [r for r in requests if r[0]["c"] == s["c"]][-1]
            r[1].append("continue" if "continue" in s else "body")
    streams = [r for r in requests if r[0]["path"] == "/v3/watch"]
    calls = [r for r in requests if r[0]["path"] != "/v3/watch"]
    assert streams and calls, requests
    for head, order in streams:
        assert head["expect"] == "100-continue", head
        # etcd's server took the body as one that expects a 100 (it answered one): it leaves the body to the
        # gateway, which reads it all. (libcurl sends the body after the 100, or after a second without one:
        # either way the server's reader is the one that expects it.)
        assert "continue" in order and "body" in order, (head, order)
    # a call's body goes with its head, no round trip for a 100 (libcurl's default over 1 KiB)
    for head, order in calls:
        assert head["expect"] is None and "continue" not in order, (head, order)
