/* Multi-node overlap: all-reduce gradients while backward still runs.
 *
 * The parameter arena is cut into buckets of whole layers, in backward
 * order (output layers first), each at least `bucket_bytes` long (the last
 * may be shorter). Workers report each layer as its backward pass finishes
 * (net.h's layer_done); once every worker of the node has finished every
 * layer of a bucket, a communication thread sums the bucket over the
 * workers (the parameter server's arithmetic, ps.h) and all-reduces it
 * across the nodes, while the workers go on with the layers below. Each
 * bucket size class has a channel (a communicator) of its own, so that
 * `--allreduce auto` with layer granularity probes and chooses an
 * algorithm per class, on that class's messages: class k holds the
 * buckets of at least bucket_bytes x 4^k bytes and less than 4^(k+1) times
 * that (the first class also the last, shorter bucket; the last class
 * everything larger). Buckets go out strictly in order, so every rank
 * issues the same collectives in the same order. After backward the
 * workers wait for the last bucket, then apply the solver to their slices
 * as usual.
 *
 * Every worker reports every layer of every iteration exactly once (a
 * worker that failed, had no samples or met a stop batch reports the rest
 * at once with st_overlap_worker_end), so the collectives of an iteration
 * always complete on every rank and the stop decision stays the
 * scheduler's. With two ranks the sums are those of the non-overlapped
 * run bit for bit (the sum of two floats does not depend on their order);
 * with more, they differ only by the order of the additions.
 *
 * Without a cluster (one node; --pipeline layer's buckets, pipeline.h)
 * there is no thread: the worker whose report completes a bucket sums it
 * over the workers itself, in the same arithmetic. Either way a hook, when
 * given, gets each bucket as soon as it is reduced. */
#ifndef ST_OVERLAP_H
#define ST_OVERLAP_H

#include <stddef.h>

#include "dist/cluster.h"
#include "net/net.h"
#include "parallel/ps.h"
#include "base/status.h"

typedef struct st_overlap st_overlap;

/* Bucket size classes, each with a channel of its own. */
#define ST_OVERLAP_CLASSES 6

/* Bucket b of iteration it is reduced: grads[0]'s floats of the bucket
 * hold its sum over the workers (and the nodes), scaled. Called on the
 * communication thread (worker -1) or by the worker that completed the
 * bucket (no cluster), from t0 (its sum's start) at t1 (now). */
typedef void (*st_overlap_reduced_fn)(void *ctx, int b, long it, int worker, double t0,
                                      double t1);

/* Plan the buckets and, with a cluster c, start the communication thread,
 * which all-reduces on the cluster's channels channel .. channel +
 * ST_OVERLAP_CLASSES - 1 (st_cluster_start_workers must have made them);
 * c NULL: one node, the workers reduce. trace: --trace's recorder, to
 * which the thread's track ("communication": per bucket, its wait, its
 * sum over the workers and its all-reduce, with the bytes and the
 * algorithm) is added, or NULL. reduced: the hook, or NULL. */
st_status st_overlap_create(st_overlap **out, const st_net *net, st_ps *ps, st_cluster *c,
                            int channel, int workers, size_t bucket_bytes, st_trace *trace,
                            st_overlap_reduced_fn reduced, void *reduced_ctx, st_error *err);

/* Stop and join the thread (it must be idle: between BSP runs). */
void st_overlap_free(st_overlap *o);

/* A BSP run's first iteration, before the workers start. */
void st_overlap_start(st_overlap *o, long first);

/* Worker 0, before its compute of iteration it: the factor the node's
 * gradient sum is scaled by (1 / the images of the iteration on every
 * node). */
void st_overlap_begin(st_overlap *o, long it, float scale);

/* Worker w finished layer's backward pass. */
void st_overlap_layer_done(st_overlap *o, int w, int layer);

/* Worker w is done with the iteration's compute: layers it did not report
 * count as done now. */
void st_overlap_worker_end(st_overlap *o, int w);

/* Worker w has no gradient to give this iteration (a stop batch, a
 * failure): the floats of the layers it did not report are made NaN, so
 * that the buckets' sums are not finite on every rank (none applies them,
 * pipeline.h), then they count as done. */
void st_overlap_worker_void(st_overlap *o, int w);

/* Until iteration it's buckets are all reduced. */
void st_overlap_wait(st_overlap *o, long it);

/* Buckets and bytes, for the log. */
int st_overlap_buckets(const st_overlap *o);

/* Bucket b's arena floats [*lo, *hi); the bucket of a layer (-1: it has no
 * parameters). */
void st_overlap_bucket_range(const st_overlap *o, int b, size_t *lo, size_t *hi);
int st_overlap_bucket_of(const st_overlap *o, int layer);

#endif
