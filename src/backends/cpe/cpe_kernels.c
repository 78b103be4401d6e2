/* The `cpe` backend's kernels other than convolution (cpe_conv.c): the
 * bias, activation and bias gradient of convolutions and inner products,
 * inner products as GEMM, max and average pooling and the activation
 * layers, all on the CPEs; and batch norm, LRN and softmax on the MPE (the
 * reference backend's kernels, costed with the MPE roofline
 * st_cpe_mpe_seconds). Kernels that compute on plain NCHW take their input
 * and give their input gradient through cpe_layouts.c. */
#include <string.h>

#include "cpe_backend_internal.h"
#include "backends/ref.h"

/* ---- bias, activation and bias gradient of conv and fc, on the CPEs ---- */

st_status cpe_epilogue(cpe_kernel *k, float *y, const float *bias, int n, int channels,
                       size_t per_channel, st_act act, int training, st_error *err)
{
    if (!bias && act == ST_ACT_LINEAR)
        return ST_OK;
    st_cpe_counters c;
    st_status st = st_cpe_bias_act(k->ctx->cg, n, channels, per_channel, bias, act, y, &c, err);
    return cpe_charge(&k->work, PASS_FWD, &c, training, st);
}

st_status cpe_bias_grad(cpe_kernel *k, float *db, const float *dy, int n, int channels,
                        size_t per_channel, st_error *err)
{
    st_cpe_counters c;
    st_status st = st_cpe_bias_grad(k->ctx->cg, n, channels, per_channel, dy, db, &c, err);
    return cpe_charge(&k->work, PASS_BWD_WEIGHTS, &c, 1, st);
}

/* ---- inner product: GEMM ---- */

static st_status fc_forward(st_kernel *base, const st_kargs *a, st_error *err)
{
    cpe_kernel *k = (cpe_kernel *)base;
    const st_fc_desc *d = &k->fc;
    const float *x;
    st_cpe_counters c;
    st_status st = cpe_plain_src(k, a, PASS_FWD, a->training, &x, err);
    if (st == ST_OK)
        st = cpe_charge(&k->work, PASS_FWD, &c, a->training,
                        st_cpe_gemm(k->ctx->cg, ST_CPE_F32, 0, 1, (size_t)a->n, (size_t)d->out,
                                    (size_t)d->in, 1.0, x, (size_t)d->in, a->weights, (size_t)d->in,
                                    0.0, a->dst, (size_t)d->out, &c, err));
    if (st != ST_OK)
        return st;
    return cpe_epilogue(k, a->dst, d->bias ? a->bias : NULL, a->n, d->out, 1, d->act, a->training,
                        err);
}

static st_status fc_backward_data(st_kernel *base, const st_kargs *a, st_error *err)
{
    cpe_kernel *k = (cpe_kernel *)base;
    const st_fc_desc *d = &k->fc;
    if (!a->diff_src)
        return ST_OK;
    cpe_plain_diff dx;
    st_cpe_counters c;
    st_status st = cpe_plain_diff_dst(k, a, &dx, err);
    if (st == ST_OK)
        st = cpe_charge(&k->work, PASS_BWD_DATA, &c, 1,
                        st_cpe_gemm(k->ctx->cg, ST_CPE_F32, 0, 0, (size_t)a->n, (size_t)d->in,
                                    (size_t)d->out, 1.0, a->diff_dst, (size_t)d->out, a->weights,
                                    (size_t)d->in, dx.add ? 1.0 : 0.0, dx.to, (size_t)d->in, &c,
                                    err));
    return cpe_plain_diff_finish(k, a, &dx, st, err);
}

static st_status fc_backward_weights(st_kernel *base, const st_kargs *a, st_error *err)
{
    cpe_kernel *k = (cpe_kernel *)base;
    const st_fc_desc *d = &k->fc;
    const float *x;
    st_cpe_counters c;
    st_status st = cpe_plain_src(k, a, PASS_BWD_WEIGHTS, 1, &x, err);
    if (st == ST_OK)
        st = cpe_charge(&k->work, PASS_BWD_WEIGHTS, &c, 1,
                        st_cpe_gemm(k->ctx->cg, ST_CPE_F32, 1, 0, (size_t)d->out, (size_t)d->in,
                                    (size_t)a->n, 1.0, a->diff_dst, (size_t)d->out, x,
                                    (size_t)d->in, 0.0, a->diff_weights, (size_t)d->in, &c, err));
    if (st == ST_OK && d->bias && a->diff_bias)
        st = cpe_bias_grad(k, a->diff_bias, a->diff_dst, a->n, d->out, 1, err);
    return st;
}

