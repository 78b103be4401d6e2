#!/bin/sh
# The command line: usage errors, bad and missing files, data files that do
# not fit, run-time failures and a few successful runs. Every check runs the
# binary, then compares the exit code and a substring of stderr (or stdout).
# usage: sh tests/e2e/test_cli.sh PATH_TO_SINGLETRAIN
set -u
. "$(dirname "$0")/../lib/check.sh"
suite_start "$@"
fmnist=/usr/share/datasets/fashion-mnist

# ---------------------------------------------------------------- fixtures

# A tiny network for synthetic runs: 8x8x1 input, 3 classes.
cp "$fixtures/tiny.cfg" "$tmp/tiny.cfg"

# A 28x28x1, 10-class network for the IDX data checks.
cp "$fixtures/mnist-linear.cfg" "$tmp/mnist.cfg"

# An error on line 7: an unknown key.
cat >"$tmp/bad.cfg" <<'EOF'
[net]
height=8
width=8
channels=1
[convolutional]
filters=2
fliters=4
EOF

# No loss layer at the end.
cat >"$tmp/noloss.cfg" <<'EOF'
[net]
height=8
width=8
channels=1
[connected]
output=3
EOF

# IDX files built byte by byte. Image files: magic 0x00000803, count, rows,
# columns (big-endian), then the pixels; label files: magic 0x00000801,
# count, then one byte per label.
idx_images() { # FILE COUNT_BYTE SIDE_BYTE PIXEL_BYTES [MAGIC3]
    printf "\\000\\000\\010\\${5:-003}\\000\\000\\000\\$2\\000\\000\\000\\$3\\000\\000\\000\\$3" >"$1"
    head -c "$4" /dev/zero >>"$1"
}
idx_images "$tmp/two28.idx" 002 034 1568          # 2 images of 28x28
idx_images "$tmp/two8.idx" 002 010 128            # 2 images of 8x8
idx_images "$tmp/badmagic.idx" 002 034 1568 004   # magic 0x00000804
printf '\000\000\010\001\000\000\000\002\003\001' >"$tmp/two.labels"     # labels 3, 1
printf '\000\000\010\001\000\000\000\002\003\013' >"$tmp/eleven.labels"  # labels 3, 11
printf '\000\000\010\003\000\000\000\002\003\001' >"$tmp/magic.labels"   # magic 0x00000803

# The real Fashion-MNIST test set, uncompressed, and a truncated copy.
gunzip -c "$fmnist/t10k-labels-idx1-ubyte.gz" >"$tmp/t10k-labels" || exit 2
gunzip -c "$fmnist/t10k-images-idx3-ubyte.gz" 2>/dev/null | head -c 100016 >"$tmp/t10k-images-truncated"
[ "$(wc -c <"$tmp/t10k-images-truncated")" -eq 100016 ] || { echo "could not make the truncated IDX file" >&2; exit 2; }

head -c 100000 "$fmnist/t10k-images-idx3-ubyte.gz" >"$tmp/t10k-images-truncated.gz"
head -c 5008 "$tmp/t10k-labels" >"$tmp/t10k-labels-truncated"

data_file() { # NAME IMAGES LABELS
    printf 'train=%s\ntrain_labels=%s\n' "$2" "$3" >"$tmp/$1.data"
}
data_file truncated "$tmp/t10k-images-truncated" "$tmp/t10k-labels"
data_file truncatedgz "$tmp/t10k-images-truncated.gz" "$fmnist/t10k-labels-idx1-ubyte.gz"
data_file truncatedlabels "$fmnist/t10k-images-idx3-ubyte.gz" "$tmp/t10k-labels-truncated"
data_file mismatch "$tmp/two28.idx" "$tmp/t10k-labels"
data_file badmagic "$tmp/badmagic.idx" "$tmp/two.labels"
data_file magiclabels "$tmp/two28.idx" "$tmp/magic.labels"
data_file eleven "$tmp/two28.idx" "$tmp/eleven.labels"
data_file shape "$tmp/two8.idx" "$tmp/two.labels"
data_file good "$fmnist/t10k-images-idx3-ubyte.gz" "$fmnist/t10k-labels-idx1-ubyte.gz"
printf 'train=%s\ntrain_labels=%s\ntest=%s\ntest_labels=%s\n' "$tmp/two28.idx" "$tmp/two.labels" \
    "$tmp/two28.idx" "$tmp/two.labels" >"$tmp/small.data"
printf 'train=%s\nvalidation=%s\n' "$tmp/two28.idx" "$tmp/two.labels" >"$tmp/unknown.data"
printf 'train=%s\n' "$tmp/two28.idx" >"$tmp/nolabels.data"
printf 'train=%s\ntrain_labels=%s\ntest=%s\n' "$tmp/two28.idx" "$tmp/two.labels" "$tmp/two28.idx" \
    >"$tmp/notestlabels.data"

# ------------------------------------------------------------ usage errors

check "no arguments" err 2 "expected one network cfg file, got 0 arguments" -- "$bin"
check "two cfg files" err 2 "expected one network cfg file, got 2 arguments" -- \
    "$bin" "$tmp/tiny.cfg" "$tmp/tiny.cfg"
check "unknown long option" err 2 "unknown option '--frobnicate'" -- "$bin" --frobnicate "$tmp/tiny.cfg"
check "unknown short option" err 2 "unknown option '-x'" -- "$bin" -x "$tmp/tiny.cfg"
check "option missing its value (--iters)" err 2 "option --iters needs a value" -- "$bin" "$tmp/tiny.cfg" --iters
check "option missing its value (-b)" err 2 "option -b/--batch needs a value" -- "$bin" "$tmp/tiny.cfg" -b
check "flag given a value" err 2 "option --quiet takes no value" -- "$bin" --quiet=1 "$tmp/tiny.cfg"
check "-b abc" err 2 "option -b/--batch: expected an integer from 1 to 1048576, got 'abc'" -- \
    "$bin" -b abc "$tmp/tiny.cfg"
