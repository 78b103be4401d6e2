#!/bin/sh
# docs/design.md against the tree, so that the map cannot drift from the
# code it maps (make test runs it: tests/e2e/test_layering.sh):
#   1. every file or folder it names in backticks exists: a name with a
#      folder from the repository's root, src/, include/ or a folder of
#      src/ (a table row's sub-folder: `ref/`; `<x>` in it stands for any
#      name: `layers/<type>.c`), a bare name (`setup.c`)
#      somewhere in the tree; and every folder of src/ has its row in the
#      table of folders;
#   2. every recipe of its "Extension points" (a bullet "- **A thing**
#      (`HEADER`, N files: `F1`, `F2` ...[; WHEN: `F3` ...]): ...") lists
#      as many files as it says (a folder counts as one; those after the
#      ';' are the files a variant adds, not counted), and its HEADER, the
#      extension point's header, has an "Adding ..." recipe that names each
#      listed file, so the two recipes say the same;
#   3. no comment in src/ or include/ is orphaned: a comment at the top
#      level directly followed by another is the remains of a moved or
#      deleted declaration (a section's "/* ---- ... ---- */" banner may
#      be followed by one).
# Prints each problem as file:line and exits 1 if there is any.
# usage: scripts/check-docs.sh [REPO]
set -u
repo=${1:-$(dirname "$0")/..}
cd "$repo" || exit 2
doc=docs/design.md
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
bad=0

# Whether the path (as design.md writes it, `<x>` any name) exists.
exists() {
    pat=$(echo "$1" | sed 's/<[^>]*>/*/g')
    case $pat in
    */*)
        for prefix in "" src/ include/ "src/*/"; do
            # shellcheck disable=SC2086
            for p in $prefix$pat; do
                [ -e "$p" ] && return 0
            done
        done
        return 1
        ;;
    esac
    [ -n "$(find src include scripts tests data docs fuzz mk -name "$pat" 2>/dev/null | head -n 1)" ]
}

# Every backticked name that looks like a file or folder, as "LINE NAME":
# a folder in it, or a source's suffix; options, variables and the build
# directory's placeholder (BUILD/) are not the tree's.
names() {
    grep -n -o '`[^`]*`' "$1" | tr -d '`' |
        awk -F: '{ n = $1; sub(/^[0-9]+:/, "") }
                 /^[A-Za-z0-9_.<>\/*-]+$/ && !/^-/ && !/^BUILD\// &&
                 (/\// || /\.(c|h|sh|py|awk|conf|tsv|cfg|md)$/) { print n, $0 }'
}

# ---- 1. the names, and the folders' table
names "$doc" >"$tmp/names"
while read -r line name; do
    exists "$name" || { echo "$doc:$line: \`$name\` is not in the tree"; bad=1; }
done <"$tmp/names"
for d in src/*/; do
    folder=$(basename "$d")
    grep -q "^| \`$folder/\` |" "$doc" ||
        { echo "$doc: src/$folder/ has no row in the table of folders"; bad=1; }
done

# ---- 2. the recipes: each bullet of the section joined into one line
awk '/^## / { in_ext = ($0 == "## Extension points") }
     in_ext && /^- \*\*/ { if (b != "") print start "\t" b; start = NR; b = $0; next }
     in_ext && b != "" && /^  / { b = b " " $0; next }
     b != "" { print start "\t" b; b = "" }
     END { if (b != "") print start "\t" b }' "$doc" >"$tmp/recipes"
[ -s "$tmp/recipes" ] || { echo "$doc: no recipes under \"## Extension points\""; bad=1; }
count() {
    case $1 in
    one) echo 1 ;; two) echo 2 ;; three) echo 3 ;; four) echo 4 ;; five) echo 5 ;;
    six) echo 6 ;; seven) echo 7 ;; eight) echo 8 ;; nine) echo 9 ;; ten) echo 10 ;;
    *) echo "$1" ;;
    esac
}
while IFS="$(printf '\t')" read -r line text; do
    # "(`HEADER`, N files: LIST; ...)": the parenthesis after the title
    head=$(echo "$text" | sed -n 's/^- \*\*[^*]*\*\* (\([^)]*\)).*/\1/p')
    header=$(echo "$head" | sed -n 's/^`\([^`]*\)`, .*/\1/p')
    n=$(echo "$head" | sed -n 's/^`[^`]*`, \([a-z0-9]*\) files: .*/\1/p')
    if [ -z "$header" ] || [ -z "$n" ]; then
        echo "$doc:$line: a recipe without its \"(\`HEADER\`, N files: \`FILE\`, ...)\": $(echo "$text" | cut -c1-60)"
        bad=1
        continue
    fi
    listed=$(echo "$head" | sed 's/^[^:]*: //' | sed 's/;.*//' | grep -o '`[^`]*`' | tr -d '`')
    all=$(echo "$head" | sed 's/^[^:]*: //' | grep -o '`[^`]*`' | tr -d '`')
    got=$(echo "$listed" | grep -c .)
    [ "$got" -eq "$(count "$n")" ] ||
        { echo "$doc:$line: the recipe of $header says $n files and lists $got"; bad=1; }
    hpath=
    for p in "include/$header" "src/$header"; do
        [ -f "$p" ] && hpath=$p
    done
    if [ -z "$hpath" ]; then
        echo "$doc:$line: $header, the recipe's header, is not in the tree"
        bad=1
        continue
    fi
    grep -q 'Adding' "$hpath" ||
        { echo "$hpath: no \"Adding ...\" recipe, which $doc:$line points to"; bad=1; }
    for f in $all; do
        exists "$f" || continue # said by check 1
        [ "$f" = "$header" ] && continue
        case $f in
        */) word=$(basename "$f")/ ;;
        *) word=$(basename "$f") ;;
        esac
        grep -qF "$word" "$hpath" ||
            { echo "$hpath: its recipe does not name $word, which $doc:$line lists"; bad=1; }
    done
done <"$tmp/recipes"

# ---- 3. orphaned comments
for f in $(find src include -name '*.[ch]' | sort); do
    awk -v f="$f" '
        closed && /^\/\*/ { print f ":" NR ": a comment right after another (orphaned: move it to what it describes, or join them)" }
        { closed = 0 }
        /^\/\*/ { top = 1; banner = /^\/\* ----/ }
        top && /\*\/[ \t]*$/ { closed = !banner; top = 0; next }
        !/^( \*|\/\*)/ { top = 0 }' "$f"
done >"$tmp/orphans"
if [ -s "$tmp/orphans" ]; then
    cat "$tmp/orphans"
    bad=1
fi
exit $bad
