#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# The TCP forwarder of userspace mode (src/userspace/fwd-tcp.c) on a
# routed path, as on a node: a client namespace, a node namespace holding
# the service address on kube-proxy0 (src/userspace/ifaddr.c) and running
# the forwarder, and a pod namespace with the endpoint, joined by two
# veths. Checks that bulk transfers (1 and 32 streams) arrive whole
# through the forwarder, that the endpoint sees the node's address as the
# source, and that the forwarder ends with no connection open. Then
# prints throughput beside two kernel paths over the same veths: the pod
# routed directly, and an nftables DNAT in the node namespace (what
# nftables mode does), and the forwarder's CPU seconds per GB.
#
# Usage: tests/netns/test-fwd.sh BUILD_DIR   (root; iproute2, nft)
#   FWD_SECONDS=N   seconds per transfer (default 2; the figures in
#                   docs/userspace.md used 10)
#   FWD_PIPE_SIZE=B pipe bytes per direction in the forwarder (default: the
#                   kernel's 64 KiB)
#   FWD_POOL=N      a pool of N spare pipes in the forwarder (default none)
#   FWD_CPS_SECONDS=N  seconds per connection-rate run (default 2)
#
# Network safety: everything happens in kp-fwd-<pid>-{c,n,p} (the nftables
# table too), deleted on exit.
set -u
build=$(cd "$1" && pwd)
secs=${FWD_SECONDS:-2}
cl="kp-fwd-$$-c"
nd="kp-fwd-$$-n"
pd="kp-fwd-$$-p"
tmp=$(mktemp -d)
passed=0
failed=0
. "$(dirname "$0")/lib.sh"

cleanup() {
    local n pid
    for n in "$cl" "$nd" "$pd"; do
        for pid in $(ip netns pids "$n" 2>/dev/null); do kill -9 "$pid" 2>/dev/null; done
        ip netns del "$n" 2>/dev/null
    done
    rm -rf "$tmp"
}
trap cleanup EXIT
trap "exit 1" INT TERM

# wait_for FILE TEXT: until FILE holds TEXT (a process said it is ready), 10 s at most.
wait_for() {
    for _ in $(seq 200); do grep -q "$2" "$1" 2>/dev/null && return 0; sleep 0.05; done
    return 1
}

# cpu_ticks PID: user+system clock ticks the process has used.
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

for d in ifaddr-drive fwd-drive bulk; do build_driver "$d" || exit 1; done
# The packet-path benchmark's closed-loop client and its responder.
for d in dp_client dp_server; do
    cc -O2 -o "$tmp/$d" "$netns_dir/../../bench/$d.c" || exit 1
done
for n in "$cl" "$nd" "$pd"; do
    ip netns add "$n" || { echo "cannot create namespaces"; exit 1; }
    ip netns exec "$n" ip link set lo up
done
ip link add "kfc$$" netns "$cl" type veth peer name "kfn$$" netns "$nd" &&
    ip link add "kfp$$" netns "$pd" type veth peer name "kfq$$" netns "$nd" || { echo "cannot create veths"; exit 1; }
ip netns exec "$cl" ip addr add 192.168.80.2/24 dev "kfc$$"
ip netns exec "$nd" ip addr add 192.168.80.1/24 dev "kfn$$"
ip netns exec "$nd" ip addr add 192.168.81.1/24 dev "kfq$$"
ip netns exec "$pd" ip addr add 192.168.81.2/24 dev "kfp$$"
ip netns exec "$cl" ip link set "kfc$$" up
ip netns exec "$nd" ip link set "kfn$$" up
ip netns exec "$nd" ip link set "kfq$$" up
ip netns exec "$pd" ip link set "kfp$$" up
ip netns exec "$cl" ip route add default via 192.168.80.1
ip netns exec "$pd" ip route add default via 192.168.81.1
# Forwarding in the node namespace only, for the two kernel paths compared.
ip netns exec "$nd" sysctl -qw net.ipv4.ip_forward=1

ip netns exec "$nd" "$tmp/ifaddr-drive" kube-proxy0 ensure >/dev/null &&
    ip netns exec "$nd" "$tmp/ifaddr-drive" kube-proxy0 add 10.96.0.10 || { echo "cannot make kube-proxy0"; exit 1; }
# (ip netns exec execs the program: $! is its pid. Background jobs are
# disowned: cleanup kills them, quietly.)
ip netns exec "$pd" "$tmp/bulk" sink 8080 >"$tmp/sink.out" &
disown
ip netns exec "$nd" "$tmp/fwd-drive" 10.96.0.10 80 192.168.81.2:8080 >"$tmp/fwd.out" 2>&1 &
fwd=$!
disown
ip netns exec "$pd" "$tmp/dp_server" 8090 &
disown
ip netns exec "$nd" "$tmp/fwd-drive" 10.96.0.10 90 192.168.81.2:8090 >"$tmp/fwd90.out" 2>&1 &
disown
check "sink ready" wait_for "$tmp/sink.out" ready
check "forwarder ready" wait_for "$tmp/fwd.out" ready
check "forwarder (connection rate) ready" wait_for "$tmp/fwd90.out" ready

