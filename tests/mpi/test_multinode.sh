#!/bin/sh
# Training across nodes under mpirun: 2 ranks x 2 workers x batch 12 end
# 20 iterations with the weights of 4 workers x batch 24 on one node,
# within 1e-5 of each tensor's scale, for every all-reduce algorithm and
# auto, and with --overlap (LeNet-5's shapes without max pooling or ReLU,
# fixtures/lenet-smooth.cfg: see there why), and one iteration of LeNet-5
# itself within 1e-6; with
# --rank-update partitioned (the solver state split over the ranks) the
# replicated weights for each update rule and algorithm, byte for byte
# where the sums are, the same after a snapshot and resume, 1/P of the
# state per rank in the log, and a non-finite gradient in one rank's part
# stopping every rank; a fixed
# algorithm gives the same bytes twice. What differs or goes wrong between
# ranks (set-up, settings, signals, stopped ranks): test_multinode_faults.sh.
# usage: sh tests/mpi/test_multinode.sh PATH_TO_SINGLETRAIN
set -u
. "$(dirname "$0")/../lib/check.sh"
. "$(dirname "$0")/../lib/overflow_weights.sh"
suite_start "$@"
snapdiff=$(dirname "$bin")/tools/snapdiff
[ -x "$snapdiff" ] || { echo "test_multinode.sh: $snapdiff is not built (make check-tests)" >&2; exit 2; }
require_cmd mpirun mpich
root=$(cd "$(dirname "$0")/../.." && pwd)
cfg=$root/data/lenet.cfg

cd "$root" || exit 2
# The runs compared below use one convolution implementation: by default
# each run measures its own (rank 0 for all ranks), and implementations
# order their sums differently. Synthetic images: Fashion-MNIST's blank
# backgrounds make values equal in exact arithmetic that another summation
# order breaks the other way. Both splits give each worker 6 images, so the
# runs differ only in how the 4 workers' partial gradients are associated
# ((g0 + g1) + (g2 + g3) across 2 ranks, a left-to-right sum on one node):
# a relative difference of about 2^-24 a step. Trained for 20 iterations,
# a network with max pooling or ReLU turns that into a flipped argmax or
# ReLU mask sooner or later (LeNet-5 on an AVX-512 host: 0.028 apart after
# 20), after which the runs part as runs of two seeds would; so the
# 20-iteration comparisons train lenet-smooth.cfg, where nothing switches
# (2.8e-6 apart after 20 iterations of -t 4 against -t 1), and LeNet-5 is
# compared after one iteration, before any such flip can act: its weights
# then differ by lr x the re-associated sum, a few 2^-24 of each tensor's
# scale, and the tolerance is 1e-6. The implementation is nhwc: with
# blocked, oneDNN 2.6 runs the first convolution's (one input channel)
# backward-weights pass in its reference code on AVX2, 100 ms of every
# iteration, which made this test 231 s instead of 52.
smooth=$root/tests/fixtures/lenet-smooth.cfg
inputs="--data synthetic --train-images 2000 --no-test -q --conv-impl nhwc"
common="$inputs --iters 20"
mkdir "$tmp/one1" "$tmp/rhd1"
check "LeNet-5, one iteration, one node: -t 4 -b 24" err 0 "" -- \
    "$bin" -t 4 -b 24 $inputs --iters 1 --snapshot-dir "$tmp/one1" "$cfg"
check "LeNet-5, one iteration, mpirun -np 2 -t 2 -b 12 --allreduce rhd" err 0 "" -- \
    mpirun -np 2 "$bin" -t 2 -b 12 $inputs --iters 1 --allreduce rhd --supernode-size 1 \
    --snapshot-dir "$tmp/rhd1" "$cfg"
check "LeNet-5, one iteration: the weights of one node with 4 workers, to 1e-6" out 0 \
    "largest relative difference" -- \
    "$snapdiff" "$cfg" "$tmp/one1/lenet_final.snap" "$tmp/rhd1/lenet_final.snap" 1e-6
