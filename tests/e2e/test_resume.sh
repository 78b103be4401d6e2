#!/bin/sh
# Snapshots and resume: a run resumed from a periodic snapshot, from the one
# SIGINT or SIGTERM leaves, and from the last one a kill -9 at a random
# moment leaves, ends with a final snapshot (weights and solver state)
# byte-identical to the uninterrupted run's; resuming with another batch,
# seed or network, from damaged files or past the end, is an error naming
# the problem; a run that diverges names the iteration and the layer and
# keeps its last good snapshot.
# usage: sh tests/e2e/test_resume.sh PATH_TO_SINGLETRAIN
set -u
. "$(dirname "$0")/../lib/check.sh"
suite_start "$@"

# A small network with dropout (a random stream that must continue) on
# synthetic data: 1,024 images, 64 iterations of 16 per epoch.
cat >"$tmp/tiny.cfg" <<'EOF'
[net]
batch=16
height=8
width=8
channels=1
learning_rate=0.05
momentum=0.9
decay=0.0005
policy=steps
steps=3000
scales=0.5

[convolutional]
filters=4
size=3
stride=1
pad=1
activation=relu

[maxpool]
size=2
stride=2

[dropout]
probability=0.3

[connected]
output=3
activation=linear

[softmax]
EOF
sed 's/^filters=4/filters=5/' "$tmp/tiny.cfg" >"$tmp/other.cfg"
iters=6000
# Kernel choices: measured once, then given to every run whose bits are
# compared with another's (a run measuring its own may choose another
# convolution implementation, and its sums round differently).
check "--save-kernel-choices" out 0 "kernel choices saved to $tmp/choices" -- \
    "$bin" -t 2 --data synthetic --no-test --iters 1 --save-kernel-choices "$tmp/choices" \
    "$tmp/tiny.cfg"
expect "the choice file has the convolution's choice" \
    grep -q "^0.conv n8 1x8x8>4x8x8 k3x3 s1x1 p1x1 g1 fwd+bwd_weights = " "$tmp/choices"
# A dry run measures and saves them too, without training.
check "--dry-run --save-kernel-choices" out 0 "kernel choices saved to $tmp/dry.choices" -- \
    "$bin" --dry-run -t 2 --data synthetic --no-test --iters 1 \
    --save-kernel-choices "$tmp/dry.choices" "$tmp/tiny.cfg"
expect "the dry run's choice file has the convolution's choice" \
    grep -q "^0.conv n8 1x8x8>4x8x8 k3x3 s1x1 p1x1 g1 fwd+bwd_weights = " "$tmp/dry.choices"
# the standard run: $train DIR [options...]
train="$bin -q -t 2 --data synthetic --no-test --kernel-choices $tmp/choices --iters"
run() { # run DIR [options...], outside check
    dir=$1
    shift
    $train $iters --snapshot-dir "$dir" "$@" "$tmp/tiny.cfg"
}
# newest DIR: the snapshot of DIR with the highest iteration, or nothing
newest() {
    ls "$1" | sed -n 's/^tiny_\([0-9][0-9]*\)\.snap$/\1/p' | sort -n | tail -1
}

mkdir "$tmp/ref" "$tmp/every" "$tmp/int" "$tmp/term"
check "uninterrupted reference run" err 0 "" -- $train $iters --snapshot-dir "$tmp/ref" "$tmp/tiny.cfg"
check "a run snapshotting every 1000 iterations" err 0 "" -- \
    $train $iters --snapshot-dir "$tmp/every" --snapshot-every 1000 "$tmp/tiny.cfg"
expect "the periodic run's final snapshot equals the reference" \
    cmp -s "$tmp/ref/tiny_final.snap" "$tmp/every/tiny_final.snap"
expect "five periodic snapshots" [ "$(ls "$tmp/every" | grep -c '^tiny_[0-9]*\.snap$')" -eq 5 ]
rm "$tmp/every/tiny_final.snap"
check "resume from iteration 3000 (across the lr step)" err 0 "" -- \
    $train $iters --snapshot-dir "$tmp/every" --resume "$tmp/every/tiny_3000.snap" "$tmp/tiny.cfg"
