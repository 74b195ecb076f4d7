"""A checker of the fleet's truth (tests/integration/fleet/test_fleet_truth.py runs a few seeds, bench/fleet-truth
many): four clsd nodes and a real etcd, a seeded random schedule of operations and faults, and after each
step, once the fleet is quiet, invariants checked against what each node's kernel holds (tc in its
namespace), not against what clsd says of itself. Model-based, as Jepsen's checkers and etcd's own
robustness tests are: the schedule is random, the invariants are fixed.

What the checker knows of each revision of the policy "p" it applied: the priority its one filter has
(unique to that apply, or the one of the revision a rollback applied again), the interface it matches (va,
the peer link, or up0, the uplink: "cut", a program that passes the verifier and drops everything, etcd's
traffic with it), and its rollout's id. The kernel says which filter of p a node has: so which revision.

The invariants, after each step:
  I1 the status row of every live node a policy selects names the revision whose filter the kernel holds
     (held_revision), with one interface, in the state the kernel shows (configured: the filter is there;
     conflict: neither policy's filter is), and a node it does not select holds none of it;
  I2 at rest, no row is behind etcd (every node read the current revision);
  I3 no node holds a revision that no wave of its rollout confirmed, once that rollout ended (halted,
     aborted, superseded), and what a node says it committed is a revision it committed (applied at once,
     or its wave confirmed);
  I4 a history entry never changes once its rollout ended;
  I5 the desired state converges: with the current rollout done (or none), every selected node holds the
     current revision; with it halted or aborted, every node holds what it committed.
"""
import base64
import json
import os
import random
import time


NODES = 4
HOLD = "1s"
CONFIRM = "2s"
QUIET_TIMEOUT = 90  # a wave's time is hold + confirm + 30 s: a dead node's wave ends by then
ENDED = ("done", "halted", "aborted", "superseded")


class Violation(AssertionError):
    pass


