#!/bin/sh
# A shortcut adds its inputs element by element in the layout they share
# (st_layer_ops.shares_layout): with oneDNN's nhwc convolutions around it
# (--conv-impl nhwc) the residual network of fixtures/resnet-bn.cfg (4
# channels) runs with no reorder of a 12x4x8x8 activation but one a
# iteration (the shortcut's output into global average pooling), where the
# shortcut's inputs were once reordered to plain and back (18 in 3
# iterations); with blocked convolutions (4 channels padded to 16: not
# the tensor's values alone) the shortcut asks for its inputs plain and
# the replica is set up again so, as before. Either way the weights after
# 3 iterations are the reference backend's to 1e-5 (relative, tensor by
# tensor: tools/snapdiff; the backends sum in other orders), and the
# run with nhwc gives the same bytes twice.
# usage: sh tests/e2e/test_shortcut_layout.sh PATH_TO_SINGLETRAIN
set -u
. "$(dirname "$0")/../lib/check.sh"
suite_start "$@"
snapdiff=$(dirname "$bin")/tools/snapdiff
[ -x "$snapdiff" ] || { echo "test_shortcut_layout.sh: $snapdiff is not built (make check-tests)" >&2; exit 2; }
cfg=$fixtures/resnet-bn.cfg
common="-q -t 1 --data synthetic --train-images 120 --iters 3 --no-test --seed 3"

check "the reference backend" err 0 "" -- \
    "$bin" $common --backend ref --snapshot-dir "$tmp/ref" "$cfg"
# reorders DIR: oneDNN's reorders of a 12x4x8x8 activation in DIR's run
reorders() {
    grep '^onednn_verbose,exec,cpu,reorder' "$1/verbose" | grep -c ',12x4x8x8'
}
for impl in nhwc blocked; do
    mkdir -p "$tmp/$impl"
    ONEDNN_VERBOSE=1 "$bin" $common --conv-impl $impl --snapshot-dir "$tmp/$impl" "$cfg" \
        >"$tmp/$impl/verbose" 2>"$tmp/$impl/err"
    expect "--conv-impl $impl: the run ends well" [ $? -eq 0 ] && [ ! -s "$tmp/$impl/err" ]
    check "--conv-impl $impl: the reference backend's weights to 1e-5" out 0 \
        "largest relative difference" -- \
        "$snapdiff" "$cfg" "$tmp/ref/resnet-bn_final.snap" "$tmp/$impl/resnet-bn_final.snap" 1e-5
done
n=$(reorders "$tmp/nhwc")
expect "nhwc: the shortcut adds in nhwc, one activation reorder an iteration ($n in 3)" \
    [ "$n" -eq 3 ]
n=$(reorders "$tmp/blocked")
expect "blocked, padded: the shortcut's inputs plain, reordered around it ($n in 3)" \
    [ "$n" -gt 3 ]
check "nhwc again" err 0 "" -- \
    "$bin" $common --conv-impl nhwc --snapshot-dir "$tmp/again" "$cfg"
expect "nhwc twice: the same bytes" \
    cmp -s "$tmp/nhwc/resnet-bn_final.snap" "$tmp/again/resnet-bn_final.snap"

finish test_shortcut_layout.sh