check "-b 0" err 2 "option -b/--batch: expected an integer from 1 to 1048576, got '0'" -- \
    "$bin" -b 0 "$tmp/tiny.cfg"
check "--batch=12x" err 2 "option -b/--batch: expected an integer" "got '12x'" -- \
    "$bin" --batch=12x "$tmp/tiny.cfg"
check "--iters -5" err 2 "option --iters: expected an integer from 1 to" "got '-5'" -- \
    "$bin" --iters -5 "$tmp/tiny.cfg"
check "--iters=0" err 2 "option --iters: expected an integer from 1 to" "got '0'" -- \
    "$bin" --iters=0 "$tmp/tiny.cfg"
check "--epochs x" err 2 "option --epochs: expected an integer" "got 'x'" -- "$bin" --epochs x "$tmp/tiny.cfg"
check "-t 0" err 2 "option -t/--threads: expected an integer from 1 to 4096 or auto, got '0'" -- \
    "$bin" -t 0 "$tmp/tiny.cfg"
check "--seed -1" err 2 "option --seed: expected a non-negative integer, got '-1'" -- \
    "$bin" --seed -1 "$tmp/tiny.cfg"
check "--backend foo" err 2 "--backend foo: unknown backend" "expected ref, dnnl or cpe" -- \
    "$bin" --backend foo --data synthetic --iters 1 "$tmp/tiny.cfg"
check "--backend dnnl" out 0 "backend dnnl" -- \
    "$bin" --backend dnnl --data synthetic --iters 1 "$tmp/tiny.cfg"
check "--backend cpe" out 0 "one SW26010 (4 core groups" -- \
    "$bin" --backend cpe --data synthetic --iters 1 --no-test "$tmp/tiny.cfg"
check "--data with an empty value" err 2 "option --data: expected a non-empty value" -- \
    "$bin" --data= "$tmp/tiny.cfg"

# ------------------------------------------------------------- bad input

check "missing cfg file" err 2 "$tmp/nope.cfg: cannot open network cfg" -- "$bin" --iters 1 "$tmp/nope.cfg"
check "cfg with an error (file:line)" err 2 "$tmp/bad.cfg:7: unknown key 'fliters' in [convolutional]" -- \
    "$bin" --data synthetic --iters 1 "$tmp/bad.cfg"
check "cfg without a loss layer" err 2 "$tmp/noloss.cfg:5: the last layer is [connected]" "loss layer" -- \
    "$bin" --data synthetic --iters 1 "$tmp/noloss.cfg"
check "no schedule" err 2 "no schedule: give --iters, --epochs or max_batches=" -- \
    "$bin" --data synthetic "$tmp/tiny.cfg"
check "--data missing file" err 2 "$tmp/nope.data: cannot open data file" -- \
    "$bin" --data "$tmp/nope.data" --iters 1 "$tmp/mnist.cfg"
check "--data unknown key" err 2 "$tmp/unknown.data:2: unknown key 'validation'" -- \
    "$bin" --data "$tmp/unknown.data" --iters 1 "$tmp/mnist.cfg"
check "--data without train_labels" err 2 "$tmp/nolabels.data: train=: " "IDX images need their labels file" -- \
    "$bin" --data "$tmp/nolabels.data" --iters 1 "$tmp/mnist.cfg"
check "truncated IDX images" err 2 "$tmp/t10k-images-truncated: truncated" \
    "promises 7840000 bytes of data" -- "$bin" --data "$tmp/truncated.data" --iters 1 "$tmp/mnist.cfg"
check "truncated gzip IDX images" err 2 "$tmp/t10k-images-truncated.gz: truncated" -- \
    "$bin" --data "$tmp/truncatedgz.data" --iters 1 "$tmp/mnist.cfg"
check "truncated IDX labels" err 2 "$tmp/t10k-labels-truncated: truncated" \
    "promises 10000 bytes of data" -- "$bin" --data "$tmp/truncatedlabels.data" --iters 1 "$tmp/mnist.cfg"
check "test= without test_labels=" err 2 "$tmp/notestlabels.data: test=: " "IDX images need their labels file" -- \
    "$bin" --data "$tmp/notestlabels.data" --iters 1 "$tmp/mnist.cfg"
check "image and label counts differ" err 2 "$tmp/two28.idx has 2 images but" "has 10000 labels" -- \
    "$bin" --data "$tmp/mismatch.data" --iters 1 "$tmp/mnist.cfg"
check "wrong magic (images)" err 2 "$tmp/badmagic.idx: not a data file singletrain knows" "IDX images (magic 0x00000803)" -- \
    "$bin" --data "$tmp/badmagic.data" --iters 1 "$tmp/mnist.cfg"
check "wrong magic (labels)" err 2 "$tmp/magic.labels: not an IDX file" "expected magic 0x00000801" -- \
    "$bin" --data "$tmp/magiclabels.data" --iters 1 "$tmp/mnist.cfg"
check "label >= classes" err 2 "$tmp/eleven.labels: label 11 of record 1 is not below the network's 10 classes" -- \
    "$bin" --data "$tmp/eleven.data" --iters 1 "$tmp/mnist.cfg"
