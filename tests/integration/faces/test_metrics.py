"""Prometheus: GET /metrics on every listener and alone on --metrics-listen; promtool checks the
exposition, a real Prometheus 2.42 scrapes clsd, and a PromQL query over its HTTP API gives back the
packets the test sent. Map-derived metrics come from documents' "metrics"."""

import json
import os
import re
import socket
import subprocess
import time
import urllib.parse

import pytest

from harness.api import Api, assert_error, NetnsHTTPConnection
from harness.base import ADDR_A, filt, run, SOURCE_DIR, status_of, wait_for
from harness.metrics import parse_exposition, scrape, value
from harness.observe import ping, udp_exchange


SIZE_BOUNDS = [float(1 << i) for i in range(15)]  # proto-stats' size_hist: bucket i holds len <= 2^i

METRICS = [
    {"map": "bytes_by_proto", "name": "proto_packets_total", "type": "counter",
     "help": "Packets by IP family and protocol", "value": "packets",
     "labels": [{"name": "family", "from": "key.family"}, {"name": "proto", "from": "key.proto"}]},
    {"map": "bytes_by_proto", "name": "proto_bytes_total", "type": "counter", "value": "bytes",
     "labels": [{"name": "proto", "from": "key.proto"}]},
    {"map": "pkts_by_port", "name": "port_packets_total", "type": "counter",
     "labels": [{"name": "port", "from": "key"}]},
    {"map": "size_hist", "name": "packet_size_bytes", "type": "histogram", "help": "Packet sizes",
     "buckets": SIZE_BOUNDS},
]


def put_stats(api, ifname, metrics=METRICS, obj=None):
    r = api.put_classifier(ifname, {"ingress": [filt("stats", obj, priority=10, metrics=metrics)]})
    assert r.status == 200, r
    return r


@pytest.mark.vm
def test_metrics_pass_promtool_and_count_what_was_sent(net, clsd_factory, bpf):
    net.quiet()
    c = clsd_factory(net.a, name="clsd", args=["--bpf-stats"])
    r = put_stats(c.api, net.if_a, obj=bpf.proto_stats)
    assert r.json["document"]["ingress"][0]["metrics"][0]["name"] == "proto_packets_total"
    assert udp_exchange(net.b, net.a, ADDR_A, {5353: 7, 6000: 3}) == {5353: 7, 6000: 3}
    text = scrape(c.api)
    check = subprocess.run(["promtool", "check", "metrics"], input=text.encode(), capture_output=True)
    assert check.returncode == 0, check.stdout.decode() + check.stderr.decode()
    samples, types = parse_exposition(text)
    base = {"netns": "", "ifname": net.if_a, "direction": "ingress", "name": "stats"}
    # 10 datagrams and udp_exchange's marker
    assert value(samples, "proto_packets_total", family="FAMILY_IPV4", proto=17, **base) == 11
    assert value(samples, "port_packets_total", port=5353, **base) == 7
    assert value(samples, "port_packets_total", port=6000, **base) == 3
    assert types["proto_packets_total"] == "counter" and types["packet_size_bytes"] == "histogram"
    # The histogram: cumulative buckets, +Inf equal to _count, every packet once.
    buckets = [(float(l["le"]), v) for l, v in samples["packet_size_bytes_bucket"]]
    assert buckets == sorted(buckets) and buckets[-1][0] == float("inf")
    assert value(samples, "packet_size_bytes_count", **base) == buckets[-1][1] == 11
    # Each filter: attached, and with --bpf-stats its runs counted by the kernel.
    f = dict(base, pref=10, attach="cls_bpf")
    assert value(samples, "clsd_filter_attached", **f) == 1
    assert value(samples, "clsd_filter_run_count_total", **f) >= 11
    assert value(samples, "clsd_filter_run_time_seconds_total", **f) > 0
    assert value(samples, "clsd_bpf_stats_enabled") == 1
    assert value(samples, "clsd_documents", state="configured", source="api") == 1
    assert value(samples, "clsd_build_info", version=c.api.get("/version").json["version"]) == 1
    assert value(samples, "clsd_api_requests_total", route="/ifaces/{ifname}/classifier", code=200) == 1
    assert value(samples, "clsd_reconciles_total") >= 1
    st = status_of(c.api.get_classifier(net.if_a).json, "stats")
    assert st["run_count"] >= 11 and st["run_time_ns"] > 0
    assert c.api.get("/version").json["bpf_stats"] is True


