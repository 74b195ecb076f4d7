"""The fleet: a real 3-member etcd cluster and clsd hosts, each in network namespaces of its own, joined
by a bridge (198.18.200.0/24); every host has a veth pair to a peer that sends real traffic through the
filters fleet policies put there. clsctl fleet writes the policies and reads what each node says.

etcd's authentication is on, as a fleet of least privilege runs it: clsctl is etcd's root user, and
each host is the etcd user `clsctl fleet rbac NAME --apply` made for it (reads the fleet's intent,
writes only its own keys). bcrypt's cost (etcd --bcrypt-cost, an operator's choice) is etcd's lowest,
4, here: every clsctl run authenticates once.

etcd members: 198.18.200.1-3 (a namespace each); hosts: 198.18.200.11… Each test has a key prefix of
its own, so one cluster serves the module."""
import base64
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import pytest

from harness.base import CLSCTL, run, wait_for
from harness.etcd import (count_policy, ETCD, etcd_put_raw, etcd_raw, member_url, MEMBERS, ROOT_PASSWORD,
    SUBNET, TTL)
from harness.netns import netns_create, netns_destroy
from harness.objects import setup_keys, sign


def test_a_policy_lands_on_exactly_the_selected_hosts_and_a_host_that_gains_the_label_gets_it(fleet, bpf, workdir):
    h1 = fleet.host("h1", role="edge")
    h2 = fleet.host("h2", role="edge", zone="b")
    h3 = fleet.host("h3", role="core")
    h4 = fleet.host("h4")
    rev = fleet.apply(count_policy(bpf, labels={"role": "edge"}, names=["h4"]), workdir)
    fleet.wait_converged("edge-count", rev, {"h1", "h2", "h4"})
    for h in (h1, h2, h4):
        assert h.prefs() == [10], h.name
        assert h.send(7) == 7, h.name
    assert h3.prefs() == []
    nodes = {n["node"]: n for n in fleet.ctl_json("fleet", "nodes")}
    assert set(nodes) == {"h1", "h2", "h3", "h4"}
    assert nodes["h2"]["labels"] == {"role": "edge", "zone": "b"} and nodes["h1"]["revision"] >= rev
    assert nodes["h1"]["tcx"] is True and nodes["h1"]["kernel"] == os.uname().release
    # the object came from etcd, checked against its digest, into each host's own store
    assert "fetched from etcd" in h1.clsd.log_this_run()
    # h3 restarts as an edge host: it gets the policy too
    assert h3.clsd.stop() == 0
    h3.labels = {"role": "edge"}
    h3.start()
    fleet.wait_converged("edge-count", rev, {"h1", "h2", "h3", "h4"})
    assert h3.send(5) == 5
    # the policy, as every host holds it: read-only to the API
    r = h1.clsd.api.request("PUT", "/policies/edge-count", {"match": {"ifname": ["va"]}, "ingress": []})
    assert r.status == 409 and r.json["error"]["code"] == "fleet_owned"
    got = h1.clsd.api.get("/policies/edge-count").json
    assert got["fleet_revision"] == rev
    # a table for people
    table = fleet.ctl("fleet", "status").stdout
    assert table.splitlines()[0].split()[:3] == ["NODE", "POLICY", "STATE"] and table.count("applied") == 4
    # connected to one of the members (a loaded machine may have begun the stream again meanwhile: the
    # gauge says so while it lasts, and the log says why)
    def connected():
        m = h1.clsd.api.get("/metrics").body.decode()
        ok = any('clsd_fleet_connected{node="h1",endpoint="%s"} 1' % u in m for u in fleet.cluster.urls().split(","))
        return m if ok else None
    try:
        metrics = wait_for(connected, timeout=15, interval=0.2, what="clsd_fleet_connected 1 on h1")
    except AssertionError as e:
        said = [l for l in h1.clsd.log_this_run().splitlines() if "fleet:" in l and ("again" in l or "reconnect" in l)]
        raise AssertionError("%s; h1's fleet log: %s" % (e, said[-5:]))
    assert "clsd_fleet_policies 1" in metrics and "clsd_fleet_revision %d" % rev in metrics


def test_removed_and_unselected_policies_are_taken_away_and_their_status_goes(fleet, bpf, workdir):
    h1 = fleet.host("h1", role="edge")
    h2 = fleet.host("h2", role="edge")
    rev = fleet.apply(count_policy(bpf, labels={"role": "edge"}), workdir)
    fleet.wait_converged("edge-count", rev, {"h1", "h2"})
    # the selector narrows to h1: h2 takes its filter away
    rev = fleet.apply(count_policy(bpf, names=["h1"]), workdir)
    fleet.wait_converged("edge-count", rev, {"h1"})
    wait_for(lambda: h2.prefs() == [] and not h2.ns.has_clsact("va"), timeout=5, what="h2's filter gone")
    assert h1.prefs() == [10]
    fleet.ctl("fleet", "rm", "edge-count")
    wait_for(lambda: h1.prefs() == [], timeout=5, what="h1's filter gone")
    assert fleet.ctl("fleet", "rm", "edge-count", check=1).stderr.strip() == "clsctl: no fleet policy edge-count"
    wait_for(lambda: fleet.cluster.etcdctl("get", "--prefix", "--keys-only", fleet.prefix + "status/").stdout.split() == [],
             timeout=5, what="every status of the policy gone")
    assert h1.clsd.api.get("/policies").json["policies"] == []


def test_a_failing_policy_and_an_overridden_one_are_said_so(fleet, bpf, workdir):
    h1 = fleet.host("h1")
    h2 = fleet.host("h2")
    # h2 has a document of its own on va's ingress: the policy is overridden there, never dropped silently
    assert h2.clsd.api.put_classifier("va", {"ingress": [{"name": "own", "object": h2.clsd.api.upload_ok(bpf.count),
                                                          "priority": 20}]}).status == 200
    rev = fleet.apply(count_policy(bpf), workdir)
    wait_for(lambda: {k[0]: v["state"] for k, v in fleet.status("edge-count").items()} ==
             {"h1": "applied", "h2": "overridden"}, timeout=10, what="h1 applied, h2 overridden")
    row = fleet.status("edge-count")[("h2", "edge-count")]
    assert row["interfaces"][0]["ingress"] == "overridden" and row["interfaces"][0]["ingress_by"] == "document"
    # a program the object does not have: every node fails it, and says why; clsctl exits 1
    bad = count_policy(bpf, name="bad")
    bad["ingress"][0]["program"] = "no_such_program"
    rev_bad = fleet.apply(bad, workdir)
    # asked for rev_bad, holding none of it (and nothing of "bad" attached)
    wait_for(lambda: all(r["state"] == "failed" and r["asked_revision"] == rev_bad and r["held_revision"] is None
                         for r in fleet.status("bad").values()) and len(fleet.status("bad")) == 2,
             timeout=10, what="bad failed on both")
    p = fleet.ctl("fleet", "status", check=1)
    assert "no_such_program" in p.stdout and p.stderr.strip() == "clsctl: a node failed to apply a fleet policy"
    # the good policy is untouched by the bad one
    assert h1.prefs() == [10] and h1.send(3) == 3
    assert fleet.status("edge-count")[("h1", "edge-count")]["held_revision"] == rev


