#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The allow-lists (docs/security.md) against every golden scenario, in
both modes: rendering a state with --external-ip-cidrs and
--load-balancer-ip-cidrs must give byte for byte the rules of the same
state without the lists and without the addresses the lists refused (as
render's warnings name them). So a refused address is exactly as if the
Service had never claimed it, and nothing else of any service changes.
Each scenario is rendered with two pairs of lists: "0.0.0.0/0,::/0" (only
the addresses no service may take: the API server's, the node's,
loopback, ...) and "none" (every external and load-balancer IP).

Usage: tests/golden/allowlist.py BUILD_DIR
"""
import glob
import ipaddress
import json
import os
import re
import subprocess
import sys
import tempfile

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
REFUSAL = re.compile(r"Service (\S+): not programming its (externalIP|load-balancer IP) (\S+): ")
LISTS = {
    "special": ["--external-ip-cidrs", "0.0.0.0/0,::/0", "--load-balancer-ip-cidrs", "0.0.0.0/0,::/0"],
    "none": ["--external-ip-cidrs", "none", "--load-balancer-ip-cidrs", "none"],
}


def load_items(paths):
    items = []
    for p in paths:
        with open(p) as f:
            docs = [json.load(f)] if p.endswith(".json") else list(yaml.safe_load_all(f))
        for d in docs:
            if isinstance(d, dict) and d.get("kind") == "List":
                items.extend(d.get("items") or [])
            elif d is not None:
                items.append(d)
    return items


def same_ip(text, addr):
    try:
        return ipaddress.ip_address(text) == ipaddress.ip_address(addr)
    except ValueError:
        return text == addr


def strip(items, refusals):
    """The items without the refused addresses (service key, list, address)."""
    for it in items:
        if not isinstance(it, dict) or it.get("kind") != "Service":
            continue
        md = it.get("metadata") or {}
        key = "%s/%s" % (md.get("namespace") or "default", md.get("name"))
        for k, lst, addr in refusals:
            if k != key:
                continue
            if lst == "externalIP":
                spec = it.get("spec") or {}
                spec["externalIPs"] = [a for a in spec.get("externalIPs") or [] if not same_ip(a, addr)]
            else:
                lb = (it.get("status") or {}).get("loadBalancer") or {}
                lb["ingress"] = [i for i in lb.get("ingress") or [] if not same_ip(i.get("ip", ""), addr)]
    return items


def render(kproxy, args, files, cwd):
    return subprocess.run([kproxy, "render"] + args + files, capture_output=True, text=True, cwd=cwd, timeout=120)


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    kproxy = os.path.join(os.path.abspath(sys.argv[1]), "kproxy")
    passed = failed = refused = 0
    for d in sorted(glob.glob(os.path.join(ROOT, "tests", "golden", "*", "args")) +
                    glob.glob(os.path.join(ROOT, "tests", "golden-nft", "*", "args"))):
        d = os.path.dirname(d)
        name = os.path.relpath(d, os.path.join(ROOT, "tests"))
        exit_file = os.path.join(d, "expected.exit")
        if os.path.exists(exit_file) and open(exit_file).read().strip() != "0":
            continue
        with open(os.path.join(d, "args")) as f:
            args = f.read().split()
        if any(a.endswith("-ip-cidrs") for a in args):
            continue        # a scenario of the lists themselves
        files = sorted(os.path.basename(p) for p in glob.glob(os.path.join(d, "state.*")))
        for which, lists in LISTS.items():
            got = render(kproxy, args + lists, files, d)
            found = [(m.group(1), m.group(2), m.group(3)) for m in REFUSAL.finditer(got.stderr)]
            items = strip(load_items([os.path.join(d, f) for f in files]), found)
            with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
                json.dump({"apiVersion": "v1", "kind": "List", "items": items}, f)
            try:
                want = render(kproxy, args, [f.name], d)
            finally:
                os.unlink(f.name)
            if got.returncode != 0 or want.returncode != 0 or got.stdout != want.stdout:
                failed += 1
                print("FAIL %s (%s): exit %d/%d, the rules differ from the state without the %d refused addresses"
                      % (name, which, got.returncode, want.returncode, len(found)))
                print(got.stderr[-1500:])
            else:
                passed += 1
                refused += len(found)
    # The check is only as good as the refusals it saw.
    if refused < 20:
        failed += 1
        print("FAIL: only %d refusals over every scenario: the lists were not exercised" % refused)
    print("golden-allow-list: %d passed, %d failed (%d refused addresses)" % (passed, failed, refused))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
