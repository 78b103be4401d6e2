/* Launch counters: adding them up over launches, comparing them, DMA size
 * classes. */
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
    for (int dir = 0; dir < ST_CPE_DMA_DIRS; dir++)
        for (int mode = 0; mode < ST_CPE_DMA_MODES; mode++)
            for (int k = 0; k < ST_CPE_DMA_SIZE_CLASSES; k++)
                n += c->dma[dir][mode][k].transfers;
    return n;
}

static void time_add(st_cpe_time *d, const st_cpe_time *s)
{
    d->compute_s += s->compute_s;
    d->dma_s += s->dma_s;
    d->regcomm_s += s->regcomm_s;
    d->sync_s += s->sync_s;
    d->launch_s += s->launch_s;
    d->total_s += s->total_s;
}

void st_cpe_counters_scale_time(st_cpe_counters *c, double factor)
{
    st_cpe_time *t = &c->time;
    t->compute_s *= factor;
    t->dma_s *= factor;
    t->regcomm_s *= factor;
    t->sync_s *= factor;
    t->launch_s *= factor;
    t->total_s *= factor;
}

void st_cpe_counters_add(st_cpe_counters *dst, const st_cpe_counters *src)
{
    dst->launches += src->launches;
    dst->flops += src->flops;
    dst->compute_cycles += src->compute_cycles;
    dst->dma_get_bytes += src->dma_get_bytes;
    dst->dma_put_bytes += src->dma_put_bytes;
    for (int dir = 0; dir < ST_CPE_DMA_DIRS; dir++)
        for (int mode = 0; mode < ST_CPE_DMA_MODES; mode++)
            for (int k = 0; k < ST_CPE_DMA_SIZE_CLASSES; k++) {
                st_cpe_dma_class *d = &dst->dma[dir][mode][k];
                const st_cpe_dma_class *s = &src->dma[dir][mode][k];
                d->transfers += s->transfers;
                d->blocks += s->blocks;
                d->bytes += s->bytes;
            }
    dst->msgs_p2p += src->msgs_p2p;
    dst->msgs_bcast += src->msgs_bcast;
    dst->msgs_received += src->msgs_received;
    dst->mesh_msgs_bcast += src->mesh_msgs_bcast;
    dst->mesh_msgs_received += src->mesh_msgs_received;
    dst->mesh_gemms += src->mesh_gemms;
    if (src->ldm_peak > dst->ldm_peak)
        dst->ldm_peak = src->ldm_peak;
    dst->barriers += src->barriers;
    time_add(&dst->time, &src->time);
    if (src->launches)
        dst->critical_cpe = src->critical_cpe;
}

static int time_equal(const st_cpe_time *a, const st_cpe_time *b)
{
    return a->compute_s == b->compute_s && a->dma_s == b->dma_s &&
           a->regcomm_s == b->regcomm_s && a->sync_s == b->sync_s &&
           a->launch_s == b->launch_s && a->total_s == b->total_s;
}

int st_cpe_counters_equal(const st_cpe_counters *a, const st_cpe_counters *b)
{
    for (int dir = 0; dir < ST_CPE_DMA_DIRS; dir++)
        for (int mode = 0; mode < ST_CPE_DMA_MODES; mode++)
            for (int k = 0; k < ST_CPE_DMA_SIZE_CLASSES; k++) {
                const st_cpe_dma_class *x = &a->dma[dir][mode][k], *y = &b->dma[dir][mode][k];
                if (x->transfers != y->transfers || x->blocks != y->blocks ||
                    x->bytes != y->bytes)
                    return 0;
            }
    return a->launches == b->launches && a->flops == b->flops &&
           a->compute_cycles == b->compute_cycles && a->dma_get_bytes == b->dma_get_bytes &&
           a->dma_put_bytes == b->dma_put_bytes && a->msgs_p2p == b->msgs_p2p &&
           a->msgs_bcast == b->msgs_bcast && a->msgs_received == b->msgs_received &&
           a->mesh_msgs_bcast == b->mesh_msgs_bcast &&
           a->mesh_msgs_received == b->mesh_msgs_received && a->mesh_gemms == b->mesh_gemms &&
           a->ldm_peak == b->ldm_peak && a->barriers == b->barriers &&
           time_equal(&a->time, &b->time);
}
