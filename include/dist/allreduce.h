/* All-reduce of one float buffer across MPI ranks (sum), by several
 * algorithms with one signature, for the multi-node trainer (issue 7).
 *
 * Every algorithm takes this rank's buffer and leaves in it the elementwise
 * sum over all ranks of the communicator. Every rank must call the same
 * algorithm with the same n and an st_comm built the same way. For a fixed
 * algorithm, rank count and n the result is bitwise identical run to run and
 * on every rank: the order of the additions is fixed by the algorithm, never
 * by message arrival.
 *
 * Supernodes: physical ranks 0..Q-1 form supernode 0, Q..2Q-1 supernode 1,
 * and so on (the last one may be partial). A message crosses when sender and
 * receiver are in different supernodes; the algorithms count crossing bytes,
 * and with sim_cross_bandwidth F in (0,1) they pace crossing messages so
 * that their bytes take 1/F times as long as inside a supernode (latency
 * is not paced; see src/dist/allreduce/comm.c for the model).
 *
 * Calls on one communicator must not overlap (they all use one message
 * tag). To reduce slices concurrently, give each its own communicator
 * (MPI_Comm_dup) and initialize MPI with MPI_THREAD_MULTIPLE.
 *
 * Reduce-scatter and all-gather: each algorithm also comes as its two
 * halves (st_allreduce_algo's reduce_scatter and allgather, same signature
 * as the all-reduce). After a reduce-scatter, rank q's part of the buffer
 * (st_allreduce_part(n, P, q), allreduce_algos.h: floats [floor(n q / P),
 * floor(n (q+1) / P))) holds the sum over ranks of that part, with the
 * same bits that the algorithm's all-reduce leaves there; the rest of the
 * buffer is left undefined (it served as work space). An all-gather takes
 * rank q's part from rank q into every rank's buffer, the other floats
 * being overwritten. The parts are the same for every algorithm, so a run
 * may switch algorithms (auto) without moving anything it keeps per part.
 *
 * Errors: a failing MPI call or allocation is reported in err, but the other
 * ranks may then wait for this one forever; on failure the caller should
 * MPI_Abort. Only argument errors (the same on every rank) are safe to
 * report and carry on from. */
#ifndef ST_ALLREDUCE_H
#define ST_ALLREDUCE_H

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

#include "base/status.h"
#include "dist/allreduce_algos.h"
#include "dist/allreduce_cost.h"

/* dst[i] += src[i] for i < n. A hook must add elementwise (any split of the
 * range over threads gives the same bits), so results stay deterministic. */
typedef void (*st_allreduce_sum_fn)(void *ctx, float *dst, const float *src, size_t n);

/* The serial default for st_comm.sum; ctx is unused. */
void st_allreduce_sum_serial(void *ctx, float *dst, const float *src, size_t n);

typedef struct st_comm {
    MPI_Comm comm;              /* not owned: the caller frees it, after the last call */
    int rank, size;             /* of this process in comm, and the number of ranks P */
    int supernode_size;         /* Q consecutive physical ranks per supernode; 0 = one supernode */
    double sim_cross_bandwidth; /* F in (0,1): pace crossing messages; 0 or 1 = off */
    double inside_seconds_per_byte; /* the pacing model's in-supernode time per byte (beta) */
    float *scratch;             /* [scratch_count] work space, not owned; NULL = none */
    size_t scratch_count;       /* floats at scratch; a call that needs more allocates its own */
    st_allreduce_sum_fn sum;    /* the reduction; NULL or st_allreduce_sum_serial: serial */
    void *sum_ctx;              /* passed to sum */
    int idle_sleep_us;          /* 0: wait for a message inside MPI (spinning); > 0: poll
                                   it, sleeping this long between polls, so that ranks
                                   sharing cores (more ranks than cores) let each other run */
    double timeout_seconds;     /* 0: wait for the peers as long as it takes; > 0: poll
                                   (st_comm_wait) and fail a call that waits this long */
    struct st_comm_rma *rma;    /* owned: the one-sided algorithm's window (onesided.c);
                                   copies of c share it */
} st_comm;

/* Counters one call adds to (they accumulate over calls; zero them first). */
typedef struct st_allreduce_stats {
    uint64_t bytes_sent;     /* payload this rank sent */
    uint64_t bytes_crossing; /* of bytes_sent, to a rank in another supernode */
    uint64_t messages;       /* non-empty point-to-point messages this rank sent */
    double seconds;          /* wall time inside the calls, pacing included */
    double paced_seconds;    /* of seconds, waiting that simulates slow crossing links */
    long calls;
} st_allreduce_stats;

