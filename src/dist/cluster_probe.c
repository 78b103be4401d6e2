/* --allreduce auto's probe: what each worker's channel probes (the
 * candidates the cost formulas of allreduce_cost.h put near the cheapest,
 * on the network measured between ranks 0 and 1), the fastest call of
 * each candidate, and the choice, the slowest rank's fastest, the same on
 * every rank. cluster_allreduce.c asks it which algorithm each call runs
 * and tells it how long the call took. */
#include "cluster_mpi.h"

#include <float.h>
#include <string.h>

/* auto: the network the cost formulas see (st_comm_measure_net between
 * ranks 0 and 1, the same figures on every rank), with the supernodes of
 * --supernode-size and the crossing bandwidth of --sim-cross-bandwidth. */
static st_status measure_net(st_cluster *c, st_error *err)
{
    st_status st = st_comm_measure_net(&c->world, &c->net, err);
    if (st != ST_OK)
        return st;
    c->net.supernode = c->o.supernode_size;
    if (c->o.sim_cross_bandwidth > 0)
        c->net.cross_beta = c->net.beta / c->o.sim_cross_bandwidth;
    return ST_OK;
}

st_status cluster_probe_start(st_cluster *c, st_error *err)
{
    for (int w = 0; w < c->workers; w++) {
        c->w[w].probe_first = -1;
        for (size_t a = 0; a < st_allreduce_count; a++)
            c->w[w].probe_best[a] = DBL_MAX;
    }
    return c->algorithm < 0 ? measure_net(c, err) : ST_OK;
}

/* auto: after every candidate's probe iterations, the slowest rank's
 * fastest call decides (the same figures reach every rank, so every rank
 * picks the same). With model granularity the node's figure is its
 * slowest channel's (among those that sent: with --overlap the workers'
 * channels are idle); the channels' probes all ended an iteration ago,
 * behind the barriers since, so reading them here is safe. */
static st_status decide(st_cluster *c, cluster_worker *cw, int w, st_error *err)
{
    double local[16], slowest[16];
    memcpy(local, cw->probe_best, sizeof local);
    for (int k = 0; !c->per_layer && k < c->workers; k++)
        for (size_t a = 0; a < st_allreduce_count; a++) {
            double t = c->w[k].probe_best[a];
            if (t < DBL_MAX && (local[a] == DBL_MAX || t > local[a]))
                local[a] = t;
        }
    MPI_Request request;
    if (MPI_Iallreduce(local, slowest, (int)st_allreduce_count, MPI_DOUBLE, MPI_MAX, cw->comm,
                       &request) != MPI_SUCCESS)
        return st_fail(err, ST_EIO, "worker %d: MPI_Iallreduce of the probe times failed", w);
    st_status st = cluster_wait(c, &cw->c, &request, 0, "the all-reduce probe's times", err);
    if (st != ST_OK)
        return st;
    int best = cw->candidates[0];
    for (int k = 1; k < cw->n_candidates; k++)
        if (slowest[cw->candidates[k]] < slowest[best])
            best = cw->candidates[k];
    cw->algorithm = best;
    if (w == 0) {
        memcpy(c->probe_table, slowest, st_allreduce_count * sizeof slowest[0]);
        memcpy(c->predicted, cw->predicted, st_allreduce_count * sizeof slowest[0]);
        c->probed = 1;
    }
    return ST_OK;
}

st_status cluster_probe_pick(st_cluster *c, int w, long it, size_t n, int *algorithm,
                             st_error *err)
{
    cluster_worker *cw = &c->w[w];
    *algorithm = cw->algorithm;
    if (*algorithm >= 0)
        return ST_OK;
    long probe = c->o.probe_iterations;
    if (cw->probe_first < 0) { /* what to probe, by the cost formulas (those of plan):
                                  * every rank lists the same from the same figures */
        cw->probe_first = it;
        cw->n_candidates =
            st_allreduce_candidates(c->size, (double)n * sizeof(float), &c->net, PROBE_WITHIN,
                                    cw->candidates, cw->predicted);
    }
    long k = (it - cw->probe_first) / probe;
    if (k < (long)cw->n_candidates) {
        *algorithm = cw->candidates[k];
        return ST_OK;
    }
    st_status st = decide(c, cw, w, err);
    *algorithm = cw->algorithm;
    return st;
}

void cluster_probe_record(cluster_worker *cw, int algorithm, double seconds)
{
    if (cw->algorithm < 0 && seconds < cw->probe_best[algorithm])
        cw->probe_best[algorithm] = seconds;
}
