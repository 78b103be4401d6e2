#!/bin/sh
# --trace under mpirun: 2 ranks x 2 workers of LeNet-5 give one file, one
# process (pid) per rank, merged by rank 0, read back by
# tests/lib/trace_check.py (the checks of tests/e2e/test_trace.sh on each
# rank's tracks, and: the all-reduces carry their bytes and algorithm, and
# the ranks' clocks, aligned by a barrier at the run's start, put each
# iteration's all-reduces within 10 ms of each other on both ranks); with
# --overlap, the communication thread's track and its buckets' all-reduces.
# Only rank 0 writes: nothing is left beside the file. A rank without
# --trace (which every rank takes part in) stops every rank at set-up.
# Fails, naming the package (mpich), when mpirun is missing.
# usage: sh tests/mpi/test_trace_ranks.sh PATH_TO_SINGLETRAIN
set -u
. "$(dirname "$0")/../lib/check.sh"
suite_start "$@"
require_cmd mpirun mpich
require_cmd python3 python3
root=$(cd "$(dirname "$0")/../.." && pwd)
cfg=$root/data/lenet.cfg
checker=$root/tests/lib/trace_check.py
inputs="--data synthetic --train-images 2000 --no-test --conv-impl nhwc -t 2 -b 32 --iters 10"

mkdir "$tmp/run" && cd "$tmp/run" || exit 2
check "mpirun -np 2 --trace" out 0 "trace: r.json written" -- \
    mpirun -np 2 "$bin" $inputs --trace r.json --trace-iters 3:8 "$cfg"
check "two ranks in one file: tracks, nesting, phases, all-reduces, clocks" out 0 "" -- \
    python3 "$checker" r.json --ranks 2 --workers 2 --iters 3:8 --allreduce
# the communication thread, woken as each bucket is ready, takes the core
# from the workers between their layers on a busy host: layer coverage is
# not checked
check "mpirun -np 2 --overlap --trace" out 0 "trace: o.json written" -- \
    mpirun -np 2 "$bin" $inputs --overlap --trace o.json --trace-iters 3:8 "$cfg"
check "--overlap: the communication thread's buckets" out 0 "" -- \
    python3 "$checker" o.json --ranks 2 --workers 2 --iters 3:8 --allreduce --comm \
    --layers-cover 0
check "--trace on rank 0 alone: every rank refuses" err 2 \
    "differs from rank 0 in --trace (given or not: every rank takes part in the timeline)" -- \
    mpirun -np 2 sh -c 'if [ "$PMI_RANK" = 0 ]; then set -- --trace x.json "$@"; fi; exec "$0" "$@"' \
    "$bin" $inputs "$cfg"
expect "only the two traces are left" [ "$(ls)" = "o.json
r.json" ]
finish test_trace_ranks.sh
