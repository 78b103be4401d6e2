/* What the oneDNN convolution's four files share: dnnl_conv_desc.c (the
 * geometry and descriptors, oneDNN's implementations of a pass), below
 * dnnl_conv_matmul.c (the weight gradient as im2col + matmul), below
 * dnnl_conv_measure.c (the measured choice of a plan), below dnnl_conv.c
 * (plans and their primitives, the decision): they call one way. Private
 * to src/backends/dnnl/. */
#ifndef ST_DNNL_CONV_H
#define ST_DNNL_CONV_H

#include "dnnl_internal.h"

/* The layout families' names and format tags, and the passes' names. */
extern const char *const dn_family_names[DN_FAMILIES];
extern const dnnl_format_tag_t dn_family_tags[DN_FAMILIES];
extern const char *const dn_pass_names[DN_PASSES];

/* A convolution's dims for oneDNN with n samples. */
typedef struct dn_conv_geom {
    int wnd;                  /* weights dims: 4, or 5 with groups */
    dnnl_dims_t sd, dd, wd, bd;
    dnnl_dims_t strides, pl, pr;
} dn_conv_geom;

void dn_conv_geom_init(const dn_kernel *k, int n, dn_conv_geom *g);

/* The operation descriptor of pass p on the given layouts (wei: the
 * weights, or for bwd_weights the weight gradient's). */
st_status dn_conv_op(const dn_kernel *k, const dn_conv_geom *g, int p,
                     const dnnl_memory_desc_t *src, const dnnl_memory_desc_t *wei,
                     const dnnl_memory_desc_t *dst, dnnl_convolution_desc_t *op, st_error *err);

/* A 4-D activation md of dims in layout tag. */
st_status dn_md_tag(dnnl_memory_desc_t *md, const dnnl_dims_t dims, dnnl_format_tag_t tag,
                    st_error *err);

/* Whether an implementation's name is a reference one; oneDNN's im2col +
 * sgemm ("gemm:jit" and its ISA variants, not the brgemm ones). */
int dn_impl_is_ref(const char *name);
int dn_impl_is_gemm(const char *name);
/* The name oneDNN gives pd's implementation ("?" when it gives none). */
const char *dn_pd_impl_name(const_dnnl_primitive_desc_t pd);

/* A visitor of op's implementations says what happens to pd next. */
enum { DN_VISIT_DROP, DN_VISIT_KEEP, DN_VISIT_KEEP_STOP };
typedef int (*dn_impl_visit)(void *ctx, dnnl_primitive_desc_t pd, const char *name);

/* Visit every implementation oneDNN lists for op, in its order of
 * preference, destroying those the visitor does not keep. A descriptor no
 * implementation takes visits nothing. */
st_status dn_impls_visit(st_bctx *c, const dnnl_convolution_desc_t *op,
                         const_dnnl_primitive_desc_t hint, int post, float alpha,
                         dn_impl_visit visit, void *ctx, st_error *err);

/* The implementation of op named impl ("": the first; gemm_only: the first
 * GEMM-based one); *pd NULL when there is none, or, with fallback,
 * oneDNN's first. */
st_status dn_pd_pick(st_bctx *c, const dnnl_convolution_desc_t *op,
                     const_dnnl_primitive_desc_t hint, int post, float alpha, const char *impl,
                     int gemm_only, int fallback, dnnl_primitive_desc_t *pd, st_error *err);

/* ---- the weight gradient as im2col + matmul (dnnl_conv_matmul.c) ---- */

/* The plan's backward-weights implementation "im2col+matmul/C": C (the
 * samples a matmul takes), or 0 for any other name; its name for C. */
int dn_conv_mm_images_named(const char *impl);
void dn_conv_mm_name(int images, char *buf, size_t size);
/* Whether kernel k may take it with activations src and dst as the
 * forward chose them (bf16 operands, dense nhwc, no groups). */
int dn_conv_mm_usable(const dn_kernel *k, const dnnl_memory_desc_t *src,
                      const dnnl_memory_desc_t *dst);
/* The samples a matmul takes for a batch of n: about 512 output pixels, a
 * divisor of n. */
int dn_conv_mm_default(const dn_kernel *k, int n);
/* The layout the matmul writes the weight gradient in (f32 ohwi): the
 * kernel's pww, reordered to plain by its edge. */
st_status dn_conv_mm_dw_md(const dn_kernel *k, dnnl_memory_desc_t *md, st_error *err);
/* Variant v's matmul (first: also room for the unfolded input in the
 * scratch's temporaries, and dw_other), images samples a matmul at most;
 * after the variant's other primitives (dn_finish_build sets the
 * temporaries it needs first). */
st_status dn_conv_mm_build(dn_kernel *k, dn_variant *v, int images, int first, st_error *err);
/* Milliseconds of the pass on n samples of trial values, images a matmul
 * (dn_trial_runs). */
st_status dn_conv_mm_time(const dn_kernel *k, int n, int images, double cutoff, double *ms,
                          st_error *err);

/* Measure the candidate plans of kernel k (dnnl_conv_measure.c); the
 * fastest usable into plan and what was tried into trials [size]. */
st_status dn_conv_measure(dn_kernel *k, dn_conv_plan *plan, char *trials, size_t size,
                          st_error *err);

#endif
