/* The trainer's set-up (train.h's st_trainer_create): the options checked
 * against each other and the cfg, the network, the data and the schedule,
 * the threads, the kernel choices, the paths of the outputs and snapshots,
 * the memory the run will take against what the process may take
 * (memory_estimate.c), the starting point (--resume, --weights) and the
 * workers. Also st_trainer_dry_run (all of that but the allocations),
 * st_train_defaults, st_trainer_free and the accessors. The run is
 * loop.c's. */
#include "trainer_internal.h"

#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/cores.h"
#include "base/fileio.h"
#include "base/memory.h"
#include "base/signals.h"
#include "cpe/model.h"
#include "memory_estimate.h"
#include "train/darknet_weights.h"

/* Synthetic data when no files are given: records per split by default. */
#define SYNTHETIC_TRAIN 1024
#define SYNTHETIC_TEST 256

const char *const trainer_sync_names[] = {"bsp", "ssp", "asp"};

st_train_opts st_train_defaults(void)
{
    st_train_opts o = {.threads = 0, .intra = 0, .sync = ST_SYNC_BSP, .hybrid = -1, .seed = 1,
                       .backend = "dnnl", .log_every = 100, .io_threads = 1,
                       .allreduce = "rhd", .bucket_bytes = 512u << 10,
                       .peer_timeout = 600};
    return o;
}

int trainer_partitioned(const st_trainer *t)
{
    return t->o.rank_update == ST_RANK_UPDATE_PARTITIONED;
}

int trainer_state_planes(const st_trainer *t)
{
    return st_solver_state_per_param(&t->hp.solver);
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
    st_ps_part_free(&t->part);
    st_free_aligned(t->resumed_state);
    st_ps_free(&t->ps);
    st_source_close(t->train);
    st_source_close(t->test);
    st_net_free(&t->net);
    st_cfg_free(&t->cfg);
    free(t->settings);
    st_choice_cache_close(t->cache);
    st_choices_free(t->choices);
    free(t->choices_text);
    free(t);
}

/* One split; errors say which file and key named it. */
static st_status open_split(st_trainer *t, const char *where, const char *key, const char *path,
                            const char *labels, const char *names, long limit,
                            const st_output_ids *outputs, st_source **out, st_error *err)
{
    st_source_spec spec = {
        .path = path, .labels = labels, .names = names[0] ? names : NULL, .limit = limit,
        .classes = t->net.classes, .verify = !t->o.no_verify,
        .images = {.shape = t->hp.image_size, .skip_bad = t->o.skip_bad_images,
                   .skipped = &t->skipped, .outputs = outputs},
    };
    char net_where[ST_PATH_MAX + 32];
    snprintf(net_where, sizeof net_where, "%s:%d [net]", t->cfg.path, t->cfg.secs[0].line);
    long skipped = t->skipped;
    st_status st = st_source_open(out, &spec, err);
    /* said now, not only in the summary at the end, which a dry run, a
     * failure or a signal never reaches */
    if (st == ST_OK && t->skipped > skipped)
        st_warn(&t->log, "%s: %s=%s: %ld listed image%s cannot be read and %s dropped "
                "(--skip-bad-images): %ld records left", where, key, path,
                t->skipped - skipped, t->skipped - skipped == 1 ? "" : "s",
                t->skipped - skipped == 1 ? "was" : "were", (*out)->count);
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
    /* The outputs that exist, which the images of a list and the stripes of
     * a store must not be (check_paths compared them with the files named
     * here; these are read through those). */
    const st_train_opts *o = &t->o;
    char *partials[3] = {o->metrics ? st_output_partial_name(o->metrics) : NULL,
                         o->cpe_trace ? st_output_partial_name(o->cpe_trace) : NULL,
                         o->cpe_report ? st_output_partial_name(o->cpe_report) : NULL};
    const st_named_path outputs[] = {
        {"--metrics", o->metrics}, {"--metrics's temporary", partials[0]},
        {"--save-kernel-choices", o->save_kernel_choices},
        {"--cpe-trace", o->cpe_trace}, {"--cpe-trace's temporary", partials[1]},
        {"--cpe-report", o->cpe_report}, {"--cpe-report's temporary", partials[2]},
    };
    st_output_ids ids = {0};
    st_status st = ST_OK;
    for (size_t i = 0; st == ST_OK && i < sizeof outputs / sizeof outputs[0]; i++)
        st = st_output_ids_add(&ids, &outputs[i], err);
    if (st == ST_OK)
        st = open_split(t, where, "train", d->train, d->train_labels, d->names,
                        t->o.train_images, &ids, &t->train, err);
    if (st == ST_OK && d->test[0])
        st = open_split(t, where, "test", d->test, d->test_labels, d->names, t->o.test_images,
                        &ids, &t->test, err);
    st_output_ids_free(&ids);
    for (int i = 0; i < 3; i++)
        free(partials[i]);
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
    else if (!t->dry_run)
        return st_fail(err, ST_EUSAGE, "%s: no schedule: give --iters, --epochs or "
                       "max_batches= in [net]", t->cfg.path);
    if (!t->hp.solver.lr.max_batches)
        t->hp.solver.lr.max_batches = t->iterations;
    return ST_OK;
}

