/* SIGINT and SIGTERM for the whole process, taken in one place.
 *
 * st_signals_start, the first thing main does, blocks both signals in the
 * calling thread before any other thread exists, so every thread created
 * later inherits the mask: MPI_Init's (UCX's progress thread, which used
 * to take them with the default action and kill a rank at once), OpenMP's
 * and ours. It also ignores SIGPIPE, so that a write to a closed pipe
 * fails with EPIPE instead of killing the process (log.h reports it). One
 * thread of this module then waits for SIGINT and SIGTERM, and what it
 * does with one depends on the phase the process is in:
 *
 *   at once (the default: set-up, and the commands while they only read):
 *       the files registered with st_signals_remove_on_exit are removed
 *       and the process exits with 128 + the signal, whatever it was doing;
 *   graceful (training, a pack writing its stripes): the signal is stored
 *       in the stop flag, which the iteration loop and the pack's writer
 *       read to stop at their next boundary and finish cleanly; a second
 *       signal quits at once as above, unless it comes within a second of
 *       the first (timeout(1) and a terminal deliver one request twice:
 *       to the process and to its process group), which is the same
 *       request.
 *
 * State: the stop flag, the phase, and the few paths to remove are global
 * (the signal concerns the whole process, and the waiting thread must see
 * them); the flag and the phase are atomics, the paths are under a mutex. */
#ifndef ST_SIGNALS_H
#define ST_SIGNALS_H

#include <stdatomic.h>

#include "base/status.h"

/* Block SIGINT and SIGTERM, ignore SIGPIPE, start the waiting thread. Call
 * once, before any thread is created. */
st_status st_signals_start(st_error *err);

/* Enter (1) or leave (0) the graceful phase. */
void st_signals_set_graceful(int graceful);

/* The stop flag: 0, or the signal (SIGINT, SIGTERM) that asked the process
 * to stop; read it with atomic_load. Set in the graceful phase only. */
const atomic_int *st_signals_stop_flag(void);

/* The signal that came in the graceful phase, or 0. */
int st_signals_caught(void);

/* Remove path (copied) if a signal ends the process at once; forget it
 * again with st_signals_keep. At most a few paths at a time (ST_EINTERNAL
 * beyond). */
st_status st_signals_remove_on_exit(const char *path, st_error *err);
void st_signals_keep(const char *path);

#endif
