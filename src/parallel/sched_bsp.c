/* Bulk-synchronous (BSP) runs: st_sched_run_bsp and the workers' loop of
 * scheduler.h's "Bulk-synchronous" paragraph. A BSP run is one command: the
 * workers loop over its iterations on their own, meeting at `mid` (after
 * backward) and `iter_end` (after the update) only among themselves, and
 * leave a record per iteration in a ring the scheduler thread reads. How
 * each worker sums and applies its slice between the two is the run's
 * aggregation strategy (sched_aggregate.c). */
#include "parallel/scheduler.h"

#include <math.h>
#include <signal.h>
#include <stdio.h>
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
    int first, count, hybrid = s->mp != NULL;
    st_shard_of(b->n, s->T, w->id, &first, &count);
    *loss = 0.0;
    *images = count;
    sched_mp_begin(s->mp, w->id, it, b->n, b->n_total);
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
    if (s->accum) /* subdivisions: the shard in pieces (never hybrid) */
        return sched_accum_compute(s->accum, w, s->ps->weights, s->ps->grads[w->id], &shard,
                                   &info, loss);
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

/* ---- the iteration's phases ---- */

/* What the workers agreed on after computing: the batch's loss and images
 * (over every node), whether a worker (or a node) failed, and whether to
 * stop now (stop) or after applying this iteration (stop_after). */
typedef struct bsp_agreement {
    double loss;
    int images, failed, failed_here, stop, stop_after;
    double comm; /* seconds spent on the other nodes */
} bsp_agreement;

/* After the update: worker r's slice of the weights, and with the
 * model-parallel tail applied in backward (which every worker finished
 * before `mid`) its part of the tail, converted into the bf16 copy
 * (bf16_weights.h). Returns whether the slice is bad: a failure is the
 * worker's status, as a device's. */
static int refresh_bf16(st_worker *w, int bad)
{
    st_sched *s = w->s;
    const st_ps *ps = s->ps;
    if (!s->bf16)
        return bad;
    size_t tb, te;
    st_ps_sub_range(ps->shared_from, ps->count, w->id, s->T, &tb, &te);
    st_status st = sched_bf16_refresh(w, ps->slice[w->id], ps->slice[w->id + 1]);
    if (st == ST_OK && ps->tail_applied)
        st = sched_bf16_refresh(w, tb, te);
    if (st == ST_OK)
        return bad;
    w->status = st;
    return 1;
}

/* --pipeline layer: until iteration it's buckets are all applied (or
 * skipped), whatever the verdict. */
static void pipeline_settle(st_sched *s, long it)
{
    long bad_it;
    st_status why;
    char what[8];
    if (it >= s->first)
        st_pipeline_wait(s->pipeline, it, &bad_it, &why, what, sizeof what);
}

/* --pipeline layer: whether iteration it is skipped, a stop asked before
 * it began: decided by the first worker to reach it, from the stop flag
 * then, and the same for every worker (one that computed beside one that
 * skipped would leave its buckets half summed). */
static int pipeline_skips(st_sched *s, iter_record *rec, long it)
{
    long seen = atomic_load(&rec->begins);
    if (seen >= 0 && seen / 2 == it)
        return (int)(seen % 2);
    long mine = 2 * it + (sched_stop_flag(s) != 0);
    if (atomic_compare_exchange_strong(&rec->begins, &seen, mine))
        return (int)(mine % 2);
    return (int)(seen % 2); /* another worker decided first: seen is its decision */
}

/* Compute: forward and backward of the worker's shard (nothing for a stop
 * batch), its bucket of the overlapped all-reduce, and its record. */
