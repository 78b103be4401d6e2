/* The oneDNN kernel record (dn_kernel) and what every kind's file uses: its
 * variants, workspace and scratch, the logical dims and the layout src
 * arrives in, the edges between the user's layouts and the primitives'
 * (built with the variant, run around each pass), the common end of a
 * build, the eltwise that may follow a primitive, and the passes several
 * kinds share: the weighted ones (convolution, inner product) and the data
 * ones (pooling, LRN, activation: one input, one output, no weights). */
#include <stdlib.h>

#include "base/memory.h"
#include "dnnl_internal.h"

void dn_kernel_destroy(st_kernel *base)
{
    dn_kernel *k = (dn_kernel *)base;
    for (int i = 0; i < k->n_var; i++) {
        dn_exec *e = &k->v[i].fwd;
        for (size_t j = 0; j < EXECS_PER_VARIANT; j++)
            dn_exec_free(&e[j]);
    }
    dn_exec_free(&k->w_in);
    dn_exec_free(&k->wd_in);
    dn_exec_free(&k->dw_out);
    free(k->v);
    free(k);
}

dn_variant *dn_variant_of(dn_kernel *k, int n, st_error *err)
{
    for (int i = 0; i < k->n_var; i++)
        if (k->v[i].n == n)
            return &k->v[i];
    st_fail(err, ST_EINTERNAL, "oneDNN kernel called for %d samples, which was not declared at "
            "set-up", n);
    return NULL;
}

int dn_trial_runs(double first_ms, double cutoff)
{
    return first_ms > cutoff ? 1 : first_ms > 20.0 ? 2 : first_ms > 2.0 ? 3 : 5;
}

void *dn_trial_buffer(size_t bytes, const char *what, st_error *err)
{
    size_t size = (bytes + 63) / 64 * 64;
    uint16_t *p = st_alloc_aligned(size ? size : 64, what, err);
    for (size_t i = 0; p && i < size / sizeof *p; i++)
        p[i] = 0x3c00;
    return p;
}

void *dn_at(void *base, size_t off)
{
    return off == NONE ? NULL : (char *)base + off;
}

size_t dn_ws_take(dn_kernel *k, size_t bytes)
{
    size_t off = k->base.workspace_bytes;
    k->base.workspace_bytes += (bytes + 63) / 64 * 64;
    return off;
}

void dn_need_scratchpad(dn_kernel *k, const_dnnl_primitive_desc_t pd)
{
    size_t b = dn_scratchpad_bytes(pd);
    if (b > k->scratchpad)
        k->scratchpad = b;
}

/* Logical dims of the kernel's src and dst for n samples; returns ndims. */
int dn_src_dims(const dn_desc *d, int n, dnnl_dims_t dims)
{
    dims[0] = n;
    switch (d->base.kind) {
    case ST_K_CONV: dims[1] = d->conv.ic; dims[2] = d->conv.ih; dims[3] = d->conv.iw; return 4;
    case ST_K_FC: dims[1] = d->fc.in; return 2;
    case ST_K_POOL: dims[1] = d->pool.c; dims[2] = d->pool.ih; dims[3] = d->pool.iw; return 4;
    case ST_K_BNORM: dims[1] = d->bnorm.c; dims[2] = d->bnorm.h; dims[3] = d->bnorm.w; return 4;
    case ST_K_LRN: dims[1] = d->lrn.c; dims[2] = d->lrn.h; dims[3] = d->lrn.w; return 4;
    case ST_K_ACT: dims[1] = (dnnl_dim_t)d->act.count; return 2;
    case ST_K_SOFTMAX:
        dims[0] = (dnnl_dim_t)n * d->softmax.groups;
        dims[1] = d->softmax.count / d->softmax.groups;
        return 2;
    }
    return 0;
}

int dn_dst_dims(const dn_desc *d, int n, dnnl_dims_t dims)
{
    dims[0] = n;
    switch (d->base.kind) {
    case ST_K_CONV: dims[1] = d->conv.oc; dims[2] = d->conv.oh; dims[3] = d->conv.ow; return 4;
    case ST_K_FC: dims[1] = d->fc.out; return 2;
    case ST_K_POOL: dims[1] = d->pool.c; dims[2] = d->pool.oh; dims[3] = d->pool.ow; return 4;
    default: return dn_src_dims(d, n, dims);
    }
}

