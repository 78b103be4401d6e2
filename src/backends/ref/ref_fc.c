/* Reference inner product: GEMM with weights [out, in].
 *   forward          dst [n, out] = src [n, in] * W^T + bias
 *   backward_data    dsrc [n, in] = ddst [n, out] * W
 *   backward_weights dW [out, in] = ddst^T * src, dbias = sum_n ddst */
#include <stdlib.h>

#include "ref_internal.h"

static st_status fc_forward(st_kernel *k, const st_kargs *a, st_error *err)
{
    (void)err;
    const st_fc_desc *d = &((const ref_kernel *)k)->d.fc;
    ref_gemm(0, 1, a->n, d->out, d->in, 1.0f, a->src, d->in, a->weights, d->in, 0.0f, a->dst,
             d->out);
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
    const st_fc_desc *d = &((const ref_kernel *)k)->d.fc;
    ref_gemm(0, 0, a->n, d->in, d->out, 1.0f, a->diff_dst, d->out, a->weights, d->in,
             a->accumulate ? 1.0f : 0.0f, a->diff_src, d->in);
    return ST_OK;
}

static st_status fc_backward_weights(st_kernel *k, const st_kargs *a, st_error *err)
{
    (void)err;
    const st_fc_desc *d = &((const ref_kernel *)k)->d.fc;
    ref_gemm(1, 0, d->out, d->in, a->n, 1.0f, a->diff_dst, d->out, a->src, d->in, 0.0f,
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

const ref_kind ref_kind_fc = {
    {fc_forward, fc_backward_data, fc_backward_weights, ref_kernel_free}, NULL};
