#!/bin/sh
# Batch sweeps: runs singletrain over a grid of networks, backends, solvers,
# batch sizes, MPI ranks, intra-op threads and worker threads, each point for
# --iters iterations (the first --warmup left out of the speed figures),
# --repeat times, and appends one CSV row per finished run: the point, the
# run index, a status, images/s, the time split, peak memory, the final
# training loss and the run's log file (kept under --logs for plot.sh's
# training curves). Re-running the same command resumes: a point and run
# already in the CSV is skipped.
#
# usage: scripts/sweep.sh [options]   (scripts/sweep.sh --help lists them)
#   scripts/sweep.sh --nets "lenet" --solvers "sgd adam" --threads "1 2" \
#       --batches "64 256" --iters 200 --warmup 20 --repeat 3 --out lenet.csv
#
# The CSV (one header line, then one row per run; fields never hold commas):
#   network,backend,threads,intra,ranks,batch,solver,iters,warmup,run,  the key
#   status          ok, exit:N (singletrain's exit code), timeout, unparsed
#                   (exit 0 without the summary lines) or wrong-solver
#   images_per_s    the whole job's: rank 0's "done:" figure, which counts the
#                   images of every rank
#   compute_ms barrier_ms aggregation_ms update_ms data_ms
#                   the "time split" line, ms per iteration, mean of workers
#   comm_ms         multi-node: ms per iteration across the nodes (the control
#                   sums, which wait for the slowest rank, and the all-reduce),
#                   outside the other parts of the split; 0 on one node
#   peak_memory_mb  rank 0's peak resident memory
#   final_loss      the training loss of the last progress line (the mean over
#                   its --log-every window)
#   train_s         the "done:" line's training time
#   load1           the 1-minute load average when the run started (from
#                   /proc/loadavg; empty without it): how busy the machine was
#                   (it also counts the sweep's own last minute of runs)
#   log             the log's file name inside --logs
#   busy            yes when other programs wanted more cores than the run
#                   left free: the threads runnable just before and just
#                   after the run (/proc/loadavg's 4th field, the count its
#                   load average averages, without the minute of memory of
#                   the sweep's own runs that load1 has; the median of 3
#                   samples each), less the sampler, exceed the cores the
#                   run does not use (nproc less threads x intra x ranks);
#                   no otherwise; empty without /proc/loadavg. A busy run
#                   is also said on stderr and on its progress line ("BUSY"):
#                   its figures are slower than the machine's. plot.sh
#                   counts the busy runs of each point in its table.
# A failed run is reported on stderr and recorded with its status and empty
# figures; it is not run again unless --retry-failed is given, and its row is
# then replaced. Each row is written after its run ended, by writing the new
# CSV beside the old and renaming it, so an interrupted sweep (SIGINT,
# SIGTERM: the run in flight is stopped and not recorded) leaves only whole
# rows. One sweep per CSV at a time: it holds OUT.lock (flock(1)), and a
# second sweep on the same --out is refused, naming the first (exit 1).
#
# --preset singlecaffe: the SingleCaffe experiments against real distributed
# baselines (docs/guide/figures.md, "SingleCaffe experiments"). LeNet-5 at batches 64,
# 96 and 128 and the three 32x32 AlexNets (cifar-alexnet, -bn, -sigmoid) at
# 100, 150 and 200, with SGD, Adam and RMSProp, all on synthetic data; for
# every point singletrain as one process of T worker threads, T in
# --threads, then each baseline with P processes of one thread, P in
# --threads, the same global batch split over them (P must divide it):
# mpi-ps and mpi-rhd (mpirun -np P singletrain -t 1 --allreduce ps or rhd,
# -b B/P: singletrain as a distributed Caffe) and torch-ddp
# (scripts/torch-ddp.py: PyTorch's DistributedDataParallel over gloo). Its
# CSV has one column more in front, system (singletrain, mpi-ps, mpi-rhd,
# torch-ddp), a part of the key; batch is per process there too (the global
# batch is batch x ranks), and torch-ddp rows leave barrier, aggregation and
# comm empty (DDP's all-reduce runs inside backward, in compute_ms). At the
# end it writes the Speed Ratio table (scripts/speed-ratio.awk: singletrain's
# best images/s over its thread counts divided by each baseline's best over
# its process counts), markdown, beside the CSV as NAME-ratio.md. --dry-run
# lists the grid and estimates its time.
#
# Exit status: 0 when every run of the grid is ok, 1 when a run failed or
# another sweep holds the CSV, 2 on bad usage, 128 + the signal when stopped.
set -u
here=$(cd "$(dirname "$(readlink -f "$0")")" && pwd)
. "$here/paths.sh"
mpirun=${MPIRUN:-mpirun}
python=${PYTHON:-/usr/bin/python3}
header="network,backend,threads,intra,ranks,batch,solver,iters,warmup,run,status,images_per_s,\
compute_ms,barrier_ms,aggregation_ms,update_ms,data_ms,comm_ms,peak_memory_mb,final_loss,train_s,load1,log,busy"
# /proc/loadavg (SWEEP_LOADAVG: another file of its format, for the tests).
loadavg=${SWEEP_LOADAVG:-/proc/loadavg}
cores=$(nproc 2>/dev/null || echo 1)
rules="sgd nesterov adagrad rmsprop adadelta adam"

