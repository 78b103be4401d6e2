/* The multi-node mode: one process per node under mpirun (MPICH), every
 * node training on its share of each global mini-batch. This module is the
 * only caller of MPI outside src/allreduce/, and its header does not need
 * mpi.h, so the rest of the trainer builds without it.
 *
 * A node's BSP iteration: its workers compute their shards and reduce
 * their gradient slices inside the node (ps.h); then worker r all-reduces
 * slice r of the packed gradient across the nodes on a communicator of its
 * own (MPI_THREAD_MULTIPLE), so the T slices travel at once and each
 * worker does the arithmetic of its slice; then worker r applies the
 * solver to slice r. Before that, each worker also sums a few control
 * values over the nodes (failures, stop requests, the loss), so every node
 * takes the same decision to stop at the same iteration and none waits
 * for a peer that left. */
#ifndef ST_CLUSTER_H
#define ST_CLUSTER_H

#include <stddef.h>
#include <stdint.h>

#include "status.h"

typedef struct st_cluster st_cluster;

/* What every node must agree on before training. */
typedef struct st_cluster_fingerprint {
    uint64_t net_hash;
    uint64_t seed;
    long iterations;
    int batch;    /* per node */
    int workers;
    int intra;
    int solver;   /* st_solver_rule */
    int sync;     /* st_sync_mode */
    int algorithm;/* index in st_allreduce_algos, or -1 for auto */
    int overlap;  /* --overlap */
    int per_layer;/* --allreduce-granularity layer */
} st_cluster_fingerprint;

typedef struct st_cluster_opts {
    const char *algorithm;     /* --allreduce NAME or "auto" */
    int supernode_size;        /* --supernode-size Q; 0 = none */
    double sim_cross_bandwidth;/* --sim-cross-bandwidth F; 0 = off */
    int probe_iterations;      /* auto: iterations timed per candidate */
    const char *granularity;   /* auto: "model" (one choice for the whole gradient, the
                                  default) or "layer" (each slice or bucket its own) */
} st_cluster_opts;

/* Whether this process was started by mpirun (MPICH's PMI environment)
 * as one of several ranks. */
int st_cluster_launched(void);

/* MPI_Init_thread (MPI_THREAD_MULTIPLE); NULL in *out when not launched by
 * mpirun with more than one rank. */
st_status st_cluster_init(st_cluster **out, int *argc, char ***argv, st_error *err);

/* MPI_Finalize and free; NULL is fine. */
void st_cluster_free(st_cluster *c);

/* End every rank at once after a failure that others cannot see. */
void st_cluster_abort(st_cluster *c, int code);

int st_cluster_rank(const st_cluster *c);
int st_cluster_size(const st_cluster *c);

/* Parse the options (no MPI calls): an unknown algorithm is ST_EUSAGE. With
 * c NULL (one node) the options are only checked. */
st_status st_cluster_configure(st_cluster *c, const st_cluster_opts *o, int *algorithm,
                               st_error *err);

/* Collective: every rank passes how its set-up went (local) and, if it
 * went well, its fingerprint. Fails on every rank when any rank failed
 * (its own message stays on that rank; the others name it) or when the
 * fingerprints differ (naming the rank and the field). */
st_status st_cluster_agree(st_cluster *c, st_status local, const st_cluster_fingerprint *fp,
                           st_error *err);

/* Collective, after st_cluster_agree: one communicator (channel) per
 * worker, and one more for --overlap's thread; the pacing calibration of
 * --sim-cross-bandwidth. */
st_status st_cluster_start_workers(st_cluster *c, int channels, st_error *err);

/* Collective: rank 0's x [n] to every rank. */
st_status st_cluster_broadcast(st_cluster *c, float *x, size_t n, st_error *err);

/* Worker w's per-iteration control sum over the ranks: values [n] summed
 * in place (failures, stop requests, loss, images). */
st_status st_cluster_control(st_cluster *c, int w, double *values, int n, st_error *err);

/* Worker w's all-reduce of its gradient slice buf [n] (in place, the sum
 * over ranks) with the chosen algorithm; iteration it drives `auto`'s
 * probing (every candidate for probe_iterations iterations, then the one
 * whose slowest rank was fastest: on this channel's messages with layer
 * granularity; with model granularity on the slowest channel's, so that
 * every channel picks the same). */
st_status st_cluster_allreduce(st_cluster *c, int w, long it, float *buf, size_t n,
                               st_error *err);

/* Log lines: the algorithm(s) in use, auto's probe table, the bytes sent
 * and crossing supernodes per iteration. */
typedef void (*st_cluster_print_fn)(void *ctx, const char *line);
void st_cluster_report(const st_cluster *c, long iterations, st_cluster_print_fn print,
                       void *ctx);

#endif
