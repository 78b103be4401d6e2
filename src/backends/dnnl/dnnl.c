/* The oneDNN backend (Intel oneDNN 2.x C API): every oneDNN call of
 * singletrain is in this file or in convolution's two (dnnl_conv.c,
 * dnnl_conv_measure.c), so the move to oneDNN 3's API touches nothing
 * else.
 *
 * Each worker has its own engine and stream (its st_bctx). A kernel holds,
 * for every batch size it was declared for, the primitives of its forward
 * and backward passes, all created when the kernel is created. Primitives
 * choose their layouts (format_tag any); activations stay in those layouts
 * from one layer to the next. Where a kernel's input arrives in another
 * layout, or its output must be plain, the kernel reorders at that edge
 * ("edges" below). Weights and their gradients are plain in the shared
 * arena: convolutions reorder the weights into their layout once per forward
 * and keep them for the backward pass, and reorder the weight gradient back.
 * Inner products use the plain layouts directly (oneDNN runs them as GEMM).
 *
 * Scratchpads are user-managed: a kernel asks the worker for its largest
 * scratchpad (plus room for one temporary gradient) as scratch, and for
 * everything that must survive from forward to backward as workspace.
 *
 * Threads: oneDNN runs on OpenMP in Debian. ctx_create sets the calling
 * thread's OpenMP team size to the worker's intra-op thread count, so each
 * worker thread runs its primitives on that many threads (1 by default:
 * one core per worker, no oversubscription). */
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include <oneapi/dnnl/dnnl.h>
#include <oneapi/dnnl/dnnl_debug.h>

#include "base/cores.h"
#include "dnnl_internal.h"

st_status dn_fail(st_error *err, const char *what, dnnl_status_t s)
{
    return st_fail(err, ST_EBACKEND, "oneDNN: %s failed: %s", what, dnnl_status2str(s));
}

/* ---- memory descriptors ---- */

st_status dn_md_plain(dnnl_memory_desc_t *md, int ndims, const dnnl_dims_t dims,
                          st_error *err)
{
    static const dnnl_format_tag_t tags[] = {dnnl_format_tag_undef, dnnl_a, dnnl_ab, dnnl_abc,
                                             dnnl_abcd, dnnl_abcde};
    DN(dnnl_memory_desc_init_by_tag(md, ndims, dims, dnnl_f32, tags[ndims]), "plain md");
    return ST_OK;
}

st_status dn_md_any(dnnl_memory_desc_t *md, int ndims, const dnnl_dims_t dims,
                        st_error *err)
{
    DN(dnnl_memory_desc_init_by_tag(md, ndims, dims, dnnl_f32, dnnl_format_tag_any), "any md");
    return ST_OK;
}

int dn_md_is_plain(const dnnl_memory_desc_t *md)
{
    dnnl_memory_desc_t plain;
    st_error ignored = {0};
    return dn_md_plain(&plain, md->ndims, md->dims, &ignored) == ST_OK &&
           dnnl_memory_desc_equal(md, &plain);
}

/* The same layout for n samples: layouts whose sample index is outermost
 * and unblocked (checked by n_outermost) differ only in that dimension. */
dnnl_memory_desc_t dn_md_for_n(const dnnl_memory_desc_t *md, int n)
{
    dnnl_memory_desc_t r = *md;
    r.dims[0] = n;
    r.padded_dims[0] = n;
    return r;
}

int dn_n_outermost(const dnnl_memory_desc_t *md)
{
    if (md->format_kind != dnnl_blocked)
        return 0;
    const dnnl_blocking_desc_t *b = &md->format_desc.blocking;
    for (int i = 0; i < b->inner_nblks; i++)
        if (b->inner_idxs[i] == 0)
            return 0;
    return (size_t)b->strides[0] * (size_t)md->padded_dims[0] * sizeof(float) ==
           dnnl_memory_desc_get_size(md);
}

/* ---- primitives with their argument memories ---- */

void dn_exec_free(dn_exec *e)
{
    for (int i = 0; i < e->nargs; i++)
        dnnl_memory_destroy(e->args[i].memory);
    if (e->prim)
        dnnl_primitive_destroy(e->prim);
    memset(e, 0, sizeof *e);
}

/* Create the primitive of pd and one memory per listed argument whose
 * descriptor is not empty; pd stays the caller's. */
st_status dn_exec_init(st_bctx *c, dn_exec *e, const_dnnl_primitive_desc_t pd,
                           const int *arg_ids, int n_ids, st_error *err)
{
    DN(dnnl_primitive_create(&e->prim, pd), "primitive creation");
    for (int i = 0; i < n_ids; i++) {
        const dnnl_memory_desc_t *md =
            dnnl_primitive_desc_query_md(pd, dnnl_query_exec_arg_md, arg_ids[i]);
        if (!md || dnnl_memory_desc_get_size(md) == 0)
            continue;
        dnnl_memory_t m;
        DN(dnnl_memory_create(&m, md, c->engine, DNNL_MEMORY_NONE), "memory creation");
        e->args[e->nargs].arg = arg_ids[i];
        e->args[e->nargs].memory = m;
        e->bound[e->nargs] = NULL;
        e->nargs++;
    }
    return ST_OK;
}

