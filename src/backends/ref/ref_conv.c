/* Reference convolution: im2col + GEMM per sample and group (Darknet's and
 * Caffe's method), with col2im for the data gradient.
 *
 * Per group g with K = ic/groups * kh * kw and P = oh * ow:
 *   forward          dst_g [oc/g, P]  = W_g [oc/g, K] * col_g [K, P]
 *   backward_data    dcol_g [K, P]    = W_g^T * ddst_g, then col2im
 *   backward_weights dW_g [oc/g, K]  += ddst_g * col_g^T, dbias += sum_P ddst
 *
 * In bf16 (ref_kernel.precision, ops/bf16.h) each pass reads its two GEMM
 * operands rounded to bf16 (forward: col and W; backward-data: W and ddst;
 * backward-weights: ddst and col) into the scratch, and the GEMM sums their
 * products in fp32: a product of two bf16 values is exact in fp32, so this
 * is the arithmetic of oneDNN's bf16 convolution (vdpbf16ps). Rounding
 * commutes with im2col (its padding zeros are exact), so col is rounded
 * after it; the weights given in bf16 (st_kargs.weights_bf16) are read
 * from there, the same values. dst, diff_src and diff_weights stay fp32 in
 * memory: the next layer rounds its own operands when it reads them. The
 * bias and its gradient are fp32 sums, with no product to round. */
#include <stdlib.h>
#include <string.h>

#include "ref_internal.h"

/* 1x1, stride 1, no padding: the input is its own col. */
static int conv_direct(const st_conv_desc *d)
{
    return d->kh == 1 && d->kw == 1 && d->sh == 1 && d->sw == 1 && d->ph == 0 && d->pw == 0 &&
           d->oh == d->ih && d->ow == d->iw;
}

/* col [ic_g * kh * kw, oh * ow] from src [ic_g, ih, iw]. */
static void im2col(const st_conv_desc *d, int ic_g, const float *src, float *col)
{
    int P = d->oh * d->ow;
    for (int c = 0; c < ic_g; c++)
        for (int ki = 0; ki < d->kh; ki++)
            for (int kj = 0; kj < d->kw; kj++) {
                float *row = col + ((long)(c * d->kh + ki) * d->kw + kj) * P;
                const float *plane = src + (long)c * d->ih * d->iw;
                for (int oy = 0; oy < d->oh; oy++) {
                    int y = oy * d->sh - d->ph + ki;
                    float *out = row + oy * d->ow;
                    if (y < 0 || y >= d->ih) {
                        memset(out, 0, (size_t)d->ow * sizeof *out);
                        continue;
                    }
                    for (int ox = 0; ox < d->ow; ox++) {
                        int x = ox * d->sw - d->pw + kj;
                        out[ox] = (x >= 0 && x < d->iw) ? plane[y * d->iw + x] : 0.0f;
                    }
                }
            }
}

/* dsrc [ic_g, ih, iw] += col2im(dcol). */
static void col2im(const st_conv_desc *d, int ic_g, const float *dcol, float *dsrc)
{
    int P = d->oh * d->ow;
    for (int c = 0; c < ic_g; c++)
        for (int ki = 0; ki < d->kh; ki++)
            for (int kj = 0; kj < d->kw; kj++) {
                const float *row = dcol + ((long)(c * d->kh + ki) * d->kw + kj) * P;
                float *plane = dsrc + (long)c * d->ih * d->iw;
                for (int oy = 0; oy < d->oh; oy++) {
                    int y = oy * d->sh - d->ph + ki;
                    if (y < 0 || y >= d->ih)
                        continue;
                    for (int ox = 0; ox < d->ow; ox++) {
                        int x = ox * d->sw - d->pw + kj;
                        if (x >= 0 && x < d->iw)
                            plane[y * d->iw + x] += row[oy * d->ow + ox];
                    }
                }
            }
}

/* A pass's sizes: G groups of ic_g input and oc_g output channels, each
 * group's GEMM over K = ic_g kh kw and P = oh ow; in_n and out_n, the
 * floats of one sample's src and dst. */
