/* Convolution on oneDNN, and the choice of its implementation by
 * measurement, as swCaffe chose its convolution strategy per layer.
 *
 * oneDNN offers several implementations of a convolution pass, and which
 * one it lists first depends on the activation layout it is given: with
 * format_tag any it picks its blocked layouts (channels in blocks of 16,
 * padded) and its direct jit kernels; with explicit nhwc activations it
 * also has brgemm kernels and kernels with channel tails instead of padding
 * (LeNet-5's conv2, 20 -> 50 channels: 3.7 ms for its three passes against
 * 6.2 ms blocked on one Zen 5 core); with nchw it has im2col + its sgemm
 * ("gemm"), the only fast path where its direct kernels are missing (a
 * 15x15 filter on three channels has no jit backward: blocked it falls to
 * the reference implementation, 27 times slower than ours).
 *
 * So a convolution is planned per kernel (dn_conv_plan): a layout family
 * for its activations (blocked, nhwc, nchw) and per pass the name of the
 * oneDNN implementation, or for a bf16 weight gradient on nhwc activations
 * "im2col+matmul/C" (dnnl_conv_matmul.c: the input unfolded, C images at a
 * time, and oneDNN's matmul; no primitive of the pass). With conv_impl
 * "auto" the plan is measured when the kernel is created
 * (dnnl_conv_measure.c), on the worker's own batch:
 * every non-reference implementation oneDNN lists for the three families
 * is timed (pass by pass, on buffers of the right sizes), with the reorders
 * the layouts force at the kernel's edges (its input arriving in another
 * layout and its gradient going back, a plain output, the weights'
 * reorders each iteration), and the plan of least total time wins. The activations'
 * layout is one decision for the three passes (they share the tensors);
 * each pass then runs its fastest implementation for it. The choice lands
 * in the process's choice table (choices.h) under a key made of the layer,
 * the samples per call, the shape and the passes run, so the other workers
 * of that shape use it without measuring, and a run given the same table
 * (a choice file, a snapshot) builds exactly the same primitives. A layer
 * whose measurement would be another's (choice_twin: the same shape,
 * batch, precision, input layout, fused bias and activation, output
 * plainness; ResNet's repeated blocks) takes that layer's choice without
 * measuring (st_choices_twin).
 *
 * A named conv_impl forces a plan without measuring: "blocked" (oneDNN's
 * first implementations with format any: the choice before measurement
 * existed, and the default of callers that ask nothing), "nhwc", and
 * "gemm" (nchw, oneDNN's GEMM-based implementation in every pass); a layer
 * whose named layouts leave a pass to oneDNN's reference implementation
 * takes nhwc, else gemm, when one of them has a real one
 * (plan_avoid_ref). The descriptors and the listing of oneDNN's
 * implementations, which the measurement uses too, are dnnl_conv_desc.c's. */
#include <stdio.h>
#include <string.h>

#include "base/hash.h"
#include "dnnl_conv.h"

/* The names conv_impl may take besides "auto" (st_backend.conv_impls). */
const char *const dn_conv_impls[] = {"blocked", "nhwc", "gemm", NULL};

/* ---- building a plan ---- */

/* The pds of plan's passes for n samples. first: the forward is created
 * from the family's format tags and the layouts it resolves are the
 * kernel's from then on; otherwise every pass gets the kernel's layouts,
 * and a pass whose named implementation does not take this n gets oneDNN's
 * first. A pass that does not run has no pd. */
