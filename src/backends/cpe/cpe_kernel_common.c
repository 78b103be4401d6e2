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

st_status cpe_charge_streams(st_bctx *ctx, cpe_work *w, int pass, const st_stream_work *s, int n,
                             int training, int *on_cpes, st_error *err)
{
    st_status st = ST_OK;
    for (int i = 0; st == ST_OK && i < s->groups; i++) {
        int whole = s->group[i].runs <= 0.0;
        size_t values = s->group[i].values * (whole ? (size_t)n : 1);
        double runs = whole ? 1.0 : s->group[i].runs * n, streams = s->group[i].streams;
        if (values < CPE_LAUNCH_MIN_FLOATS) {
            if (training)
                w->now[pass].mpe_s += st_cpe_mpe_seconds(st_cpe_cluster_cost_params(ctx->cg), 0.0,
                                                         runs * (double)values * streams * 4.0);
            continue;
        }
        float *tmp;
        st_cpe_counters c;
        st = cpe_scratch(ctx, SCRATCH_OUT2, 2 * values, &tmp, err);
        if (st == ST_OK)
            st = st_cpe_act_forward(ctx->cg, ST_ACT_LINEAR, values, tmp, tmp + values, &c, err);
        if (st == ST_OK) {
            double launch = c.time.launch_s;
            st_cpe_counters_scale_time(&c, runs * streams / 2.0);
            c.time.total_s += runs * launch - c.time.launch_s;
            c.time.launch_s = runs * launch;
            c.launches = (uint64_t)(runs + 0.5);
            if (on_cpes)
                *on_cpes = 1;
        }
        st = cpe_charge(w, pass, &c, training, st);
    }
    return st;
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
