/* The streaming CPE kernels (include/cpe/kernels.h, "streaming kernels") against
 * independent truths: pooling forward and backward against the reference
 * backend's pooling kernel, activations against st_act_forward
 * and the reference activation kernel's backward, bias add + activation and
 * the bias gradient against plain loops (the gradient summed in double, as
 * the reference), the gradient sum against st_ps_reduce_range of a real
 * st_ps, and the solver update against st_solver_update on the host for
 * every rule. (The layout kernels are tested with the implicit convolution
 * in test_cpe_conv.c.)
 *
 * Pooling takes each of its plans (cpe_pool.c): whole planes, groups of
 * rows (a 300x301 plane; rows of 2500), blocks of columns of one row with
 * strided DMA (rows of 5000), and forward, a window streamed through the
 * LDM by rows (a 300x300 global average) or by pieces of a row (a 2x20000
 * window); each plan is recognised from the transfers it makes. Shapes
 * also include sizes that do not divide by 8 or 64, overlapping windows
 * (3x3 stride 2) with padding, windows with gaps between them (stride 3 >
 * size 2), tensors far larger than a CPE's 64 KB (2.2 million floats of
 * bias gradient, 1,000,003-float arenas).
 *
 * Tolerances: bitwise for pooling (values and argmax, both algorithms),
 * the gradient sum and the solver update (memcmp of whole buffers, so
 * nothing outside the range may change either); 1e-6 relative for the
 * rest, and bitwise for the bias gradient when the CPEs split it by channel
 * range, as kernels.h promises. Max pooling draws integers from -2..2, so
 * windows have ties and the first-maximum rule is checked. Every result
 * buffer is prefilled with NaN where the kernel must overwrite it.
 *
 * Counters: each launch is one launch, its LDM peak at most 64 KB, DMA at
 * least the tensor bytes the kernel must move (exactly, for the bytes
 * written), and flops as each kernel's header declares them, counted here
 * from the shapes; the streaming time of a long activation against the DMA
 * curve by hand. Every kernel is run again in cost-only mode: the same
 * counters, nothing written.
 *
 * Also run in the portable build (@portable): the emulator's CPE contexts
 * on ucontext and its GEMM without the AVX2 clone. */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpe_testlib.h"

#include "backends/ref.h"
#include "cpe/cpe.h"
#include "cpe/kernels.h"
#include "ops/params.h"
#include "parallel/ps.h"
#include "ops/solver.h"

#define REL_TOL 1e-6
#define STREAM_N 1000003 /* floats of the stream kernels' arenas */

/* Integers -2..2: ties in every other window. */
static void fill_small_ints(float *p, size_t n, uint64_t seed)
{
    uint64_t s = seed | 1;
    for (size_t i = 0; i < n; i++)
        p[i] = (float)(int)floor((rand_unit(&s) + 1.0) * 2.5) - 2.0f;
}

static void assert_floats_close(const float *got, const float *want, size_t n, const char *what)
{
    for (size_t i = 0; i < n; i++)
        if (!(fabs((double)got[i] - want[i]) <= REL_TOL * fabs((double)want[i])))
            fail_msg("%s: [%zu] = %.9g, expected %.9g (relative %g)", what, i, got[i], want[i],
                     REL_TOL);
}

static void assert_counters_sane(const st_cpe_counters *n, const char *what)
{
    if (n->launches != 1 || n->ldm_peak > SW_LDM_BYTES || !(n->time.total_s > 0.0))
        fail_msg("%s: %llu launches, LDM peak %zu bytes, %g s predicted (expected 1, <= %d, > 0)",
                 what, (unsigned long long)n->launches, n->ldm_peak, n->time.total_s,
                 SW_LDM_BYTES);
}

/* ---- pooling against the reference backend ---- */

/* How pooling cuts a plane (cpe_pool.c, pool_plan): whole planes; groups
 * of rows; blocks of columns of one row; forward, one output at a time
 * with its window streamed through LDM. */
typedef enum pool_plan { PLAN_PLANES, PLAN_ROWS, PLAN_COLUMNS, PLAN_STREAM } pool_plan;

typedef struct pool_case {
    int n, c, ih, iw, k_h, k_w, s_h, s_w;
    int pad_h, pad_w; /* total padding, half of it top / left (Darknet's maxpool) */
    pool_plan fwd, bwd;
    int stream_gets;  /* forward, PLAN_STREAM: gets per plane */
    unsigned strided; /* bit 0: forward uses strided DMA, bit 1: backward */
} pool_case;

static st_pool_desc pool_desc(const pool_case *t, st_pool_alg alg, const int *batch)
{
    st_pool_desc d;
    memset(&d, 0, sizeof d);
    d.base.kind = ST_K_POOL;
    d.base.n = t->n;
    d.base.batch_sizes = batch;
    d.base.n_batch_sizes = 1;
    d.alg = alg;
    d.c = t->c;
    d.ih = t->ih;
    d.iw = t->iw;
    d.kh = t->k_h;
    d.kw = t->k_w;
    d.sh = t->s_h;
    d.sw = t->s_w;
    d.ph = t->pad_h / 2;
    d.pw = t->pad_w / 2;
    d.oh = (t->ih + t->pad_h - t->k_h) / t->s_h + 1;
    d.ow = (t->iw + t->pad_w - t->k_w) / t->s_w + 1;
    return d;
}

/* Valid positions of a window along one axis: output o, size k, stride s,
 * padding p, input extent len. */
