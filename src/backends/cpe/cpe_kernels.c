/* The `cpe` backend's kernels other than convolution (cpe_conv.c): the
 * bias, activation and bias gradient of convolutions and inner products,
 * inner products as GEMM, max and average pooling and the activation
 * layers, all on the CPEs; LRN and softmax on the MPE (the reference
 * backend's kernels, costed with the MPE roofline st_cpe_mpe_seconds, LRN
 * with the CPE launches of swCaffe's helpers it makes too); and batch norm
 * computed by the reference kernel but costed as swCaffe runs Caffe's
 * BatchNorm and Scale layers, pass by pass over the tensor on the CPEs
 * (cpe_charge_streams). Kernels that compute on plain NCHW take their
 * input and give their input gradient through cpe_layouts.c. */
#include <stdio.h>
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

/* The flops and bytes per sample of the passes of a kernel the MPE runs (a
 * roofline's inputs, counted from the reference kernels' loops, each value
 * read and written once, 4 bytes): forward and backward-data flops per
 * value of dst. */
static void mpe_work(cpe_kernel *k, const st_kdesc *d, double flops, double bflops)
{
    double values = (double)st_kdesc_dst_values(d);
    k->mpe_flops[PASS_FWD] = flops * values;
    k->mpe_bytes[PASS_FWD] = 4.0 * 2.0 * values;
    k->mpe_flops[PASS_BWD_DATA] = bflops * values;
    k->mpe_bytes[PASS_BWD_DATA] = 4.0 * 4.0 * values;
}

/* Batch norm as swCaffe trains it: Caffe's BatchNorm layer followed by its
 * Scale layer (gamma and beta), each a sequence of whole-tensor passes that
 * swCaffe's USE_SWBASE build runs on the CPEs (sw_memcpy_f, sw_mul / sw_div /
 * sw_sqr, the vendor BLAS's gemv and its K = 1 gemm for the per-channel
 * broadcasts). Counted from swCaffe's batch_norm_layer.cpp and Caffe's
 * scale_layer.cpp / bias_layer.cpp (github feifeibear/SWCaffe), in values of
 * the tensor read or written (4 bytes each), training mode:
 *   forward: copy bottom -> top 2, mean gemv 1, subtract the mean (gemm,
 *     beta 1) 2, square into temp 2, variance gemv 1, broadcast the std
 *     into temp (gemm, beta 0) 1, divide 3, keep x_norm 2: 14; Scale's
 *     multiply 2 and Bias's broadcast add (gemm, beta 1) 2: 4. In all 18;
 *   backward-data: multiply top by top_diff 3, gemv 1, broadcast 1,
 *     multiply 3, gemv 1, broadcast add 2, axpby 3, divide 3: 17; Scale's
 *     gradient product 3 and its gemv 1, Bias's gemv 1, the gradient times
 *     gamma 2: 7. In all 24.
 * One launch over the batch (cpe_charge_streams). */
#define BNORM_FWD_VALUES 18.0
#define BNORM_BWD_VALUES 24.0

