#!/bin/sh
# Run fuzz targets, two at a time (the machine's two cores), each for a
# set time, and print one summary line per target: executions, executions
# per second, corpus size (and how many inputs the run added), coverage,
# and what it found. Used by `make fuzz` (mk/fuzz.mk).
#
# Each target works on BUILD/corpus/<target>, a copy of its seeds
# fuzz/corpus/<target> that keeps the inputs found (so later runs start
# from there), and also loads the regression inputs of
# tests/fuzz-regressions/<target>/. Crashes, leaks and timeouts are
# written to BUILD/findings/<target>/ (libFuzzer's crash-*, leak-*,
# timeout-*, oom-* files); copy each into tests/fuzz-regressions/<target>/
# under a name saying what it was, once the reader is fixed. Memory is
# limited to 2 GB (a reader must refuse absurd sizes, not allocate them),
# one input to 60 seconds (a few bytes claiming a big image take up to
# 20 s to decode in this build). The full libFuzzer log of each target is
# BUILD/logs/<target>.log.
# usage: sh fuzz/run.sh BUILD SECONDS TARGET...
# exit status: 0 when no target found anything, 1 otherwise.
set -u
build=$1
seconds=$2
shift 2
cd "$(dirname "$0")/.." || exit 1
mkdir -p "$build/logs"

# run_one TARGET: fuzz it; its exit status is libFuzzer's.
run_one() {
    t=$1
    mkdir -p "$build/corpus/$t" "$build/findings/$t"
    cp -n fuzz/corpus/"$t"/* "$build/corpus/$t/" 2>/dev/null
    regressions=
    [ -d "tests/fuzz-regressions/$t" ] && regressions="tests/fuzz-regressions/$t"
    # shellcheck disable=SC2086
    "$build/fuzz/$t" -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=60 \
        -print_final_stats=1 -artifact_prefix="$build/findings/$t/" \
        "$build/corpus/$t" $regressions >"$build/logs/$t.log" 2>&1
}

# summary TARGET STATUS: one line from the log's final statistics.
summary() {
    t=$1
    log=$build/logs/$t.log
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
    rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -n 1)
    added=$(sed -n 's/^stat::new_units_added: *//p' "$log" | tail -n 1)
    cov=$(grep -o 'cov: [0-9]*' "$log" | tail -n 1 | sed 's/cov: //')
    size=$(find "$build/corpus/$t" -type f | wc -l)
    found=$(find "$build/findings/$t" -type f | wc -l)
    if [ "$2" -eq 0 ]; then
        what="found nothing"
    else
        what="FAILED (exit $2): $found finding(s) in $build/findings/$t/, log $log"
    fi
    printf '%-9s %10s executions in %s s, %6s/s, corpus %5s inputs (+%s), cov %5s: %s\n' \
        "$t" "${runs:-?}" "$seconds" "${rate:-?}" "$size" "${added:-?}" "${cov:-?}" "$what"
}

bad=0
while [ $# -gt 0 ]; do
    a=$1
    b=${2:-}
    shift
    [ -n "$b" ] && shift
    run_one "$a" &
    pid_a=$!
    if [ -n "$b" ]; then
        run_one "$b" &
        pid_b=$!
    fi
    wait "$pid_a"
    rc_a=$?
    summary "$a" "$rc_a"
    [ "$rc_a" -eq 0 ] || bad=1
    if [ -n "$b" ]; then
        wait "$pid_b"
        rc_b=$?
        summary "$b" "$rc_b"
        [ "$rc_b" -eq 0 ] || bad=1
    fi
done
exit "$bad"
