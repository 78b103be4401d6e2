#!/bin/sh
# --pipeline layer under mpirun (oversubscribed: the ranks share the
# cores): each bucket all-reduced, then updated on the overlap's thread,
# the next forward waiting per layer. Its weights are --overlap's with the
# same buckets byte for byte (the same bucket order, the same sums, the
# same update), for LeNet-5 and a residual network with batch norm
# (fixtures/resnet-bn.cfg), -np 2 and 3 (and 4: rhd, onesided), -t 1 and 2, every all-reduce
# algorithm --help lists; with two ranks also the plain run's (two floats
# sum alike in any order); in bf16 too (oneDNN where the CPU has it, the
# ref backend everywhere). SIGTERM to mpirun stops every rank at the same
# iteration with a snapshot, and the resumed run ends on the uninterrupted
# one's bytes. The refusals across nodes (--rank-update partitioned,
# subdivisions) exit 2 naming the option. plan --pipeline layer prints
# what the next forward cannot hide, at most what --overlap leaves exposed.
# usage: sh tests/mpi/test_pipeline.sh PATH_TO_SINGLETRAIN
set -u
. "$(dirname "$0")/../lib/check.sh"
suite_start "$@"
require_cmd mpirun mpich
root=$(cd "$(dirname "$0")/../.." && pwd)
lenet=$root/data/lenet.cfg
resnet=$fixtures/resnet-bn.cfg
# one convolution implementation for every run (test_multinode.sh says why)
inputs="--data synthetic --train-images 600 --no-test -q --conv-impl nhwc"
# the algorithms --help lists under --allreduce, "auto" (timed: not
# reproducible) left out
algos=$("$bin" --help | sed -n '/--allreduce NAME/,/or auto/p' | tr -d '\n' |
    sed 's/.*under mpirun://; s/or auto.*//' | tr -d ' ' | tr ',' ' ')
expect "--help lists the all-reduce algorithms ($algos)" [ -n "$algos" ]

# same NAME NP T CFG ITERS ALGO [REF]: --pipeline layer against REF
# (--overlap, the default; "plain": no option) with 256-byte buckets (a
# bucket a layer or so), both with $more's options
same() {
    _n=$1 _np=$2 _t=$3 _cfg=$4 _it=$5 _a=$6 _ref=${7:---overlap}
    _b=$(basename "$_cfg" .cfg)
    mkdir -p "$tmp/$_n/pipe" "$tmp/$_n/ref"
    [ "$_ref" = plain ] && _ref=
    check "$_n: --pipeline layer" err 0 "" -- \
        mpirun -np "$_np" "$bin" -t "$_t" -b 12 $inputs ${more:-} --iters "$_it" --allreduce "$_a" \
        --supernode-size 1 --bucket-size 256 --pipeline layer --snapshot-dir "$tmp/$_n/pipe" "$_cfg"
    check "$_n: ${_ref:-without it}" err 0 "" -- \
        mpirun -np "$_np" "$bin" -t "$_t" -b 12 $inputs ${more:-} --iters "$_it" --allreduce "$_a" \
        --supernode-size 1 --bucket-size 256 $_ref --snapshot-dir "$tmp/$_n/ref" "$_cfg"
    expect "$_n: byte-identical snapshots" \
        cmp -s "$tmp/$_n/pipe/${_b}_final.snap" "$tmp/$_n/ref/${_b}_final.snap"
}

for a in $algos; do
    same "lenet-np2-t2-$a" 2 2 "$lenet" 4 "$a"
    same "resnet-np3-t1-$a" 3 1 "$resnet" 6 "$a"
