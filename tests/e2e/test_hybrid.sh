#!/bin/sh
# Hybrid parallelism (--parallel hybrid): fully connected layers run
# model-parallel over the workers, the rest data-parallel. Truth: the
# data-parallel run of the same seed. After 20 iterations the weights of
# both agree to 1e-5 (relative, tensor by tensor: tools/snapdiff; the two
# sum each batch in another order) with 1 to 4 workers, on an odd batch
# (13) whose epoch ends in a batch of one image (92 = 7 x 13 + 1: three
# of four workers then have no sample and only take their part in the
# model-parallel layers), on the dnnl, ref and cpe backends; for
# networks whose fully connected layers follow convolutions and dropout,
# come first (no input gradient), or follow a fully connected layer with
# batch norm (which stays data-parallel, and so does every layer before
# it); with each of the six update rules; and across two nodes (mpirun),
# with the solver state partitioned over them too (--rank-update
# partitioned). On one node the model-parallel layers apply their
# gradients in backward: the gradient memory logged falls by the
# model-parallel gradients of every worker, and a run stopped by SIGINT
# (its snapshot taken at whatever point of an iteration the signal came)
# and resumed ends with the bits of the uninterrupted run; across nodes,
# or with the update on the cpe backend's core group, they are held once
# and reduced. A mode that cannot run hybrid is refused. Fails, naming
# the package (mpich), when mpirun is missing.
# usage: sh tests/e2e/test_hybrid.sh PATH_TO_SINGLETRAIN
set -u
. "$(dirname "$0")/../lib/check.sh"
suite_start "$@"
require_cmd mpirun mpich
snapdiff=$(dirname "$bin")/tools/snapdiff
[ -x "$snapdiff" ] || { echo "test_hybrid.sh: $snapdiff is not built (make check-tests)" >&2; exit 2; }

. "$(dirname "$0")/../lib/hybrid_nets.sh"
sed -e 's/^max_batches=20$/max_batches=20\nsolver=adam/' -e 's/^learning_rate=.*/learning_rate=0.001/' "$tmp/convfc.cfg" >"$tmp/adam.cfg"
for rule in nesterov:0.05 adagrad:0.05 rmsprop:0.005 adadelta:1.0; do
    sed -e "s/^max_batches=20\$/max_batches=20\nsolver=${rule%:*}/" \
        -e "s/^learning_rate=.*/learning_rate=${rule#*:}/" "$tmp/convfc.cfg" >"$tmp/${rule%:*}.cfg"
done
net fcfirst '[connected]
output=21
activation=leaky

[connected]
output=10
activation=linear
'
net bnmix '[connected]
output=16
batch_normalize=1
activation=relu

[connected]
output=10
activation=linear
'
common="--data synthetic --train-images 92 --iters 20 --seed 3"

# same NAME CFG BACKEND T [EXTRA...]: data and hybrid runs, weights to 1e-5
# (dnnl: one convolution implementation, so that both runs sum alike)
same() {
    label=$1 cfg=$2 backend=$3 t=$4
    shift 4
    impl=
    [ "$backend" = dnnl ] && impl="--conv-impl blocked"
    rm -rf "$tmp/data" "$tmp/hybrid"
    check "$label: data-parallel" err 0 "" -- "$bin" $common $impl -q --backend "$backend" \
        -t "$t" --parallel data --snapshot-dir "$tmp/data" "$@" "$tmp/$cfg.cfg"
    check "$label: hybrid" err 0 "" -- "$bin" $common $impl -q --backend "$backend" -t "$t" \
        --parallel hybrid --snapshot-dir "$tmp/hybrid" "$@" "$tmp/$cfg.cfg"
    check "$label: the same weights to 1e-5" out 0 "largest relative difference" -- \
        "$snapdiff" "$tmp/$cfg.cfg" "$tmp/data/${cfg}_final.snap" \
        "$tmp/hybrid/${cfg}_final.snap" 1e-5
}
for t in 1 2 3 4; do
    same "conv, fc, dropout, fc; dnnl -t $t" convfc dnnl "$t"
    same "conv, fc, dropout, fc; ref -t $t" convfc ref "$t"
