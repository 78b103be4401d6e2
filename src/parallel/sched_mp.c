/* Hybrid parallelism (--parallel hybrid, --mp-group; PCL-DNN): the state
 * of the model-parallel layers behind one handle (sched_internal.h's
 * sched_mp), NULL in a data-parallel run. The layers st_net_hybrid_split
 * names run model-parallel over the workers (layer.h's st_mp_group): the
 * workers meet at the handle's barrier and share its buffers. On one node
 * with the update on the host (st_sched_tail_applied) they apply their
 * gradients in backward, through the handle, which decides once per
 * iteration whether they apply it and keeps each worker's verdict. Across
 * nodes with --mp-group G > 1 (one worker a rank) they are split over
 * groups of G ranks instead (st_mp_nodes: the group's collectives,
 * dist/cluster.h's st_cluster_mp_*); the handle then holds this rank's
 * blocks of their parameters, which the BSP run's hybrid aggregation
 * strategy (sched_aggregate.c) all-reduces over the ranks holding the same
 * blocks and updates alone. sched_plan.c plans the same groups without a
 * handle. */
#include <stdlib.h>
#include <string.h>

#include "base/memory.h"
#include "sched_internal.h"

/* Worker id's place among the model-parallel layers: the context of its
 * group's callbacks, and what its iteration in backward needs. */
typedef struct mp_worker {
    sched_mp *m;
    int id;
    st_mp_group group;     /* its replica's (st_replica_opts.mp) */
    long it;               /* the iteration in backward */
    float scale;           /* 1 / its node's images */
    int total;             /* across nodes: the iteration's samples over every rank */
    int bad;               /* whether a gradient it was to apply was not finite */
    size_t bad_at;         /* (the first one's arena offset) */
} mp_worker;

struct sched_mp {
    st_sched *s;
    st_barrier barrier;             /* the workers, in the model-parallel layers */
    pthread_mutex_t lock;
    int ready;                      /* barrier and lock created */
    mp_buffer *buf;                 /* [n_buf], under lock during set-up */
    int n_buf;
    int sizes[2], n_sizes;          /* samples of this process's batches (across nodes,
                                       its group's) */
    /* with ps->tail_applied, under lock: whether the first update in
     * backward of the iteration (its record's slot) came, and the stop flag
     * it saw (0: the model-parallel layers apply the iteration) */
    struct {
        int decided, stop;
    } decision[RECORDS];
    /* across nodes: this rank's parts of the model-parallel layers'
     * parameters ([n_ranges] arena ranges, st_net_mp_ranges) and a buffer
     * [floats] for their gradients, all-reduced over the rank's block */
    size_t (*ranges)[2];
    int n_ranges;
    float *pack;
    size_t floats;
    mp_worker w[];                  /* [s->T] */
};

int st_sched_tail_applied(const st_sched_opts *o)
{
    return o->hybrid && o->sync == ST_SYNC_BSP && !o->overlap && !o->cluster &&
           !o->backend->slice_reduce && !o->backend->slice_apply;
}

int sched_mp_nodes(const st_sched_opts *o)
{
    return o->hybrid && o->cluster && o->mp_group > 1;
}

/* Across nodes: this rank's place in its group. */
static int mp_place(const st_sched_opts *o)
{
    return st_cluster_rank(o->cluster) % o->mp_group;
}

/* The samples of batch n_total of the G ranks of this rank's group, rank
 * k's count[k] from first[k] (from the group's first), and their sum
 * (prefetch.c splits a batch over the ranks with st_shard_of; G = 1: this
 * rank's part). */
static int group_shards(const st_sched_opts *o, int G, int n_total, int *first, int *count)
{
    int P = st_cluster_size(o->cluster);
    int g0 = st_cluster_rank(o->cluster) / G * G, f0 = 0, sum = 0;
    for (int k = 0; k < G; k++) {
        int f, c;
        st_shard_of(n_total, P, g0 + k, &f, &c);
        if (k == 0)
            f0 = f;
        if (first)
            first[k] = f - f0;
        if (count)
            count[k] = c;
        sum += c;
    }
    return sum;
}

int sched_mp_sizes(const st_sched_opts *o, int sizes[2])
{
    int G = sched_mp_nodes(o) ? o->mp_group : 1, n = 0; /* the group's, or this node's */
    long last = o->train->count % ((long)o->batch * st_cluster_size(o->cluster));
    int part = last ? group_shards(o, G, (int)last, NULL, NULL) : 0;
    sizes[n++] = o->batch * G;
    if (part > 0 && part != sizes[0])
        sizes[n++] = part;
    return n;
}

static int mp_shard(void *ctx, int *first, int *count)
{
    mp_worker *mw = ctx;
    const st_sched_opts *o = &mw->m->s->o;
    return group_shards(o, o->mp_group, mw->total, first, count);
}

static st_cluster *mp_cluster(void *ctx)
{
    return ((mp_worker *)ctx)->m->s->o.cluster;
}

