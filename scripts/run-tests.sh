#!/bin/sh
# Run every test: the C test binaries of the build directory, the
# AddressSanitizer + UBSan builds of the tests named in $SAN_TESTS (in
# build-address/), the ThreadSanitizer builds of those in $TSAN_TESTS (in
# build-thread/), the portable builds of those in $PORTABLE_TESTS (in
# build-portable/), and the shell tests (tests/e2e/, tests/mpi/). Each under a timeout;
# prints one line per test and fails if any failed. Each test has a
# kernel-choice cache of its own (XDG_CACHE_HOME, see
# src/backends/choice_cache.c), empty at its start and removed after it:
# none reads or writes the user's, and none depends on what another left.
# $TESTS names the C tests of the build directory (the Makefile's list, so
# that a binary left from a removed test does not run; unset: every
# binary there). $ST_TEST_FILTER ("TESTS" or "TESTS/CASES", make test
# T=...; tests/README.md) runs only the tests whose names match TESTS, a
# shell pattern matched anywhere in the name ("test_cfg", "test_cfg
# [asan+ubsan]", "test_cli.sh"); the tests see it, and those with cases of
# their own run only the cases matching CASES. A filter that matches no
# test fails.
# The shell tests of $BESIDE (long, single-threaded, and measuring no
# time: fuzzing, the predictor's fit, valgrind, the Darknet oracle) run in
# a second lane, beside the sanitized and portable builds' tests (which
# measure no time either), and their lines are printed when that lane
# ends; every other test runs alone.
# usage: [TESTS="..."] SAN_TESTS="..." TSAN_TESTS="..." PORTABLE_TESTS="..." \
#        [ST_TEST_FILTER=...] scripts/run-tests.sh BUILD_DIR
set -u
BESIDE="test_fuzz.sh test_calibrate_sw26010.sh test_darknet_shapes.sh test_memory.sh"
build=${1:-build}
bin="$build/singletrain"
filter=${ST_TEST_FILTER:-}
failed=0
total=0
run() {
    name=$1
    shift
    if [ -n "$filter" ]; then
        case "$name" in
        *${filter%%/*}*) ;;
        *) return ;;
        esac
    fi
    total=$((total + 1))
    start=$(date +%s)
    log=$(mktemp)
    cache=$(mktemp -d)
    if XDG_CACHE_HOME=$cache timeout 900 "$@" >"$log" 2>&1; then
        echo "PASS  $name ($(($(date +%s) - start)) s)"
    else
        echo "FAIL  $name (exit $?)"
        sed 's/^/      /' "$log" | tail -n 60
        failed=$((failed + 1))
    fi
    rm -f "$log"
    rm -rf "$cache"
}
if [ -n "${TESTS+set}" ]; then
    for t in $TESTS; do
        run "$t" "$build/tests/$t"
    done
else
    for t in "$build"/tests/test_*; do
        [ -x "$t" ] && run "$(basename "$t")" "$t"
    done
fi
beside() {
    case " $BESIDE " in
    *" $1 "*) return 0 ;;
    esac
    return 1
}
lane=$(mktemp)
(
    total=0
    failed=0
    for t in tests/e2e/test_*.sh; do
        beside "$(basename "$t")" && run "$(basename "$t")" sh "$t" "$bin"
    done
    echo "$total $failed" >"$lane.count"
) >"$lane" 2>&1 &
lane_pid=$!
for t in ${SAN_TESTS:-}; do
    run "$t [asan+ubsan]" "build-address/tests/$t"
done
# The unit tests link the single-node cluster (src/dist/cluster_single.c)
# and no MPI library, so ThreadSanitizer runs them as they are.
for t in ${TSAN_TESTS:-}; do
    run "$t [tsan]" env TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" \
        "build-thread/tests/$t"
done
for t in ${PORTABLE_TESTS:-}; do
    run "$t [portable]" "build-portable/tests/$t"
done
wait "$lane_pid"
cat "$lane"
read -r lane_total lane_failed <"$lane.count"
total=$((total + lane_total))
failed=$((failed + lane_failed))
rm -f "$lane" "$lane.count"
for t in tests/e2e/test_*.sh tests/mpi/test_*.sh; do
    [ -f "$t" ] && ! beside "$(basename "$t")" && run "$(basename "$t")" sh "$t" "$bin"
done
if [ -n "$filter" ] && [ "$total" -eq 0 ]; then
    echo "ST_TEST_FILTER=$filter: no test's name matches ${filter%%/*}"
    exit 1
fi
echo "$((total - failed)) passed, $failed failed${filter:+ (ST_TEST_FILTER=$filter)}"
[ "$failed" -eq 0 ]
