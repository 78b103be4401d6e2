/* Training a network from a cfg: data, schedule, the iteration loop, test
 * phases, logging and the final snapshot. */
#ifndef ST_TRAIN_H
#define ST_TRAIN_H

#include <stdatomic.h>
#include <stdint.h>

#include "dist/cluster.h"
#include "base/log.h"
#include "net/net.h"
#include "parallel/scheduler.h"
#include "base/status.h"

/* --rank-update: how the ranks of a multi-node run update the weights. */
typedef enum st_rank_update {
    ST_RANK_UPDATE_REPLICATED,  /* every rank updates every weight and holds the whole solver
                                   state (the default) */
    ST_RANK_UPDATE_PARTITIONED, /* each rank updates 1/P of every slice and holds only that
                                   part's solver state (parallel/ps_part.h) */
} st_rank_update;

/* --trace-iters A:B: the longest window (the events are kept in memory
 * until the run ends). */
#define ST_TRACE_MAX_ITERS 100
#define ST_TRACE_MAX_ITERS_TEXT "100"

/* -t auto, --intra auto: the split of the cores that trains fastest,
 * measured at set-up (st_trainer_create). */
#define ST_THREADS_AUTO (-1)

typedef struct st_train_opts {
    int threads;             /* workers (-t); 0: chosen, see st_trainer_create;
                                ST_THREADS_AUTO: measured */
    int intra;               /* intra-op threads per worker (--intra); 0: chosen;
                                ST_THREADS_AUTO: measured */
    st_bind bind;            /* --bind: where the threads run (placement.h) */
    st_sync_mode sync;       /* --sync bsp | ssp:S | asp */
    int staleness;           /* S of ssp:S */
    int hybrid;              /* --parallel: 1 hybrid (fully connected layers
                                model-parallel over the workers, scheduler.h), 0 data,
                                -1 auto (the default; see st_trainer_create) */
    int mp_group;            /* --mp-group G: hybrid across nodes, the model-parallel
                                layers split over groups of G consecutive ranks (one
                                worker each); 0: not given (1, over the workers);
                                ST_THREADS_AUTO: chosen by PCL-DNN's rule (mp_group.c) */
    int batch;               /* images per update; 0: batch= from [net] */
    int subdivisions;        /* --subdivisions S: each worker's shard in S pieces, gradients
                                accumulated (accumulate.c); 0: subdivisions= from [net] */
    long iters;              /* 0: from --epochs or max_batches */
    long epochs;
    uint64_t seed;
    const char *backend;     /* "ref", "dnnl", "cpe" */
    const char *conv_impl;   /* --conv-impl: "auto" or one of the backend's conv_impls;
                                NULL: auto where the backend has several */
    st_precision precision;  /* --precision: what convolutions and inner products compute
                                in (ops/bf16.h); the backend must support it */
    int bf16_per_kernel;     /* no option: in bf16, every kernel rounds the weights it
                                reads instead of reading the workers' one copy
                                (st_sched_opts.bf16_per_kernel): the tests' oracle */
    const char *kernel_choices;      /* --kernel-choices FILE to use, or NULL */
    const char *save_kernel_choices; /* --save-kernel-choices FILE to write, or NULL */
    int remeasure;           /* --kernel-choices measure: the choice cache is not read (every
                                kernel not given otherwise is measured) but updated */
    const char *choice_cache;/* the kernel-choice cache's directory (choice_cache.h), read and
                                written by rank 0 when kernels measure; NULL: none (the
                                default here, --no-choice-cache); "": the CLI found no place
                                for it (a warning when kernels measure) */
    const char *choice_cache_why; /* with choice_cache "": why (naming the variable), or NULL */
    const char *cpe_trace;   /* cpe: CSV of predicted ms per kernel and iteration, or NULL */
    const char *cpe_report;  /* cpe: CSV of predicted seconds per kernel and strategy, or NULL */
    int cpe_cost_only;       /* cpe: emulate the kernels' costs, not their arithmetic */
    const char *cpe_model;   /* cpe: the SW26010 model file, or NULL for the built-in one */
    const char *cpe_machine; /* cpe: the machine description, or NULL for the built-in SW26010 */
    const char *metrics;     /* --metrics FILE the caller writes (progress.h), or NULL:
                                checked against the inputs and the other outputs */
    const char *trace;       /* --trace FILE: the run's timeline in the Chrome trace event
                                format (every rank records, rank 0 writes), or NULL */
    long trace_first;        /* --trace-iters A:B: the iterations A to B recorded; */
    long trace_last;         /* trace_last < 0: a few after the warm-up (timeline.c) */
    const char *data;        /* --data file, "synthetic", or NULL */
    const char *snapshot_dir;/* NULL: do not save (but see snapshot_every) */
    long snapshot_every;     /* 0: only at the end and on SIGINT / SIGTERM */
    const char *resume;      /* a snapshot to continue from, or NULL */
    const char *weights;     /* initial weights (snapshot or Darknet .weights), or NULL */
    const char *hparams;     /* an ONNX model's [net] section, or NULL: its sidecar */
    long train_images;       /* 0: all (synthetic: default count) */
    long test_images;
    int io_threads;          /* readers of the prefetcher (--io-threads) */
    int skip_bad_images;     /* image lists: skip and count unreadable images */
    int no_verify;           /* stores: skip the block checksums at open */
    long test_interval;      /* 0: every epoch and at the end */
    int no_test;             /* never run the test phase */
    double stop_accuracy;    /* --stop-at-accuracy: stop after the first test phase whose
                                accuracy (a fraction in (0, 1]) reaches it; 0: never */
    long patience;           /* --patience: stop after this many test phases in a row
                                without a better accuracy; 0: never. Both need BSP test
                                phases before the end; with a snapshot directory the
                                best test phase's snapshot is kept as NAME_best.snap */
    long log_every;          /* iterations per progress line */
    long warmup;             /* first iterations left out of speed figures */
    int profile;             /* print per-layer times and the time split */
    double fma_peak;         /* --profile's FMA peak, GFLOP/s per core; 0: measured */
    double *loss_trace;      /* NULL, or [iterations]: loss per image of each */
    st_cluster *cluster;     /* multi-node (mpirun), or NULL */
    const char *allreduce;   /* --allreduce NAME, or "auto" */
    const char *allreduce_granularity; /* auto: "model" or "layer" */
    int supernode_size;      /* --supernode-size Q; 0 = none */
    double sim_cross_bandwidth; /* --sim-cross-bandwidth F; 0 = off */
    int overlap;             /* --overlap: all-reduce during backward (set too by
                                --pipeline layer across nodes: its buckets) */
    int pipeline;            /* --pipeline layer: each bucket updated as soon as it is
                                reduced, the next forward waiting per layer */
    st_rank_update rank_update; /* --rank-update replicated | partitioned */
    size_t bucket_bytes;     /* --bucket-size */
    const atomic_int *stop;  /* nonzero (a signal) asks the run to stop cleanly; NULL:
                                never (main passes signals.h's flag) */
    long peer_timeout;       /* multi-node: seconds a rank waits for the others at a
                                meeting point before ending every rank; 0: forever */
    int force;               /* --force: run even when the memory estimate exceeds what
                                the process may take (a warning instead of a refusal) */
} st_train_opts;

