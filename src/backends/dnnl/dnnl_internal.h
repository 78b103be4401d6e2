/* What the oneDNN backend's files share: dnnl.c (the backend: contexts,
 * kernel creation), dnnl_prim.c (memory descriptors, primitives, reorders),
 * dnnl_kernel.c (the kernel record, its edges, the shared passes) and one
 * file per kernel kind, each defining its dn_kind: dnnl_conv.c (with
 * dnnl_conv_measure.c, the measured choice of a plan, and dnnl_conv.h
 * between those two), dnnl_fc.c, dnnl_pool.c, dnnl_bnorm.c, dnnl_lrn.c and
 * dnnl_eltwise.c (activation, softmax). Nothing outside src/backends/dnnl/
 * includes this. */
#ifndef ST_DNNL_INTERNAL_H
#define ST_DNNL_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include <oneapi/dnnl/dnnl.h>

#include "backends/backend.h"
#include "backends/choices.h"

#define MAX_VARIANTS 8 /* distinct batch sizes per kernel */
#define MAX_ARGS 12
#define NONE SIZE_MAX  /* absent workspace view */

struct st_bctx {
    dnnl_engine_t engine;
    dnnl_stream_t stream;
    int worker;
    int limited;           /* the address space is limited: see BUILD_HEADROOM */
    const char *conv_impl; /* st_backend_opts.conv_impl */
    st_choices *choices;   /* st_backend_opts.choices */
    st_precision precision; /* st_backend_opts.precision: bf16 only where
                               dnnl_precision_supported said yes */
    int weights_bf16;       /* st_backend_opts.weights_bf16 */
};

#define DN(call, what)                                                                    \
    do {                                                                                  \
        dnnl_status_t dn_s_ = (call);                                                     \
        if (dn_s_ != dnnl_success)                                                        \
            return dn_fail(err, what, dn_s_);                                             \
    } while (0)

#define N_OF(a) ((int)(sizeof a / sizeof a[0]))

typedef struct dn_exec {
    dnnl_primitive_t prim;
    int nargs;
    dnnl_exec_arg_t args[MAX_ARGS];
    void *bound[MAX_ARGS];
} dn_exec;

/* How a convolution runs: the layout family of its activations (the
 * format tag its forward is created with) and, per pass, the name of the
 * oneDNN implementation (impl_info_str; empty: oneDNN's first for those
 * layouts; gemm_only: the first GEMM-based one). */
enum { DN_PASS_FWD, DN_PASS_BWD_DATA, DN_PASS_BWD_WEIGHTS, DN_PASSES };
typedef enum dn_family { DN_FAMILY_BLOCKED, DN_FAMILY_NHWC, DN_FAMILY_NCHW, DN_FAMILIES } dn_family;

typedef struct dn_conv_plan {
    dn_family family;
    int gemm_only;
    char impl[DN_PASSES][64];
} dn_conv_plan;

/* A 4-D activation as [n][blocks][h][w][lanes], a pixel's lanes
 * contiguous: nchw (1 lane, a block per channel), nhwc (a lane per
 * channel, one block), nChw<L>c (L lanes, the channels' blocks); strides
 * in floats. */
typedef struct dn_dense {
    int lanes, blocks;
    dnnl_dim_t sn, sb, sh, sw;
} dn_dense;

/* The primitives of one batch size. */
typedef struct dn_variant {
    int n;
    dn_exec fwd;       /* forward (training) */
    dn_exec fwd_inf;   /* batch norm with the running statistics */
    dn_exec post;      /* eltwise after batch norm (act), or 1/T before softmax */
    dn_exec bwd_data;
    dn_exec bwd_weights;
    dn_exec src_in;    /* edges: user src -> primitive src */
    dn_exec dst_out;   /*        primitive dst -> plain dst */
    dn_exec ddst_in;   /*        plain diff_dst -> primitive diff_dst */
    dn_exec dsrc_out;  /*        primitive diff_src -> user diff_src */
    dn_exec dsrc_add;  /*        the same, adding to it */
    dn_exec dbias;     /* bf16, diff_dst not dense: the bias gradient (dbias_dense) */
    dn_exec bww_mm;    /* convolution, im2col + matmul: the weight gradient's matmul */
} dn_variant;

