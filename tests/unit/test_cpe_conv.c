/* The implicit convolution (src/cpe/kernels/conv_implicit.c) and the tensor
 * transformation layer around it (src/cpe/kernels/layout.c) on the emulated
 * core group.
 *
 * Layouts, bitwise against index loops (layout_at): st_cpe_relayout in
 * every direction between NCHW, HWCN and HWNC,
 * st_cpe_weights_to_swdnn (plain and rotated) and st_cpe_weights_from_swdnn,
 * st_cpe_transpose_batched with a negative stride, and the refusals.
 *
 * The implicit convolution: all three passes, each as the core problem of
 * st_cpe_conv_pass_problem run by st_cpe_swdnn_conv_run, overwriting and
 * accumulating, in float (operands laid out with the layout kernels) and in
 * double (laid out with index loops), against a direct convolution in
 * double written here; on shapes swDNN's blocking takes (batch 128, input
 * channels multiples of 8 and at least 16, output channels multiples of
 * 32, padding 0, 1 and 2, kh != kw, output columns in several CoStride
 * blocks, weights fetched per kernel row and per multiply). Tolerance: 1e-5
 * (float) or 1e-12 (double) of the largest magnitude of the true result.
 * Counters: exactly 2 flops per multiply-add whose input lies inside the
 * image (padding is skipped, not multiplied by zero), each result put
 * once, only the mesh's broadcasts. The explicit scheme the cpe backend
 * runs (per image: im2col and a GEMM; a GEMM and col2im backward; the
 * weight gradient accumulated over the images) gives the same results. Refusals name the dimension that does not fit
 * (st_cpe_conv_implicit_fits, st_cpe_swdnn_conv_run). Every kernel is run
 * again in cost-only mode: same counters, nothing written.
 *
 * Also run in the portable build (@portable): the emulator's CPE contexts
 * on ucontext and its GEMM without the AVX2 clone. */
#include <float.h>
#include <math.h>
#include <stdlib.h>

#include "cpe_testlib.h"

#include "cpe/cpe.h"
#include "cpe/kernels.h"

/* A geometry with the output size of symmetric padding (Darknet's rule). */
static st_cpe_conv_geom geom_make(int c, int oc, int ih, int iw, int kh, int kw, int sh, int sw,
                                  int ph, int pw)
{
    st_cpe_conv_geom g = {c, ih, iw, (ih + 2 * ph - kh) / sh + 1, (iw + 2 * pw - kw) / sw + 1,
                          kh, kw, sh, sw, ph, pw, oc};
    return g;
}

static size_t x_count(const st_cpe_conv_geom *g, int n)
{
    return (size_t)n * (size_t)g->c * (size_t)g->ih * (size_t)g->iw;
}

static size_t y_count(const st_cpe_conv_geom *g, int n)
{
    return (size_t)n * (size_t)g->oc * (size_t)g->oh * (size_t)g->ow;
}

static size_t w_count(const st_cpe_conv_geom *g)
{
    return (size_t)g->oc * (size_t)g->c * (size_t)g->kh * (size_t)g->kw;
}

/* ---- layouts by index ---- */

/* dst (layout to, type) = src (floats, layout from) for n x c x h x w;
 * rotated: position (y, x) of dst takes (h-1-y, w-1-x) of src. Weights
 * [oc][c][kh][kw] are NCHW with n = oc; swDNN's [kh][kw][oc][c] is then
 * HWNC, and the backward-data pass's rotated [kh][kw][c][oc] HWCN. */
static void relayout_plain(const float *src, st_cpe_layout from, void *dst, st_cpe_dtype type,
                           st_cpe_layout to, int n, int c, int h, int w, int rotated)
{
    for (int s = 0; s < n; s++)
        for (int ch = 0; ch < c; ch++)
            for (int y = 0; y < h; y++)
                for (int x = 0; x < w; x++) {
                    size_t at = layout_at(to, n, c, h, w, s, ch, rotated ? h - 1 - y : y,
                                          rotated ? w - 1 - x : x);
                    float v = src[layout_at(from, n, c, h, w, s, ch, y, x)];
                    if (type == ST_CPE_F64)
                        ((double *)dst)[at] = v;
                    else
                        ((float *)dst)[at] = v;
                }
}

typedef struct relayout_run {
    int n, c, h, w;
    st_cpe_layout from, to;
    const float *src;
    float *dst;
} relayout_run;

static st_status relayout_launch(st_cpe_cluster *cg, void *ctx, st_cpe_counters *out,
                                 st_error *err)
{
    const relayout_run *r = ctx;
    return st_cpe_relayout(cg, r->n, r->c, r->h, r->w, r->from, r->src, r->to, r->dst, out, err);
}

