/* The multi-node mode over MPICH; see cluster.h. Linked into the binary
 * that mpirun starts; single-node builds link cluster_single.c instead. */
#include "dist/cluster.h"

#include <errno.h>
#include <float.h>
#include <limits.h>
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dist/allreduce.h"
#include "dist/allreduce_cost.h"
#include "base/clock.h"
#include "base/cores.h"
#include "cluster_internal.h"

/* Tags and probing: every candidate runs this many iterations under auto
 * unless told otherwise. */
#define DEFAULT_PROBE_ITERATIONS 3
/* auto probes only the algorithms the cost formulas put within this
 * factor of the cheapest (and mpi, whose formula is a guess): at 1,024
 * ranks a probe of ps, whose root takes every message, costs more than
 * the run saves. */
#define PROBE_WITHIN 4.0
#define MAX_WORKERS 4096
/* Waiting ranks poll and sleep this long between polls when the node's
 * ranks x workers outnumber its cores (spinning would take the core from
 * the peer being waited for: a 4 KB all-reduce took 50 ms that way). */
#define OVERSUBSCRIBED_SLEEP_US 20

/* One worker's view: its communicator, the algorithm it uses, the probe. */
typedef struct cluster_worker {
    MPI_Comm comm;
    st_comm c;
    int algorithm;               /* index in st_allreduce_algos; -1 while probing */
    long probe_first;            /* first iteration it saw, or -1 */
    double probe_best[16];       /* fastest call of each candidate, seconds */
    double predicted[16];        /* the cost formulas' time of each, seconds */
    int candidates[16], n_candidates; /* those probed, in this order */
    st_allreduce_stats stats;
    int half_algorithm;          /* partitioned: the reduce-scatter's algorithm, which the
                                    all-gather of the same iteration uses */
    double half_seconds;         /* and its time, which the probe adds to the all-gather's */
    int last_algorithm;          /* the last all-reduce's or reduce-scatter's, or -1 */
    char label[48];              /* its name in the report, "" for "worker W" */
} cluster_worker;

struct st_cluster {
    int rank, size;
    double timeout;              /* --peer-timeout, seconds; 0: none */
    st_comm world;               /* MPI_COMM_WORLD, for waiting on its requests */
    st_cluster_opts o;
    int algorithm;               /* chosen index, -1 for auto */
    int workers;
    cluster_worker *w;           /* [workers] */
    double probe_table[16];      /* auto: slowest rank's fastest call, worker 0 */
    double predicted[16];        /* and the formulas' time of each */
    int probed;
    st_net_params net;           /* auto: the network, measured when the workers start */
    int per_layer;               /* auto decides per channel */
    /* --mp-group G: this rank's group and block (cluster.h), MPI_COMM_NULL
     * without; the floats they moved, for the report */
    int mp_size;
    MPI_Comm mp_group, mp_block;
    double mp_exchanged, mp_reduced;
};

static double now_seconds(void)
{
    return MPI_Wtime();
}

st_status st_cluster_init(st_cluster **out, int *argc, char ***argv, st_error *err)
{
    *out = NULL;
    if (!st_cluster_launched())
        return ST_OK;
    int provided = 0;
    if (MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS)
        return st_fail(err, ST_EIO, "MPI_Init_thread failed");
    if (provided < MPI_THREAD_MULTIPLE) {
        MPI_Finalize();
        return st_fail(err, ST_EIO, "the MPI library gives thread level %d, the workers need "
                       "MPI_THREAD_MULTIPLE (%d)", provided, MPI_THREAD_MULTIPLE);
    }
    st_cluster *c = st_calloc(1, sizeof *c, "cluster", err);
    if (!c) {
        MPI_Finalize();
        return ST_ENOMEM;
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &c->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &c->size);
    c->algorithm = -1;
    c->world.comm = MPI_COMM_WORLD;
    c->world.rank = c->rank;
    c->world.size = c->size;
    c->mp_group = c->mp_block = MPI_COMM_NULL;
    *out = c;
    return ST_OK;
}

