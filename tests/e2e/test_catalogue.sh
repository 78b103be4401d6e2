#!/bin/sh
# The catalogue of bad inputs: every case of tests/e2e/catalogue.tsv (a cfg,
# data file, store, snapshot or .weights file with one mistake, an option
# mistake, an unwritable or full output) is generated into a scratch
# directory and run under a timeout; it must exit with its exit code (no
# crash, no hang), print its message substring on stderr, and leave no
# output file behind (nor change the shared fixtures).
#
# catalogue.tsv: one case a line, tab-separated, '#' lines are comments:
#   NAME  EXIT  MESSAGE  INPUT  COMMAND  [AFTER]
# INPUT is a shell command whose standard output becomes the file {in}
# (in/NAME), or '-' for none, or '!' and a command that makes {in} itself.
# COMMAND runs in its own sh (so ulimit and trap stay there). AFTER is a
# shell condition that must hold afterwards; without it a failing case must
# leave its output directory {out} empty. A MESSAGE of '-' checks no text
# (a process killed by a signal prints nothing). No column is empty: the
# shell's read would join the tabs around it.
# Placeholders: {bin} singletrain, {in} the case's input, {fx} the shared
# fixtures, {out} the case's empty output directory, {nobody} a prefix that
# drops root privileges (so that unreadable files and unwritable
# directories are that for the program).
# Helpers for INPUT: first FILE BYTES, poke FILE OFFSET OCTAL..., be32 N,
# le32 N, le64 N, recrc FILE (a store index with its checksum redone),
# resnap FILE OFFSET OCTAL... (a snapshot poked, its checksums redone),
# store_as PATH (copies the fixture store there), onnx_bad CASE [ARG] FILE
# (a bad ONNX model, tests/lib/onnx_bad_models.py).
# usage: sh tests/e2e/test_catalogue.sh PATH_TO_SINGLETRAIN
set -u
. "$(dirname "$0")/../lib/check.sh"
suite_start "$@"
table=$(cd "$(dirname "$0")" && pwd)/catalogue.tsv
[ -f "$table" ] || { echo "no $table" >&2; exit 2; }
fx=$tmp/fx
mkdir "$fx" "$tmp/in" "$tmp/out"
# The unprivileged runs (see {nobody}) must reach the scratch directory.
chmod 755 "$tmp" "$tmp/in" "$tmp/out"
nobody=
if [ "$(id -u)" -eq 0 ]; then
    command -v setpriv >/dev/null 2>&1 || { echo "running as root needs setpriv" >&2; exit 2; }
    nobody="setpriv --reuid=65534 --regid=65534 --clear-groups"
fi

# ---------------------------------------------------------------- helpers

