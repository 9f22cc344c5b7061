#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# `make demo`: what `kproxy render` makes of the bundled example, then (as
# root) kproxy doing its job live on it: examples/demo.py.
set -eu
build=${1:-build}
mode=${2:-iptables}
here=$(cd "$(dirname "$0")" && pwd)
echo "\$ kproxy render --proxy-mode $mode --hostname-override node-1 --cluster-cidr 10.244.0.0/16 examples/cluster.yaml | grep shop/web"
"$build/kproxy" render --proxy-mode "$mode" --hostname-override node-1 --cluster-cidr 10.244.0.0/16 \
    --host-addresses 127.0.0.1/8,192.168.50.11/24 --host-nfacct=false --host-random-fully=true \
    --host-tcp-be-liberal=false "$here/cluster.yaml" | grep 'shop/web' | sed 's/^/  /'
echo
if [ "$(id -u)" -ne 0 ]; then
    echo "(run as root to see kproxy program a namespaced test cluster and serve traffic)"
    exit 0
fi
exec python3 "$here/demo.py" "$build" "$mode"
