#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Checks that src/ is built in floors: no circle of files, and no arrow
running back up.

Usage:
    tools/layers.py [--objects BUILD] [--conf FILE] [--graph] [SRC]

A module is a file's path under SRC (default: src/ of this tree) without
its extension, so foo.c and foo.h are one module. Module A uses module B
when a file of A includes a header of B ("#include "dir/b.h"") or, given
--objects BUILD (a build directory holding BUILD/src/**/*.o), when A's
object refers to a symbol B's object defines (nm: a call, or a global).

The floors are listed in tools/layers.conf, top first; each line holds
patterns (fnmatch, on module paths), and a module is on the floor of the
first line with a pattern it matches. Every module must be on a floor. A
module may use modules of its own floor and of the floors below it: a use
of a module above is an arrow back up. And no module may reach itself by
uses: a circle, whether it crosses floors or stays on one.

The conf file's "[known circles]" section lists circles (the modules of
each, on one line) that are known and still to be taken apart: they are
reported, not failed; a circle not listed fails, and so does a listed one
that is gone (the list only shrinks, and says what is left).

A .c file that declares a function "extern" (instead of including the
header of the module that defines it) hides a use from the include graph:
that fails too.

--graph prints every use between floors (A -> B), for drawing.

Exit status: 0 when the tree is in floors, 1 when not, 2 when the check
could not run.
"""
import fnmatch
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
EXTERN_FN = re.compile(r"^extern\s[^;]*;", re.M)


def usage(msg):
    print("layers.py: %s" % msg, file=sys.stderr)
    sys.exit(2)


def read_conf(path):
    floors, known, section = [], [], "floors"
    for n, line in enumerate(open(path), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        if line == "[known circles]":
            section = "known"
        elif section == "floors":
            floors.append(line.split())
        else:
            known.append(frozenset(line.split()))
    if not floors:
        usage("%s lists no floor" % path)
    return floors, known


def modules(src):
    files = {}
    for d, _, names in os.walk(src):
        for f in names:
            if f.endswith((".c", ".h")):
                p = os.path.relpath(os.path.join(d, f), src)
                files[p] = p[:-2]
    return files


def include_uses(src, files, uses, why):
    externs = []
    for p, m in files.items():
        text = open(os.path.join(src, p), errors="replace").read()
        for h in INCLUDE.findall(text):
            if h in files and files[h] != m:
                uses.setdefault(m, set()).add(files[h])
                why.setdefault((m, files[h]), "%s includes %s" % (p, h))
        if p.endswith(".c"):
            externs += ["%s: %s" % (p, x.strip()) for x in EXTERN_FN.findall(text)]
    return externs


def object_uses(build, files, uses, why):
    # Only the objects of sources that exist: a build directory may keep
    # the object of a file since moved or removed.
    mods = {m for p, m in files.items() if p.endswith(".c")}
    defs, refs = {}, {}
    for d, _, names in os.walk(os.path.join(build, "src")):
        for f in names:
            if not f.endswith(".o"):
                continue
            m = os.path.relpath(os.path.join(d, f), os.path.join(build, "src"))[:-2]
            if m not in mods:
                continue
            out = subprocess.run(["nm", os.path.join(d, f)], capture_output=True, text=True)
            if out.returncode != 0:
                usage("nm %s failed: %s" % (f, out.stderr.strip()))
            refs[m] = set()
            for line in out.stdout.splitlines():
                w = line.split()
                if len(w) == 3 and w[1] in "TDBR":
                    defs[w[2]] = m
                elif len(w) == 2 and w[0] == "U":
                    refs[m].add(w[1])
    if not refs:
        usage("no object of src/ under %s/src" % build)
    for m, syms in refs.items():
        for s in sorted(syms):
            d = defs.get(s)
            if d and d != m:
                uses.setdefault(m, set()).add(d)
                why.setdefault((m, d), "%s uses %s()" % (m, s))


def floor_of(m, floors):
    for i, pats in enumerate(floors):
        if any(fnmatch.fnmatchcase(m, p) for p in pats):
            return i
    return None


def circles(uses):
    """The strongly connected components of more than one module."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        work = [(v, iter(sorted(uses.get(v, ()))))]
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        while work:
            node, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(uses.get(w, ())))))
                    break
                if w in on:
                    low[node] = min(low[node], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    comp = set()
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        comp.add(w)
                        if w == node:
                            break
                    if len(comp) > 1:
                        out.append(frozenset(comp))

    for v in sorted(uses):
        if v not in index:
            visit(v)
    return out


def main(argv):
    build, conf, graph, src = None, os.path.join(HERE, "layers.conf"), False, None
    args = list(argv)
    while args:
        a = args.pop(0)
        if a == "--objects" and args:
            build = args.pop(0)
        elif a == "--conf" and args:
            conf = args.pop(0)
        elif a == "--graph":
            graph = True
        elif a.startswith("-"):
            usage("unknown flag %s" % a)
        else:
            src = a
    src = src or os.path.join(os.path.dirname(HERE), "src")
    floors, known = read_conf(conf)
    files = modules(src)
    uses, why = {}, {}
    bad = ["%s: declares something extern; include the header of the module that defines it" % e
           for e in include_uses(src, files, uses, why)]
    if build:
        object_uses(build, files, uses, why)

    floor = {}
    for m in sorted(set(files.values())):
        floor[m] = floor_of(m, floors)
        if floor[m] is None:
            bad.append("%s: on no floor of %s" % (m, os.path.relpath(conf)))
    for a in sorted(uses):
        for b in sorted(uses[a]):
            fa, fb = floor.get(a), floor.get(b)
            if fa is not None and fb is not None and fb < fa:
                bad.append("%s -> %s: an arrow back up (floor %d to %d): %s" % (a, b, fa + 1, fb + 1, why[(a, b)]))
            if graph and fa != fb:
                print("%s -> %s" % (a, b))

    found = circles(uses)
    for c in found:
        edges = ["%s" % why[(a, b)] for a in sorted(c) for b in sorted(uses[a]) if b in c]
        if c in known:
            print("known circle (issue 34): %s" % " ".join(sorted(c)))
        else:
            bad.append("a circle: %s\n    %s" % (" ".join(sorted(c)), "\n    ".join(edges)))
    for c in known:
        if c not in found:
            bad.append("known circle gone (or changed): %s; take it off %s's list" %
                       (" ".join(sorted(c)), os.path.relpath(conf)))
    for b in bad:
        print(b)
    print("layers: %d modules on %d floors, %d uses; %d known circles, %d problems" %
          (len(floor), len(floors), sum(len(v) for v in uses.values()), len(known), len(bad)))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
