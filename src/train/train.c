/* The trainer: set-up from a cfg and options, the iteration loop with test
 * phases and progress lines, and the final snapshot.
 *
 * BSP iteration: the scheduler thread (this one) reads the next mini-batch
 * of the epoch's permutation (the last one of an epoch may be smaller) and
 * hands it to the workers, which split it, run forward and backward, and
 * reduce and update the weights slice by slice (scheduler.h, ps.h). SSP and
 * ASP hand the workers the whole run instead.
 *
 * Stopping: the stop flag of the options (set by main's signal thread,
 * signals.h) is read by the workers at every iteration boundary, agreed
 * over the nodes with the iteration's control values; the run then saves a
 * snapshot of the iterations finished and returns with res->signal set. */
#include "train/train.h"
#include "base/cores.h"

#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "backends/backend.h"
#include "base/cfg.h"
#include "backends/choices.h"
#include "base/clock.h"
#include "train/darknet_weights.h"
#include "data/data.h"
#include "base/fileio.h"
#include "base/hash.h"
#include "net/hparams.h"
#include "base/memory.h"
#include "data/prefetch.h"
#include "base/progress.h"
#include "parallel/ps.h"
#include "train/roofline.h"
#include "parallel/scheduler.h"
#include "base/signals.h"
#include "train/snapshot.h"

/* Synthetic data when no files are given: records per split by default. */
#define SYNTHETIC_TRAIN 1024
#define SYNTHETIC_TEST 256

struct st_trainer {
    st_log log;
    st_train_opts o;
    char cfg_path[ST_PATH_MAX];
    st_cfg cfg;
    st_hparams hp;
    st_net net;
    const st_backend *backend;
    st_ps ps;
    st_sched *sched;
    st_batchq batches;      /* BSP: filled by the prefetcher, read by the workers */
    st_source *train, *test;
    st_transform transform; /* records to inputs */
    long skipped;           /* unreadable images skipped, counted by the readers */
    int batch;
    long iterations, iters_per_epoch;
    long start;             /* first iteration: 0, or a --resume snapshot's */
    long warm_end;          /* start + warm-up iterations */
    int stop_announced;     /* the stop flag was seen and said so */
    long snapshot_iter;     /* the iteration of the last snapshot written, or -1 */
    char snapshot_name[ST_PATH_MAX]; /* NAME of the snapshots DIR/NAME_TAG.snap */
    char *settings;         /* the cfg's settings a snapshot keeps (st_hparams_settings) */
    int allreduce;          /* multi-node: the algorithm's index, -1 for auto */
    char snapshot_path[ST_PATH_MAX + 64];
    double created, began;  /* when set-up and the run began (monotonic seconds) */
    double test_seconds;    /* spent in test phases */
    long best_iteration;    /* of the best test accuracy */
    st_data_paths data;     /* the data files: --data's, else [net]'s */
    size_t setup_bytes;     /* resident memory setting up the workers took */
    st_choices *choices;    /* the workers' kernel choices (NULL: the backend has none) */
    char *choices_text;     /* their text after set-up, for snapshots */
};

static const char *const sync_names[] = {"bsp", "ssp", "asp"};

/* Batches read ahead of the workers. */
#define BATCH_RING 2

st_train_opts st_train_defaults(void)
{
    st_train_opts o = {.threads = 0, .intra = 0, .sync = ST_SYNC_BSP, .seed = 1,
                       .backend = "dnnl", .log_every = 100, .io_threads = 1,
                       .allreduce = "rhd", .bucket_bytes = 512u << 10,
                       .peer_timeout = 600};
    return o;
}

void st_trainer_attach_progress(st_trainer *t, st_progress *progress)
{
    t->log.progress = progress;
}

const st_net *st_trainer_net(const st_trainer *t)
{
    return &t->net;
}

const float *st_trainer_weights(const st_trainer *t)
{
    return t->ps.weights;
}

void st_trainer_free(st_trainer *t)
{
    if (!t)
        return;
    st_sched_free(t->sched);
    st_batchq_free(&t->batches);
    st_ps_free(&t->ps);
    st_source_close(t->train);
    st_source_close(t->test);
    st_net_free(&t->net);
    st_cfg_free(&t->cfg);
    free(t->settings);
    st_choices_free(t->choices);
    free(t->choices_text);
    free(t);
}

/* One split; errors say which file and key named it. */
static st_status open_split(st_trainer *t, const char *where, const char *key, const char *path,
                            const char *labels, const char *names, long limit, st_source **out,
                            st_error *err)
{
    st_source_spec spec = {
        .path = path, .labels = labels, .names = names[0] ? names : NULL, .limit = limit,
        .classes = t->net.classes, .verify = !t->o.no_verify,
        .images = {.shape = t->hp.image_size, .skip_bad = t->o.skip_bad_images,
                   .skipped = &t->skipped},
    };
    char net_where[ST_PATH_MAX + 32];
    snprintf(net_where, sizeof net_where, "%s:%d [net]", t->cfg.path, t->cfg.secs[0].line);
    st_status st = st_source_open(out, &spec, err);
    if (st == ST_OK)
        st = st_transform_check(&t->transform, *out, net_where, err);
    if (st != ST_OK)
        st_error_prefix(err, "%s: %s=: ", where, key);
    return st;
}

/* The data files: --data's, else [net]'s (none for --data synthetic). */
static st_status find_data(st_trainer *t, st_error *err)
{
    int synthetic = t->o.data && strcmp(t->o.data, "synthetic") == 0;
    if (!t->o.data)
        t->data = t->hp.data;
    if (!t->o.data || synthetic)
        return ST_OK;
    return st_data_paths_load(t->o.data, &t->data, &t->log, err);
}

static st_status open_data(st_trainer *t, st_error *err)
{
    const st_data_paths *d = &t->data;
    int synthetic = t->o.data && strcmp(t->o.data, "synthetic") == 0;
    const char *where = t->o.data && !synthetic ? t->o.data : t->cfg.path;
    if (d->classes && d->classes != t->net.classes)
        return st_fail(err, ST_EINPUT, "%s: classes=%d but the network has %d outputs", where,
                       d->classes, t->net.classes);
    if (synthetic || (!d->train[0] && !d->test[0])) {
        long ntrain = t->o.train_images ? t->o.train_images : SYNTHETIC_TRAIN;
        long ntest = t->o.test_images ? t->o.test_images : SYNTHETIC_TEST;
        st_info(&t->log, "no data given: training on %ld synthetic images of %d x %d x %d, "
                "%d classes (testing on %ld more)", ntrain, t->hp.image_size.w,
                t->hp.image_size.h, t->net.input.c, t->net.classes, ntest);
        st_status st = st_synthetic_open(&t->train, t->hp.image_size, t->net.classes, ntrain,
                                         t->o.seed, 0, err);
        if (st == ST_OK) /* new samples of the same classes */
            st = st_synthetic_open(&t->test, t->hp.image_size, t->net.classes, ntest,
                                   t->o.seed, ST_SYNTHETIC_TEST_FIRST, err);
        return st;
    }
    if (!d->train[0])
        return st_fail(err, ST_EINPUT, "%s: test data without train= data", where);
    st_status st = open_split(t, where, "train", d->train, d->train_labels, d->names,
                              t->o.train_images, &t->train, err);
    if (st == ST_OK && d->test[0])
        st = open_split(t, where, "test", d->test, d->test_labels, d->names, t->o.test_images,
                        &t->test, err);
    if (st == ST_OK)
        st_info(&t->log, "data: %ld training records from %s, %ld test records%s%s",
                t->train->count, t->train->name, t->test ? t->test->count : 0L,
                t->test ? " from " : "", t->test ? t->test->name : "");
    return st;
}

