/* oneDNN pooling (max, and average without the padding): its primitives,
 * whose workspace (the max's positions) lasts from forward to backward; its
 * passes are the data ones (dnnl_kernel.c). */
#include "dnnl_internal.h"

static st_status pool_build(dn_kernel *k, dn_variant *v, int first, st_error *err)
{
    const st_pool_desc *d = &k->d.pool;
    st_bctx *c = k->ctx;
    int n = v->n;
    dnnl_dims_t dd, strides = {d->sh, d->sw}, kernel = {d->kh, d->kw};
    dnnl_dims_t dilation = {0, 0}, pl = {d->ph, d->pw};
    dnnl_dims_t pr = {(dnnl_dim_t)(d->oh - 1) * d->sh + d->kh - d->ih - d->ph,
                        (dnnl_dim_t)(d->ow - 1) * d->sw + d->kw - d->iw - d->pw};
    dn_dst_dims(&k->d, n, dd);
    dnnl_memory_desc_t usrc, dst;
    st_status st = dn_user_src_md(k, n, &usrc, err);
    if (st == ST_OK)
        st = first ? dn_md_any(&dst, 4, dd, err) : ST_OK;
    if (st != ST_OK)
        return st;
    if (!first)
        dst = dn_md_for_n(&k->pdst, n);
    dnnl_alg_kind_t alg = d->alg == ST_POOL_MAX ? dnnl_pooling_max
                                                : dnnl_pooling_avg_exclude_padding;
    dnnl_pooling_v2_desc_t fd, bd;
    DN(dnnl_pooling_v2_forward_desc_init(&fd, dnnl_forward_training, alg, &usrc, &dst, strides,
                                         kernel, dilation, pl, pr), "pooling forward descriptor");
    dnnl_primitive_desc_t fpd = NULL, bpd = NULL;
    st = dn_make_pd(c, &fpd, &fd, NULL, 0, 0, "pooling forward", err);
    if (st == ST_OK) {
        dst = *dn_pd_md(fpd, DNNL_ARG_DST);
        dnnl_status_t s = dnnl_pooling_v2_backward_desc_init(&bd, alg, &usrc, &dst, strides,
                                                             kernel, dilation, pl, pr);
        st = s == dnnl_success ? dn_make_pd(c, &bpd, &bd, fpd, 0, 0, "pooling backward", err)
                               : dn_fail(err, "pooling backward descriptor", s);
    }
    if (st == ST_OK)
        st = dn_take_prim_workspace(k, fpd, first, err);
    dn_pass_pds pds = {fpd, bpd, NULL};
    return dn_finish_build(k, v, st, &pds, &usrc, &usrc, &dst, first, err);
}

const dn_kind dn_kind_pool = {pool_build, {dn_data_forward, dn_data_backward, NULL,
                                           dn_kernel_destroy}};
