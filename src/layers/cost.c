/* [cost]: sum-of-squares loss against the one-hot label, passing its input
 * through unchanged. Darknet's gradient: scale * (x - onehot); the loss we
 * report is the matching 0.5 * scale * sum (x - onehot)^2 (Darknet prints
 * twice that). Only type=sse is implemented. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layers/layer.h"

typedef struct cost_layer {
    st_layer base;
    float scale;
} cost_layer;

static const char *const cost_ignored[] = {"ratio", "noobject_scale", "thresh", NULL};

static st_status cost_build(st_build *b, st_layer *base, st_error *err)
{
    base->is_loss = 1;
    st_status st = st_layer_only(b, "type", "sse", err);
    return st ? st
              : st_cfg_float(b->cfg, b->sec, "scale", 1.0f, 0.0f, 1e6f,
                             &((cost_layer *)base)->scale, err);
}

static float onehot(const st_pass *p, int n, size_t i)
{
    return p->labels && (size_t)p->labels[n] == i ? 1.0f : 0.0f;
}

static st_status cost_forward(const st_layer *base, void *state, const st_pass *p,
                              st_error *err)
{
    (void)state;
    (void)err;
    size_t count = st_shape_count(base->out);
    memcpy(p->dst, p->src[0], (size_t)p->n * count * sizeof(float));
    if (!p->labels || !p->loss)
        return ST_OK;
    double loss = 0.0;
    for (int n = 0; n < p->n; n++)
        for (size_t i = 0; i < count; i++) {
            double d = p->dst[(size_t)n * count + i] - onehot(p, n, i);
            loss += d * d;
        }
    *p->loss += 0.5 * ((const cost_layer *)base)->scale * loss;
    return ST_OK;
}

static st_status cost_backward(const st_layer *base, void *state, const st_pass *p,
                               st_error *err)
{
    (void)state;
    (void)err;
    if (!p->diff_src[0])
        return ST_OK;
    float scale = ((const cost_layer *)base)->scale;
    size_t count = st_shape_count(base->out);
    float *dx = p->diff_src[0];
    for (int n = 0; n < p->n; n++)
        for (size_t i = 0; i < count; i++) {
            size_t at = (size_t)n * count + i;
            float g = scale * (p->dst[at] - onehot(p, n, i)) + p->diff_dst[at];
            dx[at] = p->accumulate[0] ? dx[at] + g : g;
        }
    return ST_OK;
}

static void cost_describe(const st_layer *base, char *buf, size_t size)
{
    snprintf(buf, size, "cost                                           %4zu",
             st_shape_count(base->out));
}

/* Exported as the loss alone: its output is its input. */
static void cost_graph(const st_layer *base, st_graph_node *g)
{
    *g = (st_graph_node){.op = ST_GRAPH_IDENTITY};
}

const st_layer_ops st_cost_ops = {
    .type = "cost",
    .size = sizeof(cost_layer),
    .host_streams = st_layer_host_copy, /* the loss reads x and the label, */
                                        /* the gradient is written */
    .plain_input = 1,
    .ignored_keys = cost_ignored,
    .build = cost_build,
    .forward = cost_forward,
    .backward = cost_backward,
    .describe = cost_describe,
    .graph = cost_graph,
};