/* The layout src arrives in, for n samples. */
st_status dn_user_src_md(const dn_kernel *k, int n, dnnl_memory_desc_t *md, st_error *err)
{
    if (k->d.base.src_layout) {
        *md = dn_md_for_n(k->d.base.src_layout, n);
        return ST_OK;
    }
    dnnl_dims_t dims;
    return dn_md_plain(md, dn_src_dims(&k->d, n, dims), dims, err);
}

dnnl_alg_kind_t dn_act_alg(st_act a, float *alpha, int for_backward)
{
    *alpha = a == ST_ACT_LEAKY ? 0.1f : 0.0f;
    switch (a) {
    case ST_ACT_RELU:
    case ST_ACT_LEAKY:
        return for_backward ? dnnl_eltwise_relu_use_dst_for_bwd : dnnl_eltwise_relu;
    case ST_ACT_LOGISTIC:
        return for_backward ? dnnl_eltwise_logistic_use_dst_for_bwd : dnnl_eltwise_logistic;
    case ST_ACT_TANH:
        return for_backward ? dnnl_eltwise_tanh_use_dst_for_bwd : dnnl_eltwise_tanh;
    default:
        return dnnl_alg_kind_undef;
    }
}

/* The edges of variant v: usrc is the layout src arrives in (f32, or bf16
 * where the layer before keeps its output so), psrc the one the primitive
 * reads (same dims); pdst the one it writes (f32, or bf16 where this
 * kernel's is kept so: st_kdesc.dst_bf16). The gradients are f32 in the
 * user's layouts: diff_src comes out of the primitive in psrc's layout as
 * f32 and goes back in usrc's, diff_dst comes in pdst's layout (plain
 * with dst_plain) and goes into the primitive as k->operand_dt. Edge
 * buffers are reserved when the largest batch size (first) is built. */
st_status dn_build_edges(dn_kernel *k, dn_variant *v, const dnnl_memory_desc_t *usrc,
                         const dnnl_memory_desc_t *psrc, const dnnl_memory_desc_t *pdst,
                         int first, st_error *err)
{
    st_bctx *c = k->ctx;
    st_status st;
    dnnl_memory_desc_t pdsrc = dn_md_as(psrc, dnnl_f32), pddst = dn_md_as(pdst, k->operand_dt);
    dnnl_memory_desc_t udsrc = dn_md_as(usrc, dnnl_f32), f32dst = dn_md_as(pdst, dnnl_f32);
    if (first) {
        k->src_edge = !dnnl_memory_desc_equal(usrc, psrc);
        if (k->src_edge)
            k->ws_src = dn_ws_take(k, dnnl_memory_desc_get_size(psrc));
        k->dsrc_edge = !dnnl_memory_desc_equal(&udsrc, &pdsrc);
        /* room for diff_src before its reorder or accumulation, or where
         * batch norm's backward, which always computes it, throws it away */
        int dsrc = k->d.base.src_grad || (k->d.base.kind == ST_K_BNORM && k->d.base.backward);
        k->tmp_bytes = dsrc ? dnnl_memory_desc_get_size(&pdsrc) : 0;
        int plain = dn_md_is_plain(pdst);
        if (!plain && !dn_n_outermost(pdst))
            return st_fail(err, ST_EBACKEND, "oneDNN chose an output layout that blocks the "
                           "sample dimension");
        int f32 = pdst->data_type == dnnl_f32;
        k->dst_edge = k->d.base.dst_plain && !(plain && f32);
        if (k->dst_edge)
            k->ws_dst = dn_ws_take(k, dnnl_memory_desc_get_size(pdst));
        k->ddst_edge = k->dst_edge || k->operand_dt != dnnl_f32;
        if (k->ddst_edge)
            k->ws_ddst = dn_ws_take(k, dnnl_memory_desc_get_size(&pddst));
        k->pdst = *pdst;
        k->base.dst_layout = (plain && f32) || k->dst_edge ? NULL : &k->pdst;
        k->base.dst_bf16 = k->base.dst_layout && !f32;
        k->base.dst_bytes =
            k->base.dst_layout
                ? dnnl_memory_desc_get_size(pdst)
                : (size_t)k->d.base.n * st_kdesc_dst_values(&k->d.base) * sizeof(float);
    }
    size_t sp = 0;
    if (k->src_edge && (st = dn_make_reorder(c, &v->src_in, usrc, psrc, 0, &sp, err)))
        return st;
    if (k->dsrc_edge && (st = dn_make_reorder(c, &v->dsrc_out, &pdsrc, &udsrc, 0, &sp, err)))
        return st;
    if ((st = dn_make_reorder(c, &v->dsrc_add, &pdsrc, &udsrc, 1, &sp, err)))
        return st;
    dnnl_memory_desc_t plain; /* dst as the user has it */
    if ((st = dn_md_plain(&plain, pdst->ndims, pdst->dims, err)))
        return st;
    if (k->dst_edge && (st = dn_make_reorder(c, &v->dst_out, pdst, &plain, 0, &sp, err)))
        return st;
    if (k->ddst_edge && (st = dn_make_reorder(c, &v->ddst_in, k->dst_edge ? &plain : &f32dst,
                                              &pddst, 0, &sp, err)))
        return st;
    if (sp > k->scratchpad)
        k->scratchpad = sp;
    return ST_OK;
}