check "image shape does not match the net" err 2 "$tmp/two8.idx: records are 8 x 8 x 1 but" \
    "$tmp/mnist.cfg:1 [net] expects" -- "$bin" --data "$tmp/shape.data" --iters 1 "$tmp/mnist.cfg"

# ------------------------------------------------------ run-time failure

check "--snapshot-dir under a file (checked before training)" err 2 "--snapshot-dir $tmp/tiny.cfg/snaps: cannot create $tmp/tiny.cfg/snaps: Not a directory" -- \
    "$bin" -q --data synthetic --iters 1 --snapshot-dir "$tmp/tiny.cfg/snaps" "$tmp/tiny.cfg"

# ------------------------------------------------------------- successes

check "--help" out 0 "usage: singletrain [options] NET.cfg" -- "$bin" --help
for opt in "-t, --threads N" "-b, --batch N" "--iters N" "--epochs N" "--seed N" "--backend NAME" \
    "--data FILE" "--snapshot-dir DIR" "-q, --quiet" "-v, --verbose" "-h, --help" "--version" \
    "--train-images N" "--test-images N" "--test-interval N" "--log-every N" \
    "--log-format FORMAT" "--metrics FILE"; do
    check "--help lists $opt" out 0 "$opt" -- "$bin" --help
done
check "-h" out 0 "usage: singletrain" -- "$bin" -h
check "--version" out 0 "singletrain " -- "$bin" --version
check "synthetic run" out 0 "training: 3 iterations of batch 8" "done: 3 iterations" -- \
    "$bin" --data synthetic --iters 3 "$tmp/tiny.cfg"
# The synthetic test split holds new samples of the training split's classes:
# what the network learnt carries over (it held other class patterns, and
# stayed near or below chance, 4.3% against 33%).
check "synthetic test split: the training classes" out 0 "test accuracy: final" -- \
    "$bin" -t 1 --data synthetic --iters 300 "$tmp/tiny.cfg"
acc=$(sed -n 's/^test accuracy: final \([0-9]*\)\..*/\1/p' "$tmp/stdout")
expect "synthetic test split: accuracy ${acc:-missing}% is at least 90%" [ "${acc:-0}" -ge 90 ]
check "-b overrides batch=" out 0 "training: 3 iterations of batch 5" -- \
    "$bin" -b 5 --data synthetic --iters 3 "$tmp/tiny.cfg"
check "--batch=6 overrides batch=" out 0 "training: 2 iterations of batch 6" -- \
    "$bin" --batch=6 --data synthetic --iters 2 "$tmp/tiny.cfg"
check "-b7 (attached value)" out 0 "of batch 7" -- "$bin" -b7 --data synthetic --iters 1 "$tmp/tiny.cfg"
check "small IDX files" out 0 "data: 2 training records from $tmp/two28.idx, 2 test records" -- \
    "$bin" --data "$tmp/small.data" --iters 2 "$tmp/mnist.cfg"
check "Fashion-MNIST t10k (gzip)" out 0 "data: 64 training records" "training: 2 iterations" -- \
    "$bin" --data "$tmp/good.data" --train-images 64 --iters 2 "$tmp/mnist.cfg"
check "--snapshot-dir that does not exist is created, parents too (mkdir -p)" out 0 \
    "created the snapshot directory $tmp/new/snaps" "weights saved to $tmp/new/snaps/tiny_final.snap" -- \
    "$bin" --data synthetic --iters 1 --snapshot-dir "$tmp/new/snaps" "$tmp/tiny.cfg"
check "--snapshot-dir: no directory made when the cfg is bad" err 2 "bad.cfg:7" -- \
    "$bin" -q --data synthetic --iters 1 --snapshot-dir "$tmp/bad-run/snaps" "$tmp/bad.cfg"
expect "--snapshot-dir: none made for a bad cfg" [ ! -e "$tmp/bad-run" ]
# A UTF-8 byte order mark (some editors write one) starts the cfg: it is
# skipped (it was an invisible part of line 1's text).
{ printf '\357\273\277'; cat "$tmp/tiny.cfg"; } >"$tmp/bom.cfg"
check "a cfg starting with a UTF-8 byte order mark" out 0 "softmax" -- "$bin" --dry-run "$tmp/bom.cfg"
mkdir "$tmp/snaps"
check "--snapshot-dir existing directory" out 0 "weights saved to $tmp/snaps/tiny_final.snap" -- \
    "$bin" --data synthetic --iters 1 --snapshot-dir "$tmp/snaps" "$tmp/tiny.cfg"
expect "snapshot file written" [ -s "$tmp/snaps/tiny_final.snap" ]
check "-q keeps stdout quiet" err 0 "" -- "$bin" -q --data synthetic --iters 1 "$tmp/tiny.cfg"
expect "-q printed nothing on stdout" [ ! -s "$tmp/stdout" ]

printf '[net]\nheight=8\nwidth=8\nchannels=1\nsolver=rmsprop\nB1=0.8\nrms_decay=0.9\n[connected]\noutput=3\n[softmax]\n' \
    >"$tmp/unused-key.cfg"
check "a solver key the rule ignores warns" err 0 "unused-key.cfg:6: [net] B1= has no effect with solver=rmsprop (it is Adam's)" -- \
    "$bin" --dry-run "$tmp/unused-key.cfg"
expect "a key the rule reads does not warn" [ "$(grep -c 'no effect' "$tmp/stderr")" -eq 1 ]

# ------------------------------------------------------ --profile's roofline