def test_without_bpf_stats_runs_are_not_counted(net, clsd, bpf):
    put_stats(clsd.api, net.if_a, obj=bpf.proto_stats)
    ping(net.b, ADDR_A, count=3)
    samples, _ = parse_exposition(scrape(clsd.api))
    assert value(samples, "clsd_bpf_stats_enabled") == 0
    assert value(samples, "clsd_filter_attached", ifname=net.if_a, name="stats") == 1
    st = status_of(clsd.api.get_classifier(net.if_a).json, "stats")
    with open("/proc/sys/kernel/bpf_stats_enabled") as f:
        counting = f.read().strip() == "1"  # someone else has the kernel count (not this test's clsd)
    if counting:
        assert "clsd_filter_run_count_total" in samples and st["run_count"] is not None
    else:
        # Not counted: no series, and null (not 0, which would say "never ran") in the status.
        assert "clsd_filter_run_count_total" not in samples, samples.keys()
        assert "clsd_filter_run_time_seconds_total" not in samples
        assert st["run_count"] is None and st["run_time_ns"] is None
    assert clsd.api.get("/version").json["bpf_stats"] is False


def test_reads_and_scrapes_ask_the_kernel_for_no_dump(net, clsd, bpf):
    """GET /ifaces, GET of a document and /metrics are served from clsd's view kept by events; a
    foreign change is seen (an event) without any read asking for it."""
    api = clsd.api
    put_stats(api, net.if_a, obj=bpf.proto_stats)
    assert api.get("/ifaces").status == 200  # the first look reads the links and their filters
    samples, _ = parse_exposition(scrape(api))
    dumps = value(samples, "clsd_netlink_requests_total", type="dump")
    for _ in range(50):
        assert api.get("/ifaces").status == 200
        assert status_of(api.get_classifier(net.if_a).json, "stats")["attached"] is True
        scrape(api)
    samples, _ = parse_exposition(scrape(api))
    assert value(samples, "clsd_netlink_requests_total", type="dump") == dumps
    # The kernel stays the source of truth: a filter deleted behind clsd's back shows as repaired.
    st = status_of(api.get_classifier(net.if_a).json, "stats")
    net.a.run("tc", "filter", "del", "dev", net.if_a, "ingress", "pref", "10")
    wait_for(lambda: api.get_classifier(net.if_a).json["repairs"] == 1)
    assert status_of(api.get_classifier(net.if_a).json, "stats")["id"] == st["id"]
    samples, _ = parse_exposition(scrape(api))
    assert value(samples, "clsd_netlink_requests_total", type="dump") > dumps
    # GET /ifaces shows what the kernel has now, foreign filters too.
    net.a.run("tc", "filter", "add", "dev", net.if_a, "ingress", "pref", "7", "u32", "match", "u32", "0", "0",
              "classid", "1:1")
    (a,) = [i for i in api.get("/ifaces").json["ifaces"] if i["ifname"] == net.if_a]
    assert {f["pref"] for f in a["filters"] if f["owner"] == "foreign"} == {7}, a
    # An answer kept from an earlier GET is never served once something it shows changed.
    net.a.run("ip", "link", "add", "nv0", "type", "veth", "peer", "name", "nv1")
    assert {"nv0", "nv1"} <= {i["ifname"] for i in api.get("/ifaces").json["ifaces"]}
    assert api.put_classifier("nv0", {"ingress": [filt("n", bpf.count, priority=3)]}).status == 200
    (nv,) = [i for i in api.get("/ifaces").json["ifaces"] if i["ifname"] == "nv0"]
    assert nv["state"] == "configured" and [f["name"] for f in nv["filters"] if f["owner"] == "clsd"] == ["clsd:n"]
    net.a.run("ip", "link", "del", "nv0")
    assert "nv0" not in {i["ifname"] for i in api.get("/ifaces").json["ifaces"] if i["ifindex"]}


