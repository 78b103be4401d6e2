/* GEMM as a CPE program: C = alpha * op(A) * op(B) + beta * C, row-major,
 * float or double, op(X) = X or X^T.
 *
 * Algorithm: the 8x8 block distribution with register communication of
 * swCaffe and of Jiang et al., "Towards highly efficient DGEMM on the
 * emerging SW26010 many-core processor" (ICPP 2017). C is cut into tiles of
 * (8 bm) x (8 bn) and K into panels of 8 bk. For one tile and one panel, CPE
 * (i,j) holds the bm x bk block A(i,j), the bk x bn block B(i,j) and the
 * bm x bn block C(i,j). At step s = 0..7 the CPEs of column s broadcast their
 * A block along their row and the CPEs of row s broadcast their B block down
 * their column; CPE (i,j) adds A(i,s) * B(s,j) to C(i,j). After the 8 steps
 * of every panel, C(i,j) goes back to main memory.
 *
 * Blocking: the host picks bm, bn, bk so that one CPE's buffers fit its LDM:
 * two A and two B blocks of its own (the next panel's arrive by DMA while the
 * current one is computed: double buffering), the A and B blocks of the
 * current step, and C: elt * (3 bm bk + 3 bk bn + bm bn) bytes, at most
 * 52 KB (float, 32 x 32 x 64) or 56 KB (double, 32 x 32 x 32).
 *
 * Edges: blocks are cut at the matrix edges, so a CPE's block may be
 * smaller or empty; senders and receivers compute the same sizes and only
 * valid values travel. A CPE whose C block is empty still sends its A and B
 * blocks and drains the broadcasts it is sent.
 *
 * Transposes: a transposed operand's block is fetched in its stored layout
 * (strided rows of the stored matrix) and transposed while it is packed for
 * the broadcast, so every CPE computes on row-major bm x bk and bk x bn
 * blocks. On the machine the packing is the register loads that feed the
 * sends, so it is not charged.
 *
 * Precision: blocks travel as doubles (floats widened and narrowed back:
 * exact); each step's products are summed in double and added to C in its
 * own type.
 *
 * Cost per tile and panel, per CPE: DMA of bm bk + bk bn elements; 16
 * broadcast rounds of bm bk / 4 or bk bn / 4 messages (one sender, seven
 * receivers each); 2 bm bn bk flops per step. */
#include <string.h>

#include "cpe_internal.h"

/* Largest C block side: 32 x 32 blocks make 256 x 256 tiles. */
#define GEMM_BLOCK_MN_MAX 32
/* Largest K block: 64 floats or 32 doubles, which keeps the buffers under
 * the LDM (sizes in the header comment). */
#define GEMM_BLOCK_K_MAX_F32 64
#define GEMM_BLOCK_K_MAX_F64 32

typedef struct gemm_args {
    st_cpe_dtype type;
    int trans_a, trans_b;
    size_t m, n, k;
    size_t lda, ldb, ldc;
    double alpha, beta;
    const void *a, *b;
    void *c;
    size_t bm, bn, bk; /* block sides: C bm x bn, A bm x bk, B bk x bn */
} gemm_args;

/* One CPE's LDM buffers. */
typedef struct gemm_buffers {
    void *own_a[2], *own_b[2]; /* this CPE's blocks of the current and next panel */
    void *step_a, *step_b;     /* the blocks of the current step, row-major */
    void *c;
    st_cpe_reply reply[2];     /* one per own-buffer pair */
} gemm_buffers;

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

static size_t gemm_ldm_bytes(size_t elt, size_t bm, size_t bn, size_t bk)
{
    return align_ldm(sizeof(gemm_args)) + 3 * align_ldm(bm * bk * elt) +
           3 * align_ldm(bk * bn * elt) + align_ldm(bm * bn * elt);
}

/* ---- the CPE program ---- */

/* rows x cols elements of the stored matrix base (row pitch ld) from
 * (row0, col0) into LDM, packed. Empty blocks issue nothing. */