static st_status mpe_forward(st_kernel *base, const st_kargs *a, st_error *err)
{
    cpe_kernel *k = (cpe_kernel *)base;
    st_kargs plain = *a;
    st_status st = cpe_plain_src(k, a, PASS_FWD, a->training, &plain.src, err);
    if (st == ST_OK)
        st = k->mpe->ops->forward(k->mpe, &plain, err);
    if (st == ST_OK)
        st = cpe_charge_streams(k->ctx, &k->work, PASS_FWD, &k->streams[PASS_FWD], a->n,
                                a->training, NULL, err);
    if (st == ST_OK && k->mpe_bytes[PASS_FWD] > 0)
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
        st = cpe_charge_streams(k->ctx, &k->work, PASS_BWD_DATA, &k->streams[PASS_BWD_DATA], a->n,
                                1, NULL, err);
    if (st == ST_OK && k->mpe_bytes[PASS_BWD_DATA] > 0)
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

/* An MPE kernel: the reference kernel (k->mpe), which computes on plain
 * NCHW (its input is transformed first when it comes in another layout),
 * and its sizes and layout, which are k's. */
static st_status mpe_setup(cpe_kernel *k, const st_kdesc *d, const char *noun, st_error *err)
{
    st_kdesc_any plain;
    memcpy(&plain, d, st_kdesc_size(d->kind));
    plain.base.src_layout = NULL;
    snprintf(k->what, sizeof k->what, "%s %zu", noun, st_kdesc_dst_values(d));
    cpe_input_shape(k, (int)st_kdesc_dst_values(d), 1, 1);
    st_status st = st_backend_ref.kernel_create(NULL, &plain.base, &k->mpe, err);
    if (st != ST_OK)
        return st;
    k->base.workspace_bytes = k->mpe->workspace_bytes;
    k->base.scratch_bytes = k->mpe->scratch_bytes;
    k->base.dst_layout = k->mpe->dst_layout;
    k->base.dst_bytes = k->mpe->dst_bytes;
    return ST_OK;
}

/* Batch norm: the reference kernel's result, swCaffe's passes' cost. */
static st_status bnorm_setup(cpe_kernel *k, const st_kdesc *d, st_error *err)
{
    st_stream_work_add(&k->streams[PASS_FWD], 0.0, st_kdesc_dst_values(d), BNORM_FWD_VALUES);
    st_stream_work_add(&k->streams[PASS_BWD_DATA], 0.0, st_kdesc_dst_values(d), BNORM_BWD_VALUES);
    return mpe_setup(k, d, "batchnorm", err);
}

/* Floating-point operations of one powf on its general path (x > 0, y
 * not an integer), counted in fdlibm's e_powf.c (the C library's powf on
 * most systems): log2(x) in pieces (a division, a degree-6 polynomial and
 * the error terms, about 53), y times it split (6), 2^z (a degree-5
 * polynomial, a division and the corrections, about 31). */
#define POWF_FLOPS 90.0

/* LRN across channels as swCaffe trains it: Caffe's CPU code
 * (lrn_layer.cpp's CrossChannelForward_cpu / CrossChannelBackward_cpu,
 * which swCaffe did not port), whose loops run on the MPE and whose
 * caffe_sqr / caffe_copy / caffe_mul / caffe_div calls launch swCaffe's
 * sw_*_f helpers (math_functions.cpp under USE_SWBASE: on the CPEs, or on
 * the MPE for a plane under 256 floats, cpe_charge_streams). Counted per
 * value of the C x P tensor (P = h w, S = the window), n samples:
 *   forward, MPE: the scale set to k (a write), S + 2 (C - 1) axpys of a
 *     plane an image (2 flops, a read of each operand and a write), and
 *     caffe_powx: one powf a value (a read and a write);
 *   forward, CPEs: the square of each image (n launches), the copy of
 *     each plane but the first (n (C - 1) launches), the product with the
 *     input over the batch (one launch, 3 streams);
 *   backward, MPE: caffe_powx again, per image a set of one plane and
 *     S - 1 axpys, and per plane 3 axpys;
 *   backward, CPEs: the product over the batch, per image a product and a
 *     quotient, per plane a product (n C launches), 3 streams each.
 * The vendor BLAS's cblas_saxpy on one plane (a few thousand floats) is
 * costed on the MPE, as the loops around it (an assumption: its code is
 * not published). The one-off memset of a padded one-image buffer per
 * pass is left out. */
static st_status lrn_setup(cpe_kernel *k, const st_kdesc *d, st_error *err)
{
    const st_lrn_desc *l = (const st_lrn_desc *)d;
    double c = l->c, s = l->size, values = (double)st_kdesc_dst_values(d);
    size_t plane = (size_t)l->h * l->w, image = st_kdesc_dst_values(d);
    double axpy_fwd = (s + 2.0 * (c - 1.0)) / c, axpy_bwd = (s - 1.0) / c + 3.0;
    k->mpe_flops[PASS_FWD] = (POWF_FLOPS + 2.0 * axpy_fwd) * values;
    k->mpe_bytes[PASS_FWD] = (4.0 + 12.0 * axpy_fwd + 8.0) * values;
    k->mpe_flops[PASS_BWD_DATA] = (POWF_FLOPS + 2.0 * axpy_bwd) * values;
    k->mpe_bytes[PASS_BWD_DATA] = (8.0 + 4.0 / c + 12.0 * axpy_bwd) * values;
    st_stream_work_add(&k->streams[PASS_FWD], 1.0, image, 2.0);
    st_stream_work_add(&k->streams[PASS_FWD], c - 1.0, plane, 2.0);
    st_stream_work_add(&k->streams[PASS_FWD], 0.0, image, 3.0);
    st_stream_work_add(&k->streams[PASS_BWD_DATA], 0.0, image, 3.0);
    st_stream_work_add(&k->streams[PASS_BWD_DATA], 2.0, image, 3.0);
    st_stream_work_add(&k->streams[PASS_BWD_DATA], c, plane, 3.0);
    return mpe_setup(k, d, "lrn", err);
}

/* Softmax: exp, sum, divide; its gradient is the loss layer's. */
static st_status softmax_setup(cpe_kernel *k, const st_kdesc *d, st_error *err)
{
    mpe_work(k, d, 4.0, 0.0);
    return mpe_setup(k, d, "softmax", err);
}

static st_status fc_setup(cpe_kernel *k, const st_kdesc *d, st_error *err)
{
    (void)err;
    k->fc = *(const st_fc_desc *)d;
    snprintf(k->what, sizeof k->what, "fc %d->%d", k->fc.in, k->fc.out);
    cpe_input_shape(k, k->fc.in, 1, 1);
    return ST_OK;
}

static st_status pool_setup(cpe_kernel *k, const st_kdesc *d, st_error *err)
{
    (void)err;
    const st_pool_desc *p = &k->pool;
    k->pool = *(const st_pool_desc *)d;
    snprintf(k->what, sizeof k->what, "%s pool %dx%d/%d %dx%dx%d",
             p->alg == ST_POOL_MAX ? "max" : "avg", p->kh, p->kw, p->sh, p->c, p->oh, p->ow);
    cpe_input_shape(k, p->c, p->ih, p->iw);
    if (p->alg == ST_POOL_MAX) /* the argmax, as the reference keeps it */
        k->base.workspace_bytes =
            (size_t)d->n * (size_t)p->c * (size_t)p->oh * (size_t)p->ow * sizeof(int);
    return ST_OK;
}

static st_status act_setup(cpe_kernel *k, const st_kdesc *d, st_error *err)
{
    (void)err;
    k->act = *(const st_act_desc *)d;
    snprintf(k->what, sizeof k->what, "%s x%zu", st_act_names[k->act.act], k->act.count);
    cpe_input_shape(k, (int)k->act.count, 1, 1);
    k->base.dst_layout = d->src_layout; /* elementwise: the input's layout */
    return ST_OK;
}

/* ---- the kinds ---- */

static const st_kernel_ops fc_ops = {fc_forward, fc_backward_data, fc_backward_weights,
                                     cpe_kernel_destroy};
static const st_kernel_ops pool_ops = {pool_forward, pool_backward_data, NULL,
                                       cpe_kernel_destroy};
static const st_kernel_ops act_ops = {act_forward, act_backward_data, NULL, cpe_kernel_destroy};
static const st_kernel_ops mpe_ops = {mpe_forward, mpe_backward_data, mpe_backward_weights,
                                      cpe_kernel_destroy};

const cpe_kind cpe_kind_fc = {&fc_ops, "CPEs", fc_setup};
const cpe_kind cpe_kind_pool = {&pool_ops, "CPEs", pool_setup};
const cpe_kind cpe_kind_act = {&act_ops, "CPEs", act_setup};
const cpe_kind cpe_kind_bnorm = {&mpe_ops, "CPEs", bnorm_setup};
const cpe_kind cpe_kind_lrn = {&mpe_ops, "MPE", lrn_setup};
const cpe_kind cpe_kind_softmax = {&mpe_ops, "MPE", softmax_setup};
