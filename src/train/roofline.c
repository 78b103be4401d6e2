/* The roofline --profile compares each layer with: one core's FMA peak,
 * timed on independent fused multiply-adds in the widest vectors the CPU
 * has, its bf16 peaks the same way on AVX512_BF16's dot products and on
 * AMX's tile products, and memcpy's bandwidth at three working-set sizes
 * (a private cache, the shared cache, memory). */
#include "train/roofline.h"

#include <cpuid.h>
#include <immintrin.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/clock.h"

enum { FMA_CHAINS = 12 }; /* independent accumulators: more than latency x pipes */

/* Flops per second of `iters` rounds of FMA_CHAINS independent
 * multiply-adds on vectors of `lanes` floats (named registers, so that the
 * compiler keeps them out of memory). */
#define FMA_RATE(name, target, vec, lanes, set1, madd, add, store)                      \
    target static double name(long iters)                                              \
    {                                                                                  \
        const vec m = set1(0.999999f), c = set1(1e-7f);                                \
        vec a0 = set1(0.f), a1 = set1(1.f), a2 = set1(2.f), a3 = set1(3.f);            \
        vec a4 = set1(4.f), a5 = set1(5.f), a6 = set1(6.f), a7 = set1(7.f);            \
        vec a8 = set1(8.f), a9 = set1(9.f), a10 = set1(10.f), a11 = set1(11.f);        \
        double t0 = st_now();                                                          \
        for (long i = 0; i < iters; i++) {                                             \
            a0 = madd(a0, m, c), a1 = madd(a1, m, c), a2 = madd(a2, m, c);             \
            a3 = madd(a3, m, c), a4 = madd(a4, m, c), a5 = madd(a5, m, c);             \
            a6 = madd(a6, m, c), a7 = madd(a7, m, c), a8 = madd(a8, m, c);             \
            a9 = madd(a9, m, c), a10 = madd(a10, m, c), a11 = madd(a11, m, c);         \
            __asm__ volatile("" : "+x"(a0), "+x"(a1), "+x"(a2), "+x"(a3), "+x"(a4),     \
                             "+x"(a5), "+x"(a6), "+x"(a7), "+x"(a8), "+x"(a9),         \
                             "+x"(a10), "+x"(a11));                                    \
        }                                                                              \
        double dt = st_now() - t0;                                                     \
        float sink[lanes];                                                             \
        store(sink, add(add(add(add(a0, a1), add(a2, a3)), add(add(a4, a5), add(a6, a7))), \
                        add(add(a8, a9), add(a10, a11))));                             \
        __asm__ volatile("" : : "r"(sink) : "memory");                                 \
        return 2.0 * (lanes) * FMA_CHAINS * (double)iters / dt;                        \
    }

#define SSE_MADD(a, m, c) _mm_add_ps(_mm_mul_ps(a, m), c)
FMA_RATE(fma_rate_avx512, __attribute__((target("avx512f"))), __m512, 16, _mm512_set1_ps,
         _mm512_fmadd_ps, _mm512_add_ps, _mm512_storeu_ps)
FMA_RATE(fma_rate_avx2, __attribute__((target("avx2,fma"))), __m256, 8, _mm256_set1_ps,
         _mm256_fmadd_ps, _mm256_add_ps, _mm256_storeu_ps)
FMA_RATE(fma_rate_sse, , __m128, 4, _mm_set1_ps, SSE_MADD, _mm_add_ps, _mm_storeu_ps)

/* Flops per second of `iters` rounds of FMA_CHAINS independent bf16 dot
 * products (vdpbf16ps: in each of 16 fp32 lanes, two bf16 products added
 * to the accumulator: 4 flops a lane, as oneDNN and PyTorch count a
 * bf16 multiply-add as 2). */
