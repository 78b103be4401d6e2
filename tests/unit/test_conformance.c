/* Backend conformance: every backend the registry has (st_backend_list)
 * against the reference backend, the oracle, on one table of cases, as
 * ggml's test-backend-ops runs every backend's ops against its CPU backend.
 * The reference backend is also run against itself, as a sanity check of
 * the harness and of its determinism: there every value must be bitwise
 * equal.
 *
 * Cases (the table `cases` below, one row each) are of two sorts:
 *   - a network: cfg text, built into two training replicas, one per
 *     backend (st_replica_init with input_delta = 1 and one intra-op
 *     thread), run forward and backward as training runs them;
 *   - a kernel: one kernel descriptor (ops/kdesc.h), created on both
 *     backends with plain input and output, run through every entry point
 *     the kernel has (forward in training and inference, backward-data
 *     overwriting and accumulating, backward-weights), each on fresh
 *     buffers: what the kernel interface promises (backend.h), including
 *     what no layer asks of it today.
 * Each row gives its batch sizes (cases with two declare both at set-up,
 * batch_sizes, and run the larger, then the smaller on the same replicas or
 * kernels), its tolerance and the reason for it. A row runs once per
 * backend, as one cmocka test named "<backend>/<case>"; where a backend has
 * several convolution implementations (st_backend.conv_impls, a capability,
 * not a name), a case with a convolution runs once with each, then with
 * "auto" (measured). A row that asks for something a backend lacks (kernel
 * choices need conv_impls) is skipped on it with the reason printed.
 *
 * Coverage (the test `coverage`, which runs whatever the filter): every
 * layer type the cfg reader accepts (st_layer_type_list) is a layer of at
 * least one network case, and every kernel kind (0 .. ST_K_COUNT - 1) is
 * made by at least one case: a kernel row of that kind, or a network whose
 * reference replica creates one (seen through a copy of the reference
 * backend whose kernel_create records the kinds). A new type or kind
 * without a case fails here, as does a type the exporters cannot handle:
 * one with neither what they write (st_layer_ops.graph) nor why they
 * cannot (no_graph), or whose layers register tensors (in some case's
 * network) and whose ops give them no place in Darknet's .weights
 * (darknet). The test `foreign_layouts`: each case that
 * exists to feed a layer's output in a layout of a backend's own to the
 * next layer (its foreign bits) still does so on at least one backend
 * (planned, st_replica_plan, with the default implementation), so that it
 * has not lost its purpose.
 *
 * Filter: ST_TEST_FILTER ("make test T=conformance/PATTERN", tests/README.md)
 * runs only the cases whose "<backend>/<case>" names match PATTERN, a shell
 * pattern matched anywhere in the name (so "cpe/" is one backend's cases,
 * "maxpool" every case naming maxpool); a pattern that matches nothing
 * fails.
 *
 * Compared, for a network: the output of every layer whose output is plain
 * NCHW on the backend under test (r->out_layout[i] == NULL: always the last
 * layer and the class scores; an intermediate output in the backend's own
 * layout, oneDNN's blocked ones or the cpe backend's batch-innermost ones,
 * is checked through what it feeds) as forward left it, the loss, the
 * input gradient, every parameter gradient range (ST_PARAM_WEIGHT:
 * weights; ST_PARAM_BIAS: biases and batch-norm scales) and the batch
 * statistics batch norm's backward leaves in the ST_PARAM_STAT slots (n x
 * batch mean, n x unbiased batch variance). Also, on both replicas:
 * backward leaves every layer's output buffer and the input untouched (a
 * kernel that writes past its gradient buffer lands in a neighbouring
 * arena view, often a later layer's output). For a kernel: dst, the batch
 * statistics (batch norm), diff_src, diff_weights and diff_bias; that it
 * reports plain dst of the plain size; that it changes neither src nor,
 * backward, dst or diff_dst (unless the row runs in place). Every result
 * buffer holds NaN before the call that must write it (the gradient arenas,
 * the input gradient, dst, diff_src ...), so a value a backend never writes
 * fails.
 *
 * Tolerance. Per tensor, metric = max_i |got_i - ref_i| / max(max_i |ref_i|,
 * CF_TINY): the largest difference relative to the tensor's largest
 * magnitude (a per-element relative error is meaningless for values that
 * cancel to ~0, e.g. gradients that are sums of terms of both signs). Each
 * row's tolerance holds for every tensor it compares; most rows take
 * TOL_SUMS = 1e-4: float32 sums in different orders (oneDNN: blocked,
 * vectorized, FMA; the cpe backend: the emulated CPEs' GEMM blocking; ref:
 * im2col + GEMM, batch norm in double) differ by ~1e-7 relative per value
 * and grow slowly with the reduction length; oneDNN's vectorized exp / tanh
 * / pow are accurate to a few ulp. Measured (oneDNN 2.6.3, on an EPYC
 * without AVX-512; the test prints the largest metric per backend, type and
 * tensor kind at the end): oneDNN at most 2.3e-6 (the bias gradient of
 * conv_batchnorm_conv's batch norm; 1.4e-6, the weight gradient of
 * conv_long_reductions, 1920-term sums), the cpe backend at most 8.7e-7,
 * ~1e-7..1e-6 elsewhere; maxpool, avgpool and most bias gradients are
 * bit-identical. So no row needs more than 1e-4, a margin of ~40x,
 * while the bugs this exists to catch (a wrong index, a missing term, a
 * wrong layout, an overwrite instead of an accumulation) give 1e-2 or more.
 * Kernel rows without reductions (activations) take TOL_ELTWISE = 1e-5.
 * The one ill-conditioned quantity is batch norm over very few values (see
 * the [connected] batch-norm cases): there the cases use enough samples,
 * rather than the tolerance growing. A compared tensor whose reference
 * values are all below CF_MIN_SCALE is a test-design error (a zero result
 * could not be told from a right one).
 *
 * Inputs avoid test-design mismatches: no [maxpool] reads a relu output
 * (ties at 0 may be broken differently), and a relu / leaky pre-activation
 * within rounding of 0 is improbable with these seeds (it would show as a
 * gradient mismatch on a few values only). Dropout masks are drawn per
 * element position of the layer's input layout, so after a layer whose
 * output is in the backend's own layout the masks legitimately differ;
 * there (mask mode) the test checks each replica by itself instead: every
 * value is either dropped (0) or scaled by 1 / (1 - p), about p of them
 * are dropped, and the gradient follows the same mask.
 *
 * The cpe backend emulates 64 cores: its cases are the same small shapes
 * (batch 1 to 6, a few channels; all of its cases take about 0.7 s, 2.5 s
 * under AddressSanitizer), where its convolutions run the explicit scheme;
 * swDNN's implicit one needs batch 128 and many channels, which one case
 * gives it on 2x2 images (conv_128to64_batch128_twice; the kernel is also
 * tested against the truth in test_cpe_conv, and the backend end to end in
 * e2e/test_cpe_backend.sh). It is never put in cost-only mode here.
 *
 * CF_VERBOSE=1 in the environment prints, per network case and backend,
 * each layer's output layout and size. What only oneDNN does (its lazily
 * generated code, under an address-space limit) is in test_dnnl.c. */
#include <math.h>
#include <stdlib.h>
#include <time.h>

#include "testlib.h"

#include "backends/backend.h"
#include "backends/choices.h"
#include "base/memory.h"
#include "base/rng.h"
#include "layers/layer.h"
#include "ops/kdesc.h"
#include "ops/params.h"

#define CF_TINY 1e-6      /* floor of the denominator; every compared tensor is far larger */
#define CF_MIN_SCALE 1e-3 /* a compared tensor smaller than this is a test-design bug */
#define CF_MAX_PRINT 8
#define CF_MAX_BACKENDS 8
#define CF_MAX_TYPES 32

/* ---- the cases' vocabulary ---- */

typedef struct cf_tol {
    double tol;
    const char *why;
} cf_tol;

#define TOL_SUMS                                                                            \
    {1e-4, "float32 sums in another order: ~1e-7 relative per value, growing slowly with "  \
           "the reduction length (measured at most 2.3e-6)"}
#define TOL_ELTWISE                                                                         \
    {1e-5, "elementwise, no reduction: vectorized exp / tanh within a few ulp"}

enum {
    CF_NO_INPUT_DELTA = 1, /* network: replicas without the input gradient */
    CF_IN_PLACE = 2,       /* kernel (act): forward src == dst, backward diff_src == diff_dst */
    CF_TWICE = 4,          /* network: the first batch size twice, on the same replicas */
};

/* A kernel row's descriptor, any kind. */
typedef st_kdesc_any cf_kdesc;

typedef struct cf_case {
    const char *name;
    const char *type; /* network: the layer type under test; kernel: NULL (its kind) */
    int n;            /* samples of the first run (the largest batch size) */
    int n_small;      /* > 0: a second declared batch size, also run */
    unsigned foreign; /* network: bit i: the case exists to feed layer i's output in a
                       * layout of a backend's own to the next layer (foreign_layouts) */
    int flags;
    cf_tol tol;
    const char *cfg;     /* a network case's cfg text; NULL: a kernel case (k) */
    const char *choices; /* network: kernel choices (choices.h text) for the backend
                          * under test, each convolution its own; needs conv_impls */
    cf_kdesc k;
} cf_case;

#define NET(h, w, c) "[net]\nbatch=3\nheight=" #h "\nwidth=" #w "\nchannels=" #c "\n"

/* A network case: name, layer type under test, batch sizes, foreign-layout
 * bits, flags, tolerance, cfg. */
#define CASE(fn, type_, n_, small_, foreign_, flags_, tol_, cfg_)                           \
    {.name = #fn, .type = type_, .n = n_, .n_small = small_, .foreign = foreign_,            \
     .flags = flags_, .tol = tol_, .cfg = cfg_},
/* A network case whose convolutions take the given kernel choices. */
#define CHOICES(fn, n_, small_, tol_, cfg_, choices_)                                       \
    {.name = #fn, .type = "convolutional", .n = n_, .n_small = small_, .tol = tol_,         \
     .cfg = cfg_, .choices = choices_},
/* A kernel case: name, batch sizes, flags, tolerance, the descriptor as
 * .member = {...} of cf_kdesc (its base.kind and shape). */
#define KCASE(fn, n_, small_, flags_, tol_, ...)                                            \
    {.name = #fn, .n = n_, .n_small = small_, .flags = flags_, .tol = tol_,                  \
     .k = {__VA_ARGS__}},

/* ---- the cases ---- */

#define CONV0_13 "[convolutional]\nfilters=13\nsize=3\npad=1\nactivation=tanh\n"
#define CONV0_LIN "[convolutional]\nfilters=13\nsize=3\npad=1\nactivation=linear\n"
#define CONV_ACT(a) NET(6, 5, 3) "[convolutional]\nfilters=16\nsize=3\npad=1\nactivation=" a "\n"
#define FC_ACT(a) NET(3, 5, 2) "[connected]\noutput=7\nactivation=" a "\n"
/* The layouts meet at the second convolution's input (a reorder there, and
 * of its input gradient back); 20 channels: padded to 32 when blocked. The
 * keys are oneDNN's (dnnl_conv.c's choice_key): a backend with other keys
 * fails the "test design" check, loudly. */
#define MIXED_NET                                                                          \
    NET(8, 8, 3) "[convolutional]\nfilters=20\nsize=3\npad=1\nactivation=leaky\n"           \
                 "[maxpool]\nsize=2\nstride=2\n"                                           \
                 "[convolutional]\nfilters=8\nsize=3\npad=1\nactivation=tanh\n"           \
                 "[connected]\noutput=5\nactivation=linear\n"
