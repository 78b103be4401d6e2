/* Gradient buckets all-reduced during backward; see overlap.h. */
#include "parallel/overlap.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"

/* Iterations whose scale factors are kept; the workers are never more
 * than one iteration ahead of the communication thread. */
#define SCALES 8

/* A bucket: a range of the parameter arena reduced as one. */
typedef struct overlap_bucket {
    size_t lo, hi;        /* its arena range */
    int layers_in;        /* layers with parameters in it */
    int class_of;         /* its size class (overlap.h) */
    atomic_int remaining; /* layers not yet done by every worker */
    unsigned char ready;  /* under the lock: every layer done, not yet taken */
} overlap_bucket;

/* A layer's place in the buckets. */
typedef struct overlap_layer {
    int bucket_of;        /* its bucket, -1 without parameters */
    atomic_int count;     /* workers done with it this iteration */
} overlap_layer;

struct st_overlap {
    const st_net *net;
    st_ps *ps;
    st_cluster *cluster;
    int channel, workers;
    size_t bucket_bytes;
    int n_buckets;
    overlap_bucket *bucket;     /* [n_buckets], backward order */
    overlap_layer *layer;       /* [n_layers] */
    unsigned char *reported;    /* [workers * n_layers] */
    float scale[SCALES];
    atomic_long current;        /* without a cluster: the iteration the workers compute, */
    atomic_int buckets_reduced; /* and its buckets reduced so far */
    st_overlap_reduced_fn reduced; /* after each bucket's reduction, or NULL */
    void *reduced_ctx;
    pthread_t thread;
    int thread_started;
    st_trace_track *trace;      /* --trace: the thread's track, or NULL */
    pthread_mutex_t lock;
    pthread_cond_t moved;
    /* under lock: each bucket's ready */
    long iteration;             /* the one being reduced */
    long done;                  /* the last one reduced, or first - 1 */
    int quit;
};

/* The layer of each parameter tensor is known; a layer's tensors are
 * contiguous in the arena and layers come in arena order. */
static st_status plan(st_overlap *o, size_t bucket_bytes, st_error *err)
{
    const st_param_table *t = &o->net->params;
    int nl = o->net->n_layers;
    size_t *lo = calloc((size_t)nl, sizeof *lo), *hi = calloc((size_t)nl, sizeof *hi);
    if (!lo || !hi) {
        free(lo);
        free(hi);
        return st_fail(err, ST_ENOMEM, "out of memory planning the overlap buckets");
    }
    for (int i = 0; i < nl; i++)
        lo[i] = (size_t)-1;
    for (int k = 0; k < t->n; k++) {
        const st_param *p = &t->p[k];
        if (p->offset < lo[p->layer])
            lo[p->layer] = p->offset;
        if (p->offset + p->count > hi[p->layer])
            hi[p->layer] = p->offset + p->count;
    }
    for (int i = nl - 1; i >= 0; i--) {
        o->layer[i].bucket_of = -1;
        if (lo[i] == (size_t)-1)
            continue;
        int b = o->n_buckets;
        overlap_bucket *last = b > 0 ? &o->bucket[b - 1] : NULL;
        if (last && (last->hi - last->lo) * sizeof(float) < bucket_bytes) {
            last->lo = lo[i]; /* the last bucket extended downwards */
            last->layers_in++;
            o->layer[i].bucket_of = b - 1;
        } else {
            o->bucket[b].lo = lo[i];
            o->bucket[b].hi = last ? last->lo : o->ps->count;
            o->bucket[b].layers_in = 1;
            o->layer[i].bucket_of = b;
            o->n_buckets++;
        }
    }
    if (o->n_buckets > 0) /* the first bucket starts at the arena's start */
        o->bucket[o->n_buckets - 1].lo = 0;
    for (int b = 0; b < o->n_buckets; b++) {
        size_t bytes = (o->bucket[b].hi - o->bucket[b].lo) * sizeof(float);
        int k = 0;
        for (size_t edge = bucket_bytes * 4; k + 1 < ST_OVERLAP_CLASSES && bytes >= edge;
             edge *= 4)
            k++;
        o->bucket[b].class_of = k;
    }
    free(lo);
    free(hi);
    return ST_OK;
}

/* "buckets of 64K-256K" (the last class: "of 1M and more") for class k's
 * channel in the cluster's report. */
static void label_class(st_overlap *o, int k)
{
    size_t bucket_bytes = o->bucket_bytes;
    char lo[24], hi[24], label[64];
    size_t from = k ? bucket_bytes << (2 * k) : 0, to = bucket_bytes << (2 * (k + 1));
    snprintf(lo, sizeof lo, "%zuK", from >> 10);
    snprintf(hi, sizeof hi, "%zuK", to >> 10);
    if (k + 1 == ST_OVERLAP_CLASSES)
        snprintf(label, sizeof label, "buckets of %s and more", lo);
    else
        snprintf(label, sizeof label, "buckets of %s-%s", lo, hi);
    st_cluster_label(o->cluster, o->channel + k, label);
}

