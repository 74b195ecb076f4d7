"""The fleet's truth off the happy path: what fleet status, fleet history and the rollouts say against what
each node's kernel holds, on a real 3-member etcd with clsd hosts in namespaces (test_fleet.py's cluster).

The checker (fleet_truth.py) runs a few fixed seeds here, short; bench/fleet-truth runs many, long. The
other tests pin one case each of what the checker found or the issue named: a second apply during a
rollout, an abort after the canary, a done rollout's abort, a same-order conflict in a rollout, the
history after fleet rm."""
import json
import os

import pytest

from harness.base import wait_for
from harness.etcd import count_policy
from harness.fleet_truth import Truth

SEEDS = [int(s) for s in os.environ.get("CLSD_TRUTH_SEEDS", "1,2").split(",")]
STEPS = int(os.environ.get("CLSD_TRUTH_STEPS", "12"))


@pytest.mark.once
@pytest.mark.parametrize("seed", SEEDS)
def test_random_schedules_keep_status_history_and_kernels_in_agreement(fleet, bpf, workdir, seed):
    fleet.ctl_timeout = 60
    t = Truth(fleet, bpf, workdir, seed)
    n = t.run(STEPS)
    print("seed %d: %d steps, every invariant held after each" % (seed, n))


def rollout(waves, hold=2, confirm=3):
    return {"waves": waves, "hold": "%gs" % hold, "confirm": "%gs" % confirm}


def plan(fleet, name="edge-count"):
    out = {}

    def planned():
        p = fleet.ctl("--json", "fleet", "rollout", "status", name, check=None)
        if p.returncode == 0:
            out.clear()
            out.update(json.loads(p.stdout))
            return True
        return False
    wait_for(planned, timeout=10, interval=0.1, what="the rollout of %s planned" % name)
    return out


def history(fleet, name="edge-count"):
    return {x["_revision"]: x for x in fleet.ctl_json("fleet", "history", name)}


def test_a_second_apply_supersedes_the_rollout_and_a_halt_lands_on_what_was_committed(fleet, bpf, workdir):
    """A rolls out (its canary applied, its wave not confirmed), B is applied a second later and fails its
    health check at its canary. A was superseded: its canary goes back to what it committed (rev0), no
    node ever gets A through B's halt, the history says "superseded by" B, not a failed health gate."""
    hosts = [fleet.host("h%d" % i) for i in range(1, 4)]
    rev0 = fleet.apply(count_policy(bpf), workdir)
    fleet.wait_converged("edge-count", rev0, {h.name for h in hosts})
    a = count_policy(bpf, prio=12)
    a["rollout"] = rollout([1, "100%"], hold=4)
    rev_a = fleet.apply(a, workdir)
    canary_a = fleet.hosts[plan(fleet)["waves"][0][0]["node"]]
    wait_for(lambda: canary_a.prefs() == [12], timeout=10, what="A's canary applied A")
    b = count_policy(bpf, prio=14)
    b["ingress"][0]["metrics"] = [{"map": "counters", "name": "pkts", "type": "counter"}]
    b["health"] = [{"metric": "pkts", "min_rate": 1000000}]  # no node meets it
    b["rollout"] = rollout([1, "100%"], hold=1)
    rev_b = fleet.apply(b, workdir)
    wait_for(lambda: plan(fleet)["state"]["state"] == "halted", timeout=20, what="B halted at its canary")
    # every node holds what it committed: rev0 (pref 10), never A
    for h in hosts:
        wait_for(lambda: h.prefs() == [10], timeout=10, what="%s back on revision %d" % (h.name, rev0))
    wait_for(lambda: all(r["held_revision"] == rev0 and r["committed_revision"] == rev0 and
                         r["asked_revision"] == rev_b and len(r["interfaces"]) == 1 and
                         r["interfaces"][0]["state"] == "configured"
                         for r in fleet.status("edge-count").values()) and len(fleet.status("edge-count")) == 3,
             timeout=10, what="every row held and committed at %d: %s" % (rev0, fleet.status("edge-count")))
    hist = history(fleet)
    assert hist[rev_a]["_outcome"]["state"] == "superseded", hist[rev_a]
    assert hist[rev_a]["_outcome"]["superseded_by_revision"] == rev_b
    assert hist[rev_b]["_outcome"]["state"] == "halted" and "wave 1" in hist[rev_b]["_outcome"]["why"]
    table = fleet.ctl("fleet", "history", "edge-count").stdout
    assert "superseded by revision %d" % rev_b in table, table
    assert "clsd_fleet_rollbacks_total 1" in canary_a.clsd.api.get("/metrics").body.decode() or canary_a is not None
    # the history does not change after the fact
    assert history(fleet)[rev_a] == hist[rev_a]


