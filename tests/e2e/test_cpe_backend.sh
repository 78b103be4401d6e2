#!/bin/sh
# The cpe backend (emulated SW26010 core group) against the reference
# backend, and what it predicts:
#   - LeNet-5 on Fashion-MNIST, 50 iterations of batch 32: the losses follow
#     the reference within 1e-3 relative at every iteration; its
#     convolutions run explicitly, each pass naming why swDNN's implicit
#     kernel cannot take it (32 images give each CPE row 4, not a 4 x 4
#     register block's 16); pooling, activations, the gradient sum and the
#     update run on the CPEs, softmax on the MPE, the data layer's copy
#     and the loss as CPE launches (passes of 256 floats or more);
#   - tests/fixtures/cpe-implicit.cfg at batch 128 (synthetic data): the
#     losses follow the reference; every pass both strategies can run chose
#     the faster trial, counting its layout transformations (from the
#     --cpe-report CSV), each trial naming its dominant cost; the passes
#     the implicit kernel cannot take name why; the transformations at the implicit run's edges are costed;
#   - the same run in cost-only mode predicts exactly the same seconds for
#     every kernel, pass and strategy (the emulated control flow, DMA and
#     messages are the same; only the arithmetic is skipped);
#   - LRN: the MPE's share of each pass is the roofline of Caffe's loops
#     around powf, counted by hand, and the CPE launches add at least their
#     fixed costs;
#   - route and shortcut, work in plain C, as swCaffe's helpers make their
#     passes: a route of parts under 256 floats a sample on the MPE at its
#     bandwidth (hand-computed), one of larger parts a CPE launch per sample
#     and part, the shortcut as Caffe's Eltwise and ReLU layers' passes
#     over the batch (bounds from the launch cost and the core group's
#     memory bandwidth);
#   - the SW26010-Pro what-if (--cpe-machine) on the same network: a
#     processor of 6 core groups, fewer DMA bytes per flop in the
#     convolutions and faster transformations than clock and bandwidth
#     alone give (256 KB of LDM: bigger blocks and tiles);
#   - two workers with Adam (the gradient sum adds two arenas, each worker
#     updates its slice on its own core group) follow the reference, and
#     --cpe-trace has a row per kernel, transformation, host work and
#     iteration. (At batch 8 LeNet's two backends drift apart by a few
#     percent after 30 iterations: small batches amplify the different
#     rounding of the GEMM's sums.)
# usage: sh tests/e2e/test_cpe_backend.sh PATH_TO_SINGLETRAIN
set -u
. "$(dirname "$0")/../lib/check.sh"
suite_start "$@"
root=$(cd "$(dirname "$0")/../.." && pwd)

cd "$root" || exit 2

# losses RUN_OUTPUT ITERATIONS > FILE: "iteration loss" lines.
losses() {
    sed -n "s/^iter \([0-9]*\)\/$2 .* loss \([0-9.]*\) .*/\1 \2/p" "$1"
}

# worst REF CPE: the largest relative loss difference, %.2e.
worst() {
    paste "$1" "$2" | awk 'BEGIN { w = 0 } { d = $2 - $4; if (d < 0) d = -d;
        r = d / $2; if (r > w) w = r } END { printf "%.2e", w }'
}

run="-t 1 -b 32 --iters 50 --train-images 2000 --no-test --log-every 1 data/lenet.cfg"
check "reference backend" out 0 "done: 50 iterations" -- "$bin" --backend ref $run
losses "$tmp/stdout" 50 >"$tmp/ref"
check "cpe backend" out 0 "done: 50 iterations" "one SW26010 (4 core groups" -- \
    "$bin" --backend cpe $run
