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
# The shell tests of $BESIDE (mostly single-threaded, and measuring no
# time or CPU use: fuzzing, the predictor's fit, valgrind, the Darknet
# oracle, the documentation's examples, the catalogue of bad inputs, the
# emulated CPEs, the PyTorch and ONNX oracles, the static checks) run two
# at a time: a second lane takes them one after another from a queue, in
# $BESIDE's order (the longest first, so that the lanes end together),
# while the first runs the sanitized and portable builds' tests (which
# measure no time either) and then takes from the same queue; the second
# lane's lines are printed when it ends. Every other test runs alone.
# The ISA matrix: oneDNN dispatches to the widest instruction set the CPU
# has, so a host tests its own kernels only. The tests of $ISA_MATRIX (the
# equivalences that depend on the kernels' arithmetic: conformance against
# the reference backend, bitwise reproducibility and splits of the batch,
# resume, one node against mpirun) run again under each lower level the
# host offers among AVX2, AVX512_CORE, AVX512_CORE_BF16 and
# AVX512_CORE_AMX (ONEDNN_MAX_CPU_ISA; scripts/isa-levels.sh) whose oneDNN
# implementations are not the next wider level's (those would test the
# same kernels twice; said in the log), named "test [isa LEVEL]", with a
# check that oneDNN takes each level the host has; the log
# opens with the host's CPU, its vector extensions and the levels run. So
# an AVX-512 host covers the AVX2 paths too; an AVX2 host runs the tests
# once. Those runs also have ST_TEST_ISA_RERUN=LEVEL, so that a test can
# leave out what no oneDNN level changes (the ref backend's runs, which
# would repeat the plain run's bit for bit).
# usage: [TESTS="..."] SAN_TESTS="..." TSAN_TESTS="..." PORTABLE_TESTS="..." \
#        [ST_TEST_FILTER=...] scripts/run-tests.sh BUILD_DIR
set -u
BESIDE="test_fuzz.sh test_memory.sh test_darknet_shapes.sh test_readme.sh
        test_calibrate_sw26010.sh test_catalogue.sh test_cpe_backend.sh
        test_bench_accuracy.sh test_schedule.sh test_layering.sh test_eval.sh
        test_torch.sh test_darknet_weights.sh test_onnx.sh test_docs.sh
        test_predict_sw26010.sh test_pack.sh test_networks.sh"
ISA_MATRIX="test_conformance test_sched test_resume.sh test_multinode.sh test_subdivisions.sh"
# The bf16 tests run again under each lower level with bf16 in oneDNN
# (AVX512_CORE: emulated; AVX512_CORE_BF16: native), whatever --distinct
# says of the fp32 kernels there: oneDNN's bf16 kernels differ between them.
BF16_MATRIX="test_bf16 test_bf16.sh"
build=${1:-build}
bin="$build/singletrain"
filter=${ST_TEST_FILTER:-}
failed=0
total=0
# Each failing test's first failing lines, said again at the end.
failures=$(mktemp)
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
        echo "FAIL  $name (exit $?)" | tee -a "$failures"
        # What failed first (a long suite's failing case can lie far above
        # its last lines), then the end.
        grep -E -A 8 '^ *FAIL|\[  FAILED  \]|\[  ERROR   \]' "$log" | head -n 40 |
            sed 's/^/      | /' | tee -a "$failures"
        sed 's/^/      /' "$log" | tail -n 40
        failed=$((failed + 1))
    fi
    rm -f "$log"
    rm -rf "$cache"
}
levels=$(scripts/isa-levels.sh | tr '\n' ' ')
top=${levels% }
top=${top##* }
scripts/isa-levels.sh --describe
notes=$(mktemp)
if ! lower=$(scripts/isa-levels.sh --distinct "$bin" 2>"$notes"); then
    echo "FAIL  ISA matrix: scripts/isa-levels.sh --distinct $bin"
    failed=$((failed + 1))
    total=$((total + 1))
fi
sed 's/^/ISA matrix: /' "$notes"
rm -f "$notes"
lower=$(echo $lower)
echo "ISA matrix: the plain runs at ${top:-the default}${lower:+; $ISA_MATRIX again at }$lower"
case " $levels " in
*" AVX512_CORE "*) [ "$top" != AVX512_CORE ] &&
    echo "ISA matrix: $BF16_MATRIX again at the levels with bf16 below $top: $(echo " $levels" |
        sed "s/ $top.*//; s/ AVX2//; s/^ //")" ;;
