# SPDX-License-Identifier: Apache-2.0
"""One truth about the command line (issue 32): every place that names the
modes names those that exist; `kproxy render` refuses what it cannot honour
and what the daemon refuses; --version speaks upstream's format; exit codes
are upstream's (1 for any error of the daemon's command line); the version
claims agree; nothing points outside the repository; a build that lacks a
dependency says which package.

Run: KPROXY_BUILD=build python3 tests/docs/test_cli.py [-v]
The daemon's refusals run in a network namespace of their own (unshare -n,
root); the rest needs no privileges.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
BUILD = os.path.abspath(os.path.join(ROOT, os.environ.get("KPROXY_BUILD", "build")))
KPROXY = os.path.join(BUILD, "kproxy")
# The modes kproxy runs in (src/proxy/backends.c's table); ipvs is parsed
# and refused.
MODES = ("iptables", "nftables", "userspace")
STATE = os.path.join(ROOT, "examples", "cluster.yaml")


def read(path):
    with open(os.path.join(ROOT, path)) as f:
        return f.read()


def kube_version():
    m = re.search(r'#define CONFIG_KUBE_VERSION "(v(\d+)\.(\d+)\.\d+)"', read("src/config/config-enums.h"))
    assert m, "CONFIG_KUBE_VERSION not found"
    return m.group(1), "%s.%s" % (m.group(2), m.group(3))


def run(*args, stdin=None, netns=False):
    cmd = ([KPROXY] + list(args))
    if netns:
        # Nothing the daemon might touch is the machine's; no API server is
        # reachable from there either.
        cmd = ["unshare", "-n", "env", "-u", "KUBERNETES_SERVICE_HOST", "-u", "KUBERNETES_SERVICE_PORT"] + cmd
    # errors="replace": --output netlink prints bytes.
    return subprocess.run(cmd, input=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          errors="replace", timeout=30)


def tracked_files():
    out = subprocess.run(["git", "-C", ROOT, "ls-files"], stdout=subprocess.PIPE, text=True, check=True).stdout
    for f in out.split():
        if f.startswith("tests/fuzz/corpus/") or f.endswith((".png", ".json", ".tar")):
            continue
        path = os.path.join(ROOT, f)
        if os.path.isfile(path):
            yield f


class Modes(unittest.TestCase):
    def assertNamesModes(self, text, where):
        for m in MODES:
            self.assertRegex(text, r"\b%s\b" % m, "%s does not name %s mode:\n%s" % (where, m, text[:2000]))

    def test_help_names_every_mode(self):
        line = [l for l in run("--help").stdout.splitlines() if re.match(r"\s+--proxy-mode ", l)]
        self.assertEqual(len(line), 1)
        self.assertNamesModes(line[0], "--help's --proxy-mode")
        self.assertNamesModes(run("render", "--help").stdout.split("Flags")[0], "render --help's summary")

    def test_man_page_names_every_mode(self):
        page = subprocess.run([os.path.join(ROOT, "deploy", "manpage.sh"), KPROXY, "0"], stdout=subprocess.PIPE,
                              text=True, check=True).stdout
        description = page.split(".SH DESCRIPTION", 1)[1].split(".SH OPTIONS", 1)[0]
        self.assertNamesModes(description, "the man page's DESCRIPTION")
        self.assertIn(".SH \"EXIT STATUS\"", page)

    def test_errors_name_every_mode(self):
        for args in (("--proxy-mode", "IPTables"), ("--proxy-mode", "kernelspace")):
            p = run(*args)
            self.assertEqual(p.returncode, 1, p.stderr)
            self.assertNamesModes(p.stderr, " ".join(args))
            p = run("render", *args, STATE)
            self.assertEqual(p.returncode, 2, p.stderr)
            self.assertNamesModes(p.stderr, "render " + " ".join(args))
        with tempfile.NamedTemporaryFile("w", suffix=".yaml") as f:
            f.write("apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nmode: Iptables\n")
            f.flush()
            p = run("--config", f.name)
            self.assertEqual(p.returncode, 1, p.stderr)
            self.assertIn(f.name, p.stderr)
            self.assertNamesModes(p.stderr, "mode: in --config")

    @unittest.skipUnless(os.geteuid() == 0, "needs root for a network namespace")
    def test_ipvs_is_refused_naming_the_modes(self):
        p = run("--proxy-mode", "ipvs", "--master", "https://192.0.2.1:6443", "--hostname-override", "n",
                netns=True)
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn("ipvs", p.stderr)
        self.assertNamesModes(p.stderr, "the daemon's ipvs refusal")
        p = run("render", "--proxy-mode", "ipvs", STATE)
        self.assertEqual((p.returncode, p.stdout), (2, ""), p.stderr)
        self.assertNamesModes(p.stderr, "render's ipvs refusal")


class Render(unittest.TestCase):
    def refused(self, args, flag):
        p = run("render", *args, STATE)
        self.assertEqual((p.returncode, p.stdout), (2, ""), "render %s: %s" % (" ".join(args), p.stderr))
        self.assertIn(flag, p.stderr)
        self.assertTrue(p.stderr.startswith("kproxy render: "), p.stderr)

    def test_the_daemons_actions_are_refused(self):
        self.refused(["--cleanup"], "--cleanup")
        self.refused(["--init-only"], "--init-only")
        self.refused(["--write-config-to", "/dev/null"], "--write-config-to")
        self.refused(["--version"], "--version")
        self.refused(["--version=raw"], "--version")

    def test_what_the_daemon_refuses_is_refused(self):
        self.refused(["--socket-lb", "--proxy-mode", "userspace"], "--socket-lb")
        self.refused(["--output", "netlink"], "--output netlink")
        self.refused(["--output", "netlink", "--proxy-mode", "userspace"], "--output netlink")
        self.refused(["--output", "netlink", "--proxy-mode", "nftables", "--socket-lb"], "--output netlink")
        with tempfile.NamedTemporaryFile("w", suffix=".yaml") as f:
            f.write("apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nmode: userspace\n")
            f.flush()
            self.refused(["--config", f.name, "--socket-lb"], "--socket-lb")

    def test_what_it_honours_still_renders(self):
        for args in ([], ["--proxy-mode", "userspace"], ["--proxy-mode", "nftables", "--output", "netlink"],
                     ["--socket-lb"], ["--version=false"], ["--iptables-sync-period", "10s"]):
            p = run("render", "--hostname-override", "node-1", *args, STATE)
            self.assertEqual(p.returncode, 0, "render %s: %s" % (" ".join(args), p.stderr))
            self.assertTrue(p.stdout, args)


class Version(unittest.TestCase):
    def test_version_is_upstreams_line(self):
        full, _ = kube_version()
        p = run("--version")
        self.assertEqual((p.returncode, p.stdout, p.stderr), (0, "Kubernetes %s\n" % full, ""))

    def test_raw_is_kproxys_own(self):
        full, _ = kube_version()
        p = run("--version=raw")
        self.assertEqual(p.returncode, 0)
        self.assertEqual(p.stdout, "kproxy version %s, following kube-proxy %s\n" % (read("VERSION").strip(), full))

    def test_the_claims_agree(self):
        """Wherever README, docs/ or a source comment says which release
        kproxy follows, it is CONFIG_KUBE_VERSION's; no range of releases
        claims it."""
        _, minor = kube_version()
        claims = []
        for f in tracked_files():
            if not f.endswith((".md", ".c", ".h", ".yaml", ".sh", ".py")) or f.startswith("docs/reference/"):
                continue
            text = read(f)
            for m in re.finditer(r"(?:Kubernetes|kube-proxy|kubeadm) \(?v?(1\.\d+)(?:\.\d+)?(?:\s*[–-]\s*v?1\.\d+|\))?"
                                 r"(?:'s| (?:does|stores|serves|hides|follows|knows)|, the release kproxy follows)",
                                 text):
                claims.append((f, m.group(0), m.group(1)))
        self.assertGreater(len(claims), 5, "the pattern finds the claims")
        wrong = [c for c in claims if c[2] != minor or re.search(r"[–-]\s*v?1\.", c[1])]
        self.assertEqual(wrong, [], "claims of another release than %s" % minor)


class Exits(unittest.TestCase):
    """kube-proxy (cobra, component-base's cli.Run) exits 1 for every error
    of its command line; so does kproxy's daemon command line."""

    def test_daemon_errors_exit_1(self):
        with tempfile.TemporaryDirectory() as d:
            broken = os.path.join(d, "broken.yaml")
            with open(broken, "w") as f:
                f.write("kind: KubeProxyConfiguration\nmode: [\n")
            for args in (["--no-such-flag"], ["--bind-address", "10.0.0.300"], ["--feature-gates", "NoSuchGate=true"],
                         ["--config", broken], ["--config", os.path.join(d, "missing.yaml")], ["--version=maybe"],
                         ["unexpected-argument"], ["--iptables-backend", "nf_tables"]):
                p = run(*args)
                self.assertEqual(p.returncode, 1, "%s: %s" % (args, p.stderr))
                self.assertTrue(p.stderr.strip(), args)
        for args in (["--help"], ["--version"]):
            self.assertEqual(run(*args).returncode, 0, args)

    @unittest.skipUnless(os.geteuid() == 0, "needs root for a network namespace")
    def test_start_up_errors_exit_1(self):
        for args in (["--kubeconfig", "/nonexistent", "--hostname-override", "n"],
                     ["--hostname-override", "n"]):
            p = run(*args, netns=True)
            self.assertEqual(p.returncode, 1, "%s: %s" % (args, p.stderr))
            self.assertIn("Cannot configure the API connection", p.stderr)

    def test_render_usage_errors_exit_2(self):
        for args in (["--no-such-flag", STATE], ["/nonexistent.json"], []):
            p = run("render", *args)
            self.assertEqual((p.returncode, p.stdout), (2, ""), "%s: %s" % (args, p.stderr))

    def test_readme_says_so(self):
        readme = " ".join(read("README.md").split())
        self.assertIn("**Exit status**, as kube-proxy's: 0, or 1 for any error", readme)
        self.assertNotRegex(readme, r"exit status 2 and one line naming the flag")


class Repository(unittest.TestCase):
    def test_nothing_points_outside_the_repository(self):
        outside = []
        for f in tracked_files():
            if f == "tests/docs/test_cli.py":
                continue        # the patterns themselves
            try:
                text = read(f)
            except UnicodeDecodeError:
                continue
            for m in re.finditer(r"\.\./shared|/work/shared|(?<![\w/.])shared/(?:reference|perf)", text):
                outside.append("%s: %s" % (f, text[max(0, m.start() - 30):m.end() + 30].replace("\n", " ")))
            # Every cited reference document is in docs/reference/.
            for m in re.finditer(r"docs/reference/([\w./-]+\.(?:md|py|sh|c))", text):
                if not os.path.exists(os.path.join(ROOT, "docs", "reference", m.group(1))):
                    outside.append("%s: cites missing docs/reference/%s" % (f, m.group(1)))
        self.assertEqual(outside, [])

    @unittest.skipUnless(shutil.which("pkg-config"), "no pkg-config")
    def test_make_names_a_missing_dependency(self):
        with tempfile.TemporaryDirectory() as d:
            fake = os.path.join(d, "pkg-config")
            with open(fake, "w") as f:
                f.write('#!/bin/sh\nfor a; do [ "$a" = libmnl ] && exit 1; done\nexec pkg-config "$@"\n')
            os.chmod(fake, 0o755)
            p = subprocess.run(["make", "-C", ROOT, "-s", "BUILD=" + os.path.join(d, "build"), "PKG_CONFIG=" + fake,
                                "all"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120)
            self.assertNotEqual(p.returncode, 0, p.stdout)
            self.assertIn("missing here: libmnl-dev", p.stdout)
            self.assertIn("make deps", p.stdout)
            self.assertFalse(os.path.exists(os.path.join(d, "build")), "it compiled before saying so")


if __name__ == "__main__":
    unittest.main(verbosity=2)
