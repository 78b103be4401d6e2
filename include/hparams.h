/* The [net] section: input shape, batch, solver and schedule, and the data
 * files (singletrain's keys; Darknet ignores keys it does not know). */
#ifndef ST_HPARAMS_H
#define ST_HPARAMS_H

#include "cfg.h"
#include "layer.h"
#include "log.h"
#include "solver.h"
#include "status.h"

#define ST_PATH_MAX 4096

/* IDX image and label files; relative paths are taken from the current
 * directory, as Darknet does. Empty strings: not given. */
typedef struct st_data_paths {
    char train[ST_PATH_MAX], train_labels[ST_PATH_MAX];
    char test[ST_PATH_MAX], test_labels[ST_PATH_MAX];
} st_data_paths;

typedef struct st_hparams {
    st_shape input;        /* height, width, channels */
    int batch;             /* images per update */
    int subdivisions;      /* accepted; does not change the arithmetic */
    long max_batches;      /* iterations, 0 if not given */
    st_solver_cfg solver;
    st_data_paths data;
    int data_line;         /* line of the first data key, 0 if none */
} st_hparams;

/* Parse cfg->secs[0], which must be [net] or [network]. */
st_status st_hparams_parse(st_cfg *cfg, st_hparams *hp, const st_log *log, st_error *err);

/* Read a data file (--data): key=value lines with the same data keys as
 * [net] (train=, train_labels=, test=, test_labels=), overriding them. */
st_status st_data_paths_load(const char *path, st_data_paths *d, const st_log *log,
                             st_error *err);

#endif
