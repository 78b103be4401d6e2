/* Equivalence of the oneDNN backend with the reference backend (the oracle)
 * on every layer type the cfg reader accepts: forward outputs, the reported
 * loss, the gradient at the network input and every weight / bias gradient,
 * plus the batch statistics batch norm's backward leaves in the gradient
 * arena's ST_PARAM_STAT slots (n x batch mean, n x unbiased batch variance).
 *
 * Each case builds one network from cfg text and two training replicas of
 * it, one per backend (st_replica_init with input_delta = 1 and one intra-op
 * thread), initializes one shared weights arena (st_params_init, then every
 * ST_PARAM_BIAS value jittered by U(-0.3, 0.3) so biases are not 0 and batch
 * norm scales not 1), draws inputs, labels and a fixed random projection
 * diff_out of the last layer's output from fixed seeds, and runs
 * st_replica_forward (training, the same st_shard and st_step_info, so the
 * dropout masks and crop offsets are the same) and st_replica_backward on
 * both. The gradient arenas hold NaN in every parameter range and the input
 * gradient NaN before backward, so a gradient a backend never writes fails.
 * Cases with two batch sizes declare both at set-up (batch_sizes) and run
 * the larger, then the smaller on the same replicas.
 *
 * Compared: the output of every layer whose oneDNN output is plain NCHW
 * (r->out_layout[i] == NULL: always the last layer and the class scores;
 * intermediate outputs may be in oneDNN's blocked layouts and are then
 * checked through what they feed) as forward left it, the loss, the input
 * gradient, every parameter gradient range (ST_PARAM_WEIGHT: weights;
 * ST_PARAM_BIAS: biases and batch-norm scales) and the batch-statistic
 * slots. Each case prints its largest metric per tensor kind. Also, on both
 * replicas: backward leaves every layer's output buffer and the input
 * untouched (a kernel that writes past its gradient buffer lands in a
 * neighbouring arena view, often a later layer's output).
 *
 * Tolerance. Per tensor, metric = max_i |dnnl_i - ref_i| / max(max_i |ref_i|,
 * EQ_TINY): the largest difference relative to the tensor's largest
 * magnitude (a per-element relative error is meaningless for values that
 * cancel to ~0, e.g. gradients that are sums of terms of both signs). Every
 * tensor kind (outputs, loss, input gradient, weight / bias / scale
 * gradients, batch statistics) of every layer type must satisfy
 * metric <= EQ_TOL = 1e-4. float32 sums in different orders (oneDNN:
 * blocked, vectorized, FMA; ref: im2col + GEMM, batch norm in double)
 * differ by ~1e-7 relative per value and grow slowly with the reduction
 * length; oneDNN's vectorized exp / tanh / pow are accurate to a few ulp.
 * Measured (AVX-512, oneDNN 2.6.3; the test prints the largest metric per
 * layer type and tensor kind at the end): at most 1.4e-6 (the weight
 * gradient of conv_long_reductions, 1920-term sums), ~1e-7..1e-6 elsewhere;
 * maxpool, avgpool and most bias gradients are bit-identical. So no layer
 * needs more than 1e-4, which leaves a margin of ~70x, while the bugs this
 * exists to catch (a wrong index, a missing term, a wrong layout, an
 * overwrite instead of an accumulation) give 1e-2 or more. The one
 * ill-conditioned quantity is batch norm over very few values (see the
 * [connected] batch-norm cases): there the cases use enough samples,
 * rather than the tolerance growing.
 *
 * Inputs avoid test-design mismatches: no [maxpool] reads a relu output
 * (ties at 0 may be broken differently), and a relu / leaky pre-activation
 * within rounding of 0 is improbable with these seeds (it would show as a
 * gradient mismatch on a few values only). Dropout masks are drawn per
 * element position of the layer's input layout, so after a layer whose
 * oneDNN output is blocked the masks legitimately differ between backends;
 * there (mask mode) the test checks each replica by itself instead: every
 * value is either dropped (0) or scaled by 1 / (1 - p), about p of them
 * are dropped, and the gradient follows the same mask.
 *
 * Also: once set up, an inner product's forward allocates nothing (see
 * forward_allocates_nothing). */
#include <math.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testlib.h"

#include "base/memory.h"

#include "backends/backend.h"
#include "backends/choices.h"
#include "ops/params.h"
#include "base/rng.h"

#define EQ_TOL 1e-4
#define EQ_TINY 1e-6   /* floor of the denominator; every compared tensor is far larger */
#define EQ_MIN_SCALE 1e-3 /* a compared tensor smaller than this is a test-design bug */
#define EQ_MAX_PRINT 8

#define NET(h, w, c) "[net]\nbatch=3\nheight=" #h "\nwidth=" #w "\nchannels=" #c "\n"

enum {
    EQ_NO_INPUT_DELTA = 1, /* replicas without the input gradient */
};

typedef struct eq_case {
    const char *name;
    const char *type; /* layer type under test, for the summary */
    int n;            /* samples of the first run (the largest batch size) */
    int n_small;      /* > 0: a second declared batch size, also run */
    unsigned blocked; /* bit i: layer i's oneDNN output must be blocked (the case
                       * exists to feed a blocked layout to the next layer) */
    int flags;
    const char *cfg;
    const char *choices; /* kernel choices (choices.h text): the case runs once, with
                          * conv_impl auto and these, each convolution its own layout */
} eq_case;

/* ---- worst metrics per layer type and tensor kind, printed at the end ---- */

enum { K_OUT, K_LOSS, K_DX, K_W, K_B, K_STAT, K_COUNT };
static const char *const kind_names[K_COUNT] = {"output", "loss", "input grad", "weight grad",
                                                "bias/scale grad", "batch stats"};

typedef struct eq_worst {
    const char *type;
    double m[K_COUNT]; /* -1: not compared */
    const char *where[K_COUNT];
} eq_worst;

static eq_worst g_worst[32];
static int g_n_worst;

static eq_worst *worst_of(const char *type)
{
    for (int i = 0; i < g_n_worst; i++)
        if (strcmp(g_worst[i].type, type) == 0)
            return &g_worst[i];
    assert_true(g_n_worst < (int)(sizeof g_worst / sizeof g_worst[0]));
    eq_worst *w = &g_worst[g_n_worst++];
    w->type = type;
    for (int k = 0; k < K_COUNT; k++)
        w->m[k] = -1.0;
    return w;
}

/* ---- one case ---- */

typedef struct eq_ctx {
    const eq_case *c;
    st_cfg cfg;
    st_hparams hp;
    st_net net;
    int built, have_rep[2];
    st_replica rep[2]; /* 0: ref, 1: dnnl */
    float *w, *g[2];
    float *x, *r, *x_copy;
    int *labels;
    unsigned char *snap[2]; /* every layer output after forward, both replicas */
    size_t snap_bytes[2];
    int ns;                 /* samples of the current run */
    long failed;
    int masks_checked;
    double case_worst[K_COUNT];
    const char *impl;       /* the dnnl replica's conv_impl */
    char name[64];          /* "case [impl]", for messages */
    st_choices *choices;    /* the case's given choices, or NULL */
} eq_ctx;

static const char *const be_names[2] = {"ref", "dnnl"};

/* The oneDNN backend's convolution implementations, each case run with
 * each (NULL: its default when nothing is asked, blocked; auto: measured,
 * so whichever wins on this machine). */
static const char *const conv_impls[] = {NULL, "nhwc", "gemm", "auto"};
#define N_IMPLS ((int)(sizeof conv_impls / sizeof conv_impls[0]))

