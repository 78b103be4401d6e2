/* Numerical gradient checks of every layer type and every activation on the
 * reference backend, plus hand-computed forward values.
 *
 * Each gradient case builds a small network from cfg text (odd shapes,
 * batch 2 or 3), a training replica that also returns the gradient at the
 * network input, and the scalar objective
 *
 *     L(theta, x) = loss + sum_i r_i * y_i
 *
 * where loss is what st_replica_forward reports (the loss layers' sum, 0 if
 * the net has none), y the LAST layer's output and r a fixed random
 * projection that st_replica_backward adds to that layer's output gradient
 * (diff_out). The analytic gradients (every ST_PARAM_WEIGHT and ST_PARAM_BIAS
 * value of the gradient arena, and the input gradient) are compared with
 * central differences (L(v + eps) - L(v - eps)) / (2 eps), every value for
 * tensors up to GC_MAX_CHECK values, a deterministic spread-out sample
 * beyond. Every evaluation uses the same shard and st_step_info (training,
 * seed, iteration), so dropout masks are identical throughout.
 *
 * Kinks: a finite difference that straddles a kink (relu / leaky at 0, a
 * maxpool window whose two largest values swap) is a test-design bug, so
 * before checking, the inputs are chosen (deterministically: the first of a
 * series of input seeds that qualifies) such that
 *   - every maxpool window's largest value leads the second largest by at
 *     least GC_POOL_GAP_INPUT / GC_POOL_GAP_LAYER, and
 *   - for nets with a relu / leaky layer (at most one per net), a "linear
 *     twin" (the same cfg with that activation replaced by linear, hence the
 *     same weights and the same pre-activations) has no pre-activation
 *     within GC_KINK_MARGIN of 0.
 * Both margins are far larger than what one eps step can move a value by
 * (eps * |d value / d theta|, with |d value / d theta| of order 1 here).
 * When a comparison fails anyway, the message also gives the central
 * difference at eps/2: if the two differ, the interval crossed a kink.
 *
 * Regression checks for two bugs this file found (both fixed):
 *   - test_bn_running_stat_slots: the batch statistics must reach the
 *     gradient arena's rolling_mean / rolling_variance slots (written by
 *     st_bn_backward), or the solver averages the running statistics to 0;
 *   - softmax_groups2_loss_gradient: with groups > 1 the loss -log p[label]
 *     has zero gradient on the groups without the label.
 * Documented Darknet semantics that are not the gradient of L, and so are
 * pinned differently: [softmax] passes a later layer's gradient through
 * unchanged (its cases use L = loss only). */
#include <math.h>
#include <stdlib.h>

#include "testlib.h"

#include "base/memory.h"

#include "backends/backend.h"
#include "ops/params.h"
#include "base/rng.h"

/* eps = 3e-3 (absolute; inputs are O(1), weights O(0.1..1)). The forward
 * pass is float32: L, O(1..20), carries a rounding error of ~1e-7 relative
 * in the outputs the perturbed value influences (the others are recomputed
 * bit-identically and cancel), so the difference quotient has rounding
 * noise ~1e-7 * |L| / eps, while its truncation error is ~eps^2 / 6 times
 * the third derivative. Measured on these cases (worst |a - n| as a
 * fraction of the bound below):
 *   eps 3e-4: 0.99 (rounding noise: conv + batch norm, |L| = 20)
 *   eps 1e-3: 0.34 (rounding noise)
 *   eps 3e-3: 0.20 (worst relative error 2.1e-3 on gradients >= 0.1, worst
 *             absolute error 6e-4)
 *   eps 1e-2: fails: truncation error through batch norm over 3 samples
 *             (connected_bn_tanh), and kink margins of 10 eps no longer fit.
 * Build with -DGC_EPS=... to repeat the measurement; each case prints its
 * worst errors.
 *
 * Tolerance: |a - n| <= GC_ATOL + GC_RTOL * max(|a|, |n|), GC_RTOL = 1e-2
 * (5x the worst relative error measured), GC_ATOL = 2e-3 (3x the worst
 * absolute error, which occurs on small gradients of batch-normalized
 * layers). Tighter than 2e-2 * max(1, |a|, |n|) on small gradients, which
 * would accept 0 for any true gradient below 0.02. The bugs this exists to
 * catch (a wrong index, a missing term, a wrong scale, an overwrite instead
 * of an accumulate) give errors of tens of percent or more. */
#ifndef GC_EPS
#define GC_EPS 3e-3f
#endif
#define GC_RTOL 1e-2
#define GC_ATOL 2e-3
/* A tensor must have at least one checked numeric gradient this large, so
 * that a zero analytic gradient could not pass for it (10 x ATOL). */
#define GC_NONZERO 2e-2
#define GC_MAX_CHECK 200
#define GC_KINK_MARGIN (10 * GC_EPS)
#define GC_POOL_GAP_INPUT (2 * GC_EPS)
#define GC_POOL_GAP_LAYER (5 * GC_EPS)
#define GC_SEED_TRIES 2000
#define GC_MAX_PRINT 12

#define NET(h, w, c) "[net]\nbatch=2\nheight=" #h "\nwidth=" #w "\nchannels=" #c "\n"

enum {
    GC_NO_DIFF_OUT = 1, /* L = loss only (softmax ends the net, see its case) */
};

typedef struct gc_case {
    const char *name;
    int n;            /* samples */
    int flags;
    int kink_layer;   /* the one relu / leaky layer, or -1 */
    float grad_scale; /* expected analytic = grad_scale * numeric; 0 means 1 */
    const char *cfg;
} gc_case;

/* One network with its replica, weights, gradients and data. */
typedef struct gc_net {
    st_cfg cfg;
    st_hparams hp;
    st_net net;
    st_replica rep;
    int built, have_rep;
    float *w, *g;         /* [params.count] */
    float *x, *r;         /* [n * input], [n * last output] */
    int *labels;
    int n;
    size_t in_n, out_n;
    st_shard shard;
    st_step_info info;
} gc_net;

static void gc_close(gc_net *t)
{
    if (t->have_rep)
        st_replica_free(&t->rep);
    if (t->built) {
        st_net_free(&t->net);
        st_cfg_free(&t->cfg);
    }
    st_free_aligned(t->w);
    st_free_aligned(t->g);
    free(t->x);
    free(t->r);
    free(t->labels);
    memset(t, 0, sizeof *t);
}

static float gc_uniform(st_rng *rng, float lo, float hi)
{
    return lo + (hi - lo) * st_rng_uniform(rng);
}

/* Build the net and replica, initialize the weights (st_params_init, then
 * every ST_PARAM_BIAS value jittered by U(-0.3, 0.3) so biases are not 0 and
 * batch-norm scales not 1), random labels and projection r. Fails the test
 * on any error. */
static void gc_open(gc_net *t, const char *name, const char *text, int n)
{
    memset(t, 0, sizeof *t);
    st_error err = {0};
    st_status st = tl_build(name, text, &t->cfg, &t->hp, &t->net, &err);
    if (st != ST_OK)
        fail_msg("%s: building the net failed: %s", name, err.msg);
    t->built = 1;
    const st_backend *be;
    if ((st = st_backend_find("ref", &be, &err)) != ST_OK)
        fail_msg("%s: %s", name, err.msg);
    st_replica_opts o = {.n = n, .training = 1, .input_delta = 1,
                         .backend = {.intra_threads = 1, .worker = 0}};
    if ((st = st_replica_init(&t->rep, &t->net, be, &o, &err)) != ST_OK)
        fail_msg("%s: st_replica_init failed: %s", name, err.msg);
    t->have_rep = 1;
    t->n = n;
    const st_param_table *pt = &t->net.params;
    size_t pc = pt->count ? pt->count : 1;
    t->w = st_alloc_aligned(pc * sizeof(float), "weights", &err);
    t->g = st_alloc_aligned(pc * sizeof(float), "grads", &err);
    assert_non_null(t->w);
    assert_non_null(t->g);
    st_params_init(pt, t->w, 42);
    st_rng rng;
    st_rng_seed(&rng, 7, 1);
    for (int i = 0; i < pt->n; i++)
        if (pt->p[i].kind == ST_PARAM_BIAS)
            for (size_t j = 0; j < pt->p[i].count; j++)
                t->w[pt->p[i].offset + j] += gc_uniform(&rng, -0.3f, 0.3f);
    t->in_n = (size_t)n * st_shape_count(t->net.input);
    t->out_n = (size_t)n * st_shape_count(t->net.layers[t->net.n_layers - 1]->out);
    t->x = calloc(t->in_n, sizeof *t->x);
    t->r = calloc(t->out_n, sizeof *t->r);
    t->labels = calloc((size_t)n, sizeof *t->labels);
    assert_non_null(t->x);
    assert_non_null(t->r);
    assert_non_null(t->labels);
    st_rng_seed(&rng, 7, 2);
    for (size_t i = 0; i < t->out_n; i++)
        t->r[i] = gc_uniform(&rng, -1.0f, 1.0f);
    for (int i = 0; i < n; i++)
        t->labels[i] = (int)st_rng_below(&rng, (uint64_t)t->net.classes);
    t->shard = (st_shard){.n = n, .x = t->x, .labels = t->labels, .sample0 = 5};
    t->info = (st_step_info){1, 1234, 7};
}

