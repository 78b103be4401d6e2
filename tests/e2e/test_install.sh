#!/bin/sh
# make install: the binary to PREFIX/bin and the manual page singletrain.1
# to PREFIX/share/man/man1, under DESTDIR when given; the networks, the
# SW26010 files, the bench cfgs and the scripts under PREFIX/share/
# singletrain (the scripts also PREFIX/bin/singletrain-NAME), the guide
# under PREFIX/share/doc/singletrain. The installed tree, from another
# directory with PREFIX/bin on PATH: a network without a slash found in the
# installed networks ("using ..."), trained; one not found names the folders
# searched and their networks; SINGLETRAIN_PATH and the current directory
# come first; --list-networks (shadowing said); the DESTDIR-staged tree
# finds its own networks; singletrain-predict-sw26010, -sweep and -plot run
# the installed binary on the installed data. make uninstall removes it all.
# The page renders with
# groff (man(7) macros) without a warning, and documents every long option
# that --help lists, the training command's and each command's (pack,
# read, predict, eval, export, plan); the page and --help name the guide,
# docs/README.md.
# usage: sh tests/e2e/test_install.sh BUILD_DIR/singletrain
# make install runs with BUILD=BUILD_DIR and takes the binary as it is
# (make -o): it installs the binary under test and never rebuilds it.
set -u
. "$(dirname "$0")/../lib/check.sh"
suite_start "$@"
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$(dirname "$bin")

if ! command -v groff >/dev/null 2>&1; then
    echo "test_install.sh: groff is missing: install groff-base (scripts/deps.sh --test does)" >&2
    exit 1
fi

# ------------------------------------------------------ PREFIX and DESTDIR

check "make install PREFIX=\$tmp/prefix" out 0 "singletrain.1" -- \
    make -C "$root" --no-print-directory -o "$bin" BUILD="$build" PREFIX="$tmp/prefix" install
expect "the binary is PREFIX/bin/singletrain, executable" [ -x "$tmp/prefix/bin/singletrain" ]
expect "the installed binary is the one under test" cmp -s "$bin" "$tmp/prefix/bin/singletrain"
check "the installed binary runs" out 0 "singletrain " -- "$tmp/prefix/bin/singletrain" --version
page=$tmp/prefix/share/man/man1/singletrain.1
expect "the page is PREFIX/share/man/man1/singletrain.1" [ -f "$page" ]
expect "the page is mode 644" [ "$(stat -c %a "$page" 2>/dev/null)" = 644 ]
expect "the installed page is the sources' singletrain.1" cmp -s "$root/singletrain.1" "$page"

check "make install DESTDIR=\$tmp/stage PREFIX=/opt/st" out 0 "" -- \
    make -C "$root" --no-print-directory -o "$bin" BUILD="$build" DESTDIR="$tmp/stage" \
    PREFIX=/opt/st install
expect "DESTDIR: the binary is staged" [ -x "$tmp/stage/opt/st/bin/singletrain" ]
expect "DESTDIR: the page is staged" [ -f "$tmp/stage/opt/st/share/man/man1/singletrain.1" ]
expect "DESTDIR: nothing written to PREFIX itself" [ ! -e /opt/st ]

# -------------------------------------------------- the data, scripts, guide

p=$tmp/prefix
share=$p/share/singletrain
for f in networks/lenet.cfg networks/alexnet.cfg networks/resnet50.cfg sw26010/model.conf \
    sw26010/swcaffe_calibration_layers.csv sw26010/vgg16-conv1.cfg bench/conv15x15-300.cfg; do
    expect "PREFIX/share/singletrain/$f is the sources' data/${f#networks/}" \
        cmp -s "$root/data/${f#networks/}" "$share/$f"
done
expect "every data/*.cfg is an installed network" \
    [ "$(ls "$root"/data/*.cfg | wc -l)" -eq "$(ls "$share"/networks/*.cfg | wc -l)" ]
for c in sweep plot predict-sw26010 calibrate-sw26010 bench bench-layout bench-scaling bench-shapes \
    bench-solvers; do
    expect "PREFIX/bin/singletrain-$c is a link to the installed scripts/$c.sh" \
        [ "$(readlink -f "$p/bin/singletrain-$c")" = "$(readlink -f "$share/scripts/$c.sh")" ]
done
for f in paths.sh speed-ratio.awk sw26010-scaling.awk torch-ddp.py; do
    expect "what the scripts need: scripts/$f" [ -f "$share/scripts/$f" ]
