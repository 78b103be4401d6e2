/* The emulated SW26010 core group (include/cpe/cpe.h) without the network: the
 * GEMM kernel (one product and batches: shared operands, reduce) against a
 * plain loop in double; im2col and col2im of n images against plain loops;
 * the mesh GEMM collective with hand-counted messages and its time against
 * st_cpe_mesh_step_cycles, and its illegal uses; illegal programs and their
 * messages; determinism; strided DMA; and the cost model by hand: DMA
 * occupancy and latency, a double-buffered loop's overlap, the pipeline
 * model of a loop, barriers, the one DMA charge. Every kernel run
 * here is run again in cost-only mode (run_and_check_cost_only): same
 * counters, nothing written.
 *
 * The hand computations use st_cpe_cost_params_default() (the built-in
 * data/sw26010/model.conf with its fitted constants neutral, src/cpe/
 * cpe_model.c): 1.45 GHz; a loop costs loop_entry 10 + iterations x max(fp,
 * mem, (fp + mem + any + 3 / unroll) / 2, chain) cycles; a DMA transfer
 * occupies its CPE's channel for the curve's cycles (get: 1065.1 up to
 * 64 B, 1182.9 at 128, 1531.5 at 256, 2242.9 at 512, 3778.5 at 1024,
 * 6864.6 at 2048, 13892.0 at 4096, 27375.5 at 8192, linear between,
 * extended with the last slope; put: 1911.2 up to 16 B, 2187.8 at 32, 2931.3
 * at 64, 3611.5 at 128, 4227.9 at 256, 5835.5 at 512, 8884.0 at 1024,
 * 14937.9 at 2048, 27317.9 at 4096, 49872.1 at 8192) then completes 1199
 * cycles later; a broadcast occupies its sender 32 B / (4461e9 / 64 / 1.45e9
 * B/cycle) = 0.6656803 cycles and arrives 10 cycles later; a receive takes
 * 1 cycle; a barrier releases 100 cycles after the last arrival; a launch
 * adds 5 us. Each test's comment works its figures out.
 *
 * `test_cpe --bench` times GEMM 256x256x256 float on the emulator against a
 * plain triple loop instead of running the tests.
 *
 * Also run in the portable build (@portable): the emulator's CPE contexts
 * on ucontext and its GEMM without the AVX2 clone. */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <time.h>

#include "cpe_testlib.h"

#include "base/clock.h"
#include "cpe/cpe.h"
#include "cpe/kernels.h"
#include "../../src/cpe/cpe_internal.h"

#define HZ 1.45e9
#define REL_EXACT 1e-12
#define SEND_BCAST_CYCLES 0.6656803407307779 /* 32 B at 4461 GB/s over 64 CPEs */

/* ---- GEMM against a plain loop ---- */