usage() {
    cat <<EOF
usage: scripts/sweep.sh [options]
Runs singletrain (\$SINGLETRAIN, default build/singletrain, or the installed
singletrain beside an installed sweep.sh) over the grid of
the lists below (quoted, space-separated) and appends one CSV row per run.
Every option can also be given as the environment variable in brackets.
  --nets "NET ..."       networks: data/NET.cfg (installed: the installed networks)
                         or a path to a .cfg (SWEEP_NETS; lenet)
  --solvers "S ..."      update rules: cfg (the cfg's own) or $rules;
                         another rule than the cfg's runs a copy of the cfg with
                         solver= and a learning rate that suits the rule (adam,
                         rmsprop 0.001, adagrad 0.01, adadelta 1.0) (SWEEP_SOLVERS; cfg)
  --backends "B ..."     compute backends: dnnl, ref, cpe (SWEEP_BACKENDS; dnnl)
  --threads "T ..."      worker threads, -t (SWEEP_THREADS; 1 .. nproc)
  --intra "I ..."        intra-op threads per worker, --intra (SWEEP_INTRA; 1)
  --batches "B ..."      images per iteration (per rank), -b (SWEEP_BATCHES; 64 128 256)
  --ranks "P ..."        MPI ranks; P > 1 runs under \$MPIRUN (mpirun) -np P (SWEEP_RANKS; 1)
  --iters N              iterations per run, warm-up included (SWEEP_ITERS; 100)
  --warmup N             iterations left out of the speed figures (SWEEP_WARMUP; 10)
  --repeat R             runs of each point (SWEEP_REPEAT; 3)
  --out FILE.csv         the CSV, created or resumed (SWEEP_OUT; sweep.csv)
  --logs DIR             run logs and derived cfgs (SWEEP_LOGS; FILE-logs beside the CSV)
  --args "OPTIONS"       more singletrain options for every run
                         (SWEEP_ARGS; "--no-test --log-every 10")
  --timeout S            stop a run after S seconds and record it as timeout (SWEEP_TIMEOUT; 0, none)
  --retry-failed         run again the points whose recorded status is not ok
  --dry-run              list the runs that would be made, run nothing
  --preset NAME          a preset grid: singlecaffe (below) (SWEEP_PRESET)
  --baselines "B ..."    with --preset singlecaffe: any of mpi-ps mpi-rhd torch-ddp
                         (SWEEP_BASELINES; all three)
  -h, --help             this help
Runs go repeat by repeat, so the noise of a busy machine spreads over all points.

--preset singlecaffe: the SingleCaffe experiments, singletrain (one process, -t T)
against distributed baselines of P processes of one thread on the same global
batch: mpi-ps and mpi-rhd (mpirun -np P singletrain -t 1 --allreduce ps / rhd
-b B/P) and torch-ddp (\$PYTHON, default /usr/bin/python3, scripts/torch-ddp.py).
Its defaults: --nets "lenet cifar-alexnet cifar-alexnet-bn cifar-alexnet-sigmoid",
--solvers "sgd adam rmsprop", batches 64 96 128 (lenet) and 100 150 200 (the
others) unless --batches is given, 400 iterations of which 50 warm-up (lenet) and
30 of which 5 (the others) unless --iters or --warmup is given (then they apply
to every network, defaults 100 and 10), --repeat 1, --out singlecaffe.csv.
--threads gives both singletrain's thread counts and the baselines' process
counts; --backends, --intra and --ranks do not apply. Every run trains on
synthetic data (--data synthetic --train-images 8 x the global batch). The CSV
has a first column more, system; the Speed Ratio table goes to NAME-ratio.md
beside it. With --dry-run it also estimates the grid's time.
EOF
}

# count WORD...: how many words.
count() { echo $#; }

die_usage() {
    echo "sweep.sh: $*" >&2
    echo "sweep.sh: scripts/sweep.sh --help lists the options" >&2
    exit 2
}

# Which options were given (for the preset's defaults): set in the
# environment or on the command line.
given=
for v in NETS SOLVERS BACKENDS INTRA BATCHES RANKS ITERS WARMUP REPEAT OUT; do
    eval "[ -n \"\${SWEEP_$v+x}\" ]" && given="$given --$(echo "$v" | tr '[:upper:]' '[:lower:]')"
done
nets=${SWEEP_NETS:-lenet}
solvers=${SWEEP_SOLVERS:-cfg}
backends=${SWEEP_BACKENDS:-dnnl}
threads_list=${SWEEP_THREADS:-$(seq 1 "$(nproc 2>/dev/null || echo 1)" | tr '\n' ' ')}
intra_list=${SWEEP_INTRA:-1}
batches=${SWEEP_BATCHES:-64 128 256}
ranks_list=${SWEEP_RANKS:-1}
iters=${SWEEP_ITERS:-100}
warmup=${SWEEP_WARMUP:-10}
repeat=${SWEEP_REPEAT:-3}
out=${SWEEP_OUT:-sweep.csv}
logs=${SWEEP_LOGS:-}
extra=${SWEEP_ARGS---no-test --log-every 10}
timeout_s=${SWEEP_TIMEOUT:-0}
preset=${SWEEP_PRESET:-}
baselines=${SWEEP_BASELINES:-mpi-ps mpi-rhd torch-ddp}
retry=0
dry=0
while [ $# -gt 0 ]; do
    opt=$1
    case $opt in
    -h | --help) usage; exit 0 ;;
    --retry-failed) retry=1; shift; continue ;;
    --dry-run) dry=1; shift; continue ;;
    --*=*) val=${opt#*=}; opt=${opt%%=*}; shift ;;
    --*) [ $# -ge 2 ] || die_usage "$opt needs a value"; val=$2; shift 2 ;;
    *) die_usage "unexpected argument '$opt'" ;;
    esac
    given="$given $opt"
    case $opt in
    --nets) nets=$val ;;
    --solvers) solvers=$val ;;
    --backends) backends=$val ;;
    --threads) threads_list=$val ;;
    --intra) intra_list=$val ;;
    --batches) batches=$val ;;
    --ranks) ranks_list=$val ;;
    --iters) iters=$val ;;
    --warmup) warmup=$val ;;
    --repeat) repeat=$val ;;
    --out) out=$val ;;
    --logs) logs=$val ;;
    --args) extra=$val ;;
    --timeout) timeout_s=$val ;;
    --preset) preset=$val ;;
    --baselines) baselines=$val ;;
    *) die_usage "unknown option $opt" ;;
    esac