static long valid_span(int o, int k, int s, int p, int len)
{
    long lo = (long)o * s - p, hi = lo + k;
    if (lo < 0)
        lo = 0;
    if (hi > len)
        hi = len;
    return hi > lo ? hi - lo : 0;
}

/* The forward flops pool_forward declares: one per valid window position,
 * plus the division of each average. */
static uint64_t pool_forward_flops(const st_pool_desc *d, int n)
{
    uint64_t per_plane = 0;
    for (int oy = 0; oy < d->oh; oy++)
        for (int ox = 0; ox < d->ow; ox++)
            per_plane += (uint64_t)(valid_span(oy, d->kh, d->sh, d->ph, d->ih) *
                                    valid_span(ox, d->kw, d->sw, d->pw, d->iw)) +
                         (d->alg == ST_POOL_AVG);
    return per_plane * (uint64_t)n * (uint64_t)d->c;
}

/* The plan a launch took, from its gets: whole planes fetch each plane's
 * unit_gets tensors once; rows and columns cut planes into more units;
 * streaming fetches stream_gets pieces per plane. Strided DMA only where
 * the case says. 64 argument blocks come first. */
static void expect_plan(const st_cpe_counters *n, pool_plan plan, size_t planes,
                        uint64_t unit_gets, int stream_gets, int strided, const char *what)
{
    uint64_t gets = 0, strided_gets = 0;
    for (int mode = 0; mode < ST_CPE_DMA_MODES; mode++)
        for (int k = 0; k < ST_CPE_DMA_SIZE_CLASSES; k++) {
            gets += n->dma[ST_CPE_DMA_GET][mode][k].transfers;
            if (mode == ST_CPE_DMA_STRIDED)
                strided_gets += n->dma[ST_CPE_DMA_GET][mode][k].transfers;
        }
    uint64_t whole = SW_CPES + planes * unit_gets;
    int ok = plan == PLAN_PLANES   ? gets == whole
             : plan == PLAN_STREAM ? gets == SW_CPES + planes * (uint64_t)stream_gets
                                   : gets > whole;
    if (!ok || (strided_gets > 0) != (strided != 0))
        fail_msg("%s: %llu gets (%llu strided) for plan %d over %zu planes (whole planes: %llu, "
                 "strided %s)",
                 what, (unsigned long long)gets, (unsigned long long)strided_gets, (int)plan,
                 planes, (unsigned long long)whole, strided ? "expected" : "not expected");
}

typedef struct pool_run {
    const st_pool_desc *d;
    int n, accumulate;
    const float *src; /* forward: src; backward: diff_dst */
    float *dst;       /* forward: dst; backward: diff_src */
    int *argmax;
} pool_run;

static st_status pool_forward_launch(st_cpe_cluster *cg, void *ctx, st_cpe_counters *out,
                                     st_error *err)
{
    const pool_run *r = ctx;
    return st_cpe_pool_forward(cg, r->d, r->n, r->src, r->dst, r->argmax, out, err);
}

static st_status pool_backward_launch(st_cpe_cluster *cg, void *ctx, st_cpe_counters *out,
                                      st_error *err)
{
    const pool_run *r = ctx;
    return st_cpe_pool_backward(cg, r->d, r->n, r->src, r->argmax, r->dst, r->accumulate, out,
                                err);
}

