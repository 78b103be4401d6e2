/* The `cpe` backend: each worker plays the MPE of one SW26010 core group
 * and runs its kernels on an emulated 8x8 CPE cluster (include/cpe.h),
 * which computes the same results as the reference backend and predicts
 * what the real core group would spend.
 *
 * On the CPEs:
 *   - convolution, two ways, chosen per layer and pass by predicted time:
 *     explicit (swCaffe's im2col + GEMM, per image and group: col =
 *     im2col(x), y = W col; dcol = W^T dy, dx += col2im(dcol);
 *     dW += dy col^T) and implicit (no col matrix; st_cpe_conv_implicit_*).
 *     A training kernel runs its first training call of each pass
 *     explicitly and its second implicitly (where the implicit scheme
 *     suits the shape), then keeps the faster for the rest of the run;
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
 * the per-iteration record, and st_cpe_backend_report prints the table. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "cpe.h"
#include "cpe_backend.h"
#include "ref/ref.h"

extern const st_backend st_backend_ref;

/* Passes a kernel accounts for; the slice work puts its gradient sum and
 * its update in the first two. */
enum { PASS_FWD, PASS_BWD_DATA, PASS_BWD_WEIGHTS, PASSES };
enum { WORK_SUM = PASS_FWD, WORK_UPDATE = PASS_BWD_DATA };

/* Convolution strategies. */
enum { CONV_EXPLICIT, CONV_IMPLICIT, CONV_STRATEGIES };
static const char *const conv_strategy_names[CONV_STRATEGIES] = {"explicit", "implicit"};

/* Training calls a conv pass spends trying the strategies (one each). */
#define CONV_TRIALS CONV_STRATEGIES

/* Predicted time of some work: CPE launches and MPE work. */
typedef struct cpe_account {
    st_cpe_counters cpe;
    double mpe_s;
} cpe_account;

static double account_seconds(const cpe_account *a)
{
    return a->cpe.time.total_s + a->mpe_s;
}

static void account_add(cpe_account *dst, const cpe_account *src)
{
    st_cpe_counters_add(&dst->cpe, &src->cpe);
    dst->mpe_s += src->mpe_s;
}

/* A unit of accounted work: a kernel's passes, or the slice update. The
 * first CONV_TRIALS iterations (where convolutions try their strategies)
 * are kept apart from the rest, which are the steady state. */
typedef struct cpe_work {
    cpe_account now[PASSES];   /* the iteration in progress */
    cpe_account trials[PASSES]; /* the first CONV_TRIALS iterations */
    cpe_account steady[PASSES]; /* the iterations after them */
} cpe_work;

typedef struct cpe_kernel cpe_kernel;

struct st_bctx {
    int worker;
    st_cpe_cluster *cg;
    cpe_kernel **kernels; /* every kernel, in creation order (layer order) */
    int n_kernels, cap;
    cpe_work reduce_update; /* the slice's gradient sum and update */
    long iterations;      /* iteration_end calls */
    FILE *trace;          /* st_cpe_backend_trace's file (.partial), or NULL */
    char trace_path[4096];
};

struct cpe_kernel {
    st_kernel base;
    st_bctx *ctx;
    st_kernel *mpe;        /* a reference kernel the MPE runs, or NULL */
    const char *where;     /* "CPEs" or "MPE" */
    char what[64];         /* the report's name of the kernel */
    st_conv_desc conv;     /* base.kind ST_K_CONV */
    st_cpe_conv_geom geom; /* conv: one group's geometry */
    st_fc_desc fc;         /* base.kind ST_K_FC */
    st_pool_desc pool;     /* base.kind ST_K_POOL */
    st_act_desc act;       /* base.kind ST_K_ACT */
    double mpe_flops[PASSES], mpe_bytes[PASSES]; /* MPE work per sample */
    float *col;            /* explicit conv: one image's [c/groups kh kw, oh ow] */
    int implicit_suits;    /* conv: the implicit scheme can run this shape */
    long calls[PASSES];    /* conv: training calls so far */
    double tried[CONV_STRATEGIES][PASSES]; /* conv: seconds of each trial call */
    int chosen[PASSES];    /* conv: the strategy after the trials */
    cpe_work work;
};

