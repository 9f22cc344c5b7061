#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# conntrack_reconcile_udp() against the real kernel. Three namespaces:
#
#   client 10.251.1.2 --veth-- 10.251.1.1 node 10.251.2.1 --veth-- pod A 10.251.2.2
#                                              |                       B 10.251.2.3
#                                              +-- dummy: 10.96.0.0/16 goes here when no DNAT
#
# (and the same in IPv6 under fd00:251::/48). The node DNATs UDP to the fake
# cluster IP 10.96.0.10:53 and the NodePort 30053 to a pod, as kube-proxy's
# rules would; the pod runs UDP echo servers bound to A and B that answer
# with their own name. Clients send from fixed source ports, so a second
# packet reuses the first one's conntrack entry: that is the UDP black hole
# the reconciler exists for. tests/netns/ct-reconcile.c runs the reconciler
# inside the node namespace.
#
# Usage: tests/netns/test-conntrack.sh BUILD_DIR   (root; iproute2, iptables, conntrack, python3, cc;
#                                                  valgrind for the leak check if BUILD_DIR is not an ASan build)
#
# Network safety: every address, route and rule lives in namespaces named
# kp-ct-<pid>-*, deleted on exit (also on failure). Nothing touches the root
# namespace.
set -u
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "$1" && pwd)
prefix="kp-ct-$$"
C="$prefix-client"
N="$prefix-node"
P="$prefix-pod"
tmp=$(mktemp -d)
# shellcheck source=tests/netns/lib.sh
. "$here/lib.sh"
passed=0
failed=0
A=10.251.2.2
B=10.251.2.3
A6=fd00:251:2::2
B6=fd00:251:2::3
CIP=10.96.0.10
CIP6=fd00:96::a
NODE=10.251.1.1

cleanup() {
    for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep "^$prefix-"); do
        # Deleting a namespace does not end its processes (the echo server).
        for pid in $(ip netns pids "$ns" 2>/dev/null); do kill "$pid" 2>/dev/null; done
        ip netns del "$ns" 2>/dev/null
    done
    rm -rf "$tmp"
}
trap cleanup EXIT
trap "exit 1" INT TERM     # exit runs cleanup; a bare handler would carry on

fail_all() {
    echo "conntrack: $1"
    echo "conntrack: 0 passed, 1 failed"
    exit 1
}

[ "$(id -u)" -eq 0 ] || fail_all "needs root"
for tool in ip iptables ip6tables conntrack python3 cc pkg-config; do
    command -v "$tool" >/dev/null || fail_all "needs $tool (Debian: iproute2 iptables conntrack python3 build-essential)"
done

ok() { echo "ok   $1"; passed=$((passed + 1)); }
bad() { echo "FAIL $1"; failed=$((failed + 1)); }
# expect NAME GOT WANT
expect() { if [ "$2" = "$3" ]; then ok "$1"; else bad "$1: got '$2', want '$3'"; fi; }

# The driver, built against the core library as the daemon is. An ASan
# library needs an ASan driver; otherwise valgrind checks it once below.
if ! build_driver ct-reconcile; then
    fail_all "cannot build ct-reconcile against $build/libkproxy-core.a"
fi

nsx() { local ns=$1; shift; ip netns exec "$ns" "$@"; }

