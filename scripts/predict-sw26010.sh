#!/bin/sh
# Predicted SW26010 training time from the emulated core group (--backend
# cpe, in cost-only mode), at three scales:
#   layers    VGG-16's 13 convolutions at batch 128 on one core group: the
#             seconds of forward, backward-data and backward-weights with
#             each strategy that can run the pass (its layout
#             transformations included), each one's dominant cost (the
#             largest of compute, DMA wait, register communication,
#             barriers, launches, MPE work and layout, with its share: why
#             one won), and the one chosen;
#   networks  one processor (4 core groups on the SW26010, each a quarter
#             of the batch; core group 0 sums the 4 gradients and updates,
#             as swCaffe):
#             AlexNet-BN at 256, VGG-16 and VGG-19 at 64, ResNet-50 at 32,
#             GoogLeNet at 128, images/s with a band (network_band: each
#             convolution pass's seconds times the calibration's median
#             error for its strategy and pass, over the iteration; the rest
#             reported as uncalibrated);
#   scaling   P = 1..1024 nodes of TaihuLight under BSP: a processor's
#             iteration, stretched to the slowest of P nodes, plus the
#             all-reduce of the packed gradient (recursive halving /
#             doubling over ranks numbered round-robin across supernodes,
#             src/dist/allreduce/rhd_supernode.c's cost formula, its steps
#             slowed by the network's contention) plus the striped input's
#             reads beyond what the I/O thread hides: speed-up over one node
#             and the communication's share of the iteration, for AlexNet-BN
#             at 64, 128 and 256 images per node and ResNet-50 at 32 and 64.
# Each emulation runs 2 iterations (the strategy trials: explicit, then
# implicit where it can run) or 3 (one more with the choices) and writes
# the backend's report CSV (--cpe-report) under DIR/reports; the CSVs are
# made from those reports (--from-reports DIR remakes them without
# emulating).
#
# Every constant comes from the model file (--model FILE, default
# data/sw26010/model.conf, the one built into singletrain) and the machine
# description (--machine FILE, default data/sw26010/sw26010.machine, also
# built in; sw26010-pro.machine is an uncalibrated what-if): the core
# group's (passed on as --cpe-model and --cpe-machine; the machine's
# core_groups make a processor) and the cluster's (the machine's network,
# the model's fitted contention and spread):
#   net_latency_s, net_bandwidth    one message's latency, MPI's bandwidth
#                                   between two nodes
#   allreduce_contention            the all-reduce's steps run at
#                                   net_bandwidth / (1 + c log2 P): every
#                                   node sends at once, and each doubling of
#                                   the machine adds a level of shared links
#   supernode_nodes,                supernodes of Q nodes, c times slower
#   cross_supernode_factor          between them
#   node_time_spread                under BSP every iteration waits for the
#                                   slowest of P nodes, whose iteration times
#                                   vary with this coefficient of variation:
#                                   t1 (1 + spread E[max of P normals])
#   io_bandwidth                    the striped store, all nodes together:
#                                   each node's I/O thread reads its next
#                                   batch during the iteration, so only reads
#                                   longer than the iteration count
# The reduction's gamma is the CPEs' emulated rate of adding two gradient
# buffers, from each network's report. Beside each figure, the band the
# calibration residuals imply (the model file's uncertainty_* constants:
# scripts/calibrate-sw26010.sh).
#
# usage: scripts/predict-sw26010.sh [--csv DIR] [--only layers|networks|scaling]
#                                   [--from-reports DIR] [--model FILE] [--machine FILE]
#   SINGLETRAIN=build/singletrain (default)
set -eu
here=$(cd "$(dirname "$(readlink -f "$0")")" && pwd)
. "$here/paths.sh"
csv=""
only=""
from=""
model="$st_sw26010/model.conf"
machine="$st_sw26010/sw26010.machine"
die() { echo "predict-sw26010.sh: $*" >&2; exit 2; }
while [ $# -gt 0 ]; do
    case $1 in
    --csv) csv=${2:-}; [ -n "$csv" ] || die "--csv needs a directory"; shift 2 ;;
    --only) only=${2:-}; shift 2 ;;
    --from-reports) from=${2:-}; [ -n "$from" ] || die "--from-reports needs a directory"; shift 2 ;;
    --model) model=${2:-}; [ -n "$model" ] || die "--model needs a file"; shift 2 ;;
    --machine) machine=${2:-}; [ -n "$machine" ] || die "--machine needs a file"; shift 2 ;;
    -h | --help) sed -n '2,/^set -eu/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown option '$1' (expected --csv DIR, --only layers|networks|scaling, --from-reports DIR, --model FILE, --machine FILE)" ;;
    esac
