/* The cost model: the cost of each event the emulator times (a declared
 * loop, a DMA transfer, a register message), under the constants of
 * data/sw26010/model.conf.
 *
 * Per CPE, in cycles (the emulator adds these to each CPE's clock, see
 * include/cpe/cpe.h "Time"):
 *   loop     loop_entry_cycles + iterations * max(fp, mem,
 *            (fp + mem + any) / 2, chain): two in-order pipelines, P0 for
 *            floating point, P1 for LDM and register communication, either
 *            for integer and branch instructions, one issue each per cycle;
 *            a loop-carried chain (an accumulator) bounds an iteration below
 *   mesh     the mesh GEMM's steps, built from the same loops (cpe_mesh.c)
 *   DMA      the transfer's blocks occupy the CPE's channel for the sum of
 *            their measured costs (dma curve, by block size; a contiguous
 *            transfer is one block), then its latency passes; waiting is
 *            paid only for what is not hidden behind computation
 *   message  send: 32 bytes / (bandwidth / CPEs) of the P2P or broadcast
 *            aggregate; arrival regcomm_latency_cycles later; receive
 *            regcomm_recv_cycles
 *   barrier  the latest arrival + barrier_cycles
 * Each is costed in one place: a DMA by st_cpe_dma_cost, a loop by
 * st_cpe_loop_cycles, a message by cpe_cost_send_cycles.
 *
 * Calibration. The DMA curve and latency come from swCandle's STREAM
 * kernels on one core group (Lin et al., Parallel Computing 77, 2018;
 * github jameslinsjtu/swCandle memory/stream_sw/PE, the figures in
 * data/sw26010/dma_stream_swcandle.csv): each CPE loops get, wait, compute
 * in LDM, put, wait (add and triad: two gets, then one wait). With blocks
 * of b bytes moved by long strided transfers, copy costs g(b) + p(b) per
 * block and add 2 g(b) + p(b), which gives the get and put occupancy of a
 * block, g and p (the medians over the step sizes measured, made
 * non-decreasing in b); the contiguous curve then fixes the one remaining
 * constant, the latency a transfer adds after its occupancy (2398 cycles
 * for a get and a put together, by the least median error; split evenly,
 * an assumption: only the sum is measured). With these, the emulated
 * STREAM loops reproduce the contiguous curve within 12% (median 2%) from
 * 64 B to 24 KB and are 15-41% too slow below 64 B (tests/unit/test_cpe_calibration.c).
 * A long run of gets moves 27.8 GB/s and of puts 16.7 GB/s: the 28 GB/s a
 * double-buffered stream reaches (swCaffe) was not used and comes out.
 *
 * The pipeline constants are the two issue slots per cycle (swCaffe,
 * swDNN), the instruction counts of swDNN's and swCaffe's kernels (their
 * assembly), and the assumptions marked below. With them and the DMA
 * curve, the emulated swDNN kernel (cpe_conv_implicit.c, in double as
 * measured) gives swDNN's convolution GFLOPS on 1 and 4 core groups
 * (data/sw26010/swdnn_conv_*.csv) with a median error of 6-7%
 * (tests/unit/test_cpe_calibration.c).
 *
 * The constants' values and sources are in data/sw26010/model.conf (built
 * in, read by cpe_model.c); a few of them, which no independent
 * measurement gives, are fitted there on swCaffe's own measurements by
 * scripts/calibrate-sw26010.sh. */
#include "cpe_internal.h"

double st_cpe_mpe_seconds(const st_cpe_cost_params *p, double flops, double bytes)
{
    double compute = flops / p->mpe_flops, memory = bytes / p->mpe_bandwidth;
    return compute > memory ? compute : memory;
}

/* ---- DMA ---- */

/* The curve's cost of one block of bytes (see st_cpe_dma_curve). */
static double curve_at(const st_cpe_dma_curve *c, const double *cycles, double bytes)
{
    int n = c->points;
    if (n <= 0)
        return 0.0;
    if (n == 1 || bytes <= c->bytes[0])
        return cycles[0];
    int i = 1;
    while (i < n - 1 && bytes > c->bytes[i])
        i++;
    double x0 = c->bytes[i - 1], x1 = c->bytes[i];
    return cycles[i - 1] + (bytes - x0) * (cycles[i] - cycles[i - 1]) / (x1 - x0);
}

/* The occupancy of one block of bytes, getting or putting. */
static double block_cycles(const st_cpe_cost_params *p, int put, double bytes)
{
    return curve_at(&p->dma, put ? p->dma.put_cycles : p->dma.get_cycles, bytes);
}

st_cpe_dma_charge st_cpe_dma_cost(const st_cpe_cost_params *p, int put, st_cpe_dma_mode mode,
                                  size_t block_bytes, size_t count)
{
    double share = mode == ST_CPE_DMA_INTERLEAVED ? p->dma_interleaved_share : 1.0;
    st_cpe_dma_charge c = {
        .occupancy_cycles = (double)count * share * block_cycles(p, put, (double)block_bytes),
        .latency_cycles = put ? p->dma_put_latency_cycles : p->dma_get_latency_cycles,
    };
    return c;
}

/* ---- computation ---- */

double st_cpe_loop_cycles(const st_cpe_cost_params *p, const st_cpe_loop *loop)
{
    if (loop->iterations <= 0.0)
        return 0.0;
    double any = loop->any + p->loop_overhead_ops / (loop->unroll > 1 ? loop->unroll : 1);
    double per = loop->fp > loop->mem ? loop->fp : loop->mem;
    double both = (loop->fp + loop->mem + any) / 2.0;
    if (both > per)
        per = both;
    if (loop->chain > per)
        per = loop->chain;
    return p->loop_entry_cycles + loop->iterations * per;
}

double cpe_cost_send_cycles(const st_cpe_cost_params *p, int broadcast)
{
    double bandwidth = broadcast ? p->regcomm_bcast_bandwidth : p->regcomm_p2p_bandwidth;
    return ST_CPE_MSG_BYTES / (bandwidth / p->cpes / p->clock_hz);
}
