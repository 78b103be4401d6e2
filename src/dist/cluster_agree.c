/* Agreement between the ranks outside the iteration, over MPI_COMM_WORLD:
 * the set-up (every rank's status and fingerprint), the outcome (how each
 * rank's run ended), rank 0's text (its kernel choices) and initial
 * weights broadcast, and --trace's aligned clocks and gathered events.
 * Each waits with the timeout (cluster_mpi.c) and, where the others would
 * wait for this rank, ends every rank on failure. */
#include "cluster_mpi.h"

#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "cluster_internal.h"

/* What the first value where rank 0's fingerprint a and b differ is, or
 * NULL. */
static const char *fingerprint_differs(const st_cluster_fingerprint *mine,
                                       const st_cluster_fingerprint *a,
                                       const st_cluster_fingerprint *b)
{
    if (a->n != b->n)
        return "the program (its fingerprint has another length)";
    for (int i = 0; i < a->n && i < ST_CLUSTER_FP_MAX; i++)
        if (a->value[i] != b->value[i])
            return mine->name[i];
    return NULL;
}

/* What each rank contributes to the agreement. */
typedef struct agreement {
    int status;
    int pad;
    st_cluster_fingerprint fp;
    char msg[sizeof ((st_error *)0)->msg]; /* why it failed */
} agreement;

/* Whether every rank of all [n] failed with the same status and message. */
static int failed_alike(const agreement *all, int n)
{
    for (int r = 0; r < n; r++)
        if (all[r].status == ST_OK || all[r].status != all[0].status ||
            strcmp(all[r].msg, all[0].msg) != 0)
            return 0;
    return 1;
}

st_status st_cluster_agree(st_cluster *c, st_status local, const st_cluster_fingerprint *fp,
                           int *alike, st_error *err)
{
    agreement mine;
    memset(&mine, 0, sizeof mine);
    *alike = 0;
    mine.status = local;
    if (local == ST_OK)
        mine.fp = *fp;
    else
        snprintf(mine.msg, sizeof mine.msg, "%s", err->msg);
    agreement *all = calloc((size_t)c->size, sizeof *all);
    if (!all) {
        st_error oom = {0};
        st_fail(&oom, ST_ENOMEM, "out of memory agreeing with the other ranks");
        st_cluster_abort(c, &oom);
        return ST_ENOMEM;
    }
    MPI_Request request;
    st_error wait_err = {0};
    st_status st;
    if (MPI_Iallgather(&mine, (int)sizeof mine, MPI_BYTE, all, (int)sizeof mine, MPI_BYTE,
                       MPI_COMM_WORLD, &request) != MPI_SUCCESS)
        st = st_fail(&wait_err, ST_EIO, "MPI_Iallgather failed agreeing on the set-up");
    else
        st = cluster_wait(c, &c->world, &request, 0, "agreeing on the set-up", &wait_err);
    if (st != ST_OK) {
        free(all);
        st_cluster_abort(c, &wait_err); /* the others may wait for this rank */
        return st;
    }
    *alike = failed_alike(all, c->size);
    st = local;
    for (int r = 0; r < c->size && st == ST_OK; r++) {
        if (all[r].status != ST_OK) {
            st = st_fail(err, (st_status)all[r].status, "rank %d of %d failed to set up (its "
                         "message says why): stopping every rank", r, c->size);
            break;
        }
        const char *what = fingerprint_differs(fp, &all[0].fp, &all[r].fp);
        if (what)
            st = st_fail(err, ST_EUSAGE, "rank %d of %d differs from rank 0 in %s: every rank "
                         "must run the same cfg with the same options", r, c->size, what);
    }
    /* failed only because another rank did: its status, so that every rank exits alike */
    for (int r = 0; st == ST_EPEER && r < c->size; r++)
        if (all[r].status != ST_OK && all[r].status != ST_EPEER)
            st = (st_status)all[r].status;
    free(all);
    return st;
}

