#!/bin/sh
# The memory estimate is honest. Each network of data/ that fits this
# machine runs at small settings on synthetic data at -t 1, 2 and 4, and
# the estimate it logs before allocating ("memory: ...; N MB in all") and
# the one --dry-run prints must both be within 20% of the peak resident
# memory the run reports (VmHWM, "done: ... peak memory N MB"). LeNet-5 and
# the cifar-alexnet variants measure their convolutions (--conv-impl auto,
# the default: the run plans them measured, the dry run unmeasured); the
# ImageNet networks force one implementation (blocked), as measuring takes
# 10-40 s on them, and run one iteration without a test phase (the batch
# ring's second slot, a few MB, is then counted and never touched). VGG-19
# is VGG-16 with three more convolutions: only VGG-16 runs. The runs have
# --force, so that a machine short of memory at the time (VGG-16 at -t 4
# takes 4.5 GB) does not refuse them. Also: more
# threads than cores draw one warning with the numbers; a run too large is
# refused (tests/e2e/catalogue.tsv has the cases), which --force and a dry
# run turn into a warning.
# usage: sh tests/e2e/test_memory_estimate.sh PATH_TO_SINGLETRAIN
set -u
. "$(dirname "$0")/../lib/check.sh"
suite_start "$@"
data=$(cd "$(dirname "$0")/../../data" && pwd)
unset MPI_LOCALNRANKS

# One run and its dry run; NET BATCH ITERS EXTRA...
estimate() {
    net=$1 b=$2 iters=$3
    shift 3
    for t in 1 2 4; do
        args="-t $t -b $b --data synthetic --train-images $((2 * b)) --force $*"
        name="$net -t $t -b $b${*:+ $*}"
        $limit "$bin" $args --iters "$iters" "$data/$net.cfg" >"$tmp/run" 2>&1
        rc=$?
        $limit "$bin" $args --dry-run "$data/$net.cfg" >"$tmp/dry" 2>&1
        drc=$?
        est=$(sed -n 's/^memory: .*; \([0-9.]*\) MB in all$/\1/p' "$tmp/run")
        dry=$(sed -n 's/^memory: .*; \([0-9.]*\) MB in all$/\1/p' "$tmp/dry")
        peak=$(sed -n 's/^done: .*peak memory \([0-9.]*\) MB$/\1/p' "$tmp/run")
        printf '     %-40s estimate %8s MB, dry run %8s MB, peak %8s MB\n' "$name" \
            "${est:-?}" "${dry:-?}" "${peak:-?}"
        expect "$name: the run and the dry run end well (exit $rc, $drc)" \
            [ "$rc" -eq 0 -a "$drc" -eq 0 -a -n "$est" -a -n "$dry" -a -n "$peak" ]
        [ "$rc" -eq 0 ] || sed -n '1,5s/^/       | /p' "$tmp/run"
        expect "$name: the estimate is within 20% of the peak" \
            awk -v e="${est:-0}" -v p="${peak:-0}" 'BEGIN { exit !(p > 0 && e >= 0.8 * p && e <= 1.2 * p) }'
        expect "$name: the dry run's is within 20% of the peak" \
            awk -v e="${dry:-0}" -v p="${peak:-0}" 'BEGIN { exit !(p > 0 && e >= 0.8 * p && e <= 1.2 * p) }'
    done
}

estimate lenet 16 2 --test-images 16
estimate cifar-alexnet 8 2 --test-images 8
estimate cifar-alexnet-bn 8 2 --test-images 8
estimate cifar-alexnet-sigmoid 8 2 --test-images 8
estimate alexnet 4 1 --no-test --conv-impl blocked
estimate alexnet-bn 4 1 --no-test --conv-impl blocked
estimate googlenet 4 1 --no-test --conv-impl blocked
estimate resnet50 4 1 --no-test --conv-impl blocked
estimate vgg16 4 1 --no-test --conv-impl blocked

# ------------------------------------------------ threads against cores

cores=$(nproc)
many=$((2 * cores))
check "-t $many on $cores cores: one warning with the numbers" err 0 \
    "warning: $many workers x 1 intra-op thread = $many threads on $cores usable core" -- \
    "$bin" --dry-run -t $many -b $many --data synthetic "$data/lenet.cfg"
expect "the warning is given once" [ "$(grep -c 'intra-op thread' "$tmp/stderr")" -eq 1 ]
check "-t $cores: no warning" err 0 "" -- "$bin" --dry-run -t "$cores" -b "$many" --data synthetic "$data/lenet.cfg"
expect "no warning at one thread per core" [ ! -s "$tmp/stderr" ]

# ------------------------------------------------------ refusal and --force

# 400 layers of 64 x 64 x 16 at 8192 images a worker: about 1.7 TB.
{
    printf '[net]\nbatch=8\nheight=64\nwidth=64\nchannels=1\n'
    for i in $(seq 400); do printf '[convolutional]\nfilters=16\nsize=1\nactivation=relu\n'; done
    printf '[connected]\noutput=3\n[softmax]\n'
} >"$tmp/deep.cfg"
check "a run that cannot fit is refused" err 2 "not enough memory: the run would take about" \
    "give a smaller batch (-b, now 16384" -- \
    "$bin" -t 2 -b 16384 --data synthetic --iters 1 --no-test "$tmp/deep.cfg"
check "--dry-run says the run would be refused, and ends well" err 0 \
    "warning: the run would be refused: not enough memory: it would take about" -- \
    "$bin" --dry-run -t 2 -b 16384 --data synthetic "$tmp/deep.cfg"
check "--dry-run --force says the run would go on" err 0 "it would go on (--force)" -- \
    "$bin" --dry-run --force -t 2 -b 16384 --data synthetic "$tmp/deep.cfg"
check "--dry-run prints the limit" out 0 "memory limit: " "MB in all" -- \
    "$bin" --dry-run --data synthetic "$data/lenet.cfg"

finish test_memory_estimate.sh
