/* The scheduler and its workers (SingleCaffe's design; DESIGN.md, "One
 * iteration").
 *
 * T worker threads are created once and live for the whole run. Each owns a
 * model replica (its activations for its shard, its kernels and backend
 * context, created in its own thread) and writes only its own gradient
 * arena; all read the one shared copy of the weights (ps.h). The calling
 * thread is the scheduler: it hands out work and waits.
 *
 * Bulk-synchronous (BSP) iteration: the batch is split into T shards whose
 * sizes differ by at most one; every worker runs forward and backward on
 * its shard; barrier; worker r sums and scales slice r of all gradients and
 * applies the solver to slice r (in bf16, then converts it into the
 * weights' bf16 copy the workers' kernels read: bf16_weights.h); barrier.
 * With T = 1 this is exactly the single-worker computation; with more
 * workers it differs only by the order of the batch sum. The workers drive the iterations themselves,
 * taking batch i from a ring (batchq.h) that the prefetcher (prefetch.h)
 * fills ahead of them, so between iterations the workers meet only each
 * other, at the barrier.
 *
 * Hybrid (BSP with o->hybrid; PCL-DNN): the same, except that the layers
 * st_net_hybrid_split names run model-parallel over the workers (layer.h,
 * st_mp_group): at each of them the shards form one batch and every worker
 * computes a slice of the output neurons for all of it, so their weight
 * gradients exist once and need no aggregation. On one node, with the
 * update on the host (st_sched_tail_applied), each worker applies the
 * solver to its slice's parameters as soon as it has their gradient, in
 * backward: the gradients are held by no arena. Whether an iteration is
 * applied is decided once, at the first such update: a stop asked before
 * then abandons the iteration as in data parallelism; one asked after it
 * lets the iteration finish (every slice updated) and stops after it.
 *
 * Bounded staleness (ssp:S) and asynchronous (asp): no global barrier. Each
 * worker takes its shard of every iteration at its own pace, reading its own
 * data, and applies its own gradient, divided by the whole batch size, to
 * every slice under the slice's lock: the T partial updates of an iteration
 * add up to the BSP step. SSP lets a worker start iteration i only when
 * every worker has finished iteration i - S - 1; ASP never waits. They trade
 * exactness for the time workers would spend at barriers: gradients are
 * computed on weights other workers are updating meanwhile (stale by up to
 * S iterations under SSP, unbounded under ASP; Hogwild-style, the reads of
 * the forward pass race with the updates by design), and momentum acts on
 * each partial update rather than on the iteration's sum. Only BSP
 * reproduces single-worker training. */
#ifndef ST_SCHEDULER_H
#define ST_SCHEDULER_H

#include <stdatomic.h>
#include <stdint.h>

#include "backends/backend.h"
#include "data/batchq.h"
#include "dist/cluster.h"
#include "data/data.h"
#include "net/net.h"
#include "parallel/placement.h"
#include "parallel/ps.h"
#include "parallel/ps_part.h"
#include "ops/solver.h"
#include "base/status.h"

typedef enum st_sync_mode { ST_SYNC_BSP, ST_SYNC_SSP, ST_SYNC_ASP } st_sync_mode;

/* Where iteration time goes, in seconds (means over workers). */
typedef struct st_time_split {
    double data;      /* waiting for the batch */
    double compute;   /* forward and backward */
    double barrier;   /* waiting for the other workers (BSP: at mid, and at the previous
                         iteration's end) */
    double aggregate; /* summing gradient slices */
    double update;    /* the solver */
    double communicate; /* multi-node: control sums and all-reduce across nodes (0 on one) */
    /* --pipeline layer (0 without): the buckets' reduction (and all-reduce
     * and update) while the node's workers still computed the iteration,
     * after that (while they agreed, took the next batch and ran the next
     * forward), and what the next forward waited for (also in barrier, or
     * across nodes in communicate) */
    double hidden_backward, hidden_forward, exposed;
} st_time_split;