static st_status plan_pds(dn_kernel *k, const dn_conv_plan *plan, int n, int first,
                          dn_pass_pds *pds, st_error *err)
{
    const st_conv_desc *d = &k->d.conv;
    st_bctx *c = k->ctx;
    dn_conv_geom g;
    dn_conv_geom_init(k, n, &g);
    memset(pds, 0, sizeof *pds);
    dnnl_memory_desc_t src, dst, wei, weid, weiw;
    dnnl_format_tag_t tag = dn_family_tags[plan->family];
    st_status st = ST_OK;
    if (first) {
        if ((st = dn_md_tag(&src, g.sd, tag, err)) || (st = dn_md_tag(&dst, g.dd, tag, err)) ||
            (st = dn_md_any(&wei, g.wnd, g.wd, err)))
            return st;
        weid = weiw = wei;
    } else {
        src = dn_md_for_n(&k->psrc, n);
        dst = dn_md_for_n(&k->pdst, n);
        wei = k->pw;
        weid = k->pwd;
        weiw = k->pww;
    }
    float alpha;
    dnnl_alg_kind_t post = dn_act_alg(d->act, &alpha, 0);
    dnnl_convolution_desc_t op;
    dnnl_primitive_desc_t *out[DN_PASSES] = {&pds->fwd, &pds->bwd_data, &pds->bwd_weights};
    int runs[DN_PASSES] = {1, d->base.src_grad, d->base.backward};
    int mm = dn_conv_mm_images_named(plan->impl[DN_PASS_BWD_WEIGHTS]) > 0;
    for (int p = 0; p < DN_PASSES && st == ST_OK; p++) {
        if (!runs[p])
            continue;
        if (p == DN_PASS_BWD_WEIGHTS && mm) { /* no primitive: dnnl_conv_matmul.c */
            if (!dn_conv_mm_usable(k, &src, &dst))
                st = st_fail(err, ST_EBACKEND, "the weight gradient as %s needs bf16 "
                             "operands, nhwc activations and no groups",
                             plan->impl[DN_PASS_BWD_WEIGHTS]);
            continue;
        }
        const dnnl_memory_desc_t *w = p == DN_PASS_FWD ? &wei : p == DN_PASS_BWD_DATA ? &weid
                                                                                       : &weiw;
        st = dn_conv_op(k, &g, p, &src, w, &dst, &op, err);
        if (st == ST_OK)
            st = dn_pd_pick(c, &op, p == DN_PASS_FWD ? NULL : pds->fwd, p == DN_PASS_FWD ? post : 0,
                            alpha, plan->impl[p], plan->gemm_only, !first, out[p], err);
        if (st == ST_OK && !*out[p])
            st = st_fail(err, ST_EBACKEND, "oneDNN has no %s convolution %s%s%s with %s "
                         "activations", plan->gemm_only ? "GEMM-based" : "",
                         dn_pass_names[p], plan->impl[p][0] ? " implementation " : "",
                         plan->impl[p], dn_family_names[plan->family]);
        if (st == ST_OK && p == DN_PASS_FWD) {
            src = *dn_pd_md(pds->fwd, DNNL_ARG_SRC);
            dst = *dn_pd_md(pds->fwd, DNNL_ARG_DST);
            if (!dn_n_outermost(&src) || !dn_n_outermost(&dst))
                st = st_fail(err, ST_EBACKEND, "oneDNN chose a convolution layout that blocks "
                             "the sample dimension");
        }
    }
    if (st == ST_OK &&
        ((pds->bwd_data && (!dn_md_same_layout(dn_pd_md(pds->bwd_data, DNNL_ARG_DIFF_SRC),
                                               &src) ||
                            !dn_md_same_layout(dn_pd_md(pds->bwd_data, DNNL_ARG_DIFF_DST),
                                               &dst))) ||
         (pds->bwd_weights &&
          (!dn_md_same_layout(dn_pd_md(pds->bwd_weights, DNNL_ARG_DIFF_DST), &dst) ||
           !dnnl_memory_desc_equal(dn_pd_md(pds->bwd_weights, DNNL_ARG_SRC), &src)))))
        st = st_fail(err, ST_EBACKEND, "oneDNN convolution backward wants other layouts than "
                     "its forward");
    if (st != ST_OK) {
        dnnl_primitive_desc_t all[] = {pds->fwd, pds->bwd_data, pds->bwd_weights};
        for (int i = 0; i < DN_PASSES; i++)
            if (all[i])
                dnnl_primitive_desc_destroy(all[i]);
        memset(pds, 0, sizeof *pds);
    }
    return st;
}

