/* All-reduce "onesided": CaffeGPI's trees over MPI-3 one-sided
 * communication. The buffer is reduced up a binomial tree from the high
 * ranks to rank 0 and the sum broadcast back down it from rank 0 to the
 * high ranks; every transfer is one-sided: data published in the sender's
 * window, a notification written into the receiver's window, the data
 * fetched by the receiver. No rank posts a receive or joins a collective.
 *
 * Tree: binomial.c's. Rank r > 0's parent is r - m, m the lowest set bit
 * of r; its children are r + 1, r + 2, r + 4, ... below r + m (every
 * power of two below P for rank 0) and below P. Reduce: a rank adds its
 * children's partial sums into its buffer in the order r + 1, r + 2,
 * r + 4, ... and passes the result to its parent; rank 0 ends with the
 * sum. Broadcast: each rank passes rank 0's sum on to its children. The
 * additions are binomial.c's, in its order: the same bits as binomial,
 * and every rank gets rank 0's.
 *
 * Pipelined: the buffer moves in segments of
 * ST_ALLREDUCE_ONESIDED_SEGMENT_FLOATS (128 KB), so that segment s goes
 * down the broadcast tree while segment s + 1 goes up the reduce tree and
 * the full-duplex links carry both at once (CaffeGPI's point, made there
 * across layers). A rank does whatever the arrived data allow next,
 * reduce or broadcast, polling: it waits only for data it needs.
 *
 * Windows: one per communicator, MPI_Win_allocate'd by the first call
 * (after a barrier polled with the timeout), kept until st_comm_free,
 * passive target (MPI_Win_lock_all once). On every rank: a header of 1 + D
 * notification words (int64, D = ceil(log2 P)), word 0 written by the
 * parent and word 1 + j by the child r + 2^j; then two rings of W = 2 D +
 * 2 segments (the segments in flight on a path up and down the tree): the
 * up ring, where the rank publishes its partial sums for its parent, and
 * the down ring, where it publishes the broadcast for its children. The
 * window's size depends on P alone: 2 W segments a rank.
 *
 * A transfer of segment s from rank a to rank b: a copies it into its
 * ring at position s mod W (local stores, then MPI_Win_sync) and writes
 * into b's word the count of segments the edge has carried, over all
 * calls (MPI_Rget_accumulate with MPI_REPLACE): epoch numbers, never
 * reset, and every rank knows the count it waits for because every rank
 * makes the same calls. b reads its own word (MPI_Fetch_and_op with
 * MPI_NO_OP, atomic with the accumulate; a flush to itself), and once the
 * count is there fetches the segment (MPI_Rget). CaffeGPI writes the data
 * into the receiver instead (GASPI's write_notify), and MPI_Put +
 * MPI_Win_flush would too; but MPICH's ch4 device over UCX emulates RMA
 * within a node with messages the target handles when it next enters MPI,
 * so a flush to a stopped (or merely busy) rank blocks the caller inside
 * MPI, beyond any timeout (measured here: 2 s against a rank sleeping
 * 2 s). Every remote operation here is request-based instead and polled
 * with MPI_Test; only the flushes to this rank itself block, and briefly.
 * Notifications coalesce: while one is in flight on an edge, later
 * segments wait and the next one carries the latest count.
 *
 * Reuse of the rings: a rank publishes its partial sum of segment s >= W
 * only after it fetched the broadcast of segment s - W, which its parent
 * published only after fetching and adding segment s - W; it publishes
 * the broadcast of segment s only after every child's segment s came up,
 * which each child published only after fetching the broadcast of segment
 * s - W. Across calls the same holds: a rank ends call i only when it
 * holds all of call i and its notifications were taken, so its parent has
 * fetched everything it published in call i and it has fetched everything
 * its parent published. One ring per direction, no double buffering.
 *
 * Waiting: ar_poll, as the two-sided algorithms wait (spinning, then
 * sleeping c->idle_sleep_us or backing off); c->timeout_seconds without
 * progress fails the call, naming the rank waited for.
 *
 * Restrictions: none (any P; n = 0 or P = 1 return at once). Its
 * reduce-scatter is its whole all-reduce and its all-gather the ring's,
 * as binomial's. References: Kuehn, Keuper and Pfreundt, "Using GPI-2 for
 * distributed memory parallelization of the Caffe toolbox to speed up
 * deep neural network training" (CaffeGPI, 2017); MPI-3.1, chapter 11.
 *
 * Cost, P ranks, n bytes, D = ceil(log2 P) levels, k = ceil(n / 128 KB)
 * segments of m = n / k bytes (latency alpha, per-byte transfer beta,
 * per-byte reduction gamma). A transfer costs 2 alpha, the notification
 * and the fetch. The first segment goes up D levels and down D; the
 * others follow it at rank 0's pace, which per segment fetches and adds D
 * children's while they fetch its broadcast (both directions at once):
 *     4 D alpha + 2 D m beta + D m gamma
 *       + (k - 1) (2 alpha + D m beta + D m gamma).
 * One segment (n <= 128 KB): binomial's cost with twice its alpha; long
 * buffers: about D n (beta + gamma), half binomial's transfer term but
 * still D / (2 (P-1)/P) times the ring's. With supernodes of Q ranks the
 * levels of mask >= Q cross, as binomial's. Memory: the window, 2 (2 D +
 * 2) 128 KB a rank, and a segment of staging a child. */
