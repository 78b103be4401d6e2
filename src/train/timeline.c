/* --trace FILE and --trace-iters A:B: the run's timeline (base/trace.h's
 * recorder) from set-up to file. At set-up the window is chosen (or the
 * one given checked against the run) and the recorder made, before the
 * scheduler, the prefetcher and the communication thread add their tracks
 * to it; at the run's start the ranks agree on a time 0
 * (st_cluster_clock_origin: a barrier); at its end every rank's events
 * become JSON, gathered on rank 0 (one process, pid, per rank), which
 * writes the file as FILE.partial and renames it (fileio.h's st_output,
 * as --metrics is written), so that no half-written trace ever has the
 * final name. */
#include "trainer_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/fileio.h"

/* The default window: TRACE_DEFAULT_ITERS iterations after the warm-up,
 * or without one after the first TRACE_DEFAULT_SKIP (whose kernels
 * measure their implementations and whose caches are cold). */
#define TRACE_DEFAULT_SKIP 5
#define TRACE_DEFAULT_ITERS 5

const char *trainer_trace_path(const st_trainer *t)
{
    return st_cluster_rank(t->o.cluster) == 0 ? t->o.trace : NULL;
}

/* The default window, within the run's iterations [start, end]. */
static void default_window(const st_trainer *t, long end, long *first, long *last)
{
    *first = t->warm_end > t->start ? t->warm_end : t->start + TRACE_DEFAULT_SKIP;
    *last = *first + TRACE_DEFAULT_ITERS - 1;
    if (*last > end)
        *last = end;
    if (*first > *last)
        *first = *last - (TRACE_DEFAULT_ITERS - 1) > t->start ? *last - (TRACE_DEFAULT_ITERS - 1)
                                                              : t->start;
}

long trainer_trace_iterations(const st_trainer *t)
{
    if (!t->o.trace)
        return 0;
    return t->o.trace_last >= 0 ? t->o.trace_last - t->o.trace_first + 1 : TRACE_DEFAULT_ITERS;
}

st_status trainer_trace_create(st_trainer *t, st_error *err)
{
    if (!t->o.trace)
        return ST_OK;
    long first = t->o.trace_first, last = t->o.trace_last, end = t->iterations - 1;
    if (last < 0)
        default_window(t, end, &first, &last);
    else if (first < t->start || last > end)
        return st_fail(err, ST_EUSAGE, "--trace-iters %ld:%ld: the run's iterations are %ld "
                       "to %ld%s: give a window inside them", first, last, t->start, end,
                       t->start ? " (it resumes after the snapshot's)" : "");
    st_status st = st_trace_create(&t->trace, first, last, err);
    if (st == ST_OK)
        st_info(&t->log, "trace: iterations %ld to %ld recorded%s%s", first, last,
                trainer_trace_path(t) ? ", written to " : " (rank 0 writes the file)",
                trainer_trace_path(t) ? t->o.trace : "");
    return st;
}

st_status trainer_trace_start(st_trainer *t, st_error *err)
{
    if (!t->trace)
        return ST_OK;
    double origin;
    st_status st = st_cluster_clock_origin(t->o.cluster, &origin, err);
    st_trace_set_origin(t->trace, origin);
    return st;
}

/* The file: the events of every rank, joined (each object preceded by a
 * comma), and what the run was. */
static st_status write_trace(const st_trainer *t, const char *events, size_t len,
                             st_error *err)
{
    st_output out = {0};
    st_status st = st_output_open(&out, "--trace", t->o.trace, err);
    if (st != ST_OK)
        return st;
    fprintf(out.f, "{\"displayTimeUnit\":\"ms\",\"otherData\":{\"program\":\"singletrain\","
            "\"network\":\"");
    st_trace_put_string(out.f, t->cfg_path);
    fprintf(out.f, "\",\"ranks\":%d,\"workers\":%d,\"clocks\":\"%s\"},\n\"traceEvents\":[",
            st_cluster_size(t->o.cluster), t->o.threads,
            t->o.cluster ? "aligned at the run's start by a barrier" : "one process");
    st = st_fwrite(out.f, events + 1, len - 1, out.path, err); /* the first comma left out */
    fputs("\n]}\n", out.f);
    st_status cst = st_output_close(&out, st == ST_OK, err);
    return st != ST_OK ? st : cst;
}

st_status trainer_trace_finish(st_trainer *t, st_error *err)
{
    if (!t->trace)
        return ST_OK;
    int rank = st_cluster_rank(t->o.cluster);
    char process[32], *mine = NULL, *all = NULL;
    size_t len = 0, all_len = 0;
    snprintf(process, sizeof process, "rank %d", rank);
    st_status st = st_trace_json(t->trace, rank, process, &mine, &len, err);
    if (st != ST_OK && t->o.cluster) /* the others would wait for this rank's events */
        st_cluster_abort(t->o.cluster, err);
    if (st == ST_OK)
        st = st_cluster_gather_text(t->o.cluster, mine, len, &all, &all_len, err);
    free(mine);
    long dropped = st_trace_dropped(t->trace);
    if (st == ST_OK && dropped)
        st_warn(&t->log, "--trace: %ld events left out, a thread's track full (a bug: the "
                "tracks are sized for the window)", dropped);
    if (st == ST_OK && all && all_len > 0)
        st = write_trace(t, all, all_len, err);
    if (st == ST_OK && all)
        st_info(&t->log, "trace: %s written (open it in ui.perfetto.dev or chrome://tracing)",
                t->o.trace);
    free(all);
    return st;
}
