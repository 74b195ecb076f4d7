"""A fleet of least privilege, against test_fleet.py's etcd with its authentication on: each node is
the etcd user `clsctl fleet rbac` made, which etcd lets read the fleet's intent and write only the
node's own keys; a node whose credentials could write the policies refuses to run; and with
--fleet-require-signed a node applies only a policy signed by a trusted key, never an edited or an
older one, saying why in its status."""
import base64
import json
import os
import shutil

from harness.base import run, wait_for
from harness.etcd import count_policy


b64 = lambda s: base64.b64encode(s if isinstance(s, bytes) else s.encode()).decode()


def password_of(fleet, name):
    with open(os.path.join(fleet.pwdir, fleet.node_user(name).replace("/", "_") + ".password")) as f:
        return f.read().strip()


def test_a_node_writes_only_its_own_keys(fleet, bpf, workdir):
    h1 = fleet.host("h1")
    h2 = fleet.host("h2")
    rev = fleet.apply(count_policy(bpf), workdir)
    fleet.wait_converged("edge-count", rev, {"h1", "h2"})
    user, pw = fleet.node_user("h1"), password_of(fleet, "h1")
    def snapshot():
        """Every key's mod_revision under policies/ and objects/, and n2's own keys."""
        out = {}
        for sub in ("policies/", "objects/", "nodes/h2", "status/h2/"):
            got = json.loads(fleet.cluster.etcdctl("get", "--prefix", "-w", "json", fleet.prefix + sub).stdout)
            out.update({kv["key"]: kv["mod_revision"] for kv in got.get("kvs", [])})
        return out

    before = snapshot()
    assert len(before) >= 4, before
    # what h1's credentials may not do, each refused by etcd
    p = fleet.prefix
    attempts = [
        ("/v3/kv/put", {"key": b64(p + "policies/edge-count"), "value": b64('{"name": "edge-count"}')}),
        ("/v3/kv/put", {"key": b64(p + "policies/evil"), "value": b64('{"name": "evil"}')}),
        ("/v3/kv/put", {"key": b64(p + "objects/sha256:" + "0" * 64), "value": b64("x")}),
        ("/v3/kv/put", {"key": b64(p + "nodes/h2"), "value": b64("{}")}),
        ("/v3/kv/put", {"key": b64(p + "status/h2/edge-count"), "value": b64("{}")}),
        ("/v3/kv/deleterange", {"key": b64(p + "status/h2/"), "range_end": b64(p + "status/h20")}),
        ("/v3/kv/deleterange", {"key": b64(p + "policies/edge-count")}),
        ("/v3/kv/txn", {"success": [{"request_put": {"key": b64(p + "policies/edge-count"), "value": b64("{}")}}]}),
    ]
    for path, body in attempts:
        code, answer = fleet.cluster.call(path, body, user=user, password=pw, check=False)
        assert code == 403 and "permission denied" in answer.get("message", ""), (path, body, code, answer)
    # what is its own it may write (its status, its record), and read the fleet's intent
    code, _ = fleet.cluster.call("/v3/kv/range", {"key": b64(p + "policies/"), "range_end": b64(p + "policies0")},
                                 user=user, password=pw, check=False)
    assert code == 200
    # clsctl with a node's credentials: one line, exit 1
    pwfile = os.path.join(workdir, "h1.pw")
    with open(pwfile, "w") as f:
        f.write(pw + "\n")
    saved = fleet.ctl_auth
    fleet.ctl_auth = lambda: ("--fleet-user", user, "--fleet-password-file", pwfile)
    try:
        r = fleet.ctl("fleet", "rm", "edge-count", check=1)
        assert "permission denied" in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    finally:
        fleet.ctl_auth = saved
    # nothing changed: n2 unaffected, the policy as it was
    assert snapshot() == before
    assert fleet.status("edge-count")[("h2", "edge-count")]["state"] == "applied"
    assert h2.prefs() == [10] and h2.send(3) == 3
    assert h1.prefs() == [10]


def test_a_node_whose_credentials_could_write_the_policies_refuses_to_run(fleet, bpf, workdir):
    h1 = fleet.host("h1", start=False)
    h1.extra = ("--fleet-user", "root", "--fleet-password-file", fleet.cluster.root_pw)
    h1.start(fleet.factory)
    wait_for(lambda: h1.clsd.proc.poll() is not None, timeout=10, what="clsd with writer credentials exiting")
    assert h1.clsd.proc.returncode != 0
    h1.clsd.proc = None
    log = h1.clsd.log_this_run()
    assert "root can write the fleet's policies" in log and "--fleet-allow-writer" in log, log
    assert h1.prefs() == []
    # told it may, it runs, and says so
    h1.extra = ("--fleet-user", "root", "--fleet-password-file", fleet.cluster.root_pw, "--fleet-allow-writer")
    h1.start()
    rev = fleet.apply(count_policy(bpf), workdir)
    fleet.wait_converged("edge-count", rev, {"h1"})
    assert "can write the fleet's policies (allowed by --fleet-allow-writer)" in h1.clsd.log_this_run()
    # a wrong password: it does not connect, and says why
    h2 = fleet.host("h2", start=False)
    bad = os.path.join(workdir, "bad.pw")
    with open(bad, "w") as f:
        f.write("not-the-password\n")
    h2.extra = ("--fleet-user", fleet.node_user("h2"), "--fleet-password-file", bad)
    fleet.node_auth("h2")  # the user exists, with another password
    h2.start(fleet.factory)
    wait_for(lambda: "authentication failed" in h2.clsd.log_this_run(), timeout=10, what="h2's refusal logged")
    assert h2.prefs() == []