expect "resumed from 3000: final snapshot byte-identical" \
    cmp -s "$tmp/ref/tiny_final.snap" "$tmp/every/tiny_final.snap"
check "resume says where it starts" out 0 "resuming from $tmp/every/tiny_1000.snap at iteration 1000 of 6000" -- \
    "$bin" -t 2 --data synthetic --no-test --iters $iters --resume "$tmp/every/tiny_1000.snap" \
    "$tmp/tiny.cfg"
# The snapshot keeps the choices: resumed without the file, nothing is
# measured, and the run ends with the same bits.
rm "$tmp/every/tiny_final.snap"
check "resume takes the snapshot's kernel choices" out 0 \
    "kernel choices: 0 measured at set-up, 1 from the snapshot $tmp/every/tiny_4000.snap" -- \
    "$bin" -t 2 --data synthetic --no-test --iters $iters --snapshot-dir "$tmp/every" \
    --resume "$tmp/every/tiny_4000.snap" "$tmp/tiny.cfg"
expect "resumed without the choice file: final snapshot byte-identical" \
    cmp -s "$tmp/ref/tiny_final.snap" "$tmp/every/tiny_final.snap"

# Timing-based choices cost no reproducibility: a run measuring its own
# (not the choice cache's, which the first run above filled) and saving
# them, and a run given them, end with the same bits; so do two runs given
# one implementation.
mkdir "$tmp/measured" "$tmp/given" "$tmp/nhwc1" "$tmp/nhwc2"
check "a run measuring its choices" err 0 "" -- "$bin" -q -t 2 --data synthetic --no-test \
    --iters 300 --snapshot-dir "$tmp/measured" --save-kernel-choices "$tmp/measured.choices" \
    --kernel-choices measure "$tmp/tiny.cfg"
check "a run given them" err 0 "" -- "$bin" -q -t 2 --data synthetic --no-test --iters 300 \
    --snapshot-dir "$tmp/given" --kernel-choices "$tmp/measured.choices" "$tmp/tiny.cfg"
expect "given the measured choices: final snapshot byte-identical" \
    cmp -s "$tmp/measured/tiny_final.snap" "$tmp/given/tiny_final.snap"
for d in nhwc1 nhwc2; do
    check "--conv-impl nhwc ($d)" err 0 "" -- "$bin" -q -t 2 --data synthetic --no-test \
        --iters 300 --snapshot-dir "$tmp/$d" --conv-impl nhwc "$tmp/tiny.cfg"
done
expect "two runs with --conv-impl nhwc: final snapshots byte-identical" \
    cmp -s "$tmp/nhwc1/tiny_final.snap" "$tmp/nhwc2/tiny_final.snap"

# SIGINT and SIGTERM: stop after the iteration in flight, snapshot, exit 128 + signal.
# The signal comes once the run has trained 200 iterations (the handlers are
# up; the uninterrupted run of the resume's check then stays short).
interrupt() { # interrupt SIGNAL DIR
    "$bin" -t 2 --data synthetic --no-test --iters 2000000 --snapshot-dir "$2" --log-every 100 \
        --kernel-choices "$tmp/choices" "$tmp/tiny.cfg" >"$2/log" 2>&1 &
    pid=$!
    wait_for "$2/log" "iter 200/"
    kill -s "$1" $pid
    wait $pid
}
interrupt INT "$tmp/int"
expect "SIGINT: exit 130" [ $? -eq 130 ]
expect "SIGINT: the log says how to continue" grep -q "continue with --resume $tmp/int/tiny_" "$tmp/int/log"
n=$(newest "$tmp/int")
expect "SIGINT: a snapshot is written" [ -n "$n" ]
interrupt TERM "$tmp/term"
expect "SIGTERM: exit 143" [ $? -eq 143 ]
m=$(newest "$tmp/term")
expect "SIGTERM: a snapshot is written" [ -n "$m" ]
if [ -n "$n" ]; then
    mkdir "$tmp/int-ref"
    iters=$((n + 500))
    check "resume after SIGINT" err 0 "" -- \
        $train $iters --snapshot-dir "$tmp/int" --resume "$tmp/int/tiny_$n.snap" "$tmp/tiny.cfg"
    check "the same run uninterrupted" err 0 "" -- \
        $train $iters --snapshot-dir "$tmp/int-ref" "$tmp/tiny.cfg"
    expect "after SIGINT: final snapshot byte-identical" \
        cmp -s "$tmp/int/tiny_final.snap" "$tmp/int-ref/tiny_final.snap"
    iters=6000
