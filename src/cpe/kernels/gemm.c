/* GEMM as a CPE program: C = alpha op(A) op(B) + beta C, row-major, float
 * or double, op(X) = X or X^T, for one product or a batch of them in one
 * launch.
 *
 * Algorithm: the 8x8 block distribution with register communication of
 * swCaffe and of Jiang et al., "Towards highly efficient DGEMM on the
 * emerging SW26010 many-core processor" (ICPP 2017). C is cut into tiles of
 * (8 bm) x (8 bn) and K into panels of 8 bk. CPE (r, c) holds C's block of
 * tile rows c bm.. and tile columns r bn.., and fetches by DMA the blocks it
 * owns of each panel: A's rows of its C block and K slice r, B's K slice c
 * and columns of its C block. The mesh GEMM (st_cpe_mesh_gemm_step: A
 * travels down the columns one scalar per message, B along the rows one
 * vector per message) then adds the panel's product to every C block;
 * after the last panel each C block goes back to main memory. A batch
 * without reduce runs its products' tiles one after another; with reduce,
 * the panels of one tile run over every product, so C is fetched and
 * stored once.
 *
 * Double buffering: the next panel's blocks are fetched while the current
 * one is multiplied, and a tile's C block goes out while the next tile is
 * computed. Transposes: a transposed A block is fetched as it is
 * stored and read transposed by the mesh (its scalars are loaded one at a
 * time anyway); a transposed B block must be rows of the SIMD dimension,
 * so it is transposed in LDM after it arrives (declared as a vector
 * shuffle loop).
 *
 * Blocking (host, gemm_plan): the vendor BLAS's. swCaffe's explicit
 * convolution and inner product call the machine's cblas_sgemm, whose code
 * is not published; a library tuned for large products blocks every
 * product the same way, and so does this one: per CPE a cube bm = bn = bk
 * = s, the largest power of two whose blocks, in double (the library's
 * arithmetic: floats travel as doubles), fit the LDM as this kernel lays
 * them out (s = 32 in the SW26010's 64 KB, 64 in 256 KB). A product
 * smaller than a tile (side x s) in M or N leaves that share of the mesh
 * without a C block, and a K shorter than a panel leaves mesh rows without
 * a slice: the 64 output channels of VGG-16's conv1_x fill 2 of the 8 CPE
 * columns, and a bias GEMM (K = 1) one row. (A blocking chosen per product
 * by the cost model, as before, made conv1_x's explicit passes 2-5x faster
 * than swCaffe measured them.)
 *
 * Precision: each step's products are summed in double and added to C in
 * its type (the mesh GEMM's arithmetic). alpha is applied at the end
 * (C is scaled by beta / alpha when it is fetched). */
#include <string.h>

#include "kernel_common.h"

/* K iterations per loop branch of the multiply (st_cpe_mesh_gemm.unroll):
 * swCaffe's explicit convolution calls the vendor BLAS, whose code is not
 * published; a tuned DGEMM unrolls its K loop (Jiang et al. reach 95% of
 * peak, which a loop paying its counter and branch every iteration on the
 * busier pipeline cannot), and 4 is this model's assumption. */
#define GEMM_UNROLL 4

typedef struct gemm_args {
    st_cpe_gemm_desc d;
    size_t bm, bn, bk;     /* block sides: C bm x bn, A bm x bk, B bk x bn */
    size_t items;          /* products run one after another: batch, or 1 with reduce */
    size_t k_panels;       /* panels of side bk per product (side: the mesh's, 8 on the SW26010) */
} gemm_args;

/* One CPE's LDM buffers. */
typedef struct gemm_buffers {
    void *own_a[2], *own_b[2]; /* this CPE's blocks of the current and next panel */
    void *b_step;              /* a transposed B block, rows of the SIMD dimension */
    void *c_buf[2], *c;        /* C blocks of two tiles in turn; c: the current one */
    st_cpe_reply c_put[2];
    int c_cur;
    st_cpe_reply reply[2];     /* one per own-buffer pair */
} gemm_buffers;

/* The extents of this CPE's blocks for one panel. */
typedef struct gemm_panel {
    size_t item;       /* product of the batch */
    size_t ka0, ka;    /* A's K slice: this CPE's row */
    size_t kb0, kb;    /* B's K slice: this CPE's column */
} gemm_panel;

static size_t extent(size_t total, size_t start, size_t block)
{
    if (start >= total)
        return 0;
    return total - start < block ? total - start : block;
}

static size_t align_ldm(size_t bytes)
{
    return (bytes + ST_CPE_LDM_ALIGN - 1) / ST_CPE_LDM_ALIGN * ST_CPE_LDM_ALIGN;
}