def test_errors_and_requests_are_counted_by_route_template(net, clsd, bpf):
    api = clsd.api
    for name in ("x1", "x2", "x3"):
        assert_error(api.get("/ifaces/%s/classifier" % name), 404, "document_not_found")
    assert_error(api.get("/nonsense/%d" % time.time_ns()), 404, "route_not_found")
    samples, _ = parse_exposition(scrape(api))
    assert value(samples, "clsd_api_requests_total", route="/ifaces/{ifname}/classifier", code=404) == 3
    assert value(samples, "clsd_api_requests_total", route="other", code=404) == 1
    assert value(samples, "clsd_api_errors_total", code="document_not_found") == 3
    assert not any("x1" in l.get("route", "") for l, _ in samples["clsd_api_requests_total"])


def test_bad_metric_declarations_are_refused(net, clsd, bpf):
    api = clsd.api
    good = METRICS[0]
    cases = [
        (dict(good, name="9bad"), 400, "invalid_value", "metrics[0].name"),
        (dict(good, name="clsd_mine"), 400, "invalid_value", "clsd_"),
        (dict(good, type="summary"), 400, "invalid_value", "metrics[0].type"),
        (dict(good, labels=[{"name": "ifname", "from": "key"}]), 400, "invalid_value", "own labels"),
        (dict(good, labels=[{"name": "p", "from": "value.x"}]), 400, "invalid_value", "labels[0].from"),
        (dict(good, labels=[{"name": "p"}]), 400, "missing_field", "labels[0].from"),
        (dict(good, colour="red"), 400, "unknown_field", "colour"),
        ({"map": "size_hist", "name": "h", "type": "histogram"}, 400, "missing_field", "buckets"),
        ({"map": "size_hist", "name": "h", "type": "histogram", "buckets": [2, 1]}, 400, "invalid_value",
         "increase"),
        (dict(good, buckets=[1]), 400, "invalid_value", "histograms"),
        (dict(good, map="nosuch"), 422, "map_not_found", "nosuch"),
    ]
    for m, status, code, words in cases:
        e = assert_error(api.put_classifier(net.if_a, {"ingress": [filt("s", bpf.proto_stats, metrics=[m])]}),
                         status, code)
        assert words in e["message"], e
    assert_error(api.put_classifier(net.if_a, {"ingress": [filt("s", bpf.proto_stats, metrics=[good, good])]}),
                 400, "invalid_value")
    # Nothing was stored by any of them.
    assert_error(api.get_classifier(net.if_a), 404, "document_not_found")


def test_a_field_the_map_does_not_have_leaves_that_metric_out(net, clsd, bpf):
    m = dict(METRICS[0], name="nope_total", value="nosuchfield")
    put_stats(clsd.api, net.if_a, metrics=[m, METRICS[2]], obj=bpf.proto_stats)
    udp_exchange(net.b, net.a, ADDR_A, {5353: 2})
    samples, types = parse_exposition(scrape(clsd.api))
    assert "nope_total" not in samples
    assert value(samples, "clsd_map_metric_failures_total") >= 1
    assert value(samples, "port_packets_total", port=5353, ifname=net.if_a) == 2


def free_port(ns):
    def pick():
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()
        return port
    return ns.call(pick)


def test_metrics_listen_serves_only_metrics_and_needs_no_token(net, clsd_factory, bpf):
    port = free_port(net.a)
    c = clsd_factory(net.a, name="m", args=["--metrics-listen", "127.0.0.1:%d" % port])
    put_stats(c.api, net.if_a, obj=bpf.proto_stats)
    m = Api(lambda: NetnsHTTPConnection(net.a, "127.0.0.1", port))
    r = m.request("GET", "/metrics")
    assert r.status == 200 and b"proto_packets_total" in r.body
    assert_error(m.request("GET", "/ifaces"), 404, "route_not_found")
    assert_error(m.request("DELETE", "/ifaces/%s/classifier" % net.if_a), 404, "route_not_found")
    assert_error(m.request("POST", "/metrics", body=b"x"), 405, "method_not_allowed")
    assert c.api.get_classifier(net.if_a).status == 200
    bad = run([c.binary, "--metrics-listen", "nonsense", "--state-dir", "/nonexistent"], check=False)
    assert bad.returncode != 0 and "--metrics-listen nonsense" in bad.stderr


