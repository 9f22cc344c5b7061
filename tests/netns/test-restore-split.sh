#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# A large restore input applied in pieces (apply/iptables-split.h, what the
# daemon does above 6000 lines) leaves the kernel exactly as the same input
# restored whole: a first load into empty tables, then a changed cluster
# (services gone, endpoints changed, stale chains deleted) over it. A third
# namespace gets the second input whole on empty tables. Compared per chain
# (chain order in iptables-save is creation order, which differs).
#
# Usage: tests/netns/test-restore-split.sh BUILD_DIR   (root; iproute2, iptables, python3, cc, pkg-config)
#
# Network safety: namespaces kp-split-<pid>-{a,b,c}, deleted on exit.
set -u
here=$(cd "$(dirname "$0")" && pwd)
bench=$(cd "$here/../../bench" && pwd)
build=$(cd "$1" && pwd)
tmp=$(mktemp -d)
# shellcheck source=tests/netns/lib.sh
. "$here/lib.sh"
A="kp-split-$$-a" B="kp-split-$$-b" C="kp-split-$$-c"
passed=0
failed=0

cleanup() {
    for ns in "$A" "$B" "$C"; do ip netns del "$ns" 2>/dev/null; done
    rm -rf "$tmp"
}
trap cleanup EXIT INT TERM

fail_all() {
    echo "netns restore-split: $1"
    echo "netns-restore-split: 0 passed, 1 failed"
    exit 1
}
[ "$(id -u)" -eq 0 ] || fail_all "needs root"
for tool in ip iptables-restore python3 cc pkg-config; do
    command -v "$tool" >/dev/null || fail_all "needs $tool"
done
build_driver restore-split || fail_all "cannot build restore-split"
for ns in "$A" "$B" "$C"; do ip netns add "$ns" || fail_all "cannot create $ns"; done

render() {  # render N M OUT: a cluster of N services with M endpoints each
    python3 "$bench/gen_cluster.py" "$1" "$2" node-0 >"$tmp/state-$1-$2.json" &&
        render_state "$tmp/state-$1-$2.json" "$3" >"$tmp/why"
}

# Chains with their rules, by name; what the daemon owns only.

compare() {  # compare NAME NS1 NS2
    saved_chains "$2" >"$tmp/x1"
    saved_chains "$3" >"$tmp/x2"
    if [ ! -s "$tmp/x1" ]; then
        echo "FAIL $1: nothing in $2"
        failed=$((failed + 1))
    elif cmp -s "$tmp/x1" "$tmp/x2"; then
        echo "ok   $1 ($(grep -c '^  ' "$tmp/x1") rules in $(grep -vc '^  ' "$tmp/x1") chains)"
        passed=$((passed + 1))
    else
        echo "FAIL $1: $2 and $3 differ:"
        diff "$tmp/x1" "$tmp/x2" | head -20
        failed=$((failed + 1))
    fi
}

# 1. First load: 300 services x 10 endpoints, about 13k lines, 500-line pieces.
render 300 10 "$tmp/one" || fail_all "render failed: $(cat "$tmp/why")"
ip netns exec "$A" iptables-restore -w 5 --noflush --counters <"$tmp/one" || fail_all "whole restore failed"
pieces=$(ip netns exec "$B" "$tmp/restore-split" 4 500 <"$tmp/one") || fail_all "restore in pieces failed"
if [ "$pieces" -lt 10 ]; then
    echo "FAIL first load: only $pieces pieces"
    failed=$((failed + 1))
fi
compare "first load in $pieces pieces == whole" "$A" "$B"

# 2. Over it: 200 services x 7 endpoints; the daemon's full sync also
# flushes and deletes the owned chains no longer used.
render 200 7 "$tmp/two" || fail_all "render failed: $(cat "$tmp/why")"
ip netns exec "$A" iptables-save -t nat | grep -o '^:KUBE-\(SVC\|SVL\|EXT\|FW\|SEP\)-[A-Z0-9]*' | tr -d : | sort >"$tmp/old"
grep -o '^:KUBE-\(SVC\|SVL\|EXT\|FW\|SEP\)-[A-Z0-9]*' "$tmp/two" | tr -d : | sort >"$tmp/new"
comm -23 "$tmp/old" "$tmp/new" >"$tmp/stale"
[ -s "$tmp/stale" ] || fail_all "the second cluster leaves no stale chain"
python3 - "$tmp/two" "$tmp/stale" >"$tmp/two-sync" <<'PY'
import sys
text, stale = open(sys.argv[1]).read(), open(sys.argv[2]).read().split()
head, rest = text.split("*nat\n", 1)
decl = "".join(":%s - [0:0]\n" % c for c in stale)
dels = "".join("-X %s\n" % c for c in stale)
body, tail = rest.rsplit("COMMIT\n", 1)
sys.stdout.write(head + "*nat\n" + decl + body + dels + "COMMIT\n" + tail)
PY
ip netns exec "$A" iptables-restore -w 5 --noflush --counters <"$tmp/two-sync" || fail_all "whole resync failed"
pieces=$(ip netns exec "$B" "$tmp/restore-split" 4 500 <"$tmp/two-sync") || fail_all "resync in pieces failed"
compare "changed cluster in $pieces pieces == whole" "$A" "$B"
ip netns exec "$C" iptables-restore -w 5 --noflush --counters <"$tmp/two" || fail_all "fresh load failed"
compare "changed cluster in pieces == fresh load" "$C" "$B"
stale_left=$(ip netns exec "$B" iptables-save -t nat | grep -c -F -f <(sed 's/^/:/; s/$/ /' "$tmp/stale"))
if [ "$stale_left" != 0 ]; then
    echo "FAIL stale chains: $stale_left of $(wc -l <"$tmp/stale") left"
    failed=$((failed + 1))
else
    echo "ok   $(wc -l <"$tmp/stale") stale chains deleted"
    passed=$((passed + 1))
fi

echo "netns-restore-split: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
