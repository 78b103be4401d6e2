/* All-reduce "rhd": Rabenseifner's algorithm, a recursive-halving
 * reduce-scatter followed by a recursive-doubling all-gather, over the
 * physical ranks in order, each half also on its own. rhd_supernode.c runs
 * the same code over a renumbering of the ranks.
 *
 * With P' the largest power of two <= P and rem = P - P': logical ranks
 * 0..2 rem-1 fold first (each even one sends its whole buffer to the odd one
 * above, which adds it and takes part as rank l/2; the even ones sit out),
 * the others take part as l - rem. The buffer is cut into P blocks, block b
 * being logical rank b's (ar_blocks); participant u's unit is the blocks of
 * the logical ranks it stands for (blocks 2u and 2u+1 for a folded pair,
 * block u + rem otherwise), so the units are P' contiguous ranges in order.
 * Reduce-scatter, distance d = P'/2, P'/4, ..., 1: each participant
 * exchanges with the partner whose new rank differs in bit d, sends the
 * half of its current unit range the partner keeps and adds the partner's
 * copy of the half it keeps (the lower half if its bit d is 0); it ends
 * owning the full sum of its unit. All-gather, d = 1, 2, ..., P'/2:
 * partners swap their ranges, which double. Unfold: each odd folded rank
 * sends the result to its even neighbour. Every block is summed in one
 * fixed order on one rank, so the result is deterministic and the same on
 * every rank.
 *
 * The halves on their own (reduce-scatter and all-gather, allreduce.h)
 * leave block q on rank q: after the halving an odd folded rank hands its
 * even neighbour that rank's block (n/P floats, not the whole sum), and
 * the all-gather starts by taking it back; over a renumbering
 * (rhd-supernode) logical rank l holds block l, which one more exchange
 * moves to physical rank l (and back, before the all-gather). The sums are
 * the all-reduce's, bit for bit.
 *
 * Restrictions: none (any P; n < P leaves some blocks empty). Reference:
 * Rabenseifner, "Optimization of collective reduction operations", ICCS
 * 2004; Thakur, Rabenseifner and Gropp, IJHPCA 2005.
 *
 * Cost, P ranks a power of two, n bytes (latency alpha, per-byte transfer
 * beta, per-byte reduction gamma):
 *     2 log2(P) alpha + 2 (P-1)/P n beta + (P-1)/P n gamma,
 * half of the alpha and beta terms for each half (the gamma term in the
 * reduce-scatter); otherwise the fold and unfold add 2 alpha + 2 n beta + n
 * gamma on the folded ranks, with P' in place of P above (the halves on
 * their own: alpha + (n + n/P) beta + n gamma and alpha + (n + n/P) beta).
 * With supernodes of Q consecutive ranks (Q dividing P, both powers of
 * two), the first log2(P/Q) halving steps (distance >= Q, the largest
 * messages) and the last doubling steps cross, so each rank sends
 * 2 (P-Q)/P n bytes across. Scratch: n floats for the fold (n/2 rounded up
 * without it); the all-gather needs none. */
#include "comm.h"

/* Where this rank stands in the algorithm. */
typedef struct rhd_plan {
    const int *order; /* logical rank l is physical rank order[l]; NULL: the identity */
    int p, p2, rem;   /* P, P' and P - P' */
    int me;           /* this rank's logical rank */
    int nr;           /* its new rank among the P' participants, -1 if it sits out */
} rhd_plan;

/* Physical rank of logical rank l. */
static int physical(const rhd_plan *pl, int l)
{
    return pl->order ? pl->order[l] : l;
}

/* Logical rank of the participant with new rank nr (see the fold above). */
static int logical_of_new(const rhd_plan *pl, int nr)
{
    return nr < pl->rem ? 2 * nr + 1 : nr + pl->rem;
}

static st_status plan(ar_call *call, const int *order, rhd_plan *pl)
{
    const st_comm *c = call->c;
    pl->order = order;
    pl->p = c->size;
    pl->me = 0;
    while (pl->me < pl->p && physical(pl, pl->me) != c->rank)
        pl->me++;
    if (pl->me == pl->p)
        return st_fail(call->err, ST_EINTERNAL, "all-reduce %s: rank %d is missing from the "
                       "rank order", call->algo, c->rank);
    pl->p2 = 1;
    while (pl->p2 * 2 <= pl->p)
        pl->p2 *= 2;
    pl->rem = pl->p - pl->p2;
    pl->nr = pl->me >= 2 * pl->rem ? pl->me - pl->rem : pl->me % 2 ? pl->me / 2 : -1;
    return ST_OK;
}

