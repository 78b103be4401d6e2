/* The scheduler and its worker threads; see scheduler.h.
 *
 * Commands go out through the `start` barrier (the scheduler and all
 * workers) and complete at the `end` barrier. A BSP run is one command: the
 * workers loop over its iterations on their own, meeting at `mid` (after
 * backward) and `iter_end` (after the update) only among themselves, and
 * leave a record per iteration in a ring the scheduler thread reads. */
#include "parallel/scheduler.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/barrier.h"
#include "base/clock.h"
#include "parallel/overlap.h"

enum sched_cmd { CMD_BSP, CMD_TEST, CMD_ASYNC, CMD_STOP };

#define MAX_SIZES 8
/* Iteration records kept; the workers are at most the batch ring's depth
 * ahead of the scheduler thread, which reads records after every batch. */
#define RECORDS 64

typedef struct st_worker {
    st_sched *s;
    int id;
    pthread_t thread;
    st_replica replica;
    int sizes[MAX_SIZES];  /* every shard size it will see */
    int n_sizes, cap;
    float *x;              /* its own shard buffer [cap, C, H, W] (test, async) */
    int *labels;
    long *indices;
    unsigned char *pixels; /* one record */
    st_order order;        /* async: its copy of the epoch order */
    long order_epoch;
    /* results of the last test / async command */
    double loss;
    long correct;
    st_time_split time;
    st_status status;
    st_error err;
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
    int stop_request;      /* the stop flag as worker 0 saw it before `mid` */
    double nodes_loss;     /* multi-node: loss and images over every node */
    double nodes_images;
} iter_record;

struct st_sched {
    st_sched_opts o;
    const st_net *net;
    st_ps *ps;
    int T;
    st_worker *w;
    st_barrier start, end;          /* the scheduler and the workers */
    st_barrier mid, iter_end;       /* the workers */
    int barriers_ready;
    st_overlap *overlap;            /* multi-node overlap, or NULL */
    /* the command; written by the scheduler before `start` */
    int cmd;
    st_batchq *q;
    long first, last;
    const st_source *test;
    /* BSP progress */
    iter_record rec[RECORDS];
    atomic_long completed;          /* iterations finished (records readable) */
    atomic_int stopping;            /* the workers stop before `last` (a failure, a stop) */
    long stopped_at;                /* first iteration not finished, or -1 */
    st_status stop_status;
    int stop_reason;                /* the signal of a clean stop, or 0 */
    int async_running;              /* async: workers still in the command; under
                                       clock_lock */
    /* clocks (async) and launch; under clock_lock */
    pthread_mutex_t clock_lock;
    pthread_cond_t clock_moved;
    int launch;                     /* 0 wait, 1 go, -1 cancelled */
};

int st_sched_workers(const st_sched *s)
{
    return s->T;
}

const st_replica *st_sched_replica(const st_sched *s, int worker)
{
    return &s->w[worker].replica;
}

static void add_size(st_worker *w, int n)
{
    for (int i = 0; i < w->n_sizes; i++)
        if (w->sizes[i] == n)
            return;
    if (n > 0 && w->n_sizes < MAX_SIZES)
        w->sizes[w->n_sizes++] = n;
    if (n > w->cap)
        w->cap = n;
}

/* The shard sizes worker r will be called with: its share of a full batch
 * and of the last batch of an epoch, and its chunks of the test set. */
static void plan_sizes(st_sched *s, st_worker *w)
{
    int first, count, B = s->o.batch, T = s->T, node;
    int ranks = st_cluster_size(s->o.cluster), rank = st_cluster_rank(s->o.cluster);
    st_shard_of(B, T, w->id, &first, &count);
    add_size(w, count);
    int last = (int)(s->o.train->count % ((long)B * ranks));
    if (last) { /* this node's part of the last batch, then the worker's */
        st_shard_of(last, ranks, rank, &first, &node);
        st_shard_of(node, T, w->id, &first, &count);
        add_size(w, count);
    }
    int cap = w->cap;
    long tb = s->o.test_count * w->id / T, te = s->o.test_count * (w->id + 1) / T;
    if (te > tb && (te - tb) % cap)
        add_size(w, (int)((te - tb) % cap));
}

