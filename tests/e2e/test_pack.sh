#!/bin/sh
# `singletrain pack`: packing IDX (the first 500 Fashion-MNIST test images),
# CIFAR-style .bin batches, an image list and data files into stores, the
# store then training a tiny network, usage and input errors with their exit
# codes and messages, and damaged stores rejected at training time. Every
# check runs the binary, then compares the exit code and a substring of
# stderr (or stdout). Inputs are made here, in a temporary directory.
# usage: sh tests/e2e/test_pack.sh PATH_TO_SINGLETRAIN
set -u
. "$(dirname "$0")/../lib/check.sh"
suite_start "$@"
fmnist=/usr/share/datasets/fashion-mnist

# The number of stripe files of the store at $1 (any generation).
stripes() {
    ls "$1".* 2>/dev/null | grep -c -E '\.[0-9a-f]{16}\.[0-9]{3,}$'
}

# ---------------------------------------------------------------- fixtures

# A 28x28x1, 10-class network.
cp "$fixtures/mnist-linear.cfg" "$tmp/tiny.cfg"

# The same for 32x32x3 (CIFAR) and 8x8x1 (the image list).
sed -e 's/height=28/height=32/' -e 's/width=28/width=32/' -e 's/channels=1/channels=3/' \
    "$tmp/tiny.cfg" >"$tmp/cifar.cfg"
sed -e 's/height=28/height=8/' -e 's/width=28/width=8/' -e 's/output=10/output=3/' \
    "$tmp/tiny.cfg" >"$tmp/list.cfg"

images=$fmnist/t10k-images-idx3-ubyte.gz
labels=$fmnist/t10k-labels-idx1-ubyte.gz
printf 'train=%s\ntrain_labels=%s\ntest=%s\ntest_labels=%s\n' "$images" "$labels" "$images" \
    "$labels" >"$tmp/fmnist.data"
printf '# Darknet style\nclasses= 10\ntrain = %s\ntrain_labels = %s\n' "$images" "$labels" \
    >"$tmp/darknet.data"

# CIFAR-10 style batches: records of a label byte (0..9) and 3072 random
# pixel bytes; 20 records in a.bin, 13 in b.bin.
cifar_batch() { # FILE COUNT
    : >"$1"
    i=0
    while [ "$i" -lt "$2" ]; do
        printf "\\$(printf '%03o' $((i % 10)))" >>"$1"
        head -c 3072 /dev/urandom >>"$1"
        i=$((i + 1))
    done
}
cifar_batch "$tmp/a.bin" 20
cifar_batch "$tmp/b.bin" 13

# An image list of 6 grey 4x4 PGM images, labels from class names in paths.
mkdir "$tmp/img"
for n in 0 1 2 3 4 5; do
    case $n in 0 | 3) cls=cat ;; 1 | 4) cls=dog ;; *) cls=owl ;; esac
    { printf 'P5\n4 4\n255\n'; head -c 16 /dev/urandom; } >"$tmp/img/${cls}_$n.pgm"
    echo "$tmp/img/${cls}_$n.pgm" >>"$tmp/list.txt"
done
printf 'cat\ndog\nowl\n' >"$tmp/names.txt"
printf '%s/img/cat_0.pgm 0\n' "$tmp" >"$tmp/nosize.txt"

echo "not a store" >"$tmp/precious.txt"

# ---------------------------------------------------------------- successes

check "--help" out 0 "usage: singletrain pack SRC OUT [options]" "--stripe-unit BYTES" -- \
    "$bin" pack --help
check "--help states the default layout" out 0 "min(256 MB / record, records / N')" -- \
    "$bin" pack -h

check "pack IDX (t10k, --limit 500)" out 0 \
    "packed 500 records of 1 x 28 x 28, 10 classes, into 32 stripes" "$tmp/fm" -- \
    "$bin" pack "$images" "$tmp/fm" --labels "$labels" --limit 500
expect "IDX store: 32 stripe files" [ "$(stripes "$tmp/fm")" -eq 32 ]
printf 'train=%s\n' "$tmp/fm" >"$tmp/fm.data"
check "the packed store trains" out 0 "data: 500 training records from $tmp/fm" \
    "done: 3 iterations" -- "$bin" --data "$tmp/fm.data" --iters 3 --no-test "$tmp/tiny.cfg"