done

is_given() { case "$given " in *" $1 "*) return 0 ;; esac; return 1; }

# The preset's grid replaces the defaults of the options not given; its
# per-network batches and lengths are plan_singlecaffe's.
per_net_length=0
case $preset in
'') is_given --baselines && die_usage "--baselines goes with --preset singlecaffe" ;;
singlecaffe)
    for o in --backends --intra --ranks; do
        is_given $o && die_usage "$o does not go with --preset singlecaffe: singletrain runs on \
dnnl, one intra-op thread, one process; the baselines' process counts are --threads"
    done
    is_given --nets || nets="lenet cifar-alexnet cifar-alexnet-bn cifar-alexnet-sigmoid"
    is_given --solvers || solvers="sgd adam rmsprop"
    is_given --repeat || repeat=1
    is_given --out || out=singlecaffe.csv
    is_given --iters || is_given --warmup || per_net_length=1
    for bl in $baselines; do
        case $bl in
        mpi-ps | mpi-rhd | torch-ddp) ;;
        *) die_usage "--baselines: '$bl' is not one of: mpi-ps mpi-rhd torch-ddp" ;;
        esac
    done
    header="system,$header"
    ;;
*) die_usage "--preset $preset: unknown preset (known: singlecaffe)" ;;
esac
# The key: the CSV's first keyn fields.
keyn=10
[ -n "$preset" ] && keyn=11

# positive WHAT MIN LIST: every word of LIST is an integer >= MIN.
positive() {
    what=$1 min=$2
    shift 2
    [ $# -gt 0 ] || die_usage "$what is empty: expected integers >= $min"
    for v in "$@"; do
        case $v in
        '' | *[!0-9]*) die_usage "$what: '$v' is not an integer >= $min" ;;
        esac
        [ "$v" -ge "$min" ] || die_usage "$what: $v is below $min"
    done
}
# Word splitting of the lists is intended here and below.
# shellcheck disable=SC2086
{
    positive --threads 1 $threads_list
    positive --intra 1 $intra_list
    positive --batches 1 $batches
    positive --ranks 1 $ranks_list
    positive --iters 1 $iters
    positive --warmup 0 $warmup
    positive --repeat 1 $repeat
    positive --timeout 0 $timeout_s
    set -- $iters $warmup $repeat $timeout_s
}
[ $# -eq 4 ] || die_usage "--iters, --warmup, --repeat and --timeout take one number each"
[ "$warmup" -lt "$iters" ] || die_usage "--warmup $warmup leaves no timed iteration of --iters $iters"
# shellcheck disable=SC2086
[ "$(count $backends)" -gt 0 ] || die_usage "--backends is empty"
for b in $backends; do
    case $b in *[!a-z0-9_-]*) die_usage "--backends: '$b' is not a backend name" ;; esac
