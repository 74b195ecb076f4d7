"""A real OCI registry for the tests: Debian's docker-registry (the Distribution registry 2.8) in a
namespace, over TLS, with htpasswd (basic) auth or bearer tokens from a small token service (JWTs
signed with ES256, checked by the registry against the service's certificate), and images pushed through
the registry's own HTTP API v2 (as any client pushes them) or with skopeo: plain images, bpfman's
bytecode images (OCI and Docker media types), cosign-format signatures made with openssl."""

import base64
import gzip
import hashlib
import http.server
import io
import json
import os
import re
import shutil
import ssl
import subprocess
import tarfile
import threading
import time
import warnings

import pytest

from harness.api import NetnsHTTPSConnection, Pki
from harness.base import run, wait_for

with warnings.catch_warnings():  # Python 3.11's own bcrypt, for htpasswd (the registry takes bcrypt only)
    warnings.simplefilter("ignore", DeprecationWarning)
    import crypt


MT_OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
MT_OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
MT_OCI_LAYER = "application/vnd.oci.image.layer.v1.tar+gzip"
MT_DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
MT_DOCKER_CONFIG = "application/vnd.docker.container.image.v1+json"
MT_DOCKER_LAYER = "application/vnd.docker.image.rootfs.diff.tar.gzip"
MT_OCI_INDEX = "application/vnd.oci.image.index.v1+json"
MT_COSIGN = "application/vnd.dev.cosign.simplesigning.v1+json"


def digest(data):
    return "sha256:" + hashlib.sha256(data).hexdigest()


