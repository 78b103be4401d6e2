/* The `cpe` backend: each worker plays the MPE of one SW26010 core group
 * and runs its heavy kernels on an emulated 8x8 CPE cluster (include/cpe.h),
 * which computes the same results as the reference backend and predicts
 * what the real core group would spend.
 *
 * On the CPEs: convolution as explicit im2col + GEMM (swCaffe's explicit
 * scheme, per image and group: col = im2col(x); y = W col; backward
 * dcol = W^T dy, dx += col2im(dcol); dW += dy col^T) and inner products as
 * GEMM. Bias, activation and the bias gradient run on the MPE, as do the
 * other layer kinds (pooling, batch norm, LRN, activations, softmax: the
 * reference backend's kernels); their time is not predicted, and the
 * report says so. Every CPE launch's predicted time is added to its
 * kernel's forward / backward-data / backward-weights account;
 * st_cpe_backend_report prints them per layer. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "cpe.h"
#include "cpe_backend.h"
#include "ref/ref.h"

extern const st_backend st_backend_ref;

/* Passes a kernel accounts for. */
enum { PASS_FWD, PASS_BWD_DATA, PASS_BWD_WEIGHTS, PASSES };

typedef struct cpe_kernel cpe_kernel;

struct st_bctx {
    int worker;
    st_cpe_cluster *cg;
    cpe_kernel **kernels; /* the CPE kernels, in creation order (layer order) */
    int n_kernels, cap;
};

struct cpe_kernel {
    st_kernel base;
    st_bctx *ctx;
    st_conv_desc conv;     /* base.kind ST_K_CONV */
    st_fc_desc fc;         /* base.kind ST_K_FC */
    float *col;            /* conv: one image's [c/groups kh kw, oh ow] */
    st_cpe_counters pass[PASSES]; /* training calls only */
};

static st_status cpe_ctx_create(const st_backend_opts *o, st_bctx **out, st_error *err)
{
    st_bctx *c = st_calloc(1, sizeof *c, "cpe backend context", err);
    if (!c)
        return ST_ENOMEM;
    c->worker = o->worker;
    st_status st = st_cpe_cluster_create(&c->cg, err);
    if (st != ST_OK) {
        free(c);
        return st;
    }
    *out = c;
    return ST_OK;
}

static void cpe_ctx_destroy(st_bctx *ctx)
{
    if (!ctx)
        return;
    st_cpe_cluster_destroy(ctx->cg);
    free(ctx->kernels);
    free(ctx);
}

/* Add a launch to the pass's account; test-phase forwards are left out,
 * so the report is per training iteration. */
static void account(cpe_kernel *k, int pass, const st_cpe_counters *c, int training)
{
    if (training)
        st_cpe_counters_add(&k->pass[pass], c);
}

/* ---- MPE-side pieces ---- */

static void add_bias_act(float *y, const float *bias, int channels, size_t per_channel,
                         st_act act)
{
    for (int c = 0; bias && c < channels; c++)
        for (size_t i = 0; i < per_channel; i++)
            y[(size_t)c * per_channel + i] += bias[c];
    st_act_forward(act, y, (size_t)channels * per_channel);
}

/* db[c] = sum over samples and positions of dy [n, channels, per_channel]. */
static void bias_grad(float *db, const float *dy, int n, int channels, size_t per_channel)
{
    for (int c = 0; c < channels; c++) {
        double sum = 0.0;
        for (int s = 0; s < n; s++) {
            const float *row = dy + ((size_t)s * (size_t)channels + (size_t)c) * per_channel;
            for (size_t i = 0; i < per_channel; i++)
                sum += row[i];
        }
        db[c] = (float)sum;
    }
}

/* ---- convolution: im2col + GEMM ---- */

static st_cpe_conv_geom conv_geom(const st_conv_desc *d)
{
    st_cpe_conv_geom g = {d->ic / d->groups, d->ih, d->iw, d->oh, d->ow,
                          d->kh, d->kw, d->sh, d->sw, d->ph, d->pw};
    return g;
}

/* Image s, group g: the input, the weights and the output. */
typedef struct conv_part {
    size_t in, w, out;       /* offsets */
    size_t k, p, ocg;        /* GEMM sizes: K = c/g kh kw, P = oh ow, oc/g */
} conv_part;

