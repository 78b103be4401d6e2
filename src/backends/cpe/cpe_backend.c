/* The `cpe` backend: each worker plays the MPE of one SW26010 core group
 * and runs its kernels on an emulated 8x8 CPE cluster (include/cpe/cpe.h),
 * which computes the same results as the reference backend and predicts
 * what the real core group would spend.
 *
 * On the CPEs, as swCaffe ran each layer:
 *   - convolution, two ways, chosen per layer and pass by predicted time on
 *     the first training calls (one each, swCaffe's first two iterations):
 *     explicit, im2col of a chunk of images in one launch, then a GEMM
 *     launch per group over the chunk (the batch folded into the GEMM's
 *     columns; col2im in backward-data, the batch reduced inside the GEMM
 *     in backward-weights); and implicit, swDNN's kernel
 *     (st_cpe_swdnn_conv_run), where its blocking takes the shape;
 *   - the tensor transformation layer: the implicit kernels work on tensors
 *     with the batch innermost, so a convolution's output stays in that
 *     layout when its consumer is a cpe kernel (its dst_layout is a record
 *     saying, call by call, which layout its values and its gradient are
 *     in), and a kernel that needs the other layout transforms the tensor
 *     on the CPEs first. So a run of implicit layers pays for one
 *     transformation where it begins and one where it ends, in each
 *     direction, and the weights are transformed at each implicit call (as
 *     swCaffe does); the transformations are charged to the kernel that
 *     needs them, apart from its own launches;
 *   - inner products as GEMM; bias and activation (st_cpe_bias_act) and
 *     the bias gradient (st_cpe_bias_grad) of both;
 *   - max and average pooling, and the activation layers;
 *   - the sliced aggregation's gradient sum and the solver update of the
 *     worker's slice (slice_reduce, slice_apply).
 * On the MPE (the reference backend's kernels, costed with the MPE
 * roofline st_cpe_mpe_seconds): batch norm, LRN and softmax.
 *
 * Accounting: every kernel keeps the predicted time of the iteration in
 * progress per pass (forward, backward-data, backward-weights; test-phase
 * forwards are left out); iteration_end moves it into the run's totals and
 * the per-iteration record; cpe_report.c prints and writes them. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpe_backend.h"
#include "cpe_backend_internal.h"
#include "base/memory.h"
#include "backends/ref.h"

extern const st_backend st_backend_ref;

const char *const cpe_conv_strategy_names[CONV_STRATEGIES] = {"explicit", "implicit"};
const char *const cpe_pass_names[PASSES] = {"fwd", "bwd_data", "bwd_weights"};

/* The explicit convolution folds as many images into one im2col + GEMM as
 * keep its column matrix under this size (the rest in further chunks). */
#define EXPLICIT_COL_BYTES ((size_t)256 << 20)

/* ---- accounting ---- */

double cpe_account_seconds(const cpe_account *a)
{
    return a->cpe.time.total_s + a->mpe_s;
}

static void account_add(cpe_account *dst, const cpe_account *src)
{
    st_cpe_counters_add(&dst->cpe, &src->cpe);
    dst->mpe_s += src->mpe_s;
}

/* Add a launch's counters c to w's pass when it succeeded (st) during
 * training; returns st. */
static st_status charge(cpe_work *w, int pass, const st_cpe_counters *c, int training,
                        st_status st)
{
    if (st == ST_OK && training)
        st_cpe_counters_add(&w->now[pass].cpe, c);
    return st;
}

static void charge_mpe(cpe_kernel *k, int pass, double flops, double bytes, int training)
{
    if (training)
        k->work.now[pass].mpe_s +=
            st_cpe_mpe_seconds(st_cpe_cluster_cost_params(k->ctx->cg), flops, bytes);
}

void cpe_work_close(cpe_work *w, long iteration)
{
    for (int p = 0; p < PASSES; p++) {
        account_add(iteration < CONV_TRIALS ? &w->trials[p] : &w->steady[p], &w->now[p]);
        memset(&w->now[p], 0, sizeof w->now[p]);
    }
}

static void cpe_iteration_end(st_bctx *ctx, long iter)
{
    for (int i = 0; i < ctx->n_kernels; i++) {
        cpe_kernel *k = ctx->kernels[i];
        if (ctx->trace) {
            cpe_trace_row(ctx->trace, iter, k->what, &k->work);
            /* Only kernels that can meet another layout transform. */
            if (k->base.kind == ST_K_CONV || k->src_state)
                cpe_trace_row(ctx->trace, iter, "  layout transformations", &k->layout);
        }
        cpe_work_close(&k->work, ctx->iterations);
        cpe_work_close(&k->layout, ctx->iterations);
    }
    for (int i = 0; i < ctx->n_host; i++) {
        if (ctx->trace)
            cpe_trace_row(ctx->trace, iter, ctx->host[i].what, &ctx->host[i].work);
        cpe_work_close(&ctx->host[i].work, ctx->iterations);
    }
    if (ctx->trace) {
        cpe_trace_row(ctx->trace, iter, "gradient sum + update", &ctx->reduce_update);
        fflush(ctx->trace);
    }
    cpe_work_close(&ctx->reduce_update, ctx->iterations);
    ctx->iterations++;
}

/* ---- context ---- */

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
    if (ctx->trace) { /* a run that did not finish: no half-written trace is left */
        char partial[sizeof ctx->trace_path + 8];
        snprintf(partial, sizeof partial, "%s.partial", ctx->trace_path);
        fclose(ctx->trace);
        remove(partial);
    }
    st_cpe_cluster_destroy(ctx->cg);
    free(ctx->host);
    for (int i = 0; i < SCRATCHES; i++)
        st_free_aligned(ctx->scratch[i]);
    free(ctx->kernels);
    free(ctx);
}

st_status st_cpe_backend_run_begin(st_bctx *ctx, int cost_only, const char *report_path,
                                   st_error *err)
{
    ctx->cost_only = cost_only != 0;
    st_cpe_cluster_set_cost_only(ctx->cg, ctx->cost_only);
    if (!report_path)
        return ST_OK;
    int len = snprintf(ctx->report_path, sizeof ctx->report_path, "%s", report_path);
    if (len < 0 || (size_t)len + sizeof ".partial" > sizeof ctx->report_path)
        return st_fail(err, ST_EUSAGE, "--cpe-report %s: path too long", report_path);
    return ST_OK;
}

