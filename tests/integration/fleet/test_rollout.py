"""Rollouts in waves on a real 3-member etcd and six clsd hosts in namespaces on a bridge (test_fleet.py's
cluster and hosts), traffic counted on each: waves in order, each after the one before held; a canary
whose program cuts its own uplink (etcd with it) goes back by itself and halts the rollout; a health
check that fails halts and rolls back; nodes and members killed mid-rollout; the operators' verbs; the
kernel gates; the history."""
import json
import os
import threading
import time

from harness.base import run, wait_for
from harness.etcd import count_policy
from harness.observe import udp_stream


HOLD = 2
CONFIRM = 3


def rollout(waves, hold=HOLD, confirm=CONFIRM, **more):
    return dict({"waves": waves, "hold": "%gs" % hold, "confirm": "%gs" % confirm}, **more)


def six(fleet, zones=False, **labels):
    """Six hosts; with zones, h1-h3 in zone a and h4-h6 in zone b."""
    return [fleet.host("h%d" % i, **dict(labels, **({"zone": "a" if i <= 3 else "b"} if zones else {})))
            for i in range(1, 7)]


def plan_of(fleet, name):
    """The rollout's status as clsctl reads it: its state and its waves of nodes."""
    return fleet.ctl_json("fleet", "rollout", "status", name)


def wait_plan(fleet, name, timeout=10):
    out = {}

    def planned():
        p = fleet.ctl("--json", "fleet", "rollout", "status", name, check=None)
        if p.returncode == 0:
            out.update(json.loads(p.stdout))
            return True
        return False
    wait_for(planned, timeout=timeout, interval=0.1, what="the rollout of %s planned" % name)
    return out


def waves_of(status):
    return [[n["node"] for n in w] for w in status["waves"]]


class Watcher:
    """When each host's filter on dev came (a thread polling every host's filters)."""

    def __init__(self, hosts, dev="va", prefs=None):
        self.hosts, self.dev, self.prefs = hosts, dev, prefs
        self.came = {}
        self.errors = []
        self.stop = threading.Event()
        self.t = threading.Thread(target=self.loop, daemon=True)
        self.t.start()

    def loop(self):
        while not self.stop.is_set():
            for h in self.hosts:
                if h.name not in self.came:
                    try:
                        p = h.prefs(self.dev)
                    except Exception as e:  # a namespace read while it changes: the next turn
                        self.errors.append(repr(e))
                        continue
                    if p and (self.prefs is None or p == self.prefs):
                        self.came[h.name] = time.monotonic()
            time.sleep(0.05)

    def done(self, wait=5):
        """When each came; the ones that have not, given wait seconds more."""
        deadline = time.monotonic() + wait
        while len(self.came) < len(self.hosts) and time.monotonic() < deadline:
            time.sleep(0.1)
        self.stop.set()
        self.t.join(timeout=5)
        return self.came


def test_waves_go_in_order_each_after_the_one_before_held(fleet, bpf, workdir):
    hosts = six(fleet, zones=True, role="edge")
    rev0 = fleet.apply(count_policy(bpf), workdir)
    fleet.wait_converged("edge-count", rev0, {h.name for h in hosts})
    w = Watcher(hosts, prefs=[12])
    t0 = time.monotonic()
    p = count_policy(bpf, prio=12)
    p["rollout"] = rollout([1, "50%", "100%"], spread="zone")
    rev = fleet.apply(p, workdir)
    st = wait_plan(fleet, "edge-count")
    waves = waves_of(st)
    assert [len(x) for x in waves] == [1, 2, 3], waves
    assert sorted(sum(waves, [])) == sorted(h.name for h in hosts)
    fleet.wait_converged("edge-count", rev, {h.name for h in hosts}, timeout=60)
    came = w.done()
    total = time.monotonic() - t0
    wait_for(lambda: plan_of(fleet, "edge-count")["state"]["state"] == "done", timeout=20, what="rollout done")
    # each wave after the one before held: its first node came at least HOLD after the last of the wave before
    for k in range(1, 3):
        last_before = max(came[n] for n in waves[k - 1])
        first = min(came[n] for n in waves[k])
        assert first - last_before >= HOLD * 0.9, (k, first - last_before, came)
    # spread over the label's values: the second wave covers both zones, the canary's zone first taken
    zone = {h.name: h.labels["zone"] for h in hosts}
    assert {zone[n] for n in waves[1]} == {"a", "b"}, waves
    assert zone[waves[1][0]] != zone[waves[0][0]], waves
    # about the holds plus the apply of each wave (3 waves: 3 holds)
    assert total < 3 * HOLD + 12, total
    for h in hosts:
        assert h.prefs() == [12] and h.send(3) == 3
    st = plan_of(fleet, "edge-count")
    assert all(n["step"] == "healthy" for wv in st["waves"] for n in wv), st
    # each node says where it is: status, /metrics, and the history
    row = fleet.status("edge-count")[("h1", "edge-count")]
    assert row["state"] == "applied" and row["rollout"]["state"] == "done"
    m = hosts[0].clsd.api.get("/metrics").body.decode()
    assert 'clsd_fleet_rollout_state{policy="edge-count",rollout="%s",state="done",step="healthy"} 1' % st["rollout"] in m
    hist = fleet.ctl_json("fleet", "history", "edge-count")
    assert [h["_revision"] for h in hist] == [rev0, rev] and hist[1]["_outcome"]["state"] == "done"
    assert hist[0]["summary"] == "new policy" and "ingress c: priority" in hist[1]["summary"]


