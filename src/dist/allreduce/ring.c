/* All-reduce "ring": reduce-scatter then all-gather around the ring of
 * physical ranks 0 -> 1 -> ... -> P-1 -> 0.
 *
 * The buffer is cut into P blocks (ar_blocks: sizes differ by at most one,
 * some empty when n < P). Reduce-scatter, step k = 0..P-2: rank r sends
 * block r-k to r+1, receives block r-k-1 from r-1 and adds it to its own;
 * afterwards rank r holds the full sum of block r+1 (mod P). All-gather,
 * step k = 0..P-2: rank r sends block r+1-k and receives block r-k into
 * place. Each block is summed in one fixed order on one rank and copied
 * everywhere, so the result is deterministic and the same on every rank.
 *
 * Restrictions: none. Reference: Patarasuk and Yuan, "Bandwidth optimal
 * all-reduce algorithms for clusters of workstations", JPDC 2009.
 *
 * Cost, P ranks and n bytes (latency alpha, per-byte transfer beta,
 * per-byte reduction gamma):
 *     2 (P-1) alpha + 2 (P-1)/P n beta + (P-1)/P n gamma.
 * Bandwidth-optimal, but the latency term grows linearly with P. With
 * supernodes of Q consecutive ranks, only the ranks at the end of a
 * supernode send across, 2 (P-1)/P n bytes each. Scratch: one block. */
#include "algorithm.h"

/* Block b of P, b taken mod P. */
static ar_range ring_block(size_t n, int p, int b)
{
    return ar_blocks(n, p, (b % p + p) % p, 1);
}

st_status st_allreduce_ring(float *buf, size_t n, const st_comm *c, st_allreduce_stats *stats,
                            st_error *err)
{
    int p = c->size, r = c->rank;
    ar_call call;
    st_status st = ar_begin(&call, "ring", n, (n + (size_t)p - 1) / (size_t)p, c, stats, err);
    if (st != ST_OK || p == 1)
        goto done;
    int right = (r + 1) % p, left = (r + p - 1) % p;
    for (int k = 0; k < p - 1; k++) {
        ar_range out = ring_block(n, p, r - k), in = ring_block(n, p, r - k - 1);
        st = ar_exchange(&call, buf + out.start, out.count, right, call.scratch, in.count, left);
        if (st != ST_OK)
            goto done;
        ar_sum(&call, buf + in.start, call.scratch, in.count);
    }
    for (int k = 0; k < p - 1; k++) {
        ar_range out = ring_block(n, p, r + 1 - k), in = ring_block(n, p, r - k);
        st = ar_exchange(&call, buf + out.start, out.count, right, buf + in.start, in.count,
                         left);
        if (st != ST_OK)
            goto done;
    }
done:
    return ar_end(&call, st);
}
