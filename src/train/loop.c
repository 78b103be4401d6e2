/* The trainer's run (train.h's st_trainer_run): the iteration loop with
 * test phases, progress lines and snapshots, and stopping on a signal. The
 * set-up is setup.c's, the report at the end report.c's.
 *
 * BSP: the prefetch thread (prefetch.h), started here, reads the coming
 * mini-batches of the epoch's permutation (the last one of an epoch may be
 * smaller) into the batch ring ahead of the workers, which split each, run
 * forward and backward, and reduce and update the weights slice by slice
 * (scheduler.h, ps.h). This thread, the scheduler thread, hands the workers
 * the iterations up to each test phase, the end of the warm-up or a
 * snapshot, and reports the iterations they finish. SSP and ASP hand the
 * workers the whole run instead, and each reads its own shards.
 *
 * Stopping: the stop flag of the options (set by main's signal thread,
 * signals.h) is read by the workers at every iteration boundary, agreed
 * over the nodes with the iteration's control values; the run then saves a
 * snapshot of the iterations finished and returns with res->signal set.
 * A test phase meeting --stop-at-accuracy or --patience (stopping.c) ends
 * the run after it as its schedule's end would (report, final snapshot):
 * on one node at once, across nodes through the scheduler's stop request,
 * which the next iteration's control values carry to every rank. */
#include "trainer_internal.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/clock.h"
#include "base/memory.h"
#include "base/progress.h"
#include "data/prefetch.h"

/* What the BSP iterations have done so far, for progress lines and the
 * result. */
typedef struct bsp_progress {
    st_trainer *t;
    st_train_result *res;
    double window_start, window_loss;
    long window_images, window_iters, images;
    long done;              /* iterations finished */
    st_time_split window;
} bsp_progress;

/* The weights after `done` iterations, checked before they are tested or
 * saved: an update can overflow finite gradients into an infinity, which
 * the iterations' checks see only at the next forward pass. */
static st_status check_weights(const st_trainer *t, long done, st_error *err)
{
    char where[256];
    if (st_net_arena_finite(&t->net, t->ps.weights, where, sizeof where))
        return ST_OK;
    return st_fail(err, ST_EDIVERGED, "iteration %ld: training diverged: the weights are not "
                   "finite: %s (try a lower learning_rate)", done, where);
}

/* The snapshots a run writes, DIR/NAME_TAG.snap: periodic ones and the one
 * a signal leaves (TAG: the iteration), the one at the end (final), and,
 * with test-driven stopping, the best test phase's so far (best). */
typedef enum snapshot_kind { SNAPSHOT_ITERATION, SNAPSHOT_FINAL, SNAPSHOT_BEST } snapshot_kind;

/* --rank-update partitioned: the solver state of every rank's parts,
 * gathered into *state [planes * count] on rank 0 (allocated; NULL on the
 * others). Every rank calls it; rank 0 running out of memory ends every
 * rank, which would otherwise wait for it. */
static st_status gather_state(st_trainer *t, float **state, st_error *err)
{
    *state = NULL;
    if (st_cluster_rank(t->o.cluster) == 0) {
        size_t bytes = t->ps.count * (size_t)t->part.planes * sizeof(float);
        *state = st_alloc_aligned(bytes, "the solver state gathered for a snapshot", err);
        if (!*state) {
            st_cluster_abort(t->o.cluster, err);
            return ST_ENOMEM;
        }
    }
    return st_cluster_gather_parts(t->o.cluster, t->ps.slice, t->ps.n_workers, t->part.state,
                                   t->part.owned, t->part.planes, *state, err);
}

/* Snapshot the state after `iteration` iterations as DIR/NAME_TAG.snap and
 * say so; a best one is said without a directory too. With --rank-update
 * partitioned, every rank sends rank 0 its parts of the solver state first,
 * so that the snapshot holds the whole state as a replicated run's does;
 * every rank calls this at the same points (the snapshot options are
 * compared at set-up, fingerprint.c), which best snapshots, rank 0's alone,
 * are not: set-up refuses them with the state partitioned. */
