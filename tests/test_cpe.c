/* The emulated SW26010 core group (include/cpe.h) without the network: the
 * GEMM kernel against a plain triple loop in double, im2col and col2im
 * against plain loops, illegal programs and their messages, determinism,
 * strided DMA, exact counters and times of hand-analysed kernels, and the
 * cost model.
 *
 * Hand analysis of one_get_one_bcast, with st_cpe_cost_params_default()
 * (1.45 GHz, 8 flops/cycle at 90%, DMA 28 GB/s per core group and 500
 * cycles of latency, broadcast 4461 GB/s, message latency 10 cycles,
 * receive 1 cycle, launch 5 us). Every CPE gets 1 KB, waits, declares 100
 * flops; CPE (r,0) broadcasts one message along row r, the others receive it.
 *   DMA      500 + 1024 B / (28e9 / 64 / 1.45e9 B/cycle)
 *            = 500 + 3393.8285714 = 3893.8285714 cycles
 *   compute  100 / (8 * 0.9) = 13.8888889 cycles       -> 3907.7174603
 *   send     32 B / (4461e9 / 64 / 1.45e9 B/cycle) = 0.6656803 cycles
 *   arrival  3907.7174603 + 0.6656803 + 10 = 3918.3831407
 *   receive  max(3907.7174603, 3918.3831407) + 1 = 3919.3831407 cycles
 * The receivers finish last; the first of them, (0,1), is the critical CPE:
 * compute 13.8888889, DMA 3893.8285714, regcomm 0.6656803 + 10 + 1 =
 * 11.6656803 cycles; total 3919.3831407 / 1.45e9 + 5e-6 = 7.70302286e-6 s.
 * Counts alone (64-way balanced, nothing overlapped): compute 6400 flops /
 * 7.2 / 64 = 13.8888889 cycles, DMA 64 x 3893.8285714 / 64 = 3893.8285714
 * cycles, regcomm (8 x 0.6656803 + 56 x 1) / 64 = 0.9582100 cycles.
 * Counters: 64 contiguous gets of 1024 B (size class 10), 65536 bytes,
 * 8 broadcasts, 56 receives, 6400 flops, LDM peak 1024 B.
 *
 * barrier_after_work: CPE i declares 72 i flops (10 i cycles), then all
 * meet at a barrier: it releases at 630 + 100 = 730 cycles for everyone, the
 * critical CPE is (0,0) (lowest id among equals) with 730 cycles of
 * barrier wait: 730 / 1.45e9 + 5e-6 s.
 *
 * `test_cpe --bench` times GEMM 256x256x256 float on the emulator against a
 * plain triple loop instead of running the tests. */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <time.h>

#include "cpe_testlib.h"

#include "cpe.h"
#include "cpe/cpe_internal.h"

#define HZ 1.45e9
#define REL_EXACT 1e-12

static void assert_close(double got, double want, double rel, const char *what)
{
    if (fabs(got - want) > rel * fabs(want))
        fail_msg("%s: got %.17g, expected %.17g", what, got, want);
}

/* ---- GEMM against a triple loop ---- */

typedef struct gemm_case {
    size_t m, n, k;
    int trans_a, trans_b;
    st_cpe_dtype type;
    double alpha, beta;
    size_t pad; /* extra elements per row of every matrix (pitch > row) */
} gemm_case;

static double get_elem(const void *p, st_cpe_dtype type, size_t i)
{
    return type == ST_CPE_F64 ? ((const double *)p)[i] : (double)((const float *)p)[i];
}

static void set_elem(void *p, st_cpe_dtype type, size_t i, double v)
{
    if (type == ST_CPE_F64)
        ((double *)p)[i] = v;
    else
        ((float *)p)[i] = (float)v;
}

/* Run one case and compare every element of C with a double triple loop
 * over the same (rounded) inputs, within 64 units of roundoff of the type
 * times sum |alpha a b| + |beta c|; the padding of C must stay untouched. */
static void check_gemm(st_cpe_cluster *cg, const gemm_case *t, st_cpe_counters *counters,
                       void **c_out)
{
    size_t elt = st_cpe_dtype_size(t->type);
    size_t a_rows = t->trans_a ? t->k : t->m, a_cols = t->trans_a ? t->m : t->k;
    size_t b_rows = t->trans_b ? t->n : t->k, b_cols = t->trans_b ? t->k : t->n;
    size_t lda = a_cols + t->pad, ldb = b_cols + t->pad, ldc = t->n + t->pad;
    void *a = calloc(a_rows * lda + 1, elt), *b = calloc(b_rows * ldb + 1, elt);
    void *c = calloc(t->m * ldc + 1, elt);
    double *c0 = calloc(t->m * ldc + 1, sizeof(double));
    assert_non_null(a);
    assert_non_null(b);
    assert_non_null(c);
    assert_non_null(c0);
    uint64_t seed = 0x9e3779b97f4a7c15ull ^ (t->m * 1000003u + t->n * 1009u + t->k);
    for (size_t i = 0; i < a_rows * lda; i++)
        set_elem(a, t->type, i, rand_unit(&seed));
    for (size_t i = 0; i < b_rows * ldb; i++)
        set_elem(b, t->type, i, rand_unit(&seed));
    for (size_t i = 0; i < t->m * ldc; i++) {
        /* beta == 0 must not read C: NaN there would spread. */
        set_elem(c, t->type, i, t->beta == 0.0 && i % ldc < t->n ? NAN : rand_unit(&seed));
        c0[i] = get_elem(c, t->type, i);
    }
    st_error err = {0};
    st_status st = st_cpe_gemm(cg, t->type, t->trans_a, t->trans_b, t->m, t->n, t->k, t->alpha, a,
                               lda, b, ldb, t->beta, c, ldc, counters, &err);
    if (st != ST_OK)
        fail_msg("gemm %zux%zux%zu: %s", t->m, t->n, t->k, err.msg);
    double eps = t->type == ST_CPE_F64 ? DBL_EPSILON : FLT_EPSILON;
    for (size_t i = 0; i < t->m; i++) {
        for (size_t j = 0; j < t->n; j++) {
            double sum = 0.0, mag = 0.0;
            for (size_t kk = 0; kk < t->k; kk++) {
                double av = get_elem(a, t->type, t->trans_a ? kk * lda + i : i * lda + kk);
                double bv = get_elem(b, t->type, t->trans_b ? j * ldb + kk : kk * ldb + j);
                sum += av * bv;
                mag += fabs(av * bv);
            }
            double want = t->alpha * sum, bound = fabs(t->alpha) * mag;
            if (t->beta != 0.0) {
                want += t->beta * c0[i * ldc + j];
                bound += fabs(t->beta * c0[i * ldc + j]);
            }
            double got = get_elem(c, t->type, i * ldc + j);
            if (!(fabs(got - want) <= 64 * eps * bound + DBL_MIN))
                fail_msg("gemm %s%s %zux%zux%zu %s: C[%zu][%zu] = %.9g, expected %.9g",
                         t->trans_a ? "T" : "N", t->trans_b ? "T" : "N", t->m, t->n, t->k,
                         t->type == ST_CPE_F64 ? "double" : "float", i, j, got, want);
        }
        for (size_t j = t->n; j < ldc; j++)
            if (get_elem(c, t->type, i * ldc + j) != c0[i * ldc + j])
                fail_msg("gemm %zux%zux%zu wrote C's padding at [%zu][%zu]", t->m, t->n, t->k, i,
                         j);
    }
    free(a);
    free(b);
    free(c0);
    if (c_out)
        *c_out = c;
    else
        free(c);
}

