# SPDX-License-Identifier: Apache-2.0
"""kproxy explain against upstream's packet-flow expectations (issue 33).

Upstream tests its rules with a packet tracer over the dump
(runPacketFlowTests in pkg/proxy/iptables/proxier_test.go and
pkg/proxy/nftables/proxier_test.go): a flow is a source IP, a protocol, a
destination IP and port, and the expected output (the endpoints it may
reach, or REJECT, DROP, or nothing for "not DNATed") and whether it is
masqueraded. The clusters and flows below are transcriptions of those
tests' cases (their facts: services, addresses, expectations), on the fake
proxiers' hosts (docs/reference/iptables-mode.md §13.1, nftables-mode.md
§10.1); each runs in both modes, where the modes differ as upstream's
expectations differ.

Then every reason explain gives is asked for once, and each golden
scenario's explanations are checked against its render: every chain
explain names is one the render writes.

Run: KPROXY_BUILD=build python3 tests/explain/test_explain.py [-v]
"""
import json
import os
import re
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
BUILD = os.path.abspath(os.path.join(ROOT, os.environ.get("KPROXY_BUILD", "build")))
KPROXY = os.path.join(BUILD, "kproxy")

HOST = ["--hostname-override", "test-node", "--cluster-cidr", "10.0.0.0/8",
        "--host-addresses", "127.0.0.1/8,::1/128,192.168.0.2/24,192.168.1.2/24,192.168.99.11/24,"
        "2001:db8::1/64,2001:db8:1::2/64",
        "--host-nfacct=true", "--host-random-fully=false", "--host-tcp-be-liberal=false"]
MODES = {
    "iptables": [],
    "nftables": ["--proxy-mode", "nftables", "--nodeport-addresses", "192.168.0.2/32",
                 "--service-cidrs", "172.30.0.0/16"],
}


def service(ns, name, ip, ports, **spec):
    s = {"apiVersion": "v1", "kind": "Service", "metadata": {"namespace": ns, "name": name},
         "spec": {"clusterIP": ip, "ports": [dict(name=p[0], port=p[1], protocol=p[2],
                                                  **({"nodePort": p[3]} if len(p) > 3 else {}))
                                             for p in ports]}}
    lb = spec.pop("lb", None)
    if lb:
        s["status"] = {"loadBalancer": {"ingress": [{"ip": lb}]}}
    s["spec"].update(spec)
    return s


def slice_(ns, svc, n, endpoints, ports):
    """endpoints: (ip, node, ready, serving, terminating)."""
    return {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice", "addressType": "IPv4",
            "metadata": {"namespace": ns, "name": "%s-%d" % (svc, n),
                         "labels": {"kubernetes.io/service-name": svc}},
            "endpoints": [dict({"addresses": [ip], "conditions": {"ready": r, "serving": s, "terminating": t}},
                               **({"nodeName": node} if node else {}))
                          for ip, node, r, s, t in endpoints],
            "ports": [{"name": n, "port": p, "protocol": proto} for n, p, proto in ports]}


def ep(ip, node=None, ready=True, serving=True, terminating=False):
    return (ip, node, ready, serving, terminating)


NODE = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "test-node"},
        "status": {"addresses": [{"type": "InternalIP", "address": "192.168.0.2"}]}}
P80 = [("p80", 80, "TCP")]


def explain(items, src, dst, *extra, mode="iptables", proto="tcp"):
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        own_node = any(i["kind"] == "Node" for i in items)
        json.dump({"apiVersion": "v1", "kind": "List", "items": items + ([] if own_node else [NODE])}, f)
    try:
        out = subprocess.run([KPROXY, "explain", *HOST, *MODES[mode], *extra, "--source", src, "--destination", dst,
                              "--protocol", proto, "--output", "json", f.name],
                             capture_output=True, text=True, timeout=30)
    finally:
        os.unlink(f.name)
    if out.returncode != 0:
        raise AssertionError("kproxy explain failed (%d): %s" % (out.returncode, out.stderr))
    return json.loads(out.stdout)


def flow_output(j):
    """What upstream's tracer reports: the endpoints, REJECT, DROP or ""."""
    if j["verdict"] == "forward":
        return ", ".join(sorted(e["address"] for e in j["endpoints"] if e["selected"]))
    return {"reject": "REJECT", "drop": "DROP"}.get(j["verdict"], "")


