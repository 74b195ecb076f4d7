"""Integration tests: the real clsd against the real kernel, in network namespaces of our own.

Every test gets fresh namespaces ("clsdt-<random>a/b", joined by a veth pair, addresses from
198.18.0.0/15 and 2001:db8::/32) and its own clsd processes; teardown removes both even when the
test fails. tc, bpftool, ping, curl and sockets are the independent observers.

Environment: CLSD_BUILD_DIR (default /work/main/build: clsd, clsctl, contrib/bpf/*.o) and
CLSD_TEST_BPF_DIR (optional: rejected.bpf.o, xdp.bpf.o, xdp-only.bpf.o, count-wide.bpf.o; compiled here otherwise).
"""

import contextlib
import ctypes
import glob
import hashlib
import http.client
import json
import os
import re
import secrets
import select
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import threading
import time

import pytest

SOURCE_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD_DIR = os.environ.get("CLSD_BUILD_DIR") or os.path.join(SOURCE_DIR, "build")
# Where the tests' objects named by path are: clsd --object-dir for each
TEST_OBJECT_DIRS = sorted({SOURCE_DIR, BUILD_DIR, "/tmp", os.environ.get("CLSD_TEST_BPF_DIR") or SOURCE_DIR})
CLSD = os.path.join(BUILD_DIR, "clsd")
CLSCTL = os.path.join(BUILD_DIR, "clsctl")
PYTHON = "/usr/bin/python3"

# Addresses of the two ends of the veth pair of every test topology.
ADDR_A, ADDR_B = "198.18.0.1", "198.18.0.2"
ADDR6_A, ADDR6_B = "2001:db8::1", "2001:db8::2"
IF_A, IF_B = "va", "vb"

HEALTH_TIMEOUT = 5.0
CLONE_NEWNET = 0x40000000
# A bpf filesystem of the tests' own: `ip netns exec` remounts /sys, and every bpffs mount is a new
# instance, so tcx pins must live on a mount that outlives each clsd process.
# Each run of the suite pins under a bpffs of its own, mounted at its start and taken away at its end:
# two runs at once (a developer's beside CI's) must not unmount each other's pins.
BPFFS_ROOT = "/run/clsdt-bpffs.%d" % os.getpid()


# ---------------------------------------------------------------------------------------------
# small helpers


def run(argv, check=True, timeout=15, input=None):
    """Runs argv, returns the CompletedProcess (text); raises with stdout/stderr when check fails."""
    p = subprocess.run(argv, input=input, capture_output=True, text=True, timeout=timeout)
    if check and p.returncode != 0:
        raise AssertionError("%s exited %d\nstdout: %s\nstderr: %s" %
                             (" ".join(argv), p.returncode, p.stdout, p.stderr))
    return p


def wait_for(predicate, timeout=2.0, interval=0.01, what="condition"):
    """Polls predicate until it returns something true; returns that, or fails after timeout."""
    deadline = time.monotonic() + timeout
    while True:
        v = predicate()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError("timed out after %.1f s waiting for %s" % (timeout, what))
        time.sleep(interval)


def sha256_digest(data):
    return "sha256:" + hashlib.sha256(data).hexdigest()


def file_digest(path):
    with open(path, "rb") as f:
        return sha256_digest(f.read())


def unique_name():
    """A namespace name no other namespace has now: 4 random bytes, and drawn again if /run/netns holds
    it (a namespace that a killed run left behind must not fail a later test)."""
    while True:
        name = "clsdt-%x-%s" % (os.getpid() & 0xffff, secrets.token_hex(4))
        if not os.path.exists("/run/netns/" + name):
            return name


# ---------------------------------------------------------------------------------------------
# network namespaces

_libc = ctypes.CDLL(None, use_errno=True)


