/* Reference activation and softmax kernels. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ref_internal.h"

static st_status act_forward(st_kernel *k, const st_kargs *a, st_error *err)
{
    (void)err;
    const st_act_desc *d = &((const ref_kernel *)k)->d.act;
    size_t count = (size_t)a->n * d->count;
    if (a->dst != a->src)
        memcpy(a->dst, a->src, count * sizeof(float));
    st_act_forward(d->act, a->dst, count);
    return ST_OK;
}

static st_status act_backward_data(st_kernel *k, const st_kargs *a, st_error *err)
{
    (void)err;
    const st_act_desc *d = &((const ref_kernel *)k)->d.act;
    size_t count = (size_t)a->n * d->count;
    if (!a->accumulate) {
        st_act_backward(d->act, a->dst, a->diff_dst, a->diff_src, count);
        return ST_OK;
    }
    for (size_t i = 0; i < count; i++) {
        float g;
        st_act_backward(d->act, a->dst + i, a->diff_dst + i, &g, 1);
        a->diff_src[i] += g;
    }
    return ST_OK;
}

const ref_kind ref_kind_act = {{act_forward, act_backward_data, NULL, ref_kernel_free}, NULL};

static st_status softmax_forward(st_kernel *k, const st_kargs *a, st_error *err)
{
    (void)err;
    const st_softmax_desc *d = &((const ref_kernel *)k)->d.softmax;
    int len = d->count / d->groups;
    for (long g = 0; g < (long)a->n * d->groups; g++) {
        const float *x = a->src + g * len;
        float *y = a->dst + g * len;
        float max = x[0];
        for (int i = 1; i < len; i++)
            max = x[i] > max ? x[i] : max;
        double sum = 0.0;
        for (int i = 0; i < len; i++) {
            y[i] = expf((x[i] - max) / d->temperature);
            sum += y[i];
        }
        for (int i = 0; i < len; i++)
            y[i] = (float)(y[i] / sum);
    }
    return ST_OK;
}

const ref_kind ref_kind_softmax = {{softmax_forward, ref_no_backward, NULL, ref_kernel_free}, NULL};
