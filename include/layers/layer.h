/* The layer interface: one file per layer type, each a small ops table.
 *
 * A layer is built once per network from its cfg section (shapes, parameters,
 * options; immutable afterwards and shared by all workers) and set up once
 * per worker replica (its kernels and workspace, in a per-type state struct
 * the layer file defines). Layers know nothing about threads: forward and
 * backward get everything through st_pass.
 *
 * Concrete layers embed st_layer as their first member (their ops say their
 * size), are allocated by the network before their build and own no other
 * memory: the network frees them with free().
 *
 * Adding a layer type touches four files:
 *   1. src/layers/<type>.c: st_<type>_ops (its cfg keys in build, its
 *      kernels through backend.h; a new kind of kernel by ops/kdesc.h's
 *      recipe; what the exporters write, graph, or why they cannot,
 *      no_graph; its tensors' place in Darknet's .weights, darknet, when
 *      it has tensors; a new st_graph_op is a row below and a writer in
 *      src/net/onnx_export.c);
 *   2. src/layers/registry.c: its row (the cfg section name and aliases);
 *   3. this header: its ops table's declaration (the end of the file);
 *   4. tests/unit/test_conformance.c: a network case (its coverage check
 *      fails until every type has one). */
#ifndef ST_LAYER_H
#define ST_LAYER_H

#include <stddef.h>
#include <stdint.h>

#include "base/arena.h"
#include "backends/backend.h"
#include "base/cfg.h"
#include "base/log.h"
#include "base/shape.h"
#include "ops/params.h"
#include "base/status.h"

#define ST_MAX_SRC 16 /* inputs of one route layer */
_Static_assert(ST_MAX_SRC <= ST_STREAM_GROUPS, "a route's copies are one stream group each");

/* Added to the batch variance before the square root by every batch
 * normalization (oneDNN and Caffe use 1e-5; Darknet .weights convert it). */
#define ST_BN_EPS 1e-5f

typedef struct st_layer st_layer;
typedef struct st_layer_ops st_layer_ops;

struct st_layer {
    const st_layer_ops *ops;
    int index;            /* position in the network, from 0 */
    int line;             /* cfg line of the section header */
    st_shape in, out;     /* one sample; `in` is src[0]'s output */
    int n_src;
    int src[ST_MAX_SRC];  /* producing layers; -1 is the network input */
    double flops;         /* forward flops per sample: 2 per multiply-add of
                           * convolutions and inner products, 0 elsewhere */
    int is_loss;          /* produces a loss from the labels */
};

/* Model parallelism across ranks (--mp-group G > 1 under mpirun, one
 * worker per rank): a layer is split over the G ranks of a group, whose
 * batches form the layer's batch; what moves between them, given by the
 * scheduler. shard: this iteration's samples of the group's rank k,
 * first[k] and count[k] ([G] each, first[0] = 0), and their sum. The
 * collectives take counts and displacements in floats, [G] each, by
 * place in the group (cluster.h's st_cluster_mp_*). */
typedef struct st_mp_nodes {
    int (*shard)(void *ctx, int *first, int *count);
    st_status (*allgather)(void *ctx, const float *mine, float *all, const int *counts,
                           const int *displs, st_error *err);
    st_status (*alltoall)(void *ctx, const float *send, const int *scounts, const int *sdispls,
                          float *recv, const int *rcounts, const int *rdispls, st_error *err);
    st_status (*reduce_scatter)(void *ctx, const float *all, float *mine, const int *counts,
                                st_error *err);
} st_mp_nodes;

/* Model parallelism inside one process (--parallel hybrid; PCL-DNN, and
 * Krizhevsky's "one weird trick"): the T workers of a BSP iteration run a
 * model-parallel layer together over the whole batch, each computing a
 * slice of its output neurons. What such a layer needs of the workers,
 * given by the scheduler (parallel/) through this table, so that layers
 * know nothing of threads: which worker this is, a barrier of all T, where
 * the model-parallel parameters' gradients go (they are computed once, over
 * the whole batch, and need no aggregation), and buffers every worker sees
 * alike. */