typedef struct st_sched_opts {
    int threads;             /* workers */
    int intra;               /* intra-op threads per worker */
    st_sync_mode sync;
    int staleness;           /* ssp:S */
    int batch;               /* images per iteration */
    int subdivisions;        /* BSP, data-parallel: each worker's shard run in this many
                                pieces, their gradients accumulated before the one update
                                (accumulate.c); 0 or 1: undivided */
    int timing;              /* per-layer times in the replicas */
    const st_backend *backend;
    const char *conv_impl;   /* st_backend_opts.conv_impl of every worker */
    const char *machine_path; /* st_backend_opts.machine_path of every worker */
    st_precision precision;  /* st_backend_opts.precision of every worker */
    int bf16_per_kernel;     /* in bf16: every kernel rounds the weights it reads, at every
                                call (the tests' oracle of the copy); 0: the workers share
                                one bf16 copy of the weights (bf16_weights.h) */
    st_choices *choices;     /* the process's kernel choices, shared by the workers */
    const st_solver_cfg *solver;
    uint64_t seed;
    const st_source *train;  /* SSP / ASP workers read their own shards */
    long test_count;         /* images of the test set, 0 if none */
    const st_transform *transform; /* records to inputs (test, SSP / ASP) */
    size_t record_bytes;     /* largest record of the train and test sources */
    st_cluster *cluster;     /* multi-node BSP (cluster.h), or NULL */
    int hybrid;              /* BSP: model-parallel layers (st_net_hybrid_split) over the
                                workers; ps holds their gradients once (st_ps_init_split) */
    int mp_group;            /* hybrid across nodes, --mp-group G > 1: the model-parallel
                                layers split over groups of G ranks, one worker each
                                (layer.h's st_mp_nodes); 0 or 1: over the workers */
    int overlap;             /* multi-node: all-reduce during backward (overlap.h) */
    int pipeline;            /* BSP, data-parallel: each bucket updated as soon as it is
                                reduced, the next forward waiting per layer (pipeline.h;
                                across nodes on the overlap's buckets and thread) */
    const st_ps_part *part;  /* multi-node BSP, --rank-update partitioned: this rank's parts
                                of the slices and their solver state (ps_part.h; the ps then
                                holds none), or NULL */
    size_t bucket_bytes;     /* its minimum bucket */
    const st_placement *placement; /* where each worker runs (its bound ones pin
                                themselves before they build their replica), or NULL */
    const atomic_int *stop;  /* when it holds a nonzero value (a signal, SIGINT or SIGTERM:
                                the reason), the workers stop cleanly before the next
                                iteration they have not begun; NULL: never */
    st_trace *trace;         /* --trace: the recorder its threads' tracks are added to
                                ("scheduler", then "worker R" each; overlap.h's), or NULL */
} st_sched_opts;

typedef struct st_sched st_sched;

/* What the workers of o would hold, in bytes, found before anything of
 * theirs is allocated (the trainer's memory estimate). */
typedef struct st_sched_memory {
    double activations; /* every worker's activation arena (st_replica_plan) */
    double buffers;     /* their input buffers beside the replicas */
    double kernels;     /* resident memory their kernels take: first + (T - 1) x next */
    double kernels_first; /* measured: building worker 0's replica */
    double kernels_next;  /* measured: building one more (worker 1's) beside it */
    double shared;        /* hybrid: the model-parallel layers' buffers the workers share */
    double accumulation;  /* subdivisions > 1: every worker's arena for its pieces' gradients */
    double bf16_weights;  /* bf16: the weights' copy the workers share (bf16_weights.h) */
    double bf16_outputs;  /* bf16: of activations, the outputs stored as bf16 (all workers) */
} st_sched_memory;

/* Plan the workers' replicas on a thread of their own, as the workers
 * build theirs (the same sample counts and intra-op threads), without
 * allocating their arenas: worker 0's and worker 1's replicas are built
 * (what they add to the resident memory is measured) and freed, and any
 * other worker's shape is planned the same way. Kernels that measure their
 * implementation ("auto"): with measure, they do, as the workers' would
 * (the choices go to o->choices, where the workers will find them; the
 * trial buffers are as large as the worker's tensors); without, they are
 * planned with the backend's unmeasured implementation and record nothing. */
st_status st_sched_plan_memory(const st_net *net, const st_sched_opts *o, int measure,
                               st_sched_memory *out, st_error *err);

/* --trace over `iterations`: what the scheduler's and the workers' tracks
 * take, their events' JSON text included (base/trace.h). */
size_t st_sched_trace_bytes(const st_net *net, const st_sched_opts *o, long iterations);

/* Whether the model-parallel layers of o's hybrid run apply their
 * parameters' gradients in backward (st_ps_init_split's tail_applied): BSP
 * on one node, without --overlap, with a backend that leaves the update to
 * the host. Elsewhere their gradients go to the shared arena, to be summed
 * across nodes or updated on the backend's device with the rest. */
int st_sched_tail_applied(const st_sched_opts *o);