done
for s in $solvers; do
    case " cfg $rules " in
    *" $s "*) ;;
    *) die_usage "--solvers: '$s' is not one of: cfg $rules" ;;
    esac
done
# shellcheck disable=SC2086
[ "$(count $solvers)" -gt 0 ] || die_usage "--solvers is empty"
[ -x "$bin" ] || die_usage "$bin is not an executable: build it (make) or set SINGLETRAIN"
for p in $ranks_list; do
    if [ "$p" -gt 1 ] && ! command -v "$mpirun" >/dev/null 2>&1; then
        die_usage "--ranks $p needs $mpirun (MPICH): not found; set MPIRUN or install mpich"
    fi
done
# The baselines' programs (a dry run lists their commands without them).
if [ -n "$preset" ] && [ "$dry" -eq 0 ]; then
    case " $baselines " in
    *" mpi-"*)
        command -v "$mpirun" >/dev/null 2>&1 || die_usage "the mpi-ps and mpi-rhd baselines \
need $mpirun (MPICH): not found; set MPIRUN, install mpich or leave them out with --baselines"
        ;;
    esac
    case " $baselines " in
    *" torch-ddp "*)
        "$python" -c 'import torch.distributed' 2>/dev/null || die_usage "the torch-ddp \
baseline needs PyTorch for $python: apt-get install python3-torch, set PYTHON, or leave it \
out with --baselines"
        ;;
    esac
fi
if [ "$timeout_s" -gt 0 ] && ! command -v timeout >/dev/null 2>&1; then
    die_usage "--timeout needs timeout(1) (coreutils)"
fi
case $out in *.csv) ;; *) die_usage "--out $out: expected a file name ending in .csv" ;; esac
[ -n "$logs" ] || logs=${out%.csv}-logs

# Resolve the networks to NAME=CFG words: NAME is data/NAME.cfg (installed:
# PREFIX/share/singletrain/networks/NAME.cfg, paths.sh); the
# network's name in the CSV is the cfg's base name.
nets_resolved=
names=
for n in $nets; do
    case $n in
    *.cfg) cfg=$n ;;
    *) cfg=$st_networks/$n.cfg ;;
    esac
    [ -r "$cfg" ] || die_usage "--nets: $cfg is missing or unreadable"
    case $cfg in *[[:space:]]*) die_usage "--nets: '$cfg': a path with spaces" ;; esac
    name=$(basename "$cfg" .cfg)
    case $name in *[!A-Za-z0-9._-]*) die_usage "--nets: '$name': use letters, digits, . _ -" ;; esac
    case " $names " in *" $name "*) die_usage "--nets: $name is given twice" ;; esac
    names="$names $name"
    nets_resolved="$nets_resolved $name=$cfg"
done
[ -n "$names" ] || die_usage "--nets is empty"

