#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""--socket-lb beside nftables mode alone, in one run.

usage: bench/socketlb.py [options] BUILD_DIR [SIZES...]     (as root)

For each N in SIZES (default 1 20000 100000; services of 10 endpoints from
bench/gen_cluster.py, as bench/programming.py builds them: a node namespace
with kproxy and the stand-in API server, a pod namespace holding the first
plain ClusterIP service's endpoints and ten spare addresses, a client pod
in a cgroup of this run's own), and for each of nftables mode alone and
nftables mode with --socket-lb (alternating per size):

 - cold start: kproxy's first sync, and with --socket-lb the maps' part of it;
 - change latency: the service's ten endpoints replaced through the API by
   ten others (PUT of its EndpointSlice; the pod holds both sets), timed
   from sending the PUT to the start of the first connection from the
   client pod that reaches a new endpoint (bench/probe_endpoint.py looping
   against bench/whoami.py, which names the endpoint reached). Replacing
   them all makes the first connection after the change show it, so the
   figure is the programming's and not the prober's luck;
 - new TCP connections/s from the client pod to the cluster IP
   (bench/dp_client, closed loop, client on CPU 0, server on CPU 1);
   kproxy runs on CPU 0, the prober and whoami.py on CPU 1 (a large
   nftables commit keeps its CPU busy in the kernel);
 - kproxy's RSS;

and, for each N in --cold-sizes (default 20000 100000), the maps' cold
start without the API server (build/bench-socklb in a scratch namespace):
the plan, the first full sync into empty maps, and a restart's full sync
over the full pinned maps (best of --cold-runs).

The hooks attach to the run's cgroup (under a cgroup2 mount of its own)
and pin in a bpf filesystem it mounts; both go with the run.

Results: stdout, and the "Socket load balancing" section of
bench/RESULTS.md (replaced if present).
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import programming as pg  # noqa: E402
import userspace  # noqa: E402

SECTION = "## Socket load balancing beside nftables mode"
SPARE_BASE = 10 << 24 | 129 << 16 | 200 << 8       # 10.129.200.x: the pod's spare endpoint addresses


class Mounts:
    """A cgroup2 and a bpf filesystem mount under the run's directory, and
    the run's cgroup (kproxy runs in the node namespace, where /sys is
    remounted: these stay visible)."""

    def __init__(self, run):
        self.cgroot = os.path.join(run.tmp, "cgroup2")
        self.bpffs = os.path.join(run.tmp, "bpffs")
        os.makedirs(self.cgroot)
        os.makedirs(self.bpffs)
        subprocess.run(["mount", "-t", "cgroup2", "none", self.cgroot], check=True)
        subprocess.run(["mount", "-t", "bpf", "bpf", self.bpffs], check=True)
        self.cg = os.path.join(self.cgroot, "kpb%d" % os.getpid())
        os.makedirs(self.cg)

    def pins(self, n):
        return os.path.join(self.bpffs, "kproxy-%d" % n)

    def close(self):
        if os.path.isdir(self.cg):
            for _ in range(100):
                if not open(os.path.join(self.cg, "cgroup.procs")).read().strip():
                    break
                time.sleep(0.1)
            os.rmdir(self.cg)
        for m in (self.bpffs, self.cgroot):
            subprocess.run(["umount", m], check=False)


def in_cg(mounts, run, ns, args):
    return ["sh", "-c", 'echo $$ > "$0/cgroup.procs" && exec "$@"', mounts.cg, "ip", "netns", "exec",
            run.ns(ns)] + [str(a) for a in args]


def dp_client(run, mounts, ip, secs):
    cmd = in_cg(mounts, run, "cl", ["taskset", "-c", "0", os.path.join(run.build, "bench", "dp_client"), ip, 80,
                                    secs])
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=secs + 60)
    m = re.search(r"conns=(\d+) fails=(\d+) secs=\S+ cps=(\S+) connect_us p50=\S+ p99=(\S+)", p.stdout)
    if p.returncode != 0 or not m:
        raise pg.BenchError("dp_client: %s %s" % (p.stdout, p.stderr))
    return {"conns": int(m.group(1)), "fails": int(m.group(2)), "cps": float(m.group(3)),
            "connect_p99": float(m.group(4))}