mkdir "$tmp/one"
check "one node: -t 4 -b 24" err 0 "" -- \
    "$bin" -t 4 -b 24 $common --snapshot-dir "$tmp/one" "$smooth"
for algo in mpi ring rhd rhd-supernode binomial ps butterfly onesided auto; do
    mkdir "$tmp/$algo"
    check "mpirun -np 2 -t 2 -b 12 --allreduce $algo" err 0 "" -- \
        mpirun -np 2 "$bin" -t 2 -b 12 $common --allreduce "$algo" --supernode-size 1 \
        --snapshot-dir "$tmp/$algo" "$smooth"
    check "$algo: the weights of one node with 4 workers, to 1e-5" out 0 "largest relative difference" -- \
        "$snapdiff" "$smooth" "$tmp/one/lenet-smooth_final.snap" "$tmp/$algo/lenet-smooth_final.snap" 1e-5
done
# Without --conv-impl, rank 0 measures and every rank runs rank 0's choices:
# the same ranks given the choices rank 0 saved make the same run, bitwise
# (a rank running its own measured choices would differ whenever they
# differ from rank 0's).
mkdir "$tmp/auto-mn" "$tmp/auto-given"
auto="-t 2 -b 12 --data synthetic --train-images 2000 --no-test --iters 20 -q --supernode-size 1"
check "mpirun -np 2, kernel choices measured by rank 0 and saved" err 0 "" -- \
    mpirun -np 2 "$bin" $auto --snapshot-dir "$tmp/auto-mn" \
    --save-kernel-choices "$tmp/auto-choices" "$cfg"
check "mpirun -np 2 given rank 0's choices" err 0 "" -- \
    mpirun -np 2 "$bin" $auto --snapshot-dir "$tmp/auto-given" \
    --kernel-choices "$tmp/auto-choices" "$cfg"
expect "rank 0's choices measured or given: byte-identical snapshots" \
    cmp -s "$tmp/auto-mn/lenet_final.snap" "$tmp/auto-given/lenet_final.snap"
mkdir "$tmp/again"
check "rhd again" err 0 "" -- \
    mpirun -np 2 "$bin" -t 2 -b 12 $common --allreduce rhd --supernode-size 1 \
    --snapshot-dir "$tmp/again" "$smooth"
expect "rhd twice: byte-identical snapshots" cmp -s "$tmp/rhd/lenet-smooth_final.snap" "$tmp/again/lenet-smooth_final.snap"
# onesided adds along binomial's tree in binomial's order: the same bytes.
expect "onesided: byte-identical to binomial" \
    cmp -s "$tmp/binomial/lenet-smooth_final.snap" "$tmp/onesided/lenet-smooth_final.snap"

# auto's granularity: one algorithm for the whole gradient, or one per slice
# (on synthetic images, as below: the probes time the all-reduce alone).
check "auto, model granularity" out 0 "all-reduce probe" -- \
    mpirun -np 2 "$bin" -t 2 -b 12 --data synthetic --train-images 2000 --no-test --iters 25 \
    --allreduce auto "$cfg"
picked=$(sed -n 's/^all-reduce: worker 0 \([a-z-]*\), worker 1 \([a-z-]*\)$/\1 \2/p' "$tmp/stdout")
expect "auto, model granularity: both slices use one algorithm ($picked)" \
    [ -n "$picked" -a "${picked% *}" = "${picked#* }" ]
check "auto, layer granularity" out 0 "all-reduce: worker 0 " -- \
    mpirun -np 2 "$bin" -t 2 -b 12 --data synthetic --train-images 2000 --no-test --iters 25 \
    --allreduce auto --allreduce-granularity layer "$cfg"
# --overlap with layer granularity: an algorithm per bucket size class, each
# probed on its own class's messages. LeNet-5's buckets of at least 4K are
# fc2 (20K), fc1 (1.6M), conv2 (100K) and conv1 (2K, the short last one):
# four classes, whose probe times follow their sizes.
check "--overlap, layer granularity: one choice per bucket class" out 0 "buckets of 0K-16K" -- \
    mpirun -np 2 "$bin" -t 1 -b 12 --data synthetic --train-images 2000 --no-test --iters 40 \
    --overlap --bucket-size 4K --allreduce auto --allreduce-granularity layer "$cfg"