static st_status save_snapshot(st_trainer *t, long iteration, snapshot_kind kind,
                               st_error *err)
{
    if (kind == SNAPSHOT_BEST && !t->o.snapshot_dir)
        st_info(&t->log, "new best test accuracy %.2f%% at iteration %ld",
                100.0 * t->tests.best_accuracy, iteration);
    if (!t->o.snapshot_dir)
        return ST_OK;
    char path[sizeof t->snapshot_path], tag[32];
    snprintf(tag, sizeof tag, kind == SNAPSHOT_FINAL ? "final" : kind == SNAPSHOT_BEST ? "best"
                                                               : "%ld", iteration);
    int len = snprintf(path, sizeof path, "%s/%s_%s.snap", t->o.snapshot_dir,
                       t->snapshot_name, tag);
    if (len < 0 || (size_t)len >= sizeof path)
        return st_fail(err, ST_EUSAGE, "--snapshot-dir %s: the snapshot's path would be "
                       "longer than %zu bytes", t->o.snapshot_dir, sizeof path - 1);
    st_snapshot_meta m;
    trainer_snapshot_meta(t, iteration, &m);
    st_status st = check_weights(t, iteration, err);
    if (st != ST_OK)
        return st;
    if (kind != SNAPSHOT_BEST) /* a best one follows its test phase's gather */
        st = trainer_gather_mp_blocks(t, err);
    float *gathered = NULL;
    if (st == ST_OK && trainer_partitioned(t))
        st = gather_state(t, &gathered, err);
    const float *state = gathered ? gathered : t->ps.state;
    if (st == ST_OK && st_cluster_rank(t->o.cluster) == 0) /* the weights are the same on
                                                              every rank */
        st = st_snapshot_save(path, &t->net, t->ps.weights, state, &m, err);
    st_free_aligned(gathered);
    if (st != ST_OK) {
        st_error_prefix(err, "--snapshot-dir: ");
        return st;
    }
    memcpy(t->snapshot_path, path, sizeof path);
    t->snapshot_iter = iteration;
    if (kind == SNAPSHOT_FINAL)
        st_info(&t->log, "weights saved to %s", path);
    else if (kind == SNAPSHOT_BEST)
        st_info(&t->log, "new best test accuracy %.2f%% at iteration %ld, saved to %s",
                100.0 * t->tests.best_accuracy, iteration, path);
    else
        st_info(&t->log, "snapshot at iteration %ld saved to %s", iteration, path);
    return ST_OK;
}

/* Whether this process runs test phases (rank 0's alone across nodes). */
static int tests_here(const st_trainer *t)
{
    return t->test && !t->o.no_test && st_cluster_rank(t->o.cluster) == 0;
}

/* The test phase; in multi-node mode rank 0 alone tests (the weights are
 * the same everywhere) while the others go on to the next iteration's
 * all-reduce and wait for it there. */
static st_status run_test(st_trainer *t, long it, st_train_result *res, st_error *err)
{
    if (!tests_here(t))
        return ST_OK;
    long correct;
    double loss, t0 = st_now();
    st_status st = check_weights(t, it, err);
    if (st == ST_OK)
        st = st_sched_test(t->sched, t->test, &correct, &loss, err);
    t->test_seconds += st_now() - t0;
    st_trace_track *tr = st_trace_at(st_sched_trace(t->sched), it - 1);
    if (tr) /* after iteration it - 1, on the scheduler's track */
        st_trace_span(tr, "phase", "test", it - 1, t0, st_now());
    if (st == ST_OK && !isfinite(loss))
        st = st_fail(err, ST_EDIVERGED, "iteration %ld: training diverged: the test loss is "
                     "not finite (try a lower learning_rate)", it);
    if (st != ST_OK)
        return st;
    res->test_accuracy = (double)correct / (double)t->test->count;
    res->test_loss = loss / (double)t->test->count;
    st_progress_test(t->log.progress, it, res->test_accuracy, res->test_loss);
    st_info(&t->log, "test  iter %ld  accuracy %.2f%%  loss %.4f  (%ld images)", it,
            100.0 * res->test_accuracy, res->test_loss, t->test->count);
    int best = trainer_record_test(t, it, res->test_accuracy);
    res->best_accuracy = t->tests.best_accuracy;
    if (best && trainer_stopping(t))
        st = save_snapshot(t, it, SNAPSHOT_BEST, err);
    if (st == ST_OK)
        trainer_decide_stop(t, it, res->test_accuracy);
    return st;
}

