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
 * oneDNN implementation. With conv_impl "auto" the plan is measured when
 * the kernel is created, on the worker's own batch: every non-reference
 * implementation oneDNN lists for the three families is timed (pass by
 * pass, on buffers of the right sizes), with the reorders the layouts force
 * at the kernel's edges (its input arriving in another layout and its
 * gradient going back, a plain output, the weights' reorders each
 * iteration), and the plan of least total time wins. The activations'
 * layout is one decision for the three passes (they share the tensors);
 * each pass then runs its fastest implementation for it. The choice lands
 * in the process's choice table (choices.h) under a key made of the layer,
 * the samples per call, the shape and the passes run, so the other workers
 * of that shape use it without measuring, and a run given the same table
 * (a choice file, a snapshot) builds exactly the same primitives.
 *
 * A named conv_impl forces a plan without measuring: "blocked" (oneDNN's
 * first implementations with format any: the choice before measurement
 * existed, and the default of callers that ask nothing), "nhwc", and
 * "gemm" (nchw, oneDNN's GEMM-based implementation in every pass). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/clock.h"
#include "dnnl_internal.h"

static const char *const family_names[DN_FAMILIES] = {"blocked", "nhwc", "nchw"};
static const dnnl_format_tag_t family_tags[DN_FAMILIES] = {dnnl_format_tag_any, dnnl_nhwc,
                                                           dnnl_nchw};
static const char *const pass_names[DN_PASSES] = {"fwd", "bwd_data", "bwd_weights"};

/* The names conv_impl may take besides "auto" (st_backend.conv_impls). */
const char *const dn_conv_impls[] = {"blocked", "nhwc", "gemm", NULL};

/* ---- geometry and descriptors ---- */

typedef struct conv_geom {
    int wnd;                  /* weights dims: 4, or 5 with groups */
    dnnl_dims_t sd, dd, wd, bd;
    dnnl_dims_t strides, pl, pr;
} conv_geom;

static void conv_geom_init(const dn_kernel *k, int n, conv_geom *g)
{
    const st_conv_desc *d = &k->d.conv;
    memset(g, 0, sizeof *g);
    g->wnd = d->groups == 1 ? 4 : 5;
    dnnl_dims_t wd = {d->oc, d->ic, d->kh, d->kw, 0};
    if (d->groups > 1) {
        wd[0] = d->groups; wd[1] = d->oc / d->groups; wd[2] = d->ic / d->groups;
        wd[3] = d->kh; wd[4] = d->kw;
    }
    memcpy(g->wd, wd, sizeof wd);
    g->bd[0] = d->oc;
    g->strides[0] = d->sh; g->strides[1] = d->sw;
    g->pl[0] = d->ph; g->pl[1] = d->pw;
    g->pr[0] = (dnnl_dim_t)(d->oh - 1) * d->sh + d->kh - d->ih - d->ph;
    g->pr[1] = (dnnl_dim_t)(d->ow - 1) * d->sw + d->kw - d->iw - d->pw;
    dn_src_dims(&k->d, n, g->sd);
    dn_dst_dims(&k->d, n, g->dd);
}

/* The operation descriptor of pass p on the given layouts (wei: the
 * weights, or for bwd_weights the weight gradient's). */
static st_status conv_op(const dn_kernel *k, const conv_geom *g, int p,
                         const dnnl_memory_desc_t *src, const dnnl_memory_desc_t *wei,
                         const dnnl_memory_desc_t *dst, dnnl_convolution_desc_t *op,
                         st_error *err)
{
    dnnl_memory_desc_t bias;
    st_status st = dn_md_plain(&bias, 1, g->bd, err);
    if (st != ST_OK)
        return st;
    const dnnl_memory_desc_t *b = k->d.conv.bias ? &bias : NULL;
    dnnl_status_t s;
    if (p == DN_PASS_FWD)
        s = dnnl_convolution_forward_desc_init(op, dnnl_forward_training,
                                               dnnl_convolution_direct, src, wei, b, dst,
                                               g->strides, g->pl, g->pr);
    else if (p == DN_PASS_BWD_DATA)
        s = dnnl_convolution_backward_data_desc_init(op, dnnl_convolution_direct, src, wei, dst,
                                                     g->strides, g->pl, g->pr);
    else
        s = dnnl_convolution_backward_weights_desc_init(op, dnnl_convolution_direct, src, wei, b,
                                                        dst, g->strides, g->pl, g->pr);
    if (s != dnnl_success)
        return dn_fail(err, "convolution descriptor", s);
    return ST_OK;
}

static st_status md_tag(dnnl_memory_desc_t *md, const dnnl_dims_t dims, dnnl_format_tag_t tag,
                        st_error *err)
{
    DN(dnnl_memory_desc_init_by_tag(md, 4, dims, dnnl_f32, tag), "convolution activation md");
    return ST_OK;
}

static const char *impl_name(const_dnnl_primitive_desc_t pd)
{
    const char *name = NULL;
    if (dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &name) != dnnl_success ||
        !name)
        return "?";
    return name;
}

