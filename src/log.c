/* The run's logger: level filtering over two streams. */
#include "log.h"

#include <stdarg.h>

st_log st_log_default(st_log_level level)
{
    st_log log = {level, stdout, stderr};
    return log;
}

static void log_vprint(FILE *f, const char *prefix, const char *fmt, va_list ap)
{
    if (!f)
        return;
    if (prefix)
        fputs(prefix, f);
    vfprintf(f, fmt, ap);
    fputc('\n', f);
    fflush(f);
}

void st_info(const st_log *log, const char *fmt, ...)
{
    if (!log || log->level < ST_LOG_INFO)
        return;
    va_list ap;
    va_start(ap, fmt);
    log_vprint(log->out, NULL, fmt, ap);
    va_end(ap);
}

void st_debug(const st_log *log, const char *fmt, ...)
{
    if (!log || log->level < ST_LOG_DEBUG)
        return;
    va_list ap;
    va_start(ap, fmt);
    log_vprint(log->out, NULL, fmt, ap);
    va_end(ap);
}

void st_warn(const st_log *log, const char *fmt, ...)
{
    if (!log || log->level < ST_LOG_QUIET)
        return;
    va_list ap;
    va_start(ap, fmt);
    log_vprint(log->err, "singletrain: warning: ", fmt, ap);
    va_end(ap);
}
