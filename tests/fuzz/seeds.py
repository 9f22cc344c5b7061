#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
#
# Writes the text-made seed corpora of the harnesses into
# tests/fuzz/corpus/NAME/seed-* (the nf_tables ones come from
# tests/fuzz/seeds/seeds-nft.c, which drives the unit tests' in-memory
# kernel). Made from the golden tests' inputs and outputs, so the seeds are
# what kproxy really reads; deterministic, so rerunning it changes nothing
# unless the goldens did. Files not named seed-* (regressions: inputs that
# once failed) are left alone.
#
#   Usage: tests/fuzz/seeds.py
import glob
import json
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
GOLDEN = os.path.join(ROOT, "tests", "golden")


def put(name, seed, data):
    d = os.path.join(HERE, "corpus", name)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, "seed-" + seed), "wb") as f:
        f.write(data)


def clear(name):
    for p in glob.glob(os.path.join(HERE, "corpus", name, "seed-*")):
        os.unlink(p)


def golden_objects():
    """Every object of the golden tests' states, by kind, first few of each."""
    seen = {}
    for path in sorted(glob.glob(os.path.join(GOLDEN, "*", "state.json"))):
        try:
            with open(path) as f:
                state = json.load(f)
        except ValueError:
            continue            # the bad-json test's
        for o in state.get("items", []) if isinstance(state, dict) else []:
            if not isinstance(o, dict):
                continue
            kind = o.get("kind", "?")
            test = os.path.basename(os.path.dirname(path))
            seen.setdefault(kind, []).append((test, o))
    return seen


SERVICE_CIDR = {"apiVersion": "networking.k8s.io/v1", "kind": "ServiceCIDR",
                "metadata": {"name": "kubernetes", "resourceVersion": "7"},
                "spec": {"cidrs": ["10.96.0.0/16", "fd00:10:96::/112"]},
                "status": {"conditions": [{"type": "Ready", "status": "True"}]}}


def decode_and_watch(objs):
    objs.setdefault("ServiceCIDR", []).append(("service-cidr", SERVICE_CIDR))
    clear("decode")
    clear("watch")
    for kind, lst in sorted(objs.items()):
        # Distinct tests' objects (they differ in what they exercise), small.
        tests = {}
        for test, o in lst:
            tests.setdefault(test, o)
        for test, o in sorted(tests.items())[::3][:12]:
            put("decode", "%s-%s" % (kind.lower(), test), json.dumps(o, sort_keys=True))
    # Watch streams: a 4-byte PRNG seed for the cuts, a byte for how often
    # the consumer stops, then newline-framed events.
    i = 0
    for kind, lst in sorted(objs.items()):
        tests = {}
        for test, o in lst:
            tests.setdefault(test, o)
        for test, o in sorted(tests.items())[1::5][:4]:
            lines = []
            for t in ("ADDED", "MODIFIED", "DELETED"):
                lines.append(json.dumps({"type": t, "object": o}, separators=(",", ":")))
            rv = o.get("metadata", {}).get("resourceVersion", "1")
            lines.append(json.dumps({"type": "BOOKMARK", "object": {"kind": kind, "metadata": {
                "resourceVersion": rv, "annotations": {"k8s.io/initial-events-end": "true"}}}}))
            body = "\n".join(lines) + "\n"
            put("watch", "%s-%s-%d" % (kind.lower(), test, i), struct.pack("<IB", 0x9e3779b9 * (i + 1) & 0xffffffff,
                                                                             i % 8) + body.encode())
            i += 1
    # A whole cluster's worth in one stream: each golden test's objects.
    for test in ("clusterip-basic", "dual-stack-ipv4", "itp-local"):
        lines = [json.dumps({"type": "ADDED", "object": o}, separators=(",", ":"))
                 for k, lst in sorted(objs.items()) for t, o in lst if t == test]
        put("watch", "cluster-" + test, struct.pack("<IB", len(test), 2) + ("\n".join(lines) + "\n").encode())
    err = {"type": "ERROR", "object": {"kind": "Status", "apiVersion": "v1", "status": "Failure",
                                       "message": "too old resource version: 1 (2)", "reason": "Expired",
                                       "code": 410}}
    put("watch", "error-410", struct.pack("<IB", 7, 0) + (json.dumps(err) + "\n").encode())
    put("watch", "partial", struct.pack("<IB", 11, 3) + b'{"type":"ADDED","object":{"kind":"Service"\n\n{"ty')