static st_status plan_schedule(st_trainer *t, st_error *err)
{
    long global = (long)t->batch * st_cluster_size(t->o.cluster);
    t->iters_per_epoch = (t->train->count + global - 1) / global;
    if (t->o.iters && t->o.epochs)
        return st_fail(err, ST_EUSAGE, "--iters %ld and --epochs %ld: give one (the run's "
                       "length in iterations, or in passes over the training set)", t->o.iters,
                       t->o.epochs);
    if (t->o.iters)
        t->iterations = t->o.iters;
    else if (t->o.epochs)
        t->iterations = t->o.epochs * t->iters_per_epoch;
    else if (t->hp.max_batches)
        t->iterations = t->hp.max_batches;
    else
        return st_fail(err, ST_EUSAGE, "%s: no schedule: give --iters, --epochs or "
                       "max_batches= in [net]", t->cfg.path);
    if (!t->hp.solver.lr.max_batches)
        t->hp.solver.lr.max_batches = t->iterations;
    return ST_OK;
}

static st_status check_trainable(const st_trainer *t, st_error *err)
{
    const st_layer *last = t->net.layers[t->net.n_layers - 1];
    if (last->is_loss)
        return ST_OK;
    return st_fail(err, ST_EINPUT, "%s:%d: the last layer is [%s]: training needs a loss "
                   "layer ([softmax] or [cost]) at the end", t->cfg.path, last->line,
                   last->ops->type);
}

/* Above this many parameters one worker with intra-op threads replaces
 * several workers: measured on 2 cores, AlexNet (62M) trains as fast with
 * -t 1 --intra 2 as with -t 2 and saves a 250 MB gradient buffer; LeNet-5
 * and cifar-alexnet (5.9M) are as fast either way. */
#define MANY_PARAMETERS (16u << 20)

/* Fill in -t / --intra left at 0 (see train.h). */
static void choose_threads(st_trainer *t)
{
    int cores = st_usable_cores();
    const char *why = NULL;
    if (t->o.threads == 0 && t->o.intra == 0) {
        if (st_params_learned(&t->net.params) > MANY_PARAMETERS) {
            t->o.threads = 1;
            t->o.intra = cores;
            why = "one worker using every core: the network has more than 16M parameters";
        } else {
            t->o.threads = cores < t->batch ? cores : t->batch;
            t->o.intra = 1;
            why = "one worker per core";
        }
    } else if (t->o.threads == 0) {
        t->o.threads = cores / t->o.intra > 0 ? cores / t->o.intra : 1;
        if (t->o.threads > t->batch)
            t->o.threads = t->batch;
        why = "cores / --intra workers";
    } else if (t->o.intra == 0) {
        t->o.intra = 1;
    }
    if (why)
        st_info(&t->log, "threads: %d worker%s x %d (%s; -t and --intra choose)", t->o.threads,
                t->o.threads > 1 ? "s" : "", t->o.intra, why);
}

static void snapshot_meta(const st_trainer *t, long iteration, st_snapshot_meta *m)
{
    memset(m, 0, sizeof *m);
    m->iteration = iteration;
    m->seed = t->o.seed;
    m->batch = t->batch;
    m->workers = t->o.threads;
    m->state_planes = t->ps.state_planes;
    snprintf(m->solver, sizeof m->solver, "%s", st_solver_rule_names[t->hp.solver.rule]);
    m->settings = t->settings;
    m->choices = t->choices_text && *t->choices_text ? t->choices_text : NULL;
}

/* Whether the kernels take their implementations from the choice table
 * (measured or given), not from --conv-impl NAME. */
static int kernel_choices_used(const st_trainer *t)
{
    return t->choices && (!t->o.conv_impl || strcmp(t->o.conv_impl, "auto") == 0);
}

/* The kernel choices: --conv-impl checked against the backend's names, the
 * table the workers share, and the choices --kernel-choices gives. */
static st_status setup_choices(st_trainer *t, st_error *err)
{
    const st_train_opts *o = &t->o;
    const char *const *impls = t->backend->conv_impls;
    const char *given = o->conv_impl ? "--conv-impl" : o->kernel_choices ? "--kernel-choices"
                      : o->save_kernel_choices ? "--save-kernel-choices" : NULL;
    if (!impls)
        return given ? st_fail(err, ST_EUSAGE, "%s: the %s backend has one implementation "
                               "of each kernel (these options choose among oneDNN's: "
                               "--backend dnnl)", given, t->backend->name)
                     : ST_OK;
    char names[256] = "auto";
    int known = !o->conv_impl || strcmp(o->conv_impl, "auto") == 0;
    for (int i = 0; impls[i]; i++) {
        size_t len = strlen(names);
        snprintf(names + len, sizeof names - len, "%s%s", impls[i + 1] ? ", " : " or ",
                 impls[i]);
        known |= o->conv_impl && strcmp(o->conv_impl, impls[i]) == 0;
    }
    if (!known)
        return st_fail(err, ST_EUSAGE, "--conv-impl %s: expected %s", o->conv_impl, names);
    if (o->kernel_choices && o->conv_impl && strcmp(o->conv_impl, "auto") != 0)
        return st_fail(err, ST_EUSAGE, "--kernel-choices with --conv-impl %s: give one (the "
                       "file chooses per kernel, --conv-impl for all)", o->conv_impl);
    st_status st = st_choices_create(&t->choices, err);
    char *text = NULL;
    if (st == ST_OK && o->kernel_choices)
        st = st_read_text(o->kernel_choices, "kernel choice file", (size_t)16 << 20, &text,
                          NULL, err);
    if (st == ST_OK && text)
        st = st_choices_parse(t->choices, text, o->kernel_choices, err);
    free(text);
    if (st != ST_OK && o->kernel_choices)
        st_error_prefix(err, "--kernel-choices ");
    return st;
}

static st_status write_choices(FILE *f, void *ctx, st_error *err)
{
    const st_trainer *t = ctx;
    fprintf(f, "# singletrain kernel choices for %s, %d worker%s of batch %d: KEY = VALUE, "
            "then what was timed (ms per call); read by --kernel-choices\n", t->cfg_path,
            t->o.threads, t->o.threads == 1 ? "" : "s", t->batch);
    char *text = st_choices_text(t->choices, ST_CHOICES_VALUES | ST_CHOICES_TRIALS, NULL);
    if (!text)
        return st_fail(err, ST_ENOMEM, "out of memory writing the kernel choices");
    fputs(text, f);
    free(text);
    return ferror(f) ? st_fail(err, ST_EIO, "%s: write failed", t->o.save_kernel_choices)
                     : ST_OK;
}

/* After set-up: what was measured and given, the text snapshots keep, and
 * --save-kernel-choices. */
