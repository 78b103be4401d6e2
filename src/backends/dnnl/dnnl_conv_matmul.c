/* A convolution's weight gradient in bf16 as im2col + oneDNN's matmul, a
 * candidate of the measured plan for the backward-weights pass besides
 * oneDNN's convolution implementations ("im2col+matmul/C" in the plan:
 * dnnl_conv.c), below dnnl_conv_measure.c and dnnl_conv.c.
 *
 * Why: on AMX, oneDNN 2.6's bf16 backward-weights convolution
 * (jit:avx512_core_amx_bf16) is the slowest of the three passes by far
 * (cifar-alexnet's 5x5 and 3x3 layers: 260-280 GFLOP/s a core, against
 * 600-1,100 for forward and backward-data), while its bf16 matmul (brgemm
 * on the tiles) multiplies the same operands at 460-530 GFLOP/s: with the
 * input unfolded by im2col, those layers' weight gradients took about two
 * thirds of oneDNN's time (25.5 -> 17.4, 12.8 -> 8.6, 17.6 -> 11.8 ms, one
 * core of a 2-core Xeon). Where it is slower (3 input channels, whose
 * im2col is all copying; AlexNet 227's larger images on two threads), the
 * measurement keeps oneDNN's.
 *
 * The arithmetic is the pass's in bf16: each product of two bf16 operands
 * (diff_dst and src, both already bf16 in the primitive's nhwc layouts) is
 * exact in fp32 and summed in fp32, as the reference backend's oracle, in
 * another order. For C images at a time (a divisor of the batch, so that
 * the same samples give the same sums):
 *
 *   col [C*oh*ow, kh*kw*ic] = the input patches, kh, kw, ic fastest last
 *   dW [oc, kh*kw*ic] += diff_dst^T [oc, C*oh*ow] x col
 *
 * diff_dst^T is diff_dst (nhwc: [pixels, oc]) read with strides, and dW,
 * in f32 ohwi order, goes to the plain weight gradient by the kernel's
 * weight-gradient edge (dn_pass_pds.dw_md). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/memory.h"
#include "dnnl_conv.h"

#define MM_PREFIX "im2col+matmul/"

/* Rows (output pixels) per matmul: enough for the tiles' K dimension to
 * amortize a call, few enough for the unfolded input to stay in a core's
 * cache (cifar-alexnet on AMX: 450 rows 17.4 ms, 900 19.3, 14,400 22.4 for
 * its 5x5 layer; 392 to 1,568 rows alike for its 3x3 ones). */
enum { MM_ROWS = 512 };

int dn_conv_mm_images_named(const char *impl)
{
    size_t len = strlen(MM_PREFIX);
    if (strncmp(impl, MM_PREFIX, len) != 0)
        return 0;
    char *end;
    long c = strtol(impl + len, &end, 10);
    return *end == '\0' && c > 0 && c <= 1 << 20 ? (int)c : 0;
}

void dn_conv_mm_name(int images, char *buf, size_t size)
{
    snprintf(buf, size, MM_PREFIX "%d", images);
}

int dn_conv_mm_usable(const dn_kernel *k, const dnnl_memory_desc_t *src,
                      const dnnl_memory_desc_t *dst)
{
    return k->operand_dt == dnnl_bf16 && k->d.conv.groups == 1 && k->d.base.backward &&
           src->data_type == dnnl_bf16 && dn_dense_tag(src) == dnnl_nhwc &&
           dn_dense_tag(dst) == dnnl_nhwc;
}

/* The images of a matmul for n samples: the largest divisor of n up to
 * `images` (the plan's). */
static int mm_images(int n, int images)
{
    int c = images < n ? images : n;
    while (c > 1 && n % c != 0)
        c--;
    return c > 0 ? c : 1;
}

int dn_conv_mm_default(const dn_kernel *k, int n)
{
    int pixels = k->d.conv.oh * k->d.conv.ow, c = MM_ROWS / (pixels > 0 ? pixels : 1);
    return mm_images(n, c > 0 ? c : 1);
}

static long mm_cols(const st_conv_desc *d)
{
    return (long)d->kh * d->kw * d->ic;
}