static conv_part part_of(const st_conv_desc *d, int s, int g)
{
    conv_part q;
    size_t icg = (size_t)(d->ic / d->groups);
    q.ocg = (size_t)(d->oc / d->groups);
    q.k = icg * (size_t)d->kh * (size_t)d->kw;
    q.p = (size_t)d->oh * (size_t)d->ow;
    q.in = ((size_t)s * (size_t)d->ic + (size_t)g * icg) * (size_t)d->ih * (size_t)d->iw;
    q.w = (size_t)g * q.ocg * q.k;
    q.out = ((size_t)s * (size_t)d->oc + (size_t)g * q.ocg) * q.p;
    return q;
}

static st_status conv_forward(st_kernel *base, const st_kargs *a, st_error *err)
{
    cpe_kernel *k = (cpe_kernel *)base;
    const st_conv_desc *d = &k->conv;
    st_cpe_conv_geom geom = conv_geom(d);
    st_cpe_counters c;
    st_status st = ST_OK;
    for (int s = 0; s < a->n && st == ST_OK; s++) {
        for (int g = 0; g < d->groups && st == ST_OK; g++) {
            conv_part q = part_of(d, s, g);
            st = st_cpe_im2col(k->ctx->cg, &geom, a->src + q.in, k->col, &c, err);
            if (st == ST_OK) {
                account(k, PASS_FWD, &c, a->training);
                st = st_cpe_gemm(k->ctx->cg, ST_CPE_F32, 0, 0, q.ocg, q.p, q.k, 1.0,
                                 a->weights + q.w, q.k, k->col, q.p, 0.0, a->dst + q.out, q.p,
                                 &c, err);
            }
            if (st == ST_OK)
                account(k, PASS_FWD, &c, a->training);
        }
        if (st == ST_OK)
            add_bias_act(a->dst + (size_t)s * (size_t)d->oc * (size_t)d->oh * (size_t)d->ow,
                         d->bias ? a->bias : NULL, d->oc, (size_t)d->oh * (size_t)d->ow,
                         d->act);
    }
    return st;
}

static st_status conv_backward_data(st_kernel *base, const st_kargs *a, st_error *err)
{
    cpe_kernel *k = (cpe_kernel *)base;
    const st_conv_desc *d = &k->conv;
    if (!a->diff_src)
        return ST_OK;
    st_cpe_conv_geom geom = conv_geom(d);
    if (!a->accumulate)
        memset(a->diff_src, 0, (size_t)a->n * (size_t)d->ic * (size_t)d->ih * (size_t)d->iw *
                                   sizeof(float));
    st_cpe_counters c;
    st_status st = ST_OK;
    for (int s = 0; s < a->n && st == ST_OK; s++)
        for (int g = 0; g < d->groups && st == ST_OK; g++) {
            conv_part q = part_of(d, s, g);
            st = st_cpe_gemm(k->ctx->cg, ST_CPE_F32, 1, 0, q.k, q.p, q.ocg, 1.0,
                             a->weights + q.w, q.k, a->diff_dst + q.out, q.p, 0.0, k->col, q.p,
                             &c, err);
            if (st == ST_OK) {
                account(k, PASS_BWD_DATA, &c, 1);
                st = st_cpe_col2im(k->ctx->cg, &geom, k->col, a->diff_src + q.in, &c, err);
            }
            if (st == ST_OK)
                account(k, PASS_BWD_DATA, &c, 1);
        }
    return st;
}

static st_status conv_backward_weights(st_kernel *base, const st_kargs *a, st_error *err)
{
    cpe_kernel *k = (cpe_kernel *)base;
    const st_conv_desc *d = &k->conv;
    st_cpe_conv_geom geom = conv_geom(d);
    st_cpe_counters c;
    st_status st = ST_OK;
    for (int s = 0; s < a->n && st == ST_OK; s++)
        for (int g = 0; g < d->groups && st == ST_OK; g++) {
            conv_part q = part_of(d, s, g);
            st = st_cpe_im2col(k->ctx->cg, &geom, a->src + q.in, k->col, &c, err);
            if (st == ST_OK) {
                account(k, PASS_BWD_WEIGHTS, &c, 1);
                st = st_cpe_gemm(k->ctx->cg, ST_CPE_F32, 0, 1, q.ocg, q.k, q.p, 1.0,
                                 a->diff_dst + q.out, q.p, k->col, q.p, s == 0 ? 0.0 : 1.0,
                                 a->diff_weights + q.w, q.k, &c, err);
            }
            if (st == ST_OK)
                account(k, PASS_BWD_WEIGHTS, &c, 1);
        }
    if (st == ST_OK && d->bias && a->diff_bias)
        bias_grad(a->diff_bias, a->diff_dst, a->n, d->oc, (size_t)d->oh * (size_t)d->ow);
    return st;
}

