"""scripts/demo, the README's first command, as a new user runs it (bootstrap finds everything there):
it ends well, shows what it promises (a dry run, counters rising, a repair, a restart that adopts from
the pins and loses no count), prints no escape codes into a pipe, and leaves nothing behind, also when
interrupted."""

import os
import re
import signal
import subprocess
import time

import pytest

from conftest import BUILD_DIR, SOURCE_DIR, run

pytestmark = pytest.mark.once

DEMO = os.path.join(SOURCE_DIR, "scripts", "demo")


def leftovers():
    ns = [n for n in run(["ip", "netns", "list"]).stdout.split() if n.startswith("clsdemo-")]
    pins = [p for p in os.listdir("/sys/fs/bpf") if p.startswith("clsd-demo-")]
    procs = run(["pgrep", "-f", "clsd-demo"], check=False).stdout.split()
    return ns + pins + procs


def test_the_demo_shows_what_it_promises_and_cleans_up():
    p = subprocess.run([DEMO], capture_output=True, text=True, timeout=300, env=dict(os.environ, BUILD_DIR=BUILD_DIR))
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    out = p.stdout
    assert "\x1b[" not in out, "escape codes in a pipe"
    assert "Error" not in out and "error" not in p.stderr.lower(), out[-3000:] + p.stderr[-2000:]
    assert "applying it would change what is below" in out
    counts = [int(n) for n in re.findall(r"eth0 counted (\d+) packets", out)]
    assert len(counts) >= 5 and counts == sorted(counts) and counts[0] > 0, counts
    assert "clsd: state configured, 1 repair(s)" in out
    adopted = re.findall(r"^clsd: adopted program (\w+) .* from its bpffs pin$", out, re.M)
    assert sorted(adopted) == ["count_pkts", "drop_port"], out[-3000:]
    assert "loaded program" not in out.split("Restart clsd")[1]
    assert "the 20 pings made while clsd was down are in it" in out
    assert leftovers() == []


def test_an_interrupted_demo_cleans_up():
    # SIGINT as a terminal's ^C finds it: a suite started in the background (bash's `&` without job
    # control) ignores SIGINT, which the demo would inherit and could not trap
    p = subprocess.Popen([DEMO], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         env=dict(os.environ, BUILD_DIR=BUILD_DIR),
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline = time.monotonic() + 60
        for line in p.stdout:
            if "Real traffic" in line or time.monotonic() > deadline:
                break
        p.send_signal(signal.SIGINT)
        p.wait(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode != 0
    assert leftovers() == []
