/* What the trainer's files share: the st_trainer struct behind train.h's
 * handle, and the functions one of them gives the others. setup.c builds a
 * trainer (st_trainer_create and what it checks, opens and allocates);
 * loop.c runs it (st_trainer_run: the iterations, test phases, snapshots and
 * stopping); memory_estimate.c says what it will take before it allocates;
 * report.c says how the run went at its end; fingerprint.c says
 * what the nodes of a multi-node run must agree on. */
#ifndef ST_TRAINER_INTERNAL_H
#define ST_TRAINER_INTERNAL_H

#include <stddef.h>

#include "backends/backend.h"
#include "backends/choices.h"
#include "base/cfg.h"
#include "data/batchq.h"
#include "data/data.h"
#include "data/prefetch.h"
#include "net/hparams.h"
#include "parallel/ps.h"
#include "train/snapshot.h"
#include "train/train.h"

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
    int dry_run;            /* st_trainer_dry_run: set up up to the memory estimate */
    st_choices *choices;    /* the workers' kernel choices (NULL: the backend has none) */
    char *choices_text;     /* their text after set-up, for snapshots */
};

/* Batches read ahead of the workers (the ring of st_batchq). */
#define TRAINER_BATCH_RING 2

/* The scheduler's options for t (setup.c). */
void trainer_sched_opts(const st_trainer *t, st_sched_opts *so);

/* The prefetcher's options for t, filling t->batches (loop.c). */
st_prefetch_opts trainer_prefetch_opts(st_trainer *t);

/* The --sync modes' names, indexed by st_sync_mode (setup.c). */
extern const char *const trainer_sync_names[];

/* What a snapshot of the state after `iteration` iterations records
 * besides the arenas (loop.c); m->settings and m->choices point into t. */
void trainer_snapshot_meta(const st_trainer *t, long iteration, st_snapshot_meta *m);

/* The time split of n iterations: a progress line ("  split,", plain text
 * progress only) or a summary line ("time split,") (report.c). */
void trainer_log_split(const st_trainer *t, int progress, const char *what,
                       const st_time_split *s, double n);

/* An st_info line of ctx, an st_log: the line callback of the cluster's and
 * the backend's reports (report.c). */
void trainer_log_line(void *ctx, const char *line);

/* The report of a run that finished every iteration, after res is filled in:
 * the "done:" line, the time split, the test accuracy and the summary, then
 * --profile's tables and the backend's run_report (report.c). */
st_status trainer_report(st_trainer *t, const st_train_result *res, st_error *err);

#endif
