#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""What an armed `kproxy trace` costs traffic it does not trace, in one run.

usage: bench/trace_overhead.py [options] BUILD_DIR     (as root)

Two namespaces of this run's own: a client and a node joined by a veth, the
node serving bench/dp_server on CPU 1; the client opens new TCP connections
to it in a closed loop (bench/dp_client on CPU 0: connect, request, reply,
close). Rounds alternate: trace off, then a trace armed in the node for a
destination the traffic never uses (its table's two base chains see every
packet: one rule that does not match), then off again, and so on. Reported:
connections/s and the whole connection's p50 and p99 latency per state (the
median of the rounds), and on/off as a ratio with the spread of the off
rounds beside it, the machine's own noise.

Results: stdout, and the "kproxy trace" section of bench/RESULTS.md.
"""
import argparse
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from userspace import write_section  # noqa: E402

SECTION = "## `kproxy trace`: its cost to traffic it does not trace"


def sh(args, **kw):
    return subprocess.run(args, check=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


def round_(build, ns, seconds):
    out = sh(["ip", "netns", "exec", ns, "taskset", "-c", "0", os.path.join(build, "bench", "dp_client"),
              "10.77.0.2", "8080", str(seconds)]).stdout
    f = dict(kv.split("=") for kv in out.replace("connect_us ", "connect_").replace("total_us ", "").split()
             if "=" in kv)
    return float(f["cps"]), float(f["p50"]), float(f["p99"])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("build")
    ap.add_argument("--rounds", type=int, default=5, help="rounds per state (default 5)")
    ap.add_argument("--seconds", type=float, default=3, help="seconds per round (default 3)")
    ap.add_argument("--results", default=os.path.join(HERE, "RESULTS.md"), help="'' to write no file")
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("bench/trace_overhead.py needs root (network namespaces)")
    build = os.path.abspath(a.build)
    tag = "kptr%d" % os.getpid()
    client, node = tag + "-c", tag + "-n"
    procs = []
    try:
        for ns in (client, node):
            sh(["ip", "netns", "add", ns])
            sh(["ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up"])
        sh(["ip", "link", "add", tag + "a", "netns", client, "type", "veth", "peer", "name", tag + "b",
            "netns", node])
        # The client's own namespace: a closed loop of short connections
        # needs its ports back (TIME_WAIT), as bench/programming.py's.
        sh(["ip", "netns", "exec", client, "sysctl", "-qw", "net.ipv4.ip_local_port_range=1024 65535"])
        sh(["ip", "netns", "exec", client, "sysctl", "-qw", "net.ipv4.tcp_tw_reuse=1"])
        sh(["ip", "netns", "exec", client, "ip", "addr", "add", "10.77.0.1/24", "dev", tag + "a"])
        sh(["ip", "netns", "exec", node, "ip", "addr", "add", "10.77.0.2/24", "dev", tag + "b"])
        sh(["ip", "netns", "exec", client, "ip", "link", "set", tag + "a", "up"])
        sh(["ip", "netns", "exec", node, "ip", "link", "set", tag + "b", "up"])
        server = subprocess.Popen(["ip", "netns", "exec", node, "taskset", "-c", "1",
                                   os.path.join(build, "bench", "dp_server"), "8080"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        procs.append(server)
        deadline = time.monotonic() + 10
        while subprocess.run(["ip", "netns", "exec", client, "bash", "-c", "exec 3<>/dev/tcp/10.77.0.2/8080"],
                             stderr=subprocess.DEVNULL).returncode != 0:
            if time.monotonic() > deadline:
                sys.exit("dp_server did not start")
        results = {"off": [], "on": []}
        round_(build, client, 1)        # warm up
        for _ in range(a.rounds):
            for state in ("off", "on"):
                trace = None
                if state == "on":
                    trace = subprocess.Popen(["ip", "netns", "exec", node, os.path.join(build, "kproxy"), "trace",
                                              "--destination", "10.96.0.10:80", "--timeout", "1h"],
                                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
                    procs.append(trace)
                    if "armed" not in trace.stderr.readline():
                        sys.exit("kproxy trace did not arm")
                try:
                    results[state].append(round_(build, client, a.seconds))
                finally:
                    if trace:
                        trace.terminate()
                        trace.wait(timeout=20)
                        trace.stderr.close()
                        procs.remove(trace)
        med = {s: [statistics.median(r[i] for r in results[s]) for i in range(3)] for s in results}
        spread = [100 * (max(r[i] for r in results["off"]) - min(r[i] for r in results["off"])) / med["off"][i]
                  for i in range(3)]
        names = ("connections/s", "p50 latency (us)", "p99 latency (us)")
        lines = [SECTION, "",
                 "`bench/trace_overhead.py`: new TCP connections between two namespaces, closed loop (client "
                 "on CPU 0, server on CPU 1), %d rounds of %g s per state, alternating; *on* is a trace armed "
                 "in the server's namespace for a destination this traffic never uses. Median of the rounds; "
                 "the off rounds' spread (max - min over the median) is the machine's noise." %
                 (a.rounds, a.seconds), "",
                 "| | trace off | trace armed, not matching | on / off | off rounds' spread |",
                 "|---|---|---|---|---|"]
        for i, n in enumerate(names):
            lines.append("| %s | %.1f | %.1f | %.3f | %.1f%% |" % (n, med["off"][i], med["on"][i],
                                                                  med["on"][i] / med["off"][i], spread[i]))
        text = "\n".join(lines) + "\n"
        print(text)
        if a.results:
            write_section(a.results, text, SECTION)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        for ns in (client, node):
            subprocess.run(["ip", "netns", "del", ns], stderr=subprocess.DEVNULL)


if __name__ == "__main__":
    main()