st_status dn_conv_mm_dw_md(const dn_kernel *k, dnnl_memory_desc_t *md, st_error *err)
{
    const st_conv_desc *d = &k->d.conv;
    dnnl_dims_t dims = {d->oc, d->ic, d->kh, d->kw};
    DN(dnnl_memory_desc_init_by_tag(md, 4, dims, dnnl_f32, dnnl_acdb),
       "weight gradient (ohwi) descriptor");
    return ST_OK;
}

/* The matmul of `rows` pixels, dW += diff_dst^T x col (a sum post-op). */
static st_status mm_pd(const dn_kernel *k, int rows, dnnl_primitive_desc_t *pd, st_error *err)
{
    const st_conv_desc *d = &k->d.conv;
    dnnl_dims_t ad = {d->oc, rows}, as = {1, d->oc}, bd = {rows, mm_cols(d)},
                cd = {d->oc, mm_cols(d)};
    dnnl_memory_desc_t a, b, c;
    DN(dnnl_memory_desc_init_by_strides(&a, 2, ad, dnnl_bf16, as), "matmul descriptor");
    DN(dnnl_memory_desc_init_by_tag(&b, 2, bd, dnnl_bf16, dnnl_ab), "matmul descriptor");
    DN(dnnl_memory_desc_init_by_tag(&c, 2, cd, dnnl_f32, dnnl_ab), "matmul descriptor");
    dnnl_matmul_desc_t op;
    DN(dnnl_matmul_desc_init(&op, &a, &b, NULL, &c), "matmul descriptor");
    dnnl_primitive_attr_t attr;
    dnnl_post_ops_t po = NULL;
    st_status st = dn_make_attr(&attr, 0, 0.0f, err);
    if (st != ST_OK)
        return st;
    dnnl_status_t s = dnnl_post_ops_create(&po);
    if (s == dnnl_success)
        s = dnnl_post_ops_append_sum(po, 1.0f);
    if (s == dnnl_success)
        s = dnnl_primitive_attr_set_post_ops(attr, po);
    if (s == dnnl_success)
        s = dnnl_primitive_desc_create(pd, &op, attr, k->ctx->engine, NULL);
    if (po)
        dnnl_post_ops_destroy(po);
    dnnl_primitive_attr_destroy(attr);
    return s == dnnl_success ? ST_OK : dn_fail(err, "matmul", s);
}

/* col [images*oh*ow, kh*kw*ic] of samples n0 .. n0+images-1 of src
 * [n, ih, iw, ic] (bf16, nhwc), zeros where a patch leaves the input. */
static void im2col(const st_conv_desc *d, const uint16_t *src, int n0, int images,
                   uint16_t *col)
{
    long cols = mm_cols(d), rows = (long)images * d->oh * d->ow;
    size_t run = (size_t)d->ic * sizeof *src;
#pragma omp parallel for schedule(static) if (rows * cols > 1L << 16)
    for (long r = 0; r < rows; r++) {
        int n = n0 + (int)(r / ((long)d->oh * d->ow)), pix = (int)(r % ((long)d->oh * d->ow));
        int oh = pix / d->ow, ow = pix % d->ow;
        uint16_t *to = col + r * cols;
        for (int kh = 0; kh < d->kh; kh++) {
            int ih = oh * d->sh - d->ph + kh;
            for (int kw = 0; kw < d->kw; kw++, to += d->ic) {
                int iw = ow * d->sw - d->pw + kw;
                if (ih < 0 || ih >= d->ih || iw < 0 || iw >= d->iw)
                    memset(to, 0, run);
                else
                    memcpy(to, src + (((size_t)n * d->ih + ih) * d->iw + iw) * d->ic, run);
            }
        }
    }
}

/* dW [oc, kh*kw*ic] (f32) of n samples by e, `images` at a time. */
static st_status mm_pass(const dn_kernel *k, dn_exec *e, int n, int images, const void *src,
                         const void *ddst, void *col, float *dw, void *scratch, st_error *err)
{
    const st_conv_desc *d = &k->d.conv;
    size_t pixels = (size_t)d->oh * d->ow;
    memset(dw, 0, (size_t)d->oc * mm_cols(d) * sizeof *dw);
    st_status st = ST_OK;
    for (int n0 = 0; n0 < n && st == ST_OK; n0 += images) {
        im2col(d, src, n0, images, col);
        const dn_arg args[] = {{DNNL_ARG_SRC, (const uint16_t *)ddst + n0 * pixels * d->oc},
                               {DNNL_ARG_WEIGHTS, col}, {DNNL_ARG_DST, dw}};
        st = dn_exec_call(k->ctx, e, args, N_OF(args), scratch, err);
    }
    return st;
}

