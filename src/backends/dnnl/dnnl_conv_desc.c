/* oneDNN convolution descriptors and implementations, below both the
 * convolution kernel (dnnl_conv.c) and its measured choice
 * (dnnl_conv_measure.c), so that the two call one way: the layout
 * families and pass names, a kernel's geometry and each pass's op
 * descriptor, and the listing of oneDNN's implementations of a pass with
 * the pick of one by name. */
#include <stdio.h>
#include <string.h>

#include "dnnl_conv.h"

const char *const dn_family_names[DN_FAMILIES] = {"blocked", "nhwc", "nchw"};
const dnnl_format_tag_t dn_family_tags[DN_FAMILIES] = {dnnl_format_tag_any, dnnl_nhwc, dnnl_nchw};
const char *const dn_pass_names[DN_PASSES] = {"fwd", "bwd_data", "bwd_weights"};

/* ---- geometry and descriptors ---- */

void dn_conv_geom_init(const dn_kernel *k, int n, dn_conv_geom *g)
{
    const st_conv_desc *d = &k->d.conv;
    memset(g, 0, sizeof *g);
    g->wnd = d->groups == 1 ? 4 : 5;
    dnnl_dims_t wd = {d->oc, d->ic, d->kh, d->kw, 0};
    if (d->groups > 1) {
        wd[0] = d->groups; wd[1] = d->oc / d->groups; wd[2] = d->ic / d->groups;
        wd[3] = d->kh; wd[4] = d->kw;
    }
    memcpy(g->wd, wd, sizeof wd);
    g->bd[0] = d->oc;
    g->strides[0] = d->sh; g->strides[1] = d->sw;
    g->pl[0] = d->ph; g->pl[1] = d->pw;
    g->pr[0] = (dnnl_dim_t)(d->oh - 1) * d->sh + d->kh - d->ih - d->ph;
    g->pr[1] = (dnnl_dim_t)(d->ow - 1) * d->sw + d->kw - d->iw - d->pw;
    dn_src_dims(&k->d, n, g->sd);
    dn_dst_dims(&k->d, n, g->dd);
}

/* The layouts' types are the pass's: the operands each reads (src,
 * weights, diff_dst) in k->operand_dt, what it writes (dst, diff_src,
 * diff_weights) and the bias f32, but dst in bf16 where it is kept so
 * (st_kdesc.dst_bf16: the primitive rounds it after the activation). With
 * operands not f32, the weight gradient's pass has no bias: its sum is
 * fp32's (bias_grad_build). */
st_status dn_conv_op(const dn_kernel *k, const dn_conv_geom *g, int p,
                     const dnnl_memory_desc_t *src, const dnnl_memory_desc_t *wei,
                     const dnnl_memory_desc_t *dst, dnnl_convolution_desc_t *op, st_error *err)
{
    dnnl_memory_desc_t bias;
    st_status st = dn_md_plain(&bias, 1, g->bd, err);
    if (st != ST_OK)
        return st;
    dnnl_data_type_t in = k->operand_dt, out = dnnl_f32;
    const dnnl_memory_desc_t *b = k->d.conv.bias ? &bias : NULL;
    dnnl_status_t s;
    if (p == DN_PASS_FWD) {
        dnnl_memory_desc_t s_in = dn_md_as(src, in), w_in = dn_md_as(wei, in),
                           d_out = dn_md_as(dst, k->d.base.dst_bf16 ? dnnl_bf16 : out);
        s = dnnl_convolution_forward_desc_init(op, dnnl_forward_training,
                                               dnnl_convolution_direct, &s_in, &w_in, b, &d_out,
                                               g->strides, g->pl, g->pr);
    } else if (p == DN_PASS_BWD_DATA) {
        dnnl_memory_desc_t ds_out = dn_md_as(src, out), w_in = dn_md_as(wei, in),
                           dd_in = dn_md_as(dst, in);
        s = dnnl_convolution_backward_data_desc_init(op, dnnl_convolution_direct, &ds_out,
                                                     &w_in, &dd_in, g->strides, g->pl, g->pr);
    } else {
        dnnl_memory_desc_t s_in = dn_md_as(src, in), dw_out = dn_md_as(wei, out),
                           dd_in = dn_md_as(dst, in);
        s = dnnl_convolution_backward_weights_desc_init(op, dnnl_convolution_direct, &s_in,
                                                        &dw_out, in == dnnl_f32 ? b : NULL,
                                                        &dd_in, g->strides, g->pl, g->pr);
    }
    if (s != dnnl_success)
        return dn_fail(err, "convolution descriptor", s);
    return ST_OK;
}

