/* All-reduce "butterfly": recursive doubling that exchanges the whole
 * buffer, so every rank computes the whole sum itself.
 *
 * With P' the largest power of two <= P and rem = P - P', ranks 0..2 rem-1
 * fold first as in rhd.c (each even one sends its buffer to the odd one
 * above, which adds it and takes part as rank r/2; the even ones sit out),
 * the others take part as r - rem. Then, distance d = 1, 2, ..., P'/2:
 * partners whose new ranks differ in bit d swap their whole buffers and
 * both add. Each adds the lower rank's partial sum first (the one whose new
 * rank has bit d clear, then the other): the same two operands in the same
 * order on both, so both get the same bits. For numbers a + b and b + a
 * are the same float anyway; the fixed order also keeps a NaN's payload
 * the same on every rank, the first operand's being the one propagated.
 * After the last step every participant holds the sum, added in the same
 * tree on every rank; each odd folded rank then sends it to its even
 * neighbour. Deterministic and the same on every rank.
 *
 * Restrictions: none (any P). No natural reduce-scatter: as the
 * reduce-scatter half of --rank-update partitioned, this whole all-reduce
 * runs and each rank keeps its part; the all-gather half is the ring's
 * (allreduce_algos.h). Reference: the recursive-doubling all-reduce of
 * Thakur, Rabenseifner and Gropp, "Optimization of collective
 * communication operations in MPICH", IJHPCA 2005 (MPICH's choice for
 * short messages); the Tianhe-3 study that DESIGN.md cites probes it
 * among others.
 *
 * Cost, P ranks a power of two, n bytes (latency alpha, per-byte transfer
 * beta, per-byte reduction gamma):
 *     log2(P) alpha + log2(P) n beta + log2(P) n gamma;
 * otherwise the fold and unfold add 2 alpha + 2 n beta + n gamma on the
 * folded ranks, with P' in place of P above. Half the latency of rhd and
 * ring's 2 log2(P) and 2 (P-1) steps, but log2(P) / (2 (P-1)/P) times their
 * traffic: for short messages. With supernodes of Q consecutive ranks (Q
 * dividing P, both powers of two) the steps at distance d >= Q cross, the
 * last log2(P/Q): each rank sends log2(P/Q) n bytes across of its
 * log2(P) n (rhd: 2 (P-Q)/P n). Scratch: n floats. */
#include "comm.h"

#include <string.h>

/* Physical rank of the participant with new rank nr (the fold). */
static int physical_of_new(int nr, int rem)
{
    return nr < rem ? 2 * nr + 1 : nr + rem;
}

/* *mine holds this rank's partial sum and *other the partner's, just
 * received; add them lower first, leaving the sum in *mine (the two
 * buffers swap roles when the partner is the lower). */
static void add_lower_first(const ar_call *call, float **mine, float **other, int partner_lower,
                            size_t n)
{
    if (!partner_lower) {
        ar_sum(call, *mine, *other, n);
        return;
    }
    ar_sum(call, *other, *mine, n);
    float *sum = *other;
    *other = *mine;
    *mine = sum;
}

st_status st_allreduce_butterfly(float *buf, size_t n, const st_comm *c,
                                 st_allreduce_stats *stats, st_error *err)
{
    int p = c->size, r = c->rank;
    ar_call call;
    st_status st = ar_begin(&call, "butterfly", n, st_allreduce_scratch_count(n), c, stats, err);
    if (st != ST_OK || p == 1)
        goto done;
    int p2 = 1;
    while (p2 * 2 <= p)
        p2 *= 2;
    int rem = p - p2, nr;
    float *mine = buf, *other = call.scratch; /* this rank's partial sum, the partner's */
    if (r < 2 * rem && r % 2 == 0) {
        st = ar_exchange(&call, buf, n, r + 1, NULL, 0, MPI_PROC_NULL);
        nr = -1;
    } else if (r < 2 * rem) {
        st = ar_exchange(&call, NULL, 0, MPI_PROC_NULL, other, n, r - 1);
        if (st == ST_OK)
            add_lower_first(&call, &mine, &other, 1, n);
        nr = r / 2;
    } else {
        nr = r - rem;
    }
    for (int d = 1; st == ST_OK && nr >= 0 && d < p2; d *= 2) {
        int partner = physical_of_new(nr ^ d, rem);
        st = ar_exchange(&call, mine, n, partner, other, n, partner);
        if (st == ST_OK)
            add_lower_first(&call, &mine, &other, (nr & d) != 0, n);
    }
    if (st == ST_OK && r < 2 * rem)
        st = r % 2 ? ar_exchange(&call, mine, n, r - 1, NULL, 0, MPI_PROC_NULL)
                   : ar_exchange(&call, NULL, 0, MPI_PROC_NULL, buf, n, r + 1);
    if (st == ST_OK && mine != buf)
        memcpy(buf, mine, n * sizeof *buf);
done:
    return ar_end(&call, st);
}
