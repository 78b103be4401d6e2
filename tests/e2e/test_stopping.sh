#!/bin/sh
# Test-driven stopping. --stop-at-accuracy X ends the run after the first
# test phase whose accuracy reaches X (given as a fraction or as a
# percentage), and a threshold never reached runs to the end; --patience N
# ends it after N test phases in a row without a better accuracy (exactly
# N + 1 test phases when the learning rate is 0, where every phase ties).
# A run so stopped exits 0, says why, and writes its final snapshot; with a
# snapshot directory the best test phase's snapshot is NAME_best.snap,
# byte-identical to the one an uninterrupted run writes at that iteration
# (later phases that only tie or fall do not replace it). A run resumed
# from a snapshot goes on with its record of the test phases (the best
# accuracy and the patience count) and stops where the uninterrupted run
# did; a snapshot without a record starts one. Without the options a run
# is as before. The expected iterations come from a reference run's test
# lines, not from constants: a linear model on 2,000 Fashion-MNIST images
# with one worker (the same bits every run), 500 test images every 20
# iterations.
# usage: sh tests/e2e/test_stopping.sh PATH_TO_SINGLETRAIN
set -u
. "$(dirname "$0")/../lib/check.sh"
suite_start "$@"
fmnist=/usr/share/datasets/fashion-mnist

printf 'train=%s\ntrain_labels=%s\ntest=%s\ntest_labels=%s\n' \
    "$fmnist/train-images-idx3-ubyte.gz" "$fmnist/train-labels-idx1-ubyte.gz" \
    "$fmnist/t10k-images-idx3-ubyte.gz" "$fmnist/t10k-labels-idx1-ubyte.gz" >"$tmp/fm.data"
cp "$fixtures/mnist-linear.cfg" "$tmp/linear.cfg"
sed 's/^learning_rate=.*/learning_rate=0/' "$fixtures/mnist-linear.cfg" >"$tmp/frozen.cfg"
grep -q '^learning_rate=0$' "$tmp/frozen.cfg" || { echo "could not make frozen.cfg" >&2; exit 2; }
# the standard run: $train [options...] CFG (200 iterations unless --iters is given)
train="$bin -t 1 -b 16 --data $tmp/fm.data --train-images 2000 --test-images 500 --test-interval 20 --log-every 1000"
iters="--iters 200"

# tests LOG: LOG's test phases, one "ITERATION ACCURACY" line each (the
# accuracy in percent as printed: 500 images make it exact to 0.2%)
tests() {
    sed -n 's/^test  iter \([0-9]*\)  accuracy \([0-9.]*\)%.*/\1 \2/p' "$1"
}
# upto N FILE: FILE's test phases up to iteration N
upto() {
    awk -v n="$1" '$1 <= n' "$2"
}

# ------------------------------------------------------------- the reference

mkdir "$tmp/ref"
check "reference run: no stopping option, a snapshot at every test phase" out 0 \
    "done: 200 iterations" -- $train $iters --snapshot-dir "$tmp/ref" --snapshot-every 20 "$tmp/linear.cfg"
cp "$tmp/stdout" "$tmp/ref.log"
tests "$tmp/ref.log" >"$tmp/ref.tests"
expect "reference: 10 test phases ($(wc -l <"$tmp/ref.tests"))" [ "$(wc -l <"$tmp/ref.tests")" -eq 10 ]
expect "reference: no best snapshot without the options" [ ! -e "$tmp/ref/linear_best.snap" ]
expect "reference: no stopping lines without the options" \
    [ -z "$(grep -e "new best" -e "early stop" -e "stopping at" "$tmp/ref.log")" ]

# ------------------------------------------------------- --stop-at-accuracy

# The first test phase at 65% or more, before the last one.
want=$(awk '$2 + 0 >= 65 { print $1; exit }' "$tmp/ref.tests")
expect "the reference reaches 65% before its last test phase (at ${want:-none})" \
    [ "${want:-200}" -lt 200 ]
want=${want:-200}
mkdir "$tmp/acc"
check "--stop-at-accuracy 0.65 stops at the first test phase reaching it" out 0 \
    "stopping at iteration $want: test accuracy " "reached --stop-at-accuracy 0.65" -- \
    $train $iters --stop-at-accuracy 0.65 --snapshot-dir "$tmp/acc" "$tmp/linear.cfg"