static st_status finish_choices(st_trainer *t, st_error *err)
{
    if (!t->choices)
        return ST_OK;
    int measured, given, unused, count;
    st_choices_counts(t->choices, &measured, &given, &unused);
    t->choices_text = st_choices_text(t->choices, ST_CHOICES_VALUES, &count);
    char *notes = st_choices_text(t->choices, ST_CHOICES_NOTES, NULL);
    if (!t->choices_text || !notes) {
        free(notes);
        return st_fail(err, ST_ENOMEM, "out of memory listing the kernel choices");
    }
    for (char *line = strtok(notes, "\n"); line; line = strtok(NULL, "\n"))
        st_warn(&t->log, "kernel choice %s; measured instead", line + 2);
    free(notes);
    if (unused && kernel_choices_used(t))
        st_warn(&t->log, "%d of the kernel choices given match no kernel of this run (choices "
                "are per layer, shape and samples per worker: made for another network, batch "
                "or -t?)", unused);
    if (count && kernel_choices_used(t))
        st_info(&t->log, "kernel choices: %d measured at set-up, %d given%s", measured, given,
                t->o.profile ? " (listed with the profile)" : "");
    st_status st = ST_OK;
    if (t->o.save_kernel_choices && st_cluster_rank(t->o.cluster) == 0) {
        st = st_write_atomic(t->o.save_kernel_choices, write_choices, t, err);
        if (st == ST_OK)
            st_info(&t->log, "kernel choices saved to %s", t->o.save_kernel_choices);
        else
            st_error_prefix(err, "--save-kernel-choices ");
    }
    return st;
}

/* Multi-node: every rank runs rank 0's kernel choices, so that the nodes
 * run the same implementations (and a run given rank 0's saved choices is
 * the same run): rank 0 sends them once its kernels exist (local: how its
 * set-up went), the others take them before building theirs. Every rank
 * calls this once, whatever its own set-up did. */
static st_status share_choices(st_trainer *t, st_status local, st_error *err)
{
    st_cluster *c = t->o.cluster;
    char *text = NULL;
    if (st_cluster_rank(c) == 0 && local == ST_OK && t->choices)
        text = st_choices_text(t->choices, ST_CHOICES_VALUES, NULL);
    int ok = local == ST_OK && (st_cluster_rank(c) != 0 || !t->choices || text);
    st_status st = st_cluster_share_text(c, ok, &text, err);
    if (st == ST_OK && local == ST_OK && st_cluster_rank(c) != 0 && text && t->choices)
        st = st_choices_parse(t->choices, text, "rank 0's kernel choices", err);
    free(text);
    return local != ST_OK ? local : st;
}

/* Continue from o.resume: the weights, the solver state and the iteration;
 * the seed and batch must be the snapshot's, or the data order and random
 * streams would not continue. */
static st_status resume(st_trainer *t, st_error *err)
{
    const char *path = t->o.resume;
    st_snapshot_meta m = {.settings = NULL}, mine;
    snapshot_meta(t, 0, &mine);
    st_status st = st_snapshot_resume(path, &t->net, t->ps.weights, t->ps.state,
                                      t->ps.state_planes, &m, err);
    char diff[768];
    if (st == ST_OK && strcmp(m.solver, mine.solver) != 0)
        st = st_fail(err, ST_EINPUT, "%s: the snapshot's solver is %s, this run's %s: resume "
                     "with solver=%s", path, m.solver, mine.solver, m.solver);
    else if (st == ST_OK && st_hparams_settings_differ(&t->cfg, m.settings, strlen(m.settings),
                                                       "the snapshot", diff, sizeof diff))
        st = st_fail(err, ST_EINPUT, "%s was taken with another cfg: %s; resume with the cfg "
                     "it was taken with (or start from its weights with --weights)", path,
                     diff);
    if (st == ST_OK && m.choices && t->choices && kernel_choices_used(t))
        st = st_choices_parse(t->choices, m.choices, path, err);
    else if (st == ST_OK && m.choices && t->choices)
        st_warn(&t->log, "%s: the snapshot's kernel choices are not used with --conv-impl %s, "
                "so the weights will not be bitwise those of an uninterrupted run (leave "
                "--conv-impl out for that)", path, t->o.conv_impl);
    free(m.settings);
    if (st == ST_OK && m.batch != t->batch)
        st = st_fail(err, ST_EUSAGE, "%s: the snapshot was taken with batch %d, this run has "
                     "%d: give -b %d", path, m.batch, t->batch, m.batch);
    if (st == ST_OK && m.seed != t->o.seed)
        st = st_fail(err, ST_EUSAGE, "%s: the snapshot was taken with seed %llu, this run has "
                     "%llu: give --seed %llu", path, (unsigned long long)m.seed,
                     (unsigned long long)t->o.seed, (unsigned long long)m.seed);
    if (st == ST_OK && m.iteration >= t->iterations)
        st = st_fail(err, ST_EUSAGE, "%s: the snapshot is at iteration %ld and this run has %ld: "
                     "nothing left to do (give more --iters or --epochs)", path, m.iteration,
                     t->iterations);
    if (st != ST_OK) {
        st_error_prefix(err, "--resume ");
        return st;
    }
    if (m.workers != t->o.threads)
        st_warn(&t->log, "%s was written by %d workers, this run has %d: the gradient sums "
                "round differently, so the weights will not be bitwise those of an "
                "uninterrupted run (give -t %d for that)", path, m.workers, t->o.threads,
                m.workers);
    t->start = m.iteration;
    st_info(&t->log, "resuming from %s at iteration %ld of %ld (epoch %.2f)", path, m.iteration,
            t->iterations, (double)m.iteration / (double)t->iters_per_epoch);
    return ST_OK;
}

/* --weights: the weights of a snapshot or a Darknet file; the solver
 * starts from zero state at iteration 0. */
static st_status start_from(st_trainer *t, const char *path, st_error *err)
{
    st_status st = st_weights_load_any(path, &t->net, t->ps.weights, err);
    if (st != ST_OK) {
        st_error_prefix(err, "--weights ");
        return st;
    }
    st_info(&t->log, "starting from the weights in %s", path);
    return ST_OK;
}

/* NAME of the snapshots DIR/NAME_TAG.snap: the cfg's file name without its
 * last extension (exp.a.cfg: exp.a; .hidden.cfg: .hidden). The longest
 * name, NAME_ITERATION.snap.tmp.PID, must fit the directory's file-name
 * limit: checked now, not after training. */
static st_status name_snapshots(st_trainer *t, st_error *err)
{
    const char *base = strrchr(t->cfg_path, '/');
    base = base ? base + 1 : t->cfg_path;
    const char *dot = strrchr(base, '.');
    int len = (int)(dot && dot != base ? dot - base : (ptrdiff_t)strlen(base));
    snprintf(t->snapshot_name, sizeof t->snapshot_name, "%.*s", len, base);
    if (!t->o.snapshot_dir)
        return ST_OK;
    char longest[ST_PATH_MAX + 64];
    int n = snprintf(longest, sizeof longest, "%s_%ld.snap", t->snapshot_name, LONG_MAX);
    long name_max = st_name_max(t->o.snapshot_dir);
    if ((long)n + ST_TEMP_SUFFIX_MAX > name_max)
        return st_fail(err, ST_EUSAGE, "%s: the snapshots' names would be too long for "
                       "--snapshot-dir %s: %s.snap.tmp.PID takes up to %d bytes, over its "
                       "limit of %ld: give the cfg a shorter name", t->cfg_path,
                       t->o.snapshot_dir, longest, n + ST_TEMP_SUFFIX_MAX, name_max);
    if (strlen(t->o.snapshot_dir) + 1 + (size_t)n + ST_TEMP_SUFFIX_MAX >= ST_PATH_MAX)
        return st_fail(err, ST_EUSAGE, "--snapshot-dir %s: the snapshots' paths would be "
                       "longer than %d bytes", t->o.snapshot_dir, ST_PATH_MAX - 1);
    return ST_OK;
}