done
case $only in '' | layers | networks | scaling) ;; *) die "--only takes layers, networks or scaling, not '$only'" ;; esac
[ -f "$model" ] && [ -r "$model" ] || die "$model: no model file to read (--model FILE)"
[ -f "$machine" ] && [ -r "$machine" ] || die "$machine: no machine description to read (--machine FILE)"

# constant NAME [FILE]: its value in the model file (or FILE; singletrain
# checks the whole file when it emulates; here each constant used must be
# a number).
constant() {
    f=${2:-$model}
    v=$(awk -v n="$1" '{ sub(/#.*/, "") } $1 == n { print $2; exit }' "$f")
    case $v in '' | *[!0-9.e+-]*) die "$f: $1 is missing or not a number ('$v')" ;; esac
    echo "$v"
}
ALPHA=$(constant net_latency_s "$machine")
NET_BW=$(constant net_bandwidth "$machine")
CONTENTION=$(constant allreduce_contention)
CROSS=$(constant cross_supernode_factor "$machine")
SUPERNODE=$(constant supernode_nodes "$machine")
IO_BW=$(constant io_bandwidth "$machine")
SPREAD=$(constant node_time_spread)
GROUPS=$(constant core_groups "$machine")
BAND_CLASSES=""
for strategy in explicit implicit; do
    for pass in fwd bwd_data bwd_weights; do
        BAND_CLASSES="$BAND_CLASSES $strategy:$pass=$(constant "uncertainty_${strategy}_$pass")"
    done
done
BAND_SPEEDUP=$(constant uncertainty_speedup)
BAND_SHARE=$(constant uncertainty_share)
if [ -n "$from" ]; then
    [ -d "$from/reports" ] || die "$from/reports: no reports to make the CSVs from"
    dir=$from
else
    [ -x "$bin" ] || die "$bin is missing: run make first"
    dir=${csv:-$(mktemp -d)}
fi
mkdir -p "$dir/reports" || die "cannot make $dir/reports"
[ -n "$csv" ] && { mkdir -p "$csv" || die "cannot make $csv"; }
scratch=""
[ -z "$csv" ] && [ -z "$from" ] && scratch=$dir
scaling_table=$(mktemp) || die "cannot make a temporary file"
trap 'rm -f "$scaling_table"; [ -z "$scratch" ] || rm -rf "$scratch"' EXIT

# emulate NAME CFG IMAGES_PER_CORE_GROUP ITERATIONS: one cost-only run, its
# report in $dir/reports/NAME.csv (kept when it is already there and
# --from-reports was given).
emulate() {
    report="$dir/reports/$1.csv"
    if [ -n "$from" ]; then
        [ -f "$report" ] || die "$report is missing"
        return
    fi
    start=$(date +%s)
    if ! "$bin" --backend cpe --cpe-model "$model" --cpe-machine "$machine" --cpe-cost-only --cpe-report "$report" -t 1 -b "$3" --iters "$4" \
        --data synthetic --train-images "$3" --test-images 1 --no-test "$2" >"$dir/reports/$1.log" 2>&1; then
        cat "$dir/reports/$1.log" >&2
        echo "predict-sw26010.sh: $bin failed on $2" >&2
        exit 1
    fi
    echo "  emulated $1 ($(basename "$2"), $3 images per core group, $4 iterations) in $(($(date +%s) - start)) s" >&2
}

# summary REPORT NAME: a summary row's value.
summary() {
    awk -F, -v n="$2" '$1 == "summary" && $3 == n { print $8; found = 1 } END { exit !found }' "$1" ||
        die "$1 has no summary row '$2'"
}

