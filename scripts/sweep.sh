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
#   log             the log's file name inside --logs
# A failed run is reported on stderr and recorded with its status and empty
# figures; it is not run again unless --retry-failed is given, and its row is
# then replaced. Each row is written after its run ended, by writing the new
# CSV beside the old and renaming it, so an interrupted sweep (SIGINT,
# SIGTERM: the run in flight is stopped and not recorded) leaves only whole
# rows. One sweep per CSV at a time.
#
# Exit status: 0 when every run of the grid is ok, 1 when a run failed, 2 on
# bad usage, 128 + the signal when stopped.
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
bin=${SINGLETRAIN:-$root/build/singletrain}
mpirun=${MPIRUN:-mpirun}
header="network,backend,threads,intra,ranks,batch,solver,iters,warmup,run,status,images_per_s,\
compute_ms,barrier_ms,aggregation_ms,update_ms,data_ms,comm_ms,peak_memory_mb,final_loss,train_s,load1,log"
rules="sgd nesterov adagrad rmsprop adadelta adam"

usage() {
    cat <<EOF
usage: scripts/sweep.sh [options]
Runs singletrain (\$SINGLETRAIN, default build/singletrain) over the grid of
the lists below (quoted, space-separated) and appends one CSV row per run.
Every option can also be given as the environment variable in brackets.
  --nets "NET ..."       networks: data/NET.cfg or a path to a .cfg (SWEEP_NETS; lenet)
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
  -h, --help             this help
Runs go repeat by repeat, so the noise of a busy machine spreads over all points.
EOF
}

# count WORD...: how many words.
count() { echo $#; }

die_usage() {
    echo "sweep.sh: $*" >&2
    echo "sweep.sh: scripts/sweep.sh --help lists the options" >&2
    exit 2
}

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
    *) die_usage "unknown option $opt" ;;
    esac
done

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
if [ "$timeout_s" -gt 0 ] && ! command -v timeout >/dev/null 2>&1; then
    die_usage "--timeout needs timeout(1) (coreutils)"
fi
case $out in *.csv) ;; *) die_usage "--out $out: expected a file name ending in .csv" ;; esac
[ -n "$logs" ] || logs=${out%.csv}-logs

# Resolve the networks to NAME=CFG words: NAME is data/NAME.cfg; the
# network's name in the CSV is the cfg's base name.
nets_resolved=
names=
for n in $nets; do
    case $n in
    *.cfg) cfg=$n ;;
    *) cfg=$root/data/$n.cfg ;;
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
if [ -e "$out" ]; then
    first=$(head -n 1 "$out")
    [ "$first" = "$header" ] || die_usage "$out exists and its first line is not this sweep's \
header (another format or not a sweep CSV): expected $header"
fi

tmp_csv=$out.tmp.$$
done_keys=$logs/.done.$$
failed_keys=$logs/.failed.$$
child=
cleanup() { rm -f "$tmp_csv" "$done_keys" "$failed_keys"; }
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

# The keys (first ten fields) of the recorded runs: those that are ok, and
# those that failed (not run again unless --retry-failed).
: >"$done_keys"
: >"$failed_keys"
if [ -e "$out" ]; then
    awk -F, 'NR > 1 && $11 == "ok"' "$out" | cut -d, -f1-10 >"$done_keys"
    awk -F, 'NR > 1 && $11 != "ok"' "$out" | cut -d, -f1-10 >"$failed_keys"
fi