losses "$tmp/stdout" 50 >"$tmp/cpe"
expect "50 losses from each" [ "$(wc -l <"$tmp/ref")" -eq 50 -a "$(wc -l <"$tmp/cpe")" -eq 50 ]
w=$(worst "$tmp/ref" "$tmp/cpe")
echo "     largest relative loss difference over 50 iterations: $w"
expect "cpe follows ref's loss within 1e-3 relative ($w)" awk -v w="$w" 'BEGIN { exit !(w <= 1e-3) }'
out="$tmp/stdout"
conv2=$(grep "conv 5x5/1 20->50 8x8" "$out")
expect "LeNet's conv 20->50 runs each pass explicitly, naming why" \
    [ "$(echo "$conv2" | grep -o "[a-z_]* explicit (implicit: 32 images: each CPE row gets 4, not whole 4 x 4 register blocks of 16" | wc -l)" -eq 2 ]
expect "its backward-weights pass names its SIMD dimension, the 20 input channels" \
    grep -q "bwd_weights explicit (implicit: 20 input channels: each CPE row gets 2" "$out"
expect "pooling (2 layers), activations, gradient sum and update run on the CPEs" \
    [ "$(grep -c "max pool .* CPEs \|relu x500 .* CPEs \|gradient sum + solver update .*CPEs" "$out")" -eq 4 ]
expect "softmax runs on the MPE" grep -q "softmax 10 .* MPE " "$out"
expect "the data layer's copy and the loss are CPE launches" \
    [ "$(grep -c "cpe: data  .* CPEs \|cpe: softmax (layer 6) .* CPEs " "$out")" -eq 2 ]

# The implicit scheme: losses, choices, reasons and transformations.
net=tests/fixtures/cpe-implicit.cfg
run="-t 1 --iters 4 --data synthetic --train-images 512 --no-test --log-every 1 $net"
check "reference backend, implicit-capable network" out 0 "done: 4 iterations" -- \
    "$bin" --backend ref $run
losses "$tmp/stdout" 4 >"$tmp/ref"
check "cpe backend, implicit-capable network, --cpe-report" out 0 "done: 4 iterations" -- \
    "$bin" --backend cpe --cpe-report "$tmp/full.csv" $run
losses "$tmp/stdout" 4 >"$tmp/cpe"
cp "$tmp/stdout" "$tmp/implicit.out"
w=$(worst "$tmp/ref" "$tmp/cpe")
expect "4 losses each, cpe within 1e-3 relative of ref ($w)" \
    sh -c '[ "$(wc -l <"$1")" -eq 4 ] && [ "$(wc -l <"$2")" -eq 4 ] && awk -v w="$3" "BEGIN { exit !(w <= 1e-3) }"' \
    sh "$tmp/ref" "$tmp/cpe" "$w"
expect "the report has a header and no partial file is left" \
    sh -c '[ "$(head -1 "$1")" = "section,kernel,name,on,pass,strategy,runs,seconds,layout_seconds,chosen,note" ] && [ ! -e "$1.partial" ]' sh "$tmp/full.csv"
# conv 128->64: every pass runs both ways, the chosen one is the faster
# (kernel + transformations) of the two trials.
awk -F, '$1 == "kernel" && $3 ~ /128->64/ && $7 == 1 { t[$5 "," $6] = $8 + $9; c[$5 "," $6] = $10 }
    END { for (p in t) { split(p, k, ","); n[k[1]]++ }
          for (q in n) { e = t[q ",explicit"]; i = t[q ",implicit"];
              if (n[q] != 2 || (c[q ",implicit"] == 1) != (i < e) || c[q ",implicit"] + c[q ",explicit"] != 1) bad = 1; m++ }
          exit bad || m != 3 }' "$tmp/full.csv"
expect "conv 128->64: all three passes ran both strategies and kept the faster" [ $? -eq 0 ]
expect "each convolution trial that ran names its dominant cost and its share (why one won)" \
    awk -F, '$1 == "kernel" && $3 ~ /conv/ && $7 == 1 { n++; if ($11 !~ /^"(compute|DMA|register communication|barriers|launches|MPE|layout) [0-9]+%"$/) bad = 1 }
             END { exit bad || n != 9 }' "$tmp/full.csv"
expect "conv 64->128's backward-weights cannot run implicitly: its 64 input channels give each CPE row 8" \
    grep -q "kernel,0,\"conv 3x3/1 64->128 8x8\",CPEs,bwd_weights,implicit,0,,,0,\"64 input channels: each CPE row gets 8" "$tmp/full.csv"
expect "the transformations at the implicit run's edges are costed" \
    [ "$(grep -c "layout transformations" "$tmp/implicit.out")" -ge 2 ]
expect "the processor's images/s is in the summary" \
    grep -q "^summary,,processor_img_s,,,,,[0-9]" "$tmp/full.csv"

# Cost-only mode predicts the same seconds for every row.
check "cpe backend, cost-only" out 0 "done: 4 iterations" "cost-only emulation" -- \
    "$bin" --backend cpe --cpe-cost-only --cpe-report "$tmp/cost.csv" $run
expect "cost-only and full emulation predict identical times ($(wc -l <"$tmp/full.csv") rows)" \
    cmp -s "$tmp/full.csv" "$tmp/cost.csv"

# The SW26010-Pro what-if (data/sw26010/sw26010-pro.machine: 6 core
# groups, 256 KB of LDM, 2.25 GHz, 51.2 GB/s per core group; uncalibrated)
# on the same network, cost-only, against the SW26010's cost-only run
# above. What its mechanisms say, checked: a processor of 6 core groups;
# no convolution moves more DMA bytes per flop (the explicit path's GEMMs
# are one image's, 64 pixels wide here, whose blocks the SW26010's 64 KB
# already hold: the larger LDM cannot make them fetch less), and the
# layout transformations get faster by more than the clock and the
# bandwidth alone (x 0.644 and x 0.667) would make them: their tiles grow
# with the LDM, so fewer and longer transfers.
flops_per_byte() { awk '$1 == "cpe:" && $2 == "conv" { print $10 }' "$1"; }
cp "$tmp/stdout" "$tmp/sw.out"
check "cpe backend, the SW26010-Pro what-if" out 0 "done: 4 iterations" "one processor (6 core groups" -- \
    "$bin" --backend cpe --cpe-cost-only --cpe-machine data/sw26010/sw26010-pro.machine \
    --cpe-report "$tmp/pro.csv" $run
cp "$tmp/stdout" "$tmp/pro.out"
expect "the report names the machine" grep -q "the machine: data/sw26010/sw26010-pro.machine" "$tmp/pro.out"
flops_per_byte "$tmp/sw.out" >"$tmp/sw.fpb"
flops_per_byte "$tmp/pro.out" >"$tmp/pro.fpb"
expect "no convolution moves more DMA bytes per flop on the Pro ($(tr '\n' ' ' <"$tmp/sw.fpb")-> $(tr '\n' ' ' <"$tmp/pro.fpb"))" \
    sh -c 'paste "$1" "$2" | awk "{ n++; if (\$2 < \$1) bad = 1 } END { exit !(n == 2 && !bad) }"' sh "$tmp/sw.fpb" "$tmp/pro.fpb"
layout_seconds() { awk -F, '$1 == "kernel" && $7 == 1 && $10 == 1 { t += $9 } END { printf "%.9f", t }' "$1"; }
sw_layout=$(layout_seconds "$tmp/cost.csv")
pro_layout=$(layout_seconds "$tmp/pro.csv")
expect "the transformations take less than 0.6 of the SW26010's time on the Pro ($pro_layout s vs $sw_layout s)" \
    awk -v p="$pro_layout" -v s="$sw_layout" 'BEGIN { exit !(s > 0 && p < 0.6 * s) }'
summary_value() { awk -F, -v n="$2" '$1 == "summary" && $3 == n { print $8 }' "$1"; }
expect "the Pro's processor trains more images/s" \
    awk -v p="$(summary_value "$tmp/pro.csv" processor_img_s)" -v s="$(summary_value "$tmp/cost.csv" processor_img_s)" 'BEGIN { exit !(p > s) }'

# LRN as swCaffe trains it: Caffe's CPU loops on the MPE, its copy,
# square, product and quotient as launches of swCaffe's helpers on the
# CPEs. Batch 4 of 8 channels of 32 x 32 (planes of 1024 floats: each
# helper's call goes to the CPEs, and the MPE's work dominates both passes),
# window 5. Counted here from Caffe's lrn_layer.cpp, per value of the
# tensor (32768 in all):
#   forward on the MPE: powf (90 flops: fdlibm's e_powf.c), 5 + 2 x 7
#     axpys of a plane per image (2 flops and 12 bytes each) over 8 planes,
#     the scale's set (4 bytes) and powf's read and write (8 bytes);
#   backward on the MPE: powf, 3 axpys per plane and 4 per image, the
#     accumulator's set per image (4 bytes per plane);
# each costed as the larger of flops at 2.9 GFLOP/s and bytes at 9.9 GB/s
# (model.conf's mpe_flops and mpe_bandwidth). What the CPE launches add
# is at least their launches' fixed cost (5 us each, launch_seconds):
# forward 4 squares (one per image), 28 plane copies and a product over
# the batch (33); backward a product over the batch, 4 products and 4
# quotients of an image, 32 plane products (41).
printf '[net]\nbatch=4\nheight=32\nwidth=32\nchannels=8\nlearning_rate=0.01\n\n[convolutional]\nfilters=8\nsize=1\nstride=1\npad=0\nactivation=linear\n\n[lrn]\nsize=5\nalpha=0.0001\nbeta=0.75\n\n[connected]\noutput=4\nactivation=linear\n\n[softmax]\n' >"$tmp/lrn.cfg"
check "cpe backend, LRN, cost-only" out 0 "done: 3 iterations" -- \
    "$bin" --backend cpe --cpe-cost-only --cpe-report "$tmp/lrn.csv" -t 1 --iters 3 --data synthetic \
    --train-images 4 --no-test "$tmp/lrn.cfg"
# lrn_row PASS: "seconds share" of the LRN's row.
lrn_row() { awk -F, -v p="$1" '$1 == "kernel" && $3 ~ /^"lrn / && $5 == p { gsub(/"|MPE |%/, "", $11); print $8, $11 }' "$tmp/lrn.csv"; }
# lrn_expect PASS MPE_FLOPS MPE_BYTES LAUNCHES: the MPE's roofline is the
# MPE's share of the row (within its rounding), and the rest at least the
# launches' fixed cost.
lrn_expect() {
    row=$(lrn_row "$1")
    expect "lrn $1: the MPE's share (${row#* }%) of its ${row% *} s is its roofline (flops $2, bytes $3), the rest at least $4 launches of 5 us" \
        awk -v r="$row" -v f="$2" -v b="$3" -v l="$4" 'BEGIN { split(r, x, " "); s = x[1]; share = x[2]
            m = f / 2.9e9; if (b / 9.9e9 > m) m = b / 9.9e9
            exit !(s > 0 && share != "" && 100 * m / s > share - 0.5 && 100 * m / s < share + 0.5 && s - m >= l * 5e-6 * (1 - 1e-9)) }'
}
v=32768
lrn_expect fwd "$(awk -v v=$v 'BEGIN { print v * (90 + 2 * (5 + 2 * 7) / 8) }')" \
    "$(awk -v v=$v 'BEGIN { print v * (4 + 12 * (5 + 2 * 7) / 8 + 8) }')" 33
