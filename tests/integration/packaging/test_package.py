"""The Debian package (scripts/build-deb, which scripts/test runs first) installed with dpkg under a real
systemd: its own units, socket activation, the clsd group, the man page, the example objects; then an
upgrade to a rebuilt package restarts clsd, and the programs stay attached and keep counting.

/usr, /etc and /var/lib are overlays in the systemd's own mount namespace: dpkg writes there, the
host's files are untouched."""

import glob
import json
import os
import shutil
import time

import pytest

from harness.base import IF_A, run, SOURCE_DIR, status_of
from harness.observe import prog_map_id, read_counter
from harness.systemd import Sender, SYSTEMD, SystemdHost

pytestmark = pytest.mark.once

DEB_DIR = os.path.join(SOURCE_DIR, "build", "deb")


class PackageHost(SystemdHost):
    """A systemd with no clsd units of the build: the package brings its own."""

    def _stage(self):
        shutil.rmtree(self.stage, ignore_errors=True)
        os.makedirs(os.path.join(self.stage, "overlay"))

    def boot(self, timeout=30):
        self._stage()
        script = """set -e
mount -t tmpfs -o mode=0755 tmpfs %(o)s
for d in usr etc var/lib; do
        mkdir -p %(o)s/$d/up %(o)s/$d/work
        mount -t overlay overlay -o lowerdir=/$d,upperdir=%(o)s/$d/up,workdir=%(o)s/$d/work /$d
done
for d in /tmp /run /var/tmp /var/log; do mount -t tmpfs -o mode=0755 tmpfs $d; done
# a container host may forbid starting services (policy-rc.d); a Debian machine does not
rm -f /usr/sbin/policy-rc.d
mountpoint -q /sys/fs/bpf || mount -t bpf bpf /sys/fs/bpf
exec env container=other %(systemd)s --unit=basic.target
""" % {"o": os.path.join(self.stage, "overlay"), "systemd": SYSTEMD}
        return self._boot_script(script, timeout)


def repack(deb, version, out):
    """The same package under another version: what an upgrade to a rebuilt package installs."""
    tree = out + ".d"
    run(["dpkg-deb", "-R", deb, tree])
    control = os.path.join(tree, "DEBIAN", "control")
    with open(control) as f:
        text = f.read()
    with open(control, "w") as f:
        f.write("\n".join("Version: " + version if l.startswith("Version: ") else l for l in text.splitlines()) + "\n")
    run(["dpkg-deb", "-b", tree, out])
    return out


@pytest.fixture
def package():
    debs = glob.glob(os.path.join(DEB_DIR, "clsd_*.deb"))
    assert debs, "no package in %s: scripts/build-deb makes it (scripts/test runs it first)" % DEB_DIR
    return debs[0]