static void test_relayout(void **state)
{
    (void)state;
    static const int shapes[][4] = {
        {3, 13, 37, 41}, {130, 3, 5, 7}, {1, 1, 1, 1}, {64, 16, 8, 8},
        {5, 1, 1, 1000}, {67, 2, 3, 1}, {128, 16, 7, 9},
    };
    static const st_cpe_layout pairs[][2] = {
        {ST_CPE_NCHW, ST_CPE_HWCN}, {ST_CPE_HWCN, ST_CPE_NCHW}, {ST_CPE_NCHW, ST_CPE_HWNC},
        {ST_CPE_HWNC, ST_CPE_NCHW}, {ST_CPE_HWCN, ST_CPE_HWNC}, {ST_CPE_HWNC, ST_CPE_HWCN},
    };
    st_cpe_cluster *cg = cluster_new();
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        for (size_t p = 0; p < sizeof pairs / sizeof pairs[0]; p++) {
            relayout_run r = {shapes[i][0], shapes[i][1], shapes[i][2], shapes[i][3],
                              pairs[p][0], pairs[p][1], NULL, NULL};
            size_t total = (size_t)r.n * r.c * r.h * r.w;
            float *src = floats_new(total), *want = floats_new(total);
            r.src = src;
            r.dst = floats_new(total);
            fill_uniform(src, total, 1.0f, 61 + i * 8 + p);
            fill_nan(r.dst, total);
            relayout_plain(src, r.from, want, ST_CPE_F32, r.to, r.n, r.c, r.h, r.w, 0);
            char what[96];
            snprintf(what, sizeof what, "%s to %s, %dx%dx%dx%d", st_cpe_layout_name(r.from),
                     st_cpe_layout_name(r.to), r.n, r.c, r.h, r.w);
            st_cpe_counters n;
            run_and_check_cost_only(cg, relayout_launch, &r,
                                    &(cpe_test_output){r.dst, total * sizeof(float)}, 1, &n, what);
            assert_floats_equal(r.dst, want, total, what);
            if (n.launches != 1 || n.ldm_peak > SW_LDM_BYTES ||
                n.dma_put_bytes != total * sizeof(float) ||
                n.dma_get_bytes < total * sizeof(float))
                fail_msg("%s: %llu launches, LDM peak %zu, %llu bytes put, %llu got (%zu data)",
                         what, (unsigned long long)n.launches, n.ldm_peak,
                         (unsigned long long)n.dma_put_bytes, (unsigned long long)n.dma_get_bytes,
                         total * sizeof(float));
            free(src);
            free(want);
            free(r.dst);
        }
    /* Refusals. */
    float buf[64] = {0};
    st_error err = {0};
    assert_int_equal(st_cpe_relayout(cg, 2, 2, 2, 2, ST_CPE_HWCN, buf, ST_CPE_HWCN, buf + 32,
                                     NULL, &err),
                     ST_EINPUT);
    tl_assert_contains(err.msg, "relayout: HWCN to itself");
    st_error_clear(&err);
    assert_int_equal(st_cpe_relayout(cg, 2, 2, 2, 2, ST_CPE_NCHW, buf, ST_CPE_HWCN, buf + 8,
                                     NULL, &err),
                     ST_EINPUT);
    tl_assert_contains(err.msg, "relayout: dst overlaps src");
    st_error_clear(&err);
    assert_int_equal(st_cpe_relayout(cg, 0, 2, 2, 2, ST_CPE_NCHW, buf, ST_CPE_HWCN, buf + 32,
                                     NULL, &err),
                     ST_EINPUT);
    tl_assert_contains(err.msg, "relayout: shape n 0, c 2, h 2, w 2 (expected all >= 1)");
    st_cpe_cluster_destroy(cg);
}

typedef struct weights_run {
    int oc, c, kh, kw, rotated, back;
    const float *src;
    float *dst, *scratch;
} weights_run;

static st_status weights_launch(st_cpe_cluster *cg, void *ctx, st_cpe_counters *out,
                                st_error *err)
{
    const weights_run *r = ctx;
    if (r->back)
        return st_cpe_weights_from_swdnn(cg, r->oc, r->c, r->kh, r->kw, r->src, r->dst, out, err);
    return st_cpe_weights_to_swdnn(cg, r->oc, r->c, r->kh, r->kw, r->src, r->dst, r->scratch,
                                   r->rotated, out, err);
}

static void test_weights_layout(void **state)
{
    (void)state;
    static const int shapes[][4] = {
        {32, 128, 3, 2}, {96, 3, 11, 11}, {1, 1, 1, 1}, {7, 5, 1, 3}, {256, 256, 3, 3},
    };
    st_cpe_cluster *cg = cluster_new();
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        for (int kind = 0; kind < 3; kind++) {
            weights_run r = {shapes[i][0], shapes[i][1], shapes[i][2], shapes[i][3],
                             kind == 1, kind == 2, NULL, NULL, NULL};
            size_t total = (size_t)r.oc * r.c * r.kh * r.kw;
            float *src = floats_new(total), *want = floats_new(total);
            r.src = src;
            r.dst = floats_new(total);
            r.scratch = floats_new(total);
            fill_uniform(src, total, 1.0f, 5 + i * 3 + (size_t)kind);
            fill_nan(r.dst, total);
            /* [oc][c][kh][kw] is NCHW with n = oc, [kh][kw][oc][c] HWNC, the
             * rotated [kh][kw][c][oc] HWCN (relayout_plain). */
            if (r.back)
                relayout_plain(src, ST_CPE_HWNC, want, ST_CPE_F32, ST_CPE_NCHW, r.oc, r.c, r.kh,
                               r.kw, 0);
            else
                relayout_plain(src, ST_CPE_NCHW, want, ST_CPE_F32,
                               r.rotated ? ST_CPE_HWCN : ST_CPE_HWNC, r.oc, r.c, r.kh, r.kw,
                               r.rotated);
            char what[96];
            snprintf(what, sizeof what, "weights %s %dx%dx%dx%d",
                     r.back ? "from swDNN" : r.rotated ? "to swDNN, rotated" : "to swDNN", r.oc,
                     r.c, r.kh, r.kw);
            st_cpe_counters n;
            cpe_test_output outs[2] = {{r.dst, total * sizeof(float)},
                                       {r.scratch, r.rotated ? total * sizeof(float) : 0}};
            run_and_check_cost_only(cg, weights_launch, &r, outs, 2, &n, what);
            assert_floats_equal(r.dst, want, total, what);
            assert_int_equal(n.launches, r.rotated ? 2 : 1);
            assert_int_equal(n.dma_put_bytes, (r.rotated ? 2 : 1) * total * sizeof(float));
            free(src);
            free(want);
            free(r.dst);
            free(r.scratch);
        }
    st_cpe_cluster_destroy(cg);
}

