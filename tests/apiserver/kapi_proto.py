# SPDX-License-Identifier: Apache-2.0
"""The stand-in's protobuf encoder: what kube-apiserver sends a client that
asks for application/vnd.kubernetes.protobuf.

Principle: the facts are upstream's, read from a file kproxy's C does not
use. Field numbers and types come from docs/k8s-wire-fields.txt, which
tools/k8s-proto-fields.py read out of kubectl's own file descriptors; this
encoder is generic over them (a JSON object becomes the message its type
names), so a field number written wrong in kproxy's schema
(src/kube/proto-schema.c) shows up as a difference between the formats,
not as two copies of one mistake. Only the few messages newer than that
kubectl are written here by hand (SUPPLEMENT).

The shapes: a response body is b"k8s\\0" + runtime.Unknown {typeMeta
{apiVersion, kind}, raw, contentEncoding, contentType}; a list's raw is
{metadata: ListMeta, items: [...]}; a watch is frames, a 4-byte big-endian
length and a bare WatchEvent {type, object: RawExtension {raw: an object in
the envelope}}. JSON fields the schema lacks are left out, as a Go struct
would drop them.
"""
import calendar
import os
import struct
import time

FACTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "docs", "k8s-wire-fields.txt")
MEDIA = "application/vnd.kubernetes.protobuf"
MAGIC = b"k8s\x00"

META = "k8s.io.apimachinery.pkg.apis.meta.v1."
# Newer than the kubectl the facts were read from: discovery/v1 ForNode
# (1.33) and networking/v1 ServiceCIDR (GA in 1.33, v1beta1's fields).
SUPPLEMENT = {
    "k8s.io.api.discovery.v1.ForNode": {"name": (1, "string", False, None)},
}
EXTRA_FIELDS = {
    "k8s.io.api.discovery.v1.EndpointHints": {"forNodes": (2, "message", True, "k8s.io.api.discovery.v1.ForNode")},
}
ALIASES = {
    "k8s.io.api.networking.v1.ServiceCIDR": "k8s.io.api.networking.v1beta1.ServiceCIDR",
    "k8s.io.api.networking.v1.ServiceCIDRList": "k8s.io.api.networking.v1beta1.ServiceCIDRList",
    "k8s.io.api.networking.v1.ServiceCIDRSpec": "k8s.io.api.networking.v1beta1.ServiceCIDRSpec",
}
# The kinds served in protobuf: (apiVersion, kind) -> message. Others (a
# Namespace: not in the facts) are served in JSON, as a CRD is.
KINDS = {
    ("v1", "Service"): "k8s.io.api.core.v1.Service",
    ("v1", "Node"): "k8s.io.api.core.v1.Node",
    ("discovery.k8s.io/v1", "EndpointSlice"): "k8s.io.api.discovery.v1.EndpointSlice",
    ("networking.k8s.io/v1", "ServiceCIDR"): "k8s.io.api.networking.v1.ServiceCIDR",
    ("v1", "Status"): META + "Status",
}


def _load():
    msgs, cur = {}, None
    with open(FACTS) as f:
        for line in f:
            if line.startswith("#") or not line.strip():
                continue
            if not line.startswith(" "):
                name = line.split(":")[0].strip()
                cur = None if "not in" in line else msgs.setdefault(name, {})
                continue
            if cur is None:
                continue
            parts = line.split()
            number, fname, label, ftype = int(parts[0]), parts[1], parts[2], parts[3]
            cur[fname] = (number, ftype, label == "repeated", parts[4] if ftype == "message" else None)
    msgs.update(SUPPLEMENT)
    for name, extra in EXTRA_FIELDS.items():
        msgs[name].update(extra)
    for new, old in ALIASES.items():
        msgs[new] = {k: (n, t, r, ALIASES_INV.get(m, m) if m else m)
                     for k, (n, t, r, m) in msgs[old].items()}
    return msgs


ALIASES_INV = {v: k for k, v in ALIASES.items()}
SCHEMA = _load()


