/* The measured choice of a convolution's plan (dnnl_conv.c says what a
 * plan is and when it is measured): for each layout family, oneDNN's
 * forward implementations are timed on buffers of the kernel's sizes and
 * grouped by the activation layouts they resolve to; for each group, the
 * fastest forward's backward passes are timed in turn, then the reorders
 * its layouts force at the kernel's edges; the group of least total time
 * gives the plan. Candidates and groups that cannot beat the best so far
 * are cut short (PRUNE). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/memory.h"
#include "dnnl_conv.h"
#include "ops/bf16.h"

/* Trial buffers by role, grown on demand and filled with small values
 * (no denormals, no NaN: every implementation runs at its real speed),
 * each exact in bf16, so that a buffer read as bf16 pairs holds them and
 * zeros (the lower halves), no NaN and no denormal either. */
enum { TB_SRC, TB_DST, TB_W, TB_BIAS, TB_DSRC, TB_DDST, TB_DW, TB_DBIAS, TB_SCRATCH, TB_COUNT };

typedef struct trial_bufs {
    float *p[TB_COUNT];
    size_t bytes[TB_COUNT];
} trial_bufs;

static void *tb_get(trial_bufs *b, int role, size_t bytes)
{
    if (bytes <= b->bytes[role])
        return b->p[role];
    st_free_aligned(b->p[role]);
    size_t size = (bytes + 63) / 64 * 64;
    b->p[role] = st_alloc_aligned(size, "convolution trial buffers", NULL);
    b->bytes[role] = b->p[role] ? size : 0;
    for (size_t i = 0; b->p[role] && i < size / sizeof(float); i++)
        b->p[role][i] = 0.01f * (float)((int)(i % 13) - 6);
    if (b->p[role])
        st_bf16_round(b->p[role], b->p[role], size / sizeof(float));
    return b->p[role];
}

