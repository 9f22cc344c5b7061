#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# nftables mode's incremental syncs against the kernel: random walks
# through cluster states (tests/netns/nftsync-walk.c), each step applied by
# a partial sync (or a resync, or a restart's full sync) in one namespace
# and loaded from scratch in another; the two tables must be the same after
# every step, and a restart over an unchanged table writes only the chains
# it cannot compare.
#
# Usage: tests/netns/test-nftsync.sh BUILD_DIR   (root; needs iproute2, nft, cc, pkg-config)
#
# Network safety: namespaces kp-nftsync-<pid>-{a,b}, deleted on exit.
set -u
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "$1" && pwd)
tmp=$(mktemp -d)
# shellcheck source=tests/netns/lib.sh
. "$here/lib.sh"
A="kp-nftsync-$$-a" B="kp-nftsync-$$-b"
passed=0
failed=0

cleanup() {
    ip netns del "$A" 2>/dev/null
    ip netns del "$B" 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT INT TERM

fail_all() {
    echo "netns nftsync: $1"
    echo "netns-nftsync: 0 passed, 1 failed"
    exit 1
}
[ "$(id -u)" -eq 0 ] || fail_all "needs root"
for tool in ip nft cc pkg-config; do
    command -v "$tool" >/dev/null || fail_all "needs $tool"
done
build_driver nftsync-walk || fail_all "cannot build nftsync-walk"

ip netns add "$A" && ip netns add "$B" || fail_all "cannot create namespaces"
# Seeds are fixed, so a failure is reproducible: nftsync-walk SEED STEPS A B.
for seed in 1 2 3 4 5 6; do
    if "$tmp/nftsync-walk" "$seed" 40 "$A" "$B" >"$tmp/out" 2>&1; then
        echo "ok   seed $seed: $(grep -c same "$tmp/out") steps, $(grep -o '[0-9]* conflicts' "$tmp/out" | awk '{s += $1} END {print s + 0}') conflicts seen"
        passed=$((passed + 1))
    else
        echo "FAIL seed $seed:"
        tail -60 "$tmp/out"
        failed=$((failed + 1))
    fi
    ip netns exec "$A" nft delete table ip kube-proxy 2>/dev/null
done
# The same with the services' nat side spread over three more tables.
for seed in 7 8 9; do
    if WALK_SHARDS=3 "$tmp/nftsync-walk" "$seed" 40 "$A" "$B" >"$tmp/out" 2>&1; then
        echo "ok   seed $seed, 3 shards: $(grep -c same "$tmp/out") steps, all four tables the same"
        passed=$((passed + 1))
    else
        echo "FAIL seed $seed, 3 shards:"
        tail -60 "$tmp/out"
        failed=$((failed + 1))
    fi
    for t in kube-proxy kube-proxy-1 kube-proxy-2 kube-proxy-3; do
        ip netns exec "$A" nft delete table ip $t 2>/dev/null
    done
done
# Two services claiming one external IP and port.
# The warning names the element by its set and key in hex (192.0.2.x, TCP).
if "$tmp/nftsync-walk" conflict 0 "$A" "$B" >"$tmp/out" 2>&1 &&
    grep -q "wants service-ips c00002[0-9a-f]\{2\}06000000" "$tmp/out"; then
    echo "ok   a contended map key stays with its first owner, then passes to the other"
    passed=$((passed + 1))
else
    echo "FAIL contended map key:"
    cat "$tmp/out"
    failed=$((failed + 1))
fi
# What chains hold, read back from the kernel (how a restart tells which
# chains already hold what it would write).
ip netns exec "$A" nft delete table ip kube-proxy 2>/dev/null
if "$tmp/nftsync-walk" digests 0 "$A" "$B" >"$tmp/out" 2>&1; then
    echo "ok   $(cat "$tmp/out")"
    passed=$((passed + 1))
else
    echo "FAIL chain digests:"
    cat "$tmp/out"
    failed=$((failed + 1))
fi
echo "netns-nftsync: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
