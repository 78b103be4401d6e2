#!/bin/sh
# ONNX import (net/onnx.h) against independent truth: models written by
# onnx.helper (Debian's python3-onnx, tests/lib/onnx_models.py):
#   - a LeNet-like ONNX model (Conv + BatchNormalization + Relu, MaxPool,
#     Conv, MaxPool + LeakyRelu (folded into the Conv: the same maxima),
#     Flatten, Gemm, MatMul + Add, no softmax) and its
#     twin written by hand as a cfg with the same weights as a Darknet
#     .weights file train alike: the same training losses, test loss and
#     accuracy (the inference forward) and bit-identical final weights
#     (tools/snapdiff at tolerance 0), `predict` gives both the same class
#     scores to the last printed digit, and each one's snapshot loads into the
#     other; --resume of an ONNX model's run gives the weights of a run
#     without a stop; the ONNX model as WEIGHTS of the cfg (predict,
#     --weights, export) is the twin's .weights;
#   - a model with every other supported op trains, with the layers the
#     translation table says (Concat -> route, Add -> shortcut, ...), as its
#     cfg twin does: the same losses and bit-identical weights;
#   - Transposes of initializers (any permutation; PyTorch's bias-free
#     Linear) give the scores of the same weights transposed by numpy;
#   - the sidecar MODEL.train and --hparams give the [net] section;
#   - export --onnx: onnx.checker passes the files; re-imported, a model
#     trains to the same losses and the same weights bit for bit as the
#     network it was written from, and an ONNX-born model exports to the
#     same bytes as its cfg twin; a network of as many nodes as the reader
#     takes, 10000, exports and reads back;
#   - an unsupported op, a missing initializer, a shape mismatch, an
#     unsupported attribute, a weight with a size of 0, a window larger
#     than its input, a duplicate output name, a truncated file, random
#     bytes: exit 2 with a message naming the node and op (its name's
#     terminal escapes escaped), or the file.
# Without /usr/bin/python3's onnx module this prints a SKIP notice and exits 0.
# usage: sh tests/e2e/test_onnx.sh PATH_TO_SINGLETRAIN
set -u
. "$(dirname "$0")/../lib/check.sh"
suite_start "$@"
py=/usr/bin/python3
if ! $py -c 'import onnx' 2>/dev/null; then
    echo "SKIP: python3-onnx not installed (scripts/deps.sh --test)"
    exit 0
fi
models=$(cd "$(dirname "$0")/../lib" && pwd)/onnx_models.py
snapdiff=$(dirname "$bin")/tools/snapdiff
make_images=$(dirname "$bin")/tools/make_images
for tool in "$snapdiff" "$make_images"; do
    if [ ! -x "$tool" ]; then
        echo "test_onnx.sh: $tool is missing: build it first (make $tool)" >&2
        exit 2
    fi
done
cd "$tmp" || exit 2
cat >lenet.train <<'EOF'
[net]
batch=8
learning_rate=0.01
momentum=0.9
decay=0.0005
policy=constant
EOF
$py "$models" . || { echo "test_onnx.sh: $models failed" >&2; exit 2; }

# ---------------------------------------------------------------- the twins

run="--data synthetic --train-images 64 --test-images 32 --iters 8 -t 1 --backend ref
     --log-every 1 --log-format csv --seed 3"
# shellcheck disable=SC2086
check "lenet.onnx trains" err 0 "" -- "$bin" $run --snapshot-dir onnx lenet.onnx
cp "$tmp/stdout" onnx.csv
# shellcheck disable=SC2086
check "its cfg twin trains" err 0 "" -- "$bin" $run --snapshot-dir cfg --weights lenet.weights \
    lenet.cfg
cp "$tmp/stdout" cfg.csv
cut -d, -f1,2,5,8,9 onnx.csv >onnx.loss
cut -d, -f1,2,5,8,9 cfg.csv >cfg.loss
expect "the same losses, test loss and accuracy" cmp -s onnx.loss cfg.loss
expect "8 training losses and a test phase" [ "$(grep -c '^train,' onnx.loss)" -eq 8 \
    -a "$(grep -c '^test,' onnx.loss)" -eq 1 ]