static void layer_done(void *ctx, int layer)
{
    st_worker *w = ctx;
    st_overlap_layer_done(w->s->overlap, w->id, layer);
}

static st_status worker_init(st_worker *w)
{
    st_sched *s = w->s;
    plan_sizes(s, w);
    st_replica_opts ro = {.n = w->cap, .batch_sizes = w->sizes, .n_batch_sizes = w->n_sizes,
                          .training = 1, .timing = s->o.timing,
                          .backend = {.intra_threads = s->o.intra, .worker = w->id,
                                      .conv_impl = s->o.conv_impl,
                                      .choices = s->o.choices}};
    st_status st = st_replica_init(&w->replica, s->net, s->o.backend, &ro, &w->err);
    if (st != ST_OK) {
        st_error_prefix(&w->err, "worker %d: ", w->id);
        return st;
    }
    if (s->overlap) {
        w->replica.layer_done = layer_done;
        w->replica.layer_done_ctx = w;
    }
    size_t per = st_shape_count(s->net->input);
    w->x = st_calloc((size_t)w->cap * per, sizeof *w->x, "worker input", &w->err);
    w->labels = st_calloc((size_t)w->cap, sizeof *w->labels, "worker labels", &w->err);
    w->indices = st_calloc((size_t)w->cap, sizeof *w->indices, "worker indices", &w->err);
    w->pixels = st_calloc(s->o.record_bytes, 1, "worker record", &w->err);
    if (!w->x || !w->labels || !w->indices || !w->pixels)
        return ST_ENOMEM;
    w->order_epoch = -1;
    if (s->o.sync != ST_SYNC_BSP)
        return st_order_init(&w->order, s->o.train->count, s->o.seed, &w->err);
    return ST_OK;
}

/* Forward and backward of this worker's shard of a BSP batch; a worker
 * without samples contributes a zero gradient. */
static st_status bsp_compute(st_worker *w, const st_batch_slot *b, long it, double *loss,
                             int *images)
{
    st_sched *s = w->s;
    int first, count;
    st_shard_of(b->n, s->T, w->id, &first, &count);
    *loss = 0.0;
    *images = count;
    if (count == 0) {
        memset(s->ps->grads[w->id], 0, s->ps->count * sizeof(float));
        return ST_OK;
    }
    size_t per = st_shape_count(s->net->input);
    st_shard shard = {count, b->x + (size_t)first * per, b->labels + first, b->sample0 + first};
    st_step_info info = {1, s->o.seed, it};
    st_status st = st_replica_forward(&w->replica, s->ps->weights, &shard, &info, loss, &w->err);
    if (st == ST_OK)
        st = st_replica_backward(&w->replica, s->ps->weights, s->ps->grads[w->id], &shard,
                                 &info, NULL, &w->err);
    return st;
}

/* Which layer went non-finite first among workers r0 .. r1 - 1 (images[k]
 * the samples worker r0 + k ran): the outputs in forward order, then the
 * parameter gradients in backward order (a layer's gradient is computed
 * before those of the layers below it). The gradients at layer outputs
 * share buffers, so by now they are overwritten; the parameter gradients
 * are not. */