/* Point argument arg at ptr; memories are re-pointed only when it moved. */
st_status dn_exec_bind(dn_exec *e, int arg, const void *ptr, st_error *err)
{
    for (int i = 0; i < e->nargs; i++) {
        if (e->args[i].arg != arg)
            continue;
        if (e->bound[i] != ptr) {
            DN(dnnl_memory_set_data_handle(e->args[i].memory, (void *)ptr), "set data handle");
            e->bound[i] = (void *)ptr;
        }
        return ST_OK;
    }
    return ST_OK; /* an argument the primitive does not take (empty md) */
}

st_status dn_exec_run(st_bctx *c, dn_exec *e, void *scratch, st_error *err)
{
    st_status st = dn_exec_bind(e, DNNL_ARG_SCRATCHPAD, scratch, err);
    if (st != ST_OK)
        return st;
    DN(dnnl_primitive_execute(e->prim, c->stream, e->nargs, e->args), "execute");
    DN(dnnl_stream_wait(c->stream), "stream wait");
    return ST_OK;
}

st_status dn_exec_call(st_bctx *c, dn_exec *e, const dn_arg *args, int n, void *scratch,
                       st_error *err)
{
    for (int i = 0; i < n; i++) {
        st_status st = dn_exec_bind(e, args[i].arg, args[i].ptr, err);
        if (st != ST_OK)
            return st;
    }
    return dn_exec_run(c, e, scratch, err);
}

size_t dn_scratchpad_bytes(const_dnnl_primitive_desc_t pd)
{
    const dnnl_memory_desc_t *md = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    return md ? dnnl_memory_desc_get_size(md) : 0;
}

const dnnl_memory_desc_t *dn_pd_md(const_dnnl_primitive_desc_t pd, int arg)
{
    return dnnl_primitive_desc_query_md(pd, dnnl_query_exec_arg_md, arg);
}

/* Attributes: user scratchpad, and optionally an eltwise post-op. */
st_status dn_make_attr(dnnl_primitive_attr_t *attr, int post_alg, float alpha,
                           st_error *err)
{
    DN(dnnl_primitive_attr_create(attr), "attr");
    DN(dnnl_primitive_attr_set_scratchpad_mode(*attr, dnnl_scratchpad_mode_user), "scratchpad");
    if (post_alg) {
        dnnl_post_ops_t po;
        DN(dnnl_post_ops_create(&po), "post ops");
        dnnl_status_t s = dnnl_post_ops_append_eltwise(po, 1.0f, (dnnl_alg_kind_t)post_alg,
                                                       alpha, 0.0f);
        if (s == dnnl_success)
            s = dnnl_primitive_attr_set_post_ops(*attr, po);
        dnnl_post_ops_destroy(po);
        DN(s, "eltwise post op");
    }
    return ST_OK;
}

st_status dn_make_pd(st_bctx *c, dnnl_primitive_desc_t *pd, const void *op_desc,
                         const_dnnl_primitive_desc_t hint, int post_alg, float alpha,
                         const char *what, st_error *err)
{
    dnnl_primitive_attr_t attr;
    st_status st = dn_make_attr(&attr, post_alg, alpha, err);
    if (st != ST_OK)
        return st;
    dnnl_status_t s = dnnl_primitive_desc_create(pd, op_desc, attr, c->engine, hint);
    dnnl_primitive_attr_destroy(attr);
    DN(s, what);
    return ST_OK;
}

/* A reorder from one layout to another; accumulate adds to the target. */
st_status dn_make_reorder(st_bctx *c, dn_exec *e, const dnnl_memory_desc_t *from,
                              const dnnl_memory_desc_t *to, int accumulate, size_t *scratch,
                              st_error *err)
{
    dnnl_primitive_attr_t attr;
    DN(dnnl_primitive_attr_create(&attr), "attr");
    dnnl_status_t s = dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user);
    if (s == dnnl_success && accumulate) {
        dnnl_post_ops_t po;
        s = dnnl_post_ops_create(&po);
        if (s == dnnl_success) {
            s = dnnl_post_ops_append_sum(po, 1.0f);
            if (s == dnnl_success)
                s = dnnl_primitive_attr_set_post_ops(attr, po);
            dnnl_post_ops_destroy(po);
        }
    }
    dnnl_primitive_desc_t pd = NULL;
    if (s == dnnl_success)
        s = dnnl_reorder_primitive_desc_create(&pd, from, c->engine, to, c->engine, attr);
    dnnl_primitive_attr_destroy(attr);
    DN(s, "reorder");
    static const int ids[] = {DNNL_ARG_FROM, DNNL_ARG_TO, DNNL_ARG_SCRATCHPAD};
    st_status st = dn_exec_init(c, e, pd, ids, 3, err);
    size_t sp = dn_scratchpad_bytes(pd);
    if (sp > *scratch)
        *scratch = sp;
    dnnl_primitive_desc_destroy(pd);
    return st;
}

st_status dn_run_reorder(st_bctx *c, dn_exec *e, const void *from, void *to, void *scratch,
                             st_error *err)
{
    const dn_arg args[] = {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}};
    return dn_exec_call(c, e, args, N_OF(args), scratch, err);
}

