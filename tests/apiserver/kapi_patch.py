# SPDX-License-Identifier: Apache-2.0
"""PATCH bodies: JSON merge patch (RFC 7386), JSON patch (RFC 6902), and
strategic merge patch treated as a merge patch.

Strategic merge differs from a merge patch only for lists with a patch merge
key (ports, containers) and for "$"-directives.  kubectl label, annotate and
scale send map-only patches, where the two agree; the directives are dropped
so that a patch written by `kubectl apply` at least does not store them.
Every function returns a new document and never changes its arguments.
"""
import copy


class PatchError(ValueError):
    """The patch cannot be applied (422) or is malformed (400)."""

    def __init__(self, message, code=422):
        super().__init__(message)
        self.code = code


def merge_patch(target, patch):
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = copy.deepcopy(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = merge_patch(out.get(k), v)
    return out


def _drop_directives(patch):
    if isinstance(patch, dict):
        return {k: _drop_directives(v) for k, v in patch.items() if not k.startswith("$")}
    if isinstance(patch, list):
        return [_drop_directives(v) for v in patch]
    return patch


def strategic_merge_patch(target, patch):
    if not isinstance(patch, dict):
        raise PatchError("strategic merge patch must be a JSON object", 400)
    return merge_patch(target, _drop_directives(patch))


def _pointer(path):
    if path == "":
        return []
    if not path.startswith("/"):
        raise PatchError("invalid JSON pointer %r" % path, 400)
    return [t.replace("~1", "/").replace("~0", "~") for t in path[1:].split("/")]


def _index(container, tok, allow_end):
    if tok == "-" and allow_end:
        return len(container)
    if not tok.isdigit() or (len(tok) > 1 and tok[0] == "0"):
        raise PatchError("invalid array index %r" % tok)
    i = int(tok)
    if i > len(container) or (i == len(container) and not allow_end):
        raise PatchError("array index %d out of range" % i)
    return i


def _parent(doc, toks):
    cur = doc
    for t in toks[:-1]:
        if isinstance(cur, dict):
            if t not in cur:
                raise PatchError("path not found: /%s" % "/".join(toks))
            cur = cur[t]
        elif isinstance(cur, list):
            cur = cur[_index(cur, t, False)]
        else:
            raise PatchError("path not found: /%s" % "/".join(toks))
    return cur


def _get(doc, toks):
    if not toks:
        return doc
    parent = _parent(doc, toks)
    t = toks[-1]
    if isinstance(parent, dict):
        if t not in parent:
            raise PatchError("path not found: /%s" % "/".join(toks))
        return parent[t]
    if isinstance(parent, list):
        return parent[_index(parent, t, False)]
    raise PatchError("path not found: /%s" % "/".join(toks))


def _remove(doc, toks):
    if not toks:
        raise PatchError("cannot remove the whole document")
    parent = _parent(doc, toks)
    t = toks[-1]
    if isinstance(parent, dict):
        if t not in parent:
            raise PatchError("path not found: /%s" % "/".join(toks))
        return parent.pop(t)
    if isinstance(parent, list):
        return parent.pop(_index(parent, t, False))
    raise PatchError("path not found: /%s" % "/".join(toks))


def _add(doc, toks, value):
    if not toks:
        return value
    parent = _parent(doc, toks)
    t = toks[-1]
    if isinstance(parent, dict):
        parent[t] = value
    elif isinstance(parent, list):
        parent.insert(_index(parent, t, True), value)
    else:
        raise PatchError("path not found: /%s" % "/".join(toks))
    return doc


def json_patch(target, ops):
    if not isinstance(ops, list):
        raise PatchError("JSON patch must be an array of operations", 400)
    doc = copy.deepcopy(target)
    for op in ops:
        if not isinstance(op, dict) or "op" not in op or "path" not in op:
            raise PatchError("invalid JSON patch operation %r" % (op,), 400)
        kind, toks = op["op"], _pointer(op["path"])
        if kind in ("add", "replace", "test") and "value" not in op:
            raise PatchError("operation %s needs a value" % kind, 400)
        if kind == "add":
            doc = _add(doc, toks, copy.deepcopy(op["value"]))
        elif kind == "remove":
            _remove(doc, toks)
        elif kind == "replace":
            _get(doc, toks)
            if toks:
                _remove(doc, toks)
            doc = _add(doc, toks, copy.deepcopy(op["value"]))
        elif kind in ("move", "copy"):
            src = _pointer(op.get("from", ""))
            value = copy.deepcopy(_get(doc, src))
            if kind == "move":
                if toks[:len(src)] == src and len(toks) > len(src):
                    raise PatchError("cannot move a value into itself")
                _remove(doc, src)
            doc = _add(doc, toks, value)
        elif kind == "test":
            if _get(doc, toks) != op["value"]:
                raise PatchError("test operation failed at %s" % op["path"])
        else:
            raise PatchError("unknown JSON patch operation %r" % kind, 400)
    return doc


MERGE = "application/merge-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"
JSON = "application/json-patch+json"

APPLIERS = {MERGE: merge_patch, STRATEGIC: strategic_merge_patch, JSON: json_patch}