/* --trace: bucket b of iteration it: its wait from t[0], its sum over
 * the workers from t[1] and its all-reduce from t[2] to t[3]. */
static void trace_bucket(st_overlap *o, long it, int b, const double *t)
{
    st_trace_track *tr = st_trace_at(o->trace, it);
    if (!tr)
        return;
    double bytes = (double)(o->bucket[b].hi - o->bucket[b].lo) * sizeof(float);
    const char *names[3] = {"wait: bucket", "sum bucket", "all-reduce bucket"};
    const char *cats[3] = {"wait", "phase", "comm"};
    for (int k = 0; k < 3; k++) {
        st_trace_event e = {.name = names[k], .index = b, .cat = cats[k], .iteration = it,
                            .key = {"bytes"}, .value = {bytes}, .t0 = t[k], .t1 = t[k + 1]};
        if (k == 2) {
            e.text_key = "algorithm";
            e.text = st_cluster_algorithm(o->cluster, o->channel + o->bucket[b].class_of);
        }
        st_trace_add(tr, &e);
    }
}

/* Bucket b of iteration it, every worker done with it: summed over the
 * workers, all-reduced across the nodes (with a cluster), then handed to
 * the reduced hook; t[0]: when its wait began. */
static void reduce_bucket(st_overlap *o, int b, long it, int worker, double *t)
{
    st_error err = {0};
    overlap_bucket *k = &o->bucket[b];
    t[1] = st_now();
    st_ps_reduce_range(o->ps, k->lo, k->hi, o->scale[it % SCALES]);
    t[2] = st_now();
    if (o->cluster && st_cluster_allreduce(o->cluster, o->channel + k->class_of, it,
                                           o->ps->grads[0] + k->lo, k->hi - k->lo,
                                           &err) != ST_OK) {
        st_error_prefix(&err, "overlap: ");
        st_cluster_abort(o->cluster, &err);
    }
    t[3] = st_now();
    if (o->cluster)
        trace_bucket(o, it, b, t);
    atomic_store(&k->remaining, k->layers_in);
    if (o->reduced)
        o->reduced(o->reduced_ctx, b, it, worker, t[1], t[3]);
}

/* The iteration whose buckets are all reduced: its waiters go on. */
static void iteration_reduced(st_overlap *o, long it)
{
    pthread_mutex_lock(&o->lock);
    o->done = it;
    o->iteration = it + 1;
    pthread_cond_broadcast(&o->moved);
    pthread_mutex_unlock(&o->lock);
}

static void *communicate(void *arg)
{
    st_overlap *o = arg;
    for (;;) {
        long it = 0;
        for (int b = 0; b < o->n_buckets; b++) {
            double t[4] = {st_now()};
            pthread_mutex_lock(&o->lock);
            while (!o->bucket[b].ready && !o->quit)
                pthread_cond_wait(&o->moved, &o->lock);
            if (o->quit) {
                pthread_mutex_unlock(&o->lock);
                return NULL;
            }
            o->bucket[b].ready = 0;
            it = o->iteration;
            pthread_mutex_unlock(&o->lock);
            reduce_bucket(o, b, it, -1, t);
        }
        iteration_reduced(o, it);
    }
}

void st_overlap_free(st_overlap *o)
{
    if (!o)
        return;
    if (o->thread_started) {
        pthread_mutex_lock(&o->lock);
        o->quit = 1;
        pthread_cond_broadcast(&o->moved);
        pthread_mutex_unlock(&o->lock);
        pthread_join(o->thread, NULL);
    }
    pthread_mutex_destroy(&o->lock);
    pthread_cond_destroy(&o->moved);
    free(o->bucket);
    free(o->layer);
    free(o->reported);
    free(o);
}

