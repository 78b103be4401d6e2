/* What the reference backend's kernels share (ref_internal.h): a kernel's
 * allocation and release, the weights of a bf16 pass, the forward of a
 * dst kept in bf16, the failing backward of a forward-only kind. Below the
 * kernels' files and ref_backend.c's dispatch, so that ref/ calls one way. */
#include <stdlib.h>

#include "ref_internal.h"

st_status ref_no_backward(st_kernel *k, const st_kargs *a, st_error *err)
{
    (void)a;
    return st_fail(err, ST_EINTERNAL, "reference backend: a %s kernel has no backward pass",
                   st_kind_name(k->kind));
}

void *ref_kernel_new(size_t size, const st_kernel_ops *ops, const st_kdesc *d, st_error *err)
{
    st_kernel *k = st_calloc(1, size, "reference kernel", err);
    if (k) {
        k->ops = ops;
        k->kind = d->kind;
        k->dst_bytes = (size_t)d->n * st_kdesc_dst_values(d) * sizeof(float);
    }
    return k;
}

void ref_bf16_weights(float *dst, const st_kargs *a, size_t count)
{
    if (a->weights_bf16)
        st_bf16_widen(dst, a->weights_bf16, count);
    else
        st_bf16_round(dst, a->weights, count);
}

st_status ref_forward_bf16(st_kernel *base, const st_kargs *a, st_error *err)
{
    ref_kernel *k = (ref_kernel *)base;
    st_status st = k->kind_ops->forward(base, a, err);
    if (st == ST_OK)
        st_bf16_round(a->dst, a->dst, (size_t)a->n * st_kdesc_dst_values(&k->d.base));
    return st;
}

void ref_kernel_free(st_kernel *k)
{
    free(k);
}
