/* Implicit convolution as a CPE program: forward, backward-data and
 * backward-weights of one group, all n images in one launch, floats, NCHW,
 * without an im2col matrix (swDNN, Fang et al., IPDPS 2017; swCaffe, Fang
 * et al. 2018).
 *
 * Each pass is a matrix product C = A B over the 8x8 mesh, distributed as in
 * cpe_gemm.c: C is cut into tiles of 8 x 8 blocks and K into panels of 8
 * blocks; CPE (i,j) owns A(i,j), B(i,j) and C(i,j); at step s the CPEs of
 * column s broadcast their A block along their row and those of row s their
 * B block down their column, and CPE (i,j) adds A(i,s) (x) B(s,j) to C(i,j).
 * What differs from GEMM is what a block is and what (x) does: B blocks are
 * windows of image rows brought in by DMA, and (x) runs over the kernel
 * positions, each a small GEMM on shifted columns of the window:
 *
 *   pass              M (CPE rows)   N (CPE columns)          K (steps)
 *   forward           oc             output-row units         ic
 *   backward-data     ic             input-row units          oc
 *   backward-weights  oc             ic                       output-row units
 *
 * A unit is a piece of the pixel dimension: a segment of bw columns of one
 * row of one image, or ru whole rows of one image (images, rows and
 * segments flattened); the width is blocked, so any width fits.
 *   forward:  A(i,j) = w[oc block i, ic block j, all kh kw]; B(i,j) = the
 *             window of x (ic block i; the input rows and columns the
 *             unit's outputs read) of unit j; C(i,j) = y[oc block i,
 *             unit j]. (x): for each (kr, kc), C[o][p] += w[o][i][kr][kc]
 *             x[i][kr][p sw + kc].
 *   backward-data: the gather form of the transposed convolution, so no two
 *             CPEs add to one dx element: C(i,j) = dx[ic block i, input unit
 *             j]; A(i,j) = w[oc block j, ic block i, kh kw]; B(i,j) = the
 *             window of dy (oc block i; the output rows and columns that
 *             reach the unit's inputs). (x): for each (kr, kc), input column
 *             ix takes dy at ox = (ix + pw - kc) / sw when that divides and
 *             is in range (rows likewise).
 *   backward-weights: C(i,j) = dw[oc block i, ic block j, kh kw], resident
 *             over all units; at step s, A(i,s) = dy[oc block i, unit s of
 *             the panel], B(s,j) = the x window of unit s, ic block j.
 *             (x): dw[o][i][kr][kc] += sum_p dy[o][p] x[i][kr][p sw + kc].
 * Padding is coordinate mapping: a window holds only positions inside the
 * image, and (x) restricts each kernel position to the output (input)
 * columns and rows whose partner lies inside it; nothing padded is stored.
 * Declared flops are the multiply-adds actually done (2 each), so the
 * skipped padding is not counted.
 *
 * Why this distribution. Channels over rows and pixels (or channels) over
 * columns gives every CPE a C block of its own, so there is no reduction
 * and no two CPEs write one element; the (kr, kc) loop reuses each window
 * kw times where im2col would copy it kh kw times through main memory.
 * The alternative, weights stationary (CPE (i,j) keeps w[oc block i, ic
 * block j] and the partial outputs are summed along the row), broadcasts
 * no weights but needs all of them resident or the outputs re-read once
 * per K panel, plus a reduction per unit; this scheme needs neither and
 * keeps cpe_gemm.c's deadlock-free step order. Channel counts below 8
 * leave CPE rows without work (M = ic of the backward-data pass, say),
 * hence st_cpe_conv_implicit_suits.
 *
 * Buffers, per CPE: two A and two B blocks of its own (the next item's
 * arrive by DMA while the current one is computed), the A and B blocks
 * received at a step, C accumulated in double (the CPE's 4-wide vectors
 * hold 4 floats or 4 doubles alike) and C in float for the put, which
 * completes behind the next tile. A blocks that do not change between
 * tiles (forward and backward-data when K takes at most 2 panels) are not
 * fetched again. When rows are not cut into segments a window takes whole
 * rows, so a channel's rows are one contiguous block and a window one DMA.
 *
 * Blocking (host side, conv_plan): bm channels along M and bc along the
 * other channel dimension per CPE, and the unit shape (bw, or ru rows).
 * For every unit shape and M blocks of at most 64, 32, 16 or 8 channels,
 * the largest channel blocks that fit the LDM are taken and the plan is
 * costed under the cluster's cost parameters (plan_cycles); the cheapest
 * wins. The weights travel once per step whatever the unit's size, so
 * small images want several rows per unit; fewer than 8 units per tile
 * leave CPE columns idle; the costing weighs the two. A geometry whose
 * smallest blocks (one channel each, a one-column unit) do not fit is
 * refused with ST_EINPUT.
 *
 * Precision: blocks travel as doubles (floats widened: exact), products are
 * summed in double, C is rounded to float once, when it is stored.
 *
 * Cost per step, per CPE (forward; the others alike), for a unit of P
 * pixels whose window is R x C: 2 bm bc kh kw P flops against
 * bm bc kh kw + bc R C received values; per item the DMA of its own A
 * (unless resident) and B blocks, per tile the put of C. */
#include <stdint.h>
#include <string.h>

#include "cpe_internal.h"

/* Largest channel block per CPE; largest unit (pixels); narrowest row
 * segment tried once a plan fits. */
#define CONV_BLOCK_CHANNELS_MAX 64
#define CONV_UNIT_PIXELS_MAX 256
#define CONV_UNIT_WIDTH_MIN 8

/* Channel counts at or above which the implicit scheme is worth timing:
 * every CPE row and column then gets at least one channel in every pass. */
#define CONV_SUITS_MIN_CHANNELS 8

typedef enum conv_pass { CONV_FORWARD, CONV_BACKWARD_DATA, CONV_BACKWARD_WEIGHTS } conv_pass;