static void test_gemm_shapes(void **state)
{
    (void)state;
    static const gemm_case cases[] = {
        {1, 1, 1, 0, 0, ST_CPE_F32, 1.0, 0.0, 0},
        {1, 1, 1, 0, 0, ST_CPE_F64, 1.0, 0.0, 0},
        {7, 13, 5, 0, 0, ST_CPE_F32, 1.0, 0.0, 0},
        {7, 13, 5, 1, 0, ST_CPE_F64, 0.5, -1.5, 3},
        {7, 13, 5, 0, 1, ST_CPE_F32, -2.0, 1.0, 1},
        {7, 13, 5, 1, 1, ST_CPE_F64, 1.0, 0.25, 0},
        {64, 64, 64, 0, 0, ST_CPE_F32, 1.0, 0.0, 0},
        {64, 64, 64, 0, 0, ST_CPE_F64, 1.0, 0.0, 0},
        {64, 64, 64, 1, 0, ST_CPE_F32, 1.0, 1.0, 0},
        {64, 64, 64, 0, 1, ST_CPE_F64, 0.75, 0.0, 5},
        {100, 300, 50, 0, 0, ST_CPE_F32, 1.0, 0.0, 0},
        {100, 300, 50, 0, 0, ST_CPE_F64, 1.0, 0.0, 0},
        {100, 300, 50, 1, 0, ST_CPE_F32, 1.0, 0.0, 2},
        {100, 300, 50, 0, 1, ST_CPE_F32, 1.0, 0.5, 0},
        {513, 129, 257, 0, 0, ST_CPE_F32, 1.0, 0.0, 0},
        {513, 129, 257, 0, 0, ST_CPE_F64, 1.0, 0.0, 0},
        {513, 129, 257, 1, 1, ST_CPE_F32, 1.0, -1.0, 0},
        {3, 2, 0, 0, 0, ST_CPE_F32, 1.0, 2.0, 0}, /* k = 0: C = beta C */
    };
    st_cpe_cluster *cg = cluster_new();
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const gemm_case *t = &cases[i];
        st_cpe_counters n;
        check_gemm(cg, t, &n, NULL);
        assert_int_equal(n.launches, 1);
        assert_true(n.ldm_peak <= ST_CPE_LDM_BYTES);
        if (t->alpha == 1.0 && t->beta == 0.0)
            assert_int_equal(n.flops, 2 * (uint64_t)t->m * t->n * t->k);
        assert_true(n.time.total_s > 0.0);
        if (t->m * t->n * t->k >= 64 * 64 * 64) {
            /* Large enough for every CPE to broadcast. */
            assert_true(n.msgs_bcast > 0);
            assert_int_equal(n.msgs_received, 7 * n.msgs_bcast);
            assert_int_equal(n.msgs_p2p, 0);
        }
    }
    st_cpe_cluster_destroy(cg);
}

/* 64x64x64 in double: blocks of 8x8 (bm = bn = bk = 8), one tile, one
 * panel. Each CPE gets its 8x8 A and B blocks and puts its 8x8 C block (beta
 * 0: C is not read), each as 8 strided rows of 64 B at a 512 B pitch; at
 * each of the 8 steps, 8 CPEs broadcast an A block and 8 a B block, 64
 * doubles = 16 messages each: 8 x 16 x 16 broadcasts, each received by 7. */
static void test_gemm_counters(void **state)
{
    (void)state;
    st_cpe_cluster *cg = cluster_new();
    gemm_case t = {64, 64, 64, 0, 0, ST_CPE_F64, 1.0, 0.0, 0};
    st_cpe_counters n;
    check_gemm(cg, &t, &n, NULL);
    assert_int_equal(n.flops, 2 * 64 * 64 * 64);
    assert_int_equal(n.msgs_bcast, 8 * 16 * 16);
    assert_int_equal(n.msgs_received, 7 * 8 * 16 * 16);
    /* Strided blocks of 8 doubles (64 B, class 6): A, B gets and C puts. */
    const st_cpe_dma_class *s = &n.dma[ST_CPE_DMA_STRIDED][6];
    assert_int_equal(s->transfers, 3 * 64);
    assert_int_equal(s->blocks, 3 * 64 * 8);
    assert_int_equal(s->bytes, 3 * 64 * 512);
    assert_int_equal(n.dma_put_bytes, 64 * 64 * 8);
    /* The args block is the only contiguous transfer: 64 of them. */
    uint64_t contiguous = 0;
    for (int k = 0; k < ST_CPE_DMA_SIZE_CLASSES; k++)
        contiguous += n.dma[ST_CPE_DMA_CONTIGUOUS][k].transfers;
    assert_int_equal(contiguous, 64);
    assert_int_equal(st_cpe_counters_dma_transfers(&n), 4 * 64);
    st_cpe_cluster_destroy(cg);
}

