#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Full syncs over a loaded table write only what the kernel does not hold
# as rendered (apply/iptables-known.h): a second full sync of the same rules
# writes nothing; after someone else appends a rule to one endpoint chain
# and deletes another chain's rules, it writes exactly those two chains, and
# the kernel is then the same as a fresh load (compared chain by chain).
#
# Usage: tests/netns/test-restore-known.sh BUILD_DIR   (root; iproute2, iptables, python3, cc, pkg-config)
#
# Network safety: namespaces kp-known-<pid>-{a,b,c}, deleted on exit.
set -u
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../../src" && pwd)
bench=$(cd "$here/../../bench" && pwd)
build=$(cd "$1" && pwd)
tmp=$(mktemp -d)
A="kp-known-$$-a" B="kp-known-$$-b" C="kp-known-$$-c"
passed=0
failed=0

cleanup() {
    for ns in "$A" "$B" "$C"; do ip netns del "$ns" 2>/dev/null; done
    rm -rf "$tmp"
}
trap cleanup EXIT INT TERM

fail_all() {
    echo "netns restore-known: $1"
    echo "netns-restore-known: $passed passed, $((failed + 1)) failed"
    exit 1
}
[ "$(id -u)" -eq 0 ] || fail_all "needs root"
for tool in ip iptables-restore python3 cc pkg-config; do
    command -v "$tool" >/dev/null || fail_all "needs $tool"
done
sanitize=""
if nm "$build/libkproxy-core.a" 2>/dev/null | grep -q __asan_; then
    sanitize="-fsanitize=address,undefined -fno-omit-frame-pointer"
fi
cc -std=gnu11 -g -O1 -Wall -Wextra -Werror -D_GNU_SOURCE -I"$src" $sanitize \
    -o "$tmp/restore-known" "$here/restore-known.c" "$build/libkproxy-core.a" \
    $(pkg-config --libs jansson yaml-0.1 libcrypto libcurl libmicrohttpd libnetfilter_conntrack libmnl) -lm \
    2>"$tmp/cc.err" || { cat "$tmp/cc.err"; fail_all "cannot build restore-known"; }
for ns in "$A" "$B" "$C"; do ip netns add "$ns" || fail_all "cannot create $ns"; done

python3 "$bench/gen_cluster.py" 200 5 node-0 >"$tmp/state.json" || fail_all "gen_cluster failed"
"$build/kproxy" render --hostname-override node-0 --cluster-cidr 10.128.0.0/9 \
    --host-addresses 127.0.0.1/8,192.168.0.2/24 --host-nfacct=false --host-random-fully=true \
    --host-tcp-be-liberal=false "$tmp/state.json" >"$tmp/in" 2>"$tmp/render.err" ||
    fail_all "render failed: $(head -3 "$tmp/render.err")"
chains=$(grep -c '^:' "$tmp/in")
sep=$(grep -o '^:KUBE-SEP-[A-Z0-9]*' "$tmp/in" | sed -n 7p | tr -d :)
svc=$(grep -o '^:KUBE-SVC-[A-Z0-9]*' "$tmp/in" | sed -n 3p | tr -d :)

saved() {
    ip netns exec "$1" iptables-save | python3 -c '
import sys, collections
table, rules = None, collections.OrderedDict()
for l in sys.stdin:
    l = l.rstrip("\n")
    if l.startswith("*"): table = l[1:]
    elif l.startswith(":KUBE-"): rules.setdefault((table, l.split()[0][1:]), [])
    elif l.startswith("-A KUBE-"): rules.setdefault((table, l.split()[1]), []).append(l)
for k in sorted(rules):
    print("%s %s" % k)
    for r in rules[k]: print("  " + r)
'
}

check() {  # check NAME GOT WANT NS
    if [ "$2" != "$3" ]; then
        echo "FAIL $1: $2, want $3"
        failed=$((failed + 1))
        return
    fi
    saved "$4" >"$tmp/x1"
    saved "$C" >"$tmp/x2"
    if cmp -s "$tmp/x1" "$tmp/x2"; then
        echo "ok   $1 ($2)"
        passed=$((passed + 1))
    else
        echo "FAIL $1: the kernel differs from a fresh load:"
        diff "$tmp/x2" "$tmp/x1" | head -10
        failed=$((failed + 1))
    fi
}

ip netns exec "$C" iptables-restore -w 5 --noflush <"$tmp/in" || fail_all "fresh load failed"
got=$(ip netns exec "$A" "$tmp/restore-known" 4 "$tmp/in") || fail_all "full syncs failed"
check "unchanged: the second full sync writes nothing" "$got" "$chains 0 $chains" "$A"
got=$(ip netns exec "$B" "$tmp/restore-known" 4 "$tmp/in" sh -c \
      "iptables -t nat -A $sep -j RETURN && iptables -t nat -F $svc") || fail_all "full syncs failed"
check "two chains changed by someone else: the second full sync writes them" "$got" \
      "$chains 2 $((chains - 2))" "$B"

echo "netns-restore-known: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
