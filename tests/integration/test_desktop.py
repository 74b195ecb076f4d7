"""contrib/desktop/clsd-desktop, the desktop tool on D-Bus (GTK 4 through python3-gi), under Xvfb: it
lists clsd's interfaces from the bus, follows a document applied and a repair by PropertiesChanged alone,
and a screenshot of the screen (Xvfb's framebuffer, written as a PNG) shows it drew."""

import os
import shutil
import struct
import subprocess
import threading
import time
import zlib

import pytest

from conftest import SOURCE_DIR, filt, wait_for, wait_or_kill
from test_dbus import bus, dclsd  # noqa: F401 (fixtures: a dbus-daemon of the test's own, clsd on it)

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
    p = subprocess.Popen(["Xvfb", ":%d" % n, "-screen", "0", "1000x300x24", "-nolisten", "tcp", "-fbdir", fbdir],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for(lambda: os.path.exists("/tmp/.X11-unix/X%d" % n), timeout=10, what="Xvfb")
        yield ":%d" % n, fbdir
    finally:
        p.kill()
        p.wait()


def test_the_desktop_tool_follows_clsd_over_dbus(net, bus, dclsd, bpf, workdir, display):  # noqa: F811
    display, fbdir = display
    png = os.path.join(workdir, "clsd-desktop.png")
    env = dict(os.environ, DISPLAY=display, DBUS_SYSTEM_BUS_ADDRESS=bus.address, GDK_BACKEND="x11",
               GSK_RENDERER="cairo", NO_AT_BRIDGE="1", HOME=workdir, XDG_RUNTIME_DIR=workdir)
    assert dclsd.api.put_classifier(net.if_a, {"ingress": [filt("web", bpf.count, priority=10)]}).status == 200
    app = subprocess.Popen([TOOL, "--dump"], env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    lines = []
    reader = threading.Thread(target=lambda: lines.extend(iter(app.stdout.readline, "")), daemon=True)
    reader.start()
    try:
        def shown(*words):
            return any(all(w in l for w in words) for l in lines)
        wait_for(lambda: shown(net.if_a, "configured", "[api]", "repairs 0", "ingress web@10"), timeout=20,
                 what="the interface in the window: %r" % lines[-5:])
        # a repair: clsd puts the deleted filter back, and the window learns it from PropertiesChanged
        net.a.run("tc", "filter", "del", "dev", net.if_a, "ingress", "pref", "10")
        wait_for(lambda: shown(net.if_a, "configured", "repairs 1"), timeout=20,
                 what="the repair in the window: %r" % lines[-5:])
        # a second interface appears (InterfacesAdded), and goes (InterfacesRemoved)
        assert dclsd.api.put_classifier("vnew", {"ingress": [filt("web", bpf.count, priority=10)]}).status == 202
        wait_for(lambda: shown("vnew", "pending"), timeout=20, what="the new document: %r" % lines[-5:])
        assert dclsd.api.delete_classifier("vnew").status == 204
        wait_for(lambda: lines and lines[-1].startswith(net.if_a) and "1 interface(s)" in lines[-2], timeout=20,
                 what="the document gone: %r" % lines[-5:])
        time.sleep(0.5)  # drawn
        width, height, colours = screenshot(fbdir, png)
        assert (width, height) == (1000, 300) and colours > 4, (width, height, colours)
        if os.environ.get("CLSD_DESKTOP_SCREENSHOT"):  # the README's picture
            shutil.copy(png, os.environ["CLSD_DESKTOP_SCREENSHOT"])
    finally:
        app.terminate()
        wait_or_kill(app, 5)
    assert "Traceback" not in app.stderr.read()
