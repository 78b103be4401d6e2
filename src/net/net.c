/* Networks: layers built from cfg sections (or an ONNX model), printed,
 * hashed, and split for hybrid parallelism; replicas are replica.c's. */
#include "net/net.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/hash.h"

/* Largest values per sample of one layer output; keeps every index of the
 * kernels inside int range with room for the batch dimension elsewhere. */
#define MAX_LAYER_VALUES (1L << 28)

static st_status net_add_layer(st_net *net, st_layer *l, st_error *err)
{
    st_layer **layers = realloc(net->layers, (size_t)(net->n_layers + 1) * sizeof *layers);
    if (!layers)
        return st_fail(err, ST_ENOMEM, "out of memory building the network");
    net->layers = layers;
    layers[net->n_layers++] = l;
    return ST_OK;
}

static st_status net_build_section(st_net *net, st_cfg *cfg, st_cfg_section *sec,
                                   const st_log *log, st_error *err)
{
    if (strcmp(sec->type, "net") == 0 || strcmp(sec->type, "network") == 0)
        return st_fail(err, ST_EINPUT, "%s:%d: [%s] may only be the first section", cfg->path,
                       sec->line, sec->type);
    const st_layer_ops *ops = st_layer_find(sec->type);
    if (!ops) {
        char types[256];
        st_layer_type_list(types, sizeof types);
        return st_fail(err, ST_EINPUT, "%s:%d: unknown section [%s] (expected one of %s)",
                       cfg->path, sec->line, sec->type, types);
    }
    st_build b = {
        .cfg = cfg, .sec = sec, .log = log, .index = net->n_layers,
        .in = net->n_layers ? net->layers[net->n_layers - 1]->out : net->input,
        .layers = net->layers, .params = &net->params,
    };
    st_layer *l = st_calloc(1, ops->size, "layer", err);
    if (!l)
        return ST_ENOMEM;
    *l = (st_layer){.ops = ops, .index = b.index, .line = sec->line, .in = b.in, .out = b.in,
                    .n_src = 1, .src = {b.index - 1}};
    st_status st = ops->build(&b, l, err);
    if (net_add_layer(net, l, err) != ST_OK) { /* added even when its build failed */
        free(l);
        return ST_ENOMEM;
    }
    if (st != ST_OK)
        return st;
    st = st_cfg_finish_section(cfg, sec, ops->type, ops->ignored_keys, log, err);
    if (st != ST_OK)
        return st;
    long values = (long)l->out.c * l->out.h * l->out.w;
    if (l->out.c < 1 || l->out.h < 1 || l->out.w < 1 || values > MAX_LAYER_VALUES)
        return st_layer_bad_shape(&b, err, "output %d x %d x %d is empty or larger than %ld "
                                  "values per sample", l->out.w, l->out.h, l->out.c,
                                  MAX_LAYER_VALUES);
    net->flops += l->flops;
    return ST_OK;
}

st_status st_net_build(st_net *net, st_cfg *cfg, st_shape input, const st_log *log,
                       st_error *err)
{
    memset(net, 0, sizeof *net);
    net->input = input;
    st_status st = ST_OK;
    for (int i = 1; i < cfg->n_secs && st == ST_OK; i++)
        st = net_build_section(net, cfg, &cfg->secs[i], log, err);
    if (st == ST_OK && net->n_layers == 0)
        st = st_fail(err, ST_EINPUT, "%s: no layers after [%s]: expected at least one layer "
                     "section", cfg->path, cfg->secs[0].type);
    if (st != ST_OK) {
        st_net_free(net);
        return st;
    }
    int out = net->n_layers - 1;
    while (out > 0 && net->layers[out]->ops == &st_cost_ops)
        out--;
    net->output_layer = out;
    net->classes = (int)st_shape_count(net->layers[out]->out);
    for (int i = 0; i < net->n_layers; i++) {
        const st_layer *l = net->layers[i];
        if (l->is_loss && st_shape_count(l->out) != (size_t)net->classes) {
            st_fail(err, ST_EINPUT, "%s:%d: [%s] has %zu outputs but the network has %d "
                    "classes: a loss layer must see the class scores", cfg->path, l->line,
                    l->ops->type, st_shape_count(l->out), net->classes);
            st_net_free(net);
            return ST_EINPUT;
        }
    }
    return ST_OK;
}

void st_net_free(st_net *net)
{
    for (int i = 0; i < net->n_layers; i++)
        free(net->layers[i]);
    free(net->layers);
    st_params_free(&net->params);
    memset(net, 0, sizeof *net);
}

