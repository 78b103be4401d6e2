#!/bin/sh
# PyTorch as the oracle (issue 32): four networks defined in PyTorch
# (Debian's python3-torch, tests/lib/torch_models.py) -- LeNet-5, a small
# VGG-style net with batch norm (after convolutions and after a fully
# connected layer, the latter with PyTorch's initial values, which the
# exporter writes as Identity nodes of equal initializers), a ResNet-style
# net with shortcut adds, a net with channel concats -- exported with
# torch.onnx.export (opset 13) and imported here:
#   - forward, on the dnnl and the ref backend: predict --scores on the
#     model's own initializers (eval mode: batch norm with the running
#     statistics) gives PyTorch's softmax of the logits on the same 16 images
#     within 1e-4 relative (max |diff| / max |value|);
#   - one full-batch SGD step on each backend (lr 512, no momentum, no
#     decay, batch = the 16 images, so the data order does not matter): the
#     weights of the
#     snapshot, exported with export --onnx and read with the onnx package,
#     give (w0 - w1) / lr, each tensor within 1e-4 relative of PyTorch's
#     autograd gradients of the mean softmax cross-entropy (train mode:
#     batch statistics);
#   - 5 full-batch SGD steps with momentum 0.9 (dnnl): the logged losses follow
#     PyTorch's within 5e-4 relative, and predict with the final snapshot
#     gives PyTorch's eval-mode outputs after those steps within 1e-4, with
#     batch norm's running statistics averaged with the model's momentum,
#     read from the ONNX model (PyTorch's default 0.1; vgg's 0.3); that
#     snapshot, exported with export --onnx, has PyTorch's running means
#     and variances within 1e-4 and the models' momentum attributes;
#   - 5 full-batch steps of a PyTorch-style recipe (dnnl; decay.train below:
#     weight decay 0.05 on every tensor, decay_mode=torch, a 2-step linear
#     warm-up, then a cosine), against torch.optim.SGD and the scheduler
#     scripts/torch_recipe.py builds from the same file: the losses and the
#     eval-mode outputs after them, as above (a bias right before batch norm,
#     which singletrain folds into the running mean, is kept out of PyTorch's
#     decay: torch_models.py's folded_biases; test_schedule.sh checks the
#     schedules alone, step by step);
#   - 5 full-batch Adam steps (dnnl; adam.train below: eps_mode=torch, eps
#     1e-3 large enough that adding it before the bias correction, Caffe's
#     placement and the default, moves the losses past the tolerance; weight
#     decay 0.01 on every tensor) against torch.optim.Adam as
#     scripts/torch_recipe.py builds it: the losses and the eval-mode
#     outputs after them, as above;
#   - a net of bias-free nn.Linear layers, which the exporter (no constant
#     folding) writes as MatMul of Transpose(W): predict on both backends
#     gives PyTorch's eval outputs within 1e-4 (forward only);
#   - LeNet-5 is data/lenet.cfg layer for layer: the cfg with the ONNX
#     model's trained snapshot gives the same class scores to the last
#     printed digit. (test_onnx.sh checks, on models written with
#     onnx.helper, that an ONNX model and its cfg twin train to the same
#     weights bit for bit: not repeated here.)
# The references are PyTorch's in float64 on the same fp32 weights and
# inputs; the tolerances' derivation is in torch_models.py. The compare step
# prints each measured difference.
# Without /usr/bin/python3's torch or onnx module this fails: run
# scripts/deps.sh --test.
# usage: sh tests/e2e/test_torch.sh PATH_TO_SINGLETRAIN
set -u
. "$(dirname "$0")/../lib/check.sh"
suite_start "$@"
py=/usr/bin/python3
if ! $py -c 'import torch, onnx' 2>/dev/null; then
    echo "FAIL test_torch.sh: $py lacks torch or onnx (python3-torch," \
        "python3-onnx): run scripts/deps.sh --test"
    exit 1
fi
models=$(cd "$(dirname "$0")/../lib" && pwd)/torch_models.py
lenet_cfg=$(cd "$(dirname "$0")/../../data" && pwd)/lenet.cfg
cd "$tmp" || exit 2
# the decay recipe: decay large enough (0.05) that decaying the biases and
# batch norm's scales and shifts or not (decay_mode=darknet) moves the
# losses and outputs well past the tolerances
{ printf '[net]\nbatch=16\nsolver=sgd\nlearning_rate=0.05\nmomentum=0.9\ndecay=0.05\n'
  printf 'decay_mode=torch\npolicy=cosine\nwarmup=2\nwarmup_factor=0.5\nlearning_rate_min=0.005\n'
} >decay.train
{ printf '[net]\nbatch=16\nsolver=adam\nlearning_rate=0.01\nB1=0.9\nB2=0.999\neps=0.001\n'
  printf 'eps_mode=torch\ndecay=0.01\ndecay_mode=torch\npolicy=constant\n'
} >adam.train
check "PyTorch builds and exports the four models" err 0 "" -- $py "$models" build .
# the runs: one worker thread, ref or dnnl as said; batch = the 16 images
printf '[net]\nbatch=16\nsolver=sgd\nlearning_rate=512\nmomentum=0\ndecay=0\npolicy=constant\n' \
    >step.train