check "the same final weights, bit for bit" out 0 "largest relative difference 0 " -- \
    "$snapdiff" lenet.onnx onnx/lenet_final.snap cfg/lenet_final.snap 0
check "the ONNX run's snapshot is the cfg's weights" out 0 "largest relative difference 0 " -- \
    "$snapdiff" lenet.cfg onnx/lenet_final.snap cfg/lenet_final.snap 0
"$make_images" /usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz \
    /usr/share/datasets/fashion-mnist/t10k-labels-idx1-ubyte.gz pics 4 28 >/dev/null
check "predict reads the ONNX model (dnnl backend)" out 0 "pics/" -- "$bin" predict --scores \
    lenet.onnx onnx/lenet_final.snap pics/*/*.png
cp "$tmp/stdout" onnx.scores
"$bin" predict --scores lenet.cfg cfg/lenet_final.snap pics/*/*.png >cfg.scores
expect "4 images scored" [ "$(wc -l <onnx.scores)" -eq 4 ]
expect "the cfg twin's class scores, to the last digit" cmp -s onnx.scores cfg.scores
# an ONNX model as WEIGHTS of its cfg twin, wherever weights are taken
"$bin" predict --scores lenet.onnx lenet.onnx pics/*/*.png >own.scores
check "predict: the twin cfg with the ONNX model's initializers" out 0 "pics/" -- \
    "$bin" predict --scores lenet.cfg lenet.onnx pics/*/*.png
expect "... scores as the model itself, to the last digit" cmp -s "$tmp/stdout" own.scores
# shellcheck disable=SC2086
check "--weights MODEL.onnx starts the twin cfg from its initializers" err 0 "" -- \
    "$bin" $run --snapshot-dir wonnx --weights lenet.onnx lenet.cfg
check "... to the weights of the run from lenet.weights, bit for bit" out 0 \
    "largest relative difference 0 " -- "$snapdiff" lenet.cfg wonnx/lenet_final.snap \
    cfg/lenet_final.snap 0
check "export reads an ONNX model's initializers as WEIGHTS" out 0 "from lenet.onnx" -- \
    "$bin" export lenet.cfg lenet.onnx from-onnx.weights
expect "... the twin's .weights, byte for byte" cmp -s from-onnx.weights lenet.weights
check "the layers: conv, max, conv, max, connected x2, softmax added" out 0 \
    "6 softmax" -- "$bin" --dry-run lenet.onnx
expect "one layer per supported node, activations and batch norm folded" \
    [ "$(grep -c '^ *[0-9]* \(conv\|max\|connected\|softmax\)' "$tmp/stdout")" -eq 7 ]

# ---------------------------------------------------------------- export --onnx

check "export --onnx writes the cfg twin's trained network" out 0 "as an ONNX model (opset 13)" \
    -- "$bin" export --onnx lenet.cfg cfg/lenet_final.snap out.onnx
check "onnx.checker (full) passes it, batch norm in inference form" out 0 \
    "Conv BatchNormalization Relu MaxPool Conv LeakyRelu MaxPool Flatten Gemm Relu Gemm Softmax" \
    -- $py -c "import onnx; m = onnx.load('out.onnx'); onnx.checker.check_model(m, full_check=True)
print(m.opset_import[0].version, ' '.join(n.op_type for n in m.graph.node))"
expect "opset 13" grep -q '^13 ' "$tmp/stdout"
cp lenet.train out.train
short="--data synthetic --train-images 64 --no-test -t 1 --backend ref --seed 2"
again="--data synthetic --train-images 64 --test-images 32 --iters 8 -t 1 --backend ref
       --log-every 1 --log-format csv --seed 5"
# shellcheck disable=SC2086
check "the cfg goes on from the snapshot" err 0 "" -- "$bin" $again --snapshot-dir r1 \
    --weights cfg/lenet_final.snap lenet.cfg
