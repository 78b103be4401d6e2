/* --pipeline layer: CaffeGPI's layer-wise update, pipelined into the next
 * forward, with BSP's arithmetic.
 *
 * The gradient is cut into --overlap's buckets (overlap.h: whole layers, in
 * backward order). As soon as a bucket is reduced (on one node: summed
 * over the workers by the worker whose report completed it; across nodes:
 * also all-reduced, on the overlap's communication thread) the same thread
 * checks it and applies the solver to it, then publishes the bucket's
 * ready counter: the iteration it was applied for. A worker's forward of
 * layer l in iteration it waits only for bucket(l)'s counter to reach
 * it - 1 (st_pipeline_layer_wait), not for the other layers, the other
 * workers or the other ranks: there is no barrier after the update.
 *
 * The same bucket order, the same sums (st_ps_reduce_range, then the
 * all-reduce) and the same elementwise update (st_ps_apply_range) as the
 * run without the pipeline: the weights are the plain run's bit for bit
 * on one node, and --overlap's across nodes (the run whose buckets these
 * are).
 *
 * After a bucket's update, the same thread calls the creator's hook with
 * its range (the scheduler's: the range converted into the weights' bf16
 * copy, bf16_weights.h, before the counter lets a forward read it). A
 * hook that fails stops the run as a non-finite bucket does, with its
 * message.
 *
 * A bucket whose reduced gradient is not finite is not applied (every rank
 * sees the same sum, so every rank skips it) and the iteration is bad: the
 * workers learn it at the next iteration's agreement (st_pipeline_wait)
 * and stop, the run diverged. A worker with no gradient to give (a stop
 * batch, a failure) makes its unreported layers NaN (st_overlap_worker_void)
 * so that no rank applies what it did not compute.
 *
 * Ownership: the pipeline creates and frees the overlap handle it reduces
 * with; st_pipeline_overlap lends it to the scheduler's workers. */
#ifndef ST_PIPELINE_H
#define ST_PIPELINE_H

#include "base/status.h"
#include "base/trace.h"
#include "dist/cluster.h"
#include "net/net.h"
#include "ops/solver.h"
#include "parallel/overlap.h"
#include "parallel/ps.h"

typedef struct st_pipeline st_pipeline;

/* What follows a bucket's update, on the thread that applied it: worker
 * (or -1: the communication thread), the bucket's arena range [lo, hi). */
typedef st_status (*st_pipeline_applied_fn)(void *ctx, int worker, size_t lo, size_t hi,
                                            st_error *err);

/* Buckets of at least bucket_bytes over net's parameters in ps, reduced
 * over `workers` workers and, with a cluster c, all-reduced on its channels
 * from `channel` (st_overlap_create's); the solver's update of a bucket on
 * `threads` threads of the thread that applies it (one node: the worker's
 * intra-op threads; across nodes the communication thread applies alone),
 * then applied(applied_ctx, ...) if not NULL. */
st_status st_pipeline_create(st_pipeline **out, const st_net *net, st_ps *ps, st_cluster *c,
                             int channel, int workers, size_t bucket_bytes, st_trace *trace,
                             const st_solver_cfg *solver, int threads,
                             st_pipeline_applied_fn applied, void *applied_ctx, st_error *err);
void st_pipeline_free(st_pipeline *p);

/* Its buckets, for the workers' reports (owned by the pipeline). */
st_overlap *st_pipeline_overlap(const st_pipeline *p);

/* A BSP run's first iteration, before the workers start: every bucket
 * counts as applied through first - 1. */
void st_pipeline_start(st_pipeline *p, long first);

/* Before the forward of layer in iteration it: until the layer's bucket is
 * applied through it - 1. Returns the seconds waited. */
double st_pipeline_layer_wait(st_pipeline *p, int layer, long it);

/* Worker w finished its compute of iteration it at time t (the node's
 * backward ends with its last worker's). */
void st_pipeline_computed(st_pipeline *p, long it, double t);

/* Until every bucket of iteration it is applied (or skipped). Returns
 * whether all were finite and their hooks succeeded since the run's start
 * up to it (the same answer for every caller: buckets come in order); if
 * not, *bad_it gets the first bad iteration, *why ST_EDIVERGED with what
 * (a text of len bytes) naming the first non-finite gradient found, or
 * the hook's failure and its message. */
int st_pipeline_wait(st_pipeline *p, long it, long *bad_it, st_status *why, char *what,
                     size_t len);

/* After st_pipeline_wait(it): iteration it's buckets' reduction,
 * all-reduce and update, in seconds: *busy in all, *behind_backward of it
 * while the node's workers still computed it. Returns 1 if every bucket
 * of it was applied, 0 if none was (a worker gave no gradient, or none
 * was finite), -1 if some were. */
int st_pipeline_split(st_pipeline *p, long it, double *busy, double *behind_backward);

#endif
