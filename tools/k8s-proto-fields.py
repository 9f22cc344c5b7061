#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Prints the protobuf fields (number, name, label, type) of Kubernetes API
messages, read from the file descriptors a Kubernetes Go program carries
(k8s.io/api registers each generated.proto as gzipped FileDescriptorProto
bytes, and kubectl links them all): the field numbers of the wire format,
as upstream's own build has them, without its source.

usage: tools/k8s-proto-fields.py [BINARY] [MESSAGE...]
  BINARY   a Kubernetes Go program (default: the kubectl on PATH)
  MESSAGE  full or short names (ServiceSpec, k8s.io.api.core.v1.Service);
           default: those kproxy reads (issue 35's list)
"""
import re
import shutil
import sys
import zlib

KPROXY = [
    "k8s.io.apimachinery.pkg.runtime.Unknown", "k8s.io.apimachinery.pkg.runtime.TypeMeta",
    "k8s.io.apimachinery.pkg.runtime.RawExtension", "k8s.io.apimachinery.pkg.apis.meta.v1.WatchEvent",
    "k8s.io.apimachinery.pkg.apis.meta.v1.Status", "k8s.io.apimachinery.pkg.apis.meta.v1.StatusDetails",
    "k8s.io.apimachinery.pkg.apis.meta.v1.StatusCause",
    "k8s.io.apimachinery.pkg.apis.meta.v1.ObjectMeta", "k8s.io.apimachinery.pkg.apis.meta.v1.ObjectMeta.LabelsEntry",
    "k8s.io.apimachinery.pkg.apis.meta.v1.ObjectMeta.AnnotationsEntry",
    "k8s.io.apimachinery.pkg.apis.meta.v1.ListMeta", "k8s.io.apimachinery.pkg.apis.meta.v1.Time",
    "k8s.io.apimachinery.pkg.util.intstr.IntOrString",
    "k8s.io.api.core.v1.Service", "k8s.io.api.core.v1.ServiceList", "k8s.io.api.core.v1.ServiceSpec",
    "k8s.io.api.core.v1.ServicePort", "k8s.io.api.core.v1.ServiceStatus", "k8s.io.api.core.v1.LoadBalancerStatus",
    "k8s.io.api.core.v1.LoadBalancerIngress", "k8s.io.api.core.v1.SessionAffinityConfig",
    "k8s.io.api.core.v1.ClientIPConfig",
    "k8s.io.api.core.v1.Node", "k8s.io.api.core.v1.NodeList", "k8s.io.api.core.v1.NodeSpec",
    "k8s.io.api.core.v1.NodeStatus", "k8s.io.api.core.v1.NodeAddress", "k8s.io.api.core.v1.Taint",
    "k8s.io.api.core.v1.ServiceSpec.SelectorEntry",
    "k8s.io.api.discovery.v1.EndpointSlice", "k8s.io.api.discovery.v1.EndpointSliceList",
    "k8s.io.api.discovery.v1.Endpoint", "k8s.io.api.discovery.v1.EndpointConditions",
    "k8s.io.api.discovery.v1.EndpointHints", "k8s.io.api.discovery.v1.ForZone", "k8s.io.api.discovery.v1.ForNode",
    "k8s.io.api.discovery.v1.EndpointPort",
    "k8s.io.api.networking.v1.ServiceCIDR", "k8s.io.api.networking.v1.ServiceCIDRList",
    "k8s.io.api.networking.v1.ServiceCIDRSpec",
    "k8s.io.api.networking.v1beta1.ServiceCIDR", "k8s.io.api.networking.v1beta1.ServiceCIDRList",
    "k8s.io.api.networking.v1beta1.ServiceCIDRSpec",
]
TYPES = {1: "double", 2: "float", 3: "int64", 4: "uint64", 5: "int32", 8: "bool", 9: "string", 11: "message",
         12: "bytes", 13: "uint32", 14: "enum", 17: "sint32", 18: "sint64"}
LABELS = {1: "optional", 2: "required", 3: "repeated"}


def varint(b, i):
    v = shift = 0
    while True:
        c = b[i]
        i += 1
        v |= (c & 0x7F) << shift
        shift += 7
        if c < 0x80:
            return v, i


def fields(b):
    """(number, value) of each field of a message: ints for varints, bytes otherwise."""
    i = 0
    while i < len(b):
        key, i = varint(b, i)
        num, wire = key >> 3, key & 7
        if wire == 0:
            v, i = varint(b, i)
        elif wire == 2:
            n, i = varint(b, i)
            v, i = b[i:i + n], i + n
        elif wire == 5:
            v, i = b[i:i + 4], i + 4
        elif wire == 1:
            v, i = b[i:i + 8], i + 8
        else:
            raise ValueError("wire type %d" % wire)
        yield num, v


def descriptors(data):
    """Every gzipped FileDescriptorProto in data: {proto file name: bytes}."""
    found = {}
    for m in re.finditer(rb"\x1f\x8b\x08\x00\x00\x00\x00\x00", data):
        try:
            out = zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(data[m.start():m.start() + (4 << 20)])
        except zlib.error:
            continue
        if len(out) > 2 and out[0] == 0x0A and out[1] < 0x80 and out[2:2 + out[1]].endswith(b".proto"):
            found[out[2:2 + out[1]].decode()] = out
    return found


def messages(desc, prefix, into):
    """DescriptorProto desc (and those nested) into {full name: [(number, name, label, type, type name)]}."""
    name, flds = "?", []
    for num, v in fields(desc):
        if num == 1:
            name = v.decode()
    for num, v in fields(desc):
        if num == 2:
            f = dict(fields(v))
            flds.append((f[3], f[1].decode(), LABELS.get(f.get(4), "?"), TYPES.get(f.get(5), "?"),
                         f.get(6, b"").decode().lstrip(".")))
        elif num == 3:
            messages(v, prefix + name + ".", into)
    into[prefix + name] = sorted(flds)


def main():
    args = sys.argv[1:]
    binary = args.pop(0) if args and "/" in args[0] else shutil.which("kubectl")
    if not binary:
        sys.exit("k8s-proto-fields: no kubectl on PATH; name a Kubernetes Go binary")
    with open(binary, "rb") as f:
        files = descriptors(f.read())
    if not files:
        sys.exit("k8s-proto-fields: %s carries no protobuf file descriptors" % binary)
    msgs = {}
    for body in files.values():
        pkg = next((v.decode() for n, v in fields(body) if n == 2), "")
        for n, v in fields(body):
            if n == 4:
                messages(v, pkg + ".", msgs)
    want = args or KPROXY
    for w in want:
        names = [m for m in sorted(msgs) if m == w or m.endswith("." + w)]
        if not names:
            print("%s: not in %s" % (w, binary))
        for m in names:
            print(m)
            for num, name, label, typ, tname in msgs[m]:
                print("  %3d  %-30s %-8s %s%s" % (num, name, label, typ, " " + tname if tname else ""))


if __name__ == "__main__":
    main()
