#!/bin/sh
# Hybrid parallelism across nodes (--parallel hybrid --mp-group G, one
# worker a rank): the fully connected layers split over groups of G ranks
# by output neurons, data parallelism between the groups and for the
# other layers. Truth: data parallelism over the same ranks, same seed.
# After 20 iterations the weights agree to 1e-5 (relative, tensor by
# tensor: tools/snapdiff; the two sum each batch in another order) at
# -np 2 (G = 2), -np 3 (G = 3, and G = 1, which is the one-worker split
# of one process) and -np 4 (G = 2: each block's gradient all-reduced over
# the two ranks that hold it; and G = 4, more ranks than the last layer's
# neurons), with fully connected layers of 37 and 3 neurons (not
# multiples of G), an odd batch (13 a rank) whose epoch ends in a batch of
# one image (92 = 3 x 26 + 14 at -np 2: 7 a rank; 53 = 2 x 26 + 1: a rank
# without samples, which only takes its part), every update rule (and SGD
# without momentum and decay), a network whose first layer is fully
# connected (no input gradient) and one whose fully connected layer with
# batch norm stays data-parallel, on the dnnl, ref and cpe backends. The
# final weights are the whole network (rank 0 gathers the blocks; one
# node starts from them), a run resumed from a snapshot ends with the
# uninterrupted run's bits (after SIGTERM too; resumed with another
# --mp-group, other bits, and a warning says so), test phases and
# --stop-at-accuracy stop at the same iteration with the same best and
# final snapshots, a gradient overflowing stops every rank, auto
# picks G by the bytes per rank and says so, the log gives the bytes
# all-reduced per rank, and bad combinations exit 2 before any work.
# Fails, naming the package (mpich), when mpirun is missing.
# usage: sh tests/mpi/test_mp_group.sh PATH_TO_SINGLETRAIN
set -u
. "$(dirname "$0")/../lib/check.sh"
. "$(dirname "$0")/../lib/overflow_weights.sh"
suite_start "$@"
require_cmd mpirun mpich
snapdiff=$(dirname "$bin")/tools/snapdiff
[ -x "$snapdiff" ] || { echo "test_mp_group.sh: $snapdiff is not built (make check-tests)" >&2; exit 2; }

. "$(dirname "$0")/../lib/hybrid_nets.sh"
for rule in sgd:0.05 nesterov:0.05 adam:0.001 adagrad:0.05 rmsprop:0.005 adadelta:1.0; do
    sed -e "s/^max_batches=20\$/max_batches=20\nsolver=${rule%:*}/" \
        -e "s/^learning_rate=.*/learning_rate=${rule#*:}/" "$tmp/convfc.cfg" >"$tmp/${rule%:*}.cfg"
done
sed -e 's/^momentum=.*/momentum=0/' -e 's/^decay=.*/decay=0/' "$tmp/sgd.cfg" >"$tmp/plain.cfg"
net fcfirst '[connected]
output=21
activation=leaky

[connected]
output=10
activation=linear
'
net bnmix '[convolutional]
filters=2
size=3
stride=1
pad=1
activation=relu

[connected]
output=16
batch_normalize=1
activation=relu

[connected]
output=10
activation=linear
'
base="--data synthetic --train-images 92 --seed 3 --conv-impl nhwc"
common="$base -q --iters 20 -t 1"

# same NAME CFG NP G: data-parallel and hybrid runs of NP ranks (on
# $images training images, 92 unless set; $backend's options), the final
# weights to 1e-5
same() {
    label=$1 cfg=$2 np=$3 g=$4
    run="--data synthetic --train-images ${images:-92} --seed 3 $backend -q --iters 20 -t 1"
    rm -rf "$tmp/data" "$tmp/hybrid"
    check "$label: data-parallel, -np $np" err 0 "" -- mpirun -np "$np" "$bin" $run \
        --parallel data --snapshot-dir "$tmp/data" "$tmp/$cfg.cfg"
    check "$label: hybrid, -np $np --mp-group $g" err 0 "" -- mpirun -np "$np" "$bin" $run \
        --parallel hybrid --mp-group "$g" --snapshot-dir "$tmp/hybrid" "$tmp/$cfg.cfg"
    check "$label: the same weights to 1e-5" out 0 "largest relative difference" -- \
        "$snapdiff" "$tmp/$cfg.cfg" "$tmp/data/${cfg}_final.snap" \
        "$tmp/hybrid/${cfg}_final.snap" 1e-5
}
backend="--conv-impl nhwc"
for rule in plain sgd nesterov adam adagrad rmsprop adadelta; do
    same "$rule" "$rule" 2 2
done
check "the hybrid snapshot is the whole network: one node starts from it" err 0 "" -- \
    "$bin" $base -q -t 1 --iters 1 --weights "$tmp/hybrid/adadelta_final.snap" "$tmp/adadelta.cfg"
