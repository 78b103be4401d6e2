/* Internals of the `cpe` backend shared by its files, which call one way,
 * from the top: cpe_backend.c (the dispatch: contexts, kernel creation,
 * the slice and host work, an iteration's end); cpe_report.c (the
 * end-of-run report, the per-iteration trace and the report CSV);
 * cpe_conv.c (convolution, its strategies); cpe_kernels.c (bias and
 * activation, inner product, pooling, activations, the MPE's kernels);
 * cpe_layouts.c (the layouts at the kernels' edges); and at the bottom
 * cpe_kernel_common.c (what the kernel kinds share: scratch, input shape,
 * release) and cpe_account.c (the accounting and its names). */
#ifndef ST_CPE_BACKEND_INTERNAL_H
#define ST_CPE_BACKEND_INTERNAL_H

#include <stdio.h>

#include "backends/backend.h"
#include "base/fileio.h"
#include "cpe/cpe.h"
#include "cpe/kernels.h"

/* Passes a kernel accounts for; the slice work puts its gradient sum and
 * its update in the first two. */
enum { PASS_FWD, PASS_BWD_DATA, PASS_BWD_WEIGHTS, PASSES };
enum { WORK_SUM = PASS_FWD, WORK_UPDATE = PASS_BWD_DATA };

/* Convolution strategies. */
enum { CONV_EXPLICIT, CONV_IMPLICIT, CONV_STRATEGIES };

/* Training calls a conv pass spends trying the strategies (one each, those
 * that can run). */
#define CONV_TRIALS CONV_STRATEGIES

/* Predicted time of some work: CPE launches and MPE work. */
typedef struct cpe_account {
    st_cpe_counters cpe;
    double mpe_s;
} cpe_account;

/* Where a convolution trial's predicted time went: its launches' compute,
 * DMA wait, register communication, barriers and launch overhead, its MPE
 * work and its layout transformations (seconds each). The largest is the
 * trial's dominant cost, printed beside its time so that a choice between
 * close strategies says which mechanism decided it. */
typedef enum cpe_part {
    CPE_PART_COMPUTE,
    CPE_PART_DMA,
    CPE_PART_REGCOMM,
    CPE_PART_SYNC,
    CPE_PART_LAUNCH,
    CPE_PART_MPE,
    CPE_PART_LAYOUT,
    CPE_PARTS
} cpe_part;

typedef struct cpe_split {
    double s[CPE_PARTS];
} cpe_split;

/* A unit of accounted work: a kernel's passes, its layout transformations,
 * or the slice update. The first CONV_TRIALS iterations (where
 * convolutions try their strategies) are kept apart from the rest, which
 * are the steady state. */
typedef struct cpe_work {
    cpe_account now[PASSES];    /* the iteration in progress */
    cpe_account trials[PASSES]; /* the first CONV_TRIALS iterations */
    cpe_account steady[PASSES]; /* the iterations after them */
} cpe_work;

/* A tensor's layout between the kernels (backend.h's dst_layout), decided
 * at each call: what its producer wrote the values in, what the consumer
 * that wrote its gradient wrote that in; and its per-sample shape. */
typedef struct cpe_layout_state {
    st_cpe_layout data, diff;
    int c, h, w;
} cpe_layout_state;

typedef struct cpe_kernel {
    st_kernel base;
    struct st_bctx *ctx;
    st_kernel *mpe;          /* a reference kernel the MPE runs, or NULL */
    const char *where;       /* "CPEs" or "MPE" */
    char what[64];           /* the report's name of the kernel */
    int index;               /* creation order */
    st_conv_desc conv;       /* base.kind ST_K_CONV */
    st_cpe_conv_geom geom;   /* conv: one group's geometry */
    st_fc_desc fc;           /* base.kind ST_K_FC */
    st_pool_desc pool;       /* base.kind ST_K_POOL */
    st_act_desc act;         /* base.kind ST_K_ACT */
    int in_c, in_h, in_w;    /* one input sample's shape (conv, pool, MPE kinds) */
    cpe_layout_state *src_state; /* the producer's layout, or NULL: plain */
    cpe_layout_state own;    /* conv: this kernel's output layout */
    double mpe_flops[PASSES], mpe_bytes[PASSES]; /* MPE work per sample */
    st_stream_work streams[PASSES]; /* an MPE kind's helper passes beside its MPE work */
    int base_n;              /* conv: the batch the strategies were settled for */
    int runs[CONV_STRATEGIES][PASSES]; /* conv: whether the strategy can run the pass */
    char why_not[PASSES][192]; /* conv: why the implicit one cannot */
    long calls[PASSES];      /* conv: training calls so far */
    double tried[CONV_STRATEGIES][PASSES];     /* conv: seconds of each trial's kernels */
    double tried_layout[CONV_STRATEGIES][PASSES]; /* and of its layout transformations */
    cpe_split tried_split[CONV_STRATEGIES][PASSES]; /* where each trial's time went */
    int chosen[PASSES];      /* conv: the strategy after the trials */
    cpe_work work;           /* the kernel's own launches and MPE work */
    cpe_work layout;         /* the transformations it ran at its edges */
} cpe_kernel;

