"""What depends on the kernel clsd runs on, checked on each kernel the suite runs (this host's 6.18, and
Debian 12's 6.1 under tests/vm/run): "attach":"auto" takes tcx where the kernel has it (6.6+) and cls_bpf
where not, where "attach":"tcx" is refused; and programs in ELF sections libbpf does not know, which tc
loads by their use, clsd loads too."""

import pytest

from harness.api import assert_error
from harness.base import ADDR_A, file_digest, filt, status_of
from harness.observe import bpftool_json, ping, prog_map_id, read_u64, udp_exchange


pytestmark = pytest.mark.vm


def test_attach_auto_takes_what_the_kernel_has(api, bpf, net):
    net.quiet()
    version = api.get("/version").json
    r = api.put_classifier(net.if_a, {"ingress": [filt("a", bpf.count, attach="auto")]})
    assert r.status == 200, r
    st = status_of(r.json, "a")
    assert st["attached"]
    if version["tcx"] == "available":
        assert st["attach"] == "tcx" and st["link_id"]
    else:
        # Before 6.6: a cls_bpf filter, as tc shows it.
        assert st["attach"] == "cls_bpf" and "link_id" not in st
        f = net.a.filter_at(net.if_a, st["pref"])
        assert f is not None and f.name == "clsd:a" and f.id == st["id"]
    udp_exchange(net.b, net.a, ADDR_A, {7001: 5})
    r = api.get("/ifaces/%s/classifier/maps/counters" % net.if_a)
    assert r.status == 200 and r.json["entries"][0]["value"]["packets"] == 6, r


def test_attach_tcx_is_refused_where_the_kernel_has_none(api, bpf, net):
    if api.get("/version").json["tcx"] == "available":
        # Where there is tcx, "tcx" attaches: test_tcx.py; the refusal is Debian 12's 6.1's.
        r = api.put_classifier(net.if_a, {"ingress": [filt("a", bpf.count, attach="tcx")]})
        assert r.status == 200 and status_of(r.json, "a")["attach"] == "tcx", r
        return
    err = assert_error(api.put_classifier(net.if_a, {"ingress": [filt("a", bpf.count, attach="tcx")]}), 422,
                       "tcx_unavailable")
    assert "6.6" in err["message"], err
    assert net.a.filters(net.if_a) == [] and api.get_classifier(net.if_a).status == 404


def test_programs_in_sections_libbpf_does_not_know(api, bpf, net):
    """custom-sec.bpf.o has its programs in "my_classifier", "my_action" and "my_counter": the upload
    says what each can be; the document names the one it wants, and clsd loads it as sched_cls."""
    net.quiet()
    r = api.upload(bpf.custom_sec)
    assert r.status in (200, 201), r
    progs = {p["name"]: p for p in r.json["programs"]}
    assert set(progs) == {"match_udp", "count_by_cb", "count_all"}
    for p in progs.values():
        assert p["type"] == "unknown" and p["classifier"] and p["action"], p
        assert "as tc does" in p["note"], p
    assert progs["count_all"]["section"] == "my_counter"
    digest = r.json["digest"]

    # Three could be the classifier: the document must say which.
    err = assert_error(api.put_classifier(net.if_a, {"ingress": [filt("c", digest)]}), 422, "program_ambiguous")
    assert "match_udp" in err["message"] and "count_all" in err["message"], err

    r = api.put_classifier(net.if_a, {"ingress": [filt("c", digest, program="count_all", priority=5)]})
    assert r.status == 200, r
    st = status_of(r.json, "c")
    assert bpftool_json("prog", "show", "id", str(st["id"]))["type"] == "sched_cls"
    f = net.a.filter_at(net.if_a, 5)
    assert f.name == "clsd:c" and f.prog_name == "count_all" and f.direct_action
    udp_exchange(net.b, net.a, ADDR_A, {7001: 3})
    ping(net.b, ADDR_A, count=2)
    assert read_u64(prog_map_id(st["id"], "seen")) == 4 + 2


def test_an_object_tc_cannot_run_is_refused_with_each_programs_reason(api, bpf):
    # xdp-only.bpf.o holds one xdp program and nothing tc can run.
    r = api.upload(bpf.xdp_only)
    err = assert_error(r, 422, "invalid_object")
    assert "no program tc can run" in err["message"] and "(xdp, section xdp)" in err["message"], err
    r = api.upload(bpf.xdp)
    progs = {p["name"]: p for p in r.json["programs"]}
    assert progs["xdp_pass"]["classifier"] is False and progs["xdp_pass"]["action"] is False
    assert "tc runs only sched_cls and sched_act" in progs["xdp_pass"]["note"]
    assert progs["tc_pass"]["classifier"] and progs["tc_pass"]["action"]
    assert r.json["digest"] == file_digest(bpf.xdp)
