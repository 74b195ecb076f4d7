"""bench/fleetnet.py: the network bench/fleet and bench/rollout measure on. Everything in network
namespaces of its own (198.18.200.0/24 on a bridge in a switch namespace): MEMBERS etcd members, then
hosts, each with IFACES veth pairs (both ends inside, links down unless asked) and a clsd with --fleet.
Used as a context manager: on leaving, whatever happened, every process is killed and every namespace,
mount and temporary directory removed."""
import base64
import http.client
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

BUILD = os.environ.get("BUILD_DIR") or os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "build")
CLSD, CLSCTL = os.path.join(BUILD, "clsd"), os.path.join(BUILD, "clsctl")
SUBNET = "198.18.200"


def die(msg):
    sys.exit("%s: %s" % (os.path.basename(sys.argv[0]), msg))


def sh(*argv, input=None, check=True):
    p = subprocess.run(argv, input=input, capture_output=True, text=True)
    if check and p.returncode:
        die("%s: exit %d: %s" % (" ".join(argv), p.returncode, p.stderr.strip()))
    return p


def ns_exec(ns, *argv):
    return ["ip", "netns", "exec", ns, *argv]


def b64(s):
    return base64.b64encode(s.encode()).decode()


class UnixHTTP(http.client.HTTPConnection):
    def __init__(self, path):
        super().__init__("clsd", timeout=30)
        self.path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.connect(self.path)


def metric(sock, name):
    """The sum of a metric's samples on one clsd's /metrics (0 when it has none)."""
    c = UnixHTTP(sock)
    c.request("GET", "/metrics")
    text = c.getresponse().read().decode()
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            total += float(line.rsplit(None, 1)[1])
    return total


class Host:
    def __init__(self, name, ns, sock, addr):
        self.name, self.ns, self.sock, self.addr = name, ns, sock, addr

    def metric(self, name):
        return metric(self.sock, name)

    def prefs(self, dev, direction="ingress"):
        out = sh(*ns_exec(self.ns, "tc", "filter", "show", "dev", dev, direction), check=False).stdout
        return sorted({int(w.split()[0]) for w in out.split(" pref ")[1:]})


class StatusWatch:
    """A watch on the prefix's status/ through the first member (from the switch namespace, over curl):
    the time each (node, revision, state) was first written."""

    def __init__(self, net):
        prefix = net.prefix
        body = json.dumps({"create_request": {"key": b64(prefix + "status/"), "range_end": b64(prefix + "status0")}})
        self.proc = subprocess.Popen(ns_exec(net.switch, "curl", "-sN", "--noproxy", "*", "-X", "POST",
                                             net.urls[0] + "/v3/watch", "-d", body), stdout=subprocess.PIPE, text=True)
        self.seen = {}
        self.cond = threading.Condition()
        threading.Thread(target=self.read, daemon=True).start()

    def read(self):
        for line in self.proc.stdout:
            now = time.monotonic()
            try:
                events = json.loads(line).get("result", {}).get("events", [])
            except ValueError:
                continue
            for ev in events:
                if ev.get("type") == "DELETE":
                    continue
                v = json.loads(base64.b64decode(ev["kv"]["value"]))
                with self.cond:
                    self.seen.setdefault((v["node"], v["revision"], v["state"]), now)
                    self.cond.notify_all()

    def wait_all(self, nodes, revision, timeout=60):
        """When the last of nodes said it applied revision: {node: time}."""
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                times = {n: self.seen.get((n, revision, "applied")) for n in nodes}
                if all(times.values()):
                    return times
                left = deadline - time.monotonic()
                if left <= 0:
                    die("not every host applied revision %d within %d s" % (revision, timeout))
                self.cond.wait(left)

    def stop(self):
        self.proc.kill()
        self.proc.wait()


