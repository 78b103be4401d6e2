/* [connected]: inner product over the flattened C x H x W input, then batch
 * norm or bias, then activation. Darknet semantics: weights [output, inputs]
 * initialized U(-1, 1) * sqrt(2 / inputs); default activation logistic. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "layer_blocks.h"

typedef struct connected_layer {
    st_layer base;
    int outputs;
    wl_params wp;
} connected_layer;

static st_status connected_build(st_build *b, st_layer **out, st_error *err)
{
    connected_layer *l = st_layer_new(b, &st_connected_ops, sizeof *l, out, err);
    if (!l)
        return ST_ENOMEM;
    st_layer *base = &l->base;
    st_status st;
    if ((st = st_cfg_int(b->cfg, b->sec, "output", 1, 1, 1 << 24, &l->outputs, err)) ||
        (st = st_cfg_int(b->cfg, b->sec, "batch_normalize", 0, 0, 1, &l->wp.batch_normalize,
                         err)) ||
        (st = read_activation(b, ST_ACT_LOGISTIC, &l->wp.act, err)))
        return st;
    size_t inputs = st_shape_count(b->in);
    if ((double)inputs * l->outputs > 2e9)
        return st_layer_bad_shape(b, err, "%zu inputs x %d outputs is too many weights",
                                  inputs, l->outputs);
    base->out = (st_shape){l->outputs, 1, 1};
    base->flops = 2.0 * (double)inputs * l->outputs;
    if ((st = st_layer_param(b, "weights", inputs * (size_t)l->outputs, ST_PARAM_WEIGHT,
                             ST_INIT_UNIFORM, sqrtf(2.0f / (float)inputs), &l->wp.weights,
                             err)))
        return st;
    return wl_add_shift(b, &l->wp, l->outputs, err);
}

static st_status connected_setup(const st_layer *base, st_setup *s, void **state,
                                 st_error *err)
{
    const connected_layer *l = (const connected_layer *)base;
    wl_state *ws = st_calloc(1, sizeof *ws, "connected state", err);
    if (!ws)
        return ST_ENOMEM;
    *state = ws;
    st_fc_desc d = {{.kind = ST_K_FC}, (int)st_shape_count(base->in), l->outputs,
                    !l->wp.batch_normalize, l->wp.batch_normalize ? ST_ACT_LINEAR : l->wp.act};
    return wl_setup(s, base, &l->wp, &d.base, "fc", ws, err);
}

static st_status connected_forward(const st_layer *base, void *state, const st_pass *p,
                                   st_error *err)
{
    return wl_forward(&((const connected_layer *)base)->wp, state, p, err);
}

static st_status connected_backward(const st_layer *base, void *state, const st_pass *p,
                                    st_error *err)
{
    return wl_backward(&((const connected_layer *)base)->wp, state, p, err);
}

static void connected_release(void *state)
{
    if (state)
        wl_release(state);
    free(state);
}

static void connected_describe(const st_layer *base, char *buf, size_t size)
{
    snprintf(buf, size, "connected                            %4zu  ->  %4d",
             st_shape_count(base->in), base->out.c);
}

const st_layer_ops st_connected_ops = {
    .type = "connected",
    .short_name = "connected",
    .ignored_keys = NULL,
    .build = connected_build,
    .setup = connected_setup,
    .forward = connected_forward,
    .backward = connected_backward,
    .release = connected_release,
    .describe = connected_describe,
};
