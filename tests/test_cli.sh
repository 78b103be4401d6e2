#!/bin/sh
# The command line: usage errors, bad and missing files, data files that do
# not fit, run-time failures and a few successful runs. Every check runs the
# binary, then compares the exit code and a substring of stderr (or stdout).
# usage: sh tests/test_cli.sh PATH_TO_SINGLETRAIN
set -u
. "$(dirname "$0")/check.sh"
suite_start "$@"
fmnist=/usr/share/datasets/fashion-mnist

# ---------------------------------------------------------------- fixtures

# A tiny network for synthetic runs: 8x8x1 input, 3 classes.
cat >"$tmp/tiny.cfg" <<'EOF'
[net]
batch=8
subdivisions=1
height=8
width=8
channels=1
learning_rate=0.01
momentum=0.9
decay=0.0005

[convolutional]
filters=4
size=3
stride=1
pad=1
activation=relu

[maxpool]
size=2
stride=2

[connected]
output=3
activation=linear

[softmax]
groups=1
EOF

# A 28x28x1, 10-class network for the IDX data checks.
cat >"$tmp/mnist.cfg" <<'EOF'
[net]
batch=4
height=28
width=28
channels=1
learning_rate=0.01

[connected]
output=10
activation=linear

[softmax]
EOF

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
check "-t 0" err 2 "option -t/--threads: expected an integer from 1 to 4096, got '0'" -- \
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

check "--snapshot-dir missing directory (checked before training)" err 2 "--snapshot-dir $tmp/nodir" -- \
    "$bin" -q --data synthetic --iters 1 --snapshot-dir "$tmp/nodir" "$tmp/tiny.cfg"

# ------------------------------------------------------------- successes

check "--help" out 0 "usage: singletrain [options] NET.cfg" -- "$bin" --help
for opt in "-t, --threads N" "-b, --batch N" "--iters N" "--epochs N" "--seed N" "--backend NAME" \
    "--data FILE" "--snapshot-dir DIR" "-q, --quiet" "-v, --verbose" "-h, --help" "--version" \
    "--train-images N" "--test-images N" "--test-interval N" "--log-every N"; do
    check "--help lists $opt" out 0 "$opt" -- "$bin" --help
done
check "-h" out 0 "usage: singletrain" -- "$bin" -h
check "--version" out 0 "singletrain " -- "$bin" --version
check "synthetic run" out 0 "training: 3 iterations of batch 8" "done: 3 iterations" -- \
    "$bin" --data synthetic --iters 3 "$tmp/tiny.cfg"
check "-b overrides batch=" out 0 "training: 3 iterations of batch 5" -- \
    "$bin" -b 5 --data synthetic --iters 3 "$tmp/tiny.cfg"
check "--batch=6 overrides batch=" out 0 "training: 2 iterations of batch 6" -- \
    "$bin" --batch=6 --data synthetic --iters 2 "$tmp/tiny.cfg"
check "-b7 (attached value)" out 0 "of batch 7" -- "$bin" -b7 --data synthetic --iters 1 "$tmp/tiny.cfg"
check "small IDX files" out 0 "data: 2 training records from $tmp/two28.idx, 2 test records" -- \
    "$bin" --data "$tmp/small.data" --iters 2 "$tmp/mnist.cfg"
check "Fashion-MNIST t10k (gzip)" out 0 "data: 64 training records" "training: 2 iterations" -- \
    "$bin" --data "$tmp/good.data" --train-images 64 --iters 2 "$tmp/mnist.cfg"
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

finish test_cli.sh