static size_t gemm_ldm_bytes(size_t elt, size_t bm, size_t bn, size_t bk, int trans_b)
{
    return align_ldm(sizeof(gemm_args)) + 2 * align_ldm(bm * bk * elt) +
           (2 + (trans_b ? 1 : 0)) * align_ldm(bk * bn * elt) + 2 * align_ldm(bm * bn * elt) +
           CPE_KERNEL_LDM_SLACK;
}

static const unsigned char *at_item(const void *base, size_t item, size_t stride, size_t elt)
{
    return (const unsigned char *)base + item * stride * elt;
}

/* ---- the CPE program ---- */

/* Panel q of a tile: which product and K slices (q runs over the products
 * first with reduce). */
static gemm_panel panel_at(const gemm_args *g, size_t side, size_t item, size_t q, size_t row,
                           size_t col)
{
    gemm_panel p;
    p.item = g->d.reduce ? q / g->k_panels : item;
    size_t k0 = (q % g->k_panels) * side * g->bk;
    p.ka0 = k0 + row * g->bk;
    p.ka = extent(g->d.k, p.ka0, g->bk);
    p.kb0 = k0 + col * g->bk;
    p.kb = extent(g->d.k, p.kb0, g->bk);
    return p;
}

/* Issue the DMA of this CPE's A and B blocks of panel p into pair `pair`:
 * A's rows [m0, m0 + mr) (op(A)), B's columns [n0, n0 + nc). */
static void gemm_load_panel(st_cpe *cpe, const gemm_args *g, gemm_buffers *buf,
                            const gemm_panel *p, size_t m0, size_t mr, size_t n0, size_t nc,
                            int pair)
{
    const st_cpe_gemm_desc *d = &g->d;
    size_t elt = st_cpe_dtype_size(d->type);
    st_cpe_reply *reply = &buf->reply[pair];
    cpe_reply_reset(reply);
    const unsigned char *a = at_item(d->a, p->item, d->stride_a, elt);
    const unsigned char *b = at_item(d->b, p->item, d->stride_b, elt);
    if (mr > 0 && p->ka > 0) {
        if (d->trans_a) /* stored k x m: ka rows of mr */
            cpe_get_rows(cpe, buf->own_a[pair], a + (p->ka0 * d->lda + m0) * elt, mr * elt,
                         d->lda * elt, p->ka, reply);
        else
            cpe_get_rows(cpe, buf->own_a[pair], a + (m0 * d->lda + p->ka0) * elt, p->ka * elt,
                         d->lda * elt, mr, reply);
    }
    if (nc > 0 && p->kb > 0) {
        if (d->trans_b) /* stored n x k: nc rows of kb */
            cpe_get_rows(cpe, buf->own_b[pair], b + (n0 * d->ldb + p->kb0) * elt, p->kb * elt,
                         d->ldb * elt, nc, reply);
        else
            cpe_get_rows(cpe, buf->own_b[pair], b + (p->kb0 * d->ldb + n0) * elt, nc * elt,
                         d->ldb * elt, p->kb, reply);
    }
}

/* dst (rows x cols) = src^T (src cols x rows, packed), in LDM. */
static void gemm_transpose(st_cpe *cpe, void *dst, const void *src, size_t rows, size_t cols,
                           st_cpe_dtype type)
{
    cpe_vector_loop(cpe, rows * cols, 2.0, 2.0, 0.0);
    if (st_cpe_cost_only(cpe))
        return;
    for (size_t r = 0; r < rows; r++)
        for (size_t c = 0; c < cols; c++) {
            if (type == ST_CPE_F64)
                ((double *)dst)[r * cols + c] = ((const double *)src)[c * rows + r];
            else
                ((float *)dst)[r * cols + c] = ((const float *)src)[c * rows + r];
        }
}

/* c[i] *= factor for count values of type. */
static void gemm_scale(st_cpe *cpe, void *c, size_t count, double factor, st_cpe_dtype type)
{
    cpe_vector_loop(cpe, count, 1.0, 2.0, 1.0);
    if (st_cpe_cost_only(cpe))
        return;
    for (size_t i = 0; i < count; i++) {
        if (type == ST_CPE_F64)
            ((double *)c)[i] *= factor;
        else
            ((float *)c)[i] = (float)(factor * ((float *)c)[i]);
    }
}

