/* The cost model: SW26010 core-group constants, the cost of each event the
 * emulator times (flops, a DMA transfer, a register message), and the
 * counts-only estimate.
 *
 * Per CPE, in cycles (the emulator adds these to each CPE's clock, see
 * include/cpe.h "Time"):
 *   compute   flops / (flops_per_cycle * compute_efficiency), plus
 *             ldm_move_cycles per element rearranged in LDM, plus declared
 *             cycles
 *   DMA       dma_latency_cycles + charged bytes / (dma_bandwidth / 64),
 *             on the CPE's own channel, overlapping computation until waited
 *             for; a strided block under dma_strided_min_block is charged as
 *             that many bytes. The 1/64 share assumes all CPEs transfer at
 *             once, as SPMD kernels do; it is pessimistic for a lone CPE.
 *   message   send: 32 bytes / (bandwidth / 64) of the P2P or broadcast
 *             aggregate; arrival regcomm_latency_cycles later; receive
 *             regcomm_recv_cycles
 *   barrier   the latest arrival + barrier_cycles
 *
 * With the defaults, the effective DMA bandwidth of all 64 CPEs moving s
 * bytes each is 28 GB/s * s / (s + 500 * 0.302): 63% of 28 GB/s at 256 B,
 * 87% at 1 KB, 93% at 2 KB, 98% at 8 KB - latency not hidden below about
 * 2 KB per CPE, and 256-byte strided blocks as the efficient minimum, as
 * the swCaffe paper describes. Nothing here was fitted to published
 * timings. */
#include "cpe_internal.h"

st_cpe_cost_params st_cpe_cost_params_default(void)
{
    st_cpe_cost_params p = {
        /* 1.45 GHz CPE clock: swCaffe (Li et al., "swCaffe: a Parallel
         * Framework for Accelerating Deep Learning Applications on Sunway
         * TaihuLight", IEEE CLUSTER 2018), quoted in DESIGN.md. */
        .clock_hz = 1.45e9,
        /* 8 double-precision flops per cycle per CPE: swCaffe's cluster peak
         * of 742.4 GFlop/s / (64 CPEs * 1.45 GHz) = 8, i.e. one 256-bit FMA
         * on 4 doubles per cycle. Floats run at the same rate (4-wide
         * vectors in the same registers). */
        .flops_per_cycle = 8.0,
        /* An assumption of this model, not a measurement (no SW26010 at
         * hand): a register-blocked FMA inner loop sustaining 90% of peak.
         * Override it to study other efficiencies. */
        .compute_efficiency = 0.9,
        /* An assumption: rearranging an element within LDM (a load and a
         * store of scalar code, as in im2col packing) takes 1 cycle on the
         * CPE's in-order dual-issue pipeline (swCandle, below, describes the
         * pipeline; the figure is this model's). */
        .ldm_move_cycles = 1.0,
        /* 28 GB/s per core group for large transfers from all 64 CPEs:
         * swCaffe, DESIGN.md. */
        .dma_bandwidth = 28e9,
        /* swCaffe: "hundreds of cycles" of DMA latency, not hidden below
         * about 2 KB per CPE. 500 is this model's choice within that range;
         * the curve it gives is in the header comment. */
        .dma_latency_cycles = 500.0,
        /* swCaffe: strided DMA needs blocks of at least 256 B. */
        .dma_strided_min_block = 256.0,
        /* Aggregate register-communication bandwidth per core group:
         * 2549 GB/s point to point, 4461 GB/s broadcast (swCaffe,
         * DESIGN.md). */
        .regcomm_p2p_bandwidth = 2549e9,
        .regcomm_bcast_bandwidth = 4461e9,
        /* An assumption: about ten cycles from send to arrival. swCandle
         * (Lin, Xu, Cai, Nukada, Matsuoka, "Evaluating the SW26010 many-core
         * processor with a micro-benchmark suite for performance
         * optimizations", Parallel Computing 77, 2018) found broadcast and
         * P2P latency equal, so one figure serves both. */
        .regcomm_latency_cycles = 10.0,
        /* swCandle (same paper): a receive instruction costs about 1 cycle. */
        .regcomm_recv_cycles = 1.0,
        /* An assumption: one hardware synchronisation of the 64 CPEs. */
        .barrier_cycles = 100.0,
        /* An assumption: athread_spawn + athread_join of a kernel, 5 us. */
        .launch_seconds = 5e-6,
        /* The MPE's peak is 11.6 GFlop/s per core group (swCaffe,
         * DESIGN.md: 1.45 GHz, 256-bit FMA); the layers left on it are
         * scalar C loops, taken here as a quarter of peak (an assumption). */
        .mpe_flops = 11.6e9 / 4.0,
        /* Memory-to-memory copies through the MPE reach 9.9 GB/s (swCaffe,
         * DESIGN.md); streaming layers are bound by it. */
        .mpe_bandwidth = 9.9e9,
    };
    return p;
}