typedef struct gemm_case {
    st_cpe_dtype type;
    int trans_a, trans_b;
    size_t m, n, k;
    double alpha, beta;
    size_t pad;   /* extra elements per row of every matrix (pitch > row) */
    size_t batch; /* 0: one product through st_cpe_gemm */
    int reduce;
    char shared;  /* 'a' or 'b': that operand has stride 0 (one matrix for the batch) */
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

/* A GEMM launch for the cost-only check: batch 0 goes through st_cpe_gemm. */
static st_status gemm_launch(st_cpe_cluster *cg, void *ctx, st_cpe_counters *out, st_error *err)
{
    const st_cpe_gemm_desc *d = ctx;
    if (d->batch == 0)
        return st_cpe_gemm(cg, d->type, d->trans_a, d->trans_b, d->m, d->n, d->k, d->alpha, d->a,
                           d->lda, d->b, d->ldb, d->beta, d->c, d->ldc, out, err);
    return st_cpe_gemm_batched(cg, d, out, err);
}

/* Run one case (and its cost-only twin) and compare every element of C
 * with a plain loop in double over the same (rounded) inputs, within 64
 * units of roundoff of the type times sum |alpha a b| + |beta c|; C's
 * padding must stay untouched. Also the counters every GEMM must show. */
static void check_gemm(st_cpe_cluster *cg, const gemm_case *t, st_cpe_counters *counters,
                       void **c_out)
{
    size_t elt = st_cpe_dtype_size(t->type), items = t->batch ? t->batch : 1;
    size_t c_items = t->reduce ? 1 : items;
    size_t a_rows = t->trans_a ? t->k : t->m, a_cols = t->trans_a ? t->m : t->k;
    size_t b_rows = t->trans_b ? t->n : t->k, b_cols = t->trans_b ? t->k : t->n;
    size_t lda = a_cols + t->pad, ldb = b_cols + t->pad, ldc = t->n + t->pad;
    size_t a_one = a_rows * lda, b_one = b_rows * ldb, c_one = t->m * ldc;
    size_t a_count = (t->shared == 'a' ? 1 : items) * a_one + 1;
    size_t b_count = (t->shared == 'b' ? 1 : items) * b_one + 1;
    size_t c_count = c_items * c_one + 1;
    void *a = calloc(a_count, elt), *b = calloc(b_count, elt), *c = calloc(c_count, elt);
    double *c0 = calloc(c_count, sizeof(double));
    assert_true(a && b && c && c0);
    uint64_t seed = 0x9e3779b97f4a7c15ull ^ (t->m * 1000003u + t->n * 1009u + t->k + items);
    for (size_t i = 0; i < a_count; i++)
        set_elem(a, t->type, i, rand_unit(&seed));
    for (size_t i = 0; i < b_count; i++)
        set_elem(b, t->type, i, rand_unit(&seed));
    for (size_t i = 0; i < c_count; i++) {
        /* beta == 0 must not read C: NaN there would spread. */
        set_elem(c, t->type, i, t->beta == 0.0 && i % ldc < t->n ? NAN : rand_unit(&seed));
        c0[i] = get_elem(c, t->type, i);
    }
    st_cpe_gemm_desc d = {
        .type = t->type, .trans_a = t->trans_a, .trans_b = t->trans_b,
        .m = t->m, .n = t->n, .k = t->k, .alpha = t->alpha, .beta = t->beta,
        .a = a, .lda = lda, .stride_a = t->shared == 'a' ? 0 : a_one,
        .b = b, .ldb = ldb, .stride_b = t->shared == 'b' ? 0 : b_one,
        .c = c, .ldc = ldc, .stride_c = c_one, .batch = t->batch, .reduce = t->reduce,
    };
    char what[160];
    snprintf(what, sizeof what, "gemm %s%s %zux%zux%zu %s alpha %g beta %g batch %zu%s%s",
             t->trans_a ? "T" : "N", t->trans_b ? "T" : "N", t->m, t->n, t->k,
             t->type == ST_CPE_F64 ? "double" : "float", t->alpha, t->beta, t->batch,
             t->reduce ? " reduce" : "",
             t->shared == 'a' ? " shared A" : t->shared == 'b' ? " shared B" : "");
    cpe_test_output out = {c, (c_count - 1) * elt};
    run_and_check_cost_only(cg, gemm_launch, &d, &out, 1, counters, what);
    double eps = t->type == ST_CPE_F64 ? DBL_EPSILON : FLT_EPSILON;
    for (size_t ci = 0; ci < c_items; ci++)
        for (size_t i = 0; i < t->m; i++) {
            for (size_t j = 0; j < t->n; j++) {
                double sum = 0.0, mag = 0.0;
                for (size_t item = t->reduce ? 0 : ci; item < (t->reduce ? items : ci + 1);
                     item++) {
                    size_t a0 = d.stride_a * item, b0 = d.stride_b * item;
                    for (size_t kk = 0; kk < t->k; kk++) {
                        double av = get_elem(a, t->type, a0 + (t->trans_a ? kk * lda + i
                                                                          : i * lda + kk));
                        double bv = get_elem(b, t->type, b0 + (t->trans_b ? j * ldb + kk
                                                                          : kk * ldb + j));
                        sum += av * bv;
                        mag += fabs(av * bv);
                    }
                }
                size_t at = ci * c_one + i * ldc + j;
                double want = t->alpha * sum, bound = fabs(t->alpha) * mag;
                if (t->beta != 0.0) {
                    want += t->beta * c0[at];
                    bound += fabs(t->beta * c0[at]);
                }
                double got = get_elem(c, t->type, at);
                if (!(fabs(got - want) <= 64 * eps * bound + DBL_MIN))
                    fail_msg("%s: C%zu[%zu][%zu] = %.9g, expected %.9g", what, ci, i, j, got,
                             want);
            }
            for (size_t j = t->n; j < ldc; j++)
                if (get_elem(c, t->type, ci * c_one + i * ldc + j) != c0[ci * c_one + i * ldc + j])
                    fail_msg("%s wrote C's padding at [%zu][%zu]", what, i, j);
        }
    /* One launch within the LDM; each C element put once; every product's
     * operands fetched at least once; at least the multiply-adds (the
     * mesh computes on padding too); register traffic only the mesh's
     * broadcasts, each received by the other 7 CPEs of its line. alpha 0
     * multiplies nothing. */
    const st_cpe_counters *n = counters;
    uint64_t products = t->alpha == 0.0 ? 0 : (uint64_t)items * t->m * t->n * t->k;
    if (n->launches != 1 || n->ldm_peak > SW_LDM_BYTES || !(n->time.total_s > 0.0) ||
        n->dma_put_bytes != (uint64_t)c_items * t->m * t->n * elt || n->flops < 2 * products ||
        n->msgs_received != 7 * n->msgs_bcast || n->msgs_p2p != 0 ||
        n->mesh_msgs_bcast != n->msgs_bcast ||
        n->dma_get_bytes < products / t->n * elt + products / t->m * elt)
        fail_msg("%s: %llu launches, LDM peak %zu, %g s, %llu bytes put (expected %llu), %llu "
                 "bytes got, %llu flops (at least %llu), %llu broadcasts (%llu of the mesh), "
                 "%llu received, %llu point to point",
                 what, (unsigned long long)n->launches, n->ldm_peak, n->time.total_s,
                 (unsigned long long)n->dma_put_bytes,
                 (unsigned long long)(c_items * t->m * t->n * elt),
                 (unsigned long long)n->dma_get_bytes, (unsigned long long)n->flops,
                 (unsigned long long)(2 * products), (unsigned long long)n->msgs_bcast,
                 (unsigned long long)n->mesh_msgs_bcast, (unsigned long long)n->msgs_received,
                 (unsigned long long)n->msgs_p2p);
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
        /* type, trans_a, trans_b, m, n, k, alpha, beta, pad, batch, reduce, shared */
        {ST_CPE_F32, 0, 0, 1, 1, 1, 1.0, 0.0, 0, 0, 0, 0},
        {ST_CPE_F64, 0, 0, 1, 1, 1, 1.0, 0.0, 0, 0, 0, 0},
        {ST_CPE_F32, 0, 0, 7, 13, 5, 1.0, 0.0, 0, 0, 0, 0},
        {ST_CPE_F64, 1, 0, 7, 13, 5, 0.5, -1.5, 3, 0, 0, 0},
        {ST_CPE_F32, 0, 1, 7, 13, 5, -2.0, 1.0, 1, 0, 0, 0},
        {ST_CPE_F64, 1, 1, 7, 13, 5, 1.0, 0.25, 0, 0, 0, 0},
        {ST_CPE_F32, 0, 0, 64, 64, 64, 1.0, 0.0, 0, 0, 0, 0},
        {ST_CPE_F32, 1, 0, 64, 64, 64, 1.0, 1.0, 0, 0, 0, 0},
        {ST_CPE_F64, 0, 1, 64, 64, 64, 0.75, 0.0, 5, 0, 0, 0},
        {ST_CPE_F32, 0, 0, 100, 300, 50, 1.0, 0.0, 0, 0, 0, 0},
        {ST_CPE_F64, 0, 0, 100, 300, 50, 1.0, 0.0, 0, 0, 0, 0},
        {ST_CPE_F32, 1, 0, 100, 300, 50, 1.0, 0.0, 2, 0, 0, 0},
        {ST_CPE_F32, 0, 1, 100, 300, 50, 1.0, 0.5, 0, 0, 0, 0},
        {ST_CPE_F32, 0, 0, 513, 129, 257, 1.0, 0.0, 0, 0, 0, 0},
        {ST_CPE_F64, 0, 0, 513, 129, 257, 1.0, 0.0, 0, 0, 0, 0},
        {ST_CPE_F32, 1, 1, 513, 129, 257, 1.0, -1.0, 0, 0, 0, 0},
        {ST_CPE_F64, 1, 1, 33, 65, 300, -0.5, 1.0, 1, 0, 0, 0},
        {ST_CPE_F32, 0, 0, 3, 2, 0, 1.0, 2.0, 0, 0, 0, 0}, /* k = 0: C = beta C */
        {ST_CPE_F64, 1, 1, 5, 3, 0, 0.5, 0.0, 0, 0, 0, 0}, /* k = 0, beta 0: C = 0 */
        {ST_CPE_F64, 0, 0, 9, 7, 5, 0.0, 2.0, 0, 0, 0, 0}, /* alpha 0: C = beta C */
        /* Batches: one launch, the products one after another ... */
        {ST_CPE_F32, 0, 0, 20, 30, 17, 1.0, 0.0, 0, 3, 0, 0},
        {ST_CPE_F64, 1, 0, 20, 30, 17, 0.5, 1.0, 0, 4, 0, 'a'},
        {ST_CPE_F32, 0, 1, 33, 10, 40, 1.0, 0.5, 1, 5, 0, 'b'},
        {ST_CPE_F64, 1, 1, 12, 19, 9, -1.0, 0.0, 0, 3, 0, 0},
        {ST_CPE_F32, 0, 0, 7, 9, 0, 1.0, 3.0, 0, 2, 0, 0},
        /* ... or summed into one C (the batch extends K). */
        {ST_CPE_F32, 0, 0, 24, 50, 30, 1.0, 0.0, 0, 6, 1, 0},
        {ST_CPE_F64, 0, 1, 16, 40, 27, 2.0, 1.0, 0, 4, 1, 'a'},
        {ST_CPE_F32, 1, 0, 30, 20, 45, 1.0, -0.5, 2, 3, 1, 'b'},
        {ST_CPE_F32, 1, 1, 70, 9, 13, 1.0, 0.0, 0, 9, 1, 0},
        {ST_CPE_F64, 0, 0, 7, 9, 0, 1.0, 1.0, 0, 3, 1, 0},
    };
    st_cpe_cluster *cg = cluster_new();
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        st_cpe_counters n;
        check_gemm(cg, &cases[i], &n, NULL);
    }
    st_cpe_cluster_destroy(cg);
}

/* 256x256x256 in double, beta 0. The plan (gemm.c, gemm_plan) is the
 * vendor blocking, 32 x 32 x 32 in the SW26010's 64 KB of LDM (7 blocks of
 * 32 x 32 doubles, 56 KB; 64 would need 224 KB): one tile, one panel, every
 * CPE a whole block. Each CPE gets its A block (32 rows of 32 doubles,
 * 256 B blocks 2048 B apart: one strided get), its B block (the same) and
 * puts its C block (the same, a strided put); beta 0 zeroes C in LDM: a
 * vector loop over 1024 values, 256 iterations of one store:
 * 10 + 256 x max(0, 1, (0 + 1 + 3) / 2) = 522 cycles.
 * The mesh GEMM then runs 8 steps with ni = 32 C rows, nj = 32 columns
 * (nj_vec = 8 vectors) and nk = 32: register blocks of 4 rows x 4
 * vectors, 8 of them in i, 2 in j. Per step (cpe_mesh.c): row-operand
 * messages blocks_i x nj_vec x nk = 8 x 8 x 32 = 2048 from each CPE of
 * column s, column-operand messages blocks_j x ni x nk = 2 x 32 x 32 = 2048
 * from each CPE of row s: 8 x (2048 + 2048) = 32768 broadcasts a step,
 * 262144 in all, each received 7 times. Flops: 2 x 32 x 32 x 32 a step and
 * CPE, 8 steps, 64 CPEs: 2 x 256^3. Cycles of a step, for the slowest role
 * (the CPE owning both operands), per block: 32 iterations of fp 4 x 4 =
 * 16, mem 2 x 4 + 2 x 4 + 2 x 16 / 32 = 17, any 3 / 4 (unroll 4), chain 7:
 * max(16, 17, 16.875, 7) = 17, so 10 + 32 x 17 + 16 (block overhead) = 570;
 * 16 blocks: 9120 cycles, of which 16 x 32 x 16 = 8192 multiply-add issue.
 * 8 steps: 72960 cycles, 65536 of them compute and 7424 register
 * communication; every CPE arrives at the same time (the same DMA), so
 * nothing waits at the collective. */