typedef struct conv_sizes {
    int G, ic_g, oc_g, K, P;
    long in_n, out_n;
} conv_sizes;

static conv_sizes conv_sizes_of(const st_conv_desc *d)
{
    conv_sizes z;
    z.G = d->groups;
    z.ic_g = d->ic / z.G;
    z.oc_g = d->oc / z.G;
    z.K = z.ic_g * d->kh * d->kw;
    z.P = d->oh * d->ow;
    z.in_n = (long)d->ic * d->ih * d->iw;
    z.out_n = (long)d->oc * z.P;
    return z;
}

/* A call's scratch: col [K, P], the column matrix (or, backward-data, its
 * gradient); in bf16 also the weights rounded [oc, K] and one group's
 * diff_dst rounded [oc_g, P]. */
typedef struct conv_scratch {
    float *col, *weights, *ddst;
} conv_scratch;

static int conv_bf16(const ref_kernel *k)
{
    return k->precision == ST_PRECISION_BF16;
}

static conv_scratch conv_scratch_of(const ref_kernel *k, const st_kargs *a)
{
    conv_sizes z = conv_sizes_of(&k->d.conv);
    float *s = a->scratch;
    conv_scratch c = {s, NULL, NULL};
    if (conv_bf16(k)) {
        c.weights = s + (size_t)z.K * z.P;
        c.ddst = c.weights + (size_t)k->d.conv.oc * z.K;
    }
    return c;
}

/* The col matrix of group g of sample n: the input itself for direct
 * (1x1, stride 1, unpadded) convolutions in fp32, else im2col into
 * s->col; in bf16, rounded. */
static const float *conv_col(const ref_kernel *k, const st_kargs *a, const conv_scratch *s,
                             int n, int g)
{
    const st_conv_desc *d = &k->d.conv;
    conv_sizes z = conv_sizes_of(d);
    const float *src = a->src + ((long)n * d->ic + (long)g * z.ic_g) * d->ih * d->iw;
    if (conv_direct(d) && !conv_bf16(k))
        return src;
    if (conv_direct(d)) { /* col is src [ic_g, ih * iw] */
        st_bf16_round(s->col, src, (size_t)z.K * z.P);
        return s->col;
    }
    im2col(d, z.ic_g, src, s->col);
    if (conv_bf16(k))
        st_bf16_round(s->col, s->col, (size_t)z.K * z.P);
    return s->col;
}

/* The weights [oc, K] as the GEMMs read them: in bf16, rounded into
 * s->weights (ref_bf16_weights). */
static const float *conv_weights(const ref_kernel *k, const st_kargs *a, const conv_scratch *s)
{
    if (!conv_bf16(k))
        return a->weights;
    conv_sizes z = conv_sizes_of(&k->d.conv);
    ref_bf16_weights(s->weights, a, (size_t)k->d.conv.oc * z.K);
    return s->weights;
}

/* Group g of sample n's diff_dst [oc_g, P] as the GEMMs read it: rounded
 * into s->ddst in bf16. */
static const float *conv_ddst(const ref_kernel *k, const st_kargs *a, const conv_scratch *s,
                              int n, int g)
{
    conv_sizes z = conv_sizes_of(&k->d.conv);
    const float *ddst = a->diff_dst + n * z.out_n + (long)g * z.oc_g * z.P;
    if (!conv_bf16(k))
        return ddst;
    st_bf16_round(s->ddst, ddst, (size_t)z.oc_g * z.P);
    return s->ddst;
}