class Truth:
    def __init__(self, fleet, bpf, workdir, seed, log=print):
        self.fleet, self.bpf, self.workdir, self.seed = fleet, bpf, workdir, seed
        self.rng = random.Random(seed)
        self.log = log
        self.prio = 100
        self.revs = {}  # revision -> {"prio", "dev", "rollout" (id or None), "kind"}
        self.q_revs = {}  # the conflicting policy q: revision -> prio
        self.q_present = False
        self.member_down = None
        self.history_seen = {}  # id -> the entry as first seen ended
        self.steps = []
        self.hosts = []

    # ---- the fleet ----

    def start(self):
        for i in range(1, NODES + 1):
            self.hosts.append(self.fleet.host("h%d" % i, role="edge"))
        self.labels = {h.name: "edge" for h in self.hosts}

    def selected(self):
        return [h for h in self.hosts if self.labels[h.name] == "edge"]

    # ---- what the checker applies ----

    def envelope(self, kind, rollout):
        self.prio += 1
        dev = "up0" if kind == "cut" else "va"
        obj = self.bpf.drop_all if kind == "cut" else self.bpf.count
        p = {"name": "p", "nodes": {"labels": {"role": "edge"}}, "match": {"ifname": [dev]},
             "ingress": [{"name": "p", "object": obj, "priority": self.prio,
                          "metrics": [{"map": "counters", "name": "pkts", "type": "counter"}]}]}
        if kind == "cut":
            p["ingress"][0].pop("metrics")
        if rollout:
            p["rollout"] = {"waves": self.rng.choice([[1, "100%"], [1, 2, "100%"]]), "hold": HOLD,
                            "confirm": CONFIRM}
        if kind == "unhealthy":  # a rate no node meets: its hold fails the check
            p["health"] = [{"metric": "pkts", "min_rate": 1000000}]
        return p

    def apply(self, kind=None):
        kind = kind or self.rng.choice(["count", "count", "count", "unhealthy", "cut"])
        rollout = kind != "count" or self.rng.random() < 0.6
        env = self.envelope(kind, rollout)
        path = os.path.join(self.workdir, "p.json")
        with open(path, "w") as f:
            json.dump(env, f)
        out = self.fleet.ctl_json("fleet", "apply", path)
        self.revs[out["revision"]] = {"prio": env["ingress"][0]["priority"], "dev": env["match"]["ifname"][0],
                                      "rollout": out["rollout"], "kind": kind}
        return "apply %s%s -> %d" % (kind, " in waves" if rollout else " at once", out["revision"])

    def rollback(self, to=None):
        hist = [x for x in self.fleet.ctl_json("fleet", "history", "p", check=None) or [] if "envelope" in x]
        if not hist:
            return "rollback: no history"
        args = ("--to", str(self.rng.choice(hist)["_revision"])) if to else ()
        p = self.fleet.ctl("--json", "fleet", "rollback", "p", *args, check=None)
        if p.returncode != 0:
            return "rollback%s: %s" % (" --to" if to else "", p.stderr.strip())
        out = json.loads(p.stdout)
        src = self.revs[out["from"]]
        self.revs[out["revision"]] = dict(src, rollout=out["rollout"])
        return "rollback %s -> %d (from %d)" % ("--to" if to else "", out["revision"], out["from"])

    def verb(self, action):
        p = self.fleet.ctl("fleet", "rollout", action, "p", check=None)
        return "rollout %s: %s" % (action, (p.stdout or p.stderr).strip().splitlines()[0] if (p.stdout or p.stderr) else p.returncode)

    def rm(self):
        p = self.fleet.ctl("fleet", "rm", "p", check=None)
        return "rm: %s" % (p.stdout or p.stderr).strip()

    def conflict(self):
        """q: a policy of the same order on va's ingress, at once; a second toggle removes it."""
        if self.q_present:
            self.fleet.ctl("fleet", "rm", "q")
            self.q_present = False
            return "q removed"
        self.prio += 1
        q = {"name": "q", "nodes": {"labels": {"role": "edge"}}, "match": {"ifname": ["va"]},
             "ingress": [{"name": "q", "object": self.bpf.count, "priority": self.prio}]}
        path = os.path.join(self.workdir, "q.json")
        with open(path, "w") as f:
            json.dump(q, f)
        out = self.fleet.ctl_json("fleet", "apply", path)
        self.q_revs[out["revision"]] = self.prio
        self.q_present = True
        return "q applied (same order as p on va) -> %d" % out["revision"]

    def relabel(self):
        h = self.rng.choice(self.hosts)
        self.labels[h.name] = "core" if self.labels[h.name] == "edge" else "edge"
        h.clsd.kill()
        h.labels = {"role": self.labels[h.name]}
        h.start()
        return "%s restarted as role=%s" % (h.name, self.labels[h.name])

    def kill(self):
        h = self.rng.choice(self.hosts)
        h.clsd.kill()
        time.sleep(self.rng.choice([0, 0.5, 2]))
        h.start()
        return "%s killed (-9) and started again" % h.name

    def etcd_member(self):
        c = self.fleet.cluster
        if self.member_down is not None:
            c.start_member(self.member_down)
            c.wait_healthy([self.member_down])
            i, self.member_down = self.member_down, None
            return "etcd member e%d started" % (i + 1)
        self.member_down = self.rng.randrange(len(c.procs))
        c.stop_member(self.member_down)
        return "etcd member e%d stopped" % (self.member_down + 1)

    OPERATIONS = [  # (weight, name)
        (6, "apply"), (3, "apply_during"), (1, "pause"), (1, "resume"), (1, "promote"), (2, "abort"),
        (1, "rollback"), (1, "rollback_to"), (1, "rm"), (1, "relabel"), (2, "kill"), (1, "etcd"),
        (2, "conflict"), (2, "cut"), (1, "unhealthy"),
    ]

    def step(self):
        total = sum(w for w, _ in self.OPERATIONS)
        x = self.rng.uniform(0, total)
        for w, op in self.OPERATIONS:
            x -= w
            if x <= 0:
                break
        if op == "apply_during":  # a second apply while the first one's rollout goes on
            first = self.apply(self.rng.choice(["count", "unhealthy", "cut"]))
            time.sleep(self.rng.choice([0.2, 0.8, 1.5]))
            return first + "; then " + self.apply()
        if op in ("pause", "resume", "promote", "abort"):
            return self.verb(op)
        return {"apply": self.apply, "rollback": self.rollback, "rollback_to": lambda: self.rollback(to=True),
                "rm": self.rm, "relabel": self.relabel, "kill": self.kill, "etcd": self.etcd_member,
                "conflict": self.conflict, "cut": lambda: self.apply("cut"),
                "unhealthy": lambda: self.apply("unhealthy")}[op]()

    # ---- what etcd and the kernels say ----

    def etcd_prefix(self, sub):
        out = self.fleet.cluster.etcdctl("get", "--prefix", "-w", "json", self.fleet.prefix + sub).stdout
        kvs = json.loads(out).get("kvs", [])
        return {base64.b64decode(kv["key"]).decode(): (json.loads(base64.b64decode(kv["value"])),
                                                       int(kv["mod_revision"])) for kv in kvs}

    def current(self):
        """p's current revision in etcd (None: removed)."""
        out = self.etcd_prefix("policies/p")
        v = out.get(self.fleet.prefix + "policies/p")
        return v[1] if v else None

    def rollouts(self):
        """Every rollout of p: id -> {"plan", "state"}."""
        out = {}
        for key, (value, _) in self.etcd_prefix("rollouts/p/").items():
            rid, what = key.rsplit("/", 2)[-2:]
            out.setdefault(rid, {})[what] = value
        return out

    def kernel(self, h):
        """p's and q's filters on h: [(policy, dev, pref)]."""
        got = []
        for dev in ("va", "up0"):
            for f in h.ns.filters(dev):
                if f.name in ("clsd:p", "clsd:q"):
                    got.append((f.name[5:], dev, f.pref))
        return sorted(got)

    def status(self):
        p = self.fleet.ctl("--json", "fleet", "status", check=None)
        return {(r["node"], r["policy"]): r for r in json.loads(p.stdout or "[]") if r.get("node")}

    # ---- quiet, then the invariants ----

    def snapshot(self):
        rows = self.status()
        kern = {h.name: self.kernel(h) for h in self.hosts if h.clsd.proc}
        ro = self.rollouts()
        cur = self.current()
        return rows, kern, ro, cur

    def quiet(self, snap):
        rows, kern, ro, cur = snap
        if cur is not None:
            rid = self.revs.get(cur, {}).get("rollout")
            state = (ro.get(rid, {}).get("state") or {}).get("state", "progressing") if rid else None
            if rid and state not in ENDED + ("paused",):
                return False
        for (node, pol), r in rows.items():
            if r["state"] in ("pending", "behind", "no status"):
                return False
        live = {h.name for h in self.hosts if h.clsd.proc}
        selected = {h.name for h in self.selected() if h.clsd.proc}
        if cur is not None and {n for (n, pol) in rows if pol == "p"} != selected:
            return False  # a node not said yet (a restart, a new lease)
        return live == set(kern)

    def wait_quiet(self):
        deadline = time.monotonic() + QUIET_TIMEOUT
        last, stable_since = None, None
        while time.monotonic() < deadline:
            snap = self.snapshot()
            key = json.dumps([sorted([list(k), v] for k, v in snap[0].items()), snap[1], snap[3]], sort_keys=True)
            if self.quiet(snap):
                if key == last and time.monotonic() - stable_since >= 1.5:
                    return snap
                if key != last:
                    last, stable_since = key, time.monotonic()
            else:
                last = None
            time.sleep(0.3)
        raise Violation("the fleet was not quiet within %d s: rows %s, kernels %s" % (
            QUIET_TIMEOUT, json.dumps([[list(k), v] for k, v in snap[0].items()])[:3000], snap[1]))

    def committed_ok(self, node, rev, ro):
        """Whether node committed rev: applied at once, or its wave of rev's rollout confirmed (or done)."""
        info = self.revs.get(rev)
        if info is None:
            return False
        if not info["rollout"]:
            return True
        r = ro.get(info["rollout"])
        if r is None or "plan" not in r:
            return True  # pruned with the history's oldest entries: nothing left to judge it by
        state = r.get("state") or {"state": "progressing", "confirmed": 0}
        wave = next((i for i, w in enumerate(r["plan"]["waves"]) if node in w), None)
        return state["state"] == "done" or (wave is not None and state["confirmed"] > wave)

    def check(self, snap):
        rows, kern, ro, cur = snap
        for h in self.hosts:
            if not h.clsd.proc:
                continue
            k = kern[h.name]
            mine = [(d, pref) for pol, d, pref in k if pol == "p"]
            theirs = [(d, pref) for pol, d, pref in k if pol == "q"]
            row = rows.get((h.name, "p"))
            where = "%s: kernel %s, row %s" % (h.name, k, json.dumps(row, sort_keys=True)[:1500])
            if self.labels[h.name] != "edge" or cur is None:
                if mine:
                    raise Violation("I1 a node p does not select holds its filter: " + where)
                if row and cur is None:
                    raise Violation("I1 a status of a removed policy: " + where)
                continue
            if row is None:
                raise Violation("I1 no status row: " + where)
            if row["state"] == "behind":
                raise Violation("I2 a row behind etcd at rest: " + where)
            held = row.get("held_revision")
            conflict = self.q_present and held is not None and self.revs[held]["dev"] == "va"
            if held is None:
                if mine:
                    raise Violation("I1 the row holds nothing, the kernel has p's filter: " + where)
            else:
                info = self.revs[held]
                want = [] if conflict else [(info["dev"], info["prio"])]
                if mine != want:
                    raise Violation("I1 the row's held revision %d is not what the kernel holds: %s" % (held, where))
                ifaces = row.get("interfaces") or []
                states = [i["state"] for i in ifaces]
                if states != ["conflict" if conflict else "configured"]:
                    raise Violation("I1 interfaces %s, the kernel says %s: %s" % (
                        states, "conflict" if conflict else "configured", where))
                if conflict and row["state"] in ("applied", "overridden"):
                    raise Violation("I1 a conflict said %s: %s" % (row["state"], where))
                if conflict and theirs:
                    raise Violation("I1 q attached beside p in a conflict: " + where)
            # I3: what it holds and what it says it committed
            if held is not None:
                rid = self.revs[held]["rollout"]
                state = ((ro.get(rid) or {}).get("state") or {}).get("state") if rid else None
                if state in ("halted", "aborted", "superseded") and not self.committed_ok(h.name, held, ro):
                    raise Violation("I3 holds revision %d, which no wave confirmed for it, after its rollout "
                                    "ended %s: %s" % (held, state, where))
            committed = row.get("committed_revision")
            if committed is not None and not self.committed_ok(h.name, committed, ro):
                raise Violation("I3 says it committed %d, which it never did: %s" % (committed, where))
            # I5: converged on what it is to hold
            rid = self.revs.get(cur, {}).get("rollout")
            state = ((ro.get(rid) or {}).get("state") or {}).get("state") if rid else None
            if (not rid or state == "done") and held != cur and row["state"] != "failed":
                raise Violation("I5 current revision %d %s, the node holds %s: %s" % (
                    cur, state or "at once", held, where))
            if state in ("halted", "aborted") and held != committed:
                raise Violation("I5 rollout %s: the node holds %s, not what it committed (%s): %s" % (
                    state, held, committed, where))
        self.check_history()

    def check_history(self):
        p = self.fleet.ctl("--json", "fleet", "history", "p", check=None)
        if p.returncode != 0:
            return
        for x in json.loads(p.stdout):
            o = x.get("_outcome")
            if not o or o["state"] not in ENDED:
                continue
            key = (x["id"], x["_revision"])
            seen = self.history_seen.get(key)
            if seen is None:
                self.history_seen[key] = x
            elif seen != x:
                raise Violation("I4 a history entry changed after its rollout ended: was %s, now %s" % (
                    json.dumps(seen, sort_keys=True)[:800], json.dumps(x, sort_keys=True)[:800]))

    def run(self, n_steps):
        self.start()
        self.log("seed %d: %d nodes" % (self.seed, NODES))
        self.steps.append(self.apply("count"))
        self.check(self.wait_quiet())
        for i in range(n_steps):
            what = self.step()
            self.steps.append(what)
            self.log("seed %d step %d: %s" % (self.seed, i + 1, what))
            try:
                self.check(self.wait_quiet())
            except Violation as e:
                raise Violation("seed %d, after step %d (%s): %s\nschedule:\n  %s" % (
                    self.seed, i + 1, what, e, "\n  ".join(self.steps))) from None
        if self.member_down is not None:
            self.etcd_member()
        return len(self.steps)