/* Whether a convolution or inner product has a bias. */
static int has_bias(const dn_kernel *k)
{
    return (k->d.base.kind == ST_K_CONV && k->d.conv.bias) ||
           (k->d.base.kind == ST_K_FC && k->d.fc.bias);
}

/* With operands not f32, the bias gradient summed over the samples and
 * pixels of the f32 diff_dst as the user gives it, ddst (the primitive's
 * own would sum diff_dst rounded to bf16, where the bias gradient of
 * --precision bf16 is fp32's, as the reference backend's): in plain C
 * where ddst is dense (bias_grad_sum: oneDNN 2.6's reduction is its
 * reference one there, 30 to 100 ms a layer of AlexNet at batch 64),
 * else by v->dbias, a oneDNN reduction. */
static st_status bias_grad_build(dn_kernel *k, dn_variant *v, const dnnl_memory_desc_t *ddst,
                                 int first, st_error *err)
{
    if (first && ddst->ndims == 2) {
        k->dbias_dense = 1;
        k->ddst_dense = (dn_dense){(int)ddst->dims[1], 1, ddst->dims[1], 0, 0, 0};
    } else if (first && dn_dense_tag(ddst) != dnnl_format_tag_undef) {
        k->dbias_dense = 1;
        k->ddst_dense = dn_dense_of(ddst);
    }
    if (k->dbias_dense)
        return ST_OK;
    dnnl_dims_t dims = {1, ddst->dims[1], 1, 1};
    dnnl_memory_desc_t to;
    dnnl_reduction_desc_t rd;
    dnnl_primitive_desc_t pd = NULL;
    st_status st = dn_md_plain(&to, ddst->ndims, dims, err);
    if (st != ST_OK)
        return st;
    DN(dnnl_reduction_desc_init(&rd, dnnl_reduction_sum, ddst, &to, 0.0f, 0.0f),
       "bias gradient reduction descriptor");
    static const int ids[] = {DNNL_ARG_SRC, DNNL_ARG_DST, DNNL_ARG_SCRATCHPAD};
    if ((st = dn_make_pd(k->ctx, &pd, &rd, NULL, 0, 0, "bias gradient reduction", err)) ==
        ST_OK)
        st = dn_finish_exec(k, &v->dbias, pd, ids, N_OF(ids), err);
    if (pd)
        dnnl_primitive_desc_destroy(pd);
    return st;
}

