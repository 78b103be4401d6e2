/* The communication layer the all-reduce algorithms share (comm.c; its
 * public half, st_comm and its waits, is in allreduce.h): the per-call
 * state (stats, scratch, timing: ar_begin, ar_end), counted and paced
 * point-to-point exchanges, waits polled with a timeout, the sum hook,
 * and the split of n floats into blocks. */
#ifndef ST_ALLREDUCE_COMM_H
#define ST_ALLREDUCE_COMM_H

#include "dist/allreduce.h"

/* One call of one algorithm. */
typedef struct ar_call {
    const char *algo;           /* name in messages */
    const st_comm *c;
    st_allreduce_stats *stats;  /* the caller's, or own_stats when it gave NULL */
    st_allreduce_stats own_stats;
    float *scratch;             /* [scratch_count]: the caller's, or owned_scratch */
    size_t scratch_count;
    float *owned_scratch;       /* allocated by ar_begin when the caller's is too small */
    double start;               /* MPI_Wtime at ar_begin */
    st_error *err;
} ar_call;

/* Start a call that needs scratch_count floats of scratch: checks n
 * against MPI's int counts and takes the caller's scratch or allocates. */
st_status ar_begin(ar_call *call, const char *algo, size_t n, size_t scratch_count,
                   const st_comm *c, st_allreduce_stats *stats, st_error *err);

/* Finish the call: free owned scratch, add the wall time; returns st. */
st_status ar_end(ar_call *call, st_status st);

/* Send send[send_n] to physical rank dst while receiving recv[recv_n] from
 * physical rank src (MPI_Sendrecv). An empty side is skipped (the peer
 * skips its side too, as both compute the same sizes), so a one-way
 * transfer is an exchange with one empty side. Counts the bytes sent and
 * those crossing supernodes, and paces crossing messages. */
st_status ar_exchange(ar_call *call, const float *send, size_t send_n, int dst, float *recv,
                      size_t recv_n, int src);

/* The one-sided algorithm's window on a communicator (onesided.c):
 * st_comm_init allocates this holder, the algorithm's first call makes
 * the window, st_comm_free frees both. */
#define AR_RMA_EDGES 32 /* a rank's tree edges: its parent and up to 31 children */
struct st_comm_rma {
    MPI_Win win;      /* MPI_WIN_NULL until the first call; then under MPI_Win_lock_all */
    char *base;       /* this rank's part of the window */
    float *staging;   /* the children's partial sums being fetched, a segment each */
    uint64_t tickets; /* segments each tree edge has carried in earlier calls: the
                         notification that segment s of this call is there is
                         tickets + s + 1 (the same count on every rank) */
    int64_t notice[AR_RMA_EDGES][2]; /* each edge's notification in flight: the value
                                        sent and the one it replaced */
    int abandoned;    /* a call failed with one-sided requests in flight: MPICH can
                         neither free nor cancel them, so the window stays as it is
                         (its unlock and free would wait on them, and a lost peer) */
};

/* What one look of an ar_poll_fn found. */
typedef enum ar_poll_state {
    AR_POLL_WAITING,  /* nothing new */
    AR_POLL_PROGRESS, /* something moved: the wait starts again */
    AR_POLL_DONE,
} ar_poll_state;

/* One look at what a wait waits for; returns an MPI error code. */
typedef int (*ar_poll_fn)(void *ctx, ar_poll_state *state);

/* Call poll until it says done, as st_comm_wait polls its requests:
 * spinning at first, then sleeping c->idle_sleep_us or backing off;
 * timeout > 0 seconds without progress gives ST_COMM_TIMEOUT. Returns
 * MPI_SUCCESS, poll's MPI error code, or ST_COMM_TIMEOUT. */
int ar_poll(const st_comm *c, double timeout, ar_poll_fn poll, void *ctx);

/* Count the bytes of a transfer that ar_exchange (or a one-sided put)
 * made: send_n floats sent to physical rank dst, recv_n received from
 * src (0: none), those crossing supernodes, and pace the crossing ones
 * (the model at the top of comm.c). */
void ar_account(ar_call *call, size_t send_n, int dst, size_t recv_n, int src);

/* st_comm_wait with the communicator's timeout. */
int ar_wait(const st_comm *c, int count, MPI_Request *requests);

/* Whether calls on c post their messages and poll them (st_comm_wait)
 * rather than block in MPI: when ranks share cores or a timeout is set. */
int ar_polled(const st_comm *c);

/* An MPI failure (or ST_COMM_TIMEOUT) of `what` on c, recorded in err. */
st_status ar_mpi_failed(const st_comm *c, st_error *err, int rc, const char *what);

/* dst[i] += src[i] with the communicator's sum hook. */
void ar_sum(const ar_call *call, float *dst, const float *src, size_t n);

/* Floats [start, start + count) of the buffer. */
typedef struct ar_range {
    size_t start, count;
} ar_range;

/* Blocks first..first+nblocks-1 of n floats cut into `blocks` equal parts:
 * block b starts at floor(n b / blocks) (block b of P is rank b's part,
 * st_allreduce_part), so sizes differ by at most one and some blocks are
 * empty when n < blocks. */
ar_range ar_blocks(size_t n, int blocks, int first, int nblocks);

/* Rank c->rank's part of n floats (st_allreduce_part). */
ar_range ar_part(const ar_call *call, size_t n);

/* rhd (rhd.c) over the ranks listed in order: logical rank l is physical
 * rank order[l] (NULL: the identity). The all-reduce, recursive halving
 * then recursive doubling, and its two halves: the reduce-scatter leaves
 * block q of P (the part of st_allreduce_part) on physical rank q, the
 * all-gather takes it from there. */
st_status ar_rhd_allreduce(ar_call *call, float *buf, size_t n, const int *order);
st_status ar_rhd_reduce_scatter(ar_call *call, float *buf, size_t n, const int *order);
st_status ar_rhd_allgather(ar_call *call, float *buf, size_t n, const int *order);

#endif