#define EXECS_PER_VARIANT (sizeof(dn_variant) / sizeof(dn_exec))

typedef st_kdesc_any dn_desc;

typedef struct dn_kernel {
    st_kernel base;
    st_bctx *ctx;
    dn_desc d;
    /* What the primitives of a convolution or inner product read src,
     * weights and diff_dst in: f32, or bf16 in --precision bf16 (rounded
     * to nearest even by the reorders into them; dst, diff_src,
     * diff_weights and diff_bias stay f32, accumulated in f32 by oneDNN).
     * Every other kind: f32. */
    dnnl_data_type_t operand_dt;
    /* bf16 operands in a context given the weights in bf16
     * (st_kargs.weights_bf16): the weights' reorders into the primitives'
     * layouts start from that copy (dn_weights_user_md), and where a
     * primitive reads plain bf16 weights it reads the copy itself. */
    int w_given;
    int n_var;
    dn_variant *v;  /* [the batch sizes declared]: n_var of them built */
    /* Layouts the primitives chose at the largest batch size; the other
     * batch sizes are built with the same ones. Weights: pw for forward,
     * pwd for backward data, pww for the weight gradient. */
    dnnl_memory_desc_t psrc, pdst, pw, pwd, pww;
    /* The edges (dn_build_edges): src reordered for the primitive; diff_src
     * reordered back (with bf16 operands, src and diff_src differ in type
     * and maybe not in layout); dst reordered to plain; diff_dst reordered
     * for the primitive (to its layout, or to bf16). */
    int src_edge, dsrc_edge, dst_edge, ddst_edge;
    int w_edge, wd_edge, dw_edge; /* the weights layouts differ from plain */
    dn_exec w_in, wd_in, dw_out;  /* their reorders from / to plain */
    /* workspace views, byte offsets (NONE when absent) */
    size_t ws_src, ws_dst, ws_ddst, ws_prim, ws_w, ws_wd, ws_dw;
    /* The diff_dst (and the workspace) whose conversion into ws_ddst the
     * weight-gradient pass left for the backward-data pass that follows it
     * (NULL: none), so that a weighted kind converts it once for both
     * (dnnl_kernel.c's weighted_ddst). */
    const void *ddst_of, *ddst_ws;
    /* The weights (and the workspace) the last forward reordered into
     * ws_w, for the backward-data pass of the same samples (NULL: none). */
    const void *w_of, *w_ws;
    size_t ws_prim_bytes;
    size_t scratchpad;     /* largest primitive scratchpad */
    size_t tmp_bytes;      /* temporaries after it in the scratch: diff_src (or a
                              convolution's unfolded input, dw_other), */
    size_t dst_t_off;      /* then the inner product's dst^T at this offset */
    /* bf16 with a bias: its gradient summed from the f32 diff_dst
     * (dnnl_kernel.c's bias_grad_build), in plain C over diff_dst's dense
     * layout ddst_dense (dbias_dense), else by v->dbias */
    int dbias_dense;
    dn_dense ddst_dense;
    dn_conv_plan plan;     /* convolution: the implementation of every pass */
    /* The weight gradient computed without a primitive (NULL: by
     * v->bwd_weights), into dw in pww's layout, from src and diff_dst in
     * the primitives' layouts: the convolution's im2col + matmul
     * (dnnl_conv_matmul.c), mm_images samples a matmul. */
    st_status (*dw_other)(struct dn_kernel *k, dn_variant *v, int n, const void *src,
                          const void *ddst, void *dw, void *workspace, void *scratch,
                          st_error *err);
    int mm_images;
    dn_dense pool_src, pool_dst; /* direct max pooling (dnnl_pool.c): its layouts */
} dn_kernel;