/* diff_bias [c] = the sum over n samples, then over the h x w pixels in
 * order, of diff_dst (f32, laid out as g): the reference backend's order,
 * so its sums bit for bit; the lanes of a pixel (channels) side by side. */
static void bias_grad_sum(const dn_dense *g, int n, int c, int h, int w, const float *ddst,
                          float *diff_bias)
{
    for (int i = 0; i < c; i++)
        diff_bias[i] = 0.0f;
    for (int s = 0; s < n; s++)
        for (int b = 0; b < g->blocks && b * g->lanes < c; b++) {
            int nl = c - b * g->lanes < g->lanes ? c - b * g->lanes : g->lanes;
            float *acc = diff_bias + (size_t)b * g->lanes;
            for (int y = 0; y < h; y++)
                for (int x = 0; x < w; x++) {
                    const float *p = ddst + s * g->sn + b * g->sb + y * g->sh + x * g->sw;
                    for (int l = 0; l < nl; l++)
                        acc[l] += p[l];
                }
        }
}

/* A weights layout chosen by a primitive: whether it differs from plain, and
 * if so a workspace buffer and the reorder from (to_plain = 0) or to plain. */
static st_status weights_edge(dn_kernel *k, const dnnl_memory_desc_t *plain,
                              const dnnl_memory_desc_t *chosen, int to_plain, int *edge,
                              size_t *ws, dn_exec *reorder, st_error *err)
{
    *edge = !dnnl_memory_desc_equal(plain, chosen);
    if (!*edge)
        return ST_OK;
    size_t sp = 0;
    *ws = dn_ws_take(k, dnnl_memory_desc_get_size(chosen));
    st_status st = to_plain ? dn_make_reorder(k->ctx, reorder, chosen, plain, 0, &sp, err)
                            : dn_make_reorder(k->ctx, reorder, plain, chosen, 0, &sp, err);
    if (sp > k->scratchpad)
        k->scratchpad = sp;
    return st;
}

dnnl_memory_desc_t dn_weights_user_md(const dn_kernel *k, const dnnl_memory_desc_t *wplain)
{
    return k->w_given ? dn_md_as(wplain, dnnl_bf16) : *wplain;
}

/* The weights' edges: into the forward's and the backward-data's layouts
 * from the weights as given (dn_weights_user_md), the gradient back to
 * plain f32. */
st_status dn_weights_edges(dn_kernel *k, const dn_pass_pds *pds,
                           const dnnl_memory_desc_t *wplain, st_error *err)
{
    k->pw = *dn_pd_md(pds->fwd, DNNL_ARG_WEIGHTS);
    k->pwd = pds->bwd_data ? *dn_pd_md(pds->bwd_data, DNNL_ARG_WEIGHTS) : k->pw;
    k->pww = pds->bwd_weights ? *dn_pd_md(pds->bwd_weights, DNNL_ARG_DIFF_WEIGHTS)
             : pds->dw_md     ? *pds->dw_md
                              : *wplain;
    dnnl_memory_desc_t win = dn_weights_user_md(k, wplain);
    st_status st = weights_edge(k, &win, &k->pw, 0, &k->w_edge, &k->ws_w, &k->w_in, err);
    if (st == ST_OK && !dnnl_memory_desc_equal(&k->pwd, &k->pw))
        st = weights_edge(k, &win, &k->pwd, 0, &k->wd_edge, &k->ws_wd, &k->wd_in, err);
    if (st == ST_OK)
        st = weights_edge(k, wplain, &k->pww, 1, &k->dw_edge, &k->ws_dw, &k->dw_out, err);
    return st;
}

/* src for the primitive: the user's, or its reordered copy. */
st_status dn_fwd_src(dn_kernel *k, dn_variant *v, const st_kargs *a, const void **src,
                     st_error *err)
{
    *src = a->src;
    if (!k->src_edge)
        return ST_OK;
    *src = dn_at(a->workspace, k->ws_src);
    return dn_run_reorder(k->ctx, &v->src_in, a->src, (void *)*src, a->scratch, err);
}