#define MIXED_KEY0 "0.conv n3 3x8x8>20x8x8 k3x3 s1x1 p1x1 g1 fwd+bwd = "
#define MIXED_KEY2 "\n2.conv n3 20x4x4>8x4x4 k3x3 s1x1 p1x1 g1 fwd+bwd = "
#define POOL_ON_CONV_NET                                                                   \
    NET(8, 7, 3) CONV0_LIN "[maxpool]\nsize=3\nstride=2\npadding=3\n"                     \
                           "[connected]\noutput=5\nactivation=linear\n"
#define POOL_ON_CONV_KEY "0.conv n3 3x8x7>13x8x7 k3x3 s1x1 p1x1 g1 fwd+bwd = "
#define TWO_CONVS                                                                             \
    "[convolutional]\nfilters=13\nsize=3\npad=1\nactivation=tanh\n"                           \
    "[convolutional]\nfilters=13\nsize=3\npad=1\nactivation=linear\n"
/* Fan-out: conv 0's output feeds layer 1 (a backend kernel) and the route,
 * so conv 0 emits plain output that a kernel also reads, and layer 1's
 * backward_data adds to conv 0's gradient (the route's ran first). Layer
 * 1's own output must be plain too (the route reads it); with batch norm
 * and 13 channels oneDNN's internal gradient is blocked and padded, as in
 * conv_bn_relu, and the route's output follows its gradient in the arena. */
#define FANOUT(x) NET(7, 5, 3) CONV0_13 x "[route]\nlayers=-1,-2\n"
#define KBASE(kind_, name_) .base = {.kind = kind_, .name = name_}

