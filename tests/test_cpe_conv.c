/* The implicit convolution on the emulated core group
 * (src/cpe/cpe_conv_implicit.c): forward, backward-data (overwriting and
 * accumulating) and backward-weights of all n images in one launch, checked
 * against a direct six-deep loop in double written here (the truth, shared
 * with neither scheme) and against the explicit scheme the cpe backend runs
 * (st_cpe_im2col + st_cpe_gemm per image, col2im for the data gradient), on
 * shapes that exercise the blocking: channels and widths not divisible by
 * 8, rows cut into segments, a row wider than the LDM, 1x1, 3x3/1 pad 1,
 * 5x5/2 pad 2, 11x11/4 (AlexNet conv1 at a small input), several channel
 * panels and tiles, non-square kernels, strides and padding, outputs whose
 * whole window is padding, n = 1 and n = 3. Tolerance: 1e-5 of the largest
 * magnitude of the true result. Also: the declared flops are exactly twice
 * the multiply-adds that touch the image (padding skipped, not multiplied
 * by zero), each result element is put once, refusals (LDM-hopeless
 * kernels, bad geometry) come back as ST_EINPUT with a message, and
 * st_cpe_conv_implicit_suits.
 *
 * `test_cpe_conv --bench` prints the predicted SW26010 time and GFlop/s of
 * implicit against explicit convolution, per pass, for the convolutions of
 * VGG-16 and AlexNet at batch 1, instead of running the tests. */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <time.h>

#include "cpe_testlib.h"

#include "cpe.h"

#define TOLERANCE 1e-5

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

static float *floats_new(size_t count)
{
    float *p = malloc(count * sizeof *p);
    assert_non_null(p);
    return p;
}

static void fill_random(float *p, size_t count, uint64_t *seed)
{
    for (size_t i = 0; i < count; i++)
        p[i] = (float)rand_unit(seed);
}

static void fill_nan(float *p, size_t count)
{
    for (size_t i = 0; i < count; i++)
        p[i] = NAN;
}

/* ---- the truth: the definition, term by term, in double ---- */

/* The three passes at once: y = conv(x, w), dx = conv^T(dy, w),
 * dw = sum dy x, and the number of multiply-adds whose input position lies
 * inside the image. */
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

/* Every got[i] within TOLERANCE * max |want| (+ base[i] when base is not
 * NULL: the accumulated-into values) of want[i]. */
static void expect_close(const char *what, const char *shape, const float *got,
                         const double *want, const float *base, size_t count)
{
    double largest = 0.0;
    for (size_t i = 0; i < count; i++) {
        double v = fabs(want[i] + (base ? base[i] : 0.0));
        largest = v > largest ? v : largest;
    }
    double tol = TOLERANCE * largest + FLT_MIN;
    for (size_t i = 0; i < count; i++) {
        double expected = want[i] + (base ? base[i] : 0.0);
        if (!(fabs((double)got[i] - expected) <= tol))
            fail_msg("%s, %s: element %zu is %.9g, expected %.9g (tolerance %.3g)", shape, what,
                     i, got[i], expected, tol);
    }
}

static void expect_close_floats(const char *what, const char *shape, const float *got,
                                const float *want, size_t count)
{
    double *w = malloc(count * sizeof *w);
    assert_non_null(w);
    for (size_t i = 0; i < count; i++)
        w[i] = want[i];
    expect_close(what, shape, got, w, NULL, count);
    free(w);
}

/* ---- the explicit scheme: im2col + GEMM per image, as src/backends/cpe.c ---- */

static st_status explicit_forward(st_cpe_cluster *cg, const st_cpe_conv_geom *g, int n,
                                  const float *x, const float *w, float *y, float *col,
                                  st_cpe_counters *sum, st_error *err)
{
    size_t k = (size_t)g->c * g->kh * g->kw, p = (size_t)g->oh * g->ow;
    st_cpe_counters c;
    for (int s = 0; s < n; s++) {
        st_status st = st_cpe_im2col(cg, g, x + (size_t)s * g->c * g->ih * g->iw, col, &c, err);
        if (st != ST_OK)
            return st;
        st_cpe_counters_add(sum, &c);
        st = st_cpe_gemm(cg, ST_CPE_F32, 0, 0, (size_t)g->oc, p, k, 1.0, w, k, col, p, 0.0,
                         y + (size_t)s * g->oc * p, p, &c, err);
        if (st != ST_OK)
            return st;
        st_cpe_counters_add(sum, &c);
    }
    return ST_OK;
}