st_status dn_md_tag(dnnl_memory_desc_t *md, const dnnl_dims_t dims, dnnl_format_tag_t tag,
                    st_error *err)
{
    DN(dnnl_memory_desc_init_by_tag(md, 4, dims, dnnl_f32, tag), "convolution activation md");
    return ST_OK;
}

const char *dn_pd_impl_name(const_dnnl_primitive_desc_t pd)
{
    const char *name = NULL;
    if (dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &name) != dnnl_success ||
        !name)
        return "?";
    return name;
}

int dn_impl_is_ref(const char *name)
{
    return strncmp(name, "ref", 3) == 0;
}

int dn_impl_is_gemm(const char *name)
{
    return strstr(name, "gemm") && !strstr(name, "brg");
}

st_status dn_impls_visit(st_bctx *c, const dnnl_convolution_desc_t *op,
                         const_dnnl_primitive_desc_t hint, int post, float alpha,
                         dn_impl_visit visit, void *ctx, st_error *err)
{
    dnnl_primitive_attr_t attr;
    st_status st = dn_make_attr(&attr, post, alpha, err);
    if (st != ST_OK)
        return st;
    dnnl_primitive_desc_iterator_t it = NULL;
    dnnl_status_t s = dnnl_primitive_desc_iterator_create(&it, op, attr, c->engine, hint);
    dnnl_primitive_attr_destroy(attr);
    if (s == dnnl_unimplemented)
        return ST_OK;
    if (s != dnnl_success)
        return dn_fail(err, "convolution implementations", s);
    int next = DN_VISIT_DROP;
    do {
        dnnl_primitive_desc_t pd = dnnl_primitive_desc_iterator_fetch(it);
        if (!pd)
            break;
        next = visit(ctx, pd, dn_pd_impl_name(pd));
        if (next == DN_VISIT_DROP)
            dnnl_primitive_desc_destroy(pd);
    } while (next != DN_VISIT_KEEP_STOP && dnnl_primitive_desc_iterator_next(it) == dnnl_success);
    dnnl_primitive_desc_iterator_destroy(it);
    return ST_OK;
}

typedef struct pick_ctx {
    const char *impl; /* the name wanted; "": the first */
    int gemm_only;
    int fallback;     /* no such name: oneDNN's first */
    dnnl_primitive_desc_t pd, first;
} pick_ctx;

static int pick_visit(void *ctx, dnnl_primitive_desc_t pd, const char *name)
{
    pick_ctx *p = ctx;
    int match = p->gemm_only ? dn_impl_is_gemm(name) : !p->impl[0] || strcmp(p->impl, name) == 0;
    if (match) {
        p->pd = pd;
        return DN_VISIT_KEEP_STOP;
    }
    if (p->fallback && !p->first) {
        p->first = pd;
        return DN_VISIT_KEEP;
    }
    return DN_VISIT_DROP;
}

st_status dn_pd_pick(st_bctx *c, const dnnl_convolution_desc_t *op,
                     const_dnnl_primitive_desc_t hint, int post, float alpha, const char *impl,
                     int gemm_only, int fallback, dnnl_primitive_desc_t *pd, st_error *err)
{
    pick_ctx p = {.impl = impl, .gemm_only = gemm_only, .fallback = fallback};
    *pd = NULL;
    st_status st = dn_impls_visit(c, op, hint, post, alpha, pick_visit, &p, err);
    if (p.pd) {
        if (p.first)
            dnnl_primitive_desc_destroy(p.first);
        *pd = p.pd;
    } else {
        *pd = p.first;
    }
    return st;
}
