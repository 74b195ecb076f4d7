"""Map writes: PUT and DELETE .../classifier/maps/{map}/entries (clsctl map set|rm) with the typed JSON
reads give, checked against the map's BTF: a port blocklist filled without bpftool, and what is
refused (a key out of range, a field the struct does not have, a delete from an array, a pointer)."""

import json
import os
import subprocess

from harness.api import assert_error
from harness.base import ADDR_A, filt, wait_for
from harness.observe import udp_exchange


def entries(api, ifname, m):
    return {json.dumps(e["key"]): e["value"] for e in api.get("/ifaces/%s/classifier/maps/%s" % (ifname, m)).json["entries"]}


def test_a_blocklist_filled_through_the_api_drops_what_it_names(net, clsd, bpf):
    api = clsd.api
    assert api.put_classifier(net.if_a, {"ingress": [filt("drop", bpf.drop_port, priority=10),
                                                     filt("count", bpf.count, priority=20)]}).status == 200
    net.quiet()
    assert udp_exchange(net.b, net.a, ADDR_A, {7777: 5})[7777] == 5
    # clsctl map set: the port is blocked at once
    clsd.ctl("map", "set", net.if_a, "blocked_ports", "7777", "1", check=0)
    assert entries(api, net.if_a, "blocked_ports") == {"7777": 1}
    assert udp_exchange(net.b, net.a, ADDR_A, {7777: 5, 7778: 5}) == {7777: 0, 7778: 5}
    # the REST form, and replacing an entry
    path = "/ifaces/%s/classifier/maps/blocked_ports/entries" % net.if_a
    assert api.request("PUT", path, {"key": 7778, "value": 2}).status == 204
    assert api.request("PUT", path, {"key": 7778, "value": 3}).status == 204
    assert entries(api, net.if_a, "blocked_ports") == {"7777": 1, "7778": 3}
    assert udp_exchange(net.b, net.a, ADDR_A, {7778: 3})[7778] == 0
    # clsctl map rm: the port passes again
    clsd.ctl("map", "rm", net.if_a, "blocked_ports", "7777", check=0)
    assert udp_exchange(net.b, net.a, ADDR_A, {7777: 4})[7777] == 4
    # a struct value by field name (count's counters), read back as written
    counters = "/ifaces/%s/classifier/maps/counters/entries" % net.if_a
    before = entries(api, net.if_a, "counters")["0"]
    assert api.request("PUT", counters, {"key": 0, "value": {"packets": 1000000}}).status == 204
    got = entries(api, net.if_a, "counters")["0"]
    assert got["packets"] >= 1000000 and got["bytes"] < before["bytes"] + 10000, (before, got)
    # a u64 past 2^63 as a plain JSON number (and as the decimal string reads show it), up to 2^64 - 1
    for v in (2**63, 2**64 - 1):
        # packets may move on while the test runs: the number written leaves it room to wrap not
        body = b'{"key": 0, "value": {"packets": %d, "bytes": "%d"}}' % (v - 2**16, v - 2**20)
        r = api.request("PUT", counters, body, content_type="application/json")
        assert r.status == 204, r
        got = entries(api, net.if_a, "counters")["0"]
        assert int(got["packets"]) >= v - 2**16 and int(got["bytes"]) >= v - 2**20, got
    r = api.request("PUT", counters, b'{"key": 0, "value": {"packets": %d}}' % 2**64, content_type="application/json")
    assert_error(r, 400, "invalid_value")
    assert "expected an integer from 0 to 18446744073709551615" in r.json["error"]["message"], r.json
    # what is refused, and nothing changes with it
    for body, status, code, words in (
        ({"key": 70000, "value": 1}, 400, "invalid_value", "key: expected an integer from 0 to 65535"),
        ({"key": -1, "value": 1}, 400, "invalid_value", "key: expected an integer from 0 to 65535"),
        ({"key": 5, "value": 256}, 400, "invalid_value", "value: expected an integer from 0 to 255"),
        ({"key": "x", "value": 1}, 400, "invalid_value", "key"),
        ({"key": 5}, 400, "missing_field", "value"),
        ({"key": 5, "value": 1, "ttl": 3}, 400, "unknown_field", "ttl"),
    ):
        r = api.request("PUT", path, body)
        assert_error(r, status, code)
        assert words in r.json["error"]["message"], r.json
    r = api.request("PUT", counters, {"key": 0, "value": {"packets": 1, "colour": 2}})
    assert_error(r, 400, "unknown_field")
    assert "value: no field colour" in r.json["error"]["message"], r.json
    assert_error(api.request("PUT", counters.replace("counters", "nosuch"), {"key": 0, "value": 0}), 404, "unknown_map")
    assert_error(api.request("DELETE", path, {"key": 4242}), 404, "entry_not_found")
    r = api.request("DELETE", counters, {"key": 0})
    assert_error(r, 422, "map_unwritable")
    assert_error(api.request("PUT", "/ifaces/%s/classifier/maps/dropped/entries" % net.if_a, {"key": 5, "value": 1}),
                 400, "invalid_value")
    assert_error(api.get(path), 405, "method_not_allowed")
    assert entries(api, net.if_a, "blocked_ports") == {"7778": 3}
    p = clsd.ctl("map", "set", net.if_a, "blocked_ports", "port", "1", check=1)
    assert "not JSON" in p.stderr, p.stderr