/* dx += conv^T(dy, w) */
static st_status explicit_backward_data(st_cpe_cluster *cg, const st_cpe_conv_geom *g, int n,
                                        const float *dy, const float *w, float *dx, float *col,
                                        st_cpe_counters *sum, st_error *err)
{
    size_t k = (size_t)g->c * g->kh * g->kw, p = (size_t)g->oh * g->ow;
    st_cpe_counters c;
    for (int s = 0; s < n; s++) {
        st_status st = st_cpe_gemm(cg, ST_CPE_F32, 1, 0, k, p, (size_t)g->oc, 1.0, w, k,
                                   dy + (size_t)s * g->oc * p, p, 0.0, col, p, &c, err);
        if (st != ST_OK)
            return st;
        st_cpe_counters_add(sum, &c);
        st = st_cpe_col2im(cg, g, col, dx + (size_t)s * g->c * g->ih * g->iw, &c, err);
        if (st != ST_OK)
            return st;
        st_cpe_counters_add(sum, &c);
    }
    return ST_OK;
}

static st_status explicit_backward_weights(st_cpe_cluster *cg, const st_cpe_conv_geom *g, int n,
                                           const float *x, const float *dy, float *dw,
                                           float *col, st_cpe_counters *sum, st_error *err)
{
    size_t k = (size_t)g->c * g->kh * g->kw, p = (size_t)g->oh * g->ow;
    st_cpe_counters c;
    for (int s = 0; s < n; s++) {
        st_status st = st_cpe_im2col(cg, g, x + (size_t)s * g->c * g->ih * g->iw, col, &c, err);
        if (st != ST_OK)
            return st;
        st_cpe_counters_add(sum, &c);
        st = st_cpe_gemm(cg, ST_CPE_F32, 0, 1, (size_t)g->oc, k, p, 1.0,
                         dy + (size_t)s * g->oc * p, p, col, p, s == 0 ? 0.0 : 1.0, dw, k, &c,
                         err);
        if (st != ST_OK)
            return st;
        st_cpe_counters_add(sum, &c);
    }
    return ST_OK;
}

/* ---- the tests ---- */

typedef struct conv_case {
    const char *name;
    int n;
    st_cpe_conv_geom g;
    int with_explicit; /* 0 when im2col cannot take the rows */
} conv_case;

/* One launch, within the LDM, exactly 2 flops per multiply-add inside the
 * image (plus extra), each result element put once, and the broadcasts
 * received by the 7 other CPEs of the line. */
static void expect_counters(const char *shape, const char *pass, const st_cpe_counters *c,
                            uint64_t macs, uint64_t extra_flops, size_t out_elements)
{
    if (c->launches != 1 || c->ldm_peak > ST_CPE_LDM_BYTES)
        fail_msg("%s, %s: %llu launches, LDM peak %zu bytes", shape, pass,
                 (unsigned long long)c->launches, c->ldm_peak);
    if (c->flops != 2 * macs + extra_flops)
        fail_msg("%s, %s: %llu flops declared, expected 2 x %llu multiply-adds + %llu", shape,
                 pass, (unsigned long long)c->flops, (unsigned long long)macs,
                 (unsigned long long)extra_flops);
    if (c->dma_put_bytes != out_elements * sizeof(float))
        fail_msg("%s, %s: %llu bytes put, expected %zu (each result once)", shape, pass,
                 (unsigned long long)c->dma_put_bytes, out_elements * sizeof(float));
    if (c->msgs_received != 7 * c->msgs_bcast || c->msgs_p2p != 0)
        fail_msg("%s, %s: %llu broadcasts, %llu receives, %llu point-to-point messages", shape,
                 pass, (unsigned long long)c->msgs_bcast, (unsigned long long)c->msgs_received,
                 (unsigned long long)c->msgs_p2p);
    assert_true(c->time.total_s > 0.0);
}

