/* Test-driven stopping, as SingleCaffe uses its test phases to decide when
 * to stop: --stop-at-accuracy X ends the run after the first test phase
 * whose accuracy reaches X; --patience N after N test phases in a row
 * without a better accuracy than the best so far (strictly better: an
 * equal accuracy is no improvement). The record of the test phases
 * (st_test_record: the best accuracy, its iteration, the phases since)
 * is kept in snapshots, so a resumed run goes on counting where it
 * stopped. This file checks the options at set-up, keeps the record,
 * decides, and says why at the end; loop.c runs the test phases, writes
 * the best test phase's snapshot (NAME_best.snap) and ends the run (on
 * every node: in multi-node mode rank 0 alone tests, and its decision
 * reaches the others through the scheduler's stop request). */
#include "trainer_internal.h"

#include <stdio.h>
#include <string.h>

int trainer_stopping(const st_trainer *t)
{
    return t->o.stop_accuracy > 0.0 || t->o.patience > 0;
}

/* The stopping options as given, for messages: "--stop-at-accuracy 0.99",
 * "--patience 3" or both joined by "and". */
static void options_text(const st_trainer *t, char *buf, size_t size)
{
    char accuracy[48] = "", patience[40] = "";
    if (t->o.stop_accuracy > 0.0)
        snprintf(accuracy, sizeof accuracy, "--stop-at-accuracy %g", t->o.stop_accuracy);
    if (t->o.patience > 0)
        snprintf(patience, sizeof patience, "--patience %ld", t->o.patience);
    snprintf(buf, size, "%s%s%s", accuracy, *accuracy && *patience ? " and " : "", patience);
}

st_status trainer_check_stopping(const st_trainer *t, st_error *err)
{
    if (!trainer_stopping(t))
        return ST_OK;
    const st_train_opts *o = &t->o;
    char opts[96];
    options_text(t, opts, sizeof opts);
    if (o->no_test)
        return st_fail(err, ST_EUSAGE, "%s with --no-test: stopping on the test accuracy needs "
                       "test phases; leave --no-test out", opts);
    if (o->sync != ST_SYNC_BSP)
        return st_fail(err, ST_EUSAGE, "%s with --sync %s: stopping on the test accuracy needs "
                       "test phases during the run, which bulk-synchronous training has (SSP "
                       "and ASP test once, at the end); leave --sync out", opts,
                       trainer_sync_names[o->sync]);
    if (trainer_partitioned(t) && o->snapshot_dir)
        return st_fail(err, ST_EUSAGE, "%s with --rank-update partitioned and --snapshot-dir: "
                       "the best test phase's snapshot is rank 0's alone, and the partitioned "
                       "solver state is every rank's; leave out --snapshot-dir or "
                       "--rank-update partitioned", opts);
    if (!t->test && o->data)
        return st_fail(err, ST_EUSAGE, "%s: stopping on the test accuracy needs a test set, and "
                       "--data %s names none: give test= and test_labels= there", opts,
                       o->data);
    if (!t->test)
        return st_fail(err, ST_EUSAGE, "%s: stopping on the test accuracy needs a test set, and "
                       "%s names none: give test= and test_labels= in its [net], or --data "
                       "FILE", opts, t->cfg_path);
    /* test phases come at the multiples of `every`; one below the end is
     * sure for any interval below the iterations left */
    long every = o->test_interval ? o->test_interval : t->iters_per_epoch;
    long first = (t->start / every + 1) * every, left = t->iterations - t->start;
    if (first < t->iterations)
        return ST_OK;
    if (left < 2)
        return st_fail(err, ST_EUSAGE, "%s: the run has one iteration%s, so no test phase can "
                       "come before its end; leave %s out or give more --iters", opts,
                       t->start ? " left after the resumed snapshot's" : "", opts);
    return st_fail(err, ST_EUSAGE, "%s: no test phase before the run's end at iteration %ld (one "
                   "every %ld iterations%s): give a --test-interval below %ld", opts,
                   t->iterations, every, o->test_interval ? "" : ": an epoch, the default", left);
}

int trainer_record_test(st_trainer *t, long it, double accuracy)
{
    st_test_record *r = &t->tests;
    int best = r->phases == 0 || accuracy > r->best_accuracy;
    r->phases++;
    if (best) {
        r->best_accuracy = accuracy;
        r->best_iteration = it;
        r->since_best = 0;
    } else {
        r->since_best++;
    }
    return best;
}

int trainer_decide_stop(st_trainer *t, long it, double accuracy)
{
    const st_test_record *r = &t->tests;
    if (!trainer_stopping(t) || it >= t->iterations || t->stop_at >= 0)
        return 0;
    if (t->o.stop_accuracy > 0.0 && accuracy >= t->o.stop_accuracy)
        snprintf(t->stop_why, sizeof t->stop_why, "test accuracy %.2f%% reached "
                 "--stop-at-accuracy %g", 100.0 * accuracy, t->o.stop_accuracy);
    else if (t->o.patience > 0 && r->since_best >= t->o.patience)
        snprintf(t->stop_why, sizeof t->stop_why, "no improvement for %ld test phase%s "
                 "(--patience %ld), best %.2f%% at iteration %ld", r->since_best,
                 r->since_best == 1 ? "" : "s", t->o.patience, 100.0 * r->best_accuracy,
                 r->best_iteration);
    else
        return 0;
    t->stop_at = it;
    st_info(&t->log, "stopping at iteration %ld: %s", it, t->stop_why);
    return 1;
}

void trainer_log_stopping(const st_trainer *t, const st_train_result *res)
{
    if (!trainer_stopping(t))
        return;
    char opts[96];
    options_text(t, opts, sizeof opts);
    if (res->stopped_early && t->stop_why[0]) {
        st_info(&t->log, "stopped early at iteration %ld of %ld: %s", res->iterations,
                t->iterations, t->stop_why);
        return;
    }
    if (res->stopped_early) { /* another rank's decision: rank 0 tests */
        st_info(&t->log, "stopped early at iteration %ld of %ld: rank 0's test phase met %s",
                res->iterations, t->iterations, opts);
        return;
    }
    const st_test_record *r = &t->tests;
    if (r->phases == 0) /* not rank 0 */
        return;
    char accuracy[128] = "", patience[128] = "";
    if (t->o.stop_accuracy > 0.0)
        snprintf(accuracy, sizeof accuracy, "--stop-at-accuracy %g %s (best %.2f%%)",
                 t->o.stop_accuracy, r->best_accuracy >= t->o.stop_accuracy
                     ? "reached at the last test phase" : "not reached",
                 100.0 * r->best_accuracy);
    if (t->o.patience > 0)
        snprintf(patience, sizeof patience, "--patience %ld: %ld test phase%s without "
                 "improvement at the end", t->o.patience, r->since_best,
                 r->since_best == 1 ? "" : "s");
    st_info(&t->log, "no early stop: %s%s%s", accuracy, *accuracy && *patience ? "; " : "",
            patience);
}