fi

# kill -9 at random moments of a run snapshotting every 500 iterations;
# each resumes from the newest snapshot and must end where the reference did.
trials=5
for trial in $(seq $trials); do
    d=$tmp/kill$trial
    mkdir "$d"
    run "$d" --snapshot-every 500 &
    pid=$!
    # 20 to 240 ms into a run of about 300: before, between or during snapshots
    sleep "0.$(printf '%03d' $(( $(od -An -N1 -tu1 /dev/urandom) % 221 + 20 )))"
    kill -9 $pid 2>/dev/null
    wait $pid 2>/dev/null
    n=$(newest "$d")
    if [ -f "$d/tiny_final.snap" ]; then
        echo "     (trial $trial finished before the kill)"
    elif [ -n "$n" ]; then
        run "$d" --resume "$d/tiny_$n.snap"
    else
        run "$d"
    fi
    expect "kill -9 trial $trial (newest snapshot ${n:-none}): final snapshot byte-identical" \
        cmp -s "$tmp/ref/tiny_final.snap" "$d/tiny_final.snap"
    for k in $(ls "$d" | sed -n 's/^tiny_\([0-9][0-9]*\)\.snap$/\1/p'); do
        check "kill -9 trial $trial: tiny_$k.snap is complete" err 0 "" -- \
            $train $((k + 1)) --resume "$d/tiny_$k.snap" "$tmp/tiny.cfg"
    done
done

# Errors.
s1=$tmp/every/tiny_1000.snap
check "resume with another batch" err 2 "the snapshot was taken with batch 16, this run has 32: give -b 16" -- \
    "$bin" -t 2 -b 32 --data synthetic --iters $iters --resume "$s1" "$tmp/tiny.cfg"
check "resume with another seed" err 2 "taken with seed 1, this run has 5: give --seed 1" -- \
    "$bin" -t 2 --seed 5 --data synthetic --iters $iters --resume "$s1" "$tmp/tiny.cfg"
check "resume another network" err 2 "$s1: snapshot of a different network" -- \
    "$bin" -t 2 --data synthetic --iters $iters --resume "$s1" "$tmp/other.cfg"
sed 's/^momentum=0.9/momentum=0.9\nsolver=adam/' "$tmp/tiny.cfg" >"$tmp/adam.cfg"
sed 's/^momentum=0.9/momentum=0.9\nsolver=nesterov/' "$tmp/tiny.cfg" >"$tmp/nesterov.cfg"
check "resume with a solver keeping more state" err 2 "holds 1 plane of sgd solver state; this run's solver keeps 2" -- \
    "$bin" -t 2 --data synthetic --iters $iters --resume "$s1" "$tmp/adam.cfg"
check "resume with another solver" err 2 "the snapshot's solver is sgd, this run's nesterov: resume with solver=sgd" -- \
    "$bin" -t 2 --data synthetic --iters $iters --resume "$s1" "$tmp/nesterov.cfg"
check "resume past the end" err 2 "the snapshot is at iteration 1000 and this run has 500: nothing left to do" -- \
    "$bin" -t 2 --data synthetic --iters 500 --resume "$s1" "$tmp/tiny.cfg"
check "resume a missing file" err 2 "--resume $tmp/none.snap: cannot open snapshot" -- \
    "$bin" -t 2 --data synthetic --iters $iters --resume "$tmp/none.snap" "$tmp/tiny.cfg"
head -c 300 "$s1" >"$tmp/short.snap"
check "resume a truncated snapshot" err 2 "$tmp/short.snap: truncated snapshot" -- \
    "$bin" -t 2 --data synthetic --iters $iters --resume "$tmp/short.snap" "$tmp/tiny.cfg"