static float eq_uniform(st_rng *rng, float lo, float hi)
{
    return lo + (hi - lo) * st_rng_uniform(rng);
}

static void eq_note(eq_ctx *t, int kind, double m)
{
    if (m > t->case_worst[kind])
        t->case_worst[kind] = m;
    eq_worst *w = worst_of(t->c->type);
    if (m > w->m[kind]) {
        w->m[kind] = m;
        w->where[kind] = t->c->name;
    }
}

/* Compare count values of one tensor; see the header for the metric. */
static void eq_compare(eq_ctx *t, int kind, const char *what, const float *ref,
                       const float *dn, size_t count)
{
    double max_ref = 0.0, max_diff = 0.0;
    size_t at = 0;
    for (size_t i = 0; i < count; i++) {
        if (!isfinite(ref[i]) || !isfinite(dn[i])) {
            t->failed++;
            print_error("%s (n=%d): %s[%zu]: ref %.9g, dnnl %.9g: not finite (NaN: never "
                        "written)\n", t->name, t->ns, what, i, ref[i], dn[i]);
            return;
        }
        max_ref = fmax(max_ref, fabs(ref[i]));
        double d = fabs((double)dn[i] - (double)ref[i]);
        if (d > max_diff) {
            max_diff = d;
            at = i;
        }
    }
    double m = max_diff / fmax(max_ref, EQ_TINY);
    eq_note(t, kind, m);
    if (!(m <= EQ_TOL)) {
        t->failed++;
        print_error("%s (n=%d): %s[%zu of %zu]: ref %.9g, dnnl %.9g, |diff| %.3g, max|ref| "
                    "%.3g: metric %.3g > %.0e\n", t->name, t->ns, what, at, count, ref[at],
                    dn[at], max_diff, max_ref, m, EQ_TOL);
    }
    if (!(max_ref >= EQ_MIN_SCALE)) {
        t->failed++;
        print_error("%s (n=%d): %s: every reference value is below %g (largest %.3g): test "
                    "design, the comparison could not tell a zero result from a right one\n",
                    t->name, t->ns, what, EQ_MIN_SCALE, max_ref);
    }
}

static float *eq_delta(const st_replica *r, int layer)
{
    return st_arena_at(&r->arena, r->delta_off[layer]);
}

/* Build the net and both replicas; on failure *msg says why and what was
 * built is left for eq_teardown. */
static int eq_setup(eq_ctx *t, const eq_case *c, const char *impl, char *msg, size_t size)
{
    memset(t, 0, sizeof *t);
    t->c = c;
    t->impl = impl;
    snprintf(t->name, sizeof t->name, "%s [%s]", c->name,
             c->choices ? "given choices" : impl ? impl : "default");
    if (c->choices) {
        st_error cerr = {0};
        const st_backend *dnnl = NULL;
        if (st_backend_find("dnnl", &dnnl, &cerr) != ST_OK ||
            st_choices_create(&t->choices, dnnl->choice_syntax, &cerr) != ST_OK ||
            st_choices_parse(t->choices, c->choices, strlen(c->choices), c->name,
                             ST_CHOICE_FILE, &cerr) != ST_OK) {
            snprintf(msg, size, "%s: the case's choices: %s", c->name, cerr.msg);
            return -1;
        }
    }
    for (int k = 0; k < K_COUNT; k++)
        t->case_worst[k] = -1.0;
    st_error err = {0};
    if (tl_build(c->name, c->cfg, &t->cfg, &t->hp, &t->net, &err) != ST_OK) {
        snprintf(msg, size, "%s: building the net failed: %s", c->name, err.msg);
        return -1;
    }
    t->built = 1;
    const int sizes[2] = {c->n, c->n_small};
    st_replica_opts o = {
        .n = c->n, .batch_sizes = sizes, .n_batch_sizes = c->n_small ? 2 : 1, .training = 1,
        .input_delta = !(c->flags & EQ_NO_INPUT_DELTA),
        .backend = {.intra_threads = 1, .worker = 0},
    };
    for (int b = 0; b < 2; b++) {
        const st_backend *be;
        o.backend.conv_impl = b == 1 ? impl : NULL;
        o.backend.choices = b == 1 ? t->choices : NULL;
        if (st_backend_find(be_names[b], &be, &err) != ST_OK ||
            st_replica_init(&t->rep[b], &t->net, be, &o, &err) != ST_OK) {
            snprintf(msg, size, "%s [%s]: st_replica_init on the %s backend failed: %s",
                     c->name, impl ? impl : "default", be_names[b], err.msg);
            return -1;
        }
        t->have_rep[b] = 1;
    }
    const st_replica *dn = &t->rep[1];
    if (getenv("EQ_VERBOSE")) {
        for (int i = 0; i < t->net.n_layers; i++)
            print_message("  %s: layer %d [%s] %dx%dx%d: dnnl output %s, %zu bytes\n", c->name,
                          i, t->net.layers[i]->ops->type, t->net.layers[i]->out.c,
                          t->net.layers[i]->out.h, t->net.layers[i]->out.w,
                          dn->out_layout[i] ? "blocked" : "plain", dn->out_bytes[i]);
    }
    st_choice_counts counts = {.unused = 0};
    if (t->choices)
        st_choices_counts(t->choices, &counts);
    int measured = counts.taken[ST_CHOICE_MEASURED], unused = counts.unused;
    if (measured || unused) {
        snprintf(msg, size, "%s: test design: %d convolution(s) had no choice among the "
                 "case's (their keys differ: see dnnl_conv.c's choice_key) and were measured, "
                 "%d of its choices unused", c->name, measured, unused);
        return -1;
    }
    for (int i = 0; i < t->net.n_layers && !impl; i++)
        if ((c->blocked >> i & 1u) && !dn->out_layout[i]) {
            snprintf(msg, size, "%s: test design: layer %d's oneDNN output is plain, but the "
                     "case exists to feed a blocked layout to the next layer", c->name, i);
            return -1;
        }
    const st_param_table *pt = &t->net.params;
    size_t pc = pt->count ? pt->count : 1;
    t->w = st_alloc_aligned(pc * sizeof(float), "weights", &err);
    t->g[0] = st_alloc_aligned(pc * sizeof(float), "ref grads", &err);
    t->g[1] = st_alloc_aligned(pc * sizeof(float), "dnnl grads", &err);
    assert_non_null(t->w);
    assert_non_null(t->g[0]);
    assert_non_null(t->g[1]);
    st_params_init(pt, t->w, 42);
    st_rng rng;
    st_rng_seed(&rng, 7, 1);
    for (int i = 0; i < pt->n; i++)
        if (pt->p[i].kind == ST_PARAM_BIAS)
            for (size_t j = 0; j < pt->p[i].count; j++)
                t->w[pt->p[i].offset + j] += eq_uniform(&rng, -0.3f, 0.3f);
    size_t in_n = (size_t)c->n * st_shape_count(t->net.input);
    size_t out_n = (size_t)c->n * st_shape_count(t->net.layers[t->net.n_layers - 1]->out);
    t->x = calloc(in_n, sizeof *t->x);
    t->x_copy = calloc(in_n, sizeof *t->x_copy);
    t->r = calloc(out_n, sizeof *t->r);
    t->labels = calloc((size_t)c->n, sizeof *t->labels);
    assert_non_null(t->x);
    assert_non_null(t->x_copy);
    assert_non_null(t->r);
    assert_non_null(t->labels);
    for (int b = 0; b < 2; b++) {
        for (int i = 0; i < t->net.n_layers; i++)
            t->snap_bytes[b] += t->rep[b].out_bytes[i];
        t->snap[b] = malloc(t->snap_bytes[b] ? t->snap_bytes[b] : 1);
        assert_non_null(t->snap[b]);
    }
    return 0;
}

