"""Every example, as written: each fenced block of README.md, of the man pages' sources (man/*.scd) and
of docs/*.md, in that order, is one of:

- a session (lines starting with "$ "): each command runs, in order, in a network namespace that has
  an eth0 and a va, against a clsd started by the README's own line (`clsd --state-dir /var/lib/clsd
  --socket /run/clsd/clsd.sock &`) in a mount namespace of its own (/run/clsd, /var/lib/clsd,
  /etc/clsd and bpffs are fresh there; /usr/lib/clsd holds the build's contrib objects, as the
  package installs them), from a directory whose build/ is the build. The output the README shows
  under a command must be in what it printed (numbers, ids and tags aside; JSON by its keys);
- a document, policy, filter or hog (JSON): PUT with ?dry_run=1 (a hog: clsd --check on it), which
  checks every field and object. What the README makes up is the only change: "sha256:b11f…" and
  "sha256:…(NAME)" are NAME's digest, and /srv/bpf/NAME (an operator's own directory) is too;
- the configuration file: clsd --config on it (full option names); the flags: clsd --help's;
- a picture or a listing (a block marked "text", Markdown only): no command ("$ ") and no JSON in it;
- or one that another test runs, named in COVERED with why.

A block that is none of these fails the test: a new example comes with its check."""

import glob
import json
import os
import re
import signal
import subprocess

import pytest

from harness.base import BUILD_DIR, SOURCE_DIR, wait_for
from harness.netns import netns_create, netns_destroy


FILES = ([os.path.join(SOURCE_DIR, "README.md")] + sorted(glob.glob(os.path.join(SOURCE_DIR, "man", "*.scd"))) +
         sorted(glob.glob(os.path.join(SOURCE_DIR, "docs", "*.md"))))

# Blocks other tests run, by their first line: why they are not run here.
COVERED = {
    "scripts/demo": "the README's two commands: test_demo.py runs the first, CI (.ci/run) the second",
    "== A fleet: etcd and three hosts": "the demo's fleet part: test_demo.py runs scripts/demo and checks it prints so",
    "scripts/build-deb": "test_package.py installs that package with apt's dpkg under systemd",
    "systemctl enable --now clsd.socket": "test_package.py and test_systemd.py start the units so",
    "clsctl --fleet http://etcd1:2379 fleet apply edge-count.json": "test_fleet.py, against a real etcd",
    '{"name": "edge-count", "nodes"': "a fleet policy: test_fleet.py applies such ones through etcd",
    "clsctl fleet apply --waves 1,25%,100% edge-count.json": "test_rollout.py, against a real etcd",
    "clsctl fleet rbac edge-7 edge-8": "test_fleet_auth.py and test_fleet.py, against a real etcd with its "
                                       "authentication on (each host its rbac user)",
    "busctl call org.clsd1 /org/clsd1 org.clsd1.Manager ListInterfaces": "test_dbus.py, on a bus of its own",
    '{"grants": [': "an access file naming users of the host (prometheus, the group clsd): test_tls.py",
    "minisign -G -p clsd.pub -s clsd.key": "test_signed.py signs with minisign and uploads so",
    "clsctl fleet targets --out /etc/prometheus/clsd-targets.json --watch": "test_fleet_observe.py: a real "
        "Prometheus scrapes 4 nodes over mutual TLS from that file",
    "$ clsctl --cacert ca.pem --cert ops.pem --key ops.key fleet top edge-drop": "test_fleet_observe.py runs "
        "fleet top against 4 nodes over mutual TLS",
    '{"registries": {"registry.example:5000"': "a registries file: test_oci.py pulls with one from a real "
                                                "docker-registry over TLS",
    "clsctl apply eth0 - <<'EOF'\n{\"ingress\": [{\"name\": \"count\", \"object\": \"oci://":
        "test_oci.py applies images by reference from a real docker-registry",
    "$ clsctl --hosts lab.hosts": "test_tls.py runs clsctl --hosts over three hosts, one gone",
    "ANSIBLE_COLLECTIONS_PATH=contrib/ansible ansible-playbook": "test_ansible.py runs that playbook",
    "meson setup build && ninja -C build": "the development commands scripts/test runs",
    '{\n  "ingress": [ FILTER, ... ],': "the shape of a document in clsd-documents(5) (FILTER stands for each "
        "filter), not one: the documents this test PUTs have every field it lists",
    "clsctl object add count.bpf.o\nclsctl apply eth0 web.json": "clsctl(8)'s examples: test_clsctl.py runs "
        "object add, apply and diff; test_tls.py --hosts; test_rollout.py the fleet's; test_image.py image push --sign",
    "clsctl fleet rollout status NAME": "docs/ROLLOUTS.md's verbs: test_rollout.py runs each against a real etcd",
    "clang -O2 -g -target bpf -c count.bpf.c -o count.bpf.o\nclsctl image push": "test_fleet_alerts.py runs "
        "these against a real registry, etcd and hosts (clang, image push --sign, fleet diff, apply, the alert)",
    "$ clsctl fleet diff edge-count.json": "test_fleet_diff.py runs fleet diff against a real etcd and hosts, a "
        "foreign filter on one of them (the rows as shown)",
    "$ clsctl fleet rollout status edge-count\nfleet policy edge-count revision 28": "test_rollout.py, against "
        "a real etcd (the plan and each node's step as shown)",
    '{"ingress": [{"name": "udp", "object": "sha256:…(match-udp.bpf.o)"': None,  # act_bpf: below
    "$ tc filter show dev eth0 ingress\nfilter protocol all pref 10 bpf chain 0 handle 0x1 clsd:udp":
        "act_bpf on Debian's 6.1 kernel: test_act_bpf.py (in the VM) shows these actions",
}