line=$(grep "^all-reduce: " "$tmp/stdout")
echo "     $line"
classes=$(echo "$line" | grep -o "buckets of [0-9K-]* [a-z-]* (probed [0-9.]* ms)" | wc -l)
expect "four bucket classes, each with its choice ($classes)" [ "$classes" -eq 4 ]
small=$(echo "$line" | sed -n 's/.*buckets of 0K-16K [a-z-]* (probed \([0-9.]*\) ms).*/\1/p')
large=$(echo "$line" | sed -n 's/.*buckets of 1024K-4096K [a-z-]* (probed \([0-9.]*\) ms).*/\1/p')
expect "each class probed on its own messages: 1.6M slower than 2K ($large > $small ms)" \
    awk "BEGIN {exit !(${large:-0} > ${small:-1})}"
check "--overlap, model granularity: one algorithm" out 0 "buckets of 0K-16K" -- \
    mpirun -np 2 "$bin" -t 1 -b 12 --data synthetic --train-images 2000 --no-test --iters 40 \
    --overlap --bucket-size 4K --allreduce auto "$cfg"
names=$(grep "^all-reduce: " "$tmp/stdout" | grep -o "buckets of [0-9K-]* [a-z-]*" |
    awk '{print $4}' | sort -u | wc -l)
expect "--overlap, model granularity: every class the same algorithm ($names)" [ "$names" -eq 1 ]
check "-t auto under mpirun: refused, each rank would measure its own split" err 2 \
    "-t auto / --intra auto: under mpirun each rank would measure its own split" -- \
    mpirun -np 2 "$bin" -t auto --data synthetic --iters 5 "$cfg"
check "a bad granularity" err 2 "--allreduce-granularity slab: expected model or layer" -- \
    mpirun -np 2 "$bin" -t 2 --allreduce auto --allreduce-granularity slab --data synthetic \
    --iters 5 "$cfg"

# --overlap: buckets all-reduced during backward. With two ranks the sums
# are the same floats in either order: byte-identical to the plain run
# (onesided on the overlap thread: to its own plain run, whatever P).
for algo in rhd auto; do
    mkdir "$tmp/overlap-$algo"
    check "--overlap --allreduce $algo (64K buckets)" err 0 "" -- \
        mpirun -np 2 "$bin" -t 2 -b 12 $common --allreduce "$algo" --overlap --bucket-size 64K \
        --snapshot-dir "$tmp/overlap-$algo" "$smooth"
    expect "--overlap $algo: byte-identical to the run without it" \
        cmp -s "$tmp/rhd/lenet-smooth_final.snap" "$tmp/overlap-$algo/lenet-smooth_final.snap"
done
mkdir "$tmp/overlap3-onesided" "$tmp/onesided3"
check "three ranks --allreduce onesided" err 0 "" -- \
    mpirun -np 3 "$bin" -t 1 -b 8 $common --allreduce onesided --snapshot-dir "$tmp/onesided3" \
    "$smooth"
check "three ranks --allreduce onesided --overlap (16K buckets)" err 0 "" -- \
    mpirun -np 3 "$bin" -t 1 -b 8 $common --allreduce onesided --overlap --bucket-size 16K \
    --snapshot-dir "$tmp/overlap3-onesided" "$smooth"
expect "--overlap onesided, three ranks: byte-identical to the run without it" \
    cmp -s "$tmp/onesided3/lenet-smooth_final.snap" "$tmp/overlap3-onesided/lenet-smooth_final.snap"
mkdir "$tmp/three" "$tmp/one3"
check "three ranks with --overlap" err 0 "" -- \
    mpirun -np 3 "$bin" -t 1 -b 8 $common --overlap --bucket-size 16K --snapshot-dir "$tmp/three" "$smooth"
