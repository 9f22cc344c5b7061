#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Socket load balancing's programs and maps (src/sockbpf) against the
# kernel: attached to a cgroup this test creates, with links and maps pinned
# in a bpf filesystem it mounts, a connect() from a process in that cgroup
# to the service address reaches the service's endpoints with equal chances;
# a process outside the cgroup is not translated; the translation goes on
# with no kproxy process running (it is what is pinned), follows a change
# of endpoints, survives a re-attach (a restarted kproxy) with the maps'
# contents, stops for a service set to no endpoints, and ends with unpin.
#
# Usage: tests/netns/test-sockbpf.sh BUILD_DIR   (root; iproute2, python3, cgroup v2, libbpf)
#
# Safety: the pods and clients live in the namespace kp-sbpf-<pid>; the
# programs attach only to the cgroup kp-sbpf-<pid> under the cgroup v2
# mount, never its root; pins live in a bpf filesystem mounted under the
# test's scratch directory. All removed on exit.
set -u
build=$(cd "$1" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
ns="kp-sbpf-$$"
tmp=$(mktemp -d)
bpffs="$tmp/bpffs"
passed=0
failed=0
. "$here/lib.sh"

cgroot=$(awk '$3 == "cgroup2" { print $2; exit }' /proc/mounts)
if [ -z "$cgroot" ]; then
    echo "sockbpf: no cgroup v2 mount: skipped"
    exit 0
fi
cg="$cgroot/kp-sbpf-$$"

cleanup() {
    local pid
    for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$pid" 2>/dev/null; done
    ip netns del "$ns" 2>/dev/null
    if [ -d "$cg" ]; then
        for pid in $(cat "$cg/cgroup.procs" 2>/dev/null); do kill -9 "$pid" 2>/dev/null; done
        rmdir "$cg" 2>/dev/null
    fi
    mountpoint -q "$bpffs" && umount "$bpffs"
    rm -rf "$tmp"
}
trap cleanup EXIT
trap "exit 1" INT TERM

build_driver sockbpf-drive || exit 1
drive() { "$tmp/sockbpf-drive" "$bpffs" "$@"; }
# in_cgroup CMD...: runs CMD in the test's cgroup.
in_cgroup() { sh -c 'echo $$ > "$1/cgroup.procs" && shift && exec "$@"' sh "$cg" "$@"; }
# client [in|out] COUNT: e2e's client against 10.96.0.10:80 from a process
# in the test's cgroup or outside it; prints its JSON summary.
client() {
    local where=$1 count=$2
    local cmd=(ip netns exec "$ns" python3 "$here/../e2e/client.py" 10.96.0.10 80 "$count" --timeout 1)
    if [ "$where" = in ]; then
        in_cgroup "${cmd[@]}"
    else
        "${cmd[@]}"
    fi
}
# pinned: what is pinned, on one line (the kernel's own *.debug files left out).
pinned() { ls "$bpffs" | grep -v '\.debug$' | sort | tr '\n' ' '; }
# field JSON EXPR: a value of the client's summary (python expression on r).
field() { python3 -c 'import json,sys; r=json.loads(sys.argv[1]); print(eval(sys.argv[2]))' "$1" "$2"; }

ip netns add "$ns"
ip -n "$ns" link set lo up
for i in 1 2; do
    ip -n "$ns" addr add "10.77.0.$i/32" dev lo
    ip netns exec "$ns" python3 "$here/../e2e/podserver.py" "p$i" "10.77.0.$i" 8080 8081 "$tmp/ready$i" \
        >/dev/null 2>&1 &
    disown
done
mkdir -p "$bpffs" "$cg"
mount -t bpf bpf "$bpffs"
for i in 1 2; do
    for _ in $(seq 100); do [ -e "$tmp/ready$i" ] && break; sleep 0.1; done
done

check "attach to the test's cgroup" drive attach "$cg"
check "pinned: the maps and a link per hook" test "$(pinned)" = \
    "connect4 connect6 getpeername4 getpeername6 recvmsg4 recvmsg6 sendmsg4 sendmsg6 socklb_affinity socklb_revnat socklb_services socklb_slots socklb_translations "
check "a service with two endpoints" drive set tcp 10.96.0.10:80 10.77.0.1:8080 10.77.0.2:8080
check "a UDP one" drive set udp 10.96.0.10:53 10.77.0.1:8081 10.77.0.2:8081

# 400 connections, each endpoint 200 +- 5 sd (10): within 150..250.
r=$(client in 400)
check "in the cgroup: every connection translated ($r)" test "$(field "$r" 'sum(r["replies"].values())')" = 400
check "equal chances ($r)" test "$(field "$r" 'all(150 <= r["replies"].get(p, 0) <= 250 for p in ("p1", "p2"))')" = True
r=$(client out 3)
check "outside the cgroup: not translated ($r)" test "$(field "$r" 'r["errors"].get("ENETUNREACH", 0)')" = 3

# What the application sees: getpeername() of a TCP socket, and the source
# of a UDP reply to an unconnected socket's sendto(), are the service's.
r=$(in_cgroup ip netns exec "$ns" python3 -c '
import socket
t = socket.create_connection(("10.96.0.10", 80), timeout=2)
peer = "%s:%d" % t.getpeername()
name = t.recv(64).split()[0].decode()
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
u.settimeout(2)
u.sendto(b"ping", ("10.96.0.10", 53))
data, src = u.recvfrom(64)
print(peer, name in ("p1", "p2"), "%s:%d" % src, data.split()[0].decode() in ("p1", "p2"))
' 2>&1)
check "getpeername() and recvfrom() show the service ($r)" test "$r" = "10.96.0.10:80 True 10.96.0.10:53 True"

check "ClientIP affinity" drive set tcp 10.96.0.10:80 affinity=600 10.77.0.1:8080 10.77.0.2:8080
r=$(client in 60)
check "one endpoint for every connection ($r)" test "$(field "$r" 'len(r["replies"]) == 1 and sum(r["replies"].values()) == 60')" = True
check "affinity off again" drive set tcp 10.96.0.10:80 10.77.0.1:8080 10.77.0.2:8080

check "an endpoint removed" drive set tcp 10.96.0.10:80 10.77.0.2:8080
r=$(client in 50)
check "only the one left ($r)" test "$(field "$r" 'r["replies"]')" = "{'p2': 50}"

# A restarted kproxy: programs reloaded into the pinned links, the maps
# reopened with what they hold (nothing set again).
check "attach again" drive attach "$cg"
r=$(client in 50)
check "after the re-attach, as before ($r)" test "$(field "$r" 'r["replies"]')" = "{'p2': 50}"

check "back to two endpoints" drive set tcp 10.96.0.10:80 10.77.0.1:8080 10.77.0.2:8080
check "a second service" drive set tcp 10.96.0.11:80 10.77.0.1:8080
check "the first set to no endpoints" drive set tcp 10.96.0.10:80
r=$(client in 3)
check "no endpoints: passed on untranslated ($r)" test "$(field "$r" 'r["errors"].get("ENETUNREACH", 0)')" = 3

# Batched writes (what a sync does): 7000 services of 10 slots in one
# batch is more than one 64k-slot bulk write; then all shrunk to 2 (the
# slots past the counts deleted after the counts are written).
check "7000 services written in one batch" drive bulk 7000 10
check "counted: 7002 services, 70003 slots" test "$(drive stats)" = "services=7002 slots=70003"
r=$(in_cgroup ip netns exec "$ns" python3 "$here/../e2e/client.py" 10.98.27.87 80 40 --timeout 1)
check "the last of them translated ($r)" test "$(field "$r" 'sorted(r["replies"])')" = "['p1', 'p2']"
check "all shrunk to two slots in one batch" drive bulk 7000 2
check "counted: 7002 services, 14003 slots" test "$(drive stats)" = "services=7002 slots=14003"
r=$(in_cgroup ip netns exec "$ns" python3 "$here/../e2e/client.py" 10.98.0.0 80 40 --timeout 1)
check "the first of them translated ($r)" test "$(field "$r" 'sorted(r["replies"])')" = "['p1', 'p2']"

check "set again, then unpinned" sh -c "$tmp/sockbpf-drive $bpffs set tcp 10.96.0.10:80 10.77.0.1:8080 && $tmp/sockbpf-drive $bpffs unpin"
check "nothing left pinned" test -z "$(pinned)"
r=$(client in 3)
check "unpinned: nothing translated ($r)" test "$(field "$r" 'r["errors"].get("ENETUNREACH", 0)')" = 3

echo "sockbpf: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