# --- topology ---------------------------------------------------------------
trap 'fail_all "setup failed at line $LINENO"' ERR
for ns in "$C" "$N" "$P"; do ip netns add "$ns" || fail_all "cannot create namespace $ns"; done
ip link add kpc0 netns "$C" type veth peer name kpn0 netns "$N"
ip link add kpn1 netns "$N" type veth peer name kpp0 netns "$P"
for ns in "$C" "$N" "$P"; do nsx "$ns" ip link set lo up; done
nsx "$C" ip link set kpc0 up
nsx "$N" ip link set kpn0 up
nsx "$N" ip link set kpn1 up
nsx "$P" ip link set kpp0 up
nsx "$C" ip addr add 10.251.1.2/24 dev kpc0
nsx "$C" ip -6 addr add fd00:251:1::2/64 dev kpc0 nodad
nsx "$N" ip addr add $NODE/24 dev kpn0
nsx "$N" ip -6 addr add fd00:251:1::1/64 dev kpn0 nodad
nsx "$N" ip addr add 10.251.2.1/24 dev kpn1
nsx "$N" ip -6 addr add fd00:251:2::1/64 dev kpn1 nodad
nsx "$P" ip addr add $A/24 dev kpp0
nsx "$P" ip addr add $B/24 dev kpp0
nsx "$P" ip -6 addr add $A6/64 dev kpp0 nodad
nsx "$P" ip -6 addr add $B6/64 dev kpp0 nodad
nsx "$C" ip route add default via $NODE
nsx "$C" ip -6 route add default via fd00:251:1::1
nsx "$P" ip route add default via 10.251.2.1
nsx "$P" ip -6 route add default via fd00:251:2::1
nsx "$N" sysctl -qw net.ipv4.ip_forward=1
nsx "$N" sysctl -qw net.ipv6.conf.all.forwarding=1
# Service traffic that no DNAT rule catches is routed on, as a real node
# routes it to its gateway: the flow still gets a conntrack entry, un-NAT-ed.
# The "gateway" is a static neighbour on the pod link that nobody answers
# for (the pod drops frames for a foreign MAC); no dummy module needed.
nsx "$N" ip neigh add 10.251.2.254 lladdr 02:00:00:00:00:fe dev kpn1 nud permanent
nsx "$N" ip -6 neigh add fd00:251:2::fe lladdr 02:00:00:00:00:fe dev kpn1 nud permanent
nsx "$N" ip route add 10.96.0.0/16 via 10.251.2.254 dev kpn1
nsx "$N" ip -6 route add fd00:96::/64 via fd00:251:2::fe dev kpn1

# With iptables-nft the kernel tracks connections in a namespace only once
# some rule needs conntrack; a NAT chain without a DNAT rule (case 3) does
# not. kube-proxy's own INVALID-drop rule keeps it on, as on a real node.
nsx "$N" iptables -w -A FORWARD -m conntrack --ctstate INVALID -j DROP
nsx "$N" ip6tables -w -A FORWARD -m conntrack --ctstate INVALID -j DROP
# The service rules live in one chain per family, replaced as a sync would.
nsx "$N" iptables -w -t nat -N KPCT-SVC
nsx "$N" iptables -w -t nat -A PREROUTING -j KPCT-SVC
nsx "$N" ip6tables -w -t nat -N KPCT-SVC
nsx "$N" ip6tables -w -t nat -A PREROUTING -j KPCT-SVC
# dnat FAMILY [DST PORT TARGET]...: the service chain DNATs each DST:PORT to TARGET.
dnat() {
    local ipt=iptables
    [ "$1" = 6 ] && ipt=ip6tables
    shift
    nsx "$N" $ipt -w -t nat -F KPCT-SVC
    while [ $# -ge 3 ]; do
        nsx "$N" $ipt -w -t nat -A KPCT-SVC -d "$1" -p udp --dport "$2" -j DNAT --to-destination "$3"
        shift 3
    done
}

# UDP echo servers in the pod: each answers with the name of the address it
# is bound to, so the client sees which backend its flow reached.
cat >"$tmp/server.py" <<'EOF'
import select, socket, sys
socks = {}
for spec in sys.argv[2:]:
    name, addr = spec.split("=")
    fam = socket.AF_INET6 if ":" in addr else socket.AF_INET
    s = socket.socket(fam, socket.SOCK_DGRAM)
    s.bind((addr, 5353))
    socks[s] = name.encode()
open(sys.argv[1], "w").close()
while True:
    for s in select.select(list(socks), [], [])[0]:
        data, peer = s.recvfrom(512)
        s.sendto(socks[s], peer)
EOF
# Started without a wrapping shell function, so cleanup()'s kill ends the
# server itself, and disowned, so bash does not report it.
ip netns exec "$P" python3 "$tmp/server.py" "$tmp/ready" A=$A B=$B A6=$A6 B6=$B6 &
disown $!
for _ in $(seq 50); do [ -e "$tmp/ready" ] && break; sleep 0.1; done
[ -e "$tmp/ready" ] || fail_all "echo server did not start"
trap - ERR

# send SPORT DST DPORT: one datagram from the client's fixed source port;
# prints who answered, or "none".
cat >"$tmp/send.py" <<'EOF'
import socket, sys
sport, dst, dport = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
fam = socket.AF_INET6 if ":" in dst else socket.AF_INET
s = socket.socket(fam, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("::" if fam == socket.AF_INET6 else "0.0.0.0", sport))
s.settimeout(0.5)
s.sendto(b"ping", (dst, dport))
try:
    print(s.recvfrom(512)[0].decode())
except (socket.timeout, ConnectionRefusedError):
    print("none")
EOF
send() { nsx "$C" python3 "$tmp/send.py" "$@"; }

# entries FAMILY SPORT: the node's UDP entries from that client port, as
# "reply-source:port" (one per line; empty if none).
entries() {
    local f=ipv4
    [ "$1" = 6 ] && f=ipv6
    nsx "$N" conntrack -L -f $f -p udp --orig-port-src "$2" 2>/dev/null |
        awk '{ ns = 0; np = 0
               for (i = 1; i <= NF; i++) {
                   if ($i ~ /^src=/ && ++ns == 2) ip = substr($i, 5)
                   if ($i ~ /^sport=/ && ++np == 2) port = substr($i, 7)
               }
               print ip ":" port }' |
        sort -u | tr '\n' ' ' | sed 's/ $//'
}
flush() { nsx "$N" conntrack -F >/dev/null 2>&1; }

