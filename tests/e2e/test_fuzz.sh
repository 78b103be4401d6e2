#!/bin/sh
# The readers' libFuzzer targets (fuzz/, mk/fuzz.mk), briefly: builds them
# with clang (AddressSanitizer + UBSan) and, for each target, runs every
# regression input of tests/fuzz-regressions/<target>/ (inputs that once
# crashed, leaked, hung or ran out of memory) once, then fuzzes for 5
# seconds (libFuzzer seed 1) from the seeds fuzz/corpus/<target>/ and
# those inputs. A check
# fails when libFuzzer reports a crash, a sanitizer error, a leak, an input
# over 60 seconds or over 2 GB. Without clang the suite fails: run
# scripts/deps.sh --test (which `make test` runs first). The longer runs are
# `make fuzz FUZZ_SECONDS=N`.
# usage: sh tests/e2e/test_fuzz.sh PATH_TO_SINGLETRAIN (only checked, not used)
set -u
. "$(dirname "$0")/../lib/check.sh"
suite_start "$@"
cd "$(dirname "$0")/../.." || exit 2
targets=$(ls fuzz/corpus) # one seed directory per target
seconds=${FUZZ_TEST_SECONDS:-5}

if ! command -v clang-14 >/dev/null 2>&1; then
    echo "FAIL clang-14 is missing: the fuzz targets need clang-14 and libclang-rt-14-dev;" \
        "run scripts/deps.sh --test (make test runs it first)"
    failed=$((failed + 1))
    finish test_fuzz.sh
    exit 1
fi
build="the fuzz targets build (make fuzz-build; needs clang-14, libclang-rt-14-dev)"
if ! check "$build" err 0 "" -- make -s -j2 fuzz-build; then
    finish test_fuzz.sh
    exit 1
fi

# fuzz_check NAME WANT -- COMMAND...: a libFuzzer run; passes when it exits
# 0 and its log has WANT; on failure prints the report, not the banner.
fuzz_check() {
    name=$1 want=$2
    shift 3
    if $limit "$@" >"$tmp/log" 2>&1 && grep -q -e "$want" "$tmp/log"; then
        passed=$((passed + 1))
        echo "ok   $name"
        return 0
    fi
    failed=$((failed + 1))
    echo "FAIL $name"
    echo "     ran: $*"
    grep -n -E -A 24 'ERROR|ALARM|runtime error|out-of-memory|^fuzz:' "$tmp/log" | head -n 40 |
        sed 's/^/       | /'
    echo "     (last lines)"
    tail -n 5 "$tmp/log" | sed 's/^/       | /'
    return 1
}

# The libFuzzer options of every run: limits, and no files written into
# the repository (new inputs go to a scratch corpus, findings to
# build-fuzz/test-findings/, which a failure names).
findings="build-fuzz/test-findings"
mkdir -p "$findings"
opts="-rss_limit_mb=2048 -timeout=60 -seed=1 -artifact_prefix=$findings/"
for t in $targets; do
    bin=build-fuzz/fuzz/$t
    regressions=$(find "tests/fuzz-regressions/$t" -type f 2>/dev/null | sort)
    if [ -n "$regressions" ]; then
        # shellcheck disable=SC2086
        fuzz_check "$t: $(echo "$regressions" | wc -l) regression input(s) run clean" \
            "Executed" -- "$bin" $opts $regressions
    fi
    mkdir -p "$tmp/corpus-$t"
    dirs="fuzz/corpus/$t"
    [ -n "$regressions" ] && dirs="$dirs tests/fuzz-regressions/$t"
    # shellcheck disable=SC2086
    fuzz_check "$t: fuzzing ${seconds} s from the seeds finds nothing" "Done" -- \
        "$bin" $opts -max_total_time="$seconds" "$tmp/corpus-$t" $dirs
done
finish test_fuzz.sh