done
same "conv, fc, dropout, fc; cpe -t 2" convfc cpe 2
same "fc on the input; -t 3" fcfirst dnnl 3
same "fc with batch norm, then fc; -t 4" bnmix dnnl 4
same "Adam, -t 3" adam dnnl 3
for rule in nesterov adagrad rmsprop adadelta; do
    same "$rule, -t 3" "$rule" dnnl 3
done

# What runs model-parallel, and the memory it saves.
check "hybrid says which layers run model-parallel" out 0 \
    "fully connected layers from layer 1 on run model-parallel over 4 workers" -- \
    "$bin" $common -t 4 --parallel hybrid "$tmp/convfc.cfg"
check "after batch norm: only the last fully connected layer" out 0 \
    "fully connected layers from layer 1 on run model-parallel over 2 workers" -- \
    "$bin" $common -t 2 --parallel hybrid "$tmp/bnmix.cfg"
check "one node: the layers apply the solver in backward" out 0 \
    "each applying the solver to its slice of their 0.0M parameters in backward: no worker holds their gradients" -- \
    "$bin" $common -t 2 --parallel hybrid "$tmp/convfc.cfg"
check "the cpe backend updates on its core group: the gradients are held once" out 0 \
    "the gradients of their 0.0M parameters are held once" -- \
    "$bin" $common -t 2 --backend cpe --parallel hybrid "$tmp/convfc.cfg"
grads() { sed -n 's/.*gradients \([0-9.]*\) MB in all.*/\1/p' "$tmp/stdout"; }
check "LeNet-5 -t 4, data-parallel: memory line" out 0 "gradients" -- \
    "$bin" --data synthetic --train-images 64 --iters 1 --no-test -t 4 -b 16 --parallel data \
    "$(dirname "$0")/../../data/lenet.cfg"
data_mb=$(grads)
check "LeNet-5 -t 4, hybrid: memory line" out 0 "gradients" -- \
    "$bin" --data synthetic --train-images 64 --iters 1 --no-test -t 4 -b 16 \
    --parallel hybrid "$(dirname "$0")/../../data/lenet.cfg"
hybrid_mb=$(grads)
# LeNet-5: 431,080 parameters, 405,510 of them in its two fully connected
# layers: each of the 4 workers holds 1.62 MB less.
expect "LeNet-5 -t 4: gradients $data_mb MB data-parallel, $hybrid_mb MB hybrid (6.5 MB less)" \
    awk -v d="$data_mb" -v h="$hybrid_mb" 'BEGIN { x = d - h; exit !(x > 6.4 && x < 6.6) }'
# The estimate counts the buffers the workers share: each model-parallel
# layer's whole-batch input and output blocks, LeNet-5 at -b 256
# 256 x (800 + 500 + 500 + 10) floats = 1.85 MB; data parallelism has none.
check "LeNet-5 -b 256, hybrid: the estimate counts the shared buffers" out 0 \
    "model-parallel layers' shared buffers 1.9 MB" -- \
    "$bin" --data synthetic --train-images 256 --dry-run -t 4 -b 256 --parallel hybrid \
    "$(dirname "$0")/../../data/lenet.cfg"
check "LeNet-5 -b 256, data-parallel: the estimate has no shared buffers" out 0 "gradients" -- \
    "$bin" --data synthetic --train-images 256 --dry-run -t 4 -b 256 --parallel data \
    "$(dirname "$0")/../../data/lenet.cfg"
expect "... and says none" sh -c "! grep -q 'shared buffers' '$tmp/stdout'"

# SIGINT: wherever in an iteration it lands (before the first update in
# backward, or after it, when the iteration is let finish), the snapshot
# holds whole iterations: resumed, the run ends with the uninterrupted
# run's bits. Six signals, at different moments, on a network whose
# convolutions' backward, after the fully connected layer's update, takes
# half an iteration: a run that stopped there, half applied, would resume
# to other bits (measured: 4 of 12 signals land there with -t 1, 1 of 12
# with -t 2; a build that does not let such an iteration finish fails
# here unless all six miss it).
cat >"$tmp/late.cfg" <<'EOF'
[net]
batch=13
channels=3
height=24
width=24
learning_rate=0.01
momentum=0.9

