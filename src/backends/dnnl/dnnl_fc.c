/* The oneDNN inner product ([connected]): its primitives and its forward
 * pass; its backward passes are the weighted ones (dnnl_kernel.c). */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "base/clock.h"
#include "base/memory.h"
#include "dnnl_internal.h"
#include "ops/bf16.h"

/* With bf16 operands the weight gradient is measured, as a convolution's
 * plan is (choices.h, under the key fc_choice_key): oneDNN's bf16 inner
 * product ("inner-product") against fp32's sgemm on the operands widened
 * back from bf16 ("sgemm", fc_dw_sgemm), the same arithmetic (a product of
 * two bf16 values is exact in fp32, the sums fp32's) in another order. On
 * AMX the sgemm wins on AlexNet's large layers at a small batch (32
 * images: 9216 x 4096 19.7 -> 10.0 ms, 4096 x 4096 8.8 -> 4.2 ms a pass,
 * 2 threads of a 2-core Xeon, +9% on the network) and loses on
 * cifar-alexnet's first (2304 x 384 at 64 images: 3.3 -> 3.9 ms). Without
 * a choice table, or with a convolution implementation named
 * (st_backend_opts.conv_impl not "auto"), the inner product's. */
static const char FC_PRIMITIVE[] = "inner-product", FC_SGEMM[] = "sgemm";

int dn_fc_choice_syntax(const char *value)
{
    return strcmp(value, FC_PRIMITIVE) == 0 || strcmp(value, FC_SGEMM) == 0;
}

/* The layer, samples and shape, and what is chosen. */
static void fc_choice_key(const dn_kernel *k, char *key, size_t size)
{
    const st_fc_desc *d = &k->d.fc;
    snprintf(key, size, "%s n%d %d>%d bf16 bwd_weights", d->base.name ? d->base.name : "fc",
             d->base.n, d->in, d->out);
}

/* dn_kernel.dw_other with bf16 operands: the weight gradient as fp32's
 * sgemm on the operands widened back from bf16 (exactly), dW [out, in] =
 * diff_dst^T [out, n] x src [n, in], the widened copies in the scratch's
 * temporaries. */
static st_status fc_dw_sgemm(dn_kernel *k, dn_variant *v, int n, const void *src,
                             const void *ddst, void *dw, void *workspace, void *scratch,
                             st_error *err)
{
    (void)v, (void)workspace;
    const st_fc_desc *d = &k->d.fc;
    float *src32 = (float *)((char *)scratch + (k->scratchpad + 63) / 64 * 64);
    float *ddst32 = src32 + (size_t)n * d->in;
    st_bf16_widen(src32, src, (size_t)n * d->in);
    st_bf16_widen(ddst32, ddst, (size_t)n * d->out);
    DN(dnnl_sgemm('T', 'N', d->out, d->in, n, 1.0f, ddst32, d->out, src32, d->in, 0.0f, dw,
                  d->in), "sgemm");
    return ST_OK;
}

/* Milliseconds of variant v's weight gradient by sgemm (1) or by the
 * primitive (0) on trial values (dn_trial_runs). */
static st_status fc_time(dn_kernel *k, dn_variant *v, int sgemm, double cutoff, double *ms,
                         st_error *err)
{
    const st_fc_desc *d = &k->d.fc;
    int n = v->n;
    const char *what = "inner product trial";
    size_t widened = (size_t)n * (d->in + d->out) * sizeof(float);
    void *src = dn_trial_buffer((size_t)n * d->in * 2, what, err),
         *ddst = dn_trial_buffer((size_t)n * d->out * 2, what, err),
         *dw = dn_trial_buffer((size_t)d->out * d->in * 4, what, err),
         *scratch = dn_trial_buffer((k->scratchpad + 63) / 64 * 64 + widened, what, err);
    st_status st = src && ddst && dw && scratch ? ST_OK : ST_ENOMEM;
    const dn_arg args[] = {{DNNL_ARG_SRC, src}, {DNNL_ARG_DIFF_DST, ddst},
                           {DNNL_ARG_DIFF_WEIGHTS, dw}};
    double best = 0.0;
    for (int r = 0, runs = 1; r < runs && st == ST_OK; r++) {
        double t0 = st_now();
        st = sgemm ? fc_dw_sgemm(k, v, n, src, ddst, dw, NULL, scratch, err)
                   : dn_exec_call(k->ctx, &v->bwd_weights, args, N_OF(args), scratch, err);
        double t = 1e3 * (st_now() - t0);
        if (r == 0)
            runs = dn_trial_runs(t, cutoff);
        if (r == 0 || t < best)
            best = t;
    }
    *ms = best;
    void *all[] = {src, ddst, dw, scratch};
    for (int i = 0; i < N_OF(all); i++)
        st_free_aligned(all[i]);
    return st;
}