typedef struct st_mp_group {
    int rank, size;     /* this worker, and T; across ranks (nodes), this rank's place in
                           its group and G */
    /* Either the one shared gradient arena [params.count], which they are
     * written into, or (grads NULL) apply: given the gradient of parameter
     * arena floats [offset, + count) summed over the batch (g [count], which
     * it may overwrite), the solver's update of this iteration is applied to
     * them now. Called in backward, after the layer's last barrier: no
     * worker reads the layer's weights again in this iteration. */
    float *grads;
    void (*apply)(void *ctx, size_t offset, float *g, size_t count);
    void (*barrier)(void *ctx);
    /* The buffer (layer, slot) of bytes, the same for every worker that
     * asks (allocated by the first, zeroed, freed with the scheduler);
     * NULL when out of memory (err). */
    void *(*shared)(void *ctx, int layer, int slot, size_t bytes, st_error *err);
    void *ctx;
    /* Across ranks, or NULL: the workers of one process. The layer's batch
     * is then the group's (mp_batch_sizes its sample counts), grads is
     * the rank's one gradient arena and apply and barrier are unused. */
    const st_mp_nodes *nodes;
} st_mp_group;

/* The network under construction, as a layer's build function sees it. */
typedef struct st_build {
    st_cfg *cfg;
    st_cfg_section *sec;
    const st_log *log;
    int index;                   /* of the layer being built */
    st_shape in;                 /* output of the previous layer / input */
    st_layer *const *layers;     /* layers 0 .. index-1 */
    st_param_table *params;
} st_build;

/* A replica under construction: one worker's kernels and arena plan, and
 * the layouts flowing between its layers (see backend.h). */
typedef struct st_setup {
    const st_backend *backend;
    st_bctx *bctx;
    int n;                        /* samples per call, at most */
    const int *batch_sizes;       /* every sample count a call will use */
    int n_batch_sizes;
    int training;                 /* backward will run */
    int src_grad;                 /* backward computes the gradient at the first input */
    st_arena *arena;              /* reserve workspace here */
    const void *const *in_layout; /* [n_src] layouts of the inputs (NULL: plain) */
    const size_t *in_bytes;       /* [n_src] their buffers for n samples */
    int dst_plain;                /* a consumer needs this layer's output plain */
    /* Every consumer reads this layer's output rounded to bf16 (replica.c's
     * plan): the kernel writing it is asked for that (st_kdesc.dst_bf16) */
    int dst_bf16;
    /* Run model-parallel with these workers (the layer's ops say it can:
     * st_layer_ops.model_parallel), or NULL: data-parallel. The layer's
     * input and output are plain. mp_batch_sizes: every number of samples
     * a whole batch of this process will have. */
    const st_mp_group *mp;
    const int *mp_batch_sizes;
    int n_mp_batch_sizes;
    /* Set by the layer's setup; the network presets plain, n x out values
     * in f32. out_stored_bf16: the output is stored as bf16 (its kernel's
     * st_kernel.dst_bf16), its gradient, f32, twice out_bytes. */
    const void *out_layout;
    size_t out_bytes;
    int out_stored_bf16;
    /* Set by a shares_layout layer whose inputs came in layouts it cannot
     * add: set the replica up again with them plain. */
    int plain_inputs;
} st_setup;

/* Seconds spent in one layer, when a replica is asked to time its layers. */
typedef struct st_layer_time {
    double forward, backward_data, backward_weights;
} st_layer_time;

