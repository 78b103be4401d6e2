/* What the `cpe` backend predicted, for people and for scripts: the
 * end-of-run table (each kernel's forward, backward-data and
 * backward-weights ms per iteration, the convolution strategies with their
 * trial times, one SW26010 processor's images/s), the per-iteration trace
 * (--cpe-trace) and the report CSV (--cpe-report).
 *
 * One processor (swCaffe): four core groups each train a quarter of the
 * batch on a replica; core group 0 then sums the four gradients on its
 * CPEs and applies the update to every parameter. Its iteration is a core
 * group's iteration (this run's worker 0, whose shard is taken as the
 * quarter), plus that sum and that update. The sum is emulated here, on a
 * stretch of parameters in cost-only mode, and scaled to all of them (the
 * kernel streams: its time is linear in the length); the update is this
 * run's, scaled from worker 0's slice to all the parameters. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cpe_backend.h"
#include "cpe_backend_internal.h"
#include "base/fileio.h"
#include "base/memory.h"

/* Floats of the stretch the gradient sums are emulated on. */
#define SUM_PROBE_FLOATS ((size_t)1 << 20)

void cpe_work_ms(const st_bctx *ctx, const cpe_work *w, double ms[PASSES])
{
    long steady = ctx->iterations - CONV_TRIALS;
    long trials = ctx->iterations < CONV_TRIALS ? ctx->iterations : CONV_TRIALS;
    for (int p = 0; p < PASSES; p++)
        ms[p] = steady > 0 ? 1e3 * cpe_account_seconds(&w->steady[p]) / (double)steady
                : trials > 0 ? 1e3 * cpe_account_seconds(&w->trials[p]) / (double)trials
                             : 0.0;
}

void cpe_trace_row(FILE *f, long it, const char *what, const cpe_work *w)
{
    fprintf(f, "%ld,\"%s\"", it + 1, what);
    for (int p = 0; p < PASSES; p++)
        fprintf(f, ",%.6f", 1e3 * cpe_account_seconds(&w->now[p]));
    fputc('\n', f);
}

/* flop per DMA byte of a unit (CPE work only). */
static double work_intensity(const cpe_work *w)
{
    double flops = 0.0, bytes = 0.0;
    for (int p = 0; p < PASSES; p++) {
        const st_cpe_counters *c[2] = {&w->trials[p].cpe, &w->steady[p].cpe};
        for (int i = 0; i < 2; i++) {
            flops += (double)c[i]->flops;
            bytes += (double)(c[i]->dma_get_bytes + c[i]->dma_put_bytes);
        }
    }
    return bytes > 0 ? flops / bytes : 0.0;
}

/* "DMA 61%": the dominant part of a split and its share. */
static void split_text(const cpe_split *split, char *buf, size_t len)
{
    double share;
    cpe_part top = cpe_split_dominant(split, &share);
    snprintf(buf, len, "%s %.0f%%", cpe_part_names[top], 100.0 * share);
}

/* The dominant part of strategy s's trial of pass p. */
static void dominant_text(const cpe_kernel *k, int s, int p, char *buf, size_t len)
{
    split_text(&k->tried_split[s][p], buf, len);
}

/* The same for a kernel without strategies: its steady passes (its trial
 * ones when the run had no steady iteration). */
static void work_dominant_text(const st_bctx *ctx, const cpe_work *w, int p, char *buf,
                               size_t len)
{
    const cpe_account zero = {0};
    const cpe_account *a = ctx->iterations > CONV_TRIALS ? &w->steady[p] : &w->trials[p];
    cpe_split split = cpe_split_between(&zero, a, 0.0);
    split_text(&split, buf, len);
}

/* The strategy column: what each pass chose, with its trials and each
 * trial's dominant cost. */
static void strategy_text(const cpe_kernel *k, char *buf, size_t len)
{
    if (k->base.kind == ST_K_FC) {
        snprintf(buf, len, "GEMM");
        return;
    }
    if (k->base.kind != ST_K_CONV) {
        snprintf(buf, len, "-");
        return;
    }
    size_t used = 0;
    buf[0] = '\0';
    for (int p = 0; p < PASSES && used < len; p++) {
        if (k->calls[p] < CONV_TRIALS)
            continue;
        const char *sep = used ? "; " : "";
        if (!k->runs[CONV_IMPLICIT][p])
            used += (size_t)snprintf(buf + used, len - used, "%s%s explicit (implicit: %s)", sep,
                                     cpe_pass_names[p], k->why_not[p]);
        else {
            char ex[64], im[64];
            dominant_text(k, CONV_EXPLICIT, p, ex, sizeof ex);
            dominant_text(k, CONV_IMPLICIT, p, im, sizeof im);
            used += (size_t)snprintf(
                buf + used, len - used, "%s%s %s (%.3f vs %.3f ms; explicit: %s, implicit: %s)",
                sep, cpe_pass_names[p], cpe_conv_strategy_names[k->chosen[p]],
                1e3 * (k->tried[CONV_EXPLICIT][p] + k->tried_layout[CONV_EXPLICIT][p]),
                1e3 * (k->tried[CONV_IMPLICIT][p] + k->tried_layout[CONV_IMPLICIT][p]), ex, im);
        }
    }
    if (used == 0)
        snprintf(buf, len, "not chosen yet (explicit / implicit trials)");
}