typedef struct conv_args {
    st_cpe_conv_geom g;
    int n;
    conv_pass pass;
    int accumulate; /* backward-data: add to dx */
    const float *x, *w, *dy;
    float *dst; /* y, dx or dw */
    /* The plan (conv_plan). */
    int bm, bc, bw;
    int nb;                        /* segments per row: ceil(width / bw) */
    int ru;                        /* rows per unit: > 1 only when nb == 1 */
    size_t units;                  /* n ceil(rows / ru) nb */
    size_t a_cap, b_cap, c_cap;    /* block capacities in elements */
    size_t tiles_m, tiles_n, panels;
} conv_args;

/* rows rows of one image from row, columns x0.. x0 + w - 1 of each (rows
 * > 1 only with whole rows): output rows for forward and backward-weights,
 * input rows for backward-data. Its pixels are [row][column], rows w.
 * w == 0: no unit. */
typedef struct conv_unit {
    int img, row, rows, x0, w;
} conv_unit;

/* The rows [y0, y0 + rows) and columns [x0, x0 + cols) of a source plane a
 * unit reads (x for forward and backward-weights, dy for backward-data).
 * Empty when rows or cols is 0. */
typedef struct conv_window {
    int y0, rows, x0, cols;
} conv_window;

/* One block of A, B or C: m0.. m0 + ms along M; k0.. k0 + ks along the
 * other channel dimension; the unit and the window where the block has
 * them; its size in elements. */
typedef struct conv_block {
    int m0, ms, k0, ks;
    conv_unit unit;
    conv_window win;
    size_t count;
} conv_block;

/* Which tile and panel an item of the launch's sequence is. */
typedef struct conv_item {
    size_t tm, tn, p;
} conv_item;

static int min_int(int a, int b)
{
    return a < b ? a : b;
}

static int max_int(int a, int b)
{
    return a > b ? a : b;
}

/* Floor and ceiling of a / b, b > 0, a of either sign. */
static int floor_div(int a, int b)
{
    return a >= 0 ? a / b : -((-a + b - 1) / b);
}

static int ceil_div(int a, int b)
{
    return a >= 0 ? (a + b - 1) / b : -(-a / b);
}

static size_t div_up(size_t a, size_t b)
{
    return (a + b - 1) / b;
}

static size_t align_ldm(size_t bytes)
{
    return (bytes + ST_CPE_LDM_ALIGN - 1) / ST_CPE_LDM_ALIGN * ST_CPE_LDM_ALIGN;
}

/* ---- the pass's dimensions ---- */

/* Channels along M: oc, ic, oc. */
static int m_channels(const conv_args *a)
{
    return a->pass == CONV_BACKWARD_DATA ? a->g.c : a->g.oc;
}

/* Channels blocked by bc: K of forward (ic) and backward-data (oc), N of
 * backward-weights (ic). */
static int c_channels(const conv_args *a)
{
    return a->pass == CONV_BACKWARD_DATA ? a->g.oc : a->g.c;
}

static int unit_rows(const conv_args *a)
{
    return a->pass == CONV_BACKWARD_DATA ? a->g.ih : a->g.oh;
}

static int unit_width(const conv_args *a)
{
    return a->pass == CONV_BACKWARD_DATA ? a->g.iw : a->g.ow;
}

static void channel_range(int total, size_t start, int block, int *first, int *count)
{
    *first = (int)start;
    *count = start >= (size_t)total ? 0 : min_int(block, total - (int)start);
}

static size_t units_per_image(const conv_args *a)
{
    return div_up((size_t)unit_rows(a), (size_t)a->ru) * (size_t)a->nb;
}

static conv_unit unit_of(const conv_args *a, size_t u)
{
    conv_unit un = {0, 0, 0, 0, 0};
    if (u >= a->units)
        return un;
    size_t per_image = units_per_image(a), rest = u % per_image;
    un.img = (int)(u / per_image);
    un.row = (int)(rest / (size_t)a->nb) * a->ru;
    un.rows = min_int(a->ru, unit_rows(a) - un.row);
    un.x0 = (int)(rest % (size_t)a->nb) * a->bw;
    un.w = min_int(a->bw, unit_width(a) - un.x0);
    return un;
}

static size_t unit_pixels(const conv_unit *u)
{
    return (size_t)u->rows * (size_t)u->w;
}

/* The x window of an output-row unit: the input rows and columns its
 * outputs read that lie inside the image (whole rows when rows are not cut
 * into segments). */
static conv_window input_window(const conv_args *a, const conv_unit *u)
{
    const st_cpe_conv_geom *g = &a->g;
    conv_window win = {0, 0, 0, 0};
    if (u->w == 0)
        return win;
    int top = u->row * g->sh - g->ph, bottom = (u->row + u->rows - 1) * g->sh - g->ph + g->kh;
    int left = u->x0 * g->sw - g->pw, right = (u->x0 + u->w - 1) * g->sw - g->pw + g->kw;
    int y_lo = max_int(top, 0), y_hi = min_int(bottom, g->ih);
    int x_lo = max_int(left, 0), x_hi = min_int(right, g->iw);
    if (y_hi <= y_lo || x_hi <= x_lo)
        return win;
    if (a->nb == 1) {
        x_lo = 0;
        x_hi = g->iw;
    }
    win.y0 = y_lo;
    win.rows = y_hi - y_lo;
    win.x0 = x_lo;
    win.cols = x_hi - x_lo;
    return win;
}

/* The dy window of an input-row unit: the output rows and columns whose
 * windows cover some of its inputs. */
