"""A real systemd 252 for the tests: booted as PID 1 of new pid and mount namespaces inside a test
network namespace, with fresh tmpfs on /tmp, /run, /var/tmp, /var/log and /var/lib (nothing of the
host's is touched) and a bpffs of its own, running clsd.service and clsd.socket from the build."""

import os
import shutil
import subprocess
import threading
import time

from harness.api import Api, UnixHTTPConnection, wait_or_kill
from harness.base import ADDR_A, BUILD_DIR, run, TEST_OBJECT_DIRS


UNITS = os.path.join(BUILD_DIR, "systemd")
SYSTEMD = "/lib/systemd/systemd"


class SystemdHost:
    def __init__(self, ns, workdir, dropin=""):
        self.ns = ns
        # Outside /tmp: the tmpfs mounted on /tmp inside hides the test's workdir.
        self.stage = os.path.join(BUILD_DIR, "systemd-test", os.path.basename(workdir))
        self.log_path = os.path.join(workdir, "systemd.log")
        self.dropin = dropin
        self.proc = None
        self.pid = None

    def _stage(self):
        shutil.rmtree(self.stage, ignore_errors=True)
        os.makedirs(os.path.join(self.stage, "clsd.service.d"))
        for unit in ("clsd.service", "clsd.socket"):
            shutil.copy(os.path.join(UNITS, unit), self.stage)
        env = " ".join('"%s=%s"' % (k, os.environ[k]) for k in ("ASAN_OPTIONS", "UBSAN_OPTIONS") if k in os.environ)
        with open(os.path.join(self.stage, "clsd.service.d", "test.conf"), "w") as f:
            f.write("[Service]\nExecStart=\nExecStart=%s --log-level debug %s\n"
                    "StandardOutput=append:/var/log/clsd.log\nStandardError=inherit\n%s%s\n" %
                    (os.path.join(BUILD_DIR, "clsd"), " ".join("--object-dir " + d for d in TEST_OBJECT_DIRS),
                     "Environment=%s\n" % env if env else "", self.dropin))

    def boot(self, timeout=30):
        self._stage()
        script = """set -e
for d in /tmp /run /var/tmp /var/log /var/lib; do mount -t tmpfs -o mode=0755 tmpfs $d; done
mountpoint -q /sys/fs/bpf || mount -t bpf bpf /sys/fs/bpf
mkdir -p /run/systemd/system
cp -r %s/. /run/systemd/system/
exec env container=other %s --unit=basic.target
""" % (self.stage, SYSTEMD)
        return self._boot_script(script, timeout)

    def _boot_script(self, script, timeout):
        """Runs script (which ends by exec'ing systemd) as PID 1 of new pid and mount namespaces."""
        log = open(self.log_path, "ab")
        self.proc = self.ns.popen("unshare", "--pid", "--fork", "--mount", "--mount-proc", "sh", "-c", script,
                                  stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
        log.close()
        deadline = time.monotonic() + timeout
        while self.pid is None:
            assert self.proc.poll() is None, "systemd exited:\n" + self.boot_log()
            assert time.monotonic() < deadline, "systemd did not start:\n" + self.boot_log()
            try:
                with open("/proc/%d/task/%d/children" % (self.proc.pid, self.proc.pid)) as f:
                    kids = f.read().split()
                if kids and os.readlink("/proc/%s/exe" % kids[0]).endswith("/systemd"):
                    self.pid = int(kids[0])
            except (FileNotFoundError, ProcessLookupError):
                pass
            time.sleep(0.05)
        while True:
            p = self.systemctl("is-system-running", check=False)
            if p.stdout.strip() in ("running", "degraded"):
                break
            assert time.monotonic() < deadline, "systemd did not finish booting: %r\n%s" % (p.stdout, self.boot_log())
            time.sleep(0.1)
        self.api = Api(lambda: UnixHTTPConnection(self.path("/run/clsd/clsd.sock")))
        return self

    def shutdown(self):
        # SIGTERM would only make it re-execute.
        if self.pid:
            run(["kill", "-9", str(self.pid)], check=False)
        if self.proc:
            wait_or_kill(self.proc, 10)
        shutil.rmtree(self.stage, ignore_errors=True)

    def path(self, p):
        """A path inside the systemd's mount namespace, reachable from here."""
        return "/proc/%d/root%s" % (self.pid, p)

    def enter(self, *argv, check=True, timeout=30):
        """Runs argv in the systemd's mount, pid and network namespaces."""
        return run(["nsenter", "-t", str(self.pid), "-m", "-p", "-n", *argv], check=check, timeout=timeout)

    def systemctl(self, *args, check=True, timeout=30):
        return self.enter("systemctl", *args, check=check, timeout=timeout)

    def show(self, unit, *props):
        out = self.systemctl("show", unit, "-p", ",".join(props)).stdout
        return dict(l.split("=", 1) for l in out.splitlines() if "=" in l)

    def main_pid(self, unit="clsd.service"):
        return int(self.show(unit, "MainPID")["MainPID"])

    def boot_log(self):
        try:
            with open(self.log_path, errors="replace") as f:
                return f.read()[-4000:]
        except FileNotFoundError:
            return ""

    def clsd_log(self):
        try:
            with open(self.path("/var/log/clsd.log"), errors="replace") as f:
                return f.read()
        except FileNotFoundError:
            return ""


class Sender:
    """UDP datagrams from b to a, one per millisecond or so, counted, until stopped."""

    def __init__(self, net):
        self.sock = net.b.socket(type=__import__("socket").SOCK_DGRAM)
        self.sent = 0
        self.stop_flag = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self):
        while not self.stop_flag.is_set():
            self.sock.sendto(b"clsd-systemd-test", (ADDR_A, 9))
            self.sent += 1
            time.sleep(0.001)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop_flag.set()
        self.thread.join()
        self.sock.close()
        time.sleep(0.2)  # the last datagrams through the hook
