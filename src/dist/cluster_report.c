/* The cluster's report at the run's end: auto's probe table, each
 * channel's algorithm (named by its label), the bytes the all-reduce sent
 * and how many crossed supernodes, and the model-parallel group's
 * traffic; and the names it reports by (st_cluster_label,
 * st_cluster_algorithm). It reads what the other files counted. */
#include "cluster_mpi.h"

#include <float.h>
#include <stdio.h>

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
        int groups = c->size / c->mp_size;
        snprintf(line, sizeof line, "model-parallel groups of %d on rank %d: the fully "
                 "connected blocks' gradients all-reduced over %d rank%s, %.3f MB sent per "
                 "iteration (as a ring would); layer inputs, outputs and their gradients "
                 "exchanged in the group, %.3f MB received per iteration", c->mp_size,
                 c->rank, groups, groups > 1 ? "s" : "", 4.0 * c->mp_reduced / per / 1e6,
                 4.0 * c->mp_exchanged / per / 1e6);
        print(ctx, line);
    }
}
