/* What the files of the cluster over MPICH share (cluster.h's multi-node
 * implementation, in parts by job):
 *   cluster_mpi.c        the lifetime (MPI up and down), the options, waiting
 *                        for the peers with the timeout, the abort
 *   cluster_agree.c      agreement between the ranks outside the iteration:
 *                        set-up, outcome, rank 0's text and weights, --trace
 *   cluster_allreduce.c  the workers' channels and what runs on them: the
 *                        control sums, the all-reduce and its two halves
 *   cluster_probe.c      --allreduce auto: what to probe, the times, the choice
 *   cluster_parts.c      data split over the ranks: the partitioned solver
 *                        state's parts, the model-parallel group's collectives
 *   cluster_report.c     the report: the channels' algorithms, bytes, probe
 * Calls go one way: cluster_allreduce.c calls cluster_probe.c; the others
 * call only cluster_mpi.c (its waits, its abort), and the report nothing. */
#ifndef ST_CLUSTER_MPI_H
#define ST_CLUSTER_MPI_H

#include <mpi.h>

#include "dist/allreduce.h"
#include "dist/cluster.h"

/* auto probes only the algorithms the cost formulas put within this
 * factor of the cheapest (and mpi, whose formula is a guess): at 1,024
 * ranks a probe of ps, whose root takes every message, costs more than
 * the run saves. */
#define PROBE_WITHIN 4.0

/* One worker's view: its communicator, the algorithm it uses, the probe. */
typedef struct cluster_worker {
    MPI_Comm comm;
    st_comm c;
    int algorithm;               /* index in st_allreduce_algos; -1 while probing */
    long probe_first;            /* first iteration it saw, or -1 */
    double probe_best[16];       /* fastest call of each candidate, seconds */
    double predicted[16];        /* the cost formulas' time of each, seconds */
    int candidates[16], n_candidates; /* those probed, in this order */
    st_allreduce_stats stats;
    int half_algorithm;          /* partitioned: the reduce-scatter's algorithm, which the
                                    all-gather of the same iteration uses */
    double half_seconds;         /* and its time, which the probe adds to the all-gather's */
    int last_algorithm;          /* the last all-reduce's or reduce-scatter's, or -1 */
    char label[48];              /* its name in the report, "" for "worker W" */
} cluster_worker;

struct st_cluster {
    int rank, size;
    double timeout;              /* --peer-timeout, seconds; 0: none */
    st_comm world;               /* MPI_COMM_WORLD, for waiting on its requests */
    st_cluster_opts o;
    int algorithm;               /* chosen index, -1 for auto */
    int workers;
    cluster_worker *w;           /* [workers] */
    double probe_table[16];      /* auto: slowest rank's fastest call, worker 0 */
    double predicted[16];        /* and the formulas' time of each */
    int probed;
    st_net_params net;           /* auto: the network, measured when the workers start */
    int per_layer;               /* auto decides per channel */
    /* --mp-group G: this rank's group and block (cluster.h), MPI_COMM_NULL
     * without; the floats they moved, for the report */
    int mp_size;
    MPI_Comm mp_group, mp_block;
    double mp_exchanged, mp_reduced;
};

/* Complete a collective request of comm (c's world or a worker's): polled
 * with back-off (st_comm_wait), given up after the timeout unless patient. */
st_status cluster_wait(const st_cluster *c, const st_comm *comm, MPI_Request *request,
                       int patient, const char *what, st_error *err);

/* auto (cluster_probe.c): each worker's probe not begun; the network the
 * cost formulas see measured (collective) when c's algorithm is auto. */
st_status cluster_probe_start(st_cluster *c, st_error *err);

/* The algorithm worker w uses at iteration it for n floats: the chosen
 * one, or under auto the candidate being probed, deciding (collective on
 * the worker's channel) once every candidate had its iterations. */
st_status cluster_probe_pick(st_cluster *c, int w, long it, size_t n, int *algorithm,
                             st_error *err);

/* A probed call of `seconds` by candidate algorithm on worker cw. */
void cluster_probe_record(cluster_worker *cw, int algorithm, double seconds);

#endif