static void eq_teardown(eq_ctx *t)
{
    for (int b = 0; b < 2; b++) {
        if (t->have_rep[b])
            st_replica_free(&t->rep[b]);
        st_free_aligned(t->g[b]);
        free(t->snap[b]);
    }
    st_free_aligned(t->w);
    st_choices_free(t->choices);
    free(t->x);
    free(t->x_copy);
    free(t->r);
    free(t->labels);
    if (t->built) {
        st_net_free(&t->net);
        st_cfg_free(&t->cfg);
    }
}

static void eq_snapshot(eq_ctx *t, int b, int save)
{
    const st_replica *r = &t->rep[b];
    size_t off = 0;
    for (int i = 0; i < t->net.n_layers; i++) {
        const unsigned char *out = (const unsigned char *)st_replica_output(r, i);
        unsigned char *s = t->snap[b] + off;
        if (save) {
            memcpy(s, out, r->out_bytes[i]);
        } else if (memcmp(s, out, r->out_bytes[i]) != 0) {
            size_t k = 0;
            while (s[k] == out[k])
                k++;
            t->failed++;
            print_error("%s (n=%d): %s backend: backward changed layer %d [%s]'s output "
                        "buffer (first at byte %zu of %zu): some kernel writes past its "
                        "gradient buffer or into the forward's output\n", t->name, t->ns,
                        be_names[b], i, t->net.layers[i]->ops->type, k, r->out_bytes[i]);
        }
        off += r->out_bytes[i];
    }
}

/* Layer i's output of replica b as forward left it (the snapshot). */
static const float *eq_forward_output(const eq_ctx *t, int b, int layer)
{
    size_t off = 0;
    for (int i = 0; i < layer; i++)
        off += t->rep[b].out_bytes[i];
    return (const float *)(const void *)(t->snap[b] + off);
}

/* The first [dropout] whose oneDNN input is blocked, or -1. */
static int eq_blocked_dropout(const eq_ctx *t)
{
    for (int i = 0; i < t->net.n_layers; i++) {
        const st_layer *l = t->net.layers[i];
        if (l->ops == &st_dropout_ops && l->src[0] >= 0 && t->rep[1].out_layout[l->src[0]])
            return i;
    }
    return -1;
}

/* Mask mode: check dropout layer d of replica b by itself (layout-agnostic:
 * its input and output share one layout, elementwise). Its source must be a
 * layer whose backward leaves the gradient at its output as dropout wrote it
 * (a linear convolution without batch norm). */
static void eq_check_dropout(eq_ctx *t, int b, int d)
{
    const st_replica *r = &t->rep[b];
    int s = t->net.layers[d]->src[0];
    float p = 0.5f;
    st_error err = {0};
    st_cfg_float(&t->cfg, &t->cfg.secs[d + 1], "probability", 0.5f, 0.0f, 0.99f, &p, &err);
    float scale = 1.0f / (1.0f - p);
    size_t count = r->out_bytes[d] / sizeof(float) / (size_t)r->n * (size_t)t->ns;
    const float *x = st_replica_output(r, s), *y = st_replica_output(r, d);
    const float *dx = eq_delta(r, s), *dy = eq_delta(r, d);
    size_t dropped = 0, kept = 0, bad = 0;
    for (size_t i = 0; i < count; i++) {
        if (x[i] == 0.0f) /* a blocked layout's padding, or an exact 0: no information */
            continue;
        int ok;
        if (y[i] == 0.0f) {
            dropped++;
            ok = dx[i] == 0.0f;
        } else {
            kept++;
            ok = y[i] == x[i] * scale && dx[i] == dy[i] * scale;
        }
        if (!ok && bad++ < EQ_MAX_PRINT)
            print_error("%s (n=%d): %s backend: dropout layer %d value %zu: input %.9g, output "
                        "%.9g (expected 0 or %.9g), gradient %.9g from %.9g\n", t->name,
                        t->ns, be_names[b], d, i, x[i], y[i], x[i] * scale, dx[i], dy[i]);
    }
    size_t total = dropped + kept;
    double frac = total ? (double)dropped / (double)total : 0.0;
    double slack = 5.0 * sqrt((double)p * (1.0 - p) / (double)(total ? total : 1));
    if (bad || total < 100 || fabs(frac - p) > slack) {
        t->failed++;
        print_error("%s (n=%d): %s backend: dropout layer %d: %zu bad values, %zu of %zu "
                    "dropped (%.3f, expected %.2f +- %.3f)\n", t->name, t->ns,
                    be_names[b], d, bad, dropped, total, frac, p, slack);
    }
}

/* One forward and backward of ns samples on both replicas, and the
 * comparisons; -1 with *msg when a pass fails to run. */
static int eq_pass(eq_ctx *t, int ns, uint64_t seed, char *msg, size_t size)
{
    const eq_case *c = t->c;
    const st_net *net = &t->net;
    t->ns = ns;
    size_t in_n = (size_t)ns * st_shape_count(net->input);
    size_t out_n = (size_t)ns * st_shape_count(net->layers[net->n_layers - 1]->out);
    st_rng rng;
    st_rng_seed(&rng, seed, 2);
    for (size_t i = 0; i < in_n; i++)
        t->x[i] = eq_uniform(&rng, -1.0f, 1.0f);
    for (size_t i = 0; i < out_n; i++)
        t->r[i] = eq_uniform(&rng, -1.0f, 1.0f);
    for (int i = 0; i < ns; i++)
        t->labels[i] = (int)st_rng_below(&rng, (uint64_t)net->classes);
    memcpy(t->x_copy, t->x, in_n * sizeof *t->x);
    st_shard shard = {.n = ns, .x = t->x, .labels = t->labels, .sample0 = 5};
    st_step_info info = {1, 1234, 7};
    const st_param_table *pt = &net->params;
    double loss[2];
    st_error err = {0};
    for (int b = 0; b < 2; b++) {
        st_replica *r = &t->rep[b];
        if (st_replica_forward(r, t->w, &shard, &info, &loss[b], &err) != ST_OK) {
            snprintf(msg, size, "%s (n=%d): %s forward failed: %s", t->name, ns, be_names[b],
                     err.msg);
            return -1;
        }
        eq_snapshot(t, b, 1);
        memset(t->g[b], 0, pt->count * sizeof(float));
        for (int i = 0; i < pt->n; i++)
            for (size_t j = 0; j < pt->p[i].count; j++)
                t->g[b][pt->p[i].offset + j] = NAN;
        float *dx = st_replica_input_delta(r);
        if (dx)
            for (size_t i = 0; i < (size_t)r->n * st_shape_count(net->input); i++)
                dx[i] = NAN;
        if (st_replica_backward(r, t->w, t->g[b], &shard, &info, t->r, &err) != ST_OK) {
            snprintf(msg, size, "%s (n=%d): %s backward failed: %s", t->name, ns,
                     be_names[b], err.msg);
            return -1;
        }
        eq_snapshot(t, b, 0);
        if (memcmp(t->x, t->x_copy, in_n * sizeof *t->x) != 0) {
            t->failed++;
            print_error("%s (n=%d): %s backend changed the network input\n", t->name, ns,
                        be_names[b]);
        }
    }

    int mask_layer = eq_blocked_dropout(t);
    char what[96];
    for (int i = 0; i < net->n_layers; i++) {
        if (t->rep[1].out_layout[i] || (mask_layer >= 0 && i >= mask_layer))
            continue;
        snprintf(what, sizeof what, "layer %d [%s] output", i, net->layers[i]->ops->type);
        eq_compare(t, K_OUT, what, eq_forward_output(t, 0, i), eq_forward_output(t, 1, i),
                   (size_t)ns * st_shape_count(net->layers[i]->out));
    }
    if (mask_layer >= 0) {
        for (int b = 0; b < 2; b++)
            eq_check_dropout(t, b, mask_layer);
        t->masks_checked = 1;
        return 0;
    }
    int has_loss = 0;
    for (int i = 0; i < net->n_layers; i++)
        has_loss |= net->layers[i]->is_loss;
    if (has_loss) {
        double m = fabs(loss[1] - loss[0]) / fmax(fabs(loss[0]), EQ_TINY);
        eq_note(t, K_LOSS, m);
        if (!(m <= EQ_TOL) || !(fabs(loss[0]) >= EQ_MIN_SCALE)) {
            t->failed++;
            print_error("%s (n=%d): loss: ref %.9g, dnnl %.9g: metric %.3g\n", t->name, ns,
                        loss[0], loss[1], m);
        }
    }
    if (!(c->flags & EQ_NO_INPUT_DELTA))
        eq_compare(t, K_DX, "input gradient", st_replica_input_delta(&t->rep[0]),
                   st_replica_input_delta(&t->rep[1]), in_n);
    for (int i = 0; i < pt->n; i++) {
        const st_param *p = &pt->p[i];
        int kind = p->kind == ST_PARAM_WEIGHT ? K_W : p->kind == ST_PARAM_BIAS ? K_B : K_STAT;
        snprintf(what, sizeof what, "%s slot [%s]", p->name,
                 net->layers[p->layer]->ops->type);
        eq_compare(t, kind, what, t->g[0] + p->offset, t->g[1] + p->offset, p->count);
    }
    return 0;
}

