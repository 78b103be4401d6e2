# Shared by the shell tests (sourced, not run): suite_start takes the
# binary from the command line and makes a scratch directory; check runs a
# command and compares its exit code and a substring of its output; expect
# turns a shell test into a check; wait_for polls a background run's
# output; require_cmd fails a suite whose tool is missing; finish prints
# the count and sets the exit status.

# suite_start PATH_TO_SINGLETRAIN: bin (made absolute), fixtures (the
# shared input files, tests/fixtures) and tmp, a scratch directory removed
# on exit; a missing or unusable binary exits 2. The kernel-choice cache
# (XDG_CACHE_HOME) is the suite's own, tmp/.xdg-cache (hidden from the
# listings of tmp that tests make; made here: the cache is made only below
# an existing one), empty at the start: no test reads or writes the user's.
suite_start() {
    suite=$(basename "$0")
    bin=${1:-}
    [ -n "$bin" ] || { echo "usage: sh tests/$suite PATH_TO_SINGLETRAIN" >&2; exit 2; }
    case $bin in /*) ;; *) bin=$(pwd)/$bin ;; esac
    [ -x "$bin" ] || { echo "$suite: $bin is not an executable" >&2; exit 2; }
    fixtures=$(cd "$(dirname "$0")/../fixtures" && pwd)
    tmp=$(mktemp -d "${TMPDIR:-/tmp}/${suite%.sh}.XXXXXX") || exit 2
    trap 'rm -rf "$tmp"' EXIT
    trap 'exit 130' HUP INT PIPE TERM
    XDG_CACHE_HOME=$tmp/.xdg-cache
    mkdir "$XDG_CACHE_HOME" || exit 2
    export XDG_CACHE_HOME
}

failed=0
passed=0
# No single run may hang a suite (exit 124 when it times out).
limit=
command -v timeout >/dev/null 2>&1 && limit="timeout 120"

# check NAME STREAM RC TEXT [TEXT2] -- COMMAND...: run COMMAND; pass when it
# exits with RC and STREAM (err or out) contains TEXT (and TEXT2 if given).
check() {
    name=$1 stream=$2 want_rc=$3 want1=$4
    shift 4
    want2=
    if [ "$1" != "--" ]; then
        want2=$1
        shift
    fi
    shift # --
    $limit "$@" >"$tmp/stdout" 2>"$tmp/stderr" </dev/null
    rc=$?
    if [ "$stream" = out ]; then file=$tmp/stdout; else file=$tmp/stderr; fi
    problem=
    if [ "$rc" -ne "$want_rc" ]; then
        problem="expected exit code $want_rc, got $rc"
    elif [ -n "$want1" ] && ! grep -F -q -e "$want1" "$file"; then
        problem="exit code $rc as expected, but std$stream lacks: $want1"
    elif [ -n "$want2" ] && ! grep -F -q -e "$want2" "$file"; then
        problem="exit code $rc as expected, but std$stream lacks: $want2"
    fi
    if [ -z "$problem" ]; then
        passed=$((passed + 1))
        echo "ok   $name (exit $rc)"
        return 0
    fi
    failed=$((failed + 1))
    echo "FAIL $name"
    echo "     ran:      $*"
    echo "     expected: exit $want_rc, std$stream containing: $want1${want2:+ / $want2}"
    echo "     actual:   exit $rc ($problem)"
    echo "     stderr:"
    sed -n '1,20s/^/       | /p' "$tmp/stderr"
    if [ "$stream" = out ]; then
        echo "     stdout:"
        sed -n '1,20s/^/       | /p' "$tmp/stdout"
    fi
    return 1
}

# require_cmd COMMAND PACKAGE: COMMAND is installed, or the suite fails
# (exit 1) naming the Debian package that installs it. For the tools the
# build's dependencies bring (scripts/deps.sh, which make test runs): a
# suite that cannot run fails, it never passes by skipping.
require_cmd() {
    command -v "$1" >/dev/null 2>&1 && return 0
    echo "FAIL $(basename "$0"): $1 is not installed: expected the Debian package $2" \
        "(scripts/deps.sh --test, which make test runs, installs it)" >&2
    exit 1
}

# expect NAME CONDITION...: a check that is a shell test
expect() {
    name=$1
    shift
    if "$@"; then
        passed=$((passed + 1))
        echo "ok   $name"
    else
        failed=$((failed + 1))
        echo "FAIL $name: [ $* ] is false"
    fi
}

# wait_for FILE TEXT: until FILE holds TEXT (a fixed string), polled every
# 50 ms for at most 60 s; false if it never does. For runs started in the
# background: wait for their progress, never for a fixed time.
wait_for() {
    _n=0
    until grep -a -q -F -e "$2" "$1" 2>/dev/null; do
        _n=$((_n + 1))
        [ "$_n" -le 1200 ] || return 1
        sleep 0.05
    done
}

# finish SUITE: print the count; the exit status is 0 when nothing failed.
finish() {
    echo "$1: $passed passed, $failed failed"
    [ "$failed" -eq 0 ]
}
