#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# kproxy benchmarks. Usage: bench/run.sh BUILD_DIR [SIZES]
#
# render: `kproxy render` of N services x 10 endpoints (generated), timed as
# the best of 3 runs (wall and CPU, one process on one core) with its peak
# RSS; the state-file load (JSON decode) and the render itself are also
# reported separately with --bench-phases. Results go to stdout and to
# bench/RESULTS-render.md.
set -eu
build=$1
sizes=${2:-"1000 10000 50000"}
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

python3 - "$build/kproxy" "$here" "$tmp" $sizes <<'PY'
import os, resource, subprocess, sys, time
kproxy, here, tmp = sys.argv[1:4]
sizes = [int(s) for s in sys.argv[4:]]
flags = ["render", "--hostname-override", "node-0", "--cluster-cidr", "10.128.0.0/9",
         "--host-addresses", "127.0.0.1/8,192.168.0.2/24", "--host-nfacct=true",
         "--host-random-fully=true", "--host-tcp-be-liberal=false"]
rows = []
for n in sizes:
    state = os.path.join(tmp, "state-%d.json" % n)
    with open(state, "w") as f:
        subprocess.run([sys.executable, os.path.join(here, "gen_cluster.py"), str(n), "10", "node-0"], stdout=f, check=True)
    size_mb = os.path.getsize(state) / 1e6
    best = None
    for _ in range(3):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        p = subprocess.run([kproxy] + flags + [state], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        wall = time.perf_counter() - t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if p.returncode != 0:
            sys.exit("render failed at N=%d" % n)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        rss = after.ru_maxrss / 1024.0
        lines = p.stdout.count(b"\n")
        if best is None or wall < best[0]:
            best = (wall, cpu, rss, lines, len(p.stdout) / 1e6)
    rows.append((n, size_mb) + best)
    print("N=%6d  state %6.1f MB  wall %7.3f s  cpu %7.3f s  peak RSS %7.1f MiB  %8d lines (%.1f MB)" %
          ((n, size_mb) + best), flush=True)
with open(os.path.join(here, "RESULTS-render.md"), "w") as f:
    f.write("# kproxy render benchmark\n\n")
    f.write("`bench/run.sh`, %s, %s, %d cores. Best of 3 runs; 10 endpoints per service; "
            "peak RSS is the largest child's (includes reading the whole state file).\n\n" %
            (time.strftime("%Y-%m-%d"), os.uname().release, os.cpu_count()))
    f.write("| services | state file | wall | CPU | peak RSS | output |\n|---|---|---|---|---|---|\n")
    for n, mb, wall, cpu, rss, lines, omb in rows:
        f.write("| %d | %.1f MB | %.3f s | %.3f s | %.1f MiB | %d lines, %.1f MB |\n" % (n, mb, wall, cpu, rss, lines, omb))
PY
