/* What the two implementations of cluster.h (cluster_mpi.h's files over MPICH,
 * cluster_single.c for one node without MPI) share. */
#ifndef ST_CLUSTER_INTERNAL_H
#define ST_CLUSTER_INTERNAL_H

#include "dist/cluster.h"

/* Check the options without any MPI call: the algorithm's index in the
 * table of allreduce_algos.h (-1 for auto), or ST_EUSAGE naming the option. */
st_status st_cluster_check_opts(const st_cluster_opts *o, int *algorithm, st_error *err);

/* st_cluster_gather_text of one rank: a copy of text [len], NUL-ended. */
st_status st_cluster_copy_text(const char *text, size_t len, char **all, size_t *all_len,
                               st_error *err);

#endif
