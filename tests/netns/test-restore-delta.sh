#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Partial syncs by rule (apply/iptables-delta.h) against the kernel: a
# cluster goes through changes (endpoints replaced, services removed and
# added, a service losing all its endpoints, a NodePort service removed);
# each step is restored over the previous one with the top-level chains
# left alone or changed by -D/-I, and must leave the kernel as a fresh
# load of the same rules in another namespace (compared chain by chain,
# rule order included).
#
# Usage: tests/netns/test-restore-delta.sh BUILD_DIR   (root; iproute2, iptables, python3, cc, pkg-config)
#
# Network safety: namespaces kp-delta-<pid>-{a,c}, deleted on exit.
set -u
here=$(cd "$(dirname "$0")" && pwd)
bench=$(cd "$here/../../bench" && pwd)
build=$(cd "$1" && pwd)
tmp=$(mktemp -d)
# shellcheck source=tests/netns/lib.sh
. "$here/lib.sh"
A="kp-delta-$$-a" C="kp-delta-$$-c"
passed=0
failed=0

cleanup() {
    for ns in "$A" "$C"; do ip netns del "$ns" 2>/dev/null; done
    rm -rf "$tmp"
}
trap cleanup EXIT INT TERM

fail_all() {
    echo "netns restore-delta: $1"
    echo "netns-restore-delta: $passed passed, $((failed + 1)) failed"
    exit 1
}
[ "$(id -u)" -eq 0 ] || fail_all "needs root"
for tool in ip iptables-restore python3 cc pkg-config; do
    command -v "$tool" >/dev/null || fail_all "needs $tool"
done
build_driver restore-delta || fail_all "cannot build restore-delta"
ip netns add "$A" || fail_all "cannot create $A"

# The cluster's states: step 0 from bench/gen_cluster.py, each next one a
# change of the previous.
python3 "$bench/gen_cluster.py" 200 4 node-0 >"$tmp/state-0.json" || fail_all "gen_cluster failed"
python3 - "$tmp" <<'PY' || fail_all "cannot write the states"
import copy, json, sys
tmp = sys.argv[1]
state = json.load(open(tmp + "/state-0.json"))
items = state["items"]
def find(kind, name):
    return next(i for i in items if i["kind"] == kind and
                (i["metadata"]["name"] == name or
                 i["metadata"].get("labels", {}).get("kubernetes.io/service-name") == name))
def svc_names():
    return [i["metadata"]["name"] for i in items if i["kind"] == "Service"]
def save(n):
    json.dump(state, open("%s/state-%d.json" % (tmp, n), "w"))
names = svc_names()
# 1: endpoints replaced in three services (their own chains carry it).
for k, name in enumerate(names[5:8]):
    find("EndpointSlice", name)["endpoints"][0]["addresses"] = ["10.200.9.%d" % k]
save(1)
# 2: two services gone (one of them NodePort), two new ones.
nodeport = next(i["metadata"]["name"] for i in items if i["kind"] == "Service" and i["spec"].get("type") == "NodePort")
for name in (names[3], nodeport):
    s, sl = find("Service", name), find("EndpointSlice", name)
    items.remove(s)
    items.remove(sl)
for k in range(2):
    s = copy.deepcopy(find("Service", names[11]))
    sl = copy.deepcopy(find("EndpointSlice", names[11]))
    s["metadata"]["name"] = "added%d" % k
    s["spec"]["clusterIP"] = s["spec"]["clusterIPs"][0] = "10.99.0.%d" % (k + 1)
    sl["metadata"]["name"] = "added%d-abc" % k
    sl["metadata"]["labels"]["kubernetes.io/service-name"] = "added%d" % k
    items += [s, sl]
save(2)
# 3: a service loses every endpoint (nat rule out, filter REJECT in).
find("EndpointSlice", names[20])["endpoints"] = []
save(3)
PY

render() {  # render STEP: the restore input, plus the stale owned chains flushed and deleted
    render_state "$tmp/state-$1.json" "$tmp/plain-$1" >"$tmp/why" || fail_all "render $1 failed: $(cat "$tmp/why")"
    ip netns exec "$A" iptables-save -t nat | grep -o '^:KUBE-\(SVC\|SVL\|EXT\|FW\|SEP\)-[A-Z0-9]*' | tr -d : |
        sort >"$tmp/old"
    grep -o '^:KUBE-\(SVC\|SVL\|EXT\|FW\|SEP\)-[A-Z0-9]*' "$tmp/plain-$1" | tr -d : | sort >"$tmp/new"
    python3 - "$tmp/plain-$1" <(comm -23 "$tmp/old" "$tmp/new") >"$tmp/in-$1" <<'PY'
import sys
text, stale = open(sys.argv[1]).read(), open(sys.argv[2]).read().split()
head, rest = text.split("*nat\n", 1)
body, tail = rest.rsplit("COMMIT\n", 1)
sys.stdout.write(head + "*nat\n" + "".join(":%s - [0:0]\n" % c for c in stale) + body +
                 "".join("-X %s\n" % c for c in stale) + "COMMIT\n" + tail)
PY
}


render 0
ip netns exec "$A" iptables-restore -w 5 --noflush --counters <"$tmp/in-0" || fail_all "first load failed"
# what each step must send: at least this many -D and -I lines, and
# whether nat KUBE-SERVICES may be written whole (never, here)
want_d=(x 0 3 1) want_i=(x 0 2 0)
for step in 1 2 3; do
    render "$step"
    stats=$(ip netns exec "$A" "$tmp/restore-delta" 4 "$tmp/in-$((step - 1))" "$tmp/in-$step") ||
        fail_all "step $step: the restore by rule failed"
    read -r chains dels ins <<<"$stats"
    ip netns add "$C" || fail_all "cannot create $C"
    ip netns exec "$C" iptables-restore -w 5 --noflush --counters <"$tmp/plain-$step" || fail_all "fresh load failed"
    saved_chains "$A" >"$tmp/x1"
    saved_chains "$C" >"$tmp/x2"
    ip netns del "$C"
    if ! cmp -s "$tmp/x1" "$tmp/x2"; then
        echo "FAIL step $step: the kernel differs from a fresh load:"
        diff "$tmp/x2" "$tmp/x1" | head -20
        failed=$((failed + 1))
    elif [ "$chains" -lt 5 ] || [ "$dels" -lt "${want_d[$step]}" ] || [ "$ins" -lt "${want_i[$step]}" ] ||
         [ $((dels + ins)) -gt 12 ]; then
        echo "FAIL step $step: $chains top-level chains by rule or left alone, $dels -D, $ins -I"
        failed=$((failed + 1))
    else
        echo "ok   step $step == fresh load ($chains top-level chains by rule or left alone, $dels -D, $ins -I)"
        passed=$((passed + 1))
    fi
done

echo "netns-restore-delta: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