done
for f in README.md docs/README.md docs/guide/getting-started.md docs/design.md; do
    expect "the guide: PREFIX/share/doc/singletrain/$f is the sources'" \
        cmp -s "$root/$f" "$p/share/doc/singletrain/$f"
done

# ------------------------------- the installed tree, run from elsewhere

unset SINGLETRAIN_PATH SINGLETRAIN
away=$tmp/away
mkdir -p "$away/mine" "$away/here"
cd "$away" || exit 1
old_path=$PATH
PATH=$p/bin:$PATH
export PATH
check "singletrain lenet.cfg from another directory: the installed network, trained" out 0 \
    "using $share/networks/lenet.cfg (found in the installed networks)" "done: 2 iterations" -- \
    singletrain -t 1 -b 16 --iters 2 --data synthetic --no-test lenet.cfg
check "-q: no using line" out 0 "" -- singletrain -q --dry-run lenet.cfg
expect "... (its stdout is empty)" [ ! -s "$tmp/stdout" ]
check "predict, eval, export, plan look the network up too, saying so on stderr" err 2 \
    "singletrain plan: using $share/networks/lenet.cfg (found in the installed networks)" -- \
    singletrain plan lenet.cfg --nodes 1,2 --net-params "$away/none.conf"
check "a network found nowhere: exit 2, the folders in order and their networks" err 2 \
    "network nosuch.cfg: no such file in the folders searched, in order: . (the current directory): no networks; $share/networks (the installed networks): alexnet-bn.cfg alexnet.cfg" -- \
    singletrain nosuch.cfg
cp "$fixtures/tiny.cfg" "$away/mine/lenet.cfg"
check "SINGLETRAIN_PATH comes before the installed networks" out 0 \
    "using $away/mine/lenet.cfg (found in \$SINGLETRAIN_PATH)" -- \
    env SINGLETRAIN_PATH="$away/nothing-here:$away/mine" singletrain --dry-run lenet.cfg
cp "$fixtures/tiny.cfg" "$away/here/lenet.cfg"
(cd "$away/here" && env SINGLETRAIN_PATH="$away/mine" singletrain --dry-run lenet.cfg) \
    >"$tmp/cwd.out" 2>&1
expect "the current directory comes first, no lookup said" \
    sh -c '! grep -q "^using" "$1" && grep -q "^layer " "$1"' sh "$tmp/cwd.out"
check "--list-networks: the networks in lookup order, shadowing said" out 0 \
    "lenet.cfg                $away/mine  (\$SINGLETRAIN_PATH)" \
    "lenet.cfg                $share/networks  (the installed networks; shadowed: lenet.cfg is $away/mine/lenet.cfg)" -- \
    env SINGLETRAIN_PATH="$away/mine" singletrain --list-networks
expect "... SINGLETRAIN_PATH's line first, before the installed ones" \
    [ "$(head -n 1 "$tmp/stdout")" = "lenet.cfg                $away/mine  (\$SINGLETRAIN_PATH)" ]
