#!/bin/sh
# SIGINT, SIGTERM and broken output on one node (test_multinode_faults.sh has
# them under mpirun). A signal during the set-up of a large network stops
# it at once with 128 + the signal and leaves no file (the run is frozen
# with SIGSTOP at its layer table, so that the signal surely lands in the
# set-up); one after the last iteration, during the final test phase,
# still completes the metrics file and the final snapshot; SSP and ASP
# runs stop with a snapshot; two SIGINTs within a second are one request
# (timeout(1) delivers one twice), one more than a second later quits at
# once; a pack stopped by SIGINT removes its stripes,
# and a second pack into the same store is refused while the first runs;
# stdout through `head -3` or into /dev/full: the run finishes (snapshot,
# metrics) and exits 1 with a message. Every wait polls the run's output
# with a generous limit rather than sleeping a fixed time.
# usage: sh tests/e2e/test_signals.sh PATH_TO_SINGLETRAIN
set -u
. "$(dirname "$0")/../lib/check.sh"
suite_start "$@"
root=$(cd "$(dirname "$0")/../.." && pwd)
cp "$fixtures/tiny.cfg" "$tmp/tiny.cfg"

# stop_when PID FILE TEXT SIGNAL: once FILE holds TEXT, send SIGNAL to the
# background run PID and wait for it; rc gets its exit code.
stop_when() {
    wait_for "$2" "$3"
    kill -s "$4" "$1"
    wait "$1"
    rc=$?
}
now_ms() {
    echo $(($(date +%s%N) / 1000000))
}

# ------------------------------------------------------------ the set-up

# 4,000 layers take a moment to set up after their table is printed; the
# run is stopped there, sent SIGTERM and continued.
{
    sed '/^\[softmax\]/,$d' "$tmp/tiny.cfg"
    i=0
    while [ $i -lt 4000 ]; do
        printf '[connected]\noutput=3\nactivation=linear\n\n'
        i=$((i + 1))
    done
    printf '[softmax]\n'
} >"$tmp/deep.cfg"
mkdir "$tmp/setup"
"$bin" -t 1 --data synthetic --iters 5 --no-test --snapshot-dir "$tmp/setup" \
    --metrics "$tmp/setup/m.csv" "$tmp/deep.cfg" >"$tmp/setup.out" 2>"$tmp/setup.err" &
pid=$!
wait_for "$tmp/setup.out" "4003 softmax"
kill -STOP $pid
kill -TERM $pid
start=$(now_ms)
kill -CONT $pid
wait $pid
rc=$?
ms=$(($(now_ms) - start))
expect "SIGTERM in the set-up: exit 143 (got $rc)" [ "$rc" -eq 143 ]
expect "SIGTERM in the set-up: stopped before training began" \
    sh -c "! grep -q '^training:' '$tmp/setup.out'"
expect "SIGTERM in the set-up: it says so" grep -q "Terminated: stopped at once" "$tmp/setup.err"
expect "SIGTERM in the set-up: stopped at once ($ms ms, 5 s allowed)" [ "$ms" -lt 5000 ]
expect "SIGTERM in the set-up: no file left (metrics, snapshot)" \
    [ -z "$(ls -A "$tmp/setup")" ]

# ------------------------------------------ after the last iteration

# LeNet-5 tests on 20,000 synthetic images after its last iteration (about
# 3 s here, all of it run: the test phase finishes); SIGTERM comes once the
# last iteration is logged, within wait_for's 50 ms poll.
mkdir "$tmp/final"
"$bin" -t 2 --data synthetic --iters 20 --log-every 20 --train-images 640 \
    --test-images 20000 --snapshot-dir "$tmp/final" --metrics "$tmp/final/m.csv" \
    "$root/data/lenet.cfg" >"$tmp/final.out" 2>"$tmp/final.err" &
stop_when $! "$tmp/final.out" "iter 20/20" TERM
expect "SIGTERM in the final test phase: exit 143 (got $rc)" [ "$rc" -eq 143 ]
expect "SIGTERM in the final test phase: the metrics file is complete, no .partial" \
    [ -s "$tmp/final/m.csv" ] && [ ! -e "$tmp/final/m.csv.partial" ]
expect "SIGTERM in the final test phase: the test row is in it" \
    grep -q "^test,20," "$tmp/final/m.csv"
expect "SIGTERM in the final test phase: the final snapshot is written" \
    [ -s "$tmp/final/lenet_final.snap" ]
expect "SIGTERM in the final test phase: it says so" \
    grep -q "Terminated after the last iteration: the run finished" "$tmp/final.err"

# ------------------------------------------------ one request, two signals