/* This CPE's C block: fetched and scaled by beta / alpha, or zeroed. */
static void gemm_load_c(st_cpe *cpe, const gemm_args *g, gemm_buffers *buf, unsigned char *c,
                        size_t m0, size_t mr, size_t n0, size_t nc)
{
    const st_cpe_gemm_desc *d = &g->d;
    size_t elt = st_cpe_dtype_size(d->type), count = mr * nc;
    if (count == 0)
        return;
    if (d->beta == 0.0 || d->alpha == 0.0) {
        cpe_vector_loop(cpe, count, 0.0, 1.0, 0.0);
        if (!st_cpe_cost_only(cpe))
            memset(buf->c, 0, count * elt);
        if (d->alpha == 0.0 && d->beta == 0.0)
            return;
    }
    if (d->beta == 0.0)
        return;
    cpe_get_rows_now(cpe, buf->c, c + (m0 * d->ldc + n0) * elt, nc * elt, d->ldc * elt, mr);
    double factor = d->alpha == 0.0 ? d->beta : d->beta / d->alpha;
    if (factor != 1.0)
        gemm_scale(cpe, buf->c, count, factor, d->type);
}

/* One tile of product `item`: C rows [m0, m0 + mr), columns [n0, n0 + nc)
 * of this CPE. */
static void gemm_tile(st_cpe *cpe, const gemm_args *g, gemm_buffers *buf, size_t item, size_t m0,
                      size_t mr, size_t n0, size_t nc)
{
    const st_cpe_gemm_desc *d = &g->d;
    size_t elt = st_cpe_dtype_size(d->type);
    size_t row = (size_t)st_cpe_row(cpe), col = (size_t)st_cpe_col(cpe);
    size_t side = (size_t)st_cpe_mesh_cols(cpe);
    unsigned char *c = (unsigned char *)d->c + (d->reduce ? 0 : item * d->stride_c * elt);
    /* The other C buffer's put (the tile before the last) is done. */
    buf->c_cur = !buf->c_cur;
    buf->c = buf->c_buf[buf->c_cur];
    st_cpe_dma_wait(cpe, &buf->c_put[buf->c_cur], buf->c_put[buf->c_cur].count);
    gemm_load_c(cpe, g, buf, c, m0, mr, n0, nc);
    size_t panels = g->k_panels * (d->reduce ? d->batch : 1);
    if (panels > 0) {
        gemm_panel p = panel_at(g, side, item, 0, row, col);
        gemm_load_panel(cpe, g, buf, &p, m0, mr, n0, nc, 0);
    }
    for (size_t q = 0; q < panels; q++) {
        int pair = (int)(q & 1);
        gemm_panel p = panel_at(g, side, item, q, row, col);
        if (q + 1 < panels) {
            gemm_panel next = panel_at(g, side, item, q + 1, row, col);
            gemm_load_panel(cpe, g, buf, &next, m0, mr, n0, nc, !pair);
        }
        st_cpe_dma_wait(cpe, &buf->reply[pair], buf->reply[pair].count);
        const void *b_rows = buf->own_b[pair];
        if (d->trans_b && nc > 0 && p.kb > 0) {
            gemm_transpose(cpe, buf->b_step, buf->own_b[pair], p.kb, nc, d->type);
            b_rows = buf->b_step;
        }
        st_cpe_mesh_gemm op = {
            .type = d->type,
            .c = buf->c, .ni = mr, .nj = nc, .ldc = nc ? nc : 1,
            .col_op = buf->own_a[pair], .col_nk = p.ka,
            .ld_col = d->trans_a ? (mr ? mr : 1) : (p.ka ? p.ka : 1),
            .col_trans = d->trans_a,
            .row_op = b_rows, .row_nk = p.kb, .ld_row = nc ? nc : 1,
            .unroll = GEMM_UNROLL,
        };
        st_cpe_mesh_gemm_step(cpe, &op);
    }
    if (mr * nc == 0)
        return;
    if (d->alpha != 1.0 && d->alpha != 0.0)
        gemm_scale(cpe, buf->c, mr * nc, d->alpha, d->type);
    st_cpe_reply *put = &buf->c_put[buf->c_cur];
    cpe_reply_reset(put);
    cpe_put_rows(cpe, c + (m0 * d->ldc + n0) * elt, buf->c, nc * elt, d->ldc * elt, mr, put);
}