/* ---- accounting ---- */

/* Add a launch's counters c to the pass when it succeeded (st) during
 * training; returns st. */
static st_status charge_cpe(cpe_kernel *k, int pass, const st_cpe_counters *c, int training,
                            st_status st)
{
    if (st == ST_OK && training)
        st_cpe_counters_add(&k->work.now[pass].cpe, c);
    return st;
}

static void charge_mpe(cpe_kernel *k, int pass, double flops, double bytes, int training)
{
    if (training)
        k->work.now[pass].mpe_s +=
            st_cpe_mpe_seconds(st_cpe_cluster_cost_params(k->ctx->cg), flops, bytes);
}

/* End of an iteration: the first CONV_TRIALS go to the trials, later ones
 * to the steady state. */
static void work_close(cpe_work *w, long iteration)
{
    for (int p = 0; p < PASSES; p++) {
        account_add(iteration < CONV_TRIALS ? &w->trials[p] : &w->steady[p], &w->now[p]);
        memset(&w->now[p], 0, sizeof w->now[p]);
    }
}

static void trace_row(FILE *f, long it, const char *what, const cpe_work *w)
{
    fprintf(f, "%ld,\"%s\"", it + 1, what);
    for (int p = 0; p < PASSES; p++)
        fprintf(f, ",%.6f", 1e3 * account_seconds(&w->now[p]));
    fputc('\n', f);
}

static void cpe_iteration_end(st_bctx *ctx, long iter)
{
    for (int i = 0; i < ctx->n_kernels; i++) {
        if (ctx->trace)
            trace_row(ctx->trace, iter, ctx->kernels[i]->what, &ctx->kernels[i]->work);
        work_close(&ctx->kernels[i]->work, ctx->iterations);
    }
    if (ctx->trace) {
        trace_row(ctx->trace, iter, "gradient sum + update", &ctx->reduce_update);
        fflush(ctx->trace);
    }
    work_close(&ctx->reduce_update, ctx->iterations);
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
    if (ctx->trace)
        fclose(ctx->trace);
    st_cpe_cluster_destroy(ctx->cg);
    free(ctx->kernels);
    free(ctx);
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
    return charge_cpe(k, PASS_FWD, &c, training, st);
}

/* db [channels] = sum over samples and positions of dy [n, channels, per_channel]. */
static st_status bias_grad(cpe_kernel *k, float *db, const float *dy, int n, int channels,
                           size_t per_channel, st_error *err)
{
    st_cpe_counters c;
    st_status st = st_cpe_bias_grad(k->ctx->cg, n, channels, per_channel, dy, db, &c, err);
    return charge_cpe(k, PASS_BWD_WEIGHTS, &c, 1, st);
}

/* ---- convolution ---- */

