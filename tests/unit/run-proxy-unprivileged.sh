#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The proxy floor's unit tests need no root (issue 34): every .c in
# src/proxy/ and below has a test beside it in tests/unit/ (test-<name>.c
# or test-<name>-<what>.c in the mirrored folder), and each of those runs,
# and passes without skipping, as user nobody. Tests that need a kernel of
# their own enter a network namespace owned by a user namespace
# (tests/unit/netns.h); eBPF ones link a fake of the maps.
# Usage: tests/unit/run-proxy-unprivileged.sh BUILD_DIR
set -u
build=$1
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root" || exit 1
bad=0

for src in $(find src/proxy -name '*.c' | sort); do
    dir=tests/unit/${src#src/}
    dir=${dir%/*}
    name=$(basename "$src" .c)
    if ! compgen -G "$dir/test-$name.c" >/dev/null && ! compgen -G "$dir/test-$name-*.c" >/dev/null; then
        echo "$src: no unit test in $dir (test-$name.c)"
        bad=1
    fi
done

if [ "$(id -u)" != 0 ]; then
    echo "running as $(id -un) already: the unit stage ran them unprivileged"
    exit $bad
fi
as_nobody=(setpriv --reuid=65534 --regid=65534 --clear-groups)
if ! "${as_nobody[@]}" unshare -Urn true 2>/dev/null; then
    echo "skipped: unprivileged user namespaces are off on this machine"
    exit $bad
fi

# A copy nobody can reach, wherever the build is.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
chmod 755 "$tmp"
n=0
for t in $(find tests/unit/proxy -name 'test-*.c' | sort); do
    bin=$(basename "$t" .c)
    cp "$build/tests/$bin" "$tmp/"
    out=$(cd "$tmp" && "${as_nobody[@]}" "./$bin" 2>&1)
    rc=$?
    n=$((n + 1))
    if [ $rc != 0 ] || grep -qi "skipped" <<<"$out"; then
        echo "$out" | tail -20
        echo "$bin: failed or skipped as nobody (exit $rc)"
        bad=1
    fi
done
echo "$n proxy unit tests passed as nobody"
exit $bad
