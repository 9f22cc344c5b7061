# SPDX-License-Identifier: Apache-2.0
"""A strict parser of the Prometheus text exposition format (0.0.4), enough
to check kproxy's /metrics as a scraper would read it: every sample belongs
to a metric declared by # TYPE, histogram buckets are cumulative and end
with +Inf equal to _count."""
import math
import re

SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$')
LABEL = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"\s*(,|$)')


class ParseError(Exception):
    pass


def _labels(text):
    out, pos = {}, 0
    while pos < len(text):
        m = LABEL.match(text, pos)
        if not m:
            raise ParseError("bad labels: {%s}" % text)
        out[m.group(1)] = m.group(2)
        pos = m.end()
    return tuple(sorted(out.items()))


def parse(text):
    """Returns {name: {"type": t, "help": h, "samples": {(sample_name, labels): value}}}."""
    metrics, types = {}, {}
    for line in text.splitlines():
        if not line:
            continue
        if line.startswith("# HELP "):
            name, _, h = line[7:].partition(" ")
            metrics.setdefault(name, {"samples": {}})["help"] = h
            continue
        if line.startswith("# TYPE "):
            name, _, t = line[7:].partition(" ")
            if t not in ("counter", "gauge", "histogram", "summary", "untyped"):
                raise ParseError("bad type: %s" % line)
            metrics.setdefault(name, {"samples": {}})["type"] = t
            types[name] = t
            continue
        if line.startswith("#"):
            continue
        m = SAMPLE.match(line)
        if not m:
            raise ParseError("bad sample line: %r" % line)
        sname, labels, value = m.group(1), _labels(m.group(3) or ""), float(m.group(4))
        base = sname
        for suffix in ("_bucket", "_sum", "_count"):
            if sname.endswith(suffix) and types.get(sname[: -len(suffix)]) == "histogram":
                base = sname[: -len(suffix)]
        if base not in types:
            raise ParseError("sample %s has no # TYPE" % sname)
        metrics[base]["samples"][(sname, labels)] = value
    for name, m in metrics.items():
        if m.get("type") == "histogram":
            _check_histogram(name, m["samples"])
    return metrics


def _check_histogram(name, samples):
    series = {}
    for (sname, labels), v in samples.items():
        rest = tuple(kv for kv in labels if kv[0] != "le")
        series.setdefault(rest, {"buckets": [], "count": None})
        if sname == name + "_bucket":
            le = dict(labels)["le"]
            series[rest]["buckets"].append((math.inf if le == "+Inf" else float(le), v))
        elif sname == name + "_count":
            series[rest]["count"] = v
    for rest, s in series.items():
        b = sorted(s["buckets"])
        if not b or b[-1][0] != math.inf:
            raise ParseError("%s%s: no +Inf bucket" % (name, rest))
        if any(b[i][1] > b[i + 1][1] for i in range(len(b) - 1)):
            raise ParseError("%s%s: buckets not cumulative" % (name, rest))
        if b[-1][1] != s["count"]:
            raise ParseError("%s%s: +Inf bucket %s != _count %s" % (name, rest, b[-1][1], s["count"]))


def value(metrics, name, sample=None, **labels):
    """One sample's value (sample defaults to the metric name), or None."""
    m = metrics.get(name)
    if not m:
        return None
    return m["samples"].get((sample or name, tuple(sorted(labels.items()))))


def upstream_families(path, mode):
    """{name: (type, {label names}, stability)} of the families a list in
    tests/unit/metrics-upstream.txt's format gives for mode."""
    out = {}
    with open(path) as f:
        for line in f:
            if not line.strip() or line.startswith("#"):
                continue
            name, typ, labels, modes, stability, _buckets = line.split()
            if mode in modes.split(","):
                out[name] = (typ, set() if labels == "-" else set(labels.split(",")), stability)
    return out