#include "comm.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dist/allreduce_cost.h"

#define SEGMENT ((size_t)ST_ALLREDUCE_ONESIDED_SEGMENT_FLOATS)
/* The header's bytes are rounded up to this, the rings' alignment. */
#define HEADER_ALIGN 64

enum { UP_RING, DOWN_RING };

/* This rank's place in the trees and the windows' layout, computed alike
 * on every rank. */
typedef struct tree {
    int depth;       /* D = ceil(log2 P) */
    int ring;        /* W: segments per ring */
    int parent;      /* -1 on rank 0 */
    int parent_word; /* this rank's word in its parent's window */
    int children;    /* C: the children are rank + 2^j, j < C */
    MPI_Aint header; /* bytes before the rings */
    MPI_Aint bytes;  /* bytes of one ring */
} tree;

static tree tree_of(int p, int r)
{
    tree t;
    memset(&t, 0, sizeof t);
    while ((1L << t.depth) < p)
        t.depth++;
    t.ring = 2 * t.depth + 2;
    long low = r ? r & -r : 1L << t.depth; /* rank 0: every mask below 2^D */
    t.parent = r ? r - (int)low : -1;
    for (t.parent_word = 1; r && (1L << (t.parent_word - 1)) < low; t.parent_word++)
        continue;
    while ((1L << t.children) < low && r + (1L << t.children) < p)
        t.children++;
    size_t words = (size_t)(1 + t.depth) * sizeof(int64_t);
    t.header = (MPI_Aint)((words + HEADER_ALIGN - 1) / HEADER_ALIGN * HEADER_ALIGN);
    t.bytes = (MPI_Aint)((size_t)t.ring * SEGMENT * sizeof(float));
    return t;
}

/* Byte offset of segment s's position in ring `which` of a window. */
static MPI_Aint ring_at(const tree *t, int which, long s)
{
    size_t position = (size_t)(s % t->ring) * SEGMENT * sizeof(float);
    return t->header + which * t->bytes + (MPI_Aint)position;
}

/* One call: the buffer, how far it got up and down the trees, the
 * requests in flight. Edge 0 is the parent, edge 1 + j child j. */
typedef struct onesided_run {
    ar_call *call;
    struct st_comm_rma *rma;
    tree t;
    float *buf;
    size_t n;
    long segments;                    /* k */
    long up;                          /* segments reduced (and published for the parent) */
    int added;                        /* children's partial sums of segment `up` added */
    int asked[AR_RMA_EDGES];          /* edge 1 + j: child j's segment `up` fetched or on the way */
    MPI_Request fetch[AR_RMA_EDGES];  /* edge 1 + j: that fetch; edge 0: the broadcast's */
    long down;                        /* segments broadcast: here, and published */
    int down_asked;                   /* the parent's segment `down` fetched or on the way */
    long told[AR_RMA_EDGES];          /* segments notified on each edge */
    MPI_Request notify[AR_RMA_EDGES]; /* the notification in flight on each edge */
} onesided_run;

static ar_range segment(const onesided_run *o, long s)
{
    ar_range range = {(size_t)s * SEGMENT, SEGMENT};
    if (range.start + range.count > o->n)
        range.count = o->n - range.start;
    return range;
}

/* Whether this rank's word says that segment s is there (*yes). Returns
 * an MPI error code. */
