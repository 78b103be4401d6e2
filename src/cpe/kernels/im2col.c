/* im2col and col2im as CPE programs over n images in one launch (floats,
 * one group), the explicit convolution's data movement, as swCaffe's
 * sw_slave_im2col.c does it.
 *
 * col holds n matrices of c kh kw rows of P = oh ow, one after another
 * ([n][c kh kw][P]): for image b, row (ch, ki, kj), column (oy, ox) holds
 * src[b][ch][oy sh - ph + ki][ox sw - pw + kj], 0 outside the image.
 *
 * im2col: the rows of the padded images, n c (ih + 2 ph) of them, are cut
 * into 64 contiguous ranges, one per CPE. For each padded row y of channel
 * ch the CPE gets the row (or zeroes its buffer, for a padding row), with
 * pw zeros on each side; then for each kernel column kj it gathers the ow
 * values ox sw + kj into an output buffer (scalar loads and stores) and,
 * for every kernel row ki with (y - ki) a multiple of sh giving an output
 * row oy in range, puts the buffer to col row (ch, ki, kj), columns oy ow..
 * Every transfer is waited for before the next step, as swCaffe's kernel
 * does (no double buffering).
 *
 * col2im: the CPEs take the image rows (padding rows have no gradient) in
 * contiguous ranges; for each row y the CPE starts from zeros (or from dsrc,
 * accumulating), and for each (kj, ki) whose output row oy is in range it
 * gets the ow values of col row (ch, ki, kj) at oy and adds each to the
 * input column it came from; then puts the row.
 *
 * Rows too wide for the LDM are cut into column segments (a segment of
 * output columns with the input columns they read, or of input columns with
 * the output columns that reach them); each segment is then a unit of its
 * own. swCaffe has no such case (it fails); the segments keep every
 * geometry runnable.
 *
 * Cost declared: a gather or scatter element is a scalar load and store
 * (scatter: two loads, an add and a store) plus its address arithmetic;
 * zeroing is vector stores. DMA: one get per image row, one put of ow values
 * per (row, ki, kj) that lands in col (im2col); one get of ow per (row, ki,
 * kj) and one put per row (col2im): short transfers for small images,
 * which the measured DMA curve makes slow. */
#include <string.h>

#include "kernel_common.h"

/* LDM a unit's buffers leave for the arguments and alignment. */
#define IM2COL_LDM_RESERVE 4096

/* Floats of LDM a unit's buffers may take on cg. */
static size_t im2col_ldm_floats(const st_cpe_cluster *cg)
{
    return ((size_t)st_cpe_cluster_machine(cg)->ldm_bytes - IM2COL_LDM_RESERVE) / sizeof(float);
}

typedef struct im2col_args {
    st_cpe_conv_geom g;
    int n;
    const float *src; /* im2col: images; col2im: dcol */
    float *dst;       /* im2col: col; col2im: dsrc */
    int accumulate;   /* col2im: add to dsrc */
    size_t image_stride, row_pitch; /* floats from one image's col to the next ([c kh kw][P]),
                                       and per col row (P) */
    int segment;      /* columns per unit: output columns (im2col), input columns (col2im) */
    int segments;     /* units per row */
} im2col_args;

