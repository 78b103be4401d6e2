#!/bin/sh
# --precision bf16 end to end, on the reference backend (the bf16 oracle,
# plain C: every host): LeNet-5 (data/lenet.cfg) on Fashion-MNIST trains a
# few hundred iterations with a falling loss; the same command twice gives
# byte-identical snapshots, and so does a run resumed from a bf16
# snapshot; bf16 is really applied (the weights are not fp32's) and stays
# near fp32 (the final losses close); the log and --dry-run name the
# precision, and resuming a bf16 snapshot in fp32 says so; the outputs of
# layers 0-4, which go only to layers that round them to bf16, are kept
# rounded (as floats). Then the oneDNN
# backend, where oneDNN's ISA has bf16 (AVX-512: avx512_core emulates it,
# avx512_core_bf16 and AMX have it; elsewhere a SKIP line naming the ISA):
# it stores those outputs as bf16, and the memory estimate counts them at
# 2 bytes a value; LeNet-5 with its
# convolutions' implementation given (--conv-impl nhwc, no measuring)
# trains with a falling loss, the same command twice gives the same bytes,
# a resumed run too, and its weights are not fp32's; --parallel hybrid
# stays near data-parallel's loss; under oneDNN's emulation
# (ONEDNN_MAX_CPU_ISA=AVX512_CORE) it trains too. The backends that refuse
# bf16 are the catalogue's cases (opt-precision-*), the kernels' arithmetic
# tests/unit/test_bf16.c's. In the ISA matrix's run (ST_TEST_ISA_RERUN, set
# by scripts/run-tests.sh with ONEDNN_MAX_CPU_ISA) the ref backend's part
# is left out: it runs no oneDNN code, so it would repeat the plain run's
# runs bit for bit.
# usage: sh tests/e2e/test_bf16.sh PATH_TO_SINGLETRAIN
set -u
. "$(dirname "$0")/../lib/check.sh"
suite_start "$@"
net=$(cd "$(dirname "$0")/../../data" && pwd)/lenet.cfg
# the weights compared without the header (which records the precision)
snapdiff=$(dirname "$bin")/tools/snapdiff
if [ ! -x "$snapdiff" ]; then
    echo "test_bf16.sh: $snapdiff is missing: build it first" \
        "(make $(dirname "$bin")/tools/snapdiff)" >&2
    exit 2
fi
# batch 16, 300 iterations: a few seconds a run on 2 cores
train="$bin --backend ref -t 2 -b 16 --iters 300 --no-test --log-every 25 -q"

# the loss column of the first and last logged iterations (25 and 300)
loss() { # FILE first|last
    awk -F, -v which="$2" '$1 == "train" { if (!n++ || which == "last") v = $5 } END { print v }' "$1"
}
# verdict LABEL P: the checks of one backend's runs, in $tmp/Pa (bf16),
# Pb (the same command again), Pc (resumed at 150) and Pf (fp32), with
# their metrics in $tmp/Pa.csv and $tmp/Pf.csv; LABEL opens each name
verdict() {
    _l=$1 _p=$2
    first=$(loss "$tmp/${_p}a.csv" first) last=$(loss "$tmp/${_p}a.csv" last)
    fp32=$(loss "$tmp/${_p}f.csv" last)
    echo "     ${_l}bf16 loss $first at iteration 25, $last at 300; fp32 $fp32 at 300"
    expect "${_l}the bf16 loss falls by a third or more (iteration 25 to 300)" \
        awk -v a="$first" -v b="$last" 'BEGIN { exit !(a > 0 && b < a * 2 / 3) }'
    expect "${_l}the bf16 loss ends within 0.15 of fp32's" \
        awk -v a="$last" -v b="$fp32" 'BEGIN { d = a - b; exit !(b > 0 && d < 0.15 && d > -0.15) }'
    expect "${_l}the same bf16 command gives the same bytes" \
        cmp -s "$tmp/${_p}a/lenet_final.snap" "$tmp/${_p}b/lenet_final.snap"
    expect "${_l}resumed in bf16: the same bytes as uninterrupted" \
        cmp -s "$tmp/${_p}a/lenet_final.snap" "$tmp/${_p}c/lenet_final.snap"
    "$snapdiff" "$net" "$tmp/${_p}f/lenet_final.snap" "$tmp/${_p}a/lenet_final.snap" 1e-4 \
        >"$tmp/diff" 2>&1
    rc=$?
    sed 's/^/     /' "$tmp/diff"
    expect "${_l}bf16's weights differ from fp32's by more than 1e-4 of a tensor's largest value" \
        [ "$rc" -eq 1 ]
}

