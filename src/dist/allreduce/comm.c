/* The communication layer the all-reduce algorithms share (comm.h), and
 * the cluster with them (allreduce.h's st_comm): st_comm set-up, the
 * network's alpha, beta and gamma measured between two ranks, waits
 * polled with a timeout, the per-call state, counted point-to-point
 * exchanges with simulated slow links between supernodes, the default
 * sum, and block boundaries.
 *
 * Pacing model. The design's cost model gives a message of b bytes the time
 * alpha + beta * b inside a supernode and alpha + (beta / F) * b across
 * (links between supernodes over-subscribed to a fraction F of the
 * bandwidth; F = 1/4 on the Sunway machine). On one machine every message
 * is an in-supernode message, so after a crossing exchange completes, both
 * the sender and the receiver wait
 *
 *     (1/F - 1) * beta * b      b = the larger crossing direction's bytes
 *
 * (links are full duplex, so two directions crossing at once cost no more
 * than the larger). beta is c->inside_seconds_per_byte, measured once by
 * st_comm_init (half the fastest of 10 round trips of a 4 MB message
 * between ranks 0 and 1) and shared by every rank. We pace with this
 * per-byte model rather than multiplying each message's measured time
 * because a blocking exchange's measured time also holds the wait for a
 * late peer and, with more ranks than cores, other ranks' time slices:
 * scaling those would charge the link for slowness it does not have and
 * make the pacing differ from run to run. Latency (alpha) is not paced.
 * Waits of 200 us or more sleep, so an oversubscribed machine gives the core
 * to other ranks; shorter ones spin, as a sleep would overshoot them.
 *
 * Waiting for messages. MPI_Sendrecv spins until its messages are through,
 * which is best when every rank has its own core. With more ranks than
 * cores (a supernode layout simulated on one machine) a spinning rank keeps
 * the core from the peer it waits for, and each step of an algorithm costs
 * a scheduler time slice (milliseconds); c->idle_sleep_us > 0 posts the
 * exchange nonblocking and polls it, sleeping between polls. So does a
 * timeout (c->timeout_seconds), which MPI's blocking calls cannot have: a
 * peer that stopped (SIGSTOP) or hung would keep its partners spinning
 * forever. Long waits back off (st_comm_wait); a polled wait that spins
 * (no idle_sleep_us, not yet backing off) yields the core between polls
 * (sched_yield), so that a peer sharing it runs: the one-sided algorithm,
 * always polled, hands many segments along its trees, and spinning without
 * yielding made it 13 times slower with 8 ranks on 2 cores. */
#include "comm.h"

#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/clock.h"

/* Ping-pongs that measure beta (and alpha and gamma, st_comm_measure_net):
 * message size and round trips (the fastest one counts, the others absorb
 * warm-up and scheduling noise). */
#define CALIBRATE_FLOATS (1u << 20)
#define CALIBRATE_ROUNDS 10
/* Round trips of a one-float message that measure alpha. */
#define LATENCY_ROUNDS 100
#define CALIBRATE_IDLE_SLEEP_US 100
#define CALIBRATE_TAG 7700
#define EXCHANGE_TAG 7701
#define SLEEP_THRESHOLD_SECONDS 200e-6
/* With idle_sleep_us, polls of an exchange before the first sleep. */
#define SPIN_POLLS 100
/* Waits longer than this back off: sleeps between polls doubling from
 * BACKOFF_FIRST_US up to BACKOFF_MAX_US (a message that is late that long
 * waits for a peer's computation, or for a peer that stopped). */
#define BACKOFF_AFTER_SECONDS 10e-3
#define BACKOFF_FIRST_US 20
#define BACKOFF_MAX_US 1000

void st_allreduce_sum_serial(void *ctx, float *dst, const float *src, size_t n)
{
    for (size_t i = 0; i < n; i++)
        dst[i] += src[i];
}

int st_comm_supernode(const st_comm *c, int rank)
{
    return c->supernode_size > 0 ? rank / c->supernode_size : 0;
}

size_t st_allreduce_scratch_count(size_t n)
{
    return n;
}

