/* [softmax]: softmax of x/temperature over `groups` equal groups, and with
 * the labels the cross-entropy loss -log p[label] per sample.
 *
 * Backward follows Darknet, which treats softmax and cross-entropy as one
 * step: the input gradient is the loss's, (p - onehot(label)) / temperature
 * on the group holding the label (zero on the other groups), plus whatever
 * gradient later layers sent back, passed through unchanged (a following
 * [cost] layer's). Darknet itself ignores the temperature here and pushes
 * the groups without a label towards zero; we keep the gradient exact. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "layer_blocks.h"

typedef struct softmax_layer {
    st_layer base;
    int groups;
    float temperature;
} softmax_layer;

static st_status softmax_build(st_build *b, st_layer *base, st_error *err)
{
    softmax_layer *l = (softmax_layer *)base;
    st_status st;
    base->is_loss = 1;
    if ((st = st_cfg_int(b->cfg, b->sec, "groups", 1, 1, 1 << 24, &l->groups, err)) ||
        (st = st_cfg_float(b->cfg, b->sec, "temperature", 1.0f, 1e-3f, 1e3f, &l->temperature,
                           err)))
        return st;
    size_t count = st_shape_count(b->in);
    if (count % (size_t)l->groups)
        return st_layer_bad_shape(b, err, "groups=%d does not divide the %zu inputs", l->groups,
                                  count);
    return ST_OK;
}

static st_status softmax_setup(const st_layer *base, st_setup *s, void **state, st_error *err)
{
    const softmax_layer *l = (const softmax_layer *)base;
    st_softmax_desc d = {{.kind = ST_K_SOFTMAX}, (int)st_shape_count(base->in), l->groups,
                         l->temperature};
    s->dst_plain = 1; /* the loss reads the probabilities in plain C */
    return st_slot_setup(s, base, &d.base, "softmax", state, err);
}

static st_status softmax_forward(const st_layer *base, void *state, const st_pass *p,
                                 st_error *err)
{
    st_status st = st_slot_forward(base, state, p, err);
    if (st != ST_OK || !p->labels || !p->loss)
        return st;
    size_t count = st_shape_count(base->out);
    double loss = 0.0;
    for (int n = 0; n < p->n; n++) {
        float q = p->dst[(size_t)n * count + (size_t)p->labels[n]];
        /* kept from log(0); a NaN stays NaN, so the trainer stops on it */
        loss -= log(q > 1e-30f || isnan(q) ? (double)q : 1e-30);
    }
    *p->loss += loss;
    return ST_OK;
}

static st_status softmax_backward(const st_layer *base, void *state, const st_pass *p,
                                  st_error *err)
{
    (void)state;
    (void)err;
    if (!p->diff_src[0])
        return ST_OK;
    const softmax_layer *l = (const softmax_layer *)base;
    size_t count = st_shape_count(base->out), group = count / (size_t)l->groups;
    float *dx = p->diff_src[0];
    for (int n = 0; n < p->n; n++) {
        size_t label = p->labels ? (size_t)p->labels[n] : count;
        size_t g0 = label / group * group; /* the labelled group */
        for (size_t i = 0; i < count; i++) {
            size_t at = (size_t)n * count + i;
            float g = p->diff_dst[at];
            if (label < count && i >= g0 && i < g0 + group)
                g += (p->dst[at] - (i == label ? 1.0f : 0.0f)) / l->temperature;
            dx[at] = p->accumulate[0] ? dx[at] + g : g;
        }
    }
    return ST_OK;
}

static void softmax_describe(const st_layer *base, char *buf, size_t size)
{
    snprintf(buf, size, "softmax                                        %4zu",
             st_shape_count(base->out));
}

static void softmax_graph(const st_layer *base, st_graph_node *g)
{
    const softmax_layer *l = (const softmax_layer *)base;
    *g = (st_graph_node){.op = ST_GRAPH_SOFTMAX, .softmax = {l->groups, l->temperature}};
}

const st_layer_ops st_softmax_ops = {
    .type = "softmax",
    .size = sizeof(softmax_layer),
    .host_streams = st_layer_host_copy, /* the loss reads the probabilities, */
                                        /* the gradient is written */
    .plain_input = 1,
    .build = softmax_build,
    .setup = softmax_setup,
    .forward = softmax_forward,
    .backward = softmax_backward,
    .release = st_slot_release,
    .describe = softmax_describe,
    .graph = softmax_graph,
};