static void test_gemm_counters(void **state)
{
    (void)state;
    st_cpe_cluster *cg = cluster_new();
    gemm_case t = {ST_CPE_F64, 0, 0, 256, 256, 256, 1.0, 0.0, 0, 0, 0, 0};
    st_cpe_counters n;
    check_gemm(cg, &t, &n, NULL);
    assert_int_equal(n.flops, 2 * 256 * 256 * 256);
    assert_int_equal(n.mesh_gemms, 1);
    assert_int_equal(n.msgs_bcast, 262144);
    assert_int_equal(n.mesh_msgs_bcast, 262144);
    assert_int_equal(n.msgs_received, 7 * 262144);
    const st_cpe_dma_class *g = &n.dma[ST_CPE_DMA_GET][ST_CPE_DMA_STRIDED][8];
    const st_cpe_dma_class *p = &n.dma[ST_CPE_DMA_PUT][ST_CPE_DMA_STRIDED][8];
    assert_int_equal(g->transfers, 2 * 64);
    assert_int_equal(g->blocks, 2 * 64 * 32);
    assert_int_equal(g->bytes, 2 * 64 * 8192);
    assert_int_equal(p->transfers, 64);
    assert_int_equal(p->blocks, 64 * 32);
    assert_int_equal(p->bytes, 64 * 8192);
    /* The argument blocks are the only other transfers. */
    assert_int_equal(st_cpe_counters_dma_transfers(&n), 4 * 64);
    double fp = 0.0;
    assert_close(st_cpe_mesh_step_cycles(st_cpe_cluster_cost_params(cg), 0, 32, 8, 32, 4, &fp),
                 9120.0, REL_EXACT, "mesh step cycles");
    assert_close(fp, 8192.0, REL_EXACT, "mesh step multiply-add cycles");
    assert_close(n.time.compute_s, (522.0 + 65536.0) / HZ, REL_EXACT, "compute_s");
    assert_close(n.time.regcomm_s, 7424.0 / HZ, REL_EXACT, "regcomm_s");
    assert_close(n.compute_cycles, 64 * (522.0 + 72960.0), REL_EXACT, "compute_cycles");
    st_cpe_cluster_destroy(cg);
}

/* The vendor blocking leaves the mesh idle where a product is narrower
 * than a tile: 64 x 256 x 256 in double fills 2 of the 8 CPE columns (C
 * rows 0-31 and 32-63), yet each of the 8 steps costs what the 32 x 32
 * blocks of those CPEs cost and every CPE takes part in its broadcasts,
 * so the mesh's time and messages are those of 256^3 above, for a
 * quarter of its flops (the counters count each CPE's own products,
 * 2 x 64 x 256 x 256, not the mesh's issue). */
static void test_gemm_narrow_leaves_mesh_idle(void **state)
{
    (void)state;
    st_cpe_cluster *cg = cluster_new();
    gemm_case wide = {ST_CPE_F64, 0, 0, 256, 256, 256, 1.0, 0.0, 0, 0, 0, 0};
    gemm_case narrow = {ST_CPE_F64, 0, 0, 64, 256, 256, 1.0, 0.0, 0, 0, 0, 0};
    st_cpe_counters w, n;
    check_gemm(cg, &wide, &w, NULL);
    check_gemm(cg, &narrow, &n, NULL);
    assert_int_equal(n.flops, 2 * 64 * 256 * 256);
    assert_int_equal(4 * n.flops, w.flops);
    assert_int_equal(n.msgs_bcast, w.msgs_bcast);
    assert_close(n.time.compute_s + n.time.regcomm_s, w.time.compute_s + w.time.regcomm_s,
                 REL_EXACT, "the mesh's time");
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
    st_error_clear(&err);
    assert_int_equal(st_cpe_gemm(cg, ST_CPE_F32, 0, 0, 2, 2, 3, 1.0, NULL, 3, b, 2, 0.0, c, 2,
                                 NULL, &err),
                     ST_EINPUT);
    tl_assert_contains(err.msg, "st_cpe_gemm: matrix A is NULL");
    st_cpe_cluster_destroy(cg);
}

/* ---- the mesh GEMM ---- */

/* A mesh GEMM program: every CPE builds its blocks in LDM from small
 * integers (so every sum is exact in float and double), runs `calls`
 * collectives and puts its C block to out + id x MESH_C_MAX. The fault
 * field makes one CPE break a rule. */
#define MESH_C_MAX 256

enum { MESH_LEGAL, MESH_BAD_ROWS, MESH_BAD_POINTER, MESH_EXTRA_CALL };

typedef struct mesh_args {
    st_cpe_dtype type;
    size_t ni[SW_COLS];  /* C rows of column c */
    size_t nj[SW_ROWS];  /* C columns of row r */
    size_t nk[SW_COLS];  /* k of slice s */
    int col_trans, unroll, calls, fault;
    void *out;
} mesh_args;

static double mesh_c0(int id, size_t i, size_t j)
{
    return (double)((id * 7 + (int)i * 3 + (int)j) % 9) - 4.0;
}

static double mesh_colop(int id, size_t i, size_t k)
{
    return (double)((id * 5 + (int)i * 2 + (int)k * 3) % 7) - 3.0;
}

static double mesh_rowop(int id, size_t k, size_t j)
{
    return (double)((id * 3 + (int)k + (int)j * 5) % 5) - 2.0;
}

static void mesh_kernel(st_cpe *cpe, void *args)
{
    st_cpe_reply reply = {0};
    mesh_args *a = st_cpe_ldm_alloc(cpe, sizeof *a, "arguments");
    st_cpe_dma_get_control(cpe, a, args, sizeof *a, &reply);
    st_cpe_dma_wait(cpe, &reply, 1);
    int r = st_cpe_row(cpe), c = st_cpe_col(cpe), id = st_cpe_id(cpe);
    size_t elt = st_cpe_dtype_size(a->type), ni = a->ni[c], nj = a->nj[r];
    size_t col_nk = a->nk[r], row_nk = a->nk[c];
    void *cb = st_cpe_ldm_alloc(cpe, MESH_C_MAX * elt, "C");
    void *colop = st_cpe_ldm_alloc(cpe, (ni * col_nk + 1) * elt, "column operand");
    void *rowop = st_cpe_ldm_alloc(cpe, (row_nk * nj + 1) * elt, "row operand");
    for (size_t i = 0; i < ni; i++)
        for (size_t j = 0; j < nj; j++)
            set_elem(cb, a->type, i * nj + j, mesh_c0(id, i, j));
    for (size_t i = 0; i < ni; i++)
        for (size_t k = 0; k < col_nk; k++)
            set_elem(colop, a->type, a->col_trans ? k * ni + i : i * col_nk + k,
                     mesh_colop(id, i, k));
    for (size_t k = 0; k < row_nk; k++)
        for (size_t j = 0; j < nj; j++)
            set_elem(rowop, a->type, k * nj + j, mesh_rowop(id, k, j));
    st_cpe_mesh_gemm g = {
        .type = a->type, .c = cb, .ni = ni, .nj = nj, .ldc = nj ? nj : 1,
        .col_op = colop, .col_nk = col_nk,
        .ld_col = a->col_trans ? (ni ? ni : 1) : (col_nk ? col_nk : 1),
        .col_trans = a->col_trans,
        .row_op = rowop, .row_nk = row_nk, .ld_row = nj ? nj : 1, .unroll = a->unroll,
    };
    if (a->fault == MESH_BAD_ROWS && r == 3 && c == 2)
        g.ni++;
    if (a->fault == MESH_BAD_POINTER && id == 0)
        g.c = a->out;
    int calls = a->calls + (a->fault == MESH_EXTRA_CALL && r == 2 && c == 5);
    for (int i = 0; i < calls; i++)
        st_cpe_mesh_gemm_step(cpe, &g);
    if (ni * nj > 0) {
        reply.count = 0;
        st_cpe_dma_put(cpe, (char *)a->out + (size_t)id * MESH_C_MAX * elt, cb, ni * nj * elt,
                       &reply);
        st_cpe_dma_wait(cpe, &reply, 1);
    }
}

