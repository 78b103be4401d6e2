#!/bin/sh
# scripts/sweep.sh and scripts/plot.sh on a tiny synthetic network: a sweep of
# 2 points x 2 repeats writes the header and one row per run whose figures
# are those of the run's own log; a re-run skips everything; a sweep killed
# in the middle of a run keeps whole rows only and, re-run, ends with every
# run once; a second sweep on the same CSV is refused while one runs; failed and timed-out runs are recorded, not retried unless asked,
# and replaced when retried; another solver runs a derived cfg; two ranks run
# under mpirun with the whole job's images/s and the communication time;
# --preset singlecaffe's dry run lists the paper's grid system by system,
# runs nothing and estimates the time; an unknown preset exits 2;
# torch-ddp.py trains 2 processes for 2 iterations and builds the four cfgs
# with singletrain's shapes and parameter counts (left out, and said so,
# without PyTorch); a tiny preset sweep writes a row per system and run and
# a Speed Ratio table whose ratios are the CSV's; usage errors exit 2; the
# medians and speed-ups (of medians and of the fastest runs) plot.sh prints
# match hand-computed ones, failed rows left out, and so does a preset
# CSV's Speed Ratio; and plot.sh writes the PNG figures.
# usage: sh tests/e2e/test_sweep.sh PATH_TO_SINGLETRAIN
set -u
. "$(dirname "$0")/../lib/check.sh"
suite_start "$@"
root=$(cd "$(dirname "$0")/../.." && pwd)
sweep=$root/scripts/sweep.sh
plot=$root/scripts/plot.sh
export SINGLETRAIN="$bin"
cd "$tmp" || exit 2
header=network,backend,threads,intra,ranks,batch,solver,iters,warmup,run,status,images_per_s,compute_ms,barrier_ms,aggregation_ms,update_ms,data_ms,comm_ms,peak_memory_mb,final_loss,train_s,load1,log,busy

# 8x8x1 synthetic images, 3 classes: a run of 6 iterations takes milliseconds.
cp "$fixtures/tiny.cfg" "$tmp/tiny.cfg"
# tiny-sweep.sh OUT.csv [options]: the sweep of 2 points (1 and 2 threads) x
# 2 repeats, a test every 3 iterations and a progress line every one.
cat >tiny-sweep.sh <<EOF
exec "$sweep" --nets "$tmp/tiny.cfg" --threads "1 2" --batches 16 --iters 6 --warmup 2 \\
    --repeat 2 --args "--test-interval 3 --log-every 1" --out "\$@"
EOF