/* ---- kernels ---- */

static void kernel_destroy(st_kernel *base)
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
    case ST_K_BNORM: dims[1] = d->bn.c; dims[2] = d->bn.h; dims[3] = d->bn.w; return 4;
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

/* The edges of variant v: usrc is the layout src arrives in, psrc the one
 * the primitive reads (same dims); pdst the one it writes. Edge buffers are
 * reserved when the largest batch size (first) is built. */
static st_status build_edges(dn_kernel *k, dn_variant *v, const dnnl_memory_desc_t *usrc,
                             const dnnl_memory_desc_t *psrc, const dnnl_memory_desc_t *pdst,
                             int first, st_error *err)
{
    st_bctx *c = k->ctx;
    st_status st;
    if (first) {
        k->src_edge = !dnnl_memory_desc_equal(usrc, psrc);
        if (k->src_edge)
            k->ws_src = dn_ws_take(k, dnnl_memory_desc_get_size(psrc));
        /* room for diff_src before its reorder or accumulation, or where
         * batch norm's backward, which always computes it, throws it away */
        int dsrc = k->d.base.src_grad || (k->d.base.kind == ST_K_BNORM && k->d.base.backward);
        k->tmp_bytes = dsrc ? dnnl_memory_desc_get_size(psrc) : 0;
        int plain = dn_md_is_plain(pdst);
        if (!plain && !dn_n_outermost(pdst))
            return st_fail(err, ST_EBACKEND, "oneDNN chose an output layout that blocks the "
                           "sample dimension");
        k->dst_edge = k->d.base.dst_plain && !plain;
        if (k->dst_edge) {
            k->ws_dst = dn_ws_take(k, dnnl_memory_desc_get_size(pdst));
            k->ws_ddst = dn_ws_take(k, dnnl_memory_desc_get_size(pdst));
        }
        k->pdst = *pdst;
        k->base.dst_layout = plain || k->dst_edge ? NULL : &k->pdst;
        k->base.dst_bytes = plain || k->dst_edge
                                ? (size_t)k->d.base.n * st_kdesc_dst_values(&k->d.base) * sizeof(float)
                                : dnnl_memory_desc_get_size(pdst);
    }
    size_t sp = 0;
    if (k->src_edge && ((st = dn_make_reorder(c, &v->src_in, usrc, psrc, 0, &sp, err)) ||
                        (st = dn_make_reorder(c, &v->dsrc_out, psrc, usrc, 0, &sp, err))))
        return st;
    if ((st = dn_make_reorder(c, &v->dsrc_add, psrc, usrc, 1, &sp, err)))
        return st;
    if (k->dst_edge) {
        dnnl_memory_desc_t plain;
        if ((st = dn_md_plain(&plain, pdst->ndims, pdst->dims, err)) ||
            (st = dn_make_reorder(c, &v->dst_out, pdst, &plain, 0, &sp, err)) ||
            (st = dn_make_reorder(c, &v->ddst_in, &plain, pdst, 0, &sp, err)))
            return st;
    }
    if (sp > k->scratchpad)
        k->scratchpad = sp;
    return ST_OK;
}

/* src for the primitive: the user's, or its reordered copy. */
static st_status fwd_src(dn_kernel *k, dn_variant *v, const st_kargs *a, const void **src,
                         st_error *err)
{
    *src = a->src;
    if (!k->src_edge)
        return ST_OK;
    *src = dn_at(a->workspace, k->ws_src);
    return dn_run_reorder(k->ctx, &v->src_in, a->src, (void *)*src, a->scratch, err);
}

/* The src the forward pass gave the primitive, for the backward pass. */
static const void *bwd_src(const dn_kernel *k, const st_kargs *a)
{
    return k->src_edge ? dn_at(a->workspace, k->ws_src) : a->src;
}

static void *fwd_dst(const dn_kernel *k, const st_kargs *a)
{
    return k->dst_edge ? dn_at(a->workspace, k->ws_dst) : a->dst;
}

static st_status fwd_finish(dn_kernel *k, dn_variant *v, const st_kargs *a, st_error *err)
{
    if (!k->dst_edge)
        return ST_OK;
    return dn_run_reorder(k->ctx, &v->dst_out, dn_at(a->workspace, k->ws_dst), a->dst, a->scratch,
                       err);
}

/* diff_dst in the primitive's layout. */
static st_status bwd_ddst(dn_kernel *k, dn_variant *v, const st_kargs *a, const void **ddst,
                          st_error *err)
{
    *ddst = a->diff_dst;
    if (!k->dst_edge)
        return ST_OK;
    *ddst = dn_at(a->workspace, k->ws_ddst);
    return dn_run_reorder(k->ctx, &v->ddst_in, a->diff_dst, (void *)*ddst, a->scratch, err);
}

/* The variant for a->n samples, and diff_dst in its primitive's layout:
 * the start of a backward pass. */
static st_status bwd_begin(dn_kernel *k, const st_kargs *a, dn_variant **v, const void **ddst,
                           st_error *err)
{
    *ddst = NULL;
    *v = dn_variant_of(k, a->n, err);
    if (!*v)
        return ST_EINTERNAL;
    return bwd_ddst(k, *v, a, ddst, err);
}

