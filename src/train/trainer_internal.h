/* What the trainer's files share: the st_trainer struct behind train.h's
 * handle, and the functions one of them gives the others, grouped by the
 * file that defines them, from the bottom up: a file calls only files
 * listed before it or memory_estimate.h (whose file calls trainer.c
 * alone), so that no two call each other, directly or through others
 * (scripts/check-cycles.sh). trainer.c, first, says what follows from the
 * options; above the files listed, loop.c runs a trainer (train.h's
 * st_trainer_run: the iterations, test phases, snapshots and stopping)
 * and setup.c, the top, builds one (st_trainer_create: what it checks,
 * opens and allocates, in stages). */
#ifndef ST_TRAINER_INTERNAL_H
#define ST_TRAINER_INTERNAL_H

#include <stddef.h>

#include "backends/backend.h"
#include "backends/choice_cache.h"
#include "backends/choices.h"
#include "base/cfg.h"
#include "base/fileio.h"
#include "data/batchq.h"
#include "data/data.h"
#include "data/prefetch.h"
#include "net/hparams.h"
#include "parallel/ps.h"
#include "parallel/ps_part.h"
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
    st_ps ps;               /* with --rank-update partitioned: no solver state of its own */
    st_ps_part part;        /* --rank-update partitioned: this rank's parts and their state */
    size_t shared_from;     /* --parallel hybrid: where the gradients' model-parallel tail,
                               held once, begins (params.count: none; st_ps_init_split) */
    int tail_applied;       /* hybrid: the model-parallel layers apply their gradients in
                               backward (st_sched_tail_applied) */
    float *resumed_state;   /* partitioned, rank 0, after --resume: the snapshot's whole
                               solver state [planes * count] until the run hands out the
                               parts (loop.c), then NULL */
    st_sched *sched;
    st_trace *trace;        /* --trace's recorder (timeline.c), or NULL */
    st_batchq batches;      /* BSP: filled by the prefetcher, read by the workers */
    st_source *train, *test;
    st_transform transform; /* records to inputs */
    long skipped;           /* unreadable images skipped, counted by the readers */
    int batch;
    int subdivisions;       /* --subdivisions, else [net]'s subdivisions=: pieces of each
                               worker's shard (1: undivided) */
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
    st_test_record tests;   /* the test phases so far, a resumed snapshot's included */
    long stop_at;           /* the iteration a test phase stopped the run at (stopping.c),
                               or -1 */
    char stop_why[192];     /* why, for the log and the summary */
    st_data_paths data;     /* the data files: --data's, else [net]'s */
    int dry_run;            /* st_trainer_dry_run: set up up to the memory estimate */
    st_choices *choices;    /* the workers' kernel choices (NULL: the backend has none) */
    char *choices_text;     /* their text after set-up, for snapshots */
    st_choice_cache *cache; /* the kernel-choice cache, held from setup_choices until the
                               measured choices are stored (its lock held), or NULL */
    st_topology topology;   /* this node's (hwloc), from set-up on */
    st_placement placement; /* where the threads run (--bind) */
    st_affinity main_affinity; /* the calling thread's, before set-up pinned it */
};

/* Batches read ahead of the workers (the ring of st_batchq). */
#define TRAINER_BATCH_RING 2

/* Above this many parameters one worker with intra-op threads replaces
 * several workers (node.c) and --parallel auto is hybrid (setup.c):
 * measured on 2 cores, AlexNet (62M) trains as fast with -t 1 --intra 2
 * as with -t 2 and saves a 250 MB gradient buffer; LeNet-5 and
 * cifar-alexnet (5.9M) are as fast either way. */
#define TRAINER_MANY_PARAMETERS (16u << 20)

/* What follows from the options (trainer.c): the ranks (the cluster's, or
 * a dry run's under mpirun); whether the model-parallel layers are split
 * over groups of ranks (--mp-group G > 1, resolved); whether the ranks
 * hold the solver state in parts (--rank-update partitioned: the
 * snapshots gather it on rank 0, which hands it out on --resume); the
 * planes of solver state the update rule keeps (of params.count floats
 * in a snapshot); the --sync modes' names, indexed by st_sync_mode; the
 * scheduler's and the prefetcher's options (filling t->batches); what a
 * snapshot of the state after `iteration` iterations records besides the
 * arenas (m->settings and m->choices point into t). */
int trainer_ranks(const st_trainer *t);
int trainer_mp_nodes(const st_trainer *t);
int trainer_partitioned(const st_trainer *t);
int trainer_state_planes(const st_trainer *t);
extern const char *const trainer_sync_names[];
void trainer_sched_opts(const st_trainer *t, st_sched_opts *so);
st_prefetch_opts trainer_prefetch_opts(st_trainer *t);
void trainer_snapshot_meta(const st_trainer *t, long iteration, st_snapshot_meta *m);

/* A hash of every section, key and value of the cfg but the data keys of
 * [net] (with_net), or of its layer sections alone (fingerprint.c). */
uint64_t trainer_cfg_hash(const st_cfg *cfg, int with_net);

/* Test-driven stopping (stopping.c): whether --stop-at-accuracy or
 * --patience was given; at set-up, those options against the others and
 * the data, after the schedule is planned (they need test phases: a test
 * set, no --no-test, BSP; and one before the run's end); after rank 0's
 * test phase at iteration `it`, the record updated (returns whether the
 * accuracy is a new best), then whether a stopping option ends the run
 * there (never at its last iteration, which ends it anyway: if so
 * t->stop_at and t->stop_why say so, and "stopping at iteration ..." is
 * logged); the summary's line on the options, if given. */