static void eq_run_impl(const eq_case *c, const char *impl)
{
    eq_ctx t;
    char msg[1200];
    if (eq_setup(&t, c, impl, msg, sizeof msg) != 0 ||
        eq_pass(&t, c->n, 100 + (uint64_t)c->n, msg, sizeof msg) != 0 ||
        (c->n_small && eq_pass(&t, c->n_small, 200 + (uint64_t)c->n_small, msg, sizeof msg))) {
        eq_teardown(&t);
        fail_msg("%s", msg);
    }
    char line[256], name[64];
    snprintf(name, sizeof name, "%s", t.name);
    int len = snprintf(line, sizeof line, "%-42s", name);
    for (int k = 0; k < K_COUNT && len > 0 && (size_t)len < sizeof line; k++)
        if (t.case_worst[k] >= 0.0)
            len += snprintf(line + len, sizeof line - (size_t)len, "  %s %.1e", kind_names[k],
                            t.case_worst[k]);
    print_message("%s%s\n", line, t.masks_checked ? "  (dropout masks checked per backend)" : "");
    long failed = t.failed;
    eq_teardown(&t);
    if (failed)
        fail_msg("%s: %ld check(s) failed (see above)", name, failed);
}

/* Cases without a convolution run once: conv_impl changes nothing there;
 * nor do cases with their own choices. */
static void eq_run(const eq_case *c)
{
    if (c->choices) {
        eq_run_impl(c, "auto");
        return;
    }
    int convs = strstr(c->cfg, "[convolutional]") != NULL;
    for (int i = 0; i < (convs ? N_IMPLS : 1); i++)
        eq_run_impl(c, conv_impls[i]);
}

