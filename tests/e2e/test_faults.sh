#!/bin/sh
# kill -9 at random moments, many times. Training (20 trials, about half of
# them also killed while resuming; every other trial is killed in the
# middle of writing a snapshot, when its temporary file appears): after
# every kill each snapshot under its final name loads (size and CRC, by the
# program's own loader), the resume starts from the newest one, and the run
# ends with a final snapshot byte-identical to an uninterrupted run's; no
# temporary file of a killed snapshot write is left after the resume.
# Packing (20 trials, half of them over an existing store): after every kill
# the index OUT either does not exist (no store before) or opens and
# verifies as the old store (byte-identical) or the new one, never anything
# else; the next pack succeeds and removes the stripes and the index
# temporary the killed one left.
# tests/e2e/test_resume.sh has the snapshot errors and SIGINT / SIGTERM.
# usage: sh tests/e2e/test_faults.sh PATH_TO_SINGLETRAIN
set -u
. "$(dirname "$0")/../lib/check.sh"
suite_start "$@"
fmnist=/usr/share/datasets/fashion-mnist
# The snapshot loader without training: tools/snapdiff next to the binary
# (built with the tests), else a prediction, which loads the weights too.
snapdiff=$(dirname "$bin")/tools/snapdiff
{ printf 'P5\n8 8\n255\n'; head -c 64 /dev/zero; } >"$tmp/x.pgm"

# A random number from 0 to $1 - 1.
random_below() {
    echo $(($(od -An -N4 -tu4 /dev/urandom) % $1))
}
# Milliseconds since some fixed moment.
now_ms() {
    echo $(($(date +%s%N) / 1000000))
}
# A random time from $1 to $2 milliseconds, in seconds for sleep.
random_ms() {
    ms=$(($1 + $(random_below $(($2 - $1 + 1)))))
    echo "$((ms / 1000)).$(printf '%03d' $((ms % 1000)))"
}

# ---------------------------------------------------------------- training

# A network whose snapshots (2.2 MB) take a while to write next to its
# iterations, with dropout (a random stream that must continue) and a
# learning rate that steps at iteration 150, on synthetic data.
cat >"$tmp/wide.cfg" <<'EOF'
[net]
batch=4
height=8
width=8
channels=1
learning_rate=0.02
momentum=0.9
decay=0.0005
policy=steps
steps=150
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

[connected]
output=4096
activation=relu

[dropout]
probability=0.3

[connected]
output=3
activation=linear

[softmax]
EOF
iters=300
every=30
cfg=$tmp/wide.cfg
# Every run takes the same kernel choices (measured once here): with its
# own measurement a run may choose another convolution implementation and
# end with other bits than the reference.
"$bin" -q -t 2 --data synthetic --no-test --iters 1 --save-kernel-choices "$tmp/choices" "$cfg" ||
    exit 2
