#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# iptables mode's cold start in parts (proxy/iptables/iptsync.h), against the kernel:
# the services' own chains a few services at a time, then the top-level
# chains, leave the tables exactly as one input does (compared chain by
# chain), and a second full sync leaves out every chain the parts wrote.
#
# Usage: tests/netns/test-cold-parts.sh BUILD_DIR   (root; iproute2, iptables, python3, cc, pkg-config)
#
# Network safety: namespaces kp-cold-<pid>-{a,b}, deleted on exit.
set -u
here=$(cd "$(dirname "$0")" && pwd)
bench=$(cd "$here/../../bench" && pwd)
build=$(cd "$1" && pwd)
tmp=$(mktemp -d)
# shellcheck source=tests/netns/lib.sh
. "$here/lib.sh"
A="kp-cold-$$-a" B="kp-cold-$$-b"
passed=0
failed=0

cleanup() {
    for ns in "$A" "$B"; do ip netns del "$ns" 2>/dev/null; done
    rm -rf "$tmp"
}
trap cleanup EXIT INT TERM

fail_all() {
    echo "netns cold-parts: $1"
    echo "netns-cold-parts: $passed passed, $((failed + 1)) failed"
    exit 1
}
[ "$(id -u)" -eq 0 ] || fail_all "needs root"
for tool in ip iptables-restore python3 cc pkg-config; do
    command -v "$tool" >/dev/null || fail_all "needs $tool"
done
build_driver cold-parts || fail_all "cannot build cold-parts"
for ns in "$A" "$B"; do ip netns add "$ns" || fail_all "cannot create $ns"; done
python3 "$bench/gen_cluster.py" 60 3 node-0 >"$tmp/state.json" || fail_all "gen_cluster failed"

ok() { echo "ok   $1"; passed=$((passed + 1)); }
bad() { echo "FAIL $1"; failed=$((failed + 1)); }

# 60 services, 7 at a time: nine parts, then the top level.
read -r parts_first parts_second parts_left < <(ip netns exec "$A" "$tmp/cold-parts" "$tmp/state.json" 7) ||
    fail_all "the sync in parts failed"
read -r whole_first _ _ < <(ip netns exec "$B" "$tmp/cold-parts" "$tmp/state.json" 0) ||
    fail_all "the sync in one input failed"
saved_chains "$A" >"$tmp/a"
saved_chains "$B" >"$tmp/b"
if cmp -s "$tmp/a" "$tmp/b" && [ "$(grep -c '^nat KUBE-SEP-' "$tmp/a")" -eq 180 ]; then
    ok "parts leave the tables as one input does ($(grep -c '^nat ' "$tmp/a") nat chains)"
else
    bad "the tables differ from one input's:"
    diff "$tmp/b" "$tmp/a" | head -10
fi
# The parts repeat KUBE-MARK-MASQ: a little more than one input.
if [ "$parts_first" -ge "$whole_first" ] && [ "$parts_first" -lt $((whole_first + whole_first / 10)) ]; then
    ok "parts sent $parts_first bytes, one input $whole_first"
else
    bad "parts sent $parts_first bytes, one input $whole_first"
fi
if [ "$parts_left" -ge 180 ] && [ "$parts_second" -lt $((parts_first / 4)) ]; then
    ok "the next full sync left out $parts_left chains and sent $parts_second bytes"
else
    bad "the next full sync left out $parts_left chains and sent $parts_second bytes"
fi
echo "netns-cold-parts: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