/* A run killed while writing a snapshot leaves its temporary file
 * (NAME_TAG.snap.tmp.PID, never the final name): clear those of processes
 * that are gone. */
static void remove_killed_snapshot_writes(const st_trainer *t)
{
    char prefix[ST_PATH_MAX + 1];
    snprintf(prefix, sizeof prefix, "%s_", t->snapshot_name);
    int n = st_remove_stale_temporaries(t->o.snapshot_dir, prefix, ".snap");
    if (n > 0)
        st_info(&t->log, "removed %d temporary file%s of snapshot writes that were killed "
                "(%s/%s*.snap.tmp.PID)", n, n == 1 ? "" : "s", t->o.snapshot_dir, prefix);
}

/* Whether path is a snapshot this run may write: DIR/NAME_final.snap or
 * DIR/NAME_ITERATION.snap of --snapshot-dir DIR. */
static int is_snapshot_path(const st_trainer *t, const char *path)
{
    const char *slash = strrchr(path, '/'), *base = slash ? slash + 1 : path;
    size_t name = strlen(t->snapshot_name), len = strlen(base);
    if (!t->o.snapshot_dir || len < name + 1 + 5 || strncmp(base, t->snapshot_name, name) != 0 ||
        base[name] != '_' || strcmp(base + len - 5, ".snap") != 0)
        return 0;
    const char *tag = base + name + 1;
    size_t tag_len = len - name - 1 - 5;
    int final = tag_len == 5 && strncmp(tag, "final", 5) == 0;
    if (!final && (tag_len == 0 || strspn(tag, "0123456789") < tag_len))
        return 0;
    char dir[ST_PATH_MAX];
    snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - path) + 1 : 1, slash ? path : ".");
    return st_same_file(dir, t->o.snapshot_dir);
}

/* Before any work: no output is a directory or in a directory it cannot be
 * written to, and none would overwrite an input or another output (the
 * snapshots may replace the one resumed or started from: that is a run
 * going on). */
static st_status check_paths(const st_trainer *t, st_error *err)
{
    const st_train_opts *o = &t->o;
    const st_data_paths *d = &t->data;
    char metrics_partial[ST_PATH_MAX + 16] = "", trace_partial[ST_PATH_MAX + 16] = "";
    char report_partial[ST_PATH_MAX + 16] = "";
    if (o->metrics)
        snprintf(metrics_partial, sizeof metrics_partial, "%s.partial", o->metrics);
    if (o->cpe_trace)
        snprintf(trace_partial, sizeof trace_partial, "%s.partial", o->cpe_trace);
    if (o->cpe_report)
        snprintf(report_partial, sizeof report_partial, "%s.partial", o->cpe_report);
    const st_named_path outputs[] = {
        {"--metrics", o->metrics}, {"--metrics's temporary", metrics_partial},
        {"--cpe-trace", o->cpe_trace}, {"--cpe-trace's temporary", trace_partial},
        {"--cpe-report", o->cpe_report}, {"--cpe-report's temporary", report_partial},
        {"--save-kernel-choices", o->save_kernel_choices},
    };
    const st_named_path inputs[] = {
        {"the network cfg", t->cfg_path}, {"--data", o->data},
        {"train=", d->train}, {"train_labels=", d->train_labels}, {"test=", d->test},
        {"test_labels=", d->test_labels}, {"names=", d->names},
        {"--kernel-choices", o->kernel_choices},
        {"--resume", o->resume}, {"--weights", o->weights}, /* STARTS, last */
    };
    enum { STARTS = 2 }; /* runs go on from them: a snapshot may replace them */
    int n_out = (int)(sizeof outputs / sizeof outputs[0]);
    int n_in = (int)(sizeof inputs / sizeof inputs[0]);
    st_status st = ST_OK;
    if (o->metrics)
        st = st_check_output_path("--metrics", o->metrics, err);
    if (st == ST_OK && o->cpe_trace)
        st = st_check_output_path("--cpe-trace", o->cpe_trace, err);
    if (st == ST_OK && o->cpe_report)
        st = st_check_output_path("--cpe-report", o->cpe_report, err);
    if (st == ST_OK && o->save_kernel_choices)
        st = st_check_output_path("--save-kernel-choices", o->save_kernel_choices, err);
    if (st == ST_OK)
        st = st_check_distinct(outputs, n_out, inputs, n_in, err);
    for (int i = 0; st == ST_OK && i < n_out + n_in - STARTS; i++) {
        const st_named_path *p = i < n_out ? &outputs[i] : &inputs[i - n_out];
        if (p->path && p->path[0] && is_snapshot_path(t, p->path))
            st = st_fail(err, ST_EUSAGE, "%s %s is one of the snapshots --snapshot-dir %s "
                         "would write (%s_final.snap, %s_ITERATION.snap): give another file",
                         p->what, p->path, o->snapshot_dir, t->snapshot_name,
                         t->snapshot_name);
    }
    return st;
}

/* The memory the run holds: the arenas by their sizes, and what setting
 * up the workers took besides (measured: kernels, their primitives and
 * per-layer state, a few kB per layer and worker; what an estimate from the
 * tensors alone missed, 2.6 MB against 1.4 GB for 20,000 layers). */
static void log_memory(const st_trainer *t)
{
    double mb = 1e-6 * sizeof(float), acts = 0.0, T = t->o.threads;
    for (int w = 0; w < t->o.threads; w++)
        acts += (double)st_arena_total(&st_sched_replica(t->sched, w)->arena) / 1e6;
    double weights = mb * (double)t->ps.count, state = weights * t->ps.state_planes;
    double setup = 1e-6 * (double)t->setup_bytes;
    st_info(&t->log, "memory: weights %.1f MB, solver state %.1f MB; %d worker%s: activations "
            "%.1f MB in all, gradients %.1f MB each, set-up %.1f MB (kernels and buffers, "
            "measured: %.1f kB per layer and worker); %.1f MB in all", weights, state,
            t->o.threads, t->o.threads > 1 ? "s" : "", acts, weights, setup,
            1e3 * setup / T / t->net.n_layers, weights + state + acts + T * weights + setup);
}

/* --cpe-trace FILE, written as FILE.partial, which the backend creates
 * exclusively: an old one (a killed run's, a planted symbolic link) is
 * removed first, not followed. */
static st_status start_cpe_trace(st_trainer *t, st_error *err)
{
    char partial[ST_PATH_MAX + 16];
    snprintf(partial, sizeof partial, "%s.partial", t->o.cpe_trace);
    unlink(partial);
    st_status st = st_signals_remove_on_exit(partial, err);
    return st == ST_OK
               ? t->backend->trace_start(st_sched_replica(t->sched, 0)->bctx, t->o.cpe_trace, err)
               : st;
}