static void check_pool(st_cpe_cluster *cg, const pool_case *t, st_pool_alg alg, size_t index)
{
    int batch[1] = {t->n};
    st_pool_desc d = pool_desc(t, alg, batch);
    const char *name = alg == ST_POOL_MAX ? "max" : "avg";
    int is_max = alg == ST_POOL_MAX;
    size_t in = (size_t)t->n * d.c * d.ih * d.iw, outs = (size_t)t->n * d.c * d.oh * d.ow;
    size_t planes = (size_t)t->n * d.c;
    st_error err = {0};
    st_kernel *ref = NULL;
    if (st_backend_ref.kernel_create(NULL, &d.base, &ref, &err) != ST_OK)
        fail_msg("the reference pooling kernel: %s", err.msg);
    float *src = floats_new(in), *dst_ref = floats_new(outs), *dst = floats_new(outs);
    float *dy = floats_new(outs), *dx_init = floats_new(in), *dx_ref = floats_new(in);
    float *dx = floats_new(in);
    int *argmax_ref = ref->workspace_bytes ? malloc(ref->workspace_bytes) : NULL;
    int *argmax = malloc(outs * sizeof *argmax);
    assert_non_null(argmax);
    if (is_max)
        fill_small_ints(src, in, 11 + index);
    else
        fill_uniform(src, in, 1.0f, 11 + index);
    fill_uniform(dy, outs, 1.0f, 101 + index);
    fill_uniform(dx_init, in, 1.0f, 201 + index);
    fill_nan(dst, outs);
    for (size_t i = 0; i < outs; i++)
        argmax[i] = -7;

    st_kargs ka;
    memset(&ka, 0, sizeof ka);
    ka.n = t->n;
    ka.src = src;
    ka.dst = dst_ref;
    ka.workspace = argmax_ref;
    ka.training = 1;
    assert_int_equal(ref->ops->forward(ref, &ka, &err), ST_OK);
    char what[112];
    snprintf(what, sizeof what, "pool case %zu (%dx%dx%dx%d) %s forward", index, t->n, t->c,
             t->ih, t->iw, name);
    pool_run run = {&d, t->n, 0, src, dst, argmax};
    cpe_test_output fwd_outs[2] = {{dst, outs * sizeof(float)}, {argmax, outs * sizeof(int)}};
    st_cpe_counters n;
    run_and_check_cost_only(cg, pool_forward_launch, &run, fwd_outs, 2, &n, what);
    assert_floats_equal(dst, dst_ref, outs, what);
    for (size_t i = 0; i < outs; i++)
        if (argmax[i] != (is_max ? argmax_ref[i] : -7))
            fail_msg("%s: argmax[%zu] = %d, expected %d", what, i, argmax[i],
                     is_max ? argmax_ref[i] : -7);
    assert_counters_sane(&n, what);
    assert_int_equal(n.flops, pool_forward_flops(&d, t->n));
    assert_true(n.dma_get_bytes >= in * sizeof(float));
    assert_int_equal(n.dma_put_bytes, outs * (sizeof(float) + (is_max ? sizeof(int) : 0)));
    expect_plan(&n, t->fwd, planes, 1, t->stream_gets, t->strided & 1u, what);

    run.src = dy;
    run.dst = dx;
    for (run.accumulate = 0; run.accumulate <= 1; run.accumulate++) {
        memcpy(dx_ref, dx_init, in * sizeof *dx_ref);
        if (run.accumulate)
            memcpy(dx, dx_init, in * sizeof *dx);
        else
            fill_nan(dx, in);
        ka.diff_src = dx_ref;
        ka.diff_dst = dy;
        ka.accumulate = run.accumulate;
        assert_int_equal(ref->ops->backward_data(ref, &ka, &err), ST_OK);
        snprintf(what, sizeof what, "pool case %zu (%dx%dx%dx%d) %s backward%s", index, t->n,
                 t->c, t->ih, t->iw, name, run.accumulate ? " accumulating" : "");
        run_and_check_cost_only(cg, pool_backward_launch, &run,
                                &(cpe_test_output){dx, in * sizeof(float)}, 1, &n, what);
        assert_floats_equal(dx, dx_ref, in, what);
        assert_counters_sane(&n, what);
        assert_true(n.dma_get_bytes >= outs * sizeof(float) * (is_max ? 2 : 1) +
                                           (run.accumulate ? in * sizeof(float) : 0));
        assert_int_equal(n.dma_put_bytes, in * sizeof(float));
        expect_plan(&n, t->bwd, planes, 1 + (uint64_t)is_max + (uint64_t)run.accumulate, 0,
                    t->strided & 2u, what);
    }
    ref->ops->destroy(ref);
    free(src);
    free(dst_ref);
    free(dst);
    free(dy);
    free(dx_init);
    free(dx_ref);
    free(dx);
    free(argmax_ref);
    free(argmax);
}

/* The plans, worked out from pool_plan: a unit may take 48 KB, 12288
 * words (floats, and ints of argmax), for its own side (outputs forward,
 * inputs backward), the other side's rows and columns it needs, and the
 * argmax grid (max pooling). */
static void test_pool(void **state)
{
    (void)state;
    static const pool_case cases[] = {
        /* n, c, ih, iw, kh, kw, sh, sw, pad h, pad w; forward, backward plan */
        {3, 13, 37, 41, 3, 3, 2, 2, 2, 2, PLAN_PLANES, PLAN_PLANES, 0, 0}, /* overlapping */
        {2, 5, 8, 8, 2, 2, 2, 2, 0, 0, PLAN_PLANES, PLAN_PLANES, 0, 0},
        {4, 3, 17, 19, 5, 3, 1, 2, 4, 2, PLAN_PLANES, PLAN_PLANES, 0, 0}, /* kh != kw, sh != sw */
        {2, 3, 9, 10, 2, 2, 3, 3, 1, 1, PLAN_PLANES, PLAN_PLANES, 0, 0},  /* gaps; last clipped */
        {1, 1, 1, 1, 1, 1, 1, 1, 0, 0, PLAN_PLANES, PLAN_PLANES, 0, 0},
        {64, 16, 6, 6, 2, 2, 2, 2, 1, 1, PLAN_PLANES, PLAN_PLANES, 0, 0}, /* 1024 small planes */
        {1, 1, 700, 3, 3, 3, 1, 1, 2, 2, PLAN_PLANES, PLAN_PLANES, 0, 0}, /* tall and narrow */
        {2, 3, 7, 7, 7, 7, 1, 1, 0, 0, PLAN_PLANES, PLAN_PLANES, 0, 0},   /* one window */
        /* A 300x301 plane: forward 9 of the 150 output rows (with their
         * 19 input rows of 301: 1359 + 5719 + 1359 words), backward 18
         * input rows. */
        {1, 2, 300, 301, 3, 3, 2, 2, 2, 2, PLAN_ROWS, PLAN_ROWS, 0, 0},
        /* Rows of 2500: forward one output row of 1250 with its 3 input
         * rows (1250 + 7500 + 1250), backward one or two input rows. */
        {1, 2, 5, 2500, 3, 3, 2, 2, 2, 2, PLAN_ROWS, PLAN_ROWS, 0, 0},
        /* Rows of 5000: not even one row fits (forward 2500 + 3 x 5000),
         * so 1250 output columns with their 3 x 2501 inputs, fetched with
         * strided DMA; backward 2500 input columns and the 3 x 1252
         * gradients (and argmax) that reach them, strided too. */
        {1, 2, 5, 5000, 3, 3, 2, 2, 2, 2, PLAN_COLUMNS, PLAN_COLUMNS, 0, 3},
        /* A 300x300 global pool: one output whose 90000-value window is
         * streamed 40 rows at a time (12287 words / 300), 8 gets per
         * plane; backward, 37 input rows at a time. */
        {1, 3, 300, 300, 300, 300, 1, 1, 0, 0, PLAN_STREAM, PLAN_ROWS, 8, 0},
        /* A 2x20000 window: not one of its rows fits, so each row comes in
         * two pieces (12286 or 12287 words): 4 gets; backward, 10000
         * input columns of one row (contiguous: the plane has one output). */
        {1, 1, 2, 20000, 2, 20000, 1, 1, 0, 0, PLAN_STREAM, PLAN_COLUMNS, 4, 0},
    };
    st_cpe_cluster *cg = cluster_new();
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        check_pool(cg, &cases[i], ST_POOL_MAX, i);
        check_pool(cg, &cases[i], ST_POOL_AVG, i);
    }
    st_cpe_cluster_destroy(cg);
}

