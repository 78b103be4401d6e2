#!/bin/sh
# Darknet .weights interchange against the real Darknet (Debian's darknet
# package), on a 16x16x3, 10-class classifier (a convolution with batch
# norm, max pooling, a convolution, an inner product, softmax) and
# Fashion-MNIST images written as 16x16 RGB PNGs (so Darknet's letterbox is
# the identity and both programs see the same pixels):
#   - singletrain trains it, `singletrain export` writes .weights, and
#     `darknet classifier predict` must give every image the same top-1
#     class and the same probabilities as `singletrain predict`;
#   - Darknet trains it (`darknet classifier train`, 10 iterations, which
#     writes backup/<cfg>.weights), and `singletrain predict` on that file
#     must agree with Darknet the same way; exporting it again gives the
#     same bytes;
#   - errors, each with its exit code and message: truncated weights,
#     weights and snapshots of another network, missing and corrupt images,
#     bad usage.
# Fails, naming the package (darknet), without the darknet binary.
# usage: sh tests/e2e/test_darknet_weights.sh PATH_TO_SINGLETRAIN
set -u
. "$(dirname "$0")/../lib/check.sh"
suite_start "$@"
require_cmd darknet darknet
make_images=$(dirname "$bin")/tools/make_images
if [ ! -x "$make_images" ]; then
    echo "test_darknet_weights.sh: $make_images is missing: build it first" \
        "(make $(dirname "$bin")/tools/make_images)" >&2
    exit 2
fi
fmnist=/usr/share/datasets/fashion-mnist

# Relative image paths from here on: the labels are the class names found in
# a path, and the temporary directory's random name must not add one.
cd "$tmp" || exit 2

# ---------------------------------------------------------------- fixtures

# Keys both programs know; max_batches is Darknet's schedule (singletrain
# gets --iters).
cat >net.cfg <<'EOF'
[net]
batch=4
subdivisions=1
height=16
width=16
channels=3
learning_rate=0.01
momentum=0.9
decay=0.0005
max_batches=10

[convolutional]
batch_normalize=1
filters=8
size=3
stride=1
pad=1
activation=leaky

[maxpool]
size=2
stride=2

[convolutional]
filters=8
size=3
stride=1
pad=1
activation=relu

[connected]
output=10
activation=linear

[softmax]
EOF
# Other networks: 5 classes (fewer weights), 16 filters (more).
sed 's/^output=10/output=5/' net.cfg >five.cfg
awk '/^filters=8/ && ++n == 2 { print "filters=16"; next } { print }' net.cfg >wide.cfg

"$make_images" "$fmnist/train-images-idx3-ubyte.gz" "$fmnist/train-labels-idx1-ubyte.gz" \
    train 200 16 rgb >/dev/null || exit 2
"$make_images" "$fmnist/t10k-images-idx3-ubyte.gz" "$fmnist/t10k-labels-idx1-ubyte.gz" \
    eval 10 16 rgb >/dev/null || exit 2
eval_imgs=$(cat eval/list.txt)
first_img=$(head -n 1 eval/list.txt)
# A Darknet classifier .data file (labels= names the classes for darknet
# classifier train and predict); singletrain reads it too (backup= and
# top= with a warning).
printf 'classes=10\ntrain=train/list.txt\nlabels=train/names.txt\nbackup=backup\ntop=1\n' \
    >net.data
mkdir backup snaps