void st_cluster_set_timeout(st_cluster *c, double seconds)
{
    if (c)
        c->timeout = c->world.timeout_seconds = seconds;
}

/* Complete a collective request of comm (c's world or a worker's): polled
 * with back-off (st_comm_wait), given up after the timeout unless patient. */
static st_status wait_peers(const st_cluster *c, const st_comm *comm, MPI_Request *request,
                            int patient, const char *what, st_error *err)
{
    int rc = st_comm_wait(comm, 1, request, patient ? 0.0 : c->timeout);
    if (rc == ST_COMM_TIMEOUT)
        return st_fail(err, ST_EIO, "%s: no word from the other ranks for %g s (a rank "
                       "stopped, hung or is lost; --peer-timeout sets how long to wait): "
                       "ending every rank", what, c->timeout);
    if (rc != MPI_SUCCESS)
        return st_fail(err, ST_EIO, "%s failed (MPI error %d)", what, rc);
    return ST_OK;
}

void st_cluster_free(st_cluster *c)
{
    if (!c)
        return;
    for (int w = 0; w < c->workers && c->w; w++) {
        st_comm_free(&c->w[w].c); /* collective: the one-sided algorithm's window */
        if (c->w[w].comm != MPI_COMM_NULL)
            MPI_Comm_free(&c->w[w].comm);
    }
    free(c->w);
    if (c->mp_group != MPI_COMM_NULL)
        MPI_Comm_free(&c->mp_group);
    if (c->mp_block != MPI_COMM_NULL)
        MPI_Comm_free(&c->mp_block);
    free(c);
    MPI_Finalize();
}

/* How long the message waits before MPI_Abort: mpiexec's proxy reads a
 * rank's stderr pipe and its abort request in one event loop; handled in
 * the wrong order, the abort kills the job before the message is
 * forwarded (1 in 7 timed-out runs ended without a word). */
#define ABORT_MESSAGE_DELAY_NS 200000000L

void st_cluster_abort(st_cluster *c, const st_error *err)
{
    if (!c)
        return;
    fprintf(stderr, "singletrain: rank %d: %s\n", c->rank, err->msg);
    fflush(stdout);
    fflush(stderr);
    struct timespec pause = {0, ABORT_MESSAGE_DELAY_NS};
    while (nanosleep(&pause, &pause) != 0 && errno == EINTR)
        ;
    MPI_Abort(MPI_COMM_WORLD, 1);
}

int st_cluster_rank(const st_cluster *c)
{
    return c ? c->rank : 0;
}

int st_cluster_size(const st_cluster *c)
{
    return c ? c->size : 1;
}

st_status st_cluster_configure(st_cluster *c, const st_cluster_opts *o, int *algorithm,
                               st_error *err)
{
    st_status st = st_cluster_check_opts(o, algorithm, err);
    if (st != ST_OK || !c)
        return st;
    if (st_allreduce_count > sizeof c->probe_table / sizeof c->probe_table[0])
        return st_fail(err, ST_EINTERNAL, "more all-reduce algorithms than probe slots");
    c->o = *o;
    if (c->o.probe_iterations <= 0)
        c->o.probe_iterations = DEFAULT_PROBE_ITERATIONS;
    c->algorithm = *algorithm;
    c->per_layer = o->granularity && strcmp(o->granularity, "layer") == 0;
    return ST_OK;
}

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
        st = wait_peers(c, &c->world, &request, 0, "agreeing on the set-up", &wait_err);
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
        st = wait_peers(c, &c->world, &request, c->rank != 0, "gathering how the ranks ended",
                        &wait_err);
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

/* auto: the network the cost formulas see (st_comm_measure_net between
 * ranks 0 and 1, the same figures on every rank), with the supernodes of
 * --supernode-size and the crossing bandwidth of --sim-cross-bandwidth. */