static const cf_case cases[] = {
    /* ---- [convolutional] on the network input (plain) ---- */

    /* 7x5 input, 3 -> 13 channels (13: blocked layouts pad it to 16) */
    CASE(conv_odd_3to13_pad1, "convolutional", 3, 2, 0, 0, TOL_SUMS,
         NET(7, 5, 3) "[convolutional]\nfilters=13\nsize=3\npad=1\nactivation=linear\n")
    /* 13 -> 3 channels, stride 2, explicit padding=2 */
    CASE(conv_13to3_stride2_padding2, "convolutional", 3, 0, 0, 0, TOL_SUMS,
         NET(7, 5, 13) "[convolutional]\nfilters=3\nsize=3\nstride=2\npadding=2\n"
                       "activation=leaky\n")
    /* stride 2 without padding on width 6: the last column is in no window
     * (oneDNN's right padding is -1) */
    CASE(conv_stride2_nopad_uncovered, "convolutional", 2, 0, 0, 0, TOL_SUMS,
         NET(7, 6, 4) "[convolutional]\nfilters=5\nsize=3\nstride=2\nactivation=tanh\n")
    CASE(conv_groups2, "convolutional", 3, 0, 0, 0, TOL_SUMS,
         NET(5, 7, 6) "[convolutional]\nfilters=10\nsize=3\npad=1\ngroups=2\n"
                      "activation=tanh\n")
    CASE(conv_depthwise_stride2, "convolutional", 3, 0, 0, 0, TOL_SUMS,
         NET(7, 5, 13) "[convolutional]\nfilters=13\nsize=3\nstride=2\npad=1\ngroups=13\n"
                       "activation=logistic\n")
    CASE(conv_1x1, "convolutional", 3, 1, 0, 0, TOL_SUMS,
         NET(7, 5, 13) "[convolutional]\nfilters=16\nsize=1\nactivation=leaky\n")
    /* 1x1 stride 2 on 7x6: right padding -1 again */
    CASE(conv_1x1_stride2, "convolutional", 3, 0, 0, 0, TOL_SUMS,
         NET(7, 6, 13) "[convolutional]\nfilters=5\nsize=1\nstride=2\nactivation=linear\n")
    CASE(conv_5x5_pad1, "convolutional", 2, 0, 0, 0, TOL_SUMS,
         NET(9, 7, 3) "[convolutional]\nfilters=8\nsize=5\npadding=1\nactivation=tanh\n")
    CASE(conv_5x5_stride3_pad, "convolutional", 2, 0, 0, 0, TOL_SUMS,
         NET(8, 9, 5) "[convolutional]\nfilters=17\nsize=5\nstride=3\npad=1\n"
                      "activation=logistic\n")
    CASE(conv_batch1, "convolutional", 1, 0, 0, 0, TOL_SUMS,
         NET(7, 5, 3) "[convolutional]\nfilters=13\nsize=3\nstride=2\npad=1\n"
                      "activation=tanh\n")
    /* Longer reductions: the weight gradient sums 4 x 24 x 20 = 1920 products
     * per value, the forward 16 x 9 = 144. */
    CASE(conv_long_reductions, "convolutional", 4, 0, 0, 0, TOL_SUMS,
         NET(24, 20, 16) "[convolutional]\nfilters=32\nsize=3\npad=1\nactivation=leaky\n")
    /* Every activation. */
    CASE(conv_act_linear, "convolutional", 2, 0, 0, 0, TOL_SUMS, CONV_ACT("linear"))
    CASE(conv_act_relu, "convolutional", 2, 0, 0, 0, TOL_SUMS, CONV_ACT("relu"))
    CASE(conv_act_leaky, "convolutional", 2, 0, 0, 0, TOL_SUMS, CONV_ACT("leaky"))
    CASE(conv_act_logistic, "convolutional", 2, 0, 0, 0, TOL_SUMS, CONV_ACT("logistic"))
    CASE(conv_act_tanh, "convolutional", 2, 0, 0, 0, TOL_SUMS, CONV_ACT("tanh"))
    /* batch_normalize=1. The conv's output must be plain (it is the last
     * layer) while batch norm's input, the convolution's output, is in the
     * backend's layout: with 13 or 8 channels oneDNN's 16-channel blocks are
     * padded, so the blocked gradient at batch norm's input is larger than
     * the plain gradient buffer of the layer's output (the 16-channel case
     * has no padding). */
    CASE(conv_bn_relu, "convolutional", 3, 2, 0, 0, TOL_SUMS,
         NET(7, 5, 3) "[convolutional]\nfilters=13\nsize=3\npad=1\nbatch_normalize=1\n"
                      "activation=relu\n")
    CASE(conv_bn_linear, "convolutional", 3, 0, 0, 0, TOL_SUMS,
         NET(6, 5, 4) "[convolutional]\nfilters=16\nsize=3\nstride=2\npad=1\n"
                      "batch_normalize=1\nactivation=linear\n")
    CASE(conv_bn_relu_16ch, "convolutional", 3, 2, 0, 0, TOL_SUMS,
         NET(7, 5, 3) "[convolutional]\nfilters=16\nsize=3\npad=1\nbatch_normalize=1\n"
                      "activation=relu\n")
    CASE(conv_bn_batch1, "convolutional", 1, 0, 0, 0, TOL_SUMS,
         NET(7, 5, 3) "[convolutional]\nfilters=8\nsize=3\npad=1\nbatch_normalize=1\n"
                      "activation=leaky\n")

    /* ---- convolutions in different layouts, one after another (given
     * kernel choices: backends with conv_impls) ---- */

    CHOICES(mixed_blocked_then_nhwc, 3, 2, TOL_SUMS, MIXED_NET,
            MIXED_KEY0 "blocked - - -" MIXED_KEY2 "nhwc - - -")
    CHOICES(mixed_nhwc_then_blocked, 3, 2, TOL_SUMS, MIXED_NET,
            MIXED_KEY0 "nhwc - - -" MIXED_KEY2 "blocked - - -")
    CHOICES(mixed_blocked_then_nchw, 3, 0, TOL_SUMS, MIXED_NET,
            MIXED_KEY0 "blocked - - -" MIXED_KEY2 "nchw - - -")
    CHOICES(mixed_nchw_then_nhwc, 3, 0, TOL_SUMS, MIXED_NET,
            MIXED_KEY0 "nchw - - -" MIXED_KEY2 "nhwc - - -")

    /* ---- [maxpool] on a convolution's layout: the oneDNN backend's own
     * max pooling (13 channels: 3 four-lane steps and a lane left over in
     * nhwc, 3 of 8 lanes padding when blocked; windows past the edge) ---- */

    CHOICES(maxpool_on_nhwc, 3, 2, TOL_SUMS, POOL_ON_CONV_NET, POOL_ON_CONV_KEY "nhwc - - -")
    CHOICES(maxpool_on_blocked, 3, 2, TOL_SUMS, POOL_ON_CONV_NET,
            POOL_ON_CONV_KEY "blocked - - -")
    CHOICES(maxpool_on_nchw, 3, 2, TOL_SUMS, POOL_ON_CONV_NET, POOL_ON_CONV_KEY "nchw - - -")

    /* ---- [convolutional] fed by a convolution (the backend's layout) ---- */

    CASE(conv_on_blocked_stride2, "convolutional", 3, 2, 1u, 0, TOL_SUMS,
         NET(7, 5, 3) CONV0_13
         "[convolutional]\nfilters=7\nsize=3\nstride=2\npad=1\nactivation=leaky\n")
    CASE(conv_on_blocked_groups2, "convolutional", 2, 0, 1u, 0, TOL_SUMS,
         NET(7, 5, 3) "[convolutional]\nfilters=16\nsize=3\npad=1\nactivation=tanh\n"
         "[convolutional]\nfilters=6\nsize=3\npad=1\ngroups=2\nactivation=logistic\n")
    CASE(conv_on_blocked_depthwise, "convolutional", 2, 0, 1u, 0, TOL_SUMS,
         NET(7, 5, 3) CONV0_13
         "[convolutional]\nfilters=13\nsize=3\npad=1\ngroups=13\nactivation=linear\n")
    CASE(conv_on_blocked_1x1_stride2, "convolutional", 3, 0, 1u, 0, TOL_SUMS,
         NET(7, 6, 3) CONV0_13
         "[convolutional]\nfilters=9\nsize=1\nstride=2\nactivation=tanh\n")
    CASE(conv_on_blocked_bn, "convolutional", 3, 1, 1u, 0, TOL_SUMS,
         NET(7, 5, 3) CONV0_13
         "[convolutional]\nfilters=13\nsize=3\npad=1\nbatch_normalize=1\nactivation=relu\n")
    /* a conv with batch norm whose output stays in the backend's layout,
     * feeding a conv */
    CASE(conv_bn_then_conv, "convolutional", 2, 0, 1u, 0, TOL_SUMS,
         NET(7, 5, 3) "[convolutional]\nfilters=13\nsize=3\npad=1\nbatch_normalize=1\n"
                      "activation=leaky\n"
         "[convolutional]\nfilters=5\nsize=3\npad=1\nactivation=linear\n")
    CASE(conv_three_deep, "convolutional", 2, 0, 3u, 0, TOL_SUMS,
         NET(8, 7, 3) CONV0_13
         "[convolutional]\nfilters=16\nsize=3\nstride=2\npad=1\nbatch_normalize=1\n"
         "activation=leaky\n"
         "[convolutional]\nfilters=4\nsize=1\nactivation=logistic\n")

    /* ---- [connected] ---- */

    CASE(connected_act_linear, "connected", 3, 0, 0, 0, TOL_SUMS, FC_ACT("linear"))
    CASE(connected_act_relu, "connected", 3, 0, 0, 0, TOL_SUMS, FC_ACT("relu"))
    CASE(connected_act_leaky, "connected", 3, 0, 0, 0, TOL_SUMS, FC_ACT("leaky"))
    CASE(connected_act_logistic, "connected", 3, 2, 0, 0, TOL_SUMS, FC_ACT("logistic"))
    CASE(connected_act_tanh, "connected", 3, 0, 0, 0, TOL_SUMS, FC_ACT("tanh"))
    CASE(connected_batch1, "connected", 1, 0, 0, 0, TOL_SUMS,
         NET(3, 5, 2) "[connected]\noutput=5\nactivation=tanh\n")
    /* Batch norm after [connected] normalizes over the samples alone (H = W
     * = 1): over m = 2 values its input gradient is analytically ~0 (the
     * normalized pair is +-1 whatever x is; only eps leaves a residue) and
     * what remains is the cancellation of O(1) terms, ill-conditioned for
     * any float comparison (measured 1.4e-4 at m = 2); at m = 1 it is
     * exactly 0. So these cases use 4 to 6 samples. */
    CASE(connected_bn_tanh, "connected", 6, 4, 0, 0, TOL_SUMS,
         NET(2, 3, 3) "[connected]\noutput=6\nbatch_normalize=1\nactivation=tanh\n")
    CASE(connected_bn_relu, "connected", 5, 0, 0, 0, TOL_SUMS,
         NET(3, 1, 3) "[connected]\noutput=5\nbatch_normalize=1\nactivation=relu\n")
    /* after a conv: the input arrives in the backend's layout */
    CASE(conv_then_connected, "connected", 3, 2, 1u, 0, TOL_SUMS,
         NET(7, 5, 3) "[convolutional]\nfilters=13\nsize=3\nstride=2\npad=1\n"
                      "activation=leaky\n"
         "[connected]\noutput=9\nactivation=logistic\n")
    CASE(conv_then_connected_bn, "connected", 5, 0, 1u, 0, TOL_SUMS,
         NET(6, 5, 3) CONV0_13 "[connected]\noutput=6\nbatch_normalize=1\nactivation=leaky\n")
    CASE(connected_then_connected, "connected", 2, 0, 0, 0, TOL_SUMS,
         NET(3, 5, 2) "[connected]\noutput=9\nactivation=tanh\n"
         "[connected]\noutput=4\nactivation=linear\n")

    /* ---- [maxpool] (Darknet: total padding, default size - 1) ---- */

    /* size 2 stride 2 on 7x5: default padding 1 at the bottom/right, the
     * last windows overhang */
    CASE(maxpool_2s2_default, "maxpool", 3, 2, 0, 0, TOL_SUMS,
         NET(7, 5, 3) "[maxpool]\nsize=2\nstride=2\n")
    CASE(maxpool_3s2_default, "maxpool", 2, 0, 0, 0, TOL_SUMS,
         NET(7, 5, 3) "[maxpool]\nsize=3\nstride=2\n")
    /* padding=0: on 7x6 the last column is in no window */
    CASE(maxpool_3s2_pad0, "maxpool", 2, 0, 0, 0, TOL_SUMS,
         NET(7, 6, 3) "[maxpool]\nsize=3\nstride=2\npadding=0\n")
    /* stride 1 (default): out = in */
    CASE(maxpool_2s1, "maxpool", 2, 0, 0, 0, TOL_SUMS, NET(5, 7, 4) "[maxpool]\nsize=2\n")
    /* odd total padding 3: 1 top/left, 2 bottom/right */
    CASE(maxpool_3s2_pad3, "maxpool", 1, 0, 0, 0, TOL_SUMS,
         NET(5, 5, 3) "[maxpool]\nsize=3\nstride=2\npadding=3\n")
    CASE(conv_then_maxpool_2s2, "maxpool", 3, 2, 1u, 0, TOL_SUMS,
         NET(7, 5, 3) CONV0_LIN "[maxpool]\nsize=2\nstride=2\n")
    CASE(conv_then_maxpool_3s2_pad0, "maxpool", 2, 0, 1u, 0, TOL_SUMS,
         NET(7, 6, 3) CONV0_LIN "[maxpool]\nsize=3\nstride=2\npadding=0\n")
    CASE(conv_then_maxpool_3s1, "maxpool", 2, 0, 1u, 0, TOL_SUMS,
         NET(7, 5, 3) CONV0_LIN "[maxpool]\nsize=3\nstride=1\n")

    /* ---- [avgpool] (global) ---- */

    CASE(avgpool_input, "avgpool", 3, 0, 0, 0, TOL_SUMS, NET(5, 3, 7) "[avgpool]\n")
    CASE(conv_then_avgpool, "avgpool", 3, 2, 1u, 0, TOL_SUMS,
         NET(7, 5, 3) CONV0_13 "[avgpool]\n")
    /* 16 input channels, a whole vector block on every ISA (8 lanes on
     * AVX2, 16 on AVX-512 and AMX), so that oneDNN has a jit blocked
     * backward on each and the default plan stays blocked: with 3 or 8
     * (a part of AVX-512's block) it has only its reference code there,
     * the backend takes nhwc (dnnl_conv.c's plan_avoid_ref), whose global
     * average is plain, and the case would no longer feed the connected
     * layer a blocked input (foreign_layouts) */
    CASE(conv_avgpool_connected, "avgpool", 2, 0, 3u, 0, TOL_SUMS,
         NET(6, 5, 16) CONV0_13 "[avgpool]\n[connected]\noutput=5\nactivation=linear\n")

    /* ---- [batchnorm] ---- */

    CASE(batchnorm_input, "batchnorm", 2, 1, 0, 0, TOL_SUMS, NET(4, 5, 3) "[batchnorm]\n")
    CASE(batchnorm_input_no_input_grad, "batchnorm", 2, 0, 0, CF_NO_INPUT_DELTA, TOL_SUMS,
         NET(4, 5, 3) "[batchnorm]\n[convolutional]\nfilters=3\nsize=1\nactivation=linear\n")
    CASE(conv_then_batchnorm, "batchnorm", 3, 2, 1u, 0, TOL_SUMS,
         NET(7, 5, 3) CONV0_13 "[batchnorm]\n")
    CASE(conv_batchnorm_conv, "batchnorm", 2, 0, 3u, 0, TOL_SUMS,
         NET(7, 5, 3) CONV0_13 "[batchnorm]\n"
         "[convolutional]\nfilters=4\nsize=3\npad=1\nactivation=linear\n")

    /* ---- [lrn] ---- */

    CASE(lrn_input_size3, "lrn", 2, 0, 0, 0, TOL_SUMS,
         NET(3, 4, 7) "[lrn]\nsize=3\nalpha=0.5\nbeta=0.6\nk=1\n")
    CASE(conv_then_lrn_size3, "lrn", 3, 2, 1u, 0, TOL_SUMS,
         NET(7, 5, 3) CONV0_13 "[lrn]\nsize=3\nalpha=0.5\nbeta=0.75\nk=1\n")
    CASE(conv_then_lrn_size5, "lrn", 2, 0, 1u, 0, TOL_SUMS,
         NET(7, 5, 3) CONV0_13 "[lrn]\nsize=5\nalpha=1\nbeta=0.75\nk=2\n")

    /* ---- [dropout] ---- */

    /* plain input: the same masks, compared */
    CASE(connected_then_dropout, "dropout", 3, 2, 0, 0, TOL_SUMS,
         NET(3, 5, 2) "[connected]\noutput=40\nactivation=tanh\n[dropout]\nprobability=0.4\n")
    CASE(dropout_input_then_conv, "dropout", 2, 0, 0, 0, TOL_SUMS,
         NET(5, 4, 3) "[dropout]\nprobability=0.3\n"
         "[convolutional]\nfilters=5\nsize=3\npad=1\nactivation=linear\n")
    CASE(connected_dropout_connected, "dropout", 3, 0, 0, 0, TOL_SUMS,
         NET(3, 5, 2) "[connected]\noutput=30\nactivation=leaky\n[dropout]\nprobability=0.5\n"
         "[connected]\noutput=4\nactivation=linear\n")
    /* input in the backend's layout: masks differ by design, each replica
     * checked by itself (the conv is linear so its gradient buffer keeps
     * what dropout wrote) */
    CASE(conv_dropout_connected, "dropout", 3, 2, 1u, 0, TOL_SUMS,
         NET(7, 5, 3) CONV0_LIN "[dropout]\nprobability=0.5\n"
         "[connected]\noutput=4\nactivation=linear\n")
    /* dropout after a conv as the last layer: its output must be plain, but
     * dropout keeps its input's layout */
    CASE(conv_then_dropout_last, "dropout", 2, 0, 0, 0, TOL_SUMS,
         NET(7, 5, 3) CONV0_LIN "[dropout]\nprobability=0.5\n")

    /* ---- [softmax] and [cost] ---- */

    CASE(softmax_plain, "softmax", 3, 2, 0, 0, TOL_SUMS,
         NET(3, 5, 2) "[connected]\noutput=6\nactivation=linear\n[softmax]\n")
    CASE(softmax_groups2_temperature2, "softmax", 3, 0, 0, 0, TOL_SUMS,
         NET(3, 5, 2) "[connected]\noutput=8\nactivation=linear\n"
         "[softmax]\ngroups=2\ntemperature=2\n")
    CASE(conv_connected_softmax, "softmax", 2, 0, 1u, 0, TOL_SUMS,
         NET(6, 5, 3) CONV0_13 "[connected]\noutput=5\nactivation=linear\n[softmax]\n")
    CASE(connected_cost, "cost", 3, 2, 0, 0, TOL_SUMS,
         NET(3, 5, 2) "[connected]\noutput=5\nactivation=logistic\n[cost]\nscale=0.7\n")
    CASE(conv_cost, "cost", 2, 0, 0, 0, TOL_SUMS,
         NET(5, 5, 3) "[convolutional]\nfilters=3\nsize=3\nstride=2\npad=1\n"
                      "activation=tanh\n[cost]\n")
    CASE(softmax_cost, "cost", 2, 0, 0, 0, TOL_SUMS,
         NET(3, 5, 2) "[connected]\noutput=6\nactivation=linear\n[softmax]\n[cost]\n")

    /* ---- [shortcut] and [route]: plain C, fed by convolutions whose
     * outputs must be plain (oneDNN's "dst edge" reorder); a layer read by
     * two layers makes the later consumer's backward add to its gradient
     * (accumulate) ---- */

    CASE(shortcut_same_shape, "shortcut", 3, 2, 0, 0, TOL_SUMS,
         NET(7, 5, 3) TWO_CONVS "[shortcut]\nfrom=-2\nalpha=0.6\nbeta=1.7\n"
                                "activation=logistic\n")
    CASE(shortcut_from_larger, "shortcut", 2, 0, 0, 0, TOL_SUMS,
         NET(6, 6, 3) "[convolutional]\nfilters=5\nsize=3\npad=1\nactivation=tanh\n"
         "[convolutional]\nfilters=5\nsize=3\nstride=2\npad=1\nactivation=linear\n"
         "[shortcut]\nfrom=0\nalpha=0.5\nbeta=-1.5\n")
    CASE(shortcut_then_conv, "shortcut", 2, 0, 0, 0, TOL_SUMS,
         NET(7, 5, 3) TWO_CONVS "[shortcut]\nfrom=-2\n"
         "[convolutional]\nfilters=6\nsize=3\nstride=2\npad=1\nactivation=tanh\n")
    CASE(route_two_convs, "route", 3, 2, 0, 0, TOL_SUMS,
         NET(7, 5, 3) "[convolutional]\nfilters=5\nsize=3\npad=1\nactivation=tanh\n"
         "[convolutional]\nfilters=13\nsize=3\npad=1\nactivation=leaky\n"
         "[route]\nlayers=-1,-2\n"
         "[convolutional]\nfilters=4\nsize=1\nactivation=linear\n")
    CASE(route_order_0_1, "route", 2, 0, 0, 0, TOL_SUMS,
         NET(7, 5, 3) CONV0_13 "[convolutional]\nfilters=16\nsize=3\npad=1\nactivation=tanh\n"
         "[route]\nlayers=0,-1\n"
         "[convolutional]\nfilters=3\nsize=3\npad=1\nactivation=linear\n")
    CASE(fanout_conv3x3, "route", 3, 2, 0, 0, TOL_SUMS,
         FANOUT("[convolutional]\nfilters=6\nsize=3\npad=1\nactivation=linear\n"))
    CASE(fanout_conv1x1, "route", 2, 0, 0, 0, TOL_SUMS,
         FANOUT("[convolutional]\nfilters=16\nsize=1\nactivation=logistic\n"))
    CASE(fanout_conv_bn, "route", 3, 0, 0, 0, TOL_SUMS,
         FANOUT("[convolutional]\nfilters=13\nsize=3\npad=1\nbatch_normalize=1\n"
                "activation=tanh\n"))
    CASE(fanout_conv_bn_16ch, "route", 3, 0, 0, 0, TOL_SUMS,
         FANOUT("[convolutional]\nfilters=16\nsize=3\npad=1\nbatch_normalize=1\n"
                "activation=tanh\n"))
    CASE(fanout_maxpool, "route", 2, 0, 0, 0, TOL_SUMS, FANOUT("[maxpool]\nsize=3\nstride=1\n"))
    CASE(fanout_lrn, "route", 2, 0, 0, 0, TOL_SUMS, FANOUT("[lrn]\nsize=3\nalpha=0.5\n"))
    CASE(fanout_batchnorm, "route", 2, 0, 0, 0, TOL_SUMS, FANOUT("[batchnorm]\n"))
    CASE(fanout_shortcut, "shortcut", 2, 0, 0, 0, TOL_SUMS,
         FANOUT("[shortcut]\nfrom=-1\nalpha=0.5\nbeta=2\n"))

    /* ---- a shape for swDNN's implicit convolution ----
     *
     * Batch 128, 128 -> 64 channels, 1x1, unit stride: the cpe backend's
     * implicit kernel takes all three passes (its report said so when this
     * case was written: "fwd implicit; bwd_data implicit; bwd_weights
     * implicit"), with the input transformed to the batch-innermost layout
     * at the kernel's edge, and the output back for the inner product. That
     * backend tries its strategies at its first training calls, one each,
     * so the case runs its batch size twice (CF_TWICE): explicit, then
     * implicit. (With 3x3 kernels, or a first convolution from 16 channels,
     * oneDNN's blocked convolution took 2.4-3 s here, so: 1x1 on 2x2.) */
    CASE(conv_128to64_batch128_twice, "convolutional", 128, 0, 0, CF_TWICE, TOL_SUMS,
         "[net]\nbatch=128\nheight=2\nwidth=2\nchannels=128\n"
         "[convolutional]\nfilters=64\nsize=1\nactivation=leaky\n"
         "[connected]\noutput=5\nactivation=linear\n")

    /* ---- [crop] on the input, then a convolution ---- */

    CASE(crop_then_conv, "crop", 3, 2, 0, 0, TOL_SUMS,
         NET(9, 8, 3) "[crop]\ncrop_height=7\ncrop_width=5\nflip=1\n"
         "[convolutional]\nfilters=13\nsize=3\npad=1\nactivation=tanh\n")
    CASE(crop_noadjust_then_conv, "crop", 2, 0, 0, 0, TOL_SUMS,
         NET(8, 8, 3) "[crop]\ncrop_height=6\ncrop_width=6\nnoadjust=1\n"
         "[convolutional]\nfilters=5\nsize=3\nstride=2\npad=1\nactivation=leaky\n")

    /* ---- kernels by descriptor: the interface's promises that layers do
     * not all reach (accumulating backward-data of every kind, inference
     * forward, a convolution without bias and with asymmetric padding, an
     * average over windows with padding, activations forward) ---- */

    /* 5x6 -> 3x3: top/left padding 1, bottom 0, right -1 (the last column
     * in no window); no bias */
    KCASE(kernel_conv_nobias_asym, 3, 2, 0, TOL_SUMS,
          .conv = {KBASE(ST_K_CONV, "0.conv"), .ic = 4, .ih = 5, .iw = 6, .oc = 6, .oh = 3,
                   .ow = 3, .kh = 3, .kw = 3, .sh = 2, .sw = 2, .ph = 1, .pw = 1, .groups = 1,
                   .bias = 0, .act = ST_ACT_TANH})
    KCASE(kernel_conv_groups3_bias, 2, 0, 0, TOL_SUMS,
          .conv = {KBASE(ST_K_CONV, "0.conv"), .ic = 6, .ih = 4, .iw = 5, .oc = 9, .oh = 4,
                   .ow = 5, .kh = 3, .kw = 3, .sh = 1, .sw = 1, .ph = 1, .pw = 1, .groups = 3,
                   .bias = 1, .act = ST_ACT_LEAKY})
    KCASE(kernel_fc_bias_logistic, 3, 1, 0, TOL_SUMS,
          .fc = {KBASE(ST_K_FC, "0.fc"), .in = 11, .out = 7, .bias = 1,
                 .act = ST_ACT_LOGISTIC})
    KCASE(kernel_fc_nobias, 2, 0, 0, TOL_SUMS,
          .fc = {KBASE(ST_K_FC, "0.fc"), .in = 9, .out = 5, .bias = 0, .act = ST_ACT_LINEAR})
    /* max 3x3 stride 2 padding 1: overlapping windows add in backward */
    KCASE(kernel_pool_max_3s2, 3, 2, 0, TOL_SUMS,
          .pool = {KBASE(ST_K_POOL, "0.pool"), .alg = ST_POOL_MAX, .c = 3, .ih = 7, .iw = 6,
                   .oh = 4, .ow = 3, .kh = 3, .kw = 3, .sh = 2, .sw = 2, .ph = 1, .pw = 1})
    /* average 3x3 stride 2 padding 1: border windows average their valid
     * positions only (kdesc.h) */
    KCASE(kernel_pool_avg_3s2_pad1, 2, 1, 0, TOL_SUMS,
          .pool = {KBASE(ST_K_POOL, "0.pool"), .alg = ST_POOL_AVG, .c = 4, .ih = 5, .iw = 6,
                   .oh = 3, .ow = 3, .kh = 3, .kw = 3, .sh = 2, .sw = 2, .ph = 1, .pw = 1})
    /* global average, as [avgpool] */
    KCASE(kernel_pool_avg_global, 3, 0, 0, TOL_SUMS,
          .pool = {KBASE(ST_K_POOL, "0.pool"), .alg = ST_POOL_AVG, .c = 5, .ih = 4, .iw = 3,
                   .oh = 1, .ow = 1, .kh = 4, .kw = 3, .sh = 1, .sw = 1})
    KCASE(kernel_bnorm_relu, 3, 2, 0, TOL_SUMS,
          .bnorm = {KBASE(ST_K_BNORM, "0.bn"), .c = 5, .h = 3, .w = 4, .eps = 1e-5f,
                 .act = ST_ACT_RELU})
    KCASE(kernel_bnorm_linear, 4, 0, 0, TOL_SUMS,
          .bnorm = {KBASE(ST_K_BNORM, "0.bn"), .c = 3, .h = 2, .w = 2, .eps = 1e-5f,
                 .act = ST_ACT_LINEAR})
    KCASE(kernel_lrn_size3, 2, 1, 0, TOL_SUMS,
          .lrn = {KBASE(ST_K_LRN, "0.lrn"), .c = 6, .h = 3, .w = 4, .size = 3, .alpha = 0.5f,
                  .beta = 0.75f, .k = 1.0f})
    KCASE(kernel_lrn_size5, 2, 0, 0, TOL_SUMS,
          .lrn = {KBASE(ST_K_LRN, "0.lrn"), .c = 7, .h = 2, .w = 3, .size = 5, .alpha = 1.0f,
                  .beta = 0.6f, .k = 2.0f})
    /* (No linear activation: no layer makes that kernel, act_setup, and
     * the oneDNN backend refuses one.) */
    KCASE(kernel_act_relu, 3, 0, 0, TOL_ELTWISE,
          .act = {KBASE(ST_K_ACT, "0.act"), .count = 37, .act = ST_ACT_RELU})
    KCASE(kernel_act_leaky, 3, 2, 0, TOL_ELTWISE,
          .act = {KBASE(ST_K_ACT, "0.act"), .count = 37, .act = ST_ACT_LEAKY})
    KCASE(kernel_act_logistic, 2, 0, 0, TOL_ELTWISE,
          .act = {KBASE(ST_K_ACT, "0.act"), .count = 40, .act = ST_ACT_LOGISTIC})
    KCASE(kernel_act_tanh, 2, 0, 0, TOL_ELTWISE,
          .act = {KBASE(ST_K_ACT, "0.act"), .count = 40, .act = ST_ACT_TANH})
    /* in place, as the layers run it backward */
    KCASE(kernel_act_tanh_in_place, 3, 1, CF_IN_PLACE, TOL_ELTWISE,
          .act = {KBASE(ST_K_ACT, "0.act"), .count = 33, .act = ST_ACT_TANH})
    KCASE(kernel_act_leaky_in_place, 2, 0, CF_IN_PLACE, TOL_ELTWISE,
          .act = {KBASE(ST_K_ACT, "0.act"), .count = 33, .act = ST_ACT_LEAKY})
    KCASE(kernel_softmax, 3, 2, 0, TOL_SUMS,
          .softmax = {KBASE(ST_K_SOFTMAX, "0.softmax"), .count = 7, .groups = 1,
                      .temperature = 1.0f})
    KCASE(kernel_softmax_groups3_temperature, 2, 0, 0, TOL_SUMS,
          .softmax = {KBASE(ST_K_SOFTMAX, "0.softmax"), .count = 12, .groups = 3,
                      .temperature = 0.5f})
};