/* Where the primitive writes diff_src: the user's buffer, or a temporary
 * after the scratchpad when a reorder or an accumulation follows. */
static void *bwd_dsrc(const dn_kernel *k, const st_kargs *a)
{
    if (!k->src_edge && !a->accumulate)
        return a->diff_src;
    return (char *)a->scratch + (k->scratchpad + 63) / 64 * 64;
}

static st_status bwd_finish(dn_kernel *k, dn_variant *v, const st_kargs *a, st_error *err)
{
    if (!k->src_edge && !a->accumulate)
        return ST_OK;
    dn_exec *e = a->accumulate ? &v->dsrc_add : &v->dsrc_out;
    return dn_run_reorder(k->ctx, e, bwd_dsrc(k, a), a->diff_src, a->scratch, err);
}

/* The eltwise after the primitive (v->post, when there is one) from src
 * to dst. */
static st_status post_run(dn_kernel *k, dn_variant *v, const void *src, void *dst, void *scratch,
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
static const int BN_ARGS[] = {DNNL_ARG_SRC, DNNL_ARG_DST, DNNL_ARG_SCALE, DNNL_ARG_SHIFT,
                              DNNL_ARG_MEAN, DNNL_ARG_VARIANCE, DNNL_ARG_DIFF_DST,
                              DNNL_ARG_DIFF_SRC, DNNL_ARG_DIFF_SCALE, DNNL_ARG_DIFF_SHIFT,
                              DNNL_ARG_SCRATCHPAD};

/* Create an exec from pd, noting its scratchpad. */
st_status dn_finish_exec(dn_kernel *k, dn_exec *e, dnnl_primitive_desc_t pd,
                             const int *ids, int n_ids, st_error *err)
{
    dn_need_scratchpad(k, pd);
    return dn_exec_init(k->ctx, e, pd, ids, n_ids, err);
}

/* The common end of a layer's build, given the status so far: the passes'
 * execs, the edges between the user and the primitives' layouts (usrc,
 * psrc, pdst), and the descriptors destroyed, also on failure. */
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
        st = build_edges(k, v, usrc, psrc, pdst, first, err);
    dnnl_primitive_desc_t all[] = {pds->fwd, pds->bwd_data, pds->bwd_weights};
    for (int i = 0; i < N_OF(all); i++)
        if (all[i])
            dnnl_primitive_desc_destroy(all[i]);
    return st;
}