def test_one_member_killed_changes_still_converge(fleet, bpf, workdir):
    hosts = [fleet.host("h%d" % i) for i in range(1, 5)]
    rev = fleet.apply(count_policy(bpf), workdir)
    fleet.wait_converged("edge-count", rev, {h.name for h in hosts})
    fleet.cluster.stop_member(0)  # the endpoint every host tries first
    rev = fleet.apply(count_policy(bpf, prio=12), workdir)
    fleet.wait_converged("edge-count", rev, {h.name for h in hosts}, timeout=20)
    for h in hosts:
        assert h.prefs() == [12] and h.send(4) == 4


@pytest.mark.once
def test_etcd_down_for_30_s_hosts_keep_and_repair_their_filters_then_converge(fleet, bpf, workdir):
    hosts = [fleet.host("h%d" % i) for i in range(1, 5)]
    rev = fleet.apply(count_policy(bpf), workdir)
    fleet.wait_converged("edge-count", rev, {h.name for h in hosts})
    for i in range(MEMBERS):
        fleet.cluster.stop_member(i)
    t0 = time.monotonic()
    # every host keeps its filter, counts traffic, and repairs a foreign delete
    for h in hosts:
        assert h.send(3) == 3
    hosts[0].ns.run("tc", "filter", "del", "dev", "va", "ingress", "pref", "10")
    wait_for(lambda: hosts[0].prefs() == [10], timeout=5, what="the deleted filter repaired without etcd")
    assert hosts[0].send(2) == 2
    # a restart without etcd still has the fleet's policy (kept in the state directory)
    assert hosts[1].clsd.stop() == 0
    hosts[1].start()
    assert hosts[1].prefs() == [10] and "loaded program" not in hosts[1].clsd.log_this_run()
    m = hosts[1].clsd.api.get("/metrics").body.decode()
    assert "clsd_fleet_connected{" in m and "} 0" in m.split("clsd_fleet_connected{")[1].split("\n")[0]
    assert "clsd_fleet_revision %d" % rev in m
    time.sleep(max(0, 30 - (time.monotonic() - t0)))
    for h in hosts:
        assert h.prefs() == [10] and h.send(2) == 2, h.name
    for i in range(MEMBERS):
        fleet.cluster.start_member(i)
    fleet.cluster.wait_healthy()
    rev = fleet.apply(count_policy(bpf, prio=11), workdir)
    fleet.wait_converged("edge-count", rev, {h.name for h in hosts}, timeout=30)
    for h in hosts:
        assert h.prefs() == [11] and h.send(2) == 2


def test_a_partitioned_host_converges_after_healing_and_a_compaction_makes_it_list_again(fleet, bpf, workdir):
    h1 = fleet.host("h1")
    h2 = fleet.host("h2")
    rev = fleet.apply(count_policy(bpf), workdir)
    fleet.wait_converged("edge-count", rev, {"h1", "h2"})

    def h2_connected():
        m = h2.clsd.api.get("/metrics").body.decode()
        line = m.split("clsd_fleet_connected{")[1].split("\n")[0] if "clsd_fleet_connected{node=\"h2\"" in m else ""
        return line.endswith(" 1") if line else None
    # connected first (all its watches made: under ASan the last come late, and "not connected" before
    # the cut would say nothing of the cut), then cut off: its stream goes, its watch must resume later
    wait_for(lambda: h2_connected() is True, timeout=20, interval=0.2, what="h2 connected")
    h2.ns.run("ip", "link", "set", "up0", "down")
    wait_for(lambda: h2_connected() is False, timeout=20, interval=0.2, what="h2 sees etcd gone")
    # a short partition is what TCP is for: the node keeps its stream; this one lasts until the node
    # gives the connection up (a call unanswered, then no way to connect), so that its watch must resume
    wait_for(lambda: "reconnecting" in h2.clsd.log_this_run(), timeout=30, interval=0.2,
             what="h2 giving its connection up")
    for prio in (13, 14, 15):
        rev = fleet.apply(count_policy(bpf, prio=prio), workdir)
    wait_for(lambda: h1.prefs() == [15], timeout=10, what="h1 at the last change")
    assert h2.prefs() == [10] and h2.send(2) == 2  # partitioned: the last snapshot it applied holds
    # etcd forgets the history h2's watch would resume from
    fleet.cluster.etcdctl("compact", str(rev))
    h2.ns.run("ip", "link", "set", "up0", "up")
    fleet.wait_converged("edge-count", rev, {"h1", "h2"}, timeout=30)
    assert h2.prefs() == [15] and h2.send(3) == 3
    assert "fell behind a compaction" in h2.clsd.log_this_run()


def test_a_host_killed_in_the_middle_of_applying_converges_after_restart(fleet, bpf, workdir):
    h1 = fleet.host("h1")
    names = ["m%d" % i for i in range(100)]
    h1.ns.run("ip", "-batch", "-", input="".join("link add %s type veth peer name n%s\n" % (n, n[1:]) for n in names))
    policy = count_policy(bpf)
    policy["match"] = {"ifname": ["va", "m*"]}
    rev = fleet.apply(policy, workdir)
    wait_for(lambda: "policy edge-count: generation" in h1.clsd.log_this_run(), timeout=10, interval=0.002,
             what="h1 applying")
    h1.clsd.proc.send_signal(signal.SIGKILL)
    h1.clsd.proc.wait()
    h1.clsd.proc = None
    h1.start()
    fleet.wait_converged("edge-count", rev, {"h1"}, timeout=20)
    st = fleet.status("edge-count")[("h1", "edge-count")]
    assert len(st["interfaces"]) == 101 and all(i["state"] == "configured" for i in st["interfaces"])
    assert h1.send(3) == 3


def test_a_dead_hosts_records_vanish_with_its_lease(fleet, bpf, workdir):
    fleet.host("h1")
    h2 = fleet.host("h2")
    rev = fleet.apply(count_policy(bpf), workdir)
    fleet.wait_converged("edge-count", rev, {"h1", "h2"})
    h2.clsd.kill()
    wait_for(lambda: [n["node"] for n in fleet.ctl_json("fleet", "nodes")] == ["h1"], timeout=TTL + 5,
             interval=0.2, what="h2's record gone with its lease")
    assert set(fleet.status("edge-count")) == {("h1", "edge-count")}
    # h2 kept its filter meanwhile (nothing detaches what it applied)
    assert h2.prefs() == [10]