def config():
    clear("config")
    for path in sorted(glob.glob(os.path.join(GOLDEN, "*", "*.yaml"))):
        with open(path, "rb") as f:
            text = f.read()
        if b"KubeProxyConfiguration" in text and len(text) < 4096:
            put("config", os.path.basename(os.path.dirname(path)), text)
    full = """apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
bindAddress: 0.0.0.0
clientConnection:
  burst: 10
  contentType: application/vnd.kubernetes.protobuf
  kubeconfig: /var/lib/kube-proxy/kubeconfig.conf
  qps: 5
clusterCIDR: 10.0.0.0/8,fd00::/48
configSyncPeriod: 1h2m3.5s
conntrack:
  maxPerCore: 0
  min: 131072
  tcpBeLiberal: true
  tcpCloseWaitTimeout: 1h0m0s
  tcpEstablishedTimeout: 24h0m0s
  udpStreamTimeout: 2m
  udpTimeout: 30s
detectLocal:
  bridgeInterface: ""
  interfaceNamePrefix: veth
detectLocalMode: InterfaceNamePrefix
featureGates:
  PreferSameTrafficDistribution: true
healthzBindAddress: 0.0.0.0:10256
hostnameOverride: node-1
iptables:
  localhostNodePorts: true
  masqueradeAll: false
  masqueradeBit: 14
  minSyncPeriod: 1s
  syncPeriod: 10s
ipvs:
  excludeCIDRs: null
  scheduler: rr
  syncPeriod: 30s
logging:
  flushFrequency: 5s
  format: json
  verbosity: 4
metricsBindAddress: 127.0.0.1:10249
mode: nftables
nftables:
  masqueradeAll: true
  masqueradeBit: 14
  minSyncPeriod: 1s
  syncPeriod: 10s
nodePortAddresses:
- 10.0.0.0/8
- fd00::/64
oomScoreAdj: -999
portRange: ""
"""
    put("config", "full", full)
    put("config", "minimal", "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\n")
    put("config", "json", json.dumps({"apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
                                      "kind": "KubeProxyConfiguration", "mode": "iptables",
                                      "nodePortAddresses": ["primary"], "detectLocalMode": "NodeCIDR"}))
    put("config", "anchors", "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\n"
        "iptables: &p {masqueradeAll: true, syncPeriod: 5s}\nnftables: *p\n"
        "logging: {verbosity: 2, format: text}\n")


def kubeconfig():
    clear("kubeconfig")
    head = "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
    ctx = "contexts:\n- name: c\n  context:\n    cluster: k\n    user: u\n    namespace: default\n"
    variants = {
        "token": ("server: https://10.0.0.1:6443\n    certificate-authority: ca.crt", "token: abc.def"),
        "token-file": ("server: https://api.example:6443/\n    certificate-authority: ./ca.crt", "tokenFile: token"),
        "client-cert": ("server: https://[fd00::1]:443\n    certificate-authority-data: "
                        "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUJmYWtlCi0tLS0tRU5EIENFUlRJRklDQVRFLS0tLS0K",
                        "client-certificate: client.crt\n    client-key: client.key"),
        "client-cert-data": ("server: https://k8s:6443\n    insecure-skip-tls-verify: true",
                             "client-certificate-data: "
                             "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUJmYWtlCi0tLS0tRU5EIENFUlRJRklDQVRFLS0tLS0K\n"
                             "    client-key-data: "
                             "LS0tLS1CRUdJTiBFQyBQUklWQVRFIEtFWS0tLS0tCk1IY2Zha2UKLS0tLS1FTkQgRUMgUFJJVkFURSBLRVktLS0tLQo="),
        "http": ("server: http://127.0.0.1:8080", "{}"),
        "exec": ("server: https://10.0.0.1", "exec:\n      command: aws\n      apiVersion: "
                                             "client.authentication.k8s.io/v1"),
    }
    for name, (cluster, user) in sorted(variants.items()):
        text = head + "clusters:\n- name: k\n  cluster:\n    " + cluster + "\n" + ctx
        if user.startswith("{"):
            text += "users:\n- name: u\n  user: {}\n"
        else:
            text += "users:\n- name: u\n  user:\n    " + user + "\n"
        put("kubeconfig", name, text)
    put("kubeconfig", "json", json.dumps({"apiVersion": "v1", "kind": "Config", "current-context": "c",
                                          "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u"}}],
                                          "clusters": [{"name": "k", "cluster": {"server": "https://h:1"}}],
                                          "users": [{"name": "u", "user": {"token": "t"}}]}))
    put("kubeconfig", "aliases", "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        "clusters: &cl [{name: k, cluster: {server: 'https://h'}}]\n"
        "contexts: [{name: c, context: {cluster: k, user: u}}]\nusers: [{name: u, user: &u {token: t}}]\n"
        "x: [*cl, *cl, *u]\n")


