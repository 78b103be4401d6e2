/* Internals of the `cpe` backend shared by its two files: cpe.c (the
 * kernels, their strategies and layouts, the accounting) and cpe_report.c
 * (the end-of-run report, the per-iteration trace and the report CSV). */
#ifndef ST_BACKENDS_CPE_INTERNAL_H
#define ST_BACKENDS_CPE_INTERNAL_H

#include <stdio.h>

#include "backends/backend.h"
#include "cpe/cpe.h"
#include "cpe/kernels.h"

/* Passes a kernel accounts for; the slice work puts its gradient sum and
 * its update in the first two. */
enum { PASS_FWD, PASS_BWD_DATA, PASS_BWD_WEIGHTS, PASSES };
enum { WORK_SUM = PASS_FWD, WORK_UPDATE = PASS_BWD_DATA };

/* Convolution strategies, and the names the report and the CSV use. */
enum { CONV_EXPLICIT, CONV_IMPLICIT, CONV_STRATEGIES };
extern const char *const cpe_conv_strategy_names[CONV_STRATEGIES];
extern const char *const cpe_pass_names[PASSES];

/* Training calls a conv pass spends trying the strategies (one each, those
 * that can run). */
#define CONV_TRIALS CONV_STRATEGIES

/* Predicted time of some work: CPE launches and MPE work. */
typedef struct cpe_account {
    st_cpe_counters cpe;
    double mpe_s;
} cpe_account;

double cpe_account_seconds(const cpe_account *a);

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
    int base_n;              /* conv: the batch the strategies were settled for */
    int runs[CONV_STRATEGIES][PASSES]; /* conv: whether the strategy can run the pass */
    char why_not[PASSES][192]; /* conv: why the implicit one cannot */
    long calls[PASSES];      /* conv: training calls so far */
    double tried[CONV_STRATEGIES][PASSES];     /* conv: seconds of each trial's kernels */
    double tried_layout[CONV_STRATEGIES][PASSES]; /* and of its layout transformations */
    int chosen[PASSES];      /* conv: the strategy after the trials */
    cpe_work work;           /* the kernel's own launches and MPE work */
    cpe_work layout;         /* the transformations it ran at its edges */
} cpe_kernel;

/* Work the worker did in plain C that no kernel ran (backend.h's
 * host_work: the data layer's copy, dropout, route, shortcut, the loss),
 * costed on the MPE at its measured bandwidth. */
typedef struct cpe_host {
    int layer;               /* -1: the data layer */
    char what[32];
    cpe_work work;
} cpe_host;

/* Scratch buffers a context's kernels share (they run one at a time). */
enum { SCRATCH_IN, SCRATCH_DIFF, SCRATCH_OUT, SCRATCH_OUT2, SCRATCH_W, SCRATCH_W2, SCRATCH_COL,
       SCRATCH_FOLD, SCRATCHES };

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
    FILE *trace;            /* the trace's .partial, or NULL */
    char trace_path[4096];
    char report_path[4096]; /* the report CSV, or "" */
    float *scratch[SCRATCHES];
    size_t scratch_floats[SCRATCHES];
};

/* End of an iteration for a unit of work (cpe.c). */
void cpe_work_close(cpe_work *w, long iteration);

/* Per iteration: the mean of a unit's passes over the steady iterations (or
 * over the trials when the run had no more), in ms (cpe_report.c). */
void cpe_work_ms(const struct st_bctx *ctx, const cpe_work *w, double ms[PASSES]);

/* The trace row of a unit for iteration it (cpe_report.c). */
void cpe_trace_row(FILE *f, long it, const char *what, const cpe_work *w);

#endif
