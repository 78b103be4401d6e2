#!/bin/sh
# Training across nodes under mpirun when things differ or go wrong (the
# numerics of the same runs: test_multinode.sh, which the ISA matrix runs
# again at each oneDNN level; nothing here depends on the kernels' ISA):
# the log's global batch and bytes across supernodes; ranks that differ or
# fail at set-up stop every rank with a message, no hang, and so does a
# rank that differs in any setting that changes the computation (momentum,
# decay, policy, data, backend, --conv-impl, --parallel); a snapshot of 3
# ranks resumed by 1 or 2 says that the global batch changed; more ranks
# than cores are told to be fewer.
# --patience, decided by rank 0's test phases, ends every rank cleanly at
# the same iteration.
# Signals: SIGTERM to mpirun and SIGINT to one rank stop every rank at the
# same iteration, rank 0 snapshots, the metrics file is completed and every
# rank exits 128 + the signal; a rank failing in training is named with its
# reason by rank 0; a stopped rank (SIGSTOP), rank 0 or not, ends the run
# after --peer-timeout with a message, the other waiting without spinning.
# Fails, naming the package (mpich), when mpirun is missing.
# usage: sh tests/mpi/test_multinode_faults.sh PATH_TO_SINGLETRAIN
set -u
. "$(dirname "$0")/../lib/check.sh"
suite_start "$@"
require_cmd mpirun mpich
root=$(cd "$(dirname "$0")/../.." && pwd)
cfg=$root/data/lenet.cfg

cd "$root" || exit 2
# The log: global batch, and bytes across supernodes (all of them with one
# rank per supernode, none with both ranks in one). Synthetic images, as in
# most runs here: reading Fashion-MNIST took each rank 0.3 s.
check "the log gives the global batch" out 0 "nodes: 2 ranks x batch 12 = a global batch of 24" -- \
    mpirun -np 2 "$bin" -t 2 -b 12 --data synthetic --train-images 2000 --no-test --iters 3 \
    --allreduce rhd --supernode-size 1 "$cfg"
line=$(grep "all-reduce on rank 0" "$tmp/stdout")
sent=$(echo "$line" | sed -n 's/.*: \([0-9.]*\) MB sent per iteration, \([0-9.]*\) MB of it.*/\1/p')
cross=$(echo "$line" | sed -n 's/.*: \([0-9.]*\) MB sent per iteration, \([0-9.]*\) MB of it.*/\2/p')
expect "Q=1: every byte sent crosses ($sent MB, $cross MB)" \
    [ -n "$sent" -a "$sent" = "$cross" -a "$sent" != "0.000" ]
check "Q=2: nothing crosses" out 0 "MB sent per iteration, 0.000 MB of it across supernodes" -- \
    mpirun -np 2 "$bin" -t 2 -b 12 --data synthetic --train-images 2000 --no-test --iters 3 \
    --allreduce rhd --supernode-size 2 "$cfg"

# Set-up failures stop every rank.
check "ranks with different batches" err 2 "rank 1 of 2 differs from rank 0 in the batch (-b)" -- \
    mpirun -np 1 "$bin" -t 2 -b 12 --data synthetic --iters 5 "$cfg" : \
    -np 1 "$bin" -t 2 -b 16 --data synthetic --iters 5 "$cfg"
# (tests/fixtures/tiny.cfg against LeNet-5: cifar-alexnet.cfg, here once,
# measured its convolutions for 6 s before the ranks compared)
check "ranks with different networks" err 2 "differs from rank 0 in the network (cfg hash)" -- \
    mpirun -np 1 "$bin" -t 2 --data synthetic --iters 5 "$cfg" : \
    -np 1 "$bin" -t 2 --data synthetic --iters 5 "$fixtures/tiny.cfg"
check "a rank that cannot set up" err 2 "rank 1 of 2 failed to set up" "$tmp/none.cfg: cannot open" -- \
    mpirun -np 1 "$bin" -t 2 --data synthetic --iters 5 "$cfg" : \
    -np 1 "$bin" -t 2 --data synthetic --iters 5 "$tmp/none.cfg"
