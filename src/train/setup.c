/* The trainer's set-up (train.h's st_trainer_create): the options checked
 * against each other and the cfg, the network, the data and the schedule,
 * the threads, the kernel choices, the paths of the outputs and snapshots,
 * the memory the run will take against what the process may take
 * (memory_estimate.c), the starting point (--resume, --weights) and the
 * workers. Also st_trainer_dry_run (all of that but the allocations),
 * st_trainer_free, and the nested runs -t auto measures (layout.c), made
 * here and run by loop.c. The run is loop.c's; what follows from the
 * options, trainer.c's. */
#include "trainer_internal.h"

#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/fileio.h"
#include "base/memory.h"
#include "base/signals.h"
#include "cpe/model.h"
#include "memory_estimate.h"
#include "train/darknet_weights.h"

/* Synthetic data when no files are given: records per split by default. */
#define SYNTHETIC_TRAIN 1024
#define SYNTHETIC_TEST 256

void st_trainer_free(st_trainer *t)
{
    if (!t)
        return;
    st_sched_free(t->sched);
    st_trace_free(t->trace);
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
    st_placement_free(&t->placement);
    st_topology_free(&t->topology);
    st_affinity_restore(&t->main_affinity);
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
    st_named_path outputs[TRAINER_OUTPUTS];
    char *partials[TRAINER_PARTIALS];
    int n_out = trainer_outputs(t, outputs, partials);
    st_output_ids ids = {0};
    st_status st = ST_OK;
    for (int i = 0; st == ST_OK && i < n_out; i++)
        st = st_output_ids_add(&ids, &outputs[i], err);
    if (st == ST_OK)
        st = open_split(t, where, "train", d->train, d->train_labels, d->names,
                        t->o.train_images, &ids, &t->train, err);
    if (st == ST_OK && d->test[0])
        st = open_split(t, where, "test", d->test, d->test_labels, d->names, t->o.test_images,
                        &ids, &t->test, err);
    st_output_ids_free(&ids);
    trainer_outputs_free(partials);
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
 * hold over TRAINER_MANY_PARAMETERS: there their gradients dominate each extra
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
        o->hybrid = o->sync == ST_SYNC_BSP && !o->overlap && !o->pipeline && o->threads > 1 &&
                    t->subdivisions == 1 && mp_params > TRAINER_MANY_PARAMETERS;
    if (o->hybrid && first_mp < t->net.n_layers) {
        trainer_choose_mp_group(t);
        st_sched_opts so;
        trainer_sched_opts(t, &so);
        t->tail_applied = st_sched_tail_applied(&so);
        if (trainer_mp_nodes(t)) /* trainer_choose_mp_group said what runs where */
            return;
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
    int measures = trainer_kernel_choices_used(t);
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

/* ---- the stages of set-up, in order; each runs only after the ones
 * before it succeeded, but for the workers' (see there) ---- */

/* subdivisions=S (or --subdivisions S) > 1, gradient accumulation
 * (parallel/accumulate.c): the batch in S whole pieces, and a run that can
 * accumulate: bulk-synchronous and data-parallel. Refused: --parallel
 * hybrid (its model-parallel layers meet the other workers once per pass
 * and apply their update in backward, so S pieces would apply it S times),
 * --sync ssp / asp (each worker applies its own shard's gradient as soon as
 * it has it: no batch to accumulate) and --overlap (its buckets leave for
 * the all-reduce as backward finishes them, before the last piece). */
static st_status check_subdivisions(st_trainer *t, st_error *err)
{
    const st_train_opts *o = &t->o;
    int S = t->subdivisions;
    if (S <= 1)
        return ST_OK;
    char key[ST_PATH_MAX + 64];
    const st_cfg_option *c = st_cfg_find(&t->cfg.secs[0], "subdivisions");
    if (o->subdivisions)
        snprintf(key, sizeof key, "--subdivisions %d", S);
    else
        snprintf(key, sizeof key, "%s:%d: subdivisions=%d", t->cfg.path,
                 c ? c->line : t->cfg.secs[0].line, S);
    st_status bad = o->subdivisions ? ST_EUSAGE : ST_EINPUT;
    if (t->batch % S)
        return st_fail(err, bad, "%s with a batch of %d (%s): expected a batch that is a "
                       "multiple of subdivisions (each of the %d pieces takes batch / "
                       "subdivisions images; see -b, --subdivisions)", key, t->batch,
                       o->batch ? "-b" : "batch= in [net]", S);
    const char *with = o->hybrid > 0             ? "--parallel hybrid"
                       : o->sync == ST_SYNC_SSP ? "--sync ssp"
                       : o->sync == ST_SYNC_ASP ? "--sync asp"
                       : o->pipeline && o->overlap ? "--pipeline layer across nodes"
                       : o->overlap             ? "--overlap"
                                                : NULL;
    if (with)
        return st_fail(err, bad, "%s with %s: gradient accumulation needs bulk-synchronous, "
                       "data-parallel training without --overlap (%s); leave out one of the "
                       "two", key, with,
                       o->hybrid > 0 ? "the model-parallel layers apply their update in "
                                       "backward, once per piece"
                       : o->overlap  ? "the gradient leaves for the all-reduce before the "
                                       "last piece"
                                     : "each worker applies its own gradient as it has it");
    st_info(&t->log, "subdivisions: each worker's shard of the batch of %d in %d pieces, "
            "their gradients accumulated before one update (batch norm normalises each "
            "piece with its own statistics)", t->batch, S);
    return ST_OK;
}

/* A trainer set up, run and freed: -t auto's trials (layout.c, which
 * set-up calls, so it is given this rather than calling back). */
static st_status run_nested(const char *cfg_path, const st_train_opts *o, const st_log *log,
                            st_train_result *res, st_error *err)
{
    st_trainer *t;
    st_status st = st_trainer_create(&t, cfg_path, o, log, err);
    if (st == ST_OK) {
        st = st_trainer_run(t, res, err);
        st_trainer_free(t);
    }
    return st;
}

/* The backend, the option rules, the network and its snapshots' names,
 * the batch and threads. *made: the snapshot directory's parts created. */
static st_status setup_network(st_trainer *t, const char *cfg_path, size_t *made,
                               st_error *err)
{
    st_train_opts *o = &t->o;
    st_status st = st_backend_find(o->backend, &t->backend, err);
    if (st == ST_OK)
        st = trainer_check_option_rules(t, err);
    if (st == ST_OK && o->pipeline && o->cluster) /* across nodes: --overlap's buckets */
        o->overlap = 1;
    st_sw26010_model model; /* read again by the backend: checked before any work */
    st_cpe_machine machine;
    if (st == ST_OK && o->cpe_model)
        st = st_sw26010_model_load(&model, o->cpe_model, err);
    if (st == ST_OK && o->cpe_machine)
        st = st_cpe_machine_load(&machine, o->cpe_machine, err);
    if (st == ST_OK)
        st = st_net_load(cfg_path, o->hparams, &t->cfg, &t->hp, &t->net, &t->log, err);
    size_t settings_bytes;
    if (st == ST_OK)
        st = st_hparams_settings(&t->cfg, &t->settings, &settings_bytes, err);
    if (st == ST_OK) /* the network as the cfg says, whatever is checked next */
        st_net_print(&t->net, &t->log);
    if (st == ST_OK)
        st_info(&t->log, "precision: %s%s", st_precision_names[o->precision],
                o->precision == ST_PRECISION_BF16
                    ? " (convolutions and inner products: operands rounded to bf16, products "
                      "summed in fp32; weights, gradients, the solver and the other layers "
                      "fp32)"
                    : "");
    /* once the cfg is known good: no directory left for a typo */
    if (st == ST_OK && o->snapshot_dir && !t->dry_run)
        st = st_make_dirs("--snapshot-dir", o->snapshot_dir, made, err);
    if (st == ST_OK && *made)
        st_info(&t->log, "created the snapshot directory %s", o->snapshot_dir);
    if (st == ST_OK)
        st = trainer_name_snapshots(t, err);
    if (st == ST_OK && o->snapshot_dir && st_cluster_rank(o->cluster) == 0 && !t->dry_run)
        trainer_remove_killed_snapshot_writes(t);
    if (st == ST_OK)
        st = check_trainable(t, err);
    if (st != ST_OK)
        return st;
    t->batch = o->batch ? o->batch : t->hp.batch;
    t->subdivisions = o->subdivisions ? o->subdivisions : t->hp.subdivisions;
    st = trainer_choose_layout(t, run_nested, err);
    if (st == ST_OK && t->batch < o->threads)
        st = st_fail(err, ST_EUSAGE, "-t %d workers need a batch of at least %d images (the "
                     "batch is %d%s)", o->threads, o->threads, t->batch,
                     o->batch ? "" : ", batch= in [net]; see -b");
    trainer_choose_threads(t);
    if (st == ST_OK)
        st = check_subdivisions(t, err);
    if (st == ST_OK)
        st = trainer_place_threads(t, err);
    return st;
}

/* The data, the outputs' paths against the inputs, the schedule and the
 * all-reduce's configuration. */
static st_status setup_data(st_trainer *t, st_error *err)
{
    const st_train_opts *o = &t->o;
    st_status st = find_data(t, err);
    if (st == ST_OK)
        st = trainer_check_paths(t, err);
    if (st == ST_OK) {
        t->transform = t->hp.transform;
        t->transform.seed = o->seed;
        st = open_data(t, err);
    }
    if (st == ST_OK)
        st = plan_schedule(t, err);
    if (st == ST_OK) { /* checked on one node too: a mistyped name is an error there */
        st_cluster_opts co = {o->allreduce, o->supernode_size, o->sim_cross_bandwidth, 0,
                              o->allreduce_granularity};
        st = st_cluster_configure(o->cluster, &co, &t->allreduce, err);
    }
    return st;
}

/* The kernels' choices, the parallelism and the memory the run will take. */
static st_status setup_kernels(st_trainer *t, st_error *err)
{
    st_status st = trainer_setup_choices(t, err);
    if (st == ST_OK)
        choose_parallel(t, &t->shared_from);
    if (st == ST_OK)
        st = check_memory(t, err);
    return st;
}

/* The parameter server and the starting point: weights, solver state,
 * iteration; then what needs the start (--warmup, the stopping options). */
static st_status setup_state(st_trainer *t, st_error *err)
{
    const st_train_opts *o = &t->o;
    /* partitioned: the state is this rank's parts' alone (ps_part.h) */
    st_status st = st_ps_init_split(&t->ps, &t->net.params, o->threads,
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
        if (o->resume)
            st = trainer_resume(t, err);
        else if (o->weights)
            st = trainer_start_from(t, o->weights, err);
        t->warm_end = t->start + o->warmup;
    }
    if (st == ST_OK && o->warmup >= t->iterations - t->start && o->warmup > 0)
        st = st_fail(err, ST_EUSAGE, "--warmup %ld leaves no iteration to time: the run has "
                     "%ld%s; give a --warmup below that", o->warmup, t->iterations - t->start,
                     t->start ? " after the resumed snapshot's" : "");
    if (st == ST_OK)
        st = trainer_check_stopping(t, err);
    if (st == ST_OK) /* before the threads that record are made */
        st = trainer_trace_create(t, err);
    return st;
}

void st_trainer_create_absent(st_cluster *cluster)
{
    char *text = NULL;
    st_error ignored = {0};
    if (st_cluster_size(cluster) > 1) /* trainer_share_choices's, failed */
        st_cluster_share_text(cluster, 0, &text, &ignored);
    free(text);
}

/* --precision bf16: which layers' outputs the replicas keep in bf16
 * (st_replica.out_bf16), and whether the backend stores them so. */
static void log_bf16_activations(st_trainer *t)
{
    const st_replica *r = st_sched_replica(t->sched, 0);
    char list[512] = "";
    size_t at = 0;
    int kept = 0, stored = 0;
    for (int i = 0; i < t->net.n_layers && at < sizeof list; i++)
        if (r->out_bf16[i]) {
            kept++;
            stored += r->out_bf16[i] == ST_OUT_BF16_STORED;
            at += (size_t)snprintf(list + at, sizeof list - at, " %d", i);
        }
    if (!kept) {
        st_info(&t->log, "bf16 activations: none (no layer's output goes only to layers that "
                "round it to bf16 themselves)");
        return;
    }
    st_info(&t->log, "bf16 activations: the outputs of layers%s go only to layers that round "
            "them to bf16 themselves, and are kept rounded (%d of %d stored as bf16 by the %s "
            "backend, the rest as floats); their gradients stay fp32", list, stored, kept,
            t->backend->name);
}

/* The workers, their kernel choices and the backend's run; the input ring.
 * Multi-node, it runs whatever the stages before it gave (st): rank 0 and
 * the others exchange the choices and their status collectively. */
static st_status setup_workers(st_trainer *t, st_status st, st_error *err)
{
    const st_train_opts *o = &t->o;
    int ranks = st_cluster_size(o->cluster), rank = st_cluster_rank(o->cluster);
    if (ranks > 1 && rank > 0)
        st = trainer_share_choices(t, st, err);
    if (st == ST_OK) {
        st_sched_opts so;
        trainer_sched_opts(t, &so);
        st = st_sched_create(&t->sched, &t->net, &t->ps, &so, err);
    }
    if (ranks > 1 && rank == 0)
        st = trainer_share_choices(t, st, err);
    if (st == ST_OK)
        st = trainer_finish_choices(t, err);
    if (st == ST_OK && o->precision == ST_PRECISION_BF16)
        log_bf16_activations(t);
    for (int w = 0; st == ST_OK && t->backend->run_begin && w < o->threads; w++) {
        st_backend_run run = {o->cpe_cost_only, w == 0 ? o->cpe_report : NULL, o->cpe_model};
        st = t->backend->run_begin(st_sched_replica(t->sched, w)->bctx, &run, err);
    }
    if (st == ST_OK && o->cpe_trace)
        st = start_cpe_trace(t, err);
    if (st == ST_OK)
        st = st_batchq_init(&t->batches, TRAINER_BATCH_RING, t->batch,
                            st_shape_count(t->net.input), err);
    /* Last: what was set up asked how many cores the process may use. The
     * prefetcher's threads, started by the run, inherit this. */
    if (st == ST_OK && t->placement.n_free) {
        st_affinity_save(&t->main_affinity); /* given back when the trainer is freed */
        st = st_bind_self(t->placement.free_pus, t->placement.n_free, err);
    }
    return st;
}

/* st_trainer_create, or with dry_run st_trainer_dry_run's part of it:
 * staged construction with one failure path. A dry run stops after the
 * memory estimate and its check (writing --save-kernel-choices, measured
 * then), and *out is NULL. */
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
    size_t made = 0;
    st_status st = setup_network(t, cfg_path, &made, err);
    if (st == ST_OK)
        st = setup_data(t, err);
    if (st == ST_OK)
        st = setup_kernels(t, err);
    if (dry_run && st == ST_OK && t->o.save_kernel_choices)
        st = trainer_finish_choices(t, err);
    if (!dry_run && st == ST_OK)
        st = setup_state(t, err);
    if (!dry_run && st == ST_OK)
        st = trainer_place_memory(t, err);
    if (!dry_run)
        st = setup_workers(t, st, err);
    if (st != ST_OK || dry_run) {
        if (st != ST_OK && made) /* a run refused leaves no directory it made (empty) */
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