typedef struct transpose_run {
    st_cpe_transpose t;
} transpose_run;

static st_status transpose_launch(st_cpe_cluster *cg, void *ctx, st_cpe_counters *out,
                                  st_error *err)
{
    return st_cpe_transpose_batched(cg, &((transpose_run *)ctx)->t, "transpose", out, err);
}

/* 70 matrices of 5 x 7 (rows 9 floats apart, one after another) into 7 x
 * 5 (rows 6 apart) in reverse order: the last matrix first, dst stride
 * -42; the padding of dst stays as it was. */
static void test_transpose_negative_stride(void **state)
{
    (void)state;
    enum { COUNT = 70, ROWS = 5, COLS = 7, SRC_LD = 9, DST_LD = 6 };
    size_t src_block = ROWS * SRC_LD, dst_block = COLS * DST_LD;
    float *src = floats_new(COUNT * src_block), *dst = floats_new(COUNT * dst_block);
    float *want = floats_new(COUNT * dst_block);
    fill_uniform(src, COUNT * src_block, 1.0f, 3);
    fill_uniform(dst, COUNT * dst_block, 1.0f, 4);
    memcpy(want, dst, COUNT * dst_block * sizeof(float));
    for (size_t i = 0; i < COUNT; i++)
        for (size_t r = 0; r < ROWS; r++)
            for (size_t c = 0; c < COLS; c++)
                want[(COUNT - 1 - i) * dst_block + c * DST_LD + r] = src[i * src_block + r * SRC_LD + c];
    transpose_run run = {{src, dst + (COUNT - 1) * dst_block, ROWS, COLS, COUNT, SRC_LD, DST_LD,
                          (ptrdiff_t)src_block, -(ptrdiff_t)dst_block}};
    st_cpe_cluster *cg = cluster_new();
    st_cpe_counters n;
    run_and_check_cost_only(cg, transpose_launch, &run,
                            &(cpe_test_output){dst, COUNT * dst_block * sizeof(float)}, 1, &n,
                            "transpose with a negative stride");
    assert_floats_equal(dst, want, COUNT * dst_block, "transpose with a negative stride");
    assert_int_equal(n.dma_put_bytes, COUNT * ROWS * COLS * sizeof(float));
    st_error err = {0};
    run.t.dst_ld = 4;
    assert_int_equal(st_cpe_transpose_batched(cg, &run.t, "transpose", NULL, &err), ST_EINPUT);
    tl_assert_contains(err.msg, "transpose: row pitches 9 and 4 are smaller than the 5 x 7 matrices");
    st_cpe_cluster_destroy(cg);
    free(src);
    free(dst);
    free(want);
}

/* ---- the truth: the definition, term by term, in double ---- */

/* The three passes at once, NCHW and [oc][c][kh][kw]: y = conv(x, w),
 * dx = conv^T(dy, w), dw = sum dy x, and the number of multiply-adds whose
 * input position lies inside the image. */
typedef struct conv_truth {
    double *y, *dx, *dw;
    uint64_t macs;
} conv_truth;

static void truth_compute(const st_cpe_conv_geom *g, int n, const float *x, const float *w,
                          const float *dy, conv_truth *t)
{
    t->y = calloc(y_count(g, n), sizeof(double));
    t->dx = calloc(x_count(g, n), sizeof(double));
    t->dw = calloc(w_count(g), sizeof(double));
    assert_true(t->y && t->dx && t->dw);
    t->macs = 0;
    for (int s = 0; s < n; s++)
        for (int o = 0; o < g->oc; o++)
            for (int oy = 0; oy < g->oh; oy++)
                for (int ox = 0; ox < g->ow; ox++) {
                    size_t yi = (((size_t)s * g->oc + o) * g->oh + oy) * g->ow + ox;
                    double sum = 0.0;
                    for (int i = 0; i < g->c; i++)
                        for (int kr = 0; kr < g->kh; kr++)
                            for (int kc = 0; kc < g->kw; kc++) {
                                int iy = oy * g->sh - g->ph + kr, ix = ox * g->sw - g->pw + kc;
                                if (iy < 0 || iy >= g->ih || ix < 0 || ix >= g->iw)
                                    continue;
                                size_t xi = (((size_t)s * g->c + i) * g->ih + iy) * g->iw + ix;
                                size_t wi = (((size_t)o * g->c + i) * g->kh + kr) * g->kw + kc;
                                sum += (double)w[wi] * x[xi];
                                t->dx[xi] += (double)w[wi] * dy[yi];
                                t->dw[wi] += (double)dy[yi] * x[xi];
                                t->macs++;
                            }
                    t->y[yi] = sum;
                }
}

