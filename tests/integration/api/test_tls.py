"""TLS on --listen, mutual TLS, and roles: HTTPS with a certificate reloaded on SIGHUP, client
certificates verified against --client-ca (a wrong CA, an expired certificate, a CA removed), and an
access file giving reader or operator to unix users and groups, named tokens and certificates."""

import hashlib
import http.client
import json
import os
import shutil
import signal
import ssl
import subprocess

import pytest


from harness.api import (Api, assert_error, free_port, NetnsHTTPConnection, NetnsHTTPSConnection, Pki,
    start_refused, tls_server, token_file)
from harness.base import ADDR_A, ADDR_B, CLSCTL, filt, status_of, wait_for


def https(net, port, pki, cert=None, ns=None):
    if cert:
        cert, key = cert
        return Api(lambda: NetnsHTTPSConnection(ns or net.b, ADDR_A, port, pki.cert, cert, key))
    return Api(lambda: NetnsHTTPSConnection(ns or net.b, ADDR_A, port, pki.cert))


def sighup(c, what):
    before = c.log_this_run().count("reloaded")
    c.proc.send_signal(signal.SIGHUP)
    wait_for(lambda: c.log_this_run().count("reloaded") > before or "cannot reload" in c.log_this_run(),
             timeout=5, what=what)


def test_https_with_mutual_tls_takes_good_certificates_and_refuses_the_rest(net, clsd_factory, bpf, workdir):
    pki, tls = tls_server(workdir)
    good = pki.issue("ops", "/O=example/CN=ops", ["DNS:ops.example"])
    expired = pki.issue("old", "/CN=old", days=-1)
    other = Pki(os.path.join(workdir, "other"), "other")
    foreign = other.issue("foreign", "/CN=ops")
    port = free_port(net.a, ADDR_A)
    client_ca = os.path.join(workdir, "client-ca.pem")
    shutil.copy(pki.cert, client_ca)
    c = clsd_factory(net.a, args=("--listen", "%s:%d" % (ADDR_A, port), *tls, "--client-ca", client_ca))
    digest = c.api.upload_ok(bpf.count)
    doc = {"ingress": [filt("web", digest, priority=10)]}
    # clear text is not answered
    with pytest.raises((ConnectionError, http.client.HTTPException)):
        Api(lambda: NetnsHTTPConnection(net.b, ADDR_A, port)).get("/healthz")
    # no certificate: health only; a read or a change is 401
    anon = https(net, port, pki)
    assert anon.get("/healthz").status == 200
    assert_error(anon.get("/ifaces"), 401, "unauthorized")
    assert_error(anon.put_classifier(net.if_a, doc), 401, "unauthorized")
    # a certificate of another CA, and an expired one: 401 saying why, nothing changed
    r = https(net, port, pki, foreign).put_classifier(net.if_a, doc)
    assert_error(r, 401, "unauthorized")
    assert "not trusted" in r.json["error"]["message"] and "issuer is unknown" in r.json["error"]["message"], r.json
    r = https(net, port, pki, expired).get("/ifaces")
    assert_error(r, 401, "unauthorized")
    assert "expired" in r.json["error"]["message"], r.json
    assert net.a.filters(net.if_a) == []
    # the CA's certificate: an operator (no access file)
    ops = https(net, port, pki, good)
    r = ops.put_classifier(net.if_a, doc)
    assert r.status == 200 and status_of(r.json, "web")["attached"], r
    assert 'with certificate "CN=ops,O=example" (TLS): 200 ok' in c.log_this_run()
    # the client CA replaced (SIGHUP): the old CA's certificates are refused, the new one's taken
    shutil.copy(other.cert, client_ca)
    sighup(c, "the reload")
    assert_error(ops.get("/ifaces"), 401, "unauthorized")
    assert https(net, port, pki, foreign).get("/ifaces").status == 200
    # the server's certificate replaced: new handshakes see the new one
    new_pki, new_tls = tls_server(workdir, name="pki2")
    shutil.copy(new_tls[1], tls[1])
    shutil.copy(new_tls[3], tls[3])
    sighup(c, "the reload")
    with pytest.raises(ssl.SSLError):
        https(net, port, pki, foreign).get("/healthz")
    assert https(net, port, new_pki, foreign).get("/ifaces").status == 200
    # a broken file on SIGHUP: what was in use stays
    with open(tls[3], "w") as f:
        f.write("not a key\n")
    sighup(c, "the failed reload")
    assert "cannot reload" in c.log_this_run()
    assert https(net, port, new_pki, foreign).get("/ifaces").status == 200


