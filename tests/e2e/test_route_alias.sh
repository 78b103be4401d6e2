#!/bin/sh
# A [route] of one layer shares its input's output and gradient (the
# replica's alias, st_layer_ops.copies_input) instead of copying them:
# LeNet-5 with an identity [route] after its first pooling trains to the
# same bits as LeNet-5 itself (the weights after 20 iterations with 2
# workers, exported to Darknet's .weights, byte for byte: the route's
# consumer adds its gradient where the pooling's consumer did), and the
# route adds no activation memory (--dry-run's memory line). On the
# reference backend, whose tensors are all plain (with oneDNN the route's
# plain input changes the pooling's layout, and so the kernels).
# usage: sh tests/e2e/test_route_alias.sh PATH_TO_SINGLETRAIN
set -u
. "$(dirname "$0")/../lib/check.sh"
suite_start "$@"
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$tmp" || exit 2
awk '{ print } /^\[maxpool\]/ { m = 1 } m && /^$/ && !d { print "[route]\nlayers=-1\n"; d = 1 }' \
    "$root/data/lenet.cfg" >route.cfg
cp "$root/data/lenet.cfg" plain.cfg
expect "route.cfg has one [route] more than lenet.cfg" \
    [ "$(grep -c '^\[route\]' route.cfg)" -eq 1 -a "$(grep -c '^\[route\]' plain.cfg)" -eq 0 ]
run="--backend ref -t 2 -b 32 --iters 20 --train-images 2000 --no-test --seed 5"
for net in plain route; do
    check "$net: train" err 0 "" -- "$bin" -q $run --snapshot-dir "$net" "$net.cfg"
    check "$net: export" err 0 "" -- \
        "$bin" export "$net.cfg" "$net/${net}_final.snap" "$net.weights"
    check "$net: dry run" out 0 "activations" -- "$bin" --dry-run $run "$net.cfg"
    sed -n 's/.*\(activations [0-9.]* MB each\).*/\1/p' "$tmp/stdout" >"$net.mem"
done
expect "the same weights to the byte" cmp plain.weights route.weights
expect "the same activation memory ($(cat plain.mem) and $(cat route.mem))" \
    sh -c '[ -s plain.mem ] && cmp -s plain.mem route.mem'
finish test_route_alias.sh
