#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# The kernel accepts what `kproxy render` writes: every golden scenario and
# the bundled example are loaded with the real iptables-restore (--noflush,
# as the daemon will) into a network namespace made for the test, and the
# chains the input declares are then read back with iptables-save.
#
# Usage: tests/netns/test-restore.sh BUILD_DIR      (root; needs iproute2, iptables, nfacct)
#
# Network safety: every netfilter change happens inside namespaces named
# kp-restore-<pid>-<n>, deleted on exit (also on failure). Nothing touches
# the root namespace.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "$1" && pwd)
kproxy=$build/kproxy
prefix="kp-restore-$$"
tmp=$(mktemp -d)
passed=0
failed=0
n=0

cleanup() {
    for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep "^$prefix-"); do
        ip netns del "$ns" 2>/dev/null
    done
    rm -rf "$tmp"
}
trap cleanup EXIT INT TERM

if [ "$(id -u)" -ne 0 ] || ! command -v ip >/dev/null || ! command -v iptables-restore >/dev/null; then
    echo "netns restore: needs root, iproute2 and iptables"
    echo "netns-restore: 0 passed, 1 failed"
    exit 1
fi

# load NAME FAMILY FILE: apply FILE in a fresh namespace, then check that
# every chain it declares exists in the kernel.
load() {
    local name=$1 family=$2 file=$3 ns restore save
    n=$((n + 1))
    ns="$prefix-$n"
    if [ "$family" = 6 ]; then restore=ip6tables-restore; save=ip6tables-save; else restore=iptables-restore; save=iptables-save; fi
    ip netns add "$ns"
    # Upstream's nfacct counters, as the daemon creates them before syncing.
    if grep -q -- '--nfacct-name' "$file"; then
        ip netns exec "$ns" nfacct add ct_state_invalid_dropped_pkts >/dev/null
        ip netns exec "$ns" nfacct add localhost_nps_accepted_pkts >/dev/null
    fi
    if ! ip netns exec "$ns" "$restore" -w 5 --noflush --counters <"$file" >"$tmp/err" 2>&1; then
        echo "FAIL $name: $restore refused the input: $(head -3 "$tmp/err")"
        failed=$((failed + 1))
        ip netns del "$ns"
        return
    fi
    ip netns exec "$ns" "$save" >"$tmp/saved"
    local missing=""
    for chain in $(grep -o '^:KUBE-[A-Z0-9-]*' "$file" | tr -d :); do
        grep -q "^:$chain " "$tmp/saved" || missing="$missing $chain"
    done
    local want got
    want=$(grep -c '^-A ' "$file")
    got=$(grep -c '^-A KUBE-' "$tmp/saved")
    if [ -n "$missing" ]; then
        echo "FAIL $name: chains missing after restore:$missing"
        failed=$((failed + 1))
    elif [ "$want" != "$got" ]; then
        echo "FAIL $name: $want rules written, $got read back"
        failed=$((failed + 1))
    else
        echo "ok   $name ($want rules)"
        passed=$((passed + 1))
    fi
    ip netns del "$ns"
}

for dir in "$here"/golden/*/; do
    name=$(basename "$dir")
    [ -f "$dir/args" ] || continue
    [ -f "$dir/expected.iptables" ] || continue
    args=$(cat "$dir/args")
    family=4
    case " $args " in *" --ip-family 6 "*|*" --ip-family=6 "*) family=6 ;; esac
    (cd "$dir" && "$kproxy" render $args state.* >"$tmp/rules" 2>/dev/null)
    load "golden/$name" "$family" "$tmp/rules"
done

# The bundled example, with every host fact probed inside a fresh namespace
# (no counters there: the probe must say so and the rules must not use them).
n=$((n + 1))
ns="$prefix-$n"
ip netns add "$ns"
ip netns exec "$ns" "$kproxy" render --hostname-override node-1 "$here/../examples/cluster.yaml" >"$tmp/example" 2>"$tmp/err"
ip netns del "$ns"
load example 4 "$tmp/example"

# nftables mode: the example's nft script loads into a fresh namespace.
n=$((n + 1))
ns="$prefix-$n"
ip netns add "$ns"
ip netns exec "$ns" "$kproxy" render --proxy-mode nftables --hostname-override node-1 --cluster-cidr 10.244.0.0/16 \
    "$here/../examples/cluster.yaml" >"$tmp/example.nft" 2>"$tmp/err"
if ip netns exec "$ns" nft -f "$tmp/example.nft" 2>"$tmp/err" &&
        ip netns exec "$ns" nft list table ip kube-proxy | grep -q 'dnat to 10.244.1.10:8080'; then
    echo "ok   example (nftables)"
    passed=$((passed + 1))
else
    echo "FAIL example (nftables): $(head -3 "$tmp/err")"
    failed=$((failed + 1))
fi
ip netns del "$ns"

echo "netns-restore: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