st_status ar_mpi_failed(const st_comm *c, st_error *err, int rc, const char *what)
{
    if (rc == ST_COMM_TIMEOUT)
        return st_fail(err, ST_EIO, "%s: no answer within %g s (a rank stopped, hung or is "
                       "lost)", what, c->timeout_seconds);
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS)
        snprintf(text, sizeof text, "MPI error %d", rc);
    return st_fail(err, ST_EIO, "%s failed: %s", what, text);
}

/* The fastest of `rounds` round trips of floats [n] between ranks 0 and 1,
 * halved, into *one_way (seconds; ranks 0 and 1 only, the others skip). */
static st_status pingpong(const st_comm *c, float *msg, int n, int rounds, double *one_way,
                          st_error *err)
{
    double best = -1;
    for (int round = 0; round < rounds && c->rank < 2; round++) {
        int peer = 1 - c->rank, rc;
        double t0 = MPI_Wtime();
        if (c->rank == 0) {
            rc = MPI_Send(msg, n, MPI_FLOAT, peer, CALIBRATE_TAG, c->comm);
            if (rc == MPI_SUCCESS)
                rc = MPI_Recv(msg, n, MPI_FLOAT, peer, CALIBRATE_TAG, c->comm,
                              MPI_STATUS_IGNORE);
        } else {
            rc = MPI_Recv(msg, n, MPI_FLOAT, peer, CALIBRATE_TAG, c->comm, MPI_STATUS_IGNORE);
            if (rc == MPI_SUCCESS)
                rc = MPI_Send(msg, n, MPI_FLOAT, peer, CALIBRATE_TAG, c->comm);
        }
        if (rc != MPI_SUCCESS)
            return ar_mpi_failed(c, err, rc, "calibration: ping-pong between ranks 0 and 1");
        double t = (MPI_Wtime() - t0) / 2;
        if (best < 0 || t < best)
            best = t;
    }
    *one_way = best;
    return ST_OK;
}

/* Rank 0's values [n] to every rank; ranks 2.. wait sleeping, so that they
 * leave the cores to the ping-pong when there are more ranks than cores. */
static st_status share_rank0(const st_comm *c, double *values, int n, st_error *err)
{
    MPI_Request request;
    st_comm sleepy = *c;
    sleepy.idle_sleep_us = CALIBRATE_IDLE_SLEEP_US;
    int rc = MPI_Ibcast(values, n, MPI_DOUBLE, 0, c->comm, &request);
    if (rc == MPI_SUCCESS)
        rc = ar_wait(&sleepy, 1, &request);
    if (rc != MPI_SUCCESS)
        return ar_mpi_failed(c, err, rc, "calibration: MPI_Ibcast");
    return ST_OK;
}

/* A message of CALIBRATE_FLOATS on every rank (malloc'd into *msg),
 * failing on every rank when any rank lacks the memory. */
static st_status calibration_message(const st_comm *c, float **msg, st_error *err)
{
    *msg = calloc(CALIBRATE_FLOATS, sizeof **msg);
    int ok = *msg != NULL, all_ok = 0;
    int rc = MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, c->comm);
    if (rc != MPI_SUCCESS)
        return ar_mpi_failed(c, err, rc, "calibration: MPI_Allreduce");
    if (!all_ok)
        return st_fail(err, ST_ENOMEM, "calibration: out of memory allocating a %zu-byte "
                       "ping-pong message on %s", CALIBRATE_FLOATS * sizeof **msg,
                       ok ? "another rank" : "this rank");
    return ST_OK;
}

/* beta in seconds per byte between ranks 0 and 1, the same on every rank. */
static st_status measure_inside_beta(st_comm *c, st_error *err)
{
    float *msg = NULL;
    double beta = 0;
    st_status st = calibration_message(c, &msg, err);
    if (st == ST_OK)
        st = pingpong(c, msg, CALIBRATE_FLOATS, CALIBRATE_ROUNDS, &beta, err);
    beta /= (double)(CALIBRATE_FLOATS * sizeof *msg);
    if (st == ST_OK)
        st = share_rank0(c, &beta, 1, err);
    if (st == ST_OK)
        c->inside_seconds_per_byte = beta;
    free(msg);
    return st;
}