static void check_case(st_cpe_cluster *cg, const conv_case *t, uint64_t seed)
{
    const st_cpe_conv_geom *g = &t->g;
    int n = t->n;
    size_t nx = x_count(g, n), ny = y_count(g, n), nw = w_count(g);
    float *x = floats_new(nx), *w = floats_new(nw), *dy = floats_new(ny);
    float *y = floats_new(ny), *dx = floats_new(nx), *dw = floats_new(nw);
    float *dx_old = floats_new(nx);
    fill_random(x, nx, &seed);
    fill_random(w, nw, &seed);
    fill_random(dy, ny, &seed);
    fill_random(dx_old, nx, &seed);
    conv_truth truth;
    truth_compute(g, n, x, w, dy, &truth);
    st_cpe_counters c;
    st_error err = {0};

    /* NaN where results go: every element must be written, none read. */
    fill_nan(y, ny);
    if (st_cpe_conv_implicit_forward(cg, g, n, x, w, y, &c, &err) != ST_OK)
        fail_msg("%s, forward: %s", t->name, err.msg);
    expect_close("forward", t->name, y, truth.y, NULL, ny);
    expect_counters(t->name, "forward", &c, truth.macs, 0, ny);

    fill_nan(dx, nx);
    if (st_cpe_conv_implicit_backward_data(cg, g, n, dy, w, dx, 0, &c, &err) != ST_OK)
        fail_msg("%s, backward-data: %s", t->name, err.msg);
    expect_close("backward-data (overwrite)", t->name, dx, truth.dx, NULL, nx);
    expect_counters(t->name, "backward-data (overwrite)", &c, truth.macs, 0, nx);

    memcpy(dx, dx_old, nx * sizeof *dx);
    if (st_cpe_conv_implicit_backward_data(cg, g, n, dy, w, dx, 1, &c, &err) != ST_OK)
        fail_msg("%s, backward-data (accumulate): %s", t->name, err.msg);
    expect_close("backward-data (accumulate)", t->name, dx, truth.dx, dx_old, nx);
    expect_counters(t->name, "backward-data (accumulate)", &c, truth.macs, nx, nx);

    fill_nan(dw, nw);
    if (st_cpe_conv_implicit_backward_weights(cg, g, n, x, dy, dw, &c, &err) != ST_OK)
        fail_msg("%s, backward-weights: %s", t->name, err.msg);
    expect_close("backward-weights", t->name, dw, truth.dw, NULL, nw);
    expect_counters(t->name, "backward-weights", &c, truth.macs, 0, nw);

    if (t->with_explicit) {
        /* The explicit scheme on the same inputs: the two schemes agree
         * with each other as closely as with the truth. */
        float *col = floats_new((size_t)g->c * g->kh * g->kw * g->oh * g->ow);
        float *ey = floats_new(ny), *edx = floats_new(nx), *edw = floats_new(nw);
        st_cpe_counters sum;
        memset(&sum, 0, sizeof sum);
        memset(edx, 0, nx * sizeof *edx);
        if (explicit_forward(cg, g, n, x, w, ey, col, &sum, &err) != ST_OK ||
            explicit_backward_data(cg, g, n, dy, w, edx, col, &sum, &err) != ST_OK ||
            explicit_backward_weights(cg, g, n, x, dy, edw, col, &sum, &err) != ST_OK)
            fail_msg("%s, explicit scheme: %s", t->name, err.msg);
        expect_close("explicit forward vs truth", t->name, ey, truth.y, NULL, ny);
        expect_close_floats("implicit vs explicit forward", t->name, y, ey, ny);
        if (st_cpe_conv_implicit_backward_data(cg, g, n, dy, w, dx, 0, &c, &err) != ST_OK)
            fail_msg("%s, backward-data: %s", t->name, err.msg);
        expect_close_floats("implicit vs explicit backward-data", t->name, dx, edx, nx);
        expect_close_floats("implicit vs explicit backward-weights", t->name, dw, edw, nw);
        free(col);
        free(ey);
        free(edx);
        free(edw);
    }
    truth_free(&truth);
    free(x);
    free(w);
    free(dy);
    free(y);
    free(dx);
    free(dw);
    free(dx_old);
}

