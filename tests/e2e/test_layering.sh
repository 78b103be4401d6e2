#!/bin/sh
# The tree's architecture holds: scripts/check-includes.sh finds no include
# against the folders' one-way order and no backend asked for by name (and
# catches one planted against the order); scripts/check-cycles.sh finds no
# file-level call cycle inside a folder (its list of known folders is
# empty), and catches one planted in objects built for it (two files
# calling each other, three in a ring; not a one-way pair, nor a stale
# object's; one in a known folder, on a copy of the script that names one,
# is reported and not failed); the unit tests, the
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

check "no file-level call cycle inside a folder of src/" out 0 "" -- \
    sh "$root/scripts/check-cycles.sh" "$build" "$root"
sed 's/^/     /' "$tmp/stdout"

# cycles planted in objects of their own: OBJ FOLDER NAME 'C code'
obj() {
    mkdir -p "$tmp/cyc/src/$1" "$tmp/cyc/build/src/$1"
    printf '%s\n' "$3" >"$tmp/cyc/src/$1/$2.c"
    ${CC:-cc} -c -o "$tmp/cyc/build/src/$1/$2.o" "$tmp/cyc/src/$1/$2.c"
}
cycles="sh $root/scripts/check-cycles.sh $tmp/cyc/build $tmp/cyc"
obj train a 'int b(void); int a(void) { return b(); }'
obj train b 'int b(void) { return 1; }'
check "a one-way pair passes" out 0 "" -- $cycles
expect "a one-way pair: nothing reported" [ ! -s "$tmp/stdout" ]
obj train b 'int a(void); int b(void) { return a(); }'
check "two files calling each other are caught" out 1 \
    "src/train: a cycle of 2 files: src/train/a.c src/train/b.c" \
    "src/train/b.c -> src/train/a.c: a" -- $cycles
obj train b 'int c(void); int b(void) { return c(); }'
obj train c 'int a(void); int c_data = 1; int c(void) { return a() + c_data; }'
check "three in a ring are caught" out 1 "src/train: a cycle of 3 files" -- $cycles
# the known folders' mechanism, on a copy of the script whose list names cpe
sed 's/^KNOWN=.*/KNOWN="cpe"/' "$root/scripts/check-cycles.sh" >"$tmp/check-cycles-known.sh"
expect "the copy's list of known folders names cpe" grep -q '^KNOWN="cpe"$' "$tmp/check-cycles-known.sh"
known="sh $tmp/check-cycles-known.sh $tmp/cyc/build $tmp/cyc"
obj cpe d 'int e(void); int d(void) { return e(); }'
obj cpe e 'int d(void); int e(void) { return d(); }'
check "a known folder's cycle is reported, not failed (train's still fails)" out 1 \
    "src/cpe: a cycle of 2 files (known, not failed): src/cpe/d.c src/cpe/e.c" -- $known
check "with no folder known, that cycle fails too" out 1 \
    "src/cpe: a cycle of 2 files: src/cpe/d.c src/cpe/e.c" -- $cycles
rm "$tmp/cyc/src/train/c.c"
check "a stale object (its source removed) is left out" out 0 "(known, not failed)" -- $known

for t in "$build"/tests/test_* "$root"/build-thread/tests/test_*; do
    [ -x "$t" ] || continue
    expect "$t links no MPI library" sh -c "! ldd '$t' | grep -qi 'libmpi\|libucp\|libucs'"
done
expect "the binary links MPICH (mpirun runs it)" sh -c "ldd '$bin' | grep -q libmpi"
finish test_layering
