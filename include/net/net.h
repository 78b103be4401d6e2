/* Networks: the layers built from a cfg (shared, immutable once built) and
 * replicas (one per worker: kernels, activations and gradients of its shard).
 *
 * A replica's activation arena holds, for every layer, its output and (when
 * training) the gradient at its output, both [n, out] in the layout the
 * backend chose for that output, plus the layers' workspace views and one
 * shared scratch region. An output is plain NCHW when a consumer computes
 * in plain C, and for the last layer and the class scores. The weights and the
 * gradient arenas are not the replica's: forward reads the one shared
 * weights arena, backward writes the gradient arena it is given. */
#ifndef ST_NET_H
#define ST_NET_H

#include <stdint.h>

#include "base/arena.h"
#include "backends/backend.h"
#include "base/cfg.h"
#include "net/hparams.h"
#include "layers/layer.h"
#include "base/log.h"
#include "ops/params.h"
#include "base/status.h"
#include "base/trace.h"

typedef struct st_net {
    st_layer **layers;
    int n_layers;
    st_shape input;       /* one sample */
    int output_layer;     /* the last layer that is not [cost]: class scores */
    int classes;          /* values per sample of output_layer */
    st_param_table params;
    double flops;         /* forward flops per sample (see st_layer) */
} st_net;

/* Build from every section after the first ([net]) of cfg; input is the
 * sample shape from [net]. Unknown sections and keys are errors. */
st_status st_net_build(st_net *net, st_cfg *cfg, st_shape input, const st_log *log,
                       st_error *err);
void st_net_free(st_net *net);

/* Load the cfg file at path, read its [net] section into hp and build the
 * layers: the steps every user of a cfg takes. A path ending in .onnx is
 * an ONNX model (net/onnx.h: the cfg translated from its graph, its [net]
 * section from hparams, or NULL: the sidecar); a cfg takes no hparams. On
 * failure nothing is left allocated. */
st_status st_net_load(const char *path, const char *hparams, st_cfg *cfg, st_hparams *hp,
                      st_net *net, const st_log *log, st_error *err);

/* Darknet's layer table. */
void st_net_print(const st_net *net, const st_log *log);

/* What one pass of layer i does for n samples, for the roofline of
 * --profile: flops (forward, backward-data, backward-weights: 2 per
 * multiply-add of convolutions and inner products) and the bytes it must
 * move at least: forward reads its inputs and weights and writes its
 * output; backward-data reads the output's gradient and the weights (layers
 * without weights: the saved input instead) and writes the input's gradient;
 * backward-weights reads the input and the output's gradient and writes the
 * weights' gradient. */
typedef struct st_pass_work {
    double flops[3], bytes[3];
} st_pass_work;
st_pass_work st_net_pass_work(const st_net *net, int i, int n);

/* A hash of the layer types, shapes and parameter layout: two nets with the
 * same hash can exchange weights. */
uint64_t st_net_hash(const st_net *net);

/* Whether every float of an arena [net->params.count] (weights, or a plane
 * of solver state) is finite; if not, where the first non-finite one is
 * goes to buf: "layer 2 [connected] (cfg line 20): 2.biases[0] is nan". */
int st_net_arena_finite(const st_net *net, const float *arena, char *buf, size_t size);

/* Layer i as the scheduler's messages about a training step name it, so
 * that code above net/ never reads the layers themselves: "layer 2
 * [connected] (line 20)" into buf; returns buf. */
const char *st_net_layer_label(const st_net *net, int i, char *buf, size_t size);

/* --parallel hybrid: the layers from *first_layer on that can run
 * model-parallel (st_layer_ops.model_parallel) do, provided their
 * parameters follow every other layer's, so that the model-parallel
 * gradients form the tail [*shared_from, params.count) of the gradient
 * arena, held once, and the data-parallel ones its head, one per worker.
 * The model-parallel layers are those after the last layer with
 * parameters that cannot run so. None: *first_layer = n_layers and
 * *shared_from = params.count. */
void st_net_hybrid_split(const st_net *net, int *first_layer, size_t *shared_from);

/* --mp-group (hybrid across ranks): the parameter arena's ranges that part
 * r of size holds of every model-parallel layer (st_net_hybrid_split's,
 * st_layer_ops.mp_block), into ranges [max][2]; returns how many, at most
 * max. Range q is the same tensor's for every r (possibly empty): the
 * parts' ranges of a tensor follow each other in the arena. */
int st_net_mp_ranges(const st_net *net, int r, int size, size_t (*ranges)[2], int max);

/* --mp-group: the layers of st_net_hybrid_split that run model-parallel,
 * in order: how many; each one's input and output values per sample into
 * in[k] and out[k] ([n_layers] each). */
int st_net_mp_layers(const st_net *net, size_t *in, size_t *out);

enum { ST_OUT_BF16_ROUNDED = 1, ST_OUT_BF16_STORED = 2 };

