/* The multi-node mode: one process per node under mpirun (MPICH), every
 * node training on its share of each global mini-batch. This module is the
 * only caller of MPI outside src/dist/allreduce/, and its header does not need
 * mpi.h, so the rest of the trainer builds without it.
 *
 * A node's BSP iteration: its workers compute their shards and reduce
 * their gradient slices inside the node (ps.h); then worker r all-reduces
 * slice r of the packed gradient across the nodes on a communicator of its
 * own (MPI_THREAD_MULTIPLE), so the T slices travel at once and each
 * worker does the arithmetic of its slice; then worker r applies the
 * solver to slice r. With --rank-update partitioned, worker r instead
 * reduce-scatters slice r over the nodes, updates this node's part of it
 * and all-gathers the parts' new weights. Before that, each worker also
 * sums a few control values over the nodes (failures, stop requests, the
 * loss), so every node takes the same decision to stop at the same
 * iteration and none waits for a peer that left. */
#ifndef ST_CLUSTER_H
#define ST_CLUSTER_H

#include <stddef.h>
#include <stdint.h>

#include "base/status.h"
#include "dist/allreduce_cost.h"

typedef struct st_cluster st_cluster;

/* What every node must agree on before training: named values (numbers,
 * the bits of floats, hashes of strings and arrays), filled by the trainer
 * (st_trainer_fingerprint says which). Only the values are compared; every
 * rank runs the same program, so entry i means the same on every rank. */
#define ST_CLUSTER_FP_MAX 64
typedef struct st_cluster_fingerprint {
    int n;
    uint64_t value[ST_CLUSTER_FP_MAX];
    const char *name[ST_CLUSTER_FP_MAX]; /* for the message: "the batch (-b)" */
} st_cluster_fingerprint;

/* Append a value; one beyond ST_CLUSTER_FP_MAX is a broken invariant
 * (abort()). */
void st_cluster_fp_add(st_cluster_fingerprint *fp, const char *name, uint64_t value);
void st_cluster_fp_add_double(st_cluster_fingerprint *fp, const char *name, double value);

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

/* How many ranks mpirun started (MPICH's PMI_SIZE), without an MPI call
 * (--dry-run starts no cluster); 1 when not launched by mpirun. */
int st_cluster_launched_ranks(void);

/* How many ranks of this run share this host, as MPICH's mpiexec says in
 * MPI_LOCALNRANKS; 1 when not launched by mpirun (or it does not say). No
 * MPI call: the trainer asks while setting up, and so does --dry-run,
 * which starts no cluster. */
int st_cluster_local_ranks(void);
/* This rank's index among them (MPI_LOCALRANKID), from 0. */
int st_cluster_local_rank(void);

/* MPI_Init_thread (MPI_THREAD_MULTIPLE); NULL in *out when not launched by
 * mpirun with more than one rank. */
st_status st_cluster_init(st_cluster **out, int *argc, char ***argv, st_error *err);

/* MPI_Finalize and free; NULL is fine. */
void st_cluster_free(st_cluster *c);

/* After a failure the others cannot see (they would wait for this rank):
 * print err's message naming this rank and end every rank at once
 * (MPI_Abort, exit code 1). */
void st_cluster_abort(st_cluster *c, const st_error *err);

/* How long a rank waits for the others at a meeting point (the set-up
 * agreement, an iteration's control sum and all-reduce) before it ends
 * every rank with a message: --peer-timeout; 0 waits forever. */
void st_cluster_set_timeout(st_cluster *c, double seconds);

int st_cluster_rank(const st_cluster *c);
int st_cluster_size(const st_cluster *c);

/* Parse the options (no MPI calls): an unknown algorithm is ST_EUSAGE. With
 * c NULL (one node) the options are only checked. */
st_status st_cluster_configure(st_cluster *c, const st_cluster_opts *o, int *algorithm,
                               st_error *err);

/* Collective: every rank passes how its set-up went (local, with err's
 * message) and, if it went well, its fingerprint. Fails on every rank when
 * any rank failed (its own message stays on that rank; the others name it)
 * or when the fingerprints differ (naming the rank and the first value
 * that differs). *alike: every rank failed with the same status and
 * message (a refusal each reaches from the same options and files), which
 * rank 0 then says for all: the others need not print N copies of it. */