# --------------------------------------------------------------- layers
layers() {
    emulate vgg16-layers "$st_networks/vgg16.cfg" 128 2
    out=${csv:+$csv/layers.csv}
    out=${out:-/dev/null}
    awk -F, -v out="$out" -v classes="$BAND_CLASSES" '
        BEGIN { print "net,layer,ni,no,image,pass,strategy,seconds,chosen,dominant" >out
                split("fwd bwd_data bwd_weights", pass_name, " ") }
        $1 == "kernel" && $3 ~ /^"conv / {
            name = $3; gsub(/"/, "", name)
            split(name, f, /[ x\/>-]+/) # conv KH KW STRIDE IC OC OH OW
            if (!($2 in layer)) { # VGG names: a new block after each pooling
                if (n++ == 0 || f[7] != prev_image) { block++; conv = 0 }
                prev_image = f[7]
                layer[$2] = sprintf("conv%d_%d", block, ++conv)
            }
            if ($7 != 1) next
            why = $11; gsub(/"/, "", why)
            printf "vgg16,%s,%s,%s,%s,%s,%s,%.6f,%s,%s\n", layer[$2], f[5], f[6], f[7] * f[4],
                   $5, $6, $8 + $9, $10, why >out
            t[layer[$2] " " $5 " " $6] = $8 + $9
            d[layer[$2] " " $5 " " $6] = why
            if ($10 == 1) chosen[layer[$2] " " $5] = $6
            order[++rows] = layer[$2] " " $5
        }
        END {
            nk = split(classes, kinds, " "); bands = ""
            for (i = 1; i <= nk; i++) { split(kinds[i], kv, "="); sub(/:/, " ", kv[1]); bands = bands (i > 1 ? ", " : "") sprintf("%s +-%.0f%%", kv[1], 100 * kv[2]) }
            printf "each figure\047s band, the calibration\047s median error for its kind of pass: %s\n", bands
            printf "%-10s %-12s %12s %12s  %-9s %s\n", "layer", "pass", "explicit s", "implicit s", "chosen", "why: each trial\047s dominant cost"
            for (i = 1; i <= rows; i++) {
                k = order[i]; if (k in done) continue; done[k] = 1
                split(k, p, " ")
                e = t[k " explicit"]; im = (k " implicit") in t ? sprintf("%12.3f", t[k " implicit"]) : sprintf("%12s", "-")
                why = "explicit " d[k " explicit"]
                if ((k " implicit") in t) why = why ", implicit " d[k " implicit"]
                printf "%-10s %-12s %12.3f %s  %-9s %s\n", p[1], p[2], e, im, chosen[k], why
            }
        }' "$dir/reports/vgg16-layers.csv"
}

# --------------------------------------------------------------- networks
# One processor's images/s for each network: each core group trains the
# images per core group of swCaffe's measurements (a quarter of its
# processor batch), so a processor with more core groups trains a larger
# batch, each core group the same work.
networks_list="alexnet-bn:alexnet-bn.cfg:64 vgg16:vgg16.cfg:16 vgg19:vgg19.cfg:16
               resnet50:resnet50.cfg:8 googlenet:googlenet.cfg:32"

# network_band REPORT: "BAND CALIBRATED" for one network: CALIBRATED the
# share of a core group's iteration spent in convolution passes (the chosen
# strategy's launches and layout transformations), the only kind of layer
# the calibration measured; BAND the calibration's residuals carried
# through those passes: each pass's seconds times the median error of the
# calibration's passes of its kind (strategy and pass: the model file's
# uncertainty_STRATEGY_PASS), summed over the passes as one error (the
# calibration's residuals are systematic by strategy and shape, not
# independent), over the iteration. A network of explicit backward-data
# passes carries that kind's error, one of implicit forwards its own. The
# rest of the iteration (pooling, batch norm, activations, the fc layers,
# the MPE's work) has no measured residual and no band: it is printed as
# the uncalibrated share.
network_band() {
    awk -F, -v classes="$BAND_CLASSES" '
        BEGIN { n = split(classes, c, " "); for (i = 1; i <= n; i++) { split(c[i], kv, "="); u[kv[1]] = kv[2] } }
        $1 == "kernel" && $3 ~ /^"conv / && $10 == 1 {
            if (!(($6 ":" $5) in u)) { printf "predict-sw26010.sh: %s: a %s %s pass has no calibrated error\n", FILENAME, $6, $5 > "/dev/stderr"; exit 1 }
            conv += $8 + $9; band += ($8 + $9) * u[$6 ":" $5]
        }
        $1 == "summary" && $3 == "core_group_iteration_seconds" { t = $8 }
        END { if (t > 0) printf "%.4f %.4f\n", band / t, conv / t; else print "0 0" }' "$1"
}