def test_a_failed_reload_keeps_every_credential_in_use(net, clsd_factory, workdir):
    """A new token beside a broken TLS key: the reload fails as a whole, and the old token stays."""
    pki, tls = tls_server(workdir)
    port = free_port(net.a, ADDR_A)
    old, new = os.urandom(16).hex(), os.urandom(16).hex()
    tf = token_file(workdir, old)
    c = clsd_factory(net.a, args=("--listen", "%s:%d" % (ADDR_A, port), *tls, "--token-file", tf))
    api = https(net, port, pki)
    assert api.get("/ifaces", headers={"Authorization": "Bearer " + old}).status == 200
    with open(tf, "w") as f:
        f.write(new + "\n")
    with open(tls[3], "w") as f:
        f.write("not a key\n")
    sighup(c, "the failed reload")
    assert "cannot reload" in c.log_this_run()
    assert api.get("/ifaces", headers={"Authorization": "Bearer " + old}).status == 200
    assert_error(api.get("/ifaces", headers={"Authorization": "Bearer " + new}), 401, "unauthorized")


def test_tls_flags_that_cannot_work_are_refused_at_start(net, workdir):
    pki, tls = tls_server(workdir)
    port = "%s:%d" % (ADDR_A, free_port(net.a, ADDR_A))
    other_key = pki.issue("other", "/CN=other")[1]
    for args, why in (
        (("--listen", port, tls[0], tls[1]), "--tls-cert and --tls-key go together"),
        (("--listen", port, "--client-ca", pki.cert, "--token-file", token_file(workdir, "x" * 20)), "--client-ca needs TLS"),
        (("--listen", port, tls[0], tls[1], "--tls-key", other_key, "--client-ca", pki.cert), "is not the key of"),
        (("--listen", port, tls[0], "/nonexistent.pem", tls[2], tls[3], "--client-ca", pki.cert), "No such file"),
        ((*tls,), "--tls-cert is for --listen"),
    ):
        p = start_refused(net.a, workdir, *args)
        assert p.returncode in (1, 2) and why in p.stderr, (args, p.stderr)


def write_access(path, grants):
    with open(path, "w") as f:
        json.dump({"grants": grants}, f)
    os.chmod(path, 0o640)


