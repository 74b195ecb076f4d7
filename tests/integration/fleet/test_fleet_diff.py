"""clsctl fleet diff: a fleet-wide dry run against a real 3-member etcd (authentication on, each node its
own least-privileged user) and real hosts. The nodes answer from their own kernels through etcd: the one
where a foreign filter holds the priority says so, by name, and the command exits 2; with nothing in
the way it exits 1 (a change) and names each host's add; after the apply, 0. Nodes the selector leaves
out are listed with why (labels, a kernel gate, not connected), the rollout's waves are shown, and
nothing is applied, nor left in etcd: what a node applies (policies/) is untouched."""
import base64
import json
import time

from harness.base import wait_for
from harness.etcd import count_policy, etcd_put_raw


def diff(fleet, workdir, policy, *extra, check=None):
    path = "%s/diff-%s.json" % (workdir, policy["name"])
    with open(path, "w") as f:
        json.dump(policy, f)
    return fleet.ctl(*extra, "fleet", "diff", path, check=check, timeout=40)


def live(fleet, n):
    wait_for(lambda: sum(1 for r in fleet.ctl_json("fleet", "nodes") if r.get("_bound")) == n, timeout=10,
             what="%d live nodes" % n)


def keys(fleet, sub):
    b = lambda s: base64.b64encode(s.encode()).decode()
    start = fleet.prefix + sub
    answer = fleet.cluster.call("/v3/kv/range", {"key": b(start), "range_end": b(start[:-1] + chr(ord(start[-1]) + 1)),
                                                 "keys_only": True})[1]
    return [base64.b64decode(k["key"]).decode()[len(fleet.prefix):] for k in answer.get("kvs", [])]


def test_a_fleet_diff_names_the_one_node_a_foreign_filter_blocks_and_applies_nothing(fleet, bpf, workdir):
    h1 = fleet.host("h1", role="edge")
    h2 = fleet.host("h2", role="edge")
    fleet.host("h3", role="core")
    live(fleet, 3)
    policy = count_policy(bpf, labels={"role": "edge"})
    # nothing in the way: both edge hosts would add the filter (exit 1), h3 is left out by its labels
    p = diff(fleet, workdir, policy, "--json", check=1)
    out = json.loads(p.stdout)
    nodes = {n["node"]: n for n in out["nodes"]}
    assert nodes["h3"]["selected"] is False and "labels" in nodes["h3"]["why"], nodes["h3"]
    for h in ("h1", "h2"):
        (iface,) = nodes[h]["answer"]["interfaces"]
        assert iface["ifname"] == "va" and iface["changed"] is True, iface
        assert [(s["action"], s["priority"]) for s in iface["steps"]] == [("add", 10)], iface
    assert out["changes"] is True
    # nothing was applied: no filter on any host, no policy in etcd, no request or answer left behind
    assert h1.prefs() == [] and h2.prefs() == []
    assert keys(fleet, "policies/") == [] and keys(fleet, "diffs/") == []
    time.sleep(0.5)
    assert keys(fleet, "diff-answers/") == []
    # a foreign filter holds priority 10 on h2 only: the diff says so for h2, by name, and exits 2
    h2.ns.add_foreign_filter("va", 10, bpf.drop_port)
    p = diff(fleet, workdir, policy, check=2)
    lines = [l for l in p.stdout.splitlines() if l.startswith("h2 ")]
    assert lines and "conflict" in lines[0] and "10" in lines[0], p.stdout
    assert any(l.startswith("h1 ") and "add ingress" in l for l in p.stdout.splitlines()), p.stdout
    assert any(l.startswith("h3 ") and "left out" in l for l in p.stdout.splitlines()), p.stdout
    # without it, applied for real, the diff of the same policy says nothing would change
    h2.ns.run("tc", "filter", "del", "dev", "va", "ingress", "pref", "10")
    rev = fleet.apply(policy, workdir)
    fleet.wait_converged("edge-count", rev, {"h1", "h2"})
    p = diff(fleet, workdir, policy, "--json", check=0)
    assert json.loads(p.stdout)["changes"] is False


