#!/bin/sh
# Workers against one worker, and workers against intra-op threads, on the
# same cores: for each network and batch, runs -t 1, -t 2 and -t 1 --intra 2
# alternately RUNS times and prints the medians of images/s, the ratios,
# and peak resident memory of -t 1 and -t 2 with what the log says one
# worker's activations and one gradient buffer take.
# usage: scripts/bench-scaling.sh [NET:BATCH...]
#   default: lenet5:64 lenet5:256 cifar_alexnet:128 alexnet227:32
# environment: RUNS (5)
set -eu
here=$(cd "$(dirname "$(readlink -f "$0")")" && pwd)
. "$here/paths.sh"
runs=${RUNS:-5}
cases=${*:-lenet5:64 lenet5:256 cifar_alexnet:128 alexnet227:32}
[ -x "$bin" ] || { echo "bench-scaling.sh: $bin is missing: run make first" >&2; exit 2; }
median() { sort -n | awk '{v[NR]=$1} END {if (NR % 2) print v[(NR+1)/2]; else print (v[NR/2]+v[NR/2+1])/2}'; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for c in $cases; do
    net=${c%%:*}
    batch=${c#*:}
    case $net in
    lenet5) cfg=$st_networks/lenet.cfg; extra="" ; images=$((batch * 200)) ;;
    cifar_alexnet) cfg=$st_networks/cifar-alexnet.cfg; extra="--data synthetic"; images=$((batch * 12)) ;;
    alexnet227) cfg=$st_networks/alexnet.cfg; extra="--data synthetic"; images=$((batch * 8)) ;;
    *) echo "bench-scaling.sh: unknown network $net" >&2; exit 2 ;;
    esac
    iters=$((images / batch))
    : >"$tmp/t1"; : >"$tmp/t2"; : >"$tmp/i2"; : >"$tmp/m1"; : >"$tmp/m2"
    for r in $(seq "$runs"); do
        for mode in t1 t2 i2; do
            case $mode in
            t1) opts="-t 1 --intra 1" ;;
            t2) opts="-t 2 --intra 1" ;;
            i2) opts="-t 1 --intra 2" ;;
            esac
            # shellcheck disable=SC2086
            out=$("$bin" $opts -b "$batch" $extra --iters $((iters + 3)) \
                --warmup 3 --no-test --profile --log-every 1000000 "$cfg")
            echo "$out" | sed -n 's/^throughput: \([0-9.]*\) img\/s.*/\1/p' >>"$tmp/$mode"
            case $mode in
            t1 | t2)
                echo "$out" | sed -n 's/.*peak memory \([0-9.]*\) MB.*/\1/p' >>"$tmp/m${mode#t}"
                echo "$out" | grep '^memory:' >"$tmp/mem_$mode" ;;
            esac
        done
    done
    t1=$(median <"$tmp/t1"); t2=$(median <"$tmp/t2"); i2=$(median <"$tmp/i2")
    m1=$(median <"$tmp/m1"); m2=$(median <"$tmp/m2")
    acts=$(sed -n 's/.*activations \([0-9.]*\) MB each.*/\1/p' "$tmp/mem_t2")
    grads=$(sed -n 's/.*gradients \([0-9.]*\) MB each.*/\1/p' "$tmp/mem_t2")
    awk -v c="$c" -v t1="$t1" -v t2="$t2" -v i2="$i2" -v m1="$m1" -v m2="$m2" -v a="$acts" \
        -v g="$grads" -v r="$runs" 'BEGIN {
        printf "%-18s -t 1: %8.1f  -t 2: %8.1f img/s (x%.2f)  -t 1 --intra 2: %8.1f (workers/intra %.2f)\n",
            c, t1, t2, t2 / t1, i2, t2 / i2
        printf "%-18s peak memory -t 1 %.1f MB, -t 2 %.1f MB: +%.1f MB; one worker of two: activations %.1f MB + gradients %.1f MB = %.1f MB  (medians of %d)\n",
            "", m1, m2, m2 - m1, a, g, a + g, r }'
done
