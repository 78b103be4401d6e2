/* The striped record store (swCaffe's striped dataset): a source decoded
 * once into fixed-size records, laid out in blocks of stripe_unit bytes
 * dealt round-robin over N stripe files, so that concurrent readers spread
 * over the files (and the disks behind them) instead of queueing on one.
 *
 * Files: the index OUT and the stripes OUT.<generation>.<k> (k = 0..N-1).
 * The index holds the magic ST_STORE_MAGIC, the format version, the
 * generation, the record shape (C, H, W), the record count, the class
 * count, the stripe count and unit, and one CRC-32 per block; it is written
 * last, under a temporary name, after the stripes are complete and
 * verified, and renamed over OUT: a store is complete exactly when OUT
 * exists, and a crash while packing leaves the previous store (if any)
 * intact. Stripes of older generations are removed after the rename.
 *
 * One pack at a time per OUT: a pack holds an exclusive lock (flock) on
 * OUT.lock while it writes (the file holds its pid, and is removed when
 * the pack ends); a second pack into the same OUT is refused, naming the
 * first. A pack asked to stop (st_pack_opts.stop) removes its new stripes
 * and leaves OUT as it was.
 *
 * A record is a 4-byte little-endian label followed by C x H x W pixel
 * bytes; a block holds floor(unit / record) whole records; block b lives in
 * stripe b % N at offset (b / N) x unit. Readers use pread, safe from any
 * number of threads. */
#ifndef ST_STORE_H
#define ST_STORE_H

#include <stdatomic.h>
#include <stddef.h>

#include "data/data.h"
#include "base/log.h"
#include "base/status.h"

#define ST_STORE_MAGIC "STSTORE1"
#define ST_STORE_VERSION 1

typedef struct st_pack_opts {
    int stripes;        /* N; 0: the default (32, fewer for small datasets) */
    size_t stripe_unit; /* bytes per block; 0: the default (256 MB, smaller for small) */
    int io_threads;     /* threads reading and decoding the source */
    const st_log *log;
    const atomic_int *stop; /* nonzero (a signal): stop before the commit, ST_ESTOPPED;
                               NULL: never */
} st_pack_opts;

/* Decode every record of src into a store at out (see above); *written
 * (may be NULL) gets the record count. */
st_status st_store_pack(const st_source *src, const char *out, const st_pack_opts *o,
                        long *written, st_error *err);

#endif
