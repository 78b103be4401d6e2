/* The hand-over of mini-batches from their producer (the prefetch thread,
 * prefetch.h) to the workers: a ring of `depth` batch buffers. The producer
 * fills iteration i into slot i % depth once the workers have released
 * iteration i - depth; the workers read their shards of slot i in place.
 * Waiting spins briefly (the batch is normally ready long before it is
 * needed), then sleeps. */
#ifndef ST_BATCHQ_H
#define ST_BATCHQ_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>

#include "base/status.h"

typedef struct st_batch_slot {
    float *x;          /* [capacity, per_sample] */
    int *labels;       /* [capacity] */
    long *indices;     /* [capacity] record indices, for the producer's use */
    int n;             /* samples in this batch */
    int n_total;       /* multi-node: samples of the iteration over every node */
    long sample0;      /* global index of its first sample (dropout) */
    int stop;          /* the producer failed: workers stop at this batch */
    atomic_long ready; /* the iteration it holds, -1 while being filled or empty */
} st_batch_slot;

typedef struct st_batchq {
    int depth;
    st_batch_slot *slot;
    atomic_long released; /* iterations below this are done with */
    atomic_int closed;    /* the workers stopped: producers give up */
    pthread_mutex_t lock;
    pthread_cond_t moved;
} st_batchq;

st_status st_batchq_init(st_batchq *q, int depth, int capacity, size_t per_sample,
                         st_error *err);

/* The bytes st_batchq_init allocates for these arguments (the memory
 * estimate, made before it). */
size_t st_batchq_bytes(int depth, int capacity, size_t per_sample);
void st_batchq_free(st_batchq *q);

/* Start over at iteration `first`: every slot empty. Only while no worker
 * or producer is using the queue. */
void st_batchq_reset(st_batchq *q, long first);

/* Producer: the slot for iteration i, once the workers are done with
 * iteration i - depth; NULL once the queue is closed. Fill it, publish it. */
st_batch_slot *st_batchq_acquire(st_batchq *q, long i);
void st_batchq_publish(st_batchq *q, st_batch_slot *s, long i);

/* Workers: the slot holding iteration i, waiting until it is published. */
const st_batch_slot *st_batchq_wait(st_batchq *q, long i);

/* All workers are done with iteration i (called by one of them). */
void st_batchq_release(st_batchq *q, long i);

/* The workers stopped early: close the queue; a producer waiting in
 * acquire gets NULL. */
void st_batchq_close(st_batchq *q);

/* Worker (or rank) r's shard of n samples: the first sample and the count; sizes
 * differ by at most one, larger first. */
void st_shard_of(int n, int workers, int r, int *first, int *count);

#endif