images=53
same "a rank without samples in the epoch's last batch" convfc 2 2
images=92
same "three ranks" convfc 3 3
same "three ranks, Adam" adam 3 3
same "three ranks, groups of one" convfc 3 1
same "four ranks, groups of two" convfc 4 2
same "four ranks, groups of two, Adam" adam 4 2
same "four ranks in one group: a rank without neurons of the 3-neuron layer" adam 4 4
same "fully connected on the input" fcfirst 2 2
same "fully connected with batch norm stays data-parallel" bnmix 3 3
backend="--backend ref"
same "the ref backend" convfc 2 2
backend="--backend cpe"
same "the cpe backend (its core group sums the gradient, the host updates the parts)" convfc 2 2

# The log: what is split, and the bytes all-reduced per rank.
check "-np 2 --mp-group 2: the log gives the bytes all-reduced per rank" out 0 \
    "parallel: hybrid across nodes: the fully connected layers split over groups of 2 ranks (1 group)" \
    "all-reduced per rank per iteration" -- mpirun -np 2 "$bin" $base -t 1 --iters 2 \
    --parallel hybrid --mp-group 2 "$tmp/convfc.cfg"
check "... and the blocks' all-reduce and the group's exchange" out 0 \
    "model-parallel groups of 2 on rank 0" -- mpirun -np 2 "$bin" $base -t 1 --iters 2 \
    --parallel hybrid --mp-group 2 "$tmp/convfc.cfg"
check "auto: the bytes of every G, and the choice" out 0 "mp-group auto: MB per rank" ": G = " -- \
    mpirun -np 2 "$bin" $base -t 1 --iters 2 --parallel hybrid --mp-group auto "$tmp/convfc.cfg"

# Resume: a snapshot holds the whole network; resumed, the bits of the
# uninterrupted run.
h="$base -q -t 1 --parallel hybrid --mp-group 2"
rm -rf "$tmp/r" "$tmp/u"
check "snapshot at iteration 6" err 0 "" -- mpirun -np 2 "$bin" $h --iters 10 \
    --snapshot-every 6 --snapshot-dir "$tmp/r" "$tmp/adam.cfg"
check "resumed from it to 20" err 0 "" -- mpirun -np 2 "$bin" $h --iters 20 --resume "$tmp/r/adam_6.snap" \
    --snapshot-dir "$tmp/r" "$tmp/adam.cfg"
check "20 uninterrupted" err 0 "" -- mpirun -np 2 "$bin" $h --iters 20 --snapshot-dir "$tmp/u" "$tmp/adam.cfg"
expect "resumed: final snapshot byte-identical" cmp -s "$tmp/r/adam_final.snap" \
    "$tmp/u/adam_final.snap"
# Resumed with another --mp-group (or none): other bits, said as a resume
# with another -t is (it went on silently); with the same, nothing.
check "resumed with the same --mp-group" err 0 "" -- mpirun -np 2 "$bin" $h --iters 8 \
    --resume "$tmp/r/adam_6.snap" "$tmp/adam.cfg"
expect "... without a word about it" sh -c "! grep -q 'mp-group' '$tmp/stderr'"
check "resumed with --mp-group 1: said" err 0 \
    "$tmp/r/adam_6.snap was written with --mp-group 2, this run has --mp-group 1: the model-parallel layers' gradients sum in another order" -- \
    mpirun -np 2 "$bin" $base -q -t 1 --parallel hybrid --mp-group 1 --iters 8 \
    --resume "$tmp/r/adam_6.snap" "$tmp/adam.cfg"
check "resumed data-parallel: said" err 0 \
    "$tmp/r/adam_6.snap was written with --mp-group 2, this run has --mp-group 1" -- \
    mpirun -np 2 "$bin" $base -q -t 1 --parallel data --iters 8 --resume "$tmp/r/adam_6.snap" \
    "$tmp/adam.cfg"
rm -rf "$tmp/d"
check "a data-parallel snapshot of 2 ranks" err 0 "" -- mpirun -np 2 "$bin" $base -q -t 1 \
    --parallel data --iters 6 --snapshot-dir "$tmp/d" "$tmp/adam.cfg"
check "resumed with --mp-group 2: said" err 0 \
    "$tmp/d/adam_final.snap was written with --mp-group 1, this run has --mp-group 2" -- \
    mpirun -np 2 "$bin" $h --iters 8 --resume "$tmp/d/adam_final.snap" "$tmp/adam.cfg"

# Test phases (rank 0's, on the whole network gathered) and --stop-at-accuracy:
# the same accuracies, the same iteration, the same best and final snapshots.
for mode in data hybrid; do
    groups=
    [ "$mode" = hybrid ] && groups="--mp-group 2"
    check "--stop-at-accuracy, $mode" out 0 "stopping at iteration 16" -- mpirun -np 2 "$bin" \
        $base -t 1 --iters 40 --parallel $mode $groups --stop-at-accuracy 0.9 \
        --snapshot-dir "$tmp/stop-$mode" "$tmp/adam.cfg"
