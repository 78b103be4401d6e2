/* The tensor transformation layer of swCaffe as a CPE program: batched 2D
 * transposes, and with them the layouts the implicit convolution needs -
 * activations between NCHW and swDNN's (H W C N) with the batch innermost
 * or (H W N C) for the backward-weights pass, weights between
 * [oc][c][kh][kw] and [kh][kw][oc][c] or the rotated [kh][kw][c][oc].
 *
 * A transpose of count matrices: matrix i of rows x cols at src + i
 * src_stride (rows src_ld apart) becomes cols x rows at dst + i dst_stride
 * (rows dst_ld apart). Each matrix is cut into tiles of th rows x tw
 * columns; the tiles of all matrices are dealt round-robin to the CPEs
 * (tile t to CPE t mod 64). A tile comes in with one strided get (th
 * blocks of tw floats), is transposed in LDM with vector shuffles, and goes
 * out with one strided put (tw blocks of th floats); two tiles are in
 * flight. Tile sides (host): about 48 x 48, short sides taken whole, the
 * long one cut so that every CPE gets work when the matrices are few.
 *
 * Cost: per tile, th tw values through a 4 x 4 register transpose (two
 * loads or stores and two shuffles per vector); DMA th tw floats each way
 * in blocks of tw and th floats: short blocks (a batch of 32, 3 channels)
 * are slow at the measured rates, which is what makes the transformation
 * layer cost. */
#include <stdio.h>
#include <string.h>

#include "kernel_common.h"

/* LDM the four tile buffers (in and out for two tiles) leave for the
 * arguments and the stack: on the SW26010's 64 KB, 48 KB of buffers,
 * tiles of 3072 floats. */
#define LAYOUT_LDM_RESERVE (16 * 1024)
#define LAYOUT_TILE_SIDE 48

/* Floats per tile buffer in ldm_bytes of LDM. */
static size_t layout_tile_floats(size_t ldm_bytes)
{
    return (ldm_bytes - LAYOUT_LDM_RESERVE) / (4 * sizeof(float));
}

typedef struct layout_args {
    st_cpe_transpose t;
    size_t tile_rows, tile_cols;
    size_t tiles_down, tiles_across;
} layout_args;

typedef struct layout_slot {
    float *in, *out;
    size_t matrix, r0, c0, h, w;
    st_cpe_reply get, put;
} layout_slot;

static const float *src_of(const st_cpe_transpose *t, size_t i)
{
    return t->src + (ptrdiff_t)i * t->src_stride;
}

static float *dst_of(const st_cpe_transpose *t, size_t i)
{
    return t->dst + (ptrdiff_t)i * t->dst_stride;
}

static void layout_issue(st_cpe *cpe, const layout_args *a, layout_slot *slot, size_t tile)
{
    st_cpe_dma_wait(cpe, &slot->put, slot->put.count); /* its out buffer is free */
    size_t per_matrix = a->tiles_down * a->tiles_across, k = tile % per_matrix;
    slot->matrix = tile / per_matrix;
    slot->r0 = k / a->tiles_across * a->tile_rows;
    slot->c0 = k % a->tiles_across * a->tile_cols;
    slot->h = cpe_min_size(a->tile_rows, a->t.rows - slot->r0);
    slot->w = cpe_min_size(a->tile_cols, a->t.cols - slot->c0);
    cpe_reply_reset(&slot->get);
    cpe_get_rows(cpe, slot->in, src_of(&a->t, slot->matrix) + slot->r0 * a->t.src_ld + slot->c0,
                 slot->w * sizeof(float), a->t.src_ld * sizeof(float), slot->h, &slot->get);
}