check "one node: -t 3 -b 24" err 0 "" -- "$bin" -t 3 -b 24 $common --snapshot-dir "$tmp/one3" "$smooth"
check "three ranks with --overlap: the weights of one node, to 1e-5" out 0 "largest relative difference" -- \
    "$snapdiff" "$smooth" "$tmp/one3/lenet-smooth_final.snap" "$tmp/three/lenet-smooth_final.snap" 1e-5
check "--overlap on one node" err 2 "--overlap: overlapping the all-reduce with backward needs several nodes" -- \
    "$bin" --overlap --data synthetic --iters 5 "$cfg"

# --rank-update partitioned: each slice reduce-scattered over the ranks,
# each rank updating (and keeping the solver state of) its 1/P part, the
# new weights all-gathered. For each of the six update rules, with weight
# decay (LeNet's decay=0.0005) and a learning-rate step at iteration 10,
# 4 ranks end with the weights of the replicated run (lenet-smooth.cfg:
# mpi's sums may come in another order, see above), to 1e-5 as above, and
# in fact byte for byte, solver state included: rhd's halves are its
# all-reduce, so the sums are the same bits and the update the same
# arithmetic, and the snapshot gathers the whole state on rank 0.
part="-t 2 -b 8 $common"
for rule in sgd nesterov adagrad rmsprop adadelta adam; do
    sed -e "s/^momentum=0.9/momentum=0.9\nsolver=$rule/" -e 's/^steps=1876/steps=10/' "$smooth" \
        >"$tmp/$rule.cfg"
    mkdir "$tmp/rep-$rule" "$tmp/part-$rule"
    check "$rule: mpirun -np 4 --rank-update replicated" err 0 "" -- \
        mpirun -np 4 "$bin" $part --rank-update replicated --snapshot-dir "$tmp/rep-$rule" \
        "$tmp/$rule.cfg"
    check "$rule: mpirun -np 4 --rank-update partitioned" err 0 "" -- \
        mpirun -np 4 "$bin" $part --rank-update partitioned --snapshot-dir "$tmp/part-$rule" \
        "$tmp/$rule.cfg"
    check "$rule: partitioned ends with the replicated weights, to 1e-5" out 0 "largest relative difference" -- \
        "$snapdiff" "$tmp/$rule.cfg" "$tmp/rep-$rule/${rule}_final.snap" \
        "$tmp/part-$rule/${rule}_final.snap" 1e-5
    expect "$rule: partitioned: byte-identical snapshot (weights and gathered solver state)" \
        cmp -s "$tmp/rep-$rule/${rule}_final.snap" "$tmp/part-$rule/${rule}_final.snap"
done
# Other algorithms and a rank count that is not a power of two (rhd folds,
# rhd-supernode moves the parts to their owners, butterfly and onesided
# all-reduce and then all-gather by ring): byte-identical too, but for mpi,
# whose MPI_Reduce_scatter may add in another order than its
# MPI_Allreduce, and auto, which probes it: those to 1e-5.
for algo in mpi ring rhd-supernode butterfly onesided auto; do
    mkdir "$tmp/rep3-$algo" "$tmp/part3-$algo"
    for mode in replicated partitioned; do
        dir=$tmp/rep3-$algo
        [ $mode = partitioned ] && dir=$tmp/part3-$algo
        check "sgd: mpirun -np 3 --allreduce $algo --rank-update $mode" err 0 "" -- \
            mpirun -np 3 "$bin" $part --allreduce "$algo" --supernode-size 2 --rank-update $mode \
            --snapshot-dir "$dir" "$tmp/sgd.cfg"
    done
    check "-np 3 --allreduce $algo: partitioned ends with the replicated weights, to 1e-5" out 0 "largest relative difference" -- \
        "$snapdiff" "$tmp/sgd.cfg" "$tmp/rep3-$algo/sgd_final.snap" "$tmp/part3-$algo/sgd_final.snap" 1e-5
    case $algo in mpi | auto) continue ;; esac
    expect "-np 3 --allreduce $algo: partitioned: byte-identical snapshot" \
        cmp -s "$tmp/rep3-$algo/sgd_final.snap" "$tmp/part3-$algo/sgd_final.snap"
