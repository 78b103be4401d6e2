#!/bin/sh
# The cpe backend (emulated SW26010 core group) trains LeNet-5 on
# Fashion-MNIST for 50 iterations (batch 32) with a loss that follows the
# reference backend's within 1e-3 relative at every iteration, and prints
# its predicted per-layer table. (At batch 8 the two drift apart by a few
# percent after 30 iterations: the runs agree to 4 digits for 20
# iterations, then small batches amplify the different rounding of the
# GEMM's sums.)
# usage: sh tests/test_cpe_backend.sh PATH_TO_SINGLETRAIN
set -u
. "$(dirname "$0")/check.sh"
suite_start "$@"
root=$(cd "$(dirname "$0")/.." && pwd)

cd "$root" || exit 2

run="-t 1 -b 32 --iters 50 --train-images 2000 --no-test --log-every 1 data/lenet.cfg"
check "reference backend" out 0 "done: 50 iterations" -- "$bin" --backend ref $run
sed -n 's/^iter \([0-9]*\)\/50 .* loss \([0-9.]*\) .*/\1 \2/p' "$tmp/stdout" >"$tmp/ref"
check "cpe backend" out 0 "done: 50 iterations" "one SW26010 (4 core groups" -- \
    "$bin" --backend cpe $run
sed -n 's/^iter \([0-9]*\)\/50 .* loss \([0-9.]*\) .*/\1 \2/p' "$tmp/stdout" >"$tmp/cpe"
expect "50 losses from each" [ "$(cat "$tmp/ref" "$tmp/cpe" | wc -l)" -eq 100 -a "$(wc -l <"$tmp/ref")" -eq 50 ]
worst=$(paste "$tmp/ref" "$tmp/cpe" | awk 'BEGIN { w = 0 } { d = $2 - $4; if (d < 0) d = -d;
    r = d / $2; if (r > w) w = r } END { printf "%.2e", w }')
echo "     largest relative loss difference over 50 iterations: $worst"
expect "cpe follows ref's loss within 1e-3 relative ($worst)" \
    awk -v w="$worst" 'BEGIN { exit !(w <= 1e-3) }'
expect "the table names each CPE layer's strategy" grep -q "conv 5x5 20->50 8x8 .*explicit (im2col + GEMM)" "$tmp/stdout"

finish test_cpe_backend.sh
