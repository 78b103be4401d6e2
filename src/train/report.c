/* The trainer's report at the end of a run that finished, or that a test
 * phase stopped (loop.c calls it before the final snapshot): the "done:"
 * line, the time split, the test accuracy, why the run stopped (with
 * --stop-at-accuracy or --patience) and the summary of where the time
 * went; with --profile the per-layer times, each pass against the roofline
 * and the kernel choices; then the backend's own report (its run_report
 * capability). */
#include "trainer_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/fileio.h"
#include "base/signals.h"
#include "train/roofline.h"

/* Layer i's passes' bytes as st_net_pass_work counts them (4 a value),
 * less what replica r keeps in bf16 (2 a value): an input stored so, read
 * by the forward and the weight gradient (and, weightless, by the input
 * gradient), its own output stored so, written by the forward; the
 * weights read from their bf16 copy (st_replica.takes_bf16) by the
 * forward and the input gradient. */
static void bf16_bytes(const st_replica *r, const st_net *net, int i, int n, st_pass_work *w)
{
    const st_layer *l = net->layers[i];
    double f = (double)sizeof(float), in = 0.0, weights = 0.0;
    for (int k = 0; k < l->n_src; k++)
        if (l->src[k] >= 0 && r->out_bf16[l->src[k]] == ST_OUT_BF16_STORED)
            in += f / 2 * n * (double)st_shape_count(net->layers[l->src[k]]->out);
    double out = r->out_bf16[i] == ST_OUT_BF16_STORED
                     ? f / 2 * n * (double)st_shape_count(l->out) : 0.0;
    for (int p = 0; p < net->params.n && r->takes_bf16; p++)
        if (net->params.p[p].layer == i && net->params.p[p].kind == ST_PARAM_WEIGHT)
            weights += f / 2 * (double)net->params.p[p].count;
    w->bytes[0] -= in + out + weights;
    w->bytes[1] -= weights > 0.0 ? weights : in;
    w->bytes[2] -= in;
}

/* Each layer's passes in worker 0 against the roofline: its GFLOP/s and
 * share of the FMA peak, the bytes it must move and their rate, and the
 * share of its time the roofline says it cannot do without (100%: at the
 * ceiling; little: far from it, whichever limit binds). In bf16 the peak is
 * the CPU's bf16 one, what its convolutions and inner products could reach:
 * AMX's tiles' where the backend runs them there, else the vector units'
 * (the reference backend's oracle, which computes bf16 in fp32
 * instructions, is measured against it too); on a CPU without bf16
 * instructions, the fp32 one. */
static void print_roofline(const st_trainer *t, double iters)
{
    st_roofline ceilings; /* measured now: the run's figures and peak memory are taken */
    st_roofline_measure(&ceilings, t->o.fma_peak);
    st_roofline *rl = &ceilings;
    const st_net *net = &t->net;
    double fp32_peak = rl->fma_gflops;
    int tiles = t->backend->bf16_on_tiles && t->backend->bf16_on_tiles() && rl->amx_gflops > 0;
    double bf16_peak = tiles ? rl->amx_gflops : rl->bf16_gflops;
    int bf16 = t->o.precision == ST_PRECISION_BF16 && bf16_peak > 0;
    if (bf16)
        rl->fma_gflops = bf16_peak; /* the bound and "of peak" below */
    const st_replica *r = st_sched_replica(t->sched, 0);
    int n = (t->batch + t->o.threads - 1) / t->o.threads, cores = t->o.intra > 0 ? t->o.intra : 1;
    st_info(&t->log, "roofline of worker 0 (%d image%s, %d core%s): FMA peak %.1f GFLOP/s per "
            "core (%s%s), memcpy %.0f GB/s to %zu kB, %.0f GB/s to %zu MB, %.0f GB/s beyond",
            n, n > 1 ? "s" : "", cores, cores > 1 ? "s" : "", fp32_peak, rl->isa,
            rl->fma_measured ? ", measured after training" : " by --fma-peak", rl->copy_gbs[0],
            rl->set_bytes[0] >> 10, rl->copy_gbs[1], rl->set_bytes[1] >> 20, rl->copy_gbs[2]);
    if (t->o.precision == ST_PRECISION_BF16 && tiles)
        st_info(&t->log, "roofline in bf16: peak %.1f GFLOP/s per core (%s, which the "
                "backend's convolutions run on; %s %.1f), the peak below", rl->amx_gflops,
                rl->amx_isa, rl->bf16_isa, rl->bf16_gflops);
    else if (t->o.precision == ST_PRECISION_BF16) {
        char amx[96] = "";
        if (rl->amx_gflops > 0)
            snprintf(amx, sizeof amx, "; %s %.1f, which this backend does not use",
                     rl->amx_isa, rl->amx_gflops);
        st_info(&t->log, "roofline in bf16: peak %.1f GFLOP/s per core (%s%s)%s",
                rl->bf16_gflops, rl->bf16_isa, amx,
                bf16 ? ", the peak below" : ": the fp32 peak below");
    }
    st_info(&t->log, "layer  type      pass               ms   GFLOP/s  of peak        MB     "
            "GB/s  bound    of bound");
    static const char *const pass_names[3] = {"forward", "backward-data", "backward-weights"};
    for (int i = 0; i < net->n_layers; i++) {
        const st_layer_time *lt = &r->time[i];
        const double ms[3] = {1e3 * lt->forward / iters, 1e3 * lt->backward_data / iters,
                              1e3 * lt->backward_weights / iters};
        st_pass_work w = st_net_pass_work(net, i, n);
        bf16_bytes(r, net, i, n, &w);
        const st_layer *l = net->layers[i];
        int on_input = l->n_src == 0 || l->src[0] < 0; /* no input gradient (as net.c) */
        for (int p = 0; p < 3; p++) {
            if (ms[p] <= 0.0 || (p == 1 && on_input) || (p == 2 && l->flops == 0.0))
                continue;
            double flops = w.flops[p], bytes = w.bytes[p], s = ms[p] / 1e3;
            int compute_bound;
            double bound = st_roofline_bound(rl, cores, flops, bytes, &compute_bound);
            st_info(&t->log, "%5d  %-9s %-16s %8.3f %9.1f %7.1f%% %9.3f %8.1f  %-8s %7.1f%%", i,
                    st_layer_short_name(l), pass_names[p], ms[p], flops / s / 1e9,
                    100.0 * flops / s / (1e9 * rl->fma_gflops * cores), bytes / 1e6,
                    bytes / s / 1e9, compute_bound ? "compute" : "memory", 100.0 * bound / s);
        }
    }
}