/* The stop flag's value: 0, or the signal asking to stop. */
static int stop_asked(const st_trainer *t)
{
    return t->o.stop ? atomic_load(t->o.stop) : 0;
}

/* Say once that this process was asked to stop (the workers see the flag
 * themselves). */
static void announce_stop(st_trainer *t)
{
    int sig = stop_asked(t);
    if (!sig || t->stop_announced)
        return;
    t->stop_announced = 1;
    st_warn(&t->log, "%s: stopping after the iteration in flight%s (again to quit at once)",
            strsignal(sig), t->o.snapshot_dir ? " and saving a snapshot" : "");
}

/* A logged window ending at iteration `done`: the "iter" line (and the
 * split of BSP windows) in plain text, the CSV row for --log-format csv
 * and --metrics. */
static void log_progress(const st_trainer *t, long done, double loss, long images,
                         double seconds, const st_time_split *window, long window_iters)
{
    double lr = st_lr_at(&t->hp.solver.lr, done - 1);
    st_progress_row row = {.iteration = done, .loss = loss / (double)images, .lr = lr,
                           .images_per_s = seconds > 0 ? (double)images / seconds : 0.0};
    char rate[96];
    trainer_rate_text(t, row.images_per_s, rate, sizeof rate);
    st_info_progress(&t->log, "iter %ld/%ld  epoch %.2f  loss %.4f  lr %.5g  %s", done,
                     t->iterations, (double)done / (double)t->iters_per_epoch, row.loss, lr,
                     rate);
    if (window && window_iters > 0) {
        double ms = 1e3 / (double)window_iters;
        row.has_split = 1;
        row.data_ms = ms * window->data;
        row.compute_ms = ms * window->compute;
        row.barrier_ms = ms * window->barrier;
        row.aggregation_ms = ms * window->aggregate;
        row.update_ms = ms * window->update;
        row.communication_ms = ms * window->communicate;
        if (t->o.threads > 1 || t->log.level >= ST_LOG_DEBUG)
            trainer_log_split(t, 1, "  split,", window, (double)window_iters);
    }
    st_progress_train(t->log.progress, &row);
}

static void split_add(st_time_split *sum, const st_time_split *s)
{
    sum->data += s->data;
    sum->compute += s->compute;
    sum->barrier += s->barrier;
    sum->aggregate += s->aggregate;
    sum->update += s->update;
    sum->communicate += s->communicate;
    sum->hidden_backward += s->hidden_backward;
    sum->hidden_forward += s->hidden_forward;
    sum->exposed += s->exposed;
}

static void bsp_iteration_done(void *ctx, const st_iteration *it)
{
    bsp_progress *p = ctx;
    st_trainer *t = p->t;
    double per_image = it->loss / it->images;
    announce_stop(t);
    p->done = it->iteration + 1;
    if (it->iteration == t->start)
        p->res->first_loss = per_image;
    if (t->o.loss_trace)
        t->o.loss_trace[it->iteration] = per_image;
    if (it->iteration >= t->warm_end) {
        split_add(&p->res->split, &it->time);
        p->images += it->images;
    }
    split_add(&p->window, &it->time);
    p->window_loss += it->loss;
    p->window_images += it->images;
    p->window_iters++;
    long done = it->iteration + 1;
    st_progress_step(t->log.progress, done, it->loss, it->images);
    if (done % t->o.log_every && done != t->iterations)
        return;
    double now = st_now();
    p->res->last_loss = p->window_loss / (double)p->window_images;
    log_progress(t, done, p->window_loss, p->window_images, now - p->window_start, &p->window,
                 p->window_iters);
    p->window_start = now;
    p->window_loss = 0.0;
    p->window_images = p->window_iters = 0;
    memset(&p->window, 0, sizeof p->window);
}

/* The end of the BSP segment that starts at `first`: the next test phase,
 * the end of the warm-up (where the layer timings restart), the next
 * snapshot, or the end. */
