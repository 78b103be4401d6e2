/* Internals of the reference backend: plain C kernels, the test oracle.
 * Clarity first; the GEMM and im2col are cache-aware so tests stay fast. */
#ifndef ST_REF_H
#define ST_REF_H

#include "backends/backend.h"

/* Row-major C[M,N] = alpha * op(A) * op(B) + beta * C, op = transpose when
 * the flag is set; A is [M,K] (or [K,M] transposed), B is [K,N] (or [N,K]). */
void ref_gemm(int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A,
              int lda, const float *B, int ldb, float beta, float *C, int ldc);

/* Kernel constructors, one per kind. */
st_status ref_conv_create(const st_conv_desc *d, st_kernel **k, st_error *err);
st_status ref_fc_create(const st_fc_desc *d, st_kernel **k, st_error *err);
st_status ref_pool_create(const st_pool_desc *d, st_kernel **k, st_error *err);
st_status ref_bnorm_create(const st_bnorm_desc *d, st_kernel **k, st_error *err);
st_status ref_lrn_create(const st_lrn_desc *d, st_kernel **k, st_error *err);
st_status ref_act_create(const st_act_desc *d, st_kernel **k, st_error *err);
st_status ref_softmax_create(const st_softmax_desc *d, st_kernel **k, st_error *err);

/* A kernel with no backward pass of the given kind fails with this. */
st_status ref_no_backward(st_kernel *k, const st_kargs *a, st_error *err);

/* Allocate a kernel struct of size bytes (st_kernel first), zeroed, with its
 * ops, kind and plain dst size set from d; NULL (and err set) when out of
 * memory. */
void *ref_kernel_new(size_t size, const st_kernel_ops *ops, const st_kdesc *d, st_error *err);

/* destroy for kernels that own nothing but themselves. */
void ref_kernel_free(st_kernel *k);

#endif
