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

void st_info(const st_log *log, const char *fmt, ...)
{
    if (!log || log->level < ST_LOG_INFO)
        return;
    va_list ap;
    va_start(ap, fmt);
    log_vprint(log, log->out, NULL, fmt, ap);
    va_end(ap);
}

void st_info_progress(const st_log *log, const char *fmt, ...)
{
    if (!log || log->level < ST_LOG_INFO || !st_progress_plain(log->progress))
        return;
    va_list ap;
    va_start(ap, fmt);
    log_vprint(log, log->out, NULL, fmt, ap);
    va_end(ap);
}

void st_debug(const st_log *log, const char *fmt, ...)
{
    if (!log || log->level < ST_LOG_DEBUG)
        return;
    va_list ap;
    va_start(ap, fmt);
    log_vprint(log, log->out, NULL, fmt, ap);
    va_end(ap);
}

void st_warn(const st_log *log, const char *fmt, ...)
{
    if (!log || log->level < ST_LOG_QUIET)
        return;
    va_list ap;
    va_start(ap, fmt);
    log_vprint(log, log->err, "singletrain: warning: ", fmt, ap);
    va_end(ap);
}