cut -d, -f1,2,5,8,9 "$tmp/stdout" >r1.loss
# shellcheck disable=SC2086
check "the exported model, re-imported, trains" err 0 "" -- "$bin" $again --snapshot-dir r2 out.onnx
cut -d, -f1,2,5,8,9 "$tmp/stdout" >r2.loss
expect "re-imported: the same losses, test loss and accuracy" cmp -s r1.loss r2.loss
"$bin" predict --scores out.onnx cfg/lenet_final.snap pics/*/*.png >out.scores
expect "re-imported: the class scores of the network it was written from" \
    cmp -s out.scores cfg.scores
check "re-imported: the same weights, bit for bit" out 0 "largest relative difference 0 " -- \
    "$snapdiff" out.onnx r1/lenet_final.snap r2/out_final.snap 0
"$bin" export -q --onnx out.onnx r2/out_final.snap again.onnx
"$bin" export -q --onnx lenet.cfg r2/out_final.snap twin.onnx
expect "an ONNX-born model exports to the same bytes as its cfg twin" cmp -s again.onnx twin.onnx
# shellcheck disable=SC2086
"$bin" $again -b 4 --snapshot-dir m1 mixed.onnx >/dev/null 2>&1
check "every other op exports and passes onnx.checker" out 0 "Concat BatchNormalization LRN" -- \
    sh -c "'$bin' export -q --onnx mixed.onnx m1/mixed_final.snap mx.onnx && $py -c \"import onnx
m = onnx.load('mx.onnx'); onnx.checker.check_model(m, full_check=True)
print(' '.join(n.op_type for n in m.graph.node))\""
# shellcheck disable=SC2086
"$bin" $again -b 4 --snapshot-dir m2 --weights m1/mixed_final.snap mixed.onnx >m2.csv 2>/dev/null
# shellcheck disable=SC2086
"$bin" $again -b 4 --snapshot-dir m3 mx.onnx >m3.csv 2>/dev/null
cut -d, -f1,2,5,8,9 m2.csv >m2.loss
cut -d, -f1,2,5,8,9 m3.csv >m3.loss
expect "re-imported, it trains alike" cmp -s m2.loss m3.loss
check "... to the same weights" out 0 "largest relative difference 0 " -- \
    "$snapdiff" mx.onnx m2/mixed_final.snap m3/mx_final.snap 0
# a 1 x 1 conv output ([N, C, 1, 1]) added to and joined with an inner
# product's ([N, C]): Add and Concat get one rank
printf '[net]\nheight=4\nwidth=4\nchannels=3\nbatch=4\n[convolutional]\nfilters=4\nsize=4\nactivation=relu\n[connected]\noutput=4\nactivation=linear\n[shortcut]\nfrom=0\n[route]\nlayers=0,2\n[connected]\noutput=3\nactivation=linear\n[softmax]\n' >rank.cfg
printf '[net]\nbatch=4\n' >rank.train
# shellcheck disable=SC2086
"$bin" $short --iters 2 --snapshot-dir k0 rank.cfg >/dev/null 2>&1
check "outputs of two ranks export and pass onnx.checker" out 0 "Flatten Add Flatten Concat" -- \
    sh -c "'$bin' export -q --onnx rank.cfg k0/rank_final.snap rank.onnx && $py -c \"import onnx
m = onnx.load('rank.onnx'); onnx.checker.check_model(m, full_check=True)
print(' '.join(n.op_type for n in m.graph.node))\""
# shellcheck disable=SC2086
"$bin" $again --snapshot-dir k1 --weights k0/rank_final.snap rank.cfg >k1.csv 2>/dev/null
# shellcheck disable=SC2086
"$bin" $again --snapshot-dir k2 rank.onnx >k2.csv 2>/dev/null
cut -d, -f1,2,5,8,9 k1.csv >k1.loss
cut -d, -f1,2,5,8,9 k2.csv >k2.loss
expect "re-imported, it trains alike" cmp -s k1.loss k2.loss
check "... to the same weights" out 0 "largest relative difference 0 " -- \
    "$snapdiff" rank.cfg k1/rank_final.snap k2/rank_final.snap 0
printf '[net]\nheight=8\nwidth=8\nchannels=3\n[crop]\ncrop_height=4\ncrop_width=4\n[connected]\noutput=2\n[softmax]\n' >crop.cfg
"$bin" --data synthetic --train-images 8 --iters 1 -b 4 -t 1 --no-test --snapshot-dir c \
    crop.cfg >/dev/null 2>&1
check "a layer ONNX has no op for" err 2 "crop.cfg:5: [crop] (layer 0) cannot be written as ONNX" -- \
    "$bin" export --onnx crop.cfg c/crop_final.snap crop.onnx
expect "... leaves no file" [ ! -e crop.onnx ]
# the reader's limit on a model's nodes (ST_ONNX_MAX_NODES, 10000) is the
# writer's: 9996 dropouts, Flatten, Gemm and Softmax make 10000 nodes
# (the catalogue has one more refused)
{ printf '[net]\nheight=1\nwidth=1\nchannels=1\n'; n=0; while [ $n -lt 9996 ]; do
    printf '[dropout]\n'; n=$((n + 1)); done; printf '[connected]\noutput=2\n[softmax]\n'; } >edge.cfg
head -c 32 /dev/zero >zero.weights
check "a network of 10000 nodes, the limit, exports" out 0 "wrote edge.onnx" -- \
    "$bin" export --onnx edge.cfg zero.weights edge.onnx
check "... and reads back" out 0 "9997 softmax" -- "$bin" --dry-run edge.onnx

# ---------------------------------------------------------------- resume

# shellcheck disable=SC2086
"$bin" $short --iters 4 --snapshot-dir half lenet.onnx >/dev/null 2>&1
# shellcheck disable=SC2086
check "--resume continues an ONNX model's run" err 0 "" -- "$bin" $short --iters 8 \
    --snapshot-dir half --resume half/lenet_final.snap lenet.onnx
# shellcheck disable=SC2086
"$bin" $short --iters 8 --snapshot-dir whole lenet.onnx >/dev/null 2>&1
check "... to the weights of a run without a stop" out 0 "largest relative difference 0 " -- \
    "$snapdiff" lenet.onnx half/lenet_final.snap whole/lenet_final.snap 0

# ---------------------------------------------------------------- every op

# shellcheck disable=SC2086
check "a model with every other op trains" err 0 "route  0 1" "res    0" -- "$bin" $run \
    -b 4 --snapshot-dir monnx mixed.onnx
cut -d, -f1,2,5,8,9 "$tmp/stdout" >monnx.loss
tr '\n' ' ' <"$tmp/stderr" >mixed.layers
expect "BatchNormalization, LRN, Dropout, AveragePool as their layers, in order" \
    grep -q 'batchnorm.*lrn.*res.*dropout.*avg.*connected.*softmax' mixed.layers
# shellcheck disable=SC2086
check "its cfg twin trains" err 0 "" -- "$bin" $run -b 4 --snapshot-dir mcfg \
    --weights mixed.weights mixed.cfg
cut -d, -f1,2,5,8,9 "$tmp/stdout" >mcfg.loss
expect "the same losses, test loss and accuracy as the twin" cmp -s monnx.loss mcfg.loss
check "the same final weights as the twin, bit for bit" out 0 "largest relative difference 0 " \
    -- "$snapdiff" mixed.cfg monnx/mixed_final.snap mcfg/mixed_final.snap 0
check "GlobalAveragePool + Flatten" out 0 "avg " -- "$bin" --dry-run global.onnx
"$bin" predict --backend ref --scores transpose_twin.onnx transpose_twin.onnx pics/*/*.png \
    >transpose_twin.scores
