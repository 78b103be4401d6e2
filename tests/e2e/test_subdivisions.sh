#!/bin/sh
# subdivisions= as gradient accumulation (src/parallel/accumulate.c): each
# worker's shard run in S pieces, their gradients summed, one update.
# - the memory estimate (--dry-run) plans the activations of one piece, and
#   a second gradient arena per worker, and holds to 20% of the peak;
# - one worker with S pieces (subdivisions= in [net], or --subdivisions)
#   computes what S workers of one piece each do,
#   in the same order: byte-identical weights on the ref backend (S = 2, 4),
#   and with oneDNN given one convolution implementation;
# - against the undivided batch with the same workers (the sum over each
#   shard associated otherwise), within 1e-5 of each tensor after 20
#   iterations, and over an epoch whose last batch is short (fewer images
#   than pieces for some workers) with its test phase (lenet-smooth.cfg,
#   where nothing switches: see there);
# - a resume from a periodic snapshot ends byte-identical to the
#   uninterrupted run.
# The refusals (a batch not a multiple, hybrid, SSP / ASP) are catalogue
# cases.
# usage: sh tests/e2e/test_subdivisions.sh PATH_TO_SINGLETRAIN
set -u
. "$(dirname "$0")/../lib/check.sh"
suite_start "$@"
snapdiff=$(dirname "$bin")/tools/snapdiff
[ -x "$snapdiff" ] || { echo "test_subdivisions.sh: $snapdiff is not built (make check-tests)" >&2; exit 2; }
smooth=$fixtures/lenet-smooth.cfg
snap=lenet-smooth_final.snap
inputs="--data synthetic --train-images 2000 -q --intra 1"

# train NAME OPTIONS...: a run into $tmp/NAME
train() {
    _d=$tmp/$1
    shift
    mkdir "$_d"
    check "$(basename "$_d"): $*" err 0 "" -- "$bin" $inputs --snapshot-dir "$_d" "$@" "$smooth"
}

# activations and gradients of the --dry-run's memory line, in MB
dry() {
    "$bin" --dry-run --data synthetic --train-images 2000 --no-test -t 1 "$@" "$smooth" 2>&1 |
        sed -n 's/^memory: .*1 worker: gradients \([0-9.]*\) MB, activations \([0-9.]*\) MB.*/\1 \2/p'
}
set -- $(dry)
grad1=${1:-0} act1=${2:-0}
set -- $(dry --subdivisions 4)
grad4=${1:-0} act4=${2:-0}
echo "     memory: undivided gradients $grad1 MB, activations $act1 MB; 4 pieces $grad4 MB, $act4 MB"
expect "--dry-run, 4 pieces: the activations of 16 images, under a third of 64's" \
    awk "BEGIN { exit !($act4 > 0 && $act4 * 3 < $act1) }"
expect "--dry-run, 4 pieces: a second gradient arena" \
    awk "BEGIN { exit !($grad1 > 0 && $grad4 > 1.9 * $grad1) }"
check "the log says the shard runs in pieces" out 0 \
    "subdivisions: each worker's shard of the batch of 64 in 4 pieces" -- \
    "$bin" --dry-run --data synthetic -t 2 --subdivisions 4 "$smooth"

# The estimate is honest in pieces too: cifar-alexnet, -t 2 -b 128 in 8
# pieces, one iteration: the logged estimate within 20% of the peak
# resident memory, and the peak under the undivided run's estimate.
alex=$(cd "$(dirname "$0")/../.." && pwd)/data/cifar-alexnet.cfg
alex_opts="--data synthetic --train-images 500 --no-test -t 2 -b 128 --conv-impl nhwc"
"$bin" --dry-run $alex_opts "$alex" >"$tmp/alex-dry" 2>&1
"$bin" $alex_opts --iters 1 --subdivisions 8 "$alex" >"$tmp/alex-run" 2>&1
whole=$(sed -n 's/^memory: .*; \([0-9.]*\) MB in all$/\1/p' "$tmp/alex-dry")
est=$(sed -n 's/^memory: .*; \([0-9.]*\) MB in all$/\1/p' "$tmp/alex-run")
peak=$(sed -n 's/^done: .*peak memory \([0-9.]*\) MB$/\1/p' "$tmp/alex-run")
echo "     cifar-alexnet -t 2 -b 128: undivided estimate ${whole:-?} MB; 8 pieces: estimate ${est:-?} MB, peak ${peak:-?} MB"
expect "cifar-alexnet, 8 pieces: the estimate within 20% of the peak" \
    awk "BEGIN { e = ${est:-0}; p = ${peak:-0}; exit !(p > 0 && e > 0.8 * p && e < 1.2 * p) }"
