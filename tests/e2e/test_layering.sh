#!/bin/sh
# The tree's architecture holds: scripts/check-includes.sh finds no include
# against the folders' one-way order and no backend asked for by name (and
# catches one planted against the order); the unit tests, the
# ThreadSanitizer runs among them, link no MPI library (they take the
# single-node cluster), while the binary links MPICH.
# usage: sh tests/e2e/test_layering.sh PATH_TO_SINGLETRAIN
. "$(dirname "$0")/../lib/check.sh"
suite_start "$@"
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$(dirname "$bin")

check "the tree's includes point down the folders' order" out 0 "" -- \
    sh "$root/scripts/check-includes.sh" "$root"

mkdir -p "$tmp/repo/src/base" "$tmp/repo/include/parallel"
: >"$tmp/repo/include/parallel/ps.h"
printf '#include "parallel/ps.h"\n' >"$tmp/repo/src/base/bad.c"
check "an upward include is caught" out 1 'src/base/bad.c:1: base/ includes "parallel/ps.h"' -- \
    sh "$root/scripts/check-includes.sh" "$tmp/repo"
printf 'int f(void) { return strcmp(b->name, "cpe"); }\n' >"$tmp/repo/src/base/bad.c"
check "a backend compared by name is caught" out 1 'compare a backend' -- \
    sh "$root/scripts/check-includes.sh" "$tmp/repo"

for t in "$build"/tests/test_* "$root"/build-thread/tests/test_*; do
    [ -x "$t" ] || continue
    expect "$t links no MPI library" sh -c "! ldd '$t' | grep -qi 'libmpi\|libucp\|libucs'"
done
expect "the binary links MPICH (mpirun runs it)" sh -c "ldd '$bin' | grep -q libmpi"
finish test_layering
