"""Interfaces that appear, vanish and are renamed: documents follow names, not devices."""

from harness.base import filt, wait_for


def _names(ns, dev):
    return [f.name for f in ns.filters(dev)]


def test_rename_away_removes_clsd_filters_and_the_old_name_comes_back(api, bpf, net):
    net.a.add_veth("vx0", "vx1")
    assert api.put_classifier("vx0", {"ingress": [filt("web", bpf.count, priority=10)]}).status == 200
    net.a.add_foreign_filter("vx0", 20, bpf.drop_port)
    net.a.run("ip", "link", "set", "vx0", "name", "vy0")
    wait_for(lambda: api.get_classifier("vx0").json["state"] == "pending", what="the document to go pending")
    wait_for(lambda: "clsd:web" not in _names(net.a, "vy0"), what="clsd's filter to leave vy0")
    assert _names(net.a, "vy0") == ["drop-port.bpf.o:[tc]"]  # the foreign one stays
    # A new device under the old name gets the document.
    net.a.add_veth("vx0", "vx2")
    wait_for(lambda: "clsd:web" in _names(net.a, "vx0"), what="the document applied to the new vx0")
    assert api.get_classifier("vx0").json["state"] == "configured"
    assert "clsd:web" not in _names(net.a, "vy0")


def test_rename_to_a_documented_name_applies_that_document(api, bpf, net):
    net.a.add_veth("vx0", "vx1")
    assert api.put_classifier("vx0", {"ingress": [filt("a", bpf.count, priority=10)]}).status == 200
    r = api.put_classifier("vy0", {"ingress": [filt("b", bpf.drop_port, priority=11)]})
    assert r.status == 202 and r.json["state"] == "pending"
    net.a.run("ip", "link", "set", "vx0", "name", "vy0")
    wait_for(lambda: _names(net.a, "vy0") == ["clsd:b"], what="vy0's document to take the device over")
    assert api.get_classifier("vy0").json["state"] == "configured"
    assert api.get_classifier("vx0").json["state"] == "pending"


def test_a_document_goes_pending_when_its_interface_goes_and_applies_when_it_returns(api, bpf, net):
    net.a.add_veth("vx0", "vx1")
    assert api.put_classifier("vx0", {"ingress": [filt("web", bpf.count, priority=10)]}).status == 200
    net.a.run("ip", "link", "del", "vx0")
    wait_for(lambda: api.get_classifier("vx0").json["state"] == "pending", what="pending after removal")
    assert api.get_classifier("vx0").json["ifindex"] is None
    net.a.add_veth("vx0", "vx1")
    wait_for(lambda: "clsd:web" in _names(net.a, "vx0"), what="re-applied")
