#!/bin/sh
# The tree's dependencies point one way. Each folder of src/ (with its
# public headers in include/<folder>/) may include only its own headers and
# those of the folders listed for it below, lower in the data flow; a
# header without a folder ("name.h") must be a private one beside the file
# that includes it. Also: no code outside the backend registry asks which
# backend it holds by name (a capability is asked through backend.h).
# Prints each violation as file:line and exits 1 if there is any.
# usage: scripts/check-includes.sh [REPO]   (from make test)
set -u
repo=${1:-$(dirname "$0")/..}
cd "$repo" || exit 2

# folder: the folders it may include (its own always)
allowed() {
    case $1 in
    base) echo "" ;;
    ops) echo "base" ;;
    data) echo "base" ;;
    cpe) echo "base ops" ;;
    backends) echo "base ops cpe" ;;
    layers) echo "base ops backends" ;;
    net) echo "base ops backends layers data" ;;
    dist) echo "base" ;;
    parallel) echo "base ops backends net data dist" ;;
    train) echo "base ops cpe backends layers net data dist parallel" ;;
    cmd) echo "base ops cpe backends layers net data dist parallel train" ;;
    *) echo "?" ;;
    esac
}

bad=0
for f in $(find src include -name '*.[ch]' | sort); do
    folder=$(echo "$f" | cut -d/ -f2)
    ok=$(allowed "$folder")
    if [ "$ok" = "?" ]; then
        echo "$f: folder $folder is not in scripts/check-includes.sh's table"
        bad=1
        continue
    fi
    grep -n '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$f" |
        sed 's/^\([0-9]*\):[^"]*"\([^"]*\)".*/\1 \2/' >"${TMPDIR:-/tmp}/st-inc.$$"
    while read -r line name; do
        case $name in
        */*)
            target=${name%%/*}
            if [ ! -f "include/$name" ]; then
                echo "$f:$line: \"$name\" is not a public header (include/$name)"
                bad=1
            elif [ "$target" != "$folder" ] && ! echo " $ok " | grep -q " $target "; then
                echo "$f:$line: $folder/ includes \"$name\": $target/ is not below $folder/" \
                    "(it may include: ${ok:-nothing})"
                bad=1
            fi
            ;;
        *)
            if [ ! -f "$(dirname "$f")/$name" ]; then
                echo "$f:$line: \"$name\" is neither beside $f nor given with its folder"
                bad=1
            fi
            ;;
        esac
    done <"${TMPDIR:-/tmp}/st-inc.$$"
    rm -f "${TMPDIR:-/tmp}/st-inc.$$"
done

# A backend's name is compared in the registry alone.
if grep -rn 'name, "cpe"\|name, "dnnl"' src include | grep -v '^src/backends/registry.c:'; then
    echo "the lines above compare a backend's name: ask for a capability (backend.h) instead"
    bad=1
fi
exit $bad