st_status st_cluster_agree(st_cluster *c, st_status local, const st_cluster_fingerprint *fp,
                           int *alike, st_error *err);

/* Collective, at the end of a run that every rank began: every rank
 * passes how it ended (local, with err's message, and *signal, the signal
 * that stopped it or came after its last iteration, or 0). Afterwards
 * *signal is the same on every rank (SIGINT if any rank had it, else any
 * other), and a rank that failed only because another did (ST_EPEER) or
 * did not fail gets the first failing rank's status and message ("rank R
 * of P failed: ..."), so every rank exits alike. Ranks other than 0 wait
 * without the timeout (rank 0 may still be testing). */
st_status st_cluster_outcome(st_cluster *c, st_status local, int *signal, st_error *err);

/* Collective, after st_cluster_agree: one communicator (channel) per
 * worker, and one more for --overlap's thread; the pacing calibration of
 * --sim-cross-bandwidth. */
st_status st_cluster_start_workers(st_cluster *c, int channels, st_error *err);

/* Collective, in set-up: rank 0's text (NUL-ended; ok: rank 0's set-up went
 * well so far) to every other rank, into *text (malloc'd; the caller frees
 * it). On rank 0 *text is read, on the others written; a rank other than
 * 0 gets ST_EPEER when rank 0 failed. One rank (c NULL): nothing. */
st_status st_cluster_share_text(st_cluster *c, int ok, char **text, st_error *err);

/* Collective: alpha, beta and gamma between ranks 0 and 1, measured
 * (st_comm_measure_net, allreduce.h), the same on every rank; for
 * `singletrain plan`. One rank (c NULL): ST_EINTERNAL. */
st_status st_cluster_measure_net(st_cluster *c, st_net_params *np, st_error *err);

/* Collective, at the start of a run (--trace): a time 0 common to the
 * ranks, in st_now() seconds, into *origin: every rank reads its clock as
 * it leaves a barrier (the second of two, the first having brought every
 * rank there), so the clocks agree within the barrier's exit skew
 * (microseconds between ranks of one host; MPI_Wtime is not used, MPICH
 * does not make it global). One rank: now. */
st_status st_cluster_clock_origin(st_cluster *c, double *origin, st_error *err);

/* Collective, at the end of a run (--trace): every rank's text [len]
 * joined in rank order on rank 0, into *all (malloc'd, *all_len bytes,
 * NUL-ended); NULL on the other ranks. Waited for without the timeout
 * (rank 0 may be testing); a failure ends every rank. One rank: a copy of
 * its own. */
st_status st_cluster_gather_text(st_cluster *c, const char *text, size_t len, char **all,
                                 size_t *all_len, st_error *err);

/* Collective: rank 0's x [n] to every rank. */
st_status st_cluster_broadcast(st_cluster *c, float *x, size_t n, st_error *err);

/* Worker w's per-iteration control sum over the ranks: values [n] summed
 * in place (failures, stop requests, loss, images). Bound by the timeout
 * unless patient (a wait that may span rank 0's test phase or snapshot). */
st_status st_cluster_control(st_cluster *c, int w, double *values, int n, int patient,
                             st_error *err);

/* Worker w's all-reduce of its gradient slice buf [n] (in place, the sum
 * over ranks) with the chosen algorithm; iteration it drives `auto`'s
 * probing (every candidate for probe_iterations iterations, then the one
 * whose slowest rank was fastest: on this channel's messages with layer
 * granularity; with model granularity on the slowest channel's, so that
 * every channel picks the same). */
st_status st_cluster_allreduce(st_cluster *c, int w, long it, float *buf, size_t n,
                               st_error *err);

/* --rank-update partitioned (ps_part.h): worker w's reduce-scatter of its
 * gradient slice buf [n]. Afterwards this rank's part of buf
 * (st_allreduce_part(n, P, rank), allreduce_algos.h) holds the sum over
 * the ranks of that part, with the bits st_cluster_allreduce would leave
 * there; the rest of buf is undefined. The algorithm, and auto's probing,
 * are st_cluster_allreduce's: the probe times this reduce-scatter and the
 * all-gather that follows it together. */
st_status st_cluster_reduce_scatter(st_cluster *c, int w, long it, float *buf, size_t n,
                                    st_error *err);