static void gemm_get_block(st_cpe *cpe, void *ldm, const void *base, size_t row0, size_t col0,
                           size_t ld, size_t rows, size_t cols, size_t elt, st_cpe_reply *reply)
{
    if (rows == 0 || cols == 0)
        return;
    const unsigned char *src = (const unsigned char *)base + (row0 * ld + col0) * elt;
    if (rows == 1 || cols == ld)
        st_cpe_dma_get(cpe, ldm, src, rows * cols * elt, reply);
    else
        st_cpe_dma_get_strided(cpe, ldm, src, cols * elt, ld * elt, rows, reply);
}

static void gemm_put_block(st_cpe *cpe, void *base, size_t row0, size_t col0, size_t ld,
                           const void *ldm, size_t rows, size_t cols, size_t elt,
                           st_cpe_reply *reply)
{
    if (rows == 0 || cols == 0)
        return;
    unsigned char *dst = (unsigned char *)base + (row0 * ld + col0) * elt;
    if (rows == 1 || cols == ld)
        st_cpe_dma_put(cpe, dst, ldm, rows * cols * elt, reply);
    else
        st_cpe_dma_put_strided(cpe, dst, ldm, cols * elt, ld * elt, rows, reply);
}

/* Issue the DMA of this CPE's own A and B blocks of panel p of the tile at
 * (tm0, tn0) into buffer pair `pair`. */
static void gemm_load_panel(st_cpe *cpe, const gemm_args *g, gemm_buffers *buf, size_t p,
                            size_t tm0, size_t tn0, int pair)
{
    size_t elt = st_cpe_dtype_size(g->type);
    size_t row = (size_t)st_cpe_row(cpe), col = (size_t)st_cpe_col(cpe);
    size_t k0 = p * ST_CPE_COLS * g->bk;
    st_cpe_reply *reply = &buf->reply[pair];
    reply->count = 0;
    reply->done_cycle = 0.0;
    /* A(row, col): C's rows of this CPE, K block col of the panel. */
    size_t m0 = tm0 + row * g->bm, mr = extent(g->m, m0, g->bm);
    size_t ka0 = k0 + col * g->bk, ka = extent(g->k, ka0, g->bk);
    if (g->trans_a)
        gemm_get_block(cpe, buf->own_a[pair], g->a, ka0, m0, g->lda, ka, mr, elt, reply);
    else
        gemm_get_block(cpe, buf->own_a[pair], g->a, m0, ka0, g->lda, mr, ka, elt, reply);
    /* B(row, col): K block row of the panel, C's columns of this CPE. */
    size_t n0 = tn0 + col * g->bn, nc = extent(g->n, n0, g->bn);
    size_t kb0 = k0 + row * g->bk, kb = extent(g->k, kb0, g->bk);
    if (g->trans_b)
        gemm_get_block(cpe, buf->own_b[pair], g->b, n0, kb0, g->ldb, nc, kb, elt, reply);
    else
        gemm_get_block(cpe, buf->own_b[pair], g->b, kb0, n0, g->ldb, kb, nc, elt, reply);
}

/* dst (rows x cols, row-major) from src, which is rows x cols or, when
 * transposed, cols x rows. */
static void gemm_pack(void *dst, const void *src, size_t rows, size_t cols, int transposed,
                      st_cpe_dtype type)
{
    size_t elt = st_cpe_dtype_size(type);
    if (!transposed) {
        memcpy(dst, src, rows * cols * elt);
        return;
    }
    for (size_t r = 0; r < rows; r++)
        for (size_t c = 0; c < cols; c++) {
            if (type == ST_CPE_F64)
                ((double *)dst)[r * cols + c] = ((const double *)src)[c * rows + r];
            else
                ((float *)dst)[r * cols + c] = ((const float *)src)[c * rows + r];
        }
}

/* One operand's block for this step: the owner packs and broadcasts it on
 * bus, the other 7 CPEs of the line receive it. */
static void gemm_share_block(st_cpe *cpe, st_cpe_bus bus, int owner, const void *own, void *step,
                             size_t rows, size_t cols, int transposed, st_cpe_dtype type)
{
    size_t n = rows * cols;
    if (n == 0)
        return;
    if (owner) {
        gemm_pack(step, own, rows, cols, transposed, type);
        st_cpe_bcast_values(cpe, bus, type, step, n);
    } else {
        st_cpe_recv_values(cpe, bus, type, step, n);
    }
}

