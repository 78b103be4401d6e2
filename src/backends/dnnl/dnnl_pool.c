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
#include <stdint.h>
#include <string.h>

#include "base/clones.h"
#include "dnnl_internal.h"
#include "ops/bf16.h"

/* The forward's window maximum is built for AVX-512 and AVX2 as well as
 * the baseline (base/clones.h), as ref_gemm.c's kernels are. */

enum { VL = 16 }; /* lanes compared at once: one AVX-512 register of floats */

typedef float vf __attribute__((vector_size(VL * sizeof(float))));
typedef int vi __attribute__((vector_size(VL * sizeof(int))));
typedef unsigned char vb __attribute__((vector_size(VL)));

typedef uint16_t vh __attribute__((vector_size(VL * sizeof(uint16_t))));

/* The activations are f32, or bf16 (where the layers around keep them so,
 * st_kdesc.dst_bf16): a bf16 is the upper half of the float it stands for,
 * so it is compared as that float and stored back exactly. Value i of x
 * and VL values from i, as floats; and y's. */
ST_INLINE float value_at(const void *x, long i, int bf16)
{
    return bf16 ? st_bf16_to_float(((const uint16_t *)x)[i]) : ((const float *)x)[i];
}

ST_INLINE void value_put(void *y, long i, float v, int bf16)
{
    if (!bf16) {
        ((float *)y)[i] = v;
        return;
    }
    uint32_t u;
    memcpy(&u, &v, sizeof u);
    ((uint16_t *)y)[i] = (uint16_t)(u >> 16);
}

ST_INLINE void lanes_at(vf *v, const void *x, long i, int bf16)
{
    if (!bf16) {
        memcpy(v, (const float *)x + i, sizeof *v);
        return;
    }
    vh h;
    memcpy(&h, (const uint16_t *)x + i, sizeof h);
    vi w = __builtin_convertvector(h, vi) << 16;
    *v = (vf)w;
}

ST_INLINE void lanes_put(void *y, long i, const vf *v, int bf16)
{
    if (!bf16) {
        memcpy((float *)y + i, v, sizeof *v);
        return;
    }
    vh h = __builtin_convertvector((vi)*v >> 16, vh);
    memcpy((uint16_t *)y + i, &h, sizeof h);
}

/* One output's VL lanes, those from value x0 of x (at y0 in y): y the
 * maximum of x + off[i] over the nt valid window positions i, ya [VL] the
 * window index id[i] of the first position holding it (a later position
 * replaces it only when strictly greater, so a NaN never replaces nor is
 * replaced): the scalar rule lane by lane, as a blend of the comparison's
 * mask. */
ST_INLINE void window_max_lanes(const void *x, long x0, const long *off, const int *id,
                                    int nt, void *y, long y0, unsigned char *ya, int bf16)
{
    vf best, v;
    lanes_at(&best, x, x0 + off[0], bf16);
    vi pos = (vi){0} + id[0];
    for (int i = 1; i < nt; i++) {
        lanes_at(&v, x, x0 + off[i], bf16);
        vi m = v > best;
        best = (vf)(((vi)v & m) | ((vi)best & ~m));
        pos = (((vi){0} + id[i]) & m) | (pos & ~m);
    }
    vb at = __builtin_convertvector(pos, vb);
    lanes_put(y, y0, &best, bf16);
    memcpy(ya, &at, sizeof at);
}

/* The valid positions of output (oy, ox)'s window, in the window's row
 * order: their offsets in the input block off [nt] and their window
 * indices id [nt]; returns nt. */
static inline int window_taps(const st_pool_desc *d, dn_dense s, int oy, int ox, long *off,
                              int *id)
{
    int nt = 0, ys = oy * d->sh - d->ph, xs = ox * d->sw - d->pw;
    for (int ky = 0; ky < d->kh; ky++)
        for (int kx = 0; kx < d->kw; kx++) {
            int iy = ys + ky, ix = xs + kx;
            if (iy < 0 || iy >= d->ih || ix < 0 || ix >= d->iw)
                continue;
            off[nt] = iy * s.sh + ix * s.sw;
            id[nt++] = ky * d->kw + kx;
        }
    return nt;
}

/* The forward of one sample's block of lanes: x its input, y its output
 * (f32, or both bf16), ya the output's window positions (255: a window
 * wholly outside the input, whose output is 0). A window wholly inside the
 * input takes its positions from one table (inner, all: window_taps' for
 * it, made once); only the border's are worked out per output. */
