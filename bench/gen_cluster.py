#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Generate a synthetic cluster state for benchmarks.

usage: gen_cluster.py [--unique-nodeports] N_SERVICES N_ENDPOINTS [NODE] > state.json

Writes a kubectl-style List (JSON) with N services and one EndpointSlice
each holding M endpoints. The mix follows what large clusters carry: most
services are ClusterIP, every 10th is NodePort, every 20th LoadBalancer
(with a source range), every 7th has externalTrafficPolicy Local and every
13th ClientIP affinity. Endpoints are spread over 50 nodes, NODE among them.

Node ports are 30000 + i % 2000, so above 2000 services two services share
a node port, which a real API server never allows (iptables mode does not
mind; an nftables map cannot hold the same key twice). --unique-nodeports
(bench/programming.py uses it) gives each NodePort and LoadBalancer service
its own port from 30000-32767 instead, as the allocator would, while the
range lasts; after that NodePort services become ClusterIP and LoadBalancer
services get allocateLoadBalancerNodePorts: false and no node port.
"""
import json
import sys


def main():
    args = sys.argv[1:]
    unique = "--unique-nodeports" in args
    args = [a for a in args if a != "--unique-nodeports"]
    try:
        n, m = int(args[0]), int(args[1])
        if n < 0 or m < 0 or len(args) > 3:
            raise ValueError
    except (IndexError, ValueError):
        sys.exit("usage: gen_cluster.py [--unique-nodeports] N_SERVICES N_ENDPOINTS [NODE] > state.json")
    node = args[2] if len(args) > 2 else "node-0"
    next_port = 30000
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
        port = 30000 + i % 2000
        if unique and i % 10 == 0:
            port = next_port if next_port <= 32767 else None
            next_port += 1
        if i % 20 == 0:
            spec["type"] = "LoadBalancer"
            if port is None:
                spec["allocateLoadBalancerNodePorts"] = False
            else:
                spec["ports"][0]["nodePort"] = port
            spec["loadBalancerSourceRanges"] = ["203.0.113.0/24"]
            status = {"loadBalancer": {"ingress": [{"ip": "198.%d.%d.%d" % (18 + (i >> 16), (i >> 8) & 255, i & 255)}]}}
        elif i % 10 == 0 and port is not None:
            spec["type"] = "NodePort"
            spec["ports"][0]["nodePort"] = port
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
