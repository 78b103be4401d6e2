#!/bin/sh
# The kernel-choice cache (src/backends/choice_cache.c) through the binary,
# on LeNet-5 (two convolutions whose measured implementations can differ
# from run to run): three runs of one command write byte-identical
# snapshots, the first measuring and the others taking its choices from
# the cache; two runs started at once share it (one measures, the other
# waits and takes its choices); --kernel-choices measure measures again and
# rewrites the cache; --no-choice-cache leaves it alone; a damaged entry or
# a foreign file is a warning and measured again; a cache directory that
# cannot be made is one warning and no failure; --dry-run
# --save-kernel-choices writes what set-up chose, the choices the run then
# takes; a symbolic link at the cache file's path is never followed; a
# choice file of 60,000 lines is read in well under a second; two
# convolutions of one shape reading one tensor are measured once.
# Every run has XDG_CACHE_HOME in the scratch directory (check.sh).
# usage: sh tests/e2e/test_choice_cache.sh PATH_TO_SINGLETRAIN
set -u
. "$(dirname "$0")/../lib/check.sh"
suite_start "$@"
cfg=$(cd "$(dirname "$0")/../.." && pwd)/data/lenet.cfg
# The issue's command, shortened: 10 iterations of batch 32 on 2 workers,
# on synthetic images (the choices are keyed by the kernels' shapes, not
# the data; reading Fashion-MNIST took 0.27 s of each run's 0.42).
lenet="$bin -t 2 -b 32 --iters 10 --no-test --train-images 640 --data synthetic"
cache=$XDG_CACHE_HOME/singletrain
# entries FILE: a cache file's choices as KEY = VALUE lines (checksums cut)
entries() {
    sed -n 's/^[0-9a-f]\{16\} //p' "$1"
}
# choices FILE: a choice file's KEY = VALUE lines
choices() {
    grep -v '^#' "$1"
}

for i in 1 2 3; do
    case $i in
    1) want="kernel choices: 2 measured at set-up and stored in the cache $cache/choices-" ;;
    *) want="kernel choices: 0 measured at set-up, 2 from the cache $cache/choices-" ;;
    esac
    check "run $i of the same command" out 0 "$want" -- \
        $lenet --snapshot-dir "$tmp/run$i" --save-kernel-choices "$tmp/run$i.choices" "$cfg"
done
expect "three runs: byte-identical final snapshots" \
    sh -c "cmp -s '$tmp/run1/lenet_final.snap' '$tmp/run2/lenet_final.snap' &&
           cmp -s '$tmp/run1/lenet_final.snap' '$tmp/run3/lenet_final.snap'"
cfile=$(ls "$cache"/choices-*.txt)
expect "one cache file, with the two convolutions' choices" \
    [ "$(entries "$cfile" | wc -l)" -eq 2 ]
entries "$cfile" >"$tmp/cached"
choices "$tmp/run1.choices" >"$tmp/run1.values"
expect "the cache holds what the first run measured" cmp -s "$tmp/cached" "$tmp/run1.values"
check "-v says where each choice came from" out 0 "# from the cache ($cfile:4)" -- \
    $lenet -v "$cfg"

# --kernel-choices measure: nothing read, every kernel measured again, the
# cache rewritten with what was measured.
inode=$(ls -i "$cfile" | cut -d' ' -f1)
check "--kernel-choices measure" out 0 \
    "kernel choices: 2 measured at set-up and stored in the cache $cfile" -- \
    $lenet --kernel-choices measure --save-kernel-choices "$tmp/measure.choices" "$cfg"
choices "$tmp/measure.choices" >"$tmp/measure.values"
entries "$cfile" >"$tmp/cached"
expect "--kernel-choices measure: the cache holds its choices" \
    cmp -s "$tmp/cached" "$tmp/measure.values"
expect "--kernel-choices measure: the cache file was replaced" \
    [ "$(ls -i "$cfile" | cut -d' ' -f1)" != "$inode" ]
check "--kernel-choices measure with --no-choice-cache" err 2 \
    "--kernel-choices measure with --no-choice-cache: give one" -- \
    $lenet --kernel-choices measure --no-choice-cache "$cfg"