def log():
    clear("log")
    for name, text in [("plain", "default/web"), ("newline", "a\nE0101 00:00:00.000000       1 forged.go:1] x"),
                       ("controls", "\t\r\x1b[31mred\x7f\x01"), ("utf8", "caf\u00e9 \u2028 \U0001f600"),
                       ("invalid-utf8", b"\xff\xfe\xc3(\xe2\x28\xa1"), ("quotes", 'say "hi" \\ %s %n')]:
        put("log", name, text)


def iptables():
    clear("iptables")
    outs = []
    for path in sorted(glob.glob(os.path.join(GOLDEN, "*", "expected.iptables"))):
        with open(path, "rb") as f:
            text = f.read()
        if len(text) < 2600:
            outs.append((os.path.basename(os.path.dirname(path)), text))
    # A known-chains file as iptables_known_save() writes it: magic, count,
    # sorted (id, rendered, kernel) triples, FNV-1a of what came before.
    body = b"KPIPTKN1" + struct.pack("<Q", 2) + struct.pack("<QQQ", 5, 6, 7) + struct.pack("<QQQ", 9, 10, 11)
    h = 0xcbf29ce484222325
    for c in body:
        h = ((h ^ c) * 0x100000001b3) & 0xffffffffffffffff
    known = body + struct.pack("<Q", h)
    other = b"*nat\n-A KUBE-SERVICES -j ACCEPT\nCOMMIT\n*filter\n:OTHER - [0:0]\n-A OTHER -j DROP\nCOMMIT\n"
    for i, (name, a) in enumerate(outs[:10]):
        b = outs[(i + 1) % len(outs)][1]
        t = other if i % 2 else b""
        put("iptables", name, struct.pack("<HHH", len(a), len(t), len(b)) + a + t + b + (known if i % 3 == 0 else b""))
        put("iptables", name + "-same", struct.pack("<HHH", len(a), 0, len(a)) + a + a)


def proto(objs):
    """The stand-in API server's own protobuf (tests/apiserver/kapi_proto.py)
    of the goldens' objects: lists, objects and Statuses, watch streams, an
    event's head. The first byte picks fuzz-proto's reader."""
    import sys
    sys.path.insert(0, os.path.join(ROOT, "tests", "apiserver"))
    import kapi_proto as kp
    clear("proto")
    versions = {"Service": "v1", "Node": "v1", "EndpointSlice": "discovery.k8s.io/v1"}
    sources = {"Service": 0, "EndpointSlice": 1, "Node": 2, "ServiceCIDR": 3}
    objs = dict(objs, ServiceCIDR=[("servicecidr", SERVICE_CIDR)])
    versions["ServiceCIDR"] = "networking.k8s.io/v1"
    frames = []
    for kind, entries in sorted(objs.items()):
        if kind not in versions:
            continue
        items = [o for _, o in entries[:6]]
        body = kp.encode_list(versions[kind], kind, {"resourceVersion": "42", "continue": "c"}, items)
        put("proto", "list-" + kind.lower(), bytes([sources[kind] << 4]) + body)
        for i, (test, o) in enumerate(entries[:3]):
            o = dict(o, apiVersion=versions[kind], kind=kind)
            put("proto", "object-%s-%d" % (kind.lower(), i), b"\x01" + kp.encode_object(o))
            frames.append(kp.watch_frame(["ADDED", "MODIFIED", "DELETED"][i % 3], o, versions[kind], kind))
    status = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 410, "reason": "Expired",
              "message": "too old resource version: 1 (5)",
              "details": {"causes": [{"reason": "ResourceVersionTooLarge", "message": "m"}]}}
    put("proto", "status", b"\x01" + kp.encode_status(status))
    frames.append(kp.watch_frame("ERROR", status, "v1", "Status"))
    frames.append(kp.watch_frame("BOOKMARK", {"metadata": {"resourceVersion": "9"}}, "v1", "Service"))
    put("proto", "watch", b"\x02" + b"".join(frames))
    put("proto", "watch-cut", b"\x02" + b"".join(frames)[:-7])
    put("proto", "describe", b"\x03" + frames[0][4:200])


if __name__ == "__main__":
    decode_and_watch(golden_objects())
    proto(golden_objects())
    config()
    kubeconfig()
    log()
    iptables()
