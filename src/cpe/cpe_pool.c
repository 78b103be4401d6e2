/* Max and average pooling, forward and backward, as CPE programs over a
 * whole batch of NCHW floats: the n c planes of all samples in one launch.
 *
 * Semantics: those of st_pool_desc and the reference backend
 * (src/backends/ref/ref_pool.c), computed the same way so results are
 * bitwise equal: a window's valid positions only; max keeps the first
 * maximum in row-major order (strictly greater replaces) and records its
 * offset within the plane in argmax (-1, output 0, for an empty window);
 * average sums the valid positions in row-major order in float and divides
 * by their count. Backward starts from 0 (or diff_src, accumulating) and
 * adds the outputs' contributions in output order, as the reference does.
 *
 * Units of work, dealt round-robin to the CPEs (unit u to CPE u mod 64),
 * planes numbered over the batch (sample-major):
 *   whole planes: a group of consecutive planes, when a plane fits the LDM
 *     and each CPE's share of the rows (n c rows / 64) is at least a plane;
 *   bands: otherwise a band of rows of one plane - output rows forward
 *     (with the input rows their windows reach), input rows backward (with
 *     the output rows whose windows reach them), so no two CPEs write the
 *     same element.
 * The host sizes units so each CPE gets about its share of rows and two
 * units fit the LDM (double buffering: the next unit's gets are issued
 * before the current one is computed), else one; a geometry for which not
 * even one row fits is refused with ST_EINPUT. Every unit's transfers are
 * contiguous: its input rows, its output rows (and argmax), and backward
 * diff_src's rows (fetched when accumulating, zeroed otherwise).
 *
 * Cost declared: forward, per output, the valid window positions as flops
 * (comparisons or additions) plus the division of an average; backward,
 * one flop per gradient added to an input position plus the division of an
 * average, and zeroing diff_src as LDM moves. DMA: input, output (and
 * argmax) once each, plus the rows bands share at their edges. */
#include <float.h>
#include <limits.h>
#include <string.h>

#include "cpe_kernel_common.h"

/* Buffers of a unit: forward in, out, argmax; backward diff_src, diff_dst,
 * argmax. */
enum { BUF_PLANE, BUF_GRID, BUF_ARGMAX, POOL_BUFS };

typedef struct pool_args {
    st_pool_alg alg;
    int c, ih, iw, oh, ow, kh, kw, sh, sw, ph, pw;
    size_t planes;     /* n c */
    const float *src;  /* forward: src; backward: diff_dst */
    float *dst;        /* forward: dst; backward: diff_src */
    int *argmax;       /* forward: written when not NULL; backward: read (max) */
    int accumulate;    /* backward */
    /* The plan (host). */
    size_t group;      /* planes per unit; 0: bands */
    int band;          /* rows per band (output rows forward, input rows backward) */
    size_t units;
    int slots;
    size_t words[POOL_BUFS]; /* 4-byte words per buffer */
} pool_args;

typedef struct pool_unit {
    size_t plane, planes;
    int row0, row1;     /* forward: output rows; backward: input rows */
    int other0, other1; /* forward: input rows; backward: output rows */
} pool_unit;

typedef struct pool_slot {
    float *plane, *grid;
    int *argmax;
    pool_unit u;
    st_cpe_reply get, put;
} pool_slot;

/* Valid window rows [*y0, *y1) and columns [*x0, *x1) of output (oy, ox),
 * as ref_pool.c's window(). */
static void window(const pool_args *a, int oy, int ox, int *y0, int *y1, int *x0, int *x1)
{
    int ys = oy * a->sh - a->ph, xs = ox * a->sw - a->pw;
    *y0 = ys < 0 ? 0 : ys;
    *x0 = xs < 0 ? 0 : xs;
    *y1 = ys + a->kh > a->ih ? a->ih : ys + a->kh;
    *x1 = xs + a->kw > a->iw ? a->iw : xs + a->kw;
}

/* Input rows the windows of output rows [oy0, oy1) reach (may be empty). */
static void input_rows_of(const pool_args *a, int oy0, int oy1, int *y0, int *y1)
{
    int top = oy0 * a->sh - a->ph, bottom = (oy1 - 1) * a->sh - a->ph + a->kh;
    *y0 = top < 0 ? 0 : top;
    *y1 = bottom > a->ih ? a->ih : bottom;
    if (*y1 < *y0)
        *y1 = *y0;
}