# --no-choice-cache: neither read nor written.
cp "$cfile" "$tmp/before"
check "--no-choice-cache measures" out 0 "kernel choices: 2 measured at set-up" -- \
    $lenet --no-choice-cache "$cfg"
expect "--no-choice-cache: no 'stored'" sh -c "! grep -q stored '$tmp/stdout'"
expect "--no-choice-cache: the cache file unchanged" cmp -s "$cfile" "$tmp/before"
mkdir "$tmp/unused"
check "--no-choice-cache creates no cache directory" out 0 "" -- \
    env XDG_CACHE_HOME="$tmp/unused" $lenet --no-choice-cache "$cfg"
expect "--no-choice-cache: $tmp/unused/singletrain not created" [ ! -e "$tmp/unused/singletrain" ]

# A damaged entry (a value changed, its checksum kept) is not trusted.
sed '4s/ = [a-z]* / = nchw /' "$tmp/before" >"$cfile"
sed -n 4p "$tmp/before" | grep -q ' = nchw ' && sed '4s/ = [a-z]* / = nhwc /' "$tmp/before" >"$cfile"
check "a damaged cache entry: a warning" err 0 \
    "1 damaged or foreign entry ignored (the first at line 4: its checksum does not match" -- \
    $lenet "$cfg"
expect "a damaged cache entry: that kernel measured, the other cached" \
    grep -q "kernel choices: 1 measured at set-up and stored in the cache $cfile, 1 from the cache" \
    "$tmp/stdout"
check "the cache rewritten without it: no warning" err 0 "" -- $lenet "$cfg"
expect "the cache rewritten without it: nothing on stderr" [ ! -s "$tmp/stderr" ]
# A file that is no cache file of this run's context: ignored whole.
head -c 3000 "$cfg" >"$cfile"
check "a foreign cache file: a warning" err 0 "not a cache file of this context" -- \
    $lenet "$cfg"
