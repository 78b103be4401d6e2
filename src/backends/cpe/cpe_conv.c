/* The `cpe` backend's convolution, two ways on the CPEs, chosen per layer
 * and pass by predicted time on the first training calls (one each,
 * swCaffe's first two iterations):
 *   - explicit: one image at a time, as swCaffe's Caffe layer: im2col,
 *     then a GEMM launch per group (col2im in backward-data; the weight
 *     gradient accumulated over the images in backward-weights);
 *   - implicit: swDNN's kernel (st_cpe_swdnn_conv_run), where its blocking
 *     takes the shape, on tensors with the batch innermost (H W C N): its
 *     input and output gradient are transformed into that layout at its
 *     edges (cpe_layouts.c), its output stays in it when its consumer is a
 *     cpe kernel, and its weights are transformed at each call (as swCaffe
 *     does).
 * A pass's time is its own launches plus its transformations. */
#include <stdio.h>

#include "cpe_backend_internal.h"

/* ---- strategies ---- */

static st_cpe_conv_geom conv_geom(const st_conv_desc *d)
{
    st_cpe_conv_geom g = {d->ic / d->groups, d->ih, d->iw, d->oh, d->ow,
                          d->kh, d->kw, d->sh, d->sw, d->ph, d->pw, d->oc / d->groups};
    return g;
}

/* The emulator's name of each pass. */
static const st_cpe_conv_pass conv_pass_of[PASSES] = {
    ST_CPE_CONV_FORWARD, ST_CPE_CONV_BACKWARD_DATA, ST_CPE_CONV_BACKWARD_WEIGHTS};

/* Which strategies can run each pass with n images (the explicit one
 * always; the implicit one where swDNN's blocking takes the shape). */
static void conv_strategies(cpe_kernel *k, int n)
{
    for (int p = 0; p < PASSES; p++) {
        k->runs[CONV_EXPLICIT][p] = 1;
        if (k->conv.groups != 1) {
            snprintf(k->why_not[p], sizeof k->why_not[p],
                     "%d groups: swDNN convolves all channels at once", k->conv.groups);
            k->runs[CONV_IMPLICIT][p] = 0;
        } else {
            k->runs[CONV_IMPLICIT][p] =
                st_cpe_conv_implicit_fits(st_cpe_cluster_machine(k->ctx->cg), &k->geom, n,
                                          conv_pass_of[p], k->why_not[p], sizeof k->why_not[p]);
        }
    }
}

/* The strategy of this call of a pass: during training the first calls try
 * each strategy that can run, in turn; then the chosen one. Test-phase
 * forwards use the choice (explicit until there is one). */
static int conv_strategy(const cpe_kernel *k, int pass, int training)
{
    if (training && k->calls[pass] < CONV_TRIALS) {
        int s = (int)k->calls[pass];
        return k->runs[s][pass] ? s : CONV_EXPLICIT;
    }
    return k->chosen[pass];
}

/* After a training call that took seconds (its own launches) and layout
 * (its transformations), split as split, with strategy s: count it, and
 * choose once the trials are over, by the sum. */
static void conv_called(cpe_kernel *k, int pass, int s, double seconds, double layout,
                        const cpe_split *split)
{
    if (k->calls[pass] >= CONV_TRIALS)
        return;
    if (k->runs[s][pass] && s == (int)k->calls[pass]) {
        k->tried[s][pass] = seconds;
        k->tried_layout[s][pass] = layout;
        k->tried_split[s][pass] = *split;
    }
    if (++k->calls[pass] < CONV_TRIALS)
        return;
    k->chosen[pass] = CONV_EXPLICIT;
    for (int t = 1; t < CONV_STRATEGIES; t++)
        if (k->runs[t][pass] &&
            k->tried[t][pass] + k->tried_layout[t][pass] <
                k->tried[k->chosen[pass]][pass] + k->tried_layout[k->chosen[pass]][pass])
            k->chosen[pass] = t;
}

typedef st_status (*conv_pass_fn)(cpe_kernel *k, const st_kargs *a, st_error *err);

