#!/bin/sh
# singletrain against the PyTorch anchor (../shared/anchors/torch_train.py,
# Debian's python3-torch) on the same network, batch and cores, measured in
# one run, alternating, R times each; prints the medians and their ratio,
# and the machine's fp32 FMA peak measured in the same run.
# usage: scripts/bench-anchor.sh [NET...]     NET: lenet5 cifar_alexnet alexnet227
# environment: RUNS (5), THREADS (2: PyTorch's threads), ST_ARGS (singletrain's
#   threading options; default none: singletrain chooses for the cores it
#   may use, see --help), ANCHORS (../shared/anchors)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
bin=${SINGLETRAIN:-$root/build/singletrain}
anchors=${ANCHORS:-$root/../shared/anchors}
runs=${RUNS:-5}
threads=${THREADS:-2}
st_args=${ST_ARGS:-}
nets=${*:-lenet5 cifar_alexnet alexnet227}
[ -x "$bin" ] || { echo "bench-anchor.sh: $bin is missing: run make first" >&2; exit 2; }
[ -f "$anchors/torch_train.py" ] || { echo "bench-anchor.sh: no $anchors/torch_train.py" >&2; exit 2; }
/usr/bin/python3 -c 'import torch' 2>/dev/null || {
    echo "bench-anchor.sh: PyTorch is missing: apt-get install python3-torch libopenblas0-openmp" >&2
    exit 2
}
median() { sort -n | awk '{v[NR]=$1} END {if (NR % 2) print v[(NR+1)/2]; else print (v[NR/2]+v[NR/2+1])/2}'; }
# The anchors' FMA loop is AVX-512 code: on a CPU without it, the peak is
# the one singletrain's roofline measures (its FMA loop for the CPU's ISA),
# printed per network below.
peak() {
    if ! grep -q avx512f /proc/cpuinfo; then
        echo "n/a (no AVX-512 here: see each network's roofline peak)"
        return
    fi
    gcc -O2 -mavx512f -pthread "$anchors/fma_peak.c" -o /tmp/st_fma_peak 2>/dev/null &&
        /tmp/st_fma_peak "$threads" | sed -n 's/.*fma_gflops_total=\([0-9.]*\).*/\1 GFLOP\/s/p'
}
echo "fp32 FMA peak at $threads threads (before): $(peak)"
for net in $nets; do
    case $net in
    lenet5) cfg=data/lenet.cfg; batch=64; titers=300; siters=300; extra="" ;;
    cifar_alexnet) cfg=data/cifar-alexnet.cfg; batch=128; titers=20; siters=20; extra="--data synthetic" ;;
    alexnet227) cfg=data/alexnet.cfg; batch=32; titers=10; siters=10; extra="--data synthetic" ;;
    *) echo "bench-anchor.sh: unknown network $net" >&2; exit 2 ;;
    esac
    : >/tmp/st_bench_torch
    : >/tmp/st_bench_ours
    : >/tmp/st_bench_peak
    gflop=""
    for r in $(seq "$runs"); do
        /usr/bin/python3 "$anchors/torch_train.py" --net "$net" --threads "$threads" \
            --batch "$batch" --iters "$titers" --quiet |
            sed -n 's/throughput_img_s=//p' >>/tmp/st_bench_torch
        # shellcheck disable=SC2086
        out=$(cd "$root" && "$bin" $st_args -b "$batch" $extra --iters $((siters + 3)) \
            --warmup 3 --no-test --profile --log-every 1000000 "$cfg")
        echo "$out" | sed -n 's/^throughput: \([0-9.]*\) img\/s.*/\1/p' >>/tmp/st_bench_ours
        gflop=$(echo "$out" | sed -n 's/.*(\([0-9.]*\) GFLOP per image.*/\1/p')
        echo "$out" | sed -n 's/.*FMA peak \([0-9.]*\) GFLOP\/s per core.*/\1/p' >>/tmp/st_bench_peak
    done
    core_peak=$(median </tmp/st_bench_peak)
    t=$(median </tmp/st_bench_torch)
    o=$(median </tmp/st_bench_ours)
    chosen=$(echo "$out" | sed -n 's/.*iterations of batch [0-9]* ([0-9]* per epoch), \([0-9]* workers* x [0-9]* threads*\).*/\1/p')
    awk -v net="$net" -v b="$batch" -v t="$t" -v o="$o" -v g="$gflop" -v r="$runs" \
        -v a="${st_args:+$st_args: }$chosen" -v p="$core_peak" -v c="$threads" 'BEGIN {
        printf "%-14s batch %3d  PyTorch %8.1f img/s  singletrain (%s) %8.1f img/s  ratio %.2f  (%.1f GFLOP/s, %.0f%% of %d x %.1f, the roofline'"'"'s FMA peak per core; medians of %d)\n",
            net, b, t, a, o, o / t, o * g, 100 * o * g / (c * p), c, p, r }'
done
echo "fp32 FMA peak at $threads threads (after): $(peak)"