if [ -n "${ST_TEST_ISA_RERUN:-}" ]; then
    echo "SKIP: the ref backend's runs in the ISA matrix's run ($ST_TEST_ISA_RERUN): the plain run made them"
else
    check "--dry-run names the precision" out 0 "precision: bf16 (convolutions and inner products" -- \
        "$bin" --dry-run --backend ref --precision bf16 "$net"
    check "the log names the precision" out 0 "backend ref, precision bf16" -- \
        "$bin" --backend ref --precision bf16 -b 16 --iters 2 --no-test "$net"
    # LeNet-5: conv, max, conv, max, connected (relu), connected, softmax;
    # the last connected's output goes to softmax, which computes in fp32
    check "the ref backend keeps layers 0-4's outputs rounded to bf16, as floats" out 0 \
        "bf16 activations: the outputs of layers 0 1 2 3 4 go only to layers that round them to bf16 themselves, and are kept rounded (0 of 5 stored as bf16" -- \
        "$bin" --backend ref --precision bf16 -b 16 --iters 1 --no-test "$net"

    check "bf16 training" err 0 "" -- \
        $train --precision bf16 --metrics "$tmp/a.csv" --snapshot-dir "$tmp/a" "$net"
    check "bf16 training again, a snapshot at 150" err 0 "" -- \
        $train --precision bf16 --snapshot-every 150 --snapshot-dir "$tmp/b" "$net"
    check "bf16 resumed at 150" err 0 "" -- \
        $train --precision bf16 --resume "$tmp/b/lenet_150.snap" --snapshot-dir "$tmp/c" "$net"
    check "a bf16 snapshot resumed in fp32 says so" err 0 \
        "lenet_150.snap was written by a run in bf16, this run computes in fp32" -- \
        "$bin" --backend ref -t 2 -b 16 --iters 152 --no-test -q --precision fp32 \
        --resume "$tmp/b/lenet_150.snap" "$net"
    check "fp32 training" err 0 "" -- \
        $train --precision fp32 --metrics "$tmp/f.csv" --snapshot-dir "$tmp/f" "$net"
    verdict "" ""
fi

# ---- the oneDNN backend, where its ISA has bf16
"$bin" --dry-run --backend dnnl --precision bf16 "$net" >/dev/null 2>"$tmp/caps"
rc=$?
if [ "$rc" -eq 2 ] && grep -q "has no bf16 on this CPU" "$tmp/caps"; then
    isa=$(sed -n 's/.*(ISA \([a-z0-9_]*\).*/\1/p' "$tmp/caps")
    echo "SKIP: no bf16 on this CPU (ISA $isa): the dnnl bf16 runs (the ref ones above ran)"