def change(run, mounts, api, kp, svc, new, timeout=10):
    """Replaces svc's endpoints with the addresses new; returns the seconds
    from sending the PUT to the first connection reaching one of them and
    to kproxy's receipt of the change (its -v=5 line for the object), and
    the addresses replaced."""
    sl = svc["slice"]
    old = [e["addresses"][0] for e in sl["endpoints"]]
    probe = subprocess.Popen(in_cg(mounts, run, "cl", ["taskset", "-c", "1", sys.executable,
                                                       os.path.join(pg.HERE, "probe_endpoint.py"), svc["ip"], 80,
                                                       ",".join(new), timeout]),
                             stdout=subprocess.PIPE, text=True)
    try:
        if probe.stdout.readline().strip() != "ready":
            raise pg.BenchError("the prober did not start")
        for e, a in zip(sl["endpoints"], new):
            e["addresses"] = [a]
        t0, t0_wall = time.monotonic(), time.time()
        reply = json.loads(api.request("PUT", "/apis/discovery.k8s.io/v1/namespaces/%s/endpointslices/%s" % (
            sl["metadata"]["namespace"], sl["metadata"]["name"]), sl))
        sl["metadata"]["resourceVersion"] = reply["metadata"]["resourceVersion"]
        out = probe.stdout.readline().split()
        probe.wait(timeout=timeout + 10)
    finally:
        if probe.poll() is None:
            probe.kill()
            probe.wait()
    if not out or out[0] != "reached":
        raise pg.BenchError("the new endpoints %s were never reached: %s" % (new, out))
    want = "EndpointSlice %s/%s: upsert" % (sl["metadata"]["namespace"], sl["metadata"]["name"])
    got = [pg.klog_epoch(l) for l in kp.output().splitlines() if l.endswith(want)]
    got = [t for t in got if t >= t0_wall - 0.001]
    if not got:
        raise pg.BenchError("kproxy's log has no line for the change")
    return float(out[1]) - t0, got[0] - t0_wall, old