check "--stripes 3 --stripe-unit 10K" out 0 "into 3 stripes of 10.0 KB units" "packed 500 records" -- \
    "$bin" pack "$images" "$tmp/fm3" --labels "$labels" --limit 500 --stripes 3 --stripe-unit 10K
expect "--stripes 3: 3 stripe files" [ "$(stripes "$tmp/fm3")" -eq 3 ]

check "repack a store in place" out 0 "packed 500 records" "into 5 stripes" -- \
    "$bin" pack "$tmp/fm3" "$tmp/fm3" --stripes 5
expect "in place: the old generation is gone" [ "$(stripes "$tmp/fm3")" -eq 5 ]
printf 'train=%s\n' "$tmp/fm3" >"$tmp/fm3.data"
check "the repacked store trains" out 0 "done: 3 iterations" -- \
    "$bin" --data "$tmp/fm3.data" --iters 3 --no-test "$tmp/tiny.cfg"

check "a data file, --split test" out 0 "packed 100 records of 1 x 28 x 28" -- \
    "$bin" pack "$tmp/fmnist.data" "$tmp/split" --split test --limit 100 --io-threads 3
check "a Darknet-style data file (comments, spaces)" out 0 "packed 50 records" -- \
    "$bin" pack "$tmp/darknet.data" "$tmp/darknet" --limit 50

check "CIFAR .bin batches" out 0 "packed 33 records of 3 x 32 x 32" -- \
    "$bin" pack "$tmp/a.bin,$tmp/b.bin" "$tmp/cifar" --stripes 4
printf 'train=%s\n' "$tmp/cifar" >"$tmp/cifar.data"
check "the CIFAR store trains" out 0 "data: 33 training records" "done: 2 iterations" -- \
    "$bin" --data "$tmp/cifar.data" --iters 2 --no-test "$tmp/cifar.cfg"

check "an image list (--names, --image-size, --channels 1)" out 0 \
    "packed 6 records of 1 x 8 x 8, 3 classes" -- \
    "$bin" pack "$tmp/list.txt" "$tmp/list" --names "$tmp/names.txt" --image-size 8,8 \
    --channels 1 --io-threads 4
printf 'train=%s\n' "$tmp/list" >"$tmp/list.data"
check "the image-list store trains" out 0 "done: 2 iterations" -- \
    "$bin" --data "$tmp/list.data" --iters 2 --no-test "$tmp/list.cfg"
check "read takes pack's source options and rules (the classes counted from --names)" out 0 \
    "$tmp/list.txt: 6 records of 8 x 8 x 1" -- \
    "$bin" read "$tmp/list.txt" --names "$tmp/names.txt" --image-size 8,8 --channels 1 \
    --batches 1

check "-q prints nothing on stdout" err 0 "" -- \
    "$bin" pack -q "$images" "$tmp/quiet" --labels "$labels" --limit 20
expect "-q: stdout is empty" [ ! -s "$tmp/stdout" ]

# ------------------------------------------------------------ usage errors

check "unknown option" err 2 "singletrain pack: unknown option '--frobnicate'" -- \
    "$bin" pack --frobnicate "$images" "$tmp/x"
check "no SRC or OUT" err 2 "singletrain pack: expected SRC and OUT, got 0 arguments" -- \
    "$bin" pack
check "no OUT" err 2 "expected SRC and OUT, got 1 argument" -- "$bin" pack "$images"
check "three arguments" err 2 "3 arguments where at most 2 are expected" -- \
    "$bin" pack "$images" "$tmp/x" "$tmp/y"
check "--stripes 0" err 2 "option --stripes: expected an integer from 1 to 1024, got '0'" -- \
    "$bin" pack "$images" "$tmp/x" --labels "$labels" --stripes 0
check "--stripe-unit 12X" err 2 "option --stripe-unit: expected a size" "got '12X'" -- \
    "$bin" pack "$images" "$tmp/x" --labels "$labels" --stripe-unit 12X
check "--stripe-unit smaller than a record" err 2 \
    "a stripe unit of 100 bytes cannot hold one record of 788 bytes" -- \
    "$bin" pack "$images" "$tmp/x" --labels "$labels" --limit 10 --stripe-unit 100
