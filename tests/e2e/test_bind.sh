#!/bin/sh
# --bind on this machine, read back from the kernel: while a run trains,
# every thread's Cpus_allowed_list (/proc/PID/task/*/status) matches the
# placement it printed. -t 2 --bind cores: one thread set on each of the
# first two allowed cpus, the scheduler's left on all of them (no core is
# free); -t 1: the worker on the first cpu, the scheduler (the main thread)
# and the prefetcher on the second (the core left over; the signal thread,
# started before, sleeps anywhere); --bind none: every thread on every
# allowed cpu. A pinned run and an unpinned one end with the same weights,
# bit for bit; --dry-run prints the placement; --bind none runs without a
# topology (hwloc's environment broken, /sys hidden), and hwloc's own
# messages never reach stderr. (The placement's rules, on
# synthetic topologies: tests/unit/test_placement.c.)
# usage: sh tests/e2e/test_bind.sh PATH_TO_SINGLETRAIN
set -u
. "$(dirname "$0")/../lib/check.sh"
suite_start "$@"
cp "$fixtures/tiny.cfg" "$tmp/tiny.cfg"

allowed=$(awk '/^Cpus_allowed_list:/ {print $2}' /proc/self/status)
first=$(echo "$allowed" | cut -d, -f1 | cut -d- -f1)
cores=$(nproc)
# the second allowed cpu, from the expanded list
second=$(echo "$allowed" | tr ',' '\n' | while IFS=- read -r a b; do
    seq "$a" "${b:-$a}"
done | sed -n 2p)

# lists PID: the distinct Cpus_allowed_list of its threads, one a line
lists() {
    for s in /proc/"$1"/task/*/status; do
        awk '/^Cpus_allowed_list:/ {print $2}' "$s" 2>/dev/null
    done | sort -u
}

# train_and_read NAME ARGS...: start a long run, wait for its third
# iteration, record its threads' lists in $tmp/NAME.lists, stop it.
train_and_read() {
    name=$1
    shift
    "$bin" --data synthetic --train-images 4096 --iters 100000 --no-test --log-every 1 \
        --log-format text "$@" "$tmp/tiny.cfg" >"$tmp/$name.out" 2>&1 &
    pid=$!
    if wait_for "$tmp/$name.out" "iter 3/"; then
        lists "$pid" >"$tmp/$name.lists"
        awk '/^Cpus_allowed_list:/ {print $2}' /proc/"$pid"/status >"$tmp/$name.main"
    else
        : >"$tmp/$name.lists"
    fi
    kill -INT "$pid" 2>/dev/null
    wait "$pid"
}

has_list() {
    grep -qx -e "$2" "$tmp/$1.lists"
}
only_lists() { # NAME LIST...: every thread's list is one of these
    f=$tmp/$1.lists
    shift
    for l in "$@"; do
        printf '%s\n' "$l"
    done >"$tmp/allowed.lists"
    [ -s "$f" ] && [ -z "$(grep -vxF -f "$tmp/allowed.lists" "$f")" ]
}

echo "this process may use cpus $allowed ($cores)"
if [ "$cores" -ge 2 ]; then
    train_and_read two -t 2 -b 8 --bind cores
    expect "-t 2 --bind cores: it says where" grep -q "bind: workers 0-1 on socket" \
        "$tmp/two.out"
    expect "-t 2: a thread on cpu $first alone" has_list two "$first"
    expect "-t 2: a thread on cpu $second alone" has_list two "$second"
    expect "-t 2: no thread elsewhere than on one of them or on all ($allowed)" \
        only_lists two "$first" "$second" "$allowed"
    train_and_read one -t 1 -b 8
    expect "-t 1: the cores left over are the prefetcher's" \
        grep -q "prefetch and scheduler on cpu" "$tmp/one.out"
    expect "-t 1: the worker's thread on cpu $first alone" has_list one "$first"
    expect "-t 1: the scheduler's thread (the main one) on cpu $second" \
        grep -qx -e "$second" "$tmp/one.main"
    expect "-t 1: a thread on cpu $second alone (the prefetcher's, the scheduler's)" \
        has_list one "$second"
else
    train_and_read one -t 1 -b 8 --bind cores
    expect "-t 1 on one cpu: every thread on cpu $first" only_lists one "$first"
fi
train_and_read none -t 1 -b 8 --bind none
expect "--bind none: it says so" grep -q "bind: none (--bind none)" "$tmp/none.out"
expect "--bind none: every thread on every allowed cpu ($allowed)" only_lists none "$allowed"

# Pinned or not, the same bits.
for mode in cores none; do
    check "--bind $mode: a run with a snapshot" out 0 "done: 12 iterations" -- \
        "$bin" --data synthetic --train-images 256 --iters 12 --no-test -t 2 -b 16 --seed 4 \
        --bind "$mode" --snapshot-dir "$tmp/snap-$mode" "$tmp/tiny.cfg"
done
expect "pinned and unpinned: the same weights, bit for bit" \
    cmp -s "$tmp/snap-cores/tiny_final.snap" "$tmp/snap-none/tiny_final.snap"

check "--dry-run prints the placement" out 0 "bind: " -- \
    "$bin" --dry-run --data synthetic -t 1 -b 8 "$tmp/tiny.cfg"

# --bind none needs no topology: hwloc's environment broken (its bad
# inputs are the catalogue's, env-hwloc-*), or /sys hidden, the run goes
# on, and hwloc's own messages never reach stderr.
small="-q --data synthetic --iters 1 --no-test"
echo 'garbage <<<' >"$tmp/bad.xml"
check "--bind none with HWLOC_XMLFILE naming garbage: runs" err 0 "" -- \
    env HWLOC_XMLFILE="$tmp/bad.xml" "$bin" $small --bind none "$tmp/tiny.cfg"
expect "... nothing on stderr" [ ! -s "$tmp/stderr" ]
check "--bind none with HWLOC_XMLFILE=/dev/zero: runs" err 0 "" -- \
    sh -c "ulimit -v 4000000; HWLOC_XMLFILE=/dev/zero '$bin' $small --bind none '$tmp/tiny.cfg'"
if unshare -rm true 2>/dev/null; then
    check "/sys hidden: our warning, not hwloc's message" err 0 \
        "warning: topology of this machine: hwloc could not read /sys/devices/system (hidden?)" -- \
        unshare -rm sh -c "mount -t tmpfs none /sys && exec '$bin' $small '$tmp/tiny.cfg'"
    expect "... hwloc's own message silenced" sh -c "! grep -q hwloc/linux '$tmp/stderr'"
    expect "... one line on stderr" [ "$(wc -l <"$tmp/stderr")" -eq 1 ]
    check "/sys hidden, --bind none: nothing on stderr" err 0 "" -- \
        unshare -rm sh -c "mount -t tmpfs none /sys && exec '$bin' $small --bind none '$tmp/tiny.cfg'"
    expect "... nothing on stderr" [ ! -s "$tmp/stderr" ]
else
    echo "SKIP (not counted) /sys hidden: unshare -rm (a user and mount namespace) is not allowed here"
fi
finish "$suite"
