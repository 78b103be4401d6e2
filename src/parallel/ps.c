/* Parameter arenas, slices, reduction and update; see ps.h. */
#include "parallel/ps.h"

#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "base/arena.h"
#include "base/memory.h"

void st_ps_free(st_ps *ps)
{
    for (int r = 0; ps->slice_lock && r < ps->n_workers; r++)
        pthread_mutex_destroy(&ps->slice_lock[r]);
    free(ps->slice_lock);
    st_free_aligned(ps->weights);
    st_free_aligned(ps->state);
    for (int w = 0; ps->grads && w < ps->n_workers; w++)
        st_free_aligned(ps->grads[w]);
    free(ps->grads);
    free(ps->slice);
    memset(ps, 0, sizeof *ps);
}

size_t st_ps_grad_floats(const st_param_table *t, int worker, size_t shared_from,
                         int tail_applied)
{
    return shared_from > t->count || (worker == 0 && !tail_applied) ? t->count : shared_from;
}

st_status st_ps_init(st_ps *ps, const st_param_table *t, int n_workers, int state_planes,
                     st_error *err)
{
    return st_ps_init_split(ps, t, n_workers, state_planes, t->count, 0, err);
}

st_status st_ps_init_split(st_ps *ps, const st_param_table *t, int n_workers,
                           int state_planes, size_t shared_from, int tail_applied,
                           st_error *err)
{
    memset(ps, 0, sizeof *ps);
    ps->table = t;
    ps->count = t->count;
    ps->shared_from = shared_from < t->count ? shared_from : t->count;
    ps->tail_applied = tail_applied && ps->shared_from < ps->count;
    ps->n_workers = n_workers;
    ps->state_planes = state_planes;
    size_t bytes = ps->count * sizeof(float);
    ps->weights = st_alloc_aligned(bytes, "weights", err);
    ps->state = st_alloc_aligned(bytes * (size_t)state_planes, "solver state", err);
    ps->grads = st_calloc((size_t)n_workers, sizeof *ps->grads, "gradient table", err);
    ps->slice = st_calloc((size_t)n_workers + 1, sizeof *ps->slice, "slices", err);
    ps->slice_lock = st_calloc((size_t)n_workers, sizeof *ps->slice_lock, "slice locks", err);
    if (!ps->weights || !ps->state || !ps->grads || !ps->slice || !ps->slice_lock) {
        st_ps_free(ps);
        return ST_ENOMEM;
    }
    for (int r = 0; r < n_workers; r++)
        pthread_mutex_init(&ps->slice_lock[r], NULL);
    for (int w = 0; w < n_workers; w++)
        if (!(ps->grads[w] = st_alloc_aligned(st_ps_grad_floats(t, w, ps->shared_from,
                                                                 ps->tail_applied) *
                                                  sizeof(float),
                                              "worker gradients", err))) {
            st_ps_free(ps);
            return ST_ENOMEM;
        }
    /* Equal shares of whole cache lines of what the reduction updates;
     * trailing slices may be empty when there are more workers than lines. */
    size_t updated = ps->tail_applied ? ps->shared_from : ps->count;
    size_t lines = st_align_up(updated, ST_PARAM_ALIGN) / ST_PARAM_ALIGN;
    for (int r = 0; r <= n_workers; r++) {
        size_t b = lines * (size_t)r / (size_t)n_workers * ST_PARAM_ALIGN;
        ps->slice[r] = b < updated ? b : updated;
    }
    return ST_OK;
}

void st_ps_sub_range(size_t b, size_t e, int t, int parts, size_t *sb, size_t *se)
{
    size_t lines = (e - b + ST_PARAM_ALIGN - 1) / ST_PARAM_ALIGN;
    size_t lo = b + lines * (size_t)t / (size_t)parts * ST_PARAM_ALIGN;
    size_t hi = b + lines * (size_t)(t + 1) / (size_t)parts * ST_PARAM_ALIGN;
    *sb = lo < e ? lo : e;
    *se = hi < e ? hi : e;
}

void st_ps_reduce_range(st_ps *ps, size_t b, size_t e, float scale)
{
    float *sum = ps->grads[0];
    size_t summed_end = e < ps->shared_from ? e : ps->shared_from;
    for (int w = 1; w < ps->n_workers; w++) {
        const float *g = ps->grads[w];
        for (size_t i = b; i < summed_end; i++)
            sum[i] += g[i];
    }
    for (size_t i = b; i < e; i++)
        sum[i] *= scale;
}

void st_ps_reduce(st_ps *ps, int r, float scale, int threads)
{
    size_t b = ps->slice[r], e = ps->slice[r + 1];
    if (threads <= 1) {
        st_ps_reduce_range(ps, b, e, scale);
        return;
    }
#pragma omp parallel num_threads(threads)
    {
        size_t sb, se;
        st_ps_sub_range(b, e, omp_get_thread_num(), omp_get_num_threads(), &sb, &se);
        st_ps_reduce_range(ps, sb, se, scale);
    }
}

