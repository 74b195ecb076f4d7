"""Policies: put one, the veths it matches, clsd's filters on them, the results it answers."""


def policy(match, ingress=None, egress=None, order=None):
    p = {"match": match}
    if ingress is not None:
        p["ingress"] = ingress
    if egress is not None:
        p["egress"] = egress
    if order is not None:
        p["order"] = order
    return p


def put_policy(api, name, body, **kw):
    return api.request("PUT", "/policies/%s" % name, body=body, **kw)


def results(r):
    return {x["ifname"]: x for x in r.json["results"]}


def veths(ns, prefix, n):
    """n veth pairs prefix0/zprefix0 … in ns, up."""
    lines = []
    for i in range(n):
        lines.append("link add %s%d type veth peer name z%s%d" % (prefix, i, prefix, i))
    for i in range(n):
        lines.append("link set %s%d up" % (prefix, i))
    ns.run("ip", "-batch", "-", input="\n".join(lines) + "\n")
    return ["%s%d" % (prefix, i) for i in range(n)]


def clsd_filters(ns, dev, hook="ingress"):
    return [f for f in ns.filters(dev, hook) if f.name and f.name.startswith("clsd:")]