void st_net_print(const st_net *net, const st_log *log)
{
    st_info(log, "layer     filters    size              input                output");
    for (int i = 0; i < net->n_layers; i++) {
        char line[256];
        net->layers[i]->ops->describe(net->layers[i], line, sizeof line);
        st_info(log, "%5d %s", i, line);
    }
    st_info(log, "%zu parameters, %.3f GFLOP forward per image", st_params_learned(&net->params),
             net->flops / 1e9);
}

st_pass_work st_net_pass_work(const st_net *net, int i, int n)
{
    const st_layer *l = net->layers[i];
    double in = 0.0, weights = 0.0;
    for (int k = 0; k < l->n_src; k++)
        in += (double)st_shape_count(l->src[k] < 0 ? net->input : net->layers[l->src[k]]->out);
    for (int p = 0; p < net->params.n; p++)
        if (net->params.p[p].layer == i)
            weights += (double)net->params.p[p].count;
    double f = (double)sizeof(float), x = f * n * in, y = f * n * (double)st_shape_count(l->out);
    double w = f * weights, flops = n * l->flops;
    st_pass_work work = {{flops, flops, flops},
                         {x + y + w, y + x + (w > 0 ? w : x), x + y + w}};
    return work;
}

uint64_t st_net_hash(const st_net *net)
{
    uint64_t h = ST_HASH_START;
    h = st_hash_bytes(h, &net->input, sizeof net->input);
    for (int i = 0; i < net->n_layers; i++) {
        const st_layer *l = net->layers[i];
        h = st_hash_bytes(h, l->ops->type, strlen(l->ops->type));
        h = st_hash_bytes(h, &l->out, sizeof l->out);
        h = st_hash_bytes(h, &l->n_src, sizeof l->n_src);
        h = st_hash_bytes(h, l->src, sizeof l->src[0] * (size_t)l->n_src);
    }
    for (int i = 0; i < net->params.n; i++) {
        const st_param *p = &net->params.p[i];
        h = st_hash_bytes(h, p->name, strlen(p->name));
        h = st_hash_bytes(h, &p->count, sizeof p->count);
        h = st_hash_bytes(h, &p->kind, sizeof p->kind);
    }
    return h;
}

int st_net_arena_finite(const st_net *net, const float *arena, char *buf, size_t size)
{
    size_t at;
    const st_param *p = st_params_nonfinite(&net->params, arena, &at);
    if (!p)
        return 1;
    const st_layer *l = net->layers[p->layer];
    snprintf(buf, size, "layer %d [%s] (cfg line %d): %s[%zu] is %g", p->layer, l->ops->type,
             l->line, p->name, at, (double)arena[p->offset + at]);
    return 0;
}

const char *st_net_layer_label(const st_net *net, int i, char *buf, size_t size)
{
    const st_layer *l = net->layers[i];
    snprintf(buf, size, "layer %d [%s] (line %d)", i, l->ops->type, l->line);
    return buf;
}

void st_net_hybrid_split(const st_net *net, int *first_layer, size_t *shared_from)
{
    const st_param_table *t = &net->params;
    int first = 0;
    for (int k = 0; k < t->n; k++)
        if (!st_layer_model_parallel(net->layers[t->p[k].layer]) && t->p[k].layer + 1 > first)
            first = t->p[k].layer + 1;
    size_t from = t->count, data_end = 0;
    for (int k = 0; k < t->n; k++) {
        const st_param *p = &t->p[k];
        if (p->layer >= first && p->offset < from)
            from = p->offset;
        if (p->layer < first && p->offset + p->count > data_end)
            data_end = p->offset + p->count;
    }
    if (from == t->count || data_end > from) { /* none, or not a tail of the arena */
        *first_layer = net->n_layers;
        *shared_from = t->count;
        return;
    }
    *first_layer = first;
    *shared_from = from;
}

int st_net_mp_ranges(const st_net *net, int r, int size, size_t (*ranges)[2], int max)
{
    int first, n = 0;
    size_t shared_from;
    st_net_hybrid_split(net, &first, &shared_from);
    for (int i = first; i < net->n_layers; i++) {
        const st_layer *l = net->layers[i];
        size_t mine[4][2];
        int k = st_layer_model_parallel(l) && l->ops->mp_block ? l->ops->mp_block(l, r, size, mine)
                                                           : 0;
        for (int q = 0; q < k && n < max; q++) {
            ranges[n][0] = mine[q][0];
            ranges[n++][1] = mine[q][1];
        }
    }
    return n;
}

int st_net_mp_layers(const st_net *net, size_t *in, size_t *out)
{
    int first, n = 0;
    size_t shared_from;
    st_net_hybrid_split(net, &first, &shared_from);
    for (int i = first; i < net->n_layers; i++)
        if (st_layer_model_parallel(net->layers[i])) {
            in[n] = st_shape_count(net->layers[i]->in);
            out[n++] = st_shape_count(net->layers[i]->out);
        }
    return n;
}