# The endpoint sees the node (192.168.81.1) as the source.
ip netns exec "$pd" python3 -c '
import socket
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("192.168.81.2", 8081)); s.listen(1); print("ready", flush=True)
c, peer = s.accept(); c.sendall(peer[0].encode()); c.close()' >"$tmp/peer.out" &
disown
wait_for "$tmp/peer.out" ready
ip netns exec "$nd" "$tmp/fwd-drive" 10.96.0.10 81 192.168.81.2:8081 >"$tmp/fwd81.out" 2>&1 &
disown
wait_for "$tmp/fwd81.out" ready
got=$(ip netns exec "$cl" timeout 5 python3 -c '
import socket
s = socket.create_connection(("10.96.0.10", 81), timeout=3); print(s.recv(100).decode())' 2>&1)
check "the endpoint sees the node's address as source (got: $got)" [ "$got" = 192.168.81.1 ]

run() {   # run LABEL IP PORT STREAMS: one transfer from the client; its line into $tmp/LABEL
    ip netns exec "$cl" "$tmp/bulk" send "$2" "$3" "$4" "$secs" >"$tmp/$1" 2>&1
}
gbps() { sed -n 's/.*gbps=\([0-9.]*\).*/\1/p' "$tmp/$1"; }

t0=$(cpu_ticks "$fwd")
run fwd1 10.96.0.10 80 1
check "1 stream through the forwarder arrives whole: $(cat "$tmp/fwd1")" grep -q verified=1 "$tmp/fwd1"
run fwd32 10.96.0.10 80 32
check "32 streams through the forwarder arrive whole: $(cat "$tmp/fwd32")" grep -q verified=1 "$tmp/fwd32"
t1=$(cpu_ticks "$fwd")

run direct1 192.168.81.2 8080 1
run direct32 192.168.81.2 8080 32
ip netns exec "$nd" nft -f - <<'EOF2'
table ip kpbench {
    chain pre {
        type nat hook prerouting priority dstnat;
        ip daddr 10.96.0.20 tcp dport 80 dnat to 192.168.81.2:8080
        ip daddr 10.96.0.20 tcp dport 90 dnat to 192.168.81.2:8090
    }
}
EOF2
run dnat1 10.96.0.20 80 1
run dnat32 10.96.0.20 80 32
check "the DNAT path works too: $(cat "$tmp/dnat1")" grep -q verified=1 "$tmp/dnat1"

# New connections per second, closed loop, one client (request, 40-byte
# answer, client closes first). Short runs: each path leaves a TIME_WAIT
# per connection on the client, and the forwarder one more toward the
# endpoint (it passes the client's FIN on first), out of ~28k ports per
# destination.
cps_secs=${FWD_CPS_SECONDS:-2}
cps() { ip netns exec "$cl" "$tmp/dp_client" "$1" "$2" "$cps_secs" | sed -n 's/.*fails=\([0-9]*\) .*cps=\([0-9]*\).*/\2 (\1 failed)/p'; }
cps_fwd=$(cps 10.96.0.10 90)
cps_dnat=$(cps 10.96.0.20 90)
cps_direct=$(cps 192.168.81.2 8090)
check "connections through the forwarder, none failed: $cps_fwd" bash -c "grep -q '(0 failed)' <<<'$cps_fwd'"

kill -TERM "$fwd"
for _ in $(seq 200); do grep -q accepted= "$tmp/fwd.out" && break; sleep 0.05; done
for _ in $(seq 200); do kill -0 "$fwd" 2>/dev/null || break; sleep 0.05; done
stats=$(grep accepted= "$tmp/fwd.out")
check "forwarder exited cleanly (no sanitizer report): $(grep -m3 -i 'sanitizer\|runtime error' "$tmp/fwd.out")" \
    bash -c "! kill -0 $fwd 2>/dev/null && ! grep -qi 'sanitizer\|runtime error' '$tmp/fwd.out'"
check "forwarder counted 33 connections, none left open, no resets: $stats" \
    bash -c "grep -q 'accepted=33 active=0 ' <<<'$stats' && grep -q 'resets=0' <<<'$stats'"

bytes=$(($(sed -n 's/.*bytes=\([0-9]*\).*/\1/p' "$tmp/fwd1") + $(sed -n 's/.*bytes=\([0-9]*\).*/\1/p' "$tmp/fwd32")))
hz=$(getconf CLK_TCK)
cpu_per_gb=$(awk -v t=$((t1 - t0)) -v hz="$hz" -v b="$bytes" 'BEGIN { printf "%.3f", t / hz / (b / 1e9) }')
echo "throughput (Gbit/s over veth, ${secs} s each): 1 stream / 32 streams"
printf "  forwarder (splice)  %6s / %6s\n" "$(gbps fwd1)" "$(gbps fwd32)"
printf "  nftables DNAT       %6s / %6s\n" "$(gbps dnat1)" "$(gbps dnat32)"
printf "  routed, no NAT      %6s / %6s\n" "$(gbps direct1)" "$(gbps direct32)"
echo "  forwarder CPU: $cpu_per_gb s per GB forwarded"
echo "new connections/s (${cps_secs} s each): forwarder $cps_fwd, nftables DNAT $cps_dnat, routed $cps_direct"

echo "test-fwd: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
