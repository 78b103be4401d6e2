#!/bin/sh
# scripts/sweep.sh and scripts/plot.sh on a tiny synthetic network: a sweep of
# 2 points x 2 repeats writes the header and one row per run whose figures
# are those of the run's own log; a re-run skips everything; a sweep killed
# in the middle of a run keeps whole rows only and, re-run, ends with every
# run once; failed and timed-out runs are recorded, not retried unless asked,
# and replaced when retried; another solver runs a derived cfg; two ranks run
# under mpirun with both ranks' images/s and the all-reduce time; usage
# errors exit 2; the medians and speed-ups (of medians and of the fastest
# runs) plot.sh prints match hand-computed ones, failed rows left out; and
# plot.sh writes the four PNG figures.
# usage: sh tests/e2e/test_sweep.sh PATH_TO_SINGLETRAIN
set -u
. "$(dirname "$0")/../lib/check.sh"
suite_start "$@"
root=$(cd "$(dirname "$0")/../.." && pwd)
sweep=$root/scripts/sweep.sh
plot=$root/scripts/plot.sh
export SINGLETRAIN="$bin"
cd "$tmp" || exit 2
header=network,backend,threads,intra,ranks,batch,solver,iters,warmup,run,status,images_per_s,compute_ms,barrier_ms,aggregation_ms,update_ms,data_ms,comm_ms,peak_memory_mb,final_loss,train_s,load1,log

# 8x8x1 synthetic images, 3 classes: a run of 6 iterations takes milliseconds.
cp "$fixtures/tiny.cfg" "$tmp/tiny.cfg"
# tiny-sweep.sh OUT.csv [options]: the sweep of 2 points (1 and 2 threads) x
# 2 repeats, a test every 3 iterations and a progress line every one.
cat >tiny-sweep.sh <<EOF
exec "$sweep" --nets "$tmp/tiny.cfg" --threads "1 2" --batches 16 --iters 6 --warmup 2 \\
    --repeat 2 --args "--test-interval 3 --log-every 1" --out "\$@"
EOF

# rows_ok CSV N: N rows after the header, 23 fields each, status ok, the
# figures (and the load average) numbers.
rows_ok() {
    awk -F, -v n="$2" '
        NR == 1 { next }
        NF != 23 || $11 != "ok" { bad = 1 }
        { for (i = 12; i <= 22; i++) if ($i !~ /^-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?$/) bad = 1 }
        END { exit bad || NR - 1 != n }' "$1"
}
# figures_match_logs CSV LOGDIR: every row's images/s, compute ms and final
# loss are those the row's log prints ("done:", "time split", last "iter").
figures_match_logs() {
    tail -n +2 "$1" | while IFS=, read -r _ _ _ _ _ _ _ _ _ _ _ ips compute _ _ _ _ _ _ loss _ _ log; do
        ips_log=$(sed -n 's/^done: .* s, \([0-9.]*\) img\/s.*/\1/p' "$2/$log")
        compute_log=$(sed -n 's/^time split, .* compute \([0-9.]*\),.*/\1/p' "$2/$log")
        loss_log=$(sed -n 's/^iter [0-9]*\/[0-9]* .* loss \([0-9.]*\) .*/\1/p' "$2/$log" | tail -n 1)
        if [ -z "$ips_log" ] || [ "$ips" != "$ips_log" ] || [ "$compute" != "$compute_log" ] ||
            [ "$loss" != "$loss_log" ]; then
            echo "     $log: CSV / log: $ips / $ips_log, $compute / $compute_log, $loss / $loss_log"
            return 1
        fi
    done
}
keys() { tail -n +2 "$1" | cut -d, -f1-10 | sort; }
is_png() { [ -s "$1" ] && [ "$(od -An -tx1 -N8 "$1" | tr -d ' \n')" = 89504e470d0a1a0a ]; }

# ------------------------------------------------------------ a tiny sweep
check "the 2 x 2 sweep runs" out 0 "4 runs ok, 0 failed, 0 already in a.csv" -- \
    sh tiny-sweep.sh a.csv