lrn_expect bwd_data "$(awk -v v=$v 'BEGIN { print v * (90 + 2 * (3 + 4 / 8)) }')" \
    "$(awk -v v=$v 'BEGIN { print v * (8 + 4 / 8 + 12 * (3 + 4 / 8)) }')" 41

# Route and shortcut, work in plain C, as swCaffe's helpers (sw_memcpy_f,
# sw_add_f, ...) would make their passes: a pass of 256 floats or more is a
# CPE launch (5 us fixed, launch_seconds, and its bytes at no more than the
# core group's 34.13 GB/s, memory_bandwidth), a shorter one the MPE's
# (9.9 GB/s, mpe_bandwidth). Batch 64 of 8 x 8:
#   layer 2, route of 2 and 1 channels (128 and 64 floats a sample): per
#     sample two copies under 256 floats, on the MPE: 64 x 192 x 8 bytes
#     at 9.9 GB/s each pass;
#   layer 5, identity shortcut of 8 channels with ReLU (512 floats a
#     sample), as Caffe's Eltwise SUM and ReLU pass over the batch (the
#     layer's own code fuses them): forward the output cleared, two axpys
#     and the ReLU, 4 launches and 1 + 3 + 3 + 2 streams of 32768 floats;
#     backward the ReLU's gradient and two copies, 3 launches and 3 + 2 + 2
#     streams; each under the 64 launches a per-sample pass would make;
#   layer 6, route of 8 and 8 channels: a copy per sample and part, 128
#     launches and 2 streams of 65536 floats each pass.
printf '[net]\nbatch=64\nheight=8\nwidth=8\nchannels=1\nlearning_rate=0.01\n\n[convolutional]\nfilters=2\nsize=1\nactivation=linear\n\n[convolutional]\nfilters=1\nsize=1\nactivation=linear\n\n[route]\nlayers=0,1\n\n[convolutional]\nfilters=8\nsize=1\nactivation=linear\n\n[convolutional]\nfilters=8\nsize=1\nactivation=linear\n\n[shortcut]\nfrom=-2\nactivation=relu\n\n[route]\nlayers=-2,-1\n\n[connected]\noutput=4\nactivation=linear\n\n[softmax]\n' >"$tmp/host.cfg"
check "cpe backend, route and shortcut, cost-only" out 0 "done: 3 iterations" -- \
    "$bin" --backend cpe --cpe-cost-only --cpe-report "$tmp/host.csv" -t 1 --iters 3 \
    --data synthetic --train-images 64 --no-test "$tmp/host.cfg"
