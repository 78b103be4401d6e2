/* Max and average pooling, forward and backward, as CPE programs over a
 * whole batch of NCHW floats, as swCaffe's sw_slave_pool_f.c does it.
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
 * Work (swCaffe): the n c planes of the batch are dealt to the CPEs, plane
 * i to CPE i mod 64, and a CPE works through its planes one unit at a
 * time, each transfer waited for before the next step (no double
 * buffering, as swCaffe's kernel). A unit is a whole plane when it fits
 * the LDM; else a group of rows (output rows forward, with the input rows
 * their windows reach; input rows backward, with the output rows that
 * reach them, so no input row is written twice); and when not even one
 * row with its window rows fits, a block of columns of one row, fetched
 * and stored with strided DMA. Every geometry runs.
 *
 * Cost declared, per unit and independent of the data: forward, per output
 * a scalar loop over its valid window (a load and a compare or add each)
 * and its stores; backward, zeroing the unit's gradient rows (vector
 * stores), then per output its loads (gradient, argmax, target) and the
 * add and store of each input it reaches. DMA: the unit's rows; short
 * rows (small images) are slow at the measured rates, which is why
 * pooling is bandwidth-bound on the machine. */
#include <float.h>
#include <limits.h>
#include <string.h>

#include "kernel_common.h"

/* LDM a unit's buffers leave: swCaffe's pooling gives them 48 of the
 * SW26010's 64 KB. */
#define POOL_LDM_RESERVE (16 * 1024)

typedef struct pool_args {
    st_pool_alg alg;
    int c, ih, iw, oh, ow, kh, kw, sh, sw, ph, pw;
    size_t planes;     /* n c */
    const float *src;  /* forward: src; backward: diff_dst */
    float *dst;        /* forward: dst; backward: diff_src */
    int *argmax;       /* forward: written when not NULL; backward: read (max) */
    int accumulate;    /* backward */
    /* The plan (host): units of `rows` rows (output rows forward, input
     * rows backward) by `cols` columns; buffer sizes in 4-byte words. */
    int rows, cols;
    size_t in_words, out_words, argmax_words;
    /* Forward, when one output's window does not fit: the window streamed
     * through the input buffer, stream_rows whole rows at a time, or (0)
     * one row in pieces of stream_cols columns. */
    int stream, stream_rows, stream_cols;
} pool_args;

/* A unit: rows [r0, r1) and columns [c0, c1) of the plane on the side it
 * owns (the outputs forward, the inputs backward), and the rows and
 * columns [o0, o1) x [q0, q1) of the other side they need. */
typedef struct pool_unit {
    size_t plane;
    int r0, r1, c0, c1;
    int o0, o1, q0, q1;
} pool_unit;