st_status st_comm_measure_net(const st_comm *c, st_net_params *np, st_error *err)
{
    float *msg = NULL;
    double v[3] = {0, 0, 0}, large = 0; /* alpha, beta, gamma */
    double bytes = (double)(CALIBRATE_FLOATS * sizeof *msg);
    st_status st = calibration_message(c, &msg, err);
    if (st == ST_OK)
        st = pingpong(c, msg, 1, LATENCY_ROUNDS, &v[0], err);
    if (st == ST_OK)
        st = pingpong(c, msg, CALIBRATE_FLOATS, CALIBRATE_ROUNDS, &large, err);
    for (int round = 0; st == ST_OK && c->rank == 0 && round < CALIBRATE_ROUNDS; round++) {
        float *half = msg + CALIBRATE_FLOATS / 2;
        double t0 = MPI_Wtime();
        st_allreduce_sum_serial(NULL, msg, half, CALIBRATE_FLOATS / 2);
        double t = (MPI_Wtime() - t0) / (bytes / 2);
        if (round == 0 || t < v[2])
            v[2] = t;
    }
    v[1] = large > v[0] ? (large - v[0]) / bytes : large / bytes;
    if (st == ST_OK)
        st = share_rank0(c, v, 3, err);
    if (st == ST_OK)
        *np = (st_net_params){.alpha = v[0], .beta = v[1], .gamma = v[2], .cross_beta = v[1]};
    free(msg);
    return st;
}

st_status st_comm_init(st_comm *c, MPI_Comm comm, int supernode_size,
                       double sim_cross_bandwidth, st_error *err)
{
    memset(c, 0, sizeof *c);
    if (supernode_size < 0)
        return st_fail(err, ST_EUSAGE, "supernode size: expected a number of ranks >= 1, "
                       "or 0 for none, got %d", supernode_size);
    if (!(sim_cross_bandwidth >= 0 && sim_cross_bandwidth <= 1))
        return st_fail(err, ST_EUSAGE, "--sim-cross-bandwidth: expected a fraction of the "
                       "in-supernode bandwidth in (0, 1], or 0 for off, got %g",
                       sim_cross_bandwidth);
    c->comm = comm;
    c->supernode_size = supernode_size;
    c->sim_cross_bandwidth = sim_cross_bandwidth;
    c->sum = st_allreduce_sum_serial;
    int rc = MPI_Comm_rank(comm, &c->rank);
    if (rc == MPI_SUCCESS)
        rc = MPI_Comm_size(comm, &c->size);
    if (rc != MPI_SUCCESS)
        return ar_mpi_failed(c, err, rc, "MPI_Comm_rank / MPI_Comm_size");
    c->rma = st_calloc(1, sizeof *c->rma, "the one-sided all-reduce's window state", err);
    if (!c->rma)
        return ST_ENOMEM;
    c->rma->win = MPI_WIN_NULL;
    st_status st = ST_OK;
    if (sim_cross_bandwidth > 0 && sim_cross_bandwidth < 1 && c->size > 1)
        st = measure_inside_beta(c, err);
    if (st != ST_OK)
        st_comm_free(c);
    return st;
}

void st_comm_free(st_comm *c)
{
    if (!c || !c->rma)
        return;
    if (c->rma->win != MPI_WIN_NULL && !c->rma->abandoned) {
        MPI_Win_unlock_all(c->rma->win);
        MPI_Win_free(&c->rma->win);
    }
    if (!c->rma->abandoned) /* else a fetch in flight may still write into it */
        free(c->rma->staging);
    free(c->rma);
    c->rma = NULL;
}