/* ---- activations ---- */

typedef struct act_run {
    st_act act;
    size_t count;
    const float *dst;     /* backward: the forward output */
    const float *diff;    /* forward: src; backward: diff_dst */
    float *out;           /* forward: dst; backward: diff_src */
    int accumulate;
} act_run;

static st_status act_forward_launch(st_cpe_cluster *cg, void *ctx, st_cpe_counters *out,
                                    st_error *err)
{
    const act_run *r = ctx;
    return st_cpe_act_forward(cg, r->act, r->count, r->diff, r->out, out, err);
}

static st_status act_backward_launch(st_cpe_cluster *cg, void *ctx, st_cpe_counters *out,
                                     st_error *err)
{
    const act_run *r = ctx;
    return st_cpe_act_backward(cg, r->act, r->count, r->dst, r->diff, r->out, r->accumulate, out,
                               err);
}

static void test_act(void **state)
{
    (void)state;
    static const size_t counts[] = {1, 5, 100003};
    st_cpe_cluster *cg = cluster_new();
    st_error err = {0};
    for (int act = 0; act < ST_ACT_COUNT; act++)
        for (size_t ci = 0; ci < sizeof counts / sizeof counts[0]; ci++) {
            size_t count = counts[ci];
            float *src = floats_new(count), *want = floats_new(count), *dst = floats_new(count);
            float *dy = floats_new(count), *dx_init = floats_new(count);
            float *dx_want = floats_new(count), *dx = floats_new(count);
            fill_uniform(src, count, 3.0f, 7 + ci);
            fill_uniform(dy, count, 1.0f, 17 + ci);
            fill_uniform(dx_init, count, 1.0f, 27 + ci);
            memcpy(want, src, count * sizeof *want);
            st_act_forward((st_act)act, want, count);
            char what[80];
            snprintf(what, sizeof what, "%s forward, %zu values", st_act_names[act], count);
            fill_nan(dst, count);
            st_cpe_counters n;
            act_run run = {(st_act)act, count, NULL, src, dst, 0};
            run_and_check_cost_only(cg, act_forward_launch, &run,
                                    &(cpe_test_output){dst, count * sizeof(float)}, 1, &n, what);
            assert_floats_close(dst, want, count, what);
            memcpy(dst, src, count * sizeof *dst); /* in place */
            assert_int_equal(st_cpe_act_forward(cg, (st_act)act, count, dst, dst, NULL, &err),
                             ST_OK);
            assert_floats_close(dst, want, count, what);

            /* Backward against the reference activation kernel. */
            st_act_desc d;
            memset(&d, 0, sizeof d);
            int batch[1] = {1};
            d.base.kind = ST_K_ACT;
            d.base.n = 1;
            d.base.batch_sizes = batch;
            d.base.n_batch_sizes = 1;
            d.count = count;
            d.act = (st_act)act;
            st_kernel *ref = NULL;
            assert_int_equal(st_backend_ref.kernel_create(NULL, &d.base, &ref, &err), ST_OK);
            for (int accumulate = 0; accumulate <= 1; accumulate++) {
                st_kargs ka;
                memset(&ka, 0, sizeof ka);
                ka.n = 1;
                ka.dst = want;
                ka.diff_dst = dy;
                ka.diff_src = dx_want;
                ka.accumulate = accumulate;
                memcpy(dx_want, dx_init, count * sizeof *dx_want);
                assert_int_equal(ref->ops->backward_data(ref, &ka, &err), ST_OK);
                if (accumulate)
                    memcpy(dx, dx_init, count * sizeof *dx);
                else
                    fill_nan(dx, count);
                snprintf(what, sizeof what, "%s backward%s, %zu values", st_act_names[act],
                         accumulate ? " accumulating" : "", count);
                run = (act_run){(st_act)act, count, want, dy, dx, accumulate};
                run_and_check_cost_only(cg, act_backward_launch, &run,
                                        &(cpe_test_output){dx, count * sizeof(float)}, 1, &n,
                                        what);
                assert_floats_close(dx, dx_want, count, what);
            }
            /* In place: diff_src == diff_dst. */
            memcpy(dx, dy, count * sizeof *dx);
            assert_int_equal(st_cpe_act_backward(cg, (st_act)act, count, want, dx, dx, 0, NULL,
                                                 &err),
                             ST_OK);
            st_act_backward((st_act)act, want, dy, dx_want, count);
            snprintf(what, sizeof what, "%s backward in place", st_act_names[act]);
            assert_floats_close(dx, dx_want, count, what);
            ref->ops->destroy(ref);
            free(src);
            free(want);
            free(dst);
            free(dy);
            free(dx_init);
            free(dx_want);
            free(dx);
        }
    st_cpe_cluster_destroy(cg);
}