static int clamp(int v, int lo, int hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

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

/* Input positions [*lo, *hi) the windows of outputs [o0, o1) reach along
 * one axis (k window, s stride, p padding, n input size). */
static void inputs_of(int o0, int o1, int k, int s, int p, int n, int *lo, int *hi)
{
    *lo = clamp(o0 * s - p, 0, n);
    *hi = clamp((o1 - 1) * s - p + k, *lo, n);
}

/* Outputs [*lo, *hi) whose windows reach inputs [i0, i1) along one axis
 * (m outputs). */
static void outputs_of(int i0, int i1, int k, int s, int p, int m, int *lo, int *hi)
{
    int low = i0 + p - k;
    *lo = clamp(low < 0 ? 0 : low / s + 1, 0, m);
    *hi = clamp((i1 - 1 + p) / s + 1, *lo, m);
}

static pool_unit unit_at(const pool_args *a, size_t plane, size_t k, int backward)
{
    int rows = backward ? a->ih : a->oh, cols = backward ? a->iw : a->ow;
    size_t across = (size_t)((cols + a->cols - 1) / a->cols);
    pool_unit u;
    u.plane = plane;
    u.r0 = (int)(k / across) * a->rows;
    u.r1 = u.r0 + a->rows < rows ? u.r0 + a->rows : rows;
    u.c0 = (int)(k % across) * a->cols;
    u.c1 = u.c0 + a->cols < cols ? u.c0 + a->cols : cols;
    if (backward) {
        outputs_of(u.r0, u.r1, a->kh, a->sh, a->ph, a->oh, &u.o0, &u.o1);
        outputs_of(u.c0, u.c1, a->kw, a->sw, a->pw, a->ow, &u.q0, &u.q1);
    } else {
        inputs_of(u.r0, u.r1, a->kh, a->sh, a->ph, a->ih, &u.o0, &u.o1);
        inputs_of(u.c0, u.c1, a->kw, a->sw, a->pw, a->iw, &u.q0, &u.q1);
    }
    return u;
}

static size_t units_per_plane(const pool_args *a, int backward)
{
    int rows = backward ? a->ih : a->oh, cols = backward ? a->iw : a->ow;
    return (size_t)((rows + a->rows - 1) / a->rows) * (size_t)((cols + a->cols - 1) / a->cols);
}

/* A block of rows x cols of a plane of width `width` at (r0, c0), plane
 * `plane` of `height` rows, between main memory and LDM. */
static void block_dma(st_cpe *cpe, int put, void *mem, size_t plane, int height, int width, int r0,
                      int rows, int c0, int cols, void *ldm, st_cpe_reply *reply)
{
    if (rows <= 0 || cols <= 0)
        return;
    unsigned char *at = (unsigned char *)mem +
                        ((plane * (size_t)height + (size_t)r0) * (size_t)width + (size_t)c0) * 4;
    if (put)
        cpe_put_rows(cpe, at, ldm, (size_t)cols * 4, (size_t)width * 4, (size_t)rows, reply);
    else
        cpe_get_rows(cpe, ldm, at, (size_t)cols * 4, (size_t)width * 4, (size_t)rows, reply);
}

/* ---- forward ---- */

/* Output (oy, ox) of a window too large for the LDM: its rows (or pieces
 * of one row) come in one after another, in row-major order, and the
 * running maximum (first in row-major order among equals) or sum is kept,
 * so the result is the one-pass result bit for bit. */
static void forward_streamed(st_cpe *cpe, const pool_args *a, const pool_unit *u, float *in,
                             float *out, int *am)
{
    int oy = u->r0, ox = u->c0, y0, y1, x0, x1;
    window(a, oy, ox, &y0, &y1, &x0, &x1);
    int cnt = y1 > y0 && x1 > x0 ? (y1 - y0) * (x1 - x0) : 0;
    int rows = a->stream_rows > 0 ? a->stream_rows : 1;
    int cols = a->stream_rows > 0 ? x1 - x0 : a->stream_cols;
    float best = -FLT_MAX, sum = 0.0f;
    int at = -1;
    for (int ya = y0; ya < y1; ya += rows)
        for (int xa = x0; xa < x1; xa += cols) {
            int yb = ya + rows < y1 ? ya + rows : y1, xb = xa + cols < x1 ? xa + cols : x1;
            st_cpe_reply reply = {0};
            block_dma(cpe, 0, (void *)a->src, u->plane, a->ih, a->iw, ya, yb - ya, xa, xb - xa,
                      in, &reply);
            st_cpe_dma_wait(cpe, &reply, reply.count);
            cpe_scalar_loop(cpe, (size_t)(yb - ya) * (size_t)(xb - xa), 1.0, 1.0, 1.0, 1.0);
            for (int iy = ya; iy < yb && !st_cpe_cost_only(cpe); iy++)
                for (int ix = xa; ix < xb; ix++) {
                    float v = in[(size_t)(iy - ya) * (size_t)(xb - xa) + (size_t)(ix - xa)];
                    if (a->alg == ST_POOL_AVG) {
                        sum += v;
                    } else if (at < 0 || v > best) {
                        best = v;
                        at = iy * a->iw + ix;
                    }
                }
        }
    cpe_scalar_loop(cpe, 1, a->alg == ST_POOL_AVG ? 1.0 : 0.0, 2.0, 2.0,
                    a->alg == ST_POOL_AVG ? 1.0 : 0.0);
    if (!st_cpe_cost_only(cpe)) {
        if (a->alg == ST_POOL_AVG) {
            out[0] = cnt > 0 ? sum / (float)cnt : 0.0f;
        } else {
            out[0] = at < 0 ? 0.0f : best;
            if (a->argmax)
                am[0] = at;
        }
    }
    st_cpe_reply reply = {0};
    block_dma(cpe, 1, a->dst, u->plane, a->oh, a->ow, oy, 1, ox, 1, out, &reply);
    if (a->argmax && a->alg == ST_POOL_MAX)
        block_dma(cpe, 1, a->argmax, u->plane, a->oh, a->ow, oy, 1, ox, 1, am, &reply);
    st_cpe_dma_wait(cpe, &reply, reply.count);
}

static void forward_unit(st_cpe *cpe, const pool_args *a, const pool_unit *u, float *in, float *out,
                         int *am)
{
    int in_cols = u->q1 - u->q0, out_cols = u->c1 - u->c0;
    st_cpe_reply reply = {0};
    block_dma(cpe, 0, (void *)a->src, u->plane, a->ih, a->iw, u->o0, u->o1 - u->o0, u->q0, in_cols,
              in, &reply);
    st_cpe_dma_wait(cpe, &reply, reply.count);
    size_t window_positions = 0, outputs = (size_t)(u->r1 - u->r0) * (size_t)out_cols;
    for (int oy = u->r0; oy < u->r1; oy++)
        for (int ox = u->c0; ox < u->c1; ox++) {
            int y0, y1, x0, x1;
            window(a, oy, ox, &y0, &y1, &x0, &x1);
            int cnt = y1 > y0 && x1 > x0 ? (y1 - y0) * (x1 - x0) : 0;
            window_positions += (size_t)cnt;
            if (st_cpe_cost_only(cpe))
                continue;
            size_t o = (size_t)(oy - u->r0) * (size_t)out_cols + (size_t)(ox - u->c0);
            if (a->alg == ST_POOL_MAX) {
                float best = -FLT_MAX;
                int at = -1;
                for (int iy = y0; iy < y1; iy++)
                    for (int ix = x0; ix < x1; ix++) {
                        float v = in[(size_t)(iy - u->o0) * (size_t)in_cols + (size_t)(ix - u->q0)];
                        if (at < 0 || v > best) {
                            best = v;
                            at = iy * a->iw + ix;
                        }
                    }
                out[o] = at < 0 ? 0.0f : best;
                if (a->argmax)
                    am[o] = at;
            } else {
                float s = 0.0f;
                for (int iy = y0; iy < y1; iy++)
                    for (int ix = x0; ix < x1; ix++)
                        s += in[(size_t)(iy - u->o0) * (size_t)in_cols + (size_t)(ix - u->q0)];
                out[o] = cnt > 0 ? s / (float)cnt : 0.0f;
            }
        }
    cpe_scalar_loop(cpe, window_positions, 1.0, 1.0, 1.0, 1.0);
    cpe_scalar_loop(cpe, outputs, a->alg == ST_POOL_AVG ? 1.0 : 0.0,
                    a->alg == ST_POOL_MAX && a->argmax ? 2.0 : 1.0, 2.0,
                    a->alg == ST_POOL_AVG ? 1.0 : 0.0);
    cpe_reply_reset(&reply);
    block_dma(cpe, 1, a->dst, u->plane, a->oh, a->ow, u->r0, u->r1 - u->r0, u->c0, out_cols, out,
              &reply);
    if (a->argmax && a->alg == ST_POOL_MAX)
        block_dma(cpe, 1, a->argmax, u->plane, a->oh, a->ow, u->r0, u->r1 - u->r0, u->c0,
                  out_cols, am, &reply);
    st_cpe_dma_wait(cpe, &reply, reply.count);
}

/* ---- backward ---- */

static void backward_unit(st_cpe *cpe, const pool_args *a, const pool_unit *u, float *dx,
                          float *dy, int *am)
{
    int cols = u->c1 - u->c0, out_cols = u->q1 - u->q0;
    size_t count = (size_t)(u->r1 - u->r0) * (size_t)cols;
    st_cpe_reply reply = {0};
    block_dma(cpe, 0, (void *)a->src, u->plane, a->oh, a->ow, u->o0, u->o1 - u->o0, u->q0,
              out_cols, dy, &reply);
    if (a->alg == ST_POOL_MAX)
        block_dma(cpe, 0, a->argmax, u->plane, a->oh, a->ow, u->o0, u->o1 - u->o0, u->q0,
                  out_cols, am, &reply);
    if (a->accumulate)
        block_dma(cpe, 0, a->dst, u->plane, a->ih, a->iw, u->r0, u->r1 - u->r0, u->c0, cols, dx,
                  &reply);
    st_cpe_dma_wait(cpe, &reply, reply.count);
    if (!a->accumulate) {
        cpe_vector_loop(cpe, count, 0.0, 1.0, 0.0);
        if (!st_cpe_cost_only(cpe))
            memset(dx, 0, count * sizeof(float));
    }
    size_t outputs = (size_t)(u->o1 - u->o0) * (size_t)out_cols, reached = 0;
    for (int oy = u->o0; oy < u->o1; oy++)
        for (int ox = u->q0; ox < u->q1; ox++) {
            size_t o = (size_t)(oy - u->o0) * (size_t)out_cols + (size_t)(ox - u->q0);
            int y0, y1, x0, x1;
            window(a, oy, ox, &y0, &y1, &x0, &x1);
            if (a->alg == ST_POOL_MAX) {
                if (st_cpe_cost_only(cpe))
                    continue;
                int at = am[o];
                int iy = at < 0 ? -1 : at / a->iw, ix = at < 0 ? -1 : at % a->iw;
                if (at < 0 || iy < u->r0 || iy >= u->r1 || ix < u->c0 || ix >= u->c1)
                    continue;
                dx[(size_t)(iy - u->r0) * (size_t)cols + (size_t)(ix - u->c0)] += dy[o];
                continue;
            }
            if (y1 <= y0 || x1 <= x0)
                continue;
            int cnt = (y1 - y0) * (x1 - x0);
            int ya = y0 > u->r0 ? y0 : u->r0, yb = y1 < u->r1 ? y1 : u->r1;
            int xa = x0 > u->c0 ? x0 : u->c0, xb = x1 < u->c1 ? x1 : u->c1;
            if (yb <= ya || xb <= xa)
                continue;
            reached += (size_t)(yb - ya) * (size_t)(xb - xa);
            if (st_cpe_cost_only(cpe))
                continue;
            float g = dy[o] / (float)cnt;
            for (int iy = ya; iy < yb; iy++)
                for (int ix = xa; ix < xb; ix++)
                    dx[(size_t)(iy - u->r0) * (size_t)cols + (size_t)(ix - u->c0)] += g;
        }
    if (a->alg == ST_POOL_MAX)
        cpe_scalar_loop(cpe, outputs, 1.0, 4.0, 3.0, 1.0);
    else {
        cpe_scalar_loop(cpe, outputs, 1.0, 1.0, 2.0, 1.0);
        cpe_scalar_loop(cpe, reached, 1.0, 2.0, 1.0, 1.0);
    }
    cpe_reply_reset(&reply);
    block_dma(cpe, 1, a->dst, u->plane, a->ih, a->iw, u->r0, u->r1 - u->r0, u->c0, cols, dx,
              &reply);
    st_cpe_dma_wait(cpe, &reply, reply.count);
}

/* ---- the programs ---- */

static void pool_kernel(st_cpe *cpe, void *args, int backward)
{
    const pool_args *a = cpe_kernel_args(cpe, args, sizeof(pool_args));
    float *in = st_cpe_ldm_alloc(cpe, a->in_words * 4, backward ? "gradient rows" : "input rows");
    float *out = st_cpe_ldm_alloc(cpe, a->out_words * 4,
                                  backward ? "output-gradient rows" : "output rows");
    int *am = a->argmax_words ? st_cpe_ldm_alloc(cpe, a->argmax_words * 4, "argmax rows") : NULL;
    size_t per_plane = units_per_plane(a, backward);
    for (size_t plane = (size_t)st_cpe_id(cpe); plane < a->planes; plane += (size_t)st_cpe_count(cpe))
        for (size_t k = 0; k < per_plane; k++) {
            pool_unit u = unit_at(a, plane, k, backward);
            if (backward)
                backward_unit(cpe, a, &u, in, out, am);
            else if (a->stream)
                forward_streamed(cpe, a, &u, in, out, am);
            else
                forward_unit(cpe, a, &u, in, out, am);
        }
}

static void pool_forward_kernel(st_cpe *cpe, void *args)
{
    pool_kernel(cpe, args, 0);
}

static void pool_backward_kernel(st_cpe *cpe, void *args)
{
    pool_kernel(cpe, args, 1);
}

/* ---- the host side ---- */

/* Words of a unit of rows x cols on its own side (see pool_args). */
static void unit_words(pool_args *a, int backward, int rows, int cols)
{
    int other_rows, other_cols;
    if (backward) { /* at most this many outputs reach rows (cols) inputs */
        other_rows = clamp((rows + a->kh - 2) / a->sh + 2, 1, a->oh);
        other_cols = clamp((cols + a->kw - 2) / a->sw + 2, 1, a->ow);
    } else {
        other_rows = clamp((rows - 1) * a->sh + a->kh, 1, a->ih);
        other_cols = clamp((cols - 1) * a->sw + a->kw, 1, a->iw);
    }
    size_t own = (size_t)rows * (size_t)cols, other = (size_t)other_rows * (size_t)other_cols;
    int grids = a->alg == ST_POOL_MAX && (backward || a->argmax);
    a->rows = rows;
    a->cols = cols;
    a->in_words = backward ? own : other;
    a->out_words = backward ? other : own;
    a->argmax_words = grids ? (backward ? other : own) : 0;
}

static size_t unit_bytes(const pool_args *a)
{
    return 4 * (a->in_words + a->out_words + a->argmax_words);
}

/* The largest unit that fits: whole planes' rows, else fewer rows, else
 * one row's columns, else (forward) one output with its window streamed.
 * 0 if not even that fits. */
static int pool_plan(pool_args *a, int backward, size_t budget)
{
    int rows = backward ? a->ih : a->oh, cols = backward ? a->iw : a->ow;
    for (int r = rows; r >= 1; r /= 2) {
        unit_words(a, backward, r, cols);
        if (unit_bytes(a) <= budget)
            return 1;
    }
    for (int c = cols; c >= 1; c /= 2) {
        unit_words(a, backward, 1, c);
        if (unit_bytes(a) <= budget)
            return 1;
    }
    if (backward)
        return 0;
    /* One output; its window's rows, or one row's pieces, through the input
     * buffer. */
    unit_words(a, 0, 1, 1);
    size_t words = budget / 4 - a->out_words - a->argmax_words;
    a->stream = 1;
    a->stream_rows = (size_t)a->kw <= words ? (int)(words / (size_t)a->kw) : 0;
    if (a->stream_rows > a->kh)
        a->stream_rows = a->kh;
    a->stream_cols = (int)words;
    a->in_words = words;
    return words >= 1;
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
    size_t budget = (size_t)st_cpe_cluster_machine(cg)->ldm_bytes - POOL_LDM_RESERVE;
    if (!pool_plan(&a, backward, budget))
        return st_fail(err, ST_EINPUT,
                       "%s: one %dx%d window (and the outputs it reaches) does not fit the %zu KB "
                       "of LDM a unit may take", name, d->kh, d->kw, budget / 1024);
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