check "--sync asp across nodes" err 2 "training across nodes (mpirun) is bulk-synchronous only" -- \
    mpirun -np 2 "$bin" -t 2 --sync asp --data synthetic --iters 5 "$cfg"
check "an unknown --allreduce" err 2 "--allreduce tree: unknown algorithm (expected mpi, ring, rhd, rhd-supernode, binomial, ps, butterfly or onesided)" -- \
    mpirun -np 2 "$bin" -t 2 --allreduce tree --data synthetic --iters 5 "$cfg"

# Every setting that changes the computation is compared (rank 1 differs).
tiny=$tmp/tiny.cfg
cp "$fixtures/tiny.cfg" "$tiny"
differ() { # NAME WHAT RANK0_ARGS -- RANK1_ARGS
    _name=$1 _what=$2
    shift 2
    _r0=
    while [ "$1" != -- ]; do _r0="$_r0 $1"; shift; done
    shift
    # shellcheck disable=SC2086
    check "ranks that differ in $_name" err 2 "rank 1 of 2 differs from rank 0 in $_what" -- \
        mpirun -np 1 "$bin" -q -t 1 --iters 3 --no-test $_r0 : -np 1 "$bin" -q -t 1 --iters 3 \
        --no-test "$@"
}
sed 's/^momentum=0.9/momentum=0.8/' "$tiny" >"$tmp/momentum.cfg"
sed 's/^momentum=0.9/momentum=0.9\ndecay=0.001/' "$tiny" >"$tmp/decay.cfg"
sed 's/^momentum=0.9/momentum=0.9\npolicy=steps\nsteps=5\nscales=0.5/' "$tiny" >"$tmp/policy.cfg"
sed 's/^activation=relu/activation=leaky/' "$tiny" >"$tmp/leaky.cfg"
differ "momentum=" "the momentum (momentum= in [net])" --data synthetic "$tiny" -- \
    --data synthetic "$tmp/momentum.cfg"
differ "decay=" "the weight decay (decay= in [net])" --data synthetic "$tiny" -- \
    --data synthetic "$tmp/decay.cfg"
differ "policy=" "the learning-rate policy (policy= in [net])" --data synthetic "$tiny" -- \
    --data synthetic "$tmp/policy.cfg"
differ "a layer's activation=" "a key of the cfg" --data synthetic "$tiny" -- \
    --data synthetic "$tmp/leaky.cfg"
differ "--data synthetic" "the training data's kind" "$cfg" -- --data synthetic "$cfg"
differ "--train-images" "the number of training records (--train-images" --data synthetic \
    "$tiny" -- --data synthetic --train-images 512 "$tiny"
differ "--backend ref" "the backend (--backend)" --data synthetic "$tiny" -- \
    --data synthetic --backend ref "$tiny"
differ "--conv-impl" "the convolution implementation (--conv-impl)" --data synthetic "$tiny" \
    -- --data synthetic --conv-impl gemm "$tiny"
differ "--parallel" "the parallelism (--parallel, as resolved)" --data synthetic "$tiny" -- \
    --data synthetic --parallel hybrid "$tiny"
differ "--rank-update" "--rank-update" --data synthetic "$tiny" -- \
    --data synthetic --rank-update partitioned "$tiny"
differ "--snapshot-every, partitioned" "--snapshot-every (with --rank-update partitioned" \
    --data synthetic --rank-update partitioned --snapshot-dir "$tmp/differ0" "$tiny" -- \
    --data synthetic --rank-update partitioned --snapshot-dir "$tmp/differ1" --snapshot-every 2 \
    "$tiny"
