#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# `make demo`: render the bundled example cluster as node-1 would see it,
# show what each service became, and, when run as root, load the rules into
# a throw-away network namespace to show the kernel takes them.
set -eu
build=${1:-build}
here=$(cd "$(dirname "$0")" && pwd)
kproxy=$build/kproxy
out=$(mktemp)
ns="kp-demo-$$"
cleanup() {
    ip netns del "$ns" 2>/dev/null || true
    rm -f "$out"
}
trap cleanup EXIT INT TERM

flags=(--hostname-override node-1 --cluster-cidr 10.244.0.0/16
       --host-addresses 127.0.0.1/8,192.168.50.11/24 --host-nfacct=false --host-random-fully=true
       --host-tcp-be-liberal=false)
echo "\$ kproxy render ${flags[*]} examples/cluster.yaml"
"$kproxy" render "${flags[@]}" "$here/cluster.yaml" >"$out"
cat "$out"
echo
echo "== What node-1 does with each service =="
for svc in default/kubernetes:https kube-system/kube-dns:dns shop/web:http shop/api:http shop/front:https shop/cart:http; do
    seps=$(grep -c -- "-A KUBE-SEP-.* --comment $svc -m" "$out" || true)
    filter=$(sed -n '/^\*filter/,/^COMMIT/p' "$out" | grep -o -- "\"$svc [^\"]*\"" | sort -u | tr '\n' ' ' || true)
    printf '  %-28s %s endpoint chain(s) %s\n' "$svc" "$seps" "$filter"
done
echo "  $(grep -c '^-A' "$out") rules, $(grep -c '^:' "$out") chains"

if [ "$(id -u)" -eq 0 ] && command -v ip >/dev/null && command -v iptables-restore >/dev/null; then
    echo
    echo "== Loading them into network namespace $ns (iptables-restore --noflush) =="
    ip netns add "$ns"
    ip netns exec "$ns" iptables-restore -w 5 --noflush --counters <"$out"
    ip netns exec "$ns" iptables-save -t nat | grep -E '^:KUBE-(SVC|SVL|EXT|FW)-' | sed 's/^/  /'
    echo "  the kernel holds $(ip netns exec "$ns" iptables-save | grep -c '^-A KUBE-') kproxy rules; removing the namespace"
fi