typedef struct st_replica {
    const st_net *net;
    const st_backend *backend;
    st_bctx *bctx;
    int n;                  /* samples per call, at most */
    int training;
    st_arena arena;
    void **state;           /* [n_layers] per-layer state */
    size_t *out_off;        /* [n_layers] outputs [n, out] */
    size_t *delta_off;      /* [n_layers] gradients at the outputs (training) */
    size_t input_delta_off; /* gradient at the network input, if asked for */
    int input_delta;
    int *accumulate;        /* [n_layers * ST_MAX_SRC] see st_pass */
    unsigned char *consumed;/* [n_layers] some later layer reads the output */
    /* [n_layers] the output and its gradient are those of the layer's one
     * input (st_layer_ops.copies_input: training data-parallel, or
     * inference; never the last layer or the class scores) */
    unsigned char *alias;
    /* Called after layer i's backward pass, its parameter gradients final
     * (multi-node overlap); NULL: none. */
    void (*layer_done)(void *ctx, int layer);
    void *layer_done_ctx;
    /* Called before layer i's forward pass of a training iteration, to
     * wait for its weights (--pipeline layer: the previous iteration's
     * update of its bucket); NULL: none. Its ctx is layer_done_ctx. */
    void (*layer_ready)(void *ctx, int layer, long iteration);
    /* [n_layers] the output is kept rounded to bf16 between layers
     * (--precision bf16: st_setup.dst_bf16; replica.c's plan):
     * ST_OUT_BF16_ROUNDED as floats, ST_OUT_BF16_STORED as bf16 (the
     * backend's choice), its gradient still f32; 0: f32 */
    unsigned char *out_bf16;
    const void **out_layout;/* [n_layers] backend layout of each output */
    size_t *out_bytes;      /* [n_layers] each output buffer */
    st_layer_time *time;    /* [n_layers] when timing, else NULL */
    unsigned char *mp;      /* [n_layers] runs model-parallel in training, or NULL */
    /* --trace: the track of the thread that runs this replica (trace.h), or
     * NULL; training passes of the window record each layer's forward and
     * backward on it ("forward 3 conv", args: the layer's type and cfg
     * line, the bytes and flops of st_net_pass_work). Set by the owner. */
    st_trace_track *trace;
    /* The weights the passes are called with, rounded to bf16 (st_pass
     * .params_bf16), kept current by whoever changes the weights (the
     * scheduler: parallel/bf16_weights.h): to be set before the first pass
     * of a replica created with o->backend.weights_bf16, whose kernels read
     * them; NULL otherwise. Not owned. */
    const uint16_t *weights_bf16;
    int takes_bf16;         /* created with o->backend.weights_bf16 */
} st_replica;

typedef struct st_replica_opts {
    int n;                 /* samples per call, at most */
    const int *batch_sizes;/* every sample count calls will use; NULL: just n */
    int n_batch_sizes;
    int training;          /* allocate gradients and backward kernels */
    int input_delta;       /* also compute the gradient at the network input */
    int timing;            /* keep per-layer times (st_replica.time) */
    st_backend_opts backend;
    /* --parallel hybrid (training): the layers st_net_hybrid_split names run
     * model-parallel with these workers; mp_batch_sizes: every number of
     * samples of the process's batches. NULL: data-parallel. */
    const st_mp_group *mp;
    const int *mp_batch_sizes;
    int n_mp_batch_sizes;
} st_replica_opts;

st_status st_replica_init(st_replica *r, const st_net *net, const st_backend *backend,
                          const st_replica_opts *o, st_error *err);
void st_replica_free(st_replica *r);

/* The bytes of r's outputs stored as bf16 (st_replica.out_bf16), for the
 * memory estimate. */
size_t st_replica_bf16_output_bytes(const st_replica *r);

/* The bytes st_replica_init's activation arena would take for these
 * options, into *arena_bytes, without allocating them: the replica is
 * built (its kernels say their layouts, workspaces and scratch) but its
 * arena is only planned; free it with st_replica_free, or keep it a while
 * to see what its kernels hold. It can run nothing. */
st_status st_replica_plan(st_replica *r, const st_net *net, const st_backend *backend,
                          const st_replica_opts *o, size_t *arena_bytes, st_error *err);

/* One shard: its inputs (read in place), labels and where it sits. */
typedef struct st_shard {
    int n;
    const float *x;        /* [n, C, H, W] */
    const int *labels;     /* [n], or NULL */
    long sample0;          /* global index of the first sample (dropout) */
    int batch_first;       /* model-parallel replicas: where the shard sits in the */
    int batch_n;           /* process's batch of batch_n samples */
} st_shard;

typedef struct st_step_info {
    int training;
    uint64_t seed;
    long iteration;
} st_step_info;

/* Forward over the shard; *loss gets the sum of the loss layers' losses.
 * A model-parallel replica's training passes run its model-parallel layers
 * together with the other workers, which wait for each other there: every
 * worker must make every pass, and a worker without samples in the batch
 * (s->n == 0) or whose pass has failed still takes its part in those
 * layers (and only those). */
st_status st_replica_forward(st_replica *r, const float *weights, const st_shard *s,
                             const st_step_info *info, double *loss, st_error *err);

/* Backward after a training forward of the same shard; writes every
 * parameter gradient into grads (an arena of net->params.count floats; a
 * model-parallel replica's model-parallel layers write theirs into the
 * group's shared arena instead, and grads may end where they begin).
 * After a failed forward, a model-parallel replica still calls backward,
 * with a shard of n = 0, to take its part.
 * diff_out: an extra gradient at the last layer's output [n, out], or NULL. */
st_status st_replica_backward(st_replica *r, const float *weights, float *grads,
                              const st_shard *s, const st_step_info *info,
                              const float *diff_out, st_error *err);

/* Records [first, end) of src run forward through r in inference mode
 * (seed: the step's seed), in chunks of at most b->cap read into b:
 * *correct gets how many top-1 answers equal their labels, *loss the
 * summed loss. */
st_status st_replica_test(st_replica *r, const float *weights, const st_source *src,
                          const st_transform *t, uint64_t seed, st_records_buf *b, long first,
                          long end, long *correct, double *loss, st_error *err);

/* Output of layer i [n, out], after forward. */
float *st_replica_output(const st_replica *r, int layer);
/* Gradient at the network input [n, C, H, W] (input_delta replicas). */
float *st_replica_input_delta(const st_replica *r);

#endif