#define N_CASES ((int)(sizeof cases / sizeof cases[0]))

static const char *const kind_types[ST_K_COUNT] = {
#define CF_KIND_TYPE(kind, stem, name) [kind] = name " kernel",
    ST_KINDS(CF_KIND_TYPE)
#undef CF_KIND_TYPE
};

/* A case's type, for the summary: a network case's layer type under test,
 * a kernel case's kind ("conv kernel"). */
static const char *case_type(const cf_case *c)
{
    return c->cfg ? c->type : kind_types[c->k.base.kind];
}

/* ---- the backends, from the registry ---- */

static const st_backend *g_ref;
static const st_backend *g_backends[CF_MAX_BACKENDS];
static int g_n_backends;

/* Every backend built into this binary, the reference one first. */
static void backends_load(void)
{
    char list[256];
    st_error err = {0};
    st_backend_list(list, sizeof list, 1, ", ");
    if (st_backend_find("ref", &g_ref, &err) != ST_OK) {
        fprintf(stderr, "the reference backend: %s\n", err.msg);
        exit(1);
    }
    g_backends[g_n_backends++] = g_ref;
    for (char *name = strtok(list, ", "); name; name = strtok(NULL, ", ")) {
        const st_backend *be;
        if (st_backend_find(name, &be, &err) != ST_OK) {
            fprintf(stderr, "backend %s, listed by the registry: %s\n", name, err.msg);
            exit(1);
        }
        if (be == g_ref)
            continue;
        if (g_n_backends == CF_MAX_BACKENDS) {
            fprintf(stderr, "more than %d backends: raise CF_MAX_BACKENDS\n", CF_MAX_BACKENDS);
            exit(1);
        }
        g_backends[g_n_backends++] = be;
    }
}

/* ---- worst metrics per backend, type and tensor kind, printed at the end ---- */

enum { K_OUT, K_LOSS, K_DX, K_W, K_B, K_STAT, K_COUNT };
static const char *const tensor_names[K_COUNT] = {"output", "loss", "input grad", "weight grad",
                                                  "bias/scale grad", "batch stats"};

typedef struct cf_worst {
    const st_backend *be;
    const char *type;
    double m[K_COUNT]; /* -1: not compared */
    const char *where[K_COUNT];
} cf_worst;

static cf_worst g_worst[CF_MAX_BACKENDS * 2 * CF_MAX_TYPES];
static int g_n_worst;