# The first BYTES bytes of FILE.
first() {
    head -c "$2" "$1"
}
# FILE with the bytes at OFFSET replaced by the octal escapes that follow.
poke() {
    _f=$1 _o=$2
    shift 2
    cp "$_f" "$tmp/poke"
    printf "$(printf '\\%s' "$@")" | dd of="$tmp/poke" bs=1 seek="$_o" conv=notrunc 2>/dev/null
    cat "$tmp/poke"
}
# N as 4 bytes big-endian, 4 bytes little-endian, 8 bytes little-endian.
be32() {
    printf "$(printf '\\%03o\\%03o\\%03o\\%03o' $(($1 >> 24 & 255)) $(($1 >> 16 & 255)) \
        $(($1 >> 8 & 255)) $(($1 & 255)))"
}
le32() {
    printf "$(printf '\\%03o\\%03o\\%03o\\%03o' $(($1 & 255)) $(($1 >> 8 & 255)) \
        $(($1 >> 16 & 255)) $(($1 >> 24 & 255)))"
}
le64() {
    le32 $(($1 & 4294967295))
    le32 $(($1 >> 32 & 4294967295))
}
# FILE without its last 4 bytes, then their CRC-32 (zlib's, little-endian,
# as gzip's trailer holds it): a store index made consistent again.
recrc() {
    head -c -4 "$1" >"$tmp/recrc"
    cat "$tmp/recrc"
    gzip -c <"$tmp/recrc" | tail -c 8 | head -c 4
}
# FILE, a snapshot, with the bytes at OFFSET replaced as poke does, then
# both of its checksums made right again: the payload's (from 88 + the
# settings size, the u32 at 60) at 80, then the header's (its first 84
# bytes and the settings) at 84. zlib's CRC-32 is gzip's.
resnap() {
    poke "$@" >"$tmp/resnap"
    _s=$(od -An -tu4 -j60 -N4 "$tmp/resnap" | tr -d ' ')
    head -c 80 "$tmp/resnap" >"$tmp/resnap.head"
    tail -c +$((89 + _s)) "$tmp/resnap" | gzip -c | tail -c 8 | head -c 4 >>"$tmp/resnap.head"
    tail -c +89 "$tmp/resnap" | head -c "$_s" >"$tmp/resnap.settings"
    cat "$tmp/resnap.head" "$tmp/resnap.settings" | gzip -c | tail -c 8 | head -c 4 \
        >>"$tmp/resnap.head"
    cat "$tmp/resnap.head"
    tail -c +89 "$tmp/resnap"
}
# Copy the fixture store (index and stripes) to PATH, stripes renamed.
store_as() {
    cp "$fx/store" "$1"
    for _s in "$fx"/store.*; do
        cp "$_s" "$1${_s#"$fx/store"}"
    done
}

# The ONNX model CASE (with ARG) of tests/lib/onnx_bad_models.py into FILE.
onnx_bad() {
    /usr/bin/python3 "$fixtures/../lib/onnx_bad_models.py" "$@"
}

# --------------------------------------------------------------- fixtures

# tiny.cfg: 8x8x1, 3 classes; mnist.cfg: 28x28x1, 10 classes; cifar.cfg:
# 32x32x3, 10 classes.
cp "$fixtures/tiny.cfg" "$fx/tiny.cfg"
# The SW26010 model file built into singletrain (--cpe-model's cases).
cp "$fixtures/../../data/sw26010/model.conf" "$fx/model.conf"
# The SW26010 machine description built in (--cpe-machine's cases).
cp "$fixtures/../../data/sw26010/sw26010.machine" "$fx/sw26010.machine"
cp "$fixtures/mnist-linear.cfg" "$fx/mnist.cfg"
sed -e 's/^height=28/height=32/' -e 's/^width=28/width=32/' -e 's/^channels=1/channels=3/' \
    "$fx/mnist.cfg" >"$fx/cifar.cfg"

# IDX: 20 images of 28x28 (16-byte header + 15680 bytes), labels 0..9
# twice (8-byte header + 20 bytes).
{ be32 2051; be32 20; be32 28; be32 28; head -c 15680 /dev/zero | tr '\0' '\177'; } \
    >"$fx/images.idx"
{ be32 2049; be32 20; printf '\0\1\2\3\4\5\6\7\10\11\0\1\2\3\4\5\6\7\10\11'; } >"$fx/labels.idx"
printf 'train=%s\ntrain_labels=%s\n' "$fx/images.idx" "$fx/labels.idx" >"$fx/idx.data"
{ be32 2049; be32 1; printf '\3'; } >"$fx/one.labels"
{ be32 2049; be32 1000; head -c 1000 /dev/zero; } >"$fx/zeros.labels"
# CIFAR-10: 6 records (label 0..5, 3072 pixel bytes each).
for label in 0 1 2 3 4 5; do
    printf "\\$label"
    head -c 3072 /dev/zero | tr '\0' '\100'
done >"$fx/cifar.bin"
# An 8x8 grey image for predict.
{ printf 'P5\n8 8\n255\n'; head -c 64 /dev/zero | tr '\0' '\200'; } >"$fx/tiny.pgm"
echo "$fx/tiny.pgm" >"$fx/list.txt"
# A store of the IDX records: 5 blocks of 4 records of 788 bytes in 3200-byte
# units, blocks 0, 2, 4 in stripe 0 and 1, 3 in stripe 1; index 72 + 5 x 4 +
# 4 = 96 bytes.
"$bin" pack -q "$fx/images.idx" "$fx/store" --labels "$fx/labels.idx" --stripes 2 \
    --stripe-unit 3200 || exit 2