static long segment_end(const st_trainer *t, long first, long test_every)
{
    long last = (first / test_every + 1) * test_every;
    if (first < t->warm_end && last > t->warm_end)
        last = t->warm_end;
    long every = t->o.snapshot_every;
    if (every && (first / every + 1) * every < last)
        last = (first / every + 1) * every;
    return last < t->iterations ? last : t->iterations;
}

/* Whether the final snapshot gathers the state from every rank (so that a
 * rank failing alone before it must end them all). */
static int final_gather(const st_trainer *t)
{
    return trainer_partitioned(t) && t->o.snapshot_dir;
}

/* BSP in segments (segment_end) while the prefetcher reads ahead; a stop
 * (the stop flag) ends the run after the iteration in flight, with a
 * snapshot. On one node a stop asked during a test phase or a snapshot ends
 * it at the segment's end; across nodes only the iteration's control sum
 * decides, so that every rank stops at the same iteration. A test phase
 * that stops the run (t->stop_at) ends it at the segment's end on one
 * node; across nodes rank 0 asks the scheduler to stop, and the next
 * iteration's control sum stops every rank before that iteration. */
static st_status run_segments(st_trainer *t, st_train_result *res, st_error *err)
{
    long test_every = t->o.test_interval ? t->o.test_interval : t->iters_per_epoch;
    bsp_progress p = {.t = t, .res = res, .window_start = st_now(), .done = t->start};
    double timed_start = 0.0;
    for (long first = t->start; first < t->iterations;) {
        long last = segment_end(t, first, test_every);
        if (first == t->warm_end) {
            timed_start = st_now();
            for (int w = 0; t->o.profile && w < t->o.threads; w++)
                memset(st_sched_replica(t->sched, w)->time, 0,
                       (size_t)t->net.n_layers * sizeof(st_layer_time));
        }
        int test_due = last % test_every == 0 || last == t->iterations;
        int snapshot_due = t->o.snapshot_every && last % t->o.snapshot_every == 0 &&
                           last < t->iterations;
        /* across nodes, what rank 0 does alone after the segment; the
         * others learn it in its last iteration's control sum */
        int alone_after = last < t->iterations && ((test_due && tests_here(t)) || snapshot_due);
        double seg_start = st_now();
        st_status st = st_sched_run_bsp(t->sched, &t->batches, first, last, alone_after,
                                        bsp_iteration_done, &p, err);
        if (st != ST_OK)
            return st;
        if (p.done > t->warm_end)
            res->seconds += st_now() - (first >= t->warm_end ? seg_start : timed_start);
        int reason = st_sched_stop_reason(t->sched);
        if (!reason && !t->o.cluster && last < t->iterations)
            reason = stop_asked(t);
        if (reason == ST_SCHED_STOP_REQUESTED) { /* rank 0's test phase, on every rank */
            res->stopped_early = 1;
            break;
        }
        if (reason) {
            announce_stop(t); /* no iteration may have finished since the signal */
            res->iterations = p.done;
            res->signal = reason;
            return save_snapshot(t, p.done, SNAPSHOT_ITERATION, err);
        }
        if (test_due) /* on every rank of group 0, so that rank 0 tests the whole network */
            st = trainer_gather_mp_blocks(t, err);
        if (st == ST_OK && test_due)
            st = run_test(t, last, res, err);
        if (st == ST_OK && snapshot_due)
            st = save_snapshot(t, last, SNAPSHOT_ITERATION, err);
        /* rank 0's alone: the others wait for it (for the final snapshot's
         * gather too, with the state partitioned) */
        if (st != ST_OK && t->o.cluster && (last < t->iterations || final_gather(t)))
            st_cluster_abort(t->o.cluster, err);
        if (st != ST_OK)
            return st;
        first = last;
        if (t->stop_at == last && !t->o.cluster) {
            res->stopped_early = 1;
            break;
        }
        if (t->stop_at == last) /* the others learn it at the next iteration's control sum */
            st_sched_request_stop(t->sched);
    }
    res->iterations = res->stopped_early ? p.done : t->iterations;
    res->images_per_s = res->seconds > 0 ? (double)p.images / res->seconds : 0.0;
    return ST_OK;
}

