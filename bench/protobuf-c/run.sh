#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# protobuf-c against kproxy's own reader (README.md): `make bench-protobuf-c`.
# Usage: bench/protobuf-c/run.sh BUILD_DIR [SERVICES]
# Builds bench-pbc from slice.proto with protoc-c, serves SERVICES (default
# 10000) services' EndpointSlices from the stand-in API server on loopback,
# and reads the protobuf list both ways, three times.
set -eu
build=$1
n=${2:-10000}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
tmp=$(mktemp -d)
trap 'kill $kapi 2>/dev/null || true; rm -rf "$tmp"' EXIT

protoc-c --proto_path="$here" --c_out="$tmp" "$here/slice.proto"
cc -O2 -g -D_GNU_SOURCE -I"$root/src" -I"$tmp" -o "$tmp/bench-pbc" "$here/bench-pbc.c" "$tmp/slice.pb-c.c" \
    "$build/libkproxy-core.a" -lprotobuf-c -ljansson
python3 "$root/bench/gen_cluster.py" --unique-nodeports "$n" 10 node-0 > "$tmp/state.json"
python3 "$root/tests/apiserver/kapi.py" --state "$tmp/state.json" --port-file "$tmp/ports" --exit-with-parent \
    > "$tmp/kapi.log" 2>&1 &
kapi=$!
for _ in $(seq 600); do [ -s "$tmp/ports" ] && break; sleep 0.1; done     # the state loads first
port=$(head -1 "$tmp/ports")
curl -sf -H "Accept: application/vnd.kubernetes.protobuf" -o "$tmp/slices.pb" \
    "http://127.0.0.1:$port/apis/discovery.k8s.io/v1/endpointslices?resourceVersion=0"
for _ in 1 2 3; do "$tmp/bench-pbc" "$tmp/slices.pb" 5; done