static st_status mesh_launch(st_cpe_cluster *cg, void *ctx, st_cpe_counters *out, st_error *err)
{
    return st_cpe_launch(cg, "mesh", mesh_kernel, ctx, out, err);
}

/* Every CPE's C after the launch against C0 + calls x sum over s, k of
 * colop(s, c) rowop(r, s), in double (exact: small integers). */
static void check_mesh_values(const mesh_args *a)
{
    for (int r = 0; r < SW_ROWS; r++)
        for (int c = 0; c < SW_COLS; c++) {
            int id = r * SW_COLS + c;
            for (size_t i = 0; i < a->ni[c]; i++)
                for (size_t j = 0; j < a->nj[r]; j++) {
                    double want = 0.0;
                    for (int s = 0; s < SW_COLS; s++)
                        for (size_t k = 0; k < a->nk[s]; k++)
                            want += mesh_colop(s * SW_COLS + c, i, k) *
                                    mesh_rowop(r * SW_COLS + s, k, j);
                    want = mesh_c0(id, i, j) + a->calls * want;
                    double got = get_elem(a->out, a->type,
                                          (size_t)id * MESH_C_MAX + i * a->nj[r] + j);
                    if (got != want)
                        fail_msg("mesh GEMM %s%s: CPE (%d,%d) C[%zu][%zu] = %g, expected %g",
                                 a->type == ST_CPE_F64 ? "double" : "float",
                                 a->col_trans ? " col_trans" : "", r, c, i, j, got, want);
                }
        }
}

/* Blocks of every shape at once: C rows per column 5 8 1 0 3 4 7 2 (the
 * largest, 8, is what the lockstep loop runs: 2 register blocks of 4),
 * C columns per row 6 1 3 8 2 5 4 7 (the largest, 8 = 2 vectors: one
 * block in j), k per slice 3 0 5 1 2 4 1 6 (slice 1 is empty and adds no
 * step). Messages per step s (cpe_mesh.c: a row-operand vector per block
 * row and k, a column-operand scalar per block column, row and k):
 * row 2 x 2 x nk_s from each of the 8 CPEs of column s, column 1 x 8 x nk_s
 * from each CPE of row s: 8 x 12 x nk_s broadcasts, over the slices' 22
 * k: 2112 per collective, each received 7 times; flops each CPE's own
 * block, 2 x ni[c] x nj[r] x 22 for the CPE of row r and column c: 2 x 30
 * (the rows' sum) x 36 (the columns') x 22 = 47520 per collective (the
 * lockstep loop issues 64 x 2 x 8 x 8 x 22 = 180224). Cycles: the sum over the 7 non-empty
 * steps of st_cpe_mesh_step_cycles(8 rows, 2 vectors, nk_s), which every
 * CPE spends, split into multiply-add issue (compute) and the rest
 * (register communication); every CPE arrives at the same time (the same
 * argument fetch), so the critical CPE - the one with the largest C to
 * put - has exactly that compute and register communication.
 * st_cpe_mesh_step_cycles by hand for one block of 4 rows x 1 vector, nk
 * 8, unroll 1: the CPE owning both operands has per iteration fp 4, mem
 * 2 x 1 + 2 x 4 + 2 x 4 / 8 = 11, any 3, chain 7: max(4, 11, 9, 7) = 11,
 * so 10 + 8 x 11 + 16 = 114 cycles; owning the row operand only, mem 7
 * and max(4, 7, 7, 7) = 7: 82; the column operand only, mem 10: 106;
 * neither, mem 6, (4 + 6 + 3) / 2 = 6.5, chain 7: 82. The step takes the
 * slowest, 114, with 8 x 4 = 32 cycles of multiply-add issue. */
static void test_mesh_gemm(void **state)
{
    (void)state;
    st_cpe_cluster *cg = cluster_new();
    const st_cpe_cost_params *p = st_cpe_cluster_cost_params(cg);
    double fp = 0.0;
    assert_close(st_cpe_mesh_step_cycles(p, 0, 4, 1, 8, 1, &fp), 114.0, REL_EXACT, "hand step");
    assert_close(fp, 32.0, REL_EXACT, "hand step multiply-adds");
    static const size_t ni[8] = {5, 8, 1, 0, 3, 4, 7, 2}, nj[8] = {6, 1, 3, 8, 2, 5, 4, 7};
    static const size_t nk[8] = {3, 0, 5, 1, 2, 4, 1, 6};
    double step_total = 0.0, step_fp = 0.0;
    for (int s = 0; s < 8; s++)
        if (nk[s] > 0) {
            step_total += st_cpe_mesh_step_cycles(p, 0, 8, 2, nk[s], 4, &fp);
            step_fp += fp;
        }
    for (int variant = 0; variant < 4; variant++) {
        mesh_args a = {.type = variant & 1 ? ST_CPE_F64 : ST_CPE_F32, .col_trans = variant >> 1,
                       .unroll = 4, .calls = 1 + (variant >> 1)};
        memcpy(a.ni, ni, sizeof ni);
        memcpy(a.nj, nj, sizeof nj);
        memcpy(a.nk, nk, sizeof nk);
        a.out = calloc(SW_CPES * MESH_C_MAX, sizeof(double));
        assert_non_null(a.out);
        st_cpe_counters n;
        run_and_check_cost_only(cg, mesh_launch, &a,
                                &(cpe_test_output){a.out, SW_CPES * MESH_C_MAX * sizeof(double)},
                                1, &n, "mesh GEMM");
        check_mesh_values(&a);
        uint64_t calls = (uint64_t)a.calls;
        assert_int_equal(n.mesh_gemms, calls);
        assert_int_equal(n.msgs_bcast, calls * 2112);
        assert_int_equal(n.mesh_msgs_bcast, calls * 2112);
        assert_int_equal(n.msgs_received, calls * 7 * 2112);
        assert_int_equal(n.mesh_msgs_received, calls * 7 * 2112);
        assert_int_equal(n.msgs_p2p, 0);
        assert_int_equal(n.flops, calls * 47520);
        assert_close(n.time.compute_s, (double)calls * step_fp / HZ, REL_EXACT, "mesh compute");
        assert_close(n.time.regcomm_s, (double)calls * (step_total - step_fp) / HZ, REL_EXACT,
                     "mesh register communication");
        free(a.out);
    }
    st_cpe_cluster_destroy(cg);
}

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

