/* The all-reduce algorithms by name, without MPI: the one list that the MPI
 * module's table (st_allreduce_algos, allreduce.h) and the option check of
 * every build (cluster.h, single-node builds included) expand, so that
 * --allreduce NAME is checked the same way with or without MPI. */
#ifndef ST_ALLREDUCE_ALGOS_H
#define ST_ALLREDUCE_ALGOS_H

#include <stddef.h>

#include "base/status.h"

/* X(function suffix, --allreduce name, one line for --help), in the order
 * of the table and of auto's probe. */
#define ST_ALLREDUCE_ALGOS(X)                                                                  \
    X(mpi, "mpi", "the MPI library's MPI_Allreduce (baseline)")                                \
    X(ring, "ring", "ring reduce-scatter + all-gather")                                        \
    X(rhd, "rhd", "recursive halving + doubling (Rabenseifner)")                               \
    X(rhd_supernode, "rhd-supernode", "rhd over ranks renumbered round-robin across "          \
                                      "supernodes")                                            \
    X(binomial, "binomial", "binomial-tree reduce + broadcast")                                \
    X(star, "ps", "parameter-server star on rank 0")

/* Names indexed like st_allreduce_algos; st_allreduce_count of them. */
extern const char *const st_allreduce_names[];
extern const size_t st_allreduce_count;

/* The index of the algorithm called name, or ST_EUSAGE naming the known
 * ones ("--allreduce NAME: unknown algorithm (expected ...)"). */
st_status st_allreduce_index(const char *name, int *index, st_error *err);

#endif