# timeout(1) forwards a SIGINT to its child, then to its process group
# (the child again): two signals within milliseconds are one request, and
# the run stops gracefully with its snapshot. A signal more than a second
# after the first still quits at once. The run is frozen (SIGSTOP) between
# the two, so that the second surely lands before the graceful stop is
# over; the clock runs on meanwhile (LeNet-5 at batch 2048: the stop takes
# a few hundred milliseconds here).
for gap in 0 1.2; do
    apart=$(awk "BEGIN { print $gap + 0.1 }")
    d=$tmp/twice-$gap
    mkdir "$d"
    "$bin" -t 1 -b 2048 --conv-impl gemm --data synthetic --iters 100 --log-every 1 --no-test \
        --snapshot-dir "$d" "$root/data/lenet.cfg" >"$d.out" 2>"$d.err" &
    pid=$!
    wait_for "$d.out" "iter 1/"
    kill -INT $pid
    sleep 0.1
    kill -STOP $pid
    sleep $gap
    kill -INT $pid
    kill -CONT $pid
    wait $pid
    rc=$?
    expect "SIGINT twice, $apart s apart: exit 130 (got $rc)" [ "$rc" -eq 130 ]
    if [ $gap = 0 ]; then
        expect "SIGINT twice, $apart s apart: one request: the run stopped with its snapshot" \
            [ -n "$(ls "$d" | grep '^lenet_[0-9]*\.snap$')" ]
        expect "SIGINT twice, $apart s apart: not taken as asking again" \
            sh -c "! grep -q 'Interrupt again' '$d.err'"
    else
        expect "SIGINT twice, $apart s apart: the second quits at once" \
            grep -q "Interrupt again: stopped at once" "$d.err"
        expect "SIGINT twice, $apart s apart: no snapshot" [ -z "$(ls -A "$d")" ]
    fi
done

# ------------------------------------------------------------- SSP, ASP

for sync in ssp:1 asp; do
    d=$tmp/${sync%:*}
    mkdir "$d"
    "$bin" -t 2 --sync $sync --data synthetic --iters 100000000 --log-every 200 \
        --snapshot-dir "$d" "$tmp/tiny.cfg" >"$d.out" 2>"$d.err" &
    stop_when $! "$d.out" "iter 400/" TERM
    expect "--sync $sync, SIGTERM: exit 143 (got $rc)" [ "$rc" -eq 143 ]
    snap=$(ls "$d" | grep '^tiny_[0-9]*\.snap$')
    expect "--sync $sync, SIGTERM: a snapshot is written (${snap:-none})" [ -n "$snap" ]
    expect "--sync $sync, SIGTERM: it says how to start from it" \
        grep -q "start from $d/tiny_[0-9]*.snap with --weights" "$d.err"
done

# ------------------------------------------------------------------ pack

# 6,000 entries of one 512 x 512 image resized to 64 x 64 on one thread:
# seconds of decoding, its stripes created at the start.
{ printf 'P5\n512 512\n255\n'; head -c 262144 /dev/urandom; } >"$tmp/big.pgm"
i=0
while [ $i -lt 6000 ]; do
    echo "$tmp/big.pgm 0"
    i=$((i + 1))
done >"$tmp/slow.txt"
pack="$bin pack -q $tmp/slow.txt --image-size 64,64 --channels 1 --io-threads 1 --stripe-unit 64K"
mkdir "$tmp/pk"
check "pack the store that is there before" err 0 "" -- $pack "$tmp/pk/s" --limit 100
old=$(ls "$tmp/pk" | tr '\n' ' ')
$pack "$tmp/pk/s" 2>"$tmp/pack.err" &
pid=$!
wait_for "$tmp/pk/s.lock" "$pid"
check "a second pack into the same store is refused, naming the first" err 1 \
    "$tmp/pk/s: another pack (process $pid) is writing this store" -- $pack "$tmp/pk/s"
kill -INT $pid
wait $pid
rc=$?
expect "SIGINT during pack: exit 130 (got $rc)" [ "$rc" -eq 130 ]
expect "SIGINT during pack: it says so" grep -q "Interrupt: stopped before the store was complete" \
    "$tmp/pack.err"
now=$(ls "$tmp/pk" | tr '\n' ' ')
expect "SIGINT during pack: the old store and nothing else is left ($now)" [ "$now" = "$old" ]
check "the old store still reads" out 0 "100 records" -- "$bin" read "$tmp/pk/s" --batches 1

# ---------------------------------------------------------- broken stdout

mkdir "$tmp/pipe"
{
    "$bin" -t 1 --data synthetic --iters 2000 --log-every 10 --no-test --snapshot-dir "$tmp/pipe" \
        --metrics "$tmp/pipe/m.csv" "$tmp/tiny.cfg" 2>"$tmp/pipe.err"
    echo $? >"$tmp/pipe.rc"
} | head -3 >/dev/null
rc=$(cat "$tmp/pipe.rc")
expect "stdout through head -3: exit 1, not killed by SIGPIPE (got $rc)" [ "$rc" -eq 1 ]
expect "stdout through head -3: the run finished (final snapshot, metrics)" \
    [ -s "$tmp/pipe/tiny_final.snap" ] && [ -s "$tmp/pipe/m.csv" ] && [ ! -e "$tmp/pipe/m.csv.partial" ]
expect "stdout through head -3: the metrics file has every row" grep -q "^train,2000," "$tmp/pipe/m.csv"
expect "stdout through head -3: the broken pipe is named" \
    grep -q "writing to standard output failed: Broken pipe" "$tmp/pipe.err"
expect "stdout through head -3: the end says the output is incomplete" \
    grep -q "standard output: a write failed: the output is incomplete" "$tmp/pipe.err"
if [ -w /dev/full ]; then
    "$bin" -t 1 --data synthetic --iters 20 --no-test "$tmp/tiny.cfg" >/dev/full 2>"$tmp/full.err"
    rc=$?
    expect "stdout on /dev/full: exit 1 (got $rc)" [ "$rc" -eq 1 ]
    expect "stdout on /dev/full: named" grep -q "writing to standard output failed: No space left" \
        "$tmp/full.err"
    "$bin" read "$tmp/pk/s" --batches 1 >/dev/full 2>"$tmp/full.err"
    rc=$?
    expect "read with stdout on /dev/full: exit 1 (got $rc)" [ "$rc" -eq 1 ]
fi

finish test_signals.sh
