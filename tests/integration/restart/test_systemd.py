"""clsd.service and clsd.socket under a real systemd 252 (harness/systemd.py): Type=notify, socket
activation, the fd store across restarts and crashes with traffic flowing and counted, the watchdog,
stop leaving the data plane, and `clsd --flush`."""

import os
import re
import statistics
import time

import pytest

from harness.base import BUILD_DIR, CLSD, filt, IF_A, status_of
from harness.observe import prog_map_id, read_counter, tc_monitor
from harness.systemd import Sender, SystemdHost

pytestmark = pytest.mark.systemd

REPORT = os.path.join(BUILD_DIR, "systemd-report.txt")


@pytest.fixture
def host(net, workdir, request):
    dropin = getattr(request, "param", "")
    h = SystemdHost(net.a, workdir, dropin="LimitCORE=0\n" + dropin)
    try:
        h.boot()
        h.systemctl("start", "clsd.socket")
        yield h
        log = h.clsd_log()
        for bad in ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:"):
            assert bad not in log, "a sanitizer report in clsd's log:\n" + log[-6000:]
    finally:
        if h.pid:
            log = h.clsd_log()
            if log:
                print("---- clsd under systemd ----\n" + log[-6000:])
        h.shutdown()


def wait_active(h, old_pid, timeout=15):
    deadline = time.monotonic() + timeout
    while True:
        s = h.show("clsd.service", "MainPID", "ActiveState")
        if s["ActiveState"] == "active" and int(s["MainPID"]) not in (0, old_pid):
            return int(s["MainPID"])
        assert time.monotonic() < deadline, "clsd did not come back: %r\n%s" % (s, h.clsd_log()[-3000:])
        time.sleep(0.01)


def runs_of(h):
    """The log of each clsd run, split at the line every run starts with."""
    return h.clsd_log().split("listening on the socket systemd passed")[1:]


def report(name, values):
    ms = sorted(v * 1000 for v in values)
    with open(REPORT, "a") as f:
        f.write("systemd %-18s n=%-3d median %7.1f ms  worst %7.1f ms\n" % (name, len(ms), statistics.median(ms), ms[-1]))


def put_counter(h, bpf, obj=None):
    r = h.api.put_classifier(IF_A, {"ingress": [filt("count", h.api.upload_ok(obj or bpf.count), priority=10)]})
    assert r.status == 200, r
    return status_of(r.json, "count")


def test_an_object_named_by_path_is_read_under_the_units_sandbox(net, host, bpf):
    """The unit's RestrictSUIDSGID= makes systemd block openat2() (seccomp cannot see its flags): the
    object directories are read without it."""
    r = host.api.put_classifier(IF_A, {"ingress": [filt("count", bpf.count, priority=10)]})
    assert r.status == 200 and status_of(r.json, "count")["attached"], r


def test_start_is_socket_activated_and_ready_after_the_first_reconcile(net, host, bpf):
    h = host
    assert h.show("clsd.service", "ActiveState")["ActiveState"] == "inactive"
    # The first connection to clsd.socket starts clsd, which serves it on the passed socket.
    assert h.api.get("/healthz").status == 200
    assert h.show("clsd.service", "ActiveState")["ActiveState"] == "active"
    assert "listening on the socket systemd passed" in h.clsd_log()
    st = put_counter(h, bpf)
    assert h.show("clsd.service", "NFileDescriptorStore")["NFileDescriptorStore"] == "2"  # program, map

    # Stopped, flushed: the next start must load and attach before it says READY=1, so that
    # `systemctl start` returns with the filter in place.
    h.systemctl("stop", "clsd.service")
    assert net.a.filter_at(IF_A, 10).id == st["id"], "stop detached the filter"
    h.enter(CLSD, "--flush")
    assert net.a.filter_at(IF_A, 10) is None
    h.systemctl("start", "clsd.service")
    f = net.a.filter_at(IF_A, 10)
    assert f is not None and f.name == "clsd:count", "READY=1 came before the first reconcile"
    s = h.show("clsd.service", "StatusText", "NFileDescriptorStore")
    assert s["StatusText"] == "1 document(s): 1 configured, 0 pending, 0 failed", s
    assert s["NFileDescriptorStore"] == "2"