class Netns:
    """A named network namespace (ip netns) that this test created."""

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return "Netns(%s)" % self.name

    def argv(self, *argv):
        return ["ip", "netns", "exec", self.name, *argv]

    def run(self, *argv, check=True, timeout=15, input=None):
        return run(self.argv(*argv), check=check, timeout=timeout, input=input)

    def popen(self, *argv, **kw):
        return subprocess.Popen(self.argv(*argv), **kw)

    def call(self, fn):
        """fn() run inside the namespace and its result. setns() runs on a short-lived thread, so
        the test process itself never changes namespace."""
        box = {}

        def inside():
            try:
                with open("/proc/thread-self/ns/net") as own, open("/run/netns/" + self.name) as target:
                    if _libc.setns(target.fileno(), CLONE_NEWNET) != 0:
                        raise OSError(ctypes.get_errno(), "setns " + self.name)
                    try:
                        box["result"] = fn()
                    finally:
                        if _libc.setns(own.fileno(), CLONE_NEWNET) != 0:
                            raise OSError(ctypes.get_errno(), "setns back")
            except BaseException as e:  # reported in the caller's thread
                box["error"] = e

        t = threading.Thread(target=inside)
        t.start()
        t.join()
        if "error" in box:
            raise box["error"]
        return box["result"]

    def socket(self, family=socket.AF_INET, type=socket.SOCK_STREAM):
        """A socket created inside the namespace (sockets keep the namespace they were made in)."""
        return self.call(lambda: socket.socket(family, type))

    def ifindex(self, dev):
        return self.call(lambda: socket.if_nametoindex(dev))

    def tcx(self, dev, hook="ingress"):
        """[(prog_id, link_id)] of the tcx hook in the order they run, read with BPF_PROG_QUERY."""
        return self.call(lambda: tcx_query(socket.if_nametoindex(dev), hook))

    def link_names(self):
        return [l["ifname"] for l in json.loads(self.run("ip", "-j", "link", "show").stdout)]

    def filters(self, dev, hook="ingress"):
        return parse_tc_filters(self.run("tc", "filter", "show", "dev", dev, hook).stdout)

    def filter_at(self, dev, pref, hook="ingress"):
        found = [f for f in self.filters(dev, hook) if f.pref == pref]
        return found[0] if found else None

    def qdiscs(self, dev):
        return self.run("tc", "qdisc", "show", "dev", dev).stdout

    def has_clsact(self, dev):
        return re.search(r"^qdisc clsact ", self.qdiscs(dev), re.M) is not None

    def add_foreign_filter(self, dev, pref, obj, hook="ingress", sec="tc"):
        """A filter clsd does not own, loaded by tc itself (creating clsact if needed)."""
        if not self.has_clsact(dev):
            self.run("tc", "qdisc", "add", "dev", dev, "clsact")
        self.run("tc", "filter", "add", "dev", dev, hook, "pref", str(pref), "bpf", "obj", obj, "sec", sec, "da")
        f = self.filter_at(dev, pref, hook)
        assert f is not None and f.id, "foreign filter at pref %d did not appear" % pref
        return f

    def add_veth(self, name, peer, peer_ns=None):
        args = ["ip", "-n", self.name, "link", "add", name, "type", "veth", "peer", "name", peer]
        if peer_ns is not None:
            args += ["netns", peer_ns.name]
        run(args)


def netns_create(name=None):
    name = name or unique_name()
    run(["ip", "netns", "add", name])
    ns = Netns(name)
    ns.run("ip", "link", "set", "lo", "up")
    return ns


def netns_destroy(ns):
    """Kills what still runs in the namespace (only our processes live there), then removes it."""
    p = run(["ip", "netns", "pids", ns.name], check=False)
    for pid in p.stdout.split():
        with contextlib.suppress(ProcessLookupError, ValueError):
            os.kill(int(pid), signal.SIGKILL)
    run(["ip", "netns", "del", ns.name], check=False)


class Topology:
    """Two namespaces joined by a veth pair: a.va (198.18.0.1, 2001:db8::1) <-> b.vb (.2, ::2).
    clsd runs in a; b is where traffic comes from."""

    def __init__(self, a, b):
        self.a, self.b = a, b
        self.if_a, self.if_b = IF_A, IF_B
        self.addr_a, self.addr_b = ADDR_A, ADDR_B
        self.addr6_a, self.addr6_b = ADDR6_A, ADDR6_B

    def quiet(self):
        """Only the test's own datagrams reach va from vb: no IPv6 (router solicitations, MLD, ND)
        and no ARP (static neighbours), for tests that count every packet at a hook."""
        mac = {}
        for ns, dev in ((self.a, self.if_a), (self.b, self.if_b)):
            ns.run("sysctl", "-qw", "net.ipv6.conf.%s.disable_ipv6=1" % dev)
            mac[dev] = json.loads(ns.run("ip", "-j", "link", "show", dev).stdout)[0]["address"]
        self.a.run("ip", "neigh", "replace", self.addr_b, "lladdr", mac[self.if_b], "nud", "permanent", "dev",
                   self.if_a)
        self.b.run("ip", "neigh", "replace", self.addr_a, "lladdr", mac[self.if_a], "nud", "permanent", "dev",
                   self.if_b)


@pytest.fixture
def net():
    created = []
    try:
        a = netns_create()
        created.append(a)
        b = netns_create()
        created.append(b)
        a.add_veth(IF_A, IF_B, peer_ns=b)
        mac = {}
        for ns, dev, v4, v6 in ((a, IF_A, ADDR_A, ADDR6_A), (b, IF_B, ADDR_B, ADDR6_B)):
            # No router solicitations seconds into a test, when they would land in its counts.
            def no_rs(dev=dev):
                with open("/proc/sys/net/ipv6/conf/%s/router_solicitations" % dev, "w") as f:
                    f.write("0")
            ns.call(no_rs)
            run(["ip", "-n", ns.name, "-batch", "-"],
                input="addr add %s/24 dev %s\naddr add %s/64 dev %s nodad\nlink set %s up\n" % (v4, dev, v6, dev, dev))
            mac[dev] = json.loads(run(["ip", "-j", "-n", ns.name, "link", "show", dev]).stdout)[0]["address"]
        # Static neighbours: no ARP or neighbour discovery in the middle of a test either.
        for ns, dev, peer, v4, v6 in ((a, IF_A, IF_B, ADDR_B, ADDR6_B), (b, IF_B, IF_A, ADDR_A, ADDR6_A)):
            run(["ip", "-n", ns.name, "-batch", "-"], input="".join(
                "neigh replace %s lladdr %s nud permanent dev %s\n" % (addr, mac[peer], dev) for addr in (v4, v6)))
        yield Topology(a, b)
    finally:
        for ns in reversed(created):
            netns_destroy(ns)