/* A core group's iteration in ms: every kernel and transformation, and
 * (with the slice) this worker's gradient sum and update. */
static double iteration_ms(const st_bctx *ctx, int with_slice)
{
    double sum = 0.0, ms[PASSES];
    for (int i = 0; i < ctx->n_kernels; i++)
        for (int w = 0; w < 2; w++) {
            cpe_work_ms(ctx, w ? &ctx->kernels[i]->layout : &ctx->kernels[i]->work, ms);
            sum += ms[0] + ms[1] + ms[2];
        }
    for (int i = 0; i < ctx->n_host; i++) {
        cpe_work_ms(ctx, &ctx->host[i].work, ms);
        sum += ms[0] + ms[1] + ms[2];
    }
    if (with_slice) {
        cpe_work_ms(ctx, &ctx->reduce_update, ms);
        sum += ms[WORK_SUM] + ms[WORK_UPDATE];
    }
    return sum;
}

/* Seconds the CPEs take to sum `sources` gradient buffers of `floats`
 * floats (st_cpe_grad_sum), from a cost-only emulation of a stretch. */
static st_status sum_seconds(st_bctx *ctx, int sources, size_t floats, double *out, st_error *err)
{
    size_t probe = floats < SUM_PROBE_FLOATS ? floats : SUM_PROBE_FLOATS;
    *out = 0.0;
    if (probe == 0)
        return ST_OK;
    float *buf = st_alloc_aligned((size_t)sources * probe * sizeof(float),
                                  "the gradient-sum probe", err);
    if (!buf)
        return ST_ENOMEM;
    float *grads[64]; /* a source per core group: at most 64 (cpe/machine.h) */
    for (int i = 0; i < sources; i++)
        grads[i] = buf + (size_t)i * probe; /* each source its own copy */
    st_cpe_cluster_set_cost_only(ctx->cg, 1);
    st_cpe_counters c;
    st_status st = st_cpe_grad_sum(ctx->cg, grads, sources, 0, probe, 1.0f, &c, err);
    st_cpe_cluster_set_cost_only(ctx->cg, ctx->cost_only);
    st_free_aligned(buf);
    if (st == ST_OK)
        *out = c.time.total_s * (double)floats / (double)probe;
    return st;
}

/* One processor's iteration (see the header comment). */
typedef struct processor {
    double cg_ms, sum_ms, update_ms, iteration_ms, img_s;
    double sum2_s_per_float; /* the all-reduce's reduction on the CPEs */
} processor;

static st_status predict_processor(st_bctx *ctx, int images, int workers, size_t params,
                                   processor *p, st_error *err)
{
    double ms[PASSES], sum_all = 0.0, sum2 = 0.0;
    int groups = st_cpe_cluster_machine(ctx->cg)->core_groups;
    memset(p, 0, sizeof *p);
    st_status st = sum_seconds(ctx, groups, params, &sum_all, err);
    if (st == ST_OK)
        st = sum_seconds(ctx, 2, params, &sum2, err);
    if (st != ST_OK)
        return st;
    cpe_work_ms(ctx, &ctx->reduce_update, ms);
    p->cg_ms = iteration_ms(ctx, 0);
    p->sum_ms = 1e3 * sum_all;
    p->update_ms = ms[WORK_UPDATE] * (double)workers;
    p->iteration_ms = p->cg_ms + p->sum_ms + p->update_ms;
    p->img_s = p->iteration_ms > 0 ? (double)groups * images / (p->iteration_ms / 1e3) : 0.0;
    p->sum2_s_per_float = params ? sum2 / (double)params : 0.0;
    return ST_OK;
}

