/* Training progress for people and for tools, in one of three formats
 * (--log-format), plus an optional metrics file (--metrics):
 *
 *   text  plain lines, printed by the trainer through st_info_progress
 *         ("iter ...", "  split, ...") and st_info ("test ..."): the
 *         default when stdout is not a terminal, and what scripts parse;
 *   live  one line on the terminal, rewritten in place (carriage return,
 *         cleared to the end of the line) at most 4 times a second:
 *         iteration / total, epoch, loss, images/s and the time left;
 *         messages clear it first and print on rows of their own; the
 *         default when stdout is a terminal;
 *   csv   a header and one CSV row per logged iteration and per test phase
 *         on stdout, flushed row by row; the messages go to stderr.
 *
 * The metrics file has the CSV format's rows. It is written as
 * FILE.partial, flushed row by row, and renamed to FILE when training
 * ends, whether it finished, stopped on a signal or failed, so FILE is
 * never a truncated file (after kill -9 only FILE.partial exists). When
 * training never began (a set-up error), FILE.partial is removed. A FILE
 * that is a character device, a FIFO or this process's stdout or stderr
 * (/dev/null, /dev/stdout) is written in place instead, and a symbolic
 * link to a regular file is written through (fileio.h's outputs).
 *
 * CSV columns: phase (train or test), iteration (iterations done), epoch,
 * wall_s (seconds since training began, test phases included), loss (mean
 * per image over the logged window), lr, images_per_s (over the window),
 * test_accuracy (a fraction) and test_loss (test rows only), then the time
 * split of the window in ms per iteration (train rows of BSP runs): data_ms,
 * compute_ms, barrier_ms, aggregation_ms, update_ms, communication_ms.
 * Empty fields are figures the row does not have.
 *
 * Threads: the reporting functions (begin, step, train, test, hold,
 * release) may be called from any thread; create and close from one. */
#ifndef ST_PROGRESS_H
#define ST_PROGRESS_H

#include <stdio.h>

#include "base/log.h"
#include "base/status.h"

typedef enum st_progress_format {
    ST_PROGRESS_TEXT,
    ST_PROGRESS_LIVE,
    ST_PROGRESS_CSV,
} st_progress_format;

/* "text", "live", "csv" by st_progress_format, then NULL */
extern const char *const st_progress_format_names[];

typedef struct st_progress_opts {
    st_progress_format format;
    FILE *out;           /* live: the terminal; csv: where the rows go */
    const char *metrics; /* --metrics FILE, or NULL */
    const char *precision; /* the rows' precision column (--precision: "fp32", "bf16");
                              NULL: fp32 */
} st_progress_opts;

/* One logged window of training iterations. */
typedef struct st_progress_row {
    long iteration;      /* iterations done at the end of the window */
    double loss;         /* mean loss per image over the window */
    double lr;           /* learning rate of the window's last iteration */
    double images_per_s; /* over the window */
    int has_split;       /* the time split below was measured (BSP) */
    double data_ms, compute_ms, barrier_ms, aggregation_ms, update_ms, communication_ms;
                         /* ms per iteration, means over the window */
} st_progress_row;

/* Open FILE.partial for --metrics: errors (ST_EUSAGE) name the option and
 * the file. */
st_status st_progress_create(st_progress **out, const st_progress_opts *o, st_error *err);

/* Clear the live line if it is shown; close the metrics file: fsynced and
 * renamed to FILE if training began, removed if not; FILE.partial is kept
 * (and ST_EIO returned) if a write failed. Frees p; NULL is fine. */
st_status st_progress_close(st_progress *p, st_error *err);

/* FILE.partial of --metrics, or NULL (p NULL, or no --metrics). */
const char *st_progress_partial(const st_progress *p);

/* Whether the progress goes out as plain text lines (p NULL or text). */
int st_progress_plain(const st_progress *p);

/* Training begins: `first` iterations are done (a resumed run's), of
 * `iterations`, `per_epoch` to an epoch. Starts the wall clock and writes
 * the CSV headers. */
void st_progress_begin(st_progress *p, long first, long iterations, long per_epoch);

/* Iterations up to `done` have finished with `loss` summed over `images`
 * since the last call: updates the live line (at most 4 times a second,
 * and always at the last iteration, which stays on its own row). */
void st_progress_step(st_progress *p, long done, double loss, long images);

/* A logged window: a CSV row (--log-format csv, --metrics). */
void st_progress_train(st_progress *p, const st_progress_row *row);

/* A test phase after `iteration` iterations: a CSV row; the time it took
 * is left out of the live line's speed and time left. */
void st_progress_test(st_progress *p, long iteration, double accuracy, double loss);

/* For the logger: take the terminal (clearing the live line) while a
 * message prints, and give it back. NULL is fine. */
void st_progress_hold(st_progress *p);
void st_progress_release(st_progress *p);

#endif
