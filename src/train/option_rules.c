/* The rules between the run's options: each one row of option_rules, a
 * check that writes the refusal's message when the options break it,
 * checked in one place (trainer_check_option_rules) before any work, right
 * after the backend is known. A rule reads the options, the backend they
 * name (its capabilities, never its name) and whether the run is a dry
 * run.
 *
 * Adding a rule: a function below and its row in option_rules, and a case
 * in tests/e2e/catalogue.tsv that the message fails without it. */
#include <stdio.h>
#include <string.h>

#include "trainer_internal.h"

/* A rule: 1, with the message in msg, when t's options break it. */
typedef int (*option_rule_fn)(const st_trainer *t, char *msg, size_t len);

static int iters_and_epochs(const st_trainer *t, char *msg, size_t len)
{
    const st_train_opts *o = &t->o;
    if (!(o->iters && o->epochs))
        return 0;
    snprintf(msg, len, "--iters %ld and --epochs %ld: give one (the run's length in "
             "iterations, or in passes over the training set)", o->iters, o->epochs);
    return 1;
}

static int async_snapshots(const st_trainer *t, char *msg, size_t len)
{
    const st_train_opts *o = &t->o;
    if (!(o->sync != ST_SYNC_BSP && (o->snapshot_every || o->resume)))
        return 0;
    snprintf(msg, len, "--%s with --sync %s: periodic snapshots and exact resume need "
             "bulk-synchronous training (the workers of SSP and ASP are at different "
             "iterations); leave --sync out", o->resume ? "resume" : "snapshot-every",
             trainer_sync_names[o->sync]);
    return 1;
}

static int overlap_alone(const st_trainer *t, char *msg, size_t len)
{
    if (!(t->o.overlap && !t->o.cluster))
        return 0;
    snprintf(msg, len, "--overlap: overlapping the all-reduce with backward needs several "
             "nodes (mpirun -np P with P > 1)");
    return 1;
}

static int hybrid_not_bsp(const st_trainer *t, char *msg, size_t len)
{
    const st_train_opts *o = &t->o;
    if (!(o->hybrid > 0 && (o->sync != ST_SYNC_BSP || o->overlap)))
        return 0;
    snprintf(msg, len, "--parallel hybrid with %s: the model-parallel layers run "
             "bulk-synchronously, every worker at once, and produce their gradients only at "
             "the end of backward; leave out one of the two",
             o->overlap ? "--overlap" : o->sync == ST_SYNC_ASP ? "--sync asp" : "--sync ssp");
    return 1;
}

/* --mp-group: hybrid across nodes, one worker a rank, G dividing the ranks. */
static int mp_group_rules(const st_trainer *t, char *msg, size_t len)
{
    const st_train_opts *o = &t->o;
    int G = o->mp_group, P = trainer_ranks(t);
    char g[16], threads[16];
    snprintf(g, sizeof g, G == ST_THREADS_AUTO ? "auto" : "%d", G);
    snprintf(threads, sizeof threads, o->threads == ST_THREADS_AUTO ? "auto" : "%d",
             o->threads);
    if (!G)
        return 0;
    if (o->hybrid != 1)
        snprintf(msg, len, "--mp-group %s: splitting the fully connected layers over groups of "
                 "ranks needs --parallel hybrid", g);
    else if (P == 1)
        snprintf(msg, len, "--mp-group %s: groups of ranks need several nodes (mpirun -np P "
                 "with P > 1)", g);
    else if (G > 0 && P % G)
        snprintf(msg, len, "--mp-group %d: expected a divisor of the %d ranks (mpirun -np %d)",
                 G, P, P);
    else if (G != 1 && o->threads != 1 && o->threads != 0)
        snprintf(msg, len, "--mp-group %s with -t %s: the model-parallel layers split over "
                 "ranks run one worker a rank; give -t 1 or leave -t out (--intra N for more "
                 "cores)", g, threads);
    else if (G != 1 && o->rank_update == ST_RANK_UPDATE_PARTITIONED)
        snprintf(msg, len, "--mp-group %s with --rank-update partitioned: give one (the "
                 "model-parallel blocks' gradients are summed over the ranks that hold them, "
                 "not over every rank)", g);
    else
        return 0;
    return 1;
}

