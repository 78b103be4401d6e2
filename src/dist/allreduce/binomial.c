/* All-reduce "binomial": reduce to rank 0 along a binomial tree, then
 * broadcast the sum back down the same tree.
 *
 * Reduce, mask = 1, 2, 4, ...: a rank with bit mask set sends its partial
 * sum to rank - mask and is done; the others receive from rank + mask (when
 * it exists) and add. Broadcast: each rank receives from the parent it sent
 * to and forwards to rank + mask for decreasing masks. The tree and the
 * order of the additions are fixed, so the result is deterministic; rank 0
 * computes it and everyone gets a copy.
 *
 * Restrictions: none. Reference: the binomial-tree MPI_Reduce and MPI_Bcast
 * of MPICH (Thakur, Rabenseifner and Gropp, IJHPCA 2005).
 *
 * Cost, P ranks and n bytes (latency alpha, per-byte transfer beta, per-byte
 * reduction gamma):
 *     2 ceil(log2 P) alpha + 2 ceil(log2 P) n beta + ceil(log2 P) n gamma.
 * Whole buffers on every step: good for short messages, log2(P) times the
 * traffic of ring or rhd for long ones. Scratch: n floats. */
#include "comm.h"

st_status st_allreduce_binomial(float *buf, size_t n, const st_comm *c,
                                st_allreduce_stats *stats, st_error *err)
{
    int p = c->size, r = c->rank;
    ar_call call;
    st_status st = ar_begin(&call, "binomial", n, st_allreduce_scratch_count(n), c, stats, err);
    if (st != ST_OK || p == 1)
        goto done;
    int mask = 1;
    for (; mask < p; mask *= 2) {
        if (r & mask) {
            st = ar_exchange(&call, buf, n, r - mask, NULL, 0, MPI_PROC_NULL);
            break;
        }
        if (r + mask < p) {
            st = ar_exchange(&call, NULL, 0, MPI_PROC_NULL, call.scratch, n, r + mask);
            if (st != ST_OK)
                goto done;
            ar_sum(&call, buf, call.scratch, n);
        }
    }
    if (st != ST_OK)
        goto done;
    /* mask is now the bit this rank received on (P rounded up to a power of
     * two for rank 0): it receives the sum there and sends on lower bits. */
    if (r != 0) {
        st = ar_exchange(&call, NULL, 0, MPI_PROC_NULL, buf, n, r - mask);
        if (st != ST_OK)
            goto done;
    }
    for (mask /= 2; mask >= 1; mask /= 2) {
        if (r + mask < p) {
            st = ar_exchange(&call, buf, n, r + mask, NULL, 0, MPI_PROC_NULL);
            if (st != ST_OK)
                goto done;
        }
    }
done:
    return ar_end(&call, st);
}
