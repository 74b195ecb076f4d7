"""contrib/desktop/clsd-desktop, the desktop tool on D-Bus (GTK 4 and libadwaita through python3-gi),
under Xvfb against a clsd with traffic flowing: its columns, clsd's filters and a foreign one, rates that
come in PropertiesChanged (Manager.SubscribeCounters), a graph that moves between two screenshots (a pixel
region of Xvfb's framebuffer), a map's entries typed, a repair as it happens, and clsd restarting (its bus
name lost and back)."""

import os
import shutil
import struct
import subprocess
import threading
import time
import zlib

import pytest

from harness.api import wait_or_kill
from harness.base import filt, SOURCE_DIR, wait_for
from harness.etcd import count_policy
from harness.observe import udp_exchange, udp_stream


pytestmark = pytest.mark.once

TOOL = os.path.join(SOURCE_DIR, "contrib", "desktop", "clsd-desktop")


def screenshot(fbdir, png):
    """The screen as Xvfb keeps it (-fbdir: an XWD file), written as a PNG; returns (width, height, how
    many distinct colours): a window that drew its rows has many, a blank screen one."""
    with open(os.path.join(fbdir, "Xvfb_screen0"), "rb") as f:
        data = f.read()
    h = struct.unpack(">25I", data[:100])
    header_size, width, height, byte_order, bpp, bytes_per_line, ncolors = h[0], h[4], h[5], h[7], h[11], h[12], h[19]
    assert bpp == 32, bpp
    pixels = data[header_size + 12 * ncolors:]
    rows, colours = [], set()
    for y in range(height):
        line = pixels[y * bytes_per_line:y * bytes_per_line + width * 4]
        rgb = bytearray()
        for x in range(0, width * 4, 4):
            b, g, r = (line[x], line[x + 1], line[x + 2]) if byte_order == 0 else (line[x + 3], line[x + 2], line[x + 1])
            rgb += bytes((r, g, b))
        rows.append(b"\0" + bytes(rgb))
        if y % 4 == 0:
            colours.update(bytes(rgb[i:i + 3]) for i in range(0, len(rgb), 12))

    def chunk(kind, body):
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body) & 0xffffffff)
    with open(png, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)) +
                chunk(b"IDAT", zlib.compress(b"".join(rows), 9)) + chunk(b"IEND", b""))
    return width, height, len(colours)


