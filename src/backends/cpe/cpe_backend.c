/* The `cpe` backend: each worker plays the MPE of one SW26010 core group
 * and runs its kernels on an emulated 8x8 CPE cluster (include/cpe/cpe.h,
 * the programs in include/cpe/kernels.h), which computes the same results
 * as the reference backend and predicts what the real core group would
 * spend.
 *
 * On the CPEs, as swCaffe ran each layer:
 *   - convolution, explicit (im2col + GEMM) or implicit (swDNN), chosen per
 *     layer and pass by predicted time on the first training calls
 *     (cpe_conv.c);
 *   - the tensor transformation layer: the implicit kernels work on tensors
 *     with the batch innermost, so a convolution's output stays in that
 *     layout when its consumer is a cpe kernel (its dst_layout is a record
 *     saying, call by call, which layout its values and its gradient are
 *     in), and a kernel that needs the other layout transforms the tensor
 *     on the CPEs first (cpe_layouts.c). So a run of implicit layers pays
 *     for one transformation where it begins and one where it ends, in
 *     each direction;
 *   - inner products as GEMM, their bias, activation and bias gradient, max
 *     and average pooling, the activation layers (cpe_kernels.c);
 *   - the sliced aggregation's gradient sum and the solver update of the
 *     worker's slice (slice_reduce, slice_apply, here).
 * On the MPE (the reference backend's kernels, costed with the MPE
 * roofline st_cpe_mpe_seconds): batch norm, LRN and softmax
 * (cpe_kernels.c); and the work the worker does in plain C (host_work).
 *
 * This file is the backend's dispatch, on top of its other files: the
 * context, the kernels' creation by kind, the slice and host work, and
 * each iteration's end. Every kernel keeps the predicted time of the
 * iteration in progress per pass (forward, backward-data, backward-weights;
 * test-phase forwards are left out; the accounting: cpe_account.c);
 * iteration_end moves it into the run's totals and the per-iteration
 * trace; cpe_report.c prints and writes them. What the kernel kinds share
 * (scratch, input shape, release) is in cpe_kernel_common.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpe_backend.h"
#include "cpe_backend_internal.h"
#include "base/memory.h"
#include "backends/ref.h"
#include "cpe/model.h"

/* ---- an iteration's end ---- */

