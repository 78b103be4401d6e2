#!/bin/sh
# The input pipeline's figures: read throughput of a striped store with 1, 2
# and 4 reader threads, stb_image decode time per image, and the share of
# training time the workers wait for data (LeNet-5 at 2 workers on the packed
# Fashion-MNIST store; cifar-alexnet on a packed image list of PNGs), with
# the same runs on synthetic data (generated, nothing read) for comparison.
# usage: [RUNS=3] scripts/bench-data.sh   (writes under ${TMPDIR:-/tmp}/st-bench-data)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
bin=$root/build/singletrain
make_images=$root/build/tools/make_images
fm=/usr/share/datasets/fashion-mnist
dir=${TMPDIR:-/tmp}/st-bench-data
[ -x "$bin" ] && [ -x "$make_images" ] || { echo "bench-data.sh: run make check-tests first" >&2; exit 2; }
rm -rf "$dir"
mkdir -p "$dir"
cd "$root"

echo "== pack Fashion-MNIST (60,000 records) into a striped store"
"$bin" pack "$fm/train-images-idx3-ubyte.gz" "$dir/fmnist.store" \
    --labels "$fm/train-labels-idx1-ubyte.gz" --stripes 8 --stripe-unit 1M -q
"$bin" pack "$fm/t10k-images-idx3-ubyte.gz" "$dir/fmnist-test.store" \
    --labels "$fm/t10k-labels-idx1-ubyte.gz" --stripes 4 --stripe-unit 1M -q

echo "== store read throughput (random batches of 64, warm page cache)"
for i in $(seq "${RUNS:-3}"); do
    for n in 1 2 4; do
        "$bin" read "$dir/fmnist.store" --io-threads "$n" --batches 2000 | tail -1
    done
done

echo "== image list: 10,000 PNGs of 32 x 32 x 3; stb_image decode + resize per image"
"$make_images" "$fm/train-images-idx3-ubyte.gz" "$fm/train-labels-idx1-ubyte.gz" \
    "$dir/images" 10000 32 rgb
for i in $(seq "${RUNS:-3}"); do for n in 1 2; do
    "$bin" read "$dir/images/list.txt" --names "$dir/images/names.txt" --image-size 32,32 \
        --classes 10 --io-threads "$n" --batches 50 | tail -1
done; done
"$bin" pack "$dir/images/list.txt" "$dir/images.store" --names "$dir/images/names.txt" \
    --image-size 32,32 --channels 3 -q

# The time split line -> data wait as a share of the iteration; the done
# line -> images per second.
wait_share() {
    sed -n -e 's/^time split, ms per iteration: data \([0-9.]*\), compute \([0-9.]*\), barrier \([0-9.]*\), aggregation \([0-9.]*\), update \([0-9.]*\).*/split \1 \2 \3 \4 \5/p' \
        -e 's/^done: .* in [0-9.]* s, \([0-9.]*\) img\/s.*/rate \1/p' |
        awk '$1 == "rate" { rate = $2 }
             $1 == "split" { t = $2 + $3 + $4 + $5 + $6; wait = $2; share = 100 * $2 / t }
             END { printf "  data wait %.3f ms of %.3f ms per iteration: %.2f%%, %s img/s\n", wait, t, share, rate }'
}
printf 'train=%s\ntest=%s\n' "$dir/fmnist.store" "$dir/fmnist-test.store" >"$dir/fmnist.data"
printf 'train=%s\n' "$dir/images.store" >"$dir/images.data"
for i in $(seq "${RUNS:-3}"); do
    echo "== run $i of ${RUNS:-3}: LeNet-5, 2 workers: the packed Fashion-MNIST store, then synthetic data"
    "$bin" -t 2 --data "$dir/fmnist.data" --iters 1000 --warmup 20 --no-test --log-every 100000 \
        data/lenet.cfg | wait_share
    "$bin" -t 2 --data synthetic --iters 1000 --warmup 20 --no-test --log-every 100000 \
        data/lenet.cfg | wait_share
    echo "== run $i of ${RUNS:-3}: cifar-alexnet, 2 workers: the packed image list, then synthetic data"
    "$bin" -t 2 -b 128 --data "$dir/images.data" --iters 23 --warmup 3 --no-test \
        --log-every 100000 data/cifar-alexnet.cfg | wait_share
    "$bin" -t 2 -b 128 --data synthetic --iters 23 --warmup 3 --no-test \
        --log-every 100000 data/cifar-alexnet.cfg | wait_share
done