def test_a_node_whose_user_goes_keeps_what_it_applied_and_comes_back_with_a_new_password(fleet, bpf, workdir):
    h1 = fleet.host("h1")
    rev = fleet.apply(count_policy(bpf), workdir)
    fleet.wait_converged("edge-count", rev, {"h1"})
    # the node's etcd user taken away (a key revoked). etcd lets a watch made before go on (it checks a
    # watch when it is made) and needs no permission for a lease's keepalive: the node learns at its
    # next write, loses etcd, cannot authenticate again, keeps what it applied and says why
    fleet.cluster.etcdctl("user", "delete", fleet.node_user("h1"))
    fleet.apply(count_policy(bpf, prio=11), workdir)
    wait_for(lambda: "authentication failed" in h1.clsd.log_this_run(), timeout=20,
             what="h1's failed authentication logged")
    assert 'clsd_fleet_connected{node="h1",endpoint="' in h1.clsd.api.get("/metrics").body.decode()
    assert h1.prefs() in ([10], [11]) and h1.send(2) == 2
    # made again, with a new password in the same file: read at its next connection, without a restart
    fleet.ctl("fleet", "rbac", "h1", "--apply", "--out", fleet.pwdir)
    rev = fleet.apply(count_policy(bpf, prio=12), workdir)
    fleet.wait_converged("edge-count", rev, {"h1"}, timeout=20)
    assert h1.prefs() == [12]


def keypair(workdir, tool, name):
    pub, sec = os.path.join(workdir, name + ".pub"), os.path.join(workdir, name + ".sec")
    if tool == "minisign":
        run(["minisign", "-G", "-W", "-p", pub, "-s", sec], input="")
    else:
        run(["signify-openbsd", "-G", "-n", "-p", pub, "-s", sec])
    return pub, sec


class Signed:
    """Two hosts that require signed policies (--trusted-keys with a minisign and a signify key, the
    object signed too: --trusted-keys loads only signed objects), a third key nobody trusts, and what
    a test does with them."""

    def __init__(self, fleet, bpf, workdir):
        self.fleet, self.workdir = fleet, workdir
        trusted = os.path.join(workdir, "trusted")
        os.makedirs(trusted)
        self.mpub, self.msec = keypair(workdir, "minisign", "m")
        spub, self.ssec = keypair(workdir, "signify", "s")
        _, self.other = keypair(workdir, "minisign", "other")
        shutil.copy(self.mpub, trusted)
        shutil.copy(spub, trusted)
        self.obj = os.path.join(workdir, "count.bpf.o")
        shutil.copy(bpf.count, self.obj)
        run(["minisign", "-S", "-s", self.msec, "-m", self.obj], input="")
        self.bpf = bpf
        self.hosts = []
        for name in ("h1", "h2"):
            h = fleet.host(name, start=False)
            h.extra = ("--trusted-keys", trusted, "--fleet-require-signed")
            self.hosts.append(h.start(fleet.factory))
        self.names = {"h1", "h2"}

    def policy(self, prio):
        p = count_policy(self.bpf, prio=prio)
        p["ingress"][0]["object"] = self.obj
        return p

    def apply(self, prio, *sign):
        path = os.path.join(self.workdir, "p.json")
        with open(path, "w") as f:
            json.dump(self.policy(prio), f)
        return self.fleet.ctl_json(*sign, "fleet", "apply", path)["revision"]

    def refused_everywhere(self, revision, why):
        st = self.fleet.status("edge-count")
        return set(n for n, _ in st) == self.names and all(
            r["state"] == "failed" and (revision is None or r["revision"] == revision) and why in r.get("error", "")
            for r in st.values())

    def prefs(self):
        return [h.prefs() for h in self.hosts]

    def value(self):
        out = self.fleet.cluster.etcdctl("get", "--print-value-only", self.fleet.prefix + "policies/edge-count").stdout
        return json.loads(out)

    def put(self, v):
        body = {"key": b64(self.fleet.prefix + "policies/edge-count"), "value": b64(json.dumps(v))}
        return int(self.fleet.cluster.call("/v3/kv/put", body)[1]["header"]["revision"])


