#!/bin/sh
# The oneDNN ISA levels this host offers, for the tests' ISA matrix
# (scripts/run-tests.sh): oneDNN dispatches to the widest instruction set
# the CPU has, and ONEDNN_MAX_CPU_ISA lowers it, so a host with AVX-512 can
# run the AVX2 kernels too. The levels (ONEDNN_MAX_CPU_ISA's names) are
# AVX2, AVX512_CORE, AVX512_CORE_BF16 and AVX512_CORE_AMX, those whose
# instructions the CPU's flags in /proc/cpuinfo name, narrowest first.
#   isa-levels.sh              the levels, one a line
#   isa-levels.sh --describe   the CPU, its vector extensions and the levels
#   isa-levels.sh --check BIN  that oneDNN takes each level (BIN run with
#                              ONEDNN_VERBOSE=1: each level's isa line is its
#                              own); exit 1 when one is not taken
#   isa-levels.sh --distinct BIN
#                              the levels below the widest whose oneDNN
#                              implementations differ from the next wider
#                              level's (LeNet-5 and cifar-alexnet-bn, one
#                              iteration with their kernels measured: every
#                              implementation created, by kind and pass); the
#                              others are said on stderr (on an AVX-512 host
#                              AVX512_CORE_BF16 runs the fp32 kernels of
#                              AVX512_CORE: testing both tests one twice)
set -u
flags=" $(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null | cut -d: -f2) "
has() {
    for f; do
        case "$flags" in *" $f "*) ;; *) return 1 ;; esac
    done
}
levels() {
    core="avx512f avx512bw avx512vl avx512dq"
    has avx2 fma && echo AVX2
    has $core && echo AVX512_CORE
    has $core avx512_vnni avx512_bf16 && echo AVX512_CORE_BF16
    has $core avx512_vnni avx512_bf16 amx_tile amx_bf16 amx_int8 && echo AVX512_CORE_AMX
}
# The ISA oneDNN says it dispatches to under ONEDNN_MAX_CPU_ISA=$2.
seen() {
    cache=$(mktemp -d)
    XDG_CACHE_HOME=$cache ONEDNN_MAX_CPU_ISA=$2 ONEDNN_VERBOSE=1 "$1" --data synthetic \
        --train-images 8 -b 8 --iters 1 --no-test -q -t 1 \
        "$(dirname "$0")/../tests/fixtures/tiny.cfg" 2>&1 |
        sed -n 's/^onednn_verbose,info,cpu,isa://p' | head -n 1
    rm -rf "$cache"
}
# The oneDNN implementations BIN creates under ONEDNN_MAX_CPU_ISA=$2 (kind,
# implementation, pass), sorted.
implementations() {
    root=$(dirname "$0")/..
    for net in "$root/data/lenet.cfg" "$root/data/cifar-alexnet-bn.cfg"; do
        cache=$(mktemp -d)
        XDG_CACHE_HOME=$cache ONEDNN_MAX_CPU_ISA=$2 ONEDNN_VERBOSE=1 "$1" --data synthetic \
            --train-images 4 -b 4 --iters 1 --no-test -q -t 1 "$net" 2>&1
        rm -rf "$cache"
    done | awk -F, '$1 == "onednn_verbose" && ($2 == "exec" || $2 == "create") {
        print $4 "," $5 "," $6 }' | sort -u
}
case "${1:-}" in
"")
    levels
    ;;
--describe)
    model=$(grep -m1 '^model name' /proc/cpuinfo 2>/dev/null | cut -d: -f2 | sed 's/^ *//')
    ext=$(echo $flags | tr ' ' '\n' | grep -E '^(avx2|fma|avx512.*|amx_.*)$' | tr '\n' ' ')
    echo "host: ${model:-unknown CPU}; ${ext:-no AVX2 or AVX-512}"
    echo "oneDNN ISA levels: $(levels | tr '\n' ' ')"
    ;;
--check)
    [ $# -eq 2 ] || { echo "usage: isa-levels.sh --check BIN" >&2; exit 2; }
    all=""
    for level in $(levels); do
        line=$(seen "$2" "$level")
        echo "ONEDNN_MAX_CPU_ISA=$level: ${line:-(no isa line)}"
        [ -n "$line" ] || { echo "oneDNN printed no isa line under ONEDNN_VERBOSE=1" >&2; exit 1; }
        case "$all" in
        *"|$line|"*)
            echo "$level: oneDNN took a level already seen: ONEDNN_MAX_CPU_ISA not honoured" >&2
            exit 1
            ;;
        esac
        all="$all|$line|"
    done
    ;;
--distinct)
    [ $# -eq 2 ] || { echo "usage: isa-levels.sh --distinct BIN" >&2; exit 2; }
    bin=$2
    wider=""
    for level in $(levels | tac); do
        mine=$(implementations "$bin" "$level")
        [ -n "$mine" ] || { echo "$level: oneDNN printed no implementation" >&2; exit 1; }
        if [ -n "$wider" ]; then
            if [ "$mine" = "$wider_impls" ]; then
                echo "$level: the same oneDNN implementations as $wider: not tested again" >&2
            else
                echo "$level"
            fi
        fi
        wider=$level
        wider_impls=$mine
    done | tac
    ;;
*)
    echo "usage: isa-levels.sh [--describe | --check BIN | --distinct BIN]" >&2
    exit 2
    ;;
esac