def test_bad_fleet_input_is_refused_with_one_line(fleet, bpf, workdir):
    path = os.path.join(workdir, "p.json")
    for body, message in (
            ({"match": {"ifname": ["va"]}}, "name: required"),
            ({"name": "x", "nodes": {"labels": {}}, "match": {}}, "nodes: give"),
            ({"name": "x", "nodes": {"colour": "red"}}, "nodes.colour: unknown field"),
            ({"name": "x", "match": {}, "ingress": [{"name": "c", "object": "/nonexistent.o"}]}, "/nonexistent.o")):
        with open(path, "w") as f:
            json.dump(body, f)
        p = fleet.ctl("fleet", "apply", path, check=1)
        assert message in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr
    # one name in two files of one transaction
    good = count_policy(bpf)
    paths = [os.path.join(workdir, "%d.json" % i) for i in (1, 2)]
    for path in paths:
        with open(path, "w") as f:
            json.dump(good, f)
    p = fleet.ctl("fleet", "apply", *paths, check=1)
    assert p.stderr.strip() == "clsctl: %s: fleet policy edge-count is in %s too" % (paths[1], paths[0]), p.stderr
    assert fleet.ctl_json("fleet", "ls") == []
    p = subprocess.run([CLSCTL, "fleet", "ls"], capture_output=True, text=True, env=dict(os.environ, CLSD_FLEET=""))
    assert p.returncode == 1 and "give --fleet" in p.stderr
    p = run(fleet.cluster.switch.argv(CLSCTL, "--fleet", "http://198.18.200.250:2379", "fleet", "ls"), check=False,
            timeout=20)
    assert p.returncode == 1 and "198.18.200.250" in p.stderr
    p = run(["/usr/bin/env", os.path.dirname(CLSCTL) + "/clsd", "--node", "h1"], check=False)
    assert p.returncode == 2 and "need --fleet" in p.stderr


def test_a_policy_written_by_hand_that_no_node_can_read_is_said_invalid(fleet, bpf, workdir):
    h1 = fleet.host("h1")
    b64 = lambda s: base64.b64encode(s.encode()).decode()

    def put(name, text):
        body = {"key": b64("%spolicies/%s" % (fleet.prefix, name)), "value": b64(text)}
        return int(fleet.cluster.call("/v3/kv/put", body)[1]["header"]["revision"])

    put("broken", '{"name": "broken", "match": ')
    rev = put("misnamed", json.dumps(dict(count_policy(bpf), name="other")))
    rev_good = fleet.apply(count_policy(bpf), workdir)
    fleet.wait_converged("edge-count", rev_good, {"h1"})
    rows = fleet.status(check=1)
    assert rows[(None, "broken")]["state"] == "invalid" and "not JSON" in rows[(None, "broken")]["error"]
    assert rows[(None, "misnamed")]["state"] == "invalid" and rows[(None, "misnamed")]["revision"] == rev
    assert 'its name "other" is not its key\'s "misnamed"' == rows[(None, "misnamed")]["error"]
    assert fleet.ctl("fleet", "status", check=1).stderr.strip() == "clsctl: a fleet policy is invalid: no node applies it"
    ls = fleet.ctl("fleet", "ls").stdout
    assert "(invalid: not JSON" in ls and "edge-count" in ls
    assert {p["_key"]: "_invalid" in p for p in fleet.ctl_json("fleet", "ls")} == \
        {"broken": True, "misnamed": True, "edge-count": False}
    # the node applied neither, and said why in its log
    assert sorted(p["name"] for p in h1.clsd.api.get("/policies").json["policies"]) == ["edge-count"]
    assert "fleet: policy misnamed (revision %d): its name" % rev in h1.clsd.log()
    assert h1.prefs() == [10] and h1.send(3) == 3


def make_certs(dir, ip):
    """A CA, a server certificate for ip and a client certificate, by openssl (EC keys)."""
    def sh(*argv):
        run(["openssl", *argv], timeout=30)
    key = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes")
    path = lambda name: os.path.join(dir, name)
    sh("req", "-x509", *key, "-keyout", path("ca.key"), "-out", path("ca.pem"), "-days", "2", "-subj", "/CN=clsdt-ca")
    # etcd's gateway dials its own gRPC server with the server certificate: it needs clientAuth too
    for name, ext in (("server", "subjectAltName=IP:%s\nextendedKeyUsage=serverAuth,clientAuth" % ip),
                      ("client", "extendedKeyUsage=clientAuth")):
        with open(path(name + ".ext"), "w") as f:
            f.write(ext + "\n")
        sh("req", *key, "-keyout", path(name + ".key"), "-out", path(name + ".csr"), "-subj", "/CN=" + name)
        sh("x509", "-req", "-in", path(name + ".csr"), "-CA", path("ca.pem"), "-CAkey", path("ca.key"),
           "-CAcreateserial", "-out", path(name + ".pem"), "-days", "2", "-extfile", path(name + ".ext"))
    return path


@pytest.mark.once  # mostly etcd's TLS cluster starting (14 s under ASan); clsd's side is libcurl's options
def test_tls_to_etcd_with_client_certificates(fleet, bpf, workdir):
    """An etcd that serves TLS only and wants a client certificate: clsd and clsctl reach it with
    --fleet-ca/--fleet-cert/--fleet-key; without the certificate, or trusting another CA, they do not."""
    ip = SUBNET + ".9"
    certs = make_certs(workdir, ip)
    ns = netns_create()
    proc = None
    try:
        fleet.cluster.attach(ns, ip)
        url = "https://%s:2379" % ip
        proc = ns.popen(ETCD, "--name", "tls", "--data-dir", os.path.join(workdir, "etcd-tls"),
                        "--listen-client-urls", url, "--advertise-client-urls", url,
                        "--listen-peer-urls", "http://127.0.0.1:2380",
                        "--initial-advertise-peer-urls", "http://127.0.0.1:2380",
                        "--initial-cluster", "tls=http://127.0.0.1:2380",
                        "--cert-file", certs("server.pem"), "--key-file", certs("server.key"),
                        "--trusted-ca-file", certs("ca.pem"), "--client-cert-auth",
                        stdout=open(os.path.join(workdir, "etcd-tls.log"), "wb"), stderr=subprocess.STDOUT)
        fleet.urls = url
        fleet.auth = False  # this etcd has no users: its nodes are writers, and are told they may be
        fleet.tls = ("--fleet-ca", certs("ca.pem"), "--fleet-cert", certs("client.pem"), "--fleet-key",
                     certs("client.key"))
        wait_for(lambda: fleet.ctl("fleet", "ls", check=None).returncode == 0, timeout=20, interval=0.2,
                 what="the TLS etcd answering")
        h1 = fleet.host("h1")
        rev = fleet.apply(count_policy(bpf), workdir)
        fleet.wait_converged("edge-count", rev, {"h1"})
        assert h1.send(4) == 4
        # without a client certificate: refused, one line, exit 1
        fleet.tls = ("--fleet-ca", certs("ca.pem"))
        p = fleet.ctl("fleet", "ls", check=1)
        assert len(p.stderr.strip().splitlines()) == 1 and url in p.stderr, p.stderr
        # trusting another CA: the server is not believed
        os.makedirs(os.path.join(workdir, "other"))
        other = make_certs(os.path.join(workdir, "other"), ip)
        fleet.tls = ("--fleet-ca", other("ca.pem"), "--fleet-cert", certs("client.pem"), "--fleet-key",
                     certs("client.key"))
        p = fleet.ctl("fleet", "ls", check=1)
        assert url in p.stderr
        # a clsd that trusts another CA does not connect, and says why
        h2 = fleet.host("h2")
        wait_for(lambda: "certificate" in h2.clsd.log_this_run().lower(), timeout=10,
                 what="h2's TLS failure logged")
        m = h2.clsd.api.get("/metrics").body.decode()
        assert 'clsd_fleet_connected{node="h2",endpoint="%s"} 0' % url in m
        assert h2.prefs() == []
    finally:
        if proc:
            proc.kill()
            proc.wait()
        netns_destroy(ns)


