/* Helpers shared by the CPE kernels (the files beside it): fetching the
 * argument block into LDM, cutting a range into the 64 CPEs' shares, the
 * loops they declare to the cost model, DMA of a block of rows as one
 * contiguous transfer when the rows are adjacent in main memory, and
 * transfers waited for at once, for the kernels that wait for each before
 * the next step (as swCaffe's im2col and pooling do). Static inline: each
 * kernel file is a CPE program of its own. */
#ifndef ST_CPE_KERNEL_COMMON_H
#define ST_CPE_KERNEL_COMMON_H

#include <stddef.h>

#include "cpe/kernels.h"

/* LDM a kernel leaves for the alignment of its buffers (up to 16 of them),
 * beyond its argument block. */
#define CPE_KERNEL_LDM_SLACK (16 * ST_CPE_LDM_ALIGN)

/* Control data (bytes at src, main memory: an argument block, a table of
 * pointers or tensor descriptions) into ldm, waited for; copied in
 * cost-only mode too (st_cpe_dma_get_control). */
static inline void cpe_get_control_now(st_cpe *cpe, void *ldm, const void *src, size_t bytes)
{
    st_cpe_reply reply = {0};
    st_cpe_dma_get_control(cpe, ldm, src, bytes, &reply);
    st_cpe_dma_wait(cpe, &reply, 1);
}

/* The argument block (bytes at args, main memory), fetched into LDM as
 * swCaffe's kernels do. */
static inline void *cpe_kernel_args(st_cpe *cpe, const void *args, size_t bytes)
{
    void *a = st_cpe_ldm_alloc(cpe, bytes, "arguments");
    cpe_get_control_now(cpe, a, args, bytes);
    return a;
}

static inline void cpe_reply_reset(st_cpe_reply *reply)
{
    reply->count = 0;
    reply->done_cycle = 0.0;
}

/* Share `part` of `parts` (the CPEs) of [begin, end): [*lo, *hi), cut at
 * multiples of grain elements from begin, as equal as that allows (later
 * shares may be empty when there are fewer grains than CPEs). */
static inline void cpe_kernel_share(size_t begin, size_t end, size_t grain, int part, int parts,
                                    size_t *lo, size_t *hi)
{
    size_t grains = (end - begin + grain - 1) / grain;
    size_t a = begin + grains * (size_t)part / (size_t)parts * grain;
    size_t b = begin + grains * (size_t)(part + 1) / (size_t)parts * grain;
    *lo = a < end ? a : end;
    *hi = b < end ? b : end;
}

/* Declare a vectorised loop over n values, a vector register's
 * (st_cpe_vector_doubles: 4 on the SW26010) per iteration, with fp vector
 * floating-point instructions and mem LDM loads and stores per vector (see
 * st_cpe_loop); flops_per_value floating-point operations per value. */
static inline void cpe_vector_loop(st_cpe *cpe, size_t n, double fp, double mem,
                                   double flops_per_value)
{
    size_t lanes = (size_t)st_cpe_vector_doubles(cpe);
    st_cpe_loop loop = {.iterations = (double)((n + lanes - 1) / lanes), .fp = fp, .mem = mem,
                        .flops = (uint64_t)(flops_per_value * (double)n)};
    st_cpe_loop_run(cpe, &loop);
}

/* Declare a scalar loop of n iterations, each with fp floating-point, mem
 * load and store and any integer instructions, flops_per_iteration flops. */
static inline void cpe_scalar_loop(st_cpe *cpe, size_t n, double fp, double mem, double any,
                                   double flops_per_iteration)
{
    st_cpe_loop loop = {.iterations = (double)n, .fp = fp, .mem = mem, .any = any,
                        .flops = (uint64_t)(flops_per_iteration * (double)n)};
    st_cpe_loop_run(cpe, &loop);
}

static inline size_t cpe_min_size(size_t a, size_t b)
{
    return a < b ? a : b;
}

/* rows blocks of bytes each, pitch bytes apart in main memory, packed one
 * after another in LDM; interleaved: moved by the 8 CPEs of a row or
 * column side by side (pitch = 8 blocks, cpe.h's interleaved transfers). */
static inline void cpe_get_rows_as(st_cpe *cpe, int interleaved, void *ldm, const void *src,
                                   size_t bytes, size_t pitch, size_t rows, st_cpe_reply *reply)
{
    if (rows == 1 || pitch == bytes)
        st_cpe_dma_get(cpe, ldm, src, bytes * rows, reply);
    else if (interleaved)
        st_cpe_dma_get_interleaved(cpe, ldm, src, bytes, pitch, rows, reply);
    else
        st_cpe_dma_get_strided(cpe, ldm, src, bytes, pitch, rows, reply);
}

static inline void cpe_put_rows_as(st_cpe *cpe, int interleaved, void *dst, const void *ldm,
                                   size_t bytes, size_t pitch, size_t rows, st_cpe_reply *reply)
{
    if (rows == 1 || pitch == bytes)
        st_cpe_dma_put(cpe, dst, ldm, bytes * rows, reply);
    else if (interleaved)
        st_cpe_dma_put_interleaved(cpe, dst, ldm, bytes, pitch, rows, reply);
    else
        st_cpe_dma_put_strided(cpe, dst, ldm, bytes, pitch, rows, reply);
}

static inline void cpe_get_rows(st_cpe *cpe, void *ldm, const void *src, size_t bytes,
                                size_t pitch, size_t rows, st_cpe_reply *reply)
{
    cpe_get_rows_as(cpe, 0, ldm, src, bytes, pitch, rows, reply);
}

static inline void cpe_put_rows(st_cpe *cpe, void *dst, const void *ldm, size_t bytes,
                                size_t pitch, size_t rows, st_cpe_reply *reply)
{
    cpe_put_rows_as(cpe, 0, dst, ldm, bytes, pitch, rows, reply);
}

/* Transfers waited for at once: bytes between main memory and LDM, and
 * rows as cpe_get_rows and cpe_put_rows. */
static inline void cpe_get_now(st_cpe *cpe, void *ldm, const void *src, size_t bytes)
{
    st_cpe_reply reply = {0};
    st_cpe_dma_get(cpe, ldm, src, bytes, &reply);
    st_cpe_dma_wait(cpe, &reply, 1);
}

static inline void cpe_put_now(st_cpe *cpe, void *dst, const void *ldm, size_t bytes)
{
    st_cpe_reply reply = {0};
    st_cpe_dma_put(cpe, dst, ldm, bytes, &reply);
    st_cpe_dma_wait(cpe, &reply, 1);
}

static inline void cpe_get_rows_now(st_cpe *cpe, void *ldm, const void *src, size_t bytes,
                                    size_t pitch, size_t rows)
{
    st_cpe_reply reply = {0};
    cpe_get_rows(cpe, ldm, src, bytes, pitch, rows, &reply);
    st_cpe_dma_wait(cpe, &reply, reply.count);
}

static inline void cpe_put_rows_now(st_cpe *cpe, void *dst, const void *ldm, size_t bytes,
                                    size_t pitch, size_t rows)
{
    st_cpe_reply reply = {0};
    cpe_put_rows(cpe, dst, ldm, bytes, pitch, rows, &reply);
    st_cpe_dma_wait(cpe, &reply, reply.count);
}

#endif
