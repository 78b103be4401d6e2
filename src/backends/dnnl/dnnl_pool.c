/* oneDNN pooling (max, and average without the padding): its primitives,
 * whose workspace (the max's positions) lasts from forward to backward; its
 * passes are the data ones (dnnl_kernel.c). Max pooling on the layouts a
 * convolution hands on (nchw, nhwc, nChw4c / 8c / 16c) runs the backend's
 * own direct kernel instead: oneDNN 2.6's pooling moves 0.6 to 1.7 GB/s on
 * LeNet-5's nhwc maps of 20 channels (a third of its iteration), where a
 * pass over a tensor in cache takes tens of GB/s. The direct kernel keeps
 * the reference backend's order (the first of equal maxima, scanning the
 * window row by row), so its outputs and gradients are the oracle's, bit
 * for bit. */
#include <float.h>
#include <string.h>

#include "dnnl_internal.h"

#define LANES_MAX 64 /* lanes compared at once by the direct forward */

typedef float v4f __attribute__((vector_size(16)));
typedef int v4i __attribute__((vector_size(16)));

/* best[l], pos[l] = p[l], t where p[l] > best[l] (a NaN never replaces
 * nor is replaced), for l < nl: four lanes at a time, as a blend of the
 * comparison's mask, which GCC does not make of the scalar loop. */
static void max_step(const float *p, float *best, int *pos, int nl, int t)
{
    int l = 0;
    v4i tv = {t, t, t, t};
    for (; l + 4 <= nl; l += 4) {
        v4f v, b;
        v4i q;
        memcpy(&v, p + l, sizeof v);
        memcpy(&b, best + l, sizeof b);
        memcpy(&q, pos + l, sizeof q);
        v4i m = v > b;
        b = (v4f)(((v4i)v & m) | ((v4i)b & ~m));
        q = (tv & m) | (q & ~m);
        memcpy(best + l, &b, sizeof b);
        memcpy(pos + l, &q, sizeof q);
    }
    for (; l < nl; l++)
        if (p[l] > best[l]) {
            best[l] = p[l];
            pos[l] = t;
        }
}

/* Max pooling runs directly when the window's positions fit the byte the
 * workspace keeps for each output and src comes in a dense layout
 * (dn_dense_tag: nchw, nhwc, nChw4c / 8c / 16c). */
static int direct_applies(const st_pool_desc *d, const dnnl_memory_desc_t *usrc)
{
    return d->alg == ST_POOL_MAX && d->kh * d->kw <= 255 &&
           dn_dense_tag(usrc) != dnnl_format_tag_undef;
}

/* Forward: each output's maximum over its window's valid positions and, in
 * the workspace (one byte per output value), that position's index in the
 * window. Positions outside the input are skipped, as by the reference. */
static st_status direct_forward(st_kernel *base, const st_kargs *a, st_error *err)
{
    dn_kernel *k = (dn_kernel *)base;
    dn_variant *v = dn_variant_of(k, a->n, err);
    if (!v)
        return ST_EINTERNAL;
    const st_pool_desc *d = &k->d.pool;
    const dn_dense s = k->pool_src, o = k->pool_dst;
    float *dst = dn_fwd_dst(k, a);
    unsigned char *at = dn_at(a->workspace, k->ws_prim);
    long outer = (long)a->n * s.blocks;
#pragma omp parallel for schedule(static) if (outer > 1)
    for (long nb = 0; nb < outer; nb++) {
        long n = nb / s.blocks, blk = nb % s.blocks;
        const float *x = a->src + n * s.sn + blk * s.sb;
        float *y = dst + n * o.sn + blk * o.sb;
        unsigned char *ya = at + (y - dst);
        for (int oy = 0; oy < d->oh; oy++)
            for (int ox = 0; ox < d->ow; ox++)
                for (int l0 = 0; l0 < s.lanes; l0 += LANES_MAX) {
                    int nl = s.lanes - l0 < LANES_MAX ? s.lanes - l0 : LANES_MAX;
                    float best[LANES_MAX];
                    int pos[LANES_MAX];
                    int first = 1;
                    int ys = oy * d->sh - d->ph, xs = ox * d->sw - d->pw;
                    for (int ky = 0; ky < d->kh; ky++) {
                        int iy = ys + ky;
                        if (iy < 0 || iy >= d->ih)
                            continue;
                        for (int kx = 0; kx < d->kw; kx++) {
                            int ix = xs + kx;
                            if (ix < 0 || ix >= d->iw)
                                continue;
                            const float *p = x + iy * s.sh + ix * s.sw + l0;
                            int t = ky * d->kw + kx;
                            if (first) {
                                for (int l = 0; l < nl; l++) {
                                    best[l] = p[l];
                                    pos[l] = t;
                                }
                                first = 0;
                                continue;
                            }
                            max_step(p, best, pos, nl, t);
                        }
                    }
                    long off = oy * o.sh + ox * o.sw + l0;
                    for (int l = 0; l < nl; l++) {
                        y[off + l] = first ? 0.0f : best[l];
                        ya[off + l] = first ? 255 : (unsigned char)pos[l];
                    }
                }
    }
    return dn_fwd_finish(k, v, a, err);
}

/* Backward: diff_src zero (unless accumulating) but at each output's
 * maximum, which receives that output's gradient. */