static void first_nonfinite(const st_sched *s, int r0, int r1, const int *images, char *buf,
                            size_t len)
{
    const st_net *net = s->net;
    char layer[128];
    for (int i = 0; i < net->n_layers; i++)
        for (int r = r0; r < r1; r++) {
            const st_replica *rep = &s->w[r].replica;
            size_t per = rep->out_bytes[i] / (size_t)rep->n / sizeof(float);
            if (!st_all_finite(st_replica_output(rep, i), per * (size_t)images[r - r0])) {
                snprintf(buf, len, "the output of %s is not finite",
                         st_net_layer_label(net, i, layer, sizeof layer));
                return;
            }
        }
    const st_param_table *t = &net->params;
    for (int i = net->n_layers - 1; i >= 0; i--)
        for (int k = 0; k < t->n; k++) {
            const st_param *p = &t->p[k];
            for (int r = r0; r < r1 && p->layer == i; r++)
                if (!st_all_finite(s->ps->grads[r] + p->offset, p->count)) {
                    snprintf(buf, len, "the gradient of %s, %s, is not finite", p->name,
                             st_net_layer_label(net, i, layer, sizeof layer));
                    return;
                }
        }
    snprintf(buf, len, "the loss is not finite");
}

/* Worker w's slice of the sliced aggregation and of the solver update: on
 * the backend's device when it has one for them (the cpe backend's core
 * group), else on the host's intra-op threads. */
static st_status slice_reduce(st_worker *w, float scale)
{
    st_sched *s = w->s;
    const st_backend *be = w->replica.backend;
    if (!be->slice_reduce) {
        st_ps_reduce(s->ps, w->id, scale, s->o.intra);
        return ST_OK;
    }
    return be->slice_reduce(w->replica.bctx, s->ps->grads, s->ps->n_workers,
                            s->ps->slice[w->id], s->ps->slice[w->id + 1], scale, &w->err);
}

static st_status slice_apply(st_worker *w, long it)
{
    st_sched *s = w->s;
    const st_backend *be = w->replica.backend;
    float lr = st_lr_at(&s->o.solver->lr, it);
    if (!be->slice_apply) {
        st_ps_apply(s->ps, w->id, s->o.solver, lr, it, s->o.intra);
        return ST_OK;
    }
    st_solver_step step = {s->o.solver, s->ps->table, lr, it};
    return be->slice_apply(w->replica.bctx, &step, s->ps->slice[w->id], s->ps->slice[w->id + 1],
                           s->ps->weights, s->ps->state, s->ps->count, s->ps->grads[0], &w->err);
}

/* The stop flag's value now: 0, or the signal asking to stop. */
static int stop_flag(const st_sched *s)
{
    return s->o.stop ? atomic_load(s->o.stop) : 0;
}

/* Multi-node: sum this node's view of iteration it over the nodes, on
 * worker r's communicator (every worker of a node passes the same values
 * and gets the same sums): failures, stop requests (counted per signal:
 * SIGINT, and any other), loss, images. A failing MPI call or a peer that
 * does not answer within the timeout leaves the others waiting, so it
 * aborts every rank; the first iteration of a command waits patiently on
 * ranks other than 0, which may be testing or writing a snapshot. */
static void sum_over_nodes(st_worker *w, long it, iter_record *rec, int *failed, int *stop,
                           double *loss, int *images)
{
    st_sched *s = w->s;
    double v[5] = {*failed, *stop == SIGINT, *stop != 0 && *stop != SIGINT, *loss, *images};
    int patient = it == s->first && st_cluster_rank(s->o.cluster) != 0;
    if (st_cluster_control(s->o.cluster, w->id, v, 5, patient, &w->err) != ST_OK) {
        st_error_prefix(&w->err, "iteration %ld: ", it);
        st_cluster_abort(s->o.cluster, &w->err);
    }
    *failed = v[0] > 0;
    *stop = v[1] > 0 ? SIGINT : v[2] > 0 ? (*stop ? *stop : SIGTERM) : 0;
    *loss = v[3];
    *images = (int)v[4];
    if (w->id == 0) {
        rec->nodes_loss = v[3];
        rec->nodes_images = v[4];
    }
}

/* Stop after the workers' first failure or stop batch, before anyone
 * updates a slice; called by every worker with the same arguments. */
