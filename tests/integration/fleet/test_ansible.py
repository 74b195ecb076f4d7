"""The Ansible collection (contrib/ansible, clsd.net) with Debian's ansible-playbook against three hosts:
clsd in three network namespaces on a bridge, each over HTTPS with mutual TLS. The first run changes
every host, the second changes nothing, check mode reports a change and makes none, diff mode shows
it, and a host reached without a client certificate fails with clsd's reason."""

import os
import re
import subprocess

import pytest

from harness.api import tls_server
from harness.base import SOURCE_DIR
from harness.netns import netns_create, netns_destroy


pytestmark = pytest.mark.once

SUBNET = "198.18.201"
PORT = 8443


@pytest.fixture
def hosts(clsd_factory, workdir):
    switch = netns_create()
    made = [switch]
    try:
        switch.run("ip", "link", "add", "br0", "type", "bridge")
        switch.run("ip", "addr", "add", "%s.254/24" % SUBNET, "dev", "br0")
        switch.run("ip", "link", "set", "br0", "up")
        pki, tls = tls_server(workdir, addrs=["%s.%d" % (SUBNET, i) for i in (1, 2, 3)])
        out = []
        for i in (1, 2, 3):
            ns = netns_create()
            made.append(ns)
            ns.add_veth("up0", "p%d" % i, peer_ns=switch)
            switch.run("ip", "link", "set", "p%d" % i, "master", "br0", "up")
            ns.run("ip", "addr", "add", "%s.%d/24" % (SUBNET, i), "dev", "up0")
            ns.run("ip", "link", "set", "up0", "up")
            c = clsd_factory(ns, name="h%d" % i, args=("--listen", "%s.%d:%d" % (SUBNET, i, PORT), *tls,
                                                      "--client-ca", pki.cert))
            out.append((ns, c))
        yield switch, pki, out
    finally:
        for ns in made:
            netns_destroy(ns)


def playbook(switch, workdir, *args):
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(SOURCE_DIR, "contrib", "ansible"),
               ANSIBLE_HOST_KEY_CHECKING="False", ANSIBLE_NOCOLOR="1", ANSIBLE_LOCAL_TEMP=os.path.join(workdir, "tmp"),
               ANSIBLE_REMOTE_TEMP=os.path.join(workdir, "tmp"), HOME=workdir)
    p = subprocess.run(switch.argv("ansible-playbook", "-i", os.path.join(workdir, "hosts.ini"),
                                   os.path.join(SOURCE_DIR, "contrib", "ansible", "playbooks", "site.yml"), *args),
                       capture_output=True, text=True, env=env, timeout=300)
    recap = {m.group(1): {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", m.group(2))}
             for m in re.finditer(r"^(h\d)\s+:\s+(.*)$", p.stdout, re.M)}
    return p, recap


def test_the_collection_is_idempotent_and_honours_check_and_diff_mode(hosts, bpf, workdir):
    switch, pki, made = hosts
    ops = pki.issue("ops", "/CN=ops")
    with open(os.path.join(workdir, "hosts.ini"), "w") as f:
        f.write("[clsd]\n")
        for i in (1, 2, 3):
            f.write("h%d clsd_url=https://%s.%d:%d\n" % (i, SUBNET, i, PORT))
        f.write("\n[clsd:vars]\nansible_connection=local\nansible_python_interpreter=/usr/bin/python3\n"
                "clsd_ca=%s\nclsd_cert=%s\nclsd_key=%s\nclsd_object=%s\nclsd_uplink=up0\n"
                % (pki.cert, ops[0], ops[1], bpf.count))
    # first run: the object, the document and the policy on every host
    p, recap = playbook(switch, workdir)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-2000:]
    assert {h: (r["ok"], r["changed"], r["failed"]) for h, r in recap.items()} == \
        {h: (3, 3, 0) for h in ("h1", "h2", "h3")}, p.stdout[-3000:]
    for ns, c in made:
        assert ns.filter_at("up0", 10) is not None
        assert ns.filter_at("up0", 20, hook="egress") is not None
        assert c.api.get("/policies/veths").status == 200
    # second run: nothing to do
    p, recap = playbook(switch, workdir)
    assert p.returncode == 0 and all(r["changed"] == 0 for r in recap.values()) and len(recap) == 3, p.stdout[-3000:]
    gens = [c.api.get_classifier("up0").json["generation"] for _, c in made]
    # check mode with a new priority: reported, with its diff, and nothing changes
    p, recap = playbook(switch, workdir, "--check", "--diff", "-e", "clsd_priority=11")
    assert p.returncode == 0 and all(r["changed"] == 1 for r in recap.values()), p.stdout[-3000:]
    assert re.search(r'^-\s+"priority": 10,$', p.stdout, re.M) and re.search(r'^\+\s+"priority": 11,$', p.stdout, re.M), \
        p.stdout[-3000:]
    assert not re.search(r'^-\s+"egress"', p.stdout, re.M), p.stdout[-3000:]  # the policy's hook is not the document's
    for (ns, c), gen in zip(made, gens):
        assert ns.filter_at("up0", 10) is not None and ns.filter_at("up0", 11) is None
        assert c.api.get_classifier("up0").json["generation"] == gen
    # the same for real: only the document changes
    p, recap = playbook(switch, workdir, "-e", "clsd_priority=11")
    assert p.returncode == 0 and all(r["changed"] == 1 for r in recap.values()), p.stdout[-3000:]
    for ns, _ in made:
        assert ns.filter_at("up0", 11) is not None and ns.filter_at("up0", 10) is None
    # state=absent removes the interface's own document; the policy's hook stays, and a second run (the
    # interface now has only the policy's filters) has nothing to remove
    for changed in (1, 0):
        p, recap = playbook(switch, workdir, "-e", "clsd_state=absent")
        assert p.returncode == 0 and all(r["changed"] == changed for r in recap.values()), p.stdout[-3000:]
        for ns, c in made:
            assert ns.filter_at("up0", 11) is None and ns.filter_at("up0", 20, hook="egress") is not None
            assert c.api.get_classifier("up0").json["source"] != "api"
    # without the client certificate, clsd refuses, and the run says why
    with open(os.path.join(workdir, "hosts.ini"), "a") as f:
        f.write("clsd_cert=\nclsd_key=\n")
    p, recap = playbook(switch, workdir)
    assert p.returncode != 0 and all(r["failed"] == 1 for r in recap.values()), p.stdout[-3000:]
    assert "unauthorized" in p.stdout, p.stdout[-3000:]
