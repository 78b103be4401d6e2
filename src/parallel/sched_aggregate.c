/* The BSP run's aggregation strategies (sched_internal.h's
 * sched_aggregation): after the workers agree, how worker r sums slice r of
 * every worker's gradient (reduce: on the host, on a backend's device,
 * then across nodes) and updates the weights of slice r (apply), a row of
 * a small table each, chosen once at the scheduler's creation; the loop
 * that calls them is sched_bsp.c's. */
#include "base/clock.h"
#include "sched_internal.h"

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
    /* the head every worker has, then the model-parallel tail only grads[0] has */
    size_t b = s->ps->slice[w->id], e = s->ps->slice[w->id + 1], mid = s->ps->shared_from;
    mid = mid < b ? b : mid > e ? e : mid;
    st_status st = ST_OK;
    if (mid > b)
        st = be->slice_reduce(w->replica.bctx, s->ps->grads, s->ps->n_workers, b, mid, scale,
                              &w->err);
    if (st == ST_OK && e > mid)
        st = be->slice_reduce(w->replica.bctx, s->ps->grads, 1, mid, e, scale, &w->err);
    return st;
}

/* The update of worker w's slice, or with --rank-update partitioned of
 * this node's part of it, always on the host (a backend's device update
 * takes the solver state of the whole arena). */
static st_status slice_apply(st_worker *w, long it)
{
    st_sched *s = w->s;
    const st_backend *be = w->replica.backend;
    float lr = st_lr_at(&s->o.solver->lr, it);
    if (s->o.part) {
        st_ps_part_apply(s->o.part, s->ps, w->id, s->o.solver, lr, it, s->o.intra);
        return ST_OK;
    }
    if (!be->slice_apply) {
        st_ps_apply(s->ps, w->id, s->o.solver, lr, it, s->o.intra);
        return ST_OK;
    }
    st_solver_step step = {s->o.solver, s->ps->table, lr, it};
    return be->slice_apply(w->replica.bctx, &step, s->ps->slice[w->id], s->ps->slice[w->id + 1],
                           s->ps->weights, s->ps->state, s->ps->count, s->ps->grads[0], &w->err);
}

/* Multi-node: slice r's gradient summed over the nodes, all-reduced, or
 * with --rank-update partitioned reduce-scattered (this node's part alone
 * summed). A failure leaves the others waiting: it ends every rank. */
static void sum_slice_over_nodes(st_worker *w, long it, float *slice, size_t len)
{
    st_sched *s = w->s;
    double t0 = st_now();
    st_status st = s->o.part ? st_cluster_reduce_scatter(s->o.cluster, w->id, it, slice, len,
                                                         &w->err)
                             : st_cluster_allreduce(s->o.cluster, w->id, it, slice, len,
                                                    &w->err);
    if (st != ST_OK)
        st_cluster_abort(s->o.cluster, &w->err);
    st_trace_track *tr = st_trace_at(w->trace, it);
    if (tr) {
        st_trace_event e = {.name = s->o.part ? "reduce-scatter" : "all-reduce", .index = -1,
                            .cat = "comm", .iteration = it, .text_key = "algorithm",
                            .text = st_cluster_algorithm(s->o.cluster, w->id),
                            .key = {"bytes"}, .value = {(double)len * sizeof(float)},
                            .t0 = t0, .t1 = st_now()};
        st_trace_add(tr, &e);
    }
}

/* Whether slice r's reduced gradient is finite: the whole slice, or with
 * --rank-update partitioned this node's part, the only one summed here. */
static int reduced_finite(const st_worker *w, const float *slice, size_t len)
{
    const st_sched *s = w->s;
    if (!s->o.part)
        return st_all_finite(slice, len);
    size_t b, e;
    st_ps_part_range(s->o.part, w->id, &b, &e);
    return st_all_finite(s->ps->grads[0] + b, e - b);
}

/* --rank-update partitioned, after this node updated its part of slice r:
 * every node's new weights of the slice to every node. *bad: in, whether
 * this node's part was not applied (its gradient was not finite, or the
 * reduction failed); out, whether any node's was, so that every node stops
 * at this iteration. Returns the seconds it took; a failure ends every
 * rank. */
static double gather_slice_over_nodes(st_worker *w, int *bad)
{
    st_sched *s = w->s;
    int r = w->id;
    double t0 = st_now();
    if (st_cluster_allgather(s->o.cluster, r, s->ps->weights + s->ps->slice[r],
                             s->ps->slice[r + 1] - s->ps->slice[r], bad, &w->err) != ST_OK)
        st_cluster_abort(s->o.cluster, &w->err);
    return st_now() - t0;
}

/* ---- the strategies ----
 *
 * How is fixed for the run, chosen once at the scheduler's creation
 * (sched_bsp_aggregation):
 *   fused    one node, on the host: sum, check and update in one pass over
 *            memory (st_ps_reduce_apply; its time counts as aggregation)
 *   slice    one node, a backend device's hooks for either (slice_reduce,
 *            slice_apply: the cpe backend's core group), the host for the
 *            other
 *   cluster  several nodes: the node's slice summed, then over the nodes
 *            (all-reduce; with --rank-update partitioned, reduce-scatter and
 *            an all-gather of the new weights, each node updating its part)
 *   overlap  several nodes with --overlap: the buckets were all-reduced
 *            during backward; the slice is only checked and applied
 * and hybrid parallelism's two (sched_mp.c): on one node, the model-parallel
 * tail applied in backward, fused with the tail's verdict; across nodes
 * with --mp-group, cluster's over the head and the rank's blocks of the
 * tail. A slice whose reduced gradient is not finite is not applied. */