/* The primitive descriptors of a layer's passes; NULL where a pass is not
 * a primitive. dw_md: the layout of a weight gradient that no primitive
 * computes (dn_kernel.dw_other), NULL where bwd_weights gives it or none
 * is computed. */
typedef struct dn_pass_pds {
    dnnl_primitive_desc_t fwd, bwd_data, bwd_weights;
    const dnnl_memory_desc_t *dw_md;
} dn_pass_pds;

st_status dn_fail(st_error *err, const char *what, dnnl_status_t s);

/* ---- memory descriptors (dnnl_prim.c) ---- */
st_status dn_md_plain(dnnl_memory_desc_t *md, int ndims, const dnnl_dims_t dims, st_error *err);
st_status dn_md_any(dnnl_memory_desc_t *md, int ndims, const dnnl_dims_t dims, st_error *err);
int dn_md_is_plain(const dnnl_memory_desc_t *md);
/* md's layout for values of type dt (strides count values, so a layout
 * holds for any type); dn_md_same_layout: a and b equal but for the type. */
dnnl_memory_desc_t dn_md_as(const dnnl_memory_desc_t *md, dnnl_data_type_t dt);
int dn_md_same_layout(const dnnl_memory_desc_t *a, const dnnl_memory_desc_t *b);
/* The dense 4-D layout md has (nchw, nhwc, nChw4c / 8c / 16c), or
 * dnnl_format_tag_undef; dn_dense_of: md, of one of them, as dn_dense. */
dnnl_format_tag_t dn_dense_tag(const dnnl_memory_desc_t *md);
dn_dense dn_dense_of(const dnnl_memory_desc_t *md);
/* The same layout for n samples (layouts with the sample index outermost,
 * dn_n_outermost, differ only in that dimension). */
dnnl_memory_desc_t dn_md_for_n(const dnnl_memory_desc_t *md, int n);
int dn_n_outermost(const dnnl_memory_desc_t *md);

/* ---- primitives with their argument memories (dnnl_prim.c) ---- */
void dn_exec_free(dn_exec *e);
/* The primitive of pd and one memory per listed argument whose descriptor
 * is not empty; pd stays the caller's. */
st_status dn_exec_init(st_bctx *c, dn_exec *e, const_dnnl_primitive_desc_t pd,
                       const int *arg_ids, int n_ids, st_error *err);
/* Point argument arg at ptr (an argument the primitive does not take is
 * ignored). */
st_status dn_exec_bind(dn_exec *e, int arg, const void *ptr, st_error *err);
st_status dn_exec_run(st_bctx *c, dn_exec *e, void *scratch, st_error *err);
/* Bind each of the n arguments args, then run e. */
typedef struct dn_arg {
    int arg;
    const void *ptr;
} dn_arg;
st_status dn_exec_call(st_bctx *c, dn_exec *e, const dn_arg *args, int n, void *scratch,
                       st_error *err);
size_t dn_scratchpad_bytes(const_dnnl_primitive_desc_t pd);
const dnnl_memory_desc_t *dn_pd_md(const_dnnl_primitive_desc_t pd, int arg);
/* Attributes: user scratchpad, and an eltwise post-op unless post_alg is 0. */
st_status dn_make_attr(dnnl_primitive_attr_t *attr, int post_alg, float alpha, st_error *err);
/* oneDNN's first implementation of op_desc. */
st_status dn_make_pd(st_bctx *c, dnnl_primitive_desc_t *pd, const void *op_desc,
                     const_dnnl_primitive_desc_t hint, int post_alg, float alpha,
                     const char *what, st_error *err);
/* A reorder from one layout to another (accumulate: adding to the target);
 * its scratchpad raises *scratch. */