static conv_window output_window(const conv_args *a, const conv_unit *u)
{
    const st_cpe_conv_geom *g = &a->g;
    conv_window win = {0, 0, 0, 0};
    if (u->w == 0)
        return win;
    int oy_lo = max_int(0, ceil_div(u->row + g->ph - g->kh + 1, g->sh));
    int oy_hi = min_int(g->oh - 1, floor_div(u->row + u->rows - 1 + g->ph, g->sh));
    int ox_lo = max_int(0, ceil_div(u->x0 + g->pw - g->kw + 1, g->sw));
    int ox_hi = min_int(g->ow - 1, floor_div(u->x0 + u->w - 1 + g->pw, g->sw));
    if (oy_hi < oy_lo || ox_hi < ox_lo)
        return win;
    if (a->nb == 1) {
        ox_lo = 0;
        ox_hi = g->ow - 1;
    }
    win.y0 = oy_lo;
    win.rows = oy_hi - oy_lo + 1;
    win.x0 = ox_lo;
    win.cols = ox_hi - ox_lo + 1;
    return win;
}

static conv_window window_of(const conv_args *a, const conv_unit *u)
{
    return a->pass == CONV_BACKWARD_DATA ? output_window(a, u) : input_window(a, u);
}

/* ---- blocks ---- */

static conv_item item_of(const conv_args *a, size_t q)
{
    size_t tile = q / a->panels;
    conv_item it = {tile / a->tiles_n, tile % a->tiles_n, q % a->panels};
    return it;
}

static size_t kernel_size(const conv_args *a)
{
    return (size_t)a->g.kh * (size_t)a->g.kw;
}

static size_t window_count(const conv_block *b)
{
    return (size_t)b->ks * (size_t)b->win.rows * (size_t)b->win.cols;
}

/* A(i,j) of item it. */
static conv_block block_a(const conv_args *a, const conv_item *it, int i, int j)
{
    conv_block b;
    memset(&b, 0, sizeof b);
    channel_range(m_channels(a), it->tm * ST_CPE_ROWS * (size_t)a->bm + (size_t)i * a->bm, a->bm,
                  &b.m0, &b.ms);
    if (a->pass == CONV_BACKWARD_WEIGHTS) {
        b.unit = unit_of(a, it->p * ST_CPE_COLS + (size_t)j);
        b.count = (size_t)b.ms * unit_pixels(&b.unit);
    } else {
        channel_range(c_channels(a), it->p * ST_CPE_COLS * (size_t)a->bc + (size_t)j * a->bc,
                      a->bc, &b.k0, &b.ks);
        b.count = (size_t)b.ms * (size_t)b.ks * kernel_size(a);
    }
    return b;
}

/* B(i,j) of item it: a window of channels k0.. k0 + ks. */
static conv_block block_b(const conv_args *a, const conv_item *it, int i, int j)
{
    conv_block b;
    memset(&b, 0, sizeof b);
    if (a->pass == CONV_BACKWARD_WEIGHTS) {
        b.unit = unit_of(a, it->p * ST_CPE_ROWS + (size_t)i);
        channel_range(a->g.c, it->tn * ST_CPE_COLS * (size_t)a->bc + (size_t)j * a->bc, a->bc,
                      &b.k0, &b.ks);
    } else {
        b.unit = unit_of(a, it->tn * ST_CPE_COLS + (size_t)j);
        channel_range(c_channels(a), it->p * ST_CPE_ROWS * (size_t)a->bc + (size_t)i * a->bc,
                      a->bc, &b.k0, &b.ks);
    }
    b.win = window_of(a, &b.unit);
    b.count = window_count(&b);
    return b;
}

/* C(i,j) of item it. */
static conv_block block_c(const conv_args *a, const conv_item *it, int i, int j)
{
    conv_block b;
    memset(&b, 0, sizeof b);
    channel_range(m_channels(a), it->tm * ST_CPE_ROWS * (size_t)a->bm + (size_t)i * a->bm, a->bm,
                  &b.m0, &b.ms);
    if (a->pass == CONV_BACKWARD_WEIGHTS) {
        channel_range(a->g.c, it->tn * ST_CPE_COLS * (size_t)a->bc + (size_t)j * a->bc, a->bc,
                      &b.k0, &b.ks);
        b.count = (size_t)b.ms * (size_t)b.ks * kernel_size(a);
    } else {
        b.unit = unit_of(a, it->tn * ST_CPE_COLS + (size_t)j);
        b.count = (size_t)b.ms * unit_pixels(&b.unit);
    }
    return b;
}

/* ---- DMA ---- */

/* count runs of run floats, pitch floats apart in main memory, packed in
 * LDM; one contiguous transfer when they are adjacent. */
static void get_runs(st_cpe *cpe, float *ldm, const float *src, size_t run, size_t pitch,
                     size_t count, st_cpe_reply *reply)
{
    if (count == 1 || pitch == run)
        st_cpe_dma_get(cpe, ldm, src, run * count * sizeof(float), reply);
    else
        st_cpe_dma_get_strided(cpe, ldm, src, run * sizeof(float), pitch * sizeof(float), count,
                               reply);
}

static void put_runs(st_cpe *cpe, float *dst, const float *ldm, size_t run, size_t pitch,
                     size_t count, st_cpe_reply *reply)
{
    if (count == 1 || pitch == run)
        st_cpe_dma_put(cpe, dst, ldm, run * count * sizeof(float), reply);
    else
        st_cpe_dma_put_strided(cpe, dst, ldm, run * sizeof(float), pitch * sizeof(float), count,
                               reply);
}

/* Block b's window of image b->unit.img of a [n, channels, h, w] tensor,
 * channels k0.. k0 + ks, packed [channel][row][column]. Whole rows make one
 * transfer for all channels, segments one per channel. */
static void get_window(st_cpe *cpe, float *ldm, const float *base, int channels, int h, int w,
                       const conv_block *b, st_cpe_reply *reply)
{
    if (b->count == 0)
        return;
    const conv_window *win = &b->win;
    size_t plane = (size_t)h * (size_t)w, per_channel = (size_t)win->rows * (size_t)win->cols;
    const float *src = base + ((size_t)b->unit.img * (size_t)channels + (size_t)b->k0) * plane +
                       (size_t)win->y0 * (size_t)w + (size_t)win->x0;
    if (win->cols == w) {
        get_runs(cpe, ldm, src, per_channel, plane, (size_t)b->ks, reply);
        return;
    }
    for (int c = 0; c < b->ks; c++)
        get_runs(cpe, ldm + (size_t)c * per_channel, src + (size_t)c * plane, (size_t)win->cols,
                 (size_t)w, (size_t)win->rows, reply);
}

