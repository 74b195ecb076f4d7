"""The state directory across restarts: durable documents and objects, crash leftovers, quarantine."""

import glob
import json
import os

from harness.api import assert_error
from harness.base import file_digest, filt, status_of
from harness.netns import block_store_write
from harness.policies import veths


def test_stored_documents_survive_a_restart(net, clsd_factory, bpf):
    c = clsd_factory(net.a)
    digest = c.api.upload_ok(bpf.count)
    doc = {"ingress": [filt("web", digest, priority=10)], "egress": [filt("out", digest, priority=3)]}
    r = c.api.put_classifier(net.if_a, doc)
    assert r.status == 200, r
    files = os.listdir(os.path.join(c.state_dir, "documents"))
    assert files == [net.if_a + ".json"], files
    stored = json.load(open(os.path.join(c.state_dir, "documents", net.if_a + ".json")))
    assert isinstance(stored.get("format"), int), stored
    assert os.path.exists(os.path.join(c.state_dir, "objects", digest[len("sha256:"):] + ".o"))

    c.restart()
    g = c.api.get_classifier(net.if_a)
    assert g.status == 200
    assert g.json["document"] == r.json["document"]
    assert g.json["generation"] == r.json["generation"]
    assert g.headers["ETag"] == r.headers["ETag"]


