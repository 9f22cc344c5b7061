#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Golden tests of `kproxy render --proxy-mode nftables`.
#   Usage: tests/golden-nft/run.sh BUILD_DIR
#
# Each directory tests/golden-nft/<scenario>/ holding an `args` file is a scenario:
#   state.json / state.yaml  the input (all present state.* files are passed,
#                            relative to the scenario directory)
#   args                     one line: extra flags for render (incl. --proxy-mode nftables)
#   expected.nft             the expected output in normalised form (normalize.py)
#   expected.exit            optional, the expected exit status (default 0)
#   expected.stderr-contains optional, one fixed string per line, each of which
#                            must occur in stderr
#   expected.stderr-matches  optional, one extended regular expression (grep -E)
#                            per line, each of which must match some stderr line
#   expected.stderr-lines    optional, the exact number of lines on stderr
# With a non-zero expected exit status and no expected.nft, stdout must be empty.
#
# When run as root with `nft` and `ip` available, every rendered script (as
# rendered, not normalised) is also checked with `nft -c -f` inside a fresh
# network namespace kp-nftg-<pid>-<n>, deleted afterwards; a refusal is a
# failure. Set NFT_CHECK=0 to skip this.
#
# There is deliberately no UPDATE=1 mode: golden files are derived by hand
# from the reference and reviewed, never regenerated from kproxy's output.
set -u

if [ $# -ne 1 ]; then
    echo "usage: $0 BUILD_DIR" >&2
    exit 2
fi
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "$1" 2>/dev/null && pwd) || { echo "$0: no directory $1" >&2; exit 2; }
kproxy=$build/kproxy
if [ ! -x "$kproxy" ]; then
    echo "$0: $kproxy is not built" >&2
    exit 2
fi
if [ -n "${UPDATE:-}" ]; then
    echo "$0: UPDATE is not supported: golden files are written and reviewed by hand" >&2
fi
export PYTHONDONTWRITEBYTECODE=1
tmp=$(mktemp -d)
netns_list=()
cleanup() {
    local ns
    for ns in "${netns_list[@]+"${netns_list[@]}"}"; do
        ip netns delete "$ns" 2>/dev/null
    done
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

nft_check=0
if [ "${NFT_CHECK:-1}" != 0 ] && [ "$(id -u)" = 0 ] &&
        command -v nft >/dev/null 2>&1 && command -v ip >/dev/null 2>&1; then
    nft_check=1
    echo "nft -c checks on ($(nft --version 2>/dev/null))"
else
    echo "nft -c checks off (need root, nft and ip; NFT_CHECK=${NFT_CHECK:-1})"
fi
nscount=0

passed=0
failed=0
fail() {
    echo "FAIL $1: $2"
    ok=0
}

# The normaliser is part of the test: check it first.
if python3 "$here/selftest.py" >"$tmp/selftest" 2>&1; then
    echo "ok   normalize selftest"
    passed=$((passed + 1))
else
    echo "FAIL normalize selftest:"
    cat "$tmp/selftest"
    failed=$((failed + 1))
fi

for dir in "$here"/*/; do
    dir=${dir%/}
    name=$(basename "$dir")
    [ -f "$dir/args" ] || continue
    ok=1
    states=()
    for f in state.json state.yaml; do
        [ -f "$dir/$f" ] && states+=("$f")
    done
    read -r -a args <"$dir/args" || true
    want_exit=0
    [ -f "$dir/expected.exit" ] && want_exit=$(tr -d ' \n' <"$dir/expected.exit")

    (cd "$dir" && exec timeout 120 "$kproxy" render "${args[@]}" "${states[@]}") \
        >"$tmp/stdout" 2>"$tmp/stderr" </dev/null
    got_exit=$?

    if [ "$got_exit" != "$want_exit" ]; then
        fail "$name" "exit status $got_exit, expected $want_exit"
    fi
    if [ -f "$dir/expected.nft" ]; then
        if python3 "$here/normalize.py" <"$tmp/stdout" >"$tmp/actual" 2>"$tmp/normerr"; then
            if ! diff -u --label "$name/expected.nft" --label "$name/actual" \
                    "$dir/expected.nft" "$tmp/actual" >"$tmp/diff"; then
                fail "$name" "output differs"
                cat "$tmp/diff"
            fi
        else
            fail "$name" "output does not normalise: $(cat "$tmp/normerr")"
        fi
        if [ $nft_check = 1 ] && [ -s "$tmp/stdout" ]; then
            nscount=$((nscount + 1))
            ns=kp-nftg-$$-$nscount
            if ip netns add "$ns" 2>"$tmp/nserr"; then
                netns_list+=("$ns")
                if ! ip netns exec "$ns" nft -c -f "$tmp/stdout" >"$tmp/nfterr" 2>&1; then
                    fail "$name" "nft -c -f refuses the rendered script:"
                    head -n 20 "$tmp/nfterr"
                fi
                ip netns delete "$ns" 2>/dev/null
            else
                fail "$name" "cannot create network namespace $ns: $(cat "$tmp/nserr")"
            fi
        fi
    elif [ "$want_exit" != 0 ] && [ -s "$tmp/stdout" ]; then
        fail "$name" "wrote to stdout although it failed:"
        head -n 5 "$tmp/stdout"
    fi
    if [ -f "$dir/expected.stderr-contains" ]; then
        while IFS= read -r want || [ -n "$want" ]; do
            [ -n "$want" ] || continue
            grep -qF -- "$want" "$tmp/stderr" || fail "$name" "stderr lacks: $want"
        done <"$dir/expected.stderr-contains"
    fi
    if [ -f "$dir/expected.stderr-matches" ]; then
        while IFS= read -r want || [ -n "$want" ]; do
            [ -n "$want" ] || continue
            grep -qE -- "$want" "$tmp/stderr" || fail "$name" "no stderr line matches: $want"
        done <"$dir/expected.stderr-matches"
    fi
    if [ -f "$dir/expected.stderr-lines" ]; then
        want_lines=$(tr -d ' \n' <"$dir/expected.stderr-lines")
        got_lines=$(grep -c '' "$tmp/stderr")
        [ "$got_lines" = "$want_lines" ] ||
            fail "$name" "$got_lines lines on stderr, expected $want_lines"
    fi
    if [ $ok = 1 ]; then
        echo "ok   $name"
        passed=$((passed + 1))
    else
        if [ -s "$tmp/stderr" ]; then
            echo "--- $name stderr:"
            head -n 20 "$tmp/stderr"
        fi
        failed=$((failed + 1))
    fi
done

echo "golden-nft: $passed passed, $failed failed"
[ "$failed" = 0 ]
