#!/bin/sh
# singletrain eval NET WEIGHTS (src/cmd/eval.c): a network with batch norm
# and dropout (lenet-smooth.cfg with batch_normalize=1 and a [dropout])
# trained on Fashion-MNIST with a test phase at its end; eval of its final
# snapshot on the same test split prints the same accuracy and loss:
# - the CSV row's digits (accuracy to 6 places, loss to 6 significant
#   digits) of a -t 1 run's test phase, on dnnl (--conv-impl nhwc) and ref,
#   and on ref trained in bf16 (the snapshot's precision, eval's default;
#   --precision fp32 evaluates the same weights in fp32, other digits; a
#   backend without bf16 on this CPU, dnnl held to AVX2, refuses the
#   snapshot's precision naming it and takes --precision fp32; predict of
#   the same snapshot scores an image in bf16 too, unless --precision fp32);
# - the text line of a -t 2 run's, whose test phase splits the test set
#   over two workers (the loss summed in another order: the same to the
#   printed digits);
# - with the synthetic data of a run given none;
# - an ONNX model trained with --hparams: eval --hparams the same file;
# and its --help. Its bad inputs are catalogue cases (eval-*).
# usage: sh tests/e2e/test_eval.sh PATH_TO_SINGLETRAIN
set -u
. "$(dirname "$0")/../lib/check.sh"
suite_start "$@"
fmnist=/usr/share/datasets/fashion-mnist
[ -r "$fmnist/t10k-images-idx3-ubyte.gz" ] ||
    { echo "test_eval.sh: $fmnist is missing: expected Fashion-MNIST's IDX files there (scripts/deps.sh --test)" >&2; exit 1; }
cd "$tmp" || exit 2
awk '/^\[convolutional\]/ { print; print "batch_normalize=1"; next }
     /^\[connected\]/ && !d { print "[dropout]\nprobability=0.3\n"; d = 1 } { print }' \
    "$fixtures/lenet-smooth.cfg" >bn.cfg
printf 'train=%s\ntrain_labels=%s\ntest=%s\ntest_labels=%s\n' \
    "$fmnist/train-images-idx3-ubyte.gz" "$fmnist/train-labels-idx1-ubyte.gz" \
    "$fmnist/t10k-images-idx3-ubyte.gz" "$fmnist/t10k-labels-idx1-ubyte.gz" >fm.data
data="--data fm.data --test-images 1000"
train="--train-images 5000 --iters 20 --test-interval 20"

# csv RUN TRAINING_OPTIONS -- EVAL_OPTIONS: the test row's accuracy and
# loss of a -t 1 run against eval's
csv() {
    run=$1
    shift
    topts=
    while [ "$1" != "--" ]; do topts="$topts $1"; shift; done
    shift
    mkdir "$run"
    check "$run: train -t 1$topts" out 0 "test,20," -- \
        "$bin" $data $train -t 1 $topts --snapshot-dir "$run" --log-format csv bn.cfg
    want=$(sed -n 's/^test,20,[^,]*,[^,]*,,,,\([^,]*\),\([^,]*\),.*/\1,\2,1000/p' "$tmp/stdout")
    want=${want:-"no test row in the training's output"}
    check "$run: eval prints the test phase's $want" out 0 "$want" -- \
        "$bin" eval bn.cfg "$run/bn_final.snap" $data "$@" --log-format csv
}
csv dnnl --conv-impl nhwc -- --conv-impl nhwc
csv ref --backend ref -- --backend ref
csv bf16 --backend ref --precision bf16 -- --backend ref
check "bf16: eval --precision fp32 computes in fp32" out 0 "accuracy,loss,images" -- \
    "$bin" eval bn.cfg bf16/bn_final.snap $data --backend ref --precision fp32 --log-format csv
fp32=$(sed -n 2p "$tmp/stdout")
expect "bf16: fp32's figures ($fp32) are not bf16's ($want)" [ -n "$fp32" -a "$fp32" != "$want" ]
check "bf16: dnnl without bf16 (AVX2) refuses the snapshot's precision" err 2 \
    "bf16/bn_final.snap: trained in bf16" "give --precision fp32" -- \
    env ONEDNN_MAX_CPU_ISA=AVX2 "$bin" eval bn.cfg bf16/bn_final.snap $data