static cf_worst *worst_of(const st_backend *be, const char *type)
{
    for (int i = 0; i < g_n_worst; i++)
        if (g_worst[i].be == be && strcmp(g_worst[i].type, type) == 0)
            return &g_worst[i];
    assert_true(g_n_worst < (int)(sizeof g_worst / sizeof g_worst[0]));
    cf_worst *w = &g_worst[g_n_worst++];
    w->be = be;
    w->type = type;
    for (int k = 0; k < K_COUNT; k++)
        w->m[k] = -1.0;
    return w;
}

/* ---- comparing ---- */

/* One run of a case on one backend (and convolution implementation). */
typedef struct cf_check {
    const cf_case *c;
    const st_backend *be; /* under test; g_ref is the oracle */
    double tol;           /* the row's, or 0: the reference against itself */
    char name[96];        /* "case [backend impl]", for messages */
    int ns;               /* samples of the current pass */
    long failed;
    double worst[K_COUNT];
} cf_check;

static void check_init(cf_check *t, const cf_case *c, const st_backend *be, const char *impl)
{
    memset(t, 0, sizeof *t);
    t->c = c;
    t->be = be;
    t->tol = be == g_ref ? 0.0 : c->tol.tol;
    snprintf(t->name, sizeof t->name, "%s [%s%s%s]", c->name, be->name,
             be->conv_impls ? " " : "",
             !be->conv_impls ? "" : c->choices ? "given choices" : impl ? impl : "default");
    for (int k = 0; k < K_COUNT; k++)
        t->worst[k] = -1.0;
}

static void check_note(cf_check *t, int kind, double m)
{
    if (m > t->worst[kind])
        t->worst[kind] = m;
    cf_worst *w = worst_of(t->be, case_type(t->c));
    if (m > w->m[kind]) {
        w->m[kind] = m;
        w->where[kind] = t->c->name;
    }
}

/* Compare count values of one tensor; see the header for the metric. */
static void check_compare(cf_check *t, int kind, const char *what, const float *ref,
                          const float *got, size_t count)
{
    double max_ref = 0.0, max_diff = 0.0;
    size_t at = 0;
    for (size_t i = 0; i < count; i++) {
        if (!isfinite(ref[i]) || !isfinite(got[i])) {
            t->failed++;
            print_error("%s (n=%d): %s[%zu]: ref %.9g, %s %.9g: not finite (NaN: never "
                        "written)\n", t->name, t->ns, what, i, ref[i], t->be->name, got[i]);
            return;
        }
        max_ref = fmax(max_ref, fabs(ref[i]));
        double d = fabs((double)got[i] - (double)ref[i]);
        if (d > max_diff) {
            max_diff = d;
            at = i;
        }
    }
    double m = max_diff / fmax(max_ref, CF_TINY);
    check_note(t, kind, m);
    if (!(m <= t->tol)) {
        t->failed++;
        print_error("%s (n=%d): %s[%zu of %zu]: ref %.9g, %s %.9g, |diff| %.3g, max|ref| "
                    "%.3g: metric %.3g > %.0e (%s)\n", t->name, t->ns, what, at, count,
                    ref[at], t->be->name, got[at], max_diff, max_ref, m, t->tol,
                    t->tol > 0.0 ? t->c->tol.why : "the reference against itself: bitwise");
    }
    if (!(max_ref >= CF_MIN_SCALE)) {
        t->failed++;
        print_error("%s (n=%d): %s: every reference value is below %g (largest %.3g): test "
                    "design, the comparison could not tell a zero result from a right one\n",
                    t->name, t->ns, what, CF_MIN_SCALE, max_ref);
    }
}

/* The case's line: its largest metric per tensor kind, and the time. */
static void check_report(const cf_check *t, double seconds, const char *note)
{
    char line[320];
    int len = snprintf(line, sizeof line, "%-44s", t->name);
    for (int k = 0; k < K_COUNT && len > 0 && (size_t)len < sizeof line; k++)
        if (t->worst[k] >= 0.0)
            len += snprintf(line + len, sizeof line - (size_t)len, "  %s %.1e",
                            tensor_names[k], t->worst[k]);
    print_message("%s  %.2f s%s\n", line, seconds, note);
}

static float cf_uniform(st_rng *rng, float lo, float hi)
{
    return lo + (hi - lo) * st_rng_uniform(rng);
}

static double cf_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- a network case ---- */

typedef struct net_ctx {
    cf_check chk;
    st_cfg cfg;
    st_hparams hp;
    st_net net;
    int built, have_rep[2];
    st_replica rep[2]; /* 0: the reference, 1: the backend under test */
    float *w, *g[2];
    float *x, *r, *x_copy;
    int *labels;
    unsigned char *snap[2]; /* every layer output after forward, both replicas */
    size_t snap_bytes[2];
    int masks_checked;
    st_choices *choices; /* the case's given choices, or NULL */
    int sizes[2];        /* the replicas' batch_sizes */
} net_ctx;

static const char *side_name(const net_ctx *t, int b)
{
    return b == 0 ? "ref" : t->chk.be->name;
}

static float *net_delta(const st_replica *r, int layer)
{
    return st_arena_at(&r->arena, r->delta_off[layer]);
}

/* Build the net and both replicas; on failure *msg says why and what was
 * built is left for net_teardown. */
static int net_setup(net_ctx *t, const cf_case *c, const st_backend *be, const char *impl,
                     char *msg, size_t size)
{
    memset(t, 0, sizeof *t);
    check_init(&t->chk, c, be, impl);
    st_error err = {0};
    if (c->choices &&
        (st_choices_create(&t->choices, be->choice_syntax, &err) != ST_OK ||
         st_choices_parse(t->choices, c->choices, strlen(c->choices), c->name, ST_CHOICE_FILE,
                          &err) != ST_OK)) {
        snprintf(msg, size, "%s: the case's choices: %s", t->chk.name, err.msg);
        return -1;
    }
    if (tl_build(c->name, c->cfg, &t->cfg, &t->hp, &t->net, &err) != ST_OK) {
        snprintf(msg, size, "%s: building the net failed: %s", c->name, err.msg);
        return -1;
    }
    t->built = 1;
    t->sizes[0] = c->n;
    t->sizes[1] = c->n_small;
    st_replica_opts o = {
        .n = c->n, .batch_sizes = t->sizes, .n_batch_sizes = c->n_small ? 2 : 1, .training = 1,
        .input_delta = !(c->flags & CF_NO_INPUT_DELTA),
        .backend = {.intra_threads = 1, .worker = 0},
    };
    for (int b = 0; b < 2; b++) {
        o.backend.conv_impl = b == 1 ? impl : NULL;
        o.backend.choices = b == 1 ? t->choices : NULL;
        if (st_replica_init(&t->rep[b], &t->net, b == 0 ? g_ref : be, &o, &err) != ST_OK) {
            snprintf(msg, size, "%s: st_replica_init on the %s backend failed: %s",
                     t->chk.name, side_name(t, b), err.msg);
            return -1;
        }
        t->have_rep[b] = 1;
    }
    const st_replica *r = &t->rep[1];
    if (getenv("CF_VERBOSE")) {
        for (int i = 0; i < t->net.n_layers; i++)
            print_message("  %s: layer %d [%s] %dx%dx%d: output %s, %zu bytes\n", t->chk.name,
                          i, t->net.layers[i]->ops->type, t->net.layers[i]->out.c,
                          t->net.layers[i]->out.h, t->net.layers[i]->out.w,
                          r->out_layout[i] ? "in the backend's layout" : "plain",
                          r->out_bytes[i]);
    }
    st_choice_counts counts = {.unused = 0};
    if (t->choices)
        st_choices_counts(t->choices, &counts);
    int measured = counts.taken[ST_CHOICE_MEASURED], unused = counts.unused;
    if (measured || unused) {
        snprintf(msg, size, "%s: test design: %d convolution(s) had no choice among the "
                 "case's (their keys differ: see dnnl_conv.c's choice_key) and were measured, "
                 "%d of its choices unused", t->chk.name, measured, unused);
        return -1;
    }
    const st_param_table *pt = &t->net.params;
    size_t pc = pt->count ? pt->count : 1;
    t->w = st_alloc_aligned(pc * sizeof(float), "weights", &err);
    t->g[0] = st_alloc_aligned(pc * sizeof(float), "ref grads", &err);
    t->g[1] = st_alloc_aligned(pc * sizeof(float), "grads under test", &err);
    assert_non_null(t->w);
    assert_non_null(t->g[0]);
    assert_non_null(t->g[1]);
    st_params_init(pt, t->w, 42);
    st_rng rng;
    st_rng_seed(&rng, 7, 1);
    for (int i = 0; i < pt->n; i++)
        if (pt->p[i].kind == ST_PARAM_BIAS)
            for (size_t j = 0; j < pt->p[i].count; j++)
                t->w[pt->p[i].offset + j] += cf_uniform(&rng, -0.3f, 0.3f);
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

static void net_teardown(net_ctx *t)
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

static void net_snapshot(net_ctx *t, int b, int save)
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
            t->chk.failed++;
            print_error("%s (n=%d): %s backend: backward changed layer %d [%s]'s output "
                        "buffer (first at byte %zu of %zu): some kernel writes past its "
                        "gradient buffer or into the forward's output\n", t->chk.name,
                        t->chk.ns, side_name(t, b), i, t->net.layers[i]->ops->type, k,
                        r->out_bytes[i]);
        }
        off += r->out_bytes[i];
    }
}

/* Layer i's output of replica b as forward left it (the snapshot). */
static const float *net_forward_output(const net_ctx *t, int b, int layer)
{
    size_t off = 0;
    for (int i = 0; i < layer; i++)
        off += t->rep[b].out_bytes[i];
    return (const float *)(const void *)(t->snap[b] + off);
}

/* The first [dropout] whose input is in the backend's layout, or -1. */
static int net_foreign_dropout(const net_ctx *t)
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
static void net_check_dropout(net_ctx *t, int b, int d)
{
    const st_replica *r = &t->rep[b];
    int s = t->net.layers[d]->src[0];
    float p = 0.5f;
    st_error err = {0};
    st_cfg_float(&t->cfg, &t->cfg.secs[d + 1], "probability", 0.5f, 0.0f, 0.99f, &p, &err);
    float scale = 1.0f / (1.0f - p);
    size_t count = r->out_bytes[d] / sizeof(float) / (size_t)r->n * (size_t)t->chk.ns;
    const float *x = st_replica_output(r, s), *y = st_replica_output(r, d);
    const float *dx = net_delta(r, s), *dy = net_delta(r, d);
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
        if (!ok && bad++ < CF_MAX_PRINT)
            print_error("%s (n=%d): %s backend: dropout layer %d value %zu: input %.9g, output "
                        "%.9g (expected 0 or %.9g), gradient %.9g from %.9g\n", t->chk.name,
                        t->chk.ns, side_name(t, b), d, i, x[i], y[i], x[i] * scale, dx[i],
                        dy[i]);
    }
    size_t total = dropped + kept;
    double frac = total ? (double)dropped / (double)total : 0.0;
    double slack = 5.0 * sqrt((double)p * (1.0 - p) / (double)(total ? total : 1));
    if (bad || total < 100 || fabs(frac - p) > slack) {
        t->chk.failed++;
        print_error("%s (n=%d): %s backend: dropout layer %d: %zu bad values, %zu of %zu "
                    "dropped (%.3f, expected %.2f +- %.3f)\n", t->chk.name, t->chk.ns,
                    side_name(t, b), d, bad, dropped, total, frac, p, slack);
    }
}

/* One forward and backward of ns samples on both replicas, and the
 * comparisons; -1 with *msg when a pass fails to run. */
