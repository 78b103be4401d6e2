#!/bin/sh
# The SW26010 model as committed (data/sw26010/model.conf, built in)
# against swCaffe's calibration measurements: scripts/calibrate-sw26010.sh
# --check emulates the calibration layers (VGG-16's conv1_x, conv3_x and
# conv5_x at batch 128 on one core group) and AlexNet-BN's 1,024-node runs
# with the file's constants and fails when the figures the file records
# (its fitted constants' sources) are not what the constants give - a
# constant changed without refitting - or when a target is missed: per-pass
# median error at most 20%, the machine's strategy on at least 85% of the
# passes where both run, speed-ups within 10%, shares within 5 points. And
# the script's option errors.
# usage: sh tests/e2e/test_calibrate_sw26010.sh PATH_TO_SINGLETRAIN
set -u
. "$(dirname "$0")/../lib/check.sh"
suite_start "$@"
root=$(cd "$(dirname "$0")/../.." && pwd)
script="$root/scripts/calibrate-sw26010.sh"
export SINGLETRAIN="$bin"

check "the committed model reproduces its calibration figures and meets the targets" out 0 \
    "ok: the model file reproduces its calibration figures and meets the targets" -- \
    sh "$script" --check
cp "$root/data/sw26010/model.conf" "$tmp/model.conf"
check "an unknown option" err 2 "unknown option '--bogus'" -- sh "$script" --bogus
check "a missing data directory" err 2 "$tmp/none/swcaffe_calibration_layers.csv: cannot read it" -- \
    sh "$script" --check --data "$tmp/none"
check "a missing model file" err 2 "$tmp/none.conf: cannot read it" -- \
    sh "$script" --check --model "$tmp/none.conf"

finish test_calibrate_sw26010.sh