def flow_masq(j):
    sel = [e for e in j["endpoints"] if e["selected"]]
    return bool(sel) and all(e["masquerade"] for e in sel)


class Flows(unittest.TestCase):
    """Each case: (name, source, destination, protocol, output per mode or both, masquerade)."""

    def run_flows(self, items, flows, extra=()):
        for mode in MODES:
            for name, src, dst, proto, output, masq in flows:
                want = output[mode] if isinstance(output, dict) else output
                with self.subTest(mode=mode, flow=name):
                    j = explain(items, src, dst, *extra, mode=mode, proto=proto)
                    self.assertEqual(flow_output(j), want, j["reason"])
                    if want not in ("", "REJECT", "DROP"):
                        self.assertEqual(flow_masq(j), masq, j["masquerade"]["reason"])

    def test_cluster_ip_general(self):
        # upstream's TestClusterIPGeneral
        items = [
            service("ns1", "svc1", "172.30.0.41", P80),
            service("ns2", "svc2", "172.30.0.42", [("p80", 80, "TCP"), ("p443", 443, "TCP"), ("dns", 53, "UDP"),
                                                   ("dnstcp", 53, "TCP")]),
            service("ns3", "svc3", "172.30.0.43", P80),
            slice_("ns1", "svc1", 1, [ep("10.180.0.1", "test-node")], P80),
            slice_("ns2", "svc2", 1, [ep("10.180.0.1", "test-node"), ep("10.180.2.1", "host2")],
                   [("p80", 80, "TCP"), ("p443", 8443, "TCP"), ("dns", 53, "UDP"), ("dnstcp", 53, "TCP")]),
        ]
        self.run_flows(items, [
            ("simple clusterIP", "10.180.0.2", "172.30.0.41:80", "tcp", "10.180.0.1:80", False),
            ("hairpin to cluster IP", "10.180.0.1", "172.30.0.41:80", "tcp", "10.180.0.1:80", True),
            ("clusterIP with multiple endpoints", "10.180.0.2", "172.30.0.42:80", "tcp",
             "10.180.0.1:80, 10.180.2.1:80", False),
            ("clusterIP with TargetPort", "10.180.0.2", "172.30.0.42:443", "tcp",
             "10.180.0.1:8443, 10.180.2.1:8443", False),
            ("clusterIP with TCP and UDP on same port (TCP)", "10.180.0.2", "172.30.0.42:53", "tcp",
             "10.180.0.1:53, 10.180.2.1:53", False),
            ("clusterIP with TCP and UDP on same port (UDP)", "10.180.0.2", "172.30.0.42:53", "udp",
             "10.180.0.1:53, 10.180.2.1:53", False),
            ("TCP-only port does not match UDP traffic", "10.180.0.2", "172.30.0.42:80", "udp",
             {"iptables": "", "nftables": "REJECT"}, False),
            ("svc1 does not accept svc2's ports", "10.180.0.2", "172.30.0.41:443", "tcp",
             {"iptables": "", "nftables": "REJECT"}, False),
            ("packet to unallocated cluster IP", "10.180.0.2", "172.30.0.50:80", "tcp",
             {"iptables": "", "nftables": "DROP"}, False),
            ("svc3 has no endpoints", "10.180.0.2", "172.30.0.43:80", "tcp", "REJECT", False),
            ("node to cluster IP is masqueraded", "192.168.0.2", "172.30.0.41:80", "tcp", "10.180.0.1:80", True),
            ("outside to cluster IP is masqueraded", "203.0.113.2", "172.30.0.41:80", "tcp", "10.180.0.1:80", True),
        ])

    def test_load_balancer(self):
        # upstream's TestLoadBalancer: ETP Cluster, source ranges, ClientIP affinity
        items = [
            service("ns1", "svc1", "172.30.0.41", [("p80", 80, "TCP", 3001)], type="LoadBalancer", lb="1.2.3.4",
                    externalTrafficPolicy="Cluster", loadBalancerSourceRanges=["203.0.113.0/25"],
                    sessionAffinity="ClientIP"),
            slice_("ns1", "svc1", 1, [ep("10.180.0.1", "test-node")], P80),
        ]
        self.run_flows(items, [
            ("pod to cluster IP", "10.0.0.2", "172.30.0.41:80", "tcp", "10.180.0.1:80", False),
            ("external to nodePort", "203.0.113.2", "192.168.0.2:3001", "tcp", "10.180.0.1:80", True),
            ("nodePort bypasses LoadBalancerSourceRanges", "203.0.113.130", "192.168.0.2:3001", "tcp",
             "10.180.0.1:80", True),
            ("accepted external to LB", "203.0.113.2", "1.2.3.4:80", "tcp", "10.180.0.1:80", True),
            ("blocked external to LB", "203.0.113.130", "1.2.3.4:80", "tcp", "DROP", False),
            ("pod to LB, outside the ranges", "10.0.0.2", "1.2.3.4:80", "tcp", "DROP", False),
        ])

    def test_node_ports(self):
        # upstream's TestNodePorts (default nodePortAddresses of each mode)
        items = [
            service("ns1", "svc1", "172.30.0.41", [("p80", 80, "TCP", 3001)], type="NodePort"),
            slice_("ns1", "svc1", 1, [ep("10.180.0.1", "test-node"), ep("10.180.2.1", "host2")], P80),
        ]
        both = "10.180.0.1:80, 10.180.2.1:80"
        self.run_flows(items, [
            ("pod to cluster IP", "10.0.0.2", "172.30.0.41:80", "tcp", both, False),
            ("external to nodePort", "203.0.113.2", "192.168.0.2:3001", "tcp", both, True),
            ("node to nodePort", "192.168.0.2", "192.168.0.2:3001", "tcp", both, True),
            ("pod to nodePort", "10.0.0.2", "192.168.0.2:3001", "tcp", both, True),
            ("localhost to nodePort", "127.0.0.1", "127.0.0.1:3001", "tcp", {"iptables": both, "nftables": ""},
             True),
            ("nodePort on an address outside nodePortAddresses", "203.0.113.2", "192.168.1.2:3001", "tcp",
             {"iptables": both, "nftables": ""}, True),
        ])

    def test_external_traffic_policy_local(self):
        # upstream's TestExternalTrafficPolicyLocal / TestOnlyLocalLoadBalancing
        items = [
            service("ns1", "svc1", "172.30.0.41", [("p80", 80, "TCP", 3001)], type="LoadBalancer", lb="5.6.7.8",
                    externalTrafficPolicy="Local", healthCheckNodePort=30000, externalIPs=["192.168.99.11"]),
            slice_("ns1", "svc1", 1, [ep("10.180.0.1", "test-node"), ep("10.180.2.1", "host2")], P80),
        ]
        both = "10.180.0.1:80, 10.180.2.1:80"
        self.run_flows(items, [
            ("pod to cluster IP", "10.0.0.2", "172.30.0.41:80", "tcp", both, False),
            ("external to LB: local endpoint only, not masqueraded", "203.0.113.2", "5.6.7.8:80", "tcp",
             "10.180.0.1:80", False),
            ("pod to LB: short circuit", "10.0.0.2", "5.6.7.8:80", "tcp", both, False),
            ("node to LB: short circuit, masqueraded", "192.168.0.2", "5.6.7.8:80", "tcp", both, True),
            ("external to nodePort: local only", "203.0.113.2", "192.168.0.2:3001", "tcp", "10.180.0.1:80", False),
            ("node to nodePort", "192.168.0.2", "192.168.0.2:3001", "tcp", both, True),
            ("external to external IP: local only", "203.0.113.2", "192.168.99.11:80", "tcp", "10.180.0.1:80",
             False),
        ])

    def test_external_traffic_policy_local_no_local_endpoints(self):
        items = [
            service("ns1", "svc1", "172.30.0.41", [("p80", 80, "TCP", 3001)], type="LoadBalancer", lb="5.6.7.8",
                    externalTrafficPolicy="Local", healthCheckNodePort=30000),
            slice_("ns1", "svc1", 1, [ep("10.180.2.1", "host2")], P80),
        ]
        self.run_flows(items, [
            ("pod to cluster IP", "10.0.0.2", "172.30.0.41:80", "tcp", "10.180.2.1:80", False),
            ("external to LB: dropped", "203.0.113.2", "5.6.7.8:80", "tcp", "DROP", False),
            ("external to nodePort: dropped", "203.0.113.2", "192.168.0.2:3001", "tcp", "DROP", False),
            ("pod to LB: short circuit", "10.0.0.2", "5.6.7.8:80", "tcp", "10.180.2.1:80", False),
        ])

    def test_internal_traffic_policy(self):
        # upstream's TestInternalTrafficPolicy
        items = [
            service("ns1", "svc1", "172.30.0.41", P80, internalTrafficPolicy="Local"),
            slice_("ns1", "svc1", 1, [ep("10.180.0.1", "test-node"), ep("10.180.2.1", "host2")], P80),
            service("ns2", "svc2", "172.30.0.42", P80, internalTrafficPolicy="Local"),
            slice_("ns2", "svc2", 1, [ep("10.180.2.1", "host2")], P80),
        ]
        self.run_flows(items, [
            ("ITP Local, local endpoint", "10.0.0.2", "172.30.0.41:80", "tcp", "10.180.0.1:80", False),
            ("ITP Local, no local endpoint", "10.0.0.2", "172.30.0.42:80", "tcp", "DROP", False),
        ])

    def test_no_endpoints_reject(self):
        # upstream's TestNoEndpointsReject and its external variants
        items = [service("ns1", "svc1", "172.30.0.41", [("p80", 80, "TCP", 3001)], type="LoadBalancer",
                         lb="1.2.3.4", externalIPs=["192.168.99.33"])]
        self.run_flows(items, [
            ("pod to cluster IP", "10.0.0.2", "172.30.0.41:80", "tcp", "REJECT", False),
            ("external to external IP", "203.0.113.2", "192.168.99.33:80", "tcp", "REJECT", False),
            ("external to LB", "203.0.113.2", "1.2.3.4:80", "tcp", "REJECT", False),
            ("external to nodePort", "203.0.113.2", "192.168.0.2:3001", "tcp", "REJECT", False),
        ])

    def test_terminating_endpoints(self):
        # upstream's TestEndpointSliceWithTerminatingEndpoints*: ready wins; else serving+terminating
        items = [
            service("ns1", "ready", "172.30.0.41", P80),
            slice_("ns1", "ready", 1, [ep("10.180.0.1", "test-node"),
                                      ep("10.180.0.2", "test-node", False, True, True),
                                      ep("10.180.0.3", "test-node", False, False, True)], P80),
            service("ns1", "terminating", "172.30.0.42", P80),
            slice_("ns1", "terminating", 1, [ep("10.180.0.2", "test-node", False, True, True),
                                            ep("10.180.0.3", "test-node", False, False, True),
                                            ep("10.180.0.4", "test-node", False, False, False)], P80),
        ]
        self.run_flows(items, [
            ("ready endpoint preferred", "10.0.0.9", "172.30.0.41:80", "tcp", "10.180.0.1:80", False),
            ("terminating fallback", "10.0.0.9", "172.30.0.42:80", "tcp", "10.180.0.2:80", False),
        ])

    def test_masquerade_all(self):
        items = [service("ns1", "svc1", "172.30.0.41", P80),
                 slice_("ns1", "svc1", 1, [ep("10.180.0.1", "test-node")], P80)]
        self.run_flows(items, [("pod to cluster IP, masqueradeAll", "10.0.0.2", "172.30.0.41:80", "tcp",
                                "10.180.0.1:80", True)], extra=("--masquerade-all",))


