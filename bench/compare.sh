#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Before and after, in one run: the daemon benchmark (bench/programming.py)
# of BASE (a git revision) and of the working tree, alternated round by
# round (base, tree, base, tree, ...) so that the machine's drift falls on
# both alike; then each figure's median over the rounds, side by side, and
# the ratio tree/base.
#
# Usage: bench/compare.sh BASE [SIZES...]        (as root; default size 10000)
#   ROUNDS=2 CHANGES=40 MODES="nftables iptables" bench/compare.sh HEAD~5 10000 20000
#
# The base is built in a temporary git worktree (removed on exit); both
# builds are measured by this tree's harness. Results: stdout, and the raw
# numbers in bench/compare/*.json.
set -eu
base=$1
shift
sizes=${*:-10000}
rounds=${ROUNDS:-2}
changes=${CHANGES:-40}
modes=${MODES:-nftables iptables}
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
out=$here/compare
opt="-O2 -g -DNDEBUG"
wt=$(mktemp -d)
trap 'git -C "$root" worktree remove --force "$wt" >/dev/null 2>&1 || rm -rf "$wt"' EXIT

git -C "$root" worktree add --detach "$wt" "$base" >/dev/null
make -s -C "$wt" BUILD=build-bench OPT="$opt" all bench-tools
make -s -C "$root" BUILD=build-bench OPT="$opt" all bench-tools
mkdir -p "$out"
rm -f "$out"/*.json
for r in $(seq 1 "$rounds"); do
    for side in base tree; do
        if [ "$side" = base ]; then build=$wt/build-bench; else build=$root/build-bench; fi
        echo "== round $r, $side ($build)"
        python3 "$here/programming.py" --modes "$modes" --no-baseline --dp-runs 0 --default-period-changes 0 \
            --no-floor --changes "$changes" --ipt-changes "$changes" --results '' \
            --json "$out/$side-$r.json" "$build" $sizes
    done
done

python3 - "$out" "$base" <<'PY'
import glob, json, os, statistics, sys
out, base = sys.argv[1:3]

def pct(v, q):
    v = sorted(v)
    return v[min(len(v) - 1, int(q * len(v)))] if v else float("nan")

FIGURES = [
    ("first sync, ms (kproxy's log)", lambda r: r["load"]["first_sync_ms"]),
    ("first load CPU, s", lambda r: r["load"]["cpu_self_s"] + r["load"]["cpu_children_s"]),
    ("one-endpoint change p50, ms", lambda r: 1e3 * pct(r["changes"]["lat"], .5)),
    ("one-endpoint change p95, ms", lambda r: 1e3 * pct(r["changes"]["lat"], .95)),
    ("CPU per change, ms", lambda r: r["changes"]["cpu_per_change_ms"]),
    ("RSS after the changes, MiB", lambda r: r["mem"]["VmRSS"]),
    ("hourly full resync, ms", lambda r: r.get("resync_ms")),
]
runs = {}
for path in sorted(glob.glob(os.path.join(out, "*.json"))):
    side = os.path.basename(path).split("-")[0]
    for r in json.load(open(path)):
        runs.setdefault((r["mode"], r["n"]), {}).setdefault(side, []).append(r)
print("\nBefore (%s) and after (the working tree), medians over the rounds; ratio after/before\n" % base)
print("| mode | services | figure | before | after | ratio |")
print("| --- | --- | --- | --- | --- | --- |")
for (mode, n), sides in sorted(runs.items()):
    for name, get in FIGURES:
        vals = {}
        for side in ("base", "tree"):
            v = [get(r) for r in sides.get(side, []) if get(r) is not None]
            vals[side] = statistics.median(v) if v else None
        b, t = vals["base"], vals["tree"]
        ratio = "%.2f" % (t / b) if b and t is not None else "–"
        fmt = lambda x: "–" if x is None else ("%.1f" % x if x < 100 else "%.0f" % x)
        print("| %s | %d | %s | %s | %s | %s |" % (mode, n, name, fmt(b), fmt(t), ratio))
PY