/* The primitive's own workspace (pooling, LRN): sized at the largest batch. */
static st_status take_prim_workspace(dn_kernel *k, const_dnnl_primitive_desc_t pd, int first,
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
static st_status post_build(dn_kernel *k, dn_variant *v, dnnl_alg_kind_t alg, float alpha,
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

/* ---- convolution and inner product ---- */

/* Inner product on plain [n, in] x [out, in]. An input in a blocked 4-D
 * layout is reordered to plain 4-D, the same memory as [n, in]. The
 * backward passes are oneDNN inner-product primitives. The forward is
 * oneDNN's sgemm as dst^T [out, n] = W [out, in] * src^T, transposed into
 * dst with the bias, then the activation as an eltwise primitive: oneDNN's
 * own inner-product forward computes src * W^T, which with two threads and
 * a small batch runs 1.3 to 4 times slower (AlexNet's 9216 x 4096 layer at
 * batch 32: 60 ms against 14 ms; measured with dnnl_sgemm in both
 * orders). */
static st_status fc_build(dn_kernel *k, dn_variant *v, int first, st_error *err)
{
    const st_fc_desc *d = &k->d.fc;
    st_bctx *c = k->ctx;
    int n = v->n;
    dnnl_dims_t sd = {n, d->in}, dd = {n, d->out}, wd = {d->out, d->in}, bd = {d->out};
    dnnl_memory_desc_t src, dst, wei, bias, usrc, psrc;
    st_status st;
    if ((st = dn_md_plain(&src, 2, sd, err)) || (st = dn_md_plain(&dst, 2, dd, err)) ||
        (st = dn_md_plain(&wei, 2, wd, err)) || (st = dn_md_plain(&bias, 1, bd, err)) ||
        (st = dn_user_src_md(k, n, &usrc, err)))
        return st;
    psrc = src;
    if (usrc.ndims != 2 && (st = dn_md_plain(&psrc, usrc.ndims, usrc.dims, err)))
        return st;
    float alpha;
    dnnl_alg_kind_t post = dn_act_alg(d->act, &alpha, 0);
    dnnl_inner_product_desc_t fd, bdd, bwd;
    DN(dnnl_inner_product_forward_desc_init(&fd, dnnl_forward_training, &src, &wei,
                                            d->bias ? &bias : NULL, &dst),
       "inner product forward descriptor");
    if (post != dnnl_alg_kind_undef &&
        (st = post_build(k, v, post, alpha, &dst, "inner product activation", err)) != ST_OK)
        return st;
    DN(dnnl_inner_product_backward_data_desc_init(&bdd, &src, &wei, &dst),
       "inner product backward data descriptor");
    DN(dnnl_inner_product_backward_weights_desc_init(&bwd, &src, &wei, d->bias ? &bias : NULL,
                                                     &dst),
       "inner product backward weights descriptor");
    dnnl_primitive_desc_t fpd = NULL, dpd = NULL, wpd = NULL;
    st = dn_make_pd(c, &fpd, &fd, NULL, 0, 0, "inner product forward", err);
    if (st == ST_OK)
        st = dn_make_pd(c, &dpd, &bdd, fpd, 0, 0, "inner product backward data", err);
    if (st == ST_OK)
        st = dn_make_pd(c, &wpd, &bwd, fpd, 0, 0, "inner product backward weights", err);
    if (fpd) /* a hint for the backward descriptors only: the forward is sgemm */
        dnnl_primitive_desc_destroy(fpd);
    dn_pass_pds pds = {NULL, dpd, wpd};
    st = dn_finish_build(k, v, st, &pds, &usrc, &psrc, &dst, first, err);
    if (first) { /* the forward's dst^T, after the diff_src temporary */
        k->dst_t_off = (k->tmp_bytes + 63) / 64 * 64;
        k->tmp_bytes = k->dst_t_off + (size_t)d->base.n * d->out * sizeof(float);
    }
    return st;
}

static st_status fc_forward(st_kernel *base, const st_kargs *a, st_error *err)
{
    dn_kernel *k = (dn_kernel *)base;
    const st_fc_desc *d = &k->d.fc;
    dn_variant *v = dn_variant_of(k, a->n, err);
    if (!v)
        return ST_EINTERNAL;
    const void *src;
    st_status st = fwd_src(k, v, a, &src, err);
    if (st != ST_OK)
        return st;
    float *dst_t =
        (float *)((char *)a->scratch + (k->scratchpad + 63) / 64 * 64 + k->dst_t_off);
    DN(dnnl_sgemm('N', 'T', d->out, a->n, d->in, 1.0f, a->weights, d->in, src, d->in, 0.0f,
                  dst_t, a->n), "sgemm");
    for (int i = 0; i < a->n; i++)
        for (int o = 0; o < d->out; o++)
            a->dst[(size_t)i * d->out + o] =
                dst_t[(size_t)o * a->n + i] + (d->bias ? a->bias[o] : 0.0f);
    return post_run(k, v, a->dst, a->dst, a->scratch, err);
}

static st_status weighted_forward(st_kernel *base, const st_kargs *a, st_error *err)
{
    dn_kernel *k = (dn_kernel *)base;
    dn_variant *v = dn_variant_of(k, a->n, err);
    if (!v)
        return ST_EINTERNAL;
    const void *src, *w = a->weights;
    st_status st = fwd_src(k, v, a, &src, err);
    if (st == ST_OK && k->w_edge) {
        w = dn_at(a->workspace, k->ws_w);
        st = dn_run_reorder(k->ctx, &k->w_in, a->weights, (void *)w, a->scratch, err);
    }
    const dn_arg args[] = {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, w},
                           {DNNL_ARG_BIAS, a->bias}, {DNNL_ARG_DST, fwd_dst(k, a)}};
    if (st == ST_OK)
        st = dn_exec_call(k->ctx, &v->fwd, args, N_OF(args), a->scratch, err);
    return st == ST_OK ? fwd_finish(k, v, a, err) : st;
}

/* Uses the weights forward reordered (the same iteration's weights). */
static st_status weighted_backward_data(st_kernel *base, const st_kargs *a, st_error *err)
{
    dn_kernel *k = (dn_kernel *)base;
    dn_variant *v;
    const void *ddst;
    st_status st = bwd_begin(k, a, &v, &ddst, err);
    const void *w = k->w_edge ? dn_at(a->workspace, k->ws_w) : a->weights;
    if (st == ST_OK && k->wd_edge) {
        w = dn_at(a->workspace, k->ws_wd);
        st = dn_run_reorder(k->ctx, &k->wd_in, a->weights, (void *)w, a->scratch, err);
    } else if (st == ST_OK && !dnnl_memory_desc_equal(&k->pwd, &k->pw)) {
        w = a->weights; /* backward data reads plain weights */
    }
    const dn_arg args[] = {{DNNL_ARG_DIFF_DST, ddst}, {DNNL_ARG_WEIGHTS, w},
                           {DNNL_ARG_DIFF_SRC, bwd_dsrc(k, a)}};
    if (st == ST_OK)
        st = dn_exec_call(k->ctx, &v->bwd_data, args, N_OF(args), a->scratch, err);
    return st == ST_OK ? bwd_finish(k, v, a, err) : st;
}

static st_status weighted_backward_weights(st_kernel *base, const st_kargs *a, st_error *err)
{
    dn_kernel *k = (dn_kernel *)base;
    dn_variant *v;
    const void *ddst;
    st_status st = bwd_begin(k, a, &v, &ddst, err);
    void *dw = k->dw_edge ? dn_at(a->workspace, k->ws_dw) : a->diff_weights;
    const dn_arg args[] = {{DNNL_ARG_SRC, bwd_src(k, a)}, {DNNL_ARG_DIFF_DST, ddst},
                           {DNNL_ARG_DIFF_WEIGHTS, dw}, {DNNL_ARG_DIFF_BIAS, a->diff_bias}};
    if (st == ST_OK)
        st = dn_exec_call(k->ctx, &v->bwd_weights, args, N_OF(args), a->scratch, err);
    if (st == ST_OK && k->dw_edge)
        st = dn_run_reorder(k->ctx, &k->dw_out, dw, a->diff_weights, a->scratch, err);
    return st;
}

/* ---- pooling, LRN, activation: one input, one output, no weights ---- */

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
        st = take_prim_workspace(k, fpd, first, err);
    dn_pass_pds pds = {fpd, bpd, NULL};
    return dn_finish_build(k, v, st, &pds, &usrc, &usrc, &dst, first, err);
}

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
        st = take_prim_workspace(k, fpd, first, err);
    dn_pass_pds pds = {fpd, bpd, NULL};
    return dn_finish_build(k, v, st, &pds, &usrc, &usrc, &usrc, first, err);
}

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

