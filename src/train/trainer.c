/* What follows from a trainer's options, asked by every stage of its
 * set-up and of its run: the defaults, a trial run's options
 * (st_trainer_trial), the ranks and whether the state is partitioned or
 * the model-parallel layers split over nodes, the solver's state planes,
 * the scheduler's and the prefetcher's options, what a snapshot records
 * besides the arenas, and the handle's accessors. The bottom of train/:
 * it calls no other file of it, so that the others, which all ask it,
 * call each other one way (scripts/check-cycles.sh). */
#include "trainer_internal.h"

#include <stdio.h>
#include <string.h>

const char *const trainer_sync_names[] = {"bsp", "ssp", "asp"};

st_train_opts st_train_defaults(void)
{
    st_train_opts o = {.threads = 0, .intra = 0, .sync = ST_SYNC_BSP, .hybrid = -1, .seed = 1,
                       .backend = "dnnl", .log_every = 100, .io_threads = 1,
                       .allreduce = "rhd", .bucket_bytes = 512u << 10,
                       .peer_timeout = 600, .trace_first = -1, .trace_last = -1};
    return o;
}

void st_trainer_trial(st_train_opts *o, st_log *log, long warmup, long timed)
{
    o->iters = warmup + timed;
    o->epochs = 0;
    o->warmup = warmup;
    o->no_test = 1;
    o->stop_accuracy = 0.0;
    o->patience = 0;
    o->snapshot_dir = NULL;
    o->snapshot_every = 0;
    o->resume = NULL;
    o->metrics = NULL;
    o->trace = NULL;
    o->save_kernel_choices = NULL;
    o->cpe_trace = o->cpe_report = NULL;
    o->loss_trace = NULL;
    o->profile = 0;
    o->log_every = o->iters;
    log->level = ST_LOG_QUIET;
    log->progress = NULL;
}

int trainer_ranks(const st_trainer *t)
{
    return t->o.cluster ? st_cluster_size(t->o.cluster)
                        : t->dry_run ? st_cluster_launched_ranks() : 1;
}

int trainer_mp_nodes(const st_trainer *t)
{
    return trainer_ranks(t) > 1 && t->o.hybrid == 1 && t->o.mp_group > 1;
}

int trainer_partitioned(const st_trainer *t)
{
    return t->o.rank_update == ST_RANK_UPDATE_PARTITIONED;
}

int trainer_state_planes(const st_trainer *t)
{
    return st_solver_state_per_param(&t->hp.solver);
}

void trainer_sched_opts(const st_trainer *t, st_sched_opts *so)
{
    const st_train_opts *o = &t->o;
    *so = (st_sched_opts){
        .threads = o->threads, .intra = o->intra, .sync = o->sync,
        .staleness = o->staleness, .batch = t->batch, .timing = o->profile,
        .subdivisions = t->subdivisions,
        .backend = t->backend, .solver = &t->hp.solver, .seed = o->seed,
        .conv_impl = t->backend->conv_impls && !o->conv_impl ? "auto" : o->conv_impl,
        .machine_path = o->cpe_machine,
        .precision = o->precision, .bf16_per_kernel = o->bf16_per_kernel,
        .choices = t->choices,
        .train = t->train, .test_count = t->test ? t->test->count : 0,
        .transform = &t->transform,
        .record_bytes = t->test && st_record_bytes(t->test) > st_record_bytes(t->train)
                            ? st_record_bytes(t->test) : st_record_bytes(t->train),
        .cluster = o->cluster, .overlap = o->overlap, .pipeline = o->pipeline,
        .bucket_bytes = o->bucket_bytes,
        .part = trainer_partitioned(t) ? &t->part : NULL,
        .stop = o->stop, .hybrid = o->hybrid, .placement = &t->placement,
        .mp_group = trainer_mp_nodes(t) ? o->mp_group : 0, .trace = t->trace,
    };
}

st_prefetch_opts trainer_prefetch_opts(st_trainer *t)
{
    st_prefetch_opts po = {.source = t->train, .transform = &t->transform, .batch = t->batch,
                           .rank = st_cluster_rank(t->o.cluster),
                           .ranks = st_cluster_size(t->o.cluster), .seed = t->o.seed,
                           .io_threads = t->o.io_threads, .q = &t->batches,
                           .trace = t->trace};
    return po;
}

void trainer_snapshot_meta(const st_trainer *t, long iteration, st_snapshot_meta *m)
{
    memset(m, 0, sizeof *m);
    m->iteration = iteration;
    m->seed = t->o.seed;
    m->batch = t->batch;
    m->workers = t->o.threads;
    m->state_planes = trainer_state_planes(t);
    snprintf(m->solver, sizeof m->solver, "%s", st_solver_rule_names[t->hp.solver.rule]);
    m->settings = t->settings;
    m->choices = t->choices_text && *t->choices_text ? t->choices_text : NULL;
    m->tests = t->tests;
    m->ranks = st_cluster_size(t->o.cluster);
    m->mp_group = trainer_mp_nodes(t) ? t->o.mp_group : 1;
    m->precision = t->o.precision;
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
