/* --trace: a recorder of the run's timeline, written out in the Chrome
 * trace event format (the JSON that Perfetto, ui.perfetto.dev, and
 * chrome://tracing open).
 *
 * A recorder (st_trace) holds one track per thread that records: each
 * worker, the scheduler, the prefetcher, the communication thread. A
 * track is a buffer of events allocated whole when it is added (at
 * set-up) and written by its thread alone, so recording an event takes no
 * lock and allocates nothing; the recorder reads the tracks only after
 * the threads are done with the window (the run's end). Events are kept
 * only for the iterations of a window [first, last]: the code that
 * records asks st_trace_at(track, iteration) once and records through the
 * track it returns, NULL outside the window or when there is no recorder
 * (no --trace: every track is NULL, and the cost is a pointer's test). A
 * track that fills counts what it drops (st_trace_dropped; its owner sizes
 * it for the window, so that is a bug to report, not a silent loss).
 *
 * The events are complete events (JSON "ph":"X"): a name, a category, the
 * start (ts) and length (dur) in microseconds since the recorder's origin,
 * and arguments. st_trace_json writes them, with "M" (metadata) events
 * naming the process and each thread, as the members of a "traceEvents"
 * array, one process (pid) per rank, so that rank 0 can join every rank's
 * text into one file. */
#ifndef ST_TRACE_H
#define ST_TRACE_H

#include <stddef.h>
#include <stdio.h>

#include "base/status.h"

typedef struct st_trace st_trace;
typedef struct st_trace_track st_trace_track;

/* Numeric arguments an event may carry. */
#define ST_TRACE_ARGS 4

/* One event. Its texts are not copied: name, cat and the keys are static
 * text; detail and text must outlive the call of st_trace_json (a layer's
 * type, an algorithm's name). Its name is shown as "NAME INDEX DETAIL"
 * ("forward 3 conv"), without the parts that are absent. */
typedef struct st_trace_event {
    const char *name;     /* "forward", "wait: mid" */
    int index;            /* >= 0: a layer's, a bucket's; -1: none */
    const char *detail;   /* or NULL */
    const char *cat;      /* the category: "iteration", "phase", "layer", "wait", "comm",
                             "data", "report" */
    long iteration;       /* args.iteration; -1: none */
    const char *text_key; /* one argument of text, or NULL */
    const char *text;
    const char *key[ST_TRACE_ARGS]; /* numeric arguments, up to the first NULL key */
    double value[ST_TRACE_ARGS];
    double t0, t1;        /* start and end, st_now() seconds */
} st_trace_event;

/* A recorder of iterations first .. last (inclusive), its origin (time 0)
 * now. */
st_status st_trace_create(st_trace **out, long first, long last, st_error *err);
void st_trace_free(st_trace *t);

/* Time 0 of the events, in st_now() seconds (across ranks: the same
 * instant on every rank, as well as the caller can make it). */
void st_trace_set_origin(st_trace *t, double origin);

/* A track for one thread named name (copied), its thread id the order of
 * adding (from 1), room for per_iteration events of each iteration of the
 * window and `extra` more. t NULL: *out NULL, ST_OK (nothing recorded).
 * Called at set-up by one thread at a time. */
st_status st_trace_track_add(st_trace *t, const char *name, size_t per_iteration, size_t extra,
                             st_trace_track **out, st_error *err);

/* The bytes a track of per_iteration and extra events takes with a
 * window of `iterations`, and its events' JSON text at most (for the
 * memory estimate; st_trace_json holds the text of every track at once). */
size_t st_trace_track_bytes(long iterations, size_t per_iteration, size_t extra);

/* k when it records iteration it (k not NULL, it in the window), else
 * NULL. */
st_trace_track *st_trace_at(st_trace_track *k, long it);

/* Record e on k (not NULL), or count it dropped when k is full. */
void st_trace_add(st_trace_track *k, const st_trace_event *e);

/* Record a plain event of iteration it (no index, detail or arguments). */
void st_trace_span(st_trace_track *k, const char *cat, const char *name, long it, double t0,
                   double t1);

/* Events every track dropped, full. */
long st_trace_dropped(const st_trace *t);

/* Every track's events, and the metadata naming the process (pid,
 * process_name) and its threads, as JSON objects each preceded by a comma
 * (the inside of a "traceEvents" array but for the first comma: the texts
 * of several ranks join as they are) into *text (malloc'd, *len bytes,
 * NUL-ended). ST_ENOMEM only. */
st_status st_trace_json(const st_trace *t, int pid, const char *process_name, char **text,
                        size_t *len, st_error *err);

/* s as the inside of a JSON string (quotes, backslashes and control
 * characters escaped). */
void st_trace_put_string(FILE *f, const char *s);

#endif