def test_configuration_maps_keep_their_entries_through_a_new_load_and_a_restart(net, clsd, bpf):
    """"config": true declares a map configuration: entries written through clsd are stored with the
    document and written again into a new load's map (its own instance here) and after a restart that
    found nothing to take back; entries of other maps are the kernel's only."""
    api = clsd.api
    net.quiet()
    path = "/ifaces/%s/classifier/maps/blocked_ports" % net.if_a

    def doc(**maps):
        return {"ingress": [filt("drop", bpf.drop_port, priority=10, maps=maps),
                            filt("count", bpf.count, priority=20)]}

    assert api.put_classifier(net.if_a, doc(blocked_ports={"config": True})).status == 200
    got = api.get_classifier(net.if_a).json["document"]["ingress"][0]["maps"]
    assert got == {"blocked_ports": {"reuse": True, "config": True}}, got
    clsd.ctl("map", "set", net.if_a, "blocked_ports", "7777", "1", check=0)
    clsd.ctl("map", "set", net.if_a, "blocked_ports", "7778", "1", check=0)
    clsd.ctl("map", "set", net.if_a, "blocked_ports", "7778", "2", check=0)  # replaced, not twice
    clsd.ctl("map", "set", net.if_a, "blocked_ports", "7779", "1", check=0)
    clsd.ctl("map", "rm", net.if_a, "blocked_ports", "7779", check=0)
    m = api.get(path).json
    assert m["config"] == {"stored": 2}, m
    assert api.get("/ifaces/%s/classifier/maps/counters" % net.if_a).json["config"] is None
    with open(os.path.join(clsd.state_dir, "map-entries.json")) as f:
        stored = json.load(f)
    assert stored == {"format": 1, "owners": {"api:/" + net.if_a: {"drop": {"blocked_ports": [
        {"key": 7777, "value": 1}, {"key": 7778, "value": 2}]}}}}, stored
    old_id = m["id"]

    # a change that loads nothing new leaves the map as it is: an entry deleted behind clsd's back stays
    # deleted (the map is the program's and the operator's; the store fills new loads' maps)
    subprocess.run(["bpftool", "map", "delete", "id", str(old_id), "key", "0x62", "0x1e"], check=True)  # 7778
    more = doc(blocked_ports={"config": True})
    more["egress"] = [filt("out", bpf.count, priority=30)]
    assert api.put_classifier(net.if_a, more).status == 200
    assert entries(api, net.if_a, "blocked_ports") == {"7777": 1}

    # a new load (the filter's own instance: a map of its own, empty) gets the stored entries first
    r = api.put_classifier(net.if_a, doc(blocked_ports={"config": True, "shared": False}))
    assert r.status == 200, r
    m = api.get(path).json
    assert m["id"] != old_id and entries(api, net.if_a, "blocked_ports") == {"7777": 1, "7778": 2}, m
    assert "filter drop: 2 stored entries written into its configuration maps" in clsd.log_this_run()
    assert udp_exchange(net.b, net.a, ADDR_A, {7777: 4, 7780: 4}) == {7777: 0, 7780: 4}

    # a restart that finds nothing to take back (no pins, nothing attached) loads again: configured
    assert clsd.stop() == 0
    subprocess.run(["rm", "-rf", clsd.bpffs_dir], check=True)
    net.a.run("tc", "filter", "del", "dev", net.if_a, "ingress")
    clsd.start()
    wait_for(lambda: api.get_classifier(net.if_a).json["state"] == "configured", what="configured again")
    assert api.get(path).json["id"] != m["id"]
    assert entries(api, net.if_a, "blocked_ports") == {"7777": 1, "7778": 2}
    assert udp_exchange(net.b, net.a, ADDR_A, {7777: 4, 7780: 4}) == {7777: 0, 7780: 4}

    # a document that no longer declares the map configuration forgets its entries
    assert api.put_classifier(net.if_a, doc()).status == 200
    assert api.get(path).json["config"] is None
    with open(os.path.join(clsd.state_dir, "map-entries.json")) as f:
        assert json.load(f)["owners"] == {}
    assert_error(api.put_classifier(net.if_a, doc(blocked_ports={"config": 1})), 400, "wrong_type")