static st_cpe_conv_geom conv_geom(const st_conv_desc *d)
{
    st_cpe_conv_geom g = {d->ic / d->groups, d->ih, d->iw, d->oh, d->ow,
                          d->kh, d->kw, d->sh, d->sw, d->ph, d->pw, d->oc / d->groups};
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

/* The strategy of this call of a pass: during training the first calls try
 * each strategy in turn, then the chosen one; test-phase forwards use the
 * choice (explicit until there is one). */
static int conv_strategy(const cpe_kernel *k, int pass, int training)
{
    if (!k->implicit_suits)
        return CONV_EXPLICIT;
    if (training && k->calls[pass] < CONV_TRIALS)
        return (int)k->calls[pass];
    return k->chosen[pass];
}

/* After a training call that took seconds with strategy: count it, and
 * choose once every strategy has run. */
static void conv_called(cpe_kernel *k, int pass, int strategy, double seconds)
{
    if (!k->implicit_suits || k->calls[pass] >= CONV_TRIALS)
        return;
    k->tried[strategy][pass] = seconds;
    if (++k->calls[pass] < CONV_TRIALS)
        return;
    k->chosen[pass] = CONV_EXPLICIT;
    for (int s = 1; s < CONV_STRATEGIES; s++)
        if (k->tried[s][pass] < k->tried[k->chosen[pass]][pass])
            k->chosen[pass] = s;
}

/* Run a conv pass with the strategy conv_strategy picks, and learn from it. */
typedef st_status (*conv_pass_fn)(cpe_kernel *k, const st_kargs *a, st_error *err);

static st_status conv_run(cpe_kernel *k, int pass, const conv_pass_fn fn[CONV_STRATEGIES],
                          const st_kargs *a, int training, st_error *err)
{
    int strategy = conv_strategy(k, pass, training);
    double before = account_seconds(&k->work.now[pass]);
    st_status st = fn[strategy](k, a, err);
    if (st == ST_OK && training)
        conv_called(k, pass, strategy, account_seconds(&k->work.now[pass]) - before);
    return st;
}

static st_status explicit_forward(cpe_kernel *k, const st_kargs *a, st_error *err)
{
    const st_conv_desc *d = &k->conv;
    st_cpe_counters c;
    st_status st = ST_OK;
    for (int s = 0; s < a->n && st == ST_OK; s++)
        for (int g = 0; g < d->groups && st == ST_OK; g++) {
            conv_part q = part_of(d, s, g);
            st = st_cpe_im2col(k->ctx->cg, &k->geom, a->src + q.in, k->col, &c, err);
            if (charge_cpe(k, PASS_FWD, &c, a->training, st) == ST_OK)
                st = st_cpe_gemm(k->ctx->cg, ST_CPE_F32, 0, 0, q.ocg, q.p, q.k, 1.0,
                                 a->weights + q.w, q.k, k->col, q.p, 0.0, a->dst + q.out, q.p,
                                 &c, err);
            st = charge_cpe(k, PASS_FWD, &c, a->training, st);
        }
    return st;
}

static st_status explicit_backward_data(cpe_kernel *k, const st_kargs *a, st_error *err)
{
    const st_conv_desc *d = &k->conv;
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
            if (charge_cpe(k, PASS_BWD_DATA, &c, 1, st) == ST_OK)
                st = st_cpe_col2im(k->ctx->cg, &k->geom, k->col, a->diff_src + q.in, &c, err);
            st = charge_cpe(k, PASS_BWD_DATA, &c, 1, st);
        }
    return st;
}

static st_status explicit_backward_weights(cpe_kernel *k, const st_kargs *a, st_error *err)
{
    const st_conv_desc *d = &k->conv;
    st_cpe_counters c;
    st_status st = ST_OK;
    for (int s = 0; s < a->n && st == ST_OK; s++)
        for (int g = 0; g < d->groups && st == ST_OK; g++) {
            conv_part q = part_of(d, s, g);
            st = st_cpe_im2col(k->ctx->cg, &k->geom, a->src + q.in, k->col, &c, err);
            if (charge_cpe(k, PASS_BWD_WEIGHTS, &c, 1, st) == ST_OK)
                st = st_cpe_gemm(k->ctx->cg, ST_CPE_F32, 0, 1, q.ocg, q.k, q.p, 1.0,
                                 a->diff_dst + q.out, q.p, k->col, q.p, s == 0 ? 0.0 : 1.0,
                                 a->diff_weights + q.w, q.k, &c, err);
            st = charge_cpe(k, PASS_BWD_WEIGHTS, &c, 1, st);
        }
    return st;
}

static st_status implicit_forward(cpe_kernel *k, const st_kargs *a, st_error *err)
{
    st_cpe_counters c;
    st_status st = st_cpe_conv_implicit_forward(k->ctx->cg, &k->geom, a->n, a->src, a->weights,
                                                a->dst, &c, err);
    return charge_cpe(k, PASS_FWD, &c, a->training, st);
}

static st_status implicit_backward_data(cpe_kernel *k, const st_kargs *a, st_error *err)
{
    st_cpe_counters c;
    st_status st = st_cpe_conv_implicit_backward_data(k->ctx->cg, &k->geom, a->n, a->diff_dst,
                                                      a->weights, a->diff_src, a->accumulate,
                                                      &c, err);
    return charge_cpe(k, PASS_BWD_DATA, &c, 1, st);
}