static void get_a(st_cpe *cpe, const conv_args *a, const conv_block *b, float *ldm,
                  st_cpe_reply *reply)
{
    if (b->count == 0)
        return;
    const st_cpe_conv_geom *g = &a->g;
    size_t kk = kernel_size(a), pitch = (size_t)g->c * kk;
    switch (a->pass) {
    case CONV_FORWARD: /* w[m0.., k0.., kh kw]: ms runs of ks kh kw */
        get_runs(cpe, ldm, a->w + ((size_t)b->m0 * (size_t)g->c + (size_t)b->k0) * kk,
                 (size_t)b->ks * kk, pitch, (size_t)b->ms, reply);
        break;
    case CONV_BACKWARD_DATA: /* w[k0.., m0.., kh kw]: ks runs of ms kh kw */
        get_runs(cpe, ldm, a->w + ((size_t)b->k0 * (size_t)g->c + (size_t)b->m0) * kk,
                 (size_t)b->ms * kk, pitch, (size_t)b->ks, reply);
        break;
    case CONV_BACKWARD_WEIGHTS: { /* dy[img, m0.., row.., x0..]: ms runs of rows w */
        size_t plane = (size_t)g->oh * (size_t)g->ow;
        const conv_unit *u = &b->unit;
        get_runs(cpe, ldm,
                 a->dy + ((size_t)u->img * (size_t)g->oc + (size_t)b->m0) * plane +
                     (size_t)u->row * (size_t)g->ow + (size_t)u->x0,
                 unit_pixels(u), plane, (size_t)b->ms, reply);
        break;
    }
    }
}

static void get_b(st_cpe *cpe, const conv_args *a, const conv_block *b, float *ldm,
                  st_cpe_reply *reply)
{
    const st_cpe_conv_geom *g = &a->g;
    if (a->pass == CONV_BACKWARD_DATA)
        get_window(cpe, ldm, a->dy, g->oc, g->oh, g->ow, b, reply);
    else
        get_window(cpe, ldm, a->x, g->c, g->ih, g->iw, b, reply);
}

/* Where C block b lives in main memory: its first element, run length,
 * pitch and number of runs. */
static float *c_place(const conv_args *a, const conv_block *b, size_t *run, size_t *pitch,
                      size_t *count)
{
    const st_cpe_conv_geom *g = &a->g;
    *count = (size_t)b->ms;
    if (a->pass == CONV_BACKWARD_WEIGHTS) {
        size_t kk = kernel_size(a);
        *run = (size_t)b->ks * kk;
        *pitch = (size_t)g->c * kk;
        return a->dst + ((size_t)b->m0 * (size_t)g->c + (size_t)b->k0) * kk;
    }
    int channels = a->pass == CONV_FORWARD ? g->oc : g->c;
    size_t width = (size_t)unit_width(a), plane = (size_t)unit_rows(a) * width;
    const conv_unit *u = &b->unit;
    *run = unit_pixels(u);
    *pitch = plane;
    return a->dst + ((size_t)u->img * (size_t)channels + (size_t)b->m0) * plane +
           (size_t)u->row * width + (size_t)u->x0;
}

/* ---- the products of one step ---- */

/* The output columns p (of a unit starting at x0) whose input column
 * x0 sw - pw + p sw + kc lies in the window: [*p_lo, *p_hi); returns the
 * window column of p = 0 (possibly outside the window). */
static int columns_inside(const st_cpe_conv_geom *g, const conv_unit *u, const conv_window *win,
                          int kc, int *p_lo, int *p_hi)
{
    int off = u->x0 * g->sw - g->pw + kc - win->x0;
    *p_lo = max_int(0, ceil_div(-off, g->sw));
    *p_hi = min_int(u->w, floor_div(win->cols - 1 - off, g->sw) + 1);
    return off;
}

/* The kernel rows [*kr_lo, *kr_hi) that put output row oy inside the
 * window; returns the window row of kernel row 0. */
static int rows_inside(const st_cpe_conv_geom *g, const conv_window *win, int oy, int *kr_lo,
                       int *kr_hi)
{
    int top = oy * g->sh - g->ph - win->y0;
    *kr_lo = max_int(0, -top);
    *kr_hi = min_int(g->kh, win->rows - top);
    return top;
}

/* Forward: c [ms][pixels] += a [ms][ks][kh kw] (x) b [ks][rows][cols] (x
 * window). Returns the flops. */
static uint64_t multiply_forward(const st_cpe_conv_geom *g, double *c, const float *a,
                                 const float *b, const conv_block *ab, const conv_block *bb)
{
    const conv_unit *u = &bb->unit;
    const conv_window *win = &bb->win;
    size_t ms = (size_t)ab->ms, ks = (size_t)ab->ks, kk = (size_t)g->kh * (size_t)g->kw;
    size_t pixels = unit_pixels(u), plane = (size_t)win->rows * (size_t)win->cols;
    uint64_t macs = 0;
    for (int kc = 0; kc < g->kw; kc++) {
        int p_lo, p_hi, off = columns_inside(g, u, win, kc, &p_lo, &p_hi);
        if (p_hi <= p_lo)
            continue;
        for (int rr = 0; rr < u->rows; rr++) {
            int kr_lo, kr_hi, top = rows_inside(g, win, u->row + rr, &kr_lo, &kr_hi);
            if (kr_hi <= kr_lo)
                continue;
            for (size_t o = 0; o < ms; o++) {
                double *crow = c + o * pixels + (size_t)rr * (size_t)u->w;
                for (size_t i = 0; i < ks; i++) {
                    const float *taps = a + (o * ks + i) * kk + kc;
                    const float *bplane = b + i * plane;
                    for (int kr = kr_lo; kr < kr_hi; kr++) {
                        double tap = taps[kr * g->kw];
                        const float *brow = bplane + (size_t)(top + kr) * (size_t)win->cols;
                        for (int p = p_lo; p < p_hi; p++)
                            crow[p] += tap * brow[off + p * g->sw];
                    }
                }
            }
            macs += (uint64_t)(p_hi - p_lo) * ms * ks * (uint64_t)(kr_hi - kr_lo);
        }
    }
    return 2 * macs;
}