def _varint(n):
    n &= (1 << 64) - 1
    out = bytearray()
    while True:
        b = n & 0x7f
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _len_field(number, data):
    return _varint(number << 3 | 2) + _varint(len(data)) + data


def _int_field(number, n):
    return _varint(number << 3) + _varint(int(n))


def _time(text):
    """metav1.Time: RFC 3339 text to {seconds}; a zero time is no bytes."""
    if not text:
        return b""
    t = text.rstrip("Z").split(".")[0]
    secs = calendar.timegm(time.strptime(t, "%Y-%m-%dT%H:%M:%S"))
    return _int_field(1, secs) if secs else b""


def _int_or_string(v):
    if isinstance(v, str):
        return _int_field(1, 1) + _len_field(3, v.encode())
    return _int_field(1, 0) + _int_field(2, v)


def _value(ftype, msg, v):
    """A value's bytes and whether it is a length-delimited one."""
    if ftype == "message":
        if msg == META + "Time":
            return _time(v), True
        if msg == "k8s.io.apimachinery.pkg.util.intstr.IntOrString":
            return _int_or_string(v), True
        return encode_message(msg, v), True
    if ftype == "string":
        return (v if isinstance(v, str) else str(v)).encode("utf-8", "surrogatepass"), True
    if ftype == "bytes":
        return v if isinstance(v, bytes) else str(v).encode(), True
    if ftype == "bool":
        return _varint(1 if v else 0), False
    return _varint(int(v)), False       # int32, int64


SPECIAL = (META + "Time", "k8s.io.apimachinery.pkg.util.intstr.IntOrString")


def encode_message(name, obj):
    fields = SCHEMA[name]
    out = bytearray()
    for key, v in obj.items():
        f = fields.get(key)
        if f is None or v is None:
            continue
        number, ftype, repeated, msg = f
        if msg and msg not in SCHEMA and msg not in SPECIAL:
            continue        # a message the facts do not describe (ownerReferences, ...): never read
        if msg and msg.endswith("Entry") and isinstance(v, dict):      # a map
            for k, val in v.items():
                out += _len_field(number, _len_field(1, k.encode()) + _len_field(2, str(val).encode()))
            continue
        for item in (v if repeated else [v]):
            data, delimited = _value(ftype, msg, item)
            out += _len_field(number, data) if delimited else _varint(number << 3) + data
    return bytes(out)


def message_of(obj):
    return KINDS.get((obj.get("apiVersion"), obj.get("kind")))


def envelope(api_version, kind, raw):
    tm = _len_field(1, api_version.encode()) + _len_field(2, kind.encode())
    return MAGIC + _len_field(1, tm) + _len_field(2, raw) + _len_field(3, b"") + _len_field(4, b"")


def encode_object(obj, api_version=None, kind=None):
    """An object in the envelope; its kind from the object or the arguments."""
    api_version = api_version or obj.get("apiVersion")
    kind = kind or obj.get("kind")
    return envelope(api_version, kind, encode_message(KINDS[(api_version, kind)], obj))


def encode_list(api_version, kind, meta, items, item_cache=None):
    """A list (kind is the item's): items encoded once each where a cache
    (a dict keyed by id, the object kept alongside) is given."""
    msg = KINDS[(api_version, kind)]
    out = bytearray(_len_field(1, encode_message(META + "ListMeta", meta)))
    for o in items:
        if item_cache is not None:
            hit = item_cache.get(id(o))
            if hit is None or hit[0] is not o:
                hit = item_cache[id(o)] = (o, encode_message(msg, o))
            data = hit[1]
        else:
            data = encode_message(msg, o)
        out += _len_field(2, data)
    return envelope(api_version, kind + "List", bytes(out))


def encode_status(status):
    return encode_object(status, "v1", "Status")


def watch_frame(typ, obj, api_version, kind):
    """One watch event as a frame. obj carries its kind, or is of kind
    (a BOOKMARK's, a Status)."""
    av = obj.get("apiVersion") or api_version
    k = obj.get("kind") or kind
    ev = _len_field(1, typ.encode()) + _len_field(2, _len_field(1, encode_object(obj, av, k)))
    return struct.pack(">I", len(ev)) + ev