/* Work the worker did in plain C that no kernel ran (backend.h's
 * host_work: the data layer's copy, dropout, route, shortcut, the loss),
 * costed as swCaffe's helpers would make its passes (cpe_charge_streams). */
typedef struct cpe_host {
    int layer;               /* -1: the data layer */
    char what[32];
    int on_cpes;             /* some of its passes were CPE launches */
    cpe_work work;
} cpe_host;

/* Scratch buffers a context's kernels share (they run one at a time). */
enum { SCRATCH_IN, SCRATCH_DIFF, SCRATCH_OUT, SCRATCH_OUT2, SCRATCH_W, SCRATCH_W2, SCRATCH_COL,
       SCRATCH_ONES, SCRATCHES };

struct st_bctx {
    int worker;
    st_cpe_cluster *cg;
    cpe_kernel **kernels; /* every kernel, in creation order (layer order) */
    int n_kernels, cap;
    cpe_work reduce_update; /* the slice's gradient sum and update */
    cpe_host *host;         /* host work, in order of first report */
    int n_host, host_cap;
    size_t slice_floats;    /* the slice's parameters (last update) */
    long iterations;        /* iteration_end calls */
    int cost_only;
    st_output trace;        /* --cpe-trace (fileio.h); trace.f NULL when none */
    char report_path[4096]; /* the report CSV, or "" */
    char model_path[4096];  /* the SW26010 model file, or "" for the built-in one */
    char machine_path[4096]; /* the machine description, or "" for the built-in SW26010 */
    float *scratch[SCRATCHES];
    size_t scratch_floats[SCRATCHES];
};

/* ---- the accounting (cpe_account.c) ---- */

/* The names the report and the CSV use. */
extern const char *const cpe_conv_strategy_names[CONV_STRATEGIES];
extern const char *const cpe_pass_names[PASSES];
extern const char *const cpe_part_names[CPE_PARTS];

double cpe_account_seconds(const cpe_account *a);

/* The split of after - before (the same work's account at two times),
 * with layout seconds of transformations. */
cpe_split cpe_split_between(const cpe_account *before, const cpe_account *after, double layout);

/* The largest part of split, and its share of the sum (0 when empty). */
cpe_part cpe_split_dominant(const cpe_split *split, double *share);

/* Add a launch's counters c to w's pass when it succeeded (st) during
 * training; returns st. */
st_status cpe_charge(cpe_work *w, int pass, const st_cpe_counters *c, int training, st_status st);

/* End of an iteration for a unit of work. */
void cpe_work_close(cpe_work *w, long iteration);

/* ---- what the kernel kinds share (cpe_kernel_common.c) ---- */

/* Scratch buffer `which` of ctx, at least floats long (grown once, kept). */
st_status cpe_scratch(st_bctx *ctx, int which, size_t floats, float **out, st_error *err);

/* k's per-sample input shape: its producer's layout record when its input
 * comes from a cpe kernel, else c x h x w. */
void cpe_input_shape(cpe_kernel *k, int c, int h, int w);

/* swCaffe's elementwise helpers (sw_memcpy_f, sw_add_f, sw_mul_f, ...)
 * launch the CPEs over CPE_LAUNCH_MIN_FLOATS floats or more and loop on
 * the MPE below that. */
#define CPE_LAUNCH_MIN_FLOATS 256

/* The passes s (over a batch of n) as swCaffe's helpers make them, charged
 * to w's pass: a pass of CPE_LAUNCH_MIN_FLOATS floats or more is a CPE
 * launch, costed at the rate the emulated CPEs stream (one launch copying
 * its floats, st_cpe_act_forward linear within scratch, emulated: its
 * launch's fixed cost counted once a pass, the rest runs x streams / 2
 * times); a shorter one is the MPE's, bytes at its bandwidth. *on_cpes
 * (or NULL) is set when some pass was a launch. */
st_status cpe_charge_streams(st_bctx *ctx, cpe_work *w, int pass, const st_stream_work *s, int n,
                             int training, int *on_cpes, st_error *err);