def one(run, mounts, args, n, socket_lb):
    cluster = pg.Cluster(run, n, 10)
    target = cluster.plain[0]
    pg.build_node(run)
    spares = [pg.ip_str(SPARE_BASE + i) for i in range(1, 11)]
    res = {"n": n, "mode": ("nftables + socket-lb" if socket_lb else "nftables") +
           (" (%d shards)" % pg.SHARDS if pg.SHARDS else "")}
    extra = ["-v=5"] + (["--socket-lb", "--socket-lb-cgroup", mounts.cg, "--socket-lb-pin-dir", mounts.pins(n)]
                        if socket_lb else [])
    try:
        api = pg.Api(run, cluster.state)
        kp = pg.Kproxy(run, api, "nftables", "1s", extra=extra)
        _, m = kp.wait_log(r"First sync done in (\d+) ms", 900)
        res["first_sync_ms"] = int(m.group(1))
        if socket_lb:
            _, m = kp.wait_log(r"Socket load balancing maps \(IPv4\): (\d+) services written \(\d+ frontends "
                               r"planned\) in (\S+) ms", 60)
            res["maps_ms"] = float(m.group(2))
        pg.pods_and_client(run, "node", "pod", "cl", cluster.endpoints(target) + spares)
        run.kill("dp_server-pod")
        run.spawn("whoami", [sys.executable, os.path.join(pg.HERE, "whoami.py"), "8080"], ns="pod", cpu=1)
        time.sleep(0.5)
        lat, api_lat = [], []
        for i in range(args.changes + 1):
            t, t_api, spares = change(run, mounts, api, kp, target, spares)   # the replaced are spare now
            if i > 0:       # the first warms the API connection and the watch up
                lat.append(t)
                api_lat.append(t_api)
            time.sleep(args.gap)
        res["lat"], res["api_lat"] = lat, api_lat
        run.kill("whoami")
        run.spawn("dp_server-pod", [os.path.join(run.build, "bench", "dp_server"), "8080"], ns="pod", cpu=1)
        time.sleep(0.5)
        res["cps"] = []
        for _ in range(args.runs):
            res["cps"].append(dp_client(run, mounts, target["ip"], args.seconds))
            time.sleep(1.5)
        res["rss_mib"] = kp.mem().get("VmRSS", 0)
    finally:
        for key in ("whoami", "dp_server-pod", "kproxy", "kapi"):
            run.kill(key, 15 if key == "kproxy" else 9)
        if socket_lb:
            subprocess.run([run.kproxy_bin, "--cleanup", "--socket-lb-pin-dir", mounts.pins(n)],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for short in ("cl", "pod", "node"):
            run.del_ns(short)
    return res


def cold(run, mounts, n, runs):
    """bench-socklb on n services x 10 endpoints: best of runs, per figure."""
    p = subprocess.run([sys.executable, os.path.join(pg.HERE, "gen_cluster.py"), "--unique-nodeports", str(n), "10",
                        pg.NODE], stdout=subprocess.PIPE, check=True)
    state = os.path.join(run.tmp, "cold-%d.json" % n)
    with open(state, "wb") as f:
        f.write(p.stdout)
    del p
    run.add_ns("cold")
    best = {}
    try:
        for i in range(runs):
            cg = os.path.join(mounts.cg, "cold")
            os.makedirs(cg, exist_ok=True)
            out = run.sh([os.path.join(run.build, "bench-socklb"), state, pg.NODE,
                          os.path.join(mounts.bpffs, "cold-%d" % n), cg, "3"], ns="cold").stdout
            r = dict(kv.split("=") for kv in out.split())
            for k, v in r.items():
                v = float(v)
                best[k] = min(best.get(k, v), v) if k.endswith("_s") else v
            os.rmdir(cg)
    finally:
        run.del_ns("cold")
        os.unlink(state)
    best["n"] = n
    return best


def cold_report(rows, runs):
    lines = ["", "Cold start of the maps, kproxy's part (`bench/bench-socklb.c`: the state loaded from a file, no "
             "API server; %d endpoints per service, best of %d runs; writes batched, 64k slots per "
             "`bpf_map_update_batch`):" % (10, runs), "",
             "| services | map entries | slots | plan s | first full sync s | restart's full sync s |",
             "|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append("| %d | %d | %d | %.3f | %.3f | %.3f |" % (r["n"], r["entries"], r["slots"], r["plan_s"],
                                                              r["cold_s"], r["restart_s"]))
    return "\n".join(lines) + "\n"


def pct(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(round(p / 100 * (len(v) - 1))))]


def summary(r):
    own = [t - a for t, a in zip(r["lat"], r["api_lat"])]
    return {"p50": 1e3 * pct(r["lat"], 50), "p99": 1e3 * pct(r["lat"], 99), "max": 1e3 * max(r["lat"]),
            "api_p50": 1e3 * pct(r["api_lat"], 50), "api_p99": 1e3 * pct(r["api_lat"], 99),
            "own_p50": 1e3 * pct(own, 50), "own_p99": 1e3 * pct(own, 99),
            "cps": statistics.median(d["cps"] for d in r["cps"]),
            "fails": sum(d["fails"] for d in r["cps"])}


