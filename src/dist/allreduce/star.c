/* All-reduce "ps": a parameter-server star. Every rank sends its buffer to
 * rank 0, which adds them in rank order 1, 2, ..., P-1 (so the result is
 * deterministic, whatever order they arrive in) and sends the sum back to
 * each rank in turn.
 *
 * Restrictions: none. The classic parameter server (Li et al., "Scaling
 * distributed machine learning with the parameter server", OSDI 2014), here
 * with one server that is also a worker.
 *
 * Cost, P ranks and n bytes (latency alpha, per-byte transfer beta, per-byte
 * reduction gamma), all on rank 0's link:
 *     2 (P-1) alpha + 2 (P-1) n beta + (P-1) n gamma.
 * Linear in P in every term. With supernodes, the P - Q ranks outside rank
 * 0's supernode send n bytes across and get n back. Scratch: n floats on
 * rank 0. */
#include "comm.h"

st_status st_allreduce_star(float *buf, size_t n, const st_comm *c, st_allreduce_stats *stats,
                          st_error *err)
{
    int p = c->size;
    ar_call call;
    size_t scratch = c->rank == 0 ? st_allreduce_scratch_count(n) : 0;
    st_status st = ar_begin(&call, "ps", n, scratch, c, stats, err);
    if (st != ST_OK || p == 1)
        goto done;
    if (c->rank != 0) {
        st = ar_exchange(&call, buf, n, 0, NULL, 0, MPI_PROC_NULL);
        if (st == ST_OK)
            st = ar_exchange(&call, NULL, 0, MPI_PROC_NULL, buf, n, 0);
        goto done;
    }
    for (int worker = 1; worker < p; worker++) {
        st = ar_exchange(&call, NULL, 0, MPI_PROC_NULL, call.scratch, n, worker);
        if (st != ST_OK)
            goto done;
        ar_sum(&call, buf, call.scratch, n);
    }
    for (int worker = 1; worker < p; worker++) {
        st = ar_exchange(&call, buf, n, worker, NULL, 0, MPI_PROC_NULL);
        if (st != ST_OK)
            goto done;
    }
done:
    return ar_end(&call, st);
}