st_status st_trainer_create(st_trainer **out, const char *cfg_path, const st_train_opts *o,
                            const st_log *log, st_error *err)
{
    *out = NULL;
    st_trainer *t = st_calloc(1, sizeof *t, "trainer", err);
    if (!t)
        return ST_ENOMEM;
    t->log = *log;
    t->o = *o;
    t->created = st_now();
    snprintf(t->cfg_path, sizeof t->cfg_path, "%s", cfg_path);
    t->snapshot_iter = -1;
    if (t->o.snapshot_every && !t->o.snapshot_dir)
        t->o.snapshot_dir = ".";
    o = &t->o;
    st_status st = st_backend_find(o->backend, &t->backend, err);
    if (st == ST_OK)
        st = st_net_load(cfg_path, &t->cfg, &t->hp, &t->net, log, err);
    size_t settings_bytes;
    if (st == ST_OK)
        st = st_hparams_settings(&t->cfg, &t->settings, &settings_bytes, err);
    int created = 0; /* once the cfg is known good: no directory left for a typo */
    if (st == ST_OK && o->snapshot_dir)
        st = st_make_dirs("--snapshot-dir", o->snapshot_dir, &created, err);
    if (st == ST_OK && created)
        st_info(log, "created the snapshot directory %s", o->snapshot_dir);
    if (st == ST_OK)
        st = name_snapshots(t, err);
    if (st == ST_OK && o->snapshot_dir && st_cluster_rank(o->cluster) == 0)
        remove_killed_snapshot_writes(t);
    if (st == ST_OK)
        st = check_trainable(t, err);
    if (st == ST_OK) {
        t->batch = o->batch ? o->batch : t->hp.batch;
        if (t->batch < o->threads)
            st = st_fail(err, ST_EUSAGE, "-t %d workers need a batch of at least %d images "
                         "(the batch is %d%s)", o->threads, o->threads, t->batch,
                         o->batch ? "" : ", batch= in [net]; see -b");
        choose_threads(t);
        o = &t->o;
    }
    if (st == ST_OK)
        st = find_data(t, err);
    if (st == ST_OK)
        st = check_paths(t, err);
    if (st == ST_OK) {
        st_net_print(&t->net, log);
        t->transform = t->hp.transform;
        t->transform.seed = o->seed;
        st = open_data(t, err);
    }
    if (st == ST_OK && o->sync != ST_SYNC_BSP && (o->snapshot_every || o->resume))
        st = st_fail(err, ST_EUSAGE, "--%s with --sync %s: periodic snapshots and exact "
                     "resume need bulk-synchronous training (the workers of SSP and ASP are "
                     "at different iterations); leave --sync out", o->resume ? "resume" :
                     "snapshot-every", sync_names[o->sync]);
    if (st == ST_OK && o->overlap && !o->cluster)
        st = st_fail(err, ST_EUSAGE, "--overlap: overlapping the all-reduce with backward needs "
                     "several nodes (mpirun -np P with P > 1)");
    if (st == ST_OK && o->cluster && o->sync != ST_SYNC_BSP)
        st = st_fail(err, ST_EUSAGE, "--sync %s: training across nodes (mpirun) is "
                     "bulk-synchronous only; leave --sync out", sync_names[o->sync]);
    if (st == ST_OK)
        st = plan_schedule(t, err);
    if (st == ST_OK) { /* checked on one node too: a mistyped name is an error there */
        st_cluster_opts co = {o->allreduce, o->supernode_size, o->sim_cross_bandwidth, 0,
                              o->allreduce_granularity};
        st = st_cluster_configure(o->cluster, &co, &t->allreduce, err);
    }
    if (st == ST_OK)
        st = setup_choices(t, err);
    if (st == ST_OK)
        st = st_ps_init(&t->ps, &t->net.params, o->threads,
                        st_solver_state_per_param(&t->hp.solver), err);
    if (st == ST_OK) {
        st_params_init(&t->net.params, t->ps.weights, o->seed);
        if (o->resume && o->weights)
            st = st_fail(err, ST_EUSAGE, "--weights and --resume: give one (a snapshot "
                         "resumed brings its own weights)");
        else if (o->resume)
            st = resume(t, err);
        else if (o->weights)
            st = start_from(t, o->weights, err);
        t->warm_end = t->start + o->warmup;
    }
    if (st == ST_OK && o->warmup >= t->iterations - t->start && o->warmup > 0)
        st = st_fail(err, ST_EUSAGE, "--warmup %ld leaves no iteration to time: the run has "
                     "%ld%s; give a --warmup below that", o->warmup, t->iterations - t->start,
                     t->start ? " after the resumed snapshot's" : "");
    int ranks = st_cluster_size(o->cluster), rank = st_cluster_rank(o->cluster);
    if (ranks > 1 && rank > 0)
        st = share_choices(t, st, err);
    if (st == ST_OK) {
        st_sched_opts so = {
            .threads = o->threads, .intra = o->intra, .sync = o->sync,
            .staleness = o->staleness, .batch = t->batch, .timing = o->profile,
            .backend = t->backend, .solver = &t->hp.solver, .seed = o->seed,
            .conv_impl = t->backend->conv_impls && !o->conv_impl ? "auto" : o->conv_impl,
            .choices = t->choices,
            .train = t->train, .test_count = t->test ? t->test->count : 0,
            .transform = &t->transform,
            .record_bytes = t->test && st_record_bytes(t->test) > st_record_bytes(t->train)
                                ? st_record_bytes(t->test) : st_record_bytes(t->train),
            .cluster = o->cluster, .overlap = o->overlap, .bucket_bytes = o->bucket_bytes,
            .stop = o->stop,
        };
        size_t rss = st_current_rss();
        st = st_sched_create(&t->sched, &t->net, &t->ps, &so, err);
        size_t grown = st_current_rss();
        t->setup_bytes = grown > rss ? grown - rss : 0;
    }
    if (ranks > 1 && rank == 0)
        st = share_choices(t, st, err);
    if (st == ST_OK)
        st = finish_choices(t, err);
    if (st == ST_OK && ((o->cpe_trace && !t->backend->trace_start) ||
                        ((o->cpe_report || o->cpe_cost_only) && !t->backend->run_begin)))
        st = st_fail(err, ST_EUSAGE, "--%s needs --backend cpe",
                     o->cpe_trace ? "cpe-trace" : o->cpe_report ? "cpe-report" : "cpe-cost-only");
    for (int w = 0; st == ST_OK && t->backend->run_begin && w < o->threads; w++)
        st = t->backend->run_begin(st_sched_replica(t->sched, w)->bctx, o->cpe_cost_only,
                                   w == 0 ? o->cpe_report : NULL, err);
    if (st == ST_OK && o->cpe_trace)
        st = start_cpe_trace(t, err);
    if (st == ST_OK)
        log_memory(t);
    if (st == ST_OK)
        st = st_batchq_init(&t->batches, BATCH_RING, t->batch, st_shape_count(t->net.input),
                            err);
    if (st != ST_OK) {
        st_trainer_free(t);
        return st;
    }
    *out = t;
    return ST_OK;
}

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

/* The test phase; in multi-node mode rank 0 alone tests (the weights are
 * the same everywhere) while the others go on to the next iteration's
 * all-reduce and wait for it there. */
static st_status run_test(st_trainer *t, long it, st_train_result *res, st_error *err)
{
    if (!t->test || t->o.no_test || st_cluster_rank(t->o.cluster) != 0)
        return ST_OK;
    long correct;
    double loss, t0 = st_now();
    st_status st = check_weights(t, it, err);
    if (st == ST_OK)
        st = st_sched_test(t->sched, t->test, &correct, &loss, err);
    t->test_seconds += st_now() - t0;
    if (st == ST_OK && !isfinite(loss))
        st = st_fail(err, ST_EDIVERGED, "iteration %ld: training diverged: the test loss is "
                     "not finite (try a lower learning_rate)", it);
    if (st != ST_OK)
        return st;
    res->test_accuracy = (double)correct / (double)t->test->count;
    res->test_loss = loss / (double)t->test->count;
    if (res->test_accuracy > res->best_accuracy) {
        res->best_accuracy = res->test_accuracy;
        t->best_iteration = it;
    }
    st_progress_test(t->log.progress, it, res->test_accuracy, res->test_loss);
    st_info(&t->log, "test  iter %ld  accuracy %.2f%%  loss %.4f  (%ld images)", it,
            100.0 * res->test_accuracy, res->test_loss, t->test->count);
    return ST_OK;
}