def blocks():
    """(where, language, text) of every fenced block of FILES, "where" being FILE:LINE. scdoc's blocks
    have no language: one that begins with "{" is JSON (unless COVERED names it)."""
    out = []
    for path in FILES:
        cur, lang, start = None, None, 0
        with open(path) as f:
            for n, line in enumerate(f, 1):
                if line.startswith("```"):
                    if cur is None:
                        cur, lang, start = [], line[3:].strip(), n
                    else:
                        text = "".join(cur)
                        if not lang and path.endswith(".scd") and text.startswith("{") and not covered(text):
                            lang = "json"
                        out.append(("%s:%d" % (os.path.relpath(path, SOURCE_DIR), start), lang, text))
                        cur = None
                elif cur is not None:
                    cur.append(line)
    return out


def covered(text):
    for key, why in COVERED.items():
        if text.startswith(key):
            return key, why
    return None


def normalize(line):
    """A line with its numbers, ids, tags and spacing made alike."""
    line = re.sub(r"\b(0x)?[0-9a-f]*[0-9][0-9a-f]*\b", "#", line)
    return " ".join(line.split())


def json_keys(v, into):
    if isinstance(v, dict):
        for k, x in v.items():
            into.add(k)
            json_keys(x, into)
    elif isinstance(v, list):
        for x in v:
            json_keys(x, into)
    return into


def session(text):
    """[(command, [expected output lines])] of a block of "$ " lines."""
    steps, lines = [], text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        if not line.startswith("$ "):
            continue
        cmd = line[2:]
        while cmd.endswith("\\") and i < len(lines):
            cmd = cmd[:-1] + " " + lines[i].strip()
            i += 1
        expected = []
        while i < len(lines) and not lines[i].startswith("$ "):
            expected.append(lines[i])
            i += 1
        steps.append((re.sub(r"\s+#.*$", "", cmd), expected))
    return steps


