#!/bin/sh
# scripts/predict-sw26010.sh turns the cpe backend's reports into the three
# CSVs: from hand-made reports (--from-reports, no emulation), the rows of
# layers.csv (VGG names, each strategy's seconds with its layout
# transformations, the chosen flag), networks.csv (the processor's
# images/s) and scaling.csv against values worked out by hand from the
# model in the script's header (the all-reduce's alpha-beta-gamma cost, its
# contention, the slowest of P nodes, the I/O beyond the iteration), with
# model files and machine descriptions made for the test; and its option
# errors.
# usage: sh tests/e2e/test_predict_sw26010.sh PATH_TO_SINGLETRAIN
set -u
. "$(dirname "$0")/../lib/check.sh"
suite_start "$@"
root=$(cd "$(dirname "$0")/../.." && pwd)
script="$root/scripts/predict-sw26010.sh"
export SINGLETRAIN="$bin"
mkdir -p "$tmp/in/reports"

# A network report whose processor iteration takes 1 s, whose CPEs add
# two buffers at 4e-10 s per float, with img_s IMG_S.
network_report() {
    cat <<CSV
section,kernel,name,on,pass,strategy,runs,seconds,layout_seconds,chosen,note
kernel,0,"fc 10->10",CPEs,fwd,-,1,0.001,0,1,
kernel,1,"conv 3x3/1 8->8 8x8",CPEs,fwd,explicit,1,0.3,0.06,1,""
kernel,1,"conv 3x3/1 8->8 8x8",CPEs,fwd,implicit,1,0.5,0,0,""
kernel,1,"conv 3x3/1 8->8 8x8",CPEs,bwd_data,implicit,1,0.2,0,1,""
kernel,1,"conv 3x3/1 8->8 8x8",CPEs,bwd_data,explicit,1,0.4,0,0,""
summary,,images_per_core_group,,,,,$2,,,
summary,,core_group_iteration_seconds,,,,,0.9,,,
summary,,cg0_sum_of_4_seconds,,,,,0.05,,,
summary,,update_seconds,,,,,0.05,,,
summary,,processor_iteration_seconds,,,,,1,,,
summary,,processor_img_s,,,,,$1,,,
summary,,cpe_sum_of_2_seconds_per_float,,,,,4e-10,,,
CSV
}
for r in alexnet-bn-256:256 vgg16-64:64 vgg19-64:64 resnet50-32:32 googlenet-128:128 \
         alexnet-bn-64:64 alexnet-bn-128:128 resnet50-64:64; do
    network_report "$(echo "${r#*:} * 3" | bc)" $((${r#*:} / 4)) >"$tmp/in/reports/${r%%:*}.csv"
done
# VGG's first two convolutions: the first one explicit only, the second
# both ways (implicit chosen: 2 + 0.5 < 3 + 0).
cat >"$tmp/in/reports/vgg16-layers.csv" <<'CSV'
section,kernel,name,on,pass,strategy,runs,seconds,layout_seconds,chosen,note
kernel,0,"conv 3x3/1 3->64 224x224",CPEs,fwd,explicit,1,0.75,0,1,""
kernel,0,"conv 3x3/1 3->64 224x224",CPEs,fwd,implicit,0,,,0,"3 input channels do not split"
kernel,2,"conv 3x3/1 64->64 224x224",CPEs,fwd,explicit,1,3,0,0,"DMA 61%"
kernel,2,"conv 3x3/1 64->64 224x224",CPEs,fwd,implicit,1,2,0.5,1,"register communication 48%"
kernel,3,"max pool 2x2/2 64x112x112",CPEs,fwd,-,1,0.3,0,1,
kernel,4,"conv 3x3/1 64->128 112x112",CPEs,bwd_data,implicit,1,1.25,0,1,""
kernel,4,"conv 3x3/1 64->128 112x112",CPEs,bwd_data,explicit,1,1.5,0.25,0,""
CSV

# model NAME VALUE...: the built-in model file with these constants, as
# $tmp/model.conf.
model() {
    cp "$root/data/sw26010/model.conf" "$tmp/model.conf"
    while [ $# -gt 1 ]; do
        sed -i "s/^$1 .*/$1 $2 1 test/" "$tmp/model.conf"
        shift 2
    done
}
# The cluster model without contention or spread: the alpha-beta-gamma
# all-reduce alone.
model allreduce_contention 0 node_time_spread 0 uncertainty_explicit_fwd 0.5 \
    uncertainty_implicit_bwd_data 0.1
check "the CSVs from hand-made reports" out 0 "CSVs in" -- \
    sh "$script" --from-reports "$tmp/in" --csv "$tmp/out" --model "$tmp/model.conf"
expect "layers.csv: a header and a row per layer, pass and runnable strategy, with its dominant cost" [ "$(cat "$tmp/out/layers.csv")" = "net,layer,ni,no,image,pass,strategy,seconds,chosen,dominant
vgg16,conv1_1,3,64,224,fwd,explicit,0.750000,1,
vgg16,conv1_2,64,64,224,fwd,explicit,3.000000,0,DMA 61%
vgg16,conv1_2,64,64,224,fwd,implicit,2.500000,1,register communication 48%
vgg16,conv2_1,64,128,112,bwd_data,implicit,1.250000,1,
vgg16,conv2_1,64,128,112,bwd_data,explicit,1.750000,0," ]
expect "the layers table says why each pass's strategy won" \
    grep -q "conv1_2 .* fwd .* 3.000 .* 2.500  implicit  explicit DMA 61%, implicit register communication 48%" "$tmp/stdout"
# Each network's band: its chosen passes, an explicit forward (0.3 s + 0.06 s
# of layout) with the test's error of 0.5 for that kind and an implicit
# backward-data (0.2 s) with 0.1, over the core group's 0.9 s: (0.36 x 0.5
# + 0.2 x 0.1) / 0.9 = 0.2222, of a calibrated share of 0.56 / 0.9 = 0.6222
# (the unchosen trials not counted).
expect "networks.csv: each network's images/s at its batch, its band (each pass with its kind's error) and calibrated share" [ "$(cat "$tmp/out/networks.csv")" = "net,batch,img_s,band,calibrated_share
alexnet-bn,256,768.000,0.2222,0.6222
vgg16,64,192.000,0.2222,0.6222
vgg19,64,192.000,0.2222,0.6222
resnet50,32,96.000,0.2222,0.6222
googlenet,128,384.000,0.2222,0.6222" ]
# AlexNet-BN (60,965,576 parameters: n = 243,862,304 bytes) at 64 per node,
# t1 = 1 s, alpha 1e-6 s, beta = 1 / 12e9 s per byte (no contention, no
# spread), gamma = 1e-10 s per
# byte, supernodes of 256, 4x across, I/O 64 GB/s of 227 x 227 x 3 bytes:
#   P = 2:    comm = 2 * 1 * 1e-6 + 1 * n beta + 1/2 * n gamma = 0.0325170 s,
#             I/O 3.1e-4 s < t1: speed-up 2 / 1.0325170 = 1.937, share 0.0315
#   P = 512:  2 * 9 * 1e-6 + 2 (512 - 2)/512 n beta + 2 (2 - 1)/512 n 4 beta
#             + 511/512 n gamma = 0.0651591 s: 480.679, share 0.0612
#   P = 1024: 0.0653437 s: 961.192, share 0.0613
expect "scaling.csv: AlexNet-BN at 64 per node, 1, 2, 512 and 1024 nodes worked out by hand" \
    sh -c 'grep -q "^alexnet-bn,64,1,1.000,0.0000$" "$1" && grep -q "^alexnet-bn,64,2,1.937,0.0315$" "$1" &&
           grep -q "^alexnet-bn,64,512,480.679,0.0612$" "$1" && grep -q "^alexnet-bn,64,1024,961.192,0.0613$" "$1"' \
    sh "$tmp/out/scaling.csv"
expect "scaling.csv: 11 node counts for each of 5 (net, batch), and a header" \
    [ "$(wc -l <"$tmp/out/scaling.csv")" -eq 56 ]
# With the store at 1 GB/s, 128 nodes read 128 * 64 * 154,587 bytes in
# 1.2664 s, 0.2664 s more than the iteration: comm 0.0645359 s, speed-up
# 128 / (1 + 0.0645359 + 0.2663767) = 96.175.
# (the store is the machine description's: a copy of the built-in one)
sed 's/^io_bandwidth .*/io_bandwidth 1e9 B\/s test/' "$root/data/sw26010/sw26010.machine" >"$tmp/sw26010.machine"
check "a slow store shows in the speed-up" out 0 "CSVs in" -- \
    sh "$script" --from-reports "$tmp/in" --csv "$tmp/slow" --only scaling --model "$tmp/model.conf" \
    --machine "$tmp/sw26010.machine"
expect "128 nodes at 1 GB/s of I/O: 96.175 (worked out by hand)" \
    grep -q "^alexnet-bn,64,128,96.175,0.0485$" "$tmp/slow/scaling.csv"
# Contention 1 (each step at 12 GB/s / (1 + log2 P)) and a spread of 0.1
# (E[max] of 2 and 4 standard normals: 1/sqrt(pi) = 0.5641896 and 1.0293754):
#   P = 2: wait 0.0564190 s; 2e-6 + n / 6e9 + 1/2 n gamma = 0.0528388 s:
#          speed-up 2 / 1.1092578 = 1.803, share 0.0985
#   P = 4: wait 0.1029375 s; 4e-6 + 1.5 n / 4e9 + 3/4 n gamma = 0.1097420 s:
#          speed-up 4 / 1.2126795 = 3.298, share 0.1754
model allreduce_contention 1 node_time_spread 0.1
check "contention and the slowest node" out 0 "CSVs in" -- \
    sh "$script" --from-reports "$tmp/in" --csv "$tmp/spread" --only scaling --model "$tmp/model.conf"
expect "2 and 4 nodes with contention 1 and spread 0.1 (worked out by hand)" \
    sh -c 'grep -q "^alexnet-bn,64,2,1.803,0.0985$" "$1" && grep -q "^alexnet-bn,64,4,3.298,0.1754$" "$1"' \
    sh "$tmp/spread/scaling.csv"
check "an unknown option" err 2 "unknown option '--bogus'" -- sh "$script" --bogus
check "--only with a bad part" err 2 "--only takes layers, networks or scaling, not 'all'" -- \
    sh "$script" --only all
check "reports missing" err 2 "no reports to make the CSVs from" -- \
    sh "$script" --from-reports "$tmp/nothing"
sed -i 's/^io_bandwidth .*/io_bandwidth fast B\/s test/' "$tmp/sw26010.machine"
check "a constant that is not a number" err 2 "io_bandwidth is missing or not a number ('fast')" -- \
    sh "$script" --from-reports "$tmp/in" --model "$tmp/model.conf" --machine "$tmp/sw26010.machine"
check "a machine description that is not there" err 2 "$tmp/none.machine: no machine description to read" -- \
    sh "$script" --from-reports "$tmp/in" --machine "$tmp/none.machine"
check "a model file that is not there" err 2 "$tmp/none.conf: no model file to read" -- \
    sh "$script" --from-reports "$tmp/in" --model "$tmp/none.conf"

finish test_predict_sw26010.sh