/* Snapshot the state after `iteration` iterations as DIR/NAME_TAG.snap
 * (TAG: "final" at the end, else the iteration). */
static st_status save_snapshot(st_trainer *t, long iteration, int final, st_error *err)
{
    if (!t->o.snapshot_dir)
        return ST_OK;
    char path[sizeof t->snapshot_path], tag[32];
    snprintf(tag, sizeof tag, final ? "final" : "%ld", iteration);
    int len = snprintf(path, sizeof path, "%s/%s_%s.snap", t->o.snapshot_dir,
                       t->snapshot_name, tag);
    if (len < 0 || (size_t)len >= sizeof path)
        return st_fail(err, ST_EUSAGE, "--snapshot-dir %s: the snapshot's path would be "
                       "longer than %zu bytes", t->o.snapshot_dir, sizeof path - 1);
    st_snapshot_meta m;
    snapshot_meta(t, iteration, &m);
    st_status st = check_weights(t, iteration, err);
    if (st != ST_OK)
        return st;
    if (st_cluster_rank(t->o.cluster) == 0) /* the weights are the same on every rank */
        st = st_snapshot_save(path, &t->net, t->ps.weights, t->ps.state, &m, err);
    if (st != ST_OK) {
        st_error_prefix(err, "--snapshot-dir: ");
        return st;
    }
    memcpy(t->snapshot_path, path, sizeof path);
    t->snapshot_iter = iteration;
    if (final)
        st_info(&t->log, "weights saved to %s", path);
    else
        st_info(&t->log, "snapshot at iteration %ld saved to %s", iteration, path);
    return ST_OK;
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

/* Per-layer milliseconds per iteration (worker 0) and the time split. */
/* Each layer's passes in worker 0 against the roofline: its GFLOP/s and
 * share of the FMA peak, the bytes it must move and their rate, and the
 * share of its time the roofline says it cannot do without (100%: at the
 * ceiling; little: far from it, whichever limit binds). */
static void print_roofline(const st_trainer *t, double iters)
{
    st_roofline ceilings; /* measured now: the run's figures and peak memory are taken */
    st_roofline_measure(&ceilings, t->o.fma_peak);
    const st_roofline *rl = &ceilings;
    const st_net *net = &t->net;
    const st_replica *r = st_sched_replica(t->sched, 0);
    int n = (t->batch + t->o.threads - 1) / t->o.threads, cores = t->o.intra > 0 ? t->o.intra : 1;
    st_info(&t->log, "roofline of worker 0 (%d image%s, %d core%s): FMA peak %.1f GFLOP/s per "
            "core (%s%s), memcpy %.0f GB/s to %zu kB, %.0f GB/s to %zu MB, %.0f GB/s beyond",
            n, n > 1 ? "s" : "", cores, cores > 1 ? "s" : "", rl->fma_gflops, rl->isa,
            rl->fma_measured ? ", measured after training" : " by --fma-peak", rl->copy_gbs[0],
            rl->set_bytes[0] >> 10, rl->copy_gbs[1], rl->set_bytes[1] >> 20, rl->copy_gbs[2]);
    st_info(&t->log, "layer  type      pass               ms   GFLOP/s  of peak        MB     "
            "GB/s  bound    of bound");
    static const char *const pass_names[3] = {"forward", "backward-data", "backward-weights"};
    for (int i = 0; i < net->n_layers; i++) {
        const st_layer_time *lt = &r->time[i];
        const double ms[3] = {1e3 * lt->forward / iters, 1e3 * lt->backward_data / iters,
                              1e3 * lt->backward_weights / iters};
        st_pass_work w = st_net_pass_work(net, i, n);
        const st_layer *l = net->layers[i];
        int on_input = l->n_src == 0 || l->src[0] < 0; /* no input gradient (as net.c) */
        for (int p = 0; p < 3; p++) {
            if (ms[p] <= 0.0 || (p == 1 && on_input) || (p == 2 && l->flops == 0.0))
                continue;
            double flops = w.flops[p], bytes = w.bytes[p], s = ms[p] / 1e3;
            int compute_bound;
            double bound = st_roofline_bound(rl, cores, flops, bytes, &compute_bound);
            st_info(&t->log, "%5d  %-9s %-16s %8.3f %9.1f %7.1f%% %9.3f %8.1f  %-8s %7.1f%%", i,
                    l->ops->short_name, pass_names[p], ms[p], flops / s / 1e9,
                    100.0 * flops / s / (1e9 * rl->fma_gflops * cores), bytes / 1e6,
                    bytes / s / 1e9, compute_bound ? "compute" : "memory", 100.0 * bound / s);
        }
    }
}

static void print_profile(const st_trainer *t, const st_train_result *res, long timed)
{
    const st_net *net = &t->net;
    const st_replica *r = st_sched_replica(t->sched, 0);
    double iters = (double)(timed > 0 ? timed : 1), total = 0.0;
    for (int i = 0; i < net->n_layers; i++)
        total += r->time[i].forward + r->time[i].backward_data + r->time[i].backward_weights;
    st_info(&t->log, "profile: ms per iteration over %ld iterations (after %ld warm-up), "
            "worker 0 of %d", timed, t->o.warmup, t->o.threads);
    st_info(&t->log, "layer  type        forward  bwd-data  bwd-weights    total  share");
    for (int i = 0; i < net->n_layers; i++) {
        const st_layer_time *lt = &r->time[i];
        double sum = lt->forward + lt->backward_data + lt->backward_weights;
        st_info(&t->log, "%5d  %-9s %9.3f %9.3f %12.3f %8.3f %5.1f%%", i,
                net->layers[i]->ops->short_name, 1e3 * lt->forward / iters,
                1e3 * lt->backward_data / iters, 1e3 * lt->backward_weights / iters,
                1e3 * sum / iters, total > 0 ? 100.0 * sum / total : 0.0);
    }
    st_info(&t->log, "throughput: %.1f img/s, %.1f GFLOP/s (%.3f GFLOP per image: 3 x forward)",
            res->images_per_s, res->gflops, 3.0 * net->flops / 1e9);
    print_roofline(t, iters);
    char *choices = t->choices ? st_choices_text(t->choices, ST_CHOICES_VALUES |
                                                  ST_CHOICES_TRIALS | ST_CHOICES_NOTES, NULL)
                               : NULL;
    if (choices && *choices) {
        st_info(&t->log, "kernel choices (KEY = VALUE; then what was timed: ms per call of "
                "each candidate layout, its passes' fastest implementations and the edges' "
                "reorders):");
        for (char *line = strtok(choices, "\n"); line; line = strtok(NULL, "\n"))
            st_info(&t->log, "  %s", line);
    }
    free(choices);
}

/* The time split of n iterations: a progress line ("  split,", plain text
 * progress only) or a summary line ("time split,"). */
static void log_split(const st_trainer *t, int progress, const char *what,
                      const st_time_split *s, double n)
{
    char line[256];
    snprintf(line, sizeof line, "%s ms per iteration: data %.3f, compute %.3f, barrier %.3f, "
             "aggregation %.3f, update %.3f", what, 1e3 * s->data / n, 1e3 * s->compute / n,
             1e3 * s->barrier / n, 1e3 * s->aggregate / n, 1e3 * s->update / n);
    if (progress)
        st_info_progress(&t->log, "%s", line);
    else
        st_info(&t->log, "%s", line);
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
    st_info_progress(&t->log, "iter %ld/%ld  epoch %.2f  loss %.4f  lr %.5g  %.0f img/s", done,
                     t->iterations, (double)done / (double)t->iters_per_epoch, row.loss, lr,
                     row.images_per_s);
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
            log_split(t, 1, "  split,", window, (double)window_iters);
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

/* BSP in segments (segment_end) while the prefetcher reads ahead; a stop
 * (the stop flag) ends the run after the iteration in flight, with a
 * snapshot. On one node a stop asked during a test phase or a snapshot ends
 * it at the segment's end; across nodes only the iteration's control sum
 * decides, so that every rank stops at the same iteration. */
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
        double seg_start = st_now();
        st_status st = st_sched_run_bsp(t->sched, &t->batches, first, last,
                                        bsp_iteration_done, &p, err);
        if (st != ST_OK)
            return st;
        if (p.done > t->warm_end)
            res->seconds += st_now() - (first >= t->warm_end ? seg_start : timed_start);
        int reason = st_sched_stop_reason(t->sched);
        if (!reason && !t->o.cluster && last < t->iterations)
            reason = stop_asked(t);
        if (reason) {
            announce_stop(t); /* no iteration may have finished since the signal */
            res->iterations = p.done;
            res->signal = reason;
            return save_snapshot(t, p.done, 0, err);
        }
        if (last % test_every == 0 || last == t->iterations)
            st = run_test(t, last, res, err);
        if (st == ST_OK && t->o.snapshot_every && last % t->o.snapshot_every == 0 &&
            last < t->iterations)
            st = save_snapshot(t, last, 0, err);
        if (st != ST_OK && t->o.cluster && last < t->iterations)
            st_cluster_abort(t->o.cluster, err); /* rank 0's alone: the others wait for it */
        if (st != ST_OK)
            return st;
        first = last;
    }
    res->iterations = t->iterations;
    res->images_per_s = res->seconds > 0 ? (double)p.images / res->seconds : 0.0;
    return ST_OK;
}