/* ---- inner product: GEMM ---- */

static st_status fc_forward(st_kernel *base, const st_kargs *a, st_error *err)
{
    cpe_kernel *k = (cpe_kernel *)base;
    const st_fc_desc *d = &k->fc;
    st_cpe_counters c;
    st_status st = st_cpe_gemm(k->ctx->cg, ST_CPE_F32, 0, 1, (size_t)a->n, (size_t)d->out,
                               (size_t)d->in, 1.0, a->src, (size_t)d->in, a->weights,
                               (size_t)d->in, 0.0, a->dst, (size_t)d->out, &c, err);
    if (st == ST_OK) {
        account(k, PASS_FWD, &c, a->training);
        for (int s = 0; s < a->n; s++)
            add_bias_act(a->dst + (size_t)s * (size_t)d->out, d->bias ? a->bias : NULL, d->out,
                         1, d->act);
    }
    return st;
}

static st_status fc_backward_data(st_kernel *base, const st_kargs *a, st_error *err)
{
    cpe_kernel *k = (cpe_kernel *)base;
    const st_fc_desc *d = &k->fc;
    if (!a->diff_src)
        return ST_OK;
    st_cpe_counters c;
    st_status st = st_cpe_gemm(k->ctx->cg, ST_CPE_F32, 0, 0, (size_t)a->n, (size_t)d->in,
                               (size_t)d->out, 1.0, a->diff_dst, (size_t)d->out, a->weights,
                               (size_t)d->in, a->accumulate ? 1.0 : 0.0, a->diff_src,
                               (size_t)d->in, &c, err);
    if (st == ST_OK)
        account(k, PASS_BWD_DATA, &c, 1);
    return st;
}

static st_status fc_backward_weights(st_kernel *base, const st_kargs *a, st_error *err)
{
    cpe_kernel *k = (cpe_kernel *)base;
    const st_fc_desc *d = &k->fc;
    st_cpe_counters c;
    st_status st = st_cpe_gemm(k->ctx->cg, ST_CPE_F32, 1, 0, (size_t)d->out, (size_t)d->in,
                               (size_t)a->n, 1.0, a->diff_dst, (size_t)d->out, a->src,
                               (size_t)d->in, 0.0, a->diff_weights, (size_t)d->in, &c, err);
    if (st == ST_OK) {
        account(k, PASS_BWD_WEIGHTS, &c, 1);
        if (d->bias && a->diff_bias)
            bias_grad(a->diff_bias, a->diff_dst, a->n, d->out, 1);
    }
    return st;
}

static void cpe_kernel_destroy(st_kernel *base)
{
    cpe_kernel *k = (cpe_kernel *)base;
    free(k->col);
    free(k);
}

static const st_kernel_ops conv_ops = {conv_forward, conv_backward_data, conv_backward_weights,
                                       cpe_kernel_destroy};
static const st_kernel_ops fc_ops = {fc_forward, fc_backward_data, fc_backward_weights,
                                     cpe_kernel_destroy};

static st_status remember(st_bctx *ctx, cpe_kernel *k, st_error *err)
{
    if (ctx->n_kernels == ctx->cap) {
        int cap = ctx->cap ? 2 * ctx->cap : 16;
        cpe_kernel **grown = realloc(ctx->kernels, (size_t)cap * sizeof *grown);
        if (!grown)
            return st_fail(err, ST_ENOMEM, "out of memory for the cpe backend's kernel list");
        ctx->kernels = grown;
        ctx->cap = cap;
    }
    ctx->kernels[ctx->n_kernels++] = k;
    return ST_OK;
}

