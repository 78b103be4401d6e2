/* The kernel-choice cache: the choices measured on this machine, kept
 * between runs (as MIOpen's find-db and cuDNN's autotuner caches keep
 * theirs), so that the first run of a command measures its kernels and the
 * runs after it take the same choices and compute the same bits.
 *
 * One file per context, DIR/choices-HASH.txt, HASH naming the context: one
 * line of text saying what the choices hold for (the backend's library
 * version, instruction set, CPU model and precision; the workers and
 * intra-op threads; the network's layers), which the file repeats and the
 * reader compares. Each entry is a choice in the text form of choices.h
 * after a checksum of the context and the choice:
 *
 *   # singletrain kernel-choice cache ...
 *   context = oneDNN 2.6.3 (...), isa ..., 2 workers x 1 intra-op thread, ...
 *   0123456789abcdef 0.conv n16 1x28x28>20x24x24 ... = nhwc jit:avx2 - jit:avx2
 *
 * so that a damaged entry (a flipped byte, a hand edit, a line from another
 * context's file) is never trusted: it is left out with a warning and its
 * kernel measured anew. A file of another context is ignored whole.
 *
 * Concurrent runs (a sweep, several jobs on one host) share the cache
 * safely: a run takes the file's lock (DIR/choices-HASH.lock, flock) when
 * it opens the cache and keeps it until it has stored what it measured, so
 * that runs started at once measure once, one after the other, and take
 * the same choices; the file is rewritten whole under a temporary name and
 * renamed (fileio.h), so a reader sees the old file or the new one. A lock
 * held too long (a stopped run) is waited for a bounded time only.
 *
 * The cache never fails a run: a directory that cannot be created or
 * written, a lock not had in time, a file that cannot be read, written or
 * trusted are each a warning (the directory's and the file's at most
 * once), and the run measures what the cache cannot give. The file is
 * never read or written through a symbolic link (fileio.h's
 * st_read_own_text, st_write_own): a link at its name is a warning and
 * the run goes on without the cache, the link and its target untouched. */
#ifndef ST_CHOICE_CACHE_H
#define ST_CHOICE_CACHE_H

#include <stddef.h>

#include "backends/choices.h"
#include "base/log.h"
#include "base/status.h"

typedef struct st_choice_cache st_choice_cache;

/* The cache's default directory into buf [size]: $XDG_CACHE_HOME/singletrain
 * when XDG_CACHE_HOME is an absolute path (the XDG base directory
 * specification ignores a relative one), else $HOME/.cache/singletrain;
 * 0 with why [why_size] (naming the variable) when neither names one, the
 * path is too long for buf, or the directory the variable names does not
 * exist (the cache is created below it, never it). */
int st_choice_cache_default_dir(char *buf, size_t size, char *why, size_t why_size);

typedef struct st_choice_cache_opts {
    const char *dir;     /* the cache's directory, created (with its parents) if missing */
    const char *context; /* what the choices hold for, one line */
    int read;            /* 0: nothing read (every kernel measured anew), the file updated */
    double lock_wait;    /* seconds to wait for a run holding the lock before going on */
} st_choice_cache_opts;

/* The cache of o->context in o->dir, its lock taken and its entries added
 * to c (source ST_CHOICE_CACHE) unless !o->read. Problems are warnings on
 * log (see above), *out NULL when nothing of the cache can be used; only
 * running out of memory fails. */
st_status st_choice_cache_open(st_choice_cache **out, const st_choice_cache_opts *o,
                               st_choices *c, const st_log *log, st_error *err);

/* The choices measured in this process (c's ST_CHOICES_MEASURED) merged
 * into the file under the lock: its entries for other keys kept, those for
 * the same keys replaced. *stored: how many were written (0 when nothing
 * was measured or the file could not be written, which is a warning). */
void st_choice_cache_store(st_choice_cache *cache, const st_choices *c, int *stored);

/* The lock released (if held), cache freed; NULL does nothing. */
void st_choice_cache_close(st_choice_cache *cache);

/* The cache's file (DIR/choices-HASH.txt), for messages. */
const char *st_choice_cache_file(const st_choice_cache *cache);

#endif