def test_signed_policies_only_and_never_an_edited_or_older_one(fleet, bpf, workdir):
    sg = Signed(fleet, bpf, workdir)
    hosts, names, apply, put, value = sg.hosts, sg.names, sg.apply, sg.put, sg.value
    msec, ssec, other, mpub = sg.msec, sg.ssec, sg.other, sg.mpub
    refused_everywhere = sg.refused_everywhere

    # unsigned: refused on every node, nothing attached
    rev = apply(10)
    wait_for(lambda: refused_everywhere(rev, "not signed"), timeout=10, what="the unsigned policy refused")
    assert all(h.prefs() == [] for h in hosts)
    # signed by a trusted key: applied
    rev = apply(10, "--sign", msec)
    fleet.wait_converged("edge-count", rev, names)
    assert all(h.prefs() == [10] for h in hosts) and hosts[0].send(2) == 2
    signed10 = value()
    assert signed10["signed"]["serial"] > 0 and "untrusted comment" in signed10["signed"]["signature"]
    # edited after signing (its priority): refused, the signed one stays
    edited = json.loads(json.dumps(signed10))
    edited["ingress"][0]["priority"] = 11
    rev = put(edited)
    wait_for(lambda: refused_everywhere(rev, "does not match"), timeout=10, what="the edited policy refused")
    assert all(h.prefs() == [10] for h in hosts)
    # a newer one, signed with the other trusted key (signify's)
    rev = apply(12, "--sign", ssec)
    fleet.wait_converged("edge-count", rev, names)
    assert all(h.prefs() == [12] for h in hosts)
    # the older signed one written again (a replay): refused
    rev = put(signed10)
    wait_for(lambda: refused_everywhere(rev, "a replay"), timeout=10, what="the replayed policy refused")
    assert all(h.prefs() == [12] for h in hosts)
    # signed by a key no node trusts: refused
    rev = apply(13, "--sign", other)
    wait_for(lambda: refused_everywhere(rev, "not a trusted key"), timeout=10, what="the wrongly signed one refused")
    assert all(h.prefs() == [12] for h in hosts)
    # a restart does not forget what it accepted: the replay is still refused
    put(signed10)
    hosts[0].clsd.restart()
    rev = json.loads(fleet.cluster.etcdctl("get", "-w", "json", fleet.prefix + "policies/edge-count").stdout)[
        "kvs"][0]["mod_revision"]
    wait_for(lambda: refused_everywhere(rev, "a replay"), timeout=10, what="the replay refused after a restart")
    assert hosts[0].prefs() == [12]
    # and the correct one applies
    rev = apply(14, "--sign", msec)
    fleet.wait_converged("edge-count", rev, names)
    assert all(h.prefs() == [14] for h in hosts)
    # a bad key file: clsctl says so, one line, exit 1; nothing written
    p = fleet.ctl("fleet", "apply", "--sign", mpub, os.path.join(workdir, "p.json"), check=1)
    assert "not a minisign or signify secret key" in p.stderr and len(p.stderr.strip().splitlines()) == 1
    assert fleet.status("edge-count")[("h1", "edge-count")]["revision"] == rev


def test_a_removal_must_be_signed_too(fleet, bpf, workdir):
    sg = Signed(fleet, bpf, workdir)
    rev = sg.apply(10, "--sign", sg.msec)
    fleet.wait_converged("edge-count", rev, sg.names)
    # the key deleted without a signature (clsctl fleet rm as an operator whose credentials were taken):
    # every node keeps the policy, and says why
    fleet.ctl("fleet", "rm", "edge-count")
    wait_for(lambda: sg.refused_everywhere(None, "removed without a signature"), timeout=10,
             what="the unsigned removal refused")
    assert sg.prefs() == [[10], [10]] and sg.hosts[0].send(2) == 2
    # a restart lists etcd, where the key is gone: still kept
    sg.hosts[0].clsd.restart()
    wait_for(lambda: "removed without a signature" in sg.hosts[0].clsd.log_this_run(), timeout=10,
             what="h1 keeping it after a restart")
    assert sg.hosts[0].prefs() == [10]
    # applied again, then a removal signed by a key no node trusts: refused
    rev = sg.apply(12, "--sign", sg.ssec)
    fleet.wait_converged("edge-count", rev, sg.names)
    signed12 = sg.value()
    fleet.ctl("fleet", "rm", "--sign", sg.other, "edge-count")
    wait_for(lambda: sg.refused_everywhere(None, "not a trusted key"), timeout=10,
             what="the wrongly signed removal refused")
    assert sg.prefs() == [[12], [12]]
    # a signed removal: gone from every node, and its statuses with it
    fleet.ctl("fleet", "rm", "--sign", sg.msec, "edge-count")
    wait_for(lambda: sg.prefs() == [[], []], timeout=10, what="the policy removed everywhere")
    wait_for(lambda: fleet.status("edge-count") == {}, timeout=10, what="its statuses gone")
    assert sg.value()["removed"] is True and sg.value()["signed"]["serial"] > 0
    # a removal of what is not there: one line, exit 1
    assert fleet.ctl("fleet", "rm", "--sign", sg.msec, "nothing", check=1).stderr.strip() == \
        "clsctl: no fleet policy nothing"
    # an older signed policy written over the removal: a replay, refused (nothing attached)
    rev = sg.put(signed12)
    wait_for(lambda: sg.refused_everywhere(rev, "a replay"), timeout=10, what="the replay over the removal refused")
    assert sg.prefs() == [[], []]