def uplink_drop_policy(bpf, rollout_spec):
    """A program that passes the verifier and drops everything, on each node's uplink (up0): etcd's
    traffic with the rest."""
    return {"name": "cut", "match": {"ifname": ["up0"]},
            "ingress": [{"name": "cut", "object": bpf.drop_all, "priority": 30}], "rollout": rollout_spec}


def test_a_canary_that_cuts_its_own_uplink_goes_back_by_itself_and_halts_the_rollout(fleet, bpf, workdir):
    hosts = six(fleet)
    w = Watcher(hosts, dev="up0")
    rev = fleet.apply(uplink_drop_policy(bpf, rollout([1, "50%", "100%"], hold=HOLD, confirm=CONFIRM)), workdir)
    st = wait_plan(fleet, "cut")
    canary = fleet.hosts[waves_of(st)[0][0]]
    # the canary attaches the program, loses etcd (its own uplink drops it), and goes back by itself
    wait_for(lambda: canary.name in w.came, timeout=15, what="the canary attached the program")
    t_cut = w.came[canary.name]
    wait_for(lambda: canary.prefs("up0") == [], timeout=CONFIRM + 5, interval=0.05, what="the canary went back")
    back = time.monotonic() - t_cut
    assert back < CONFIRM + 1.5, back  # confirm, and a second (the loop's and this poll's)
    # its traffic flows again: etcd reachable from it
    wait_for(lambda: run(canary.ns.argv("curl", "-sf", "-m", "1", fleet.cluster.urls().split(",")[0] + "/health"),
                         check=False).returncode == 0, timeout=5, what="the canary reaching etcd again")
    # the rollout halts on the canary's word, and no node of a later wave ever attached the program
    wait_for(lambda: plan_of(fleet, "cut")["state"]["state"] == "halted", timeout=20, what="the rollout halted")
    time.sleep(HOLD + 1)
    came = w.done(wait=0)
    assert set(came) == {canary.name}, came
    st = plan_of(fleet, "cut")
    assert "wave 1" in st["state"]["why"] and st["waves"][0][0]["step"] == "failed"
    assert "reverted" in st["waves"][0][0].get("why", ""), st
    row = fleet.status("cut")[(canary.name, "cut")]
    assert row["state"] == "reverted" and "etcd out of reach" in row["error"], row
    for h in hosts:
        assert h.prefs("up0") == []
    m = canary.clsd.api.get("/metrics").body.decode()
    assert "clsd_fleet_reverts_total 1" in m
    assert "reverted: etcd out of reach" in canary.clsd.log_this_run()
    hist = fleet.ctl_json("fleet", "history", "cut")
    assert hist[-1]["_revision"] == rev and hist[-1]["_outcome"]["state"] == "halted"
    assert "unhealthy" in hist[-1]["_outcome"]["why"]
    table = fleet.ctl("fleet", "history", "cut").stdout
    assert "halted: wave 1" in table, table


def dropper_policy(bpf, rollout_spec, max_rate):
    """drop-port on va (port 9 dropped, counted in its map "dropped", a metric "drops"), with a health
    check over it: at most max_rate drops a second on each node."""
    return {"name": "edge-count", "match": {"ifname": ["va"]},
            "ingress": [{"name": "d", "object": bpf.drop_port, "priority": 20,
                         "metrics": [{"map": "dropped", "name": "drops", "type": "counter"}]}],
            "health": [{"metric": "drops", "max_rate": max_rate}], "rollout": rollout_spec}


