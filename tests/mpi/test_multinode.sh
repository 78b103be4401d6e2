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
# algorithm gives the same bytes twice; the crossing-bytes count follows
# --supernode-size; ranks that differ or fail at set-up stop every rank
# with a message, no hang, and so does a rank that differs in any setting
# that changes the computation (momentum, decay, policy, data, backend,
# --conv-impl, --parallel); a snapshot of 3 ranks resumed by 1 or 2 says
# that the global batch changed; more ranks than cores are told to be
# fewer.
# --patience, decided by rank 0's test phases, ends every rank cleanly at
# the same iteration.
# Signals: SIGTERM to mpirun and SIGINT to one rank stop every rank at the
# same iteration, rank 0 snapshots, the metrics file is completed and every
# rank exits 128 + the signal; a rank failing in training is named with its
# reason by rank 0; a stopped rank (SIGSTOP), rank 0 or not, ends the run
# after --peer-timeout with a message, the other waiting without spinning.
# Fails, naming the package (mpich), when mpirun is missing.
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
auto="-t 2 -b 12 --train-images 2000 --no-test --iters 20 -q --supernode-size 1"
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

# auto's granularity: one algorithm for the whole gradient, or one per slice.
check "auto, model granularity" out 0 "all-reduce probe" -- \
    mpirun -np 2 "$bin" -t 2 -b 12 --train-images 2000 --no-test --iters 25 --allreduce auto "$cfg"
picked=$(sed -n 's/^all-reduce: worker 0 \([a-z-]*\), worker 1 \([a-z-]*\)$/\1 \2/p' "$tmp/stdout")
expect "auto, model granularity: both slices use one algorithm ($picked)" \
    [ -n "$picked" -a "${picked% *}" = "${picked#* }" ]
check "auto, layer granularity" out 0 "all-reduce: worker 0 " -- \
    mpirun -np 2 "$bin" -t 2 -b 12 --train-images 2000 --no-test --iters 25 --allreduce auto \
    --allreduce-granularity layer "$cfg"
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
    mpirun -np 4 "$bin" -t 2 -b 8 --train-images 2000 --no-test --iters 1 --rank-update partitioned \
    "$tmp/adam.cfg"
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
check "an unknown --allreduce" err 2 "--allreduce tree: unknown algorithm (expected mpi, ring, rhd, rhd-supernode, binomial, ps, butterfly or onesided)" -- \
    mpirun -np 2 "$bin" -t 2 --allreduce tree --data synthetic --iters 5 "$cfg"

# Every setting that changes the computation is compared (rank 1 differs).
tiny=$tmp/tiny.cfg
cp "$fixtures/tiny.cfg" "$tiny"
differ() { # NAME WHAT RANK0_ARGS -- RANK1_ARGS
    _name=$1 _what=$2
    shift 2
    _r0=
    while [ "$1" != -- ]; do _r0="$_r0 $1"; shift; done
    shift
    # shellcheck disable=SC2086
    check "ranks that differ in $_name" err 2 "rank 1 of 2 differs from rank 0 in $_what" -- \
        mpirun -np 1 "$bin" -q -t 1 --iters 3 --no-test $_r0 : -np 1 "$bin" -q -t 1 --iters 3 \
        --no-test "$@"
}
sed 's/^momentum=0.9/momentum=0.8/' "$tiny" >"$tmp/momentum.cfg"
sed 's/^momentum=0.9/momentum=0.9\ndecay=0.001/' "$tiny" >"$tmp/decay.cfg"
sed 's/^momentum=0.9/momentum=0.9\npolicy=steps\nsteps=5\nscales=0.5/' "$tiny" >"$tmp/policy.cfg"
sed 's/^activation=relu/activation=leaky/' "$tiny" >"$tmp/leaky.cfg"
differ "momentum=" "the momentum (momentum= in [net])" --data synthetic "$tiny" -- \
    --data synthetic "$tmp/momentum.cfg"
differ "decay=" "the weight decay (decay= in [net])" --data synthetic "$tiny" -- \
    --data synthetic "$tmp/decay.cfg"
differ "policy=" "the learning-rate policy (policy= in [net])" --data synthetic "$tiny" -- \
    --data synthetic "$tmp/policy.cfg"
differ "a layer's activation=" "a key of the cfg" --data synthetic "$tiny" -- \
    --data synthetic "$tmp/leaky.cfg"
