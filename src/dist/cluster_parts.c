/* Data split over the ranks, over MPI_COMM_WORLD and the model-parallel
 * group's communicators: the partitioned solver state's parts
 * (--rank-update partitioned) gathered on rank 0 and scattered from it,
 * range by range as st_allreduce_part cuts them; and --mp-group G's
 * groups, their collectives on the fully connected layers' inputs,
 * outputs and gradients, and the all-reduce of a block over the ranks
 * holding it. A failure ends every rank (the others would wait). */
#include "cluster_mpi.h"

#include <limits.h>
#include <stdlib.h>

/* Whether every range fits MPI's int counts; else ST_EINTERNAL (the same
 * on every rank: the ranges are). */
static st_status check_ranges(const size_t *bounds, int ranges, st_error *err)
{
    for (int s = 0; s < ranges; s++)
        if (bounds[s + 1] - bounds[s] > (size_t)INT_MAX)
            return st_fail(err, ST_EINTERNAL, "a slice of %zu floats: the solver state's parts "
                           "move in messages of at most %d", bounds[s + 1] - bounds[s],
                           INT_MAX);
    return ST_OK;
}

/* Range s's parts: counts[q] and displs[q] (from the range's start) of
 * every rank q, and this rank's count. */
static void range_parts(const st_cluster *c, size_t len, int *counts, int *displs, int *mine)
{
    for (int q = 0; q < c->size; q++) {
        size_t start, count;
        st_allreduce_part(len, c->size, q, &start, &count);
        counts[q] = (int)count;
        displs[q] = (int)start;
    }
    *mine = counts[c->rank];
}

/* Gather (way 1) or scatter (way -1) of the parts, range by range; mine
 * is written only by the scatter, full only by the gather. */
static st_status move_parts(st_cluster *c, const size_t *bounds, int ranges, float *mine,
                            size_t owned, int planes, float *full, int way, st_error *err)
{
    st_status st = check_ranges(bounds, ranges, err);
    int *counts = NULL, *displs = NULL;
    if (st == ST_OK) {
        counts = calloc((size_t)c->size, sizeof *counts);
        displs = calloc((size_t)c->size, sizeof *displs);
        if (!counts || !displs)
            st = st_fail(err, ST_ENOMEM, "out of memory for the ranks' parts of the solver "
                         "state");
    }
    const char *what = way > 0 ? "gathering the solver state's parts on rank 0"
                               : "scattering rank 0's solver state in parts";
    size_t count = bounds[ranges];
    int patient = way > 0 && c->rank != 0;
    for (int k = 0; st == ST_OK && k < planes; k++) {
        size_t local = 0;
        for (int s = 0; st == ST_OK && s < ranges; s++) {
            int n;
            range_parts(c, bounds[s + 1] - bounds[s], counts, displs, &n);
            float *part = mine + (size_t)k * owned + local;
            float *range = c->rank == 0 ? full + (size_t)k * count + bounds[s] : NULL;
            MPI_Request request;
            int rc = way > 0 ? MPI_Igatherv(part, n, MPI_FLOAT, range, counts, displs,
                                            MPI_FLOAT, 0, MPI_COMM_WORLD, &request)
                             : MPI_Iscatterv(range, counts, displs, MPI_FLOAT, part, n,
                                             MPI_FLOAT, 0, MPI_COMM_WORLD, &request);
            if (rc != MPI_SUCCESS)
                st = st_fail(err, ST_EIO, "%s: MPI error %d", what, rc);
            else
                st = cluster_wait(c, &c->world, &request, patient, what, err);
            local += (size_t)n;
        }
    }
    free(counts);
    free(displs);
    if (st != ST_OK)
        st_cluster_abort(c, err); /* the others may wait for this rank */
    return st;
}

st_status st_cluster_gather_parts(st_cluster *c, const size_t *bounds, int ranges,
                                  const float *mine, size_t owned, int planes, float *full,
                                  st_error *err)
{
    return move_parts(c, bounds, ranges, (float *)mine, owned, planes, full, 1, err);
}

st_status st_cluster_scatter_parts(st_cluster *c, const size_t *bounds, int ranges,
                                   const float *full, float *mine, size_t owned, int planes,
                                   st_error *err)
{
    return move_parts(c, bounds, ranges, mine, owned, planes, (float *)full, -1, err);
}