/* Backward-data: c [ms][pixels] (dx of the input unit) += a [ks][ms][kh kw]
 * (x) b [ks][rows][cols] (dy window). Input (iy, ix) meets output
 * ((iy + ph - kr) / sh, (ix + pw - kc) / sw) where both divide. */
static uint64_t multiply_backward_data(const st_cpe_conv_geom *g, double *c, const float *a,
                                       const float *b, const conv_block *ab,
                                       const conv_block *bb)
{
    const conv_unit *u = &bb->unit;
    const conv_window *win = &bb->win;
    size_t ms = (size_t)ab->ms, ks = (size_t)ab->ks, kk = (size_t)g->kh * (size_t)g->kw;
    size_t pixels = unit_pixels(u);
    uint64_t macs = 0;
    for (int rr = 0; rr < u->rows; rr++) {
        for (int kr = 0; kr < g->kh; kr++) {
            int t = u->row + rr + g->ph - kr; /* = oy sh */
            if (t < 0 || t % g->sh != 0)
                continue;
            int r = t / g->sh - win->y0;
            if (r < 0 || r >= win->rows)
                continue;
            for (int kc = 0; kc < g->kw; kc++) {
                /* Input column x0 + p meets output column (base + p) / sw. */
                int base = u->x0 + g->pw - kc;
                int lo = max_int(base, win->x0 * g->sw);
                int hi = min_int(base + u->w - 1, (win->x0 + win->cols - 1) * g->sw);
                lo = ceil_div(lo, g->sw) * g->sw;
                if (lo > hi)
                    continue;
                int p0 = lo - base, taps = (hi - lo) / g->sw + 1, col0 = lo / g->sw - win->x0;
                for (size_t o = 0; o < ks; o++) {
                    const float *brow =
                        b + (o * (size_t)win->rows + (size_t)r) * (size_t)win->cols + (size_t)col0;
                    for (size_t i = 0; i < ms; i++) {
                        double tap = a[(o * ms + i) * kk + (size_t)(kr * g->kw + kc)];
                        double *cp = c + i * pixels + (size_t)rr * (size_t)u->w + (size_t)p0;
                        for (int q = 0; q < taps; q++)
                            cp[q * g->sw] += tap * brow[q];
                    }
                }
                macs += (uint64_t)taps * ms * ks;
            }
        }
    }
    return 2 * macs;
}

/* Backward-weights: c [ms][ks][kh kw] += a [ms][pixels] (dy of the unit)
 * (x) b [ks][rows][cols] (its x window). */
static uint64_t multiply_backward_weights(const st_cpe_conv_geom *g, double *c, const float *a,
                                          const float *b, const conv_block *ab,
                                          const conv_block *bb)
{
    const conv_unit *u = &bb->unit;
    const conv_window *win = &bb->win;
    size_t ms = (size_t)ab->ms, ks = (size_t)bb->ks, kk = (size_t)g->kh * (size_t)g->kw;
    size_t pixels = unit_pixels(u), plane = (size_t)win->rows * (size_t)win->cols;
    uint64_t macs = 0;
    for (int kc = 0; kc < g->kw; kc++) {
        int p_lo, p_hi, off = columns_inside(g, u, win, kc, &p_lo, &p_hi);
        if (p_hi <= p_lo)
            continue;
        for (int rr = 0; rr < u->rows; rr++) {
            int kr_lo, kr_hi, top = rows_inside(g, win, u->row + rr, &kr_lo, &kr_hi);
            if (kr_hi <= kr_lo)
                continue;
            for (size_t o = 0; o < ms; o++) {
                const float *arow = a + o * pixels + (size_t)rr * (size_t)u->w;
                for (size_t i = 0; i < ks; i++) {
                    double *taps = c + (o * ks + i) * kk + kc;
                    const float *bplane = b + i * plane;
                    for (int kr = kr_lo; kr < kr_hi; kr++) {
                        const float *brow = bplane + (size_t)(top + kr) * (size_t)win->cols;
                        double sum = 0.0;
                        for (int p = p_lo; p < p_hi; p++)
                            sum += (double)arow[p] * brow[off + p * g->sw];
                        taps[kr * g->kw] += sum;
                    }
                }
            }
            macs += (uint64_t)(p_hi - p_lo) * ms * ks * (uint64_t)(kr_hi - kr_lo);
        }
    }
    return 2 * macs;
}

/* ---- the CPE program ---- */

typedef struct conv_buffers {
    float *own_a[2], *own_b[2]; /* this CPE's blocks of the current and next item */
    float *step_a, *step_b;     /* blocks received at a step */
    double *acc;                /* C, accumulated */
    float *out;                 /* C rounded, going out */
    st_cpe_reply get[2], put;
    size_t a_tag[2]; /* 1 + the A block own_a[pair] holds (tile along M, panel); 0: none */
} conv_buffers;

static void reply_reset(st_cpe_reply *reply)
{
    reply->count = 0;
    reply->done_cycle = 0.0;
}