static void truth_free(conv_truth *t)
{
    free(t->y);
    free(t->dx);
    free(t->dw);
}

/* Every element of got (type, layout l, n x c x h x w) within tol x max
 * |want| of want (NCHW) + base (NCHW, when not NULL: what was accumulated
 * into). */
static void expect_close(const char *what, const void *got, st_cpe_dtype type, st_cpe_layout l,
                         int n, int c, int h, int w, const double *want, const float *base)
{
    size_t count = (size_t)n * c * h * w;
    double largest = 0.0;
    for (size_t i = 0; i < count; i++) {
        double v = fabs(want[i] + (base ? base[i] : 0.0));
        largest = v > largest ? v : largest;
    }
    double tol = (type == ST_CPE_F64 ? 1e-12 : 1e-5) * largest + DBL_MIN;
    for (int s = 0; s < n; s++)
        for (int ch = 0; ch < c; ch++)
            for (int y = 0; y < h; y++)
                for (int x = 0; x < w; x++) {
                    size_t i = layout_at(ST_CPE_NCHW, n, c, h, w, s, ch, y, x);
                    size_t at = layout_at(l, n, c, h, w, s, ch, y, x);
                    double v = type == ST_CPE_F64 ? ((const double *)got)[at]
                                                  : (double)((const float *)got)[at];
                    double expected = want[i] + (base ? base[i] : 0.0);
                    if (!(fabs(v - expected) <= tol))
                        fail_msg("%s: [%d][%d][%d][%d] is %.17g, expected %.17g (tolerance %.3g)",
                                 what, s, ch, y, x, v, expected, tol);
                }
}

/* ---- the implicit convolution ---- */

typedef struct conv_case {
    const char *name;
    st_cpe_conv_design design;
    st_cpe_dtype type;
    int n;
    st_cpe_conv_geom g;
    unsigned passes;  /* bit p: pass p fits the design's blocking */
    int explicit_too; /* also run the explicit scheme (float) */
} conv_case;

/* The pass as the case's design runs it: swCaffe's float kernels with
 * their budgets (st_cpe_conv_pass_problem), or swDNN's swCNNv12. */
static st_cpe_swdnn_conv case_problem(const conv_case *t, st_cpe_conv_pass pass, const void *in,
                                      const void *w, void *out)
{
    st_cpe_swdnn_conv p = st_cpe_conv_pass_problem(sw26010(), &t->g, t->n, pass, in, w, out);
    p.type = t->type;
    if (t->design == ST_CPE_CONV_SWDNN) {
        p.design = ST_CPE_CONV_SWDNN;
        p.ldm_budget = 0;
    }
    return p;
}

/* Whether the case's design runs the pass (swCaffe's: the backend's
 * question, backward-data tied to backward-weights), and why not. */
static int case_fits(const conv_case *t, st_cpe_conv_pass pass, char *why, size_t len)
{
    if (t->design == ST_CPE_CONV_SWCAFFE_FLOAT)
        return st_cpe_conv_implicit_fits(sw26010(), &t->g, t->n, pass, why, len);
    st_cpe_swdnn_conv p = case_problem(t, pass, &t->g, &t->g, (void *)&t->g);
    return st_cpe_swdnn_conv_fits(sw26010(), &p, why, len);
}

#define ALL_PASSES 7u

/* One pass's tensors: its NCHW view (n x c x h x w, the weights as
 * oc x c x kh x kw) and the layout the core problem takes. */
typedef struct pass_view {
    int n, c, h, w;
    st_cpe_layout l;
} pass_view;

static const char *const pass_names[ST_CPE_CONV_PASSES] = {"forward", "backward-data",
                                                           "backward-weights"};

static st_status swdnn_launch(st_cpe_cluster *cg, void *ctx, st_cpe_counters *out, st_error *err)
{
    return st_cpe_swdnn_conv_run(cg, ctx, "swdnn_conv", out, err);
}

/* The pass's input and weights in its layouts, from x, w, dy (NCHW,
 * [oc][c][kh][kw]): with the layout kernels in float, with index loops in
 * double. */