static void cpe_iteration_end(st_bctx *ctx, long iter)
{
    for (int i = 0; i < ctx->n_kernels; i++) {
        cpe_kernel *k = ctx->kernels[i];
        if (ctx->trace.f) {
            cpe_trace_row(ctx->trace.f, iter, k->what, &k->work);
            /* Only kernels that can meet another layout transform. */
            if (k->base.kind == ST_K_CONV || k->src_state)
                cpe_trace_row(ctx->trace.f, iter, "  layout transformations", &k->layout);
        }
        cpe_work_close(&k->work, ctx->iterations);
        cpe_work_close(&k->layout, ctx->iterations);
    }
    for (int i = 0; i < ctx->n_host; i++) {
        if (ctx->trace.f)
            cpe_trace_row(ctx->trace.f, iter, ctx->host[i].what, &ctx->host[i].work);
        cpe_work_close(&ctx->host[i].work, ctx->iterations);
    }
    if (ctx->trace.f) {
        cpe_trace_row(ctx->trace.f, iter, "gradient sum + update", &ctx->reduce_update);
        fflush(ctx->trace.f);
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
    st_sw26010_model model;
    st_cpe_machine machine;
    st_status st = st_sw26010_model_load(&model, NULL, err);
    if (st == ST_OK)
        st = st_cpe_machine_load(&machine, o->machine_path, err);
    if (st == ST_OK)
        st = st_cpe_cluster_create(&c->cg, &machine, err);
    if (st == ST_OK && o->machine_path &&
        snprintf(c->machine_path, sizeof c->machine_path, "%s", o->machine_path) >=
            (int)sizeof c->machine_path)
        st = st_fail(err, ST_EUSAGE, "--cpe-machine %s: path too long", o->machine_path);
    if (st != ST_OK) {
        st_cpe_cluster_destroy(c->cg);
        free(c);
        return st;
    }
    st_cpe_cost_params p = st_sw26010_cost_params(&model, &machine);
    st_cpe_cluster_set_cost_params(c->cg, &p);
    *out = c;
    return ST_OK;
}

static void cpe_ctx_destroy(st_bctx *ctx)
{
    if (!ctx)
        return;
    /* a run that did not finish: no half-written trace is left */
    st_output_close(&ctx->trace, 0, NULL);
    st_cpe_cluster_destroy(ctx->cg);
    free(ctx->host);
    for (int i = 0; i < SCRATCHES; i++)
        st_free_aligned(ctx->scratch[i]);
    free(ctx->kernels);
    free(ctx);
}

st_status st_cpe_backend_run_begin(st_bctx *ctx, const st_backend_run *run, st_error *err)
{
    ctx->cost_only = run->cost_only != 0;
    st_cpe_cluster_set_cost_only(ctx->cg, ctx->cost_only);
    if (run->model_path) {
        st_sw26010_model model;
        st_status st = st_sw26010_model_load(&model, run->model_path, err);
        if (st != ST_OK)
            return st;
        st_cpe_cost_params p = st_sw26010_cost_params(&model, st_cpe_cluster_machine(ctx->cg));
        st_cpe_cluster_set_cost_params(ctx->cg, &p);
        int len = snprintf(ctx->model_path, sizeof ctx->model_path, "%s", run->model_path);
        if (len < 0 || (size_t)len >= sizeof ctx->model_path)
            return st_fail(err, ST_EUSAGE, "--cpe-model %s: path too long", run->model_path);
    }
    const char *report_path = run->report_path;
    if (!report_path)
        return ST_OK;
    int len = snprintf(ctx->report_path, sizeof ctx->report_path, "%s", report_path);
    if (len < 0 || (size_t)len + sizeof ".partial" > sizeof ctx->report_path)
        return st_fail(err, ST_EUSAGE, "--cpe-report %s: path too long", report_path);
    return ST_OK;
}

/* ---- the slice's gradient sum and update on the CPEs ---- */

static st_status cpe_slice_reduce(st_bctx *ctx, float *const *grads, int n_grads, size_t b,
                                  size_t e, float scale, st_error *err)
{
    st_cpe_counters c;
    st_status st = st_cpe_grad_sum(ctx->cg, grads, n_grads, b, e, scale, &c, err);
    return cpe_charge(&ctx->reduce_update, WORK_SUM, &c, 1, st);
}

static st_status cpe_slice_apply(st_bctx *ctx, const st_solver_step *step, size_t b, size_t e,
                                 float *weights, float *state, size_t stride, const float *g,
                                 st_error *err)
{
    st_cpe_counters c;
    ctx->slice_floats = e - b;
    st_status st = st_cpe_solver_update(ctx->cg, step, b, e, weights, state, stride, g, &c, err);
    return cpe_charge(&ctx->reduce_update, WORK_UPDATE, &c, 1, st);
}

/* ---- work in plain C, as swCaffe's helpers make it ---- */

static st_status cpe_host_work(st_bctx *ctx, int layer, const char *what, int pass, int n,
                               const st_stream_work *w, st_error *err)
{
    int i = 0;
    while (i < ctx->n_host && ctx->host[i].layer != layer)
        i++;
    if (i == ctx->n_host) {
        if (ctx->n_host == ctx->host_cap) {
            int cap = ctx->host_cap ? 2 * ctx->host_cap : 8;
            cpe_host *grown = realloc(ctx->host, (size_t)cap * sizeof *grown);
            if (!grown)
                return st_fail(err, ST_ENOMEM, "out of memory for the cpe backend's list of "
                               "plain-C work");
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
    return cpe_charge_streams(ctx, &ctx->host[i].work, pass, w, n, 1, &ctx->host[i].on_cpes, err);
}

/* ---- creation ---- */

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

/* The kinds, indexed by st_kind. */
static const cpe_kind *const kinds[ST_K_COUNT] = {
#define CPE_KIND_ENTRY(kind, stem, name) [kind] = &cpe_kind_##stem,
    ST_KINDS(CPE_KIND_ENTRY)
#undef CPE_KIND_ENTRY
};

static st_status cpe_kernel_create(st_bctx *ctx, const st_kdesc *d, st_kernel **out,
                                   st_error *err)
{
    if ((unsigned)d->kind >= ST_K_COUNT)
        return st_fail(err, ST_EINTERNAL, "cpe backend: no kernel kind %d", (int)d->kind);
    const cpe_kind *kind = kinds[d->kind];
    cpe_kernel *k = ref_kernel_new(sizeof *k, kind->ops, d, err);
    if (!k)
        return ST_ENOMEM;
    k->ctx = ctx;
    k->where = kind->where;
    /* A layout is always one of ours: only cpe kernels make them. */
    k->src_state = (cpe_layout_state *)d->src_layout;
    st_status st = kind->setup(k, d, err);
    if (st == ST_OK)
        st = remember(ctx, k, err);
    if (st != ST_OK) {
        cpe_kernel_destroy(&k->base);
        return st;
    }
    *out = &k->base;
    return ST_OK;
}

/* st_backend.precision_supported: fp32 only, as the machine it emulates. */
static int cpe_precision_supported(st_precision p, char *why, size_t size)
{
    if (p == ST_PRECISION_FP32)
        return 1;
    snprintf(why, size, "cannot compute in %s: the SW26010 has no %s arithmetic (its cores "
             "compute in fp32 and fp64); --backend ref --precision %s runs it in plain C",
             st_precision_names[p], st_precision_names[p], st_precision_names[p]);
    return 0;
}

const st_backend st_backend_cpe = {
    .name = "cpe",
    .precision_supported = cpe_precision_supported,
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