static st_status run_bsp(st_trainer *t, st_train_result *res, st_error *err)
{
    st_prefetch_opts po = {.source = t->train, .transform = &t->transform, .batch = t->batch,
                           .rank = st_cluster_rank(t->o.cluster),
                           .ranks = st_cluster_size(t->o.cluster), .seed = t->o.seed,
                           .io_threads = t->o.io_threads, .q = &t->batches};
    st_prefetch *pf;
    st_status st = st_prefetch_start(&pf, &po, t->start, t->iterations, err);
    if (st != ST_OK)
        return st;
    st_error run_err = {0};
    st = run_segments(t, res, &run_err);
    if (st != ST_OK || res->signal)
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
        return save_snapshot(t, finished, 0, err);
    }
    return run_test(t, t->iterations, res, err);
}

/* The summary's lines after "done:", "time split" and "test accuracy":
 * the best test phase, communication across nodes, where the time went. */
static void log_summary(const st_trainer *t, const st_train_result *res, long timed)
{
    if (res->best_accuracy >= 0)
        st_info(&t->log, "best test accuracy %.2f%% after iteration %ld (epoch %.2f)",
                100.0 * res->best_accuracy, t->best_iteration,
                (double)t->best_iteration / (double)t->iters_per_epoch);
    if (t->o.cluster)
        st_info(&t->log, "communication ms per iteration: %.3f (control sums and all-reduce "
                "across nodes, outside the time split above)",
                1e3 * res->split.communicate / (double)(timed > 0 ? timed : 1));
    double now = st_now();
    st_info(&t->log, "total time %.1f s: set-up %.1f s, training %.1f s, test phases %.1f s",
            now - t->created, t->began - t->created, now - t->began - t->test_seconds,
            t->test_seconds);
}

static void log_line(void *ctx, const char *line)
{
    st_info(ctx, "%s", line);
}

/* Whether key names data in [net] (train=, test=, ...): the data's paths
 * may differ between nodes, its content is compared instead. */
static int is_data_key(const char *key)
{
    static const char *const keys[] = {"train", "train_labels", "test", "valid",
                                       "test_labels", "names", "labels", "classes", NULL};
    for (int i = 0; keys[i]; i++)
        if (strcmp(key, keys[i]) == 0)
            return 1;
    return 0;
}

/* Every section, key and value of the cfg but the data keys of [net]. */
static uint64_t cfg_hash(const st_cfg *cfg)
{
    uint64_t h = ST_HASH_START;
    for (int s = 0; s < cfg->n_secs; s++) {
        const st_cfg_section *sec = &cfg->secs[s];
        h = st_hash_string(h, sec->type);
        for (int k = 0; k < sec->n_opts; k++)
            if (s > 0 || !is_data_key(sec->opts[k].key)) {
                h = st_hash_string(h, sec->opts[k].key);
                h = st_hash_string(h, sec->opts[k].val);
            }
    }
    return h;
}

static uint64_t lr_schedule_hash(const st_lr_schedule *lr)
{
    uint64_t h = st_hash_bytes(ST_HASH_START, lr->steps, (size_t)lr->n_steps * sizeof(int));
    h = st_hash_bytes(h, lr->scales, (size_t)lr->n_steps * sizeof(float));
    double rest[] = {lr->gamma, lr->power, lr->scale, lr->step, lr->burn_in,
                     (double)lr->max_batches};
    return st_hash_bytes(h, rest, sizeof rest);
}

/* What changes the computation, in the order it is compared (the first
 * difference is named). Deliberately left out, free to differ: the output
 * (--log-format, --log-every, --metrics, -q, -v, --profile, --cpe-trace),
 * what rank 0 alone does (the test set, --test-interval, --no-test,
 * --test-images, --snapshot-dir, --snapshot-every), how fast data is read
 * (--io-threads, --no-verify), --warmup (speed figures only),
 * --peer-timeout, and the data's paths (their content is compared). */