static void pass_operands(st_cpe_cluster *cg, const conv_case *t, st_cpe_conv_pass pass,
                          const float *x, const float *w, const float *dy, void *in, void *wt,
                          float *scratch)
{
    const st_cpe_conv_geom *g = &t->g;
    int n = t->n;
    st_error err = {0};
    st_status st = ST_OK;
    if (t->type == ST_CPE_F64) {
        if (pass == ST_CPE_CONV_FORWARD) {
            relayout_plain(x, ST_CPE_NCHW, in, t->type, ST_CPE_HWCN, n, g->c, g->ih, g->iw, 0);
            relayout_plain(w, ST_CPE_NCHW, wt, t->type, ST_CPE_HWNC, g->oc, g->c, g->kh, g->kw, 0);
        } else if (pass == ST_CPE_CONV_BACKWARD_DATA) {
            relayout_plain(dy, ST_CPE_NCHW, in, t->type, ST_CPE_HWCN, n, g->oc, g->oh, g->ow, 0);
            relayout_plain(w, ST_CPE_NCHW, wt, t->type, ST_CPE_HWCN, g->oc, g->c, g->kh, g->kw, 1);
        } else {
            relayout_plain(x, ST_CPE_NCHW, in, t->type, ST_CPE_HWNC, n, g->c, g->ih, g->iw, 0);
            relayout_plain(dy, ST_CPE_NCHW, wt, t->type, ST_CPE_HWCN, n, g->oc, g->oh, g->ow, 0);
        }
        return;
    }
    if (pass == ST_CPE_CONV_FORWARD) {
        st = st_cpe_relayout(cg, n, g->c, g->ih, g->iw, ST_CPE_NCHW, x, ST_CPE_HWCN, in, NULL,
                             &err);
        if (st == ST_OK)
            st = st_cpe_weights_to_swdnn(cg, g->oc, g->c, g->kh, g->kw, w, wt, scratch, 0, NULL,
                                         &err);
    } else if (pass == ST_CPE_CONV_BACKWARD_DATA) {
        st = st_cpe_relayout(cg, n, g->oc, g->oh, g->ow, ST_CPE_NCHW, dy, ST_CPE_HWCN, in, NULL,
                             &err);
        if (st == ST_OK)
            st = st_cpe_weights_to_swdnn(cg, g->oc, g->c, g->kh, g->kw, w, wt, scratch, 1, NULL,
                                         &err);
    } else {
        st = st_cpe_relayout(cg, n, g->c, g->ih, g->iw, ST_CPE_NCHW, x, ST_CPE_HWNC, in, NULL,
                             &err);
        if (st == ST_OK)
            st = st_cpe_relayout(cg, n, g->oc, g->oh, g->ow, ST_CPE_NCHW, dy, ST_CPE_HWCN, wt,
                                 NULL, &err);
    }
    if (st != ST_OK)
        fail_msg("%s, %s operands: %s", t->name, pass_names[pass], err.msg);
}

/* The float result of a pass back in NCHW (or [oc][c][kh][kw]) with the
 * layout kernels, into back. */
static void pass_result_back(st_cpe_cluster *cg, const conv_case *t, st_cpe_conv_pass pass,
                             const float *out, float *back)
{
    const st_cpe_conv_geom *g = &t->g;
    st_error err = {0};
    st_status st;
    if (pass == ST_CPE_CONV_FORWARD)
        st = st_cpe_relayout(cg, t->n, g->oc, g->oh, g->ow, ST_CPE_HWCN, out, ST_CPE_NCHW, back,
                             NULL, &err);
    else if (pass == ST_CPE_CONV_BACKWARD_DATA)
        st = st_cpe_relayout(cg, t->n, g->c, g->ih, g->iw, ST_CPE_HWCN, out, ST_CPE_NCHW, back,
                             NULL, &err);
    else
        st = st_cpe_weights_from_swdnn(cg, g->oc, g->c, g->kh, g->kw, out, back, NULL, &err);
    if (st != ST_OK)
        fail_msg("%s, %s result: %s", t->name, pass_names[pass], err.msg);
}

/* One pass, overwriting (the output NaN first: every element must be
 * written) and accumulating into base, against the truth. */
static void check_pass(st_cpe_cluster *cg, const conv_case *t, st_cpe_conv_pass pass,
                       const float *x, const float *w, const float *dy, const conv_truth *truth)
{
    const st_cpe_conv_geom *g = &t->g;
    size_t elt = st_cpe_dtype_size(t->type);
    pass_view out_view = pass == ST_CPE_CONV_FORWARD
                             ? (pass_view){t->n, g->oc, g->oh, g->ow, ST_CPE_HWCN}
                         : pass == ST_CPE_CONV_BACKWARD_DATA
                             ? (pass_view){t->n, g->c, g->ih, g->iw, ST_CPE_HWCN}
                             : (pass_view){g->oc, g->c, g->kh, g->kw, ST_CPE_HWNC};
    const double *want = pass == ST_CPE_CONV_FORWARD         ? truth->y
                         : pass == ST_CPE_CONV_BACKWARD_DATA ? truth->dx
                                                             : truth->dw;
    size_t in_count = pass == ST_CPE_CONV_BACKWARD_DATA ? y_count(g, t->n) : x_count(g, t->n);
    size_t w_elems = pass == ST_CPE_CONV_BACKWARD_WEIGHTS ? y_count(g, t->n) : w_count(g);
    size_t out_count = (size_t)out_view.n * out_view.c * out_view.h * out_view.w;
    void *in = malloc(in_count * elt), *wt = malloc(w_elems * elt), *out = malloc(out_count * elt);
    float *scratch = floats_new(w_count(g)), *base = floats_new(out_count);
    float *back = floats_new(out_count);
    assert_true(in && wt && out);
    pass_operands(cg, t, pass, x, w, dy, in, wt, scratch);
    fill_uniform(base, out_count, 1.0f, 977 + (uint64_t)pass);
    st_cpe_swdnn_conv p = case_problem(t, pass, in, wt, out);
    for (p.accumulate = 0; p.accumulate <= 1; p.accumulate++) {
        /* The output: NaN, or base in the pass's layout. */
        if (p.accumulate)
            relayout_plain(base, ST_CPE_NCHW, out, t->type, out_view.l, out_view.n, out_view.c,
                           out_view.h, out_view.w, 0);
        else
            memset(out, 0xff, out_count * elt); /* NaN in either type */
        char what[160];
        snprintf(what, sizeof what, "%s, %s%s", t->name, pass_names[pass],
                 p.accumulate ? " (accumulate)" : "");
        st_cpe_counters c;
        run_and_check_cost_only(cg, swdnn_launch, &p, &(cpe_test_output){out, out_count * elt}, 1,
                                &c, what);
        if (t->type == ST_CPE_F32) {
            pass_result_back(cg, t, pass, out, back);
            expect_close(what, back, t->type, ST_CPE_NCHW, out_view.n, out_view.c, out_view.h,
                         out_view.w, want, p.accumulate ? base : NULL);
        } else {
            expect_close(what, out, t->type, out_view.l, out_view.n, out_view.c, out_view.h,
                         out_view.w, want, p.accumulate ? base : NULL);
        }
        /* One launch within the LDM; a collective per (output pixel, kernel
         * position) with its input inside, each 2 no b ni flops: twice the
         * multiply-adds of the truth; each output put once (and fetched
         * once to accumulate). */
        uint64_t per_collective = (uint64_t)p.no * p.b * p.ni;
        if (c.launches != 1 || c.ldm_peak > SW_LDM_BYTES || c.flops != 2 * truth->macs ||
            c.mesh_gemms * per_collective != truth->macs ||
            c.dma_put_bytes != out_count * elt ||
            c.dma_get_bytes < (p.accumulate ? out_count * elt : 0) + (in_count + w_elems) * elt ||
            c.msgs_received != 7 * c.msgs_bcast || c.msgs_p2p != 0 ||
            c.mesh_msgs_bcast != c.msgs_bcast || !(c.time.total_s > 0.0))
            fail_msg("%s: %llu launches, LDM peak %zu, %llu flops (expected 2 x %llu), %llu "
                     "collectives of %llu multiply-adds, %llu bytes put (expected %zu), %llu "
                     "got, %llu broadcasts, %llu received, %llu point to point",
                     what, (unsigned long long)c.launches, c.ldm_peak,
                     (unsigned long long)c.flops, (unsigned long long)truth->macs,
                     (unsigned long long)c.mesh_gemms, (unsigned long long)per_collective,
                     (unsigned long long)c.dma_put_bytes, out_count * elt,
                     (unsigned long long)c.dma_get_bytes, (unsigned long long)c.msgs_bcast,
                     (unsigned long long)c.msgs_received, (unsigned long long)c.msgs_p2p);
    }
    free(in);
    free(wt);
    free(out);
    free(scratch);
    free(base);
    free(back);
}

