/* The scheduler and its worker threads (scheduler.h): creating and freeing
 * them, the worker threads' main loop, which runs the commands the
 * scheduler thread hands out (sched_internal.h), the test phase, and the
 * workers' sizes, options and buffers, which sched_plan.c also plans before the workers exist. The
 * training runs themselves are in sched_bsp.c (bulk-synchronous) and
 * sched_async.c (SSP and ASP), so each mode's protocol reads in one file,
 * and what they share with this file is sched_shared.c's, below all
 * three; hybrid parallelism's state is sched_mp.c's, behind its handle. */
#include "parallel/scheduler.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/memory.h"
#include "sched_internal.h"

int st_sched_workers(const st_sched *s)
{
    return s->T;
}

const st_replica *st_sched_replica(const st_sched *s, int worker)
{
    return &s->w[worker].replica;
}

static void add_size(worker_sizes *z, int n)
{
    for (int i = 0; i < z->n_sizes; i++)
        if (z->sizes[i] == n)
            return;
    if (n > 0 && z->n_sizes < MAX_SIZES)
        z->sizes[z->n_sizes++] = n;
    if (n > z->cap)
        z->cap = n;
}

/* The sizes of a shard of n run in S pieces (accumulate.c): they differ
 * by one at most, the larger first. */
static void add_pieces(worker_sizes *z, int n, int S)
{
    int first, count;
    S = S > 1 ? S : 1;
    st_shard_of(n, S, 0, &first, &count);
    add_size(z, count);
    st_shard_of(n, S, S - 1, &first, &count);
    add_size(z, count);
}

/* This node's part of an epoch's last batch when it is short, else 0. */
static int node_last_batch(const st_sched_opts *o)
{
    int ranks = st_cluster_size(o->cluster), first, node;
    int last = (int)(o->train->count % ((long)o->batch * ranks));
    if (!last)
        return 0;
    st_shard_of(last, ranks, st_cluster_rank(o->cluster), &first, &node);
    return node;
}

void sched_worker_sizes(const st_sched_opts *o, int T, int id, worker_sizes *z)
{
    int first, count, node = node_last_batch(o);
    memset(z, 0, sizeof *z);
    st_shard_of(o->batch, T, id, &first, &count);
    add_pieces(z, count, o->subdivisions);
    if (node) { /* the worker's part of this node's part of the last batch */
        st_shard_of(node, T, id, &first, &count);
        add_pieces(z, count, o->subdivisions);
    }
    int cap = z->cap;
    long tb = o->test_count * id / T, te = o->test_count * (id + 1) / T;
    if (te > tb && (te - tb) % cap)
        add_size(z, (int)((te - tb) % cap));
}

/* --pipeline layer's hook after a bucket's update (pipeline.h): its range
 * of the weights converted into the bf16 copy by the thread that applied
 * it, in that thread's backend context (a worker's own; the communication
 * thread's, across nodes, made on its first bucket), as the BSP workers
 * convert their slices: the same bits. */
static st_status pipeline_bf16(void *ctx, int worker, size_t lo, size_t hi, st_error *err)
{
    st_sched *s = ctx;
    const st_backend *be = s->o.backend;
    st_bctx *bctx = worker >= 0 ? s->w[worker].replica.bctx : s->comm_bctx;
    if (worker < 0 && !bctx && be->bf16_convert) {
        worker_sizes z = {0};
        st_replica_opts ro = sched_replica_opts(&s->o, &z, -1, 0);
        st_status st = be->ctx_create(&ro.backend, &s->comm_bctx, err);
        if (st != ST_OK)
            return st;
        bctx = s->comm_bctx;
    }
    return st_bf16_weights_refresh(s->bf16, be, bctx, s->ps->weights, lo, hi, err);
}

st_replica_opts sched_replica_opts(const st_sched_opts *o, const worker_sizes *z, int id,
                                   int planning)
{
    int measures = o->conv_impl && strcmp(o->conv_impl, "auto") == 0;
    st_replica_opts ro = {.n = z->cap, .batch_sizes = z->sizes, .n_batch_sizes = z->n_sizes,
                          .training = 1, .timing = o->timing,
                          .backend = {.intra_threads = o->intra, .worker = id,
                                      .conv_impl = planning && measures ? NULL : o->conv_impl,
                                      .machine_path = o->machine_path,
                                      .precision = o->precision,
                                      .weights_bf16 = sched_bf16_shared(o),
                                      .choices = planning ? NULL : o->choices}};
    return ro;
}

