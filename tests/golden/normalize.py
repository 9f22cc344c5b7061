#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Normalise iptables-restore text the way upstream kube-proxy's tests do.

Reads restore text on stdin, writes the normalised form on stdout
(reference: docs/reference/iptables-mode.md, section 13.2):

  - tables sorted by name (filter before nat);
  - within a table: the chain lines, ordered KUBE-NODEPORTS, KUBE-SERVICES,
    other KUBE-* alphabetically, then the other chains alphabetically;
    then the rules grouped per chain in that same order, keeping generation
    order within a chain, except that the rules of KUBE-NODEPORTS and
    KUBE-SERVICES (both tables) are stably sorted by the service name in
    their comment (the comment up to the first space or colon), with nat
    KUBE-SERVICES' "must be the last rule" rule(s) kept last;
    then the -X lines; then COMMIT;
  - mark values are rewritten to the short form iptables-save prints
    (0x00004000 -> 0x4000), because upstream's production text zero-pads
    the mark and its tests do not.

It also checks that every rule's chain and every -j/-g target that is a
KUBE-* chain is declared in the same table. On any problem it prints one
message on stderr and exits 1, writing nothing on stdout.
"""
import re
import sys


class NormalizeError(Exception):
    pass


MARK_RE = re.compile(r'(--(?:mark|or-mark|xor-mark|and-mark|set-mark|set-xmark) )'
                     r'(0[xX][0-9a-fA-F]+)(?:/(0[xX][0-9a-fA-F]+))?')
COMMENT_RE = re.compile(r' --comment (?:"([^"]*)"|(\S+))')
TARGET_RE = re.compile(r' -[jg] (\S+)')
LAST_RULE = 'must be the last rule'


def short_mark(m):
    out = m.group(1) + hex(int(m.group(2), 16))
    if m.group(3) is not None:
        out += '/' + hex(int(m.group(3), 16))
    return out


def comment_of(rule):
    m = COMMENT_RE.search(rule)
    if not m:
        return ''
    return m.group(1) if m.group(1) is not None else m.group(2)


def service_key(rule):
    return re.split(r'[ :]', comment_of(rule), maxsplit=1)[0]


def chain_order(name):
    if name == 'KUBE-NODEPORTS':
        return (0, name)
    if name == 'KUBE-SERVICES':
        return (1, name)
    if name.startswith('KUBE-'):
        return (2, name)
    return (3, name)


def parse(text):
    """Returns {table: {'chains': {name: decl_line}, 'rules': {name: [rule]},
    'deleted': [name]}}."""
    tables = {}
    cur = None
    for lineno, line in enumerate(text.split('\n'), 1):
        if line == '' or line.startswith('#'):
            continue
        where = 'line %d: %s' % (lineno, line)
        if line.startswith('*'):
            if cur is not None:
                raise NormalizeError('table %s not committed before %s' % (cur, where))
            cur = line[1:]
            if cur in tables:
                raise NormalizeError('duplicate table, ' + where)
            tables[cur] = {'chains': {}, 'rules': {}, 'deleted': []}
            continue
        if cur is None:
            raise NormalizeError('not inside a table, ' + where)
        t = tables[cur]
        if line == 'COMMIT':
            cur = None
        elif line.startswith(':'):
            name = line[1:].split(' ', 1)[0]
            if name in t['chains']:
                raise NormalizeError('chain declared twice, ' + where)
            t['chains'][name] = line
            t['rules'][name] = []
        elif line.startswith('-A '):
            name = line.split(' ', 2)[1]
            if name not in t['chains']:
                raise NormalizeError('rule for undeclared chain, ' + where)
            t['rules'][name].append(MARK_RE.sub(short_mark, line))
        elif line.startswith('-X '):
            t['deleted'].append(line.split(' ', 2)[1])
        else:
            raise NormalizeError('unexpected ' + where)
    if cur is not None:
        raise NormalizeError('table %s has no COMMIT' % cur)
    for tname, t in tables.items():
        for rules in t['rules'].values():
            for rule in rules:
                m = TARGET_RE.search(rule)
                if m and m.group(1).startswith('KUBE-') and m.group(1) not in t['chains']:
                    raise NormalizeError('%s: jump to undeclared chain %s: %s'
                                         % (tname, m.group(1), rule))
    return tables


def normalize(text):
    tables = parse(text)
    out = []
    for tname in sorted(tables):
        t = tables[tname]
        chains = sorted(t['chains'], key=chain_order)
        out.append('*' + tname)
        out.extend(t['chains'][c] for c in chains)
        for c in chains:
            rules = t['rules'][c]
            if c in ('KUBE-NODEPORTS', 'KUBE-SERVICES'):
                # sorted() is stable: rules of one service keep their order.
                is_last = [tname == 'nat' and LAST_RULE in comment_of(r) for r in rules]
                last = [r for r, l in zip(rules, is_last) if l]
                rest = [r for r, l in zip(rules, is_last) if not l]
                rules = sorted(rest, key=service_key) + last
            out.extend(rules)
        for c in sorted(t['deleted'], key=chain_order):
            out.append('-X ' + c)
        out.append('COMMIT')
    return ''.join(line + '\n' for line in out)


def main():
    try:
        sys.stdout.write(normalize(sys.stdin.read()))
    except NormalizeError as e:
        sys.stderr.write('normalize: %s\n' % e)
        return 1
    return 0


if __name__ == '__main__':
    sys.exit(main())