/* The explicit scheme of the cpe backend (src/backends/cpe/cpe_conv.c, one group),
 * one image at a time as swCaffe's Caffe layer: im2col of the image, a GEMM
 * into its [oc][oh ow]; backward-data a GEMM with A transposed into col, then
 * col2im; backward-weights im2col and a GEMM with B transposed, accumulated
 * over the images (beta 1 after the first). */
static void check_explicit(st_cpe_cluster *cg, const conv_case *t, const float *x, const float *w,
                           const float *dy, const conv_truth *truth)
{
    const st_cpe_conv_geom *g = &t->g;
    int n = t->n;
    size_t K = (size_t)g->c * g->kh * g->kw, P = (size_t)g->oh * g->ow;
    size_t in_image = (size_t)g->c * g->ih * g->iw, out_image = (size_t)g->oc * P;
    size_t nx = x_count(g, n), ny = y_count(g, n), nw = w_count(g);
    float *col = floats_new(K * P), *y = floats_new(ny);
    float *dx = floats_new(nx), *dw = floats_new(nw);
    st_error err = {0};
    st_status st = ST_OK;
    for (int b = 0; b < n && st == ST_OK; b++) {
        const float *xb = x + (size_t)b * in_image, *dyb = dy + (size_t)b * out_image;
        st = st_cpe_im2col(cg, g, 1, xb, col, NULL, &err);
        if (st == ST_OK)
            st = st_cpe_gemm(cg, ST_CPE_F32, 0, 0, (size_t)g->oc, P, K, 1.0, w, K, col, P, 0.0,
                             y + (size_t)b * out_image, P, NULL, &err);
        if (st == ST_OK)
            st = st_cpe_gemm(cg, ST_CPE_F32, 0, 1, (size_t)g->oc, K, P, 1.0, dyb, P, col, P,
                             b == 0 ? 0.0 : 1.0, dw, K, NULL, &err);
        if (st == ST_OK)
            st = st_cpe_gemm(cg, ST_CPE_F32, 1, 0, K, P, (size_t)g->oc, 1.0, w, K, dyb, P, 0.0,
                             col, P, NULL, &err);
        if (st == ST_OK)
            st = st_cpe_col2im(cg, g, 1, col, dx + (size_t)b * in_image, 0, NULL, &err);
    }
    if (st != ST_OK)
        fail_msg("%s, explicit scheme: %s", t->name, err.msg);
    char what[160];
    snprintf(what, sizeof what, "%s, explicit forward", t->name);
    expect_close(what, y, ST_CPE_F32, ST_CPE_NCHW, n, g->oc, g->oh, g->ow, truth->y, NULL);
    snprintf(what, sizeof what, "%s, explicit backward-data", t->name);
    expect_close(what, dx, ST_CPE_F32, ST_CPE_NCHW, n, g->c, g->ih, g->iw, truth->dx, NULL);
    snprintf(what, sizeof what, "%s, explicit backward-weights", t->name);
    expect_close(what, dw, ST_CPE_F32, ST_CPE_NCHW, g->oc, g->c, g->kh, g->kw, truth->dw, NULL);
    free(col);
    free(y);
    free(dx);
    free(dw);
}