/* Worker w's all-gather, after its reduce-scatter of the same iteration
 * (with the same algorithm): every rank's part of buf [n] from that rank
 * into every rank's buf. *bad: in, whether this rank's part went wrong (a
 * non-finite gradient, which it did not apply); out, whether any rank's
 * did: a flag all-reduced alongside the all-gather, so that every rank
 * stops at the same iteration. */
st_status st_cluster_allgather(st_cluster *c, int w, float *buf, size_t n, int *bad,
                               st_error *err);

/* Collective, on the calling thread while no worker communicates: the
 * partitioned solver state to and from rank 0. The arena [0, bounds[ranges])
 * is cut into ranges [bounds[s], bounds[s+1]) and each range into the
 * ranks' parts (st_allreduce_part); mine holds `planes` planes of `owned`
 * floats, each plane this rank's parts of ranges 0, 1, ... in order, and
 * full (rank 0's alone; NULL on the others) `planes` planes of
 * bounds[ranges] floats. Gather: every rank's parts into rank 0's full
 * (the others wait for rank 0 without the timeout: it may be testing);
 * scatter: rank 0's full out to every rank's mine. A failure ends every
 * rank (st_cluster_abort). */
st_status st_cluster_gather_parts(st_cluster *c, const size_t *bounds, int ranges,
                                  const float *mine, size_t owned, int planes, float *full,
                                  st_error *err);
st_status st_cluster_scatter_parts(st_cluster *c, const size_t *bounds, int ranges,
                                   const float *full, float *mine, size_t owned, int planes,
                                   st_error *err);

/* --mp-group G (hybrid across nodes, PCL-DNN): the ranks form groups of G
 * consecutive ranks (group g: ranks gG .. gG + G - 1); a model-parallel
 * layer is split over a group's ranks, and each part's gradient is summed
 * over its block: the P / G ranks at the same place in their groups.
 * Collective, in set-up, after st_cluster_start_workers: the two
 * communicators; G must divide the ranks (else ST_EUSAGE). */
st_status st_cluster_mp_split(st_cluster *c, int G, st_error *err);

/* On this rank's group, by its worker 0 alone (one worker per rank),
 * counts and displacements in floats, [G] each, indexed by the place in
 * the group: mine [counts[me]] of every rank into all (allgather); send's
 * part k to rank k, rank k's into recv (alltoall); all's parts summed
 * over the group, part me into mine [counts[me]] (reduce-scatter, the
 * parts one after the other). The floats received count as exchanged. */
st_status st_cluster_mp_allgather(st_cluster *c, const float *mine, float *all,
                                  const int *counts, const int *displs, st_error *err);
st_status st_cluster_mp_alltoall(st_cluster *c, const float *send, const int *scounts,
                                 const int *sdispls, float *recv, const int *rcounts,
                                 const int *rdispls, st_error *err);
st_status st_cluster_mp_reduce_scatter(st_cluster *c, const float *all, float *mine,
                                       const int *counts, st_error *err);

/* On this rank's block: buf [n] summed over the block's ranks in place. */
st_status st_cluster_mp_block_allreduce(st_cluster *c, float *buf, size_t n, st_error *err);

/* Group 0's ranks alone (the others do not call it): every one's part
 * buf + displs[me] [counts[me]] into the same place of group rank 0's
 * buf, waited for without the timeout (rank 0 may be testing). */
st_status st_cluster_mp_gather(st_cluster *c, float *buf, const int *counts, const int *displs,
                               st_error *err);

/* The name of the algorithm channel w's last all-reduce or reduce-scatter
 * ran ("rhd"; under auto, while probing, the candidate), for --trace;
 * "none" before the first, and on one node. Read by the channel's own
 * thread. */
const char *st_cluster_algorithm(const st_cluster *c, int w);

/* Name channel w in the report (its owner's: "buckets of 64K-256K"); a
 * channel without a name is "worker w". */
void st_cluster_label(st_cluster *c, int w, const char *label);

/* Log lines: the algorithm(s) in use, auto's probe table, the bytes sent
 * and crossing supernodes per iteration. */
typedef void (*st_cluster_print_fn)(void *ctx, const char *line);
void st_cluster_report(const st_cluster *c, long iterations, st_cluster_print_fn print,
                       void *ctx);

#endif