# record ROW: the CSV with ROW in place of any row of the same key (a failed
# run tried again) or at the end, written beside the CSV and renamed over it.
record() {
    row=$1
    key=$(echo "$row" | cut -d, -f1-10)
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

# run_point NAME CFG RULE BACKEND BATCH RANKS INTRA THREADS RUN: one run
# unless the CSV has it, its log and its row.
run_point() {
    name=$1 cfg=$2 rule=$3 be=$4 b=$5 p=$6 i=$7 t=$8 run=$9
    index=$((index + 1))
    key="$name,$be,$t,$i,$p,$b,$rule,$iters,$warmup,$run"
    what="[$index/$total] $name $be -t $t --intra $i -np $p -b $b $rule run $run"
    if grep -qxF "$key" "$done_keys"; then
        skipped=$((skipped + 1))
        return 0
    fi
    if [ "$retry" -eq 0 ] && grep -qxF "$key" "$failed_keys"; then
        failed_before=$((failed_before + 1))
        return 0
    fi
    log=${name}_${be}_${rule}_b${b}_p${p}_i${i}_t${t}_n${iters}_w${warmup}_r${run}.log
    # shellcheck disable=SC2086
    set -- "$bin" -t "$t" --intra "$i" -b "$b" --backend "$be" --iters "$iters" \
        --warmup "$warmup" $extra "$cfg"
    [ "$p" -gt 1 ] && set -- "$mpirun" -np "$p" "$@"
    [ "$timeout_s" -gt 0 ] && set -- timeout "$timeout_s" "$@"
    if [ "$dry" -eq 1 ]; then
        echo "$what: $*"
        return 0
    fi
    {
        echo "# sweep.sh: network=$name backend=$be threads=$t intra=$i ranks=$p batch=$b solver=$rule iters=$iters warmup=$warmup run=$run"
        echo "# command: $*"
    } >"$logs/$log"
    start=$(date +%s)
    load=$(cut -d' ' -f1 /proc/loadavg 2>/dev/null)
    "$@" >>"$logs/$log" 2>&1 </dev/null &
    child=$!
    wait "$child"
    rc=$?
    child=
    status=ok
    figures=
    if [ "$rc" -eq 124 ] && [ "$timeout_s" -gt 0 ]; then
        status=timeout
    elif [ "$rc" -ne 0 ]; then
        status=exit:$rc
    elif ! figures=$(parse_log "$logs/$log"); then
        status=unparsed
    elif [ "${figures##*,}" != "$rule" ]; then
        status=wrong-solver
    fi
    if [ "$status" = ok ]; then
        record "$key,ok,${figures%,*},$load,$log"
        ran=$((ran + 1))
        echo "$what: ${figures%%,*} img/s ($(($(date +%s) - start)) s)"
        return 0
    fi
    record "$key,$status,,,,,,,,,,,$load,$log"
    failed=$((failed + 1))
    echo "$what: FAILED ($status)"
    {
        echo "sweep.sh: $what failed ($status): $logs/$log ends:"
        tail -n 5 "$logs/$log" | sed 's/^/    /'
    } >&2
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
# shellcheck disable=SC2086
total=$(($(count $plan) * $(count $backends) * $(count $batches) * $(count $ranks_list) *
    $(count $intra_list) * $(count $threads_list) * repeat))

# Repeat by repeat; within one, the thread counts of a point run back to back.
index=0 ran=0 failed=0 skipped=0 failed_before=0
r=1
while [ "$r" -le "$repeat" ]; do
    for entry in $plan; do
        name=${entry%%=*}
        rest=${entry#*=}
        rule=${rest##*=}
        cfg=${rest%=*}
        for be in $backends; do
            for b in $batches; do
                for p in $ranks_list; do
                    for i in $intra_list; do
                        for t in $threads_list; do
                            run_point "$name" "$cfg" "$rule" "$be" "$b" "$p" "$i" "$t" "$r"
                        done
                    done
                done
            done
        done
    done
    r=$((r + 1))
done
if [ "$dry" -eq 1 ]; then
    echo "sweep.sh: $((total - skipped - failed_before)) runs to make, $skipped already in $out, \
$failed_before recorded as failed"
    exit 0
fi
echo "sweep.sh: $ran runs ok, $failed failed, $skipped already in $out; logs in $logs"
if [ "$failed_before" -gt 0 ]; then
    echo "sweep.sh: $failed_before runs are recorded as failed in $out: --retry-failed runs them again" >&2
fi
[ "$failed" -eq 0 ] && [ "$failed_before" -eq 0 ]
