#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# The daemon's netlink encoding of nftables mode equals nft's: for every
# golden-nft scenario, the same state is loaded twice into fresh network
# namespaces, once as `kproxy render --output netlink` bytes sent straight
# to the kernel (tests/netns/nlsend.py), once as the nft script through
# `nft -f`. Both kernels must then hold the same table, compared as `nft
# list` text and as bytecode (`nft --debug=netlink list`, the expressions
# the kernel dumps; elements sorted, since hash sets iterate in a random
# order).
#
# Usage: tests/netns/test-nftmsg.sh BUILD_DIR      (root; needs iproute2, nft, python3)
#
# Network safety: namespaces kp-nftmsg-<pid>-<n>, deleted on exit.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "$1" && pwd)
kproxy=$build/kproxy
prefix="kp-nftmsg-$$"
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

if [ "$(id -u)" -ne 0 ] || ! command -v ip >/dev/null || ! command -v nft >/dev/null; then
    echo "netns nftmsg: needs root, iproute2 and nft"
    echo "netns-nftmsg: 0 passed, 1 failed"
    exit 1
fi

# Element lines of the bytecode dump sorted within each set's block.
sort_elements() {
    python3 -c '
import sys
out, block = [], []
for line in sys.stdin:
    if line.startswith("\telement"):
        block.append(line)
        continue
    out += sorted(block); block = []
    out.append(line)
out += sorted(block)
sys.stdout.write("".join(out))'
}

for dir in "$here"/golden-nft/*/; do
    name=$(basename "$dir")
    [ -f "$dir/args" ] && [ -f "$dir/expected.nft" ] || continue
    [ -f "$dir/expected.exit" ] && [ "$(cat "$dir/expected.exit")" != 0 ] && continue
    read -r -a args <"$dir/args"
    fam=ip
    case " ${args[*]} " in *" --ip-family 6 "*) fam=ip6 ;; esac
    n=$((n + 1))
    a="$prefix-$n-a" b="$prefix-$n-b"
    ip netns add "$a" && ip netns add "$b" || { echo "FAIL $name: cannot create namespaces"; failed=$((failed + 1)); continue; }
    ok=1
    (cd "$dir" && "$kproxy" render "${args[@]}" --output netlink state.* 2>/dev/null) >"$tmp/batch"
    if ! ip netns exec "$a" python3 "$here/netns/nlsend.py" <"$tmp/batch" 2>"$tmp/nlsend"; then
        echo "FAIL $name: the kernel refused the netlink batch:"; cat "$tmp/nlsend"; ok=0
    fi
    (cd "$dir" && "$kproxy" render "${args[@]}" state.* 2>/dev/null) | ip netns exec "$b" nft -f - 2>"$tmp/nft" ||
        { echo "FAIL $name: nft -f refused the script:"; cat "$tmp/nft"; ok=0; }
    if [ $ok = 1 ]; then
        for ns in a b; do
            ip netns exec "${prefix}-$n-$ns" nft list table "$fam" kube-proxy >"$tmp/$ns.txt" 2>&1
            ip netns exec "${prefix}-$n-$ns" nft --debug=netlink list table "$fam" kube-proxy 2>&1 | sort_elements >"$tmp/$ns.dbg"
        done
        if ! diff -u "$tmp/b.txt" "$tmp/a.txt" >"$tmp/diff"; then
            echo "FAIL $name: nft list differs (- nft -f, + netlink):"; head -40 "$tmp/diff"; ok=0
        elif ! diff -u "$tmp/b.dbg" "$tmp/a.dbg" >"$tmp/diff"; then
            echo "FAIL $name: bytecode differs (- nft -f, + netlink):"; head -40 "$tmp/diff"; ok=0
        elif [ "$(grep -c . "$tmp/a.txt")" -lt 20 ]; then
            echo "FAIL $name: the table is nearly empty:"; cat "$tmp/a.txt"; ok=0
        fi
    fi
    ip netns del "$a"
    ip netns del "$b"
    if [ $ok = 1 ]; then
        echo "ok   $name"
        passed=$((passed + 1))
    else
        failed=$((failed + 1))
    fi
done
echo "netns-nftmsg: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