def test_install_start_and_upgrade_keep_every_packet(net, workdir, bpf, package):
    h = PackageHost(net.a, workdir)
    try:
        h.boot()
        newer = repack(package, "0.1.0+rebuilt1", os.path.join(h.stage, "clsd_rebuilt.deb"))
        p = h.enter("env", "DEBIAN_FRONTEND=noninteractive", "dpkg", "-i", package, check=False, timeout=120)
        assert p.returncode == 0, p.stdout + p.stderr
        # what the package lays out
        for path in ("/usr/sbin/clsd", "/usr/bin/clsctl", "/usr/lib/clsd/count.bpf.o",
                     "/usr/share/dbus-1/system.d/org.clsd1.conf", "/usr/share/man/man8/clsd.8.gz",
                     "/usr/share/man/man5/clsd-documents.5.gz", "/usr/share/man/man7/clsd-fleet.7.gz",
                     "/usr/share/man/man7/clsd-api.7.gz", "/usr/share/bash-completion/completions/clsctl",
                     "/usr/share/clsd/prometheus/clsd-rules.yml",
                     "/usr/lib/sysusers.d/clsd.conf", "/etc/clsd/hogs.d"):
            assert os.path.exists(h.path(path)), path
        assert h.enter("getent", "group", "clsd").stdout.startswith("clsd:")
        status = h.systemctl("status", "--no-pager", "clsd.socket", "clsd.service", check=False)
        assert h.systemctl("is-active", "clsd.socket", check=False).stdout.strip() == "active", \
            p.stdout + p.stderr + status.stdout + status.stderr
        assert h.systemctl("is-enabled", "clsd.socket").stdout.strip() == "enabled"
        st = os.stat(h.path("/run/clsd/clsd.sock"))
        assert st.st_gid == int(h.enter("getent", "group", "clsd").stdout.split(":")[2])
        assert "clsctl" in h.enter("man", "-P", "cat", "clsctl").stdout
        # the reference an operator looks for on the host: the fleet's and the API's pages by name
        assert "ROLLOUTS" in h.enter("man", "-P", "cat", "clsd-fleet").stdout
        assert "ERROR CODES" in h.enter("man", "-P", "cat", "clsd-api").stdout
        # the package's D-Bus policy lets clsd own org.clsd1 on the system bus
        h.api.get("/healthz")  # the first request starts clsd
        intro = h.enter("busctl", "introspect", "org.clsd1", "/org/clsd1", check=False)
        assert intro.returncode == 0 and "org.clsd1.Manager" in intro.stdout and ".ListInterfaces" in intro.stdout, \
            intro.stdout + intro.stderr
        # a document, with the package's own example object, through the package's clsctl
        doc = os.path.join(h.stage, "count.json")
        with open(doc, "w") as f:
            f.write('{"ingress": [{"name": "count", "object": "/usr/lib/clsd/count.bpf.o", "priority": 10}]}')
        p = h.enter("clsctl", "apply", "--wait=10", IF_A, doc, check=False)
        assert p.returncode == 0 and "configured" in p.stdout, \
            p.stdout + p.stderr + h.enter("journalctl", "-u", "clsd", "--no-pager", check=False).stdout[-3000:]
        # clsctl <TAB> with the package's completion: commands, and the interface names clsd has
        prog = ("source /usr/share/bash-completion/bash_completion; "
                "source /usr/share/bash-completion/completions/clsctl; "
                "COMP_WORDS=(clsctl %s); COMP_CWORD=${#COMP_WORDS[@]}; COMP_WORDS+=(''); "
                "_clsctl clsctl '' ${COMP_WORDS[COMP_CWORD-1]}; printf '%%s\\n' \"${COMPREPLY[@]}\"")
        offered = h.enter("bash", "-c", prog % "").stdout.split()
        assert {"apply", "get", "ls", "policy"} <= set(offered), offered
        assert IF_A in h.enter("bash", "-c", prog % "get").stdout.split()
        first = net.a.filter_at(IF_A, 10)
        counters = prog_map_id(first.id, "counters")
        net.quiet()
        before = read_counter(counters)[0]
        pid = h.main_pid()
        with Sender(net) as sender:
            time.sleep(0.3)
            p = h.enter("env", "DEBIAN_FRONTEND=noninteractive", "dpkg", "-i", newer, check=False, timeout=120)
            assert p.returncode == 0, p.stdout + p.stderr
            time.sleep(0.3)
        assert h.enter("dpkg-query", "-W", "-f", "${Version}", "clsd").stdout == "0.1.0+rebuilt1"
        # the upgrade restarted clsd, which took its program back: same filter, same program, every packet
        assert h.main_pid() not in (0, pid), "the upgrade did not restart clsd"
        assert net.a.filter_at(IF_A, 10).id == first.id
        assert read_counter(counters)[0] - before == sender.sent, "datagrams were missed across the upgrade"
        assert sender.sent > 300
        g = h.api.get_classifier(IF_A).json
        assert g["state"] == "configured" and status_of(g, "count")["id"] == first.id, g
    finally:
        h.shutdown()


# What the package has beyond `meson install -Dprefix=/usr`: Debian's own files (docs, lintian's
# overrides), man pages compressed, and the drop-in that gives the socket to the clsd group (the group
# sysusers makes on a Debian install; a plain meson install leaves the socket root's).
DEBIAN_ONLY = {"/lib/systemd/system/clsd.socket.d/clsd-socket-group.conf", "/usr/share/doc/clsd/changelog.gz",
               "/usr/share/doc/clsd/copyright", "/usr/share/lintian/overrides/clsd"}


def test_meson_install_with_prefix_usr_lays_out_the_packages_tree(package, workdir):
    build = os.path.join(workdir, "build-usr")
    run(["meson", "setup", build, SOURCE_DIR, "-Dprefix=/usr"], timeout=120)
    installed = run(["meson", "introspect", build, "--installed"]).stdout
    meson = {p if not p.startswith("/usr/share/man/") else p + ".gz" for p in json.loads(installed).values()}
    listing = run(["dpkg-deb", "-c", package]).stdout.splitlines()
    deb = {line.split()[5][1:] for line in listing if not line.split()[5].endswith("/")}
    assert deb - DEBIAN_ONLY == meson, (sorted(deb - DEBIAN_ONLY - meson), sorted(meson - deb))
    assert DEBIAN_ONLY <= deb, sorted(DEBIAN_ONLY - deb)
