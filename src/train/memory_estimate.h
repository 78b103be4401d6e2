/* The memory a training run will take, estimated before anything large is
 * allocated, and checked against what the process may have (base/memlimit.h),
 * so that a run that cannot fit is refused with a message saying what to
 * change instead of being killed by the kernel half-way. --dry-run prints
 * the estimate and the limit.
 *
 * The estimate is of the peak resident memory (VmHWM), in bytes:
 *   base          resident already: the program, its libraries, the network,
 *                 the data read into memory (VmRSS when the estimate is made)
 *   weights       the one shared copy; in bf16 also its bf16 copy, shared
 *                 too (parallel/bf16_weights.h)
 *   solver state  its planes, each the size of the weights
 *   gradients     every worker's arena (st_ps_grad_floats), and with
 *                 subdivisions= its pieces' second arena (accumulate.c)
 *   activations   every worker's activation arena, planned by building its
 *                 replica without the arena (st_sched_plan_memory): outputs,
 *                 their gradients, layer workspaces and scratch as the
 *                 backend lays them out
 *   kernels       what building the workers' kernels adds, measured on that
 *                 plan (worker 0's, and one more beside it)
 *   buffers       the workers' own input buffers
 *   prefetch      the batch ring and the prefetcher's buffers (BSP)
 *   decoding      an image list's decode buffers (stb_image's, for its largest
 *                 image, read from the headers at set-up, or a bound for a list
 *                 too long to read), once per reader decoding at once
 *   all-reduce    multi-node: the scratch of the all-reduce, up to one
 *                 gradient in all
 * Kernels that measure their implementation ("auto") are planned twice:
 * first unmeasured (cheap, nothing large allocated: a run far too large is
 * refused before measuring, whose trial buffers are as large as a
 * worker's tensors), then measured, as the workers would (the choices are
 * kept for them, so they do not measure again), which gives their layouts
 * and counts what measuring leaves resident. --dry-run, a resumed run
 * (the snapshot's choices are read later, with its arenas) and the ranks
 * other than 0 (which take rank 0's) plan them unmeasured only, and say so. */
#ifndef ST_MEMORY_ESTIMATE_H
#define ST_MEMORY_ESTIMATE_H

#include "trainer_internal.h"

typedef struct trainer_memory {
    double base, weights, state, gradients, activations, kernels, buffers, prefetch,
        allreduce;
    double bf16_weights;     /* bf16: the weights' copy the workers share */
    double shared;           /* hybrid: the model-parallel layers' shared buffers */
    double decode;           /* image decoding: the readers' decode buffers at once */
    double trace;            /* --trace: the tracks and their JSON text */
    char decode_what[400];   /* how many of what size, and where that comes from */
    double total;
    double grad_each;        /* the largest worker's gradient arena */
    double act_each;         /* worker 0's activation arena */
    double bf16_out_each;    /* of it, the outputs stored as bf16 (--precision bf16) */
    double kernels_first, kernels_next;
    int unmeasured;          /* kernels that measure were planned unmeasured */
    int limited;             /* a limit is known: */
    double room;             /* what the process may take besides base (its share when
                                ranks share the host) */
    int local_ranks;
    char room_what[400];     /* which limit: memlimit.h's phrase */
} trainer_memory;

/* The estimate for t (set up up to its arenas: options, network, data),
 * and the limit read from the machine. The workers are planned (a few
 * hundred milliseconds on large networks) with their kernels' measured
 * implementations (measure: as the workers would measure them, the
 * choices kept for them) or with the unmeasured ones (m->unmeasured is set
 * when a measured choice could differ). */
st_status trainer_memory_estimate(st_trainer *t, int measure, trainer_memory *m,
                                  st_error *err);

/* The "memory:" and "memory limit:" lines. */
void trainer_memory_log(const st_trainer *t, const trainer_memory *m);

/* Whether the estimate fits the room (or no limit is known). */
int trainer_memory_fits(const trainer_memory *m);

/* ST_EUSAGE when the estimate is more than the room, saying what is needed,
 * what there is and which limit, and what to change; with --force, and in
 * a dry run (which says what the run would do), a warning instead. */
st_status trainer_memory_check(const st_trainer *t, const trainer_memory *m, st_error *err);

#endif