static void tb_free(trial_bufs *b)
{
    for (int i = 0; i < TB_COUNT; i++)
        st_free_aligned(b->p[i]);
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

/* Milliseconds of one run of pd on the trial buffers: the least of
 * dn_trial_runs runs. */
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
            runs = dn_trial_runs(t, cutoff);
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
    double mm_ms;                  /* the weight gradient as im2col + matmul, */
    int mm_images;                 /* mm_images a matmul (0: not timed) */
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
    if (t->st != ST_OK || dn_impl_is_ref(name))
        return 0;
    if (!dn_impl_is_gemm(name) && t->listed >= LISTED_TIMED)
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
        return DN_VISIT_DROP;
    const dnnl_memory_desc_t *s = dn_pd_md(pd, DNNL_ARG_SRC), *d = dn_pd_md(pd, DNNL_ARG_DST);
    if (!dn_n_outermost(s) || !dn_n_outermost(d))
        return DN_VISIT_DROP;
    conv_group *g = NULL;
    for (int i = 0; i < t->n_groups && !g; i++)
        if (dnnl_memory_desc_equal(&t->g[i].src, s) && dnnl_memory_desc_equal(&t->g[i].dst, d))
            g = &t->g[i];
    if (!g) {
        if (t->n_groups == MAX_GROUPS)
            return DN_VISIT_DROP;
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
        return DN_VISIT_DROP;
    if (g->fwd)
        dnnl_primitive_desc_destroy(g->fwd);
    g->fwd = pd;
    g->family = t->family;
    g->ms[DN_PASS_FWD] = ms;
    snprintf(g->impl[DN_PASS_FWD], sizeof g->impl[0], "%s", name);
    return DN_VISIT_KEEP;
}

static int bwd_visit(void *ctx, dnnl_primitive_desc_t pd, const char *name)
{
    trial *t = ctx;
    conv_group *g = t->cur;
    int p = t->pass;
    if (!worth_timing(t, name))
        return DN_VISIT_DROP;
    double ms;
    int have = g->impl[p][0] != '\0';
    t->st = time_pd(t->k->ctx, pd, &t->tb, cutoff(t, p), &ms, t->err);
    if (t->st == ST_OK && (!t->best[p] || ms < t->best[p]))
        t->best[p] = ms;
    if (t->st == ST_OK && (!have || ms < g->ms[p])) {
        g->ms[p] = ms;
        snprintf(g->impl[p], sizeof g->impl[p], "%s", name);
    }
    return DN_VISIT_DROP;
}

/* The reorders group g's layouts force each iteration, in ms: src into
 * the primitive's layout and type, diff_src back, dst to plain, diff_dst
 * into the primitive's layout and type, the weights (as the kernel is
 * given them) into theirs and the weight gradient back. */
static st_status group_edges(trial *t, conv_group *g, const dnnl_memory_desc_t *usrc,
                             const dnnl_memory_desc_t *wplain, const dnnl_memory_desc_t *wd,
                             const dnnl_memory_desc_t *ww, st_error *err)
{
    const st_kdesc *b = &t->k->d.base;
    st_bctx *c = t->k->ctx;
    double ms;
    st_status st = ST_OK;
    const dnnl_memory_desc_t *wf = dn_pd_md(g->fwd, DNNL_ARG_WEIGHTS);
    /* the gradients f32 in the user's layouts (dnnl_kernel.c's edges) */
    dnnl_memory_desc_t dsrc = dn_md_as(&g->src, dnnl_f32), udsrc = dn_md_as(usrc, dnnl_f32),
                       ddst = dn_md_as(&g->dst, t->k->operand_dt),
                       uddst = dn_md_as(&g->dst, dnnl_f32), plain;
    g->edges = 0.0;
    if (!dnnl_memory_desc_equal(usrc, &g->src) &&
        (st = time_reorder(c, usrc, &g->src, &t->tb, &ms, err)) == ST_OK)
        g->edges += ms;
    if (st == ST_OK && b->src_grad && !dnnl_memory_desc_equal(&udsrc, &dsrc) &&
        (st = time_reorder(c, &dsrc, &udsrc, &t->tb, &ms, err)) == ST_OK)
        g->edges += ms;
    if (st == ST_OK)
        st = dn_md_plain(&plain, 4, g->dst.dims, err);
    int dst_edge = b->dst_plain && !(dn_md_is_plain(&g->dst) && g->dst.data_type == dnnl_f32);
    if (st == ST_OK && dst_edge && (st = time_reorder(c, &g->dst, &plain, &t->tb, &ms, err)) ==
                                       ST_OK)
        g->edges += ms;
    if (st == ST_OK && b->backward && (dst_edge || !dnnl_memory_desc_equal(&ddst, &uddst)) &&
        (st = time_reorder(c, dst_edge ? &plain : &uddst, &ddst, &t->tb, &ms, err)) == ST_OK)
        g->edges += ms;
    dnnl_memory_desc_t win = dn_weights_user_md(t->k, wplain); /* the weights as given */
    if (st == ST_OK && !dnnl_memory_desc_equal(wf, &win) &&
        (st = time_reorder(c, &win, wf, &t->tb, &ms, err)) == ST_OK)
        g->edges += ms;
    if (st == ST_OK && wd && !dnnl_memory_desc_equal(wd, wf) &&
        !dnnl_memory_desc_equal(wd, &win) &&
        (st = time_reorder(c, &win, wd, &t->tb, &ms, err)) == ST_OK)
        g->edges += ms;
    if (st == ST_OK && ww && !dnnl_memory_desc_equal(ww, wplain) &&
        (st = time_reorder(c, ww, wplain, &t->tb, &ms, err)) == ST_OK)
        g->edges += ms;
    return st;
}

/* Group g's weight gradient as im2col + matmul (dnnl_conv_matmul.c),
 * against the fastest of oneDNN's: when it is faster, its name and time
 * become the group's, *mm 1, and ww the layout it writes. */
static st_status mm_trial(trial *t, conv_group *g, int *mm, dnnl_memory_desc_t *ww,
                          st_error *err)
{
    int p = DN_PASS_BWD_WEIGHTS, n = t->k->d.base.n, images = dn_conv_mm_default(t->k, n);
    double ms;
    st_status st = dn_conv_mm_time(t->k, n, images, cutoff(t, p), &ms, err);
    if (st != ST_OK)
        return st;
    if (!t->best[p] || ms < t->best[p])
        t->best[p] = ms;
    g->mm_ms = ms;
    g->mm_images = images;
    *mm = !g->impl[p][0] || ms < g->ms[p];
    if (!*mm)
        return ST_OK;
    g->ms[p] = ms;
    dn_conv_mm_name(images, g->impl[p], sizeof g->impl[p]);
    return dn_conv_mm_dw_md(t->k, ww, err);
}

/* The backward passes of group g: the fastest implementation of each, and
 * the weights layouts they chose (into wd / ww); pruned once its passes
 * take more than bound ms. */
static st_status group_backward(trial *t, conv_group *g, const dn_conv_geom *geo, double bound,
                                dnnl_memory_desc_t *wd, dnnl_memory_desc_t *ww, st_error *err)
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
        if ((st = dn_conv_op(t->k, geo, p, &g->src, &any, &g->dst, &op, err)) != ST_OK)
            break;
        t->cur = g;
        t->pass = p;
        t->listed = 0;
        st = dn_impls_visit(t->k->ctx, &op, g->fwd, 0, 0.0f, bwd_visit, t, err);
        if (st == ST_OK)
            st = t->st;
        if (st != ST_OK)
            break;
        if (p == DN_PASS_BWD_WEIGHTS && dn_conv_mm_usable(t->k, &g->src, &g->dst)) {
            int mm = 0;
            if ((st = mm_trial(t, g, &mm, ww, err)) != ST_OK)
                break;
            if (mm) {
                sum += g->ms[p];
                continue;
            }
        }
        if (!g->impl[p][0]) {
            g->usable = 0; /* only the reference implementation: never the fastest */
            break;
        }
        sum += g->ms[p];
        /* the chosen one again, for the layouts it picked */
        dnnl_primitive_desc_t pd;
        st = dn_pd_pick(t->k->ctx, &op, g->fwd, 0, 0.0f, g->impl[p], 0, 0, &pd, err);
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
    size_t at = (size_t)snprintf(buf, size, "%s %s>%s %.3f ms =", dn_family_names[g->family], src,
                                 dst, g->total);
    for (int p = 0; p < DN_PASSES && at < size; p++)
        if (runs[p])
            at += (size_t)snprintf(buf + at, size - at, " %s %.3f %s +", dn_pass_names[p], g->ms[p],
                                   g->impl[p]);
    if (at < size)
        at += (size_t)snprintf(buf + at, size - at, " edges %.3f", g->edges);
    char mm[64];
    dn_conv_mm_name(g->mm_images, mm, sizeof mm);
    if (g->mm_images && strcmp(mm, g->impl[DN_PASS_BWD_WEIGHTS]) != 0 && at < size)
        snprintf(buf + at, size - at, " (bwd_weights %s %.3f)", mm, g->mm_ms);
}

st_status dn_conv_measure(dn_kernel *k, dn_conv_plan *plan, char *trials, size_t size,
                          st_error *err)
{
    const st_conv_desc *d = &k->d.conv;
    dn_conv_geom geo;
    dn_conv_geom_init(k, d->base.n, &geo);
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
        if ((st = dn_md_tag(&src, geo.sd, dn_family_tags[f], err)) == ST_OK &&
            (st = dn_md_tag(&dst, geo.dd, dn_family_tags[f], err)) == ST_OK)
            st = dn_conv_op(k, &geo, DN_PASS_FWD, &src, &any, &dst, &op, err);
        t->family = (dn_family)f;
        t->listed = 0;
        if (st == ST_OK)
            st = dn_impls_visit(k->ctx, &op, NULL, post, alpha, fwd_visit, t, err);
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
                         "before its last passes", dn_family_names[g->family],
                         g->ms[DN_PASS_FWD], g->impl[DN_PASS_FWD]);
            else
                snprintf(line, sizeof line, "%s with fwd %s: only the reference implementation "
                         "for a backward pass", dn_family_names[g->family],
                         g->impl[DN_PASS_FWD]);
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