static st_status run_bsp(st_trainer *t, st_train_result *res, st_error *err)
{
    st_prefetch_opts po = trainer_prefetch_opts(t);
    st_prefetch *pf;
    st_status st = st_prefetch_start(&pf, &po, t->start, t->iterations, err);
    if (st != ST_OK)
        return st;
    st_error run_err = {0};
    st = run_segments(t, res, &run_err);
    if (st != ST_OK || res->signal || res->stopped_early)
        st_batchq_close(&t->batches); /* the prefetcher gives up */
    st_status pst = st_prefetch_stop(pf, err); /* its failure is the cause */
    if (pst == ST_OK && st != ST_OK)
        st_fail(err, st, "%s", run_err.msg);
    return pst != ST_OK ? pst : st;
}

typedef struct async_progress {
    st_trainer *t;
    st_train_result *res;
    double last_time;
    long last_done;
} async_progress;

static void async_log(void *ctx, long done, double loss, long images)
{
    async_progress *p = ctx;
    announce_stop(p->t);
    double now = st_now();
    p->res->last_loss = images ? loss / (double)images : 0.0;
    if (p->last_done == 0)
        p->res->first_loss = p->res->last_loss;
    st_progress_step(p->t->log.progress, done, loss, images);
    log_progress(p->t, done, loss, images, now - p->last_time, NULL, 0);
    p->last_time = now;
    p->last_done = done;
}

/* SSP / ASP: the workers run the whole schedule; one test at the end. A
 * stop ends each worker before its next iteration; the snapshot then holds
 * the weights as they are, named after the iterations every worker
 * finished (the faster ones' partial updates are in it too). */
static st_status run_async(st_trainer *t, st_train_result *res, st_error *err)
{
    async_progress p = {t, res, st_now(), 0};
    st_time_split wt;
    long finished;
    double t0 = st_now();
    st_status st = st_sched_run_async(t->sched, 0, t->iterations, t->o.log_every, async_log, &p,
                                      &wt, &finished, err);
    if (st != ST_OK)
        return st;
    res->seconds = st_now() - t0;
    res->images_per_s = res->seconds > 0 ? (double)finished * t->batch / res->seconds : 0.0;
    res->split = wt;
    int reason = st_sched_stop_reason(t->sched);
    if (reason) {
        announce_stop(t);
        res->iterations = finished;
        res->signal = reason;
        return save_snapshot(t, finished, SNAPSHOT_ITERATION, err);
    }
    res->iterations = t->iterations;
    return run_test(t, t->iterations, res, err);
}

