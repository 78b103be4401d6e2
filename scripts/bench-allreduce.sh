#!/bin/sh
# The all-reduce algorithms against each other on this machine: for each
# rank count P, runs tests/mpi/bench_allreduce under mpirun with supernodes
# of Q ranks, once with full bandwidth between supernodes and once with
# crossing messages paced to F of it, and prints one table: per algorithm
# and message size, the median and fastest time of the repetitions (each
# the slowest rank's), the bandwidth of the median, and the bytes all ranks
# sent and sent across supernodes per all-reduce. When P exceeds the cores,
# waiting ranks sleep between polls (--idle-sleep-us) instead of spinning.
# usage: scripts/bench-allreduce.sh [BUILD_DIR]     (default: build)
# environment: RANKS ("2 4 8"), SIZES (4K,64K,1M,16M,64M), REPS (5; five
#              times as many under 1 MB), Q (2), F (0.25), IDLE_SLEEP_US (20)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
build=${1:-$root/build}
bin=$build/tests/mpi/bench_allreduce
ranks=${RANKS:-2 4 8}
sizes=${SIZES:-4K,64K,1M,16M,64M}
reps=${REPS:-5}
q=${Q:-2}
f=${F:-0.25}
idle=${IDLE_SLEEP_US:-20}
command -v mpirun >/dev/null 2>&1 || {
    echo "bench-allreduce.sh: mpirun is not installed" >&2
    exit 2
}
[ -x "$bin" ] || {
    echo "bench-allreduce.sh: $bin is missing: build it with make $bin (mk/mpi.mk)" >&2
    exit 2
}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
cores=$(nproc 2>/dev/null || echo 1)
echo "# $cores cores, load average $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo unknown)"
echo "# sent_all, crossing_all: bytes over all ranks in one all-reduce"
header=
for p in $ranks; do
    sleep_us=0
    [ "$p" -gt "$cores" ] && sleep_us=$idle
    for bandwidth in 0 "$f"; do
        timeout 900 mpirun -np "$p" "$bin" --sizes "$sizes" --reps "$reps" \
            --supernode-size "$q" --sim-cross-bandwidth "$bandwidth" \
            --idle-sleep-us "$sleep_us" >"$out" || {
            echo "bench-allreduce.sh: mpirun -np $p bench_allreduce (F=$bandwidth) failed" >&2
            exit 1
        }
        # One column header for the whole table.
        while IFS= read -r line; do
            case $line in
            "P "*)
                [ -n "$header" ] && continue
                header=1
                ;;
            esac
            echo "$line"
        done <"$out"
    done
done
