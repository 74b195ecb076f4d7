"""What a first-time operator runs into: a second clsd on a live socket, a typo in an interface name,
an identical re-apply, a relative object path, --json errors, clsd --check on one file, clsd started
without privileges, clsctl with the daemon down."""

import json
import os
import shutil
import socket
import subprocess
import threading
import time

from harness.api import free_port, start_refused, token_file
from harness.base import CLSCTL, CLSD, filt, run, status_of
from harness.daemon import write_hog


def test_a_second_clsd_on_a_live_socket_is_refused_and_the_socket_goes_with_its_clsd(net, clsd_factory, workdir):
    first = clsd_factory(net.a, name="first")
    p = net.a.run(CLSD, "--state-dir", os.path.join(workdir, "other-state"), "--socket", first.socket,
                  "--bpffs-dir", "/sys/fs/bpf/clsdt-other-%d" % os.getpid(), check=False, timeout=10)
    assert p.returncode == 1 and "another process answers there" in p.stderr, p
    assert first.api.healthy()
    assert first.stop() == 0
    assert not os.path.exists(first.socket), "clsd left its socket behind"
    # a stale socket (a clsd killed) is taken over
    first.start()
    first.kill()
    assert os.path.exists(first.socket)
    first.start()
    assert first.api.healthy()


def test_a_live_socket_whose_backlog_is_full_is_refused_at_once(net, workdir):
    """A listener that does not accept (its backlog full) is alive: the probe must not wait on it."""
    path = os.path.join(workdir, "busy.sock")
    with socket.socket(socket.AF_UNIX) as srv:
        srv.bind(path)
        srv.listen(0)
        fill = []
        try:
            for _ in range(8):
                c = socket.socket(socket.AF_UNIX)
                c.setblocking(False)
                fill.append(c)
                c.connect(path)
        except BlockingIOError:
            pass
        start = time.monotonic()
        p = net.a.run(CLSD, "--state-dir", os.path.join(workdir, "busy-state"), "--socket", path,
                      "--bpffs-dir", "/sys/fs/bpf/clsdt-busy-%d" % os.getpid(), check=False, timeout=10)
        took = time.monotonic() - start
        for c in fill:
            c.close()
    assert p.returncode == 1 and "another process answers there" in p.stderr, p
    assert took < 5, took


def test_apply_to_a_name_that_is_not_there_says_so_and_wait_waits(net, clsd, bpf, workdir):
    spec = os.path.join(workdir, "spec.json")
    with open(spec, "w") as f:
        json.dump({"ingress": [filt("web", bpf.count, priority=10)]}, f)
    typo = net.if_a[:-1] + "x" + net.if_a[-1:]  # one letter off
    p = clsd.ctl("apply", typo, spec, check=0)
    assert "warning: %s does not exist" % typo in p.stderr and "did you mean %s?" % net.if_a in p.stderr, p.stderr
    # --wait: still pending when the time is up is a failure
    start = time.monotonic()
    p = clsd.ctl("apply", "--wait=1", typo, spec, check=1)
    assert "still pending after 1s" in p.stderr and 0.9 < time.monotonic() - start < 5, p.stderr
    # and success once the interface appears and the document applies
    later = "vlate"
    t = threading.Timer(0.5, lambda: net.a.run("ip", "link", "add", later, "type", "veth", "peer", "name", later + "p"))
    t.start()
    try:
        p = clsd.ctl("apply", "--wait=10", later, spec, check=0)
        assert "configured" in p.stdout, p.stdout
        assert net.a.filter_at(later, 10) is not None
    finally:
        t.join()
    assert clsd.ctl("--wait", "get", net.if_a, check=2).stderr.strip().endswith("Try 'clsctl --help'.")
    # in a namespace that is not there yet: the warning, one line (the list of names it could not read
    # adds nothing to it, and no error line of its own)
    p = clsd.ctl("--netns", "clsdt-not-yet", "apply", net.if_a, spec, check=0)
    assert p.stderr.count("\n") == 1 and "warning: %s does not exist in that namespace" % net.if_a in p.stderr, p
    clsd.ctl("--netns", "clsdt-not-yet", "delete", net.if_a, check=0)


def test_an_identical_re_apply_keeps_the_generation(net, api, bpf):
    doc = {"ingress": [filt("web", bpf.count, priority=10)]}
    assert api.put_classifier(net.if_a, doc).json["generation"] == 1
    r = api.put_classifier(net.if_a, doc)
    assert r.status == 200 and r.json["generation"] == 1 and status_of(r.json, "web")["attached"], r
    assert api.put_classifier(net.if_a, {"ingress": [filt("web", bpf.count, priority=11)]}).json["generation"] == 2