/* Inputs: distinct magnitudes in [0.05, 1.5] spaced 1.45/count apart, random
 * signs, shuffled: no value within 0.05 of 0 and no two values equal. */
static void gc_fill_inputs(gc_net *t, uint64_t seed)
{
    st_rng rng;
    st_rng_seed(&rng, seed, 3);
    size_t count = t->in_n;
    for (size_t k = 0; k < count; k++) {
        float m = 0.05f + 1.45f * ((float)k + 0.5f) / (float)count;
        t->x[k] = st_rng_uniform(&rng) < 0.5f ? -m : m;
    }
    for (size_t k = count; k > 1; k--) {
        size_t j = (size_t)st_rng_below(&rng, k);
        float tmp = t->x[k - 1];
        t->x[k - 1] = t->x[j];
        t->x[j] = tmp;
    }
}

static void gc_forward(gc_net *t, const char *name, double *loss)
{
    st_error err = {0};
    if (st_replica_forward(&t->rep, t->w, &t->shard, &t->info, loss, &err) != ST_OK)
        fail_msg("%s: forward failed: %s", name, err.msg);
}

/* The objective L, accumulated in double. */
static double gc_objective(gc_net *t, const char *name, int use_r)
{
    double loss = 0.0;
    gc_forward(t, name, &loss);
    double L = loss;
    if (use_r) {
        const float *y = st_replica_output(&t->rep, t->net.n_layers - 1);
        for (size_t i = 0; i < t->out_n; i++)
            L += (double)t->r[i] * (double)y[i];
    }
    return L;
}

/* The cfg option of a section, with a default, for reading maxpool's
 * geometry back (the layer struct is private to its file). */
static int gc_cfg_int(gc_net *t, int layer, const char *key, int def)
{
    int v = def;
    st_error err = {0};
    st_cfg_int(&t->cfg, &t->cfg.secs[layer + 1], key, def, -1000000, 1000000, &v, &err);
    return v;
}

static const float *gc_layer_input(gc_net *t, int layer)
{
    int s = t->net.layers[layer]->src[0];
    return s < 0 ? t->x : st_replica_output(&t->rep, s);
}

/* Whether every maxpool window's largest value leads its second largest by
 * enough that no eps step swaps them (Darknet geometry, positions outside
 * the input skipped), after forward. A window on the network input moves by
 * one value and eps at a time; on a layer's output, every value of the
 * window may move by eps * |d value / d theta| (<= ~2 here). */
static int gc_pool_gaps_ok(gc_net *t)
{
    for (int li = 0; li < t->net.n_layers; li++) {
        const st_layer *l = t->net.layers[li];
        if (l->ops != &st_maxpool_ops)
            continue;
        int stride = gc_cfg_int(t, li, "stride", 1);
        int size = gc_cfg_int(t, li, "size", stride);
        int pad = gc_cfg_int(t, li, "padding", size - 1) / 2;
        float need = l->src[0] < 0 ? GC_POOL_GAP_INPUT : GC_POOL_GAP_LAYER;
        const float *in = gc_layer_input(t, li);
        for (int pl = 0; pl < t->n * l->in.c; pl++) {
            const float *x = in + (size_t)pl * l->in.h * l->in.w;
            for (int oy = 0; oy < l->out.h; oy++)
                for (int ox = 0; ox < l->out.w; ox++) {
                    float best = -INFINITY, second = -INFINITY;
                    for (int ky = 0; ky < size; ky++)
                        for (int kx = 0; kx < size; kx++) {
                            int iy = oy * stride - pad + ky, ix = ox * stride - pad + kx;
                            if (iy < 0 || iy >= l->in.h || ix < 0 || ix >= l->in.w)
                                continue;
                            float v = x[iy * l->in.w + ix];
                            if (v > best) {
                                second = best;
                                best = v;
                            } else if (v > second) {
                                second = v;
                            }
                        }
                    if (second > -INFINITY && best - second < need)
                        return 0;
                }
        }
    }
    return 1;
}

/* cfg text with its one "activation=relu" / "activation=leaky" made linear. */
static char *gc_linear_twin(const char *name, const char *cfg)
{
    const char *hit = NULL, *keys[] = {"activation=relu", "activation=leaky"};
    size_t klen = 0;
    int found = 0;
    for (int k = 0; k < 2; k++)
        for (const char *p = strstr(cfg, keys[k]); p; p = strstr(p + 1, keys[k])) {
            hit = p;
            klen = strlen(keys[k]);
            found++;
        }
    if (found != 1)
        fail_msg("%s: test design: a kink case needs exactly one relu/leaky activation, "
                 "found %d", name, found);
    size_t len = strlen(cfg), at = (size_t)(hit - cfg);
    char *twin = malloc(len + 32);
    assert_non_null(twin);
    memcpy(twin, cfg, at);
    strcpy(twin + at, "activation=linear");
    strcat(twin, hit + klen);
    return twin;
}

/* Choose the first input seed that keeps every finite difference away from
 * the kinks (see the header comment). */
static uint64_t gc_choose_inputs(gc_net *t, const gc_case *c)
{
    gc_net twin;
    int have_twin = c->kink_layer >= 0;
    char *twin_cfg = NULL;
    if (have_twin) {
        twin_cfg = gc_linear_twin(c->name, c->cfg);
        gc_open(&twin, c->name, twin_cfg, c->n);
        assert_int_equal(twin.net.params.count, t->net.params.count);
        assert_memory_equal(twin.w, t->w, t->net.params.count * sizeof(float));
        if (c->kink_layer >= twin.net.n_layers)
            fail_msg("%s: test design: kink layer %d, the network has %d layers", c->name,
                     c->kink_layer, twin.net.n_layers);
    }
    for (uint64_t seed = 1; seed <= GC_SEED_TRIES; seed++) {
        gc_fill_inputs(t, seed);
        gc_forward(t, c->name, NULL);
        if (!gc_pool_gaps_ok(t))
            continue;
        if (have_twin) {
            memcpy(twin.x, t->x, t->in_n * sizeof(float));
            gc_forward(&twin, c->name, NULL);
            const float *z = st_replica_output(&twin.rep, c->kink_layer);
            size_t count = (size_t)c->n * st_shape_count(twin.net.layers[c->kink_layer]->out);
            float min_abs = INFINITY;
            for (size_t i = 0; i < count; i++)
                min_abs = fminf(min_abs, fabsf(z[i]));
            if (min_abs < GC_KINK_MARGIN)
                continue;
            gc_close(&twin);
            free(twin_cfg);
        }
        return seed;
    }
    fail_msg("%s: test design: no input seed in 1..%d keeps the finite differences away "
             "from relu/leaky kinks and maxpool ties", c->name, GC_SEED_TRIES);
    return 0;
}

typedef struct gc_stats {
    long checked, failed;
    double worst_ratio; /* max |a - n| / bound */
    double worst_abs;   /* max |a - n| */
    double worst_rel;   /* max |a - n| / max(|a|, |n|) where that is >= 0.1 */
} gc_stats;

