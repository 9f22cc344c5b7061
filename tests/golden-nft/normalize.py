#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Normalise an nft script the way upstream kube-proxy's nftables tests do.

Reads the script on stdin, writes the normalised form on stdout
(reference: docs/reference/nftables-mode.md, section 10.2):

  - empty lines and lines starting with '#' are dropped;
  - the lines are stably sorted by object type, with the precedence
    table > chain > rule > set > map > element, then by the object name
    (the fifth space-separated word: chain/set/map name); rules keep their
    insertion order within a chain; other lines of equal type and name are
    sorted as whole strings;
  - mark values are rewritten to the short form (0x00004000 -> 0x4000),
    because upstream's production text zero-pads the mark (Go "%#08x") and
    its tests inject the literal 0x4000.

It also checks the render contract (a first full sync: `add` commands only,
one table `kube-proxy` of one family, declared once) and that every rule's
chain, every element's set/map, every `jump`/`goto` target and every `@set`
reference is declared somewhere in the script. On any problem it prints one
message on stderr and exits 1, writing nothing on stdout.
"""
import re
import sys


class NormalizeError(Exception):
    pass


ORDER = {'table': 10, 'chain': 9, 'rule': 8, 'set': 7, 'map': 6, 'element': 5}
MARK_RE = re.compile(r'\b(mark (?:or|and|xor) )(0[xX][0-9a-fA-F]+)\b')
TARGET_RE = re.compile(r'\b(?:jump|goto) ([^\s,{}]+)')
SETREF_RE = re.compile(r'@([^\s,{}]+)')


def short_mark(m):
    return m.group(1) + hex(int(m.group(2), 16))


def parse(text):
    """Returns the list of (words, line) of the significant lines, checked."""
    out = []
    family = None
    declared = {'table': 0, 'chain': set(), 'set': set(), 'map': set()}
    for lineno, line in enumerate(text.split('\n'), 1):
        if line == '' or line.startswith('#'):
            continue
        where = 'line %d: %s' % (lineno, line)
        w = line.split(' ')
        if w[0] != 'add':
            raise NormalizeError('not an add command (a first full sync adds only), ' + where)
        if len(w) < 4 or w[1] not in ORDER:
            raise NormalizeError('unexpected ' + where)
        if w[2] not in ('ip', 'ip6') or w[3] != 'kube-proxy':
            raise NormalizeError('not table ip/ip6 kube-proxy, ' + where)
        if family is None:
            family = w[2]
        elif w[2] != family:
            raise NormalizeError('two families in one script, ' + where)
        if w[1] != 'table' and len(w) < 5:
            raise NormalizeError('no object name, ' + where)
        line = MARK_RE.sub(short_mark, line)
        if w[1] == 'table':
            declared['table'] += 1
            if declared['table'] > 1:
                raise NormalizeError('table added twice, ' + where)
        elif w[1] in ('chain', 'set', 'map'):
            if w[4] in declared[w[1]]:
                raise NormalizeError('%s added twice, %s' % (w[1], where))
            declared[w[1]].add(w[4])
        out.append((w, line, where))
    if out and declared['table'] == 0:
        raise NormalizeError('no add table line')
    for w, line, where in out:
        if w[1] == 'rule' and w[4] not in declared['chain']:
            raise NormalizeError('rule for undeclared chain, ' + where)
        if w[1] == 'element' and w[4] not in declared['set'] | declared['map']:
            raise NormalizeError('element of undeclared set/map, ' + where)
        if w[1] in ('rule', 'element'):
            for t in TARGET_RE.findall(line):
                if t not in declared['chain']:
                    raise NormalizeError('jump/goto to undeclared chain %s, %s' % (t, where))
            for s in SETREF_RE.findall(line):
                if s not in declared['set'] | declared['map']:
                    raise NormalizeError('reference to undeclared set/map @%s, %s' % (s, where))
    return [(w, line) for w, line, _ in out]


def sort_key(item):
    w, line = item
    typ = w[1]
    if typ == 'table':
        return (-ORDER[typ], '', '')
    if typ == 'rule':
        # equal keys: sorted() is stable, so rules keep insertion order
        return (-ORDER[typ], w[4], '')
    return (-ORDER[typ], w[4], line)


def normalize(text):
    items = parse(text)
    return ''.join(line + '\n' for _, line in sorted(items, key=sort_key))


def main():
    try:
        sys.stdout.write(normalize(sys.stdin.read()))
    except NormalizeError as e:
        sys.stderr.write('normalize: %s\n' % e)
        return 1
    return 0


if __name__ == '__main__':
    sys.exit(main())
