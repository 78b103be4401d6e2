/* What onnx.checker refuses, or a model means, that the translation would
 * otherwise read silently (onnx_internal.h): an IR version or opset outside
 * the ranges the reader knows, two initializers of one name, an
 * initializer with its values in two fields, and one initializer the
 * weights of two nodes (tied weights, which the layers would train as two
 * copies); and a warning for what is read but not followed. */
#include "onnx_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>


/* The model's IR version and opset, against the ranges the reader knows
 * (onnx_internal.h). */
static st_status ck_versions(const ox *x, const Onnx__ModelProto *m)
{
    if (!m->has_ir_version || m->ir_version < OX_MIN_IR || m->ir_version > OX_MAX_IR)
        return st_fail(x->err, ST_EINPUT, "%s: ir_version %lld: singletrain reads ONNX IR "
                       "versions %d to %d", x->path,
                       m->has_ir_version ? (long long)m->ir_version : 0LL, OX_MIN_IR,
                       OX_MAX_IR);
    if (x->opset < OX_MIN_OPSET || x->opset > OX_MAX_OPSET)
        return st_fail(x->err, ST_EINPUT, "%s: opset %ld (of the default domain): singletrain "
                       "reads opsets %d to %d, whose ops it knows", x->path, x->opset,
                       OX_MIN_OPSET, OX_MAX_OPSET);
    return ST_OK;
}

/* The fields of t that hold values. */
static int ck_value_fields(const Onnx__TensorProto *t)
{
    return t->has_raw_data + (t->n_float_data > 0) + (t->n_int32_data > 0) +
           (t->n_string_data > 0) + (t->n_int64_data > 0) + (t->n_double_data > 0) +
           (t->n_uint64_data > 0);
}

static int ck_by_name(const void *a, const void *b)
{
    const char *const *s = a, *const *t = b;
    return strcmp(*s, *t);
}

/* Every initializer has a name no other has, and its values in one field. */
static st_status ck_initializers(const ox *x)
{
    const Onnx__GraphProto *g = x->g;
    for (size_t i = 0; i < g->n_initializer; i++) {
        const Onnx__TensorProto *t = g->initializer[i];
        if (!t->name || !t->name[0])
            return st_fail(x->err, ST_EINPUT, "%s: initializer %zu has no name", x->path,
                           i + 1);
        if (ck_value_fields(t) > 1)
            return st_fail(x->err, ST_EINPUT, "%s: initializer '%s' has its values in %d "
                           "fields (raw_data and float_data, ...): expected one", x->path,
                           t->name, ck_value_fields(t));
    }
    if (g->n_initializer < 2)
        return ST_OK;
    const char **names = malloc(g->n_initializer * sizeof *names);
    if (!names)
        return st_fail(x->err, ST_ENOMEM, "out of memory reading %s", x->path);
    for (size_t i = 0; i < g->n_initializer; i++)
        names[i] = g->initializer[i]->name;
    qsort(names, g->n_initializer, sizeof *names, ck_by_name);
    st_status st = ST_OK;
    for (size_t i = 1; i < g->n_initializer && st == ST_OK; i++)
        if (strcmp(names[i - 1], names[i]) == 0)
            st = st_fail(x->err, ST_EINPUT, "%s: two initializers are named '%s': expected "
                         "unique names", x->path, names[i]);
    free(names);
    return st;
}

st_status ox_check_model(const ox *x, const Onnx__ModelProto *m)
{
    st_status st = ck_versions(x, m);
    return st != ST_OK ? st : ck_initializers(x);
}

/* ---- tied weights ---- */

typedef struct ck_use {
    const char *name;
    int node;
} ck_use;

static int ck_use_order(const void *a, const void *b)
{
    const ck_use *u = a, *v = b;
    int c = strcmp(u->name, v->name);
    return c ? c : (u->node > v->node) - (u->node < v->node);
}

/* "node N 'name' (Op)" of node i, into buf. */
static const char *ck_node(const ox *x, int i, char *buf, size_t size)
{
    const Onnx__NodeProto *n = x->g->node[i];
    int named = n->name && n->name[0];
    snprintf(buf, size, "node %d%s%s%s (%s)", i + 1, named ? " '" : "", named ? n->name : "",
             named ? "'" : "", n->op_type ? n->op_type : "no op_type");
    return buf;
}

st_status ox_check_ties(const ox *x)
{
    size_t n = 0;
    for (int i = 0; i < x->n_layers; i++)
        n += (size_t)x->layers[i].n_tensor;
    if (n < 2)
        return ST_OK;
    ck_use *uses = malloc(n * sizeof *uses);
    if (!uses)
        return st_fail(x->err, ST_ENOMEM, "out of memory reading %s", x->path);
    n = 0;
    for (int i = 0; i < x->n_layers; i++)
        for (int k = 0; k < x->layers[i].n_tensor; k++)
            uses[n++] = (ck_use){x->layers[i].tensor[k].name, x->layers[i].tensor[k].node};
    qsort(uses, n, sizeof *uses, ck_use_order);
    st_status st = ST_OK;
    for (size_t i = 1; i < n && st == ST_OK; i++)
        if (strcmp(uses[i - 1].name, uses[i].name) == 0 && uses[i - 1].node != uses[i].node) {
            char a[160], b[160];
            st = st_fail(x->err, ST_EINPUT, "%s: initializer '%s' is read by %s and by %s: "
                         "tied weights are not supported (each node's layer would train a "
                         "copy of its own): give each node its own initializer", x->path,
                         uses[i].name, ck_node(x, uses[i - 1].node, a, sizeof a),
                         ck_node(x, uses[i].node, b, sizeof b));
        }
    free(uses);
    return st;
}
