/* The ONNX reader's values, tensors and attributes of the graph, the
 * layers being made and the node messages (onnx_internal.h). */
#include "onnx_internal.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- messages ---- */

/* "node N 'NAME' (OP)", the name left out when the node has none. */
const char *ox_node_label(const ox *x, int node, char *buf, size_t size)
{
    const Onnx__NodeProto *n = x->g->node[node];
    const char *name = n->name && n->name[0] ? n->name : NULL;
    snprintf(buf, size, "node %d%s%.200s%s (%.100s)", node + 1, name ? " '" : "",
             name ? name : "", name ? "'" : "", n->op_type ? n->op_type : "no op_type");
    return buf;
}

st_status ox_node_fail(const ox *x, int node, const char *fmt, ...)
{
    char what[768], label[320];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return st_fail(x->err, ST_EINPUT, "%s: %s: %s", x->path,
                   ox_node_label(x, node, label, sizeof label), what);
}

/* A tensor's dims as "[d0, d1, ...]". */
const char *ox_dims_text(const Onnx__TensorProto *t, char *buf, size_t size)
{
    size_t used = (size_t)snprintf(buf, size, "[");
    for (size_t i = 0; i < t->n_dims && used < size; i++)
        used += (size_t)snprintf(buf + used, size - used, "%s%lld", i ? ", " : "",
                                 (long long)t->dims[i]);
    if (used < size)
        snprintf(buf + used, size - used, "]");
    return buf;
}

/* ---- values, tensors, attributes ---- */

ox_value *ox_find_value(ox *x, const char *name)
{
    for (int i = x->n_values - 1; i >= 0; i--)
        if (strcmp(x->values[i].name, name) == 0)
            return &x->values[i];
    return NULL;
}

int ox_count_uses(const ox *x, const char *name)
{
    int n = 0;
    for (size_t i = 0; i < x->g->n_node; i++)
        for (size_t k = 0; k < x->g->node[i]->n_input; k++)
            n += x->g->node[i]->input[k] && strcmp(x->g->node[i]->input[k], name) == 0;
    for (size_t i = 0; i < x->g->n_output; i++)
        n += x->g->output[i]->name && strcmp(x->g->output[i]->name, name) == 0;
    return n;
}

static st_status ox_unique_name(const ox *x, int node, const char *name)
{
    char label[320];
    for (int i = 0; i < node; i++) {
        const Onnx__NodeProto *n = x->g->node[i];
        for (size_t k = 0; k < n->n_output; k++)
            if (n->output[k] && strcmp(n->output[k], name) == 0)
                return ox_node_fail(x, node, "duplicate output name '%s': %s has an output of "
                                    "that name already (expected every value named once)",
                                    name, ox_node_label(x, i, label, sizeof label));
    }
    for (size_t i = 0; i < x->g->n_initializer; i++)
        if (x->g->initializer[i]->name && strcmp(x->g->initializer[i]->name, name) == 0)
            return ox_node_fail(x, node, "duplicate output name '%s': an initializer has that "
                                "name (expected every value named once)", name);
    if (x->n_values > 0 && x->values[0].layer < 0 && strcmp(x->values[0].name, name) == 0)
        return ox_node_fail(x, node, "duplicate output name '%s': the graph input has that "
                            "name (expected every value named once)", name);
    return ST_OK;
}

/* The node's outputs are named as no earlier node's, no initializer and
 * not the graph input: each value of a graph is named once (an in-place
 * name, a Relu writing its input's, would make one name two values). */
st_status ox_unique_outputs(const ox *x, int node)
{
    const Onnx__NodeProto *out = x->g->node[node];
    st_status st = ST_OK;
    for (size_t k = 0; k < out->n_output && st == ST_OK; k++)
        if (out->output[k] && out->output[k][0])
            st = ox_unique_name(x, node, out->output[k]);
    return st;
}

st_status ox_add_value(ox *x, int node, const char *name, int layer, int flat)
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

/* The constant tensor name: an initializer, or a Constant node's value or
 * a computed constant before node `before`, or any of them under the name
 * of an Identity node before it (PyTorch's exporter writes one initializer
 * once and the equal ones as Identity nodes of it: a new BatchNorm2d's
 * weight and running variance, both ones). Followed back node by node, not
 * recursively. */
