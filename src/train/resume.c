/* Where a run starts (set-up): a snapshot resumed (--resume: the weights,
 * the solver state and the iteration) or weights to start from (--weights:
 * a snapshot's or Darknet's). */
#include "trainer_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/memory.h"

#include "train/darknet_weights.h"

/* Continue from o.resume: the weights, the solver state and the iteration;
 * the seed and batch must be the snapshot's, or the data order and random
 * streams would not continue. */
st_status trainer_resume(st_trainer *t, st_error *err)
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
    if (st == ST_OK && m.choices && t->choices && trainer_kernel_choices_used(t))
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
    if (m.precision != t->o.precision)
        st_warn(&t->log, "%s was written by a run in %s, this run computes in %s: its "
                "convolutions and inner products round differently, so the weights will not "
                "be bitwise those of an uninterrupted run (give --precision %s for that)",
                path, st_precision_names[m.precision], st_precision_names[t->o.precision],
                st_precision_names[m.precision]);
    int ranks = st_cluster_size(t->o.cluster);
    if (m.ranks != ranks)
        st_warn(&t->log, "%s was written by a run of %d rank%s, this run has %d: -b is per "
                "rank, so the global batch was %ld and is now %ld: the iterations to come "
                "average their gradients over other images than those of the run that "
                "stopped (resume with mpirun -np %d for that)", path, m.ranks,
                m.ranks == 1 ? "" : "s", ranks, (long)m.batch * m.ranks,
                (long)t->batch * ranks, m.ranks);
    int mp_group = trainer_mp_nodes(t) ? t->o.mp_group : 1;
    if (m.mp_group != mp_group)
        st_warn(&t->log, "%s was written with --mp-group %d, this run has --mp-group %d: "
                "the model-parallel layers' gradients sum in another order, so the weights "
                "will not be bitwise those of an uninterrupted run (give --mp-group %d for "
                "that)", path, m.mp_group, mp_group, m.mp_group);
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
st_status trainer_start_from(st_trainer *t, const char *path, st_error *err)
{
    st_status st = st_weights_load_any(path, &t->net, t->ps.weights, err);
    if (st != ST_OK) {
        st_error_prefix(err, "--weights ");
        return st;
    }
    st_info(&t->log, "starting from the weights in %s", path);
    return ST_OK;
}
