/* All-reduce "rhd": Rabenseifner's algorithm, a recursive-halving
 * reduce-scatter followed by a recursive-doubling all-gather, over the
 * physical ranks in order. rhd_supernode.c runs the same code over a
 * renumbering of the ranks.
 *
 * With P' the largest power of two <= P and rem = P - P': logical ranks
 * 0..2 rem-1 fold first (each even one sends its whole buffer to the odd one
 * above, which adds it and takes part as rank l/2; the even ones sit out),
 * the others take part as l - rem. The buffer is cut into P' blocks.
 * Reduce-scatter, distance d = P'/2, P'/4, ..., 1: each rank exchanges with
 * the partner whose new rank differs in bit d, sends the half of its current
 * block range the partner keeps and adds the partner's copy of the half it
 * keeps (the lower half if its bit d is 0); it ends owning the full sum of
 * block new-rank. All-gather, d = 1, 2, ..., P'/2: partners swap their
 * ranges, which double. Unfold: each odd folded rank sends the result to
 * its even neighbour. Every block is summed in one fixed order on one rank,
 * so the result is deterministic and the same on every rank.
 *
 * Restrictions: none (any P; n < P' leaves some blocks empty). Reference:
 * Rabenseifner, "Optimization of collective reduction operations", ICCS
 * 2004; Thakur, Rabenseifner and Gropp, IJHPCA 2005.
 *
 * Cost, P ranks a power of two, n bytes (latency alpha, per-byte transfer
 * beta, per-byte reduction gamma):
 *     2 log2(P) alpha + 2 (P-1)/P n beta + (P-1)/P n gamma;
 * otherwise the fold and unfold add 2 alpha + 2 n beta + n gamma on the
 * folded ranks, with P' in place of P above. With supernodes of Q
 * consecutive ranks (Q dividing P, both powers of two), the first log2(P/Q)
 * halving steps (distance >= Q, the largest messages) and the last
 * doubling steps cross, so each rank sends 2 (P-Q)/P n bytes across.
 * Scratch: n floats for the fold (n/2 rounded up without it). */
#include "algorithm.h"

/* Logical rank of the participant with new rank nr (see the fold above). */
static int logical_of_new(int nr, int rem)
{
    return nr < rem ? 2 * nr + 1 : nr + rem;
}

/* Physical rank of logical rank l; order NULL is the identity. */
static int physical(const int *order, int l)
{
    return order ? order[l] : l;
}

st_status ar_rhd_ordered(ar_call *call, float *buf, size_t n, const int *order)
{
    const st_comm *c = call->c;
    int p = c->size;
    int me = 0;
    while (me < p && physical(order, me) != c->rank)
        me++;
    if (me == p)
        return st_fail(call->err, ST_EINTERNAL, "all-reduce %s: rank %d is missing from the "
                       "rank order", call->algo, c->rank);
    int p2 = 1;
    while (p2 * 2 <= p)
        p2 *= 2;
    int rem = p - p2, nr;
    st_status st = ST_OK;
    if (me < 2 * rem) {
        if (me % 2 == 0) {
            st = ar_exchange(call, buf, n, physical(order, me + 1), NULL, 0, MPI_PROC_NULL);
            nr = -1;
        } else {
            st = ar_exchange(call, NULL, 0, MPI_PROC_NULL, call->scratch, n,
                             physical(order, me - 1));
            if (st == ST_OK)
                ar_sum(call, buf, call->scratch, n);
            nr = me / 2;
        }
        if (st != ST_OK)
            return st;
    } else {
        nr = me - rem;
    }
    if (nr >= 0) {
        int lo = 0; /* first block of the range this rank reduces, then holds */
        for (int d = p2 / 2; d >= 1; d /= 2) {
            int partner = physical(order, logical_of_new(nr ^ d, rem));
            int keep_lo = nr & d ? lo + d : lo, give_lo = nr & d ? lo : lo + d;
            ar_range keep = ar_blocks(n, p2, keep_lo, d), give = ar_blocks(n, p2, give_lo, d);
            st = ar_exchange(call, buf + give.start, give.count, partner, call->scratch,
                             keep.count, partner);
            if (st != ST_OK)
                return st;
            ar_sum(call, buf + keep.start, call->scratch, keep.count);
            lo = keep_lo;
        }
        for (int d = 1; d < p2; d *= 2) {
            int partner = physical(order, logical_of_new(nr ^ d, rem));
            int partner_lo = lo ^ d;
            ar_range mine = ar_blocks(n, p2, lo, d), theirs = ar_blocks(n, p2, partner_lo, d);
            st = ar_exchange(call, buf + mine.start, mine.count, partner, buf + theirs.start,
                             theirs.count, partner);
            if (st != ST_OK)
                return st;
            lo = lo < partner_lo ? lo : partner_lo;
        }
    }
    if (me < 2 * rem) {
        if (me % 2 == 1)
            st = ar_exchange(call, buf, n, physical(order, me - 1), NULL, 0, MPI_PROC_NULL);
        else
            st = ar_exchange(call, NULL, 0, MPI_PROC_NULL, buf, n, physical(order, me + 1));
    }
    return st;
}

st_status st_allreduce_rhd(float *buf, size_t n, const st_comm *c, st_allreduce_stats *stats,
                           st_error *err)
{
    ar_call call;
    st_status st = ar_begin(&call, "rhd", n, st_allreduce_scratch_count(n), c, stats, err);
    if (st == ST_OK && c->size > 1)
        st = ar_rhd_ordered(&call, buf, n, NULL);
    return ar_end(&call, st);
}