static void gemm_kernel(st_cpe *cpe, void *args)
{
    const gemm_args *g = cpe_kernel_args(cpe, args, sizeof(gemm_args));
    const st_cpe_gemm_desc *d = &g->d;
    size_t elt = st_cpe_dtype_size(d->type);
    size_t a_bytes = g->bm * g->bk * elt, b_bytes = g->bk * g->bn * elt;
    gemm_buffers buf;
    memset(&buf, 0, sizeof buf);
    buf.own_a[0] = st_cpe_ldm_alloc(cpe, a_bytes, "A block");
    buf.own_a[1] = st_cpe_ldm_alloc(cpe, a_bytes, "next A block");
    buf.own_b[0] = st_cpe_ldm_alloc(cpe, b_bytes, "B block");
    buf.own_b[1] = st_cpe_ldm_alloc(cpe, b_bytes, "next B block");
    if (d->trans_b)
        buf.b_step = st_cpe_ldm_alloc(cpe, b_bytes, "transposed B block");
    buf.c_buf[0] = st_cpe_ldm_alloc(cpe, g->bm * g->bn * elt, "C block");
    buf.c_buf[1] = st_cpe_ldm_alloc(cpe, g->bm * g->bn * elt, "next C block");
    size_t row = (size_t)st_cpe_row(cpe), col = (size_t)st_cpe_col(cpe);
    size_t side = (size_t)st_cpe_mesh_cols(cpe);
    size_t tile_m = side * g->bm, tile_n = side * g->bn;
    for (size_t item = 0; item < g->items; item++)
        for (size_t tm0 = 0; tm0 < d->m; tm0 += tile_m)
            for (size_t tn0 = 0; tn0 < d->n; tn0 += tile_n) {
                size_t m0 = tm0 + col * g->bm, n0 = tn0 + row * g->bn;
                gemm_tile(cpe, g, &buf, item, m0, extent(d->m, m0, g->bm), n0,
                          extent(d->n, n0, g->bn));
            }
    for (int b = 0; b < 2; b++)
        st_cpe_dma_wait(cpe, &buf.c_put[b], buf.c_put[b].count);
}

/* ---- the host side ---- */

static size_t div_up(size_t a, size_t b)
{
    return (a + b - 1) / b;
}

/* The vendor blocking (see the header comment) on a machine of ldm_bytes
 * of LDM: the largest power-of-two s with s x s x s blocks of doubles in
 * the LDM (the transposed B block included, so that one s serves every
 * product), at least 1. */
static void gemm_plan(size_t ldm_bytes, gemm_args *g)
{
    size_t s = 1;
    while (gemm_ldm_bytes(sizeof(double), 2 * s, 2 * s, 2 * s, 1) <= ldm_bytes)
        s *= 2;
    g->bm = g->bn = g->bk = s;
}

st_status st_cpe_gemm_batched(st_cpe_cluster *cg, const st_cpe_gemm_desc *desc,
                              st_cpe_counters *out, st_error *err)
{
    if (out)
        memset(out, 0, sizeof *out);
    const st_cpe_gemm_desc *d = desc;
    if (d->type != ST_CPE_F32 && d->type != ST_CPE_F64)
        return st_fail(err, ST_EINPUT, "st_cpe_gemm: unknown element type %d", (int)d->type);
    size_t a_row = d->trans_a ? d->m : d->k, b_row = d->trans_b ? d->k : d->n;
    if (d->lda < a_row || d->ldb < b_row || d->ldc < d->n)
        return st_fail(err, ST_EINPUT,
                       "st_cpe_gemm: row pitches lda %zu, ldb %zu, ldc %zu are smaller than the "
                       "stored rows of A (%zu), B (%zu) and C (%zu) of a %zux%zux%zu product",
                       d->lda, d->ldb, d->ldc, a_row, b_row, d->n, d->m, d->n, d->k);
    if (d->m == 0 || d->n == 0)
        return ST_OK;
    if (!d->c || (d->k > 0 && (!d->a || !d->b)))
        return st_fail(err, ST_EINPUT, "st_cpe_gemm: matrix %s is NULL",
                       !d->c ? "C" : !d->a ? "A" : "B");
    gemm_args g;
    memset(&g, 0, sizeof g);
    g.d = *d;
    if (g.d.batch == 0)
        g.d.batch = 1;
    g.items = g.d.reduce ? 1 : g.d.batch;
    /* alpha 0: C = beta C, and A and B are not read (as in BLAS); the
     * mesh would otherwise add the products unscaled. */
    if (g.d.alpha == 0.0)
        g.d.k = 0;
    const st_cpe_machine *machine = st_cpe_cluster_machine(cg);
    size_t side = (size_t)machine->mesh_cols;
    gemm_plan((size_t)machine->ldm_bytes, &g);
    g.k_panels = div_up(g.d.k, side * g.bk);
    return st_cpe_launch(cg, "gemm", gemm_kernel, &g, out, err);
}

st_status st_cpe_gemm(st_cpe_cluster *cg, st_cpe_dtype type, int trans_a, int trans_b, size_t m,
                      size_t n, size_t k, double alpha, const void *a, size_t lda, const void *b,
                      size_t ldb, double beta, void *c, size_t ldc, st_cpe_counters *out,
                      st_error *err)
{
    st_cpe_gemm_desc d = {
        .type = type, .trans_a = trans_a != 0, .trans_b = trans_b != 0,
        .m = m, .n = n, .k = k, .alpha = alpha, .beta = beta,
        .a = a, .lda = lda, .b = b, .ldb = ldb, .c = c, .ldc = ldc, .batch = 1,
    };
    return st_cpe_gemm_batched(cg, &d, out, err);
}