static int net_pass(net_ctx *t, int ns, uint64_t seed, char *msg, size_t size)
{
    const cf_case *c = t->chk.c;
    const st_net *net = &t->net;
    t->chk.ns = ns;
    size_t in_n = (size_t)ns * st_shape_count(net->input);
    size_t out_n = (size_t)ns * st_shape_count(net->layers[net->n_layers - 1]->out);
    st_rng rng;
    st_rng_seed(&rng, seed, 2);
    for (size_t i = 0; i < in_n; i++)
        t->x[i] = cf_uniform(&rng, -1.0f, 1.0f);
    for (size_t i = 0; i < out_n; i++)
        t->r[i] = cf_uniform(&rng, -1.0f, 1.0f);
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
            snprintf(msg, size, "%s (n=%d): %s forward failed: %s", t->chk.name, ns,
                     side_name(t, b), err.msg);
            return -1;
        }
        net_snapshot(t, b, 1);
        memset(t->g[b], 0, pt->count * sizeof(float));
        for (int i = 0; i < pt->n; i++)
            for (size_t j = 0; j < pt->p[i].count; j++)
                t->g[b][pt->p[i].offset + j] = NAN;
        float *dx = st_replica_input_delta(r);
        if (dx)
            for (size_t i = 0; i < (size_t)r->n * st_shape_count(net->input); i++)
                dx[i] = NAN;
        if (st_replica_backward(r, t->w, t->g[b], &shard, &info, t->r, &err) != ST_OK) {
            snprintf(msg, size, "%s (n=%d): %s backward failed: %s", t->chk.name, ns,
                     side_name(t, b), err.msg);
            return -1;
        }
        net_snapshot(t, b, 0);
        if (memcmp(t->x, t->x_copy, in_n * sizeof *t->x) != 0) {
            t->chk.failed++;
            print_error("%s (n=%d): %s backend changed the network input\n", t->chk.name, ns,
                        side_name(t, b));
        }
    }

    int mask_layer = net_foreign_dropout(t);
    char what[96];
    for (int i = 0; i < net->n_layers; i++) {
        if (t->rep[1].out_layout[i] || (mask_layer >= 0 && i >= mask_layer))
            continue;
        snprintf(what, sizeof what, "layer %d [%s] output", i, net->layers[i]->ops->type);
        check_compare(&t->chk, K_OUT, what, net_forward_output(t, 0, i),
                      net_forward_output(t, 1, i),
                      (size_t)ns * st_shape_count(net->layers[i]->out));
    }
    if (mask_layer >= 0) {
        for (int b = 0; b < 2; b++)
            net_check_dropout(t, b, mask_layer);
        t->masks_checked = 1;
        return 0;
    }
    int has_loss = 0;
    for (int i = 0; i < net->n_layers; i++)
        has_loss |= net->layers[i]->is_loss;
    if (has_loss) {
        double m = fabs(loss[1] - loss[0]) / fmax(fabs(loss[0]), CF_TINY);
        check_note(&t->chk, K_LOSS, m);
        if (!(m <= t->chk.tol) || !(fabs(loss[0]) >= CF_MIN_SCALE)) {
            t->chk.failed++;
            print_error("%s (n=%d): loss: ref %.9g, %s %.9g: metric %.3g\n", t->chk.name, ns,
                        loss[0], t->chk.be->name, loss[1], m);
        }
    }
    if (!(c->flags & CF_NO_INPUT_DELTA))
        check_compare(&t->chk, K_DX, "input gradient", st_replica_input_delta(&t->rep[0]),
                      st_replica_input_delta(&t->rep[1]), in_n);
    for (int i = 0; i < pt->n; i++) {
        const st_param *p = &pt->p[i];
        int kind = p->kind == ST_PARAM_WEIGHT ? K_W : p->kind == ST_PARAM_BIAS ? K_B : K_STAT;
        snprintf(what, sizeof what, "%s slot [%s]", p->name,
                 net->layers[p->layer]->ops->type);
        check_compare(&t->chk, kind, what, t->g[0] + p->offset, t->g[1] + p->offset, p->count);
    }
    return 0;
}

static void net_run(const cf_case *c, const st_backend *be, const char *impl)
{
    net_ctx t;
    char msg[1200];
    double t0 = cf_now();
    if (net_setup(&t, c, be, impl, msg, sizeof msg) != 0 ||
        net_pass(&t, c->n, 100 + (uint64_t)c->n, msg, sizeof msg) != 0 ||
        ((c->flags & CF_TWICE) && net_pass(&t, c->n, 150 + (uint64_t)c->n, msg, sizeof msg)) ||
        (c->n_small && net_pass(&t, c->n_small, 200 + (uint64_t)c->n_small, msg, sizeof msg))) {
        net_teardown(&t);
        fail_msg("%s", msg);
    }
    check_report(&t.chk, cf_now() - t0,
                 t.masks_checked ? "  (dropout masks checked per backend)" : "");
    long failed = t.chk.failed;
    char name[96];
    snprintf(name, sizeof name, "%s", t.chk.name);
    net_teardown(&t);
    if (failed)
        fail_msg("%s: %ld check(s) failed (see above)", name, failed);
}

/* ---- a kernel case ---- */

/* Values per sample of the kernel's src, and the sizes of its weights,
 * bias and batch statistics. */
typedef struct kern_sizes {
    size_t src, dst, weights, bias, stats;
} kern_sizes;

static kern_sizes kern_sizes_of(const cf_kdesc *k)
{
    kern_sizes s = {.dst = st_kdesc_dst_values(&k->base)};
    switch (k->base.kind) {
    case ST_K_CONV:
        s.src = (size_t)k->conv.ic * k->conv.ih * k->conv.iw;
        s.weights = (size_t)k->conv.oc * (k->conv.ic / k->conv.groups) * k->conv.kh * k->conv.kw;
        s.bias = k->conv.bias ? (size_t)k->conv.oc : 0;
        break;
    case ST_K_FC:
        s.src = (size_t)k->fc.in;
        s.weights = (size_t)k->fc.out * k->fc.in;
        s.bias = k->fc.bias ? (size_t)k->fc.out : 0;
        break;
    case ST_K_POOL: s.src = (size_t)k->pool.c * k->pool.ih * k->pool.iw; break;
    case ST_K_BNORM:
        s.src = s.dst;
        s.weights = s.bias = s.stats = (size_t)k->bnorm.c;
        break;
    case ST_K_LRN: s.src = s.dst; break;
    case ST_K_ACT: s.src = s.dst; break;
    case ST_K_SOFTMAX: s.src = s.dst; break;
    }
    return s;
}

/* One backend's kernel and the buffers it writes. */
typedef struct kern_side {
    st_bctx *ctx;
    st_kernel *k;
    float *src, *dst, *diff_src, *diff_dst, *dw, *db, *mean, *var;
    void *ws, *scratch;
} kern_side;

typedef struct kern_ctx {
    cf_check chk;
    const st_backend *be[2];
    kern_side s[2];
    kern_sizes z;
    float *src, *w, *bias, *diff_dst, *acc; /* inputs, the same for both sides */
    float *copy;                            /* for the "unchanged" checks */
    int sizes[2];                           /* the descriptor's batch_sizes (layers
                                             * give kernels a pointer that lasts) */
} kern_ctx;

static void *kern_alloc(size_t floats)
{
    st_error err = {0};
    void *p = st_alloc_aligned((floats ? floats : 1) * sizeof(float), "conformance buffer",
                               &err);
    assert_non_null(p);
    return p;
}

static void kern_nan(float *p, size_t count)
{
    for (size_t i = 0; i < count; i++)
        p[i] = NAN;
}

static int kern_setup(kern_ctx *t, const cf_case *c, const st_backend *be, const char *impl,
                      char *msg, size_t size)
{
    memset(t, 0, sizeof *t);
    check_init(&t->chk, c, be, impl);
    t->be[0] = g_ref;
    t->be[1] = be;
    t->z = kern_sizes_of(&c->k);
    cf_kdesc d = c->k;
    t->sizes[0] = c->n;
    t->sizes[1] = c->n_small;
    d.base.backward = 1;
    d.base.src_grad = 1;
    d.base.n = c->n;
    d.base.batch_sizes = t->sizes;
    d.base.n_batch_sizes = c->n_small ? 2 : 1;
    d.base.src_layout = NULL;
    d.base.dst_plain = d.base.kind != ST_K_ACT; /* an activation's dst has src's layout */
    size_t n = (size_t)c->n;
    for (int b = 0; b < 2; b++) {
        kern_side *s = &t->s[b];
        st_error err = {0};
        st_backend_opts o = {.intra_threads = 1, .conv_impl = b == 1 ? impl : NULL};
        if (t->be[b]->ctx_create(&o, &s->ctx, &err) != ST_OK ||
            t->be[b]->kernel_create(s->ctx, &d.base, &s->k, &err) != ST_OK) {
            snprintf(msg, size, "%s: creating the kernel on the %s backend failed: %s",
                     t->chk.name, t->be[b]->name, err.msg);
            return -1;
        }
        size_t plain = n * t->z.dst * sizeof(float);
        if (s->k->dst_layout || s->k->dst_bytes != plain) {
            snprintf(msg, size, "%s: %s backend: asked for plain dst, the kernel says %s, %zu "
                     "bytes for %zu samples (plain: %zu)", t->chk.name, t->be[b]->name,
                     s->k->dst_layout ? "a layout of its own" : "plain", s->k->dst_bytes, n,
                     plain);
            return -1;
        }
        s->src = kern_alloc(n * t->z.src);
        s->dst = kern_alloc(n * t->z.dst);
        s->diff_src = kern_alloc(n * t->z.src);
        s->diff_dst = kern_alloc(n * t->z.dst);
        s->dw = kern_alloc(t->z.weights);
        s->db = kern_alloc(t->z.bias);
        s->mean = kern_alloc(t->z.stats);
        s->var = kern_alloc(t->z.stats);
        s->ws = st_alloc_aligned(s->k->workspace_bytes + 64, "workspace", &err);
        s->scratch = st_alloc_aligned(s->k->scratch_bytes + 64, "scratch", &err);
        assert_non_null(s->ws);
        assert_non_null(s->scratch);
    }
    t->src = kern_alloc(n * t->z.src);
    t->w = kern_alloc(t->z.weights);
    t->bias = kern_alloc(t->z.bias);
    t->diff_dst = kern_alloc(n * t->z.dst);
    t->acc = kern_alloc(n * t->z.src);
    t->copy = kern_alloc(n * (t->z.src > t->z.dst ? t->z.src : t->z.dst));
    st_rng rng;
    st_rng_seed(&rng, 42, 3);
    for (size_t i = 0; i < t->z.weights; i++) /* batch norm: scales around 1 */
        t->w[i] = d.base.kind == ST_K_BNORM ? cf_uniform(&rng, 0.5f, 1.5f)
                                            : cf_uniform(&rng, -0.5f, 0.5f);
    for (size_t i = 0; i < t->z.bias; i++)
        t->bias[i] = cf_uniform(&rng, -0.3f, 0.3f);
    return 0;
}

static void kern_teardown(kern_ctx *t)
{
    for (int b = 0; b < 2; b++) {
        kern_side *s = &t->s[b];
        if (s->k)
            s->k->ops->destroy(s->k);
        if (s->ctx)
            t->be[b]->ctx_destroy(s->ctx);
        float *bufs[] = {s->src, s->dst, s->diff_src, s->diff_dst, s->dw, s->db, s->mean,
                         s->var};
        for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
            st_free_aligned(bufs[i]);
        st_free_aligned(s->ws);
        st_free_aligned(s->scratch);
    }
    float *bufs[] = {t->src, t->w, t->bias, t->diff_dst, t->acc, t->copy};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        st_free_aligned(bufs[i]);
}

