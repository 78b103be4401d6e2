#!/bin/sh
# The examples of the README and of the guide (docs/) run as written, so
# they cannot rot, and their links lead somewhere.
#
# The pages, in the order their blocks run: README.md, then every page
# docs/README.md links to under docs/guide/, in its order, then any other
# docs/*.md (design.md). A page of docs/guide/ that docs/README.md does not
# list fails the test, so none escapes it. The README may have at most 200
# lines: a newcomer reads it in five minutes.
#
# The convention: every ```sh block of a page is a shell example; they
# run in the pages' order, each by `sh -e` under a timeout, all in one
# scratch directory laid out like a built checkout (build/singletrain is
# the binary under test, build/tools/make_images its build's tool, data/ a
# copy of the cfgs; build/ is on PATH, so `singletrain` works too), so a
# block may use the files an earlier one made, on its page or an earlier
# page. A block whose first line is "# not run by tests: REASON" is left
# out, and counted. Output, synopses and listings go in ```text blocks.
#
# Fails, naming the page and line, on a block that exits non-zero or times
# out, a block left out without a reason, a fence without a language or
# left open, a command written as an indented code block (it would escape
# this test), and a relative link ([text](path), ![image](path)) outside
# code whose file does not exist, or whose #anchor is no heading of the
# markdown page it names (GitHub's anchors: the heading in lower case,
# without punctuation but - and _, spaces as -).
# usage: sh tests/e2e/test_readme.sh BUILD_DIR/singletrain
set -u
. "$(dirname "$0")/../lib/check.sh"
suite_start "$@"
root=$(cd "$(dirname "$0")/../.." && pwd)
block_seconds=120
make_images=$(dirname "$bin")/tools/make_images
if [ ! -x "$make_images" ]; then
    echo "test_readme.sh: $make_images is missing: build it first" \
        "(make $(dirname "$bin")/tools/make_images)" >&2
    exit 2
fi

# ------------------------------------------------------ the pages, in order

cd "$root" || exit 2
{
    echo README.md
    sed -n 's/.*](\(guide\/[A-Za-z0-9_-]*\.md\)).*/docs\/\1/p' docs/README.md
    echo docs/README.md
    for f in docs/*.md; do echo "$f"; done
} | awk '!seen[$0]++' >"$tmp/pages"
for f in docs/guide/*.md; do
    [ -e "$f" ] || continue
    expect "$f is listed in docs/README.md (its examples run in that order)" grep -q -x "$f" "$tmp/pages"
done
missing_pages=
while read -r page; do
    [ -f "$page" ] || missing_pages="$missing_pages $page"
done <"$tmp/pages"
expect "every page docs/README.md lists exists${missing_pages:+ (missing:$missing_pages)}" [ -z "$missing_pages" ]
readme_lines=$(wc -l <README.md)
expect "README.md stays short: $readme_lines lines, at most 200 (the rest goes in docs/guide/)" \
    [ "$readme_lines" -le 200 ]

# ------------------------------------------------------ the blocks and fences

# Every page's sh blocks into $tmp/blocks/PPP-NNN.sh (page PPP in order),
# each with PPP-NNN.where (page:line); unlabelled fences, unclosed ones and
# indented commands into files that name the page and line.
mkdir "$tmp/blocks"
p=0
while read -r page; do
    [ -f "$page" ] || continue
    p=$((p + 1))
    awk -v dir="$tmp/blocks" -v page="$page" -v p="$(printf %03d "$p")" '
        /^```/ {
            if (!fenced) {
                fenced = 1
                lang = substr($0, 4)
                if (lang == "") print page ":" NR >> (dir "/unlabelled")
                if (lang == "sh") {
                    n++
                    file = sprintf("%s/%s-%03d.sh", dir, p, n)
                    print page ":" NR > (dir "/" sprintf("%s-%03d", p, n) ".where")
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
            print page ":" NR ": " $0 >> (dir "/indented")
        }
        END { if (fenced) print page ": end of file" >> (dir "/unclosed") }
    ' "$page"
done <"$tmp/pages"

expect "README.md has sh blocks" [ -n "$(ls "$tmp/blocks"/001-*.sh 2>/dev/null)" ]
expect "every fence closes" [ ! -e "$tmp/blocks/unclosed" ]
[ -e "$tmp/blocks/unclosed" ] && sed 's/^/     | /' "$tmp/blocks/unclosed"
expect "every fence names its language (sh or text)" [ ! -e "$tmp/blocks/unlabelled" ]
[ -e "$tmp/blocks/unlabelled" ] && sed 's/^/     | /' "$tmp/blocks/unlabelled"
expect "no command outside an sh block (indented code)" [ ! -e "$tmp/blocks/indented" ]
[ -e "$tmp/blocks/indented" ] && sed 's/^/     | /' "$tmp/blocks/indented"

# ------------------------------------------------------ the links

# The headings' anchors of a markdown file, one a line.
anchors() {
    awk '/^```/ { f = !f; next }
        !f && /^#+ / {
            s = $0
            sub(/^#+ +/, "", s)
            s = tolower(s)
            gsub(/[^a-z0-9 _-]/, "", s)
            gsub(/ /, "-", s)
            print s
        }' "$1"
}
# The links of a markdown file outside code: LINE<tab>TARGET, one a line.
links() {
    awk '/^```/ { f = !f; next }
        !f {
            line = $0
            gsub(/`[^`]*`/, "", line)
            while (match(line, /\]\([^) ]+\)/)) {
                print NR "\t" substr(line, RSTART + 2, RLENGTH - 3)
                line = substr(line, RSTART + RLENGTH)
            }
        }' "$1"
}
nlinks=0
badlinks=0
tab=$(printf '\t')
while read -r page; do
    [ -f "$page" ] || continue
    links "$page" >"$tmp/links"
    while IFS=$tab read -r line target; do
        case $target in [a-z]*:*) continue ;; esac # http:, https:, mailto:
        nlinks=$((nlinks + 1))
        path=${target%%#*}
        anchor=
        case $target in *'#'*) anchor=${target#*#} ;; esac
        if [ -z "$path" ]; then
            file=$page
        else
            file=$(dirname "$page")/$path
        fi
        if [ ! -e "$file" ]; then
            badlinks=$((badlinks + 1))
            echo "FAIL $page:$line: the link ($target) leads to no file: $file"
        elif [ -n "$anchor" ] && [ -f "$file" ] && [ "${file%.md}" != "$file" ] &&
            ! anchors "$file" | grep -q -x -F -e "$anchor"; then
            badlinks=$((badlinks + 1))
            echo "FAIL $page:$line: the link ($target): $file has no heading #$anchor"
        fi
    done <"$tmp/links"
done <"$tmp/pages"
expect "every relative link leads to a file and heading ($nlinks links, $badlinks broken)" [ "$badlinks" -eq 0 ]

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
    where=$(cat "$tmp/blocks/$n.where")
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
echo "$(wc -l <"$tmp/pages") pages: $ran sh blocks ran, $excluded left out (not run by tests), in $(($(date +%s) - started)) s"
expect "at least one block ran" [ "$ran" -gt 0 ]

finish test_readme.sh