/* ---- bias add + activation, bias gradient ---- */

typedef struct bias_case {
    int n, c;
    size_t per_channel;
} bias_case;

typedef struct bias_run {
    int n, c;
    size_t per_channel;
    const float *bias, *dy;
    st_act act;
    float *y, *db;
} bias_run;

static st_status bias_act_launch(st_cpe_cluster *cg, void *ctx, st_cpe_counters *out,
                                 st_error *err)
{
    const bias_run *r = ctx;
    return st_cpe_bias_act(cg, r->n, r->c, r->per_channel, r->bias, r->act, r->y, out, err);
}

static st_status bias_grad_launch(st_cpe_cluster *cg, void *ctx, st_cpe_counters *out,
                                  st_error *err)
{
    const bias_run *r = ctx;
    return st_cpe_bias_grad(cg, r->n, r->c, r->per_channel, r->dy, r->db, out, err);
}

static void test_bias_act(void **state)
{
    (void)state;
    static const bias_case cases[] = {
        {3, 13, 37 * 41}, {64, 100, 1}, {2, 3000, 1}, {5, 2100, 3}, {1, 7, 1}, {3, 1, 10007},
    };
    st_cpe_cluster *cg = cluster_new();
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const bias_case *t = &cases[i];
        size_t count = (size_t)t->n * t->c * t->per_channel;
        float *y0 = floats_new(count), *want = floats_new(count), *y = floats_new(count);
        float *bias = floats_new((size_t)t->c);
        fill_uniform(y0, count, 2.0f, 31 + i);
        fill_uniform(bias, (size_t)t->c, 1.0f, 41 + i);
        for (int with_bias = 0; with_bias <= 1; with_bias++) {
            st_act act = (st_act)((i + (size_t)with_bias) % ST_ACT_COUNT);
            memcpy(want, y0, count * sizeof *want);
            for (int s = 0; with_bias && s < t->n; s++)
                for (int ch = 0; ch < t->c; ch++)
                    for (size_t k = 0; k < t->per_channel; k++)
                        want[((size_t)s * t->c + ch) * t->per_channel + k] += bias[ch];
            st_act_forward(act, want, count);
            memcpy(y, y0, count * sizeof *y);
            char what[96];
            snprintf(what, sizeof what, "bias_act [%d, %d, %zu] %s%s", t->n, t->c, t->per_channel,
                     st_act_names[act], with_bias ? " with bias" : "");
            st_cpe_counters n;
            bias_run run = {t->n, t->c, t->per_channel, with_bias ? bias : NULL, NULL, act, y,
                            NULL};
            run_and_check_cost_only(cg, bias_act_launch, &run,
                                    &(cpe_test_output){y, count * sizeof(float)}, 1, &n, what);
            assert_floats_close(y, want, count, what);
            if (with_bias || act != ST_ACT_LINEAR) /* else nothing to do: no launch */
                assert_counters_sane(&n, what);
        }
        free(y0);
        free(want);
        free(y);
        free(bias);
    }
    st_cpe_cluster_destroy(cg);
}

static void test_bias_grad(void **state)
{
    (void)state;
    /* by_range: whether the header's rule splits by channel range (then
     * bitwise the reference). */
    static const struct {
        bias_case shape;
        int by_range;
    } cases[] = {
        {{3, 13, 37 * 41}, 0}, {{64, 128, 1}, 1},   {{5, 600, 7}, 1},    {{2, 100, 80}, 0},
        {{1, 4096, 64}, 1},    {{7, 3, 100003}, 0}, {{2, 70000, 1}, 0},  {{1, 1, 1}, 0},
        {{1, 5, 3}, 0},        {{4, 64, 4096}, 1},  {{3, 65, 70}, 0},
    };
    st_cpe_cluster *cg = cluster_new();
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const bias_case *t = &cases[i].shape;
        size_t count = (size_t)t->n * t->c * t->per_channel;
        float *dy = floats_new(count), *want = floats_new((size_t)t->c);
        float *db = floats_new((size_t)t->c);
        fill_uniform(dy, count, 1.0f, 51 + i);
        for (int ch = 0; ch < t->c; ch++) {
            double sum = 0.0;
            for (int s = 0; s < t->n; s++)
                for (size_t k = 0; k < t->per_channel; k++)
                    sum += dy[((size_t)s * t->c + ch) * t->per_channel + k];
            want[ch] = (float)sum;
        }
        fill_nan(db, (size_t)t->c);
        char what[96];
        snprintf(what, sizeof what, "bias_grad [%d, %d, %zu]", t->n, t->c, t->per_channel);
        st_cpe_counters n;
        bias_run run = {t->n, t->c, t->per_channel, NULL, dy, ST_ACT_LINEAR, NULL, db};
        run_and_check_cost_only(cg, bias_grad_launch, &run,
                                &(cpe_test_output){db, (size_t)t->c * sizeof(float)}, 1, &n, what);
        if (cases[i].by_range)
            assert_floats_equal(db, want, (size_t)t->c, what);
        else
            assert_floats_close(db, want, (size_t)t->c, what);
        assert_counters_sane(&n, what);
        /* One flop per value, plus at most one per partial sum combined. */
        assert_true(n.flops >= count && n.flops <= count + 2 * SW_CPES);
        assert_true(n.dma_get_bytes >= count * sizeof(float));
        free(dy);
        free(want);
        free(db);
    }
    st_cpe_cluster_destroy(cg);
}