static st_status data_forward(st_kernel *base, const st_kargs *a, st_error *err)
{
    dn_kernel *k = (dn_kernel *)base;
    dn_variant *v = dn_variant_of(k, a->n, err);
    if (!v)
        return ST_EINTERNAL;
    const dn_arg args[] = {{DNNL_ARG_SRC, a->src}, {DNNL_ARG_DST, fwd_dst(k, a)},
                           {DNNL_ARG_WORKSPACE, dn_at(a->workspace, k->ws_prim)}};
    st_status st = dn_exec_call(k->ctx, &v->fwd, args, N_OF(args), a->scratch, err);
    return st == ST_OK ? fwd_finish(k, v, a, err) : st;
}

static st_status data_backward(st_kernel *base, const st_kargs *a, st_error *err)
{
    dn_kernel *k = (dn_kernel *)base;
    dn_variant *v;
    const void *ddst;
    st_status st = bwd_begin(k, a, &v, &ddst, err);
    const dn_arg args[] = {{DNNL_ARG_SRC, a->src}, {DNNL_ARG_DST, a->dst},
                           {DNNL_ARG_DIFF_DST, ddst}, {DNNL_ARG_DIFF_SRC, bwd_dsrc(k, a)},
                           {DNNL_ARG_WORKSPACE, dn_at(a->workspace, k->ws_prim)}};
    if (st == ST_OK)
        st = dn_exec_call(k->ctx, &v->bwd_data, args, N_OF(args), a->scratch, err);
    return st == ST_OK ? bwd_finish(k, v, a, err) : st;
}

/* ---- batch normalization ---- */

static st_status bn_build(dn_kernel *k, dn_variant *v, int first, st_error *err)
{
    const st_bnorm_desc *d = &k->d.bn;
    st_bctx *c = k->ctx;
    dnnl_memory_desc_t usrc;
    st_status st = dn_user_src_md(k, v->n, &usrc, err);
    if (st != ST_OK)
        return st;
    unsigned flags = dnnl_use_scale | dnnl_use_shift;
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
    dnnl_alg_kind_t post = dn_act_alg(d->act, &alpha, 0);
    if (st == ST_OK && post != dnnl_alg_kind_undef)
        st = post_build(k, v, post, alpha, &usrc, "batch norm activation", err);
    if (st == ST_OK)
        st = dn_finish_exec(k, &v->fwd, fpd, BN_ARGS, N_OF(BN_ARGS), err);
    if (st == ST_OK)
        st = dn_finish_exec(k, &v->fwd_inf, ipd, BN_ARGS, N_OF(BN_ARGS), err);
    if (st == ST_OK)
        st = dn_finish_exec(k, &v->bwd_data, bpd, BN_ARGS, N_OF(BN_ARGS), err);
    if (st == ST_OK)
        st = build_edges(k, v, &usrc, &usrc, &usrc, first, err);
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
    void *dst = fwd_dst(k, a);
    const dn_arg args[] = {{DNNL_ARG_SRC, a->src},      {DNNL_ARG_DST, dst},
                           {DNNL_ARG_SCALE, a->weights}, {DNNL_ARG_SHIFT, a->bias},
                           {DNNL_ARG_MEAN, a->mean},     {DNNL_ARG_VARIANCE, a->var}};
    st_status st = dn_exec_call(k->ctx, e, args, N_OF(args), a->scratch, err);
    if (st == ST_OK)
        st = post_run(k, v, dst, dst, a->scratch, err);
    return st == ST_OK ? fwd_finish(k, v, a, err) : st;
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
    st_status st = bwd_ddst(k, v, &args, &ddst, err);
    const dn_arg bind[] = {{DNNL_ARG_SRC, args.src},
                           {DNNL_ARG_DIFF_DST, ddst},
                           {DNNL_ARG_SCALE, args.weights},
                           {DNNL_ARG_SHIFT, args.bias},
                           {DNNL_ARG_MEAN, args.mean},
                           {DNNL_ARG_VARIANCE, args.var},
                           {DNNL_ARG_DIFF_SRC, bwd_dsrc(k, &args)},
                           {DNNL_ARG_DIFF_SCALE, args.diff_weights},
                           {DNNL_ARG_DIFF_SHIFT, args.diff_bias}};
    if (st == ST_OK)
        st = dn_exec_call(k->ctx, &v->bwd_data, bind, N_OF(bind), args.scratch, err);
    if (st != ST_OK || !a->diff_src)
        return st;
    return bwd_finish(k, v, &args, err);
}

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
        st = post_build(k, v, dnnl_eltwise_linear, 1.0f / d->temperature, &md,
                        "softmax temperature", err);
    if (st == ST_OK)
        st = dn_finish_exec(k, &v->fwd, spd, FWD_ARGS, N_OF(FWD_ARGS), err);
    if (st == ST_OK)
        st = build_edges(k, v, &md, &md, &md, first, err);
    if (spd)
        dnnl_primitive_desc_destroy(spd);
    return st;
}

