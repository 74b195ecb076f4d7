"""Integration tests: the real clsd against the real kernel, in network namespaces of our own.

Every test gets fresh namespaces ("clsdt-<random>a/b", joined by a veth pair, addresses from
198.18.0.0/15 and 2001:db8::/32) and its own clsd processes; teardown removes both even when the
test fails. tc, bpftool, ping, curl and sockets are the independent observers.

The harness is harness/, a module per concern: base (paths, run, wait_for), netns (namespaces, the
veth pair, tcx), observe (tc, bpftool, traffic), api (HTTP and TLS clients), daemon (a clsd of the
test's own), objects (BPF objects, signing), policies, metrics, openapi, etcd (a real cluster and the
fleet), bus (a dbus-daemon), registry (a real OCI registry), systemd (a real systemd), fleet_truth (the
fleet's checker). This file makes their fixtures pytest's and holds the session's own setup.

Environment: CLSD_BUILD_DIR (default /work/main/build: clsd, clsctl, contrib/bpf/*.o) and
CLSD_TEST_BPF_DIR (optional: rejected.bpf.o, xdp.bpf.o, xdp-only.bpf.o, count-wide.bpf.o; compiled here otherwise).
"""

import glob
import os
import shutil
import subprocess

import pytest

from harness.base import BPFFS_ROOT, run, SOURCE_DIR
# the fixtures, by concern (pytest finds them here)
from harness.bus import bus, dclsd  # noqa: F401
from harness.daemon import api, clsd, clsd_factory  # noqa: F401
from harness.etcd import cluster, fleet  # noqa: F401
from harness.netns import net, workdir  # noqa: F401
from harness.objects import bpf  # noqa: F401
from harness.registry import registry  # noqa: F401


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


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.failed:
        for c in getattr(item, "_clsd_instances", []):
            report.sections.append(("clsd log (%s)" % c.dir, c.log()[-20000:]))

