/* The shared-memory parameter server: one copy of the weights and solver
 * state, one gradient arena per worker, and the fixed slices the workers
 * aggregate and update.
 *
 * Slice r is a contiguous, cache-line aligned range of the parameter arena.
 * After backward, worker r sums slice r of every worker's gradient (always
 * in worker order 0..T-1, so the result does not depend on timing), scales
 * it, and applies the solver to slice r of the weights and solver state. The
 * summed gradient lands in worker 0's arena.
 *
 * Model-parallel layers (--parallel hybrid) compute their parameters'
 * gradients once, over the whole batch; they form the arena's tail
 * [shared_from, count), which the other workers' arenas do not have. Across
 * nodes (or with the update on a backend's device) the layers write them
 * into grads[0], and the reduction only scales them. On one node, with the
 * update on the host, the layers apply them as backward computes them
 * (tail_applied, st_ps_apply_given): no arena holds them, and the slices
 * span [0, shared_from).
 *
 * Without a global barrier (bounded staleness, asynchronous), each worker
 * applies its own gradient to every slice in turn, holding that slice's
 * lock, so updates of one slice never interleave. */
#ifndef ST_PS_H
#define ST_PS_H

#include <pthread.h>
#include <stddef.h>

#include "ops/params.h"
#include "ops/solver.h"
#include "base/status.h"

typedef struct st_ps {
    const st_param_table *table;
    size_t count;        /* floats per arena */
    float *weights;      /* [count], shared by every worker */
    float *state;        /* [state_planes * count] solver state, plane k at k * count */
    int state_planes;
    int n_workers;
    float **grads;       /* grads[0] [count] ([shared_from] with tail_applied), the
                            others [shared_from] */
    size_t shared_from;  /* floats every worker's gradient arena has */
    int tail_applied;    /* the model-parallel layers apply the tail's gradients */
    size_t *slice;       /* [n_workers + 1] slice boundaries */
    pthread_mutex_t *slice_lock; /* [n_workers] for st_ps_apply_own */
} st_ps;

st_status st_ps_init(st_ps *ps, const st_param_table *t, int n_workers, int state_planes,
                     st_error *err);
/* The same with the model-parallel tail from shared_from (<= t->count),
 * its gradients applied by the layers when tail_applied. */
st_status st_ps_init_split(st_ps *ps, const st_param_table *t, int n_workers,
                           int state_planes, size_t shared_from, int tail_applied,
                           st_error *err);
void st_ps_free(st_ps *ps);

/* The floats of worker w's gradient arena for the table t with the
 * model-parallel tail from shared_from (t->count: none), its gradients
 * applied by the layers when tail_applied: the one place that says it, for
 * st_ps_init_split and the memory estimate made before it. Worker 0's spans
 * every parameter unless tail_applied, the others' end at shared_from. */
size_t st_ps_grad_floats(const st_param_table *t, int worker, size_t shared_from,
                         int tail_applied);

/* Part t of `parts` of arena floats [b, e), in whole cache lines, into
 * [*sb, *se) (empty parts at the end when there are more parts than
 * lines). */
void st_ps_sub_range(size_t b, size_t e, int t, int parts, size_t *sb, size_t *se);

/* grads[0][slice r] = scale * sum over workers of grads[w][slice r] (of
 * grads[0] alone from shared_from on), on
 * `threads` threads of the calling worker (its intra-op threads). The work
 * is elementwise, so the result does not depend on threads. */
void st_ps_reduce(st_ps *ps, int r, float scale, int threads);

/* The same arithmetic on arena floats [b, e), on the calling thread: the
 * multi-node overlap reduces layer buckets as backward produces them. */
void st_ps_reduce_range(st_ps *ps, size_t b, size_t e, float scale);

/* st_ps_reduce, the finiteness check and st_ps_apply of slice r in one
 * pass over memory, chunk by chunk (each chunk's sums still in cache when
 * the solver reads them): the same floats as the three separate passes.
 * Returns whether the slice's reduced gradient is finite; the chunks from
 * the first non-finite one on are not applied (the weights stay finite;
 * the run is to stop, as after the separate check). */
int st_ps_reduce_apply(st_ps *ps, int r, float scale, const st_solver_cfg *c, float lr,
                       long iter, int threads);

/* Apply the solver's update of iteration iter (from 0; Adam's bias
 * correction uses it) to slice r with the reduced gradient, on `threads`. */
void st_ps_apply(st_ps *ps, int r, const st_solver_cfg *c, float lr, long iter, int threads);

/* Scale g, the gradient of arena floats [b, e) summed over the batch and
 * held apart from the arenas (g[j - b] is float j's), by scale and apply it
 * as the update of iteration iter, chunk by chunk as st_ps_reduce_apply
 * (the same floats as the tail's reduction and update in grads[0]), on
 * `threads` threads of the calling worker. Returns whether the scaled
 * gradient is finite; on each thread's part, the chunks from the first
 * non-finite one on are not applied. */
int st_ps_apply_given(st_ps *ps, size_t b, size_t e, float *g, float scale,
                      const st_solver_cfg *c, float lr, long iter, int threads);

/* Apply the update of iteration iter to arena floats [b, e) with the
 * reduced gradient, their solver state held apart from ps->state: plane k
 * of float j at state[k * stride + j - b] (the partitioned state of
 * ps_part.h), on `threads`. */
void st_ps_apply_range(st_ps *ps, size_t b, size_t e, float *state, size_t stride,
                       const st_solver_cfg *c, float lr, long iter, int threads);

/* Scale worker w's own gradient and apply it, as the update of iteration
 * iter, to every slice, each under its lock (bounded-staleness and
 * asynchronous training); then, still under the lock, applied(ctx, b, e)
 * with the slice's range [b, e), unless NULL or an earlier call failed:
 * its first failure is returned (the update itself cannot fail). */
typedef st_status (*st_ps_applied_fn)(void *ctx, size_t b, size_t e);
st_status st_ps_apply_own(st_ps *ps, int w, float scale, const st_solver_cfg *c, float lr,
                          long iter, int threads, st_ps_applied_fn applied, void *ctx);

#endif
