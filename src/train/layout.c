/* -t auto and --intra auto: the split of this process's cores between
 * workers and intra-op threads, chosen by measurement as the kernels' are.
 * Each split W x I with W x I = the cores (W at most the batch) trains a
 * few iterations in a trial run of its own (st_trainer_trial: the same
 * options, no test, no output), and the fastest in images per second is
 * kept, in the run and in the choice cache, whose context says what it
 * holds for (the backend's library and CPU, the cores, the batch, the
 * layers), so that the next run of the command takes it without
 * measuring. The trials are trainers: set-up, which makes them, hands in
 * the function that makes and runs one (trainer_run_fn), so that set-up
 * calls this file and not the other way round. */
#include "trainer_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/cores.h"

#define LAYOUT_WARMUP 2      /* iterations of a trial left out of its speed */
#define LAYOUT_MEASURED 4    /* iterations of a trial timed, at least */
#define LAYOUT_MEASURED_MAX 200
#define LAYOUT_SECONDS 0.5   /* timed per trial, at least (within the iterations' bounds) */
#define LAYOUT_MAX 16     /* splits tried at most */
#define LAYOUT_KEY "layout"

/* "WxI" with W, I from 1 to 4096. */
static int layout_syntax(const char *value, char *why, size_t size)
{
    int w, i, used = 0;
    if (sscanf(value, "%dx%d%n", &w, &i, &used) == 2 && !value[used] && w >= 1 && w <= 4096 &&
        i >= 1 && i <= 4096)
        return 1;
    snprintf(why, size, "a layout WxI (workers x intra-op threads, such as 2x1)");
    return 0;
}

/* The splits to try: [n] (workers, intra) with workers x intra = cores,
 * the given one of -t N / --intra N fixed; most workers first. */
static int candidates(const st_trainer *t, int cores, int w[], int in[])
{
    int n = 0;
    for (int workers = cores; workers >= 1 && n < LAYOUT_MAX; workers--) {
        if (cores % workers || workers > t->batch)
            continue;
        int intra = cores / workers;
        if ((t->o.threads > 0 && workers != t->o.threads) ||
            (t->o.intra > 0 && intra != t->o.intra))
            continue;
        w[n] = workers;
        in[n++] = intra;
    }
    return n;
}

/* One trial: the run's options at workers x intra, a few iterations
 * (st_trainer_trial), made and run by `run`; its speed in *ips. */
static st_status trial(const st_trainer *t, trainer_run_fn run, int workers, int intra,
                       int measured, double *ips, st_error *err)
{
    st_train_opts o = t->o;
    st_log quiet = t->log;
    o.threads = workers;
    o.intra = intra;
    st_trainer_trial(&o, &quiet, LAYOUT_WARMUP, measured);
    st_train_result res;
    st_status st = run(t->cfg_path, &o, &quiet, &res, err);
    *ips = st == ST_OK ? res.images_per_s : 0.0;
    return st;
}

/* Iterations a trial times: LAYOUT_SECONDS' worth at ips images/s. */
static int measured_for(const st_trainer *t, double ips)
{
    double n = ips > 0.0 ? LAYOUT_SECONDS * ips / t->batch : LAYOUT_MEASURED;
    return n < LAYOUT_MEASURED ? LAYOUT_MEASURED
           : n > LAYOUT_MEASURED_MAX ? LAYOUT_MEASURED_MAX : (int)n + 1;
}

/* Measure every split; the fastest into *best. The first trial also sizes
 * the others (and is run again when it timed too little). trials [size]:
 * what each gave, for the log and the cache's comment; asked: the options
 * that asked for it, for messages. */
static st_status measure(st_trainer *t, trainer_run_fn run, const char *asked, const int *w,
                         const int *in, int n, int *best, char *trials, size_t size,
                         st_error *err)
{
    double fastest = -1.0;
    st_status first_failure = ST_OK;
    int measured = LAYOUT_MEASURED;
    for (int k = 0; k < n; k++) {
        double ips;
        st_error terr = {0};
        st_status st = trial(t, run, w[k], in[k], measured, &ips, &terr);
        if (st == ST_OK && k == 0 && measured_for(t, ips) > measured) {
            measured = measured_for(t, ips);
            st = trial(t, run, w[k], in[k], measured, &ips, &terr);
        }
        size_t len = strlen(trials);
        if (st != ST_OK) {
            snprintf(trials + len, size - len, "%s%dx%d failed", len ? ", " : "", w[k], in[k]);
            st_warn(&t->log, "%s: the trial of %d worker%s x %d: %s", asked, w[k],
                    w[k] > 1 ? "s" : "", in[k], terr.msg);
            if (first_failure == ST_OK) {
                first_failure = st;
                *err = terr;
            }
            continue;
        }
        snprintf(trials + len, size - len, "%s%dx%d %.0f img/s", len ? ", " : "", w[k], in[k],
                 ips);
        if (ips > fastest) {
            fastest = ips;
            *best = k;
        }
    }
    return fastest < 0.0 ? first_failure : ST_OK;
}

