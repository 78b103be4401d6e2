/* What the ONNX reader's files share (src/net/): onnx.c (the model, the
 * graph, the [net] section, the build and the starting weights),
 * onnx_values.c (the graph's values, tensors and attributes, the layers
 * being made, the node messages) and onnx_ops.c (one reader per op, their
 * table). Nothing outside src/net/ includes this. */
#ifndef ST_ONNX_INTERNAL_H
#define ST_ONNX_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include <onnx.pb-c.h>

#include "net/onnx.h"

#define OX_MAX_BYTES ((size_t)1 << 31)
#define OX_MAX_SETTINGS_BYTES ((size_t)1 << 20)
#define OX_MAX_OPTS 8
#define OX_MAX_TENSORS 6
#define OX_DEFAULT_OPSET 13
/* The opsets whose versions of the supported ops the reader knows: from 7
 * (numpy-style broadcast, no legacy attributes) to 22 (ONNX 1.17; 8 to 22
 * changed these ops' types and added attributes the reader refuses); the
 * IR versions from 3 (opset_import) to 11 (ONNX 1.18). */
#define OX_MIN_OPSET 7
#define OX_MAX_OPSET 22
#define OX_MIN_IR 3
#define OX_MAX_IR 11
/* Messages inside messages, the model the first (protobuf's own default
 * limit): an ordinary model nests 4 (model, graph, value info, type). */
#define OX_MAX_NESTING 100

typedef enum ox_kind {
    OX_CONV, OX_FC, OX_SHORTCUT, OX_BN, OX_MAXPOOL, OX_AVG, OX_SOFTMAX, OX_OTHER
} ox_kind;

/* A tensor to copy into the starting weights: role of the layer's
 * parameter ("weights", "biases", ...), from node `node`; with rows, the
 * source is [rows][count / rows] and is transposed. */
typedef struct ox_tensor {
    const char *role;
    int node;
    const char *name;
    const float *data;
    size_t count;
    size_t rows;
} ox_tensor;

/* A layer being made: its section's options, and what the checks after
 * the build need. */
typedef struct ox_layer {
    const char *type;
    ox_kind kind;
    int node;
    int act;        /* ST_ACT_*, for conv, connected and shortcut */
    int bn;         /* batch norm folded in */
    int uses;       /* node inputs that read its output (through Flatten / Reshape) */
    int from;       /* shortcut: the other layer */
    int src;        /* max pooling: the layer it reads (-1: the graph input) */
    int pool_h, pool_w; /* AveragePool's window; 0: global */
    int flat_only;  /* a softmax over axis -1: the input must be 2-D */
    int n_opt;
    struct { char key[24], val[128]; } opt[OX_MAX_OPTS];
    int n_tensor;
    ox_tensor tensor[OX_MAX_TENSORS];
} ox_layer;

/* A value of the graph: the layer whose output it is (-1: the graph
 * input), and whether it is flattened to [N, C*H*W]. */
typedef struct ox_value {
    const char *name;
    int layer;
    int flat;
    int uses;
} ox_value;

/* A Reshape to check: layer's output must have `count` values. */
typedef struct ox_count_check {
    int node, layer;
    long count;
} ox_count_check;

/* A constant computed at load (a Transpose of an initializer), under the
 * name of node `node`'s output: seen by the nodes after it. The tensor and
 * its dims are owned here; its floats are one of ox.bufs. */
typedef struct ox_derived {
    int node;
    Onnx__TensorProto *t;
} ox_derived;

typedef struct ox {
    const char *path;
    const Onnx__GraphProto *g;
    long opset;
    ox_value *values;
    int n_values;
    ox_layer *layers;
    int n_layers;
    ox_count_check *checks;
    int n_checks;
    float **bufs; /* owned float copies of initializers */
    int n_bufs;
    ox_derived *derived;
    int n_derived;
    st_error *err;
    const st_log *log; /* warnings */
} ox;

/* ---- onnx_wire.c ---- */

/* The len bytes of path nest no deeper than OX_MAX_NESTING messages in
 * the schema's cycles (a graph in a node's attribute, a type in a type),
 * checked without recursion before protobuf-c's unpack, which recurses. */
st_status ox_wire_check(const char *path, const uint8_t *bytes, size_t len, st_error *err);

/* ---- onnx_check.c ---- */

/* The model's IR version and opset in the ranges above, its initializers'
 * names unique and each initializer's values in one field. */
