/* A worker's replica of a network: its kernels and activation arena set up
 * (the layouts each layer's output takes, the gradients' shared slots,
 * which passes accumulate), and its forward and backward passes. */
#include "net/net.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"

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
    free(r->alias);
    free(r->out_bf16);
    free(r->out_layout);
    free(r->out_bytes);
    free(r->time);
    free(r->mp);
    memset(r, 0, sizeof *r);
}

/* The layer whose output memory layer i's is: i, or for an aliased layer
 * (st_replica.alias) its input's owner; -1 for the network input. */
static int replica_owner(const st_replica *r, int i)
{
    while (i >= 0 && r->alias[i])
        i = r->net->layers[i]->src[0];
    return i;
}

/* Backward runs from the last layer down; the first consumer of an output to
 * run backward overwrites its gradient, later ones add to it. An aliased
 * layer's consumers are its input's; it adds nothing itself. */
static void replica_plan_accumulation(st_replica *r)
{
    int nl = r->net->n_layers;
    unsigned char seen_input = 0;
    memset(r->consumed, 0, (size_t)nl);
    for (int i = nl - 1; i >= 0; i--) {
        const st_layer *l = r->net->layers[i];
        if (r->alias[i])
            continue;
        for (int k = 0; k < l->n_src; k++) {
            int p = replica_owner(r, l->src[k]);
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

/* The bf16 io flags of layer l (st_layer_ops.bf16_io), 0 without. */
static int bf16_io(const st_layer *l)
{
    return l->ops->bf16_io ? l->ops->bf16_io(l) : 0;
}

/* --precision bf16: which outputs are kept rounded to bf16 between layers,
 * into out [n_layers], given plain [n_layers] (plan_plain_outputs). An
 * output is when its layer gives it rounded (ST_BF16_GIVES, or
 * ST_BF16_PASSES with its input rounded), every consumer takes it so
 * (ST_BF16_TAKES, or ST_BF16_PASSES whose own output is kept so), and it
 * is not plain (the trainer, plain C or a model-parallel layer reads it)
 * nor shared by an aliased layer (a route of one input, whose consumers
 * are its own). Then no value changes but the maximum's position where a
 * max pooling's window holds values that round to the same bf16: each
 * consumer rounds the values itself. Two passes: from the last layer down,
 * whether each layer's consumers all take its output rounded (a max
 * pooling's take it when its own consumers do); then from the first up,
 * whether its input is (for ST_BF16_PASSES). */
static void plan_bf16_outputs(const st_net *net, const unsigned char *plain,
                              const unsigned char *alias, unsigned char *out)
{
    int nl = net->n_layers;
    memset(out, 0, (size_t)nl);
    for (int j = nl - 1; j >= 0; j--) {
        const st_layer *l = net->layers[j];
        int io = bf16_io(l), takes_all = 1, consumers = 0;
        for (int c = j + 1; c < nl; c++)
            for (int k = 0; k < net->layers[c]->n_src; k++) {
                if (net->layers[c]->src[k] != j)
                    continue;
                int cio = bf16_io(net->layers[c]);
                consumers++;
                takes_all &= !alias[c] &&
                             ((cio & ST_BF16_TAKES) || ((cio & ST_BF16_PASSES) && out[c]));
            }
        out[j] = (unsigned char)(consumers > 0 && takes_all && !plain[j] && !alias[j] &&
                                 (io & (ST_BF16_GIVES | ST_BF16_PASSES)));
    }
    for (int j = 0; j < nl; j++) {
        const st_layer *l = net->layers[j];
        if (out[j] && !(bf16_io(l) & ST_BF16_GIVES))
            out[j] = (unsigned char)(l->n_src == 1 && l->src[0] >= 0 && out[l->src[0]]);
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
        .dst_bf16 = r->out_bf16[i],
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
    if (r->alias[i]) {
        int from = l->src[0];
        r->out_layout[i] = r->out_layout[from];
        r->out_bytes[i] = r->out_bytes[from];
        r->out_off[i] = r->out_off[from];
        return ST_OK;
    }
    if (s.out_stored_bf16 && !r->out_bf16[i])
        return st_fail(err, ST_EINTERNAL, "the backend stored an output in bf16 unasked");
    if (s.out_stored_bf16)
        r->out_bf16[i] = ST_OUT_BF16_STORED;
    r->out_layout[i] = s.out_layout;
    r->out_bytes[i] = s.out_bytes;
    char name[48];
    snprintf(name, sizeof name, "%d.%s.out", i, st_layer_short_name(l));
    return st_arena_reserve(&r->arena, name, s.out_bytes, &r->out_off[i], err);
}

/* The gradient at layer i's output: its output's layout in f32. */
static size_t delta_bytes(const st_replica *r, int i)
{
    return r->out_bf16[i] == ST_OUT_BF16_STORED ? 2 * r->out_bytes[i] : r->out_bytes[i];
}

/* The gradients at the layers' outputs share memory where their lifetimes
 * allow. Backward runs layer n-1 down to 0; the gradient at layer p's output
 * is live from the step of its last consumer (or the start, without one)
 * down to step p, when p reads it. Two gradients may share a slot when one
 * is last read at a step before the other is first written. Slots are
 * handed out greedily, the earliest-written gradient first. An aliased
 * layer's gradient is its input's owner's, whose consumers its consumers
 * are. */
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
        for (int k = 0; k < r->net->layers[c]->n_src && !r->alias[c]; k++) {
            int p = replica_owner(r, r->net->layers[c]->src[k]);
            if (p >= 0 && (first_step[p] == nl || first_step[p] < c))
                first_step[p] = c;
        }
    /* the gradients first written at each step, the highest layer first:
     * lists through next[] from first_at[step] (-1 ends them) */
    for (int step = 0; step <= nl && st == ST_OK; step++)
        first_at[step] = -1;
    for (int p = 0; p < nl && st == ST_OK; p++) {
        if (r->alias[p])
            continue;
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
                if (pick < 0 || (slot_bytes[pick] < delta_bytes(r, p) &&
                                 slot_bytes[k] > slot_bytes[pick]))
                    pick = k;
            }
            if (pick < 0)
                pick = n_slots++;
            if (slot_bytes[pick] < delta_bytes(r, p))
                slot_bytes[pick] = delta_bytes(r, p);
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
        r->delta_off[p] = slot_off[slot_of[replica_owner(r, p)]];
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
    r->alias = st_calloc((size_t)nl, 1, "replica", err);
    r->out_bf16 = st_calloc((size_t)nl, 1, "replica", err);
    r->out_layout = st_calloc((size_t)nl, sizeof *r->out_layout, "replica layouts", err);
    r->out_bytes = st_calloc((size_t)nl, sizeof *r->out_bytes, "replica layouts", err);
    if (o->timing)
        r->time = st_calloc((size_t)nl, sizeof *r->time, "layer times", err);
    int want_mp = o->mp && o->training;
    if (want_mp)
        r->mp = st_calloc((size_t)nl, 1, "replica", err);
    st_status st = (r->state && r->out_off && r->delta_off && r->accumulate && r->consumed &&
                    r->alias && r->out_bf16 && r->out_layout && r->out_bytes &&
                    (r->time || !o->timing) &&
                    (r->mp || !want_mp))
                       ? ST_OK : ST_ENOMEM;
    if (st == ST_OK && want_mp) {
        int first;
        size_t shared_from;
        st_net_hybrid_split(net, &first, &shared_from);
        for (int i = first; i < nl; i++)
            r->mp[i] = (unsigned char)st_layer_model_parallel(net->layers[i]);
    }
    for (int i = 0; i < nl && st == ST_OK && !want_mp; i++) {
        const st_layer *l = net->layers[i];
        r->alias[i] = (unsigned char)(l->ops->copies_input && l->ops->copies_input(l) &&
                                      l->n_src == 1 && l->src[0] >= 0 && i != nl - 1 &&
                                      i != net->output_layer);
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
    if (st == ST_OK && o->backend.precision == ST_PRECISION_BF16)
        plan_bf16_outputs(net, plain, r->alias, r->out_bf16);
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
static st_status replica_host_work(const st_replica *r, int i, int pass, int n, int training,
                                   st_error *err)
{
    const st_layer *l = r->net->layers[i];
    if (!training || r->alias[i] || !l->ops->host_streams || !r->backend->host_work)
        return ST_OK;
    st_stream_work w = {0};
    l->ops->host_streams(l, pass, &w);
    st_status st = w.groups > 0
                       ? r->backend->host_work(r->bctx, i, st_layer_short_name(l), pass, n, &w, err)
                       : ST_OK;
    if (st != ST_OK)
        st_error_prefix(err, "layer %d [%s] %s: ", i, l->ops->type, pass ? "backward" : "forward");
    return st;
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
    st_status st = ST_OK;
    /* The data layer copies the batch into the network's input. */
    if (info->training && r->backend->host_work) {
        st_stream_work copy = {0};
        st_stream_work_add(&copy, 0.0, st_shape_count(r->net->input), 2.0);
        if ((st = r->backend->host_work(r->bctx, -1, "data", 0, s->n, &copy, err)) != ST_OK)
            return st;
    }
    const float *src[ST_MAX_SRC];
    p.src = src;
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
        if (st == ST_OK && (st = replica_host_work(r, i, 0, p.n, info->training, err)) != ST_OK) {
            p.n = 0;
            if (!mp)
                return st;
        }
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
        if (!r->consumed[i] && !r->alias[i])
            memset(st_arena_at(&r->arena, r->delta_off[i]), 0, delta_bytes(r, i));
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
        if (st == ST_OK && (st = replica_host_work(r, i, 1, p.n, 1, err)) != ST_OK) {
            p.n = 0;
            if (!r->mp)
                return st;
        }
        if (r->layer_done)
            r->layer_done(r->layer_done_ctx, i);
    }
    return st;
}

st_status st_replica_test(st_replica *r, const float *weights, const st_source *src,
                          const st_transform *t, uint64_t seed, st_records_buf *b, long first,
                          long end, long *correct, double *loss, st_error *err)
{
    int classes = r->net->classes;
    st_step_info info = {0, seed, 0};
    *correct = 0;
    *loss = 0.0;
    for (long at = first; at < end; at += b->cap) {
        int n = (int)(end - at < b->cap ? end - at : b->cap);
        double chunk_loss = 0.0;
        st_shard shard = {n, b->x, b->labels, at, 0, 0};
        st_status st = st_records_read_range(src, t, b, at, n, err);
        if (st == ST_OK)
            st = st_replica_forward(r, weights, &shard, &info, &chunk_loss, err);
        if (st != ST_OK)
            return st;
        *loss += chunk_loss;
        const float *out = st_replica_output(r, r->net->output_layer);
        for (int i = 0; i < n; i++) {
            const float *s = out + (size_t)i * classes;
            int best = 0;
            for (int c = 1; c < classes; c++)
                if (s[c] > s[best])
                    best = c;
            *correct += best == b->labels[i];
        }
    }
    return ST_OK;
}

size_t st_replica_bf16_output_bytes(const st_replica *r)
{
    size_t bytes = 0;
    for (int i = 0; i < r->net->n_layers; i++)
        if (r->out_bf16[i] == ST_OUT_BF16_STORED)
            bytes += r->out_bytes[i];
    return bytes;
}