def test_a_local_policy_keeps_its_name_and_one_transaction_is_applied_together(fleet, bpf, workdir):
    h1 = fleet.host("h1")
    digest = h1.clsd.api.upload_ok(bpf.count)
    local = {"match": {"ifname": ["va"]}, "ingress": [{"name": "l", "object": digest, "priority": 30}]}
    assert h1.clsd.api.request("PUT", "/policies/edge-count", local).status == 200
    fleet.apply(count_policy(bpf), workdir)
    wait_for(lambda: (fleet.status("edge-count").get(("h1", "edge-count")) or {}).get("state") == "failed",
             timeout=10, what="the fleet's edge-count refused on h1")
    assert "holds the name" in fleet.status("edge-count")[("h1", "edge-count")]["error"]
    assert h1.prefs() == [30]  # the local policy, untouched
    # two policies written in one etcd transaction: both applied, at that one revision
    a = {"name": "a", "match": {"ifname": ["va"]}, "order": 1,
         "ingress": [{"name": "a", "object": digest, "priority": 40}]}
    b = {"name": "b", "match": {"ifname": ["va"]}, "egress": [{"name": "b", "object": digest, "priority": 41}]}
    b64 = lambda s: base64.b64encode(s.encode()).decode()
    txn = {"success": [{"request_put": {"key": b64("%spolicies/%s" % (fleet.prefix, p["name"])),
                                        "value": b64(json.dumps(p))}} for p in (a, b)]}
    rev = int(fleet.cluster.call("/v3/kv/txn", txn)[1]["header"]["revision"])
    # a is order 1: the local edge-count (order 0) holds va's ingress, and h1 says so
    wait_for(lambda: [fleet.status(p).get(("h1", p), {}).get("state") for p in ("a", "b")] == ["overridden", "applied"],
             timeout=10, what="a overridden, b applied")
    assert {fleet.status(p)[("h1", p)]["held_revision"] for p in ("a", "b")} == {rev}
    assert fleet.status("a")[("h1", "a")]["interfaces"][0]["ingress_by"] == "edge-count"
    wait_for(lambda: fleet.ctl_json("fleet", "nodes")[0]["revision"] == rev, timeout=5,
             what="h1's record at the transaction's revision")
    assert h1.prefs() == [30] and [f.pref for f in h1.ns.filters("va", "egress")] == [41]
    # the local policy goes: the fleet's edge-count, refused before, is tried again and holds the hook
    assert h1.clsd.api.delete("/policies/edge-count").status == 200
    wait_for(lambda: fleet.status("edge-count")[("h1", "edge-count")]["state"] == "applied", timeout=15,
             what="the fleet's edge-count applied once the name is free")
    assert h1.prefs() == [10] and h1.send(3) == 3


def test_one_transaction_is_applied_all_or_nothing_and_survives_a_crash_whole(fleet, bpf, workdir):
    h1 = fleet.host("h1")

    def pair(x_prio, y_prio, y_program=None):
        x = {"name": "x", "match": {"ifname": ["va"]}, "ingress": [{"name": "x", "object": bpf.count,
                                                                   "priority": x_prio}]}
        y = {"name": "y", "match": {"ifname": ["va"]}, "egress": [{"name": "y", "object": bpf.count,
                                                                  "priority": y_prio}]}
        if y_program:
            y["egress"][0]["program"] = y_program
        paths = []
        for p in (x, y):
            paths.append(os.path.join(workdir, "%s.json" % p["name"]))
            with open(paths[-1], "w") as f:
                json.dump(p, f)
        out = fleet.ctl_json("fleet", "apply", *paths)
        assert [o["name"] for o in out] == ["x", "y"] and out[0]["revision"] == out[1]["revision"]
        return out[0]["revision"]

    def egress_prefs():
        return [f.pref for f in h1.ns.filters("va", "egress") if f.name and f.name.startswith("clsd:")]

    rev = pair(40, 41)
    for p in ("x", "y"):
        fleet.wait_converged(p, rev, {"h1"})
    assert h1.prefs() == [40] and egress_prefs() == [41] and h1.send(3) == 3
    # y refused by the verifier: x, written with it, is not applied either; both say why
    rev_bad = pair(42, 43, y_program="no_such_program")
    wait_for(lambda: [fleet.status(p).get(("h1", p), {}).get("state") for p in ("x", "y")] == ["failed"] * 2,
             timeout=10, what="x and y failed together")
    for p in ("x", "y"):
        row = fleet.status(p)[("h1", p)]
        # asked for the bad pair, still holding the good one (as tc shows)
        assert row["asked_revision"] == rev_bad and row["held_revision"] == rev, row
        assert row["error"].startswith("policy y: ")
        assert "no_such_program" in row["error"] and "none of the 2 policies" in row["error"]
    assert h1.prefs() == [40] and egress_prefs() == [41] and h1.send(3) == 3
    stored = {p["name"]: p["fleet_revision"] for p in h1.clsd.api.get("/policies").json["policies"]}
    assert stored == {"x": rev, "y": rev}
    # fixed: both at once
    rev = pair(44, 45)
    for p in ("x", "y"):
        fleet.wait_converged(p, rev, {"h1"})
    assert h1.prefs() == [44] and egress_prefs() == [45]
    # kill -9 at a random moment of applying a pair: restarted without etcd, the store holds both old or
    # both new (never one of each), and the kernel matches it
    rng = random.Random(4)
    for i in range(4):
        new = pair(50 + 2 * i, 51 + 2 * i)
        time.sleep(rng.uniform(0, 0.03))
        h1.clsd.proc.send_signal(signal.SIGKILL)
        h1.clsd.proc.wait()
        h1.clsd.proc = None
        h1.clsd.args = []
        h1.clsd.start()
        stored = {p["name"]: p["fleet_revision"] for p in h1.clsd.api.get("/policies").json["policies"]}
        assert stored["x"] == stored["y"] and stored["x"] in (rev, new), stored
        want = (50 + 2 * i, 51 + 2 * i) if stored["x"] == new else (h1.prefs()[0], h1.prefs()[0] + 1)
        wait_for(lambda: (h1.prefs(), egress_prefs()) == ([want[0]], [want[1]]), timeout=5,
                 what="the kernel as the store says")
        h1.clsd.kill()
        h1.start()
        for p in ("x", "y"):
            fleet.wait_converged(p, new, {"h1"})
        rev = new
    assert h1.send(3) == 3


