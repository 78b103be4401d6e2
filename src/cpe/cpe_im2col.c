/* im2col and col2im as CPE programs (one image, one group, floats), for
 * explicit convolution = im2col + GEMM and its data gradient.
 *
 * col has c kh kw rows of P = oh ow: row (ch, ki, kj), column (oy, ox) holds
 * src[ch][oy sh - ph + ki][ox sw - pw + kj], 0 outside the image.
 *
 * im2col: the unit of work is one output row of one channel, (ch, oy);
 * units go round-robin to the CPEs (unit u to CPE u mod 64). A unit's kh
 * input rows oy sh - ph .. + kh - 1 are consecutive in memory: one get of
 * the valid ones. The CPE lays out the kh kw segments of ow values the unit
 * contributes - row (ch, ki, kj), columns oy ow .. + ow - 1 - packed in LDM
 * (each segment's span inside the image, found from the coordinates, is
 * copied and the padding around it zeroed: no per-element test), and puts
 * them with one strided DMA (kh kw blocks of ow floats, P floats apart).
 *
 * col2im: the unit is one input row (ch, y), so no two CPEs add to the same
 * element. Output rows oy with oy sh - ph + ki = y for some ki contribute:
 * for each such ki, one strided get of the kw segments (ch, ki, 0..kw-1) at
 * columns oy ow .. + ow - 1. The CPE gets the row of dsrc, adds every
 * contribution that lands inside it, and puts it back.
 *
 * Both keep two units in flight when two fit the LDM (the next unit's gets
 * are issued before the current one is worked on, its put waited for only
 * when its buffers are reused), else one. LDM per unit: (kh iw + kh kw ow)
 * floats for im2col, (iw + kh kw ow) for col2im; a geometry for which one
 * unit does not fit is refused with ST_EINPUT.
 *
 * Cost per unit: im2col moves kh kw ow elements in LDM; col2im adds up to
 * kh kw ow (flops). DMA: kh iw + kh kw ow floats (im2col), 2 iw + kh kw ow
 * (col2im); blocks of ow floats are short for small images, which the cost
 * model charges as 256-byte blocks. */
#include <string.h>

#include "cpe_internal.h"

typedef struct im2col_args {
    st_cpe_conv_geom g;
    const float *src; /* im2col: the image; col2im: dcol */
    float *dst;       /* im2col: col; col2im: dsrc, accumulated into */
    int slots;        /* units in flight per CPE: 1 or 2 */
} im2col_args;

/* One unit's LDM buffers and DMA replies. */
typedef struct unit_slot {
    float *rows;      /* im2col: kh input rows; col2im: the dsrc row */
    float *segments;  /* kh kw segments of ow */
    st_cpe_reply get, put;
} unit_slot;

static size_t im2col_unit_floats(const st_cpe_conv_geom *g)
{
    return (size_t)g->kh * g->iw + (size_t)g->kh * g->kw * g->ow;
}

static size_t col2im_unit_floats(const st_cpe_conv_geom *g)
{
    return (size_t)g->iw + (size_t)g->kh * g->kw * g->ow;
}

static void slots_alloc(st_cpe *cpe, unit_slot slot[2], int slots, size_t row_floats,
                        size_t segment_floats)
{
    memset(slot, 0, 2 * sizeof *slot);
    for (int s = 0; s < slots; s++) {
        slot[s].rows = st_cpe_ldm_alloc(cpe, row_floats * sizeof(float), "input rows");
        slot[s].segments = st_cpe_ldm_alloc(cpe, segment_floats * sizeof(float), "col segments");
    }
}

/* count blocks of block floats, pitch floats apart in main memory. */
static void put_blocks(st_cpe *cpe, float *dst, const float *ldm, size_t block, size_t pitch,
                       size_t count, st_cpe_reply *reply)
{
    if (count == 1 || pitch == block)
        st_cpe_dma_put(cpe, dst, ldm, block * count * sizeof(float), reply);
    else
        st_cpe_dma_put_strided(cpe, dst, ldm, block * sizeof(float), pitch * sizeof(float), count,
                               reply);
}

