/* The spin-then-sleep barrier and the start gate; see barrier.h. */
#include "base/barrier.h"

#include "base/cores.h"

/* About 10-20 microseconds of polling before sleeping. */
#define SPINS 4000

int st_barrier_init(st_barrier *b, int count)
{
    b->count = count;
    b->spins = count > st_usable_cores() ? 0 : SPINS;
    atomic_init(&b->arrived, 0);
    atomic_init(&b->generation, 0);
    if (pthread_mutex_init(&b->lock, NULL) != 0)
        return -1;
    if (pthread_cond_init(&b->wake, NULL) != 0) {
        pthread_mutex_destroy(&b->lock);
        return -1;
    }
    return 0;
}

void st_barrier_destroy(st_barrier *b)
{
    pthread_cond_destroy(&b->wake);
    pthread_mutex_destroy(&b->lock);
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

void st_barrier_wait(st_barrier *b)
{
    unsigned gen = atomic_load(&b->generation);
    if (atomic_fetch_add(&b->arrived, 1) + 1 == b->count) {
        /* The last one in resets the count before releasing the others, so
         * a thread that runs ahead into the next round counts afresh. */
        atomic_store(&b->arrived, 0);
        pthread_mutex_lock(&b->lock);
        atomic_store(&b->generation, gen + 1);
        pthread_cond_broadcast(&b->wake);
        pthread_mutex_unlock(&b->lock);
        return;
    }
    for (int i = 0; i < b->spins; i++) {
        if (atomic_load(&b->generation) != gen)
            return;
        cpu_relax();
    }
    pthread_mutex_lock(&b->lock);
    while (atomic_load(&b->generation) == gen)
        pthread_cond_wait(&b->wake, &b->lock);
    pthread_mutex_unlock(&b->lock);
}

int st_gate_wait(pthread_mutex_t *lock, pthread_cond_t *moved, const int *state)
{
    pthread_mutex_lock(lock);
    while (*state == 0)
        pthread_cond_wait(moved, lock);
    int go = *state > 0;
    pthread_mutex_unlock(lock);
    return go;
}

void st_gate_set(pthread_mutex_t *lock, pthread_cond_t *moved, int *state, int value)
{
    pthread_mutex_lock(lock);
    *state = value;
    pthread_cond_broadcast(moved);
    pthread_mutex_unlock(lock);
}