def test_d_bus_shows_the_fleet_connection(fleet, bpf, workdir, bus):  # noqa: F811
    h1 = fleet.host("h1", env={"DBUS_SYSTEM_BUS_ADDRESS": bus.address})
    wait_for(lambda: "D-Bus: org.clsd1 on the system bus" in h1.clsd.log(), timeout=5, what="clsd on the bus")
    rev = fleet.apply(count_policy(bpf), workdir)
    fleet.wait_converged("edge-count", rev, {"h1"})
    # connected once etcd has made all five watches of its stream (the policies' may come first: a
    # slow run, under ASan, applied before the others were made)
    wait_for(lambda: bus.prop("Fleet") == [True, True, "h1", rev, ""], timeout=5, what="Fleet connected")
    for i in range(MEMBERS):
        fleet.cluster.stop_member(i)
    wait_for(lambda: bus.prop("Fleet")[1] is False and SUBNET in bus.prop("Fleet")[4], timeout=10,
             what="D-Bus says the fleet is gone, and why")
    enabled, connected, node, revision, error = bus.prop("Fleet")
    assert (enabled, node, revision) == (True, "h1", rev) and SUBNET in error


def test_libcurl_is_opened_only_with_fleet(fleet, clsd_factory):
    h1 = fleet.host("h1")
    plain = clsd_factory(h1.peer, name="plain")

    def maps(c):
        with open("/proc/%d/maps" % c.proc.pid) as f:
            return f.read()
    wait_for(lambda: "libcurl" in maps(h1.clsd), timeout=5, what="libcurl in the fleet clsd")
    assert "libcurl" not in maps(plain) and "libnghttp2" not in maps(plain)
    # clsctl links neither libcurl nor GnuTLS (30 libraries, 11 ms of every start): "fleet" opens them
    needed = run(["ldd", CLSCTL]).stdout
    assert "libcurl" not in needed and "libgnutls" not in needed, needed
    assert fleet.ctl_json("fleet", "nodes")[0]["node"] == "h1"


def test_a_host_with_trusted_keys_loads_only_signed_fleet_objects(fleet, bpf, workdir):
    """clsctl fleet apply puts FILE.minisig beside the object in etcd (objects/DIGEST.sig); a host with
    --trusted-keys refuses the object without it, and takes it once it is signed."""
    trusted, key1, _, _ = setup_keys(workdir)
    obj = os.path.join(workdir, "count.bpf.o")
    shutil.copy(bpf.count, obj)
    h1 = fleet.host("h1", start=False, role="edge")
    plain = h1.args
    h1.args = lambda: (*plain(), "--trusted-keys", trusted)
    h1.start(fleet.factory)
    policy = count_policy(bpf, labels={"role": "edge"})
    policy["ingress"][0]["object"] = obj
    rev = fleet.apply(policy, workdir)
    st = fleet.row_when("h1", "failed")  # h1 refusing the unsigned object
    assert "not signed" in json.dumps(st), st
    assert h1.prefs() == []
    sign(key1, obj)
    policy["ingress"][0]["priority"] = 11  # a new revision, the same object, now with its signature
    rev = fleet.apply(policy, workdir)
    fleet.wait_converged("edge-count", rev, {"h1"})
    assert h1.prefs() == [11]


HAMMER = """
import base64, http.client, json, sys, time
host, port, token, key, seconds = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], float(sys.argv[5])
c = http.client.HTTPConnection(host, port, timeout=5)
body = json.dumps({"key": key, "value": base64.b64encode(b'{"state": "forged"}').decode()})
end, n = time.monotonic() + seconds, 0
while time.monotonic() < end:
    c.request("POST", "/v3/kv/put", body, {"Authorization": token})
    c.getresponse().read()
    n += 1
print(n)
"""


def test_a_lease_revoked_under_foreign_writes_of_its_status_is_survived(fleet, bpf, workdir):
    """etcd drops a node's lease (as a busy etcd that answered no keepalive in time does) while another
    writer keeps putting the node's status: the node's writes under the dead lease fail, it takes a new
    lease and writes its keys again. A status whose write etcd did not take was written from a text
    already forgotten (a NULL read: clsd died, 5 nodes of 1,000 in a mass start); it waits for the next
    publish instead, and nothing is written while no lease is held (a key without a lease never goes)."""
    na = fleet.host("na")
    rev = fleet.apply(count_policy(bpf), workdir)
    fleet.wait_converged("edge-count", rev, {"na"})
    b = lambda x: base64.b64encode(x.encode()).decode()
    key = b(fleet.prefix + "status/na/edge-count")
    url = member_url(1).split("//")[1]
    for round in range(8):
        lease = int(etcd_raw(fleet, "/v3/kv/range", {"key": b(fleet.prefix + "nodes/na")})["kvs"][0]["lease"])
        hammer = subprocess.Popen(fleet.cluster.switch.argv(
            sys.executable, "-c", HAMMER, url.split(":")[0], url.split(":")[1], fleet.cluster.token(), key, "1.5"),
            stdout=subprocess.PIPE, text=True)
        try:
            time.sleep(0.2)
            etcd_raw(fleet, "/v3/lease/revoke", {"ID": str(lease)})
            assert int(hammer.communicate(timeout=30)[0]) > 100  # foreign writes went on through it
        finally:
            hammer.kill()
            hammer.wait()
        assert na.clsd.proc.poll() is None, "clsd died: %s" % na.clsd.log_this_run()[-2000:]
        # a new lease, and the node's record and status under it
        wait_for(lambda: etcd_raw(fleet, "/v3/kv/range", {"key": b(fleet.prefix + "nodes/na")}).get("kvs"),
                 timeout=20, what="na's record written again under a new lease")
    fleet.wait_converged("edge-count", rev, {"na"})  # (a foreign write after the new lease: put right too)
    # every key of the node's is under its live lease: none was written without one
    kvs = etcd_raw(fleet, "/v3/kv/range", {"key": b(fleet.prefix + "status/na/"),
                                           "range_end": b(fleet.prefix + "status/na0")}).get("kvs", [])
    kvs += etcd_raw(fleet, "/v3/kv/range", {"key": b(fleet.prefix + "nodes/na")}).get("kvs", [])
    leases = {kv.get("lease") for kv in kvs}
    assert len(kvs) == 2 and len(leases) == 1 and None not in leases and "0" not in leases, kvs
    assert na.prefs() == [10]