static void stop_workers(st_sched *s, int r, long it, st_status why, int reason)
{
    if (r != 0)
        return;
    s->stopped_at = it;
    s->stop_status = why;
    s->stop_reason = reason;
    atomic_store(&s->stopping, 1);
    st_batchq_close(s->q);
}

/* Worker r's BSP loop over [first, last). After `mid` every worker sees the
 * same records, so all take the same decision to stop (a failure, a stop
 * batch, a non-finite loss, a stop request) before anyone updates a slice.
 * A non-finite gradient is seen only after the reduction, each worker
 * checking its slice and not applying it if so; the workers then stop
 * together after `iter_end`, the iteration unfinished (the weights stay
 * finite, but other slices were updated: they are not to be kept). */
static void worker_bsp(st_worker *w)
{
    st_sched *s = w->s;
    int r = w->id;
    for (long it = s->first; it < s->last; it++) {
        iter_record *rec = &s->rec[it % RECORDS];
        double t0 = st_now();
        const st_batch_slot *b = st_batchq_wait(s->q, it);
        double t1 = st_now();
        if (s->overlap && r == 0)
            st_overlap_begin(s->overlap, it, 1.0f / (float)b->n_total);
        st_status st = b->stop ? ST_OK : bsp_compute(w, b, it, &rec->loss[r], &rec->images[r]);
        if (s->overlap)
            st_overlap_worker_end(s->overlap, r);
        rec->status[r] = st;
        if (st != ST_OK)
            w->status = st;
        if (r == 0)
            rec->stop_request = stop_flag(s);
        double t2 = st_now();
        st_barrier_wait(&s->mid);
        double t3 = st_now();
        double loss = 0.0;
        int failed = b->stop, images = 0, stop = rec->stop_request;
        for (int k = 0; k < s->T; k++) {
            loss += rec->loss[k];
            images += rec->images[k];
            failed |= rec->status[k] != ST_OK;
        }
        int failed_here = failed;
        if (s->o.cluster)
            sum_over_nodes(w, it, rec, &failed, &stop, &loss, &images);
        if (s->overlap) /* every rank finishes the iteration's buckets, even to stop */
            st_overlap_wait(s->overlap, it);
        double comm = s->o.cluster ? st_now() - t3 : 0.0;
        if (failed || !isfinite(loss) || stop) {
            stop_workers(s, r, it, failed ? (failed_here ? ST_EINTERNAL : ST_EPEER)
                                          : stop ? ST_OK : ST_EDIVERGED, stop);
            break;
        }
        float *slice = s->ps->grads[0] + s->ps->slice[r];
        size_t slice_len = s->ps->slice[r + 1] - s->ps->slice[r];
        st_status dst = ST_OK;
        const st_backend *be = w->replica.backend;
        /* One node, on the host: sum, check and update in one pass over
         * memory (its time counts as aggregation). */
        int fused = !s->overlap && !s->o.cluster && !be->slice_reduce && !be->slice_apply;
        if (fused)
            rec->grad_bad[r] = !st_ps_reduce_apply(s->ps, r, 1.0f / (float)images, s->o.solver,
                                                   st_lr_at(&s->o.solver->lr, it), it,
                                                   s->o.intra);
        else if (!s->overlap)
            dst = slice_reduce(w, 1.0f / (float)images);
        if (s->o.cluster && !s->overlap) {
            double c0 = st_now();
            if (st_cluster_allreduce(s->o.cluster, r, it, slice, slice_len, &w->err) != ST_OK)
                st_cluster_abort(s->o.cluster, &w->err);
            comm += st_now() - c0;
        }
        if (!fused)
            rec->grad_bad[r] = dst != ST_OK || !st_all_finite(slice, slice_len);
        double t4 = st_now();
        if (!fused && dst == ST_OK && !rec->grad_bad[r]) /* a non-finite slice is not applied */
            dst = slice_apply(w, it);
        if (dst != ST_OK) { /* a device failure: stop as after a bad gradient */
            w->status = dst;
            rec->grad_bad[r] = 1;
        }
        if (w->replica.backend->iteration_end)
            w->replica.backend->iteration_end(w->replica.bctx, it);
        double t5 = st_now();
        rec->time[r] = (st_time_split){t1 - t0, t2 - t1, t3 - t2, t4 - t3 - comm, t5 - t4, comm};
        st_barrier_wait(&s->iter_end);
        int grad_bad = 0;
        for (int k = 0; k < s->T; k++)
            grad_bad |= rec->grad_bad[k];
        if (grad_bad) {
            stop_workers(s, r, it, ST_EDIVERGED, 0);
            break;
        }
        if (r == 0) {
            st_batchq_release(s->q, it);
            pthread_mutex_lock(&s->clock_lock);
            atomic_store(&s->completed, it + 1);
            pthread_cond_broadcast(&s->clock_moved);
            pthread_mutex_unlock(&s->clock_lock);
        }
    }
    if (r == 0) { /* wake the scheduler if it waits for more */
        pthread_mutex_lock(&s->clock_lock);
        pthread_cond_broadcast(&s->clock_moved);
        pthread_mutex_unlock(&s->clock_lock);
    }
}