# LeNet-5 at batch 8 on one worker, the peak given as 100 GFLOP/s. Its
# second convolution (20x12x12 -> 50x8x8, 5x5, 25,050 weights) does 2 x 50 x
# 500 x 64 = 3.2M flops per image in each pass and must move, forward, its
# input, output and weights: 4 x (8 x (2,880 + 3,200) + 25,050) bytes.
check "--profile --fma-peak 100: the roofline" out 0 "roofline of worker 0 (8 images, 1 core): FMA peak 100.0 GFLOP/s per core (given by --fma-peak)" -- \
    "$bin" -t 1 -b 8 --data synthetic --iters 12 --warmup 2 --no-test --profile --fma-peak 100 \
    "$(dirname "$0")/../../data/lenet.cfg"
conv2=$(awk '$1 == 2 && $2 == "conv" && $3 == "forward"' "$tmp/stdout")
expect "roofline: conv2's forward bytes are hand-computed 0.295 MB ($conv2)" \
    [ "$(echo "$conv2" | awk '{ print $7 }')" = "0.295" ]
# The ms are printed to 0.001: g from them is off by up to 0.0005 / ms of itself.
expect "roofline: GFLOP/s = 8 x 3.2M flops / its ms, of peak = that / 100 GFLOP/s" \
    awk -v line="$conv2" 'BEGIN { split(line, f); g = 8 * 3.2e6 / (f[4] * 1e-3) / 1e9;
        p = f[6]; sub("%", "", p);
        exit !(f[4] > 0 && (f[5] - g) ^ 2 < (0.0005 / f[4] * g + 0.1) ^ 2 && (p - f[5]) ^ 2 < 0.01) }'
expect "roofline: the first layer has no backward-data row, max pool no backward-weights" \
    awk '($1 == 0 && $3 == "backward-data") || ($2 == "max" && $3 == "backward-weights") { exit 1 }' "$tmp/stdout"
expect "roofline: every layer's forward is there" \
    [ "$(awk '$3 == "forward" && $2 ~ /^(conv|max|connected|softmax)$/' "$tmp/stdout" | wc -l)" = 7 ]
# In bf16 the roofline's peak is the CPU's bf16 one (AVX512_BF16's dot
# products), where /proc/cpuinfo says it has them; elsewhere none, and the
# fp32 peak stays. The ref backend computes in vector instructions, never on
# AMX's tiles, so their peak is not its.
check "--profile --precision bf16 (ref): the bf16 roofline" out 0 "roofline in bf16: peak " -- \
    "$bin" -t 1 -b 8 --backend ref --precision bf16 --data synthetic --iters 4 --warmup 1 \
    --no-test --profile --fma-peak 100 "$(dirname "$0")/../../data/lenet.cfg"
bf16_peak=$(sed -n 's/^roofline in bf16: peak \([0-9.]*\) GFLOP\/s per core (\(.*\))\(.*\)$/\1 \2\3/p' "$tmp/stdout")
conv2=$(awk '$1 == 2 && $2 == "conv" && $3 == "forward"' "$tmp/stdout")
if grep -qw avx512_bf16 /proc/cpuinfo; then
    expect "bf16 roofline: the CPU's bf16 peak measured ($bf16_peak)" \
        awk -v f="$bf16_peak" 'BEGIN { split(f, v, " "); exit !(v[1] > 0 && f ~ /avx512_bf16 dot products.*the peak below$/) }'
    expect "bf16 roofline: of peak = GFLOP/s / the bf16 peak ($conv2)" \
        awk -v line="$conv2" -v f="$bf16_peak" 'BEGIN { split(line, c); split(f, v, " ");
            p = c[6]; sub("%", "", p); exit !((p - 100 * c[5] / v[1]) ^ 2 < 0.01) }'
    if grep -qw amx_bf16 /proc/cpuinfo; then
        expect "bf16 roofline: the ref backend does not take AMX's peak ($bf16_peak)" \
            awk -v f="$bf16_peak" 'BEGIN { exit !(f ~ /; AMX tile products [0-9.]*, which this backend does not use/) }'
    fi
else
    expect "bf16 roofline: no bf16 instructions here, the fp32 peak below ($bf16_peak)" \
        awk -v f="$bf16_peak" 'BEGIN { exit !(f ~ /^0.0 none: no bf16 instructions: the fp32 peak below$/) }'
