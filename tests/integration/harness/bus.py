"""A dbus-daemon of the test's own (the bus fixture) with clsd's policy, and a clsd on it (dclsd)."""
import json
import os
import subprocess
import tempfile

import pytest

from harness.base import SOURCE_DIR, wait_for


NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps=-all", "--bounding-set=-all"]
BUS_CONF = """<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-BUS Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>system</type>
  <listen>unix:path=%(sock)s</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow user="*"/>
    <deny own="*"/>
    <deny send_type="method_call"/>
    <allow send_type="signal"/>
    <allow send_requested_reply="true" send_type="method_return"/>
    <allow send_requested_reply="true" send_type="error"/>
    <allow receive_type="method_call"/>
    <allow receive_type="method_return"/>
    <allow receive_type="error"/>
    <allow receive_type="signal"/>
    <allow send_destination="org.freedesktop.DBus" send_interface="org.freedesktop.DBus"/>
    <allow send_destination="org.freedesktop.DBus" send_interface="org.freedesktop.DBus.Introspectable"/>
    <allow send_destination="org.freedesktop.DBus" send_interface="org.freedesktop.DBus.Properties"/>
    <allow send_destination="org.freedesktop.DBus" send_interface="org.freedesktop.DBus.Monitoring"/>
  </policy>
  <include>%(policy)s</include>
</busconfig>
"""


class Bus:
    def __init__(self, sock):
        self.sock = sock
        self.address = "unix:path=" + sock

    def busctl(self, *args, prefix=(), check=True):
        r = subprocess.run([*prefix, "busctl", "--address=" + self.address, *args], capture_output=True, text=True,
                           timeout=15)
        if check:
            assert r.returncode == 0, "busctl %s: %s%s" % (" ".join(args), r.stdout, r.stderr)
        return r

    def call(self, method, *args, path="/org/clsd1", iface="org.clsd1.Manager", prefix=(), check=True):
        return self.busctl("--json=short", "call", "org.clsd1", path, iface, method, *args, prefix=prefix,
                           check=check)

    def prop(self, name, path="/org/clsd1", iface="org.clsd1.Manager", prefix=()):
        r = self.busctl("--json=short", "get-property", "org.clsd1", path, iface, name, prefix=prefix)
        return json.loads(r.stdout)["data"]


@pytest.fixture
def bus():
    d = tempfile.mkdtemp(prefix="clsdt-bus-", dir="/tmp")
    os.chmod(d, 0o755)  # the unprivileged caller must reach the socket
    sock = os.path.join(d, "bus")
    conf = os.path.join(d, "bus.conf")
    with open(conf, "w") as f:
        f.write(BUS_CONF % {"sock": sock, "policy": os.path.join(SOURCE_DIR, "systemd", "org.clsd1.conf")})
    p = subprocess.Popen(["dbus-daemon", "--config-file=" + conf, "--nofork", "--nopidfile"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_for(lambda: os.path.exists(sock), timeout=5, what="dbus-daemon's socket")
        yield Bus(sock)
    finally:
        p.kill()
        p.wait()
        subprocess.run(["rm", "-rf", d])


@pytest.fixture
def dclsd(net, clsd_factory, bus):
    c = clsd_factory(net.a, name="d", start=False)
    c.env["DBUS_SYSTEM_BUS_ADDRESS"] = bus.address
    c.start()
    wait_for(lambda: "D-Bus: org.clsd1 on the system bus" in c.log(), timeout=5, what="clsd on the bus")
    return c