/* ---- illegal programs ---- */

static void expect_launch_fails(st_cpe_cluster *cg, const char *name, st_cpe_kernel fn, void *args,
                                const char *needle1, const char *needle2)
{
    st_error err = {0};
    st_cpe_counters n;
    st_status st = st_cpe_launch(cg, name, fn, args, &n, &err);
    assert_int_equal(st, ST_EINTERNAL);
    tl_assert_contains(err.msg, needle1);
    if (needle2)
        tl_assert_contains(err.msg, needle2);
    assert_int_equal(n.launches, 0);
}

static void ldm_hog(st_cpe *cpe, void *args)
{
    (void)args;
    st_cpe_ldm_alloc(cpe, 40000, "first half");
    st_cpe_ldm_alloc(cpe, 30000, "second half");
}

static void diagonal_message(st_cpe *cpe, void *args)
{
    (void)args;
    double msg[ST_CPE_MSG_DOUBLES] = {1, 2, 3, 4};
    if (st_cpe_id(cpe) == 0)
        st_cpe_send(cpe, 1, 1, msg);
}

static void all_receive(st_cpe *cpe, void *args)
{
    (void)args;
    double msg[ST_CPE_MSG_DOUBLES];
    st_cpe_recv(cpe, ST_CPE_ROW, msg);
}

static void one_skips_barrier(st_cpe *cpe, void *args)
{
    (void)args;
    if (st_cpe_row(cpe) == 3 && st_cpe_col(cpe) == 4)
        return;
    st_cpe_sync(cpe);
}

/* (0,0) sends *(int *)args messages to (0,1), which never receives. */
static void unanswered_sends(st_cpe *cpe, void *args)
{
    double msg[ST_CPE_MSG_DOUBLES] = {0};
    if (st_cpe_id(cpe) == 0)
        for (int i = 0; i < *(const int *)args; i++)
            st_cpe_send(cpe, 0, 1, msg);
}

static void dma_into_main(st_cpe *cpe, void *args)
{
    st_cpe_reply reply = {0};
    st_cpe_dma_get(cpe, (char *)args + 64, args, 32, &reply);
}

static void dma_from_ldm(st_cpe *cpe, void *args)
{
    (void)args;
    st_cpe_reply reply = {0};
    char *ldm = st_cpe_ldm_alloc(cpe, 64, "buffer");
    st_cpe_dma_get(cpe, ldm, ldm + 32, 32, &reply);
}

static void wait_too_long(st_cpe *cpe, void *args)
{
    st_cpe_reply reply = {0};
    char *ldm = st_cpe_ldm_alloc(cpe, 32, "buffer");
    st_cpe_dma_get(cpe, ldm, args, 32, &reply);
    st_cpe_dma_wait(cpe, &reply, 2);
}

static void test_illegal_programs(void **state)
{
    (void)state;
    st_cpe_cluster *cg = cluster_new();
    expect_launch_fails(cg, "ldm_hog", ldm_hog, NULL,
                        "kernel 'ldm_hog': CPE (0,0): LDM allocation 'second half' of 30000 bytes "
                        "does not fit: 40000 of the 65536 bytes of LDM are in use",
                        NULL);
    expect_launch_fails(cg, "diagonal", diagonal_message, NULL,
                        "kernel 'diagonal': CPE (0,0): sent a register message to CPE (1,1), "
                        "which is neither in its row nor in its column",
                        NULL);
    expect_launch_fails(cg, "all_receive", all_receive, NULL,
                        "kernel 'all_receive': deadlock: every CPE that has not finished is "
                        "blocked: receiving from the row: (0,0) (0,1)",
                        "(7,7); 0 CPEs finished");
    expect_launch_fails(cg, "skip", one_skips_barrier, NULL, "kernel 'skip': deadlock",
                        "at the barrier: (0,0) (0,1)");
    int sends = ST_CPE_FIFO_DEPTH + 1;
    expect_launch_fails(cg, "flood", unanswered_sends, &sends, "kernel 'flood': deadlock",
                        "sending to a full FIFO: (0,0)->(0,1); 63 CPEs finished");
    char main_buf[256] = {0};
    expect_launch_fails(cg, "dma_into_main", dma_into_main, main_buf,
                        "kernel 'dma_into_main': CPE (0,0): DMA get: the LDM side (32 bytes at",
                        "is not in this CPE's allocated LDM");
    expect_launch_fails(cg, "dma_from_ldm", dma_from_ldm, NULL,
                        "kernel 'dma_from_ldm': CPE (0,0): DMA get: the main-memory side",
                        "lies in LDM");
    expect_launch_fails(cg, "wait_too_long", wait_too_long, main_buf,
                        "kernel 'wait_too_long': CPE (0,0): waits for 2 DMA replies on a counter "
                        "that 1 transfers were issued on",
                        NULL);
    /* The cluster is usable after failures, and a full FIFO that is never
     * exceeded is legal. */
    st_error err = {0};
    sends = ST_CPE_FIFO_DEPTH;
    assert_int_equal(st_cpe_launch(cg, "fill", unanswered_sends, &sends, NULL, &err), ST_OK);
    st_cpe_cluster_destroy(cg);
}

static void test_gemm_bad_arguments(void **state)
{
    (void)state;
    st_cpe_cluster *cg = cluster_new();
    float a[6] = {0}, b[6] = {0}, c[4] = {0};
    st_error err = {0};
    assert_int_equal(st_cpe_gemm(cg, ST_CPE_F32, 0, 0, 2, 2, 3, 1.0, a, 2, b, 2, 0.0, c, 2, NULL,
                                 &err),
                     ST_EINPUT);
    tl_assert_contains(err.msg, "st_cpe_gemm: row pitches lda 2, ldb 2, ldc 2 are smaller than the "
                                "stored rows of A (3), B (2) and C (2) of a 2x2x3 product");
    st_cpe_cluster_destroy(cg);
}