st_status ar_begin(ar_call *call, const char *algo, size_t n, size_t scratch_count,
                   const st_comm *c, st_allreduce_stats *stats, st_error *err)
{
    memset(call, 0, sizeof *call);
    call->algo = algo;
    call->c = c;
    call->stats = stats ? stats : &call->own_stats;
    call->err = err;
    call->start = MPI_Wtime();
    if (n > INT_MAX)
        return st_fail(err, ST_EUSAGE, "all-reduce %s: %zu floats exceed MPI's count limit of "
                       "%d per message", algo, n, INT_MAX);
    if (c->scratch && c->scratch_count >= scratch_count) {
        call->scratch = c->scratch;
        call->scratch_count = c->scratch_count;
    } else if (scratch_count > 0) {
        call->owned_scratch = malloc(scratch_count * sizeof(float));
        if (!call->owned_scratch)
            return st_fail(err, ST_ENOMEM, "all-reduce %s: out of memory allocating %zu floats "
                           "of scratch", algo, scratch_count);
        call->scratch = call->owned_scratch;
        call->scratch_count = scratch_count;
    }
    return ST_OK;
}

st_status ar_end(ar_call *call, st_status st)
{
    free(call->owned_scratch);
    call->owned_scratch = NULL;
    call->stats->seconds += MPI_Wtime() - call->start;
    call->stats->calls++;
    return st;
}

void ar_sum(const ar_call *call, float *dst, const float *src, size_t n)
{
    if (n == 0)
        return;
    const st_comm *c = call->c;
    if (c->sum)
        c->sum(c->sum_ctx, dst, src, n);
    else
        st_allreduce_sum_serial(NULL, dst, src, n);
}

/* Return after `seconds`. */
static void wait_seconds(double seconds)
{
    double deadline = st_now() + seconds;
    if (seconds >= SLEEP_THRESHOLD_SECONDS) {
        struct timespec until;
        until.tv_sec = (time_t)deadline;
        until.tv_nsec = (long)((deadline - (double)until.tv_sec) * 1e9);
        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &until, NULL) == EINTR)
            continue;
        return;
    }
    while (st_now() < deadline)
        continue;
}

/* MPI_Sendrecv, or (ar_polled) the same posted nonblocking and polled.
 * Empty sides go to MPI_PROC_NULL. Returns an MPI error code or
 * ST_COMM_TIMEOUT. */
