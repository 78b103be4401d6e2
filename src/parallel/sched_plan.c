/* The workers' memory planned before they exist (scheduler.h's
 * st_sched_plan_memory): each worker shape's replica is built without its
 * arena, which gives the arena's size exactly (the backend's layouts,
 * workspaces and scratch included), and what building the kernels adds to
 * the resident memory is measured on worker 0's replica and on worker 1's
 * beside it (the second costs less: the backend shares what it can between
 * identical kernels). The planning runs on a thread of its own, as each
 * worker builds its replica on its own thread: a backend sets the calling
 * thread's intra-op team (oneDNN sizes some scratch by it), and the
 * caller's is left alone.
 *
 * Kernels that choose their implementation by measuring it ("auto") are
 * planned either unmeasured (the backend's first implementation: cheap,
 * nothing large allocated) or measured as the workers would measure them:
 * the choices land in the shared table, where the workers find them, and
 * what measuring leaves resident is counted with the kernels.
 *
 * Hybrid runs are planned as they run: the model-parallel layers'
 * whole-batch slice kernels and scratch in each worker's arena, and the
 * buffers the workers share, counted once (allocated while planning, as
 * the layers keep pointers to them, and freed with the plan). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "base/memory.h"
#include "sched_internal.h"

typedef struct plan_job {
    const st_net *net;
    const st_sched_opts *o;
    int measure;
    st_sched_memory *m;
    st_status status;
    st_error err;
} plan_job;

/* The model-parallel group of a planned replica: its shared buffers are
 * allocated (mmap'd, untouched when large) and counted once. */
typedef struct plan_shared {
    mp_buffer *buf;
    int n;
} plan_shared;

static void *plan_shared_buffer(void *ctx, int layer, int slot, size_t bytes, st_error *err)
{
    plan_shared *ps = ctx;
    return sched_mp_buffer(&ps->buf, &ps->n, layer, slot, bytes, err);
}

/* A planned replica runs nothing: no worker meets or applies. */
static void plan_barrier(void *ctx)
{
}

static void plan_apply(void *ctx, size_t offset, float *g, size_t count)
{
}

static int same_sizes(const worker_sizes *a, const worker_sizes *b)
{
    return a->cap == b->cap && a->n_sizes == b->n_sizes &&
           memcmp(a->sizes, b->sizes, sizeof a->sizes[0] * (size_t)a->n_sizes) == 0;
}

/* Resident bytes gained since *rss (then moved on to now). */
static double rss_gain(size_t *rss)
{
    size_t now = st_current_rss();
    double gain = now > *rss ? (double)(now - *rss) : 0.0;
    *rss = now;
    return gain;
}

static st_status plan_workers(const st_net *net, const st_sched_opts *o, int measure,
                              st_sched_memory *m, st_error *err)
{
    int T = o->threads;
    worker_sizes *z = st_calloc((size_t)T, sizeof *z, "worker plans", err);
    size_t *arena = st_calloc((size_t)T, sizeof *arena, "worker plans", err);
    size_t *outs = st_calloc((size_t)T, sizeof *outs, "worker plans", err);
    st_replica kept[2];
    int n_kept = 0;
    st_status st = z && arena && outs ? ST_OK : ST_ENOMEM;
    size_t rss = st_current_rss();
    /* what a test phase or an SSP / ASP run touches of the buffers */
    int own_inputs = o->test_count > 0 || o->sync != ST_SYNC_BSP;
    plan_shared shared = {0};
    st_mp_group groups[3]; /* workers 0 and 1 (kept), any other */
    int mp_sizes[2], n_mp_sizes = o->hybrid ? sched_mp_sizes(o, mp_sizes) : 0;
    int applied = o->hybrid && st_sched_tail_applied(o);
    if (sched_bf16_shared(o))
        m->bf16_weights = (double)st_bf16_weights_bytes(net->params.count);
    for (int w = 0; w < T && st == ST_OK; w++) {
        sched_worker_sizes(o, T, w, &z[w]);
        worker_buffers b = sched_worker_buffers(o, net, z[w].cap);
        m->accumulation += (double)b.piece_grads;
        m->buffers += (double)(b.labels + b.indices + b.order) +
                      (own_inputs ? (double)(b.x + b.pixels) : 0.0);
        int like = -1;
        for (int v = 0; v < w && like < 0; v++)
            if (same_sizes(&z[v], &z[w]))
                like = v;
        if (like >= 0 && w >= 2) {
            arena[w] = arena[like];
            outs[w] = outs[like];
            continue;
        }
        st_replica r;
        st_replica_opts ro = sched_replica_opts(o, &z[w], w, !measure);
        if (o->hybrid) {
            st_mp_group *mp = &groups[w < 2 ? w : 2]; /* as long as the replica */
            *mp = sched_mp_group(o, T, w);
            mp->apply = applied ? plan_apply : NULL;
            mp->barrier = plan_barrier;
            mp->shared = plan_shared_buffer;
            mp->ctx = &shared;
            ro.mp = mp;
            ro.mp_batch_sizes = mp_sizes;
            ro.n_mp_batch_sizes = n_mp_sizes;
        }
        st = st_replica_plan(&r, net, o->backend, &ro, &arena[w], err);
        if (st != ST_OK) {
            st_error_prefix(err, "planning worker %d: ", w);
            break;
        }
        outs[w] = st_replica_bf16_output_bytes(&r);
        if (w < 2) { /* kept while the next is built: its kernels are measured beside them */
            kept[n_kept++] = r;
            if (w == 0)
                m->kernels_first = rss_gain(&rss);
            else
                m->kernels_next = rss_gain(&rss);
        } else {
            st_replica_free(&r);
        }
    }
    for (int k = 0; k < n_kept; k++)
        st_replica_free(&kept[k]);
    for (int k = 0; k < shared.n; k++) {
        m->shared += (double)shared.buf[k].bytes;
        st_free_aligned(shared.buf[k].p);
    }
    free(shared.buf);
    for (int w = 0; w < T && st == ST_OK; w++) {
        m->activations += (double)arena[w];
        m->bf16_outputs += (double)outs[w];
    }
    m->kernels = m->kernels_first + (T - 1) * m->kernels_next;
    free(z);
    free(arena);
    free(outs);
    return st;
}

static void *plan_main(void *arg)
{
    plan_job *j = arg;
    j->status = plan_workers(j->net, j->o, j->measure, j->m, &j->err);
    return NULL;
}

st_status st_sched_plan_memory(const st_net *net, const st_sched_opts *o, int measure,
                               st_sched_memory *out, st_error *err)
{
    memset(out, 0, sizeof *out);
    st_status st = sched_check_threads(o, err);
    if (st != ST_OK)
        return st;
    plan_job j = {.net = net, .o = o, .measure = measure, .m = out};
    pthread_t thread;
    int rc = pthread_create(&thread, NULL, plan_main, &j);
    if (rc != 0)
        return st_fail(err, ST_EIO, "cannot create the thread planning the workers: %s",
                       strerror(rc));
    pthread_join(thread, NULL);
    if (j.status != ST_OK)
        st_fail(err, j.status, "%s", j.err.msg);
    return j.status;
}
