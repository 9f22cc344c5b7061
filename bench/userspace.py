#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Userspace mode's packet path beside nftables mode's, in one run.

usage: bench/userspace.py [options] BUILD_DIR [SIZES...]     (as root)

For each N in SIZES (default 1 15000 20000; services of 10 endpoints from
bench/gen_cluster.py, as bench/programming.py builds them: a node namespace
with kproxy and the stand-in API server, a pod namespace holding the first
plain ClusterIP service's endpoints, a client pod), and for each mode
(nftables, then userspace, alternating per round so the machine's drift
hits both alike):

 - new TCP connections/s from the client pod to the service's cluster IP
   (bench/dp_client: connect, a small request, the 40-byte answer, close;
   closed loop, one client on CPU 0, the responder on CPU 1);
 - bulk throughput to the cluster IP, one stream and 32 streams
   (tests/netns/bulk.c: the sink counts and confirms every byte);
 - kproxy's CPU seconds per GB moved (userspace mode: kproxy carries the
   bytes; nftables mode: the kernel does, and kproxy's is ~0).

Userspace mode opens a socket per frontend (22.5k at 20k services here): a
size whose frontends do not fit the hard open-files limit is skipped with
a line saying so (this machine caps it at 20000 and denies root
CAP_SYS_RESOURCE; a node's container runtime usually allows 1M).

Results: stdout, and the "Userspace mode" section of bench/RESULTS.md
(replaced if present). Everything runs in namespaces kpb<pid>-*, deleted on
exit.
"""
import argparse
import os
import re
import resource
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import programming as pg  # noqa: E402

SECTION = "## Userspace mode beside nftables mode"


def bulk_bin(run):
    return os.path.join(run.build, "bench", "bulk")


def bulk(run, ip, streams, secs):
    p = run.sh(["taskset", "-c", "0", bulk_bin(run), "send", ip, "80", str(streams), str(secs)], ns="cl",
               check=False, timeout=secs + 120)
    m = re.search(r"streams=(\d+) bytes=(\d+) seconds=(\S+) gbps=(\S+) verified=(\d)", p.stdout)
    if p.returncode != 0 or not m or m.group(5) != "1":
        raise pg.BenchError("bulk to %s (%d streams): %s %s" % (ip, streams, p.stdout.strip(), p.stderr.strip()))
    return int(m.group(2)), float(m.group(3)), float(m.group(4))


def machine_busy():
    """The machine's CPU seconds spent so far, but nice time (a niced
    fuzzer beside the bench is not the modes' work): user, system, irq,
    softirq and steal from /proc/stat."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return (v[0] + v[2] + v[5] + v[6] + v[7]) / os.sysconf("SC_CLK_TCK")


def wait_served(run, ip, timeout=120):
    """Until a connection to the service gets its answer (the mode has
    programmed it)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return pg.client(run, ip, 80, 0.2)
        except pg.BenchError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def frontends(run, cluster):
    """How many sockets userspace mode opens for this state (kproxy render)."""
    p = subprocess.run([run.kproxy_bin, "render", "--proxy-mode", "userspace", "--hostname-override", pg.NODE,
                        "--cluster-cidr", pg.CLUSTER_CIDR, cluster.state], stdout=subprocess.PIPE,
                       stderr=subprocess.DEVNULL, check=True, text=True)
    return sum(1 for l in p.stdout.splitlines() if l.startswith(("tcp ", "udp ")))


def one(run, args, n, mode):
    """The figures of one mode at one size, from a fresh node; None when
    userspace mode's sockets would not fit the open-files limit here."""
    cluster = pg.Cluster(run, n, 10)
    if mode == "userspace":
        need, hard = frontends(run, cluster), resource.getrlimit(resource.RLIMIT_NOFILE)[1]
        if need + 1000 > hard:
            pg.log("  skipped: %d frontends need more descriptors than the hard open-files limit here (%d), "
                   "which this machine does not let root raise (no CAP_SYS_RESOURCE)" % (need, hard))
            return None
    target = cluster.plain[0]
    ip = target["ip"]
    pg.build_node(run)
    res = {"n": n, "mode": mode}
    try:
        api = pg.Api(run, cluster.state)
        kp = pg.Kproxy(run, api, mode, "1s")
        line, m = kp.wait_log(r"First sync done in (\d+) ms", 900)
        res["first_sync_ms"] = int(m.group(1))
        pg.pods_and_client(run, "node", "pod", "cl", cluster.endpoints(target))
        wait_served(run, ip)
        res["cps"] = []
        for _ in range(args.runs):
            d = pg.client(run, ip, 80, args.seconds)
            res["cps"].append(d)
            time.sleep(1.5)     # conntrack's 1 s TIME_WAIT entries drain (pods_and_client)
        run.kill("dp_server-pod")
        run.spawn("bulk-sink", [bulk_bin(run), "sink", "8080"], ns="pod", cpu=1)
        time.sleep(0.3)
        for streams in (1, 32):
            key = "bulk%d" % streams
            res[key] = []
            for _ in range(args.runs):
                c0, m0, t0 = sum(kp.cpu()), machine_busy(), time.monotonic()
                nbytes, secs, gbps = bulk(run, ip, streams, args.seconds)
                cpu = sum(kp.cpu()) - c0
                machine, wall = machine_busy() - m0, time.monotonic() - t0
                res[key].append({"gbps": gbps, "bytes": nbytes, "kproxy_cpu_s": cpu,
                                 "cpu_s_per_gb": cpu / (nbytes / 1e9),
                                 "machine_s_per_gb": machine / (nbytes / 1e9), "machine_busy": machine / wall})
        res["rss_mib"] = kp.mem().get("VmRSS", 0)
    finally:
        for key in ("bulk-sink", "dp_server-pod", "kproxy", "kapi"):
            run.kill(key, 15 if key == "kproxy" else 9)
        for short in ("cl", "pod", "node"):
            run.del_ns(short)
    return res


def med(v):
    return statistics.median(v) if v else float("nan")


def summary(r):
    return {
        "cps": med([d["cps"] for d in r["cps"]]),
        "connect_p99": med([d["connect_p99"] for d in r["cps"]]),
        "total_max": max(d["total_max"] for d in r["cps"]),
        "g1": med([b["gbps"] for b in r["bulk1"]]),
        "g32": med([b["gbps"] for b in r["bulk32"]]),
        "cpu_gb": med([b["cpu_s_per_gb"] for b in r["bulk1"] + r["bulk32"]]),
        "m32_gb": med([b.get("machine_s_per_gb", float("nan")) for b in r["bulk32"]]),
        "m32_busy": med([b.get("machine_busy", float("nan")) for b in r["bulk32"]]),
    }


def report(results, args):
    lines = [SECTION, "",
             "`bench/userspace.py` (%s), %s: %d runs of %.0f s per figure, medians; the modes alternate per "
             "size on the same namespaces' layout. Gbit/s over veths; kproxy's CPU per GB is its user+system "
             "time during the bulk runs; the machine's, all CPUs' busy time but nice (the bulk sender, the sink, "
             "kproxy and the kernel's softirqs) per GB of the 32-stream runs, and how many of its %d CPUs that "
             "kept busy." % (time.strftime("%Y-%m-%d"), os.uname().release, args.runs, args.seconds,
                             os.cpu_count()), "",
             "| services | mode | conns/s | connect p99 µs | slowest conn µs | Gbit/s 1 stream | 32 streams | "
             "kproxy CPU s/GB | machine CPU s/GB (32) | CPUs busy (32) | RSS MiB |",
             "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in results:
        s = summary(r)
        lines.append("| %d | %s | %.0f | %.0f | %.0f | %.1f | %.1f | %.3f | %.3f | %.2f | %.0f |" % (
            r["n"], r["mode"], s["cps"], s["connect_p99"], s["total_max"], s["g1"], s["g32"], s["cpu_gb"],
            s["m32_gb"], s["m32_busy"], r["rss_mib"]))
    lines.append("")
    for n in sorted({r["n"] for r in results}):
        by = {r["mode"]: summary(r) for r in results if r["n"] == n}
        if "userspace" in by and "nftables" in by:
            u, f = by["userspace"], by["nftables"]
            lines.append("- %d services: userspace / nftables = %.2f for conns/s, %.2f for one stream, %.2f for "
                         "32 streams, %.2f for the machine's CPU per GB at 32 streams." % (
                             n, u["cps"] / f["cps"], u["g1"] / f["g1"], u["g32"] / f["g32"],
                             u["m32_gb"] / f["m32_gb"]))
    return "\n".join(lines) + "\n"


def write_section(path, text, section=SECTION):
    """Replaces (or appends) section's part of the results file."""
    old = open(path).read() if os.path.exists(path) else "# kproxy benchmark results\n\n"
    i = old.find(section)
    if i >= 0:
        j = old.find("\n## ", i + len(section))
        old = old[:i] + (old[j + 1:] if j >= 0 else "")
    with open(path, "w") as f:
        f.write(old.rstrip("\n") + "\n\n" + text)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("build")
    ap.add_argument("sizes", nargs="*", type=int)
    ap.add_argument("--modes", default="nftables userspace", help="the modes, in this order per size")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=3)
    ap.add_argument("--results", default=os.path.join(pg.HERE, "RESULTS.md"), help="'' to write no file")
    args = ap.parse_args()
    sizes = args.sizes or [1, 15000, 20000]
    # What programming.py's helpers read from its own options.
    args.no_affinity = True
    run = pg.Run(args.build, args)
    if not os.access(bulk_bin(run), os.X_OK):
        raise pg.BenchError("%s is missing: make bench-tools" % bulk_bin(run))
    results = []
    try:
        for n in sizes:
            for mode in args.modes.split():
                pg.log("== %s mode, %d services" % (mode, n))
                r = one(run, args, n, mode)
                if r is None:
                    continue
                s = summary(r)
                pg.log("  first sync %d ms; %.0f conns/s (connect p99 %.0f us, slowest %.0f us); %.1f Gbit/s one "
                       "stream, %.1f 32 streams; kproxy %.3f CPU s/GB; RSS %.0f MiB" % (
                           r["first_sync_ms"], s["cps"], s["connect_p99"], s["total_max"], s["g1"], s["g32"],
                           s["cpu_gb"], r["rss_mib"]))
                results.append(r)
    finally:
        run.close()
        problems = run.verify_clean()
        if problems:
            pg.log("NOT CLEAN: " + "; ".join(problems))
    text = report(results, args)
    print(text)
    if args.results:
        write_section(args.results, text)


if __name__ == "__main__":
    main()
