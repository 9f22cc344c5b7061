#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# The node set-up kproxy does before its first sync (daemon/setup.h), through
# the real binary: --init-only in a network namespace of its own, where the
# per-namespace settings (conntrack timeouts, tcp_be_liberal,
# route_localnet, the nfacct counters) are written for real; the
# machine-wide ones (nf_conntrack_max, the hash size) only in a scratch tree
# given with $KPROXY_SYSROOT, or refused by the kernel (nf_conntrack_max is
# read-only outside the initial network namespace: the LXC/kind case).
# Also --oom-score-adj, on a daemon that cannot reach its API server.
#
# Usage: tests/netns/test-setup.sh BUILD_DIR   (root; iproute2, nfacct)
#
# Network safety: everything happens in the namespace kp-setup-<pid>,
# deleted on exit. The root namespace's conntrack settings are read before
# and after, and any difference fails the test.
set -u
build=$(cd "$1" && pwd)
ns="kp-setup-$$"
tmp=$(mktemp -d)
passed=0
failed=0
NF=/proc/sys/net/netfilter

host_settings() {
    cat $NF/nf_conntrack_max $NF/nf_conntrack_tcp_timeout_established $NF/nf_conntrack_tcp_timeout_close_wait \
        $NF/nf_conntrack_tcp_be_liberal $NF/nf_conntrack_udp_timeout $NF/nf_conntrack_udp_timeout_stream \
        /sys/module/nf_conntrack/parameters/hashsize /proc/sys/net/ipv4/conf/all/route_localnet 2>&1
}