double st_cpe_mpe_seconds(const st_cpe_cost_params *p, double flops, double bytes)
{
    double compute = flops / p->mpe_flops, memory = bytes / p->mpe_bandwidth;
    return compute > memory ? compute : memory;
}

double cpe_cost_flop_cycles(const st_cpe_cost_params *p, double flops)
{
    return flops / (p->flops_per_cycle * p->compute_efficiency);
}

/* Bytes one CPE's channel moves per cycle: its 1/64 share. */
static double dma_bytes_per_cycle(const st_cpe_cost_params *p)
{
    return p->dma_bandwidth / ST_CPE_COUNT / p->clock_hz;
}

double cpe_cost_dma_cycles(const st_cpe_cost_params *p, st_cpe_dma_mode mode, size_t block_bytes,
                           size_t count)
{
    double block = (double)block_bytes;
    if (mode == ST_CPE_DMA_STRIDED && block < p->dma_strided_min_block)
        block = p->dma_strided_min_block;
    return p->dma_latency_cycles + block * (double)count / dma_bytes_per_cycle(p);
}

double cpe_cost_send_cycles(const st_cpe_cost_params *p, int broadcast)
{
    double bandwidth = broadcast ? p->regcomm_bcast_bandwidth : p->regcomm_p2p_bandwidth;
    return ST_CPE_MSG_BYTES / (bandwidth / ST_CPE_COUNT / p->clock_hz);
}

void st_cpe_cost_counts(const st_cpe_cost_params *p, const st_cpe_counters *c, st_cpe_time *out)
{
    double hz = p->clock_hz;
    double compute_cycles = cpe_cost_flop_cycles(p, (double)c->flops) +
                            (double)c->ldm_moves * p->ldm_move_cycles + c->work_cycles;
    double dma_cycles = 0.0;
    for (int mode = 0; mode < ST_CPE_DMA_MODES; mode++)
        for (int k = 0; k < ST_CPE_DMA_SIZE_CLASSES; k++) {
            const st_cpe_dma_class *cls = &c->dma[mode][k];
            double charged = (double)cls->bytes;
            double padded = (double)cls->blocks * p->dma_strided_min_block;
            if (mode == ST_CPE_DMA_STRIDED && padded > charged)
                charged = padded;
            dma_cycles += (double)cls->transfers * p->dma_latency_cycles +
                          charged / dma_bytes_per_cycle(p);
        }
    double regcomm_cycles = (double)c->msgs_p2p * cpe_cost_send_cycles(p, 0) +
                            (double)c->msgs_bcast * cpe_cost_send_cycles(p, 1) +
                            (double)c->msgs_received * p->regcomm_recv_cycles;
    out->compute_s = compute_cycles / ST_CPE_COUNT / hz;
    out->dma_s = dma_cycles / ST_CPE_COUNT / hz;
    out->regcomm_s = regcomm_cycles / ST_CPE_COUNT / hz;
    out->sync_s = (double)c->barriers * p->barrier_cycles / hz;
    out->launch_s = (double)c->launches * p->launch_seconds;
    out->total_s = out->compute_s + out->dma_s + out->regcomm_s + out->sync_s + out->launch_s;
}
