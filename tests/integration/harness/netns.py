"""Network namespaces and the veth pair every test gets (net), a work directory, and tcx through bpf(2)
directly (bpftool 7.1 predates tcx)."""
import contextlib
import ctypes
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import threading

import pytest

from harness.base import ADDR6_A, ADDR6_B, ADDR_A, ADDR_B, CLONE_NEWNET, IF_A, IF_B, run, unique_name
from harness.observe import parse_tc_filters


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


def block_store_write(clsd, ifname):
    """The next write of the interface's document fails (its temporary file's name is taken)."""
    os.mkdir(os.path.join(clsd.state_dir, "documents", ".%s.json.%d.tmp" % (ifname, clsd.proc.pid)))
