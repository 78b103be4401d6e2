/* The prefetcher: a thread that reads and decodes the coming mini-batches
 * into the batch ring (batchq.h) while the workers compute, so training
 * does not wait for data. Each epoch visits the records in a fresh seeded
 * permutation (a random sample without replacement); the last batch of an
 * epoch may be smaller. The records of a batch are spread over io_threads
 * readers (the prefetch thread and io_threads - 1 helpers), which read
 * (positional reads on a striped store: different stripes at once) and
 * decode them straight into the ring slot the workers will read in place. */
#ifndef ST_PREFETCH_H
#define ST_PREFETCH_H

#include <stdint.h>

#include "data/batchq.h"
#include "data/data.h"
#include "base/status.h"
#include "base/trace.h"

typedef struct st_prefetch_opts {
    const st_source *source;
    const st_transform *transform;
    int batch;        /* images per iteration on this node */
    int rank, ranks;  /* multi-node: this node's part of a batch of ranks x batch */
    uint64_t seed;    /* of the epoch order */
    int io_threads;   /* readers, at least 1 */
    st_batchq *q;
    st_trace *trace;  /* --trace: st_prefetch_start adds the thread's track ("prefetch":
                         per batch, its wait for a free slot and its reading), or NULL */
} st_prefetch_opts;

typedef struct st_prefetch st_prefetch;

/* Start producing iterations [first, last) into o->q (reset to first). */
st_status st_prefetch_start(st_prefetch **out, const st_prefetch_opts *o, long first,
                            long last, st_error *err);

/* Wait for the thread (close the queue first to make it give up) and free
 * it; returns its failure, if it had one. */
st_status st_prefetch_stop(st_prefetch *p, st_error *err);

/* The records of batch `iteration` into a slot, on the calling thread and
 * the helpers: what the prefetch thread does per batch (also usable without
 * the thread, e.g. by benchmarks). */
st_status st_prefetch_fill(st_prefetch *p, long iteration, st_batch_slot *slot, st_error *err);

/* The bytes a prefetcher of o allocates (its readers' record buffers and
 * the epoch order), besides the ring it fills (st_batchq_bytes). */
size_t st_prefetch_bytes(const st_prefetch_opts *o);

/* A prefetcher without its thread, for st_prefetch_fill alone. */
st_status st_prefetch_create(st_prefetch **out, const st_prefetch_opts *o, st_error *err);

#endif