static void test_mesh_gemm_illegal(void **state)
{
    (void)state;
    st_cpe_cluster *cg = cluster_new();
    mesh_args a = {.type = ST_CPE_F32, .unroll = 1, .calls = 1};
    for (int i = 0; i < 8; i++) {
        a.ni[i] = 4;
        a.nj[i] = 4;
        a.nk[i] = 2;
    }
    a.out = calloc(SW_CPES * MESH_C_MAX, sizeof(double));
    assert_non_null(a.out);
    /* The last CPE to arrive checks the shapes. */
    a.fault = MESH_BAD_ROWS;
    expect_launch_fails(cg, "mesh_rows", mesh_kernel, &a,
                        "kernel 'mesh_rows': CPE (7,7): mesh GEMM: CPE (3,2) has 5 C rows, CPE "
                        "(0,2) 4: a column must agree",
                        NULL);
    a.fault = MESH_BAD_POINTER;
    expect_launch_fails(cg, "mesh_pointer", mesh_kernel, &a,
                        "kernel 'mesh_pointer': CPE (0,0): mesh GEMM: the C (4 x 4, 64 bytes at ",
                        "is not in this CPE's allocated LDM");
    a.fault = MESH_EXTRA_CALL;
    expect_launch_fails(cg, "mesh_calls", mesh_kernel, &a,
                        "kernel 'mesh_calls': deadlock: every CPE that has not finished is "
                        "blocked: at the mesh GEMM: (2,5); 63 CPEs finished",
                        NULL);
    /* And the cluster runs the legal program afterwards. */
    a.fault = MESH_LEGAL;
    st_error err = {0};
    assert_int_equal(st_cpe_launch(cg, "mesh", mesh_kernel, &a, NULL, &err), ST_OK);
    check_mesh_values(&a);
    free(a.out);
    st_cpe_cluster_destroy(cg);
}

/* ---- illegal programs ---- */

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

/* ---- im2col / col2im against plain loops ---- */

/* Where image b's col row `row`, column p lies: [n][c kh kw][P]. */
static size_t col_at(const st_cpe_conv_geom *g, int b, size_t row, size_t p)
{
    size_t P = (size_t)g->oh * (size_t)g->ow, rows = (size_t)g->c * g->kh * g->kw;
    return ((size_t)b * rows + row) * P + p;
}

/* im2col (to_col) or col2im's sum (added into img) of n images, plainly:
 * the definition, element by element. */
static void plain_im2col(const st_cpe_conv_geom *g, int n, int to_col, float *img, float *col)
{
    for (int b = 0; b < n; b++)
        for (int c = 0; c < g->c; c++)
            for (int ki = 0; ki < g->kh; ki++)
                for (int kj = 0; kj < g->kw; kj++) {
                    size_t row = (size_t)(c * g->kh + ki) * g->kw + kj;
                    for (int oy = 0; oy < g->oh; oy++)
                        for (int ox = 0; ox < g->ow; ox++) {
                            int y = oy * g->sh - g->ph + ki, x = ox * g->sw - g->pw + kj;
                            int inside = y >= 0 && y < g->ih && x >= 0 && x < g->iw;
                            size_t at = col_at(g, b, row, (size_t)oy * g->ow + ox);
                            size_t src = (((size_t)b * g->c + c) * g->ih + y) * g->iw + x;
                            if (to_col)
                                col[at] = inside ? img[src] : 0.0f;
                            else if (inside)
                                img[src] += col[at];
                        }
                }
}

typedef struct im2col_run {
    st_cpe_conv_geom g;
    int n, accumulate;
    float *img, *col;
} im2col_run;

static st_status im2col_launch(st_cpe_cluster *cg, void *ctx, st_cpe_counters *out, st_error *err)
{
    const im2col_run *r = ctx;
    return st_cpe_im2col(cg, &r->g, r->n, r->img, r->col, out, err);
}

static st_status col2im_launch(st_cpe_cluster *cg, void *ctx, st_cpe_counters *out, st_error *err)
{
    const im2col_run *r = ctx;
    return st_cpe_col2im(cg, &r->g, r->n, r->col, r->img, r->accumulate, out, err);
}

static void test_im2col_col2im(void **state)
{
    (void)state;
    static const struct {
        int n;
        st_cpe_conv_geom g;
    } cases[] = {
        /* n; c, ih, iw, oh, ow, kh, kw, sh, sw, ph, pw, oc (not used by im2col) */
        {3, {1, 28, 28, 28, 28, 5, 5, 1, 1, 2, 2, 0}},     /* LeNet-5 conv1, padded */
        {2, {3, 13, 17, 7, 9, 3, 3, 2, 2, 1, 1, 0}},       /* odd sizes, stride 2 */
        {1, {2, 5, 5, 3, 3, 3, 3, 2, 2, 1, 1, 0}},         /* bottom/right padding from oh, ow */
        {2, {70, 6, 6, 6, 6, 1, 1, 1, 1, 0, 0, 0}},        /* 1x1, more rows than CPEs */
        {1, {3, 227, 227, 55, 55, 11, 11, 4, 4, 0, 0, 0}}, /* AlexNet conv1 */
        {2, {2, 5, 3, 4, 2, 2, 3, 1, 1, 0, 1, 0}},         /* kh != kw, ph != pw */
        /* Rows wider than a unit's LDM (15360 floats): im2col's output row
         * of 10000 with its 10002 inputs is cut into segments of 5000, as
         * is col2im's input row (10000 + 10004 col values); with stride 2,
         * 6001 outputs read 12003 inputs: segments of 3001. */
        {2, {1, 4, 10000, 4, 10000, 3, 3, 1, 1, 1, 1, 0}},
        {1, {2, 4, 12001, 2, 6001, 2, 3, 2, 2, 0, 1, 0}},
    };
    st_cpe_cluster *cg = cluster_new();
    for (size_t t = 0; t < sizeof cases / sizeof cases[0]; t++) {
        im2col_run r = {.g = cases[t].g, .n = cases[t].n};
        const st_cpe_conv_geom *g = &r.g;
        size_t image = (size_t)r.n * g->c * g->ih * g->iw;
        size_t cols = (size_t)r.n * g->c * g->kh * g->kw * g->oh * g->ow;
        float *src = floats_new(image), *want = floats_new(cols);
        float *dsrc_init = floats_new(image), *dsrc_want = floats_new(image);
        r.col = floats_new(cols);
        fill_uniform(src, image, 1.0f, 7 + t);
        fill_uniform(dsrc_init, image, 1.0f, 17 + t);
        fill_nan(r.col, cols); /* every element must be written */
        r.img = src;
        char what[96];
        snprintf(what, sizeof what, "im2col case %zu (n %d)", t, r.n);
        st_cpe_counters n;
        run_and_check_cost_only(cg, im2col_launch, &r,
                                &(cpe_test_output){r.col, cols * sizeof(float)}, 1, &n, what);
        plain_im2col(g, r.n, 1, src, want);
        assert_floats_equal(r.col, want, cols, what);
        assert_int_equal(n.dma_put_bytes, cols * sizeof(float));
        assert_true(n.ldm_peak <= SW_LDM_BYTES);

        /* col2im of other values, overwriting and accumulating: the
         * sum is order-dependent in float, so compare within a few
         * roundings. */
        fill_uniform(r.col, cols, 1.0f, 27 + t);
        for (r.accumulate = 0; r.accumulate <= 1; r.accumulate++) {
            r.img = floats_new(image);
            if (r.accumulate)
                memcpy(r.img, dsrc_init, image * sizeof(float));
            else
                fill_nan(r.img, image);
            for (size_t i = 0; i < image; i++)
                dsrc_want[i] = r.accumulate ? dsrc_init[i] : 0.0f;
            snprintf(what, sizeof what, "col2im case %zu (n %d%s)", t, r.n,
                     r.accumulate ? ", accumulating" : "");
            run_and_check_cost_only(cg, col2im_launch, &r,
                                    &(cpe_test_output){r.img, image * sizeof(float)}, 1, &n,
                                    what);
            plain_im2col(g, r.n, 0, dsrc_want, r.col);
            double tol = 8.0 * (double)(g->kh * g->kw) * FLT_EPSILON;
            for (size_t i = 0; i < image; i++)
                if (!(fabs(r.img[i] - dsrc_want[i]) <= tol * (1.0 + fabs(dsrc_want[i]))))
                    fail_msg("%s: dsrc[%zu] = %.9g, expected %.9g", what, i, r.img[i],
                             dsrc_want[i]);
            assert_int_equal(n.dma_put_bytes, image * sizeof(float));
            assert_true(n.dma_get_bytes >= (r.accumulate ? image * sizeof(float) : 0));
            free(r.img);
        }
        free(src);
        free(want);
        free(dsrc_init);
        free(dsrc_want);
        free(r.col);
    }
    st_error err = {0};
    st_cpe_conv_geom past = {1, 5, 5, 4, 4, 3, 3, 1, 1, 0, 0, 0}; /* 4 outputs need 6 rows */
    float one = 0.0f;
    assert_int_equal(st_cpe_im2col(cg, &past, 1, &one, &one, NULL, &err), ST_EINPUT);
    tl_assert_contains(err.msg, "st_cpe_im2col: the output (4 x 4) reaches past the padded input");
    st_cpe_cluster_destroy(cg);
}