worker_buffers sched_worker_buffers(const st_sched_opts *o, const st_net *net, int cap)
{
    worker_buffers b = {
        .x = (size_t)cap * st_shape_count(net->input) * sizeof(float),
        .labels = (size_t)cap * sizeof(int),
        .indices = (size_t)cap * sizeof(long),
        .pixels = o->record_bytes,
        .order = o->sync != ST_SYNC_BSP ? (size_t)o->train->count * sizeof(long) : 0,
        .piece_grads = sched_accum_bytes(o, &net->params),
    };
    return b;
}

static void layer_done(void *ctx, int layer)
{
    st_worker *w = ctx;
    st_overlap_layer_done(w->s->overlap, w->id, layer);
}

static void layer_ready(void *ctx, int layer, long iteration)
{
    st_worker *w = ctx;
    w->pipe_wait += st_pipeline_layer_wait(w->s->pipeline, layer, iteration);
}

static st_status worker_init(st_worker *w)
{
    st_sched *s = w->s;
    sched_worker_sizes(&s->o, s->T, w->id, &w->sz);
    st_replica_opts ro = sched_replica_opts(&s->o, &w->sz, w->id, 0);
    sched_mp_replica(s->mp, w->id, &ro);
    st_status st = st_replica_init(&w->replica, s->net, s->o.backend, &ro, &w->err);
    if (st != ST_OK) {
        st_error_prefix(&w->err, "worker %d: ", w->id);
        return st;
    }
    w->replica.trace = w->trace;
    if (s->bf16)
        w->replica.weights_bf16 = st_bf16_weights_data(s->bf16);
    /* with subdivisions the pieces add up the gradient: its layers are
     * reported once, after the last (st_overlap_worker_end) */
    if (s->overlap && !s->accum)
        w->replica.layer_done = layer_done;
    if (s->pipeline)
        w->replica.layer_ready = layer_ready;
    w->replica.layer_done_ctx = w;
    if ((st = st_records_buf_init(&w->chunk, w->sz.cap, st_shape_count(s->net->input),
                                  s->o.record_bytes, &w->err)) != ST_OK)
        return st;
    w->order_epoch = -1;
    if (s->o.sync != ST_SYNC_BSP)
        return st_order_init(&w->order, s->o.train->count, s->o.seed, &w->err);
    return ST_OK;
}

void st_sched_request_stop(st_sched *s)
{
    atomic_store(&s->stop_requested, 1);
}

/* Worker r's part of the test set, in chunks of its capacity. */
static void worker_test(st_worker *w)
{
    st_sched *s = w->s;
    long b = s->test->count * w->id / s->T, e = s->test->count * (w->id + 1) / s->T;
    w->status = st_replica_test(&w->replica, s->ps->weights, s->test, s->o.transform, s->o.seed,
                                &w->chunk, b, e, &w->correct, &w->loss, &w->err);
}

/* The start of a command: worker r's part of the weights converted into
 * their bf16 copy (the weights may have changed since the last command:
 * bf16_weights.h), then the workers meet, the copy whole. A failure is the
 * worker's status, which fails the command. */
static void command_begin(st_worker *w)
{
    st_sched *s = w->s;
    if (!s->bf16)
        return;
    size_t b, e;
    st_ps_sub_range(0, s->ps->count, w->id, s->T, &b, &e);
    if (w->status == ST_OK)
        w->status = sched_bf16_refresh(w, b, e);
    st_barrier_wait(&s->mid);
}

static void *worker_main(void *arg)
{
    st_worker *w = arg;
    st_sched *s = w->s;
    /* Wait until every worker thread exists (or creating one failed). */
    if (!st_gate_wait(&s->clock_lock, &s->clock_moved, &s->launch))
        return NULL;
    const st_placement *pl = s->o.placement;
    if (pl && pl->bound &&
        (w->status = st_bind_self(pl->pus + w->id * pl->intra, pl->intra, &w->err)) != ST_OK)
        st_error_prefix(&w->err, "worker %d: ", w->id);
    if (w->status == ST_OK)
        w->status = worker_init(w);
    st_barrier_wait(&s->end); /* report set-up */
    for (;;) {
        st_barrier_wait(&s->start);
        int cmd = s->cmd;
        if (cmd == CMD_STOP)
            break;
        command_begin(w);
        if (cmd == CMD_BSP)
            sched_worker_bsp(w);
        else if (cmd == CMD_TEST && w->status == ST_OK)
            worker_test(w);
        else if (cmd == CMD_ASYNC)
            sched_worker_async(w);
        st_barrier_wait(&s->end);
    }
    return NULL;
}