/* Start the workers and build their replicas; ps->tail_applied must be
 * st_sched_tail_applied(o). */
st_status st_sched_create(st_sched **out, const st_net *net, st_ps *ps,
                          const st_sched_opts *o, st_error *err);

/* Stop and join the workers, free everything. */
void st_sched_free(st_sched *s);

/* What one BSP iteration did (over every node in multi-node mode). */
typedef struct st_iteration {
    long iteration;
    int images;
    double loss;         /* summed over the batch */
    st_time_split time;  /* means over workers */
} st_iteration;

typedef void (*st_iteration_fn)(void *ctx, const st_iteration *it);

/* BSP iterations [first, last), the batches taken from q (filled by a
 * producer on another thread); this thread calls done() for each finished
 * iteration, in order. Stops at the first failure or a batch marked stop,
 * and at an iteration whose loss or gradient is not finite (ST_EDIVERGED,
 * naming the iteration and the first layer whose output or gradient went
 * non-finite; the weights are then not to be kept); then q is closed, so
 * the producer gives up. In multi-node mode a failure on another node
 * stops every node at the same iteration: ST_EPEER on the others. When
 * the stop flag (st_sched_opts) is set, the workers stop cleanly before
 * the next iteration they have not begun:
 * ST_OK, done() having been called for every iteration finished, and
 * st_sched_stop_reason says why. In multi-node mode the flags of every
 * node are summed with the iteration's control values, so every node
 * stops at the same iteration, the reason being SIGINT if any node had
 * SIGINT, else SIGTERM (else a request, st_sched_request_stop). A node
 * that does not answer within the cluster's timeout ends every node, except
 * where rank 0 said it would be alone: rank 0's alone_after (a test phase
 * or a snapshot after iteration last - 1) goes with that iteration's
 * control sum, and the others wait for it at the next one without a
 * timeout (the other ranks' alone_after is not used). */
st_status st_sched_run_bsp(st_sched *s, st_batchq *q, long first, long last,
                           int alone_after, st_iteration_fn done, void *ctx,
                           st_error *err);

/* After a run that returned ST_OK: the signal that stopped it early (the
 * stop flag's value, agreed over the nodes), ST_SCHED_STOP_REQUESTED for a
 * stop st_sched_request_stop asked (on any node, and no signal), or 0 if it
 * ran to its end. */
int st_sched_stop_reason(const st_sched *s);

/* The stop reason of a stop asked by st_sched_request_stop: not a signal. */
#define ST_SCHED_STOP_REQUESTED (-1)

/* Ask the workers to stop as the stop flag does, for the caller's own
 * reason (test-driven stopping): before the next iteration they have not
 * begun, in this run or the next. In multi-node mode the request travels
 * with the iteration's control values like a signal's, so a request on one
 * node (rank 0, which alone tests) stops every node at the same iteration;
 * a signal on any node takes precedence. The request stays for the
 * scheduler's life. Called by the scheduler thread. */
void st_sched_request_stop(st_sched *s);

/* The test set split over the workers; correct answers and loss summed. */
st_status st_sched_test(st_sched *s, const st_source *test, long *correct, double *loss,
                        st_error *err);

/* SSP / ASP: iterations [first, last) on every worker. progress(ctx, done,
 * loss, images) is called by the scheduler thread each time every worker
 * has finished `every` more iterations (done counts iterations all
 * finished; loss and images are summed since the previous call). A worker's
 * failure stops every worker; so does a non-finite loss or gradient of a
 * worker's shard, found before that worker's update (ST_EDIVERGED, naming
 * the iteration, the first layer whose output or gradient went non-finite
 * and the worker), as in BSP. When the stop flag is set, each worker stops
 * before its next iteration (an SSP worker waiting for slower ones stops
 * waiting); *finished gets the iterations every worker finished (last
 * unless stopped). */
typedef void (*st_progress_fn)(void *ctx, long done, double loss, long images);
st_status st_sched_run_async(st_sched *s, long first, long last, long every,
                             st_progress_fn progress, void *ctx, st_time_split *time,
                             long *finished, st_error *err);

/* --trace: the scheduler thread's track (its waits for the workers and
 * its reports of their iterations; the trainer records its test phases
 * and snapshots on it), or NULL. */
st_trace_track *st_sched_trace(const st_sched *s);

/* Worker 0's replica (layer timing, class scores). */
const st_replica *st_sched_replica(const st_sched *s, int worker);
int st_sched_workers(const st_sched *s);

#endif