/* Worker r's part of the test set, in chunks of its capacity. */
static void worker_test(st_worker *w)
{
    st_sched *s = w->s;
    long b = s->test->count * w->id / s->T, e = s->test->count * (w->id + 1) / s->T;
    int classes = s->net->classes;
    st_step_info info = {0, s->o.seed, 0};
    w->correct = 0;
    w->loss = 0.0;
    for (long at = b; at < e && w->status == ST_OK; at += w->cap) {
        int n = (int)(e - at < w->cap ? e - at : w->cap);
        for (int i = 0; i < n; i++)
            w->indices[i] = at + i;
        double loss = 0.0;
        st_shard shard = {n, w->x, w->labels, at};
        w->status = st_source_batch(s->test, s->o.transform, w->indices, n, w->x, w->labels, 0,
                                    at, w->pixels, &w->err);
        if (w->status == ST_OK)
            w->status = st_replica_forward(&w->replica, s->ps->weights, &shard, &info, &loss,
                                           &w->err);
        if (w->status != ST_OK)
            break;
        w->loss += loss;
        const float *out = st_replica_output(&w->replica, s->net->output_layer);
        for (int i = 0; i < n; i++) {
            const float *o = out + (size_t)i * classes;
            int best = 0;
            for (int c = 1; c < classes; c++)
                if (o[c] > o[best])
                    best = c;
            w->correct += best == w->labels[i];
        }
    }
}

static long min_clock(const st_sched *s)
{
    long m = s->w[0].clock;
    for (int r = 1; r < s->T; r++)
        m = s->w[r].clock < m ? s->w[r].clock : m;
    return m;
}

static void finish_async_iteration(st_worker *w, long clock, double loss, int images)
{
    st_sched *s = w->s;
    pthread_mutex_lock(&s->clock_lock);
    w->clock = clock;
    w->clock_loss += loss;
    w->clock_images += images;
    pthread_cond_broadcast(&s->clock_moved);
    pthread_mutex_unlock(&s->clock_lock);
}

/* An async worker's shard of iteration it went non-finite: which layer. */
static st_status async_diverged(st_worker *w, long it, int images)
{
    char where[256];
    first_nonfinite(w->s, w->id, w->id + 1, &images, where, sizeof where);
    return st_fail(&w->err, ST_EDIVERGED, "iteration %ld: training diverged: %s on worker %d "
                   "(try a lower learning_rate)", it, where, w->id);
}

/* SSP / ASP: worker r's shard of every iteration, at its own pace. A
 * failure, a non-finite loss or a non-finite gradient (checked before the
 * update, so the weights stay finite) stops every worker: the others at
 * their next iteration. */
