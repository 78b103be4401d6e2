/* bfloat16 conversions (ops/bf16.h): round to nearest even on the bits. */
#include "ops/bf16.h"

#include <string.h>

const char *const st_precision_names[] = {"fp32", "bf16", NULL};

uint16_t st_bf16_from_float(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u) /* NaN: truncated, it could become infinity */
        return (uint16_t)((u >> 16) | 0x0040u);
    /* Adding 0x7fff, plus 1 when the kept half is odd, carries into the
     * upper half exactly when the lower half is above halfway, or at
     * halfway with an odd upper half; a carry out of the mantissa raises
     * the exponent (the largest finite values round to infinity). */
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

void st_bf16_round(float *dst, const float *src, size_t count)
{
    for (size_t i = 0; i < count; i++)
        dst[i] = st_bf16_to_float(st_bf16_from_float(src[i]));
}

void st_bf16_convert(uint16_t *dst, const float *src, size_t count)
{
    for (size_t i = 0; i < count; i++)
        dst[i] = st_bf16_from_float(src[i]);
}

void st_bf16_widen(float *dst, const uint16_t *src, size_t count)
{
    for (size_t i = 0; i < count; i++)
        dst[i] = st_bf16_to_float(src[i]);
}

int st_bf16_all_finite(const uint16_t *x, size_t count)
{
    unsigned bad = 0;
    for (size_t i = 0; i < count; i++)
        bad |= (x[i] & 0x7F80u) == 0x7F80u;
    return !bad;
}
