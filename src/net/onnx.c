/* ONNX models as networks: the graph's nodes translated into cfg sections
 * (the table in include/net/onnx.h; each op's reader in onnx_ops.c, the
 * values and attributes they read in onnx_values.c), the [net] section
 * from the sidecar, the network built from them and the initializers
 * copied into its starting weights. Every check that needs a layer's shape
 * runs after the build, against the built layers. */
#include "net/onnx.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <onnx.pb-c.h>

#include "onnx_internal.h"

#include "base/fileio.h"
#include "base/strlist.h"

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
    if (s && (!t->tensor_type->has_elem_type ||
              t->tensor_type->elem_type != ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT)) {
        const ProtobufCEnumValue *e = protobuf_c_enum_descriptor_get_value(
            &onnx__tensor_proto__data_type__descriptor, t->tensor_type->elem_type);
        return st_fail(x->err, ST_EINPUT, "%s: graph input '%s' has element type %d (%s): "
                       "expected float (1)", x->path, vi->name, t->tensor_type->elem_type,
                       e ? e->name : "unknown");
    }
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

/* A layer's message from the build cites its section's line ("PATH:3: "),
 * the node's number (ox_sections): said as the node instead, a binary
 * file having no lines. */
static void ox_locate_build_error(const ox *x, const char *cfg_path, st_error *err)
{
    size_t len = strlen(cfg_path);
    const char *p = err->msg + len;
    if (strncmp(err->msg, cfg_path, len) != 0 || p[0] != ':' || !isdigit((unsigned char)p[1]))
        return;
    char *end;
    long line = strtol(p + 1, &end, 10);
    if (strncmp(end, ": ", 2) != 0 || line < 1 || line > (long)x->g->n_node)
        return;
    char msg[sizeof err->msg], label[320];
    snprintf(msg, sizeof msg, "%s: %s%s", x->path,
             ox_node_label(x, (int)line - 1, label, sizeof label), end);
    memcpy(err->msg, msg, sizeof msg);
}

/* The message of a failed read with every byte of the file's names (a
 * node's, a value's) that a terminal would act on escaped. */
static void ox_printable_error(st_error *err)
{
    char msg[sizeof err->msg];
    st_str_printable(msg, sizeof msg, err->msg);
    memcpy(err->msg, msg, sizeof msg);
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
    st_status st = ox_check_model(x, m);
    if (st != ST_OK)
        return st;
    if (x->g->n_node > ST_ONNX_MAX_NODES)
        return st_fail(x->err, ST_EINPUT, "%s: %zu nodes: singletrain reads at most %d (its "
                       "limit on a model's nodes)", x->path, x->g->n_node, ST_ONNX_MAX_NODES);
    for (size_t i = 0; i < x->g->n_node; i++)
        for (size_t k = 0; k < x->g->node[i]->n_input; k++)
            if (!x->g->node[i]->input[k])
                return st_fail(x->err, ST_EINPUT, "%s: node %zu has a null input", x->path,
                               i + 1);
    st = ox_graph_input(x, in);
    for (size_t i = 0; i < x->g->n_node && st == ST_OK; i++)
        st = ox_node(x, (int)i);
    if (st == ST_OK)
        st = ox_check_ties(x);
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
    ox x = {.path = path, .err = err, .log = log};
    char *bytes = NULL;
    size_t len = 0;
    Onnx__ModelProto *m = NULL;
    st_shape in;
    st_status st = st_read_text(path, "ONNX model", OX_MAX_BYTES, &bytes, &len, err);
    if (st != ST_OK || (st = ox_wire_check(path, (const uint8_t *)bytes, len, err)))
        goto done;
    m = onnx__model_proto__unpack(NULL, len, (const uint8_t *)bytes);
    if (!m) {
        st = st_fail(err, ST_EINPUT, "%s: not an ONNX model (the protobuf does not decode as "
                     "a ModelProto: truncated or another format)", path);
        goto done;
    }
    if ((st = ox_translate(&x, m, &in)) ||
        (st = ox_net_section(path, hparams_path, in, cfg, hp, log, err)) ||
        (st = ox_sections(&x, cfg, err)))
        goto done;
    if ((st = st_net_build(net, cfg, hp->input, log, err))) {
        ox_locate_build_error(&x, cfg->path, err);
        goto done;
    }
    if ((st = ox_check_shapes(&x, net)) || (st = ox_start_weights(&x, net)))
        goto done;
done:
    if (st != ST_OK) {
        ox_printable_error(err);
        st_net_free(net);
        st_cfg_free(cfg);
    }
    for (int i = 0; i < x.n_bufs; i++)
        free(x.bufs[i]);
    free(x.bufs);
    ox_free_derived(&x);
    free(x.values);
    free(x.layers);
    free(x.checks);
    if (m)
        onnx__model_proto__free_unpacked(m, NULL);
    free(bytes);
    return st;
}

st_status st_onnx_load_weights(const char *path, const st_net *net, float *weights,
                               st_error *err)
{
    st_log log = st_log_default(ST_LOG_QUIET);
    st_cfg cfg;
    st_hparams hp;
    st_net model;
    st_status st = st_onnx_load(path, NULL, &cfg, &hp, &model, &log, err);
    if (st != ST_OK)
        return st;
    const st_param_table *a = &model.params, *b = &net->params;
    for (int i = 0; i < a->n || i < b->n; i++) {
        const st_param *p = i < a->n ? &a->p[i] : NULL, *q = i < b->n ? &b->p[i] : NULL;
        if (p && q && strcmp(p->name, q->name) == 0 && p->count == q->count) {
            memcpy(weights + q->offset, a->start + p->offset, q->count * sizeof *weights);
            continue;
        }
        st = st_fail(err, ST_EINPUT, "%s: its initializers make parameter %d %s%s%s of %zu "
                     "values, but the network's is %s%s%s of %zu (weights of another "
                     "network?)", path, i, p ? "'" : "", p ? p->name : "none", p ? "'" : "",
                     p ? p->count : 0, q ? "'" : "", q ? q->name : "none", q ? "'" : "",
                     q ? q->count : 0);
        break;
    }
    st_net_free(&model);
    st_cfg_free(&cfg);
    return st;
}