# cfg_rule CFG: the update rule the cfg's [net] asks for (solver=, else
# adam=1, else sgd), as singletrain reads it.
cfg_rule() {
    awk '
        /^[ \t]*\[/ { in_net = $0 ~ /^[ \t]*\[(net|network)\]/; next }
        in_net && /^[ \t]*solver[ \t]*=/ { v = $0; sub(/^[^=]*=[ \t]*/, "", v); sub(/[ \t#].*$/, "", v); rule = v }
        in_net && /^[ \t]*adam[ \t]*=[ \t]*1/ { adam = 1 }
        END { print rule != "" ? rule : adam ? "adam" : "sgd" }
    ' "$1"
}

# with_key FILE KEY VALUE: set KEY=VALUE in [net] of FILE, replacing the
# key's line or adding it at the end of [net] (a key given twice is an error
# to singletrain).
with_key() {
    awk -v key="$2" -v val="$3" '
        /^[ \t]*\[/ {
            if (in_net && !done) { print key "=" val; done = 1 }
            in_net = $0 ~ /^[ \t]*\[(net|network)\]/
        }
        in_net && $0 ~ "^[ \t]*" key "[ \t]*=" { print key "=" val; done = 1; next }
        { print }
        END { if (in_net && !done) print key "=" val }
    ' "$1" >"$1.tmp" && mv "$1.tmp" "$1"
}

# The [net] keys a rule other than the cfg's gets (as scripts/bench-solvers.sh
# uses on LeNet-5); SGD and Nesterov keep the cfg's learning rate.
rule_keys() {
    case $1 in
    adagrad) echo "learning_rate=0.01" ;;
    rmsprop) echo "learning_rate=0.001" ;;
    adadelta) echo "learning_rate=1.0 momentum=0.95 delta=0.000001" ;;
    adam) echo "learning_rate=0.001" ;;
    esac
}

mkdir -p "$logs/cfg" || die_usage "--logs $logs: cannot create it"

# One sweep per CSV: OUT.lock, locked with flock(1) on descriptor 9 for the
# sweep's life and holding its pid, as `singletrain pack` locks its store.
# Two sweeps on one --out each renamed their own copy of the CSV over it,
# and half the rows were lost; a second is now refused, naming the first.
# The lock must still be the file named OUT.lock: its holder removes that
# file when it ends, and a sweep that opened it just before would hold a
# lock on a removed file. A dry run writes nothing and takes no lock.
lock=$out.lock
locked=0
lock_out() {
    command -v flock >/dev/null 2>&1 || die_usage "--out $out: locking it needs flock(1) \
(util-linux)"
    tries=0
    while [ "$tries" -lt 16 ]; do
        exec 9>>"$lock" || { echo "sweep.sh: $out: cannot create the lock $lock" >&2; exit 1; }
        if ! flock -n 9; then
            holder=$(head -n 1 "$lock" 2>/dev/null)
            echo "sweep.sh: $out: another sweep (process ${holder:-unknown}) is writing this \
CSV (it holds $lock): wait for it to end, or give another --out" >&2
            exit 1
        fi
        if [ "$(stat -L -c %d:%i /dev/fd/9 2>/dev/null)" = "$(stat -c %d:%i "$lock" 2>/dev/null)" ]
        then
            echo $$ >"$lock"
            locked=1
            trap 'rm -f "$lock"' EXIT # until cleanup (below) takes over
            return
        fi
        exec 9>&-
        tries=$((tries + 1))
    done
    echo "sweep.sh: $out: cannot take the lock $lock: it keeps changing" >&2
    exit 1
}
[ "$dry" -eq 1 ] || lock_out

if [ -e "$out" ]; then
    first=$(head -n 1 "$out")
    [ "$first" != "${header%,busy}" ] || die_usage "$out is a CSV of sweep.sh before its busy \
column: append ',busy' to its first line to go on with it"
    [ "$first" = "$header" ] || die_usage "$out exists and its first line is not this sweep's \
header (another format or not a sweep CSV): expected $header"
fi

tmp_csv=$out.tmp.$$
done_keys=$logs/.done.$$
failed_keys=$logs/.failed.$$
child=
cleanup() {
    rm -f "$tmp_csv" "$done_keys" "$failed_keys" "$logs/.points.$$" "$logs/.todo.$$"
    [ "$locked" -eq 0 ] || rm -f "$lock" # removed while still held (see lock_out)
}
on_signal() {
    if [ -n "$child" ]; then
        kill -TERM "$child" 2>/dev/null
        wait "$child" 2>/dev/null
    fi
    cleanup
    echo "sweep.sh: stopped by SIG$1; the finished runs are in $out: run the same command to go on" >&2
    trap - EXIT
    exit $((128 + $2))
}
trap cleanup EXIT
trap 'on_signal INT 2' INT
trap 'on_signal TERM 15' TERM

# The keys (first keyn fields) of the recorded runs: those that are ok, and
# those that failed (not run again unless --retry-failed).
: >"$done_keys"
: >"$failed_keys"
if [ -e "$out" ]; then
    awk -F, -v s=$((keyn + 1)) 'NR > 1 && $s == "ok"' "$out" | cut -d, -f1-$keyn >"$done_keys"
    awk -F, -v s=$((keyn + 1)) 'NR > 1 && $s != "ok"' "$out" | cut -d, -f1-$keyn >"$failed_keys"
fi

# record ROW: the CSV with ROW in place of any row of the same key (a failed
# run tried again) or at the end, written beside the CSV and renamed over it.
record() {
    row=$1
    key=$(echo "$row" | cut -d, -f1-$keyn)
    {
        if [ -e "$out" ]; then
            awk -v key="$key," 'NR == 1 || index($0, key) != 1' "$out"
        else
            echo "$header"
        fi
        echo "$row"
    } >"$tmp_csv" && mv "$tmp_csv" "$out"
}

# parse_log LOG: the figures of a finished run, comma-separated in the CSV's
# order from images_per_s to train_s, then the solver the log names; exits 1
# when a summary line is missing.
parse_log() {
    awk '
        /^training: / { for (i = 1; i < NF; i++) if ($i == "solver") { solver = $(i + 1); sub(/,$/, "", solver) } }
        /^iter [0-9]+\/[0-9]+ / { for (i = 1; i < NF; i++) if ($i == "loss") loss = $(i + 1) }
        /^done: [0-9]+ iterations in / {
            secs = $5
            for (i = 2; i <= NF; i++) {
                if ($i ~ /^img\/s,?$/) ips = $(i - 1)
                if ($i == "memory") mem = $(i + 1)
            }
        }
        /^time split, ms per iteration: / {
            line = $0
            sub(/^time split, ms per iteration: /, "", line)
            n = split(line, parts, /, /)
            for (k = 1; k <= n; k++) { split(parts[k], kv, " "); ms[kv[1]] = kv[2]; got++ }
        }
        /^communication ms per iteration: / { comm = $5 }
        END {
            if (ips == "" || mem == "" || loss == "" || got < 5 || solver == "") exit 1
            printf "%.10g,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s\n", ips, ms["compute"], ms["barrier"],
                ms["aggregation"], ms["update"], ms["data"], comm == "" ? 0 : comm, mem, loss,
                secs, solver
        }
    ' "$1"
}

# parse_torch_log LOG: parse_log's figures from scripts/torch-ddp.py's
# "result:" line; barrier, aggregation and comm are not measured (empty).
parse_torch_log() {
    awk '
        /^result: / {
            for (i = 2; i <= NF; i++) { split($i, kv, "="); r[kv[1]] = kv[2]; got++ }
        }
        END {
            if (got < 8 || r["images_per_s"] == "" || r["solver"] == "") exit 1
            printf "%s,%s,,,%s,%s,,%s,%s,%s,%s\n", r["images_per_s"], r["compute_ms"],
                r["update_ms"], r["data_ms"], r["peak_memory_mb"], r["final_loss"], r["train_s"],
                r["solver"]
        }
    ' "$1"
}

# log_every: the --log-every of --args (10 without), for torch-ddp.py.
log_every() {
    prev='' every=10
    for a in $extra; do
        [ "$prev" = --log-every ] && every=$a
        case $a in --log-every=*) every=${a#*=} ;; esac
        prev=$a
    done
    echo "$every"
}

# run_point SYSTEM NAME CFG RULE BACKEND BATCH RANKS INTRA THREADS ITERS
# WARMUP RUN: one run unless the CSV has it, its log and its row. SYSTEM is
# "-" in a sweep without a preset (no system column); with one, singletrain,
# mpi-ps, mpi-rhd or torch-ddp, and BATCH is per process.
run_point() {
    sys=$1 name=$2 cfg=$3 rule=$4 be=$5 b=$6 p=$7 i=$8 t=$9 n=${10} w=${11} run=${12}
    index=$((index + 1))
    key="$name,$be,$t,$i,$p,$b,$rule,$n,$w,$run"
    what="[$index/$total] $name $be -t $t --intra $i -np $p -b $b $rule run $run"
    log=${name}_${be}_${rule}_b${b}_p${p}_i${i}_t${t}_n${n}_w${w}_r${run}.log
    if [ "$sys" != - ]; then
        key="$sys,$key"
        what="[$index/$total] $sys ${what#* }"
        log=${sys}_$log
    fi
    if grep -qxF "$key" "$done_keys"; then
        skipped=$((skipped + 1))
        return 0
    fi
    if [ "$retry" -eq 0 ] && grep -qxF "$key" "$failed_keys"; then
        failed_before=$((failed_before + 1))
        return 0
    fi
    # The preset's runs train on synthetic data, 8 global batches of it.
    synthetic=
    [ "$sys" != - ] && synthetic="--data synthetic --train-images $((b * p * 8))"
    # shellcheck disable=SC2086
    case $sys in
    torch-ddp)
        set -- "$python" "$here/torch-ddp.py" --np "$p" --batch "$((b * p))" --iters "$n" \
            --warmup "$w" --log-every "$(log_every)" "$cfg"
        ;;
    mpi-ps | mpi-rhd)
        set -- "$mpirun" -np "$p" "$bin" -t "$t" --intra "$i" -b "$b" --backend "$be" \
            --iters "$n" --warmup "$w" $extra --allreduce "${sys#mpi-}" $synthetic "$cfg"
        ;;
    *)
        set -- "$bin" -t "$t" --intra "$i" -b "$b" --backend "$be" --iters "$n" --warmup "$w" \
            $extra $synthetic "$cfg"
        [ "$p" -gt 1 ] && set -- "$mpirun" -np "$p" "$@"
        ;;
    esac
    [ "$timeout_s" -gt 0 ] && set -- timeout "$timeout_s" "$@"
    if [ "$dry" -eq 1 ]; then
        echo "$what: $*"
        echo "$sys $name $cfg $rule $be $b $p $i $t $n $w" >>"$todo"
        return 0
    fi
    {
        echo "# sweep.sh: ${preset:+system=$sys }network=$name backend=$be threads=$t intra=$i ranks=$p batch=$b solver=$rule iters=$n warmup=$w run=$run"
        echo "# command: $*"
    } >"$logs/$log"
    start=$(date +%s)
    load=$(cut -d' ' -f1 "$loadavg" 2>/dev/null)
    before=$(others_runnable)
    "$@" >>"$logs/$log" 2>&1 </dev/null &
    child=$!
    wait "$child"
    rc=$?
    child=
    after=$(others_runnable)
    used=$((t * i * p))
    busy=$(busy_mark "$before" "$after" "$used")
    note=
    if [ "$busy" = yes ]; then
        note=" BUSY"
        echo "sweep.sh: warning: $what: the machine was busy: $before other threads runnable \
before the run and $after after, on $cores cores of which the run uses $used: its figures \
are slower than the machine's (the CSV's busy column says yes)" >&2
    fi
    status=ok
    figures=
    if [ "$rc" -eq 124 ] && [ "$timeout_s" -gt 0 ]; then
        status=timeout
    elif [ "$rc" -ne 0 ]; then
        status=exit:$rc
    elif [ "$sys" = torch-ddp ] && ! figures=$(parse_torch_log "$logs/$log"); then
        status=unparsed
    elif [ "$sys" != torch-ddp ] && ! figures=$(parse_log "$logs/$log"); then
        status=unparsed
    elif [ "${figures##*,}" != "$rule" ]; then
        status=wrong-solver
    fi
    if [ "$status" = ok ]; then
        record "$key,ok,${figures%,*},$load,$log,$busy"
        ran=$((ran + 1))
        echo "$what: ${figures%%,*} img/s ($(($(date +%s) - start)) s)$note"
        return 0
    fi
    record "$key,$status,,,,,,,,,,,$load,$log,$busy"
    failed=$((failed + 1))
    echo "$what: FAILED ($status)"
    {
        echo "sweep.sh: $what failed ($status): $logs/$log ends:"
        tail -n 5 "$logs/$log" | sed 's/^/    /'
    } >&2
}