/* One forward or backward call of one layer in one worker. */
typedef struct st_pass {
    int n;
    int training;
    const float *params;        /* the shared weights arena */
    const uint16_t *params_bf16;/* it rounded to bf16 [the same count], one copy for every
                                   worker, for replicas whose kernels take the weights in
                                   bf16 (st_backend_opts.weights_bf16); NULL otherwise */
    float *grads;               /* this worker's gradient arena (training) */
    const st_arena *arena;      /* this worker's activation arena */
    const float *const *src;    /* [n_src] producers' outputs [n, ...] */
    float *const *diff_src;     /* [n_src] their gradients; NULL: not needed */
    const int *accumulate;      /* [n_src] add into diff_src[k] */
    float *dst;                 /* [n, out] */
    float *diff_dst;            /* [n, out]; the layer may overwrite it */
    const int *labels;          /* [n] class of each sample, or NULL */
    double *loss;               /* loss layers add their sum over samples */
    uint64_t seed;              /* with iteration and sample0: dropout masks */
    long iteration;
    long sample0;               /* global index of this shard's first sample */
    int batch_first, batch_n;   /* model-parallel training passes: where this shard's n
                                   samples sit in the process's batch of batch_n; n may
                                   be 0 (the worker only takes its part of the layer) */
    st_layer_time *time;        /* NULL, or where kernels add backward_weights time */
} st_pass;

/* What a layer computes, from its built options, for the writers of other
 * formats (net/onnx_export.c maps each op onto ONNX nodes), so that none
 * reads a cfg again: the op, then its fields (a member of the union, by
 * op). A new op is a row here and a writer in every exporter (its switch
 * has no default: the compiler names the missing case). */
typedef enum st_graph_op {
    ST_GRAPH_CONV,      /* conv: a convolution; then batch norm or the biases; then act */
    ST_GRAPH_INNER,     /* inner: an inner product over the flattened input; then as conv */
    ST_GRAPH_MAXPOOL,   /* maxpool: pad_begin on the top and left, pad_end bottom and right */
    ST_GRAPH_AVGPOOL,   /* the average of each channel over the whole image */
    ST_GRAPH_BATCHNORM, /* batch norm alone (in inference form: the running statistics) */
    ST_GRAPH_DROPOUT,   /* dropout: the ratio zeroed in training */
    ST_GRAPH_LRN,       /* lrn: Caffe's, across channels */
    ST_GRAPH_SOFTMAX,   /* softmax: of x / temperature over `groups` equal groups */
    ST_GRAPH_ADD,       /* add: act(alpha * src[0] + beta * src[1]) */
    ST_GRAPH_CONCAT,    /* src[0 .. n_src) along the channels; one source: its values */
    ST_GRAPH_IDENTITY,  /* the output is the input (a loss alone) */
} st_graph_op;

typedef struct st_graph_node {
    st_graph_op op;
    union {
        struct {
            int size, stride, padding, groups; /* padding: on every side */
            int batch_normalize;
            st_act act;
        } conv;
        struct {
            int batch_normalize;
            st_act act;
        } inner;
        struct {
            int size, stride, pad_begin, pad_end;
        } maxpool;
        struct {
            float ratio;
        } dropout;
        struct {
            int size;
            float alpha, beta, k;
        } lrn;
        struct {
            int groups;
            float temperature;
        } softmax;
        struct {
            float alpha, beta;
            st_act act;
        } add;
    };
} st_graph_node;

/* How a Darknet .weights file holds one of a layer's tensors. */
typedef enum st_darknet_form {
    ST_DARKNET_AS_IS,     /* the same floats in the same order */
    ST_DARKNET_VARIANCE,  /* running variance, converted between the two BN formulas */
    ST_DARKNET_TRANSPOSE, /* connected weights [out][in]; [in][out] in a transposed file */
    ST_DARKNET_ABSENT,    /* not in the file: must be zero to save, zeroed on load */
} st_darknet_form;

/* A tensor of the layer (the role st_layer_param registered) in a .weights
 * file (train/darknet_weights.c), in the file's order. */
typedef struct st_darknet_tensor {
    const char *role;
    st_darknet_form form;
} st_darknet_tensor;

#define ST_DARKNET_MAX_TENSORS 8

/* What a layer does with values rounded to bf16 (st_layer_ops.bf16_io). An
 * output is kept rounded to bf16 when the layer gives it so and every
 * consumer takes it so, which changes no value any layer computes: the
 * consumers would round it themselves. */