void st_sched_free(st_sched *s)
{
    if (!s)
        return;
    if (s->launch > 0) {
        s->cmd = CMD_STOP;
        st_barrier_wait(&s->start);
    }
    for (int r = 0; r < s->T; r++) {
        st_worker *w = &s->w[r];
        if (s->launch != 0)
            pthread_join(w->thread, NULL);
        st_replica_free(&w->replica);
        st_order_free(&w->order);
        st_records_buf_free(&w->chunk);
    }
    for (int k = 0; k < RECORDS; k++) {
        free(s->rec[k].loss);
        free(s->rec[k].images);
        free(s->rec[k].time);
        free(s->rec[k].status);
        free(s->rec[k].grad_bad);
    }
    if (s->barriers_ready) {
        st_barrier_destroy(&s->start);
        st_barrier_destroy(&s->end);
        st_barrier_destroy(&s->mid);
        st_barrier_destroy(&s->iter_end);
        pthread_mutex_destroy(&s->clock_lock);
        pthread_cond_destroy(&s->clock_moved);
    }
    if (s->pipeline) /* its overlap is its own */
        st_pipeline_free(s->pipeline);
    else
        st_overlap_free(s->overlap);
    sched_accum_free(s->accum);
    st_bf16_weights_free(s->bf16);
    if (s->comm_bctx) /* the pipeline's thread is joined */
        s->o.backend->ctx_destroy(s->comm_bctx);
    sched_mp_free(s->mp);
    free(s->w);
    free(s);
}

st_status sched_check_threads(const st_sched_opts *o, st_error *err)
{
    if (o->threads < 1 || o->batch < o->threads)
        return st_fail(err, ST_EUSAGE, "-b %d with -t %d: every worker needs at least one "
                       "image of the batch (expected -b >= -t)", o->batch, o->threads);
    return ST_OK;
}

/* --trace: the scheduler's track and each worker's, before the threads
 * start. A worker's iteration: each layer's forward and backward in every
 * piece of its shard, its phases and what they hold (overlap.h's waits,
 * the all-reduces of its slice). */
enum { TRACK_EXTRA = 64, SCHED_PER_ITERATION = 8 };

static size_t worker_events(const st_net *net, const st_sched_opts *o)
{
    int pieces = o->subdivisions > 1 ? o->subdivisions : 1;
    return 2 * (size_t)net->n_layers * (size_t)pieces + 32;
}

static st_status add_tracks(st_sched *s, st_error *err)
{
    size_t per_iteration = worker_events(s->net, &s->o);
    st_status st = st_trace_track_add(s->o.trace, "scheduler", SCHED_PER_ITERATION,
                                      TRACK_EXTRA, &s->trace, err);
    for (int r = 0; st == ST_OK && r < s->T; r++) {
        char name[32];
        snprintf(name, sizeof name, "worker %d", r);
        st = st_trace_track_add(s->o.trace, name, per_iteration, TRACK_EXTRA, &s->w[r].trace,
                                err);
    }
    return st;
}

size_t st_sched_trace_bytes(const st_net *net, const st_sched_opts *o, long iterations)
{
    return st_trace_track_bytes(iterations, SCHED_PER_ITERATION, TRACK_EXTRA) +
           (size_t)o->threads * st_trace_track_bytes(iterations, worker_events(net, o),
                                                     TRACK_EXTRA);
}