/* ---- im2col / col2im against plain loops ---- */

/* The plain loops of the reference backend (src/backends/ref/ref_conv.c). */
static void plain_im2col(const st_cpe_conv_geom *g, const float *src, float *col)
{
    size_t plane = (size_t)g->oh * g->ow;
    for (int c = 0; c < g->c; c++)
        for (int ki = 0; ki < g->kh; ki++)
            for (int kj = 0; kj < g->kw; kj++) {
                float *row = col + ((size_t)(c * g->kh + ki) * g->kw + kj) * plane;
                for (int oy = 0; oy < g->oh; oy++)
                    for (int ox = 0; ox < g->ow; ox++) {
                        int y = oy * g->sh - g->ph + ki, x = ox * g->sw - g->pw + kj;
                        int inside = y >= 0 && y < g->ih && x >= 0 && x < g->iw;
                        row[oy * g->ow + ox] =
                            inside ? src[((size_t)c * g->ih + y) * g->iw + x] : 0.0f;
                    }
            }
}

static void plain_col2im(const st_cpe_conv_geom *g, const float *dcol, float *dsrc)
{
    size_t plane = (size_t)g->oh * g->ow;
    for (int c = 0; c < g->c; c++)
        for (int ki = 0; ki < g->kh; ki++)
            for (int kj = 0; kj < g->kw; kj++) {
                const float *row = dcol + ((size_t)(c * g->kh + ki) * g->kw + kj) * plane;
                for (int oy = 0; oy < g->oh; oy++)
                    for (int ox = 0; ox < g->ow; ox++) {
                        int y = oy * g->sh - g->ph + ki, x = ox * g->sw - g->pw + kj;
                        if (y >= 0 && y < g->ih && x >= 0 && x < g->iw)
                            dsrc[((size_t)c * g->ih + y) * g->iw + x] += row[oy * g->ow + ox];
                    }
            }
}

static void test_im2col_col2im(void **state)
{
    (void)state;
    static const st_cpe_conv_geom geoms[] = {
        /* c, ih, iw, oh, ow, kh, kw, sh, sw, ph, pw, oc (not used by im2col) */
        {1, 28, 28, 28, 28, 5, 5, 1, 1, 2, 2, 0},     /* LeNet-5 conv1, padded */
        {3, 13, 17, 7, 9, 3, 3, 2, 2, 1, 1, 0},       /* odd sizes, stride 2 */
        {2, 5, 5, 3, 3, 3, 3, 2, 2, 1, 1, 0},         /* bottom/right padding from oh, ow */
        {70, 6, 6, 6, 6, 1, 1, 1, 1, 0, 0, 0},        /* 1x1, more units than CPEs */
        {3, 227, 227, 55, 55, 11, 11, 4, 4, 0, 0, 0}, /* AlexNet conv1: one unit in flight */
    };
    st_cpe_cluster *cg = cluster_new();
    for (size_t t = 0; t < sizeof geoms / sizeof geoms[0]; t++) {
        const st_cpe_conv_geom *g = &geoms[t];
        size_t image = (size_t)g->c * g->ih * g->iw;
        size_t cols = (size_t)g->c * g->kh * g->kw * g->oh * g->ow;
        float *src = malloc(image * sizeof *src), *col = malloc(cols * sizeof *col);
        float *want = malloc(cols * sizeof *want);
        float *dsrc = malloc(image * sizeof *dsrc), *dsrc_want = malloc(image * sizeof *dsrc);
        assert_true(src && col && want && dsrc && dsrc_want);
        uint64_t seed = 7 + t;
        for (size_t i = 0; i < image; i++) {
            src[i] = (float)rand_unit(&seed);
            dsrc[i] = dsrc_want[i] = (float)rand_unit(&seed);
        }
        for (size_t i = 0; i < cols; i++)
            col[i] = NAN; /* every element must be written */
        st_cpe_counters n;
        st_error err = {0};
        if (st_cpe_im2col(cg, g, src, col, &n, &err) != ST_OK)
            fail_msg("im2col geometry %zu: %s", t, err.msg);
        plain_im2col(g, src, want);
        assert_memory_equal(col, want, cols * sizeof *col);
        assert_int_equal(n.ldm_moves, (uint64_t)g->c * g->oh * g->kh * g->kw * g->ow);
        assert_int_equal(n.dma_put_bytes, cols * sizeof(float));

        /* col2im of the same col: the sum is order-dependent in float, so
         * compare within a few roundings. */
        for (size_t i = 0; i < cols; i++)
            col[i] = (float)rand_unit(&seed);
        if (st_cpe_col2im(cg, g, col, dsrc, &n, &err) != ST_OK)
            fail_msg("col2im geometry %zu: %s", t, err.msg);
        plain_col2im(g, col, dsrc_want);
        double tol = 8.0 * (double)(g->kh * g->kw) * FLT_EPSILON;
        for (size_t i = 0; i < image; i++)
            if (fabs(dsrc[i] - dsrc_want[i]) > tol * (1.0 + fabs(dsrc_want[i])))
                fail_msg("col2im geometry %zu: dsrc[%zu] = %.9g, expected %.9g", t, i, dsrc[i],
                         dsrc_want[i]);
        assert_int_equal(n.dma_put_bytes, image * sizeof(float));
        free(src);
        free(col);
        free(want);
        free(dsrc);
        free(dsrc_want);
    }
    st_cpe_conv_geom wide = {1, 20, 10000, 10, 10000, 11, 1, 2, 1, 0, 0, 0};
    st_error err = {0};
    float one = 0.0f;
    assert_int_equal(st_cpe_im2col(cg, &wide, &one, &one, NULL, &err), ST_EINPUT);
    tl_assert_contains(err.msg, "im2col: one unit of work (");
    tl_assert_contains(err.msg, "does not fit the 65536-byte LDM");
    st_cpe_cluster_destroy(cg);
}