static void worker_async(st_worker *w)
{
    st_sched *s = w->s;
    const st_source *src = s->o.train;
    int B = s->o.batch, r = w->id;
    long ipe = (src->count + B - 1) / B;
    memset(&w->time, 0, sizeof w->time);
    for (long i = s->first; i < s->last && !atomic_load(&s->stopping) && !stop_flag(s); i++) {
        double t0 = st_now();
        if (s->o.sync == ST_SYNC_SSP) {
            pthread_mutex_lock(&s->clock_lock);
            while (i - s->o.staleness > min_clock(s) && !atomic_load(&s->stopping) &&
                   !stop_flag(s))
                pthread_cond_wait(&s->clock_moved, &s->clock_lock);
            pthread_mutex_unlock(&s->clock_lock);
            if (atomic_load(&s->stopping) || stop_flag(s))
                break;
        }
        double t1 = st_now();
        long epoch = i / ipe, b0 = (i % ipe) * B;
        if (epoch != w->order_epoch) {
            st_order_shuffle(&w->order, epoch);
            w->order_epoch = epoch;
        }
        int n = (int)(src->count - b0 < B ? src->count - b0 : B), first, count;
        st_shard_of(n, s->T, r, &first, &count);
        double loss = 0.0;
        if (count > 0) {
            st_shard shard = {count, w->x, w->labels, epoch * src->count + b0 + first};
            st_step_info info = {1, s->o.seed, i};
            w->status = st_source_batch(src, s->o.transform, w->order.perm + b0 + first, count,
                                        w->x, w->labels, 1, shard.sample0, w->pixels, &w->err);
            if (w->status == ST_OK)
                w->status = st_replica_forward(&w->replica, s->ps->weights, &shard, &info,
                                               &loss, &w->err);
            if (w->status == ST_OK && !isfinite(loss))
                w->status = async_diverged(w, i, count);
            if (w->status == ST_OK)
                w->status = st_replica_backward(&w->replica, s->ps->weights, s->ps->grads[r],
                                                &shard, &info, NULL, &w->err);
            if (w->status == ST_OK && !st_all_finite(s->ps->grads[r], s->ps->count))
                w->status = async_diverged(w, i, count);
        }
        double t2 = st_now();
        /* divided by the whole batch: the T updates of an iteration add up
         * to the BSP step */
        if (count > 0 && w->status == ST_OK)
            st_ps_apply_own(s->ps, r, 1.0f / (float)n, s->o.solver,
                            st_lr_at(&s->o.solver->lr, i), i, s->o.intra);
        double t3 = st_now();
        w->time.barrier += t1 - t0;
        w->time.compute += t2 - t1;
        w->time.update += t3 - t2;
        if (w->status != ST_OK) {
            atomic_store(&s->stopping, 1);
            break;
        }
        finish_async_iteration(w, i + 1, loss, count);
    }
    /* a worker stopping early (a failure, the stop flag) wakes those waiting
     * for its clock, and the scheduler waiting for all */
    pthread_mutex_lock(&s->clock_lock);
    s->async_running--;
    pthread_cond_broadcast(&s->clock_moved);
    pthread_mutex_unlock(&s->clock_lock);
}

static void *worker_main(void *arg)
{
    st_worker *w = arg;
    st_sched *s = w->s;
    /* Wait until every worker thread exists (or creating one failed). */
    pthread_mutex_lock(&s->clock_lock);
    while (s->launch == 0)
        pthread_cond_wait(&s->clock_moved, &s->clock_lock);
    int go = s->launch > 0;
    pthread_mutex_unlock(&s->clock_lock);
    if (!go)
        return NULL;
    w->status = worker_init(w);
    st_barrier_wait(&s->end); /* report set-up */
    for (;;) {
        st_barrier_wait(&s->start);
        int cmd = s->cmd;
        if (cmd == CMD_STOP)
            break;
        if (cmd == CMD_BSP)
            worker_bsp(w);
        else if (cmd == CMD_TEST && w->status == ST_OK)
            worker_test(w);
        else if (cmd == CMD_ASYNC)
            worker_async(w);
        st_barrier_wait(&s->end);
    }
    return NULL;
}