static int notified(const onesided_run *o, int word, long s, int *yes)
{
    MPI_Win win = o->rma->win;
    int me = o->call->c->rank;
    int64_t count = 0;
    *yes = 0;
    int rc = MPI_Fetch_and_op(NULL, &count, MPI_INT64_T, me,
                              (MPI_Aint)((size_t)word * sizeof(int64_t)), MPI_NO_OP, win);
    if (rc == MPI_SUCCESS)
        rc = MPI_Win_flush(me, win);
    *yes = rc == MPI_SUCCESS && count >= (int64_t)(o->rma->tickets + (uint64_t)s + 1);
    return rc;
}

/* Start fetching segment s of `from`'s ring `which` into dst, once the
 * notification in this rank's word says it is there (*asked). */
static int fetch_when_notified(onesided_run *o, int word, int from, int which, long s,
                               float *dst, MPI_Request *request, int *asked)
{
    int yes = 0, rc = notified(o, word, s, &yes);
    if (rc != MPI_SUCCESS || !yes)
        return rc;
    ar_range seg = segment(o, s);
    *asked = 1;
    return MPI_Rget(dst, (int)seg.count, MPI_FLOAT, from, ring_at(&o->t, which, s),
                    (int)seg.count, MPI_FLOAT, o->rma->win, request);
}

/* Whether request is complete (*done; a completed one becomes
 * MPI_REQUEST_NULL). */
static int completed(MPI_Request *request, int *done)
{
    *done = 1;
    if (*request == MPI_REQUEST_NULL)
        return MPI_SUCCESS;
    return MPI_Test(request, done, MPI_STATUS_IGNORE);
}

/* Publish segment s of the buffer in this rank's ring `which` for the
 * ranks [count] that will fetch it (counted as sent to them). */
static int publish(const onesided_run *o, int which, long s, const int *to, int count)
{
    ar_range seg = segment(o, s);
    memcpy(o->rma->base + ring_at(&o->t, which, s), o->buf + seg.start, seg.count * sizeof(float));
    for (int i = 0; i < count; i++)
        ar_account(o->call, seg.count, to[i], 0, MPI_PROC_NULL);
    return MPI_Win_sync(o->rma->win);
}

/* Whether the up ring's position for segment `up` may still be fetched
 * by the parent: the broadcast of segment up - W is not here yet. */
static int ring_full(const onesided_run *o)
{
    return o->t.parent >= 0 && o->up >= o->t.ring && o->down <= o->up - o->t.ring;
}

/* Reduce: fetch the children's segments as they are notified, add them
 * in order, publish each sum for the parent. */
static int reduce_step(onesided_run *o, int *moved)
{
    const tree *t = &o->t;
    int me = o->call->c->rank, rc = MPI_SUCCESS;
    while (rc == MPI_SUCCESS && o->up < o->segments && !ring_full(o)) {
        ar_range seg = segment(o, o->up);
        for (int j = 0; j < t->children && rc == MPI_SUCCESS; j++) {
            int was = o->asked[1 + j];
            if (!was)
                rc = fetch_when_notified(o, 1 + j, me + (1 << j), UP_RING, o->up,
                                         o->rma->staging + (size_t)j * SEGMENT, &o->fetch[1 + j],
                                         &o->asked[1 + j]);
            *moved |= o->asked[1 + j] != was;
        }
        for (int done = 1; rc == MPI_SUCCESS && done && o->added < t->children;) {
            int j = o->added;
            if (o->asked[1 + j])
                rc = completed(&o->fetch[1 + j], &done);
            if (rc != MPI_SUCCESS || !o->asked[1 + j] || !done)
                return rc;
            ar_sum(o->call, o->buf + seg.start, o->rma->staging + (size_t)j * SEGMENT, seg.count);
            ar_account(o->call, 0, MPI_PROC_NULL, seg.count, me + (1 << j));
            o->added++;
            *moved = 1;
        }
        if (t->parent >= 0)
            rc = publish(o, UP_RING, o->up, &t->parent, 1);
        o->up++;
        o->added = 0;
        memset(o->asked, 0, sizeof o->asked);
        *moved = 1;
    }
    return rc;
}

/* Broadcast: fetch each reduced segment from the parent (rank 0: its own
 * sum) into the buffer and publish it for the children. */
