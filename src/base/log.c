/* The run's logger: level filtering over two streams, clearing the live
 * progress line (progress.h) before each message. */
#include "base/log.h"

#include <errno.h>
#include <stdarg.h>
#include <string.h>

#include "base/progress.h"

st_log st_log_default(st_log_level level)
{
    st_log log = {level, stdout, stderr, NULL};
    return log;
}

int st_log_stream_ok(FILE *f)
{
    return f && !ferror(f);
}

void st_log_flush(FILE *f)
{
    if (fflush(f) == 0 && !ferror(f))
        return;
    int e = errno;
    if (f != stderr && !ferror(stderr))
        fprintf(stderr, "singletrain: warning: writing to standard %s failed: %s: nothing more "
                "is written there, the run goes on\n", f == stdout ? "output" : "error",
                strerror(e));
}

int st_log_streams_failed(void)
{
    fflush(stdout);
    return ferror(stdout) || ferror(stderr);
}

static void log_vprint(const st_log *log, FILE *f, const char *prefix, const char *fmt,
                       va_list ap)
{
    if (!st_log_stream_ok(f))
        return;
    st_progress_hold(log->progress);
    if (prefix)
        fputs(prefix, f);
    vfprintf(f, fmt, ap);
    fputc('\n', f);
    st_log_flush(f);
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