fi
# Where oneDNN runs its bf16 convolutions on AMX's tiles, the peak is the
# tiles' (tdpbf16ps: 16 x 16 x 32 multiply-adds, one every 16 cycles on
# Sapphire Rapids, Intel's optimization manual: 1,024 flops a cycle, 16 times
# the 64 of two 16-lane FMA units, 32 times one unit's), measured in the same
# run as the fp32 FMA peak; below AVX512_CORE_AMX (ONEDNN_MAX_CPU_ISA) the
# vector units' again. On a CPU without AMX, a SKIP line.
if grep -qw amx_bf16 /proc/cpuinfo && [ -z "${ONEDNN_MAX_CPU_ISA:-}" ]; then
    check "--profile --precision bf16 (dnnl on AMX): the tiles' roofline" out 0 "roofline in bf16: peak " -- \
        "$bin" -t 1 -b 8 --backend dnnl --precision bf16 --data synthetic --iters 4 --warmup 1 \
        --no-test --profile "$(dirname "$0")/../../data/lenet.cfg"
    fma=$(sed -n 's/^roofline of worker 0.*FMA peak \([0-9.]*\) GFLOP\/s.*/\1/p' "$tmp/stdout")
    tiles=$(sed -n 's/^roofline in bf16: peak \([0-9.]*\) GFLOP\/s per core (AMX tile products, which the backend.s convolutions run on; avx512_bf16 dot products [0-9.]*), the peak below$/\1/p' "$tmp/stdout")
    conv2=$(awk '$1 == 2 && $2 == "conv" && $3 == "forward"' "$tmp/stdout")
    expect "AMX roofline: the tiles' peak is 4-32 times the fp32 FMA peak ($tiles against $fma)" \
        awk -v t="$tiles" -v f="$fma" 'BEGIN { exit !(t > 0 && f > 0 && t >= 4 * f && t <= 32 * f) }'
    expect "AMX roofline: of peak = GFLOP/s / the tiles' peak ($conv2)" \
        awk -v line="$conv2" -v t="$tiles" 'BEGIN { split(line, c);
            p = c[6]; sub("%", "", p); exit !(t > 0 && (p - 100 * c[5] / t) ^ 2 < 0.01) }'
    check "--profile --precision bf16 (dnnl below AMX): the vector units' roofline" out 0 \
        "roofline in bf16: peak " -- env ONEDNN_MAX_CPU_ISA=AVX512_CORE_BF16 \
        "$bin" -t 1 -b 8 --backend dnnl --precision bf16 --data synthetic --iters 4 --warmup 1 \
        --no-test --profile "$(dirname "$0")/../../data/lenet.cfg"
    expect "AMX roofline: under ONEDNN_MAX_CPU_ISA=AVX512_CORE_BF16 the dot products' peak" \
        grep -q "^roofline in bf16: peak [0-9.]* GFLOP/s per core (avx512_bf16 dot products; AMX tile products [0-9.]*, which this backend does not use), the peak below$" "$tmp/stdout"
else
    echo "SKIP: the AMX roofline: no AMX here (or ONEDNN_MAX_CPU_ISA=${ONEDNN_MAX_CPU_ISA:-} set)"
fi

# ------------------------------------------- --help against the option table

# The option table of src/cmd/cli.c, one entry per line: name, short name (0 or
# 'x'), value name (NULL or "ARG") and group; --help must list each under
# its group as "-x, --name ARG" or "--name ARG", nothing else, and the
# parser must know each.
sed -n "s/^ *{\"\([a-z0-9-]*\)\", \(0\|'.'\), \(NULL\|\"[^\"]*\"\), \"\([^\"]*\)\".*/\1 \2 \3 \4/p" \
    "$(dirname "$0")/../../src/cmd/cli.c" | tr -d "\"'" >"$tmp/table"
"$bin" --help >"$tmp/help"
awk '/^[A-Z][A-Za-z-]*:$/ { group = substr($0, 1, length($0) - 1); next }
     /^  (-., |    )--/ { s = $0; sub(/^ +/, "", s); i = index(s, "  "); print group "|" (i ? substr(s, 1, i - 1) : s) }' \
    "$tmp/help" >"$tmp/help-options"
expect "the option table has entries ($(wc -l <"$tmp/table"))" [ "$(wc -l <"$tmp/table")" -ge 30 ]
expect "--help lists as many options as the table" \
    [ "$(wc -l <"$tmp/table")" -eq "$(wc -l <"$tmp/help-options")" ]
missing= unknown=
while read -r name short arg group; do
    left="--$name"
    [ "$short" != 0 ] && left="-$short, $left"
    [ "$arg" != NULL ] && left="$left $arg"
    grep -q -x -F "$group|$left" "$tmp/help-options" || missing="$missing [$group] $left;"
    "$bin" "--$name" </dev/null 2>&1 | grep -q "unknown option" && unknown="$unknown --$name"
done <"$tmp/table"
expect "--help lists every table entry under its group${missing:+ (missing:$missing)}" [ -z "$missing" ]
expect "the parser knows every table entry${unknown:+ (unknown:$unknown)}" [ -z "$unknown" ]

# ---------------------------------------- progress formats, metrics, summary

# 1024 synthetic images at batch 8: 128 iterations per epoch; 20 iterations,
# a row every 5, a test phase every 10 (256 synthetic test images); one
# convolution implementation, as the runs' figures are compared (with auto
# each run measures its own).
run="-t 2 --data synthetic --iters 20 --log-every 5 --test-interval 10 --conv-impl blocked"
header=phase,iteration,epoch,wall_s,loss,lr,images_per_s,test_accuracy,test_loss,data_ms,compute_ms,barrier_ms,aggregation_ms,update_ms,communication_ms,precision
# shellcheck disable=SC2086
check "text progress (not a terminal)" out 0 "iter 5/20  epoch 0.04  loss " "test  iter 20  accuracy" -- \
    "$bin" $run "$tmp/tiny.cfg"
cp "$tmp/stdout" "$tmp/text.out"
# shellcheck disable=SC2086
check "--log-format csv" err 0 "done: 20 iterations" -- "$bin" $run --log-format csv "$tmp/tiny.cfg"
cp "$tmp/stdout" "$tmp/csv.out"
cp "$tmp/stderr" "$tmp/csv.err"
expect "csv: the first line is the header" [ "$(head -n 1 "$tmp/csv.out")" = "$header" ]
expect "csv: every line has 16 fields" awk -F, 'NF != 16 { exit 1 }' "$tmp/csv.out"
expect "csv: every row's precision is fp32 (the default)" \
    awk -F, 'NR > 1 && $16 != "fp32" { exit 1 }' "$tmp/csv.out"
# shellcheck disable=SC2086
check "--log-format csv --precision bf16 (ref)" err 0 "done: 20 iterations" -- \
    "$bin" ${run% --conv-impl blocked} --backend ref --precision bf16 --log-format csv "$tmp/tiny.cfg"
expect "csv: every row of a bf16 run says bf16" \
    awk -F, 'NR > 1 && $16 != "bf16" { bad = 1 } END { exit bad || NR < 2 }' "$tmp/stdout"