static int impl_is_ref(const char *name)
{
    return strncmp(name, "ref", 3) == 0;
}

/* im2col + sgemm ("gemm:jit" and its ISA variants), not the brgemm ones */
static int impl_is_gemm(const char *name)
{
    return strstr(name, "gemm") && !strstr(name, "brg");
}

/* A visitor of op's implementations says what happens to pd next. */
enum { VISIT_DROP, VISIT_KEEP, VISIT_KEEP_STOP };
typedef int (*impl_visit)(void *ctx, dnnl_primitive_desc_t pd, const char *name);

/* Visit every implementation oneDNN lists for op, in its order of
 * preference, destroying those the visitor does not keep. A descriptor no
 * implementation takes visits nothing. */
static st_status impls_visit(st_bctx *c, const dnnl_convolution_desc_t *op,
                             const_dnnl_primitive_desc_t hint, int post, float alpha,
                             impl_visit visit, void *ctx, st_error *err)
{
    dnnl_primitive_attr_t attr;
    st_status st = dn_make_attr(&attr, post, alpha, err);
    if (st != ST_OK)
        return st;
    dnnl_primitive_desc_iterator_t it = NULL;
    dnnl_status_t s = dnnl_primitive_desc_iterator_create(&it, op, attr, c->engine, hint);
    dnnl_primitive_attr_destroy(attr);
    if (s == dnnl_unimplemented)
        return ST_OK;
    if (s != dnnl_success)
        return dn_fail(err, "convolution implementations", s);
    int next = VISIT_DROP;
    do {
        dnnl_primitive_desc_t pd = dnnl_primitive_desc_iterator_fetch(it);
        if (!pd)
            break;
        next = visit(ctx, pd, impl_name(pd));
        if (next == VISIT_DROP)
            dnnl_primitive_desc_destroy(pd);
    } while (next != VISIT_KEEP_STOP && dnnl_primitive_desc_iterator_next(it) == dnnl_success);
    dnnl_primitive_desc_iterator_destroy(it);
    return ST_OK;
}

typedef struct pick_ctx {
    const char *impl; /* the name wanted; "": the first */
    int gemm_only;
    int fallback;     /* no such name: oneDNN's first */
    dnnl_primitive_desc_t pd, first;
} pick_ctx;

static int pick_visit(void *ctx, dnnl_primitive_desc_t pd, const char *name)
{
    pick_ctx *p = ctx;
    int match = p->gemm_only ? impl_is_gemm(name) : !p->impl[0] || strcmp(p->impl, name) == 0;
    if (match) {
        p->pd = pd;
        return VISIT_KEEP_STOP;
    }
    if (p->fallback && !p->first) {
        p->first = pd;
        return VISIT_KEEP;
    }
    return VISIT_DROP;
}

/* The implementation of op named impl (pick_ctx); *pd NULL when there is
 * none (and no fallback). */
static st_status pd_pick(st_bctx *c, const dnnl_convolution_desc_t *op,
                         const_dnnl_primitive_desc_t hint, int post, float alpha,
                         const char *impl, int gemm_only, int fallback,
                         dnnl_primitive_desc_t *pd, st_error *err)
{
    pick_ctx p = {.impl = impl, .gemm_only = gemm_only, .fallback = fallback};
    *pd = NULL;
    st_status st = impls_visit(c, op, hint, post, alpha, pick_visit, &p, err);
    if (p.pd) {
        if (p.first)
            dnnl_primitive_desc_destroy(p.first);
        *pd = p.pd;
    } else {
        *pd = p.first;
    }
    return st;
}

/* ---- building a plan ---- */

/* A weights layout chosen by a primitive: whether it differs from plain, and
 * if so a workspace buffer and the reorder from (to_plain = 0) or to plain. */