/* Central difference of L in v[i] with step h. */
static double gc_numeric(gc_net *t, const gc_case *c, float *v, size_t i, float h)
{
    int use_r = !(c->flags & GC_NO_DIFF_OUT);
    float orig = v[i];
    float up = orig + h, down = orig - h;
    v[i] = up;
    double lp = gc_objective(t, c->name, use_r);
    v[i] = down;
    double lm = gc_objective(t, c->name, use_r);
    v[i] = orig;
    return (lp - lm) / ((double)up - (double)down); /* the step actually taken */
}

/* Check analytic[i] against the numeric gradient for a sample of v. */
static void gc_check_tensor(gc_net *t, const gc_case *c, const char *what, float *v,
                            const float *analytic, size_t count, gc_stats *s)
{
    double scale = c->grad_scale != 0.0f ? c->grad_scale : 1.0;
    size_t checks = count < GC_MAX_CHECK ? count : GC_MAX_CHECK;
    double max_num = 0.0;
    for (size_t k = 0; k < checks; k++) {
        /* spread over the tensor; the offset varies so strides do not alias */
        size_t i = checks == count ? k : k * count / checks + (k * 7u) % (count / checks);
        double a = analytic[i];
        double num = scale * gc_numeric(t, c, v, i, GC_EPS);
        double diff = fabs(a - num);
        double bound = GC_ATOL + GC_RTOL * fmax(fabs(a), fabs(num));
        s->checked++;
        max_num = fmax(max_num, fabs(num));
        if (!(diff <= bound)) { /* also catches NaN */
            s->failed++;
            if (s->failed <= GC_MAX_PRINT) {
                double half = scale * gc_numeric(t, c, v, i, 0.5f * GC_EPS);
                int kink = fabs(half - num) > 0.5 * bound;
                print_error("%s: %s[%zu]: analytic %.7g, numeric %.7g (|diff| %.3g > %.3g); "
                            "numeric at eps/2 %.7g%s\n", c->name, what, i, a, num, diff, bound,
                            half, kink ? " -- the difference crossed a kink: fix the inputs"
                                       : "");
            }
            continue;
        }
        s->worst_ratio = fmax(s->worst_ratio, diff / bound);
        s->worst_abs = fmax(s->worst_abs, diff);
        if (fmax(fabs(a), fabs(num)) >= 0.1)
            s->worst_rel = fmax(s->worst_rel, diff / fmax(fabs(a), fabs(num)));
    }
    if (!(max_num >= GC_NONZERO)) {
        s->failed++;
        print_error("%s: %s: every checked numeric gradient is below %g (largest %.3g): the "
                    "check could not tell a zero gradient from a correct one\n", c->name, what,
                    GC_NONZERO, max_num);
    }
}

static void gc_run(const gc_case *c)
{
    gc_net t;
    gc_open(&t, c->name, c->cfg, c->n);
    uint64_t seed = gc_choose_inputs(&t, c);
    int use_r = !(c->flags & GC_NO_DIFF_OUT);
    const st_param_table *pt = &t.net.params;

    /* Analytic: forward, then backward into a gradient arena whose parameter
     * ranges hold NaN, so a gradient that backward never writes fails. */
    double L0 = gc_objective(&t, c->name, use_r);
    memset(t.g, 0, pt->count * sizeof(float));
    for (int i = 0; i < pt->n; i++)
        for (size_t j = 0; j < pt->p[i].count; j++)
            t.g[pt->p[i].offset + j] = NAN;
    st_error err = {0};
    if (st_replica_backward(&t.rep, t.w, t.g, &t.shard, &t.info, use_r ? t.r : NULL, &err) !=
        ST_OK)
        fail_msg("%s: backward failed: %s", c->name, err.msg);
    float *g = malloc((pt->count ? pt->count : 1) * sizeof *g);
    float *dx = malloc(t.in_n * sizeof *dx);
    assert_non_null(g);
    assert_non_null(dx);
    memcpy(g, t.g, pt->count * sizeof *g);
    memcpy(dx, st_replica_input_delta(&t.rep), t.in_n * sizeof *dx);

    gc_stats s = {0};
    for (int i = 0; i < pt->n; i++) {
        const st_param *p = &pt->p[i];
        if (p->kind == ST_PARAM_STAT)
            continue; /* batch statistics, not gradients */
        char what[128];
        snprintf(what, sizeof what, "layer %d [%s] %s", p->layer,
                 t.net.layers[p->layer]->ops->type, p->name);
        gc_check_tensor(&t, c, what, t.w + p->offset, g + p->offset, p->count, &s);
    }
    gc_check_tensor(&t, c, "network input", t.x, dx, t.in_n, &s);

    /* The evaluations must not have changed L (weights and inputs restored). */
    double L1 = gc_objective(&t, c->name, use_r);
    free(g);
    free(dx);
    gc_close(&t);
    print_message("%-38s L %9.4f  %4ld values  worst |a-n| %.1e  rel %.1e  (%.2f of bound)"
                  "  input seed %llu\n", c->name, L0, s.checked, s.worst_abs, s.worst_rel,
                  s.worst_ratio, (unsigned long long)seed);
    if (L1 != L0)
        fail_msg("%s: L changed from %.9g to %.9g between identical evaluations", c->name, L0,
                 L1);
    if (s.failed)
        fail_msg("%s: %ld of %ld gradient checks failed (see above)", c->name, s.failed,
                 s.checked);
}

