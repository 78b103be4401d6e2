/* bfloat16 (--precision bf16): the rounding of ops/bf16.h against values
 * computed by hand, and the convolution and inner-product kernels of every
 * backend that declares bf16 (st_backend.precision_supported) against the
 * reference backend in fp32, conformance-style: one table of kernel
 * descriptors, every pass (forward, backward-data, backward-weights), a
 * bound on each value derived from bf16's precision. Then the activations
 * kept in bf16 between layers: which outputs a network keeps (plan_*),
 * and kernels chained through them against the same chain in fp32 with
 * the values rounded by hand (chain_*): below, before main.
 *
 * The bound. bf16 keeps 8 significant bits, so rounding to nearest moves a
 * value by at most u = 2^-8 of itself. A product of two rounded operands
 * is a(1+d1) b(1+d2), off the exact ab by at most (2u + u^2) |ab| = (2^-7 +
 * 2^-16) |ab|, and is exact in fp32 (8 x 8 significant bits). A value of a
 * pass is a sum of K such products (K, the reduction length: ic/groups x kh
 * x kw forward, oc/groups x kh x kw backward-data, n x oh x ow
 * backward-weights; in, out and n for the inner product), summed in fp32
 * by both sides, each sum within (K - 1) 2^-24 sum|terms| of its exact
 * value, then (forward) the bias added, within 2^-24 of the result. So
 * for every value i
 *
 *   |bf16_i - fp32_i| <= (2^-7 + 2^-16 + (2K + 4) 2^-24) (S_i + |bias_i|)
 *
 * with S_i = sum over its K terms of |a| |b|, which the reference kernel
 * computes in fp32 on the operands' absolute values (its own rounding,
 * below K 2^-24 relative, is inside the (2K + 4) 2^-24 term's slack: the
 * bound is not tuned, every term is accounted for). A backend whose bf16
 * kernels sum in another order, or round only at the end, stays within it.
 *
 * Also: the results must differ from fp32 by more than fp32 sums in
 * another order ever do (largest difference over largest value above
 * 2^-14; fp32 reorderings measure ~1e-6, test_conformance.c), so a kernel
 * that ignores the precision fails; the bias gradient, a sum without
 * products, is bitwise fp32's; and the reference backend, the oracle, is
 * bitwise the fp32 kernel run on operands rounded beforehand (the products
 * exact, the same sums in the same order): which operands each pass
 * rounds, exactly. And each backend's kernels given the weights' bf16 copy
 * (st_kargs.weights_bf16, made by its bf16_convert: what the workers
 * share in training) give the bits of the same kernels rounding the
 * weights themselves, their f32 weights then NaN (so only the copy is
 * read). */
#include <math.h>

#include "testlib.h"

#include "backends/backend.h"
#include "backends/choices.h"
#include "base/memory.h"
#include "base/rng.h"
#include "ops/bf16.h"
#include "ops/kdesc.h"

/* ---- the rounding, by hand ---- */

