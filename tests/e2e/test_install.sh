#!/bin/sh
# make install: the binary to PREFIX/bin and the manual page singletrain.1
# to PREFIX/share/man/man1, under DESTDIR when given; the page renders with
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
