/* Reference activation and softmax kernels. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ref_internal.h"

typedef struct ref_act {
    st_kernel base;
    st_act_desc d;
} ref_act;

static st_status act_forward(st_kernel *k, const st_kargs *a, st_error *err)
{
    (void)err;
    const st_act_desc *d = &((const ref_act *)k)->d;
    size_t count = (size_t)a->n * d->count;
    if (a->dst != a->src)
        memcpy(a->dst, a->src, count * sizeof(float));
    st_act_forward(d->act, a->dst, count);
    return ST_OK;
}

static st_status act_backward_data(st_kernel *k, const st_kargs *a, st_error *err)
{
    (void)err;
    const st_act_desc *d = &((const ref_act *)k)->d;
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

static const st_kernel_ops ref_act_ops = {
    .forward = act_forward,
    .backward_data = act_backward_data,
    .backward_weights = NULL,
    .destroy = ref_kernel_free,
};

st_status ref_act_create(const st_act_desc *d, st_kernel **k, st_error *err)
{
    ref_act *r = ref_kernel_new(sizeof *r, &ref_act_ops, &d->base, err);
    if (!r)
        return ST_ENOMEM;
    r->d = *d;
    *k = &r->base;
    return ST_OK;
}

typedef struct ref_softmax {
    st_kernel base;
    st_softmax_desc d;
} ref_softmax;

static st_status softmax_forward(st_kernel *k, const st_kargs *a, st_error *err)
{
    (void)err;
    const st_softmax_desc *d = &((const ref_softmax *)k)->d;
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

static const st_kernel_ops ref_softmax_ops = {
    .forward = softmax_forward,
    .backward_data = ref_no_backward,
    .backward_weights = NULL,
    .destroy = ref_kernel_free,
};

st_status ref_softmax_create(const st_softmax_desc *d, st_kernel **k, st_error *err)
{
    ref_softmax *s = ref_kernel_new(sizeof *s, &ref_softmax_ops, &d->base, err);
    if (!s)
        return ST_ENOMEM;
    s->d = *d;
    *k = &s->base;
    return ST_OK;
}