/* A device's failure: the worker's status, and the slice counts as bad. */
static int device_failed(st_worker *w, st_status st)
{
    if (st == ST_OK)
        return 0;
    w->status = st;
    return 1;
}

static int fused_reduce(st_worker *w, long it, float scale, bsp_slice *sl)
{
    st_sched *s = w->s;
    (void)sl;
    return !st_ps_reduce_apply(s->ps, w->id, scale, s->o.solver, st_lr_at(&s->o.solver->lr, it),
                               it, s->o.intra);
}

static int fused_apply(st_worker *w, long it, int bad, bsp_slice *sl)
{
    (void)w;
    (void)it;
    (void)sl;
    return bad; /* done by fused_reduce */
}

static int slice_reduce_checked(st_worker *w, long it, float scale, bsp_slice *sl)
{
    (void)it;
    st_status st = slice_reduce(w, scale);
    return device_failed(w, st) || !reduced_finite(w, sl->grad, sl->len);
}

static int slice_apply_checked(st_worker *w, long it, int bad, bsp_slice *sl)
{
    (void)sl;
    return bad || device_failed(w, slice_apply(w, it));
}

static int cluster_reduce(st_worker *w, long it, float scale, bsp_slice *sl)
{
    st_status st = slice_reduce(w, scale);
    double c0 = st_now();
    sum_slice_over_nodes(w, it, sl->grad, sl->len);
    int bad = device_failed(w, st) || !reduced_finite(w, sl->grad, sl->len);
    sl->comm += st_now() - c0;
    return bad;
}

static int cluster_apply(st_worker *w, long it, int bad, bsp_slice *sl)
{
    bad = slice_apply_checked(w, it, bad, sl);
    if (w->s->o.part) {
        sl->gathered = gather_slice_over_nodes(w, &bad);
        sl->comm += sl->gathered;
    }
    return bad;
}

static int overlap_reduce(st_worker *w, long it, float scale, bsp_slice *sl)
{
    (void)it;
    (void)scale;
    return !reduced_finite(w, sl->grad, sl->len);
}

/* Hybrid on one node, the model-parallel tail applied in backward
 * (ps->tail_applied): fused, and a gradient of the tail that was not
 * finite there (sched_mp_bad) counts as the slice's. */
static int hybrid_fused_reduce(st_worker *w, long it, float scale, bsp_slice *sl)
{
    return fused_reduce(w, it, scale, sl) || sched_mp_bad(w->s->mp, w->id, NULL);
}

/* Hybrid across nodes (--mp-group, one worker, its slice the whole arena):
 * the node's sum, the head all-reduced over every rank and the rank's
 * blocks of the tail over the ranks holding them, the verdict agreed over
 * the ranks; the update of the head and of the rank's blocks alone
 * (sched_mp.c). */
static int hybrid_nodes_reduce(st_worker *w, long it, float scale, bsp_slice *sl)
{
    st_sched *s = w->s;
    st_status st = slice_reduce(w, scale);
    double c0 = st_now();
    size_t head = s->ps->shared_from;
    if (head > 0)
        sum_slice_over_nodes(w, it, sl->grad, head);
    sched_mp_sum_blocks(s->mp, sl->grad, &w->err);
    int bad = device_failed(w, st) || !reduced_finite(w, sl->grad, sl->len);
    bad = sched_mp_agree_bad(s->mp, w->id, bad, &w->err);
    sl->comm += st_now() - c0;
    return bad;
}

static int hybrid_nodes_apply(st_worker *w, long it, int bad, bsp_slice *sl)
{
    (void)sl;
    if (!bad)
        sched_mp_apply_parts(w->s->mp, st_lr_at(&w->s->o.solver->lr, it), it);
    return bad;
}

static const sched_aggregation aggregation_fused = {"fused", fused_reduce, fused_apply};
static const sched_aggregation aggregation_slice = {"slice", slice_reduce_checked,
                                                    slice_apply_checked};
static const sched_aggregation aggregation_cluster = {"cluster", cluster_reduce, cluster_apply};
static const sched_aggregation aggregation_overlap = {"overlap", overlap_reduce, cluster_apply};
/* hybrid's, named in the trace as the rows they extend */
static const sched_aggregation aggregation_hybrid_fused = {"fused", hybrid_fused_reduce,
                                                           fused_apply};
static const sched_aggregation aggregation_hybrid_nodes = {"cluster", hybrid_nodes_reduce,
                                                           hybrid_nodes_apply};

const sched_aggregation *sched_bsp_aggregation(const st_sched_opts *o, int overlap)
{
    if (overlap)
        return &aggregation_overlap;
    if (sched_mp_nodes(o))
        return &aggregation_hybrid_nodes;
    if (o->cluster)
        return &aggregation_cluster;
    if (st_sched_tail_applied(o))
        return &aggregation_hybrid_fused;
    if (!o->backend->slice_reduce && !o->backend->slice_apply)
        return &aggregation_fused;
    return &aggregation_slice;
}
