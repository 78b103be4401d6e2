/* All-reduce "mpi": the MPI library's own MPI_Allreduce(MPI_SUM), the
 * baseline the other algorithms are measured against; its halves are the
 * library's MPI_Reduce_scatter and MPI_Allgatherv over the parts of
 * st_allreduce_part.
 *
 * Restrictions: none. The library's messages are invisible here, so stats
 * get the call and its time but no bytes, messages or crossing bytes, the
 * sum hook is not used, and crossing messages are not paced. With
 * idle_sleep_us or a timeout it is MPI_Iallreduce (MPI_Ireduce_scatter,
 * MPI_Iallgatherv), polled (the library's nonblocking schedules, which may
 * differ from the blocking call's). The library's reduce-scatter may add in
 * another order than its all-reduce: its sums are within rounding of the
 * all-reduce's, not always the same bits.
 *
 * Cost: whatever the library picks. MPICH (Thakur, Rabenseifner and Gropp,
 * "Optimization of collective communication operations in MPICH", 2005)
 * uses recursive doubling for short messages,
 *     log2(P) alpha + n log2(P) beta + n log2(P) gamma,
 * and Rabenseifner's reduce-scatter + all-gather for long ones,
 *     2 log2(P) alpha + 2 (P-1)/P n beta + (P-1)/P n gamma,
 * with P ranks, n bytes, latency alpha, per-byte transfer beta and per-byte
 * reduction gamma. */
#include "comm.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Complete the library's call that returned rc: polled (its request
 * started nonblocking) or already done; an MPI failure of fn on n floats
 * recorded in the call's error. */
static st_status library_done(ar_call *call, int rc, MPI_Request *request, const char *fn,
                              size_t n)
{
    if (rc == MPI_SUCCESS && ar_polled(call->c))
        rc = ar_wait(call->c, 1, request);
    if (rc == MPI_SUCCESS)
        return ST_OK;
    char what[96];
    snprintf(what, sizeof what, "all-reduce mpi: %s of %zu floats", fn, n);
    return ar_mpi_failed(call->c, call->err, rc, what);
}

st_status st_allreduce_mpi(float *buf, size_t n, const st_comm *c, st_allreduce_stats *stats,
                           st_error *err)
{
    ar_call call;
    st_status st = ar_begin(&call, "mpi", n, 0, c, stats, err);
    if (st != ST_OK || n == 0 || c->size == 1)
        return ar_end(&call, st);
    MPI_Request request;
    int rc = ar_polled(c) ? MPI_Iallreduce(MPI_IN_PLACE, buf, (int)n, MPI_FLOAT, MPI_SUM,
                                           c->comm, &request)
                          : MPI_Allreduce(MPI_IN_PLACE, buf, (int)n, MPI_FLOAT, MPI_SUM, c->comm);
    return ar_end(&call, library_done(&call, rc, &request, "MPI_Allreduce", n));
}

/* One half: counts[P] and displs[P], every rank's part of n floats, and
 * the library's reduce-scatter (gather 0) or all-gather (gather 1) of
 * them. */
static st_status library_half(float *buf, size_t n, const st_comm *c, st_allreduce_stats *stats,
                              st_error *err, int gather)
{
    int *counts = NULL, *displs = NULL;
    ar_call call;
    st_status st = ar_begin(&call, gather ? "mpi (all-gather)" : "mpi (reduce-scatter)", n, 0,
                            c, stats, err);
    if (st != ST_OK || n == 0 || c->size == 1)
        goto done;
    int p = c->size;
    counts = st_calloc((size_t)p, sizeof *counts, "the ranks' parts", err);
    displs = st_calloc((size_t)p, sizeof *displs, "the ranks' parts", err);
    if (!counts || !displs) {
        st = ST_ENOMEM;
        goto done;
    }
    for (int q = 0; q < p; q++) {
        ar_range part = ar_blocks(n, p, q, 1);
        counts[q] = (int)part.count;
        displs[q] = (int)part.start;
    }
    MPI_Request request;
    int polled = ar_polled(c), rc;
    if (gather)
        rc = polled ? MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf, counts, displs,
                                      MPI_FLOAT, c->comm, &request)
                    : MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf, counts, displs,
                                     MPI_FLOAT, c->comm);
    else /* in place, the input is the whole buffer and this rank's part lands at its start */
        rc = polled ? MPI_Ireduce_scatter(MPI_IN_PLACE, buf, counts, MPI_FLOAT, MPI_SUM, c->comm,
                                          &request)
                    : MPI_Reduce_scatter(MPI_IN_PLACE, buf, counts, MPI_FLOAT, MPI_SUM, c->comm);
    st = library_done(&call, rc, &request, gather ? "MPI_Allgatherv" : "MPI_Reduce_scatter", n);
    if (st == ST_OK && !gather) {
        ar_range part = ar_part(&call, n);
        memmove(buf + part.start, buf, part.count * sizeof *buf);
    }
done:
    free(counts);
    free(displs);
    return ar_end(&call, st);
}

st_status st_reduce_scatter_mpi(float *buf, size_t n, const st_comm *c,
                                st_allreduce_stats *stats, st_error *err)
{
    return library_half(buf, n, c, stats, err, 0);
}

st_status st_allgather_mpi(float *buf, size_t n, const st_comm *c, st_allreduce_stats *stats,
                           st_error *err)
{
    return library_half(buf, n, c, stats, err, 1);
}