static int transfer(const st_comm *c, const float *send, size_t send_n, int dst, float *recv,
                    size_t recv_n, int src)
{
    int to = send_n ? dst : MPI_PROC_NULL, from = recv_n ? src : MPI_PROC_NULL;
    if (!ar_polled(c))
        return MPI_Sendrecv(send, (int)send_n, MPI_FLOAT, to, EXCHANGE_TAG, recv, (int)recv_n,
                            MPI_FLOAT, from, EXCHANGE_TAG, c->comm, MPI_STATUS_IGNORE);
    MPI_Request requests[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
    int rc = MPI_Irecv(recv, (int)recv_n, MPI_FLOAT, from, EXCHANGE_TAG, c->comm, &requests[0]);
    if (rc == MPI_SUCCESS)
        rc = MPI_Isend(send, (int)send_n, MPI_FLOAT, to, EXCHANGE_TAG, c->comm, &requests[1]);
    if (rc != MPI_SUCCESS) {
        if (requests[0] != MPI_REQUEST_NULL) {
            MPI_Cancel(&requests[0]);
            MPI_Request_free(&requests[0]);
        }
        return rc;
    }
    return ar_wait(c, 2, requests);
}

int ar_polled(const st_comm *c)
{
    return c->idle_sleep_us > 0 || c->timeout_seconds > 0;
}

int ar_wait(const st_comm *c, int count, MPI_Request *requests)
{
    return st_comm_wait(c, count, requests, c->timeout_seconds);
}

/* Sleep us microseconds. */
static void nap_us(long us)
{
    struct timespec t = {us / 1000000, 1000L * (us % 1000000)};
    nanosleep(&t, NULL);
}

int ar_poll(const st_comm *c, double timeout, ar_poll_fn poll, void *ctx)
{
    double start = st_now();
    long backoff_us = 0; /* 0 until the wait is long */
    for (int polls = 0;; polls++) {
        ar_poll_state state = AR_POLL_WAITING;
        int rc = poll(ctx, &state);
        if (rc != MPI_SUCCESS)
            return rc;
        if (state == AR_POLL_DONE)
            return MPI_SUCCESS;
        if (state == AR_POLL_PROGRESS) { /* a new wait starts */
            start = st_now();
            backoff_us = 0;
            polls = -1;
            continue;
        }
        if (polls < SPIN_POLLS)
            continue;
        double waited = st_now() - start;
        if (timeout > 0 && waited >= timeout)
            return ST_COMM_TIMEOUT;
        if (waited >= BACKOFF_AFTER_SECONDS)
            backoff_us = !backoff_us ? BACKOFF_FIRST_US
                         : 2 * backoff_us < BACKOFF_MAX_US ? 2 * backoff_us : BACKOFF_MAX_US;
        long us = backoff_us > c->idle_sleep_us ? backoff_us : c->idle_sleep_us;
        if (us > 0)
            nap_us(us);
        else
            sched_yield();
    }
}

/* Requests st_comm_wait completes. */
typedef struct pending_requests {
    int count;
    MPI_Request *requests;
} pending_requests;

/* ar_poll_fn: test every request; done when none is pending. */
static int test_requests(void *ctx, ar_poll_state *state)
{
    pending_requests *p = ctx;
    int pending = 0;
    for (int i = 0; i < p->count; i++) {
        if (p->requests[i] == MPI_REQUEST_NULL)
            continue;
        int done = 0; /* a completed request becomes MPI_REQUEST_NULL */
        int rc = MPI_Test(&p->requests[i], &done, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS)
            return rc;
        pending += !done;
    }
    *state = pending ? AR_POLL_WAITING : AR_POLL_DONE;
    return MPI_SUCCESS;
}

int st_comm_wait(const st_comm *c, int count, MPI_Request *requests, double timeout)
{
    pending_requests p = {count, requests};
    return ar_poll(c, timeout, test_requests, &p);
}

st_status ar_exchange(ar_call *call, const float *send, size_t send_n, int dst, float *recv,
                      size_t recv_n, int src)
{
    const st_comm *c = call->c;
    if (send_n == 0 && recv_n == 0)
        return ST_OK;
    int rc = transfer(c, send, send_n, dst, recv, recv_n, src);
    if (rc != MPI_SUCCESS) {
        char what[160];
        snprintf(what, sizeof what, "all-reduce %s: rank %d sending %zu floats to rank %d and "
                 "receiving %zu from rank %d", call->algo, c->rank, send_n, dst, recv_n, src);
        return ar_mpi_failed(c, call->err, rc, what);
    }
    ar_account(call, send_n, dst, recv_n, src);
    return ST_OK;
}

void ar_account(ar_call *call, size_t send_n, int dst, size_t recv_n, int src)
{
    const st_comm *c = call->c;
    int here = st_comm_supernode(c, c->rank);
    uint64_t send_bytes = send_n * sizeof(float), recv_bytes = recv_n * sizeof(float);
    uint64_t paced_bytes = 0;
    if (send_n) {
        call->stats->bytes_sent += send_bytes;
        call->stats->messages++;
        if (st_comm_supernode(c, dst) != here) {
            call->stats->bytes_crossing += send_bytes;
            paced_bytes = send_bytes;
        }
    }
    if (recv_n && st_comm_supernode(c, src) != here && recv_bytes > paced_bytes)
        paced_bytes = recv_bytes;
    double f = c->sim_cross_bandwidth;
    if (paced_bytes && f > 0 && f < 1) {
        double extra = (1 / f - 1) * c->inside_seconds_per_byte * (double)paced_bytes;
        wait_seconds(extra);
        call->stats->paced_seconds += extra;
    }
}

ar_range ar_blocks(size_t n, int blocks, int first, int nblocks)
{
    ar_range range;
    size_t last_start, last_count;
    st_allreduce_part(n, blocks, first, &range.start, &range.count);
    if (nblocks <= 0) {
        range.count = 0;
        return range;
    }
    st_allreduce_part(n, blocks, first + nblocks - 1, &last_start, &last_count);
    range.count = last_start + last_count - range.start;
    return range;
}

ar_range ar_part(const ar_call *call, size_t n)
{
    return ar_blocks(n, call->c->size, call->c->rank, 1);
}
