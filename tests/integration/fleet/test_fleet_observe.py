"""The fleet seen at a glance: nodes advertise their API (--advertise, in their etcd record); clsctl
fleet targets writes Prometheus file_sd JSON from them and keeps it current; a real Prometheus
(Debian's) scrapes 4 nodes over mutual TLS from that file; the datagrams a policy's filters dropped on
every node, summed by policy in Prometheus, are the ones the test sent, and clsctl fleet top shows the
same numbers."""

import json
import os
import subprocess
import time
import urllib.parse

import pytest

from harness.api import Api, NetnsHTTPConnection, Pki
from harness.base import CLSCTL, wait_for
from harness.etcd import SUBNET
from harness.observe import udp_exchange


PORT = 8443


def dropper(bpf):
    return {"name": "edge-drop", "match": {"ifname": ["va"]},
            "ingress": [{"name": "d", "object": bpf.drop_port, "priority": 20,
                         "metrics": [{"map": "dropped", "name": "drops", "type": "counter"}]}]}


def host_addr(h):
    return "%s.%d" % (SUBNET, 10 + h.index)


def prom_query(papi, q):
    r = papi.request("GET", "/api/v1/query?query=" + urllib.parse.quote(q))
    assert r.status == 200, r.body
    return json.loads(r.body)["data"]["result"]


