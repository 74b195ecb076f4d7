"""openapi/clsd.yaml as a contract: each answer's status and body checked against the spec."""

import json
import os
import re

import jsonschema

from harness.base import SOURCE_DIR


SPEC_PATH = os.path.join(SOURCE_DIR, "openapi", "clsd.yaml")


METHODS = ("get", "head", "put", "post", "delete")


class Contract:
    def __init__(self, spec, api):
        self.spec, self.api = spec, api
        self.resolver = jsonschema.RefResolver.from_schema(spec)
        self.seen = set()
        self.templates = [(t, re.compile("^" + re.sub(r"\{[^}]+\}", "[^/]+", t) + "$")) for t in spec["paths"]]

    def template_of(self, path):
        path = path.split("?")[0]
        found = [t for t, rx in self.templates if rx.match(path)]
        # a literal segment wins over a parameter: /ifaces/x/classifier/maps is not .../maps/{map}
        found.sort(key=lambda t: t.count("{"))
        assert found, "no path of the spec matches %s" % path
        return found[0]

    def resolve(self, node):
        while isinstance(node, dict) and "$ref" in node:
            _, node = self.resolver.resolve(node["$ref"])
        return node

    def request(self, method, path, **kw):
        r = self.api.request(method, path, **kw)
        self.check(method, path, r)
        return r

    def check(self, method, path, r):
        template = self.template_of(path)
        op = self.spec["paths"][template].get(method.lower())
        assert op, "%s %s: the spec has no such operation (%s)" % (method, path, template)
        self.seen.add((template, method.lower()))
        responses = op["responses"]
        assert str(r.status) in responses, "%s %s answered %d, which the spec does not list (%s)" % (
            method, path, r.status, sorted(responses))
        doc = self.resolve(responses[str(r.status)])
        content = doc.get("content") or {}
        if method == "HEAD" or r.status == 204:
            assert not r.body, "%s %s: a body on %d" % (method, path, r.status)
            return
        if not content:
            return
        ctype = r.headers.get("Content-Type", "")
        media = [m for m in content if m.split(";")[0] == ctype.split(";")[0]]
        assert media, "%s %s: Content-Type %s is not one of %s" % (method, path, ctype, list(content))
        schema = content[media[0]].get("schema")
        if not schema:
            return
        body = r.body.decode() if ctype.startswith("text/") else json.loads(r.body)
        validator = jsonschema.Draft202012Validator(schema, resolver=self.resolver)
        errors = sorted(validator.iter_errors(body), key=lambda e: list(e.absolute_path))
        assert not errors, "%s %s (%d) does not match the spec: %s at %s" % (
            method, path, r.status, errors[0].message[:400], "/".join(map(str, errors[0].absolute_path)))