/* Scratch buffer `which`, at least floats long (grown once, kept). */
static st_status scratch(st_bctx *ctx, int which, size_t floats, float **out, st_error *err)
{
    if (ctx->scratch_floats[which] < floats) {
        st_free_aligned(ctx->scratch[which]);
        ctx->scratch[which] = NULL;
        ctx->scratch_floats[which] = 0;
        ctx->scratch[which] = st_alloc_aligned(floats * sizeof(float), "cpe backend scratch", err);
        if (!ctx->scratch[which])
            return ST_ENOMEM;
        ctx->scratch_floats[which] = floats;
    }
    *out = ctx->scratch[which];
    return ST_OK;
}

/* ---- layouts at the kernels' edges ---- */

/* Per-sample shape of a tensor whose layout can change. */
typedef struct cpe_shape {
    int c, h, w;
} cpe_shape;

static size_t shape_floats(const cpe_shape *s, int n)
{
    return (size_t)n * (size_t)s->c * (size_t)s->h * (size_t)s->w;
}

/* t (n samples of shape s, in layout have) in layout want: t itself, or a
 * copy transformed on the CPEs into scratch slot, charged to k's layout
 * work of the pass. */
static st_status layout_view(cpe_kernel *k, int pass, int training, int slot, const cpe_shape *s,
                             int n, const float *t, st_cpe_layout have, st_cpe_layout want,
                             const float **out, st_error *err)
{
    *out = t;
    if (have == want)
        return ST_OK;
    float *copy;
    st_status st = scratch(k->ctx, slot, shape_floats(s, n), &copy, err);
    if (st != ST_OK)
        return st;
    st_cpe_counters c;
    st = st_cpe_relayout(k->ctx->cg, n, s->c, s->h, s->w, have, t, want, copy, &c, err);
    *out = copy;
    return charge(&k->layout, pass, &c, training, st);
}

/* dst (layout target, n samples of shape s) = result (layout have), or +=
 * it with accumulate; result is a scratch buffer. */
static st_status layout_store(cpe_kernel *k, int pass, const cpe_shape *s, int n, float *result,
                              st_cpe_layout have, float *dst, st_cpe_layout target, int accumulate,
                              st_error *err)
{
    st_cpe_counters c;
    const float *src = result;
    if (have != target) {
        float *into = dst;
        st_status st = accumulate ? scratch(k->ctx, SCRATCH_OUT2, shape_floats(s, n), &into, err)
                                  : ST_OK;
        if (st == ST_OK)
            st = charge(&k->layout, pass, &c, 1,
                        st_cpe_relayout(k->ctx->cg, n, s->c, s->h, s->w, have, result, target,
                                        into, &c, err));
        if (st != ST_OK || !accumulate)
            return st;
        src = into;
    }
    /* dst (+)= src: the linear activation's backward is the addition. */
    return charge(&k->layout, pass, &c, 1,
                  st_cpe_act_backward(k->ctx->cg, ST_ACT_LINEAR, shape_floats(s, n), src, src,
                                      dst, accumulate, &c, err));
}

static st_cpe_layout src_data_layout(const cpe_kernel *k)
{
    return k->src_state ? k->src_state->data : ST_CPE_NCHW;
}

/* The layout this kernel's output gradient comes in: its own record's, or
 * plain when its output is plain. */
static st_cpe_layout own_diff_layout(const cpe_kernel *k)
{
    return k->base.dst_layout ? k->own.diff : ST_CPE_NCHW;
}

/* The layout a kernel that computes in `natural` writes its input gradient
 * in: its own choice when it overwrites a gradient that has a record, the
 * record's when it adds to it, plain without a record. Sets the record. */
static st_cpe_layout diff_target(cpe_kernel *k, st_cpe_layout natural, int accumulate)
{
    if (!k->src_state)
        return ST_CPE_NCHW;
    if (!accumulate)
        k->src_state->diff = natural;
    return k->src_state->diff;
}

/* The input of a kernel that computes on plain NCHW: a->src, or its
 * transformed copy. */
static st_status plain_src(cpe_kernel *k, const st_kargs *a, int pass, int training,
                           const float **out, st_error *err)
{
    cpe_shape s = {k->in_c, k->in_h, k->in_w};
    return layout_view(k, pass, training, SCRATCH_IN, &s, a->n, a->src, src_data_layout(k),
                       ST_CPE_NCHW, out, err);
}

/* Where a kernel computing a plain NCHW input gradient writes it: straight
 * into diff_src, or into scratch (*stored set) to be stored with
 * layout_store. */
static st_status plain_diff_dst(cpe_kernel *k, const st_kargs *a, float **out, int *stored,
                                st_error *err)
{
    cpe_shape s = {k->in_c, k->in_h, k->in_w};
    *stored = diff_target(k, ST_CPE_NCHW, a->accumulate) != ST_CPE_NCHW;
    if (!*stored) {
        *out = a->diff_src;
        return ST_OK;
    }
    return scratch(k->ctx, SCRATCH_OUT, shape_floats(&s, a->n), out, err);
}

static st_status plain_diff_finish(cpe_kernel *k, const st_kargs *a, float *result,
                                   st_error *err)
{
    cpe_shape s = {k->in_c, k->in_h, k->in_w};
    return layout_store(k, PASS_BWD_DATA, &s, a->n, result, ST_CPE_NCHW, a->diff_src,
                        k->src_state->diff, a->accumulate, err);
}

/* ---- bias, activation and bias gradient of conv and fc, on the CPEs ---- */

/* y [n, channels, per_channel] += bias, then the activation. */
static st_status epilogue(cpe_kernel *k, float *y, const float *bias, int n, int channels,
                          size_t per_channel, st_act act, int training, st_error *err)
{
    if (!bias && act == ST_ACT_LINEAR)
        return ST_OK;
    st_cpe_counters c;
    st_status st = st_cpe_bias_act(k->ctx->cg, n, channels, per_channel, bias, act, y, &c, err);
    return charge(&k->work, PASS_FWD, &c, training, st);
}