static void compute_shard(st_worker *w, const st_batch_slot *b, long it, iter_record *rec)
{
    st_sched *s = w->s;
    int r = w->id;
    if (r == 0) /* before the model-parallel layers' first barrier of it */
        sched_mp_undecide(s->mp, it);
    if (s->overlap && r == 0)
        st_overlap_begin(s->overlap, it, 1.0f / (float)b->n_total);
    int first, count;
    st_shard_of(b->n, s->T, r, &first, &count);
    /* --pipeline layer on one node: a stop asked before the iteration
     * begins is met before it, as without the pipeline: nothing of it is
     * computed, so nothing of it is applied (st_overlap_worker_void).
     * Across nodes each rank would see its own stop flag, one skipping
     * what another computes (their buckets summed half void): every rank
     * computes it, and the stop, agreed in its control sum, comes after it. */
    int skip = b->stop || (s->pipeline && !s->o.cluster && pipeline_skips(s, rec, it));
    if (s->pipeline && (skip || count == 0)) /* it writes its gradient without a forward
                                                that waited for the buckets reading it */
        pipeline_settle(s, it - 1);
    rec->loss[r] = 0.0;
    rec->images[r] = 0;
    st_status st = skip ? ST_OK : bsp_compute(w, b, it, &rec->loss[r], &rec->images[r]);
    if (st == ST_OK) /* a failure before: the bf16 copy at the run's start */
        st = w->status;
    if (s->pipeline && (skip || st != ST_OK)) {
        pipeline_settle(s, it - 1);
        st_overlap_worker_void(s->overlap, r);
    } else if (s->overlap) {
        st_overlap_worker_end(s->overlap, r);
    }
    rec->status[r] = st;
    if (st != ST_OK)
        w->status = st;
    if (r == 0)
        rec->stop_request = sched_stop_flag(s);
}

/* Agree (after `mid`, every worker with the same records): the sums over
 * the workers and the nodes, the overlapped buckets finished, and the
 * stop decision; a stop asked after the model-parallel layers began to
 * apply the iteration is put off until it is finished. */
static bsp_agreement agree(st_worker *w, int stop_batch, long it, iter_record *rec)
{
    st_sched *s = w->s;
    double t0 = st_now();
    bsp_agreement a = {0.0, 0, stop_batch, 0, rec->stop_request, 0, 0.0};
    for (int k = 0; k < s->T; k++) {
        a.loss += rec->loss[k];
        a.images += rec->images[k];
        a.failed |= rec->status[k] != ST_OK;
    }
    a.failed_here = a.failed;
    st_trace_track *tr = st_trace_at(w->trace, it);
    if (s->o.cluster)
        sum_over_nodes(w, it, rec, &a.failed, &a.stop, &a.loss, &a.images);
    double t1 = tr ? st_now() : 0.0;
    if (tr && s->o.cluster)
        st_trace_span(tr, "comm", "control sum", it, t0, t1);
    if (s->overlap && !s->pipeline) /* every rank finishes the iteration's buckets, even
                                       to stop */
        st_overlap_wait(s->overlap, it);
    if (tr && s->overlap && !s->pipeline)
        st_trace_span(tr, "wait", "wait: buckets", it, t1, st_now());
    a.comm = s->o.cluster ? st_now() - t0 : 0.0;
    int mp_stop = 0;
    if (!sched_mp_decided(s->mp, it, &mp_stop))
        return a;
    if (mp_stop && !a.stop)
        a.stop = mp_stop;
    else if (!mp_stop && a.stop && !a.failed && isfinite(a.loss)) {
        a.stop_after = a.stop;
        a.stop = 0;
    }
    return a;
}

/* Iteration it is finished: its record is the scheduler thread's to read
 * (worker 0). */
static void complete_iteration(st_sched *s, long it)
{
    pthread_mutex_lock(&s->clock_lock);
    atomic_store(&s->completed, it + 1);
    pthread_cond_broadcast(&s->clock_moved);
    pthread_mutex_unlock(&s->clock_lock);
}

/* Finish (after `iter_end`): a bad slice anywhere stops every worker; else
 * the iteration is complete. Returns 0 to leave the loop. */
static int finish_iteration(st_worker *w, long it, iter_record *rec, int stop_after)
{
    st_sched *s = w->s;
    int r = w->id;
    int grad_bad = 0;
    for (int k = 0; k < s->T; k++)
        grad_bad |= rec->grad_bad[k];
    if (grad_bad) {
        stop_workers(s, r, it, ST_EDIVERGED, 0);
        return 0;
    }
    if (r == 0) {
        st_batchq_release(s->q, it);
        complete_iteration(s, it);
    }
    if (stop_after) {
        stop_workers(s, r, it + 1, ST_OK, stop_after);
        return 0;
    }
    return 1;
}