/* ---- determinism ---- */

/* One iteration of one floating-point instruction per unit of n: cycles
 * 10 + 2 n (the loop's counter and branch make (1 + 3) / 2 = 2 a cycle),
 * none for n = 0. */
static void busy_loop(st_cpe *cpe, double n)
{
    st_cpe_loop loop = {.iterations = n, .fp = 1.0, .flops = (uint64_t)n};
    st_cpe_loop_run(cpe, &loop);
}

/* CPEs (r, 1..7) each send their id to (r, 0), which receives 7 messages
 * and puts the order it saw them in to args[8 r .. 8 r + 6]. */
static void many_to_one(st_cpe *cpe, void *args)
{
    double msg[ST_CPE_MSG_DOUBLES] = {0};
    if (st_cpe_col(cpe) != 0) {
        msg[0] = st_cpe_id(cpe);
        busy_loop(cpe, (double)(7 - st_cpe_col(cpe)) * 100);
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
    gemm_case t = {ST_CPE_F32, 0, 1, 100, 300, 50, 1.0, 0.0, 0, 3, 0, 0};
    st_cpe_counters n1, n2;
    void *c1, *c2;
    check_gemm(cg, &t, &n1, &c1);
    check_gemm(cg, &t, &n2, &c2);
    assert_memory_equal(&n1, &n2, sizeof n1);
    assert_memory_equal(c1, c2, 3 * t.m * t.n * sizeof(float));
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
    st_cpe_dma_get_control(cpe, s, args, sizeof *s, &reply);
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
    busy_loop(cpe, (double)n);
    st_cpe_dma_put_strided(cpe, s->dst + first, block, STRIDED_BLOCK * sizeof(double),
                           STRIDED_COLS * sizeof(double), STRIDED_ROWS_PER_CPE, &reply);
    st_cpe_dma_wait(cpe, &reply, 2);
}

static void test_dma_strided(void **state)
{
    (void)state;
    size_t count = (size_t)SW_CPES * STRIDED_ROWS_PER_CPE * STRIDED_COLS;
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
    for (int dir = 0; dir < ST_CPE_DMA_DIRS; dir++) {
        const st_cpe_dma_class *s = &n.dma[dir][ST_CPE_DMA_STRIDED][7]; /* 128 B blocks */
        assert_int_equal(s->transfers, 64);
        assert_int_equal(s->blocks, 64 * 3);
        assert_int_equal(s->bytes, 64 * 3 * 128);
    }
    assert_int_equal(n.dma_put_bytes, 64 * 3 * 128);
    assert_int_equal(n.dma_get_bytes, 64 * 3 * 128 + 64 * sizeof args);
    st_cpe_cluster_destroy(cg);
    free(src);
    free(dst);
}

/* ---- counters and time of hand-analysed kernels ---- */

/* Every CPE gets 1 KB, waits, runs a loop of 10 iterations of 2
 * floating-point and 1 memory instruction (80 flops); CPE (r,0) then
 * broadcasts one message along row r, the others receive it. */
static void one_get_one_bcast(st_cpe *cpe, void *args)
{
    st_cpe_reply reply = {0};
    char *buf = st_cpe_ldm_alloc(cpe, 1024, "buffer");
    st_cpe_dma_get(cpe, buf, (const char *)args + 1024 * (size_t)st_cpe_id(cpe), 1024, &reply);
    st_cpe_dma_wait(cpe, &reply, 1);
    st_cpe_loop loop = {.iterations = 10, .fp = 2, .mem = 1, .flops = 80};
    st_cpe_loop_run(cpe, &loop);
    double msg[ST_CPE_MSG_DOUBLES] = {0};
    if (st_cpe_col(cpe) == 0) {
        msg[0] = buf[0];
        st_cpe_bcast(cpe, ST_CPE_ROW, msg);
    } else {
        st_cpe_recv(cpe, ST_CPE_ROW, msg);
    }
}

/* one_get_one_bcast by hand:
 *   DMA      1024 B get: occupancy 3778.5 (a point of the curve) + latency
 *            1199 = 4977.5 cycles
 *   compute  10 + 10 x max(2, 1, (2 + 1 + 3) / 2) = 40 -> 5017.5
 *   send     0.6656803 cycles -> 5018.1656803; arrival + 10 = 5028.1656803
 *   receive  waits until 5028.1656803, + 1 = 5029.1656803 cycles
 * The receivers finish last; the first of them, (0,1), is the critical CPE:
 * compute 40, DMA 4977.5, register communication 0.6656803 + 10 + 1 =
 * 11.6656803 cycles; total 5029.1656803 / 1.45e9 + 5e-6 = 8.46839012e-6 s.
 * Counts alone (64-way balanced, nothing overlapped): compute 40, DMA
 * 64 x 4977.5 / 64 = 4977.5, register communication (8 x 0.6656803 + 56 x
 * 1) / 64 = 0.9582100 cycles.
 * Counters: 64 contiguous gets of 1024 B (size class 10), 65536 bytes, 8
 * broadcasts, 56 receives, 64 x 80 flops, LDM peak 1024 B. */
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
    assert_int_equal(n.flops, 64 * 80);
    assert_close(n.compute_cycles, 64 * 40.0, REL_EXACT, "compute_cycles");
    assert_int_equal(n.dma_get_bytes, 65536);
    assert_int_equal(n.dma_put_bytes, 0);
    for (int dir = 0; dir < ST_CPE_DMA_DIRS; dir++)
        for (int mode = 0; mode < ST_CPE_DMA_MODES; mode++)
            for (int k = 0; k < ST_CPE_DMA_SIZE_CLASSES; k++) {
                const st_cpe_dma_class *cls = &n.dma[dir][mode][k];
                int expected = dir == ST_CPE_DMA_GET && mode == ST_CPE_DMA_CONTIGUOUS && k == 10;
                assert_int_equal(cls->transfers, expected ? 64 : 0);
                assert_int_equal(cls->blocks, expected ? 64 : 0);
                assert_int_equal(cls->bytes, expected ? 65536 : 0);
            }
    assert_int_equal(n.msgs_bcast, 8);
    assert_int_equal(n.msgs_p2p, 0);
    assert_int_equal(n.msgs_received, 56);
    assert_int_equal(n.mesh_msgs_bcast, 0);
    assert_int_equal(n.ldm_peak, 1024);
    assert_int_equal(n.barriers, 0);
    assert_int_equal(n.critical_cpe, 1);
    assert_close(n.time.compute_s, 40.0 / HZ, REL_EXACT, "compute_s");
    assert_close(n.time.dma_s, 4977.5 / HZ, REL_EXACT, "dma_s");
    assert_close(n.time.regcomm_s, (SEND_BCAST_CYCLES + 11.0) / HZ, REL_EXACT, "regcomm_s");
    assert_true(n.time.sync_s == 0.0);
    assert_close(n.time.launch_s, 5e-6, REL_EXACT, "launch_s");
    assert_close(n.time.total_s, 8.468390124372918e-06, REL_EXACT, "total_s");

    st_cpe_cluster_destroy(cg);
    free(main_buf);
}

/* CPE i runs busy_loop(i): 10 + 2 i cycles (none for CPE 0), then all meet
 * at a barrier: the last arrival is CPE 63 at 136 cycles, the barrier
 * releases everyone at 136 + 100 = 236; the critical CPE is (0,0) (lowest
 * id among equals), all 236 cycles at the barrier. */