enum {
    /* it rounds its input to bf16 before any use (the operand of a
     * convolution or inner product in bf16): it takes the input rounded */
    ST_BF16_TAKES = 1,
    /* its output rounded to bf16 changes no gradient it computes (no batch
     * norm after it, an activation whose derivative depends on the
     * output's sign only: linear, relu, leaky) */
    ST_BF16_GIVES = 2,
    /* its output's values are some of its input's (max pooling): rounded
     * exactly when its input is; it takes its input rounded when its
     * output is kept so */
    ST_BF16_PASSES = 4,
};

struct st_layer_ops {
    const char *type;                 /* section name, e.g. "convolutional" */
    const char *short_name;           /* for tables, e.g. "conv"; NULL: the type */
    const char *const *ignored_keys;  /* Darknet keys accepted with a warning */
    int plain_input;                  /* computes in plain C on plain NCHW input */
    int keeps_layout;                 /* output in its input's layout (elementwise) */
    /* Elementwise over inputs of one shape: computes in any layout its
     * inputs share (st_backend.layouts_equal) and gives its output in it;
     * when they differ, or the backend cannot say, it asks for them plain
     * (st_setup.plain_inputs) and the replica is set up again so. */
    int shares_layout;
    /* The layer's work in plain C in a training pass (0 forward, 1
     * backward), beyond its kernels, as the elementary passes over memory
     * that make it (a copy, an axpy, an activation: what a framework
     * without fusion, such as Caffe, runs; the layer's own code may fuse
     * them), added to w: the work a backend that predicts another
     * machine's time is told of (st_backend.host_work); NULL: none. */
    void (*host_streams)(const st_layer *l, int pass, st_stream_work *w);
    /* Optional (NULL: none of them), for --precision bf16's activations
     * between layers (net/replica.c): what the layer does with values
     * rounded to bf16, ST_BF16_* flags. */
    int (*bf16_io)(const st_layer *l);
    /* Whether this layer can run model-parallel (st_setup.mp); NULL: never. */
    int (*model_parallel)(const st_layer *l);
    /* Whether the layer's output is its one input's values unchanged (a
     * route of one layer, Darknet's way to branch); NULL: never. The
     * replica may then give its output and gradient its input's memory
     * (st_replica.alias): its passes find dst == src[0] and diff_src[0] ==
     * diff_dst and have nothing to do, and its consumers add into the
     * input's gradient themselves, as Caffe's split layer shares its blob. */
    int (*copies_input)(const st_layer *l);
    /* The parameter arena's ranges [ranges[k][0], ranges[k][1]) that part
     * r of size holds when it does; returns how many (at most 4). */
    int (*mp_block)(const st_layer *l, int r, int size, size_t ranges[4][2]);
    size_t size;                      /* the type's struct, st_layer first */
    /* Read the section, infer the output shape, register parameters. l is
     * the type's struct, zeroed but for st_layer: its ops, index, line, a
     * single input from the layer before, out = in. */
    st_status (*build)(st_build *b, st_layer *l, st_error *err);
    /* Create this worker's kernels and reserve its workspace; NULL for layers
     * that need neither (their state is NULL). */
    st_status (*setup)(const st_layer *l, st_setup *s, void **state, st_error *err);
    st_status (*forward)(const st_layer *l, void *state, const st_pass *p, st_error *err);
    st_status (*backward)(const st_layer *l, void *state, const st_pass *p, st_error *err);
    void (*release)(void *state); /* NULL when setup is */
    /* One line for the layer table (after the index), Darknet's columns. */
    void (*describe)(const st_layer *l, char *buf, size_t size);
    /* What the layer computes for the exporters (st_graph_node), or NULL
     * and no_graph: why no exporter can write it ("...: no ONNX op does
     * what it does"). One of the two (test_conformance's coverage). */
    void (*graph)(const st_layer *l, st_graph_node *g);
    const char *no_graph;
    /* Its tensors in a Darknet .weights file, in the file's order, into t;
     * returns how many. NULL: it has none there. A type whose layers
     * register tensors needs it (test_conformance's coverage); a tensor no
     * layer's list names makes the network unsavable as .weights. */
    int (*darknet)(const st_layer *l, st_darknet_tensor t[ST_DARKNET_MAX_TENSORS]);
};