def test_roles_from_the_access_file(net, clsd_factory, bpf, workdir):
    pki, tls = tls_server(workdir)
    monitor = pki.issue("monitor", "/CN=monitor")
    ops = pki.issue("ops", "/CN=someone", ["DNS:Ops.Example"])
    stranger = pki.issue("stranger", "/CN=stranger")
    ci, ro = "ci-" + os.urandom(12).hex(), "ro-" + os.urandom(12).hex()
    sha = lambda t: "sha256:" + hashlib.sha256(t.encode()).hexdigest()
    access = os.path.join(workdir, "access.json")
    grants = [
        {"role": "reader", "subject": "CN=monitor"},
        {"role": "operator", "san": "DNS:ops.example"},
        {"role": "operator", "token": "ci", "token_sha256": sha(ci)},
        {"role": "reader", "token": "dashboard", "token_sha256": sha(ro)},
        {"role": "reader", "user": 4201},
        {"role": "operator", "group": 4300},
    ]
    write_access(access, grants)
    port = free_port(net.a, ADDR_A)
    c = clsd_factory(net.a, args=("--listen", "%s:%d" % (ADDR_A, port), *tls, "--client-ca", pki.cert,
                                  "--access-file", access))
    digest = c.api.upload_ok(bpf.count)  # root on the socket: an operator
    doc = {"ingress": [filt("web", digest, priority=10)]}

    def forbidden(r, role="operator"):
        assert_error(r, 403, "forbidden")
        assert "needs the %s role" % role in r.json["error"]["message"], r.json
        return r.json["error"]["message"]
    # certificates: a reader reads and may not change; an operator by its SAN (host names in any case)
    reader = https(net, port, pki, monitor)
    assert reader.get("/ifaces").status == 200 and reader.get("/metrics").status == 200
    msg = forbidden(reader.put_classifier(net.if_a, doc))
    assert 'certificate "CN=monitor"' in msg and "has the reader role" in msg, msg
    forbidden(reader.upload(bpf.drop_port))
    assert https(net, port, pki, ops).put_classifier(net.if_a, doc).status == 200
    # a certificate the CA signed but the file does not name: no role at all, not even reads
    forbidden(https(net, port, pki, stranger).get("/ifaces"), "reader")
    # named tokens
    anon = https(net, port, pki)
    assert anon.get("/ifaces", headers={"Authorization": "Bearer " + ro}).status == 200
    forbidden(anon.delete_classifier(net.if_a, headers={"Authorization": "Bearer " + ro}))
    assert_error(anon.delete_classifier(net.if_a, headers={"Authorization": "Bearer nope-" + ci}), 401, "unauthorized")
    assert anon.delete_classifier(net.if_a, headers={"Authorization": "Bearer " + ci}).status == 204
    assert 'with token ci (TLS): 204 ok' in c.log_this_run()
    # the unix socket: root changes; uid 4201 reads; a member of group 4300 changes; others nothing
    os.chmod(c.socket, 0o666)
    for d in (workdir, c.dir):
        os.chmod(d, 0o755)

    def as_user(uid, method, path, groups=()):
        ids = ["--reuid", str(uid), "--regid", str(uid)]
        ids += ["--groups", ",".join(map(str, groups))] if groups else ["--clear-groups"]
        p = subprocess.run(["setpriv", *ids, "curl", "-sS", "--unix-socket", c.socket, "-X", method, "-w",
                            "\n%{http_code}", "http://clsd" + path], capture_output=True, text=True)
        body, _, status = p.stdout.rpartition("\n")
        assert status.isdigit(), p
        return int(status), body
    assert as_user(4201, "GET", "/ifaces")[0] == 200
    status, body = as_user(4201, "DELETE", "/objects/" + digest)
    assert status == 403 and "uid 4201" in body and "needs the operator role" in body, body
    assert as_user(4299, "GET", "/ifaces")[0] == 403
    # a member of more groups than 64 (SO_PEERGROUPS says how many when they do not fit)
    assert as_user(4299, "GET", "/ifaces", groups=tuple(range(5000, 5100)) + (4300,))[0] == 200
    assert as_user(4299, "DELETE", "/objects/" + digest, groups=(4300,))[0] == 204
    # the access file changed (SIGHUP): the operator certificate's grant removed, at once
    write_access(access, [g for g in grants if "san" not in g])
    sighup(c, "the reload")
    forbidden(https(net, port, pki, ops).get("/ifaces"), "reader")
    # one that does not parse is refused, and the last good one stays
    with open(access, "w") as f:
        f.write('{"grants": [{"role": "admin", "user": 0}]}')
    sighup(c, "the failed reload")
    assert "grants[0].role" in c.log_this_run()
    assert reader.get("/ifaces").status == 200