static void check_case(st_cpe_cluster *cg, const conv_case *t, uint64_t seed)
{
    const st_cpe_conv_geom *g = &t->g;
    size_t nx = x_count(g, t->n), ny = y_count(g, t->n), nw = w_count(g);
    float *x = floats_new(nx), *w = floats_new(nw), *dy = floats_new(ny);
    fill_uniform(x, nx, 1.0f, seed);
    fill_uniform(w, nw, 1.0f, seed + 1);
    fill_uniform(dy, ny, 1.0f, seed + 2);
    conv_truth truth;
    truth_compute(g, t->n, x, w, dy, &truth);
    for (int pass = 0; pass < ST_CPE_CONV_PASSES; pass++) {
        char why[256] = "";
        int fits = case_fits(t, (st_cpe_conv_pass)pass, why, sizeof why);
        if (fits != (int)(t->passes >> pass & 1u))
            fail_msg("%s, %s: fits %d, expected %d (%s)", t->name, pass_names[pass], fits,
                     !fits, why);
        if (fits)
            check_pass(cg, t, (st_cpe_conv_pass)pass, x, w, dy, &truth);
    }
    if (t->explicit_too)
        check_explicit(cg, t, x, w, dy, &truth);
    truth_free(&truth);
    free(x);
    free(w);
    free(dy);
}

static void test_implicit_passes(void **state)
{
    (void)state;
    const conv_case cases[] = {
        /* c, oc, ih, iw, kh, kw, sh, sw, ph, pw */
        /* swCaffe's float kernels, as the backend runs them: every pass,
         * and (64 input channels: no implicit backward-weights, so no
         * implicit backward at all) the forward pass only. */
        {"128->64 3x2 p1x0 4x5, float, swCaffe", ST_CPE_CONV_SWCAFFE_FLOAT, ST_CPE_F32, 128,
         geom_make(128, 64, 4, 5, 3, 2, 1, 1, 1, 0), ALL_PASSES, 1},
        {"64->64 3x3 p1 4x4, float, swCaffe", ST_CPE_CONV_SWCAFFE_FLOAT, ST_CPE_F32, 128,
         geom_make(64, 64, 4, 4, 3, 3, 1, 1, 1, 1), 1u << ST_CPE_CONV_FORWARD, 0},
        /* swDNN's swCNNv12 on shapes swCaffe's assertions refuse. */
        {"128->32 3x2 p1x0 6x5, float, swDNN", ST_CPE_CONV_SWDNN, ST_CPE_F32, 128,
         geom_make(128, 32, 6, 5, 3, 2, 1, 1, 1, 0), ALL_PASSES, 1},
        /* Forward only: 16 input channels are too few for the backward
         * passes' SIMD and column dimensions. */
        {"16->64 3x3 p2 7x7, float, swDNN", ST_CPE_CONV_SWDNN, ST_CPE_F32, 128,
         geom_make(16, 64, 7, 7, 3, 3, 1, 1, 2, 2), 1u << ST_CPE_CONV_FORWARD, 0},
        /* CoStride 4 of 6 output columns forward (two blocks); the
         * backward-weights kernel row (6 columns of 32 x 16 weights) does
         * not fit, so its weights come per multiply. */
        {"128->256 3x3 p0 3x8, double, swDNN", ST_CPE_CONV_SWDNN, ST_CPE_F64, 128,
         geom_make(128, 256, 3, 8, 3, 3, 1, 1, 0, 0), ALL_PASSES, 0},
        {"128->32 5x3 p2x1 4x6, double, swDNN", ST_CPE_CONV_SWDNN, ST_CPE_F64, 128,
         geom_make(128, 32, 4, 6, 5, 3, 1, 1, 2, 1), ALL_PASSES, 0},
    };
    st_cpe_cluster *cg = cluster_new();
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        check_case(cg, &cases[i], 0x9e3779b97f4a7c15ull + 3 * i);
    st_cpe_cluster_destroy(cg);
}

/* Shapes the implicit kernels do not take, and the reason each gives: the
 * dimension in the pass's own names. The backend's swCaffe design first
 * (st_cpe_conv_implicit_fits), then swDNN's. */
