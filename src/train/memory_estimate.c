/* The run's memory estimated before allocating, and the refusal of a run
 * that would not fit; see memory_estimate.h. */
#include "memory_estimate.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/cores.h"
#include "base/memlimit.h"
#include "base/memory.h"
#include "data/prefetch.h"

#define MB 1e-6

/* What each NUMA node must hold (need [n_numa]) when the workers are pinned
 * on several: the weights (and their bf16 copy) and solver state split as
 * the slices are, each
 * worker's gradient arena, activations and its part of the kernels and
 * input buffers on its own node; 0 when there is one node or no pinning. */
static int numa_need(const st_trainer *t, const trainer_memory *m, double *need)
{
    if (!t->placement.bound || t->topology.n_numa < 2)
        return 0;
    int T = t->o.threads;
    st_placement_numa_need(&t->topology, &t->placement, m->weights + m->bf16_weights + m->state,
                           m->grad_each + m->act_each + (m->kernels + m->buffers) / T, need);
    return t->topology.n_numa;
}

void trainer_memory_log(const st_trainer *t, const trainer_memory *m)
{
    int T = t->o.threads;
    char workers[400];
    char outs[80] = "";
    if (m->bf16_out_each > 0)
        snprintf(outs, sizeof outs, " (%.1f MB of them outputs stored in bf16)",
                 MB * m->bf16_out_each);
    if (T > 1)
        snprintf(workers, sizeof workers, "%d workers: gradients %.1f MB in all (%.1f MB the "
                 "first, %.1f MB each other), activations %.1f MB each%s, kernels %.1f MB "
                 "(%.1f MB the first, %.1f MB each other)", T, MB * m->gradients,
                 MB * m->grad_each, MB * (m->gradients - m->grad_each) / (T - 1),
                 MB * m->act_each, outs, MB * m->kernels, MB * m->kernels_first,
                 MB * m->kernels_next);
    else
        snprintf(workers, sizeof workers, "1 worker: gradients %.1f MB, activations %.1f "
                 "MB%s, kernels %.1f MB", MB * m->grad_each, MB * m->act_each, outs,
                 MB * m->kernels);
    char bf16[64] = "";
    if (m->bf16_weights > 0)
        snprintf(bf16, sizeof bf16, ", bf16 weights %.1f MB", MB * m->bf16_weights);
    char shared[80] = "";
    if (m->shared > 0)
        snprintf(shared, sizeof shared, ", model-parallel layers' shared buffers %.1f MB",
                 MB * m->shared);
    char allreduce[64] = "";
    if (m->allreduce > 0)
        snprintf(allreduce, sizeof allreduce, ", all-reduce %.1f MB", MB * m->allreduce);
    char trace[48] = "";
    if (m->trace > 0)
        snprintf(trace, sizeof trace, ", trace %.1f MB", MB * m->trace);
    char decode[480] = "";
    if (m->decode > 0)
        snprintf(decode, sizeof decode, ", image decoding %.1f MB (%s)", MB * m->decode,
                 m->decode_what);
    st_info(&t->log, "memory: weights %.1f MB%s, solver state %.1f MB; %s%s; input buffers "
            "%.1f MB, prefetch %.1f MB%s%s%s; before allocating %.1f MB (resident now); %.1f MB "
            "in all", MB * m->weights, bf16, MB * m->state, workers, shared, MB * m->buffers,
            MB * m->prefetch, decode, allreduce, trace, MB * m->base, MB * m->total);
    if (m->unmeasured)
        st_info(&t->log, "memory: planned with each convolution's first implementation, not "
                "the one the run measures as fastest (--conv-impl auto), which may lay the "
                "activations out otherwise");
    double need[64];
    int n = t->topology.n_numa <= 64 ? numa_need(t, m, need) : 0;
    char nodes[768] = "";
    for (int k = 0; k < n; k++) {
        size_t len = strlen(nodes);
        snprintf(nodes + len, sizeof nodes - len, "%snode %d %.1f MB of %.1f MB", k ? ", " : "",
                 t->topology.numa_os[k], MB * need[k], MB * t->topology.numa_bytes[k]);
    }
    if (n)
        st_info(&t->log, "memory per NUMA node (the workers' parts, of what it may give): %s",
                nodes);
    if (!m->limited)
        st_info(&t->log, "memory limit: none known (%s)", m->room_what);
    else
        st_info(&t->log, "memory limit: %.1f MB more may be taken (%s)", MB * m->room,
                m->room_what);
}

/* What the readers allocate while they decode (an image list's read_bytes,
 * data.h): the training data's readers at once (BSP: the prefetcher's
 * --io-threads; SSP and ASP: the workers read their own batches), and,
 * when there is a test phase, the workers reading the test set meanwhile
 * (the prefetcher may be filling the ring then). */