/* ---- --pipeline layer (pipeline.h) ----
 *
 * Worker r's loop: take the shard, compute (each layer's forward waiting
 * for its bucket of the previous iteration; the buckets reduced and
 * applied as backward completes them), settle the previous iteration (its
 * buckets are applied by now: the forward waited for them), agree at
 * `mid`. No update phase and no `iter_end`: iteration it is complete once
 * its buckets are, which the workers learn at iteration it + 1's agreement,
 * or at the run's end, where they meet at `iter_end` once. A stop agreed
 * after the iteration began lets it finish (its buckets are being applied
 * already) and stops after it; one seen before it began leaves it
 * unapplied on one node (compute_shard; across nodes it runs); a failure,
 * a stop batch or a non-finite loss stops at once, the buckets in flight
 * drained (a failed worker's are not finite: nobody applies them); a
 * non-finite bucket stops every rank at its iteration, the run diverged. */
static const sched_phase pipe_phases[] = {
    {"take the shard", "wait"}, {"compute", "phase"}, {"settle the previous iteration", "wait"},
    {"wait: mid", "wait"}, {"agree", "phase"},
};

/* Iteration it's buckets all applied or skipped: this worker's share of
 * its time split (exposed: what the next forward waited for them).
 * Returns st_pipeline_split's 1 (all applied), 0 (none) or -1; a bad
 * bucket since the run began makes it -1, with why and what. */
static int pipeline_settled(st_worker *w, long it, double exposed, long *bad_it,
                            st_status *why, char *what, size_t len)
{
    st_sched *s = w->s;
    st_time_split *ts = &s->rec[it % RECORDS].time[w->id];
    double busy, behind;
    int good = st_pipeline_wait(s->pipeline, it, bad_it, why, what, len);
    int applied = st_pipeline_split(s->pipeline, it, &busy, &behind);
    double rest = busy - behind - exposed;
    ts->hidden_backward = behind;
    ts->exposed = exposed;
    ts->hidden_forward = rest > 0.0 ? rest : 0.0;
    return good || applied == 0 ? applied : -1;
}

/* Stop at iteration it's bad bucket: diverged (why ST_EDIVERGED, the
 * non-finite gradient named in what), or its hook failed (worker 0's
 * failure, what its message). */
static void pipeline_diverged(st_worker *w, long it, st_status why, const char *what)
{
    if (w->id == 0 && why == ST_EDIVERGED)
        snprintf(w->s->diverged, sizeof w->s->diverged, "%s", what);
    else if (w->id == 0)
        w->status = st_fail(&w->err, why, "iteration %ld: %s", it, what);
    stop_workers(w->s, w->id, it, why, 0);
}

/* The loop up to its last iteration's agreement; returns the iteration to
 * settle after it (-1: none, stopped), *stop_after the stop agreed. */