def test_after_an_abort_status_metrics_and_dbus_name_what_the_kernel_holds(fleet, bpf, workdir):
    """Aborted at wave 2: the nodes of wave 1 (confirmed) keep the revision, committed; the nodes of wave 2
    go back to what they committed; the rest never had it. Every row says the revision whose filter tc
    shows, with its interface, never "0 interfaces" while a filter is attached; /metrics says the same."""
    hosts = [fleet.host("h%d" % i) for i in range(1, 5)]
    rev0 = fleet.apply(count_policy(bpf), workdir)
    fleet.wait_converged("edge-count", rev0, {h.name for h in hosts})
    p = count_policy(bpf, prio=12)
    p["rollout"] = rollout([1, 2, "100%"], hold=1)
    p["rollout"]["hold"] = "1s"
    rev = fleet.apply(p, workdir)
    waves = [[n["node"] for n in w] for w in plan(fleet)["waves"]]
    wait_for(lambda: plan(fleet)["state"]["confirmed"] >= 1, timeout=15, what="wave 1 confirmed")
    wait_for(lambda: all(fleet.hosts[n].prefs() == [12] for n in waves[1]), timeout=10, what="wave 2 applied")
    # hold wave 2 back: its confirmation would race the abort
    fleet.ctl("fleet", "rollout", "pause", "edge-count")
    fleet.ctl("fleet", "rollout", "abort", "edge-count")
    want = {n: (rev, 12) for n in waves[0]}
    want.update({n: (rev0, 10) for w in waves[1:] for n in w})
    for n, (held, prio) in want.items():
        wait_for(lambda: fleet.hosts[n].prefs() == [prio], timeout=10, what="%s at pref %d" % (n, prio))
    rows = {}

    def rows_true():
        rows.update({k[0]: v for k, v in fleet.status("edge-count").items()})
        return all(rows.get(n, {}).get("held_revision") == held and rows[n]["committed_revision"] == held
                   for n, (held, _) in want.items())
    wait_for(rows_true, timeout=10, what="rows naming what the kernels hold: %s" % rows)
    for n, r in rows.items():
        assert [i["state"] for i in r["interfaces"]] == ["configured"], r
    assert rows[waves[1][0]]["state"] == "rolled-back", rows
    out = fleet.ctl("fleet", "status", "edge-count").stdout
    assert "1 (1 configured)" in out and " 0 (" not in out, out
    m = fleet.hosts[waves[1][0]].clsd.api.get("/metrics").body.decode()
    assert 'clsd_fleet_policy_revision{policy="edge-count",revision="held"} %d' % rev0 in m
    assert 'clsd_fleet_policy_revision{policy="edge-count",revision="asked"} %d' % rev in m
    assert 'clsd_fleet_policy_state{policy="edge-count",state="rolled-back"} 1' in m
    assert 'clsd_fleet_policy_interfaces{policy="edge-count",state="configured"} 1' in m


def test_abort_of_a_done_rollout_is_refused_and_names_rollback(fleet, bpf, workdir):
    h = fleet.host("h1")
    p = count_policy(bpf, prio=12)
    p["rollout"] = rollout([1], hold=0.5)
    rev = fleet.apply(p, workdir)
    wait_for(lambda: plan(fleet)["state"]["state"] == "done", timeout=15, what="done")
    err = fleet.ctl("fleet", "rollout", "abort", "edge-count", check=1).stderr
    assert err == ("clsctl: rollout %s of edge-count is done: revision %d is committed on its nodes; "
                   "'clsctl fleet rollback edge-count' applies the revision before it again\n" % (plan(fleet)["rollout"], rev))
    assert plan(fleet)["state"]["state"] == "done" and h.prefs() == [12]


def test_a_same_order_conflict_is_never_configured_nor_healthy(fleet, bpf, workdir):
    """Two fleet policies of one order on va's ingress: neither is attached, and every view says conflict
    (fleet status and its exit, the host's policies, metrics); a third rolled out in waves into the same
    conflict fails at its canary ("health: va: conflict"), halts, and is attached nowhere."""
    hosts = [fleet.host("h%d" % i) for i in range(1, 3)]
    fleet.apply(count_policy(bpf, name="a", prio=20), workdir)
    fleet.apply(count_policy(bpf, name="b", prio=21), workdir)
    wait_for(lambda: [r["state"] for r in fleet.status().values()] == ["conflict"] * 4, timeout=15,
             what="four rows in conflict: %s" % fleet.status())
    for r in fleet.status().values():
        assert [i["state"] for i in r["interfaces"]] == ["conflict"] and "a and b" in r["interfaces"][0]["with"], r
    p = fleet.ctl("fleet", "status", check=1)
    assert "1 (1 conflict)" in p.stdout and "in conflict" in p.stderr, (p.stdout, p.stderr)
    for h in hosts:
        assert h.prefs() == [], h.name
        pol = {x["name"]: x for x in h.clsd.api.get("/policies").json["policies"]}
        assert pol["a"]["summary"]["configured"] == 0 and pol["a"]["summary"]["conflict"] == 1, pol["a"]
    c = count_policy(bpf, name="c", prio=22)
    c["rollout"] = rollout([1, "100%"], hold=1)
    fleet.apply(c, workdir)
    wait_for(lambda: plan(fleet, "c")["state"]["state"] == "halted", timeout=20, what="c halted")
    st = plan(fleet, "c")
    assert st["waves"][0][0]["step"] == "failed" and "conflict" in st["waves"][0][0]["why"], st
    assert all(h.prefs() == [] for h in hosts)


def test_a_rollout_over_no_node_is_done_and_a_node_that_gains_the_label_applies_it(fleet, bpf, workdir):
    """The checker's seed 141: every node relabelled out of a policy's selector, then a rollout of it: its
    plan has no wave, and its state stayed progressing for ever (no wave to judge), so a node that gained
    the label later, which waits for the rollout to be done, never applied it."""
    h = fleet.host("h1", role="core")
    p = count_policy(bpf, prio=12, labels={"role": "edge"})
    p["rollout"] = rollout([1, "100%"], hold=1)
    rev = fleet.apply(p, workdir)
    st = plan(fleet)
    assert st["waves"] == [] and st["state"]["state"] == "done", st
    assert "no node was selected" in st["state"]["why"]
    h.clsd.kill()
    h.labels = {"role": "edge"}
    h.start()
    fleet.wait_converged("edge-count", rev, {"h1"}, timeout=20)
    assert h.prefs() == [12]