@pytest.fixture
def workdir():
    # Short, so that the unix socket path stays well under 108 bytes.
    d = tempfile.mkdtemp(prefix="clsdt-", dir="/tmp")
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


# ---------------------------------------------------------------------------------------------
# tcx through bpf(2) directly (bpftool 7.1 predates tcx)

SYS_BPF = 321  # x86_64
BPF_OBJ_GET, BPF_PROG_QUERY, BPF_LINK_DETACH = 7, 16, 34
TCX_ATTACH = {"ingress": 46, "egress": 47}


def _sys_bpf(cmd, attr):
    r = _libc.syscall(SYS_BPF, cmd, ctypes.byref(attr), ctypes.sizeof(attr))
    if r < 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))
    return r


def tcx_query(ifindex, hook):
    progs, links = (ctypes.c_uint32 * 64)(), (ctypes.c_uint32 * 64)()
    attr = (ctypes.c_uint64 * 16)()
    raw = ctypes.cast(attr, ctypes.POINTER(ctypes.c_uint32))
    raw[0], raw[1] = ifindex, TCX_ATTACH[hook]
    attr[2] = ctypes.addressof(progs)
    raw[6] = 64
    attr[5] = ctypes.addressof(links)
    _sys_bpf(BPF_PROG_QUERY, attr)
    return [(progs[i], links[i]) for i in range(raw[6])]


def tcx_detach_pinned(path):
    """What another tool could do: detach the link pinned at path (the pin stays)."""
    name = ctypes.create_string_buffer(path.encode())
    attr = (ctypes.c_uint64 * 16)()
    attr[0] = ctypes.addressof(name)
    fd = _sys_bpf(BPF_OBJ_GET, attr)
    try:
        attr = (ctypes.c_uint64 * 16)()
        ctypes.cast(attr, ctypes.POINTER(ctypes.c_uint32))[0] = fd
        _sys_bpf(BPF_LINK_DETACH, attr)
    finally:
        os.close(fd)


@pytest.fixture(scope="session", autouse=True)
def tools():
    """Every tool the tests run is there, or the run stops at once with one line that says which are
    missing and which packages bring them (scripts/bootstrap installs them)."""
    p = subprocess.run([os.path.join(SOURCE_DIR, "scripts", "bootstrap"), "--check", "--tests"],
                       capture_output=True, text=True)
    if p.returncode != 0:
        pytest.exit(p.stderr.strip() or "scripts/bootstrap --check failed", returncode=4)


def _stale_bpffs():
    """What earlier runs that were killed left: their bpffs, where no process of theirs lives."""
    for d in glob.glob("/run/clsdt-bpffs.*"):
        pid = d.rsplit(".", 1)[1]
        if pid.isdigit() and not os.path.exists("/proc/%s" % pid):
            run(["umount", "-l", d], check=False)
            shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="session", autouse=True)
def bpffs(tools):
    _stale_bpffs()
    os.makedirs(BPFFS_ROOT, exist_ok=True)
    run(["mount", "-t", "bpf", "bpf", BPFFS_ROOT])
    try:
        yield BPFFS_ROOT
    finally:
        run(["umount", "-l", BPFFS_ROOT], check=False)
        shutil.rmtree(BPFFS_ROOT, ignore_errors=True)


# ---------------------------------------------------------------------------------------------
# tc and bpftool observers


class TcFilter:
    def __init__(self, line):
        self.line = line
        self.pref = int(_search(r"\bpref (\d+)", line))
        h = _search(r"\bhandle (0x[0-9a-f]+|\d+)", line)
        self.handle = int(h, 0) if h is not None else None
        m = re.search(r"\bhandle \S+ (?:(?:flowid|classid) \S+ )?(\S+)", line)
        self.name = m.group(1) if m else None
        i = _search(r"\bid (\d+)", line)
        self.id = int(i) if i is not None else None
        self.tag = _search(r"\btag ([0-9a-f]+)", line)
        self.prog_name = _search(r"\bname (\S+)", line)
        self.direct_action = " direct-action" in line
        self.classid = _search(r"\b(?:classid|flowid) (\S+)", line)

    def __repr__(self):
        return "TcFilter(%r)" % self.line