static st_status conv_forward(st_kernel *k, const st_kargs *a, st_error *err)
{
    (void)err;
    const ref_kernel *rk = (const ref_kernel *)k;
    const st_conv_desc *d = &rk->d.conv;
    conv_sizes z = conv_sizes_of(d);
    conv_scratch sc = conv_scratch_of(rk, a);
    const float *w = conv_weights(rk, a, &sc);
    for (int n = 0; n < a->n; n++)
        for (int g = 0; g < z.G; g++)
            ref_gemm(0, 0, z.oc_g, z.P, z.K, 1.0f, w + (long)g * z.oc_g * z.K, z.K,
                     conv_col(rk, a, &sc, n, g), z.P, 0.0f,
                     a->dst + n * z.out_n + (long)g * z.oc_g * z.P, z.P);
    for (int n = 0; n < a->n; n++) {
        float *out = a->dst + n * z.out_n;
        if (d->bias)
            for (int o = 0; o < d->oc; o++)
                for (int p = 0; p < z.P; p++)
                    out[(long)o * z.P + p] += a->bias[o];
        st_act_forward(d->act, out, (size_t)z.out_n);
    }
    return ST_OK;
}

static st_status conv_backward_data(st_kernel *k, const st_kargs *a, st_error *err)
{
    (void)err;
    const ref_kernel *rk = (const ref_kernel *)k;
    const st_conv_desc *d = &rk->d.conv;
    conv_sizes z = conv_sizes_of(d);
    conv_scratch sc = conv_scratch_of(rk, a);
    const float *weights = conv_weights(rk, a, &sc);
    if (!a->accumulate)
        memset(a->diff_src, 0, (size_t)(a->n * z.in_n) * sizeof(float));
    for (int n = 0; n < a->n; n++)
        for (int g = 0; g < z.G; g++) {
            float *dsrc = a->diff_src + n * z.in_n + (long)g * z.ic_g * d->ih * d->iw;
            const float *ddst = conv_ddst(rk, a, &sc, n, g);
            const float *w = weights + (long)g * z.oc_g * z.K;
            if (conv_direct(d)) {
                ref_gemm(1, 0, z.K, z.P, z.oc_g, 1.0f, w, z.K, ddst, z.P, 1.0f, dsrc, z.P);
                continue;
            }
            ref_gemm(1, 0, z.K, z.P, z.oc_g, 1.0f, w, z.K, ddst, z.P, 0.0f, sc.col, z.P);
            col2im(d, z.ic_g, sc.col, dsrc);
        }
    return ST_OK;
}

static st_status conv_backward_weights(st_kernel *k, const st_kargs *a, st_error *err)
{
    (void)err;
    const ref_kernel *rk = (const ref_kernel *)k;
    const st_conv_desc *d = &rk->d.conv;
    conv_sizes z = conv_sizes_of(d);
    conv_scratch sc = conv_scratch_of(rk, a);
    memset(a->diff_weights, 0, (size_t)d->oc * z.K * sizeof(float));
    for (int n = 0; n < a->n; n++)
        for (int g = 0; g < z.G; g++)
            ref_gemm(0, 1, z.oc_g, z.K, z.P, 1.0f, conv_ddst(rk, a, &sc, n, g), z.P,
                     conv_col(rk, a, &sc, n, g), z.P, 1.0f,
                     a->diff_weights + (long)g * z.oc_g * z.K, z.K);
    if (d->bias) {
        for (int o = 0; o < d->oc; o++) {
            float s = 0.0f;
            for (int n = 0; n < a->n; n++)
                for (int p = 0; p < z.P; p++)
                    s += a->diff_dst[n * z.out_n + (long)o * z.P + p];
            a->diff_bias[o] = s;
        }
    }
    return ST_OK;
}

/* conv_scratch: the direct path (1x1, stride 1, no padding) in fp32 needs
 * no column buffer; bf16 needs one always, and the rounded weights and
 * diff_dst. */
static void conv_setup(ref_kernel *k)
{
    conv_sizes z = conv_sizes_of(&k->d.conv);
    size_t floats = conv_direct(&k->d.conv) && !conv_bf16(k) ? 0 : (size_t)z.K * z.P;
    if (conv_bf16(k))
        floats += (size_t)k->d.conv.oc * z.K + (size_t)z.oc_g * z.P;
    k->base.scratch_bytes = floats * sizeof(float);
}

const ref_kind ref_kind_conv = {
    {conv_forward, conv_backward_data, conv_backward_weights, ref_kernel_free}, conv_setup};