expect "a foreign cache file: every kernel measured, the file rewritten" \
    sh -c "grep -q 'kernel choices: 2 measured at set-up and stored' '$tmp/stdout' &&
           [ \"\$(sed -n 's/^[0-9a-f]\\{16\\} //p' '$cfile' | wc -l)\" -eq 2 ]"

# Two runs started at once: one measures, the other waits for the lock and
# takes its choices: the same bits.
export XDG_CACHE_HOME="$tmp/concurrent"
mkdir "$XDG_CACHE_HOME"
$limit $lenet --snapshot-dir "$tmp/a" "$cfg" >"$tmp/a.out" 2>&1 &
pa=$!
$limit $lenet --snapshot-dir "$tmp/b" "$cfg" >"$tmp/b.out" 2>&1 &
pb=$!
wait $pa
ra=$?
wait $pb
rb=$?
expect "two runs at once: both succeed" [ "$ra$rb" = 00 ]
expect "two runs at once: one measured, the other took its choices from the cache" \
    [ "$(cat "$tmp/a.out" "$tmp/b.out" | grep -c -e 'measured at set-up and stored' \
        -e '0 measured at set-up, 2 from the cache')" -eq 2 ]
expect "two runs at once: byte-identical final snapshots" \
    cmp -s "$tmp/a/lenet_final.snap" "$tmp/b/lenet_final.snap"
expect "two runs at once: neither warned" sh -c "! grep -q warning '$tmp/a.out' '$tmp/b.out'"
check "after them, a run takes both choices from the cache" out 0 \
    "kernel choices: 0 measured at set-up, 2 from the cache" -- $lenet "$cfg"

# --dry-run --save-kernel-choices: measured (or cached) as the run's set-up
# would, written, and stored in the cache: the run then takes the same.
export XDG_CACHE_HOME="$tmp/dry"
mkdir "$XDG_CACHE_HOME"
check "--dry-run --save-kernel-choices writes the choices" out 0 \
    "kernel choices saved to $tmp/dry.choices" -- \
    $lenet --dry-run --save-kernel-choices "$tmp/dry.choices" "$cfg"
expect "--dry-run --save-kernel-choices: both convolutions' choices" \
    [ "$(choices "$tmp/dry.choices" | wc -l)" -eq 2 ]
check "the run after the dry run" out 0 "kernel choices: 0 measured at set-up, 2 from the cache" \
    -- $lenet --save-kernel-choices "$tmp/after-dry.choices" "$cfg"
expect "the run took the dry run's choices" \
    sh -c "choices() { grep -v '^#' \"\$1\"; }; choices '$tmp/dry.choices' >'$tmp/d1';
           choices '$tmp/after-dry.choices' >'$tmp/d2'; cmp -s '$tmp/d1' '$tmp/d2'"
mkdir "$tmp/dry-only"
check "--dry-run without --save-kernel-choices measures nothing" out 0 "" -- \
    env XDG_CACHE_HOME="$tmp/dry-only" $lenet --dry-run "$cfg"
expect "--dry-run alone: no cache directory" [ ! -e "$tmp/dry-only/singletrain" ]

# A cache directory that cannot be made (a file in its place), or none at
# all: one warning, and the run measures. The cache is made only below an
# existing XDG_CACHE_HOME or HOME: a missing one is not created, a file
# or an over-long path is said so, naming the variable.
mkdir "$tmp/xdg-file"
echo not a directory >"$tmp/xdg-file/singletrain"
check "an uncreatable cache directory: a warning, the run goes on" err 0 \
    "kernel-choice cache $tmp/xdg-file/singletrain: not a directory: this run measures its kernels without the cache" -- \
    env XDG_CACHE_HOME="$tmp/xdg-file" $lenet "$cfg"
expect "an uncreatable cache directory: one line on stderr" [ "$(wc -l <"$tmp/stderr")" -eq 1 ]
check "no HOME and no XDG_CACHE_HOME: a warning, the run goes on" err 0 \
    "kernel-choice cache: no directory for it (neither XDG_CACHE_HOME (an absolute path) nor HOME is set)" -- \
    env -u HOME -u XDG_CACHE_HOME $lenet "$cfg"
check "a HOME that does not exist: a warning naming it" err 0 \
    "kernel-choice cache: no directory for it (HOME=$tmp/no-home: No such file or directory: the cache is made only under an existing directory)" -- \
    env -u XDG_CACHE_HOME HOME="$tmp/no-home" $lenet "$cfg"
expect "... HOME not created" [ ! -e "$tmp/no-home" ]
check "an XDG_CACHE_HOME that does not exist: a warning naming it" err 0 \
    "kernel-choice cache: no directory for it (XDG_CACHE_HOME=$tmp/no-xdg: No such file or directory" -- \
    env XDG_CACHE_HOME="$tmp/no-xdg" $lenet "$cfg"
expect "... XDG_CACHE_HOME not created" [ ! -e "$tmp/no-xdg" ]
check "an XDG_CACHE_HOME that is a file: a warning naming it" err 0 \
    "kernel-choice cache: no directory for it (XDG_CACHE_HOME=$tmp/xdg-file/singletrain: not a directory" -- \
    env XDG_CACHE_HOME="$tmp/xdg-file/singletrain" $lenet "$cfg"
long=/$(printf '%05000d' 0)
check "an over-long XDG_CACHE_HOME: said too long, not 'not set'" err 0 \
    "kernel-choice cache: no directory for it (XDG_CACHE_HOME is too long: XDG_CACHE_HOME/singletrain takes 5013 bytes, over the limit of 4095)" -- \
    env XDG_CACHE_HOME="$long" $lenet "$cfg"
# A symbolic link planted at the cache file's path (to the run's own cfg,
# or to nothing) is never followed: neither read nor written (its target
# keeps its bytes, no file appears where it points), one warning naming
# it, and the run goes on without the cache.
export XDG_CACHE_HOME="$tmp/link"
mkdir "$XDG_CACHE_HOME"
tiny="$bin -q --data synthetic --iters 1 --no-test"
cp "$fixtures/tiny.cfg" "$tmp/victim.cfg"
check "a small run makes its cache file" err 0 "" -- $tiny "$tmp/victim.cfg"
lfile=$(ls "$XDG_CACHE_HOME"/singletrain/choices-*.txt)
rm -f "$lfile"
ln -s "$tmp/victim.cfg" "$lfile"
check "a link at the cache file's path: a warning naming it, the run goes on" err 0 \
    "kernel-choice cache $lfile: a symbolic link (to $tmp/victim.cfg), not followed: this run measures its kernels without the cache" -- \
    $tiny "$tmp/victim.cfg"
expect "... one line on stderr" [ "$(wc -l <"$tmp/stderr")" -eq 1 ]
expect "... the link's target, the run's cfg, unchanged" cmp -s "$tmp/victim.cfg" "$fixtures/tiny.cfg"
check "a link at the cache file's path, --kernel-choices measure: not written" err 0 \
    "kernel-choice cache $lfile: a symbolic link (to $tmp/victim.cfg), not followed: what this run measured is not kept" -- \
    $tiny --kernel-choices measure "$tmp/victim.cfg"
expect "... the link's target unchanged, the link kept" \
    sh -c "cmp -s '$tmp/victim.cfg' '$fixtures/tiny.cfg' && [ -L '$lfile' ]"
rm -f "$lfile"
ln -s "$tmp/nowhere" "$lfile"
check "a dangling link at the cache file's path: a warning" err 0 \
    "kernel-choice cache $lfile: a symbolic link (to $tmp/nowhere), not followed" -- \
    $tiny "$tmp/victim.cfg"
expect "... nothing created where it points" [ ! -e "$tmp/nowhere" ]
# A cache file over its limit (16 MB): ignored and rewritten, said once
# (the run reads it twice: at set-up and again before it stores).
rm -f "$lfile"
head -c 17000000 /dev/zero | tr '\0' '#' >"$lfile"
check "a cache file over 16 MB: a warning" err 0 \
    "kernel-choice cache: $lfile: larger than 16777216 bytes: not a kernel-choice cache" -- \
    $tiny "$tmp/victim.cfg"
expect "... said once" [ "$(wc -l <"$tmp/stderr")" -eq 1 ]
expect "... the file rewritten" [ "$(wc -c <"$lfile")" -lt 4096 ]
# A choice file of 60,000 lines is read in linear time (each line searched
# the table from the start: 20 s on this project's 2-core machine).
awk 'BEGIN { for (i = 0; i < 60000; i++)
                 printf "%d.conv n8 1x8x8>4x8x8 k3x3 s1x1 p1x1 g1 fwd = nhwc - - -\n", i }' \
    >"$tmp/big.choices"