static st_status implicit_backward_weights(cpe_kernel *k, const st_kargs *a, st_error *err)
{
    st_cpe_counters c;
    st_status st = st_cpe_conv_implicit_backward_weights(k->ctx->cg, &k->geom, a->n, a->src,
                                                         a->diff_dst, a->diff_weights, &c, err);
    return charge_cpe(k, PASS_BWD_WEIGHTS, &c, 1, st);
}

static const conv_pass_fn conv_forward_fn[CONV_STRATEGIES] = {explicit_forward,
                                                               implicit_forward};
static const conv_pass_fn conv_backward_data_fn[CONV_STRATEGIES] = {explicit_backward_data,
                                                                    implicit_backward_data};
static const conv_pass_fn conv_backward_weights_fn[CONV_STRATEGIES] = {
    explicit_backward_weights, implicit_backward_weights};

static st_status conv_forward(st_kernel *base, const st_kargs *a, st_error *err)
{
    cpe_kernel *k = (cpe_kernel *)base;
    const st_conv_desc *d = &k->conv;
    st_status st = conv_run(k, PASS_FWD, conv_forward_fn, a, a->training, err);
    if (st == ST_OK)
        st = epilogue(k, a->dst, d->bias ? a->bias : NULL, a->n, d->oc,
                      (size_t)d->oh * (size_t)d->ow, d->act, a->training, err);
    return st;
}

static st_status conv_backward_data(st_kernel *base, const st_kargs *a, st_error *err)
{
    if (!a->diff_src)
        return ST_OK;
    return conv_run((cpe_kernel *)base, PASS_BWD_DATA, conv_backward_data_fn, a, 1, err);
}

static st_status conv_backward_weights(st_kernel *base, const st_kargs *a, st_error *err)
{
    cpe_kernel *k = (cpe_kernel *)base;
    const st_conv_desc *d = &k->conv;
    st_status st = conv_run(k, PASS_BWD_WEIGHTS, conv_backward_weights_fn, a, 1, err);
    if (st == ST_OK && d->bias && a->diff_bias)
        st = bias_grad(k, a->diff_bias, a->diff_dst, a->n, d->oc,
                       (size_t)d->oh * (size_t)d->ow, err);
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
    if (charge_cpe(k, PASS_FWD, &c, a->training, st) != ST_OK)
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
    st_cpe_counters c;
    st_status st = st_cpe_gemm(k->ctx->cg, ST_CPE_F32, 0, 0, (size_t)a->n, (size_t)d->in,
                               (size_t)d->out, 1.0, a->diff_dst, (size_t)d->out, a->weights,
                               (size_t)d->in, a->accumulate ? 1.0 : 0.0, a->diff_src,
                               (size_t)d->in, &c, err);
    return charge_cpe(k, PASS_BWD_DATA, &c, 1, st);
}

static st_status fc_backward_weights(st_kernel *base, const st_kargs *a, st_error *err)
{
    cpe_kernel *k = (cpe_kernel *)base;
    const st_fc_desc *d = &k->fc;
    st_cpe_counters c;
    st_status st = st_cpe_gemm(k->ctx->cg, ST_CPE_F32, 1, 0, (size_t)d->out, (size_t)d->in,
                               (size_t)a->n, 1.0, a->diff_dst, (size_t)d->out, a->src,
                               (size_t)d->in, 0.0, a->diff_weights, (size_t)d->in, &c, err);
    if (charge_cpe(k, PASS_BWD_WEIGHTS, &c, 1, st) != ST_OK)
        return st;
    if (d->bias && a->diff_bias)
        return bias_grad(k, a->diff_bias, a->diff_dst, a->n, d->out, 1, err);
    return ST_OK;
}

/* ---- pooling and activations ---- */

static st_status pool_forward(st_kernel *base, const st_kargs *a, st_error *err)
{
    cpe_kernel *k = (cpe_kernel *)base;
    st_cpe_counters c;
    st_status st = st_cpe_pool_forward(k->ctx->cg, &k->pool, a->n, a->src, a->dst,
                                       k->pool.alg == ST_POOL_MAX ? a->workspace : NULL, &c,
                                       err);
    return charge_cpe(k, PASS_FWD, &c, a->training, st);
}

