"""scripts/demo, the README's first command, as a new user runs it (bootstrap finds everything there):
it ends well within a minute, shows what it promises (one host: a dry run, counters rising, a repair, a
restart that adopts from the pins and loses no count; across hosts: the fleet's nodes, a rollout in
waves, a bad program halted at the canary that went back by itself, the fleet's counters rising),
prints no escape codes into a pipe, and leaves nothing behind, also when interrupted in either part;
scripts/demo --host runs the first part alone."""

import os
import re
import signal
import subprocess
import time

import pytest

from harness.base import BUILD_DIR, run, SOURCE_DIR


pytestmark = pytest.mark.once

DEMO = os.path.join(SOURCE_DIR, "scripts", "demo")


def leftovers():
    ns = [n for n in run(["ip", "netns", "list"]).stdout.split() if n.startswith("clsdemo-")]
    pins = [p for p in os.listdir("/sys/fs/bpf") if p.startswith("clsd-demo-")]
    procs = run(["pgrep", "-f", "clsd-demo"], check=False).stdout.split()
    return ns + pins + procs


def check_host_part(out):
    assert "applying it would change what is below" in out
    counts = [int(n) for n in re.findall(r"eth0 counted (\d+) packets", out)]
    assert len(counts) >= 5 and counts == sorted(counts) and counts[0] > 0, counts
    assert "clsd: state configured, 1 repair(s)" in out
    adopted = re.findall(r"^clsd: adopted program (\w+) .* from its bpffs pin$", out, re.M)
    assert sorted(adopted) == ["count_pkts", "drop_port"], out[-3000:]
    assert "loaded program" not in out.split("Restart clsd")[1].split("Now across hosts")[0]
    assert "the 20 pings made while clsd was down are in it" in out


def test_the_demo_shows_what_it_promises_and_cleans_up():
    t0 = time.monotonic()
    p = subprocess.run([DEMO], capture_output=True, text=True, timeout=300, env=dict(os.environ, BUILD_DIR=BUILD_DIR))
    took = time.monotonic() - t0
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    out = p.stdout
    assert "\x1b[" not in out, "escape codes in a pipe"
    assert "Error" not in out and "error" not in p.stderr.lower(), out[-3000:] + p.stderr[-2000:]
    check_host_part(out)
    fleet = out.split("Now across hosts")[1]
    # the nodes, live, with their labels
    for h, labels in (("h1", "role=edge,zone=a"), ("h2", "role=edge,zone=b"), ("h3", "role=core,zone=a")):
        assert re.search(r"^%s\s+live\s+%s\s" % (h, labels), fleet, re.M), fleet[:2000]
    # the program shipped as a signed image, pulled by the hosts; the fleet diff before the apply: each edge
    # host would add the filter, as its own kernel says, the core host is left out
    assert re.search(r"^oci://198\.18\.100\.254:5000/edge/count:v1@sha256:[0-9a-f]{64}$", fleet, re.M), fleet[:2000]
    assert re.search(r"^h1\s+up0\s+add ingress clsd:count prio 10\s", fleet, re.M), fleet[:3000]
    assert re.search(r"^h3\s+-\s+left out\s", fleet, re.M) and "wave 1: " in fleet, fleet[:3000]
    good, bad = fleet.split("drops everything on the uplink")
    # the rollout in waves, followed wave by wave to done; only the edge hosts hold it
    assert "progressing, wave 1 of 2" in good and "progressing, wave 2 of 2" in good and ": done, wave 2 of 2" in good
    assert re.search(r"^h1\s+edge-count\s+applied", good, re.M) and re.search(r"^h2\s+edge-count\s+applied", good, re.M)
    assert not re.search(r"^h3\s+edge-count", good, re.M)
    # the bad program: the canary went back by itself, the rollout halted, the other host never had it
    assert re.search(r": halted, wave 1 of 2: wave 1: 1 of 1 nodes unhealthy", bad), bad[:3000]
    assert "reverted: etcd out of reach" in bad
    shown = re.findall(r"^\$ ip netns exec (h\d) tc filter show dev up0 ingress.*\n(.*)$", bad, re.M)
    assert len(shown) == 2 and all(line.startswith("clsd:count ") for _h, line in shown), shown
    assert re.search(r"halted: wave 1: 1 of 1 nodes unhealthy.*ingress cut added", bad)
    # the fleet's counters, read twice: rising, the sum the hosts' own
    tops = [[int(v) for v in re.findall(r"^\(fleet\)\s+uplink_packets_total\s+(\d+)", part, re.M)]
            for part in bad.split("fleet top edge-count")[1:]]
    assert len(tops) == 2 and tops[0][0] > 0 and tops[1][0] > tops[0][0], tops
    assert took < 60, took
    assert leftovers() == []


def test_the_one_host_part_alone():
    p = subprocess.run([DEMO, "--host"], capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, BUILD_DIR=BUILD_DIR))
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    out = p.stdout
    check_host_part(out)
    assert "Now across hosts" not in out and "etcd" not in out
    assert leftovers() == []


@pytest.mark.parametrize("where", ["Real traffic", "rolled out in waves"])
def test_an_interrupted_demo_cleans_up(where):
    # SIGINT as a terminal's ^C finds it: a suite started in the background (bash's `&` without job
    # control) ignores SIGINT, which the demo would inherit and could not trap
    p = subprocess.Popen([DEMO], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         env=dict(os.environ, BUILD_DIR=BUILD_DIR),
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline = time.monotonic() + 60
        for line in p.stdout:
            if where in line or time.monotonic() > deadline:
                break
        p.send_signal(signal.SIGINT)
        p.wait(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode != 0
    assert leftovers() == []
