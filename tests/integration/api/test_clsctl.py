"""clsctl against a real clsd: tables for people, --json for scripts, exit 0/1/2, one line on failure."""

import json
import os

from harness.base import ADDR_A, CLSCTL, file_digest, filt, run, status_of
from harness.daemon import find_table, write_doc
from harness.observe import udp_exchange


def test_object_add_ls_show_rm(clsd, bpf):
    digest = file_digest(bpf.count)
    p = clsd.ctl("object", "add", bpf.count, check=0)
    assert digest in p.stdout
    progs = find_table(p.stdout, ["PROGRAM", "SECTION", "TYPE"])
    assert progs[1] == ["count_pkts", "tc", "sched_cls"]
    maps = find_table(p.stdout, ["MAP", "TYPE", "KEY-SIZE", "VALUE-SIZE", "MAX-ENTRIES"])
    assert maps[1] == ["counters", "array", "4", "16", "1"]
    assert p.stderr == ""

    p = clsd.ctl("object", "ls", check=0)
    rows = find_table(p.stdout, ["DIGEST", "PROGRAMS", "MAPS", "USED-BY"])
    assert len(rows) == 2
    short = rows[1][0]
    assert digest[len("sha256:"):].startswith(short), rows
    assert rows[1][1:3] == ["count_pkts", "counters"]

    j = json.loads(clsd.ctl("--json", "object", "ls", check=0).stdout)
    assert [o["digest"] for o in j["objects"]] == [digest]
    j = json.loads(clsd.ctl("--json", "object", "show", short, check=0).stdout)
    assert j["digest"] == digest and j["programs"][0]["name"] == "count_pkts"

    clsd.ctl("object", "rm", digest, check=0)
    assert clsd.api.get("/objects").json["objects"] == []
    p = clsd.ctl("object", "show", digest, check=1)
    assert len(p.stderr.splitlines()) == 1 and p.stderr.startswith("clsctl:"), p.stderr


def test_clsctl_apply_get_ls_delete_round_trip_a_document(clsd, bpf, net, workdir):
    digest = json.loads(clsd.ctl("--json", "object", "add", bpf.count, check=0).stdout)["digest"]
    assert digest == file_digest(bpf.count)
    doc = write_doc(workdir, "doc.json", {"ingress": [{"name": "web", "object": digest, "priority": 10}]})

    p = clsd.ctl("apply", net.if_a, doc, check=0)
    f = net.a.filter_at(net.if_a, 10)
    assert f is not None and f.name == "clsd:web"
    assert p.stdout.splitlines()[0].startswith("%s: configured (generation 1" % net.if_a), p.stdout
    rows = find_table(p.stdout, ["DIRECTION", "NAME", "PRIO", "PROGRAM", "ATTACHED", "ID", "TAG"])
    assert rows[1][:4] == ["ingress", "web", "10", "count_pkts"]
    assert rows[1][5:] == [str(f.id), f.tag]
    assert rows[1][4] in ("yes", "true"), rows

    p = clsd.ctl("get", net.if_a, check=0)
    rows = find_table(p.stdout, ["DIRECTION", "NAME", "PRIO", "PROGRAM", "ATTACHED", "ID", "TAG"])
    assert rows[1][:4] == ["ingress", "web", "10", "count_pkts"] and rows[1][5:] == [str(f.id), f.tag]

    j = json.loads(clsd.ctl("--json", "get", net.if_a, check=0).stdout)
    assert j == clsd.api.get_classifier(net.if_a).json
    assert status_of(j, "web")["id"] == f.id

    p = clsd.ctl("ls", check=0)
    rows = find_table(p.stdout, ["IFINDEX", "IFNAME", "STATE", "FILTERS"])
    by_name = {r[1]: r for r in rows[1:]}
    assert set(by_name) == set(net.a.link_names())
    assert by_name[net.if_a][2] == "configured"
    assert " ".join(by_name[net.if_a][3:]) == "1 clsd"
    assert by_name["lo"][2] == "unmanaged"
    j = json.loads(clsd.ctl("--json", "ls", check=0).stdout)
    assert {i["ifname"] for i in j["ifaces"]} == set(net.a.link_names())

    # --if-match: a stale generation is refused, the current one accepted.
    p = clsd.ctl("--if-match", "7", "apply", net.if_a, doc, check=1)
    assert p.stderr.startswith("clsctl:") and "precondition_failed" in p.stderr, p.stderr
    clsd.ctl("--if-match", "1", "apply", net.if_a, doc, check=0)

    p = clsd.ctl("delete", net.if_a, check=0)
    assert p.stderr == ""
    assert net.a.filters(net.if_a) == []
    assert clsd.api.get_classifier(net.if_a).status == 404
    p = clsd.ctl("get", net.if_a, check=1)
    assert p.stderr.count("\n") == 1 and p.stderr.startswith("clsctl:") and "document_not_found" in p.stderr


