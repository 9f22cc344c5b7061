# SPDX-License-Identifier: Apache-2.0
"""Label and field selectors, parsed the way the API server parses them.

Principle of selectors: a selector is parsed once, when the request arrives,
into a list of requirements, so a syntax error is a 400 before anything is
streamed, and matching an object is a loop over small tuples.  An empty
selector matches everything, as upstream's labels.Everything() does.
"""
import re

_KEY = r"[A-Za-z0-9]([-A-Za-z0-9_./]*[A-Za-z0-9])?"
_VALUE = r"([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?"
_SET_RE = re.compile(r"^(%s)\s+(in|notin)\s*\((.*)\)$" % _KEY)
_OP_RE = re.compile(r"^(%s)\s*(==|=|!=|>|<)\s*(.*)$" % _KEY)
_EXISTS_RE = re.compile(r"^(%s)$" % _KEY)
_VALUE_RE = re.compile(r"^%s$" % _VALUE)


class SelectorError(ValueError):
    pass


def _split_top(text):
    """Splits on commas that are not inside parentheses."""
    parts, depth, cur = [], 0, []
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth < 0:
                raise SelectorError("unbalanced parentheses")
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    if depth:
        raise SelectorError("unbalanced parentheses")
    parts.append("".join(cur))
    return parts


def _check_value(v, text):
    if len(v) > 63 or not _VALUE_RE.match(v):
        raise SelectorError("invalid label value: %r in %r" % (v, text))
    return v


def parse_labels(text):
    """Returns a list of (op, key, values); raises SelectorError."""
    reqs = []
    if text is None or not text.strip():
        return reqs
    for part in _split_top(text):
        p = part.strip()
        if not p:
            raise SelectorError("empty requirement in %r" % text)
        if p.startswith("!"):
            key = p[1:].strip()
            if not _EXISTS_RE.match(key):
                raise SelectorError("invalid label key %r" % key)
            reqs.append(("!", key, None))
            continue
        m = _SET_RE.match(p)
        if m:
            vals = [v.strip() for v in m.group(4).split(",")]
            reqs.append((m.group(3), m.group(1), frozenset(_check_value(v, text) for v in vals)))
            continue
        m = _OP_RE.match(p)
        if m:
            op, val = m.group(3), m.group(4).strip()
            if op in (">", "<"):
                try:
                    val = int(val)
                except ValueError:
                    raise SelectorError("for '%s' operator, the value must be an integer" % op)
            else:
                _check_value(val, text)
            reqs.append(("=" if op == "==" else op, m.group(1), val))
            continue
        if _EXISTS_RE.match(p):
            reqs.append(("exists", p, None))
            continue
        raise SelectorError("unable to parse requirement: %r" % p)
    return reqs


def match_labels(reqs, labels):
    labels = labels or {}
    for op, key, val in reqs:
        have = key in labels
        cur = labels.get(key)
        if op == "=":
            ok = have and cur == val
        elif op == "!=":
            ok = not have or cur != val
        elif op == "exists":
            ok = have
        elif op == "!":
            ok = not have
        elif op == "in":
            ok = have and cur in val
        elif op == "notin":
            ok = not have or cur not in val
        else:  # ">" / "<": the label must exist and be an integer
            try:
                n = int(cur) if have else None
            except (TypeError, ValueError):
                n = None
            ok = n is not None and (n > val if op == ">" else n < val)
        if not ok:
            return False
    return True


FIELDS = {
    "metadata.name": lambda o: o.get("metadata", {}).get("name", ""),
    "metadata.namespace": lambda o: o.get("metadata", {}).get("namespace", ""),
}


def parse_fields(text):
    """Returns a list of (op, getter, value); raises SelectorError."""
    reqs = []
    if text is None or not text.strip():
        return reqs
    for part in text.split(","):
        p = part.strip()
        m = re.match(r"^([A-Za-z0-9_.]+)\s*(==|=|!=)\s*(.*)$", p)
        if not m:
            raise SelectorError("invalid field selector: %r" % p)
        field, op, val = m.group(1), m.group(2), m.group(3).strip()
        if field not in FIELDS:
            raise SelectorError('field label not supported: %s' % field)
        reqs.append(("!=" if op == "!=" else "=", FIELDS[field], val))
    return reqs


def match_fields(reqs, obj):
    for op, get, val in reqs:
        if (get(obj) == val) != (op == "="):
            return False
    return True


class Selector:
    """A request's label selector, field selector and namespace, together."""

    def __init__(self, label_text=None, field_text=None, namespace=None, name=None):
        self.labels = parse_labels(label_text)
        self.fields = parse_fields(field_text)
        if name is not None:
            self.fields.append(("=", FIELDS["metadata.name"], name))
        self.namespace = namespace

    @property
    def empty(self):
        return not self.labels and not self.fields

    def matches(self, obj):
        if obj is None:
            return False
        md = obj.get("metadata", {})
        if self.namespace is not None and md.get("namespace") != self.namespace:
            return False
        return match_labels(self.labels, md.get("labels")) and match_fields(self.fields, obj)
