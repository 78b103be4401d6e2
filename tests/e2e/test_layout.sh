#!/bin/sh
# -t auto: the split of the cores between workers and intra-op threads
# measured at set-up. The first run tries every split W x I of the cores
# this process may use and keeps the fastest of the speeds it logs; the
# next takes it from the choice cache; --kernel-choices measure measures
# again; --no-choice-cache measures and stores nothing; a run with -t auto
# ends with the same weights, bit for bit, as one given the split it chose;
# --intra N with -t auto leaves one split; --dry-run measures nothing;
# --intra auto's messages name --intra auto. (Its
# refusals, --sync asp or ssp: the catalogue.)
# usage: sh tests/e2e/test_layout.sh PATH_TO_SINGLETRAIN
set -u
. "$(dirname "$0")/../lib/check.sh"
suite_start "$@"
cp "$fixtures/tiny.cfg" "$tmp/tiny.cfg"
cores=$(nproc)
run="$bin --data synthetic --train-images 512 -b 16 --iters 6 --no-test --seed 3"

check "-t auto: measured" out 0 "(-t auto: " -- $run -t auto --snapshot-dir "$tmp/auto" \
    --save-kernel-choices "$tmp/auto.choices" "$tmp/tiny.cfg"
line=$(grep "^threads: " "$tmp/stdout")
echo "     $line"
chosen=$(echo "$line" | sed -n 's/^threads: \([0-9]*\) workers\{0,1\} x \([0-9]*\) .*/\1x\2/p')
splits=0
for w in $(seq "$cores" -1 1); do
    [ $((cores % w)) -eq 0 ] && [ "$w" -le 16 ] && splits=$((splits + 1))
done
if [ "$splits" -gt 1 ]; then
    tried=$(echo "$line" | grep -o '[0-9]*x[0-9]* [0-9]* img/s' | wc -l)
    expect "every split of the $cores cores tried ($splits)" [ "$tried" -eq "$splits" ]
    fastest=$(echo "$line" | grep -o '[0-9]*x[0-9]* [0-9]* img/s' | sort -k2 -n -r | head -1 |
        cut -d' ' -f1)
    expect "the fastest of the trials kept ($fastest)" [ -n "$chosen" -a "$chosen" = "$fastest" ]
    expect "stored in the cache" grep -q "stored in the cache" "$tmp/stdout"
    check "the next run: from the cache" out 0 "(-t auto: from the cache" -- \
        $run -t auto "$tmp/tiny.cfg"
    check "--kernel-choices measure: measured again" out 0 "(-t auto: measured: " -- \
        $run -t auto --kernel-choices measure "$tmp/tiny.cfg"
    check "--no-choice-cache: measured" out 0 "(-t auto: measured: " -- \
        $run -t auto --no-choice-cache "$tmp/tiny.cfg"
    expect "--no-choice-cache: nothing stored" sh -c "! grep -q 'stored in the cache' '$tmp/stdout'"
else
    expect "one core: the only split" grep -q "the only split of" "$tmp/stdout"
fi
w=${chosen%x*}
i=${chosen#*x}
# given the convolutions' implementations the first run used: the runs
# in between measured them again (--kernel-choices measure updates the
# cache), and another implementation sums in another order
check "-t $w --intra $i, the split auto chose" out 0 "done: 6 iterations" -- \
    $run -t "$w" --intra "$i" --kernel-choices "$tmp/auto.choices" --snapshot-dir "$tmp/given" \
    "$tmp/tiny.cfg"
expect "-t auto and the split it chose: the same weights, bit for bit" \
    cmp -s "$tmp/auto/tiny_final.snap" "$tmp/given/tiny_final.snap"
check "-t auto --intra $cores: the only split" out 0 "the only split of $cores core" -- \
    $run -t auto --intra "$cores" "$tmp/tiny.cfg"
check "--dry-run -t auto: measured when the run starts" out 0 \
    "-t auto measures the split of the $cores cores when the run starts" -- \
    "$bin" --dry-run --data synthetic -b 16 -t auto "$tmp/tiny.cfg"
# --intra auto alone is named so (it was called "-t auto")
check "-t 1 --intra auto: the split named for --intra auto" out 0 \
    "(--intra auto: the only split of $cores core" -- $run -t 1 --intra auto "$tmp/tiny.cfg"
check "--dry-run --intra auto: named so" out 0 \
    "threads: --intra auto measures the split of the $cores cores when the run starts" -- \
    "$bin" --dry-run --data synthetic -b 16 --intra auto "$tmp/tiny.cfg"
check "-t auto --intra auto: both named" out 0 "-t auto --intra auto measures the split" -- \
    "$bin" --dry-run --data synthetic -b 16 -t auto --intra auto "$tmp/tiny.cfg"
finish "$suite"