/* Output rows whose windows reach input rows [y0, y1) (may be empty). */
static void output_rows_of(const pool_args *a, int y0, int y1, int *oy0, int *oy1)
{
    int low = y0 + a->ph - a->kh;
    *oy0 = low < 0 ? 0 : low / a->sh + 1;
    *oy1 = (y1 - 1 + a->ph) / a->sh + 1;
    if (*oy1 > a->oh)
        *oy1 = a->oh;
    if (*oy1 < *oy0)
        *oy1 = *oy0;
}

static pool_unit unit_at(const pool_args *a, size_t u, int backward)
{
    pool_unit w;
    int rows = backward ? a->ih : a->oh;
    if (a->group > 0) {
        w.plane = u * a->group;
        w.planes = cpe_min_size(a->group, a->planes - w.plane);
        w.row0 = 0;
        w.row1 = rows;
        w.other0 = 0;
        w.other1 = backward ? a->oh : a->ih;
        return w;
    }
    size_t bands = (size_t)((rows + a->band - 1) / a->band);
    w.plane = u / bands;
    w.planes = 1;
    w.row0 = (int)(u % bands) * a->band;
    w.row1 = w.row0 + a->band < rows ? w.row0 + a->band : rows;
    if (backward)
        output_rows_of(a, w.row0, w.row1, &w.other0, &w.other1);
    else
        input_rows_of(a, w.row0, w.row1, &w.other0, &w.other1);
    return w;
}

static void slots_alloc(st_cpe *cpe, const pool_args *a, pool_slot slot[2])
{
    memset(slot, 0, 2 * sizeof *slot);
    for (int s = 0; s < a->slots; s++) {
        slot[s].plane = st_cpe_ldm_alloc(cpe, a->words[BUF_PLANE] * 4, "plane rows");
        slot[s].grid = st_cpe_ldm_alloc(cpe, a->words[BUF_GRID] * 4, "output rows");
        slot[s].argmax = st_cpe_ldm_alloc(cpe, a->words[BUF_ARGMAX] * 4, "argmax rows");
    }
}

/* ---- forward ---- */

static void forward_issue(st_cpe *cpe, const pool_args *a, pool_slot *slot, size_t u)
{
    st_cpe_dma_wait(cpe, &slot->put, slot->put.count); /* its buffers are free */
    slot->u = unit_at(a, u, 0);
    const pool_unit *w = &slot->u;
    cpe_reply_reset(&slot->get);
    size_t rows = (size_t)(w->other1 - w->other0);
    if (rows > 0)
        st_cpe_dma_get(cpe, slot->plane,
                       a->src + (w->plane * (size_t)a->ih + (size_t)w->other0) * (size_t)a->iw,
                       w->planes * rows * (size_t)a->iw * sizeof(float), &slot->get);
}

static void forward_compute(st_cpe *cpe, const pool_args *a, pool_slot *slot)
{
    const pool_unit *w = &slot->u;
    size_t in_plane = (size_t)(w->other1 - w->other0) * (size_t)a->iw;
    size_t out_plane = (size_t)(w->row1 - w->row0) * (size_t)a->ow;
    uint64_t flops = 0;
    for (size_t p = 0; p < w->planes; p++) {
        const float *x = slot->plane + p * in_plane;
        float *y = slot->grid + p * out_plane;
        int *am = slot->argmax + p * out_plane;
        for (int oy = w->row0; oy < w->row1; oy++)
            for (int ox = 0; ox < a->ow; ox++) {
                int y0, y1, x0, x1;
                window(a, oy, ox, &y0, &y1, &x0, &x1);
                size_t o = (size_t)(oy - w->row0) * (size_t)a->ow + (size_t)ox;
                int cnt = y1 > y0 && x1 > x0 ? (y1 - y0) * (x1 - x0) : 0;
                flops += (uint64_t)cnt;
                if (a->alg == ST_POOL_MAX) {
                    float best = -FLT_MAX;
                    int at = -1;
                    for (int iy = y0; iy < y1; iy++)
                        for (int ix = x0; ix < x1; ix++) {
                            float v = x[(size_t)(iy - w->other0) * (size_t)a->iw + (size_t)ix];
                            if (at < 0 || v > best) {
                                best = v;
                                at = iy * a->iw + ix;
                            }
                        }
                    y[o] = at < 0 ? 0.0f : best;
                    if (a->argmax)
                        am[o] = at;
                } else {
                    float s = 0.0f;
                    for (int iy = y0; iy < y1; iy++)
                        for (int ix = x0; ix < x1; ix++)
                            s += x[(size_t)(iy - w->other0) * (size_t)a->iw + (size_t)ix];
                    y[o] = cnt > 0 ? s / (float)cnt : 0.0f;
                    flops += cnt > 0;
                }
            }
    }
    cpe_scalar_loop(cpe, flops, 1.0, 1.0, 1.0, 1.0);
}