check "--split other" err 2 "option --split: expected train or test, got 'valid'" -- \
    "$bin" pack "$tmp/fmnist.data" "$tmp/x" --split valid
check "--channels 2" err 2 "option --channels: expected 1 or 3, got '2'" -- \
    "$bin" pack "$tmp/list.txt" "$tmp/x" --image-size 8,8 --channels 2
check "--image-size 8" err 2 "option --image-size: expected W,H" -- \
    "$bin" pack "$tmp/list.txt" "$tmp/x" --image-size 8
check "IDX without --labels" err 2 "$images: IDX images need their labels: give --labels FILE" -- \
    "$bin" pack "$images" "$tmp/x"
check "image list without --image-size" err 2 \
    "$tmp/nosize.txt is read as an image list: give --image-size W,H" -- \
    "$bin" pack "$tmp/nosize.txt" "$tmp/x"
check "OUT is not a store" err 2 "$tmp/precious.txt exists and is not a singletrain store" -- \
    "$bin" pack "$images" "$tmp/precious.txt" --labels "$labels" --limit 10
expect "OUT that is not a store is untouched" [ "$(cat "$tmp/precious.txt")" = "not a store" ]
# OUT a symbolic link to a store elsewhere: that store is replaced, its
# stripes beside it, and the link kept (it was replaced by a regular file).
mkdir "$tmp/elsewhere"
"$bin" pack -q "$images" "$tmp/elsewhere/s" --labels "$labels" --limit 10
ln -s elsewhere/s "$tmp/s-link"
check "OUT a link to a store" out 0 "packing into the store it names, $tmp/elsewhere/s" -- \
    "$bin" pack "$images" "$tmp/s-link" --labels "$labels" --limit 20
expect "... the link is kept" [ -L "$tmp/s-link" ]
expect "... the store it names has the new records, stripes beside it" \
    sh -c "'$bin' read '$tmp/elsewhere/s' --batches 1 | grep -q '20 records'"
expect "... and reads through the link" sh -c "'$bin' read '$tmp/s-link' --batches 1 | grep -q '20 records'"
expect "... no stripe beside the link" [ "$(stripes "$tmp/s-link")" -eq 0 ]

# ------------------------------------------------------------- bad input

check "SRC does not exist" err 2 "singletrain pack: $tmp/nope: cannot open SRC" -- \
    "$bin" pack "$tmp/nope" "$tmp/x"
check "label >= --classes" err 2 "is not below the network's 5 classes" -- \
    "$bin" pack "$images" "$tmp/x" --labels "$labels" --classes 5
head -c 5000 "$tmp/a.bin" >"$tmp/part.bin"
check "a CIFAR batch ending in a partial record" err 2 "$tmp/part.bin: truncated" -- \
    "$bin" pack "$tmp/a.bin,$tmp/part.bin" "$tmp/x"
check "a CIFAR batch that does not exist" err 2 "$tmp/nope.bin" -- \
    "$bin" pack "$tmp/a.bin,$tmp/nope.bin" "$tmp/x"
expect "failed packs leave no files behind" [ "$(ls "$tmp" | grep -c '^x')" -eq 0 ]

# Bad images in a list, packed and trained on: the corrupt one, a missing
# one, a path that names no class and one that names two.
cp "$tmp/list.txt" "$tmp/corrupt.txt"
printf '\211PNG\r\n\032\nnot a PNG' >"$tmp/img/cat_bad.png"
echo "$tmp/img/cat_bad.png" >>"$tmp/corrupt.txt"
cp "$tmp/list.txt" "$tmp/missing.txt"
echo "$tmp/img/cat_gone.png" >>"$tmp/missing.txt"
cp "$tmp/img/cat_0.pgm" "$tmp/img/bird_9.pgm"
cp "$tmp/list.txt" "$tmp/noclass.txt"
echo "$tmp/img/bird_9.pgm" >>"$tmp/noclass.txt"
cp "$tmp/img/cat_0.pgm" "$tmp/img/catdog_9.pgm"
cp "$tmp/list.txt" "$tmp/twoclass.txt"
echo "$tmp/img/catdog_9.pgm" >>"$tmp/twoclass.txt"
list_opts="--names $tmp/names.txt --image-size 8,8 --channels 1"
check "pack: a corrupt PNG" err 2 "$tmp/img/cat_bad.png: cannot decode image" -- \
    "$bin" pack "$tmp/corrupt.txt" "$tmp/x" $list_opts