def test_a_nodes_lease_is_sized_by_the_fleet_it_counts_and_lengthened_after_one_expired(fleet, bpf, workdir):
    """Without --fleet-lease-ttl a node's lease is as long as the fleet asks (the fleet's keepalives under
    100 a second together: 3 s a hundred nodes, 20 s at least), the nodes counted before its first lease;
    after a lease etcd dropped while the node kept it alive, twice as long (an overloaded etcd that let
    leases expire gets fewer keepalives, not more). --fleet-lease-ttl is kept as given."""
    b = lambda x: base64.b64encode(x.encode()).decode()
    # 900 records of nodes not here: a big fleet as etcd counts it
    for start in range(0, 900, 100):
        etcd_raw(fleet, "/v3/kv/txn", {"success": [
            {"request_put": {"key": b(fleet.prefix + "nodes/ghost-%d" % i), "value": b("{}")}}
            for i in range(start, start + 100)]})

    def lease_of(name):
        kvs = etcd_raw(fleet, "/v3/kv/range", {"key": b(fleet.prefix + "nodes/" + name)}).get("kvs")
        return int(kvs[0]["lease"]) if kvs and int(kvs[0].get("lease", 0)) else None

    def granted(lease):
        return int(etcd_raw(fleet, "/v3/lease/timetolive", {"ID": str(lease)})["grantedTTL"])

    def ttl_gauge(h):
        m = h.clsd.api.get("/metrics").body.decode()
        return int(float(m.split("\nclsd_fleet_lease_ttl_seconds ")[1].split("\n")[0]))

    fixed = fleet.host("nf")  # --fleet-lease-ttl 3, as every test host
    sized = fleet.host("ns", start=False)
    sized.ttl = None
    sized.start(fleet.factory)
    first = wait_for(lambda: lease_of("ns"), timeout=15, what="ns's record under a lease")
    assert granted(first) == 28  # 901 counted (the ghosts and nf): 3 x 901 / 100, rounded up
    assert ttl_gauge(sized) == 28
    assert granted(wait_for(lambda: lease_of("nf"), timeout=15, what="nf's record")) == 3 and ttl_gauge(fixed) == 3
    # etcd drops the lease (as a busy one whose keepalive answers came too late does)
    etcd_raw(fleet, "/v3/lease/revoke", {"ID": str(first)})
    second = wait_for(lambda: (lease_of("ns") or first) != first and lease_of("ns"), timeout=30,
                      what="ns's record under a new lease")
    assert granted(second) == 56, sized.clsd.log_this_run()[-1500:]
    wait_for(lambda: ttl_gauge(sized) == 56, timeout=5, what="the gauge says the new lease")
    assert "expired; a new one of 56 s" in sized.clsd.log_this_run()
    # the node is whole under it: its status of a policy applied and written under the same lease
    rev = fleet.apply(count_policy(bpf, names=["ns"]), workdir)
    fleet.wait_converged("edge-count", rev, {"ns"})
    st = etcd_raw(fleet, "/v3/kv/range", {"key": b(fleet.prefix + "status/ns/edge-count")})["kvs"][0]
    assert int(st["lease"]) == second


def test_a_nodes_lease_grows_with_a_fleet_that_grew_after_it_was_sized(fleet, bpf, workdir):
    """A node counts the fleet when it lists; a fleet that grew tenfold since would keep the node's first
    lease and its keepalives. A policy says how many nodes it selected when applied: once that asks for a
    lease twice as long, the node takes one, writes its keys under it and lets the old one lapse."""
    b = lambda x: base64.b64encode(x.encode()).decode()
    ng = fleet.host("ng", start=False)
    ng.ttl = None
    ng.start(fleet.factory)

    def lease_of(key):
        kvs = etcd_raw(fleet, "/v3/kv/range", {"key": b(fleet.prefix + key)}).get("kvs")
        return int(kvs[0]["lease"]) if kvs and int(kvs[0].get("lease", 0)) else None

    first = wait_for(lambda: lease_of("nodes/ng"), timeout=15, what="ng's record under a lease")
    # a policy with a rollout: clsctl reads the live nodes for its plan, and says how many it selected
    rev = fleet.apply(dict(count_policy(bpf), rollout={"waves": ["100%"], "hold": "0s", "confirm": "0s"}), workdir)
    fleet.wait_converged("edge-count", rev, {"ng"})
    ttl = etcd_raw(fleet, "/v3/lease/timetolive", {"ID": str(first)})
    assert int(ttl["grantedTTL"]) == 20  # a fleet of one: the least
    # the same policy as if applied to a fleet of 2,000 (clsctl's count of the nodes it selected)
    kv = etcd_raw(fleet, "/v3/kv/range", {"key": b(fleet.prefix + "policies/edge-count")})["kvs"][0]
    policy = json.loads(base64.b64decode(kv["value"]))
    assert policy["selected"] == 1
    policy["selected"] = 2000
    etcd_put_raw(fleet, b"policies/edge-count", json.dumps(policy).encode())
    # at its next keepalive (every 20/3 s) the node moves to a lease of 60 s (3 s a hundred nodes)
    second = wait_for(lambda: (lease_of("nodes/ng") or first) != first and lease_of("nodes/ng"), timeout=20,
                      what="ng's record under a new lease")
    assert int(etcd_raw(fleet, "/v3/lease/timetolive", {"ID": str(second)})["grantedTTL"]) == 60
    assert "the fleet has grown to 2000 nodes: a lease of 60 s instead of 20 s" in ng.clsd.log_this_run()
    # its status too, and nothing is left under the old lease, which lapses
    wait_for(lambda: lease_of("status/ng/edge-count") == second, timeout=10, what="ng's status under the new lease")
    old = etcd_raw(fleet, "/v3/lease/timetolive", {"ID": str(first), "keys": True})
    assert not old.get("keys"), old
    assert ng.prefs() == [10] and ng.send(2) == 2


