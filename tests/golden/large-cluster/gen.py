#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Writes state.json and expected.iptables of the large-cluster scenario.

Usage: gen.py [OUTDIR]   (default: this script's directory)

Two ClusterIP services with 600 + 401 = 1001 ready endpoints in total, more
than the 1000 of upstream's large cluster mode (reference section 5), in
EndpointSlices of 100 endpoints each. In large cluster mode the SVC->SEP
rules and all SEP rules carry no comment; every other rule keeps its comment.

The expectation is written straight from the reference's rules (sections 3,
4, 5, 7.1, 7.6, 7.9, 7.10, 7.11, 9 and the normalised order of 13.2), not
from kproxy's output; run.sh checks that the committed files are what this
script writes.
"""
import base64
import hashlib
import json
import os
import sys

SERVICES = [  # name, cluster IP, endpoint IPs
    ('svc-a', '172.30.1.1', ['10.180.%d.%d' % (i // 200, i % 200 + 1) for i in range(600)]),
    ('svc-b', '172.30.1.2', ['10.181.%d.%d' % (i // 200, i % 200 + 1) for i in range(401)]),
]
NS, PORT_NAME, PORT, TARGET = 'big', 'http', 80, 8080


def chain_hash(s):
    return base64.b32encode(hashlib.sha256(s.encode()).digest()).decode()[:16]


def state():
    items = []
    for name, cip, ips in SERVICES:
        items.append({
            'apiVersion': 'v1', 'kind': 'Service',
            'metadata': {'name': name, 'namespace': NS},
            'spec': {'clusterIP': cip, 'clusterIPs': [cip], 'ipFamilies': ['IPv4'],
                     'ipFamilyPolicy': 'SingleStack', 'type': 'ClusterIP',
                     'sessionAffinity': 'None', 'internalTrafficPolicy': 'Cluster',
                     'selector': {'app': name},
                     'ports': [{'name': PORT_NAME, 'port': PORT, 'protocol': 'TCP',
                                'targetPort': TARGET}]}})
        for n, start in enumerate(range(0, len(ips), 100)):
            items.append({
                'apiVersion': 'discovery.k8s.io/v1', 'kind': 'EndpointSlice',
                'metadata': {'name': '%s-%03d' % (name, n), 'namespace': NS,
                             'labels': {'kubernetes.io/service-name': name}},
                'addressType': 'IPv4',
                'ports': [{'name': PORT_NAME, 'port': TARGET, 'protocol': 'TCP'}],
                'endpoints': [{'addresses': [ip], 'conditions': {'ready': True},
                               'nodeName': 'other-node'}
                              for ip in ips[start:start + 100]]})
    items.append({'apiVersion': 'v1', 'kind': 'Node', 'metadata': {'name': 'test-node'},
                  'status': {'addresses': [{'type': 'InternalIP', 'address': '192.168.0.2'}]}})
    # One object per line keeps the file reviewable and diffable.
    return ('{"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""}, "items": [\n'
            + ',\n'.join(json.dumps(o) for o in items) + '\n]}\n')


def expected():
    nat_chains, svc_rules, sep_rules, svcs_rules = [], [], {}, {}
    for name, cip, ips in SERVICES:
        spn = '%s/%s:%s' % (NS, name, PORT_NAME)
        svc = 'KUBE-SVC-' + chain_hash(spn + 'tcp')
        nat_chains.append(svc)
        match = '-m tcp -p tcp -d %s --dport %d' % (cip, PORT)
        svc_rules.append('-A KUBE-SERVICES -m comment --comment "%s cluster IP" %s -j %s'
                         % (spn, match, svc))
        rules = ['-A %s -m comment --comment "%s cluster IP" %s ! -s 10.0.0.0/8 -j KUBE-MARK-MASQ'
                 % (svc, spn, match)]
        eps = sorted('%s:%d' % (ip, TARGET) for ip in ips)  # byte-wise, as upstream
        for i, ep in enumerate(eps):
            sep = 'KUBE-SEP-' + chain_hash(spn + 'tcp' + ep)
            nat_chains.append(sep)
            n = len(eps) - i
            if n > 1:
                rules.append('-A %s -m statistic --mode random --probability %.10f -j %s'
                             % (svc, 1.0 / n, sep))
            else:
                rules.append('-A %s -j %s' % (svc, sep))
            sep_rules[sep] = ['-A %s -s %s -j KUBE-MARK-MASQ' % (sep, ep.split(':')[0]),
                              '-A %s -m tcp -p tcp -j DNAT --to-destination %s' % (sep, ep)]
        svcs_rules[svc] = rules
    nat_chains = sorted(nat_chains + ['KUBE-MARK-MASQ', 'KUBE-POSTROUTING'])
    out = ['*filter',
           ':KUBE-NODEPORTS - [0:0]',
           ':KUBE-SERVICES - [0:0]',
           ':KUBE-EXTERNAL-SERVICES - [0:0]',
           ':KUBE-FIREWALL - [0:0]',
           ':KUBE-FORWARD - [0:0]',
           ':KUBE-PROXY-FIREWALL - [0:0]',
           '-A KUBE-FIREWALL -m comment --comment "block incoming localnet connections" -d 127.0.0.0/8 ! -s 127.0.0.0/8 -m conntrack ! --ctstate RELATED,ESTABLISHED,DNAT -j DROP',
           '-A KUBE-FORWARD -m conntrack --ctstate INVALID -m nfacct --nfacct-name ct_state_invalid_dropped_pkts -j DROP',
           '-A KUBE-FORWARD -m comment --comment "kubernetes forwarding rules" -m mark --mark 0x4000/0x4000 -j ACCEPT',
           '-A KUBE-FORWARD -m comment --comment "kubernetes forwarding conntrack rule" -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT',
           'COMMIT',
           '*nat',
           ':KUBE-NODEPORTS - [0:0]',
           ':KUBE-SERVICES - [0:0]']
    out += [':%s - [0:0]' % c for c in nat_chains]
    out += svc_rules  # svc-a before svc-b: already sorted by service name
    out.append('-A KUBE-SERVICES -m comment --comment "kubernetes service nodeports; NOTE: this must be the last rule in this chain" -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS')
    for c in nat_chains:
        if c == 'KUBE-MARK-MASQ':
            out.append('-A KUBE-MARK-MASQ -j MARK --or-mark 0x4000')
        elif c == 'KUBE-POSTROUTING':
            out += ['-A KUBE-POSTROUTING -m mark ! --mark 0x4000/0x4000 -j RETURN',
                    '-A KUBE-POSTROUTING -j MARK --xor-mark 0x4000',
                    '-A KUBE-POSTROUTING -m comment --comment "kubernetes service traffic requiring SNAT" -j MASQUERADE']
        else:
            out += sep_rules.get(c, []) + svcs_rules.get(c, [])
    out.append('COMMIT')
    return ''.join(l + '\n' for l in out)


def main():
    outdir = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(outdir, 'state.json'), 'w') as f:
        f.write(state())
    with open(os.path.join(outdir, 'expected.iptables'), 'w') as f:
        f.write(expected())


if __name__ == '__main__':
    main()