# others_runnable: the threads other programs have runnable now: the median
# of 3 samples of loadavg's "R/T" field, R less 1 (the sampler itself);
# empty without the file.
others_runnable() {
    for k in 1 2 3; do
        [ "$k" -gt 1 ] && sleep 0.05
        cut -d' ' -f4 "$loadavg" 2>/dev/null | cut -d/ -f1
    done | sort -n | sed -n 2p | awk '$1 != "" { print ($1 > 0 ? $1 - 1 : 0) }'
}

# busy_mark BEFORE AFTER USED: yes when the more of the other runnable
# threads before and after the run exceeds the cores that USED (threads x
# intra x ranks) leaves free, else no; empty when neither is known.
busy_mark() {
    awk -v a="$1" -v b="$2" -v used="$3" -v cores="$cores" 'BEGIN {
        if (a == "" && b == "") exit
        others = (a + 0 > b + 0) ? a : b
        free = cores - used; if (free < 0) free = 0
        print (others + 0 > free ? "yes" : "no")
    }'
}

# derive_cfg NAME CFG RULE: a copy of CFG in the logs' cfg/ with solver=RULE
# and rule_keys, checked with --dry-run; prints its path.
derive_cfg() {
    dcfg=$logs/cfg/$1-$3.cfg
    adam=0
    [ "$3" = adam ] && adam=1
    if ! { cp "$2" "$dcfg" && with_key "$dcfg" solver "$3" && with_key "$dcfg" adam "$adam"; }; then
        die_usage "cannot write $dcfg"
    fi
    for kv in $(rule_keys "$3"); do
        with_key "$dcfg" "${kv%%=*}" "${kv#*=}"
    done
    if ! "$bin" --dry-run "$dcfg" >"$dcfg.check" 2>&1; then
        cat "$dcfg.check" >&2
        rm -f "$dcfg.check"
        die_usage "$dcfg (--solvers $3 on $2) is not a valid cfg"
    fi
    rm -f "$dcfg.check"
    echo "$dcfg"
}

