/* The reference backend's entry points: context and kernel dispatch. */
#include <stdlib.h>

#include "ref_internal.h"

struct st_bctx {
    int worker;
};

static st_status ref_ctx_create(const st_backend_opts *o, st_bctx **ctx, st_error *err)
{
    st_bctx *c = st_calloc(1, sizeof *c, "reference backend context", err);
    if (!c)
        return ST_ENOMEM;
    c->worker = o->worker;
    *ctx = c;
    return ST_OK;
}

static void ref_ctx_destroy(st_bctx *ctx)
{
    free(ctx);
}

static st_status ref_kernel_create(st_bctx *ctx, const st_kdesc *d, st_kernel **k,
                                   st_error *err)
{
    (void)ctx;
    if (d->src_layout)
        return st_fail(err, ST_EINTERNAL, "reference backend: input in a foreign layout");
    switch (d->kind) {
    case ST_K_CONV: return ref_conv_create((const st_conv_desc *)d, k, err);
    case ST_K_FC: return ref_fc_create((const st_fc_desc *)d, k, err);
    case ST_K_POOL: return ref_pool_create((const st_pool_desc *)d, k, err);
    case ST_K_BNORM: return ref_bnorm_create((const st_bnorm_desc *)d, k, err);
    case ST_K_LRN: return ref_lrn_create((const st_lrn_desc *)d, k, err);
    case ST_K_ACT: return ref_act_create((const st_act_desc *)d, k, err);
    case ST_K_SOFTMAX: return ref_softmax_create((const st_softmax_desc *)d, k, err);
    }
    return st_fail(err, ST_EINTERNAL, "reference backend: unknown kernel kind %d", d->kind);
}

st_status ref_no_backward(st_kernel *k, const st_kargs *a, st_error *err)
{
    (void)a;
    return st_fail(err, ST_EINTERNAL, "reference backend: kernel kind %d has no backward pass",
                   k->kind);
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

void ref_kernel_free(st_kernel *k)
{
    free(k);
}

const st_backend st_backend_ref = {
    .name = "ref",
    .ctx_create = ref_ctx_create,
    .ctx_destroy = ref_ctx_destroy,
    .kernel_create = ref_kernel_create,
};
