#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Checks kproxy's one out-of-memory policy (docs/architecture.md,
Conventions; util/alloc.h): code allocates with xmalloc(), xcalloc(),
xrealloc(), xstrdup() and xstrndup(), which abort, and checks no
allocation. A call of malloc(), calloc(), realloc(), strdup() or strndup()
itself is the other policy (check and return -ENOMEM).

The files written before the policy hold such calls still; how many each
holds is in tools/alloc-known.txt ("path count" a line), which can only
shrink: a file with more calls than listed, or listed with more than it
has (lower the count, or drop the line at 0), is an error. So no new code
checks an allocation, and what is left is listed.

Usage: tools/check-alloc.py [--known FILE] [--root DIR]
Exit status 1 when anything is wrong, 2 when the check cannot run.
"""
import importlib.util
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("check_sizes", os.path.join(HERE, "check-sizes.py"))
check_sizes = importlib.util.module_from_spec(spec)
spec.loader.exec_module(check_sizes)

CALL = re.compile(r"(?<![\w.>])(malloc|calloc|realloc|strdup|strndup)\s*\(")
# The policy's own definitions.
EXEMPT = {"src/util/alloc.h"}


def calls(text):
    """How many raw allocator calls text's code (not its comments or strings) makes."""
    code, _ = check_sizes.blank_code(text)
    return len(CALL.findall(code))


def counts(root):
    """{path relative to root: calls} for every .c and .h under root/src with any."""
    out = {}
    for path in check_sizes.source_files([os.path.join(root, "src")]):
        rel = os.path.relpath(path, root)
        if rel in EXEMPT:
            continue
        with open(path, encoding="utf-8") as f:
            n = calls(f.read())
        if n:
            out[rel] = n
    return out


def read_known(path):
    known = {}
    with open(path, encoding="utf-8") as f:
        for i, line in enumerate(f, 1):
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            name, _, n = line.partition(" ")
            if not n.strip().isdigit():
                raise ValueError("%s:%d: want 'path count'" % (path, i))
            known[name] = int(n)
    return known


def check(have, known):
    """The problems, one line each."""
    problems = []
    for path in sorted(set(have) | set(known)):
        h, k = have.get(path, 0), known.get(path, 0)
        if h > k:
            problems.append("%s: %d calls of malloc/calloc/realloc/strdup/strndup, %d allowed: use util/alloc.h's "
                            "x allocators" % (path, h, k))
        elif h < k:
            problems.append("%s: %d calls, alloc-known.txt says %d: lower it (the list only shrinks)" % (path, h, k))
    return problems


def main(argv):
    root = os.path.dirname(HERE)
    known_path = os.path.join(HERE, "alloc-known.txt")
    args = list(argv)
    while args:
        a = args.pop(0)
        if a == "--known" and args:
            known_path = args.pop(0)
        elif a == "--root" and args:
            root = args.pop(0)
        else:
            print(__doc__.strip().splitlines()[-2], file=sys.stderr)
            return 2
    try:
        known = read_known(known_path)
        have = counts(root)
    except (OSError, ValueError) as e:
        print("check-alloc: %s" % e, file=sys.stderr)
        return 2
    problems = check(have, known)
    for p in problems:
        print(p)
    print("check-alloc: %d raw allocator calls in %d files left, %d problems"
          % (sum(have.values()), len(have), len(problems)))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