static st_status measure_net(st_cluster *c, st_error *err)
{
    st_status st = st_comm_measure_net(&c->world, &c->net, err);
    if (st != ST_OK)
        return st;
    c->net.supernode = c->o.supernode_size;
    if (c->o.sim_cross_bandwidth > 0)
        c->net.cross_beta = c->net.beta / c->o.sim_cross_bandwidth;
    return ST_OK;
}

st_status st_cluster_start_workers(st_cluster *c, int workers, st_error *err)
{
    if (workers < 1 || workers > MAX_WORKERS)
        return st_fail(err, ST_EUSAGE, "%d workers: expected 1 to %d", workers, MAX_WORKERS);
    c->w = calloc((size_t)workers, sizeof *c->w);
    if (!c->w)
        return st_fail(err, ST_ENOMEM, "out of memory for the workers' communicators");
    c->workers = workers;
    for (int w = 0; w < workers; w++)
        c->w[w].comm = MPI_COMM_NULL;
    MPI_Comm node;
    int local = 1;
    if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) ==
        MPI_SUCCESS) {
        MPI_Comm_size(node, &local);
        MPI_Comm_free(&node);
    }
    int sleep_us = local * workers > st_usable_cores() ? OVERSUBSCRIBED_SLEEP_US : 0;
    for (int w = 0; w < workers; w++) {
        cluster_worker *cw = &c->w[w];
        if (MPI_Comm_dup(MPI_COMM_WORLD, &cw->comm) != MPI_SUCCESS)
            return st_fail(err, ST_EIO, "MPI_Comm_dup failed for worker %d", w);
        st_status st = st_comm_init(&cw->c, cw->comm, c->o.supernode_size,
                                    c->o.sim_cross_bandwidth, err);
        if (st != ST_OK)
            return st;
        cw->c.idle_sleep_us = sleep_us;
        cw->c.timeout_seconds = c->timeout;
        cw->algorithm = c->algorithm;
        cw->last_algorithm = -1;
        cw->probe_first = -1;
        for (size_t a = 0; a < st_allreduce_count; a++)
            cw->probe_best[a] = DBL_MAX;
    }
    return c->algorithm < 0 ? measure_net(c, err) : ST_OK;
}