@pytest.fixture
def display(workdir):
    n = next(n for n in range(90, 200) if not os.path.exists("/tmp/.X%d-lock" % n))
    fbdir = os.path.join(workdir, "fb")
    os.makedirs(fbdir)
    p = subprocess.Popen(["Xvfb", ":%d" % n, "-screen", "0", "1280x800x24", "-nolisten", "tcp", "-fbdir", fbdir],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for(lambda: os.path.exists("/tmp/.X11-unix/X%d" % n), timeout=10, what="Xvfb")
        yield ":%d" % n, fbdir
    finally:
        p.kill()
        p.wait()


def region(fbdir, x, y, w, h):
    """The bytes of a rectangle of the screen (Xvfb's framebuffer): what two screenshots compare."""
    with open(os.path.join(fbdir, "Xvfb_screen0"), "rb") as f:
        data = f.read()
    hd = struct.unpack(">25I", data[:100])
    header_size, bytes_per_line, ncolors = hd[0], hd[12], hd[19]
    pixels = data[header_size + 12 * ncolors:]
    return b"".join(pixels[(y + r) * bytes_per_line + x * 4:(y + r) * bytes_per_line + (x + w) * 4] for r in range(h))


class Desktop:
    """clsd-desktop --dump under Xvfb, its lines read as they come."""

    def __init__(self, display, bus, workdir):
        env = dict(os.environ, DISPLAY=display, DBUS_SYSTEM_BUS_ADDRESS=bus.address, GDK_BACKEND="x11",
                   GSK_RENDERER="cairo", NO_AT_BRIDGE="1", HOME=workdir, XDG_RUNTIME_DIR=workdir)
        self.proc = subprocess.Popen(["/usr/bin/python3", TOOL, "--dump"], env=env, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        self.lines = []
        threading.Thread(target=lambda: self.lines.extend(iter(self.proc.stdout.readline, "")), daemon=True).start()

    def shown(self, *words, since=0):
        return any(all(w in l for w in words) for l in self.lines[since:])

    def wait(self, *words, since=0, timeout=20):
        wait_for(lambda: self.shown(*words, since=since), timeout=timeout, interval=0.1,
                 what="%r in the window: %r" % (words, self.lines[-8:]))

    def last(self, prefix):
        return next((l for l in reversed(self.lines) if l.startswith(prefix)), None)

    def close(self):
        self.proc.terminate()
        wait_or_kill(self.proc, 5)
        return self.proc.stderr.read()


def test_the_desktop_tool_shows_filters_rates_maps_repairs_and_rides_out_a_restart(
        net, bus, dclsd, bpf, workdir, display):  # noqa: F811
    display, fbdir = display
    dclsd.stop()
    dclsd.start(extra=("--bpf-stats",))
    wait_for(lambda: "D-Bus: org.clsd1 on the system bus" in dclsd.log_this_run(), timeout=5, what="clsd on the bus")
    doc = {"ingress": [filt("stats", bpf.proto_stats, priority=10)], "egress": [filt("web", bpf.count, priority=20)]}
    assert dclsd.api.put_classifier(net.if_a, doc).status == 200
    # a foreign filter beside clsd's: shown as such
    net.a.run("tc", "filter", "add", "dev", net.if_a, "ingress", "pref", "50", "protocol", "all", "u32", "match",
              "u32", "0", "0", "classid", "1:1")
    app = Desktop(display, bus, workdir)
    try:
        # the columns, clsd's filters and the foreign one
        app.wait("columns: Interface | Hook | Filter | State | Source | Priority | Program | Attached | Repairs | "
                 "Packets/s | Bytes/s | Last 2 minutes")
        app.wait("row: %s | ingress | stats | configured | api | 10 |" % net.if_a, "| yes | 0 |")
        app.wait("row: %s | egress | web | configured | api | 20 |" % net.if_a)
        app.wait("row: %s | ingress | u32 | foreign | foreign | 50 |" % net.if_a)
        # traffic flows: rates come in PropertiesChanged (no polling by the window), the graph moves
        with udp_stream(net.b, net.a, net.addr_a, {5353: 40}, pause=0.05, timeout=0.5):
            def rate():
                line = app.last("rate: %s ingress stats" % net.if_a)
                return line and float(line.split("packets/s=")[1].split()[0]) > 50 and line
            wait_for(rate, timeout=20, interval=0.2, what="a rate in the window: %r" % app.lines[-5:])
            g = app.last("graph-at: %s ingress stats " % net.if_a)
            assert g, app.lines[-10:]
            x, y, w, h = (int(v) for v in g.split()[4:])
            assert w >= 100 and h >= 10, g
            png1, png2 = os.path.join(workdir, "desktop-1.png"), os.path.join(workdir, "desktop-2.png")
            time.sleep(1.5)
            screenshot(fbdir, png1)
            before = region(fbdir, x, y, w, h)
            # the next screenshots, a second apart, until the graph's pixels moved (10 s at most: a
            # loaded machine draws late)
            for _ in range(10):
                time.sleep(1)
                width, height, colours = screenshot(fbdir, png2)
                after = region(fbdir, x, y, w, h)
                if after != before:
                    break
            samples = [l for l in app.lines if l.startswith("rate: %s ingress stats" % net.if_a)]
        assert (width, height) == (1280, 800) and colours > 8, (width, height, colours)
        assert before != after, "the graph did not move in 10 s of traffic: %s, %d samples" % (g, len(samples))
        assert len(set(after)) > 2, "the graph region is blank"
        if os.environ.get("CLSD_DESKTOP_SCREENSHOT"):  # docs/desktop.png, which clsd-api(7) names
            shutil.copy(png2, os.environ["CLSD_DESKTOP_SCREENSHOT"])
        # the selected filter's maps as a typed table: proto-stats' keys decoded through BTF
        app.wait("map: %s bytes_by_proto" % net.if_a)
        app.wait("map-entry: %s bytes_by_proto key={" % net.if_a, "FAMILY_IPV4", "proto")
        # a repair appears
        since = len(app.lines)
        net.a.run("tc", "filter", "del", "dev", net.if_a, "egress", "pref", "20")
        app.wait("event: %s: repaired" % net.if_a, since=since)
        app.wait("row: %s | egress | web | configured | api | 20 |" % net.if_a, "| 1 |", since=since)
        # clsd restarts: the window says it left, keeps the picture, and follows it again
        since = len(app.lines)
        dclsd.stop()
        app.wait("event: clsd left the bus", since=since)
        app.wait("online=False", since=since)
        dclsd.start(extra=("--bpf-stats",))
        app.wait("event: clsd on the bus", since=since)
        app.wait("online=True", since=since)
        app.wait("row: %s | ingress | stats | configured | api | 10 |" % net.if_a, since=since)
        since = len(app.lines)

        def moving():
            udp_exchange(net.b, net.a, net.addr_a, {5353: 40}, timeout=0.5)
            return any(l.startswith("rate: %s ingress stats" % net.if_a) and "packets/s=0.0" not in l
                       for l in app.lines[since:])
        wait_for(moving, timeout=20, interval=0.1, what="counters again after the restart: %r" % app.lines[-5:])
    finally:
        err = app.close()
        net.a.run("tc", "filter", "del", "dev", net.if_a, "ingress", "pref", "50", check=False)
    assert "Traceback" not in err, err


def test_the_desktop_tool_shows_the_nodes_fleet_state(fleet, bus, bpf, workdir, display):  # noqa: F811
    """A fleet node on the window's bus: its fleet state (connected, name, revision) in the Fleet tab, and
    a new revision applied reaches the window by PropertiesChanged (sent while it subscribes)."""
    display, _fbdir = display
    h1 = fleet.host("h1", env={"DBUS_SYSTEM_BUS_ADDRESS": bus.address})
    wait_for(lambda: "D-Bus: org.clsd1 on the system bus" in h1.clsd.log(), timeout=5, what="clsd on the bus")
    rev = fleet.apply(count_policy(bpf), workdir)
    fleet.wait_converged("edge-count", rev, {"h1"})
    app = Desktop(display, bus, workdir)
    try:
        app.wait("fleet: Node h1: connected to etcd, revision %d applied." % rev)
        since = len(app.lines)
        rev2 = fleet.apply(count_policy(bpf, prio=11), workdir)
        fleet.wait_converged("edge-count", rev2, {"h1"})
        app.wait("fleet: Node h1: connected to etcd, revision %d applied." % rev2, since=since)
        # what h1 says of the policy: the revision asked, the one its kernel holds, the one it committed
        app.wait("Policy edge-count: applied; asked %d, held %d, committed %d; interfaces: 1 configured"
                 % (rev2, rev2, rev2), since=since)
    finally:
        err = app.close()
    assert "Traceback" not in err, err