static st_status plan_build(dn_kernel *k, dn_variant *v, int first, st_error *err)
{
    dn_conv_geom g;
    dn_conv_geom_init(k, v->n, &g);
    dnnl_memory_desc_t usrc, wplain;
    dn_pass_pds pds;
    st_status st;
    if ((st = dn_md_plain(&wplain, g.wnd, g.wd, err)) ||
        (st = dn_user_src_md(k, v->n, &usrc, err)) ||
        (st = plan_pds(k, &k->plan, v->n, first, &pds, err)))
        return st;
    dnnl_memory_desc_t src = *dn_pd_md(pds.fwd, DNNL_ARG_SRC);
    dnnl_memory_desc_t dst = *dn_pd_md(pds.fwd, DNNL_ARG_DST);
    /* the weight gradient as im2col + matmul: its layout, then its matmul */
    int mm = k->d.base.backward ? dn_conv_mm_images_named(k->plan.impl[DN_PASS_BWD_WEIGHTS]) : 0;
    dnnl_memory_desc_t dw_mm;
    if (mm && (st = dn_conv_mm_dw_md(k, &dw_mm, err)) == ST_OK)
        pds.dw_md = &dw_mm;
    if (first && st == ST_OK) {
        k->psrc = src;
        st = dn_weights_edges(k, &pds, &wplain, err);
    }
    st = dn_finish_build(k, v, st, &pds, &usrc, &src, &dst, first, err);
    if (mm && st == ST_OK)
        st = dn_conv_mm_build(k, v, mm, first, err);
    return st;
}

/* ---- plans as text ---- */

static void plan_format(const dn_conv_plan *plan, char *buf, size_t size)
{
    snprintf(buf, size, "%s %s %s %s", dn_family_names[plan->family],
             plan->impl[0][0] ? plan->impl[0] : "-", plan->impl[1][0] ? plan->impl[1] : "-",
             plan->impl[2][0] ? plan->impl[2] : "-");
}

/* What a plan's text is, for messages. */
static const char plan_syntax[] = "expected 'LAYOUT FWD BWD_DATA BWD_WEIGHTS', LAYOUT one of "
                                  "blocked, nhwc, nchw, then oneDNN implementation names (of "
                                  "at most 63 bytes) or '-' (BWD_WEIGHTS in bf16 also "
                                  "im2col+matmul/IMAGES)";

/* "FAMILY FWD BWD_DATA BWD_WEIGHTS" ("-": oneDNN's first), words separated
 * by spaces or tabs; 0 if malformed (a word too long for its field
 * included: it is never cut to fit). */
static int plan_parse(const char *text, dn_conv_plan *plan)
{
    memset(plan, 0, sizeof *plan);
    const char *p = text;
    for (int w = 0; w < 1 + DN_PASSES; w++) {
        p += strspn(p, " \t");
        size_t len = strcspn(p, " \t");
        if (len == 0 || len >= sizeof plan->impl[0])
            return 0;
        if (w == 0) {
            int f = 0;
            while (f < DN_FAMILIES && (strlen(dn_family_names[f]) != len ||
                                       strncmp(p, dn_family_names[f], len) != 0))
                f++;
            if (f == DN_FAMILIES)
                return 0;
            plan->family = (dn_family)f;
        } else if (len != 1 || *p != '-') {
            memcpy(plan->impl[w - 1], p, len);
        }
        p += len;
    }
    return p[strspn(p, " \t")] == '\0';
}

int dn_conv_choice_syntax(const char *value, char *why, size_t size)
{
    dn_conv_plan plan;
    if (plan_parse(value, &plan))
        return 1;
    snprintf(why, size, "%s", plan_syntax);
    return 0;
}