/* One Ibcast from rank 0 of bytes [n] (n below 2^31), waited for with the timeout. */
static st_status bcast_bytes(st_cluster *c, void *bytes, size_t n, const char *what,
                             st_error *err)
{
    MPI_Request request;
    if (MPI_Ibcast(bytes, (int)n, MPI_BYTE, 0, MPI_COMM_WORLD, &request) != MPI_SUCCESS)
        return st_fail(err, ST_EIO, "MPI_Ibcast of %s failed", what);
    return wait_peers(c, &c->world, &request, 0, what, err);
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
                 ? wait_peers(c, &c->world, &request, 0, "--trace's clock barrier", err)
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
                 ? wait_peers(c, &c->world, &request, 1, "the trace's lengths", err)
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
                 ? wait_peers(c, &c->world, &request, 1, "the trace's events", err)
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

st_status st_cluster_measure_net(st_cluster *c, st_net_params *np, st_error *err)
{
    if (!c)
        return st_fail(err, ST_EINTERNAL, "measuring the network needs several ranks");
    return st_comm_measure_net(&c->world, np, err);
}

st_status st_cluster_broadcast(st_cluster *c, float *x, size_t n, st_error *err)
{
    for (size_t at = 0; at < n;) {
        int k = n - at > (size_t)(1 << 30) ? 1 << 30 : (int)(n - at);
        MPI_Request request;
        if (MPI_Ibcast(x + at, k, MPI_FLOAT, 0, MPI_COMM_WORLD, &request) != MPI_SUCCESS)
            return st_fail(err, ST_EIO, "MPI_Ibcast of the initial weights failed");
        st_status st = wait_peers(c, &c->world, &request, 0, "the initial weights' broadcast",
                                  err);
        if (st != ST_OK)
            st_cluster_abort(c, err);
        at += (size_t)k;
    }
    return ST_OK;
}

st_status st_cluster_control(st_cluster *c, int w, double *values, int n, int patient,
                             st_error *err)
{
    MPI_Request request;
    if (MPI_Iallreduce(MPI_IN_PLACE, values, n, MPI_DOUBLE, MPI_SUM, c->w[w].comm, &request) !=
        MPI_SUCCESS)
        return st_fail(err, ST_EIO, "worker %d: MPI_Iallreduce of the iteration's control "
                       "values failed", w);
    char what[64];
    snprintf(what, sizeof what, "worker %d, the iteration's control sum", w);
    return wait_peers(c, &c->w[w].c, &request, patient, what, err);
}

/* auto: after every candidate's probe iterations, the slowest rank's
 * fastest call decides (the same figures reach every rank, so every rank
 * picks the same). With model granularity the node's figure is its
 * slowest channel's (among those that sent: with --overlap the workers'
 * channels are idle); the channels' probes all ended an iteration ago,
 * behind the barriers since, so reading them here is safe. */
static st_status decide(st_cluster *c, cluster_worker *cw, int w, st_error *err)
{
    double local[16], slowest[16];
    memcpy(local, cw->probe_best, sizeof local);
    for (int k = 0; !c->per_layer && k < c->workers; k++)
        for (size_t a = 0; a < st_allreduce_count; a++) {
            double t = c->w[k].probe_best[a];
            if (t < DBL_MAX && (local[a] == DBL_MAX || t > local[a]))
                local[a] = t;
        }
    MPI_Request request;
    if (MPI_Iallreduce(local, slowest, (int)st_allreduce_count, MPI_DOUBLE, MPI_MAX, cw->comm,
                       &request) != MPI_SUCCESS)
        return st_fail(err, ST_EIO, "worker %d: MPI_Iallreduce of the probe times failed", w);
    st_status st = wait_peers(c, &cw->c, &request, 0, "the all-reduce probe's times", err);
    if (st != ST_OK)
        return st;
    int best = cw->candidates[0];
    for (int k = 1; k < cw->n_candidates; k++)
        if (slowest[cw->candidates[k]] < slowest[best])
            best = cw->candidates[k];
    cw->algorithm = best;
    if (w == 0) {
        memcpy(c->probe_table, slowest, st_allreduce_count * sizeof slowest[0]);
        memcpy(c->predicted, cw->predicted, st_allreduce_count * sizeof slowest[0]);
        c->probed = 1;
    }
    return ST_OK;
}

/* The algorithm worker w uses at iteration it: the chosen one, or under
 * auto the candidate being probed, deciding once every candidate had its
 * iterations. */
static st_status pick_algorithm(st_cluster *c, cluster_worker *cw, int w, long it, size_t n,
                                int *algorithm, st_error *err)
{
    *algorithm = cw->algorithm;
    if (*algorithm >= 0)
        return ST_OK;
    long probe = c->o.probe_iterations;
    if (cw->probe_first < 0) { /* what to probe, by the cost formulas (those of plan):
                                  * every rank lists the same from the same figures */
        cw->probe_first = it;
        cw->n_candidates =
            st_allreduce_candidates(c->size, (double)n * sizeof(float), &c->net, PROBE_WITHIN,
                                    cw->candidates, cw->predicted);
    }
    long k = (it - cw->probe_first) / probe;
    if (k < (long)cw->n_candidates) {
        *algorithm = cw->candidates[k];
        return ST_OK;
    }
    st_status st = decide(c, cw, w, err);
    *algorithm = cw->algorithm;
    return st;
}

/* A probed call of `seconds` by candidate algorithm. */
static void record_probe(cluster_worker *cw, int algorithm, double seconds)
{
    if (cw->algorithm < 0 && seconds < cw->probe_best[algorithm])
        cw->probe_best[algorithm] = seconds;
}

st_status st_cluster_allreduce(st_cluster *c, int w, long it, float *buf, size_t n,
                               st_error *err)
{
    cluster_worker *cw = &c->w[w];
    int algorithm;
    st_status st = pick_algorithm(c, cw, w, it, n, &algorithm, err);
    if (st != ST_OK)
        return st;
    double t0 = now_seconds();
    cw->last_algorithm = algorithm;
    st = st_allreduce_algos[algorithm].run(buf, n, &cw->c, &cw->stats, err);
    if (st == ST_OK)
        record_probe(cw, algorithm, now_seconds() - t0);
    if (st != ST_OK)
        st_error_prefix(err, "worker %d, --allreduce %s: ", w, st_allreduce_algos[algorithm].name);
    return st;
}

st_status st_cluster_reduce_scatter(st_cluster *c, int w, long it, float *buf, size_t n,
                                    st_error *err)
{
    cluster_worker *cw = &c->w[w];
    int algorithm;
    st_status st = pick_algorithm(c, cw, w, it, n, &algorithm, err);
    if (st != ST_OK)
        return st;
    double t0 = now_seconds();
    cw->last_algorithm = algorithm;
    st = st_allreduce_algos[algorithm].reduce_scatter(buf, n, &cw->c, &cw->stats, err);
    cw->half_algorithm = algorithm;
    cw->half_seconds = now_seconds() - t0;
    if (st != ST_OK)
        st_error_prefix(err, "worker %d, --allreduce %s, reduce-scatter: ", w,
                        st_allreduce_algos[algorithm].name);
    return st;
}

st_status st_cluster_allgather(st_cluster *c, int w, float *buf, size_t n, int *bad,
                               st_error *err)
{
    cluster_worker *cw = &c->w[w];
    int algorithm = cw->half_algorithm;
    int mine = *bad != 0, any = 0;
    MPI_Request request;
    if (MPI_Iallreduce(&mine, &any, 1, MPI_INT, MPI_MAX, cw->comm, &request) != MPI_SUCCESS)
        return st_fail(err, ST_EIO, "worker %d: MPI_Iallreduce of the parts' finiteness flag "
                       "failed", w);
    double t0 = now_seconds();
    st_status st = st_allreduce_algos[algorithm].allgather(buf, n, &cw->c, &cw->stats, err);
    if (st != ST_OK) {
        st_error_prefix(err, "worker %d, --allreduce %s, all-gather: ", w,
                        st_allreduce_algos[algorithm].name);
        return st; /* the caller ends every rank; the flag's request goes with them */
    }
    record_probe(cw, algorithm, cw->half_seconds + now_seconds() - t0);
    char what[64];
    snprintf(what, sizeof what, "worker %d, the parts' finiteness flag", w);
    st = wait_peers(c, &cw->c, &request, 0, what, err);
    if (st == ST_OK)
        *bad = any;
    return st;
}

/* Whether every range fits MPI's int counts; else ST_EINTERNAL (the same
 * on every rank: the ranges are). */
static st_status check_ranges(const size_t *bounds, int ranges, st_error *err)
{
    for (int s = 0; s < ranges; s++)
        if (bounds[s + 1] - bounds[s] > (size_t)INT_MAX)
            return st_fail(err, ST_EINTERNAL, "a slice of %zu floats: the solver state's parts "
                           "move in messages of at most %d", bounds[s + 1] - bounds[s],
                           INT_MAX);
    return ST_OK;
}

/* Range s's parts: counts[q] and displs[q] (from the range's start) of
 * every rank q, and this rank's count. */
static void range_parts(const st_cluster *c, size_t len, int *counts, int *displs, int *mine)
{
    for (int q = 0; q < c->size; q++) {
        size_t start, count;
        st_allreduce_part(len, c->size, q, &start, &count);
        counts[q] = (int)count;
        displs[q] = (int)start;
    }
    *mine = counts[c->rank];
}

/* Gather (way 1) or scatter (way -1) of the parts, range by range; mine
 * is written only by the scatter, full only by the gather. */
static st_status move_parts(st_cluster *c, const size_t *bounds, int ranges, float *mine,
                            size_t owned, int planes, float *full, int way, st_error *err)
{
    st_status st = check_ranges(bounds, ranges, err);
    int *counts = NULL, *displs = NULL;
    if (st == ST_OK) {
        counts = calloc((size_t)c->size, sizeof *counts);
        displs = calloc((size_t)c->size, sizeof *displs);
        if (!counts || !displs)
            st = st_fail(err, ST_ENOMEM, "out of memory for the ranks' parts of the solver "
                         "state");
    }
    const char *what = way > 0 ? "gathering the solver state's parts on rank 0"
                               : "scattering rank 0's solver state in parts";
    size_t count = bounds[ranges];
    int patient = way > 0 && c->rank != 0;
    for (int k = 0; st == ST_OK && k < planes; k++) {
        size_t local = 0;
        for (int s = 0; st == ST_OK && s < ranges; s++) {
            int n;
            range_parts(c, bounds[s + 1] - bounds[s], counts, displs, &n);
            float *part = mine + (size_t)k * owned + local;
            float *range = c->rank == 0 ? full + (size_t)k * count + bounds[s] : NULL;
            MPI_Request request;
            int rc = way > 0 ? MPI_Igatherv(part, n, MPI_FLOAT, range, counts, displs,
                                            MPI_FLOAT, 0, MPI_COMM_WORLD, &request)
                             : MPI_Iscatterv(range, counts, displs, MPI_FLOAT, part, n,
                                             MPI_FLOAT, 0, MPI_COMM_WORLD, &request);
            if (rc != MPI_SUCCESS)
                st = st_fail(err, ST_EIO, "%s: MPI error %d", what, rc);
            else
                st = wait_peers(c, &c->world, &request, patient, what, err);
            local += (size_t)n;
        }
    }
    free(counts);
    free(displs);
    if (st != ST_OK)
        st_cluster_abort(c, err); /* the others may wait for this rank */
    return st;
}

st_status st_cluster_gather_parts(st_cluster *c, const size_t *bounds, int ranges,
                                  const float *mine, size_t owned, int planes, float *full,
                                  st_error *err)
{
    return move_parts(c, bounds, ranges, (float *)mine, owned, planes, full, 1, err);
}

st_status st_cluster_scatter_parts(st_cluster *c, const size_t *bounds, int ranges,
                                   const float *full, float *mine, size_t owned, int planes,
                                   st_error *err)
{
    return move_parts(c, bounds, ranges, mine, owned, planes, (float *)full, -1, err);
}

st_status st_cluster_mp_split(st_cluster *c, int G, st_error *err)
{
    if (G < 1 || c->size % G)
        return st_fail(err, ST_EUSAGE, "--mp-group %d: expected a divisor of the %d ranks", G,
                       c->size);
    c->mp_size = G;
    if (MPI_Comm_split(MPI_COMM_WORLD, c->rank / G, c->rank, &c->mp_group) != MPI_SUCCESS ||
        MPI_Comm_split(MPI_COMM_WORLD, c->rank % G, c->rank, &c->mp_block) != MPI_SUCCESS)
        return st_fail(err, ST_EIO, "MPI_Comm_split of the model-parallel groups failed");
    return ST_OK;
}

/* Wait for one of the model-parallel collectives; a failure ends every
 * rank (the group would wait for this one). */
static st_status mp_wait(st_cluster *c, int rc, MPI_Request *request, int patient,
                         const char *what, st_error *err)
{
    st_status st = rc == MPI_SUCCESS
                       ? wait_peers(c, &c->world, request, patient, what, err)
                       : st_fail(err, ST_EIO, "%s failed (MPI error %d)", what, rc);
    if (st != ST_OK)
        st_cluster_abort(c, err);
    return st;
}

/* The floats this rank receives of counts [G], its own part left out. */
static double mp_received(const st_cluster *c, const int *counts)
{
    double n = 0.0;
    for (int k = 0; k < c->mp_size; k++)
        n += k == c->rank % c->mp_size ? 0.0 : counts[k];
    return n;
}

st_status st_cluster_mp_allgather(st_cluster *c, const float *mine, float *all,
                                  const int *counts, const int *displs, st_error *err)
{
    MPI_Request request;
    int me = c->rank % c->mp_size;
    c->mp_exchanged += mp_received(c, counts);
    return mp_wait(c, MPI_Iallgatherv(mine, counts[me], MPI_FLOAT, all, counts, displs,
                                      MPI_FLOAT, c->mp_group, &request),
                   &request, 0, "the model-parallel layer input's all-gather", err);
}

st_status st_cluster_mp_alltoall(st_cluster *c, const float *send, const int *scounts,
                                 const int *sdispls, float *recv, const int *rcounts,
                                 const int *rdispls, st_error *err)
{
    MPI_Request request;
    c->mp_exchanged += mp_received(c, rcounts);
    return mp_wait(c, MPI_Ialltoallv(send, scounts, sdispls, MPI_FLOAT, recv, rcounts, rdispls,
                                     MPI_FLOAT, c->mp_group, &request),
                   &request, 0, "the model-parallel layer's all-to-all", err);
}

st_status st_cluster_mp_reduce_scatter(st_cluster *c, const float *all, float *mine,
                                       const int *counts, st_error *err)
{
    MPI_Request request;
    int me = c->rank % c->mp_size;
    c->mp_exchanged += (double)counts[me] * (c->mp_size - 1);
    return mp_wait(c, MPI_Ireduce_scatter(all, mine, counts, MPI_FLOAT, MPI_SUM, c->mp_group,
                                          &request),
                   &request, 0, "the model-parallel layer input gradient's reduce-scatter",
                   err);
}

st_status st_cluster_mp_block_allreduce(st_cluster *c, float *buf, size_t n, st_error *err)
{
    int q = c->size / c->mp_size;
    if (q == 1)
        return ST_OK;
    if (n > (size_t)INT_MAX)
        return st_fail(err, ST_EINTERNAL, "a model-parallel block of %zu floats: at most %d",
                       n, INT_MAX);
    MPI_Request request;
    c->mp_reduced += 2.0 * (double)n * (q - 1) / q; /* what a ring's sends (MPI's own) */
    return mp_wait(c, MPI_Iallreduce(MPI_IN_PLACE, buf, (int)n, MPI_FLOAT, MPI_SUM, c->mp_block,
                                     &request),
                   &request, 0, "the model-parallel block's all-reduce", err);
}

st_status st_cluster_mp_gather(st_cluster *c, float *buf, const int *counts, const int *displs,
                               st_error *err)
{
    MPI_Request request;
    int me = c->rank % c->mp_size;
    const void *mine = me == 0 ? MPI_IN_PLACE : (const void *)(buf + displs[me]);
    return mp_wait(c, MPI_Igatherv(mine, counts[me], MPI_FLOAT, buf, counts, displs, MPI_FLOAT,
                                   0, c->mp_group, &request),
                   &request, c->rank != 0, "gathering the model-parallel blocks on rank 0",
                   err);
}

const char *st_cluster_algorithm(const st_cluster *c, int w)
{
    int a = c && w >= 0 && w < c->workers ? c->w[w].last_algorithm : -1;
    return a >= 0 ? st_allreduce_algos[a].name : "none";
}

void st_cluster_label(st_cluster *c, int w, const char *label)
{
    if (c && w >= 0 && w < c->workers)
        snprintf(c->w[w].label, sizeof c->w[w].label, "%s", label);
}

/* "NAME ALGORITHM" of channel w after line [size]'s *len, after ", " but
 * for the first; a named one's with its probe's fastest call of the
 * algorithm on this rank. */
static void report_channel(const st_cluster *c, int w, char *line, size_t size, int *len,
                           int first)
{
    const cluster_worker *cw = &c->w[w];
    const char *algo = cw->algorithm >= 0 ? st_allreduce_algos[cw->algorithm].name
                                          : "(still probing)";
    if (*len >= (int)size)
        return;
    const char *sep = first ? " " : ", ";
    if (!cw->label[0])
        *len += snprintf(line + *len, size - (size_t)*len, "%sworker %d %s", sep, w, algo);
    else if (cw->algorithm >= 0 && cw->probe_best[cw->algorithm] < DBL_MAX)
        *len += snprintf(line + *len, size - (size_t)*len, "%s%s %s (probed %.3f ms)", sep,
                         cw->label, algo, 1e3 * cw->probe_best[cw->algorithm]);
    else
        *len += snprintf(line + *len, size - (size_t)*len, "%s%s %s", sep, cw->label, algo);
}

void st_cluster_report(const st_cluster *c, long iterations, st_cluster_print_fn print,
                       void *ctx)
{
    char line[512];
    if (c->probed) {
        int len = snprintf(line, sizeof line, "all-reduce probe, slowest rank's fastest call "
                           "on worker 0's slice, ms (the cost formulas' time; not probed "
                           "beyond %g times the cheapest's):", PROBE_WITHIN);
        for (size_t a = 0; a < st_allreduce_count && len < (int)sizeof line; a++) {
            if (c->probe_table[a] < DBL_MAX)
                len += snprintf(line + len, sizeof line - (size_t)len, " %s %.3f (%.3f)",
                                st_allreduce_algos[a].name, 1e3 * c->probe_table[a],
                                1e3 * c->predicted[a]);
            else
                len += snprintf(line + len, sizeof line - (size_t)len, " %s - (%.3f)",
                                st_allreduce_algos[a].name, 1e3 * c->predicted[a]);
        }
        print(ctx, line);
    }
    uint64_t sent = 0, crossing = 0;
    double seconds = 0.0;
    int len = snprintf(line, sizeof line, "all-reduce:");
    int listed = 0;
    for (int w = 0; w < c->workers; w++) {
        const cluster_worker *cw = &c->w[w];
        sent += cw->stats.bytes_sent;
        crossing += cw->stats.bytes_crossing;
        seconds += cw->stats.seconds;
        /* channels that never all-reduced (the workers' under --overlap, a bucket
         * class without buckets) are left out; of the workers', the first 4 and
         * the last */
        if (cw->stats.calls > 0 && (cw->label[0] || w < 4 || w == c->workers - 1))
            report_channel(c, w, line, sizeof line, &len, !listed++);
    }
    print(ctx, line);
    double per = iterations > 0 ? (double)iterations : 1.0;
    snprintf(line, sizeof line, "all-reduce on rank %d: %.3f MB sent per iteration, %.3f MB of "
             "it across supernodes; %.3f ms per iteration per worker", c->rank,
             (double)sent / per / 1e6, (double)crossing / per / 1e6,
             1e3 * seconds / per / (c->workers ? c->workers : 1));
    print(ctx, line);
    if (c->mp_size > 1) {
        snprintf(line, sizeof line, "model-parallel groups of %d on rank %d: the fully "
                 "connected blocks' gradients all-reduced over %d rank%s, %.3f MB sent per "
                 "iteration (as a ring would); layer inputs, outputs and their gradients "
                 "exchanged in the group, %.3f MB received per iteration", c->mp_size, c->rank, c->size / c->mp_size,
                 c->size / c->mp_size > 1 ? "s" : "", 4.0 * c->mp_reduced / per / 1e6,
                 4.0 * c->mp_exchanged / per / 1e6);
        print(ctx, line);
    }
}