static void forward_put(st_cpe *cpe, const pool_args *a, pool_slot *slot)
{
    const pool_unit *w = &slot->u;
    size_t at = (w->plane * (size_t)a->oh + (size_t)w->row0) * (size_t)a->ow;
    size_t count = w->planes * (size_t)(w->row1 - w->row0) * (size_t)a->ow;
    cpe_reply_reset(&slot->put);
    st_cpe_dma_put(cpe, a->dst + at, slot->grid, count * sizeof(float), &slot->put);
    if (a->argmax && a->alg == ST_POOL_MAX)
        st_cpe_dma_put(cpe, a->argmax + at, slot->argmax, count * sizeof(int), &slot->put);
}

static void pool_forward_kernel(st_cpe *cpe, void *args)
{
    const pool_args *a = cpe_kernel_args(cpe, args, sizeof(pool_args));
    pool_slot slot[2];
    slots_alloc(cpe, a, slot);
    size_t first = (size_t)st_cpe_id(cpe);
    if (first < a->units)
        forward_issue(cpe, a, &slot[0], first);
    for (size_t u = first, k = 0; u < a->units; u += ST_CPE_COUNT, k++) {
        pool_slot *cur = &slot[k % (size_t)a->slots];
        size_t next = u + ST_CPE_COUNT;
        if (a->slots == 2 && next < a->units)
            forward_issue(cpe, a, &slot[(k + 1) % 2], next);
        st_cpe_dma_wait(cpe, &cur->get, cur->get.count);
        forward_compute(cpe, a, cur);
        forward_put(cpe, a, cur);
        if (a->slots == 1 && next < a->units)
            forward_issue(cpe, a, cur, next);
    }
    for (int s = 0; s < a->slots; s++)
        st_cpe_dma_wait(cpe, &slot[s].put, slot[s].put.count);
}

/* ---- backward ---- */

static void backward_issue(st_cpe *cpe, const pool_args *a, pool_slot *slot, size_t u)
{
    st_cpe_dma_wait(cpe, &slot->put, slot->put.count); /* its diff_src rows went out */
    slot->u = unit_at(a, u, 1);
    const pool_unit *w = &slot->u;
    cpe_reply_reset(&slot->get);
    size_t out_rows = (size_t)(w->other1 - w->other0);
    if (out_rows > 0) {
        size_t at = (w->plane * (size_t)a->oh + (size_t)w->other0) * (size_t)a->ow;
        size_t count = w->planes * out_rows * (size_t)a->ow;
        st_cpe_dma_get(cpe, slot->grid, a->src + at, count * sizeof(float), &slot->get);
        if (a->alg == ST_POOL_MAX)
            st_cpe_dma_get(cpe, slot->argmax, a->argmax + at, count * sizeof(int), &slot->get);
    }
    if (a->accumulate)
        st_cpe_dma_get(cpe, slot->plane,
                       a->dst + (w->plane * (size_t)a->ih + (size_t)w->row0) * (size_t)a->iw,
                       w->planes * (size_t)(w->row1 - w->row0) * (size_t)a->iw * sizeof(float),
                       &slot->get);
}

static void backward_compute(st_cpe *cpe, const pool_args *a, pool_slot *slot)
{
    const pool_unit *w = &slot->u;
    size_t in_plane = (size_t)(w->row1 - w->row0) * (size_t)a->iw;
    size_t out_plane = (size_t)(w->other1 - w->other0) * (size_t)a->ow;
    if (!a->accumulate) {
        memset(slot->plane, 0, w->planes * in_plane * sizeof(float));
        cpe_vector_loop(cpe, w->planes * in_plane, 0.0, 1.0, 0.0);
    }
    uint64_t flops = 0;
    for (size_t p = 0; p < w->planes; p++) {
        float *dx = slot->plane + p * in_plane;
        const float *dy = slot->grid + p * out_plane;
        const int *am = slot->argmax + p * out_plane;
        for (int oy = w->other0; oy < w->other1; oy++)
            for (int ox = 0; ox < a->ow; ox++) {
                size_t o = (size_t)(oy - w->other0) * (size_t)a->ow + (size_t)ox;
                if (a->alg == ST_POOL_MAX) {
                    int at = am[o];
                    if (at < 0 || at / a->iw < w->row0 || at / a->iw >= w->row1)
                        continue;
                    dx[(size_t)(at / a->iw - w->row0) * (size_t)a->iw + (size_t)(at % a->iw)] +=
                        dy[o];
                    flops++;
                    continue;
                }
                int y0, y1, x0, x1;
                window(a, oy, ox, &y0, &y1, &x0, &x1);
                int cnt = (y1 - y0) * (x1 - x0);
                if (y1 <= y0 || x1 <= x0)
                    continue;
                float g = dy[o] / (float)cnt;
                flops++;
                for (int iy = y0 > w->row0 ? y0 : w->row0; iy < y1 && iy < w->row1; iy++)
                    for (int ix = x0; ix < x1; ix++) {
                        dx[(size_t)(iy - w->row0) * (size_t)a->iw + (size_t)ix] += g;
                        flops++;
                    }
            }
    }
    cpe_scalar_loop(cpe, flops, 1.0, 3.0, 2.0, 1.0);
}