void st_ps_apply(st_ps *ps, int r, const st_solver_cfg *c, float lr, long iter, int threads)
{
    size_t b = ps->slice[r], e = ps->slice[r + 1];
    if (threads <= 1) {
        st_solver_update(c, ps->table, lr, iter, b, e, ps->weights, ps->state, ps->count,
                         ps->grads[0]);
        return;
    }
#pragma omp parallel num_threads(threads)
    {
        size_t sb, se;
        st_ps_sub_range(b, e, omp_get_thread_num(), omp_get_num_threads(), &sb, &se);
        st_solver_update(c, ps->table, lr, iter, sb, se, ps->weights, ps->state, ps->count,
                         ps->grads[0]);
    }
}

void st_ps_apply_range(st_ps *ps, size_t b, size_t e, float *state, size_t stride,
                       const st_solver_cfg *c, float lr, long iter, int threads)
{
    if (threads <= 1) {
        st_solver_update_at(c, ps->table, lr, iter, b, e, ps->weights, state, stride,
                            ps->grads[0]);
        return;
    }
#pragma omp parallel num_threads(threads)
    {
        size_t sb, se;
        st_ps_sub_range(b, e, omp_get_thread_num(), omp_get_num_threads(), &sb, &se);
        if (sb < se)
            st_solver_update_at(c, ps->table, lr, iter, sb, se, ps->weights, state + (sb - b),
                                stride, ps->grads[0]);
    }
}

/* Floats per chunk of the fused pass: the workers' gradients, weights and
 * solver state of a chunk stay within a core's private cache. */
#define FUSED_CHUNK 4096

static int reduce_apply_range(st_ps *ps, size_t b, size_t e, float scale,
                              const st_solver_cfg *c, float lr, long iter)
{
    for (size_t cb = b; cb < e; cb += FUSED_CHUNK) {
        size_t ce = e - cb > FUSED_CHUNK ? cb + FUSED_CHUNK : e;
        st_ps_reduce_range(ps, cb, ce, scale);
        if (!st_all_finite(ps->grads[0] + cb, ce - cb))
            return 0;
        st_solver_update(c, ps->table, lr, iter, cb, ce, ps->weights, ps->state, ps->count,
                         ps->grads[0]);
    }
    return 1;
}

static int apply_given_range(st_ps *ps, size_t b, size_t e, float *g, float scale,
                             const st_solver_cfg *c, float lr, long iter)
{
    for (size_t cb = b; cb < e; cb += FUSED_CHUNK) {
        size_t ce = e - cb > FUSED_CHUNK ? cb + FUSED_CHUNK : e;
        float *gc = g + (cb - b);
        for (size_t i = 0; i < ce - cb; i++)
            gc[i] *= scale;
        if (!st_all_finite(gc, ce - cb))
            return 0;
        st_solver_update_given(c, ps->table, lr, iter, cb, ce, ps->weights, ps->state,
                               ps->count, gc);
    }
    return 1;
}

int st_ps_apply_given(st_ps *ps, size_t b, size_t e, float *g, float scale,
                      const st_solver_cfg *c, float lr, long iter, int threads)
{
    if (threads <= 1)
        return apply_given_range(ps, b, e, g, scale, c, lr, iter);
    int finite = 1;
#pragma omp parallel num_threads(threads) reduction(&& : finite)
    {
        size_t sb, se;
        st_ps_sub_range(b, e, omp_get_thread_num(), omp_get_num_threads(), &sb, &se);
        finite = apply_given_range(ps, sb, se, g + (sb - b), scale, c, lr, iter);
    }
    return finite;
}

int st_ps_reduce_apply(st_ps *ps, int r, float scale, const st_solver_cfg *c, float lr,
                       long iter, int threads)
{
    size_t b = ps->slice[r], e = ps->slice[r + 1];
    if (threads <= 1)
        return reduce_apply_range(ps, b, e, scale, c, lr, iter);
    int finite = 1;
#pragma omp parallel num_threads(threads) reduction(&& : finite)
    {
        size_t sb, se;
        st_ps_sub_range(b, e, omp_get_thread_num(), omp_get_num_threads(), &sb, &se);
        finite = reduce_apply_range(ps, sb, se, scale, c, lr, iter);
    }
    return finite;
}

st_status st_ps_apply_own(st_ps *ps, int w, float scale, const st_solver_cfg *c, float lr,
                          long iter, int threads, st_ps_applied_fn applied, void *ctx)
{
    st_status st = ST_OK;
    float *g = ps->grads[w];
    for (int k = 0; k < ps->n_workers; k++) {
        int r = (w + k) % ps->n_workers; /* start at its own slice: less contention */
        size_t b = ps->slice[r], e = ps->slice[r + 1];
        pthread_mutex_lock(&ps->slice_lock[r]);
        for (size_t i = b; i < e; i++)
            g[i] *= scale;
        if (threads <= 1) {
            st_solver_update(c, ps->table, lr, iter, b, e, ps->weights, ps->state, ps->count, g);
        } else {
#pragma omp parallel num_threads(threads)
            {
                size_t sb, se;
                st_ps_sub_range(b, e, omp_get_thread_num(), omp_get_num_threads(), &sb, &se);
                st_solver_update(c, ps->table, lr, iter, sb, se, ps->weights, ps->state,
                                 ps->count, g);
            }
        }
        if (applied && st == ST_OK)
            st = applied(ctx, b, e);
        pthread_mutex_unlock(&ps->slice_lock[r]);
    }
    return st;
}