# The plan: one NAME=CFG=RULE word per network and rule; for a rule other
# than the cfg's own the cfg is derive_cfg's copy.
plan=
planned=
for nc in $nets_resolved; do
    name=${nc%%=*}
    cfg=${nc#*=}
    own=$(cfg_rule "$cfg")
    for s in $solvers; do
        [ "$s" = cfg ] && s=$own
        case " $planned " in *" $name:$s "*) continue ;; esac
        planned="$planned $name:$s"
        run_cfg=$cfg
        [ "$s" != "$own" ] && { run_cfg=$(derive_cfg "$name" "$cfg" "$s") || exit 2; }
        plan="$plan $name=$run_cfg=$s"
    done
done
# The points of one repeat, one per line: SYSTEM NAME CFG RULE BACKEND
# BATCH RANKS INTRA THREADS ITERS WARMUP (run_point's arguments but RUN).
points=$logs/.points.$$
todo=$logs/.todo.$$
# plan_grid: the cross product of the lists; the thread counts of a point
# run back to back.
plan_grid() {
    for entry in $plan; do
        name=${entry%%=*} rest=${entry#*=}
        rule=${rest##*=} cfg=${rest%=*}
        for be in $backends; do
            for b in $batches; do
                for p in $ranks_list; do
                    for i in $intra_list; do
                        for t in $threads_list; do
                            echo "- $name $cfg $rule $be $b $p $i $t $iters $warmup"
                        done
                    done
                done
            done
        done
    done
}
# plan_singlecaffe: per network, rule and global batch, singletrain at every
# thread count, then each baseline at every process count that divides the
# batch, back to back.
plan_singlecaffe() {
    for entry in $plan; do
        name=${entry%%=*} rest=${entry#*=}
        rule=${rest##*=} cfg=${rest%=*}
        bs=$batches n=$iters w=$warmup
        case $name in
        lenet)
            is_given --batches || bs="64 96 128"
            [ "$per_net_length" -eq 1 ] && n=400 w=50
            ;;
        *)
            is_given --batches || bs="100 150 200"
            [ "$per_net_length" -eq 1 ] && n=30 w=5
            ;;
        esac
        for b in $bs; do
            for t in $threads_list; do
                echo "singletrain $name $cfg $rule dnnl $b 1 1 $t $n $w"
            done
            for bl in $baselines; do
                be=dnnl
                [ "$bl" = torch-ddp ] && be=torch
                for p in $threads_list; do
                    if [ $((b % p)) -ne 0 ]; then
                        echo "sweep.sh: $bl with $p processes left out at batch $b (not a multiple of $p)" >&2
                        continue
                    fi
                    echo "$bl $name $cfg $rule $be $((b / p)) $p 1 1 $n $w"
                done
            done
        done
    done
}
if [ -n "$preset" ]; then
    plan_singlecaffe >"$points"
else
    plan_grid >"$points"
fi
total=$(($(wc -l <"$points") * repeat))

# estimate POINTS: a rough time of the runs of POINTS (lines as in
# $points), in seconds, from assumed images/s per core and start-up times
# (printed with it).
estimate() {
    awk -v cores="$(nproc 2>/dev/null || echo 1)" '
        {
            sys = $1; net = $2; b = $6; p = $7; t = $9; n = $10
            small = net == "lenet"
            if (sys == "torch-ddp") { rate = small ? 2500 : 90; start = small ? 2 : 3 }
            else { rate = small ? 10000 : 200; start = small ? 0.5 : 5 }
            if (sys ~ /^mpi-/) start += 1
            used = t * p < cores ? t * p : cores
            secs += start + n * b * p / (rate * used)
        }
        END { printf "%.0f\n", secs }
    ' "$1"
}

: >"$todo"
# Repeat by repeat.
index=0 ran=0 failed=0 skipped=0 failed_before=0
r=1
while [ "$r" -le "$repeat" ]; do
    # shellcheck disable=SC2034
    while read -r sys name cfg rule be b p i t n w; do
        run_point "$sys" "$name" "$cfg" "$rule" "$be" "$b" "$p" "$i" "$t" "$n" "$w" "$r"
    done <"$points"
    r=$((r + 1))
done
if [ "$dry" -eq 1 ]; then
    echo "sweep.sh: $((total - skipped - failed_before)) runs to make, $skipped already in $out, \
$failed_before recorded as failed"
    if [ -n "$preset" ]; then
        secs=$(estimate "$todo")
        echo "sweep.sh: estimated time of the runs to make on $(nproc 2>/dev/null || echo 1) \
cores: about $((secs / 3600)) h $((secs % 3600 / 60)) min (rough: it assumes per core 10,000 \
img/s for LeNet-5 and 200 for the AlexNets on singletrain, as seen in smoke runs, 2,500 and 90 \
on PyTorch, as ../shared/anchors measured, linear in the cores, plus 0.5-6 s of start-up per run)"
    fi
    rm -f "$points" "$todo"
    exit 0
fi
rm -f "$points" "$todo"
echo "sweep.sh: $ran runs ok, $failed failed, $skipped already in $out; logs in $logs"
if [ -n "$preset" ] && [ -e "$out" ]; then
    table=${out%.csv}-ratio.md
    if awk -F, -v format=md -v csv="$out" -f "$here/speed-ratio.awk" "$out" >"$table.tmp.$$"; then
        mv "$table.tmp.$$" "$table"
        echo "sweep.sh: the Speed Ratio table is in $table"
    else
        rm -f "$table.tmp.$$"
        echo "sweep.sh: no Speed Ratio table: scripts/speed-ratio.awk failed on $out" >&2
    fi
fi
if [ "$failed_before" -gt 0 ]; then
    echo "sweep.sh: $failed_before runs are recorded as failed in $out: --retry-failed runs them again" >&2
fi
[ "$failed" -eq 0 ] && [ "$failed_before" -eq 0 ]