else
    check "dnnl: --dry-run in bf16" err 0 "" -- \
        "$bin" --dry-run --backend dnnl --precision bf16 "$net"
    check "dnnl stores layers 0-4's outputs as bf16" out 0 \
        "bf16 activations: the outputs of layers 0 1 2 3 4 go only to layers that round them to bf16 themselves, and are kept rounded (5 of 5 stored as bf16 by the dnnl backend" -- \
        "$bin" --backend dnnl --conv-impl nhwc --precision bf16 -b 16 --iters 1 --no-test "$net"
    # the memory estimate counts them at 2 bytes a value: per sample 20 x
    # 24 x 24 + 20 x 12 x 12 + 50 x 8 x 8 + 50 x 4 x 4 + 500 = 18,900
    # values (nhwc: no padding), 80 samples a worker: 3,024,000 bytes
    outs=$("$bin" --dry-run --backend dnnl --conv-impl nhwc -t 2 -b 160 --precision bf16 "$net" 2>&1 |
        sed -n 's/.*(\([0-9.]*\) MB of them outputs stored in bf16).*/\1/p')
    echo "     dnnl: the estimate's outputs stored in bf16: $outs MB a worker (3,024,000 bytes expected)"
    expect "dnnl: the memory estimate counts the bf16 outputs at 2 bytes a value" [ "$outs" = "3.0" ]
    dnnl="$bin --backend dnnl --conv-impl nhwc -t 2 -b 16 --iters 300 --no-test --log-every 25 -q"
    check "dnnl bf16 training" err 0 "" -- \
        $dnnl --precision bf16 --metrics "$tmp/da.csv" --snapshot-dir "$tmp/da" "$net"
    check "dnnl bf16 training again, a snapshot at 150" err 0 "" -- \
        $dnnl --precision bf16 --snapshot-every 150 --snapshot-dir "$tmp/db" "$net"
    check "dnnl bf16 resumed at 150" err 0 "" -- \
        $dnnl --precision bf16 --resume "$tmp/db/lenet_150.snap" --snapshot-dir "$tmp/dc" "$net"
    check "dnnl fp32 training" err 0 "" -- \
        $dnnl --precision fp32 --metrics "$tmp/df.csv" --snapshot-dir "$tmp/df" "$net"
    verdict "dnnl: " d
    # hybrid: the inner products split by neurons over the workers, whose
    # data-parallel kernel runs backward-data only (no forward of its own
    # before it): the same arithmetic, summed in other orders
    check "dnnl bf16 training, --parallel hybrid" err 0 "" -- \
        $dnnl --precision bf16 --parallel hybrid --metrics "$tmp/dh.csv" "$net"
    # the loss at iteration 100, where the two trajectories have not yet
    # drifted apart (0.80 and 0.80 here; 1.00 hybrid with backward-data
    # reading weights no forward had converted)
    at100() { awk -F, '$1 == "train" && $2 == 100 { print $5 }' "$1"; }
    dp=$(at100 "$tmp/da.csv") hy=$(at100 "$tmp/dh.csv")
    echo "     dnnl bf16 loss at 100: $dp data-parallel, $hy hybrid"
    expect "dnnl: bf16 hybrid's loss at 100 within 0.03 of data-parallel's" \
        awk -v a="$dp" -v b="$hy" 'BEGIN { d = a - b; exit !(a > 0 && d < 0.03 && d > -0.03) }'
    # oneDNN's bf16 emulation (where the ISA is avx512_core already, the
    # same path again; under ONEDNN_MAX_CPU_ISA=AVX512_CORE, the ISA
    # matrix's, "dnnl bf16 training" above was this run: its losses are read)
    if [ "${ONEDNN_MAX_CPU_ISA:-}" = AVX512_CORE ]; then
        echo "     ONEDNN_MAX_CPU_ISA=AVX512_CORE: the dnnl bf16 training above ran emulated"
        cp "$tmp/da.csv" "$tmp/de.csv"
    else
        check "dnnl bf16 under oneDNN's emulation (ONEDNN_MAX_CPU_ISA=AVX512_CORE)" err 0 "" -- \
            env ONEDNN_MAX_CPU_ISA=AVX512_CORE $dnnl --precision bf16 --metrics "$tmp/de.csv" "$net"
    fi
    first=$(loss "$tmp/de.csv" first) last=$(loss "$tmp/de.csv" last)
    echo "     emulated: dnnl bf16 loss $first at iteration 25, $last at 300"
    expect "dnnl, emulated bf16: the loss falls by a third or more" \
        awk -v a="$first" -v b="$last" 'BEGIN { exit !(a > 0 && b < a * 2 / 3) }'
fi

finish "$(basename "$0")"