st_status dn_make_reorder(st_bctx *c, dn_exec *e, const dnnl_memory_desc_t *from,
                          const dnnl_memory_desc_t *to, int accumulate, size_t *scratch,
                          st_error *err);
st_status dn_run_reorder(st_bctx *c, dn_exec *e, const void *from, void *to, void *scratch,
                         st_error *err);

/* ---- kernel kinds ---- */

/* A kernel kind: the build of its primitives for one batch size (first:
 * the largest, built first, which decides the layouts and reserves the
 * workspace) and its passes. Each kind's file defines its own; dnnl.c's
 * table lists them by st_kind. */
typedef struct dn_kind {
    st_status (*build)(dn_kernel *k, dn_variant *v, int first, st_error *err);
    st_kernel_ops ops;
} dn_kind;

/* dn_kind_<stem> for each kind of kdesc.h's list: dnnl_<stem>.c defines it
 * (activation and softmax: dnnl_eltwise.c). */
#define DN_KIND_DECL(kind, stem, name) extern const dn_kind dn_kind_##stem;
ST_KINDS(DN_KIND_DECL)
#undef DN_KIND_DECL

/* ---- kernels (dnnl_kernel.c) ---- */
void dn_kernel_destroy(st_kernel *base);
dn_variant *dn_variant_of(dn_kernel *k, int n, st_error *err);
/* How many times a measurement's trial is run, given its first run's ms:
 * once when that exceeds cutoff ms, else the more the shorter it is (two
 * from 20 ms on: one run alone can be slowed by a neighbour on a shared
 * machine); the least is its time. */
int dn_trial_runs(double first_ms, double cutoff);
/* A trial buffer of bytes (rounded up to 64) of small values exact in bf16
 * (2^-7 in every 16-bit half: no denormals, no NaN, as bf16 or as f32),
 * so that every path runs at its speed; NULL when out of memory. */
void *dn_trial_buffer(size_t bytes, const char *what, st_error *err);
/* base + off, NULL for NONE */
void *dn_at(void *base, size_t off);
/* Reserve bytes of the kernel's workspace; returns their offset. */
size_t dn_ws_take(dn_kernel *k, size_t bytes);
void dn_need_scratchpad(dn_kernel *k, const_dnnl_primitive_desc_t pd);
/* Logical dims of the kernel's src and dst for n samples; return ndims. */
int dn_src_dims(const dn_desc *d, int n, dnnl_dims_t dims);
int dn_dst_dims(const dn_desc *d, int n, dnnl_dims_t dims);
/* The layout src arrives in, for n samples. */
st_status dn_user_src_md(const dn_kernel *k, int n, dnnl_memory_desc_t *md, st_error *err);
dnnl_alg_kind_t dn_act_alg(st_act a, float *alpha, int for_backward);

/* The edges of variant v: usrc is the layout src arrives in, psrc the one
 * the primitive reads (same dims); pdst the one it writes. Edge buffers are
 * reserved when the largest batch size (first) is built. */
st_status dn_build_edges(dn_kernel *k, dn_variant *v, const dnnl_memory_desc_t *usrc,
                         const dnnl_memory_desc_t *psrc, const dnnl_memory_desc_t *pdst,
                         int first, st_error *err);
/* The edges around a pass. Forward: src for the primitive (the user's
 * a->src, or its reordered copy); where the primitive writes dst; then
 * dst reordered to plain when it must be. */
st_status dn_fwd_src(dn_kernel *k, dn_variant *v, const st_kargs *a, const void **src,
                     st_error *err);
void *dn_fwd_dst(const dn_kernel *k, const st_kargs *a);
st_status dn_fwd_finish(dn_kernel *k, dn_variant *v, const st_kargs *a, st_error *err);
/* Backward: the src forward gave the primitive; diff_dst in the
 * primitive's layout (dn_bwd_begin: with the variant for a->n samples);
 * where the primitive writes diff_src; then diff_src reordered or added
 * into the user's. */