/* Floats of units [first, first + count) (their blocks are contiguous). */
static ar_range units(const rhd_plan *pl, size_t n, int first, int count)
{
    int b = first < pl->rem ? 2 * first : first + pl->rem;
    int e = first + count < pl->rem ? 2 * (first + count) : first + count + pl->rem;
    return ar_blocks(n, pl->p, b, e - b);
}

/* Logical block b's floats. */
static ar_range block(const rhd_plan *pl, size_t n, int b)
{
    return ar_blocks(n, pl->p, b, 1);
}

/* The fold: an even folded rank sends its buffer to the odd one above,
 * which adds it. */
static st_status fold(ar_call *call, const rhd_plan *pl, float *buf, size_t n)
{
    if (pl->me >= 2 * pl->rem)
        return ST_OK;
    if (pl->me % 2 == 0)
        return ar_exchange(call, buf, n, physical(pl, pl->me + 1), NULL, 0, MPI_PROC_NULL);
    st_status st = ar_exchange(call, NULL, 0, MPI_PROC_NULL, call->scratch, n,
                               physical(pl, pl->me - 1));
    if (st == ST_OK)
        ar_sum(call, buf, call->scratch, n);
    return st;
}

/* Recursive halving: the participant ends with the sum of its unit. */
static st_status halve(ar_call *call, const rhd_plan *pl, float *buf, size_t n)
{
    int nr = pl->nr, lo = 0; /* first unit of the range it reduces */
    for (int d = pl->p2 / 2; nr >= 0 && d >= 1; d /= 2) {
        int partner = physical(pl, logical_of_new(pl, nr ^ d));
        int keep_lo = nr & d ? lo + d : lo, give_lo = nr & d ? lo : lo + d;
        ar_range keep = units(pl, n, keep_lo, d), give = units(pl, n, give_lo, d);
        st_status st = ar_exchange(call, buf + give.start, give.count, partner, call->scratch,
                                   keep.count, partner);
        if (st != ST_OK)
            return st;
        ar_sum(call, buf + keep.start, call->scratch, keep.count);
        lo = keep_lo;
    }
    return ST_OK;
}

/* Recursive doubling: from its unit to the whole buffer. */
static st_status double_up(ar_call *call, const rhd_plan *pl, float *buf, size_t n)
{
    int nr = pl->nr, lo = nr; /* first unit of the range it holds */
    for (int d = 1; nr >= 0 && d < pl->p2; d *= 2) {
        int partner = physical(pl, logical_of_new(pl, nr ^ d));
        int partner_lo = lo ^ d;
        ar_range mine = units(pl, n, lo, d), theirs = units(pl, n, partner_lo, d);
        st_status st = ar_exchange(call, buf + mine.start, mine.count, partner,
                                   buf + theirs.start, theirs.count, partner);
        if (st != ST_OK)
            return st;
        lo = lo < partner_lo ? lo : partner_lo;
    }
    return ST_OK;
}

/* The unfold: an odd folded rank sends the result to the even one below. */
static st_status unfold(ar_call *call, const rhd_plan *pl, float *buf, size_t n)
{
    if (pl->me >= 2 * pl->rem)
        return ST_OK;
    if (pl->me % 2 == 1)
        return ar_exchange(call, buf, n, physical(pl, pl->me - 1), NULL, 0, MPI_PROC_NULL);
    return ar_exchange(call, NULL, 0, MPI_PROC_NULL, buf, n, physical(pl, pl->me + 1));
}

/* After the halving (way 1), or before the doubling (way -1): a folded
 * pair's even rank's block moves between it and the odd one. */