__attribute__((target("avx512bf16,avx512f"))) static double dpbf16_rate(long iters)
{
    const __m512bh m = (__m512bh)_mm512_set1_epi16(0x3f80); /* 1.0 */
    __m512 a0 = _mm512_set1_ps(0.f), a1 = _mm512_set1_ps(1.f), a2 = _mm512_set1_ps(2.f);
    __m512 a3 = _mm512_set1_ps(3.f), a4 = _mm512_set1_ps(4.f), a5 = _mm512_set1_ps(5.f);
    __m512 a6 = _mm512_set1_ps(6.f), a7 = _mm512_set1_ps(7.f), a8 = _mm512_set1_ps(8.f);
    __m512 a9 = _mm512_set1_ps(9.f), a10 = _mm512_set1_ps(10.f), a11 = _mm512_set1_ps(11.f);
    double t0 = st_now();
    for (long i = 0; i < iters; i++) {
        a0 = _mm512_dpbf16_ps(a0, m, m), a1 = _mm512_dpbf16_ps(a1, m, m);
        a2 = _mm512_dpbf16_ps(a2, m, m), a3 = _mm512_dpbf16_ps(a3, m, m);
        a4 = _mm512_dpbf16_ps(a4, m, m), a5 = _mm512_dpbf16_ps(a5, m, m);
        a6 = _mm512_dpbf16_ps(a6, m, m), a7 = _mm512_dpbf16_ps(a7, m, m);
        a8 = _mm512_dpbf16_ps(a8, m, m), a9 = _mm512_dpbf16_ps(a9, m, m);
        a10 = _mm512_dpbf16_ps(a10, m, m), a11 = _mm512_dpbf16_ps(a11, m, m);
        __asm__ volatile("" : "+v"(a0), "+v"(a1), "+v"(a2), "+v"(a3), "+v"(a4), "+v"(a5),
                         "+v"(a6), "+v"(a7), "+v"(a8), "+v"(a9), "+v"(a10), "+v"(a11));
    }
    double dt = st_now() - t0;
    float sink[16];
    _mm512_storeu_ps(sink, _mm512_add_ps(
        _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)),
                      _mm512_add_ps(_mm512_add_ps(a4, a5), _mm512_add_ps(a6, a7))),
        _mm512_add_ps(_mm512_add_ps(a8, a9), _mm512_add_ps(a10, a11))));
    __asm__ volatile("" : : "r"(sink) : "memory");
    return 4.0 * 16 * FMA_CHAINS * (double)iters / dt;
}

/* AMX-BF16 (CPUID leaf 7, EDX bit 22): asked of CPUID, since clang 14's
 * __builtin_cpu_supports knows no "amx-bf16". */
static int cpu_has_amx_bf16(void)
{
    unsigned a, b, c, d;
    return __get_cpuid_count(7, 0, &a, &b, &c, &d) && (d >> 22 & 1u);
}

/* Linux hands a process AMX's tile registers only when it asks
 * (arch_prctl ARCH_REQ_XCOMP_PERM for XFEATURE_XTILEDATA, Linux 5.16 and
 * later; oneDNN asks the same); 0 where the kernel refuses. */
enum { ARCH_REQ_XCOMP_PERM = 0x1023, XFEATURE_XTILEDATA = 18 };
static int amx_tiles_granted(void)
{
    return syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0;
}

/* ldtilecfg's 64 bytes: palette 1, then each tile's bytes per row and rows. */
typedef struct amx_tile_config {
    unsigned char palette, start_row, reserved[14];
    unsigned short colsb[16];
    unsigned char rows[16];
} amx_tile_config;

enum {
    AMX_CHAINS = 6,                /* accumulator tiles 0-5: more than latency / issue */
    AMX_PRODUCT = 2 * 16 * 16 * 32 /* flops of a tdpbf16ps: a 16x16 fp32 tile += a 16x32
                                      bf16 tile times a 32x16 one */
};

/* Flops per second of `iters` rounds of AMX_CHAINS independent tile
 * products, operands in tiles 6 and 7. */
__attribute__((target("amx-tile,amx-bf16"))) static double tdpbf16_rate(long iters)
{
    amx_tile_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    for (int t = 0; t < 8; t++)
        cfg.colsb[t] = 64, cfg.rows[t] = 16;
    _Alignas(64) unsigned short operand[16 * 32];
    for (int i = 0; i < 16 * 32; i++)
        operand[i] = 0x3c00; /* 2^-7: the sums stay far from overflow */
    _Alignas(64) float sink[16 * 16];
    _tile_loadconfig(&cfg);
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    _tile_zero(4);
    _tile_zero(5);
    _tile_loadd(6, operand, 64);
    _tile_loadd(7, operand, 64);
    double t0 = st_now();
    for (long i = 0; i < iters; i++) {
        _tile_dpbf16ps(0, 6, 7);
        _tile_dpbf16ps(1, 6, 7);
        _tile_dpbf16ps(2, 6, 7);
        _tile_dpbf16ps(3, 6, 7);
        _tile_dpbf16ps(4, 6, 7);
        _tile_dpbf16ps(5, 6, 7);
    }
    _tile_stored(5, sink, 64);
    double dt = st_now() - t0;
    _tile_release();
    __asm__ volatile("" : : "r"(sink) : "memory");
    return (double)AMX_PRODUCT * AMX_CHAINS * (double)iters / dt;
}

