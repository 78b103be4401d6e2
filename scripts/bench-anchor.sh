#!/bin/sh
# singletrain against the PyTorch anchor (../shared/anchors/torch_train.py,
# Debian's python3-torch) on the same network, batch and cores, measured in
# one run, alternating, R times each; prints the medians and their ratio,
# and the machine's fp32 FMA peak measured in the same run.
# usage: scripts/bench-anchor.sh [--precision bf16] [NET...]
#   NET: lenet5 cifar_alexnet alexnet227 (default: the three), resnet50
#   (data/resnet50.cfg at batch 32 against scripts/torch-resnet50.py, the
#   same network from torchvision: python3-torchvision)
#   --precision bf16: four runs alternate, singletrain in fp32 and in bf16
#   (--precision bf16) and PyTorch in fp32 and under
#   torch.autocast("cpu", dtype=torch.bfloat16) (torch_train.py --autocast
#   bf16); it prints each one's median, the ratios (singletrain bf16 against
#   its fp32, against PyTorch's bf16, and fp32 against fp32) and the bf16
#   run's share of the CPU's bf16 peak (--profile's roofline: one core's
#   AMX tile products where oneDNN runs its convolutions on them, else its
#   AVX512_BF16 dot products, measured the way the fp32 FMA peak is)
# environment: RUNS (5), THREADS (2: PyTorch's threads), ST_ARGS (singletrain's
#   threading options; default none: singletrain chooses for the cores it
#   may use, see --help), ANCHORS (../shared/anchors), PYTHON (the python3
#   that has PyTorch; /usr/bin/python3, Debian's python3-torch), RAW (a
#   folder: each singletrain run's whole output appended to RAW/NET-PRECISION.txt)
set -eu
precision=fp32
if [ "${1:-}" = "--precision" ]; then
    case "${2:-}" in
    fp32 | bf16) precision=$2 ;;
    *) echo "bench-anchor.sh: --precision ${2:-}: expected fp32 or bf16" >&2; exit 2 ;;
    esac
    shift 2