# host_expect LAYER PASS ON LOW HIGH: the layer's host row for the pass
# runs on ON and takes seconds in [LOW, HIGH].
host_expect() {
    row=$(awk -F, -v l="$1" -v p="$2" '$1 == "host" && $2 == l && $5 == p { print $4, $8 }' "$tmp/host.csv")
    expect "layer $1 $2: on $3, $4 <= seconds <= $5 ($row)" \
        awk -v r="$row" -v on="$3" -v lo="$4" -v hi="$5" 'BEGIN { split(r, x, " "); exit !(x[1] == on && x[2] >= lo && x[2] <= hi) }'
}
mpe=$(awk 'BEGIN { print 64 * 192 * 8 / 9.9e9 }')
for pass in fwd bwd_data; do
    host_expect 2 $pass MPE "$(awk -v m="$mpe" 'BEGIN { print m - 1e-9 }')" "$(awk -v m="$mpe" 'BEGIN { print m + 1e-9 }')"
    host_expect 6 $pass CPEs "$(awk 'BEGIN { print 128 * 5e-6 + 2 * 65536 * 4 / 34.13e9 }')" 1
done
host_expect 5 fwd CPEs "$(awk 'BEGIN { print 4 * 5e-6 + 9 * 32768 * 4 / 34.13e9 }')" 320e-6
host_expect 5 bwd_data CPEs "$(awk 'BEGIN { print 3 * 5e-6 + 7 * 32768 * 4 / 34.13e9 }')" 320e-6