static st_status check_trainable(const st_trainer *t, st_error *err)
{
    const st_layer *last = t->net.layers[t->net.n_layers - 1];
    const st_layer *scores = t->net.layers[t->net.output_layer];
    if (last->is_loss && t->net.classes == 1) /* it trained to loss 0 and 100%, silently */
        st_warn(&t->log, "%s:%d: the network has one class ([%s] gives 1 output): every label "
                "is 0 and the one score is always the answer, so the loss goes to 0 and the "
                "accuracy is 100%% whatever the weights: nothing is learned (give the last "
                "layer with weights one output per class, at least 2)", t->cfg.path,
                scores->line, scores->ops->type);
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

/* The parameters of the model-parallel layer (from first_mp on) that has
 * the most. */
static size_t largest_mp_layer(const st_trainer *t, int first_mp)
{
    const st_param_table *pt = &t->net.params;
    size_t largest = 0;
    for (int i = first_mp; i < t->net.n_layers; i++) {
        size_t n = 0;
        for (int k = 0; k < pt->n; k++)
            if (pt->p[k].layer == i)
                n += pt->p[k].count;
        if (n > largest)
            largest = n;
    }
    return largest;
}

/* --parallel: resolve auto (-1) into hybrid where it runs bulk-synchronously,
 * with several workers, without --overlap, and its model-parallel layers
 * hold over MANY_PARAMETERS: there their gradients dominate each extra
 * worker's memory (AlexNet: 58.6M of 61M parameters, 234 MB a worker),
 * and data-parallel otherwise (LeNet-5 and the 32x32 AlexNets: their fully
 * connected layers' gradients are small, and the layers' meetings cost
 * time at small batches). *shared_from: where the gradient arena's model-parallel tail
 * begins (the arena's end when data-parallel). */
static void choose_parallel(st_trainer *t, size_t *shared_from)
{
    st_train_opts *o = &t->o;
    int first_mp;
    st_net_hybrid_split(&t->net, &first_mp, shared_from);
    size_t mp_params = t->net.params.count - *shared_from;
    if (o->hybrid < 0)
        o->hybrid = o->sync == ST_SYNC_BSP && !o->overlap && o->threads > 1 &&
                    mp_params > MANY_PARAMETERS;
    if (o->hybrid && first_mp < t->net.n_layers) {
        st_sched_opts so;
        trainer_sched_opts(t, &so);
        t->tail_applied = st_sched_tail_applied(&so);
        if (t->tail_applied) /* each worker's slice of the largest layer, in its scratch */
            st_info(&t->log, "parallel: hybrid: the fully connected layers from layer %d on "
                    "run model-parallel over %d worker%s, each applying the solver to its "
                    "slice of their %.1fM parameters in backward: no worker holds their "
                    "gradients (%.1f MB less)", first_mp, o->threads, o->threads > 1 ? "s" : "",
                    1e-6 * (double)mp_params, 1e-6 * sizeof(float) *
                    ((double)mp_params * o->threads - (double)largest_mp_layer(t, first_mp)));
        else
            st_info(&t->log, "parallel: hybrid: the fully connected layers from layer %d on "
                    "run model-parallel over %d worker%s: the gradients of their %.1fM "
                    "parameters are held once (%.1f MB less)", first_mp, o->threads,
                    o->threads > 1 ? "s" : "", 1e-6 * (double)mp_params,
                    1e-6 * sizeof(float) * (double)mp_params * (o->threads - 1));
        return;
    }
    if (o->hybrid)
        st_warn(&t->log, "parallel: hybrid: no layer can run model-parallel (fully connected "
                "layers without batch_normalize after the last other layer with parameters): "
                "data-parallel");
    o->hybrid = 0;
    *shared_from = t->net.params.count;
}

/* Whether the kernels take their implementations from the choice table
 * (measured or given), not from --conv-impl NAME. */
static int kernel_choices_used(const st_trainer *t)
{
    return t->choices && (!t->o.conv_impl || strcmp(t->o.conv_impl, "auto") == 0);
}

/* Seconds a run waits for another holding the kernel-choice cache's lock
 * (which it holds while it measures: a few seconds for LeNet-5 and the
 * 32x32 AlexNets on 2 cores) before it measures without waiting. */
#define CHOICE_CACHE_WAIT 120.0

/* What the choices of this run hold for, as the cache keys them: the
 * backend's (library, instruction set, CPU, precision), the threads (which
 * share the cores while the kernels are timed) and the layers (a layer's
 * choice weighs the reorders its neighbours' layouts force, and its
 * activation is fused: neither is in its key). */
static void choice_context(const st_trainer *t, char *buf, size_t size)
{
    char backend[512];
    t->backend->choice_context(backend, sizeof backend);
    snprintf(buf, size, "%s; %d worker%s x %d intra-op thread%s; layers %016llx", backend,
             t->o.threads, t->o.threads == 1 ? "" : "s", t->o.intra, t->o.intra == 1 ? "" : "s",
             (unsigned long long)trainer_cfg_hash(&t->cfg, 0));
}

/* The kernel-choice cache, for rank 0 of a run whose kernels measure (a
 * dry run only to save its choices): its choices added to the table below
 * the given ones (none read with --kernel-choices measure), its lock held
 * until finish_choices stores what was measured. */
static st_status open_cache(st_trainer *t, st_error *err)
{
    const st_train_opts *o = &t->o;
    if (!o->choice_cache || !kernel_choices_used(t) || !t->backend->choice_context ||
        st_cluster_rank(o->cluster) != 0 || (t->dry_run && !o->save_kernel_choices))
        return ST_OK;
    if (!o->choice_cache[0]) {
        st_warn(&t->log, "kernel-choice cache: no directory for it (neither XDG_CACHE_HOME, "
                "an absolute path, nor HOME is set): this run measures its kernels without it "
                "(--no-choice-cache leaves the cache alone)");
        return ST_OK;
    }
    char context[1024];
    choice_context(t, context, sizeof context);
    st_choice_cache_opts co = {.dir = o->choice_cache, .context = context,
                               .read = !o->remeasure, .lock_wait = CHOICE_CACHE_WAIT};
    return st_choice_cache_open(&t->cache, &co, t->choices, &t->log, err);
}

/* The kernel choices: --conv-impl checked against the backend's names, the
 * table the workers share, the choices --kernel-choices gives, then the
 * cache's. */
static st_status setup_choices(st_trainer *t, st_error *err)
{
    const st_train_opts *o = &t->o;
    const char *const *impls = t->backend->conv_impls;
    const char *given = o->conv_impl ? "--conv-impl" : o->kernel_choices ? "--kernel-choices"
                      : o->remeasure ? "--kernel-choices measure"
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
    if ((o->kernel_choices || o->remeasure) && o->conv_impl && strcmp(o->conv_impl, "auto") != 0)
        return st_fail(err, ST_EUSAGE, "--kernel-choices%s with --conv-impl %s: give one (%s, "
                       "--conv-impl for all)", o->remeasure ? " measure" : "", o->conv_impl,
                       o->remeasure ? "the first measures each kernel" :
                       "the file chooses per kernel");
    if (o->remeasure && !o->choice_cache)
        return st_fail(err, ST_EUSAGE, "--kernel-choices measure with --no-choice-cache: give "
                       "one (the first measures every kernel again and updates the choice "
                       "cache, the second leaves the cache alone; without either, a kernel "
                       "the cache has no choice for is measured)");
    if (o->save_kernel_choices && t->dry_run && o->resume)
        return st_fail(err, ST_EUSAGE, "--save-kernel-choices with --dry-run and --resume: the "
                       "run would take the snapshot's kernel choices, which a dry run does not "
                       "read; leave out --dry-run (the choices are saved after set-up, before "
                       "the first iteration)");
    st_status st = st_choices_create(&t->choices, t->backend->choice_syntax, err);
    char *text = NULL;
    size_t len = 0;
    if (st == ST_OK && o->kernel_choices)
        st = st_read_text(o->kernel_choices, "kernel choice file", (size_t)16 << 20, &text,
                          &len, err);
    if (st == ST_OK && text)
        st = st_choices_parse(t->choices, text, len, o->kernel_choices, ST_CHOICE_FILE, err);
    free(text);
    if (st != ST_OK && o->kernel_choices)
        st_error_prefix(err, "--kernel-choices ");
    return st == ST_OK ? open_cache(t, err) : st;
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

/* The "kernel choices:" line: how many the kernels took from where. */
static void log_choices(const st_trainer *t, const st_choice_counts *n, int stored)
{
    char line[3 * ST_PATH_MAX + 512];
    const char *cache = t->cache ? st_choice_cache_file(t->cache) : "";
    size_t at = (size_t)snprintf(line, sizeof line, "kernel choices: %d measured at set-up%s%s",
                                 n->taken[ST_CHOICE_MEASURED],
                                 stored ? " and stored in the cache " : "", stored ? cache : "");
    if (n->taken[ST_CHOICE_CACHE] && at < sizeof line)
        at += (size_t)snprintf(line + at, sizeof line - at, ", %d from the cache %s",
                               n->taken[ST_CHOICE_CACHE], cache);
    if (n->taken[ST_CHOICE_FILE] && at < sizeof line)
        at += (size_t)snprintf(line + at, sizeof line - at, ", %d from --kernel-choices %s",
                               n->taken[ST_CHOICE_FILE], t->o.kernel_choices);
    if (n->taken[ST_CHOICE_SNAPSHOT] && at < sizeof line)
        at += (size_t)snprintf(line + at, sizeof line - at, ", %d from the snapshot %s",
                               n->taken[ST_CHOICE_SNAPSHOT], t->o.resume);
    if (n->taken[ST_CHOICE_RANK0] && at < sizeof line)
        at += (size_t)snprintf(line + at, sizeof line - at, ", %d from rank 0",
                               n->taken[ST_CHOICE_RANK0]);
    st_info(&t->log, "%s%s", line, t->o.profile ? " (listed with the profile)" : "");
}

/* After set-up: what was measured and given, the text snapshots keep, the
 * cache updated with what was measured (its lock released), and
 * --save-kernel-choices. */
static st_status finish_choices(st_trainer *t, st_error *err)
{
    if (!t->choices)
        return ST_OK;
    st_choice_counts n;
    int count, stored = 0;
    st_choices_counts(t->choices, &n);
    t->choices_text = st_choices_text(t->choices, ST_CHOICES_VALUES, &count);
    char *notes = st_choices_text(t->choices, ST_CHOICES_NOTES, NULL);
    char *origins = st_choices_text(t->choices, ST_CHOICES_VALUES | ST_CHOICES_ORIGINS, NULL);
    if (!t->choices_text || !notes || !origins) {
        free(notes);
        free(origins);
        return st_fail(err, ST_ENOMEM, "out of memory listing the kernel choices");
    }
    for (char *line = strtok(notes, "\n"); line; line = strtok(NULL, "\n"))
        st_warn(&t->log, "kernel choice %s; measured instead", line + 2);
    free(notes);
    if (t->cache)
        st_choice_cache_store(t->cache, t->choices, &stored);
    if (n.unused && kernel_choices_used(t))
        st_warn(&t->log, "%d of the kernel choices given match no kernel of this run (choices "
                "are per layer, shape and samples per worker: made for another network, batch "
                "or -t?)", n.unused);
    if (count && kernel_choices_used(t)) {
        log_choices(t, &n, stored);
        for (char *line = strtok(origins, "\n"); line; line = strtok(NULL, "\n"))
            st_debug(&t->log, "  %s", line);
    }
    free(origins);
    st_choice_cache_close(t->cache); /* its lock released: another run may take it */
    t->cache = NULL;
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
        st = st_choices_parse(t->choices, text, strlen(text), "rank 0's kernel choices",
                              ST_CHOICE_RANK0, err);
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
    trainer_snapshot_meta(t, 0, &mine);
    /* Partitioned: rank 0 reads the whole solver state and hands every
     * rank its parts when the run starts (loop.c); the others read the
     * weights and the settings, the state only through the checksum. */
    float *state = t->ps.state;
    if (trainer_partitioned(t) && st_cluster_rank(t->o.cluster) != 0) {
        state = NULL;
    } else if (trainer_partitioned(t)) {
        size_t bytes = t->ps.count * (size_t)trainer_state_planes(t) * sizeof(float);
        t->resumed_state = st_alloc_aligned(bytes, "the resumed solver state", err);
        if (!t->resumed_state)
            return ST_ENOMEM;
        state = t->resumed_state;
    }
    st_status st = st_snapshot_resume(path, &t->net, t->ps.weights, state,
                                      trainer_state_planes(t), &m, err);
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
        st = st_choices_parse(t->choices, m.choices, strlen(m.choices), path,
                              ST_CHOICE_SNAPSHOT, err);
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
    int ranks = st_cluster_size(t->o.cluster);
    if (m.ranks != ranks)
        st_warn(&t->log, "%s was written by a run of %d rank%s, this run has %d: -b is per "
                "rank, so the global batch was %ld and is now %ld: the iterations to come "
                "average their gradients over other images than those of the run that "
                "stopped (resume with mpirun -np %d for that)", path, m.ranks,
                m.ranks == 1 ? "" : "s", ranks, (long)m.batch * m.ranks,
                (long)t->batch * ranks, m.ranks);
    t->start = m.iteration;
    t->tests = m.tests;
    st_info(&t->log, "resuming from %s at iteration %ld of %ld (epoch %.2f)", path, m.iteration,
            t->iterations, (double)m.iteration / (double)t->iters_per_epoch);
    if (m.tests.phases)
        st_info(&t->log, "the snapshot's test record: %ld test phase%s, the best %.2f%% at "
                "iteration %ld, %ld test phase%s without improvement since", m.tests.phases,
                m.tests.phases == 1 ? "" : "s", 100.0 * m.tests.best_accuracy,
                m.tests.best_iteration, m.tests.since_best, m.tests.since_best == 1 ? "" : "s");
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

/* Whether path is a snapshot this run may write: DIR/NAME_final.snap,
 * DIR/NAME_ITERATION.snap or, with test-driven stopping, DIR/NAME_best.snap
 * of --snapshot-dir DIR. */
static int is_snapshot_path(const st_trainer *t, const char *path)
{
    const char *slash = strrchr(path, '/'), *base = slash ? slash + 1 : path;
    size_t name = strlen(t->snapshot_name), len = strlen(base);
    if (!t->o.snapshot_dir || len < name + 1 + 5 || strncmp(base, t->snapshot_name, name) != 0 ||
        base[name] != '_' || strcmp(base + len - 5, ".snap") != 0)
        return 0;
    const char *tag = base + name + 1;
    size_t tag_len = len - name - 1 - 5;
    int named = (tag_len == 5 && strncmp(tag, "final", 5) == 0) ||
                (tag_len == 4 && strncmp(tag, "best", 4) == 0 && trainer_stopping(t));
    if (!named && (tag_len == 0 || strspn(tag, "0123456789") < tag_len))
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
    /* their temporaries: TARGET.partial (none when written in place) */
    char *metrics_partial = o->metrics ? st_output_partial_name(o->metrics) : NULL;
    char *trace_partial = o->cpe_trace ? st_output_partial_name(o->cpe_trace) : NULL;
    char *report_partial = o->cpe_report ? st_output_partial_name(o->cpe_report) : NULL;
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
        {"--kernel-choices", o->kernel_choices}, {"--cpe-model", o->cpe_model},
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
                         "would write (%s_final.snap, %s_ITERATION.snap%s%s%s): give another "
                         "file", p->what, p->path, o->snapshot_dir, t->snapshot_name,
                         t->snapshot_name, trainer_stopping(t) ? ", " : "",
                         trainer_stopping(t) ? t->snapshot_name : "",
                         trainer_stopping(t) ? "_best.snap" : "");
    }
    free(metrics_partial);
    free(trace_partial);
    free(report_partial);
    return st;
}

/* --cpe-trace FILE, written as FILE.partial (st_output_open), which the
 * backend creates exclusively: an old one (a killed run's, a planted
 * symbolic link) is removed first, not followed; removed on a signal in
 * the set-up. None when FILE is written in place. */
static st_status start_cpe_trace(st_trainer *t, st_error *err)
{
    char *partial = st_output_partial_name(t->o.cpe_trace);
    st_status st = partial ? st_signals_remove_on_exit(partial, err) : ST_OK;
    free(partial);
    return st == ST_OK
               ? t->backend->trace_start(st_sched_replica(t->sched, 0)->bctx, t->o.cpe_trace, err)
               : st;
}

/* The memory estimate and its check (memory_estimate.h), logged. Kernels
 * that measure their implementation are planned unmeasured first, then,
 * if that fits (or --force), measured, as the workers would (whose choices
 * they become): not in a dry run (but for --save-kernel-choices, which
 * saves what set-up chose), not when resuming (the snapshot's choices,
 * read with its arenas after this, are the ones to use), and not on the
 * ranks other than 0 of a multi-node run, which take rank 0's choices
 * after this (share_choices). */
static st_status check_memory(st_trainer *t, st_error *err)
{
    int measures = kernel_choices_used(t);
    int saving = t->dry_run && t->o.save_kernel_choices;
    trainer_memory m;
    st_status st = trainer_memory_estimate(t, 0, &m, err);
    m.unmeasured = measures;
    int fits = st == ST_OK && (t->o.force || trainer_memory_fits(&m));
    if (st == ST_OK && measures && (!t->dry_run || saving) && !t->o.resume &&
        st_cluster_rank(t->o.cluster) == 0 && fits)
        st = trainer_memory_estimate(t, 1, &m, err);
    if (st != ST_OK)
        return st;
    trainer_memory_log(t, &m);
    st = trainer_memory_check(t, &m, err);
    if (st == ST_OK && saving && measures && !fits)
        st = st_fail(err, ST_EUSAGE, "--save-kernel-choices %s: not written: a dry run "
                     "measures the kernels only for a run that fits in memory (see above); "
                     "give --force to measure them anyway", t->o.save_kernel_choices);
    return st;
}

/* Warn once when the threads of this host's ranks outnumber its cores: they
 * would take turns on them. Each rank runs workers x intra-op threads; the
 * ranks on this host share its cores unless each is bound to its own (a
 * process whose affinity is smaller than the machine: mpirun's binding,
 * taskset), when its own cores are the ones to count. */
static void warn_oversubscribed(const st_trainer *t)
{
    int cores = st_usable_cores();
    int ranks = cores < st_online_cores() ? 1 : st_cluster_local_ranks();
    long threads = (long)t->o.threads * t->o.intra * ranks;
    if (threads <= cores)
        return;
    char of_ranks[64] = "", fits[160];
    if (ranks > 1)
        snprintf(of_ranks, sizeof of_ranks, " x %d ranks on this host", ranks);
    long workers = cores / ((long)t->o.intra * ranks), intra = cores / ranks;
    if (workers > 0)
        snprintf(fits, sizeof fits, "-t %ld gives each thread a core of its own", workers);
    else if (intra > 0)
        snprintf(fits, sizeof fits, "-t 1 --intra %ld gives each thread a core of its own",
                 intra);
    else /* -t 1 --intra 1 is too many already: the ranks are */
        snprintf(fits, sizeof fits, "more ranks than cores: even one thread a rank is too "
                 "many; start at most %d rank%s on this host for a core each", cores,
                 cores > 1 ? "s" : "");
    st_warn(&t->log, "%d worker%s x %d intra-op thread%s%s = %ld threads on %d usable core%s: "
            "they will take turns on the cores (%s)", t->o.threads, t->o.threads > 1 ? "s" : "",
            t->o.intra, t->o.intra > 1 ? "s" : "", of_ranks, threads, cores,
            cores > 1 ? "s" : "", fits);
}

void trainer_sched_opts(const st_trainer *t, st_sched_opts *so)
{
    const st_train_opts *o = &t->o;
    *so = (st_sched_opts){
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
        .part = trainer_partitioned(t) ? &t->part : NULL,
        .stop = o->stop, .hybrid = o->hybrid,
    };
}

/* st_trainer_create, or with dry_run st_trainer_dry_run's part of it: up
 * to the memory estimate and its check, then *out is NULL. */
static st_status trainer_setup(st_trainer **out, const char *cfg_path, const st_train_opts *o,
                               const st_log *log, int dry_run, st_error *err)
{
    *out = NULL;
    st_trainer *t = st_calloc(1, sizeof *t, "trainer", err);
    if (!t)
        return ST_ENOMEM;
    t->dry_run = dry_run;
    t->log = *log;
    t->o = *o;
    t->created = st_now();
    snprintf(t->cfg_path, sizeof t->cfg_path, "%s", cfg_path);
    t->snapshot_iter = -1;
    t->stop_at = -1;
    if (t->o.snapshot_every && !t->o.snapshot_dir)
        t->o.snapshot_dir = ".";
    o = &t->o;
    st_status st = st_backend_find(o->backend, &t->backend, err);
    st_sw26010_model model; /* read again by the backend: checked before any work */
    if (st == ST_OK && o->cpe_model)
        st = st_sw26010_model_load(&model, o->cpe_model, err);
    if (st == ST_OK)
        st = st_net_load(cfg_path, &t->cfg, &t->hp, &t->net, log, err);
    size_t settings_bytes;
    if (st == ST_OK)
        st = st_hparams_settings(&t->cfg, &t->settings, &settings_bytes, err);
    if (st == ST_OK) /* the network as the cfg says, whatever is checked next */
        st_net_print(&t->net, log);
    size_t made = 0; /* once the cfg is known good: no directory left for a typo */
    if (st == ST_OK && o->snapshot_dir && !dry_run)
        st = st_make_dirs("--snapshot-dir", o->snapshot_dir, &made, err);
    if (st == ST_OK && made)
        st_info(log, "created the snapshot directory %s", o->snapshot_dir);
    if (st == ST_OK)
        st = name_snapshots(t, err);
    if (st == ST_OK && o->snapshot_dir && st_cluster_rank(o->cluster) == 0 && !dry_run)
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
        if (st == ST_OK)
            warn_oversubscribed(t);
    }
    if (st == ST_OK)
        st = find_data(t, err);
    if (st == ST_OK)
        st = check_paths(t, err);
    if (st == ST_OK) {
        t->transform = t->hp.transform;
        t->transform.seed = o->seed;
        st = open_data(t, err);
    }
    if (st == ST_OK && o->sync != ST_SYNC_BSP && (o->snapshot_every || o->resume))
        st = st_fail(err, ST_EUSAGE, "--%s with --sync %s: periodic snapshots and exact "
                     "resume need bulk-synchronous training (the workers of SSP and ASP are "
                     "at different iterations); leave --sync out", o->resume ? "resume" :
                     "snapshot-every", trainer_sync_names[o->sync]);
    if (st == ST_OK && o->overlap && !o->cluster)
        st = st_fail(err, ST_EUSAGE, "--overlap: overlapping the all-reduce with backward needs "
                     "several nodes (mpirun -np P with P > 1)");
    if (st == ST_OK && o->hybrid > 0 && (o->sync != ST_SYNC_BSP || o->overlap))
        st = st_fail(err, ST_EUSAGE, "--parallel hybrid with %s: the model-parallel layers "
                     "run bulk-synchronously, every worker at once, and produce their "
                     "gradients only at the end of backward; leave out one of the two",
                     o->overlap ? "--overlap" : o->sync == ST_SYNC_ASP ? "--sync asp"
                                                                       : "--sync ssp");
    if (st == ST_OK && o->rank_update == ST_RANK_UPDATE_PARTITIONED && !o->cluster)
        st = st_fail(err, ST_EUSAGE, "--rank-update partitioned: splitting the solver state "
                     "over the ranks needs several nodes (mpirun -np P with P > 1)");
    if (st == ST_OK && o->rank_update == ST_RANK_UPDATE_PARTITIONED && o->overlap)
        st = st_fail(err, ST_EUSAGE, "--overlap with --rank-update partitioned: give one (the "
                     "overlap all-reduces whole buckets of layers during backward; the "
                     "partitioned update reduce-scatters each worker's slice after it)");
    if (st == ST_OK && o->cluster && o->sync != ST_SYNC_BSP)
        st = st_fail(err, ST_EUSAGE, "--sync %s: training across nodes (mpirun) is "
                     "bulk-synchronous only; leave --sync out", trainer_sync_names[o->sync]);
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
        choose_parallel(t, &t->shared_from);
    if (st == ST_OK)
        st = check_memory(t, err);
    if (dry_run) { /* --save-kernel-choices: what set-up chose, measured above */
        if (st == ST_OK && o->save_kernel_choices)
            st = finish_choices(t, err);
        st_trainer_free(t);
        return st;
    }
    if (st == ST_OK) /* partitioned: the state is this rank's parts' alone (ps_part.h) */
        st = st_ps_init_split(&t->ps, &t->net.params, o->threads,
                              trainer_partitioned(t) ? 0 : trainer_state_planes(t),
                              t->shared_from, t->tail_applied, err);
    if (st == ST_OK && trainer_partitioned(t)) {
        st = st_ps_part_init(&t->part, &t->ps, st_cluster_size(o->cluster),
                             st_cluster_rank(o->cluster), trainer_state_planes(t), err);
        if (st == ST_OK)
            st_info(&t->log, "solver state: %.3f MB on this rank (1/%d of %.3f MB; "
                    "--rank-update partitioned)", 1e-6 * sizeof(float) * (double)t->part.owned *
                    t->part.planes, t->part.ranks, 1e-6 * sizeof(float) *
                    (double)t->ps.count * trainer_state_planes(t));
    }
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
    if (st == ST_OK)
        st = trainer_check_stopping(t, err);
    int ranks = st_cluster_size(o->cluster), rank = st_cluster_rank(o->cluster);
    if (ranks > 1 && rank > 0)
        st = share_choices(t, st, err);
    if (st == ST_OK) {
        st_sched_opts so;
        trainer_sched_opts(t, &so);
        st = st_sched_create(&t->sched, &t->net, &t->ps, &so, err);
    }
    if (ranks > 1 && rank == 0)
        st = share_choices(t, st, err);
    if (st == ST_OK)
        st = finish_choices(t, err);
    if (st == ST_OK &&
        ((o->cpe_trace && !t->backend->trace_start) ||
         ((o->cpe_report || o->cpe_cost_only || o->cpe_model) && !t->backend->run_begin)))
        st = st_fail(err, ST_EUSAGE, "--%s needs --backend cpe",
                     o->cpe_trace     ? "cpe-trace"
                     : o->cpe_report  ? "cpe-report"
                     : o->cpe_model   ? "cpe-model"
                                      : "cpe-cost-only");
    for (int w = 0; st == ST_OK && t->backend->run_begin && w < o->threads; w++) {
        st_backend_run run = {o->cpe_cost_only, w == 0 ? o->cpe_report : NULL, o->cpe_model};
        st = t->backend->run_begin(st_sched_replica(t->sched, w)->bctx, &run, err);
    }
    if (st == ST_OK && o->cpe_trace)
        st = start_cpe_trace(t, err);
    if (st == ST_OK)
        st = st_batchq_init(&t->batches, TRAINER_BATCH_RING, t->batch,
                            st_shape_count(t->net.input), err);
    if (st != ST_OK) {
        if (made) /* a run refused leaves no directory it made (empty: nothing written) */
            st_unmake_dirs(t->o.snapshot_dir, made);
        st_trainer_free(t);
        return st;
    }
    *out = t;
    return ST_OK;
}

st_status st_trainer_create(st_trainer **out, const char *cfg_path, const st_train_opts *o,
                            const st_log *log, st_error *err)
{
    return trainer_setup(out, cfg_path, o, log, 0, err);
}

st_status st_trainer_dry_run(const char *cfg_path, const st_train_opts *o, const st_log *log,
                             st_error *err)
{
    st_trainer *t;
    return trainer_setup(&t, cfg_path, o, log, 1, err);
}