static st_status conv_run(cpe_kernel *k, int pass, const conv_pass_fn fn[CONV_STRATEGIES],
                          const st_kargs *a, int training, st_error *err)
{
    int s = conv_strategy(k, pass, training);
    char why[192];
    /* The strategies were settled for the largest batch; a smaller one
     * (a last partial batch) may not suit swDNN's blocking. */
    if (s == CONV_IMPLICIT && a->n != k->base_n &&
        !st_cpe_conv_implicit_fits(st_cpe_cluster_machine(k->ctx->cg), &k->geom, a->n,
                                   conv_pass_of[pass], why, sizeof why))
        s = CONV_EXPLICIT;
    cpe_account before = k->work.now[pass];
    double before_layout = cpe_account_seconds(&k->layout.now[pass]);
    st_status st = fn[s](k, a, err);
    if (st == ST_OK && training && a->n == k->base_n) {
        double layout = cpe_account_seconds(&k->layout.now[pass]) - before_layout;
        cpe_split split = cpe_split_between(&before, &k->work.now[pass], layout);
        conv_called(k, pass, s, cpe_account_seconds(&k->work.now[pass]) -
                    cpe_account_seconds(&before), layout, &split);
    }
    return st;
}

static cpe_shape conv_in_shape(const cpe_kernel *k)
{
    return (cpe_shape){k->conv.ic, k->conv.ih, k->conv.iw};
}

static cpe_shape conv_out_shape(const cpe_kernel *k)
{
    return (cpe_shape){k->conv.oc, k->conv.oh, k->conv.ow};
}

/* The input x [n, ic, ih, iw] in layout want (in SCRATCH_IN when it is
 * transformed), charged to the pass's layout work. */
static st_status conv_src(cpe_kernel *k, const st_kargs *a, int pass, int training,
                          st_cpe_layout want, const float **x, st_error *err)
{
    cpe_shape in = conv_in_shape(k);
    return cpe_layout_view(k, pass, training, SCRATCH_IN, &in, a->n, a->src,
                           cpe_src_data_layout(k), want, x, err);
}

/* The output gradient dy [n, oc, oh, ow] in layout want (in SCRATCH_DIFF
 * when it is transformed). */
static st_status conv_diff_dst(cpe_kernel *k, const st_kargs *a, int pass, st_cpe_layout want,
                               const float **dy, st_error *err)
{
    cpe_shape out = conv_out_shape(k);
    return cpe_layout_view(k, pass, 1, SCRATCH_DIFF, &out, a->n, a->diff_dst,
                           cpe_own_diff_layout(k), want, dy, err);
}

/* ---- explicit (im2col + GEMM, one image at a time) ----
 *
 * As swCaffe's BaseConvolutionLayer (base_conv_layer.cpp) runs it: its
 * column buffer holds one image ("to avoid overly large memory usage"), so
 * each image is one im2col launch and one GEMM per group (the vendor's
 * sgemm: M output channels, N = oh ow pixels, K = c kh kw), its bias added
 * by a GEMM of K = 1 against a row of ones (forward_cpu_bias: the output
 * read and written again), its weight gradient accumulated image by image
 * (weight_cpu_gemm, beta 1: the gradient read and written once per image),
 * col2im after each backward-data GEMM; a 1x1 convolution of stride 1 and
 * no padding takes the image itself as its column matrix (is_1x1_). Small
 * images make narrow GEMMs and short transfers, which the model costs as
 * such. */

/* The sizes of an explicit pass: a group's output channels and GEMM K, the
 * pixels, an image's input and output floats, the column matrix (NULL for
 * a 1x1 convolution, which reads the image itself). */
typedef struct explicit_sizes {
    st_cpe_conv_geom all; /* every channel: im2col works on all groups at once */
    size_t ocg, K, P;
    size_t in_image, out_image;
    float *col;
} explicit_sizes;

static int explicit_is_1x1(const st_conv_desc *d)
{
    return d->kh == 1 && d->kw == 1 && d->sh == 1 && d->sw == 1 && d->ph == 0 && d->pw == 0;
}