expect "cifar-alexnet, 8 pieces: the peak under the undivided estimate" \
    awk "BEGIN { exit !(${peak:-0} > 0 && ${peak:-0} < ${whole:-0}) }"

# The same sums: S pieces on one worker, S workers of one piece. (The ref
# backend's runs not in the ISA matrix's run, ST_TEST_ISA_RERUN: they run
# no oneDNN code, and would repeat the plain run's bit for bit.)
iters="--iters 6 --no-test"
if [ -n "${ST_TEST_ISA_RERUN:-}" ]; then
    echo "SKIP: the ref backend's runs in the ISA matrix's run ($ST_TEST_ISA_RERUN): the plain run made them"
else
    train ref2 --backend ref -t 2 $iters
    # subdivisions=2 in [net] (the same network: snapdiff compares by shape)
    sed '/^\[net\]/a subdivisions=2' "$smooth" >"$tmp/s2.cfg"
    mkdir "$tmp/ref1x2"
    check "ref1x2: subdivisions=2 in [net], -t 1" err 0 "" -- \
        "$bin" $inputs --backend ref -t 1 $iters --snapshot-dir "$tmp/ref1x2" "$tmp/s2.cfg"
    train ref4 --backend ref -t 4 $iters
    train ref1x4 --backend ref -t 1 --subdivisions 4 $iters
    check "ref: -t 1, 2 pieces against -t 2: the same weights" out 0 "largest relative difference 0 (" -- \
        "$snapdiff" "$smooth" "$tmp/ref2/$snap" "$tmp/ref1x2/s2_final.snap" 0
    check "ref: -t 1, 4 pieces against -t 4: the same weights" out 0 "largest relative difference 0 (" -- \
        "$snapdiff" "$smooth" "$tmp/ref4/$snap" "$tmp/ref1x4/$snap" 0
fi
train dnnl2 --conv-impl nhwc -t 2 $iters
train dnnl1x2 --conv-impl nhwc -t 1 --subdivisions 2 $iters
check "dnnl, nhwc: -t 1, 2 pieces against -t 2: the same weights" out 0 \
    "largest relative difference 0 (" -- \
    "$snapdiff" "$smooth" "$tmp/dnnl2/$snap" "$tmp/dnnl1x2/$snap" 0

# The undivided batch with the same workers: the same to rounding.
train whole --conv-impl nhwc -t 2 --iters 20 --no-test
train pieces --conv-impl nhwc -t 2 --subdivisions 4 --iters 20 --no-test
check "-t 2, 4 pieces against undivided, 20 iterations: to 1e-5" out 0 "largest relative difference" -- \
    "$snapdiff" "$smooth" "$tmp/whole/$snap" "$tmp/pieces/$snap" 1e-5
# 2000 images: -b 64 -t 2 --subdivisions 16 runs pieces of 2, and the
# epoch's last batch has 16 images, 8 a worker: 8 pieces of 1 and no more;
# -b 48 -t 3 --subdivisions 8, pieces of 2, and the last batch 32, 11 or
# 10 a worker, in pieces of 2 or 1.
train epoch --conv-impl nhwc -t 2 --epochs 1 --test-images 500
train epoch16 --conv-impl nhwc -t 2 --subdivisions 16 --epochs 1 --test-images 500
check "an epoch, 16 pieces against undivided: to 1e-5" out 0 "largest relative difference" -- \
    "$snapdiff" "$smooth" "$tmp/epoch/$snap" "$tmp/epoch16/$snap" 1e-5
train odd --conv-impl nhwc -t 3 -b 48 --epochs 1 --no-test
train odd8 --conv-impl nhwc -t 3 -b 48 --subdivisions 8 --epochs 1 --no-test
check "-t 3 -b 48, 8 pieces (shards of 10 and 11 at the end) against undivided: to 1e-5" out 0 \
    "largest relative difference" -- \
    "$snapdiff" "$smooth" "$tmp/odd/$snap" "$tmp/odd8/$snap" 1e-5

# Resume: the pieces are a function of the batch, so a resumed run goes on
# as the uninterrupted one.
train every --conv-impl nhwc -t 2 --subdivisions 4 --iters 8 --snapshot-every 4 --no-test
mkdir "$tmp/resumed"
check "resume, 4 pieces, from iteration 4" err 0 "" -- \
    "$bin" $inputs --conv-impl nhwc -t 2 --subdivisions 4 --iters 8 --no-test \
    --snapshot-dir "$tmp/resumed" --resume "$tmp/every/lenet-smooth_4.snap" "$smooth"
expect "resumed with 4 pieces: final snapshot byte-identical" \
    cmp -s "$tmp/every/$snap" "$tmp/resumed/$snap"
finish test_subdivisions.sh
