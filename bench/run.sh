#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# kproxy benchmarks. Usage: bench/run.sh BUILD_DIR [SIZES...]
#
# For each N (default 1000 10000 50000) services with 10 endpoints each
# (bench/gen_cluster.py): the state file is loaded once (read, JSON decode,
# validation, model) and the full iptables-restore input rendered 5 times
# by build/bench-render, which reports both phases separately (best of 5
# for the render, wall and CPU time of the one thread) and the peak RSS;
# then the whole `kproxy render` command is timed once end to end, and
# build/bench-nftsync times nftables mode's sync in a scratch network
# namespace (kpbs<pid>-N-shards, deleted after each run).
# Results: stdout and bench/RESULTS.md.
set -eu
build=$1
shift
sizes=${*:-"1000 10000 50000"}
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

python3 - "$build" "$here" "$tmp" $sizes <<'PY'
import json, os, platform, subprocess, sys, time
build, here, tmp = sys.argv[1:4]
sizes = [int(s) for s in sys.argv[4:]]
rows = []
sync_rows = []
explain_rows = []


def explain_cost(state, dst):
    """`kproxy explain` of one connection on state: wall seconds and peak RSS (MiB), as a user runs it.
    GNU time reads the peak after exec: a forked Python's own pages would count in wait4's."""
    out = subprocess.run(["/usr/bin/time", "-f", "%e %M", os.path.join(build, "kproxy"), "explain",
                          "--hostname-override", "node-0", "--cluster-cidr", "10.128.0.0/9",
                          "--host-addresses", "127.0.0.1/8,192.168.0.2/24", "--source", "10.128.0.5",
                          "--destination", dst, "--output", "json", state],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, check=True).stderr
    wall, kib = out.split()[-2:]
    return float(wall), int(kib) / 1024.0


