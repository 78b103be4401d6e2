/* The ceilings a layer's time is compared with in --profile: the FMA peak
 * of one core (and its bfloat16 peaks, dot products and AMX's tiles, where
 * the CPU has them) and the copy bandwidth at three working-set sizes,
 * measured when the profile is printed (or the peak given), and the bound
 * they put on a pass that does `flops` and moves `bytes`: the larger of
 * flops / peak and bytes / the bandwidth of a working set that size (the
 * classic roofline). */
#ifndef ST_ROOFLINE_H
#define ST_ROOFLINE_H

#include <stddef.h>

enum { ST_ROOFLINE_LEVELS = 3 };

typedef struct st_roofline {
    double fma_gflops;         /* one core, single precision */
    int fma_measured;          /* 0: given */
    const char *isa;           /* what the peak loop ran on */
    /* One core's bf16 peak: dot products of bf16 pairs accumulated in fp32
     * (AVX512_BF16's vdpbf16ps, 4 flops a lane); 0 where the CPU has none. */
    double bf16_gflops;
    const char *bf16_isa;
    /* One core's bf16 peak on AMX's tiles (tdpbf16ps, 16,384 flops a
     * product); 0 where the CPU has no AMX-BF16 or the kernel refuses the
     * tiles (amx_isa says which). */
    double amx_gflops;
    const char *amx_isa;
    /* Copy bandwidth (bytes read + written per second) of working sets up
     * to set_bytes[i]; the last level takes every larger set. */
    size_t set_bytes[ST_ROOFLINE_LEVELS];
    double copy_gbs[ST_ROOFLINE_LEVELS];
} st_roofline;

/* Measure (about 0.3-0.6 s on one core); fma_gflops > 0 gives the peak instead
 * of measuring it. */
void st_roofline_measure(st_roofline *r, double fma_gflops);

/* Least seconds a pass can take on `cores` cores; *compute_bound: whether
 * the flops (not the bytes) set it. */
double st_roofline_bound(const st_roofline *r, int cores, double flops, double bytes,
                         int *compute_bound);

#endif