def test_clsctl_apply_reads_a_document_from_stdin(clsd, bpf, net):
    doc = json.dumps({"egress": [{"name": "out", "object": bpf.count}]})
    clsd.ctl("apply", net.if_a, "-", input=doc, check=0)
    assert net.a.filter_at(net.if_a, 1, "egress").name == "clsd:out"


def test_foreign_filters_counted_in_ls(clsd, bpf, net, workdir):
    net.a.add_foreign_filter(net.if_a, 20, bpf.drop_port)
    clsd.ctl("apply", net.if_a, write_doc(workdir, "d.json", {"ingress": [{"name": "a", "object": bpf.count}]}),
             check=0)
    rows = find_table(clsd.ctl("ls", check=0).stdout, ["IFINDEX", "IFNAME", "STATE", "FILTERS"])
    row = [r for r in rows if r[1] == net.if_a][0]
    assert " ".join(row[3:]) == "1 clsd, 1 foreign"


def test_apply_rejected_program_fails_with_one_line(clsd, bpf, net, workdir):
    digest = clsd.api.upload_ok(bpf.rejected)
    doc = write_doc(workdir, "bad.json", {"ingress": [{"name": "bad", "object": digest}]})
    p = clsd.ctl("apply", net.if_a, doc, check=1)
    assert p.stderr.startswith("clsctl:"), p.stderr
    assert len(p.stderr.splitlines()) == 1, p.stderr
    assert p.stderr.endswith("\n")
    assert "verifier_rejected" in p.stderr
    assert net.a.filters(net.if_a) == []

    # -v adds the verifier log after that line.
    p = clsd.ctl("-v", "apply", net.if_a, doc, check=1)
    assert p.stderr.startswith("clsctl:") and "invalid access to packet" in p.stderr


def test_clsctl_apply_of_a_malformed_file_exits_1_naming_the_line(clsd, net, workdir):
    path = os.path.join(workdir, "broken.json")
    with open(path, "w") as f:
        f.write('{"ingress": [\n')
    p = clsd.ctl("apply", net.if_a, path, check=1)
    assert len(p.stderr.splitlines()) == 1 and p.stderr.startswith("clsctl:") and "broken.json" in p.stderr


def test_clsctl_usage_errors_exit_2(clsd):
    for args in (["frobnicate"], [], ["get"], ["get", "a", "b"], ["object"], ["object", "frob"], ["--nope", "ls"],
                 ["--if-match", "x", "apply", "va", "f"]):
        p = clsd.ctl(*args)
        assert p.returncode == 2, (args, p)
        assert p.stderr.startswith("clsctl:"), (args, p.stderr)


def test_clsctl_without_a_daemon_exits_1_with_one_line(workdir):
    p = run([CLSCTL, "--socket", os.path.join(workdir, "nothing.sock"), "ls"], check=False)
    assert p.returncode == 1
    assert len(p.stderr.splitlines()) == 1 and p.stderr.startswith("clsctl:"), p.stderr


def test_clsctl_help_exits_0_and_lists_the_commands(clsd):
    p = clsd.ctl("--help", check=0)
    assert "apply IFNAME FILE" in p.stdout


def test_maps_lists_and_reads_a_map_to_its_end(net, clsd, bpf):
    assert clsd.api.put_classifier(net.if_a, {"ingress": [filt("stats", bpf.proto_stats)]}).status == 200
    udp_exchange(net.b, net.a, ADDR_A, {p: 1 for p in range(7000, 7030)})
    p = clsd.ctl("maps", net.if_a, check=0)
    rows = {r[0]: r for r in find_table(p.stdout, ["MAP", "ID", "TYPE"])[1:]}
    assert rows["size_hist"][2] == "percpu_array" and rows["size_hist"][-2:] == ["16", "ingress/stats"]
    assert rows["bytes_by_proto"][3:7] == ["struct", "flow_key", "struct", "flow_stats"]
    p = clsd.ctl("maps", net.if_a, "pkts_by_port", check=0)
    ports = {int(r[0]): int(r[1]) for r in find_table(p.stdout, ["KEY", "VALUE"])[1:]}
    want = {p: 1 for p in range(7000, 7030)}
    want[40000] = 1  # udp_exchange's marker
    assert ports == want
    j = json.loads(clsd.ctl("--json", "maps", net.if_a, "size_hist", check=0).stdout)
    assert j["count"] == 16 and j["next_cursor"] is None and "sum" in j["entries"][0]
    p = clsd.ctl("maps", net.if_a, "nosuch", check=1)
    assert p.stdout == "" and p.stderr.count("\n") == 1 and "unknown_map" in p.stderr and "nosuch" in p.stderr
    assert clsd.ctl("maps", check=2).returncode == 2