/* The weight gradient's implementation with bf16 operands, given or
 * measured on variant v (the largest batch), and set up. */
static st_status fc_decide(dn_kernel *k, dn_variant *v, st_error *err)
{
    st_bctx *c = k->ctx;
    if (!c->choices || !c->conv_impl || strcmp(c->conv_impl, "auto") != 0)
        return ST_OK;
    char key[ST_CHOICE_MAX], value[ST_CHOICE_MAX] = "";
    fc_choice_key(k, key, sizeof key);
    while (st_choices_get(c->choices, key, value, sizeof value) == ST_CHOICE_FOUND) {
        if (dn_fc_choice_syntax(value))
            break;
        st_choices_reject(c->choices, key, value, "an inner product's weight gradient is "
                          "inner-product or sgemm");
        value[0] = '\0'; /* then claimed, by this worker or another */
    }
    if (!dn_fc_choice_syntax(value)) { /* claimed: measure */
        double ms[2];
        st_status st = fc_time(k, v, 0, 1e30, &ms[0], err);
        if (st == ST_OK) /* run once when 1.3 times slower: dnnl_conv_measure.c's PRUNE */
            st = fc_time(k, v, 1, 1.3 * ms[0], &ms[1], err);
        if (st != ST_OK) {
            st_choices_abandon(c->choices, key);
            return st;
        }
        char trials[128];
        snprintf(trials, sizeof trials, "%s %.3f ms, %s %.3f ms", FC_PRIMITIVE, ms[0], FC_SGEMM,
                 ms[1]);
        snprintf(value, sizeof value, "%s", ms[1] < ms[0] ? FC_SGEMM : FC_PRIMITIVE);
        st_choices_record(c->choices, key, value, trials);
    }
    if (strcmp(value, FC_SGEMM) == 0) {
        size_t widened = (size_t)k->d.fc.base.n * (k->d.fc.in + k->d.fc.out) * sizeof(float);
        if (widened > k->tmp_bytes)
            k->tmp_bytes = widened;
        k->dw_other = fc_dw_sgemm;
    }
    return ST_OK;
}

/* Inner product on plain [n, in] x [out, in]. An input in a blocked 4-D
 * layout is reordered to plain 4-D, the same memory as [n, in]. The
 * backward passes are oneDNN inner-product primitives. In fp32 the forward
 * is oneDNN's sgemm as dst^T [out, n] = W [out, in] * src^T, transposed
 * into dst with the bias, then the activation as an eltwise primitive:
 * oneDNN's own inner-product forward computes src * W^T, which with two
 * threads and a small batch runs 1.3 to 4 times slower (AlexNet's 9216 x
 * 4096 layer at batch 32: 60 ms against 14 ms; measured with dnnl_sgemm in
 * both orders); the fp32 weights are read plain, as the arena has them.
 * With bf16 operands (k->operand_dt) every pass is a primitive (oneDNN 2.6
 * has no bf16 GEMM in its C API; the weight gradient may be measured to
 * run as fp32's sgemm instead, below), the activation fused into the forward:
 * src [n, in], the weights (the workers' bf16 copy read as is where it is
 * given, st_kargs.weights_bf16; else converted from the fp32 ones once a
 * forward) and diff_dst in bf16, dst (bf16 where it is kept so:
 * st_kdesc.dst_bf16), diff_src and the weight gradient in f32, all plain.
 * Plain weights take oneDNN's GEMM-based bf16 inner product; with the
 * layouts its brgemm one chooses, the weights' reorders cost more than
 * they save (AlexNet's 9216 x 4096 layer at batch 16 a worker, 2 workers
 * on Zen 4: into bf16 25.7 ms, the gradient back to plain 19.7 ms, the
 * layer's three passes 63 ms against 33 ms plain, whose conversion takes
 * 6.3 ms; fp32's: 43 ms). */