static int partitioned_alone(const st_trainer *t, char *msg, size_t len)
{
    if (!(t->o.rank_update == ST_RANK_UPDATE_PARTITIONED && !t->o.cluster))
        return 0;
    snprintf(msg, len, "--rank-update partitioned: splitting the solver state over the ranks "
             "needs several nodes (mpirun -np P with P > 1)");
    return 1;
}

static int partitioned_overlap(const st_trainer *t, char *msg, size_t len)
{
    if (!(t->o.rank_update == ST_RANK_UPDATE_PARTITIONED && t->o.overlap))
        return 0;
    snprintf(msg, len, "--overlap with --rank-update partitioned: give one (the overlap "
             "all-reduces whole buckets of layers during backward; the partitioned update "
             "reduce-scatters each worker's slice after it)");
    return 1;
}

/* --pipeline layer: BSP's arithmetic, each bucket updated on the host by
 * the thread that reduced it, every rank updating every weight. */
static int pipeline_rules(const st_trainer *t, char *msg, size_t len)
{
    const st_train_opts *o = &t->o;
    if (!o->pipeline)
        return 0;
    if (o->sync != ST_SYNC_BSP)
        snprintf(msg, len, "--pipeline layer with --sync %s: the pipeline keeps "
                 "bulk-synchronous training's arithmetic (each bucket updated once per "
                 "iteration with the whole batch's gradient); leave out one of the two",
                 trainer_sync_names[o->sync]);
    else if (o->hybrid > 0)
        snprintf(msg, len, "--pipeline layer with --parallel hybrid: the model-parallel "
                 "layers update their parameters in backward on their own, outside the "
                 "buckets; leave out one of the two (--parallel data)");
    else if (o->rank_update == ST_RANK_UPDATE_PARTITIONED)
        snprintf(msg, len, "--pipeline layer with --rank-update partitioned: give one (the "
                 "pipeline updates each whole bucket on every rank as soon as it is "
                 "all-reduced; the partitioned update reduce-scatters each slice and "
                 "all-gathers the new weights)");
    else if (t->backend->slice_reduce || t->backend->slice_apply)
        snprintf(msg, len, "--pipeline layer with --backend %s: this backend sums and "
                 "updates the slices on its device; the pipeline updates each bucket on the "
                 "host", t->backend->name);
    else
        return 0;
    return 1;
}

static int nodes_not_bsp(const st_trainer *t, char *msg, size_t len)
{
    if (!(t->o.cluster && t->o.sync != ST_SYNC_BSP))
        return 0;
    snprintf(msg, len, "--sync %s: training across nodes (mpirun) is bulk-synchronous only; "
             "leave --sync out", trainer_sync_names[t->o.sync]);
    return 1;
}

static int weights_and_resume(const st_trainer *t, char *msg, size_t len)
{
    if (!(t->o.resume && t->o.weights))
        return 0;
    snprintf(msg, len, "--weights and --resume: give one (a snapshot resumed brings its own "
             "weights)");
    return 1;
}

/* --cpe-trace, --cpe-report, --cpe-cost-only, --cpe-model and --cpe-machine ask for a
 * backend that predicts another machine (its run_begin and trace hooks). */
static int prediction_without_backend(const st_trainer *t, char *msg, size_t len)
{
    const st_train_opts *o = &t->o;
    const char *asked = o->cpe_trace && !t->backend->trace_start ? "cpe-trace"
                        : t->backend->run_begin                  ? NULL
                        : o->cpe_report                          ? "cpe-report"
                        : o->cpe_model                           ? "cpe-model"
                        : o->cpe_machine                         ? "cpe-machine"
                        : o->cpe_cost_only                       ? "cpe-cost-only"
                                                                 : NULL;
    if (!asked)
        return 0;
    snprintf(msg, len, "--%s needs --backend cpe", asked);
    return 1;
}

/* --precision: the backend says whether it computes in it, and why not. */
static int precision_unsupported(const st_trainer *t, char *msg, size_t len)
{
    st_precision p = t->o.precision;
    char why[320];
    if (st_backend_takes_precision(t->backend, p, why, sizeof why))
        return 0;
    snprintf(msg, len, "--precision %s: the %s backend %s", st_precision_names[p],
             t->backend->name, why);
    return 1;
}