expect "the CSV starts with the header" [ "$(head -n 1 a.csv)" = "$header" ]
expect "4 rows of 23 fields, status ok, numbers that parse" rows_ok a.csv 4
keys a.csv >keys.got
printf 'tiny,dnnl,%s,1,1,16,sgd,6,2,%s\n' 1 1 2 1 1 2 2 2 | sort >keys.want
expect "the rows are threads 1 and 2 x runs 1 and 2" cmp -s keys.got keys.want
expect "images/s, compute ms and final loss are the logs' figures" figures_match_logs a.csv a-logs
expect "the logs name their point" grep -q \
    '^# sweep.sh: network=tiny backend=dnnl threads=2 .* run=2$' \
    a-logs/tiny_dnnl_sgd_b16_p1_i1_t2_n6_w2_r2.log
cp a.csv a.before
check "a re-run skips every finished run" out 0 "0 runs ok, 0 failed, 4 already in a.csv" -- \
    sh tiny-sweep.sh a.csv
expect "the re-run left the CSV as it was" cmp -s a.csv a.before

# ----------------------------------------------- killed in the middle, resumed
# The wrapper makes the sweep's third run (threads 1, run 2) a long one, so
# that the kill lands inside it; later calls run as asked.
cat >wrapper.sh <<EOF
#!/bin/sh
n=\$(cat "$tmp/calls" 2>/dev/null || echo 0)
n=\$((n + 1))
echo \$n >"$tmp/calls"
if [ \$n -eq 3 ]; then
    prev=
    for a; do
        shift
        [ "\$prev" = --iters ] && a=1000000
        set -- "\$@" "\$a"
        prev=\$a
    done
fi
exec "$bin" "\$@"
EOF
chmod +x wrapper.sh
SINGLETRAIN=$tmp/wrapper.sh sh tiny-sweep.sh k.csv >k.out 2>k.err &
sweep_pid=$!
third=k-logs/tiny_dnnl_sgd_b16_p1_i1_t1_n6_w2_r2.log
waited=0
until grep -q "^iter " "$third" 2>/dev/null || [ "$waited" -ge 600 ]; do
    sleep 0.1
    waited=$((waited + 1))
done
kill -TERM "$sweep_pid"
wait "$sweep_pid"
rc=$?
expect "SIGTERM stops the sweep with 143" [ "$rc" -eq 143 ]
expect "the run in flight was stopped by the signal" grep -q 'Terminated: stopping' "$third"
expect "the killed sweep left its 2 finished rows, whole" rows_ok k.csv 2
expect "the killed sweep says how to go on" grep -q 'run the same command to go on' k.err
head -n 3 k.csv >k.before
check "the re-run finishes the sweep" out 0 "2 runs ok, 0 failed, 2 already in k.csv" -- \
    env SINGLETRAIN="$tmp/wrapper.sh" sh tiny-sweep.sh k.csv
expect "then every run is there once, ok" rows_ok k.csv 4
keys k.csv >keys.got
expect "the same runs as the uninterrupted sweep's" cmp -s keys.got keys.want
expect "the rows written before the kill are unchanged" [ "$(head -n 3 k.csv)" = "$(cat k.before)" ]
expect "the re-run's figures are its own log's" figures_match_logs k.csv k-logs

# ---------------------------------------------------- failures and solvers
# -t 2 needs a batch of at least 2: that point fails with exit code 2.
fail_sweep() {
    "$sweep" --nets "$tmp/tiny.cfg" --threads "1 2" --batches 1 --iters 4 --warmup 1 \
        --repeat 1 --out f.csv "$@"
}
fail_sweep >f.out 2>f.err
rc=$?
expect "a failed run makes the sweep exit 1" [ "$rc" -eq 1 ]
expect "the failure is on stderr with singletrain's message" grep -q 'need a batch of at least 2' f.err
expect "the failed run is recorded: status exit:2, no figures" [ "$(sed -n 3p f.csv | cut -d, -f1-21,23)" = \
    "tiny,dnnl,2,1,1,1,sgd,4,1,1,exit:2,,,,,,,,,,,tiny_dnnl_sgd_b1_p1_i1_t2_n4_w1_r1.log" ]