def test_a_relative_object_path_is_made_absolute_by_clsctl(net, clsd, bpf, workdir):
    sub = os.path.join(workdir, "objs")
    os.makedirs(sub)
    shutil.copy(bpf.count, os.path.join(sub, "count.bpf.o"))
    spec = os.path.join(sub, "spec.json")
    with open(spec, "w") as f:
        json.dump({"ingress": [filt("web", "count.bpf.o", priority=10)]}, f)
    # relative to the document's directory, from anywhere
    p = clsd.ctl("apply", net.if_a, spec, check=0)
    assert net.a.filter_at(net.if_a, 10) is not None, p
    got = clsd.api.get_classifier(net.if_a).json["document"]["ingress"][0]["object"]
    assert got == os.path.realpath(os.path.join(sub, "count.bpf.o")), got


def test_clsctl_json_prints_errors_as_json_on_stderr(net, clsd, workdir):
    p = clsd.ctl("--json", "get", "nothing0", check=1)
    err = json.loads(p.stderr)["error"]
    assert err["code"] == "document_not_found" and "nothing0" in err["message"], err
    p = run([CLSCTL, "--json", "--socket", os.path.join(workdir, "none.sock"), "ls"], check=False)
    assert p.returncode == 1 and "is clsd running?" in json.loads(p.stderr)["error"]["message"], p


def test_check_validates_one_file_whatever_its_name(bpf, workdir):
    good, bad = os.path.join(workdir, "tmpAbC1"), os.path.join(workdir, "tmpAbC2")
    with open(good, "w") as f:
        json.dump({"ifname": "eth0", "ingress": [filt("web", bpf.count, priority=10)]}, f)
    with open(bad, "w") as f:
        json.dump({"ifname": "eth0", "ingress": [filt("web", bpf.count, priority=10, colour="red")]}, f)
    p = run([CLSD, "--check=" + good], check=False)
    assert p.returncode == 0 and "a valid hog" in p.stdout, p
    p = run([CLSD, "--check=" + bad], check=False)
    assert p.returncode == 1 and bad in p.stderr and "colour" in p.stderr, p


def test_clsd_without_privileges_refuses_to_start(workdir):
    p = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", CLSD, "--socket",
                        os.path.join(workdir, "x.sock"), "--state-dir", os.path.join(workdir, "st")],
                       capture_output=True, text=True, timeout=10)
    assert p.returncode == 1 and "needs root" in p.stderr and len(p.stderr.splitlines()) == 1, p


def test_a_configuration_file_gives_options_and_the_command_line_wins(net, bpf, workdir):
    hogs = os.path.join(workdir, "conf-hogs.d")
    write_hog(hogs, "a.json", net.if_a, ingress=[filt("h", bpf.count, priority=30)])
    conf = os.path.join(workdir, "clsd.conf")
    with open(conf, "w") as f:
        f.write("# clsd's options, one per line\nhogs-dir = %s\n  max-connections=7  \nbpf-stats\n" % hogs)
    # the file's options apply
    p = run([CLSD, "--config", conf, "--check"], check=False)
    assert p.returncode == 0 and "%s: 1 hog(s), all valid" % hogs in p.stdout, p
    # the command line's win
    p = run([CLSD, "--config", conf, "--hogs-dir", os.path.join(workdir, "none"), "--check"], check=False)
    assert p.returncode == 0 and "none: 0 hog(s)" in p.stdout, p
    # a line that is not an option is refused with its place
    with open(conf, "a") as f:
        f.write("Not An Option\n")
    p = run([CLSD, "--config", conf, "--check"], check=False)
    assert p.returncode == 2 and "%s:5: expected" % conf in p.stderr, p
    # an abbreviation of --config is --config (getopt takes it): the file is read, not the default
    p = run([CLSD, "--conf", conf, "--check"], check=False)
    assert p.returncode == 2 and "%s:5: expected" % conf in p.stderr, p
    p = run([CLSD, "--con=" + conf, "--check"], check=False)
    assert p.returncode == 2 and "%s:5: expected" % conf in p.stderr, p
    p = run([CLSD, "--co", conf, "--check"], check=False)
    assert p.returncode == 2 and "%s:5: expected" % conf in p.stderr, p
    # only full option names; '#' inside a value is the value's, after a blank a comment
    odd = os.path.join(workdir, "odd#hogs.d")
    write_hog(odd, "a.json", net.if_a, ingress=[filt("h", bpf.count, priority=30)])
    for text, code, words in (("hogs = %s\n" % hogs, 2, 'unknown option "hogs"'),
                              ("help\n", 2, '"help" is not an option of how clsd runs'),
                              ("hogs-dir = %s # the odd one\n" % odd, 0, "%s: 1 hog(s), all valid" % odd)):
        with open(conf, "w") as f:
            f.write(text)
        p = run([CLSD, "--config", conf, "--check"], check=False)
        assert p.returncode == code and words in p.stdout + p.stderr, (text, p)
    # the command's own flags are not the file's: a "flush" line would flush at every start
    for name in ("flush", "check", "check = /etc/clsd/hogs.d/a.json", "worker", "version", "config = /x"):
        with open(conf, "w") as f:
            f.write("hogs-dir = %s\n%s\n" % (hogs, name))
        p = run([CLSD, "--config", conf, "--check"], check=False)
        assert p.returncode == 2 and "%s:2: \"%s\" is not an option of how clsd runs" % (
            conf, name.split()[0]) in p.stderr, (name, p)
        assert len(p.stderr.strip().splitlines()) == 1, p.stderr
    # a NUL would end the text there (a trusted-keys line after it dropped): refused whole, the line named
    for data, line in ((b"hogs-dir = %s\n\0\ntrusted-keys = /k\n" % hogs.encode(), 2),
                       (b"hogs-dir = %s\x01\n" % hogs.encode(), 1), (b"# ok\n\n\x1b[31m\n", 3),
                       (b"log-level = info\x7f\n", 1)):
        with open(conf, "wb") as f:
            f.write(data)
        p = run([CLSD, "--config", conf, "--check"], check=False)
        assert p.returncode == 2 and "%s:%d: a control byte" % (conf, line) in p.stderr, (data, p)
    # a file others may change, or another user's, is refused: it says whom clsd trusts
    with open(conf, "w") as f:
        f.write("hogs-dir = %s\n" % hogs)
    os.chmod(conf, 0o666)
    p = run([CLSD, "--config", conf, "--check"], check=False)
    assert p.returncode == 2 and "every user may write it" in p.stderr, p
    os.chmod(conf, 0o644)
    os.chown(conf, 65534, 65534)
    p = run([CLSD, "--config", conf, "--check"], check=False)
    assert p.returncode == 2 and "owned by another user" in p.stderr, p