def test_the_fleets_view_cannot_be_forged_and_is_put_right(fleet, bpf, workdir):
    """Keys written by someone else: a node's status overwritten (no lease), a status key it never wrote,
    its record deleted: the node writes its own keys again at once (it watches them) and deletes what is
    not its; clsctl counts only keys bound to a live lease (a made-up node is "unbound"), and every policy
    key, whatever its bytes (0xff, a NUL), has its invalid row; no node applies one."""
    na = fleet.host("na")
    nb = fleet.host("nb")
    rev = fleet.apply(count_policy(bpf), workdir)
    fleet.wait_converged("edge-count", rev, {"na", "nb"})
    # na's own writes settled (its status's revision still for a second): a write of its own in flight
    # when the forged one lands would overwrite it without a word, and this test is about the word
    key = base64.b64encode((fleet.prefix + "status/na/edge-count").encode()).decode()
    last, since = None, time.monotonic()
    while time.monotonic() - since < 1.0:
        kv = etcd_raw(fleet, "/v3/kv/range", {"key": key}).get("kvs", [{}])[0]
        if kv.get("mod_revision") != last:
            last, since = kv.get("mod_revision"), time.monotonic()
        time.sleep(0.1)
    forged = json.dumps({"node": "na", "policy": "edge-count", "revision": rev, "state": "failed",
                         "error": "forged"}).encode()
    etcd_put_raw(fleet, b"status/na/edge-count", forged)
    etcd_put_raw(fleet, b"status/na/ghost", b'{"node": "na", "policy": "ghost", "state": "failed"}')
    etcd_raw(fleet, "/v3/kv/deleterange", {"key": base64.b64encode((fleet.prefix + "nodes/nb").encode()).decode()})
    wait_for(lambda: "status/na/edge-count was put without this node's lease by another writer; written again"
             in na.clsd.log_this_run(), timeout=15, what="na put its status right")  # (ASan, a loaded host)
    wait_for(lambda: "status/na/ghost is not this node's" in na.clsd.log_this_run(), timeout=15,
             what="na deleted the status it never wrote")
    wait_for(lambda: "nodes/nb was deleted by another writer; written again" in nb.clsd.log_this_run(),
             timeout=15, what="nb wrote its record again")
    fleet.wait_converged("edge-count", rev, {"na", "nb"})
    fleet.ctl("fleet", "status", check=0)
    assert na.prefs() == [10]
    keys = etcd_raw(fleet, "/v3/kv/range", {"key": base64.b64encode((fleet.prefix + "status/").encode()).decode(),
                                            "range_end": base64.b64encode((fleet.prefix + "status0").encode()).decode(),
                                            "keys_only": True}).get("kvs", [])
    assert sorted(base64.b64decode(k["key"]).decode()[len(fleet.prefix):] for k in keys) == \
        ["status/na/edge-count", "status/nb/edge-count"]
    metrics = na.clsd.api.get("/metrics").body.decode()
    assert "clsd_fleet_foreign_writes_total 2" in metrics, [l for l in metrics.splitlines() if "foreign" in l]
    # a made-up node: listed as unbound, never a row of the status
    etcd_put_raw(fleet, b"nodes/fake", json.dumps({"node": "fake", "labels": {}}).encode())
    nodes = {n["node"]: n for n in fleet.ctl_json("fleet", "nodes")}
    assert nodes["fake"]["_bound"] is False and nodes["na"]["_bound"] is True and nodes["nb"]["_bound"] is True
    table = fleet.ctl("fleet", "nodes").stdout
    assert [l.split()[1] for l in table.splitlines()[1:]] == ["unbound", "live", "live"], table
    assert set(fleet.status("edge-count")) == {("na", "edge-count"), ("nb", "edge-count")}
    # policy keys with bytes no name holds: each has its invalid row, no node reads it as another
    etcd_put_raw(fleet, b"policies/bad\xff", json.dumps(count_policy(bpf, name="bad")).encode())
    etcd_put_raw(fleet, b"policies/ok\x00x", json.dumps(count_policy(bpf, name="ok", prio=20)).encode())
    rows = fleet.status(check=1)
    assert rows[(None, "bad\\xff")]["state"] == "invalid" and rows[(None, "ok\\x00x")]["state"] == "invalid", rows
    assert "a byte a policy's name cannot hold" in rows[(None, "ok\\x00x")]["error"]
    time.sleep(0.5)
    assert na.prefs() == [10] and sorted(p["name"] for p in na.clsd.api.get("/policies").json["policies"]) == \
        ["edge-count"]


def test_a_fleet_policy_of_an_object_with_64_programs_converges(fleet, bpf, workdir):
    """The object a node fetches from etcd is inspected in the same sandbox as an upload: one of 64
    programs (glibc's qsort asked sysinfo(2), which the sandbox killed) applies like any other."""
    h1 = fleet.host("h1")
    p = {"name": "wide", "match": {"ifname": ["va"]},
         "ingress": [{"name": "w", "object": bpf.wide["programs-64"], "program": "prog_63", "priority": 10}]}
    rev = fleet.apply(p, workdir)
    fleet.wait_converged("wide", rev, {"h1"})
    assert h1.prefs() == [10]


@pytest.mark.once  # 56 MB into etcd
def test_an_etcd_answer_over_the_limit_is_said_so(fleet, workdir):
    """Policies of 1 MB each, 56 of them: listing them is an answer of ~75 MB (base64), over the 64 MiB clsd and
    clsctl read. Each says so (libcurl said only "Failed writing received data"); the node keeps what it
    applied and tries again."""
    blob = base64.b64encode(os.urandom(1 << 20)).decode()
    for i in range(56):
        etcd_put_raw(fleet, b"policies/big-%d" % i, json.dumps({"name": "big-%d" % i, "pad": blob[:1000000]}).encode())
    p = fleet.ctl("fleet", "ls", check=1, timeout=60)
    assert "etcd's answer is longer than 64 MiB, the most clsd reads" in p.stderr, p.stderr
    h1 = fleet.host("h1")
    wait_for(lambda: "etcd's answer is longer than 64 MiB" in h1.clsd.log_this_run(), timeout=20,
             what="the node says why it cannot list")
    etcd_raw(fleet, "/v3/kv/deleterange", {"key": base64.b64encode((fleet.prefix + "policies/").encode()).decode(),
                                           "range_end": base64.b64encode((fleet.prefix + "policies0").encode()).decode()})


BUSY_PROXY = """
import http.client, http.server, json, sys, threading, time

upstream, port, busy, hold = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
host, uport = upstream.split(":")
lock, seen = threading.Lock(), {"range": 0}

class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a):
        pass
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        with lock:
            n = seen["range"] = seen["range"] + (self.path == "/v3/kv/range")
        print(json.dumps({"t": time.monotonic(), "path": self.path, "n": n}), flush=True)
        if self.path == "/v3/kv/range" and n <= busy:
            text = json.dumps({"error": "etcdserver: too many requests", "code": 8,
                               "message": "etcdserver: too many requests"}).encode()
            self.send_response(429)
            self.send_header("Retry-After", "1")
            self.send_header("Content-Length", str(len(text)))
            self.end_headers()
            self.wfile.write(text)
            return
        if self.path == "/v3/kv/range" and n == busy + 1:
            time.sleep(hold)  # past the caller's 10 s: no answer in time
        c = http.client.HTTPConnection(host, int(uport), timeout=30)
        hdrs = {k: v for k, v in self.headers.items() if k.lower() in ("authorization", "content-type")}
        c.request("POST", self.path, body, hdrs)
        a = c.getresponse()
        text = a.read()
        self.send_response(a.status)
        self.send_header("Content-Length", str(len(text)))
        self.end_headers()
        self.wfile.write(text)

http.server.ThreadingHTTPServer(("127.0.0.1", port), H).serve_forever()
"""


def busy_proxy(fleet, port, busy, hold):
    """A gateway in front of the first member that answers the first `busy` ranges 429 (Retry-After: 1, etcd's
    "too many requests") and holds the next one `hold` seconds before passing it on; every request it got,
    when, on its stdout."""
    return fleet.cluster.switch.popen(sys.executable, "-c", BUSY_PROXY, member_url(0)[len("http://"):], str(port),
                                      str(busy), str(hold), stdout=subprocess.PIPE, text=True)