/* A buffer the call must not change, compared with its copy. */
static void kern_unchanged(kern_ctx *t, int b, const char *call, const char *what,
                           const float *p, const float *copy, size_t count)
{
    if (memcmp(p, copy, count * sizeof *p) == 0)
        return;
    size_t i = 0;
    while (memcmp(&p[i], &copy[i], sizeof *p) == 0)
        i++;
    t->chk.failed++;
    print_error("%s (n=%d): %s backend: %s changed %s (first at value %zu of %zu: %.9g, was "
                "%.9g)\n", t->chk.name, t->chk.ns, t->be[b]->name, call, what, i, count, p[i],
                copy[i]);
}

static int kern_call(kern_ctx *t, int b, const char *call,
                     st_status (*fn)(st_kernel *, const st_kargs *, st_error *),
                     const st_kargs *a, char *msg, size_t size)
{
    st_error err = {0};
    if (fn(t->s[b].k, a, &err) == ST_OK)
        return 0;
    snprintf(msg, size, "%s (n=%d): %s backend: %s failed: %s", t->chk.name, t->chk.ns,
             t->be[b]->name, call, err.msg);
    return -1;
}

/* Every entry point of both kernels on ns samples, and the comparisons. */
static int kern_pass(kern_ctx *t, int ns, uint64_t seed, char *msg, size_t size)
{
    const cf_case *c = t->chk.c;
    const int in_place = c->flags & CF_IN_PLACE;
    const size_t n_src = (size_t)ns * t->z.src, n_dst = (size_t)ns * t->z.dst;
    t->chk.ns = ns;
    st_rng rng;
    st_rng_seed(&rng, seed, 4);
    for (size_t i = 0; i < n_src; i++)
        t->src[i] = cf_uniform(&rng, -1.0f, 1.0f);
    for (size_t i = 0; i < n_dst; i++)
        t->diff_dst[i] = cf_uniform(&rng, -1.0f, 1.0f);
    for (size_t i = 0; i < n_src; i++)
        t->acc[i] = cf_uniform(&rng, -1.0f, 1.0f);
    const int stats = t->z.stats > 0;

    /* forward, training: dst (and batch norm's statistics) */
    for (int b = 0; b < 2; b++) {
        kern_side *s = &t->s[b];
        memcpy(s->src, t->src, n_src * sizeof *s->src);
        float *dst = in_place ? s->src : s->dst;
        if (!in_place)
            kern_nan(dst, n_dst);
        kern_nan(s->mean, t->z.stats);
        kern_nan(s->var, t->z.stats);
        st_kargs a = {.n = ns, .src = s->src, .dst = dst, .weights = t->w, .bias = t->bias,
                      .mean = stats ? s->mean : NULL, .var = stats ? s->var : NULL,
                      .training = 1, .workspace = s->ws, .scratch = s->scratch};
        if (kern_call(t, b, "forward", s->k->ops->forward, &a, msg, size))
            return -1;
        if (in_place)
            memcpy(s->dst, s->src, n_dst * sizeof *s->dst);
        else
            kern_unchanged(t, b, "forward", "src", s->src, t->src, n_src);
    }
    check_compare(&t->chk, K_OUT, "dst", t->s[0].dst, t->s[1].dst, n_dst);
    if (stats) {
        check_compare(&t->chk, K_STAT, "batch mean", t->s[0].mean, t->s[1].mean, t->z.stats);
        check_compare(&t->chk, K_STAT, "batch variance", t->s[0].var, t->s[1].var, t->z.stats);
    }

    /* A kernel that applies its ReLU's derivative itself (act_in_backward)
     * takes diff_dst before it, the reference's after it: both are given
     * diff_dst masked by the reference's dst > 0, on which a second mask
     * changes nothing (a ReLU's derivative is 0 or 1). */
    if (t->s[1].k->act_in_backward) {
        assert_int_equal(c->k.base.kind, ST_K_BNORM);
        assert_int_equal(c->k.bnorm.act, ST_ACT_RELU);
        st_act_backward(ST_ACT_RELU, t->s[0].dst, t->diff_dst, t->diff_dst, n_dst);
    }

    /* backward, as the layers call it: weights first, then data (each
     * side's own src and dst, and the statistics its forward left) */
    const int has_bwd_data = c->k.base.kind != ST_K_SOFTMAX;
    for (int b = 0; b < 2 && has_bwd_data; b++) {
        kern_side *s = &t->s[b];
        memcpy(t->copy, s->dst, n_dst * sizeof *t->copy);
        st_kargs a = {.n = ns, .src = s->src, .dst = s->dst, .weights = t->w, .bias = t->bias,
                      .mean = stats ? s->mean : NULL, .var = stats ? s->var : NULL,
                      .training = 1, .diff_dst = s->diff_dst, .workspace = s->ws,
                      .scratch = s->scratch};
        memcpy(s->diff_dst, t->diff_dst, n_dst * sizeof *s->diff_dst);
        if (s->k->ops->backward_weights) {
            kern_nan(s->dw, t->z.weights);
            kern_nan(s->db, t->z.bias);
            a.diff_weights = s->dw;
            a.diff_bias = t->z.bias ? s->db : NULL;
            if (kern_call(t, b, "backward_weights", s->k->ops->backward_weights, &a, msg, size))
                return -1;
            kern_unchanged(t, b, "backward_weights", "diff_dst", s->diff_dst, t->diff_dst,
                           n_dst);
        } else if (t->z.weights) { /* batch norm: with the data gradient */
            kern_nan(s->dw, t->z.weights);
            kern_nan(s->db, t->z.bias);
            a.diff_weights = s->dw;
            a.diff_bias = s->db;
        }
        /* overwriting; in place diff_src is diff_dst */
        a.diff_src = in_place ? s->diff_dst : s->diff_src;
        if (!in_place)
            kern_nan(s->diff_src, n_src);
        if (kern_call(t, b, "backward_data", s->k->ops->backward_data, &a, msg, size))
            return -1;
        if (in_place) {
            memcpy(s->diff_src, s->diff_dst, n_src * sizeof *s->diff_src);
            memcpy(s->diff_dst, t->diff_dst, n_dst * sizeof *s->diff_dst);
        } else {
            kern_unchanged(t, b, "backward_data", "diff_dst", s->diff_dst, t->diff_dst, n_dst);
        }
        kern_unchanged(t, b, "backward", "dst", s->dst, t->copy, n_dst);
    }
    if (has_bwd_data) {
        check_compare(&t->chk, K_DX, "diff_src", t->s[0].diff_src, t->s[1].diff_src, n_src);
        if (t->z.weights)
            check_compare(&t->chk, K_W, "diff_weights", t->s[0].dw, t->s[1].dw, t->z.weights);
        if (t->z.bias)
            check_compare(&t->chk, K_B, "diff_bias", t->s[0].db, t->s[1].db, t->z.bias);
    }

    /* backward_data again, accumulating into diff_src = acc (not in place:
     * the layers accumulate into another layer's gradient) */
    for (int b = 0; b < 2 && has_bwd_data && !in_place; b++) {
        kern_side *s = &t->s[b];
        memcpy(s->diff_src, t->acc, n_src * sizeof *s->diff_src);
        st_kargs a = {.n = ns, .src = s->src, .dst = s->dst, .weights = t->w, .bias = t->bias,
                      .mean = stats ? s->mean : NULL, .var = stats ? s->var : NULL,
                      .training = 1, .diff_dst = s->diff_dst, .diff_src = s->diff_src,
                      .accumulate = 1, .workspace = s->ws, .scratch = s->scratch,
                      .diff_weights = t->z.weights && !s->k->ops->backward_weights ? s->dw
                                                                                  : NULL,
                      .diff_bias = t->z.bias && !s->k->ops->backward_weights ? s->db : NULL};
        if (kern_call(t, b, "backward_data (accumulate)", s->k->ops->backward_data, &a, msg,
                      size))
            return -1;
    }
    if (has_bwd_data && !in_place)
        check_compare(&t->chk, K_DX, "diff_src accumulated", t->s[0].diff_src,
                      t->s[1].diff_src, n_src);

    /* forward, inference (batch norm reads the statistics: the reference's
     * batch statistics on both sides) */
    for (int b = 0; b < 2; b++) {
        kern_side *s = &t->s[b];
        memcpy(s->src, t->src, n_src * sizeof *s->src);
        if (stats) {
            memcpy(s->mean, t->s[0].mean, t->z.stats * sizeof *s->mean);
            memcpy(s->var, t->s[0].var, t->z.stats * sizeof *s->var);
        }
        float *dst = in_place ? s->src : s->dst;
        if (!in_place)
            kern_nan(dst, n_dst);
        st_kargs a = {.n = ns, .src = s->src, .dst = dst, .weights = t->w, .bias = t->bias,
                      .mean = stats ? s->mean : NULL, .var = stats ? s->var : NULL,
                      .training = 0, .workspace = s->ws, .scratch = s->scratch};
        if (kern_call(t, b, "forward (inference)", s->k->ops->forward, &a, msg, size))
            return -1;
        if (in_place)
            memcpy(s->dst, s->src, n_dst * sizeof *s->dst);
    }
    check_compare(&t->chk, K_OUT, "dst (inference)", t->s[0].dst, t->s[1].dst, n_dst);
    return 0;
}

static void kern_run(const cf_case *c, const st_backend *be, const char *impl)
{
    kern_ctx t;
    char msg[1200];
    double t0 = cf_now();
    if (kern_setup(&t, c, be, impl, msg, sizeof msg) != 0 ||
        kern_pass(&t, c->n, 300 + (uint64_t)c->n, msg, sizeof msg) != 0 ||
        (c->n_small && kern_pass(&t, c->n_small, 400 + (uint64_t)c->n_small, msg, sizeof msg))) {
        kern_teardown(&t);
        fail_msg("%s", msg);
    }
    check_report(&t.chk, cf_now() - t0, "");
    long failed = t.chk.failed;
    char name[96];
    snprintf(name, sizeof name, "%s", t.chk.name);
    kern_teardown(&t);
    if (failed)
        fail_msg("%s: %ld check(s) failed (see above)", name, failed);
}

/* ---- the survey: what each case covers, found by building it ---- */

/* The layer types, from the cfg reader's table (aliases left out). */
static char g_type_buf[512];
static const char *g_types[CF_MAX_TYPES];
static const st_layer_ops *g_type_ops[CF_MAX_TYPES];
static int g_n_types;

typedef struct cf_cover {
    unsigned types;                      /* bit j: a layer of g_types[j] */
    unsigned tensor_types;               /* bit j: such a layer with tensors */
    unsigned kinds;                      /* bit k: a kernel of kind k */
    unsigned foreign[CF_MAX_BACKENDS];   /* bit i: layer i's output in the backend's own
                                          * layout (cases with foreign bits; the default
                                          * convolution implementation) */
    char error[1100];
} cf_cover;

static cf_cover g_cover[N_CASES];
static unsigned g_seen_kinds; /* set by survey_kernel_create */

static st_status survey_kernel_create(st_bctx *ctx, const st_kdesc *d, st_kernel **k,
                                      st_error *err)
{
    if ((int)d->kind >= 0 && (int)d->kind < ST_K_COUNT)
        g_seen_kinds |= 1u << d->kind;
    return g_ref->kernel_create(ctx, d, k, err);
}

static void types_load(void)
{
    st_layer_type_list(g_type_buf, sizeof g_type_buf);
    for (char *name = strtok(g_type_buf, ", "); name; name = strtok(NULL, ", ")) {
        if (g_n_types == CF_MAX_TYPES) {
            fprintf(stderr, "more than %d layer types: raise CF_MAX_TYPES\n", CF_MAX_TYPES);
            exit(1);
        }
        g_types[g_n_types] = name;
        g_type_ops[g_n_types++] = st_layer_find(name);
    }
}

/* Build case i's net and a reference replica through a backend that
 * records the kinds its kernels are of. */