/* The src the forward pass gave the primitive, for the backward pass. */
const void *dn_bwd_src(const dn_kernel *k, const st_kargs *a)
{
    return k->src_edge ? dn_at(a->workspace, k->ws_src) : a->src;
}

void *dn_fwd_dst(const dn_kernel *k, const st_kargs *a)
{
    return k->dst_edge ? dn_at(a->workspace, k->ws_dst) : a->dst;
}

st_status dn_fwd_finish(dn_kernel *k, dn_variant *v, const st_kargs *a, st_error *err)
{
    if (!k->dst_edge)
        return ST_OK;
    return dn_run_reorder(k->ctx, &v->dst_out, dn_at(a->workspace, k->ws_dst), a->dst, a->scratch,
                          err);
}

/* diff_dst in the primitive's layout. */
st_status dn_bwd_ddst(dn_kernel *k, dn_variant *v, const st_kargs *a, const void **ddst,
                      st_error *err)
{
    *ddst = a->diff_dst;
    if (!k->ddst_edge)
        return ST_OK;
    *ddst = dn_at(a->workspace, k->ws_ddst);
    return dn_run_reorder(k->ctx, &v->ddst_in, a->diff_dst, (void *)*ddst, a->scratch, err);
}

/* The variant for a->n samples, and diff_dst in its primitive's layout:
 * the start of a backward pass. */
st_status dn_bwd_begin(dn_kernel *k, const st_kargs *a, dn_variant **v, const void **ddst,
                       st_error *err)
{
    *ddst = NULL;
    *v = dn_variant_of(k, a->n, err);
    if (!*v)
        return ST_EINTERNAL;
    return dn_bwd_ddst(k, *v, a, ddst, err);
}

/* Where the primitive writes diff_src: the user's buffer, or a temporary
 * after the scratchpad when a reorder or an accumulation follows. */
void *dn_bwd_dsrc(const dn_kernel *k, const st_kargs *a)
{
    if (!k->dsrc_edge && !a->accumulate)
        return a->diff_src;
    return (char *)a->scratch + (k->scratchpad + 63) / 64 * 64;
}

st_status dn_bwd_finish(dn_kernel *k, dn_variant *v, const st_kargs *a, st_error *err)
{
    if (!k->dsrc_edge && !a->accumulate)
        return ST_OK;
    dn_exec *e = a->accumulate ? &v->dsrc_add : &v->dsrc_out;
    return dn_run_reorder(k->ctx, e, dn_bwd_dsrc(k, a), a->diff_src, a->scratch, err);
}

/* The eltwise after the primitive (v->post, when there is one) from src
 * to dst. */
st_status dn_post_run(dn_kernel *k, dn_variant *v, const void *src, void *dst, void *scratch,
                      st_error *err)
{
    if (!v->post.prim)
        return ST_OK;
    const dn_arg args[] = {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst}};
    return dn_exec_call(k->ctx, &v->post, args, N_OF(args), scratch, err);
}

static const int FWD_ARGS[] = {DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_BIAS, DNNL_ARG_DST,
                               DNNL_ARG_WORKSPACE, DNNL_ARG_SCRATCHPAD};
static const int BWD_DATA_ARGS[] = {DNNL_ARG_SRC, DNNL_ARG_DST, DNNL_ARG_WEIGHTS,
                                    DNNL_ARG_DIFF_DST, DNNL_ARG_DIFF_SRC, DNNL_ARG_WORKSPACE,
                                    DNNL_ARG_SCRATCHPAD};
static const int BWD_WEIGHTS_ARGS[] = {DNNL_ARG_SRC, DNNL_ARG_DIFF_DST, DNNL_ARG_DIFF_WEIGHTS,
                                       DNNL_ARG_DIFF_BIAS, DNNL_ARG_SCRATCHPAD};

/* Create an exec from pd, noting its scratchpad. */
st_status dn_finish_exec(dn_kernel *k, dn_exec *e, dnnl_primitive_desc_t pd, const int *ids,
                         int n_ids, st_error *err)
{
    dn_need_scratchpad(k, pd);
    return dn_exec_init(k->ctx, e, pd, ids, n_ids, err);
}

