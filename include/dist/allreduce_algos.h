/* The all-reduce algorithms by name, without MPI: the one list that the MPI
 * module's table (st_allreduce_algos, allreduce.h) and the option check of
 * every build (cluster.h, single-node builds included) expand, so that
 * --allreduce NAME is checked the same way with or without MPI. Also the
 * split of a buffer into the ranks' parts, which the reduce-scatter and
 * all-gather halves of the algorithms and the partitioned solver state
 * (--rank-update partitioned) share. */
#ifndef ST_ALLREDUCE_ALGOS_H
#define ST_ALLREDUCE_ALGOS_H

#include <stddef.h>

#include "base/status.h"

/* X(function suffix, --allreduce name, reduce-scatter, all-gather, one line
 * for --help), in the order of the table and of auto's probe. The
 * reduce-scatter and all-gather columns name the functions that do the
 * algorithm's two halves (allreduce.h). mpi, ring, rhd and rhd-supernode
 * have halves of their own (the all-reduce is the two in a row); binomial,
 * ps, butterfly and onesided have no natural split: their reduce-scatter
 * is their whole all-reduce (each rank then keeps its part) and their
 * all-gather the ring's.
 *
 * Adding an algorithm touches three files: its row here; its file
 * src/dist/allreduce/<name>.c with st_allreduce_<fn> and its halves; its
 * header's cost formula, a case of src/dist/allreduce/cost.c (plan's; a
 * row without one aborts there, and test_allreduce_cost runs every row).
 * The prototypes (include/dist/allreduce.h), --allreduce, --help, auto's
 * probe and tests/mpi/test_allreduce.c (every row against MPI_Allreduce)
 * follow from the row. */
#define ST_ALLREDUCE_ALGOS(X)                                                                  \
    X(mpi, "mpi", st_reduce_scatter_mpi, st_allgather_mpi,                                     \
      "the MPI library's MPI_Allreduce (baseline)")                                            \
    X(ring, "ring", st_reduce_scatter_ring, st_allgather_ring,                                 \
      "ring reduce-scatter + all-gather")                                                      \
    X(rhd, "rhd", st_reduce_scatter_rhd, st_allgather_rhd,                                     \
      "recursive halving + doubling (Rabenseifner)")                                           \
    X(rhd_supernode, "rhd-supernode", st_reduce_scatter_rhd_supernode,                         \
      st_allgather_rhd_supernode, "rhd over ranks renumbered round-robin across supernodes")   \
    X(binomial, "binomial", st_allreduce_binomial, st_allgather_ring,                          \
      "binomial-tree reduce + broadcast")                                                      \
    X(star, "ps", st_allreduce_star, st_allgather_ring, "parameter-server star on rank 0")     \
    X(butterfly, "butterfly", st_allreduce_butterfly, st_allgather_ring,                       \
      "butterfly: recursive doubling exchanging the whole buffer")                             \
    X(onesided, "onesided", st_allreduce_onesided, st_allgather_ring,                          \
      "binomial trees over one-sided MPI (RMA puts + notifications), pipelined")

/* The names as one string literal, "mpi, ring, ..., butterfly, " (for
 * --help texts): ST_ALLREDUCE_ALGOS(ST_ALLREDUCE_NAME_LIST). */
#define ST_ALLREDUCE_NAME_LIST(fn, name, reduce_scatter, allgather, summary) name ", "

/* Names indexed like st_allreduce_algos; st_allreduce_count of them. */
extern const char *const st_allreduce_names[];
extern const size_t st_allreduce_count;

/* The index of the algorithm called name, or ST_EUSAGE naming the known
 * ones ("--allreduce NAME: unknown algorithm (expected ...)"). */
st_status st_allreduce_index(const char *name, int *index, st_error *err);

/* The part of n floats that rank q of p holds after a reduce-scatter (and
 * gives to an all-gather): floats [floor(n q / p), floor(n (q + 1) / p)),
 * computed without overflow, into *start and *count. Parts differ in size
 * by at most one; some are empty when n < p. */
void st_allreduce_part(size_t n, int p, int q, size_t *start, size_t *count);

#endif