static void get_blocks(st_cpe *cpe, float *ldm, const float *src, size_t block, size_t pitch,
                       size_t count, st_cpe_reply *reply)
{
    if (count == 1 || pitch == block)
        st_cpe_dma_get(cpe, ldm, src, block * count * sizeof(float), reply);
    else
        st_cpe_dma_get_strided(cpe, ldm, src, block * sizeof(float), pitch * sizeof(float), count,
                               reply);
}

static void reply_reset(st_cpe_reply *reply)
{
    reply->count = 0;
    reply->done_cycle = 0.0;
}

/* The kernel rows ki_lo .. ki_hi - 1 of output row oy fall inside the image. */
static void valid_kernel_rows(const st_cpe_conv_geom *g, int oy, int *ki_lo, int *ki_hi)
{
    int top = oy * g->sh - g->ph;
    *ki_lo = top < 0 ? -top : 0;
    *ki_hi = g->ih - top < g->kh ? g->ih - top : g->kh;
    if (*ki_hi < *ki_lo)
        *ki_hi = *ki_lo;
}

/* ---- im2col ---- */

static void im2col_issue_get(st_cpe *cpe, const im2col_args *a, unit_slot *slot, size_t unit)
{
    const st_cpe_conv_geom *g = &a->g;
    int ch = (int)(unit / (size_t)g->oh), oy = (int)(unit % (size_t)g->oh);
    int ki_lo, ki_hi;
    valid_kernel_rows(g, oy, &ki_lo, &ki_hi);
    reply_reset(&slot->get);
    if (ki_hi > ki_lo) {
        size_t y = (size_t)(oy * g->sh - g->ph + ki_lo);
        st_cpe_dma_get(cpe, slot->rows + (size_t)ki_lo * g->iw,
                       a->src + ((size_t)ch * g->ih + y) * g->iw,
                       (size_t)(ki_hi - ki_lo) * g->iw * sizeof(float), &slot->get);
    }
}

/* The output columns ox_lo .. ox_hi - 1 read inside the image through
 * kernel column kj: 0 <= ox sw - pw + kj < iw. */
static void valid_output_cols(const st_cpe_conv_geom *g, int kj, int *ox_lo, int *ox_hi)
{
    int shift = g->pw - kj; /* x = ox sw - shift */
    *ox_lo = shift > 0 ? (shift + g->sw - 1) / g->sw : 0;
    *ox_hi = (g->iw + shift + g->sw - 1) / g->sw; /* the first ox with x >= iw */
    if (*ox_lo > g->ow)
        *ox_lo = g->ow;
    if (*ox_hi > g->ow)
        *ox_hi = g->ow;
    if (*ox_hi < *ox_lo)
        *ox_hi = *ox_lo;
}

static void im2col_pack(st_cpe *cpe, const st_cpe_conv_geom *g, unit_slot *slot, int oy)
{
    int ki_lo, ki_hi;
    valid_kernel_rows(g, oy, &ki_lo, &ki_hi);
    size_t ow = (size_t)g->ow;
    float *out = slot->segments;
    for (int ki = 0; ki < g->kh; ki++)
        for (int kj = 0; kj < g->kw; kj++, out += ow) {
            int lo = 0, hi = 0;
            if (ki >= ki_lo && ki < ki_hi)
                valid_output_cols(g, kj, &lo, &hi);
            memset(out, 0, (size_t)lo * sizeof *out);
            if (hi > lo) {
                const float *in = slot->rows + (size_t)ki * g->iw + (lo * g->sw - g->pw + kj);
                if (g->sw == 1)
                    memcpy(out + lo, in, (size_t)(hi - lo) * sizeof *out);
                else
                    for (int ox = lo; ox < hi; ox++)
                        out[ox] = in[(size_t)(ox - lo) * g->sw];
            }
            memset(out + hi, 0, (ow - (size_t)hi) * sizeof *out);
        }
    st_cpe_moves(cpe, (uint64_t)g->kh * g->kw * g->ow);
}