class Host:
    """The README's host: a network namespace with eth0 (and va, whose peer is in another namespace,
    for traffic), and a mount namespace of its own held by a sleeping process."""

    MOUNTS = ("/run/clsd", "/var/lib/clsd", "/etc/clsd", "/usr/lib/clsd")

    def __init__(self, workdir, contrib):
        self.ns, self.peer = netns_create(), netns_create()
        self.made = []
        for d in self.MOUNTS:  # mount points: made on the host only if missing, removed after
            if not os.path.isdir(d):
                os.makedirs(d)
                self.made.append(d)
        self.ns.run("ip", "link", "add", "eth0", "type", "veth", "peer", "name", "eth0p")
        self.ns.add_veth("va", "vap", peer_ns=self.peer)
        for dev in ("eth0", "eth0p", "va"):
            self.ns.run("ip", "link", "set", dev, "up")
        self.ns.run("ip", "addr", "add", "198.18.9.1/30", "dev", "va")
        self.peer.run("ip", "addr", "add", "198.18.9.2/30", "dev", "vap")
        self.peer.run("ip", "link", "set", "vap", "up")
        setup = ("mount -t bpf bpf /sys/fs/bpf && mount -t tmpfs tmpfs /run/clsd && "
                 "mount -t tmpfs tmpfs /var/lib/clsd && mount -t tmpfs tmpfs /etc/clsd && "
                 "mount --bind %s /usr/lib/clsd && echo ready && exec sleep 3600" % contrib)
        self.holder = subprocess.Popen(
            ["unshare", "-m", "--propagation", "private", "nsenter", "--net=/run/netns/" + self.ns.name,
             "sh", "-c", setup], stdout=subprocess.PIPE, text=True)
        assert self.holder.stdout.readline().strip() == "ready"
        self.cwd = os.path.join(workdir, "readme")
        os.makedirs(os.path.join(self.cwd, "build"))
        self.clsd = None

    def argv(self, cmd):
        path = BUILD_DIR + ":" + os.environ.get("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
        return ["nsenter", "-t", str(self.holder.pid), "-m", "-n", "--wd=" + self.cwd, "env", "PATH=" + path,
                "DBUS_SYSTEM_BUS_ADDRESS=unix:path=/nonexistent/clsd-tests-have-no-bus", "bash", "-c", cmd]

    def sh(self, cmd, timeout=30):
        return subprocess.run(self.argv(cmd), capture_output=True, text=True, timeout=timeout)

    def start_clsd(self, line):
        assert line.endswith("&"), line
        self.clsd = subprocess.Popen(self.argv("exec " + line[:-1]), stdout=subprocess.DEVNULL,
                                     stderr=open(os.path.join(self.cwd, "clsd.log"), "w"))
        wait_for(lambda: self.sh("clsctl ls").returncode == 0, timeout=10, what="the README's clsd")

    def close(self):
        if self.clsd:
            self.clsd.send_signal(signal.SIGTERM)
            try:
                self.clsd.wait(5)
            except subprocess.TimeoutExpired:
                self.clsd.kill()
                self.clsd.wait()
        self.holder.kill()
        self.holder.wait()
        netns_destroy(self.ns)
        netns_destroy(self.peer)
        for d in reversed(self.made):
            os.rmdir(d)


@pytest.fixture
def host(workdir, bpf):
    h = Host(workdir, os.path.dirname(bpf.count))
    try:
        yield h
    finally:
        h.close()


def test_every_example_of_the_readme_the_man_pages_and_docs_runs_as_written(host, bpf, workdir):
    build = os.path.join(host.cwd, "build")
    os.makedirs(os.path.join(build, "contrib"))
    os.symlink(os.path.dirname(bpf.count), os.path.join(build, "contrib", "bpf"))
    os.symlink(os.path.dirname(bpf.custom_sec), os.path.join(build, "tests"))
    all_blocks = blocks()
    done, problems = [], []

    # the daemon, by the README's line
    (start,) = [t for _, _, t in all_blocks if t.startswith("clsd --state-dir")]
    host.start_clsd(start.strip())

    digests = {}

    def digest_of(name):
        if name not in digests:
            for d in (os.path.dirname(bpf.count), os.path.dirname(bpf.custom_sec)):
                if os.path.exists(os.path.join(d, name)):
                    p = host.sh("clsctl --json object add %s" % os.path.join(d, name))
                    assert p.returncode == 0, p
                    digests[name] = json.loads(p.stdout)["digest"]
        return digests[name]

    def made_up(text):
        text = text.replace("sha256:b11f…", digest_of("count.bpf.o"))
        text = re.sub(r"sha256:…\(([\w.-]+)\)", lambda m: digest_of(m.group(1)), text)
        return re.sub(r'"/srv/bpf/([\w.-]+)"', lambda m: '"%s"' % digest_of(m.group(1)), text)

    def api(method, path, body):
        p = host.sh("curl -s -w '\\n%%{http_code}' --unix-socket /run/clsd/clsd.sock -X %s "
                    "-H 'Content-Type: application/json' --data-binary @- http://clsd%s <<'EOF'\n%s\nEOF"
                    % (method, path, json.dumps(body)))
        answer, _, status = p.stdout.rpartition("\n")
        return int(status), answer

    # what the sessions build on that the README leaves to the reader: the spec.json it shows, a
    # blocklist on eth0 and a policy edge with one, stats on va with traffic, an HTB for classic mode
    def prepare(cmd):
        if "spec.json" in cmd and not os.path.exists(os.path.join(host.cwd, "spec.json")):
            (spec,) = [t for _, lang, t in all_blocks if lang == "json" and t.startswith('{"ingress": [{"name": "web", "object": "sha256:b11f')]
            with open(os.path.join(host.cwd, "spec.json"), "w") as f:
                f.write(made_up(spec))
        if "blocked_ports" in cmd:
            doc = {"ingress": [{"name": "drop", "object": "/usr/lib/clsd/drop-port.bpf.o", "priority": 10}]}
            assert api("PUT", "/ifaces/eth0/classifier", doc)[0] == 200
            assert api("PUT", "/policies/edge", dict(doc, match={"ifname": ["eth0p"]}))[0] == 200
        if "/ifaces/va/" in cmd:
            (stats,) = [t for _, lang, t in all_blocks if lang == "json" and t.startswith('{"name": "stats"')]
            assert api("PUT", "/ifaces/va/classifier", {"ingress": [json.loads(made_up(stats))]})[0] == 200
            host.peer.run("ping", "-c", "3", "-i", "0.05", "198.18.9.1")
            assert host.sh("ping -c 3 -i 0.05 198.18.9.2").returncode == 0

    # exits other than 0 the README means: a diff with changes is 1
    exits = {"clsctl diff eth0 spec.json": 1}

    for where, lang, text in all_blocks:
        c = covered(text)
        if c:
            done.append((where, "covered: %s" % (c[1] or "act_bpf")))
            if c[1] is None:  # the act_bpf document: the dry run, or this kernel's refusal of act_bpf
                status, answer = api("PUT", "/ifaces/eth0/classifier?dry_run=1", json.loads(made_up(text)))
                ok = status == 200 or (status == 422 and "act_bpf" in answer)
                if not ok:
                    problems.append("%s: the act_bpf document: %d %s" % (where, status, answer))
            continue
        if text.startswith("clsd --state-dir"):
            done.append((where, "started clsd"))
            continue
        if lang == "text":
            if any(l.startswith("$ ") or l.startswith("{") for l in text.splitlines()):
                problems.append("%s: a picture holds a command or JSON: an example, to be run" % where)
            done.append((where, "a picture"))
            continue
        if "\n$ " in "\n" + text:
            for cmd, expected in session(text):
                prepare(cmd)
                p = host.sh(cmd)
                want = exits.get(cmd.strip(), 0)
                if p.returncode != want:
                    problems.append("%s: `%s` exited %d (want %d): %s" % (where, cmd, p.returncode, want,
                                                                         (p.stderr or p.stdout)[-300:]))
                    continue
                shown = [l for l in expected if l.strip() and "…" not in l]
                out = p.stdout.strip()
                try:
                    got_json = json.loads(out) if out.startswith("{") else None
                except ValueError:
                    got_json = None
                if isinstance(got_json, dict) and "error" in got_json:  # curl exits 0 on an HTTP error
                    problems.append("%s: `%s` answered an error: %s" % (where, cmd, out[:300]))
                    continue
                if got_json is not None:
                    want_keys = set(re.findall(r'"(\w+)":', "\n".join(expected)))
                    missing = want_keys - json_keys(got_json, set())
                    if missing:
                        problems.append("%s: `%s` has no %s in its JSON" % (where, cmd, sorted(missing)))
                    continue
                got = {normalize(l) for l in p.stdout.splitlines()}
                for l in shown:
                    if normalize(l) not in got:
                        problems.append("%s: `%s` did not print %r:\n%s" % (where, cmd, l, p.stdout))
            done.append((where, "ran"))
            continue
        if lang == "json":
            body = json.loads(made_up(text))
            if "ifname" in body:  # a hog
                with open(os.path.join(host.cwd, "hog.json"), "w") as f:
                    json.dump(body, f)
                p = host.sh("clsd --check=hog.json")
                if p.returncode != 0:
                    problems.append("%s: clsd --check on the hog: %s" % (where, p.stdout + p.stderr))
            else:
                if "match" in body:
                    path = "/policies/readme?dry_run=1"
                elif "object" in body:  # one filter
                    path, body = "/ifaces/eth0/classifier?dry_run=1", {"ingress": [body]}
                else:
                    path = "/ifaces/eth0/classifier?dry_run=1"
                    if any(f.get("parent") == "1:" for f in body.get("egress", [])):
                        host.sh("tc qdisc replace dev eth0 root handle 1: htb default 30")
                status, answer = api("PUT", path, body)
                if status != 200:
                    problems.append("%s: PUT %s: %d %s" % (where, path, status, answer))
            done.append((where, "checked"))
            continue
        if text.startswith("# /etc/clsd/clsd.conf"):
            with open(os.path.join(host.cwd, "clsd.conf"), "w") as f:
                f.write(text)
            p = host.sh("clsd --config clsd.conf --check")
            if p.returncode != 0:
                problems.append("%s: clsd --config on it: %s" % (where, p.stderr))
            done.append((where, "checked"))
            continue
        problems.append("%s: a %s block no test runs: check it here, or name its test in COVERED"
                        % (where, lang or "plain"))
    assert not problems, "\n".join(problems)
    unused = set(COVERED) - {covered(t)[0] for _, _, t in all_blocks if covered(t)}
    assert not unused, "COVERED names blocks no page has any more: %s" % sorted(unused)
    print("\n".join("%s: %s" % d for d in done))
