#!/bin/sh
# -t auto against the splits measured by hand: for each network, every
# split W x I of the cores (W workers of I intra-op threads) trains RUNS
# times, alternating, and -t auto's choice (measured afresh, its own cache)
# is run as many times; prints the medians, the best split by hand and how
# far auto's choice is from it (issue 30: within 5%).
# usage: scripts/bench-layout.sh [NET...]   NET: lenet5 cifar_alexnet alexnet227
# environment: RUNS (3)
set -eu
here=$(cd "$(dirname "$(readlink -f "$0")")" && pwd)
. "$here/paths.sh"
runs=${RUNS:-3}
nets=${*:-lenet5 cifar_alexnet alexnet227}
[ -x "$bin" ] || { echo "bench-layout.sh: $bin is missing: run make first" >&2; exit 2; }
cores=$(nproc)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
median() { sort -n | awk '{v[NR]=$1} END {if (NR % 2) print v[(NR+1)/2]; else print (v[NR/2]+v[NR/2+1])/2}'; }
speed() { sed -n 's/^done: .* \([0-9.]*\) img\/s.*/\1/p'; }
echo "cores: $cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'))"
for net in $nets; do
    case $net in
    lenet5) cfg=lenet.cfg; batch=64; iters=300; extra="--data synthetic --train-images 19200" ;;
    cifar_alexnet) cfg=cifar-alexnet.cfg; batch=128; iters=20; extra="--data synthetic" ;;
    alexnet227) cfg=alexnet.cfg; batch=32; iters=10; extra="--data synthetic --train-images 640" ;;
    *) echo "bench-layout.sh: unknown network $net" >&2; exit 2 ;;
    esac
    splits=""
    for w in $(seq "$cores" -1 1); do
        [ $((cores % w)) -eq 0 ] && [ "$w" -le "$batch" ] && splits="$splits ${w}x$((cores / w))"
    done
    common="$extra -b $batch --iters $iters --warmup 2 --no-test --no-choice-cache"
    # -t auto's choice, measured afresh in a cache of its own
    mkdir -p "$work/auto-$net"
    XDG_CACHE_HOME=$work/auto-$net "$bin" $common -t auto "$st_networks/$cfg" >"$work/auto.log" 2>&1
    chosen=$(sed -n 's/^threads: \([0-9]*\) workers\{0,1\} x \([0-9]*\) (-t auto.*/\1x\2/p' \
        "$work/auto.log")
    for r in $(seq "$runs"); do
        for s in $splits; do
            "$bin" $common -t "${s%x*}" --intra "${s#*x}" "$st_networks/$cfg" 2>&1 | speed \
                >>"$work/$net-$s"
        done
    done
    best=""
    bestv=0
    for s in $splits; do
        v=$(median <"$work/$net-$s")
        printf '%-14s %-6s %10.1f img/s%s\n' "$net" "$s" "$v" \
            "$([ "$s" = "$chosen" ] && echo "   <- -t auto")"
        if awk "BEGIN {exit !($v > $bestv)}"; then
            best=$s
            bestv=$v
        fi
    done
    v=$(median <"$work/$net-$chosen")
    awk -v n="$net" -v c="$chosen" -v b="$best" -v v="$v" -v bv="$bestv" 'BEGIN {
        printf "%-14s -t auto chose %s: %.1f%% of the best by hand (%s)\n", n, c,
               100 * v / bv, b }'
done