/* Issue the DMA of this CPE's A and B blocks of item q into pair. */
static void load_item(st_cpe *cpe, const conv_args *a, conv_buffers *buf, size_t q, int pair)
{
    conv_item it = item_of(a, q);
    int row = st_cpe_row(cpe), col = st_cpe_col(cpe);
    reply_reset(&buf->get[pair]);
    conv_block ab = block_a(a, &it, row, col);
    size_t tag = a->pass == CONV_BACKWARD_WEIGHTS ? 0 : 1 + it.tm * a->panels + it.p;
    if (tag == 0 || buf->a_tag[pair] != tag) {
        get_a(cpe, a, &ab, buf->own_a[pair], &buf->get[pair]);
        buf->a_tag[pair] = tag;
    }
    conv_block bb = block_b(a, &it, row, col);
    get_b(cpe, a, &bb, buf->own_b[pair], &buf->get[pair]);
}

/* One operand's block for this step: the owner broadcasts it on bus and
 * computes on its own copy, the 7 others receive it into step. */
static const float *share_block(st_cpe *cpe, st_cpe_bus bus, int owner, const float *own,
                                float *step, size_t count)
{
    if (count == 0)
        return step;
    if (owner) {
        st_cpe_bcast_values(cpe, bus, ST_CPE_F32, own, count);
        return own;
    }
    st_cpe_recv_values(cpe, bus, ST_CPE_F32, step, count);
    return step;
}

/* Round C to float (adding dx's old value when accumulating) and put it;
 * the put completes behind the next tile. */
static void store_c(st_cpe *cpe, const conv_args *a, conv_buffers *buf, const conv_block *cb)
{
    if (cb->count == 0)
        return;
    size_t run, pitch, count;
    float *dst = c_place(a, cb, &run, &pitch, &count);
    st_cpe_dma_wait(cpe, &buf->put, buf->put.count);
    reply_reset(&buf->put);
    if (a->accumulate) {
        st_cpe_reply old = {0};
        get_runs(cpe, buf->out, dst, run, pitch, count, &old);
        st_cpe_dma_wait(cpe, &old, old.count);
        for (size_t e = 0; e < cb->count; e++)
            buf->out[e] = (float)((double)buf->out[e] + buf->acc[e]);
        st_cpe_flops(cpe, cb->count);
    } else {
        for (size_t e = 0; e < cb->count; e++)
            buf->out[e] = (float)buf->acc[e];
        st_cpe_moves(cpe, cb->count);
    }
    put_runs(cpe, dst, buf->out, run, pitch, count, &buf->put);
}

static uint64_t multiply(const conv_args *a, double *c, const float *ap, const float *bp,
                         const conv_block *ab, const conv_block *bb)
{
    switch (a->pass) {
    case CONV_FORWARD:
        return multiply_forward(&a->g, c, ap, bp, ab, bb);
    case CONV_BACKWARD_DATA:
        return multiply_backward_data(&a->g, c, ap, bp, ab, bb);
    case CONV_BACKWARD_WEIGHTS:
        break;
    }
    return multiply_backward_weights(&a->g, c, ap, bp, ab, bb);
}

static void conv_kernel(st_cpe *cpe, void *args)
{
    st_cpe_reply reply = {0};
    conv_args *a = st_cpe_ldm_alloc(cpe, sizeof *a, "arguments");
    st_cpe_dma_get(cpe, a, args, sizeof *a, &reply);
    st_cpe_dma_wait(cpe, &reply, 1);

    conv_buffers buf;
    memset(&buf, 0, sizeof buf);
    size_t a_bytes = a->a_cap * sizeof(float), b_bytes = a->b_cap * sizeof(float);
    buf.own_a[0] = st_cpe_ldm_alloc(cpe, a_bytes, "A block");
    buf.own_a[1] = st_cpe_ldm_alloc(cpe, a_bytes, "next A block");
    buf.own_b[0] = st_cpe_ldm_alloc(cpe, b_bytes, "B window");
    buf.own_b[1] = st_cpe_ldm_alloc(cpe, b_bytes, "next B window");
    buf.step_a = st_cpe_ldm_alloc(cpe, a_bytes, "step A block");
    buf.step_b = st_cpe_ldm_alloc(cpe, b_bytes, "step B window");
    buf.acc = st_cpe_ldm_alloc(cpe, a->c_cap * sizeof(double), "C accumulator");
    buf.out = st_cpe_ldm_alloc(cpe, a->c_cap * sizeof(float), "C out");

    int row = st_cpe_row(cpe), col = st_cpe_col(cpe);
    size_t items = a->tiles_m * a->tiles_n * a->panels;
    load_item(cpe, a, &buf, 0, 0);
    for (size_t q = 0; q < items; q++) {
        int pair = (int)(q & 1);
        conv_item it = item_of(a, q);
        if (q + 1 < items)
            load_item(cpe, a, &buf, q + 1, !pair);
        st_cpe_dma_wait(cpe, &buf.get[pair], buf.get[pair].count);
        conv_block cb = block_c(a, &it, row, col);
        if (it.p == 0)
            memset(buf.acc, 0, cb.count * sizeof(double));
        for (int s = 0; s < ST_CPE_COLS; s++) {
            conv_block ab = block_a(a, &it, row, s), bb = block_b(a, &it, s, col);
            const float *ap =
                share_block(cpe, ST_CPE_ROW, col == s, buf.own_a[pair], buf.step_a, ab.count);
            const float *bp =
                share_block(cpe, ST_CPE_COL, row == s, buf.own_b[pair], buf.step_b, bb.count);
            if (cb.count > 0 && ab.count > 0 && bb.count > 0)
                st_cpe_flops(cpe, multiply(a, buf.acc, ap, bp, &ab, &bb));
        }
        if (it.p + 1 == a->panels)
            store_c(cpe, a, &buf, &cb);
    }
    st_cpe_dma_wait(cpe, &buf.put, buf.put.count);
}

/* ---- the host side ---- */

/* Block capacities for the current bm, bc, bw, nb, ru, and the LDM they
 * take. */
