/* The layouts at the `cpe` backend's kernels' edges (the tensor
 * transformation layer, cpe_backend.c says why): a tensor seen in the
 * layout a kernel computes in, transformed on the CPEs into scratch when it
 * comes in another; a result stored in the layout its consumer expects; and
 * the record (backend.h's dst_layout) of which layout a tensor's values and
 * its gradient are in, decided call by call. Transformations are charged to
 * the kernel that needs them, apart from its own launches. */
#include "cpe_backend_internal.h"

size_t cpe_shape_floats(const cpe_shape *s, int n)
{
    return (size_t)n * (size_t)s->c * (size_t)s->h * (size_t)s->w;
}

/* t (n samples of shape s, in layout have) in layout want: t itself, or a
 * copy transformed on the CPEs into scratch slot, charged to k's layout
 * work of the pass. */
st_status cpe_layout_view(cpe_kernel *k, int pass, int training, int slot, const cpe_shape *s,
                          int n, const float *t, st_cpe_layout have, st_cpe_layout want,
                          const float **out, st_error *err)
{
    *out = t;
    if (have == want)
        return ST_OK;
    float *copy;
    st_status st = cpe_scratch(k->ctx, slot, cpe_shape_floats(s, n), &copy, err);
    if (st != ST_OK)
        return st;
    st_cpe_counters c;
    st = st_cpe_relayout(k->ctx->cg, n, s->c, s->h, s->w, have, t, want, copy, &c, err);
    *out = copy;
    return cpe_charge(&k->layout, pass, &c, training, st);
}

/* dst (layout target, n samples of shape s) = result (layout have), or +=
 * it with accumulate; result is a scratch buffer. */
st_status cpe_layout_store(cpe_kernel *k, int pass, const cpe_shape *s, int n, float *result,
                           st_cpe_layout have, float *dst, st_cpe_layout target, int accumulate,
                           st_error *err)
{
    st_cpe_counters c;
    const float *src = result;
    if (have != target) {
        float *into = dst;
        st_status st = accumulate
                           ? cpe_scratch(k->ctx, SCRATCH_OUT2, cpe_shape_floats(s, n), &into, err)
                           : ST_OK;
        if (st == ST_OK)
            st = cpe_charge(&k->layout, pass, &c, 1,
                            st_cpe_relayout(k->ctx->cg, n, s->c, s->h, s->w, have, result, target,
                                            into, &c, err));
        if (st != ST_OK || !accumulate)
            return st;
        src = into;
    }
    /* dst (+)= src: the linear activation's backward is the addition. */
    return cpe_charge(&k->layout, pass, &c, 1,
                      st_cpe_act_backward(k->ctx->cg, ST_ACT_LINEAR, cpe_shape_floats(s, n), src,
                                          src, dst, accumulate, &c, err));
}

st_cpe_layout cpe_src_data_layout(const cpe_kernel *k)
{
    return k->src_state ? k->src_state->data : ST_CPE_NCHW;
}

/* The layout this kernel's output gradient comes in: its own record's, or
 * plain when its output is plain. */
st_cpe_layout cpe_own_diff_layout(const cpe_kernel *k)
{
    return k->base.dst_layout ? k->own.diff : ST_CPE_NCHW;
}

/* The layout a kernel that computes in `natural` writes its input gradient
 * in: its own choice when it overwrites a gradient that has a record, the
 * record's when it adds to it, plain without a record. Sets the record. */
st_cpe_layout cpe_diff_target(cpe_kernel *k, st_cpe_layout natural, int accumulate)
{
    if (!k->src_state)
        return ST_CPE_NCHW;
    if (!accumulate)
        k->src_state->diff = natural;
    return k->src_state->diff;
}

/* The input of a kernel that computes on plain NCHW: a->src, or its
 * transformed copy. */
st_status cpe_plain_src(cpe_kernel *k, const st_kargs *a, int pass, int training, const float **out,
                        st_error *err)
{
    cpe_shape s = {k->in_c, k->in_h, k->in_w};
    return cpe_layout_view(k, pass, training, SCRATCH_IN, &s, a->n, a->src, cpe_src_data_layout(k),
                           ST_CPE_NCHW, out, err);
}

/* Straight into diff_src, or into scratch to be stored with
 * cpe_layout_store. */
st_status cpe_plain_diff_dst(cpe_kernel *k, const st_kargs *a, cpe_plain_diff *dx, st_error *err)
{
    cpe_shape s = {k->in_c, k->in_h, k->in_w};
    dx->stored = cpe_diff_target(k, ST_CPE_NCHW, a->accumulate) != ST_CPE_NCHW;
    dx->add = a->accumulate && !dx->stored;
    dx->to = a->diff_src;
    if (!dx->stored)
        return ST_OK;
    return cpe_scratch(k->ctx, SCRATCH_OUT, cpe_shape_floats(&s, a->n), &dx->to, err);
}

st_status cpe_plain_diff_finish(cpe_kernel *k, const st_kargs *a, const cpe_plain_diff *dx,
                                st_status st, st_error *err)
{
    if (st != ST_OK || !dx->stored)
        return st;
    cpe_shape s = {k->in_c, k->in_h, k->in_w};
    return cpe_layout_store(k, PASS_BWD_DATA, &s, a->n, dx->to, ST_CPE_NCHW, a->diff_src,
                            k->src_state->diff, a->accumulate, err);
}
