"""bench/fleetnet.py: the network bench/fleet, bench/rollout and bench/fleet-scale measure on. Everything
in network namespaces of its own (198.18.0.0/16 on a bridge in a switch namespace): MEMBERS etcd members
(198.18.0.1…), then hosts (198.18.1.1…, 250 a /24), each with IFACES veth pairs (both ends inside, links
down unless asked) and a clsd with --fleet. many() makes a thousand hosts at once: a few ip -batch
runs, one bpffs, their state on a tmpfs (real hosts each have a disk of their own; here a thousand
clsd's fsyncs would queue on one). etcd runs without authentication (its bcrypt would time logins, not
the fleet): the hosts run with --fleet-allow-writer. Used as a context manager: on leaving, whatever happened, every
process is killed and every namespace, mount, temporary directory and raised sysctl put back."""
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
PREFIXLEN = 16
HOSTS_PER_BRIDGE = int(os.environ.get("HOSTS_PER_BRIDGE", "1000"))  # a Linux bridge has at most 1,024 ports
ROOT_PASSWORD = "bench-root"


def member_addr(i):
    return "198.18.0.%d" % (i + 1)


def host_addr(h):
    """Host h (1-based): 198.18.1.1 to 198.18.1.250, then 198.18.2.1…"""
    return "198.18.%d.%d" % (1 + (h - 1) // 250, 1 + (h - 1) % 250)


def mac_of(addr):
    """A locally administered MAC for an address of the bench's network (its neighbours are static)."""
    return "02:cb:" + ":".join("%02x" % int(b) for b in addr.split("."))


def die(msg):
    sys.exit("%s: %s" % (os.path.basename(sys.argv[0]), msg))


def sh(*argv, input=None, check=True):
    p = subprocess.run(argv, input=input, capture_output=True, text=True)
    if check and p.returncode:
        die("%s: exit %d: %s" % (" ".join(argv), p.returncode, p.stderr.strip()))
    return p


def cpu_seconds(pid, children=False):
    """The CPU time of pid's threads (schedstat: nanoseconds, where utime and stime count 10 ms ticks,
    too coarse for an idle node); with children, its workers' too (live ones, and those it reaped)."""
    try:
        t = 0.0
        for task in os.listdir("/proc/%d/task" % pid):
            with open("/proc/%d/task/%s/schedstat" % (pid, task)) as f:
                t += int(f.read().split()[0]) / 1e9
        if children:
            with open("/proc/%d/stat" % pid) as f:
                fields = f.read().rsplit(")", 1)[1].split()
            t += (int(fields[13]) + int(fields[14])) / os.sysconf("SC_CLK_TCK")
            for task in os.listdir("/proc/%d/task" % pid):
                with open("/proc/%d/task/%s/children" % (pid, task)) as f:
                    t += sum(cpu_seconds(int(c)) for c in f.read().split())
        return t
    except OSError:
        return 0.0


def nodes_cpu(pids):
    """Every clsd's CPU and its workers' (the sandbox that loads a new object)."""
    return sum(cpu_seconds(p, children=True) for p in pids)


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


def metrics(sock, names):
    """The sums of several metrics' samples on one clsd's /metrics, read once: {name: sum}."""
    c = UnixHTTP(sock)
    c.request("GET", "/metrics")
    text = c.getresponse().read().decode()
    out = dict.fromkeys(names, 0.0)
    for line in text.splitlines():
        name = line.split("{", 1)[0].split(" ", 1)[0]
        if name in out:
            out[name] += float(line.rsplit(None, 1)[1])
    return out


def sum_metrics(hosts, names):
    """{name: its sum over every host}, each host's /metrics read once."""
    total = dict.fromkeys(names, 0.0)
    for h in hosts:
        for k, v in metrics(h.sock, names).items():
            total[k] += v
    return total


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
        self.net = net
        self.seen = {}
        self.cond = threading.Condition()
        self.stopped = False
        self.revision = 0  # the last one read: a watch begun again (etcd restarted) goes on from there
        self.proc = self.spawn()
        threading.Thread(target=self.read, daemon=True).start()

    def spawn(self):
        prefix = self.net.prefix
        req = {"key": b64(prefix + "status/"), "range_end": b64(prefix + "status0")}
        if self.revision:
            req["start_revision"] = self.revision + 1
        auth = ("-H", "Authorization: " + self.net.token()) if self.net.auth else ()
        return subprocess.Popen(ns_exec(self.net.switch, "curl", "-sN", "--noproxy", "*", "-X", "POST", *auth,
                                        self.net.urls[0] + "/v3/watch", "-d", json.dumps({"create_request": req})),
                                stdout=subprocess.PIPE, text=True)

    def read(self):
        while not self.stopped:
            for line in self.proc.stdout:
                try:
                    self.line(line)
                except Exception as e:  # a line it cannot read: said, and the next one read
                    print("status watch: %r: %.200s" % (e, line), file=sys.stderr, flush=True)
            self.proc.wait()
            while not self.stopped:
                time.sleep(0.2)
                try:
                    self.proc = self.spawn()
                    break
                except (subprocess.CalledProcessError, SystemExit, ValueError, KeyError):
                    continue  # etcd not answering yet (a token asked of a member that restarts)

    def line(self, line):
        now = time.monotonic()
        try:
            events = json.loads(line).get("result", {}).get("events", [])
        except ValueError:
            return
        for ev in events:
            self.revision = max(self.revision, int(ev["kv"].get("mod_revision", 0)))
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
                    missing = [n for n, t in times.items() if not t]
                    die("not every host applied revision %d within %d s: %d of %d did not (%s)" % (
                        revision, timeout, len(missing), len(times), ", ".join(missing[:5])))
                self.cond.wait(left)

    def stop(self):
        self.stopped = True
        self.proc.kill()
        self.proc.wait()


class Net:
    def __init__(self, members, tag, etcd_args=(), auth=False):
        self.members, self.tag = members, "%s%d" % (tag, os.getpid())
        self.auth = auth  # etcd's authentication: clsctl as root, each node its own user (clsctl fleet rbac)
        self.prefix = "/bench-%d/" % os.getpid()
        self.tmp = tempfile.mkdtemp(prefix=self.tag + ".", dir="/tmp")
        self.namespaces, self.procs, self.mounts, self.hosts, self.watches = [], [], [], [], []
        self.ports = 0
        self.bridges = set()
        self.sysctls = {}
        self.urls = ["http://%s:2379" % member_addr(i) for i in range(members)]
        self.etcd_args, self.etcd_argv = list(etcd_args), []

    def __enter__(self):
        if os.geteuid() != 0:
            die("needs root (network namespaces, tc, bpf)")
        for exe in (CLSD, CLSCTL):
            if not os.path.exists(exe):
                die("%s not found; build first" % exe)
        if not shutil.which("etcd"):
            die("etcd not found (apt-get install etcd-server)")
        # terminated (a test's timeout, ^C's cousin): leave as on any exit, cleaning up
        signal.signal(signal.SIGTERM, lambda *_: sys.exit("%s: terminated" % os.path.basename(sys.argv[0])))
        try:
            self.switch = self.netns("sw")
            # its own address, fixed: a bridge otherwise takes its lowest port's, which changes as ports join
            sh("ip", "-n", self.switch, "link", "add", "br0", "address", mac_of("198.18.0.254"), "type", "bridge")
            sh("ip", "-n", self.switch, "link", "set", "br0", "up")
            sh("ip", "-n", self.switch, "addr", "add", "198.18.0.254/%d" % PREFIXLEN, "dev", "br0")
            self.start_etcd()
            if self.auth:
                self.enable_auth()
        except BaseException:
            self.__exit__()  # what was made so far goes too (a with block's exit is not called for it)
            raise
        return self

    def __exit__(self, *exc):
        keep = os.environ.get("KEEP_LOGS")  # a directory: the first hosts' logs are copied there
        # the first hosts', and those a failure named (self.suspects)
        for h in self.hosts[:20] + getattr(self, "suspects", []) if keep else ():
            if getattr(h, "log", None) and os.path.exists(h.log):
                shutil.copy(h.log, os.path.join(keep, h.name + ".log"))
        for w in self.watches:
            w.stop()
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGKILL)
                p.wait()
        for name in reversed(self.namespaces):
            subprocess.run(["ip", "netns", "del", name], capture_output=True)
        for m in reversed(self.mounts):
            subprocess.run(["umount", "-l", m], capture_output=True)
        shutil.rmtree(self.tmp, ignore_errors=True)
        for path, value in self.sysctls.items():
            with open(path, "w") as f:
                f.write(value)

    def sysctl_at_least(self, name, value):
        """Raise a sysctl for the run (put back on leaving)."""
        path = "/proc/sys/" + name.replace(".", "/")
        with open(path) as f:
            old = f.read()
        if int(old.split()[0]) < value:
            self.sysctls.setdefault(path, old)
            with open(path, "w") as f:
                f.write(str(value))

    def restart_member(self, i, down=0.0):
        """etcd member i killed (SIGKILL) and started again after down seconds, on its data; its process
        stays procs[i]. Returns when it answers again."""
        p = self.procs[i]
        p.send_signal(signal.SIGKILL)
        p.wait()
        time.sleep(down)
        log = open(os.path.join(self.tmp, "e%d.log" % (i + 1)), "a")
        self.procs[i] = subprocess.Popen(self.etcd_argv[i], stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 30
        while sh(*ns_exec(self.switch, "curl", "-sf", "--noproxy", "*", self.urls[i] + "/health"),
                 check=False).returncode:
            if time.monotonic() > deadline:
                die("etcd member e%d did not come back" % (i + 1))
            time.sleep(0.05)

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
        sh("ip", "-n", ns, "link", "add", "up0", "address", mac_of(addr), "type", "veth", "peer", "name", port,
           "netns", self.switch)
        sh("ip", "-n", ns, "link", "set", "up0", "addrgenmode", "none")
        sh("ip", "-n", self.switch, "link", "set", port, "addrgenmode", "none", "master", "br0", "up")
        sh("ip", "-n", ns, "addr", "add", "%s/%d" % (addr, PREFIXLEN), "dev", "up0")
        sh("ip", "-n", ns, "link", "set", "up0", "up")

    def start_etcd(self):
        cluster = ",".join("e%d=http://%s:2380" % (i + 1, member_addr(i)) for i in range(self.members))
        for i in range(self.members):
            ns = self.netns("e%d" % (i + 1))
            self.attach(ns, member_addr(i))
            # static neighbours between the switch (clsctl, the bench's watches) and each member, as the hosts
            # have theirs: with a thousand ports on the bridge, ARP from the switch went unanswered for some
            # members and the bench's own requests to them hung (the hosts' were fine)
            sh("ip", "-n", self.switch, "neigh", "replace", member_addr(i), "lladdr", mac_of(member_addr(i)),
               "nud", "permanent", "dev", "br0")
            sh("ip", "-n", ns, "neigh", "replace", "198.18.0.254", "lladdr", mac_of("198.18.0.254"), "nud", "permanent", "dev", "up0")
            peer = "http://%s:2380" % member_addr(i)
            log = open(os.path.join(self.tmp, "e%d.log" % (i + 1)), "w")
            argv = ns_exec(
                ns, "etcd", "--name", "e%d" % (i + 1), "--data-dir", os.path.join(self.tmp, "e%d" % (i + 1)),
                "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer, "--listen-client-urls",
                self.urls[i], "--advertise-client-urls", self.urls[i], "--initial-cluster", cluster,
                "--initial-cluster-state", "new", "--heartbeat-interval", "50", "--election-timeout", "500",
                *self.etcd_args)
            self.etcd_argv.append(argv)
            self.procs.append(subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT))
        deadline = time.monotonic() + 30
        while sh(*ns_exec(self.switch, "curl", "-sf", "--noproxy", "*", self.urls[0] + "/health"),
                 check=False).returncode:
            if time.monotonic() > deadline:
                die("etcd did not come up")
            time.sleep(0.1)

    def enable_auth(self):
        """etcd's root user (its password in root.password) and authentication on."""
        self.root_pw = os.path.join(self.tmp, "root.password")
        with open(self.root_pw, "w") as f:
            f.write(ROOT_PASSWORD + "\n")
        for argv in (("user", "add", "root", "--new-user-password=" + ROOT_PASSWORD, "--interactive=false"),
                     ("user", "grant-role", "root", "root"), ("auth", "enable")):
            sh(*ns_exec(self.switch, "etcdctl", "--endpoints", ",".join(self.urls), *argv))

    def token(self):
        """A token of etcd's root user (for the bench's own watches)."""
        out = sh(*ns_exec(self.switch, "curl", "-sf", "--noproxy", "*", "-X", "POST", self.urls[0] +
                          "/v3/auth/authenticate", "-d", json.dumps({"name": "root", "password": ROOT_PASSWORD})))
        return json.loads(out.stdout)["token"]

    def node_users(self, names):
        """Each node's etcd user (clsctl fleet rbac, in batches): the clsd arguments of each."""
        pwdir = os.path.join(self.tmp, "passwords")
        os.makedirs(pwdir, exist_ok=True)
        for i in range(0, len(names), 60):  # clsctl takes up to 64 arguments
            self.ctl("fleet", "rbac", *names[i:i + 60], "--apply", "--out", pwdir)
        out = {}
        for name in names:
            user = "%s@%s" % (name, self.prefix)
            out[name] = ("--fleet-user", user, "--fleet-password-file",
                         os.path.join(pwdir, user.replace("/", "_") + ".password"))
        return out

    def host(self, ifaces=0, labels=None, up=False, args=()):
        """Another host: IFACES veth pairs f<i>a/f<i>b, a clsd with --fleet (and args)."""
        h = len(self.hosts) + 1
        name = "h%d" % h
        ns = self.netns(name)
        addr = host_addr(h)
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
        self.clsd(ns, name, d, os.path.join(bpffs, "clsd"), self.urls,
                  (self.node_users([name])[name] if self.auth else ()) +
                  (("--node-labels", ",".join("%s=%s" % kv for kv in labels.items())) if labels else ()) + tuple(args))
        host = Host(name, ns, sock, addr)
        host.pid = self.procs[-1].pid
        host.log = os.path.join(d, "log")
        self.hosts.append(host)
        return host

    def clsd(self, ns, name, d, bpffs, urls, args):
        """A host's clsd in ns, its state, socket and log under d (the log at HOST_LOG_LEVEL, warning by
        default). etcd has no users here: the node is a writer, and is told it may be."""
        with open(os.path.join(d, "log"), "w") as log:
            self.procs.append(subprocess.Popen(ns_exec(
                ns, CLSD, "--state-dir", os.path.join(d, "state"), "--hogs-dir", os.path.join(d, "hogs"),
                "--bpffs-dir", bpffs, "--socket", os.path.join(d, "sock"), "--fleet", ",".join(urls),
                "--fleet-prefix", self.prefix, "--node", name, "--log-level",
                os.environ.get("HOST_LOG_LEVEL", "warning"), *(() if self.auth else ("--fleet-allow-writer",)),
                *args),
                stdout=log, stderr=subprocess.STDOUT))

    def host_bridge(self, h):
        """The bridge host h's uplink is a port of: br0 for the first thousand, then one more bridge a
        thousand, each a port of br0 (a Linux bridge has at most 1,024 ports)."""
        k = (h - 1) // HOSTS_PER_BRIDGE
        if k == 0:
            return "br0"
        name = "br%d" % k
        if name not in self.bridges:
            sh("ip", "-n", self.switch, "-batch", "-", input=(
                "link add %s type bridge\nlink set %s addrgenmode none up\n"
                "link add bu%d type veth peer name bl%d\n"
                "link set bu%d addrgenmode none master br0 up\nlink set bl%d addrgenmode none master %s up\n") % (
                    name, name, k, k, k, k, name))
            self.bridges.add(name)
        return name

    def many(self, n, ifaces=1, args=(), spread=True):
        """n more hosts at once, each one namespace with its uplink and IFACES veth pairs, and a clsd (its
        endpoints in a turned order with spread: each member serves its share). The machine's own
        limits, which n real hosts would each have for themselves, are raised for the run: inotify
        instances (one per clsd), the neighbour table (every namespace's entries in one)."""
        total = len(self.hosts) + n  # (the hosts of the run so far too: many() is called batch by batch)
        self.sysctl_at_least("fs.inotify.max_user_instances", 4 * total + 128)
        self.sysctl_at_least("kernel.pid_max", 8 * total + 32768)  # clsds, workers, threads
        for v, t in (("ipv4", 4), ("ipv6", 4)):
            for k, m in (("gc_thresh1", 1), ("gc_thresh2", 2), ("gc_thresh3", 4)):
                self.sysctl_at_least("net.%s.neigh.default.%s" % (v, k), m * t * (total + 64))
        first = len(self.hosts) + 1
        names = ["h%d" % h for h in range(first, first + n)]
        nss = ["%s-%s" % (self.tag, name) for name in names]
        sh("ip", "-batch", "-", input="".join("netns add %s\n" % ns for ns in nss))
        self.namespaces.extend(nss)
        # no IPv6 on the uplinks, and static neighbours between the hosts and etcd: a thousand ports on one
        # bridge would otherwise flood every ARP and IPv6 multicast to every namespace, a load N real
        # hosts on their own networks do not have (and the kernel charges it to whatever process runs)
        sh("ip", "-batch", "-", input="".join(
            "link add up0 netns %s address %s type veth peer name hp%d netns %s\n" % (
                ns, mac_of(host_addr(first + i)), first + i, self.switch) for i, ns in enumerate(nss)))
        sh("ip", "-n", self.switch, "-batch", "-", input="".join(
            "link set hp%d addrgenmode none master %s up\n" % (first + i, self.host_bridge(first + i))
            for i in range(n)))
        members = "".join("neigh replace %s lladdr %s dev up0 nud permanent\n" % (member_addr(k), mac_of(member_addr(k)))
                          for k in range(self.members))
        for i, ns in enumerate(nss):
            sh("ip", "-n", ns, "-batch", "-", input="link set lo up\nlink set up0 addrgenmode none\naddr add %s/%d dev up0\nlink set up0 up\n" % (
                host_addr(first + i), PREFIXLEN) + members + "".join(
                "link add f%da type veth peer name f%db\n" % (k, k) for k in range(ifaces)))
        for k in range(self.members):
            sh("ip", "-n", "%s-e%d" % (self.tag, k + 1), "-batch", "-", input="".join(
                "neigh replace %s lladdr %s dev up0 nud permanent\n" % (host_addr(h), mac_of(host_addr(h)))
                for h in range(first, first + n)))
        base = os.path.join(self.tmp, "hosts")
        if not any(m == base for m in self.mounts):
            os.makedirs(base)
            sh("mount", "-t", "tmpfs", "-o", "size=4g", "clsdbench", base)
            self.mounts.append(base)
            os.makedirs(os.path.join(base, "bpffs"))
            sh("mount", "-t", "bpf", "bpf", os.path.join(base, "bpffs"))
            self.mounts.append(os.path.join(base, "bpffs"))
        users = self.node_users(names) if self.auth else {}
        out = []
        self.spawn_began = time.monotonic()  # the namespaces made: the clsds started from here
        for i, (name, ns) in enumerate(zip(names, nss)):
            d = os.path.join(base, name)
            os.makedirs(d)
            k = (first + i) % len(self.urls) if spread else 0
            urls = self.urls[k:] + self.urls[:k]
            sock = os.path.join(d, "sock")
            self.clsd(ns, name, d, os.path.join(base, "bpffs", name), urls, users.get(name, ()) + tuple(args))
            host = Host(name, ns, sock, host_addr(first + i))
            host.pid = self.procs[-1].pid
            host.log = os.path.join(d, "log")
            self.hosts.append(host)
            out.append(host)
        return out

    def wait_started(self, timeout=10):
        deadline = time.monotonic() + timeout
        for h in self.hosts:
            while not os.path.exists(h.sock):
                if time.monotonic() > deadline:
                    log = open(h.log).read().strip() if getattr(h, "log", None) else ""
                    die("the clsd of %s did not start%s" % (h.name, ": " + log[-300:] if log else ""))
                time.sleep(0.02)

    def status_watch(self):
        w = StatusWatch(self)
        self.watches.append(w)
        return w

    def ctl(self, *argv, check=True):
        auth = ("--fleet-user", "root", "--fleet-password-file", self.root_pw) if self.auth else ()
        return sh(*ns_exec(self.switch, CLSCTL, "--fleet", ",".join(self.urls), "--fleet-prefix", self.prefix,
                           *auth, *argv), check=check)

    def apply(self, policy):
        """clsctl fleet apply of policy: (when it began, the revision)."""
        path = os.path.join(self.tmp, "policy.json")
        with open(path, "w") as f:
            json.dump(policy, f)
        t0 = time.monotonic()
        return t0, json.loads(self.ctl("--json", "fleet", "apply", path).stdout)["revision"]