static float f_of(uint32_t u)
{
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

static uint32_t u_of(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

static void rounds_to(uint32_t in, uint16_t want)
{
    uint16_t got = st_bf16_from_float(f_of(in));
    if (got != want)
        fail_msg("st_bf16_from_float(0x%08X) = 0x%04X, expected 0x%04X", in, got, want);
}

static void round_nearest_even(void **state)
{
    (void)state;
    rounds_to(0x3F800000u, 0x3F80); /* 1.0: exact */
    rounds_to(0x3F808000u, 0x3F80); /* 1 + 2^-8: halfway, 0x3F80 even: down */
    rounds_to(0x3F818000u, 0x3F82); /* halfway between 0x3F81 and 0x3F82: up to even */
    rounds_to(0x3F808001u, 0x3F81); /* just above halfway */
    rounds_to(0x3F817FFFu, 0x3F81); /* just below halfway */
    rounds_to(0xBF808000u, 0xBF80); /* the same, negative: by magnitude */
    rounds_to(0xBF818000u, 0xBF82);
    rounds_to(0x40490FDBu, 0x4049); /* pi -> 3.140625 */
    rounds_to(0x3EAAAAABu, 0x3EAB); /* 1/3 -> 0.333984375 */
    rounds_to(0x3F7FFFFFu, 0x3F80); /* 1 - 2^-24: the carry raises the exponent, 1.0 */
    rounds_to(0x00000000u, 0x0000);
    rounds_to(0x80000000u, 0x8000); /* -0 keeps its sign */
    assert_true(st_bf16_to_float(0x4049) == 3.140625f);
    assert_true(st_bf16_to_float(0x3EAB) == 0.333984375f);
    assert_true(st_bf16_to_float(0xBF82) == -1.015625f);
}

static void round_special(void **state)
{
    (void)state;
    rounds_to(0x7F800000u, 0x7F80); /* +Inf */
    rounds_to(0xFF800000u, 0xFF80); /* -Inf */
    rounds_to(0x7FC00000u, 0x7FC0); /* the quiet NaN */
    rounds_to(0x7F800001u, 0x7FC0); /* a signalling NaN whose payload is below the half
                                       kept: truncated it would be +Inf; quieted */
    rounds_to(0xFF800001u, 0xFFC0); /* its sign kept */
    rounds_to(0x7FA00000u, 0x7FE0); /* the upper payload kept, the quiet bit set */
    rounds_to(0x7FFFFFFFu, 0x7FFF); /* no carry out of a NaN */
    rounds_to(0x7F7FFFFFu, 0x7F80); /* the largest finite float: past the halfway point
                                       to 2^128, infinity */
    rounds_to(0x7F7F8000u, 0x7F80); /* halfway, 0x7F7F odd: up, to infinity */
    rounds_to(0x7F7F7FFFu, 0x7F7F); /* below halfway: the largest finite bf16 */
    rounds_to(0xFF7FFFFFu, 0xFF80); /* and negative */
    assert_true(isnan(st_bf16_to_float(st_bf16_from_float(f_of(0x7F800001u)))));
    assert_true(isinf(st_bf16_to_float(0x7F80)));
}

static void round_denormals(void **state)
{
    (void)state;
    rounds_to(0x00000001u, 0x0000); /* the smallest float denormal: to +0 */
    rounds_to(0x00008000u, 0x0000); /* halfway to the smallest bf16 denormal: to even 0 */
    rounds_to(0x00008001u, 0x0001); /* above halfway: the smallest bf16 denormal, 2^-133 */
    rounds_to(0x00018000u, 0x0002); /* halfway, 0x0001 odd: up */
    rounds_to(0x80008001u, 0x8001); /* negative */
    rounds_to(0x007FFFFFu, 0x0080); /* the largest float denormal: to the smallest normal */
    rounds_to(0x00400000u, 0x0040); /* a denormal bf16 holds exactly: kept, not flushed */
    assert_true(st_bf16_to_float(0x0001) == ldexpf(1.0f, -133));
}

/* st_bf16_round: in place and out, the values st_bf16_from_float gives. */
static void round_array(void **state)
{
    (void)state;
    float x[5] = {f_of(0x3F808000u), f_of(0x3F818000u), -0.0f, INFINITY, f_of(0x7F800001u)};
    float y[5];
    st_bf16_round(y, x, 5);
    st_bf16_round(x, x, 5);
    const uint32_t want[5] = {0x3F800000u, 0x3F820000u, 0x80000000u, 0x7F800000u, 0x7FC00000u};
    for (int i = 0; i < 5; i++) {
        assert_int_equal(u_of(y[i]), want[i]);
        assert_int_equal(u_of(x[i]), want[i]);
    }
}

/* ---- the kernels ---- */

typedef struct bf_case {
    const char *name;
    int n; /* samples */
    st_kdesc_any d;
} bf_case;

#define CONV(name_, n_, ic_, ih_, iw_, oc_, oh_, ow_, k_, s_, p_, g_, bias_)                \
    {#name_, n_,                                                                           \
     {.conv = {.base = {.kind = ST_K_CONV, .name = #name_}, .ic = ic_, .ih = ih_, .iw = iw_,  \
               .oc = oc_, .oh = oh_, .ow = ow_, .kh = k_, .kw = k_, .sh = s_, .sw = s_,       \
               .ph = p_, .pw = p_, .groups = g_, .bias = bias_, .act = ST_ACT_LINEAR}}},
#define FC(name_, n_, in_, out_, bias_)                                                     \
    {#name_, n_,                                                                           \
     {.fc = {.base = {.kind = ST_K_FC, .name = #name_}, .in = in_, .out = out_,               \
             .bias = bias_, .act = ST_ACT_LINEAR}}},

static const bf_case cases[] = {
    CONV(conv_3x3_pad1, 3, 8, 7, 6, 12, 7, 6, 3, 1, 1, 1, 1)
    CONV(conv_1x1_direct, 2, 16, 5, 5, 8, 5, 5, 1, 1, 0, 1, 0) /* col is src */
    CONV(conv_groups2_stride2, 2, 6, 9, 8, 10, 5, 4, 3, 2, 1, 2, 1)
    CONV(conv_long_reductions, 4, 32, 12, 12, 16, 12, 12, 3, 1, 1, 1, 0) /* K 288, 144, 576 */
    FC(fc_bias, 5, 300, 20, 1)
    FC(fc_nobias, 3, 64, 10, 0)
};
#define N_CASES ((int)(sizeof cases / sizeof cases[0]))

/* A kernel's tensors: n samples' src, dst, diff_src and diff_dst, the
 * weights and bias and their gradients; and the reduction length of each
 * pass. */
typedef struct bf_sizes {
    size_t src, dst, w, bias;
    long k_fwd, k_data, k_weights;
} bf_sizes;

static bf_sizes sizes_of(const bf_case *c)
{
    bf_sizes z;
    size_t n = (size_t)c->n;
    if (c->d.base.kind == ST_K_CONV) {
        const st_conv_desc *d = &c->d.conv;
        long taps = (long)d->kh * d->kw;
        z.src = n * d->ic * d->ih * d->iw;
        z.dst = n * d->oc * d->oh * d->ow;
        z.w = (size_t)d->oc * (d->ic / d->groups) * taps;
        z.bias = d->bias ? (size_t)d->oc : 0;
        z.k_fwd = d->ic / d->groups * taps;
        z.k_data = d->oc / d->groups * taps;
        z.k_weights = (long)c->n * d->oh * d->ow;
    } else {
        const st_fc_desc *d = &c->d.fc;
        z.src = n * d->in;
        z.dst = n * d->out;
        z.w = (size_t)d->out * d->in;
        z.bias = d->bias ? (size_t)d->out : 0;
        z.k_fwd = d->in;
        z.k_data = d->out;
        z.k_weights = c->n;
    }
    return z;
}

/* Inputs and outputs of one run of the three passes. */
typedef struct bf_tensors {
    float *src, *w, *bias, *diff_dst; /* in */
    float *dst, *diff_src, *dw, *db;  /* out */
} bf_tensors;

static float *bf_alloc(size_t floats)
{
    st_error err = {0};
    float *p = st_alloc_aligned((floats ? floats : 1) * sizeof(float), "bf16 test", &err);
    assert_non_null(p);
    return p;
}

static bf_tensors tensors_new(const bf_sizes *z)
{
    bf_tensors t = {bf_alloc(z->src), bf_alloc(z->w), bf_alloc(z->bias), bf_alloc(z->dst),
                    bf_alloc(z->dst), bf_alloc(z->src), bf_alloc(z->w), bf_alloc(z->bias)};
    return t;
}

static void tensors_free(bf_tensors *t)
{
    float *p[] = {t->src, t->w, t->bias, t->diff_dst, t->dst, t->diff_src, t->dw, t->db};
    for (size_t i = 0; i < sizeof p / sizeof p[0]; i++)
        st_free_aligned(p[i]);
}

/* t's inputs made from in by f (NULL: copied). */
static void tensors_map(bf_tensors *t, const bf_tensors *in, const bf_sizes *z,
                        float (*f)(float))
{
    float *to[] = {t->src, t->w, t->bias, t->diff_dst};
    const float *from[] = {in->src, in->w, in->bias, in->diff_dst};
    size_t count[] = {z->src, z->w, z->bias, z->dst};
    for (int k = 0; k < 4; k++)
        for (size_t i = 0; i < count[k]; i++)
            to[k][i] = f ? f(from[k][i]) : from[k][i];
}

static float f_abs(float x)
{
    return fabsf(x);
}

static float f_bf16(float x)
{
    return st_bf16_to_float(st_bf16_from_float(x));
}

/* How a bf16 kernel is given its weights: it rounds them itself, or it
 * reads their bf16 copy (st_kargs.weights_bf16, made by the backend's
 * bf16_convert) in a context that says so, the f32 weights it is handed
 * then NaN: the copy alone must be read. */
enum { W_ROUNDED, W_COPY };

/* A kernel choice given to the dnnl backend (its key as dnnl_conv.c's
 * choice_key writes it for these convolutions: every pass, no input or
 * output kept in bf16; as dnnl_fc.c's fc_choice_key for an inner
 * product's weight gradient in bf16), so that a run takes that choice
 * rather than the one the backend would measure or default to; checked to
 * be taken (a key that drifted from the backend's would leave the choice
 * untested). */
static st_choices *plan_given(const st_backend *be, st_precision p, const bf_case *c,
                              const char *plan)
{
    const st_conv_desc *d = &c->d.conv;
    char key[ST_CHOICE_MAX];
    st_choices *ch = NULL;
    st_error err = {0};
    if (c->d.base.kind == ST_K_FC)
        snprintf(key, sizeof key, "%s n%d %d>%d %s bwd_weights", c->name, c->n, c->d.fc.in,
                 c->d.fc.out, st_precision_names[p]);
    else
        snprintf(key, sizeof key,
                 "%s n%d %dx%dx%d>%dx%dx%d k%dx%d s%dx%d p%dx%d g%d fwd+bwd%s%s", c->name, c->n,
                 d->ic, d->ih, d->iw, d->oc, d->oh, d->ow, d->kh, d->kw, d->sh, d->sw, d->ph,
                 d->pw, d->groups, p == ST_PRECISION_FP32 ? "" : " ",
                 p == ST_PRECISION_FP32 ? "" : st_precision_names[p]);
    if (st_choices_create(&ch, be->choice_syntax, &err) != ST_OK ||
        st_choices_add(ch, key, plan, "test_bf16", ST_CHOICE_FILE, &err) != ST_OK)
        fail_msg("%s: the plan '%s': %s", c->name, plan, err.msg);
    return ch;
}

/* Forward (training), backward-weights and backward-data (overwriting) of
 * case c on backend be in precision p, t's inputs to t's outputs, the
 * weights given as `given` says, a kernel choice forced where plan is not
 * NULL (plan_given). */
static void run_passes_planned(const st_backend *be, st_precision p, const bf_case *c,
                               bf_tensors *t, int given, const char *plan)
{
    st_error err = {0};
    st_kdesc_any d = c->d;
    int sizes[1] = {c->n};
    d.base.backward = 1;
    d.base.src_grad = 1;
    d.base.n = c->n;
    d.base.batch_sizes = sizes;
    d.base.n_batch_sizes = 1;
    d.base.dst_plain = 1;
    st_backend_opts o = {.intra_threads = 1, .precision = p, .weights_bf16 = given == W_COPY};
    st_choices *ch = plan ? plan_given(be, p, c, plan) : NULL;
    if (ch) {
        o.conv_impl = "auto";
        o.choices = ch;
    }
    st_bctx *ctx = NULL;
    st_kernel *k = NULL;
    if (be->ctx_create(&o, &ctx, &err) != ST_OK || be->kernel_create(ctx, &d.base, &k, &err))
        fail_msg("%s: %s backend, %s: %s", c->name, be->name, st_precision_names[p], err.msg);
    if (ch) {
        st_choice_counts counts;
        st_choices_counts(ch, &counts);
        if (counts.taken[ST_CHOICE_FILE] != 1)
            fail_msg("%s: %s backend: the plan '%s' given was not taken (a key that differs "
                     "from the backend's?)", c->name, be->name, plan);
    }
    void *ws = bf_alloc(k->workspace_bytes / sizeof(float) + 16);
    void *scratch = bf_alloc(k->scratch_bytes / sizeof(float) + 16);
    bf_sizes z = sizes_of(c);
    st_kargs a = {.n = c->n, .src = t->src, .dst = t->dst, .weights = t->w,
                  .bias = z.bias ? t->bias : NULL, .training = 1, .workspace = ws,
                  .scratch = scratch};
    uint16_t *copy = NULL;
    float *decoy = NULL;
    if (given == W_COPY) {
        copy = (uint16_t *)bf_alloc(z.w / 2 + 1);
        decoy = bf_alloc(z.w);
        if (be->bf16_convert && be->bf16_convert(ctx, t->w, copy, z.w, &err) != ST_OK)
            fail_msg("%s: %s backend: bf16_convert: %s", c->name, be->name, err.msg);
        if (!be->bf16_convert)
            st_bf16_convert(copy, t->w, z.w);
        for (size_t i = 0; i < z.w; i++)
            decoy[i] = NAN;
        a.weights = decoy;
        a.weights_bf16 = copy;
    }
    st_status st = k->ops->forward(k, &a, &err);
    a.diff_dst = t->diff_dst;
    a.diff_weights = t->dw;
    a.diff_bias = z.bias ? t->db : NULL;
    if (st == ST_OK)
        st = k->ops->backward_weights(k, &a, &err);
    a.diff_src = t->diff_src;
    if (st == ST_OK)
        st = k->ops->backward_data(k, &a, &err);
    if (st != ST_OK)
        fail_msg("%s: %s backend, %s: a pass failed: %s", c->name, be->name,
                 st_precision_names[p], err.msg);
    st_free_aligned(ws);
    st_free_aligned(scratch);
    st_free_aligned(copy);
    st_free_aligned(decoy);
    k->ops->destroy(k);
    be->ctx_destroy(ctx);
    st_choices_free(ch);
}

static void run_passes_given(const st_backend *be, st_precision p, const bf_case *c,
                             bf_tensors *t, int given)
{
    run_passes_planned(be, p, c, t, given, NULL);
}

static void run_passes(const st_backend *be, st_precision p, const bf_case *c, bf_tensors *t)
{
    run_passes_given(be, p, c, t, W_ROUNDED);
}

/* The bound of the header, (2^-7 + 2^-16 + (2K + 4) 2^-24), for sums of K
 * products. */
static double bf16_gamma(long K)
{
    return ldexp(1.0, -7) + ldexp(1.0, -16) + (double)(2 * K + 4) * ldexp(1.0, -24);
}

/* got against fp32 ref value by value within gamma(K) (S_i + |bias of
 * i|); and got differs from ref by more than fp32 reordering would.
 * bias_of: i's bias index (value i / per of an [n, channels, per] tensor),
 * or bias NULL. Returns the failures, printed. */
static long check_bound(const char *name, const char *be, const char *what, const float *ref,
                        const float *got, const float *S, size_t count, long K,
                        const float *bias, size_t channels, size_t per)
{
    double gamma = bf16_gamma(K), max_ref = 0.0, max_diff = 0.0, worst = 0.0;
    long failed = 0;
    for (size_t i = 0; i < count; i++) {
        double b = bias ? fabs(bias[(i / per) % channels]) : 0.0;
        double diff = fabs((double)got[i] - (double)ref[i]), bound = gamma * (S[i] + b);
        max_ref = fmax(max_ref, fabs(ref[i]));
        max_diff = fmax(max_diff, diff);
        worst = fmax(worst, diff / bound);
        if (!(diff <= bound) && failed++ < 4)
            print_error("%s [%s bf16]: %s[%zu]: fp32 %.9g, bf16 %.9g: |diff| %.3g > %.3g = "
                        "(2^-7 + 2^-16 + (2K + 4) 2^-24) x %.4g, K = %ld\n", name, be, what, i,
                        ref[i], got[i], diff, bound, S[i] + b, K);
    }
    double rel = max_diff / max_ref;
    print_message("%-22s %-5s %-13s K %4ld: largest |bf16 - fp32| %.3g of max|fp32| (%.3g), "
                  "%.0f%% of the bound\n", name, be, what, K, rel, max_ref, 100.0 * worst);
    if (!(rel > ldexp(1.0, -14))) {
        failed++;
        print_error("%s [%s bf16]: %s: largest |bf16 - fp32| / max|fp32| = %.3g, not above "
                    "2^-14: bf16 is not applied (fp32 arithmetic in another order gives "
                    "~1e-6)\n", name, be, what, rel);
    }
    return failed;
}

static long check_bitwise(const char *name, const char *what, const char *against,
                          const float *want, const float *got, size_t count)
{
    for (size_t i = 0; i < count; i++)
        if (memcmp(&want[i], &got[i], sizeof *got) != 0) {
            print_error("%s: %s[%zu]: %.9g, expected %.9g bitwise (%s)\n", name, what, i,
                        got[i], want[i], against);
            return 1;
        }
    return 0;
}

typedef struct bf_run {
    const bf_case *c;
    const st_backend *be;
    const char *plan; /* a kernel choice given (run_passes_planned), or NULL */
    char name[128];   /* "<backend>/<case>", then " [plan]" */
} bf_run;

static void run_case(void **state)
{
    const bf_run *run = *state;
    const bf_case *c = run->c;
    const st_backend *be = run->be, *ref;
    st_error err = {0};
    assert_int_equal(st_backend_find("ref", &ref, &err), ST_OK);
    bf_sizes z = sizes_of(c);
    bf_tensors in = tensors_new(&z), fp32 = tensors_new(&z), bf16 = tensors_new(&z),
               mag = tensors_new(&z);
    st_rng rng;
    st_rng_seed(&rng, 37, 1);
    float *fill[] = {in.src, in.w, in.bias, in.diff_dst};
    size_t count[] = {z.src, z.w, z.bias, z.dst};
    const float half[] = {1.0f, 0.5f, 0.3f, 1.0f}; /* uniform in [-half, half) */
    for (int k = 0; k < 4; k++)
        for (size_t i = 0; i < count[k]; i++)
            fill[k][i] = half[k] * (2.0f * st_rng_uniform(&rng) - 1.0f);

    tensors_map(&fp32, &in, &z, NULL);
    run_passes(ref, ST_PRECISION_FP32, c, &fp32);
    tensors_map(&bf16, &in, &z, NULL);
    run_passes_planned(be, ST_PRECISION_BF16, c, &bf16, W_ROUNDED, run->plan);
    /* S: the sums of |a| |b| of each value, bias 0 */
    tensors_map(&mag, &in, &z, f_abs);
    memset(mag.bias, 0, z.bias * sizeof *mag.bias);
    run_passes(ref, ST_PRECISION_FP32, c, &mag);

    int conv = c->d.base.kind == ST_K_CONV;
    size_t channels = conv ? (size_t)c->d.conv.oc : (size_t)c->d.fc.out;
    size_t per = conv ? (size_t)c->d.conv.oh * c->d.conv.ow : 1;
    long failed =
        check_bound(c->name, be->name, "dst", fp32.dst, bf16.dst, mag.dst, z.dst, z.k_fwd,
                    z.bias ? in.bias : NULL, channels, per) +
        check_bound(c->name, be->name, "diff_src", fp32.diff_src, bf16.diff_src, mag.diff_src,
                    z.src, z.k_data, NULL, 1, 1) +
        check_bound(c->name, be->name, "diff_weights", fp32.dw, bf16.dw, mag.dw, z.w,
                    z.k_weights, NULL, 1, 1) +
        check_bitwise(run->name, "diff_bias", "a sum of diff_dst without products: fp32",
                      fp32.db, bf16.db, z.bias);

    /* the weights' bf16 copy read instead of rounding them: the same bits */
    bf_tensors copy = tensors_new(&z);
    tensors_map(&copy, &in, &z, NULL);
    run_passes_planned(be, ST_PRECISION_BF16, c, &copy, W_COPY, run->plan);
    const char *read = "the kernel rounding the weights itself";
    failed += check_bitwise(run->name, "dst (weights' bf16 copy given)", read, bf16.dst,
                            copy.dst, z.dst) +
              check_bitwise(run->name, "diff_src (weights' bf16 copy given)", read,
                            bf16.diff_src, copy.diff_src, z.src) +
              check_bitwise(run->name, "diff_weights (weights' bf16 copy given)", read, bf16.dw,
                            copy.dw, z.w) +
              check_bitwise(run->name, "diff_bias (weights' bf16 copy given)", read, bf16.db,
                            copy.db, z.bias);
    tensors_free(&copy);

    if (be == ref) { /* the oracle: fp32 on operands rounded beforehand, bitwise */
        bf_tensors pre = tensors_new(&z);
        tensors_map(&pre, &in, &z, f_bf16);
        memcpy(pre.bias, in.bias, z.bias * sizeof *pre.bias); /* the bias is not rounded */
        run_passes(ref, ST_PRECISION_FP32, c, &pre);
        const char *why = "the fp32 kernel on the pass's operands rounded to bf16";
        failed += check_bitwise(run->name, "dst", why, pre.dst, bf16.dst, z.dst) +
                  check_bitwise(run->name, "diff_src", why, pre.diff_src, bf16.diff_src, z.src) +
                  check_bitwise(run->name, "diff_weights", why, pre.dw, bf16.dw, z.w);
        /* the bias gradient sums diff_dst unrounded: pre's rounded it */
        tensors_free(&pre);
    }
    tensors_free(&in);
    tensors_free(&fp32);
    tensors_free(&bf16);
    tensors_free(&mag);
    if (failed)
        fail_msg("%s: %ld check(s) failed (see above)", run->name, failed);
}

/* ---- activations kept in bf16 between kernels (st_kdesc.dst_bf16) ----
 *
 * A convolution with relu P, a 3x3 / 2 max pooling M (windows over the
 * border) and an inner product C, as a network of them runs: forward P, M,
 * C; backward C, M, P's activation (an ST_K_ACT kernel on P's output), P.
 * Once with P's and M's outputs kept in bf16 (each consumer given the
 * producer's dst_layout), once all f32 and plain with P's output rounded
 * by hand between P and M. Every consumer rounds its input to bf16 itself
 * (C's and P's arithmetic, above) or passes values through (M), so both
 * give the same values: C's output and every weight and bias gradient
 * (P's input is the network's: no gradient), compared with == (a relu's
 * zero gradient may be +0 on one side and -0 on the other). A backend
 * that stores the activations as bf16 says so (st_kernel.dst_bf16); one
 * that keeps them as floats (the reference) holds them rounded. */
typedef struct chain_case {
    const char *name;
    int n, ic, hw, oc, out;
} chain_case;

static const chain_case chain_cases[] = {
    {"chain_oc16", 3, 5, 10, 16, 7},
    {"chain_oc20", 2, 3, 9, 20, 10}, /* channel blocks with a tail */
};

typedef struct chain_run {
    const chain_case *c;
    const st_backend *be;
    char name[96];
} chain_run;

/* The tensors of one run: inputs (filled once, copied) and outputs. */
typedef struct chain_tensors {
    float *x, *wp, *bp, *wc, *bc, *dy;           /* in */
    float *p, *m, *y, *dm, *dp, *dwp, *dbp, *dwc, *dbc; /* out and between */
} chain_tensors;

typedef struct chain_kernels {
    st_kernel *p, *act, *m, *c;
} chain_kernels;

/* P, its activation, M and C for run case c, activations kept in bf16
 * (keep) or all plain f32. */
static void chain_create(const st_backend *be, st_bctx *ctx, const chain_case *c, int keep,
                         const int *sizes, chain_kernels *k)
{
    st_error err = {0};
    int hw2 = (c->hw + 2 - 3) / 2 + 1;
    st_kdesc base = {.backward = 1, .src_grad = 1, .n = c->n, .batch_sizes = sizes,
                     .n_batch_sizes = 1};
    st_conv_desc pd = {.base = base, .ic = c->ic, .ih = c->hw, .iw = c->hw, .oc = c->oc,
                       .oh = c->hw, .ow = c->hw, .kh = 3, .kw = 3, .sh = 1, .sw = 1, .ph = 1,
                       .pw = 1, .groups = 1, .bias = 1, .act = ST_ACT_RELU};
    pd.base.kind = ST_K_CONV;
    pd.base.name = "chain.p";
    pd.base.src_grad = 0; /* the network's input */
    pd.base.dst_plain = !keep;
    pd.base.dst_bf16 = keep;
    if (be->kernel_create(ctx, &pd.base, &k->p, &err) != ST_OK)
        fail_msg("%s: P: %s", be->name, err.msg);
    st_act_desc ad = {.base = base, .count = (size_t)c->oc * c->hw * c->hw, .act = ST_ACT_RELU};
    ad.base.kind = ST_K_ACT;
    ad.base.name = "chain.act";
    ad.base.src_layout = k->p->dst_layout;
    if (be->kernel_create(ctx, &ad.base, &k->act, &err) != ST_OK)
        fail_msg("%s: P's activation: %s", be->name, err.msg);
    st_pool_desc md = {.base = base, .alg = ST_POOL_MAX, .c = c->oc, .ih = c->hw, .iw = c->hw,
                       .oh = hw2, .ow = hw2, .kh = 3, .kw = 3, .sh = 2, .sw = 2, .ph = 1,
                       .pw = 1};
    md.base.kind = ST_K_POOL;
    md.base.name = "chain.m";
    md.base.src_layout = k->p->dst_layout;
    md.base.dst_plain = !keep;
    md.base.dst_bf16 = keep;
    if (be->kernel_create(ctx, &md.base, &k->m, &err) != ST_OK)
        fail_msg("%s: M: %s", be->name, err.msg);
    st_fc_desc cd = {.base = base, .in = c->oc * hw2 * hw2, .out = c->out, .bias = 1,
                     .act = ST_ACT_LINEAR};
    cd.base.kind = ST_K_FC;
    cd.base.name = "chain.c";
    cd.base.src_layout = k->m->dst_layout;
    cd.base.dst_plain = 1;
    if (be->kernel_create(ctx, &cd.base, &k->c, &err) != ST_OK)
        fail_msg("%s: C: %s", be->name, err.msg);
}

static void chain_pass(const char *what, st_kernel *k,
                       st_status (*pass)(st_kernel *, const st_kargs *, st_error *),
                       st_kargs *a)
{
    st_error err = {0};
    if (pass(k, a, &err) != ST_OK)
        fail_msg("%s: %s", what, err.msg);
}

/* One run of case c on backend be in bf16, t's inputs to its outputs. */
static void chain_run_once(const st_backend *be, const chain_case *c, int keep,
                           chain_tensors *t, chain_kernels *k)
{
    st_error err = {0};
    int sizes[1] = {c->n};
    st_backend_opts o = {.intra_threads = 1, .precision = ST_PRECISION_BF16};
    st_bctx *ctx = NULL;
    if (be->ctx_create(&o, &ctx, &err) != ST_OK)
        fail_msg("%s: %s", be->name, err.msg);
    chain_create(be, ctx, c, keep, sizes, k);
    st_kernel *all[] = {k->p, k->act, k->m, k->c};
    void *ws[4], *scratch[4];
    for (int i = 0; i < 4; i++) {
        ws[i] = bf_alloc(all[i]->workspace_bytes / sizeof(float) + 16);
        scratch[i] = bf_alloc(all[i]->scratch_bytes / sizeof(float) + 16);
    }
    size_t p_values = (size_t)c->n * c->oc * c->hw * c->hw;
    st_kargs a = {.n = c->n, .training = 1};
    /* forward: P, (by hand) M, C */
    st_kargs pa = a;
    pa.src = t->x, pa.dst = t->p, pa.weights = t->wp, pa.bias = t->bp;
    pa.workspace = ws[0], pa.scratch = scratch[0];
    chain_pass("P forward", k->p, k->p->ops->forward, &pa);
    if (!keep)
        st_bf16_round(t->p, t->p, p_values);
    st_kargs ma = a;
    ma.src = t->p, ma.dst = t->m, ma.workspace = ws[2], ma.scratch = scratch[2];
    chain_pass("M forward", k->m, k->m->ops->forward, &ma);
    st_kargs ca = a;
    ca.src = t->m, ca.dst = t->y, ca.weights = t->wc, ca.bias = t->bc;
    ca.workspace = ws[3], ca.scratch = scratch[3];
    chain_pass("C forward", k->c, k->c->ops->forward, &ca);
    /* backward: C, M, P's activation, P */
    ca.diff_dst = t->dy, ca.diff_weights = t->dwc, ca.diff_bias = t->dbc;
    chain_pass("C backward-weights", k->c, k->c->ops->backward_weights, &ca);
    ca.diff_src = t->dm;
    chain_pass("C backward-data", k->c, k->c->ops->backward_data, &ca);
    ma.diff_dst = t->dm, ma.diff_src = t->dp;
    chain_pass("M backward", k->m, k->m->ops->backward_data, &ma);
    st_kargs aa = a;
    aa.dst = t->p, aa.diff_dst = t->dp, aa.diff_src = t->dp;
    aa.workspace = ws[1], aa.scratch = scratch[1];
    chain_pass("P's activation backward", k->act, k->act->ops->backward_data, &aa);
    pa.diff_dst = t->dp, pa.diff_weights = t->dwp, pa.diff_bias = t->dbp;
    chain_pass("P backward-weights", k->p, k->p->ops->backward_weights, &pa);
    for (int i = 0; i < 4; i++) {
        st_free_aligned(ws[i]);
        st_free_aligned(scratch[i]);
    }
    be->ctx_destroy(ctx);
}

static void chain_free_kernels(chain_kernels *k)
{
    st_kernel *all[] = {k->p, k->act, k->m, k->c};
    for (int i = 0; i < 4; i++)
        all[i]->ops->destroy(all[i]);
}

static long check_equal(const char *name, const char *what, const float *want,
                        const float *got, size_t count)
{
    for (size_t i = 0; i < count; i++)
        if (!(want[i] == got[i])) {
            print_error("%s: %s[%zu]: %.9g with bf16 activations, %.9g with f32 ones rounded "
                        "by hand\n", name, what, i, got[i], want[i]);
            return 1;
        }
    return 0;
}

static void chain_case_run(void **state)
{
    const chain_run *run = *state;
    const chain_case *c = run->c;
    int hw2 = (c->hw + 2 - 3) / 2 + 1;
    size_t nx = (size_t)c->n * c->ic * c->hw * c->hw, np = (size_t)c->n * c->oc * c->hw * c->hw,
           nm = (size_t)c->n * c->oc * hw2 * hw2, wp = (size_t)c->oc * c->ic * 9,
           wc = (size_t)c->out * c->oc * hw2 * hw2, ny = (size_t)c->n * c->out;
    chain_tensors t[2];
    st_rng rng;
    st_rng_seed(&rng, 41, 1);
    for (int r = 0; r < 2; r++) {
        /* the activations' buffers hold f32 in either run */
        chain_tensors *u = &t[r];
        *u = (chain_tensors){bf_alloc(nx), bf_alloc(wp), bf_alloc(c->oc), bf_alloc(wc),
                             bf_alloc(c->out), bf_alloc(ny), bf_alloc(np), bf_alloc(nm),
                             bf_alloc(ny), bf_alloc(nm), bf_alloc(np), bf_alloc(wp),
                             bf_alloc(c->oc), bf_alloc(wc), bf_alloc(c->out)};
    }
    float *in[] = {t[0].x, t[0].wp, t[0].bp, t[0].wc, t[0].bc, t[0].dy};
    float *in1[] = {t[1].x, t[1].wp, t[1].bp, t[1].wc, t[1].bc, t[1].dy};
    size_t count[] = {nx, wp, (size_t)c->oc, wc, (size_t)c->out, ny};
    for (int k = 0; k < 6; k++) {
        for (size_t i = 0; i < count[k]; i++)
            in[k][i] = 2.0f * st_rng_uniform(&rng) - 1.0f;
        memcpy(in1[k], in[k], count[k] * sizeof(float));
    }
    chain_kernels kept, plain;
    chain_run_once(run->be, c, 1, &t[0], &kept);
    chain_run_once(run->be, c, 0, &t[1], &plain);
    long failed = check_equal(run->name, "C's dst", t[1].y, t[0].y, ny) +
                  check_equal(run->name, "C's diff_weights", t[1].dwc, t[0].dwc, wc) +
                  check_equal(run->name, "C's diff_bias", t[1].dbc, t[0].dbc, (size_t)c->out) +
                  check_equal(run->name, "P's diff_weights", t[1].dwp, t[0].dwp, wp) +
                  check_equal(run->name, "P's diff_bias", t[1].dbp, t[0].dbp, (size_t)c->oc);
    if (kept.p->dst_bf16 != kept.m->dst_bf16) {
        failed++;
        print_error("%s: P stores its output as %s, M as %s\n", run->name,
                    kept.p->dst_bf16 ? "bf16" : "floats", kept.m->dst_bf16 ? "bf16" : "floats");
    }
    if (!kept.p->dst_bf16) /* kept as floats: rounded, P's and M's values as by hand */
        failed += check_equal(run->name, "P's dst (floats)", t[1].p, t[0].p, np) +
                  check_equal(run->name, "M's dst (floats)", t[1].m, t[0].m, nm);
    print_message("%-24s P's and M's outputs %s\n", run->name,
                  kept.p->dst_bf16 ? "stored as bf16" : "kept as floats rounded to bf16");
    chain_free_kernels(&kept);
    chain_free_kernels(&plain);
    for (int r = 0; r < 2; r++) {
        float **p = &t[r].x;
        for (size_t i = 0; i < sizeof t[r] / sizeof(float *); i++)
            st_free_aligned(p[i]);
    }
    if (failed)
        fail_msg("%s: %ld check(s) failed (see above)", run->name, failed);
}

/* ---- which outputs a network keeps in bf16 (net/replica.c's plan) ----
 *
 * Small networks whose kept outputs are worked out by hand from the rule
 * (layer.h's ST_BF16_*): kept when the layer gives it rounded (a
 * convolution or inner product without batch norm, activation linear,
 * relu or leaky; a max pooling of kept values), every reader takes it so
 * (a convolution or inner product; a max pooling whose output is kept) and
 * it is not the class scores' or shared by a route of one input. The
 * reference backend keeps them as floats (ST_OUT_BF16_ROUNDED); in fp32
 * none is. */
#define PLAN_NET "[net]\nbatch=4\nheight=8\nwidth=8\nchannels=2\n"
#define PLAN_CONV(act) "[convolutional]\nfilters=4\nsize=3\npad=1\nactivation=" act "\n"
#define PLAN_MAX "[maxpool]\nsize=2\nstride=2\n"
#define PLAN_FC(act) "[connected]\noutput=5\nactivation=" act "\n"
#define PLAN_END "[softmax]\n"

typedef struct plan_case {
    const char *name, *cfg;
    const char *kept; /* per layer, '1' kept, '0' not */
} plan_case;

static const plan_case plan_cases[] = {
    {"lenet_like", PLAN_NET PLAN_CONV("relu") PLAN_MAX PLAN_CONV("linear") PLAN_MAX
                       PLAN_FC("relu") PLAN_FC("linear") PLAN_END, "1111100"},
    /* the pooling's reader, dropout, computes in fp32: neither is kept */
    {"pool_then_dropout", PLAN_NET PLAN_CONV("relu") PLAN_MAX "[dropout]\n" PLAN_FC("linear")
                              PLAN_END, "00000"},
    /* a logistic's derivative reads its value: not kept, nor the pooling
     * of it; the relu convolution after them is */
    {"logistic_first", PLAN_NET PLAN_CONV("logistic") PLAN_MAX PLAN_CONV("relu")
                           PLAN_FC("linear") PLAN_END, "00100"},
    /* batch norm computes its statistics from the value */
    {"batch_norm", PLAN_NET "[convolutional]\nfilters=4\nsize=3\npad=1\nbatch_normalize=1\n"
                   "activation=relu\n" PLAN_CONV("leaky") PLAN_FC("linear") PLAN_END, "0100"},
    /* a route of one layer shares its input's output (not kept), a route
     * of two copies in fp32 */
    {"routes", PLAN_NET PLAN_CONV("relu") PLAN_CONV("relu") "[route]\nlayers=0\n"
                   PLAN_CONV("relu") "[route]\nlayers=1,3\n" PLAN_FC("linear") PLAN_END,
     "0000000"},
};

static void plan_case_run(void **state)
{
    const plan_case *c = *state;
    st_cfg cfg;
    st_hparams hp;
    st_net net;
    st_error err = {0};
    const st_backend *ref;
    assert_int_equal(st_backend_find("ref", &ref, &err), ST_OK);
    if (tl_build("plan.cfg", c->cfg, &cfg, &hp, &net, &err) != ST_OK)
        fail_msg("%s: %s", c->name, err.msg);
    assert_int_equal((int)strlen(c->kept), net.n_layers);
    for (int p = 0; p < ST_PRECISION_COUNT; p++) {
        st_replica r;
        st_replica_opts o = {.n = 2, .training = 1,
                             .backend = {.intra_threads = 1, .precision = (st_precision)p}};
        if (st_replica_init(&r, &net, ref, &o, &err) != ST_OK)
            fail_msg("%s: %s", c->name, err.msg);
        for (int i = 0; i < net.n_layers; i++) {
            int want = p == ST_PRECISION_BF16 && c->kept[i] == '1' ? ST_OUT_BF16_ROUNDED : 0;
            if (r.out_bf16[i] != want)
                fail_msg("%s, %s: layer %d's output: out_bf16 %d, expected %d", c->name,
                         st_precision_names[p], i, r.out_bf16[i], want);
        }
        st_replica_free(&r);
    }
    st_net_free(&net);
    st_cfg_free(&cfg);
}

/* --precision bf16 is a capability: a backend that has no hook computes
 * in fp32 only, and every backend accepts fp32. */
static void fp32_everywhere(void **state)
{
    (void)state;
    char list[256], why[320];
    st_error err = {0};
    st_backend_list(list, sizeof list, 1, ", ");
    for (char *name = strtok(list, ", "); name; name = strtok(NULL, ", ")) {
        const st_backend *be;
        assert_int_equal(st_backend_find(name, &be, &err), ST_OK);
        if (be->precision_supported)
            assert_true(be->precision_supported(ST_PRECISION_FP32, why, sizeof why));
    }
    const st_backend *ref;
    assert_int_equal(st_backend_find("ref", &ref, &err), ST_OK);
    assert_non_null(ref->precision_supported);
    assert_true(ref->precision_supported(ST_PRECISION_BF16, why, sizeof why));
}

int main(void)
{
    enum { N_CHAIN = (int)(sizeof chain_cases / sizeof chain_cases[0]) };
    static bf_run runs[N_CASES * 8];
    static chain_run chains[N_CHAIN * 8];
    enum { N_PLAN = (int)(sizeof plan_cases / sizeof plan_cases[0]) };
    static struct CMUnitTest tests[5 + N_PLAN + (N_CASES + N_CHAIN) * 8];
    size_t n_tests = 0;
    for (int i = 0; i < N_PLAN; i++)
        tests[n_tests++] = (struct CMUnitTest){plan_cases[i].name, plan_case_run, NULL, NULL,
                                               (void *)&plan_cases[i]};
    tests[n_tests++] = (struct CMUnitTest)cmocka_unit_test(round_nearest_even);
    tests[n_tests++] = (struct CMUnitTest)cmocka_unit_test(round_special);
    tests[n_tests++] = (struct CMUnitTest)cmocka_unit_test(round_denormals);
    tests[n_tests++] = (struct CMUnitTest)cmocka_unit_test(round_array);
    tests[n_tests++] = (struct CMUnitTest)cmocka_unit_test(fp32_everywhere);
    /* every backend built in that declares bf16, each case */
    char list[256], why[320];
    st_error err = {0};
    st_backend_list(list, sizeof list, 1, ", ");
    int n_runs = 0, n_chains = 0;
    for (char *name = strtok(list, ", "); name; name = strtok(NULL, ", ")) {
        const st_backend *be;
        if (st_backend_find(name, &be, &err) != ST_OK) {
            fprintf(stderr, "backend %s, listed by the registry: %s\n", name, err.msg);
            return 1;
        }
        if (!be->precision_supported ||
            !be->precision_supported(ST_PRECISION_BF16, why, sizeof why)) {
            print_message("SKIP: backend %s's bf16 cases: it %s\n", name,
                          be->precision_supported ? why : "computes in fp32 only");
            continue;
        }
        for (int i = 0; i < N_CASES && n_runs < N_CASES * 8; i++) {
            bf_run *r = &runs[n_runs++];
            r->c = &cases[i];
            r->be = be;
            snprintf(r->name, sizeof r->name, "%s/%s", name, cases[i].name);
            tests[n_tests++] = (struct CMUnitTest){r->name, run_case, NULL, NULL, r};
        }
        /* the dnnl backend's other weight gradients, which its
         * measurement picks where they are faster, forced: a
         * convolution's as im2col + matmul (dnnl_conv_matmul.c) on every
         * convolution it takes (no groups), 2 samples a matmul, so that
         * the cases of 3 and 4 samples sum several matmuls; an inner
         * product's as fp32's sgemm on the widened operands (dnnl_fc.c) */
        for (int i = 0; be->conv_impls && i < N_CASES && n_runs < N_CASES * 8; i++) {
            int fc = cases[i].d.base.kind == ST_K_FC;
            if (!fc && cases[i].d.conv.groups != 1)
                continue;
            bf_run *r = &runs[n_runs++];
            r->c = &cases[i];
            r->be = be;
            r->plan = fc ? "sgemm" : "nhwc - - im2col+matmul/2";
            snprintf(r->name, sizeof r->name, "%s/%s [%s]", name, cases[i].name, r->plan);
            tests[n_tests++] = (struct CMUnitTest){r->name, run_case, NULL, NULL, r};
        }
        for (int i = 0; i < N_CHAIN && n_chains < N_CHAIN * 8; i++) {
            chain_run *r = &chains[n_chains++];
            r->c = &chain_cases[i];
            r->be = be;
            snprintf(r->name, sizeof r->name, "%s/%s", name, chain_cases[i].name);
            tests[n_tests++] = (struct CMUnitTest){r->name, chain_case_run, NULL, NULL, r};
        }
    }
    return _cmocka_run_group_tests("bf16", tests, n_tests, NULL, NULL);
}