@pytest.mark.once
def test_clsctl_asks_a_busy_etcd_again_with_growing_pauses_and_gives_up_when_told(fleet, workdir):
    """clsctl in a script's loop against an overloaded etcd: a 429 or a request not answered within the call's
    10 s is asked again after a pause (at least the Retry-After), not given up on at once (each failed run a
    script starts again adds to the load), until --fleet-timeout."""
    port = 23790
    proxy = busy_proxy(fleet, port, busy=2, hold=11)
    try:
        wait_for(lambda: run(fleet.cluster.switch.argv("curl", "-s", "-o", "/dev/null", "http://127.0.0.1:%d/" % port),
                             check=False).returncode == 0, timeout=10, what="the proxy listening")
        t0 = time.monotonic()
        p = run(fleet.cluster.switch.argv(CLSCTL, "--fleet", "http://127.0.0.1:%d" % port, "--fleet-prefix",
                                          fleet.prefix, *fleet.ctl_auth(), "--json", "fleet", "ls"),
                check=False, timeout=60)
        took = time.monotonic() - t0
        assert p.returncode == 0, p.stderr
        assert json.loads(p.stdout) == [] and took > 12, took
    finally:
        proxy.kill()
        out, _ = proxy.communicate(timeout=10)
    ranges = [json.loads(l) for l in out.splitlines() if json.loads(l)["path"] == "/v3/kv/range"]
    # two 429s, the held one, the one answered; each 429 waited for its Retry-After
    assert [r["n"] for r in ranges] == [1, 2, 3, 4], ranges
    assert ranges[1]["t"] - ranges[0]["t"] >= 0.95 and ranges[2]["t"] - ranges[1]["t"] >= 0.95, ranges

    # an etcd that stays busy: asked again until --fleet-timeout, then one line that says so
    proxy = busy_proxy(fleet, port, busy=10 ** 6, hold=0)
    try:
        wait_for(lambda: run(fleet.cluster.switch.argv("curl", "-s", "-o", "/dev/null", "http://127.0.0.1:%d/" % port),
                             check=False).returncode == 0, timeout=10, what="the proxy listening")
        t0 = time.monotonic()
        p = run(fleet.cluster.switch.argv(CLSCTL, "--fleet", "http://127.0.0.1:%d" % port, "--fleet-prefix",
                                          fleet.prefix, *fleet.ctl_auth(), "--fleet-timeout", "4", "fleet", "ls"),
                check=False, timeout=60)
        took = time.monotonic() - t0
    finally:
        proxy.kill()
        out, _ = proxy.communicate(timeout=10)
    assert p.returncode == 1 and len(p.stderr.splitlines()) == 1, (p.returncode, p.stderr)
    assert re.search(r"etcd stayed busy for [45] s: .*too many requests", p.stderr), p.stderr
    asked = sum(1 for l in out.splitlines() if json.loads(l)["path"] == "/v3/kv/range")
    assert 3.5 < took < 15 and 2 <= asked <= 5, (took, asked)  # Retry-After: 1 s between, not a tight loop
    p = fleet.ctl("fleet", "ls", "--fleet-timeout", "0.5", check=2)
    assert "--fleet-timeout 0.5: expected seconds, 1 to 3600" in p.stderr, p.stderr


class JwtEtcd:
    """One etcd member of the test's own that gives JWT tokens (RS256, a key made here), on the module's bridge
    at .9, authentication on: what a Fleet needs of a cluster."""

    def __init__(self, cluster):
        self.switch, self.root = cluster.switch, tempfile.mkdtemp(prefix="jwt-", dir=cluster.root)
        self.attach = cluster.attach
        self.ns = netns_create()
        self.proc = None
        url = "http://%s.9" % SUBNET
        self.url = url + ":2379"
        try:
            self.attach(self.ns, "%s.9" % SUBNET)
            key, pub = os.path.join(self.root, "jwt.key"), os.path.join(self.root, "jwt.pub")
            run(["openssl", "genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", key])
            run(["openssl", "pkey", "-in", key, "-pubout", "-out", pub])
            log = open(os.path.join(self.root, "etcd.log"), "ab")
            self.proc = self.ns.popen(
                ETCD, "--name", "j1", "--data-dir", os.path.join(self.root, "data"),
                "--listen-peer-urls", url + ":2380", "--initial-advertise-peer-urls", url + ":2380",
                "--listen-client-urls", self.url, "--advertise-client-urls", self.url,
                "--initial-cluster", "j1=%s:2380" % url, "--initial-cluster-state", "new", "--bcrypt-cost", "4",
                "--auth-token", "jwt,pub-key=%s,priv-key=%s,sign-method=RS256,ttl=1h" % (pub, key),
                stdout=log, stderr=subprocess.STDOUT)
            log.close()
            wait_for(lambda: run(self.switch.argv("curl", "-sf", "-m", "1", self.url + "/health"),
                                 check=False).returncode == 0, timeout=20, interval=0.1, what="the JWT member healthy")
            self.root_pw = os.path.join(self.root, "root.password")
            with open(self.root_pw, "w") as f:
                f.write(ROOT_PASSWORD + "\n")
            ctl = lambda *a: run(self.switch.argv("etcdctl", "--endpoints", self.url, *a))
            ctl("user", "add", "root", "--new-user-password=" + ROOT_PASSWORD, "--interactive=false")
            ctl("user", "grant-role", "root", "root")
            ctl("auth", "enable")
        except BaseException:
            self.close()
            raise

    def urls(self):
        return self.url

    def close(self):
        if self.proc:
            self.proc.kill()
            self.proc.wait(timeout=10)
            self.proc = None
        netns_destroy(self.ns)


def test_a_node_whose_jwt_token_a_new_user_made_old_logs_in_again(fleet, bpf, workdir):
    """etcd's JWT tokens carry the revision of its users and roles when given: a user made since (clsctl
    fleet rbac for the next node) makes every token older, and etcd refuses its writes ("revision of auth
    store is old", HTTP 400). The node logs in again, as etcd's own client does, and goes on; it took the
    answer for a lost connection and came back with the same token, for ever."""
    jwt = JwtEtcd(fleet.cluster)
    try:
        fleet.cluster, fleet.urls = jwt, jwt.urls()
        h1 = fleet.host("h1")
        wait_for(lambda: "h1" in fleet.ctl("fleet", "nodes").stdout, timeout=20, what="h1's record")

        def logins():
            m = h1.clsd.api.get("/metrics").body.decode()
            return int(float(m.split("\nclsd_fleet_authentications_total ")[1].split("\n")[0]))
        assert logins() == 1
        fleet.ctl("fleet", "rbac", "h2", "--apply", "--out", fleet.pwdir)  # the auth store's revision moves on
        rev = fleet.apply(count_policy(bpf), workdir)
        fleet.wait_converged("edge-count", rev, {"h1"}, timeout=30)
        assert h1.prefs() == [10] and h1.send(3) == 3
        assert logins() == 2, h1.clsd.log_this_run()
        # and it keeps its new token: a second change needs no login
        rev = fleet.apply(count_policy(bpf, prio=11), workdir)
        fleet.wait_converged("edge-count", rev, {"h1"}, timeout=20)
        assert logins() == 2
    finally:
        for h in fleet.hosts.values():
            if h.clsd and h.clsd.proc:
                h.clsd.kill()
        jwt.close()