static st_status weights_edge(dn_kernel *k, const dnnl_memory_desc_t *plain,
                              const dnnl_memory_desc_t *chosen, int to_plain, int *edge,
                              size_t *ws, dn_exec *reorder, st_error *err)
{
    *edge = !dnnl_memory_desc_equal(plain, chosen);
    if (!*edge)
        return ST_OK;
    size_t sp = 0;
    *ws = dn_ws_take(k, dnnl_memory_desc_get_size(chosen));
    st_status st = to_plain ? dn_make_reorder(k->ctx, reorder, chosen, plain, 0, &sp, err)
                            : dn_make_reorder(k->ctx, reorder, plain, chosen, 0, &sp, err);
    if (sp > k->scratchpad)
        k->scratchpad = sp;
    return st;
}

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
    conv_geom g;
    conv_geom_init(k, n, &g);
    memset(pds, 0, sizeof *pds);
    dnnl_memory_desc_t src, dst, wei, weid, weiw;
    dnnl_format_tag_t tag = family_tags[plan->family];
    st_status st = ST_OK;
    if (first) {
        if ((st = md_tag(&src, g.sd, tag, err)) || (st = md_tag(&dst, g.dd, tag, err)) ||
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
    for (int p = 0; p < DN_PASSES && st == ST_OK; p++) {
        if (!runs[p])
            continue;
        const dnnl_memory_desc_t *w = p == DN_PASS_FWD ? &wei : p == DN_PASS_BWD_DATA ? &weid
                                                                                       : &weiw;
        st = conv_op(k, &g, p, &src, w, &dst, &op, err);
        if (st == ST_OK)
            st = pd_pick(c, &op, p == DN_PASS_FWD ? NULL : pds->fwd,
                         p == DN_PASS_FWD ? post : 0, alpha, plan->impl[p], plan->gemm_only,
                         !first, out[p], err);
        if (st == ST_OK && !*out[p])
            st = st_fail(err, ST_EBACKEND, "oneDNN has no %s convolution %s%s%s with %s "
                         "activations", plan->gemm_only ? "GEMM-based" : "",
                         pass_names[p], plan->impl[p][0] ? " implementation " : "",
                         plan->impl[p], family_names[plan->family]);
        if (st == ST_OK && p == DN_PASS_FWD) {
            src = *dn_pd_md(pds->fwd, DNNL_ARG_SRC);
            dst = *dn_pd_md(pds->fwd, DNNL_ARG_DST);
            if (!dn_n_outermost(&src) || !dn_n_outermost(&dst))
                st = st_fail(err, ST_EBACKEND, "oneDNN chose a convolution layout that blocks "
                             "the sample dimension");
        }
    }
    if (st == ST_OK &&
        ((pds->bwd_data && (!dnnl_memory_desc_equal(dn_pd_md(pds->bwd_data, DNNL_ARG_DIFF_SRC),
                                                    &src) ||
                            !dnnl_memory_desc_equal(dn_pd_md(pds->bwd_data, DNNL_ARG_DIFF_DST),
                                                    &dst))) ||
         (pds->bwd_weights &&
          !dnnl_memory_desc_equal(dn_pd_md(pds->bwd_weights, DNNL_ARG_DIFF_DST), &dst))))
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
    conv_geom g;
    conv_geom_init(k, v->n, &g);
    dnnl_memory_desc_t usrc, wplain;
    dn_pass_pds pds;
    st_status st;
    if ((st = dn_md_plain(&wplain, g.wnd, g.wd, err)) ||
        (st = dn_user_src_md(k, v->n, &usrc, err)) ||
        (st = plan_pds(k, &k->plan, v->n, first, &pds, err)))
        return st;
    dnnl_memory_desc_t src = *dn_pd_md(pds.fwd, DNNL_ARG_SRC);
    dnnl_memory_desc_t dst = *dn_pd_md(pds.fwd, DNNL_ARG_DST);
    if (first) {
        k->psrc = src;
        k->pw = *dn_pd_md(pds.fwd, DNNL_ARG_WEIGHTS);
        k->pwd = pds.bwd_data ? *dn_pd_md(pds.bwd_data, DNNL_ARG_WEIGHTS) : k->pw;
        k->pww = pds.bwd_weights ? *dn_pd_md(pds.bwd_weights, DNNL_ARG_DIFF_WEIGHTS) : wplain;
        st = weights_edge(k, &wplain, &k->pw, 0, &k->w_edge, &k->ws_w, &k->w_in, err);
        if (st == ST_OK && !dnnl_memory_desc_equal(&k->pwd, &k->pw))
            st = weights_edge(k, &wplain, &k->pwd, 0, &k->wd_edge, &k->ws_wd, &k->wd_in, err);
        if (st == ST_OK)
            st = weights_edge(k, &wplain, &k->pww, 1, &k->dw_edge, &k->ws_dw, &k->dw_out, err);
    }
    return dn_finish_build(k, v, st, &pds, &usrc, &src, &dst, first, err);
}

/* ---- plans as text ---- */

static void plan_format(const dn_conv_plan *plan, char *buf, size_t size)
{
    snprintf(buf, size, "%s %s %s %s", family_names[plan->family],
             plan->impl[0][0] ? plan->impl[0] : "-", plan->impl[1][0] ? plan->impl[1] : "-",
             plan->impl[2][0] ? plan->impl[2] : "-");
}

/* "FAMILY FWD BWD_DATA BWD_WEIGHTS" ("-": oneDNN's first); 0 if malformed. */
static int plan_parse(const char *text, dn_conv_plan *plan)
{
    char fam[16], impl[DN_PASSES][64];
    char extra;
    memset(plan, 0, sizeof *plan);
    if (sscanf(text, "%15s %63s %63s %63s %c", fam, impl[0], impl[1], impl[2], &extra) != 4)
        return 0;
    int f = 0;
    while (f < DN_FAMILIES && strcmp(fam, family_names[f]) != 0)
        f++;
    if (f == DN_FAMILIES)
        return 0;
    plan->family = (dn_family)f;
    for (int p = 0; p < DN_PASSES; p++)
        if (strcmp(impl[p], "-") != 0)
            memcpy(plan->impl[p], impl[p], sizeof plan->impl[p]);
    return 1;
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

/* ---- measuring ---- */

/* Trial buffers by role, grown on demand and filled with small values
 * (no denormals, no NaN: every implementation runs at its real speed). */
enum { TB_SRC, TB_DST, TB_W, TB_BIAS, TB_DSRC, TB_DDST, TB_DW, TB_DBIAS, TB_SCRATCH, TB_COUNT };

typedef struct trial_bufs {
    float *p[TB_COUNT];
    size_t bytes[TB_COUNT];
} trial_bufs;

static void *tb_get(trial_bufs *b, int role, size_t bytes)
{
    if (bytes <= b->bytes[role])
        return b->p[role];
    free(b->p[role]);
    size_t size = (bytes + 63) / 64 * 64;
    b->p[role] = aligned_alloc(64, size);
    b->bytes[role] = b->p[role] ? size : 0;
    for (size_t i = 0; b->p[role] && i < size / sizeof(float); i++)
        b->p[role][i] = 0.01f * (float)((int)(i % 13) - 6);
    return b->p[role];
}

static void tb_free(trial_bufs *b)
{
    for (int i = 0; i < TB_COUNT; i++)
        free(b->p[i]);
}

static int arg_role(int arg)
{
    switch (arg) {
    case DNNL_ARG_SRC: return TB_SRC;
    case DNNL_ARG_DST: return TB_DST;
    case DNNL_ARG_WEIGHTS: return TB_W;
    case DNNL_ARG_BIAS: return TB_BIAS;
    case DNNL_ARG_DIFF_SRC: return TB_DSRC;
    case DNNL_ARG_DIFF_DST: return TB_DDST;
    case DNNL_ARG_DIFF_WEIGHTS: return TB_DW;
    case DNNL_ARG_DIFF_BIAS: return TB_DBIAS;
    default: return TB_SCRATCH;
    }
}

/* Milliseconds of one run of pd on the trial buffers: the least of a few
 * runs (fewer the longer a run takes, two from 20 ms on: one run alone can
 * be slowed by a neighbour on a shared machine), or of one when the first
 * run already takes more than cutoff ms. */
static st_status time_pd(st_bctx *c, const_dnnl_primitive_desc_t pd, trial_bufs *tb,
                         double cutoff, double *ms, st_error *err)
{
    static const int ids[] = {DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_BIAS, DNNL_ARG_DST,
                              DNNL_ARG_DIFF_SRC, DNNL_ARG_DIFF_WEIGHTS, DNNL_ARG_DIFF_BIAS,
                              DNNL_ARG_DIFF_DST, DNNL_ARG_SCRATCHPAD}; /* FROM, TO: SRC, DST */
    dn_exec e = {0};
    void *scratch = NULL;
    st_status st = dn_exec_init(c, &e, pd, ids, N_OF(ids), err);
    for (int i = 0; i < e.nargs && st == ST_OK; i++) {
        int arg = e.args[i].arg;
        void *p = tb_get(tb, arg_role(arg), dnnl_memory_desc_get_size(dn_pd_md(pd, arg)));
        if (!p)
            st = st_fail(err, ST_ENOMEM, "out of memory measuring convolutions");
        else if (arg == DNNL_ARG_SCRATCHPAD)
            scratch = p;
        else
            st = dn_exec_bind(&e, arg, p, err);
    }
    double best = 0.0;
    for (int r = 0, runs = 1; r < runs && st == ST_OK; r++) {
        double t0 = st_now();
        st = dn_exec_run(c, &e, scratch, err);
        double t = 1e3 * (st_now() - t0);
        if (r == 0)
            runs = t > cutoff ? 1 : t > 20.0 ? 2 : t > 2.0 ? 3 : 5;
        if (r == 0 || t < best)
            best = t;
    }
    dn_exec_free(&e);
    *ms = best;
    return st;
}

static st_status time_reorder(st_bctx *c, const dnnl_memory_desc_t *from,
                              const dnnl_memory_desc_t *to, trial_bufs *tb, double *ms,
                              st_error *err)
{
    dnnl_primitive_attr_t attr;
    st_status st = dn_make_attr(&attr, 0, 0.0f, err);
    if (st != ST_OK)
        return st;
    dnnl_primitive_desc_t pd = NULL;
    dnnl_status_t s = dnnl_reorder_primitive_desc_create(&pd, from, c->engine, to, c->engine,
                                                         attr);
    dnnl_primitive_attr_destroy(attr);
    if (s != dnnl_success)
        return dn_fail(err, "reorder", s);
    st = time_pd(c, pd, tb, 1e30, ms, err);
    dnnl_primitive_desc_destroy(pd);
    return st;
}

#define MAX_GROUPS 8

/* Of each list oneDNN gives (a pass in one layout family), the first
 * LISTED_TIMED implementations but the reference ones are timed, in its
 * order of preference, and its GEMM-based one: further down come the same
 * kernels for older instruction sets, never faster where the first ones
 * run (jit:avx2 and jit:sse41 after jit:avx512_core: 1.9x and 4.5x
 * slower on AlexNet's conv1). */
#define LISTED_TIMED 2

/* A candidate whose first run takes PRUNE times the fastest of its pass
 * so far is run no more (its time stands: it can only be slower); a layout
 * whose passes timed so far already take longer than the best layout's
 * total is timed no further. */
#define PRUNE 1.3

/* The candidates sharing one pair of activation layouts. */
typedef struct conv_group {
    dnnl_memory_desc_t src, dst;
    dn_family family;              /* of its fastest forward */
    dnnl_primitive_desc_t fwd;     /* that forward: the backward passes' hint */
    char impl[DN_PASSES][64];
    double ms[DN_PASSES];          /* each pass's fastest */
    double edges;                  /* the reorders its layouts force, per iteration */
    double total;
    int usable;                    /* every pass that runs has an implementation */
    int pruned;                    /* its forward is too slow to time the rest */
} conv_group;

typedef struct trial {
    dn_kernel *k;
    trial_bufs tb;
    conv_group g[MAX_GROUPS];
    int n_groups;
    dn_family family; /* of the forward implementations being visited */
    int pass;         /* of the backward ones */
    conv_group *cur;
    double best[DN_PASSES]; /* the fastest of each pass so far, over the layouts; 0: none */
    int listed;             /* implementations of the list being visited timed so far */
    st_status st;
    st_error *err;
} trial;

/* Whether the implementation `name` of the list being visited is timed. */
static int worth_timing(trial *t, const char *name)
{
    if (t->st != ST_OK || impl_is_ref(name))
        return 0;
    if (!impl_is_gemm(name) && t->listed >= LISTED_TIMED)
        return 0;
    t->listed++;
    return 1;
}

static double cutoff(const trial *t, int pass)
{
    return t->best[pass] > 0.0 ? PRUNE * t->best[pass] : 1e30;
}

static int fwd_visit(void *ctx, dnnl_primitive_desc_t pd, const char *name)
{
    trial *t = ctx;
    if (!worth_timing(t, name))
        return VISIT_DROP;
    const dnnl_memory_desc_t *s = dn_pd_md(pd, DNNL_ARG_SRC), *d = dn_pd_md(pd, DNNL_ARG_DST);
    if (!dn_n_outermost(s) || !dn_n_outermost(d))
        return VISIT_DROP;
    conv_group *g = NULL;
    for (int i = 0; i < t->n_groups && !g; i++)
        if (dnnl_memory_desc_equal(&t->g[i].src, s) && dnnl_memory_desc_equal(&t->g[i].dst, d))
            g = &t->g[i];
    if (!g) {
        if (t->n_groups == MAX_GROUPS)
            return VISIT_DROP;
        g = &t->g[t->n_groups++];
        memset(g, 0, sizeof *g);
        g->src = *s;
        g->dst = *d;
    }
    double ms;
    t->st = time_pd(t->k->ctx, pd, &t->tb, cutoff(t, DN_PASS_FWD), &ms, t->err);
    if (t->st == ST_OK && (!t->best[DN_PASS_FWD] || ms < t->best[DN_PASS_FWD]))
        t->best[DN_PASS_FWD] = ms;
    if (t->st != ST_OK || (g->fwd && ms >= g->ms[DN_PASS_FWD]))
        return VISIT_DROP;
    if (g->fwd)
        dnnl_primitive_desc_destroy(g->fwd);
    g->fwd = pd;
    g->family = t->family;
    g->ms[DN_PASS_FWD] = ms;
    snprintf(g->impl[DN_PASS_FWD], sizeof g->impl[0], "%s", name);
    return VISIT_KEEP;
}

static int bwd_visit(void *ctx, dnnl_primitive_desc_t pd, const char *name)
{
    trial *t = ctx;
    conv_group *g = t->cur;
    int p = t->pass;
    if (!worth_timing(t, name))
        return VISIT_DROP;
    double ms;
    int have = g->impl[p][0] != '\0';
    t->st = time_pd(t->k->ctx, pd, &t->tb, cutoff(t, p), &ms, t->err);
    if (t->st == ST_OK && (!t->best[p] || ms < t->best[p]))
        t->best[p] = ms;
    if (t->st == ST_OK && (!have || ms < g->ms[p])) {
        g->ms[p] = ms;
        snprintf(g->impl[p], sizeof g->impl[p], "%s", name);
    }
    return VISIT_DROP;
}

/* The reorders group g's layouts force each iteration, in ms. */
static st_status group_edges(trial *t, conv_group *g, const dnnl_memory_desc_t *usrc,
                             const dnnl_memory_desc_t *wplain, const dnnl_memory_desc_t *wd,
                             const dnnl_memory_desc_t *ww, st_error *err)
{
    const st_kdesc *b = &t->k->d.base;
    st_bctx *c = t->k->ctx;
    double ms;
    st_status st = ST_OK;
    const dnnl_memory_desc_t *wf = dn_pd_md(g->fwd, DNNL_ARG_WEIGHTS);
    g->edges = 0.0;
    if (!dnnl_memory_desc_equal(usrc, &g->src)) {
        if ((st = time_reorder(c, usrc, &g->src, &t->tb, &ms, err)) != ST_OK)
            return st;
        g->edges += ms;
        if (b->src_grad && (st = time_reorder(c, &g->src, usrc, &t->tb, &ms, err)) == ST_OK)
            g->edges += ms;
    }
    dnnl_memory_desc_t plain;
    if (st == ST_OK && b->dst_plain && !dn_md_is_plain(&g->dst) &&
        (st = dn_md_plain(&plain, 4, g->dst.dims, err)) == ST_OK &&
        (st = time_reorder(c, &g->dst, &plain, &t->tb, &ms, err)) == ST_OK) {
        g->edges += ms;
        if (b->backward && (st = time_reorder(c, &plain, &g->dst, &t->tb, &ms, err)) == ST_OK)
            g->edges += ms;
    }
    if (st == ST_OK && !dnnl_memory_desc_equal(wf, wplain) &&
        (st = time_reorder(c, wplain, wf, &t->tb, &ms, err)) == ST_OK)
        g->edges += ms;
    if (st == ST_OK && wd && !dnnl_memory_desc_equal(wd, wf) &&
        !dnnl_memory_desc_equal(wd, wplain) &&
        (st = time_reorder(c, wplain, wd, &t->tb, &ms, err)) == ST_OK)
        g->edges += ms;
    if (st == ST_OK && ww && !dnnl_memory_desc_equal(ww, wplain) &&
        (st = time_reorder(c, ww, wplain, &t->tb, &ms, err)) == ST_OK)
        g->edges += ms;
    return st;
}

/* The backward passes of group g: the fastest implementation of each, and
 * the weights layouts they chose (into wd / ww); pruned once its passes
 * take more than bound ms. */
static st_status group_backward(trial *t, conv_group *g, const conv_geom *geo, double bound,
                                dnnl_memory_desc_t *wd, dnnl_memory_desc_t *ww,
                                st_error *err)
{
    const st_kdesc *b = &t->k->d.base;
    int runs[DN_PASSES] = {1, b->src_grad, b->backward};
    dnnl_memory_desc_t any;
    st_status st = dn_md_any(&any, geo->wnd, geo->wd, err);
    g->usable = 1;
    double sum = g->ms[DN_PASS_FWD];
    for (int p = DN_PASS_BWD_DATA; p < DN_PASSES && st == ST_OK && g->usable; p++) {
        if (!runs[p])
            continue;
        if (sum > bound) {
            g->pruned = 1;
            break;
        }
        dnnl_convolution_desc_t op;
        if ((st = conv_op(t->k, geo, p, &g->src, &any, &g->dst, &op, err)) != ST_OK)
            break;
        t->cur = g;
        t->pass = p;
        t->listed = 0;
        st = impls_visit(t->k->ctx, &op, g->fwd, 0, 0.0f, bwd_visit, t, err);
        if (st == ST_OK)
            st = t->st;
        if (st != ST_OK)
            break;
        if (!g->impl[p][0]) {
            g->usable = 0; /* only the reference implementation: never the fastest */
            break;
        }
        sum += g->ms[p];
        /* the chosen one again, for the layouts it picked */
        dnnl_primitive_desc_t pd;
        st = pd_pick(t->k->ctx, &op, g->fwd, 0, 0.0f, g->impl[p], 0, 0, &pd, err);
        if (st == ST_OK && pd) {
            if (p == DN_PASS_BWD_DATA)
                *wd = *dn_pd_md(pd, DNNL_ARG_WEIGHTS);
            else
                *ww = *dn_pd_md(pd, DNNL_ARG_DIFF_WEIGHTS);
            dnnl_primitive_desc_destroy(pd);
        }
    }
    return st;
}

/* The layout of a 4-D activation md for people: nchw, nhwc, nChw16c ... */
static void layout_name(const dnnl_memory_desc_t *md, char *buf, size_t size)
{
    const dnnl_blocking_desc_t *b = &md->format_desc.blocking;
    if (md->format_kind != dnnl_blocked || md->ndims != 4)
        snprintf(buf, size, "other");
    else if (b->inner_nblks == 1 && b->inner_idxs[0] == 1)
        snprintf(buf, size, "nChw%dc", (int)b->inner_blks[0]);
    else if (b->inner_nblks == 0)
        snprintf(buf, size, "%s", b->strides[1] == 1 ? "nhwc" : "nchw");
    else
        snprintf(buf, size, "blocked");
}

static void group_describe(const conv_group *g, const st_kdesc *b, char *buf, size_t size)
{
    int runs[DN_PASSES] = {1, b->src_grad, b->backward};
    char src[16], dst[16];
    layout_name(&g->src, src, sizeof src);
    layout_name(&g->dst, dst, sizeof dst);
    size_t at = (size_t)snprintf(buf, size, "%s %s>%s %.3f ms =", family_names[g->family],
                                 src, dst, g->total);
    for (int p = 0; p < DN_PASSES && at < size; p++)
        if (runs[p])
            at += (size_t)snprintf(buf + at, size - at, " %s %.3f %s +", pass_names[p],
                                   g->ms[p], g->impl[p]);
    if (at < size)
        snprintf(buf + at, size - at, " edges %.3f", g->edges);
}

/* Measure the candidates of kernel k; the fastest usable into plan and
 * what was tried into trials [size]. */
static st_status conv_measure(dn_kernel *k, dn_conv_plan *plan, char *trials, size_t size,
                              st_error *err)
{
    const st_conv_desc *d = &k->d.conv;
    conv_geom geo;
    conv_geom_init(k, d->base.n, &geo);
    trial *t = st_calloc(1, sizeof *t, "convolution trials", err);
    if (!t)
        return ST_ENOMEM;
    t->k = k;
    t->err = err;
    float alpha;
    dnnl_alg_kind_t post = dn_act_alg(d->act, &alpha, 0);
    dnnl_memory_desc_t usrc, wplain, any;
    st_status st;
    if ((st = dn_user_src_md(k, d->base.n, &usrc, err)) == ST_OK &&
        (st = dn_md_plain(&wplain, geo.wnd, geo.wd, err)) == ST_OK)
        st = dn_md_any(&any, geo.wnd, geo.wd, err);
    for (int f = 0; f < DN_FAMILIES && st == ST_OK; f++) {
        dnnl_memory_desc_t src, dst;
        dnnl_convolution_desc_t op;
        if ((st = md_tag(&src, geo.sd, family_tags[f], err)) == ST_OK &&
            (st = md_tag(&dst, geo.dd, family_tags[f], err)) == ST_OK)
            st = conv_op(k, &geo, DN_PASS_FWD, &src, &any, &dst, &op, err);
        t->family = (dn_family)f;
        t->listed = 0;
        if (st == ST_OK)
            st = impls_visit(k->ctx, &op, NULL, post, alpha, fwd_visit, t, err);
        if (st == ST_OK)
            st = t->st;
    }
    conv_group *best = NULL;
    for (int i = 1; i < t->n_groups; i++) /* the fastest forward first: see PRUNE */
        for (int j = i; j > 0 && t->g[j].ms[DN_PASS_FWD] < t->g[j - 1].ms[DN_PASS_FWD]; j--) {
            conv_group tmp = t->g[j];
            t->g[j] = t->g[j - 1];
            t->g[j - 1] = tmp;
        }
    for (int i = 0; i < t->n_groups && st == ST_OK; i++) {
        conv_group *g = &t->g[i];
        dnnl_memory_desc_t wd, ww;
        int have_wd = d->base.src_grad, have_ww = d->base.backward;
        st = group_backward(t, g, &geo, best ? best->total : 1e30, &wd, &ww, err);
        if (st == ST_OK && g->usable && !g->pruned)
            st = group_edges(t, g, &usrc, &wplain, have_wd ? &wd : NULL, have_ww ? &ww : NULL,
                             err);
        if (st != ST_OK || !g->usable || g->pruned)
            continue;
        g->total = g->edges;
        for (int p = 0; p < DN_PASSES; p++)
            g->total += g->ms[p];
        if (!best || g->total < best->total)
            best = g;
    }
    if (st == ST_OK && !best)
        st = st_fail(err, ST_EBACKEND, "oneDNN has no implementation but its reference one for "
                     "some pass of this convolution in any layout");
    if (st == ST_OK) {
        memset(plan, 0, sizeof *plan);
        plan->family = best->family;
        memcpy(plan->impl, best->impl, sizeof plan->impl);
        size_t at = 0;
        for (int i = 0; i < t->n_groups && at < size; i++) {
            const conv_group *g = &t->g[i];
            char line[512];
            if (g->usable && !g->pruned)
                group_describe(g, &d->base, line, sizeof line);
            else if (g->pruned)
                snprintf(line, sizeof line, "%s with fwd %.3f %s: slower than the best "
                         "before its last passes", family_names[g->family],
                         g->ms[DN_PASS_FWD], g->impl[DN_PASS_FWD]);
            else
                snprintf(line, sizeof line, "%s with fwd %s: only the reference implementation "
                         "for a backward pass", family_names[g->family], g->impl[DN_PASS_FWD]);
            at += (size_t)snprintf(trials + at, size - at, "%s%s%s", i ? "; " : "", line,
                                   g == best ? " <- chosen" : "");
        }
    }
    for (int i = 0; i < t->n_groups; i++)
        if (t->g[i].fwd)
            dnnl_primitive_desc_destroy(t->g[i].fwd);
    tb_free(&t->tb);
    free(t);
    return st;
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

static void choice_key(const dn_kernel *k, char *key, size_t size)
{
    const st_conv_desc *d = &k->d.conv;
    snprintf(key, size, "%s n%d %dx%dx%d>%dx%dx%d k%dx%d s%dx%d p%dx%d g%d %s",
             d->base.name ? d->base.name : "conv", d->base.n, d->ic, d->ih, d->iw, d->oc, d->oh,
             d->ow, d->kh, d->kw, d->sh, d->sw, d->ph, d->pw, d->groups,
             d->base.src_grad ? "fwd+bwd" : d->base.backward ? "fwd+bwd_weights" : "fwd");
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
                return st_fail(err, ST_EINPUT, "%s: the choice '%s' for %s: expected 'LAYOUT "
                               "FWD BWD_DATA BWD_WEIGHTS', LAYOUT one of blocked, nhwc, nchw, "
                               "then oneDNN implementation names or '-'", origin, value, key);
            }
            st_error why = {0};
            if (plan_check(k, &k->plan, &why) == ST_OK)
                return ST_OK;
            st_choices_reject(c->choices, key, value, why.msg);
            continue; /* then claimed, by this worker or another */
        }
        st_status st = conv_measure(k, &k->plan, trials, sizeof trials, err);
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

st_status dn_conv_build(dn_kernel *k, dn_variant *v, int first, st_error *err)
{
    st_status st = first ? conv_decide(k, err) : ST_OK;
    return st == ST_OK ? plan_build(k, v, first, err) : st;
}