static size_t plan_ldm_bytes(conv_args *a)
{
    const st_cpe_conv_geom *g = &a->g;
    size_t kk = kernel_size(a), bm = (size_t)a->bm, bc = (size_t)a->bc;
    size_t pixels = (size_t)a->ru * (size_t)a->bw, rows, cols;
    if (a->pass == CONV_BACKWARD_DATA) {
        rows = (size_t)min_int(g->oh, (a->ru + g->kh - 2) / g->sh + 1);
        cols = a->nb == 1 ? (size_t)g->ow
                          : (size_t)min_int(g->ow, (a->bw + g->kw - 2) / g->sw + 1);
    } else {
        rows = (size_t)min_int(g->ih, (a->ru - 1) * g->sh + g->kh);
        cols = a->nb == 1 ? (size_t)g->iw
                          : (size_t)min_int(g->iw, (a->bw - 1) * g->sw + g->kw);
    }
    a->b_cap = bc * rows * cols;
    if (a->pass == CONV_BACKWARD_WEIGHTS) {
        a->a_cap = bm * pixels;
        a->c_cap = bm * bc * kk;
    } else {
        a->a_cap = bm * bc * kk;
        a->c_cap = bm * pixels;
    }
    return align_ldm(sizeof(conv_args)) + 3 * align_ldm(a->a_cap * sizeof(float)) +
           3 * align_ldm(a->b_cap * sizeof(float)) + align_ldm(a->c_cap * sizeof(double)) +
           align_ldm(a->c_cap * sizeof(float));
}

/* Channel blocks for the unit shape in a (bw, nb, ru): bm from bm_max, bc
 * from its largest, shrunk (bc first) until the buffers fit, then evened
 * out so the last tile and panel are not mostly empty; and the loop
 * counts. Returns the LDM bytes, more than ST_CPE_LDM_BYTES when even one
 * channel each does not fit. */
static size_t plan_channels(conv_args *a, int bm_max)
{
    int m = m_channels(a), c = c_channels(a);
    a->bm = min_int((m + ST_CPE_ROWS - 1) / ST_CPE_ROWS, bm_max);
    a->bc = min_int((c + ST_CPE_COLS - 1) / ST_CPE_COLS, CONV_BLOCK_CHANNELS_MAX);
    size_t bytes;
    while ((bytes = plan_ldm_bytes(a)) > ST_CPE_LDM_BYTES) {
        if (a->bc > 8)
            a->bc--;
        else if (a->bm > 8)
            a->bm--;
        else if (a->bc > 1)
            a->bc--;
        else if (a->bm > 1)
            a->bm--;
        else
            return bytes;
    }
    size_t m_tiles = div_up((size_t)m, (size_t)ST_CPE_ROWS * (size_t)a->bm);
    a->bm = (int)div_up((size_t)m, ST_CPE_ROWS * m_tiles);
    size_t c_tiles = div_up((size_t)c, (size_t)ST_CPE_COLS * (size_t)a->bc);
    a->bc = (int)div_up((size_t)c, ST_CPE_COLS * c_tiles);
    bytes = plan_ldm_bytes(a);
    a->units = (size_t)a->n * units_per_image(a);
    a->tiles_m = m_tiles;
    if (a->pass == CONV_BACKWARD_WEIGHTS) {
        a->tiles_n = c_tiles;
        a->panels = div_up(a->units, ST_CPE_ROWS);
    } else {
        a->tiles_n = div_up(a->units, ST_CPE_COLS);
        a->panels = c_tiles;
    }
    return bytes;
}

/* The plan's predicted cycles under p, from full blocks: per item, 8 steps
 * of computing and receiving the two blocks (a broadcast of many messages
 * runs at one message per (send + latency + receive) / FIFO depth, the
 * FIFO's round trip), overlapped with the DMA of the next item's blocks. */
static double plan_cycles(const conv_args *a, const st_cpe_cost_params *p)
{
    double pixels = (double)a->ru * (double)a->bw;
    double flops = 2.0 * a->bm * a->bc * (double)kernel_size(a) * pixels;
    if (a->pass == CONV_BACKWARD_DATA) /* an input meets 1 / (sh sw) of the kernel */
        flops /= (double)a->g.sh * (double)a->g.sw;
    double send = cpe_cost_send_cycles(p, 1);
    double per_msg = (send + p->regcomm_latency_cycles + p->regcomm_recv_cycles) /
                     ST_CPE_FIFO_DEPTH;
    if (per_msg < p->regcomm_recv_cycles)
        per_msg = p->regcomm_recv_cycles;
    if (per_msg < send)
        per_msg = send;
    double msgs = (double)(div_up(a->a_cap, ST_CPE_MSG_DOUBLES) +
                           div_up(a->b_cap, ST_CPE_MSG_DOUBLES));
    double step = cpe_cost_flop_cycles(p, flops) + msgs * per_msg;
    size_t b_transfers = a->nb == 1 ? 1 : (size_t)a->bc;
    double dma = b_transfers * cpe_cost_dma_cycles(p, ST_CPE_DMA_CONTIGUOUS,
                                                   a->b_cap * sizeof(float) / b_transfers, 1);
    if (a->pass == CONV_BACKWARD_WEIGHTS || a->panels > 2)
        dma += cpe_cost_dma_cycles(p, ST_CPE_DMA_CONTIGUOUS, a->a_cap * sizeof(float), 1);
    double item = ST_CPE_COLS * step > dma ? ST_CPE_COLS * step : dma;
    return (double)(a->tiles_m * a->tiles_n * a->panels) * item;
}

/* The plan: every unit shape (rows cut into nb segments of bw columns, or
 * whole rows ru at a time) and largest M block, each with the largest
 * channel blocks that fit, costed by plan_cycles; the cheapest wins.
 * Returns 0, or the bytes the smallest blocks need when nothing fits. */
