/* The all-reduce algorithms' alpha-beta-gamma costs (allreduce_cost.h):
 * each case is the formula its file's header gives, with the bytes that
 * cross supernodes at cross_beta; and the exchange of a layer split over a
 * group of ranks (--mp-group). MPI-free: in the library, not the MPI
 * module. */
#include "dist/allreduce_cost.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>

#include "dist/allreduce_algos.h"

#define INDEX_OF(fn, name, reduce_scatter, allgather, summary) AR_COST_##fn,
enum { ST_ALLREDUCE_ALGOS(INDEX_OF) AR_COST_COUNT };
#undef INDEX_OF

/* The largest power of two <= p (p >= 1). */
static int floor_pow2(int p)
{
    int q = 1;
    while (q <= p / 2)
        q *= 2;
    return q;
}

/* ceil(log2 p), p >= 1. */
static int ceil_log2(int p)
{
    int l = 0;
    while ((1L << l) < p)
        l++;
    return l;
}

/* Whether p ranks span several supernodes. */
static int crosses(int p, const st_net_params *np)
{
    return np->supernode > 0 && np->supernode < p;
}

/* Transfer time of `inside` bytes inside supernodes and `across` bytes
 * between them. */
static double move(const st_net_params *np, double inside, double across)
{
    return inside * np->beta + across * np->cross_beta;
}

/* rhd's fold and unfold when p is not a power of two: 2 alpha + 2 n beta +
 * n gamma, the fold pairing neighbours (crossing when the supernodes are
 * that small, Q = 1). */
static double fold(int p, double n, const st_net_params *np)
{
    if (floor_pow2(p) == p)
        return 0.0;
    int x = crosses(p, np) && np->supernode == 1;
    return 2 * np->alpha + move(np, x ? 0 : 2 * n, x ? 2 * n : 0) + n * np->gamma;
}

/* rhd (rhd.c) over p ranks; supernode_order: rhd-supernode's renumbering
 * (rhd_supernode.c), which sends 2 (P/Q - 1)/P n across instead of
 * 2 (P - Q)/P n. */
static double rhd(int p, double n, const st_net_params *np, int supernode_order)
{
    int q = floor_pow2(p);
    double share = (double)(q - 1) / q;
    double moved = 2 * share * n, across = 0.0;
    if (crosses(q, np)) {
        double qs = np->supernode;
        across = supernode_order ? 2 * (q / qs - 1) / q * n : 2 * (q - qs) / q * n;
    }
    return 2 * ceil_log2(q) * np->alpha + move(np, moved - across, across) +
           share * n * np->gamma + fold(p, n, np);
}

/* butterfly.c: log2(P) whole-buffer exchanges, the last log2(P/Q) across. */
static double butterfly(int p, double n, const st_net_params *np)
{
    int q = floor_pow2(p), steps = ceil_log2(q);
    int across = crosses(q, np) ? ceil_log2(q / np->supernode) : 0;
    return steps * np->alpha + move(np, (steps - across) * n, across * n) +
           steps * n * np->gamma + fold(p, n, np);
}

/* binomial.c's tree moving m bytes over each of its ceil(log2 P) levels,
 * the levels of mask >= Q crossing: the transfer time. */
static double tree_levels(int p, double m, const st_net_params *np)
{
    int steps = ceil_log2(p);
    int across = crosses(p, np) ? ceil_log2((p + np->supernode - 1) / np->supernode) : 0;
    return move(np, (steps - across) * m, across * m);
}

/* onesided.c: k segments of m bytes pipelined through the trees, each
 * transfer 2 alpha (data and notification); the first segment up and
 * down, the others at rank 0's pace. */
static double onesided(int p, double n, const st_net_params *np)
{
    double segment = ST_ALLREDUCE_ONESIDED_SEGMENT_FLOATS * 4.0;
    double k = n > segment ? ceil(n / segment) : 1, m = n / k;
    int d = ceil_log2(p);
    double first = 4 * d * np->alpha + 2 * tree_levels(p, m, np) + d * m * np->gamma;
    return first + (k - 1) * (2 * np->alpha + tree_levels(p, m, np) + d * m * np->gamma);
}

double st_allreduce_cost(int algorithm, int p, double n, const st_net_params *np)
{
    if (p <= 1)
        return 0.0;
    double share = (double)(p - 1) / p;
    int x = crosses(p, np);
    switch (algorithm) {
    case AR_COST_mpi: /* MPICH: recursive doubling for short messages, else rhd */
        return n < ST_ALLREDUCE_MPI_SHORT_BYTES ? butterfly(p, n, np) : rhd(p, n, np, 0);
    case AR_COST_ring: /* every step waits for the ring's crossing link */
        return 2 * (p - 1) * np->alpha + move(np, x ? 0 : 2 * share * n, x ? 2 * share * n : 0) +
               share * n * np->gamma;
    case AR_COST_rhd:
        return rhd(p, n, np, 0);
    case AR_COST_rhd_supernode:
        return rhd(p, n, np, 1);
    case AR_COST_binomial: /* the steps of mask >= Q cross, both ways */
        return 2 * ceil_log2(p) * np->alpha + 2 * tree_levels(p, n, np) +
               ceil_log2(p) * n * np->gamma;
    case AR_COST_star: { /* rank 0's link: P - Q ranks outside its supernode */
        double outside = x ? p - np->supernode : 0;
        return 2 * (p - 1) * np->alpha + move(np, 2 * (p - 1 - outside) * n, 2 * outside * n) +
               (p - 1) * n * np->gamma;
    }
    case AR_COST_butterfly:
        return butterfly(p, n, np);
    case AR_COST_onesided:
        return onesided(p, n, np);
    }
    abort(); /* a row of ST_ALLREDUCE_ALGOS without its formula here */
}

int st_allreduce_cost_known(int algorithm)
{
    return algorithm != AR_COST_mpi;
}

int st_allreduce_candidates(int p, double bytes, const st_net_params *np, double within,
                            int *candidates, double *seconds)
{
    double cheapest = DBL_MAX;
    for (int a = 0; a < AR_COST_COUNT; a++) {
        seconds[a] = st_allreduce_cost(a, p, bytes, np);
        if (st_allreduce_cost_known(a) && seconds[a] < cheapest)
            cheapest = seconds[a];
    }
    int n = 0;
    for (int a = 0; a < AR_COST_COUNT; a++)
        if (!st_allreduce_cost_known(a) || seconds[a] <= within * cheapest)
            candidates[n++] = a;
    return n;
}

int st_allreduce_cheapest(int p, double bytes, const st_net_params *np, double *seconds)
{
    int best = 0;
    double best_s = DBL_MAX;
    for (int k = 1; k <= AR_COST_COUNT; k++) {
        int a = k % AR_COST_COUNT; /* mpi (0) last */
        double s = st_allreduce_cost(a, p, bytes, np);
        if (s < best_s) {
            best = a;
            best_s = s;
        }
    }
    *seconds = best_s;
    return best;
}

double st_mp_exchange_cost(int g, double in_bytes, double out_bytes, const st_net_params *np)
{
    if (g <= 1)
        return 0.0;
    double steps = g - 1;
    return steps * (np->alpha + np->beta * in_bytes) +
           steps * (np->alpha + (np->beta + np->gamma) * in_bytes) +
           2 * steps * (np->alpha + np->beta * out_bytes / g);
}