static st_status pass_folded_block(ar_call *call, const rhd_plan *pl, float *buf, size_t n,
                                   int way)
{
    if (pl->me >= 2 * pl->rem)
        return ST_OK;
    int even = pl->me - pl->me % 2, sends = (pl->me % 2 == 1) == (way > 0);
    ar_range b = block(pl, n, even);
    int peer = physical(pl, pl->me % 2 ? pl->me - 1 : pl->me + 1);
    if (sends)
        return ar_exchange(call, buf + b.start, b.count, peer, NULL, 0, MPI_PROC_NULL);
    return ar_exchange(call, NULL, 0, MPI_PROC_NULL, buf + b.start, b.count, peer);
}

/* Over a renumbering, after the reduce-scatter (way 1): logical rank me
 * holds block me, which belongs to physical rank me, while this rank's
 * block (its physical rank's) is on the rank whose logical rank that is;
 * way -1 moves them back. */
static st_status permute_blocks(ar_call *call, const rhd_plan *pl, float *buf, size_t n,
                                int way)
{
    int q = call->c->rank;
    if (!pl->order || pl->me == q)
        return ST_OK;
    ar_range held = block(pl, n, pl->me), own = block(pl, n, q);
    if (way > 0)
        return ar_exchange(call, buf + held.start, held.count, pl->me, buf + own.start,
                           own.count, pl->order[q]);
    return ar_exchange(call, buf + own.start, own.count, pl->order[q], buf + held.start,
                       held.count, pl->me);
}

/* What the all-reduce and the reduce-scatter share: the plan, the extra
 * ranks folded in, recursive halving (each rank then holds its block's
 * sum). */
static st_status fold_and_halve(ar_call *call, const int *order, rhd_plan *pl, float *buf,
                                size_t n)
{
    st_status st;
    if ((st = plan(call, order, pl)) || (st = fold(call, pl, buf, n)))
        return st;
    return halve(call, pl, buf, n);
}

st_status ar_rhd_allreduce(ar_call *call, float *buf, size_t n, const int *order)
{
    rhd_plan pl;
    st_status st;
    if ((st = fold_and_halve(call, order, &pl, buf, n)) || (st = double_up(call, &pl, buf, n)))
        return st;
    return unfold(call, &pl, buf, n);
}

st_status ar_rhd_reduce_scatter(ar_call *call, float *buf, size_t n, const int *order)
{
    rhd_plan pl;
    st_status st;
    if ((st = fold_and_halve(call, order, &pl, buf, n)) ||
        (st = pass_folded_block(call, &pl, buf, n, 1)))
        return st;
    return permute_blocks(call, &pl, buf, n, 1);
}

st_status ar_rhd_allgather(ar_call *call, float *buf, size_t n, const int *order)
{
    rhd_plan pl;
    st_status st;
    if ((st = plan(call, order, &pl)) || (st = permute_blocks(call, &pl, buf, n, -1)) ||
        (st = pass_folded_block(call, &pl, buf, n, -1)) || (st = double_up(call, &pl, buf, n)))
        return st;
    return unfold(call, &pl, buf, n);
}

st_status st_allreduce_rhd(float *buf, size_t n, const st_comm *c, st_allreduce_stats *stats,
                           st_error *err)
{
    ar_call call;
    st_status st = ar_begin(&call, "rhd", n, st_allreduce_scratch_count(n), c, stats, err);
    if (st == ST_OK && c->size > 1)
        st = ar_rhd_allreduce(&call, buf, n, NULL);
    return ar_end(&call, st);
}

st_status st_reduce_scatter_rhd(float *buf, size_t n, const st_comm *c,
                                st_allreduce_stats *stats, st_error *err)
{
    ar_call call;
    st_status st = ar_begin(&call, "rhd (reduce-scatter)", n, st_allreduce_scratch_count(n), c,
                            stats, err);
    if (st == ST_OK && c->size > 1)
        st = ar_rhd_reduce_scatter(&call, buf, n, NULL);
    return ar_end(&call, st);
}

st_status st_allgather_rhd(float *buf, size_t n, const st_comm *c, st_allreduce_stats *stats,
                           st_error *err)
{
    ar_call call;
    st_status st = ar_begin(&call, "rhd (all-gather)", n, 0, c, stats, err);
    if (st == ST_OK && c->size > 1)
        st = ar_rhd_allgather(&call, buf, n, NULL);
    return ar_end(&call, st);
}
