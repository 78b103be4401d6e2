/* What the `cpe` backend's kernel kinds share (cpe_backend_internal.h),
 * for cpe_conv.c, cpe_kernels.c, the layouts at their edges
 * (cpe_layouts.c) and cpe_backend.c's kernel creation: the context's
 * scratch buffers, a kernel's per-sample input shape, and its release.
 * Below them all, so that the backend's files call one way. */
#include <stdlib.h>

#include "cpe_backend_internal.h"
#include "base/memory.h"

st_status cpe_scratch(st_bctx *ctx, int which, size_t floats, float **out, st_error *err)
{
    if (ctx->scratch_floats[which] < floats) {
        st_free_aligned(ctx->scratch[which]);
        ctx->scratch[which] = NULL;
        ctx->scratch_floats[which] = 0;
        ctx->scratch[which] = st_alloc_aligned(floats * sizeof(float), "cpe backend scratch", err);
        if (!ctx->scratch[which])
            return ST_ENOMEM;
        ctx->scratch_floats[which] = floats;
    }
    *out = ctx->scratch[which];
    return ST_OK;
}

void cpe_input_shape(cpe_kernel *k, int c, int h, int w)
{
    if (k->src_state) {
        c = k->src_state->c;
        h = k->src_state->h;
        w = k->src_state->w;
    }
    k->in_c = c;
    k->in_h = h;
    k->in_w = w;
}

void cpe_kernel_destroy(st_kernel *base)
{
    cpe_kernel *k = (cpe_kernel *)base;
    if (k->mpe)
        k->mpe->ops->destroy(k->mpe);
    free(k);
}