/* db [channels] = sum over samples and positions of dy [n, channels, per_channel]. */
static st_status bias_grad(cpe_kernel *k, float *db, const float *dy, int n, int channels,
                           size_t per_channel, st_error *err)
{
    st_cpe_counters c;
    st_status st = st_cpe_bias_grad(k->ctx->cg, n, channels, per_channel, dy, db, &c, err);
    return charge(&k->work, PASS_BWD_WEIGHTS, &c, 1, st);
}

/* ---- convolution: strategies ---- */

static st_cpe_conv_geom conv_geom(const st_conv_desc *d)
{
    st_cpe_conv_geom g = {d->ic / d->groups, d->ih, d->iw, d->oh, d->ow,
                          d->kh, d->kw, d->sh, d->sw, d->ph, d->pw, d->oc / d->groups};
    return g;
}

/* Which strategies can run each pass with n images (the explicit one
 * always; the implicit one where swDNN's blocking takes the shape). */
/* The emulator's name of each pass. */
static const st_cpe_conv_pass conv_pass_of[PASSES] = {
    ST_CPE_CONV_FORWARD, ST_CPE_CONV_BACKWARD_DATA, ST_CPE_CONV_BACKWARD_WEIGHTS};

static void conv_strategies(cpe_kernel *k, int n)
{
    for (int p = 0; p < PASSES; p++) {
        k->runs[CONV_EXPLICIT][p] = 1;
        if (k->conv.groups != 1) {
            snprintf(k->why_not[p], sizeof k->why_not[p],
                     "%d groups: swDNN convolves all channels at once", k->conv.groups);
            k->runs[CONV_IMPLICIT][p] = 0;
        } else {
            k->runs[CONV_IMPLICIT][p] =
                st_cpe_conv_implicit_fits(&k->geom, n, conv_pass_of[p], k->why_not[p],
                                          sizeof k->why_not[p]);
        }
    }
}

/* The strategy of this call of a pass: during training the first calls try
 * each strategy that can run, in turn; then the chosen one. Test-phase
 * forwards use the choice (explicit until there is one). */
static int conv_strategy(const cpe_kernel *k, int pass, int training)
{
    if (training && k->calls[pass] < CONV_TRIALS) {
        int s = (int)k->calls[pass];
        return k->runs[s][pass] ? s : CONV_EXPLICIT;
    }
    return k->chosen[pass];
}

/* After a training call that took seconds (its own launches) and layout
 * (its transformations) with strategy s: count it, and choose once the
 * trials are over, by the sum. */
static void conv_called(cpe_kernel *k, int pass, int s, double seconds, double layout)
{
    if (k->calls[pass] >= CONV_TRIALS)
        return;
    if (k->runs[s][pass] && s == (int)k->calls[pass]) {
        k->tried[s][pass] = seconds;
        k->tried_layout[s][pass] = layout;
    }
    if (++k->calls[pass] < CONV_TRIALS)
        return;
    k->chosen[pass] = CONV_EXPLICIT;
    for (int t = 1; t < CONV_STRATEGIES; t++)
        if (k->runs[t][pass] &&
            k->tried[t][pass] + k->tried_layout[t][pass] <
                k->tried[k->chosen[pass]][pass] + k->tried_layout[k->chosen[pass]][pass])
            k->chosen[pass] = t;
}

typedef st_status (*conv_pass_fn)(cpe_kernel *k, const st_kargs *a, st_error *err);

static st_status conv_run(cpe_kernel *k, int pass, const conv_pass_fn fn[CONV_STRATEGIES],
                          const st_kargs *a, int training, st_error *err)
{
    int s = conv_strategy(k, pass, training);
    char why[192];
    /* The strategies were settled for the largest batch; a smaller one
     * (a last partial batch) may not suit swDNN's blocking. */
    if (s == CONV_IMPLICIT && a->n != k->base_n &&
        !st_cpe_conv_implicit_fits(&k->geom, a->n, conv_pass_of[pass], why, sizeof why))
        s = CONV_EXPLICIT;
    double before = cpe_account_seconds(&k->work.now[pass]);
    double before_layout = cpe_account_seconds(&k->layout.now[pass]);
    st_status st = fn[s](k, a, err);
    if (st == ST_OK && training && a->n == k->base_n)
        conv_called(k, pass, s, cpe_account_seconds(&k->work.now[pass]) - before,
                    cpe_account_seconds(&k->layout.now[pass]) - before_layout);
    return st;
}

static cpe_shape conv_in_shape(const cpe_kernel *k)
{
    return (cpe_shape){k->conv.ic, k->conv.ih, k->conv.iw};
}

static cpe_shape conv_out_shape(const cpe_kernel *k)
{
    return (cpe_shape){k->conv.oc, k->conv.oh, k->conv.ow};
}

/* ---- convolution: explicit (im2col + GEMM, the batch folded in) ----
 *
 * A chunk of images goes through one im2col launch into a column matrix
 * with the batch folded into its columns ([c kh kw][images][oh ow]) and one
 * GEMM launch per group over all of them (N = images x oh ow), whose output
 * comes out as [oc][images][oh ow] and is turned into NCHW by swapping
 * whole planes on the CPEs; backward-data swaps dy into that layout first,
 * backward-weights too, reducing over the folded columns in the GEMM. The
 * swaps are part of the strategy's cost. */

/* The sizes of an explicit pass and its buffers: images per chunk, the
 * column matrix, the folded output. */
typedef struct explicit_sizes {
    st_cpe_conv_geom all;     /* every channel: im2col works on all groups at once */
    size_t ocg, K, P;         /* a group's output channels, its GEMM's K; pixels */
    size_t in_image, out_image;
    int chunk;
    float *col, *fold;
} explicit_sizes;

