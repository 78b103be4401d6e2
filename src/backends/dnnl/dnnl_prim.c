/* oneDNN's objects as the backend uses them: memory descriptors, primitives
 * with their argument memories (dn_exec), primitive descriptors with the
 * user-managed scratchpad, and reorders between layouts. Knows nothing of
 * kernels (dnnl_kernel.c). */
#include <string.h>

#include <oneapi/dnnl/dnnl_debug.h>

#include "dnnl_internal.h"

st_status dn_fail(st_error *err, const char *what, dnnl_status_t s)
{
    return st_fail(err, ST_EBACKEND, "oneDNN: %s failed: %s", what, dnnl_status2str(s));
}

/* ---- memory descriptors ---- */

st_status dn_md_plain(dnnl_memory_desc_t *md, int ndims, const dnnl_dims_t dims, st_error *err)
{
    static const dnnl_format_tag_t tags[] = {dnnl_format_tag_undef, dnnl_a, dnnl_ab, dnnl_abc,
                                             dnnl_abcd, dnnl_abcde};
    DN(dnnl_memory_desc_init_by_tag(md, ndims, dims, dnnl_f32, tags[ndims]), "plain md");
    return ST_OK;
}

st_status dn_md_any(dnnl_memory_desc_t *md, int ndims, const dnnl_dims_t dims, st_error *err)
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

dnnl_memory_desc_t dn_md_as(const dnnl_memory_desc_t *md, dnnl_data_type_t dt)
{
    dnnl_memory_desc_t r = *md;
    r.data_type = dt;
    return r;
}

int dn_md_same_layout(const dnnl_memory_desc_t *a, const dnnl_memory_desc_t *b)
{
    dnnl_memory_desc_t b_as_a = dn_md_as(b, a->data_type);
    return dnnl_memory_desc_equal(a, &b_as_a);
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
    return (size_t)b->strides[0] * (size_t)md->padded_dims[0] *
               dnnl_data_type_size(md->data_type) ==
           dnnl_memory_desc_get_size(md);
}

/* The dense 4-D layouts, as dn_dense describes them; the first is the
 * plain one. */
static const dnnl_format_tag_t DENSE_TAGS[] = {dnnl_nchw, dnnl_nhwc, dnnl_nChw4c, dnnl_nChw8c,
                                               dnnl_nChw16c};

dnnl_format_tag_t dn_dense_tag(const dnnl_memory_desc_t *md)
{
    for (int i = 0; i < N_OF(DENSE_TAGS); i++) {
        dnnl_memory_desc_t t;
        if (dnnl_memory_desc_init_by_tag(&t, md->ndims, md->dims, md->data_type,
                                         DENSE_TAGS[i]) == dnnl_success &&
            dnnl_memory_desc_equal(&t, md))
            return DENSE_TAGS[i];
    }
    return dnnl_format_tag_undef;
}

dn_dense dn_dense_of(const dnnl_memory_desc_t *md)
{
    const dnnl_blocking_desc_t *b = &md->format_desc.blocking;
    dn_dense g = {1, (int)md->padded_dims[1], b->strides[0], b->strides[1], b->strides[2],
                  b->strides[3]};
    if (b->inner_nblks == 1) { /* nChw<lanes>c */
        g.lanes = (int)b->inner_blks[0];
        g.blocks = (int)(md->padded_dims[1] / g.lanes);
    } else if (b->strides[1] == 1) { /* nhwc */
        g.lanes = (int)md->dims[1];
        g.blocks = 1;
    }
    return g;
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
st_status dn_exec_init(st_bctx *c, dn_exec *e, const_dnnl_primitive_desc_t pd, const int *arg_ids,
                       int n_ids, st_error *err)
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
st_status dn_make_attr(dnnl_primitive_attr_t *attr, int post_alg, float alpha, st_error *err)
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
                     const_dnnl_primitive_desc_t hint, int post_alg, float alpha, const char *what,
                     st_error *err)
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