def test_crash_leftovers_and_corrupt_documents(net, clsd_factory, bpf):
    c = clsd_factory(net.a)
    digest = c.api.upload_ok(bpf.count)
    r = c.api.put_classifier(net.if_a, {"ingress": [filt("web", digest, priority=10)]})
    assert r.status == 200, r
    assert c.stop() == 0

    docs = os.path.join(c.state_dir, "documents")
    good = open(os.path.join(docs, net.if_a + ".json")).read()
    # A write interrupted by a crash: the temp file of write_file_atomic(), cut in the middle.
    tmp = os.path.join(docs, ".%s.json.123.tmp" % net.if_a)
    with open(tmp, "w") as f:
        f.write(good[:len(good) // 2])
    corrupt = os.path.join(docs, "zz.json")
    with open(corrupt, "wb") as f:
        f.write(b"\x00garbage{{{ not a document")

    c.start()
    log = c.log_this_run()
    # The good document is loaded and in force.
    g = c.api.get_classifier(net.if_a)
    assert g.status == 200, g
    assert g.json["generation"] == r.json["generation"]
    assert status_of(g.json, "web")["attached"] is True
    assert net.a.filter_at(net.if_a, 10).id == status_of(r.json, "web")["id"]
    # The crash leftover is not a document and is cleaned up.
    assert not os.path.exists(tmp), os.listdir(docs)
    # The corrupt file is set aside, not lost, and the log says where.
    assert not os.path.exists(corrupt)
    moved = glob.glob(os.path.join(c.state_dir, "quarantine", "zz.json*"))
    assert len(moved) == 1, os.listdir(os.path.join(c.state_dir, "quarantine"))
    assert open(moved[0], "rb").read() == b"\x00garbage{{{ not a document"
    assert "zz.json" in log and "quarantine" in log, log
    assert c.api.get_classifier("zz").status == 404
    assert sorted(os.listdir(docs)) == [net.if_a + ".json"]


def test_document_with_an_invalid_spec_is_quarantined(net, clsd_factory, bpf):
    c = clsd_factory(net.a)
    assert c.stop() == 0
    bad = {"format": 1, "ifname": "vq", "generation": 3, "spec": {"ingress": [{"name": "no spaces"}]}}
    path = os.path.join(c.state_dir, "documents", "vq.json")
    with open(path, "w") as f:
        json.dump(bad, f)
    c.start()
    assert not os.path.exists(path)
    assert glob.glob(os.path.join(c.state_dir, "quarantine", "vq.json*"))
    assert "vq.json" in c.log_this_run()
    assert c.api.get_classifier("vq").status == 404


def test_document_of_a_newer_format_is_left_in_place(net, clsd_factory, bpf):
    c = clsd_factory(net.a)
    assert c.stop() == 0
    newer = {"format": 999, "ifname": "vn", "generation": 1, "spec": {}}
    path = os.path.join(c.state_dir, "documents", "vn.json")
    with open(path, "w") as f:
        json.dump(newer, f)
    c.start()
    # A newer clsd's file is neither guessed at nor moved away from it.
    assert os.path.exists(path)
    assert not glob.glob(os.path.join(c.state_dir, "quarantine", "vn.json*"))
    assert "vn.json" in c.log_this_run()
    assert c.api.get_classifier("vn").status == 404
    assert c.api.healthy()


def test_deleted_document_and_object_are_gone_from_disk(net, clsd_factory, bpf):
    c = clsd_factory(net.a)
    digest = c.api.upload_ok(bpf.count)
    assert c.api.put_classifier(net.if_a, {"ingress": [filt("web", digest)]}).status == 200
    assert c.api.delete_classifier(net.if_a).status == 204
    assert c.api.delete("/objects/" + digest).status == 204
    assert os.listdir(os.path.join(c.state_dir, "documents")) == []
    assert os.listdir(os.path.join(c.state_dir, "objects")) == []
    c.restart()
    assert c.api.get_classifier(net.if_a).status == 404
    assert c.api.get("/objects").json["objects"] == []
    assert file_digest(bpf.count) == digest


def _write_object(c, name_hex, data):
    with open(os.path.join(c.state_dir, "objects", name_hex + ".o"), "wb") as f:
        f.write(data)


def test_unreadable_object_file_is_skipped_at_start(net, clsd_factory, bpf):
    c = clsd_factory(net.a)
    good = c.api.upload_ok(bpf.count)
    assert c.stop() == 0
    # Sorts before the good object's file.
    _write_object(c, "0" * 64, open(bpf.classid, "rb").read()[:500])
    c.start()
    assert [o["digest"] for o in c.api.get("/objects").json["objects"]] == [good]
    assert "0" * 64 in c.log_this_run()


def _quarantined(c, prefix):
    q = os.path.join(c.state_dir, "quarantine")
    return [n for n in os.listdir(q) if n.startswith(prefix)] if os.path.isdir(q) else []


def test_unreadable_object_file_sorting_last_does_not_stop_start_up(net, clsd_factory, bpf):
    c = clsd_factory(net.a)
    good = c.api.upload_ok(bpf.count)
    assert c.stop() == 0
    # Sorts after the good object's file.
    _write_object(c, "f" * 64, open(bpf.classid, "rb").read()[:500])
    c.start()
    assert [o["digest"] for o in c.api.get("/objects").json["objects"]] == [good]
    # set aside, not lost
    assert _quarantined(c, "f" * 64 + ".o"), os.listdir(c.state_dir)
    assert not os.path.exists(os.path.join(c.state_dir, "objects", "f" * 64 + ".o"))


def test_object_file_whose_bytes_do_not_match_its_name_is_not_served(net, clsd_factory, bpf):
    c = clsd_factory(net.a)
    digest = c.api.upload_ok(bpf.count)
    assert c.stop() == 0
    _write_object(c, digest[len("sha256:"):], open(bpf.drop_port, "rb").read())
    c.start()
    r = c.api.get("/objects/" + digest)
    assert r.status == 404, r
    assert _quarantined(c, digest[len("sha256:"):] + ".o")
    assert "do not match its sha256 name" in c.log_this_run()


def test_a_failed_first_put_takes_back_the_clsact_it_made_and_only_that(api, bpf, net, clsd):
    """The rollback removes the clsact qdisc only when the failed change created it (known from its
    exclusive add, not from a qdisc dump)."""
    block_store_write(clsd, net.if_a)
    assert_error(api.put_classifier(net.if_a, {"ingress": [filt("a", bpf.count, priority=10)]}), 500, "store_error")
    assert net.a.filters(net.if_a) == []
    assert not net.a.has_clsact(net.if_a), net.a.qdiscs(net.if_a)
    # An operator's clsact stays.
    net.a.run("tc", "qdisc", "add", "dev", net.if_a, "clsact")
    assert_error(api.put_classifier(net.if_a, {"ingress": [filt("a", bpf.count, priority=10)]}), 500, "store_error")
    assert net.a.filters(net.if_a) == []
    assert net.a.has_clsact(net.if_a)


def test_a_store_of_many_documents_loads_every_one_in_order_and_sets_aside_the_corrupt(net, clsd_factory, bpf):
    """Past 32 documents a second thread reads and parses them beside the loop's: each document still comes back (its
    generation and filter), and a corrupt file among them is set aside, the others kept."""
    c = clsd_factory(net.a)
    names = veths(net.a, "st", 100)
    digest = c.api.upload_ok(bpf.count)
    for i, dev in enumerate(names):
        for _ in range(i % 3 + 1):  # generations 1 to 3
            r = c.api.put_classifier(dev, {"ingress": [filt("f", digest, priority=10 + i % 5)]})
            assert r.status == 200, r
    want = {dev: (c.api.get_classifier(dev).json["generation"], 10 + i % 5) for i, dev in enumerate(names)}
    assert c.stop() == 0
    docs = os.path.join(c.state_dir, "documents")
    with open(os.path.join(docs, "st5z.json"), "wb") as f:
        f.write(b"{ not json")
    c.start()
    got = {}
    for dev in names:
        g = c.api.get_classifier(dev)
        assert g.status == 200, (dev, g)
        got[dev] = (g.json["generation"], g.json["document"]["ingress"][0]["priority"])
    assert got == want
    assert glob.glob(os.path.join(c.state_dir, "quarantine", "st5z.json*"))
    assert "loaded program" not in c.log_this_run()