/* Fill c for comm (collective): rank, size, Q, F, the serial sum, no
 * scratch, waiting by spinning, no timeout, the one-sided algorithm's
 * state (its window not made yet; st_comm_free frees it). With F in (0,1)
 * and more than one rank, also measures the in-supernode time per byte
 * with a ping-pong between ranks 0 and 1 and gives every rank rank 0's
 * figure; the caller may overwrite it afterwards.
 * ST_EUSAGE when Q < 0 or F is outside [0, 1] (the same on every rank). */
st_status st_comm_init(st_comm *c, MPI_Comm comm, int supernode_size,
                       double sim_cross_bandwidth, st_error *err);

/* Collective when the one-sided algorithm has run on c (it frees that
 * algorithm's window, MPI_Win_free): what st_comm_init allocated; before
 * comm is freed. NULL or a freed c: nothing. */
void st_comm_free(st_comm *c);

/* Collective: the network between ranks 0 and 1 as the cost formulas
 * (allreduce_cost.h) see it, measured, rank 0's figures on every rank:
 * alpha, half the fastest of 100 round trips of one float; beta, that of
 * a 4 MB message less alpha, per byte; gamma, the fastest of 10 serial
 * sums of 2 MB into 2 MB on rank 0, per byte; no supernodes (cross_beta =
 * beta). Needs at least two ranks. */
st_status st_comm_measure_net(const st_comm *c, st_net_params *np, st_error *err);

/* Complete requests[count] (MPI_REQUEST_NULL entries are done): poll them,
 * spinning at first (c->idle_sleep_us > 0: sleeping that long between
 * polls after a short spin); a wait that lasts beyond 10 ms backs off,
 * sleeping between polls for twice as long each time up to 1 ms, so that a
 * rank waiting for a stopped or slow peer leaves its core. With timeout >
 * 0, gives up after that many seconds: ST_COMM_TIMEOUT. Returns
 * MPI_SUCCESS, an MPI error code, or ST_COMM_TIMEOUT. */
#define ST_COMM_TIMEOUT (-1)
int st_comm_wait(const st_comm *c, int count, MPI_Request *requests, double timeout);

/* The supernode of physical rank rank: rank / Q, or 0 without supernodes. */
int st_comm_supernode(const st_comm *c, int rank);

/* Floats of scratch that let every algorithm run on n floats without
 * allocating: n. */
size_t st_allreduce_scratch_count(size_t n);

/* buf[n]: in, this rank's values; out, the sum over ranks. stats may be
 * NULL. n may be 0 and must not exceed INT_MAX. The reduce-scatter and
 * all-gather halves have the same signature (see the top of this file):
 * a function type, so that the list declares them. */
typedef st_status st_allreduce_call(float *buf, size_t n, const st_comm *c,
                                    st_allreduce_stats *stats, st_error *err);
typedef st_allreduce_call *st_allreduce_fn;

/* The prototypes, from the list (allreduce_algos.h): each row's all-reduce
 * st_allreduce_<fn> and the halves it names, which rows may share (a
 * function declared again, as C allows). */
#define ST_ALLREDUCE_PROTOTYPES(fn, name, reduce_scatter, allgather, summary)                  \
    st_allreduce_call st_allreduce_##fn, reduce_scatter, allgather;
ST_ALLREDUCE_ALGOS(ST_ALLREDUCE_PROTOTYPES)
#undef ST_ALLREDUCE_PROTOTYPES

typedef struct st_allreduce_algo {
    const char *name;    /* as given to --allreduce */
    st_allreduce_fn run;
    st_allreduce_fn reduce_scatter; /* its first half (or its whole all-reduce) */
    st_allreduce_fn allgather;      /* its second half (or the ring's) */
    const char *summary; /* one line for --help */
} st_allreduce_algo;

/* The algorithms in a fixed order (st_allreduce_count of them). */
extern const st_allreduce_algo st_allreduce_algos[];

/* The algorithm called name; ST_EUSAGE naming every valid one otherwise. */
st_status st_allreduce_find(const char *name, const st_allreduce_algo **out, st_error *err);

#endif