# reconcile ARGS...: the reconciler in the node namespace; prints the count,
# and the exit status if it is not 0 (so an ASan/LSan report fails the case).
reconcile() {
    local out rc
    out=$(nsx "$N" "$tmp/ct-reconcile" -v 4 "$@" 2>>"$tmp/reconcile.log")
    rc=$?
    if [ "$rc" -eq 0 ]; then echo "$out"; else echo "$out (exit $rc)"; fi
}

start=$(date +%s%N)

# --- 1. an endpoint goes away -----------------------------------------------
dnat 4 $CIP 53 $A:5353
expect "flow 40001 reaches A" "$(send 40001 $CIP 53)" A
expect "conntrack holds 40001 -> A" "$(entries 4 40001)" "$A:5353"
dnat 4 $CIP 53 $B:5353
expect "new flow 40002 reaches B" "$(send 40002 $CIP 53)" B
expect "stale entry still black-holes 40001 to A (the bug)" "$(send 40001 $CIP 53)" A
# An unrelated flow that also has A as reply source: straight to the pod.
expect "direct flow 40010 -> A:5353" "$(send 40010 $A 5353)" A
expect "reconcile deletes exactly the stale entry" "$(reconcile 4 $CIP:53=$B:5353)" 1
expect "entry 40001 -> A gone" "$(entries 4 40001)" ""
expect "entry 40002 -> B (a serving backend) kept" "$(entries 4 40002)" "$B:5353"
expect "non-service entry 40010 kept" "$(entries 4 40010)" "$A:5353"
expect "flow 40001 now reaches B" "$(send 40001 $CIP 53)" B
expect "second reconcile deletes nothing" "$(reconcile 4 $CIP:53=$B:5353)" 0
expect "IPv6 reconcile ignores IPv4 entries" "$(reconcile 6 "[$CIP6]:53=[$B6]:5353")" 0

# --- 2. both backends serving: nothing is stale -------------------------------
expect "reconcile with A and B serving deletes nothing" "$(reconcile 4 $CIP:53=$A:5353,$B:5353)" 0
expect "entries kept" "$(entries 4 40002)" "$B:5353"
# Same pod, changed target port: stale.
expect "backend B on another port: entry of 40002 is stale" "$(reconcile 4 $CIP:53=$B:8053)" 2
expect "entry 40002 gone" "$(entries 4 40002)" ""

# --- 3. the service had no endpoint, now has one -----------------------------
dnat 4
expect "no endpoint: flow 40003 gets no answer" "$(send 40003 $CIP 53)" none
expect "un-NAT-ed entry: reply source is the cluster IP" "$(entries 4 40003)" "$CIP:53"
dnat 4 $CIP 53 $A:5353
expect "endpoint appears, but 40003 is still black-holed" "$(send 40003 $CIP 53)" none
expect "reconcile deletes the un-NAT-ed entry" "$(reconcile 4 $CIP:53=$A:5353)" 1
expect "flow 40003 now reaches A" "$(send 40003 $CIP 53)" A

# --- 4. NodePort ----------------------------------------------------------------
dnat 4 $CIP 53 $A:5353 $NODE 30053 $A:5353
expect "node port flow 40004 reaches A" "$(send 40004 $NODE 30053)" A
dnat 4 $CIP 53 $A:5353 $NODE 30053 $B:5353
expect "reconcile (cluster IP -> A, node port -> B) deletes only the node port entry" \
    "$(reconcile 4 $CIP:53=$A:5353 nodeport:30053=$B:5353)" 1
