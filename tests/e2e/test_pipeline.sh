#!/bin/sh
# --pipeline layer on one node: each bucket of layers summed over the
# workers and updated by the worker whose report completed it, the next
# forward waiting per layer, no barrier after the update. Its snapshots
# are the plain run's byte for byte: LeNet-5 and a residual network with
# batch norm (fixtures/resnet-bn.cfg) at -t 1, 2 and 3, one bucket or a
# bucket per layer; every update rule; subdivisions; bf16 (the ref
# backend; oneDNN where the CPU has bf16); test phases and
# periodic snapshots (each one too); --patience's stop; a divergence
# stops with the plain run's exit code; SIGTERM stops after the iteration
# in flight, and the resumed run ends on the uninterrupted run's bytes.
# The time split names what the pipeline hid and what it exposed.
# usage: sh tests/e2e/test_pipeline.sh PATH_TO_SINGLETRAIN
set -u
. "$(dirname "$0")/../lib/check.sh"
suite_start "$@"
root=$(cd "$(dirname "$0")/../.." && pwd)
lenet=$root/data/lenet.cfg
resnet=$fixtures/resnet-bn.cfg
inputs="--data synthetic --train-images 600 --no-test -q"

# same NAME CFG [options]: --pipeline layer against the run without it
same() {
    _n=$1 _cfg=$2
    shift 2
    _b=$(basename "$_cfg" .cfg)
    mkdir -p "$tmp/$_n/pipe" "$tmp/$_n/ref"
    check "$_n: --pipeline layer" err 0 "" -- \
        "$bin" $inputs "$@" --pipeline layer --snapshot-dir "$tmp/$_n/pipe" "$_cfg"
    check "$_n: without it" err 0 "" -- \
        "$bin" $inputs "$@" --snapshot-dir "$tmp/$_n/ref" "$_cfg"
    for _s in $(ls "$tmp/$_n/ref"); do
        expect "$_n: $_s byte-identical" cmp -s "$tmp/$_n/pipe/$_s" "$tmp/$_n/ref/$_s"
    done
}

for t in 1 2 3; do
    same "lenet-t$t" "$lenet" -t $t --iters 5
    same "lenet-t$t-small-buckets" "$lenet" -t $t --iters 5 --bucket-size 256
    same "resnet-t$t-small-buckets" "$resnet" -t $t --iters 8 --bucket-size 256
done
for rule in sgd nesterov adagrad rmsprop adadelta adam; do
    sed "s/^momentum=0.9/momentum=0.9\nsolver=$rule/" "$resnet" >"$tmp/resnet-$rule.cfg"
    same "resnet-$rule" "$tmp/resnet-$rule.cfg" -t 2 --iters 6 --bucket-size 256
done
same "lenet-subdivisions" "$lenet" -t 2 --iters 5 --bucket-size 256 --subdivisions 2
# --precision bf16: each bucket's weights converted into the bf16 copy
# right after its update, by the thread that applied it, before a forward
# may read it: the plain run's bytes (the plain run converts slices). The
# reference backend on every host; oneDNN where the CPU has bf16.
same "resnet-bf16-ref" "$resnet" -t 2 --iters 6 --bucket-size 256 --backend ref --precision bf16
if "$bin" --dry-run --precision bf16 "$resnet" >/dev/null 2>"$tmp/caps"; then
    same "resnet-bf16-dnnl" "$resnet" -t 2 --iters 6 --bucket-size 256 --precision bf16 \
        --conv-impl nhwc
    same "lenet-bf16-dnnl" "$lenet" -t 3 --iters 5 --precision bf16 --conv-impl nhwc
else
    echo "SKIP: the dnnl bf16 runs: $(cat "$tmp/caps") (the ref one above ran)"
fi
inputs="--data synthetic --train-images 600 -q"
same "lenet-test-phases-snapshots" "$lenet" -t 2 --iters 7 --bucket-size 256 \
    --test-interval 3 --snapshot-every 2
same "lenet-patience" "$lenet" -t 2 --iters 200 --bucket-size 256 --test-interval 2 --patience 1
inputs="--data synthetic --train-images 600 --no-test -q"

sed 's/^learning_rate=.*/learning_rate=1000/' "$resnet" >"$tmp/diverge.cfg"
check "a divergence stops the pipeline" err 1 "training diverged" -- \
    "$bin" $inputs -t 2 --iters 50 --bucket-size 256 --pipeline layer "$tmp/diverge.cfg"

check "the time split names what the pipeline hid" out 0 \
    "pipeline: communication ms per iteration: hidden behind backward" -- \
    "$bin" --data synthetic --no-test -t 2 --iters 4 --pipeline layer "$lenet"

# SIGTERM: stop after the iteration in flight with a snapshot; resumed,
# the run ends on the bytes of the run never stopped.
mkdir "$tmp/term" "$tmp/term-ref"
"$bin" -t 2 --data synthetic --train-images 600 --no-test --iters 100000000 --log-every 100 \
    --bucket-size 256 \
    --pipeline layer --snapshot-dir "$tmp/term" "$resnet" >"$tmp/term/out" 2>"$tmp/term/err" &
pid=$!
wait_for "$tmp/term/out" "iter 300/"
kill -TERM $pid
wait $pid
rc=$?
expect "SIGTERM: exit 143 (got $rc)" [ "$rc" -eq 143 ]
n=$(ls "$tmp/term" | sed -n 's/^resnet-bn_\([0-9]*\)\.snap$/\1/p')
expect "SIGTERM: a snapshot (${n:-none})" [ -n "$n" ]
if [ -n "$n" ]; then
    it=$((n + 20))
    check "resumed with --pipeline layer" err 0 "" -- \
        "$bin" $inputs -t 2 --iters $it --bucket-size 256 --pipeline layer \
        --snapshot-dir "$tmp/term" --resume "$tmp/term/resnet-bn_$n.snap" "$resnet"
    check "the same run uninterrupted, without the pipeline" err 0 "" -- \
        "$bin" $inputs -t 2 --iters $it --snapshot-dir "$tmp/term-ref" "$resnet"
    expect "after SIGTERM and resume: byte-identical snapshots" \
        cmp -s "$tmp/term/resnet-bn_final.snap" "$tmp/term-ref/resnet-bn_final.snap"
fi

finish test_pipeline.sh