/* What each rank contributes to the outcome: how its run ended. */
typedef struct outcome {
    int status;
    int signal;
    char msg[sizeof ((st_error *)0)->msg];
} outcome;

st_status st_cluster_outcome(st_cluster *c, st_status local, int *signal, st_error *err)
{
    outcome mine;
    memset(&mine, 0, sizeof mine);
    mine.status = local;
    mine.signal = *signal;
    if (local != ST_OK)
        snprintf(mine.msg, sizeof mine.msg, "%s", err->msg);
    outcome *all = calloc((size_t)c->size, sizeof *all);
    MPI_Request request;
    st_error wait_err = {0};
    st_status st = ST_OK;
    if (!all)
        st = st_fail(&wait_err, ST_ENOMEM, "out of memory for the ranks' outcomes");
    else if (MPI_Iallgather(&mine, (int)sizeof mine, MPI_BYTE, all, (int)sizeof mine, MPI_BYTE,
                            MPI_COMM_WORLD, &request) != MPI_SUCCESS)
        st = st_fail(&wait_err, ST_EIO, "MPI_Iallgather of the outcomes failed");
    else
        st = cluster_wait(c, &c->world, &request, c->rank != 0,
                          "gathering how the ranks ended", &wait_err);
    if (st != ST_OK) {
        st_cluster_abort(c, &wait_err);
        free(all);
        return st;
    }
    *signal = 0;
    for (int r = 0; r < c->size; r++)
        if (all[r].signal && *signal != SIGINT)
            *signal = all[r].signal;
    st = local;
    for (int r = 0; r < c->size && (local == ST_OK || local == ST_EPEER); r++)
        if (all[r].status != ST_OK && all[r].status != ST_EPEER) {
            st_error_clear(err);
            st = st_fail(err, (st_status)all[r].status, "rank %d of %d failed: %s", r, c->size,
                         all[r].msg);
            break;
        }
    free(all);
    return st;
}

/* One Ibcast from rank 0 of bytes [n] (n below 2^31), waited for with the timeout. */
static st_status bcast_bytes(st_cluster *c, void *bytes, size_t n, const char *what,
                             st_error *err)
{
    MPI_Request request;
    if (MPI_Ibcast(bytes, (int)n, MPI_BYTE, 0, MPI_COMM_WORLD, &request) != MPI_SUCCESS)
        return st_fail(err, ST_EIO, "MPI_Ibcast of %s failed", what);
    return cluster_wait(c, &c->world, &request, 0, what, err);
}

st_status st_cluster_share_text(st_cluster *c, int ok, char **text, st_error *err)
{
    if (!c || c->size == 1)
        return ST_OK;
    uint64_t head[2] = {(uint64_t)ok, c->rank == 0 && ok && *text ? strlen(*text) : 0};
    st_error wait_err = {0};
    st_status st = bcast_bytes(c, head, sizeof head, "rank 0's kernel choices", &wait_err);
    if (st == ST_OK && head[1] > (1u << 30))
        st = st_fail(&wait_err, ST_EIO, "rank 0's kernel choices: %llu bytes",
                     (unsigned long long)head[1]);
    char *buf = NULL;
    if (st == ST_OK && head[1] && c->rank != 0) {
        buf = calloc((size_t)head[1] + 1, 1);
        if (!buf)
            st = st_fail(&wait_err, ST_ENOMEM, "out of memory receiving rank 0's kernel "
                         "choices");
    }
    if (st == ST_OK && head[1])
        st = bcast_bytes(c, c->rank == 0 ? *text : buf, (size_t)head[1],
                         "rank 0's kernel choices", &wait_err);
    if (st != ST_OK) {
        free(buf);
        st_fail(err, wait_err.code, "%s", wait_err.msg);
        st_cluster_abort(c, &wait_err); /* the others may wait for this rank */
        return st;
    }
    if (c->rank == 0)
        return ST_OK;
    if (!head[0]) {
        free(buf);
        return st_fail(err, ST_EPEER, "rank 0 of %d failed to set up (its message says why): "
                       "stopping every rank", c->size);
    }
    *text = buf;
    return ST_OK;
}

