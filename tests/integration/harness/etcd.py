"""A real 3-member etcd cluster for the fleet's tests (authentication on, bcrypt at its lowest cost),
its hosts (a namespace each on a bridge, 198.18.200.0/24, a veth pair to a peer that sends traffic) and
the fleet fixture: a key prefix of each test's own, so that one cluster serves a module."""
import base64
import hashlib
import json
import os
import shutil
import signal
import subprocess
import tempfile

import pytest

from harness.base import CLSCTL, run, wait_for
from harness.netns import netns_create, netns_destroy
from harness.observe import prog_map_id, read_counter, udp_exchange


ETCD = shutil.which("etcd") or "/usr/bin/etcd"
SUBNET = "198.18.200"
MEMBERS = 3
TTL = 3  # the hosts' lease: a dead host's records go this long after it
ROOT_PASSWORD = "clsd-test-root"


def member_url(i, port=2379):
    return "http://%s.%d:%d" % (SUBNET, i + 1, port)


class EtcdCluster:
    def __init__(self, switch, root):
        self.switch = switch
        self.root = root
        self.ns = []
        self.procs = [None] * MEMBERS
        self.hosts_attached = 0

    def attach(self, ns, addr, dev="up0"):
        """ns joins the bridge with addr (a veth whose other end is a bridge port)."""
        self.hosts_attached += 1
        port = "p%d" % self.hosts_attached
        ns.add_veth(dev, port, peer_ns=self.switch)
        self.switch.run("ip", "link", "set", port, "master", "br0", "up")
        ns.run("ip", "addr", "add", "%s/24" % addr, "dev", dev)
        ns.run("ip", "link", "set", dev, "up")

    def start_member(self, i):
        assert self.procs[i] is None
        cluster = ",".join("e%d=%s" % (k + 1, member_url(k, 2380)) for k in range(MEMBERS))
        log = open(os.path.join(self.root, "e%d.log" % (i + 1)), "ab")
        self.procs[i] = self.ns[i].popen(
            ETCD, "--name", "e%d" % (i + 1), "--data-dir", os.path.join(self.root, "e%d" % (i + 1)),
            "--listen-peer-urls", member_url(i, 2380), "--initial-advertise-peer-urls", member_url(i, 2380),
            "--listen-client-urls", member_url(i), "--advertise-client-urls", member_url(i),
            "--initial-cluster", cluster, "--initial-cluster-state", "new", "--initial-cluster-token", "clsdt",
            "--heartbeat-interval", "50", "--election-timeout", "500", "--bcrypt-cost", "4",
            stdout=log, stderr=subprocess.STDOUT)
        log.close()

    def stop_member(self, i, sig=signal.SIGKILL):
        p = self.procs[i]
        self.procs[i] = None
        p.send_signal(sig)
        p.wait(timeout=10)

    def urls(self):
        return ",".join(member_url(i) for i in range(MEMBERS))

    def enable_auth(self):
        """etcd's root user (its password in root_pw), and authentication on."""
        self.root_pw = os.path.join(self.root, "root.password")
        with open(self.root_pw, "w") as f:
            f.write(ROOT_PASSWORD + "\n")
        ctl = lambda *a: run(self.switch.argv("etcdctl", "--endpoints", self.urls(), *a))
        ctl("user", "add", "root", "--new-user-password=" + ROOT_PASSWORD, "--interactive=false")
        ctl("user", "grant-role", "root", "root")
        ctl("auth", "enable")

    def etcdctl(self, *args, **kw):
        """etcdctl as etcd's root user."""
        return run(self.switch.argv("etcdctl", "--endpoints", self.urls(), "--user", "root:" + ROOT_PASSWORD, *args),
                   **kw)

    def token(self, user="root", password=ROOT_PASSWORD):
        out = run(self.switch.argv("curl", "-sf", "--noproxy", "*", "-X", "POST", member_url(1) + "/v3/auth/authenticate",
                                   "-d", json.dumps({"name": user, "password": password}))).stdout
        return json.loads(out)["token"]

    def call(self, path, body, user="root", password=ROOT_PASSWORD, check=True):
        """A POST to the JSON gateway as user: (HTTP status, the answer)."""
        p = run(self.switch.argv("curl", "-s", "--noproxy", "*", "-X", "POST", "-w", "\n%{http_code}",
                                 "-H", "Authorization: " + self.token(user, password), member_url(1) + path,
                                 "--data-binary", "@-"), input=json.dumps(body), timeout=30)
        text, _, code = p.stdout.rpartition("\n")
        if check:
            assert code == "200", (path, code, text)
        return int(code), json.loads(text or "{}")

    def healthy(self, i):
        p = run([*self.switch.argv("curl", "-sf", "-m", "1", member_url(i) + "/health")], check=False)
        return p.returncode == 0 and json.loads(p.stdout or "{}").get("health") == "true"

    def wait_healthy(self, members=None):
        for i in members if members is not None else range(MEMBERS):
            wait_for(lambda: self.healthy(i), timeout=20, interval=0.1, what="etcd member e%d healthy" % (i + 1))


