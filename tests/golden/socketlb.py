#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Socket load balancing against the golden rules: for every scenario of
tests/golden whose render succeeds, `kproxy render --socket-lb` (what the
maps would hold) must send each service address to exactly the endpoints
that the scenario's hand-written expected.iptables sends this node's own
traffic to:

  cluster IP   KUBE-SERVICES -d IP --dport P -> KUBE-SVC/KUBE-SVL -> KUBE-SEP DNATs
  external IP, KUBE-SERVICES -d IP --dport P -> KUBE-EXT -> the chain its
  LB IP        "--src-type LOCAL" rule takes (Local policy), else the one it
               jumps to (Cluster); through KUBE-FW (source ranges): no entry
  node port    KUBE-NODEPORTS --dport P -> KUBE-EXT as above, on every node
               address (0.0.0.0 / ::) when KUBE-SERVICES sends every LOCAL
               destination there, else on the -d addresses it names; a
               loopback one (localhost node ports) has no entry
  REJECT/DROP  no entry

with the same ClientIP affinity timeout (-m recent --seconds). Terminating
fallback, topology hints, traffic policies and dual-stack all come from
the scenarios. SCTP is not translated (no entry either side).

Usage: tests/golden/socketlb.py BUILD_DIR
"""
import ipaddress
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

RULE = re.compile(r"^-A (\S+) (.*)$")
PORT_RULE = re.compile(r"-m (tcp|udp|sctp) -p \S+ (?:-d (\S+) )?--dport (\d+)\b.* -j (\S+)$")
LINE = re.compile(r"^(tcp|udp) (\[[^\]]+\]|[^ :]+):(\d+) \S+ (?:internal|external)(?: affinity=(\d+))? -> (.*)$")


def nat_chains(text):
    """The nat table's rules, by chain."""
    chains, table = {}, None
    for line in text.splitlines():
        if line.startswith("*"):
            table = line[1:]
        elif table == "nat":
            m = RULE.match(line)
            if m:
                chains.setdefault(m.group(1), []).append(m.group(2))
    return chains


def target(rule):
    m = re.search(r"-j (\S+)", rule)
    return m.group(1) if m else None


def backends(chains, chain):
    """(endpoints, affinity seconds) of a KUBE-SVC-/KUBE-SVL- chain."""
    eps, affinity = set(), None
    for rule in chains.get(chain, []):
        t = target(rule)
        if t and t.startswith("KUBE-SEP-"):
            for r in chains.get(t, []):
                m = re.search(r"-j DNAT --to-destination (\S+)", r)
                if m:
                    eps.add(m.group(1))
        m = re.search(r"--rcheck --seconds (\d+)", rule)
        if m:
            affinity = int(m.group(1))
    return eps, affinity


def local_view(chains, chain):
    """Where this node's traffic entering chain goes: (endpoints, affinity),
    or None when socket load balancing leaves it to the rules."""
    if chain.startswith(("KUBE-SVC-", "KUBE-SVL-")):
        return backends(chains, chain)
    if chain.startswith("KUBE-EXT-"):
        rules = chains.get(chain, [])
        local = [target(r) for r in rules if "--src-type LOCAL" in r and target(r) != "KUBE-MARK-MASQ"]
        jumps = [target(r) for r in rules if target(r) and target(r).startswith(("KUBE-SVC-", "KUBE-SVL-"))]
        pick = local[0] if local else (jumps[-1] if jumps else None)
        return backends(chains, pick) if pick else None
    return None     # KUBE-FW- (source ranges), REJECT, DROP, KUBE-NODEPORTS


def expected(chains, family):
    want = {}
    wildcard = "::" if family == 6 else "0.0.0.0"
    nodeport_addrs = []
    for rule in chains.get("KUBE-SERVICES", []):
        if target(rule) == "KUBE-NODEPORTS":
            m = re.search(r"(?:^| )(! )?-d (\S+) ", rule)
            if m and not m.group(1):
                nodeport_addrs.append(m.group(2).split("/")[0])
            else:               # every LOCAL destination (but loopback)
                nodeport_addrs.append(wildcard)
            continue
        m = PORT_RULE.search(rule)
        if not m or m.group(1) == "sctp":
            continue
        view = local_view(chains, m.group(4))
        if view and view[0]:
            want[(m.group(1), m.group(2), int(m.group(3)))] = view
    for rule in chains.get("KUBE-NODEPORTS", []):
        m = PORT_RULE.search(rule)
        if not m or m.group(1) == "sctp":
            continue
        if m.group(2):          # localhost node ports: a pod's loopback is its own
            assert ipaddress.ip_network(m.group(2), strict=False).network_address.is_loopback, rule
            continue
        view = local_view(chains, m.group(4))
        if view and view[0]:
            for a in nodeport_addrs:
                if not ipaddress.ip_address(a).is_loopback:
                    want[(m.group(1), a, int(m.group(3)))] = view
    return want


def rendered(text):
    got = {}
    for line in text.splitlines():
        m = LINE.match(line)
        assert m, "not a socket-lb line: %r" % line
        addr = m.group(2).strip("[]")
        affinity = int(m.group(4)) if m.group(4) else None
        got[(m.group(1), addr, int(m.group(3)))] = (set(m.group(5).split()), affinity)
    return got


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: %s BUILD_DIR" % sys.argv[0])
    kproxy = os.path.join(os.path.abspath(sys.argv[1]), "kproxy")
    passed = failed = 0
    for name in sorted(os.listdir(HERE)):
        d = os.path.join(HERE, name)
        if not os.path.isfile(os.path.join(d, "expected.iptables")) or os.path.exists(os.path.join(d, "expected.exit")):
            continue
        with open(os.path.join(d, "args")) as f:
            args = f.read().split()
        states = [s for s in ("state.json", "state.yaml") if os.path.exists(os.path.join(d, s))]
        family = 6 if "--ip-family" in args and args[args.index("--ip-family") + 1] == "6" else 4
        p = subprocess.run([kproxy, "render", "--socket-lb"] + args + states, cwd=d, capture_output=True,
                           text=True, timeout=120)
        with open(os.path.join(d, "expected.iptables")) as f:
            want = expected(nat_chains(f.read()), family)
        problems = []
        if p.returncode != 0:
            problems.append("render --socket-lb exited %d: %s" % (p.returncode, p.stderr.strip()[-300:]))
        else:
            got = rendered(p.stdout)
            for k in sorted(set(want) | set(got), key=str):
                if want.get(k) != got.get(k):
                    problems.append("%s %s:%d: rules %s, maps %s" % (k[0], k[1], k[2], want.get(k), got.get(k)))
        if problems:
            failed += 1
            print("FAIL %s" % name)
            for pr in problems[:10]:
                print("     " + pr)
        else:
            passed += 1
            print("ok   %s (%d entries)" % (name, len(want)))
    print("golden-socket-lb: %d passed, %d failed" % (passed, failed))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