static st_status mp_allgather(void *ctx, const float *mine, float *all, const int *counts,
                              const int *displs, st_error *err)
{
    return st_cluster_mp_allgather(mp_cluster(ctx), mine, all, counts, displs, err);
}

static st_status mp_alltoall(void *ctx, const float *send, const int *scounts,
                             const int *sdispls, float *recv, const int *rcounts,
                             const int *rdispls, st_error *err)
{
    return st_cluster_mp_alltoall(mp_cluster(ctx), send, scounts, sdispls, recv, rcounts,
                                  rdispls, err);
}

static st_status mp_reduce_scatter(void *ctx, const float *all, float *mine, const int *counts,
                                   st_error *err)
{
    return st_cluster_mp_reduce_scatter(mp_cluster(ctx), all, mine, counts, err);
}

static const st_mp_nodes mp_nodes_ops = {mp_shard, mp_allgather, mp_alltoall,
                                         mp_reduce_scatter};

st_mp_group sched_mp_group(const st_sched_opts *o, int T, int id)
{
    st_mp_group g = {id, T, NULL, NULL, NULL, NULL, NULL, NULL};
    if (sched_mp_nodes(o)) { /* one worker: its rank's place in the group */
        g.rank = mp_place(o);
        g.size = o->mp_group;
        g.nodes = &mp_nodes_ops;
    }
    return g;
}

void *sched_mp_buffer(mp_buffer **bufs, int *n, int layer, int slot, size_t bytes,
                      st_error *err)
{
    for (int k = 0; k < *n; k++)
        if ((*bufs)[k].layer == layer && (*bufs)[k].slot == slot && (*bufs)[k].bytes == bytes)
            return (*bufs)[k].p;
    mp_buffer *grown = realloc(*bufs, (size_t)(*n + 1) * sizeof *grown);
    if (!grown) {
        st_fail(err, ST_ENOMEM, "out of memory for the model-parallel buffers' table");
        return NULL;
    }
    *bufs = grown;
    void *p = st_alloc_aligned(bytes, "model-parallel layer buffer", err);
    if (p)
        grown[(*n)++] = (mp_buffer){layer, slot, bytes, p};
    return p;
}

static void mp_barrier_wait(void *ctx)
{
    st_barrier_wait(&((mp_worker *)ctx)->m->barrier);
}

static void *mp_shared(void *ctx, int layer, int slot, size_t bytes, st_error *err)
{
    sched_mp *m = ((mp_worker *)ctx)->m;
    pthread_mutex_lock(&m->lock);
    void *p = sched_mp_buffer(&m->buf, &m->n_buf, layer, slot, bytes, err);
    pthread_mutex_unlock(&m->lock);
    return p;
}

/* st_mp_group.apply with ps->tail_applied: the first call of an iteration
 * decides, for every worker, whether the model-parallel layers apply it
 * (no stop asked yet; see scheduler.h). */
static void mp_apply(void *ctx, size_t offset, float *g, size_t count)
{
    mp_worker *mw = ctx;
    sched_mp *m = mw->m;
    st_sched *s = m->s;
    pthread_mutex_lock(&m->lock);
    if (!m->decision[mw->it % RECORDS].decided) {
        m->decision[mw->it % RECORDS].stop = sched_stop_flag(s);
        m->decision[mw->it % RECORDS].decided = 1;
    }
    int apply = !m->decision[mw->it % RECORDS].stop;
    pthread_mutex_unlock(&m->lock);
    if (apply && !st_ps_apply_given(s->ps, offset, offset + count, g, mw->scale, s->o.solver,
                                    st_lr_at(&s->o.solver->lr, mw->it), mw->it, s->o.intra) &&
        !mw->bad) {
        mw->bad = 1;
        mw->bad_at = offset;
    }
}

void sched_mp_replica(sched_mp *m, int id, st_replica_opts *ro)
{
    if (!m)
        return;
    st_sched *s = m->s;
    int applied = s->ps->tail_applied;
    mp_worker *mw = &m->w[id];
    mw->m = m;
    mw->id = id;
    mw->group = sched_mp_group(&s->o, s->T, id);
    mw->group.grads = applied ? NULL : s->ps->grads[0];
    mw->group.apply = applied ? mp_apply : NULL;
    mw->group.barrier = mp_barrier_wait;
    mw->group.shared = mp_shared;
    mw->group.ctx = mw;
    ro->mp = &mw->group;
    ro->mp_batch_sizes = m->sizes;
    ro->n_mp_batch_sizes = m->n_sizes;
}

void sched_mp_begin(sched_mp *m, int id, long it, int n, int n_total)
{
    if (!m)
        return;
    mp_worker *mw = &m->w[id];
    mw->it = it;
    mw->scale = 1.0f / (float)n;
    mw->bad = 0;
    mw->total = n_total;
}

void sched_mp_undecide(sched_mp *m, long it)
{
    if (m)
        m->decision[it % RECORDS].decided = 0;
}

int sched_mp_decided(const sched_mp *m, long it, int *stop)
{
    if (!m || !m->decision[it % RECORDS].decided)
        return 0;
    *stop = m->decision[it % RECORDS].stop;
    return 1;
}