static void im2col_kernel(st_cpe *cpe, void *args)
{
    st_cpe_reply reply = {0};
    im2col_args *a = st_cpe_ldm_alloc(cpe, sizeof *a, "arguments");
    st_cpe_dma_get(cpe, a, args, sizeof *a, &reply);
    st_cpe_dma_wait(cpe, &reply, 1);
    const st_cpe_conv_geom *g = &a->g;
    size_t per_kernel = (size_t)g->kh * g->kw, plane = (size_t)g->oh * g->ow;
    unit_slot slot[2];
    slots_alloc(cpe, slot, a->slots, (size_t)g->kh * g->iw, per_kernel * g->ow);
    size_t units = (size_t)g->c * g->oh, first = (size_t)st_cpe_id(cpe);
    if (first < units)
        im2col_issue_get(cpe, a, &slot[0], first);
    for (size_t u = first, k = 0; u < units; u += ST_CPE_COUNT, k++) {
        unit_slot *cur = &slot[k % (size_t)a->slots];
        size_t next = u + ST_CPE_COUNT;
        if (a->slots == 2 && next < units)
            im2col_issue_get(cpe, a, &slot[(k + 1) % 2], next);
        st_cpe_dma_wait(cpe, &cur->get, cur->get.count);
        st_cpe_dma_wait(cpe, &cur->put, cur->put.count); /* its segments are reused */
        size_t ch = u / (size_t)g->oh, oy = u % (size_t)g->oh;
        im2col_pack(cpe, g, cur, (int)oy);
        reply_reset(&cur->put);
        put_blocks(cpe, a->dst + ch * per_kernel * plane + oy * g->ow, cur->segments,
                   (size_t)g->ow, plane, per_kernel, &cur->put);
        if (a->slots == 1 && next < units)
            im2col_issue_get(cpe, a, cur, next);
    }
    for (int s = 0; s < a->slots; s++)
        st_cpe_dma_wait(cpe, &slot[s].put, slot[s].put.count);
}

/* ---- col2im ---- */

/* Output row contributing to input row y through kernel row ki, or -1. */
static int contributing_row(const st_cpe_conv_geom *g, int y, int ki)
{
    int t = y + g->ph - ki;
    if (t < 0 || t % g->sh != 0 || t / g->sh >= g->oh)
        return -1;
    return t / g->sh;
}

static void col2im_issue_get(st_cpe *cpe, const im2col_args *a, unit_slot *slot, size_t unit)
{
    const st_cpe_conv_geom *g = &a->g;
    size_t ch = unit / (size_t)g->ih, plane = (size_t)g->oh * g->ow;
    int y = (int)(unit % (size_t)g->ih);
    reply_reset(&slot->get);
    st_cpe_dma_get(cpe, slot->rows, a->dst + unit * (size_t)g->iw, (size_t)g->iw * sizeof(float),
                   &slot->get);
    for (int ki = 0; ki < g->kh; ki++) {
        int oy = contributing_row(g, y, ki);
        if (oy < 0)
            continue;
        size_t row = (ch * g->kh + (size_t)ki) * g->kw;
        get_blocks(cpe, slot->segments + (size_t)ki * g->kw * g->ow,
                   a->src + row * plane + (size_t)oy * g->ow, (size_t)g->ow, plane,
                   (size_t)g->kw, &slot->get);
    }
}

static void col2im_add(st_cpe *cpe, const st_cpe_conv_geom *g, unit_slot *slot, int y)
{
    uint64_t adds = 0;
    for (int ki = 0; ki < g->kh; ki++) {
        if (contributing_row(g, y, ki) < 0)
            continue;
        for (int kj = 0; kj < g->kw; kj++) {
            const float *seg = slot->segments + ((size_t)ki * g->kw + kj) * g->ow;
            int lo, hi;
            valid_output_cols(g, kj, &lo, &hi);
            if (hi == lo)
                continue;
            float *row = slot->rows + (lo * g->sw - g->pw + kj);
            if (g->sw == 1)
                for (int ox = lo; ox < hi; ox++)
                    row[ox - lo] += seg[ox];
            else
                for (int ox = lo; ox < hi; ox++)
                    row[(size_t)(ox - lo) * g->sw] += seg[ox];
            adds += (uint64_t)(hi - lo);
        }
    }
    st_cpe_flops(cpe, adds);
}