fi
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
bin=${SINGLETRAIN:-$root/build/singletrain}
anchors=${ANCHORS:-$root/../shared/anchors}
runs=${RUNS:-5}
threads=${THREADS:-2}
st_args=${ST_ARGS:-}
nets=${*:-lenet5 cifar_alexnet alexnet227}
python=${PYTHON:-/usr/bin/python3}
[ -x "$bin" ] || { echo "bench-anchor.sh: $bin is missing: run make first" >&2; exit 2; }
[ -f "$anchors/torch_train.py" ] || { echo "bench-anchor.sh: no $anchors/torch_train.py" >&2; exit 2; }
"$python" -c 'import torch' 2>/dev/null || {
    echo "bench-anchor.sh: PyTorch is missing from $python: apt-get install python3-torch libopenblas0-openmp" >&2
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
# --precision bf16: one network's four runs, alternating, and its line.
bf16_run() {
    net=$1 cfg=$2 batch=$3 titers=$4 siters=$5 extra=$6
    for f in torch32 torch16 ours32 ours16 peak16; do : >"/tmp/st_bench_$f"; done
    for r in $(seq "$runs"); do
        for autocast in off bf16; do
            f=torch32
            [ $autocast = bf16 ] && f=torch16
            "$python" "$torch_script" --net "$net" --threads "$threads" \
                --batch "$batch" --iters "$titers" --autocast $autocast --quiet |
                sed -n 's/throughput_img_s=//p' >>"/tmp/st_bench_$f"
        done
        for p in fp32 bf16; do
            # shellcheck disable=SC2086
            out=$(cd "$root" && "$bin" $st_args --precision $p -b "$batch" $extra \
                --iters $((siters + 3)) --warmup 3 --no-test --profile --log-every 1000000 "$cfg")
            [ -n "${RAW:-}" ] && echo "$out" >>"$RAW/$net-$p.txt"
            f=ours32
            [ $p = bf16 ] && f=ours16
            echo "$out" | sed -n 's/^throughput: \([0-9.]*\) img\/s.*/\1/p' >>"/tmp/st_bench_$f"
            gflop=$(echo "$out" | sed -n 's/.*(\([0-9.]*\) GFLOP per image.*/\1/p')
            [ $p = bf16 ] && echo "$out" |
                sed -n 's/^roofline in bf16: peak \([0-9.]*\) GFLOP\/s per core.*/\1/p' >>/tmp/st_bench_peak16
        done
    done
    t32=$(median </tmp/st_bench_torch32)
    t16=$(median </tmp/st_bench_torch16)
    o32=$(median </tmp/st_bench_ours32)
    o16=$(median </tmp/st_bench_ours16)
    p16=$(median </tmp/st_bench_peak16)
    chosen=$(echo "$out" | sed -n 's/.*iterations of batch [0-9]* ([0-9]* per epoch), \([0-9]* workers* x [0-9]* threads*\).*/\1/p')
    awk -v net="$net" -v b="$batch" -v t32="$t32" -v t16="$t16" -v o32="$o32" -v o16="$o16" \
        -v g="$gflop" -v p="$p16" -v c="$threads" -v r="$runs" -v a="${st_args:+$st_args: }$chosen" \
        'BEGIN {
        share = "n/a (no bf16 instructions)"
        if (p > 0)
            share = sprintf("%.0f%%", 100 * o16 * g / (c * p))
        printf "%-14s batch %3d  PyTorch fp32 %7.1f bf16 %7.1f img/s  singletrain (%s) fp32 %7.1f bf16 %7.1f img/s\n",
            net, b, t32, t16, a, o32, o16
        printf "%-14s            singletrain bf16 / its fp32 %.2f, / PyTorch bf16 %.2f; fp32 / PyTorch fp32 %.2f; PyTorch bf16 / its fp32 %.2f; bf16 %.1f GFLOP/s, %s of %d x %.1f, the bf16 peak per core (medians of %d)\n",
            "", o16 / o32, o16 / t16, o32 / t32, t16 / t32, o16 * g, share, c, p, r }'
}
echo "fp32 FMA peak at $threads threads (before): $(peak)"
for net in $nets; do
    torch_script=$anchors/torch_train.py
    case $net in
    lenet5) cfg=data/lenet.cfg; batch=64; titers=300; siters=300; extra="" ;;
    cifar_alexnet) cfg=data/cifar-alexnet.cfg; batch=128; titers=20; siters=20; extra="--data synthetic" ;;
    alexnet227) cfg=data/alexnet.cfg; batch=32; titers=10; siters=10; extra="--data synthetic" ;;
    resnet50)
        cfg=data/resnet50.cfg; batch=32; titers=4; siters=4; extra="--data synthetic"
        torch_script=$here/torch-resnet50.py
        "$python" -c 'import torchvision' 2>/dev/null || {
            echo "bench-anchor.sh: resnet50 needs torchvision in $python: apt-get install python3-torchvision" >&2
            exit 2
        } ;;
    *) echo "bench-anchor.sh: unknown network $net (expected lenet5, cifar_alexnet, alexnet227 or resnet50)" >&2; exit 2 ;;
    esac
    if [ "$precision" = bf16 ]; then
        bf16_run "$net" "$cfg" "$batch" "$titers" "$siters" "$extra"
        continue
    fi
    : >/tmp/st_bench_torch
    : >/tmp/st_bench_ours
    : >/tmp/st_bench_peak
    gflop=""
    for r in $(seq "$runs"); do
        "$python" "$torch_script" --net "$net" --threads "$threads" \
            --batch "$batch" --iters "$titers" --quiet |
            sed -n 's/throughput_img_s=//p' >>/tmp/st_bench_torch
        # shellcheck disable=SC2086
        out=$(cd "$root" && "$bin" $st_args -b "$batch" $extra --iters $((siters + 3)) \
            --warmup 3 --no-test --profile --log-every 1000000 "$cfg")
        [ -n "${RAW:-}" ] && echo "$out" >>"$RAW/$net-fp32.txt"
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