@pytest.mark.parametrize("text,why", [
    ('{"grants": [{"role": "reader"}]}', "expected one of user"),
    ('{"grants": [{"role": "reader", "user": 1, "group": 2}]}', "one of user, group"),
    ('{"grants": [{"role": "boss", "user": 1}]}', "grants[0].role"),
    ('{"grants": [{"role": "reader", "token": "x"}]}', "token_sha256"),
    ('{"grants": [{"role": "reader", "token": "x", "token_sha256": "abc"}]}', "sha256:<64 hex>"),
    ('{"grants": [{"role": "reader", "user": "no-such-user-here"}]}', "no such name"),
    ('{"grants": [], "extra": 1}', 'unknown field "extra"'),
    ('{"grants": [{"role": "reader", "user": 1, "colour": "red"}]}', 'unknown field "colour"'),
    ('{"grants": [', "--access-file"),
])
def test_an_access_file_that_does_not_parse_is_refused_at_start(net, workdir, text, why):
    path = os.path.join(workdir, "access.json")
    with open(path, "w") as f:
        f.write(text)
    p = start_refused(net.a, workdir, "--access-file", path)
    assert p.returncode == 1 and why in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr


def clsctl(ns, *args, env=None, input=None):
    return subprocess.run(ns.argv("env", *["%s=%s" % kv for kv in (env or {}).items()], CLSCTL, *args),
                          capture_output=True, text=True, input=input, timeout=60)


def test_clsctl_over_https_with_a_certificate_or_a_token(net, clsd_factory, bpf, workdir):
    pki, tls = tls_server(workdir)
    ops = pki.issue("ops", "/CN=ops")
    other = Pki(os.path.join(workdir, "other"), "other").issue("foreign", "/CN=ops")
    token = "tok-" + os.urandom(12).hex()
    port = free_port(net.a, ADDR_A)
    c = clsd_factory(net.a, args=("--listen", "%s:%d" % (ADDR_A, port), *tls, "--client-ca", pki.cert,
                                  "--token-file", token_file(workdir, token)))
    url = "https://%s:%d" % (ADDR_A, port)
    doc = os.path.join(workdir, "doc.json")
    with open(doc, "w") as f:
        json.dump({"ingress": [filt("web", bpf.count, priority=10)]}, f)
    # from the other namespace: a client certificate
    p = clsctl(net.b, "--host", url, "--cacert", pki.cert, "--cert", ops[0], "--key", ops[1], "apply", net.if_a, doc)
    assert p.returncode == 0, p
    assert net.a.filter_at(net.if_a, 10) is not None
    p = clsctl(net.b, "--host", url, "--cacert", pki.cert, "--cert", ops[0], "--key", ops[1], "ls")
    assert p.returncode == 0 and net.if_a in p.stdout, p
    # a token, from a file or CLSD_TOKEN
    tf = token_file(os.path.join(workdir, "pki"), token)
    p = clsctl(net.b, "--host", url, "--cacert", pki.cert, "--token-file", tf, "get", net.if_a)
    assert p.returncode == 0 and "web" in p.stdout, p
    p = clsctl(net.b, "get", net.if_a, env={"CLSD_HOST": url, "CLSD_TOKEN": token})
    assert p.returncode == 1 and "certificate" in p.stderr.lower(), p  # the system's CAs do not know ours
    # refused: a certificate of another CA, no credential, a server whose CA is not given
    for args, why in (
        (("--cacert", pki.cert, "--cert", other[0], "--key", other[1]), "unauthorized: the client certificate is not trusted"),
        (("--cacert", pki.cert), "unauthorized"),
        (("--cert", ops[0], "--key", ops[1]), "certificate"),
    ):
        p = clsctl(net.b, "--host", url, *args, "delete", net.if_a)
        assert p.returncode == 1 and why in p.stderr and len(p.stderr.splitlines()) == 1, (args, p.stderr)
    assert net.a.filter_at(net.if_a, 10) is not None