static st_status softmax_forward(st_kernel *base, const st_kargs *a, st_error *err)
{
    dn_kernel *k = (dn_kernel *)base;
    dn_variant *v = dn_variant_of(k, a->n, err);
    if (!v)
        return ST_EINTERNAL;
    /* The temperature's scaling, when there is one, into dst first. */
    st_status st = post_run(k, v, a->src, a->dst, a->scratch, err);
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

/* ---- the backend ---- */

typedef st_status (*build_fn)(dn_kernel *k, dn_variant *v, int first, st_error *err);

static const struct {
    build_fn build;
    st_kernel_ops ops;
    size_t desc_size;
} kinds[] = {
    [ST_K_CONV] = {dn_conv_build, {weighted_forward, weighted_backward_data,
                                weighted_backward_weights, kernel_destroy}, sizeof(st_conv_desc)},
    [ST_K_FC] = {fc_build, {fc_forward, weighted_backward_data, weighted_backward_weights,
                            kernel_destroy}, sizeof(st_fc_desc)},
    [ST_K_POOL] = {pool_build, {data_forward, data_backward, NULL, kernel_destroy},
                   sizeof(st_pool_desc)},
    [ST_K_BNORM] = {bn_build, {bn_forward, bn_backward, NULL, kernel_destroy},
                    sizeof(st_bnorm_desc)},
    [ST_K_LRN] = {lrn_build, {data_forward, data_backward, NULL, kernel_destroy},
                  sizeof(st_lrn_desc)},
    [ST_K_ACT] = {act_build, {data_forward, data_backward, NULL, kernel_destroy},
                  sizeof(st_act_desc)},
    [ST_K_SOFTMAX] = {softmax_build, {softmax_forward, no_backward, NULL, kernel_destroy},
                      sizeof(st_softmax_desc)},
};

/* Distinct batch sizes, largest first. */
static int sorted_sizes(const st_kdesc *d, int *sizes, st_error *err)
{
    int count = 0;
    int n_in = d->batch_sizes ? d->n_batch_sizes : 0;
    for (int i = -1; i < n_in; i++) {
        int n = i < 0 ? d->n : d->batch_sizes[i];
        int seen = 0;
        for (int j = 0; j < count; j++)
            seen |= sizes[j] == n;
        if (seen || n < 1)
            continue;
        if (count == MAX_VARIANTS) {
            st_fail(err, ST_EINTERNAL, "more than %d batch sizes for one kernel", MAX_VARIANTS);
            return -1;
        }
        sizes[count++] = n;
    }
    for (int i = 1; i < count; i++)
        for (int j = i; j > 0 && sizes[j] > sizes[j - 1]; j--) {
            int t = sizes[j];
            sizes[j] = sizes[j - 1];
            sizes[j - 1] = t;
        }
    return count;
}

/* Address space oneDNN may need while it creates a kernel's primitives.
 * It does not check its own allocations (one that fails there is a
 * segmentation fault), so under a limit on the address space (ulimit -v
 * or -d) this much must be available before it starts: malloc's arena of
 * a new thread alone reserves 64 MB. */
#define BUILD_HEADROOM ((size_t)128 << 20)

static int address_space_limited(void)
{
    struct rlimit as, data;
    return (getrlimit(RLIMIT_AS, &as) == 0 && as.rlim_cur != RLIM_INFINITY) ||
           (getrlimit(RLIMIT_DATA, &data) == 0 && data.rlim_cur != RLIM_INFINITY);
}

/* Under a limit, BUILD_HEADROOM must be available before oneDNN builds
 * (what: what is being built, for the message). */
static st_status check_headroom(const st_bctx *c, const char *what, st_error *err)
{
    if (!c->limited)
        return ST_OK;
    void *headroom = malloc(BUILD_HEADROOM);
    if (!headroom)
        return st_fail(err, ST_ENOMEM, "out of memory creating %s: the %zu MB of address "
                       "space its set-up may need are not available", what,
                       BUILD_HEADROOM >> 20);
    free(headroom);
    return ST_OK;
}

static st_status dnnl_kernel_create(st_bctx *c, const st_kdesc *d, st_kernel **out,
                                    st_error *err)
{
    st_status hst = check_headroom(c, "a oneDNN kernel", err);
    if (hst != ST_OK)
        return hst;
    if ((size_t)d->kind >= sizeof kinds / sizeof kinds[0] || !kinds[d->kind].build)
        return st_fail(err, ST_EINTERNAL, "oneDNN backend: unknown kernel kind %d", d->kind);
    int sizes[MAX_VARIANTS];
    int n_sizes = sorted_sizes(d, sizes, err);
    if (n_sizes < 0)
        return ST_EINTERNAL;
    dn_kernel *k = st_calloc(1, sizeof *k, "oneDNN kernel", err);
    dn_variant *v = st_calloc((size_t)n_sizes, sizeof *v, "oneDNN kernel variants", err);
    if (!k || !v) {
        free(k);
        free(v);
        return ST_ENOMEM;
    }
    k->v = v;
    k->base.ops = &kinds[d->kind].ops;
    k->base.kind = d->kind;
    k->ctx = c;
    memcpy(&k->d, d, kinds[d->kind].desc_size);
    k->d.base.n = sizes[0];
    k->d.base.batch_sizes = NULL;
    k->ws_src = k->ws_dst = k->ws_ddst = k->ws_prim = k->ws_w = k->ws_wd = k->ws_dw = NONE;
    st_status st = ST_OK;
    for (int i = 0; i < n_sizes && st == ST_OK; i++) {
        k->v[i].n = sizes[i];
        k->n_var = i + 1;
        st = kinds[d->kind].build(k, &k->v[i], i == 0, err);
    }
    if (st != ST_OK) {
        kernel_destroy(&k->base);
        return st;
    }
    k->base.scratch_bytes = (k->scratchpad + 63) / 64 * 64 + k->tmp_bytes;
    *out = &k->base;
    return ST_OK;
}

static st_status dnnl_ctx_create(const st_backend_opts *o, st_bctx **out, st_error *err)
{
    st_bctx *c = st_calloc(1, sizeof *c, "oneDNN context", err);
    if (!c)
        return ST_ENOMEM;
    c->worker = o->worker;
    c->conv_impl = o->conv_impl;
    c->choices = o->choices;
    c->limited = address_space_limited();
    st_status hst = check_headroom(c, "a oneDNN context", err);
    if (hst != ST_OK) {
        free(c);
        return hst;
    }
    omp_set_num_threads(o->intra_threads > 0 ? o->intra_threads : 1);
    dnnl_status_t s = dnnl_engine_create(&c->engine, dnnl_cpu, 0);
    if (s == dnnl_success)
        s = dnnl_stream_create(&c->stream, c->engine, dnnl_stream_default_flags);
    /* oneDNN generates the code of its sgemm at its first real call (about
     * 7 MB with the library code it touches, once per process; a 1 x 1
     * product takes another path and generates less), each path's kernels
     * under a once-flag of its own, and does not check those allocations:
     * one that fails is a segmentation fault (in dnnl_sgemm, pthread_once),
     * as it was under ulimit -v when the first product ran in training
     * while the readers decoded large images. So the products the kernels
     * make run here, in set-up, inside the memory estimate (whose plan of
     * a worker creates this context) and after the headroom check: an 8 x
     * 8 x 8 product (the blocked JIT GEMM and its packing kernels), and
     * the inner product's forward, dst^T = W * src^T, with 2 outputs (with
     * AVX-512, fewer than 16 outputs take oneDNN's "small-n" kernels,
     * generated apart at their first use; elsewhere the same GEMM). */
    float a[64] = {0}, b[64] = {0}, product[64];
    if (s == dnnl_success)
        s = dnnl_sgemm('N', 'N', 8, 8, 8, 1.0f, a, 8, b, 8, 0.0f, product, 8);
    if (s == dnnl_success)
        s = dnnl_sgemm('N', 'T', 2, 8, 8, 1.0f, a, 8, b, 8, 0.0f, product, 8);
    if (s != dnnl_success) {
        if (c->engine)
            dnnl_engine_destroy(c->engine);
        free(c);
        return dn_fail(err, "engine and stream creation", s);
    }
    *out = c;
    return ST_OK;
}

static void dnnl_ctx_destroy(st_bctx *c)
{
    if (!c)
        return;
    dnnl_stream_destroy(c->stream);
    dnnl_engine_destroy(c->engine);
    free(c);
}

/* st_backend.choice_context: what a measured choice holds for. oneDNN's
 * version (its implementations and their names), the instruction set it
 * dispatches to (ONEDNN_MAX_CPU_ISA can lower it) and the CPU model (the
 * timings) decide which implementation exists and wins; the activations
 * are 32-bit floats throughout. */
static void dnnl_choice_context(char *buf, size_t size)
{
    const dnnl_version_t *v = dnnl_version();
    char cpu[160];
    st_cpu_model(cpu, sizeof cpu);
    const char *isa = dnnl_cpu_isa2str(dnnl_get_effective_cpu_isa());
    if (strncmp(isa, "cpu_isa_", 8) == 0)
        isa += 8;
    snprintf(buf, size, "oneDNN %d.%d.%d (%s), isa %s, cpu %s, f32", v->major, v->minor,
             v->patch, v->hash ? v->hash : "no hash", isa, cpu);
}

const st_backend st_backend_dnnl = {
    .name = "dnnl",
    .conv_impls = dn_conv_impls,
    .choice_syntax = dn_conv_choice_syntax,
    .choice_context = dnnl_choice_context,
    .ctx_create = dnnl_ctx_create,
    .ctx_destroy = dnnl_ctx_destroy,
    .kernel_create = dnnl_kernel_create,
};