static long pipeline_iterations(st_worker *w, int *stop_after)
{
    st_sched *s = w->s;
    int r = w->id;
    long bad_it = -1;
    st_status why = ST_EDIVERGED; /* also when no bucket was applied */
    char what[192];
    for (long it = s->first; it < s->last; it++) {
        iter_record *rec = &s->rec[it % RECORDS];
        st_trace_track *tr = st_trace_at(w->trace, it);
        double t[6] = {st_now()};
        const st_batch_slot *b = st_batchq_wait(s->q, it);
        t[1] = st_now();
        w->pipe_wait = 0.0;
        compute_shard(w, b, it, rec);
        int stop_batch = b->stop;
        t[2] = st_now();
        st_pipeline_computed(s->pipeline, it, t[2]);
        int prev = it == s->first ? 1 : pipeline_settled(w, it - 1, w->pipe_wait, &bad_it, &why,
                                                         what, sizeof what);
        t[3] = st_now();
        st_barrier_wait(&s->mid);
        t[4] = st_now();
        if (r == 0) /* every worker is done with the batch */
            st_batchq_release(s->q, it);
        bsp_agreement a = agree(w, stop_batch, it, rec);
        t[5] = st_now();
        int nodes = s->o.cluster != NULL;
        rec->time[r] = (st_time_split){
            .data = t[1] - t[0], .compute = t[2] - t[1] - w->pipe_wait,
            .barrier = t[4] - t[2] + (nodes ? 0.0 : w->pipe_wait),
            .communicate = a.comm + (nodes ? w->pipe_wait : 0.0)};
        sched_trace_iteration(tr, it, pipe_phases, 5, t, "aggregation", "pipeline");
        if (prev != 1) {
            pipeline_settle(s, it);
            pipeline_diverged(w, bad_it, why, what);
            return -1;
        }
        if (r == 0 && it > s->first)
            complete_iteration(s, it - 1);
        if (a.failed || !isfinite(a.loss)) {
            pipeline_settle(s, it);
            stop_workers(s, r, it, a.failed ? (a.failed_here ? ST_EINTERNAL : ST_EPEER)
                                            : ST_EDIVERGED, 0);
            return -1;
        }
        if (a.stop) {
            *stop_after = a.stop;
            return it;
        }
    }
    return s->last - 1;
}

/* Worker r's pipelined loop over [first, last). */
static void pipeline_worker(st_worker *w)
{
    st_sched *s = w->s;
    int stop_after = 0;
    long last = pipeline_iterations(w, &stop_after), bad_it = -1;
    if (last < s->first)
        return;
    st_status why = ST_EDIVERGED; /* also when no bucket was applied */
    char what[192];
    int applied = pipeline_settled(w, last, 0.0, &bad_it, &why, what, sizeof what);
    st_barrier_wait(&s->iter_end); /* every worker's share of its split written */
    if (applied < 0 || (applied == 0 && !stop_after)) {
        pipeline_diverged(w, bad_it, why, what);
        return;
    }
    if (applied && w->id == 0)
        complete_iteration(s, last);
    if (stop_after)
        stop_workers(s, w->id, last + applied, ST_OK, stop_after);
}

/* Worker r's BSP loop over [first, last): take the shard, compute, agree
 * (at `mid`), reduce the slice, apply it, finish (at `iter_end`). After
 * `mid` every worker sees the same records, so all take the same decision
 * to stop (a failure, a stop batch, a non-finite loss, a stop request)
 * before anyone updates a slice. A non-finite gradient is seen only after
 * the reduction, each worker checking its slice and not applying it if so;
 * the workers then stop together after `iter_end`, the iteration
 * unfinished (the weights stay finite, but other slices were updated: they
 * are not to be kept). With --rank-update partitioned each node checks
 * only its part of the slice (the one it summed), and the all-gather of
 * the new weights carries the nodes' verdicts, so all of them stop at the
 * same iteration. */
static const sched_phase bsp_phases[] = {
    {"take the shard", "wait"}, {"compute", "phase"}, {"wait: mid", "wait"},
    {"agree", "phase"}, {"reduce the slice", "phase"}, {"apply", "phase"},
    {"wait: iteration end", "wait"},
};