def test_clsctl_hosts_runs_a_command_on_every_host(net, clsd_factory, bpf, workdir):
    """Three hosts: clsd in net.a and in net.b over mutual TLS, and one where nothing listens."""
    pki, tls = tls_server(workdir, addrs=(ADDR_A, ADDR_B))
    ops = pki.issue("ops", "/CN=ops")
    pa, pb = free_port(net.a, ADDR_A), free_port(net.b, ADDR_B)
    a = clsd_factory(net.a, name="a", args=("--listen", "%s:%d" % (ADDR_A, pa), *tls, "--client-ca", pki.cert))
    b = clsd_factory(net.b, name="b", args=("--listen", "%s:%d" % (ADDR_B, pb), *tls, "--client-ca", pki.cert))
    hosts = os.path.join(workdir, "hosts")
    with open(hosts, "w") as f:
        f.write("# the lab\nalpha https://%s:%d\nbeta https://%s:%d   # the other one\n\ngone https://%s:1\n"
                % (ADDR_A, pa, ADDR_B, pb, ADDR_B))
    doc = os.path.join(workdir, "doc.json")
    with open(doc, "w") as f:
        json.dump({"ingress": [filt("web", bpf.count, priority=10)]}, f)
    tls_args = ("--hosts", hosts, "--cacert", pki.cert, "--cert", ops[0], "--key", ops[1])
    # beta has no interface of that name: its document waits for it (202), which is a success too
    p = clsctl(net.a, *tls_args, "apply", net.if_a, doc)
    assert p.returncode == 1, p
    rows = {l.split()[0]: l for l in p.stdout.splitlines() if l.split() and l.split()[0] in ("alpha", "beta", "gone")}
    assert set(rows) == {"alpha", "beta", "gone"}, p.stdout
    assert " ok" in rows["alpha"] and " ok" in rows["beta"], p.stdout
    assert "failed" in rows["gone"] and "cannot connect" in rows["gone"], p.stdout
    assert "2 of 3 host(s) ok" in p.stdout, p.stdout
    assert p.stderr.strip().splitlines()[-1] == "clsctl: 1 of 3 host(s) failed", p.stderr
    assert net.a.filter_at(net.if_a, 10) is not None
    assert b.api.get_classifier(net.if_a).status == 200
    # without the dead host: every one ok, exit 0; "ls" shows each host's table under its name
    with open(hosts, "w") as f:
        f.write("alpha https://%s:%d\nbeta https://%s:%d\n" % (ADDR_A, pa, ADDR_B, pb))
    p = clsctl(net.a, *tls_args, "ls")
    assert p.returncode == 0 and "── alpha (ls) ──" in p.stdout and "── beta (ls) ──" in p.stdout, p
    assert "2 of 2 host(s) ok" in p.stdout
    # diff on every host: nothing to change on either, exit 0
    p = clsctl(net.a, *tls_args, "diff", net.if_a, doc)
    assert p.returncode == 0 and "alpha" in p.stdout and "beta" in p.stdout, p
    with open(doc, "w") as f:
        json.dump({"ingress": [filt("web", bpf.count, priority=12)]}, f)
    p = clsctl(net.a, *tls_args, "diff", net.if_a, doc)
    assert p.returncode == 1 and p.stdout.count("ok, would change") == 2 and not p.stderr, p
    # the document from stdin ("-"): every host gets all of it, not only the first to read
    with open(doc) as f:
        p = clsctl(net.a, *tls_args, "apply", net.if_a, "-", input=f.read())
    assert p.returncode == 0 and "2 of 2 host(s) ok" in p.stdout, p
    assert [c.api.get_classifier(net.if_a).json["document"]["ingress"][0]["priority"] for c in (a, b)] == [12, 12]
    # a hosts file that is not one; fleet commands are etcd's, not the hosts'
    with open(hosts, "w") as f:
        f.write("alpha ftp://x\n")
    p = clsctl(net.a, *tls_args, "ls")
    assert p.returncode == 1 and "hosts:1:" in p.stderr, p
    p = clsctl(net.a, *tls_args, "fleet", "ls")
    assert p.returncode == 2, p