/* ---- gradient sum against st_ps_reduce_range ---- */

static void table_one_tensor(st_param_table *t, size_t count)
{
    st_error err = {0};
    int id;
    memset(t, 0, sizeof *t);
    if (st_params_add(t, 0, "weights", count, ST_PARAM_WEIGHT, ST_INIT_ZERO, 0.0f, &id, &err) !=
        ST_OK)
        fail_msg("st_params_add: %s", err.msg);
}

typedef struct grad_sum_run {
    float *const *grads;
    int n_grads;
    size_t begin, end;
    float scale;
} grad_sum_run;

static st_status grad_sum_launch(st_cpe_cluster *cg, void *ctx, st_cpe_counters *out,
                                 st_error *err)
{
    const grad_sum_run *r = ctx;
    return st_cpe_grad_sum(cg, r->grads, r->n_grads, r->begin, r->end, r->scale, out, err);
}

static void test_grad_sum(void **state)
{
    (void)state;
    static const int workers[] = {1, 2, 3, 5};
    st_param_table table;
    table_one_tensor(&table, STREAM_N);
    size_t count = table.count, begin = 3, end = STREAM_N - 5;
    st_cpe_cluster *cg = cluster_new();
    st_error err = {0};
    for (size_t wi = 0; wi < sizeof workers / sizeof workers[0]; wi++) {
        int T = workers[wi];
        float scale = 1.0f / (float)(T + 2);
        st_ps ps;
        assert_int_equal(st_ps_init(&ps, &table, T, 1, &err), ST_OK);
        float *mine[8];
        for (int w = 0; w < T; w++) {
            fill_uniform(ps.grads[w], count, 1.0f, 81 + (uint64_t)(wi * 8 + (size_t)w));
            mine[w] = floats_new(count);
            memcpy(mine[w], ps.grads[w], count * sizeof(float));
        }
        st_cpe_counters n;
        char what[80];
        snprintf(what, sizeof what, "grad_sum of %d buffers", T);
        grad_sum_run run = {mine, T, begin, end, scale};
        run_and_check_cost_only(cg, grad_sum_launch, &run,
                                &(cpe_test_output){mine[0], count * sizeof(float)}, 1, &n, what);
        st_ps_reduce_range(&ps, begin, end, scale);
        /* Whole arenas: the sum in range, nothing changed outside it or in
         * the other workers' arenas. */
        assert_floats_equal(mine[0], ps.grads[0], count, what);
        for (int w = 1; w < T; w++)
            assert_floats_equal(mine[w], ps.grads[w], count, "grad_sum changed a source");
        assert_counters_sane(&n, what);
        size_t len = end - begin;
        assert_int_equal(n.flops, (uint64_t)T * len);
        assert_int_equal(n.dma_put_bytes, len * sizeof(float));
        assert_true(n.dma_get_bytes >= (uint64_t)T * len * sizeof(float));
        for (int w = 0; w < T; w++)
            free(mine[w]);
        st_ps_free(&ps);
    }
    st_params_free(&table);
    st_cpe_cluster_destroy(cg);
}

/* ---- solver update against st_solver_update ---- */

typedef struct solver_run {
    const st_solver_step *step;
    size_t begin, end, stride;
    float *w, *state;
    const float *g;
} solver_run;

static st_status solver_launch(st_cpe_cluster *cg, void *ctx, st_cpe_counters *out, st_error *err)
{
    const solver_run *r = ctx;
    return st_cpe_solver_update(cg, r->step, r->begin, r->end, r->w, r->state, r->stride, r->g,
                                out, err);
}

/* Flops per float that cpe_stream.c declares (its header comment). */
static uint64_t rule_flops(st_solver_rule rule, st_param_kind kind)
{
    static const uint64_t per_rule[] = {6, 10, 9, 12, 19, 16};
    return kind == ST_PARAM_STAT ? 3 : per_rule[rule];
}