int sched_mp_bad(const sched_mp *m, int id, size_t *at)
{
    if (!m || !m->w[id].bad)
        return 0;
    if (at)
        *at = m->w[id].bad_at;
    return 1;
}

void sched_mp_sum_blocks(sched_mp *m, float *slice, st_error *err)
{
    st_cluster *c = m->s->o.cluster;
    size_t at = 0;
    for (int k = 0; k < m->n_ranges; k++) {
        size_t b = m->ranges[k][0], n = m->ranges[k][1] - b;
        memcpy(m->pack + at, slice + b, n * sizeof(float));
        at += n;
    }
    if (st_cluster_mp_block_allreduce(c, m->pack, at, err) != ST_OK)
        st_cluster_abort(c, err);
    at = 0;
    for (int k = 0; k < m->n_ranges; k++) {
        size_t b = m->ranges[k][0], n = m->ranges[k][1] - b;
        memcpy(slice + b, m->pack + at, n * sizeof(float));
        at += n;
    }
}

int sched_mp_agree_bad(sched_mp *m, int id, int bad, st_error *err)
{
    st_cluster *c = m->s->o.cluster;
    double v = bad;
    if (st_cluster_control(c, id, &v, 1, 0, err) != ST_OK)
        st_cluster_abort(c, err);
    return v > 0;
}

void sched_mp_apply_parts(sched_mp *m, float lr, long it)
{
    st_sched *s = m->s;
    st_ps *ps = s->ps;
    for (int k = -1; k < m->n_ranges; k++) {
        size_t b = k < 0 ? 0 : m->ranges[k][0], e = k < 0 ? ps->shared_from : m->ranges[k][1];
        if (e > b)
            st_ps_apply_range(ps, b, e, ps->state + b, ps->count, s->o.solver, lr, it,
                              s->o.intra);
    }
}

/* Across nodes: this rank's parts of the model-parallel parameters and the
 * buffer their gradients are all-reduced in (one worker per rank). */
static st_status nodes_init(sched_mp *m, st_error *err)
{
    const st_sched *s = m->s;
    if (s->T != 1)
        return st_fail(err, ST_EINTERNAL, "--mp-group %d with %d workers: one worker per rank",
                       s->o.mp_group, s->T);
    if (s->o.part)
        return st_fail(err, ST_EINTERNAL, "--mp-group %d with the solver state partitioned: "
                       "the blocks are updated where they are summed", s->o.mp_group);
    int max = 4 * s->net->n_layers;
    m->ranges = st_calloc((size_t)max, sizeof *m->ranges, "model-parallel ranges", err);
    if (!m->ranges)
        return ST_ENOMEM;
    m->n_ranges = st_net_mp_ranges(s->net, mp_place(&s->o), s->o.mp_group, m->ranges, max);
    for (int k = 0; k < m->n_ranges; k++)
        m->floats += m->ranges[k][1] - m->ranges[k][0];
    m->pack = st_alloc_aligned((m->floats ? m->floats : 1) * sizeof(float),
                               "model-parallel gradients", err);
    return m->pack ? ST_OK : ST_ENOMEM;
}

void sched_mp_free(sched_mp *m)
{
    if (!m)
        return;
    if (m->ready) {
        st_barrier_destroy(&m->barrier);
        pthread_mutex_destroy(&m->lock);
    }
    for (int k = 0; k < m->n_buf; k++)
        st_free_aligned(m->buf[k].p);
    free(m->buf);
    free(m->ranges);
    st_free_aligned(m->pack);
    free(m);
}

st_status sched_mp_create(sched_mp **out, st_sched *s, st_error *err)
{
    const st_sched_opts *o = &s->o;
    *out = NULL;
    if (!o->hybrid)
        return ST_OK;
    if (o->sync != ST_SYNC_BSP || o->overlap || o->pipeline)
        return st_fail(err, ST_EINTERNAL, "hybrid parallelism is bulk-synchronous and "
                       "without --overlap or --pipeline");
    sched_mp *m = st_calloc(1, sizeof *m + (size_t)s->T * sizeof m->w[0],
                            "model-parallel layers' state", err);
    if (!m)
        return ST_ENOMEM;
    m->s = s;
    st_status st = ST_OK;
    if (st_barrier_init(&m->barrier, s->T))
        st = st_fail(err, ST_EINTERNAL, "cannot create the model-parallel layers' barrier");
    else if (pthread_mutex_init(&m->lock, NULL)) {
        st_barrier_destroy(&m->barrier);
        st = st_fail(err, ST_EINTERNAL, "cannot create the model-parallel layers' lock");
    }
    m->ready = st == ST_OK;
    m->n_sizes = sched_mp_sizes(o, m->sizes);
    if (st == ST_OK && sched_mp_nodes(o))
        st = nodes_init(m, err);
    if (st != ST_OK) {
        sched_mp_free(m);
        return st;
    }
    *out = m;
    return ST_OK;
}
