#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""tools/gen-gates.py over a small made-up source tree in each of the
layouts it reads (a Kubernetes checkout, a vendor directory), with the Go
forms the real files use: typed, untyped and converted constants, keys
qualified by a package alias, MajorMinor versions, braces in comments,
relisted gates, a gate that starts after the release. Also: conflicting
relistings are refused, and --check tells a stale table from a current one.

Usage: python3 tests/gates/test_gen_gates.py
"""

import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
GEN = os.path.join(HERE, "..", "..", "tools", "gen-gates.py")

FEATUREGATE = """package featuregate
const (
	allAlphaGate Feature = "AllAlpha"
	allBetaGate Feature = "AllBeta"
)
var (
	defaultFeatures = map[Feature]VersionedSpecs{
		allAlphaGate: {{Default: false, PreRelease: Alpha, Version: version.MajorMinor(0, 0)}},
		allBetaGate:  {{Default: false, PreRelease: Beta, Version: version.MajorMinor(0, 0)}},
	}
)
"""

KUBE = """package features
import (
	genericfeatures "k8s.io/apiserver/pkg/features"
	zpagesfeatures "k8s.io/component-base/zpages/features"
)
const (
	// Typed { with a brace in a comment }
	Widget featuregate.Feature = "Widget"
	Renamed featuregate.Feature = "OtherName"
	Untyped = "Untyped"
	Converted = featuregate.Feature("Converted")
	Later featuregate.Feature = "Later"
)
var defaultVersionedKubernetesFeatureGates = map[featuregate.Feature]featuregate.VersionedSpecs{
	Widget: {
		{Version: version.MustParse("1.30"), Default: false, PreRelease: featuregate.Alpha},
		{Version: version.MustParse("1.34"), Default: true, PreRelease: featuregate.Beta}, // on
		{Version: version.MustParse("1.36"), Default: true, PreRelease: featuregate.GA, LockToDefault: true},
	},
	Renamed: {
		{Version: version.MustParse("1.0"), Default: true, PreRelease: featuregate.GA},
		{Version: version.MustParse("1.31"), Default: false, PreRelease: featuregate.Deprecated, LockToDefault: true},
	},
	Untyped: {
		{Version: version.MustParse("1.0"), Default: true, PreRelease: featuregate.Beta},
	},
	Converted: {
		{Version: version.MustParse("1.20"), Default: true, LockToDefault: true, PreRelease: featuregate.GA},
	},
	Later: {
		{Version: version.MustParse("1.35"), Default: false, PreRelease: featuregate.Alpha},
	},
	genericfeatures.Shared: {
		{Version: version.MustParse("1.8"), Default: false, PreRelease: featuregate.Alpha},
	},
	zpagesfeatures.Pages: {
		{Version: version.MustParse("1.32"), Default: false, PreRelease: featuregate.Alpha},
	},
}
"""

GENERIC = """package features
const (
	Shared featuregate.Feature = "Shared"
	ServerOnly featuregate.Feature = "ServerOnly"
)
var defaultVersionedKubernetesFeatureGates = map[featuregate.Feature]featuregate.VersionedSpecs{
	Shared: {
		{Version: version.MustParse("1.8"), Default: false, PreRelease: featuregate.Alpha},
	},
	ServerOnly: {
		{Version: version.MustParse("1.33"), Default: true, PreRelease: featuregate.Beta},
	},
}
"""

EXTENSIONS = """package features
var defaultVersionedKubernetesFeatureGates = map[featuregate.Feature]featuregate.VersionedSpecs{
}
"""

ZPAGES = """package features
const (
	Pages featuregate.Feature = "Pages"
)
func featureGates() map[featuregate.Feature]featuregate.VersionedSpecs {
	return map[featuregate.Feature]featuregate.VersionedSpecs{
		Pages: {
			{Version: version.MustParse("1.32"), Default: false, PreRelease: featuregate.Alpha},
		},
	}
}
"""

LOGS = """package v1
const (
	Logs featuregate.Feature = "Logs"
)
func featureGates() map[featuregate.Feature]featuregate.VersionedSpecs {
	return map[featuregate.Feature]featuregate.VersionedSpecs{
		Logs: {
			{Version: version.MustParse("1.24"), Default: true, PreRelease: featuregate.Beta},
		},
	}
}
"""

METRICS = """package features
const (
	Metrics featuregate.Feature = "Metrics"
)
func featureGates() map[featuregate.Feature]featuregate.VersionedSpecs {
	return map[featuregate.Feature]featuregate.VersionedSpecs{
		Metrics: {
			{Version: version.MustParse("1.26"), Default: false, PreRelease: featuregate.Alpha},
			{Version: version.MustParse("1.32"), Default: true, PreRelease: featuregate.GA, LockToDefault: true},
		},
	}
}
"""

CLIENT = """package features
const (
	Client Feature = "Client"
)
var defaultKubernetesFeatureGates = map[Feature]FeatureSpec{
	Client: {Default: false, PreRelease: Beta},
}
"""

FILES = {
    ("k8s.io/component-base", "featuregate/feature_gate.go"): FEATUREGATE,
    ("k8s.io/kubernetes", "pkg/features/kube_features.go"): KUBE,
    ("k8s.io/apiserver", "pkg/features/kube_features.go"): GENERIC,
    ("k8s.io/apiextensions-apiserver", "pkg/features/kube_features.go"): EXTENSIONS,
    ("k8s.io/component-base", "zpages/features/kube_features.go"): ZPAGES,
    ("k8s.io/component-base", "logs/api/v1/kube_features.go"): LOGS,
    ("k8s.io/component-base", "metrics/features/kube_features.go"): METRICS,
    ("k8s.io/client-go", "features/known_features.go"): CLIENT,
}

# What the tree above means at 1.34, by hand.
WANT = [
    '{ "AllAlpha", CONFIG_GATE_ALPHA, false, false }, /* component-base */',
    '{ "AllBeta", CONFIG_GATE_BETA, false, false }, /* component-base */',
    '{ "Client", CONFIG_GATE_BETA, false, false }, /* client-go */',
    '{ "Converted", CONFIG_GATE_GA, true, true }, /* kubernetes */',
    '{ "Later", CONFIG_GATE_PRE_ALPHA, false, false }, /* kubernetes */',
    '{ "Logs", CONFIG_GATE_BETA, true, false }, /* component-base/logs */',
    '{ "Metrics", CONFIG_GATE_GA, true, true }, /* component-base/metrics */',
    '{ "OtherName", CONFIG_GATE_DEPRECATED, false, true }, /* kubernetes */',
    '{ "Pages", CONFIG_GATE_ALPHA, false, false }, /* kubernetes */',
    '{ "ServerOnly", CONFIG_GATE_BETA, true, false }, /* apiserver */',
    '{ "Shared", CONFIG_GATE_ALPHA, false, false }, /* kubernetes */',
    '{ "Untyped", CONFIG_GATE_BETA, true, false }, /* kubernetes */',
    '{ "Widget", CONFIG_GATE_BETA, true, false }, /* kubernetes */',
]


def write_tree(root, layout, files=FILES):
    for (module, path), text in files.items():
        if layout == "checkout":
            base = root if module == "k8s.io/kubernetes" else os.path.join(root, "staging/src", module)
        else:
            base = os.path.join(root, "vendor", module)
        fn = os.path.join(base, path)
        os.makedirs(os.path.dirname(fn), exist_ok=True)
        with open(fn, "w") as f:
            f.write(text)


def run(*args):
    return subprocess.run([sys.executable, GEN] + list(args), capture_output=True, text=True)


def table(out):
    return [l.strip() for l in out.splitlines() if l.strip().startswith('{ "')]


class GenGates(unittest.TestCase):
    def test_layouts(self):
        for layout in ("checkout", "vendor"):
            with tempfile.TemporaryDirectory() as root:
                write_tree(root, layout)
                p = run(root)
                self.assertEqual(p.returncode, 0, p.stderr)
                self.assertEqual(table(p.stdout), WANT, layout)
                self.assertIn('const char config_gates_release[] = "1.34";', p.stdout)

    def test_release(self):
        with tempfile.TemporaryDirectory() as root:
            write_tree(root, "vendor")
            p = run("--version", "1.36", root)
            self.assertEqual(p.returncode, 0, p.stderr)
            got = table(p.stdout)
            self.assertIn('{ "Widget", CONFIG_GATE_GA, true, true }, /* kubernetes */', got)
            self.assertIn('{ "Later", CONFIG_GATE_ALPHA, false, false }, /* kubernetes */', got)

    def test_conflict(self):
        files = dict(FILES)
        files[("k8s.io/apiserver", "pkg/features/kube_features.go")] = GENERIC.replace(
            'Default: false, PreRelease: featuregate.Alpha}', 'Default: true, PreRelease: featuregate.Alpha}', 1)
        with tempfile.TemporaryDirectory() as root:
            write_tree(root, "vendor", files)
            p = run(root)
            self.assertEqual(p.returncode, 2)
            self.assertIn("gate Shared has different specs", p.stderr)

    def test_missing_file(self):
        files = dict(FILES)
        del files[("k8s.io/client-go", "features/known_features.go")]
        with tempfile.TemporaryDirectory() as root:
            write_tree(root, "vendor", files)
            p = run(root)
            self.assertEqual(p.returncode, 2)
            self.assertIn("k8s.io/client-go/features/known_features.go not found", p.stderr)

    def test_check(self):
        with tempfile.TemporaryDirectory() as root:
            write_tree(root, "vendor")
            out = os.path.join(root, "gates.c")
            self.assertEqual(run("-o", out, "--provenance", "test tree", root).returncode, 0)
            # The header's provenance may differ; the table may not.
            p = run("--check", out, "--provenance", "another", root)
            self.assertEqual(p.returncode, 0, p.stderr)
            with open(out) as f:
                text = f.read()
            with open(out, "w") as f:
                f.write(text.replace('"Widget", CONFIG_GATE_BETA, true', '"Widget", CONFIG_GATE_BETA, false'))
            p = run("--check", out, root)
            self.assertEqual(p.returncode, 1)
            self.assertIn("differs", p.stderr)


if __name__ == "__main__":
    unittest.main()
