#!/bin/sh
# The memory estimate is honest. Each network of data/ that fits this
# machine runs at small settings on synthetic data at -t 1, 2 and 4 (the
# ImageNet networks at -t 1 and 4), and
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
# run turn into a warning. In bf16, the weights' shared bf16 copy is
# counted (see below). And image decoding: large PNGs in an image list,
# counted per reader, and out of memory while decoding (see below).
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
    for t in $threads; do
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

threads="1 2 4"
estimate lenet 16 2 --test-images 16
estimate cifar-alexnet 8 2 --test-images 8
estimate cifar-alexnet-bn 8 2 --test-images 8
estimate cifar-alexnet-sigmoid 8 2 --test-images 8
threads="1 4" # the ImageNet networks: the two ends (a run of VGG-16 takes seconds)
estimate alexnet 4 1 --no-test --conv-impl blocked
estimate alexnet-bn 4 1 --no-test --conv-impl blocked
estimate googlenet 4 1 --no-test --conv-impl blocked
estimate resnet50 4 1 --no-test --conv-impl blocked
estimate vgg16 4 1 --no-test --conv-impl blocked

# ------------------------------------------------------------------ bf16

# --precision bf16: the weights' bf16 copy the workers share
# (parallel/bf16_weights.c) is counted ("bf16 weights N MB", half the
# weights'), the kernels' bf16 copies of their operands are in the
# activations (their workspace and scratch): the estimates stay within 20%
# of the peak. The reference backend everywhere (LeNet-5); oneDNN where
# its ISA has bf16, on AlexNet, whose fully connected layers' weights (the
# copy 117 MB) once had a bf16 copy in each worker's workspace.
bf16_line() { # NAME: the last run's memory line counts the bf16 copy, half the weights
    w=$(sed -n 's/^memory: weights \([0-9.]*\) MB, bf16 weights \([0-9.]*\) MB.*/\1 \2/p' \
        "$tmp/run")
    expect "$1: the memory line counts the weights' bf16 copy, half the weights (${w:-none})" \
        awk -v w="$w" 'BEGIN { n = split(w, v, " "); exit !(n == 2 && v[1] > 0 &&
                                 v[2] >= v[1] / 2 - 0.1 && v[2] <= v[1] / 2 + 0.1) }'
}
estimate lenet 16 2 --test-images 16 --backend ref --precision bf16
bf16_line "lenet, ref bf16"
"$bin" --dry-run --backend dnnl --precision bf16 "$data/lenet.cfg" >/dev/null 2>"$tmp/caps"
if [ $? -eq 2 ] && grep -q "has no bf16 on this CPU" "$tmp/caps"; then
    echo "SKIP: no bf16 on this CPU (ISA $(sed -n 's/.*(ISA \([a-z0-9_]*\).*/\1/p' "$tmp/caps")):" \
        "the dnnl bf16 estimates (the ref ones above ran)"
else
    estimate alexnet 4 1 --no-test --conv-impl blocked --precision bf16
    bf16_line "alexnet, dnnl bf16"
fi

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

# ---------------------------------------------------------- image decoding

# A 16 x 16 network with one connected layer on an image list of 4 large
# flat PNGs and 4 small ones: the decodes dominate (the estimate said 18.9
# MB against a peak of 170 MB with one reader, 616 MB with four, on 5000 x
# 5000). The largest image's decode, read from the headers at set-up, is
# counted per reader; with one reader the estimate is within 20% of the
# peak, with four never below it (how many decodes overlap depends on the
# scheduling). Then the refusals: too many readers for the address space
# (exit 2, before any decode); and with --force, a decode that cannot fit
# even alone: exit 1 naming the image, also with --skip-bad-images (out of
# memory was reported as a corrupt image, "no SOI", and skipped).
make_images=$(dirname "$bin")/tools/make_images
[ -x "$make_images" ] || { echo "test_memory_estimate.sh: build $make_images first" >&2; exit 2; }
mkdir "$tmp/img"
printf '[net]\nbatch=8\nheight=16\nwidth=16\nchannels=3\nlearning_rate=0.01\n\n[connected]\noutput=2\nactivation=linear\n\n[softmax]\n' \
    >"$tmp/img/im.cfg"
