/* What the reference backend's files share besides its interface
 * (include/backends/ref.h): its GEMM and the entry points several of its
 * kernels use. Nothing outside src/backends/ref/ includes this. */
#ifndef ST_REF_INTERNAL_H
#define ST_REF_INTERNAL_H

#include "backends/ref.h"

/* A reference kernel: st_kernel and a copy of its descriptor, whichever
 * its kind (d.conv, d.fc, ...; d.base, the common part), and the
 * precision of its context (fp32 without one: the cpe backend's MPE
 * kernels), which only the convolution and inner product read. */
typedef struct ref_kernel {
    st_kernel base;
    st_kdesc_any d;
    st_precision precision;
    /* st_kdesc.dst_bf16: the kind's passes, and its own with the forward
     * rounding dst to bf16 after it (ref_forward_bf16), kept as floats */
    const st_kernel_ops *kind_ops;
    st_kernel_ops rounding_ops;
} ref_kernel;

/* A kernel kind: its passes, and what it derives from its descriptor (the
 * sizes of its workspace and scratch; NULL: nothing). ref_kind_<stem> for
 * each kind of kdesc.h's list, in ref_<stem>.c (activation and softmax:
 * ref_eltwise.c); ref_backend.c's table lists them by st_kind. */
typedef struct ref_kind {
    st_kernel_ops ops;
    void (*setup)(ref_kernel *k);
} ref_kind;

#define REF_KIND_DECL(kind, stem, name) extern const ref_kind ref_kind_##stem;
ST_KINDS(REF_KIND_DECL)
#undef REF_KIND_DECL

/* Row-major C[M,N] = alpha * op(A) * op(B) + beta * C, op = transpose when
 * the flag is set; A is [M,K] (or [K,M] transposed), B is [K,N] (or [N,K]).
 * Cache-aware so that the tests that use this backend as their oracle stay
 * fast (ref_gemm.c). */
void ref_gemm(int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A,
              int lda, const float *B, int ldb, float beta, float *C, int ldc);

/* dst [count]: the weights of a bf16 pass rounded to bf16, widened from
 * the copy a->weights_bf16 when it is given (the same values: it was made
 * by st_bf16_convert), else rounded from a->weights (ref_kernel.c, as the
 * other kernels' helpers). */
void ref_bf16_weights(float *dst, const st_kargs *a, size_t count);

/* The forward of a kernel whose dst is kept rounded to bf16
 * (st_kdesc.dst_bf16): its kind's, then dst rounded (to nearest even, as
 * ops/bf16.h), stored as floats. */
st_status ref_forward_bf16(st_kernel *k, const st_kargs *a, st_error *err);

/* A kernel with no backward pass of the given kind fails with this. */
st_status ref_no_backward(st_kernel *k, const st_kargs *a, st_error *err);

/* destroy for kernels that own nothing but themselves. */
void ref_kernel_free(st_kernel *k);

#endif