static st_status fc_build(dn_kernel *k, dn_variant *v, int first, st_error *err)
{
    const st_fc_desc *d = &k->d.fc;
    st_bctx *c = k->ctx;
    int n = v->n;
    int bf = k->operand_dt != dnnl_f32;
    dnnl_dims_t sd = {n, d->in}, dd = {n, d->out}, wd = {d->out, d->in}, bd = {d->out};
    dnnl_memory_desc_t src, dst, wplain, bias, usrc, psrc;
    st_status st;
    if ((st = dn_md_plain(&src, 2, sd, err)) || (st = dn_md_plain(&dst, 2, dd, err)) ||
        (st = dn_md_plain(&wplain, 2, wd, err)) || (st = dn_md_plain(&bias, 1, bd, err)) ||
        (st = dn_user_src_md(k, n, &usrc, err)))
        return st;
    psrc = src;
    if (usrc.ndims != 2 && (st = dn_md_plain(&psrc, usrc.ndims, usrc.dims, err)))
        return st;
    /* the operands' types; every layout plain */
    dnnl_memory_desc_t src_in = dn_md_as(&src, k->operand_dt),
                       ddst_in = dn_md_as(&dst, k->operand_dt),
                       wei = dn_md_as(&wplain, k->operand_dt);
    psrc = dn_md_as(&psrc, k->operand_dt);
    if (d->base.dst_bf16)
        dst = dn_md_as(&dst, dnnl_bf16);
    float alpha;
    dnnl_alg_kind_t post = dn_act_alg(d->act, &alpha, 0);
    dnnl_inner_product_desc_t fd, bdd, bwd;
    DN(dnnl_inner_product_forward_desc_init(&fd, dnnl_forward_training, &src_in, &wei,
                                            d->bias ? &bias : NULL, &dst),
       "inner product forward descriptor");
    if (!bf && post != dnnl_alg_kind_undef &&
        (st = dn_post_build(k, v, post, alpha, &dst, "inner product activation", err)))
        return st;
    DN(dnnl_inner_product_backward_data_desc_init(&bdd, &src, &wei, &ddst_in),
       "inner product backward data descriptor");
    /* with bf16 operands the bias gradient is fp32's sum (dn_finish_build) */
    DN(dnnl_inner_product_backward_weights_desc_init(&bwd, &src_in, &wplain,
                                                     d->bias && !bf ? &bias : NULL, &ddst_in),
       "inner product backward weights descriptor");
    dnnl_primitive_desc_t fpd = NULL, dpd = NULL, wpd = NULL;
    st = dn_make_pd(c, &fpd, &fd, NULL, bf ? post : 0, alpha, "inner product forward", err);
    if (st == ST_OK)
        st = dn_make_pd(c, &dpd, &bdd, fpd, 0, 0, "inner product backward data", err);
    if (st == ST_OK)
        st = dn_make_pd(c, &wpd, &bwd, fpd, 0, 0, "inner product backward weights", err);
    if (!bf && fpd) { /* a hint for the backward descriptors only: the forward is sgemm */
        dnnl_primitive_desc_destroy(fpd);
        fpd = NULL;
    }
    dn_pass_pds pds = {fpd, dpd, wpd, NULL};
    if (st == ST_OK && bf && first)
        st = dn_weights_edges(k, &pds, &wplain, err);
    st = dn_finish_build(k, v, st, &pds, &usrc, &psrc, &dst, first, err);
    if (first && bf && d->base.backward && st == ST_OK)
        st = fc_decide(k, v, err);
    if (first && !bf) { /* the forward's dst^T, after the diff_src temporary */
        k->dst_t_off = (k->tmp_bytes + 63) / 64 * 64;
        k->tmp_bytes = k->dst_t_off + (size_t)d->base.n * d->out * sizeof(float);
    }
    return st;
}

static st_status fc_forward(st_kernel *base, const st_kargs *a, st_error *err)
{
    dn_kernel *k = (dn_kernel *)base;
    if (k->operand_dt != dnnl_f32)
        return dn_weighted_forward(base, a, err);
    const st_fc_desc *d = &k->d.fc;
    dn_variant *v = dn_variant_of(k, a->n, err);
    if (!v)
        return ST_EINTERNAL;
    const void *src;
    k->ddst_of = k->ddst_ws = NULL; /* new samples: see dnnl_kernel.c's weighted_ddst */
    st_status st = dn_fwd_src(k, v, a, &src, err);
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
    return dn_post_run(k, v, a->dst, a->dst, a->scratch, err);
}

const dn_kind dn_kind_fc = {fc_build, {fc_forward, dn_weighted_backward_data,
                                       dn_weighted_backward_weights, dn_kernel_destroy}};