static void test_shapes(void **state)
{
    (void)state;
    const conv_case cases[] = {
        /* c, oc, ih, iw, kh, kw, sh, sw, ph, pw */
        {"13->21 3x3/1 p1 9x11, n=3", 3, geom_make(13, 21, 9, 11, 3, 3, 1, 1, 1, 1), 1},
        {"16->24 1x1 7x7, n=3", 3, geom_make(16, 24, 7, 7, 1, 1, 1, 1, 0, 0), 1},
        {"4->9 1x1 p1 5x5 (border outputs all padding)", 1,
         geom_make(4, 9, 5, 5, 1, 1, 1, 1, 1, 1), 1},
        {"5->10 3x3/1 p1 4x300 (rows in segments), n=3", 3,
         geom_make(5, 10, 4, 300, 3, 3, 1, 1, 1, 1), 1},
        {"10->12 5x5/2 p2 17x15, n=3", 3, geom_make(10, 12, 17, 15, 5, 5, 2, 2, 2, 2), 1},
        {"3->96 11x11/4 35x35 (AlexNet conv1, small)", 1,
         geom_make(3, 96, 35, 35, 11, 11, 4, 4, 0, 0), 1},
        {"3->20 11x11/4 p2 39x300 (segments), n=3", 3,
         geom_make(3, 20, 39, 300, 11, 11, 4, 4, 2, 2), 1},
        {"600->16 3x3/1 p1 9x40 (two channel panels), n=3", 3,
         geom_make(600, 16, 9, 40, 3, 3, 1, 1, 1, 1), 1},
        {"600->300 3x3/1 p1 5x6 (channel panels and tiles)", 1,
         geom_make(600, 300, 5, 6, 3, 3, 1, 1, 1, 1), 1},
        {"7->11 2x4/2x3 p1x2 10x13, n=3", 3, geom_make(7, 11, 10, 13, 2, 4, 2, 3, 1, 2), 1},
        {"9->17 3x3/3 p2 8x8 (gaps between windows)", 1, geom_make(9, 17, 8, 8, 3, 3, 3, 3, 2, 2),
         1},
        /* 3 rows of 20000 floats (234 KB) do not fit one LDM: im2col
         * refuses this geometry, the implicit scheme cuts the rows. */
        {"2->3 3x3/1 p1 3x20000 (a row wider than the LDM)", 1,
         geom_make(2, 3, 3, 20000, 3, 3, 1, 1, 1, 1), 0},
    };
    st_cpe_cluster *cg = cluster_new();
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        check_case(cg, &cases[i], 0x9e3779b97f4a7c15ull + i);
    st_cpe_cluster_destroy(cg);
}

static void test_refusals(void **state)
{
    (void)state;
    st_cpe_cluster *cg = cluster_new();
    st_error err = {0};
    float one = 1.0f, out = 0.0f;
    /* An 80x80 kernel: 6400 weights of one channel pair (25 KB) three times
     * over is more than the LDM holds. */
    st_cpe_conv_geom huge = geom_make(1, 1, 80, 80, 80, 80, 1, 1, 0, 0);
    assert_int_equal(st_cpe_conv_implicit_forward(cg, &huge, 1, &one, &one, &out, NULL, &err),
                     ST_EINPUT);
    tl_assert_contains(err.msg, "conv_implicit_forward: a 80x80 kernel (stride 1x1) over 80x80 "
                                "inputs needs ");
    tl_assert_contains(err.msg, "more than the 65536-byte LDM");
    st_error_clear(&err);
    assert_int_equal(
        st_cpe_conv_implicit_backward_data(cg, &huge, 1, &one, &one, &out, 1, NULL, &err),
        ST_EINPUT);
    tl_assert_contains(err.msg, "conv_implicit_backward_data: a 80x80 kernel");
    st_error_clear(&err);
    assert_int_equal(
        st_cpe_conv_implicit_backward_weights(cg, &huge, 1, &one, &one, &out, NULL, &err),
        ST_EINPUT);
    tl_assert_contains(err.msg, "conv_implicit_backward_weights: a 80x80 kernel");
    assert_true(out == 0.0f);

    /* A caller that left the output channels at 0. */
    st_cpe_conv_geom no_oc = geom_make(4, 0, 5, 5, 3, 3, 1, 1, 1, 1);
    st_error_clear(&err);
    assert_int_equal(st_cpe_conv_implicit_forward(cg, &no_oc, 1, &one, &one, &out, NULL, &err),
                     ST_EINPUT);
    tl_assert_contains(err.msg, "conv_implicit_forward: bad geometry: 1 images, 4 -> 0 channels");
    st_error_clear(&err);
    st_cpe_conv_geom ok = geom_make(4, 4, 5, 5, 3, 3, 1, 1, 1, 1);
    assert_int_equal(st_cpe_conv_implicit_forward(cg, &ok, 0, &one, &one, &out, NULL, &err),
                     ST_EINPUT);
    tl_assert_contains(err.msg, "bad geometry: 0 images");
    st_error_clear(&err);
    assert_int_equal(st_cpe_conv_implicit_backward_weights(cg, &ok, 1, &one, NULL, &out, NULL,
                                                           &err),
                     ST_EINPUT);
    tl_assert_contains(err.msg, "conv_implicit_backward_weights: a tensor pointer is NULL");
    st_cpe_cluster_destroy(cg);
}