def test_a_digest_prefix_in_a_document_is_made_whole_by_clsctl(net, clsd, bpf, workdir):
    digest = clsd.api.upload_ok(bpf.count)
    spec = os.path.join(workdir, "spec.json")
    with open(spec, "w") as f:
        json.dump({"ingress": [filt("web", digest[:7 + 10], priority=10)]}, f)
    clsd.ctl("apply", net.if_a, spec, check=0)
    assert clsd.api.get_classifier(net.if_a).json["document"]["ingress"][0]["object"] == digest
    with open(spec, "w") as f:
        json.dump({"ingress": [filt("web", "sha256:ffff", priority=10)]}, f)
    p = clsd.ctl("apply", net.if_a, spec, check=1)
    assert "no stored object has this digest prefix" in p.stderr, p.stderr


def test_smaller_edges_of_the_red_teams_list(net, clsd_factory, bpf, workdir):
    """A two-line --token-file is refused (neither line would work); a file that does not parse is not
    quoted in the error (an access file linked to /etc/shadow); a metric name over the length limit says
    so; PUT /policies takes curl's default content type as a document's PUT does."""
    port = "127.0.0.1:%d" % free_port(net.a, "127.0.0.1")
    tf = token_file(workdir, "0123456789abcdef0123\nsecond-line-of-the-token")
    p = start_refused(net.a, workdir, "--listen", port, "--token-file", tf)
    assert p.returncode == 1 and "one line of visible characters (byte 21 is 0x0a)" in p.stderr, p.stderr
    # an access file that is a link to a file of secrets: where it fails, not what it holds
    secret = os.path.join(workdir, "shadow")
    with open(secret, "w") as f:
        f.write("root:$6$secret-hash:19000:0:99999:7:::\n")
    os.chmod(secret, 0o600)
    link = os.path.join(workdir, "access.json")
    os.symlink(secret, link)
    p = start_refused(net.a, workdir, "--access-file", link)
    assert p.returncode == 1 and "not JSON" in p.stderr, p.stderr
    assert "root" not in p.stderr and "secret" not in p.stderr.replace(workdir, ""), p.stderr
    c = clsd_factory(net.a)
    name = "m_" + "x" * 201
    r = c.api.put_classifier(net.if_a, {"ingress": [filt("stats", bpf.proto_stats, metrics=[
        {"map": "pkts_by_port", "name": name, "type": "counter", "labels": [{"name": "port", "from": "key"}]}])]})
    assert r.status == 400 and "203 characters, more than the 128" in r.json["error"]["message"], r.json
    body = json.dumps({"match": {"ifname": ["zz*"]}, "ingress": [filt("count", bpf.count, priority=10)]})
    r = c.api.request("PUT", "/policies/p", body.encode(), content_type="application/x-www-form-urlencoded")
    assert r.status == 200, r