/* ---- the multiply: host code on LDM buffers ----
 *
 * c (mr x nc) += alpha * a (mr x ks) * b (ks x nc), every product and sum
 * in double, each element's sum taken over kk in order, so the result does
 * not depend on the blocking: C is cut into register blocks of 4 rows x 8
 * columns, accumulated across the whole of ks in vectors of 4 doubles (GCC
 * vector extensions: one AVX register or two SSE2 ones), so each row of B
 * loaded and widened serves 4 rows of A. Narrower edges take a block of
 * 4 columns, then single columns. On x86-64 the multiplies are compiled
 * twice, for AVX2 and the baseline, and the loader picks one
 * (target_clones); neither uses FMA, so products are rounded before they
 * are added, as in a plain loop. */

#define GEMM_MR 4 /* rows of a register block */
#define GEMM_NV 2 /* vectors of 4 columns in a register block */

typedef double gemm_v4d __attribute__((vector_size(32)));
typedef float gemm_v4f __attribute__((vector_size(16)));

/* Not under ThreadSanitizer: the loader runs the clones' resolver before
 * the TSan runtime is up, and its instrumented code crashes there. Not in
 * the portable build, which tests the default code. */
#if defined(__SANITIZE_THREAD__) || defined(ST_CPE_PORTABLE)
#define GEMM_NO_CLONES 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define GEMM_NO_CLONES 1
#endif
#endif
#if defined(__x86_64__) && defined(__has_attribute) && !defined(GEMM_NO_CLONES)
#if __has_attribute(target_clones)
#define GEMM_MULTIPLY_CLONES __attribute__((target_clones("avx2", "default")))
#endif
#endif
#ifndef GEMM_MULTIPLY_CLONES
#define GEMM_MULTIPLY_CLONES
#endif

#define GEMM_INLINE static inline __attribute__((always_inline))

/* Vectors travel through pointers: passing 32-byte vectors by value would
 * depend on whether AVX is enabled. */
GEMM_INLINE void gemm_load4(gemm_v4d *out, const void *p, size_t at, st_cpe_dtype type)
{
    if (type == ST_CPE_F64) {
        memcpy(out, (const double *)p + at, sizeof *out);
    } else {
        gemm_v4f f;
        memcpy(&f, (const float *)p + at, sizeof f);
        *out = __builtin_convertvector(f, gemm_v4d);
    }
}

GEMM_INLINE void gemm_store4(void *p, size_t at, const gemm_v4d *v, st_cpe_dtype type)
{
    if (type == ST_CPE_F64) {
        memcpy((double *)p + at, v, sizeof *v);
    } else {
        gemm_v4f f = __builtin_convertvector(*v, gemm_v4f);
        memcpy((float *)p + at, &f, sizeof f);
    }
}

GEMM_INLINE double gemm_load1(const void *p, size_t at, st_cpe_dtype type)
{
    return type == ST_CPE_F64 ? ((const double *)p)[at] : (double)((const float *)p)[at];
}

GEMM_INLINE void gemm_store1(void *p, size_t at, double v, st_cpe_dtype type)
{
    if (type == ST_CPE_F64)
        ((double *)p)[at] = v;
    else
        ((float *)p)[at] = (float)v;
}