/* ---- pooling and activations ---- */

static st_status pool_forward(st_kernel *base, const st_kargs *a, st_error *err)
{
    cpe_kernel *k = (cpe_kernel *)base;
    const float *x;
    st_cpe_counters c;
    st_status st = cpe_plain_src(k, a, PASS_FWD, a->training, &x, err);
    if (st == ST_OK)
        st = cpe_charge(&k->work, PASS_FWD, &c, a->training,
                        st_cpe_pool_forward(k->ctx->cg, &k->pool, a->n, x, a->dst,
                                            k->pool.alg == ST_POOL_MAX ? a->workspace : NULL, &c,
                                            err));
    return st;
}

static st_status pool_backward_data(st_kernel *base, const st_kargs *a, st_error *err)
{
    cpe_kernel *k = (cpe_kernel *)base;
    cpe_plain_diff dx;
    st_cpe_counters c;
    st_status st = cpe_plain_diff_dst(k, a, &dx, err);
    if (st == ST_OK)
        st = cpe_charge(&k->work, PASS_BWD_DATA, &c, 1,
                        st_cpe_pool_backward(k->ctx->cg, &k->pool, a->n, a->diff_dst, a->workspace,
                                             dx.to, dx.add, &c, err));
    return cpe_plain_diff_finish(k, a, &dx, st, err);
}

static st_status act_forward(st_kernel *base, const st_kargs *a, st_error *err)
{
    cpe_kernel *k = (cpe_kernel *)base;
    st_cpe_counters c;
    st_status st = st_cpe_act_forward(k->ctx->cg, k->act.act, (size_t)a->n * k->act.count,
                                      a->src, a->dst, &c, err);
    return cpe_charge(&k->work, PASS_FWD, &c, a->training, st);
}

/* Elementwise, in its input's layout. When the values (dst) and their
 * gradient came in different layouts, the gradient is brought to the
 * values' layout (where the producer computed them, which is where its
 * backward will want it), or, when adding to an input gradient that has
 * a layout already, the values to the gradient's. */
static st_status act_backward_data(st_kernel *base, const st_kargs *a, st_error *err)
{
    cpe_kernel *k = (cpe_kernel *)base;
    cpe_layout_state *r = k->src_state;
    const float *y = a->dst, *dy = a->diff_dst;
    st_status st = ST_OK;
    if (r && r->data != r->diff) {
        cpe_shape s = {r->c, r->h, r->w};
        if (a->accumulate)
            st = cpe_layout_view(k, PASS_BWD_DATA, 1, SCRATCH_IN, &s, a->n, a->dst, r->data,
                                 r->diff, &y, err);
        else
            st = cpe_layout_view(k, PASS_BWD_DATA, 1, SCRATCH_DIFF, &s, a->n, a->diff_dst, r->diff,
                                 r->data, &dy, err);
        if (st == ST_OK && !a->accumulate)
            r->diff = r->data;
    }
    st_cpe_counters c;
    if (st == ST_OK)
        st = cpe_charge(&k->work, PASS_BWD_DATA, &c, 1,
                        st_cpe_act_backward(k->ctx->cg, k->act.act, (size_t)a->n * k->act.count, y,
                                            dy, a->diff_src, a->accumulate, &c, err));
    return st;
}

/* ---- the MPE's kernels: the reference backend's, costed ---- */

static void charge_mpe(cpe_kernel *k, int pass, double flops, double bytes, int training)
{
    if (training)
        k->work.now[pass].mpe_s +=
            st_cpe_mpe_seconds(st_cpe_cluster_cost_params(k->ctx->cg), flops, bytes);
}

/* Flops and bytes per sample of each pass of a kind the MPE runs: a
 * roofline's inputs, counted from the reference kernels' loops (each
 * value read and written once, 4 bytes). */
static void mpe_work_of(cpe_kernel *k, const st_kdesc *d)
{
    double in = 0.0, out = (double)st_kdesc_dst_values(d), flops = 0.0, bflops = 0.0;
    switch (d->kind) {
    case ST_K_BNORM:
        in = out;
        flops = 8.0 * out;  /* two statistics passes, normalise, scale, shift */
        bflops = 12.0 * out;
        break;
    case ST_K_LRN: {
        const st_lrn_desc *l = (const st_lrn_desc *)d;
        in = out;
        flops = out * (2.0 * l->size + 6.0);
        bflops = 2.0 * flops;
        break;
    }
    default: /* softmax: exp, sum, divide */
        in = out;
        flops = 4.0 * out;
        break;
    }
    k->mpe_flops[PASS_FWD] = flops;
    k->mpe_bytes[PASS_FWD] = 4.0 * (in + out);
    k->mpe_flops[PASS_BWD_DATA] = bflops;
    k->mpe_bytes[PASS_BWD_DATA] = 4.0 * (2.0 * out + 2.0 * in);
}