# rows_ok CSV N: N rows after the header, 24 fields each, status ok, the
# figures (and the load average) numbers, busy yes or no.
rows_ok() {
    awk -F, -v n="$2" '
        NR == 1 { next }
        NF != 24 || $11 != "ok" || $24 !~ /^(yes|no)$/ { bad = 1 }
        { for (i = 12; i <= 22; i++) if ($i !~ /^-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?$/) bad = 1 }
        END { exit bad || NR - 1 != n }' "$1"
}
# figures_match_logs CSV LOGDIR: every row's images/s, compute ms and final
# loss are those the row's log prints ("done:", "time split", last "iter").
figures_match_logs() {
    tail -n +2 "$1" | while IFS=, read -r _ _ _ _ _ _ _ _ _ _ _ ips compute _ _ _ _ _ _ loss _ _ log _; do
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
count_words() { echo $#; }
is_png() { [ -s "$1" ] && [ "$(od -An -tx1 -N8 "$1" | tr -d ' \n')" = 89504e470d0a1a0a ]; }

# ------------------------------------------------------------ a tiny sweep
check "the 2 x 2 sweep runs" out 0 "4 runs ok, 0 failed, 0 already in a.csv" -- \
    sh tiny-sweep.sh a.csv
expect "the CSV starts with the header" [ "$(head -n 1 a.csv)" = "$header" ]
expect "4 rows of 24 fields, status ok, numbers that parse" rows_ok a.csv 4
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
# Meanwhile a second sweep on the same CSV is refused, naming the first
# (both ran, each renaming its own copy over the CSV: half the rows lost).
check "a second sweep on the same --out is refused while the first runs" err 1 \
    "k.csv: another sweep (process $sweep_pid) is writing this CSV (it holds k.csv.lock)" -- \
    sh tiny-sweep.sh k.csv
kill -TERM "$sweep_pid"
wait "$sweep_pid"
rc=$?
expect "SIGTERM stops the sweep with 143" [ "$rc" -eq 143 ]
expect "the stopped sweep removed its lock" [ ! -e k.csv.lock ]
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

# ------------------------------------------------------------ a busy machine
# /proc/loadavg's runnable count, made up (SWEEP_LOADAVG): 9999 runnable
# threads besides the sampler exceed the free cores of any machine; 1 (the
# sampler alone) leaves every core free.
echo "3.20 3.00 2.50 9999/10000 4242" >busy.loadavg
echo "0.00 0.00 0.00 1/100 4242" >quiet.loadavg
cat >busy-sweep.sh <<EOF
exec "$sweep" --nets "$tmp/tiny.cfg" --threads 1 --batches 16 --iters 4 --warmup 1 --repeat 1 \\
    --out "\$@"
EOF
check "a run on a busy machine is marked BUSY on its line" out 0 "1 runs ok" -- \
    env SWEEP_LOADAVG="$tmp/busy.loadavg" sh busy-sweep.sh busy.csv
expect "... BUSY at the end of its progress line" grep -q '^\[1/1\] tiny dnnl -t 1 .* img/s (.*) BUSY$' \
    "$tmp/stdout"
expect "... warned of on stderr with the runnable threads and the cores" grep -q \
    "warning: .*the machine was busy: 9998 other threads runnable before the run and 9998 after, on [0-9]* cores of which the run uses 1" \
    "$tmp/stderr"
expect "... its row says busy yes, and load1 is the file's" \
    [ "$(tail -n 1 busy.csv | cut -d, -f11,22,24)" = "ok,3.20,yes" ]
check "a run on a quiet machine is not marked" out 0 "1 runs ok" -- \
    env SWEEP_LOADAVG="$tmp/quiet.loadavg" sh busy-sweep.sh quiet.csv
expect "... no BUSY, no warning" sh -c '! grep -q BUSY "$1/stdout" && ! grep -q warning "$1/stderr"' sh "$tmp"
expect "... its row says busy no" [ "$(tail -n 1 quiet.csv | cut -d, -f24)" = no ]
head -n 1 quiet.csv | sed 's/,busy$//' >old.csv
check "a CSV of sweep.sh before the busy column: told how to go on" err 2 \
    "old.csv is a CSV of sweep.sh before its busy column: append ',busy' to its first line" -- \
    sh busy-sweep.sh old.csv

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

# ------------------------------------------------ --preset singlecaffe
# The paper's grid, listed: 3 LeNet-5 batches + 3 AlexNet variants x 3
# batches = 12 network / batch points, x 3 solvers x 2 thread counts = 72
# singletrain runs, and as many of each baseline (2 process counts).
check "--preset singlecaffe --dry-run lists the grid and runs nothing" out 0 \
    "sweep.sh: 288 runs to make, 0 already in dry.csv" -- \
    "$sweep" --preset singlecaffe --dry-run --threads "1 2" --out dry.csv
cp "$tmp/stdout" dry.out
expect "... one line per run, 288" [ "$(grep -c '^\[[0-9]*/288\] ' dry.out)" -eq 288 ]
for sys in singletrain mpi-ps mpi-rhd torch-ddp; do
    expect "... $sys: 12 points x 3 solvers x 2 = 72 runs" \
        [ "$(grep -c "^\[[0-9]*/288\] $sys " dry.out)" -eq 72 ]
done
# grid_of SYSTEM: "network global-batch solver cores" of its lines
# ("[i/n] SYSTEM NET BACKEND -t T --intra I -np P -b B SOLVER run R: ..."),
# sorted.
grid_of() {
    awk -v sys="$1" '$2 == sys { print $3, $12 * $10, $13, (sys == "singletrain" ? $6 : $10) }' \
        dry.out | sort
}
for n in lenet:64 lenet:96 lenet:128 cifar-alexnet:100 cifar-alexnet:150 cifar-alexnet:200 \
    cifar-alexnet-bn:100 cifar-alexnet-bn:150 cifar-alexnet-bn:200 \
    cifar-alexnet-sigmoid:100 cifar-alexnet-sigmoid:150 cifar-alexnet-sigmoid:200; do
    for s in sgd adam rmsprop; do
        for c in 1 2; do echo "${n%:*} ${n#*:} $s $c"; done
    done
done | sort >grid.want
for sys in singletrain mpi-ps mpi-rhd torch-ddp; do
    grid_of $sys >grid.got
    expect "... $sys: the paper's networks, batches and solvers at 1 and 2 cores" cmp -s grid.got grid.want
done
expect "... mpi-rhd: mpirun -np 2 singletrain -t 1, half the batch each, --allreduce rhd" grep -q \
    '^\[[0-9]*/288\] mpi-rhd cifar-alexnet-bn dnnl -t 1 --intra 1 -np 2 -b 75 adam run 1: mpirun -np 2 .*singletrain -t 1 --intra 1 -b 75 .*--allreduce rhd .*cifar-alexnet-bn-adam\.cfg$' \
    dry.out
expect "... mpi-ps: --allreduce ps" grep -q \
    '^\[[0-9]*/288\] mpi-ps lenet dnnl -t 1 --intra 1 -np 2 -b 48 sgd run 1: mpirun -np 2 .*singletrain -t 1 .*-b 48 .*--allreduce ps .*data/lenet\.cfg$' dry.out
expect "... torch-ddp: the global batch to torch-ddp.py --np 2" grep -q \
    'torch-ddp cifar-alexnet-sigmoid torch -t 1 --intra 1 -np 2 -b 100 rmsprop run 1: .*torch-ddp\.py --np 2 --batch 200 --iters 30 --warmup 5 .*cifar-alexnet-sigmoid-rmsprop\.cfg$' \
    dry.out
expect "... singletrain on synthetic data, LeNet-5 400 iterations of which 50 warm-up" grep -q \
    '^\[[0-9]*/288\] singletrain lenet dnnl -t 2 .*-b 128 .*--iters 400 --warmup 50 .*--data synthetic --train-images 1024 .*lenet\.cfg$' \
    dry.out
expect "... with an estimate of the time" grep -q '^sweep.sh: estimated time of the runs to make on .* about [0-9]* h [0-9]* min' dry.out
expect "... and ran nothing" [ ! -e dry.csv ]
check "--preset: a process count that does not divide the batch is left out, and said so" \
    err 0 "mpi-ps with 3 processes left out at batch 64 (not a multiple of 3)" -- \
    "$sweep" --preset singlecaffe --dry-run --nets lenet --solvers sgd --threads "1 3" --out dry.csv
expect "... batch 96 takes 3 processes" grep -q 'mpi-rhd lenet dnnl -t 1 --intra 1 -np 3 -b 32 sgd' "$tmp/stdout"
check "an unknown preset is a usage error" err 2 "--preset nosuch: unknown preset (known: singlecaffe)" -- \
    "$sweep" --preset nosuch --dry-run
check "--ranks does not go with the preset" err 2 "--ranks does not go with --preset singlecaffe" -- \
    "$sweep" --preset singlecaffe --ranks 2 --dry-run
check "an unknown baseline is a usage error" err 2 "--baselines: 'mpi' is not one of" -- \
    "$sweep" --preset singlecaffe --baselines "mpi torch-ddp" --dry-run

# scripts/torch-ddp.py: PyTorch's DistributedDataParallel baseline.
python=${PYTHON:-/usr/bin/python3}
ddp=$root/scripts/torch-ddp.py
have_torch=0
cfgs=
"$python" -c 'import torch.distributed' 2>/dev/null && have_torch=1
# layers FILE: "index type output-shape" per layer of a --dry-run layer
# table (singletrain's or torch-ddp.py's), then the parameter count.
layers() {
    awk '
        /->/ { split($0, a, "->"); split(a[1], g, " "); n = split(a[2], f, " ")
               print g[1], g[2], (f[2] == "x" ? f[1] "x" f[3] "x" f[5] : f[1]) }
        /^[0-9]+ parameters/ { print "parameters", $1 }' "$1"
}
if [ "$have_torch" -eq 1 ]; then
    check "torch-ddp.py: 2 processes, 2 iterations" out 0 "result: images_per_s=" -- \
        "$python" "$ddp" --np 2 --batch 16 --iters 2 --warmup 1 --log-every 1 "$tmp/tiny.cfg"
    expect "... on a global batch of 16, 8 per process, with gloo" grep -q \
        '2 processes x 1 thread, gloo, global batch 16 (8 per process), solver sgd' "$tmp/stdout"
    expect "... a progress line per iteration" [ "$(grep -c '^iter [12]/2  loss ' "$tmp/stdout")" -eq 2 ]
    check "torch-ddp.py: a batch that --np does not divide is a usage error" err 2 \
        "--batch 15 is not a multiple of --np 2" -- "$python" "$ddp" --np 2 --batch 15 "$tmp/tiny.cfg"
    check "torch-ddp.py: a layer it cannot build is refused" err 2 "[route] is not supported" -- \
        "$python" "$ddp" --dry-run "$root/data/resnet50.cfg"
    # Layer for layer: the output shapes and parameter count singletrain
    # prints for the same cfg.
    for n in lenet cifar-alexnet cifar-alexnet-bn cifar-alexnet-sigmoid; do
        "$bin" --dry-run "$root/data/$n.cfg" >"st-$n.out" 2>&1
        cfgs="$cfgs $root/data/$n.cfg"
    done
    # shellcheck disable=SC2086
    "$python" "$ddp" --dry-run $cfgs >torch.out 2>&1
    for n in lenet cifar-alexnet cifar-alexnet-bn cifar-alexnet-sigmoid; do
        layers "st-$n.out" >st.layers
        sed -n "\\|^$root/data/$n.cfg: input|,/parameters\$/p" torch.out >"torch-$n.out"
        layers "torch-$n.out" >torch.layers
        expect "torch-ddp.py builds $n.cfg as singletrain does: shapes and parameters" \
            [ -s st.layers ] && cmp -s st.layers torch.layers
    done
    expect "... the sigmoid variant's hidden layers end in sigmoids, 7 of them" \
        [ "$(grep '^torch modules:' torch-cifar-alexnet-sigmoid.out | tr ' ' '\n' | grep -c Sigmoid)" -eq 7 ]
    expect "... the batch-norm variant's convolutions are followed by batch norm, 5 of them" \
        [ "$(grep '^torch modules:' torch-cifar-alexnet-bn.out | tr ' ' '\n' | grep -c BatchNorm2d)" -eq 5 ]
else
    echo "SKIP torch-ddp.py: PyTorch is not installed for $python (python3-torch)"
fi

# A tiny preset sweep with the baselines that can run here, at 2 threads or
# processes: Adam, so that every system trains a derived cfg (and says it
# trained with Adam).
baselines=
if command -v mpirun >/dev/null 2>&1; then baselines="mpi-ps mpi-rhd"; else
    echo "SKIP the preset's mpi-ps and mpi-rhd runs: mpirun is not installed"; fi
if [ "$have_torch" -eq 1 ]; then baselines="$baselines torch-ddp"; else
    echo "SKIP the preset's torch-ddp runs: PyTorch is not installed for $python"; fi
# shellcheck disable=SC2086
nb=$(($(count_words $baselines) + 1))
cat >tiny-preset.sh <<EOF
exec "$sweep" --preset singlecaffe --nets "$tmp/tiny.cfg" --solvers adam --batches 16 \\
    --threads 2 --iters 4 --warmup 1 --baselines "$baselines" --out p.csv
EOF
check "a tiny --preset singlecaffe sweep runs singletrain and the baselines" out 0 \
    "$nb runs ok, 0 failed" "the Speed Ratio table is in p-ratio.md" -- sh tiny-preset.sh
expect "its CSV has the system column first" [ "$(head -n 1 p.csv)" = "system,$header" ]
expect "... and a row per run, ok" [ "$(awk -F, 'NR > 1 && NF == 25 && $12 == "ok"' p.csv | wc -l)" -eq "$nb" ]
if [ "$have_torch" -eq 1 ]; then
    expect "... torch-ddp's rows: 8 images per process at 2 processes, images/s from its result line" \
        awk -F, '$1 == "torch-ddp" && $6 == 2 && $7 == 8 && $13 > 0 { found = 1 } END { exit !found }' p.csv
fi
# The ratio of each row, computed here from the CSV: the best singletrain
# run over the best of the baseline (one run each: the medians are the runs).
want_ratio() {
    awk -F, -v sys="$1" -v solver="$2" '
        NR > 1 && $12 == "ok" && $9 == solver {
            if ($1 == "singletrain" && $13 + 0 > ours) ours = $13 + 0
            if ($1 == sys && $13 + 0 > theirs) theirs = $13 + 0
        }
        END { printf "%.2f", ours / theirs }' p.csv
}
for s in adam; do
    row=$(grep "^| tiny | 16 | $s | 4 |" p-ratio.md)
    for k in $baselines; do
        col=$(head -n 3 p-ratio.md | tail -n 1 | awk -F'|' -v k="$k" '{ for (i = 2; i < NF; i++) if ($i ~ " " k " ") print i + 1 }')
        got=$(echo "$row" | awk -F'|' -v c="$col" '{ gsub(/ /, "", $c); print $c }')
        expect "the table's $k ratio for $s is singletrain's best over $k's best" \
            [ -n "$got" ] && [ "$got" = "$(want_ratio "$k" "$s")" ]
    done
done
check "a re-run of the preset skips every finished run" out 0 "0 runs ok, 0 failed, $nb already" -- \
    sh tiny-preset.sh
check "plot.sh draws the preset's Speed Ratio and scaling" out 0 "wrote figs-p/ratio.png" \
    "wrote figs-p/scaling_tiny.png" -- "$plot" p.csv figs-p
expect "ratio.png is a PNG" is_png figs-p/ratio.png
expect "scaling_tiny.png is a PNG" is_png figs-p/scaling_tiny.png

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
        busy=no
        [ "$1 $2 $3" = "1 64 3" ] && busy=yes
        echo "hand,dnnl,$1,1,1,$2,sgd,10,2,$3,ok,$4,5,1,0.5,0.2,0.1,0,50,0.9,1.0,0.5,h$1$2$3.log,$busy"
    done
    echo "hand,dnnl,2,1,1,64,sgd,10,2,4,exit:1,,,,,,,,,,,0.5,h2644.log,yes"
} >hand.csv
# table_has NET BATCH THREADS RUNS IMG/S SPEED-UP FASTEST: plot.sh's table
# says so.
table_has() {
    awk -v n="$1" -v b="$2" -v t="$3" -v r="$4" -v i="$5" -v s="$6" -v f="$7" '
        $1 == n && $3 == b && $4 == t { found = $5 == r && $6 == i && $9 == s && $10 == f }
        END { exit !found }' hand.out
}
have_gnuplot() { command -v gnuplot >/dev/null 2>&1; }
expect "gnuplot is installed (scripts/deps.sh --test installs gnuplot-nox)" have_gnuplot
mkdir gp-hand
check "plot.sh on the hand-made runs" out 0 "wrote figs-hand/split_hand.png" -- \
    env PLOT_SCRIPTS=gp-hand "$plot" hand.csv figs-hand
cp "$tmp/stdout" hand.out
expect "batch 64, 1 thread: median 200 of 3 runs" table_has hand 64 1 3 200.0 1.00 1.00
expect "batch 64, 2 threads: median 350 of 3 (the failed run left out), x1.75, fastest x0.74" \
    table_has hand 64 2 3 350.0 1.75 0.74
expect "batch 32, 1 thread: median 110 of 4 runs" table_has hand 32 1 4 110.0 1.00 1.00
expect "batch 32, 2 threads: median 200 of 2, x1.82, fastest x1.25" table_has hand 32 2 2 200.0 1.82 1.25
expect "the busy column counts the busy runs of a point (1 of batch 64's 3 at 1 thread)" \
    awk '$1 == "hand" && $3 == 64 && $4 == 1 { found = $12 == "1/3" } END { exit !found }' hand.out
expect "... 0 of the others (the failed run's mark left out)" \
    awk '$1 == "hand" && $3 == 64 && $4 == 2 { found = $12 == "0/3" } END { exit !found }' hand.out
expect "plot.sh warns of the point with busy runs" grep -q "warning: 1 point had runs on a busy machine" \
    "$tmp/stderr"
for f in speedup throughput split; do
    expect "$f""_hand.png is a PNG" is_png "figs-hand/${f}_hand.png"
done
# the busy point greyed out: its data row flagged (batch 64, 1 thread; the
# speed-up block's rows are "threads speed-up fastest busy", the
# throughput's "batch img/s min max busy"), no other, and a grey layer
expect "speedup_hand.png: the busy point flagged, and only it" awk '
    /^\$sp_/ { blk = $1 } /^EOD/ { blk = "" }
    blk != "" && NF == 4 { if ($4 == 1) busy = busy " " $1; else if ($4 != 0) bad = 1 }
    END { exit !(busy == " 1" && !bad) }' gp-hand/speedup_hand.png.gp
expect "speedup_hand.png: drawn over in grey, titled once" \
    [ "$(grep -o "lc 'grey70' title 'busy" gp-hand/speedup_hand.png.gp | wc -l)" -eq 1 ]
expect "throughput_hand.png: the busy point (batch 64) flagged in its 1-thread block" awk '
    /^\$tp_/ { blk = $1 } /^EOD/ { blk = "" }
    blk != "" && NF == 5 && $5 == 1 { n++; b = $1 } END { exit !(n == 1 && b == 64) }' \
    gp-hand/throughput_hand.png.gp
expect "throughput_hand.png: drawn over in grey" grep -q "lc 'grey70'" gp-hand/throughput_hand.png.gp
check "plot.sh draws the curves from the sweep's logs" out 0 "wrote figs/curves_tiny.png" -- \
    "$plot" a.csv figs
for f in speedup throughput split curves; do
    expect "$f""_tiny.png is a PNG" is_png "figs/${f}_tiny.png"
done
# A hand-made preset CSV: LeNet-5 at batch 64. SGD: singletrain at 1 thread
# 100, 300, 200 (median 200), at 2 threads 350, 390 (370: the best), a
# failed run; mpi-ps at 1 process 150, at 2 (-b 32) 185 (the best: ratio
# 2.00); torch-ddp at 1 process 74 (5.00); no mpi-rhd. Adam: singletrain 100
# at 1 thread, torch-ddp 50 at 2 processes (2.00), no mpi-ps.
{
    echo "system,$header"
    for r in "singletrain 1 1 64 sgd 1 100" "singletrain 1 1 64 sgd 2 300" "singletrain 1 1 64 sgd 3 200" \
        "singletrain 2 1 64 sgd 1 350" "singletrain 2 1 64 sgd 2 390" "mpi-ps 1 1 64 sgd 1 150" \
        "mpi-ps 1 2 32 sgd 1 185" "torch-ddp 1 1 64 sgd 1 74" "singletrain 1 1 64 adam 1 100" \
        "torch-ddp 1 2 32 adam 1 50"; do
        # shellcheck disable=SC2086
        set -- $r
        echo "$1,lenet,dnnl,$2,1,$3,$4,$5,10,2,$6,ok,$7,5,1,0.5,0.2,0.1,0,50,0.9,1.0,0.5,x.log"
    done
    echo "singletrain,lenet,dnnl,2,1,1,64,sgd,10,2,3,exit:1,,,,,,,,,,,0.5,x.log"
} >hand-preset.csv
check "plot.sh on a hand-made preset CSV" out 0 "wrote figs-hp/ratio.png" "wrote figs-hp/scaling_lenet.png" -- \
    "$plot" hand-preset.csv figs-hp
expect "its Speed Ratio: SGD 370 at 2 threads, mpi-ps 185 at 2 processes (2.00), no mpi-rhd, torch-ddp 74 (5.00)" \
    grep -qxF "| lenet | 64 | sgd | 10 | 370 (2) | 185 (2) | 2.00 | 74.0 (1) | 5.00 |" "$tmp/stdout"
expect "... Adam: no mpi-ps, torch-ddp 50 at 2 processes (2.00)" \
    grep -qxF "| lenet | 64 | adam | 10 | 100 (1) | - | - | 50.0 (2) | 2.00 |" "$tmp/stdout"
expect "... medians of 1-3 runs" grep -q "the median of 1-3 runs" "$tmp/stdout"
check "ratio and scaling need a preset's CSV" err 2 "FIGURES: ratio needs the CSV of a preset" -- \
    env FIGURES=ratio "$plot" hand.csv figs-hand
check "plot.sh refuses a CSV that is not a sweep's" err 2 "no column network" -- \
    "$plot" other.csv figs-other
check "plot.sh refuses unknown FIGURES" err 2 "FIGURES: 'pie'" -- \
    env FIGURES=pie "$plot" a.csv figs

finish test_sweep.sh
