#!/bin/sh
# The all-reduce algorithms under MPI: runs the test program
# (tests/mpi/test_allreduce.c, built by mk/mpi.mk) with mpirun -np P for
# P in 1 2 3 4 5 8, each under a timeout (8 ranks on 2 cores take about
# 30 s, 60 s when other work shares the cores). Builds nothing. Fails, naming the package (mpich), when mpirun is
# missing.
# usage: sh tests/mpi/test_allreduce.sh BUILD_DIR
#   BUILD_DIR holds tests/mpi/test_allreduce (e.g. build, build-mpi); a file
#   in it (build/singletrain, as scripts/run-tests.sh passes) names it too.
set -u
build=${1:?usage: sh tests/mpi/test_allreduce.sh BUILD_DIR}
[ -f "$build" ] && build=$(dirname "$build")
bin=$build/tests/mpi/test_allreduce
case $bin in /*) ;; *) bin=$(pwd)/$bin ;; esac
. "$(dirname "$0")/../lib/check.sh"
require_cmd mpirun mpich
[ -x "$bin" ] || {
    echo "test_allreduce.sh: $bin is not an executable: build it with" \
        "make $build/tests/mpi/test_allreduce (mk/mpi.mk)" >&2
    exit 2
}

tmp=$(mktemp -d "${TMPDIR:-/tmp}/test_allreduce.XXXXXX") || exit 2
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' HUP INT PIPE TERM

# One P may not take the whole budget (exit 124 when it times out).
limit=
command -v timeout >/dev/null 2>&1 && limit="timeout 90"

for p in 1 2 3 4 5 8; do
    check "P=$p: every algorithm, size and check" out 0 "test_allreduce: P=$p:" ", 0 failed" \
        -- mpirun -np "$p" "$bin" ||
        { grep '^FAIL' "$tmp/stdout" | head -n 20; grep '^ *rank' "$tmp/stderr" | head -n 10; } |
        sed 's/^ */     > /'
done

finish test_allreduce.sh