/* The plan conv_impl names (NULL: blocked); 0 if it names none. */
static int plan_forced(const char *conv_impl, dn_conv_plan *plan)
{
    memset(plan, 0, sizeof *plan);
    if (!conv_impl || strcmp(conv_impl, "blocked") == 0)
        plan->family = DN_FAMILY_BLOCKED;
    else if (strcmp(conv_impl, "nhwc") == 0)
        plan->family = DN_FAMILY_NHWC;
    else if (strcmp(conv_impl, "gemm") == 0) {
        plan->family = DN_FAMILY_NCHW;
        plan->gemm_only = 1;
    } else {
        return 0;
    }
    return 1;
}

/* Whether one of plan's passes would run oneDNN's reference
 * implementation for kernel k (0 also when the plan cannot be built: its
 * build will say why). */
static int plan_runs_ref(dn_kernel *k, const dn_conv_plan *plan)
{
    dn_pass_pds pds;
    st_error ignored = {0};
    if (plan_pds(k, plan, k->d.base.n, 1, &pds, &ignored) != ST_OK)
        return 0;
    int ref = 0;
    dnnl_primitive_desc_t all[] = {pds.fwd, pds.bwd_data, pds.bwd_weights};
    for (int i = 0; i < DN_PASSES; i++)
        if (all[i]) {
            ref |= dn_impl_is_ref(dn_pd_impl_name(all[i]));
            dnnl_primitive_desc_destroy(all[i]);
        }
    return ref;
}

/* A named conv_impl whose layouts leave a pass of kernel k to oneDNN's
 * reference implementation (LeNet-5's first convolution, one input
 * channel, has no blocked jit backward-weights: the run was 65 times
 * slower) takes the first of nhwc and gemm that has a real implementation
 * of every pass; the plan named stays when neither has. */
static void plan_avoid_ref(dn_kernel *k, dn_conv_plan *plan)
{
    if (!plan_runs_ref(k, plan))
        return;
    const char *next[] = {"nhwc", "gemm"};
    for (int i = 0; i < N_OF(next); i++) {
        dn_conv_plan other;
        plan_forced(next[i], &other);
        if (!plan_runs_ref(k, &other)) {
            *plan = other;
            return;
        }
    }
}

/* Whether plan's named implementations exist for kernel k (a choice given
 * to this run may come from another machine or oneDNN). */
static st_status plan_check(dn_kernel *k, const dn_conv_plan *plan, st_error *err)
{
    dn_pass_pds pds;
    st_status st = plan_pds(k, plan, k->d.base.n, 1, &pds, err);
    if (st != ST_OK)
        return st;
    dnnl_primitive_desc_t all[] = {pds.fwd, pds.bwd_data, pds.bwd_weights};
    for (int i = 0; i < DN_PASSES; i++)
        if (all[i])
            dnnl_primitive_desc_destroy(all[i]);
    return ST_OK;
}

/* The choice's key: the layer, samples, shape and passes, and the
 * precision when it is not fp32 (a bf16 plan is another measurement; fp32
 * keys stay as they were before bf16, so that choice files and snapshots
 * written then still give their plans), then which activations are bf16:
 * "in bf16" (src arrives so), "out bf16" (dst kept so), whose edges and
 * implementations differ. */
static int choice_key_named(const dn_kernel *k, const char *name, char *key, size_t size)
{
    const st_conv_desc *d = &k->d.conv;
    st_precision p = k->ctx->precision;
    const dnnl_memory_desc_t *in = d->base.src_layout;
    return snprintf(key, size, "%s n%d %dx%dx%d>%dx%dx%d k%dx%d s%dx%d p%dx%d g%d %s%s%s%s%s",
                    name, d->base.n, d->ic, d->ih, d->iw, d->oc, d->oh, d->ow, d->kh, d->kw,
                    d->sh, d->sw, d->ph, d->pw, d->groups,
                    d->base.src_grad ? "fwd+bwd" : d->base.backward ? "fwd+bwd_weights" : "fwd",
                    p == ST_PRECISION_FP32 ? "" : " ",
                    p == ST_PRECISION_FP32 ? "" : st_precision_names[p],
                    in && in->data_type == dnnl_bf16 ? " in bf16" : "",
                    d->base.dst_bf16 ? " out bf16" : "");
}

