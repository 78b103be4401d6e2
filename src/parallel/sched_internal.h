/* What the scheduler's files share: scheduler.c (creating and freeing the
 * scheduler, the worker threads' main loop, the test phase), sched_bsp.c
 * (bulk-synchronous runs) and its aggregation strategies
 * (sched_aggregate.c), sched_async.c (SSP and ASP runs), what those three
 * share below them (sched_shared.c: they call one way), and the features
 * behind a handle of their own: hybrid parallelism (sched_mp.c) and
 * gradient accumulation (accumulate.c).
 * The run modes are split by file but not by data: one struct holds the
 * scheduler's state and one each worker's, and a worker thread created in
 * scheduler.c runs whichever command the scheduler thread hands it.
 *
 * Commands go out through the `start` barrier (the scheduler and all
 * workers) and complete at the `end` barrier; the scheduler thread writes
 * the command and its arguments into st_sched before `start`. */
#ifndef ST_SCHED_INTERNAL_H
#define ST_SCHED_INTERNAL_H

#include <pthread.h>

#include "base/barrier.h"
#include "parallel/bf16_weights.h"
#include "parallel/overlap.h"
#include "parallel/pipeline.h"
#include "parallel/scheduler.h"

enum sched_cmd { CMD_BSP, CMD_TEST, CMD_ASYNC, CMD_STOP };

#define MAX_SIZES 8
/* Iteration records kept; the workers are at most the batch ring's depth
 * ahead of the scheduler thread, which reads records after every batch. */
#define RECORDS 64

/* The shard sizes a worker is called with: its share of a full batch and
 * of the last batch of an epoch, and its chunks of the test set. */
typedef struct worker_sizes {
    int sizes[MAX_SIZES];
    int n_sizes;
    int cap;               /* the largest */
} worker_sizes;

/* Every worker gets at least one image of the batch (scheduler.c). */
st_status sched_check_threads(const st_sched_opts *o, st_error *err);

/* Worker id's of T (scheduler.c). */
void sched_worker_sizes(const st_sched_opts *o, int T, int id, worker_sizes *z);

/* Whether o's workers share one bf16 copy of the weights (bf16_weights.h):
 * in bf16, unless every kernel is to round its own (sched_shared.c). */
int sched_bf16_shared(const st_sched_opts *o);

/* Worker id's replica options; planning: for a replica only planned
 * (sched_plan.c), which must not measure kernels or record choices: the
 * backend's unmeasured implementations instead of "auto" (scheduler.c). */
st_replica_opts sched_replica_opts(const st_sched_opts *o, const worker_sizes *z, int id,
                                   int planning);

/* The bytes of what a worker of capacity cap allocates besides its replica
 * (scheduler.c, whose worker_init allocates them so). x, pixels and the
 * order are touched only by test phases and SSP / ASP runs. */
typedef struct worker_buffers {
    size_t x, labels, indices, pixels, order;
    size_t piece_grads;    /* subdivisions > 1: its pieces' gradient arena (accumulate.c) */
} worker_buffers;
worker_buffers sched_worker_buffers(const st_sched_opts *o, const st_net *net, int cap);

typedef struct st_worker {
    st_sched *s;
    int id;
    pthread_t thread;
    st_replica replica;
    worker_sizes sz;       /* every shard size it will see */
    st_records_buf chunk;  /* its own shard's records, cap of them (test, async) */
    st_order order;        /* async: its copy of the epoch order */
    long order_epoch;
    /* results of the last test / async command */
    double loss;
    long correct;
    st_time_split time;
    st_status status;
    st_error err;
    long patient_at;       /* across nodes: the iteration whose control sum waits
                              for rank 0 without a timeout (-1: none) */
    st_trace_track *trace; /* --trace: its track (its replica's too), or NULL */
    double pipe_wait;      /* --pipeline layer: seconds its forward waited for buckets, in
                              the iteration it computes */
    /* async progress, under s->clock_lock */
    long clock;            /* iterations it has finished */
    double clock_loss;
    long clock_images;
} st_worker;

/* One BSP iteration as each worker saw it: written before the barriers
 * that order it with its readers. */
typedef struct iter_record {
    double *loss;          /* [T] */
    int *images;           /* [T] */
    st_time_split *time;   /* [T] */
    st_status *status;     /* [T] */
    int *grad_bad;         /* [T] its reduced gradient slice is not finite */
    int stop_request;      /* sched_stop_flag as worker 0 saw it before `mid` */
    /* --pipeline layer: whether the iteration begins at all, decided once
     * for every worker by the first to reach it (compute_shard): 2 x the
     * iteration + 1 to skip it, 2 x the iteration to run it; -1 before */
    atomic_long begins;
    double nodes_loss;     /* multi-node: loss and images over every node */
    double nodes_images;
} iter_record;

