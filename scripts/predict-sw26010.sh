#!/bin/sh
# Predicted SW26010 training time from the emulated core group
# (--backend cpe) for a batch of 128 on one processor, 32 images on each of
# its 4 core groups:
#   - AlexNet (data/alexnet.cfg), the whole network on a shard of 32
#     images: every kernel's forward / backward-data / backward-weights ms,
#     the strategy each convolution chose, and the processor's images/s;
#   - the 13 convolution layers of VGG-16 (data/vgg16.cfg): each layer's ms
#     and GFlop/s per pass. Emulating 32 images of VGG-16 takes hours, so
#     it runs on a shard of B images (default 1) and the convolution,
#     pooling and activation rows are scaled by 32 / B: those kernels work
#     image by image (explicit convolution launches per image) or linearly
#     in the images of one launch (implicit convolution), so their counts
#     grow in proportion (run with --vgg-shard 2 to see it). Its inner
#     products, gradient sum and update do not scale so and are left out.
# Each run is 3 iterations: the two strategy trials and one steady one.
#
# usage: scripts/predict-sw26010.sh [--vgg-shard B] [--alexnet-shard B] [--only vgg|alexnet]
#   SINGLETRAIN=build/singletrain (default)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
bin=${SINGLETRAIN:-$root/build/singletrain}
vgg_shard=1
alexnet_shard=32
only=""
die() { echo "predict-sw26010.sh: $*" >&2; exit 2; }
while [ $# -gt 0 ]; do
    case $1 in
    --vgg-shard) vgg_shard=${2:-} ; shift 2 ;;
    --alexnet-shard) alexnet_shard=${2:-} ; shift 2 ;;
    --only) only=${2:-} ; shift 2 ;;
    *) die "unknown option '$1' (expected --vgg-shard B, --alexnet-shard B, --only vgg|alexnet)" ;;
    esac
done
for v in "$vgg_shard" "$alexnet_shard"; do
    case $v in '' | *[!0-9]* | 0) die "a shard is a positive number of images, not '$v'" ;; esac
done
case $only in '' | vgg | alexnet) ;; *) die "--only takes vgg or alexnet, not '$only'" ;; esac
[ -x "$bin" ] || die "$bin is missing: run make first"
out=$(mktemp)
trap 'rm -f "$out"' EXIT

# run CFG SHARD: 3 iterations on one emulated core group; the report in $out.
run() {
    start=$(date +%s)
    if ! "$bin" -t 1 -b "$2" --iters 3 --no-test --backend cpe --log-every 1 "$1" >"$out" 2>&1; then
        cat "$out" >&2
        echo "predict-sw26010.sh: $bin failed on $1" >&2
        exit 1
    fi
    elapsed=$(($(date +%s) - start))
}

# The report's table rows as: name|on|fwd|bwd-data|bwd-weights|strategy
rows() {
    awk '/^cpe: kernel/ { t = 1; next }
         t && /^cpe: per iteration/ { t = 0 }
         t && /^cpe: / {
             line = substr($0, 6); name = substr(line, 1, 32); sub(/ +$/, "", name)
             n = split(substr(line, 34), w, " ")
             s = substr(line, 34); sub(/^ *[^ ]+ +[^ ]+ +[^ ]+ +[^ ]+ +[^ ]+ */, "", s)
             if (name ~ /^gradient sum/) print name "|" w[1] "|" w[2] "|0|" w[4] "|sum, update"
             else print name "|" w[1] "|" w[2] "|" w[3] "|" w[4] "|" s
         }' "$out"
}

if [ "$only" != vgg ]; then
    run "$root/data/alexnet.cfg" "$alexnet_shard"
    echo "== AlexNet: one core group's shard of $alexnet_shard images (emulated in $elapsed s)"
    rows | awk -F'|' -v shard="$alexnet_shard" '
        BEGIN { printf "%-32s %-5s %10s %10s %12s  %s\n", "kernel", "on", "fwd ms", "bwd-data", "bwd-weights", "strategy" }
        { printf "%-32s %-5s %10.3f %10.3f %12.3f  %s\n", $1, $2, $3, $4, $5, $6; total += $3 + $4 + $5 }
        END { printf "sum of the rows: %.1f ms per iteration of %d images on one core group\n", total, shard }'
    grep "^cpe: per iteration\|^cpe: one SW26010" "$out" | sed 's/^cpe: //'
fi

if [ "$only" != alexnet ]; then
    run "$root/data/vgg16.cfg" "$vgg_shard"
    echo "== VGG-16 convolution layers, batch 128 (32 images per core group; measured on $vgg_shard, scaled; emulated in $elapsed s)"
    rows | awk -F'|' -v k="32 / $vgg_shard" '
        BEGIN { split(k, f, " / "); scale = f[1] / f[2]
                printf "%-32s %9s %9s %9s %8s %8s %8s  %s\n", "layer", "fwd ms", "bwd-data", "bwd-wts", "fwd GF/s", "bd GF/s", "bw GF/s", "strategy" }
        $1 ~ /^conv / {
            split($1, p, /[ x\/>-]+/)   # conv KH KW S IC OC OH OW
            flops = 2 * p[2] * p[3] * p[5] * p[6] * p[7] * p[8] * 32
            fw = $3 * scale; bd = $4 * scale; bw = $5 * scale
            printf "%-32s %9.2f %9.2f %9.2f %8.1f %8.1f %8.1f  %s\n", $1, fw, bd, bw,
                   (fw > 0 ? flops / fw / 1e6 : 0), (bd > 0 ? flops / bd / 1e6 : 0), (bw > 0 ? flops / bw / 1e6 : 0), $6
            conv += fw + bd + bw; cflops += 3 * flops; next }
        $1 ~ /pool|^relu/ { other += ($3 + $4 + $5) * scale }
        END { printf "convolutions: %.1f ms per iteration per core group, %.1f GFlop/s (%.0f%% of the 742.4 GFlop/s peak); pooling and ReLU %.1f ms more\n", conv, cflops / conv / 1e6, 100 * cflops / conv / 1e6 / 742.4, other }'
fi