# A snapshot of tiny.cfg after 2 iterations (235 parameters in an arena of
# 272 floats, and as many of momentum), and its weights in Darknet's format
# (the 235 floats). One convolution implementation, so that the snapshot
# holds no kernel choices (their text depends on the machine) and the
# offsets below are fixed.
"$bin" -q --data synthetic --iters 2 --no-test --conv-impl blocked --snapshot-dir "$fx" \
    "$fx/tiny.cfg" || exit 2
mv "$fx/tiny_final.snap" "$fx/tiny.snap"
"$bin" export -q "$fx/tiny.cfg" "$fx/tiny.snap" "$fx/tiny.weights" || exit 2
chmod -R a+rX "$fx"
fixtures_sum=$(cat "$fx"/* | cksum)

# ------------------------------------------------------------------ cases

tab=$(printf '\t')
# The placeholders filled once for the whole table ({in} and {out} from each
# case's name); a line with fewer than 5 columns is an error of the table.
awk -F "$tab" -v OFS="$tab" -v bin="$bin" -v tmp="$tmp" -v fx="$fx" -v nobody="$nobody" '
function put(s, key, val,   i, r) {
    r = ""
    while ((i = index(s, key)) > 0) {
        r = r substr(s, 1, i - 1) val
        s = substr(s, i + length(key))
    }
    return r s
}
/^#/ || NF == 0 { next }
NF < 5 { print FILENAME ":" NR ": " NF " columns, expected 5 or 6" >"/dev/stderr"; exit 2 }
{
    for (k = 2; k <= NF; k++)
        $k = put(put(put(put(put($k, "{bin}", bin), "{in}", tmp "/in/" $1),
                             "{out}", tmp "/out/" $1), "{fx}", fx), "{nobody}", nobody)
    print
}' "$table" >"$tmp/cases" || exit 2
cases=0
while IFS=$tab read -r name want_rc want_msg input command after; do
    cases=$((cases + 1))
    in=$tmp/in/$name
    out=$tmp/out/$name
    mkdir -m 777 "$out"
    case $want_rc in
    '' | *[!0-9]*) echo "$table: case $name: EXIT '$want_rc' is not a number" >&2; exit 2 ;;
    esac
    case $input in
    -) ;;
    !*) (eval "${input#!}") </dev/null ;;
    *) (eval "$input") >"$in" </dev/null ;;
    esac
    printf '%s\n' "$command" >"$tmp/command"
    timeout -k 2 10 sh "$tmp/command" >"$tmp/stdout" 2>"$tmp/stderr" </dev/null
    rc=$?
    problem=
    if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
        problem="hung: killed after 10 s (exit $rc)"
    elif [ "$rc" -ne "$want_rc" ]; then
        problem="expected exit code $want_rc, got $rc"
    elif [ "$want_msg" != - ] && ! grep -F -q -e "$want_msg" "$tmp/stderr"; then
        problem="stderr lacks: $want_msg"
    elif [ -n "$after" ] && [ "$after" != - ]; then
        (eval "$after") >/dev/null 2>&1 || problem="afterwards, false: $after"
    elif [ "$rc" -ne 0 ] && [ -n "$(ls -A "$out")" ]; then
        problem="left files behind: $(ls -A "$out" | tr '\n' ' ')"
    fi
    if [ -z "$problem" ]; then
        passed=$((passed + 1))
        echo "ok   $name (exit $rc)"
    else
        failed=$((failed + 1))
        echo "FAIL $name: $problem"
        echo "     ran: $command"
        sed -n '1,6s/^/       | /p' "$tmp/stderr"
    fi
done <"$tmp/cases"
expect "the cases left the fixtures as they were" [ "$(cat "$fx"/* | cksum)" = "$fixtures_sum" ]
echo "$cases catalogue cases"
finish test_catalogue.sh