/* The cache's context: what a layout holds for (the precision named when
 * it is not fp32, so that fp32 layouts cached before it keep their key). */
static void layout_context(const st_trainer *t, int cores, char *buf, size_t size)
{
    char precision[32] = "";
    if (t->o.precision != ST_PRECISION_FP32)
        snprintf(precision, sizeof precision, "; precision %s",
                 st_precision_names[t->o.precision]);
    char backend[512] = "";
    if (t->backend->choice_context)
        t->backend->choice_context(backend, sizeof backend);
    else
        snprintf(backend, sizeof backend, "backend %s", t->backend->name);
    snprintf(buf, size, "layout: %s; %d cores; -t %d --intra %d (0: auto); batch %d; "
             "--conv-impl %s; layers %016llx%s", backend, cores, t->o.threads, t->o.intra,
             t->batch, t->o.conv_impl ? t->o.conv_impl : "auto",
             (unsigned long long)trainer_cfg_hash(&t->cfg, 0), precision);
}

/* Measure the splits (or take the cache's) and set o.threads, o.intra;
 * asked: the options that asked for it ("-t auto", "--intra auto"). */
static st_status choose_measured(st_trainer *t, trainer_run_fn run, const char *asked, int cores,
                                 st_error *err)
{
    int w[LAYOUT_MAX], in[LAYOUT_MAX];
    int n = candidates(t, cores, w, in);
    if (n == 0) /* one of -t and --intra is given: it does not divide the cores */
        return st_fail(err, ST_EUSAGE, "%s: no split of the %d cores this process may use has "
                       "%s %d (and at most %d workers, the batch)", asked, cores,
                       t->o.threads > 0 ? "-t" : "--intra",
                       t->o.threads > 0 ? t->o.threads : t->o.intra, t->batch);
    st_choices *table = NULL;
    st_choice_cache *cache = NULL;
    st_status st = st_choices_create(&table, layout_syntax, err);
    if (st == ST_OK && t->o.choice_cache && t->o.choice_cache[0] && n > 1) {
        char context[1024];
        layout_context(t, cores, context, sizeof context);
        st_choice_cache_opts co = {.dir = t->o.choice_cache, .context = context,
                                   .read = !t->o.remeasure, .lock_wait = 120.0};
        st = st_choice_cache_open(&cache, &co, table, &t->log, err);
    }
    char value[ST_CHOICE_MAX], trials[1024] = "", how[ST_PATH_MAX + 64] = "";
    int best = 0;
    if (st == ST_OK && n > 1 &&
        st_choices_get(table, LAYOUT_KEY, value, sizeof value) == ST_CHOICE_FOUND) {
        sscanf(value, "%dx%d", &w[0], &in[0]);
        snprintf(how, sizeof how, "from the cache %s", st_choice_cache_file(cache));
    } else if (st == ST_OK && n > 1) {
        st = measure(t, run, asked, w, in, n, &best, trials, sizeof trials, err);
        if (st == ST_OK) {
            snprintf(value, sizeof value, "%dx%d", w[best], in[best]);
            st_choices_record(table, LAYOUT_KEY, value, trials);
            int stored = 0;
            if (cache)
                st_choice_cache_store(cache, table, &stored);
            snprintf(how, sizeof how, "measured: %s%s%s", trials,
                     stored ? "; stored in the cache " : "",
                     stored ? st_choice_cache_file(cache) : "");
        } else {
            st_choices_abandon(table, LAYOUT_KEY);
        }
    } else if (st == ST_OK) {
        snprintf(how, sizeof how, "the only split of %d cores", cores);
    }
    if (st == ST_OK) {
        t->o.threads = w[best];
        t->o.intra = in[best];
        st_info(&t->log, "threads: %d worker%s x %d (%s: %s)", t->o.threads,
                t->o.threads > 1 ? "s" : "", t->o.intra, asked, how);
    }
    st_choice_cache_close(cache);
    st_choices_free(table);
    return st;
}

st_status trainer_choose_layout(st_trainer *t, trainer_run_fn run, st_error *err)
{
    const st_train_opts *o = &t->o;
    if (o->threads != ST_THREADS_AUTO && o->intra != ST_THREADS_AUTO)
        return ST_OK;
    /* BSP on one node: trainer_check_option_rules refused the rest */
    const char *asked = o->threads != ST_THREADS_AUTO ? "--intra auto"
                        : o->intra == ST_THREADS_AUTO ? "-t auto --intra auto" : "-t auto";
    if (o->threads == ST_THREADS_AUTO)
        t->o.threads = 0;
    if (o->intra == ST_THREADS_AUTO)
        t->o.intra = 0;
    int cores = st_usable_cores();
    if (t->dry_run) { /* a dry run measures nothing: the default split, said so */
        st_info(&t->log, "threads: %s measures the split of the %d cores when the run "
                "starts; planned here with the default one", asked, cores);
        return ST_OK;
    }
    return choose_measured(t, run, asked, cores, err);
}