# More ranks on this host than cores (MPI_LOCALNRANKS, which mpirun sets,
# raised above the cores): even -t 1 --intra 1 oversubscribes, and the
# warning says to start fewer ranks (it advised -t 1 --intra 1, the
# setting already). Left out when the process may not use every core
# (the ranks are then taken as bound to cores of their own).
cores=$(nproc)
if [ "$cores" -eq "$(getconf _NPROCESSORS_ONLN)" ]; then
    check "more ranks than cores: the warning says to start fewer" err 0 \
        "x $((cores + 1)) ranks on this host = $((cores + 1)) threads on $cores usable core" \
        "more ranks than cores: even one thread a rank is too many; start at most $cores rank" -- \
        mpirun -np 2 env MPI_LOCALNRANKS=$((cores + 1)) "$bin" -q -t 1 --iters 1 --no-test \
        --data synthetic "$tiny"
    expect "... and not -t 1 --intra 1, which is the setting" \
        sh -c "! grep -q -e '-t 1 --intra 1 gives' '$tmp/stderr'"
else
    echo "SKIP more ranks than cores: this process may use $cores of $(getconf _NPROCESSORS_ONLN) cores"
fi

# A snapshot of a 3-rank run resumed by one process or two ranks: -b is
# per rank, so the global batch drops from 24 to 8 or 16; said, as a
# resume with another -t is (it went on silently); by 3 ranks, nothing.
mkdir "$tmp/ranks"
check "a 3-rank run writes its snapshot" err 0 "" -- \
    mpirun -np 3 "$bin" -q -t 1 --iters 2 --no-test --data synthetic --snapshot-dir "$tmp/ranks" \
    "$tiny"
check "resumed by one process: the rank counts and global batches are named" err 0 \
    "$tmp/ranks/tiny_final.snap was written by a run of 3 ranks, this run has 1: -b is per rank, so the global batch was 24 and is now 8" -- \
    "$bin" -q -t 1 --iters 4 --no-test --data synthetic --resume "$tmp/ranks/tiny_final.snap" "$tiny"
check "resumed by 2 ranks: so are they" err 0 "a run of 3 ranks, this run has 2" -- \
    mpirun -np 2 "$bin" -q -t 1 --iters 4 --no-test --data synthetic --resume \
    "$tmp/ranks/tiny_final.snap" "$tiny"
check "resumed by 3 ranks" err 0 "" -- mpirun -np 3 "$bin" -q -t 1 --iters 4 --no-test \
    --data synthetic --resume "$tmp/ranks/tiny_final.snap" "$tiny"
expect "... without a word about ranks" sh -c "! grep -q 'ranks, this run has' '$tmp/stderr'"
check "ranks that differ only in output and test options run" err 0 "" -- \
    mpirun -np 1 "$bin" -q -t 1 --iters 3 --data synthetic "$tiny" : -np 1 "$bin" -q -t 1 \
    --iters 3 --data synthetic --log-every 1 --test-images 10 --io-threads 2 "$tiny"

# Test-driven stopping: rank 0 alone tests, and its decision reaches the
# other rank through the next iteration's control sum, so both end at the
# iteration rank 0 stopped at, cleanly (a rank going on alone would fail at
# its next all-reduce, or wait: each rank's exit code is recorded). At
# learning rate 0 every test phase ties with the first: --patience 2 stops
# after the third, at iteration 15 of 1000.
mkdir "$tmp/patience"
sed 's/^learning_rate=.*/learning_rate=0/' "$tiny" >"$tmp/frozen.cfg"
RC_DIR=$tmp/patience check "mpirun -np 2 --patience 2: rank 0 stops at its third test phase" out 0 \
    "stopping at iteration 15: no improvement for 2 test phases (--patience 2), best " -- \
    mpirun -np 2 sh -c '"$@"; echo $? >"$RC_DIR/rc.$PMI_RANK"' sh \
    "$bin" -t 1 --data synthetic --iters 1000 --test-interval 5 --log-every 5 --patience 2 \
    --peer-timeout 60 --snapshot-dir "$tmp/patience" "$tmp/frozen.cfg"
expect "--patience across nodes: every rank exits 0 ($(cat "$tmp/patience"/rc.* 2>/dev/null | tr '\n' ' '))" \
    [ "$(cat "$tmp/patience/rc.0" "$tmp/patience/rc.1" 2>/dev/null | tr '\n' ' ')" = "0 0 " ]
