"""D-Bus: clsd as org.clsd1 on a real dbus-daemon (a private system bus of the test's own, with clsd's
policy file systemd/org.clsd1.conf), busctl as the client: introspection, every method and property,
PropertiesChanged after a DELETE, and an unprivileged caller refused on Reconcile."""

import contextlib
import json
import os
import subprocess
import threading

from harness.base import ADDR_A, filt, wait_for
from harness.bus import NOBODY
from harness.observe import ping


def test_the_bus_shows_clsds_methods_and_properties(net, bus, dclsd, bpf):
    api = dclsd.api
    assert api.put_classifier(net.if_a, {"ingress": [filt("c", bpf.count, priority=10)]}).status == 200
    intro = bus.busctl("introspect", "--xml-interface", "org.clsd1", "/org/clsd1").stdout
    for want in ('<interface name="org.clsd1.Manager">', '<method name="ListInterfaces">',
                 '<method name="GetInterface">', '<method name="GetMaps">', '<method name="Reconcile">',
                 '<property name="Version" type="s" access="read">', '<property name="InterfaceCount"',
                 '<property name="Degraded" type="b"', '<arg type="s" name="ifname" direction="in"/>',
                 'org.freedesktop.DBus.ObjectManager'):
        assert want in intro, want
    assert bus.prop("Version") == api.get("/version").json["version"]
    assert bus.prop("InterfaceCount") == 1
    assert bus.prop("Degraded") is False

    listed = json.loads(bus.call("ListInterfaces").stdout)["data"][0]
    assert listed == [["", net.if_a, "configured", "/org/clsd1/link/" + net.if_a]]
    got = json.loads(json.loads(bus.call("GetInterface", "ss", "", net.if_a).stdout)["data"][0])
    rest = api.get_classifier(net.if_a).json
    assert got["document"] == rest["document"] and got["state"] == "configured"
    assert got["status"]["ingress"][0]["id"] == rest["status"]["ingress"][0]["id"]
    ping(net.b, ADDR_A, count=4)
    maps = json.loads(json.loads(bus.call("GetMaps", "ss", "", net.if_a).stdout)["data"][0])
    counters = [m for m in maps["maps"] if m["name"] == "counters"][0]
    assert counters["entries"][0]["value"]["packets"] >= 4
    assert json.loads(bus.call("Reconcile").stdout)["data"] == [1]

    # The link object: every property, and in the object manager's list.
    link = "/org/clsd1/link/" + net.if_a
    props = {}
    for name in ("Name", "Netns", "State", "Source", "Ifindex", "Repairs", "LastRepair", "Error", "Filters"):
        props[name] = bus.prop(name, path=link, iface="org.clsd1.Link")
    assert props["Name"] == net.if_a and props["Netns"] == "" and props["State"] == "configured"
    assert props["Source"] == "api" and props["Ifindex"] == net.a.ifindex(net.if_a) and props["Repairs"] == 0
    assert props["Error"] == ["", ""]
    assert props["Filters"] == [["ingress", "c", 10, "cls_bpf", True, rest["status"]["ingress"][0]["id"],
                                 rest["status"]["ingress"][0]["tag"]]]
    intro = bus.busctl("introspect", "--xml-interface", "org.clsd1", link).stdout
    assert '<property name="Filters" type="a(ssqsbus)" access="read">' in intro
    managed = bus.busctl("--json=short", "call", "org.clsd1", "/org/clsd1", "org.freedesktop.DBus.ObjectManager",
                         "GetManagedObjects").stdout
    assert link in managed
    e = bus.call("GetInterface", "ss", "", "nothere", check=False)
    assert e.returncode != 0 and "no classifier document for nothere" in e.stderr