def test_a_fleet_diff_lists_gated_and_dead_nodes_and_the_waves_and_a_silent_node(fleet, bpf, workdir):
    fleet.host("a1", role="edge", zone="a")
    fleet.host("a2", role="edge", zone="b")
    gone = fleet.host("a3", role="edge", zone="a")
    live(fleet, 3)
    # a record no live lease holds (a node long gone, or written by hand): not connected, in no wave
    etcd_put_raw(fleet, b"nodes/ghost", json.dumps({"node": "ghost", "labels": {"role": "edge"}}).encode())
    policy = count_policy(bpf, labels={"role": "edge"})
    policy["rollout"] = {"waves": [1, "100%"], "hold": "1s", "confirm": "0"}
    # a node whose clsd is stopped (SIGSTOP: its lease lives a while, it cannot answer) is one that did not
    gone.clsd.proc.send_signal(19)
    try:
        p = diff(fleet, workdir, policy, "--json", "--wait=2", check=2)
    finally:
        gone.clsd.proc.send_signal(18)
    out = json.loads(p.stdout)
    nodes = {n["node"]: n for n in out["nodes"]}
    assert nodes["a3"]["selected"] is True and "no answer" in nodes["a3"]["why"], nodes["a3"]
    assert "answer" in nodes["a1"] and "answer" in nodes["a2"]
    assert nodes["ghost"] == {"node": "ghost", "selected": False,
                              "why": "not connected (no live lease holds its record)"}, nodes["ghost"]
    assert sum(len(w) for w in out["waves"]) == 3 and len(out["waves"][0]) == 1, out["waves"]
    assert "ghost" not in [n for w in out["waves"] for n in w], out["waves"]
    # a kernel gate no node meets: every one left out, and why
    gated = count_policy(bpf, labels={"role": "edge"})
    gated["nodes"]["kernel"] = ">=99.0"
    out = json.loads(diff(fleet, workdir, gated, "--json", check=0).stdout)
    assert all(n["selected"] is False and "kernel" in n["why"] for n in out["nodes"] if n["node"] != "ghost"), out
    # a policy every node would refuse (a filter without its object): each says why, exit 2
    refused = {"name": "x", "match": {"ifname": ["va"]}, "ingress": [{"name": "c"}]}
    p = diff(fleet, workdir, refused, check=2)
    assert [l.split()[2] for l in p.stdout.splitlines()[1:4]] == ["refused"] * 3, p.stdout
    assert "missing_field" in p.stdout and "ingress[0].object" in p.stdout
    # a file that is no JSON: one line, exit 2 (trouble), nothing written
    bad = "%s/bad.json" % workdir
    with open(bad, "w") as f:
        f.write('{"name": "x",')
    p = fleet.ctl("fleet", "diff", bad, check=2)
    assert len(p.stderr.strip().splitlines()) == 1 and "bad.json" in p.stderr, p.stderr
    assert keys(fleet, "diffs/") == [] and keys(fleet, "policies/") == []


def test_a_node_whose_user_predates_fleet_diff_runs_and_answers_none(fleet, bpf, workdir):
    """A node whose etcd user was made before fleet diff existed (no read on diffs/): it connects and applies
    policies as before, says once that it answers no diff, and a diff lists it as silent (exit 2)."""
    h = fleet.host("o1", start=False, role="edge")
    fleet.node_auth("o1")  # its user and role, as clsctl fleet rbac --apply makes them
    user = fleet.node_user("o1")
    b = lambda s: base64.b64encode(s.encode()).decode()
    key = fleet.prefix + "diffs/"
    for role in fleet.cluster.call("/v3/auth/user/get", {"name": user})[1]["roles"]:
        fleet.cluster.call("/v3/auth/role/revoke", {"role": role, "key": b(key), "range_end": b(key[:-1] + "0")})
    h.start(fleet.factory)
    live(fleet, 1)
    wait_for(lambda: "cannot read fleet diff requests" in h.clsd.log_this_run(), timeout=10,
             what="o1 saying it answers no diff")
    rev = fleet.apply(count_policy(bpf, labels={"role": "edge"}), workdir)
    fleet.wait_converged("edge-count", rev, {"o1"})
    assert h.prefs() == [10]
    other = count_policy(bpf, name="other", prio=20, labels={"role": "edge"})
    out = json.loads(diff(fleet, workdir, other, "--json", "--wait=2", check=2).stdout)
    (n,) = out["nodes"]
    assert n["node"] == "o1" and "no answer" in n["why"], n
    assert h.clsd.log_this_run().count("cannot read fleet diff requests") == 1