check "Transposes of initializers (Conv, MatMul, Gemm) import" out 0 "pics/" -- \
    "$bin" predict --backend ref --scores transpose.onnx transpose.onnx pics/*/*.png
expect "... with the scores of the weights numpy transposed, to the last digit" \
    cmp -s "$tmp/stdout" transpose_twin.scores
expect "... of the 4 images" [ "$(wc -l <transpose_twin.scores)" -eq 4 ]
check "a Transpose of a layer's output or the input" err 2 \
    "transpose_layer.onnx: node 1 'tr' (Transpose): transposes 'x', a layer's output" -- \
    "$bin" --dry-run transpose_layer.onnx

# ---------------------------------------------------------------- [net]

printf '[net]\nbatch=4\n' >other.train
check "--hparams FILE gives [net]" out 0 "of batch 4" -- "$bin" --hparams other.train \
    --data synthetic --train-images 16 --iters 1 --no-test -t 1 lenet.onnx
check "no sidecar: the defaults, said" out 0 "no global.train: the [net] defaults" -- \
    "$bin" --dry-run global.onnx
printf '[net]\nbatch=4\nheight=28\n' >shape.train
check "the input shape is the graph's" err 2 "shape.train:3: [net] height=: the input shape is" \
    -- "$bin" --dry-run --hparams shape.train lenet.onnx
printf '[net]\nmomentun=0.9\n' >typo.train
check "a sidecar's typo names the sidecar" err 2 "typo.train:2: unknown key 'momentun'" -- \
    "$bin" --dry-run --hparams typo.train lenet.onnx
check "a missing --hparams file" err 2 "none.train: cannot open training settings file" -- \
    "$bin" --dry-run --hparams none.train lenet.onnx
printf '[net]\nbatch=4\n[convolutional]\n' >layers.train
check "a settings file with a layer" err 2 \
    "layers.train: expected one [net] section (the training settings of lenet.onnx)" -- \
    "$bin" --dry-run --hparams layers.train lenet.onnx
check "--hparams is for ONNX models" err 2 "--hparams other.train: only an ONNX model" -- \
    "$bin" --dry-run --hparams other.train lenet.cfg

# ---------------------------------------------------------------- bad models

check "unsupported op: the node and op named" err 2 \
    "unsupported.onnx: node 2 'erf1' (Erf): unsupported op (supported: Conv, Gemm" -- \
    "$bin" --dry-run unsupported.onnx
check "missing initializer" err 2 "no_init.onnx: node 1 (Conv): input 2 'nope' is no initializer" \
    -- "$bin" --dry-run no_init.onnx
check "shape mismatch" err 2 "bad_shape.onnx: node 2 (Gemm): 'w' has 470 values, but the layer needs 480" \
    -- "$bin" --dry-run bad_shape.onnx
check "a constant added along the width, not per channel" err 2 \
    "bad_bias.onnx: node 2 (Add): adds 'b' of 1 dims: a bias is one value per channel" -- \
    "$bin" --dry-run bad_bias.onnx
check "a softmax over the width" err 2 \
    "bad_softmax.onnx: node 3 (Softmax): axis=-1 of a 4-D tensor" -- "$bin" --dry-run bad_softmax.onnx
check "unsupported attribute" err 2 "bad_attr.onnx: node 1 (MaxPool): attribute ceil_mode=1" -- \
    "$bin" --dry-run bad_attr.onnx
check "output not the last layer's" err 2 "not_last.onnx: the graph's output 'y' is not the last" \
    -- "$bin" --dry-run not_last.onnx
# issue 36: what was wrong, at the node, its name safe to print
check "a weight with a size of 0: its dims" err 2 \
    "empty_conv.onnx: node 1 'conv' (Conv): weight 'w' has dims [0, 1, 3, 3]: a size of 0" -- \
    "$bin" --dry-run empty_conv.onnx
check "a window larger than its input: the MaxPool, not the Gemm after it, as a node" err 2 \
    "big_pool.onnx: node 1 'pool' (MaxPool): [maxpool] (layer 0, input 8 x 8 x 1): window 9x9" \
    -- "$bin" --dry-run big_pool.onnx
check "a duplicate output name, both nodes named" err 2 \
    "dup_output.onnx: node 2 'relu' (Relu): duplicate output name 'c': node 1 'conv' (Conv)" \
    -- "$bin" --dry-run dup_output.onnx
check "terminal escapes in a node's name are printed escaped" err 2 \
    "escape.onnx: node 2 'e\x1b[31mred\x1b[0m' (Erf): unsupported op" -- \
    "$bin" --dry-run escape.onnx
expect "... and no escape byte reaches the terminal" \
    [ "$(tr -d '\033' <"$tmp/stderr" | wc -c)" -eq "$(wc -c <"$tmp/stderr")" ]
head -c 300 lenet.onnx >truncated.onnx
check "truncated file" err 2 "truncated.onnx: not an ONNX model" -- "$bin" --dry-run truncated.onnx
printf '\377\377\377\377\377\377' >bytes.onnx
check "not protobuf" err 2 "bytes.onnx: not an ONNX model" -- "$bin" --dry-run bytes.onnx
: >empty.onnx
check "empty file" err 2 "empty.onnx: the model has no graph or no nodes" -- \
    "$bin" --dry-run empty.onnx

finish test_onnx.sh
