/* Bounded-staleness (SSP) and asynchronous (ASP) runs: st_sched_run_async
 * and the workers' loop of scheduler.h's "Bounded staleness" paragraph.
 * Each worker counts the iterations it finished (its clock, under
 * clock_lock); an SSP worker waits for the slowest clock, and the
 * scheduler thread reports progress as the slowest clock passes each
 * `every` iterations. */
#include "parallel/scheduler.h"

#include <math.h>
#include <string.h>

#include "base/clock.h"
#include "sched_internal.h"

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
    sched_first_nonfinite(w->s, w->id, w->id + 1, &images, where, sizeof where);
    return st_fail(&w->err, ST_EDIVERGED, "iteration %ld: training diverged: %s on worker %d "
                   "(try a lower learning_rate)", it, where, w->id);
}

/* st_ps_apply_own's applied: the slice converted into the bf16 copy. */
static st_status async_applied(void *ctx, size_t b, size_t e)
{
    return sched_bf16_refresh(ctx, b, e);
}

/* SSP / ASP: worker r's shard of every iteration, at its own pace. A
 * failure, a non-finite loss or a non-finite gradient (checked before the
 * update: that worker applies none of it) stops every worker: the others at
 * their next iteration, so one may apply its finite gradient meanwhile,
 * and at a learning rate that diverges that update can overflow a weight
 * (the run's error names the first non-finite thing a worker saw). */
static const sched_phase async_phases[] = {
    {"wait: staleness", "wait"}, {"take the shard", "phase"}, {"compute", "phase"},
    {"apply", "phase"},
};

void sched_worker_async(st_worker *w)
{
    st_sched *s = w->s;
    const st_source *src = s->o.train;
    int B = s->o.batch, r = w->id;
    long ipe = (src->count + B - 1) / B;
    memset(&w->time, 0, sizeof w->time);
    if (w->status != ST_OK) /* the bf16 copy at the run's start failed */
        atomic_store(&s->stopping, 1);
    for (long i = s->first; i < s->last && !atomic_load(&s->stopping) && !sched_stop_flag(s);
         i++) {
        double t0 = st_now();
        if (s->o.sync == ST_SYNC_SSP) {
            pthread_mutex_lock(&s->clock_lock);
            while (i - s->o.staleness > min_clock(s) && !atomic_load(&s->stopping) &&
                   !sched_stop_flag(s))
                pthread_cond_wait(&s->clock_moved, &s->clock_lock);
            pthread_mutex_unlock(&s->clock_lock);
            if (atomic_load(&s->stopping) || sched_stop_flag(s))
                break;
        }
        double t1 = st_now(), read = t1; /* the shard read (for --trace) */
        long epoch = i / ipe, b0 = (i % ipe) * B;
        if (epoch != w->order_epoch) {
            st_order_shuffle(&w->order, epoch);
            w->order_epoch = epoch;
        }
        int n = (int)(src->count - b0 < B ? src->count - b0 : B), first, count;
        st_shard_of(n, s->T, r, &first, &count);
        double loss = 0.0;
        if (count > 0) {
            st_records_buf *c = &w->chunk;
            st_shard shard = {count, c->x, c->labels, epoch * src->count + b0 + first, 0, 0};
            st_step_info info = {1, s->o.seed, i};
            w->status = st_source_batch(src, s->o.transform, w->order.perm + b0 + first, count,
                                        c->x, c->labels, 1, shard.sample0, c->pixels, &w->err);
            read = st_now();
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
            w->status = st_ps_apply_own(s->ps, r, 1.0f / (float)n, s->o.solver,
                                        st_lr_at(&s->o.solver->lr, i), i, s->o.intra,
                                        s->bf16 ? async_applied : NULL, w);
        double t3 = st_now();
        double t[5] = {t0, t1, read, t2, t3};
        sched_trace_iteration(st_trace_at(w->trace, i), i, async_phases, 4, t, NULL, NULL);
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
        s->stop_reason = sched_stop_flag(s);
    return sched_collect_status(s, err);
}