ST_INLINE void forward_block(const st_pool_desc *d, dn_dense s, dn_dense o, const void *x,
                                 void *y, unsigned char *ya, int bf16)
{
    long off[255], inner[255];
    int id[255], all[255], n_all = d->kh * d->kw;
    for (int t = 0; t < n_all; t++) {
        inner[t] = (t / d->kw) * s.sh + (t % d->kw) * s.sw;
        all[t] = t;
    }
    for (int oy = 0; oy < d->oh; oy++)
        for (int ox = 0; ox < d->ow; ox++) {
            int ys = oy * d->sh - d->ph, xs = ox * d->sw - d->pw;
            int inside = ys >= 0 && xs >= 0 && ys + d->kh <= d->ih && xs + d->kw <= d->iw;
            int nt = inside ? n_all : window_taps(d, s, oy, ox, off, id);
            long base = inside ? ys * s.sh + xs * s.sw : 0;
            const long *offs = inside ? inner : off;
            const int *ids = inside ? all : id;
            long at = oy * o.sh + ox * o.sw;
            int l = 0;
            for (; nt > 0 && l + VL <= s.lanes; l += VL)
                window_max_lanes(x, base + l, offs, ids, nt, y, at + l, ya + at + l, bf16);
            for (; l < s.lanes; l++) {
                float best = nt > 0 ? value_at(x, base + offs[0] + l, bf16) : 0.0f;
                int pos = nt > 0 ? ids[0] : 255;
                for (int i = 1; i < nt; i++) {
                    float v = value_at(x, base + offs[i] + l, bf16);
                    if (v > best) {
                        best = v;
                        pos = ids[i];
                    }
                }
                value_put(y, at + l, best, bf16);
                ya[at + l] = (unsigned char)pos;
            }
        }
}

ST_ISA_CLONES static void forward_block_f32(const st_pool_desc *d, dn_dense s, dn_dense o,
                                          const void *x, void *y, unsigned char *ya)
{
    forward_block(d, s, o, x, y, ya, 0);
}

ST_ISA_CLONES static void forward_block_bf16(const st_pool_desc *d, dn_dense s, dn_dense o,
                                           const void *x, void *y, unsigned char *ya)
{
    forward_block(d, s, o, x, y, ya, 1);
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
    int bf16 = k->pdst.data_type == dnnl_bf16;
    size_t esize = bf16 ? sizeof(uint16_t) : sizeof(float);
    char *dst = dn_fwd_dst(k, a);
    const char *src = (const char *)a->src;
    unsigned char *at = dn_at(a->workspace, k->ws_prim);
    long outer = (long)a->n * s.blocks;
#pragma omp parallel for schedule(static) if (outer > 1)
    for (long nb = 0; nb < outer; nb++) {
        long n = nb / s.blocks, blk = nb % s.blocks, yo = n * o.sn + blk * o.sb;
        const void *x = src + (size_t)(n * s.sn + blk * s.sb) * esize;
        void *y = dst + (size_t)yo * esize;
        if (bf16)
            forward_block_bf16(d, s, o, x, y, at + yo);
        else
            forward_block_f32(d, s, o, x, y, at + yo);
    }
    return dn_fwd_finish(k, v, a, err);
}

/* The backward of one sample's block of lanes: each output's gradient dy
 * added to the input value dx at its window position ya, outputs in
 * order. A window wholly inside the input, VL lanes at a time: for each of
 * its positions, the lanes whose maximum it holds (a blend, so the others
 * keep their bits); elsewhere lane by lane. */
