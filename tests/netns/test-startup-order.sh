#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Start-up order (issue 32): flags, the --config file and the API client's
# configuration are all checked before kproxy changes anything on the node.
# Each refused start runs in a network namespace of its own kind (one per
# mode) and must exit non-zero with everything kproxy may write there
# unchanged: the conntrack sysctls, route_localnet, tcp_tw_reuse, the
# nfacct counters, any netfilter table (nf_tables or legacy), the
# kube-proxy0 link. A start that gets past the checks (--init-only) must
# change that same snapshot, so the comparison can fail. And a setting
# whose write fails is never logged as set.
#
# Usage: tests/netns/test-startup-order.sh BUILD_DIR   (root; iproute2, nfacct, nft)
#
# Network safety: everything happens in the namespaces kp-order-<mode>-<pid>,
# deleted on exit.
set -u
build=$(cd "$1" && pwd)
tmp=$(mktemp -d)
passed=0
failed=0
namespaces=()
NF=/proc/sys/net/netfilter

cleanup() {
    local ns pid
    for ns in "${namespaces[@]}"; do
        for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$pid" 2>/dev/null; done
        ip netns del "$ns" 2>/dev/null
    done
    rm -rf "$tmp"
}
trap cleanup EXIT
trap "exit 1" INT TERM

. "$(dirname "$0")/lib.sh"

# snapshot NS: every setting and object kproxy's node set-up may write.
snapshot() {
    local f
    for f in $NF/nf_conntrack_max $NF/nf_conntrack_tcp_timeout_established $NF/nf_conntrack_tcp_timeout_close_wait \
        $NF/nf_conntrack_tcp_be_liberal $NF/nf_conntrack_udp_timeout $NF/nf_conntrack_udp_timeout_stream \
        /proc/sys/net/ipv4/conf/all/route_localnet /proc/sys/net/ipv4/tcp_tw_reuse; do
        echo "$f=$(ip netns exec "$1" cat "$f" 2>&1)"
    done
    echo "nfacct: $(ip netns exec "$1" nfacct list 2>&1 | grep -o 'name = [a-z_]*' | tr '\n' ' ')"
    echo "nft: $(ip netns exec "$1" nft list tables 2>&1 | tr '\n' ' ')"
    echo "legacy: $(ip netns exec "$1" cat /proc/net/ip_tables_names /proc/net/ip6_tables_names 2>&1 | tr '\n' ' ')"
    echo "links: $(ip netns exec "$1" ip -o link show 2>&1 | awk -F': ' '{print $2}' | tr '\n' ' ')"
}