# list SIDE: the list of 4 SIDE x SIDE images and 4 small ones, and its data file
list() {
    for i in 1 2 3 4; do
        [ -e "$tmp/img/big$1-$i.png" ] || "$make_images" flat "$1" "$1" "$tmp/img/big$1-$i.png"
        [ -e "$tmp/img/small$i.png" ] || "$make_images" flat 20 20 "$tmp/img/small$i.png"
        echo "$tmp/img/big$1-$i.png $((i % 2))"
        echo "$tmp/img/small$i.png $((i % 2))"
    done >"$tmp/img/list$1.txt"
    printf 'classes=2\ntrain=%s\n' "$tmp/img/list$1.txt" >"$tmp/img/img$1.data"
}
list 2500
list 5000
list 20
for io in 1 4; do
    $limit "$bin" -t 1 -b 8 --iters 3 --no-test --io-threads $io --data "$tmp/img/img2500.data" \
        "$tmp/img/im.cfg" >"$tmp/run" 2>&1
    rc=$?
    est=$(sed -n 's/^memory: .*; \([0-9.]*\) MB in all$/\1/p' "$tmp/run")
    peak=$(sed -n 's/^done: .*peak memory \([0-9.]*\) MB$/\1/p' "$tmp/run")
    printf '     %-40s estimate %8s MB, peak %8s MB\n' "2500 x 2500 PNGs, --io-threads $io" \
        "${est:-?}" "${peak:-?}"
    expect "2500 x 2500 PNGs, --io-threads $io: the run ends well (exit $rc)" \
        [ "$rc" -eq 0 -a -n "$est" -a -n "$peak" ]
    expect "... the memory line counts the decodes of the largest image, from the headers" \
        grep -q -E "image decoding [0-9.]+ MB \($io readers? x 37\.[0-9] MB: the largest image, 2500 x 2500, of the headers read at set-up\)" \
        "$tmp/run"
    if [ $io -eq 1 ]; then
        expect "... the estimate is within 20% of the peak" \
            awk -v e="${est:-0}" -v p="${peak:-0}" 'BEGIN { exit !(p > 0 && e >= 0.8 * p && e <= 1.2 * p) }'
    else
        expect "... the estimate is not below the peak" \
            awk -v e="${est:-0}" -v p="${peak:-0}" 'BEGIN { exit !(p > 0 && e >= p) }'
    fi
done
check "8 readers of 5000 x 5000 PNGs in 1 GB of address space: refused before decoding" err 2 \
    "image decoding 1206 MB" "give fewer readers decoding at once (--io-threads, now 8)" -- \
    sh -c "ulimit -v 1000000; exec '$bin' -t 1 -b 8 --iters 3 --no-test --io-threads 8 \
    --data '$tmp/img/img5000.data' '$tmp/img/im.cfg'"
# The address space the run takes with its threads started (small images
# alone), then 120 MB more: a 5000 x 5000 decode (151 MB) cannot fit.
"$bin" -t 1 -b 8 --iters 1000000 --log-every 1 --no-test --io-threads 4 \
    --data "$tmp/img/img20.data" "$tmp/img/im.cfg" >"$tmp/vm.out" 2>&1 &
pid=$!
wait_for "$tmp/vm.out" "iter 2/"
vm=$(sed -n 's/^VmSize:[^0-9]*\([0-9]*\) kB$/\1/p' /proc/$pid/status)
kill -TERM $pid
wait $pid
for skip in "" --skip-bad-images; do
    check "with --force, a decode that cannot fit alone${skip:+, $skip}: exit 1 naming it" err 1 \
        "$tmp/img/list5000.txt:" \
        ".png: out of memory decoding this 5000 x 5000 image: it takes about 151 MB at once" -- \
        sh -c "ulimit -v $((vm + 122880)); exec '$bin' -t 1 -b 8 --iters 3 --no-test --force \
        --io-threads 4 $skip --data '$tmp/img/img5000.data' '$tmp/img/im.cfg'"
    expect "... not skipped as unreadable" sh -c "! grep -q 'skipped' '$tmp/stderr'"
done

finish test_memory_estimate.sh
