/* The compute-backend interface: kernels for the heavy per-layer operations.
 *
 * A backend (ref, dnnl, cpe) knows nothing about networks: it is handed one
 * kernel descriptor at a time (a common header with a kind tag, then the
 * kind's fields) and returns a kernel with forward / backward_data /
 * backward_weights entry points. Each worker has its own backend context, and
 * every kernel belongs to the context that created it, so workers never share
 * backend state.
 *
 * Conventions for all kernels:
 * - tensors are float, logically NCHW, with the sample index outermost; a
 *   backend may keep activations in its own layout (oneDNN's blocked ones):
 *   the descriptor says the layout src comes in (NULL: plain NCHW), and the
 *   kernel says the layout and size of its dst (plain when dst_plain is
 *   asked for). diff_src has src's layout, diff_dst has dst's, both f32
 *   where an activation is stored as bf16 (st_kdesc.dst_bf16);
 * - weights and their gradients are always plain ([oc, ic/groups, kh, kw],
 *   [out, in]); a backend reorders them for itself if it wants to;
 * - n is the number of samples of a call: one of the descriptor's
 *   batch_sizes (backends that generate code per shape build them all when
 *   the kernel is created, never during training);
 * - forward applies the descriptor's activation (fused where the backend can);
 * - backward_* receive diff_dst already multiplied by the activation's
 *   derivative (the layer runs an ST_K_ACT kernel backward first), unless
 *   the kernel sets act_in_backward (a batch norm whose library fuses its
 *   ReLU, forward and backward);
 * - a backward_data that follows backward_weights with the same diff_dst
 *   pointer and workspace gets diff_dst unchanged (a backend may convert
 *   it once for both);
 * - backward_data overwrites diff_src, or adds to it when accumulate is set;
 * - backward_weights overwrites diff_weights / diff_bias;
 * - kernels whose library computes the data and parameter gradients in one
 *   call (batch norm) do both in backward_data and have no backward_weights;
 * - workspace (workspace_bytes) persists from forward to backward of the same
 *   samples; scratch (scratch_bytes) is only valid during one call. Both are
 *   owned by the worker and passed in st_kargs.
 *
 * Adding a backend: a folder src/backends/<name>/ with its ops table (an
 * st_backend: a kernel of every kind, ops/kdesc.h's ST_KINDS, and the
 * capabilities it has, hooks below) and its row in src/backends/registry.c;
 * test_conformance then runs it against the reference backend. */
#ifndef ST_BACKEND_H
#define ST_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "backends/choices.h"
#include "base/status.h"
#include "ops/bf16.h"
#include "ops/kdesc.h"
#include "ops/solver.h"

/* Arguments of one kernel call. Unused pointers are NULL. */
typedef struct st_kargs {
    int n;
    const float *src;    /* [n, input] */
    float *dst;          /* [n, output]: written by forward, read by backward */
    const float *weights;
    /* The weights rounded to bf16 (the same shape and order as weights),
     * made once an iteration for every worker by st_backend.bf16_convert:
     * given to the convolutions and inner products of a context created
     * with st_backend_opts.weights_bf16 (then never NULL), which read them
     * instead of converting weights; NULL elsewhere, where a kernel in
     * bf16 rounds weights itself. */
    const uint16_t *weights_bf16;
    const float *bias;
    float *mean, *var;   /* batch norm statistics, see st_bnorm_desc */
    int training;
    float *diff_src;     /* NULL: the input needs no gradient */
    int accumulate;      /* add into diff_src */
    const float *diff_dst;
    float *diff_weights;
    float *diff_bias;
    void *workspace;
    void *scratch;
} st_kargs;

typedef struct st_kernel st_kernel;

typedef struct st_kernel_ops {
    st_status (*forward)(st_kernel *k, const st_kargs *a, st_error *err);
    st_status (*backward_data)(st_kernel *k, const st_kargs *a, st_error *err);
    st_status (*backward_weights)(st_kernel *k, const st_kargs *a, st_error *err);
    void (*destroy)(st_kernel *k);
} st_kernel_ops;

