/* The workers' channels across the ranks: a communicator each (worker w
 * all-reduces slice w of the gradient on its own, so the slices travel at
 * once), and what runs on them every iteration: the control sums, the
 * all-reduce, and with --rank-update partitioned its two halves. Under
 * --allreduce auto the algorithm of each call is the probe's
 * (cluster_probe.c). */
#include "cluster_mpi.h"

#include <stdio.h>
#include <stdlib.h>

#include "base/cores.h"

#define MAX_WORKERS 4096
/* Waiting ranks poll and sleep this long between polls when the node's
 * ranks x workers outnumber its cores (spinning would take the core from
 * the peer being waited for: a 4 KB all-reduce took 50 ms that way). */
#define OVERSUBSCRIBED_SLEEP_US 20

st_status st_cluster_start_workers(st_cluster *c, int workers, st_error *err)
{
    if (workers < 1 || workers > MAX_WORKERS)
        return st_fail(err, ST_EUSAGE, "%d workers: expected 1 to %d", workers, MAX_WORKERS);
    c->w = calloc((size_t)workers, sizeof *c->w);
    if (!c->w)
        return st_fail(err, ST_ENOMEM, "out of memory for the workers' communicators");
    c->workers = workers;
    for (int w = 0; w < workers; w++)
        c->w[w].comm = MPI_COMM_NULL;
    MPI_Comm node;
    int local = 1;
    if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) ==
        MPI_SUCCESS) {
        MPI_Comm_size(node, &local);
        MPI_Comm_free(&node);
    }
    int sleep_us = local * workers > st_usable_cores() ? OVERSUBSCRIBED_SLEEP_US : 0;
    for (int w = 0; w < workers; w++) {
        cluster_worker *cw = &c->w[w];
        if (MPI_Comm_dup(MPI_COMM_WORLD, &cw->comm) != MPI_SUCCESS)
            return st_fail(err, ST_EIO, "MPI_Comm_dup failed for worker %d", w);
        st_status st = st_comm_init(&cw->c, cw->comm, c->o.supernode_size,
                                    c->o.sim_cross_bandwidth, err);
        if (st != ST_OK)
            return st;
        cw->c.idle_sleep_us = sleep_us;
        cw->c.timeout_seconds = c->timeout;
        cw->algorithm = c->algorithm;
        cw->last_algorithm = -1;
    }
    return cluster_probe_start(c, err);
}

st_status st_cluster_control(st_cluster *c, int w, double *values, int n, int patient,
                             st_error *err)
{
    MPI_Request request;
    if (MPI_Iallreduce(MPI_IN_PLACE, values, n, MPI_DOUBLE, MPI_SUM, c->w[w].comm, &request) !=
        MPI_SUCCESS)
        return st_fail(err, ST_EIO, "worker %d: MPI_Iallreduce of the iteration's control "
                       "values failed", w);
    char what[64];
    snprintf(what, sizeof what, "worker %d, the iteration's control sum", w);
    return cluster_wait(c, &c->w[w].c, &request, patient, what, err);
}

/* Worker w's all-reduce of buf [n] at iteration it, or (half) its first
 * half, the reduce-scatter, whose algorithm and time the all-gather of the
 * same iteration takes up. */
static st_status run_algorithm(st_cluster *c, int w, long it, float *buf, size_t n, int half,
                               st_error *err)
{
    cluster_worker *cw = &c->w[w];
    int algorithm;
    st_status st = cluster_probe_pick(c, w, it, n, &algorithm, err);
    if (st != ST_OK)
        return st;
    const st_allreduce_algo *a = &st_allreduce_algos[algorithm];
    double t0 = MPI_Wtime();
    cw->last_algorithm = algorithm;
    st = (half ? a->reduce_scatter : a->run)(buf, n, &cw->c, &cw->stats, err);
    double seconds = MPI_Wtime() - t0;
    if (half) {
        cw->half_algorithm = algorithm;
        cw->half_seconds = seconds;
    } else if (st == ST_OK) {
        cluster_probe_record(cw, algorithm, seconds);
    }
    if (st != ST_OK)
        st_error_prefix(err, "worker %d, --allreduce %s%s: ", w, a->name,
                        half ? ", reduce-scatter" : "");
    return st;
}

st_status st_cluster_allreduce(st_cluster *c, int w, long it, float *buf, size_t n,
                               st_error *err)
{
    return run_algorithm(c, w, it, buf, n, 0, err);
}

st_status st_cluster_reduce_scatter(st_cluster *c, int w, long it, float *buf, size_t n,
                                    st_error *err)
{
    return run_algorithm(c, w, it, buf, n, 1, err);
}

st_status st_cluster_allgather(st_cluster *c, int w, float *buf, size_t n, int *bad,
                               st_error *err)
{
    cluster_worker *cw = &c->w[w];
    int algorithm = cw->half_algorithm;
    int mine = *bad != 0, any = 0;
    MPI_Request request;
    if (MPI_Iallreduce(&mine, &any, 1, MPI_INT, MPI_MAX, cw->comm, &request) != MPI_SUCCESS)
        return st_fail(err, ST_EIO, "worker %d: MPI_Iallreduce of the parts' finiteness flag "
                       "failed", w);
    double t0 = MPI_Wtime();
    st_status st = st_allreduce_algos[algorithm].allgather(buf, n, &cw->c, &cw->stats, err);
    if (st != ST_OK) {
        st_error_prefix(err, "worker %d, --allreduce %s, all-gather: ", w,
                        st_allreduce_algos[algorithm].name);
        return st; /* the caller ends every rank; the flag's request goes with them */
    }
    cluster_probe_record(cw, algorithm, cw->half_seconds + MPI_Wtime() - t0);
    char what[64];
    snprintf(what, sizeof what, "worker %d, the parts' finiteness flag", w);
    st = cluster_wait(c, &cw->c, &request, 0, what, err);
    if (st == ST_OK)
        *bad = any;
    return st;
}
