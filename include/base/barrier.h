/* A reusable barrier for a fixed number of threads: a short spin (the usual
 * case, where the others arrive within microseconds), then sleep on a
 * condition variable, so a waiting thread never holds a core for long. With
 * more threads than cores there is no spin: a spinning waiter would only
 * keep the thread it waits for off a core. And a start gate, where threads
 * just created wait until their creator says whether all of them exist. */
#ifndef ST_BARRIER_H
#define ST_BARRIER_H

#include <pthread.h>
#include <stdatomic.h>

typedef struct st_barrier {
    int count;
    int spins; /* polls before sleeping */
    atomic_int arrived;
    atomic_uint generation;
    pthread_mutex_t lock;
    pthread_cond_t wake;
} st_barrier;

int st_barrier_init(st_barrier *b, int count);
void st_barrier_destroy(st_barrier *b);

/* Returns when all count threads have called it for this round. */
void st_barrier_wait(st_barrier *b);

/* The start gate: *state, under lock and signalled on moved, is 0 while
 * shut, then 1 (go) or -1 (cancelled: a thread could not be created).
 * st_gate_wait returns whether it went to 1; st_gate_set sets it and wakes
 * the waiters. */
int st_gate_wait(pthread_mutex_t *lock, pthread_cond_t *moved, const int *state);
void st_gate_set(pthread_mutex_t *lock, pthread_cond_t *moved, int *state, int value);

#endif