/* The first worker failure, copied to err. */
static st_status collect_status(st_sched *s, st_error *err)
{
    for (int r = 0; r < s->T; r++)
        if (s->w[r].status != ST_OK) {
            st_fail(err, s->w[r].status, "%s", s->w[r].err.msg);
            return s->w[r].status;
        }
    return ST_OK;
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
        free(w->x);
        free(w->labels);
        free(w->indices);
        free(w->pixels);
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
    st_overlap_free(s->overlap);
    free(s->w);
    free(s);
}

st_status st_sched_create(st_sched **out, const st_net *net, st_ps *ps,
                          const st_sched_opts *o, st_error *err)
{
    *out = NULL;
    if (o->threads < 1 || o->batch < o->threads)
        return st_fail(err, ST_EUSAGE, "-b %d with -t %d: every worker needs at least one "
                       "image of the batch (expected -b >= -t)", o->batch, o->threads);
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
    if (o->overlap && o->cluster) {
        st_status st = st_overlap_create(&s->overlap, net, ps, o->cluster, s->T, s->T,
                                         o->bucket_bytes, err);
        if (st != ST_OK) {
            st_sched_free(s);
            return st;
        }
    }
    int started = 0, create_err = 0;
    for (int r = 0; r < s->T; r++) {
        st_worker *w = &s->w[r];
        w->s = s;
        w->id = r;
        if ((create_err = pthread_create(&w->thread, NULL, worker_main, w)) != 0)
            break;
        started++;
    }
    pthread_mutex_lock(&s->clock_lock);
    s->launch = started == s->T ? 1 : -1;
    pthread_cond_broadcast(&s->clock_moved);
    pthread_mutex_unlock(&s->clock_lock);
    if (started < s->T) {
        for (int r = 0; r < started; r++)
            pthread_join(s->w[r].thread, NULL);
        s->launch = 0; /* joined already */
        st_sched_free(s);
        return st_fail(err, create_err == EAGAIN ? ST_ENOMEM : ST_EIO, "cannot create worker "
                       "threads: %d of %d started: %s", started, s->T, strerror(create_err));
    }
    st_barrier_wait(&s->end);
    st_status st = collect_status(s, err);
    if (st != ST_OK) {
        st_sched_free(s);
        return st;
    }
    *out = s;
    return ST_OK;
}

/* Report finished iterations [*reported, completed) through done(). */
static void report(st_sched *s, long *reported, st_iteration_fn done, void *ctx)
{
    long completed = atomic_load(&s->completed);
    for (; *reported < completed; (*reported)++) {
        const iter_record *rec = &s->rec[*reported % RECORDS];
        st_iteration it = {.iteration = *reported};
        for (int r = 0; r < s->T; r++) {
            it.images += rec->images[r];
            it.loss += rec->loss[r];
            it.time.data += rec->time[r].data / s->T;
            it.time.compute += rec->time[r].compute / s->T;
            it.time.barrier += rec->time[r].barrier / s->T;
            it.time.aggregate += rec->time[r].aggregate / s->T;
            it.time.update += rec->time[r].update / s->T;
            it.time.communicate += rec->time[r].communicate / s->T;
        }
        if (s->o.cluster) { /* the iteration over every node, not this one's share */
            it.images = (int)rec->nodes_images;
            it.loss = rec->nodes_loss;
        }
        done(ctx, &it);
    }
}

static int bsp_running(st_sched *s, long last)
{
    return atomic_load(&s->completed) < last && !atomic_load(&s->stopping);
}

