#!/bin/sh
# Training across nodes under mpirun: 2 ranks x 2 workers x batch 12 end
# 20 iterations of LeNet-5 (dropout included) with the weights of 4
# workers x batch 24 on one node, within 1e-5 of each tensor's scale, for
# every all-reduce algorithm and auto, and with --overlap; a fixed
# algorithm gives the same bytes twice; the crossing-bytes count follows
# --supernode-size; ranks that differ or fail at set-up stop every rank
# with a message, no hang.
# Prints SKIP and passes when mpirun is missing.
# usage: sh tests/test_multinode.sh PATH_TO_SINGLETRAIN
set -u
. "$(dirname "$0")/check.sh"
suite_start "$@"
snapdiff=$(dirname "$bin")/tools/snapdiff
[ -x "$snapdiff" ] || { echo "test_multinode.sh: $snapdiff is not built (make check-tests)" >&2; exit 2; }
if ! command -v mpirun >/dev/null 2>&1; then
    echo "SKIP: mpirun not installed"
    exit 0
fi
root=$(cd "$(dirname "$0")/.." && pwd)
cfg=$root/data/lenet.cfg

cd "$root" || exit 2
common="--train-images 2000 --no-test --iters 20 -q"
mkdir "$tmp/one"
check "one node: -t 4 -b 24" err 0 "" -- \
    "$bin" -t 4 -b 24 $common --snapshot-dir "$tmp/one" "$cfg"
for algo in mpi ring rhd rhd-supernode binomial ps auto; do
    mkdir "$tmp/$algo"
    check "mpirun -np 2 -t 2 -b 12 --allreduce $algo" err 0 "" -- \
        mpirun -np 2 "$bin" -t 2 -b 12 $common --allreduce "$algo" --supernode-size 1 \
        --snapshot-dir "$tmp/$algo" "$cfg"
    check "$algo: the weights of one node with 4 workers, to 1e-5" out 0 "largest relative difference" -- \
        "$snapdiff" "$cfg" "$tmp/one/lenet_final.snap" "$tmp/$algo/lenet_final.snap" 1e-5
done
mkdir "$tmp/again"
check "rhd again" err 0 "" -- \
    mpirun -np 2 "$bin" -t 2 -b 12 $common --allreduce rhd --supernode-size 1 \
    --snapshot-dir "$tmp/again" "$cfg"
expect "rhd twice: byte-identical snapshots" cmp -s "$tmp/rhd/lenet_final.snap" "$tmp/again/lenet_final.snap"

# auto's granularity: one algorithm for the whole gradient, or one per slice.
check "auto, model granularity" out 0 "all-reduce probe" -- \
    mpirun -np 2 "$bin" -t 2 -b 12 --train-images 2000 --no-test --iters 25 --allreduce auto "$cfg"
picked=$(sed -n 's/^all-reduce: worker 0 \([a-z-]*\), worker 1 \([a-z-]*\)$/\1 \2/p' "$tmp/stdout")
expect "auto, model granularity: both slices use one algorithm ($picked)" \
    [ -n "$picked" -a "${picked% *}" = "${picked#* }" ]
check "auto, layer granularity" out 0 "all-reduce: worker 0 " -- \
    mpirun -np 2 "$bin" -t 2 -b 12 --train-images 2000 --no-test --iters 25 --allreduce auto \
    --allreduce-granularity layer "$cfg"
check "a bad granularity" err 2 "--allreduce-granularity slab: expected model or layer" -- \
    mpirun -np 2 "$bin" -t 2 --allreduce auto --allreduce-granularity slab --data synthetic \
    --iters 5 "$cfg"

# --overlap: buckets all-reduced during backward. With two ranks the sums
# are the same floats in either order: byte-identical to the plain run.
for algo in rhd auto; do
    mkdir "$tmp/overlap-$algo"
    check "--overlap --allreduce $algo (64K buckets)" err 0 "" -- \
        mpirun -np 2 "$bin" -t 2 -b 12 $common --allreduce "$algo" --overlap --bucket-size 64K \
        --snapshot-dir "$tmp/overlap-$algo" "$cfg"
    expect "--overlap $algo: byte-identical to the run without it" \
        cmp -s "$tmp/rhd/lenet_final.snap" "$tmp/overlap-$algo/lenet_final.snap"
