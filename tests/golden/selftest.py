#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Self-test of normalize.py (run by run.sh before the scenarios).

1. upstream-overall/expected.iptables (the reference's text verbatim) is a
   fixed point of the normaliser;
2. so is every other scenario's expected.iptables, and generated scenarios
   (gen.py) match their committed files;
3. shuffled versions of upstream-overall (tables swapped, chain lines
   shuffled, rules of different chains interleaved at random, services in
   KUBE-SERVICES/KUBE-NODEPORTS reordered, marks zero-padded as production
   prints them) normalise back to the same text;
4. malformed inputs are refused.
Prints one line per problem; exit status 1 if any.
"""
import os
import random
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, HERE)
from normalize import normalize, NormalizeError  # noqa: E402

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)


def split_tables(text):
    """[(table, [chain lines], [rule lines])] in input order."""
    out = []
    for block in text.split('COMMIT\n'):
        lines = [l for l in block.split('\n') if l]
        if not lines:
            continue
        out.append((lines[0][1:], [l for l in lines if l.startswith(':')],
                    [l for l in lines if l.startswith('-A ')]))
    return out


def shuffled(text, rng):
    """A restore text that a generator with another service order could
    have produced, and that upstream's normalisation maps to the same text."""
    tables = split_tables(text)
    rng.shuffle(tables)
    out = []
    for name, chains, rules in tables:
        rng.shuffle(chains)
        per_chain = {}
        for r in rules:
            per_chain.setdefault(r.split(' ')[1], []).append(r)
        for c in ('KUBE-SERVICES', 'KUBE-NODEPORTS'):
            if c not in per_chain:
                continue
            groups, last = {}, []
            for r in per_chain[c]:
                if 'must be the last rule' in r:
                    last.append(r)
                else:
                    key = re.search(r'--comment "?([^ :"]*)', r).group(1)
                    groups.setdefault(key, []).append(r)
            keys = list(groups)
            rng.shuffle(keys)
            per_chain[c] = [r for k in keys for r in groups[k]] + last
        # Interleave the chains' rule lists at random, keeping each list's order.
        queues = [list(v) for v in per_chain.values()]
        mixed = []
        while queues:
            q = rng.choice(queues)
            mixed.append(q.pop(0))
            if not q:
                queues.remove(q)
        padded = [re.sub(r'0x4000', '0x00004000', r) for r in mixed]
        out += ['*' + name] + chains + padded + ['COMMIT']
    return ''.join(l + '\n' for l in out)


def refuses(text, what):
    try:
        normalize(text)
    except NormalizeError:
        return
    failures.append('normalize accepted ' + what)


def main():
    overall = open(os.path.join(HERE, 'upstream-overall', 'expected.iptables')).read()
    check(normalize(overall) == overall, 'upstream-overall: not a fixed point')

    for d in sorted(os.listdir(HERE)):
        p = os.path.join(HERE, d, 'expected.iptables')
        if os.path.isfile(p):
            text = open(p).read()
            try:
                check(normalize(text) == text,
                      '%s/expected.iptables is not in normalised form' % d)
            except NormalizeError as e:
                failures.append('%s/expected.iptables: %s' % (d, e))

    # Generated scenarios: the committed files are what gen.py writes.
    for d in sorted(os.listdir(HERE)):
        gen = os.path.join(HERE, d, 'gen.py')
        if not os.path.isfile(gen):
            continue
        with tempfile.TemporaryDirectory() as tmp:
            subprocess.run([sys.executable, gen, tmp], check=True)
            for f in sorted(os.listdir(tmp)):
                with open(os.path.join(tmp, f)) as a, open(os.path.join(HERE, d, f)) as b:
                    check(a.read() == b.read(), '%s/%s differs from what gen.py writes' % (d, f))

    rng = random.Random(20250101)
    for i in range(200):
        s = shuffled(overall, rng)
        if normalize(s) != overall:
            failures.append('shuffle %d does not normalise back:\n%s' % (i, s))
            break
    check(s != overall and '0x00004000' in s, 'shuffle does not shuffle')

    marks = ('*nat\n:KUBE-A - [0:0]\n'
             '-A KUBE-A -m mark ! --mark 0x00004000/0x00004000 -j RETURN\n'
             '-A KUBE-A -j MARK --xor-mark 0x00000001\n'
             '-A KUBE-A -j MARK --or-mark 0x80000000\n'
             'COMMIT\n')
    check(normalize(marks) == ('*nat\n:KUBE-A - [0:0]\n'
                               '-A KUBE-A -m mark ! --mark 0x4000/0x4000 -j RETURN\n'
                               '-A KUBE-A -j MARK --xor-mark 0x1\n'
                               '-A KUBE-A -j MARK --or-mark 0x80000000\n'
                               'COMMIT\n'), 'mark rewriting')

    # Sort key: the service name ends at the first space or colon, so the
    # unnamed port of ns1/svc1 sorts before ns1/svc10, and the two ports of
    # ns1/svc1 keep their generation order.
    svc = ('*filter\n:KUBE-SERVICES - [0:0]\n'
           '-A KUBE-SERVICES -m comment --comment "ns1/svc10:b has no endpoints" -j REJECT\n'
           '-A KUBE-SERVICES -m comment --comment "ns1/svc1:z has no endpoints" -j REJECT\n'
           '-A KUBE-SERVICES -m comment --comment "ns1/svc1:a has no endpoints" -j REJECT\n'
           'COMMIT\n')
    check(normalize(svc).split('\n')[2:5] == [
        '-A KUBE-SERVICES -m comment --comment "ns1/svc1:z has no endpoints" -j REJECT',
        '-A KUBE-SERVICES -m comment --comment "ns1/svc1:a has no endpoints" -j REJECT',
        '-A KUBE-SERVICES -m comment --comment "ns1/svc10:b has no endpoints" -j REJECT'],
        'KUBE-SERVICES sort key')

    refuses('*nat\n:KUBE-SERVICES - [0:0]\n-A KUBE-SERVICES -j KUBE-SVC-X\nCOMMIT\n',
            'a jump to an undeclared chain')
    refuses('*nat\n-A KUBE-SERVICES -j RETURN\nCOMMIT\n', 'a rule for an undeclared chain')
    refuses('*nat\n:KUBE-SERVICES - [0:0]\n', 'a table without COMMIT')
    refuses('*nat\n:KUBE-A - [0:0]\n:KUBE-A - [0:0]\nCOMMIT\n', 'a chain declared twice')
    refuses('*filter\nCOMMIT\n*nat\n:A - [0:0]\n-A A -j KUBE-SERVICES\nCOMMIT\n'
            '*filter\n:KUBE-SERVICES - [0:0]\nCOMMIT\n', 'a table given twice')
    refuses(':KUBE-A - [0:0]\n', 'a chain outside a table')

    for f in failures:
        print('selftest: ' + f)
    return 1 if failures else 0


if __name__ == '__main__':
    sys.exit(main())
