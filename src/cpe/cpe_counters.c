/* Launch counters: adding them up over launches, DMA size classes. */
#include "cpe_internal.h"

int st_cpe_dma_size_class(size_t bytes)
{
    int k = 0;
    while (bytes > 1 && k < ST_CPE_DMA_SIZE_CLASSES - 1) {
        bytes >>= 1;
        k++;
    }
    return k;
}

uint64_t st_cpe_counters_dma_transfers(const st_cpe_counters *c)
{
    uint64_t n = 0;
    for (int mode = 0; mode < ST_CPE_DMA_MODES; mode++)
        for (int k = 0; k < ST_CPE_DMA_SIZE_CLASSES; k++)
            n += c->dma[mode][k].transfers;
    return n;
}

void st_cpe_counters_add(st_cpe_counters *dst, const st_cpe_counters *src)
{
    dst->launches += src->launches;
    dst->flops += src->flops;
    dst->work_cycles += src->work_cycles;
    dst->ldm_moves += src->ldm_moves;
    dst->dma_get_bytes += src->dma_get_bytes;
    dst->dma_put_bytes += src->dma_put_bytes;
    for (int mode = 0; mode < ST_CPE_DMA_MODES; mode++)
        for (int k = 0; k < ST_CPE_DMA_SIZE_CLASSES; k++) {
            st_cpe_dma_class *d = &dst->dma[mode][k];
            const st_cpe_dma_class *s = &src->dma[mode][k];
            d->transfers += s->transfers;
            d->blocks += s->blocks;
            d->bytes += s->bytes;
        }
    dst->msgs_p2p += src->msgs_p2p;
    dst->msgs_bcast += src->msgs_bcast;
    dst->msgs_received += src->msgs_received;
    if (src->ldm_peak > dst->ldm_peak)
        dst->ldm_peak = src->ldm_peak;
    dst->barriers += src->barriers;
    dst->time.compute_s += src->time.compute_s;
    dst->time.dma_s += src->time.dma_s;
    dst->time.regcomm_s += src->time.regcomm_s;
    dst->time.sync_s += src->time.sync_s;
    dst->time.launch_s += src->time.launch_s;
    dst->time.total_s += src->time.total_s;
    if (src->launches)
        dst->critical_cpe = src->critical_cpe;
}