@contextlib.contextmanager
def monitor(bus):
    """busctl monitor on org.clsd1 while the block runs; yields a function giving the messages seen so far
    (decoded). It is in place once it shows a call of ours (a fixed sleep is not enough under ASan)."""
    # stdbuf: busctl writes to a pipe through stdio, which would hold messages back in its buffer
    mon = subprocess.Popen(["stdbuf", "-oL", "busctl", "--address=" + bus.address, "monitor", "org.clsd1", "--json=short"],
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    lines = []
    threading.Thread(target=lambda: lines.extend(mon.stdout), daemon=True).start()

    def messages():
        got = []
        for line in list(lines):
            try:
                got.append(json.loads(line))
            except ValueError:
                continue
        return got
    try:
        # in place once it shows a message (a line of text such as "Monitoring bus message stream." may come
        # before the monitor is)
        wait_for(lambda: bus.prop("InterfaceCount") is not None and messages(), timeout=10, what="busctl monitor")
        yield messages
    finally:
        mon.kill()
        mon.wait()


def test_properties_changed_after_a_delete_and_a_repair(net, bus, dclsd, bpf):
    api = dclsd.api
    assert api.put_classifier(net.if_a, {"ingress": [filt("c", bpf.count, priority=10)]}).status == 200
    link = "/org/clsd1/link/" + net.if_a
    with monitor(bus) as messages:
        def signals():
            got = []
            for m in messages():
                if m.get("member") in ("PropertiesChanged", "InterfacesRemoved"):
                    got.append((m["member"], m["path"], json.dumps(m.get("payload", {}))))
            return got

        def wait_signals(pred, what):
            try:
                wait_for(lambda: pred(signals()), timeout=5, what=what)
            except AssertionError as e:  # what was seen by then
                raise AssertionError("%s: %r" % (e, signals())) from None
        # A repair: the filter is deleted behind clsd's back and put back; Repairs goes to 1. (Changes
        # that meet before clsd announces them go out together: a link removed meanwhile is announced
        # removed, not changed; so the delete waits for the repair's announcement.)
        net.a.run("tc", "filter", "del", "dev", net.if_a, "ingress", "pref", "10")
        wait_signals(lambda s: any(p == link and m == "PropertiesChanged" and "Repairs" in b for m, p, b in s),
                     "PropertiesChanged with Repairs")
        assert api.get_classifier(net.if_a).json["repairs"] == 1
        assert api.delete_classifier(net.if_a).status == 204
        wait_signals(lambda s: any(p == "/org/clsd1" and m == "PropertiesChanged" and "InterfaceCount" in b
                                   for m, p, b in s) and any(m == "InterfacesRemoved" and link in b for m, p, b in s),
                     "InterfaceCount and InterfacesRemoved")
    assert bus.prop("InterfaceCount") == 0


def test_an_unprivileged_caller_reads_but_cannot_reconcile(net, bus, dclsd, bpf):
    assert dclsd.api.put_classifier(net.if_a, {"ingress": [filt("c", bpf.count)]}).status == 200
    # Reads are open to everyone.
    assert bus.prop("InterfaceCount", prefix=NOBODY) == 1
    assert json.loads(bus.call("ListInterfaces", prefix=NOBODY).stdout)["data"][0][0][1] == net.if_a
    # Reconcile needs root or CAP_NET_ADMIN.
    r = bus.call("Reconcile", prefix=NOBODY, check=False)
    # busctl shows org.freedesktop.DBus.Error.AccessDenied as "Access denied"; clsd's log says why
    assert r.returncode != 0 and "Access denied" in r.stderr, r.stderr
    assert "D-Bus: Reconcile refused to" in dclsd.log_this_run()
    assert "(uid 65534): needs root, CAP_NET_ADMIN" in dclsd.log_this_run()
    assert "D-Bus: Reconcile asked by" not in dclsd.log_this_run()
    # The same uid holding CAP_NET_ADMIN may.
    capable = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps=+net_admin",
               "--ambient-caps=+net_admin"]
    r = bus.call("Reconcile", prefix=capable, check=False)
    assert r.returncode == 0, r.stderr
    assert "D-Bus: Reconcile asked by" in dclsd.log_this_run()
    # Root of a user namespace of its own (unshare -Ur) holds every capability there, none on the host.
    asked = dclsd.log_this_run().count("D-Bus: Reconcile asked by")
    r = bus.call("Reconcile", prefix=NOBODY + ["unshare", "-Ur"], check=False)
    assert r.returncode != 0 and "Access denied" in r.stderr, (r.returncode, r.stderr)
    assert dclsd.log_this_run().count("D-Bus: Reconcile asked by") == asked