# the standard run: $train DIR [options...] (a simple command: $! is its pid)
train="$bin -t 2 --data synthetic --no-test --iters $iters --kernel-choices $tmp/choices --snapshot-every $every --snapshot-dir"
newest() { # DIR: the highest iteration of DIR's periodic snapshots, or nothing
    ls "$1" | sed -n 's/^wide_\([0-9][0-9]*\)\.snap$/\1/p' | sort -n | tail -1
}
loads() { # SNAPSHOT: the program's loader accepts it
    if [ -x "$snapdiff" ]; then
        "$snapdiff" "$cfg" "$1" "$1" 0 >/dev/null 2>&1
    else
        "$bin" predict "$cfg" "$1" "$tmp/x.pgm" >/dev/null 2>&1
    fi
}
corrupt=0
check_snapshots() { # DIR: count the snapshots under their final names that do not load
    for f in "$1"/wide_*.snap; do
        [ -e "$f" ] || continue
        if ! loads "$f"; then
            corrupt=$((corrupt + 1))
            echo "     corrupt under its final name: $f ($(wc -c <"$f") bytes)"
        fi
    done
}
# kill_run WHEN DIR [options...]: start the run and kill -9 it: WHEN random,
# at a random moment of the reference's duration; WHEN write, once its
# next snapshot's temporary file exists (polled by globbing, no fork), after
# a random delay. Then check the snapshots.
in_write=0
kill_run() {
    kill_when=$1 dir=$2
    shift 2
    $train "$dir" "$@" "$cfg" >>"$dir/log" 2>&1 &
    pid=$!
    if [ "$kill_when" = random ]; then
        sleep "$(random_ms $((ref_ms / 10)) $ref_ms)"
    else
        sleep "$(random_ms 0 $((ref_ms * 8 / 10)))"
        while kill -0 $pid 2>/dev/null; do
            set -- "$dir"/*.snap.tmp.*
            [ -e "$1" ] && break
        done
    fi
    kill -9 $pid 2>/dev/null
    wait $pid 2>/dev/null
    set -- "$dir"/*.snap.tmp.$pid
    [ -e "$1" ] && in_write=$((in_write + 1))
    check_snapshots "$dir"
}

mkdir "$tmp/ref"
start=$(now_ms)
check "uninterrupted reference run" err 0 "" -- $train "$tmp/ref" -q "$cfg"
ref_ms=$(($(now_ms) - start))
echo "     (reference run: $ref_ms ms, $((iters / every - 1)) periodic snapshots)"

trials=20
kills=0
for trial in $(seq $trials); do
    d=$tmp/train$trial
    mkdir "$d"
    when=random moment=" at a random moment"
    [ $((trial % 2)) -eq 0 ] && when=write moment=" while writing a snapshot"
    kill_run $when "$d"
    kills=$((kills + 1))
    # about half of the trials are killed a second time, while resuming
    n=$(newest "$d")
    if [ ! -f "$d/wide_final.snap" ] && [ -n "$n" ] && [ "$(random_below 2)" -eq 1 ]; then
        kill_run random "$d" --resume "$d/wide_$n.snap"
        kills=$((kills + 1))
    fi
    n=$(newest "$d")
    how="finished before the kill"
    if [ ! -f "$d/wide_final.snap" ] && [ -n "$n" ]; then
        how="resumed from $n"
        $train "$d" --resume "$d/wide_$n.snap" "$cfg" >"$d/resume.log" 2>&1
        expect "training trial $trial: the resume starts from the newest snapshot ($n)" \
            grep -q "resuming from $d/wide_$n.snap at iteration $n of $iters" "$d/resume.log"
    elif [ ! -f "$d/wide_final.snap" ]; then
        how="restarted: no snapshot yet"
        $train "$d" -q "$cfg" >"$d/resume.log" 2>&1
    fi
    expect "training trial $trial (killed$moment, $how): final snapshot byte-identical" \
        cmp -s "$tmp/ref/wide_final.snap" "$d/wide_final.snap"
    left=$(ls "$d" | grep '\.tmp\.' | tr '\n' ' ')
    expect "training trial $trial: no temporary of a killed snapshot write is left${left:+: $left}" \
        [ -z "$left" ]
done
expect "no snapshot was ever corrupt under its final name ($kills kills)" [ "$corrupt" -eq 0 ]
expect "some kills landed while a snapshot was being written ($in_write of $kills)" [ "$in_write" -gt 0 ]
echo "     ($kills kills in $trials training trials, $in_write of them while a snapshot was being written: its temporary file was left, never the final name, and the resume removed it)"

# ----------------------------------------------------------------- packing

images=$fmnist/t10k-images-idx3-ubyte.gz
labels=$fmnist/t10k-labels-idx1-ubyte.gz
# $pack OUT --limit N: the first N test images into the store OUT, 64 KB blocks
pack="$bin pack -q $images --labels $labels --stripe-unit 64K"
records() { # OUT: the record count of a store that opens and verifies, else nothing
    "$bin" read "$1" --batches 1 2>/dev/null | sed -n "s|^$1: \\([0-9]*\\) records.*|\\1|p"
}
generation() { # OUT: the 16 hex digits naming the stripes of the store OUT
    od -An -tx8 -j16 -N8 "$1" | tr -d ' '
}
mkdir "$tmp/old" "$tmp/new"
check "pack the old store (6000 records)" err 0 "" -- $pack "$tmp/old/s" --limit 6000
start=$(now_ms)
check "pack the new store (10000 records)" err 0 "" -- $pack "$tmp/new/s" --limit 10000
pack_ms=$(($(now_ms) - start))
echo "     (a pack of 10000 records: $pack_ms ms)"
expect "the new store verifies" [ "$(records "$tmp/new/s")" = 10000 ]

for trial in $(seq $trials); do
    d=$tmp/pack$trial
    mkdir "$d"
    had_old=no
    if [ $((trial % 2)) -eq 0 ]; then
        cp "$tmp/old"/s* "$d/"
        had_old=yes
    fi
    $pack "$d/s" --limit 10000 >/dev/null 2>&1 &
    pid=$!
    sleep "$(random_ms 0 $((pack_ms * 12 / 10)))"
    kill -9 $pid 2>/dev/null
    wait $pid 2>/dev/null
    if [ ! -e "$d/s" ]; then
        state=absent
        [ $had_old = no ] && good=yes || good=no
    else
        case $(records "$d/s") in
        10000) state=new good=yes ;;
        6000) state=old good=no; cmp -s "$tmp/old/s" "$d/s" && good=yes ;;
        *) state="corrupt: it does not open and verify" good=no ;;
        esac
    fi
    expect "pack trial $trial (a store before: $had_old): after kill -9 the index is $state" \
        [ $good = yes ]
    check "pack trial $trial: packing again succeeds" err 0 "" -- $pack "$d/s" --limit 10000
    gen=$(generation "$d/s")
    # A kill while the index was being written leaves its temporary file
    # (s.tmp.PID, never taken for a store), which the next pack removes;
    # any other leftover is a fault.
    left=$(ls "$d" | grep -v -e "^s$" -e "^s\.$gen\." | tr '\n' ' ')
    expect "pack trial $trial: only the new store and its generation's stripes are left${left:+: $left}" \
        [ -z "$left" ]
done

finish test_faults.sh