static void test_solver_update(void **state)
{
    (void)state;
    st_param_table table;
    memset(&table, 0, sizeof table);
    static const struct {
        const char *role;
        size_t count;
        st_param_kind kind;
    } tensors[] = {
        {"weights", 600001, ST_PARAM_WEIGHT}, {"biases", 3, ST_PARAM_BIAS},
        {"rolling_mean", 5, ST_PARAM_STAT},   {"scales", 1, ST_PARAM_BIAS},
        {"weights2", 399977, ST_PARAM_WEIGHT}, {"biases2", 17, ST_PARAM_BIAS},
    };
    st_error err = {0};
    for (size_t i = 0; i < sizeof tensors / sizeof tensors[0]; i++) {
        int id;
        assert_int_equal(st_params_add(&table, (int)i, tensors[i].role, tensors[i].count,
                                       tensors[i].kind, ST_INIT_ZERO, 0.0f, &id, &err),
                         ST_OK);
    }
    table.p[2].keep = 0.7f; /* not ST_STAT_KEEP: the kernel's tensor table must carry it */
    size_t count = table.count;
    assert_true(count >= STREAM_N);
    float *g = floats_new(count), *w0 = floats_new(count), *s0 = floats_new(2 * count);
    float *w_host = floats_new(count), *s_host = floats_new(2 * count);
    float *w_cpe = floats_new(count), *s_cpe = floats_new(2 * count);
    fill_uniform(g, count, 0.5f, 91);
    fill_uniform(w0, count, 1.0f, 92); /* the gaps too: they must come back unchanged */
    fill_uniform(s0, 2 * count, 0.5f, 93);
    for (size_t i = 0; i < 2 * count; i++)
        s0[i] = fabsf(s0[i]); /* running squares are not negative */
    /* Ranges: cutting tensors at both ends; the whole arena; 136 floats, one
     * 16-float share per CPE, over the first tensor's end and three small
     * ones; and 70,000 floats whose first share, [598972, 600060), is two
     * chunks with the boundary at 599996, 5 floats before the first
     * tensor's end, so that tensor continues into the CPE's next chunk. */
    const size_t ranges[][2] = {
        {5, count - 9}, {0, count}, {599964, 600100}, {598972, 668972}};
    st_cpe_cluster *cg = cluster_new();
    for (int rule = ST_SOLVER_SGD; rule <= ST_SOLVER_ADAM; rule++)
        for (size_t r = 0; r < sizeof ranges / sizeof ranges[0]; r++) {
            st_solver_cfg c;
            memset(&c, 0, sizeof c);
            c.rule = (st_solver_rule)rule;
            c.momentum = 0.9f;
            c.decay = 0.0005f;
            c.beta1 = 0.9f;
            c.beta2 = 0.999f;
            c.eps = 1e-8f;
            c.rms_decay = 0.9f;
            c.delta = 1e-6f;
            size_t begin = ranges[r][0], end = ranges[r][1];
            float lr = 0.01f;
            long iter = 4;
            memcpy(w_host, w0, count * sizeof(float));
            memcpy(w_cpe, w0, count * sizeof(float));
            memcpy(s_host, s0, 2 * count * sizeof(float));
            memcpy(s_cpe, s0, 2 * count * sizeof(float));
            st_solver_update(&c, &table, lr, iter, begin, end, w_host, s_host, count, g);
            st_cpe_counters n;
            char what[96];
            snprintf(what, sizeof what, "solver_update %s [%zu, %zu)", st_solver_rule_names[rule],
                     begin, end);
            st_solver_step step = {&c, &table, lr, iter};
            solver_run run = {&step, begin, end, count, w_cpe, s_cpe, g};
            cpe_test_output outs[2] = {{w_cpe, count * sizeof(float)},
                                       {s_cpe, 2 * count * sizeof(float)}};
            run_and_check_cost_only(cg, solver_launch, &run, outs, 2, &n, what);
            assert_floats_equal(w_cpe, w_host, count, what);
            assert_floats_equal(s_cpe, s_host, 2 * count, what);
            assert_counters_sane(&n, what);
            uint64_t flops = 0;
            for (int i = 0; i < table.n; i++) {
                const st_param *p = &table.p[i];
                size_t b = p->offset > begin ? p->offset : begin;
                size_t e = p->offset + p->count < end ? p->offset + p->count : end;
                if (b < e)
                    flops += (e - b) * rule_flops((st_solver_rule)rule, p->kind);
            }
            assert_int_equal(n.flops, flops);
            uint64_t planes = (uint64_t)st_solver_state_per_param(&c), len = end - begin;
            assert_int_equal(n.dma_put_bytes, (1 + planes) * len * sizeof(float));
            assert_true(n.dma_get_bytes >= (2 + planes) * len * sizeof(float));
        }
    free(g);
    free(w0);
    free(s0);
    free(w_host);
    free(s_host);
    free(w_cpe);
    free(s_cpe);
    st_params_free(&table);
    st_cpe_cluster_destroy(cg);
}

/* ---- counters of the streaming kernels ---- */

static void test_stream_counters(void **state)
{
    (void)state;
    size_t count = STREAM_N;
    float *x = floats_new(count), *y = floats_new(count);
    fill_uniform(x, count, 1.0f, 3);
    st_cpe_cluster *cg = cluster_new();
    st_error err = {0};
    st_cpe_counters relu, logistic, linear;
    assert_int_equal(st_cpe_act_forward(cg, ST_ACT_RELU, count, x, y, &relu, &err), ST_OK);
    assert_counters_sane(&relu, "relu forward");
    assert_int_equal(relu.flops, count);
    assert_int_equal(relu.dma_put_bytes, count * sizeof(float));
    assert_true(relu.dma_get_bytes >= count * sizeof(float));
    /* Chunks of 8 KB, double-buffered: the time is the DMA channel's. A
     * CPE's share, a 64th of the bytes, takes at least its occupancy at
     * the 8 KB rates, get 27375.5 / 8192 and put 49872.1 / 8192 cycles a
     * byte: 62500 x (3.3417 + 6.0879) = 589350 cycles, 406.4 us. At most:
     * the largest share (977 lines of 64 B, 62528 B: 7 chunks of 8 KB, 7 x
     * 77247.6 cycles, and one of 5184 B, 17473.6 + 33308.9 on the curve
     * between 4 and 8 KB), a latency per chunk (a slot is refilled only
     * when its last put has completed, 1199 cycles after the channel
     * served it, and nothing else is queued then), the argument fetch
     * (2264.1) and 5 us of launch: 604570.8 cycles + 5 us = 421.95 us. */
    st_cpe_cost_params p = st_cpe_cost_params_default();
    double per_cpe = (double)count * sizeof(float) / SW_CPES;
    double lower = per_cpe * (st_cpe_dma_cost(&p, 0, ST_CPE_DMA_STRIDED, 8192, 1).occupancy_cycles +
                              st_cpe_dma_cost(&p, 1, ST_CPE_DMA_STRIDED, 8192, 1).occupancy_cycles) / 8192 / p.clock_hz;
    assert_close(lower, 406.45e-6, 1e-3, "relu lower bound");
    if (!(relu.time.total_s >= lower && relu.time.total_s <= 421.95e-6))
        fail_msg("relu forward of %zu floats: %.4g s predicted, expected %.4g to %.4g s", count,
                 relu.time.total_s, lower, 421.95e-6);
    assert_int_equal(st_cpe_act_forward(cg, ST_ACT_LOGISTIC, count, x, y, &logistic, &err),
                     ST_OK);
    assert_true(logistic.flops > relu.flops);
    assert_int_equal(logistic.dma_put_bytes, relu.dma_put_bytes);
    /* Linear in place does nothing and launches nothing. */
    assert_int_equal(st_cpe_act_forward(cg, ST_ACT_LINEAR, count, x, x, &linear, &err), ST_OK);
    assert_int_equal(linear.launches, 0);
    st_cpe_counters bias;
    float b[7] = {1, 2, 3, 4, 5, 6, 7};
    assert_int_equal(st_cpe_bias_act(cg, 1, 7, count / 7, b, ST_ACT_LINEAR, y, &bias, &err),
                     ST_OK);
    assert_int_equal(bias.flops, count / 7 * 7);
    assert_int_equal(bias.dma_put_bytes, count / 7 * 7 * sizeof(float));
    free(x);
    free(y);
    st_cpe_cluster_destroy(cg);
}

