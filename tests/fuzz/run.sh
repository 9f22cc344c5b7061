#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Runs libFuzzer harnesses one after the other, each for SECONDS, from its
# checked-in seeds (tests/fuzz/corpus/NAME) and what earlier runs found
# (BUILD_DIR/corpus/NAME, where new inputs go), and prints what each did:
# executions, libFuzzer's coverage (cov: edges, ft: features) and corpus.
# A crash, leak, timeout, out-of-memory or sanitizer report fails the
# harness; its input is left in BUILD_DIR/artifacts/NAME/ and its log in
# BUILD_DIR/NAME.log.
#
#   Usage: tests/fuzz/run.sh BUILD_DIR SECONDS NAME...
#
# With FUZZ_RUNS=N in the environment, a harness also stops after N
# executions (whichever comes first).
set -u

if [ $# -lt 3 ]; then
    echo "usage: $0 BUILD_DIR SECONDS NAME..." >&2
    exit 2
fi
build=$1
seconds=$2
shift 2
here=$(cd "$(dirname "$0")" && pwd)

# The largest input each harness is given: the state files and watch
# streams need room for several objects, the rest stay small.
max_len() {
    case $1 in
    state | watch | nft-dump | proto) echo 16384 ;;
    iptables | decode) echo 8192 ;;
    *) echo 4096 ;;
    esac
}

passed=0
failed=0
summary=$(printf '%-11s %12s %8s %6s %7s %7s  %s' harness executions exec/s cov ft corpus result)
for name in "$@"; do
    bin=$build/fuzz-$name
    log=$build/$name.log
    corpus=$build/corpus/$name
    mkdir -p "$corpus" "$build/artifacts/$name"
    # stdout and stderr of the code under test are closed (it logs a lot);
    # libFuzzer and the sanitizers report on a copy of stderr, into the log.
    "$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=1024 -max_len="$(max_len "$name")" \
        -close_fd_mask=3 -print_final_stats=1 -artifact_prefix="$build/artifacts/$name/" ${FUZZ_RUNS:+-runs=$FUZZ_RUNS} \
        "$corpus" "$here/corpus/$name" </dev/null >"$log" 2>&1
    r=$?
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
    rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -n 1)
    last=$(grep -E '^#[0-9]+' "$log" | grep ' cov: ' | tail -n 1)
    cov=$(echo "$last" | sed -n 's/.* cov: \([0-9]*\).*/\1/p')
    ft=$(echo "$last" | sed -n 's/.* ft: \([0-9]*\).*/\1/p')
    corp=$(echo "$last" | sed -n 's/.* corp: \([0-9]*\).*/\1/p')
    if [ "$r" -eq 0 ]; then
        result=ok
        passed=$((passed + 1))
    else
        result="FAILED (exit $r, $log)"
        failed=$((failed + 1))
        echo "--- fuzz-$name failed:"
        grep -E 'ERROR|SUMMARY|Assertion|==[0-9]+==|#[0-9]+ +0x' "$log" | head -n 30
    fi
    summary+=$'\n'$(printf '%-11s %12s %8s %6s %7s %7s  %s' "$name" "${execs:-?}" "${rate:-?}" "${cov:-?}" \
        "${ft:-?}" "${corp:-?}" "$result")
done
echo "$summary"
echo "fuzz: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