static st_status explicit_begin(cpe_kernel *k, int n, explicit_sizes *e, st_error *err)
{
    const st_conv_desc *d = &k->conv;
    e->all = (st_cpe_conv_geom){d->ic, d->ih, d->iw, d->oh, d->ow, d->kh, d->kw,
                                d->sh, d->sw, d->ph, d->pw, d->oc};
    e->ocg = (size_t)(d->oc / d->groups);
    e->K = (size_t)(d->ic / d->groups) * d->kh * d->kw;
    e->P = (size_t)d->oh * d->ow;
    e->in_image = (size_t)d->ic * d->ih * d->iw;
    e->out_image = (size_t)d->oc * e->P;
    size_t per_image = (size_t)d->ic * d->kh * d->kw * e->P;
    size_t fit = EXPLICIT_COL_BYTES / sizeof(float) / per_image;
    e->chunk = fit < 1 ? 1 : fit < (size_t)n ? (int)fit : n;
    st_status st = scratch(k->ctx, SCRATCH_COL, per_image * (size_t)e->chunk, &e->col, err);
    return st == ST_OK ? scratch(k->ctx, SCRATCH_FOLD, e->out_image * (size_t)e->chunk, &e->fold,
                                 err)
                       : st;
}

/* Images [s0, s0 + m) of x into the folded column matrix. */
static st_status explicit_im2col(cpe_kernel *k, int pass, int training, const explicit_sizes *e,
                                 int s0, int m, const float *x, st_error *err)
{
    st_cpe_counters c;
    return charge(&k->work, pass, &c, training,
                  st_cpe_im2col(k->ctx->cg, &e->all, m, 1, x + (size_t)s0 * e->in_image, e->col,
                                &c, err));
}

/* NCHW <-> CNHW of m output-shaped images, charged to the pass. */
static st_status fold_swap(cpe_kernel *k, int pass, int training, int m, const float *src,
                           st_cpe_layout from, float *dst, st_cpe_layout to, st_error *err)
{
    st_cpe_counters c;
    return charge(&k->work, pass, &c, training,
                  st_cpe_relayout(k->ctx->cg, m, k->conv.oc, k->conv.oh, k->conv.ow, from, src,
                                  to, dst, &c, err));
}

static st_status explicit_forward(cpe_kernel *k, const st_kargs *a, st_error *err)
{
    const st_conv_desc *d = &k->conv;
    cpe_shape in = conv_in_shape(k);
    const float *x;
    explicit_sizes e;
    st_status st = layout_view(k, PASS_FWD, a->training, SCRATCH_IN, &in, a->n, a->src,
                               src_data_layout(k), ST_CPE_NCHW, &x, err);
    if (st == ST_OK)
        st = explicit_begin(k, a->n, &e, err);
    for (int s0 = 0; s0 < a->n && st == ST_OK; s0 += e.chunk) {
        int m = a->n - s0 < e.chunk ? a->n - s0 : e.chunk;
        size_t N = (size_t)m * e.P;
        st_cpe_counters c;
        st = explicit_im2col(k, PASS_FWD, a->training, &e, s0, m, x, err);
        for (int g = 0; g < d->groups && st == ST_OK; g++)
            st = charge(&k->work, PASS_FWD, &c, a->training,
                        st_cpe_gemm(k->ctx->cg, ST_CPE_F32, 0, 0, e.ocg, N, e.K, 1.0,
                                    a->weights + (size_t)g * e.ocg * e.K, e.K,
                                    e.col + (size_t)g * e.K * N, N, 0.0,
                                    e.fold + (size_t)g * e.ocg * N, N, &c, err));
        if (st == ST_OK)
            st = fold_swap(k, PASS_FWD, a->training, m, e.fold, ST_CPE_CNHW,
                           a->dst + (size_t)s0 * e.out_image, ST_CPE_NCHW, err);
    }
    if (st == ST_OK)
        k->own.data = ST_CPE_NCHW;
    if (st == ST_OK)
        st = epilogue(k, a->dst, d->bias ? a->bias : NULL, a->n, d->oc, e.P, d->act,
                      a->training, err);
    return st;
}

static st_status explicit_backward_data(cpe_kernel *k, const st_kargs *a, st_error *err)
{
    const st_conv_desc *d = &k->conv;
    cpe_shape out = conv_out_shape(k);
    const float *dy;
    float *dx = NULL;
    int stored = 0;
    explicit_sizes e;
    st_status st = layout_view(k, PASS_BWD_DATA, 1, SCRATCH_DIFF, &out, a->n, a->diff_dst,
                               own_diff_layout(k), ST_CPE_NCHW, &dy, err);
    if (st == ST_OK)
        st = explicit_begin(k, a->n, &e, err);
    if (st == ST_OK)
        st = plain_diff_dst(k, a, &dx, &stored, err);
    for (int s0 = 0; s0 < a->n && st == ST_OK; s0 += e.chunk) {
        int m = a->n - s0 < e.chunk ? a->n - s0 : e.chunk;
        size_t N = (size_t)m * e.P;
        st_cpe_counters c;
        st = fold_swap(k, PASS_BWD_DATA, 1, m, dy + (size_t)s0 * e.out_image, ST_CPE_NCHW,
                       e.fold, ST_CPE_CNHW, err);
        for (int g = 0; g < d->groups && st == ST_OK; g++)
            st = charge(&k->work, PASS_BWD_DATA, &c, 1,
                        st_cpe_gemm(k->ctx->cg, ST_CPE_F32, 1, 0, e.K, N, e.ocg, 1.0,
                                    a->weights + (size_t)g * e.ocg * e.K, e.K,
                                    e.fold + (size_t)g * e.ocg * N, N, 0.0,
                                    e.col + (size_t)g * e.K * N, N, &c, err));
        if (st == ST_OK)
            st = charge(&k->work, PASS_BWD_DATA, &c, 1,
                        st_cpe_col2im(k->ctx->cg, &e.all, m, 1, e.col,
                                      dx + (size_t)s0 * e.in_image, a->accumulate && !stored,
                                      &c, err));
    }
    if (st == ST_OK && stored)
        st = plain_diff_finish(k, a, dx, err);
    return st;
}