def _search(pattern, text):
    m = re.search(pattern, text)
    return m.group(1) if m else None


def parse_tc_filters(text):
    """The filters of `tc filter show` output: one per line with a handle (the pref-only lines that
    tc prints for each chain are skipped)."""
    return [TcFilter(l) for l in text.splitlines() if l.startswith("filter ") and " handle " in l]


def bpftool_json(*args):
    return json.loads(run(["bpftool", "-j", *args]).stdout)


def prog_show(prog_id):
    return bpftool_json("prog", "show", "id", str(prog_id))


def prog_map_id(prog_id, map_name):
    """The id of the map named map_name (kernel names are cut at 15 characters) the program uses."""
    for mid in prog_show(prog_id).get("map_ids", []):
        m = bpftool_json("map", "show", "id", str(mid))
        if m.get("name") == map_name[:15]:
            return mid
    raise AssertionError("program %d has no map %s" % (prog_id, map_name))


def _map_value(map_id, key=0):
    for e in bpftool_json("map", "dump", "id", str(map_id)):
        f = e.get("formatted")
        if f is not None and f.get("key") == key:
            return f["value"], None
        raw_key = bytes(int(b, 16) for b in e["key"])
        if int.from_bytes(raw_key, "little") == key:
            return None, bytes(int(b, 16) for b in e["value"])
    raise AssertionError("map %d has no key %d" % (map_id, key))


def read_counter(map_id):
    """count.bpf.o's counters[0]: (packets, bytes)."""
    formatted, raw = _map_value(map_id)
    if formatted is not None:
        return formatted["packets"], formatted["bytes"]
    return int.from_bytes(raw[0:8], "little"), int.from_bytes(raw[8:16], "little")


def read_u64(map_id):
    """A __u64 array map's element 0 (drop-port.bpf.o's dropped)."""
    formatted, raw = _map_value(map_id)
    if formatted is not None:
        return int(formatted)
    return int.from_bytes(raw[0:8], "little")


# ---------------------------------------------------------------------------------------------
# traffic


def ping(ns, addr, count=10):
    """count echo requests from ns to addr, all answered (it fails otherwise)."""
    ns.run("ping", "-q", "-n", "-c", str(count), "-i", "0.01", "-W", "2", addr, timeout=20)


def udp_exchange(src, dst, dst_addr, counts, marker_port=40000, timeout=3.0):
    """Sends counts[port] UDP datagrams from namespace src to dst_addr:port in namespace dst and
    returns how many arrived per port. A marker datagram sent last (to a port nothing drops) tells
    when everything before it has been through the hooks."""
    family = socket.AF_INET6 if ":" in dst_addr else socket.AF_INET
    rx = {}
    tx = src.socket(family, socket.SOCK_DGRAM)
    try:
        for port in list(counts) + [marker_port]:
            s = dst.socket(family, socket.SOCK_DGRAM)
            s.bind((dst_addr, port))
            s.setblocking(False)
            rx[port] = s
        got = {port: 0 for port in counts}
        for port, n in counts.items():
            for i in range(n):
                tx.sendto(b"clsd-test %d %d" % (port, i), (dst_addr, port))
        tx.sendto(b"marker", (dst_addr, marker_port))
        deadline = time.monotonic() + timeout
        marker_seen = False
        while not marker_seen and time.monotonic() < deadline:
            ready, _, _ = select.select(list(rx.values()), [], [], 0.05)
            for s in ready:
                port = s.getsockname()[1]
                while True:
                    try:
                        s.recv(2048)
                    except BlockingIOError:
                        break
                    if port == marker_port:
                        marker_seen = True
                    else:
                        got[port] += 1
        assert marker_seen, "the marker datagram to port %d never arrived" % marker_port
        # Whatever was queued before the marker has been delivered by now; drain it.
        for port, s in rx.items():
            while port != marker_port:
                try:
                    s.recv(2048)
                except BlockingIOError:
                    break
                got[port] += 1
        return got
    finally:
        tx.close()
        for s in rx.values():
            s.close()


@contextlib.contextmanager
def udp_stream(src, dst, dst_addr, counts, pause, timeout):
    """udp_exchange(src, dst, dst_addr, counts) over and over on a thread, pause seconds apart, while the
    with block runs (traffic flowing while a test looks at something else)."""
    stop = threading.Event()

    def send():
        while not stop.is_set():
            udp_exchange(src, dst, dst_addr, counts, timeout=timeout)
            time.sleep(pause)
    t = threading.Thread(target=send, daemon=True)
    t.start()
    try:
        yield
    finally:
        stop.set()
        t.join(timeout=5)