static void test_implicit_refusals(void **state)
{
    (void)state;
    static const struct {
        int n;
        st_cpe_conv_geom g;
        st_cpe_conv_pass pass;
        const char *why;
    } cases[] = {
        {128, {128, 8, 8, 4, 4, 3, 3, 2, 2, 1, 1, 64}, ST_CPE_CONV_FORWARD,
         "stride 2 x 2: swDNN's blocking steps one input column and row at a time"},
        {128, {128, 8, 8, 4, 4, 3, 3, 2, 2, 1, 1, 64}, ST_CPE_CONV_BACKWARD_WEIGHTS,
         "stride 2 x 2"},
        {64, {128, 6, 6, 6, 6, 3, 3, 1, 1, 1, 1, 64}, ST_CPE_CONV_FORWARD,
         "64 images: each CPE row gets 8, not whole 4 x 4 register blocks of 16 (swDNN's "
         "blocking needs a multiple of 128)"},
        {128, {128, 6, 6, 6, 6, 3, 3, 1, 1, 1, 1, 48}, ST_CPE_CONV_FORWARD,
         "48 output channels: swCaffe's float kernel needs a multiple of 32, at least 64"},
        {128, {48, 6, 6, 6, 6, 3, 3, 1, 1, 1, 1, 64}, ST_CPE_CONV_FORWARD,
         "48 input channels: swCaffe's float kernel needs a multiple of 32, at least 64"},
        {128, {1024, 6, 6, 6, 6, 3, 3, 1, 1, 1, 1, 1024}, ST_CPE_CONV_FORWARD,
         "the LDM cannot hold an input block (128 x 16), a weight block (128 x 128) and an "
         "output block (128 x 16) counted as doubles in swCaffe's 60 KB"},
        /* The backward passes name the tensors by their roles there. */
        {128, {48, 6, 6, 6, 6, 3, 3, 1, 1, 1, 1, 64}, ST_CPE_CONV_BACKWARD_DATA,
         "48 input channels: swCaffe's float kernel needs"},
        {128, {128, 6, 6, 6, 6, 3, 3, 1, 1, 1, 1, 48}, ST_CPE_CONV_BACKWARD_DATA,
         "48 output channels: swCaffe's float kernel needs"},
        {80, {128, 6, 6, 6, 6, 3, 3, 1, 1, 1, 1, 64}, ST_CPE_CONV_BACKWARD_WEIGHTS,
         "80 images: swCaffe's float kernel needs"},
        {128, {64, 6, 6, 6, 6, 3, 3, 1, 1, 1, 1, 64}, ST_CPE_CONV_BACKWARD_WEIGHTS,
         "64 input channels: each CPE row gets 8"},
        /* swCaffe computes both backward passes in one routine. */
        {128, {64, 6, 6, 6, 6, 3, 3, 1, 1, 1, 1, 64}, ST_CPE_CONV_BACKWARD_DATA,
         "swCaffe computes backward-data with backward-weights, which cannot run implicitly: "
         "64 input channels: each CPE row gets 8"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char why[256] = "";
        if (st_cpe_conv_implicit_fits(sw26010(), &cases[i].g, cases[i].n, cases[i].pass, why, sizeof why))
            fail_msg("refusal case %zu (%s) fits", i, pass_names[cases[i].pass]);
        tl_assert_contains(why, cases[i].why);
    }
    /* swDNN's swCNNv12 (double buffers, swDNN's 55 KB) refuses what its
     * register blocks cannot take. */
    static const struct {
        st_cpe_conv_geom g;
        const char *why;
    } swdnn[] = {
        {{128, 6, 6, 6, 6, 3, 3, 1, 1, 1, 1, 48},
         "48 output channels: each CPE column gets 6, not whole register blocks of 4"},
        {{12, 6, 6, 6, 6, 3, 3, 1, 1, 1, 1, 32},
         "12 input channels do not split into 8 equal slices of at least 2"},
        {{1024, 6, 6, 6, 6, 3, 3, 1, 1, 1, 1, 1024},
         "the LDM cannot hold two input blocks (128 x 16), two weight blocks (128 x 128) and "
         "one output block (128 x 16) of 4-byte values in swDNN's 55 KB"},
    };
    for (size_t i = 0; i < sizeof swdnn / sizeof swdnn[0]; i++) {
        char why[256] = "";
        st_cpe_swdnn_conv p = st_cpe_conv_pass_problem(sw26010(), &swdnn[i].g, 128, ST_CPE_CONV_FORWARD,
                                                       &swdnn[i].g, &swdnn[i].g,
                                                       (void *)&swdnn[i].g);
        p.design = ST_CPE_CONV_SWDNN;
        p.ldm_budget = 0;
        if (st_cpe_swdnn_conv_fits(sw26010(), &p, why, sizeof why))
            fail_msg("swDNN refusal case %zu fits", i);
        tl_assert_contains(why, swdnn[i].why);
    }
    /* The run refuses too, with the core problem's names, and launches
     * nothing. */
    st_cpe_cluster *cg = cluster_new();
    float one = 1.0f, out = 0.0f;
    st_cpe_conv_geom g = {128, 6, 6, 6, 6, 3, 3, 1, 1, 1, 1, 32};
    st_cpe_swdnn_conv p = st_cpe_conv_pass_problem(sw26010(), &g, 64, ST_CPE_CONV_FORWARD, &one, &one, &out);
    st_cpe_counters c;
    st_error err = {0};
    assert_int_equal(st_cpe_swdnn_conv_run(cg, &p, "conv_fwd", &c, &err), ST_EINPUT);
    tl_assert_contains(err.msg, "conv_fwd: 64 values of the SIMD dimension: each CPE row gets 8");
    assert_int_equal(c.launches, 0);
    assert_true(out == 0.0f);
    char why[256] = "";
    assert_false(st_cpe_swdnn_conv_fits(sw26010(), &p, why, sizeof why));
    tl_assert_contains(why, "64 values of the SIMD dimension");
    p.b = 128;
    p.ri = 0;
    st_error_clear(&err);
    assert_int_equal(st_cpe_swdnn_conv_run(cg, &p, "conv_fwd", NULL, &err), ST_EINPUT);
    tl_assert_contains(err.msg, "conv_fwd: bad geometry or NULL tensors");
    st_cpe_cluster_destroy(cg);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_relayout),
        cmocka_unit_test(test_weights_layout),
        cmocka_unit_test(test_transpose_negative_stride),
        cmocka_unit_test(test_implicit_passes),
        cmocka_unit_test(test_implicit_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