differ "--data synthetic" "the training data's kind" "$cfg" -- --data synthetic "$cfg"
differ "--train-images" "the number of training records (--train-images" --data synthetic \
    "$tiny" -- --data synthetic --train-images 512 "$tiny"
differ "--backend ref" "the backend (--backend)" --data synthetic "$tiny" -- \
    --data synthetic --backend ref "$tiny"
differ "--conv-impl" "the convolution implementation (--conv-impl)" --data synthetic "$tiny" \
    -- --data synthetic --conv-impl gemm "$tiny"
differ "--parallel" "the parallelism (--parallel, as resolved)" --data synthetic "$tiny" -- \
    --data synthetic --parallel hybrid "$tiny"
differ "--rank-update" "--rank-update" --data synthetic "$tiny" -- \
    --data synthetic --rank-update partitioned "$tiny"
differ "--snapshot-every, partitioned" "--snapshot-every (with --rank-update partitioned" \
    --data synthetic --rank-update partitioned --snapshot-dir "$tmp/differ0" "$tiny" -- \
    --data synthetic --rank-update partitioned --snapshot-dir "$tmp/differ1" --snapshot-every 2 \
    "$tiny"
# More ranks on this host than cores (MPI_LOCALNRANKS, which mpirun sets,
# raised above the cores): even -t 1 --intra 1 oversubscribes, and the
# warning says to start fewer ranks (it advised -t 1 --intra 1, the
# setting already). Left out when the process may not use every core
# (the ranks are then taken as bound to cores of their own).
cores=$(nproc)
if [ "$cores" -eq "$(getconf _NPROCESSORS_ONLN)" ]; then
    check "more ranks than cores: the warning says to start fewer" err 0 \
        "x $((cores + 1)) ranks on this host = $((cores + 1)) threads on $cores usable core" \
        "more ranks than cores: even one thread a rank is too many; start at most $cores rank" -- \
        mpirun -np 2 env MPI_LOCALNRANKS=$((cores + 1)) "$bin" -q -t 1 --iters 1 --no-test \
        --data synthetic "$tiny"
    expect "... and not -t 1 --intra 1, which is the setting" \
        sh -c "! grep -q -e '-t 1 --intra 1 gives' '$tmp/stderr'"
else
    echo "SKIP more ranks than cores: this process may use $cores of $(getconf _NPROCESSORS_ONLN) cores"
fi

# A snapshot of a 3-rank run resumed by one process or two ranks: -b is
# per rank, so the global batch drops from 24 to 8 or 16; said, as a
# resume with another -t is (it went on silently); by 3 ranks, nothing.
mkdir "$tmp/ranks"
check "a 3-rank run writes its snapshot" err 0 "" -- \
    mpirun -np 3 "$bin" -q -t 1 --iters 2 --no-test --data synthetic --snapshot-dir "$tmp/ranks" \
    "$tiny"
check "resumed by one process: the rank counts and global batches are named" err 0 \
    "$tmp/ranks/tiny_final.snap was written by a run of 3 ranks, this run has 1: -b is per rank, so the global batch was 24 and is now 8" -- \
    "$bin" -q -t 1 --iters 4 --no-test --data synthetic --resume "$tmp/ranks/tiny_final.snap" "$tiny"
check "resumed by 2 ranks: so are they" err 0 "a run of 3 ranks, this run has 2" -- \
    mpirun -np 2 "$bin" -q -t 1 --iters 4 --no-test --data synthetic --resume \
    "$tmp/ranks/tiny_final.snap" "$tiny"
check "resumed by 3 ranks" err 0 "" -- mpirun -np 3 "$bin" -q -t 1 --iters 4 --no-test \
    --data synthetic --resume "$tmp/ranks/tiny_final.snap" "$tiny"
expect "... without a word about ranks" sh -c "! grep -q 'ranks, this run has' '$tmp/stderr'"
check "ranks that differ only in output and test options run" err 0 "" -- \
    mpirun -np 1 "$bin" -q -t 1 --iters 3 --data synthetic "$tiny" : -np 1 "$bin" -q -t 1 \
    --iters 3 --data synthetic --log-every 1 --test-images 10 --io-threads 2 "$tiny"

