/* Writing a network as an ONNX model (opset 13): each layer as the nodes
 * onnx.c reads back into the same layer, so that re-importing the file
 * gives the same network and the same outputs bit for bit; batch norm in
 * inference form (BatchNormalization with the running statistics). What
 * each layer computes, its options as built, comes from its ops
 * (st_layer_ops.graph, layers/layer.h); a writer per st_graph_op. */
#include "net/onnx.h"

#include <assert.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <onnx.pb-c.h>

#include "base/fileio.h"
#include "ops/params.h"

#define EX_OPSET 13

/* The model being written: every allocation in one list, freed together;
 * the nodes and initializers of the graph. */
typedef struct ex {
    const st_net *net;
    const st_cfg *cfg;
    const float *weights;
    void **allocs;
    size_t n_allocs;
    Onnx__NodeProto **nodes;
    size_t n_nodes;
    Onnx__TensorProto **inits;
    size_t n_inits;
    st_error *err;
} ex;

static void *ex_alloc(ex *e, size_t bytes)
{
    void **a = realloc(e->allocs, (e->n_allocs + 1) * sizeof *a);
    void *p = a ? calloc(1, bytes ? bytes : 1) : NULL;
    if (a)
        e->allocs = a;
    if (!p) {
        st_fail(e->err, ST_ENOMEM, "out of memory writing an ONNX model");
        return NULL;
    }
    a[e->n_allocs++] = p;
    return p;
}