/* ---- determinism ---- */

/* CPEs (r, 1..7) each send their id to (r, 0), which receives 7 messages
 * and puts the order it saw them in to args[8 r .. 8 r + 6]. */
static void many_to_one(st_cpe *cpe, void *args)
{
    double msg[ST_CPE_MSG_DOUBLES] = {0};
    if (st_cpe_col(cpe) != 0) {
        msg[0] = st_cpe_id(cpe);
        st_cpe_flops(cpe, (uint64_t)(7 - st_cpe_col(cpe)) * 100);
        st_cpe_send(cpe, st_cpe_row(cpe), 0, msg);
        return;
    }
    double *order = st_cpe_ldm_alloc(cpe, 7 * sizeof(double), "order");
    for (int i = 0; i < 7; i++) {
        st_cpe_recv(cpe, ST_CPE_ROW, msg);
        order[i] = msg[0];
    }
    st_cpe_reply reply = {0};
    st_cpe_dma_put(cpe, (double *)args + 8 * st_cpe_row(cpe), order, 7 * sizeof(double), &reply);
    st_cpe_dma_wait(cpe, &reply, 1);
}

static void test_determinism(void **state)
{
    (void)state;
    st_cpe_cluster *cg = cluster_new();
    gemm_case t = {100, 300, 50, 0, 1, ST_CPE_F32, 1.0, 0.0, 0};
    st_cpe_counters n1, n2;
    void *c1, *c2;
    check_gemm(cg, &t, &n1, &c1);
    check_gemm(cg, &t, &n2, &c2);
    assert_memory_equal(&n1, &n2, sizeof n1);
    assert_memory_equal(c1, c2, t.m * t.n * sizeof(float));
    free(c1);
    free(c2);

    double order1[64], order2[64];
    st_error err = {0};
    assert_int_equal(st_cpe_launch(cg, "many_to_one", many_to_one, order1, &n1, &err), ST_OK);
    assert_int_equal(st_cpe_launch(cg, "many_to_one", many_to_one, order2, &n2, &err), ST_OK);
    assert_memory_equal(&n1, &n2, sizeof n1);
    for (int r = 0; r < 8; r++) {
        int seen = 0;
        for (int i = 0; i < 7; i++) {
            assert_true(order1[8 * r + i] == order2[8 * r + i]);
            seen |= 1 << ((int)order1[8 * r + i] - 8 * r);
        }
        assert_int_equal(seen, 0xfe); /* each of (r,1)..(r,7) once */
    }
    assert_int_equal(n1.msgs_p2p, 56);
    assert_int_equal(n1.msgs_received, 56);
    st_cpe_cluster_destroy(cg);
}

/* ---- strided DMA ---- */

#define STRIDED_ROWS_PER_CPE 3
#define STRIDED_COLS 40
#define STRIDED_FIRST_COL 5
#define STRIDED_BLOCK 16 /* doubles: 128 B blocks, 320 B pitch */

typedef struct strided_args {
    const double *src;
    double *dst;
} strided_args;

/* CPE i gets rows 3i..3i+2, columns 5..20 of src, adds i, and puts them in
 * the same place of dst. */
static void strided_add_id(st_cpe *cpe, void *args)
{
    st_cpe_reply reply = {0};
    strided_args *s = st_cpe_ldm_alloc(cpe, sizeof *s, "arguments");
    st_cpe_dma_get(cpe, s, args, sizeof *s, &reply);
    st_cpe_dma_wait(cpe, &reply, 1);
    size_t n = STRIDED_ROWS_PER_CPE * STRIDED_BLOCK;
    double *block = st_cpe_ldm_alloc(cpe, n * sizeof(double), "block");
    size_t first = (size_t)st_cpe_id(cpe) * STRIDED_ROWS_PER_CPE * STRIDED_COLS + STRIDED_FIRST_COL;
    reply.count = 0;
    st_cpe_dma_get_strided(cpe, block, s->src + first, STRIDED_BLOCK * sizeof(double),
                           STRIDED_COLS * sizeof(double), STRIDED_ROWS_PER_CPE, &reply);
    st_cpe_dma_wait(cpe, &reply, 1);
    for (size_t i = 0; i < n; i++)
        block[i] += st_cpe_id(cpe);
    st_cpe_flops(cpe, n);
    st_cpe_dma_put_strided(cpe, s->dst + first, block, STRIDED_BLOCK * sizeof(double),
                           STRIDED_COLS * sizeof(double), STRIDED_ROWS_PER_CPE, &reply);
    st_cpe_dma_wait(cpe, &reply, 2);
}

static void test_dma_strided(void **state)
{
    (void)state;
    size_t count = (size_t)ST_CPE_COUNT * STRIDED_ROWS_PER_CPE * STRIDED_COLS;
    double *src = malloc(count * sizeof *src), *dst = malloc(count * sizeof *dst);
    assert_non_null(src);
    assert_non_null(dst);
    for (size_t i = 0; i < count; i++) {
        src[i] = (double)i;
        dst[i] = -1.0;
    }
    strided_args args = {src, dst};
    st_cpe_cluster *cg = cluster_new();
    st_cpe_counters n;
    st_error err = {0};
    assert_int_equal(st_cpe_launch(cg, "strided", strided_add_id, &args, &n, &err), ST_OK);
    for (size_t i = 0; i < count; i++) {
        size_t row = i / STRIDED_COLS, col = i % STRIDED_COLS;
        int inside = col >= STRIDED_FIRST_COL && col < STRIDED_FIRST_COL + STRIDED_BLOCK;
        double want = inside ? src[i] + (double)(row / STRIDED_ROWS_PER_CPE) : -1.0;
        if (dst[i] != want)
            fail_msg("dst[%zu] (row %zu, column %zu) = %g, expected %g", i, row, col, dst[i], want);
    }
    const st_cpe_dma_class *s = &n.dma[ST_CPE_DMA_STRIDED][7]; /* 128 B blocks */
    assert_int_equal(s->transfers, 2 * 64);
    assert_int_equal(s->blocks, 2 * 64 * 3);
    assert_int_equal(s->bytes, 2 * 64 * 3 * 128);
    assert_int_equal(n.dma_put_bytes, 64 * 3 * 128);
    assert_int_equal(n.dma_get_bytes, 64 * 3 * 128 + 64 * sizeof args);
    st_cpe_cluster_destroy(cg);
    free(src);
    free(dst);
}