static void survey_case(int i)
{
    const cf_case *c = &cases[i];
    cf_cover *cv = &g_cover[i];
    if (!c->cfg) {
        cv->kinds = 1u << c->k.base.kind;
        return;
    }
    st_backend recorder = *g_ref;
    recorder.kernel_create = survey_kernel_create;
    st_cfg cfg;
    st_hparams hp;
    st_net net;
    st_replica r;
    st_error err = {0};
    if (tl_build(c->name, c->cfg, &cfg, &hp, &net, &err) != ST_OK) {
        snprintf(cv->error, sizeof cv->error, "building the net: %s", err.msg);
        return;
    }
    for (int l = 0; l < net.n_layers; l++)
        for (int j = 0; j < g_n_types; j++)
            if (net.layers[l]->ops == g_type_ops[j])
                cv->types |= 1u << j;
    for (int p = 0; p < net.params.n; p++)
        for (int j = 0; j < g_n_types; j++)
            if (net.layers[net.params.p[p].layer]->ops == g_type_ops[j])
                cv->tensor_types |= 1u << j;
    st_replica_opts o = {.n = c->n, .training = 1, .input_delta = 1,
                         .backend = {.intra_threads = 1}};
    g_seen_kinds = 0;
    if (st_replica_init(&r, &net, &recorder, &o, &err) != ST_OK)
        snprintf(cv->error, sizeof cv->error, "a reference replica: %s", err.msg);
    else
        st_replica_free(&r);
    cv->kinds = g_seen_kinds;
    /* the layouts each backend gives the layers, planned (nothing runs) */
    const int sizes[2] = {c->n, c->n_small};
    o.batch_sizes = sizes;
    o.n_batch_sizes = c->n_small ? 2 : 1;
    o.input_delta = !(c->flags & CF_NO_INPUT_DELTA);
    for (int b = 1; b < g_n_backends && c->foreign && !cv->error[0]; b++) {
        size_t bytes;
        if (st_replica_plan(&r, &net, g_backends[b], &o, &bytes, &err) != ST_OK) {
            snprintf(cv->error, sizeof cv->error, "a %s replica's plan: %s",
                     g_backends[b]->name, err.msg);
            break;
        }
        for (int l = 0; l < net.n_layers && l < 32; l++)
            if (r.out_layout[l])
                cv->foreign[b] |= 1u << l;
        st_replica_free(&r);
    }
    st_net_free(&net);
    st_cfg_free(&cfg);
}

/* What the exporters need of layer type j (layers/layer.h): what ONNX
 * export writes or why it cannot; with tensors (has_tensors), their place
 * in Darknet's .weights. Returns how many are missing, each printed. */
static int export_missing(int j, int has_tensors)
{
    const st_layer_ops *ops = g_type_ops[j];
    int missing = 0;
    if (!ops->graph == !ops->no_graph) {
        print_error("layer type [%s] has %s: give its ops one of them, the op the "
                    "exporters write (graph) or why they cannot (no_graph)\n", g_types[j],
                    ops->graph ? "both graph and no_graph" : "neither graph nor no_graph");
        missing++;
    }
    if (has_tensors && !ops->darknet) {
        print_error("layer type [%s] registers tensors and its ops list none for Darknet's "
                    ".weights (darknet): such a network cannot be saved as .weights\n",
                    g_types[j]);
        missing++;
    }
    return missing;
}

/* Every layer type and every kernel kind has a case; every type what the
 * exporters need. */
static void coverage(void **state)
{
    (void)state;
    int missing = 0, broken = 0;
    unsigned tensor_types = 0;
    int type_cases[CF_MAX_TYPES] = {0}, kind_cases[ST_K_COUNT] = {0};
    for (int i = 0; i < N_CASES; i++) {
        int t = 0;
        while (cases[i].cfg && t < g_n_types && strcmp(g_types[t], cases[i].type) != 0)
            t++;
        if (g_cover[i].error[0]) {
            print_error("case %s: %s\n", cases[i].name, g_cover[i].error);
            broken++;
        } else if (cases[i].cfg && (t == g_n_types || !(g_cover[i].types >> t & 1u))) {
            print_error("case %s: test design: the type it tests, [%s], is no layer of its "
                        "net\n", cases[i].name, cases[i].type);
            broken++;
        }
        for (int j = 0; j < g_n_types; j++)
            type_cases[j] += g_cover[i].types >> j & 1u;
        tensor_types |= g_cover[i].tensor_types;
        for (int k = 0; k < ST_K_COUNT; k++)
            kind_cases[k] += g_cover[i].kinds >> k & 1u;
    }
    for (int j = 0; j < g_n_types; j++) {
        print_message("  layer type %-14s %3d case(s)\n", g_types[j], type_cases[j]);
        if (!type_cases[j]) {
            print_error("layer type [%s] (the cfg reader accepts it) has no conformance case: "
                        "add a network case with it to tests/unit/test_conformance.c\n",
                        g_types[j]);
            missing++;
        }
        missing += export_missing(j, tensor_types >> j & 1u);
    }
    for (int k = 0; k < ST_K_COUNT; k++) {
        print_message("  kernel kind %-13s %3d case(s)\n", st_kind_name((st_kind)k), kind_cases[k]);
        if (!kind_cases[k]) {
            print_error("kernel kind %d (%s, ops/kdesc.h) has no conformance case: add a "
                        "kernel case of that kind, or a network that makes one, to "
                        "tests/unit/test_conformance.c\n", k, st_kind_name((st_kind)k));
            missing++;
        }
    }
    if (missing || broken)
        fail_msg("%d layer type(s) or kernel kind(s) without a case or without what the "
                 "exporters need, %d case(s) that do not build", missing, broken);
}

/* Each case that exists to feed a layout of a backend's own to the next
 * layer (its foreign bits) still does on at least one backend: a backend
 * may compute some layers in plain layouts (the cpe backend runs batch
 * norm on the MPE, plain), but a case none feeds such a layout any more
 * has lost its purpose. */
static void foreign_layouts(void **state)
{
    (void)state;
    int lost = 0;
    for (int i = 0; i < N_CASES; i++) {
        const cf_case *c = &cases[i];
        if (!c->foreign || g_cover[i].error[0])
            continue;
        unsigned met = 0;
        char line[256];
        int len = snprintf(line, sizeof line, "  %-30s layers", c->name);
        for (int l = 0; l < 32 && len > 0 && (size_t)len < sizeof line; l++)
            if (c->foreign >> l & 1u)
                len += snprintf(line + len, sizeof line - (size_t)len, " %d", l);
        for (int b = 1; b < g_n_backends && len > 0 && (size_t)len < sizeof line; b++) {
            unsigned got = g_cover[i].foreign[b] & c->foreign;
            met |= got;
            len += snprintf(line + len, sizeof line - (size_t)len, "  %s: %s", g_backends[b]->name,
                            got == c->foreign ? "all" : got ? "some" : "none");
        }
        print_message("%s\n", line);
        if (met != c->foreign) {
            print_error("case %s: test design: layer(s) 0x%x of the case exist to feed a "
                        "layout of a backend's own to the next layer, and no backend gives "
                        "them one\n", c->name, c->foreign & ~met);
            lost++;
        }
    }
    if (lost)
        fail_msg("%d case(s) no longer feed a backend's own layout (see above)", lost);
}

/* A value that is no kernel kind: every backend refuses it with an error
 * that names the backend and the value, and creates nothing (its tables are
 * indexed by kind, with no default). */
static void unknown_kind(void **state)
{
    (void)state;
    for (int b = 0; b < g_n_backends; b++) {
        const st_backend *be = g_backends[b];
        st_backend_opts o = {.intra_threads = 1};
        st_bctx *ctx = NULL;
        st_error err = {0};
        assert_int_equal(be->ctx_create(&o, &ctx, &err), ST_OK);
        st_softmax_desc d = {KBASE(ST_K_SOFTMAX, "0.bogus"), .count = 4, .groups = 1,
                             .temperature = 1.0f};
        d.base.kind = (st_kind)ST_K_COUNT;
        st_kernel *k = NULL;
        assert_int_equal(be->kernel_create(ctx, &d.base, &k, &err), ST_EINTERNAL);
        assert_null(k);
        char want[32];
        snprintf(want, sizeof want, "kernel kind %d", ST_K_COUNT);
        print_message("  %-5s %s\n", be->name, err.msg);
        assert_non_null(strstr(err.msg, want));
        be->ctx_destroy(ctx);
    }
}

/* ---- one case on one backend ---- */

typedef struct cf_run {
    const cf_case *c;
    int covers_conv;
    const st_backend *be;
    char name[96]; /* "<backend>/<case>" */
} cf_run;

static void run_case(void **state)
{
    const cf_run *run = *state;
    const cf_case *c = run->c;
    const st_backend *be = run->be;
    void (*fn)(const cf_case *, const st_backend *, const char *) = c->cfg ? net_run : kern_run;
    if (c->choices) {
        if (!be->conv_impls) {
            print_message("SKIP %s: the case gives kernel choices, and the %s backend has no "
                          "convolution implementations to choose among (conv_impls)\n",
                          run->name, be->name);
            skip();
        }
        fn(c, be, "auto");
        return;
    }
    /* each implementation, the first (the default) as NULL, then measured */
    fn(c, be, NULL);
    if (!be->conv_impls || !run->covers_conv)
        return;
    for (int i = 1; be->conv_impls[i]; i++)
        fn(c, be, be->conv_impls[i]);
    fn(c, be, "auto");
}

static int print_summary(void **state)
{
    (void)state;
    print_message("largest metric (max|got - ref| / max|ref|) per backend, type and tensor "
                  "kind (ref: against itself):\n");
    for (int i = 0; i < g_n_worst; i++) {
        const cf_worst *w = &g_worst[i];
        for (int k = 0; k < K_COUNT; k++)
            if (w->m[k] >= 0.0)
                print_message("  %-5s %-15s %-16s %.2e  (%s)\n", w->be->name, w->type,
                              tensor_names[k], w->m[k], w->where[k]);
    }
    return 0;
}

int main(void)
{
    backends_load();
    types_load();
    for (int i = 0; i < N_CASES; i++)
        survey_case(i);
    const char *filter = tl_case_filter();
    static cf_run runs[N_CASES * CF_MAX_BACKENDS];
    static struct CMUnitTest tests[3 + N_CASES * CF_MAX_BACKENDS];
    size_t n_tests = 0;
    tests[n_tests++] = (struct CMUnitTest)cmocka_unit_test(coverage);
    tests[n_tests++] = (struct CMUnitTest)cmocka_unit_test(foreign_layouts);
    tests[n_tests++] = (struct CMUnitTest)cmocka_unit_test(unknown_kind);
    char backends[128] = "";
    for (int b = 0; b < g_n_backends; b++)
        snprintf(backends + strlen(backends), sizeof backends - strlen(backends), "%s%s",
                 b ? ", " : "", g_backends[b]->name);
    print_message("backends: %s (ref: the oracle, also against itself); %d cases%s%s\n",
                  backends, N_CASES, filter ? "; cases matching " : "", filter ? filter : "");
    for (int b = 0; b < g_n_backends; b++)
        for (int i = 0; i < N_CASES; i++) {
            cf_run *r = &runs[n_tests - 3];
            r->c = &cases[i];
            r->covers_conv = (g_cover[i].kinds >> ST_K_CONV) & 1u;
            r->be = g_backends[b];
            snprintf(r->name, sizeof r->name, "%s/%s", g_backends[b]->name, cases[i].name);
            if (!tl_case_selected(filter, r->name))
                continue;
            tests[n_tests++] = (struct CMUnitTest){r->name, run_case, NULL, NULL, r};
        }
    if (filter && n_tests == 3) {
        fprintf(stderr, "ST_TEST_FILTER: no case matches \"%s\" (names are <backend>/<case>)\n",
                filter);
        return 1;
    }
    return _cmocka_run_group_tests("conformance", tests, n_tests, NULL, print_summary);
}
