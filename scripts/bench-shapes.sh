#!/bin/sh
# Convolution shapes that fell off a cliff on one backend: each cfg in
# data/bench/ trained a few iterations on dnnl (its implementations chosen
# by measurement, the default), on dnnl with oneDNN's blocked layout only
# (the old default), and on the reference backend; prints seconds per
# iteration (median of RUNS) and dnnl's ratio to ref. No convolution may be
# slower on dnnl than on ref.
# usage: scripts/bench-shapes.sh [CFG...]   environment: RUNS (3), ITERS (3),
#   BLOCKED (1: also time --conv-impl blocked, which can take minutes)
set -eu
here=$(cd "$(dirname "$(readlink -f "$0")")" && pwd)
. "$here/paths.sh"
runs=${RUNS:-3}
iters=${ITERS:-3}
[ -x "$bin" ] || { echo "bench-shapes.sh: $bin is missing: run make first" >&2; exit 2; }
cfgs=${*:-$st_bench/*.cfg}
median() { sort -n | awk '{v[NR]=$1} END {if (NR % 2) print v[(NR+1)/2]; else print (v[NR/2]+v[NR/2+1])/2}'; }
# seconds per iteration of one run: training time / iterations, set-up apart
per_iter() {
    "$bin" -t 1 --iters "$iters" --no-test --data synthetic --log-every 1000000 "$@" 2>&1 |
        sed -n 's/^total time .*training \([0-9.]*\) s.*/\1/p' | awk -v n="$iters" '{print $1 / n}'
}
time_of() {
    i=0
    while [ "$i" -lt "$runs" ]; do per_iter "$@"; i=$((i + 1)); done | median
}
printf '%-28s %12s %12s %12s %10s\n' shape "dnnl s/iter" "blocked" "ref" "dnnl/ref"
for cfg in $cfgs; do
    auto=$(time_of "$cfg")
    blocked=-
    [ "${BLOCKED:-1}" = 1 ] && blocked=$(ITERS=1 time_of --conv-impl blocked "$cfg")
    ref=$(time_of --backend ref "$cfg")
    printf '%-28s %12s %12s %12s %10s\n' "$(basename "$cfg" .cfg)" "$auto" "$blocked" "$ref" \
        "$(awk -v a="$auto" -v r="$ref" 'BEGIN { printf "%.2f", a / r }')"
done
