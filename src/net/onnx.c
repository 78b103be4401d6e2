/* ONNX models as networks: the graph's nodes translated into cfg sections
 * (the table in include/net/onnx.h), the [net] section from the sidecar,
 * the network built from them and the initializers copied into its
 * starting weights. Every check that needs a layer's shape runs after the
 * build, against the built layers. */
#include "net/onnx.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <onnx.pb-c.h>

#include "base/fileio.h"
#include "base/strlist.h"

#define OX_MAX_BYTES ((size_t)1 << 31)
#define OX_MAX_SETTINGS_BYTES ((size_t)1 << 20)
#define OX_MAX_NODES 10000
#define OX_MAX_OPTS 8
#define OX_MAX_TENSORS 6
#define OX_DEFAULT_OPSET 13

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
    st_error *err;
} ox;

/* ---- messages ---- */

static st_status ox_node_fail(const ox *x, int node, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static st_status ox_node_fail(const ox *x, int node, const char *fmt, ...)
{
    char what[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    const Onnx__NodeProto *n = x->g->node[node];
    const char *name = n->name && n->name[0] ? n->name : NULL;
    return st_fail(x->err, ST_EINPUT, "%s: node %d%s%s%s (%s): %s", x->path, node + 1,
                   name ? " '" : "", name ? name : "", name ? "'" : "",
                   n->op_type ? n->op_type : "no op_type", what);
}

/* ---- values, tensors, attributes ---- */

static ox_value *ox_find_value(ox *x, const char *name)
{
    for (int i = x->n_values - 1; i >= 0; i--)
        if (strcmp(x->values[i].name, name) == 0)
            return &x->values[i];
    return NULL;
}

static int ox_count_uses(const ox *x, const char *name)
{
    int n = 0;
    for (size_t i = 0; i < x->g->n_node; i++)
        for (size_t k = 0; k < x->g->node[i]->n_input; k++)
            n += x->g->node[i]->input[k] && strcmp(x->g->node[i]->input[k], name) == 0;
    for (size_t i = 0; i < x->g->n_output; i++)
        n += x->g->output[i]->name && strcmp(x->g->output[i]->name, name) == 0;
    return n;
}

static st_status ox_add_value(ox *x, int node, const char *name, int layer, int flat)
{
    if (!name || !name[0])
        return ox_node_fail(x, node, "an output without a name");
    ox_value *v = realloc(x->values, (size_t)(x->n_values + 1) * sizeof *v);
    if (!v)
        return st_fail(x->err, ST_ENOMEM, "out of memory reading %s", x->path);
    x->values = v;
    int uses = ox_count_uses(x, name);
    v[x->n_values++] = (ox_value){name, layer, flat, uses};
    if (layer >= 0)
        x->layers[layer].uses += uses;
    return ST_OK;
}

/* The constant tensor name: an initializer, or a Constant node's value
 * before node `before`, or either under the name of an Identity node
 * before it (PyTorch's exporter writes one initializer once and the equal
 * ones as Identity nodes of it: a new BatchNorm2d's weight and running
 * variance, both ones). Followed back node by node, not recursively. */
static const Onnx__TensorProto *ox_constant(const ox *x, const char *name, int before)
{
    for (;;) {
        for (size_t i = 0; i < x->g->n_initializer; i++)
            if (x->g->initializer[i]->name && strcmp(x->g->initializer[i]->name, name) == 0)
                return x->g->initializer[i];
        int i = before - 1;
        while (i >= 0 && !(x->g->node[i]->n_output == 1 && x->g->node[i]->output[0] &&
                           strcmp(x->g->node[i]->output[0], name) == 0))
            i--;
        if (i < 0 || !x->g->node[i]->op_type)
            return NULL;
        const Onnx__NodeProto *n = x->g->node[i];
        if (strcmp(n->op_type, "Constant") == 0) {
            for (size_t a = 0; a < n->n_attribute; a++)
                if (n->attribute[a]->name && strcmp(n->attribute[a]->name, "value") == 0)
                    return n->attribute[a]->t;
            return NULL;
        }
        if (strcmp(n->op_type, "Identity") != 0 || n->n_input != 1 || !n->input[0])
            return NULL;
        name = n->input[0];
        before = i;
    }
}

static const char *ox_input(const Onnx__NodeProto *n, size_t k)
{
    return k < n->n_input && n->input[k] && n->input[k][0] ? n->input[k] : NULL;
}

/* The values of a constant tensor's dims: *count, at most 2^31. */
static st_status ox_tensor_count(const ox *x, int node, const char *name,
                                 const Onnx__TensorProto *t, size_t *count)
{
    size_t c = 1;
    for (size_t i = 0; i < t->n_dims; i++) {
        if (t->dims[i] < 0 || t->dims[i] > (1L << 31) || (double)c * (double)t->dims[i] > 2e9)
            return ox_node_fail(x, node, "initializer '%s': dims[%zu] = %lld is negative or "
                                "too large", name, i, (long long)t->dims[i]);
        c *= (size_t)t->dims[i];
    }
    *count = c;
    return ST_OK;
}

/* n floats, zeroed, freed with the translation; NULL when out of memory. */
static float *ox_new_floats(ox *x, size_t n)
{
    float **bufs = realloc(x->bufs, (size_t)(x->n_bufs + 1) * sizeof *bufs);
    if (!bufs) {
        st_fail(x->err, ST_ENOMEM, "out of memory reading %s", x->path);
        return NULL;
    }
    x->bufs = bufs;
    float *f = st_calloc(n ? n : 1, sizeof *f, "an ONNX tensor", x->err);
    if (f)
        bufs[x->n_bufs++] = f;
    return f;
}

/* Input k of the node, a constant float tensor, copied: *data [*count],
 * its dims in *t. */
static st_status ox_floats(ox *x, int node, size_t k, const Onnx__TensorProto **tp,
                           const float **data, size_t *count)
{
    const Onnx__NodeProto *n = x->g->node[node];
    const char *name = ox_input(n, k);
    if (!name)
        return ox_node_fail(x, node, "input %zu is missing: expected a constant tensor", k + 1);
    const Onnx__TensorProto *t = ox_constant(x, name, node);
    if (!t)
        return ox_node_fail(x, node, "input %zu '%s' is no initializer: singletrain needs it "
                            "constant (a weight)", k + 1, name);
    if (!t->has_data_type || t->data_type != ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT)
        return ox_node_fail(x, node, "initializer '%s' has data type %d: expected float (1)",
                            name, t->has_data_type ? (int)t->data_type : 0);
    if (t->has_data_location && t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL)
        return ox_node_fail(x, node, "initializer '%s' is in an external file: not supported "
                            "(save the model with its weights inside)", name);
    size_t c = 0;
    st_status st = ox_tensor_count(x, node, name, t, &c);
    if (st != ST_OK)
        return st;
    if (t->has_raw_data ? t->raw_data.len != c * sizeof(float) : t->n_float_data != c)
        return ox_node_fail(x, node, "initializer '%s' holds %zu values but its dims make %zu",
                            name, t->has_raw_data ? t->raw_data.len / sizeof(float)
                                                  : t->n_float_data, c);
    float *f = ox_new_floats(x, c);
    if (!f)
        return ST_ENOMEM;
    memcpy(f, t->has_raw_data ? (const void *)t->raw_data.data : (const void *)t->float_data,
           c * sizeof *f); /* raw_data is little-endian, as every host this runs on */
    *tp = t;
    *data = f;
    *count = c;
    return ST_OK;
}

/* A constant int64 tensor's values (Reshape's shape), at most max. */
static st_status ox_ints(const ox *x, int node, size_t k, int64_t *out, size_t max, size_t *count)
{
    const char *name = ox_input(x->g->node[node], k);
    const Onnx__TensorProto *t = name ? ox_constant(x, name, node) : NULL;
    if (!t)
        return ox_node_fail(x, node, "input %zu is not a constant tensor: singletrain needs "
                            "the shape constant", k + 1);
    size_t c = 0;
    st_status st = ox_tensor_count(x, node, name, t, &c);
    if (st != ST_OK)
        return st;
    if (!t->has_data_type || t->data_type != ONNX__TENSOR_PROTO__DATA_TYPE__INT64 || c > max ||
        (t->has_raw_data ? t->raw_data.len != c * 8 : t->n_int64_data != c))
        return ox_node_fail(x, node, "input '%s': expected at most %zu int64 values", name, max);
    if (t->has_raw_data)
        memcpy(out, t->raw_data.data, c * 8);
    else
        memcpy(out, t->int64_data, c * 8);
    *count = c;
    return ST_OK;
}

static const Onnx__AttributeProto *ox_attr(const Onnx__NodeProto *n, const char *name)
{
    for (size_t i = 0; i < n->n_attribute; i++)
        if (n->attribute[i]->name && strcmp(n->attribute[i]->name, name) == 0)
            return n->attribute[i];
    return NULL;
}

/* Every attribute of the node is one of known (comma-separated). */
static st_status ox_known_attrs(const ox *x, int node, const char *known)
{
    const Onnx__NodeProto *n = x->g->node[node];
    for (size_t i = 0; i < n->n_attribute; i++) {
        const char *a = n->attribute[i]->name ? n->attribute[i]->name : "";
        size_t len = strlen(a);
        const char *p = known;
        int found = 0;
        while (*p && !found) {
            const char *e = strchr(p, ',');
            size_t l = e ? (size_t)(e - p) : strlen(p);
            found = l == len && len > 0 && strncmp(p, a, l) == 0;
            p = e ? e + 1 : p + l;
        }
        if (!found)
            return ox_node_fail(x, node, "attribute '%s' is not supported (supported: %s)", a,
                                known[0] ? known : "none");
    }
    return ST_OK;
}

static st_status ox_int_attr(const ox *x, int node, const char *name, long def, long lo,
                             long hi, long *out)
{
    const Onnx__AttributeProto *a = ox_attr(x->g->node[node], name);
    *out = def;
    if (!a)
        return ST_OK;
    if (!a->has_i)
        return ox_node_fail(x, node, "attribute %s: expected an integer", name);
    if (a->i < lo || a->i > hi)
        return ox_node_fail(x, node, "attribute %s=%lld is not supported (expected %ld..%ld)",
                            name, (long long)a->i, lo, hi);
    *out = (long)a->i;
    return ST_OK;
}

static st_status ox_float_attr(const ox *x, int node, const char *name, float def, float *out)
{
    const Onnx__AttributeProto *a = ox_attr(x->g->node[node], name);
    *out = def;
    if (!a)
        return ST_OK;
    if (!a->has_f || !isfinite(a->f))
        return ox_node_fail(x, node, "attribute %s: expected a finite float", name);
    *out = a->f;
    return ST_OK;
}

/* An ints attribute of exactly n values (absent: *present = 0). */
static st_status ox_ints_attr(const ox *x, int node, const char *name, size_t n, long *out,
                              int *present)
{
    const Onnx__AttributeProto *a = ox_attr(x->g->node[node], name);
    *present = a != NULL;
    if (!a)
        return ST_OK;
    if (a->n_ints != n)
        return ox_node_fail(x, node, "attribute %s has %zu values: expected %zu (2-D)", name,
                            a->n_ints, n);
    for (size_t i = 0; i < n; i++) {
        if (a->ints[i] < 0 || a->ints[i] > 4096)
            return ox_node_fail(x, node, "attribute %s[%zu] = %lld: expected 0..4096", name, i,
                                (long long)a->ints[i]);
        out[i] = (long)a->ints[i];
    }
    return ST_OK;
}

static st_status ox_string_attr(const ox *x, int node, const char *name, const char *only)
{
    const Onnx__AttributeProto *a = ox_attr(x->g->node[node], name);
    if (!a)
        return ST_OK;
    size_t len = a->has_s ? a->s.len : 0;
    if (len == strlen(only) && memcmp(a->s.data, only, len) == 0)
        return ST_OK;
    return ox_node_fail(x, node, "attribute %s=%.*s is not supported (only %s)", name,
                        (int)(len > 40 ? 40 : len), len ? (const char *)a->s.data : "", only);
}

/* ---- layers ---- */

static void ox_opt(ox_layer *l, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void ox_opt(ox_layer *l, const char *key, const char *fmt, ...)
{
    if (l->n_opt == OX_MAX_OPTS)
        return; /* every type sets fewer */
    snprintf(l->opt[l->n_opt].key, sizeof l->opt[0].key, "%s", key);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(l->opt[l->n_opt].val, sizeof l->opt[0].val, fmt, ap);
    va_end(ap);
    l->n_opt++;
}

static void ox_tensor_add(ox_layer *l, const char *role, int node, const char *name,
                          const float *data, size_t count, size_t rows)
{
    for (int i = 0; i < l->n_tensor; i++)
        if (strcmp(l->tensor[i].role, role) == 0) {
            l->tensor[i] = (ox_tensor){role, node, name, data, count, rows};
            return;
        }
    if (l->n_tensor < OX_MAX_TENSORS)
        l->tensor[l->n_tensor++] = (ox_tensor){role, node, name, data, count, rows};
}

static ox_tensor *ox_tensor_find(ox_layer *l, const char *role)
{
    for (int i = 0; i < l->n_tensor; i++)
        if (strcmp(l->tensor[i].role, role) == 0)
            return &l->tensor[i];
    return NULL;
}

static void ox_tensor_drop(ox_layer *l, const char *role)
{
    ox_tensor *t = ox_tensor_find(l, role);
    if (t)
        *t = l->tensor[--l->n_tensor];
}

/* A new layer at the end; *out its index. */
static st_status ox_new_layer(ox *x, int node, const char *type, ox_kind kind, int *out)
{
    if (x->n_layers >= OX_MAX_NODES * 2)
        return ox_node_fail(x, node, "more than %d layers", OX_MAX_NODES * 2);
    ox_layer *l = realloc(x->layers, (size_t)(x->n_layers + 1) * sizeof *l);
    if (!l)
        return st_fail(x->err, ST_ENOMEM, "out of memory reading %s", x->path);
    x->layers = l;
    memset(&l[x->n_layers], 0, sizeof *l);
    l[x->n_layers] = (ox_layer){.type = type, .kind = kind, .node = node, .act = ST_ACT_LINEAR,
                                .from = -1, .src = x->n_layers - 1};
    *out = x->n_layers++;
    return ST_OK;
}

/* The value input k of the node reads, which must exist. */
static st_status ox_read(ox *x, int node, size_t k, ox_value **v)
{
    const char *name = ox_input(x->g->node[node], k);
    if (!name)
        return ox_node_fail(x, node, "input %zu is missing", k + 1);
    *v = ox_find_value(x, name);
    if (!*v)
        return ox_node_fail(x, node, "input '%s' is no graph input and no output of an earlier "
                            "node%s", name, ox_constant(x, name, node) ? " (it is a constant: "
                            "singletrain needs a layer's output here)" : "");
    return ST_OK;
}

/* Make v the input of the next layer: it is already the last layer's
 * output, or a [route] to its layer is added. */
static st_status ox_take(ox *x, int node, const ox_value *v)
{
    if (v->layer < 0) {
        if (x->n_layers == 0)
            return ST_OK;
        return ox_node_fail(x, node, "reads the graph input '%s' after earlier layers: "
                            "singletrain's layers read the graph input only as the first "
                            "layer", v->name);
    }
    if (v->layer == x->n_layers - 1)
        return ST_OK;
    int r = 0, from = v->layer;
    st_status st = ox_new_layer(x, node, "route", OX_OTHER, &r);
    if (st == ST_OK)
        ox_opt(&x->layers[r], "layers", "%d", from);
    return st;
}

/* The layer whose output v is, when an op can fold into it: of one of the
 * kinds, its output read by this node alone, nothing folded yet. */
static ox_layer *ox_foldable(ox *x, const ox_value *v, int kinds)
{
    if (v->layer < 0)
        return NULL;
    ox_layer *l = &x->layers[v->layer];
    if (!(kinds & (1 << l->kind)) || l->uses != 1 || l->act != ST_ACT_LINEAR)
        return NULL;
    return l;
}

/* One output value for the node: output 0, made by layer. */
static st_status ox_output(ox *x, int node, int layer, int flat)
{
    const Onnx__NodeProto *n = x->g->node[node];
    if (n->n_output < 1)
        return ox_node_fail(x, node, "no output");
    return ox_add_value(x, node, n->output[0], layer, flat);
}

/* ---- the ops ---- */

static st_status op_conv(ox *x, int node, int arg)
{
    const Onnx__NodeProto *n = x->g->node[node];
    ox_value *in;
    const Onnx__TensorProto *wt, *bt;
    const float *w, *b = NULL;
    size_t wc, bc = 0;
    long ks[2], strides[2] = {1, 1}, pads[4] = {0, 0, 0, 0}, dil[2] = {1, 1}, group;
    int has_k, has_s, has_p, has_d, l = 0;
    st_status st;
    if ((st = ox_known_attrs(x, node, "kernel_shape,strides,pads,dilations,group,auto_pad")) ||
        (st = ox_read(x, node, 0, &in)) || (st = ox_floats(x, node, 1, &wt, &w, &wc)) ||
        (ox_input(n, 2) && (st = ox_floats(x, node, 2, &bt, &b, &bc))) ||
        (st = ox_ints_attr(x, node, "kernel_shape", 2, ks, &has_k)) ||
        (st = ox_ints_attr(x, node, "strides", 2, strides, &has_s)) ||
        (st = ox_ints_attr(x, node, "pads", 4, pads, &has_p)) ||
        (st = ox_ints_attr(x, node, "dilations", 2, dil, &has_d)) ||
        (st = ox_int_attr(x, node, "group", 1, 1, 1 << 16, &group)) ||
        (st = ox_string_attr(x, node, "auto_pad", "NOTSET")))
        return st;
    if (wt->n_dims != 4 || wt->dims[0] < 1 || wt->dims[2] < 1)
        return ox_node_fail(x, node, "weight '%s' has %zu dims: expected 4 (OIHW) of 2-D "
                            "convolution", n->input[1], wt->n_dims);
    long o = (long)wt->dims[0], kh = (long)wt->dims[2], kw = (long)wt->dims[3];
    if (kh != kw || (has_k && (ks[0] != kh || ks[1] != kw)))
        return ox_node_fail(x, node, "kernel %ldx%ld: singletrain's convolutions are square, "
                            "with kernel_shape the weight's", kh, kw);
    if (strides[0] != strides[1] || strides[0] < 1)
        return ox_node_fail(x, node, "strides %ld,%ld: expected two equal strides", strides[0],
                            strides[1]);
    if (pads[0] != pads[1] || pads[0] != pads[2] || pads[0] != pads[3])
        return ox_node_fail(x, node, "pads %ld,%ld,%ld,%ld: expected the same padding on "
                            "every side", pads[0], pads[1], pads[2], pads[3]);
    if (dil[0] != 1 || dil[1] != 1)
        return ox_node_fail(x, node, "dilations %ld,%ld: the backends have dilation 1 only",
                            dil[0], dil[1]);
    if (b && bc != (size_t)o)
        return ox_node_fail(x, node, "bias '%s' has %zu values for %ld filters", n->input[2],
                            bc, o);
    if ((st = ox_take(x, node, in)) ||
        (st = ox_new_layer(x, node, "convolutional", OX_CONV, &l)))
        return st;
    ox_layer *c = &x->layers[l];
    ox_opt(c, "filters", "%ld", o);
    ox_opt(c, "size", "%ld", kh);
    ox_opt(c, "stride", "%ld", strides[0]);
    ox_opt(c, "padding", "%ld", pads[0]);
    ox_opt(c, "groups", "%ld", group);
    ox_tensor_add(c, "weights", node, n->input[1], w, wc, 0);
    if (b)
        ox_tensor_add(c, "biases", node, n->input[2], b, bc, 0);
    return ox_output(x, node, l, 0);
}

/* Gemm, MatMul: weights [in][out] (transpose) or [out][in]. */
static st_status op_fc(ox *x, int node, int gemm)
{
    const Onnx__NodeProto *n = x->g->node[node];
    ox_value *in;
    const Onnx__TensorProto *wt, *bt;
    const float *w, *b = NULL;
    size_t wc, bc = 0;
    long trans_a = 0, trans_b = 0;
    float alpha = 1, beta = 1;
    int l = 0;
    st_status st;
    if ((st = ox_known_attrs(x, node, gemm ? "alpha,beta,transA,transB" : "")) ||
        (st = ox_int_attr(x, node, "transA", 0, 0, 0, &trans_a)) ||
        (st = ox_int_attr(x, node, "transB", 0, 0, 1, &trans_b)) ||
        (st = ox_float_attr(x, node, "alpha", 1, &alpha)) ||
        (st = ox_float_attr(x, node, "beta", 1, &beta)) ||
        (st = ox_read(x, node, 0, &in)) || (st = ox_floats(x, node, 1, &wt, &w, &wc)) ||
        (gemm && ox_input(n, 2) && (st = ox_floats(x, node, 2, &bt, &b, &bc))))
        return st;
    if (alpha != 1 || beta != 1)
        return ox_node_fail(x, node, "alpha=%g beta=%g: only 1 and 1 are supported", alpha,
                            beta);
    if (wt->n_dims != 2 || wt->dims[0] < 1 || wt->dims[1] < 1)
        return ox_node_fail(x, node, "weight '%s' has %zu dims: expected 2", n->input[1],
                            wt->n_dims);
    long out = (long)(trans_b ? wt->dims[0] : wt->dims[1]);
    if (b && (bc != (size_t)out || bt->n_dims > 2 || (bt->n_dims == 2 && bt->dims[0] != 1)))
        return ox_node_fail(x, node, "bias '%s' has %zu values in %zu dims for %ld outputs: "
                            "expected [%ld] or [1, %ld] (no other broadcast)", n->input[2], bc,
                            bt->n_dims, out, out, out);
    if ((st = ox_take(x, node, in)) || (st = ox_new_layer(x, node, "connected", OX_FC, &l)))
        return st;
    ox_layer *c = &x->layers[l];
    ox_opt(c, "output", "%ld", out);
    ox_tensor_add(c, "weights", node, n->input[1], w, wc, trans_b ? 0 : (size_t)wt->dims[0]);
    if (b)
        ox_tensor_add(c, "biases", node, n->input[2], b, bc, 0);
    return ox_output(x, node, l, 1);
}

static st_status op_add(ox *x, int node, int arg)
{
    const Onnx__NodeProto *n = x->g->node[node];
    st_status st = ox_known_attrs(x, node, "");
    if (st != ST_OK)
        return st;
    if (n->n_input != 2 || !ox_input(n, 0) || !ox_input(n, 1))
        return ox_node_fail(x, node, "expected two inputs");
    int k = ox_find_value(x, n->input[0]) ? 1 : 0; /* the constant one, if any */
    if (!ox_find_value(x, n->input[k]) && ox_constant(x, n->input[k], node)) {
        ox_value *v;
        const Onnx__TensorProto *t;
        const float *b;
        size_t bc;
        if ((st = ox_read(x, node, 1 - (size_t)k, &v)) ||
            (st = ox_floats(x, node, (size_t)k, &t, &b, &bc)))
            return st;
        ox_layer *l = ox_foldable(x, v, 1 << OX_FC | 1 << OX_CONV);
        if (!l || l->bn || ox_tensor_find(l, "biases"))
            return ox_node_fail(x, node, "adds a constant: supported only as the bias of a "
                                "MatMul, Gemm or Conv without one, read by nothing else");
        /* ONNX broadcasts from the last axis: one value per channel is
         * [C] (or [1, C]) after an inner product, [C, 1, 1] after a conv */
        const int64_t *d = t->dims;
        size_t nd = t->n_dims;
        int per_channel = l->kind == OX_FC ? nd == 1 || (nd == 2 && d[0] == 1)
                                           : (nd == 3 && d[1] == 1 && d[2] == 1) ||
                                                 (nd == 4 && d[0] == 1 && d[2] == 1 && d[3] == 1);
        if (!per_channel)
            return ox_node_fail(x, node, "adds '%s' of %zu dims: a bias is one value per "
                                "channel, [C] after a MatMul or Gemm, [C, 1, 1] after a Conv",
                                n->input[k], nd);
        ox_tensor_add(l, "biases", node, n->input[k], b, bc, 0);
        l->uses--;
        return ox_output(x, node, v->layer, v->flat);
    }
    ox_value *a, *b;
    int l = 0;
    if ((st = ox_read(x, node, 0, &a)) || (st = ox_read(x, node, 1, &b)))
        return st;
    if (b->layer == x->n_layers - 1 && a->layer != b->layer) { /* the last layer first */
        ox_value *t = a;
        a = b;
        b = t;
    }
    if (b->layer < 0)
        return ox_node_fail(x, node, "adds the graph input '%s': singletrain's shortcut adds "
                            "an earlier layer's output", b->name);
    int from = b->layer;
    if ((st = ox_take(x, node, a)) || (st = ox_new_layer(x, node, "shortcut", OX_SHORTCUT, &l)))
        return st;
    x->layers[l].from = from;
    ox_opt(&x->layers[l], "from", "%d", from);
    return ox_output(x, node, l, a->flat);
}

static st_status op_activation(ox *x, int node, int act)
{
    ox_value *v;
    st_status st = ox_known_attrs(x, node, act == ST_ACT_LEAKY ? "alpha" : "");
    if (st == ST_OK && act == ST_ACT_LEAKY) {
        float alpha;
        st = ox_float_attr(x, node, "alpha", 0.01f, &alpha);
        if (st == ST_OK && alpha != 0.1f)
            st = ox_node_fail(x, node, "alpha=%g: singletrain's leaky activation has slope "
                              "0.1 (Darknet's)", alpha);
    }
    if (st == ST_OK)
        st = ox_read(x, node, 0, &v);
    if (st != ST_OK)
        return st;
    const int kinds = 1 << OX_FC | 1 << OX_CONV | 1 << OX_SHORTCUT;
    ox_layer *l = ox_foldable(x, v, kinds);
    ox_layer *pool = ox_foldable(x, v, 1 << OX_MAXPOOL);
    if (!l && pool && pool->src >= 0) { /* act(max(x)) = max(act(x)): act is monotone */
        ox_value under = {NULL, pool->src, 0, 0};
        l = ox_foldable(x, &under, kinds);
    }
    if (!l)
        return ox_node_fail(x, node, "singletrain applies an activation as part of the Conv, "
                            "Gemm, MatMul or Add that makes its input (or the input of the "
                            "MaxPool that does), and '%s' is not such an output read by this "
                            "node alone (or it has an activation already)", v->name);
    l->act = act;
    x->layers[v->layer].uses--;
    return ox_output(x, node, v->layer, v->flat);
}

/* MaxPool, AveragePool: window, strides, pads. */
static st_status op_pool(ox *x, int node, int max)
{
    ox_value *in;
    long ks[2], strides[2] = {1, 1}, pads[4] = {0, 0, 0, 0}, dil[2] = {1, 1}, ceil_mode, order,
         include;
    int has_k, has_s, has_p, has_d, l = 0;
    st_status st;
    if ((st = ox_known_attrs(x, node, max ? "kernel_shape,strides,pads,dilations,ceil_mode,"
                             "auto_pad,storage_order" : "kernel_shape,strides,pads,ceil_mode,"
                             "auto_pad,count_include_pad")) ||
        (st = ox_ints_attr(x, node, "kernel_shape", 2, ks, &has_k)) ||
        (st = ox_ints_attr(x, node, "strides", 2, strides, &has_s)) ||
        (st = ox_ints_attr(x, node, "pads", 4, pads, &has_p)) ||
        (st = ox_ints_attr(x, node, "dilations", 2, dil, &has_d)) ||
        (st = ox_int_attr(x, node, "ceil_mode", 0, 0, 0, &ceil_mode)) ||
        (st = ox_int_attr(x, node, "storage_order", 0, 0, 0, &order)) ||
        (st = ox_int_attr(x, node, "count_include_pad", 0, 0, 1, &include)) ||
        (st = ox_string_attr(x, node, "auto_pad", "NOTSET")) || (st = ox_read(x, node, 0, &in)))
        return st;
    if (!has_k || ks[0] < 1 || ks[1] < 1)
        return ox_node_fail(x, node, "kernel_shape: expected two positive sizes");
    if (dil[0] != 1 || dil[1] != 1)
        return ox_node_fail(x, node, "dilations %ld,%ld: only 1,1", dil[0], dil[1]);
    if (max) {
        if (ks[0] != ks[1] || strides[0] != strides[1] || strides[0] < 1)
            return ox_node_fail(x, node, "kernel %ldx%ld, strides %ld,%ld: singletrain's "
                                "max pooling has a square window and equal strides", ks[0],
                                ks[1], strides[0], strides[1]);
        if (pads[0] != pads[1] || pads[2] != pads[3] || pads[2] - pads[0] < 0 ||
            pads[2] - pads[0] > 1)
            return ox_node_fail(x, node, "pads %ld,%ld,%ld,%ld: expected top = left, bottom = "
                                "right, and bottom the top or one more", pads[0], pads[1],
                                pads[2], pads[3]);
        if ((st = ox_take(x, node, in)) ||
            (st = ox_new_layer(x, node, "maxpool", OX_MAXPOOL, &l)))
            return st;
        ox_opt(&x->layers[l], "size", "%ld", ks[0]);
        ox_opt(&x->layers[l], "stride", "%ld", strides[0]);
        ox_opt(&x->layers[l], "padding", "%ld", pads[0] + pads[2]);
        return ox_output(x, node, l, 0);
    }
    if (pads[0] || pads[1] || pads[2] || pads[3])
        return ox_node_fail(x, node, "pads: singletrain's average pooling is global (a window "
                            "the whole input, no padding)");
    if ((st = ox_take(x, node, in)) || (st = ox_new_layer(x, node, "avgpool", OX_AVG, &l)))
        return st;
    x->layers[l].pool_h = (int)ks[0];
    x->layers[l].pool_w = (int)ks[1];
    return ox_output(x, node, l, 0);
}

static st_status op_global_pool(ox *x, int node, int arg)
{
    ox_value *in;
    int l = 0;
    st_status st;
    if ((st = ox_known_attrs(x, node, "")) || (st = ox_read(x, node, 0, &in)) ||
        (st = ox_take(x, node, in)) || (st = ox_new_layer(x, node, "avgpool", OX_AVG, &l)))
        return st;
    return ox_output(x, node, l, 0);
}

static st_status op_batchnorm(ox *x, int node, int arg)
{
    const Onnx__NodeProto *n = x->g->node[node];
    ox_value *in;
    const Onnx__TensorProto *t;
    const float *p[4];
    size_t c[4];
    float eps;
    long training;
    st_status st;
    if ((st = ox_known_attrs(x, node, "epsilon,momentum,training_mode,spatial")) ||
        (st = ox_float_attr(x, node, "epsilon", 1e-5f, &eps)) ||
        (st = ox_int_attr(x, node, "training_mode", 0, 0, 0, &training)) ||
        (st = ox_read(x, node, 0, &in)))
        return st;
    for (size_t k = 0; k < 4; k++)
        if ((st = ox_floats(x, node, k + 1, &t, &p[k], &c[k])))
            return st;
    if (fabsf(eps - ST_BN_EPS) > 1e-9f)
        return ox_node_fail(x, node, "epsilon=%g: singletrain's batch normalization adds %g",
                            eps, ST_BN_EPS);
    for (int k = 1; k < 4; k++)
        if (c[k] != c[0])
            return ox_node_fail(x, node, "scale, B, mean and var have %zu, %zu, %zu and %zu "
                                "values: expected one per channel", c[0], c[1], c[2], c[3]);
    static const char *const roles[4] = {"scales", "biases", "rolling_mean", "rolling_variance"};
    ox_layer *l = ox_foldable(x, in, 1 << OX_FC | 1 << OX_CONV);
    int at = 0;
    if (l && !l->bn) {
        at = in->layer;
        ox_tensor *bias = ox_tensor_find(l, "biases");
        if (bias) { /* y = w x + b, normalized: the mean less b, exact in training */
            if (bias->count != c[2])
                return ox_node_fail(x, node, "%zu channels after a layer of %zu", c[2],
                                    bias->count);
            float *mean = ox_new_floats(x, c[2]);
            if (!mean)
                return ST_ENOMEM;
            for (size_t i = 0; i < c[2]; i++)
                mean[i] = p[2][i] - bias->data[i];
            p[2] = mean;
            ox_tensor_drop(l, "biases");
        }
        l->bn = 1;
        l->uses--;
        ox_opt(l, "batch_normalize", "1");
    } else {
        if ((st = ox_take(x, node, in)) ||
            (st = ox_new_layer(x, node, "batchnorm", OX_BN, &at)))
            return st;
        l = &x->layers[at];
    }
    for (int k = 0; k < 4; k++)
        ox_tensor_add(l, roles[k], node, n->input[k + 1], p[k], c[k], 0);
    return ox_output(x, node, at, in->flat);
}

static st_status op_concat(ox *x, int node, int arg)
{
    const Onnx__NodeProto *n = x->g->node[node];
    long axis;
    int l = 0;
    st_status st;
    if ((st = ox_known_attrs(x, node, "axis")) ||
        (st = ox_int_attr(x, node, "axis", 1, -3, 1, &axis)))
        return st;
    if (axis != 1 && axis != -3)
        return ox_node_fail(x, node, "axis=%ld: singletrain concatenates channels (axis 1)",
                            axis);
    if (n->n_input < 1 || n->n_input > ST_MAX_SRC)
        return ox_node_fail(x, node, "%zu inputs: expected 1..%d", n->n_input, ST_MAX_SRC);
    char list[128] = "";
    size_t used = 0;
    for (size_t k = 0; k < n->n_input; k++) {
        ox_value *v;
        if ((st = ox_read(x, node, k, &v)))
            return st;
        if (v->layer < 0)
            return ox_node_fail(x, node, "concatenates the graph input '%s': singletrain's "
                                "route joins earlier layers' outputs", v->name);
        used += (size_t)snprintf(list + used, sizeof list - used, "%s%d", k ? "," : "",
                                 v->layer);
    }
    if ((st = ox_new_layer(x, node, "route", OX_OTHER, &l)))
        return st;
    ox_opt(&x->layers[l], "layers", "%s", list);
    return ox_output(x, node, l, 0);
}

/* Identity: the same values under another name; of a constant, a
 * constant (read where it is used, ox_constant). */
static st_status op_identity(ox *x, int node, int arg)
{
    ox_value *v;
    st_status st;
    const char *in = ox_input(x->g->node[node], 0);
    if ((st = ox_known_attrs(x, node, "")))
        return st;
    if (in && !ox_find_value(x, in) && ox_constant(x, in, node))
        return ST_OK;
    if ((st = ox_read(x, node, 0, &v)))
        return st;
    if (v->layer >= 0)
        x->layers[v->layer].uses--;
    return ox_output(x, node, v->layer, v->flat);
}

/* Flatten and Reshape: the same values, read as [N, C*H*W]. */
static st_status op_flatten(ox *x, int node, int reshape)
{
    ox_value *v;
    long axis;
    int64_t shape[2];
    size_t dims = 0;
    st_status st;
    if ((st = ox_known_attrs(x, node, reshape ? "allowzero" : "axis")) ||
        (st = ox_int_attr(x, node, "axis", 1, 1, 1, &axis)) || (st = ox_read(x, node, 0, &v)) ||
        (reshape && (st = ox_ints(x, node, 1, shape, 2, &dims))))
        return st;
    if (reshape && (dims != 2 || shape[1] == 0 || shape[1] < -1 || shape[0] < -1 ||
                    (shape[0] == -1 && shape[1] == -1)))
        return ox_node_fail(x, node, "a reshape to %zu dims: singletrain reshapes only to "
                            "[N, C*H*W] (2 dims, the samples first)", dims);
    if (reshape && shape[1] > 0) {
        ox_count_check *c = realloc(x->checks, (size_t)(x->n_checks + 1) * sizeof *c);
        if (!c)
            return st_fail(x->err, ST_ENOMEM, "out of memory reading %s", x->path);
        x->checks = c;
        c[x->n_checks++] = (ox_count_check){node, v->layer, (long)shape[1]};
    }
    if (v->layer >= 0)
        x->layers[v->layer].uses--;
    return ox_output(x, node, v->layer, 1);
}

static st_status op_dropout(ox *x, int node, int arg)
{
    const Onnx__NodeProto *n = x->g->node[node];
    ox_value *v;
    float ratio = 0.5f;
    int l = 0;
    st_status st;
    if ((st = ox_known_attrs(x, node, "ratio,seed,is_test")) ||
        (st = ox_float_attr(x, node, "ratio", 0.5f, &ratio)) || (st = ox_read(x, node, 0, &v)))
        return st;
    if (ox_input(n, 1)) {
        const Onnx__TensorProto *t;
        const float *r;
        size_t c = 0;
        if ((st = ox_floats(x, node, 1, &t, &r, &c)))
            return st;
        if (c != 1)
            return ox_node_fail(x, node, "ratio has %zu values: expected one", c);
        ratio = r[0];
    }
    if (!(ratio >= 0 && ratio <= 0.99f))
        return ox_node_fail(x, node, "ratio %g: expected 0..0.99", ratio);
    if ((st = ox_take(x, node, v)) || (st = ox_new_layer(x, node, "dropout", OX_OTHER, &l)))
        return st;
    ox_opt(&x->layers[l], "probability", "%.9g", ratio);
    return ox_output(x, node, l, v->flat);
}

static st_status op_lrn(ox *x, int node, int arg)
{
    ox_value *v;
    long size;
    float alpha, beta, bias;
    int l = 0;
    st_status st;
    if ((st = ox_known_attrs(x, node, "size,alpha,beta,bias")) ||
        (st = ox_int_attr(x, node, "size", 0, 1, 4095, &size)) ||
        (st = ox_float_attr(x, node, "alpha", 1e-4f, &alpha)) ||
        (st = ox_float_attr(x, node, "beta", 0.75f, &beta)) ||
        (st = ox_float_attr(x, node, "bias", 1.0f, &bias)) || (st = ox_read(x, node, 0, &v)))
        return st;
    if (size % 2 == 0)
        return ox_node_fail(x, node, "size=%ld: expected an odd size", size);
    if ((st = ox_take(x, node, v)) || (st = ox_new_layer(x, node, "lrn", OX_OTHER, &l)))
        return st;
    ox_opt(&x->layers[l], "size", "%ld", size);
    ox_opt(&x->layers[l], "alpha", "%.9g", alpha);
    ox_opt(&x->layers[l], "beta", "%.9g", beta);
    ox_opt(&x->layers[l], "k", "%.9g", bias);
    return ox_output(x, node, l, 0);
}

static st_status op_softmax(ox *x, int node, int arg)
{
    ox_value *v;
    long axis;
    int l = 0;
    st_status st;
    if ((st = ox_known_attrs(x, node, "axis")) ||
        (st = ox_int_attr(x, node, "axis", x->opset >= 13 ? -1 : 1, -4, 3, &axis)) ||
        (st = ox_read(x, node, 0, &v)))
        return st;
    /* singletrain's is over each sample's values: axis 1 or -1 of [N, K];
     * axis 1 of [N, C, H, W] before opset 13 (which flattens from the
     * axis), or from 13 on where H = W = 1 (checked after the build) */
    if (axis != 1 && !(axis == -1 && v->flat))
        return ox_node_fail(x, node, "axis=%ld of a %s tensor: singletrain's softmax is over "
                            "each sample's values (axis 1 of [N, classes])", axis,
                            v->flat ? "2-D" : "4-D");
    if ((st = ox_take(x, node, v)) || (st = ox_new_layer(x, node, "softmax", OX_SOFTMAX, &l)))
        return st;
    x->layers[l].flat_only = x->opset >= 13 && !v->flat;
    return ox_output(x, node, l, 1);
}

/* A Constant node: read where it is used (ox_constant). */
static st_status op_constant(ox *x, int node, int arg)
{
    return ST_OK;
}

/* The ops, each with its handler and the handler's argument; the list in
 * messages comes from it. Adding an op: a handler here, its row. */
static const struct {
    const char *op;
    st_status (*read)(ox *x, int node, int arg);
    int arg;
} ox_ops[] = {
    {"Conv", op_conv, 0},
    {"Gemm", op_fc, 1},
    {"MatMul", op_fc, 0},
    {"Add", op_add, 0},
    {"Relu", op_activation, ST_ACT_RELU},
    {"LeakyRelu", op_activation, ST_ACT_LEAKY},
    {"Sigmoid", op_activation, ST_ACT_LOGISTIC},
    {"Tanh", op_activation, ST_ACT_TANH},
    {"MaxPool", op_pool, 1},
    {"AveragePool", op_pool, 0},
    {"GlobalAveragePool", op_global_pool, 0},
    {"BatchNormalization", op_batchnorm, 0},
    {"Concat", op_concat, 0},
    {"Flatten", op_flatten, 0},
    {"Reshape", op_flatten, 1},
    {"Identity", op_identity, 0},
    {"Dropout", op_dropout, 0},
    {"LRN", op_lrn, 0},
    {"Softmax", op_softmax, 0},
    {"LogSoftmax", op_softmax, 0},
    {"Constant", op_constant, 0},
};

#define OX_N_OPS (sizeof ox_ops / sizeof ox_ops[0])

/* One node. */
static st_status ox_node(ox *x, int node)
{
    const Onnx__NodeProto *n = x->g->node[node];
    const char *op = n->op_type ? n->op_type : "";
    if (n->domain && n->domain[0] && strcmp(n->domain, "ai.onnx") != 0)
        return ox_node_fail(x, node, "domain '%s': only the default ONNX domain", n->domain);
    for (size_t i = 0; i < OX_N_OPS; i++)
        if (strcmp(op, ox_ops[i].op) == 0)
            return ox_ops[i].read(x, node, ox_ops[i].arg);
    char list[512] = "";
    for (size_t i = 0; i < OX_N_OPS; i++)
        st_strlist_append(list, sizeof list, ox_ops[i].op, i, OX_N_OPS, ", ");
    return ox_node_fail(x, node, "unsupported op (supported: %s)%s", list,
                        strcmp(op, "Shape") == 0 ? "; a reshape computed from the input's "
                        "shape (PyTorch's x.view(x.size(0), -1)) is one: flatten with "
                        "torch.flatten(x, 1) instead" : "");
}

/* ---- the graph, the [net] section, the build ---- */

/* The graph's input that is not an initializer: its shape [N, C, H, W] or
 * [N, K] into *in, its value added. */
static st_status ox_graph_input(ox *x, st_shape *in)
{
    const Onnx__ValueInfoProto *vi = NULL;
    for (size_t i = 0; i < x->g->n_input && !vi; i++) {
        const char *name = x->g->input[i]->name;
        if (name && name[0] && !ox_constant(x, name, 0))
            vi = x->g->input[i];
    }
    if (!vi)
        return st_fail(x->err, ST_EINPUT, "%s: the graph has no input besides its "
                       "initializers", x->path);
    const Onnx__TypeProto *t = vi->type;
    const Onnx__TensorShapeProto *s =
        t && t->value_case == ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE && t->tensor_type
            ? t->tensor_type->shape : NULL;
    if (!s || (s->n_dim != 4 && s->n_dim != 2))
        return st_fail(x->err, ST_EINPUT, "%s: graph input '%s' has %s: expected a float tensor "
                       "[N, C, H, W] or [N, K]", x->path, vi->name,
                       s ? "another rank" : "no tensor shape");
    int d[4] = {1, 1, 1, 1};
    for (size_t i = 1; i < s->n_dim; i++) {
        const Onnx__TensorShapeProto__Dimension *dim = s->dim[i];
        if (dim->value_case != ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE ||
            dim->dim_value < 1 || dim->dim_value > (1 << 16))
            return st_fail(x->err, ST_EINPUT, "%s: graph input '%s': dimension %zu is not a "
                           "number from 1 to 65536 (only the batch, dimension 0, may be free)",
                           x->path, vi->name, i);
        d[i] = (int)dim->dim_value;
    }
    *in = (st_shape){d[1], d[2], d[3]};
    x->n_values = 0;
    ox_value *v = malloc(sizeof *v);
    if (!v)
        return st_fail(x->err, ST_ENOMEM, "out of memory reading %s", x->path);
    x->values = v;
    *v = (ox_value){vi->name, -1, s->n_dim == 2, 0};
    x->n_values = 1;
    return ST_OK;
}

static int ox_file_exists(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 || errno != ENOENT;
}

/* The [net] section: hparams_path, the sidecar, or none; then the input
 * shape; parsed into hp, errors naming the file it came from. */
static st_status ox_net_section(const char *path, const char *hparams_path, st_shape in,
                                st_cfg *cfg, st_hparams *hp, const st_log *log, st_error *err)
{
    char sidecar[ST_PATH_MAX];
    size_t stem = strlen(path) - (st_onnx_is_model(path) ? 5 : 0);
    snprintf(sidecar, sizeof sidecar, "%.*s.train", (int)stem, path);
    const char *hp_path = hparams_path ? hparams_path : ox_file_exists(sidecar) ? sidecar : NULL;
    st_status st;
    memset(cfg, 0, sizeof *cfg);
    if (hp_path) {
        char *text;
        size_t bytes;
        if ((st = st_read_text(hp_path, "training settings file", OX_MAX_SETTINGS_BYTES, &text,
                               &bytes, err)))
            return st;
        st = st_cfg_parse(cfg, hp_path, text, bytes, err);
        free(text);
        if (st != ST_OK)
            return st;
        if (cfg->n_secs != 1 || (strcmp(cfg->secs[0].type, "net") != 0 &&
                                 strcmp(cfg->secs[0].type, "network") != 0))
            return st_fail(err, ST_EINPUT, "%s: expected one [net] section (the training "
                           "settings of %s) and nothing else", hp_path, path);
    } else {
        cfg->path = strdup(path);
        if (!cfg->path || (st = st_cfg_add_section(cfg, "net", 0, err)))
            return st_fail(err, ST_ENOMEM, "out of memory reading %s", path);
        st_info(log, "%s: no %s: the [net] defaults (batch=1, learning_rate=0.001, ...)", path,
                sidecar);
    }
    static const char *const keys[3] = {"height", "width", "channels"};
    int vals[3] = {in.h, in.w, in.c};
    for (int k = 0; k < 3; k++) {
        st_cfg_option *o = st_cfg_find(&cfg->secs[0], keys[k]);
        if (o)
            return st_fail(err, ST_EINPUT, "%s:%d: [net] %s=: the input shape is the ONNX "
                           "graph's (%d x %d x %d): leave it out", cfg->path, o->line, keys[k],
                           in.w, in.h, in.c);
        char v[16];
        snprintf(v, sizeof v, "%d", vals[k]);
        if ((st = st_cfg_add_option(cfg, keys[k], v, 0, err)))
            return st;
    }
    if ((st = st_hparams_parse(cfg, hp, log, err)))
        return st;
    char *p = strdup(path);
    if (!p)
        return st_fail(err, ST_ENOMEM, "out of memory reading %s", path);
    free(cfg->path); /* from here messages name the model */
    cfg->path = p;
    return ST_OK;
}

static st_status ox_sections(const ox *x, st_cfg *cfg, st_error *err)
{
    st_status st = ST_OK;
    for (int i = 0; i < x->n_layers && st == ST_OK; i++) {
        const ox_layer *l = &x->layers[i];
        int line = l->node + 1;
        st = st_cfg_add_section(cfg, l->type, line, err);
        for (int k = 0; k < l->n_opt && st == ST_OK; k++)
            st = st_cfg_add_option(cfg, l->opt[k].key, l->opt[k].val, line, err);
        if (st == ST_OK && (l->kind == OX_CONV || l->kind == OX_FC || l->kind == OX_SHORTCUT))
            st = st_cfg_add_option(cfg, "activation", st_act_names[l->act], line, err);
    }
    return st;
}

/* After the build: what needs the layers' shapes. */
static st_status ox_check_shapes(const ox *x, const st_net *net)
{
    for (int i = 0; i < x->n_layers; i++) {
        const ox_layer *l = &x->layers[i];
        const st_layer *b = net->layers[i];
        if (l->kind == OX_SHORTCUT) {
            st_shape f = net->layers[l->from]->out;
            if (f.c != b->in.c || f.h != b->in.h || f.w != b->in.w)
                return ox_node_fail(x, l->node, "adds %d x %d x %d to %d x %d x %d: expected "
                                    "the same shapes (no broadcast)", f.c, f.h, f.w, b->in.c,
                                    b->in.h, b->in.w);
        }
        if (l->kind == OX_AVG && l->pool_h && (l->pool_h != b->in.h || l->pool_w != b->in.w))
            return ox_node_fail(x, l->node, "window %dx%d on a %dx%d input: singletrain's "
                                "average pooling is global (the window the whole input)",
                                l->pool_h, l->pool_w, b->in.h, b->in.w);
        if (l->flat_only && (b->in.h != 1 || b->in.w != 1))
            return ox_node_fail(x, l->node, "a softmax over the last axis of a %d x %d x %d "
                                "tensor: singletrain's is over each sample's values (flatten "
                                "first)", b->in.c, b->in.h, b->in.w);
    }
    for (int i = 0; i < x->n_checks; i++) {
        const ox_count_check *c = &x->checks[i];
        st_shape s = c->layer >= 0 ? net->layers[c->layer]->out : net->input;
        if ((long)st_shape_count(s) != c->count)
            return ox_node_fail(x, c->node, "reshapes %d x %d x %d values per sample to %ld",
                                s.c, s.h, s.w, c->count);
    }
    return ST_OK;
}

/* The starting weights: the defaults, then every initializer in its place. */
static st_status ox_start_weights(const ox *x, st_net *net)
{
    float *w = st_calloc(net->params.count ? net->params.count : 1, sizeof *w,
                         "the starting weights", x->err);
    if (!w)
        return ST_ENOMEM;
    st_params_init(&net->params, w, 0);
    for (int i = 0; i < x->n_layers; i++) {
        const ox_layer *l = &x->layers[i];
        for (int k = 0; k < l->n_tensor; k++) {
            const ox_tensor *t = &l->tensor[k];
            char name[48];
            snprintf(name, sizeof name, "%d.%s", i, t->role);
            const st_param *p = NULL;
            for (int j = 0; j < net->params.n && !p; j++)
                if (strcmp(net->params.p[j].name, name) == 0)
                    p = &net->params.p[j];
            if (!p || p->count != t->count) {
                const st_layer *b = net->layers[i];
                free(w);
                return ox_node_fail(x, t->node, "'%s' has %zu values, but the layer needs %zu "
                                    "for its input %d x %d x %d", t->name, t->count,
                                    p ? p->count : 0, b->in.c, b->in.h, b->in.w);
            }
            float *dst = w + p->offset;
            if (!t->rows) {
                memcpy(dst, t->data, t->count * sizeof *dst);
                continue;
            }
            size_t cols = t->count / t->rows; /* [rows][cols] -> [cols][rows] */
            for (size_t r = 0; r < t->rows; r++)
                for (size_t c = 0; c < cols; c++)
                    dst[c * t->rows + r] = t->data[r * cols + c];
        }
    }
    net->params.start = w;
    return ST_OK;
}

/* The graph's first output is the last layer's; a softmax is added when the
 * graph does not end in one. */
static st_status ox_finish_graph(ox *x)
{
    const char *name = x->g->n_output ? x->g->output[0]->name : NULL;
    ox_value *v = name ? ox_find_value(x, name) : NULL;
    if (!v || v->layer < 0)
        return st_fail(x->err, ST_EINPUT, "%s: the graph's output '%s' is made by no layer",
                       x->path, name ? name : "(none)");
    if (v->layer != x->n_layers - 1)
        return st_fail(x->err, ST_EINPUT, "%s: the graph's output '%s' is not the last layer's "
                       "(node %d's): singletrain trains the last layer's outputs as the "
                       "classes", x->path, name, x->layers[x->n_layers - 1].node + 1);
    if (x->layers[x->n_layers - 1].kind == OX_SOFTMAX)
        return ST_OK;
    int l = 0;
    st_status st = ox_new_layer(x, (int)x->g->n_node - 1, "softmax", OX_SOFTMAX, &l);
    return st;
}

static long ox_opset(const Onnx__ModelProto *m)
{
    for (size_t i = 0; i < m->n_opset_import; i++) {
        const char *d = m->opset_import[i]->domain;
        if ((!d || !d[0] || strcmp(d, "ai.onnx") == 0) && m->opset_import[i]->has_version)
            return (long)m->opset_import[i]->version;
    }
    return OX_DEFAULT_OPSET;
}

static st_status ox_translate(ox *x, const Onnx__ModelProto *m, st_shape *in)
{
    if (!m->graph || m->graph->n_node == 0)
        return st_fail(x->err, ST_EINPUT, "%s: the model has no graph or no nodes", x->path);
    x->g = m->graph;
    x->opset = ox_opset(m);
    if (x->g->n_node > OX_MAX_NODES)
        return st_fail(x->err, ST_EINPUT, "%s: %zu nodes: singletrain reads at most %d",
                       x->path, x->g->n_node, OX_MAX_NODES);
    for (size_t i = 0; i < x->g->n_node; i++)
        for (size_t k = 0; k < x->g->node[i]->n_input; k++)
            if (!x->g->node[i]->input[k])
                return st_fail(x->err, ST_EINPUT, "%s: node %zu has a null input", x->path,
                               i + 1);
    st_status st = ox_graph_input(x, in);
    for (size_t i = 0; i < x->g->n_node && st == ST_OK; i++)
        st = ox_node(x, (int)i);
    if (st == ST_OK && x->n_layers == 0)
        st = st_fail(x->err, ST_EINPUT, "%s: no node makes a layer", x->path);
    if (st == ST_OK)
        st = ox_finish_graph(x);
    return st;
}

int st_onnx_is_model(const char *path)
{
    size_t len = strlen(path);
    return len > 5 && strcmp(path + len - 5, ".onnx") == 0;
}

st_status st_onnx_load(const char *path, const char *hparams_path, st_cfg *cfg,
                       st_hparams *hp, st_net *net, const st_log *log, st_error *err)
{
    memset(net, 0, sizeof *net);
    memset(cfg, 0, sizeof *cfg);
    ox x = {.path = path, .err = err};
    char *bytes = NULL;
    size_t len = 0;
    Onnx__ModelProto *m = NULL;
    st_shape in;
    st_status st = st_read_text(path, "ONNX model", OX_MAX_BYTES, &bytes, &len, err);
    if (st != ST_OK)
        goto done;
    m = onnx__model_proto__unpack(NULL, len, (const uint8_t *)bytes);
    if (!m) {
        st = st_fail(err, ST_EINPUT, "%s: not an ONNX model (the protobuf does not decode as "
                     "a ModelProto: truncated or another format)", path);
        goto done;
    }
    if ((st = ox_translate(&x, m, &in)) ||
        (st = ox_net_section(path, hparams_path, in, cfg, hp, log, err)) ||
        (st = ox_sections(&x, cfg, err)) || (st = st_net_build(net, cfg, hp->input, log, err)))
        goto done;
    if ((st = ox_check_shapes(&x, net)) || (st = ox_start_weights(&x, net)))
        goto done;
done:
    if (st != ST_OK) {
        st_net_free(net);
        st_cfg_free(cfg);
    }
    for (int i = 0; i < x.n_bufs; i++)
        free(x.bufs[i]);
    free(x.bufs);
    free(x.values);
    free(x.layers);
    free(x.checks);
    if (m)
        onnx__model_proto__free_unpacked(m, NULL);
    free(bytes);
    return st;
}
