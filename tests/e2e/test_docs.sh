#!/bin/sh
# The map holds: scripts/check-docs.sh finds every file and folder
# docs/design.md names in the tree, every folder of src/ in its table, every
# extension point's recipe listing as many files as it says and named by its
# header's own recipe, and no orphaned comment; and it catches each of
# these planted in a small copy of the tree.
# usage: sh tests/e2e/test_docs.sh PATH_TO_SINGLETRAIN
. "$(dirname "$0")/../lib/check.sh"
suite_start "$@"
root=$(cd "$(dirname "$0")/../.." && pwd)
check_docs=$root/scripts/check-docs.sh

check "docs/design.md and the recipes agree with the tree" out 0 "" -- sh "$check_docs" "$root"

# A small tree: one folder, one extension point with a recipe of two files.
repo=$tmp/repo
plant() {
    rm -rf "$repo"
    mkdir -p "$repo/docs" "$repo/src/base" "$repo/include/base"
    printf '/* A file. */\nint f(void);\n' >"$repo/src/base/f.c"
    printf '/* Adding a thing: its row here and its case in src/base/f.c. */\n' \
        >"$repo/include/base/thing.h"
    cat >"$repo/docs/design.md" <<'EOF'
# the map

| folder | what it holds | may include |
|---|---|---|
| `base/` | `f.c` | nothing |

## Extension points

- **A thing** (`base/thing.h`, two files: `base/thing.h`,
  `base/f.c`): its row and its case.

## After
EOF
}
plant
check "the small tree passes" out 0 "" -- sh "$check_docs" "$repo"

plant
sed -i 's/`f.c`/`gone.c`/' "$repo/docs/design.md"
check "a file the map names and the tree lacks" out 1 'docs/design.md:5: `gone.c` is not in the tree' -- \
    sh "$check_docs" "$repo"

plant
mkdir -p "$repo/src/extra"
check "a folder without its row" out 1 "src/extra/ has no row in the table of folders" -- \
    sh "$check_docs" "$repo"

plant
sed -i 's/two files:/three files:/' "$repo/docs/design.md"
check "a recipe off by a file" out 1 "the recipe of base/thing.h says three files and lists 2" -- \
    sh "$check_docs" "$repo"

plant
printf '/* Adding a thing: its row here. */\n' >"$repo/include/base/thing.h"
check "a header whose recipe lacks a file" out 1 \
    "include/base/thing.h: its recipe does not name f.c, which docs/design.md:9 lists" -- \
    sh "$check_docs" "$repo"

plant
sed -i 's/^- \*\*A thing\*\* (`base\/thing.h`, two files: `base\/thing.h`,/- **A thing** (`base\/thing.h`),/' \
    "$repo/docs/design.md"
check "a recipe without its file list" out 1 'a recipe without its "(`HEADER`, N files' -- \
    sh "$check_docs" "$repo"

plant
printf '/* A file. */\n/* What f does. */\n/* What g does. */\nint g(void);\n' >"$repo/src/base/f.c"
check "an orphaned comment" out 1 "src/base/f.c:2: a comment right after another" -- \
    sh "$check_docs" "$repo"
finish test_docs
