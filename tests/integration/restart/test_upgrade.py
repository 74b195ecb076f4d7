"""Upgrades: the clsd of the last release before restart survival (commit PREVIOUS, built from this
repository's history) leaves its state and attached programs; this clsd adopts them without loading
anything, and the counts go on. A document only this clsd can express (format 2) is left in place by
the older one, never misread."""

import json
import os
import subprocess

import pytest

from harness.base import ADDR_A, BUILD_DIR, filt, run, SOURCE_DIR, status_of
from harness.observe import ping, prog_map_id, read_counter


PREVIOUS = "9bbc570"  # issue 3's last commit


@pytest.fixture(scope="session")
def previous_clsd():
    out = os.path.join(BUILD_DIR, "previous-" + PREVIOUS)
    binary = os.path.join(out, "build", "clsd")
    if not os.path.exists(binary):
        src = os.path.join(out, "src")
        os.makedirs(src, exist_ok=True)
        archive = subprocess.run(["git", "-C", SOURCE_DIR, "archive", PREVIOUS], capture_output=True, check=True)
        subprocess.run(["tar", "-x", "-C", src], input=archive.stdout, check=True)
        run(["meson", "setup", os.path.join(out, "build"), src], timeout=120)
        run(["ninja", "-C", os.path.join(out, "build"), "clsd"], timeout=300)
    return binary


def test_this_clsd_adopts_what_the_previous_one_attached(net, clsd_factory, bpf, previous_clsd):
    c = clsd_factory(net.a, start=False)
    c.binary = previous_clsd
    c.start()
    r = c.api.put_classifier(net.if_a, {"ingress": [filt("c", bpf.count, priority=10)]})
    assert r.status == 200, r
    st = status_of(r.json, "c")
    counters = prog_map_id(st["id"], "counters")
    ping(net.b, ADDR_A, count=10)
    before, _ = read_counter(counters)
    assert c.stop() == 0

    c.binary = os.path.join(BUILD_DIR, "clsd")
    c.start()
    log = c.log_this_run()
    assert "adopted program count_pkts (id %d" % st["id"] in log and "loaded program" not in log, log
    assert net.a.filter_at(net.if_a, 10).id == st["id"]
    g = c.api.get_classifier(net.if_a).json
    assert g["state"] == "configured" and g["generation"] == r.json["generation"]
    assert read_counter(counters)[0] >= before
    ping(net.b, ADDR_A, count=5)
    assert read_counter(counters)[0] >= before + 5
    # From now on the program is pinned as well.
    assert any(n.endswith("-count_pkts") for n in os.listdir(os.path.join(c.bpffs_dir, "progs")))

    # A document without "maps" is still written as format 1: the previous clsd reads it.
    path = os.path.join(c.state_dir, "documents", net.if_a + ".json")
    with open(path) as f:
        assert json.load(f)["format"] == 1
    f = filt("c", bpf.count, priority=10, maps={"counters": {"reuse": True}})
    assert c.api.put_classifier(net.if_a, {"ingress": [f]}).status == 200
    with open(path) as fh:
        assert json.load(fh)["format"] == 2
    assert c.stop() == 0

    # The previous clsd does not guess at format 2: it leaves the file where it is and says why.
    c.binary = previous_clsd
    c.start()
    assert "format 2 is newer than this clsd understands (1)" in c.log_this_run()
    assert c.api.get_classifier(net.if_a).status == 404
    assert net.a.filter_at(net.if_a, 10).id == st["id"], "the previous clsd touched the filter"
    assert c.stop() == 0
    assert os.path.exists(path)
    c.binary = os.path.join(BUILD_DIR, "clsd")
    c.start()
    g = c.api.get_classifier(net.if_a).json
    assert g["state"] == "configured" and status_of(g, "c")["id"] == st["id"]