static st_status explicit_begin(cpe_kernel *k, explicit_sizes *e, st_error *err)
{
    const st_conv_desc *d = &k->conv;
    e->all = (st_cpe_conv_geom){d->ic, d->ih, d->iw, d->oh, d->ow, d->kh, d->kw,
                                d->sh, d->sw, d->ph, d->pw, d->oc};
    e->ocg = (size_t)(d->oc / d->groups);
    e->K = (size_t)(d->ic / d->groups) * d->kh * d->kw;
    e->P = (size_t)d->oh * d->ow;
    e->in_image = (size_t)d->ic * d->ih * d->iw;
    e->out_image = (size_t)d->oc * e->P;
    e->col = NULL;
    if (explicit_is_1x1(d))
        return ST_OK;
    return cpe_scratch(k->ctx, SCRATCH_COL, (size_t)d->groups * e->K * e->P, &e->col, err);
}

/* Image b's column matrix [groups K][P]: im2col of x's image b into e->col,
 * or the image itself for a 1x1 convolution. */
static st_status explicit_columns(cpe_kernel *k, int pass, int training, const explicit_sizes *e,
                                  const float *x, int b, const float **col, st_error *err)
{
    const float *image = x + (size_t)b * e->in_image;
    if (!e->col) {
        *col = image;
        return ST_OK;
    }
    *col = e->col;
    st_cpe_counters c;
    return cpe_charge(&k->work, pass, &c, training,
                      st_cpe_im2col(k->ctx->cg, &e->all, 1, image, e->col, &c, err));
}

/* y [oc][P] of one image += bias [oc] as swCaffe's forward_cpu_bias: a GEMM
 * of K = 1, bias times a row of P ones. */
static st_status explicit_bias(cpe_kernel *k, int training, const explicit_sizes *e,
                               const float *bias, const float *ones, float *y, st_error *err)
{
    st_cpe_counters c;
    return cpe_charge(&k->work, PASS_FWD, &c, training,
                      st_cpe_gemm(k->ctx->cg, ST_CPE_F32, 0, 0, (size_t)k->conv.oc, e->P, 1, 1.0,
                                  bias, 1, ones, e->P, 1.0, y, e->P, &c, err));
}

static st_status explicit_forward(cpe_kernel *k, const st_kargs *a, st_error *err)
{
    const st_conv_desc *d = &k->conv;
    const float *x;
    float *ones = NULL;
    explicit_sizes e;
    st_status st = conv_src(k, a, PASS_FWD, a->training, ST_CPE_NCHW, &x, err);
    if (st == ST_OK)
        st = explicit_begin(k, &e, err);
    if (st == ST_OK && d->bias) {
        /* Caffe's bias multiplier, set once at its reshape: not charged. */
        st = cpe_scratch(k->ctx, SCRATCH_ONES, e.P, &ones, err);
        for (size_t i = 0; st == ST_OK && i < e.P; i++)
            ones[i] = 1.0f;
    }
    for (int b = 0; b < a->n && st == ST_OK; b++) {
        const float *col;
        float *y = a->dst + (size_t)b * e.out_image;
        st = explicit_columns(k, PASS_FWD, a->training, &e, x, b, &col, err);
        for (int g = 0; g < d->groups && st == ST_OK; g++) {
            st_cpe_counters c;
            st = cpe_charge(&k->work, PASS_FWD, &c, a->training,
                            st_cpe_gemm(k->ctx->cg, ST_CPE_F32, 0, 0, e.ocg, e.P, e.K, 1.0,
                                        a->weights + (size_t)g * e.ocg * e.K, e.K,
                                        col + (size_t)g * e.K * e.P, e.P, 0.0,
                                        y + (size_t)g * e.ocg * e.P, e.P, &c, err));
        }
        if (st == ST_OK && d->bias)
            st = explicit_bias(k, a->training, &e, a->bias, ones, y, err);
    }
    if (st == ST_OK)
        k->own.data = ST_CPE_NCHW;
    if (st == ST_OK)
        st = cpe_epilogue(k, a->dst, NULL, a->n, d->oc, e.P, d->act, a->training, err);
    return st;
}

