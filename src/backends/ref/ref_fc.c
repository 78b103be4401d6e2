/* Reference inner product: GEMM with weights [out, in].
 *   forward          dst [n, out] = src [n, in] * W^T + bias
 *   backward_data    dsrc [n, in] = ddst [n, out] * W
 *   backward_weights dW [out, in] = ddst^T * src, dbias = sum_n ddst
 *
 * In bf16 (ref_kernel.precision, ops/bf16.h) each GEMM reads its two
 * operands rounded to bf16 (forward: src and W; backward-data: ddst and W;
 * backward-weights: ddst and src) from the scratch and sums their products
 * in fp32, the arithmetic of oneDNN's bf16 inner product (vdpbf16ps; the
 * products are exact in fp32); the weights given in bf16
 * (st_kargs.weights_bf16) are read from there, the same values. dst,
 * diff_src and diff_weights stay fp32 in memory: the next layer rounds its
 * own operands when it reads them. The bias and its gradient are fp32
 * sums, with no product to round. */
#include <stdlib.h>

#include "ref_internal.h"

static int fc_bf16(const ref_kernel *k)
{
    return k->precision == ST_PRECISION_BF16;
}

/* The operand p [count] as the GEMM reads it: itself in fp32, else rounded
 * to bf16 into the scratch at *at [count], *at moving past it. */
static const float *fc_operand(const ref_kernel *k, const float *p, size_t count, float **at)
{
    if (!fc_bf16(k))
        return p;
    float *r = *at;
    st_bf16_round(r, p, count);
    *at += count;
    return r;
}

/* The weights [out, in] as the GEMM reads them: fc_operand's, from the
 * bf16 copy when it is given (ref_bf16_weights). */
static const float *fc_weights(const ref_kernel *k, const st_kargs *a, float **at)
{
    if (!fc_bf16(k))
        return a->weights;
    const st_fc_desc *d = &k->d.fc;
    float *r = *at;
    ref_bf16_weights(r, a, (size_t)d->out * d->in);
    *at += (size_t)d->out * d->in;
    return r;
}

static st_status fc_forward(st_kernel *k, const st_kargs *a, st_error *err)
{
    (void)err;
    const ref_kernel *rk = (const ref_kernel *)k;
    const st_fc_desc *d = &rk->d.fc;
    float *at = a->scratch;
    const float *src = fc_operand(rk, a->src, (size_t)a->n * d->in, &at);
    const float *w = fc_weights(rk, a, &at);
    ref_gemm(0, 1, a->n, d->out, d->in, 1.0f, src, d->in, w, d->in, 0.0f, a->dst, d->out);
    for (int n = 0; n < a->n; n++) {
        float *y = a->dst + (long)n * d->out;
        if (d->bias)
            for (int o = 0; o < d->out; o++)
                y[o] += a->bias[o];
        st_act_forward(d->act, y, (size_t)d->out);
    }
    return ST_OK;
}

static st_status fc_backward_data(st_kernel *k, const st_kargs *a, st_error *err)
{
    (void)err;
    const ref_kernel *rk = (const ref_kernel *)k;
    const st_fc_desc *d = &rk->d.fc;
    float *at = a->scratch;
    const float *ddst = fc_operand(rk, a->diff_dst, (size_t)a->n * d->out, &at);
    const float *w = fc_weights(rk, a, &at);
    ref_gemm(0, 0, a->n, d->in, d->out, 1.0f, ddst, d->out, w, d->in,
             a->accumulate ? 1.0f : 0.0f, a->diff_src, d->in);
    return ST_OK;
}

static st_status fc_backward_weights(st_kernel *k, const st_kargs *a, st_error *err)
{
    (void)err;
    const ref_kernel *rk = (const ref_kernel *)k;
    const st_fc_desc *d = &rk->d.fc;
    float *at = a->scratch;
    const float *ddst = fc_operand(rk, a->diff_dst, (size_t)a->n * d->out, &at);
    const float *src = fc_operand(rk, a->src, (size_t)a->n * d->in, &at);
    ref_gemm(1, 0, d->out, d->in, a->n, 1.0f, ddst, d->out, src, d->in, 0.0f,
             a->diff_weights, d->in);
    if (d->bias)
        for (int o = 0; o < d->out; o++) {
            float s = 0.0f;
            for (int n = 0; n < a->n; n++)
                s += a->diff_dst[(long)n * d->out + o];
            a->diff_bias[o] = s;
        }
    return ST_OK;
}

/* bf16: the scratch holds the two rounded operands of the largest pass,
 * of n src [n, in], diff_dst [n, out] and the weights [out, in]. */
static void fc_setup(ref_kernel *k)
{
    if (!fc_bf16(k))
        return;
    const st_fc_desc *d = &k->d.fc;
    size_t n = (size_t)d->base.n, src = n * d->in, ddst = n * d->out, w = (size_t)d->out * d->in;
    size_t fwd = src + w, bwd_data = ddst + w, bwd_weights = ddst + src;
    size_t most = fwd > bwd_data ? fwd : bwd_data;
    k->base.scratch_bytes = (most > bwd_weights ? most : bwd_weights) * sizeof(float);
}

const ref_kind ref_kind_fc = {
    {fc_forward, fc_backward_data, fc_backward_weights, ref_kernel_free}, fc_setup};