/* The defaults the CLI starts from. */
st_train_opts st_train_defaults(void);

/* A trial run's options and log, made from a run's in place: the same
 * computation (network, data, backend, threads, kernels, seed) for
 * warmup + timed iterations, the speed taken over the timed ones, and
 * nothing else: no test phase and no stopping on one, no snapshot, no
 * resume, no output file (--metrics, --trace, --save-kernel-choices,
 * --cpe-trace, --cpe-report), no loss trace, no --profile, no progress, a
 * quiet log. The one list of what a nested run leaves out, for whatever
 * measures by training quietly (-t auto's splits, `singletrain plan`;
 * the latter sets o->profile again for the layer times). */
void st_trainer_trial(st_train_opts *o, st_log *log, long warmup, long timed);

typedef struct st_train_result {
    long iterations;
    double seconds;          /* training time after warm-up, test phases excluded */
    double images_per_s;     /* after warm-up */
    double gflops;           /* training GFLOP/s: 3 x forward conv/fc flops */
    st_time_split split;     /* after warm-up, summed over iterations */
    double first_loss;       /* loss per image of the first iteration */
    double last_loss;        /* mean loss per image over the last log window */
    double test_accuracy;    /* last test phase, -1 if none ran */
    double test_loss;
    double best_accuracy;    /* best test phase (a resumed snapshot's record included), -1
                                if none ran */
    double peak_memory;      /* bytes: the process's peak resident set */
    long skipped_images;     /* unreadable images skipped (--skip-bad-images) */
    int signal;              /* the stop flag's signal that stopped the run early (on any
                                node), or 0 */
    int stopped_early;       /* a test phase met --stop-at-accuracy or --patience (rank 0's,
                                in multi-node mode): the run ended cleanly after
                                `iterations`, before its schedule's end */
} st_train_result;

