/* The prefetch thread and its readers; see prefetch.h. */
#include "data/prefetch.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "base/barrier.h"
#include "base/clock.h"

struct st_prefetch {
    st_prefetch_opts o;
    st_order order;
    long order_epoch, iters_per_epoch;
    int ranks;              /* nodes sharing each batch (1: this one alone) */
    /* readers: the filling thread is reader 0, helpers 1 .. n_readers-1 */
    int n_readers;
    pthread_t *helpers;
    int helpers_started;
    pthread_mutex_t gate_lock; /* helpers wait here until all exist */
    pthread_cond_t gate_open;
    int gate;                 /* 0 wait, 1 go, -1 cancelled */
    int barriers_ready;
    unsigned char **pixels;   /* [n_readers] one record each */
    st_barrier go, done;      /* n_readers each */
    /* the current job, written by reader 0 before `go` */
    st_batch_slot *job;
    const long *job_indices;
    int job_exit;
    st_status *status;        /* [n_readers] */
    st_error *errs;           /* [n_readers] */
    /* the prefetch thread */
    pthread_t thread;
    int thread_started;
    long first, last;
    st_trace_track *trace;    /* --trace: its track, or NULL */
    st_status result;
    st_error result_err;
};

/* Reader r's share of the job: records [n r / R, n (r + 1) / R). */
static void read_part(st_prefetch *p, int r)
{
    st_batch_slot *s = p->job;
    int a = (int)((long)s->n * r / p->n_readers), b = (int)((long)s->n * (r + 1) / p->n_readers);
    size_t per = st_shape_count(p->o.transform->input);
    p->status[r] = st_source_batch(p->o.source, p->o.transform, p->job_indices + a, b - a,
                                   s->x + (size_t)a * per, s->labels + a, 1, s->sample0 + a,
                                   p->pixels[r], &p->errs[r]);
}

typedef struct helper_arg {
    st_prefetch *p;
    int r;
} helper_arg;

static void *helper_main(void *arg)
{
    helper_arg *h = arg;
    st_prefetch *p = h->p;
    int r = h->r;
    free(h);
    if (!st_gate_wait(&p->gate_lock, &p->gate_open, &p->gate))
        return NULL;
    for (;;) {
        st_barrier_wait(&p->go);
        if (p->job_exit)
            break;
        read_part(p, r);
        st_barrier_wait(&p->done);
    }
    return NULL;
}

st_status st_prefetch_fill(st_prefetch *p, long it, st_batch_slot *slot, st_error *err)
{
    const st_source *src = p->o.source;
    long epoch = it / p->iters_per_epoch, j = it % p->iters_per_epoch;
    if (epoch != p->order_epoch) {
        st_order_shuffle(&p->order, epoch);
        p->order_epoch = epoch;
    }
    long global = (long)p->o.batch * p->ranks, b0 = j * global;
    int n = (int)(src->count - b0 < global ? src->count - b0 : global), first;
    st_shard_of(n, p->ranks, p->o.rank, &first, &slot->n);
    slot->n_total = n;
    slot->sample0 = epoch * src->count + b0 + first;
    p->job = slot;
    p->job_indices = p->order.perm + b0 + first;
    if (p->n_readers > 1)
        st_barrier_wait(&p->go);
    read_part(p, 0);
    if (p->n_readers > 1)
        st_barrier_wait(&p->done);
    for (int r = 0; r < p->n_readers; r++)
        if (p->status[r] != ST_OK)
            return st_fail(err, p->status[r], "%s", p->errs[r].msg);
    return ST_OK;
}

static void *prefetch_main(void *arg)
{
    st_prefetch *p = arg;
    for (long it = p->first; it < p->last; it++) {
        double t0 = st_now();
        st_batch_slot *slot = st_batchq_acquire(p->o.q, it);
        if (!slot)
            break; /* the workers stopped */
        double t1 = st_now();
        slot->stop = 0;
        st_status st = st_prefetch_fill(p, it, slot, &p->result_err);
        st_trace_track *tr = st_trace_at(p->trace, it);
        if (tr) {
            st_trace_span(tr, "wait", "wait: free slot", it, t0, t1);
            st_trace_event e = {.name = "read batch", .index = -1, .cat = "data",
                                .iteration = it, .key = {"images"}, .value = {slot->n},
                                .t0 = t1, .t1 = st_now()};
            st_trace_add(tr, &e);
        }
        if (st != ST_OK) {
            p->result = st;
            slot->stop = 1;
        }
        st_batchq_publish(p->o.q, slot, it);
        if (st != ST_OK)
            break;
    }
    return NULL;
}