static void bsp_worker(st_worker *w)
{
    st_sched *s = w->s;
    int r = w->id;
    double end_wait = 0.0; /* the previous iteration's wait at iter_end */
    for (long it = s->first; it < s->last; it++) {
        iter_record *rec = &s->rec[it % RECORDS];
        st_trace_track *tr = st_trace_at(w->trace, it);
        double t0 = st_now();
        const st_batch_slot *b = st_batchq_wait(s->q, it);
        double t1 = st_now();
        compute_shard(w, b, it, rec);
        double t2 = st_now();
        st_barrier_wait(&s->mid);
        double t3 = st_now();
        bsp_agreement a = agree(w, b->stop, it, rec);
        double t[8] = {t0, t1, t2, t3, tr ? st_now() : 0.0};
        if (a.failed || !isfinite(a.loss) || a.stop) { /* the iteration up to its agreement */
            sched_trace_iteration(tr, it, bsp_phases, 4, t, "aggregation", s->agg->name);
            stop_workers(s, r, it, a.failed ? (a.failed_here ? ST_EINTERNAL : ST_EPEER)
                                            : a.stop ? ST_OK : ST_EDIVERGED, a.stop);
            break;
        }
        bsp_slice sl = {s->ps->grads[0] + s->ps->slice[r],
                        s->ps->slice[r + 1] - s->ps->slice[r], a.comm, 0.0};
        rec->grad_bad[r] = s->agg->reduce(w, it, 1.0f / (float)a.images, &sl);
        double t4 = st_now();
        rec->grad_bad[r] = refresh_bf16(w, s->agg->apply(w, it, rec->grad_bad[r], &sl));
        if (w->replica.backend->iteration_end)
            w->replica.backend->iteration_end(w->replica.bctx, it);
        double t5 = st_now();
        rec->time[r] = (st_time_split){.data = t1 - t0, .compute = t2 - t1,
                                       .barrier = t3 - t2 + end_wait,
                                       .aggregate = t4 - t3 - (sl.comm - sl.gathered),
                                       .update = t5 - t4 - sl.gathered, .communicate = sl.comm};
        st_barrier_wait(&s->iter_end);
        double t6 = st_now();
        end_wait = t6 - t5; /* counted with the next iteration's, once reported */
        t[5] = t4;
        t[6] = t5;
        t[7] = t6;
        sched_trace_iteration(tr, it, bsp_phases, 7, t, "aggregation", s->agg->name);
        if (!finish_iteration(w, it, rec, a.stop_after))
            break;
    }
}

void sched_worker_bsp(st_worker *w)
{
    st_sched *s = w->s;
    if (s->pipeline)
        pipeline_worker(w);
    else
        bsp_worker(w);
    if (w->id == 0) { /* wake the scheduler if it waits for more */
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
        st_trace_track *tr = st_trace_at(s->trace, *reported);
        double t0 = tr ? st_now() : 0.0;
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
            it.time.hidden_backward += rec->time[r].hidden_backward / s->T;
            it.time.hidden_forward += rec->time[r].hidden_forward / s->T;
            it.time.exposed += rec->time[r].exposed / s->T;
        }
        if (s->o.cluster) { /* the iteration over every node, not this one's share */
            it.images = (int)rec->nodes_images;
            it.loss = rec->nodes_loss;
        }
        done(ctx, &it);
        if (tr)
            st_trace_span(tr, "report", "report", *reported, t0, st_now());
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
    s->diverged[0] = '\0';
    if (s->pipeline)
        st_pipeline_start(s->pipeline, first);
    else if (s->overlap)
        st_overlap_start(s->overlap, first);
    s->cmd = CMD_BSP;
    st_barrier_wait(&s->start);
    long reported = first;
    while (bsp_running(s, last)) {
        double t0 = st_now();
        pthread_mutex_lock(&s->clock_lock);
        while (bsp_running(s, last) && atomic_load(&s->completed) == reported)
            pthread_cond_wait(&s->clock_moved, &s->clock_lock);
        pthread_mutex_unlock(&s->clock_lock);
        st_trace_track *tr = st_trace_at(s->trace, reported);
        if (tr)
            st_trace_span(tr, "wait", "wait: workers", reported, t0, st_now());
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
        if (s->diverged[0]) /* the pipeline's non-finite bucket */
            snprintf(where, sizeof where, "%s", s->diverged);
        else
            sched_first_nonfinite(s, 0, s->T, s->rec[s->stopped_at % RECORDS].images, where,
                                  sizeof where);
        return st_fail(err, ST_EDIVERGED, "iteration %ld: training diverged: %s (try a lower "
                       "learning_rate)", s->stopped_at, where);
    }
    if (s->stop_status == ST_EPEER)
        return st_fail(err, ST_EPEER, "iteration %ld: another rank failed", s->stopped_at);
    return st_fail(err, ST_EIO, "iteration %ld: the input pipeline stopped", s->stopped_at);
}