static st_status explicit_backward_weights(cpe_kernel *k, const st_kargs *a, st_error *err)
{
    const st_conv_desc *d = &k->conv;
    cpe_shape in = conv_in_shape(k), out = conv_out_shape(k);
    const float *x, *dy;
    explicit_sizes e;
    st_status st = layout_view(k, PASS_BWD_WEIGHTS, 1, SCRATCH_IN, &in, a->n, a->src,
                               src_data_layout(k), ST_CPE_NCHW, &x, err);
    if (st == ST_OK)
        st = layout_view(k, PASS_BWD_WEIGHTS, 1, SCRATCH_DIFF, &out, a->n, a->diff_dst,
                         own_diff_layout(k), ST_CPE_NCHW, &dy, err);
    if (st == ST_OK)
        st = explicit_begin(k, a->n, &e, err);
    for (int s0 = 0; s0 < a->n && st == ST_OK; s0 += e.chunk) {
        int m = a->n - s0 < e.chunk ? a->n - s0 : e.chunk;
        size_t N = (size_t)m * e.P;
        st_cpe_counters c;
        st = explicit_im2col(k, PASS_BWD_WEIGHTS, 1, &e, s0, m, x, err);
        if (st == ST_OK)
            st = fold_swap(k, PASS_BWD_WEIGHTS, 1, m, dy + (size_t)s0 * e.out_image,
                           ST_CPE_NCHW, e.fold, ST_CPE_CNHW, err);
        for (int g = 0; g < d->groups && st == ST_OK; g++)
            st = charge(&k->work, PASS_BWD_WEIGHTS, &c, 1,
                        st_cpe_gemm(k->ctx->cg, ST_CPE_F32, 0, 1, e.ocg, e.K, N, 1.0,
                                    e.fold + (size_t)g * e.ocg * N, N,
                                    e.col + (size_t)g * e.K * N, N, s0 == 0 ? 0.0 : 1.0,
                                    a->diff_weights + (size_t)g * e.ocg * e.K, e.K, &c, err));
    }
    if (st == ST_OK && d->bias && a->diff_bias)
        st = bias_grad(k, a->diff_bias, dy, a->n, d->oc, e.P, err);
    return st;
}

/* ---- convolution: implicit (swDNN) ---- */

/* The weights in swDNN's order (rotated for backward-data) in SCRATCH_W,
 * transformed on the CPEs and charged as layout work. */
static st_status swdnn_weights(cpe_kernel *k, int pass, int training, const float *w, int rotated,
                               float **out, st_error *err)
{
    const st_conv_desc *d = &k->conv;
    size_t count = (size_t)d->oc * d->ic * d->kh * d->kw;
    float *tmp = NULL;
    st_status st = scratch(k->ctx, SCRATCH_W, count, out, err);
    if (st == ST_OK && rotated)
        st = scratch(k->ctx, SCRATCH_W2, count, &tmp, err);
    if (st != ST_OK)
        return st;
    st_cpe_counters c;
    st = st_cpe_weights_to_swdnn(k->ctx->cg, d->oc, d->ic, d->kh, d->kw, w, *out, tmp, rotated,
                                 &c, err);
    return charge(&k->layout, pass, &c, training, st);
}

static st_status swdnn_run(cpe_kernel *k, int pass, int training, st_cpe_conv_pass which, int n,
                           const void *in, const void *w, void *out, int accumulate,
                           st_error *err)
{
    st_cpe_swdnn_conv p = st_cpe_conv_pass_problem(&k->geom, n, which, in, w, out);
    p.accumulate = accumulate;
    st_cpe_counters c;
    static const char *const names[PASSES] = {"swdnn_conv_forward", "swdnn_conv_backward_data",
                                              "swdnn_conv_backward_weights"};
    st_status st = st_cpe_swdnn_conv_run(k->ctx->cg, &p, names[pass], &c, err);
    return charge(&k->work, pass, &c, training, st);
}

static st_status implicit_forward(cpe_kernel *k, const st_kargs *a, st_error *err)
{
    const st_conv_desc *d = &k->conv;
    cpe_shape in = conv_in_shape(k), out = conv_out_shape(k);
    const float *x;
    float *w, *y = a->dst;
    int plain = k->base.dst_layout == NULL;
    st_status st = layout_view(k, PASS_FWD, a->training, SCRATCH_IN, &in, a->n, a->src,
                               src_data_layout(k), ST_CPE_HWCN, &x, err);
    if (st == ST_OK)
        st = swdnn_weights(k, PASS_FWD, a->training, a->weights, 0, &w, err);
    if (st == ST_OK && plain)
        st = scratch(k->ctx, SCRATCH_OUT, shape_floats(&out, a->n), &y, err);
    if (st == ST_OK)
        st = swdnn_run(k, PASS_FWD, a->training, ST_CPE_CONV_FORWARD, a->n, x, w, y, 0, err);
    /* In H W C N the bias is per channel of each pixel's C x N block. */
    if (st == ST_OK)
        st = epilogue(k, y, d->bias ? a->bias : NULL, d->oh * d->ow, d->oc, (size_t)a->n, d->act,
                      a->training, err);
    if (st == ST_OK && plain) {
        st_cpe_counters c;
        st = charge(&k->layout, PASS_FWD, &c, a->training,
                    st_cpe_relayout(k->ctx->cg, a->n, out.c, out.h, out.w, ST_CPE_HWCN, y,
                                    ST_CPE_NCHW, a->dst, &c, err));
    }
    if (st == ST_OK)
        k->own.data = ST_CPE_HWCN;
    return st;
}

static st_status implicit_backward_data(cpe_kernel *k, const st_kargs *a, st_error *err)
{
    cpe_shape in = conv_in_shape(k), out = conv_out_shape(k);
    const float *dy;
    float *w, *dx = a->diff_src;
    st_status st = layout_view(k, PASS_BWD_DATA, 1, SCRATCH_DIFF, &out, a->n, a->diff_dst,
                               own_diff_layout(k), ST_CPE_HWCN, &dy, err);
    if (st == ST_OK)
        st = swdnn_weights(k, PASS_BWD_DATA, 1, a->weights, 1, &w, err);
    st_cpe_layout target = diff_target(k, ST_CPE_HWCN, a->accumulate);
    int direct = target == ST_CPE_HWCN;
    if (st == ST_OK && !direct)
        st = scratch(k->ctx, SCRATCH_OUT, shape_floats(&in, a->n), &dx, err);
    if (st == ST_OK)
        st = swdnn_run(k, PASS_BWD_DATA, 1, ST_CPE_CONV_BACKWARD_DATA, a->n, dy, w, dx,
                       direct && a->accumulate, err);
    if (st == ST_OK && !direct)
        st = layout_store(k, PASS_BWD_DATA, &in, a->n, dx, ST_CPE_HWCN, a->diff_src, target,
                          a->accumulate, err);
    return st;
}