#define GC_CASE(fn, n_, flags_, kink_, gscale_, cfg_)                                      \
    static void fn(void **state)                                                            \
    {                                                                                       \
        (void)state;                                                                        \
        static const gc_case c = {#fn, n_, flags_, kink_, gscale_, cfg_};                   \
        gc_run(&c);                                                                         \
    }

/* ---- [convolutional] ---- */

GC_CASE(conv_3x3_pad_linear, 2, 0, -1, 0,
        NET(5, 7, 3) "[convolutional]\nfilters=5\nsize=3\nstride=1\npad=1\nactivation=linear\n")
GC_CASE(conv_3x3_stride2_padding1_logistic, 2, 0, -1, 0,
        NET(7, 6, 3) "[convolutional]\nfilters=4\nsize=3\nstride=2\npadding=1\n"
                     "activation=logistic\n")
GC_CASE(conv_5x5_stride3_padding2_tanh, 2, 0, -1, 0,
        NET(4, 6, 2) "[convolutional]\nfilters=3\nsize=5\nstride=3\npadding=2\nactivation=tanh\n")
GC_CASE(conv_3x3_stride2_nopad_odd, 3, 0, -1, 0,
        NET(7, 5, 5) "[convolutional]\nfilters=3\nsize=3\nstride=2\nactivation=linear\n")
GC_CASE(conv_1x1_direct_tanh, 2, 0, -1, 0,
        NET(3, 5, 7) "[convolutional]\nfilters=6\nsize=1\nactivation=tanh\n")
GC_CASE(conv_1x1_stride2_linear, 2, 0, -1, 0,
        NET(5, 6, 5) "[convolutional]\nfilters=3\nsize=1\nstride=2\nactivation=linear\n")
GC_CASE(conv_groups3_tanh, 2, 0, -1, 0,
        NET(5, 4, 6) "[convolutional]\nfilters=9\nsize=3\npad=1\ngroups=3\nactivation=tanh\n")
GC_CASE(conv_depthwise_stride2_logistic, 2, 0, -1, 0,
        NET(6, 5, 4) "[convolutional]\nfilters=4\nsize=3\nstride=2\npad=1\ngroups=4\n"
                     "activation=logistic\n")
GC_CASE(conv_bn_linear, 2, 0, -1, 0,
        NET(5, 6, 3) "[convolutional]\nfilters=5\nsize=3\npad=1\nbatch_normalize=1\n"
                     "activation=linear\n")
GC_CASE(conv_bn_groups2_stride2_tanh, 3, 0, -1, 0,
        NET(4, 5, 6) "[convolutional]\nfilters=6\nsize=3\nstride=2\npadding=1\ngroups=2\n"
                     "batch_normalize=1\nactivation=tanh\n")
GC_CASE(conv_bn_relu, 2, 0, 0, 0,
        NET(4, 5, 3) "[convolutional]\nfilters=4\nsize=3\npad=1\nbatch_normalize=1\n"
                     "activation=relu\n")
GC_CASE(conv_bn_1x1_logistic, 3, 0, -1, 0,
        NET(3, 4, 5) "[convolutional]\nfilters=3\nsize=1\nbatch_normalize=1\n"
                     "activation=logistic\n")

/* Every activation through [convolutional]. */
#define CONV_ACT(a)                                                                           \
    NET(4, 5, 3) "[convolutional]\nfilters=3\nsize=3\npad=1\nactivation=" a "\n"
GC_CASE(conv_act_linear, 2, 0, -1, 0, CONV_ACT("linear"))
GC_CASE(conv_act_relu, 2, 0, 0, 0, CONV_ACT("relu"))
GC_CASE(conv_act_leaky, 2, 0, 0, 0, CONV_ACT("leaky"))
GC_CASE(conv_act_logistic, 2, 0, -1, 0, CONV_ACT("logistic"))
GC_CASE(conv_act_tanh, 2, 0, -1, 0, CONV_ACT("tanh"))

/* ---- [connected] ---- */

GC_CASE(connected_logistic, 2, 0, -1, 0,
        NET(3, 5, 2) "[connected]\noutput=7\nactivation=logistic\n")
GC_CASE(connected_bn_tanh, 3, 0, -1, 0,
        NET(2, 3, 3) "[connected]\noutput=5\nbatch_normalize=1\nactivation=tanh\n")
GC_CASE(connected_bn_leaky, 3, 0, 0, 0,
        NET(3, 1, 3) "[connected]\noutput=5\nbatch_normalize=1\nactivation=leaky\n")
GC_CASE(conv_then_connected, 2, 0, -1, 0,
        NET(4, 3, 2) "[convolutional]\nfilters=3\nsize=3\nstride=2\npad=1\nactivation=tanh\n"
                     "[connected]\noutput=4\nactivation=linear\n")

/* Every activation through [connected]. */
#define FC_ACT(a) NET(2, 3, 3) "[connected]\noutput=6\nactivation=" a "\n"
GC_CASE(connected_act_linear, 2, 0, -1, 0, FC_ACT("linear"))
GC_CASE(connected_act_relu, 2, 0, 0, 0, FC_ACT("relu"))
GC_CASE(connected_act_leaky, 2, 0, 0, 0, FC_ACT("leaky"))
GC_CASE(connected_act_logistic, 2, 0, -1, 0, FC_ACT("logistic"))
GC_CASE(connected_act_tanh, 2, 0, -1, 0, FC_ACT("tanh"))

/* ---- [maxpool] (Darknet: padding is the total, default size - 1, of which
 * padding/2 on the top/left; out = (in + padding - size) / stride + 1) ---- */

/* out 3 x 4; the last row and column of windows overhang the edge */
GC_CASE(maxpool_2x2_s2_default_pad, 2, 0, -1, 0, NET(5, 7, 3) "[maxpool]\nsize=2\nstride=2\n")
/* padding 2: one row/column on each side; out 3 x 4 */
GC_CASE(maxpool_3x3_s2_default_pad, 2, 0, -1, 0, NET(5, 7, 3) "[maxpool]\nsize=3\nstride=2\n")
/* stride defaults to 1, padding to 1 (bottom/right): out = in */
GC_CASE(maxpool_2x2_s1_default_pad, 2, 0, -1, 0, NET(4, 5, 3) "[maxpool]\nsize=2\n")
/* no padding: the last row of the 7 x 6 input is in no window */
GC_CASE(maxpool_3x3_s2_pad0, 2, 0, -1, 0,
        NET(7, 6, 2) "[maxpool]\nsize=3\nstride=2\npadding=0\n")
/* odd total padding 3: 1 top/left, 2 bottom/right; out 3 x 3 */
GC_CASE(maxpool_3x3_s2_pad3, 2, 0, -1, 0,
        NET(5, 5, 3) "[maxpool]\nsize=3\nstride=2\npadding=3\n")
GC_CASE(conv_then_maxpool, 2, 0, -1, 0,
        NET(6, 5, 3) "[convolutional]\nfilters=4\nsize=3\npad=1\nactivation=linear\n"
                     "[maxpool]\nsize=2\nstride=2\n")

/* ---- [avgpool] (global) ---- */

GC_CASE(avgpool_global, 2, 0, -1, 0, NET(5, 3, 7) "[avgpool]\n")
GC_CASE(conv_then_avgpool, 2, 0, -1, 0,
        NET(5, 4, 3) "[convolutional]\nfilters=5\nsize=3\npad=1\nactivation=tanh\n"
                     "[avgpool]\n")

/* ---- [dropout] (training: the mask is a function of seed, layer,
 * iteration and sample index, identical in every evaluation) ---- */

GC_CASE(dropout_between_layers, 2, 0, -1, 0,
        NET(4, 5, 3) "[convolutional]\nfilters=4\nsize=3\npad=1\nactivation=tanh\n"
                     "[dropout]\nprobability=0.5\n"
                     "[connected]\noutput=3\nactivation=linear\n")
GC_CASE(dropout_on_input, 3, 0, -1, 0, NET(3, 4, 5) "[dropout]\nprobability=0.3\n")

/* ---- [softmax] as the loss: cross-entropy with the labels. Its backward is
 * Darknet's combined softmax + cross-entropy step, p - onehot (the gradient
 * of the loss), plus a later layer's gradient passed through unchanged (not
 * through the softmax Jacobian), so these cases use L = loss, no diff_out.
 * ---- */

GC_CASE(softmax_cross_entropy, 3, GC_NO_DIFF_OUT, -1, 0,
        NET(2, 3, 2) "[connected]\noutput=6\nactivation=linear\n[softmax]\n")
/* groups=2 (two softmaxes of 3 values): the reported loss is -log p[label],
 * which does not depend on the group that does not hold the label, so its
 * gradient there must be 0 (Darknet's delta would give -p there). */
GC_CASE(softmax_groups2_loss_gradient, 2, GC_NO_DIFF_OUT, -1, 0,
        NET(1, 2, 3) "[softmax]\ngroups=2\n")
/* Temperature T: the forward is softmax(x / T) and the input gradient is the
 * exact (p - onehot) / T (Darknet drops the 1/T; we do not). */
GC_CASE(softmax_temperature2_gradient, 3, GC_NO_DIFF_OUT, -1, 0,
        NET(2, 3, 2) "[connected]\noutput=5\nactivation=linear\n[softmax]\ntemperature=2\n")

/* ---- [cost] sse: loss 0.5 * scale * sum (x - onehot)^2 ---- */

GC_CASE(cost_sse_scale07, 3, 0, -1, 0,
        NET(2, 3, 2) "[connected]\noutput=5\nactivation=logistic\n[cost]\ntype=sse\nscale=0.7\n")
GC_CASE(cost_sse_default_after_conv, 2, 0, -1, 0,
        NET(3, 3, 2) "[convolutional]\nfilters=2\nsize=3\nstride=2\npad=1\nactivation=tanh\n"
                     "[cost]\n")

/* ---- [batchnorm] ---- */

GC_CASE(batchnorm_on_input, 2, 0, -1, 0, NET(4, 5, 3) "[batchnorm]\n")
GC_CASE(batchnorm_after_conv, 3, 0, -1, 0,
        NET(3, 4, 5) "[convolutional]\nfilters=3\nsize=1\nactivation=tanh\n[batchnorm]\n")

/* ---- [lrn] (channels 7: windows clipped at both ends) ---- */

GC_CASE(lrn_size3, 2, 0, -1, 0,
        NET(3, 4, 7) "[lrn]\nsize=3\nalpha=0.5\nbeta=0.6\nk=1\n")
GC_CASE(lrn_size5, 2, 0, -1, 0,
        NET(3, 4, 7) "[lrn]\nsize=5\nalpha=1\nbeta=0.75\nk=2\n")

/* ---- [shortcut] ---- */

#define TWO_CONVS                                                                             \
    "[convolutional]\nfilters=4\nsize=3\npad=1\nactivation=tanh\n"                            \
    "[convolutional]\nfilters=4\nsize=3\npad=1\nactivation=linear\n"
GC_CASE(shortcut_same_shape_logistic, 2, 0, -1, 0,
        NET(5, 4, 3) TWO_CONVS "[shortcut]\nfrom=-2\nalpha=0.6\nbeta=1.7\nactivation=logistic\n")
GC_CASE(shortcut_same_shape_leaky, 2, 0, 2, 0,
        NET(5, 4, 3) TWO_CONVS "[shortcut]\nfrom=-2\nalpha=0.6\nbeta=1.7\nactivation=leaky\n")
/* ResNet's identity shortcut (alpha = beta = 1, ReLU): the fused backward */
GC_CASE(shortcut_identity_relu, 2, 0, 2, 0,
        NET(5, 4, 3) TWO_CONVS "[shortcut]\nfrom=-2\nactivation=relu\n")
/* from a 6 x 6 layer onto 3 x 3: Darknet's stride 2 */
GC_CASE(shortcut_from_larger_stride2, 2, 0, -1, 0,
        NET(6, 6, 2) "[convolutional]\nfilters=4\nsize=3\npad=1\nactivation=tanh\n"
                     "[convolutional]\nfilters=4\nsize=3\nstride=2\npad=1\nactivation=linear\n"
                     "[shortcut]\nfrom=0\nalpha=0.5\nbeta=-1.5\n")
/* from 7 x 7 onto 3 x 3: stride 7/3 = 2, the last row/column never read */
GC_CASE(shortcut_from_larger_odd, 2, 0, -1, 0,
        NET(7, 7, 2) "[convolutional]\nfilters=3\nsize=3\npad=1\nactivation=tanh\n"
                     "[convolutional]\nfilters=3\nsize=3\nstride=2\nactivation=linear\n"
                     "[shortcut]\nfrom=0\nalpha=1.4\nbeta=0.6\nactivation=tanh\n")
/* from 3 x 3 x 2 onto 6 x 6 x 4: sample 2, over the 2 common channels */
GC_CASE(shortcut_from_smaller_sample2, 2, 0, -1, 0,
        NET(6, 6, 2) "[convolutional]\nfilters=4\nsize=3\npad=1\nactivation=tanh\n"
                     "[convolutional]\nfilters=2\nsize=3\nstride=2\npad=1\nactivation=tanh\n"
                     "[route]\nlayers=0\n"
                     "[shortcut]\nfrom=1\nalpha=1.3\nbeta=0.8\n")
/* from 5 channels onto 3 */
GC_CASE(shortcut_more_channels, 2, 0, -1, 0,
        NET(4, 5, 2) "[convolutional]\nfilters=5\nsize=3\npad=1\nactivation=tanh\n"
                     "[convolutional]\nfilters=3\nsize=1\nactivation=linear\n"
                     "[shortcut]\nfrom=0\nalpha=-0.7\nbeta=2\n")
/* both inputs the same layer */
GC_CASE(shortcut_from_previous, 2, 0, -1, 0,
        NET(4, 3, 2) "[convolutional]\nfilters=3\nsize=3\npad=1\nactivation=tanh\n"
                     "[shortcut]\nfrom=-1\nalpha=0.4\nbeta=0.9\nactivation=tanh\n")
/* both inputs the same layer, ResNet's identity and ReLU otherwise: one
 * buffer for both gradients, which the fused backward leaves to the
 * general path */
GC_CASE(shortcut_identity_from_previous, 2, 0, 1, 0,
        NET(4, 3, 2) "[convolutional]\nfilters=3\nsize=3\npad=1\nactivation=tanh\n"
                     "[shortcut]\nfrom=-1\nactivation=relu\n")

/* ---- [route] ---- */

GC_CASE(route_two_inputs, 2, 0, -1, 0,
        NET(4, 5, 2) "[convolutional]\nfilters=2\nsize=3\npad=1\nactivation=tanh\n"
                     "[convolutional]\nfilters=3\nsize=3\npad=1\nactivation=tanh\n"
                     "[route]\nlayers=-1,-2\n"
                     "[convolutional]\nfilters=2\nsize=1\nactivation=linear\n")
/* layer 0 routed twice in one route, and also read by layer 1 */
GC_CASE(route_three_inputs_one_twice, 2, 0, -1, 0,
        NET(4, 5, 2) "[convolutional]\nfilters=2\nsize=3\npad=1\nactivation=tanh\n"
                     "[convolutional]\nfilters=3\nsize=1\nactivation=tanh\n"
                     "[route]\nlayers=0,1,0\n")
/* layer 0 read by a conv and two routes; layer 2 by a shortcut */
GC_CASE(route_layer_in_two_routes, 2, 0, -1, 0,
        NET(3, 5, 2) "[convolutional]\nfilters=2\nsize=3\npad=1\nactivation=tanh\n"
                     "[convolutional]\nfilters=3\nsize=3\npad=1\nactivation=tanh\n"
                     "[route]\nlayers=0\n"
                     "[route]\nlayers=1,0\n"
                     "[shortcut]\nfrom=2\nalpha=0.9\nbeta=1.1\n")

/* ---- fan-out: layer 0 is read by layer X and by the route that follows,
 * which runs backward first, so X's backward must ADD to layer 0's
 * gradient (the accumulate path of each kernel) ---- */

#define FANOUT(x)                                                                             \
    NET(4, 5, 3) "[convolutional]\nfilters=3\nsize=3\npad=1\nactivation=tanh\n" x            \
                 "[route]\nlayers=-1,-2\n"
GC_CASE(fanout_conv3x3, 2, 0, -1, 0,
        FANOUT("[convolutional]\nfilters=2\nsize=3\npad=1\nactivation=linear\n"))
GC_CASE(fanout_conv1x1_direct, 2, 0, -1, 0,
        FANOUT("[convolutional]\nfilters=2\nsize=1\nactivation=logistic\n"))
GC_CASE(fanout_conv_bn, 3, 0, -1, 0,
        FANOUT("[convolutional]\nfilters=2\nsize=3\npad=1\nbatch_normalize=1\n"
               "activation=tanh\n"))
GC_CASE(fanout_maxpool, 2, 0, -1, 0, FANOUT("[maxpool]\nsize=2\n"))
GC_CASE(fanout_lrn, 2, 0, -1, 0, FANOUT("[lrn]\nsize=3\nalpha=0.5\n"))
GC_CASE(fanout_batchnorm, 2, 0, -1, 0, FANOUT("[batchnorm]\n"))
GC_CASE(fanout_dropout, 2, 0, -1, 0, FANOUT("[dropout]\nprobability=0.5\n"))
GC_CASE(fanout_shortcut, 2, 0, -1, 0, FANOUT("[shortcut]\nfrom=-1\nalpha=0.5\nbeta=2\n"))
GC_CASE(fanout_shortcut_identity, 2, 0, 1, 0,
        FANOUT("[shortcut]\nfrom=-1\nbeta=2\nactivation=relu\n"))
GC_CASE(fanout_connected, 2, 0, -1, 0,
        NET(2, 2, 3) "[connected]\noutput=4\nactivation=tanh\n"
                     "[connected]\noutput=3\nactivation=linear\n"
                     "[route]\nlayers=-1,-2\n")
GC_CASE(fanout_avgpool, 2, 0, -1, 0,
        NET(2, 2, 3) "[connected]\noutput=4\nactivation=tanh\n"
                     "[avgpool]\n"
                     "[route]\nlayers=-1,-2\n")

/* ---- hand-computed forward values ---- */

static float *fw_param(gc_net *t, const char *name)
{
    for (int i = 0; i < t->net.params.n; i++)
        if (strcmp(t->net.params.p[i].name, name) == 0)
            return t->w + t->net.params.p[i].offset;
    fail_msg("no parameter %s", name);
    return NULL;
}

static void fw_expect(const char *what, const float *got, const float *want, size_t count,
                      float tol)
{
    for (size_t i = 0; i < count; i++)
        if (!(fabsf(got[i] - want[i]) <= tol))
            fail_msg("%s: value %zu is %.7g, expected %.7g", what, i, got[i], want[i]);
}

/* Open a net for n samples with the given input values. */
static void fw_run(gc_net *t, const char *name, const char *cfg, int n, const float *x)
{
    gc_open(t, name, cfg, n);
    memcpy(t->x, x, t->in_n * sizeof(float));
}

static void test_forward_maxpool_default_padding(void **state)
{
    (void)state;
    gc_net t;
    /* 3 x 3 through size 2 stride 2: padding defaults to 1, all of it at the
     * bottom/right; out = (3 + 1 - 2) / 2 + 1 = 2. Negative values, so a zero
     * from the padding would win if padded positions took part. */
    const float x[9] = {-1, -2, -3, -4, -5, -6, -7, -8, -9};
    fw_run(&t, "maxpool", NET(3, 3, 1) "[maxpool]\nsize=2\nstride=2\n", 1, x);
    assert_int_equal(t.net.layers[0]->out.h, 2);
    assert_int_equal(t.net.layers[0]->out.w, 2);
    gc_forward(&t, "maxpool", NULL);
    /* windows: rows 0-1 x cols 0-1: max(-1,-2,-4,-5) = -1; rows 0-1 x col 2:
     * max(-3,-6) = -3; row 2 x cols 0-1: max(-7,-8) = -7; row 2 x col 2: -9 */
    const float want[4] = {-1, -3, -7, -9};
    fw_expect("maxpool 2x2/2 on 3x3", st_replica_output(&t.rep, 0), want, 4, 0.0f);
    gc_close(&t);

    /* size 3 stride 2 on 4 x 4 (values 1..16 row-major): padding 2, one row /
     * column before; out = (4 + 2 - 3) / 2 + 1 = 2. Windows start at -1 and 1:
     * rows {0,1} x cols {0,1} -> 6; rows {0,1} x cols {1,2,3} -> 8;
     * rows {1,2,3} x cols {0,1} -> 14; rows {1,2,3} x cols {1,2,3} -> 16. */
    float y[16];
    for (int i = 0; i < 16; i++)
        y[i] = (float)(i + 1);
    fw_run(&t, "maxpool3", NET(4, 4, 1) "[maxpool]\nsize=3\nstride=2\n", 1, y);
    gc_forward(&t, "maxpool3", NULL);
    const float want3[4] = {6, 8, 14, 16};
    fw_expect("maxpool 3x3/2 on 4x4", st_replica_output(&t.rep, 0), want3, 4, 0.0f);
    gc_close(&t);
}

static void test_forward_conv_known_weights(void **state)
{
    (void)state;
    gc_net t;
    const float x[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    /* 2x2 kernel [[1, 2], [3, 4]], bias 0.5, on [[1,2,3],[4,5,6],[7,8,9]]:
     *   (0,0): 1*1 + 2*2 + 3*4 + 4*5 + 0.5 = 37.5
     *   (0,1): 1*2 + 2*3 + 3*5 + 4*6 + 0.5 = 47.5
     *   (1,0): 1*4 + 2*5 + 3*7 + 4*8 + 0.5 = 67.5
     *   (1,1): 1*5 + 2*6 + 3*8 + 4*9 + 0.5 = 77.5 */
    fw_run(&t, "conv", NET(3, 3, 1) "[convolutional]\nfilters=1\nsize=2\nactivation=linear\n", 1,
           x);
    float *w = fw_param(&t, "0.weights");
    w[0] = 1, w[1] = 2, w[2] = 3, w[3] = 4;
    *fw_param(&t, "0.biases") = 0.5f;
    gc_forward(&t, "conv", NULL);
    const float want[4] = {37.5f, 47.5f, 67.5f, 77.5f};
    fw_expect("conv 2x2", st_replica_output(&t.rep, 0), want, 4, 1e-5f);
    gc_close(&t);

    /* The same kernel with padding=1 stride=2: out = (3 + 2 - 2) / 2 + 1 = 2,
     * windows start at row/column -1 and 1:
     *   (0,0): only x[0][0] under w[1][1]: 4*1 + 0.5 = 4.5
     *   (0,1): row 0, cols 1-2 under w[1][*]: 3*2 + 4*3 + 0.5 = 18.5
     *   (1,0): rows 1-2, col 0 under w[*][1]: 2*4 + 4*7 + 0.5 = 36.5
     *   (1,1): rows 1-2, cols 1-2: 1*5 + 2*6 + 3*8 + 4*9 + 0.5 = 77.5 */
    fw_run(&t, "conv_pad",
           NET(3, 3, 1) "[convolutional]\nfilters=1\nsize=2\nstride=2\npadding=1\n"
                        "activation=linear\n", 1, x);
    w = fw_param(&t, "0.weights");
    w[0] = 1, w[1] = 2, w[2] = 3, w[3] = 4;
    *fw_param(&t, "0.biases") = 0.5f;
    gc_forward(&t, "conv_pad", NULL);
    const float want_pad[4] = {4.5f, 18.5f, 36.5f, 77.5f};
    fw_expect("conv 2x2 padding 1 stride 2", st_replica_output(&t.rep, 0), want_pad, 4, 1e-5f);
    gc_close(&t);
}

static void test_forward_activations(void **state)
{
    (void)state;
    /* A 1x1 convolution with weight 1 and bias 0 is the activation alone, on
     * x = [-2, -0.5, 0, ln 3]: logistic(ln 3) = 1 / (1 + 1/3) = 0.75 and
     * tanh(ln 3) = (3 - 1/3) / (3 + 1/3) = 0.8; 1 / (1 + e^2) = 0.11920292,
     * 1 / (1 + e^0.5) = 0.37754067, tanh(2) = 0.96402758,
     * tanh(0.5) = 0.46211716. */
    const float ln3 = 1.0986123f;
    const float x[4] = {-2.0f, -0.5f, 0.0f, ln3};
    static const struct {
        const char *cfg;
        float want[4];
    } acts[] = {
        {NET(2, 2, 1) "[convolutional]\nfilters=1\nsize=1\nactivation=linear\n",
         {-2.0f, -0.5f, 0.0f, 1.0986123f}},
        {NET(2, 2, 1) "[convolutional]\nfilters=1\nsize=1\nactivation=relu\n",
         {0.0f, 0.0f, 0.0f, 1.0986123f}},
        {NET(2, 2, 1) "[convolutional]\nfilters=1\nsize=1\nactivation=leaky\n",
         {-0.2f, -0.05f, 0.0f, 1.0986123f}},
        {NET(2, 2, 1) "[convolutional]\nfilters=1\nsize=1\nactivation=logistic\n",
         {0.11920292f, 0.37754067f, 0.5f, 0.75f}},
        {NET(2, 2, 1) "[convolutional]\nfilters=1\nsize=1\nactivation=tanh\n",
         {-0.96402758f, -0.46211716f, 0.0f, 0.8f}},
    };
    for (size_t a = 0; a < sizeof acts / sizeof acts[0]; a++) {
        gc_net t;
        fw_run(&t, "act", acts[a].cfg, 1, x);
        *fw_param(&t, "0.weights") = 1.0f;
        *fw_param(&t, "0.biases") = 0.0f;
        gc_forward(&t, "act", NULL);
        fw_expect(acts[a].cfg + strlen(NET(2, 2, 1)), st_replica_output(&t.rep, 0),
                  acts[a].want, 4, 1e-6f);
        gc_close(&t);
    }
}

static void test_forward_lrn(void **state)
{
    (void)state;
    gc_net t;
    /* 3 channels of one pixel, x = [1, 2, 3], size 3, alpha 3, beta 0.5, k 1:
     * scale_c = 1 + 3/3 * (sum of x^2 over channels c-1..c+1, clipped):
     *   c0: 1 + (1 + 4)     = 6  -> 1 / sqrt(6)  = 0.40824829
     *   c1: 1 + (1 + 4 + 9) = 15 -> 2 / sqrt(15) = 0.51639778
     *   c2: 1 + (4 + 9)     = 14 -> 3 / sqrt(14) = 0.80178373 */
    const float x[3] = {1, 2, 3};
    fw_run(&t, "lrn", NET(1, 1, 3) "[lrn]\nsize=3\nalpha=3\nbeta=0.5\nk=1\n", 1, x);
    gc_forward(&t, "lrn", NULL);
    const float want[3] = {0.40824829f, 0.51639778f, 0.80178373f};
    fw_expect("lrn size 3", st_replica_output(&t.rep, 0), want, 3, 1e-6f);
    gc_close(&t);

    /* size 5 over the same 3 channels: every window holds all of them,
     * alpha 5, beta 1, k 2: scale = 2 + 5/5 * 14 = 16 -> x / 16 */
    fw_run(&t, "lrn5", NET(1, 1, 3) "[lrn]\nsize=5\nalpha=5\nbeta=1\nk=2\n", 1, x);
    gc_forward(&t, "lrn5", NULL);
    const float want5[3] = {0.0625f, 0.125f, 0.1875f};
    fw_expect("lrn size 5", st_replica_output(&t.rep, 0), want5, 3, 1e-6f);
    gc_close(&t);
}

static void test_forward_pool_bn_losses(void **state)
{
    (void)state;
    gc_net t;
    /* global average of two 2 x 3 channels: (1+2+3+4+5+6)/6 = 3.5 and
     * (-1+0+2+4+5+8)/6 = 3 */
    const float xa[12] = {1, 2, 3, 4, 5, 6, -1, 0, 2, 4, 5, 8};
    fw_run(&t, "avg", NET(2, 3, 2) "[avgpool]\n", 1, xa);
    gc_forward(&t, "avg", NULL);
    const float want_avg[2] = {3.5f, 3.0f};
    fw_expect("avgpool", st_replica_output(&t.rep, 0), want_avg, 2, 1e-6f);
    gc_close(&t);

    /* batchnorm over one channel of 1 x 2, x = [1, 3]: mean 2, biased
     * variance 1; gamma 2, beta 0.5: y = 2 * (x - 2) / sqrt(1 + 1e-5) + 0.5
     * = [-1.4999900, 2.4999900] */
    const float xb[2] = {1, 3};
    fw_run(&t, "bn", NET(1, 2, 1) "[batchnorm]\n", 1, xb);
    *fw_param(&t, "0.scales") = 2.0f;
    *fw_param(&t, "0.biases") = 0.5f;
    gc_forward(&t, "bn", NULL);
    const float want_bn[2] = {-1.4999900f, 2.4999900f};
    fw_expect("batchnorm", st_replica_output(&t.rep, 0), want_bn, 2, 1e-6f);
    gc_close(&t);

    /* [cost] scale 2, x = [0.2, 0.5, -0.1], label 1:
     * loss = 0.5 * 2 * (0.2^2 + (0.5 - 1)^2 + 0.1^2) = 0.04 + 0.25 + 0.01 = 0.3;
     * input gradient 2 * (x - onehot) = [0.4, -1, -0.2] */
    const float xc[3] = {0.2f, 0.5f, -0.1f};
    fw_run(&t, "cost", NET(1, 1, 3) "[cost]\nscale=2\n", 1, xc);
    t.labels[0] = 1;
    double loss = 0.0;
    gc_forward(&t, "cost", &loss);
    assert_true(fabs(loss - 0.3) < 1e-6);
    st_error err = {0};
    assert_int_equal(st_replica_backward(&t.rep, t.w, t.g, &t.shard, &t.info, NULL, &err),
                     ST_OK);
    const float want_dc[3] = {0.4f, -1.0f, -0.2f};
    fw_expect("cost gradient", st_replica_input_delta(&t.rep), want_dc, 3, 1e-6f);
    gc_close(&t);

    /* [softmax], x = [0, ln 2, ln 5]: p = [1, 2, 5] / 8 = [0.125, 0.25, 0.625];
     * label 2: loss = -ln 0.625 = 0.47000363; gradient p - onehot =
     * [0.125, 0.25, -0.375] */
    const float xs[3] = {0.0f, 0.69314718f, 1.6094379f};
    fw_run(&t, "softmax", NET(1, 1, 3) "[softmax]\n", 1, xs);
    t.labels[0] = 2;
    gc_forward(&t, "softmax", &loss);
    const float want_p[3] = {0.125f, 0.25f, 0.625f};
    fw_expect("softmax", st_replica_output(&t.rep, 0), want_p, 3, 1e-6f);
    assert_true(fabs(loss - 0.47000363) < 1e-6);
    assert_int_equal(st_replica_backward(&t.rep, t.w, t.g, &t.shard, &t.info, NULL, &err),
                     ST_OK);
    const float want_ds[3] = {0.125f, 0.25f, -0.375f};
    fw_expect("softmax gradient", st_replica_input_delta(&t.rep), want_ds, 3, 1e-6f);
    gc_close(&t);

    /* A probability of 0 is kept from log(0): -ln 1e-30 = 69.08; a NaN input
     * gives a NaN loss (the trainer stops on it), not that finite value. */
    const float xz[3] = {0.0f, 0.0f, -1000.0f};
    fw_run(&t, "softmax zero", NET(1, 1, 3) "[softmax]\n", 1, xz);
    t.labels[0] = 2;
    gc_forward(&t, "softmax zero", &loss);
    assert_true(fabs(loss - 69.077553) < 1e-5);
    gc_close(&t);
    const float xn[3] = {0.0f, NAN, 1.0f};
    fw_run(&t, "softmax nan", NET(1, 1, 3) "[softmax]\n", 1, xn);
    t.labels[0] = 2;
    gc_forward(&t, "softmax nan", &loss);
    if (!isnan(loss))
        fail_msg("softmax of a NaN input: loss %g, expected NaN", loss);
    gc_close(&t);
}

static void test_forward_shortcut_mapping(void **state)
{
    (void)state;
    gc_net t;
    /* x = 1..16 as 4 x 4 (rows 1 2 3 4 / 5 6 7 8 / 9 10 11 12 / 13 14 15 16).
     * layer 0: identity maxpool (size 1: padding 0); layer 1: maxpool 2/2 ->
     * 2 x 2 of block maxima [6 8 / 14 16]; layer 2: route of layer 0; layer 3:
     * shortcut from layer 1 (2 x 2) onto 4 x 4 with alpha 2, beta 10:
     * Darknet's sample = 4/2 = 2, so only outputs (2i, 2j) are mapped:
     *   (0,0) 2*1 + 10*6 = 62    (0,2) 2*3 + 10*8 = 86
     *   (2,0) 2*9 + 10*14 = 158  (2,2) 2*11 + 10*16 = 182
     * and every other output is layer 2's value, unscaled. */
    float x[16];
    for (int i = 0; i < 16; i++)
        x[i] = (float)(i + 1);
    fw_run(&t, "shortcut_up",
           NET(4, 4, 1) "[maxpool]\nsize=1\n[maxpool]\nsize=2\nstride=2\n[route]\nlayers=0\n"
                        "[shortcut]\nfrom=1\nalpha=2\nbeta=10\n", 1, x);
    gc_forward(&t, "shortcut_up", NULL);
    const float want_up[16] = {62, 2, 86, 4, 5, 6, 7, 8, 158, 10, 182, 12, 13, 14, 15, 16};
    fw_expect("shortcut from 2x2 onto 4x4", st_replica_output(&t.rep, 3), want_up, 16, 0.0f);
    gc_close(&t);

    /* the other way: shortcut at layer 2 adds layer 0 (4 x 4) onto the 2 x 2
     * maxima with stride 4/2 = 2, reading x at (2i, 2j):
     *   (0,0) 2*6 + 10*1 = 22    (0,1) 2*8 + 10*3 = 46
     *   (1,0) 2*14 + 10*9 = 118  (1,1) 2*16 + 10*11 = 142 */
    fw_run(&t, "shortcut_down",
           NET(4, 4, 1) "[maxpool]\nsize=1\n[maxpool]\nsize=2\nstride=2\n"
                        "[shortcut]\nfrom=0\nalpha=2\nbeta=10\n", 1, x);
    gc_forward(&t, "shortcut_down", NULL);
    const float want_down[4] = {22, 46, 118, 142};
    fw_expect("shortcut from 4x4 onto 2x2", st_replica_output(&t.rep, 2), want_down, 4, 0.0f);
    gc_close(&t);
}

static void test_forward_dropout_mask(void **state)
{
    (void)state;
    gc_net t;
    gc_open(&t, "dropout", NET(4, 5, 3) "[dropout]\nprobability=0.25\n", 2);
    gc_fill_inputs(&t, 1);
    gc_forward(&t, "dropout", NULL);
    size_t count = t.in_n;
    float *first = malloc(count * sizeof *first);
    assert_non_null(first);
    memcpy(first, st_replica_output(&t.rep, 0), count * sizeof *first);
    /* each value dropped (0) or scaled by 1 / (1 - 0.25); both happen */
    size_t dropped = 0;
    for (size_t i = 0; i < count; i++) {
        if (first[i] == 0.0f)
            dropped++;
        else if (fabsf(first[i] - t.x[i] / 0.75f) > 1e-6f)
            fail_msg("dropout value %zu is %g, expected 0 or %g", i, first[i], t.x[i] / 0.75f);
    }
    assert_true(dropped > 0 && dropped < count);
    /* the same step info and shard give the same mask */
    gc_forward(&t, "dropout", NULL);
    assert_memory_equal(first, st_replica_output(&t.rep, 0), count * sizeof *first);
    /* another iteration gives another mask */
    t.info.iteration++;
    gc_forward(&t, "dropout", NULL);
    assert_true(memcmp(first, st_replica_output(&t.rep, 0), count * sizeof *first) != 0);
    /* inference is the identity */
    t.info.training = 0;
    gc_forward(&t, "dropout", NULL);
    assert_memory_equal(t.x, st_replica_output(&t.rep, 0), count * sizeof *first);
    free(first);
    gc_close(&t);
}

/* Batch norm's running-statistic slots of the gradient arena: per st_bn_backward
 * (src/layers/layer_blocks.c) and solver.h, a training step leaves n * batch mean
 * and n * unbiased batch variance there for the solver's running average. */
static void test_bn_running_stat_slots(void **state)
{
    (void)state;
    gc_net t;
    /* one sample, one channel of 1 x 2, x = [1, 3]: mean 2, biased variance
     * 1, unbiased 1 * 2 / (2 - 1) = 2; n = 1: slots 2 and 2 */
    const float x[2] = {1, 3};
    fw_run(&t, "bn_stats", NET(1, 2, 1) "[batchnorm]\n", 1, x);
    float sentinel = -12345.0f;
    for (size_t i = 0; i < t.net.params.count; i++)
        t.g[i] = sentinel;
    double loss;
    st_error err = {0};
    gc_forward(&t, "bn_stats", &loss);
    assert_int_equal(st_replica_backward(&t.rep, t.w, t.g, &t.shard, &t.info, NULL, &err),
                     ST_OK);
    const float *mean = t.g + (fw_param(&t, "0.rolling_mean") - t.w);
    const float *var = t.g + (fw_param(&t, "0.rolling_variance") - t.w);
    float got_mean = *mean, got_var = *var;
    gc_close(&t);
    if (got_mean != 2.0f || got_var != 2.0f)
        fail_msg("after a training forward + backward the gradient arena's 0.rolling_mean slot "
                 "holds %g (expected n * mean = 2) and 0.rolling_variance %g (expected "
                 "n * unbiased variance = 2); %g is the value it held before: the running "
                 "statistics are never updated from the batch", got_mean, got_var, sentinel);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_forward_maxpool_default_padding),
        cmocka_unit_test(test_forward_conv_known_weights),
        cmocka_unit_test(test_forward_activations),
        cmocka_unit_test(test_forward_lrn),
        cmocka_unit_test(test_forward_pool_bn_losses),
        cmocka_unit_test(test_forward_shortcut_mapping),
        cmocka_unit_test(test_forward_dropout_mask),
        cmocka_unit_test(test_bn_running_stat_slots),
        cmocka_unit_test(conv_3x3_pad_linear),
        cmocka_unit_test(conv_3x3_stride2_padding1_logistic),
        cmocka_unit_test(conv_5x5_stride3_padding2_tanh),
        cmocka_unit_test(conv_3x3_stride2_nopad_odd),
        cmocka_unit_test(conv_1x1_direct_tanh),
        cmocka_unit_test(conv_1x1_stride2_linear),
        cmocka_unit_test(conv_groups3_tanh),
        cmocka_unit_test(conv_depthwise_stride2_logistic),
        cmocka_unit_test(conv_bn_linear),
        cmocka_unit_test(conv_bn_groups2_stride2_tanh),
        cmocka_unit_test(conv_bn_relu),
        cmocka_unit_test(conv_bn_1x1_logistic),
        cmocka_unit_test(conv_act_linear),
        cmocka_unit_test(conv_act_relu),
        cmocka_unit_test(conv_act_leaky),
        cmocka_unit_test(conv_act_logistic),
        cmocka_unit_test(conv_act_tanh),
        cmocka_unit_test(connected_logistic),
        cmocka_unit_test(connected_bn_tanh),
        cmocka_unit_test(connected_bn_leaky),
        cmocka_unit_test(conv_then_connected),
        cmocka_unit_test(connected_act_linear),
        cmocka_unit_test(connected_act_relu),
        cmocka_unit_test(connected_act_leaky),
        cmocka_unit_test(connected_act_logistic),
        cmocka_unit_test(connected_act_tanh),
        cmocka_unit_test(maxpool_2x2_s2_default_pad),
        cmocka_unit_test(maxpool_3x3_s2_default_pad),
        cmocka_unit_test(maxpool_2x2_s1_default_pad),
        cmocka_unit_test(maxpool_3x3_s2_pad0),
        cmocka_unit_test(maxpool_3x3_s2_pad3),
        cmocka_unit_test(conv_then_maxpool),
        cmocka_unit_test(avgpool_global),
        cmocka_unit_test(conv_then_avgpool),
        cmocka_unit_test(dropout_between_layers),
        cmocka_unit_test(dropout_on_input),
        cmocka_unit_test(softmax_cross_entropy),
        cmocka_unit_test(softmax_groups2_loss_gradient),
        cmocka_unit_test(softmax_temperature2_gradient),
        cmocka_unit_test(cost_sse_scale07),
        cmocka_unit_test(cost_sse_default_after_conv),
        cmocka_unit_test(batchnorm_on_input),
        cmocka_unit_test(batchnorm_after_conv),
        cmocka_unit_test(lrn_size3),
        cmocka_unit_test(lrn_size5),
        cmocka_unit_test(shortcut_same_shape_logistic),
        cmocka_unit_test(shortcut_same_shape_leaky),
        cmocka_unit_test(shortcut_identity_relu),
        cmocka_unit_test(shortcut_from_larger_stride2),
        cmocka_unit_test(shortcut_from_larger_odd),
        cmocka_unit_test(shortcut_from_smaller_sample2),
        cmocka_unit_test(shortcut_more_channels),
        cmocka_unit_test(shortcut_from_previous),
        cmocka_unit_test(shortcut_identity_from_previous),
        cmocka_unit_test(route_two_inputs),
        cmocka_unit_test(route_three_inputs_one_twice),
        cmocka_unit_test(route_layer_in_two_routes),
        cmocka_unit_test(fanout_conv3x3),
        cmocka_unit_test(fanout_conv1x1_direct),
        cmocka_unit_test(fanout_conv_bn),
        cmocka_unit_test(fanout_maxpool),
        cmocka_unit_test(fanout_lrn),
        cmocka_unit_test(fanout_batchnorm),
        cmocka_unit_test(fanout_dropout),
        cmocka_unit_test(fanout_shortcut),
        cmocka_unit_test(fanout_shortcut_identity),
        cmocka_unit_test(fanout_connected),
        cmocka_unit_test(fanout_avgpool),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
