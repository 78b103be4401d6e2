/* The reference backend's entry points: context and kernel dispatch. */
#include <stdlib.h>
#include <string.h>

#include "ref_internal.h"

struct st_bctx {
    int worker;
    st_precision precision; /* st_backend_opts.precision, every kernel's */
};

static st_status ref_ctx_create(const st_backend_opts *o, st_bctx **ctx, st_error *err)
{
    st_bctx *c = st_calloc(1, sizeof *c, "reference backend context", err);
    if (!c)
        return ST_ENOMEM;
    c->worker = o->worker;
    c->precision = o->precision;
    *ctx = c;
    return ST_OK;
}

/* Every precision: bf16 is plain C here (ops/bf16.h), the oracle of the
 * other backends' bf16 kernels. */
static int ref_precision_supported(st_precision p, char *why, size_t size)
{
    (void)p;
    (void)why;
    (void)size;
    return 1;
}

static void ref_ctx_destroy(st_bctx *ctx)
{
    free(ctx);
}

/* The kinds, indexed by st_kind. */
static const ref_kind *const kinds[ST_K_COUNT] = {
#define REF_KIND_ENTRY(kind, stem, name) [kind] = &ref_kind_##stem,
    ST_KINDS(REF_KIND_ENTRY)
#undef REF_KIND_ENTRY
};

static st_status ref_kernel_create(st_bctx *ctx, const st_kdesc *d, st_kernel **out,
                                   st_error *err)
{
    if (d->src_layout)
        return st_fail(err, ST_EINTERNAL, "reference backend: input in a foreign layout");
    if ((unsigned)d->kind >= ST_K_COUNT)
        return st_fail(err, ST_EINTERNAL, "reference backend: no kernel kind %d", (int)d->kind);
    const ref_kind *kind = kinds[d->kind];
    ref_kernel *k = ref_kernel_new(sizeof *k, &kind->ops, d, err);
    if (!k)
        return ST_ENOMEM;
    memcpy(&k->d, d, st_kdesc_size(d->kind));
    k->precision = ctx ? ctx->precision : ST_PRECISION_FP32;
    k->kind_ops = &kind->ops;
    if (d->dst_bf16) {
        k->rounding_ops = kind->ops;
        k->rounding_ops.forward = ref_forward_bf16;
        k->base.ops = &k->rounding_ops;
    }
    if (kind->setup)
        kind->setup(k);
    *out = &k->base;
    return ST_OK;
}

const st_backend st_backend_ref = {
    .name = "ref",
    .precision_supported = ref_precision_supported,
    .ctx_create = ref_ctx_create,
    .ctx_destroy = ref_ctx_destroy,
    .kernel_create = ref_kernel_create,
};
