"""The API's clients: HTTP over the unix socket or a namespace's TCP, TLS (a PKI of the test's own),
and assert_error() for an error answer."""
import http.client
import json
import os
import random
import socket
import ssl
import subprocess

from harness.base import ADDR_A, CLSD


class UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path, timeout=10):
        super().__init__("localhost", timeout=timeout)
        self.unix_path = path

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(self.timeout)
        s.connect(self.unix_path)
        self.sock = s


def wait_or_kill(proc, timeout):
    """Waits for proc to end (it was told to), and kills it past timeout."""
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def netns_connect(ns, host, port, timeout):
    """A TCP socket connected to host:port from inside ns."""
    s = ns.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(timeout)
    s.connect((host, port))
    return s


class NetnsHTTPConnection(http.client.HTTPConnection):
    """TCP to host:port as seen from inside a namespace."""

    def __init__(self, ns, host, port, timeout=10):
        super().__init__(host, port, timeout=timeout)
        self.ns = ns

    def connect(self):
        self.sock = netns_connect(self.ns, self.host, self.port, self.timeout)


class NetnsHTTPSConnection(http.client.HTTPSConnection):
    """HTTPS to host:port from inside a namespace; cafile to trust, and a client certificate if given."""

    def __init__(self, ns, host, port, cafile, cert=None, key=None, timeout=10):
        ctx = ssl.create_default_context(cafile=cafile)
        ctx.check_hostname = False  # the test certificates name the namespace's address
        if cert:
            ctx.load_cert_chain(cert, key)
        super().__init__(host, port, timeout=timeout, context=ctx)
        self.ns = ns

    def connect(self):
        self.sock = self._context.wrap_socket(netns_connect(self.ns, self.host, self.port, self.timeout),
                                              server_hostname=self.host)


class Pki:
    """A certificate authority made with openssl in dir: issue(name, subject, sans) -> (cert, key)."""

    def __init__(self, d, name="ca"):
        self.dir = d
        os.makedirs(d, exist_ok=True)
        self.key, self.cert = os.path.join(d, name + ".key"), os.path.join(d, name + ".pem")
        self._openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout",
                      self.key, "-out", self.cert, "-days", "30", "-subj", "/CN=clsd test %s" % name)

    def _openssl(self, *args):
        subprocess.run(["openssl", *args], check=True, capture_output=True)

    def issue(self, name, subject, sans=(), days=30):
        key, csr, crt = (os.path.join(self.dir, name + ext) for ext in (".key", ".csr", ".pem"))
        ext = os.path.join(self.dir, name + ".ext")
        with open(ext, "w") as f:
            f.write("subjectAltName=%s\n" % ",".join(sans) if sans else "basicConstraints=CA:FALSE\n")
        self._openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", key,
                      "-out", csr, "-subj", subject)
        # days=-1: expired a day ago
        self._openssl("x509", "-req", "-in", csr, "-CA", self.cert, "-CAkey", self.key, "-CAcreateserial", "-out",
                      crt, "-days", str(days), "-extfile", ext)
        return crt, key


def tls_server(workdir, addrs=("198.18.0.1", "127.0.0.1"), name="pki"):
    """A CA and a server certificate for addrs: (pki, clsd's TLS flags)."""
    pki = Pki(os.path.join(workdir, name))
    cert, key = pki.issue("server", "/CN=clsd", ["IP:%s" % a for a in addrs])
    return pki, ["--tls-cert", cert, "--tls-key", key]


class Response:
    def __init__(self, status, reason, headers, body):
        self.status, self.reason, self.headers, self.body = status, reason, headers, body
        self._json = None

    @property
    def json(self):
        if self._json is None:
            try:
                self._json = json.loads(self.body)
            except ValueError as e:
                raise AssertionError("not JSON (HTTP %d): %r" % (self.status, self.body[:300])) from e
        return self._json

    def __repr__(self):
        return "Response(%d, %r)" % (self.status, self.body[:2000])


_DEFAULT = object()