typedef struct st_trainer st_trainer;

/* Load the cfg, build the network, open the data, estimate the memory the
 * run will take and refuse it (ST_EUSAGE, saying what to change) when that
 * is more than the process may take, unless o->force; allocate everything.
 * Threads left at 0 are chosen for the cores this process may use: without
 * -t and --intra one worker per core, except that a network with more than
 * 16M parameters gets one worker with every core as intra-op threads (it
 * runs as fast and needs no second copy of its large gradient); -t alone
 * means one intra-op thread per worker; --intra alone, cores / intra
 * workers. */
st_status st_trainer_create(st_trainer **out, const char *cfg_path, const st_train_opts *o,
                            const st_log *log, st_error *err);

/* Multi-node, on a rank that creates no trainer (its command line was
 * refused): its part in the collectives of the other ranks' set-up, as a
 * rank whose set-up failed, so that they meet it at st_cluster_agree
 * rather than wait for it. */
void st_trainer_create_absent(st_cluster *cluster);

/* --dry-run: what st_trainer_create checks and estimates before it
 * allocates (the options, the cfg, the data, the memory the run would take
 * against what the process may take), logged, then nothing more (no
 * snapshot directory is made, no file removed): the layer table, the
 * "memory:" and "memory limit:" lines, and a warning when the memory check
 * would refuse the run (the dry run itself succeeds). A missing schedule
 * (--iters, --epochs, max_batches=) is not an error here. With
 * o->save_kernel_choices the kernels are measured (or taken from the
 * choice cache) as the run's set-up would (a run that fits, or --force;
 * not with --resume, whose snapshot's choices a dry run does not read:
 * ST_EUSAGE), stored in the cache and the file written. */
st_status st_trainer_dry_run(const char *cfg_path, const st_train_opts *o, const st_log *log,
                             st_error *err);

/* The progress display and metrics file training reports to (st_log's),
 * opened after st_trainer_create has checked the --metrics path. */
void st_trainer_attach_progress(st_trainer *t, st_progress *progress);

/* Run the whole schedule (from a --resume snapshot's iteration on). When the
 * stop flag (o.stop) is set, the run stops after the iteration in flight
 * (every node at the same one), snapshots (when a directory is known) and
 * returns ST_OK with res->signal set; set after the last iteration, it
 * changes nothing (the caller sees it). A test phase meeting
 * --stop-at-accuracy or --patience ends the run there as if it were the
 * schedule's end (report, final snapshot) with res->stopped_early set;
 * every node stops at that iteration. */
st_status st_trainer_run(st_trainer *t, st_train_result *res, st_error *err);

/* Multi-node: what every rank must agree on (st_cluster_agree): every
 * option and cfg key that changes the computation; see fingerprint.c for those
 * deliberately left out (output, rank 0's test phases and snapshots). */
void st_trainer_fingerprint(const st_trainer *t, st_cluster_fingerprint *fp);

/* Multi-node: the communication channels its run needs (st_cluster_start_workers). */
int st_trainer_channels(const st_trainer *t);

const st_net *st_trainer_net(const st_trainer *t);
/* The shared weights arena [st_trainer_net(t)->params.count]. */
const float *st_trainer_weights(const st_trainer *t);

/* After st_trainer_run of a run with o.profile: worker 0's seconds in
 * each layer [st_trainer_net(t)->n_layers], summed over the iterations
 * after warm-up (what --profile prints; `singletrain plan` models from
 * them). NULL without o.profile. */
const st_layer_time *st_trainer_layer_times(const st_trainer *t);

void st_trainer_free(st_trainer *t);

#endif
