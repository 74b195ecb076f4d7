"""Every object libbpf opens is one clsd accepts: objects valid and wide along one axis (hundreds of
programs, relocations, maps, BTF types, a MiB of .rodata; tests/bpf/gen-wide) pass the inspection's
sandbox (glibc's qsort asks sysinfo(2) for the memory's size when libbpf sorts more than 1 KiB) whether
uploaded, named by path, in a hog or a policy, and their programs attach and run."""
import json
import os

import pytest


from harness.base import ADDR_A, CLSD, file_digest, filt, run, status_of, wait_for
from harness.metrics import metric, parse_exposition, value
from harness.objects import CRASHERS, WIDE_BPF
from harness.observe import ping, prog_map_id, read_u64

# programs each object has, as the upload lists them
PROGRAMS = {"programs-64": 64, "programs-512": 512}


@pytest.mark.parametrize("kind", WIDE_BPF)
def test_a_wide_object_is_accepted(api, bpf, kind):
    path = bpf.wide[kind]
    r = api.upload(path)
    assert r.status == 201, r
    o = r.json
    assert o["digest"] == file_digest(path)
    assert len(o["programs"]) == PROGRAMS.get(kind, 1), o["programs"][:3]
    if kind == "maps-64":
        assert len(o["maps"]) == 64
    # the object is inspected again at every start: restart-proof, nothing killed
    samples, _ = parse_exposition(api.get("/metrics").body.decode())
    assert value(samples, "clsd_worker_killed_total", signal="SIGSYS") == 0


def test_externs_and_maps_of_maps_are_accepted(api, bpf):
    r = api.upload(bpf.externs)
    assert r.status == 201, r
    assert sorted(p["name"] for p in r.json["programs"]) == ["act", "cls", "ext", "x"]
    assert {m["name"] for m in r.json["maps"]} >= {"outer", "in0", "pc"}


def test_the_last_of_64_programs_attaches_and_runs(api, bpf, net):
    """prog_63 of 64 (TC_ACT_OK for packets longer than 63 bytes) on egress, the 500-relocation counter on
    ingress: pings pass both ways and are counted in counts[0] (their mark is 0)."""
    doc = {"egress": [filt("p63", bpf.wide["programs-64"], program="prog_63", priority=10)],
           "ingress": [filt("many", bpf.wide["relocations-500"], program="count_many", priority=11)]}
    r = api.put_classifier(net.if_a, doc)
    assert r.status == 200, r
    assert status_of(r.json, "p63", "egress")["attached"] and status_of(r.json, "many")["attached"]
    assert net.a.filter_at(net.if_a, 10, hook="egress").name == "clsd:p63"
    many = net.a.filter_at(net.if_a, 11).id
    ping(net.b, ADDR_A, count=5)
    map_id = prog_map_id(many, "counts")
    wait_for(lambda: read_u64(map_id) >= 5, timeout=3, what="5 pings counted by count_many")


def test_wide_objects_by_path_in_a_dry_run_and_a_hog(clsd_factory, net, workdir, bpf):
    """Named by path, each is read and inspected by a worker: a dry run plans it, a hog attaches it, and
    clsd --check passes the hog."""
    hogs = os.path.join(workdir, "hogs.d")
    os.makedirs(hogs)
    with open(os.path.join(hogs, "va.json"), "w") as f:
        json.dump({"ifname": net.if_a, "ingress": [filt("wide", bpf.wide["programs-512"], program="prog_511",
                                                        priority=10)]}, f)
    p = run([CLSD, "--check", "--hogs-dir", hogs], check=False, timeout=60)
    assert p.returncode == 0, p
    c = clsd_factory(net.a, args=("--hogs-dir", hogs))
    g = wait_for(lambda: (lambda b: b if b.get("state") == "configured" else None)(
        c.api.get_classifier(net.if_a).json), timeout=20, what="the hog configured")
    assert status_of(g, "wide")["attached"], g
    assert net.a.filter_at(net.if_a, 10).name == "clsd:wide"
    for kind in ("relocations-70", "maps-64", "globals-200"):
        r = c.api.request("PUT", "/ifaces/lo/classifier?dry_run=1",
                          body={"ingress": [filt("w", bpf.wide[kind], priority=20)]})
        assert r.status == 200, (kind, r)


def test_a_policy_of_a_wide_object_applies(api, bpf, net):
    r = api.request("PUT", "/policies/wide", body={"match": {"ifname": [net.if_a]}, "ingress": [
        filt("p", bpf.wide["programs-64"], program="prog_0", priority=30)]})
    assert r.status == 200, r
    wait_for(lambda: net.a.filter_at(net.if_a, 30), timeout=5, what="the policy's filter")


def test_workers_killed_are_counted_by_signal(api, bpf):
    """A worker that dies of an object (libbpf 1.1 crashes on these with SIGSEGV) is counted under its
    signal's name; the inspection's sandbox refused nothing."""
    before = metric(api, "clsd_worker_crashes_total")
    for path in CRASHERS[:3]:
        assert api.upload(path).status == 422
    samples, _ = parse_exposition(api.get("/metrics").body.decode())
    assert value(samples, "clsd_worker_killed_total", signal="SIGSEGV") == 3
    assert value(samples, "clsd_worker_killed_total", signal="SIGSYS") == 0
    assert metric(api, "clsd_worker_crashes_total") - before == 3