expect "... every installed network listed" \
    [ "$(grep -c "(the installed networks" "$tmp/stdout")" -eq "$(ls "$share"/networks | wc -l)" ]
check "the DESTDIR-staged tree finds its own networks (relocatable)" out 0 \
    "alexnet.cfg              $tmp/stage/opt/st/share/singletrain/networks  (the installed networks)" -- \
    "$tmp/stage/opt/st/bin/singletrain" --list-networks

# singletrain-predict-sw26010 on made-up reports of the scaling networks
# (a processor iteration of 1 s, 4e-10 s per float summed): the installed
# model file, networks (--dry-run for their parameters) and awk.
mkdir -p "$away/sw/reports"
for r in alexnet-bn-64 alexnet-bn-128 alexnet-bn-256 resnet50-32 resnet50-64; do
    printf 'section,kernel,name,on,pass,strategy,runs,seconds,layout_seconds,chosen,note\n%s\n%s\n' \
        "summary,,processor_iteration_seconds,,,,,1,,," \
        "summary,,cpe_sum_of_2_seconds_per_float,,,,,4e-10,,," >"$away/sw/reports/$r.csv"
done
check "singletrain-predict-sw26010 runs from the installed copy" out 0 "CSVs in $away/sw: scaling.csv" -- \
    singletrain-predict-sw26010 --only scaling --from-reports "$away/sw" --csv "$away/sw"
expect "... a row per network, batch and node count (5 x 11)" [ "$(tail -n +2 "$away/sw/scaling.csv" | wc -l)" -eq 55 ]
check "singletrain-sweep runs the installed binary on an installed network" out 0 "1 runs ok, 0 failed" -- \
    singletrain-sweep --nets lenet --threads 1 --batches 16 --iters 3 --warmup 1 --repeat 1 \
    --args "--data synthetic --no-test" --out "$away/s.csv"
expect "... its log ran PREFIX/bin/singletrain on PREFIX's lenet.cfg" grep -q \
    "^# command: $p/bin/singletrain .* $share/networks/lenet.cfg\$" "$away"/s-logs/lenet_*.log
if command -v gnuplot >/dev/null 2>&1; then
    check "singletrain-plot runs from the installed copy" out 0 "wrote $away/figs/throughput_lenet.png" -- \
        singletrain-plot "$away/s.csv" "$away/figs"
else
    echo "SKIP singletrain-plot: gnuplot is not installed (scripts/deps.sh --test installs gnuplot-nox)"
fi
cd "$root" || exit 1
PATH=$old_path

check "make uninstall removes what make install put there" out 0 "" -- \
    make -C "$root" --no-print-directory BUILD="$build" DESTDIR="$tmp/stage" PREFIX=/opt/st uninstall
expect "... nothing is left but empty folders" [ -z "$(find "$tmp/stage" ! -type d)" ]

# --------------------------------------------------------- the page renders

groff -man -Tutf8 -ww -z "$page" 2>"$tmp/warnings"
rc=$?
expect "groff -man -Tutf8 -ww exits 0" [ "$rc" -eq 0 ]
expect "groff -ww prints no warning" [ ! -s "$tmp/warnings" ]
[ -s "$tmp/warnings" ] && sed 's/^/     | /' "$tmp/warnings"
if command -v man >/dev/null 2>&1; then
    MANPATH=$tmp/prefix/share/man man -w singletrain >"$tmp/where" 2>&1
    expect "man finds the installed page through MANPATH" grep -q -F "$page" "$tmp/where"
    man --warnings -l "$page" 2>"$tmp/man-warnings" >/dev/null
    expect "man --warnings -l prints no warning" [ ! -s "$tmp/man-warnings" ]
fi
groff -man -Tascii -P-cbou "$page" >"$tmp/page.txt" 2>/dev/null
for section in NAME SYNOPSIS DESCRIPTION OPTIONS COMMANDS "EXIT STATUS" FILES EXAMPLES "SEE ALSO"; do
    expect "the page has the section $section" grep -q -x "$section" "$tmp/page.txt"
done
for group in Training Data Output Snapshots Multi-node Other; do
    expect "the page's OPTIONS has the group $group (as --help)" grep -q -x "   $group" "$tmp/page.txt"
done

# --------------------------------------- the page and --help name the guide

"$bin" --help >"$tmp/help" 2>&1
expect "the guide's index docs/README.md exists" [ -f "$root/docs/README.md" ]
expect "--help names the guide (docs/README.md)" grep -q -F "docs/README.md" "$tmp/help"
expect "the page's SEE ALSO names the guide (docs/README.md)" \
    sh -c 'sed -n "/^SEE ALSO/,\$p" "$1" | tr -s " \n" "  " | grep -q -F "docs/README.md"' sh "$tmp/page.txt"

# ------------------------------------- every long option of --help in it

# The option lines of a --help: "  -x, --name ARG  help" or "      --name ...".
long_options() {
    sed -n 's/^  \(-., \|    \)--\([a-z0-9-]*\).*/\2/p'
}
for cmd in "" pack read predict eval export plan; do
    # shellcheck disable=SC2086
    "$bin" $cmd --help >"$tmp/help" 2>&1
    long_options <"$tmp/help" >"$tmp/options"
    n=$(wc -l <"$tmp/options")
    expect "${cmd:-singletrain} --help lists options ($n)" [ "$n" -gt 0 ]
    missing=
    for o in $(cat "$tmp/options"); do
        grep -q -e "--$o\\b" "$tmp/page.txt" || missing="$missing --$o"
    done
    expect "every long option of ${cmd:-singletrain} --help is in the page${missing:+ (missing:$missing)}" \
        [ -z "$missing" ]
done

finish test_install.sh