static st_status cpe_kernel_create(st_bctx *ctx, const st_kdesc *d, st_kernel **out,
                                   st_error *err)
{
    if (d->src_layout)
        return st_fail(err, ST_EINTERNAL, "cpe backend: input in a foreign layout");
    if (d->kind != ST_K_CONV && d->kind != ST_K_FC) /* the MPE runs the rest */
        return st_backend_ref.kernel_create(NULL, d, out, err);
    cpe_kernel *k = ref_kernel_new(sizeof *k, d->kind == ST_K_CONV ? &conv_ops : &fc_ops, d,
                                   err);
    if (!k)
        return ST_ENOMEM;
    k->ctx = ctx;
    if (d->kind == ST_K_CONV) {
        k->conv = *(const st_conv_desc *)d;
        conv_part q = part_of(&k->conv, 0, 0);
        k->col = st_calloc(q.k * q.p, sizeof *k->col, "cpe im2col buffer", err);
        if (!k->col) {
            free(k);
            return ST_ENOMEM;
        }
    } else {
        k->fc = *(const st_fc_desc *)d;
    }
    st_status st = remember(ctx, k, err);
    if (st != ST_OK) {
        cpe_kernel_destroy(&k->base);
        return st;
    }
    *out = &k->base;
    return ST_OK;
}

/* Kernels are created per batch size; the report sums a layer's kernels
 * (same descriptor apart from n) into one line. */
static int same_layer(const cpe_kernel *a, const cpe_kernel *b)
{
    if (a->base.kind != b->base.kind)
        return 0;
    if (a->base.kind == ST_K_CONV) {
        st_conv_desc x = a->conv, y = b->conv;
        x.base = y.base;
        return memcmp(&x, &y, sizeof x) == 0;
    }
    st_fc_desc x = a->fc, y = b->fc;
    x.base = y.base;
    return memcmp(&x, &y, sizeof x) == 0;
}

void st_cpe_backend_report(const st_bctx *ctx, long iterations, int images_per_iteration,
                           void (*print)(void *pctx, const char *line), void *pctx)
{
    char line[256];
    double per_iter = iterations > 0 ? (double)iterations : 1.0, total = 0.0;
    print(pctx, "cpe: predicted SW26010 core-group ms per iteration (worker 0's shard):");
    print(pctx, "cpe: kernel                    forward  bwd-data  bwd-weights  flop/byte  "
                "strategy");
    for (int i = 0; i < ctx->n_kernels; i++) {
        const cpe_kernel *k = ctx->kernels[i];
        int seen = 0;
        for (int j = 0; j < i && !seen; j++)
            seen = same_layer(ctx->kernels[j], k);
        if (seen)
            continue;
        st_cpe_counters sum[PASSES];
        memset(sum, 0, sizeof sum);
        for (int j = i; j < ctx->n_kernels; j++)
            for (int p = 0; p < PASSES && same_layer(ctx->kernels[j], k); p++)
                st_cpe_counters_add(&sum[p], &ctx->kernels[j]->pass[p]);
        double bytes = 0.0, flops = 0.0, ms[PASSES];
        for (int p = 0; p < PASSES; p++) {
            bytes += (double)(sum[p].dma_get_bytes + sum[p].dma_put_bytes);
            flops += (double)sum[p].flops;
            ms[p] = 1e3 * sum[p].time.total_s / per_iter;
            total += sum[p].time.total_s / per_iter;
        }
        char what[64];
        if (k->base.kind == ST_K_CONV)
            snprintf(what, sizeof what, "conv %dx%d %d->%d %dx%d", k->conv.kh, k->conv.kw,
                     k->conv.ic, k->conv.oc, k->conv.oh, k->conv.ow);
        else
            snprintf(what, sizeof what, "fc %d->%d", k->fc.in, k->fc.out);
        snprintf(line, sizeof line, "cpe: %-24s %8.3f %9.3f %12.3f %10.2f  %s", what, ms[0],
                 ms[1], ms[2], bytes > 0 ? flops / bytes : 0.0,
                 k->base.kind == ST_K_CONV ? "explicit (im2col + GEMM)" : "GEMM");
        print(pctx, line);
    }
    snprintf(line, sizeof line, "cpe: %.3f ms per iteration on the CPEs for %d images; one "
             "SW26010 (4 core groups, one shard each) would train %.0f img/s. Bias, "
             "activations, pooling, batch norm, LRN and softmax run on the MPE and are not "
             "costed.", 1e3 * total, images_per_iteration,
             total > 0 ? 4.0 * images_per_iteration / total : 0.0);
    print(pctx, line);
}

const st_backend st_backend_cpe = {
    .name = "cpe",
    .ctx_create = cpe_ctx_create,
    .ctx_destroy = cpe_ctx_destroy,
    .kernel_create = cpe_kernel_create,
};
