# SPDX-License-Identifier: Apache-2.0
# Shared by the tests in tests/netns (sourced). The caller sets $build (the
# build directory, absolute) and $tmp (its scratch directory).

netns_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

# build_driver NAME: compiles tests/netns/NAME.c against $build's core
# library into $tmp/NAME, with the sanitizers if the library has them.
# On failure prints the compiler's complaint and returns 1.
# core_sanitized: whether $build's core library was built with ASan.
core_sanitized() {
    nm "$build/libkproxy-core.a" 2>/dev/null | grep -q __asan_
}

build_driver() {
    local sanitize=""
    if core_sanitized; then
        sanitize="-fsanitize=address,undefined -fno-omit-frame-pointer"
    fi
    # shellcheck disable=SC2046,SC2086
    cc -std=gnu11 -g -O1 -Wall -Wextra -Werror -D_GNU_SOURCE -I"$netns_dir/../../src" $sanitize \
        -o "$tmp/$1" "$netns_dir/$1.c" "$build/libkproxy-core.a" \
        $(pkg-config --libs jansson yaml-0.1 libcrypto libcurl libmicrohttpd libnetfilter_conntrack libmnl libbpf) -lm \
        2>"$tmp/cc.err" || { cat "$tmp/cc.err"; return 1; }
}

# render_state STATE OUT: the iptables-restore input `kproxy render` writes
# for a state file (bench/gen_cluster.py's node-0), host facts pinned.
render_state() {
    "$build/kproxy" render --hostname-override node-0 --cluster-cidr 10.128.0.0/9 \
        --host-addresses 127.0.0.1/8,192.168.0.2/24 --host-nfacct=false --host-random-fully=true \
        --host-tcp-be-liberal=false "$1" >"$2" 2>"$tmp/render.err" ||
        { head -3 "$tmp/render.err"; return 1; }
}

# saved_chains NS: the KUBE- chains of every table in NS with their rules,
# sorted by table and name (iptables-save lists chains in creation order,
# which differs between ways of loading the same rules).
saved_chains() {
    ip netns exec "$1" iptables-save | python3 -c '
import sys, collections
table, rules = None, collections.OrderedDict()
for l in sys.stdin:
    l = l.rstrip("\n")
    if l.startswith("*"): table = l[1:]
    elif l.startswith(":KUBE-"): rules.setdefault((table, l.split()[0][1:]), [])
    elif l.startswith("-A KUBE-"): rules.setdefault((table, l.split()[1]), []).append(l)
for k in sorted(rules):
    print("%s %s" % k)
    for r in rules[k]: print("  " + r)
'
}

# check WHAT CMD...: runs CMD and counts it in $passed or $failed (the
# caller starts both at 0), printing "FAIL: WHAT" when it fails.
check() {
    local what=$1
    shift
    if "$@"; then
        passed=$((passed + 1))
    else
        echo "FAIL: $what"
        failed=$((failed + 1))
    fi
}