static void choice_key(const dn_kernel *k, char *key, size_t size)
{
    choice_key_named(k, k->d.conv.base.name ? k->d.conv.base.name : "conv", key, size);
}

/* Everything the measurement of kernel k reads but its layer (the key
 * without the name, the input's layout, the output's plainness, the
 * bias and activation fused), into twin [size]: layers whose twins are
 * equal measure the same (st_choices_twin); "" when it does not fit. */
static void choice_twin(const dn_kernel *k, char *twin, size_t size)
{
    const st_conv_desc *d = &k->d.conv;
    int at = choice_key_named(k, "conv", twin, size);
    uint64_t in = d->base.src_layout
                      ? st_hash_bytes(ST_HASH_START, d->base.src_layout, sizeof(dnnl_memory_desc_t))
                      : 0;
    if (at < 0 || (size_t)at >= size ||
        (size_t)snprintf(twin + at, size - (size_t)at, " in %016llx plain %d bias %d act %d",
                         (unsigned long long)in, d->base.dst_plain, d->bias, (int)d->act) >=
            size - (size_t)at)
        twin[0] = '\0';
}

/* The plan of kernel k: forced, found in the choice table, or measured
 * (and recorded there). */
static st_status conv_decide(dn_kernel *k, st_error *err)
{
    st_bctx *c = k->ctx;
    if (!c->conv_impl || strcmp(c->conv_impl, "auto") != 0) {
        if (!plan_forced(c->conv_impl, &k->plan))
            return st_fail(err, ST_EUSAGE, "unknown convolution implementation '%s'",
                           c->conv_impl);
        plan_avoid_ref(k, &k->plan);
        return ST_OK;
    }
    char key[ST_CHOICE_MAX], value[ST_CHOICE_MAX], trials[2048] = "";
    choice_key(k, key, sizeof key);
    for (;;) {
        if (c->choices && st_choices_get(c->choices, key, value, sizeof value) ==
                              ST_CHOICE_FOUND) {
            if (!plan_parse(value, &k->plan)) {
                char origin[ST_CHOICE_MAX];
                st_choices_origin(c->choices, key, origin, sizeof origin);
                return st_fail(err, ST_EINPUT, "%s: the choice '%s' for %s: %s", origin, value,
                               key, plan_syntax);
            }
            st_error why = {0};
            if (plan_check(k, &k->plan, &why) == ST_OK)
                return ST_OK;
            st_choices_reject(c->choices, key, value, why.msg);
            continue; /* then claimed, by this worker or another */
        }
        char twin[ST_CHOICE_MAX];
        choice_twin(k, twin, sizeof twin);
        if (c->choices && st_choices_twin(c->choices, key, twin, value, sizeof value)) {
            if (!plan_parse(value, &k->plan))
                return st_fail(err, ST_EINTERNAL, "the choice '%s' measured for %s's twin: %s",
                               value, key, plan_syntax);
            return ST_OK;
        }
        st_status st = dn_conv_measure(k, &k->plan, trials, sizeof trials, err);
        if (c->choices) {
            if (st == ST_OK) {
                plan_format(&k->plan, value, sizeof value);
                st_choices_record(c->choices, key, value, trials);
            } else {
                st_choices_abandon(c->choices, key);
            }
        }
        return st;
    }
}

/* The primitives of variant v (first: the largest batch size, which also
 * decides the kernel's plan). */
static st_status conv_build(dn_kernel *k, dn_variant *v, int first, st_error *err)
{
    st_status st = first ? conv_decide(k, err) : ST_OK;
    return st == ST_OK ? plan_build(k, v, first, err) : st;
}

/* Its passes are the weighted ones (dnnl_kernel.c). */
const dn_kind dn_kind_conv = {conv_build, {dn_weighted_forward, dn_weighted_backward_data,
                                           dn_weighted_backward_weights, dn_kernel_destroy}};
