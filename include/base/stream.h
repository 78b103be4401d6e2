/* Writing to the standard streams. A stream whose write fails (stdout a
 * pipe whose reader left, SIGPIPE being ignored; a full disk) is said so
 * once on stderr and written no more, and the run goes on; its error flag
 * stays set, so that main can end with a failure (st_streams_failed).
 * The logger (log.h) and the progress reporter (progress.h) both write
 * through these. */
#ifndef ST_STREAM_H
#define ST_STREAM_H

#include <stdio.h>

/* Whether f (stdout or stderr) may still be written: not NULL, and no write
 * to it has failed. Every writer of the log's streams checks first. */
int st_stream_ok(FILE *f);

/* Flush f after writing to it; when the writes failed, say so on stderr
 * (once: the writers skip f from then on). */
void st_stream_flush(FILE *f);

/* At the end: flush stdout; whether a write to stdout or stderr failed. */
int st_streams_failed(void);

#endif