expect "--patience across nodes: rank 0 ran 15 iterations and says why" \
    grep -q "^stopped early at iteration 15 of 1000: no improvement" "$tmp/stdout"
expect "--patience across nodes: 'done:' counts 15 iterations" grep -q "^done: 15 iterations" \
    "$tmp/stdout"
expect "--patience across nodes: no progress line past iteration 15" \
    [ -z "$(grep -e "^iter 20/" -e "^test  iter 20 " "$tmp/stdout")" ]
expect "--patience across nodes: the best and final snapshots are written" \
    [ -s "$tmp/patience/frozen_best.snap" -a -s "$tmp/patience/frozen_final.snap" ]

# Signals. Each rank runs under a shell that records its exit code (and
# ignores the signals itself: the rank blocks and takes them); mpirun's own
# code after SIGTERM is its own business (MPICH's hydra returns 0).
ranks_of() { # DIR: the pids of the ranks writing into DIR (not their shells)
    pgrep -f -- "^$bin -t 1 .*--snapshot-dir $1 "
}
signal_run() { # DIR [options]: 2 ranks, each recording its code in DIR/rc.RANK
    _d=$1
    shift
    mkdir "$_d"
    RC_DIR=$_d mpirun -np 2 sh -c 'trap "" INT TERM; "$@"; echo $? >"$RC_DIR/rc.$PMI_RANK"' sh \
        "$bin" -t 1 --data synthetic --iters 100000000 --log-every 100 --no-test \
        --snapshot-dir "$_d" "$@" "$tiny" >"$_d/out" 2>"$_d/err" &
    run_pid=$!
    wait_for "$_d/out" "iter 300/"
    # a run that does not stop fails the checks instead of hanging the suite
    (sleep 90 && kill -9 $(ranks_of "$_d")) 2>/dev/null &
    watchdog=$!
}
signal_end() { # the run's end: its watchdog is no longer needed
    wait $run_pid
    kill $watchdog 2>/dev/null
}
signal_checks() { # NAME DIR CODE
    n=$(ls "$2" | sed -n 's/^tiny_\([0-9]*\)\.snap$/\1/p')
    expect "$1: every rank exits $3 ($(cat "$2"/rc.* 2>/dev/null | tr '\n' ' '))" \
        [ "$(cat "$2"/rc.0 "$2"/rc.1 2>/dev/null | tr '\n' ' ')" = "$3 $3 " ]
    expect "$1: rank 0 saved a snapshot (${n:-none})" [ -n "$n" ]
    # counted as matches, not lines: mpirun forwards the two ranks' stderr
    # into one file, where a busy machine can join their lines
    expect "$1: both ranks stopped after iteration ${n:-?}" \
        [ "$(grep -o "interrupted at iteration $n of" "$2/err" | wc -l)" -eq 2 ]
}
signal_run "$tmp/sigterm" --metrics "$tmp/sigterm/m.csv" --allreduce ring
start=$(($(date +%s%N) / 1000000))
kill -TERM $run_pid
signal_end
echo "     (SIGTERM to mpirun: every rank ended $(($(date +%s%N) / 1000000 - start)) ms later)"
signal_checks "SIGTERM to mpirun" "$tmp/sigterm" 143
expect "SIGTERM to mpirun: the metrics file is complete, no .partial" \
    [ -s "$tmp/sigterm/m.csv" ] && [ ! -e "$tmp/sigterm/m.csv.partial" ]
signal_run "$tmp/sigint"
kill -INT $(ranks_of "$tmp/sigint" | tail -1)
signal_end
signal_checks "SIGINT to one rank" "$tmp/sigint" 130
expect "SIGINT to one rank: the other says why it stops" \
    grep -q "Interrupt on another rank: every rank stops" "$tmp/sigint/err"

# A rank failing in training: rank 1's image list has a cut image.
mkdir "$tmp/img"
i=0
while [ $i -lt 32 ]; do
    { printf 'P5\n8 8\n255\n'; head -c 64 /dev/urandom; } >"$tmp/img/$i.pgm"
    echo "$tmp/img/$i.pgm $((i % 3))"
    i=$((i + 1))