/* All layer types, for the cfg reader (registry.c): the ops of a section
 * name or NULL, and the names in a message ("convolutional, connected, ...")
 * written into buf [size]. */
const st_layer_ops *st_layer_find(const char *section_type);
/* A layer's name in tables, reports and buffer names. */
const char *st_layer_short_name(const st_layer *l);
/* A host_streams for a layer whose plain C reads a value and writes one per
 * output value in each training pass. */
void st_layer_host_copy(const st_layer *l, int pass, st_stream_work *w);
/* Whether the layer can run model-parallel (its ops' model_parallel). */
int st_layer_model_parallel(const st_layer *l);
void st_layer_type_list(char *buf, size_t size);

/* A kernel and the workspace it keeps in the worker's arena. */
typedef struct st_kslot {
    st_kernel *k;
    size_t ws_off;
} st_kslot;

/* Create a kernel for d: its base is filled in from the setup (sample
 * counts, whether backward runs) and the arguments (src layout; on_input:
 * src is the layer's first input, whose gradient only some layers need,
 * s->src_grad; whether dst must be plain; the name "<layer>.<kernel>"). */
st_status st_kslot_create(st_setup *s, st_kdesc *d, const void *src_layout, int on_input,
                          int dst_plain, const char *name, st_kslot *slot, st_error *err);
void st_kslot_release(st_kslot *slot);

/* Run a kernel with its workspace and the arena's scratch filled in. */
st_status st_kslot_forward(const st_kslot *slot, const st_pass *p, st_kargs *a,
                           st_error *err);
st_status st_kslot_backward_data(const st_kslot *slot, const st_pass *p, st_kargs *a,
                                 st_error *err);
st_status st_kslot_backward_weights(const st_kslot *slot, const st_pass *p, st_kargs *a,
                                    st_error *err);

/* Helpers for layer builders. A shape error: "FILE:LINE: [type] (layer i,
 * input w x h x c): " and the message. */
st_status st_layer_bad_shape(const st_build *b, st_error *err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Register a parameter tensor; *offset is where it lives in every arena. */
st_status st_layer_param(st_build *b, const char *role, size_t count, st_param_kind kind,
                         st_init_kind init, float scale, size_t *offset, st_error *err);
/* Register a running statistic (ST_PARAM_STAT) that keeps `keep` of its
 * value each batch (st_param.keep). */
st_status st_layer_stat(st_build *b, const char *role, size_t count, st_init_kind init,
                        float keep, size_t *offset, st_error *err);

/* Resolve a Darknet layer reference (negative: relative to this layer) for
 * the option `key`; it must name an earlier layer. */
st_status st_layer_ref(st_build *b, const char *key, int value, int *index, st_error *err);

/* Reject an option whose value differs from the only one singletrain
 * implements (e.g. xnor=1): "key=value is not supported". */
st_status st_layer_only(st_build *b, const char *key, const char *supported, st_error *err);

/* The bf16 copy of the weights at arena offset off, for st_kargs.weights_bf16
 * beside p->params + off: NULL when the pass has none. */
const uint16_t *st_pass_weights_bf16(const st_pass *p, size_t off);

/* Reserve count floats of per-worker workspace; *off is its arena offset. */
st_status st_setup_floats(st_setup *s, const st_layer *l, const char *role, size_t count,
                          size_t *off, st_error *err);

/* The per-type ops tables. */
extern const st_layer_ops st_conv_ops, st_connected_ops, st_maxpool_ops, st_avgpool_ops,
    st_dropout_ops, st_softmax_ops, st_cost_ops, st_batchnorm_ops, st_lrn_ops,
    st_shortcut_ops, st_route_ops, st_crop_ops;

#endif