static st_status direct_backward(st_kernel *base, const st_kargs *a, st_error *err)
{
    dn_kernel *k = (dn_kernel *)base;
    const st_pool_desc *d = &k->d.pool;
    const dn_dense s = k->pool_src, o = k->pool_dst;
    dn_variant *v;
    const void *ddst_p;
    st_status st = dn_bwd_begin(k, a, &v, &ddst_p, err); /* diff_dst in dst's layout */
    if (st != ST_OK)
        return st;
    const float *ddst = ddst_p;
    const unsigned char *at = dn_at(a->workspace, k->ws_prim);
    long outer = (long)a->n * s.blocks;
    long tap[255]; /* a window position's offset from the window's origin */
    for (int t = 0; t < d->kh * d->kw; t++)
        tap[t] = (t / d->kw) * s.sh + (t % d->kw) * s.sw;
    if (!a->accumulate)
        memset(a->diff_src, 0, (size_t)(a->n * s.sn) * sizeof(float));
#pragma omp parallel for schedule(static) if (outer > 1)
    for (long nb = 0; nb < outer; nb++) {
        long n = nb / s.blocks, blk = nb % s.blocks;
        float *dx = a->diff_src + n * s.sn + blk * s.sb;
        long ob = n * o.sn + blk * o.sb;
        for (int oy = 0; oy < d->oh; oy++)
            for (int ox = 0; ox < d->ow; ox++) {
                long off = ob + oy * o.sh + ox * o.sw;
                float *win = dx + (long)(oy * d->sh - d->ph) * s.sh + (ox * d->sw - d->pw) * s.sw;
                for (int l = 0; l < s.lanes; l++) {
                    int t = at[off + l];
                    if (t != 255)
                        win[tap[t] + l] += ddst[off + l];
                }
            }
    }
    return ST_OK;
}

static const st_kernel_ops direct_ops = {direct_forward, direct_backward, NULL,
                                         dn_kernel_destroy};

/* The direct kernel's build: dst in src's layout, a byte per output value
 * in the workspace, no primitive. */
static st_status direct_build(dn_kernel *k, dn_variant *v, const dnnl_memory_desc_t *usrc,
                              int first, st_error *err)
{
    dnnl_dims_t dd;
    dnnl_memory_desc_t dst;
    dn_dst_dims(&k->d, v->n, dd);
    DN(dnnl_memory_desc_init_by_tag(&dst, 4, dd, dnnl_f32, dn_dense_tag(usrc)),
       "pooling output layout");
    if (first) {
        k->base.ops = &direct_ops;
        k->pool_src = dn_dense_of(usrc);
        k->pool_dst = dn_dense_of(&dst);
        k->ws_prim_bytes = dnnl_memory_desc_get_size(&dst) / sizeof(float);
        k->ws_prim = dn_ws_take(k, k->ws_prim_bytes);
    }
    dn_pass_pds none = {NULL, NULL, NULL};
    return dn_finish_build(k, v, ST_OK, &none, usrc, usrc, &dst, first, err);
}

static st_status pool_build(dn_kernel *k, dn_variant *v, int first, st_error *err)
{
    const st_pool_desc *d = &k->d.pool;
    st_bctx *c = k->ctx;
    int n = v->n;
    dnnl_dims_t dd, strides = {d->sh, d->sw}, kernel = {d->kh, d->kw};
    dnnl_dims_t dilation = {0, 0}, pl = {d->ph, d->pw};
    dnnl_dims_t pr = {(dnnl_dim_t)(d->oh - 1) * d->sh + d->kh - d->ih - d->ph,
                        (dnnl_dim_t)(d->ow - 1) * d->sw + d->kw - d->iw - d->pw};
    dn_dst_dims(&k->d, n, dd);
    dnnl_memory_desc_t usrc, dst;
    st_status st = dn_user_src_md(k, n, &usrc, err);
    if (st != ST_OK)
        return st;
    if (first ? direct_applies(d, &usrc) : k->base.ops == &direct_ops)
        return direct_build(k, v, &usrc, first, err);
    if (first)
        st = dn_md_any(&dst, 4, dd, err);
    if (st != ST_OK)
        return st;
    if (!first)
        dst = dn_md_for_n(&k->pdst, n);
    dnnl_alg_kind_t alg = d->alg == ST_POOL_MAX ? dnnl_pooling_max
                                                : dnnl_pooling_avg_exclude_padding;
    dnnl_pooling_v2_desc_t fd, bd;
    DN(dnnl_pooling_v2_forward_desc_init(&fd, dnnl_forward_training, alg, &usrc, &dst, strides,
                                         kernel, dilation, pl, pr), "pooling forward descriptor");
    dnnl_primitive_desc_t fpd = NULL, bpd = NULL;
    st = dn_make_pd(c, &fpd, &fd, NULL, 0, 0, "pooling forward", err);
    if (st == ST_OK) {
        dst = *dn_pd_md(fpd, DNNL_ARG_DST);
        dnnl_status_t s = dnnl_pooling_v2_backward_desc_init(&bd, alg, &usrc, &dst, strides,
                                                             kernel, dilation, pl, pr);
        st = s == dnnl_success ? dn_make_pd(c, &bpd, &bd, fpd, 0, 0, "pooling backward", err)
                               : dn_fail(err, "pooling backward descriptor", s);
    }
    if (st == ST_OK)
        st = dn_take_prim_workspace(k, fpd, first, err);
    dn_pass_pds pds = {fpd, bpd, NULL};
    return dn_finish_build(k, v, st, &pds, &usrc, &usrc, &dst, first, err);
}

const dn_kind dn_kind_pool = {pool_build, {dn_data_forward, dn_data_backward, NULL,
                                           dn_kernel_destroy}};