static char *ex_name(ex *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static char *ex_name(ex *e, const char *fmt, ...)
{
    char buf[64];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    char *s = ex_alloc(e, strlen(buf) + 1);
    if (s)
        strcpy(s, buf);
    return s;
}

static st_status ex_push(ex *e, void ***list, size_t *n, void *item)
{
    void **l = realloc(*list, (*n + 1) * sizeof *l);
    if (!l)
        return st_fail(e->err, ST_ENOMEM, "out of memory writing an ONNX model");
    *list = l;
    l[(*n)++] = item;
    return ST_OK;
}

/* A float initializer named name, dims [nd], the values data (not copied). */
static const char *ex_tensor(ex *e, const char *name, const float *data, int nd,
                             const int64_t *dims)
{
    Onnx__TensorProto *t = ex_alloc(e, sizeof *t);
    int64_t *d = ex_alloc(e, (size_t)nd * sizeof *d);
    if (!t || !d)
        return NULL;
    onnx__tensor_proto__init(t);
    size_t count = 1;
    for (int i = 0; i < nd; i++)
        count *= (size_t)(d[i] = dims[i]);
    t->n_dims = (size_t)nd;
    t->dims = d;
    t->has_data_type = 1;
    t->data_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
    t->name = (char *)name;
    t->has_raw_data = 1; /* little-endian, as every host this runs on */
    t->raw_data.len = count * sizeof(float);
    t->raw_data.data = (uint8_t *)data;
    if (ex_push(e, (void ***)&e->inits, &e->n_inits, t) != ST_OK)
        return NULL;
    return name;
}

/* The layer's parameter role, as an initializer "<layer>.<role>". */
static const char *ex_param(ex *e, int layer, const char *role, int nd, const int64_t *dims)
{
    char name[48];
    snprintf(name, sizeof name, "%d.%s", layer, role);
    size_t count = 1;
    for (int k = 0; k < nd; k++)
        count *= (size_t)dims[k];
    for (int i = 0; i < e->net->params.n; i++)
        if (strcmp(e->net->params.p[i].name, name) == 0 && e->net->params.p[i].count == count)
            return ex_tensor(e, ex_name(e, "%s", name), e->weights + e->net->params.p[i].offset,
                             nd, dims);
    st_fail(e->err, ST_EINTERNAL, "layer %d has no parameter %s of %zu values", layer, name,
            count);
    return NULL;
}

/* A node op(inputs) -> output; attributes added by ex_ints / ex_int / ex_float. */
static Onnx__NodeProto *ex_node(ex *e, const char *op, const char *output, int n_in, ...)
{
    Onnx__NodeProto *n = ex_alloc(e, sizeof *n);
    char **in = ex_alloc(e, (size_t)n_in * sizeof *in);
    char **out = ex_alloc(e, sizeof *out);
    if (!n || !in || !out)
        return NULL;
    onnx__node_proto__init(n);
    n->op_type = (char *)op;
    va_list ap;
    va_start(ap, n_in);
    for (int i = 0; i < n_in; i++)
        in[i] = (char *)va_arg(ap, const char *);
    va_end(ap);
    for (int i = 0; i < n_in; i++)
        if (!in[i])
            return NULL; /* an input's allocation failed: err holds it */
    n->n_input = (size_t)n_in;
    n->input = in;
    out[0] = (char *)output;
    n->n_output = 1;
    n->output = out;
    if (ex_push(e, (void ***)&e->nodes, &e->n_nodes, n) != ST_OK)
        return NULL;
    return n;
}

/* A new attribute of node n, of the type; NULL when out of memory. */
static Onnx__AttributeProto *ex_attr(ex *e, Onnx__NodeProto *n, const char *name,
                                     Onnx__AttributeProto__AttributeType type)
{
    Onnx__AttributeProto *a = ex_alloc(e, sizeof *a);
    Onnx__AttributeProto **l = ex_alloc(e, (n->n_attribute + 1) * sizeof *l);
    if (!a || !l)
        return NULL;
    onnx__attribute_proto__init(a);
    a->name = (char *)name;
    a->has_type = 1;
    a->type = type;
    if (n->n_attribute)
        memcpy(l, n->attribute, n->n_attribute * sizeof *l);
    l[n->n_attribute++] = a;
    n->attribute = l;
    return a;
}

static st_status ex_ints(ex *e, Onnx__NodeProto *n, const char *name, int count, ...)
{
    Onnx__AttributeProto *a = ex_attr(e, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS);
    int64_t *v = ex_alloc(e, (size_t)count * sizeof *v);
    if (!a || !v)
        return ST_ENOMEM;
    va_list ap;
    va_start(ap, count);
    for (int i = 0; i < count; i++)
        v[i] = va_arg(ap, int);
    va_end(ap);
    a->n_ints = (size_t)count;
    a->ints = v;
    return ST_OK;
}

static st_status ex_int(ex *e, Onnx__NodeProto *n, const char *name, long value)
{
    Onnx__AttributeProto *a = ex_attr(e, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT);
    if (!a)
        return ST_ENOMEM;
    a->has_i = 1;
    a->i = value;
    return ST_OK;
}

static st_status ex_float(ex *e, Onnx__NodeProto *n, const char *name, float value)
{
    Onnx__AttributeProto *a = ex_attr(e, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT);
    if (!a)
        return ST_ENOMEM;
    a->has_f = 1;
    a->f = value;
    return ST_OK;
}

/* ---- the layers ---- */

/* After a NULL from ex_alloc or a node built with it: the error recorded. */
static st_status ex_failed(const ex *e)
{
    return e->err->code ? e->err->code : ST_ENOMEM;
}

/* Layer i cannot be written: why, with its cfg section. */
static st_status ex_unsupported(const ex *e, int i, const char *what)
{
    const st_cfg_section *s = &e->cfg->secs[i + 1];
    return st_fail(e->err, ST_EINPUT, "%s:%d: [%s] (layer %d) cannot be written as ONNX: %s",
                   e->cfg->path, s->line, s->type, i, what);
}

/* The activation node after `value` (none for linear); *out the result. */
static st_status ex_activation(ex *e, int i, int act, const char *value, const char **out)
{
    static const char *const ops[ST_ACT_COUNT] = {
        [ST_ACT_RELU] = "Relu", [ST_ACT_LEAKY] = "LeakyRelu", [ST_ACT_LOGISTIC] = "Sigmoid",
        [ST_ACT_TANH] = "Tanh"};
    *out = value;
    if (act == ST_ACT_LINEAR)
        return ST_OK;
    const char *name = ex_name(e, "%d.act", i);
    Onnx__NodeProto *n = name ? ex_node(e, ops[act], name, 1, value) : NULL;
    if (!n || (act == ST_ACT_LEAKY && ex_float(e, n, "alpha", 0.1f) != ST_OK))
        return ex_failed(e);
    *out = name;
    return ST_OK;
}

/* ONNX's momentum of layer i's batch norm: the share of the running
 * statistics kept each batch, st_param.keep (bn_momentum= is 1 - it). */
static float ex_keep(const ex *e, int i)
{
    char name[48];
    snprintf(name, sizeof name, "%d.rolling_mean", i);
    for (int k = 0; k < e->net->params.n; k++)
        if (strcmp(e->net->params.p[k].name, name) == 0)
            return e->net->params.p[k].keep;
    assert(!"ex_batchnorm asks after ex_param has found the tensor");
    return ST_STAT_KEEP;
}

/* BatchNormalization in inference form over `value`, channels c. */
static st_status ex_batchnorm(ex *e, int i, int c, const char *value, const char **out)
{
    int64_t d[1] = {c};
    const char *name = ex_name(e, "%d.bn", i);
    const char *scale = ex_param(e, i, "scales", 1, d), *shift = ex_param(e, i, "biases", 1, d),
               *mean = ex_param(e, i, "rolling_mean", 1, d),
               *var = ex_param(e, i, "rolling_variance", 1, d);
    Onnx__NodeProto *n = name && scale && shift && mean && var
                             ? ex_node(e, "BatchNormalization", name, 5, value, scale, shift, mean,
                                       var)
                             : NULL;
    if (!n || ex_float(e, n, "epsilon", ST_BN_EPS) != ST_OK ||
        ex_float(e, n, "momentum", ex_keep(e, i)) != ST_OK)
        return ex_failed(e);
    *out = name;
    return ST_OK;
}

/* [N, C*H*W] of a value of rank 4 (layer i's k-th), or the value itself. */
static const char *ex_flat(ex *e, int i, int k, const char *value, int *rank)
{
    if (*rank == 2)
        return value;
    const char *name = ex_name(e, "%d.flat%d", i, k);
    Onnx__NodeProto *n = name ? ex_node(e, "Flatten", name, 1, value) : NULL;
    *rank = 2;
    return n ? name : NULL;
}

/* A layer's writer: layer i, whose op is g, reads `in` (of rank in->rank,
 * 4 or 2) and the outputs of earlier layers (values, ranks); it adds its
 * nodes and sets out->value, the value holding its output, and out->rank. */
typedef struct ex_io {
    const st_graph_node *g;
    const char *in;
    int in_rank;
    const char *const *values;
    const int *ranks;
    const char *value;
    int rank;
} ex_io;

static st_status ex_conv(ex *e, int i, ex_io *io)
{
    const st_layer *l = e->net->layers[i];
    int size = io->g->conv.size, stride = io->g->conv.stride, padding = io->g->conv.padding,
        groups = io->g->conv.groups, bn = io->g->conv.batch_normalize;
    st_status st;
    int64_t wd[4] = {l->out.c, l->in.c / groups, size, size}, bd[1] = {l->out.c};
    const char *name = ex_name(e, "%d.conv", i), *w = ex_param(e, i, "weights", 4, wd);
    const char *b = bn ? NULL : ex_param(e, i, "biases", 1, bd);
    Onnx__NodeProto *n = !name || !w || (!bn && !b) ? NULL
                         : bn ? ex_node(e, "Conv", name, 2, io->in, w)
                              : ex_node(e, "Conv", name, 3, io->in, w, b);
    if (!n || ex_ints(e, n, "kernel_shape", 2, size, size) ||
        ex_ints(e, n, "strides", 2, stride, stride) ||
        ex_ints(e, n, "pads", 4, padding, padding, padding, padding) ||
        ex_int(e, n, "group", groups))
        return ex_failed(e);
    const char *v = name;
    if (bn && (st = ex_batchnorm(e, i, l->out.c, v, &v)))
        return st;
    return ex_activation(e, i, io->g->conv.act, v, &io->value);
}

static st_status ex_inner(ex *e, int i, ex_io *io)
{
    const st_layer *l = e->net->layers[i];
    int bn = io->g->inner.batch_normalize, rank = io->in_rank;
    st_status st;
    int64_t wd[2] = {l->out.c, (int64_t)st_shape_count(l->in)}, bd[1] = {l->out.c};
    const char *x = ex_flat(e, i, 0, io->in, &rank), *name = ex_name(e, "%d.fc", i),
               *w = ex_param(e, i, "weights", 2, wd);
    const char *b = bn ? NULL : ex_param(e, i, "biases", 1, bd);
    Onnx__NodeProto *n = !x || !name || !w || (!bn && !b) ? NULL
                         : bn ? ex_node(e, "Gemm", name, 2, x, w)
                              : ex_node(e, "Gemm", name, 3, x, w, b);
    if (!n || ex_int(e, n, "transB", 1))
        return ex_failed(e);
    const char *v = name;
    io->rank = 2;
    if (bn && (st = ex_batchnorm(e, i, l->out.c, v, &v)))
        return st;
    return ex_activation(e, i, io->g->inner.act, v, &io->value);
}

static st_status ex_maxpool(ex *e, int i, ex_io *io)
{
    int size = io->g->maxpool.size, stride = io->g->maxpool.stride,
        top = io->g->maxpool.pad_begin, bottom = io->g->maxpool.pad_end;
    const char *name = ex_name(e, "%d.max", i);
    Onnx__NodeProto *n = name ? ex_node(e, "MaxPool", name, 1, io->in) : NULL;
    if (!n || ex_ints(e, n, "kernel_shape", 2, size, size) ||
        ex_ints(e, n, "strides", 2, stride, stride) ||
        ex_ints(e, n, "pads", 4, top, top, bottom, bottom))
        return ex_failed(e);
    io->value = name;
    return ST_OK;
}

static st_status ex_avgpool(ex *e, int i, ex_io *io)
{
    const char *name = ex_name(e, "%d.avg", i);
    if (!name || !ex_node(e, "GlobalAveragePool", name, 1, io->in))
        return ex_failed(e);
    io->value = name;
    return ST_OK;
}

static st_status ex_batchnorm_layer(ex *e, int i, ex_io *io)
{
    io->rank = io->in_rank;
    return ex_batchnorm(e, i, e->net->layers[i]->out.c, io->in, &io->value);
}

static st_status ex_dropout(ex *e, int i, ex_io *io)
{
    float *ratio = ex_alloc(e, sizeof *ratio);
    if (!ratio)
        return ex_failed(e);
    *ratio = io->g->dropout.ratio;
    int64_t none[1] = {0};
    const char *name = ex_name(e, "%d.dropout", i), *rname = ex_name(e, "%d.ratio", i);
    const char *r = rname ? ex_tensor(e, rname, ratio, 0, none) : NULL;
    if (!name || !r || !ex_node(e, "Dropout", name, 2, io->in, r))
        return ex_failed(e);
    io->value = name;
    io->rank = io->in_rank;
    return ST_OK;
}

static st_status ex_lrn(ex *e, int i, ex_io *io)
{
    int size = io->g->lrn.size;
    float alpha = io->g->lrn.alpha, beta = io->g->lrn.beta, k = io->g->lrn.k;
    const char *name = ex_name(e, "%d.lrn", i);
    Onnx__NodeProto *n = name ? ex_node(e, "LRN", name, 1, io->in) : NULL;
    if (!n || ex_int(e, n, "size", size) || ex_float(e, n, "alpha", alpha) ||
        ex_float(e, n, "beta", beta) || ex_float(e, n, "bias", k))
        return ex_failed(e);
    io->value = name;
    return ST_OK;
}

static st_status ex_softmax(ex *e, int i, ex_io *io)
{
    int rank = io->in_rank;
    if (io->g->softmax.groups != 1 || io->g->softmax.temperature != 1.0f)
        return ex_unsupported(e, i, "only groups=1 and temperature=1 (a Softmax)");
    const char *x = ex_flat(e, i, 0, io->in, &rank), *name = ex_name(e, "%d.softmax", i);
    Onnx__NodeProto *n = x && name ? ex_node(e, "Softmax", name, 1, x) : NULL;
    if (!n || ex_int(e, n, "axis", 1))
        return ex_failed(e);
    io->value = name;
    io->rank = 2;
    return ST_OK;
}

/* The inputs of layer i, each flattened where another is 2-D (a layer's
 * output of 1 x 1 is [N, C, 1, 1] or [N, C]: Add and Concat need one rank);
 * io->rank the result's. */
static st_status ex_sources(ex *e, int i, ex_io *io, char **inputs)
{
    const st_layer *l = e->net->layers[i];
    io->rank = 4;
    for (int k = 0; k < l->n_src; k++)
        if (io->ranks[l->src[k]] == 2)
            io->rank = 2;
    for (int k = 0; k < l->n_src; k++) {
        int r = io->rank == 2 ? io->ranks[l->src[k]] : 2;
        inputs[k] = (char *)ex_flat(e, i, k, io->values[l->src[k]], &r);
        if (!inputs[k])
            return ex_failed(e);
    }
    return ST_OK;
}

static st_status ex_add(ex *e, int i, ex_io *io)
{
    const st_layer *l = e->net->layers[i];
    st_status st;
    st_shape f = e->net->layers[l->src[1]]->out;
    if (io->g->add.alpha != 1.0f || io->g->add.beta != 1.0f || f.c != l->in.c || f.h != l->in.h || f.w != l->in.w)
        return ex_unsupported(e, i, "only alpha=1 and beta=1 on two outputs of the same shape "
                              "(an Add)");
    char *in[2];
    if ((st = ex_sources(e, i, io, in)))
        return st;
    const char *name = ex_name(e, "%d.add", i);
    if (!name || !ex_node(e, "Add", name, 2, in[0], in[1]))
        return ex_failed(e);
    return ex_activation(e, i, io->g->add.act, name, &io->value);
}

static st_status ex_concat(ex *e, int i, ex_io *io)
{
    const st_layer *l = e->net->layers[i];
    if (l->n_src == 1) { /* the same values: no node */
        io->value = io->in;
        io->rank = io->in_rank;
        return ST_OK;
    }
    char **inputs = ex_alloc(e, (size_t)l->n_src * sizeof *inputs);
    st_status st = inputs ? ex_sources(e, i, io, inputs) : ex_failed(e); /* nodes before */
    if (st != ST_OK)
        return st;
    const char *name = ex_name(e, "%d.concat", i);
    Onnx__NodeProto *n = name ? ex_node(e, "Concat", name, 0) : NULL;
    if (!n || ex_int(e, n, "axis", 1))
        return ex_failed(e);
    n->n_input = (size_t)l->n_src;
    n->input = inputs;
    io->value = name;
    return ST_OK;
}

/* The output is the input ([cost]: the loss alone). */
static st_status ex_identity(ex *e, int i, ex_io *io)
{
    io->value = io->in;
    io->rank = io->in_rank;
    return ST_OK;
}

/* The writer of an op; spatial: ONNX's op needs [N, C, H, W]. A switch
 * without a default: a new st_graph_op without a writer is named by the
 * compiler. */
typedef struct ex_writer {
    st_status (*write)(ex *e, int i, ex_io *io);
    int spatial;
} ex_writer;

static ex_writer ex_writer_of(st_graph_op op)
{
    switch (op) {
    case ST_GRAPH_CONV: return (ex_writer){ex_conv, 1};
    case ST_GRAPH_INNER: return (ex_writer){ex_inner, 0};
    case ST_GRAPH_MAXPOOL: return (ex_writer){ex_maxpool, 1};
    case ST_GRAPH_AVGPOOL: return (ex_writer){ex_avgpool, 1};
    case ST_GRAPH_BATCHNORM: return (ex_writer){ex_batchnorm_layer, 0};
    case ST_GRAPH_DROPOUT: return (ex_writer){ex_dropout, 0};
    case ST_GRAPH_LRN: return (ex_writer){ex_lrn, 1};
    case ST_GRAPH_SOFTMAX: return (ex_writer){ex_softmax, 0};
    case ST_GRAPH_ADD: return (ex_writer){ex_add, 0};
    case ST_GRAPH_CONCAT: return (ex_writer){ex_concat, 0};
    case ST_GRAPH_IDENTITY: return (ex_writer){ex_identity, 0};
    }
    assert(!"an st_graph_op out of its enum");
    return (ex_writer){NULL, 0};
}

static st_status ex_layer(ex *e, int i, const char **values, int *ranks)
{
    const st_layer *l = e->net->layers[i];
    if (!l->ops->graph)
        return ex_unsupported(e, i, l->ops->no_graph);
    st_graph_node g;
    memset(&g, 0, sizeof g);
    l->ops->graph(l, &g);
    ex_io io = {.g = &g, .in = l->src[0] < 0 ? "input" : values[l->src[0]],
                .in_rank = l->src[0] < 0 ? 4 : ranks[l->src[0]],
                .values = values, .ranks = ranks, .rank = 4};
    ex_writer w = ex_writer_of(g.op);
    if (w.spatial && io.in_rank == 2)
        return ex_unsupported(e, i, "it reads the [N, C] output of an inner product or a "
                              "softmax, and ONNX's op needs [N, C, H, W]");
    st_status st = w.write(e, i, &io);
    values[i] = io.value;
    ranks[i] = io.rank;
    return st;
}

static st_status ex_write(FILE *f, void *ctx, st_error *err)
{
    const Onnx__ModelProto *m = ctx;
    size_t len = onnx__model_proto__get_packed_size(m);
    uint8_t *buf = malloc(len ? len : 1);
    if (!buf)
        return st_fail(err, ST_ENOMEM, "out of memory writing an ONNX model (%zu bytes)", len);
    onnx__model_proto__pack(m, buf);
    st_status st = st_fwrite(f, buf, len, "the ONNX model", err);
    free(buf);
    return st;
}

st_status st_onnx_save(const char *path, const st_net *net, const st_cfg *cfg,
                       const float *weights, st_error *err)
{
    ex e = {.net = net, .cfg = cfg, .weights = weights, .err = err};
    const char **values = calloc((size_t)net->n_layers, sizeof *values);
    int *ranks = calloc((size_t)net->n_layers, sizeof *ranks);
    st_status st = values && ranks ? ST_OK
                                   : st_fail(err, ST_ENOMEM, "out of memory writing %s", path);
    for (int i = 0; i < net->n_layers && st == ST_OK; i++)
        st = ex_layer(&e, i, values, ranks);
    if (st == ST_OK && e.n_nodes > ST_ONNX_MAX_NODES)
        st = st_fail(err, ST_EINPUT, "%s: its %d layers make %zu ONNX nodes: more than the %d "
                     "nodes singletrain reads from a model (its limit), so it writes no such "
                     "model", cfg->path, net->n_layers, e.n_nodes, ST_ONNX_MAX_NODES);
    Onnx__ModelProto m;
    Onnx__GraphProto g;
    Onnx__OperatorSetIdProto opset;
    Onnx__OperatorSetIdProto *opsets[1] = {&opset};
    Onnx__ValueInfoProto vin, vout, *vins[1] = {&vin}, *vouts[1] = {&vout};
    Onnx__TypeProto tin, tout;
    Onnx__TypeProto__Tensor ttin, ttout;
    Onnx__TensorShapeProto sin, sout;
    Onnx__TensorShapeProto__Dimension dims[6], *din[4], *dout[2];
    if (st == ST_OK) {
        onnx__model_proto__init(&m);
        onnx__graph_proto__init(&g);
        onnx__operator_set_id_proto__init(&opset);
        opset.domain = "";
        opset.has_version = 1;
        opset.version = EX_OPSET;
        m.has_ir_version = 1;
        m.ir_version = 7; /* what opset 13 goes with */
        m.producer_name = "singletrain";
        m.n_opset_import = 1;
        m.opset_import = opsets;
        m.graph = &g;
        g.name = "singletrain";
        g.n_node = e.n_nodes;
        g.node = e.nodes;
        g.n_initializer = e.n_inits;
        g.initializer = e.inits;
        int64_t in_dims[4] = {0, net->input.c, net->input.h, net->input.w};
        int64_t out_dims[2] = {0, net->classes};
        for (int k = 0; k < 6; k++) {
            onnx__tensor_shape_proto__dimension__init(&dims[k]);
            int first = k == 0 || k == 4;
            dims[k].value_case = first ? ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM
                                       : ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
            if (first)
                dims[k].dim_param = "N";
            else
                dims[k].dim_value = k < 4 ? in_dims[k] : out_dims[k - 4];
            if (k < 4)
                din[k] = &dims[k];
            else
                dout[k - 4] = &dims[k];
        }
        onnx__tensor_shape_proto__init(&sin);
        onnx__tensor_shape_proto__init(&sout);
        sin.n_dim = 4;
        sin.dim = din;
        sout.n_dim = 2;
        sout.dim = dout;
        onnx__type_proto__tensor__init(&ttin);
        onnx__type_proto__tensor__init(&ttout);
        ttin.has_elem_type = ttout.has_elem_type = 1;
        ttin.elem_type = ttout.elem_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
        ttin.shape = &sin;
        ttout.shape = &sout;
        onnx__type_proto__init(&tin);
        onnx__type_proto__init(&tout);
        tin.value_case = tout.value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
        tin.tensor_type = &ttin;
        tout.tensor_type = &ttout;
        onnx__value_info_proto__init(&vin);
        onnx__value_info_proto__init(&vout);
        vin.name = "input";
        vin.type = &tin;
        vout.name = (char *)values[net->n_layers - 1];
        vout.type = &tout;
        g.n_input = 1;
        g.input = vins;
        g.n_output = 1;
        g.output = vouts;
        if (strcmp(vout.name, "input") == 0)
            st = st_fail(err, ST_EINPUT, "%s: the network computes nothing", cfg->path);
    }
    if (st == ST_OK)
        st = st_write_atomic(path, ex_write, &m, err);
    for (size_t k = 0; k < e.n_allocs; k++)
        free(e.allocs[k]);
    free(e.allocs);
    free(e.nodes);
    free(e.inits);
    free(values);
    free(ranks);
    return st;
}