static st_status explicit_backward_data(cpe_kernel *k, const st_kargs *a, st_error *err)
{
    const st_conv_desc *d = &k->conv;
    const float *dy;
    cpe_plain_diff dx = {0};
    explicit_sizes e;
    st_status st = conv_diff_dst(k, a, PASS_BWD_DATA, ST_CPE_NCHW, &dy, err);
    if (st == ST_OK)
        st = explicit_begin(k, &e, err);
    if (st == ST_OK)
        st = cpe_plain_diff_dst(k, a, &dx, err);
    for (int b = 0; b < a->n && st == ST_OK; b++) {
        float *dimage = dx.to + (size_t)b * e.in_image;
        /* A 1x1 convolution's GEMM writes the image's gradient itself. */
        float *dcol = e.col ? e.col : dimage;
        double beta = e.col || !dx.add ? 0.0 : 1.0;
        for (int g = 0; g < d->groups && st == ST_OK; g++) {
            st_cpe_counters c;
            st = cpe_charge(&k->work, PASS_BWD_DATA, &c, 1,
                            st_cpe_gemm(k->ctx->cg, ST_CPE_F32, 1, 0, e.K, e.P, e.ocg, 1.0,
                                        a->weights + (size_t)g * e.ocg * e.K, e.K,
                                        dy + (size_t)b * e.out_image + (size_t)g * e.ocg * e.P,
                                        e.P, beta, dcol + (size_t)g * e.K * e.P, e.P, &c, err));
        }
        if (st == ST_OK && e.col) {
            st_cpe_counters c;
            st = cpe_charge(&k->work, PASS_BWD_DATA, &c, 1,
                            st_cpe_col2im(k->ctx->cg, &e.all, 1, e.col, dimage, dx.add, &c,
                                          err));
        }
    }
    return cpe_plain_diff_finish(k, a, &dx, st, err);
}

static st_status explicit_backward_weights(cpe_kernel *k, const st_kargs *a, st_error *err)
{
    const st_conv_desc *d = &k->conv;
    const float *x, *dy;
    explicit_sizes e;
    st_status st = conv_src(k, a, PASS_BWD_WEIGHTS, 1, ST_CPE_NCHW, &x, err);
    if (st == ST_OK)
        st = conv_diff_dst(k, a, PASS_BWD_WEIGHTS, ST_CPE_NCHW, &dy, err);
    if (st == ST_OK)
        st = explicit_begin(k, &e, err);
    for (int b = 0; b < a->n && st == ST_OK; b++) {
        const float *col;
        st = explicit_columns(k, PASS_BWD_WEIGHTS, 1, &e, x, b, &col, err);
        for (int g = 0; g < d->groups && st == ST_OK; g++) {
            st_cpe_counters c;
            st = cpe_charge(&k->work, PASS_BWD_WEIGHTS, &c, 1,
                            st_cpe_gemm(k->ctx->cg, ST_CPE_F32, 0, 1, e.ocg, e.K, e.P, 1.0,
                                        dy + (size_t)b * e.out_image + (size_t)g * e.ocg * e.P,
                                        e.P, col + (size_t)g * e.K * e.P, e.P,
                                        b == 0 ? 0.0 : 1.0,
                                        a->diff_weights + (size_t)g * e.ocg * e.K, e.K, &c,
                                        err));
        }
    }
    if (st == ST_OK && d->bias && a->diff_bias)
        st = cpe_bias_grad(k, a->diff_bias, dy, a->n, d->oc, e.P, err);
    return st;
}

/* ---- implicit (swDNN) ---- */

/* The weights in swDNN's order (rotated for backward-data) in SCRATCH_W,
 * transformed on the CPEs and charged as layout work. */
