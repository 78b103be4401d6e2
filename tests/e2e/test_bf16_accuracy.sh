#!/bin/sh
# bf16's accuracy on every host (issue 37): the reference backend, which
# rounds the operands of the convolutions and inner products to bf16 in
# plain C and sums their products in fp32 (the oracle of oneDNN's bf16),
# trains LeNet-5 for one epoch on Fashion-MNIST in bf16 and in fp32 from
# the same seed (the same initial weights and data order: the runs differ
# only in that rounding), and the two final test accuracies are within 1
# point, the issue's bound. Measured on this project's hosts: 87.34% and
# 87.30% with -t 2, 87.00% and 87.37% with -t 1; one epoch's accuracy
# varies by a few tenths of a point with the seed, so 1 point leaves room
# for the rounding's own drift and still fails a bf16 that trains worse.
# Both runs must also have learned (over 80% after the epoch), so two
# equally broken runs do not pass.
# usage: sh tests/e2e/test_bf16_accuracy.sh PATH_TO_SINGLETRAIN
set -u
. "$(dirname "$0")/../lib/check.sh"
suite_start "$@"
[ -r /usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz ] || {
    echo "FAIL test_bf16_accuracy.sh: no Fashion-MNIST in /usr/share/datasets/fashion-mnist (make run)"
    exit 1
}
net=$(cd "$(dirname "$0")/../../data" && pwd)/lenet.cfg
cd "$tmp" || exit 2
for p in bf16 fp32; do
    check "ref $p: LeNet-5, one epoch on Fashion-MNIST" out 0 "test accuracy: final" -- \
        "$bin" --backend ref --precision "$p" --epochs 1 -t 2 --seed 1 "$net"
    cp "$tmp/stdout" "$p.log"
done
acc() { sed -n 's/^test accuracy: final \([0-9.]*\)%.*/\1/p' "$1.log"; }
bf=$(acc bf16)
fp=$(acc fp32)
echo "ref LeNet-5 one epoch: bf16 $bf%, fp32 $fp%"
expect "both learned (over 80%)" awk -v a="$bf" -v b="$fp" 'BEGIN { exit !(a > 80 && b > 80) }'
expect "bf16's final accuracy within 1 point of fp32's" \
    awk -v a="$bf" -v b="$fp" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 1) }'
finish "$(basename "$0")"