static st_status implicit_backward_weights(cpe_kernel *k, const st_kargs *a, st_error *err)
{
    const st_conv_desc *d = &k->conv;
    cpe_shape in = conv_in_shape(k), out = conv_out_shape(k);
    const float *x, *dy;
    float *dw;
    st_status st = layout_view(k, PASS_BWD_WEIGHTS, 1, SCRATCH_IN, &in, a->n, a->src,
                               src_data_layout(k), ST_CPE_HWNC, &x, err);
    if (st == ST_OK)
        st = layout_view(k, PASS_BWD_WEIGHTS, 1, SCRATCH_DIFF, &out, a->n, a->diff_dst,
                         own_diff_layout(k), ST_CPE_HWCN, &dy, err);
    if (st == ST_OK)
        st = scratch(k->ctx, SCRATCH_W, (size_t)d->oc * d->ic * d->kh * d->kw, &dw, err);
    if (st == ST_OK)
        st = swdnn_run(k, PASS_BWD_WEIGHTS, 1, ST_CPE_CONV_BACKWARD_WEIGHTS, a->n, x, dy, dw, 0,
                       err);
    if (st == ST_OK) {
        st_cpe_counters c;
        st = charge(&k->layout, PASS_BWD_WEIGHTS, &c, 1,
                    st_cpe_weights_from_swdnn(k->ctx->cg, d->oc, d->ic, d->kh, d->kw, dw,
                                              a->diff_weights, &c, err));
    }
    if (st == ST_OK && d->bias && a->diff_bias)
        st = bias_grad(k, a->diff_bias, dy, d->oh * d->ow, d->oc, (size_t)a->n, err);
    return st;
}

static const conv_pass_fn conv_forward_fn[CONV_STRATEGIES] = {explicit_forward,
                                                               implicit_forward};
static const conv_pass_fn conv_backward_data_fn[CONV_STRATEGIES] = {explicit_backward_data,
                                                                    implicit_backward_data};
static const conv_pass_fn conv_backward_weights_fn[CONV_STRATEGIES] = {
    explicit_backward_weights, implicit_backward_weights};

static st_status conv_forward(st_kernel *base, const st_kargs *a, st_error *err)
{
    return conv_run((cpe_kernel *)base, PASS_FWD, conv_forward_fn, a, a->training, err);
}

static st_status conv_backward_data(st_kernel *base, const st_kargs *a, st_error *err)
{
    if (!a->diff_src)
        return ST_OK;
    return conv_run((cpe_kernel *)base, PASS_BWD_DATA, conv_backward_data_fn, a, 1, err);
}

static st_status conv_backward_weights(st_kernel *base, const st_kargs *a, st_error *err)
{
    return conv_run((cpe_kernel *)base, PASS_BWD_WEIGHTS, conv_backward_weights_fn, a, 1, err);
}

/* ---- inner product: GEMM ---- */

static st_status fc_forward(st_kernel *base, const st_kargs *a, st_error *err)
{
    cpe_kernel *k = (cpe_kernel *)base;
    const st_fc_desc *d = &k->fc;
    const float *x;
    st_cpe_counters c;
    st_status st = plain_src(k, a, PASS_FWD, a->training, &x, err);
    if (st == ST_OK)
        st = charge(&k->work, PASS_FWD, &c, a->training,
                    st_cpe_gemm(k->ctx->cg, ST_CPE_F32, 0, 1, (size_t)a->n, (size_t)d->out,
                                (size_t)d->in, 1.0, x, (size_t)d->in, a->weights, (size_t)d->in,
                                0.0, a->dst, (size_t)d->out, &c, err));
    if (st != ST_OK)
        return st;
    return epilogue(k, a->dst, d->bias ? a->bias : NULL, a->n, d->out, 1, d->act, a->training,
                    err);
}

static st_status fc_backward_data(st_kernel *base, const st_kargs *a, st_error *err)
{
    cpe_kernel *k = (cpe_kernel *)base;
    const st_fc_desc *d = &k->fc;
    if (!a->diff_src)
        return ST_OK;
    float *dx = NULL;
    int stored = 0;
    st_cpe_counters c;
    st_status st = plain_diff_dst(k, a, &dx, &stored, err);
    if (st == ST_OK)
        st = charge(&k->work, PASS_BWD_DATA, &c, 1,
                    st_cpe_gemm(k->ctx->cg, ST_CPE_F32, 0, 0, (size_t)a->n, (size_t)d->in,
                                (size_t)d->out, 1.0, a->diff_dst, (size_t)d->out, a->weights,
                                (size_t)d->in, a->accumulate && !stored ? 1.0 : 0.0, dx,
                                (size_t)d->in, &c, err));
    if (st == ST_OK && stored)
        st = plain_diff_finish(k, a, dx, err);
    return st;
}

static st_status fc_backward_weights(st_kernel *base, const st_kargs *a, st_error *err)
{
    cpe_kernel *k = (cpe_kernel *)base;
    const st_fc_desc *d = &k->fc;
    const float *x;
    st_cpe_counters c;
    st_status st = plain_src(k, a, PASS_BWD_WEIGHTS, 1, &x, err);
    if (st == ST_OK)
        st = charge(&k->work, PASS_BWD_WEIGHTS, &c, 1,
                    st_cpe_gemm(k->ctx->cg, ST_CPE_F32, 1, 0, (size_t)d->out, (size_t)d->in,
                                (size_t)a->n, 1.0, a->diff_dst, (size_t)d->out, x,
                                (size_t)d->in, 0.0, a->diff_weights, (size_t)d->in, &c, err));
    if (st == ST_OK && d->bias && a->diff_bias)
        st = bias_grad(k, a->diff_bias, a->diff_dst, a->n, d->out, 1, err);
    return st;
}

/* ---- pooling and activations ---- */