static void col2im_kernel(st_cpe *cpe, void *args)
{
    st_cpe_reply reply = {0};
    im2col_args *a = st_cpe_ldm_alloc(cpe, sizeof *a, "arguments");
    st_cpe_dma_get(cpe, a, args, sizeof *a, &reply);
    st_cpe_dma_wait(cpe, &reply, 1);
    const st_cpe_conv_geom *g = &a->g;
    unit_slot slot[2];
    slots_alloc(cpe, slot, a->slots, (size_t)g->iw, (size_t)g->kh * g->kw * g->ow);
    size_t units = (size_t)g->c * g->ih, first = (size_t)st_cpe_id(cpe);
    if (first < units)
        col2im_issue_get(cpe, a, &slot[0], first);
    for (size_t u = first, k = 0; u < units; u += ST_CPE_COUNT, k++) {
        unit_slot *cur = &slot[k % (size_t)a->slots];
        size_t next = u + ST_CPE_COUNT;
        if (a->slots == 2 && next < units) {
            /* The other slot's row is still going out: wait before refilling. */
            unit_slot *other = &slot[(k + 1) % 2];
            st_cpe_dma_wait(cpe, &other->put, other->put.count);
            col2im_issue_get(cpe, a, other, next);
        }
        st_cpe_dma_wait(cpe, &cur->get, cur->get.count);
        col2im_add(cpe, g, cur, (int)(u % (size_t)g->ih));
        reply_reset(&cur->put);
        st_cpe_dma_put(cpe, a->dst + u * (size_t)g->iw, cur->rows, (size_t)g->iw * sizeof(float),
                       &cur->put);
        if (a->slots == 1 && next < units) {
            st_cpe_dma_wait(cpe, &cur->put, cur->put.count);
            col2im_issue_get(cpe, a, cur, next);
        }
    }
    for (int s = 0; s < a->slots; s++)
        st_cpe_dma_wait(cpe, &slot[s].put, slot[s].put.count);
}

/* ---- the host side ---- */

/* LDM for the arguments, and slack for aligning every buffer. */
static size_t ldm_overhead(void)
{
    return sizeof(im2col_args) + 5 * ST_CPE_LDM_ALIGN;
}

static st_status im2col_launch(st_cpe_cluster *cg, const char *name, st_cpe_kernel kernel,
                               const st_cpe_conv_geom *geom, size_t unit_floats, const float *src,
                               float *dst, st_cpe_counters *out, st_error *err)
{
    if (out)
        memset(out, 0, sizeof *out);
    const st_cpe_conv_geom *g = geom;
    if (g->c < 1 || g->ih < 1 || g->iw < 1 || g->oh < 1 || g->ow < 1 || g->kh < 1 || g->kw < 1 ||
        g->sh < 1 || g->sw < 1 || g->ph < 0 || g->pw < 0)
        return st_fail(err, ST_EINPUT,
                       "%s: bad geometry c %d, input %dx%d, output %dx%d, kernel %dx%d, stride "
                       "%dx%d, padding %dx%d",
                       name, g->c, g->ih, g->iw, g->oh, g->ow, g->kh, g->kw, g->sh, g->sw, g->ph,
                       g->pw);
    size_t unit_bytes = unit_floats * sizeof(float);
    int slots = 2 * unit_bytes + ldm_overhead() <= ST_CPE_LDM_BYTES ? 2
                : unit_bytes + ldm_overhead() <= ST_CPE_LDM_BYTES   ? 1
                                                                     : 0;
    if (!slots)
        return st_fail(err, ST_EINPUT,
                       "%s: one unit of work (%zu bytes for a %dx%d kernel over input rows of %d "
                       "and output rows of %d) does not fit the %d-byte LDM",
                       name, unit_bytes, g->kh, g->kw, g->iw, g->ow, ST_CPE_LDM_BYTES);
    im2col_args a = {.g = *g, .src = src, .dst = dst, .slots = slots};
    return st_cpe_launch(cg, name, kernel, &a, out, err);
}

st_status st_cpe_im2col(st_cpe_cluster *cg, const st_cpe_conv_geom *geom, const float *src,
                        float *col, st_cpe_counters *out, st_error *err)
{
    return im2col_launch(cg, "im2col", im2col_kernel, geom, im2col_unit_floats(geom), src, col,
                         out, err);
}

st_status st_cpe_col2im(st_cpe_cluster *cg, const st_cpe_conv_geom *geom, const float *dcol,
                        float *dsrc, st_cpe_counters *out, st_error *err)
{
    return im2col_launch(cg, "col2im", col2im_kernel, geom, col2im_unit_floats(geom), dcol, dsrc,
                         out, err);
}