static void estimate_decoding(const st_trainer *t, trainer_memory *m)
{
    const st_train_opts *o = &t->o;
    int train_readers = o->sync == ST_SYNC_BSP ? (o->io_threads > 0 ? o->io_threads : 1)
                                               : o->threads;
    double train = (double)t->train->read_bytes * train_readers;
    int tests = t->test && !o->no_test && t->test->read_bytes;
    double test = tests ? (double)t->test->read_bytes * o->threads : 0.0;
    m->decode = train + test;
    int n = 0;
    if (train > 0)
        n = snprintf(m->decode_what, sizeof m->decode_what, "%d reader%s x %.1f MB: %s",
                     train_readers, train_readers > 1 ? "s" : "",
                     MB * (double)t->train->read_bytes, t->train->read_bytes_why);
    if (test > 0)
        snprintf(m->decode_what + n, sizeof m->decode_what - (size_t)n,
                 "%s%d worker%s x %.1f MB on the test set: %s", n ? "; " : "", o->threads,
                 o->threads > 1 ? "s" : "", MB * (double)t->test->read_bytes,
                 t->test->read_bytes_why);
}

st_status trainer_memory_estimate(st_trainer *t, int measure, trainer_memory *m,
                                  st_error *err)
{
    memset(m, 0, sizeof *m);
    const st_train_opts *o = &t->o;
    const st_param_table *params = &t->net.params;
    int T = o->threads;
    m->base = (double)st_current_rss();
    st_sched_opts so;
    trainer_sched_opts(t, &so);
    st_sched_memory sm;
    st_status st = st_sched_plan_memory(&t->net, &so, measure, &sm, err);
    if (st != ST_OK)
        return st;
    double f = sizeof(float);
    m->weights = f * (double)params->count;
    m->bf16_weights = sm.bf16_weights;
    m->state = m->weights * st_solver_state_per_param(&t->hp.solver);
    for (int w = 0; w < T; w++) {
        double g = f * (double)st_ps_grad_floats(params, w, t->shared_from, t->tail_applied);
        m->gradients += g;
        if (g > m->grad_each)
            m->grad_each = g;
    }
    m->gradients += sm.accumulation; /* subdivisions: a second arena per worker */
    m->grad_each += sm.accumulation / T;
    m->activations = sm.activations;
    m->act_each = sm.activations / T; /* workers differ by one image at most */
    m->bf16_out_each = sm.bf16_outputs / T;
    m->kernels = sm.kernels;
    m->kernels_first = sm.kernels_first;
    m->kernels_next = sm.kernels_next;
    m->buffers = sm.buffers;
    m->shared = sm.shared;
    if (o->sync == ST_SYNC_BSP) {
        st_prefetch_opts po = trainer_prefetch_opts(t);
        m->prefetch = (double)st_batchq_bytes(TRAINER_BATCH_RING, t->batch,
                                              st_shape_count(t->net.input)) +
                      (double)st_prefetch_bytes(&po);
    }
    if (st_cluster_size(o->cluster) > 1)
        m->allreduce = m->weights;
    if (st_cluster_size(o->cluster) > 1 && trainer_mp_nodes(t)) {
        /* the head's all-reduce, and this rank's parts of the tail packed for theirs */
        size_t(*ranges)[2] = calloc(4 * (size_t)t->net.n_layers, sizeof *ranges);
        if (ranges) {
            int n = st_net_mp_ranges(&t->net, st_cluster_rank(o->cluster) % o->mp_group,
                                     o->mp_group, ranges, 4 * t->net.n_layers);
            double parts = 0.0;
            for (int k = 0; k < n; k++)
                parts += (double)(ranges[k][1] - ranges[k][0]);
            m->allreduce = f * ((double)t->shared_from + parts);
        }
        free(ranges);
    }
    estimate_decoding(t, m);
    long traced = trainer_trace_iterations(t);
    if (traced > 0) { /* rank 0 also holds every other rank's text, at most as large */
        int ranks = st_cluster_size(o->cluster), gathered = st_cluster_rank(o->cluster) == 0;
        m->trace = (double)st_sched_trace_bytes(&t->net, &so, traced) *
                   (gathered && ranks > 1 ? ranks : 1);
    }
    m->total = m->base + m->weights + m->bf16_weights + m->state + m->gradients + m->activations + m->kernels +
               m->shared + m->buffers + m->prefetch + m->allreduce + m->decode + m->trace;
    st_memlimit lim;
    st_memlimit_read("", &lim);
    size_t room = st_memlimit_room(&lim, m->room_what, sizeof m->room_what);
    m->local_ranks = st_cluster_local_ranks();
    m->limited = room != ST_MEMLIMIT_NONE;
    m->room = m->limited ? (double)room / m->local_ranks : 0.0;
    if (m->local_ranks > 1 && m->limited) {
        size_t len = strlen(m->room_what);
        snprintf(m->room_what + len, sizeof m->room_what - len, ", this rank's share of the "
                 "%d on this host", m->local_ranks);
    }
    return ST_OK;
}

/* What to change, by what takes the most: each worker's gradient (fewer
 * workers; one with intra-op threads holds a single gradient) or the
 * activations (a smaller batch, or the batch in pieces), into buf. */
