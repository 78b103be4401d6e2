/* oneDNN's elementwise kernels: the activation layer's (forward and
 * backward on the output; its passes are the data ones, dnnl_kernel.c) and
 * softmax (forward only, after the temperature's scaling). */
#include "dnnl_internal.h"

/* Activations run forward and backward on the output (use_dst algorithms). */
static st_status act_build(dn_kernel *k, dn_variant *v, int first, st_error *err)
{
    const st_act_desc *d = &k->d.act;
    st_bctx *c = k->ctx;
    if (d->base.dst_plain && d->base.src_layout)
        return st_fail(err, ST_EINTERNAL, "activation kernels keep their input's layout");
    dnnl_memory_desc_t usrc;
    st_status st = dn_user_src_md(k, v->n, &usrc, err);
    if (st != ST_OK)
        return st;
    float alpha;
    dnnl_alg_kind_t alg = dn_act_alg(d->act, &alpha, 1);
    if (alg == dnnl_alg_kind_undef)
        return st_fail(err, ST_EINTERNAL, "no oneDNN kernel for a linear activation");
    dnnl_eltwise_desc_t fd, bd;
    DN(dnnl_eltwise_forward_desc_init(&fd, dnnl_forward_training, alg, &usrc, alpha, 0.0f),
       "eltwise forward descriptor");
    DN(dnnl_eltwise_backward_desc_init(&bd, alg, &usrc, &usrc, alpha, 0.0f),
       "eltwise backward descriptor");
    dnnl_primitive_desc_t fpd = NULL, bpd = NULL;
    st = dn_make_pd(c, &fpd, &fd, NULL, 0, 0, "eltwise forward", err);
    if (st == ST_OK)
        st = dn_make_pd(c, &bpd, &bd, fpd, 0, 0, "eltwise backward", err);
    dn_pass_pds pds = {fpd, bpd, NULL};
    return dn_finish_build(k, v, st, &pds, &usrc, &usrc, &usrc, first, err);
}

const dn_kind dn_kind_act = {act_build, {dn_data_forward, dn_data_backward, NULL,
                                         dn_kernel_destroy}};

/* ---- softmax ---- */

static st_status softmax_build(dn_kernel *k, dn_variant *v, int first, st_error *err)
{
    const st_softmax_desc *d = &k->d.softmax;
    st_bctx *c = k->ctx;
    if (d->base.src_layout)
        return st_fail(err, ST_EINTERNAL, "softmax expects a plain input");
    dnnl_dims_t dims;
    dn_src_dims(&k->d, v->n, dims);
    dnnl_memory_desc_t md;
    st_status st = dn_md_plain(&md, 2, dims, err);
    if (st != ST_OK)
        return st;
    dnnl_softmax_v2_desc_t sd;
    DN(dnnl_softmax_v2_forward_desc_init(&sd, dnnl_forward_inference, dnnl_softmax_accurate, &md,
                                         &md, 1), "softmax descriptor");
    dnnl_primitive_desc_t spd = NULL;
    st = dn_make_pd(c, &spd, &sd, NULL, 0, 0, "softmax", err);
    if (st == ST_OK && d->temperature != 1.0f)
        st = dn_post_build(k, v, dnnl_eltwise_linear, 1.0f / d->temperature, &md,
                           "softmax temperature", err);
    dn_pass_pds pds = {spd, NULL, NULL};
    return dn_finish_build(k, v, st, &pds, &md, &md, &md, first, err);
}

static st_status softmax_forward(st_kernel *base, const st_kargs *a, st_error *err)
{
    dn_kernel *k = (dn_kernel *)base;
    dn_variant *v = dn_variant_of(k, a->n, err);
    if (!v)
        return ST_EINTERNAL;
    /* The temperature's scaling, when there is one, into dst first. */
    st_status st = dn_post_run(k, v, a->src, a->dst, a->scratch, err);
    const dn_arg args[] = {{DNNL_ARG_SRC, v->post.prim ? a->dst : a->src}, {DNNL_ARG_DST, a->dst}};
    if (st == ST_OK)
        st = dn_exec_call(k->ctx, &v->fwd, args, N_OF(args), a->scratch, err);
    return st;
}

static st_status no_backward(st_kernel *base, const st_kargs *a, st_error *err)
{
    (void)a;
    return st_fail(err, ST_EINTERNAL, "oneDNN kernel kind %d has no backward pass", base->kind);
}

const dn_kind dn_kind_softmax = {softmax_build, {softmax_forward, no_backward, NULL,
                                                 dn_kernel_destroy}};
