"""What every part of the harness uses: where the build is, the addresses of a test's veth pair,
run(), wait_for() and digests; a document's filter and its status."""
import hashlib
import os
import secrets
import subprocess
import time


SOURCE_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
BUILD_DIR = os.environ.get("CLSD_BUILD_DIR") or os.path.join(SOURCE_DIR, "build")
# Where the tests' objects named by path are: clsd --object-dir for each
TEST_OBJECT_DIRS = sorted({SOURCE_DIR, BUILD_DIR, "/tmp", os.environ.get("CLSD_TEST_BPF_DIR") or SOURCE_DIR})
CLSD = os.path.join(BUILD_DIR, "clsd")
CLSCTL = os.path.join(BUILD_DIR, "clsctl")
PYTHON = "/usr/bin/python3"

# Addresses of the two ends of the veth pair of every test topology.
ADDR_A, ADDR_B = "198.18.0.1", "198.18.0.2"
ADDR6_A, ADDR6_B = "2001:db8::1", "2001:db8::2"
IF_A, IF_B = "va", "vb"

HEALTH_TIMEOUT = 5.0
CLONE_NEWNET = 0x40000000
# A bpf filesystem of the tests' own: `ip netns exec` remounts /sys, and every bpffs mount is a new
# instance, so tcx pins must live on a mount that outlives each clsd process.
# Each run of the suite pins under a bpffs of its own, mounted at its start and taken away at its end:
# two runs at once (a developer's beside CI's) must not unmount each other's pins.
BPFFS_ROOT = "/run/clsdt-bpffs.%d" % os.getpid()




def run(argv, check=True, timeout=15, input=None):
    """Runs argv, returns the CompletedProcess (text); raises with stdout/stderr when check fails."""
    p = subprocess.run(argv, input=input, capture_output=True, text=True, timeout=timeout)
    if check and p.returncode != 0:
        raise AssertionError("%s exited %d\nstdout: %s\nstderr: %s" %
                             (" ".join(argv), p.returncode, p.stdout, p.stderr))
    return p


def wait_for(predicate, timeout=2.0, interval=0.01, what="condition"):
    """Polls predicate until it returns something true; returns that, or fails after timeout."""
    deadline = time.monotonic() + timeout
    while True:
        v = predicate()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError("timed out after %.1f s waiting for %s" % (timeout, what))
        time.sleep(interval)


def sha256_digest(data):
    return "sha256:" + hashlib.sha256(data).hexdigest()


def file_digest(path):
    with open(path, "rb") as f:
        return sha256_digest(f.read())


def unique_name():
    """A namespace name no other namespace has now: 4 random bytes, and drawn again if /run/netns holds
    it (a namespace that a killed run left behind must not fail a later test)."""
    while True:
        name = "clsdt-%x-%s" % (os.getpid() & 0xffff, secrets.token_hex(4))
        if not os.path.exists("/run/netns/" + name):
            return name




def filt(name, obj, **kw):
    """A Filter of a document: filt("web", digest, priority=10, program="count_pkts")."""
    f = {"name": name, "object": obj}
    f.update(kw)
    return f


def status_of(body, name, direction="ingress"):
    for s in body["status"][direction]:
        if s["name"] == name:
            return s
    raise AssertionError("no status for %s in %r" % (name, body))
