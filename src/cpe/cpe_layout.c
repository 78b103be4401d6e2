/* The tensor-layout transformation between NCHW and swCaffe's CPE layout
 * with the batch innermost, [c][h][w][n] ("CHWN"), as a CPE program.
 *
 * Both directions are one transposition: NCHW -> CHWN turns the n x X
 * matrix (X = c h w, row-major) into X x n, CHWN -> NCHW turns X x n into
 * n x X. The source matrix (R x C) is cut into tiles of th rows x tw
 * columns, dealt round-robin to the CPEs (tile t to CPE t mod 64). A tile
 * comes in with one strided get (th blocks of tw floats, C apart), is
 * transposed in LDM, and goes out with one strided put (tw blocks of th
 * floats, R apart); either is one contiguous transfer when its blocks are
 * adjacent (a tile spanning all rows or all columns). Two tiles are in
 * flight.
 *
 * Tile shape (host): the batch side takes at most 64 values (a 256-byte
 * block, the efficient minimum of strided DMA) or all n when n is
 * smaller, the other side fills the buffer; when that makes fewer than 64
 * tiles, the long side is cut further so every CPE gets one; then both
 * sides are evened out. Cost per tile: th tw moves in LDM; DMA th tw
 * floats each way. */
#include <string.h>

#include "cpe_kernel_common.h"

/* Floats per tile buffer: in and out for two tiles, 48 KB. */
#define LAYOUT_TILE_FLOATS 3072
#define LAYOUT_BATCH_BLOCK 64

typedef struct layout_args {
    const float *src; /* R x C */
    float *dst;       /* C x R */
    size_t rows, cols;
    size_t tile_rows, tile_cols;
    size_t tiles_down, tiles_across;
} layout_args;

typedef struct layout_slot {
    float *in, *out;
    size_t r0, c0, h, w;
    st_cpe_reply get, put;
} layout_slot;

static void layout_issue(st_cpe *cpe, const layout_args *a, layout_slot *slot, size_t tile)
{
    st_cpe_dma_wait(cpe, &slot->put, slot->put.count); /* its out buffer is free */
    slot->r0 = tile / a->tiles_across * a->tile_rows;
    slot->c0 = tile % a->tiles_across * a->tile_cols;
    slot->h = cpe_min_size(a->tile_rows, a->rows - slot->r0);
    slot->w = cpe_min_size(a->tile_cols, a->cols - slot->c0);
    cpe_reply_reset(&slot->get);
    cpe_get_rows(cpe, slot->in, a->src + slot->r0 * a->cols + slot->c0, slot->w * sizeof(float),
                 a->cols * sizeof(float), slot->h, &slot->get);
}

static void layout_kernel(st_cpe *cpe, void *args)
{
    const layout_args *a = cpe_kernel_args(cpe, args, sizeof(layout_args));
    layout_slot slot[2];
    memset(slot, 0, sizeof slot);
    for (int s = 0; s < 2; s++) {
        slot[s].in = st_cpe_ldm_alloc(cpe, LAYOUT_TILE_FLOATS * sizeof(float), "tile");
        slot[s].out = st_cpe_ldm_alloc(cpe, LAYOUT_TILE_FLOATS * sizeof(float), "transposed tile");
    }
    size_t tiles = a->tiles_down * a->tiles_across, first = (size_t)st_cpe_id(cpe);
    if (first < tiles)
        layout_issue(cpe, a, &slot[0], first);
    for (size_t t = first, k = 0; t < tiles; t += ST_CPE_COUNT, k++) {
        layout_slot *cur = &slot[k % 2];
        if (t + ST_CPE_COUNT < tiles)
            layout_issue(cpe, a, &slot[(k + 1) % 2], t + ST_CPE_COUNT);
        st_cpe_dma_wait(cpe, &cur->get, cur->get.count);
        for (size_t i = 0; i < cur->h; i++)
            for (size_t j = 0; j < cur->w; j++)
                cur->out[j * cur->h + i] = cur->in[i * cur->w + j];
        st_cpe_moves(cpe, (uint64_t)cur->h * cur->w);
        cpe_reply_reset(&cur->put);
        cpe_put_rows(cpe, a->dst + cur->c0 * a->rows + cur->r0, cur->out, cur->h * sizeof(float),
                     a->rows * sizeof(float), cur->w, &cur->put);
    }
    for (int s = 0; s < 2; s++)
        st_cpe_dma_wait(cpe, &slot[s].put, slot[s].put.count);
}

static size_t ceil_div(size_t a, size_t b)
{
    return (a + b - 1) / b;
}

/* Tile sides for a rows x cols source whose batch is along rows
 * (batch_rows) or along columns. */
static void layout_tiles(layout_args *a, int batch_rows)
{
    size_t batch = batch_rows ? a->rows : a->cols, other = batch_rows ? a->cols : a->rows;
    size_t tb = cpe_min_size(batch, LAYOUT_BATCH_BLOCK);
    size_t to = cpe_min_size(other, LAYOUT_TILE_FLOATS / tb);
    size_t along_batch = ceil_div(batch, tb);
    if (along_batch * ceil_div(other, to) < ST_CPE_COUNT) {
        size_t want = ceil_div(ST_CPE_COUNT, along_batch);
        size_t shorter = ceil_div(other, want);
        to = shorter > 0 ? shorter : 1;
    }
    tb = ceil_div(batch, ceil_div(batch, tb));
    to = ceil_div(other, ceil_div(other, to));
    a->tile_rows = batch_rows ? tb : to;
    a->tile_cols = batch_rows ? to : tb;
    a->tiles_down = ceil_div(a->rows, a->tile_rows);
    a->tiles_across = ceil_div(a->cols, a->tile_cols);
}

static st_status layout_launch(st_cpe_cluster *cg, const char *name, int n, int c, int h, int w,
                               const float *src, float *dst, int to_chwn, st_cpe_counters *out,
                               st_error *err)
{
    if (out)
        memset(out, 0, sizeof *out);
    if (n < 1 || c < 1 || h < 1 || w < 1)
        return st_fail(err, ST_EINPUT, "%s: shape n %d, c %d, h %d, w %d (expected all >= 1)",
                       name, n, c, h, w);
    if (!src || !dst)
        return st_fail(err, ST_EINPUT, "%s: no %s given", name, !src ? "src" : "dst");
    size_t values = (size_t)n * (size_t)c * (size_t)h * (size_t)w;
    if (src < dst + values && dst < src + values)
        return st_fail(err, ST_EINPUT, "%s: dst overlaps src (expected separate buffers)", name);
    size_t per_sample = values / (size_t)n;
    layout_args a = {.src = src, .dst = dst};
    a.rows = to_chwn ? (size_t)n : per_sample;
    a.cols = to_chwn ? per_sample : (size_t)n;
    layout_tiles(&a, to_chwn);
    return st_cpe_launch(cg, name, layout_kernel, &a, out, err);
}

st_status st_cpe_nchw_to_chwn(st_cpe_cluster *cg, int n, int c, int h, int w, const float *src,
                              float *dst, st_cpe_counters *out, st_error *err)
{
    return layout_launch(cg, "nchw_to_chwn", n, c, h, w, src, dst, 1, out, err);
}

st_status st_cpe_chwn_to_nchw(st_cpe_cluster *cg, int n, int c, int h, int w, const float *src,
                              float *dst, st_cpe_counters *out, st_error *err)
{
    return layout_launch(cg, "chwn_to_nchw", n, c, h, w, src, dst, 0, out, err);
}