[convolutional]
filters=32
size=3
stride=1
pad=1
activation=relu

[convolutional]
filters=32
size=3
stride=1
pad=1
activation=relu

[connected]
output=10
activation=linear

[softmax]
EOF
base="--parallel hybrid --conv-impl blocked --data synthetic --train-images 92 --no-test --seed 3"
for try in 1:0.1 1:0.3 1:0.5 1:0.7 2:0.2 2:0.4; do
    delay=${try#*:}
    hyb="-t ${try%:*} $base"
    d="$tmp/int$try"
    mkdir -p "$d"
    "$bin" $hyb --iters 1000000 --log-every 1000000 --snapshot-dir "$d" \
        "$tmp/late.cfg" >"$d/log" 2>&1 &
    pid=$!
    wait_for "$d/log" "training: "
    sleep "$delay"
    kill -s INT $pid
    wait $pid
    expect "hybrid $try, SIGINT after $delay s: exit 130" [ $? -eq 130 ]
    n=$(ls "$d" | sed -n 's/^late_\([0-9][0-9]*\)\.snap$/\1/p' | sort -n | tail -1)
    expect "hybrid $try, SIGINT after $delay s: a snapshot is written" [ -n "$n" ]
    [ -n "$n" ] || continue
    check "hybrid $try: resume from iteration $n" err 0 "" -- "$bin" -q $hyb --iters $((n + 100)) \
        --snapshot-dir "$d" --resume "$d/late_$n.snap" "$tmp/late.cfg"
    mkdir -p "$d/ref"
    check "hybrid $try: $((n + 100)) iterations uninterrupted" err 0 "" -- "$bin" -q $hyb \
        --iters $((n + 100)) --snapshot-dir "$d/ref" "$tmp/late.cfg"
    expect "hybrid $try, SIGINT at iteration $n and resumed: final snapshot byte-identical" \
        cmp -s "$d/late_final.snap" "$d/ref/late_final.snap"
done
check "--parallel hybrid with --sync asp is refused" err 2 "--parallel hybrid with --sync asp" -- \
    "$bin" $common -t 2 --parallel hybrid --sync asp "$tmp/convfc.cfg"

rm -rf "$tmp/one" "$tmp/two"
check "one node, -t 4 -b 26, data-parallel" err 0 "" -- "$bin" $common -q -t 4 -b 26 \
    --parallel data --snapshot-dir "$tmp/one" "$tmp/convfc.cfg"
check "mpirun -np 2, -t 2 -b 13 each, hybrid: the gradients are held once" out 0 \
    "the gradients of their 0.0M parameters are held once" -- mpirun -np 2 "$bin" $common \
    -t 2 -b 13 --parallel hybrid --snapshot-dir "$tmp/two" "$tmp/convfc.cfg"
check "two hybrid nodes: the weights of one data-parallel node to 1e-5" out 0 \
    "largest relative difference" -- "$snapdiff" "$tmp/convfc.cfg" \
    "$tmp/one/convfc_final.snap" "$tmp/two/convfc_final.snap" 1e-5
rm -rf "$tmp/two"
check "mpirun -np 2, hybrid, --rank-update partitioned" err 0 "" -- mpirun -np 2 "$bin" \
    $common -q -t 2 -b 13 --parallel hybrid --rank-update partitioned \
    --snapshot-dir "$tmp/two" "$tmp/convfc.cfg"
check "hybrid and partitioned: the weights of one data-parallel node to 1e-5" out 0 \
    "largest relative difference" -- "$snapdiff" "$tmp/convfc.cfg" \
    "$tmp/one/convfc_final.snap" "$tmp/two/convfc_final.snap" 1e-5
finish test_hybrid.sh
