/* The [net] section: input shape, batch, solver and schedule, and the data
 * files (singletrain's keys; Darknet ignores keys it does not know). */
#ifndef ST_HPARAMS_H
#define ST_HPARAMS_H

#include "base/cfg.h"
#include "data/data.h"
#include "layers/layer.h"
#include "base/log.h"
#include "ops/solver.h"
#include "base/status.h"

#define ST_PATH_MAX 4096

/* The data a run trains and tests on; relative paths are taken from the
 * current directory, as Darknet does. Empty strings: not given.
 * train= / test= (or valid=) name a packed store, IDX images (with
 * train_labels= / test_labels=), CIFAR-10 .bin batches (comma-separated),
 * or an image list; names= (or labels=) a file of class names for image
 * lists that take their labels from the paths; classes= the class count
 * the network must have. */
typedef struct st_data_paths {
    char train[ST_PATH_MAX], train_labels[ST_PATH_MAX];
    char test[ST_PATH_MAX], test_labels[ST_PATH_MAX];
    char names[ST_PATH_MAX];
    int classes;
} st_data_paths;

typedef struct st_hparams {
    st_shape input;        /* height, width, channels */
    int batch;             /* images per update */
    int subdivisions;      /* pieces of each worker's shard, gradients accumulated
                              (parallel/accumulate.c; --subdivisions overrides it) */
    long max_batches;      /* iterations, 0 if not given */
    st_solver_cfg solver;  /* solver= (or adam=1) and its keys, and the lr schedule */
    st_data_paths data;
    int data_line;         /* line of the first data key, 0 if none */
    st_transform transform;/* records to inputs: input_mean=, input_scale=, crop=, mirror= */
    st_shape image_size;   /* image lists are resized to this: image_size=W,H */
} st_hparams;

/* Parse cfg->secs[0], which must be [net] or [network]. */
st_status st_hparams_parse(st_cfg *cfg, st_hparams *hp, const st_log *log, st_error *err);

/* The settings of cfg that fix what training computes, as text
 * (st_cfg_settings): every key of every section but those of [net] that do
 * not: batch= (-b overrides it; a snapshot records the batch),
 * subdivisions=, max_batches= (the length of the run) and the data keys
 * (where the data is, not what is learned). A snapshot keeps them, so that
 * a resume can tell another cfg. */
st_status st_hparams_settings(const st_cfg *cfg, char **text, size_t *len, st_error *err);

/* Whether cfg's settings differ from text (st_hparams_settings of another
 * cfg, named other): see st_cfg_settings_differ. */
int st_hparams_settings_differ(const st_cfg *cfg, const char *text, size_t len,
                               const char *other, char *msg, size_t size);

/* Read a data file (--data, or a Darknet .data file): key=value lines with
 * the same data keys as [net], overriding them. Darknet's backup= and top=
 * are accepted with a warning. */
st_status st_data_paths_load(const char *path, st_data_paths *d, const st_log *log,
                             st_error *err);

#endif