/* The kernel-choice options choose among a backend's implementations. */
static int choices_without_implementations(const st_trainer *t, char *msg, size_t len)
{
    const st_train_opts *o = &t->o;
    const char *given = o->conv_impl             ? "--conv-impl"
                        : o->kernel_choices      ? "--kernel-choices"
                        : o->remeasure           ? "--kernel-choices measure"
                        : o->save_kernel_choices ? "--save-kernel-choices"
                                                 : NULL;
    if (!given || t->backend->conv_impls)
        return 0;
    snprintf(msg, len, "%s: the %s backend has one implementation of each kernel (these "
             "options choose among oneDNN's: --backend dnnl)", given, t->backend->name);
    return 1;
}

static int choices_and_impl(const st_trainer *t, char *msg, size_t len)
{
    const st_train_opts *o = &t->o;
    if (!((o->kernel_choices || o->remeasure) && o->conv_impl &&
          strcmp(o->conv_impl, "auto") != 0))
        return 0;
    snprintf(msg, len, "--kernel-choices%s with --conv-impl %s: give one (%s, --conv-impl for "
             "all)", o->remeasure ? " measure" : "", o->conv_impl,
             o->remeasure ? "the first measures each kernel" : "the file chooses per kernel");
    return 1;
}

static int remeasure_without_cache(const st_trainer *t, char *msg, size_t len)
{
    if (!(t->o.remeasure && !t->o.choice_cache))
        return 0;
    snprintf(msg, len, "--kernel-choices measure with --no-choice-cache: give one (the first "
             "measures every kernel again and updates the choice cache, the second leaves the "
             "cache alone; without either, a kernel the cache has no choice for is measured)");
    return 1;
}

static int dry_run_saves_snapshot_choices(const st_trainer *t, char *msg, size_t len)
{
    if (!(t->o.save_kernel_choices && t->dry_run && t->o.resume))
        return 0;
    snprintf(msg, len, "--save-kernel-choices with --dry-run and --resume: the run would take "
             "the snapshot's kernel choices, which a dry run does not read; leave out --dry-run "
             "(the choices are saved after set-up, before the first iteration)");
    return 1;
}

static int auto_split(const st_train_opts *o)
{
    return o->threads == ST_THREADS_AUTO || o->intra == ST_THREADS_AUTO;
}

static int layout_auto_not_bsp(const st_trainer *t, char *msg, size_t len)
{
    if (!(auto_split(&t->o) && t->o.sync != ST_SYNC_BSP))
        return 0;
    snprintf(msg, len, "-t auto / --intra auto: the split is measured on BSP iterations; with "
             "--sync ssp or asp give -t N (and --intra N)");
    return 1;
}

static int layout_auto_nodes(const st_trainer *t, char *msg, size_t len)
{
    if (!(auto_split(&t->o) && (t->o.cluster || st_cluster_launched())))
        return 0;
    snprintf(msg, len, "-t auto / --intra auto: under mpirun each rank would measure its own "
             "split; give -t N and --intra N");
    return 1;
}

static int trace_iters_alone(const st_trainer *t, char *msg, size_t len)
{
    const st_train_opts *o = &t->o;
    if (!(o->trace_last >= 0 && !o->trace))
        return 0;
    snprintf(msg, len, "--trace-iters %ld:%ld without --trace: it chooses the iterations "
             "--trace FILE records; give --trace FILE too", o->trace_first, o->trace_last);
    return 1;
}

static const option_rule_fn option_rules[] = {
    iters_and_epochs,
    async_snapshots,
    overlap_alone,
    hybrid_not_bsp,
    mp_group_rules,
    partitioned_alone,
    partitioned_overlap,
    pipeline_rules,
    nodes_not_bsp,
    weights_and_resume,
    prediction_without_backend,
    precision_unsupported,
    choices_without_implementations,
    choices_and_impl,
    remeasure_without_cache,
    dry_run_saves_snapshot_choices,
    layout_auto_not_bsp,
    layout_auto_nodes,
    trace_iters_alone,
};

st_status trainer_check_option_rules(const st_trainer *t, st_error *err)
{
    char msg[768];
    for (size_t i = 0; i < sizeof option_rules / sizeof option_rules[0]; i++)
        if (option_rules[i](t, msg, sizeof msg))
            return st_fail(err, ST_EUSAGE, "%s", msg);
    return ST_OK;
}
