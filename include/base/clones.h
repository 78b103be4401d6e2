/* ST_ISA_CLONES: a plain-C loop compiled for AVX-512 (x86-64-v4), AVX2
 * (x86-64-v3) and the baseline the build targets, the one for the CPU
 * chosen at load time (GCC's target_clones), where the build is plain
 * x86-64. Not under ThreadSanitizer, whose runtime is not up when the
 * load-time resolver runs, nor where the compiler lacks it. Helpers such a
 * function calls are compiled into each clone when they are inlined
 * (ST_INLINE). */
#ifndef ST_CLONES_H
#define ST_CLONES_H

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && \
    !defined(__SANITIZE_THREAD__)
#define ST_ISA_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define ST_ISA_CLONES
#endif

#define ST_INLINE static inline __attribute__((always_inline))

#endif