def test_a_failed_health_check_halts_at_the_canary_and_rolls_it_back(fleet, bpf, workdir):
    hosts = six(fleet)
    rev0 = fleet.apply(count_policy(bpf), workdir)
    fleet.wait_converged("edge-count", rev0, {h.name for h in hosts}, timeout=30)  # six ASan clsds loading
    w = Watcher(hosts, prefs=[20])
    rev = fleet.apply(dropper_policy(bpf, rollout([1, "100%"], hold=3), max_rate=2), workdir)
    canary = fleet.hosts[waves_of(wait_plan(fleet, "edge-count"))[0][0]]
    # from now on the canary is sent 50 datagrams a second for port 9: once it has applied the dropper,
    # its hold sees them dropped, past max_rate, however late this test looks (a busy machine)
    with udp_stream(canary.peer, canary.ns, canary.addr, {9: 10}, pause=0.2, timeout=0.2):
        wait_for(lambda: canary.name in w.came, timeout=15, what="the canary applied the new revision")
        wait_for(lambda: plan_of(fleet, "edge-count")["state"]["state"] == "halted", timeout=15,
                 what="halted")
    st = plan_of(fleet, "edge-count")
    assert st["waves"][0][0]["step"] == "failed" and "drops at" in st["waves"][0][0]["why"], st
    assert "above its max_rate 2/s" in st["waves"][0][0]["why"]
    # the canary is back on the revision before (count, pref 10), and counts again
    wait_for(lambda: canary.prefs() == [10], timeout=10, what="the canary rolled back")
    assert canary.send(5) == 5
    came = w.done(wait=0)
    assert set(came) == {canary.name}, came
    for h in hosts:
        assert h.prefs() == [10], h.name
    row = fleet.row_when(canary.name, "rolled-back")
    # asked for rev, holding (and committed to) rev0, whose filter tc shows
    assert row["asked_revision"] == rev, row
    assert row["held_revision"] == rev0 and row["committed_revision"] == rev0, row
    assert [i["state"] for i in row["interfaces"]] == ["configured"], row
    m = canary.clsd.api.get("/metrics").body.decode()
    assert "clsd_fleet_rollbacks_total 1" in m and "clsd_fleet_reverts_total 0" in m
    other = [h for h in hosts if h is not canary][0]
    # a node whose wave never came says the rollout halted, and why
    row = fleet.row_when(other.name, "halted")
    assert "wave 1" in row["error"], row


