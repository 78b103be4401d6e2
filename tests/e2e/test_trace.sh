#!/bin/sh
# --trace FILE: the run's timeline in the Chrome trace event format, read
# back with python3's json module by tests/lib/trace_check.py (see there
# what it checks: the fields Perfetto's JSON importer reads, the tracks of
# the scheduler, each worker and the prefetcher, the window, nesting
# without partial overlaps, each layer inside its iteration's compute
# phase, the phases summing to each iteration's time within 5% and the
# iterations' times against --metrics within 5%):
# - LeNet-5, -t 2, --trace-iters 3:8 beside --metrics --log-every 1;
# - the default window (5 iterations from iteration 5) and --sync ssp:1
#   (the same checks of its phases);
# - a run stopped by SIGINT still writes its trace;
# - the memory estimate names the trace, a figure that holds the file;
# - no FILE.partial is left, and FILE is never half-written: it appears
#   whole, by rename, at the end (its temporary is FILE.partial);
# - without --trace nothing is recorded: no file, and the same weights;
# - scripts/trace-plot.py renders a trace to a PNG (gnuplot), and refuses
#   a file that is not a trace.
# The refusals (bad --trace-iters, an output that is an input) are
# catalogue cases; under mpirun, tests/mpi/test_trace_ranks.sh.
# usage: sh tests/e2e/test_trace.sh PATH_TO_SINGLETRAIN
set -u
. "$(dirname "$0")/../lib/check.sh"
suite_start "$@"
require_cmd python3 python3
require_cmd gnuplot gnuplot-nox
root=$(cd "$(dirname "$0")/../.." && pwd)
cfg=$root/data/lenet.cfg
checker=$root/tests/lib/trace_check.py
inputs="--data synthetic --train-images 2000 --no-test --conv-impl nhwc"

# trace_ok NAME CHECKER_ARGS...: trace_check.py's checks as one
trace_ok() {
    _name=$1
    shift
    check "$_name" out 0 "" -- python3 "$checker" "$@"
}

cd "$tmp" || exit 2
check "LeNet-5 -t 2, --trace-iters 3:8, --metrics" out 0 "trace: t.json written" -- \
    "$bin" -t 2 -b 64 --iters 10 $inputs --log-every 1 --metrics m.csv --trace t.json \
    --trace-iters 3:8 "$cfg"
traced=$(sed -n 's/^memory: .*, trace \([0-9.]*\) MB;.*/\1/p' "$tmp/stdout")
# the memory estimate counts the trace: its figure holds the file's text
expect "the memory estimate's trace (${traced:-none} MB) holds the file ($(wc -c <t.json) bytes)" \
    awk -v mb="${traced:-0}" -v bytes="$(wc -c <t.json)" 'BEGIN { exit !(mb * 1e6 >= bytes) }'
trace_ok "the trace of iterations 3 to 8: tracks, window, nesting, phases, --metrics" \
    t.json --ranks 1 --workers 2 --iters 3:8 --metrics m.csv
expect "no t.json.partial left" test ! -e t.json.partial

check "the default window" out 0 "trace: iterations 5 to 9 recorded" -- \
    "$bin" -t 2 -b 64 --iters 12 $inputs --trace d.json "$cfg"
trace_ok "the default window's trace" d.json --ranks 1 --workers 2 --iters 5:9

check "--sync ssp:1" out 0 "trace: s.json written" -- \
    "$bin" -t 2 -b 64 --iters 6 $inputs --sync ssp:1 --trace s.json --trace-iters 1:4 "$cfg"
trace_ok "--sync ssp:1's trace (no prefetcher)" s.json --ranks 1 --workers 2 --iters 1:4 --async

# SIGINT in the window's middle: the run stops cleanly and writes its trace
"$bin" -t 2 -b 64 --iters 100000 $inputs --log-every 1 --trace i.json --trace-iters 0:99 \
    "$cfg" >run.out 2>run.err &
pid=$!
wait_for run.out "iter 20/" && kill -INT "$pid"
wait "$pid"
rc=$?
expect "SIGINT: exit 130" [ "$rc" -eq 130 ]
expect "SIGINT: the trace written" grep -q "trace: i.json written" run.out
check "SIGINT: the trace is whole JSON" out 0 "" -- python3 -c \
    "import json; e = json.load(open('i.json'))['traceEvents']; assert len(e) > 100"
expect "SIGINT: no i.json.partial left" test ! -e i.json.partial

# without --trace: the same weights, no file
mkdir with without
check "with --trace: weights" err 0 "" -- "$bin" -t 2 -b 64 --iters 4 $inputs -q \
    --trace w.json --trace-iters 0:3 --snapshot-dir with "$cfg"
check "without --trace: weights" err 0 "" -- "$bin" -t 2 -b 64 --iters 4 $inputs -q \
    --snapshot-dir without "$cfg"
expect "the same weights with and without --trace" cmp -s with/lenet_final.snap \
    without/lenet_final.snap
expect "without --trace no .json" [ "$(ls without)" = lenet_final.snap ]

check "trace-plot.py: t.json to a PNG" err 0 "" -- \
    python3 "$root/scripts/trace-plot.py" t.json t.png --title "LeNet-5 -t 2"
expect "trace-plot.py: a PNG image" [ "$(head -c 4 t.png | od -An -c | tr -d ' ')" = "211PNG" ]
check "trace-plot.py: a CSV is no trace" err 2 "m.csv: not a --trace file" -- \
    python3 "$root/scripts/trace-plot.py" m.csv m.png

finish test_trace.sh