st_status st_sched_create(st_sched **out, const st_net *net, st_ps *ps,
                          const st_sched_opts *o, st_error *err)
{
    *out = NULL;
    st_status checked = sched_check_threads(o, err);
    if (checked != ST_OK)
        return checked;
    st_sched *s = st_calloc(1, sizeof *s, "scheduler", err);
    if (!s)
        return ST_ENOMEM;
    s->o = *o;
    s->net = net;
    s->ps = ps;
    s->T = o->threads;
    s->w = st_calloc((size_t)s->T, sizeof *s->w, "workers", err);
    int ok = s->w != NULL;
    for (int k = 0; k < RECORDS && ok; k++) {
        iter_record *rec = &s->rec[k];
        atomic_init(&rec->begins, -1);
        rec->loss = st_calloc((size_t)s->T, sizeof *rec->loss, "iteration records", err);
        rec->images = st_calloc((size_t)s->T, sizeof *rec->images, "iteration records", err);
        rec->time = st_calloc((size_t)s->T, sizeof *rec->time, "iteration records", err);
        rec->status = st_calloc((size_t)s->T, sizeof *rec->status, "iteration records", err);
        rec->grad_bad = st_calloc((size_t)s->T, sizeof *rec->grad_bad, "iteration records",
                                  err);
        ok = rec->loss && rec->images && rec->time && rec->status && rec->grad_bad;
    }
    if (!ok) {
        st_sched_free(s);
        return ST_ENOMEM;
    }
    if (st_barrier_init(&s->start, s->T + 1) || st_barrier_init(&s->end, s->T + 1) ||
        st_barrier_init(&s->mid, s->T) || st_barrier_init(&s->iter_end, s->T) ||
        pthread_mutex_init(&s->clock_lock, NULL) || pthread_cond_init(&s->clock_moved, NULL)) {
        st_sched_free(s);
        return st_fail(err, ST_EINTERNAL, "cannot create the scheduler's barriers");
    }
    s->barriers_ready = 1;
    st_status mst = sched_mp_create(&s->mp, s, err);
    if (mst != ST_OK) {
        st_sched_free(s);
        return mst;
    }
    if (o->pipeline && (o->sync != ST_SYNC_BSP || o->part || o->backend->slice_reduce ||
                        o->backend->slice_apply)) {
        st_sched_free(s);
        return st_fail(err, ST_EINTERNAL, "--pipeline layer: bulk-synchronous, the whole "
                       "update on every rank, on the host");
    }
    st_status tst = add_tracks(s, err);
    if (tst != ST_OK) {
        st_sched_free(s);
        return tst;
    }
    if (ps->tail_applied != st_sched_tail_applied(o)) {
        st_sched_free(s);
        return st_fail(err, ST_EINTERNAL, "the parameter server's model-parallel tail is %s "
                       "by the layers, and the run asks otherwise",
                       ps->tail_applied ? "applied" : "not applied");
    }
    if (o->pipeline) { /* across nodes, the overlap's buckets and thread */
        st_status st = st_pipeline_create(&s->pipeline, net, ps, o->cluster, s->T, s->T,
                                          o->bucket_bytes, o->trace, o->solver,
                                          o->cluster ? 1 : o->intra,
                                          sched_bf16_shared(o) ? pipeline_bf16 : NULL, s, err);
        if (st != ST_OK) {
            st_sched_free(s);
            return st;
        }
        s->overlap = st_pipeline_overlap(s->pipeline);
    } else if (o->overlap && o->cluster) {
        st_status st = st_overlap_create(&s->overlap, net, ps, o->cluster, s->T, s->T,
                                         o->bucket_bytes, o->trace, NULL, NULL, err);
        if (st != ST_OK) {
            st_sched_free(s);
            return st;
        }
    }
    st_status ast = sched_accum_create(&s->accum, o, ps, err);
    if (ast == ST_OK && sched_bf16_shared(o))
        ast = st_bf16_weights_create(&s->bf16, ps->count, err);
    if (ast != ST_OK) {
        st_sched_free(s);
        return ast;
    }
    s->agg = sched_bsp_aggregation(o, s->overlap != NULL);
    int started = 0, create_err = 0;
    for (int r = 0; r < s->T; r++) {
        st_worker *w = &s->w[r];
        w->s = s;
        w->id = r;
        w->patient_at = -1;
        if ((create_err = pthread_create(&w->thread, NULL, worker_main, w)) != 0)
            break;
        started++;
    }
    st_gate_set(&s->clock_lock, &s->clock_moved, &s->launch, started == s->T ? 1 : -1);
    if (started < s->T) {
        for (int r = 0; r < started; r++)
            pthread_join(s->w[r].thread, NULL);
        s->launch = 0; /* joined already */
        st_sched_free(s);
        return st_fail(err, create_err == EAGAIN ? ST_ENOMEM : ST_EIO, "cannot create worker "
                       "threads: %d of %d started: %s", started, s->T, strerror(create_err));
    }
    st_barrier_wait(&s->end);
    st_status st = sched_collect_status(s, err);
    if (st != ST_OK) {
        st_sched_free(s);
        return st;
    }
    *out = s;
    return ST_OK;
}

st_trace_track *st_sched_trace(const st_sched *s)
{
    return s->trace;
}

int st_sched_stop_reason(const st_sched *s)
{
    return s->stop_reason;
}

static void run_command(st_sched *s, int cmd)
{
    s->cmd = cmd;
    st_barrier_wait(&s->start);
    st_barrier_wait(&s->end);
}

st_status st_sched_test(st_sched *s, const st_source *test, long *correct, double *loss,
                        st_error *err)
{
    s->test = test;
    run_command(s, CMD_TEST);
    st_status st = sched_collect_status(s, err);
    if (st != ST_OK)
        return st;
    *correct = 0;
    *loss = 0.0;
    for (int r = 0; r < s->T; r++) {
        *correct += s->w[r].correct;
        *loss += s->w[r].loss;
    }
    return ST_OK;
}