check "bf16: dnnl without bf16 (AVX2) takes --precision fp32" out 0 "test  accuracy" -- \
    env ONEDNN_MAX_CPU_ISA=AVX2 "$bin" eval bn.cfg bf16/bn_final.snap $data --precision fp32
{ printf 'P5\n28 28\n255\n'; gzip -dc "$fmnist/t10k-images-idx3-ubyte.gz" | head -c 800 | tail -c 784; } >img.pgm
for p in default bf16 fp32; do
    popt=; [ "$p" = default ] || popt="--precision $p"
    check "bf16: predict's scores ($p)" out 0 "img.pgm" -- \
        "$bin" predict bn.cfg bf16/bn_final.snap img.pgm --backend ref --scores $popt
    cp "$tmp/stdout" "scores.$p"
done
expect "bf16: predict scores in the snapshot's bf16 by default" cmp -s scores.default scores.bf16
expect "bf16: and in fp32 with --precision fp32, other scores" sh -c '! cmp -s scores.default scores.fp32'

mkdir two
check "two: train -t 2" out 0 "test  iter 20  accuracy" -- \
    "$bin" $data $train -t 2 --conv-impl nhwc --snapshot-dir two bn.cfg
want=$(sed -n 's/^test  iter 20  \(accuracy .*\)$/\1/p' "$tmp/stdout")
want=${want:-"no test line in the training's output"}
check "two: eval prints the test phase's line ($want)" out 0 "test  $want" -- \
    "$bin" eval bn.cfg two/bn_final.snap $data --conv-impl nhwc

mkdir synth
check "synth: train -t 1 on synthetic data" out 0 "test,3," -- \
    "$bin" --data synthetic --iters 3 -t 1 --conv-impl nhwc --snapshot-dir synth \
    --log-format csv bn.cfg
want=$(sed -n 's/^test,3,[^,]*,[^,]*,,,,\([^,]*\),\([^,]*\),.*/\1,\2,256/p' "$tmp/stdout")
want=${want:-"no test row in the training's output"}
check "synth: eval --data synthetic prints the test phase's $want" out 0 "$want" -- \
    "$bin" eval bn.cfg synth/bn_final.snap --data synthetic --conv-impl nhwc --log-format csv
# an ONNX model whose [net] comes from --hparams (no MODEL.train beside it):
# eval takes the same file, and finds no batch= without it
if /usr/bin/python3 -c 'import onnx' 2>/dev/null; then
    mkdir onnx models
    printf '[net]\nbatch=16\nlearning_rate=0.01\nmomentum=0.9\n' >recipe.train
    # the models' script writes Darknet twins from MODEL.train beside them:
    # it runs apart, and only lenet.onnx comes into onnx/
    cp recipe.train models/lenet.train
    check "onnx: tests/lib/onnx_models.py writes the models" err 0 "" -- \
        /usr/bin/python3 "$fixtures/../lib/onnx_models.py" models
    cp models/lenet.onnx onnx/
    check "onnx: train lenet.onnx -t 1 with --hparams" out 0 "test,20," -- \
        "$bin" $data $train -t 1 --conv-impl nhwc --hparams recipe.train --snapshot-dir onnx \
        --log-format csv onnx/lenet.onnx
    want=$(sed -n 's/^test,20,[^,]*,[^,]*,,,,\([^,]*\),\([^,]*\),.*/\1,\2,1000/p' "$tmp/stdout")
    want=${want:-"no test row in the training's output"}
    check "onnx: eval --hparams prints the test phase's $want" out 0 "$want" -- \
        "$bin" eval onnx/lenet.onnx onnx/lenet_final.snap $data --conv-impl nhwc \
        --hparams recipe.train --log-format csv
else
    echo "FAIL test_eval.sh: /usr/bin/python3 lacks the onnx module (python3-onnx): run scripts/deps.sh --test"
    exit 1
fi
check "eval --help" out 0 "usage: singletrain eval NET.cfg WEIGHTS [options]" "--log-format" -- \
    "$bin" eval --help
finish test_eval.sh
