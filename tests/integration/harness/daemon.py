"""A clsd process of a test's own (Clsd), the factory and the fixtures that make them."""
import contextlib
import json
import os
import shutil
import signal
import subprocess
import time

import pytest

from harness.api import Api, UnixHTTPConnection
from harness.base import BPFFS_ROOT, BUILD_DIR, CLSCTL, CLSD, HEALTH_TIMEOUT, run, TEST_OBJECT_DIRS, wait_for


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


def write_hog(hogs_dir, file, ifname, **hooks):
    os.makedirs(hogs_dir, exist_ok=True)
    path = os.path.join(hogs_dir, file)
    with open(path + ".tmp", "w") as f:
        json.dump({"ifname": ifname, **hooks}, f)  # hooks may carry "netns" too
    os.rename(path + ".tmp", path)
    return path


def reload(c):
    """SIGHUP, and wait until the hogs are re-read."""
    before = c.log_this_run().count("hogs re-read")
    c.proc.send_signal(signal.SIGHUP)
    wait_for(lambda: c.log_this_run().count("hogs re-read") > before, timeout=5, what="the hogs re-read")


def find_table(text, header):
    """The rows of the table whose header row starts with `header`, up to the next blank line: lists of
    cells split on runs of spaces, the header first."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.split()[:len(header)] == header:
            rows = []
            for l in lines[i:]:
                if not l.strip():
                    break
                rows.append(l.split())
            return rows
    raise AssertionError("no table %r in:\n%s" % (header, text))


def write_doc(workdir, name, doc):
    path = os.path.join(workdir, name)
    with open(path, "w") as f:
        json.dump(doc, f)
    return path