/* --profile: per-layer milliseconds per iteration (worker 0), the
 * throughput, each pass against the roofline and the kernel choices. */
static void print_profile(const st_trainer *t, const st_train_result *res, long timed)
{
    const st_net *net = &t->net;
    const st_replica *r = st_sched_replica(t->sched, 0);
    double iters = (double)(timed > 0 ? timed : 1), total = 0.0;
    for (int i = 0; i < net->n_layers; i++)
        total += r->time[i].forward + r->time[i].backward_data + r->time[i].backward_weights;
    st_info(&t->log, "profile: ms per iteration over %ld iterations (after %ld warm-up), "
            "worker 0 of %d", timed, t->o.warmup, t->o.threads);
    st_info(&t->log, "layer  type        forward  bwd-data  bwd-weights    total  share");
    for (int i = 0; i < net->n_layers; i++) {
        const st_layer_time *lt = &r->time[i];
        double sum = lt->forward + lt->backward_data + lt->backward_weights;
        st_info(&t->log, "%5d  %-9s %9.3f %9.3f %12.3f %8.3f %5.1f%%", i,
                st_layer_short_name(net->layers[i]), 1e3 * lt->forward / iters,
                1e3 * lt->backward_data / iters, 1e3 * lt->backward_weights / iters,
                1e3 * sum / iters, total > 0 ? 100.0 * sum / total : 0.0);
    }
    char rate[96];
    trainer_rate_text(t, res->images_per_s, rate, sizeof rate);
    st_info(&t->log, "throughput: %s, %.1f GFLOP/s (%.3f GFLOP per image: 3 x forward)", rate,
            res->gflops, 3.0 * net->flops / 1e9);
    print_roofline(t, iters);
    char *choices = t->choices ? st_choices_text(t->choices, ST_CHOICES_VALUES |
                                                  ST_CHOICES_TRIALS | ST_CHOICES_NOTES, NULL)
                               : NULL;
    if (choices && *choices) {
        st_info(&t->log, "kernel choices (KEY = VALUE; then what was timed: ms per call of "
                "each candidate layout, its passes' fastest implementations and the edges' "
                "reorders):");
        for (char *line = strtok(choices, "\n"); line; line = strtok(NULL, "\n"))
            st_info(&t->log, "  %s", line);
    }
    free(choices);
}

const st_layer_time *st_trainer_layer_times(const st_trainer *t)
{
    return t->o.profile ? st_sched_replica(t->sched, 0)->time : NULL;
}

/* Decimals that give a rate three significant digits: ResNet-50's 7.37
 * img/s, not 7. */
static int rate_decimals(double images_per_s)
{
    return images_per_s >= 100.0 ? 0 : images_per_s >= 10.0 ? 1 : 2;
}