static void test_suits(void **state)
{
    (void)state;
    st_cpe_conv_geom vgg = geom_make(256, 256, 56, 56, 3, 3, 1, 1, 1, 1);
    st_cpe_conv_geom alex2 = geom_make(96, 256, 27, 27, 5, 5, 1, 1, 2, 2);
    st_cpe_conv_geom one_in = geom_make(1, 64, 28, 28, 5, 5, 1, 1, 2, 2);
    st_cpe_conv_geom one_out = geom_make(64, 1, 28, 28, 3, 3, 1, 1, 1, 1);
    st_cpe_conv_geom huge = geom_make(64, 64, 80, 80, 80, 80, 1, 1, 0, 0);
    assert_true(st_cpe_conv_implicit_suits(&vgg));
    assert_true(st_cpe_conv_implicit_suits(&alex2));
    assert_false(st_cpe_conv_implicit_suits(&one_in));
    assert_false(st_cpe_conv_implicit_suits(&one_out));
    assert_false(st_cpe_conv_implicit_suits(&huge));
    assert_false(st_cpe_conv_implicit_suits(NULL));
}

/* ---- benchmark: implicit against explicit, per pass ---- */

typedef struct bench_layer {
    const char *name;
    st_cpe_conv_geom g;
} bench_layer;

enum { BENCH_FWD, BENCH_BWD_DATA, BENCH_BWD_WEIGHTS, BENCH_PASSES };

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Both schemes on one layer at batch 1; prints one line per pass. */
static int bench_layer_run(st_cpe_cluster *cg, const bench_layer *l, double total[2])
{
    const st_cpe_conv_geom *g = &l->g;
    size_t nx = x_count(g, 1), ny = y_count(g, 1), nw = w_count(g);
    float *x = malloc(nx * sizeof *x), *w = malloc(nw * sizeof *w), *dy = malloc(ny * sizeof *dy);
    float *y = malloc(ny * sizeof *y), *dx = malloc(nx * sizeof *dx);
    float *dw = malloc(nw * sizeof *dw);
    float *col = malloc((size_t)g->c * g->kh * g->kw * g->oh * g->ow * sizeof *col);
    int rc = 1;
    if (!x || !w || !dy || !y || !dx || !dw || !col) {
        fprintf(stderr, "bench: out of memory for %s\n", l->name);
        goto done;
    }
    uint64_t seed = 42;
    fill_random(x, nx, &seed);
    fill_random(w, nw, &seed);
    fill_random(dy, ny, &seed);
    st_cpe_counters implicit[BENCH_PASSES], expl[BENCH_PASSES];
    memset(expl, 0, sizeof expl);
    st_error err = {0};
    double t0 = now_seconds();
    st_status st = st_cpe_conv_implicit_forward(cg, g, 1, x, w, y, &implicit[BENCH_FWD], &err);
    if (st == ST_OK)
        st = st_cpe_conv_implicit_backward_data(cg, g, 1, dy, w, dx, 0, &implicit[BENCH_BWD_DATA],
                                                &err);
    if (st == ST_OK)
        st = st_cpe_conv_implicit_backward_weights(cg, g, 1, x, dy, dw, &implicit[BENCH_BWD_WEIGHTS],
                                                   &err);
    double t1 = now_seconds();
    memset(dx, 0, nx * sizeof *dx);
    if (st == ST_OK)
        st = explicit_forward(cg, g, 1, x, w, y, col, &expl[BENCH_FWD], &err);
    if (st == ST_OK)
        st = explicit_backward_data(cg, g, 1, dy, w, dx, col, &expl[BENCH_BWD_DATA], &err);
    if (st == ST_OK)
        st = explicit_backward_weights(cg, g, 1, x, dy, dw, col, &expl[BENCH_BWD_WEIGHTS], &err);
    double t2 = now_seconds();
    if (st != ST_OK) {
        fprintf(stderr, "bench: %s: %s\n", l->name, err.msg);
        goto done;
    }
    static const char *const pass_name[BENCH_PASSES] = {"fwd", "bwd-data", "bwd-weights"};
    double flops = 2.0 * (double)g->oc * g->c * g->kh * g->kw * g->oh * g->ow;
    for (int p = 0; p < BENCH_PASSES; p++) {
        double ti = implicit[p].time.total_s, te = expl[p].time.total_s;
        total[0] += ti;
        total[1] += te;
        printf("%-28s %-11s %9.3f %8.1f %5.0f%% %9.3f %8.1f %5.0f%% %6.2f\n", p == 0 ? l->name : "",
               pass_name[p], 1e3 * ti, flops / ti / 1e9,
               100.0 * implicit[p].time.compute_s / ti, 1e3 * te, flops / te / 1e9,
               100.0 * expl[p].time.compute_s / te, te / ti);
    }
    printf("%-28s (emulated in %.1f s implicit, %.1f s explicit)\n", "", t1 - t0, t2 - t1);
    fflush(stdout);
    rc = 0;
done:
    free(x);
    free(w);
    free(dy);
    free(y);
    free(dx);
    free(dw);
    free(col);
    return rc;
}