class Reasons(unittest.TestCase):
    """Each reason of the issue, asked for once."""

    items = [
        service("ns1", "web", "172.30.0.41", [("http", 80, "TCP", 30080)], type="LoadBalancer", lb="1.2.3.4",
                externalTrafficPolicy="Local", healthCheckNodePort=30000,
                loadBalancerSourceRanges=["203.0.113.0/25"], sessionAffinity="ClientIP",
                sessionAffinityConfig={"clientIP": {"timeoutSeconds": 600}}),
        slice_("ns1", "web", 1, [ep("10.180.0.1", "test-node"), ep("10.180.2.1", "host2"),
                                 ep("10.180.2.2", "host2", False, False, False)], [("http", 8080, "TCP")]),
        service("ns1", "dns", "172.30.0.10", [("dns", 53, "UDP")]),
    ]

    def test_forward_names_service_slices_and_endpoint_states(self):
        j = explain(self.items, "10.0.0.5", "172.30.0.41:80")
        self.assertEqual(j["verdict"], "forward")
        self.assertEqual(j["service"]["name"], "ns1/web")
        self.assertEqual(j["service"]["port"], "http")
        self.assertEqual(j["service"]["endpointSlices"], ["ns1/web-1"])
        self.assertEqual(j["affinity"], {"type": "ClientIP", "timeoutSeconds": 600})
        sel = {e["address"]: e for e in j["endpoints"] if e["selected"]}
        self.assertEqual(set(sel), {"10.180.0.1:8080", "10.180.2.1:8080"})
        self.assertEqual([e["probability"] for e in sel.values()], [0.5, 0.5])
        self.assertEqual(sel["10.180.2.1:8080"]["node"], "host2")
        left = [e for e in j["endpoints"] if not e["selected"]]
        self.assertEqual([e["address"] for e in left], ["10.180.2.2:8080"])
        self.assertIn("not usable", left[0]["why"])
        # iptables: the first endpoint's rule has 1/2, the last none
        probs = [e["ruleProbability"] for e in j["endpoints"] if e["selected"]]
        self.assertEqual(probs, ["0.5000000000", ""])

    def test_endpoint_zones_and_topology_hints(self):
        """Each endpoint's zone as its slice says; the hints pick this
        node's zone's endpoints, and say why the others are out."""
        node = json.loads(json.dumps(NODE))
        node["metadata"]["labels"] = {"topology.kubernetes.io/zone": "zone-a"}
        sl = slice_("ns1", "zoned", 1, [ep("10.180.0.1", "test-node"), ep("10.180.1.1", "host1"),
                                        ep("10.180.2.1", "host2")], [("p80", 8080, "TCP")])
        for e, zone in zip(sl["endpoints"], ("zone-a", "zone-b", None)):
            if zone:
                e["zone"] = zone
                e["hints"] = {"forZones": [{"name": zone}]}
        sl["endpoints"][2]["hints"] = {"forZones": [{"name": "zone-a"}]}
        items = [service("ns1", "zoned", "172.30.0.50", P80), sl, node]
        for mode in ("iptables", "nftables"):
            j = explain(items, "10.0.0.5", "172.30.0.50:80", mode=mode)
            by = {e["address"]: e for e in j["endpoints"]}
            self.assertEqual({a: (e["zone"], e["selected"]) for a, e in by.items()},
                             {"10.180.0.1:8080": ("zone-a", True), "10.180.1.1:8080": ("zone-b", False),
                              "10.180.2.1:8080": (None, True)}, mode)
            self.assertIn("another zone", by["10.180.1.1:8080"]["why"])
            self.assertIn("zone-a (topology)", by["10.180.0.1:8080"]["why"])

    def test_local_policy_picks_local_endpoints(self):
        j = explain(self.items, "203.0.113.2", "1.2.3.4:80")
        self.assertEqual([e["address"] for e in j["endpoints"] if e["selected"]], ["10.180.0.1:8080"])
        self.assertIn("Local", j["service"]["policy"])
        self.assertFalse(j["masquerade"]["value"])
        self.assertIn("client's address is kept", j["masquerade"]["reason"])

    def test_source_outside_ranges(self):
        j = explain(self.items, "203.0.113.200", "1.2.3.4:80")
        self.assertEqual(j["verdict"], "drop")
        self.assertIn("loadBalancerSourceRanges", j["reason"])
        self.assertTrue(any(s["chain"] == "KUBE-PROXY-FIREWALL" for s in j["chains"]))

    def test_health_check_node_port(self):
        j = explain(self.items, "203.0.113.2", "192.168.0.2:30000")
        self.assertEqual(j["verdict"], "accept")
        self.assertEqual(j["chains"][-1]["chain"], "KUBE-NODEPORTS")
        self.assertIn("health check node port", j["chains"][-1]["rule"])

    def test_nearest_meaning(self):
        j = explain(self.items, "10.0.0.5", "172.30.0.10:53")           # TCP to a UDP-only port
        self.assertEqual(j["verdict"], "none")
        self.assertTrue(any("53/UDP" in n for n in j["notes"]), j["notes"])
        j = explain(self.items, "203.0.113.2", "192.168.0.2:30080", mode="nftables")
        self.assertTrue(any("30080/TCP is ns1/web's node port" in n for n in j["notes"]) or j["verdict"] == "forward",
                        j)

    def test_conntrack_invalid(self):
        j = explain(self.items, "203.0.113.2", "1.2.3.4:80", "--ct-state", "invalid")
        self.assertEqual(j["verdict"], "drop")
        self.assertIn("INVALID", j["reason"])
        j = explain(self.items, "203.0.113.2", "1.2.3.4:80", "--ct-state", "invalid", mode="nftables")
        self.assertNotEqual(j["verdict"], "drop")

    def test_interface_detector(self):
        extra = ("--detect-local-mode", "InterfaceNamePrefix", "--pod-interface-name-prefix", "veth")
        j = explain(self.items, "10.0.0.5", "172.30.0.41:80", "--from", "veth1234", *extra)
        self.assertFalse(j["masquerade"]["value"], j["masquerade"]["reason"])
        j = explain(self.items, "10.0.0.5", "172.30.0.41:80", "--from", "eth0", *extra)
        self.assertTrue(j["masquerade"]["value"], j["masquerade"]["reason"])

    def test_chain_walk_names_the_mode(self):
        j = explain(self.items, "10.0.0.5", "172.30.0.41:80", mode="nftables")
        self.assertTrue(any(s["chain"].startswith("service-") and "ns1/web/tcp/http" in s["chain"]
                            for s in j["chains"]), j["chains"])
        self.assertTrue(all(e["chain"].startswith("endpoint-") for e in j["endpoints"] if e["selected"]))
        j = explain(self.items, "10.0.0.5", "172.30.0.41:80", "--proxy-mode", "userspace", mode="iptables")
        self.assertEqual(j["mode"], "userspace")
        self.assertEqual(j["chains"][0]["table"], "userspace")
        j = explain(self.items, "10.0.0.5", "172.30.0.41:80", "--socket-lb", "--from", "pod")
        self.assertTrue(j["socketLB"])
        self.assertEqual(j["chains"][0]["chain"], "socklb_services")
        self.assertFalse(j["masquerade"]["value"])

    def test_bad_query_is_refused(self):
        for args, msg in ((["--source", "10.0.0.1", "--destination", "172.30.0.41"], "IP:PORT"),
                          (["--source", "nope", "--destination", "172.30.0.41:80"], "--source"),
                          (["--source", "10.0.0.1", "--destination", "[fd00::1]:80"], "families"),
                          (["--destination", "172.30.0.41:80"], "no source")):
            out = subprocess.run([KPROXY, "explain", *HOST, *args, os.devnull], capture_output=True, text=True)
            self.assertEqual(out.returncode, 2, out.stderr)
            self.assertIn(msg, out.stderr)