done
# Snapshot and resume: the snapshot at iteration 10 holds the state rank 0
# gathered; resumed, rank 0 hands the parts out again, and the run ends
# with the uninterrupted run's snapshot, byte for byte (Adam: two planes
# and the bias correction's step count). A replicated run resumes it alike.
mkdir "$tmp/part-cut" "$tmp/rep-resumed"
check "adam, partitioned: a snapshot every 10 iterations" err 0 "" -- \
    mpirun -np 4 "$bin" $part --rank-update partitioned --snapshot-dir "$tmp/part-cut" \
    --snapshot-every 10 "$tmp/adam.cfg"
rm -f "$tmp/part-cut/adam_final.snap"
check "adam, partitioned: resume from iteration 10" err 0 "" -- \
    mpirun -np 4 "$bin" $part --rank-update partitioned --snapshot-dir "$tmp/part-cut" \
    --resume "$tmp/part-cut/adam_10.snap" "$tmp/adam.cfg"
expect "adam, partitioned: snapshot + resume = the uninterrupted run, byte for byte" \
    cmp -s "$tmp/part-adam/adam_final.snap" "$tmp/part-cut/adam_final.snap"
check "adam: a replicated run resumes the partitioned snapshot" err 0 "" -- \
    mpirun -np 4 "$bin" $part --snapshot-dir "$tmp/rep-resumed" \
    --resume "$tmp/part-cut/adam_10.snap" "$tmp/adam.cfg"
expect "adam: ... and ends with the same snapshot" \
    cmp -s "$tmp/part-adam/adam_final.snap" "$tmp/rep-resumed/adam_final.snap"
# The log: each rank holds 1/P of the solver state (rank 0's figure): Adam's
# two floats a parameter, 442,750 parameters (lenet-smooth.cfg), 3.54 MB.
check "the log gives the solver state per rank" out 0 "solver state: " "MB on this rank (1/4 of" -- \
    mpirun -np 4 "$bin" -t 2 -b 8 --data synthetic --train-images 2000 --no-test --iters 1 \
    --rank-update partitioned "$tmp/adam.cfg"
figure=$(sed -n 's/^solver state: \([0-9.]*\) MB on this rank (1\/\([0-9]*\) of \([0-9.]*\) MB.*/\1 \2 \3/p' "$tmp/stdout")
expect "the solver state per rank is 1/P of the whole (${figure:-no figure}: MB here, P, MB in all)" \
    awk -v f="$figure" 'BEGIN { split(f, v, " "); exit !(v[2] == 4 && v[3] > 3.5 && v[3] < 3.6 &&
        (v[1] * v[2] - v[3]) ^ 2 <= (0.002 * v[3]) ^ 2) }'
# A gradient that is not finite in one rank's part only stops every rank at
# that iteration (the all-gather carries each rank's verdict; without it
# the others would go on and wait for that rank until --peer-timeout).
# tiny.cfg's weights whose gradient overflows (lib/overflow_weights.sh)
# where it meets the convolution's channel 3 (arena floats 88-103, 152-167
# and 216-231), none of it in rank 0's part ([0, 58]).
overflow_weights "$tmp/overflow.weights"
start=$(($(date +%s%N) / 1000000))
check "partitioned: a gradient overflowing in some ranks' parts stops every rank" err 1 \
    "rank 0: iteration 0: training diverged: the gradient of 2.weights" -- \
    mpirun -np 4 "$bin" -q -t 1 -b 8 --data synthetic --no-test --iters 5 --peer-timeout 20 \
    --rank-update partitioned --weights "$tmp/overflow.weights" "$fixtures/tiny.cfg"
ms=$(($(date +%s%N) / 1000000 - start))
expect "... every rank says so, at once ($ms ms; --peer-timeout 20)" \
    [ "$(grep -c "iteration 0: training diverged" "$tmp/stderr")" -eq 4 -a "$ms" -lt 15000 ]
check "--overlap with --rank-update partitioned" err 2 "--overlap with --rank-update partitioned: give one" -- \
    mpirun -np 2 "$bin" -t 2 --overlap --rank-update partitioned --data synthetic --iters 5 "$cfg"

finish test_multinode.sh