# Two workers (the gradient sum adds two arenas; each worker updates its
# slice on its own core group) with Adam (two state planes): the same
# losses as the reference backend for 10 iterations.
sed 's/^\[net\]/[net]\nsolver=adam/' data/lenet.cfg >"$tmp/adam.cfg"
run2="-t 2 -b 32 --iters 10 --train-images 2000 --no-test --log-every 1 $tmp/adam.cfg"
check "reference backend, 2 workers, adam" out 0 "done: 10 iterations" -- "$bin" --backend ref $run2
losses "$tmp/stdout" 10 >"$tmp/ref2"
check "cpe backend, 2 workers, adam, --cpe-trace" out 0 "done: 10 iterations" -- \
    "$bin" --backend cpe --cpe-trace "$tmp/trace.csv" $run2
losses "$tmp/stdout" 10 >"$tmp/cpe2"
expect "10 losses each" [ "$(wc -l <"$tmp/ref2")" -eq 10 -a "$(wc -l <"$tmp/cpe2")" -eq 10 ]
w=$(worst "$tmp/ref2" "$tmp/cpe2")
expect "2 workers, adam: cpe follows ref within 1e-3 relative ($w)" awk -v w="$w" 'BEGIN { exit !(w <= 1e-3) }'
# Per iteration: 8 kernels, a transformation row for each kernel that can
# meet another layout (the 2 convolutions and the 2 pools after them), 2
# host rows (data, the loss) and the gradient sum + update.
expect "the trace has a row per kernel, transformation, host work and iteration (10 x 15) and a header" \
    [ "$(wc -l <"$tmp/trace.csv")" -eq 151 -a "$(head -1 "$tmp/trace.csv")" = "iteration,kernel,forward_ms,bwd_data_ms,bwd_weights_ms" ]
expect "no partial trace is left" [ ! -e "$tmp/trace.csv.partial" ]

# A run that fails leaves no half-written trace.
sed 's/^learning_rate=.*/learning_rate=1000/' data/lenet.cfg >"$tmp/diverge.cfg"
check "a diverging run with --cpe-trace" err 1 "training diverged" -- \
    "$bin" --backend cpe --cpe-trace "$tmp/diverge.csv" -t 1 -b 32 --iters 10 --train-images 2000 \
    --no-test "$tmp/diverge.cfg"
expect "it leaves neither the trace nor its partial file" \
    sh -c '[ ! -e "$1" ] && [ ! -e "$1.partial" ]' sh "$tmp/diverge.csv"

finish test_cpe_backend.sh