struct st_kernel {
    const st_kernel_ops *ops;
    st_kind kind;
    size_t workspace_bytes;
    size_t scratch_bytes;
    const void *dst_layout; /* NULL: plain; owned by the kernel */
    size_t dst_bytes;       /* dst of n samples (diff_dst: the same layout in f32) */
    /* dst is stored as bf16 (asked by st_kdesc.dst_bf16; dst_layout says
     * how): diff_dst, f32, takes twice dst_bytes */
    int dst_bf16;
    /* backward_data applies the descriptor's activation derivative itself
     * (from what its forward kept in the workspace): it takes diff_dst
     * before that derivative, and the layer runs no ST_K_ACT kernel */
    int act_in_backward;
};

typedef struct st_bctx st_bctx; /* a backend's per-worker context */

/* Elementwise work as the passes over contiguous floats that make it, in
 * groups: `runs` passes per sample over `values` floats each (runs 0: one
 * pass over the batch, `values` floats per sample), each float read or
 * written `streams` times in all (4 bytes each). A layer's work in plain C
 * (st_backend.host_work), or, in a backend, the helper passes a kernel
 * makes beside its own work. */
#define ST_STREAM_GROUPS 16 /* a route layer's inputs (layer.h's ST_MAX_SRC) */
typedef struct st_stream_work {
    int groups;
    struct {
        double runs;
        size_t values;
        double streams;
    } group[ST_STREAM_GROUPS];
} st_stream_work;

/* Adds a group to w; a group beyond ST_STREAM_GROUPS is left out. */
static inline void st_stream_work_add(st_stream_work *w, double runs, size_t values,
                                      double streams)
{
    if (w->groups < ST_STREAM_GROUPS) {
        w->group[w->groups].runs = runs;
        w->group[w->groups].values = values;
        w->group[w->groups].streams = streams;
        w->groups++;
    }
}

typedef struct st_backend_opts {
    int intra_threads; /* intra-op threads of this worker (1: single-threaded kernels) */
    int worker;        /* worker index, for messages */
    /* Convolution implementation, for a backend with several (conv_impls):
     * "auto" (measured at kernel creation, the choice shared through
     * choices), or one of its names; NULL: its first, unmeasured. */
    const char *conv_impl;
    st_choices *choices; /* the process's kernel choices (NULL: none kept) */
    /* What the convolutions and inner products compute in (ops/bf16.h);
     * only a precision the backend's precision_supported accepts. */
    st_precision precision;
    /* In bf16: the convolutions and inner products are given their
     * weights rounded to bf16 as well (st_kargs.weights_bf16), one copy
     * for every worker, and convert none themselves; 0: each kernel
     * rounds the weights it reads at every call. */
    int weights_bf16;
    /* For a backend that predicts another machine's time: the description
     * of that machine (NULL: the backend's built-in one). */
    const char *machine_path;
} st_backend_opts;

/* What a run asks of a backend that predicts another machine's time
 * (st_backend.run_begin). */
typedef struct st_backend_run {
    int cost_only;
    const char *report_path;
    const char *model_path;
} st_backend_run;

