#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""`make demo`: kproxy's main job on the bundled example cluster.

Starts the stand-in API server with examples/cluster.yaml, builds a node
namespace (node-1, where kproxy runs), a second node and pod namespaces for
the example's pods, runs kproxy, sends 300 requests to the shop/web cluster
IP from a client pod and prints how they spread; then scales web up by one
pod (kubectl replace of its EndpointSlice) and shows the new spread. Every
namespace and process is removed at the end.
"""
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests", "e2e"))
from netlab import Lab, slice_  # noqa: E402

WEB_IP, WEB_PORT = "10.96.10.20", 80


def bar(n, total, width=40):
    return "#" * round(width * n / total)


def show(title, r, total):
    print("\n%s" % title)
    for pod, n in sorted(r["replies"].items()):
        print("  %-8s %4d  %5.1f%%  %s" % (pod, n, 100.0 * n / total, bar(n, total)))
    if r["errors"]:
        print("  errors:", r["errors"])


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else "build"
    mode = sys.argv[2] if len(sys.argv) > 2 else "iptables"
    lab = Lab(build, mode)
    try:
        print("== Building the network: node-1 and node-2 namespaces, one namespace per pod")
        lab.build_topology()
        pods = [("web-1", "node-1", 10), ("web-2", "node-1", 11), ("web-3", "node-2", 10), ("web-4", "node-2", 11)]
        ips = {name: lab.add_pod(name, node, idx) for name, node, idx in pods}
        lab.add_pod("client", "node-1", 100, serve=False)

        print("== Starting the stand-in API server with examples/cluster.yaml")
        lab.start_apiserver(state=[os.path.join(HERE, "cluster.yaml")])
        print(lab.kubectl("get", "services", "-A").stdout.rstrip())

        print("\n== Starting kproxy in node-1's namespace (%s mode)" % mode)
        lab.start_kproxy()
        t0 = time.monotonic()
        lab.wait_rules("shop/web's rules", lambda r: len(lab.targets("shop/web", "http", r)) == 3, timeout=30)
        took = time.monotonic() - t0
        if mode == "userspace":
            print("   shop/web served after %.2f s (kproxy's frontends, /debug/backend):" % took)
            for line in lab.frontends().splitlines():
                if "shop/web" in line or line == "address 10.96.10.20":
                    print("   " + line)
        elif mode == "iptables":
            print("   rules for shop/web in the kernel after %.2f s:" % took)
            for line in lab.nat().splitlines():
                if "shop/web:http" in line and line.split()[1].startswith(("KUBE-SVC", "KUBE-SERVICES")):
                    print("   " + line)
        else:
            print("   rules for shop/web in the kernel after %.2f s:" % took)
            lines = lab.nft().splitlines()
            for i, line in enumerate(lines):
                if "10.96.10.20 . tcp . 80" in line or ("chain service-" in line and "shop/web/" in line):
                    print("   " + line.strip())
                    for body in lines[i + 1:]:
                        if not body.strip().startswith(("ip ", "numgen", "goto")):
                            break
                        if "chain service-" in line:
                            print("       " + body.strip())

        r = lab.client("p-client", WEB_IP, WEB_PORT, 300)
        show("== 300 requests to shop/web (%s:%d) from a client pod:" % (WEB_IP, WEB_PORT), r, 300)

        print("\n== Scaling shop/web up: a fourth pod (web-4 on node-2) joins its EndpointSlice")
        endpoints = [(ips[n], node) for n, node, _ in pods]
        lab.apply_objects("replace", [slice_("web-5fj2q", "web", endpoints, port=8080, ns="shop", port_name="http")])
        t0 = time.monotonic()
        lab.wait_rules("four endpoints", lambda r: len(lab.targets("shop/web", "http", r)) == 4)
        print("   kproxy programmed the new endpoint in %.2f s (min-sync-period 1s)" % (time.monotonic() - t0))
        r = lab.client("p-client", WEB_IP, WEB_PORT, 300)
        show("== 300 requests after scaling up:", r, 300)
    finally:
        lab.stop_kproxy()
        lab.close()
        print("\n== Cleaned up: namespaces and processes removed")


if __name__ == "__main__":
    main()