static void barrier_after_work(st_cpe *cpe, void *args)
{
    (void)args;
    busy_loop(cpe, (double)st_cpe_id(cpe));
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
    assert_close(n.time.sync_s, 236.0 / HZ, REL_EXACT, "sync_s");
    assert_close(n.time.total_s, 236.0 / HZ + 5e-6, REL_EXACT, "total_s");
    /* The cluster costs later launches with the parameters it is given:
     * no barrier cost and no launch overhead leave the last arrival. */
    st_cpe_cost_params q = st_cpe_cost_params_default();
    q.launch_seconds = 0.0;
    q.barrier_cycles = 0.0;
    st_cpe_cluster_set_cost_params(cg, &q);
    assert_int_equal(st_cpe_launch(cg, "barrier", barrier_after_work, NULL, &n, &err), ST_OK);
    assert_close(n.time.total_s, 136.0 / HZ, REL_EXACT, "overridden parameters");
    st_cpe_cluster_destroy(cg);
}

/* ---- the cost model ---- */

/* A lone transfer's time is its occupancy from the curve plus its latency.
 * 1000 B lies between the curve's 512 and 1024 B points: get 2242.9 + 488
 * x (3778.5 - 2242.9) / 512 = 3706.51875 cycles, + 1199 = 4905.51875; put
 * 5835.5 + 488 x (8884.0 - 5835.5) / 512 = 8741.1015625, + 1199 =
 * 9940.1015625. A get and a put issued together share the CPE's channel:
 * the put starts when the get's occupancy ends, 3706.51875 + 8741.1015625
 * + 1199 = 13646.6203125 cycles. */
enum { LONE_GET, LONE_PUT, GET_AND_PUT };

/* mem: 1000 B per CPE. */
static void lone_transfers(st_cpe *cpe, char *mem, int mode)
{
    char *buf = st_cpe_ldm_alloc(cpe, 1000, "buffer");
    char *mine = mem + 1000 * (size_t)st_cpe_id(cpe);
    st_cpe_reply get = {0}, put = {0};
    if (mode != LONE_PUT)
        st_cpe_dma_get(cpe, buf, mine, 1000, &get);
    if (mode != LONE_GET)
        st_cpe_dma_put(cpe, mine, buf, 1000, &put);
    st_cpe_dma_wait(cpe, &get, get.count);
    st_cpe_dma_wait(cpe, &put, put.count);
}

static void lone_get(st_cpe *cpe, void *mem)
{
    lone_transfers(cpe, mem, LONE_GET);
}

static void lone_put(st_cpe *cpe, void *mem)
{
    lone_transfers(cpe, mem, LONE_PUT);
}

static void get_and_put(st_cpe *cpe, void *mem)
{
    lone_transfers(cpe, mem, GET_AND_PUT);
}

static void test_cost_dma(void **state)
{
    (void)state;
    st_cpe_cost_params p = st_cpe_cost_params_default();
    assert_close(st_cpe_dma_cost(&p, 0, ST_CPE_DMA_STRIDED, 1000, 1).occupancy_cycles, 3706.51875, REL_EXACT, "get 1000");
    assert_close(st_cpe_dma_cost(&p, 1, ST_CPE_DMA_STRIDED, 1000, 1).occupancy_cycles, 8741.1015625, REL_EXACT, "put 1000");
    /* Below the first point, the first point's cost; strided blocks each
     * pay theirs (48 B: between the equal 32 and 64 B points); beyond the
     * last point the last slope: 27375.5 + 8192 x (27375.5 - 13892) / 4096. */
    assert_close(st_cpe_dma_cost(&p, 0, ST_CPE_DMA_STRIDED, 4, 1).occupancy_cycles, 1065.1, REL_EXACT, "get 4");
    assert_close(st_cpe_dma_cost(&p, 0, ST_CPE_DMA_STRIDED, 48, 4).occupancy_cycles, 4 * 1065.1, REL_EXACT, "get 4 x 48");
    assert_close(st_cpe_dma_cost(&p, 0, ST_CPE_DMA_STRIDED, 16384, 1).occupancy_cycles, 54342.5, REL_EXACT, "get 16384");
    assert_close(st_cpe_dma_cost(&p, 1, ST_CPE_DMA_STRIDED, 8192, 2).occupancy_cycles, 2 * 49872.1, REL_EXACT,
                 "put 2 x 8192");

    char *mem = calloc(SW_CPES, 1000);
    assert_non_null(mem);
    st_cpe_cluster *cg = cluster_new();
    static const st_cpe_kernel kernels[] = {lone_get, lone_put, get_and_put};
    static const double want[] = {4905.51875, 9940.1015625, 13646.6203125};
    for (int mode = LONE_GET; mode <= GET_AND_PUT; mode++) {
        st_cpe_counters n;
        st_error err = {0};
        assert_int_equal(st_cpe_launch(cg, "lone", kernels[mode], mem, &n, &err), ST_OK);
        assert_close(n.time.dma_s, want[mode] / HZ, REL_EXACT, "lone transfer");
        assert_close(n.time.total_s, want[mode] / HZ + 5e-6, REL_EXACT, "lone transfer total");
    }
    st_cpe_cluster_destroy(cg);
    free(mem);
}

/* 8 blocks of 4 KB per CPE, each followed by a loop of 1000 iterations of
 * 16 floating-point instructions: 10 + 16000 = 16010 cycles, longer than a
 * block's transfer, 13892.0 + 1199 = 15091 cycles. The arguments (16 B)
 * come first: 1065.1 + 1199 = 2264.1 cycles.
 *   single-buffered (get, wait, compute): 2264.1 + 8 x (15091 + 16010) =
 *     251072.1 cycles, 122992.1 of them DMA;
 *   double-buffered (the next block's get issued before computing on the
 *     current one): block 0 is waited for (2264.1 + 15091 = 17355.1);
 *     block 1 was issued at 2264.1 and completes at 31247.1, before the
 *     first computation ends (33365.1); each later block is issued when a
 *     computation starts and completes 15091 cycles later, before it ends:
 *     17355.1 + 8 x 16010 = 145435.1 cycles, 17355.1 of them DMA. */
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
    st_cpe_dma_get_control(cpe, s, argp, sizeof *s, &arg_reply);
    st_cpe_dma_wait(cpe, &arg_reply, 1);
    char *buf[2] = {st_cpe_ldm_alloc(cpe, STREAM_BLOCK_BYTES, "block"),
                    st_cpe_ldm_alloc(cpe, STREAM_BLOCK_BYTES, "next block")};
    st_cpe_reply reply[2] = {{0}, {0}};
    const char *mine = s->src + (size_t)st_cpe_id(cpe) * STREAM_BLOCKS * STREAM_BLOCK_BYTES;
    st_cpe_dma_get(cpe, buf[0], mine, STREAM_BLOCK_BYTES, &reply[0]);
    st_cpe_loop work = {.iterations = 1000, .fp = 16, .flops = 16000};
    for (int i = 0; i < STREAM_BLOCKS; i++) {
        int cur = i & 1;
        if (i + 1 < STREAM_BLOCKS && s->double_buffered) {
            reply[!cur] = (st_cpe_reply){0};
            st_cpe_dma_get(cpe, buf[!cur], mine + (size_t)(i + 1) * STREAM_BLOCK_BYTES,
                           STREAM_BLOCK_BYTES, &reply[!cur]);
        }
        st_cpe_dma_wait(cpe, &reply[cur], 1);
        st_cpe_loop_run(cpe, &work);
        if (i + 1 < STREAM_BLOCKS && !s->double_buffered) {
            reply[!cur] = (st_cpe_reply){0};
            st_cpe_dma_get(cpe, buf[!cur], mine + (size_t)(i + 1) * STREAM_BLOCK_BYTES,
                           STREAM_BLOCK_BYTES, &reply[!cur]);
        }
    }
}

