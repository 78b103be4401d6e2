#!/bin/sh
# The README's examples run as written, so they cannot rot.
#
# The convention: every ```sh block of README.md is a shell example; they
# run in the README's order, each by `sh -e` under a timeout, all in one
# scratch directory laid out like a built checkout (build/singletrain is
# the binary under test, build/tools/make_images its build's tool, data/ a
# copy of the cfgs; build/ is on PATH, so `singletrain` works too), so a
# block may use the files an earlier one made. A block whose first line is
# "# not run by tests: REASON" is left out, and counted. Output, synopses
# and listings go in ```text blocks.
#
# Fails on a block that exits non-zero or times out, a block left out
# without a reason, a fence without a language, and a command written as
# an indented code block (it would escape this test).
# usage: sh tests/e2e/test_readme.sh BUILD_DIR/singletrain
set -u
. "$(dirname "$0")/../lib/check.sh"
suite_start "$@"
root=$(cd "$(dirname "$0")/../.." && pwd)
readme=$root/README.md
block_seconds=120
make_images=$(dirname "$bin")/tools/make_images
if [ ! -x "$make_images" ]; then
    echo "test_readme.sh: $make_images is missing: build it first" \
        "(make $(dirname "$bin")/tools/make_images)" >&2
    exit 2
fi

# ------------------------------------------------------ the blocks and fences

mkdir "$tmp/blocks"
awk -v dir="$tmp/blocks" '
    /^```/ {
        if (!fenced) {
            fenced = 1
            lang = substr($0, 4)
            if (lang == "") print NR > (dir "/unlabelled")
            if (lang == "sh") {
                n++
                file = sprintf("%s/%03d.sh", dir, n)
                print NR > (dir "/" sprintf("%03d", n) ".line")
            }
        } else {
            fenced = 0
            if (file != "") close(file)
            file = ""
        }
        next
    }
    fenced && file != "" { print > file; next }
    !fenced && /^    +(\$ |build\/|singletrain |mpirun |scripts\/|make |darknet |cd |mkdir )/ {
        print NR ": " $0 > (dir "/indented")
    }
    END { if (fenced) print "end of file" > (dir "/unclosed") }
' "$readme"

expect "README.md has sh blocks" [ -n "$(ls "$tmp/blocks"/*.sh 2>/dev/null)" ]
expect "every fence closes" [ ! -e "$tmp/blocks/unclosed" ]
expect "every fence names its language (sh or text)" [ ! -e "$tmp/blocks/unlabelled" ]
[ -e "$tmp/blocks/unlabelled" ] && sed 's/^/     | README.md:/' "$tmp/blocks/unlabelled"
expect "no command outside an sh block (indented code)" [ ! -e "$tmp/blocks/indented" ]
[ -e "$tmp/blocks/indented" ] && sed 's/^/     | README.md:/' "$tmp/blocks/indented"

# ------------------------------------------------------ a built checkout

work=$tmp/work
mkdir -p "$work/build/tools"
ln -s "$bin" "$work/build/singletrain"
ln -s "$make_images" "$work/build/tools/make_images"
cp -R "$root/data" "$work/data"

# ------------------------------------------------------ run them in order

ran=0
excluded=0
started=$(date +%s)
for block in "$tmp/blocks"/*.sh; do
    n=$(basename "$block" .sh)
    where="README.md:$(cat "$tmp/blocks/$n.line")"
    first=$(head -n 1 "$block")
    case $first in
    "# not run by tests:"*[!\ ]*)
        excluded=$((excluded + 1))
        echo "skip $where:${first#\# not run by tests:}"
        continue
        ;;
    "# not run by tests"*)
        failed=$((failed + 1))
        echo "FAIL $where: left out without a reason (# not run by tests: REASON)"
        continue
        ;;
    esac
    t0=$(date +%s)
    (cd "$work" && PATH="$work/build:$PATH" timeout "$block_seconds" sh -e "$block") \
        >"$tmp/output" 2>&1 </dev/null
    rc=$?
    if [ "$rc" -eq 0 ]; then
        passed=$((passed + 1))
        ran=$((ran + 1))
        echo "ok   $where: $(head -n 1 "$block" | cut -c1-60) ... ($(($(date +%s) - t0)) s)"
    else
        failed=$((failed + 1))
        ran=$((ran + 1))
        [ "$rc" -eq 124 ] && rc="$rc: timed out after $block_seconds s"
        echo "FAIL $where (exit $rc):"
        sed 's/^/     $ /' "$block"
        echo "     output (last 30 lines):"
        tail -n 30 "$tmp/output" | sed 's/^/     | /'
    fi
done
echo "README.md: $ran sh blocks ran, $excluded left out (not run by tests), in $(($(date +%s) - started)) s"
expect "at least one block ran" [ "$ran" -gt 0 ]

finish test_readme.sh