static void layout_kernel(st_cpe *cpe, void *args)
{
    const layout_args *a = cpe_kernel_args(cpe, args, sizeof(layout_args));
    layout_slot slot[2];
    memset(slot, 0, sizeof slot);
    size_t tile_floats = layout_tile_floats(st_cpe_ldm_bytes(cpe));
    for (int s = 0; s < 2; s++) {
        slot[s].in = st_cpe_ldm_alloc(cpe, tile_floats * sizeof(float), "tile");
        slot[s].out = st_cpe_ldm_alloc(cpe, tile_floats * sizeof(float), "transposed tile");
    }
    size_t tiles = a->tiles_down * a->tiles_across * a->t.count, first = (size_t)st_cpe_id(cpe);
    if (first < tiles)
        layout_issue(cpe, a, &slot[0], first);
    size_t cpes = (size_t)st_cpe_count(cpe);
    for (size_t t = first, k = 0; t < tiles; t += cpes, k++) {
        layout_slot *cur = &slot[k % 2];
        if (t + cpes < tiles)
            layout_issue(cpe, a, &slot[(k + 1) % 2], t + cpes);
        st_cpe_dma_wait(cpe, &cur->get, cur->get.count);
        if (!st_cpe_cost_only(cpe))
            for (size_t i = 0; i < cur->h; i++)
                for (size_t j = 0; j < cur->w; j++)
                    cur->out[j * cur->h + i] = cur->in[i * cur->w + j];
        cpe_vector_loop(cpe, cur->h * cur->w, 2.0, 2.0, 0.0);
        cpe_reply_reset(&cur->put);
        cpe_put_rows(cpe, dst_of(&a->t, cur->matrix) + cur->c0 * a->t.dst_ld + cur->r0, cur->out,
                     cur->h * sizeof(float), a->t.dst_ld * sizeof(float), cur->w, &cur->put);
    }
    for (int s = 0; s < 2; s++)
        st_cpe_dma_wait(cpe, &slot[s].put, slot[s].put.count);
}

/* ---- the host side ---- */

static size_t ceil_div(size_t a, size_t b)
{
    return (a + b - 1) / b;
}

/* Tile sides: short sides whole, then both near LAYOUT_TILE_SIDE within
 * the buffer, the long one cut further until the CPEs all have work. */
static void layout_tiles(layout_args *a, const st_cpe_machine *machine)
{
    size_t cpes = (size_t)machine->cpes, tile_floats = layout_tile_floats((size_t)machine->ldm_bytes);
    size_t rows = a->t.rows, cols = a->t.cols;
    size_t th = rows <= LAYOUT_TILE_SIDE ? rows : LAYOUT_TILE_SIDE;
    size_t tw = cpe_min_size(cols, tile_floats / th);
    if (tw < cols && th < rows)
        tw = cpe_min_size(tw, LAYOUT_TILE_SIDE);
    if (tw == cols && th < rows)
        th = cpe_min_size(rows, tile_floats / tw);
    while (a->t.count * ceil_div(rows, th) * ceil_div(cols, tw) < cpes &&
           (th > 1 || tw > 1)) {
        if (tw >= th)
            tw = ceil_div(tw, 2);
        else
            th = ceil_div(th, 2);
    }
    /* Even out the tiles of each side. */
    th = ceil_div(rows, ceil_div(rows, th));
    tw = ceil_div(cols, ceil_div(cols, tw));
    a->tile_rows = th;
    a->tile_cols = tw;
    a->tiles_down = ceil_div(rows, th);
    a->tiles_across = ceil_div(cols, tw);
}

st_status st_cpe_transpose_batched(st_cpe_cluster *cg, const st_cpe_transpose *t,
                                   const char *name, st_cpe_counters *out, st_error *err)
{
    if (out)
        memset(out, 0, sizeof *out);
    if (!t->src || !t->dst)
        return st_fail(err, ST_EINPUT, "%s: no %s given", name, !t->src ? "src" : "dst");
    if (t->rows == 0 || t->cols == 0 || t->count == 0)
        return ST_OK;
    if (t->src_ld < t->cols || t->dst_ld < t->rows)
        return st_fail(err, ST_EINPUT, "%s: row pitches %zu and %zu are smaller than the %zu x "
                       "%zu matrices", name, t->src_ld, t->dst_ld, t->rows, t->cols);
    layout_args a = {.t = *t};
    layout_tiles(&a, st_cpe_cluster_machine(cg));
    return st_cpe_launch(cg, name, layout_kernel, &a, out, err);
}

/* ---- layouts ---- */

const char *st_cpe_layout_name(st_cpe_layout l)
{
    static const char *const names[] = {"NCHW", "HWCN", "HWNC"};
    return names[l];
}