/* Best of a few rounds of about 40 ms (the first, of 2^16 iterations,
 * warms the clock up); flops_per_iter: what one iteration of rate does. */
static double best_rate(double (*rate)(long), double flops_per_iter)
{
    double best = 0.0;
    long iters = 1 << 16;
    for (int round = 0; round < 4; round++) {
        double r = rate(iters);
        if (r > best)
            best = r;
        iters = (long)(0.04 * r / flops_per_iter) + 1;
    }
    return best;
}

/* Bytes read and written per second by repeated memcpy of `size` bytes. */
static double copy_rate(char *a, char *b, size_t size)
{
    double best = 0.0;
    int reps = 1;
    for (int round = 0; round < 4; round++) {
        double t0 = st_now();
        for (int i = 0; i < reps; i++) {
            memcpy(i & 1 ? a : b, i & 1 ? b : a, size);
            __asm__ volatile("" : : "r"(a), "r"(b) : "memory");
        }
        double dt = st_now() - t0, r = 2.0 * (double)size * reps / dt;
        if (r > best)
            best = r;
        reps = (int)(0.02 * r / (2.0 * (double)size)) + 1;
    }
    return best;
}

void st_roofline_measure(st_roofline *r, double fma_gflops)
{
    memset(r, 0, sizeof *r);
    __builtin_cpu_init();
    if (fma_gflops > 0) {
        r->fma_gflops = fma_gflops;
        r->isa = "given";
    } else {
        double (*rate)(long) = fma_rate_sse;
        int lanes = 4;
        r->isa = "sse (no fma)";
        if (__builtin_cpu_supports("avx512f")) {
            rate = fma_rate_avx512, lanes = 16;
            r->isa = "avx512 fma";
        } else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
            rate = fma_rate_avx2, lanes = 8;
            r->isa = "avx2 fma";
        }
        r->fma_gflops = best_rate(rate, 2.0 * lanes * FMA_CHAINS) / 1e9;
        r->fma_measured = 1;
    }
    r->bf16_isa = "none: no bf16 instructions";
    if (__builtin_cpu_supports("avx512bf16")) {
        r->bf16_gflops = best_rate(dpbf16_rate, 4.0 * 16 * FMA_CHAINS) / 1e9;
        r->bf16_isa = "avx512_bf16 dot products";
    }
    r->amx_isa = "none: no AMX-BF16";
    if (cpu_has_amx_bf16()) {
        r->amx_isa = "AMX tiles refused by the kernel (arch_prctl)";
        if (amx_tiles_granted()) {
            r->amx_gflops = best_rate(tdpbf16_rate, (double)AMX_PRODUCT * AMX_CHAINS) / 1e9;
            r->amx_isa = "AMX tile products";
        }
    }
    const size_t copy[ST_ROOFLINE_LEVELS] = {256u << 10, 8u << 20, 64u << 20};
    char *a = malloc(copy[ST_ROOFLINE_LEVELS - 1]), *b = malloc(copy[ST_ROOFLINE_LEVELS - 1]);
    for (int i = 0; i < ST_ROOFLINE_LEVELS; i++) {
        r->set_bytes[i] = 2 * copy[i];
        if (a && b) {
            memset(a, 1, copy[i]);
            memset(b, 2, copy[i]);
            r->copy_gbs[i] = copy_rate(a, b, copy[i]) / 1e9;
        }
    }
    free(a);
    free(b);
}

/* Bandwidth (GB/s) for a pass that moves `bytes`. */
static double copy_gbs(const st_roofline *r, double bytes)
{
    int i = 0;
    while (i < ST_ROOFLINE_LEVELS - 1 && bytes > (double)r->set_bytes[i])
        i++;
    return r->copy_gbs[i];
}

double st_roofline_bound(const st_roofline *r, int cores, double flops, double bytes,
                         int *compute_bound)
{
    double compute = r->fma_gflops > 0 ? flops / (1e9 * r->fma_gflops * cores) : 0.0;
    double gbs = copy_gbs(r, bytes);
    double memory = gbs > 0 ? bytes / (1e9 * gbs) : 0.0;
    *compute_bound = compute >= memory;
    return *compute_bound ? compute : memory;
}
