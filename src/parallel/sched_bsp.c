/* Bulk-synchronous (BSP) runs: st_sched_run_bsp and the workers' loop of
 * scheduler.h's "Bulk-synchronous" paragraph. A BSP run is one command: the
 * workers loop over its iterations on their own, meeting at `mid` (after
 * backward) and `iter_end` (after the update) only among themselves, and
 * leave a record per iteration in a ring the scheduler thread reads. */
#include "parallel/scheduler.h"

#include <math.h>
#include <signal.h>
#include <string.h>

#include "base/clock.h"
#include "sched_internal.h"

/* Forward and backward of this worker's shard of a BSP batch; a worker
 * without samples contributes a zero gradient. With model-parallel layers
 * (hybrid) every worker makes both passes, whatever happens, as the others
 * wait for it in those layers: without samples, or after its forward
 * failed, it only takes its part in them (st_replica_forward). */
static st_status bsp_compute(st_worker *w, const st_batch_slot *b, long it, double *loss,
                             int *images)
{
    st_sched *s = w->s;
    int first, count, hybrid = s->o.hybrid;
    st_shard_of(b->n, s->T, w->id, &first, &count);
    *loss = 0.0;
    *images = count;
    w->mp_it = it;
    w->mp_scale = 1.0f / (float)b->n;
    w->mp_bad = 0;
    if (count == 0)
        memset(s->ps->grads[w->id], 0, st_ps_grad_floats(s->ps->table, w->id,
                                                         s->ps->shared_from,
                                                         s->ps->tail_applied) * sizeof(float));
    if (count == 0 && !hybrid)
        return ST_OK;
    size_t per = st_shape_count(s->net->input);
    st_shard shard = {count, b->x + (size_t)first * per, b->labels + first, b->sample0 + first,
                      first, b->n};
    st_step_info info = {1, s->o.seed, it};
    st_status st = st_replica_forward(&w->replica, s->ps->weights, &shard, &info, loss, &w->err);
    if (st != ST_OK && hybrid)
        shard.n = 0;
    if (st == ST_OK || hybrid) {
        st_status bst = st_replica_backward(&w->replica, s->ps->weights, s->ps->grads[w->id],
                                            &shard, &info, NULL, &w->err);
        if (st == ST_OK)
            st = bst;
    }
    return st;
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
    st_status st = s->o.part ? st_cluster_reduce_scatter(s->o.cluster, w->id, it, slice, len,
                                                         &w->err)
                             : st_cluster_allreduce(s->o.cluster, w->id, it, slice, len,
                                                    &w->err);
    if (st != ST_OK)
        st_cluster_abort(s->o.cluster, &w->err);
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

/* Multi-node: sum this node's view of iteration it over the nodes, on
 * worker r's communicator (every worker of a node passes the same values
 * and gets the same sums): failures, stop requests (counted per kind:
 * SIGINT, any other signal, st_sched_request_stop), loss, images. A
 * signal outranks a request. A failing MPI call or a peer that
 * does not answer within the timeout leaves the others waiting, so it
 * aborts every rank; rank 0 says, at a segment's last iteration, that it
 * will be alone after it (s->alone_after), and the others wait for it
 * without a timeout at the next iteration (w->patient_at). */
static void sum_over_nodes(st_worker *w, long it, iter_record *rec, int *failed, int *stop,
                           double *loss, int *images)
{
    st_sched *s = w->s;
    int rank = st_cluster_rank(s->o.cluster);
    double v[7] = {*failed, *stop == SIGINT, *stop > 0 && *stop != SIGINT,
                   *stop == ST_SCHED_STOP_REQUESTED, *loss, *images,
                   rank == 0 && it == s->last - 1 && s->alone_after};
    int patient = it == w->patient_at && rank != 0;
    if (st_cluster_control(s->o.cluster, w->id, v, 7, patient, &w->err) != ST_OK) {
        st_error_prefix(&w->err, "iteration %ld: ", it);
        st_cluster_abort(s->o.cluster, &w->err);
    }
    *failed = v[0] > 0;
    *stop = v[1] > 0   ? SIGINT
            : v[2] > 0 ? (*stop > 0 ? *stop : SIGTERM)
            : v[3] > 0 ? ST_SCHED_STOP_REQUESTED
                       : 0;
    *loss = v[4];
    *images = (int)v[5];
    if (v[6] > 0)
        w->patient_at = it + 1;
    if (w->id == 0) {
        rec->nodes_loss = v[4];
        rec->nodes_images = v[5];
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
 * finite, but other slices were updated: they are not to be kept). With
 * --rank-update partitioned each node checks only its part of the slice
 * (the one it summed), and the all-gather of the new weights carries the
 * nodes' verdicts, so all of them stop at the same iteration. When the
 * model-parallel layers apply their gradients in backward
 * (ps->tail_applied), a stop asked after they began is put off until the
 * iteration is finished, so that no iteration is left half applied. */
void sched_worker_bsp(st_worker *w)
{
    st_sched *s = w->s;
    int r = w->id;
    for (long it = s->first; it < s->last; it++) {
        iter_record *rec = &s->rec[it % RECORDS];
        double t0 = st_now();
        const st_batch_slot *b = st_batchq_wait(s->q, it);
        double t1 = st_now();
        if (r == 0) /* before the model-parallel layers' first barrier of it */
            rec->mp_decided = 0;
        if (s->overlap && r == 0)
            st_overlap_begin(s->overlap, it, 1.0f / (float)b->n_total);
        st_status st = b->stop ? ST_OK : bsp_compute(w, b, it, &rec->loss[r], &rec->images[r]);
        if (s->overlap)
            st_overlap_worker_end(s->overlap, r);
        rec->status[r] = st;
        if (st != ST_OK)
            w->status = st;
        if (r == 0)
            rec->stop_request = sched_stop_flag(s);
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
        int stop_after = 0; /* a stop put off until this iteration is applied */
        if (rec->mp_decided && rec->mp_stop && !stop)
            stop = rec->mp_stop;
        else if (rec->mp_decided && !rec->mp_stop && stop && !failed && isfinite(loss)) {
            stop_after = stop;
            stop = 0;
        }
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
                                                   s->o.intra) ||
                               w->mp_bad;
        else if (!s->overlap)
            dst = slice_reduce(w, 1.0f / (float)images);
        if (s->o.cluster && !s->overlap) {
            double c0 = st_now();
            sum_slice_over_nodes(w, it, slice, slice_len);
            comm += st_now() - c0;
        }
        if (!fused)
            rec->grad_bad[r] = dst != ST_OK || !reduced_finite(w, slice, slice_len) ||
                               w->mp_bad;
        double t4 = st_now();
        if (!fused && dst == ST_OK && !rec->grad_bad[r]) /* a non-finite slice is not applied */
            dst = slice_apply(w, it);
        if (dst != ST_OK) { /* a device failure: stop as after a bad gradient */
            w->status = dst;
            rec->grad_bad[r] = 1;
        }
        double gathered = s->o.part ? gather_slice_over_nodes(w, &rec->grad_bad[r]) : 0.0;
        if (w->replica.backend->iteration_end)
            w->replica.backend->iteration_end(w->replica.bctx, it);
        double t5 = st_now();
        rec->time[r] = (st_time_split){t1 - t0, t2 - t1, t3 - t2, t4 - t3 - comm,
                                       t5 - t4 - gathered, comm + gathered};
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
        if (stop_after) {
            stop_workers(s, r, it + 1, ST_OK, stop_after);
            break;
        }
    }
    if (r == 0) { /* wake the scheduler if it waits for more */
        pthread_mutex_lock(&s->clock_lock);
        pthread_cond_broadcast(&s->clock_moved);
        pthread_mutex_unlock(&s->clock_lock);
    }
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
                           int alone_after, st_iteration_fn done, void *ctx,
                           st_error *err)
{
    if (q->depth + 2 > RECORDS)
        return st_fail(err, ST_EINTERNAL, "batch ring deeper than the iteration records");
    s->q = q;
    s->first = first;
    s->last = last;
    s->alone_after = alone_after;
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
    st_status wst = sched_collect_status(s, err);
    if (wst != ST_OK)
        return wst;
    if (s->stop_status == ST_EDIVERGED) {
        char where[256];
        sched_first_nonfinite(s, 0, s->T, s->rec[s->stopped_at % RECORDS].images, where,
                              sizeof where);
        return st_fail(err, ST_EDIVERGED, "iteration %ld: training diverged: %s (try a lower "
                       "learning_rate)", s->stopped_at, where);
    }
    if (s->stop_status == ST_EPEER)
        return st_fail(err, ST_EPEER, "iteration %ld: another rank failed", s->stopped_at);
    return st_fail(err, ST_EIO, "iteration %ld: the input pipeline stopped", s->stopped_at);
}
