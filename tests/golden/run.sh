#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Golden tests of `kproxy render`.   Usage: tests/golden/run.sh BUILD_DIR
#
# Each directory tests/golden/<scenario>/ holding an `args` file is a scenario:
#   state.json / state.yaml  the input (all present state.* files are passed,
#                            relative to the scenario directory)
#   args                     one line: extra flags for render
#   expected.iptables        the expected output in normalised form (normalize.py)
#   expected.exit            optional, the expected exit status (default 0)
#   expected.stderr-contains optional, one fixed string per line, each of which
#                            must occur in stderr
#   expected.stderr-lines    optional, the exact number of lines on stderr
# With a non-zero expected exit status and no expected.iptables, stdout must
# be empty.
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
trap 'rm -rf "$tmp"' EXIT

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
    if [ -f "$dir/expected.iptables" ]; then
        if python3 "$here/normalize.py" <"$tmp/stdout" >"$tmp/actual" 2>"$tmp/normerr"; then
            if ! diff -u --label "$name/expected.iptables" --label "$name/actual" \
                    "$dir/expected.iptables" "$tmp/actual" >"$tmp/diff"; then
                fail "$name" "output differs"
                cat "$tmp/diff"
            fi
        else
            fail "$name" "output does not normalise: $(cat "$tmp/normerr")"
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

echo "golden: $passed passed, $failed failed"
[ "$failed" = 0 ]