st_status st_cpe_relayout(st_cpe_cluster *cg, int n, int c, int h, int w, st_cpe_layout from,
                          const float *src, st_cpe_layout to, float *dst, st_cpe_counters *out,
                          st_error *err)
{
    if (out)
        memset(out, 0, sizeof *out);
    if (n < 1 || c < 1 || h < 1 || w < 1)
        return st_fail(err, ST_EINPUT, "relayout: shape n %d, c %d, h %d, w %d (expected all "
                       ">= 1)", n, c, h, w);
    size_t N = (size_t)n, C = (size_t)c, P = (size_t)h * (size_t)w, values = N * C * P;
    if (src && dst && src < dst + values && dst < src + values)
        return st_fail(err, ST_EINPUT, "relayout: dst overlaps src (expected separate buffers)");
    char name[32];
    snprintf(name, sizeof name, "%s_to_%s", st_cpe_layout_name(from), st_cpe_layout_name(to));
    st_cpe_transpose t = {.src = src, .dst = dst};
    if (from == to)
        return st_fail(err, ST_EINPUT, "relayout: %s to itself", st_cpe_layout_name(from));
    if (from == ST_CPE_NCHW && to == ST_CPE_HWCN) { /* per channel: N x P -> P x N */
        t = (st_cpe_transpose){src, dst, N, P, C, C * P, C * N, (ptrdiff_t)P, (ptrdiff_t)N};
    } else if (from == ST_CPE_HWCN && to == ST_CPE_NCHW) {
        t = (st_cpe_transpose){src, dst, P, N, C, C * N, C * P, (ptrdiff_t)N, (ptrdiff_t)P};
    } else if (from == ST_CPE_NCHW && to == ST_CPE_HWNC) { /* (N C) x P -> P x (N C) */
        t = (st_cpe_transpose){src, dst, N * C, P, 1, P, N * C, 0, 0};
    } else if (from == ST_CPE_HWNC && to == ST_CPE_NCHW) {
        t = (st_cpe_transpose){src, dst, P, N * C, 1, N * C, P, 0, 0};
    } else if (from == ST_CPE_HWCN && to == ST_CPE_HWNC) { /* per pixel: C x N -> N x C */
        t = (st_cpe_transpose){src, dst, C, N, P, N, C, (ptrdiff_t)(C * N), (ptrdiff_t)(C * N)};
    } else {
        t = (st_cpe_transpose){src, dst, N, C, P, C, N, (ptrdiff_t)(C * N), (ptrdiff_t)(C * N)};
    }
    return st_cpe_transpose_batched(cg, &t, name, out, err);
}

st_status st_cpe_weights_to_swdnn(st_cpe_cluster *cg, int oc, int c, int kh, int kw,
                                  const float *w, float *dst, float *scratch, int rotated,
                                  st_cpe_counters *out, st_error *err)
{
    if (out)
        memset(out, 0, sizeof *out);
    size_t O = (size_t)oc, I = (size_t)c, K = (size_t)kh * (size_t)kw;
    /* [oc c][kk] -> [kk][oc c] */
    st_cpe_transpose t = {w, rotated ? scratch : dst, O * I, K, 1, K, O * I, 0, 0};
    st_status st = st_cpe_transpose_batched(cg, &t, "weights_to_swdnn", out, err);
    if (st != ST_OK || !rotated)
        return st;
    /* [kk][oc][c] -> [K-1-kk][c][oc]: each kernel position's oc x c matrix
     * transposed into the mirrored position. */
    st_cpe_counters more;
    t = (st_cpe_transpose){scratch, dst + (K - 1) * O * I, O, I, K, I, O, (ptrdiff_t)(O * I),
                           -(ptrdiff_t)(O * I)};
    st = st_cpe_transpose_batched(cg, &t, "weights_rotate", &more, err);
    if (st == ST_OK && out)
        st_cpe_counters_add(out, &more);
    return st;
}

st_status st_cpe_weights_from_swdnn(st_cpe_cluster *cg, int oc, int c, int kh, int kw,
                                    const float *src, float *w, st_cpe_counters *out,
                                    st_error *err)
{
    size_t O = (size_t)oc, I = (size_t)c, K = (size_t)kh * (size_t)kw;
    st_cpe_transpose t = {src, w, K, O * I, 1, O * I, K, 0, 0};
    return st_cpe_transpose_batched(cg, &t, "weights_from_swdnn", out, err);
}