static st_status pool_forward(st_kernel *base, const st_kargs *a, st_error *err)
{
    cpe_kernel *k = (cpe_kernel *)base;
    const float *x;
    st_cpe_counters c;
    st_status st = plain_src(k, a, PASS_FWD, a->training, &x, err);
    if (st == ST_OK)
        st = charge(&k->work, PASS_FWD, &c, a->training,
                    st_cpe_pool_forward(k->ctx->cg, &k->pool, a->n, x, a->dst,
                                        k->pool.alg == ST_POOL_MAX ? a->workspace : NULL, &c,
                                        err));
    return st;
}

static st_status pool_backward_data(st_kernel *base, const st_kargs *a, st_error *err)
{
    cpe_kernel *k = (cpe_kernel *)base;
    float *dx = NULL;
    int stored = 0;
    st_cpe_counters c;
    st_status st = plain_diff_dst(k, a, &dx, &stored, err);
    if (st == ST_OK)
        st = charge(&k->work, PASS_BWD_DATA, &c, 1,
                    st_cpe_pool_backward(k->ctx->cg, &k->pool, a->n, a->diff_dst, a->workspace,
                                         dx, a->accumulate && !stored, &c, err));
    if (st == ST_OK && stored)
        st = plain_diff_finish(k, a, dx, err);
    return st;
}

static st_status act_forward(st_kernel *base, const st_kargs *a, st_error *err)
{
    cpe_kernel *k = (cpe_kernel *)base;
    st_cpe_counters c;
    st_status st = st_cpe_act_forward(k->ctx->cg, k->act.act, (size_t)a->n * k->act.count,
                                      a->src, a->dst, &c, err);
    return charge(&k->work, PASS_FWD, &c, a->training, st);
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
            st = layout_view(k, PASS_BWD_DATA, 1, SCRATCH_IN, &s, a->n, a->dst, r->data, r->diff,
                             &y, err);
        else
            st = layout_view(k, PASS_BWD_DATA, 1, SCRATCH_DIFF, &s, a->n, a->diff_dst, r->diff,
                             r->data, &dy, err);
        if (st == ST_OK && !a->accumulate)
            r->diff = r->data;
    }
    st_cpe_counters c;
    if (st == ST_OK)
        st = charge(&k->work, PASS_BWD_DATA, &c, 1,
                    st_cpe_act_backward(k->ctx->cg, k->act.act, (size_t)a->n * k->act.count, y,
                                        dy, a->diff_src, a->accumulate, &c, err));
    return st;
}

/* ---- the MPE's kernels: the reference backend's, costed ---- */

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
    st_status st = plain_src(k, a, PASS_FWD, a->training, &plain.src, err);
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
    int stored = 0;
    st_status st = plain_src(k, a, PASS_BWD_DATA, 1, &plain.src, err);
    if (st == ST_OK && a->diff_src)
        st = plain_diff_dst(k, a, &plain.diff_src, &stored, err);
    if (stored)
        plain.accumulate = 0;
    if (st == ST_OK)
        st = k->mpe->ops->backward_data(k->mpe, &plain, err);
    if (st == ST_OK && stored)
        st = plain_diff_finish(k, a, plain.diff_src, err);
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
    st_status st = plain_src(k, a, PASS_BWD_WEIGHTS, 1, &plain.src, err);
    return st == ST_OK ? k->mpe->ops->backward_weights(k->mpe, &plain, err) : st;
}

/* ---- the slice's gradient sum and update on the CPEs ---- */

static st_status cpe_slice_reduce(st_bctx *ctx, float *const *grads, int n_grads, size_t b,
                                  size_t e, float scale, st_error *err)
{
    st_cpe_counters c;
    st_status st = st_cpe_grad_sum(ctx->cg, grads, n_grads, b, e, scale, &c, err);
    return charge(&ctx->reduce_update, WORK_SUM, &c, 1, st);
}

static st_status cpe_slice_apply(st_bctx *ctx, const st_solver_step *step, size_t b, size_t e,
                                 float *weights, float *state, size_t stride, const float *g,
                                 st_error *err)
{
    st_cpe_counters c;
    ctx->slice_floats = e - b;
    st_status st = st_cpe_solver_update(ctx->cg, step, b, e, weights, state, stride, g, &c, err);
    return charge(&ctx->reduce_update, WORK_UPDATE, &c, 1, st);
}

/* ---- work in plain C, on the MPE ---- */

static void cpe_host_work(st_bctx *ctx, int layer, const char *what, int pass, double bytes)
{
    int i = 0;
    while (i < ctx->n_host && ctx->host[i].layer != layer)
        i++;
    if (i == ctx->n_host) {
        if (ctx->n_host == ctx->host_cap) {
            int cap = ctx->host_cap ? 2 * ctx->host_cap : 8;
            cpe_host *grown = realloc(ctx->host, (size_t)cap * sizeof *grown);
            if (!grown)
                return; /* a prediction without this row; training goes on */
            ctx->host = grown;
            ctx->host_cap = cap;
        }
        cpe_host *h = &ctx->host[ctx->n_host++];
        memset(h, 0, sizeof *h);
        h->layer = layer;
        if (layer < 0)
            snprintf(h->what, sizeof h->what, "%s", what);
        else
            snprintf(h->what, sizeof h->what, "%s (layer %d)", what, layer);
    }
    ctx->host[i].work.now[pass].mpe_s +=
        st_cpe_mpe_seconds(st_cpe_cluster_cost_params(ctx->cg), 0.0, bytes);
}

/* ---- creation ---- */

static void cpe_kernel_destroy(st_kernel *base)
{
    cpe_kernel *k = (cpe_kernel *)base;
    if (k->mpe)
        k->mpe->ops->destroy(k->mpe);
    free(k);
}

static const st_kernel_ops conv_ops = {conv_forward, conv_backward_data, conv_backward_weights,
                                       cpe_kernel_destroy};
static const st_kernel_ops fc_ops = {fc_forward, fc_backward_data, fc_backward_weights,
                                     cpe_kernel_destroy};
static const st_kernel_ops pool_ops = {pool_forward, pool_backward_data, NULL,
                                       cpe_kernel_destroy};