check "a choice file of 60,000 lines, in under 5 s" err 0 \
    "60000 of the kernel choices given match no kernel of this run" -- \
    timeout 5 "$bin" -q --data synthetic --iters 1 --no-test --kernel-choices "$tmp/big.choices" \
    "$fixtures/tiny.cfg"
# Twins: layers 1 and 3 are convolutions of one shape reading one tensor
# (layer 3 through a route back to layer 0) and feeding one concatenation:
# their measurements would be the same, so layer 3 takes layer 1's choice.
{
    printf '[net]\nbatch=8\nheight=12\nwidth=12\nchannels=3\nlearning_rate=0.01\n'
    printf 'momentum=0.9\ndecay=0.0005\nmax_batches=10\n'
    conv='[convolutional]\nfilters=16\nsize=3\nstride=1\npad=1\nactivation=relu\n'
    printf "$conv$conv[route]\nlayers=0\n$conv[route]\nlayers=1,3\n"
    printf '[connected]\noutput=10\nactivation=linear\n[softmax]\n'
} >"$tmp/twins.cfg"
check "two identical convolutions: one measurement" out 0 \
    "kernel choices: 2 measured at set-up, 1 as an identical layer's" -- \
    "$bin" -t 2 --iters 2 --no-test --data synthetic --no-choice-cache \
    --save-kernel-choices "$tmp/twins.choices" "$tmp/twins.cfg"
value_of() {
    sed -n "s/^$1\.conv [^=]*= //p" "$tmp/twins.choices"
}
expect "... layer 3 has layer 1's choice, and the file says whose" \
    sh -c "[ -n '$(value_of 1)' ] && [ '$(value_of 1)' = '$(value_of 3)' ] &&
           grep -q '^# as 1.conv n4 16x12x12>16x12x12 k3x3 s1x1 p1x1 g1 fwd+bwd (the same' \
               '$tmp/twins.choices'"
finish test_choice_cache.sh
