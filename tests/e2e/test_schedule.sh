#!/bin/sh
# The learning-rate schedules against PyTorch's, step by step (issue 38):
# for each [net] recipe below, tools/lrsched (next to the binary) prints the
# rate singletrain trains with at every iteration (st_lr_at, from the
# [net] as st_hparams_parse reads it) and scripts/torch_recipe.py the rate
# torch.optim.lr_scheduler gives the optimizer at the same step (its
# translation of the recipe: StepLR, MultiStepLR, ExponentialLR,
# PolynomialLR, CosineAnnealingLR, OneCycleLR, and LinearLR + SequentialLR
# for warmup=), computed now by /usr/bin/python3's torch, not copied in.
# Every rate must be within 1e-6 relative of PyTorch's (singletrain's is a
# float: 6e-8). One recipe is an ONNX model's .train sidecar, read by the
# importer. test_torch.sh trains with a warm-up and a cosine against
# torch.optim.SGD and its scheduler.
# Without /usr/bin/python3's torch this fails: run scripts/deps.sh --test.
# usage: sh tests/e2e/test_schedule.sh PATH_TO_SINGLETRAIN
set -u
. "$(dirname "$0")/../lib/check.sh"
suite_start "$@"
py=/usr/bin/python3
if ! $py -c 'import torch, onnx' 2>/dev/null; then
    echo "FAIL test_schedule.sh: $py lacks torch or onnx (python3-torch, python3-onnx):" \
        "run scripts/deps.sh --test"
    exit 1
fi
lrsched=$(dirname "$bin")/tools/lrsched
if [ ! -x "$lrsched" ]; then
    echo "FAIL test_schedule.sh: $lrsched is missing: build it first" \
        "(make $(dirname "$bin")/tools/lrsched)"
    exit 1
fi
recipe=$(cd "$(dirname "$0")/../../scripts" && pwd)/torch_recipe.py
bad_models=$(cd "$(dirname "$0")/../lib" && pwd)/onnx_bad_models.py
cd "$tmp" || exit 2
ITERS=100

# same NAME FILE [LRSCHED_ARGS]: every rate of FILE's recipe as PyTorch's
same() {
    _name=$1 _net=$2
    shift 2
    check "$_name: singletrain's schedule" err 0 "" -- "$lrsched" "$@" "$ITERS"
    cp "$tmp/stdout" "$_name.st"
    check "$_name: PyTorch's schedule" err 0 "" -- $py -W ignore "$recipe" schedule "$_net" "$ITERS"
    cp "$tmp/stdout" "$_name.torch"
    expect "$_name: $ITERS rates within 1e-6 relative of PyTorch's" awk '
        NR == FNR { want[$1] = $2; next }
        { d = $2 - want[$1]; if (d < 0) d = -d; w = want[$1] < 0 ? -want[$1] : want[$1]
          if (!(d <= 1e-6 * w)) { printf "iteration %d: %s, PyTorch %s\n", $1, $2, want[$1]
                                  bad = 1 }
          n++ }
        END { if (n != '"$ITERS"') { print n " rates, expected '"$ITERS"'"; bad = 1 }
              exit bad }' "$_name.torch" "$_name.st"
}

# net NAME KEYS...: a one-layer net whose [net] has the keys (one an argument)
net() {
    _n=$1
    shift
    { printf '[net]\nheight=4\nwidth=4\nchannels=1\nlearning_rate=0.1\n'
      printf '%s\n' "$@"
      printf '[connected]\noutput=2\n'; } >"$_n.cfg"
}

net step policy=step step=7 scale=0.5
net steps policy=steps steps=10,30,60 scales=.1,.1,.1
# gamma exact in binary (31/32): the keys are floats, as Darknet reads them,
# and 0.97 is 0.97000003, whose 60th power is 1.8e-6 from PyTorch's 0.97^60
# (the input's rounding, not the schedule's)
net exp policy=exp gamma=0.96875
net poly policy=poly power=2
net cosine policy=cosine learning_rate_min=0.001
net cosine-past-T policy=cosine max_batches=40
net onecycle policy=onecycle
net onecycle-keys policy=onecycle pct_start=0.25 div_factor=10 final_div_factor=100
net warmup warmup=8
net warmup-cosine policy=cosine warmup=10 warmup_factor=0.01 learning_rate_min=0.001 \
    max_batches=100
net warmup-step policy=step warmup=5 warmup_factor=0.1 step=10 scale=0.1
net warmup-steps policy=steps warmup=5 steps=20,50 scales=.5,.5
net warmup-poly policy=poly warmup=20 power=1
for n in step steps exp poly cosine cosine-past-T onecycle onecycle-keys warmup \
    warmup-cosine warmup-step warmup-steps warmup-poly; do
    same "$n" "$n.cfg" "$n.cfg"
done

# the ONNX importer's sidecar, MODEL.train
check "an ONNX model" err 0 "" -- $py "$bad_models" good m.onnx
printf '[net]\nbatch=4\nlearning_rate=0.05\npolicy=cosine\nwarmup=10\nlearning_rate_min=0.005\n' \
    >m.train
same onnx-sidecar m.train m.onnx

finish test_schedule.sh