static size_t conv_plan(conv_args *a, const st_cpe_cost_params *p)
{
    static const int bm_caps[] = {64, 32, 16, 8};
    int width = unit_width(a), rows = unit_rows(a);
    conv_args best = *a;
    double best_cycles = -1.0;
    size_t least_bytes = SIZE_MAX;
    for (int nb = (int)div_up((size_t)width, CONV_UNIT_PIXELS_MAX); nb <= width; nb++) {
        int bw = (int)div_up((size_t)width, (size_t)nb);
        if (nb > 1 && (int)div_up((size_t)width, (size_t)(nb - 1)) == bw)
            continue;
        if (bw < CONV_UNIT_WIDTH_MIN && best_cycles >= 0.0)
            break;
        int ru_max = nb == 1 ? max_int(1, min_int(rows, CONV_UNIT_PIXELS_MAX / width)) : 1;
        for (int ru = 1; ru <= ru_max; ru++)
            for (size_t k = 0; k < sizeof bm_caps / sizeof bm_caps[0]; k++) {
                conv_args t = *a;
                t.nb = nb;
                t.bw = bw;
                t.ru = ru;
                size_t bytes = plan_channels(&t, bm_caps[k]);
                if (bytes > ST_CPE_LDM_BYTES) {
                    least_bytes = bytes < least_bytes ? bytes : least_bytes;
                    continue;
                }
                double cycles = plan_cycles(&t, p);
                if (best_cycles < 0.0 || cycles < best_cycles) {
                    best = t;
                    best_cycles = cycles;
                }
            }
    }
    if (best_cycles < 0.0)
        return least_bytes;
    *a = best;
    return 0;
}

static int geometry_valid(const st_cpe_conv_geom *g)
{
    return g->c >= 1 && g->oc >= 1 && g->ih >= 1 && g->iw >= 1 && g->oh >= 1 && g->ow >= 1 &&
           g->kh >= 1 && g->kw >= 1 && g->sh >= 1 && g->sw >= 1 && g->ph >= 0 && g->pw >= 0;
}

/* Check the request, plan it and launch. */
static st_status conv_launch(st_cpe_cluster *cg, const char *name, conv_args *a,
                             st_cpe_counters *out, st_error *err)
{
    if (out)
        memset(out, 0, sizeof *out);
    const st_cpe_conv_geom *g = &a->g;
    if (!cg)
        return st_fail(err, ST_EINPUT, "%s: no cluster given", name);
    if (!geometry_valid(g) || a->n < 1)
        return st_fail(err, ST_EINPUT,
                       "%s: bad geometry: %d images, %d -> %d channels, input %dx%d, output "
                       "%dx%d, kernel %dx%d, stride %dx%d, padding %dx%d (expected sizes, "
                       "channels, kernel and stride >= 1, padding >= 0)",
                       name, a->n, g->c, g->oc, g->ih, g->iw, g->oh, g->ow, g->kh, g->kw, g->sh,
                       g->sw, g->ph, g->pw);
    if (!a->dst || (a->pass != CONV_BACKWARD_DATA && !a->x) ||
        (a->pass != CONV_BACKWARD_WEIGHTS && !a->w) || (a->pass != CONV_FORWARD && !a->dy))
        return st_fail(err, ST_EINPUT, "%s: a tensor pointer is NULL", name);
    size_t need = conv_plan(a, st_cpe_cluster_cost_params(cg));
    if (need)
        return st_fail(err, ST_EINPUT,
                       "%s: a %dx%d kernel (stride %dx%d) over %dx%d inputs needs %zu bytes of "
                       "LDM per CPE even with blocks of one channel and one column, more than "
                       "the %d-byte LDM",
                       name, g->kh, g->kw, g->sh, g->sw, g->ih, g->iw, need, ST_CPE_LDM_BYTES);
    return st_cpe_launch(cg, name, conv_kernel, a, out, err);
}

static conv_args conv_args_new(const st_cpe_conv_geom *geom, int n, conv_pass pass)
{
    conv_args a;
    memset(&a, 0, sizeof a);
    a.g = *geom;
    a.n = n;
    a.pass = pass;
    return a;
}

st_status st_cpe_conv_implicit_forward(st_cpe_cluster *cg, const st_cpe_conv_geom *geom, int n,
                                       const float *x, const float *w, float *y,
                                       st_cpe_counters *out, st_error *err)
{
    conv_args a = conv_args_new(geom, n, CONV_FORWARD);
    a.x = x;
    a.w = w;
    a.dst = y;
    return conv_launch(cg, "conv_implicit_forward", &a, out, err);
}

st_status st_cpe_conv_implicit_backward_data(st_cpe_cluster *cg, const st_cpe_conv_geom *geom,
                                             int n, const float *dy, const float *w, float *dx,
                                             int accumulate, st_cpe_counters *out, st_error *err)
{
    conv_args a = conv_args_new(geom, n, CONV_BACKWARD_DATA);
    a.dy = dy;
    a.w = w;
    a.dst = dx;
    a.accumulate = accumulate != 0;
    return conv_launch(cg, "conv_implicit_backward_data", &a, out, err);
}

st_status st_cpe_conv_implicit_backward_weights(st_cpe_cluster *cg, const st_cpe_conv_geom *geom,
                                                int n, const float *x, const float *dy, float *dw,
                                                st_cpe_counters *out, st_error *err)
{
    conv_args a = conv_args_new(geom, n, CONV_BACKWARD_WEIGHTS);
    a.x = x;
    a.dy = dy;
    a.dst = dw;
    return conv_launch(cg, "conv_implicit_backward_weights", &a, out, err);
}

int st_cpe_conv_implicit_suits(const st_cpe_conv_geom *geom)
{
    if (!geom || !geometry_valid(geom) || geom->c < CONV_SUITS_MIN_CHANNELS ||
        geom->oc < CONV_SUITS_MIN_CHANNELS)
        return 0;
    st_cpe_cost_params p = st_cpe_cost_params_default();
    for (int pass = CONV_FORWARD; pass <= CONV_BACKWARD_WEIGHTS; pass++) {
        conv_args a = conv_args_new(geom, 1, (conv_pass)pass);
        if (conv_plan(&a, &p) != 0)
            return 0;
    }
    return 1;
}
