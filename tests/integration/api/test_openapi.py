"""The OpenAPI contract: against the running daemon, every operation openapi/clsd.yaml declares is served,
and every answer (successes and errors) has a status the spec lists for that operation and a body that
validates against the spec's schema (python3-jsonschema, Draft 2020-12, which OpenAPI 3.1 uses). The
spec's own schemas are checked as schemas, and its error codes against src/basic/error-code.h (the one list
of codes and their statuses)."""

import os
import re

import jsonschema
import pytest
import yaml

from harness.base import ADDR_A, file_digest, filt, SOURCE_DIR
from harness.netns import netns_create, netns_destroy
from harness.observe import udp_exchange
from harness.openapi import Contract, METHODS, SPEC_PATH


@pytest.fixture(scope="module")
def spec():
    with open(SPEC_PATH) as f:
        return yaml.safe_load(f)


def test_the_specs_schemas_are_schemas_and_its_codes_are_the_daemons(spec):
    for name, schema in spec["components"]["schemas"].items():
        jsonschema.Draft202012Validator.check_schema(schema)
    with open(os.path.join(SOURCE_DIR, "src", "basic", "error-code.h")) as f:
        table = dict((c, int(s)) for c, s in re.findall(r'X\([A-Z_]+, "([a-z_]+)", (\d{3})\)', f.read()))
    assert len(table) > 60
    assert set(spec["components"]["schemas"]["ErrorCode"]["enum"]) == set(table)
    # The table in the description says the same
    desc = spec["info"]["description"]
    for code, status in table.items():
        row = [l for l in desc.splitlines() if re.search(r"\b%s\b" % code, l) and l.startswith("|")]
        assert row and row[0].rstrip().endswith("| %d |" % status), "%s (%d) not in the table" % (code, status)