static void csv_text(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"')
            fputc('"', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

/* The report CSV (header in st_cpe_backend_report's comment). */
static void write_report(FILE *f, const st_bctx *ctx, const processor *p, int images)
{
    fprintf(f, "section,kernel,name,on,pass,strategy,runs,seconds,layout_seconds,chosen,note\n");
    for (int i = 0; i < ctx->n_kernels; i++) {
        const cpe_kernel *k = ctx->kernels[i];
        double ms[PASSES], lay[PASSES];
        cpe_work_ms(ctx, &k->work, ms);
        cpe_work_ms(ctx, &k->layout, lay);
        for (int pass = 0; pass < PASSES; pass++) {
            if (k->base.kind != ST_K_CONV) {
                if (ms[pass] == 0.0)
                    continue;
                fprintf(f, "kernel,%d,", i);
                csv_text(f, k->what);
                char dominant[64];
                work_dominant_text(ctx, &k->work, pass, dominant, sizeof dominant);
                fprintf(f, ",%s,%s,-,1,%.9f,%.9f,1,", k->where, cpe_pass_names[pass],
                        ms[pass] / 1e3, lay[pass] / 1e3);
                csv_text(f, dominant);
                fputc('\n', f);
                continue;
            }
            if (k->calls[pass] < CONV_TRIALS)
                continue;
            for (int s = 0; s < CONV_STRATEGIES; s++) {
                fprintf(f, "kernel,%d,", i);
                csv_text(f, k->what);
                fprintf(f, ",%s,%s,%s,%d,", k->where, cpe_pass_names[pass],
                        cpe_conv_strategy_names[s], k->runs[s][pass]);
                char dominant[64] = "";
                if (k->runs[s][pass]) {
                    fprintf(f, "%.9f,%.9f,%d,", k->tried[s][pass], k->tried_layout[s][pass],
                            k->chosen[pass] == s);
                    dominant_text(k, s, pass, dominant, sizeof dominant);
                } else {
                    fprintf(f, ",,0,");
                }
                csv_text(f, k->runs[s][pass] ? dominant : k->why_not[pass]);
                fputc('\n', f);
            }
        }
    }
    for (int i = 0; i < ctx->n_host; i++) {
        double ms[PASSES];
        cpe_work_ms(ctx, &ctx->host[i].work, ms);
        for (int pass = 0; pass < PASSES; pass++)
            if (ms[pass] > 0.0) {
                fprintf(f, "host,%d,", ctx->host[i].layer);
                csv_text(f, ctx->host[i].what);
                fprintf(f, ",%s,%s,-,1,%.9f,0,1,\n", ctx->host[i].on_cpes ? "CPEs" : "MPE",
                        cpe_pass_names[pass], ms[pass] / 1e3);
            }
    }
    struct {
        const char *name;
        double value;
    } rows[] = {
        {"images_per_core_group", (double)images},
        {"core_group_iteration_seconds", p->cg_ms / 1e3},
        {"cg0_sum_of_4_seconds", p->sum_ms / 1e3},
        {"update_seconds", p->update_ms / 1e3},
        {"processor_iteration_seconds", p->iteration_ms / 1e3},
        {"processor_img_s", p->img_s},
        {"cpe_sum_of_2_seconds_per_float", p->sum2_s_per_float},
    };
    for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++)
        fprintf(f, "summary,,%s,,,,,%.9g,,,\n", rows[r].name, rows[r].value);
}

typedef struct report_ctx {
    const st_bctx *ctx;
    const processor *p;
    int images;
} report_ctx;

static st_status write_report_file(FILE *f, void *arg, st_error *err)
{
    const report_ctx *r = arg;
    write_report(f, r->ctx, r->p, r->images);
    return ferror(f) ? st_fail(err, ST_EIO, "%s: cannot write the cpe report: %s",
                               r->ctx->report_path, strerror(errno))
                     : ST_OK;
}

/* Written whole (a temporary renamed over it), or in place (fileio.h). */
static st_status report_file(const st_bctx *ctx, const processor *p, int images, st_error *err)
{
    if (!ctx->report_path[0])
        return ST_OK;
    report_ctx r = {ctx, p, images};
    return st_write_atomic(ctx->report_path, write_report_file, &r, err);
}

st_status st_cpe_backend_report(st_bctx *ctx, int images_per_iteration, int workers,
                                size_t params, void (*print)(void *pctx, const char *line),
                                void *pctx, st_error *err)
{
    char line[1024], strategy[768];
    long steady = ctx->iterations - CONV_TRIALS;
    processor proc;
    st_status st = predict_processor(ctx, images_per_iteration, workers, params, &proc, err);
    if (st != ST_OK)
        return st;
    char model[sizeof ctx->model_path + 64];
    snprintf(model, sizeof model, "cpe: the SW26010 model: %s",
             ctx->model_path[0] ? ctx->model_path : "built in (data/sw26010/model.conf)");
    print(pctx, model);
    snprintf(model, sizeof model, "cpe: the machine: %s",
             ctx->machine_path[0] ? ctx->machine_path
                                  : "built in (data/sw26010/sw26010.machine)");
    print(pctx, model);
    snprintf(line, sizeof line, "cpe: predicted core-group ms per iteration, worker "
             "%d's shard of %d images, %s%s:", ctx->worker, images_per_iteration,
             steady > 0 ? "after the strategy trials" : "during the strategy trials",
             ctx->cost_only ? " (cost-only emulation: the losses are not computed)" : "");
    print(pctx, line);
    print(pctx, "cpe: kernel                          on      forward  bwd-data  bwd-weights  "
                "flop/byte  strategy");
    double ms[PASSES];
    for (int i = 0; i < ctx->n_kernels; i++) {
        const cpe_kernel *k = ctx->kernels[i];
        cpe_work_ms(ctx, &k->work, ms);
        strategy_text(k, strategy, sizeof strategy);
        snprintf(line, sizeof line, "cpe: %-32s %-5s %9.3f %9.3f %12.3f %10.2f  %s", k->what,
                 k->where, ms[0], ms[1], ms[2], work_intensity(&k->work), strategy);
        print(pctx, line);
        cpe_work_ms(ctx, &k->layout, ms);
        if (ms[0] + ms[1] + ms[2] > 0.0) {
            snprintf(line, sizeof line, "cpe:   layout transformations         CPEs  %9.3f "
                     "%9.3f %12.3f %10.2f  to and from the implicit kernels' H W C N",
                     ms[0], ms[1], ms[2], work_intensity(&k->layout));
            print(pctx, line);
        }
    }
    for (int i = 0; i < ctx->n_host; i++) {
        cpe_work_ms(ctx, &ctx->host[i].work, ms);
        snprintf(line, sizeof line, "cpe: %-32s %-5s %9.3f %9.3f %12.3f %10s  plain C, as swCaffe's "
                 "helpers: a pass of %d floats or more a CPE launch, a shorter one the MPE's",
                 ctx->host[i].what, ctx->host[i].on_cpes ? "CPEs" : "MPE", ms[0], ms[1], ms[2], "-",
                 CPE_LAUNCH_MIN_FLOATS);
        print(pctx, line);
    }
    cpe_work_ms(ctx, &ctx->reduce_update, ms);
    snprintf(line, sizeof line, "cpe: %-32s %-5s %9.3f (sum) %7.3f (update) %5s %10.2f  "
             "streaming DMA", "gradient sum + solver update", "CPEs", ms[WORK_SUM],
             ms[WORK_UPDATE], "", work_intensity(&ctx->reduce_update));
    print(pctx, line);
    long trials = ctx->iterations < CONV_TRIALS ? ctx->iterations : CONV_TRIALS;
    snprintf(line, sizeof line, "cpe: per iteration: %.3f ms on the core group (the kernels "
             "and transformations; the sum and update of this run's slice %.3f ms more), "
             "%s", proc.cg_ms, ms[WORK_SUM] + ms[WORK_UPDATE],
             steady > 0 ? "after the trials" : trials ? "over the trials" : "no iteration");
    print(pctx, line);
    int groups = st_cpe_cluster_machine(ctx->cg)->core_groups;
    snprintf(line, sizeof line, "cpe: one %s (%d core groups of %d images; core group 0 "
             "sums the %d gradients of %zu parameters in %.3f ms and updates them in %.3f ms, "
             "as swCaffe) would train %.0f img/s",
             ctx->machine_path[0] ? "processor" : "SW26010", groups, images_per_iteration,
             groups, params, proc.sum_ms, proc.update_ms, proc.img_s);
    print(pctx, line);
    return report_file(ctx, &proc, images_per_iteration, err);
}

st_status st_cpe_backend_trace(st_bctx *ctx, const char *path, st_error *err)
{
    st_status st = st_output_open(&ctx->trace, "--cpe-trace", path, err);
    if (st == ST_OK)
        fprintf(ctx->trace.f, "iteration,kernel,forward_ms,bwd_data_ms,bwd_weights_ms\n");
    return st;
}

st_status st_cpe_backend_trace_finish(st_bctx *ctx, st_error *err)
{
    return st_output_close(&ctx->trace, 1, err);
}