done >"$tmp/good.txt"
{ printf 'P5\n8 8\n255\n'; head -c 10 /dev/urandom; } >"$tmp/img/cut.pgm"
sed "17s|.*|$tmp/img/cut.pgm 1|" "$tmp/good.txt" >"$tmp/bad.txt"
echo "train=$tmp/good.txt" >"$tmp/good.data"
echo "train=$tmp/bad.txt" >"$tmp/bad.data"
check "a rank failing in training: rank 0 names it and its reason" err 2 \
    "rank 0: rank 1 of 2 failed: $tmp/bad.txt:17: $tmp/img/cut.pgm: cannot decode image" -- \
    mpirun -np 1 "$bin" -q -t 1 --iters 50 --no-test --data "$tmp/good.data" "$tiny" : \
    -np 1 "$bin" -q -t 1 --iters 50 --no-test --data "$tmp/bad.data" "$tiny"
# Rank 0 tests alone while the others go on: its test set failing mid-run
# ends every rank at once with its message (not after --peer-timeout).
printf 'train=%s\ntest=%s\n' "$tmp/good.txt" "$tmp/bad.txt" >"$tmp/badtest.data"
check "rank 0's test phase failing mid-run ends every rank at once" err 1 \
    "rank 0: $tmp/bad.txt:17: $tmp/img/cut.pgm: cannot decode image" -- \
    mpirun -np 2 "$bin" -q -t 1 --iters 50 --test-interval 5 --data "$tmp/badtest.data" "$tiny"

# A stopped rank: the other waits without spinning (its CPU time from 0.5
# to 1.5 s after the stop: it backs off to sleeps after 10 ms), then ends
# the run after --peer-timeout 3 (a tiny.cfg iteration takes milliseconds);
# rank 0 stopped too, between segments (--test-interval 1 makes every
# iteration start one, where the others once waited for it forever); and
# rank 1 stopped under onesided, whose waits poll notifications and
# one-sided requests (a flush to the stopped rank would block in MPI).
rank_pid() { # DIR RANK: the pid of that rank
    for _p in $(ranks_of "$1"); do
        tr '\0' '\n' <"/proc/$_p/environ" 2>/dev/null | grep -qx "PMI_RANK=$2" && echo "$_p"
    done
}
ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat" 2>/dev/null || echo 0; }
for case in 1:rhd 0:rhd 1:onesided; do
    stopped=${case%:*} algo=${case#*:}
    d=$tmp/stop$stopped-$algo
    signal_run "$d" --peer-timeout 3 --test-interval 1 --allreduce "$algo"
    p=$(rank_pid "$d" $stopped)
    other=$(rank_pid "$d" $((1 - stopped)))
    expect "rank $stopped stopped ($algo): two ranks run (${p:--} ${other:--})" [ -n "$p" ] && [ -n "$other" ]
    start=$(($(date +%s%N) / 1000000))
    [ -z "$p" ] || kill -STOP "$p"
    sleep 0.5
    a=$(ticks "${other:-0}")
    sleep 1
    b=$(ticks "${other:-0}")
    wait $run_pid
    rc=$?
    ms=$(($(date +%s%N) / 1000000 - start))
    kill $watchdog 2>/dev/null
    [ -z "$p" ] || kill -9 "$p" 2>/dev/null
    expect "rank $stopped stopped ($algo): the other uses little CPU while it waits ($((b - a)) of $(getconf CLK_TCK) ticks in 1 s)" \
        [ $((b - a)) -lt $(($(getconf CLK_TCK) / 3)) ]
    expect "rank $stopped stopped ($algo): the run ends with a failure after --peer-timeout ($ms ms, exit $rc)" \
        [ "$rc" -ne 0 ] && [ "$ms" -lt 80000 ]
    expect "rank $stopped stopped ($algo): the message says it" grep -q "a rank stopped, hung or is lost" \
        "$d/err"
done

finish test_multinode_faults.sh