st_status st_trainer_run(st_trainer *t, st_train_result *res, st_error *err)
{
    memset(res, 0, sizeof *res);
    res->test_accuracy = -1.0;
    res->best_accuracy = t->tests.phases ? t->tests.best_accuracy : -1.0; /* --resume's */
    char sync[32];
    snprintf(sync, sizeof sync, t->o.sync == ST_SYNC_SSP ? "%s:%d" : "%s",
             trainer_sync_names[t->o.sync], t->o.staleness);
    st_info(&t->log, "training: %ld iterations of batch %d (%ld per epoch), %d worker%s x %d "
            "thread%s, %s, backend %s, precision %s, solver %s, seed %llu", t->iterations,
            t->batch, t->iters_per_epoch, t->o.threads, t->o.threads > 1 ? "s" : "", t->o.intra,
            t->o.intra > 1 ? "s" : "", sync, t->backend->name,
            st_precision_names[t->o.precision],
            st_solver_rule_names[t->hp.solver.rule], (unsigned long long)t->o.seed);
    if (t->o.cluster)
        st_info(&t->log, "nodes: %d ranks x batch %d = a global batch of %d images per "
                "iteration; all-reduce %s", st_cluster_size(t->o.cluster), t->batch,
                st_cluster_size(t->o.cluster) * t->batch,
                t->allreduce < 0 ? "auto (probing each algorithm first)" : t->o.allreduce);
    if (t->o.overlap)
        st_info(&t->log, "overlap: gradients all-reduced during backward in buckets of at "
                "least %zu bytes", t->o.bucket_bytes);
    if (t->o.pipeline)
        st_info(&t->log, "pipeline: each bucket of layers (at least %zu bytes) updated as soon "
                "as its gradient is %s, each layer's next forward waiting only for its "
                "bucket", t->o.bucket_bytes,
                t->o.cluster ? "all-reduced (on the overlap's thread)"
                             : "summed over the workers (by the worker that completes it)");
    if (trainer_partitioned(t))
        st_info(&t->log, "rank update partitioned: each worker's slice is reduce-scattered "
                "over the %d ranks, each rank updates its part and keeps that part's solver "
                "state, and the new weights are all-gathered", st_cluster_size(t->o.cluster));
    st_status st = trainer_mp_nodes(t) ? st_cluster_mp_split(t->o.cluster, t->o.mp_group, err)
                                       : ST_OK;
    if (st == ST_OK && t->o.cluster) /* every rank starts from rank 0's weights */
        st = st_cluster_broadcast(t->o.cluster, t->ps.weights, t->ps.count, err);
    /* Partitioned and resumed: rank 0 read the whole solver state (resume.c)
     * and hands each rank its parts. A run from iteration 0 starts from
     * zero state everywhere. */
    if (st == ST_OK && trainer_partitioned(t) && t->start > 0)
        st = st_cluster_scatter_parts(t->o.cluster, t->ps.slice, t->ps.n_workers,
                                      t->resumed_state, t->part.state, t->part.owned,
                                      t->part.planes, err);
    st_free_aligned(t->resumed_state);
    t->resumed_state = NULL;
    if (st == ST_OK)
        st = trainer_trace_start(t, err);
    t->began = st_now();
    st_progress_begin(t->log.progress, t->start, t->iterations, t->iters_per_epoch);
    if (st == ST_OK)
        st = t->o.sync == ST_SYNC_BSP ? run_bsp(t, res, err) : run_async(t, res, err);
    if (st == ST_OK) /* every rank, its threads done with the window */
        st = trainer_trace_finish(t, err);
    if (st == ST_OK && !res->signal) /* the whole network on rank 0 for its report */
        st = trainer_gather_mp_blocks(t, err);
    if (st == ST_OK && !res->signal)
        st = check_weights(t, res->iterations, err);
    if (t->o.cluster)
        st_cluster_report(t->o.cluster, res->iterations - t->start, trainer_log_line, &t->log);
    if (st == ST_EDIVERGED && t->snapshot_iter >= 0)
        st_info(&t->log, "the last good snapshot, iteration %ld, is %s", t->snapshot_iter,
                t->snapshot_path);
    if (st != ST_OK)
        return st;
    if (res->signal) {
        if (!stop_asked(t))
            st_warn(&t->log, "%s on another rank: every rank stops after iteration %ld",
                    strsignal(res->signal), res->iterations);
        if (t->snapshot_iter == res->iterations && t->o.sync != ST_SYNC_BSP)
            st_warn(&t->log, "interrupted at iteration %ld of %ld (the slowest worker's); "
                    "start from %s with --weights (SSP and ASP runs cannot be resumed "
                    "exactly)", res->iterations, t->iterations, t->snapshot_path);
        else if (t->snapshot_iter == res->iterations)
            st_warn(&t->log, "interrupted at iteration %ld of %ld; continue with --resume %s",
                    res->iterations, t->iterations, t->snapshot_path);
        else
            st_warn(&t->log, "interrupted at iteration %ld of %ld; nothing saved (no "
                    "--snapshot-dir)", res->iterations, t->iterations);
        return ST_OK;
    }
    res->gflops = res->images_per_s * 3.0 * t->net.flops / 1e9;
    res->peak_memory = (double)st_peak_rss();
    res->skipped_images = t->skipped;
    st = trainer_report(t, res, err);
    if (st != ST_OK && final_gather(t)) /* the others would wait for its parts */
        st_cluster_abort(t->o.cluster, err);
    if (st == ST_OK)
        st = save_snapshot(t, res->iterations, SNAPSHOT_FINAL, err);
    if (st == ST_OK && !t->o.snapshot_dir) {
        st_info(&t->log, "weights not saved: give --snapshot-dir DIR to keep them as "
                "DIR/%s_final.snap%s%s%s", t->snapshot_name,
                trainer_stopping(t) ? " (and the best test phase's as DIR/" : "",
                trainer_stopping(t) ? t->snapshot_name : "",
                trainer_stopping(t) ? "_best.snap)" : "");
    }
    return st;
}
