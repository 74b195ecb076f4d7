"""Map statistics over REST: GET /ifaces/{ifname}/classifier/maps[/{map}] reads the attached programs'
maps from the kernel and decodes them through BTF. bpftool, reading the same map ids, is the
independent observer."""


import pytest

from harness.api import assert_error
from harness.base import ADDR_A, filt
from harness.observe import bpftool_json, ping, udp_exchange


def maps_of(api, ifname, **query):
    q = "&".join("%s=%s" % kv for kv in query.items())
    r = api.get("/ifaces/%s/classifier/maps%s" % (ifname, "?" + q if q else ""))
    assert r.status == 200, r
    return {m["name"]: m for m in r.json["maps"]}


def bpftool_dump(map_id):
    return bpftool_json("map", "dump", "id", str(map_id))


@pytest.mark.vm
def test_maps_are_decoded_through_btf_as_bpftool_reads_them(net, clsd, bpf):
    net.quiet()
    api = clsd.api
    r = api.put_classifier(net.if_a, {"ingress": [filt("stats", bpf.proto_stats, priority=10)]})
    assert r.status == 200, r
    got = udp_exchange(net.b, net.a, ADDR_A, {5353: 7, 6000: 3})
    assert got == {5353: 7, 6000: 3}
    ping(net.b, ADDR_A, count=4)
    maps = maps_of(api, net.if_a)
    assert set(maps) == {"bytes_by_proto", "size_hist", "pkts_by_port"}

    # A hash map with struct keys and values: fields by name, enums by name.
    m = maps["bytes_by_proto"]
    assert m["type"] == "hash" and m["key_size"] == 8 and m["value_size"] == 16
    assert m["btf"] == {"key": "struct flow_key", "value": "struct flow_stats"}
    assert m["filters"] == [{"ifname": net.if_a, "direction": "ingress", "pref": 10, "name": "stats"}]
    assert m["read"] == "batch" and m["next_cursor"] is None
    by_key = {(e["key"]["family"], e["key"]["proto"]): e["value"] for e in m["entries"]}
    # 10 datagrams and the marker (UDP, 17), 4 echo requests (ICMP, 1)
    assert by_key[("FAMILY_IPV4", 17)]["packets"] == 11
    assert by_key[("FAMILY_IPV4", 1)]["packets"] == 4
    tool = {}
    for e in bpftool_dump(m["id"]):
        f = e["formatted"]
        tool[(f["key"]["family"], f["key"]["proto"])] = f["value"]
    assert tool == by_key
    assert m["count"] == len(tool)

    # A hash map of plain integers.
    ports = {e["key"]: e["value"] for e in maps["pkts_by_port"]["entries"]}
    assert ports[5353] == 7 and ports[6000] == 3 and ports[40000] == 1
    assert ports == {e["formatted"]["key"]: e["formatted"]["value"] for e in bpftool_dump(maps["pkts_by_port"]["id"])}

    # A per-CPU array: each CPU's value, and their sum.
    h = maps["size_hist"]
    assert h["type"] == "percpu_array" and h["btf"] == {"key": "__u32", "value": "__u64"}
    assert len(h["entries"]) == 16
    tool = {e["formatted"]["key"]: [c["value"] for c in e["formatted"]["values"]] for e in bpftool_dump(h["id"])}
    for e in h["entries"]:
        assert e["values"] == tool[e["key"]]
        assert e["sum"] == sum(e["values"])
    assert sum(e["sum"] for e in h["entries"]) == 15


@pytest.mark.vm
def test_one_map_pages_with_a_cursor(net, clsd, bpf):
    api = clsd.api
    assert api.put_classifier(net.if_a, {"ingress": [filt("stats", bpf.proto_stats)]}).status == 200
    udp_exchange(net.b, net.a, ADDR_A, {p: 1 for p in range(7000, 7040)})
    for limit in (7, 2, 1):
        # every page but the last holds exactly limit entries, though a hash map's batch reads whole buckets
        seen, cursor, counts = [], None, []
        while True:
            r = api.get("/ifaces/%s/classifier/maps/pkts_by_port?limit=%d%s" % (
                net.if_a, limit, "&cursor=" + cursor if cursor else ""))
            assert r.status == 200, r
            seen += [e["key"] for e in r.json["entries"]]
            counts.append(r.json["count"])
            cursor = r.json["next_cursor"]
            if not cursor:
                break
        assert sorted(seen) == sorted(set(seen)), "an entry came twice"
        assert set(range(7000, 7040)) | {40000} == set(seen)
        assert all(c == limit for c in counts[:-1]) and counts[-1] <= limit, (limit, counts)
    # The same map by id; the size histogram by name; the whole list with a limit.
    mid = maps_of(api, net.if_a)["pkts_by_port"]["id"]
    assert api.get("/ifaces/%s/classifier/maps/%d" % (net.if_a, mid)).json["name"] == "pkts_by_port"
    assert len(maps_of(api, net.if_a, limit=3)["size_hist"]["entries"]) == 3


def test_unknown_maps_bad_pages_and_wrong_methods_on_maps_are_4xx(net, clsd, bpf):
    api = clsd.api
    assert api.put_classifier(net.if_a, {"ingress": [filt("stats", bpf.proto_stats)]}).status == 200
    base = "/ifaces/%s/classifier/maps" % net.if_a
    assert_error(api.get(base + "/nosuchmap"), 404, "unknown_map")
    assert_error(api.get(base + "?limit=0"), 400, "invalid_value")
    assert_error(api.get(base + "?limit=abc"), 400, "invalid_value")
    assert_error(api.get(base + "?cursor=1.00"), 400, "invalid_value")
    assert_error(api.get(base + "/size_hist?cursor=zz"), 400, "bad_cursor")
    assert_error(api.get(base + "/size_hist?cursor=1.0000"), 400, "bad_cursor")
    assert_error(api.get("/ifaces/nothere/classifier/maps"), 404, "document_not_found")
    assert_error(api.request("POST", base), 405, "method_not_allowed")
    # A cursor of a map that was replaced is told apart.
    r = api.get(base + "/size_hist?limit=2")
    cursor = r.json["next_cursor"]
    assert cursor
    assert api.delete_classifier(net.if_a).status == 204
    assert api.put_classifier(net.if_a, {"ingress": [filt("stats", bpf.proto_stats)]}).status == 200
    e = assert_error(api.get(base + "/size_hist?cursor=" + cursor), 400, "bad_cursor")
    assert "program was replaced" in e["message"]


def test_maps_of_two_filters_with_one_object_and_an_ambiguous_name(net, clsd, bpf):
    api = clsd.api
    doc = {"ingress": [filt("a", bpf.count, priority=10)], "egress": [filt("b", bpf.count_wide, priority=10)]}
    assert api.put_classifier(net.if_a, doc).status == 200
    r = api.get("/ifaces/%s/classifier/maps" % net.if_a)
    counters = [m for m in r.json["maps"] if m["name"] == "counters"]
    assert len(counters) == 2
    assert_error(api.get("/ifaces/%s/classifier/maps/counters" % net.if_a), 409, "map_ambiguous")
    one = api.get("/ifaces/%s/classifier/maps/%d" % (net.if_a, counters[0]["id"]))
    assert one.status == 200 and one.json["id"] == counters[0]["id"]
    ping(net.b, ADDR_A, count=3)
    ingress = [m for m in api.get("/ifaces/%s/classifier/maps" % net.if_a).json["maps"]
               if m["filters"][0]["direction"] == "ingress"][0]
    assert ingress["entries"][0]["value"]["packets"] >= 3
    assert ingress["btf"] == {"key": "__u32", "value": "struct counter"}