const Onnx__TensorProto *ox_constant(const ox *x, const char *name, int before)
{
    for (;;) {
        for (size_t i = 0; i < x->g->n_initializer; i++)
            if (x->g->initializer[i]->name && strcmp(x->g->initializer[i]->name, name) == 0)
                return x->g->initializer[i];
        for (int i = x->n_derived - 1; i >= 0; i--)
            if (x->derived[i].node < before && strcmp(x->derived[i].t->name, name) == 0)
                return x->derived[i].t;
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

st_status ox_add_derived(ox *x, int node, size_t nd, const int64_t *dims, float *data,
                         size_t count)
{
    const Onnx__NodeProto *n = x->g->node[node];
    if (n->n_output < 1 || !n->output[0] || !n->output[0][0])
        return ox_node_fail(x, node, "no output");
    ox_derived *d = realloc(x->derived, (size_t)(x->n_derived + 1) * sizeof *d);
    if (!d)
        return st_fail(x->err, ST_ENOMEM, "out of memory reading %s", x->path);
    x->derived = d;
    Onnx__TensorProto *t = malloc(sizeof *t);
    int64_t *td = malloc((nd ? nd : 1) * sizeof *td);
    if (!t || !td) {
        free(t);
        free(td);
        return st_fail(x->err, ST_ENOMEM, "out of memory reading %s", x->path);
    }
    onnx__tensor_proto__init(t);
    if (nd)
        memcpy(td, dims, nd * sizeof *td);
    t->name = n->output[0];
    t->n_dims = nd;
    t->dims = td;
    t->has_data_type = 1;
    t->data_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
    t->n_float_data = count;
    t->float_data = data;
    d[x->n_derived++] = (ox_derived){node, t};
    return ST_OK;
}

void ox_free_derived(ox *x)
{
    for (int i = 0; i < x->n_derived; i++) {
        free(x->derived[i].t->dims);
        free(x->derived[i].t);
    }
    free(x->derived);
    x->derived = NULL;
    x->n_derived = 0;
}

const char *ox_input(const Onnx__NodeProto *n, size_t k)
{
    return k < n->n_input && n->input[k] && n->input[k][0] ? n->input[k] : NULL;
}

/* The values of a constant tensor's dims: *count, at most 2^31. */
st_status ox_tensor_count(const ox *x, int node, const char *name,
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
float *ox_new_floats(ox *x, size_t n)
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
st_status ox_floats(ox *x, int node, size_t k, const Onnx__TensorProto **tp,
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
    if (c) /* an empty tensor's data may be NULL */
        memcpy(f, t->has_raw_data ? (const void *)t->raw_data.data
                                  : (const void *)t->float_data,
               c * sizeof *f); /* raw_data is little-endian, as every host this runs on */
    for (size_t i = 0; i < c; i++)
        if (!isfinite(f[i]))
            return ox_node_fail(x, node, "initializer '%s' holds %g at [%zu]: expected finite "
                                "values", name, f[i], i);
    *tp = t;
    *data = f;
    *count = c;
    return ST_OK;
}

/* A constant int64 tensor's values (Reshape's shape), at most max. */
st_status ox_ints(const ox *x, int node, size_t k, int64_t *out, size_t max, size_t *count)
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

const Onnx__AttributeProto *ox_attr(const Onnx__NodeProto *n, const char *name)
{
    for (size_t i = 0; i < n->n_attribute; i++)
        if (n->attribute[i]->name && strcmp(n->attribute[i]->name, name) == 0)
            return n->attribute[i];
    return NULL;
}

/* Every attribute of the node is one of known (comma-separated). */
st_status ox_known_attrs(const ox *x, int node, const char *known)
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

st_status ox_int_attr(const ox *x, int node, const char *name, long def, long lo,
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

st_status ox_float_attr(const ox *x, int node, const char *name, float def, float *out)
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
st_status ox_ints_attr(const ox *x, int node, const char *name, size_t n, long *out,
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

st_status ox_string_attr(const ox *x, int node, const char *name, const char *only)
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

void ox_opt(ox_layer *l, const char *key, const char *fmt, ...)
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

void ox_tensor_add(ox_layer *l, const char *role, int node, const char *name,
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

ox_tensor *ox_tensor_find(ox_layer *l, const char *role)
{
    for (int i = 0; i < l->n_tensor; i++)
        if (strcmp(l->tensor[i].role, role) == 0)
            return &l->tensor[i];
    return NULL;
}

void ox_tensor_drop(ox_layer *l, const char *role)
{
    ox_tensor *t = ox_tensor_find(l, role);
    if (t)
        *t = l->tensor[--l->n_tensor];
}

/* A new layer at the end; *out its index. */
st_status ox_new_layer(ox *x, int node, const char *type, ox_kind kind, int *out)
{
    if (x->n_layers >= ST_ONNX_MAX_NODES * 2)
        return ox_node_fail(x, node, "more than %d layers", ST_ONNX_MAX_NODES * 2);
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
st_status ox_read(ox *x, int node, size_t k, ox_value **v)
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
st_status ox_take(ox *x, int node, const ox_value *v)
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
ox_layer *ox_foldable(ox *x, const ox_value *v, int kinds)
{
    if (v->layer < 0)
        return NULL;
    ox_layer *l = &x->layers[v->layer];
    if (!(kinds & (1 << l->kind)) || l->uses != 1 || l->act != ST_ACT_LINEAR)
        return NULL;
    return l;
}

/* One output value for the node: output 0, made by layer. */
st_status ox_output(ox *x, int node, int layer, int flat)
{
    const Onnx__NodeProto *n = x->g->node[node];
    if (n->n_output < 1)
        return ox_node_fail(x, node, "no output");
    return ox_add_value(x, node, n->output[0], layer, flat);
}
