/* Status codes and the error record that every fallible function fills.
 *
 * Functions return an st_status (0 = ST_OK, negative = failure) and, on
 * failure, leave a message in the caller's st_error saying where (file:line,
 * option, layer) and what was expected. main() prints the message and maps
 * the code to the process exit code: 2 for bad input or usage, 1 otherwise. */
#ifndef ST_STATUS_H
#define ST_STATUS_H

#include <stddef.h>

typedef enum st_status {
    ST_OK = 0,
    ST_EUSAGE = -1,     /* bad command line */
    ST_EINPUT = -2,     /* bad input file: cfg, data, weights */
    ST_ENOMEM = -3,     /* allocation failed */
    ST_EIO = -4,        /* read or write failed at run time */
    ST_EBACKEND = -5,   /* a compute backend failed */
    ST_EDIVERGED = -6,  /* training produced a non-finite value */
    ST_EINTERNAL = -7,  /* broken invariant */
    ST_ESTOPPED = -8,   /* stopped by SIGINT / SIGTERM (signals.h) before the work was done */
    ST_EPEER = -9,      /* multi-node: another rank failed (its message says why) */
} st_status;

typedef struct st_error {
    st_status code;
    char msg[1024];
} st_error;

/* Record the first failure in err (later ones are ignored so the root cause
 * survives) and return code. err may be NULL. */
st_status st_fail(st_error *err, st_status code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Prepend context ("data/lenet.cfg: ") to the recorded message. */
void st_error_prefix(st_error *err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

void st_error_clear(st_error *err);
const char *st_strerror(st_status code);

/* 0 for ST_OK, 2 for usage and input errors, 1 for everything else. */
int st_exit_code(st_status code);

/* Checked allocation: on failure records "out of memory allocating <what>"
 * and returns NULL. Memory is zeroed. */
void *st_calloc(size_t count, size_t size, const char *what, st_error *err);

#endif