@contextlib.contextmanager
def tc_monitor(ns):
    """Captures `tc monitor` in ns for the duration of the block. Start and end are fenced by a
    clsact qdisc added to and deleted from lo, so that no event of the block is missed: netlink
    delivers events in order. Yields a list that holds the lines seen in between afterwards."""
    proc = ns.popen("tc", "monitor", stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines = []
    lock = threading.Lock()

    def reader():
        for line in proc.stdout:
            with lock:
                lines.append(line.rstrip("\n"))

    t = threading.Thread(target=reader, daemon=True)
    t.start()

    def fence_added(l):
        return not l.startswith("deleted") and "qdisc clsact" in l and "dev lo " in l

    def fence_deleted(l):
        return l.startswith("deleted qdisc clsact") and "dev lo " in l

    def nth(pred, n):
        """Index of the n-th (1-based) line matching pred, or None."""
        with lock:
            found = [i for i, l in enumerate(lines) if pred(l)]
        return found[n - 1] if len(found) >= n else None

    captured = []
    try:
        # The subscription is in place once a fence shows up; until then, fence again. `replace` of
        # the clsact is reported each time, so the one deletion is the end fence.
        deadline = time.monotonic() + 5
        start = None
        while start is None:
            ns.run("tc", "qdisc", "replace", "dev", "lo", "clsact")
            start = wait_for_index(lambda: nth(fence_added, 1), 0.5)
            assert start is not None or time.monotonic() < deadline, "tc monitor never reported the start fence"
        yield captured
        ns.run("tc", "qdisc", "del", "dev", "lo", "clsact")
        end = wait_for_index(lambda: nth(fence_deleted, 1), 3)
        assert end is not None, "tc monitor never reported the end fence"
        with lock:
            captured.extend(l for l in lines[start + 1:end] if not fence_added(l))
    finally:
        proc.terminate()
        wait_or_kill(proc, 3)
        t.join(timeout=3)


def wait_for_index(get, timeout):
    """Polls get() until it returns an index (not None), or returns None after timeout."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        i = get()
        if i is not None:
            return i
        time.sleep(0.01)
    return None


# ---------------------------------------------------------------------------------------------
# HTTP client


class UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path, timeout=10):
        super().__init__("localhost", timeout=timeout)
        self.unix_path = path

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(self.timeout)
        s.connect(self.unix_path)
        self.sock = s


def wait_or_kill(proc, timeout):
    """Waits for proc to end (it was told to), and kills it past timeout."""
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def netns_connect(ns, host, port, timeout):
    """A TCP socket connected to host:port from inside ns."""
    s = ns.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(timeout)
    s.connect((host, port))
    return s


class NetnsHTTPConnection(http.client.HTTPConnection):
    """TCP to host:port as seen from inside a namespace."""

    def __init__(self, ns, host, port, timeout=10):
        super().__init__(host, port, timeout=timeout)
        self.ns = ns

    def connect(self):
        self.sock = netns_connect(self.ns, self.host, self.port, self.timeout)


class NetnsHTTPSConnection(http.client.HTTPSConnection):
    """HTTPS to host:port from inside a namespace; cafile to trust, and a client certificate if given."""

    def __init__(self, ns, host, port, cafile, cert=None, key=None, timeout=10):
        ctx = ssl.create_default_context(cafile=cafile)
        ctx.check_hostname = False  # the test certificates name the namespace's address
        if cert:
            ctx.load_cert_chain(cert, key)
        super().__init__(host, port, timeout=timeout, context=ctx)
        self.ns = ns

    def connect(self):
        self.sock = self._context.wrap_socket(netns_connect(self.ns, self.host, self.port, self.timeout),
                                              server_hostname=self.host)


class Pki:
    """A certificate authority made with openssl in dir: issue(name, subject, sans) -> (cert, key)."""

    def __init__(self, d, name="ca"):
        self.dir = d
        os.makedirs(d, exist_ok=True)
        self.key, self.cert = os.path.join(d, name + ".key"), os.path.join(d, name + ".pem")
        self._openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout",
                      self.key, "-out", self.cert, "-days", "30", "-subj", "/CN=clsd test %s" % name)

    def _openssl(self, *args):
        subprocess.run(["openssl", *args], check=True, capture_output=True)

    def issue(self, name, subject, sans=(), days=30):
        key, csr, crt = (os.path.join(self.dir, name + ext) for ext in (".key", ".csr", ".pem"))
        ext = os.path.join(self.dir, name + ".ext")
        with open(ext, "w") as f:
            f.write("subjectAltName=%s\n" % ",".join(sans) if sans else "basicConstraints=CA:FALSE\n")
        self._openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", key,
                      "-out", csr, "-subj", subject)
        # days=-1: expired a day ago
        self._openssl("x509", "-req", "-in", csr, "-CA", self.cert, "-CAkey", self.key, "-CAcreateserial", "-out",
                      crt, "-days", str(days), "-extfile", ext)
        return crt, key


def tls_server(workdir, addrs=("198.18.0.1", "127.0.0.1"), name="pki"):
    """A CA and a server certificate for addrs: (pki, clsd's TLS flags)."""
    pki = Pki(os.path.join(workdir, name))
    cert, key = pki.issue("server", "/CN=clsd", ["IP:%s" % a for a in addrs])
    return pki, ["--tls-cert", cert, "--tls-key", key]


class Response:
    def __init__(self, status, reason, headers, body):
        self.status, self.reason, self.headers, self.body = status, reason, headers, body
        self._json = None

    @property
    def json(self):
        if self._json is None:
            try:
                self._json = json.loads(self.body)
            except ValueError as e:
                raise AssertionError("not JSON (HTTP %d): %r" % (self.status, self.body[:300])) from e
        return self._json

    def __repr__(self):
        return "Response(%d, %r)" % (self.status, self.body[:2000])


_DEFAULT = object()


class Api:
    """The REST API over one connection factory; a new connection per request."""

    def __init__(self, connect):
        self.connect = connect

    def request(self, method, path, body=None, headers=None, content_type=_DEFAULT):
        h = dict(headers or {})
        if isinstance(body, (dict, list)):
            body = json.dumps(body).encode()
            if content_type is _DEFAULT:
                content_type = "application/json"
        elif isinstance(body, str):
            body = body.encode()
        if content_type is not _DEFAULT and content_type is not None:
            h["Content-Type"] = content_type
        conn = self.connect()
        try:
            try:
                conn.request(method, path, body=body, headers=h)
            except (BrokenPipeError, ConnectionResetError, ssl.SSLEOFError):
                # The server may answer (413, 401) and close before reading the whole body; its
                # answer is still waiting in our socket.
                pass
            r = conn.getresponse()
            return Response(r.status, r.reason, r.headers, r.read())
        finally:
            conn.close()

    def get(self, path, **kw):
        return self.request("GET", path, **kw)

    def delete(self, path, **kw):
        return self.request("DELETE", path, **kw)

    def put_classifier(self, ifname, doc, **kw):
        return self.request("PUT", "/ifaces/%s/classifier" % ifname, body=doc, **kw)

    def get_classifier(self, ifname):
        return self.get("/ifaces/%s/classifier" % ifname)

    def delete_classifier(self, ifname, **kw):
        return self.delete("/ifaces/%s/classifier" % ifname, **kw)

    def upload(self, path_or_bytes, content_type="application/octet-stream"):
        data = path_or_bytes
        if isinstance(path_or_bytes, str):
            with open(path_or_bytes, "rb") as f:
                data = f.read()
        return self.request("POST", "/objects", body=data, content_type=content_type)

    def upload_ok(self, path):
        r = self.upload(path)
        assert r.status in (200, 201), r
        return r.json["digest"]

    def healthy(self):
        try:
            r = self.get("/healthz")
        except OSError:
            return False
        return r.status == 200 and r.json == {"status": "ok"}


def assert_error(resp, status, code):
    """The error shape of every failure: {"error":{"code","message"[,"detail"]}}."""
    assert resp.status == status, "want HTTP %d %s, got %r" % (status, code, resp)
    body = resp.json
    assert list(body) == ["error"], body
    err = body["error"]
    assert set(err) >= {"code", "message"} and set(err) <= {"code", "message", "detail"}, err
    assert err["code"] == code, err
    assert isinstance(err["message"], str) and err["message"], err
    return err


# ---------------------------------------------------------------------------------------------
# clsd processes


SANITIZER_MARKS = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:")


class Clsd:
    """One clsd (state dir, socket, log) in a namespace; start/stop/restart keep state and socket."""

    def __init__(self, ns, workdir, name="clsd", args=()):
        self.ns = ns
        self.dir = os.path.join(workdir, name)
        os.makedirs(self.dir, exist_ok=True)
        self.state_dir = os.path.join(self.dir, "state")
        self.bpffs_dir = os.path.join(BPFFS_ROOT, "%s-%s" % (os.path.basename(workdir), name))
        self.socket = os.path.join(self.dir, "clsd.sock")
        self.log_path = os.path.join(self.dir, "clsd.log")
        self.args = list(args)
        self.binary = CLSD  # another build's clsd for upgrade tests
        # No test's clsd goes on the host's system bus; test_dbus.py gives it a bus of its own.
        self.env = dict(os.environ, DBUS_SYSTEM_BUS_ADDRESS="unix:path=/nonexistent/clsd-tests-have-no-bus")
        self.proc = None
        self.runs = 0
        self._log_offset = 0
        self.api = Api(lambda: UnixHTTPConnection(self.socket))

    def argv(self, extra=()):
        # A hogs directory of its own (tests that use hogs pass --hogs-dir, which wins): the host's
        # /etc/clsd/hogs.d has no say in a test. Objects named by path may be in the tree, the build and
        # the tests' temporary directories (tests that check --object-dir give their own).
        # (The previous release's clsd of test_upgrade has no --object-dir.)
        given = any(a.startswith("--object-dir") for a in (*self.args, *extra))
        previous = self.binary.startswith(os.path.join(BUILD_DIR, "previous-"))
        dirs = [] if given or previous else [a for d in TEST_OBJECT_DIRS for a in ("--object-dir", d)]
        # nor has the host's /etc/clsd/clsd.conf (a test that wants a configuration file passes --config)
        if not previous and not any(a.startswith("--config") for a in (*self.args, *extra)):
            dirs += ["--config", ""]
        return [self.binary, "--state-dir", self.state_dir, "--socket", self.socket, "--log-level", "debug",
                "--hogs-dir", os.path.join(self.dir, "hogs.d"), "--bpffs-dir", self.bpffs_dir, *dirs, *self.args,
                *extra]

    def start(self, extra=(), wait=True):
        assert self.proc is None, "already running"
        self.runs += 1
        with open(self.log_path, "ab") as log:
            log.write(b"==== clsd run %d: %s\n" % (self.runs, " ".join(self.argv(extra)).encode()))
            log.flush()
            self._log_offset = log.tell()
            self.proc = self.ns.popen(*self.argv(extra), stdin=subprocess.DEVNULL, stdout=log,
                                      stderr=subprocess.STDOUT, env=self.env)
        if wait:
            self.wait_healthy()
        return self

    def wait_healthy(self, timeout=HEALTH_TIMEOUT):
        deadline = time.monotonic() + timeout
        while not self.api.healthy():
            if self.proc.poll() is not None:
                rc = self.proc.returncode
                self.proc = None
                raise AssertionError("clsd exited %d during start-up:\n%s" % (rc, self.log()))
            if time.monotonic() > deadline:
                raise AssertionError("clsd did not answer /healthz within %.0f s:\n%s" % (timeout, self.log()))
            time.sleep(0.01)

    def stop(self, sig=signal.SIGTERM, timeout=5):
        """Stops clsd with sig; returns its exit status."""
        assert self.proc is not None, "not running"
        self.proc.send_signal(sig)
        try:
            rc = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError("clsd did not exit within %d s of %s" % (timeout, sig))
        finally:
            self.proc = None
        return rc

    def restart(self, extra=()):
        assert self.stop() == 0, self.log()
        return self.start(extra)

    def kill(self):
        if self.proc is not None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.kill()
            self.proc.wait(timeout=5)
            self.proc = None

    def log(self):
        """The whole log of every run of this clsd."""
        try:
            with open(self.log_path, errors="replace") as f:
                return f.read()
        except FileNotFoundError:
            return ""

    def log_this_run(self):
        with open(self.log_path, "rb") as f:
            f.seek(self._log_offset)
            return f.read().decode(errors="replace")

    def ctl(self, *args, check=None, input=None, timeout=15):
        """Runs clsctl against this clsd's socket; check=N asserts the exit status."""
        p = run([CLSCTL, "--socket", self.socket, *args], check=False, input=input, timeout=timeout)
        if check is not None:
            assert p.returncode == check, "clsctl %s: exit %d, want %d\nstdout: %s\nstderr: %s" % (
                " ".join(args), p.returncode, check, p.stdout, p.stderr)
        return p


@pytest.fixture
def clsd_factory(request, workdir):
    """clsd_factory(ns, name=..., args=..., start=True) -> Clsd; all are killed at teardown."""
    made = []
    request.node._clsd_instances = made

    def factory(ns, name=None, args=(), start=True):
        c = Clsd(ns, workdir, name or "clsd%d" % len(made), args)
        made.append(c)
        if start:
            c.start()
        return c

    try:
        yield factory
    finally:
        # A clean stop lets LeakSanitizer report in a sanitizer build; then no clsd log may hold a
        # sanitizer's report, whatever the test itself checked.
        reports = []
        for c in made:
            if c.proc is not None:
                with contextlib.suppress(Exception):
                    c.stop()
            c.kill()
            # Unpinning the tcx links of this clsd releases them.
            shutil.rmtree(c.bpffs_dir, ignore_errors=True)
            log = c.log()
            if any(m in log for m in SANITIZER_MARKS):
                reports.append("%s:\n%s" % (c.log_path, log[-6000:]))
        assert not reports, "sanitizer reports in clsd's log:\n" + "\n".join(reports)


@pytest.fixture
def clsd(net, clsd_factory):
    """clsd running in net.a, on a fresh state directory."""
    return clsd_factory(net.a, name="clsd")


@pytest.fixture
def api(clsd):
    return clsd.api


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.failed:
        for c in getattr(item, "_clsd_instances", []):
            report.sections.append(("clsd log (%s)" % c.dir, c.log()[-20000:]))


# ---------------------------------------------------------------------------------------------
# BPF objects


class BpfObjects:
    def __init__(self, contrib, tests):
        self.count = os.path.join(contrib, "count.bpf.o")
        self.drop_port = os.path.join(contrib, "drop-port.bpf.o")
        self.classid = os.path.join(contrib, "classid.bpf.o")
        # stats per IP family and protocol (struct keys), a per-CPU size histogram, packets per port
        self.proto_stats = os.path.join(contrib, "proto-stats.bpf.o")
        self.rejected = os.path.join(tests, "rejected.bpf.o")
        self.xdp = os.path.join(tests, "xdp.bpf.o")
        self.xdp_only = os.path.join(tests, "xdp-only.bpf.o")
        # count.bpf.c with a bigger map: the same instructions, so the same tag, but another program
        self.count_wide = os.path.join(tests, "count-wide.bpf.o")
        # a newer build of count.bpf.c: the same map, other instructions, one more map
        self.count_v2 = os.path.join(tests, "count-v2.bpf.o")
        # an act_bpf action that marks IPv4 packets DSCP EF, checksum mended
        self.set_dscp = os.path.join(contrib, "set-dscp.bpf.o")
        # programs in sections libbpf does not know: match_udp (classic), count_by_cb (an action),
        # count_all (direct action)
        self.custom_sec = os.path.join(tests, "custom-sec.bpf.o")
        # 32 programs (slow_0 … slow_31) the verifier takes about a tenth of a second each over
        self.slow_verify = os.path.join(tests, "slow-verify.bpf.o")
        self.slow_programs = ["slow_%d" % i for i in range(32)]
        # objects valid and wide along one axis (tests/bpf/gen-wide), and one with externs and map-in-map
        self.wide = {kind: os.path.join(tests, "wide-%s.bpf.o" % kind) for kind in WIDE_BPF}
        self.externs = os.path.join(tests, "externs.bpf.o")
        # drops every packet: valid, and wrong (on a node's uplink, it cuts etcd off)
        self.drop_all = os.path.join(tests, "drop-all.bpf.o")

    def all(self):
        return [self.count, self.drop_port, self.classid, self.rejected, self.xdp, self.xdp_only, self.set_dscp,
                self.custom_sec, self.slow_verify, self.externs, self.drop_all, *self.wide.values()]


TEST_BPF = ("rejected", "xdp", "xdp-only", "count-wide", "count-v2", "custom-sec", "slow-verify", "externs",
            "drop-all")
# tests/meson.build's list: the kinds of tests/bpf/gen-wide built
WIDE_BPF = ("programs-64", "programs-512", "relocations-70", "relocations-500", "maps-64", "subprograms-64",
            "btf-2000", "rodata-1024", "core-200", "globals-200")


def _compile_test_objects(out_dir):
    multiarch = run(["gcc", "-print-multiarch"]).stdout.strip()
    for name in TEST_BPF:
        src = os.path.join(SOURCE_DIR, "tests", "bpf", name + ".bpf.c")
        run(["clang", "-O2", "-g", "-target", "bpf", "-I/usr/include/" + multiarch, "-c", src, "-o",
             os.path.join(out_dir, name + ".bpf.o")], timeout=60)
    for kind in WIDE_BPF:
        src = os.path.join(out_dir, "wide-%s.bpf.c" % kind)
        run([PYTHON, os.path.join(SOURCE_DIR, "tests", "bpf", "gen-wide"), kind, src])
        run(["clang", "-O2", "-g", "-target", "bpf", "-I/usr/include/" + multiarch, "-c", src, "-o",
             src[:-2] + ".o"], timeout=60)


@pytest.fixture(scope="session")
def bpf():
    for prog in (CLSD, CLSCTL):
        assert os.access(prog, os.X_OK), "%s is missing; build with ninja -C %s" % (prog, BUILD_DIR)
    assert os.geteuid() == 0, "the integration tests need root (namespaces, tc, bpf)"
    contrib = os.path.join(BUILD_DIR, "contrib", "bpf")
    tmp = None
    tests = os.environ.get("CLSD_TEST_BPF_DIR")
    if not tests:
        built = os.path.join(BUILD_DIR, "tests", "bpf")
        if all(os.path.exists(os.path.join(built, n + ".bpf.o"))
               for n in TEST_BPF + tuple("wide-" + k for k in WIDE_BPF)):
            tests = built
        else:
            tmp = tempfile.mkdtemp(prefix="clsdt-bpf-")
            _compile_test_objects(tmp)
            tests = tmp
    objs = BpfObjects(contrib, tests)
    for p in objs.all():
        assert os.path.exists(p), "%s is missing" % p
    try:
        yield objs
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)


# ---------------------------------------------------------------------------------------------
# documents


def filt(name, obj, **kw):
    """A Filter of a document: filt("web", digest, priority=10, program="count_pkts")."""
    f = {"name": name, "object": obj}
    f.update(kw)
    return f


def status_of(body, name, direction="ingress"):
    for s in body["status"][direction]:
        if s["name"] == name:
            return s
    raise AssertionError("no status for %s in %r" % (name, body))