void trainer_rate_text(const st_trainer *t, double images_per_s, char *buf, size_t size)
{
    if (!t->o.cluster) {
        snprintf(buf, size, "%.*f img/s", rate_decimals(images_per_s), images_per_s);
        return;
    }
    int ranks = st_cluster_size(t->o.cluster);
    double per_rank = images_per_s / ranks;
    snprintf(buf, size, "%.*f img/s global (%.*f per rank, %d rank%s)",
             rate_decimals(images_per_s), images_per_s, rate_decimals(per_rank), per_rank, ranks,
             ranks > 1 ? "s" : "");
}

/* The time split of n iterations: a progress line ("  split,", plain text
 * progress only) or a summary line ("time split,"). */
void trainer_log_split(const st_trainer *t, int progress, const char *what,
                       const st_time_split *s, double n)
{
    char line[256];
    snprintf(line, sizeof line, "%s ms per iteration: data %.3f, compute %.3f, barrier %.3f, "
             "aggregation %.3f, update %.3f", what, 1e3 * s->data / n, 1e3 * s->compute / n,
             1e3 * s->barrier / n, 1e3 * s->aggregate / n, 1e3 * s->update / n);
    if (progress)
        st_info_progress(&t->log, "%s", line);
    else
        st_info(&t->log, "%s", line);
}

/* The summary's lines after "done:", "time split" and "test accuracy":
 * the best test phase, communication across nodes, where the time went. */
static void log_summary(const st_trainer *t, const st_train_result *res, long timed)
{
    if (res->best_accuracy >= 0)
        st_info(&t->log, "best test accuracy %.2f%% after iteration %ld (epoch %.2f)",
                100.0 * res->best_accuracy, t->tests.best_iteration,
                (double)t->tests.best_iteration / (double)t->iters_per_epoch);
    if (t->o.cluster)
        st_info(&t->log, "communication ms per iteration: %.3f (control sums and all-reduce "
                "across nodes, outside the time split above)",
                1e3 * res->split.communicate / (double)(timed > 0 ? timed : 1));
    if (t->o.pipeline)
        st_info(&t->log, "pipeline: communication ms per iteration: hidden behind backward %.3f, "
                "behind the next forward %.3f, exposed %.3f (each bucket's %s and update; "
                "exposed: what the next forward waited for)",
                1e3 * res->split.hidden_backward / (double)(timed > 0 ? timed : 1),
                1e3 * res->split.hidden_forward / (double)(timed > 0 ? timed : 1),
                1e3 * res->split.exposed / (double)(timed > 0 ? timed : 1),
                t->o.cluster ? "sum over the workers, all-reduce" : "sum over the workers");
    double now = st_now();
    st_info(&t->log, "total time %.1f s: set-up %.1f s, training %.1f s, test phases %.1f s",
            now - t->created, t->began - t->created, now - t->began - t->test_seconds,
            t->test_seconds);
}

void trainer_log_line(void *ctx, const char *line)
{
    st_info(ctx, "%s", line);
}

st_status trainer_report(st_trainer *t, const st_train_result *res, st_error *err)
{
    long timed = t->o.sync == ST_SYNC_BSP ? res->iterations - t->warm_end : res->iterations;
    char rate[96];
    trainer_rate_text(t, res->images_per_s, rate, sizeof rate);
    st_info(&t->log, "done: %ld iterations in %.1f s, %s%s, peak memory %.1f MB",
            res->iterations - t->start, res->seconds, rate,
            t->o.warmup && t->o.sync == ST_SYNC_BSP ? " after warm-up" : "",
            res->peak_memory / 1e6);
    trainer_log_split(t, 0, "time split,", &res->split, (double)(timed > 0 ? timed : 1));
    if (res->best_accuracy >= 0 && res->test_accuracy >= 0)
        st_info(&t->log, "test accuracy: final %.2f%%, best %.2f%%", 100.0 * res->test_accuracy,
                100.0 * res->best_accuracy);
    trainer_log_stopping(t, res);
    log_summary(t, res, timed);
    if (t->skipped)
        st_warn(&t->log, "%ld unreadable images were skipped (--skip-bad-images)", t->skipped);
    if (t->o.profile)
        print_profile(t, res, timed);
    st_status st = ST_OK;
    if (t->backend->run_report) {
        st_bctx *bctx0 = st_sched_replica(t->sched, 0)->bctx;
        st = t->backend->run_report(bctx0, (t->batch + t->o.threads - 1) / t->o.threads,
                                    t->o.threads, t->ps.count, trainer_log_line, &t->log, err);
        if (st == ST_OK && t->backend->trace_finish)
            st = t->backend->trace_finish(bctx0, err);
        char *partial = t->o.cpe_trace ? st_output_partial_name(t->o.cpe_trace) : NULL;
        if (partial) /* renamed by trace_finish: no longer ours to remove */
            st_signals_keep(partial);
        free(partial);
    }
    return st;
}