/* rows x (4 vecs) elements of c from (i0, j0). */
GEMM_INLINE void gemm_block(void *restrict c, const void *restrict a, const void *restrict b,
                            size_t nc, size_t ks, size_t i0, size_t j0, int rows, int vecs,
                            double alpha, st_cpe_dtype type)
{
    gemm_v4d acc[GEMM_MR][GEMM_NV];
    for (int r = 0; r < rows; r++)
        for (int v = 0; v < vecs; v++)
            acc[r][v] = (gemm_v4d){0.0, 0.0, 0.0, 0.0};
    for (size_t kk = 0; kk < ks; kk++) {
        gemm_v4d bv[GEMM_NV];
        for (int v = 0; v < vecs; v++)
            gemm_load4(&bv[v], b, kk * nc + j0 + 4 * (size_t)v, type);
        for (int r = 0; r < rows; r++) {
            double x = gemm_load1(a, (i0 + (size_t)r) * ks + kk, type);
            gemm_v4d av = {x, x, x, x};
            for (int v = 0; v < vecs; v++)
                acc[r][v] += av * bv[v];
        }
    }
    for (int r = 0; r < rows; r++)
        for (int v = 0; v < vecs; v++) {
            size_t at = (i0 + (size_t)r) * nc + j0 + 4 * (size_t)v;
            gemm_v4d sum;
            gemm_load4(&sum, c, at, type);
            sum += alpha * acc[r][v];
            gemm_store4(c, at, &sum, type);
        }
}

/* rows elements of column j of c from row i0. */
GEMM_INLINE void gemm_column(void *restrict c, const void *restrict a, const void *restrict b,
                             size_t nc, size_t ks, size_t i0, size_t j, int rows, double alpha,
                             st_cpe_dtype type)
{
    double acc[GEMM_MR] = {0.0, 0.0, 0.0, 0.0};
    for (size_t kk = 0; kk < ks; kk++) {
        double bkj = gemm_load1(b, kk * nc + j, type);
        for (int r = 0; r < rows; r++)
            acc[r] += gemm_load1(a, (i0 + (size_t)r) * ks + kk, type) * bkj;
    }
    for (int r = 0; r < rows; r++) {
        size_t at = (i0 + (size_t)r) * nc + j;
        gemm_store1(c, at, gemm_load1(c, at, type) + alpha * acc[r], type);
    }
}

/* rows (<= GEMM_MR) whole rows of c from row i0. */
GEMM_INLINE void gemm_rows(void *restrict c, const void *restrict a, const void *restrict b,
                           size_t nc, size_t ks, size_t i0, int rows, double alpha,
                           st_cpe_dtype type)
{
    size_t j = 0;
    for (; j + 4 * GEMM_NV <= nc; j += 4 * GEMM_NV)
        gemm_block(c, a, b, nc, ks, i0, j, rows, GEMM_NV, alpha, type);
    for (; j + 4 <= nc; j += 4)
        gemm_block(c, a, b, nc, ks, i0, j, rows, 1, alpha, type);
    for (; j < nc; j++)
        gemm_column(c, a, b, nc, ks, i0, j, rows, alpha, type);
}

/* The row blocks, the last one 1 to GEMM_MR rows (a constant in each
 * call, so every block is unrolled into registers). */
GEMM_INLINE void gemm_multiply_type(void *restrict c, const void *restrict a,
                                    const void *restrict b, size_t mr, size_t nc, size_t ks,
                                    double alpha, st_cpe_dtype type)
{
    size_t i = 0;
    for (; i + GEMM_MR <= mr; i += GEMM_MR)
        gemm_rows(c, a, b, nc, ks, i, GEMM_MR, alpha, type);
    switch (mr - i) {
    case 3:
        gemm_rows(c, a, b, nc, ks, i, 3, alpha, type);
        break;
    case 2:
        gemm_rows(c, a, b, nc, ks, i, 2, alpha, type);
        break;
    case 1:
        gemm_rows(c, a, b, nc, ks, i, 1, alpha, type);
        break;
    default:
        break;
    }
}

GEMM_MULTIPLY_CLONES
static void gemm_multiply_f32(float *restrict c, const float *restrict a,
                              const float *restrict b, size_t mr, size_t nc, size_t ks,
                              double alpha)
{
    gemm_multiply_type(c, a, b, mr, nc, ks, alpha, ST_CPE_F32);
}

GEMM_MULTIPLY_CLONES
static void gemm_multiply_f64(double *restrict c, const double *restrict a,
                              const double *restrict b, size_t mr, size_t nc, size_t ks,
                              double alpha)
{
    gemm_multiply_type(c, a, b, mr, nc, ks, alpha, ST_CPE_F64);
}

