"""Reading /metrics: the exposition parsed, one sample's value, a scrape."""
import re


def parse_exposition(text):
    """{name: [(labels dict, value)]}, and checks the format's rules on the way."""
    samples, types = {}, {}
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ", 3)
            assert name not in types, "two TYPE lines for %s" % name
            types[name] = kind
            continue
        if line.startswith("#") or not line:
            continue
        m = SAMPLE.match(line)
        assert m, "not a sample line: %r" % line
        labels = dict(LABEL.findall(m.group(2) or ""))
        samples.setdefault(m.group(1), []).append((labels, float(m.group(3))))
    return samples, types


def value(samples, metric, **labels):
    found = [v for l, v in samples.get(metric, []) if all(l.get(k) == str(x) for k, x in labels.items())]
    assert len(found) == 1, "%s%r: %r" % (metric, labels, samples.get(metric))
    return found[0]


def scrape(api):
    r = api.request("GET", "/metrics")
    assert r.status == 200, r
    assert r.headers["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8"
    return r.body.decode()


def metric(api, name):
    samples, _ = parse_exposition(api.get("/metrics").body.decode())
    return value(samples, name)


SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$')


LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')
