/* The multi-node mode over MPICH (cluster.h), its core: MPI's lifetime,
 * the options, waiting for the peers with --peer-timeout, and the abort
 * that ends every rank. The other jobs are files of their own
 * (cluster_mpi.h lists them); the binary that mpirun starts links them
 * all, single-node builds link cluster_single.c instead. */
#include "cluster_mpi.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cluster_internal.h"

/* auto: every candidate runs this many iterations unless told otherwise. */
#define DEFAULT_PROBE_ITERATIONS 3

st_status st_cluster_init(st_cluster **out, int *argc, char ***argv, st_error *err)
{
    *out = NULL;
    if (!st_cluster_launched())
        return ST_OK;
    int provided = 0;
    if (MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS)
        return st_fail(err, ST_EIO, "MPI_Init_thread failed");
    if (provided < MPI_THREAD_MULTIPLE) {
        MPI_Finalize();
        return st_fail(err, ST_EIO, "the MPI library gives thread level %d, the workers need "
                       "MPI_THREAD_MULTIPLE (%d)", provided, MPI_THREAD_MULTIPLE);
    }
    st_cluster *c = st_calloc(1, sizeof *c, "cluster", err);
    if (!c) {
        MPI_Finalize();
        return ST_ENOMEM;
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &c->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &c->size);
    c->algorithm = -1;
    c->world.comm = MPI_COMM_WORLD;
    c->world.rank = c->rank;
    c->world.size = c->size;
    c->mp_group = c->mp_block = MPI_COMM_NULL;
    *out = c;
    return ST_OK;
}

void st_cluster_set_timeout(st_cluster *c, double seconds)
{
    if (c)
        c->timeout = c->world.timeout_seconds = seconds;
}

st_status cluster_wait(const st_cluster *c, const st_comm *comm, MPI_Request *request,
                       int patient, const char *what, st_error *err)
{
    int rc = st_comm_wait(comm, 1, request, patient ? 0.0 : c->timeout);
    if (rc == ST_COMM_TIMEOUT)
        return st_fail(err, ST_EIO, "%s: no word from the other ranks for %g s (a rank "
                       "stopped, hung or is lost; --peer-timeout sets how long to wait): "
                       "ending every rank", what, c->timeout);
    if (rc != MPI_SUCCESS)
        return st_fail(err, ST_EIO, "%s failed (MPI error %d)", what, rc);
    return ST_OK;
}

void st_cluster_free(st_cluster *c)
{
    if (!c)
        return;
    for (int w = 0; w < c->workers && c->w; w++) {
        st_comm_free(&c->w[w].c); /* collective: the one-sided algorithm's window */
        if (c->w[w].comm != MPI_COMM_NULL)
            MPI_Comm_free(&c->w[w].comm);
    }
    free(c->w);
    if (c->mp_group != MPI_COMM_NULL)
        MPI_Comm_free(&c->mp_group);
    if (c->mp_block != MPI_COMM_NULL)
        MPI_Comm_free(&c->mp_block);
    free(c);
    MPI_Finalize();
}

/* How long the message waits before MPI_Abort: mpiexec's proxy reads a
 * rank's stderr pipe and its abort request in one event loop; handled in
 * the wrong order, the abort kills the job before the message is
 * forwarded (1 in 7 timed-out runs ended without a word). */
#define ABORT_MESSAGE_DELAY_NS 200000000L

void st_cluster_abort(st_cluster *c, const st_error *err)
{
    if (!c)
        return;
    fprintf(stderr, "singletrain: rank %d: %s\n", c->rank, err->msg);
    fflush(stdout);
    fflush(stderr);
    struct timespec pause = {0, ABORT_MESSAGE_DELAY_NS};
    while (nanosleep(&pause, &pause) != 0 && errno == EINTR)
        ;
    MPI_Abort(MPI_COMM_WORLD, 1);
}

int st_cluster_rank(const st_cluster *c)
{
    return c ? c->rank : 0;
}

int st_cluster_size(const st_cluster *c)
{
    return c ? c->size : 1;
}

st_status st_cluster_configure(st_cluster *c, const st_cluster_opts *o, int *algorithm,
                               st_error *err)
{
    st_status st = st_cluster_check_opts(o, algorithm, err);
    if (st != ST_OK || !c)
        return st;
    if (st_allreduce_count > sizeof c->probe_table / sizeof c->probe_table[0])
        return st_fail(err, ST_EINTERNAL, "more all-reduce algorithms than probe slots");
    c->o = *o;
    if (c->o.probe_iterations <= 0)
        c->o.probe_iterations = DEFAULT_PROBE_ITERATIONS;
    c->algorithm = *algorithm;
    c->per_layer = o->granularity && strcmp(o->granularity, "layer") == 0;
    return ST_OK;
}

st_status st_cluster_measure_net(st_cluster *c, st_net_params *np, st_error *err)
{
    if (!c)
        return st_fail(err, ST_EINTERNAL, "measuring the network needs several ranks");
    return st_comm_measure_net(&c->world, np, err);
}