# Test-driven stopping: rank 0 alone tests, and its decision reaches the
# other rank through the next iteration's control sum, so both end at the
# iteration rank 0 stopped at, cleanly (a rank going on alone would fail at
# its next all-reduce, or wait: each rank's exit code is recorded). At
# learning rate 0 every test phase ties with the first: --patience 2 stops
# after the third, at iteration 15 of 1000.
mkdir "$tmp/patience"
sed 's/^learning_rate=.*/learning_rate=0/' "$tiny" >"$tmp/frozen.cfg"
RC_DIR=$tmp/patience check "mpirun -np 2 --patience 2: rank 0 stops at its third test phase" out 0 \
    "stopping at iteration 15: no improvement for 2 test phases (--patience 2), best " -- \
    mpirun -np 2 sh -c '"$@"; echo $? >"$RC_DIR/rc.$PMI_RANK"' sh \
    "$bin" -t 1 --data synthetic --iters 1000 --test-interval 5 --log-every 5 --patience 2 \
    --peer-timeout 60 --snapshot-dir "$tmp/patience" "$tmp/frozen.cfg"
expect "--patience across nodes: every rank exits 0 ($(cat "$tmp/patience"/rc.* 2>/dev/null | tr '\n' ' '))" \
    [ "$(cat "$tmp/patience/rc.0" "$tmp/patience/rc.1" 2>/dev/null | tr '\n' ' ')" = "0 0 " ]
expect "--patience across nodes: rank 0 ran 15 iterations and says why" \
    grep -q "^stopped early at iteration 15 of 1000: no improvement" "$tmp/stdout"
expect "--patience across nodes: 'done:' counts 15 iterations" grep -q "^done: 15 iterations" \
    "$tmp/stdout"
expect "--patience across nodes: no progress line past iteration 15" \
    [ -z "$(grep -e "^iter 20/" -e "^test  iter 20 " "$tmp/stdout")" ]
expect "--patience across nodes: the best and final snapshots are written" \
    [ -s "$tmp/patience/frozen_best.snap" -a -s "$tmp/patience/frozen_final.snap" ]

# Signals. Each rank runs under a shell that records its exit code (and
# ignores the signals itself: the rank blocks and takes them); mpirun's own
# code after SIGTERM is its own business (MPICH's hydra returns 0).
ranks_of() { # DIR: the pids of the ranks writing into DIR (not their shells)
    pgrep -f -- "^$bin -t 1 .*--snapshot-dir $1 "
}
signal_run() { # DIR [options]: 2 ranks, each recording its code in DIR/rc.RANK
    _d=$1
    shift
    mkdir "$_d"
    RC_DIR=$_d mpirun -np 2 sh -c 'trap "" INT TERM; "$@"; echo $? >"$RC_DIR/rc.$PMI_RANK"' sh \
        "$bin" -t 1 --data synthetic --iters 100000000 --log-every 100 --no-test \
        --snapshot-dir "$_d" "$@" "$tiny" >"$_d/out" 2>"$_d/err" &
    run_pid=$!
    wait_for "$_d/out" "iter 300/"
    # a run that does not stop fails the checks instead of hanging the suite
    (sleep 90 && kill -9 $(ranks_of "$_d")) 2>/dev/null &
    watchdog=$!
}
signal_end() { # the run's end: its watchdog is no longer needed
    wait $run_pid
    kill $watchdog 2>/dev/null
}
signal_checks() { # NAME DIR CODE
    n=$(ls "$2" | sed -n 's/^tiny_\([0-9]*\)\.snap$/\1/p')
    expect "$1: every rank exits $3 ($(cat "$2"/rc.* 2>/dev/null | tr '\n' ' '))" \
        [ "$(cat "$2"/rc.0 "$2"/rc.1 2>/dev/null | tr '\n' ' ')" = "$3 $3 " ]
    expect "$1: rank 0 saved a snapshot (${n:-none})" [ -n "$n" ]
    # counted as matches, not lines: mpirun forwards the two ranks' stderr
    # into one file, where a busy machine can join their lines
    expect "$1: both ranks stopped after iteration ${n:-?}" \
        [ "$(grep -o "interrupted at iteration $n of" "$2/err" | wc -l)" -eq 2 ]
}
signal_run "$tmp/sigterm" --metrics "$tmp/sigterm/m.csv" --allreduce ring
start=$(($(date +%s%N) / 1000000))
kill -TERM $run_pid
signal_end
echo "     (SIGTERM to mpirun: every rank ended $(($(date +%s%N) / 1000000 - start)) ms later)"
signal_checks "SIGTERM to mpirun" "$tmp/sigterm" 143
expect "SIGTERM to mpirun: the metrics file is complete, no .partial" \
    [ -s "$tmp/sigterm/m.csv" ] && [ ! -e "$tmp/sigterm/m.csv.partial" ]
