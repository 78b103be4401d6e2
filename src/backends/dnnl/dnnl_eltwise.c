/* oneDNN's elementwise kernels: the activation layer's (forward and
 * backward on the output; its passes are the data ones, dnnl_kernel.c) and
 * softmax (forward only, after the temperature's scaling). */
#include <stdint.h>

#include "base/clones.h"
#include "dnnl_internal.h"
#include "ops/bf16.h"

/* ---- activation ---- */

static st_status act_bf16_forward(st_kernel *base, const st_kargs *a, st_error *err)
{
    (void)a;
    return st_fail(err, ST_EINTERNAL, "oneDNN backend: an activation forward on bf16 values "
                   "(the layer's kernel applies it; kernel kind %d)", base->kind);
}

/* dx [count] from dy [count] and the bf16 outputs y [count]: relu's and
 * leaky's rule as the reference backend's (st_act_backward: dy where the
 * output is above 0, else 0, or 0.1 dy for leaky) on the floats the bf16
 * values stand for (their upper halves). dx may be dy. */
ST_ISA_CLONES static void relu_bf16_backward(const uint16_t *y, const float *dy, float *dx,
                                             long count, int leaky)
{
    for (long i = 0; i < count; i++)
        dx[i] = st_bf16_to_float(y[i]) > 0.0f ? dy[i] : leaky ? 0.1f * dy[i] : 0.0f;
}

/* The backward on bf16 outputs (kept so between layers: st_kdesc.dst_bf16
 * of the kernel before), diff_dst and diff_src f32 in their layout, over
 * every value of the layout (its padding included), in blocks over the
 * worker's threads: oneDNN 2.6's eltwise backward takes its data and
 * gradient in one type. */
static st_status act_bf16_backward(st_kernel *base, const st_kargs *a, st_error *err)
{
    enum { BLOCK = 16384 };
    dn_kernel *k = (dn_kernel *)base;
    dnnl_memory_desc_t md = dn_md_for_n(&k->pdst, a->n);
    long count = (long)(dnnl_memory_desc_get_size(&md) / sizeof(uint16_t));
    const uint16_t *y = (const uint16_t *)a->dst;
    int leaky = k->d.act.act == ST_ACT_LEAKY;
    (void)err;
#pragma omp parallel for schedule(static) if (count > 4 * BLOCK)
    for (long i = 0; i < count; i += BLOCK)
        relu_bf16_backward(y + i, a->diff_dst + i, a->diff_src + i,
                           count - i < BLOCK ? count - i : BLOCK, leaky);
    return ST_OK;
}

static const st_kernel_ops act_bf16_ops = {act_bf16_forward, act_bf16_backward, NULL,
                                           dn_kernel_destroy};

/* Activations run forward and backward on the output (use_dst algorithms);
 * on bf16 outputs, backward in plain C (act_bf16_backward). */
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
    if (usrc.data_type == dnnl_bf16) {
        if (d->act != ST_ACT_RELU && d->act != ST_ACT_LEAKY)
            return st_fail(err, ST_EINTERNAL, "oneDNN backend: the %s activation on bf16 "
                           "outputs", st_act_names[d->act]);
        k->base.ops = &act_bf16_ops;
        dn_pass_pds none = {NULL, NULL, NULL, NULL};
        return dn_finish_build(k, v, ST_OK, &none, &usrc, &usrc, &usrc, first, err);
    }
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
    dn_pass_pds pds = {fpd, bpd, NULL, NULL};
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
    dn_pass_pds pds = {spd, NULL, NULL, NULL};
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