cat >"$tmp/broken.yaml" <<'EOF'
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: [not, a, mode
EOF
printf 'apiVersion: v1\nkind: Config\nclusters: [\n' >"$tmp/kubeconfig-broken"
cat >"$tmp/kubeconfig-nocontext" <<'EOF'
apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://192.0.2.1:6443"}}]
users: [{name: u, user: {}}]
contexts: []
current-context: missing
EOF
# The config file of kubeadm's ConfigMap, with its kubeconfig not there.
cat >"$tmp/config-no-kubeconfig.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection:
  kubeconfig: $tmp/var/lib/kube-proxy/kubeconfig.conf
EOF

# refused MODE WHAT ARGS...: kproxy ARGS (in MODE) exits non-zero and the
# namespace is as it was. Runs without the in-cluster environment, as on a
# host.
refused() {
    local mode=$1 what=$2 ns="kp-order-$1-$$" before after rc
    shift 2
    before=$(snapshot "$ns")
    ip netns exec "$ns" env -u KUBERNETES_SERVICE_HOST -u KUBERNETES_SERVICE_PORT \
        timeout 20 "$build/kproxy" "$@" >"$tmp/out" 2>&1
    rc=$?
    after=$(snapshot "$ns")
    check "$mode, $what: refused (rc $rc; 124 is a timeout): $(tail -2 "$tmp/out")" \
        [ $rc -ne 0 ] && [ $rc -ne 124 ]
    if [ "$before" != "$after" ]; then
        echo "FAIL: $mode, $what: the node changed before kproxy refused to start:"
        diff <(echo "$before") <(echo "$after") | sed 's/^/    /'
        failed=$((failed + 1))
    else
        passed=$((passed + 1))
    fi
    check "$mode, $what: nothing logged as set" bash -c "! grep -q '\"Set sysctl\"\|Set net\\.' '$tmp/out'"
}

master=(--master https://192.0.2.1:6443 --hostname-override node-1)
for mode in iptables nftables userspace; do
    ns="kp-order-$mode-$$"
    ip netns add "$ns" || { echo "startup-order: cannot create a namespace"; exit 1; }
    namespaces+=("$ns")
    ip netns exec "$ns" ip link set lo up
    m=(--proxy-mode "$mode")

    refused "$mode" "no kubeconfig, no --master, not in a cluster" "${m[@]}" --hostname-override node-1
    refused "$mode" "--config naming a kubeconfig that is not there" "${m[@]}" \
        --config "$tmp/config-no-kubeconfig.yaml"
    refused "$mode" "--kubeconfig not there" "${m[@]}" --kubeconfig "$tmp/nonexistent"
    refused "$mode" "--kubeconfig malformed" "${m[@]}" --kubeconfig "$tmp/kubeconfig-broken"
    refused "$mode" "--kubeconfig without its current context" "${m[@]}" --kubeconfig "$tmp/kubeconfig-nocontext"
    refused "$mode" "--master not a URL" "${m[@]}" --master "https://[::1" --hostname-override node-1
    refused "$mode" "--config malformed" --config "$tmp/broken.yaml" "${master[@]}"
    refused "$mode" "--config not there" --config "$tmp/nonexistent.yaml" "${master[@]}"
    refused "$mode" "an unknown feature gate" "${m[@]}" --feature-gates NoSuchGate=true "${master[@]}"
    refused "$mode" "a malformed --bind-address" "${m[@]}" --bind-address 10.0.0.300 "${master[@]}"
    refused "$mode" "an unknown flag" "${m[@]}" --no-such-flag "${master[@]}"
    refused "$mode" "--healthz-bind-address not on the node, with --bind-address-hard-fail" "${m[@]}" \
        --bind-address-hard-fail --healthz-bind-address 192.0.2.7:10256 "${master[@]}"
    refused "$mode" "--init-only without an API connection" "${m[@]}" --init-only --hostname-override node-1
    [ "$mode" = userspace ] && refused "$mode" "--socket-lb" "${m[@]}" --socket-lb "${master[@]}"

    # The control: past the checks, --init-only changes the same snapshot.
    before=$(snapshot "$ns")
    ip netns exec "$ns" "$build/kproxy" "${m[@]}" --init-only "${master[@]}" >"$tmp/out" 2>&1
    rc=$?
    after=$(snapshot "$ns")
    check "$mode: --init-only past the checks exits 0 (rc $rc): $(tail -2 "$tmp/out")" [ $rc -eq 0 ]
    check "$mode: --init-only changes what the snapshot reads" [ "$before" != "$after" ]
    check "$mode: --init-only logs what it set" grep -q '"Set sysctl"' "$tmp/out"
done
for mode in ipvs IPTables Nftables; do
    refused iptables "--proxy-mode $mode" --proxy-mode "$mode" "${master[@]}"
done

# A write that fails (the setting is a directory in a scratch root) is a
# warning naming it, never a "Set sysctl" line.
root="$tmp/root"
mkdir -p "$root$NF" "$root/sys/module/nf_conntrack/parameters" "$root/proc/sys/net/ipv4/conf/all"
echo 262144 >"$root$NF/nf_conntrack_max"
echo 65536 >"$root/sys/module/nf_conntrack/parameters/hashsize"
for f in nf_conntrack_tcp_timeout_close_wait nf_conntrack_tcp_be_liberal nf_conntrack_udp_timeout \
    nf_conntrack_udp_timeout_stream; do echo 0 >"$root$NF/$f"; done
mkdir "$root$NF/nf_conntrack_tcp_timeout_established"
mkdir "$root/proc/sys/net/ipv4/conf/all/route_localnet"
ns="kp-order-iptables-$$"
ip netns exec "$ns" env KPROXY_SYSROOT="$root" "$build/kproxy" --init-only "${master[@]}" >"$tmp/out" 2>&1
check "a failed write is a warning naming it" grep -q '^W.*nf_conntrack_tcp_timeout_established' "$tmp/out"
check "a failed write is not logged as set: $(grep 'Set' "$tmp/out" | head -3)" \
    bash -c "! grep -q 'entry=\"net/netfilter/nf_conntrack_tcp_timeout_established\"' '$tmp/out'"
check "the writes that worked are logged as set" \
    grep -q 'entry="net/netfilter/nf_conntrack_tcp_timeout_close_wait" value=3600' "$tmp/out"
check "route_localnet's failure is a warning, not a line saying it was set" \
    bash -c "grep -q '^W.*route_localnet' '$tmp/out' && ! grep -q '^I.*Set net.ipv4.conf.all.route_localnet' '$tmp/out'"

echo "startup-order: $passed passed, $failed failed"
[ $failed -eq 0 ]