networks() {
    out=${csv:+$csv/networks.csv}
    [ -n "$out" ] && echo "net,batch,img_s,band,calibrated_share" >"$out"
    printf "%-12s %6s %18s %14s %12s  %s\n" net batch img/s "iteration s" "CG0 sum s" \
        "band: each convolution pass's calibrated error (its strategy and pass), over the iteration"
    for entry in $networks_list; do
        net=${entry%%:*}; rest=${entry#*:}; cfg=${rest%%:*}; per_cg=${rest#*:}
        batch=$((per_cg * GROUPS))
        emulate "$net-$batch" "$st_networks/$cfg" "$per_cg" 3
        r="$dir/reports/$net-$batch.csv"
        img_s=$(summary "$r" processor_img_s)
        set -- $(network_band "$r")
        printf "%-12s %6d %10.1f (+-%2.0f%%) %14.3f %12.3f  convolutions %.0f%% of the iteration, the rest uncalibrated\n" \
            "$net" "$batch" "$img_s" "$(awk -v b="$1" 'BEGIN { print 100 * b }')" \
            "$(summary "$r" processor_iteration_seconds)" "$(summary "$r" cg0_sum_of_4_seconds)" \
            "$(awk -v c="$2" 'BEGIN { print 100 * c }')"
        [ -n "$out" ] && printf "%s,%d,%.3f,%s,%s\n" "$net" "$batch" "$img_s" "$1" "$2" >>"$out"
    done
}

# --------------------------------------------------------------- scaling
scaling_list="alexnet-bn:alexnet-bn.cfg:64 alexnet-bn:alexnet-bn.cfg:128 alexnet-bn:alexnet-bn.cfg:256
              resnet50:resnet50.cfg:32 resnet50:resnet50.cfg:64"

# input_bytes CFG: bytes of one uint8 input image (height x width x channels).
input_bytes() {
    awk -F= '/^\[/ { in_net = ($0 ~ /^\[net\]/) } in_net && $1 ~ /^(height|width|channels)$/ { v[$1] = $2 }
             END { print v["height"] * v["width"] * v["channels"] }' "$1"
}

# The scaling table of one (net, batch): awk's main program beside
# sw26010-scaling.awk's functions.
cat >"$scaling_table" <<'AWK'
BEGIN {
    n = 4 * params; gamma = gamma_float / 4
    printf "%-12s %5s %6s %19s %22s %9s %9s %9s\n", "net", "batch", "nodes", "speedup",
           "comm share", "wait s", "reduce s", "I/O s"
    for (p = 1; p <= 1024; p *= 2) {
        sw_scale(p, t1, n, gamma, batch, img)
        printf "%-12s %5d %6d %9.1f (+-%4.1f%%) %9.3f (+-%4.1f pt) %9.3f %9.3f %9.3f\n", net, batch, p,
               SW_SPEEDUP, 100 * band_speedup, SW_SHARE, 100 * band_share, SW_WAIT, SW_ALLREDUCE, SW_IO
        printf "%s,%d,%d,%.3f,%.4f\n", net, batch, p, SW_SPEEDUP, SW_SHARE >> out
    }
}
AWK

scaling() {
    out=${csv:+$csv/scaling.csv}
    [ -n "$out" ] && echo "net,sub_batch,nodes,speedup,comm_share" >"$out"
    for entry in $scaling_list; do
        net=${entry%%:*}; rest=${entry#*:}; cfg=${rest%%:*}; batch=${rest#*:}
        emulate "$net-$batch" "$st_networks/$cfg" $((batch / GROUPS)) 3
        r="$dir/reports/$net-$batch.csv"
        params=$("$bin" --dry-run "$st_networks/$cfg" 2>/dev/null | sed -n 's/^\([0-9]*\) parameters.*/\1/p')
        [ -n "$params" ] || die "no parameter count from --dry-run of $cfg"
        awk -v net="$net" -v batch="$batch" -v params="$params" -v img="$(input_bytes "$st_networks/$cfg")" \
            -v t1="$(summary "$r" processor_iteration_seconds)" \
            -v gamma_float="$(summary "$r" cpe_sum_of_2_seconds_per_float)" \
            -v alpha="$ALPHA" -v net_bw="$NET_BW" -v contention="$CONTENTION" -v cross="$CROSS" \
            -v q="$SUPERNODE" -v io_bw="$IO_BW" -v spread="$SPREAD" -v band_speedup="$BAND_SPEEDUP" \
            -v band_share="$BAND_SHARE" -v out="${out:-/dev/null}" -f "$here/sw26010-scaling.awk" -f "$scaling_table"
    done
}

[ -z "$only" ] || [ "$only" = layers ] && { echo "== VGG-16's convolutions, batch 128, one core group (seconds)"; layers; }
# The processor's name: its description's, upper case (SW26010, SW26010-PRO).
processor=$(basename "$machine" .machine | tr '[:lower:]' '[:upper:]')
[ -z "$only" ] || [ "$only" = networks ] && { echo "== one $processor processor"; networks; }
[ -z "$only" ] || [ "$only" = scaling ] && { echo "== TaihuLight nodes (alpha $ALPHA s, $NET_BW B/s / (1 + $CONTENTION log2 P), x$CROSS across supernodes of $SUPERNODE, node time spread $SPREAD, I/O $IO_BW B/s)"; scaling; }
[ -n "$csv" ] && echo "CSVs in $csv: $(cd "$csv" && ls *.csv | tr '\n' ' ')"
exit 0
