#!/bin/sh
# Training speed of one network: images/s, GFLOP/s (3 x the forward flops of
# its convolutions and inner products) and per-layer times (forward,
# backward-data, backward-weights) after a warm-up, without test phases.
# usage: scripts/bench.sh [singletrain options] NET.cfg
#   scripts/bench.sh -b 128 --intra 2 data/cifar-alexnet.cfg
#   ITERS=50 WARMUP=5 scripts/bench.sh -t 2 data/lenet.cfg
#   singletrain-bench -t 2 lenet.cfg   (installed: NET found as singletrain finds it)
# Networks without data keys run on synthetic data.
set -eu
here=$(cd "$(dirname "$(readlink -f "$0")")" && pwd)
. "$here/paths.sh"
[ -x "$bin" ] || { echo "bench.sh: $bin is missing: run make first" >&2; exit 2; }
exec "$bin" --iters "${ITERS:-30}" --warmup "${WARMUP:-3}" --no-test --profile \
    --log-every 1000000 "$@"
