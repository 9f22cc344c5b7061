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
bench=$(cd "$here/../../bench" && pwd)
build=$(cd "$1" && pwd)
tmp=$(mktemp -d)
# shellcheck source=tests/netns/lib.sh
. "$here/lib.sh"
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
build_driver restore-known || fail_all "cannot build restore-known"
for ns in "$A" "$B" "$C"; do ip netns add "$ns" || fail_all "cannot create $ns"; done

python3 "$bench/gen_cluster.py" 200 5 node-0 >"$tmp/state.json" || fail_all "gen_cluster failed"
render_state "$tmp/state.json" "$tmp/in" >"$tmp/why" || fail_all "render failed: $(cat "$tmp/why")"
chains=$(grep -c '^:' "$tmp/in")
sep=$(grep -o '^:KUBE-SEP-[A-Z0-9]*' "$tmp/in" | sed -n 7p | tr -d :)
svc=$(grep -o '^:KUBE-SVC-[A-Z0-9]*' "$tmp/in" | sed -n 3p | tr -d :)
# A TCP cluster IP and port, for a connection through the rules.
read -r vip vport < <(sed -n 's|^-A KUBE-SERVICES .*-p tcp -d \([0-9.]*[1-9]\) --dport \([0-9]*\) -j KUBE-SVC-.*|\1 \2|p' \
                      "$tmp/in" | head -1)
[ -n "$vip" ] || fail_all "no TCP cluster IP in the input"


check() {  # check NAME GOT WANT NS
    if [ "$2" != "$3" ]; then
        echo "FAIL $1: $2, want $3"
        failed=$((failed + 1))
        return
    fi
    saved_chains "$4" >"$tmp/x1"
    saved_chains "$C" >"$tmp/x2"
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
for how in nl text; do
    for ns in "$A" "$B"; do
        ip netns del "$ns" && ip netns add "$ns" || fail_all "cannot recreate $ns"
    done
    got=$(ip netns exec "$A" "$tmp/restore-known" 4 $how "$tmp/in") || fail_all "full syncs failed ($how)"
    check "$how: unchanged: the second full sync writes nothing" "$got" "$chains 0 $chains" "$A"
    # A connection through a service changes only its rules' counters:
    # nothing is written.
    got=$(ip netns exec "$A" "$tmp/restore-known" 4 $how "$tmp/in" sh -c "
          ip link set lo up && ip route add $vip/32 dev lo &&
          iptables -t nat -I OUTPUT -j KUBE-SERVICES &&
          { timeout 2 bash -c 'echo >/dev/tcp/$vip/$vport' 2>/dev/null; true; } &&
          iptables -t nat -D OUTPUT 1 && ip route del $vip/32 dev lo &&
          iptables-save -c -t nat | grep -q '^\[[1-9][0-9]*:[0-9]*\] -A KUBE-SEP-'") \
          || fail_all "full syncs failed, or the connection counted nothing ($how)"
    check "$how: counters changed by traffic: the second full sync writes nothing" "$got" \
          "$chains 0 $chains" "$A"
    got=$(ip netns exec "$B" "$tmp/restore-known" 4 $how "$tmp/in" sh -c \
          "iptables -t nat -A $sep -j RETURN && iptables -t nat -F $svc") || fail_all "full syncs failed ($how)"
    check "$how: two chains changed by someone else: the second full sync writes them" "$got" \
          "$chains 2 $((chains - 2))" "$B"
done

echo "netns-restore-known: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