/* ---- counters and time of hand-analysed kernels ---- */

static void one_get_one_bcast(st_cpe *cpe, void *args)
{
    st_cpe_reply reply = {0};
    char *buf = st_cpe_ldm_alloc(cpe, 1024, "buffer");
    st_cpe_dma_get(cpe, buf, (const char *)args + 1024 * (size_t)st_cpe_id(cpe), 1024, &reply);
    st_cpe_dma_wait(cpe, &reply, 1);
    st_cpe_flops(cpe, 100);
    double msg[ST_CPE_MSG_DOUBLES] = {0};
    if (st_cpe_col(cpe) == 0) {
        msg[0] = buf[0];
        st_cpe_bcast(cpe, ST_CPE_ROW, msg);
    } else {
        st_cpe_recv(cpe, ST_CPE_ROW, msg);
    }
}

static void test_counters_hand(void **state)
{
    (void)state;
    char *main_buf = calloc(64, 1024);
    assert_non_null(main_buf);
    st_cpe_cluster *cg = cluster_new();
    st_cpe_counters n;
    st_error err = {0};
    assert_int_equal(st_cpe_launch(cg, "hand", one_get_one_bcast, main_buf, &n, &err), ST_OK);
    assert_int_equal(n.launches, 1);
    assert_int_equal(n.flops, 6400);
    assert_int_equal(n.dma_get_bytes, 65536);
    assert_int_equal(n.dma_put_bytes, 0);
    for (int mode = 0; mode < ST_CPE_DMA_MODES; mode++)
        for (int k = 0; k < ST_CPE_DMA_SIZE_CLASSES; k++) {
            const st_cpe_dma_class *cls = &n.dma[mode][k];
            int expected = mode == ST_CPE_DMA_CONTIGUOUS && k == 10;
            assert_int_equal(cls->transfers, expected ? 64 : 0);
            assert_int_equal(cls->blocks, expected ? 64 : 0);
            assert_int_equal(cls->bytes, expected ? 65536 : 0);
        }
    assert_int_equal(n.msgs_bcast, 8);
    assert_int_equal(n.msgs_p2p, 0);
    assert_int_equal(n.msgs_received, 56);
    assert_int_equal(n.ldm_peak, 1024);
    assert_int_equal(n.barriers, 0);
    assert_int_equal(n.critical_cpe, 1);
    assert_close(n.time.compute_s, 13.888888888888889 / HZ, REL_EXACT, "compute_s");
    assert_close(n.time.dma_s, 3893.8285714285716 / HZ, REL_EXACT, "dma_s");
    assert_close(n.time.regcomm_s, 11.665680340730777 / HZ, REL_EXACT, "regcomm_s");
    assert_true(n.time.sync_s == 0.0);
    assert_close(n.time.launch_s, 5e-6, REL_EXACT, "launch_s");
    assert_close(n.time.total_s, 7.70302285562634e-06, REL_EXACT, "total_s");

    st_cpe_cost_params p = st_cpe_cost_params_default();
    st_cpe_time t;
    st_cpe_cost_counts(&p, &n, &t);
    assert_close(t.compute_s, 13.888888888888889 / HZ, REL_EXACT, "counts compute_s");
    assert_close(t.dma_s, 3893.8285714285716 / HZ, REL_EXACT, "counts dma_s");
    assert_close(t.regcomm_s, 0.9582100425913472 / HZ, REL_EXACT, "counts regcomm_s");
    assert_true(t.sync_s == 0.0);
    assert_close(t.launch_s, 5e-6, REL_EXACT, "counts launch_s");
    st_cpe_cluster_destroy(cg);
    free(main_buf);
}

static void barrier_after_work(st_cpe *cpe, void *args)
{
    (void)args;
    st_cpe_flops(cpe, 72 * (uint64_t)st_cpe_id(cpe));
    st_cpe_sync(cpe);
}

static void test_barrier_time(void **state)
{
    (void)state;
    st_cpe_cluster *cg = cluster_new();
    st_cpe_counters n;
    st_error err = {0};
    assert_int_equal(st_cpe_launch(cg, "barrier", barrier_after_work, NULL, &n, &err), ST_OK);
    assert_int_equal(n.barriers, 1);
    assert_int_equal(n.critical_cpe, 0);
    assert_true(n.time.compute_s == 0.0);
    assert_close(n.time.sync_s, 730.0 / HZ, REL_EXACT, "sync_s");
    assert_close(n.time.total_s, 730.0 / HZ + 5e-6, REL_EXACT, "total_s");
    st_cpe_cluster_destroy(cg);
}

/* ---- the cost model ---- */

/* 8 blocks of 4 KB per CPE, each followed by 100000 flops (about as long
 * as its DMA: 14075 vs 13889 cycles); *(int *)args says whether the next
 * block's transfer is issued before computing on the current one. */
#define STREAM_BLOCKS 8
#define STREAM_BLOCK_BYTES 4096

typedef struct stream_args {
    const char *src;
    int double_buffered;
} stream_args;