def test_pause_resume_promote_abort_and_rollback_to_an_old_revision(fleet, bpf, workdir):
    hosts = six(fleet)
    rev0 = fleet.apply(count_policy(bpf), workdir)
    fleet.wait_converged("edge-count", rev0, {h.name for h in hosts})
    p = count_policy(bpf, prio=12)
    p["rollout"] = rollout([1, 2, "100%"], hold=2)
    rev1 = fleet.apply(p, workdir)
    waves = waves_of(wait_plan(fleet, "edge-count"))
    canary = fleet.hosts[waves[0][0]]
    wait_for(lambda: canary.prefs() == [12], timeout=10, what="the canary applied")
    # paused: the next wave does not start, however long the hold is over
    out = fleet.ctl("fleet", "rollout", "pause", "edge-count").stdout
    assert "paused" in out
    assert fleet.ctl("fleet", "rollout", "pause", "edge-count", check=1).stderr.startswith(
        "clsctl: rollout %s of edge-count is paused: only a progressing one pauses" % plan_of(fleet, "edge-count")["rollout"])
    time.sleep(2 * 2 + 1)
    assert all(fleet.hosts[n].prefs() == [10] for n in waves[1] + waves[2])
    assert plan_of(fleet, "edge-count")["state"]["state"] == "paused"
    # resumed: it goes on; promoted: every wave now, the holds skipped
    fleet.ctl("fleet", "rollout", "resume", "edge-count")
    wait_for(lambda: all(fleet.hosts[n].prefs() == [12] for n in waves[1]), timeout=10, what="wave 2 applied")
    t = time.monotonic()
    assert "promoted" in fleet.ctl("fleet", "rollout", "promote", "edge-count").stdout
    fleet.wait_converged("edge-count", rev1, {h.name for h in hosts}, timeout=10)
    assert time.monotonic() - t < 2 * 2, "promote skips the holds"
    wait_for(lambda: plan_of(fleet, "edge-count")["state"]["state"] == "done", timeout=10, what="done")
    # another revision, aborted after its canary: every node that applied it goes back
    p = count_policy(bpf, prio=14)
    p["rollout"] = rollout([1, "100%"], hold=30)
    rev2 = fleet.apply(p, workdir)
    canary2 = fleet.hosts[waves_of(wait_plan(fleet, "edge-count"))[0][0]]
    wait_for(lambda: canary2.prefs() == [14], timeout=10, what="the canary applied revision %d" % rev2)
    fleet.ctl("fleet", "rollout", "abort", "edge-count")
    wait_for(lambda: canary2.prefs() == [12], timeout=10, what="the canary back on revision %d" % rev1)
    st = plan_of(fleet, "edge-count")
    assert st["state"]["state"] == "aborted" and "aborted by" in st["state"]["why"]
    assert all(h.prefs() == [12] for h in hosts)
    # rollback --to the first revision: applied again as a new one, at once (it had no rollout)
    out = fleet.ctl_json("fleet", "rollback", "edge-count", "--to", str(rev0))
    assert out["from"] == rev0 and out["rollout"] is None
    fleet.wait_converged("edge-count", out["revision"], {h.name for h in hosts}, timeout=10)
    assert all(h.prefs() == [10] for h in hosts)
    hist = fleet.ctl_json("fleet", "history", "edge-count")
    assert [h["_revision"] for h in hist] == [rev0, rev1, rev2, out["revision"]]
    assert hist[-1]["summary"].startswith("rollback to revision %d" % rev0)
    assert [h.get("_outcome", {}).get("state") for h in hist] == [None, "done", "aborted", None]
    # rollback without --to: the revision before the current one (rev2's policy, with its rollout)
    out = fleet.ctl_json("fleet", "rollback", "edge-count")
    assert out["from"] == rev2 and out["rollout"]
    assert fleet.ctl("fleet", "rollback", "edge-count", "--to", "1", check=1).stderr.startswith(
        "clsctl: fleet policy edge-count: no revision 1 in its history")
    assert fleet.ctl("fleet", "rollout", "explode", "edge-count", check=1).returncode == 1
    assert fleet.ctl("fleet", "ls", "--waves", "1", check=2).stderr.startswith("clsctl: --waves is for 'fleet apply' only\n")
    assert fleet.ctl("fleet", "apply", "--waves", "5,5", "x.json", check=2).stderr.startswith(
        "clsctl: rollout.waves[1]: each wave reaches more nodes")


def test_kernel_gates_leave_a_node_out_and_say_so(fleet, bpf, workdir):
    hosts = six(fleet)
    p = count_policy(bpf)
    p["nodes"] = {"kernel": ">=99.0"}
    fleet.apply(p, workdir)
    wait_for(lambda: len(fleet.status("edge-count")) == 6 and all(
        r["state"] == "ineligible" for r in fleet.status("edge-count").values()), timeout=10, what="ineligible")
    row = fleet.status("edge-count")[("h1", "edge-count")]
    assert row["error"] == "kernel %s is not >=99.0" % os.uname().release, row
    assert all(h.prefs() == [] for h in hosts)
    # a rollout's plan leaves them out, and says why
    p["rollout"] = rollout([1, "100%"])
    p["nodes"] = {"features": ["act_bpf"]}  # this kernel has no act_bpf (Debian's 6.1 has)
    fleet.apply(p, workdir)
    st = wait_plan(fleet, "edge-count")
    assert st["waves"] == [] and {x["node"] for x in st["excluded"]} == {h.name for h in hosts}
    assert st["excluded"][0]["why"] == "this kernel has no act_bpf"
    # a gate every node meets: every node, as any selector
    p["nodes"] = {"kernel": ">=%s" % ".".join(os.uname().release.split(".")[:2]), "features": ["tcx"]}
    del p["rollout"]
    rev = fleet.apply(p, workdir)
    fleet.wait_converged("edge-count", rev, {h.name for h in hosts})
    bad = count_policy(bpf, name="bad")
    bad["nodes"] = {"kernel": "6.6"}
    path = os.path.join(workdir, "bad.json")
    with open(path, "w") as f:
        json.dump(bad, f)
    assert "nodes.kernel: a comparison and a version" in fleet.ctl("fleet", "apply", path, check=1).stderr
    # a health check over a metric the policy does not declare would be no gate at all: refused
    typo = dropper_policy(bpf, rollout([1]), max_rate=2)
    typo["health"][0]["metric"] = "drps"
    with open(path, "w") as f:
        json.dump(typo, f)
    assert fleet.ctl("fleet", "apply", path, check=1).stderr == (
        "clsctl: %s: health[0].metric: the policy's filters have no metric drps (their \"metrics\": "
        "[{\"name\": …}])\n" % path)


