/* Reference GEMM, row-major, single-threaded.
 *
 * Plain C loops arranged so the compiler vectorizes them: rows of C are
 * updated four at a time from one streamed row of B (NN, TN), or four rows
 * of A are dotted with one row of B (NT). On x86-64 with GCC the inner loops
 * are compiled for AVX-512, AVX2 and baseline and chosen at load time (not
 * under ThreadSanitizer: the load-time resolver would run, instrumented,
 * before the sanitizer's runtime is up). The summation order is fixed, so
 * results are reproducible on one machine. */
#include "ref_internal.h"

#include "base/clones.h"

enum { COLS_BLOCK = 512 };

static inline float a_at(int trans_a, const float *A, int lda, int i, int k)
{
    return trans_a ? A[(long)k * lda + i] : A[(long)i * lda + k];
}

/* C[M,N] += alpha * op(A) * B for B [K,N]. */
ST_ISA_CLONES static void gemm_rows(int trans_a, int M, int N, int K, float alpha,
                                    const float *A, int lda, const float *restrict B, int ldb,
                                    float *restrict C, int ldc)
{
    for (int j0 = 0; j0 < N; j0 += COLS_BLOCK) {
        int nb = N - j0 < COLS_BLOCK ? N - j0 : COLS_BLOCK;
        int i = 0;
        for (; i + 4 <= M; i += 4) {
            float *restrict c0 = C + (long)i * ldc + j0;
            float *restrict c1 = c0 + ldc;
            float *restrict c2 = c1 + ldc;
            float *restrict c3 = c2 + ldc;
            for (int k = 0; k < K; k++) {
                float a0 = alpha * a_at(trans_a, A, lda, i, k);
                float a1 = alpha * a_at(trans_a, A, lda, i + 1, k);
                float a2 = alpha * a_at(trans_a, A, lda, i + 2, k);
                float a3 = alpha * a_at(trans_a, A, lda, i + 3, k);
                const float *restrict b = B + (long)k * ldb + j0;
                for (int j = 0; j < nb; j++) {
                    c0[j] += a0 * b[j];
                    c1[j] += a1 * b[j];
                    c2[j] += a2 * b[j];
                    c3[j] += a3 * b[j];
                }
            }
        }
        for (; i < M; i++) {
            float *restrict c = C + (long)i * ldc + j0;
            for (int k = 0; k < K; k++) {
                float a = alpha * a_at(trans_a, A, lda, i, k);
                const float *restrict b = B + (long)k * ldb + j0;
                for (int j = 0; j < nb; j++)
                    c[j] += a * b[j];
            }
        }
    }
}

/* Dot products of up to four rows of A with one row b, 16 lanes each. */
ST_ISA_CLONES static void dot_rows(int rows, const float *A, int lda, const float *restrict b,
                                   int K, float *out)
{
    float acc[4][16] = {{0}};
    int k = 0;
    for (; k + 16 <= K; k += 16)
        for (int r = 0; r < rows; r++) {
            const float *restrict a = A + (long)r * lda + k;
            for (int u = 0; u < 16; u++)
                acc[r][u] += a[u] * b[k + u];
        }
    for (int r = 0; r < rows; r++) {
        float s = 0.0f;
        for (int u = 0; u < 16; u++)
            s += acc[r][u];
        const float *a = A + (long)r * lda;
        for (int t = k; t < K; t++)
            s += a[t] * b[t];
        out[r] = s;
    }
}

/* C[M,N] += alpha * A * B^T for A [M,K], B [N,K]. */
static void gemm_dots(int M, int N, int K, float alpha, const float *A, int lda,
                      const float *B, int ldb, float *C, int ldc)
{
    for (int i = 0; i < M; i += 4) {
        int rows = M - i < 4 ? M - i : 4;
        for (int j = 0; j < N; j++) {
            float d[4];
            dot_rows(rows, A + (long)i * lda, lda, B + (long)j * ldb, K, d);
            for (int r = 0; r < rows; r++)
                C[(long)(i + r) * ldc + j] += alpha * d[r];
        }
    }
}

void ref_gemm(int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A,
              int lda, const float *B, int ldb, float beta, float *C, int ldc)
{
    for (int i = 0; i < M; i++) {
        float *c = C + (long)i * ldc;
        if (beta == 0.0f)
            for (int j = 0; j < N; j++)
                c[j] = 0.0f;
        else if (beta != 1.0f)
            for (int j = 0; j < N; j++)
                c[j] *= beta;
    }
    if (!trans_b) {
        gemm_rows(trans_a, M, N, K, alpha, A, lda, B, ldb, C, ldc);
    } else if (!trans_a) {
        gemm_dots(M, N, K, alpha, A, lda, B, ldb, C, ldc);
    } else {
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++) {
                float s = 0.0f;
                for (int k = 0; k < K; k++)
                    s += A[(long)k * lda + i] * B[(long)j * ldb + k];
                C[(long)i * ldc + j] += alpha * s;
            }
    }
}