st_status ox_check_model(const ox *x, const Onnx__ModelProto *m);

/* No initializer is the tensor of two nodes' layers (tied weights). */
st_status ox_check_ties(const ox *x);

/* ---- onnx_values.c ---- */

/* "node N 'NAME' (OP)" into buf [size], the name left out when the node
 * has none; returns buf. */
const char *ox_node_label(const ox *x, int node, char *buf, size_t size);

/* ST_EINPUT with "PATH: node N 'NAME' (OP): " and the message. */
st_status ox_node_fail(const ox *x, int node, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* A tensor's dims as "[d0, d1, ...]" into buf [size]; returns buf. */
const char *ox_dims_text(const Onnx__TensorProto *t, char *buf, size_t size);

ox_value *ox_find_value(ox *x, const char *name);

int ox_count_uses(const ox *x, const char *name);

st_status ox_add_value(ox *x, int node, const char *name, int layer, int flat);

/* The node's outputs are named as no earlier node's, no initializer and
 * not the graph input: a duplicate is an error naming both nodes. */
st_status ox_unique_outputs(const ox *x, int node);

/* The constant tensor name: an initializer, or a Constant node's value or
 * a computed constant (ox_derived) before node `before`, or any of them
 * under the name of an Identity node before it. */
const Onnx__TensorProto *ox_constant(const ox *x, const char *name, int before);

/* A float tensor of nd dims [dims], the values data [count] (one of
 * x->bufs), as the constant named by node's output 0. */
st_status ox_add_derived(ox *x, int node, size_t nd, const int64_t *dims, float *data,
                         size_t count);

/* Free the computed constants (the end of a read). */
void ox_free_derived(ox *x);

const char *ox_input(const Onnx__NodeProto *n, size_t k);

/* The values of a constant tensor's dims: *count, at most 2^31. */
st_status ox_tensor_count(const ox *x, int node, const char *name,
                                 const Onnx__TensorProto *t, size_t *count);

/* n floats, zeroed, freed with the translation; NULL when out of memory. */
float *ox_new_floats(ox *x, size_t n);

/* Input k of the node, a constant float tensor, copied: *data [*count],
 * its dims in *t. */
st_status ox_floats(ox *x, int node, size_t k, const Onnx__TensorProto **tp,
                           const float **data, size_t *count);

/* A constant int64 tensor's values (Reshape's shape), at most max. */
st_status ox_ints(const ox *x, int node, size_t k, int64_t *out, size_t max, size_t *count);

const Onnx__AttributeProto *ox_attr(const Onnx__NodeProto *n, const char *name);

/* Every attribute of the node is one of known (comma-separated). */
st_status ox_known_attrs(const ox *x, int node, const char *known);

st_status ox_int_attr(const ox *x, int node, const char *name, long def, long lo,
                             long hi, long *out);

st_status ox_float_attr(const ox *x, int node, const char *name, float def, float *out);

/* An ints attribute of exactly n values (absent: *present = 0). */
st_status ox_ints_attr(const ox *x, int node, const char *name, size_t n, long *out,
                              int *present);

st_status ox_string_attr(const ox *x, int node, const char *name, const char *only);

/* Option key=value (printf) of the layer's section. */
void ox_opt(ox_layer *l, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

void ox_tensor_add(ox_layer *l, const char *role, int node, const char *name,
                          const float *data, size_t count, size_t rows);

ox_tensor *ox_tensor_find(ox_layer *l, const char *role);

void ox_tensor_drop(ox_layer *l, const char *role);

/* A new layer at the end; *out its index. */
st_status ox_new_layer(ox *x, int node, const char *type, ox_kind kind, int *out);

/* The value input k of the node reads, which must exist. */
st_status ox_read(ox *x, int node, size_t k, ox_value **v);

/* Make v the input of the next layer: it is already the last layer's
 * output, or a [route] to its layer is added. */
st_status ox_take(ox *x, int node, const ox_value *v);

/* The layer whose output v is, when an op can fold into it: of one of the
 * kinds, its output read by this node alone, nothing folded yet. */
ox_layer *ox_foldable(ox *x, const ox_value *v, int kinds);

/* One output value for the node: output 0, made by layer. */
st_status ox_output(ox *x, int node, int layer, int flat);

/* ---- onnx_ops.c ---- */

/* The layer (or fold) of node `node`, by its op's reader; an op without
 * one fails naming the node and the supported ops. */
st_status ox_node(ox *x, int node);

#endif
