/* bfloat16: the precisions a run computes in (--precision) and the one
 * conversion between float and bf16 that every backend and test uses.
 *
 * bf16 is float's upper half: 1 sign bit, float's 8 exponent bits, 7
 * stored mantissa bits (8 significant bits), so its unit roundoff is 2^-8
 * and its range is float's. In --precision bf16 the convolutions and inner
 * products read their operands rounded to bf16 and accumulate the products
 * in fp32, as oneDNN's bf16 primitives and the AVX512_BF16 instruction
 * vdpbf16ps do (two bf16 products summed into an fp32 lane); a product of
 * two bf16 values is exact in fp32 (8 x 8 significant bits < 24), so only
 * the rounding of the operands and the fp32 sum differ from fp32. Every
 * other operation stays fp32; an output whose readers all round it anyway
 * is kept in bf16 between layers (net/replica.c's plan_bf16_outputs;
 * docs/guide/training.md, "bfloat16: --precision bf16"). */
#ifndef ST_BF16_H
#define ST_BF16_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* What a backend's convolutions and inner products compute in. */
typedef enum st_precision {
    ST_PRECISION_FP32, /* everything fp32 (the default) */
    ST_PRECISION_BF16, /* operands rounded to bf16, products accumulated in fp32 */
    ST_PRECISION_COUNT
} st_precision;

/* Option names ("fp32", "bf16"), indexed by st_precision, NULL-terminated. */
extern const char *const st_precision_names[];

/* x rounded to the nearest bf16, ties to even: the bits of its upper half.
 * NaN stays a quiet NaN (its sign and upper payload kept, the quiet bit
 * set), infinities stay infinities, a value at or past halfway between the
 * largest finite bf16 and 2^128 becomes infinity, and denormals round as
 * the bits say (not flushed to zero: AVX512_BF16's vcvtneps2bf16 flushes
 * denormal inputs, a difference below 2^-126 in magnitude). */
uint16_t st_bf16_from_float(float x);

/* The float a bf16 stands for (exact: its upper half, the rest zero);
 * inline, so that loops over bf16 values vectorise. */
static inline float st_bf16_to_float(uint16_t b)
{
    uint32_t u = (uint32_t)b << 16;
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* dst [count] = src [count] rounded to bf16 and widened back to float, the
 * operands the bf16 kernels multiply; dst may be src. */
void st_bf16_round(float *dst, const float *src, size_t count);

/* dst [count] = src [count] rounded to bf16 (st_bf16_from_float each). */
void st_bf16_convert(uint16_t *dst, const float *src, size_t count);

/* dst [count] = the floats the bf16 values src [count] stand for. */
void st_bf16_widen(float *dst, const uint16_t *src, size_t count);

/* Whether every bf16 value of x [count] is finite (not infinite, not NaN). */
int st_bf16_all_finite(const uint16_t *x, size_t count);

#endif
