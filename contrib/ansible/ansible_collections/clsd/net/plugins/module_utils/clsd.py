# clsd's REST API for the clsd.net modules: the unix socket, or HTTPS with mutual TLS or a token.
# Only the Python standard library, so that the modules run on any host with Python 3.

import http.client
import ipaddress
import json
import socket
import ssl
import urllib.parse

CONNECTION_ARGS = dict(
    url=dict(type="str", default="unix:/run/clsd/clsd.sock"),
    ca_path=dict(type="path"),
    client_cert=dict(type="path"),
    client_key=dict(type="path"),
    token=dict(type="str", no_log=True),
    timeout=dict(type="int", default=120),
)


def _loopback(host):
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


class ClsdError(Exception):
    def __init__(self, status, code, message):
        super().__init__("%s: %s" % (code, message) if code else message)
        self.status, self.code = status, code


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path, timeout):
        super().__init__("clsd", timeout=timeout)
        self._path = path

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(self.timeout)
        s.connect(self._path)
        self.sock = s


class Clsd:
    def __init__(self, params):
        self.url = params["url"]
        self.params = params

    def _connection(self):
        p = self.params
        if self.url.startswith("unix:"):
            return _UnixConnection(self.url[5:], p["timeout"])
        u = urllib.parse.urlsplit(self.url)
        if u.scheme == "http":
            # plain HTTP only to this host: a token must not cross the network in clear
            if p.get("token") and not _loopback(u.hostname):
                raise ClsdError(0, None, "url %s: a token is sent over https:// only (or to a loopback address)"
                                % self.url)
            return http.client.HTTPConnection(u.hostname, u.port or 80, timeout=p["timeout"])
        if u.scheme != "https":
            raise ClsdError(0, None, "url %s: expected unix:/PATH or https://HOST:PORT" % self.url)
        # the certificate is checked against ca_path (else the system's CAs) and must name the host (a
        # name or an address in its subjectAltName)
        ctx = ssl.create_default_context(cafile=p.get("ca_path"))
        if p.get("client_cert"):
            ctx.load_cert_chain(p["client_cert"], p.get("client_key"))
        return http.client.HTTPSConnection(u.hostname, u.port or 443, timeout=p["timeout"], context=ctx)

    def request(self, method, path, body=None, content_type=None, headers=None, ok=(200, 201, 202, 204)):
        """(status, JSON answer or None); a status outside ok raises ClsdError with clsd's code and message."""
        h = dict(headers or {})
        if isinstance(body, (dict, list)):
            body, content_type = json.dumps(body).encode(), "application/json"
        if content_type:
            h["Content-Type"] = content_type
        if self.params.get("token"):
            h["Authorization"] = "Bearer " + self.params["token"]
        conn = self._connection()
        try:
            conn.request(method, path, body=body, headers=h)
            r = conn.getresponse()
            data = r.read()
        except (OSError, http.client.HTTPException) as e:
            raise ClsdError(0, None, "%s %s on %s: %s" % (method, path, self.url, e)) from e
        finally:
            conn.close()
        answer = json.loads(data) if data else None
        if r.status not in ok:
            err = (answer or {}).get("error", {}) if isinstance(answer, dict) else {}
            raise ClsdError(r.status, err.get("code"), err.get("message") or "HTTP %d" % r.status)
        return r.status, answer

    def get_or_none(self, path):
        status, answer = self.request("GET", path, ok=(200, 404))
        return answer if status == 200 else None


def quote(segment):
    return urllib.parse.quote(segment, safe="")


def pretty(value):
    return json.dumps(value, indent=2, sort_keys=True) + "\n" if value is not None else ""
