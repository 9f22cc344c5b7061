#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Plots of a bench/programming.py run against the number of services.

usage: plot.py RESULTS.json OUTDIR

Writes OUTDIR/change-latency.png (one-endpoint change, API write to
kernel, p50 and p99), first-load.png (lists done to last service in the
kernel, and a restart's first full sync over the loaded table), rss.png
(steady and peak RSS) and packet-path.png (new connections/s to the last
service over the first), one line per proxy mode, with gnuplot (Debian's
gnuplot-nox). Sizes of one service are the harness's baseline and left out.
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else None


def series(results):
    """mode (and shards) -> sorted [(n, {metric: value})]."""
    out = {}
    for r in results:
        if r["n"] < 2:
            continue
        m = {}
        ch = r.get("changes") or {}
        if ch.get("lat"):
            m["p50_ms"] = 1e3 * statistics.median(ch["lat"])
            m["p99_ms"] = 1e3 * pct(ch["lat"], 0.99)
        ld = r.get("load") or {}
        if ld.get("last_service_s") is not None and ld.get("lists_done_s") is not None:
            m["load_s"] = ld["last_service_s"] - ld["lists_done_s"]
        if r.get("restart_sync_ms"):
            m["restart_s"] = r["restart_sync_ms"] / 1e3
        mem = r.get("mem") or ld
        if mem.get("VmRSS"):
            m["rss"] = mem["VmRSS"]
            m["hwm"] = mem.get("VmHWM", mem["VmRSS"])
        runs = ((r.get("dp") or {}).get("runs")) or {}
        if runs.get("first") and runs.get("last"):
            first = statistics.median(d["cps"] for d in runs["first"])
            last = statistics.median(d["cps"] for d in runs["last"])
            if first:
                m["ratio"] = last / first
        # Rows run with shards (nftables above 50k) are a line of their own.
        line = r["mode"] + (" %d shards" % r["shards"] if r.get("shards") else "")
        out.setdefault(line, []).append((r["n"], m))
    for v in out.values():
        v.sort(key=lambda x: x[0])
    return out


PLOTS = [
    ("change-latency", "One-endpoint change, API write to kernel", "ms", True,
     [("p50_ms", "p50"), ("p99_ms", "p99")]),
    ("first-load", "First load (lists done to last service) and the first sync of a restart", "s", True,
     [("load_s", "first load"), ("restart_s", "restart, table loaded")]),
    ("rss", "kproxy RSS after the changes", "MiB", False, [("rss", "steady"), ("hwm", "peak")]),
    ("packet-path", "New connections/s to the last service / the first", "ratio", False, [("ratio", "last/first")]),
]


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    results = json.load(open(sys.argv[1]))
    outdir = sys.argv[2]
    os.makedirs(outdir, exist_ok=True)
    data = series(results)
    with tempfile.TemporaryDirectory() as tmp:
        for name, title, unit, logy, metrics in PLOTS:
            lines = []
            for mode, points in sorted(data.items()):
                for key, label in metrics:
                    pts = [(n, m[key]) for n, m in points if key in m]
                    if not pts:
                        continue
                    path = os.path.join(tmp, "%s-%s-%s.dat" % (name, mode.replace(" ", "-"), key))
                    with open(path, "w") as f:
                        f.writelines("%d %g\n" % p for p in pts)
                    lines.append("'%s' using 1:2 with linespoints title '%s %s'" % (path, mode, label))
            if not lines:
                continue
            script = ("set terminal pngcairo size 800,500 noenhanced\nset output '%s'\nset title '%s'\n"
                      "set xlabel 'services (x %s endpoints)'\nset ylabel '%s'\nset logscale x\n%s"
                      "set key top left\nset grid\nplot %s\n" % (
                          os.path.join(outdir, name + ".png"), title,
                          results[0]["params"].get("endpoints", "?") if results else "?", unit,
                          "set logscale y\n" if logy else "set yrange [0:*]\n", ", ".join(lines)))
            subprocess.run(["gnuplot"], input=script, text=True, check=True)
            print("wrote", os.path.join(outdir, name + ".png"))


if __name__ == "__main__":
    main()