static int bench(void)
{
    static const bench_layer layers[] = {
        {"vgg16 64->64 3x3 224", {64, 224, 224, 224, 224, 3, 3, 1, 1, 1, 1, 64}},
        {"vgg16 128->128 3x3 112", {128, 112, 112, 112, 112, 3, 3, 1, 1, 1, 1, 128}},
        {"vgg16 256->256 3x3 56", {256, 56, 56, 56, 56, 3, 3, 1, 1, 1, 1, 256}},
        {"vgg16 512->512 3x3 28", {512, 28, 28, 28, 28, 3, 3, 1, 1, 1, 1, 512}},
        {"vgg16 512->512 3x3 14", {512, 14, 14, 14, 14, 3, 3, 1, 1, 1, 1, 512}},
        {"alexnet conv1 3->96 11x11/4", {3, 227, 227, 55, 55, 11, 11, 4, 4, 0, 0, 96}},
        {"alexnet conv2 96->256 5x5", {96, 27, 27, 27, 27, 5, 5, 1, 1, 2, 2, 256}},
        {"alexnet conv3 256->384 3x3", {256, 13, 13, 13, 13, 3, 3, 1, 1, 1, 1, 384}},
        {"alexnet conv4 384->384 3x3", {384, 13, 13, 13, 13, 3, 3, 1, 1, 1, 1, 384}},
        {"alexnet conv5 384->256 3x3", {384, 13, 13, 13, 13, 3, 3, 1, 1, 1, 1, 256}},
    };
    st_cpe_cluster *cg = NULL;
    st_error err = {0};
    if (st_cpe_cluster_create(&cg, &err) != ST_OK) {
        fprintf(stderr, "bench: %s\n", err.msg);
        return 1;
    }
    printf("predicted SW26010 core-group time per pass, batch 1 (GFlop/s from the nominal "
           "2 oc ic kh kw oh ow flops; %% = compute share of the predicted time)\n");
    printf("%-28s %-11s %9s %8s %6s %9s %8s %6s %6s\n", "layer", "pass", "impl ms", "GFlop/s",
           "comp", "expl ms", "GFlop/s", "comp", "e/i");
    double total[2] = {0.0, 0.0};
    int rc = 0;
    for (size_t i = 0; i < sizeof layers / sizeof layers[0] && rc == 0; i++) {
        int suits = st_cpe_conv_implicit_suits(&layers[i].g);
        rc = bench_layer_run(cg, &layers[i], total);
        if (!suits)
            printf("%-28s (st_cpe_conv_implicit_suits: no)\n", "");
    }
    if (rc == 0)
        printf("all passes: implicit %.3f ms, explicit %.3f ms (explicit / implicit %.2f)\n",
               1e3 * total[0], 1e3 * total[1], total[1] / total[0]);
    st_cpe_cluster_destroy(cg);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--bench") == 0)
        return bench();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shapes),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_suits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