printf '[net]\nbatch=16\nsolver=sgd\nlearning_rate=0.05\nmomentum=0.9\ndecay=0\npolicy=constant\n' \
    >momentum.train
for m in lenet vgg resnet concat; do
    for be in dnnl ref; do
        check "$m: predict --scores on its own initializers ($be)" out 0 "$m/15." -- \
            "$bin" predict --backend $be --scores "$m.onnx" "$m.onnx" "$m"/*.p?m
        cp "$tmp/stdout" "$m.$be.scores"
        check "$m: one SGD step ($be)" err 0 "" -- "$bin" --backend $be --hparams step.train \
            --data "$m.data" --iters 1 --no-test -t 1 --snapshot-dir "step-$m-$be" "$m.onnx"
        check "$m: its snapshot exported as ONNX" err 0 "" -- "$bin" export -q --onnx \
            "$m.onnx" "step-$m-$be/${m}_final.snap" "$m-step.$be.onnx"
    done
    check "$m: 5 SGD steps with momentum (dnnl)" err 0 "" -- "$bin" --backend dnnl \
        --hparams momentum.train --data "$m.data" --iters 5 --no-test -t 1 --log-every 1 \
        --log-format csv --snapshot-dir "mom-$m" "$m.onnx"
    cp "$tmp/stdout" "$m.csv"
    check "$m: predict --scores with the trained snapshot" out 0 "$m/15." -- \
        "$bin" predict --scores "$m.onnx" "mom-$m/${m}_final.snap" "$m"/*.p?m
    cp "$tmp/stdout" "$m.trained.scores"
    check "$m: the trained snapshot exported as ONNX" err 0 "" -- "$bin" export -q --onnx \
        "$m.onnx" "mom-$m/${m}_final.snap" "$m-trained.onnx"
    check "$m: 5 SGD steps of the decay recipe (dnnl)" err 0 "" -- "$bin" --backend dnnl \
        --hparams decay.train --data "$m.data" --iters 5 --no-test -t 1 --log-every 1 \
        --log-format csv --snapshot-dir "decay-$m" "$m.onnx"
    cp "$tmp/stdout" "$m.decay.csv"
    check "$m: predict --scores after the decay recipe" out 0 "$m/15." -- \
        "$bin" predict --scores "$m.onnx" "decay-$m/${m}_final.snap" "$m"/*.p?m
    cp "$tmp/stdout" "$m.decay.trained.scores"
    check "$m: 5 Adam steps, eps_mode=torch (dnnl)" err 0 "" -- "$bin" --backend dnnl \
        --hparams adam.train --data "$m.data" --iters 5 --no-test -t 1 --log-every 1 \
        --log-format csv --snapshot-dir "adam-$m" "$m.onnx"
    cp "$tmp/stdout" "$m.adam.csv"
    check "$m: predict --scores after the Adam steps" out 0 "$m/15." -- \
        "$bin" predict --scores "$m.onnx" "adam-$m/${m}_final.snap" "$m"/*.p?m
    cp "$tmp/stdout" "$m.adam.trained.scores"
done
# a bias-free nn.Linear without constant folding: MatMul of Transpose(W),
# the Transpose of an initializer computed at load (issue 36)
check "linear: PyTorch writes its bias-free Linear layers as MatMul of Transpose" out 0 \
    "Flatten Transpose MatMul Relu Transpose MatMul" -- $py -c "import onnx
print(' '.join(n.op_type for n in onnx.load('linear.onnx').graph.node))"
for be in dnnl ref; do
    check "linear: predict --scores on its own initializers ($be)" out 0 "linear/15." -- \
        "$bin" predict --backend $be --scores linear.onnx linear.onnx linear/*.ppm
    cp "$tmp/stdout" "linear.$be.scores"
done
$py "$models" compare . >compare.out 2>&1
sed 's/^/     /' compare.out
for m in lenet vgg resnet concat; do
    for what in "forward dnnl" "gradients dnnl" "forward ref" "gradients ref" \
        "losses of 5 SGD steps with momentum" "after 5 steps (" \
        "losses of 5 SGD steps with the decay recipe" "after 5 steps of the decay recipe" \
        "losses of 5 Adam steps (eps_mode=torch)" "after 5 Adam steps"; do
        expect "$m: $what as PyTorch's" grep -q "^ok $m $what" compare.out
    done
done
for m in vgg resnet; do
    expect "$m: running statistics after 5 steps as PyTorch's" \
        grep -q "^ok $m running statistics after 5 steps" compare.out
done
for be in dnnl ref; do
    expect "linear: forward $be as PyTorch's" grep -q "^ok linear forward $be" compare.out
done
expect "44 comparisons, none failed" [ "$(grep -c '^ok ' compare.out)" -eq 44 ]

"$bin" predict --scores lenet.onnx mom-lenet/lenet_final.snap lenet/*.pgm >onnx-trained.scores
check "data/lenet.cfg takes the ONNX LeNet-5's trained snapshot" out 0 "lenet/15.pgm" -- \
    "$bin" predict --scores "$lenet_cfg" mom-lenet/lenet_final.snap lenet/*.pgm
expect "... and gives its class scores to the last digit" cmp -s "$tmp/stdout" onnx-trained.scores

finish test_torch.sh