def tar_gz(files):
    """A gzipped tar of {name: bytes}, entries at the root as bpfman's images have them ("./name")."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as t:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mtime = 0
            t.addfile(info, io.BytesIO(data))
    return gzip.compress(raw.getvalue(), mtime=0)


class Registry:
    """docker-registry on addr:port in ns, TLS from its own CA; auth "htpasswd" (user/password) or
    "token" (the same credentials, exchanged for a bearer token at a token service on port+1)."""

    def __init__(self, ns, workdir, addr, port=5443, auth="htpasswd", user="clsd", password="s3cret-pull",
                 access_log=False):
        self.ns, self.addr, self.port, self.auth = ns, addr, port, auth
        self.access_log = access_log  # each request in registry.log (access_lines())
        self.user, self.password = user, password
        self.host = "%s:%d" % (addr, port)
        self.dir = os.path.join(workdir, "registry-%s-%d" % (addr, port))
        self.data = os.path.join(self.dir, "data")
        os.makedirs(self.data, exist_ok=True)
        self.pki = Pki(os.path.join(self.dir, "pki"))
        self.cert, self.key = self.pki.issue("registry", "/CN=registry", ["IP:%s" % addr])
        self.ca = self.pki.cert
        self.proc = None
        self.token_server = None
        self.token_requests = 0
        self.requests_seen = 0

    # -- lifecycle

    def config(self):
        cfg = ["version: 0.1", "log:", "  level: %s" % ("info" if self.access_log else "warn"), "storage:", "  filesystem:",
               "    rootdirectory: %s" % self.data, "  delete:", "    enabled: true", "http:",
               "  addr: %s" % self.host, "  tls:", "    certificate: %s" % self.cert, "    key: %s" % self.key]
        if self.auth == "htpasswd":
            htpasswd = os.path.join(self.dir, "htpasswd")
            with open(htpasswd, "w") as f:
                f.write("%s:%s\n" % (self.user, crypt.crypt(self.password, crypt.mksalt(crypt.METHOD_BLOWFISH, rounds=1 << 5))))
            cfg += ["auth:", "  htpasswd:", "    realm: clsd-tests", "    path: %s" % htpasswd]
        elif self.auth == "token":
            self.token_key, self.token_cert = self.pki.issue("token", "/CN=token")[::-1]
            cfg += ["auth:", "  token:", "    realm: https://%s:%d/token" % (self.addr, self.port + 1),
                    "    service: clsd-registry", "    issuer: clsd-tests", "    rootcertbundle: %s" % self.token_cert]
        path = os.path.join(self.dir, "config.yml")
        with open(path, "w") as f:
            f.write("\n".join(cfg) + "\n")
        return path

    def start(self):
        if self.auth == "token" and self.token_server is None:
            self._start_token_service()
        self.log = open(os.path.join(self.dir, "registry.log"), "ab")
        self.proc = self.ns.popen("docker-registry", "serve", self.config(), stdout=self.log, stderr=subprocess.STDOUT)
        wait_for(lambda: self._answers(), timeout=10, what="docker-registry on %s" % self.host)
        return self

    def _answers(self):
        assert self.proc.poll() is None, "docker-registry exited"
        try:
            return self.request("GET", "/v2/", auth=False)[0] in (200, 401)
        except OSError:
            return False

    def stop(self):
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            self.proc = None
            self.log.close()

    def close(self):
        self.stop()
        if self.token_server is not None:
            self.token_server.shutdown()
            self.token_server.server_close()
            self.token_server = None

    def access_lines(self, client):
        """The access log's requests from client (an address): [(method, path, status)]."""
        out = []
        with open(os.path.join(self.dir, "registry.log"), errors="replace") as f:
            for line in f:
                m = re.match(r'^%s - .*?"(\w+) (\S+) HTTP/[\d.]+" (\d+) ' % re.escape(client), line)
                if m:
                    out.append((m.group(1), m.group(2), int(m.group(3))))
        return out

    # -- credentials for clsd

    def registries_file(self, path, user=None, password=None, ca=True):
        entry = {"username": user or self.user, "password": password or self.password}
        if ca:
            entry["ca_file"] = self.ca
        with open(path, "w") as f:
            json.dump({"registries": {self.host: entry}}, f)
        os.chmod(path, 0o600)
        return path

    # -- the token service (auth "token")

    def _jwt(self, scope_actions):
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec, utils
        with open(self.token_key, "rb") as f:
            key = serialization.load_pem_private_key(f.read(), None)
        with open(self.token_cert, "rb") as f:
            der = ssl.PEM_cert_to_DER_cert(f.read().decode())

        def b64(b):
            return base64.urlsafe_b64encode(b).rstrip(b"=").decode()
        header = {"alg": "ES256", "typ": "JWT", "x5c": [base64.b64encode(der).decode()]}
        now = int(time.time())
        claims = {"iss": "clsd-tests", "sub": self.user, "aud": "clsd-registry", "exp": now + 300, "nbf": now - 10,
                  "iat": now, "jti": os.urandom(8).hex(), "access": scope_actions}
        signing = b64(json.dumps(header).encode()) + "." + b64(json.dumps(claims).encode())
        r, s = utils.decode_dss_signature(key.sign(signing.encode(), ec.ECDSA(hashes.SHA256())))
        return signing + "." + b64(r.to_bytes(32, "big") + s.to_bytes(32, "big"))

    def _start_token_service(self):
        registry = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_GET(self):
                registry.token_requests += 1
                auth = self.headers.get("Authorization", "")
                want = "Basic " + base64.b64encode(("%s:%s" % (registry.user, registry.password)).encode()).decode()
                if auth != want:
                    self.send_response(401)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                from urllib.parse import parse_qs, urlparse
                q = parse_qs(urlparse(self.path).query)
                access = []
                for scope in q.get("scope", []):
                    kind, name, actions = scope.split(":")
                    access.append({"type": kind, "name": name, "actions": actions.split(",")})
                body = json.dumps({"token": registry._jwt(access)}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        cert, key = self.pki.issue("token-tls", "/CN=token", ["IP:%s" % self.addr])
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(cert, key)

        def serve():
            # made inside the namespace: the socket listens there
            srv = http.server.ThreadingHTTPServer((self.addr, self.port + 1), Handler)
            srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
            return srv
        self.token_server = self.ns.call(serve)
        threading.Thread(target=self.token_server.serve_forever, daemon=True).start()

    # -- the registry's HTTP API, as a pushing client uses it

    def _auth_header(self, path, method):
        if self.auth == "htpasswd":
            return "Basic " + base64.b64encode(("%s:%s" % (self.user, self.password)).encode()).decode()
        if self.auth == "token":
            parts = path.split("/")
            repo = "/".join(parts[2:parts.index("blobs") if "blobs" in parts else parts.index("manifests")]) \
                if len(parts) > 3 else ""
            return "Bearer " + self._jwt([{"type": "repository", "name": repo, "actions": ["pull", "push", "delete"]}])
        return None

    def request(self, method, path, body=None, headers=None, auth=True):
        conn = NetnsHTTPSConnection(self.ns, self.addr, self.port, self.ca, timeout=10)
        h = dict(headers or {})
        if auth and self.auth:
            h["Authorization"] = self._auth_header(path, method)
        try:
            conn.request(method, path, body=body, headers=h)
            r = conn.getresponse()
            return r.status, dict((k.lower(), v) for k, v in r.getheaders()), r.read()
        finally:
            conn.close()

    def push_blob(self, repo, data):
        d = digest(data)
        status, h, body = self.request("POST", "/v2/%s/blobs/uploads/" % repo)
        assert status == 202, (status, body)
        loc = h["location"]
        if loc.startswith("https://"):
            loc = "/" + loc.split("/", 3)[3]
        status, h, body = self.request("PUT", loc + ("&" if "?" in loc else "?") + "digest=" + d, body=data,
                                       headers={"Content-Type": "application/octet-stream"})
        assert status == 201, (status, body)
        return d

    def push_manifest(self, repo, ref, manifest, media_type=None):
        data = manifest if isinstance(manifest, bytes) else json.dumps(manifest).encode()
        mt = media_type or json.loads(data)["mediaType"]
        status, h, body = self.request("PUT", "/v2/%s/manifests/%s" % (repo, ref), body=data, headers={"Content-Type": mt})
        assert status == 201, (status, body)
        return digest(data)

    def push_image(self, repo, tag, obj, labels=None, docker=False, layer="tar", filename="prog.o", files=None):
        """An image whose one layer holds obj: "tar" (gzipped tar, obj as ./filename, or files),
        "raw" (the layer is obj). labels: the configuration's (bpfman's io.ebpf.*). Its manifest's digest."""
        data = tar_gz(files if files is not None else {"./" + filename: obj}) if layer == "tar" else obj
        mt_layer = (MT_DOCKER_LAYER if docker else MT_OCI_LAYER) if layer == "tar" else "application/octet-stream"
        config = json.dumps({"architecture": "amd64", "os": "linux", "config": {"Labels": labels or {}},
                             "rootfs": {"type": "layers", "diff_ids": []}}).encode()
        cd, ld = self.push_blob(repo, config), self.push_blob(repo, data)
        manifest = {"schemaVersion": 2, "mediaType": MT_DOCKER_MANIFEST if docker else MT_OCI_MANIFEST,
                    "config": {"mediaType": MT_DOCKER_CONFIG if docker else MT_OCI_CONFIG, "digest": cd,
                               "size": len(config)},
                    "layers": [{"mediaType": mt_layer, "digest": ld, "size": len(data)}]}
        return self.push_manifest(repo, tag, manifest)

    def blob_path(self, d):
        hexd = d.split(":", 1)[1]
        return os.path.join(self.data, "docker/registry/v2/blobs/sha256", hexd[:2], hexd, "data")

    def sign(self, repo, manifest_digest, key, signs=None):
        """A cosign signature of the image (tag sha256-HEX.sig): a simple-signing payload naming signs
        (default: the image's digest), signed with key (an EC private key in PEM) by openssl."""
        payload = json.dumps({"critical": {"identity": {"docker-reference": "%s/%s" % (self.host, repo)},
                                           "image": {"docker-manifest-digest": signs or manifest_digest},
                                           "type": "cosign container image signature"},
                              "optional": None}).encode()
        sig = subprocess.run(["openssl", "dgst", "-sha256", "-sign", key], input=payload, capture_output=True,
                             check=True).stdout
        pd = self.push_blob(repo, payload)
        config = b"{}"
        cd = self.push_blob(repo, config)
        manifest = {"schemaVersion": 2, "mediaType": MT_OCI_MANIFEST,
                    "config": {"mediaType": MT_OCI_CONFIG, "digest": cd, "size": len(config)},
                    "layers": [{"mediaType": MT_COSIGN, "digest": pd, "size": len(payload),
                                "annotations": {"dev.cosignproject.cosign/signature": base64.b64encode(sig).decode()}}]}
        return self.push_manifest(repo, "sha256-%s.sig" % manifest_digest.split(":", 1)[1], manifest)

    def skopeo_copy(self, layout_dir, tag, repo, fmt=None):
        """skopeo copy of an OCI layout's image to repo:tag here (fmt "v2s2": Docker's media types)."""
        certs = os.path.join(self.dir, "skopeo-certs")
        os.makedirs(certs, exist_ok=True)
        shutil.copy(self.ca, os.path.join(certs, "ca.crt"))
        argv = ["skopeo", "copy", "--quiet", "--dest-cert-dir", certs, "--dest-creds", "%s:%s" % (self.user, self.password)]
        if fmt:
            argv += ["--format", fmt]
        argv += ["oci:%s:%s" % (layout_dir, tag), "docker://%s/%s:%s" % (self.host, repo, tag)]
        run(self.ns.argv(*argv), timeout=60)
        status, h, _ = self.request("HEAD", "/v2/%s/manifests/%s" % (repo, tag),
                                    headers={"Accept": ", ".join([MT_OCI_MANIFEST, MT_DOCKER_MANIFEST])})
        assert status == 200
        return h["docker-content-digest"], h["content-type"]


def oci_layout(path, tag, obj, labels, filename="prog.o"):
    """An OCI image layout directory (as podman or buildah write one) holding an image of obj, for
    skopeo to copy."""
    blobs = os.path.join(path, "blobs", "sha256")
    os.makedirs(blobs, exist_ok=True)

    def blob(data):
        d = digest(data)
        with open(os.path.join(blobs, d.split(":")[1]), "wb") as f:
            f.write(data)
        return d
    layer = tar_gz({"./" + filename: obj})
    config = json.dumps({"architecture": "amd64", "os": "linux", "config": {"Labels": labels},
                         "rootfs": {"type": "layers", "diff_ids": [digest(gzip.decompress(layer))]}}).encode()
    manifest = json.dumps({"schemaVersion": 2, "mediaType": MT_OCI_MANIFEST,
                           "config": {"mediaType": MT_OCI_CONFIG, "digest": blob(config), "size": len(config)},
                           "layers": [{"mediaType": MT_OCI_LAYER, "digest": blob(layer), "size": len(layer)}]}).encode()
    md = blob(manifest)
    with open(os.path.join(path, "oci-layout"), "w") as f:
        json.dump({"imageLayoutVersion": "1.0.0"}, f)
    with open(os.path.join(path, "index.json"), "w") as f:
        json.dump({"schemaVersion": 2, "manifests": [{"mediaType": MT_OCI_MANIFEST, "digest": md, "size": len(manifest),
                                                      "annotations": {"org.opencontainers.image.ref.name": tag}}]}, f)
    return md


@pytest.fixture
def registry(net, workdir):
    """A registry with htpasswd auth in net.b (198.18.0.2:5443); clsd in net.a reaches it over the veth."""
    r = Registry(net.b, workdir, "198.18.0.2")
    try:
        yield r.start()
    finally:
        r.close()