check "pack: a missing image" err 2 \
    "$tmp/missing.txt:7: $tmp/img/cat_gone.png: cannot read: No such file" -- \
    "$bin" pack "$tmp/missing.txt" "$tmp/x" $list_opts
check "pack: a path naming no class" err 2 \
    "$tmp/noclass.txt:7: $tmp/img/bird_9.pgm: contains none of the 3 class names" -- \
    "$bin" pack "$tmp/noclass.txt" "$tmp/x" $list_opts
check "pack: a path naming two classes" err 2 \
    "$tmp/twoclass.txt:7: $tmp/img/catdog_9.pgm: contains both class \"cat\" and class \"dog\"" \
    -- "$bin" pack "$tmp/twoclass.txt" "$tmp/x" $list_opts
expect "failed image-list packs leave no files behind" [ "$(ls "$tmp" | grep -c '^x')" -eq 0 ]
check "pack --skip-bad-images counts the corrupt PNG" err 0 "1 unreadable images" -- \
    "$bin" pack "$tmp/corrupt.txt" "$tmp/skipped" $list_opts --skip-bad-images
printf 'classes=3\ntrain=%s\nnames=%s\n' "$tmp/corrupt.txt" "$tmp/names.txt" >"$tmp/corrupt.data"
check "training on a list with a corrupt PNG" err 2 "$tmp/img/cat_bad.png: cannot decode image" \
    -- "$bin" --data "$tmp/corrupt.data" --iters 4 --batch 7 --no-test "$tmp/list.cfg"
check "training with --skip-bad-images" err 0 "1 unreadable images were skipped" -- \
    "$bin" --data "$tmp/corrupt.data" --iters 4 --batch 7 --no-test --skip-bad-images \
    "$tmp/list.cfg"
printf 'classes=3\ntrain=%s\nnames=%s\n' "$tmp/twoclass.txt" "$tmp/names.txt" >"$tmp/two.data"
check "training on a list naming two classes" err 2 "$tmp/two.data: train=: " \
    "contains both class" -- "$bin" --data "$tmp/two.data" --iters 1 --no-test "$tmp/list.cfg"

# A damaged store used as training data.
cp "$tmp/fm" "$tmp/fm.bak"
cp "$tmp/fm.bak" "$tmp/fm"
printf 'XTSTORE1' | dd of="$tmp/fm" bs=1 conv=notrunc 2>/dev/null
check "a store with the wrong magic" err 2 "$tmp/fm: not a data file singletrain knows" -- \
    "$bin" --data "$tmp/fm.data" --iters 1 --no-test "$tmp/tiny.cfg"
cp "$tmp/fm.bak" "$tmp/fm"
printf '\011' | dd of="$tmp/fm" bs=1 seek=8 conv=notrunc 2>/dev/null
check "a store of another format version" err 2 "$tmp/fm: store format version 9, expected 1" \
    -- "$bin" --data "$tmp/fm.data" --iters 1 --no-test "$tmp/tiny.cfg"
head -c 100 "$tmp/fm.bak" >"$tmp/fm"
check "a truncated store index" err 2 "$tmp/fm: truncated index" -- \
    "$bin" --data "$tmp/fm.data" --iters 1 --no-test "$tmp/tiny.cfg"
cp "$tmp/fm.bak" "$tmp/fm"
first=$(ls "$tmp"/fm.*.000)
printf 'X' | dd of="$first" bs=1 seek=10 conv=notrunc 2>/dev/null
check "a corrupt stripe" err 2 "$tmp/fm: block 0 in stripe 0: checksum mismatch" -- \
    "$bin" --data "$tmp/fm.data" --iters 1 --no-test "$tmp/tiny.cfg"
rm "$first"
check "a missing stripe" err 2 "$tmp/fm: missing stripe 0 of 32" -- \
    "$bin" --data "$tmp/fm.data" --iters 1 --no-test "$tmp/tiny.cfg"

finish test_pack.sh