/* ---- arguments refused on the host ---- */

static void test_bad_arguments(void **state)
{
    (void)state;
    st_cpe_cluster *cg = cluster_new();
    st_error err = {0};
    float buf[64] = {0};
    int am[64] = {0};
    int batch[1] = {1};
    /* Backward, one input position of a 600x600 plane reaches 301 x 301
     * outputs of a 300x300 window: more than a unit's 12288 words.
     * Refused on the host (the pointers are not read). */
    pool_case huge = {1, 1, 600, 600, 300, 300, 1, 1, 0, 0, PLAN_STREAM, PLAN_ROWS, 0, 0};
    st_pool_desc d = pool_desc(&huge, ST_POOL_AVG, batch);
    assert_int_equal(st_cpe_pool_backward(cg, &d, 1, buf, NULL, buf + 16, 0, NULL, &err),
                     ST_EINPUT);
    tl_assert_contains(err.msg, "pool_backward: one 300x300 window (and the outputs it reaches) "
                                "does not fit the 48 KB of LDM a unit may take");
    pool_case small = {1, 1, 4, 4, 2, 2, 2, 2, 0, 0, PLAN_PLANES, PLAN_PLANES, 0, 0};
    d = pool_desc(&small, ST_POOL_MAX, batch);
    d.kh = 0;
    st_error_clear(&err); /* st_fail keeps the first error: start afresh each time */
    assert_int_equal(st_cpe_pool_forward(cg, &d, 1, buf, buf + 16, am, NULL, &err), ST_EINPUT);
    tl_assert_contains(err.msg, "pool_forward: bad geometry");
    d.kh = 2;
    st_error_clear(&err);
    assert_int_equal(st_cpe_pool_backward(cg, &d, 1, buf, NULL, buf + 16, 0, NULL, &err),
                     ST_EINPUT);
    tl_assert_contains(err.msg, "pool_backward: max pooling needs the argmax");
    st_error_clear(&err);
    assert_int_equal(st_cpe_act_forward(cg, ST_ACT_COUNT, 4, buf, buf, NULL, &err), ST_EINPUT);
    tl_assert_contains(err.msg, "act_forward: unknown activation");
    st_error_clear(&err);
    assert_int_equal(st_cpe_bias_grad(cg, 1, 0, 4, buf, buf, NULL, &err), ST_EINPUT);
    tl_assert_contains(err.msg, "bias_grad: shape [1, 0, 4]");
    float *grads[2] = {buf, buf + 32};
    st_error_clear(&err);
    assert_int_equal(st_cpe_grad_sum(cg, grads, 0, 0, 4, 1.0f, NULL, &err), ST_EINPUT);
    tl_assert_contains(err.msg, "grad_sum: 0 gradient buffers");
    grads[1] = buf + 2;
    st_error_clear(&err);
    assert_int_equal(st_cpe_grad_sum(cg, grads, 2, 0, 8, 1.0f, NULL, &err), ST_EINPUT);
    tl_assert_contains(err.msg, "grad_sum: gradient buffer 1 overlaps buffer 0 in [0, 8)");
    st_param_table table;
    table_one_tensor(&table, 20);
    st_solver_cfg c;
    memset(&c, 0, sizeof c);
    st_solver_step step = {&c, &table, 0.1f, 0};
    st_error_clear(&err);
    assert_int_equal(st_cpe_solver_update(cg, &step, 0, 33, buf, buf + 32, 32, buf, NULL, &err),
                     ST_EINPUT);
    tl_assert_contains(err.msg, "solver_update: range [0, 33) is not inside the 32-float arena");
    st_params_free(&table);
    st_cpe_cluster_destroy(cg);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pool),         cmocka_unit_test(test_act),
        cmocka_unit_test(test_bias_act),     cmocka_unit_test(test_bias_grad),
        cmocka_unit_test(test_grad_sum),
        cmocka_unit_test(test_solver_update), cmocka_unit_test(test_stream_counters),
        cmocka_unit_test(test_bad_arguments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