#define EQ_CASE(fn, type_, n_, small_, blocked_, flags_, cfg_)                             \
    static void fn(void **state)                                                            \
    {                                                                                       \
        (void)state;                                                                        \
        static const eq_case c = {#fn, type_, n_, small_, blocked_, flags_, cfg_, NULL};    \
        eq_run(&c);                                                                         \
    }

/* A case whose convolutions take the given choices (each its own layout). */
#define EQ_CHOICES(fn, n_, small_, cfg_, choices_)                                          \
    static void fn(void **state)                                                            \
    {                                                                                       \
        (void)state;                                                                        \
        static const eq_case c = {#fn, "convolutional", n_, small_, 0, 0, cfg_, choices_};  \
        eq_run(&c);                                                                         \
    }

/* ---- [convolutional] on the network input (plain) ---- */

/* 7x5 input, 3 -> 13 channels (13: blocked layouts pad it to 16) */
EQ_CASE(conv_odd_3to13_pad1, "convolutional", 3, 2, 0, 0,
        NET(7, 5, 3) "[convolutional]\nfilters=13\nsize=3\npad=1\nactivation=linear\n")
/* 13 -> 3 channels, stride 2, explicit padding=2 */
EQ_CASE(conv_13to3_stride2_padding2, "convolutional", 3, 0, 0, 0,
        NET(7, 5, 13) "[convolutional]\nfilters=3\nsize=3\nstride=2\npadding=2\n"
                      "activation=leaky\n")
/* stride 2 without padding on width 6: the last column is in no window
 * (oneDNN's right padding is -1) */
EQ_CASE(conv_stride2_nopad_uncovered, "convolutional", 2, 0, 0, 0,
        NET(7, 6, 4) "[convolutional]\nfilters=5\nsize=3\nstride=2\nactivation=tanh\n")
EQ_CASE(conv_groups2, "convolutional", 3, 0, 0, 0,
        NET(5, 7, 6) "[convolutional]\nfilters=10\nsize=3\npad=1\ngroups=2\n"
                     "activation=tanh\n")
EQ_CASE(conv_depthwise_stride2, "convolutional", 3, 0, 0, 0,
        NET(7, 5, 13) "[convolutional]\nfilters=13\nsize=3\nstride=2\npad=1\ngroups=13\n"
                      "activation=logistic\n")
EQ_CASE(conv_1x1, "convolutional", 3, 1, 0, 0,
        NET(7, 5, 13) "[convolutional]\nfilters=16\nsize=1\nactivation=leaky\n")
/* 1x1 stride 2 on 7x6: right padding -1 again */
EQ_CASE(conv_1x1_stride2, "convolutional", 3, 0, 0, 0,
        NET(7, 6, 13) "[convolutional]\nfilters=5\nsize=1\nstride=2\nactivation=linear\n")
EQ_CASE(conv_5x5_pad1, "convolutional", 2, 0, 0, 0,
        NET(9, 7, 3) "[convolutional]\nfilters=8\nsize=5\npadding=1\nactivation=tanh\n")
EQ_CASE(conv_5x5_stride3_pad, "convolutional", 2, 0, 0, 0,
        NET(8, 9, 5) "[convolutional]\nfilters=17\nsize=5\nstride=3\npad=1\n"
                     "activation=logistic\n")
EQ_CASE(conv_batch1, "convolutional", 1, 0, 0, 0,
        NET(7, 5, 3) "[convolutional]\nfilters=13\nsize=3\nstride=2\npad=1\n"
                     "activation=tanh\n")

/* Longer reductions: the weight gradient sums 4 x 24 x 20 = 1920 products per
 * value, the forward 16 x 9 = 144. */
EQ_CASE(conv_long_reductions, "convolutional", 4, 0, 0, 0,
        NET(24, 20, 16) "[convolutional]\nfilters=32\nsize=3\npad=1\nactivation=leaky\n")

/* Every activation. */
#define CONV_ACT(a) NET(6, 5, 3) "[convolutional]\nfilters=16\nsize=3\npad=1\nactivation=" a "\n"
EQ_CASE(conv_act_linear, "convolutional", 2, 0, 0, 0, CONV_ACT("linear"))
EQ_CASE(conv_act_relu, "convolutional", 2, 0, 0, 0, CONV_ACT("relu"))
EQ_CASE(conv_act_leaky, "convolutional", 2, 0, 0, 0, CONV_ACT("leaky"))
EQ_CASE(conv_act_logistic, "convolutional", 2, 0, 0, 0, CONV_ACT("logistic"))
EQ_CASE(conv_act_tanh, "convolutional", 2, 0, 0, 0, CONV_ACT("tanh"))

/* batch_normalize=1. The conv's output must be plain (it is the last
 * layer) while batch norm's input, the convolution's output, is blocked:
 * with 13 or 8 channels oneDNN's 16-channel blocks are padded, so the
 * blocked gradient at batch norm's input is larger than the plain gradient
 * buffer of the layer's output (the 16-channel case has no padding). */
EQ_CASE(conv_bn_relu, "convolutional", 3, 2, 0, 0,
        NET(7, 5, 3) "[convolutional]\nfilters=13\nsize=3\npad=1\nbatch_normalize=1\n"
                     "activation=relu\n")
EQ_CASE(conv_bn_linear, "convolutional", 3, 0, 0, 0,
        NET(6, 5, 4) "[convolutional]\nfilters=16\nsize=3\nstride=2\npad=1\n"
                     "batch_normalize=1\nactivation=linear\n")
/* the same with 16 channels, where oneDNN's 16-channel blocks have no padding */
EQ_CASE(conv_bn_relu_16ch, "convolutional", 3, 2, 0, 0,
        NET(7, 5, 3) "[convolutional]\nfilters=16\nsize=3\npad=1\nbatch_normalize=1\n"
                     "activation=relu\n")
EQ_CASE(conv_bn_batch1, "convolutional", 1, 0, 0, 0,
        NET(7, 5, 3) "[convolutional]\nfilters=8\nsize=3\npad=1\nbatch_normalize=1\n"
                     "activation=leaky\n")

/* ---- convolutions in different layouts, one after another ---- */

/* The layouts meet at the second convolution's input (a reorder there, and
 * of its input gradient back); 20 channels: padded to 32 when blocked. */
#define MIXED_NET                                                                          \
    NET(8, 8, 3) "[convolutional]\nfilters=20\nsize=3\npad=1\nactivation=leaky\n"           \
                 "[maxpool]\nsize=2\nstride=2\n"                                           \
                 "[convolutional]\nfilters=8\nsize=3\npad=1\nactivation=tanh\n"           \
                 "[connected]\noutput=5\nactivation=linear\n"
#define MIXED_KEY0 "0.conv n3 3x8x8>20x8x8 k3x3 s1x1 p1x1 g1 fwd+bwd = "
#define MIXED_KEY2 "\n2.conv n3 20x4x4>8x4x4 k3x3 s1x1 p1x1 g1 fwd+bwd = "
EQ_CHOICES(mixed_blocked_then_nhwc, 3, 2, MIXED_NET,
           MIXED_KEY0 "blocked - - -" MIXED_KEY2 "nhwc - - -")
EQ_CHOICES(mixed_nhwc_then_blocked, 3, 2, MIXED_NET,
           MIXED_KEY0 "nhwc - - -" MIXED_KEY2 "blocked - - -")
EQ_CHOICES(mixed_blocked_then_nchw, 3, 0, MIXED_NET,
           MIXED_KEY0 "blocked - - -" MIXED_KEY2 "nchw - - -")
EQ_CHOICES(mixed_nchw_then_nhwc, 3, 0, MIXED_NET,
           MIXED_KEY0 "nchw - - -" MIXED_KEY2 "nhwc - - -")

/* ---- [convolutional] fed by a convolution (blocked input) ---- */

#define CONV0_13 "[convolutional]\nfilters=13\nsize=3\npad=1\nactivation=tanh\n"
EQ_CASE(conv_on_blocked_stride2, "convolutional", 3, 2, 1u, 0,
        NET(7, 5, 3) CONV0_13
        "[convolutional]\nfilters=7\nsize=3\nstride=2\npad=1\nactivation=leaky\n")
EQ_CASE(conv_on_blocked_groups2, "convolutional", 2, 0, 1u, 0,
        NET(7, 5, 3) "[convolutional]\nfilters=16\nsize=3\npad=1\nactivation=tanh\n"
        "[convolutional]\nfilters=6\nsize=3\npad=1\ngroups=2\nactivation=logistic\n")
EQ_CASE(conv_on_blocked_depthwise, "convolutional", 2, 0, 1u, 0,
        NET(7, 5, 3) CONV0_13
        "[convolutional]\nfilters=13\nsize=3\npad=1\ngroups=13\nactivation=linear\n")
EQ_CASE(conv_on_blocked_1x1_stride2, "convolutional", 3, 0, 1u, 0,
        NET(7, 6, 3) CONV0_13
        "[convolutional]\nfilters=9\nsize=1\nstride=2\nactivation=tanh\n")
EQ_CASE(conv_on_blocked_bn, "convolutional", 3, 1, 1u, 0,
        NET(7, 5, 3) CONV0_13
        "[convolutional]\nfilters=13\nsize=3\npad=1\nbatch_normalize=1\nactivation=relu\n")
/* a conv with batch norm whose output stays blocked, feeding a conv */
EQ_CASE(conv_bn_then_conv, "convolutional", 2, 0, 1u, 0,
        NET(7, 5, 3) "[convolutional]\nfilters=13\nsize=3\npad=1\nbatch_normalize=1\n"
                     "activation=leaky\n"
        "[convolutional]\nfilters=5\nsize=3\npad=1\nactivation=linear\n")
EQ_CASE(conv_three_deep, "convolutional", 2, 0, 3u, 0,
        NET(8, 7, 3) CONV0_13
        "[convolutional]\nfilters=16\nsize=3\nstride=2\npad=1\nbatch_normalize=1\n"
        "activation=leaky\n"
        "[convolutional]\nfilters=4\nsize=1\nactivation=logistic\n")

/* ---- [connected] ---- */

#define FC_ACT(a) NET(3, 5, 2) "[connected]\noutput=7\nactivation=" a "\n"
EQ_CASE(connected_act_linear, "connected", 3, 0, 0, 0, FC_ACT("linear"))
EQ_CASE(connected_act_relu, "connected", 3, 0, 0, 0, FC_ACT("relu"))
EQ_CASE(connected_act_leaky, "connected", 3, 0, 0, 0, FC_ACT("leaky"))
EQ_CASE(connected_act_logistic, "connected", 3, 2, 0, 0, FC_ACT("logistic"))
EQ_CASE(connected_act_tanh, "connected", 3, 0, 0, 0, FC_ACT("tanh"))
EQ_CASE(connected_batch1, "connected", 1, 0, 0, 0,
        NET(3, 5, 2) "[connected]\noutput=5\nactivation=tanh\n")
/* Batch norm after [connected] normalizes over the samples alone (H = W = 1):
 * over m = 2 values its input gradient is analytically ~0 (the normalized
 * pair is +-1 whatever x is; only eps leaves a residue) and what remains is
 * the cancellation of O(1) terms, ill-conditioned for any float comparison
 * (measured 1.4e-4 at m = 2); at m = 1 it is exactly 0. So these cases use
 * 4 to 6 samples. */
EQ_CASE(connected_bn_tanh, "connected", 6, 4, 0, 0,
        NET(2, 3, 3) "[connected]\noutput=6\nbatch_normalize=1\nactivation=tanh\n")
EQ_CASE(connected_bn_relu, "connected", 5, 0, 0, 0,
        NET(3, 1, 3) "[connected]\noutput=5\nbatch_normalize=1\nactivation=relu\n")
/* after a conv: the input arrives blocked and is reordered */
EQ_CASE(conv_then_connected, "connected", 3, 2, 1u, 0,
        NET(7, 5, 3) "[convolutional]\nfilters=13\nsize=3\nstride=2\npad=1\n"
                     "activation=leaky\n"
        "[connected]\noutput=9\nactivation=logistic\n")
EQ_CASE(conv_then_connected_bn, "connected", 5, 0, 1u, 0,
        NET(6, 5, 3) CONV0_13 "[connected]\noutput=6\nbatch_normalize=1\nactivation=leaky\n")
EQ_CASE(connected_then_connected, "connected", 2, 0, 0, 0,
        NET(3, 5, 2) "[connected]\noutput=9\nactivation=tanh\n"
        "[connected]\noutput=4\nactivation=linear\n")

/* ---- [maxpool] (Darknet: total padding, default size - 1) ---- */

/* size 2 stride 2 on 7x5: default padding 1 at the bottom/right, the last
 * windows overhang */
EQ_CASE(maxpool_2s2_default, "maxpool", 3, 2, 0, 0,
        NET(7, 5, 3) "[maxpool]\nsize=2\nstride=2\n")
EQ_CASE(maxpool_3s2_default, "maxpool", 2, 0, 0, 0,
        NET(7, 5, 3) "[maxpool]\nsize=3\nstride=2\n")
/* padding=0: on 7x6 the last row... of windows leaves the last column out */
EQ_CASE(maxpool_3s2_pad0, "maxpool", 2, 0, 0, 0,
        NET(7, 6, 3) "[maxpool]\nsize=3\nstride=2\npadding=0\n")
/* stride 1 (default): out = in */
EQ_CASE(maxpool_2s1, "maxpool", 2, 0, 0, 0, NET(5, 7, 4) "[maxpool]\nsize=2\n")
/* odd total padding 3: 1 top/left, 2 bottom/right */
EQ_CASE(maxpool_3s2_pad3, "maxpool", 1, 0, 0, 0,
        NET(5, 5, 3) "[maxpool]\nsize=3\nstride=2\npadding=3\n")
#define CONV0_LIN "[convolutional]\nfilters=13\nsize=3\npad=1\nactivation=linear\n"
EQ_CASE(conv_then_maxpool_2s2, "maxpool", 3, 2, 1u, 0,
        NET(7, 5, 3) CONV0_LIN "[maxpool]\nsize=2\nstride=2\n")
EQ_CASE(conv_then_maxpool_3s2_pad0, "maxpool", 2, 0, 1u, 0,
        NET(7, 6, 3) CONV0_LIN "[maxpool]\nsize=3\nstride=2\npadding=0\n")
EQ_CASE(conv_then_maxpool_3s1, "maxpool", 2, 0, 1u, 0,
        NET(7, 5, 3) CONV0_LIN "[maxpool]\nsize=3\nstride=1\n")

/* ---- [avgpool] (global) ---- */

EQ_CASE(avgpool_input, "avgpool", 3, 0, 0, 0, NET(5, 3, 7) "[avgpool]\n")
EQ_CASE(conv_then_avgpool, "avgpool", 3, 2, 1u, 0,
        NET(7, 5, 3) CONV0_13 "[avgpool]\n")
EQ_CASE(conv_avgpool_connected, "avgpool", 2, 0, 3u, 0,
        NET(6, 5, 3) CONV0_13 "[avgpool]\n[connected]\noutput=5\nactivation=linear\n")

/* ---- [batchnorm] ---- */

EQ_CASE(batchnorm_input, "batchnorm", 2, 1, 0, 0, NET(4, 5, 3) "[batchnorm]\n")
EQ_CASE(batchnorm_input_no_input_grad, "batchnorm", 2, 0, 0, EQ_NO_INPUT_DELTA,
        NET(4, 5, 3) "[batchnorm]\n[convolutional]\nfilters=3\nsize=1\nactivation=linear\n")
EQ_CASE(conv_then_batchnorm, "batchnorm", 3, 2, 1u, 0,
        NET(7, 5, 3) CONV0_13 "[batchnorm]\n")
EQ_CASE(conv_batchnorm_conv, "batchnorm", 2, 0, 3u, 0,
        NET(7, 5, 3) CONV0_13 "[batchnorm]\n"
        "[convolutional]\nfilters=4\nsize=3\npad=1\nactivation=linear\n")

/* ---- [lrn] ---- */

EQ_CASE(lrn_input_size3, "lrn", 2, 0, 0, 0,
        NET(3, 4, 7) "[lrn]\nsize=3\nalpha=0.5\nbeta=0.6\nk=1\n")
EQ_CASE(conv_then_lrn_size3, "lrn", 3, 2, 1u, 0,
        NET(7, 5, 3) CONV0_13 "[lrn]\nsize=3\nalpha=0.5\nbeta=0.75\nk=1\n")
EQ_CASE(conv_then_lrn_size5, "lrn", 2, 0, 1u, 0,
        NET(7, 5, 3) CONV0_13 "[lrn]\nsize=5\nalpha=1\nbeta=0.75\nk=2\n")

/* ---- [dropout] ---- */

/* plain input: the same masks, exact comparison */
EQ_CASE(connected_then_dropout, "dropout", 3, 2, 0, 0,
        NET(3, 5, 2) "[connected]\noutput=40\nactivation=tanh\n[dropout]\nprobability=0.4\n")
EQ_CASE(dropout_input_then_conv, "dropout", 2, 0, 0, 0,
        NET(5, 4, 3) "[dropout]\nprobability=0.3\n"
        "[convolutional]\nfilters=5\nsize=3\npad=1\nactivation=linear\n")
EQ_CASE(connected_dropout_connected, "dropout", 3, 0, 0, 0,
        NET(3, 5, 2) "[connected]\noutput=30\nactivation=leaky\n[dropout]\nprobability=0.5\n"
        "[connected]\noutput=4\nactivation=linear\n")
/* blocked input: masks differ by design, each replica checked by itself
 * (the conv is linear so its gradient buffer keeps what dropout wrote) */
EQ_CASE(conv_dropout_connected, "dropout", 3, 2, 1u, 0,
        NET(7, 5, 3) CONV0_LIN "[dropout]\nprobability=0.5\n"
        "[connected]\noutput=4\nactivation=linear\n")
/* dropout after a conv as the last layer: its output must be plain, but
 * dropout keeps its input's (blocked) layout */
EQ_CASE(conv_then_dropout_last, "dropout", 2, 0, 0, 0,
        NET(7, 5, 3) CONV0_LIN "[dropout]\nprobability=0.5\n")

/* ---- [softmax] and [cost] ---- */

EQ_CASE(softmax_plain, "softmax", 3, 2, 0, 0,
        NET(3, 5, 2) "[connected]\noutput=6\nactivation=linear\n[softmax]\n")
EQ_CASE(softmax_groups2_temperature2, "softmax", 3, 0, 0, 0,
        NET(3, 5, 2) "[connected]\noutput=8\nactivation=linear\n"
        "[softmax]\ngroups=2\ntemperature=2\n")
EQ_CASE(conv_connected_softmax, "softmax", 2, 0, 1u, 0,
        NET(6, 5, 3) CONV0_13 "[connected]\noutput=5\nactivation=linear\n[softmax]\n")
EQ_CASE(connected_cost, "cost", 3, 2, 0, 0,
        NET(3, 5, 2) "[connected]\noutput=5\nactivation=logistic\n[cost]\nscale=0.7\n")
EQ_CASE(conv_cost, "cost", 2, 0, 0, 0,
        NET(5, 5, 3) "[convolutional]\nfilters=3\nsize=3\nstride=2\npad=1\n"
                     "activation=tanh\n[cost]\n")
EQ_CASE(softmax_cost, "cost", 2, 0, 0, 0,
        NET(3, 5, 2) "[connected]\noutput=6\nactivation=linear\n[softmax]\n[cost]\n")

/* ---- [shortcut] and [route]: plain C, fed by convolutions whose outputs
 * must be plain (the "dst edge" reorder); a layer read by two layers makes
 * the later consumer's backward add to its gradient (accumulate) ---- */

#define TWO_CONVS                                                                             \
    "[convolutional]\nfilters=13\nsize=3\npad=1\nactivation=tanh\n"                           \
    "[convolutional]\nfilters=13\nsize=3\npad=1\nactivation=linear\n"
EQ_CASE(shortcut_same_shape, "shortcut", 3, 2, 0, 0,
        NET(7, 5, 3) TWO_CONVS "[shortcut]\nfrom=-2\nalpha=0.6\nbeta=1.7\nactivation=logistic\n")
EQ_CASE(shortcut_from_larger, "shortcut", 2, 0, 0, 0,
        NET(6, 6, 3) "[convolutional]\nfilters=5\nsize=3\npad=1\nactivation=tanh\n"
        "[convolutional]\nfilters=5\nsize=3\nstride=2\npad=1\nactivation=linear\n"
        "[shortcut]\nfrom=0\nalpha=0.5\nbeta=-1.5\n")
EQ_CASE(shortcut_then_conv, "shortcut", 2, 0, 0, 0,
        NET(7, 5, 3) TWO_CONVS "[shortcut]\nfrom=-2\n"
        "[convolutional]\nfilters=6\nsize=3\nstride=2\npad=1\nactivation=tanh\n")
EQ_CASE(route_two_convs, "route", 3, 2, 0, 0,
        NET(7, 5, 3) "[convolutional]\nfilters=5\nsize=3\npad=1\nactivation=tanh\n"
        "[convolutional]\nfilters=13\nsize=3\npad=1\nactivation=leaky\n"
        "[route]\nlayers=-1,-2\n"
        "[convolutional]\nfilters=4\nsize=1\nactivation=linear\n")
EQ_CASE(route_order_0_1, "route", 2, 0, 0, 0,
        NET(7, 5, 3) CONV0_13 "[convolutional]\nfilters=16\nsize=3\npad=1\nactivation=tanh\n"
        "[route]\nlayers=0,-1\n"
        "[convolutional]\nfilters=3\nsize=3\npad=1\nactivation=linear\n")

/* Fan-out: conv 0's output feeds layer 1 (a oneDNN kernel) and the route,
 * so conv 0 emits plain output that a oneDNN kernel also reads, and layer
 * 1's backward_data adds to conv 0's gradient (the route's ran first).
 * Layer 1's own output must be plain too (the route reads it); with batch
 * norm and 13 channels its internal gradient is blocked and padded, as in
 * conv_bn_relu, and the route's output follows its gradient in the arena. */
#define FANOUT(x) NET(7, 5, 3) CONV0_13 x "[route]\nlayers=-1,-2\n"
EQ_CASE(fanout_conv3x3, "route", 3, 2, 0, 0,
        FANOUT("[convolutional]\nfilters=6\nsize=3\npad=1\nactivation=linear\n"))
EQ_CASE(fanout_conv1x1, "route", 2, 0, 0, 0,
        FANOUT("[convolutional]\nfilters=16\nsize=1\nactivation=logistic\n"))
EQ_CASE(fanout_conv_bn, "route", 3, 0, 0, 0,
        FANOUT("[convolutional]\nfilters=13\nsize=3\npad=1\nbatch_normalize=1\n"
               "activation=tanh\n"))
EQ_CASE(fanout_conv_bn_16ch, "route", 3, 0, 0, 0,
        FANOUT("[convolutional]\nfilters=16\nsize=3\npad=1\nbatch_normalize=1\n"
               "activation=tanh\n"))
EQ_CASE(fanout_maxpool, "route", 2, 0, 0, 0, FANOUT("[maxpool]\nsize=3\nstride=1\n"))
EQ_CASE(fanout_lrn, "route", 2, 0, 0, 0, FANOUT("[lrn]\nsize=3\nalpha=0.5\n"))
EQ_CASE(fanout_batchnorm, "route", 2, 0, 0, 0, FANOUT("[batchnorm]\n"))
EQ_CASE(fanout_shortcut, "shortcut", 2, 0, 0, 0,
        FANOUT("[shortcut]\nfrom=-1\nalpha=0.5\nbeta=2\n"))
/* ---- [crop] on the input, then a convolution ---- */

EQ_CASE(crop_then_conv, "crop", 3, 2, 0, 0,
        NET(9, 8, 3) "[crop]\ncrop_height=7\ncrop_width=5\nflip=1\n"
        "[convolutional]\nfilters=13\nsize=3\npad=1\nactivation=tanh\n")
EQ_CASE(crop_noadjust_then_conv, "crop", 2, 0, 0, 0,
        NET(8, 8, 3) "[crop]\ncrop_height=6\ncrop_width=6\nnoadjust=1\n"
        "[convolutional]\nfilters=5\nsize=3\nstride=2\npad=1\nactivation=leaky\n")

static int eq_print_summary(void **state)
{
    (void)state;
    print_message("largest metric (max|dnnl - ref| / max|ref|) per layer type and tensor "
                  "kind, tolerance %.0e:\n", EQ_TOL);
    for (int i = 0; i < g_n_worst; i++) {
        const eq_worst *w = &g_worst[i];
        for (int k = 0; k < K_COUNT; k++)
            if (w->m[k] >= 0.0)
                print_message("  %-14s %-16s %.2e  (%s)\n", w->type, kind_names[k], w->m[k],
                              w->where[k]);
    }
    return 0;
}

/* ---- nothing left to set up lazily ----
 *
 * oneDNN builds some code at its first call and does not check those
 * allocations (a failure is a segmentation fault): with AVX-512, the
 * "small-n" GEMM kernels of the inner product's forward (fewer than 16
 * outputs), under a once-flag of their own. Under ulimit -v, a run whose
 * readers held the memory at the first iteration crashed so (dnnl_sgemm,
 * pthread_once). The context's creation makes those products, so that,
 * once a context and its kernels exist, a forward allocates nothing: it is
 * run here with the address space limited to what the process has. In a
 * fresh process (one that ran an inner product before has them already);
 * not under the sanitizers, whose allocators need terabytes. On a CPU
 * without AVX-512 the inner product takes the common GEMM, which the
 * first product already set up: there this passes without the fix too. */
#define NO_LAZY_CHILD "--forward-after-set-up"

static int forward_after_set_up(void)
{
    const st_backend *be;
    st_error err = {0};
    st_bctx *ctx = NULL;
    st_kernel *k = NULL;
    const st_backend_opts bo = {.intra_threads = 1};
    int sizes[1] = {8};
    st_fc_desc d = {.base = {.kind = ST_K_FC, .name = "0.connected", .backward = 1,
                             .src_grad = 1, .n = 8, .batch_sizes = sizes,
                             .n_batch_sizes = 1, .dst_plain = 1},
                    .in = 768, .out = 2, .bias = 1, .act = ST_ACT_LINEAR};
    if (st_backend_find("dnnl", &be, &err) != ST_OK ||
        be->ctx_create(&bo, &ctx, &err) != ST_OK ||
        be->kernel_create(ctx, &d.base, &k, &err) != ST_OK) {
        fprintf(stderr, "set-up: %s\n", err.msg);
        return 2;
    }
    float *src = calloc(8 * 768, sizeof *src), *dst = calloc(8 * 2, sizeof *dst);
    float *w = calloc(2 * 768, sizeof *w), *b = calloc(2, sizeof *b);
    void *ws = calloc(k->workspace_bytes + 64, 1), *scratch = calloc(k->scratch_bytes + 64, 1);
    if (!src || !dst || !w || !b || !ws || !scratch)
        return 3;
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    size_t vm = 0;
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, "VmSize:", 7) == 0)
            vm = (size_t)strtoull(line + 7, NULL, 10) * 1024;
    if (f)
        fclose(f);
    struct rlimit r = {vm + ((size_t)1 << 20), RLIM_INFINITY};
    if (setrlimit(RLIMIT_AS, &r) != 0)
        return 4;
    st_kargs a = {.n = 8, .src = src, .dst = dst, .weights = w, .bias = b, .training = 1,
                  .workspace = ws, .scratch = scratch};
    if (k->ops->forward(k, &a, &err) != ST_OK) {
        fprintf(stderr, "forward: %s\n", err.msg);
        return 1;
    }
    return 0;
}

