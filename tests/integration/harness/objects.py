"""The BPF objects the tests load: contrib's, tests/bpf's (compiled here when the build has none) and
the wide ones gen-wide makes."""
import glob
import os
import shutil
import subprocess
import tempfile

import pytest

from harness.base import BUILD_DIR, CLSCTL, CLSD, PYTHON, run, SOURCE_DIR


class BpfObjects:
    def __init__(self, contrib, tests):
        self.count = os.path.join(contrib, "count.bpf.o")
        self.drop_port = os.path.join(contrib, "drop-port.bpf.o")
        self.classid = os.path.join(contrib, "classid.bpf.o")
        # stats per IP family and protocol (struct keys), a per-CPU size histogram, packets per port
        self.proto_stats = os.path.join(contrib, "proto-stats.bpf.o")
        self.rejected = os.path.join(tests, "rejected.bpf.o")
        self.xdp = os.path.join(tests, "xdp.bpf.o")
        self.xdp_only = os.path.join(tests, "xdp-only.bpf.o")
        # count.bpf.c with a bigger map: the same instructions, so the same tag, but another program
        self.count_wide = os.path.join(tests, "count-wide.bpf.o")
        # a newer build of count.bpf.c: the same map, other instructions, one more map
        self.count_v2 = os.path.join(tests, "count-v2.bpf.o")
        # an act_bpf action that marks IPv4 packets DSCP EF, checksum mended
        self.set_dscp = os.path.join(contrib, "set-dscp.bpf.o")
        # programs in sections libbpf does not know: match_udp (classic), count_by_cb (an action),
        # count_all (direct action)
        self.custom_sec = os.path.join(tests, "custom-sec.bpf.o")
        # 32 programs (slow_0 … slow_31) the verifier takes about a tenth of a second each over
        self.slow_verify = os.path.join(tests, "slow-verify.bpf.o")
        self.slow_programs = ["slow_%d" % i for i in range(32)]
        # objects valid and wide along one axis (tests/bpf/gen-wide), and one with externs and map-in-map
        self.wide = {kind: os.path.join(tests, "wide-%s.bpf.o" % kind) for kind in WIDE_BPF}
        self.externs = os.path.join(tests, "externs.bpf.o")
        # drops every packet: valid, and wrong (on a node's uplink, it cuts etcd off)
        self.drop_all = os.path.join(tests, "drop-all.bpf.o")

    def all(self):
        return [self.count, self.drop_port, self.classid, self.rejected, self.xdp, self.xdp_only, self.set_dscp,
                self.custom_sec, self.slow_verify, self.externs, self.drop_all, *self.wide.values()]


TEST_BPF = ("rejected", "xdp", "xdp-only", "count-wide", "count-v2", "custom-sec", "slow-verify", "externs",
            "drop-all")
# tests/meson.build's list: the kinds of tests/bpf/gen-wide built
WIDE_BPF = ("programs-64", "programs-512", "relocations-70", "relocations-500", "maps-64", "subprograms-64",
            "btf-2000", "rodata-1024", "core-200", "globals-200")


def _compile_test_objects(out_dir):
    multiarch = run(["gcc", "-print-multiarch"]).stdout.strip()
    for name in TEST_BPF:
        src = os.path.join(SOURCE_DIR, "tests", "bpf", name + ".bpf.c")
        run(["clang", "-O2", "-g", "-target", "bpf", "-I/usr/include/" + multiarch, "-c", src, "-o",
             os.path.join(out_dir, name + ".bpf.o")], timeout=60)
    for kind in WIDE_BPF:
        src = os.path.join(out_dir, "wide-%s.bpf.c" % kind)
        run([PYTHON, os.path.join(SOURCE_DIR, "tests", "bpf", "gen-wide"), kind, src])
        run(["clang", "-O2", "-g", "-target", "bpf", "-I/usr/include/" + multiarch, "-c", src, "-o",
             src[:-2] + ".o"], timeout=60)


@pytest.fixture(scope="session")
def bpf():
    for prog in (CLSD, CLSCTL):
        assert os.access(prog, os.X_OK), "%s is missing; build with ninja -C %s" % (prog, BUILD_DIR)
    assert os.geteuid() == 0, "the integration tests need root (namespaces, tc, bpf)"
    contrib = os.path.join(BUILD_DIR, "contrib", "bpf")
    tmp = None
    tests = os.environ.get("CLSD_TEST_BPF_DIR")
    if not tests:
        built = os.path.join(BUILD_DIR, "tests", "bpf")
        if all(os.path.exists(os.path.join(built, n + ".bpf.o"))
               for n in TEST_BPF + tuple("wide-" + k for k in WIDE_BPF)):
            tests = built
        else:
            tmp = tempfile.mkdtemp(prefix="clsdt-bpf-")
            _compile_test_objects(tmp)
            tests = tmp
    objs = BpfObjects(contrib, tests)
    for p in objs.all():
        assert os.path.exists(p), "%s is missing" % p
    try:
        yield objs
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)


CRASHERS = sorted(glob.glob(os.path.join(SOURCE_DIR, "tests", "data", "crashers", "*.o")))


def sign(key, path, out=None, legacy=False):
    out = out or path + ".minisig"
    subprocess.run(["minisign", "-S", "-W", "-s", key, "-m", path, "-x", out, *(["-l"] if legacy else [])],
                   check=True, capture_output=True)
    return out


def setup_keys(workdir):
    d = os.path.join(workdir, "signing")
    trusted = os.path.join(workdir, "trusted")
    os.makedirs(d)
    os.makedirs(trusted)
    pub1, key1 = keypair(d, "k1")
    pub2, key2 = keypair(d, "k2")
    shutil.copy(pub1, trusted)
    return trusted, key1, key2, pub1


def keypair(d, name):
    pub, key = os.path.join(d, name + ".pub"), os.path.join(d, name + ".key")
    subprocess.run(["minisign", "-G", "-W", "-p", pub, "-s", key], check=True, capture_output=True)
    return pub, key
