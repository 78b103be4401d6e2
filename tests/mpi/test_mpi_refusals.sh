#!/bin/sh
# Refusals under mpirun: a bad option, a setting the rules refuse or a
# missing file that every rank reaches alike is printed once, by rank 0
# ("every rank of N: ..."; it was printed by each of the N ranks), with
# the exit code of the refusal; a command line refused on one rank only
# (mpirun's MPMD form) is that rank's message, the others naming it, and
# every rank ends at once (it waited for --peer-timeout, and plan forever).
# The same for plan. Fails, naming the package (mpich), when mpirun is missing.
# usage: sh tests/mpi/test_mpi_refusals.sh PATH_TO_SINGLETRAIN
set -u
. "$(dirname "$0")/../lib/check.sh"
suite_start "$@"
require_cmd mpirun mpich
tiny=$fixtures/tiny.cfg
q="-q --data synthetic --iters 1 --no-test -t 1"
# errors FILE: its lines that are not warnings
errors() {
    grep -v 'warning: ' "$1" | wc -l
}

check "-np 3, an unknown option: exit 2, said for every rank" err 2 \
    "singletrain: every rank of 3: unknown option '--bogus' (see --help)" -- \
    mpirun -np 3 "$bin" $q --bogus "$tiny"
expect "... once" [ "$(errors "$tmp/stderr")" -eq 1 ]
check "-np 3, a batch too small for -t 2: said once" err 2 \
    "singletrain: every rank of 3: -t 2 workers need a batch of at least 2 images" -- \
    mpirun -np 3 "$bin" -q --data synthetic --iters 1 --no-test -b 1 -t 2 "$tiny"
expect "... once" [ "$(errors "$tmp/stderr")" -eq 1 ]
check "-np 2, --resume of a missing file: said once" err 2 \
    "singletrain: every rank of 2: --resume $tmp/none.snap: cannot open snapshot" -- \
    mpirun -np 2 "$bin" $q --resume "$tmp/none.snap" "$tiny"
expect "... once" [ "$(errors "$tmp/stderr")" -eq 1 ]
check "rank 2 alone refused: its message, exit 2, no wait" err 2 \
    "singletrain: rank 2: unknown option '--bogus'" \
    "singletrain: rank 0: rank 2 of 3 failed to set up (its message says why)" -- \
    mpirun -np 2 "$bin" $q --peer-timeout 20 "$tiny" : -np 1 "$bin" $q --bogus "$tiny"
check "rank 0 alone refused: exit 2, no wait" err 2 \
    "singletrain: rank 0: unknown option '--bogus'" \
    "singletrain: rank 1: rank 0 of 2 failed to set up (its message says why)" -- \
    mpirun -np 1 "$bin" $q --bogus "$tiny" : -np 1 "$bin" $q --peer-timeout 20 "$tiny"

check "plan -np 2, --nodes 0: said once" err 2 \
    "singletrain plan: option --nodes: element 1 '0' is not a positive integer" -- \
    mpirun -np 2 "$bin" plan "$tiny" --nodes 0
expect "... once" [ "$(errors "$tmp/stderr")" -eq 1 ]
check "plan, rank 0 alone refused: exit 2, no wait" err 2 \
    "singletrain plan: unknown option '--bogus'" -- \
    timeout 30 mpirun -np 1 "$bin" plan "$tiny" --nodes 2 --bogus : -np 1 "$bin" plan "$tiny" \
    --nodes 2 -t 1 -b 16 --iters 5
finish "$suite"
