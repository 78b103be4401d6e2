/* --pipeline layer: each bucket updated as soon as it is reduced, the next
 * forward waiting per layer; see pipeline.h. */
#include "parallel/pipeline.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/clock.h"
#include "base/memory.h"

/* Iterations whose time split is kept: the workers' forward of it + 1
 * waits for iteration it's buckets, so at most two are in flight. */
#define SPLITS 8

/* Iteration it's buckets, as the threads that applied them saw them. */
typedef struct pipe_split {
    long it;                /* whose; another: not begun */
    int computed;           /* workers done with its compute */
    double compute_end;     /* the last one's time */
    double busy, behind_backward;
    int applied;            /* buckets applied (the others were not finite) */
} pipe_split;

struct st_pipeline {
    const st_net *net;
    st_ps *ps;
    const st_solver_cfg *solver;
    int threads, workers;
    st_pipeline_applied_fn applied_fn;
    void *applied_ctx;
    st_overlap *ov;          /* owned */
    int n_buckets;
    atomic_long *applied;    /* [n_buckets] the last iteration applied (or skipped) */
    pthread_mutex_t lock;
    pthread_cond_t moved;
    /* under lock */
    pipe_split split[SPLITS];
    long bad_it;             /* the first iteration with a bad bucket, or -1: */
    st_status bad_status;    /* ST_EDIVERGED (not finite) or the hook's failure, */
    char bad_what[192];      /* and what it was */
};

/* Iteration it's split record, begun afresh if it holds an older one
 * (under lock). */
static pipe_split *split_of(st_pipeline *p, long it)
{
    pipe_split *sp = &p->split[it % SPLITS];
    if (sp->it != it)
        *sp = (pipe_split){.it = it};
    return sp;
}

/* The first parameter tensor of [lo, hi) whose reduced gradient is not
 * finite, named into p->bad_what (under lock). */
static void name_bad(st_pipeline *p, size_t lo, size_t hi)
{
    const st_param_table *t = &p->net->params;
    char layer[128];
    for (int k = t->n - 1; k >= 0; k--) {
        const st_param *q = &t->p[k];
        if (q->offset < lo || q->offset + q->count > hi ||
            st_all_finite(p->ps->grads[0] + q->offset, q->count))
            continue;
        snprintf(p->bad_what, sizeof p->bad_what, "the gradient of %s, %s, is not finite",
                 q->name, st_net_layer_label(p->net, q->layer, layer, sizeof layer));
        return;
    }
    snprintf(p->bad_what, sizeof p->bad_what, "a gradient is not finite");
}

/* overlap.h's hook: bucket b of iteration it reduced; checked, applied,
 * handed to the creator's hook, published. Buckets come one at a time, in
 * order (a worker reports the next bucket's layers only after it reduced
 * the one it completed). */
static void bucket_reduced(void *ctx, int b, long it, int worker, double t0, double t1)
{
    st_pipeline *p = ctx;
    st_ps *ps = p->ps;
    size_t lo, hi;
    st_error err = {0};
    (void)t1;
    st_overlap_bucket_range(p->ov, b, &lo, &hi);
    int finite = st_all_finite(ps->grads[0] + lo, hi - lo);
    st_status st = ST_OK;
    if (finite) {
        st_ps_apply_range(ps, lo, hi, ps->state + lo, ps->count, p->solver,
                          st_lr_at(&p->solver->lr, it), it, p->threads);
        if (p->applied_fn)
            st = p->applied_fn(p->applied_ctx, worker, lo, hi, &err);
    }
    double t2 = st_now();
    pthread_mutex_lock(&p->lock);
    if ((!finite || st != ST_OK) && p->bad_it < 0) {
        p->bad_it = it;
        p->bad_status = finite ? st : ST_EDIVERGED;
        if (finite)
            snprintf(p->bad_what, sizeof p->bad_what, "%.*s", (int)sizeof p->bad_what - 1,
                     err.msg);
        else
            name_bad(p, lo, hi);
    }
    pipe_split *sp = split_of(p, it);
    sp->applied += finite;
    sp->busy += t2 - t0;
    double end = sp->computed == p->workers ? sp->compute_end : t2;
    sp->behind_backward += end > t0 ? (end < t2 ? end : t2) - t0 : 0.0;
    atomic_store(&p->applied[b], it);
    pthread_cond_broadcast(&p->moved);
    pthread_mutex_unlock(&p->lock);
}