void cpe_kernel_destroy(st_kernel *base);

/* ---- layouts at the kernels' edges (cpe_layouts.c) ---- */

/* Per-sample shape of a tensor whose layout can change. */
typedef struct cpe_shape {
    int c, h, w;
} cpe_shape;

size_t cpe_shape_floats(const cpe_shape *s, int n);

/* t (n samples of shape s, in layout have) in layout want: t itself, or a
 * copy transformed on the CPEs into scratch slot, charged to k's layout
 * work of the pass. */
st_status cpe_layout_view(cpe_kernel *k, int pass, int training, int slot, const cpe_shape *s,
                          int n, const float *t, st_cpe_layout have, st_cpe_layout want,
                          const float **out, st_error *err);

/* dst (layout target, n samples of shape s) = result (layout have), or +=
 * it with accumulate; result is a scratch buffer. */
st_status cpe_layout_store(cpe_kernel *k, int pass, const cpe_shape *s, int n, float *result,
                           st_cpe_layout have, float *dst, st_cpe_layout target, int accumulate,
                           st_error *err);

/* The layout k's input comes in, and the one its output gradient comes in
 * (its own record's, or plain when its output is plain). */
st_cpe_layout cpe_src_data_layout(const cpe_kernel *k);
st_cpe_layout cpe_own_diff_layout(const cpe_kernel *k);

/* The layout a kernel that computes in `natural` writes its input gradient
 * in: its own choice when it overwrites a gradient that has a record, the
 * record's when it adds to it, plain without a record. Sets the record. */
st_cpe_layout cpe_diff_target(cpe_kernel *k, st_cpe_layout natural, int accumulate);

/* For kernels that compute on plain NCHW: their input (a->src, or its
 * transformed copy). */
st_status cpe_plain_src(cpe_kernel *k, const st_kargs *a, int pass, int training,
                        const float **out, st_error *err);

/* Where a kernel computing a plain NCHW input gradient writes it: to,
 * a->diff_src itself (add: whether to add to it, a->accumulate), or
 * scratch (stored; add 0) that cpe_plain_diff_finish stores into diff_src
 * in the layout its record says. */
typedef struct cpe_plain_diff {
    float *to;
    int stored, add;
} cpe_plain_diff;

st_status cpe_plain_diff_dst(cpe_kernel *k, const st_kargs *a, cpe_plain_diff *dx, st_error *err);

/* After the kernel wrote dx with status st: the store of a scratch
 * gradient when st is ST_OK; returns the status. */
st_status cpe_plain_diff_finish(cpe_kernel *k, const st_kargs *a, const cpe_plain_diff *dx,
                                st_status st, st_error *err);

/* ---- the kernels (cpe_conv.c, cpe_kernels.c) ---- */

/* y [n, channels, per_channel] += bias (NULL: none), then the activation;
 * charged to k's forward when training. */
st_status cpe_epilogue(cpe_kernel *k, float *y, const float *bias, int n, int channels,
                       size_t per_channel, st_act act, int training, st_error *err);

/* db [channels] = sum over samples and positions of dy [n, channels,
 * per_channel], charged to k's backward-weights. */
st_status cpe_bias_grad(cpe_kernel *k, float *db, const float *dy, int n, int channels,
                        size_t per_channel, st_error *err);

/* A kernel kind on this backend: its passes, where they run ("CPEs" or
 * "MPE", for the report) and its part of the kernel's creation (the name
 * of its report rows, its input shape, its state), which follows the
 * common part (cpe_backend.c). cpe_kind_<stem> for each kind of kdesc.h's
 * list: convolution in cpe_conv.c, the others in cpe_kernels.c;
 * cpe_backend.c's table lists them by st_kind. */
typedef struct cpe_kind {
    const st_kernel_ops *ops;
    const char *where;
    st_status (*setup)(cpe_kernel *k, const st_kdesc *d, st_error *err);
} cpe_kind;

#define CPE_KIND_DECL(kind, stem, name) extern const cpe_kind cpe_kind_##stem;
ST_KINDS(CPE_KIND_DECL)
#undef CPE_KIND_DECL

/* ---- the report (cpe_report.c) ---- */

/* Per iteration: the mean of a unit's passes over the steady iterations (or
 * over the trials when the run had no more), in ms. */
void cpe_work_ms(const struct st_bctx *ctx, const cpe_work *w, double ms[PASSES]);

/* The trace row of a unit for iteration it. */
void cpe_trace_row(FILE *f, long it, const char *what, const cpe_work *w);

#endif