for n in sizes:
    state = os.path.join(tmp, "state-%d.json" % n)
    with open(state, "w") as f:
        subprocess.run([sys.executable, os.path.join(here, "gen_cluster.py"), "--unique-nodeports", str(n), "10", "node-0"],
                       stdout=f, check=True)
    mb = os.path.getsize(state) / 1e6
    out = subprocess.run([os.path.join(build, "bench-render"), state, "node-0", "10.128.0.0/9", "5"],
                         stdout=subprocess.PIPE, check=True, text=True).stdout
    r = dict(kv.split("=") for kv in out.split())
    t0 = time.perf_counter()
    subprocess.run([os.path.join(build, "kproxy"), "render", "--hostname-override", "node-0",
                    "--cluster-cidr", "10.128.0.0/9", "--host-addresses", "127.0.0.1/8,192.168.0.2/24",
                    "--host-nfacct=true", "--host-random-fully=true", "--host-tcp-be-liberal=false", state],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    total = time.perf_counter() - t0
    row = (n, mb, float(r["load_wall"]), float(r["render_wall"]), float(r["render_cpu"]),
           int(r["output_bytes"]) / 1e6, float(r["peak_rss_mib"]), total)
    rows.append(row)
    # explain (issue 33): the middle service's cluster IP, from the state file, best of 3.
    with open(state) as f:
        svcs = [o for o in json.load(f)["items"] if o["kind"] == "Service"]
    mid = svcs[len(svcs) // 2]["spec"]
    runs = [explain_cost(state, "%s:%d" % (mid["clusterIP"], mid["ports"][0]["port"])) for _ in range(3)]
    explain_rows.append((n, mb, min(r[0] for r in runs), max(r[1] for r in runs)))
    print("N=%6d  `kproxy explain` %.3f s, peak RSS %.1f MiB" % (n, explain_rows[-1][2], explain_rows[-1][3]),
          flush=True)
    print("N=%6d  state %6.1f MB  load %6.3f s  render %6.3f s (cpu %6.3f s)  output %6.1f MB  "
          "peak RSS %7.1f MiB  `kproxy render` %6.3f s" % row, flush=True)
    # nftables mode's sync in a scratch namespace: one table up to 20k (a
    # cold load of 50k x 10 in one table takes minutes), 16 shards always.
    for shards in ([0] if n <= 20000 else []) + [16]:
        ns = "kpbs%d-%d-%d" % (os.getpid(), n, shards)
        subprocess.run(["ip", "netns", "add", ns], check=True)
        try:
            out = subprocess.run(["ip", "netns", "exec", ns, os.path.join(build, "bench-nftsync"), state, "node-0",
                                  "10.128.0.0/9", str(shards), "5"],
                                 stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, check=True, text=True).stdout
        finally:
            subprocess.run(["ip", "netns", "del", ns], check=True)
        r = dict(kv.split("=") for kv in out.split())
        sync_rows.append(r)
        print("N=%6d  nftables, %2d shards: render %.3f s CPU; first full sync %.2f s (kproxy %.2f s, kernel %.2f s, "
              "%s transactions); resync %.3f s CPU; one-endpoint partial sync %.1f ms; restart %.2f s "
              "(%.2f s reading)" % (
                  n, shards, float(r["render_cpu"]), float(r["cold_wall"]), float(r["cold_user"]),
                  float(r["cold_sys"]), r["cold_transactions"], float(r["resync_cpu"]),
                  float(r["partial_wall"]) * 1000, float(r["restart_wall"]), float(r["restart_read"])),
              flush=True)

cpu = ""
try:
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
except OSError:
    pass
with open(os.path.join(here, "RESULTS.md"), "w") as f:
    f.write("# kproxy benchmark results\n\n")
    f.write("Generated by `make bench` on %s: %s, %d cores, Linux %s.\n\n" %
            (time.strftime("%Y-%m-%d"), cpu or platform.machine(), os.cpu_count(), platform.release()))
    f.write("## Render (issue 2)\n\n")
    f.write("N services x 10 endpoints (`bench/gen_cluster.py`: 1 in 10 NodePort, 1 in 20 LoadBalancer "
            "with a source range, ETP Local and ClientIP affinity mixed in). *load* is reading, decoding "
            "and validating the state file into the model once; *render* is the full iptables-restore "
            "input (best of 5, one thread), what the daemon pays per full sync; peak RSS includes the "
            "whole parsed JSON document held by `render`.\n\n")
    f.write("| services | state file | load | render (wall) | render (CPU) | output | peak RSS | `kproxy render` end to end |\n")
    f.write("|---|---|---|---|---|---|---|---|\n")
    for n, mb, load, rw, rc, omb, rss, total in rows:
        f.write("| %d | %.1f MB | %.3f s | %.3f s | %.3f s | %.1f MB | %.0f MiB | %.3f s |\n" %
                (n, mb, load, rw, rc, omb, rss, total))
    f.write("\n## `kproxy explain` (issue 33)\n\n")
    f.write("One connection to the middle service's cluster IP, explained from the same state file as a "
            "user runs it (load, decode, model, answer as JSON): best wall time of 3, and peak RSS. "
            "Target: under 1 s and 100 MiB at 10k services.\n\n")
    f.write("| services | state file | `kproxy explain` | peak RSS |\n|---|---|---|---|\n")
    for n, mb, wall, rss in explain_rows:
        f.write("| %d | %.1f MB | %.3f s | %.0f MiB |\n" % (n, mb, wall, rss))
    f.write("\n## nftables sync: kproxy's work and the kernel's\n\n")
    f.write("`bench/bench-nftsync` in a scratch network namespace, the same clusters: *render* is the netlink "
            "messages of a whole first full sync, no kernel (best of 5, CPU); *first full sync* is "
            "`nftsync_full()` into the empty namespace, its user CPU (kproxy) and system CPU (the kernel's "
            "side of the netlink calls); *resync* is the hourly full sync over the loaded, unchanged table "
            "(render and diff of every service, one query per table; best of 5, CPU); *partial* is one "
            "endpoint of one service changed (median of 5, wall, nearly all of it the kernel's commit); "
            "*restart* is a new sync's full sync over the loaded table (wall, and the part reading the "
            "chains back); "
            "*heap*: malloc's bytes in use (its heap and the large blocks it maps apart) with the model loaded, "
            "then also the sync's records after the first full sync (the daemon's steady RSS adds the "
            "libraries and malloc's free space).\n\n")
    f.write("| services | shards | render (CPU) | messages | first full sync | kproxy (user) | kernel (system) "
            "| transactions | resync (CPU) | partial sync | restart (reading) | heap: model, + records |\n")
    f.write("|---|---|---|---|---|---|---|---|---|---|---|---|\n")
    for r in sync_rows:
        f.write("| %s | %s | %.3f s | %s | %.2f s | %.2f s | %.2f s | %s | %.3f s | %.1f ms | %.2f s (%.2f s) "
                "| %.1f, %.1f MiB |\n" % (
            r["services"], r["shards"], float(r["render_cpu"]), r["messages"], float(r["cold_wall"]),
            float(r["cold_user"]), float(r["cold_sys"]), r["cold_transactions"], float(r["resync_cpu"]),
            float(r["partial_wall"]) * 1000, float(r["restart_wall"]), float(r["restart_read"]),
            float(r["heap_model_mib"]),
            float(r["heap_synced_mib"]) - float(r["heap_model_mib"])))
PY
