/* All-reduce "ring": reduce-scatter then all-gather around the ring of
 * physical ranks 0 -> 1 -> ... -> P-1 -> 0, each half also on its own.
 *
 * The buffer is cut into P blocks (ar_blocks: sizes differ by at most one,
 * some empty when n < P; block q is rank q's part, st_allreduce_part).
 * Reduce-scatter, step k = 0..P-2: rank r sends block r-k-1 to r+1,
 * receives block r-k-2 from r-1 and adds it to its own; afterwards rank r
 * holds the full sum of block r. All-gather, step k = 0..P-2: rank r sends
 * block r-k and receives block r-k-1 into place. The all-reduce is the
 * two in a row. Each block is summed in one fixed order on one rank and
 * copied everywhere, so the result is deterministic and the same on every
 * rank.
 *
 * Restrictions: none. Reference: Patarasuk and Yuan, "Bandwidth optimal
 * all-reduce algorithms for clusters of workstations", JPDC 2009.
 *
 * Cost, P ranks and n bytes (latency alpha, per-byte transfer beta,
 * per-byte reduction gamma):
 *     2 (P-1) alpha + 2 (P-1)/P n beta + (P-1)/P n gamma,
 * half of the alpha and beta terms for each half (the gamma term in the
 * reduce-scatter). Bandwidth-optimal, but the latency term grows linearly
 * with P. With supernodes of Q consecutive ranks, only the ranks at the end
 * of a supernode send across, 2 (P-1)/P n bytes each. Scratch: one block
 * (the reduce-scatter; the all-gather needs none). */
#include "comm.h"

/* Block b of P, b taken mod P. */
static ar_range ring_block(size_t n, int p, int b)
{
    return ar_blocks(n, p, (b % p + p) % p, 1);
}

static st_status ring_reduce_scatter(ar_call *call, float *buf, size_t n)
{
    int p = call->c->size, r = call->c->rank;
    int right = (r + 1) % p, left = (r + p - 1) % p;
    for (int k = 0; k < p - 1; k++) {
        ar_range out = ring_block(n, p, r - k - 1), in = ring_block(n, p, r - k - 2);
        st_status st = ar_exchange(call, buf + out.start, out.count, right, call->scratch,
                                   in.count, left);
        if (st != ST_OK)
            return st;
        ar_sum(call, buf + in.start, call->scratch, in.count);
    }
    return ST_OK;
}

static st_status ring_allgather(ar_call *call, float *buf, size_t n)
{
    int p = call->c->size, r = call->c->rank;
    int right = (r + 1) % p, left = (r + p - 1) % p;
    for (int k = 0; k < p - 1; k++) {
        ar_range out = ring_block(n, p, r - k), in = ring_block(n, p, r - k - 1);
        st_status st = ar_exchange(call, buf + out.start, out.count, right, buf + in.start,
                                   in.count, left);
        if (st != ST_OK)
            return st;
    }
    return ST_OK;
}

/* Floats of scratch the reduce-scatter needs: the largest block. */
static size_t ring_scratch(size_t n, int p)
{
    return (n + (size_t)p - 1) / (size_t)p;
}

st_status st_allreduce_ring(float *buf, size_t n, const st_comm *c, st_allreduce_stats *stats,
                            st_error *err)
{
    ar_call call;
    st_status st = ar_begin(&call, "ring", n, ring_scratch(n, c->size), c, stats, err);
    if (st == ST_OK && c->size > 1)
        st = ring_reduce_scatter(&call, buf, n);
    if (st == ST_OK && c->size > 1)
        st = ring_allgather(&call, buf, n);
    return ar_end(&call, st);
}

st_status st_reduce_scatter_ring(float *buf, size_t n, const st_comm *c,
                                 st_allreduce_stats *stats, st_error *err)
{
    ar_call call;
    st_status st = ar_begin(&call, "ring (reduce-scatter)", n, ring_scratch(n, c->size), c,
                            stats, err);
    if (st == ST_OK && c->size > 1)
        st = ring_reduce_scatter(&call, buf, n);
    return ar_end(&call, st);
}

st_status st_allgather_ring(float *buf, size_t n, const st_comm *c, st_allreduce_stats *stats,
                            st_error *err)
{
    ar_call call;
    st_status st = ar_begin(&call, "ring (all-gather)", n, 0, c, stats, err);
    if (st == ST_OK && c->size > 1)
        st = ring_allgather(&call, buf, n);
    return ar_end(&call, st);
}