def test_the_access_file_gives_the_bus_its_roles(net, bus, clsd_factory, workdir):
    """The bus vouches for the caller's uid (its groups are the user database's, as dbus-daemon's own
    policies take them); the access file's grants apply to it too."""
    access = os.path.join(workdir, "access.json")
    with open(access, "w") as f:
        json.dump({"grants": [{"role": "operator", "user": "daemon"}, {"role": "reader", "user": 65534}]}, f)
    c = clsd_factory(net.a, name="d", start=False, args=("--access-file", access))
    c.env["DBUS_SYSTEM_BUS_ADDRESS"] = bus.address
    c.start()
    wait_for(lambda: "D-Bus: org.clsd1 on the system bus" in c.log(), timeout=5, what="clsd on the bus")
    # a reader may not
    r = bus.call("Reconcile", prefix=NOBODY, check=False)
    assert r.returncode != 0 and "Access denied" in r.stderr, r.stderr
    # an operator may, without any capability
    operator = ["setpriv", "--reuid=1", "--regid=1", "--clear-groups", "--inh-caps=-all", "--bounding-set=-all"]
    r = bus.call("Reconcile", prefix=operator, check=False)
    assert r.returncode == 0, r.stderr
    assert "D-Bus: Reconcile asked by" in c.log_this_run()
    # documents and map contents need the reader role: nobody (65534) has it, uid 2 has no role at all
    c.api.put_classifier(net.if_a, {})
    for who, ok in ((NOBODY, True), (operator, True), (NOBODY[:1] + ["--reuid=2", "--regid=2"] + NOBODY[3:], False)):
        for method in ("GetInterface", "GetMaps"):
            r = bus.call(method, "ss", "", net.if_a, prefix=who, check=False)
            assert (r.returncode == 0) == ok, (who, method, r.stderr)
            assert ok or "Access denied" in r.stderr, r.stderr
    assert "D-Bus: GetMaps refused to" in c.log_this_run() and "needs the reader role" in c.log_this_run()


def test_without_a_bus_clsd_runs_and_says_so(net, clsd):
    assert clsd.api.healthy()
    assert "D-Bus: no system bus" in clsd.log_this_run()


def test_an_error_that_changes_alone_is_announced(net, bus, dclsd, bpf):
    """A failed document whose reason changes, its state staying "failed": Error changes, and
    PropertiesChanged says so (a change is announced where it happens, whatever field it is)."""
    api = dclsd.api
    doc = {"ingress": [filt("a", bpf.count, priority=10), filt("b", bpf.count, priority=20)]}
    assert api.put_classifier("vx", doc).status == 202
    # The device comes under its document's name with foreign filters at both priorities: failed.
    net.a.run("ip", "link", "add", "vtmp", "type", "veth", "peer", "name", "vtmp-peer")
    for pref in (10, 20):
        net.a.add_foreign_filter("vtmp", pref, bpf.drop_port)
    net.a.run("ip", "link", "set", "vtmp", "name", "vx")
    link = "/org/clsd1/link/vx"
    wait_for(lambda: bus.prop("State", path=link, iface="org.clsd1.Link") == "failed", timeout=5,
             what="the document failed")
    first = bus.prop("Error", path=link, iface="org.clsd1.Link")
    assert first[0] == "priority_taken" and "priority 10" in first[1], first

    with monitor(bus) as messages:
        # The foreign filter at 10 goes: the retry now fails on 20, still "failed".
        net.a.run("tc", "filter", "del", "dev", "vx", "ingress", "pref", "10")
        wait_for(lambda: "priority 20" in bus.prop("Error", path=link, iface="org.clsd1.Link")[1], timeout=5,
                 what="the new reason")
        assert bus.prop("State", path=link, iface="org.clsd1.Link") == "failed"

        def announced():
            for m in messages():
                body = json.dumps(m.get("payload", {}))
                if m.get("member") == "PropertiesChanged" and m.get("path") == link and "priority 20" in body:
                    return True
            return False
        wait_for(announced, timeout=5, what="PropertiesChanged with the new Error")


def test_a_link_shows_the_policies_that_match_it(net, bus, dclsd, bpf):
    api = dclsd.api
    body = {"match": {"ifname": [net.if_a]}, "egress": [filt("p", bpf.count, priority=3)]}
    assert api.request("PUT", "/policies/pol", body=body).status == 200
    link = "/org/clsd1/link/" + net.if_a
    wait_for(lambda: bus.prop("Policies", path=link, iface="org.clsd1.Link") == ["pol"], timeout=5)
    assert bus.prop("Source", path=link, iface="org.clsd1.Link") == "policy"
    assert api.delete("/policies/pol").status == 200
    wait_for(lambda: bus.prop("InterfaceCount") == 0, timeout=5)