class Net:
    def __init__(self, members, tag):
        self.members, self.tag = members, "%s%d" % (tag, os.getpid())
        self.prefix = "/bench-%d/" % os.getpid()
        self.tmp = tempfile.mkdtemp(prefix=self.tag + ".", dir="/tmp")
        self.namespaces, self.procs, self.mounts, self.hosts, self.watches = [], [], [], [], []
        self.ports = 0
        self.urls = ["http://%s.%d:2379" % (SUBNET, i + 1) for i in range(members)]

    def __enter__(self):
        if os.geteuid() != 0:
            die("needs root (network namespaces, tc, bpf)")
        for exe in (CLSD, CLSCTL):
            if not os.path.exists(exe):
                die("%s not found; build first" % exe)
        if not shutil.which("etcd"):
            die("etcd not found (apt-get install etcd-server)")
        self.switch = self.netns("sw")
        sh("ip", "-n", self.switch, "link", "add", "br0", "type", "bridge")
        sh("ip", "-n", self.switch, "link", "set", "br0", "up")
        sh("ip", "-n", self.switch, "addr", "add", SUBNET + ".254/24", "dev", "br0")
        self.start_etcd()
        return self

    def __exit__(self, *exc):
        for w in self.watches:
            w.stop()
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGKILL)
                p.wait()
        for name in reversed(self.namespaces):
            subprocess.run(["ip", "netns", "del", name], capture_output=True)
        for m in self.mounts:
            subprocess.run(["umount", m], capture_output=True)
        shutil.rmtree(self.tmp, ignore_errors=True)

    def netns(self, name):
        ns = "%s-%s" % (self.tag, name)
        sh("ip", "netns", "add", ns)
        self.namespaces.append(ns)
        sh("ip", "-n", ns, "link", "set", "lo", "up")
        return ns

    def attach(self, ns, addr):
        """ns on the bridge: its uplink up0 with addr."""
        self.ports += 1
        port = "p%d" % self.ports
        sh("ip", "-n", ns, "link", "add", "up0", "type", "veth", "peer", "name", port, "netns", self.switch)
        sh("ip", "-n", self.switch, "link", "set", port, "master", "br0", "up")
        sh("ip", "-n", ns, "addr", "add", addr + "/24", "dev", "up0")
        sh("ip", "-n", ns, "link", "set", "up0", "up")

    def start_etcd(self):
        cluster = ",".join("e%d=http://%s.%d:2380" % (i + 1, SUBNET, i + 1) for i in range(self.members))
        for i in range(self.members):
            ns = self.netns("e%d" % (i + 1))
            self.attach(ns, "%s.%d" % (SUBNET, i + 1))
            peer = "http://%s.%d:2380" % (SUBNET, i + 1)
            log = open(os.path.join(self.tmp, "e%d.log" % (i + 1)), "w")
            self.procs.append(subprocess.Popen(ns_exec(
                ns, "etcd", "--name", "e%d" % (i + 1), "--data-dir", os.path.join(self.tmp, "e%d" % (i + 1)),
                "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer, "--listen-client-urls",
                self.urls[i], "--advertise-client-urls", self.urls[i], "--initial-cluster", cluster,
                "--initial-cluster-state", "new", "--heartbeat-interval", "50", "--election-timeout", "500"),
                stdout=log, stderr=subprocess.STDOUT))
        deadline = time.monotonic() + 30
        while sh(*ns_exec(self.switch, "curl", "-sf", "--noproxy", "*", self.urls[0] + "/health"),
                 check=False).returncode:
            if time.monotonic() > deadline:
                die("etcd did not come up")
            time.sleep(0.1)

    def host(self, ifaces=0, labels=None, up=False, args=()):
        """Another host: IFACES veth pairs f<i>a/f<i>b, a clsd with --fleet (and args)."""
        h = len(self.hosts) + 1
        name = "h%d" % h
        ns = self.netns(name)
        addr = "%s.%d" % (SUBNET, 10 + h)
        self.attach(ns, addr)
        if ifaces:
            sh("ip", "-n", ns, "-batch", "-",
               input="".join("link add f%da type veth peer name f%db\n" % (i, i) for i in range(ifaces)) +
               "".join("link set f%d%s up\n" % (i, e) for i in range(ifaces) for e in "ab" if up))
        d = os.path.join(self.tmp, name)
        bpffs = os.path.join(d, "bpffs")
        os.makedirs(bpffs)
        sh("mount", "-t", "bpf", "bpf", bpffs)
        self.mounts.append(bpffs)
        sock = os.path.join(d, "sock")
        log = open(os.path.join(d, "log"), "w")
        self.procs.append(subprocess.Popen(ns_exec(
            ns, CLSD, "--state-dir", os.path.join(d, "state"), "--hogs-dir", os.path.join(d, "hogs"),
            "--bpffs-dir", os.path.join(bpffs, "clsd"), "--socket", sock, "--fleet", ",".join(self.urls),
            "--fleet-prefix", self.prefix, "--node", name, "--log-level", "warning",
            *(("--node-labels", ",".join("%s=%s" % kv for kv in labels.items())) if labels else ()), *args),
            stdout=log, stderr=subprocess.STDOUT))
        host = Host(name, ns, sock, addr)
        self.hosts.append(host)
        return host

    def wait_started(self):
        for h in self.hosts:
            deadline = time.monotonic() + 10
            while not os.path.exists(h.sock):
                if time.monotonic() > deadline:
                    die("the clsd of %s did not start" % h.name)
                time.sleep(0.02)

    def status_watch(self):
        w = StatusWatch(self)
        self.watches.append(w)
        return w

    def ctl(self, *argv, check=True):
        return sh(*ns_exec(self.switch, CLSCTL, "--fleet", ",".join(self.urls), "--fleet-prefix", self.prefix,
                           *argv), check=check)

    def apply(self, policy):
        """clsctl fleet apply of policy: (when it began, the revision)."""
        path = os.path.join(self.tmp, "policy.json")
        with open(path, "w") as f:
            json.dump(policy, f)
        t0 = time.monotonic()
        return t0, json.loads(self.ctl("--json", "fleet", "apply", path).stdout)["revision"]