@pytest.mark.once
def test_targets_for_prometheus_over_mutual_tls_and_fleet_top(fleet, bpf, workdir):  # noqa: F811
    pki = Pki(os.path.join(workdir, "pki"))
    client, client_key = pki.issue("prometheus", "/CN=prometheus")
    hosts = []
    for i in range(4):
        h = fleet.host("n%d" % i, start=False, role="edge", zone="z%d" % (i % 2))
        addr = host_addr(h)
        cert, key = pki.issue(h.name, "/CN=%s" % h.name, ["IP:%s" % addr])
        h.extra = ("--listen", "%s:%d" % (addr, PORT), "--tls-cert", cert, "--tls-key", key, "--client-ca", pki.cert,
                   "--advertise", "https://%s:%d" % (addr, PORT))
        hosts.append(h.start(fleet.factory))
    # every node's record written (a node writes it once connected)
    wait_for(lambda: {n["node"] for n in fleet.ctl_json("fleet", "nodes") if n.get("_bound")} ==
             {h.name for h in hosts}, timeout=15, interval=0.1, what="the four nodes' records")
    # the targets: one group per advertising node, its labels
    out = os.path.join(workdir, "clsd-targets.json")
    fleet.ctl("fleet", "targets", "--out", out)
    with open(out) as f:
        groups = {g["labels"]["node"]: g for g in json.load(f)}
    assert set(groups) == {h.name for h in hosts}
    g = groups["n1"]
    assert g["targets"] == ["%s:%d" % (host_addr(hosts[1]), PORT)]
    assert g["labels"]["__scheme__"] == "https" and g["labels"]["__metrics_path__"] == "/metrics"
    assert g["labels"]["role"] == "edge" and g["labels"]["zone"] == "z1"
    # --watch keeps it current: a fifth node appears in the file, and goes when it stops
    watcher = subprocess.Popen(fleet.cluster.switch.argv(
        fleet_ctl_binary(), "--fleet", fleet.urls, "--fleet-prefix", fleet.prefix,
        *fleet.ctl_auth(), "fleet", "targets", "--out", out, "--watch"), stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE)
    prom = None
    try:
        extra = fleet.host("n9", start=False, role="edge")
        extra.extra = ("--advertise", "https://%s:%d" % (host_addr(extra), PORT))
        extra.start(fleet.factory)

        def nodes_in_file():
            try:
                with open(out) as f:
                    return {g["labels"]["node"] for g in json.load(f)}
            except (OSError, ValueError):
                return set()
        wait_for(lambda: "n9" in nodes_in_file(), timeout=10, interval=0.1, what="n9 in the targets file")
        extra.clsd.stop()
        wait_for(lambda: nodes_in_file() == {h.name for h in hosts}, timeout=15, interval=0.2,
                 what="n9 gone from the targets file")
        # a real Prometheus over mutual TLS, its targets from that file
        rev = fleet.apply(dropper(bpf), workdir)
        fleet.wait_converged("edge-drop", rev, {h.name for h in hosts})
        cfg = os.path.join(workdir, "prometheus.yml")
        with open(cfg, "w") as f:
            f.write("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n"
                    "  - job_name: clsd\n    tls_config:\n      ca_file: %s\n      cert_file: %s\n      key_file: %s\n"
                    "    file_sd_configs:\n      - files: ['%s']\n        refresh_interval: 1s\n"
                    % (pki.cert, client, client_key, out))
        prom_port = 9390
        prom = fleet.cluster.switch.popen("prometheus", "--config.file=" + cfg,
                                          "--storage.tsdb.path=" + os.path.join(workdir, "tsdb"),
                                          "--web.listen-address=127.0.0.1:%d" % prom_port,
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        papi = Api(lambda: NetnsHTTPConnection(fleet.cluster.switch, "127.0.0.1", prom_port))

        def all_up():
            try:
                res = prom_query(papi, 'up{job="clsd"}')
            except (OSError, AssertionError):  # not listening yet, or 503 while its TSDB starts
                return None
            return len(res) == 4 and all(r["value"][1] == "1" for r in res) or None
        wait_for(all_up, timeout=30, interval=0.25, what="Prometheus scraping the 4 nodes over mutual TLS")
        sent = {}
        for i, h in enumerate(hosts):
            sent[h.name] = 5 * (i + 1)
            udp_exchange(h.peer, h.ns, h.addr, {9: sent[h.name]}, timeout=0.5)
        total = sum(sent.values())

        def summed():
            try:
                res = prom_query(papi, 'sum by (policy) (drops{policy="edge-drop"})')
            except (OSError, AssertionError):
                return None
            return res if res and float(res[0]["value"][1]) == total else None
        res = wait_for(summed, timeout=20, interval=0.25, what="Prometheus to sum the fleet's drops")
        assert res[0]["metric"] == {"policy": "edge-drop"}
        per_node = {r["metric"]["node"]: float(r["value"][1])
                    for r in prom_query(papi, 'sum by (node) (drops{policy="edge-drop"})')}
        assert per_node == {n: float(v) for n, v in sent.items()}
        # increase() over the last minute is Prometheus's extrapolation to the window's edges, not a
        # count: within a quarter of it once each series has a dozen samples (exact above, by the sums)
        time.sleep(12)
        inc = prom_query(papi, 'sum by (policy) (increase(drops{policy="edge-drop"}[1m]))')
        assert inc and abs(float(inc[0]["value"][1]) - total) <= total * 0.25, (inc, total)
        # clsctl fleet top reads the same numbers from the nodes themselves, at once
        top = fleet.ctl("--json", "--cacert", pki.cert, "--cert", client, "--key", client_key, "fleet", "top",
                        "edge-drop")
        rows = json.loads(top.stdout)
        got = {r["node"]: r["value"] for r in rows if r["metric"] == "drops"}
        assert got == dict({n: float(v) for n, v in sent.items()}, **{"(fleet)": float(total)}), rows
        table = fleet.ctl("--cacert", pki.cert, "--cert", client, "--key", client_key, "fleet", "top",
                          "edge-drop").stdout
        assert table.splitlines()[0].split() == ["NODE", "METRIC", "VALUE", "RATE/S"]
        assert "(fleet)" in table and str(total) in table
        # without client certificates the nodes refuse: each said on stderr, exit 0 with what it could read
        p = fleet.ctl("--cacert", pki.cert, "fleet", "top", "edge-drop")
        assert "401" in p.stderr or "unauthorized" in p.stderr, p.stderr
        # no node holds this policy
        p = fleet.ctl("fleet", "top", "nosuch", check=1)
        assert "no live node" in p.stderr
    finally:
        watcher.terminate()
        watcher.wait()
        if prom:
            prom.kill()
            prom.wait()


def fleet_ctl_binary():
    return CLSCTL
