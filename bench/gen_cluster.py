#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Generate a synthetic cluster state for benchmarks.

usage: gen_cluster.py N_SERVICES N_ENDPOINTS [NODE] > state.json

Writes a kubectl-style List (JSON) with N services and one EndpointSlice
each holding M endpoints. The mix follows what large clusters carry: most
services are ClusterIP, every 10th is NodePort, every 20th LoadBalancer
(with a source range), every 7th has externalTrafficPolicy Local and every
13th ClientIP affinity. Endpoints are spread over 50 nodes, NODE among them.
"""
import json
import sys


def main():
    n = int(sys.argv[1])
    m = int(sys.argv[2])
    node = sys.argv[3] if len(sys.argv) > 3 else "node-0"
    items = [{
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": node, "labels": {"topology.kubernetes.io/zone": "zone-a"}},
        "spec": {"podCIDRs": ["10.128.0.0/24"]},
        "status": {"addresses": [{"type": "InternalIP", "address": "192.168.0.2"}]},
    }]
    ep = 0
    for i in range(n):
        ns = "ns%d" % (i % 100)
        name = "svc%d" % i
        cip = "10.%d.%d.%d" % (96 + (i >> 16), (i >> 8) & 255, i & 255)
        spec = {"clusterIP": cip, "clusterIPs": [cip],
                "ports": [{"name": "http", "port": 80, "protocol": "TCP", "targetPort": 8080}]}
        status = {}
        if i % 20 == 0:
            spec["type"] = "LoadBalancer"
            spec["ports"][0]["nodePort"] = 30000 + i % 2000
            spec["loadBalancerSourceRanges"] = ["203.0.113.0/24"]
            status = {"loadBalancer": {"ingress": [{"ip": "198.%d.%d.%d" % (18 + (i >> 16), (i >> 8) & 255, i & 255)}]}}
        elif i % 10 == 0:
            spec["type"] = "NodePort"
            spec["ports"][0]["nodePort"] = 30000 + i % 2000
        if i % 7 == 0 and spec.get("type"):
            spec["externalTrafficPolicy"] = "Local"
        if i % 13 == 0:
            spec["sessionAffinity"] = "ClientIP"
        svc = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": ns}, "spec": spec}
        if status:
            svc["status"] = status
        items.append(svc)
        endpoints = []
        for j in range(m):
            a = 16 * 65536 + ep
            ep += 1
            endpoints.append({
                "addresses": ["10.%d.%d.%d" % (128 + (a >> 16), (a >> 8) & 255, a & 255)],
                "conditions": {"ready": True, "serving": True, "terminating": False},
                "nodeName": node if ep % 50 == 0 else "node-%d" % (ep % 50),
            })
        items.append({
            "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": name + "-abcde", "namespace": ns,
                         "labels": {"kubernetes.io/service-name": name}},
            "addressType": "IPv4",
            "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
            "endpoints": endpoints,
        })
    json.dump({"apiVersion": "v1", "kind": "List", "items": items}, sys.stdout, separators=(",", ":"))


if __name__ == "__main__":
    main()