@pytest.fixture(scope="module")
def cluster():
    root = tempfile.mkdtemp(prefix="clsdt-etcd-", dir="/tmp")
    made = []
    c = None
    try:
        switch = netns_create()
        made.append(switch)
        switch.run("ip", "link", "add", "br0", "type", "bridge")
        switch.run("ip", "link", "set", "br0", "up")
        switch.run("ip", "addr", "add", "%s.254/24" % SUBNET, "dev", "br0")
        c = EtcdCluster(switch, root)
        for i in range(MEMBERS):
            ns = netns_create()
            made.append(ns)
            c.ns.append(ns)
            c.attach(ns, "%s.%d" % (SUBNET, i + 1))
        for i in range(MEMBERS):
            c.start_member(i)
        c.wait_healthy()
        c.enable_auth()
        yield c
    finally:
        if c:
            for i in range(MEMBERS):
                if c.procs[i]:
                    c.stop_member(i)
        for ns in reversed(made):
            netns_destroy(ns)
        shutil.rmtree(root, ignore_errors=True)


class Host:
    def __init__(self, fleet, index, name, labels):
        self.fleet, self.index, self.name, self.labels = fleet, index, name, labels
        self.ns = netns_create()
        self.peer = netns_create()
        self.addr = "198.18.%d.1" % (10 + index)
        self.peer_addr = "198.18.%d.2" % (10 + index)
        fleet.cluster.attach(self.ns, "%s.%d" % (SUBNET, 10 + index))
        self.ns.add_veth("va", "vb", peer_ns=self.peer)
        mac = {}
        for ns, dev, addr in ((self.ns, "va", self.addr), (self.peer, "vb", self.peer_addr)):
            ns.run("sysctl", "-qw", "net.ipv6.conf.%s.disable_ipv6=1" % dev)
            ns.run("ip", "addr", "add", addr + "/24", "dev", dev)
            ns.run("ip", "link", "set", dev, "up")
            mac[dev] = json.loads(ns.run("ip", "-j", "link", "show", dev).stdout)[0]["address"]
        # static neighbours: only the test's datagrams reach the counters
        self.ns.run("ip", "neigh", "replace", self.peer_addr, "lladdr", mac["vb"], "nud", "permanent", "dev", "va")
        self.peer.run("ip", "neigh", "replace", self.addr, "lladdr", mac["va"], "nud", "permanent", "dev", "vb")
        self.clsd = None
        self.extra = ()
        self.ttl = TTL  # None: sized by the fleet (clsd's default)

    def args(self):
        # its own etcd user, unless the test gives it other credentials (extra: options of the test's)
        auth = () if "--fleet-user" in self.extra else self.fleet.node_auth(self.name)
        return ("--fleet", self.fleet.urls, "--fleet-prefix", self.fleet.prefix, "--node", self.name,
                "--node-labels", ",".join("%s=%s" % kv for kv in self.labels.items()),
                *(("--fleet-lease-ttl", str(self.ttl)) if self.ttl else ()), *self.fleet.tls, *auth, *self.extra)

    def start(self, factory=None, env=None):
        if self.clsd is None:
            self.clsd = factory(self.ns, name=self.name, args=self.args(), start=False)
            self.clsd.env.update(env or {})
            self.clsd.start()
        else:
            self.clsd.args = list(self.args())
            self.clsd.start()
        return self

    def counter_id(self, dev="va"):
        """The counters of clsd's filter on dev's ingress."""
        f = [f for f in self.ns.filters(dev) if f.name and f.name.startswith("clsd:") and f.id]
        return prog_map_id(f[0].id, "counters") if f else None

    def prefs(self, dev="va"):
        return [f.pref for f in self.ns.filters(dev) if f.name and f.name.startswith("clsd:")]

    def send(self, n):
        """n datagrams from the peer to the host; returns how many the host's counter counted."""
        counters = self.counter_id()
        before = read_counter(counters)[0]
        got = udp_exchange(self.peer, self.ns, self.addr, {7777: n})
        assert got[7777] == n
        return read_counter(counters)[0] - before - 1  # the exchange's marker datagram is counted too