st_status st_cluster_mp_split(st_cluster *c, int G, st_error *err)
{
    if (G < 1 || c->size % G)
        return st_fail(err, ST_EUSAGE, "--mp-group %d: expected a divisor of the %d ranks", G,
                       c->size);
    c->mp_size = G;
    if (MPI_Comm_split(MPI_COMM_WORLD, c->rank / G, c->rank, &c->mp_group) != MPI_SUCCESS ||
        MPI_Comm_split(MPI_COMM_WORLD, c->rank % G, c->rank, &c->mp_block) != MPI_SUCCESS)
        return st_fail(err, ST_EIO, "MPI_Comm_split of the model-parallel groups failed");
    return ST_OK;
}

/* Wait for one of the model-parallel collectives; a failure ends every
 * rank (the group would wait for this one). */
static st_status mp_wait(st_cluster *c, int rc, MPI_Request *request, int patient,
                         const char *what, st_error *err)
{
    st_status st = rc == MPI_SUCCESS
                       ? cluster_wait(c, &c->world, request, patient, what, err)
                       : st_fail(err, ST_EIO, "%s failed (MPI error %d)", what, rc);
    if (st != ST_OK)
        st_cluster_abort(c, err);
    return st;
}

/* The floats this rank receives of counts [G], its own part left out. */
static double mp_received(const st_cluster *c, const int *counts)
{
    double n = 0.0;
    for (int k = 0; k < c->mp_size; k++)
        n += k == c->rank % c->mp_size ? 0.0 : counts[k];
    return n;
}

st_status st_cluster_mp_allgather(st_cluster *c, const float *mine, float *all,
                                  const int *counts, const int *displs, st_error *err)
{
    MPI_Request request;
    int me = c->rank % c->mp_size;
    c->mp_exchanged += mp_received(c, counts);
    return mp_wait(c, MPI_Iallgatherv(mine, counts[me], MPI_FLOAT, all, counts, displs,
                                      MPI_FLOAT, c->mp_group, &request),
                   &request, 0, "the model-parallel layer input's all-gather", err);
}

st_status st_cluster_mp_alltoall(st_cluster *c, const float *send, const int *scounts,
                                 const int *sdispls, float *recv, const int *rcounts,
                                 const int *rdispls, st_error *err)
{
    MPI_Request request;
    c->mp_exchanged += mp_received(c, rcounts);
    return mp_wait(c, MPI_Ialltoallv(send, scounts, sdispls, MPI_FLOAT, recv, rcounts, rdispls,
                                     MPI_FLOAT, c->mp_group, &request),
                   &request, 0, "the model-parallel layer's all-to-all", err);
}

st_status st_cluster_mp_reduce_scatter(st_cluster *c, const float *all, float *mine,
                                       const int *counts, st_error *err)
{
    MPI_Request request;
    int me = c->rank % c->mp_size;
    c->mp_exchanged += (double)counts[me] * (c->mp_size - 1);
    return mp_wait(c, MPI_Ireduce_scatter(all, mine, counts, MPI_FLOAT, MPI_SUM, c->mp_group,
                                          &request),
                   &request, 0, "the model-parallel layer input gradient's reduce-scatter",
                   err);
}

st_status st_cluster_mp_block_allreduce(st_cluster *c, float *buf, size_t n, st_error *err)
{
    int q = c->size / c->mp_size;
    if (q == 1)
        return ST_OK;
    if (n > (size_t)INT_MAX)
        return st_fail(err, ST_EINTERNAL, "a model-parallel block of %zu floats: at most %d",
                       n, INT_MAX);
    MPI_Request request;
    c->mp_reduced += 2.0 * (double)n * (q - 1) / q; /* what a ring's sends (MPI's own) */
    return mp_wait(c, MPI_Iallreduce(MPI_IN_PLACE, buf, (int)n, MPI_FLOAT, MPI_SUM, c->mp_block,
                                     &request),
                   &request, 0, "the model-parallel block's all-reduce", err);
}

st_status st_cluster_mp_gather(st_cluster *c, float *buf, const int *counts, const int *displs,
                               st_error *err)
{
    MPI_Request request;
    int me = c->rank % c->mp_size;
    const void *mine = me == 0 ? MPI_IN_PLACE : (const void *)(buf + displs[me]);
    return mp_wait(c, MPI_Igatherv(mine, counts[me], MPI_FLOAT, buf, counts, displs, MPI_FLOAT,
                                   0, c->mp_group, &request),
                   &request, c->rank != 0, "gathering the model-parallel blocks on rank 0",
                   err);
}