static int broadcast_step(onesided_run *o, int *moved)
{
    const tree *t = &o->t;
    int to[AR_RMA_EDGES], rc = MPI_SUCCESS, done = 1;
    for (int j = 0; j < t->children; j++)
        to[j] = o->call->c->rank + (1 << j);
    while (rc == MPI_SUCCESS && o->down < o->up) {
        if (t->parent >= 0) {
            if (!o->down_asked)
                rc = fetch_when_notified(o, 0, t->parent, DOWN_RING, o->down,
                                         o->buf + segment(o, o->down).start, &o->fetch[0],
                                         &o->down_asked);
            if (rc == MPI_SUCCESS && o->down_asked)
                rc = completed(&o->fetch[0], &done);
            if (rc != MPI_SUCCESS || !o->down_asked || !done)
                return rc;
            ar_account(o->call, 0, MPI_PROC_NULL, segment(o, o->down).count, t->parent);
        }
        if (t->children)
            rc = publish(o, DOWN_RING, o->down, to, t->children);
        o->down++;
        o->down_asked = 0;
        *moved = 1;
    }
    return rc;
}

/* Edge e's peer, its word there and the segments published for it. */
static void edge(const onesided_run *o, int e, int *peer, int *word, long *published)
{
    *peer = e ? o->call->c->rank + (1 << (e - 1)) : o->t.parent;
    *word = e ? 0 : o->t.parent_word;
    *published = e ? o->down : o->up;
}

/* Notify each edge of what was published for it, one notification in
 * flight per edge; *idle when none is in flight or due. */
static int notify_step(onesided_run *o, int *moved, int *idle)
{
    *idle = 1;
    int rc = MPI_SUCCESS;
    for (int e = o->t.parent >= 0 ? 0 : 1; e <= o->t.children && rc == MPI_SUCCESS; e++) {
        int peer, word, done = 1;
        long published;
        edge(o, e, &peer, &word, &published);
        int was = o->notify[e] != MPI_REQUEST_NULL;
        rc = completed(&o->notify[e], &done);
        *moved |= was && done;
        if (rc != MPI_SUCCESS || !done || o->told[e] == published) {
            *idle &= done;
            continue;
        }
        int64_t *notice = o->rma->notice[e];
        notice[0] = (int64_t)(o->rma->tickets + (uint64_t)published);
        rc = MPI_Rget_accumulate(&notice[0], 1, MPI_INT64_T, &notice[1], 1, MPI_INT64_T, peer,
                                 (MPI_Aint)((size_t)word * sizeof(int64_t)), 1, MPI_INT64_T,
                                 MPI_REPLACE, o->rma->win, &o->notify[e]);
        o->told[e] = published;
        *idle = 0;
        *moved = 1;
    }
    return rc;
}

/* ar_poll_fn: go as far up and down as the arrived data allow. */
static int look(void *ctx, ar_poll_state *state)
{
    onesided_run *o = ctx;
    int moved = 0, idle = 0;
    int rc = reduce_step(o, &moved);
    if (rc == MPI_SUCCESS)
        rc = broadcast_step(o, &moved);
    if (rc == MPI_SUCCESS)
        rc = notify_step(o, &moved, &idle);
    *state = o->down == o->segments && idle ? AR_POLL_DONE
             : moved                        ? AR_POLL_PROGRESS
                                            : AR_POLL_WAITING;
    return rc;
}

/* The failure rc (ST_COMM_TIMEOUT or an MPI error) of run o, naming what
 * it waited for. Its requests in flight are left as they are: MPICH
 * refuses MPI_Request_free on an RMA request (a fatal "invalid request
 * (kind=12)" under MPI_ERRORS_ARE_FATAL, which ended a timed-out rank
 * without its message) and MPI-3.1 does not define MPI_Cancel for them.
 * The window is marked abandoned: later calls fail at once, st_comm_free
 * leaves it; the run ends (st_cluster_abort) with the staging and the
 * caller's buffer still allocated. */
static st_status run_failed(onesided_run *o, int rc)
{
    const st_comm *c = o->call->c;
    char what[192];
    int r = c->rank;
    if (rc != ST_COMM_TIMEOUT)
        snprintf(what, sizeof what, "all-reduce onesided: rank %d's one-sided operations "
                 "(segment %ld of %ld)", r, o->down + 1, o->segments);
    else if (o->up < o->segments && !ring_full(o))
        snprintf(what, sizeof what, "all-reduce onesided: rank %d waiting for rank %d's partial "
                 "sum of segment %ld of %ld", r, r + (1 << o->added), o->up + 1, o->segments);
    else if (o->down < o->segments)
        snprintf(what, sizeof what, "all-reduce onesided: rank %d waiting for rank %d's "
                 "broadcast of segment %ld of %ld", r, o->t.parent, o->down + 1, o->segments);
    else
        snprintf(what, sizeof what, "all-reduce onesided: rank %d waiting for its neighbours "
                 "in the tree to take its last notifications", r);
    for (int e = 0; e < AR_RMA_EDGES; e++)
        if (o->fetch[e] != MPI_REQUEST_NULL || o->notify[e] != MPI_REQUEST_NULL)
            o->rma->abandoned = 1;
    return ar_mpi_failed(c, o->call->err, rc, what);
}