static st_status swdnn_weights(cpe_kernel *k, int pass, int training, const float *w, int rotated,
                               float **out, st_error *err)
{
    const st_conv_desc *d = &k->conv;
    size_t count = (size_t)d->oc * d->ic * d->kh * d->kw;
    float *tmp = NULL;
    st_status st = cpe_scratch(k->ctx, SCRATCH_W, count, out, err);
    if (st == ST_OK && rotated)
        st = cpe_scratch(k->ctx, SCRATCH_W2, count, &tmp, err);
    if (st != ST_OK)
        return st;
    st_cpe_counters c;
    st = st_cpe_weights_to_swdnn(k->ctx->cg, d->oc, d->ic, d->kh, d->kw, w, *out, tmp, rotated,
                                 &c, err);
    return cpe_charge(&k->layout, pass, &c, training, st);
}

static st_status swdnn_run(cpe_kernel *k, int pass, int training, st_cpe_conv_pass which, int n,
                           const void *in, const void *w, void *out, int accumulate,
                           st_error *err)
{
    st_cpe_swdnn_conv p = st_cpe_conv_pass_problem(st_cpe_cluster_machine(k->ctx->cg), &k->geom,
                                                   n, which, in, w, out);
    p.accumulate = accumulate;
    st_cpe_counters c;
    static const char *const names[PASSES] = {"swdnn_conv_forward", "swdnn_conv_backward_data",
                                              "swdnn_conv_backward_weights"};
    st_status st = st_cpe_swdnn_conv_run(k->ctx->cg, &p, names[pass], &c, err);
    return cpe_charge(&k->work, pass, &c, training, st);
}

static st_status implicit_forward(cpe_kernel *k, const st_kargs *a, st_error *err)
{
    const st_conv_desc *d = &k->conv;
    cpe_shape out = conv_out_shape(k);
    const float *x;
    float *w, *y = a->dst;
    int plain = k->base.dst_layout == NULL;
    st_status st = conv_src(k, a, PASS_FWD, a->training, ST_CPE_HWCN, &x, err);
    if (st == ST_OK)
        st = swdnn_weights(k, PASS_FWD, a->training, a->weights, 0, &w, err);
    if (st == ST_OK && plain)
        st = cpe_scratch(k->ctx, SCRATCH_OUT, cpe_shape_floats(&out, a->n), &y, err);
    if (st == ST_OK)
        st = swdnn_run(k, PASS_FWD, a->training, ST_CPE_CONV_FORWARD, a->n, x, w, y, 0, err);
    /* In H W C N the bias is per channel of each pixel's C x N block. */
    if (st == ST_OK)
        st = cpe_epilogue(k, y, d->bias ? a->bias : NULL, d->oh * d->ow, d->oc, (size_t)a->n,
                          d->act, a->training, err);
    if (st == ST_OK && plain) {
        st_cpe_counters c;
        st = cpe_charge(&k->layout, PASS_FWD, &c, a->training,
                        st_cpe_relayout(k->ctx->cg, a->n, out.c, out.h, out.w, ST_CPE_HWCN, y,
                                        ST_CPE_NCHW, a->dst, &c, err));
    }
    if (st == ST_OK)
        k->own.data = ST_CPE_HWCN;
    return st;
}

static st_status implicit_backward_data(cpe_kernel *k, const st_kargs *a, st_error *err)
{
    cpe_shape in = conv_in_shape(k);
    const float *dy;
    float *w, *dx = a->diff_src;
    st_status st = conv_diff_dst(k, a, PASS_BWD_DATA, ST_CPE_HWCN, &dy, err);
    if (st == ST_OK)
        st = swdnn_weights(k, PASS_BWD_DATA, 1, a->weights, 1, &w, err);
    st_cpe_layout target = cpe_diff_target(k, ST_CPE_HWCN, a->accumulate);
    int direct = target == ST_CPE_HWCN;
    if (st == ST_OK && !direct)
        st = cpe_scratch(k->ctx, SCRATCH_OUT, cpe_shape_floats(&in, a->n), &dx, err);
    if (st == ST_OK)
        st = swdnn_run(k, PASS_BWD_DATA, 1, ST_CPE_CONV_BACKWARD_DATA, a->n, dy, w, dx,
                       direct && a->accumulate, err);
    if (st == ST_OK && !direct)
        st = cpe_layout_store(k, PASS_BWD_DATA, &in, a->n, dx, ST_CPE_HWCN, a->diff_src, target,
                              a->accumulate, err);
    return st;
}

