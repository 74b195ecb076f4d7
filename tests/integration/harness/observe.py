"""The independent observers: tc's and bpftool's view of filters, programs and maps; traffic (ping, UDP
exchanges and streams) and tc monitor."""
import contextlib
import json
import re
import select
import socket
import subprocess
import threading
import time

from harness.api import wait_or_kill
from harness.base import run


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