static void stream_blocks(st_cpe *cpe, void *argp)
{
    st_cpe_reply arg_reply = {0};
    stream_args *s = st_cpe_ldm_alloc(cpe, sizeof *s, "arguments");
    st_cpe_dma_get(cpe, s, argp, sizeof *s, &arg_reply);
    st_cpe_dma_wait(cpe, &arg_reply, 1);
    char *buf[2] = {st_cpe_ldm_alloc(cpe, STREAM_BLOCK_BYTES, "block"),
                    st_cpe_ldm_alloc(cpe, STREAM_BLOCK_BYTES, "next block")};
    st_cpe_reply reply[2] = {{0}, {0}};
    const char *mine = s->src + (size_t)st_cpe_id(cpe) * STREAM_BLOCKS * STREAM_BLOCK_BYTES;
    st_cpe_dma_get(cpe, buf[0], mine, STREAM_BLOCK_BYTES, &reply[0]);
    for (int i = 0; i < STREAM_BLOCKS; i++) {
        int cur = i & 1;
        if (i + 1 < STREAM_BLOCKS && s->double_buffered) {
            reply[!cur].count = 0;
            st_cpe_dma_get(cpe, buf[!cur], mine + (size_t)(i + 1) * STREAM_BLOCK_BYTES,
                           STREAM_BLOCK_BYTES, &reply[!cur]);
        }
        st_cpe_dma_wait(cpe, &reply[cur], 1);
        st_cpe_flops(cpe, 100000);
        if (i + 1 < STREAM_BLOCKS && !s->double_buffered) {
            reply[!cur].count = 0;
            st_cpe_dma_get(cpe, buf[!cur], mine + (size_t)(i + 1) * STREAM_BLOCK_BYTES,
                           STREAM_BLOCK_BYTES, &reply[!cur]);
        }
    }
}

static void test_cost_overlap(void **state)
{
    (void)state;
    char *src = calloc(ST_CPE_COUNT * STREAM_BLOCKS, STREAM_BLOCK_BYTES);
    assert_non_null(src);
    st_cpe_cluster *cg = cluster_new();
    st_cpe_counters single, twin;
    st_error err = {0};
    stream_args args = {src, 0};
    assert_int_equal(st_cpe_launch(cg, "single", stream_blocks, &args, &single, &err), ST_OK);
    args.double_buffered = 1;
    assert_int_equal(st_cpe_launch(cg, "double", stream_blocks, &args, &twin, &err), ST_OK);
    /* Same counts, so the same counts-only estimate ... */
    st_cpe_time ts, td;
    st_cpe_cost_counts(st_cpe_cluster_cost_params(cg), &single, &ts);
    st_cpe_cost_counts(st_cpe_cluster_cost_params(cg), &twin, &td);
    assert_true(ts.total_s == td.total_s);
    assert_int_equal(single.dma_get_bytes, twin.dma_get_bytes);
    assert_int_equal(single.flops, twin.flops);
    /* ... but the double-buffered kernel hides its DMA behind compute:
     * single = 8 x (14075 + 13889) cycles; double = one transfer exposed,
     * then each later transfer waits only for what compute did not cover. */
    assert_true(twin.time.total_s < 0.6 * single.time.total_s);
    assert_close(single.time.compute_s, twin.time.compute_s, REL_EXACT, "compute");
    assert_true(twin.time.dma_s < single.time.dma_s / 5);
    st_cpe_cluster_destroy(cg);
    free(src);
}

static void test_cost_monotonic(void **state)
{
    (void)state;
    st_cpe_cost_params p = st_cpe_cost_params_default();
    st_cpe_counters base;
    memset(&base, 0, sizeof base);
    base.launches = 1;
    base.flops = 1000000;
    base.dma[ST_CPE_DMA_CONTIGUOUS][st_cpe_dma_size_class(2048)] =
        (st_cpe_dma_class){64, 64, 64 * 2048};
    base.msgs_bcast = 100;
    base.msgs_received = 700;
    st_cpe_time t0, t;
    st_cpe_cost_counts(&p, &base, &t0);
    assert_close(t0.total_s, t0.compute_s + t0.dma_s + t0.regcomm_s + t0.sync_s + t0.launch_s,
                 REL_EXACT, "total is the sum");

    st_cpe_counters c = base;
    c.flops *= 2;
    st_cpe_cost_counts(&p, &c, &t);
    assert_true(t.compute_s > t0.compute_s && t.dma_s == t0.dma_s);

    /* The same bytes in more, smaller transfers cost more. */
    c = base;
    c.dma[ST_CPE_DMA_CONTIGUOUS][st_cpe_dma_size_class(2048)] = (st_cpe_dma_class){0, 0, 0};
    c.dma[ST_CPE_DMA_CONTIGUOUS][st_cpe_dma_size_class(256)] =
        (st_cpe_dma_class){512, 512, 64 * 2048};
    st_cpe_cost_counts(&p, &c, &t);
    assert_true(t.dma_s > t0.dma_s);

    /* Strided blocks under 256 B cost as 256 B blocks: 128 B blocks of the
     * same bytes cost twice the transfer time of 256 B ones. */
    st_cpe_counters s256, s128;
    memset(&s256, 0, sizeof s256);
    memset(&s128, 0, sizeof s128);
    s256.dma[ST_CPE_DMA_STRIDED][8] = (st_cpe_dma_class){64, 64 * 8, 64 * 8 * 256};
    s128.dma[ST_CPE_DMA_STRIDED][7] = (st_cpe_dma_class){64, 64 * 16, 64 * 8 * 256};
    st_cpe_time t256, t128;
    st_cpe_cost_counts(&p, &s256, &t256);
    st_cpe_cost_counts(&p, &s128, &t128);
    double latency_s = 500.0 / HZ;
    assert_close(t128.dma_s - latency_s, 2 * (t256.dma_s - latency_s), 1e-12, "128 B strided");

    /* More bandwidth, less time; lower efficiency, more. */
    st_cpe_cost_params q = p;
    q.dma_bandwidth *= 2;
    st_cpe_cost_counts(&q, &base, &t);
    assert_true(t.dma_s < t0.dma_s);
    q = p;
    q.compute_efficiency = 0.5;
    st_cpe_cost_counts(&q, &base, &t);
    assert_close(t.compute_s, t0.compute_s * 0.9 / 0.5, REL_EXACT, "efficiency");

    /* Exact: 64 transfers of 2 KB = 64 x (500 + 2048 / 0.3017241) / 64
     * cycles; 1e6 flops / 7.2 / 64 cycles. */
    assert_close(t0.dma_s, (500.0 + 2048.0 * 64 * HZ / 28e9) / HZ, REL_EXACT, "dma exact");
    assert_close(t0.compute_s, 1e6 / 7.2 / 64 / HZ, REL_EXACT, "compute exact");
    assert_int_equal(st_cpe_dma_size_class(1), 0);
    assert_int_equal(st_cpe_dma_size_class(1023), 9);
    assert_int_equal(st_cpe_dma_size_class(1024), 10);
    assert_int_equal(st_cpe_dma_size_class((size_t)1 << 40), ST_CPE_DMA_SIZE_CLASSES - 1);

    /* The cluster costs launches with the parameters it is given. */
    st_cpe_cluster *cg = cluster_new();
    q = p;
    q.launch_seconds = 0.0;
    q.barrier_cycles = 0.0;
    st_cpe_cluster_set_cost_params(cg, &q);
    st_cpe_counters n;
    st_error err = {0};
    assert_int_equal(st_cpe_launch(cg, "barrier", barrier_after_work, NULL, &n, &err), ST_OK);
    assert_close(n.time.total_s, 630.0 / HZ, REL_EXACT, "overridden parameters");
    st_cpe_cluster_destroy(cg);
}