cp "$s1" "$tmp/flipped.snap"
printf 'X' | dd of="$tmp/flipped.snap" bs=1 seek=$(($(wc -c <"$s1") - 100)) conv=notrunc \
    2>/dev/null
check "resume a corrupt snapshot" err 2 "$tmp/flipped.snap: snapshot checksum mismatch" -- \
    "$bin" -t 2 --data synthetic --iters $iters --resume "$tmp/flipped.snap" "$tmp/tiny.cfg"
check "resume a file that is no snapshot" err 2 "$tmp/tiny.cfg: not a singletrain snapshot" -- \
    "$bin" -t 2 --data synthetic --iters $iters --resume "$tmp/tiny.cfg" "$tmp/tiny.cfg"
check "resume with other -t warns" err 0 "written by 2 workers, this run has 1" -- \
    "$bin" -q -t 1 --data synthetic --no-test --iters 1010 --resume "$s1" "$tmp/tiny.cfg"

# Snapshot names: the cfg's name without its last extension, so exp.a.cfg
# and exp.b.cfg keep apart (both wrote exp_final.snap), and .hidden.cfg
# writes .hidden_final.snap (it wrote _final.snap). A snapshot keeps the
# cfg's settings: resuming with another cfg is refused naming the key (it
# continued the other experiment).
mkdir "$tmp/names"
cp "$tmp/tiny.cfg" "$tmp/names/exp.a.cfg"
sed 's/^momentum=0.9/momentum=0.8/' "$tmp/tiny.cfg" >"$tmp/names/exp.b.cfg"
cp "$tmp/tiny.cfg" "$tmp/names/.hidden.cfg"
for c in exp.a exp.b .hidden; do
    check "$c.cfg trains" err 0 "" -- $train 20 --snapshot-dir "$tmp/names" "$tmp/names/$c.cfg"
done
expect "snapshot names keep the cfg's name up to its last dot" \
    [ "$(LC_ALL=C ls -A "$tmp/names" | grep snap | tr '\n' ' ')" = ".hidden_final.snap exp.a_final.snap exp.b_final.snap " ]
check "resume with another cfg names the setting" err 2 \
    "--resume $tmp/names/exp.a_final.snap was taken with another cfg: $tmp/names/exp.b.cfg:7: [net] momentum=0.8, but the snapshot has momentum=0.9" -- \
    $train 40 --resume "$tmp/names/exp.a_final.snap" "$tmp/names/exp.b.cfg"
sed -e 's/^momentum=0.9/momentum = 0.9  # as before/' -e 's/^\[maxpool\]/# pooling\n[maxpool]/' \
    "$tmp/tiny.cfg" >"$tmp/names/exp.c.cfg"
check "resume with the same settings written differently" err 0 "" -- \
    $train 40 --resume "$tmp/names/exp.a_final.snap" "$tmp/names/exp.c.cfg"
# A name too long for the directory is refused before training (it failed
# at the end, writing the final snapshot's temporary).
long=$(printf '%0240d' 0 | tr 0 n)
cp "$tmp/tiny.cfg" "$tmp/names/$long.cfg"
check "a cfg name too long for its snapshots: refused at start" err 2 "the snapshots' names would be too long for --snapshot-dir $tmp/names" -- \
    $train 2000 --snapshot-dir "$tmp/names" "$tmp/names/$long.cfg"

# Divergence: the learning rate jumps a billion-fold at iteration 300.
sed -e 's/^steps=3000/steps=300/' -e 's/^scales=0.5/scales=1e9/' "$tmp/tiny.cfg" >"$tmp/diverge.cfg"
mkdir "$tmp/div"
check "divergence names the iteration and the layer" err 1 "training diverged: the" "layer" -- \
    "$bin" -t 2 --data synthetic --no-test --iters $iters --snapshot-dir "$tmp/div" \
    --snapshot-every 100 "$tmp/diverge.cfg"
expect "divergence: the last good snapshot is named" \
    grep -q "the last good snapshot, iteration 300, is $tmp/div/diverge_300.snap" "$tmp/stdout"
expect "divergence: no snapshot after it and no final one" \
    [ "$(ls "$tmp/div" | tr '\n' ' ')" = "diverge_100.snap diverge_200.snap diverge_300.snap " ]
