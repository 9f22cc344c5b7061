#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The same cluster state read in either wire format gives the same rules,
byte for byte, and the same warnings (issue 35).

usage: tests/golden/formats.py BUILD_DIR

For every golden scenario that renders (exit 0), the stand-in API server
(tests/apiserver/kapi.py) serves its state, and `kproxy render
--kubeconfig` lists it twice: with no flag (protobuf, kproxy's default) and
with --kube-api-content-type application/json. The two outputs, stdout and
stderr, must be identical, and the stand-in's request log must show that
each run was answered in the format it asked for, so that a fallback to
JSON cannot pass for protobuf. A scenario whose state the stand-in refuses
to load (its own validation) is reported and skipped, never counted.
"""
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
KAPI = os.path.join(HERE, "..", "apiserver", "kapi.py")
PROTOBUF = "application/vnd.kubernetes.protobuf"


def start_kapi(tmp, states):
    for f in ("port", "kubeconfig", "ctl"):
        if os.path.exists(os.path.join(tmp, f)):
            os.unlink(os.path.join(tmp, f))
    args = [sys.executable, KAPI, "--port-file", os.path.join(tmp, "port"), "--kubeconfig",
            os.path.join(tmp, "kubeconfig"), "--control-listen", "127.0.0.1:0", "--control-port-file",
            os.path.join(tmp, "ctl"), "--exit-with-parent"]
    for s in states:
        args += ["--state", s]
    log = open(os.path.join(tmp, "kapi.log"), "w")
    p = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if p.poll() is not None:
            return p, None
        if os.path.exists(os.path.join(tmp, "kubeconfig")) and os.path.exists(os.path.join(tmp, "ctl")):
            with open(os.path.join(tmp, "ctl")) as f:
                return p, int(f.read().split()[0])
        time.sleep(0.05)
    p.kill()
    return p, None


def requests(ctl):
    with urllib.request.urlopen("http://127.0.0.1:%d/requests" % ctl, timeout=10) as r:
        return json.load(r)["requests"]


CONFIG = """apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
hostnameOverride: test-node
clientConnection:
  kubeconfig: %s
%s
"""


def knobs(kproxy):
    """Both settings through --config, as kubeadm's ConfigMap holds them:
    what kproxy sent (Accept) and what it was answered. Returns problems."""
    problems = []
    states = [os.path.join(HERE, "upstream-overall", "state.json")]
    cases = [("", PROTOBUF + ", */*", PROTOBUF),          # kubeadm writes contentType: ""
             ('  contentType: ""', PROTOBUF + ", */*", PROTOBUF),
             ("  contentType: application/json", "application/json, */*", "application/json"),
             ("  acceptContentTypes: application/json", "application/json", "application/json"),
             ("  contentType: application/json\n  acceptContentTypes: " + PROTOBUF, PROTOBUF, PROTOBUF)]
    with tempfile.TemporaryDirectory() as tmp:
        kapi, ctl = start_kapi(tmp, states)
        if ctl is None:
            return ["the stand-in did not start"]
        try:
            for lines, accept, answered in cases:
                conf = os.path.join(tmp, "config.yaml")
                with open(conf, "w") as f:
                    f.write(CONFIG % (os.path.join(tmp, "kubeconfig"), lines))
                seen = len(requests(ctl))
                p = subprocess.run([kproxy, "render", "--config", conf], capture_output=True, timeout=60)
                mine = [r for r in requests(ctl)[seen:] if r["userAgent"].startswith("kproxy/") and
                        "watch=" not in r["path"]]
                got = ({r.get("accept") for r in mine}, {(r.get("contentType") or "").split(";")[0] for r in mine})
                if p.returncode != 0 or not p.stdout or got != ({accept}, {answered}):
                    problems.append("config %r: exit %d, sent and answered %s, want %r and %r: %s" %
                                    (lines, p.returncode, got, accept, answered, p.stderr[-300:]))
        finally:
            kapi.kill()
            kapi.wait()
    return problems


def gzip_lists(kproxy):
    """Lists over the API server's 128 KiB, which it gzips for a client that
    accepts it (kproxy does, as Go's transport): the same rules either way,
    and every list of both runs was gzipped. Returns problems."""
    problems, rules = [], {}
    with tempfile.TemporaryDirectory() as tmp:
        state = os.path.join(tmp, "state.json")
        with open(state, "w") as f:
            subprocess.run([sys.executable, os.path.join(HERE, "..", "..", "bench", "gen_cluster.py"),
                            "--unique-nodeports", "1000", "10", "node-0"], stdout=f, check=True)
        kapi, ctl = start_kapi(tmp, [state])
        if ctl is None:
            return ["the stand-in did not start"]
        try:
            for fmt in ("application/vnd.kubernetes.protobuf", "application/json"):
                seen = len(requests(ctl))
                p = subprocess.run([kproxy, "render", "--kubeconfig", os.path.join(tmp, "kubeconfig"),
                                    "--kube-api-content-type", fmt, "--hostname-override", "node-0",
                                    "--cluster-cidr", "10.128.0.0/9"], capture_output=True, timeout=60)
                big = [r for r in requests(ctl)[seen:] if r["userAgent"].startswith("kproxy/") and
                       "watch=" not in r["path"] and ("services" in r["path"] or "endpointslices" in r["path"])]
                rules[fmt] = p.stdout
                if p.returncode != 0 or len(big) < 2 or not all(r.get("gzip") for r in big):
                    problems.append("%s: exit %d, lists gzipped: %s" % (fmt, p.returncode,
                                                                       [r.get("gzip", False) for r in big]))
        finally:
            kapi.kill()
            kapi.wait()
    if len(set(rules.values())) != 1 or not rules["application/json"]:
        problems.append("the rules of gzipped lists differ between the formats")
    return problems


def main():
    build = os.path.abspath(sys.argv[1])
    kproxy = os.path.join(build, "kproxy")
    passed = failed = skipped = 0
    problems = gzip_lists(kproxy)
    for p in problems:
        print("FAIL gzip: " + p)
    if problems:
        failed += 1
    else:
        passed += 1
        print("ok   gzipped lists (1000 services x 10 endpoints) read, the same rules in both formats")
    problems = knobs(kproxy)
    for p in problems:
        print("FAIL knobs: " + p)
    if problems:
        failed += 1
    else:
        passed += 1
        print("ok   contentType and acceptContentTypes from --config take effect")
    for name in sorted(os.listdir(HERE)):
        d = os.path.join(HERE, name)
        if not os.path.isfile(os.path.join(d, "args")) or os.path.exists(os.path.join(d, "expected.exit")):
            continue
        states = [os.path.join(d, f) for f in sorted(os.listdir(d)) if f.startswith("state.")]
        if not states:
            continue
        with open(os.path.join(d, "args")) as f:
            args = shlex.split(f.read())
        with tempfile.TemporaryDirectory() as tmp:
            kapi, ctl = start_kapi(tmp, states)
            if ctl is None:
                with open(os.path.join(tmp, "kapi.log")) as f:
                    why = f.read().strip().splitlines()[-1:] or ["no reason"]
                print("skip %s: the stand-in does not load its state (%s)" % (name, why[0]))
                skipped += 1
                continue
            try:
                kc = os.path.join(tmp, "kubeconfig")
                out = {}
                for fmt, extra in (("protobuf", []), ("json", ["--kube-api-content-type", "application/json"])):
                    seen = len(requests(ctl))
                    p = subprocess.run([kproxy, "render", "--kubeconfig", kc] + extra + args, cwd=d,
                                       capture_output=True, timeout=60)
                    # The lists: the watches after them end as render exits.
                    mine = [r for r in requests(ctl)[seen:] if r["userAgent"].startswith("kproxy/") and
                            "watch=" not in r["path"]]
                    types = {(r.get("contentType") or "").split(";")[0] for r in mine if r.get("status") == 200}
                    gzipped = any(r.get("gzip") for r in mine)
                    # klog's header (time, pid) differs from run to run.
                    err = re.sub(rb"(?m)^([IWEF])\d{4} [\d:.]+ +\d+ ", rb"\1 ", p.stderr)
                    out[fmt] = (p.returncode, p.stdout, err, types, gzipped)
                pb, js = out["protobuf"], out["json"]
                problems = []
                if pb[0] != 0 or js[0] != 0:
                    problems.append("exit %d (protobuf) and %d (json): %s" % (pb[0], js[0], (pb[2] or js[2])[-300:]))
                if pb[1] != js[1]:
                    problems.append("the rules differ (%d and %d bytes)" % (len(pb[1]), len(js[1])))
                if pb[2] != js[2]:
                    problems.append("the warnings differ:\n--- protobuf\n%s--- json\n%s" %
                                    (pb[2].decode(errors="replace"), js[2].decode(errors="replace")))
                # Namespace-less kinds the stand-in has no protobuf form
                # for do not occur: every list kproxy makes is one it has.
                if pb[3] != {PROTOBUF}:
                    problems.append("the default run was answered in %s, not protobuf only" % sorted(pb[3]))
                if js[3] != {"application/json"}:
                    problems.append("the JSON run was answered in %s" % sorted(js[3]))
                if not pb[1]:
                    problems.append("no rules at all")

            finally:
                kapi.kill()
                kapi.wait()
        if problems:
            failed += 1
            print("FAIL %s: %s" % (name, "; ".join(problems)))
        else:
            passed += 1
            print("ok   %s (%d bytes of rules)" % (name, len(pb[1])))
    print("formats: %d passed, %d failed, %d skipped" % (passed, failed, skipped))
    return 1 if failed or not passed else 0


if __name__ == "__main__":
    sys.exit(main())
