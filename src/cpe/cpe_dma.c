/* DMA between main memory and a CPE's LDM: contiguous and strided get/put,
 * issued asynchronously with a reply counter (athread_get/athread_put).
 *
 * The copy happens at issue: emulation shares one address space, and the
 * rules (read a buffer only after its wait) make the moment invisible to a
 * correct program. Time is modelled per CPE: its DMA channel serves
 * transfers in issue order, each taking st_cpe_dma_cost's charge from when the
 * channel is free (or from issue, if later); the CPE's clock pays only when
 * it waits for a transfer that has not completed, so a kernel that issues
 * the next block's transfer before computing on the current one hides it.
 *
 * Checked: the LDM side must lie in this CPE's allocated LDM; the main side
 * must not be LDM or a CPE context stack (where an emulated kernel's locals
 * live: on the machine those are LDM too); sizes must be nonzero; a strided
 * pitch must be at least the block. */
#include <string.h>

#include "cpe_internal.h"

static int ranges_overlap(uintptr_t a, size_t a_bytes, const void *b, size_t b_bytes)
{
    uintptr_t bb = (uintptr_t)b;
    return a < bb + b_bytes && bb < a + a_bytes;
}

static void dma_check(st_cpe *cpe, const char *op, const void *ldm, const void *mem,
                      size_t block_bytes, size_t pitch_bytes, size_t count)
{
    const st_cpe_cluster *cg = cpe->cg;
    if (block_bytes == 0 || count == 0)
        cpe_fault(cpe, "DMA %s of %zu blocks of %zu bytes: empty transfers are not allowed", op,
                  count, block_bytes);
    if (count > 1 && pitch_bytes < block_bytes)
        cpe_fault(cpe, "DMA %s: pitch of %zu bytes is smaller than the %zu-byte block", op,
                  pitch_bytes, block_bytes);
    size_t ldm_bytes = block_bytes * count;
    if (!cpe_ldm_owns(cpe, ldm, ldm_bytes))
        cpe_fault(cpe,
                  "DMA %s: the LDM side (%zu bytes at %p) is not in this CPE's allocated LDM "
                  "(%zu bytes at %p)",
                  op, ldm_bytes, ldm, cpe->ldm_used, (const void *)cpe->ldm);
    size_t span = (count - 1) * pitch_bytes + block_bytes;
    uintptr_t at = (uintptr_t)mem;
    if (!mem)
        cpe_fault(cpe, "DMA %s: the main-memory address is NULL", op);
    if (ranges_overlap(at, span, cg->ldm_base, (size_t)cg->count * cg->ldm_bytes))
        cpe_fault(cpe, "DMA %s: the main-memory side (%zu bytes at %p) lies in LDM", op, span, mem);
    if (ranges_overlap(at, span, cg->stack_map, cg->stack_map_bytes))
        cpe_fault(cpe,
                  "DMA %s: the main-memory side (%zu bytes at %p) is a CPE program's local "
                  "variable (LDM on the machine)",
                  op, span, mem);
}

/* Count the transfer and queue it on the CPE's DMA channel. */
static void dma_account(st_cpe *cpe, int put, st_cpe_dma_mode mode, size_t block_bytes,
                        size_t count, st_cpe_reply *reply)
{
    st_cpe_counters *n = &cpe->counts;
    const st_cpe_cost_params *p = &cpe->cg->params;
    uint64_t bytes = (uint64_t)block_bytes * count;
    st_cpe_dma_class *cls = &n->dma[put][mode][st_cpe_dma_size_class(block_bytes)];
    cls->transfers++;
    cls->blocks += count;
    cls->bytes += bytes;
    if (put)
        n->dma_put_bytes += bytes;
    else
        n->dma_get_bytes += bytes;
    cpe_clock *c = &cpe->clock;
    double start = c->dma_channel_free > c->now ? c->dma_channel_free : c->now;
    st_cpe_dma_charge charge = st_cpe_dma_cost(p, put, mode, block_bytes, count);
    double served = start + charge.occupancy_cycles;
    double done = served + charge.latency_cycles;
    c->dma_channel_free = served;
    if (done > c->dma_last_done)
        c->dma_last_done = done;
    reply->count++;
    if (done > reply->done_cycle)
        reply->done_cycle = done;
}