@pytest.mark.once
def test_a_real_prometheus_scrapes_clsd(net, clsd_factory, bpf, workdir):
    net.quiet()
    port, prom_port = free_port(net.a), free_port(net.a)
    c = clsd_factory(net.a, name="p", args=["--metrics-listen", "127.0.0.1:%d" % port])
    put_stats(c.api, net.if_a, obj=bpf.proto_stats)
    assert udp_exchange(net.b, net.a, ADDR_A, {5353: 25}) == {5353: 25}
    cfg = os.path.join(workdir, "prometheus.yml")
    with open(cfg, "w") as f:
        f.write("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n"
                "  - job_name: clsd\n    static_configs:\n      - targets: ['127.0.0.1:%d']\n" % port)
    assert run(["promtool", "check", "config", cfg], check=False).returncode == 0
    prom = net.a.popen("prometheus", "--config.file=" + cfg, "--storage.tsdb.path=" + os.path.join(workdir, "tsdb"),
                       "--web.listen-address=127.0.0.1:%d" % prom_port, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
    papi = Api(lambda: NetnsHTTPConnection(net.a, "127.0.0.1", prom_port))
    try:
        q = 'port_packets_total{ifname="%s",port="5353"}' % net.if_a

        def answered():
            try:
                r = papi.request("GET", "/api/v1/query?query=" + urllib.parse.quote(q))
            except OSError:
                return None
            if r.status != 200:
                return None
            res = json.loads(r.body)["data"]["result"]
            return res or None
        res = wait_for(answered, timeout=30, interval=0.25, what="Prometheus to have scraped clsd")
        assert float(res[0]["value"][1]) == 25
        up = json.loads(papi.request("GET", "/api/v1/query?query=up").body)["data"]["result"]
        assert up[0]["value"][1] == "1"
    finally:
        prom.kill()
        prom.wait()


def test_a_document_with_metrics_is_stored_as_format_3(net, clsd, bpf):
    put_stats(clsd.api, net.if_a, obj=bpf.proto_stats)
    with open(os.path.join(clsd.state_dir, "documents", net.if_a + ".json")) as f:
        stored = json.load(f)
    assert stored["format"] == 3
    # and it comes back after a restart as it was
    assert clsd.stop() == 0
    clsd.start()
    assert clsd.api.get_classifier(net.if_a).json["document"]["ingress"][0]["metrics"] == \
        stored["spec"]["ingress"][0]["metrics"]


CONTRIB = os.path.join(SOURCE_DIR, "contrib")


def test_contrib_prometheus_and_grafana_name_only_what_clsd_serves(net, clsd_factory, bpf):
    prom = os.path.join(CONTRIB, "prometheus")
    for argv in (["promtool", "check", "config", "prometheus.yml"], ["promtool", "check", "rules", "clsd-rules.yml"],
                 ["promtool", "test", "rules", "clsd-rules.test.yml"]):
        r = subprocess.run(argv, cwd=prom, capture_output=True, text=True)
        assert r.returncode == 0, "%s:\n%s%s" % (" ".join(argv), r.stdout, r.stderr)
    # Every clsd_* series the dashboard and the rules use is one a clsd with a document serves.
    c = clsd_factory(net.a, name="g", args=["--bpf-stats"])
    put_stats(c.api, net.if_a, obj=bpf.proto_stats)
    samples, types = parse_exposition(scrape(c.api))
    served = set(samples) | set(types)  # a family with no series yet (no errors) is still served
    with open(os.path.join(CONTRIB, "grafana", "clsd.json")) as f:
        dash = json.load(f)
    exprs = [t["expr"] for p in dash["panels"] for t in p["targets"]]
    with open(os.path.join(prom, "clsd-rules.yml")) as f:
        exprs.append(f.read())
    used = set()
    for e in exprs:
        used |= set(re.findall(r"\bclsd_[a-z_]+\b", e))
    assert used, "no clsd metric in the dashboard?"
    # the fleet's families are a fleet node's (clsd --fleet, some once it holds a fleet policy or is in a
    # rollout): declared by the daemon's metrics (test_fleet_alerts.py sees them fire through Prometheus)
    fleet = {m for m in used if m.startswith("clsd_fleet_")}
    with open(os.path.join(SOURCE_DIR, "src", "daemon", "metrics.c")) as f:
        source = f.read()
    assert fleet and all('"%s"' % m in source for m in fleet), sorted(m for m in fleet if '"%s"' % m not in source)
    assert used - fleet <= set(served), "not served: %s" % sorted(used - fleet - set(served))
    assert {"clsd_filter_attached", "clsd_repairs_total", "clsd_filter_run_count_total"} <= used