done
same "lenet-np3-t2-rhd" 3 2 "$lenet" 4 rhd
same "resnet-np4-t1-rhd" 4 1 "$resnet" 4 rhd
same "lenet-np4-t1-onesided" 4 1 "$lenet" 3 onesided
same "resnet-np2-t2-ring" 2 2 "$resnet" 6 ring
same "lenet-np2-t1-ring-plain" 2 1 "$lenet" 4 ring plain
same "resnet-np2-t2-rhd-plain" 2 2 "$resnet" 6 rhd plain
# --precision bf16: each bucket's weights converted into the bf16 copy
# after its update on the communication thread, in a backend context of
# its own (oneDNN's conversion, where the CPU has bf16; the ref backend's
# on every host): --overlap's bytes.
if "$bin" --dry-run --precision bf16 "$resnet" >/dev/null 2>"$tmp/caps"; then
    more="--precision bf16"
    same "resnet-np2-t2-rhd-bf16" 2 2 "$resnet" 6 rhd
else
    echo "SKIP: the dnnl bf16 run: $(cat "$tmp/caps") (the ref one below runs)"
fi
dnnl_inputs=$inputs
inputs="--data synthetic --train-images 600 --no-test -q" more="--backend ref --precision bf16"
same "resnet-np2-t1-ring-bf16-ref" 2 1 "$resnet" 4 ring
inputs=$dnnl_inputs more=
mkdir "$tmp/log"
check "the log says the buckets are updated as soon as all-reduced" out 0 \
    "updated as soon as its gradient is all-reduced" -- \
    mpirun -np 2 "$bin" -t 1 -b 12 --data synthetic --no-test --iters 2 --pipeline layer \
    --snapshot-dir "$tmp/log" "$lenet"

# SIGTERM to mpirun: every rank stops after the iteration in flight, rank 0
# snapshots; resumed, the run ends on the uninterrupted run's bytes.
mkdir "$tmp/term" "$tmp/term-ref"
mpirun -np 2 "$bin" -t 1 -b 12 --data synthetic --train-images 600 --no-test --iters 100000000 \
    --log-every 100 \
    --bucket-size 256 --pipeline layer --allreduce ring --snapshot-dir "$tmp/term" "$resnet" \
    >"$tmp/term/out" 2>"$tmp/term/err" &
pid=$!
wait_for "$tmp/term/out" "iter 300/"
kill -TERM $pid
wait $pid
n=$(ls "$tmp/term" | sed -n 's/^resnet-bn_\([0-9]*\)\.snap$/\1/p')
expect "SIGTERM to mpirun: rank 0 saved a snapshot (${n:-none})" [ -n "$n" ]
expect "SIGTERM to mpirun: both ranks stopped after iteration ${n:-?}" \
    [ "$(grep -c "interrupted at iteration $n of" "$tmp/term/err")" -eq 2 ]
if [ -n "$n" ]; then
    it=$((n + 20))
    check "resumed with --pipeline layer" err 0 "" -- \
        mpirun -np 2 "$bin" -t 1 -b 12 --data synthetic --train-images 600 --no-test -q --iters $it \
        --bucket-size 256 --pipeline layer --allreduce ring --snapshot-dir "$tmp/term" \
        --resume "$tmp/term/resnet-bn_$n.snap" "$resnet"
    check "the same run uninterrupted, with --overlap" err 0 "" -- \
        mpirun -np 2 "$bin" -t 1 -b 12 --data synthetic --train-images 600 --no-test -q --iters $it \
        --bucket-size 256 --overlap --allreduce ring --snapshot-dir "$tmp/term-ref" "$resnet"
    expect "after SIGTERM and resume: byte-identical snapshots" \
        cmp -s "$tmp/term/resnet-bn_final.snap" "$tmp/term-ref/resnet-bn_final.snap"
fi

check "--pipeline layer with --rank-update partitioned" err 2 \
    "--pipeline layer with --rank-update partitioned: give one" -- \
    mpirun -np 2 "$bin" --data synthetic --iters 2 --no-test --pipeline layer \
    --rank-update partitioned "$lenet"
check "--pipeline layer across nodes with subdivisions" err 2 \
    "with --pipeline layer across nodes: gradient accumulation needs" -- \
    mpirun -np 2 "$bin" --data synthetic --iters 2 --no-test --pipeline layer \
    --subdivisions 2 "$lenet"

finish test_pipeline.sh
