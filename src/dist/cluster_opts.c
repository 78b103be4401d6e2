/* What cluster.h does the same with or without MPI: the options and the
 * set-up fingerprint (a mistyped --allreduce is an error on one node too),
 * and a gathered text's copy when there is one rank. */
#include <stdlib.h>
#include <string.h>

#include "cluster_internal.h"
#include "dist/allreduce_algos.h"

st_status st_cluster_check_opts(const st_cluster_opts *o, int *algorithm, st_error *err)
{
    *algorithm = -1;
    const char *g = o->granularity ? o->granularity : "model";
    if (strcmp(g, "model") != 0 && strcmp(g, "layer") != 0)
        return st_fail(err, ST_EUSAGE, "--allreduce-granularity %s: expected model or layer", g);
    if (strcmp(o->algorithm, "auto") != 0) {
        st_status st = st_allreduce_index(o->algorithm, algorithm, err);
        if (st != ST_OK)
            return st;
    }
    if (o->supernode_size < 0)
        return st_fail(err, ST_EUSAGE, "--supernode-size %d: expected ranks per supernode "
                       ">= 1, or 0 for none", o->supernode_size);
    if (!(o->sim_cross_bandwidth >= 0.0 && o->sim_cross_bandwidth <= 1.0))
        return st_fail(err, ST_EUSAGE, "--sim-cross-bandwidth %g: expected a fraction in (0, "
                       "1], or 0 for off", o->sim_cross_bandwidth);
    return ST_OK;
}

void st_cluster_fp_add(st_cluster_fingerprint *fp, const char *name, uint64_t value)
{
    if (fp->n >= ST_CLUSTER_FP_MAX)
        abort();
    fp->name[fp->n] = name;
    fp->value[fp->n++] = value;
}

void st_cluster_fp_add_double(st_cluster_fingerprint *fp, const char *name, double value)
{
    uint64_t bits;
    memcpy(&bits, &value, sizeof bits);
    st_cluster_fp_add(fp, name, bits);
}

int st_cluster_launched(void)
{
    const char *size = getenv("PMI_SIZE");
    return size && atoi(size) > 1;
}

int st_cluster_launched_ranks(void)
{
    return st_cluster_launched() ? atoi(getenv("PMI_SIZE")) : 1;
}

int st_cluster_local_rank(void)
{
    const char *id = getenv("MPI_LOCALRANKID");
    int r = id && st_cluster_launched() ? atoi(id) : 0;
    return r > 0 ? r : 0;
}

int st_cluster_local_ranks(void)
{
    const char *local = getenv("MPI_LOCALNRANKS");
    int n = local && st_cluster_launched() ? atoi(local) : 1;
    return n > 1 ? n : 1;
}

st_status st_cluster_copy_text(const char *text, size_t len, char **all, size_t *all_len,
                               st_error *err)
{
    *all = st_calloc(len + 1, 1, "the gathered text", err);
    if (!*all)
        return ST_ENOMEM;
    memcpy(*all, text, len);
    *all_len = len;
    return ST_OK;
}
