"""The fleet at scale, in the suite's short form: bench/fleet-scale with 50 light hosts (a namespace, an
interface and a clsd each; 3 etcd members): a new policy whose object every host fetches, then two
changes, each until every host's status says applied, and no status missing (the bench checks clsctl
fleet status has a row per host, applied at the last revision, and exits 1 otherwise). The README's
figures are the long form (100 to 1,000 hosts). And a clsd that cannot have its inotify instance says
which limit it met."""
import json
import os
import subprocess
import tempfile

from conftest import BUILD_DIR, CLSD, run

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_fifty_hosts_converge_and_none_is_missing():
    env = dict(os.environ, SIZES="50", ROUNDS="2", IDLE="3", BUILD_DIR=BUILD_DIR)
    p = subprocess.run([os.path.join(ROOT, "bench", "fleet-scale")], env=env, capture_output=True, text=True,
                       timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    rows = json.loads(p.stdout.rsplit("JSON ", 1)[1])
    r = rows[0]
    assert r["hosts"] == 50
    # every host applied: the bench's status watch saw each one's "applied" (it dies otherwise)
    assert 0 < r["new_last"] < 30 and 0 < r["last"] < 10, r
    # a change is one transaction per host (its status and record together), the keepalives aside
    assert r["requests_beyond_keepalives"] < 1.5, r
    # an idle node costs little
    assert r["pss"] < 4096 and r["idle_cpu_ms_min"] < 200, r


def inotify_instances():
    """How many inotify instances root's processes hold now."""
    n = 0
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            for fd in os.listdir("/proc/%s/fd" % pid):
                if os.readlink("/proc/%s/fd/%s" % (pid, fd)) == "anon_inode:inotify":
                    n += 1
        except OSError:
            continue
    return n


def test_a_clsd_without_an_inotify_instance_says_which_limit():
    path = "/proc/sys/fs/inotify/max_user_instances"
    with open(path) as f:
        old = f.read().strip()
    d = tempfile.mkdtemp(prefix="clsdt-inotify-")
    try:
        with open(path, "w") as f:
            f.write(str(inotify_instances()))
        p = subprocess.run([CLSD, "--state-dir", os.path.join(d, "state"), "--hogs-dir", os.path.join(d, "hogs"),
                            "--bpffs-dir", "/sys/fs/bpf/clsdt-inotify", "--socket", os.path.join(d, "sock"),
                            "--config", ""], capture_output=True, text=True, timeout=20)
    finally:
        with open(path, "w") as f:
            f.write(old)
        run(["rm", "-rf", d, "/sys/fs/bpf/clsdt-inotify"], check=False)
    assert p.returncode != 0
    assert "fs.inotify.max_user_instances is" in p.stderr and "each clsd takes one" in p.stderr, p.stderr