/* A transfer of count blocks of block_bytes, pitch_bytes apart in main
 * memory and packed in LDM: get (put 0: dst is LDM, src main memory) or put
 * (put 1: the other way). The data moves unless the cluster is cost-only
 * and copy is 0 (control data moves always). */
static void dma_transfer(st_cpe *cpe, int put, st_cpe_dma_mode mode, int copy, void *dst,
                         const void *src, size_t block_bytes, size_t pitch_bytes, size_t count,
                         st_cpe_reply *reply)
{
    static const char *const ops[ST_CPE_DMA_MODES][2] = {
        {"get", "put"}, {"strided get", "strided put"},
        {"interleaved get", "interleaved put"}};
    dma_check(cpe, ops[mode][put], put ? src : dst, put ? dst : src, block_bytes, pitch_bytes,
              count);
    size_t dst_pitch = put ? pitch_bytes : block_bytes, src_pitch = put ? block_bytes : pitch_bytes;
    unsigned char *d = dst;
    const unsigned char *s = src;
    for (size_t i = 0; i < count && (copy || !cpe->cg->cost_only); i++)
        memcpy(d + i * dst_pitch, s + i * src_pitch, block_bytes);
    dma_account(cpe, put, mode, block_bytes, count, reply);
}

void st_cpe_dma_get(st_cpe *cpe, void *ldm_dst, const void *main_src, size_t bytes,
                    st_cpe_reply *reply)
{
    dma_transfer(cpe, 0, ST_CPE_DMA_CONTIGUOUS, 0, ldm_dst, main_src, bytes, bytes, 1, reply);
}

void st_cpe_dma_get_control(st_cpe *cpe, void *ldm_dst, const void *main_src, size_t bytes,
                            st_cpe_reply *reply)
{
    dma_transfer(cpe, 0, ST_CPE_DMA_CONTIGUOUS, 1, ldm_dst, main_src, bytes, bytes, 1, reply);
}

void st_cpe_dma_put(st_cpe *cpe, void *main_dst, const void *ldm_src, size_t bytes,
                    st_cpe_reply *reply)
{
    dma_transfer(cpe, 1, ST_CPE_DMA_CONTIGUOUS, 0, main_dst, ldm_src, bytes, bytes, 1, reply);
}

void st_cpe_dma_get_strided(st_cpe *cpe, void *ldm_dst, const void *main_src, size_t block_bytes,
                            size_t pitch_bytes, size_t count, st_cpe_reply *reply)
{
    dma_transfer(cpe, 0, ST_CPE_DMA_STRIDED, 0, ldm_dst, main_src, block_bytes, pitch_bytes,
                 count, reply);
}

void st_cpe_dma_put_strided(st_cpe *cpe, void *main_dst, const void *ldm_src, size_t block_bytes,
                            size_t pitch_bytes, size_t count, st_cpe_reply *reply)
{
    dma_transfer(cpe, 1, ST_CPE_DMA_STRIDED, 0, main_dst, ldm_src, block_bytes, pitch_bytes,
                 count, reply);
}

void st_cpe_dma_get_interleaved(st_cpe *cpe, void *ldm_dst, const void *main_src,
                                size_t block_bytes, size_t pitch_bytes, size_t count,
                                st_cpe_reply *reply)
{
    dma_transfer(cpe, 0, ST_CPE_DMA_INTERLEAVED, 0, ldm_dst, main_src, block_bytes, pitch_bytes,
                 count, reply);
}

void st_cpe_dma_put_interleaved(st_cpe *cpe, void *main_dst, const void *ldm_src,
                                size_t block_bytes, size_t pitch_bytes, size_t count,
                                st_cpe_reply *reply)
{
    dma_transfer(cpe, 1, ST_CPE_DMA_INTERLEAVED, 0, main_dst, ldm_src, block_bytes, pitch_bytes,
                 count, reply);
}

void st_cpe_dma_wait(st_cpe *cpe, st_cpe_reply *reply, int n)
{
    if (n > reply->count)
        cpe_fault(cpe,
                  "waits for %d DMA replies on a counter that %d transfers were issued on "
                  "(it would wait forever)",
                  n, reply->count);
    if (n <= 0)
        return;
    cpe_clock *c = &cpe->clock;
    if (reply->done_cycle > c->now) {
        c->dma += reply->done_cycle - c->now;
        c->now = reply->done_cycle;
    }
}
