/* Where the threads of a run go on the node (--bind): each worker and its
 * intra-op threads on neighbouring cores of one socket, one hardware
 * thread per core while cores last; the cores no worker takes left to the
 * prefetcher and the scheduler. A pure function of a topology (base/
 * topology.h), so that it is tested on synthetic ones; st_bind_self
 * applies a worker's part to the thread that calls it. */
#ifndef ST_PLACEMENT_H
#define ST_PLACEMENT_H

#include "base/status.h"
#include "base/topology.h"

typedef enum st_bind {
    ST_BIND_AUTO,  /* pin when the threads fit the allowed cores, one each */
    ST_BIND_CORES, /* pin; more threads than cores take turns on them, in order */
    ST_BIND_NONE,  /* leave every thread to the OS */
} st_bind;

/* The --bind names, indexed by st_bind, NULL-terminated. */
extern const char *const st_bind_names[];

typedef struct st_placement {
    int bound;      /* the workers are pinned; else text says why not */
    int workers, intra;
    /* Worker w's intra PUs (OS indexes, for affinity calls) at pus [w * intra]:
     * its threads may run on any of them. */
    int *pus;       /* [workers * intra] */
    int *numa;      /* [workers] the NUMA node of each worker's first core (bound) */
    /* The PUs of the cores no worker has, for the prefetcher's threads and
     * the scheduler's (n_free 0: none is left; they run anywhere). */
    int *free_pus;  /* [n_free] */
    int n_free;
    char text[512]; /* one line: where the threads run, or why they are not pinned */
} st_placement;

/* The placement of workers x intra threads on t. share / shares: this
 * process's part of the cores when several ranks share the node's cores
 * (mpirun did not bind them): the share-th of shares equal blocks, in
 * order; 0 / 1: all of them. */
st_status st_place(const st_topology *t, st_bind mode, int workers, int intra, int share,
                   int shares, st_placement *p, st_error *err);
void st_placement_free(st_placement *p);

/* The bytes each NUMA node of t must hold for a bound placement p, into
 * need [t->n_numa]: shared bytes split as the workers' slices are (each
 * worker's 1/workers on its node: the weights and the solver state, which
 * the worker that reduces and updates a slice holds), and per_worker bytes
 * on each worker's node (its gradient arena, activations, kernels). */
void st_placement_numa_need(const st_topology *t, const st_placement *p, double shared,
                            double per_worker, double *need);

/* Pin the calling thread (and the threads it creates later, which inherit
 * its affinity) to the n PUs. */
st_status st_bind_self(const int *pus, int n, st_error *err);

/* A thread's affinity, saved to be given back (up to 1024 cpus). */
typedef struct st_affinity {
    int saved;
    unsigned char mask[128];
} st_affinity;

/* Save the calling thread's affinity into a; give it back to the calling
 * thread (nothing when none was saved). */
void st_affinity_save(st_affinity *a);
void st_affinity_restore(st_affinity *a);

#endif