/* The common end of a layer's build, given the status so far: the passes'
 * execs, the edges between the user and the primitives' layouts (usrc,
 * psrc, pdst), the bias gradient's sum with bf16 operands, and the
 * descriptors destroyed, also on failure. */
st_status dn_finish_build(dn_kernel *k, dn_variant *v, st_status st, dn_pass_pds *pds,
                          const dnnl_memory_desc_t *usrc, const dnnl_memory_desc_t *psrc,
                          const dnnl_memory_desc_t *pdst, int first, st_error *err)
{
    if (st == ST_OK && pds->fwd)
        st = dn_finish_exec(k, &v->fwd, pds->fwd, FWD_ARGS, N_OF(FWD_ARGS), err);
    if (st == ST_OK && pds->bwd_data)
        st = dn_finish_exec(k, &v->bwd_data, pds->bwd_data, BWD_DATA_ARGS, N_OF(BWD_DATA_ARGS),
                            err);
    if (st == ST_OK && pds->bwd_weights)
        st = dn_finish_exec(k, &v->bwd_weights, pds->bwd_weights, BWD_WEIGHTS_ARGS,
                            N_OF(BWD_WEIGHTS_ARGS), err);
    if (st == ST_OK)
        st = dn_build_edges(k, v, usrc, psrc, pdst, first, err);
    if (st == ST_OK && (pds->bwd_weights || pds->dw_md) && has_bias(k) &&
        k->operand_dt != dnnl_f32) {
        dnnl_memory_desc_t plain, ddst = dn_md_as(pdst, dnnl_f32); /* diff_dst as given */
        if (k->dst_edge && (st = dn_md_plain(&plain, pdst->ndims, pdst->dims, err)) == ST_OK)
            ddst = plain;
        if (st == ST_OK)
            st = bias_grad_build(k, v, &ddst, first, err);
    }
    dnnl_primitive_desc_t all[] = {pds->fwd, pds->bwd_data, pds->bwd_weights};
    for (int i = 0; i < N_OF(all); i++)
        if (all[i])
            dnnl_primitive_desc_destroy(all[i]);
    return st;
}

/* The primitive's own workspace (pooling, LRN): sized at the largest batch. */
st_status dn_take_prim_workspace(dn_kernel *k, const_dnnl_primitive_desc_t pd, int first,
                                 st_error *err)
{
    const dnnl_memory_desc_t *md = dnnl_primitive_desc_query_md(pd, dnnl_query_workspace_md, 0);
    size_t bytes = md ? dnnl_memory_desc_get_size(md) : 0;
    if (first && bytes) {
        k->ws_prim = dn_ws_take(k, bytes);
        k->ws_prim_bytes = bytes;
    }
    if (bytes > k->ws_prim_bytes)
        return st_fail(err, ST_EBACKEND, "oneDNN workspace grows for a smaller batch");
    return ST_OK;
}

/* v->post: the eltwise alg (alpha) after the primitive, in place on md
 * (an activation, softmax's temperature); what names it in errors. */
st_status dn_post_build(dn_kernel *k, dn_variant *v, dnnl_alg_kind_t alg, float alpha,
                        const dnnl_memory_desc_t *md, const char *what, st_error *err)
{
    dnnl_eltwise_desc_t ed;
    dnnl_primitive_desc_t epd = NULL;
    DN(dnnl_eltwise_forward_desc_init(&ed, dnnl_forward_inference, alg, md, alpha, 0.0f),
       "eltwise descriptor");
    st_status st = dn_make_pd(k->ctx, &epd, &ed, NULL, 0, 0, what, err);
    if (st == ST_OK)
        st = dn_finish_exec(k, &v->post, epd, FWD_ARGS, N_OF(FWD_ARGS), err);
    if (epd)
        dnnl_primitive_desc_destroy(epd);
    return st;
}

/* ---- passes of the weighted kernels (convolution, inner product) ---- */