/* Gradient accumulation (subdivisions=S > 1; accumulate.c): its state,
 * NULL when undivided. sched_accum_bytes: the extra gradient arena it
 * holds per worker, for the memory estimate. sched_accum_compute: forward
 * and backward of the shard in S pieces (one, with a NULL handle), the
 * pieces' gradients summed into grads, their losses into *loss. */
typedef struct sched_accum sched_accum;
size_t sched_accum_bytes(const st_sched_opts *o, const st_param_table *t);
st_status sched_accum_create(sched_accum **out, const st_sched_opts *o, const st_ps *ps,
                             st_error *err);
void sched_accum_free(sched_accum *a);
st_status sched_accum_compute(sched_accum *a, st_worker *w, const float *weights,
                              float *grads, const st_shard *shard, const st_step_info *info,
                              double *loss);

/* Hybrid parallelism (--parallel hybrid, --mp-group; sched_mp.c): the
 * model-parallel layers' barrier, buffers and updates in backward, and
 * across nodes this rank's blocks of their parameters, behind one handle;
 * NULL in a data-parallel run, where every function taking it does
 * nothing (or answers 0). */
typedef struct sched_mp sched_mp;

/* s's handle, NULL unless s->o.hybrid (which is BSP, without --overlap or
 * --pipeline); called once s's options, net, ps and T are set. */
st_status sched_mp_create(sched_mp **out, st_sched *s, st_error *err);
void sched_mp_free(sched_mp *m);

/* Across nodes (o->mp_group > 1, hybrid): the layers split over groups of
 * ranks, one worker each. */
int sched_mp_nodes(const st_sched_opts *o);

/* The samples of this process's batches, a whole one and the last of an
 * epoch (its part of it; across nodes, its group's), into sizes; returns
 * how many. */
int sched_mp_sizes(const st_sched_opts *o, int sizes[2]);

/* Worker id of T's group, its callbacks and ctx unset: its place among the
 * workers, or across nodes its rank's place in its group and the group's
 * collectives (which planning passes too, unused). */
st_mp_group sched_mp_group(const st_sched_opts *o, int T, int id);

/* A buffer the workers of a model-parallel layer share (st_mp_group). */
typedef struct mp_buffer {
    int layer, slot;
    size_t bytes;
    void *p;
} mp_buffer;

/* The buffer (layer, slot) of bytes in the table *bufs [*n]: the one there,
 * or a new one, zeroed, added; NULL when out of memory. */
void *sched_mp_buffer(mp_buffer **bufs, int *n, int layer, int slot, size_t bytes,
                      st_error *err);

/* Worker id's group and the batches' sample counts into its replica's
 * options (the group lives as long as m); called on the worker's thread. */
void sched_mp_replica(sched_mp *m, int id, st_replica_opts *ro);

/* Worker id computes iteration it: n samples in the node's batch, n_total
 * over every rank. */
void sched_mp_begin(sched_mp *m, int id, long it, int n, int n_total);

/* With ps->tail_applied, whether the model-parallel layers apply iteration
 * it is decided at their first update in backward: worker 0 undoes the
 * decision of the record's slot before their first barrier of it; after
 * `mid`, sched_mp_decided says whether it was taken and the stop flag it
 * saw (*stop; 0: they apply the iteration). */
void sched_mp_undecide(sched_mp *m, long it);
int sched_mp_decided(const sched_mp *m, long it, int *stop);

/* Whether a gradient worker id was to apply in backward (tail_applied) was
 * not finite in this iteration; *at (NULL: not wanted) the first one's
 * arena offset. */
int sched_mp_bad(const sched_mp *m, int id, size_t *at);

/* Across nodes (one worker, its slice the whole arena): slice's gradient
 * of this rank's blocks of the model-parallel tail summed over the ranks
 * holding the same blocks (the rest of the tail is never written and
 * stays zero); whether any rank's slice is bad (each sees only its blocks,
 * so the verdicts are summed over the ranks and every rank stops at the
 * same iteration); the update of the head and of this rank's blocks alone
 * (the rest of the tail is other ranks' to keep: its weights and state
 * here are stale and read by nobody, the trainer gathers the blocks where
 * the whole network is needed). A failing collective ends every rank. */
void sched_mp_sum_blocks(sched_mp *m, float *slice, st_error *err);
int sched_mp_agree_bad(sched_mp *m, int id, int bad, st_error *err);
void sched_mp_apply_parts(sched_mp *m, float lr, long it);

/* How a BSP run sums and applies each worker's slice (sched_aggregate.c:
 * fused on the host, on a backend's device, across nodes, after an
 * overlapped all-reduce, hybrid's): chosen once, at the scheduler's
 * creation. After the workers agree, worker r sums slice r of every
 * worker's gradient (reduce) and updates the weights of slice r (apply);
 * both return whether the slice is bad (not finite, or a device failed:
 * then w->status too), which leaves it unapplied. */