static void gemm_multiply(st_cpe *cpe, const gemm_args *g, gemm_buffers *buf, size_t mr, size_t nc,
                          size_t ks)
{
    if (mr == 0 || nc == 0 || ks == 0)
        return;
    if (g->type == ST_CPE_F64)
        gemm_multiply_f64(buf->c, buf->step_a, buf->step_b, mr, nc, ks, g->alpha);
    else
        gemm_multiply_f32(buf->c, buf->step_a, buf->step_b, mr, nc, ks, g->alpha);
    st_cpe_flops(cpe, 2 * (uint64_t)mr * nc * ks + (g->alpha != 1.0 ? (uint64_t)mr * nc : 0));
}

/* This CPE's C block of the tile, scaled by beta (not read when beta is 0). */
static void gemm_load_c(st_cpe *cpe, const gemm_args *g, gemm_buffers *buf, size_t m0, size_t n0,
                        size_t mr, size_t nc)
{
    size_t elt = st_cpe_dtype_size(g->type), count = mr * nc;
    if (count == 0)
        return;
    if (g->beta == 0.0) {
        memset(buf->c, 0, count * elt);
        return;
    }
    st_cpe_reply reply = {0};
    gemm_get_block(cpe, buf->c, g->c, m0, n0, g->ldc, mr, nc, elt, &reply);
    st_cpe_dma_wait(cpe, &reply, reply.count);
    if (g->beta == 1.0)
        return;
    for (size_t i = 0; i < count; i++) {
        if (g->type == ST_CPE_F64)
            ((double *)buf->c)[i] *= g->beta;
        else
            ((float *)buf->c)[i] = (float)(g->beta * ((float *)buf->c)[i]);
    }
    st_cpe_flops(cpe, count);
}

static void gemm_kernel(st_cpe *cpe, void *args)
{
    st_cpe_reply reply = {0};
    gemm_args *g = st_cpe_ldm_alloc(cpe, sizeof *g, "arguments");
    st_cpe_dma_get(cpe, g, args, sizeof *g, &reply);
    st_cpe_dma_wait(cpe, &reply, 1);

    size_t elt = st_cpe_dtype_size(g->type);
    size_t a_bytes = g->bm * g->bk * elt, b_bytes = g->bk * g->bn * elt;
    gemm_buffers buf = {0};
    buf.own_a[0] = st_cpe_ldm_alloc(cpe, a_bytes, "A block");
    buf.own_a[1] = st_cpe_ldm_alloc(cpe, a_bytes, "next A block");
    buf.own_b[0] = st_cpe_ldm_alloc(cpe, b_bytes, "B block");
    buf.own_b[1] = st_cpe_ldm_alloc(cpe, b_bytes, "next B block");
    buf.step_a = st_cpe_ldm_alloc(cpe, a_bytes, "step A block");
    buf.step_b = st_cpe_ldm_alloc(cpe, b_bytes, "step B block");
    buf.c = st_cpe_ldm_alloc(cpe, g->bm * g->bn * elt, "C block");

    size_t row = (size_t)st_cpe_row(cpe), col = (size_t)st_cpe_col(cpe);
    size_t tile_m = ST_CPE_ROWS * g->bm, tile_n = ST_CPE_COLS * g->bn;
    size_t panel_k = ST_CPE_COLS * g->bk;
    size_t panels = (g->k + panel_k - 1) / panel_k;
    for (size_t tm0 = 0; tm0 < g->m; tm0 += tile_m)
        for (size_t tn0 = 0; tn0 < g->n; tn0 += tile_n) {
            size_t m0 = tm0 + row * g->bm, mr = extent(g->m, m0, g->bm);
            size_t n0 = tn0 + col * g->bn, nc = extent(g->n, n0, g->bn);
            gemm_load_c(cpe, g, &buf, m0, n0, mr, nc);
            if (panels)
                gemm_load_panel(cpe, g, &buf, 0, tm0, tn0, 0);
            for (size_t p = 0; p < panels; p++) {
                int pair = (int)(p & 1);
                if (p + 1 < panels)
                    gemm_load_panel(cpe, g, &buf, p + 1, tm0, tn0, !pair);
                st_cpe_dma_wait(cpe, &buf.reply[pair], buf.reply[pair].count);
                for (size_t s = 0; s < ST_CPE_COLS; s++) {
                    size_t ks = extent(g->k, p * panel_k + s * g->bk, g->bk);
                    gemm_share_block(cpe, ST_CPE_ROW, col == s, buf.own_a[pair], buf.step_a, mr,
                                     ks, g->trans_a, g->type);
                    gemm_share_block(cpe, ST_CPE_COL, row == s, buf.own_b[pair], buf.step_b, ks,
                                     nc, g->trans_b, g->type);
                    gemm_multiply(cpe, g, &buf, mr, nc, ks);
                }
            }
            st_cpe_reply put = {0};
            gemm_put_block(cpe, g->c, m0, n0, g->ldc, buf.c, mr, nc, elt, &put);
            st_cpe_dma_wait(cpe, &put, put.count);
        }
}

