"""An operator's day, from a C file to an alert that reaches a person, with the real parts: clang builds
the classifier; clsctl image push --sign puts it in Debian's docker-registry (TLS, htpasswd) as bpfman's
image with a cosign signature; clsctl fleet diff, against a real etcd and two clsd hosts that trust the
key, exits 2 naming the one host where a foreign filter holds the priority; clsctl fleet apply; a real
Prometheus (Debian's), scraping the hosts over mutual TLS from clsctl fleet targets' file and evaluating
the rules clsd ships (contrib/prometheus/clsd-rules.yml, their `for:` shortened to a second), fires
ClsdFleetPolicyFailed for that host, and Debian's prometheus-alertmanager posts it to a webhook this
test holds. Then a rollout whose canary cannot apply halts, and ClsdFleetRolloutHalted reaches it too."""

import http.server
import json
import os
import re
import subprocess
import threading

import pytest

from harness.api import Pki
from harness.base import CLSCTL, SOURCE_DIR, run, wait_for
from harness.etcd import SUBNET, count_policy
from harness.registry import Registry

PORT = 8443
PROM_PORT, AM_PORT, HOOK_PORT = 9391, 9393, 9395


def host_addr(h):
    return "%s.%d" % (SUBNET, 10 + h.index)


class Webhook:
    """Alertmanager's webhook receiver: every alert it posts, kept."""

    def __init__(self, ns):
        self.alerts, self.lock = [], threading.Lock()
        hook = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                with hook.lock:
                    hook.alerts.extend(body.get("alerts", []))
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()
        self.server = ns.call(lambda: http.server.ThreadingHTTPServer(("127.0.0.1", HOOK_PORT), Handler))
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def firing(self, alertname, **labels):
        with self.lock:
            return [a for a in self.alerts if a["status"] == "firing" and a["labels"].get("alertname") == alertname
                    and all(a["labels"].get(k) == v for k, v in labels.items())]

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.mark.once
def test_from_a_c_file_to_an_alert_at_a_webhook(fleet, bpf, workdir):
    # clang: the classifier, from C
    obj = os.path.join(workdir, "count.bpf.o")
    multiarch = run(["gcc", "-print-multiarch"]).stdout.strip()
    run(["clang", "-O2", "-g", "-target", "bpf", "-I/usr/include/" + multiarch, "-c",
         os.path.join(SOURCE_DIR, "contrib", "bpf", "count.bpf.c"), "-o", obj])
    # its image, signed, in a registry on the fleet's switch
    reg = Registry(fleet.cluster.switch, workdir, "%s.254" % SUBNET).start()
    creds = reg.registries_file(os.path.join(workdir, "registries.json"))
    key = os.path.join(workdir, "cosign.key")
    run(["openssl", "genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", key])
    trusted = os.path.join(workdir, "trusted")
    os.makedirs(trusted)
    run(["openssl", "pkey", "-in", key, "-pubout", "-out", os.path.join(trusted, "cosign.pub")])
    ref = "oci://%s/edge/count:v1" % reg.host
    pinned = run(fleet.cluster.switch.argv(CLSCTL, "--registries", creds, "image", "push", obj, ref, "--sign",
                                           key), timeout=60).stdout.strip()
    assert pinned.startswith(ref + "@sha256:"), pinned
    pki = Pki(os.path.join(workdir, "pki"))
    client, client_key = pki.issue("prometheus", "/CN=prometheus")
    hosts = []
    for name in ("a1", "a2"):
        h = fleet.host(name, start=False, role="edge")
        addr = host_addr(h)
        cert, tls_key = pki.issue(h.name, "/CN=%s" % h.name, ["IP:%s" % addr])
        h.extra = ("--listen", "%s:%d" % (addr, PORT), "--tls-cert", cert, "--tls-key", tls_key, "--client-ca",
                   pki.cert, "--advertise", "https://%s:%d" % (addr, PORT), "--registries", creds,
                   "--trusted-keys", trusted)
        hosts.append(h.start(fleet.factory))
    wait_for(lambda: {n["node"] for n in fleet.ctl_json("fleet", "nodes") if n.get("_bound")} == {"a1", "a2"},
             timeout=15, interval=0.1, what="both nodes' records")
    policy = count_policy(bpf, labels={"role": "edge"})
    policy["ingress"][0]["object"] = pinned
    policy_file = os.path.join(workdir, "edge-count.json")
    with open(policy_file, "w") as f:
        json.dump(policy, f)
    # a foreign filter holds the policy's priority on a2 only: the fleet diff says so before the apply
    hosts[1].ns.add_foreign_filter("va", 10, bpf.drop_port)
    p = fleet.ctl("--registries", creds, "fleet", "diff", policy_file, check=2, timeout=60)
    rows = {l.split()[0]: l for l in p.stdout.splitlines()[1:] if l.strip()}
    assert set(rows) >= {"a1", "a2"}, p.stdout + p.stderr
    assert "conflict" in rows["a2"] and "foreign filter" in rows["a2"], p.stdout
    assert "add ingress" in rows["a1"], p.stdout
    targets = os.path.join(workdir, "clsd-targets.json")
    fleet.ctl("fleet", "targets", "--out", targets)
    # the shipped rules, each `for:` a second (the durations are an operator's; the expressions are tested)
    with open(os.path.join(SOURCE_DIR, "contrib", "prometheus", "clsd-rules.yml")) as f:
        rules = re.sub(r"for: \S+", "for: 1s", f.read())
    rules_path = os.path.join(workdir, "clsd-rules.yml")
    with open(rules_path, "w") as f:
        f.write(rules)
    am_cfg = os.path.join(workdir, "alertmanager.yml")
    with open(am_cfg, "w") as f:
        f.write("route:\n  receiver: hook\n  group_by: [alertname, node, policy]\n  group_wait: 1s\n"
                "  group_interval: 1s\n  repeat_interval: 1h\nreceivers:\n  - name: hook\n    webhook_configs:\n"
                "      - url: http://127.0.0.1:%d/\n        send_resolved: false\n" % HOOK_PORT)
    prom_cfg = os.path.join(workdir, "prometheus.yml")
    with open(prom_cfg, "w") as f:
        f.write("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n"
                "rule_files: ['%s']\nalerting:\n  alertmanagers:\n    - static_configs:\n"
                "        - targets: ['127.0.0.1:%d']\nscrape_configs:\n  - job_name: clsd\n    tls_config:\n"
                "      ca_file: %s\n      cert_file: %s\n      key_file: %s\n    file_sd_configs:\n"
                "      - files: ['%s']\n        refresh_interval: 1s\n"
                % (rules_path, AM_PORT, pki.cert, client, client_key, targets))
    switch = fleet.cluster.switch
    hook = Webhook(switch)
    procs = []
    try:
        procs.append(switch.popen("prometheus-alertmanager", "--config.file=" + am_cfg,
                                  "--storage.path=" + os.path.join(workdir, "am"),
                                  "--web.listen-address=127.0.0.1:%d" % AM_PORT,
                                  "--cluster.listen-address=", stdout=subprocess.DEVNULL,
                                  stderr=open(os.path.join(workdir, "am.log"), "w")))
        procs.append(switch.popen("prometheus", "--config.file=" + prom_cfg,
                                  "--storage.tsdb.path=" + os.path.join(workdir, "tsdb"),
                                  "--web.listen-address=127.0.0.1:%d" % PROM_PORT, stdout=subprocess.DEVNULL,
                                  stderr=open(os.path.join(workdir, "prometheus.log"), "w")))
        # applied all the same: a1 pulls, verifies and attaches it; a2 cannot, and a person is told
        fleet.ctl("--registries", creds, "fleet", "apply", policy_file, timeout=60)
        got = wait_for(lambda: hook.firing("ClsdFleetPolicyFailed", policy="edge-count"), timeout=60,
                       interval=0.25, what="ClsdFleetPolicyFailed at the webhook")
        assert {a["labels"]["node"] for a in got} == {"a2"}, got
        assert got[0]["labels"]["severity"] == "page" and "a2" in got[0]["annotations"]["summary"]
        # a1 runs the signed image it pulled, and counts traffic
        assert hosts[0].prefs() == [10] and hosts[0].send(5) == 5
        # a rollout whose canary cannot apply (the foreign filter on both hosts): it halts
        hosts[0].ns.add_foreign_filter("va", 30, bpf.drop_port)
        halting = count_policy(bpf, name="edge-halt", prio=30, labels={"role": "edge"})
        hosts[1].ns.add_foreign_filter("va", 30, bpf.drop_port)
        halting["rollout"] = {"waves": [1, "100%"], "hold": "1s", "confirm": "0"}
        fleet.apply(halting, workdir)
        got = wait_for(lambda: hook.firing("ClsdFleetRolloutHalted", policy="edge-halt"), timeout=60,
                       interval=0.25, what="ClsdFleetRolloutHalted at the webhook")
        assert got[0]["labels"]["rollout"] and "halted" in got[0]["annotations"]["summary"], got
    finally:
        for p in procs:
            p.kill()
            p.wait()
        hook.close()
        reg.close()