static void test_cost_overlap(void **state)
{
    (void)state;
    char *src = calloc(SW_CPES * STREAM_BLOCKS, STREAM_BLOCK_BYTES);
    assert_non_null(src);
    st_cpe_cluster *cg = cluster_new();
    st_cpe_counters single, twin;
    st_error err = {0};
    stream_args args = {src, 0};
    assert_int_equal(st_cpe_launch(cg, "single", stream_blocks, &args, &single, &err), ST_OK);
    args.double_buffered = 1;
    assert_int_equal(st_cpe_launch(cg, "double", stream_blocks, &args, &twin, &err), ST_OK);
    assert_close(single.time.total_s, 251072.1 / HZ + 5e-6, REL_EXACT, "single-buffered total");
    assert_close(single.time.dma_s, 122992.1 / HZ, REL_EXACT, "single-buffered DMA");
    assert_close(twin.time.total_s, 145435.1 / HZ + 5e-6, REL_EXACT, "double-buffered total");
    assert_close(twin.time.dma_s, 17355.1 / HZ, REL_EXACT, "double-buffered DMA");
    assert_close(single.time.compute_s, 8 * 16010.0 / HZ, REL_EXACT, "compute");
    assert_close(twin.time.compute_s, 8 * 16010.0 / HZ, REL_EXACT, "compute");
    /* The same transfers either way: only their overlap differs. */
    assert_true(single.dma_get_bytes == twin.dma_get_bytes &&
                single.dma_put_bytes == twin.dma_put_bytes &&
                st_cpe_counters_dma_transfers(&single) == st_cpe_counters_dma_transfers(&twin));
    st_cpe_cluster_destroy(cg);
    free(src);
}

/* The pipeline model of a loop: loop_entry 10 + iterations x max(fp, mem,
 * (fp + mem + any + 3 / unroll) / 2, chain). */
static void test_cost_loops(void **state)
{
    (void)state;
    st_cpe_cost_params p = st_cpe_cost_params_default();
    static const struct {
        const char *bound;
        st_cpe_loop loop;
        double cycles;
    } cases[] = {
        /* P0: max(4, 1, (4 + 1 + 0.75) / 2 = 2.875, 0) = 4 */
        {"P0", {.iterations = 100, .fp = 4, .mem = 1, .unroll = 4}, 10 + 100 * 4.0},
        /* P1: max(1, 3, (1 + 3 + 0.75) / 2 = 2.375, 0) = 3 */
        {"P1", {.iterations = 100, .fp = 1, .mem = 3, .unroll = 4}, 10 + 100 * 3.0},
        /* dual issue: max(2, 2, (2 + 2 + 2 + 3) / 2 = 4.5, 0) = 4.5 */
        {"dual issue", {.iterations = 100, .fp = 2, .mem = 2, .any = 2, .unroll = 1},
         10 + 100 * 4.5},
        /* chain: max(1, 1, (1 + 1 + 0.75) / 2, 7) = 7 */
        {"chain", {.iterations = 100, .fp = 1, .mem = 1, .chain = 7, .unroll = 4}, 10 + 100 * 7.0},
        /* unroll 0 counts as 1: max(1, 1, (1 + 1 + 3) / 2 = 2.5) */
        {"no unroll", {.iterations = 3, .fp = 1, .mem = 1}, 10 + 3 * 2.5},
        {"empty", {.iterations = 0, .fp = 5}, 0.0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        assert_close(st_cpe_loop_cycles(&p, &cases[i].loop), cases[i].cycles, REL_EXACT,
                     cases[i].bound);
}

/* The one DMA charge by hand (st_cpe_dma_cost): a contiguous 2 KB get
 * occupies 6864.6 cycles and replies 1199 later; 8 blocks of 256 B strided
 * 8 x 1531.5, 16 of 128 B 16 x 1182.9; a put takes the put curve (14937.9
 * at 2 KB) and latency; an interleaved transfer pays its share of the
 * occupancy, not of the latency; and the size classes. */
static void test_dma_charge(void **state)
{
    (void)state;
    st_cpe_cost_params p = st_cpe_cost_params_default();
    st_cpe_dma_charge c = st_cpe_dma_cost(&p, 0, ST_CPE_DMA_CONTIGUOUS, 2048, 1);
    assert_close(c.occupancy_cycles, 6864.6, REL_EXACT, "2 KB get");
    assert_close(c.latency_cycles, 1199.0, REL_EXACT, "get latency");
    c = st_cpe_dma_cost(&p, 0, ST_CPE_DMA_STRIDED, 256, 8);
    assert_close(c.occupancy_cycles, 8 * 1531.5, REL_EXACT, "8 x 256 B strided");
    c = st_cpe_dma_cost(&p, 0, ST_CPE_DMA_STRIDED, 128, 16);
    assert_close(c.occupancy_cycles, 16 * 1182.9, REL_EXACT, "16 x 128 B strided");
    c = st_cpe_dma_cost(&p, 1, ST_CPE_DMA_CONTIGUOUS, 2048, 1);
    assert_close(c.occupancy_cycles + c.latency_cycles, 1199 + 14937.9, REL_EXACT, "2 KB put");
    st_cpe_cost_params q = p;
    q.dma_interleaved_share = 0.5;
    q.dma_get_latency_cycles += 1000.0;
    c = st_cpe_dma_cost(&q, 0, ST_CPE_DMA_INTERLEAVED, 256, 8);
    assert_close(c.occupancy_cycles, 4 * 1531.5, REL_EXACT, "interleaved share");
    assert_close(c.latency_cycles, 2199.0, REL_EXACT, "latency");
    c = st_cpe_dma_cost(&q, 0, ST_CPE_DMA_STRIDED, 256, 8);
    assert_close(c.occupancy_cycles, 8 * 1531.5, REL_EXACT, "no share when strided");

    assert_int_equal(st_cpe_dma_size_class(1), 0);
    assert_int_equal(st_cpe_dma_size_class(1023), 9);
    assert_int_equal(st_cpe_dma_size_class(1024), 10);
    assert_int_equal(st_cpe_dma_size_class((size_t)1 << 40), ST_CPE_DMA_SIZE_CLASSES - 1);
}

/* ---- benchmark: emulated GEMM against a triple loop ---- */

static int bench(void)
{
    enum { N = 256, REPEATS = 3 };
    float *a = malloc(N * N * sizeof *a), *b = malloc(N * N * sizeof *b);
    float *c = malloc(N * N * sizeof *c), *ref = malloc(N * N * sizeof *ref);
    st_cpe_cluster *cg = NULL;
    st_error err = {0};
    if (!a || !b || !c || !ref || st_cpe_cluster_create(&cg, NULL, &err) != ST_OK) {
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
        double t0 = st_now();
        for (int i = 0; i < N; i++)
            for (int j = 0; j < N; j++) {
                float sum = 0.0f;
                for (int k = 0; k < N; k++)
                    sum += a[i * N + k] * b[k * N + j];
                ref[i * N + j] = sum;
            }
        double t1 = st_now();
        if (t1 - t0 < loop_best)
            loop_best = t1 - t0;
    }
    st_cpe_counters n;
    for (int r = 0; r < REPEATS; r++) {
        double t0 = st_now();
        if (st_cpe_gemm(cg, ST_CPE_F32, 0, 0, N, N, N, 1.0, a, N, b, N, 0.0, c, N, &n, &err)) {
            fprintf(stderr, "bench: %s\n", err.msg);
            return 1;
        }
        double t1 = st_now();
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
        cmocka_unit_test(test_gemm_narrow_leaves_mesh_idle),
        cmocka_unit_test(test_gemm_bad_arguments),
        cmocka_unit_test(test_mesh_gemm),
        cmocka_unit_test(test_mesh_gemm_illegal),
        cmocka_unit_test(test_illegal_programs),
        cmocka_unit_test(test_im2col_col2im),
        cmocka_unit_test(test_determinism),
        cmocka_unit_test(test_dma_strided),
        cmocka_unit_test(test_counters_hand),
        cmocka_unit_test(test_barrier_time),
        cmocka_unit_test(test_cost_dma),
        cmocka_unit_test(test_cost_overlap),
        cmocka_unit_test(test_cost_loops),
        cmocka_unit_test(test_dma_charge),
#ifdef TEST_CONTEXT_MECHANISM
        cmocka_unit_test(test_context_mechanism),
#endif
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