expect "csv: train rows at 5, 10, 15, 20, test rows after 10 and 20" \
    [ "$(cut -d, -f1,2 "$tmp/csv.out" | tail -n +2 | tr '\n' ' ')" = \
      "train,5 train,10 test,10 train,15 train,20 test,20 " ]
expect "csv: epoch = iteration / 128" awk -F, 'NR > 1 && $3 != sprintf("%.4f", $2 / 128) { exit 1 }' "$tmp/csv.out"
expect "csv: lr is the cfg's learning_rate=0.01" awk -F, '$1 == "train" && $6 != 0.01 { exit 1 }' "$tmp/csv.out"
expect "csv: wall_s never decreases" awk -F, 'NR > 1 { if ($4 < last) exit 1; last = $4 }' "$tmp/csv.out"
expect "csv: train rows have a speed and a time split, one node no communication" \
    awk -F, '$1 == "train" && !($7 > 0 && $11 > 0 && $15 == "0.000" && $8 == "") { exit 1 }' "$tmp/csv.out"
expect "csv: test rows have an accuracy in [0, 1] and a loss, nothing else" \
    awk -F, '$1 == "test" && !($8 >= 0 && $8 <= 1 && $9 > 0 && $5 $6 $7 $10 $15 == "") { exit 1 }' "$tmp/csv.out"
# The same run in text: its "iter" and "test" lines carry the CSV's figures.
sed -n 's/^iter \([0-9]*\)\/20 .* loss \([0-9.]*\) .*/train \1 \2/p; s/^test  iter \([0-9]*\)  accuracy \([0-9.]*\)%.*/test \1 \2/p' \
    "$tmp/text.out" >"$tmp/text.figures"
awk -F, 'NR > 1 { printf "%s %d %s\n", $1, $2, $1 == "train" ? sprintf("%.4f", $5) : sprintf("%.2f", 100 * $8) }' \
    "$tmp/csv.out" >"$tmp/csv.figures"
expect "csv: losses and accuracies are those of the text run" cmp -s "$tmp/text.figures" "$tmp/csv.figures"
expect "csv: stdout has no text progress lines" [ "$(grep -c -v -e '^train,' -e '^test,' -e '^phase,' "$tmp/csv.out")" -eq 0 ]
expect "csv: the messages went to stderr" grep -q "^training: 20 iterations of batch 8" "$tmp/csv.err"
# shellcheck disable=SC2086
check "-q --log-format csv: CSV rows only" out 0 "$header" -- "$bin" -q $run --log-format csv "$tmp/tiny.cfg"
expect "-q --log-format csv: the same rows" [ "$(wc -l <"$tmp/stdout")" -eq "$(wc -l <"$tmp/csv.out")" ]
expect "-q --log-format csv: nothing on stderr" [ ! -s "$tmp/stderr" ]
check "--log-format xml" err 2 "option --log-format: expected live, text or csv, got 'xml'" -- \
    "$bin" --log-format xml "$tmp/tiny.cfg"

# --metrics: the CSV rows in a file; the text lines stay on stdout.
# shellcheck disable=SC2086
check "--metrics FILE" out 0 "iter 20/20" -- "$bin" $run --metrics "$tmp/m.csv" "$tmp/tiny.cfg"
cp "$tmp/stdout" "$tmp/metrics-run.out"
expect "--metrics: FILE written, FILE.partial gone" [ -s "$tmp/m.csv" ] && [ ! -e "$tmp/m.csv.partial" ]
cut -d, -f1-3,5,6,8,9 "$tmp/m.csv" >"$tmp/m.cut"
cut -d, -f1-3,5,6,8,9 "$tmp/csv.out" >"$tmp/csv.cut"
expect "--metrics: the rows of --log-format csv (figures other than timings)" cmp -s "$tmp/m.cut" "$tmp/csv.cut"
# The summary: the best test phase is the CSV's best, and where the time went.
best=$(awk -F, '$1 == "test" && $8 > best { best = $8; at = $2 } END { printf "%.2f%% after iteration %d", 100 * best, at }' "$tmp/m.csv")
expect "summary: best test accuracy ($best) as in the metrics" \
    grep -q -F "best test accuracy $best (epoch" "$tmp/metrics-run.out"
expect "summary: total time = set-up + training + test phases (0.1 s rounding)" awk '
    /^total time/ { gsub(/[:,]/, ""); found = 1; d = $3 - $6 - $9 - $13; if (d < -0.21 || d > 0.21) exit 1 }
    END { exit !found }' "$tmp/metrics-run.out"
expect "summary: says how to keep the weights" \
    grep -q -x -F "weights not saved: give --snapshot-dir DIR to keep them as DIR/tiny_final.snap" \
    "$tmp/metrics-run.out"
check "--metrics, set-up error: exit 2" err 2 "bad.cfg:7" -- \
    "$bin" --data synthetic --iters 1 --metrics "$tmp/bad.csv" "$tmp/bad.cfg"
expect "--metrics, set-up error: neither FILE nor FILE.partial" [ ! -e "$tmp/bad.csv" ] && [ ! -e "$tmp/bad.csv.partial" ]
check "--metrics in a missing directory" err 2 "--metrics $tmp/nodir/m.csv: directory $tmp/nodir: No such file or directory" -- \
    "$bin" --data synthetic --iters 1 --metrics "$tmp/nodir/m.csv" "$tmp/tiny.cfg"

