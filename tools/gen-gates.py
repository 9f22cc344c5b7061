#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Writes src/config/config-gates.c: every feature gate a kube-proxy binary
of one release knows, with the default, stage and lock it has there.

Usage:
    tools/gen-gates.py [--version 1.34] [--check FILE] [-o FILE] ROOT...

Each ROOT is searched for the Go files below, in this order of layouts:
a Kubernetes checkout (pkg/..., staging/src/k8s.io/MODULE/...), a Go vendor
directory's parent (vendor/k8s.io/MODULE/...), or a directory holding the
modules side by side (k8s.io/MODULE/... or MODULE/...). The first ROOT that
has a file wins, so give the checkout of the release first.

What kube-proxy registers in its one gate set (utilfeature.DefaultMutable-
FeatureGate), and so what this reads:

  component-base  featuregate/feature_gate.go     AllAlpha, AllBeta
  kubernetes      pkg/features/kube_features.go   the versioned table, which
                  also relists the generic apiserver, apiextensions,
                  controller-manager and zpages gates it depends on
  apiserver       pkg/features/kube_features.go   registered by its init()
  apiextensions-apiserver  pkg/features/kube_features.go   likewise
  component-base  zpages/features                 registered by the two above
  component-base  logs/api/v1                     cmd/kube-proxy/app/server.go's init()
  component-base  metrics/features                likewise
  client-go       features/known_features.go      added through pkg/features'
                                                  client adapter (unversioned)

A gate listed twice must carry the same specs (upstream's AddVersioned
refuses anything else), and this script fails if it does not. The effective
spec of a gate at the release is the last one whose version is not later
than it; a gate with none is PRE-ALPHA there (upstream refuses to set it).

--check FILE compares FILE with what would be written and exits 1 if they
differ, so the checked-in table can be verified against a new checkout.
"""

import argparse
import os
import re
import sys

STAGES = {
    "Alpha": "CONFIG_GATE_ALPHA",
    "Beta": "CONFIG_GATE_BETA",
    "GA": "CONFIG_GATE_GA",
    "Deprecated": "CONFIG_GATE_DEPRECATED",
    "PreAlpha": "CONFIG_GATE_PRE_ALPHA",
}

# (origin label, module, path in the module, map variable or None for the
# map returned by featureGates(), versioned?)
SOURCES = [
    ("component-base", "k8s.io/component-base", "featuregate/feature_gate.go", "defaultFeatures", True),
    ("kubernetes", "k8s.io/kubernetes", "pkg/features/kube_features.go",
     "defaultVersionedKubernetesFeatureGates", True),
    ("apiserver", "k8s.io/apiserver", "pkg/features/kube_features.go",
     "defaultVersionedKubernetesFeatureGates", True),
    ("apiextensions-apiserver", "k8s.io/apiextensions-apiserver", "pkg/features/kube_features.go",
     "defaultVersionedKubernetesFeatureGates", True),
    ("component-base/zpages", "k8s.io/component-base", "zpages/features/kube_features.go", None, True),
    ("component-base/logs", "k8s.io/component-base", "logs/api/v1/kube_features.go", None, True),
    ("component-base/metrics", "k8s.io/component-base", "metrics/features/kube_features.go", None, True),
    ("client-go", "k8s.io/client-go", "features/known_features.go", "defaultKubernetesFeatureGates", False),
]

# Package aliases pkg/features uses for keys it relists from other modules,
# mapped to the (module, path) whose constants name them.
ALIASES = {
    "genericfeatures": ("k8s.io/apiserver", "pkg/features/kube_features.go"),
    "apiextensionsfeatures": ("k8s.io/apiextensions-apiserver", "pkg/features/kube_features.go"),
    "kcmfeatures": ("k8s.io/controller-manager", "pkg/features/kube_features.go"),
    "zpagesfeatures": ("k8s.io/component-base", "zpages/features/kube_features.go"),
    "clientfeatures": ("k8s.io/client-go", "features/known_features.go"),
}


class GenError(Exception):
    pass


def find(roots, module, path):
    for root in roots:
        cands = []
        if module == "k8s.io/kubernetes":
            cands.append(os.path.join(root, path))
        cands += [
            os.path.join(root, "staging/src", module, path),
            os.path.join(root, "vendor", module, path),
            os.path.join(root, module, path),
            os.path.join(root, module.split("/", 1)[1], path),
        ]
        for c in cands:
            if os.path.isfile(c):
                return c
    raise GenError("%s/%s not found under %s" % (module, path, ", ".join(roots)))


def strip_comments(src):
    """Go source without comments; string literals are kept as they are."""
    out = []
    i, n = 0, len(src)
    while i < n:
        c = src[i]
        if c == '"' or c == '`':
            j = i + 1
            while j < n and src[j] != c:
                j += 2 if c == '"' and src[j] == "\\" else 1
            out.append(src[i:j + 1])
            i = j + 1
        elif src.startswith("//", i):
            j = src.find("\n", i)
            i = n if j < 0 else j
        elif src.startswith("/*", i):
            j = src.find("*/", i + 2)
            if j < 0:
                raise GenError("unterminated comment")
            i = j + 2
        else:
            out.append(c)
            i += 1
    return "".join(out)


# Name Feature = "X", Name featuregate.Feature = "X", Name = "X" and
# Name = featuregate.Feature("X") all occur.
CONST_RE = re.compile(r'^\s*(\w+)\s+(?:(?:featuregate\.)?Feature\s*)?='
                      r'\s*(?:(?:featuregate\.)?Feature\(\s*)?"([^"]*)"', re.M)


def constants(src):
    return {m.group(1): m.group(2) for m in CONST_RE.finditer(src)}


def braced(src, start):
    """The text between the brace at start and its match."""
    if src[start] != "{":
        raise GenError("expected { at offset %d" % start)
    depth = 0
    for i in range(start, len(src)):
        if src[i] == "{":
            depth += 1
        elif src[i] == "}":
            depth -= 1
            if depth == 0:
                return src[start + 1:i]
    raise GenError("unbalanced braces")


def map_body(src, var):
    if var:
        m = re.search(r"\b%s\s*=\s*map\[[\w.]+\][\w.]+\s*\{" % re.escape(var), src)
    else:
        m = re.search(r"func featureGates\(\)[^{]*\{\s*return\s+map\[[\w.]+\][\w.]+\s*\{", src)
    if not m:
        raise GenError("no map %s" % (var or "in featureGates()"))
    return braced(src, m.end() - 1)


def split_top(body):
    """Splits a composite literal's body at its top-level commas."""
    items, depth, cur = [], 0, []
    for c in body:
        if c in "{(":
            depth += 1
        elif c in "})":
            depth -= 1
        if c == "," and depth == 0:
            items.append("".join(cur).strip())
            cur = []
        else:
            cur.append(c)
    if "".join(cur).strip():
        items.append("".join(cur).strip())
    return [i for i in items if i]


