#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# The dummy interface of userspace mode (src/userspace/ifaddr.c), against
# the kernel: created and brought up, host addresses (IPv4 /32, IPv6 /128)
# appear and go, a listener bound to one is reachable from another
# namespace through a veth once routed, an interface that is not a dummy is
# refused, and nothing else in the namespace changes (its links, addresses
# and every routing table are compared before and after, ours left out).
#
# Usage: tests/netns/test-ifaddr.sh BUILD_DIR   (root; iproute2, python3)
#
# Network safety: everything happens in kp-ifa-<pid>-{n,c}, deleted on exit.
set -u
build=$(cd "$1" && pwd)
ns="kp-ifa-$$-n"
cl="kp-ifa-$$-c"
tmp=$(mktemp -d)
passed=0
failed=0
. "$(dirname "$0")/lib.sh"

cleanup() {
    local n pid
    for n in "$ns" "$cl"; do
        for pid in $(ip netns pids "$n" 2>/dev/null); do kill -9 "$pid" 2>/dev/null; done
        ip netns del "$n" 2>/dev/null
    done
    rm -rf "$tmp"
}
trap cleanup EXIT
trap "exit 1" INT TERM

in_ns() { ip netns exec "$ns" "$@"; }
drive() { in_ns "$tmp/ifaddr-drive" kube-proxy0 "$@"; }
# What the namespace holds besides kube-proxy0: links, addresses, all routes.
others() {
    in_ns ip -o link show | grep -v kube-proxy0 | sed 's/^[0-9]*: //'
    in_ns ip -o addr show | grep -v kube-proxy0 | sed 's/^[0-9]*: //'
    in_ns ip route show table all | grep -v kube-proxy0
    in_ns ip -6 route show table all | grep -v kube-proxy0
}
# The addresses ip(8) shows on kube-proxy0, global scope, sorted.
shown() { in_ns ip -o addr show dev kube-proxy0 scope global | awk '{print $4}' | sort; }

build_driver ifaddr-drive || exit 1
ip netns add "$ns" && ip netns add "$cl" || { echo "cannot create namespaces"; exit 1; }
in_ns ip link set lo up
ip netns exec "$cl" ip link set lo up
ip link add "kpia$$" netns "$ns" type veth peer name "kpib$$" netns "$cl" || { echo "cannot create a veth"; exit 1; }
# No IPv6 link-local on the veths: their DAD would change the namespace
# while the test compares it.
in_ns ip link set "kpia$$" addrgenmode none
ip netns exec "$cl" ip link set "kpib$$" addrgenmode none
in_ns ip addr add 192.168.77.1/24 dev "kpia$$"
in_ns ip link set "kpia$$" up
ip netns exec "$cl" ip addr add 192.168.77.2/24 dev "kpib$$"
ip netns exec "$cl" ip link set "kpib$$" up
before=$(others)

# 1. Created, a dummy, up; a second ensure finds the same one.
idx=$(drive ensure)
check "ensure prints an ifindex ($idx)" [ -n "$idx" ] && [ "$idx" -gt 0 ] 2>/dev/null
check "kube-proxy0 is a dummy (ifb where the kernel has none)" bash -c "ip netns exec $ns ip -d link show kube-proxy0 | grep -qwE 'dummy|ifb'"
check "kube-proxy0 is up" bash -c "ip netns exec $ns ip link show kube-proxy0 | grep -q '<.*UP.*>'"
check "ensure again: the same interface" [ "$(drive ensure)" = "$idx" ]
check "a new interface lists no address" [ -z "$(drive list)" ]

# 2. Addresses appear as host addresses, without DAD or prefix routes.
drive add 10.96.0.10 10.96.0.11 fd00:96::10
check "three addresses shown by ip" [ "$(shown)" = "$(printf '10.96.0.10/32\n10.96.0.11/32\nfd00:96::10/128')" ]
check "list agrees with ip" [ "$(drive list | sort)" = "$(printf '10.96.0.10\n10.96.0.11\nfd00:96::10')" ]
check "IPv6 address is not tentative (nodad)" bash -c "! ip netns exec $ns ip -6 addr show dev kube-proxy0 | grep -q tentative"
check "local route for 10.96.0.10" bash -c "ip netns exec $ns ip route show table local | grep -q '^local 10.96.0.10 dev kube-proxy0'"
check "no prefix route in main for the IPv6 address" bash -c "! ip netns exec $ns ip -6 route show table main | grep -q fd00:96"
drive add 10.96.0.10
check "adding an address twice is no error, no duplicate" [ "$(shown | grep -c 10.96.0.10)" = 1 ]

# 3. A listener on a service address, reached from the other namespace.
in_ns python3 -c '
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("10.96.0.10", 8080)); s.listen(4); print("ready", flush=True)
c, peer = s.accept(); c.sendall(b"hello from " + peer[0].encode()); c.close()' >"$tmp/server.out" &
server=$!
for _ in $(seq 100); do grep -q ready "$tmp/server.out" 2>/dev/null && break; sleep 0.05; done
ip netns exec "$cl" ip route add 10.96.0.0/16 via 192.168.77.1
got=$(ip netns exec "$cl" timeout 5 python3 -c '
import socket
s = socket.create_connection(("10.96.0.10", 8080), timeout=3); print(s.recv(100).decode())' 2>&1)
check "listener on 10.96.0.10 reached through the veth (got: $got)" [ "$got" = "hello from 192.168.77.2" ]
wait "$server" 2>/dev/null

# 4. Addresses go; deleting one that is gone is no error.
drive del 10.96.0.11 fd00:96::10
check "one address left" [ "$(shown)" = "10.96.0.10/32" ]
check "deleting an absent address is no error" drive del 10.96.0.11
check "its local route is gone" bash -c "! ip netns exec $ns ip route show table local | grep -q 10.96.0.11"
got=$(ip netns exec "$cl" timeout 5 python3 -c '
import socket
try: socket.create_connection(("10.96.0.11", 8080), timeout=2); print("connected")
except OSError as e: print(type(e).__name__)' 2>&1)
check "a removed address no longer answers (got: $got)" [ "$got" != connected ]

# 5. Gone with the interface; and one not ours (a veth called kube-proxy0)
# is refused, never used.
drive delete
check "delete removes the interface" bash -c "! ip netns exec $ns ip link show kube-proxy0 2>/dev/null"
check "delete again is no error" drive delete
check "list without the interface fails with ENODEV" bash -c "ip netns exec $ns $tmp/ifaddr-drive kube-proxy0 list 2>&1 | grep -q 'No such device'"
in_ns ip link add kube-proxy0 type veth peer name kp0peer
check "ensure refuses a non-dummy kube-proxy0" bash -c "! ip netns exec $ns $tmp/ifaddr-drive kube-proxy0 ensure 2>/dev/null"
check "delete refuses a non-dummy kube-proxy0" bash -c "! ip netns exec $ns $tmp/ifaddr-drive kube-proxy0 delete 2>/dev/null"
check "the veth is still there" bash -c "ip netns exec $ns ip link show kube-proxy0 >/dev/null"
in_ns ip link del kube-proxy0
check "a name too long is refused" bash -c "! ip netns exec $ns $tmp/ifaddr-drive kube-proxy0-far-too-long list 2>/dev/null"

ip netns exec "$cl" ip route del 10.96.0.0/16 via 192.168.77.1
after=$(others)
check "nothing else in the namespace changed" [ "$before" = "$after" ]
[ "$before" = "$after" ] || diff <(echo "$before") <(echo "$after")

echo "test-ifaddr: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
