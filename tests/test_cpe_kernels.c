/* The streaming CPE kernels (include/cpe.h, "streaming kernels") against
 * independent truths: pooling forward and backward against the reference
 * backend's kernels (ref_pool_create), activations against st_act_forward
 * and the reference activation kernel's backward, bias add + activation and
 * the bias gradient against plain loops (the gradient summed in double, as
 * the reference), the layout transformation against index loops, the
 * gradient sum against st_ps_reduce_range of a real st_ps, and the solver
 * update against st_solver_update on the host for every rule.
 *
 * Shapes include sizes that do not divide by 8 or 64, overlapping windows
 * (3x3 stride 2) with padding, windows with gaps between them (stride 3 >
 * size 2), tensors far larger than a CPE's 64 KB (a 300x301 plane, 2.2
 * million floats of bias gradient, 1,000,003-float arenas), and rows so
 * wide only one unit fits the LDM.
 *
 * Tolerances: bitwise for max pooling (values and argmax), the layout, the
 * gradient sum and the solver update (memcmp of whole buffers, so nothing
 * outside the range may change either); 1e-6 relative for the rest, and
 * bitwise for the bias gradient when the CPEs split it by channel range, as
 * cpe.h promises. Max pooling draws integers from -2..2, so windows have
 * ties and the first-maximum rule is checked. Every result buffer is
 * prefilled with NaN where the kernel must overwrite it.
 *
 * Counters: each launch is one launch, its LDM peak at most 64 KB, DMA at
 * least the tensor bytes the kernel must move (exactly, for the bytes
 * written), and flops as each kernel's header declares them, counted here
 * from the shapes. */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpe_testlib.h"

#include "backends/ref/ref.h"
#include "cpe.h"
#include "params.h"
#include "ps.h"
#include "solver.h"

#define REL_TOL 1e-6
#define STREAM_N 1000003 /* floats of the stream kernels' arenas */

static float *floats_new(size_t n)
{
    float *p = malloc((n ? n : 1) * sizeof *p);
    assert_non_null(p);
    return p;
}

static void fill_uniform(float *p, size_t n, float scale, uint64_t seed)
{
    uint64_t s = seed | 1;
    for (size_t i = 0; i < n; i++)
        p[i] = scale * (float)rand_unit(&s);
}

/* Integers -2..2: ties in every other window. */
static void fill_small_ints(float *p, size_t n, uint64_t seed)
{
    uint64_t s = seed | 1;
    for (size_t i = 0; i < n; i++)
        p[i] = (float)(int)floor((rand_unit(&s) + 1.0) * 2.5) - 2.0f;
}

static void fill_nan(float *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        p[i] = NAN;
}

static void assert_floats_equal(const float *got, const float *want, size_t n, const char *what)
{
    if (memcmp(got, want, n * sizeof *got) == 0)
        return;
    for (size_t i = 0; i < n; i++)
        if (memcmp(&got[i], &want[i], sizeof *got) != 0)
            fail_msg("%s: [%zu] = %.9g, expected %.9g (bitwise)", what, i, got[i], want[i]);
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
    if (n->launches != 1 || n->ldm_peak > ST_CPE_LDM_BYTES || !(n->time.total_s > 0.0))
        fail_msg("%s: %llu launches, LDM peak %zu bytes, %g s predicted (expected 1, <= %d, > 0)",
                 what, (unsigned long long)n->launches, n->ldm_peak, n->time.total_s,
                 ST_CPE_LDM_BYTES);
}

/* ---- pooling against the reference backend ---- */