static st_status mpe_forward(st_kernel *base, const st_kargs *a, st_error *err)
{
    cpe_kernel *k = (cpe_kernel *)base;
    st_kargs plain = *a;
    st_status st = cpe_plain_src(k, a, PASS_FWD, a->training, &plain.src, err);
    if (st == ST_OK)
        st = k->mpe->ops->forward(k->mpe, &plain, err);
    if (st == ST_OK)
        charge_mpe(k, PASS_FWD, k->mpe_flops[PASS_FWD] * a->n, k->mpe_bytes[PASS_FWD] * a->n,
                   a->training);
    return st;
}

static st_status mpe_backward_data(st_kernel *base, const st_kargs *a, st_error *err)
{
    cpe_kernel *k = (cpe_kernel *)base;
    st_kargs plain = *a;
    cpe_plain_diff dx = {a->diff_src, 0, a->accumulate};
    st_status st = cpe_plain_src(k, a, PASS_BWD_DATA, 1, &plain.src, err);
    if (st == ST_OK && a->diff_src)
        st = cpe_plain_diff_dst(k, a, &dx, err);
    plain.diff_src = dx.to;
    plain.accumulate = dx.add;
    if (st == ST_OK)
        st = k->mpe->ops->backward_data(k->mpe, &plain, err);
    st = cpe_plain_diff_finish(k, a, &dx, st, err);
    if (st == ST_OK)
        charge_mpe(k, PASS_BWD_DATA, k->mpe_flops[PASS_BWD_DATA] * a->n,
                   k->mpe_bytes[PASS_BWD_DATA] * a->n, 1);
    return st;
}

/* Kinds whose backward_data computes every gradient have none. */
static st_status mpe_backward_weights(st_kernel *base, const st_kargs *a, st_error *err)
{
    cpe_kernel *k = (cpe_kernel *)base;
    if (!k->mpe->ops->backward_weights)
        return ST_OK;
    st_kargs plain = *a;
    st_status st = cpe_plain_src(k, a, PASS_BWD_WEIGHTS, 1, &plain.src, err);
    return st == ST_OK ? k->mpe->ops->backward_weights(k->mpe, &plain, err) : st;
}

st_status cpe_mpe_setup(cpe_kernel *k, const st_kdesc *d, st_error *err)
{
    /* The MPE kernel computes on plain NCHW: its input is transformed first
     * when it comes in another layout. */
    union {
        st_kdesc base;
        st_bnorm_desc bn;
        st_lrn_desc lrn;
        st_softmax_desc sm;
    } plain;
    size_t size = d->kind == ST_K_BNORM ? sizeof plain.bn
                  : d->kind == ST_K_LRN ? sizeof plain.lrn
                                        : sizeof plain.sm;
    memcpy(&plain, d, size);
    plain.base.src_layout = NULL;
    st_status st = st_backend_ref.kernel_create(NULL, &plain.base, &k->mpe, err);
    if (st != ST_OK)
        return st;
    /* the MPE kernel's sizes and layout are this one's */
    k->base.workspace_bytes = k->mpe->workspace_bytes;
    k->base.scratch_bytes = k->mpe->scratch_bytes;
    k->base.dst_layout = k->mpe->dst_layout;
    k->base.dst_bytes = k->mpe->dst_bytes;
    mpe_work_of(k, d);
    return ST_OK;
}

/* ---- the kernels' operations ---- */

const st_kernel_ops cpe_fc_ops = {fc_forward, fc_backward_data, fc_backward_weights,
                                  cpe_kernel_destroy};
const st_kernel_ops cpe_pool_ops = {pool_forward, pool_backward_data, NULL, cpe_kernel_destroy};
const st_kernel_ops cpe_act_ops = {act_forward, act_backward_data, NULL, cpe_kernel_destroy};
const st_kernel_ops cpe_mpe_ops = {mpe_forward, mpe_backward_data, mpe_backward_weights,
                                   cpe_kernel_destroy};