typedef struct bsp_slice {
    float *grad;      /* slice r of the summed gradient */
    size_t len;
    double comm;      /* seconds spent on the other nodes, so far */
    double gathered;  /* of them, the partitioned update's all-gather */
} bsp_slice;

typedef struct sched_aggregation {
    const char *name; /* the trace's */
    int (*reduce)(st_worker *w, long it, float scale, bsp_slice *sl);
    int (*apply)(st_worker *w, long it, int bad, bsp_slice *sl);
} sched_aggregation;

const sched_aggregation *sched_bsp_aggregation(const st_sched_opts *o, int overlap);

struct st_sched {
    st_sched_opts o;
    const st_net *net;
    st_ps *ps;
    int T;
    st_worker *w;
    st_barrier start, end;          /* the scheduler and the workers */
    st_barrier mid, iter_end;       /* the workers */
    int barriers_ready;
    st_overlap *overlap;            /* multi-node overlap, or NULL (with a pipeline: its
                                       buckets, owned by it) */
    st_pipeline *pipeline;          /* --pipeline layer, or NULL */
    st_trace_track *trace;          /* --trace: the scheduler thread's track, or NULL */
    const sched_aggregation *agg;   /* BSP: the slices' sum and update */
    st_bf16_weights *bf16;          /* the weights' bf16 copy (sched_bf16_shared), or NULL */
    st_bctx *comm_bctx;             /* the pipeline's communication thread's backend context
                                       for that copy, made on its first bucket, or NULL */
    sched_accum *accum;             /* subdivisions > 1, or NULL */
    sched_mp *mp;                   /* --parallel hybrid, or NULL */
    /* the command; written by the scheduler before `start` */
    int cmd;
    st_batchq *q;
    long first, last;
    int alone_after;                /* BSP, rank 0: st_sched_run_bsp's */
    const st_source *test;
    /* BSP progress */
    iter_record rec[RECORDS];
    atomic_long completed;          /* iterations finished (records readable) */
    atomic_int stopping;            /* the workers stop before `last` (a failure, a stop) */
    long stopped_at;                /* first iteration not finished, or -1 */
    char diverged[192];             /* --pipeline layer: the non-finite bucket it stopped at,
                                       or "" */
    st_status stop_status;
    int stop_reason;                /* the signal of a clean stop, ST_SCHED_STOP_REQUESTED,
                                       or 0 */
    atomic_int stop_requested;      /* st_sched_request_stop was called */
    int async_running;              /* async: workers still in the command; under
                                       clock_lock */
    /* clocks (async) and launch; under clock_lock */
    pthread_mutex_t clock_lock;
    pthread_cond_t clock_moved;
    int launch;                     /* 0 wait, 1 go, -1 cancelled */
};

/* Whether to stop now: the stop flag's signal, else ST_SCHED_STOP_REQUESTED
 * after st_sched_request_stop, else 0. */
static inline int sched_stop_flag(const st_sched *s)
{
    int sig = s->o.stop ? atomic_load(s->o.stop) : 0;
    if (sig)
        return sig;
    return atomic_load(&s->stop_requested) ? ST_SCHED_STOP_REQUESTED : 0;
}

/* The first worker failure, copied to err (sched_shared.c). */
st_status sched_collect_status(st_sched *s, st_error *err);

/* Which layer went non-finite first among workers r0 .. r1 - 1 (images[k]
 * the samples worker r0 + k ran): the outputs in forward order, then the
 * parameter gradients in backward order (a layer's gradient is computed
 * before those of the layers below it). The gradients at layer outputs
 * share buffers, so by now they are overwritten; the parameter gradients
 * are not. The description ("the output of layer 1 [connected] (line 10)
 * is not finite") goes to buf. */
void sched_first_nonfinite(const st_sched *s, int r0, int r1, const int *images, char *buf,
                           size_t len);

/* --trace: iteration it of a worker's track tr (NULL: nothing recorded),
 * from t[0] to t[n]: the event "iteration IT" (args: text_key's text, or
 * none) and its n phases, phase k from t[k] to t[k + 1], so that the
 * phases cover the iteration (sched_shared.c, as the three above). */
typedef struct sched_phase {
    const char *name, *cat;
} sched_phase;
void sched_trace_iteration(st_trace_track *tr, long it, const sched_phase *phases, int n,
                           const double *t, const char *text_key, const char *text);

/* Arena floats [b, e) of the weights converted into the bf16 copy by
 * worker w's backend (bf16_weights.h; nothing without a copy); a failure
 * is in w->err (sched_shared.c). */
st_status sched_bf16_refresh(st_worker *w, size_t b, size_t e);

/* The commands' loops, run by worker w's thread between `start` and `end`:
 * a BSP run (sched_bsp.c) and an SSP / ASP run (sched_async.c). */
void sched_worker_bsp(st_worker *w);
void sched_worker_async(st_worker *w);

#endif