cp "$tmp/stdout" "$tmp/acc.log"
tests "$tmp/acc.log" >"$tmp/acc.tests"
upto "$want" "$tmp/ref.tests" >"$tmp/ref-acc.tests"
expect "--stop-at-accuracy: the test phases are the reference's up to iteration $want" \
    cmp -s "$tmp/acc.tests" "$tmp/ref-acc.tests"
expect "--stop-at-accuracy: the last test phase has at least 65% ($(tail -1 "$tmp/acc.tests"))" \
    awk 'END { exit !($1 == '"$want"' && $2 + 0 >= 65) }' "$tmp/acc.tests"
expect "--stop-at-accuracy: the ones before it have less" \
    awk '$1 < '"$want"' && $2 + 0 >= 65 { bad = 1 } END { exit bad }' "$tmp/acc.tests"
expect "--stop-at-accuracy: the summary says why" \
    grep -q "^stopped early at iteration $want of 200: test accuracy .* reached --stop-at-accuracy 0.65" \
    "$tmp/acc.log"
expect "--stop-at-accuracy: 'done:' counts the iterations run" grep -q "^done: $want iterations" \
    "$tmp/acc.log"
expect "--stop-at-accuracy: the final snapshot is the reference's at iteration $want" \
    cmp -s "$tmp/acc/linear_final.snap" "$tmp/ref/linear_$want.snap"
expect "--stop-at-accuracy: so is the best one (the first to reach 65% is the best so far)" \
    cmp -s "$tmp/acc/linear_best.snap" "$tmp/ref/linear_$want.snap"
check "--stop-at-accuracy 65% (a percentage) stops there too" out 0 \
    "stopping at iteration $want: test accuracy " "reached --stop-at-accuracy 0.65" -- \
    $train $iters --stop-at-accuracy 65% "$tmp/linear.cfg"

# Never reached: the whole run, and the best snapshot is the first best
# test phase's, whatever came after it.
best=$(awk 'NR == 1 || $2 + 0 > b { b = $2 + 0; i = $1 } END { print i }' "$tmp/ref.tests")
mkdir "$tmp/never"
check "--stop-at-accuracy 0.99, never reached: runs to the end" out 0 "done: 200 iterations" \
    "no early stop: --stop-at-accuracy 0.99 not reached (best" -- \
    $train $iters --stop-at-accuracy 0.99 --snapshot-dir "$tmp/never" "$tmp/linear.cfg"
tests "$tmp/stdout" >"$tmp/never.tests"
expect "never reached: the reference's test phases" cmp -s "$tmp/never.tests" "$tmp/ref.tests"
expect "never reached: the final snapshot is the reference's" \
    cmp -s "$tmp/never/linear_final.snap" "$tmp/ref/linear_final.snap"
expect "never reached: the best snapshot is the reference's at its best test phase ($best)" \
    cmp -s "$tmp/never/linear_best.snap" "$tmp/ref/linear_$best.snap"
expect "never reached: one 'new best' line per improvement" [ "$(grep -c "^new best test accuracy" \
    "$tmp/stdout")" -eq "$(awk 'NR == 1 || $2 + 0 > b { b = $2 + 0; n++ } END { print n }' \
    "$tmp/ref.tests")" ]

# ----------------------------------------------------------------- --patience

# A learning rate of 0: every test phase ties with the first, so --patience
# 3 stops after the fourth, and the best snapshot stays the first's.
mkdir "$tmp/frozen"
check "--patience 3 at learning rate 0 stops after 4 test phases" out 0 \
    "stopping at iteration 80: no improvement for 3 test phases (--patience 3), best " -- \
    $train $iters --patience 3 --snapshot-dir "$tmp/frozen" --snapshot-every 20 "$tmp/frozen.cfg"
cp "$tmp/stdout" "$tmp/frozen.log"
tests "$tmp/frozen.log" >"$tmp/frozen.tests"
expect "learning rate 0: test phases at 20, 40, 60 and 80" \
    [ "$(cut -d' ' -f1 "$tmp/frozen.tests" | tr '\n' ' ')" = "20 40 60 80 " ]
expect "learning rate 0: one accuracy, 4 times ($(cut -d' ' -f2 "$tmp/frozen.tests" | tr '\n' ' '))" \
    [ "$(cut -d' ' -f2 "$tmp/frozen.tests" | sort -u | wc -l)" -eq 1 ]