def test_security_exposure_of_the_unit(host):
    out = host.enter("systemd-analyze", "security", "--no-pager", "clsd.service").stdout
    m = re.search(r"Overall exposure level for clsd.service: ([0-9.]+)", out)
    assert m, out
    with open(REPORT, "a") as f:
        f.write("systemd-analyze security clsd.service: exposure %s\n" % m.group(1))
    # What is left is the daemon's work: root with CAP_NET_ADMIN, CAP_BPF and CAP_SYS_ADMIN, netlink and
    # bpf(2) on the host's network.
    assert float(m.group(1)) <= 2.2, out


def test_restarts_and_crashes_keep_programs_maps_and_every_packet(net, host, bpf):
    h = host
    net.quiet()
    h.systemctl("start", "clsd.service")
    st = put_counter(h, bpf)
    counters = prog_map_id(st["id"], "counters")
    restart_times, crash_times = [], []
    with tc_monitor(net.a) as events:
        with Sender(net) as sender:
            for i in range(10):
                h.systemctl("reset-failed", "clsd.service")  # twenty starts in a row pass the start limit
                pid = h.main_pid()
                t = time.monotonic()
                h.systemctl("restart", "clsd.service")  # returns at READY=1
                restart_times.append(time.monotonic() - t)
                assert h.main_pid() != pid
                assert net.a.filter_at(IF_A, 10).id == st["id"]
                assert h.api.get("/healthz").status == 200
            for i in range(10):
                h.systemctl("reset-failed", "clsd.service")
                pid = h.main_pid()
                t = time.monotonic()
                h.enter("kill", "-9", str(pid))
                wait_active(h, pid)
                crash_times.append(time.monotonic() - t)
                assert net.a.filter_at(IF_A, 10).id == st["id"]
                assert h.api.get("/healthz").status == 200
        sent = sender.sent
    report("restart_to_ready", restart_times)
    report("kill9_to_ready", crash_times)
    filter_events = [l for l in events if "filter" in l]
    assert filter_events == [], "filters were deleted or re-added:\n" + "\n".join(filter_events)
    assert sent > 1000
    assert read_counter(counters)[0] == sent, "the counter missed datagrams"
    runs = runs_of(h)
    assert len(runs) == 21
    for run_log in runs[1:]:
        assert "from the fd store" in run_log and "loaded program" not in run_log, run_log[-2000:]
    g = h.api.get_classifier(IF_A)
    assert g.json["state"] == "configured" and status_of(g.json, "count")["id"] == st["id"]

    # A new build of the object: the counter goes on from where it was.
    before = read_counter(counters)[0]
    new = put_counter(h, bpf, bpf.count_v2)
    assert new["id"] != st["id"] and prog_map_id(new["id"], "counters") == counters
    with Sender(net) as sender:
        time.sleep(0.3)
    assert read_counter(counters)[0] == before + sender.sent


@pytest.mark.parametrize("host", ["WatchdogSec=2s\n"], indirect=True)
def test_the_watchdog_restarts_a_stopped_clsd(net, host, bpf):
    h = host
    h.systemctl("start", "clsd.service")
    st = put_counter(h, bpf)
    pid = h.main_pid()
    t = time.monotonic()
    h.enter("kill", "-STOP", str(pid))  # the loop sends no WATCHDOG=1 any more
    new = wait_active(h, pid, timeout=20)
    elapsed = time.monotonic() - t
    assert 2 <= elapsed < 10, elapsed
    assert new != pid
    assert net.a.filter_at(IF_A, 10).id == st["id"]
    assert "from the fd store" in runs_of(h)[-1]
    report("watchdog_restart", [elapsed])


