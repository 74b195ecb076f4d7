"""The fleet with its objects only in a registry: a real 3-member etcd, 4 hosts in namespaces, Debian's
docker-registry over TLS (htpasswd) on the fleet's switch. clsctl fleet apply pins the image and writes
no object to etcd; each host pulls it (once, after a jittered wait) and counts traffic. With the
registry down during a change, hosts say why in their status, keep what they run, and converge once
it is back."""

import json
import os

from harness.base import BUILD_DIR, SOURCE_DIR, wait_for
from harness.etcd import SUBNET
from harness.registry import Registry


def read(path):
    with open(path, "rb") as f:
        return f.read()


def policy(obj, name="edge-count", **extra):
    return {"name": name, "match": {"ifname": ["va"]},
            "ingress": [dict({"name": "c", "object": obj, "priority": 10}, **extra)]}


def test_the_fleet_pulls_from_the_registry_and_rides_out_the_registry_down(fleet, bpf, workdir):  # noqa: F811
    reg = Registry(fleet.cluster.switch, workdir, "%s.254" % SUBNET)
    try:
        reg.start()
        creds = reg.registries_file(os.path.join(workdir, "registries.json"))
        md = reg.push_image("fleet/count", "v1", read(bpf.count))
        hosts = []
        for i in range(4):
            h = fleet.host("h%d" % i, start=False, role="edge")
            h.extra = ("--registries", creds)
            hosts.append(h.start(fleet.factory))
        path = os.path.join(workdir, "edge.json")
        with open(path, "w") as f:
            json.dump(policy("oci://%s/fleet/count:v1" % reg.host), f)
        rev = fleet.ctl_json("fleet", "apply", path, "--registries", creds)["revision"]
        fleet.wait_converged("edge-count", rev, {h.name for h in hosts}, timeout=20)
        for h in hosts:
            assert h.send(5) == 5, h.name
            log = h.clsd.log_this_run()
            assert log.count("pulled oci://%s/fleet/count:v1@%s" % (reg.host, md)) == 1, h.name
            assert "fetched from etcd" not in log
        # the policy names the pinned image and the object's digest; etcd holds no object
        got = hosts[0].clsd.api.get("/policies/edge-count").json
        assert got["ingress"][0]["object"].endswith("@" + md), got
        keys = fleet.ctl("fleet", "ls").stdout
        assert "objects/" not in keys
        # the registry down; a change pinned whole (manifest and object digests) needs no pull by clsctl
        md2 = reg.push_image("fleet/count", "v2", read(bpf.count_v2))
        with open(bpf.count_v2, "rb") as f:
            import hashlib
            obj2 = "sha256:" + hashlib.sha256(f.read()).hexdigest()
        reg.stop()
        with open(path, "w") as f:
            json.dump(policy("oci://%s/fleet/count@%s" % (reg.host, md2), digest=obj2), f)
        rev2 = fleet.ctl_json("fleet", "apply", path)["revision"]

        def failing():
            st = fleet.status("edge-count")
            return len(st) == 4 and all(r["state"] == "failed" and reg.host in r.get("error", "")
                                        for r in st.values())
        try:
            wait_for(failing, timeout=15, interval=0.2, what="every host failing to pull")
        except AssertionError:
            raise AssertionError(json.dumps(list(fleet.status("edge-count").values()), indent=1))
        for h in hosts:  # what ran goes on running
            assert h.send(3) == 3, h.name
        reg.start()
        fleet.wait_converged("edge-count", rev2, {h.name for h in hosts}, timeout=60)
        for h in hosts:
            assert h.send(4) == 4, h.name
            got = h.clsd.api.get("/policies/edge-count").json["ingress"][0]
            assert got["digest"] == obj2 and got["object"].endswith("@" + md2)
    finally:
        reg.close()


def test_the_registry_bench_in_short_form():
    """bench/fleet-registry with 4 hosts and 2 rounds (docs/PERFORMANCE.md's figures are 20 hosts): every host
    pulls each change's 2 MiB image and applies it (the bench dies otherwise), with 4 registry requests
    each (a 401, then the manifest, the configuration and the layer with the credentials)."""
    import subprocess
    root = SOURCE_DIR
    env = dict(os.environ, HOSTS="4", ROUNDS="2", BUILD_DIR=BUILD_DIR)
    p = subprocess.Popen(["/usr/bin/python3", os.path.join(root, "bench", "fleet-registry")], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out, err = p.communicate(timeout=300)
    except subprocess.TimeoutExpired:
        p.terminate()  # the bench cleans up on SIGTERM
        out, err = p.communicate(timeout=60)
    assert p.returncode == 0, out + err
    # the manifest, the configuration and the layer: the credentials go with the first (no 401 before it)
    assert "registry requests per node per change: 3.0" in out, out
    assert "CPU floor per change" in out, out
    registry = float(out.split("every host pulled and applied median")[1].split("ms")[0])
    assert 0 < registry < 5000, out