int trainer_stopping(const st_trainer *t);
st_status trainer_check_stopping(const st_trainer *t, st_error *err);
int trainer_record_test(st_trainer *t, long it, double accuracy);
int trainer_decide_stop(st_trainer *t, long it, double accuracy);
void trainer_log_stopping(const st_trainer *t, const st_train_result *res);

/* --trace (timeline.c): the path this rank writes (rank 0's alone), or
 * NULL; at set-up, the window (ST_EUSAGE when the one given is not in the
 * run) and t->trace, before the scheduler is made; at the run's start the
 * ranks' common time 0 (collective); at its end every rank's events to
 * rank 0, which writes the file (collective). Each does nothing without
 * --trace. */
const char *trainer_trace_path(const st_trainer *t);
st_status trainer_trace_create(st_trainer *t, st_error *err);
/* The iterations --trace will record (0 without it), for the memory
 * estimate, made before the window is: the one given, or the default's. */
long trainer_trace_iterations(const st_trainer *t);
st_status trainer_trace_start(st_trainer *t, st_error *err);
st_status trainer_trace_finish(st_trainer *t, st_error *err);

/* The run's outputs (outputs.c), into out [TRAINER_OUTPUTS]: the files
 * written over time (--metrics, --cpe-trace, --cpe-report, --trace), each
 * followed by its temporary (partials [TRAINER_PARTIALS], malloc'd or
 * NULL; freed by trainer_outputs_free), then --save-kernel-choices; a
 * path not given is NULL. Returns how many. Then the snapshots' name from
 * the cfg's, checked against the directory's name limit; the temporaries
 * of killed snapshot writes removed; every output path checked against
 * the inputs. */
#define TRAINER_PARTIALS 4
#define TRAINER_OUTPUTS (2 * TRAINER_PARTIALS + 1)
int trainer_outputs(const st_trainer *t, st_named_path *out, char **partials);
void trainer_outputs_free(char **partials);
st_status trainer_name_snapshots(st_trainer *t, st_error *err);
void trainer_remove_killed_snapshot_writes(const st_trainer *t);
st_status trainer_check_paths(const st_trainer *t, st_error *err);

/* How the run went (report.c): the time split of n iterations, a
 * progress line ("  split,", plain text progress only) or a summary line
 * ("time split,"); an st_info line of ctx, an st_log (the line callback of
 * the cluster's and the backend's reports); a rate of images_per_s as the
 * log prints it ("N img/s", and under mpirun, where every rank's images
 * are counted, "N img/s global (M per rank, R ranks)"); the report of a
 * run that finished every iteration (or that a test phase stopped), after
 * res is filled in: the "done:" line, the time split, the test accuracy,
 * why it stopped and the summary, then --profile's tables and the
 * backend's run_report. */
void trainer_log_split(const st_trainer *t, int progress, const char *what,
                       const st_time_split *s, double n);
void trainer_log_line(void *ctx, const char *line);
void trainer_rate_text(const st_trainer *t, double images_per_s, char *buf, size_t size);
st_status trainer_report(st_trainer *t, const st_train_result *res, st_error *err);

/* The rules between the run's options (option_rules.c): ST_EUSAGE with the
 * first one broken, checked once the backend is known. */
st_status trainer_check_option_rules(const st_trainer *t, st_error *err);

/* The kernel choices (kernel_choices.c): --conv-impl checked against the
 * backend's names, the table the workers share, the choices
 * --kernel-choices gives, then the cache's (setup); whether the kernels
 * take their implementations from that table (measured or given), not
 * from --conv-impl NAME (used); after the workers' set-up, what was
 * measured stored and logged (finish); multi-node, rank 0's choices to
 * every rank, after local (share). */
st_status trainer_setup_choices(st_trainer *t, st_error *err);
int trainer_kernel_choices_used(const st_trainer *t);
st_status trainer_finish_choices(st_trainer *t, st_error *err);
st_status trainer_share_choices(st_trainer *t, st_status local, st_error *err);

/* Hybrid across nodes (mp_group.c): resolve --mp-group auto and log the
 * bytes per rank (in set-up, once hybrid is); before rank 0 tests or
 * writes a snapshot, group 0's ranks send it their blocks of the
 * model-parallel weights and solver state (every rank of group 0 calls it
 * at the same points; a no-op elsewhere). */
void trainer_choose_mp_group(st_trainer *t);
st_status trainer_gather_mp_blocks(st_trainer *t, st_error *err);

/* The node (node.c): -t / --intra left at 0 filled in (see train.h);
 * where the threads run (--bind), said once (after a warning if the
 * ranks' threads outnumber the cores), the topology and the placement
 * into t; the workers' slices and gradients on their NUMA nodes, when
 * pinned on several. */
void trainer_choose_threads(st_trainer *t);
st_status trainer_place_threads(st_trainer *t, st_error *err);
st_status trainer_place_memory(st_trainer *t, st_error *err);

/* Where the run starts (resume.c): --resume's snapshot, or the weights of
 * path (--weights). */
st_status trainer_resume(st_trainer *t, st_error *err);
st_status trainer_start_from(st_trainer *t, const char *path, st_error *err);

/* -t auto / --intra auto (layout.c): the split measured by trials that
 * `run` makes and runs (or the cache's), into t->o; nothing when neither
 * is auto. `run`, a nested run (a trainer of cfg_path made with o and
 * log, run into *res and freed), is set-up's, which makes trainers. */
typedef st_status (*trainer_run_fn)(const char *cfg_path, const st_train_opts *o,
                                    const st_log *log, st_train_result *res, st_error *err);
st_status trainer_choose_layout(st_trainer *t, trainer_run_fn run, st_error *err);

#endif