st_status st_cluster_clock_origin(st_cluster *c, double *origin, st_error *err)
{
    st_status st = ST_OK;
    for (int k = 0; c && c->size > 1 && k < 2 && st == ST_OK; k++) {
        MPI_Request request;
        st = MPI_Ibarrier(MPI_COMM_WORLD, &request) == MPI_SUCCESS
                 ? cluster_wait(c, &c->world, &request, 0, "--trace's clock barrier", err)
                 : st_fail(err, ST_EIO, "MPI_Ibarrier of --trace's clocks failed");
    }
    *origin = st_now();
    return st;
}

st_status st_cluster_gather_text(st_cluster *c, const char *text, size_t len, char **all,
                                 size_t *all_len, st_error *err)
{
    *all = NULL;
    *all_len = 0;
    if (!c || c->size == 1)
        return st_cluster_copy_text(text, len, all, all_len, err);
    unsigned long long mine = len, *lens = NULL;
    int *counts = NULL, *displs = NULL;
    MPI_Request request;
    st_status st = ST_OK;
    if (c->rank == 0) {
        lens = st_calloc((size_t)c->size, sizeof *lens, "the gathered text", err);
        counts = st_calloc((size_t)c->size, sizeof *counts, "the gathered text", err);
        displs = st_calloc((size_t)c->size, sizeof *displs, "the gathered text", err);
        if (!lens || !counts || !displs)
            st = ST_ENOMEM;
    }
    if (st == ST_OK)
        st = MPI_Igather(&mine, 1, MPI_UNSIGNED_LONG_LONG, lens, 1, MPI_UNSIGNED_LONG_LONG, 0,
                         MPI_COMM_WORLD, &request) == MPI_SUCCESS
                 ? cluster_wait(c, &c->world, &request, 1, "the trace's lengths", err)
                 : st_fail(err, ST_EIO, "MPI_Igather of the trace's lengths failed");
    unsigned long long total = 0;
    for (int r = 0; st == ST_OK && c->rank == 0 && r < c->size; r++) {
        if (lens[r] > (unsigned long long)INT_MAX - total)
            st = st_fail(err, ST_EIO, "the ranks' traces take over %d bytes", INT_MAX);
        displs[r] = (int)total;
        counts[r] = (int)lens[r];
        total += lens[r];
    }
    if (st == ST_OK && c->rank == 0 && !(*all = st_calloc(total + 1, 1, "the gathered text",
                                                          err)))
        st = ST_ENOMEM;
    if (st == ST_OK)
        st = MPI_Igatherv(text, (int)len, MPI_CHAR, *all, counts, displs, MPI_CHAR, 0,
                          MPI_COMM_WORLD, &request) == MPI_SUCCESS
                 ? cluster_wait(c, &c->world, &request, 1, "the trace's events", err)
                 : st_fail(err, ST_EIO, "MPI_Igatherv of the trace's events failed");
    free(lens);
    free(counts);
    free(displs);
    if (st != ST_OK) { /* the others would wait for this rank */
        free(*all);
        *all = NULL;
        st_cluster_abort(c, err);
        return st;
    }
    *all_len = (size_t)total;
    return ST_OK;
}

st_status st_cluster_broadcast(st_cluster *c, float *x, size_t n, st_error *err)
{
    for (size_t at = 0; at < n;) {
        int k = n - at > (size_t)(1 << 30) ? 1 << 30 : (int)(n - at);
        MPI_Request request;
        if (MPI_Ibcast(x + at, k, MPI_FLOAT, 0, MPI_COMM_WORLD, &request) != MPI_SUCCESS)
            return st_fail(err, ST_EIO, "MPI_Ibcast of the initial weights failed");
        st_status st = cluster_wait(c, &c->world, &request, 0,
                                    "the initial weights' broadcast", err);
        if (st != ST_OK)
            st_cluster_abort(c, err);
        at += (size_t)k;
    }
    return ST_OK;
}