static void pool_backward_kernel(st_cpe *cpe, void *args)
{
    const pool_args *a = cpe_kernel_args(cpe, args, sizeof(pool_args));
    pool_slot slot[2];
    slots_alloc(cpe, a, slot);
    size_t first = (size_t)st_cpe_id(cpe);
    if (first < a->units)
        backward_issue(cpe, a, &slot[0], first);
    for (size_t u = first, k = 0; u < a->units; u += ST_CPE_COUNT, k++) {
        pool_slot *cur = &slot[k % (size_t)a->slots];
        size_t next = u + ST_CPE_COUNT;
        if (a->slots == 2 && next < a->units)
            backward_issue(cpe, a, &slot[(k + 1) % 2], next);
        st_cpe_dma_wait(cpe, &cur->get, cur->get.count);
        backward_compute(cpe, a, cur);
        const pool_unit *w = &cur->u;
        cpe_reply_reset(&cur->put);
        st_cpe_dma_put(cpe, a->dst + (w->plane * (size_t)a->ih + (size_t)w->row0) * (size_t)a->iw,
                       cur->plane,
                       w->planes * (size_t)(w->row1 - w->row0) * (size_t)a->iw * sizeof(float),
                       &cur->put);
        if (a->slots == 1 && next < a->units)
            backward_issue(cpe, a, cur, next);
    }
    for (int s = 0; s < a->slots; s++)
        st_cpe_dma_wait(cpe, &slot[s].put, slot[s].put.count);
}

/* ---- the host side ---- */

/* Words per buffer of a unit of `rows` rows (0: a whole plane) into w. */
static void unit_words(const pool_args *a, int backward, int rows, size_t w[POOL_BUFS])
{
    size_t grids = a->alg == ST_POOL_MAX && (backward || a->argmax) ? 1 : 0;
    size_t in_rows, out_rows;
    if (rows == 0) {
        in_rows = (size_t)a->ih;
        out_rows = (size_t)a->oh;
    } else if (backward) {
        in_rows = (size_t)rows;
        out_rows = cpe_min_size((size_t)a->oh, (size_t)((rows + a->kh - 2) / a->sh + 1));
    } else {
        out_rows = (size_t)rows;
        in_rows = cpe_min_size((size_t)a->ih, (size_t)(rows - 1) * (size_t)a->sh + (size_t)a->kh);
    }
    w[BUF_PLANE] = in_rows * (size_t)a->iw;
    w[BUF_GRID] = out_rows * (size_t)a->ow;
    w[BUF_ARGMAX] = grids * out_rows * (size_t)a->ow;
}

static size_t words_total(const size_t w[POOL_BUFS])
{
    return w[BUF_PLANE] + w[BUF_GRID] + w[BUF_ARGMAX];
}

static size_t ceil_div(size_t a, size_t b)
{
    return (a + b - 1) / b;
}

/* Choose units (whole-plane groups or bands) and slots; 0 if not even one
 * row fits. */
static int pool_plan(pool_args *a, int backward)
{
    size_t rows = (size_t)(backward ? a->ih : a->oh);
    size_t share = ceil_div(a->planes * rows, ST_CPE_COUNT); /* rows per CPE */
    size_t plane[POOL_BUFS];
    unit_words(a, backward, 0, plane);
    for (int slots = 2; slots >= 1; slots--) {
        size_t budget = (ST_CPE_LDM_BYTES - sizeof(pool_args) - CPE_KERNEL_LDM_SLACK) /
                        (size_t)slots / 4; /* words per slot */
        a->slots = slots;
        if (share >= rows && words_total(plane) <= budget) {
            a->group = cpe_min_size(budget / words_total(plane), share / rows);
            a->units = ceil_div(a->planes, a->group);
            for (int b = 0; b < POOL_BUFS; b++)
                a->words[b] = a->group * plane[b];
            return 1;
        }
        size_t lo = 0, hi = rows; /* the largest band that fits, by bisection */
        while (lo < hi) {
            size_t mid = lo + (hi - lo + 1) / 2;
            size_t w[POOL_BUFS];
            unit_words(a, backward, (int)mid, w);
            if (words_total(w) <= budget)
                lo = mid;
            else
                hi = mid - 1;
        }
        if (lo == 0)
            continue;
        size_t band = cpe_min_size(lo, share);
        size_t bands = ceil_div(rows, band);
        band = ceil_div(rows, bands);
        a->group = 0;
        a->band = (int)band;
        a->units = a->planes * bands;
        unit_words(a, backward, (int)band, a->words);
        return 1;
    }
    return 0;
}

