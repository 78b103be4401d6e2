/* Gradient accumulation ([net] subdivisions=S, Darknet's meaning): each
 * worker runs its shard of a BSP batch in S pieces, one after the other,
 * through a replica sized for the largest piece, and sums the pieces'
 * gradients in its own gradient arena; the batch then has one reduction and
 * one solver update, as undivided.
 *
 * Why each worker's shard is split, not the batch into S pieces each split
 * over the workers: a worker's images are then the same as in the undivided
 * run (the same shard, the same sample indices for dropout), and only the
 * sum over its shard is cut into S partial sums, added in piece order; the
 * reduction over the workers is unchanged. Splitting the batch first would
 * give every worker other images and change both sums. So one worker with
 * S pieces computes exactly what S workers of one piece each compute
 * (piece k is worker k's shard: st_shard_of cuts both alike, and
 * grads = ((p0 + p1) + p2) ... is st_ps_reduce's order over the workers):
 * the same bits where the backend's gradient of a piece depends only on
 * the piece (the ref backend; tests/e2e/test_subdivisions.sh). Against the
 * undivided run with the same workers, the sum over a shard is associated
 * otherwise: the weights agree to rounding (1e-5 after iterations of a
 * network where nothing switches, tests/fixtures/lenet-smooth.cfg).
 *
 * What differs by design: batch norm normalises each piece with the
 * piece's own statistics (as it already does each worker's shard), so a
 * network with batch norm trains differently with other S.
 *
 * State: one extra gradient arena per worker, written by the backward of
 * pieces 1 .. S-1 (backward overwrites the arena it is given; piece 0
 * writes the worker's own arena directly). */
#include <stdlib.h>

#include "base/memory.h"
#include "sched_internal.h"

struct sched_accum {
    int pieces;     /* S > 1 */
    int workers;
    size_t *floats; /* [workers] of each worker's arena (st_ps_grad_floats) */
    float **piece;  /* [workers] a piece's gradient, [floats[w]] */
};

size_t sched_accum_bytes(const st_sched_opts *o, const st_param_table *t)
{
    return o->subdivisions > 1 ? t->count * sizeof(float) : 0;
}

void sched_accum_free(sched_accum *a)
{
    if (!a)
        return;
    for (int w = 0; a->piece && w < a->workers; w++)
        st_free_aligned(a->piece[w]);
    free(a->piece);
    free(a->floats);
    free(a);
}

st_status sched_accum_create(sched_accum **out, const st_sched_opts *o, const st_ps *ps,
                             st_error *err)
{
    *out = NULL;
    if (o->subdivisions <= 1)
        return ST_OK;
    if (o->hybrid || o->sync != ST_SYNC_BSP || o->overlap)
        return st_fail(err, ST_EINTERNAL, "subdivisions=%d: accumulation is data-parallel "
                       "BSP without --overlap", o->subdivisions);
    sched_accum *a = st_calloc(1, sizeof *a, "gradient accumulation", err);
    if (!a)
        return ST_ENOMEM;
    a->pieces = o->subdivisions;
    a->workers = ps->n_workers;
    a->floats = st_calloc((size_t)a->workers, sizeof *a->floats, "gradient accumulation", err);
    a->piece = st_calloc((size_t)a->workers, sizeof *a->piece, "gradient accumulation", err);
    int ok = a->floats && a->piece;
    for (int w = 0; ok && w < a->workers; w++) {
        a->floats[w] = st_ps_grad_floats(ps->table, w, ps->shared_from, ps->tail_applied);
        ok = (a->piece[w] = st_alloc_aligned((a->floats[w] ? a->floats[w] : 1) * sizeof(float),
                                             "piece gradients", err)) != NULL;
    }
    if (!ok) {
        sched_accum_free(a);
        return ST_ENOMEM;
    }
    *out = a;
    return ST_OK;
}

/* grads[i] += piece[i]: elementwise, so the same floats on any number of
 * threads. */
static void add_piece(float *grads, const float *piece, size_t n, int threads)
{
#pragma omp parallel for num_threads(threads > 0 ? threads : 1) schedule(static)
    for (size_t i = 0; i < n; i++)
        grads[i] += piece[i];
}

st_status sched_accum_compute(sched_accum *a, st_worker *w, const float *weights, float *grads,
                              const st_shard *shard, const st_step_info *info, double *loss)
{
    int S = a ? a->pieces : 1;
    size_t per = st_shape_count(w->s->net->input);
    *loss = 0.0;
    st_status st = ST_OK;
    for (int k = 0; k < S && st == ST_OK; k++) {
        int first, count;
        st_shard_of(shard->n, S, k, &first, &count);
        if (count == 0) /* a short shard (an epoch's last batch): fewer pieces */
            break;
        st_shard piece = {count, shard->x + (size_t)first * per, shard->labels + first,
                          shard->sample0 + first, shard->batch_first + first, shard->batch_n};
        float *into = k == 0 ? grads : a->piece[w->id];
        double piece_loss = 0.0;
        st = st_replica_forward(&w->replica, weights, &piece, info, &piece_loss, &w->err);
        if (st == ST_OK)
            st = st_replica_backward(&w->replica, weights, into, &piece, info, NULL, &w->err);
        if (st == ST_OK && k > 0)
            add_piece(grads, into, a->floats[w->id], w->s->o.intra);
        *loss += piece_loss;
    }
    return st;
}