void st_trainer_fingerprint(const st_trainer *t, st_cluster_fingerprint *fp)
{
    const st_solver_cfg *sv = &t->hp.solver;
    const st_source *train = t->train;
    memset(fp, 0, sizeof *fp);
    st_cluster_fp_add(fp, "the network (cfg hash)", st_net_hash(&t->net));
    st_cluster_fp_add(fp, "the batch (-b)", (uint64_t)t->batch);
    st_cluster_fp_add(fp, "the worker count (-t)", (uint64_t)t->o.threads);
    st_cluster_fp_add(fp, "the intra-op threads (--intra)", (uint64_t)t->o.intra);
    st_cluster_fp_add(fp, "the seed (--seed)", t->o.seed);
    st_cluster_fp_add(fp, "the schedule (iterations)", (uint64_t)t->iterations);
    st_cluster_fp_add(fp, "the solver (solver=)", (uint64_t)sv->rule);
    st_cluster_fp_add(fp, "the synchronisation (--sync)", (uint64_t)t->o.sync);
    st_cluster_fp_add(fp, "the all-reduce algorithm (--allreduce)", (uint64_t)t->allreduce);
    st_cluster_fp_add(fp, "--overlap", (uint64_t)t->o.overlap);
    st_cluster_fp_add(fp, "--allreduce-granularity", t->o.allreduce_granularity &&
                      strcmp(t->o.allreduce_granularity, "layer") == 0);
    st_cluster_fp_add(fp, "--bucket-size", t->o.bucket_bytes);
    st_cluster_fp_add(fp, "--supernode-size", (uint64_t)t->o.supernode_size);
    st_cluster_fp_add_double(fp, "--sim-cross-bandwidth", t->o.sim_cross_bandwidth);
    st_cluster_fp_add(fp, "the backend (--backend)", st_hash_string(ST_HASH_START,
                                                                    t->backend->name));
    st_cluster_fp_add_double(fp, "the learning rate (learning_rate= in [net])",
                             sv->lr.learning_rate);
    st_cluster_fp_add(fp, "the learning-rate policy (policy= in [net])", sv->lr.policy);
    st_cluster_fp_add(fp, "the learning-rate schedule (steps=, scales=, step=, scale=, "
                      "gamma=, power=, burn_in=, max_batches= in [net])",
                      lr_schedule_hash(&sv->lr));
    st_cluster_fp_add_double(fp, "the momentum (momentum= in [net])", sv->momentum);
    st_cluster_fp_add_double(fp, "the weight decay (decay= in [net])", sv->decay);
    double rule[] = {sv->beta1, sv->beta2, sv->eps, sv->rms_decay, sv->delta};
    st_cluster_fp_add(fp, "the update rule's settings (B1=, B2=, eps=, rms_decay=, delta= in "
                      "[net])", st_hash_bytes(ST_HASH_START, rule, sizeof rule));
    double transform[ST_MAX_CHANNELS + 3];
    for (int c = 0; c < ST_MAX_CHANNELS; c++)
        transform[c] = t->transform.mean[c];
    transform[ST_MAX_CHANNELS] = t->transform.scale;
    transform[ST_MAX_CHANNELS + 1] = t->transform.crop;
    transform[ST_MAX_CHANNELS + 2] = t->transform.mirror;
    st_cluster_fp_add(fp, "the input transform (input_mean=, input_scale=, crop=, mirror= in "
                      "[net])", st_hash_bytes(ST_HASH_START, transform, sizeof transform));
    st_cluster_fp_add(fp, "a key of the cfg (the cfgs differ beyond the data paths)",
                      cfg_hash(&t->cfg));
    st_cluster_fp_add(fp, "the training data's kind (--data synthetic, or files)",
                      strcmp(train->name, "synthetic") == 0);
    st_cluster_fp_add(fp, "the number of training records (--train-images, the data)",
                      (uint64_t)train->count);
    int shape[] = {train->shape.c, train->shape.h, train->shape.w, train->classes};
    st_cluster_fp_add(fp, "the training records' shape or classes (the data, image_size=)",
                      st_hash_bytes(ST_HASH_START, shape, sizeof shape));
    st_cluster_fp_add(fp, "--skip-bad-images", (uint64_t)t->o.skip_bad_images);
    st_cluster_fp_add(fp, "the first iteration (--resume)", (uint64_t)t->start);
    uint64_t h = st_hash_bytes(ST_HASH_START, t->ps.weights, t->ps.count * sizeof(float));
    h = st_hash_bytes(h, t->ps.state, t->ps.count * (size_t)t->ps.state_planes * sizeof(float));
    st_cluster_fp_add(fp, "the initial weights or solver state (--weights, --resume)", h);
}

int st_trainer_channels(const st_trainer *t)
{
    return t->o.threads + t->o.overlap;
}

st_status st_trainer_run(st_trainer *t, st_train_result *res, st_error *err)
{
    memset(res, 0, sizeof *res);
    res->test_accuracy = res->best_accuracy = -1.0;
    char sync[32];
    snprintf(sync, sizeof sync, t->o.sync == ST_SYNC_SSP ? "%s:%d" : "%s", sync_names[t->o.sync],
             t->o.staleness);
    st_info(&t->log, "training: %ld iterations of batch %d (%ld per epoch), %d worker%s x %d "
            "thread%s, %s, backend %s, solver %s, seed %llu", t->iterations, t->batch,
            t->iters_per_epoch, t->o.threads, t->o.threads > 1 ? "s" : "", t->o.intra,
            t->o.intra > 1 ? "s" : "", sync, t->backend->name,
            st_solver_rule_names[t->hp.solver.rule], (unsigned long long)t->o.seed);
    if (t->o.cluster)
        st_info(&t->log, "nodes: %d ranks x batch %d = a global batch of %d images per "
                "iteration; all-reduce %s", st_cluster_size(t->o.cluster), t->batch,
                st_cluster_size(t->o.cluster) * t->batch,
                t->allreduce < 0 ? "auto (probing each algorithm first)" : t->o.allreduce);
    if (t->o.overlap)
        st_info(&t->log, "overlap: gradients all-reduced during backward in buckets of at "
                "least %zu bytes", t->o.bucket_bytes);
    st_status st = ST_OK;
    if (t->o.cluster) /* every rank starts from rank 0's weights */
        st = st_cluster_broadcast(t->o.cluster, t->ps.weights, t->ps.count, err);
    t->began = st_now();
    st_progress_begin(t->log.progress, t->start, t->iterations, t->iters_per_epoch);
    if (st == ST_OK)
        st = t->o.sync == ST_SYNC_BSP ? run_bsp(t, res, err) : run_async(t, res, err);
    if (st == ST_OK && !res->signal)
        st = check_weights(t, t->iterations, err);
    if (t->o.cluster)
        st_cluster_report(t->o.cluster, res->iterations - t->start, log_line, &t->log);
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
    res->iterations = t->iterations;
    res->gflops = res->images_per_s * 3.0 * t->net.flops / 1e9;
    res->peak_memory = (double)st_peak_rss();
    long timed = t->o.sync == ST_SYNC_BSP ? t->iterations - t->warm_end : t->iterations;
    st_info(&t->log, "done: %ld iterations in %.1f s, %.0f img/s%s, peak memory %.1f MB",
            t->iterations - t->start, res->seconds, res->images_per_s,
            t->o.warmup && t->o.sync == ST_SYNC_BSP ? " after warm-up" : "",
            res->peak_memory / 1e6);
    log_split(t, 0, "time split,", &res->split, (double)(timed > 0 ? timed : 1));
    if (res->best_accuracy >= 0)
        st_info(&t->log, "test accuracy: final %.2f%%, best %.2f%%", 100.0 * res->test_accuracy,
                100.0 * res->best_accuracy);
    log_summary(t, res, timed);
    res->skipped_images = t->skipped;
    if (t->skipped)
        st_warn(&t->log, "%ld unreadable images were skipped (--skip-bad-images)", t->skipped);
    if (t->o.profile)
        print_profile(t, res, timed);
    st = ST_OK;
    if (t->backend->run_report) {
        st_bctx *bctx0 = st_sched_replica(t->sched, 0)->bctx;
        st = t->backend->run_report(bctx0, (t->batch + t->o.threads - 1) / t->o.threads,
                                    t->o.threads, t->ps.count, log_line, &t->log, err);
        if (st == ST_OK && t->backend->trace_finish)
            st = t->backend->trace_finish(bctx0, err);
        if (t->o.cpe_trace) {
            char partial[ST_PATH_MAX + 16];
            snprintf(partial, sizeof partial, "%s.partial", t->o.cpe_trace);
            st_signals_keep(partial);
        }
    }
    if (st == ST_OK)
        st = save_snapshot(t, t->iterations, 1, err);
    if (st == ST_OK && !t->o.snapshot_dir) {
        st_info(&t->log, "weights not saved: give --snapshot-dir DIR to keep them as "
                "DIR/%s_final.snap", t->snapshot_name);
    }
    return st;
}