expect "node port entry 40004 gone" "$(entries 4 40004)" ""
expect "cluster IP entry 40003 -> A kept" "$(entries 4 40003)" "$A:5353"
expect "node port flow 40004 now reaches B" "$(send 40004 $NODE 30053)" B

# --- 5. a conntrack zone ------------------------------------------------------
# The delete must carry the entry's zone, or the kernel looks in zone 0.
flush
nsx "$N" iptables -w -t raw -A PREROUTING -i kpn0 -p udp --sport 40005 -j CT --zone 7
dnat 4 $CIP 53 $A:5353
expect "zone-7 flow 40005 reaches A" "$(send 40005 $CIP 53)" A
expect "entry 40005 is in zone 7" \
    "$(nsx "$N" conntrack -L -p udp --orig-port-src 40005 2>/dev/null | grep -c 'zone=7')" 1
expect "zone-0 flow 40015 reaches A" "$(send 40015 $CIP 53)" A
expect "reconcile deletes the zone-7 and the zone-0 entry" "$(reconcile 4 $CIP:53=$B:5353)" 2
expect "entry 40005 gone" "$(entries 4 40005)" ""
nsx "$N" iptables -w -t raw -F PREROUTING

# --- 6. IPv6 ------------------------------------------------------------------
flush
dnat 4 $CIP 53 $A:5353
send 40016 $CIP 53 >/dev/null
dnat 6 $CIP6 53 "[$A6]:5353"
expect "IPv6 flow 40006 reaches A6" "$(send 40006 $CIP6 53)" A6
dnat 6 $CIP6 53 "[$B6]:5353"
expect "IPv6 new flow 40007 reaches B6" "$(send 40007 $CIP6 53)" B6
expect "IPv6 stale entry still goes to A6" "$(send 40006 $CIP6 53)" A6
expect "IPv4 reconcile deletes its stale entry, not IPv6 ones" "$(reconcile 4 $CIP:53=$B:5353)" 1
expect "IPv6 entries untouched" "$(entries 6 40006) $(entries 6 40007)" "$A6:5353 $B6:5353"
expect "IPv6 reconcile deletes exactly the stale entry" "$(reconcile 6 "[$CIP6]:53=[$B6]:5353")" 1
expect "IPv6 entry 40006 gone" "$(entries 6 40006)" ""
expect "IPv6 entry 40007 -> B6 kept" "$(entries 6 40007)" "$B6:5353"
expect "IPv6 flow 40006 now reaches B6" "$(send 40006 $CIP6 53)" B6

# --- 7. no frontends: no dump, nothing deleted ---------------------------------
expect "no frontends" "$(reconcile 4)" 0

elapsed_ms=$((($(date +%s%N) - start) / 1000000))

# --- 8. memory: one reconcile that deletes, under valgrind or ASan --------------
flush
dnat 4 $CIP 53 $A:5353
send 40008 $CIP 53 >/dev/null
if core_sanitized; then
    expect "ASan/UBSan driver: reconcile deletes one entry cleanly" "$(reconcile 4 $CIP:53=$B:5353)" 1
elif command -v valgrind >/dev/null; then
    out=$(nsx "$N" valgrind -q --leak-check=full --show-leak-kinds=definite,indirect --errors-for-leak-kinds=definite,indirect \
        --error-exitcode=99 "$tmp/ct-reconcile" -v 4 4 $CIP:53=$B:5353 2>"$tmp/valgrind.log")
    rc=$?
    if [ "$rc" = 0 ] && [ "$out" = 1 ]; then
        ok "valgrind: reconcile deletes one entry, no errors or leaks"
    else
        bad "valgrind: exit $rc, output '$out'"
        cat "$tmp/valgrind.log"
    fi
else
    echo "skip valgrind: not installed and $build is not an ASan build"
fi

# Per-entry lines and the summary are verbosity 4 (the daemon logs the count at 2).
expect "per-entry log lines written at -v 4" "$(grep -c 'Deleted stale UDP conntrack entry' "$tmp/reconcile.log" | awk '{print ($1 > 0)}')" 1
expect "default verbosity is silent" \
    "$(flush; dnat 4 $CIP 53 $A:5353; send 40011 $CIP 53 >/dev/null; nsx "$N" "$tmp/ct-reconcile" 4 $CIP:53=$B:5353 2>&1)" 1

[ "$failed" -eq 0 ] || { echo "--- reconciler log"; cat "$tmp/reconcile.log"; }
echo "conntrack: the kernel cases (1-7) took ${elapsed_ms} ms"
echo "conntrack: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