expect "learning rate 0: the best is at iteration 20" \
    grep -q "no improvement for 3 test phases (--patience 3), best .* at iteration 20$" "$tmp/frozen.log"
expect "learning rate 0: the best snapshot is iteration 20's (ties do not replace it)" \
    cmp -s "$tmp/frozen/frozen_best.snap" "$tmp/frozen/frozen_20.snap"
expect "learning rate 0: the final snapshot is iteration 80's" \
    cmp -s "$tmp/frozen/frozen_final.snap" "$tmp/frozen/frozen_80.snap"
expect "learning rate 0: no snapshot after the stop" [ ! -e "$tmp/frozen/frozen_100.snap" ]
expect "learning rate 0: the summary says why" \
    grep -q "^stopped early at iteration 80 of 200: no improvement for 3 test phases" "$tmp/frozen.log"

# Training: where the reference's record first has 2 test phases without
# a better accuracy.
stop=$(awk 'NR == 1 || $2 + 0 > b { b = $2 + 0; i = $1; s = 0; next }
            { s++ } s >= 2 { print $1; exit }' "$tmp/ref.tests")
expect "the reference has 2 test phases in a row without improvement before its end (at ${stop:-none})" \
    [ "${stop:-200}" -lt 200 ]
stop=${stop:-200}
upto "$stop" "$tmp/ref.tests" >"$tmp/ref-pat.tests"
pbest=$(awk 'NR == 1 || $2 + 0 > b { b = $2 + 0; i = $1 } END { print i }' "$tmp/ref-pat.tests")
mkdir "$tmp/pat"
check "--patience 2 stops where the reference's record says" out 0 \
    "stopping at iteration $stop: no improvement for 2 test phases (--patience 2), best" \
    "at iteration $pbest" -- $train $iters --patience 2 --snapshot-dir "$tmp/pat" "$tmp/linear.cfg"
tests "$tmp/stdout" >"$tmp/pat.tests"
expect "--patience: the test phases are the reference's up to iteration $stop" \
    cmp -s "$tmp/pat.tests" "$tmp/ref-pat.tests"
expect "--patience: the best snapshot is the reference's at iteration $pbest" \
    cmp -s "$tmp/pat/linear_best.snap" "$tmp/ref/linear_$pbest.snap"
expect "--patience: the final snapshot is the reference's at iteration $stop" \
    cmp -s "$tmp/pat/linear_final.snap" "$tmp/ref/linear_$stop.snap"

# ------------------------------------------------------------------- resume

# Resumed one test phase before the stop, the record (the best, and one
# phase without improvement) comes from the snapshot: the run stops where
# the uninterrupted one did, with its bits (a record started afresh would
# have run on).
from=$((stop - 20))
mkdir "$tmp/resumed"
check "--patience 2 resumed from iteration $from goes on with the snapshot's record" out 0 \
    "the snapshot's test record: $((from / 20)) test phases, the best " \
    "stopping at iteration $stop: no improvement for 2 test phases" -- \
    $train $iters --patience 2 --snapshot-dir "$tmp/resumed" --resume "$tmp/ref/linear_$from.snap" \
    "$tmp/linear.cfg"
expect "resumed: the final snapshot is the uninterrupted run's" \
    cmp -s "$tmp/resumed/linear_final.snap" "$tmp/pat/linear_final.snap"
expect "resumed: no new best snapshot (none came after the record's best)" \
    [ ! -e "$tmp/resumed/linear_best.snap" ]
# A snapshot without a record (no test phase before it, or an older
# singletrain's): the record starts with the next test phase.
mkdir "$tmp/untested"
check "a snapshot taken without test phases" err 0 "" -- \
    $train -q --iters 10 --no-test --snapshot-dir "$tmp/untested" "$tmp/linear.cfg"
check "resumed from it with --patience: no record, a fresh one" out 0 \
    "resuming from $tmp/untested/linear_final.snap at iteration 10 of 200" -- \
    $train $iters --patience 5 --resume "$tmp/untested/linear_final.snap" "$tmp/linear.cfg"
expect "resumed without a record: none announced" [ -z "$(grep "the snapshot's test record" "$tmp/stdout")" ]

finish test_stopping.sh