done
mkdir "$tmp/three" "$tmp/one3"
check "three ranks with --overlap" err 0 "" -- \
    mpirun -np 3 "$bin" -t 1 -b 8 $common --overlap --bucket-size 16K --snapshot-dir "$tmp/three" "$cfg"
check "one node: -t 3 -b 24" err 0 "" -- "$bin" -t 3 -b 24 $common --snapshot-dir "$tmp/one3" "$cfg"
check "three ranks with --overlap: the weights of one node, to 1e-5" out 0 "largest relative difference" -- \
    "$snapdiff" "$cfg" "$tmp/one3/lenet_final.snap" "$tmp/three/lenet_final.snap" 1e-5
check "--overlap on one node" err 2 "--overlap: overlapping the all-reduce with backward needs several nodes" -- \
    "$bin" --overlap --data synthetic --iters 5 "$cfg"

# The log: global batch, and bytes across supernodes (all of them with one
# rank per supernode, none with both ranks in one).
check "the log gives the global batch" out 0 "nodes: 2 ranks x batch 12 = a global batch of 24" -- \
    mpirun -np 2 "$bin" -t 2 -b 12 --train-images 2000 --no-test --iters 3 --allreduce rhd \
    --supernode-size 1 "$cfg"
line=$(grep "all-reduce on rank 0" "$tmp/stdout")
sent=$(echo "$line" | sed -n 's/.*: \([0-9.]*\) MB sent per iteration, \([0-9.]*\) MB of it.*/\1/p')
cross=$(echo "$line" | sed -n 's/.*: \([0-9.]*\) MB sent per iteration, \([0-9.]*\) MB of it.*/\2/p')
expect "Q=1: every byte sent crosses ($sent MB, $cross MB)" \
    [ -n "$sent" -a "$sent" = "$cross" -a "$sent" != "0.000" ]
check "Q=2: nothing crosses" out 0 "MB sent per iteration, 0.000 MB of it across supernodes" -- \
    mpirun -np 2 "$bin" -t 2 -b 12 --train-images 2000 --no-test --iters 3 --allreduce rhd \
    --supernode-size 2 "$cfg"

# Set-up failures stop every rank.
check "ranks with different batches" err 2 "rank 1 of 2 differs from rank 0 in the batch (-b)" -- \
    mpirun -np 1 "$bin" -t 2 -b 12 --data synthetic --iters 5 "$cfg" : \
    -np 1 "$bin" -t 2 -b 16 --data synthetic --iters 5 "$cfg"
check "ranks with different networks" err 2 "differs from rank 0 in the network (cfg hash)" -- \
    mpirun -np 1 "$bin" -t 2 --data synthetic --iters 5 "$cfg" : \
    -np 1 "$bin" -t 2 --data synthetic --iters 5 data/cifar-alexnet.cfg
check "a rank that cannot set up" err 2 "rank 1 of 2 failed to set up" "$tmp/none.cfg: cannot open" -- \
    mpirun -np 1 "$bin" -t 2 --data synthetic --iters 5 "$cfg" : \
    -np 1 "$bin" -t 2 --data synthetic --iters 5 "$tmp/none.cfg"
check "--sync asp across nodes" err 2 "training across nodes (mpirun) is bulk-synchronous only" -- \
    mpirun -np 2 "$bin" -t 2 --sync asp --data synthetic --iters 5 "$cfg"
check "an unknown --allreduce" err 2 "--allreduce tree: unknown algorithm (expected mpi, ring, rhd, rhd-supernode, binomial or ps)" -- \
    mpirun -np 2 "$bin" -t 2 --allreduce tree --data synthetic --iters 5 "$cfg"

finish test_multinode.sh
