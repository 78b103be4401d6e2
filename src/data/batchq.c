/* The batch ring; see batchq.h. */
#include "data/batchq.h"

#include <stdlib.h>
#include <string.h>

#include "base/memory.h"

/* Workers spin briefly for a batch (it is normally ready already); the
 * producer waits a whole iteration for a free slot, so it sleeps at once
 * rather than take a core from a worker. */
#define WORKER_SPINS 20000

/* One slot's buffers, in bytes. */
static size_t slot_x_bytes(int capacity, size_t per_sample)
{
    return (size_t)capacity * per_sample * sizeof(float);
}

size_t st_batchq_bytes(int depth, int capacity, size_t per_sample)
{
    return (size_t)depth * (slot_x_bytes(capacity, per_sample) +
                            (size_t)capacity * (sizeof(int) + sizeof(long)));
}

st_status st_batchq_init(st_batchq *q, int depth, int capacity, size_t per_sample,
                         st_error *err)
{
    memset(q, 0, sizeof *q);
    q->depth = depth;
    q->slot = st_calloc((size_t)depth, sizeof *q->slot, "batch ring", err);
    if (!q->slot)
        return ST_ENOMEM;
    pthread_mutex_init(&q->lock, NULL);
    pthread_cond_init(&q->moved, NULL);
    for (int k = 0; k < depth; k++) {
        st_batch_slot *s = &q->slot[k];
        s->x = st_alloc_aligned(slot_x_bytes(capacity, per_sample), "input batch", err);
        s->labels = st_calloc((size_t)capacity, sizeof *s->labels, "label batch", err);
        s->indices = st_calloc((size_t)capacity, sizeof *s->indices, "batch indices", err);
        atomic_init(&s->ready, -1);
        if (!s->x || !s->labels || !s->indices) {
            st_batchq_free(q);
            return ST_ENOMEM;
        }
    }
    atomic_init(&q->released, 0);
    atomic_init(&q->closed, 0);
    return ST_OK;
}

void st_batchq_free(st_batchq *q)
{
    if (!q->slot)
        return;
    for (int k = 0; k < q->depth; k++) {
        st_free_aligned(q->slot[k].x);
        free(q->slot[k].labels);
        free(q->slot[k].indices);
    }
    free(q->slot);
    pthread_mutex_destroy(&q->lock);
    pthread_cond_destroy(&q->moved);
    memset(q, 0, sizeof *q);
}

void st_batchq_reset(st_batchq *q, long first)
{
    for (int k = 0; k < q->depth; k++)
        atomic_store(&q->slot[k].ready, -1);
    atomic_store(&q->released, first);
    atomic_store(&q->closed, 0);
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* Wait until done(q, arg) holds: spin `spins` times, then sleep. */
static void wait_until(st_batchq *q, int (*done)(st_batchq *, long), long arg, int spins)
{
    for (int spin = 0; spin < spins; spin++) {
        if (done(q, arg))
            return;
        cpu_relax();
    }
    pthread_mutex_lock(&q->lock);
    while (!done(q, arg))
        pthread_cond_wait(&q->moved, &q->lock);
    pthread_mutex_unlock(&q->lock);
}

static int slot_free(st_batchq *q, long i)
{
    return atomic_load(&q->released) > i - q->depth || atomic_load(&q->closed);
}

static int slot_holds(st_batchq *q, long i)
{
    return atomic_load(&q->slot[i % q->depth].ready) == i;
}

static void notify(st_batchq *q)
{
    pthread_mutex_lock(&q->lock);
    pthread_cond_broadcast(&q->moved);
    pthread_mutex_unlock(&q->lock);
}

st_batch_slot *st_batchq_acquire(st_batchq *q, long i)
{
    wait_until(q, slot_free, i, 0);
    return atomic_load(&q->closed) ? NULL : &q->slot[i % q->depth];
}

void st_batchq_publish(st_batchq *q, st_batch_slot *s, long i)
{
    atomic_store(&s->ready, i);
    notify(q);
}

const st_batch_slot *st_batchq_wait(st_batchq *q, long i)
{
    wait_until(q, slot_holds, i, WORKER_SPINS);
    return &q->slot[i % q->depth];
}

void st_batchq_close(st_batchq *q)
{
    atomic_store(&q->closed, 1);
    notify(q);
}

void st_batchq_release(st_batchq *q, long i)
{
    atomic_store(&q->slot[i % q->depth].ready, -1);
    atomic_store(&q->released, i + 1);
    notify(q);
}

void st_shard_of(int n, int workers, int r, int *first, int *count)
{
    int q = n / workers, extra = n % workers;
    *count = q + (r < extra);
    *first = r * q + (r < extra ? r : extra);
}