static void forward_allocates_nothing(void **state)
{
    (void)state;
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    print_message("SKIP a forward under an address-space limit: not under a sanitizer\n");
#else
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        execl("/proc/self/exe", "test_dnnl_equiv", NO_LAZY_CHILD, (char *)NULL);
        _exit(8);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        fail_msg("an inner product's forward, once set up, under an address-space limit of "
                 "what the process had: %s %d", WIFEXITED(status) ? "exit" : "signal",
                 WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
#endif
}

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], NO_LAZY_CHILD) == 0)
        return forward_after_set_up();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(forward_allocates_nothing),
        cmocka_unit_test(conv_odd_3to13_pad1),
        cmocka_unit_test(conv_13to3_stride2_padding2),
        cmocka_unit_test(conv_stride2_nopad_uncovered),
        cmocka_unit_test(conv_groups2),
        cmocka_unit_test(conv_depthwise_stride2),
        cmocka_unit_test(conv_1x1),
        cmocka_unit_test(conv_1x1_stride2),
        cmocka_unit_test(conv_5x5_pad1),
        cmocka_unit_test(conv_5x5_stride3_pad),
        cmocka_unit_test(conv_batch1),
        cmocka_unit_test(conv_long_reductions),
        cmocka_unit_test(conv_act_linear),
        cmocka_unit_test(conv_act_relu),
        cmocka_unit_test(conv_act_leaky),
        cmocka_unit_test(conv_act_logistic),
        cmocka_unit_test(conv_act_tanh),
        cmocka_unit_test(conv_bn_relu),
        cmocka_unit_test(conv_bn_linear),
        cmocka_unit_test(conv_bn_relu_16ch),
        cmocka_unit_test(conv_bn_batch1),
        cmocka_unit_test(mixed_blocked_then_nhwc),
        cmocka_unit_test(mixed_nhwc_then_blocked),
        cmocka_unit_test(mixed_blocked_then_nchw),
        cmocka_unit_test(mixed_nchw_then_nhwc),
        cmocka_unit_test(conv_on_blocked_stride2),
        cmocka_unit_test(conv_on_blocked_groups2),
        cmocka_unit_test(conv_on_blocked_depthwise),
        cmocka_unit_test(conv_on_blocked_1x1_stride2),
        cmocka_unit_test(conv_on_blocked_bn),
        cmocka_unit_test(conv_bn_then_conv),
        cmocka_unit_test(conv_three_deep),
        cmocka_unit_test(connected_act_linear),
        cmocka_unit_test(connected_act_relu),
        cmocka_unit_test(connected_act_leaky),
        cmocka_unit_test(connected_act_logistic),
        cmocka_unit_test(connected_act_tanh),
        cmocka_unit_test(connected_batch1),
        cmocka_unit_test(connected_bn_tanh),
        cmocka_unit_test(connected_bn_relu),
        cmocka_unit_test(conv_then_connected),
        cmocka_unit_test(conv_then_connected_bn),
        cmocka_unit_test(connected_then_connected),
        cmocka_unit_test(maxpool_2s2_default),
        cmocka_unit_test(maxpool_3s2_default),
        cmocka_unit_test(maxpool_3s2_pad0),
        cmocka_unit_test(maxpool_2s1),
        cmocka_unit_test(maxpool_3s2_pad3),
        cmocka_unit_test(conv_then_maxpool_2s2),
        cmocka_unit_test(conv_then_maxpool_3s2_pad0),
        cmocka_unit_test(conv_then_maxpool_3s1),
        cmocka_unit_test(avgpool_input),
        cmocka_unit_test(conv_then_avgpool),
        cmocka_unit_test(conv_avgpool_connected),
        cmocka_unit_test(batchnorm_input),
        cmocka_unit_test(batchnorm_input_no_input_grad),
        cmocka_unit_test(conv_then_batchnorm),
        cmocka_unit_test(conv_batchnorm_conv),
        cmocka_unit_test(lrn_input_size3),
        cmocka_unit_test(conv_then_lrn_size3),
        cmocka_unit_test(conv_then_lrn_size5),
        cmocka_unit_test(connected_then_dropout),
        cmocka_unit_test(dropout_input_then_conv),
        cmocka_unit_test(connected_dropout_connected),
        cmocka_unit_test(conv_dropout_connected),
        cmocka_unit_test(conv_then_dropout_last),
        cmocka_unit_test(softmax_plain),
        cmocka_unit_test(softmax_groups2_temperature2),
        cmocka_unit_test(conv_connected_softmax),
        cmocka_unit_test(connected_cost),
        cmocka_unit_test(conv_cost),
        cmocka_unit_test(softmax_cost),
        cmocka_unit_test(shortcut_same_shape),
        cmocka_unit_test(shortcut_from_larger),
        cmocka_unit_test(shortcut_then_conv),
        cmocka_unit_test(route_two_convs),
        cmocka_unit_test(route_order_0_1),
        cmocka_unit_test(fanout_conv3x3),
        cmocka_unit_test(fanout_conv1x1),
        cmocka_unit_test(fanout_conv_bn),
        cmocka_unit_test(fanout_conv_bn_16ch),
        cmocka_unit_test(fanout_maxpool),
        cmocka_unit_test(fanout_lrn),
        cmocka_unit_test(fanout_batchnorm),
        cmocka_unit_test(fanout_shortcut),
        cmocka_unit_test(crop_then_conv),
        cmocka_unit_test(crop_noadjust_then_conv),
    };
    return cmocka_run_group_tests(tests, NULL, eq_print_summary);
}