/* ---- benchmark: emulated GEMM against a triple loop ---- */

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int bench(void)
{
    enum { N = 256, REPEATS = 3 };
    float *a = malloc(N * N * sizeof *a), *b = malloc(N * N * sizeof *b);
    float *c = malloc(N * N * sizeof *c), *ref = malloc(N * N * sizeof *ref);
    st_cpe_cluster *cg = NULL;
    st_error err = {0};
    if (!a || !b || !c || !ref || st_cpe_cluster_create(&cg, &err) != ST_OK) {
        fprintf(stderr, "bench: setup failed: %s\n", err.msg);
        return 1;
    }
    uint64_t seed = 42;
    for (int i = 0; i < N * N; i++) {
        a[i] = (float)rand_unit(&seed);
        b[i] = (float)rand_unit(&seed);
    }
    double loop_best = 1e30, emu_best = 1e30;
    for (int r = 0; r < REPEATS; r++) {
        double t0 = now_seconds();
        for (int i = 0; i < N; i++)
            for (int j = 0; j < N; j++) {
                float sum = 0.0f;
                for (int k = 0; k < N; k++)
                    sum += a[i * N + k] * b[k * N + j];
                ref[i * N + j] = sum;
            }
        double t1 = now_seconds();
        if (t1 - t0 < loop_best)
            loop_best = t1 - t0;
    }
    st_cpe_counters n;
    for (int r = 0; r < REPEATS; r++) {
        double t0 = now_seconds();
        if (st_cpe_gemm(cg, ST_CPE_F32, 0, 0, N, N, N, 1.0, a, N, b, N, 0.0, c, N, &n, &err)) {
            fprintf(stderr, "bench: %s\n", err.msg);
            return 1;
        }
        double t1 = now_seconds();
        if (t1 - t0 < emu_best)
            emu_best = t1 - t0;
    }
    double max_diff = 0.0;
    for (int i = 0; i < N * N; i++)
        max_diff = fmax(max_diff, fabs((double)c[i] - ref[i]));
    double flops = 2.0 * N * N * N;
    printf("gemm %dx%dx%d float, best of %d\n", N, N, N, REPEATS);
    printf("  triple loop      %8.2f ms\n", 1e3 * loop_best);
    printf("  emulated (64 CPEs) %6.2f ms   ratio %.1fx   max |diff| %.2g\n", 1e3 * emu_best,
           emu_best / loop_best, max_diff);
    printf("  counters: %llu flops, %llu DMA bytes in %llu transfers, %llu broadcasts, "
           "%llu receives, LDM peak %zu B\n",
           (unsigned long long)n.flops, (unsigned long long)(n.dma_get_bytes + n.dma_put_bytes),
           (unsigned long long)st_cpe_counters_dma_transfers(&n), (unsigned long long)n.msgs_bcast,
           (unsigned long long)n.msgs_received, n.ldm_peak);
    printf("  predicted SW26010: %.1f us (compute %.1f, DMA %.1f, regcomm %.1f, launch %.1f) = "
           "%.0f GFlop/s\n",
           1e6 * n.time.total_s, 1e6 * n.time.compute_s, 1e6 * n.time.dma_s,
           1e6 * n.time.regcomm_s, 1e6 * n.time.launch_s, flops / n.time.total_s / 1e9);
    st_cpe_cluster_destroy(cg);
    free(a);
    free(b);
    free(c);
    free(ref);
    return 0;
}

/* The portable build (make PORTABLE=1), and any machine that is not
 * x86-64, must run CPE programs on ucontext: otherwise the portable build's
 * tests would repeat the fast switch's. (On x86-64 the fast switch is
 * chosen unless a CET shadow stack is active, which the test cannot know.) */
#if defined(ST_CPE_PORTABLE) || !defined(__x86_64__)
#define TEST_CONTEXT_MECHANISM 1
static void test_context_mechanism(void **state)
{
    (void)state;
    assert_int_equal(cpe_context_fast_available(), 0);
}
#endif

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--bench") == 0)
        return bench();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gemm_shapes),
        cmocka_unit_test(test_gemm_counters),
        cmocka_unit_test(test_gemm_bad_arguments),
        cmocka_unit_test(test_illegal_programs),
        cmocka_unit_test(test_im2col_col2im),
        cmocka_unit_test(test_determinism),
        cmocka_unit_test(test_dma_strided),
        cmocka_unit_test(test_counters_hand),
        cmocka_unit_test(test_barrier_time),
        cmocka_unit_test(test_cost_overlap),
        cmocka_unit_test(test_cost_monotonic),
#ifdef TEST_CONTEXT_MECHANISM
        cmocka_unit_test(test_context_mechanism),
#endif
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