def parse_spec(text, versioned):
    fields = {}
    for item in split_top(text):
        k, _, v = item.partition(":")
        fields[k.strip()] = v.strip()
    unknown = set(fields) - {"Version", "Default", "PreRelease", "LockToDefault"}
    if unknown:
        raise GenError("unknown spec fields %s in {%s}" % (sorted(unknown), text))
    spec = {}
    if versioned:
        v = fields.get("Version", "")
        m = re.fullmatch(r'version\.MustParse\("(\d+)\.(\d+)"\)', v) or \
            re.fullmatch(r"version\.MajorMinor\((\d+),\s*(\d+)\)", v)
        if not m:
            raise GenError("cannot read version %r" % v)
        spec["version"] = (int(m.group(1)), int(m.group(2)))
    else:
        spec["version"] = (0, 0)        # featuregate's Add() gives 0.0
    for k, key in (("Default", "default"), ("LockToDefault", "lock")):
        v = fields.get(k, "false")
        if v not in ("true", "false"):
            raise GenError("cannot read %s %r" % (k, v))
        spec[key] = v == "true"
    pre = fields.get("PreRelease", "")
    pre = pre.split(".")[-1]
    if pre not in STAGES:
        raise GenError("cannot read PreRelease %r" % fields.get("PreRelease"))
    spec["stage"] = pre
    return spec


def parse_map(body, versioned, resolve):
    gates = {}
    for entry in split_top(body):
        key, _, value = entry.partition(":")
        name = resolve(key.strip())
        value = value.strip()
        if versioned:
            inner = braced(value, 0)
            specs = [parse_spec(braced(s, 0), True) for s in split_top(inner)]
        else:
            specs = [parse_spec(braced(value, 0), False)]
        if not specs:
            raise GenError("gate %s has no specs" % name)
        if name in gates:
            raise GenError("gate %s listed twice in one map" % name)
        gates[name] = specs
    return gates