static st_status implicit_backward_weights(cpe_kernel *k, const st_kargs *a, st_error *err)
{
    const st_conv_desc *d = &k->conv;
    const float *x, *dy;
    float *dw;
    st_status st = conv_src(k, a, PASS_BWD_WEIGHTS, 1, ST_CPE_HWNC, &x, err);
    if (st == ST_OK)
        st = conv_diff_dst(k, a, PASS_BWD_WEIGHTS, ST_CPE_HWCN, &dy, err);
    if (st == ST_OK)
        st = cpe_scratch(k->ctx, SCRATCH_W, (size_t)d->oc * d->ic * d->kh * d->kw, &dw, err);
    if (st == ST_OK)
        st = swdnn_run(k, PASS_BWD_WEIGHTS, 1, ST_CPE_CONV_BACKWARD_WEIGHTS, a->n, x, dy, dw, 0,
                       err);
    if (st == ST_OK) {
        st_cpe_counters c;
        st = cpe_charge(&k->layout, PASS_BWD_WEIGHTS, &c, 1,
                        st_cpe_weights_from_swdnn(k->ctx->cg, d->oc, d->ic, d->kh, d->kw, dw,
                                                  a->diff_weights, &c, err));
    }
    if (st == ST_OK && d->bias && a->diff_bias)
        st = cpe_bias_grad(k, a->diff_bias, dy, d->oh * d->ow, d->oc, (size_t)a->n, err);
    return st;
}

/* ---- the kernel ---- */

static const conv_pass_fn conv_forward_fn[CONV_STRATEGIES] = {explicit_forward,
                                                               implicit_forward};
static const conv_pass_fn conv_backward_data_fn[CONV_STRATEGIES] = {explicit_backward_data,
                                                                    implicit_backward_data};
static const conv_pass_fn conv_backward_weights_fn[CONV_STRATEGIES] = {
    explicit_backward_weights, implicit_backward_weights};

static st_status conv_forward(st_kernel *base, const st_kargs *a, st_error *err)
{
    return conv_run((cpe_kernel *)base, PASS_FWD, conv_forward_fn, a, a->training, err);
}

static st_status conv_backward_data(st_kernel *base, const st_kargs *a, st_error *err)
{
    if (!a->diff_src)
        return ST_OK;
    return conv_run((cpe_kernel *)base, PASS_BWD_DATA, conv_backward_data_fn, a, 1, err);
}

static st_status conv_backward_weights(st_kernel *base, const st_kargs *a, st_error *err)
{
    return conv_run((cpe_kernel *)base, PASS_BWD_WEIGHTS, conv_backward_weights_fn, a, 1, err);
}

static const st_kernel_ops conv_ops = {conv_forward, conv_backward_data, conv_backward_weights,
                                       cpe_kernel_destroy};

/* The descriptor, geometry, strategies and output layout record. */
static st_status conv_setup(cpe_kernel *k, const st_kdesc *d, st_error *err)
{
    (void)err;
    k->conv = *(const st_conv_desc *)d;
    snprintf(k->what, sizeof k->what, "conv %dx%d/%d %d->%d %dx%d", k->conv.kh, k->conv.kw,
             k->conv.sh, k->conv.ic, k->conv.oc, k->conv.oh, k->conv.ow);
    cpe_input_shape(k, k->conv.ic, k->conv.ih, k->conv.iw);
    k->geom = conv_geom(&k->conv);
    k->base_n = d->n;
    conv_strategies(k, d->n);
    k->own = (cpe_layout_state){ST_CPE_NCHW, ST_CPE_NCHW, k->conv.oc, k->conv.oh, k->conv.ow};
    if (!d->dst_plain)
        k->base.dst_layout = &k->own;
    return ST_OK;
}

const cpe_kind cpe_kind_conv = {&conv_ops, "CPEs", conv_setup};