/* A barrier of c's ranks, polled with c's timeout. */
static int barrier(const st_comm *c)
{
    MPI_Request request;
    int rc = MPI_Ibarrier(c->comm, &request);
    return rc == MPI_SUCCESS ? ar_wait(c, 1, &request) : rc;
}

/* Collective, on the first call: make c's window for tree t, its
 * notification words zero on every rank before any rank writes one, and
 * the staging for t's children. */
static st_status open_window(ar_call *call, const tree *t)
{
    const st_comm *c = call->c;
    struct st_comm_rma *rma = c->rma;
    if (t->children) {
        rma->staging = malloc((size_t)t->children * SEGMENT * sizeof(float));
        if (!rma->staging)
            return st_fail(call->err, ST_ENOMEM, "all-reduce onesided: out of memory for %d "
                           "segments of staging", t->children);
    }
    MPI_Info info = MPI_INFO_NULL;
    MPI_Win win = MPI_WIN_NULL;
    const char *what = "all-reduce onesided: the barrier before making the window";
    int rc = barrier(c); /* a stopped peer times out here, not in MPI_Win_allocate */
    if (rc == MPI_SUCCESS) {
        what = "all-reduce onesided: MPI_Win_allocate";
        rc = MPI_Info_create(&info);
    }
    if (rc == MPI_SUCCESS) /* only MPI_REPLACE and MPI_NO_OP on the notification words */
        rc = MPI_Info_set(info, "accumulate_ops", "same_op_no_op");
    if (rc == MPI_SUCCESS)
        rc = MPI_Win_allocate(t->header + 2 * t->bytes, 1, info, c->comm, &rma->base, &win);
    if (info != MPI_INFO_NULL)
        MPI_Info_free(&info);
    if (rc == MPI_SUCCESS) {
        what = "all-reduce onesided: MPI_Win_lock_all";
        rc = MPI_Win_lock_all(MPI_MODE_NOCHECK, win);
    }
    if (rc == MPI_SUCCESS) {
        rma->win = win;
        memset(rma->base, 0, (size_t)t->header);
        rc = MPI_Win_sync(win);
    }
    if (rc == MPI_SUCCESS) {
        what = "all-reduce onesided: the barrier after making the window";
        rc = barrier(c);
    }
    return rc == MPI_SUCCESS ? ST_OK : ar_mpi_failed(c, call->err, rc, what);
}

st_status st_allreduce_onesided(float *buf, size_t n, const st_comm *c,
                                st_allreduce_stats *stats, st_error *err)
{
    ar_call call;
    st_status st = ar_begin(&call, "onesided", n, 0, c, stats, err);
    if (st != ST_OK || n == 0 || c->size == 1)
        goto done;
    if (!c->rma) {
        st = st_fail(err, ST_EINTERNAL, "all-reduce onesided: the communicator has no window "
                     "state (st_comm_init makes it)");
        goto done;
    }
    if (c->rma->abandoned) {
        st = st_fail(err, ST_EIO, "all-reduce onesided: an earlier call failed with one-sided "
                     "operations in flight; the window cannot be used again");
        goto done;
    }
    onesided_run o;
    memset(&o, 0, sizeof o);
    o.call = &call;
    o.rma = c->rma;
    o.t = tree_of(c->size, c->rank);
    o.buf = buf;
    o.n = n;
    o.segments = (long)((n + SEGMENT - 1) / SEGMENT);
    for (int e = 0; e < AR_RMA_EDGES; e++)
        o.fetch[e] = o.notify[e] = MPI_REQUEST_NULL;
    if (c->rma->win == MPI_WIN_NULL && (st = open_window(&call, &o.t)) != ST_OK)
        goto done;
    int rc = ar_poll(c, c->timeout_seconds, look, &o);
    if (rc != MPI_SUCCESS) {
        st = run_failed(&o, rc);
        goto done;
    }
    c->rma->tickets += (uint64_t)o.segments;
done:
    return ar_end(&call, st);
}