cleanup() {
    for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$pid" 2>/dev/null; done
    ip netns del "$ns" 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT
trap "exit 1" INT TERM

# check WHAT CMD...
. "$(dirname "$0")/lib.sh"

in_ns() { ip netns exec "$ns" "$@"; }
nsget() { in_ns cat "$1"; }

before=$(host_settings)
ip netns add "$ns" || { echo "setup: cannot create a namespace"; exit 1; }
in_ns ip link set lo up

# An API server that does not exist: --init-only must never ask it.
master=(--master https://192.0.2.1:6443 --hostname-override node-1)

# 1. Defaults: upstream's timeouts written in the namespace, nothing else
# of conntrack's; route_localnet and the nfacct counters for iptables mode.
start=$(date +%s%N)
in_ns "$build/kproxy" --init-only "${master[@]}" -v=2 >"$tmp/out" 2>&1
rc=$?
took=$((($(date +%s%N) - start) / 1000000))
check "--init-only exits 0 (rc $rc): $(tail -3 "$tmp/out")" [ $rc -eq 0 ]
check "--init-only returns at once, without the API server (${took} ms)" [ $took -lt 5000 ]
check "no API request made" bash -c "! grep -q 'GET \\|192.0.2.1' '$tmp/out'"
check "tcp established timeout 24h" [ "$(nsget $NF/nf_conntrack_tcp_timeout_established)" = 86400 ]
check "tcp close-wait timeout 1h" [ "$(nsget $NF/nf_conntrack_tcp_timeout_close_wait)" = 3600 ]
check "tcp_be_liberal not asked for, left 0" [ "$(nsget $NF/nf_conntrack_tcp_be_liberal)" = 0 ]
check "route_localnet set for localhost NodePorts" [ "$(nsget /proc/sys/net/ipv4/conf/all/route_localnet)" = 1 ]
check "the nfacct counters exist" bash -c "ip netns exec '$ns' nfacct list | grep -q ct_state_invalid_dropped_pkts &&
    ip netns exec '$ns' nfacct list | grep -q localhost_nps_accepted_pkts"
check "the log names the settings with upstream's keys" \
    grep -q '"Set sysctl" entry="net/netfilter/nf_conntrack_tcp_timeout_established" value=86400' "$tmp/out"

# 2. Every conntrack flag, from a config file as kubeadm's ConfigMap holds it.
cat >"$tmp/config.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: nftables
conntrack:
  maxPerCore: 0
  tcpEstablishedTimeout: 2h0m0s
  tcpCloseWaitTimeout: 30s
  tcpBeLiberal: true
  udpTimeout: 45s
  udpStreamTimeout: 3m0s
EOF
in_ns "$build/kproxy" --init-only --config "$tmp/config.yaml" "${master[@]}" >"$tmp/out" 2>&1
rc=$?
check "--init-only with a config file exits 0 (rc $rc): $(tail -3 "$tmp/out")" [ $rc -eq 0 ]
check "tcp established timeout from the file" [ "$(nsget $NF/nf_conntrack_tcp_timeout_established)" = 7200 ]
check "tcp close-wait timeout from the file" [ "$(nsget $NF/nf_conntrack_tcp_timeout_close_wait)" = 30 ]
check "tcp_be_liberal from the file" [ "$(nsget $NF/nf_conntrack_tcp_be_liberal)" = 1 ]
check "udp timeout from the file" [ "$(nsget $NF/nf_conntrack_udp_timeout)" = 45 ]
check "udp stream timeout from the file" [ "$(nsget $NF/nf_conntrack_udp_timeout_stream)" = 180 ]

# 3. tcp_be_liberal leaves out iptables mode's INVALID drop rule from the
# first sync on: what the set-up wrote is what the renderer sees.
echo '{"apiVersion":"v1","kind":"List","items":[]}' >"$tmp/empty.json"
in_ns "$build/kproxy" render --hostname-override node-1 "$tmp/empty.json" >"$tmp/rules" 2>/dev/null
check "render probes tcp_be_liberal=1: no INVALID drop" bash -c "! grep -q 'ctstate INVALID' '$tmp/rules'"

# 4. The machine-wide settings, in a scratch tree: upstream's arithmetic
# with 8 CPUs (8 x 32768 = 262144 over the 131072 minimum).
root="$tmp/root"
mkdir -p "$root$NF" "$root/sys/module/nf_conntrack/parameters" "$root/sys/devices/system/cpu" \
    "$root/proc/sys/net/ipv4/conf/all"
echo 131072 >"$root$NF/nf_conntrack_max"
echo 16384 >"$root/sys/module/nf_conntrack/parameters/hashsize"
echo 0-7 >"$root/sys/devices/system/cpu/online"
for f in nf_conntrack_tcp_timeout_established nf_conntrack_tcp_timeout_close_wait nf_conntrack_tcp_be_liberal \
    nf_conntrack_udp_timeout nf_conntrack_udp_timeout_stream; do echo 0 >"$root$NF/$f"; done
echo 0 >"$root/proc/sys/net/ipv4/conf/all/route_localnet"
in_ns env KPROXY_SYSROOT="$root" "$build/kproxy" --init-only "${master[@]}" >"$tmp/out" 2>&1
rc=$?
check "--init-only with a scratch root exits 0 (rc $rc): $(tail -3 "$tmp/out")" [ $rc -eq 0 ]
check "scratch nf_conntrack_max raised to 262144" [ "$(cat "$root$NF/nf_conntrack_max")" = 262144 ]
check "scratch hash size raised to 65536" [ "$(cat "$root/sys/module/nf_conntrack/parameters/hashsize")" = 65536 ]
check "scratch timeouts written" [ "$(cat "$root$NF/nf_conntrack_tcp_timeout_established")" = 86400 ]
check "scratch route_localnet written" [ "$(cat "$root/proc/sys/net/ipv4/conf/all/route_localnet")" = 1 ]

# 5. A setting that cannot be written for another reason than permission (no
# nf_conntrack in the scratch tree): --init-only fails, naming it.
rm "$root$NF/nf_conntrack_tcp_timeout_close_wait"
in_ns env KPROXY_SYSROOT="$root" "$build/kproxy" --init-only "${master[@]}" >"$tmp/out" 2>&1
rc=$?
check "--init-only fails when a setting is missing (rc $rc)" [ $rc -ne 0 ]
check "the failure names the setting" grep -q 'nf_conntrack_tcp_timeout_close_wait.*No such file' "$tmp/out"

# 6. nf_conntrack_max is read-only in a network namespace, as in LXC or
# kind: asking for more than the node has is a warning, not a failure.
if in_ns test -w $NF/nf_conntrack_max; then
    echo "setup: nf_conntrack_max is writable in a namespace on this kernel: read-only case skipped"
else
    want=$(($(cat $NF/nf_conntrack_max) * 2))
    in_ns "$build/kproxy" --init-only --conntrack-min "$want" --conntrack-max-per-core 1 "${master[@]}" >"$tmp/out" 2>&1
    rc=$?
    check "a read-only nf_conntrack_max is not fatal (rc $rc): $(tail -3 "$tmp/out")" [ $rc -eq 0 ]
    check "the warning names nf_conntrack_max" grep -q '^W.*nf_conntrack_max' "$tmp/out"
fi

# 7. --oom-score-adj on the daemon (the API server never answers; the
# process runs on, retrying). Raising is always allowed; lowering needs
# CAP_SYS_RESOURCE, and without it kproxy warns and runs on.
for adj in 500 -999; do
    ip netns exec "$ns" "$build/kproxy" "${master[@]}" --oom-score-adj "$adj" \
        >"$tmp/daemon" 2>&1 &
    pid=$!
    # Until the value is set or the warning is out (which comes first on
    # a loaded machine can take seconds: once it waited for a log line for
    # 5 s and read the value before the daemon had got to it).
    got=""
    for _ in $(seq 400); do
        got=$(cat "/proc/$pid/oom_score_adj" 2>/dev/null)
        [ "$got" = "$adj" ] && break
        grep -q "^W.*oom_score_adj to $adj" "$tmp/daemon" 2>/dev/null && break
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.05
    done
    alive=0
    kill -0 "$pid" 2>/dev/null && alive=1
    kill "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
    check "the daemon runs on with --oom-score-adj $adj" [ $alive -eq 1 ]
    if [ "$got" = "$adj" ]; then
        passed=$((passed + 1))
    else
        check "oom_score_adj $adj: either set or warned about (got $got)" grep -q "^W.*oom_score_adj to $adj" "$tmp/daemon"
    fi
done

after=$(host_settings)
check "the machine's own conntrack settings are unchanged" [ "$before" = "$after" ]

echo "setup: $passed passed, $failed failed"
[ $failed -eq 0 ]
