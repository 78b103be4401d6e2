/* Networks and replicas: building layers from cfg sections, Darknet's layer
 * table, and running a worker's forward and backward passes. */
#include "net/net.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/clock.h"
#include "base/hash.h"
#include "net/onnx.h"

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

st_status st_net_load(const char *path, const char *hparams, st_cfg *cfg, st_hparams *hp,
                      st_net *net, const st_log *log, st_error *err)
{
    memset(net, 0, sizeof *net);
    if (st_onnx_is_model(path))
        return st_onnx_load(path, hparams, cfg, hp, net, log, err);
    memset(cfg, 0, sizeof *cfg);
    if (hparams)
        return st_fail(err, ST_EUSAGE, "--hparams %s: only an ONNX model takes its training "
                       "settings from another file (%s has its own [net] section)", hparams,
                       path);
    st_status st = st_cfg_load(cfg, path, err);
    if (st != ST_OK)
        return st;
    st = st_hparams_parse(cfg, hp, log, err);
    if (st == ST_OK)
        st = st_net_build(net, cfg, hp->input, log, err);
    if (st != ST_OK)
        st_cfg_free(cfg);
    return st;
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

static int layer_model_parallel(const st_layer *l)
{
    return l->ops->model_parallel && l->ops->model_parallel(l);
}

void st_net_hybrid_split(const st_net *net, int *first_layer, size_t *shared_from)
{
    const st_param_table *t = &net->params;
    int first = 0;
    for (int k = 0; k < t->n; k++)
        if (!layer_model_parallel(net->layers[t->p[k].layer]) && t->p[k].layer + 1 > first)
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
        int k = layer_model_parallel(l) && l->ops->mp_block ? l->ops->mp_block(l, r, size, mine)
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
        if (layer_model_parallel(net->layers[i])) {
            in[n] = st_shape_count(net->layers[i]->in);
            out[n++] = st_shape_count(net->layers[i]->out);
        }
    return n;
}

/* ---- replicas ---- */

void st_replica_free(st_replica *r)
{
    if (r->state)
        for (int i = 0; i < r->net->n_layers; i++)
            if (r->net->layers[i]->ops->release)
                r->net->layers[i]->ops->release(r->state[i]);
    if (r->bctx)
        r->backend->ctx_destroy(r->bctx);
    st_arena_free(&r->arena);
    free(r->state);
    free(r->out_off);
    free(r->delta_off);
    free(r->accumulate);
    free(r->consumed);
    free(r->out_layout);
    free(r->out_bytes);
    free(r->time);
    free(r->mp);
    memset(r, 0, sizeof *r);
}

/* Backward runs from the last layer down; the first consumer of an output to
 * run backward overwrites its gradient, later ones add to it. */
static void replica_plan_accumulation(st_replica *r)
{
    int nl = r->net->n_layers;
    unsigned char seen_input = 0;
    memset(r->consumed, 0, (size_t)nl);
    for (int i = nl - 1; i >= 0; i--) {
        const st_layer *l = r->net->layers[i];
        for (int k = 0; k < l->n_src; k++) {
            int p = l->src[k];
            unsigned char *seen = p < 0 ? &seen_input : &r->consumed[p];
            r->accumulate[i * ST_MAX_SRC + k] = *seen;
            *seen = 1;
        }
    }
}

/* Whether each layer's output must be plain, into plain [n_layers]: a
 * consumer computes in plain C or runs model-parallel (mp, or NULL), or
 * keeps its input's layout and must itself be plain, or shares its
 * inputs' layout and must itself be plain, was asked for plain inputs
 * (plain_in [n_layers]) or has a backend that cannot compare layouts, or
 * it is the last layer or the class scores (read by the trainer), or it
 * runs model-parallel. One pass from the last layer down: a layer's
 * consumers come after it, so they are settled when it is reached. */
static void plan_plain_outputs(const st_net *net, const st_backend *backend,
                               const unsigned char *mp, const unsigned char *plain_in,
                               unsigned char *plain)
{
    int nl = net->n_layers;
    memset(plain, 0, (size_t)nl);
    for (int j = nl - 1; j >= 0; j--) {
        const st_layer *l = net->layers[j];
        int mp_j = mp && mp[j];
        if (j == nl - 1 || j == net->output_layer || mp_j)
            plain[j] = 1;
        int shares = l->ops->shares_layout && !plain_in[j] && backend->layouts_equal;
        int follows = l->ops->keeps_layout || shares;
        for (int k = 0; k < l->n_src; k++)
            if (l->src[k] >= 0 && (((l->ops->plain_input || l->ops->shares_layout) && !shares) ||
                                   mp_j || (follows && plain[j])))
                plain[l->src[k]] = 1;
    }
}

static st_status replica_setup_layer(st_replica *r, int i, const st_replica_opts *o,
                                     const int *batch_sizes, int n_batch_sizes, int dst_plain,
                                     int *plain_inputs, st_error *err)
{
    const st_net *net = r->net;
    const st_layer *l = net->layers[i];
    const void *in_layout[ST_MAX_SRC];
    size_t in_bytes[ST_MAX_SRC];
    for (int k = 0; k < l->n_src; k++) {
        int from = l->src[k];
        in_layout[k] = from < 0 ? NULL : r->out_layout[from];
        in_bytes[k] = from < 0 ? (size_t)r->n * st_shape_count(net->input) * sizeof(float)
                               : r->out_bytes[from];
    }
    st_setup s = {
        .backend = r->backend, .bctx = r->bctx, .n = r->n, .batch_sizes = batch_sizes,
        .n_batch_sizes = n_batch_sizes, .training = r->training,
        .src_grad = r->training && l->n_src > 0 && (l->src[0] >= 0 || r->input_delta),
        .arena = &r->arena,
        .in_layout = in_layout, .in_bytes = in_bytes,
        .dst_plain = dst_plain,
        .mp = r->mp && r->mp[i] ? o->mp : NULL,
        .mp_batch_sizes = o->mp_batch_sizes, .n_mp_batch_sizes = o->n_mp_batch_sizes,
        .out_layout = NULL,
        .out_bytes = (size_t)r->n * st_shape_count(l->out) * sizeof(float),
    };
    st_status st = l->ops->setup ? l->ops->setup(l, &s, &r->state[i], err) : ST_OK;
    *plain_inputs = s.plain_inputs;
    if (st == ST_OK && s.dst_plain && s.out_layout)
        st = st_fail(err, ST_EINTERNAL, "the backend did not give the plain output asked for");
    if (st != ST_OK)
        return st;
    r->out_layout[i] = s.out_layout;
    r->out_bytes[i] = s.out_bytes;
    char name[48];
    snprintf(name, sizeof name, "%d.%s.out", i, st_layer_short_name(l));
    return st_arena_reserve(&r->arena, name, s.out_bytes, &r->out_off[i], err);
}

/* The gradients at the layers' outputs share memory where their lifetimes
 * allow. Backward runs layer n-1 down to 0; the gradient at layer p's output
 * is live from the step of its last consumer (or the start, without one)
 * down to step p, when p reads it. Two gradients may share a slot when one
 * is last read at a step before the other is first written. Slots are
 * handed out greedily, the earliest-written gradient first. */
static st_status replica_plan_deltas(st_replica *r, st_error *err)
{
    int nl = r->net->n_layers;
    int *first_step = st_calloc((size_t)nl, sizeof *first_step, "delta plan", err);
    int *slot_of = st_calloc((size_t)nl, sizeof *slot_of, "delta plan", err);
    size_t *slot_bytes = st_calloc((size_t)nl, sizeof *slot_bytes, "delta plan", err);
    int *slot_free_after = st_calloc((size_t)nl, sizeof *slot_free_after, "delta plan", err);
    int *first_at = st_calloc((size_t)nl + 1, sizeof *first_at, "delta plan", err);
    int *next = st_calloc((size_t)nl, sizeof *next, "delta plan", err);
    st_status st = first_step && slot_of && slot_bytes && slot_free_after && first_at && next
                       ? ST_OK : ST_ENOMEM;
    int n_slots = 0;
    /* the step of p's last consumer, nl without one (live from the start) */
    for (int p = 0; p < nl && st == ST_OK; p++)
        first_step[p] = nl;
    for (int c = 0; c < nl && st == ST_OK; c++)
        for (int k = 0; k < r->net->layers[c]->n_src; k++) {
            int p = r->net->layers[c]->src[k];
            if (p >= 0 && (first_step[p] == nl || first_step[p] < c))
                first_step[p] = c;
        }
    /* the gradients first written at each step, the highest layer first:
     * lists through next[] from first_at[step] (-1 ends them) */
    for (int step = 0; step <= nl && st == ST_OK; step++)
        first_at[step] = -1;
    for (int p = 0; p < nl && st == ST_OK; p++) {
        next[p] = first_at[first_step[p]];
        first_at[first_step[p]] = p;
    }
    for (int step = nl; step >= 0 && st == ST_OK; step--)
        for (int p = first_at[step]; p >= 0; p = next[p]) {
            /* a free slot: its gradient was last read at a step after this one */
            int pick = -1;
            for (int k = 0; k < n_slots; k++) {
                if (slot_free_after[k] <= step)
                    continue;
                if (pick < 0 || (slot_bytes[pick] < r->out_bytes[p] &&
                                 slot_bytes[k] > slot_bytes[pick]))
                    pick = k;
            }
            if (pick < 0)
                pick = n_slots++;
            if (slot_bytes[pick] < r->out_bytes[p])
                slot_bytes[pick] = r->out_bytes[p];
            slot_free_after[pick] = p;
            slot_of[p] = pick;
        }
    size_t *slot_off = st_calloc((size_t)nl, sizeof *slot_off, "delta plan", err);
    if (!slot_off)
        st = ST_ENOMEM;
    for (int k = 0; k < n_slots && st == ST_OK; k++) {
        char name[48];
        snprintf(name, sizeof name, "delta.slot%d", k);
        st = st_arena_reserve(&r->arena, name, slot_bytes[k], &slot_off[k], err);
    }
    for (int p = 0; p < nl && st == ST_OK; p++)
        r->delta_off[p] = slot_off[slot_of[p]];
    free(slot_off);
    free(first_at);
    free(next);
    free(first_step);
    free(slot_of);
    free(slot_bytes);
    free(slot_free_after);
    return st;
}

/* Everything of st_replica_init but the arena's memory: the kernels and
 * the arena's plan, the layers of plain_in [n_layers] given plain inputs.
 * A layer that asks for plain inputs ends it early: *asked is its index
 * (else -1), and r is to be freed. On failure r is freed. */
static st_status replica_build_once(st_replica *r, const st_net *net, const st_backend *backend,
                                    const st_replica_opts *o, const unsigned char *plain_in,
                                    int *asked, st_error *err)
{
    *asked = -1;
    memset(r, 0, sizeof *r);
    r->net = net;
    r->backend = backend;
    r->n = o->n;
    r->training = o->training;
    r->input_delta = o->input_delta;
    r->takes_bf16 = o->backend.weights_bf16 && o->backend.precision == ST_PRECISION_BF16;
    int nl = net->n_layers;
    r->state = st_calloc((size_t)nl, sizeof *r->state, "replica state", err);
    r->out_off = st_calloc((size_t)nl, sizeof *r->out_off, "replica views", err);
    r->delta_off = st_calloc((size_t)nl, sizeof *r->delta_off, "replica views", err);
    r->accumulate = st_calloc((size_t)nl * ST_MAX_SRC, sizeof *r->accumulate, "replica", err);
    r->consumed = st_calloc((size_t)nl, 1, "replica", err);
    r->out_layout = st_calloc((size_t)nl, sizeof *r->out_layout, "replica layouts", err);
    r->out_bytes = st_calloc((size_t)nl, sizeof *r->out_bytes, "replica layouts", err);
    if (o->timing)
        r->time = st_calloc((size_t)nl, sizeof *r->time, "layer times", err);
    int want_mp = o->mp && o->training;
    if (want_mp)
        r->mp = st_calloc((size_t)nl, 1, "replica", err);
    st_status st = (r->state && r->out_off && r->delta_off && r->accumulate && r->consumed &&
                    r->out_layout && r->out_bytes && (r->time || !o->timing) &&
                    (r->mp || !want_mp))
                       ? ST_OK : ST_ENOMEM;
    if (st == ST_OK && want_mp) {
        int first;
        size_t shared_from;
        st_net_hybrid_split(net, &first, &shared_from);
        for (int i = first; i < nl; i++)
            r->mp[i] = (unsigned char)layer_model_parallel(net->layers[i]);
    }
    if (st == ST_OK)
        st = backend->ctx_create(&o->backend, &r->bctx, err);
    const int *sizes = o->batch_sizes ? o->batch_sizes : &r->n;
    int n_sizes = o->batch_sizes ? o->n_batch_sizes : 1;
    unsigned char *plain = NULL;
    if (st == ST_OK) {
        plain = st_calloc((size_t)nl, 1, "replica layouts", err);
        st = plain ? ST_OK : ST_ENOMEM;
    }
    if (st == ST_OK)
        plan_plain_outputs(net, backend, r->mp, plain_in, plain);
    for (int i = 0; i < nl && st == ST_OK && *asked < 0; i++) {
        int wants_plain = 0;
        st = replica_setup_layer(r, i, o, sizes, n_sizes, plain[i], &wants_plain, err);
        if (st != ST_OK)
            st_error_prefix(err, "layer %d [%s]: ", i, net->layers[i]->ops->type);
        else if (wants_plain)
            *asked = i;
    }
    free(plain);
    if (*asked >= 0)
        return st;
    if (st == ST_OK && r->training)
        st = replica_plan_deltas(r, err);
    if (st == ST_OK && r->input_delta)
        st = st_arena_reserve(&r->arena, "input.delta",
                              (size_t)r->n * st_shape_count(net->input) * sizeof(float),
                              &r->input_delta_off, err);
    if (st != ST_OK)
        st_replica_free(r);
    return st;
}

/* replica_build_once until no layer asks for plain inputs: each asking
 * layer's inputs made plain in turn (at most once each). */
static st_status replica_build(st_replica *r, const st_net *net, const st_backend *backend,
                               const st_replica_opts *o, st_error *err)
{
    unsigned char *plain_in = st_calloc((size_t)net->n_layers, 1, "replica layouts", err);
    if (!plain_in)
        return ST_ENOMEM;
    int asked;
    st_status st;
    while ((st = replica_build_once(r, net, backend, o, plain_in, &asked, err)) == ST_OK &&
           asked >= 0) {
        st_replica_free(r);
        if (plain_in[asked]) {
            st = st_fail(err, ST_EINTERNAL, "layer %d asked for plain inputs twice", asked);
            break;
        }
        plain_in[asked] = 1;
    }
    free(plain_in);
    return st;
}

st_status st_replica_init(st_replica *r, const st_net *net, const st_backend *backend,
                          const st_replica_opts *o, st_error *err)
{
    st_status st = replica_build(r, net, backend, o, err);
    if (st == ST_OK)
        st = st_arena_alloc(&r->arena, "worker activations", err);
    if (st != ST_OK) {
        st_replica_free(r);
        return st;
    }
    replica_plan_accumulation(r);
    return ST_OK;
}

st_status st_replica_plan(st_replica *r, const st_net *net, const st_backend *backend,
                          const st_replica_opts *o, size_t *arena_bytes, st_error *err)
{
    st_status st = replica_build(r, net, backend, o, err);
    *arena_bytes = st == ST_OK ? st_arena_total(&r->arena) : 0;
    return st;
}

float *st_replica_output(const st_replica *r, int layer)
{
    return st_arena_at(&r->arena, r->out_off[layer]);
}

float *st_replica_input_delta(const st_replica *r)
{
    return r->input_delta ? st_arena_at(&r->arena, r->input_delta_off) : NULL;
}

/* Tell the backend of layer i's work in plain C in a training pass. */
static void replica_host_work(const st_replica *r, int i, int pass, int n, int training)
{
    const st_layer *l = r->net->layers[i];
    if (training && l->ops->host_bytes > 0 && r->backend->host_work)
        r->backend->host_work(r->bctx, i, st_layer_short_name(l), pass,
                              l->ops->host_bytes * n * (double)st_shape_count(l->out));
}

/* --trace: layer i's pass (0 forward, 1 backward: data and weights) of n
 * samples in iteration it, from t0 to t1. */
static void replica_trace_layer(const st_replica *r, st_trace_track *tr, int i, int pass, int n,
                                long it, double t0, double t1)
{
    const st_layer *l = r->net->layers[i];
    st_pass_work w = st_net_pass_work(r->net, i, n);
    st_trace_event e = {.name = pass ? "backward" : "forward", .index = i,
                        .detail = st_layer_short_name(l), .cat = "layer", .iteration = it,
                        .text_key = "type", .text = l->ops->type,
                        .key = {"line", "samples", "bytes", "flops"},
                        .value = {l->line, n, pass ? w.bytes[1] + w.bytes[2] : w.bytes[0],
                                  pass ? w.flops[1] + w.flops[2] : w.flops[0]},
                        .t0 = t0, .t1 = t1};
    st_trace_add(tr, &e);
}

/* Layer i's pass (0 forward, 1 backward) on p, between st_now()'s t[0] and
 * t[1] when timed. Returns 1 when it is the replica's first failure (*st
 * ST_OK until then): *st its status, err its message prefixed with the
 * layer, p->n 0 (no samples left: only the model-parallel layers' meetings
 * go on); a later failure's message is dropped. */
static int replica_layer_pass(const st_replica *r, int i, int pass, int timed, st_pass *p,
                              st_status *st, double t[2], st_error *err)
{
    const st_layer *l = r->net->layers[i];
    st_error ignored;
    t[0] = timed ? st_now() : 0.0;
    st_status lst = (pass ? l->ops->backward : l->ops->forward)(l, r->state[i], p,
                                                                *st == ST_OK ? err : &ignored);
    t[1] = timed ? st_now() : 0.0;
    if (lst == ST_OK || *st != ST_OK)
        return 0;
    st_error_prefix(err, "layer %d [%s] %s: ", i, l->ops->type, pass ? "backward" : "forward");
    *st = lst;
    p->n = 0;
    return 1;
}

static st_pass replica_pass(const st_replica *r, const float *weights, const st_shard *s,
                            const st_step_info *info)
{
    st_pass p = {
        .n = s->n, .training = info->training, .params = weights,
        .params_bf16 = r->weights_bf16, .arena = &r->arena,
        .labels = s->labels, .seed = info->seed, .iteration = info->iteration,
        .sample0 = s->sample0, .batch_first = s->batch_first, .batch_n = s->batch_n,
    };
    return p;
}

st_status st_replica_forward(st_replica *r, const float *weights, const st_shard *s,
                             const st_step_info *info, double *loss, st_error *err)
{
    int mp = r->mp && info->training;
    if (s->n < !mp || s->n > r->n)
        return st_fail(err, ST_EINTERNAL, "forward of %d samples on a replica built for %d",
                       s->n, r->n);
    if (info->training && !r->training)
        return st_fail(err, ST_EINTERNAL, "training forward on an inference replica");
    if (r->takes_bf16 && !r->weights_bf16)
        return st_fail(err, ST_EINTERNAL, "a replica whose kernels take the weights in bf16 "
                       "was given none");
    double sum = 0.0;
    st_pass p = replica_pass(r, weights, s, info);
    p.loss = &sum;
    st_trace_track *tr = info->training ? st_trace_at(r->trace, info->iteration) : NULL;
    /* The data layer copies the batch into the network's input. */
    if (info->training && r->backend->host_work)
        r->backend->host_work(r->bctx, -1, "data", 0,
                              2.0 * sizeof(float) * s->n * (double)st_shape_count(r->net->input));
    const float *src[ST_MAX_SRC];
    p.src = src;
    st_status st = ST_OK;
    for (int i = 0; i < r->net->n_layers; i++) {
        const st_layer *l = r->net->layers[i];
        if (p.n == 0 && !(mp && r->mp[i]))
            continue; /* no samples, or failed: only the model-parallel layers' meetings */
        for (int k = 0; k < l->n_src; k++)
            src[k] = l->src[k] < 0 ? s->x : st_replica_output(r, l->src[k]);
        p.dst = st_replica_output(r, i);
        if (r->layer_ready && info->training)
            r->layer_ready(r->layer_done_ctx, i, info->iteration);
        double t[2];
        if (replica_layer_pass(r, i, 0, r->time || tr, &p, &st, t, err) && !mp)
            return st;
        if (r->time)
            r->time[i].forward += t[1] - t[0];
        if (tr)
            replica_trace_layer(r, tr, i, 0, p.n, info->iteration, t[0], t[1]);
        replica_host_work(r, i, 0, p.n, info->training);
    }
    if (loss)
        *loss = sum;
    return st;
}

st_status st_replica_backward(st_replica *r, const float *weights, float *grads,
                              const st_shard *s, const st_step_info *info,
                              const float *diff_out, st_error *err)
{
    if (!r->training)
        return st_fail(err, ST_EINTERNAL, "backward on an inference replica");
    int nl = r->net->n_layers;
    for (int i = 0; i < nl; i++)
        if (!r->consumed[i])
            memset(st_arena_at(&r->arena, r->delta_off[i]), 0, r->out_bytes[i]);
    if (diff_out) {
        float *d = st_arena_at(&r->arena, r->delta_off[nl - 1]);
        size_t count = (size_t)s->n * st_shape_count(r->net->layers[nl - 1]->out);
        for (size_t j = 0; j < count; j++)
            d[j] += diff_out[j];
    }
    st_pass p = replica_pass(r, weights, s, info);
    p.grads = grads;
    st_trace_track *tr = st_trace_at(r->trace, info->iteration);
    const float *src[ST_MAX_SRC];
    float *dsrc[ST_MAX_SRC];
    p.src = src;
    p.diff_src = dsrc;
    st_status st = ST_OK;
    for (int i = nl - 1; i >= 0; i--) {
        const st_layer *l = r->net->layers[i];
        if (p.n == 0 && !(r->mp && r->mp[i]))
            continue; /* no samples, or failed: only the model-parallel layers' meetings */
        for (int k = 0; k < l->n_src; k++) {
            int from = l->src[k];
            src[k] = from < 0 ? s->x : st_replica_output(r, from);
            dsrc[k] = from < 0 ? st_replica_input_delta(r)
                               : (float *)st_arena_at(&r->arena, r->delta_off[from]);
        }
        p.accumulate = &r->accumulate[i * ST_MAX_SRC];
        p.dst = st_replica_output(r, i);
        p.diff_dst = st_arena_at(&r->arena, r->delta_off[i]);
        p.time = r->time ? &r->time[i] : NULL;
        double weights_before = r->time ? r->time[i].backward_weights : 0.0, t[2];
        if (replica_layer_pass(r, i, 1, r->time || tr, &p, &st, t, err) && !r->mp)
            return st;
        if (r->time)
            r->time[i].backward_data +=
                t[1] - t[0] - (r->time[i].backward_weights - weights_before);
        if (tr)
            replica_trace_layer(r, tr, i, 1, p.n, info->iteration, t[0], t[1]);
        replica_host_work(r, i, 1, p.n, 1);
        if (r->layer_done)
            r->layer_done(r->layer_done_ctx, i);
    }
    return st;
}