def test_stop_leaves_the_data_plane_and_flush_removes_only_clsds(net, host, bpf):
    h = host
    h.systemctl("start", "clsd.service")
    foreign = net.a.add_foreign_filter(IF_A, 30, bpf.drop_port)
    st = put_counter(h, bpf)
    h.systemctl("stop", "clsd.service")
    assert net.a.filter_at(IF_A, 10).id == st["id"]
    # stop flushes the fd store; the bpffs pin brings the program back.
    h.systemctl("start", "clsd.service")
    last = runs_of(h)[-1]
    assert "from its bpffs pin" in last and "loaded program" not in last, last
    assert net.a.filter_at(IF_A, 10).id == st["id"]

    p = h.enter(CLSD, "--flush", check=False)
    assert p.returncode == 1 and "in use by a running clsd" in p.stderr, p
    h.systemctl("stop", "clsd.service")
    p = h.enter(CLSD, "--flush")
    assert "removed 1 filter(s), 0 tcx link(s) and 1 program pin(s)" in p.stdout, p.stdout
    assert net.a.filter_at(IF_A, 10) is None
    f = net.a.filter_at(IF_A, 30)
    assert (f.id, f.name) == (foreign.id, foreign.name)
    assert os.listdir(h.path("/sys/fs/bpf/clsd/progs")) == []


@pytest.mark.parametrize("host", ["StandardOutput=journal\nStandardError=journal\n"], indirect=True)
def test_changes_are_audited_in_the_journal_with_fields_of_their_own(net, host, bpf):
    """Under journald each change (and each refused one) is one journal entry with CLSD_AUDIT=1 and
    fields saying who, what and how it ended: `journalctl CLSD_AUDIT=1`."""
    import json
    h = host
    put_counter(h, bpf)
    assert h.api.request("PUT", "/ifaces/%s/classifier" % IF_A, b"{", content_type="application/json").status == 400

    def entries():
        out = h.enter("journalctl", "-o", "json", "--no-pager", "CLSD_AUDIT=1", check=False).stdout
        return [json.loads(l) for l in out.splitlines() if l.strip()]
    deadline = time.monotonic() + 10
    while len(entries()) < 3 and time.monotonic() < deadline:
        time.sleep(0.2)
    e = entries()
    assert [(x["CLSD_METHOD"], x["CLSD_PATH"], x["CLSD_STATUS"], x["CLSD_RESULT"]) for x in e] == [
        ("POST", "/objects", "201", "ok"), ("PUT", "/ifaces/%s/classifier" % IF_A, "200", "ok"),
        ("PUT", "/ifaces/%s/classifier" % IF_A, "400", "refused")], e
    assert e[0]["CLSD_DIGEST"].startswith("sha256:") and e[1]["CLSD_GENERATION"] == "1"
    assert e[2]["CLSD_ERROR"] == "malformed_json"
    assert all(x["CLSD_WHO"].startswith("uid 0 pid ") and x["CLSD_WHO"].endswith("(unix socket)") for x in e)
    assert all(x["_SYSTEMD_UNIT"] == "clsd.service" for x in e)


@pytest.mark.parametrize("host", ["StandardOutput=journal\nStandardError=journal\n"], indirect=True)
def test_log_lines_are_journal_entries_with_fields(net, host, bpf):
    """Under journald clsd's log lines are entries of their own: PRIORITY, CODE_FILE, CODE_LINE and, for
    an error, ERRNO (journalctl -u clsd PRIORITY=3 finds the errors)."""
    import json
    h = host
    put_counter(h, bpf)

    def entries():
        out = h.enter("journalctl", "-o", "json", "--no-pager", "_SYSTEMD_UNIT=clsd.service", "SYSLOG_IDENTIFIER=clsd",
                      check=False).stdout
        return [json.loads(l) for l in out.splitlines() if l.strip()]
    deadline = time.monotonic() + 10
    while not any("document generation 1 stored" in x.get("MESSAGE", "") for x in entries()):
        assert time.monotonic() < deadline, entries()[-5:]
        time.sleep(0.2)
    stored = [x for x in entries() if "document generation 1 stored" in x.get("MESSAGE", "")][0]
    assert stored["PRIORITY"] == "6" and stored["CODE_FILE"].endswith("change-apply.c") and int(stored["CODE_LINE"]) > 0, stored
    listening = [x for x in entries() if x.get("MESSAGE") == "listening on the socket systemd passed"]
    assert listening and listening[0]["CODE_FILE"].endswith("api.c"), listening