# Temporaries with predictable names are created exclusively: a symbolic
# link planted under the name is replaced, its target left alone (it was
# followed and the target overwritten). `exec` keeps the shell's PID, so
# $$ names the run's own temporary.
mkdir "$tmp/links"
echo precious >"$tmp/links/target"
# untouched_and COMMAND...: the target still holds its text, and COMMAND holds
untouched_and() {
    [ "$(cat "$tmp/links/target")" = precious ] && "$@"
}
ln -s "$tmp/links/target" "$tmp/links/met.csv.partial"
check "--metrics: a planted FILE.partial link" err 0 "" -- \
    "$bin" -q --data synthetic --iters 2 --metrics "$tmp/links/met.csv" "$tmp/tiny.cfg"
expect "--metrics: the link's target is untouched, FILE is the CSV" \
    untouched_and grep -q "^phase," "$tmp/links/met.csv"
check "snapshot: a planted NAME_final.snap.tmp.PID link" err 0 "" -- sh -c \
    "ln -s '$tmp/links/target' '$tmp/links/tiny_final.snap.tmp.'\$\$ && exec '$bin' -q --data synthetic --iters 2 --snapshot-dir '$tmp/links' '$tmp/tiny.cfg'"
expect "snapshot: the link's target is untouched, the snapshot written" \
    untouched_and [ -s "$tmp/links/tiny_final.snap" ]
expect "snapshot: no temporary left" [ -z "$(ls "$tmp/links" | grep tmp)" ]
check "export: a planted OUT.tmp.PID link" err 0 "" -- sh -c \
    "ln -s '$tmp/links/target' '$tmp/links/x.weights.tmp.'\$\$ && exec '$bin' export -q '$tmp/tiny.cfg' '$tmp/links/tiny_final.snap' '$tmp/links/x.weights'"
expect "export: the link's target is untouched, OUT written" \
    untouched_and [ -s "$tmp/links/x.weights" ]
ln -s "$tmp/links/target" "$tmp/links/trace.csv.partial"
check "--cpe-trace: a planted FILE.partial link" err 0 "" -- \
    "$bin" -q --backend cpe --data synthetic --iters 1 --no-test --cpe-trace "$tmp/links/trace.csv" "$tmp/tiny.cfg"
expect "--cpe-trace: the link's target is untouched, FILE is the trace" \
    untouched_and grep -q "^iteration," "$tmp/links/trace.csv"

# Outputs that exist and are not regular files are written in place, never
# replaced (renaming over them turned a link to /proc/self/fd/1 into a
# regular file, and, as root, /dev/null; as another user /dev/stdout was
# refused for want of writing /dev). Tested on links in the scratch
# directory and FIFOs, never on /dev itself. A link to a regular file is
# written through: its target replaced, the link kept.
mkdir "$tmp/dev"
ln -s /proc/self/fd/1 "$tmp/dev/stdout"
# is_link_to_stdout: $tmp/dev/stdout is still the link
is_link_to_stdout() {
    [ -L "$tmp/dev/stdout" ] && [ "$(readlink "$tmp/dev/stdout")" = /proc/self/fd/1 ]
}
check "--save-kernel-choices onto a link to /proc/self/fd/1 (stdout a file)" out 0 \
    "# singletrain kernel choices for" -- "$bin" -q -t 1 --iters 2 --no-test --data synthetic \
    --save-kernel-choices "$tmp/dev/stdout" "$tmp/tiny.cfg"
expect "--save-kernel-choices onto the link: the link is kept" is_link_to_stdout
check "--metrics onto the link" out 0 "train,2," -- "$bin" -q -t 1 --iters 2 --no-test \
    --data synthetic --metrics "$tmp/dev/stdout" "$tmp/tiny.cfg"
expect "--metrics onto the link: the link is kept" is_link_to_stdout
check "--metrics and --save-kernel-choices both onto the link: allowed, both written" out 0 \
    "phase,iteration," -- "$bin" -q -t 1 --iters 2 --no-test --data synthetic --metrics \
    "$tmp/dev/stdout" --save-kernel-choices "$tmp/dev/stdout" "$tmp/tiny.cfg"
expect "... the choices among them" grep -q "^# singletrain kernel choices" "$tmp/stdout"
"$bin" -q --data synthetic --iters 2 --no-test --snapshot-dir "$tmp/dev" "$tmp/tiny.cfg"
check "export onto the link" out 0 "" -- \
    "$bin" export -q "$tmp/tiny.cfg" "$tmp/dev/tiny_final.snap" "$tmp/dev/stdout"
expect "export onto the link: the link is kept, the weights went to stdout" \
    is_link_to_stdout && [ "$(wc -c <"$tmp/stdout")" -eq 1000 ]
check "--cpe-trace onto the link" out 0 "iteration,kernel," -- "$bin" -q --backend cpe \
    --data synthetic --iters 1 --no-test --cpe-trace "$tmp/dev/stdout" "$tmp/tiny.cfg"
expect "--cpe-trace onto the link: the link is kept" is_link_to_stdout
mkfifo "$tmp/dev/fifo"
# (the reader gives up after 20 s: a FIFO replaced by a file never gets a writer)
timeout 20 cat "$tmp/dev/fifo" >"$tmp/fifo.got" &
reader=$!
check "--metrics onto a FIFO with a reader" err 0 "" -- \
    "$bin" -q -t 1 --iters 2 --no-test --data synthetic --metrics "$tmp/dev/fifo" "$tmp/tiny.cfg"
wait $reader
expect "--metrics onto a FIFO: the reader got the rows, the FIFO is still one" \
    grep -q "^train,2," "$tmp/fifo.got" && [ -p "$tmp/dev/fifo" ]
