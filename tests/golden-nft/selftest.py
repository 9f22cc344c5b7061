#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Self-test of normalize.py and nftname.py (run by run.sh before the scenarios).

  - every <scenario>/expected.nft is a normalisation fixed point;
  - shuffled versions of upstream-overall/expected.nft (rules of one chain
    keeping their relative order), with blank/comment lines and zero-padded
    marks added, normalise back to it;
  - malformed or contract-breaking inputs are refused;
  - nftname.py reproduces the name examples of reference section 5.2;
  - generated scenarios (<scenario>/gen.py) match their committed files.
"""
import glob
import os
import random
import subprocess
import sys
import tempfile

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
import normalize  # noqa: E402
import nftname  # noqa: E402

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)


for f in sorted(glob.glob(os.path.join(here, '*', 'expected.nft'))):
    text = open(f).read()
    try:
        check(normalize.normalize(text) == text, '%s is not a normalisation fixed point' % f)
    except normalize.NormalizeError as e:
        failures.append('%s does not normalise: %s' % (f, e))

overall = open(os.path.join(here, 'upstream-overall', 'expected.nft')).read()
lines = overall.splitlines()
rng = random.Random(1234)
for trial in range(20):
    # Shuffle, then put each chain's rules back into their original relative order.
    perm = lines[:]
    rng.shuffle(perm)
    rules = {}
    for l in lines:
        if l.startswith('add rule '):
            rules.setdefault(l.split(' ')[4], []).append(l)
    out = []
    for l in perm:
        if l.startswith('add rule '):
            out.append(rules[l.split(' ')[4]].pop(0))
        else:
            out.append(l)
        if rng.random() < 0.1:
            out.append(rng.choice(['', '# comment']))
    text = '\n'.join(out).replace('0x4000', '0x00004000') + '\n'
    try:
        check(normalize.normalize(text) == overall, 'shuffle %d does not normalise back' % trial)
    except normalize.NormalizeError as e:
        failures.append('shuffle %d refused: %s' % (trial, e))

T = 'add table ip kube-proxy { comment "rules for kube-proxy" ; }\n'
C = 'add chain ip kube-proxy a\n'
bad = {
    'flush': T + C + 'flush chain ip kube-proxy a\n',
    'delete': T + C + 'delete chain ip kube-proxy a\n',
    'undeclared rule chain': T + 'add rule ip kube-proxy a accept\n',
    'goto undeclared': T + C + 'add rule ip kube-proxy a goto b\n',
    'undeclared set ref': T + C + 'add rule ip kube-proxy a ip saddr @s accept\n',
    'undeclared element set': T + 'add element ip kube-proxy s { 1.2.3.4 }\n',
    'element goto undeclared': T + 'add map ip kube-proxy m { type inet_proto . inet_service : verdict ; }\n'
                               + 'add element ip kube-proxy m { tcp . 80 : goto x }\n',
    'two families': T + 'add chain ip6 kube-proxy a\n',
    'other table': T + 'add chain ip filter a\n',
    'no table': C,
    'chain twice': T + C + C,
    'garbage': T + 'COMMIT\n',
}
for what, text in bad.items():
    try:
        normalize.normalize(text)
        failures.append('accepted malformed input: ' + what)
    except normalize.NormalizeError:
        pass

for base, want in [('ns1/svc1/tcp/p80', 'ULMVA6XW'), ('ns2/svc2/tcp/p80', '42NFTM6N'),
                   ('ns3/svc3/tcp/p80', '4AT6LBPK'), ('ns4/svc4/tcp/p80', 'LAUZTJTB'),
                   ('ns5/svc5/tcp/p80', 'HVFWP5L3'), ('default/kubernetes/tcp/https', '2QRHZV4L'),
                   ('kube-system/kube-dns/udp/dns', 'FY5PMXPG'), ('ns1/svc1/tcp/', '6KJ5P52A'),
                   ('ns1/svc1/tcp/p80__10.180.0.1/80', '5OJB2KTY'),
                   ('ns5/svc5/tcp/p80__10.180.0.3/80', 'GTK6MW7G'),
                   ('ns1/svc1/tcp/p80__fd00.10.180..1/80', 'ZVRFLKHO')]:
    check(nftname.body(base) == want + '-' + base, 'nftname %s' % base)
check(len(nftname.body('x' * 300)) == 240 and nftname.body('x' * 300).endswith('...'), 'nftname truncation')

# Generated scenarios: the committed files are what gen.py writes.
for gen in sorted(glob.glob(os.path.join(here, '*', 'gen.py'))):
    d = os.path.dirname(gen)
    with tempfile.TemporaryDirectory() as tmp:
        r = subprocess.run([sys.executable, gen, tmp], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, universal_newlines=True)
        if r.returncode != 0:
            failures.append('%s failed: %s' % (gen, r.stdout.strip()))
            continue
        for f in sorted(os.listdir(tmp)):
            with open(os.path.join(tmp, f)) as a, open(os.path.join(d, f)) as b:
                check(a.read() == b.read(), '%s/%s differs from what gen.py writes'
                      % (os.path.basename(d), f))

for f in failures:
    print('selftest: ' + f)
sys.exit(1 if failures else 0)