typedef struct pool_case {
    int n, c, ih, iw, k_h, k_w, s_h, s_w;
    int pad_h, pad_w; /* total padding, half of it top / left (Darknet's maxpool) */
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

/* The forward flops pool_forward declares: valid positions per output,
 * plus the division of a non-empty average. */
static uint64_t pool_forward_flops(const st_pool_desc *d, int n)
{
    uint64_t per_plane = 0;
    for (int oy = 0; oy < d->oh; oy++)
        for (int ox = 0; ox < d->ow; ox++) {
            long cnt = valid_span(oy, d->kh, d->sh, d->ph, d->ih) *
                       valid_span(ox, d->kw, d->sw, d->pw, d->iw);
            per_plane += (uint64_t)cnt + (d->alg == ST_POOL_AVG && cnt > 0);
        }
    return per_plane * (uint64_t)n * (uint64_t)d->c;
}

static void check_pool(st_cpe_cluster *cg, const pool_case *t, st_pool_alg alg, size_t index)
{
    int batch[1] = {t->n};
    st_pool_desc d = pool_desc(t, alg, batch);
    const char *name = alg == ST_POOL_MAX ? "max" : "avg";
    size_t in = (size_t)t->n * d.c * d.ih * d.iw, outs = (size_t)t->n * d.c * d.oh * d.ow;
    st_error err = {0};
    st_kernel *ref = NULL;
    if (ref_pool_create(&d, &ref, &err) != ST_OK)
        fail_msg("ref_pool_create: %s", err.msg);
    float *src = floats_new(in), *dst_ref = floats_new(outs), *dst = floats_new(outs);
    float *dy = floats_new(outs), *dx_init = floats_new(in), *dx_ref = floats_new(in);
    float *dx = floats_new(in);
    int *argmax_ref = ref->workspace_bytes ? malloc(ref->workspace_bytes) : NULL;
    int *argmax = malloc(outs * sizeof *argmax);
    assert_non_null(argmax);
    if (alg == ST_POOL_MAX)
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
    st_cpe_counters n;
    if (st_cpe_pool_forward(cg, &d, t->n, src, dst, argmax, &n, &err) != ST_OK)
        fail_msg("pool case %zu %s forward: %s", index, name, err.msg);
    char what[96];
    snprintf(what, sizeof what, "pool case %zu (%dx%dx%dx%d) %s forward", index, t->n, t->c,
             t->ih, t->iw, name);
    if (alg == ST_POOL_MAX) {
        assert_floats_equal(dst, dst_ref, outs, what);
        for (size_t i = 0; i < outs; i++)
            if (argmax[i] != argmax_ref[i])
                fail_msg("%s: argmax[%zu] = %d, expected %d", what, i, argmax[i], argmax_ref[i]);
    } else {
        assert_floats_close(dst, dst_ref, outs, what);
        for (size_t i = 0; i < outs; i++)
            if (argmax[i] != -7)
                fail_msg("%s: wrote argmax[%zu] for average pooling", what, i);
    }
    assert_counters_sane(&n, what);
    assert_int_equal(n.flops, pool_forward_flops(&d, t->n));
    assert_true(n.dma_get_bytes >= in * sizeof(float));
    assert_int_equal(n.dma_put_bytes, outs * (sizeof(float) + (alg == ST_POOL_MAX ? sizeof(int) : 0)));

    for (int accumulate = 0; accumulate <= 1; accumulate++) {
        memcpy(dx_ref, dx_init, in * sizeof *dx_ref);
        if (accumulate)
            memcpy(dx, dx_init, in * sizeof *dx);
        else
            fill_nan(dx, in);
        ka.diff_src = dx_ref;
        ka.diff_dst = dy;
        ka.accumulate = accumulate;
        assert_int_equal(ref->ops->backward_data(ref, &ka, &err), ST_OK);
        if (st_cpe_pool_backward(cg, &d, t->n, dy, argmax, dx, accumulate, &n, &err) != ST_OK)
            fail_msg("pool case %zu %s backward: %s", index, name, err.msg);
        snprintf(what, sizeof what, "pool case %zu (%dx%dx%dx%d) %s backward%s", index, t->n,
                 t->c, t->ih, t->iw, name, accumulate ? " accumulating" : "");
        if (alg == ST_POOL_MAX)
            assert_floats_equal(dx, dx_ref, in, what);
        else
            assert_floats_close(dx, dx_ref, in, what);
        assert_counters_sane(&n, what);
        assert_true(n.dma_get_bytes >= outs * sizeof(float) * (alg == ST_POOL_MAX ? 2 : 1) +
                                           (accumulate ? in * sizeof(float) : 0));
        assert_int_equal(n.dma_put_bytes, in * sizeof(float));
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

static void test_pool(void **state)
{
    (void)state;
    static const pool_case cases[] = {
        {3, 13, 37, 41, 3, 3, 2, 2, 2, 2},  /* overlapping 3x3 stride 2, padding 1 */
        {2, 5, 8, 8, 2, 2, 2, 2, 0, 0},
        {4, 3, 17, 19, 5, 3, 1, 2, 4, 2},   /* non-square window and strides */
        {2, 3, 9, 10, 2, 2, 3, 3, 1, 1},    /* gaps between windows; the last one clipped */
        {1, 2, 300, 301, 3, 3, 2, 2, 2, 2}, /* a 361 KB plane: bands of rows */
        {1, 1, 1, 1, 1, 1, 1, 1, 0, 0},
        {64, 16, 6, 6, 2, 2, 2, 2, 1, 1},   /* 1024 small planes: groups of planes */
        {1, 1, 700, 3, 3, 3, 1, 1, 2, 2},   /* tall and narrow */
        {1, 2, 5, 2500, 3, 3, 2, 2, 2, 2},  /* rows so wide one unit fills the LDM */
        {2, 3, 7, 7, 7, 7, 1, 1, 0, 0},     /* one window covers the plane */
    };
    st_cpe_cluster *cg = cluster_new();
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        check_pool(cg, &cases[i], ST_POOL_MAX, i);
        check_pool(cg, &cases[i], ST_POOL_AVG, i);
    }
    st_cpe_cluster_destroy(cg);
}

/* ---- activations ---- */

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
            if (st_cpe_act_forward(cg, (st_act)act, count, src, dst, &n, &err) != ST_OK)
                fail_msg("%s: %s", what, err.msg);
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
            assert_int_equal(ref_act_create(&d, &ref, &err), ST_OK);
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
                if (st_cpe_act_backward(cg, (st_act)act, count, want, dy, dx, accumulate, &n,
                                        &err) != ST_OK)
                    fail_msg("%s: %s", what, err.msg);
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

static void test_bias_act(void **state)
{
    (void)state;
    static const bias_case cases[] = {
        {3, 13, 37 * 41}, {64, 100, 1}, {2, 3000, 1}, {5, 2100, 3}, {1, 7, 1}, {3, 1, 10007},
    };
    st_cpe_cluster *cg = cluster_new();
    st_error err = {0};
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
            if (st_cpe_bias_act(cg, t->n, t->c, t->per_channel, with_bias ? bias : NULL, act, y,
                                &n, &err) != ST_OK)
                fail_msg("%s: %s", what, err.msg);
            assert_floats_close(y, want, count, what);
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
    st_error err = {0};
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
        if (st_cpe_bias_grad(cg, t->n, t->c, t->per_channel, dy, db, &n, &err) != ST_OK)
            fail_msg("%s: %s", what, err.msg);
        if (cases[i].by_range)
            assert_floats_equal(db, want, (size_t)t->c, what);
        else
            assert_floats_close(db, want, (size_t)t->c, what);
        assert_counters_sane(&n, what);
        /* One flop per value, plus at most one per partial sum combined. */
        assert_true(n.flops >= count && n.flops <= count + 2 * ST_CPE_COUNT);
        assert_true(n.dma_get_bytes >= count * sizeof(float));
        free(dy);
        free(want);
        free(db);
    }
    st_cpe_cluster_destroy(cg);
}

/* ---- layout ---- */

static void test_layout(void **state)
{
    (void)state;
    static const int shapes[][4] = {
        {3, 13, 37, 41}, {130, 3, 5, 7}, {1, 1, 1, 1}, {64, 16, 8, 8}, {5, 1, 1, 1000}, {67, 2, 3, 1},
    };
    st_cpe_cluster *cg = cluster_new();
    st_error err = {0};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        int n = shapes[i][0], c = shapes[i][1], h = shapes[i][2], w = shapes[i][3];
        size_t X = (size_t)c * h * w, total = (size_t)n * X;
        float *nchw = floats_new(total), *chwn = floats_new(total), *want = floats_new(total);
        float *back = floats_new(total);
        fill_uniform(nchw, total, 1.0f, 61 + i);
        for (int s = 0; s < n; s++)
            for (size_t x = 0; x < X; x++)
                want[x * n + s] = nchw[(size_t)s * X + x];
        fill_nan(chwn, total);
        char what[96];
        snprintf(what, sizeof what, "nchw_to_chwn %dx%dx%dx%d", n, c, h, w);
        st_cpe_counters cnt;
        if (st_cpe_nchw_to_chwn(cg, n, c, h, w, nchw, chwn, &cnt, &err) != ST_OK)
            fail_msg("%s: %s", what, err.msg);
        assert_floats_equal(chwn, want, total, what);
        assert_counters_sane(&cnt, what);
        assert_int_equal(cnt.ldm_moves, total);
        assert_int_equal(cnt.dma_put_bytes, total * sizeof(float));
        assert_true(cnt.dma_get_bytes >= total * sizeof(float));

        snprintf(what, sizeof what, "chwn_to_nchw %dx%dx%dx%d", n, c, h, w);
        fill_nan(back, total);
        if (st_cpe_chwn_to_nchw(cg, n, c, h, w, chwn, back, &cnt, &err) != ST_OK)
            fail_msg("%s: %s", what, err.msg);
        assert_floats_equal(back, nchw, total, what);
        assert_int_equal(cnt.ldm_moves, total);
        /* And on data that did not come from the other direction. */
        fill_uniform(chwn, total, 1.0f, 71 + i);
        for (int s = 0; s < n; s++)
            for (size_t x = 0; x < X; x++)
                want[(size_t)s * X + x] = chwn[x * n + s];
        assert_int_equal(st_cpe_chwn_to_nchw(cg, n, c, h, w, chwn, back, NULL, &err), ST_OK);
        assert_floats_equal(back, want, total, what);
        free(nchw);
        free(chwn);
        free(want);
        free(back);
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
        if (st_cpe_grad_sum(cg, mine, T, begin, end, scale, &n, &err) != ST_OK)
            fail_msg("%s: %s", what, err.msg);
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
            if (st_cpe_solver_update(cg, &step, begin, end, w_cpe, s_cpe, count, g, &n, &err) !=
                ST_OK)
                fail_msg("%s: %s", what, err.msg);
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
    /* Chunks of 8 KB: large transfers, so DMA time is close to the bytes
     * at 28 GB/s spread over 64 CPEs. */
    double bytes = (double)(relu.dma_get_bytes + relu.dma_put_bytes);
    assert_true(relu.time.total_s >= bytes / 28e9);
    assert_true(relu.time.total_s <= 2.0 * bytes / 28e9 + 20e-6);
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
    pool_case wide = {1, 1, 3, 9000, 3, 3, 2, 2, 2, 2};
    st_pool_desc d = pool_desc(&wide, ST_POOL_MAX, batch);
    float *big = floats_new(3 * 9000);
    memset(big, 0, 3 * 9000 * sizeof *big);
    assert_int_equal(st_cpe_pool_forward(cg, &d, 1, big, big, NULL, NULL, &err), ST_EINPUT);
    tl_assert_contains(err.msg, "pool_forward: one row of a 3x9000 input");
    tl_assert_contains(err.msg, "does not fit the 65536-byte LDM");
    free(big);
    pool_case small = {1, 1, 4, 4, 2, 2, 2, 2, 0, 0};
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
    st_error_clear(&err);
    assert_int_equal(st_cpe_nchw_to_chwn(cg, 2, 2, 2, 2, buf, buf + 8, NULL, &err), ST_EINPUT);
    tl_assert_contains(err.msg, "nchw_to_chwn: dst overlaps src");
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
        cmocka_unit_test(test_layout),       cmocka_unit_test(test_grad_sum),
        cmocka_unit_test(test_solver_update), cmocka_unit_test(test_stream_counters),
        cmocka_unit_test(test_bad_arguments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