echo old >"$tmp/dev/real.csv"
ln -s real.csv "$tmp/dev/link.csv"
check "--metrics onto a link to a regular file" err 0 "" -- \
    "$bin" -q -t 1 --iters 2 --no-test --data synthetic --metrics "$tmp/dev/link.csv" "$tmp/tiny.cfg"
expect "... written through: the link kept, its target the CSV, no temporary left" \
    [ -L "$tmp/dev/link.csv" ] && grep -q "^train,2," "$tmp/dev/real.csv" && \
    [ -z "$(ls "$tmp/dev" | grep partial)" ]
ln -s "$tmp/dev/none.csv" "$tmp/dev/dangling.csv"
check "--metrics onto a dangling link: refused, naming it" err 2 \
    "--metrics $tmp/dev/dangling.csv: a symbolic link to $tmp/dev/none.csv, which cannot be written through" -- \
    "$bin" -q -t 1 --iters 2 --no-test --data synthetic --metrics "$tmp/dev/dangling.csv" "$tmp/tiny.cfg"
expect "... and left as it was" [ -L "$tmp/dev/dangling.csv" ] && [ ! -e "$tmp/dev/none.csv" ]
if [ "$(id -u)" -eq 0 ] && command -v setpriv >/dev/null 2>&1; then
    # another user, the link in a directory it cannot write (as /dev/stdout)
    chmod 755 "$tmp" "$tmp/dev"
    chmod 644 "$tmp/tiny.cfg"
    check "as another user, --metrics onto the link in a directory it cannot write" out 0 \
        "train,2," -- setpriv --reuid=65534 --regid=65534 --clear-groups "$bin" -q -t 1 \
        --iters 2 --no-test --data synthetic --metrics "$tmp/dev/stdout" "$tmp/tiny.cfg"
fi

# SIGTERM during training: FILE is renamed, with whole rows only.
"$bin" -t 1 --data synthetic --iters 100000000 --log-every 100 --no-test --metrics "$tmp/sig.csv" \
    "$tmp/tiny.cfg" >/dev/null 2>"$tmp/sig.err" &
pid=$!
tries=0
while [ "$(cat "$tmp/sig.csv.partial" 2>/dev/null | wc -l)" -lt 3 ] && [ $tries -lt 600 ]; do
    sleep 0.1
    tries=$((tries + 1))
done
kill -TERM $pid
wait $pid
rc=$?
expect "SIGTERM: exit 143" [ "$rc" -eq 143 ]
expect "SIGTERM: FILE written, FILE.partial gone" [ -s "$tmp/sig.csv" ] && [ ! -e "$tmp/sig.csv.partial" ]
expect "SIGTERM: whole rows only, the last ending in a newline" \
    sh -c "awk -F, 'NF != 16 { exit 1 }' '$tmp/sig.csv' && [ \"\$(tail -c 1 '$tmp/sig.csv' | od -An -c | tr -d ' ')\" = '\\n' ]"

# The live line, forced into a file: carriage returns, cleared to the end
# of the line, the last one kept on its own row; messages on rows of their
# own; no plain progress lines.
# shellcheck disable=SC2086
check "--log-format live" out 0 "in 0:0" -- env TERM=xterm "$bin" $run --log-format live "$tmp/tiny.cfg"
cp "$tmp/stdout" "$tmp/live.out"
expect "live: lines rewritten with \\r and ESC[K" grep -q "$(printf '\r')iter [0-9]*/20 .*ETA.*$(printf '\033')\\[K" "$tmp/live.out"
expect "live: the last line stays, then a newline" \
    grep -q "$(printf '\r')iter 20/20  epoch 0.16  loss [0-9.]*  [0-9]* img/s  in 0:0[0-9]$(printf '\033')\\[K\$" \
    "$tmp/live.out"
expect "live: the test line on a row of its own (the line cleared first)" \
    grep -q "$(printf '\r\033')\\[Ktest  iter 10  accuracy .*images)\$" "$tmp/live.out"
expect "live: no plain 'iter' lines" [ "$(grep -c '  lr ' "$tmp/live.out")" -eq 0 ]
# shellcheck disable=SC2086
check "--log-format live, TERM=dumb" out 0 "in 0:0" -- env TERM=dumb "$bin" $run --log-format live "$tmp/tiny.cfg"
expect "live, TERM=dumb: no escape sequences" [ "$(grep -c "$(printf '\033')" "$tmp/stdout")" -eq 0 ]
# shellcheck disable=SC2086
check "-q --log-format live: nothing on stdout" out 0 "" -- "$bin" -q $run --log-format live "$tmp/tiny.cfg"
expect "-q --log-format live: stdout empty" [ ! -s "$tmp/stdout" ]
# On a terminal (a pseudo-terminal from script(1)) the live line is the default.
if command -v script >/dev/null 2>&1; then
    script -qfec "'$bin' $run '$tmp/tiny.cfg'" "$tmp/tty.out" >/dev/null 2>&1 </dev/null
    expect "a terminal gets the live line by default" grep -q "$(printf '\r')iter 20/20 .* in 0:0" "$tmp/tty.out"
    expect "a terminal gets no plain 'iter' lines" [ "$(grep -c '  lr ' "$tmp/tty.out")" -eq 0 ]
    script -qfec "'$bin' -q $run '$tmp/tiny.cfg'" "$tmp/tty-q.out" >/dev/null 2>&1 </dev/null
    expect "-q on a terminal: no progress at all" [ "$(grep -c 'iter ' "$tmp/tty-q.out")" -eq 0 ]
else
    echo "note: script(1) missing: the terminal default was not checked (util-linux has it)"
fi

finish test_cli.sh
