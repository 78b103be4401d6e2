/* Snapshots: everything a run needs to continue exactly where it stopped.
 * The weights (plain layouts, whatever the backend) and the solver state
 * (every plane of moments), behind a header with a magic number, a format
 * version, the network's hash, the iteration reached and the settings that
 * fix what comes next (seed, batch, workers, ranks, --mp-group's groups, the
 * precision, the cfg's hyper-parameters as text, st_hparams_settings, and
 * the kernel choices, choices.h), a CRC-32 of the header and the settings
 * and one of the payload: no byte is outside a checksum.
 *
 * Nothing else is needed to resume: the learning rate is a function of the
 * iteration, the data order a function of (seed, epoch), dropout masks and
 * transforms of (seed, iteration, sample), so the iteration is the position
 * of every random stream. The record of the test phases (st_test_record)
 * rides along, for test-driven stopping. Written atomically (fileio.h): a crash while
 * writing leaves the previous file under the final name. Non-finite
 * weights or state are neither written nor read. */
#ifndef ST_SNAPSHOT_H
#define ST_SNAPSHOT_H

#include <stdint.h>

#include "net/net.h"
#include "ops/bf16.h"
#include "base/status.h"

/* A snapshot file's first bytes (without the string's NUL), then its u32
 * format version: what snapshot.c writes and checks, and how
 * darknet_weights.h's st_weights_load_any tells a snapshot from a Darknet
 * .weights file. */
#define ST_SNAPSHOT_MAGIC "STSNAPSH"
#define ST_SNAPSHOT_MAGIC_BYTES (sizeof ST_SNAPSHOT_MAGIC - 1)
#define ST_SNAPSHOT_VERSION 3

/* The settings text a snapshot holds at most (a cfg is at most 16 MB). */
#define ST_SNAPSHOT_SETTINGS_MAX (64u << 20)

/* The test phases a run has had, so that test-driven stopping
 * (--stop-at-accuracy, --patience) and the best accuracy go on across a
 * resume. */
typedef struct st_test_record {
    long phases;          /* test phases so far; 0: none (the rest means nothing) */
    double best_accuracy; /* the best test accuracy, a fraction */
    long best_iteration;  /* the first iteration that had it */
    long since_best;      /* test phases after that one without a better accuracy */
} st_test_record;

/* What a snapshot records besides the arenas. */
typedef struct st_snapshot_meta {
    long iteration;    /* iterations done: the next one to run */
    uint64_t seed;
    int batch;         /* images per iteration */
    int workers;       /* BSP workers: the order of the gradient sum */
    int state_planes;  /* solver state planes of net->params.count floats */
    char solver[16];   /* the update rule's name */
    char *settings;    /* the cfg's settings (st_hparams_settings), NUL-ended;
                          st_snapshot_save reads it (NULL: none), and
                          st_snapshot_resume allocates it: the caller frees it */
    char *choices;     /* the kernel choices in text form (st_choices_text), NUL-ended,
                          or NULL: none; st_snapshot_resume points it into the
                          settings' allocation (NULL in snapshots without) */
    st_test_record tests; /* the test phases so far (phases 0 in snapshots without) */
    int ranks;         /* the run's processes (mpirun -np): -b is per rank, so the
                          global batch is batch x ranks; 1 in snapshots without
                          (st_snapshot_save writes it when above 1) */
    int mp_group;      /* --mp-group G: the ranks the model-parallel layers were split
                          over (the order of their gradient sums); 1 (or 0) when not
                          split, as in snapshots without (written when above 1) */
    st_precision precision; /* what the convolutions and inner products computed in
                               (--precision); the weights and state are fp32 whatever it
                               is; fp32 in snapshots without */
} st_snapshot_meta;

/* weights [net->params.count]; state [meta->state_planes * params.count]. */
st_status st_snapshot_save(const char *path, const st_net *net, const float *weights,
                           const float *state, const st_snapshot_meta *meta, st_error *err);

/* The weights alone into weights [net->params.count] (inference, export, a
 * starting point); *iteration if not NULL. A file of another network, a
 * truncated or corrupt file is ST_EINPUT naming the file and the problem. */
st_status st_snapshot_load(const char *path, const st_net *net, float *weights,
                           long *iteration, st_error *err);

/* Everything, to resume: the header and the settings into meta, then
 * weights and state [planes * count], planes being this run's; a snapshot
 * with another number of planes is an error naming the file and its
 * solver. state NULL reads the state only through the checksum (a rank of
 * a partitioned run that gets its part of the state from rank 0). On
 * success free(meta->settings) when done. */
st_status st_snapshot_resume(const char *path, const st_net *net, float *weights, float *state,
                             int planes, st_snapshot_meta *meta, st_error *err);

#endif