class Api:
    """The REST API over one connection factory; a new connection per request."""

    def __init__(self, connect):
        self.connect = connect

    def request(self, method, path, body=None, headers=None, content_type=_DEFAULT):
        h = dict(headers or {})
        if isinstance(body, (dict, list)):
            body = json.dumps(body).encode()
            if content_type is _DEFAULT:
                content_type = "application/json"
        elif isinstance(body, str):
            body = body.encode()
        if content_type is not _DEFAULT and content_type is not None:
            h["Content-Type"] = content_type
        conn = self.connect()
        try:
            try:
                conn.request(method, path, body=body, headers=h)
            except (BrokenPipeError, ConnectionResetError, ssl.SSLEOFError):
                # The server may answer (413, 401) and close before reading the whole body; its
                # answer is still waiting in our socket.
                pass
            r = conn.getresponse()
            return Response(r.status, r.reason, r.headers, r.read())
        finally:
            conn.close()

    def get(self, path, **kw):
        return self.request("GET", path, **kw)

    def delete(self, path, **kw):
        return self.request("DELETE", path, **kw)

    def put_classifier(self, ifname, doc, **kw):
        return self.request("PUT", "/ifaces/%s/classifier" % ifname, body=doc, **kw)

    def get_classifier(self, ifname):
        return self.get("/ifaces/%s/classifier" % ifname)

    def delete_classifier(self, ifname, **kw):
        return self.delete("/ifaces/%s/classifier" % ifname, **kw)

    def upload(self, path_or_bytes, content_type="application/octet-stream"):
        data = path_or_bytes
        if isinstance(path_or_bytes, str):
            with open(path_or_bytes, "rb") as f:
                data = f.read()
        return self.request("POST", "/objects", body=data, content_type=content_type)

    def upload_ok(self, path):
        r = self.upload(path)
        assert r.status in (200, 201), r
        return r.json["digest"]

    def healthy(self):
        try:
            r = self.get("/healthz")
        except OSError:
            return False
        return r.status == 200 and r.json == {"status": "ok"}


def assert_error(resp, status, code):
    """The error shape of every failure: {"error":{"code","message"[,"detail"]}}."""
    assert resp.status == status, "want HTTP %d %s, got %r" % (status, code, resp)
    body = resp.json
    assert list(body) == ["error"], body
    err = body["error"]
    assert set(err) >= {"code", "message"} and set(err) <= {"code", "message", "detail"}, err
    assert err["code"] == code, err
    assert isinstance(err["message"], str) and err["message"], err
    return err


def free_port(ns, addr):
    """A port nothing listens on in ns (a fresh namespace has none in use; checked anyway)."""
    for _ in range(20):
        port = random.randint(20000, 60000)
        s = ns.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            s.bind((addr, port))
            return port
        except OSError:
            continue
        finally:
            s.close()
    raise AssertionError("no free port")


def token_file(workdir, token):
    path = os.path.join(workdir, "token")
    with open(path, "w") as f:
        f.write(token + "\n")
    os.chmod(path, 0o600)
    return path


def start_refused(ns, workdir, *args):
    state = os.path.join(workdir, "refused-state")
    p = ns.run(CLSD, "--state-dir", state, "--socket", os.path.join(workdir, "refused.sock"), *args,
               check=False, timeout=10)
    return p


class Conn:
    """One raw connection to clsd: the unix socket, TCP in a namespace, or TLS over it."""

    def __init__(self, c, kind="unix", port=None, cafile=None):
        if kind == "unix":
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect(c.socket)
        else:
            s = c.ns.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.connect((ADDR_A if kind == "tls" else "127.0.0.1", port))
            if kind == "tls":
                s = ssl.create_default_context(cafile=cafile).wrap_socket(s, server_hostname=ADDR_A)
        s.settimeout(10)
        self.s = s

    def send(self, data):
        self.s.sendall(data)

    def answers(self):
        """Everything clsd sends until it closes the connection (or 2 s of silence)."""
        out = b""
        self.s.settimeout(2)
        try:
            while True:
                d = self.s.recv(65536)
                if not d:
                    break
                out += d
        except (socket.timeout, ConnectionResetError, ssl.SSLError):
            pass
        return out

    def close(self):
        self.s.close()


def head_request(method, path, extra=b"", body=b""):
    return b"%s %s HTTP/1.1\r\nHost: clsd\r\n%s\r\n%s" % (method, path, extra, body)