CHAIN_RE = re.compile(r"\b(KUBE-(?:SVC|SVL|EXT|FW|SEP)-[A-Z0-9]{16}|(?:service|local|external|firewall|endpoint)-"
                      r"[A-Z2-7]{8}-[^ ]+)")


class GoldenChains(unittest.TestCase):
    """Every chain explain names for a golden scenario's service addresses is one its render writes."""

    def check_dir(self, gdir, mode_args):
        for name in sorted(os.listdir(gdir)):
            d = os.path.join(gdir, name)
            state = [os.path.join(d, f) for f in ("state.json", "state.yaml") if os.path.exists(os.path.join(d, f))]
            if not state or os.path.exists(os.path.join(d, "expected.exit")):
                continue
            with open(os.path.join(d, "args")) as f:
                args = f.read().split()
            if "--ip-family" in args and args[args.index("--ip-family") + 1] in ("6", "IPv6"):
                continue
            render = subprocess.run([KPROXY, "render", *args, *mode_args, state[0]], capture_output=True, text=True)
            if render.returncode != 0:
                continue
            args = [a for i, a in enumerate(args) if a != "--ip-family" and (i == 0 or args[i - 1] != "--ip-family")]
            for dst in self.destinations(state[0]):
                with self.subTest(scenario=name, destination=dst):
                    out = subprocess.run([KPROXY, "explain", *args, *mode_args, "--source", "203.0.113.2",
                                          "--destination", dst, "--output", "json", state[0]],
                                         capture_output=True, text=True)
                    self.assertEqual(out.returncode, 0, out.stderr)
                    j = json.loads(out.stdout)
                    named = set()
                    for s in j["chains"]:
                        named.update(CHAIN_RE.findall(s["chain"] + " " + s["rule"]))
                    named.update(e["chain"] for e in j["endpoints"] if e["chain"])
                    for c in named:
                        self.assertIn(c, render.stdout, "%s names %s, which render does not write" % (dst, c))

    @classmethod
    def destinations(cls, path):
        import ipaddress
        for d in cls.all_destinations(path):
            ip, port = d.rsplit(":", 1)
            try:
                ipaddress.IPv4Address(ip)
            except ValueError:
                continue
            if 0 < int(port) < 65536:
                yield d

    @staticmethod
    def all_destinations(path):
        with open(path) as f:
            text = f.read()
        if path.endswith(".yaml"):
            import yaml
            docs = [d for d in yaml.safe_load_all(text) if d]
            items = docs[0].get("items", docs) if len(docs) == 1 and docs[0].get("kind") == "List" else docs
        else:
            items = json.loads(text)["items"]
        for o in items:
            if o.get("kind") != "Service":
                continue
            spec = o.get("spec", {})
            ip = spec.get("clusterIP")
            if not ip or ":" in ip or ip == "None":
                continue
            for p in spec.get("ports", []):
                yield "%s:%d" % (ip, p["port"])
                for e in spec.get("externalIPs", []) or []:
                    if ":" not in e:
                        yield "%s:%d" % (e, p["port"])
                for i in (o.get("status", {}).get("loadBalancer", {}).get("ingress") or []):
                    if i.get("ip") and ":" not in i["ip"]:
                        yield "%s:%d" % (i["ip"], p["port"])
                if p.get("nodePort"):
                    yield "192.168.0.2:%d" % p["nodePort"]

    def test_iptables_goldens(self):
        self.check_dir(os.path.join(ROOT, "tests", "golden"), [])

    def test_nftables_goldens(self):
        self.check_dir(os.path.join(ROOT, "tests", "golden-nft"), ["--proxy-mode", "nftables"])


