/* All-reduce "rhd-supernode": rhd (rhd.c) over the ranks renumbered
 * round-robin across supernodes, so that the large messages stay inside a
 * supernode; its reduce-scatter and all-gather halves too.
 *
 * Physical rank p is member m = p mod Q of supernode s = p / Q. The logical
 * order lists member 0 of every supernode, then member 1 of every
 * supernode, and so on (skipping members a partial last supernode lacks):
 * with S = P/Q supernodes, logical rank l = m S + s. Recursive halving
 * pairs logical ranks at distance P/2, P/4, ..., S, which differ only in m
 * and so are in the same supernode, before the distances S/2, ..., 1 that
 * cross; those carry the n/P-sized end of the halving (and the start of the
 * doubling), so each rank sends 2 (S-1)/P n = 2 (P/Q - 1)/P n bytes across
 * instead of rhd's 2 (P-Q)/P n. The halves on their own leave block q on
 * physical rank q, as every algorithm's do: the halving leaves block l on
 * logical rank l, so one more exchange of n/P moves it to physical rank l
 * (and back, before the doubling).
 *
 * Restrictions: none; the renumbering is exact when Q divides P and both are
 * powers of two. Otherwise it is still correct and deterministic, but the
 * fold of a non-power-of-two P pairs logical neighbours, which are in
 * different supernodes, so the fold and unfold (n bytes each) cross. Q = 0
 * or Q >= P is one supernode: the order is the identity and this is rhd.
 * Reference: the topology-aware all-reduce of swCaffe (Li et al., "swCaffe:
 * a parallel framework for accelerating deep learning applications on
 * Sunway TaihuLight", IEEE Cluster 2018).
 *
 * Cost, P and Q powers of two, Q | P, n bytes (latency alpha, per-byte
 * transfer beta_in inside a supernode and beta_x across, per-byte
 * reduction gamma):
 *     2 log2(P) alpha + 2 (P - P/Q)/P n beta_in + 2 (P/Q - 1)/P n beta_x
 *     + (P-1)/P n gamma,
 * against rhd's 2 (Q-1)/P n beta_in + 2 (P-Q)/P n beta_x; the halves on
 * their own add alpha + n/P beta each for the move to and from physical
 * order (across a supernode boundary for most ranks). Scratch: as rhd,
 * plus P ints for the order. */
#include "comm.h"

#include <stdlib.h>

/* order[l] = physical rank of logical rank l, round-robin over supernodes. */
static void round_robin_order(int p, int q, int *order)
{
    if (q <= 0 || q > p)
        q = p;
    int supernodes = (p + q - 1) / q, l = 0;
    for (int m = 0; m < q; m++)
        for (int s = 0; s < supernodes; s++)
            if (s * q + m < p)
                order[l++] = s * q + m;
}

typedef st_status (*rhd_phase_fn)(ar_call *call, float *buf, size_t n, const int *order);

/* One rhd phase over the round-robin order; scratch floats as rhd's. */
static st_status run_ordered(const char *algo, rhd_phase_fn phase, size_t scratch, float *buf,
                             size_t n, const st_comm *c, st_allreduce_stats *stats,
                             st_error *err)
{
    int *order = NULL;
    ar_call call;
    st_status st = ar_begin(&call, algo, n, scratch, c, stats, err);
    if (st != ST_OK || c->size == 1)
        goto done;
    order = st_calloc((size_t)c->size, sizeof *order, "the rhd-supernode rank order", err);
    if (!order) {
        st = ST_ENOMEM;
        goto done;
    }
    round_robin_order(c->size, c->supernode_size, order);
    st = phase(&call, buf, n, order);
done:
    free(order);
    return ar_end(&call, st);
}

st_status st_allreduce_rhd_supernode(float *buf, size_t n, const st_comm *c,
                                     st_allreduce_stats *stats, st_error *err)
{
    return run_ordered("rhd-supernode", ar_rhd_allreduce, st_allreduce_scratch_count(n), buf,
                       n, c, stats, err);
}

st_status st_reduce_scatter_rhd_supernode(float *buf, size_t n, const st_comm *c,
                                          st_allreduce_stats *stats, st_error *err)
{
    return run_ordered("rhd-supernode (reduce-scatter)", ar_rhd_reduce_scatter,
                       st_allreduce_scratch_count(n), buf, n, c, stats, err);
}

st_status st_allgather_rhd_supernode(float *buf, size_t n, const st_comm *c,
                                     st_allreduce_stats *stats, st_error *err)
{
    return run_ordered("rhd-supernode (all-gather)", ar_rhd_allgather, 0, buf, n, c, stats,
                       err);
}