/* The diff_dst a weighted kind's backward pass reads, in the primitive's
 * layout and type: converted into the workspace by the weight-gradient
 * pass (weights: 1), which leaves it for the backward-data pass that
 * follows it with the same diff_dst and workspace (backend.h: the same
 * diff_dst for both); that pass takes it (once) or converts its own; a
 * forward forgets it. A backward-data pass alone (hybrid's data-parallel
 * kernel) always converts. */
static st_status weighted_ddst(dn_kernel *k, const st_kargs *a, int weights, dn_variant **v,
                               const void **ddst, st_error *err)
{
    int left = !weights && k->ddst_of == a->diff_dst && k->ddst_ws == a->workspace;
    k->ddst_of = k->ddst_ws = NULL;
    if (!k->ddst_edge || !left) {
        st_status st = dn_bwd_begin(k, a, v, ddst, err);
        if (st == ST_OK && weights && k->ddst_edge) {
            k->ddst_of = a->diff_dst;
            k->ddst_ws = a->workspace;
        }
        return st;
    }
    *ddst = dn_at(a->workspace, k->ws_ddst);
    *v = dn_variant_of(k, a->n, err);
    return *v ? ST_OK : ST_EINTERNAL;
}

/* The weights as the kernel is given them: the bf16 copy (k->w_given),
 * or the f32 weights. */
static const void *weights_given(const dn_kernel *k, const st_kargs *a)
{
    return k->w_given ? (const void *)a->weights_bf16 : (const void *)a->weights;
}

st_status dn_weighted_forward(st_kernel *base, const st_kargs *a, st_error *err)
{
    dn_kernel *k = (dn_kernel *)base;
    dn_variant *v = dn_variant_of(k, a->n, err);
    if (!v)
        return ST_EINTERNAL;
    const void *src, *given = weights_given(k, a), *w = given;
    k->ddst_of = k->ddst_ws = NULL; /* new samples: see weighted_ddst */
    st_status st = dn_fwd_src(k, v, a, &src, err);
    k->w_of = k->w_ws = NULL;
    if (st == ST_OK && k->w_edge) {
        w = dn_at(a->workspace, k->ws_w);
        st = dn_run_reorder(k->ctx, &k->w_in, given, (void *)w, a->scratch, err);
        if (st == ST_OK) {
            k->w_of = given;
            k->w_ws = a->workspace;
        }
    }
    const dn_arg args[] = {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, w},
                           {DNNL_ARG_BIAS, a->bias}, {DNNL_ARG_DST, dn_fwd_dst(k, a)}};
    if (st == ST_OK)
        st = dn_exec_call(k->ctx, &v->fwd, args, N_OF(args), a->scratch, err);
    return st == ST_OK ? dn_fwd_finish(k, v, a, err) : st;
}

/* The weights in the forward's layout are the copy the forward made
 * (k->w_of: of those weights, into that workspace), or, where no forward
 * made one (hybrid's data-parallel inner product runs backward-data
 * only), one made here. */
st_status dn_weighted_backward_data(st_kernel *base, const st_kargs *a, st_error *err)
{
    dn_kernel *k = (dn_kernel *)base;
    dn_variant *v;
    const void *ddst;
    st_status st = weighted_ddst(k, a, 0, &v, &ddst, err);
    const void *given = weights_given(k, a);
    const void *w = k->w_edge ? dn_at(a->workspace, k->ws_w) : given;
    int forwards = k->w_of == given && k->w_ws == a->workspace;
    k->w_of = k->w_ws = NULL;
    if (st == ST_OK && k->wd_edge) {
        w = dn_at(a->workspace, k->ws_wd);
        st = dn_run_reorder(k->ctx, &k->wd_in, given, (void *)w, a->scratch, err);
    } else if (st == ST_OK && !dnnl_memory_desc_equal(&k->pwd, &k->pw)) {
        w = given; /* backward data reads the weights as given */
    } else if (st == ST_OK && k->w_edge && !forwards) {
        st = dn_run_reorder(k->ctx, &k->w_in, given, (void *)w, a->scratch, err);
    }
    const dn_arg args[] = {{DNNL_ARG_DIFF_DST, ddst}, {DNNL_ARG_WEIGHTS, w},
                           {DNNL_ARG_DIFF_SRC, dn_bwd_dsrc(k, a)}};
    if (st == ST_OK)
        st = dn_exec_call(k->ctx, &v->bwd_data, args, N_OF(args), a->scratch, err);
    return st == ST_OK ? dn_bwd_finish(k, v, a, err) : st;
}

