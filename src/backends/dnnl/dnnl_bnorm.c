/* oneDNN batch normalization: training (batch statistics) and inference
 * (the running ones) forwards, the activation after it (a ReLU fused into
 * both passes), and one backward pass for the data, scale and shift
 * gradients. */
#include "dnnl_internal.h"

static const int BN_ARGS[] = {DNNL_ARG_SRC, DNNL_ARG_DST, DNNL_ARG_SCALE, DNNL_ARG_SHIFT,
                              DNNL_ARG_MEAN, DNNL_ARG_VARIANCE, DNNL_ARG_DIFF_DST,
                              DNNL_ARG_DIFF_SRC, DNNL_ARG_DIFF_SCALE, DNNL_ARG_DIFF_SHIFT,
                              DNNL_ARG_WORKSPACE, DNNL_ARG_SCRATCHPAD};

static st_status bn_build(dn_kernel *k, dn_variant *v, int first, st_error *err)
{
    const st_bnorm_desc *d = &k->d.bnorm;
    st_bctx *c = k->ctx;
    dnnl_memory_desc_t usrc;
    st_status st = dn_user_src_md(k, v->n, &usrc, err);
    if (st != ST_OK)
        return st;
    /* A ReLU after it is fused (dnnl_fuse_norm_relu): applied in forward,
     * its mask kept in the workspace and applied by backward, so that the
     * activation costs no passes of its own (kernel.act_in_backward) */
    int fuse_relu = d->act == ST_ACT_RELU;
    unsigned flags = dnnl_use_scale | dnnl_use_shift | (fuse_relu ? dnnl_fuse_norm_relu : 0);
    dnnl_batch_normalization_desc_t fd, id, bd;
    DN(dnnl_batch_normalization_forward_desc_init(&fd, dnnl_forward_training, &usrc, d->eps,
                                                  flags), "batch norm forward descriptor");
    DN(dnnl_batch_normalization_forward_desc_init(&id, dnnl_forward_inference, &usrc, d->eps,
                                                  flags | dnnl_use_global_stats),
       "batch norm inference descriptor");
    DN(dnnl_batch_normalization_backward_desc_init(&bd, dnnl_backward, &usrc, &usrc, d->eps,
                                                   flags), "batch norm backward descriptor");
    dnnl_primitive_desc_t fpd = NULL, ipd = NULL, bpd = NULL;
    st = dn_make_pd(c, &fpd, &fd, NULL, 0, 0, "batch norm forward", err);
    if (st == ST_OK)
        st = dn_make_pd(c, &ipd, &id, NULL, 0, 0, "batch norm inference", err);
    if (st == ST_OK)
        st = dn_make_pd(c, &bpd, &bd, fpd, 0, 0, "batch norm backward", err);
    float alpha;
    dnnl_alg_kind_t post = fuse_relu ? dnnl_alg_kind_undef : dn_act_alg(d->act, &alpha, 0);
    if (st == ST_OK && post != dnnl_alg_kind_undef)
        st = dn_post_build(k, v, post, alpha, &usrc, "batch norm activation", err);
    if (st == ST_OK && fuse_relu) {
        st = dn_take_prim_workspace(k, fpd, first, err);
        k->base.act_in_backward = 1;
    }
    if (st == ST_OK)
        st = dn_finish_exec(k, &v->fwd, fpd, BN_ARGS, N_OF(BN_ARGS), err);
    if (st == ST_OK)
        st = dn_finish_exec(k, &v->fwd_inf, ipd, BN_ARGS, N_OF(BN_ARGS), err);
    if (st == ST_OK)
        st = dn_finish_exec(k, &v->bwd_data, bpd, BN_ARGS, N_OF(BN_ARGS), err);
    if (st == ST_OK)
        st = dn_build_edges(k, v, &usrc, &usrc, &usrc, first, err);
    dnnl_primitive_desc_t pds[] = {fpd, ipd, bpd};
    for (int i = 0; i < N_OF(pds); i++)
        if (pds[i])
            dnnl_primitive_desc_destroy(pds[i]);
    return st;
}

static st_status bn_forward(st_kernel *base, const st_kargs *a, st_error *err)
{
    dn_kernel *k = (dn_kernel *)base;
    dn_variant *v = dn_variant_of(k, a->n, err);
    if (!v)
        return ST_EINTERNAL;
    dn_exec *e = a->training ? &v->fwd : &v->fwd_inf;
    void *dst = dn_fwd_dst(k, a);
    const dn_arg args[] = {{DNNL_ARG_SRC, a->src},      {DNNL_ARG_DST, dst},
                           {DNNL_ARG_SCALE, a->weights}, {DNNL_ARG_SHIFT, a->bias},
                           {DNNL_ARG_MEAN, a->mean},     {DNNL_ARG_VARIANCE, a->var},
                           {DNNL_ARG_WORKSPACE, dn_at(a->workspace, k->ws_prim)}};
    st_status st = dn_exec_call(k->ctx, e, args, N_OF(args), a->scratch, err);
    if (st == ST_OK)
        st = dn_post_run(k, v, dst, dst, a->scratch, err);
    return st == ST_OK ? dn_fwd_finish(k, v, a, err) : st;
}

/* Data, scale and shift gradients in one call. Without diff_src (the
 * network input's), the data gradient goes to the scratch temporary. */
static st_status bn_backward(st_kernel *base, const st_kargs *a, st_error *err)
{
    dn_kernel *k = (dn_kernel *)base;
    dn_variant *v = dn_variant_of(k, a->n, err);
    if (!v)
        return ST_EINTERNAL;
    if (!a->training)
        return st_fail(err, ST_EINTERNAL, "oneDNN batch norm backward needs batch statistics");
    st_kargs args = *a;
    if (!args.diff_src) {
        args.accumulate = 0;
        args.diff_src = (float *)((char *)a->scratch + (k->scratchpad + 63) / 64 * 64);
    }
    const void *ddst;
    st_status st = dn_bwd_ddst(k, v, &args, &ddst, err);
    const dn_arg bind[] = {{DNNL_ARG_SRC, args.src},
                           {DNNL_ARG_DIFF_DST, ddst},
                           {DNNL_ARG_SCALE, args.weights},
                           {DNNL_ARG_SHIFT, args.bias},
                           {DNNL_ARG_MEAN, args.mean},
                           {DNNL_ARG_VARIANCE, args.var},
                           {DNNL_ARG_DIFF_SRC, dn_bwd_dsrc(k, &args)},
                           {DNNL_ARG_DIFF_SCALE, args.diff_weights},
                           {DNNL_ARG_DIFF_SHIFT, args.diff_bias},
                           {DNNL_ARG_WORKSPACE, dn_at(args.workspace, k->ws_prim)}};
    if (st == ST_OK)
        st = dn_exec_call(k->ctx, &v->bwd_data, bind, N_OF(bind), args.scratch, err);
    if (st != ST_OK || !a->diff_src)
        return st;
    return dn_bwd_finish(k, v, &args, err);
}

const dn_kind dn_kind_bnorm = {bn_build, {bn_forward, bn_backward, NULL, dn_kernel_destroy}};