const void *dn_bwd_src(const dn_kernel *k, const st_kargs *a);
st_status dn_bwd_ddst(dn_kernel *k, dn_variant *v, const st_kargs *a, const void **ddst,
                      st_error *err);
st_status dn_bwd_begin(dn_kernel *k, const st_kargs *a, dn_variant **v, const void **ddst,
                       st_error *err);
void *dn_bwd_dsrc(const dn_kernel *k, const st_kargs *a);
st_status dn_bwd_finish(dn_kernel *k, dn_variant *v, const st_kargs *a, st_error *err);

/* Create an exec from pd with the arguments ids [n_ids], noting its
 * scratchpad. */
st_status dn_finish_exec(dn_kernel *k, dn_exec *e, dnnl_primitive_desc_t pd, const int *ids,
                         int n_ids, st_error *err);
/* The common end of a layer's build, given the status so far: the passes'
 * execs, the edges between the user and the primitives' layouts (usrc,
 * psrc, pdst), and the descriptors destroyed, also on failure. */
st_status dn_finish_build(dn_kernel *k, dn_variant *v, st_status st, dn_pass_pds *pds,
                          const dnnl_memory_desc_t *usrc, const dnnl_memory_desc_t *psrc,
                          const dnnl_memory_desc_t *pdst, int first, st_error *err);
/* The weights layouts the passes chose (pds: fwd, and bwd_data,
 * bwd_weights where they run) into pw, pwd, pww, each with its workspace
 * buffer and reorder from or to wplain where it differs from it. */
st_status dn_weights_edges(dn_kernel *k, const dn_pass_pds *pds,
                           const dnnl_memory_desc_t *wplain, st_error *err);
/* The weights as the passes are given them: wplain (plain f32), or its
 * bf16 copy's layout when k->w_given. */
dnnl_memory_desc_t dn_weights_user_md(const dn_kernel *k, const dnnl_memory_desc_t *wplain);
/* The primitive's own workspace (pooling, LRN): sized at the largest batch. */
st_status dn_take_prim_workspace(dn_kernel *k, const_dnnl_primitive_desc_t pd, int first,
                                 st_error *err);
/* v->post: the eltwise alg (alpha) after the primitive, in place on md (an
 * activation, softmax's temperature); what names it in errors. dn_post_run
 * runs it from src to dst [n, ...] in md's layout (nothing without one). */
st_status dn_post_build(dn_kernel *k, dn_variant *v, dnnl_alg_kind_t alg, float alpha,
                        const dnnl_memory_desc_t *md, const char *what, st_error *err);
st_status dn_post_run(dn_kernel *k, dn_variant *v, const void *src, void *dst, void *scratch,
                      st_error *err);

/* The passes of the weighted kinds (convolution, inner product: weights
 * plain in the arena, reordered where the primitive wants another layout)
 * and of the data kinds (pooling, LRN, activation: one input, one output,
 * the primitive's workspace). */
st_status dn_weighted_forward(st_kernel *base, const st_kargs *a, st_error *err);
st_status dn_weighted_backward_data(st_kernel *base, const st_kargs *a, st_error *err);
st_status dn_weighted_backward_weights(st_kernel *base, const st_kargs *a, st_error *err);
st_status dn_data_forward(st_kernel *base, const st_kargs *a, st_error *err);
st_status dn_data_backward(st_kernel *base, const st_kargs *a, st_error *err);

/* ---- kernel choices (dnnl_conv.c, dnnl_fc.c) ---- */
/* The names st_backend_opts.conv_impl may take besides "auto". */
extern const char *const dn_conv_impls[];
/* Whether value is a convolution's plan as text; an inner product's
 * weight-gradient choice (bf16 operands); st_backend.choice_syntax (in
 * dnnl.c) takes either. */
int dn_conv_choice_syntax(const char *value, char *why, size_t size);
int dn_fc_choice_syntax(const char *value);

#endif
