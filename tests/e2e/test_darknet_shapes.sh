#!/bin/sh
# Layer shapes against the real Darknet (Debian's darknet package): for every
# classifier cfg Darknet ships, plus ours and the anchors', the layer table
# singletrain prints (--dry-run) must equal the one darknet prints when it
# loads the same cfg. Darknet prints its table before it looks for a weights
# file, so `darknet partial CFG /nonexistent OUT 0` is enough; its copy of
# the cfg gets batch=1 so it does not allocate a full batch. Darknet prints
# an [lrn] layer as "Local Response Normalization Layer: W x H x C image, S
# size" (after a "kappa: Using default" line when the cfg has no kappa=);
# darknet_table rewrites it in singletrain's columns, keeping every figure,
# so a difference in its shape still fails.
# Fails, naming the package (darknet), without the darknet binary.
# usage: sh tests/e2e/test_darknet_shapes.sh PATH_TO_SINGLETRAIN
set -u
bin=$1
. "$(dirname "$0")/../lib/check.sh"
require_cmd darknet darknet
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
dn=/usr/share/darknet/cfg
cfgs="$dn/alexnet.cfg $dn/cifar.cfg $dn/cifar.test.cfg $dn/darknet.cfg $dn/darknet19.cfg
      $dn/darknet19_448.cfg $dn/darknet53.cfg $dn/darknet53_448.cfg $dn/densenet201.cfg
      $dn/extraction.cfg $dn/extraction.conv.cfg $dn/extraction22k.cfg $dn/jnet-conv.cfg
      $dn/resnet18.cfg $dn/resnet34.cfg $dn/resnet50.cfg $dn/resnet101.cfg $dn/resnet152.cfg
      $dn/resnext50.cfg $dn/resnext101-32x4d.cfg $dn/resnext152-32x4d.cfg $dn/tiny.cfg
      $dn/vgg-16.cfg $dn/vgg-conv.cfg data/lenet.cfg data/cifar-alexnet.cfg data/alexnet.cfg
      data/alexnet-bn.cfg data/vgg19.cfg data/resnet50.cfg data/googlenet.cfg
      tests/fixtures/anchors/lenet5.cfg tests/fixtures/anchors/cifar_alexnet.cfg
      tests/fixtures/anchors/alexnet227.cfg"
# darknet_table: darknet's output on stdin, its layer lines on stdout
darknet_table() {
    awk '/^ +[0-9]+ kappa: Using default/ { lrn = $1; next }
         /^( +[0-9]+ )?Local Response Normalization Layer: / {
             if ($1 ~ /^[0-9]+$/) { lrn = $1; sub(/^ +[0-9]+ /, "") }
             printf "%5d lrn          size %d     %4d x%4d x%4d   ->  %4d x%4d x%4d\n",
                    lrn, $11, $5, $7, $9, $5, $7, $9
             next }
         { print }' | grep -E '^ +[0-9]+ '
}
failed=0
checked=0
for cfg in $cfgs; do
    [ -f "$cfg" ] || { echo "FAIL: $cfg is missing"; failed=$((failed + 1)); continue; }
    name=$(basename "$cfg")
    sed 's/^batch *=.*/batch=1/; s/^subdivisions *=.*/subdivisions=1/' "$cfg" >"$tmp/$name"
    (cd "$tmp" && timeout 120 darknet partial "$name" /nonexistent out.weights 0 2>&1) |
        darknet_table >"$tmp/theirs"
    "$bin" --dry-run "$cfg" 2>"$tmp/err" | grep -E '^ +[0-9]+ ' >"$tmp/ours"
    checked=$((checked + 1))
    if [ ! -s "$tmp/theirs" ]; then
        echo "FAIL $name: darknet printed no layer table"
        failed=$((failed + 1))
    elif ! cmp -s "$tmp/ours" "$tmp/theirs"; then
        echo "FAIL $name: layer tables differ (< singletrain, > darknet)"
        diff "$tmp/ours" "$tmp/theirs" | head -20
        sed 's/^/  stderr: /' "$tmp/err" | head -5
        failed=$((failed + 1))
    else
        echo "ok   $name ($(wc -l <"$tmp/ours") layers)"
    fi
done
echo "test_darknet_shapes.sh: $((checked - failed)) of $checked cfgs give Darknet's layer table"
[ "$failed" -eq 0 ]