static void advice(const st_trainer *t, const trainer_memory *m, char *buf, size_t size)
{
    int T = t->o.threads, cores = st_usable_cores(), first_mp;
    double need = m->total - m->base;
    size_t shared_from;
    st_net_hybrid_split(&t->net, &first_mp, &shared_from);
    double mp_each = sizeof(float) * (double)(t->net.params.count - shared_from);
    if (T > 1 && m->gradients >= m->activations && !t->o.hybrid &&
        t->o.sync == ST_SYNC_BSP && mp_each > 0.5 * m->grad_each)
        snprintf(buf, size, "--parallel hybrid (the fully connected layers' %.1f MB of each "
                 "worker's gradient held once) or fewer workers (-t, now %d)", MB * mp_each, T);
    else if (T > 1 && m->gradients >= m->activations)
        snprintf(buf, size, "fewer workers (-t, now %d: each holds a gradient of %.1f MB; one "
                 "worker with intra-op threads, -t 1 --intra %d, holds one)", T,
                 MB * m->grad_each, cores);
    else if (T > 1 && m->gradients > 0.1 * need)
        snprintf(buf, size, "a smaller batch (-b, now %d) or fewer workers (-t, now %d: each "
                 "holds a gradient of %.1f MB)", t->batch, T, MB * m->grad_each);
    else if (m->decode > 0.5 * need)
        snprintf(buf, size, "fewer readers decoding at once (--io-threads, now %d), or smaller "
                 "images", t->o.io_threads);
    else
        snprintf(buf, size, "a smaller batch (-b, now %d: the activations grow with the "
                 "images per worker) or the same batch in pieces (--subdivisions S, now %d: "
                 "the activations of batch / S images, gradients accumulated)", t->batch,
                 t->subdivisions);
}

int trainer_memory_fits(const trainer_memory *m)
{
    return !m->limited || m->total - m->base <= m->room;
}

/* The NUMA nodes that cannot hold their part (numa_need) against what they
 * may give, listed in buf; 0 when every node can. */
static int numa_short(const st_trainer *t, const trainer_memory *m, char *buf, size_t size)
{
    double need[64];
    int n = t->topology.n_numa <= 64 ? numa_need(t, m, need) : 0, shortfalls = 0;
    buf[0] = '\0';
    for (int k = 0; k < n; k++) {
        double has = t->topology.numa_bytes[k];
        if (has <= 0.0 || need[k] <= has)
            continue;
        size_t len = strlen(buf);
        snprintf(buf + len, size - len, "%snode %d: %.0f MB for its workers, %.0f MB free",
                 shortfalls++ ? "; " : "", t->topology.numa_os[k], MB * need[k], MB * has);
    }
    return shortfalls;
}

/* Per NUMA node: each node must hold its workers' part (numa_need). */
static st_status numa_check(const st_trainer *t, const trainer_memory *m, st_error *err)
{
    char what[768];
    if (!numa_short(t, m, what, sizeof what))
        return ST_OK;
    if (t->o.force || t->dry_run) {
        st_warn(&t->log, "not enough memory on a NUMA node (%s): %s", what,
                t->o.force ? "going on (--force)" : "the run would be refused");
        return ST_OK;
    }
    return st_fail(err, ST_EUSAGE, "not enough memory on a NUMA node for the workers pinned "
                   "to it (%s); give fewer workers, --bind none (the OS then places the "
                   "memory), or --force to run anyway", what);
}

st_status trainer_memory_check(const st_trainer *t, const trainer_memory *m, st_error *err)
{
    if (trainer_memory_fits(m))
        return numa_check(t, m, err);
    double need = m->total - m->base, held = m->weights + m->bf16_weights + m->state,
           rest = need - m->activations - m->gradients - held - m->decode;
    int T = t->o.threads, per = (t->batch + T - 1) / T;
    char what[1024];
    char decode[64] = "";
    if (m->decode > 0)
        snprintf(decode, sizeof decode, ", image decoding %.0f MB", MB * m->decode);
    snprintf(what, sizeof what, "about %.0f MB beyond the %.0f MB the process holds "
             "(activations %.0f MB, gradients %.0f MB, weights and solver state %.0f MB%s, the "
             "rest %.0f MB; %d worker%s of %d image%s), and %.0f MB may be taken (%s)",
             MB * need, MB * m->base, MB * m->activations, MB * m->gradients,
             MB * held, decode, MB * rest, T, T > 1 ? "s" : "", per,
             per > 1 ? "s" : "", MB * m->room, m->room_what);
    if (t->o.force) {
        st_warn(&t->log, "the run would take %s: %s (--force)", what,
                t->dry_run ? "it would go on" : "going on");
        return ST_OK;
    }
    char hint[256];
    advice(t, m, hint, sizeof hint);
    if (t->dry_run) { /* what it would do, said; the dry run itself went well */
        st_warn(&t->log, "the run would be refused: not enough memory: it would take %s; give "
                "%s, or --force to run anyway", what, hint);
        return ST_OK;
    }
    return st_fail(err, ST_EUSAGE, "not enough memory: the run would take %s; give %s, or "
                   "--force to run anyway", what, hint);
}