typedef struct st_backend {
    const char *name;
    /* Names st_backend_opts.conv_impl may take besides "auto", the first
     * being the default when measuring is not asked for; NULL-terminated,
     * or NULL: one implementation only. */
    const char *const *conv_impls;
    /* For a backend with conv_impls: the syntax of its choices' values
     * (choices.h), and what makes a measured choice valid elsewhere (the
     * library's version, the instruction set, the CPU model, the
     * precision) as one line of text into buf [size], for the choice
     * cache (choice_cache.h). */
    st_choice_syntax choice_syntax;
    void (*choice_context)(char *buf, size_t size);
    /* Optional (NULL: fp32 only): whether the backend's convolutions and
     * inner products compute in precision p on this host (fp32: always).
     * When they do not, why into why [size], a clause that follows the
     * backend's name: what it lacks, and what to use instead. Asked
     * before any work (train/option_rules.c); a context is only created
     * with a precision it accepted. */
    int (*precision_supported)(st_precision p, char *why, size_t size);
    /* Optional (NULL: no): whether its bf16 convolutions may run on the
     * CPU's matrix tiles (AMX) on this host, so that --profile's roofline
     * takes the tiles' peak in bf16 instead of the vector units'. */
    int (*bf16_on_tiles)(void);
    /* Optional (NULL: st_bf16_convert, ops/bf16.h), for a backend with
     * bf16: dst [count] = src [count] rounded to bf16 exactly as its own
     * kernels round the weights they convert (oneDNN's conversion flushes
     * denormals where the CPU converts natively, not where it emulates),
     * on the worker's intra-op threads: the copy st_kargs.weights_bf16
     * is made by it, so that reading it gives the bits converting would. */
    st_status (*bf16_convert)(st_bctx *ctx, const float *src, uint16_t *dst, size_t count,
                              st_error *err);
    /* Optional (NULL: layouts are never compared, and an elementwise layer
     * over several inputs takes them plain): whether two of its kernels'
     * dst_layouts (non-NULL) place every value of one logical tensor at
     * the same byte, so that a layer may add them element by element. */
    int (*layouts_equal)(const void *a, const void *b);
    st_status (*ctx_create)(const st_backend_opts *o, st_bctx **ctx, st_error *err);
    void (*ctx_destroy)(st_bctx *ctx);
    st_status (*kernel_create)(st_bctx *ctx, const st_kdesc *d, st_kernel **k, st_error *err);
    /* Optional (NULL: the scheduler runs them on the host), for a backend
     * with a device of its own: this worker's slice [b, e) of the sliced
     * aggregation, grads[0][i] = scale * sum of grads[w][i] over
     * w = 0..n_grads-1 in that order (bitwise as st_ps_reduce_range), and
     * the solver update of the slice (bitwise as st_solver_update; solver
     * state plane k at state + k * stride). */
    st_status (*slice_reduce)(st_bctx *ctx, float *const *grads, int n_grads, size_t b,
                              size_t e, float scale, st_error *err);
    st_status (*slice_apply)(st_bctx *ctx, const st_solver_step *step, size_t b, size_t e,
                             float *weights, float *state, size_t stride, const float *g,
                             st_error *err);
    /* Optional: the worker has finished iteration iter, its update included. */
    void (*iteration_end)(st_bctx *ctx, long iter);
    /* Optional: during training the worker did work in plain C that no
     * kernel of this backend ran: layer `layer` (-1: the data layer's copy
     * of the batch into the input), called what, the passes over memory w
     * made over n samples in the pass (0 forward, 1 backward). A backend
     * that predicts another machine's time charges it there. */
    st_status (*host_work)(st_bctx *ctx, int layer, const char *what, int pass, int n,
                           const st_stream_work *w, st_error *err);
    /* Optional, for a backend that predicts another machine's time (NULL:
     * it has nothing to report, and the options asking for it are refused).
     * run_begin, before training: run->cost_only makes every launch only
     * count and cost, run->report_path (or NULL) is where the per-kernel
     * CSV goes, run->model_path (or NULL: the built-in one) the file of
     * the predicted machine's constants;
     * trace_start: write every iteration's predicted times to path. After
     * training, run_report prints the prediction a line at a time through
     * print and trace_finish completes the trace. */
    st_status (*run_begin)(st_bctx *ctx, const st_backend_run *run, st_error *err);
    st_status (*trace_start)(st_bctx *ctx, const char *path, st_error *err);
    st_status (*run_report)(st_bctx *ctx, int images_per_iteration, int workers, size_t params,
                            void (*print)(void *pctx, const char *line), void *pctx,
                            st_error *err);
    st_status (*trace_finish)(st_bctx *ctx, st_error *err);
} st_backend;

/* The backend called name; an unknown or unbuilt name is ST_EUSAGE naming
 * what is available. */
st_status st_backend_find(const char *name, const st_backend **out, st_error *err);

/* Whether be computes its convolutions and inner products in p on this
 * host (fp32: always; st_backend.precision_supported, NULL: fp32 only);
 * when not, why into why [size], a clause that follows the backend's
 * name. */
int st_backend_takes_precision(const st_backend *be, st_precision p, char *why, size_t size);

/* The backends' names into buf [size], from the registry's table: those
 * built into this binary (built_only) or all known, the last after
 * last_sep (", " or " or "). */
void st_backend_list(char *buf, size_t size, int built_only, const char *last_sep);

#endif
