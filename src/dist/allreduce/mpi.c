/* All-reduce "mpi": the MPI library's own MPI_Allreduce(MPI_SUM), the
 * baseline the other algorithms are measured against.
 *
 * Restrictions: none. The library's messages are invisible here, so stats
 * get the call and its time but no bytes, messages or crossing bytes, the
 * sum hook is not used, and crossing messages are not paced. With
 * idle_sleep_us or a timeout it is MPI_Iallreduce, polled (the library's
 * nonblocking schedules, which may differ from the blocking call's).
 *
 * Cost: whatever the library picks. MPICH (Thakur, Rabenseifner and Gropp,
 * "Optimization of collective communication operations in MPICH", 2005)
 * uses recursive doubling for short messages,
 *     log2(P) alpha + n log2(P) beta + n log2(P) gamma,
 * and Rabenseifner's reduce-scatter + all-gather for long ones,
 *     2 log2(P) alpha + 2 (P-1)/P n beta + (P-1)/P n gamma,
 * with P ranks, n bytes, latency alpha, per-byte transfer beta and per-byte
 * reduction gamma. */
#include "algorithm.h"

#include <stdio.h>

st_status st_allreduce_mpi(float *buf, size_t n, const st_comm *c, st_allreduce_stats *stats,
                           st_error *err)
{
    ar_call call;
    st_status st = ar_begin(&call, "mpi", n, 0, c, stats, err);
    if (st != ST_OK || n == 0 || c->size == 1)
        goto done;
    int rc;
    if (ar_polled(c)) {
        MPI_Request request;
        rc = MPI_Iallreduce(MPI_IN_PLACE, buf, (int)n, MPI_FLOAT, MPI_SUM, c->comm, &request);
        if (rc == MPI_SUCCESS)
            rc = ar_wait(c, 1, &request);
    } else {
        rc = MPI_Allreduce(MPI_IN_PLACE, buf, (int)n, MPI_FLOAT, MPI_SUM, c->comm);
    }
    if (rc != MPI_SUCCESS) {
        char what[96];
        snprintf(what, sizeof what, "all-reduce mpi: MPI_Allreduce of %zu floats", n);
        st = ar_mpi_failed(c, err, rc, what);
    }
done:
    return ar_end(&call, st);
}