expect "... with the load average at its start" grep -Eq '^([^,]*,){21}[0-9]+\.[0-9]+,' f.csv
expect "and the run that worked is recorded ok" [ "$(sed -n 2p f.csv | cut -d, -f3,11)" = 1,ok ]
fail_sweep >f.out 2>f.err
rc=$?
expect "a re-run does not retry it, and exits 1" [ "$rc" -eq 1 ]
expect "... saying so" grep -q '1 runs are recorded as failed.*--retry-failed' f.err
expect "... with nothing run" grep -q '0 runs ok, 0 failed, 1 already' f.out
fail_sweep --retry-failed >f.out 2>f.err
expect "--retry-failed runs it again" grep -q '0 runs ok, 1 failed, 1 already' f.out
expect "... replacing its row: still 2 rows" [ "$(wc -l <f.csv)" -eq 3 ]

check "--timeout: a run past it is stopped" out 1 "FAILED (timeout)" -- \
    "$sweep" --nets "$tmp/tiny.cfg" --threads 1 --batches 16 --iters 100000000 --warmup 1 \
    --repeat 1 --timeout 1 --out t.csv
expect "... and recorded as timeout" [ "$(sed -n 2p t.csv | cut -d, -f11)" = timeout ]

check "--solvers 'cfg adam': the cfg's rule and Adam" out 0 "2 runs ok, 0 failed" -- \
    "$sweep" --nets "$tmp/tiny.cfg" --solvers "cfg adam" --threads 1 --batches 16 --iters 4 \
    --warmup 1 --repeat 1 --out s.csv
expect "the rows name sgd (tiny.cfg's) and adam" [ "$(tail -n +2 s.csv | cut -d, -f7 | tr '\n' ' ')" = "sgd adam " ]
expect "the Adam run trained with Adam" grep -q 'solver adam' s-logs/tiny_dnnl_adam_b16_p1_i1_t1_n4_w1_r1.log
expect "on a copy of the cfg with solver=adam and Adam's learning rate" \
    grep -q '^learning_rate=0.001$' s-logs/cfg/tiny-adam.cfg

if command -v mpirun >/dev/null 2>&1; then
    check "--ranks 2 runs under mpirun" out 0 "1 runs ok, 0 failed" -- \
        "$sweep" --nets "$tmp/tiny.cfg" --ranks 2 --threads 1 --batches 16 --iters 6 --warmup 2 \
        --repeat 1 --out m.csv
    row=$(sed -n 2p m.csv)
    mlog=m-logs/$(echo "$row" | cut -d, -f23)
    rank0=$(sed -n 's/^done: .* s, \([0-9.]*\) img\/s.*/\1/p' "$mlog")
    comm=$(sed -n 's/^communication ms per iteration: \([0-9.]*\) .*/\1/p' "$mlog")
    # Rank 0's figure counts the images of both ranks already (the log's
    # iterations are of the global batch, 2 x 16).
    expect "the log trains on a global batch of 32" grep -q 'a global batch of 32 images' "$mlog"
    expect "its images/s are the whole job's: rank 0's figure, not twice it" \
        [ "$(echo "$row" | cut -d, -f12)" = "$rank0" ]
    expect "its comm_ms is the communication across nodes per iteration" \
        [ -n "$comm" ] && [ "$(echo "$row" | cut -d, -f5,18)" = "2,$comm" ]
else
    echo "SKIP --ranks 2: mpirun is not installed"
fi

# ------------------------------------------------------------- usage errors
check "a bad thread count is a usage error" err 2 "--threads: 'x' is not an integer" -- \
    "$sweep" --nets "$tmp/tiny.cfg" --threads "1 x" --out u.csv
check "no timed iteration is a usage error" err 2 "--warmup 6 leaves no timed iteration" -- \
    "$sweep" --nets "$tmp/tiny.cfg" --iters 6 --warmup 6 --out u.csv
