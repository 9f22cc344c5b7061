#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Writes state.json and expected.nft of the nftables large-cluster scenario.

Usage: gen.py [OUTDIR]   (default: this script's directory)

1003 endpoints in all, more than the 1000 of iptables mode's large cluster
mode (iptables-mode.md section 5): svc-a (600) and svc-b (401) ClusterIP
services, npl (NodePort, ETP Local, one local endpoint) and none (no
endpoints). nftables mode has no large cluster mode (nftables-mode.md has
none; its few comments are those of section 9's table), so the output is
what it would be for a small cluster: the ETP Local short-circuit rules and
the no-endpoint element keep their comments.

The expectation is written straight from the reference (the fixed block of
nftables-mode.md 10.3 without the ServiceCIDR drop rule; sections 5, 6.1,
6.2; kproxy's numgen form from README.md), normalised with normalize.py;
selftest.py checks that the committed files are what this script writes.
"""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
import nftname  # noqa: E402
import normalize  # noqa: E402

NS, PORT_NAME, PORT, TARGET = 'big', 'http', 80, 8080
SERVICES = [  # name, cluster IP, [(endpoint IP, node)], nodePort (ETP Local) or 0
    ('svc-a', '172.30.1.1', [('10.180.%d.%d' % (i // 200, i % 200 + 1), 'other-node') for i in range(600)], 0),
    ('svc-b', '172.30.1.2', [('10.181.%d.%d' % (i // 200, i % 200 + 1), 'other-node') for i in range(401)], 0),
    ('npl', '172.30.1.3', [('10.182.0.1', 'test-node'), ('10.182.0.2', 'other-node')], 30090),
    ('none', '172.30.1.4', [], 0),
]

FIXED = '''\
add table ip kube-proxy { comment "rules for kube-proxy" ; }
add set ip kube-proxy cluster-ips { type ipv4_addr ; comment "Active ClusterIPs" ; }
add set ip kube-proxy nodeport-ips { type ipv4_addr ; comment "IPs that accept NodePort traffic" ; }
add map ip kube-proxy firewall-ips { type ipv4_addr . inet_proto . inet_service : verdict ; comment "destinations that are subject to LoadBalancerSourceRanges" ; }
add map ip kube-proxy no-endpoint-nodeports { type inet_proto . inet_service : verdict ; comment "vmap to drop or reject packets to service nodeports with no endpoints" ; }
add map ip kube-proxy no-endpoint-services { type ipv4_addr . inet_proto . inet_service : verdict ; comment "vmap to drop or reject packets to services with no endpoints" ; }
add map ip kube-proxy service-ips { type ipv4_addr . inet_proto . inet_service : verdict ; comment "ClusterIP, ExternalIP and LoadBalancer IP traffic" ; }
add map ip kube-proxy service-nodeports { type inet_proto . inet_service : verdict ; comment "NodePort traffic" ; }
add chain ip kube-proxy cluster-ips-check
add chain ip kube-proxy filter-prerouting-pre-dnat { type filter hook prerouting priority -110 ; }
add chain ip kube-proxy filter-output-pre-dnat { type filter hook output priority -110 ; }
add chain ip kube-proxy filter-forward { type filter hook forward priority 0 ; }
add chain ip kube-proxy filter-input { type filter hook input priority 0 ; }
add chain ip kube-proxy filter-output { type filter hook output priority 0 ; }
add chain ip kube-proxy firewall-check
add chain ip kube-proxy mark-for-masquerade
add chain ip kube-proxy masquerading
add chain ip kube-proxy nat-output { type nat hook output priority -100 ; }
add chain ip kube-proxy nat-postrouting { type nat hook postrouting priority 100 ; }
add chain ip kube-proxy nat-prerouting { type nat hook prerouting priority -100 ; }
add chain ip kube-proxy nodeport-endpoints-check
add chain ip kube-proxy reject-chain { comment "helper for @no-endpoint-services / @no-endpoint-nodeports" ; }
add chain ip kube-proxy services
add chain ip kube-proxy service-endpoints-check
add rule ip kube-proxy cluster-ips-check ip daddr @cluster-ips reject comment "Reject traffic to invalid ports of ClusterIPs"
add rule ip kube-proxy filter-prerouting-pre-dnat ct state new jump firewall-check
add rule ip kube-proxy filter-forward ct state new jump service-endpoints-check
add rule ip kube-proxy filter-forward ct state new jump cluster-ips-check
add rule ip kube-proxy filter-input ct state new jump nodeport-endpoints-check
add rule ip kube-proxy filter-input ct state new jump service-endpoints-check
add rule ip kube-proxy filter-output ct state new jump service-endpoints-check
add rule ip kube-proxy filter-output-pre-dnat ct state new jump firewall-check
add rule ip kube-proxy filter-output ct state new jump cluster-ips-check
add rule ip kube-proxy firewall-check ip daddr . meta l4proto . th dport vmap @firewall-ips
add rule ip kube-proxy mark-for-masquerade mark set mark or 0x4000
add rule ip kube-proxy masquerading mark and 0x4000 == 0 return
add rule ip kube-proxy masquerading mark set mark xor 0x4000
add rule ip kube-proxy masquerading masquerade fully-random
add rule ip kube-proxy nat-output jump services
add rule ip kube-proxy nat-postrouting jump masquerading
add rule ip kube-proxy nat-prerouting jump services
add rule ip kube-proxy nodeport-endpoints-check ip daddr @nodeport-ips meta l4proto . th dport vmap @no-endpoint-nodeports
add rule ip kube-proxy reject-chain reject
add rule ip kube-proxy services ip daddr . meta l4proto . th dport vmap @service-ips
add rule ip kube-proxy services ip daddr @nodeport-ips meta l4proto . th dport vmap @service-nodeports
add element ip kube-proxy nodeport-ips { 192.168.0.2 }
add rule ip kube-proxy service-endpoints-check ip daddr . meta l4proto . th dport vmap @no-endpoint-services
'''


def state():
    items = []
    for name, cip, eps, np in SERVICES:
        spec = {'clusterIP': cip, 'clusterIPs': [cip], 'ipFamilies': ['IPv4'],
                'ipFamilyPolicy': 'SingleStack', 'type': 'NodePort' if np else 'ClusterIP',
                'sessionAffinity': 'None', 'internalTrafficPolicy': 'Cluster',
                'selector': {'app': name},
                'ports': [{'name': PORT_NAME, 'port': PORT, 'protocol': 'TCP', 'targetPort': TARGET}]}
        if np:
            spec['externalTrafficPolicy'] = 'Local'
            spec['ports'][0]['nodePort'] = np
        items.append({'apiVersion': 'v1', 'kind': 'Service',
                      'metadata': {'name': name, 'namespace': NS}, 'spec': spec})
        for n, start in enumerate(range(0, len(eps), 100)):
            items.append({
                'apiVersion': 'discovery.k8s.io/v1', 'kind': 'EndpointSlice',
                'metadata': {'name': '%s-%03d' % (name, n), 'namespace': NS,
                             'labels': {'kubernetes.io/service-name': name}},
                'addressType': 'IPv4',
                'ports': [{'name': PORT_NAME, 'port': TARGET, 'protocol': 'TCP'}],
                'endpoints': [{'addresses': [ip], 'conditions': {'ready': True}, 'nodeName': node}
                              for ip, node in eps[start:start + 100]]})
    items.append({'apiVersion': 'v1', 'kind': 'Node', 'metadata': {'name': 'test-node'},
                  'status': {'addresses': [{'type': 'InternalIP', 'address': '192.168.0.2'}]}})
    # One object per line keeps the file reviewable and diffable.
    return ('{"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""}, "items": [\n'
            + ',\n'.join(json.dumps(o) for o in items) + '\n]}\n')


def pick(chain, eps):
    """kproxy's numgen form (README.md) for a sorted endpoint-chain list."""
    out = []
    for i, ep in enumerate(eps):
        k = len(eps) - i
        if k > 1:
            out.append('add rule ip kube-proxy %s numgen random mod %d == 0 goto %s' % (chain, k, ep))
        else:
            out.append('add rule ip kube-proxy %s goto %s' % (chain, ep))
    return out


def expected():
    out = FIXED.splitlines()
    for name, cip, eps, np in SERVICES:
        base = '%s/%s/tcp/%s' % (NS, name, PORT_NAME)
        body = nftname.body(base)
        svc, ext, loc = 'service-' + body, 'external-' + body, 'local-' + body
        out.append('add element ip kube-proxy cluster-ips { %s }' % cip)
        if not eps:
            out.append('add element ip kube-proxy no-endpoint-services { %s . tcp . %d comment "%s/%s:%s" : goto reject-chain }'
                       % (cip, PORT, NS, name, PORT_NAME))
            continue
        out.append('add element ip kube-proxy service-ips { %s . tcp . %d : goto %s }' % (cip, PORT, svc))
        # byte-wise order of "IP:port", as upstream
        eplist = sorted(('%s:%d' % (ip, TARGET), ip, node) for ip, node in eps)
        chains = {}
        for epstr, ip, node in eplist:
            c = 'endpoint-' + nftname.body('%s__%s/%d' % (base, ip, TARGET))
            chains[epstr] = c
            out += ['add chain ip kube-proxy ' + c,
                    'add rule ip kube-proxy %s ip saddr %s jump mark-for-masquerade' % (c, ip),
                    'add rule ip kube-proxy %s meta l4proto tcp dnat to %s' % (c, epstr)]
        out += ['add chain ip kube-proxy ' + svc,
                'add rule ip kube-proxy %s ip daddr %s ip saddr != 10.0.0.0/8 jump mark-for-masquerade' % (svc, cip)]
        out += pick(svc, [chains[e] for e, _, _ in eplist])
        if np:
            local = [chains[e] for e, _, node in eplist if node == 'test-node']
            out += ['add chain ip kube-proxy ' + ext,
                    'add rule ip kube-proxy %s ip saddr 10.0.0.0/8 goto %s comment "short-circuit pod traffic"' % (ext, svc),
                    'add rule ip kube-proxy %s fib saddr type local jump mark-for-masquerade comment "masquerade local traffic"' % ext,
                    'add rule ip kube-proxy %s fib saddr type local goto %s comment "short-circuit local traffic"' % (ext, svc),
                    'add rule ip kube-proxy %s goto %s' % (ext, loc),
                    'add chain ip kube-proxy ' + loc]
            out += pick(loc, local)
            out.append('add element ip kube-proxy service-nodeports { tcp . %d : goto %s }' % (np, ext))
    return normalize.normalize('\n'.join(out) + '\n')


def main():
    outdir = sys.argv[1] if len(sys.argv) > 1 else HERE
    with open(os.path.join(outdir, 'state.json'), 'w') as f:
        f.write(state())
    with open(os.path.join(outdir, 'expected.nft'), 'w') as f:
        f.write(expected())


if __name__ == '__main__':
    main()