# compare LABEL WEIGHTS MIN_TOP1: singletrain predict and darknet classifier
# predict on every eval image with WEIGHTS; the images' top-1 classes must
# be at least MIN_TOP1 distinct ones (a network that says the same for
# every image would compare too little). Darknet prints each class's
# probability as a percentage rounded to 0.01 points ("%5.2f%%"), so it
# differs from the exact value by up to 0.005 points; singletrain --scores
# prints 9 digits. Different summation orders (oneDNN's kernels, Darknet's
# gemm) move a probability by about 1e-6 in float32 (measured with darknet
# classifier test's 6 digits: at most 7e-7 over 100 images), i.e. 1e-4
# points. Tolerance: 0.006 points, the rounding plus 0.001 of margin. A
# tensor in the wrong place or layout moves probabilities by whole points,
# and so does batch norm's variance read with the other formula (Darknet's
# variances here are about 1e-3, so the divisor is 0.7% off: measured, 0.12
# points).
compare() {
    label=$1 weights=$2 min_top1=$3
    # shellcheck disable=SC2086
    "$bin" predict net.cfg "$weights" $eval_imgs --scores >st.scores 2>st.err &&
        "$bin" predict net.cfg "$weights" $eval_imgs -k 1 --data net.data >st.top 2>>st.err
    rc=$?
    expect "$label: singletrain predict runs" [ "$rc" -eq 0 ]
    [ "$rc" -eq 0 ] || sed 's/^/     | /' st.err
    : >dk.all
    dk_rc=0
    for img in $eval_imgs; do
        $limit darknet classifier predict net.data net.cfg "$weights" "$img" -t 10 \
            >dk.out 2>dk.err || dk_rc=$?
        sed "s|^|$img |" dk.out >>dk.all
    done
    expect "$label: darknet classifier predict runs" [ "$dk_rc" -eq 0 ]
    result=$(awk -v names=train/names.txt '
        BEGIN { while ((getline line < names) > 0) idx[line] = n++ }
        FILENAME == "st.scores" {
            split($0, f, "\t")
            for (c = 2; c in f; c++) st[f[1], c - 2] = 100 * f[c]
            next
        }
        FILENAME == "st.top" { p = index($0, ": "); top[substr($0, 1, p - 1)] = $NF; next }
        {
            pct = $2
            sub(/%:$/, "", pct)
            if (!($1 in dk)) { dk[$1] = $3; images++ }
            d = pct - st[$1, idx[$3]]
            if (d < 0) d = -d
            if (d > max) max = d
            lines++
        }
        END {
            for (img in dk) {
                if (dk[img] != top[img]) { bad++; print "top-1 differs: " img ": darknet " \
                    dk[img] ", singletrain " top[img] > "/dev/stderr" }
                if (!(dk[img] in seen)) { seen[dk[img]] = 1; distinct++ }
            }
            printf "%d %d %d %d %.6f\n", images, lines, bad + 0, distinct, max
        }' st.scores st.top dk.all)
    # shellcheck disable=SC2086
    set -- ${result:-0 0 -1 0 99}
    echo "     $label: $1 images, $2 probabilities; max |darknet - singletrain| =" \
        "$5 points; $4 distinct top-1 classes"
    expect "$label: darknet printed 10 classes for each of the 10 images" [ "$1 $2" = "10 100" ]
    expect "$label: the same top-1 class for every image" [ "$3" -eq 0 ]
    expect "$label: probabilities within 0.006 points" \
        awk -v m="$5" 'BEGIN { exit !(m <= 0.006) }'
    expect "$label: at least $min_top1 distinct top-1 classes" [ "$4" -ge "$min_top1" ]
}

# ---------------------------------------------- singletrain -> Darknet

check "singletrain trains the network" out 0 "done: 100 iterations" -- \
    "$bin" --data net.data --iters 100 -t 1 --no-test --snapshot-dir snaps net.cfg
check "export the snapshot" out 0 "wrote st.weights: 5962 floats" "seen 400" -- \
    "$bin" export net.cfg snaps/net_final.snap st.weights
# 20 bytes of header and 5962 floats: conv 8 + 3 * 8 + 8 * 3 * 9; conv
# 8 + 8 * 8 * 9; connected 10 + 10 * 512
expect "st.weights has Darknet's size for the network" [ "$(wc -c <st.weights)" -eq 23868 ]
compare "singletrain-trained" st.weights 3

# The snapshot and its export predict the same (the running variance
# converts back to within an ulp).
# shellcheck disable=SC2086
"$bin" predict net.cfg snaps/net_final.snap $eval_imgs --scores >snap.scores 2>/dev/null
# shellcheck disable=SC2086
"$bin" predict net.cfg st.weights $eval_imgs --scores >export.scores 2>/dev/null
# shellcheck disable=SC2016
expect "the snapshot and its export give the same scores (1e-6)" awk '
    NR == FNR { n = split($0, a, "\t"); for (i = 2; i <= n; i++) s[FNR, i] = a[i]; next }
    { n = split($0, b, "\t"); for (i = 2; i <= n; i++) {
          d = b[i] - s[FNR, i]; if (d < 0) d = -d; if (d > 1e-6) bad = 1 } }
    END { exit bad || NR != 20 }' snap.scores export.scores

check "predict prints path, percentage and class name" out 0 "$first_img: " "%" -- \
    "$bin" predict net.cfg st.weights "$first_img" --names train/names.txt -k 3
expect "predict -k 3: three lines" [ "$(wc -l <"$tmp/stdout")" -eq 3 ]
check "predict without names prints class numbers" out 0 "$first_img: " -- \
    "$bin" predict net.cfg st.weights "$first_img" -k 1 --backend ref
expect "a class number ends the line" grep -q -E '% [0-9]$' "$tmp/stdout"

# ---------------------------------------------- Darknet -> singletrain

check "darknet classifier train writes backup/net.weights" out 0 "" -- \
    darknet classifier train net.data net.cfg
expect "Darknet's weights have the size singletrain expects" \
    [ "$(wc -c <backup/net.weights)" -eq 23868 ]
compare "darknet-trained" backup/net.weights 1
check "export re-writes Darknet's file" out 0 "wrote rt.weights" "seen 40" -- \
    "$bin" export net.cfg backup/net.weights rt.weights
expect "...byte for byte" cmp -s backup/net.weights rt.weights

# ---------------------------------------------------------------- errors

head -c 2000 st.weights >trunc.weights
check "truncated .weights" err 2 "trunc.weights: truncated .weights file: 2000 bytes, but this network needs 23868" \
    "it ends in layer 2 [convolutional] (cfg line 24)" -- \
    "$bin" predict net.cfg trunc.weights "$first_img"
check "weights of a network with fewer weights" err 2 "st.weights: .weights file of 23868 bytes, but this network's take 13608" \
    "10260 bytes are left over" -- "$bin" predict five.cfg st.weights "$first_img"
check "weights of a network with more weights" err 2 "st.weights: truncated .weights file: 23868 bytes, but this network needs 46684" \
    "it ends in layer 3 [connected] (cfg line 31)" -- "$bin" predict wide.cfg st.weights "$first_img"
check "a snapshot of another network" err 2 "snaps/net_final.snap: snapshot of a different network" -- \
    "$bin" predict five.cfg snaps/net_final.snap "$first_img"
check "export: truncated .weights" err 2 "trunc.weights: truncated .weights file" -- \
    "$bin" export net.cfg trunc.weights out.weights
expect "a failed export writes nothing" [ ! -e out.weights ]
check "missing weights" err 2 "nope.weights: cannot open weights: No such file" -- \
    "$bin" predict net.cfg nope.weights "$first_img"
check "missing image" err 2 "singletrain predict: nope.png: cannot read image: No such file" -- \
    "$bin" predict net.cfg st.weights "$first_img" nope.png
printf '\211PNG\r\n\032\nnot a PNG' >bad.png
check "corrupt image" err 2 "bad.png: cannot decode image" -- \
    "$bin" predict net.cfg st.weights bad.png
printf 'top\ntrouser\n' >two.names
check "a names file with too few names" err 2 "two.names: 2 class names, but the network has 10 classes" -- \
    "$bin" predict net.cfg st.weights "$first_img" --names two.names
check "predict: no image" err 2 "expected NET.cfg, WEIGHTS and at least one image, got 2 arguments" -- \
    "$bin" predict net.cfg st.weights
check "predict: -k above the class count" err 2 "option --top: 11 classes asked for" -- \
    "$bin" predict net.cfg st.weights "$first_img" -k 11
check "predict: unknown backend" err 2 "" -- \
    "$bin" predict net.cfg st.weights "$first_img" --backend nope
check "export: two arguments" err 2 "expected NET.cfg, WEIGHTS and OUT.weights, got 2 arguments" -- \
    "$bin" export net.cfg st.weights
check "predict --help" out 0 "usage: singletrain predict NET.cfg WEIGHTS IMAGE..." "--scores" -- \
    "$bin" predict --help
check "export --help" out 0 "usage: singletrain export NET.cfg WEIGHTS OUT.weights" -- \
    "$bin" export --help

finish test_darknet_weights.sh