def test_kills_mid_rollout_go_on_or_halt_safely_and_no_wave_is_skipped(fleet, bpf, workdir):
    """Nothing drives a rollout but the nodes and etcd: clsctl is gone once it wrote the policy (there is
    no process of its to kill); a node killed with -9 and restarted, another killed before its wave came,
    an etcd member stopped: the rollout goes on, and each wave begins only after the one before held."""
    hosts = six(fleet)
    rev0 = fleet.apply(count_policy(bpf), workdir)
    fleet.wait_converged("edge-count", rev0, {h.name for h in hosts})
    w = Watcher(hosts, prefs=[12])
    p = count_policy(bpf, prio=12)
    # confirm longer than the cluster takes to elect another leader (a node out of reach that long goes
    # back: that is the point, and would halt the rollout safely; here it is to go on)
    p["rollout"] = rollout([1, 2, "100%"], hold=HOLD, confirm=10)
    rev = fleet.apply(p, workdir)
    waves = waves_of(wait_plan(fleet, "edge-count"))
    assert [len(x) for x in waves] == [1, 1, 4], waves
    canary, second, late = (fleet.hosts[waves[0][0]], fleet.hosts[waves[1][0]], fleet.hosts[waves[2][0]])
    wait_for(lambda: canary.name in w.came, timeout=10, what="the canary applied")
    fleet.cluster.stop_member(0)  # the endpoint every node tries first
    late.clsd.kill()  # before its wave
    wait_for(lambda: second.name in w.came, timeout=20, what="wave 2 applied")
    second.clsd.kill()  # during its hold
    time.sleep(0.5)
    second.start()
    late.start()
    fleet.wait_converged("edge-count", rev, {h.name for h in hosts}, timeout=60)
    wait_for(lambda: plan_of(fleet, "edge-count")["state"]["state"] == "done", timeout=30, what="rollout done")
    came = w.done()
    # no wave skipped: each began after the one before had held (its last node's attach plus the hold)
    for k in range(1, 3):
        assert min(came[n] for n in waves[k]) - max(came[n] for n in waves[k - 1]) >= HOLD * 0.9, (k, came)
    for h in hosts:
        assert h.prefs() == [12] and h.send(2) == 2
    # the second's restart kept what it would go back to, and its hold began again
    assert "applied (wave 2)" in second.clsd.log_this_run()


def test_a_confirm_shorter_than_the_keepalive_does_not_send_a_healthy_node_back(fleet, bpf, workdir, bus):  # noqa: F811
    """The lease's keepalive comes a third of the lease apart (1 s here); a dead-man switch of 1 s would
    go off between two of them on a node that is fine, but for the node's own pings while it is armed.
    D-Bus shows h1's part in the rollout."""
    hosts = [fleet.host("h1", env={"DBUS_SYSTEM_BUS_ADDRESS": bus.address})] + [fleet.host("h%d" % i) for i in (2, 3)]
    rev0 = fleet.apply(count_policy(bpf), workdir)
    fleet.wait_converged("edge-count", rev0, {h.name for h in hosts})
    p = count_policy(bpf, prio=12)
    p["rollout"] = rollout([1, "100%"], hold=3, confirm=1)
    rev = fleet.apply(p, workdir)
    fleet.wait_converged("edge-count", rev, {h.name for h in hosts}, timeout=30)
    wait_for(lambda: plan_of(fleet, "edge-count")["state"]["state"] == "done", timeout=20, what="rollout done")
    for h in hosts:
        assert h.prefs() == [12]
        assert "clsd_fleet_reverts_total 0" in h.clsd.api.get("/metrics").body.decode(), h.name
    st = plan_of(fleet, "edge-count")
    wave = 1 + [i for i, w in enumerate(waves_of(st)) if "h1" in w][0]
    # (policy, rollout, its state, this node's step, this node's wave, the current wave, the waves, why)
    wait_for(lambda: bus.prop("FleetRollouts") == [["edge-count", st["rollout"], "done", "healthy", wave, 2, 2, ""]],
             timeout=5, what="D-Bus's FleetRollouts: %s" % bus.prop("FleetRollouts"))
    # (policy, state, asked, held, committed, interfaces configured, pending, failed, conflict, overridden, why)
    wait_for(lambda: bus.prop("FleetPolicies") == [["edge-count", "applied", rev, rev, rev, 1, 0, 0, 0, 0, ""]],
             timeout=5, what="D-Bus's FleetPolicies: %s" % bus.prop("FleetPolicies"))
    path = os.path.join(workdir, "short.json")
    p["rollout"]["confirm"] = "500ms"
    with open(path, "w") as f:
        json.dump(p, f)
    assert "rollout.confirm: 0 (no dead-man switch) or at least 1s" in fleet.ctl("fleet", "apply", path, check=1).stderr