static void prefetch_free(st_prefetch *p)
{
    if (p->gate > 0 && p->helpers_started) {
        p->job_exit = 1;
        st_barrier_wait(&p->go);
    }
    for (int r = 0; r < p->helpers_started; r++)
        pthread_join(p->helpers[r], NULL);
    if (p->barriers_ready) {
        st_barrier_destroy(&p->go);
        st_barrier_destroy(&p->done);
        pthread_mutex_destroy(&p->gate_lock);
        pthread_cond_destroy(&p->gate_open);
    }
    for (int r = 0; p->pixels && r < p->n_readers; r++)
        free(p->pixels[r]);
    free(p->pixels);
    free(p->helpers);
    free(p->status);
    free(p->errs);
    st_order_free(&p->order);
    free(p);
}

/* Start the helper readers; they wait at the gate until all exist. */
static st_status start_helpers(st_prefetch *p, st_error *err)
{
    if (st_barrier_init(&p->go, p->n_readers) || st_barrier_init(&p->done, p->n_readers) ||
        pthread_mutex_init(&p->gate_lock, NULL) || pthread_cond_init(&p->gate_open, NULL))
        return st_fail(err, ST_EINTERNAL, "cannot create the readers' barriers");
    p->barriers_ready = 1;
    st_status st = ST_OK;
    for (int r = 1; r < p->n_readers && st == ST_OK; r++) {
        helper_arg *h = st_calloc(1, sizeof *h, "reader", err);
        if (!h) {
            st = ST_ENOMEM;
            break;
        }
        *h = (helper_arg){p, r};
        if (pthread_create(&p->helpers[r - 1], NULL, helper_main, h) != 0) {
            free(h);
            st = st_fail(err, ST_EIO, "cannot create reader thread %d of %d", r, p->n_readers);
            break;
        }
        p->helpers_started++;
    }
    st_gate_set(&p->gate_lock, &p->gate_open, &p->gate, st == ST_OK ? 1 : -1);
    return st;
}

/* Readers of o: the prefetch thread and its helpers. */
static int readers_of(const st_prefetch_opts *o)
{
    return o->io_threads > 0 ? o->io_threads : 1;
}

size_t st_prefetch_bytes(const st_prefetch_opts *o)
{
    return (size_t)readers_of(o) * st_record_bytes(o->source) +
           (size_t)o->source->count * sizeof(long);
}

st_status st_prefetch_create(st_prefetch **out, const st_prefetch_opts *o, st_error *err)
{
    *out = NULL;
    st_prefetch *p = st_calloc(1, sizeof *p, "prefetcher", err);
    if (!p)
        return ST_ENOMEM;
    p->o = *o;
    p->n_readers = readers_of(o);
    p->order_epoch = -1;
    p->ranks = o->ranks > 0 ? o->ranks : 1;
    long global = (long)o->batch * p->ranks;
    p->iters_per_epoch = (o->source->count + global - 1) / global;
    p->pixels = st_calloc((size_t)p->n_readers, sizeof *p->pixels, "reader buffers", err);
    p->status = st_calloc((size_t)p->n_readers, sizeof *p->status, "reader status", err);
    p->errs = st_calloc((size_t)p->n_readers, sizeof *p->errs, "reader errors", err);
    p->helpers = st_calloc((size_t)p->n_readers, sizeof *p->helpers, "readers", err);
    st_status st = p->pixels && p->status && p->errs && p->helpers ? ST_OK : ST_ENOMEM;
    for (int r = 0; r < p->n_readers && st == ST_OK; r++)
        if (!(p->pixels[r] = st_calloc(st_record_bytes(o->source), 1, "reader buffer", err)))
            st = ST_ENOMEM;
    if (st == ST_OK)
        st = st_order_init(&p->order, o->source->count, o->seed, err);
    if (st == ST_OK && p->n_readers > 1)
        st = start_helpers(p, err);
    if (st != ST_OK) {
        prefetch_free(p);
        return st;
    }
    *out = p;
    return ST_OK;
}

st_status st_prefetch_start(st_prefetch **out, const st_prefetch_opts *o, long first,
                            long last, st_error *err)
{
    st_status st = st_prefetch_create(out, o, err);
    if (st != ST_OK)
        return st;
    st_prefetch *p = *out;
    p->first = first;
    p->last = last;
    st = st_trace_track_add(o->trace, "prefetch", 2, 8, &p->trace, err);
    if (st != ST_OK) {
        prefetch_free(p);
        *out = NULL;
        return st;
    }
    st_batchq_reset(o->q, first);
    if (pthread_create(&p->thread, NULL, prefetch_main, p) != 0) {
        prefetch_free(p);
        *out = NULL;
        return st_fail(err, ST_EIO, "cannot create the prefetch thread");
    }
    p->thread_started = 1;
    return ST_OK;
}

st_status st_prefetch_stop(st_prefetch *p, st_error *err)
{
    if (!p)
        return ST_OK;
    if (p->thread_started)
        pthread_join(p->thread, NULL);
    st_status st = p->result;
    if (st != ST_OK)
        st_fail(err, st, "%s", p->result_err.msg);
    prefetch_free(p);
    return st;
}