/* ---- the host side ---- */

static size_t div_up(size_t a, size_t b)
{
    return (a + b - 1) / b;
}

/* Block sides for this problem: as large as the limits allow, no larger
 * than an eighth of the matrix, then shrunk (largest side first) until the
 * buffers fit the LDM. */
static void gemm_plan(gemm_args *g)
{
    size_t elt = st_cpe_dtype_size(g->type);
    size_t k_max = g->type == ST_CPE_F64 ? GEMM_BLOCK_K_MAX_F64 : GEMM_BLOCK_K_MAX_F32;
    size_t bm = div_up(g->m, ST_CPE_ROWS), bn = div_up(g->n, ST_CPE_COLS);
    size_t bk = div_up(g->k, ST_CPE_COLS);
    bm = bm < 1 ? 1 : bm > GEMM_BLOCK_MN_MAX ? GEMM_BLOCK_MN_MAX : bm;
    bn = bn < 1 ? 1 : bn > GEMM_BLOCK_MN_MAX ? GEMM_BLOCK_MN_MAX : bn;
    bk = bk < 1 ? 1 : bk > k_max ? k_max : bk;
    while (gemm_ldm_bytes(elt, bm, bn, bk) > ST_CPE_LDM_BYTES) {
        if (bk >= bm && bk >= bn)
            bk--;
        else if (bm >= bn)
            bm--;
        else
            bn--;
    }
    g->bm = bm;
    g->bn = bn;
    g->bk = bk;
}

st_status st_cpe_gemm(st_cpe_cluster *cg, st_cpe_dtype type, int trans_a, int trans_b, size_t m,
                      size_t n, size_t k, double alpha, const void *a, size_t lda, const void *b,
                      size_t ldb, double beta, void *c, size_t ldc, st_cpe_counters *out,
                      st_error *err)
{
    if (out)
        memset(out, 0, sizeof *out);
    if (type != ST_CPE_F32 && type != ST_CPE_F64)
        return st_fail(err, ST_EINPUT, "st_cpe_gemm: unknown element type %d", (int)type);
    size_t a_row = trans_a ? m : k, b_row = trans_b ? k : n;
    if (lda < a_row || ldb < b_row || ldc < n)
        return st_fail(err, ST_EINPUT,
                       "st_cpe_gemm: row pitches lda %zu, ldb %zu, ldc %zu are smaller than the "
                       "stored rows of A (%zu), B (%zu) and C (%zu) of a %zux%zux%zu product",
                       lda, ldb, ldc, a_row, b_row, n, m, n, k);
    if (m == 0 || n == 0)
        return ST_OK;
    if (!c || (k > 0 && (!a || !b)))
        return st_fail(err, ST_EINPUT, "st_cpe_gemm: matrix %s is NULL", !c ? "C" : !a ? "A" : "B");
    gemm_args g = {
        .type = type, .trans_a = trans_a != 0, .trans_b = trans_b != 0,
        .m = m, .n = n, .k = k, .lda = lda, .ldb = ldb, .ldc = ldc,
        .alpha = alpha, .beta = beta, .a = a, .b = b, .c = c,
    };
    gemm_plan(&g);
    return st_cpe_launch(cg, "gemm", gemm_kernel, &g, out, err);
}