static st_status pool_backward_data(st_kernel *base, const st_kargs *a, st_error *err)
{
    cpe_kernel *k = (cpe_kernel *)base;
    st_cpe_counters c;
    st_status st = st_cpe_pool_backward(k->ctx->cg, &k->pool, a->n, a->diff_dst, a->workspace,
                                        a->diff_src, a->accumulate, &c, err);
    return charge_cpe(k, PASS_BWD_DATA, &c, 1, st);
}

static st_status act_forward(st_kernel *base, const st_kargs *a, st_error *err)
{
    cpe_kernel *k = (cpe_kernel *)base;
    st_cpe_counters c;
    st_status st = st_cpe_act_forward(k->ctx->cg, k->act.act, (size_t)a->n * k->act.count,
                                      a->src, a->dst, &c, err);
    return charge_cpe(k, PASS_FWD, &c, a->training, st);
}

static st_status act_backward_data(st_kernel *base, const st_kargs *a, st_error *err)
{
    cpe_kernel *k = (cpe_kernel *)base;
    st_cpe_counters c;
    st_status st = st_cpe_act_backward(k->ctx->cg, k->act.act, (size_t)a->n * k->act.count,
                                       a->dst, a->diff_dst, a->diff_src, a->accumulate, &c,
                                       err);
    return charge_cpe(k, PASS_BWD_DATA, &c, 1, st);
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
    st_status st = k->mpe->ops->forward(k->mpe, a, err);
    if (st == ST_OK)
        charge_mpe(k, PASS_FWD, k->mpe_flops[PASS_FWD] * a->n, k->mpe_bytes[PASS_FWD] * a->n,
                   a->training);
    return st;
}

static st_status mpe_backward_data(st_kernel *base, const st_kargs *a, st_error *err)
{
    cpe_kernel *k = (cpe_kernel *)base;
    st_status st = k->mpe->ops->backward_data(k->mpe, a, err);
    if (st == ST_OK)
        charge_mpe(k, PASS_BWD_DATA, k->mpe_flops[PASS_BWD_DATA] * a->n,
                   k->mpe_bytes[PASS_BWD_DATA] * a->n, 1);
    return st;
}

/* Kinds whose backward_data computes every gradient have none. */
static st_status mpe_backward_weights(st_kernel *base, const st_kargs *a, st_error *err)
{
    cpe_kernel *k = (cpe_kernel *)base;
    return k->mpe->ops->backward_weights ? k->mpe->ops->backward_weights(k->mpe, a, err) : ST_OK;
}

/* ---- the slice's gradient sum and update on the CPEs ---- */

static st_status cpe_slice_reduce(st_bctx *ctx, float *const *grads, int n_grads, size_t b,
                                  size_t e, float scale, st_error *err)
{
    st_cpe_counters c;
    st_status st = st_cpe_grad_sum(ctx->cg, grads, n_grads, b, e, scale, &c, err);
    if (st == ST_OK)
        st_cpe_counters_add(&ctx->reduce_update.now[WORK_SUM].cpe, &c);
    return st;
}

static st_status cpe_slice_apply(st_bctx *ctx, const st_solver_step *step, size_t b, size_t e,
                                 float *weights, float *state, size_t stride, const float *g,
                                 st_error *err)
{
    st_cpe_counters c;
    st_status st = st_cpe_solver_update(ctx->cg, step, b, e, weights, state, stride, g, &c, err);
    if (st == ST_OK)
        st_cpe_counters_add(&ctx->reduce_update.now[WORK_UPDATE].cpe, &c);
    return st;
}

/* ---- creation ---- */