def report(results, args):
    lines = [SECTION, "",
             "`bench/socketlb.py` (%s), %s: per size and mode %d changes %.1f s apart of the service's 10 "
             "endpoints to 10 others (latency from sending the PUT to the start of the first connection from "
             "the client pod that reaches a new endpoint), %d runs of %.0f s of new connections (medians); "
             "`--iptables-min-sync-period 1s`; the modes alternate per size; kproxy on CPU 0, the prober and the "
             "pod's server on CPU 1." % (time.strftime("%Y-%m-%d"), os.uname().release, args.changes, args.gap,
                                          args.runs, args.seconds), "",
             "| services | mode | first sync ms | maps ms | change p50 ms | p99 ms | max ms | API share p50 / p99 ms "
             "| after the API p50 / p99 ms | conns/s | failed | RSS MiB |",
             "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in results:
        s = summary(r)
        lines.append("| %d | %s | %d | %s | %.2f | %.2f | %.2f | %.2f / %.2f | %.2f / %.2f | %.0f | %d | %.0f |" % (
            r["n"], r["mode"], r["first_sync_ms"], "%.0f" % r["maps_ms"] if "maps_ms" in r else "–", s["p50"],
            s["p99"], s["max"], s["api_p50"], s["api_p99"], s["own_p50"], s["own_p99"], s["cps"], s["fails"],
            r["rss_mib"]))
    lines += ["", "The API share: from sending the PUT to kproxy's receipt of the changed EndpointSlice (its "
              "`-v=5` log line; the stand-in API server is Python, every object in memory, and its garbage "
              "collector pauses it now and then at 20k services); after the API: the rest, kproxy's and the "
              "kernel's, up to the start of the first connection that shows the change."]
    lines.append("")
    for n in sorted({r["n"] for r in results}):
        by = {"socket-lb" in r["mode"]: summary(r) for r in results if r["n"] == n}
        if len(by) == 2:
            a, b = by[True], by[False]
            lines.append("- %d services: with / without socket-lb = %.3g for change p99 (%.3g after the API), %.2f "
                         "for conns/s." % (n, a["p99"] / b["p99"], a["own_p99"] / b["own_p99"], a["cps"] / b["cps"]))
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("build")
    ap.add_argument("sizes", nargs="*", type=int)
    ap.add_argument("--changes", type=int, default=40)
    ap.add_argument("--gap", type=float, default=1.2, help="seconds between changes (min-sync-period is 1 s)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=3)
    ap.add_argument("--modes", default="nftables socket-lb", help="which of the two, in this order per size")
    ap.add_argument("--results", default=os.path.join(pg.HERE, "RESULTS.md"), help="'' to write no file")
    ap.add_argument("--nft-shards", type=int, default=16,
                    help="nftables mode with --nftables-shards N at sizes over 20k (the rules' part of a change "
                         "then fits between changes; 0: one table)")
    ap.add_argument("--cold-sizes", default="20000 100000", help="'' for none")
    ap.add_argument("--cold-runs", type=int, default=3)
    args = ap.parse_args()
    sizes = args.sizes or [1, 20000, 100000]
    args.no_affinity = True
    # kproxy on CPU 0, the prober and the pod's server on CPU 1: a large
    # nftables commit keeps a CPU busy in the kernel for half a second, and
    # a prober or server waiting behind it would time the machine, not the
    # change.
    os.environ.setdefault("BENCH_KPROXY_WRAP", "taskset -c 0")
    run = pg.Run(args.build, args)
    mounts = Mounts(run)
    results, cold_rows = [], []
    try:
        for n in [int(x) for x in args.cold_sizes.split()]:
            pg.log("== the maps' cold start, %d services" % n)
            cold_rows.append(cold(run, mounts, n, args.cold_runs))
            pg.log("  %s" % cold_rows[-1])
        for n in sizes:
            pg.SHARDS = args.nft_shards if n > 20000 else 0
            for socket_lb in [m == "socket-lb" for m in args.modes.split()]:
                pg.log("== nftables mode%s, %d services" % (" with --socket-lb" if socket_lb else "", n))
                r = one(run, mounts, args, n, socket_lb)
                s = summary(r)
                pg.log("  first sync %d ms%s; change p50 %.2f ms, p99 %.2f ms, max %.2f ms (after the API: p50 %.2f, "
                       "p99 %.2f); %.0f conns/s (%d failed); RSS %.0f MiB" % (
                           r["first_sync_ms"], " (maps %.0f ms)" % r["maps_ms"] if "maps_ms" in r else "", s["p50"],
                           s["p99"], s["max"], s["own_p50"], s["own_p99"], s["cps"], s["fails"], r["rss_mib"]))
                results.append(r)
    finally:
        mounts.close()
        run.close()
        problems = run.verify_clean()
        if problems:
            pg.log("NOT CLEAN: " + "; ".join(problems))
    text = report(results, args) + (cold_report(cold_rows, args.cold_runs) if cold_rows else "")
    print(text)
    if args.results:
        userspace.write_section(args.results, text, SECTION)


if __name__ == "__main__":
    main()