static const st_kernel_ops act_ops = {act_forward, act_backward_data, NULL, cpe_kernel_destroy};
static const st_kernel_ops mpe_ops = {mpe_forward, mpe_backward_data, mpe_backward_weights,
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
    k->index = ctx->n_kernels;
    ctx->kernels[ctx->n_kernels++] = k;
    return ST_OK;
}

static void name_kernel(cpe_kernel *k, const st_kdesc *d)
{
    static const char *const kinds[] = {"conv", "fc", "pool", "batchnorm", "lrn", "activation",
                                        "softmax"};
    if (d->kind == ST_K_CONV) {
        const st_conv_desc *c = (const st_conv_desc *)d;
        snprintf(k->what, sizeof k->what, "conv %dx%d/%d %d->%d %dx%d", c->kh, c->kw, c->sh,
                 c->ic, c->oc, c->oh, c->ow);
    } else if (d->kind == ST_K_FC) {
        const st_fc_desc *f = (const st_fc_desc *)d;
        snprintf(k->what, sizeof k->what, "fc %d->%d", f->in, f->out);
    } else if (d->kind == ST_K_POOL) {
        const st_pool_desc *p = (const st_pool_desc *)d;
        snprintf(k->what, sizeof k->what, "%s pool %dx%d/%d %dx%dx%d",
                 p->alg == ST_POOL_MAX ? "max" : "avg", p->kh, p->kw, p->sh, p->c, p->oh, p->ow);
    } else if (d->kind == ST_K_ACT) {
        const st_act_desc *a = (const st_act_desc *)d;
        snprintf(k->what, sizeof k->what, "%s x%zu", st_act_names[a->act], a->count);
    } else {
        snprintf(k->what, sizeof k->what, "%s %zu", kinds[d->kind], st_kdesc_dst_values(d));
    }
}

/* The per-sample input shape of a kernel that may need to transform its
 * input: from the producer's record, or the descriptor. */
static void input_shape(cpe_kernel *k, const st_kdesc *d)
{
    if (k->src_state) {
        k->in_c = k->src_state->c;
        k->in_h = k->src_state->h;
        k->in_w = k->src_state->w;
    } else if (d->kind == ST_K_CONV) {
        const st_conv_desc *c = (const st_conv_desc *)d;
        k->in_c = c->ic;
        k->in_h = c->ih;
        k->in_w = c->iw;
    } else if (d->kind == ST_K_POOL) {
        const st_pool_desc *p = (const st_pool_desc *)d;
        k->in_c = p->c;
        k->in_h = p->ih;
        k->in_w = p->iw;
    } else if (d->kind == ST_K_FC) {
        k->in_c = ((const st_fc_desc *)d)->in;
        k->in_h = k->in_w = 1;
    } else {
        k->in_c = (int)st_kdesc_dst_values(d);
        k->in_h = k->in_w = 1;
    }
}

static st_status cpe_kernel_create(st_bctx *ctx, const st_kdesc *d, st_kernel **out,
                                   st_error *err)
{
    const st_kernel_ops *ops = d->kind == ST_K_CONV   ? &conv_ops
                               : d->kind == ST_K_FC   ? &fc_ops
                               : d->kind == ST_K_POOL ? &pool_ops
                               : d->kind == ST_K_ACT  ? &act_ops
                                                      : &mpe_ops;
    cpe_kernel *k = ref_kernel_new(sizeof *k, ops, d, err);
    if (!k)
        return ST_ENOMEM;
    k->ctx = ctx;
    k->where = ops == &mpe_ops ? "MPE" : "CPEs";
    /* A layout is always one of ours: only cpe kernels make them. */
    k->src_state = (cpe_layout_state *)d->src_layout;
    name_kernel(k, d);
    input_shape(k, d);
    st_status st = ST_OK;
    if (d->kind == ST_K_CONV) {
        k->conv = *(const st_conv_desc *)d;
        k->geom = conv_geom(&k->conv);
        k->base_n = d->n;
        conv_strategies(k, d->n);
        k->own = (cpe_layout_state){ST_CPE_NCHW, ST_CPE_NCHW, k->conv.oc, k->conv.oh, k->conv.ow};
        if (!d->dst_plain)
            k->base.dst_layout = &k->own;
    } else if (d->kind == ST_K_FC) {
        k->fc = *(const st_fc_desc *)d;
    } else if (d->kind == ST_K_POOL) {
        k->pool = *(const st_pool_desc *)d;
        if (k->pool.alg == ST_POOL_MAX) /* the argmax, as the reference keeps it */
            k->base.workspace_bytes =
                (size_t)d->n * (size_t)k->pool.c * (size_t)k->pool.oh * (size_t)k->pool.ow *
                sizeof(int);
    } else if (d->kind == ST_K_ACT) {
        k->act = *(const st_act_desc *)d;
        k->base.dst_layout = d->src_layout; /* elementwise: the input's layout */
    } else {
        /* The MPE kernel computes on plain NCHW: its input is transformed
         * first when it comes in another layout. */
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
        st = st_backend_ref.kernel_create(NULL, &plain.base, &k->mpe, err);
        if (st == ST_OK) { /* the MPE kernel's sizes and layout are this one's */
            k->base.workspace_bytes = k->mpe->workspace_bytes;
            k->base.scratch_bytes = k->mpe->scratch_bytes;
            k->base.dst_layout = k->mpe->dst_layout;
            k->base.dst_bytes = k->mpe->dst_bytes;
            mpe_work_of(k, d);
        }
    }
    if (st == ST_OK)
        st = remember(ctx, k, err);
    if (st != ST_OK) {
        cpe_kernel_destroy(&k->base);
        return st;
    }
    *out = &k->base;
    return ST_OK;
}

const st_backend st_backend_cpe = {
    .name = "cpe",
    .ctx_create = cpe_ctx_create,
    .ctx_destroy = cpe_ctx_destroy,
    .kernel_create = cpe_kernel_create,
    .slice_reduce = cpe_slice_reduce,
    .slice_apply = cpe_slice_apply,
    .iteration_end = cpe_iteration_end,
    .host_work = cpe_host_work,
    .run_begin = st_cpe_backend_run_begin,
    .trace_start = st_cpe_backend_trace,
    .run_report = st_cpe_backend_report,
    .trace_finish = st_cpe_backend_trace_finish,
};