void st_pipeline_free(st_pipeline *p)
{
    if (!p)
        return;
    st_overlap_free(p->ov);
    pthread_mutex_destroy(&p->lock);
    pthread_cond_destroy(&p->moved);
    free(p->applied);
    free(p);
}

st_status st_pipeline_create(st_pipeline **out, const st_net *net, st_ps *ps, st_cluster *c,
                             int channel, int workers, size_t bucket_bytes, st_trace *trace,
                             const st_solver_cfg *solver, int threads,
                             st_pipeline_applied_fn applied, void *applied_ctx, st_error *err)
{
    *out = NULL;
    st_pipeline *p = st_calloc(1, sizeof *p, "pipeline", err);
    if (!p)
        return ST_ENOMEM;
    p->net = net;
    p->ps = ps;
    p->solver = solver;
    p->threads = threads;
    p->workers = workers;
    p->applied_fn = applied;
    p->applied_ctx = applied_ctx;
    p->bad_it = -1;
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->moved, NULL);
    for (int k = 0; k < SPLITS; k++)
        p->split[k].it = -1;
    /* a bucket holds a layer at least: n_layers bound the buckets */
    p->applied = st_calloc((size_t)net->n_layers + 1, sizeof *p->applied, "pipeline", err);
    st_status st = p->applied ? st_overlap_create(&p->ov, net, ps, c, channel, workers,
                                                  bucket_bytes, trace, bucket_reduced, p, err)
                              : ST_ENOMEM;
    if (st != ST_OK) {
        st_pipeline_free(p);
        return st;
    }
    p->n_buckets = st_overlap_buckets(p->ov);
    *out = p;
    return ST_OK;
}

st_overlap *st_pipeline_overlap(const st_pipeline *p)
{
    return p->ov;
}

void st_pipeline_start(st_pipeline *p, long first)
{
    st_overlap_start(p->ov, first);
    pthread_mutex_lock(&p->lock);
    for (int b = 0; b < p->n_buckets; b++)
        atomic_store(&p->applied[b], first - 1);
    p->bad_it = -1;
    pthread_mutex_unlock(&p->lock);
}

/* Until bucket b is applied through iteration it. */
static void wait_bucket(st_pipeline *p, int b, long it)
{
    if (atomic_load(&p->applied[b]) >= it)
        return;
    pthread_mutex_lock(&p->lock);
    while (atomic_load(&p->applied[b]) < it)
        pthread_cond_wait(&p->moved, &p->lock);
    pthread_mutex_unlock(&p->lock);
}

double st_pipeline_layer_wait(st_pipeline *p, int layer, long it)
{
    int b = st_overlap_bucket_of(p->ov, layer);
    if (b < 0 || atomic_load(&p->applied[b]) >= it - 1)
        return 0.0;
    double t0 = st_now();
    wait_bucket(p, b, it - 1);
    return st_now() - t0;
}

void st_pipeline_computed(st_pipeline *p, long it, double t)
{
    pthread_mutex_lock(&p->lock);
    pipe_split *sp = split_of(p, it);
    sp->computed++;
    if (t > sp->compute_end)
        sp->compute_end = t;
    pthread_mutex_unlock(&p->lock);
}

int st_pipeline_wait(st_pipeline *p, long it, long *bad_it, st_status *why, char *what,
                     size_t len)
{
    for (int b = 0; b < p->n_buckets; b++)
        wait_bucket(p, b, it);
    pthread_mutex_lock(&p->lock);
    int good = p->bad_it < 0 || p->bad_it > it; /* a later one's buckets may be under way */
    if (!good) {
        *bad_it = p->bad_it;
        *why = p->bad_status;
        snprintf(what, len, "%s", p->bad_what);
    }
    pthread_mutex_unlock(&p->lock);
    return good;
}

int st_pipeline_split(st_pipeline *p, long it, double *busy, double *behind_backward)
{
    pthread_mutex_lock(&p->lock);
    const pipe_split *sp = &p->split[it % SPLITS];
    int mine = sp->it == it;
    *busy = mine ? sp->busy : 0.0;
    *behind_backward = mine ? sp->behind_backward : 0.0;
    int applied = mine ? sp->applied : 0;
    pthread_mutex_unlock(&p->lock);
    return applied == p->n_buckets ? 1 : applied == 0 ? 0 : -1;
}