done
for kind in best final; do
    check "--stop-at-accuracy: the $kind snapshots to 1e-5" out 0 "largest relative difference" -- \
        "$snapdiff" "$tmp/adam.cfg" "$tmp/stop-data/adam_$kind.snap" \
        "$tmp/stop-hybrid/adam_$kind.snap" 1e-5
done

# SIGTERM to mpirun at whatever iteration: every rank gathers its blocks
# into rank 0's snapshot, which resumes to the uninterrupted run's bits.
mkdir "$tmp/sig"
mpirun -np 2 "$bin" $base -t 1 --parallel hybrid --mp-group 2 --no-test --iters 100000000 \
    --log-every 100 --snapshot-dir "$tmp/sig" "$tmp/adam.cfg" >"$tmp/sig/out" 2>"$tmp/sig/err" &
run_pid=$!
wait_for "$tmp/sig/out" "iter 300/"
kill -TERM $run_pid
wait $run_pid
n=$(ls "$tmp/sig" | sed -n 's/^adam_\([0-9]*\)\.snap$/\1/p')
expect "SIGTERM: rank 0 saved a snapshot (${n:-none})" [ -n "$n" ]
if [ -n "$n" ]; then
    check "SIGTERM: resumed from iteration $n" err 0 "" -- mpirun -np 2 "$bin" $h --no-test \
        --iters $((n + 40)) --resume "$tmp/sig/adam_$n.snap" --snapshot-dir "$tmp/sig" \
        "$tmp/adam.cfg"
    mkdir "$tmp/sig/ref"
    check "SIGTERM: $((n + 40)) iterations uninterrupted" err 0 "" -- mpirun -np 2 "$bin" $h \
        --no-test --iters $((n + 40)) --snapshot-dir "$tmp/sig/ref" "$tmp/adam.cfg"
    expect "SIGTERM at iteration $n and resumed: final snapshot byte-identical" \
        cmp -s "$tmp/sig/adam_final.snap" "$tmp/sig/ref/adam_final.snap"
fi

# A gradient that is not finite stops every rank at once: each rank sees
# only its own blocks of the model-parallel gradient, so the verdicts are
# summed over the ranks (lib/overflow_weights.sh: tiny.cfg's weights whose
# connected layer's gradient overflows, the loss finite).
overflow_weights "$tmp/overflow.weights"
check "a gradient overflowing in the blocks stops every rank" err 1 \
    "iteration 0: training diverged" -- mpirun -np 4 "$bin" -q -t 1 -b 8 --data synthetic \
    --no-test --iters 5 --peer-timeout 20 --parallel hybrid --mp-group 2 \
    --weights "$tmp/overflow.weights" "$fixtures/tiny.cfg"
expect "... every rank says so" [ "$(grep -c "iteration 0: training diverged" "$tmp/stderr")" -eq 4 ]

# Bad combinations, before any work.
check "G not dividing the ranks" err 2 "--mp-group 3: expected a divisor of the 2 ranks" -- \
    mpirun -np 2 "$bin" $common --parallel hybrid --mp-group 3 "$tmp/convfc.cfg"
check "G with data parallelism" err 2 "--mp-group 2: splitting the fully connected layers over groups of ranks needs --parallel hybrid" -- \
    mpirun -np 2 "$bin" $common --parallel data --mp-group 2 "$tmp/convfc.cfg"
check "G without -t: one worker a rank" out 0 "threads: 1 worker x 1 (one worker a rank: --mp-group" -- \
    mpirun -np 2 "$bin" $base --iters 2 --parallel hybrid --mp-group 2 "$tmp/convfc.cfg"
check "G with several workers a rank" err 2 "--mp-group 2 with -t 2: the model-parallel layers split over ranks run one worker a rank" -- \
    mpirun -np 2 "$bin" $base -q --iters 20 -t 2 --parallel hybrid --mp-group 2 "$tmp/convfc.cfg"
check "G with --rank-update partitioned" err 2 "--mp-group 2 with --rank-update partitioned" -- \
    mpirun -np 2 "$bin" $common --parallel hybrid --mp-group 2 --rank-update partitioned \
    "$tmp/convfc.cfg"
check "G with --overlap" err 2 "--parallel hybrid with --overlap" -- \
    mpirun -np 2 "$bin" $common --parallel hybrid --mp-group 2 --overlap "$tmp/convfc.cfg"
check "G without mpirun" err 2 "--mp-group 2: groups of ranks need several nodes" -- \
    "$bin" $common --parallel hybrid --mp-group 2 "$tmp/convfc.cfg"
finish test_mp_group.sh