signal_run "$tmp/sigint"
kill -INT $(ranks_of "$tmp/sigint" | tail -1)
signal_end
signal_checks "SIGINT to one rank" "$tmp/sigint" 130
expect "SIGINT to one rank: the other says why it stops" \
    grep -q "Interrupt on another rank: every rank stops" "$tmp/sigint/err"

# A rank failing in training: rank 1's image list has a cut image.
mkdir "$tmp/img"
i=0
while [ $i -lt 32 ]; do
    { printf 'P5\n8 8\n255\n'; head -c 64 /dev/urandom; } >"$tmp/img/$i.pgm"
    echo "$tmp/img/$i.pgm $((i % 3))"
    i=$((i + 1))
done >"$tmp/good.txt"
{ printf 'P5\n8 8\n255\n'; head -c 10 /dev/urandom; } >"$tmp/img/cut.pgm"
sed "17s|.*|$tmp/img/cut.pgm 1|" "$tmp/good.txt" >"$tmp/bad.txt"
echo "train=$tmp/good.txt" >"$tmp/good.data"
echo "train=$tmp/bad.txt" >"$tmp/bad.data"
check "a rank failing in training: rank 0 names it and its reason" err 2 \
    "rank 0: rank 1 of 2 failed: $tmp/bad.txt:17: $tmp/img/cut.pgm: cannot decode image" -- \
    mpirun -np 1 "$bin" -q -t 1 --iters 50 --no-test --data "$tmp/good.data" "$tiny" : \
    -np 1 "$bin" -q -t 1 --iters 50 --no-test --data "$tmp/bad.data" "$tiny"
# Rank 0 tests alone while the others go on: its test set failing mid-run
# ends every rank at once with its message (not after --peer-timeout).
printf 'train=%s\ntest=%s\n' "$tmp/good.txt" "$tmp/bad.txt" >"$tmp/badtest.data"
check "rank 0's test phase failing mid-run ends every rank at once" err 1 \
    "rank 0: $tmp/bad.txt:17: $tmp/img/cut.pgm: cannot decode image" -- \
    mpirun -np 2 "$bin" -q -t 1 --iters 50 --test-interval 5 --data "$tmp/badtest.data" "$tiny"

# A stopped rank: the other waits without spinning, then ends the run;
# rank 0 stopped too, between segments (--test-interval 1 makes every
# iteration start one, where the others once waited for it forever); and
# rank 1 stopped under onesided, whose waits poll notifications and
# one-sided requests (a flush to the stopped rank would block in MPI).
rank_pid() { # DIR RANK: the pid of that rank
    for _p in $(ranks_of "$1"); do
        tr '\0' '\n' <"/proc/$_p/environ" 2>/dev/null | grep -qx "PMI_RANK=$2" && echo "$_p"
    done
}
ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat" 2>/dev/null || echo 0; }
for case in 1:rhd 0:rhd 1:onesided; do
    stopped=${case%:*} algo=${case#*:}
    d=$tmp/stop$stopped-$algo
    signal_run "$d" --peer-timeout 5 --test-interval 1 --allreduce "$algo"
    p=$(rank_pid "$d" $stopped)
    other=$(rank_pid "$d" $((1 - stopped)))
    expect "rank $stopped stopped ($algo): two ranks run (${p:--} ${other:--})" [ -n "$p" ] && [ -n "$other" ]
    start=$(($(date +%s%N) / 1000000))
    [ -z "$p" ] || kill -STOP "$p"
    sleep 1.5
    a=$(ticks "${other:-0}")
    sleep 1
    b=$(ticks "${other:-0}")
    wait $run_pid
    rc=$?
    ms=$(($(date +%s%N) / 1000000 - start))
    kill $watchdog 2>/dev/null
    [ -z "$p" ] || kill -9 "$p" 2>/dev/null
    expect "rank $stopped stopped ($algo): the other uses little CPU while it waits ($((b - a)) of $(getconf CLK_TCK) ticks in 1 s)" \
        [ $((b - a)) -lt $(($(getconf CLK_TCK) / 3)) ]
    expect "rank $stopped stopped ($algo): the run ends with a failure after --peer-timeout ($ms ms, exit $rc)" \
        [ "$rc" -ne 0 ] && [ "$ms" -lt 80000 ]
    expect "rank $stopped stopped ($algo): the message says it" grep -q "a rank stopped, hung or is lost" \
        "$d/err"
done

finish test_multinode.sh