def etcd_keys(fleet, sub):
    out = fleet.cluster.etcdctl("get", "--prefix", "--keys-only", fleet.prefix + sub).stdout
    return [k for k in out.split() if k]


def test_the_history_keeps_the_last_revisions_and_rm_keeps_what_each_rollout_came_to(fleet, bpf, workdir):
    """etcd's keys do not grow with every apply: the history keeps a policy's last 32 entries (their
    rollouts' keys go with the older ones). Applies in a quick row supersede each other, and the history
    says so; fleet rm is an entry of its own (who, when) and changes no earlier entry: what each rollout
    came to stays as it was; a rollback brings the policy back."""
    h = fleet.host("h1")
    p = count_policy(bpf)
    p["rollout"] = rollout([1], hold=0, confirm=0)
    revs = []
    for i in range(34):
        p["ingress"][0]["priority"] = 10 + i % 3
        revs.append(fleet.apply(p, workdir))
    hist = fleet.ctl_json("fleet", "history", "edge-count")
    assert [x["_revision"] for x in hist] == revs[-32:]
    ids = {k.split("/")[-2] for k in etcd_keys(fleet, "rollouts/edge-count/")}
    assert ids <= {x["id"] for x in hist}, (len(ids), len(hist))
    fleet.wait_converged("edge-count", revs[-1], {"h1"}, timeout=20)
    wait_for(lambda: plan_of(fleet, "edge-count")["state"]["state"] == "done", timeout=10, what="the last one done")
    assert h.prefs() == [10 + 33 % 3]
    hist = fleet.ctl_json("fleet", "history", "edge-count")
    # each one that came before another was done or superseded by the next: none "halted" for it
    for x, nxt in zip(hist, hist[1:]):
        o = x["_outcome"]
        assert o["state"] in ("done", "superseded"), x
        if o["state"] == "superseded":
            assert o["superseded_by_revision"] == nxt["_revision"], (x, nxt)
    assert hist[-1]["_outcome"]["state"] == "done"
    table = fleet.ctl("fleet", "history", "edge-count").stdout
    assert "superseded by revision %d" % revs[-1] in table or hist[-2]["_outcome"]["state"] == "done", table
    fleet.ctl("fleet", "rm", "edge-count")
    wait_for(lambda: h.prefs() == [], timeout=10, what="the policy gone from h1")
    wait_for(lambda: etcd_keys(fleet, "rollout-nodes/edge-count/") == [], timeout=5, what="the steps gone")
    after = fleet.ctl_json("fleet", "history", "edge-count")
    # the removal is listed (the oldest entry went to make room), and no earlier entry changed
    assert [x["_revision"] for x in after[:-1]] == revs[-31:]
    assert after[-1]["removed"] is True and after[-1]["by"] and after[-1]["summary"] == "removed"
    assert after[:-1] == hist[1:], "an entry changed after its rollout ended"
    assert "removed" in fleet.ctl("fleet", "history", "edge-count").stdout.splitlines()[-1]
    out = fleet.ctl_json("fleet", "rollback", "edge-count", "--to", str(revs[-2]))
    fleet.wait_converged("edge-count", out["revision"], {"h1"}, timeout=20)
    assert h.prefs() == [10 + 32 % 3]
    # without --to after a removal: the last revision the history holds (not the removal)
    assert fleet.ctl_json("fleet", "history", "edge-count")[-1]["summary"].startswith("rollback to revision")