def test_every_operation_is_served_as_the_spec_says(spec, net, clsd, bpf):
    c = Contract(spec, clsd.api)
    api = clsd.api
    with open(bpf.proto_stats, "rb") as f:
        obj = f.read()
    digest = file_digest(bpf.proto_stats)

    c.request("GET", "/healthz")
    c.request("HEAD", "/healthz")
    c.request("GET", "/version")
    c.request("HEAD", "/version")
    c.request("POST", "/objects", body=obj, content_type="application/octet-stream")
    c.request("POST", "/objects", body=obj, content_type="application/octet-stream")  # 200: already there
    c.request("POST", "/objects", body=b"not an ELF", content_type="application/octet-stream")
    c.request("POST", "/objects", body=obj, content_type="text/plain")
    c.request("GET", "/objects")
    c.request("HEAD", "/objects")
    c.request("GET", "/objects/" + digest)
    c.request("HEAD", "/objects/" + digest)
    c.request("GET", "/objects/sha256:" + "0" * 64)

    doc = {"ingress": [filt("stats", digest, priority=10, metrics=[
        {"map": "pkts_by_port", "name": "port_packets_total", "type": "counter",
         "labels": [{"name": "port", "from": "key"}]}])]}
    base = "/ifaces/%s/classifier" % net.if_a
    c.request("PUT", base + "?dry_run=1", body=doc)
    c.request("PUT", base, body=doc)
    c.request("PUT", base, body={"ingress": [{"name": "x"}]})
    c.request("PUT", base, body=doc, headers={"If-Match": '"999"'})
    c.request("PUT", "/ifaces/nothere0/classifier", body=doc)  # 202: pending
    c.request("GET", base)
    c.request("HEAD", base)
    c.request("GET", "/ifaces")
    c.request("HEAD", "/ifaces")
    c.request("DELETE", "/objects/" + digest)  # 409: in use
    udp_exchange(net.b, net.a, ADDR_A, {5353: 3})
    c.request("GET", base + "/maps")
    c.request("GET", base + "/maps?limit=1")
    c.request("GET", base + "/maps/pkts_by_port?limit=1")
    c.request("GET", base + "/maps/size_hist")
    c.request("GET", base + "/maps/nosuchmap")
    c.request("GET", base + "/maps/size_hist?cursor=nonsense")
    c.request("PUT", base + "/maps/pkts_by_port/entries", body={"key": 5353, "value": 7})
    c.request("PUT", base + "/maps/pkts_by_port/entries", body={"key": "no", "value": 7})
    c.request("DELETE", base + "/maps/pkts_by_port/entries", body={"key": 5353})
    c.request("DELETE", base + "/maps/pkts_by_port/entries", body={"key": 5353})  # 404: gone
    c.request("DELETE", base + "/maps/size_hist/entries", body={"key": 0})  # 422: an array
    c.request("GET", "/metrics")

    other = netns_create()
    try:
        other.run("ip", "link", "add", "o0", "type", "veth", "peer", "name", "o1")
        nbase = "/netns/%s/ifaces/o0/classifier" % other.name
        c.request("GET", "/netns")
        c.request("HEAD", "/netns")
        c.request("PUT", nbase, body={"ingress": [filt("n", digest)]})
        c.request("PUT", nbase + "?dry_run=1", body={"ingress": [filt("n", digest)]})
        c.request("GET", nbase)
        c.request("GET", "/netns/%s/ifaces" % other.name)
        c.request("GET", nbase + "/maps")
        c.request("GET", nbase + "/maps/size_hist")
        c.request("PUT", nbase + "/maps/size_hist/entries", body={"key": 0})  # 400: no value
        c.request("DELETE", nbase + "/maps/size_hist/entries", body={"key": 0})  # 422: an array
        c.request("GET", "/netns/bad!name/ifaces")
        c.request("DELETE", nbase)
    finally:
        netns_destroy(other)

    pol = {"match": {"ifname": [net.if_a, "nothere*"]}, "order": 5,
           "egress": [filt("pe", digest, priority=7)]}
    c.request("PUT", "/policies/pol?dry_run=1", body=pol)
    c.request("PUT", "/policies/pol", body=pol)
    c.request("PUT", "/policies/pol", body={"match": {}})
    c.request("PUT", "/policies/pol", body=pol, headers={"If-Match": '"9"'})
    c.request("GET", "/policies")
    c.request("HEAD", "/policies")
    c.request("GET", "/policies/pol")
    c.request("HEAD", "/policies/pol")
    c.request("GET", "/policies/nope")
    c.request("GET", "/policies/bad!name")
    c.request("GET", "/policies/pol/maps")
    c.request("GET", "/policies/pol/maps?limit=0")
    c.request("GET", "/policies/nope/maps")
    c.request("GET", "/policies/pol/maps/pkts_by_port?limit=2")
    c.request("GET", "/policies/pol/maps/nosuchmap")
    c.request("PUT", "/policies/pol/maps/pkts_by_port/entries", body={"key": 53, "value": 1})
    c.request("PUT", "/policies/pol/maps/pkts_by_port/entries", body={"key": 53})
    c.request("PUT", "/policies/pol/maps/nosuchmap/entries", body={"key": 53, "value": 1})
    c.request("DELETE", "/policies/pol/maps/pkts_by_port/entries", body={"key": 53})
    c.request("DELETE", "/policies/pol/maps/pkts_by_port/entries", body={"key": 53})  # 404 now
    c.request("DELETE", "/policies/pol/maps/size_hist/entries", body={"key": 0})  # 422
    c.request("GET", base)
    c.request("DELETE", "/policies/pol")
    c.request("DELETE", "/policies/pol")  # 404 now

    # Methods a path does not have: 405 with Allow, as each operation lists.
    for path in ("/healthz", "/version", "/metrics", "/ifaces", base + "/maps", base + "/maps/size_hist", "/netns",
                 "/policies", "/policies/pol/maps", "/policies/pol/maps/size_hist"):
        r = api.request("POST", path, body=b"{}")
        assert r.status == 405 and r.headers.get("Allow"), (path, r)
    c.request("DELETE", base)
    c.request("DELETE", base)  # 404 now
    c.request("DELETE", "/ifaces/nothere0/classifier")
    c.request("DELETE", "/objects/" + digest)

    declared = {(t, m) for t, ops in spec["paths"].items() for m in ops if m in METHODS}
    missing = declared - c.seen
    assert not missing, "operations of the spec never exercised: %s" % sorted(missing)