/* dn_kernel.dw_other: the pass of variant v, the unfolded input in the
 * scratch's temporaries (after the primitives' scratchpad, as diff_src's
 * before its reorder: the pass needs it only while it runs). */
static st_status mm_run(dn_kernel *k, dn_variant *v, int n, const void *src, const void *ddst,
                        void *dw, void *workspace, void *scratch, st_error *err)
{
    (void)workspace;
    void *col = (char *)scratch + (k->scratchpad + 63) / 64 * 64;
    return mm_pass(k, &v->bww_mm, n, mm_images(n, k->mm_images), src, ddst, col, dw, scratch,
                   err);
}

static size_t col_bytes(const st_conv_desc *d, int images)
{
    return (size_t)images * d->oh * d->ow * (size_t)mm_cols(d) * sizeof(uint16_t);
}

st_status dn_conv_mm_build(dn_kernel *k, dn_variant *v, int images, int first, st_error *err)
{
    const st_conv_desc *d = &k->d.conv;
    if (first) {
        k->mm_images = images;
        if (col_bytes(d, images) > k->tmp_bytes)
            k->tmp_bytes = col_bytes(d, images);
        k->dw_other = mm_run;
    }
    static const int ids[] = {DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_DST, DNNL_ARG_SCRATCHPAD};
    dnnl_primitive_desc_t pd = NULL;
    st_status st = mm_pd(k, mm_images(v->n, images) * d->oh * d->ow, &pd, err);
    if (st == ST_OK)
        st = dn_finish_exec(k, &v->bww_mm, pd, ids, N_OF(ids), err);
    if (pd)
        dnnl_primitive_desc_destroy(pd);
    return st;
}

st_status dn_conv_mm_time(const dn_kernel *k, int n, int images, double cutoff, double *ms,
                          st_error *err)
{
    const st_conv_desc *d = &k->d.conv;
    dnnl_primitive_desc_t pd = NULL;
    dn_exec e = {0};
    static const int ids[] = {DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_DST, DNNL_ARG_SCRATCHPAD};
    st_status st = mm_pd(k, images * d->oh * d->ow, &pd, err);
    size_t sp = st == ST_OK ? dn_scratchpad_bytes(pd) : 0;
    if (st == ST_OK)
        st = dn_exec_init(k->ctx, &e, pd, ids, N_OF(ids), err);
    void *src = NULL, *ddst = NULL, *col = NULL, *dw = NULL, *scratch = NULL;
    const char *what = "im2col + matmul trial";
    if (st == ST_OK &&
        (!(src = dn_trial_buffer((size_t)n * d->ih * d->iw * d->ic * 2, what, err)) ||
         !(ddst = dn_trial_buffer((size_t)n * d->oh * d->ow * d->oc * 2, what, err)) ||
         !(col = dn_trial_buffer(col_bytes(d, images), what, err)) ||
         !(dw = dn_trial_buffer((size_t)d->oc * mm_cols(d) * 4, what, err)) ||
         (sp && !(scratch = dn_trial_buffer(sp, what, err)))))
        st = ST_ENOMEM;
    double best = 0.0;
    for (int r = 0, runs = 1; r < runs && st == ST_OK; r++) {
        double t0 = st_now();
        st = mm_pass(k, &e, n, images, src, ddst, col, dw, scratch, err);
        double t = 1e3 * (st_now() - t0);
        if (r == 0)
            runs = dn_trial_runs(t, cutoff);
        if (r == 0 || t < best)
            best = t;
    }
    *ms = best;
    void *all[] = {src, ddst, col, dw, scratch};
    for (int i = 0; i < N_OF(all); i++)
        st_free_aligned(all[i]);
    dn_exec_free(&e);
    if (pd)
        dnnl_primitive_desc_destroy(pd);
    return st;
}