st_status st_overlap_create(st_overlap **out, const st_net *net, st_ps *ps, st_cluster *c,
                            int channel, int workers, size_t bucket_bytes, st_trace *trace,
                            st_overlap_reduced_fn reduced, void *reduced_ctx, st_error *err)
{
    *out = NULL;
    st_overlap *o = st_calloc(1, sizeof *o, "overlap", err);
    if (!o)
        return ST_ENOMEM;
    int nl = net->n_layers;
    o->net = net;
    o->ps = ps;
    o->cluster = c;
    o->channel = channel;
    o->workers = workers;
    o->bucket_bytes = bucket_bytes;
    o->reduced = reduced;
    o->reduced_ctx = reduced_ctx;
    pthread_mutex_init(&o->lock, NULL);
    pthread_cond_init(&o->moved, NULL);
    o->bucket = st_calloc((size_t)nl, sizeof *o->bucket, "overlap buckets", err);
    o->layer = st_calloc((size_t)nl, sizeof *o->layer, "overlap buckets", err);
    o->reported = st_calloc((size_t)workers * (size_t)nl, 1, "overlap buckets", err);
    st_status st =
        o->bucket && o->layer && o->reported ? plan(o, bucket_bytes, err) : ST_ENOMEM;
    for (int b = 0; st == ST_OK && b < o->n_buckets; b++)
        atomic_init(&o->bucket[b].remaining, o->bucket[b].layers_in);
    /* per iteration, three events a bucket; without a cluster the workers
     * reduce, and a track is written by one thread */
    if (st == ST_OK && o->n_buckets > 0 && c)
        st = st_trace_track_add(trace, "communication", 3 * (size_t)o->n_buckets, 16,
                                &o->trace, err);
    if (st == ST_OK && o->n_buckets > 0 && c) { /* no parameters: nothing to send */
        if (pthread_create(&o->thread, NULL, communicate, o) != 0)
            st = st_fail(err, ST_EINTERNAL, "cannot start the overlap's communication thread");
        else
            o->thread_started = 1;
    }
    if (st != ST_OK) {
        st_overlap_free(o);
        return st;
    }
    *out = o;
    return ST_OK;
}

void st_overlap_start(st_overlap *o, long first)
{
    for (int k = 0; o->cluster && k < ST_OVERLAP_CLASSES; k++) /* the channels exist once a
                                                                  run starts */
        label_class(o, k);
    pthread_mutex_lock(&o->lock);
    o->iteration = first;
    o->done = first - 1;
    pthread_mutex_unlock(&o->lock);
}

void st_overlap_begin(st_overlap *o, long it, float scale)
{
    o->scale[it % SCALES] = scale;
    atomic_store(&o->current, it);
}

void st_overlap_layer_done(st_overlap *o, int w, int layer)
{
    int b = o->layer[layer].bucket_of;
    unsigned char *mine = &o->reported[(size_t)w * (size_t)o->net->n_layers + (size_t)layer];
    if (b < 0 || *mine)
        return;
    *mine = 1;
    if (atomic_fetch_add(&o->layer[layer].count, 1) + 1 < o->workers)
        return;
    atomic_store(&o->layer[layer].count, 0);
    if (atomic_fetch_sub(&o->bucket[b].remaining, 1) != 1)
        return;
    if (!o->cluster) { /* this worker completed the bucket: it reduces it */
        long it = atomic_load(&o->current);
        double t[4] = {st_now()};
        reduce_bucket(o, b, it, w, t);
        if (atomic_fetch_add(&o->buckets_reduced, 1) + 1 == o->n_buckets) {
            atomic_store(&o->buckets_reduced, 0);
            iteration_reduced(o, it);
        }
    } else {
        pthread_mutex_lock(&o->lock);
        o->bucket[b].ready = 1;
        pthread_cond_broadcast(&o->moved);
        pthread_mutex_unlock(&o->lock);
    }
}

void st_overlap_worker_void(st_overlap *o, int w)
{
    const st_param_table *t = &o->net->params;
    const unsigned char *mine = &o->reported[(size_t)w * (size_t)o->net->n_layers];
    float *g = o->ps->grads[w];
    for (int k = 0; k < t->n; k++)
        if (!mine[t->p[k].layer])
            for (size_t i = t->p[k].offset; i < t->p[k].offset + t->p[k].count; i++)
                g[i] = NAN;
    st_overlap_worker_end(o, w);
}

void st_overlap_worker_end(st_overlap *o, int w)
{
    int nl = o->net->n_layers;
    for (int i = nl - 1; i >= 0; i--)
        st_overlap_layer_done(o, w, i);
    memset(&o->reported[(size_t)w * (size_t)nl], 0, (size_t)nl);
}

void st_overlap_wait(st_overlap *o, long it)
{
    if (o->n_buckets == 0)
        return;
    pthread_mutex_lock(&o->lock);
    while (o->done < it)
        pthread_cond_wait(&o->moved, &o->lock);
    pthread_mutex_unlock(&o->lock);
}

int st_overlap_buckets(const st_overlap *o)
{
    return o->n_buckets;
}

void st_overlap_bucket_range(const st_overlap *o, int b, size_t *lo, size_t *hi)
{
    *lo = o->bucket[b].lo;
    *hi = o->bucket[b].hi;
}

int st_overlap_bucket_of(const st_overlap *o, int layer)
{
    return o->layer[layer].bucket_of;
}
