/* Messages to the user: one logger per run, passed down, never global.
 *
 * Levels: errors always print; warnings print unless the logger is silent
 * (tests); info (progress, summary) is suppressed by -q; debug needs -v.
 *
 * A logger may carry the run's progress reporter (progress.h): then every
 * message first clears the live progress line, so that messages and the
 * line never share a row of the terminal.
 *
 * A stream whose write fails is said so once and written no more
 * (stream.h). */
#ifndef ST_LOG_H
#define ST_LOG_H

#include <stdio.h>

typedef enum st_log_level {
    ST_LOG_SILENT = -1, /* nothing but what the caller prints itself */
    ST_LOG_QUIET = 0,   /* warnings only */
    ST_LOG_INFO = 1,    /* progress and summary (default) */
    ST_LOG_DEBUG = 2,   /* -v: layer table details, arena views */
} st_log_level;

typedef struct st_progress st_progress;

typedef struct st_log {
    st_log_level level;
    FILE *out;  /* info and debug; stdout by default (stderr with --log-format csv) */
    FILE *err;  /* warnings; stderr by default */
    st_progress *progress; /* NULL: plain lines only; owned by whoever created it (main) */
} st_log;


/* A logger writing info to stdout and warnings to stderr. */
st_log st_log_default(st_log_level level);

void st_info(const st_log *log, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void st_debug(const st_log *log, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void st_warn(const st_log *log, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* A progress line in plain text ("iter ...", "  split, ..."): printed like
 * st_info, but only when the progress format is text (the live line and
 * the CSV rows carry the same figures). */
void st_info_progress(const st_log *log, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#endif