ST_ISA_CLONES static void backward_block(const st_pool_desc *d, dn_dense s, dn_dense o,
                                         const float *dy, const unsigned char *ya, float *dx,
                                         const long *tap)
{
    int nt = d->kh * d->kw;
    for (int oy = 0; oy < d->oh; oy++)
        for (int ox = 0; ox < d->ow; ox++) {
            int ys = oy * d->sh - d->ph, xs = ox * d->sw - d->pw;
            int inside = ys >= 0 && xs >= 0 && ys + d->kh <= d->ih && xs + d->kw <= d->iw;
            long off = oy * o.sh + ox * o.sw;
            float *win = dx + (long)ys * s.sh + (long)xs * s.sw;
            int l = 0;
            for (; inside && l + VL <= s.lanes; l += VL) {
                vb pos_b;
                vf g;
                memcpy(&pos_b, ya + off + l, sizeof pos_b);
                memcpy(&g, dy + off + l, sizeof g);
                vi pos = __builtin_convertvector(pos_b, vi);
                for (int t = 0; t < nt; t++) {
                    vi m = pos == t;
                    vf cur;
                    memcpy(&cur, win + tap[t] + l, sizeof cur);
                    vf sum = cur + g;
                    cur = (vf)(((vi)sum & m) | ((vi)cur & ~m));
                    memcpy(win + tap[t] + l, &cur, sizeof cur);
                }
            }
            for (; l < s.lanes; l++) {
                int t = ya[off + l];
                if (t != 255)
                    win[tap[t] + l] += dy[off + l];
            }
        }
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
        long n = nb / s.blocks, blk = nb % s.blocks, ob = n * o.sn + blk * o.sb;
        backward_block(d, s, o, ddst + ob, at + ob, a->diff_src + n * s.sn + blk * s.sb, tap);
    }
    return ST_OK;
}

static const st_kernel_ops direct_ops = {direct_forward, direct_backward, NULL,
                                         dn_kernel_destroy};

/* The direct kernel's build: dst in src's layout and type, a byte per
 * output value in the workspace, no primitive. */
static st_status direct_build(dn_kernel *k, dn_variant *v, const dnnl_memory_desc_t *usrc,
                              int first, st_error *err)
{
    dnnl_dims_t dd;
    dnnl_memory_desc_t dst;
    dn_dst_dims(&k->d, v->n, dd);
    DN(dnnl_memory_desc_init_by_tag(&dst, 4, dd, usrc->data_type, dn_dense_tag(usrc)),
       "pooling output layout");
    if (first) {
        dnnl_memory_desc_t values = dn_md_as(&dst, dnnl_f32);
        k->base.ops = &direct_ops;
        k->pool_src = dn_dense_of(usrc);
        k->pool_dst = dn_dense_of(&dst);
        k->ws_prim_bytes = dnnl_memory_desc_get_size(&values) / sizeof(float);
        k->ws_prim = dn_ws_take(k, k->ws_prim_bytes);
    }
    dn_pass_pds none = {NULL, NULL, NULL, NULL};
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
    dnnl_memory_desc_t usrc, dst, src;
    st_status st = dn_user_src_md(k, n, &usrc, err);
    if (st != ST_OK)
        return st;
    if (first ? direct_applies(d, &usrc) : k->base.ops == &direct_ops)
        return direct_build(k, v, &usrc, first, err);
    src = dn_md_as(&usrc, dnnl_f32); /* bf16 activations converted (its values exact) */
    if (first)
        st = dn_md_any(&dst, 4, dd, err);
    if (st != ST_OK)
        return st;
    if (!first)
        dst = dn_md_for_n(&k->pdst, n);
    dnnl_alg_kind_t alg = d->alg == ST_POOL_MAX ? dnnl_pooling_max
                                                : dnnl_pooling_avg_exclude_padding;
    dnnl_pooling_v2_desc_t fd, bd;
    DN(dnnl_pooling_v2_forward_desc_init(&fd, dnnl_forward_training, alg, &src, &dst, strides,
                                         kernel, dilation, pl, pr), "pooling forward descriptor");
    dnnl_primitive_desc_t fpd = NULL, bpd = NULL;
    st = dn_make_pd(c, &fpd, &fd, NULL, 0, 0, "pooling forward", err);
    if (st == ST_OK) {
        dst = *dn_pd_md(fpd, DNNL_ARG_DST);
        dnnl_status_t s = dnnl_pooling_v2_backward_desc_init(&bd, alg, &src, &dst, strides,
                                                             kernel, dilation, pl, pr);
        st = s == dnnl_success ? dn_make_pd(c, &bpd, &bd, fpd, 0, 0, "pooling backward", err)
                               : dn_fail(err, "pooling backward descriptor", s);
    }
    if (st == ST_OK)
        st = dn_take_prim_workspace(k, fpd, first, err);
    dn_pass_pds pds = {fpd, bpd, NULL, NULL};
    return dn_finish_build(k, v, st, &pds, &usrc, &src, &dst, first, err);
}

const dn_kind dn_kind_pool = {pool_build, {dn_data_forward, dn_data_backward, NULL,
                                           dn_kernel_destroy}};
