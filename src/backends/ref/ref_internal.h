/* What the reference backend's files share besides its interface
 * (include/backends/ref.h): its GEMM and the entry points several of its
 * kernels use. Nothing outside src/backends/ref/ includes this. */
#ifndef ST_REF_INTERNAL_H
#define ST_REF_INTERNAL_H

#include "backends/ref.h"

/* Row-major C[M,N] = alpha * op(A) * op(B) + beta * C, op = transpose when
 * the flag is set; A is [M,K] (or [K,M] transposed), B is [K,N] (or [N,K]).
 * Cache-aware so that the tests that use this backend as their oracle stay
 * fast (ref_gemm.c). */
void ref_gemm(int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A,
              int lda, const float *B, int ldb, float beta, float *C, int ldc);

/* A kernel with no backward pass of the given kind fails with this. */
st_status ref_no_backward(st_kernel *k, const st_kargs *a, st_error *err);

/* destroy for kernels that own nothing but themselves. */
void ref_kernel_free(st_kernel *k);

#endif