def load(roots):
    texts = {}

    def text(module, path):
        if (module, path) not in texts:
            fn = find(roots, module, path)
            with open(fn, encoding="utf-8") as f:
                texts[(module, path)] = (fn, strip_comments(f.read()))
        return texts[(module, path)][1]

    merged, origin, used = {}, {}, []
    for label, module, path, var, versioned in SOURCES:
        src = text(module, path)
        used.append(texts[(module, path)][0])
        local = constants(src)

        def resolve(key, local=local):
            if "." in key:
                alias, ident = key.split(".", 1)
                if alias not in ALIASES:
                    raise GenError("unknown package alias %s" % alias)
                consts = constants(text(*ALIASES[alias]))
            else:
                consts, ident = local, key
            if ident not in consts:
                raise GenError("no constant %s" % key)
            return consts[ident]

        for name, specs in parse_map(map_body(src, var), versioned, resolve).items():
            if name in merged and merged[name] != specs:
                raise GenError("gate %s has different specs in %s and %s" % (name, origin[name], label))
            if name not in merged:
                merged[name], origin[name] = specs, label
    return merged, origin, used


def effective(specs, release):
    for spec in reversed(specs):
        if spec["version"] <= release:
            return spec
    return {"version": (0, 0), "default": False, "lock": False, "stage": "PreAlpha"}


def render(merged, origin, release, provenance):
    rel = "%d.%d" % release
    lines = [
        "/* SPDX-License-Identifier: Apache-2.0 */",
        "/*",
        " * Every feature gate kube-proxy %s knows, with its %s default, stage and" % (rel, rel),
        " * lock, sorted by name (strcmp). Written by tools/gen-gates.py; do not edit by",
        " * hand: run it again over the release's sources (see the script), or check",
        " * this file against them with --check.",
        " *",
    ]
    lines += [" * " + p for p in provenance]
    lines += [
        " */",
        '#include "config/config-gates.h"',
        "",
        "const struct config_gate config_gates[] = {",
    ]
    for name in sorted(merged):
        s = effective(merged[name], release)
        lines.append('        { "%s", %s, %s, %s }, /* %s */' % (
            name, STAGES[s["stage"]], "true" if s["default"] else "false",
            "true" if s["lock"] else "false", origin[name]))
    lines += [
        "};",
        "",
        "const size_t config_gates_count = sizeof config_gates / sizeof config_gates[0];",
        'const char config_gates_release[] = "%s";' % rel,
        "",
    ]
    return "\n".join(lines)


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("roots", nargs="+", metavar="ROOT")
    ap.add_argument("--version", default="1.34", help="the release, MAJOR.MINOR (default 1.34)")
    ap.add_argument("--provenance", action="append", default=[],
                    help="a line for the header saying which sources were read (repeatable)")
    ap.add_argument("-o", "--output", help="write here instead of stdout")
    ap.add_argument("--check", metavar="FILE", help="compare FILE with the output instead of writing")
    a = ap.parse_args(argv)
    m = re.fullmatch(r"(\d+)\.(\d+)", a.version)
    if not m:
        ap.error("--version must be MAJOR.MINOR")
    release = (int(m.group(1)), int(m.group(2)))
    try:
        merged, origin, used = load(a.roots)
    except (GenError, OSError) as e:
        print("gen-gates: %s" % e, file=sys.stderr)
        return 2
    for fn in used:
        print("gen-gates: read %s" % fn, file=sys.stderr)
    out = render(merged, origin, release, a.provenance or ["Sources: " + ", ".join(a.roots)])
    if a.check:
        with open(a.check, encoding="utf-8") as f:
            have = f.read()
        # The header's provenance lines may differ; the table may not.
        table = lambda s: s[s.index("const struct config_gate"):]
        if table(have) != table(out):
            print("gen-gates: %s differs from the sources' table" % a.check, file=sys.stderr)
            return 1
        print("gen-gates: %s matches (%d gates)" % (a.check, len(merged)), file=sys.stderr)
        return 0
    if a.output:
        with open(a.output, "w", encoding="utf-8") as f:
            f.write(out)
    else:
        sys.stdout.write(out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
