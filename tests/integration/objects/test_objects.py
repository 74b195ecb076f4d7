"""POST/GET/DELETE /objects: content addressing, what is in an object, who uses it."""

import hashlib

import pytest

from harness.api import assert_error
from harness.base import file_digest, filt


UNKNOWN_DIGEST = "sha256:" + "0" * 64


@pytest.mark.vm
def test_an_upload_describes_the_objects_programs_and_maps(api, bpf):
    data = open(bpf.count, "rb").read()
    r = api.upload(data)
    assert r.status == 201, r
    o = r.json
    assert o["digest"] == "sha256:" + hashlib.sha256(data).hexdigest()
    assert o["size"] == len(data)
    # What each program can be attached as, and how clsd would load it.
    assert o["programs"] == [{"name": "count_pkts", "section": "tc", "type": "sched_cls", "classifier": True,
                              "action": True,
                              "note": "a classifier (sched_cls); as an action it is loaded as sched_act"}]
    assert o["maps"] == [{"name": "counters", "type": "array", "key_size": 4, "value_size": 16,
                          "max_entries": 1}]
    assert o["used_by"] == []

    again = api.upload(data)
    assert again.status == 200, again
    assert again.json["digest"] == o["digest"]

    listed = api.get("/objects")
    assert listed.status == 200
    assert [x["digest"] for x in listed.json["objects"]] == [o["digest"]]
    assert listed.json["objects"][0] == o

    one = api.get("/objects/" + o["digest"])
    assert one.status == 200
    assert one.json == o


def test_upload_lists_every_program_and_map(api, bpf):
    o = api.upload(bpf.drop_port).json
    assert o["digest"] == file_digest(bpf.drop_port)
    assert [(p["name"], p["section"], p["type"]) for p in o["programs"]] == [("drop_port", "tc", "sched_cls")]
    assert sorted(o["maps"], key=lambda m: m["name"]) == [
        {"name": "blocked_ports", "type": "hash", "key_size": 2, "value_size": 1, "max_entries": 64},
        {"name": "dropped", "type": "array", "key_size": 4, "value_size": 8, "max_entries": 1},
    ]
    x = api.upload(bpf.xdp).json
    assert sorted((p["name"], p["section"], p["type"]) for p in x["programs"]) == [
        ("tc_pass", "tc", "sched_cls"), ("tc_pass_too", "tc", "sched_cls"), ("xdp_pass", "xdp", "xdp")]
    assert sorted(o["digest"] for o in api.get("/objects").json["objects"]) == sorted(
        [file_digest(bpf.drop_port), file_digest(bpf.xdp)])


def test_an_unused_object_is_deleted_with_204(api, bpf):
    digest = api.upload_ok(bpf.count)
    r = api.delete("/objects/" + digest)
    assert r.status == 204, r
    assert r.body == b""
    assert_error(api.get("/objects/" + digest), 404, "object_not_found")
    assert api.get("/objects").json["objects"] == []
    assert_error(api.delete("/objects/" + digest), 404, "object_not_found")


def test_object_in_use_cannot_be_deleted(api, bpf, net):
    digest = api.upload_ok(bpf.count)
    r = api.put_classifier(net.if_a, {"ingress": [filt("web", digest)]})
    assert r.status == 200, r
    assert api.get("/objects/" + digest).json["used_by"] == [net.if_a]

    err = assert_error(api.delete("/objects/" + digest), 409, "object_in_use")
    assert net.if_a in err["message"]
    assert api.get("/objects/" + digest).status == 200

    # Once no document uses it, it can go.
    assert api.delete_classifier(net.if_a).status == 204
    assert api.get("/objects/" + digest).json["used_by"] == []
    assert api.delete("/objects/" + digest).status == 204


def test_an_unknown_digest_is_404(api):
    assert_error(api.get("/objects/" + UNKNOWN_DIGEST), 404, "object_not_found")
    assert_error(api.delete("/objects/" + UNKNOWN_DIGEST), 404, "object_not_found")


def test_stored_objects_survive_a_restart(clsd, bpf):
    digest = clsd.api.upload_ok(bpf.count)
    clsd.restart()
    r = clsd.api.get("/objects/" + digest)
    assert r.status == 200, r
    assert r.json["programs"][0]["name"] == "count_pkts"
