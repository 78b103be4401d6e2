/* oneDNN local response normalization across channels: its primitives,
 * with their workspace; its passes are the data ones (dnnl_kernel.c). */
#include "dnnl_internal.h"

static st_status lrn_build(dn_kernel *k, dn_variant *v, int first, st_error *err)
{
    const st_lrn_desc *d = &k->d.lrn;
    st_bctx *c = k->ctx;
    dnnl_memory_desc_t usrc;
    st_status st = dn_user_src_md(k, v->n, &usrc, err);
    if (st != ST_OK)
        return st;
    dnnl_lrn_desc_t fd, bd;
    DN(dnnl_lrn_forward_desc_init(&fd, dnnl_forward_training, dnnl_lrn_across_channels, &usrc,
                                  d->size, d->alpha, d->beta, d->k), "LRN forward descriptor");
    DN(dnnl_lrn_backward_desc_init(&bd, dnnl_lrn_across_channels, &usrc, &usrc, d->size,
                                   d->alpha, d->beta, d->k), "LRN backward descriptor");
    dnnl_primitive_desc_t fpd = NULL, bpd = NULL;
    st = dn_make_pd(c, &fpd, &fd, NULL, 0, 0, "LRN forward", err);
    if (st == ST_OK)
        st = dn_make_pd(c, &bpd, &bd, fpd, 0, 0, "LRN backward", err);
    if (st == ST_OK)
        st = dn_take_prim_workspace(k, fpd, first, err);
    dn_pass_pds pds = {fpd, bpd, NULL, NULL};
    return dn_finish_build(k, v, st, &pds, &usrc, &usrc, &usrc, first, err);
}

const dn_kind dn_kind_lrn = {lrn_build, {dn_data_forward, dn_data_backward, NULL,
                                         dn_kernel_destroy}};