st_status st_sched_run_bsp(st_sched *s, st_batchq *q, long first, long last,
                           st_iteration_fn done, void *ctx, st_error *err)
{
    if (q->depth + 2 > RECORDS)
        return st_fail(err, ST_EINTERNAL, "batch ring deeper than the iteration records");
    s->q = q;
    s->first = first;
    s->last = last;
    s->stopped_at = -1;
    atomic_store(&s->stopping, 0);
    s->stop_reason = 0;
    atomic_store(&s->completed, first);
    if (s->overlap)
        st_overlap_start(s->overlap, first);
    s->cmd = CMD_BSP;
    st_barrier_wait(&s->start);
    long reported = first;
    while (bsp_running(s, last)) {
        pthread_mutex_lock(&s->clock_lock);
        while (bsp_running(s, last) && atomic_load(&s->completed) == reported)
            pthread_cond_wait(&s->clock_moved, &s->clock_lock);
        pthread_mutex_unlock(&s->clock_lock);
        report(s, &reported, done, ctx);
    }
    st_barrier_wait(&s->end);
    report(s, &reported, done, ctx);
    if (s->stopped_at < 0 || s->stop_status == ST_OK)
        return ST_OK;
    st_status wst = collect_status(s, err);
    if (wst != ST_OK)
        return wst;
    if (s->stop_status == ST_EDIVERGED) {
        char where[256];
        first_nonfinite(s, 0, s->T, s->rec[s->stopped_at % RECORDS].images, where,
                        sizeof where);
        return st_fail(err, ST_EDIVERGED, "iteration %ld: training diverged: %s (try a lower "
                       "learning_rate)", s->stopped_at, where);
    }
    if (s->stop_status == ST_EPEER)
        return st_fail(err, ST_EPEER, "iteration %ld: another rank failed", s->stopped_at);
    return st_fail(err, ST_EIO, "iteration %ld: the input pipeline stopped", s->stopped_at);
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
    st_status st = collect_status(s, err);
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

st_status st_sched_run_async(st_sched *s, long first, long last, long every,
                             st_progress_fn progress, void *ctx, st_time_split *time,
                             long *finished, st_error *err)
{
    s->first = first;
    s->last = last;
    atomic_store(&s->stopping, 0);
    s->stop_reason = 0;
    s->async_running = s->T;
    for (int r = 0; r < s->T; r++) {
        s->w[r].clock = first;
        s->w[r].clock_loss = 0.0;
        s->w[r].clock_images = 0;
    }
    s->cmd = CMD_ASYNC;
    st_barrier_wait(&s->start);
    for (long target = first + every; progress && first < last; target += every) {
        if (target > last)
            target = last;
        double loss = 0.0;
        long images = 0;
        pthread_mutex_lock(&s->clock_lock);
        while (min_clock(s) < target && s->async_running > 0)
            pthread_cond_wait(&s->clock_moved, &s->clock_lock);
        /* stopped early: a worker failed, or the stop flag */
        int stopped = atomic_load(&s->stopping) || min_clock(s) < target;
        for (int r = 0; !stopped && r < s->T; r++) {
            loss += s->w[r].clock_loss;
            images += s->w[r].clock_images;
            s->w[r].clock_loss = 0.0;
            s->w[r].clock_images = 0;
        }
        pthread_mutex_unlock(&s->clock_lock);
        if (stopped)
            break;
        progress(ctx, target, loss, images);
        if (target == last)
            break;
    }
    st_barrier_wait(&s->end);
    memset(time, 0, sizeof *time);
    for (int r = 0; r < s->T; r++) {
        time->compute += s->w[r].time.compute / s->T;
        time->barrier += s->w[r].time.barrier / s->T;
        time->update += s->w[r].time.update / s->T;
    }
    *finished = min_clock(s);
    if (*finished < last)
        s->stop_reason = stop_flag(s);
    return collect_status(s, err);
}