static size_t col_rows(const st_cpe_conv_geom *g)
{
    return (size_t)g->c * g->kh * g->kw;
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

/* ---- im2col ---- */

/* Output columns [ox0, ox1) of segment s. */
static void out_segment(const im2col_args *a, int s, int *ox0, int *ox1)
{
    *ox0 = s * a->segment;
    *ox1 = *ox0 + a->segment < a->g.ow ? *ox0 + a->segment : a->g.ow;
}

/* Input columns the output columns [ox0, ox1) read, padding included:
 * [x0, x0 + span). */
static void in_span(const st_cpe_conv_geom *g, int ox0, int ox1, int *x0, int *span)
{
    *x0 = ox0 * g->sw - g->pw;
    *span = (ox1 - 1) * g->sw + g->kw - ox0 * g->sw;
}

static void im2col_unit(st_cpe *cpe, const im2col_args *a, float *row, float *out, size_t unit)
{
    const st_cpe_conv_geom *g = &a->g;
    int padded = g->ih + 2 * g->ph;
    int s = (int)(unit % (size_t)a->segments);
    size_t r = unit / (size_t)a->segments;
    int y = (int)(r % (size_t)padded) - g->ph;
    size_t plane = r / (size_t)padded; /* b c + ch */
    size_t b = plane / (size_t)g->c, ch = plane % (size_t)g->c;
    int ox0, ox1, x0, span;
    out_segment(a, s, &ox0, &ox1);
    in_span(g, ox0, ox1, &x0, &span);
    int v0 = x0 < 0 ? 0 : x0, v1 = x0 + span < g->iw ? x0 + span : g->iw;
    int inside = y >= 0 && y < g->ih && v1 > v0;
    /* The buffer holds input columns [x0, x0 + span): zeros, then the part
     * inside the image. */
    cpe_vector_loop(cpe, (size_t)span, 0.0, 1.0, 0.0);
    if (!st_cpe_cost_only(cpe))
        memset(row, 0, (size_t)span * sizeof(float));
    if (inside)
        cpe_get_now(cpe, row + (v0 - x0),
                    a->src + (plane * (size_t)g->ih + (size_t)y) * (size_t)g->iw + (size_t)v0,
                    (size_t)(v1 - v0) * sizeof(float));
    size_t width = (size_t)(ox1 - ox0);
    float *col = a->dst + b * a->image_stride;
    for (int kj = 0; kj < g->kw; kj++) {
        cpe_scalar_loop(cpe, width, 0.0, 2.0, 1.0, 0.0);
        if (!st_cpe_cost_only(cpe))
            for (size_t k = 0; k < width; k++)
                out[k] = row[k * (size_t)g->sw + (size_t)kj];
        for (int ki = 0; ki < g->kh; ki++) {
            int t = y + g->ph - ki;
            if (t < 0 || t % g->sh != 0 || t / g->sh >= g->oh)
                continue;
            size_t crow = (ch * (size_t)g->kh + (size_t)ki) * (size_t)g->kw + (size_t)kj;
            cpe_put_now(cpe, col + crow * a->row_pitch + (size_t)(t / g->sh) * g->ow + (size_t)ox0,
                        out, width * sizeof(float));
        }
    }
}

static void im2col_kernel(st_cpe *cpe, void *args)
{
    const im2col_args *a = cpe_kernel_args(cpe, args, sizeof(im2col_args));
    const st_cpe_conv_geom *g = &a->g;
    int x0, span;
    in_span(g, 0, a->segment < g->ow ? a->segment : g->ow, &x0, &span);
    float *row = st_cpe_ldm_alloc(cpe, (size_t)span * sizeof(float), "padded input row");
    float *out = st_cpe_ldm_alloc(cpe, (size_t)a->segment * sizeof(float), "col segment");
    size_t units = (size_t)a->n * g->c * (size_t)(g->ih + 2 * g->ph) * (size_t)a->segments;
    size_t lo, hi;
    cpe_kernel_share(0, units, 1, st_cpe_id(cpe), st_cpe_count(cpe), &lo, &hi);
    for (size_t u = lo; u < hi; u++)
        im2col_unit(cpe, a, row, out, u);
}

/* ---- col2im ---- */

static void col2im_unit(st_cpe *cpe, const im2col_args *a, float *row, float *in, size_t unit)
{
    const st_cpe_conv_geom *g = &a->g;
    int s = (int)(unit % (size_t)a->segments);
    size_t r = unit / (size_t)a->segments;
    int y = (int)(r % (size_t)g->ih);
    size_t plane = r / (size_t)g->ih;
    size_t b = plane / (size_t)g->c, ch = plane % (size_t)g->c;
    int x0 = s * a->segment, x1 = x0 + a->segment < g->iw ? x0 + a->segment : g->iw;
    size_t width = (size_t)(x1 - x0);
    float *dsrc = a->dst + (plane * (size_t)g->ih + (size_t)y) * (size_t)g->iw + (size_t)x0;
    if (a->accumulate) {
        cpe_get_now(cpe, row, dsrc, width * sizeof(float));
    } else {
        cpe_vector_loop(cpe, width, 0.0, 1.0, 0.0);
        if (!st_cpe_cost_only(cpe))
            memset(row, 0, width * sizeof(float));
    }
    const float *col = a->src + b * a->image_stride;
    for (int kj = 0; kj < g->kw; kj++)
        for (int ki = 0; ki < g->kh; ki++) {
            int t = y + g->ph - ki;
            if (t < 0 || t % g->sh != 0 || t / g->sh >= g->oh)
                continue;
            /* Output columns ox with x0 <= ox sw - pw + kj < x1. */
            int ox0 = ceil_div(x0 + g->pw - kj, g->sw), ox1 = floor_div(x1 - 1 + g->pw - kj, g->sw) + 1;
            if (ox0 < 0)
                ox0 = 0;
            if (ox1 > g->ow)
                ox1 = g->ow;
            if (ox1 <= ox0)
                continue;
            size_t crow = (ch * (size_t)g->kh + (size_t)ki) * (size_t)g->kw + (size_t)kj;
            size_t count = (size_t)(ox1 - ox0);
            cpe_get_now(cpe, in,
                        col + crow * a->row_pitch + (size_t)(t / g->sh) * g->ow + (size_t)ox0,
                        count * sizeof(float));
            cpe_scalar_loop(cpe, count, 1.0, 3.0, 1.0, 1.0);
            if (!st_cpe_cost_only(cpe))
                for (size_t k = 0; k < count; k++)
                    row[(size_t)((ox0 + (int)k) * g->sw - g->pw + kj - x0)] += in[k];
        }
    cpe_put_now(cpe, dsrc, row, width * sizeof(float));
}

static void col2im_kernel(st_cpe *cpe, void *args)
{
    const im2col_args *a = cpe_kernel_args(cpe, args, sizeof(im2col_args));
    const st_cpe_conv_geom *g = &a->g;
    float *row = st_cpe_ldm_alloc(cpe, (size_t)a->segment * sizeof(float), "image row");
    size_t reach = (size_t)(a->segment + g->kw) / (size_t)g->sw + 1;
    float *in = st_cpe_ldm_alloc(cpe, (reach < (size_t)g->ow ? reach : (size_t)g->ow) *
                                          sizeof(float), "col segment");
    size_t units = (size_t)a->n * g->c * (size_t)g->ih * (size_t)a->segments;
    size_t lo, hi;
    cpe_kernel_share(0, units, 1, st_cpe_id(cpe), st_cpe_count(cpe), &lo, &hi);
    for (size_t u = lo; u < hi; u++)
        col2im_unit(cpe, a, row, in, u);
}

/* ---- the host side ---- */

static st_status im2col_check(const st_cpe_conv_geom *g, int n, const void *src, const void *dst,
                              const char *what, st_error *err)
{
    if (!src || !dst || n < 0 || g->c < 1 || g->ih < 1 || g->iw < 1 || g->oh < 1 ||
        g->ow < 1 || g->kh < 1 || g->kw < 1 || g->sh < 1 || g->sw < 1 || g->ph < 0 || g->pw < 0)
        return st_fail(err, ST_EINPUT, "st_cpe_%s: bad geometry or NULL buffers", what);
    if ((g->oh - 1) * g->sh - g->ph + g->kh > g->ih + g->ph ||
        (g->ow - 1) * g->sw - g->pw + g->kw > g->iw + g->pw)
        return st_fail(err, ST_EINPUT, "st_cpe_%s: the output (%d x %d) reaches past the padded "
                       "input", what, g->oh, g->ow);
    return ST_OK;
}

/* Where image b's col matrix lies: [c kh kw][P] per image. */
static void col_layout(im2col_args *a)
{
    size_t P = (size_t)a->g.oh * (size_t)a->g.ow;
    a->image_stride = col_rows(&a->g) * P;
    a->row_pitch = P;
}

st_status st_cpe_im2col(st_cpe_cluster *cg, const st_cpe_conv_geom *geom, int n,
                        const float *src, float *col, st_cpe_counters *out, st_error *err)
{
    if (out)
        memset(out, 0, sizeof *out);
    st_status st = im2col_check(geom, n, src, col, "im2col", err);
    if (st != ST_OK || n == 0)
        return st;
    im2col_args a = {.g = *geom, .n = n, .src = src, .dst = col, .segment = geom->ow};
    col_layout(&a);
    /* A unit needs its input span and its output segment. */
    size_t ldm_floats = im2col_ldm_floats(cg);
    for (;;) {
        int x0, span;
        in_span(geom, 0, a.segment, &x0, &span);
        if ((size_t)span + (size_t)a.segment <= ldm_floats)
            break;
        a.segment = (a.segment + 1) / 2;
    }
    a.segments = (geom->ow + a.segment - 1) / a.segment;
    return st_cpe_launch(cg, "im2col", im2col_kernel, &a, out, err);
}

st_status st_cpe_col2im(st_cpe_cluster *cg, const st_cpe_conv_geom *geom, int n,
                        const float *dcol, float *dsrc, int accumulate, st_cpe_counters *out,
                        st_error *err)
{
    if (out)
        memset(out, 0, sizeof *out);
    st_status st = im2col_check(geom, n, dcol, dsrc, "col2im", err);
    if (st != ST_OK || n == 0)
        return st;
    im2col_args a = {.g = *geom, .n = n, .src = dcol, .dst = dsrc, .accumulate = accumulate != 0,
                     .segment = geom->iw};
    col_layout(&a);
    size_t ldm_floats = im2col_ldm_floats(cg);
    while ((size_t)a.segment + (size_t)(a.segment + geom->kw) / (size_t)geom->sw + 1 > ldm_floats)
        a.segment = (a.segment + 1) / 2;
    a.segments = (geom->iw + a.segment - 1) / a.segment;
    return st_cpe_launch(cg, "col2im", col2im_kernel, &a, out, err);
}