static st_status pool_launch(st_cpe_cluster *cg, const char *name, const st_pool_desc *d, int n,
                             const float *src, float *dst, int *argmax, int accumulate,
                             int backward, st_cpe_kernel kernel, st_cpe_counters *out,
                             st_error *err)
{
    if (out)
        memset(out, 0, sizeof *out);
    if (!d)
        return st_fail(err, ST_EINPUT, "%s: no pooling descriptor given", name);
    if (d->alg != ST_POOL_MAX && d->alg != ST_POOL_AVG)
        return st_fail(err, ST_EINPUT, "%s: unknown pooling algorithm %d", name, (int)d->alg);
    if (n < 1 || d->c < 1 || d->ih < 1 || d->iw < 1 || d->oh < 1 || d->ow < 1 || d->kh < 1 ||
        d->kw < 1 || d->sh < 1 || d->sw < 1 || d->ph < 0 || d->pw < 0)
        return st_fail(err, ST_EINPUT,
                       "%s: bad geometry n %d, c %d, input %dx%d, output %dx%d, window %dx%d, "
                       "stride %dx%d, padding %dx%d (expected sizes and strides >= 1, padding "
                       ">= 0)",
                       name, n, d->c, d->ih, d->iw, d->oh, d->ow, d->kh, d->kw, d->sh, d->sw,
                       d->ph, d->pw);
    if ((size_t)d->ih * (size_t)d->iw > INT_MAX ||
        (long)(d->oh - 1) * d->sh + d->kh > INT_MAX || (long)(d->ow - 1) * d->sw + d->kw > INT_MAX)
        return st_fail(err, ST_EINPUT,
                       "%s: a %dx%d plane with %dx%d outputs is too large for int offsets", name,
                       d->ih, d->iw, d->oh, d->ow);
    if (!src || !dst)
        return st_fail(err, ST_EINPUT, "%s: no %s given", name,
                       !src ? (backward ? "diff_dst" : "src") : (backward ? "diff_src" : "dst"));
    if (backward && d->alg == ST_POOL_MAX && !argmax)
        return st_fail(err, ST_EINPUT,
                       "%s: max pooling needs the argmax that pool_forward wrote", name);
    pool_args a = {.alg = d->alg, .c = d->c, .ih = d->ih, .iw = d->iw, .oh = d->oh,
                   .ow = d->ow, .kh = d->kh, .kw = d->kw, .sh = d->sh, .sw = d->sw,
                   .ph = d->ph, .pw = d->pw, .planes = (size_t)n * (size_t)d->c, .src = src,
                   .dst = dst, .argmax = d->alg == ST_POOL_MAX ? argmax : NULL,
                   .accumulate = accumulate != 0};
    if (!pool_plan(&a, backward))
        return st_fail(err, ST_EINPUT,
                       "%s: one row of a %dx%d input with a %dx%d window and %d outputs per row "
                       "does not fit the %d-byte LDM",
                       name, d->ih, d->iw, d->kh, d->kw, d->ow, ST_CPE_LDM_BYTES);
    return st_cpe_launch(cg, name, kernel, &a, out, err);
}

st_status st_cpe_pool_forward(st_cpe_cluster *cg, const st_pool_desc *d, int n, const float *src,
                              float *dst, int *argmax, st_cpe_counters *out, st_error *err)
{
    return pool_launch(cg, "pool_forward", d, n, src, dst, argmax, 0, 0, pool_forward_kernel,
                       out, err);
}

st_status st_cpe_pool_backward(st_cpe_cluster *cg, const st_pool_desc *d, int n,
                               const float *diff_dst, const int *argmax, float *diff_src,
                               int accumulate, st_cpe_counters *out, st_error *err)
{
    /* The kernel only reads argmax backward; pool_args holds one pointer
     * for both directions. */
    return pool_launch(cg, "pool_backward", d, n, diff_dst, diff_src, (int *)argmax, accumulate,
                       1, pool_backward_kernel, out, err);
}
