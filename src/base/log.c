/* The run's logger: level filtering over two streams, clearing the live
 * progress line (progress.h) before each message. */
#include "base/log.h"

#include <stdarg.h>

#include "base/progress.h"
#include "base/stream.h"

st_log st_log_default(st_log_level level)
{
    st_log log = {level, stdout, stderr, NULL};
    return log;
}

static void log_vprint(const st_log *log, FILE *f, const char *prefix, const char *fmt,
                       va_list ap)
{
    if (!st_stream_ok(f))
        return;
    st_progress_hold(log->progress);
    if (prefix)
        fputs(prefix, f);
    vfprintf(f, fmt, ap);
    fputc('\n', f);
    st_stream_flush(f);
    st_progress_release(log->progress);
}

/* The body of the printf-like functions below: when shown (log non-NULL,
 * its level at least min and the condition extra true), fmt and its
 * arguments to stream after prefix (or NULL). */
#define LOG_PRINT(min, extra, stream, prefix)                        \
    do {                                                             \
        if (!log || log->level < (min) || !(extra))                  \
            return;                                                  \
        va_list ap;                                                  \
        va_start(ap, fmt);                                           \
        log_vprint(log, (stream), (prefix), fmt, ap);                \
        va_end(ap);                                                  \
    } while (0)

void st_info(const st_log *log, const char *fmt, ...)
{
    LOG_PRINT(ST_LOG_INFO, 1, log->out, NULL);
}

void st_info_progress(const st_log *log, const char *fmt, ...)
{
    LOG_PRINT(ST_LOG_INFO, st_progress_plain(log->progress), log->out, NULL);
}

void st_debug(const st_log *log, const char *fmt, ...)
{
    LOG_PRINT(ST_LOG_DEBUG, 1, log->out, NULL);
}

void st_warn(const st_log *log, const char *fmt, ...)
{
    LOG_PRINT(ST_LOG_QUIET, 1, log->err, "singletrain: warning: ");
}