esac
# Whether test $1 runs again at level $2.
in_matrix() {
    case " $lower " in
    *" $2 "*) case " $ISA_MATRIX " in *" $1 "*) return 0 ;; esac ;;
    esac
    case "$2" in
    AVX512_CORE*) case " $BF16_MATRIX " in *" $1 "*) return 0 ;; esac ;;
    esac
    return 1
}
# The lower levels: those of the fp32 matrix and those with bf16.
again=$(for level in $levels; do
    [ "$level" = "$top" ] && continue
    for t in $ISA_MATRIX $BF16_MATRIX; do
        in_matrix "$t" "$level" && { echo "$level"; break; }
    done
done | tr '\n' ' ')
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
    for b in $BESIDE; do
        [ "$b" = "$1" ] && return 0
    done
    return 1
}
# The queue of $BESIDE's tests; take: the next one into $next, removed from
# the queue (false when it is empty), whichever lane asks.
queue=$(mktemp)
for t in $BESIDE; do
    [ -f "tests/e2e/$t" ] && echo "$t"
done >"$queue"
take() {
    until mkdir "$queue.lock" 2>/dev/null; do sleep 0.05; done
    next=$(sed -n 1p "$queue")
    sed 1d "$queue" >"$queue.rest" && mv "$queue.rest" "$queue"
    rmdir "$queue.lock"
    [ -n "$next" ]
}
run_beside() {
    while take; do
        run "$next" sh "tests/e2e/$next" "$bin"
    done
}
lane=$(mktemp)
(
    total=0
    failed=0
    run_beside
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
run_beside
wait "$lane_pid"
cat "$lane"
read -r lane_total lane_failed <"$lane.count"
total=$((total + lane_total))
failed=$((failed + lane_failed))
rm -f "$lane" "$lane.count" "$queue"
for t in tests/e2e/test_*.sh tests/mpi/test_*.sh; do
    [ -f "$t" ] && ! beside "$(basename "$t")" && run "$(basename "$t")" sh "$t" "$bin"
done
[ "$levels" != "$top " ] &&
    run "oneDNN takes each ISA level (${levels% })" sh scripts/isa-levels.sh --check "$bin"
if [ -n "$again" ]; then
    for level in $again; do
        isa=$(echo "$level" | tr "A-Z" "a-z")
        for t in ${TESTS-$(cd "$build/tests" && echo test_*)}; do
            in_matrix "$t" "$level" && run "$t [isa $isa]" env ONEDNN_MAX_CPU_ISA="$level" \
                ST_TEST_ISA_RERUN="$level" "$build/tests/$t"
        done
        for t in tests/e2e/test_*.sh tests/mpi/test_*.sh; do
            in_matrix "$(basename "$t")" "$level" &&
                run "$(basename "$t") [isa $isa]" env ONEDNN_MAX_CPU_ISA="$level" \
                    ST_TEST_ISA_RERUN="$level" sh "$t" "$bin"
        done
    done
fi
if [ -s "$failures" ]; then
    echo "What failed:"
    cat "$failures"
fi
rm -f "$failures"
if [ -n "$filter" ] && [ "$total" -eq 0 ]; then
    echo "ST_TEST_FILTER=$filter: no test's name matches ${filter%%/*}"
    exit 1
fi
echo "$((total - failed)) passed, $failed failed${filter:+ (ST_TEST_FILTER=$filter)}"
[ "$failed" -eq 0 ]
