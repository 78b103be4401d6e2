#!/bin/sh
# Inside a folder of src/, files call one way (STYLE.md): no file-level call
# cycle, where file A calls a function (or uses a variable) defined in file
# B and B one defined in A, directly or through a chain of other files of
# the folder. Read from the built objects: nm's defined and undefined
# global symbols of each object of BUILD/src/FOLDER/ (its sub-folders
# included) whose source is still in the tree give the calls between the
# folder's files; a group of files that reach each other (a strongly
# connected component) is a cycle, printed with the calls that close it:
#   src/FOLDER: a cycle of N files: a.c b.c ...
#     a.c -> b.c: the_function ...
# A cycle fails (exit 1), but in the folders of KNOWN below, where it is
# reported only ("(known, not failed)"). The folders that had cycles when
# this check came were made one way and taken off the list, which is now
# empty: a cycle anywhere fails. The list stays for a folder whose cycle
# must wait for its fix, named there until the fix comes.
# usage: scripts/check-cycles.sh BUILD [REPO]   (from tests/e2e/test_layering.sh)
set -u
build=${1:?usage: scripts/check-cycles.sh BUILD [REPO]}
repo=${2:-$(dirname "$0")/..}
[ -d "$build/src" ] || { echo "$build/src: no objects (build first)" >&2; exit 2; }

# The folders whose cycles are reported, not failed: none
# (tests/e2e/test_layering.sh checks the mechanism on a copy naming one).
KNOWN=""

tmp=$(mktemp) || exit 2
trap 'rm -f "$tmp"' EXIT
(cd "$build/src" && find . -name '*.o' | sed 's|^\./||' | sort) | while read -r o; do
    src=src/${o%.o}.c
    [ -f "$repo/$src" ] || continue # a stale object of a removed source
    folder=${o%%/*}
    nm -P -g --defined-only "$build/src/$o" |
        awk -v f="$folder" -v s="$src" 'NF >= 2 && $2 != "U" { print "D", f, s, $1 }'
    nm -P -u "$build/src/$o" | awk -v f="$folder" -v s="$src" '{ print "U", f, s, $1 }'
done >"$tmp"

awk -v known=" $KNOWN " '
$1 == "D" { def[$2 SUBSEP $4] = def[$2 SUBSEP $4] " " $3; next }
$1 == "U" { use[++nu] = $0; next }
END {
    # the calls between the files of a folder: edge[a, b] = the symbols
    for (k = 1; k <= nu; k++) {
        split(use[k], u, " ")
        folder = u[2]; from = u[3]; sym = u[4]
        if (!((folder SUBSEP sym) in def))
            continue
        n = split(def[folder SUBSEP sym], to, " ")
        for (j = 1; j <= n; j++) {
            if (to[j] == from)
                continue
            if (!((from SUBSEP to[j]) in edge)) {
                files[folder] = files[folder] " " from " " to[j]
            }
            edge[from, to[j]] = edge[from, to[j]] " " sym
            reach[from, to[j]] = 1
        }
    }
    bad = 0
    for (folder in files) {
        # the folder files, once each, sorted
        m = split(files[folder], list, " ")
        nn = 0
        delete seen
        for (i = 1; i <= m; i++)
            if (!(list[i] in seen)) { seen[list[i]] = 1; node[++nn] = list[i] }
        for (i = 2; i <= nn; i++)
            for (j = i; j > 1 && node[j - 1] > node[j]; j--) {
                x = node[j]; node[j] = node[j - 1]; node[j - 1] = x
            }
        # reachability (Warshall)
        for (k = 1; k <= nn; k++)
            for (i = 1; i <= nn; i++)
                if ((node[i], node[k]) in reach)
                    for (j = 1; j <= nn; j++)
                        if ((node[k], node[j]) in reach)
                            reach[node[i], node[j]] = 1
        delete done
        for (i = 1; i <= nn; i++) {
            if (node[i] in done)
                continue
            size = 1; members = node[i]; delete scc; scc[node[i]] = 1
            for (j = i + 1; j <= nn; j++)
                if (((node[i], node[j]) in reach) && ((node[j], node[i]) in reach)) {
                    size++; members = members " " node[j]; scc[node[j]] = 1; done[node[j]] = 1
                }
            if (size < 2)
                continue
            isknown = index(known, " " folder " ") > 0
            text = "src/" folder ": a cycle of " size " files" \
                   (isknown ? " (known, not failed)" : "") ": " members "\n"
            for (a = 1; a <= nn; a++)
                for (b = 1; b <= nn; b++)
                    if ((node[a] in scc) && (node[b] in scc) && ((node[a], node[b]) in edge))
                        text = text "  " node[a] " -> " node[b] ":" edge[node[a], node[b]] "\n"
            out[(isknown ? "2 " : "1 ") folder] = out[(isknown ? "2 " : "1 ") folder] text
            if (!isknown)
                bad = 1
        }
    }
    # the failing cycles first, then the known ones, each by folder
    nf = 0
    for (key in out)
        names[++nf] = key
    for (i = 2; i <= nf; i++)
        for (j = i; j > 1 && names[j - 1] > names[j]; j--) {
            x = names[j]; names[j] = names[j - 1]; names[j - 1] = x
        }
    for (i = 1; i <= nf; i++)
        printf "%s", out[names[i]]
    exit bad
}' "$tmp"