check "divergence: the last good snapshot loads" err 0 "" -- \
    "$bin" -q -t 2 --data synthetic --no-test --iters 301 --resume "$tmp/div/diverge_300.snap" \
    "$tmp/diverge.cfg"
# SSP and ASP stop on it as well (they trained on and saved NaN weights
# with exit code 0).
for sync in ssp:1 asp; do
    mkdir "$tmp/div-$sync"
    check "--sync $sync: divergence names the iteration and the layer" err 1 "training diverged: the" "layer" -- \
        "$bin" -t 2 --sync "$sync" --data synthetic --no-test --iters $iters \
        --snapshot-dir "$tmp/div-$sync" "$tmp/diverge.cfg"
    expect "--sync $sync: no snapshot of the diverged weights" [ -z "$(ls -A "$tmp/div-$sync")" ]
done

# Adam keeps two planes of moments and a step count: resume continues them.
mkdir "$tmp/adam-ref" "$tmp/adam"
check "adam: reference run" err 0 "" -- $train 2000 --snapshot-dir "$tmp/adam-ref" "$tmp/adam.cfg"
check "adam: snapshots every 700" err 0 "" -- \
    $train 2000 --snapshot-dir "$tmp/adam" --snapshot-every 700 "$tmp/adam.cfg"
rm -f "$tmp/adam/adam_final.snap"
check "adam: resume from 1400" err 0 "" -- \
    $train 2000 --snapshot-dir "$tmp/adam" --resume "$tmp/adam/adam_1400.snap" "$tmp/adam.cfg"
expect "adam: resumed final snapshot byte-identical" \
    cmp -s "$tmp/adam-ref/adam_final.snap" "$tmp/adam/adam_final.snap"

check "--snapshot-every with --sync ssp" err 2 "--snapshot-every with --sync ssp: periodic snapshots and exact resume need bulk-synchronous training" -- \
    "$bin" -t 2 --sync ssp:1 --data synthetic --iters 10 --snapshot-every 5 "$tmp/tiny.cfg"
check "--resume with --sync asp" err 2 "--resume with --sync asp" -- \
    "$bin" -t 2 --sync asp --data synthetic --iters 10 --resume "$s1" "$tmp/tiny.cfg"

# --weights: a starting point, not a resume.
check "--weights starts from a snapshot's weights at iteration 0" out 0 "starting from the weights in $s1" -- \
    "$bin" -t 2 --data synthetic --no-test --iters 10 --weights "$s1" "$tmp/tiny.cfg"
check "--weights and --resume together" err 2 "--weights and --resume: give one" -- \
    "$bin" -t 2 --data synthetic --iters 10 --weights "$s1" --resume "$s1" "$tmp/tiny.cfg"
check "--weights of another network" err 2 "--weights $s1: snapshot of a different network" -- \
    "$bin" -t 2 --data synthetic --iters 10 --weights "$s1" "$tmp/other.cfg"

# Temporaries of killed snapshot writes: a run removes NAME_*.snap.tmp.PID
# of processes that are gone, and nothing else (a live process's
# temporary, another network's, other files).
mkdir "$tmp/stale"
gone=$(sh -c 'echo $$')
for f in tiny_500.snap.tmp.$gone tiny_final.snap.tmp.$gone tiny_500.snap.tmp.$$ \
    other_500.snap.tmp.$gone tiny.cfg.tmp.$gone tiny_500.snap.tmp.x; do
    : >"$tmp/stale/$f"
done
check "a run removes the temporaries of killed snapshot writes" out 0 \
    "removed 2 temporary files of snapshot writes that were killed ($tmp/stale/tiny_*.snap.tmp.PID)" -- \
    "$bin" -t 1 --data synthetic --no-test --iters 2 --snapshot-dir "$tmp/stale" "$tmp/tiny.cfg"
expect "only those: a live process's, another network's and other files are kept" \
    [ "$(LC_ALL=C ls "$tmp/stale" | tr '\n' ' ')" = "other_500.snap.tmp.$gone tiny.cfg.tmp.$gone tiny_500.snap.tmp.$$ tiny_500.snap.tmp.x tiny_final.snap " ]

finish test_resume.sh