class Fleet:
    def __init__(self, cluster, factory, prefix):
        self.cluster, self.factory, self.prefix = cluster, factory, prefix
        self.hosts = {}
        self.urls = cluster.urls()
        self.tls = ()  # --fleet-ca … for clsd and clsctl alike
        self.auth = True  # etcd's authentication: clsctl as root, each node as its own user (rbac)
        self.pwdir = tempfile.mkdtemp(prefix="pw-", dir=cluster.root)

    def ctl_auth(self):
        return ("--fleet-user", "root", "--fleet-password-file", self.cluster.root_pw) if self.auth else ()

    def node_user(self, name):
        return "%s@%s" % (name, self.prefix)

    def node_auth(self, name):
        """A node's etcd user, made by clsctl fleet rbac (once per node); without auth, a writer."""
        if not self.auth:
            return ("--fleet-allow-writer",)
        path = os.path.join(self.pwdir, self.node_user(name).replace("/", "_") + ".password")
        if not os.path.exists(path):
            self.ctl("fleet", "rbac", name, "--apply", "--out", self.pwdir)
        return ("--fleet-user", self.node_user(name), "--fleet-password-file", path)

    def host(self, name, start=True, env=None, **labels):
        h = Host(self, len(self.hosts) + 1, name, labels)
        self.hosts[name] = h
        return h.start(self.factory, env) if start else h

    def ctl(self, *args, check=0, timeout=20):
        p = run(self.cluster.switch.argv(CLSCTL, "--fleet", self.urls, "--fleet-prefix", self.prefix, *self.tls,
                                         *self.ctl_auth(), *args), check=False, timeout=timeout)
        if check is not None:
            assert p.returncode == check, "clsctl fleet %s: exit %d\n%s%s" % (args, p.returncode, p.stdout, p.stderr)
        return p

    def ctl_json(self, *args, check=0):
        return json.loads(self.ctl("--json", *args, check=check).stdout)

    def apply(self, policy, dir):
        path = os.path.join(dir, "%s.json" % policy["name"])
        with open(path, "w") as f:
            json.dump(policy, f)
        return self.ctl_json("fleet", "apply", path)["revision"]

    def status(self, policy=None, check=None):
        p = self.ctl("--json", "fleet", "status", *([policy] if policy else []), check=check)
        return {(r["node"], r["policy"]): r for r in json.loads(p.stdout or "[]")}

    def row_when(self, node, state, policy="edge-count", timeout=10):
        """node's status row of policy once it says state: a row is what its node published last, a moment
        behind what tc and a rollout's plan already show."""
        def row():
            r = self.status(policy).get((node, policy))
            return r if r and r["state"] == state else None
        return wait_for(row, timeout=timeout, interval=0.2, what="%s's row of %s saying %s" % (node, policy, state))

    def converged(self, policy, revision, nodes):
        """Every node of nodes says it applied revision of policy, and no other node is selected."""
        st = self.status(policy)
        return set(n for n, _ in st) == set(nodes) and all(
            r["state"] == "applied" and r["held_revision"] == revision for r in st.values())

    def wait_converged(self, policy, revision, nodes, timeout=10):
        wait_for(lambda: self.converged(policy, revision, nodes), timeout=timeout, interval=0.1,
                 what="%s at revision %d on %s" % (policy, revision, sorted(nodes)))


@pytest.fixture
def fleet(cluster, clsd_factory, request):
    # a prefix of the test's own (the name cut short, so a hash of it whole: parametrized tests differ
    # only at its end)
    name = request.node.name
    prefix = "/t-%s-%s-%d/" % (name[:40].replace("[", "-").replace("]", ""),
                               hashlib.sha256(name.encode()).hexdigest()[:6], os.getpid())
    f = Fleet(cluster, clsd_factory, prefix)
    try:
        yield f
    finally:
        for h in f.hosts.values():
            if h.clsd and h.clsd.proc:
                h.clsd.kill()
            netns_destroy(h.peer)
            netns_destroy(h.ns)
        for i in range(MEMBERS):
            if cluster.procs[i] is None:
                cluster.start_member(i)
        cluster.wait_healthy()


def count_policy(bpf, name="edge-count", prio=10, **nodes):
    p = {"name": name, "match": {"ifname": ["va"]},
         "ingress": [{"name": "c", "object": bpf.count, "priority": prio}]}
    if nodes:
        p["nodes"] = nodes
    return p


def etcd_raw(fleet, path, body):
    return fleet.cluster.call(path, body)[1]


def etcd_put_raw(fleet, key, value, lease=None):
    """key and value as bytes, under the fleet's prefix; no lease unless given."""
    b = lambda x: base64.b64encode(x).decode()
    body = {"key": b(fleet.prefix.encode() + key), "value": b(value)}
    if lease:
        body["lease"] = str(lease)
    return int(etcd_raw(fleet, "/v3/kv/put", body)["header"]["revision"])