class AllowLists(unittest.TestCase):
    """A claimed address that --external-ip-cidrs or --load-balancer-ip-cidrs
    refuses (docs/security.md) is no service's: explain says which service
    claims it and why this node does not program it."""

    items = [service("ns1", "hijack", "172.30.0.70", P80, externalIPs=["203.0.113.9"], type="LoadBalancer",
                     lb="198.51.100.9"),
             slice_("ns1", "hijack", 1, [ep("10.180.0.9", "test-node")], P80)]

    def test_refused_addresses_are_named(self):
        for mode in MODES:
            with self.subTest(mode=mode):
                j = explain(self.items, "10.0.0.5", "203.0.113.9:80", mode=mode)
                self.assertEqual(flow_output(j), "10.180.0.9:80")
                j = explain(self.items, "10.0.0.5", "203.0.113.9:80", "--external-ip-cidrs", "10.0.0.0/8",
                            mode=mode)
                self.assertEqual(j["verdict"], "none", j)
                self.assertIn("ns1/hijack claims the destination as its externalIP, which this node does not "
                              "program: not in --external-ip-cidrs", j["notes"])
                j = explain(self.items, "10.0.0.5", "198.51.100.9:80", "--load-balancer-ip-cidrs", "none",
                            mode=mode)
                self.assertEqual(j["verdict"], "none", j)
                self.assertIn("ns1/hijack claims the destination as its load-balancer IP, which this node does not "
                              "program: not in --load-balancer-ip-cidrs", j["notes"])
                # Its cluster IP is served as before.
                self.assertEqual(flow_output(explain(self.items, "10.0.0.5", "172.30.0.70:80", "--load-balancer-ip-cidrs",
                                                     "none", mode=mode)), "10.180.0.9:80")


if __name__ == "__main__":
    unittest.main()