st_status dn_weighted_backward_weights(st_kernel *base, const st_kargs *a, st_error *err)
{
    dn_kernel *k = (dn_kernel *)base;
    dn_variant *v;
    const void *ddst;
    st_status st = weighted_ddst(k, a, 1, &v, &ddst, err);
    void *dw = k->dw_edge ? dn_at(a->workspace, k->ws_dw) : a->diff_weights;
    const dn_arg args[] = {{DNNL_ARG_SRC, dn_bwd_src(k, a)}, {DNNL_ARG_DIFF_DST, ddst},
                           {DNNL_ARG_DIFF_WEIGHTS, dw}, {DNNL_ARG_DIFF_BIAS, a->diff_bias}};
    if (st == ST_OK && k->dw_other)
        st = k->dw_other(k, v, a->n, dn_bwd_src(k, a), ddst, dw, a->workspace, a->scratch, err);
    else if (st == ST_OK)
        st = dn_exec_call(k->ctx, &v->bwd_weights, args, N_OF(args), a->scratch, err);
    if (st == ST_OK && k->dbias_dense) {
        const dnnl_memory_desc_t *d = &k->pdst; /* [n, c] or [n, c, h, w] */
        bias_grad_sum(&k->ddst_dense, a->n, (int)d->dims[1], d->ndims == 4 ? (int)d->dims[2] : 1,
                      d->ndims == 4 ? (int)d->dims[3] : 1, a->diff_dst, a->diff_bias);
    } else if (st == ST_OK && v->dbias.prim) {
        const dn_arg sum[] = {{DNNL_ARG_SRC, a->diff_dst}, {DNNL_ARG_DST, a->diff_bias}};
        st = dn_exec_call(k->ctx, &v->dbias, sum, N_OF(sum), a->scratch, err);
    }
    if (st == ST_OK && k->dw_edge)
        st = dn_run_reorder(k->ctx, &k->dw_out, dw, a->diff_weights, a->scratch, err);
    return st;
}

/* ---- passes of pooling, LRN, activation: one input, one output, no weights ---- */

st_status dn_data_forward(st_kernel *base, const st_kargs *a, st_error *err)
{
    dn_kernel *k = (dn_kernel *)base;
    dn_variant *v = dn_variant_of(k, a->n, err);
    if (!v)
        return ST_EINTERNAL;
    const void *src;
    st_status st = dn_fwd_src(k, v, a, &src, err);
    const dn_arg args[] = {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dn_fwd_dst(k, a)},
                           {DNNL_ARG_WORKSPACE, dn_at(a->workspace, k->ws_prim)}};
    if (st == ST_OK)
        st = dn_exec_call(k->ctx, &v->fwd, args, N_OF(args), a->scratch, err);
    return st == ST_OK ? dn_fwd_finish(k, v, a, err) : st;
}

st_status dn_data_backward(st_kernel *base, const st_kargs *a, st_error *err)
{
    dn_kernel *k = (dn_kernel *)base;
    dn_variant *v;
    const void *ddst;
    st_status st = dn_bwd_begin(k, a, &v, &ddst, err);
    const dn_arg args[] = {{DNNL_ARG_SRC, dn_bwd_src(k, a)}, {DNNL_ARG_DST, a->dst},
                           {DNNL_ARG_DIFF_DST, ddst}, {DNNL_ARG_DIFF_SRC, dn_bwd_dsrc(k, a)},
                           {DNNL_ARG_WORKSPACE, dn_at(a->workspace, k->ws_prim)}};
    if (st == ST_OK)
        st = dn_exec_call(k->ctx, &v->bwd_data, args, N_OF(args), a->scratch, err);
    return st == ST_OK ? dn_bwd_finish(k, v, a, err) : st;
}