check "an unknown solver is a usage error" err 2 "--solvers: 'adamw' is not one of" -- \
    "$sweep" --nets "$tmp/tiny.cfg" --solvers adamw --out u.csv
check "an unknown option is a usage error" err 2 "unknown option --thread" -- \
    "$sweep" --thread 2
check "a missing network is a usage error" err 2 "nosuch.cfg is missing" -- \
    "$sweep" --nets nosuch --out u.csv
echo "a,b,c" >other.csv
check "a CSV of another format is refused" err 2 "is not this sweep's header" -- \
    "$sweep" --nets "$tmp/tiny.cfg" --threads 1 --out other.csv
expect "... and left as it was" [ "$(cat other.csv)" = "a,b,c" ]

# ------------------------------------------------------------------ plot.sh
# Hand-made runs: batch 64 at 1 thread 100, 500, 200 img/s (median 200, mean
# 267), at 2 threads 350, 300, 370 (350: speed-up 1.75; fastest 370 / 500:
# 0.74) and a failed run; batch 32 at 1 thread 100, 120, 90, 200 (110, mean
# 127.5), at 2 threads 150, 250 (200: speed-up 1.82; fastest 250 / 200: 1.25).
{
    echo "$header"
    for r in "1 64 1 100" "1 64 2 500" "1 64 3 200" "2 64 1 350" "2 64 2 300" "2 64 3 370" \
        "1 32 1 100" "1 32 2 120" "1 32 3 90" "1 32 4 200" "2 32 1 150" "2 32 2 250"; do
        # shellcheck disable=SC2086
        set -- $r
        echo "hand,dnnl,$1,1,1,$2,sgd,10,2,$3,ok,$4,5,1,0.5,0.2,0.1,0,50,0.9,1.0,0.5,h$1$2$3.log"
    done
    echo "hand,dnnl,2,1,1,64,sgd,10,2,4,exit:1,,,,,,,,,,,0.5,h2644.log"
} >hand.csv
# table_has NET BATCH THREADS RUNS IMG/S SPEED-UP FASTEST: plot.sh's table
# says so.
table_has() {
    awk -v n="$1" -v b="$2" -v t="$3" -v r="$4" -v i="$5" -v s="$6" -v f="$7" '
        $1 == n && $3 == b && $4 == t { found = $5 == r && $6 == i && $9 == s && $10 == f }
        END { exit !found }' hand.out
}
have_gnuplot() { command -v gnuplot >/dev/null 2>&1; }
expect "gnuplot is installed (scripts/deps.sh installs gnuplot-nox)" have_gnuplot
check "plot.sh on the hand-made runs" out 0 "wrote figs-hand/split_hand.png" -- \
    "$plot" hand.csv figs-hand
cp "$tmp/stdout" hand.out
expect "batch 64, 1 thread: median 200 of 3 runs" table_has hand 64 1 3 200.0 1.00 1.00
expect "batch 64, 2 threads: median 350 of 3 (the failed run left out), x1.75, fastest x0.74" \
    table_has hand 64 2 3 350.0 1.75 0.74
expect "batch 32, 1 thread: median 110 of 4 runs" table_has hand 32 1 4 110.0 1.00 1.00
expect "batch 32, 2 threads: median 200 of 2, x1.82, fastest x1.25" table_has hand 32 2 2 200.0 1.82 1.25
for f in speedup throughput split; do
    expect "$f""_hand.png is a PNG" is_png "figs-hand/${f}_hand.png"
done
check "plot.sh draws the curves from the sweep's logs" out 0 "wrote figs/curves_tiny.png" -- \
    "$plot" a.csv figs
for f in speedup throughput split curves; do
    expect "$f""_tiny.png is a PNG" is_png "figs/${f}_tiny.png"
done
check "plot.sh refuses a CSV that is not a sweep's" err 2 "no column network" -- \
    "$plot" other.csv figs-other
check "plot.sh refuses unknown FIGURES" err 2 "FIGURES: 'pie'" -- \
    env FIGURES=pie "$plot" a.csv figs

finish test_sweep.sh