static void cpe_kernel_destroy(st_kernel *base)
{
    cpe_kernel *k = (cpe_kernel *)base;
    if (k->mpe)
        k->mpe->ops->destroy(k->mpe);
    free(k->col);
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

static st_status cpe_kernel_create(st_bctx *ctx, const st_kdesc *d, st_kernel **out,
                                   st_error *err)
{
    if (d->src_layout)
        return st_fail(err, ST_EINTERNAL, "cpe backend: input in a foreign layout");
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
    name_kernel(k, d);
    st_status st = ST_OK;
    if (d->kind == ST_K_CONV) {
        k->conv = *(const st_conv_desc *)d;
        conv_part q = part_of(&k->conv, 0, 0);
        k->col = st_calloc(q.k * q.p, sizeof *k->col, "cpe im2col buffer", err);
        if (!k->col)
            st = ST_ENOMEM;
        k->geom = conv_geom(&k->conv);
        k->implicit_suits = k->conv.groups == 1 && st_cpe_conv_implicit_suits(&k->geom);
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
    } else {
        st = st_backend_ref.kernel_create(NULL, d, &k->mpe, err);
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

/* ---- the report ---- */

/* Per iteration, the average of a unit's passes over the steady
 * iterations (or over the trials when the run had no more). */
static void work_ms(const st_bctx *ctx, const cpe_work *w, double ms[PASSES])
{
    long steady = ctx->iterations - CONV_TRIALS;
    long trials = ctx->iterations < CONV_TRIALS ? ctx->iterations : CONV_TRIALS;
    for (int p = 0; p < PASSES; p++)
        ms[p] = steady > 0 ? 1e3 * account_seconds(&w->steady[p]) / (double)steady
                : trials > 0 ? 1e3 * account_seconds(&w->trials[p]) / (double)trials
                             : 0.0;
}

/* flop per DMA byte of a unit (CPE work only). */
static double work_intensity(const cpe_work *w)
{
    double flops = 0.0, bytes = 0.0;
    for (int p = 0; p < PASSES; p++) {
        const st_cpe_counters *c[2] = {&w->trials[p].cpe, &w->steady[p].cpe};
        for (int i = 0; i < 2; i++) {
            flops += (double)c[i]->flops;
            bytes += (double)(c[i]->dma_get_bytes + c[i]->dma_put_bytes);
        }
    }
    return bytes > 0 ? flops / bytes : 0.0;
}

/* The conv strategy column: what each pass chose and the trial times. */
static void strategy_text(const cpe_kernel *k, char *buf, size_t len)
{
    if (k->base.kind == ST_K_FC) {
        snprintf(buf, len, "GEMM");
        return;
    }
    if (k->base.kind != ST_K_CONV) {
        snprintf(buf, len, "-");
        return;
    }
    if (!k->implicit_suits) {
        snprintf(buf, len, "explicit (implicit does not suit the shape)");
        return;
    }
    size_t used = 0;
    static const char *const pass_names[PASSES] = {"fwd", "bwd-data", "bwd-weights"};
    for (int p = 0; p < PASSES && used < len; p++) {
        if (k->calls[p] < CONV_TRIALS)
            continue;
        used += (size_t)snprintf(buf + used, len - used, "%s%s %s (%.3f vs %.3f ms)",
                                 used ? ", " : "", pass_names[p],
                                 conv_strategy_names[k->chosen[p]],
                                 1e3 * k->tried[CONV_EXPLICIT][p],
                                 1e3 * k->tried[CONV_IMPLICIT][p]);
    }
    if (used == 0)
        snprintf(buf, len, "not chosen yet (explicit / implicit trials)");
}

static double iteration_ms(const st_bctx *ctx, int steady)
{
    double sum = 0.0;
    long n = steady                            ? ctx->iterations - CONV_TRIALS
             : ctx->iterations < CONV_TRIALS ? ctx->iterations
                                             : CONV_TRIALS;
    for (int i = -1; i < ctx->n_kernels; i++) {
        const cpe_work *w = i < 0 ? &ctx->reduce_update : &ctx->kernels[i]->work;
        for (int p = 0; p < PASSES; p++)
            sum += account_seconds(steady ? &w->steady[p] : &w->trials[p]);
    }
    return n > 0 ? 1e3 * sum / (double)n : 0.0;
}

void st_cpe_backend_report(const st_bctx *ctx, int images_per_iteration, int workers,
                           void (*print)(void *pctx, const char *line), void *pctx)
{
    char line[512], strategy[192];
    long steady = ctx->iterations - CONV_TRIALS;
    snprintf(line, sizeof line, "cpe: predicted SW26010 core-group ms per iteration, worker "
             "%d's shard of %d images, %s:", ctx->worker, images_per_iteration,
             steady > 0 ? "after the strategy trials" : "during the strategy trials");
    print(pctx, line);
    print(pctx, "cpe: kernel                          on      forward  bwd-data  bwd-weights  "
                "flop/byte  strategy");
    double total = 0.0, ms[PASSES];
    for (int i = 0; i <= ctx->n_kernels; i++) {
        const cpe_kernel *k = i < ctx->n_kernels ? ctx->kernels[i] : NULL;
        const cpe_work *w = k ? &k->work : &ctx->reduce_update;
        work_ms(ctx, w, ms);
        /* A slice is 1/workers of the arena; on a processor it is 1/4. */
        total += (ms[0] + ms[1] + ms[2]) * (k ? 1.0 : (double)workers / 4.0);
        if (k) {
            strategy_text(k, strategy, sizeof strategy);
            snprintf(line, sizeof line, "cpe: %-32s %-5s %9.3f %9.3f %12.3f %10.2f  %s",
                     k->what, k->where, ms[0], ms[1], ms[2], work_intensity(w), strategy);
        } else {
            snprintf(line, sizeof line, "cpe: %-32s %-5s %9.3f (sum) %7.3f (update) %5s "
                     "%10.2f  streaming DMA", "gradient sum + solver update", "CPEs",
                     ms[WORK_SUM], ms[WORK_UPDATE], "", work_intensity(w));
        }
        print(pctx, line);
    }
    long trials = ctx->iterations < CONV_TRIALS ? ctx->iterations : CONV_TRIALS;
    snprintf(line, sizeof line, "cpe: per iteration: %.3f ms over the %ld trial iteration%s",
             iteration_ms(ctx, 0), trials, trials == 1 ? "" : "s");
    if (steady > 0)
        snprintf(line + strlen(line), sizeof line - strlen(line), ", %.3f ms over the %ld "
                 "after", iteration_ms(ctx, 1), steady);
    print(pctx, line);
    snprintf(line, sizeof line, "cpe: one SW26010 (4 core groups, a shard of %d images and a "
             "quarter of the parameters' sum and update each) would train %.0f img/s",
             images_per_iteration,
             total > 0 ? 4.0 * images_per_iteration / (total / 1e3) : 0.0);
    print(pctx, line);
}

st_status st_cpe_backend_trace(st_bctx *ctx, const char *path, st_error *err)
{
    int len = snprintf(ctx->trace_path, sizeof ctx->trace_path, "%s", path);
    if (len < 0 || (size_t)len + sizeof ".partial" > sizeof ctx->trace_path)
        return st_fail(err, ST_EUSAGE, "--cpe-trace %s: path too long", path);
    char partial[sizeof ctx->trace_path + 8];
    snprintf(partial, sizeof partial, "%s.partial", path);
    ctx->trace = fopen(partial, "wx"); /* exclusive: the trainer removed any old one */
    if (!ctx->trace)
        return st_fail(err, ST_EIO, "%s: cannot write the cpe trace: %s", partial,
                       strerror(errno));
    fprintf(ctx->trace, "iteration,kernel,forward_ms,bwd_data_ms,bwd_weights_ms\n");
    return ST_OK;
}

st_status st_cpe_backend_trace_finish(st_bctx *ctx, st_error *err)
{
    if (!ctx->trace)
        return ST_OK;
    char partial[sizeof ctx->trace_path + 8];
    snprintf(partial, sizeof partial, "%s.partial", ctx->trace_path);
    int bad = ferror(ctx->trace) | fclose(ctx->trace);
    ctx->trace = NULL;
    if (bad || rename(partial, ctx->trace_path) != 0)
        return st_fail(err, ST_EIO, "%s: cannot write the cpe trace: %s", partial,
                       strerror(errno));
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
};
