#!/bin/sh
# Emulation speed of the SW26010 core group (include/cpe/cpe.h): GEMM
# 256x256x256 float on the emulated 64 CPEs against a plain triple loop on
# the host, best of 3 each, with the launch's counters and predicted SW26010
# time. The ratio is the emulator's overhead (context switches at every
# register-communication block, DMA copies), not a prediction.
# usage: [TEST_CPE=build/tests/test_cpe] scripts/bench-cpe.sh
#   TEST_CPE=build-cpe/tests/test_cpe scripts/bench-cpe.sh
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
bin=${TEST_CPE:-$root/build/tests/test_cpe}
[ -x "$bin" ] || { echo "bench-cpe.sh: $bin is missing: run make $bin first" >&2; exit 2; }
exec "$bin" --bench
