/* cluster.h on one node without MPI, as libuv builds a stub where a
 * platform lacks a feature: the trainer, the scheduler and their tests link
 * this file and no MPI library. There is never a cluster object (st_cluster
 * NULL is one node), so the calls that move data have nothing to move; the
 * options are checked as in cluster_mpi.c. The binary links cluster_mpi.c
 * and the files beside it that cluster_mpi.h lists. */
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "cluster_internal.h"

st_status st_cluster_init(st_cluster **out, int *argc, char ***argv, st_error *err)
{
    *out = NULL;
    if (st_cluster_launched())
        return st_fail(err, ST_EUSAGE, "started as one of %s ranks (mpirun), but this program "
                       "is built without MPI: run the singletrain binary", getenv("PMI_SIZE"));
    return ST_OK;
}

void st_cluster_free(st_cluster *c)
{
}

void st_cluster_abort(st_cluster *c, const st_error *err)
{
}

void st_cluster_set_timeout(st_cluster *c, double seconds)
{
}

int st_cluster_rank(const st_cluster *c)
{
    return 0;
}

int st_cluster_size(const st_cluster *c)
{
    return 1;
}

st_status st_cluster_configure(st_cluster *c, const st_cluster_opts *o, int *algorithm,
                               st_error *err)
{
    return st_cluster_check_opts(o, algorithm, err);
}

st_status st_cluster_agree(st_cluster *c, st_status local, const st_cluster_fingerprint *fp,
                           int *alike, st_error *err)
{
    *alike = 0;
    return local;
}

st_status st_cluster_outcome(st_cluster *c, st_status local, int *signal, st_error *err)
{
    return local;
}

/* One rank: the data calls below leave their buffers as they are (the sum
 * and the broadcast over one rank), as cluster_agree.c does for c NULL. */
st_status st_cluster_start_workers(st_cluster *c, int workers, st_error *err)
{
    return ST_OK;
}

st_status st_cluster_share_text(st_cluster *c, int ok, char **text, st_error *err)
{
    return ST_OK;
}

st_status st_cluster_measure_net(st_cluster *c, st_net_params *np, st_error *err)
{
    return st_fail(err, ST_EINTERNAL, "measuring the network needs several ranks (mpirun)");
}

st_status st_cluster_clock_origin(st_cluster *c, double *origin, st_error *err)
{
    *origin = st_now();
    return ST_OK;
}

st_status st_cluster_gather_text(st_cluster *c, const char *text, size_t len, char **all,
                                 size_t *all_len, st_error *err)
{
    return st_cluster_copy_text(text, len, all, all_len, err);
}

st_status st_cluster_broadcast(st_cluster *c, float *x, size_t n, st_error *err)
{
    return ST_OK;
}

st_status st_cluster_control(st_cluster *c, int w, double *values, int n, int patient,
                             st_error *err)
{
    return ST_OK;
}

st_status st_cluster_allreduce(st_cluster *c, int w, long it, float *buf, size_t n,
                               st_error *err)
{
    return ST_OK;
}

const char *st_cluster_algorithm(const st_cluster *c, int w)
{
    return "none";
}

void st_cluster_label(st_cluster *c, int w, const char *label)
{
}

void st_cluster_report(const st_cluster *c, long iterations, st_cluster_print_fn print,
                       void *ctx)
{
}

st_status st_cluster_reduce_scatter(st_cluster *c, int w, long it, float *buf, size_t n,
                                    st_error *err)
{
    return ST_OK;
}

st_status st_cluster_allgather(st_cluster *c, int w, float *buf, size_t n, int *bad,
                               st_error *err)
{
    return ST_OK;
}

/* One rank owns every range whole, so its parts, range after range, are
 * the arena itself. */
st_status st_cluster_gather_parts(st_cluster *c, const size_t *bounds, int ranges,
                                  const float *mine, size_t owned, int planes, float *full,
                                  st_error *err)
{
    memcpy(full, mine, owned * (size_t)planes * sizeof *full);
    return ST_OK;
}

st_status st_cluster_scatter_parts(st_cluster *c, const size_t *bounds, int ranges,
                                   const float *full, float *mine, size_t owned, int planes,
                                   st_error *err)
{
    memcpy(mine, full, owned * (size_t)planes * sizeof *mine);
    return ST_OK;
}

/* One rank is never split: set-up refuses --mp-group without mpirun. */
st_status st_cluster_mp_split(st_cluster *c, int G, st_error *err)
{
    return st_fail(err, ST_EINTERNAL, "--mp-group %d: model-parallel groups need mpirun", G);
}

st_status st_cluster_mp_allgather(st_cluster *c, const float *mine, float *all,
                                  const int *counts, const int *displs, st_error *err)
{
    return st_fail(err, ST_EINTERNAL, "no model-parallel groups on one node");
}

st_status st_cluster_mp_alltoall(st_cluster *c, const float *send, const int *scounts,
                                 const int *sdispls, float *recv, const int *rcounts,
                                 const int *rdispls, st_error *err)
{
    return st_fail(err, ST_EINTERNAL, "no model-parallel groups on one node");
}

st_status st_cluster_mp_reduce_scatter(st_cluster *c, const float *all, float *mine,
                                       const int *counts, st_error *err)
{
    return st_fail(err, ST_EINTERNAL, "no model-parallel groups on one node");
}

st_status st_cluster_mp_block_allreduce(st_cluster *c, float *buf, size_t n, st_error *err)
{
    return st_fail(err, ST_EINTERNAL, "no model-parallel groups on one node");
}

st_status st_cluster_mp_gather(st_cluster *c, float *buf, const int *counts, const int *displs,
                               st_error *err)
{
    return st_fail(err, ST_EINTERNAL, "no model-parallel groups on one node");
}
