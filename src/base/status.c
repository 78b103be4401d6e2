/* Error records, status strings, exit codes and checked allocation. */
#include "base/status.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

st_status st_fail(st_error *err, st_status code, const char *fmt, ...)
{
    if (!err || err->code != ST_OK)
        return code;
    err->code = code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
    return code;
}

void st_error_prefix(st_error *err, const char *fmt, ...)
{
    if (!err || err->code == ST_OK)
        return;
    char head[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(head, sizeof head, fmt, ap);
    va_end(ap);
    size_t hlen = n < 0 ? 0 : (size_t)n < sizeof head ? (size_t)n : sizeof head - 1;
    size_t old = strlen(err->msg), room = sizeof err->msg - 1;
    if (hlen > room)
        hlen = room;
    if (old + hlen > room)
        old = room - hlen;
    memmove(err->msg + hlen, err->msg, old);
    memcpy(err->msg, head, hlen);
    err->msg[hlen + old] = '\0';
}

void st_error_clear(st_error *err)
{
    err->code = ST_OK;
    err->msg[0] = '\0';
}

const char *st_strerror(st_status code)
{
    switch (code) {
    case ST_OK: return "success";
    case ST_EUSAGE: return "bad usage";
    case ST_EINPUT: return "bad input";
    case ST_ENOMEM: return "out of memory";
    case ST_EIO: return "input/output error";
    case ST_EBACKEND: return "backend failure";
    case ST_EDIVERGED: return "training diverged";
    case ST_EINTERNAL: return "internal error";
    case ST_ESTOPPED: return "stopped by a signal";
    case ST_EPEER: return "another rank failed";
    }
    return "unknown status";
}

int st_exit_code(st_status code)
{
    if (code == ST_OK)
        return 0;
    if (code == ST_EUSAGE || code == ST_EINPUT)
        return 2;
    return 1;
}

void *st_calloc(size_t count, size_t size, const char *what, st_error *err)
{
    void *p = calloc(count ? count : 1, size ? size : 1);
    if (!p)
        st_fail(err, ST_ENOMEM, "out of memory allocating %s (%zu x %zu bytes)",
                what, count, size);
    return p;
}
