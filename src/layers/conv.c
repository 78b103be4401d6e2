/* [convolutional]: convolution, then batch norm or bias, then activation.
 *
 * Darknet semantics: pad=1 means padding = size/2 and overrides padding=;
 * out = (in + 2 padding - size) / stride + 1; the default activation is
 * logistic; with batch_normalize=1 the biases are batch norm's shift.
 * Weights [filters, channels/groups, size, size], He-normal initialized. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "layer_blocks.h"

typedef struct conv_layer {
    st_layer base;
    int filters, size, stride, padding, groups;
    st_wl_params wp;
} conv_layer;

static const char *const conv_ignored[] = {"flipped", "dot", "stopbackward", NULL};

static st_status conv_build(st_build *b, st_layer *base, st_error *err)
{
    conv_layer *l = (conv_layer *)base;
    st_status st;
    int pad;
    if ((st = st_cfg_int(b->cfg, b->sec, "filters", 1, 1, 1 << 16, &l->filters, err)) ||
        (st = st_cfg_int(b->cfg, b->sec, "size", 1, 1, 1 << 12, &l->size, err)) ||
        (st = st_cfg_int(b->cfg, b->sec, "stride", 1, 1, 1 << 12, &l->stride, err)) ||
        (st = st_cfg_int(b->cfg, b->sec, "pad", 0, 0, 1, &pad, err)) ||
        (st = st_cfg_int(b->cfg, b->sec, "padding", 0, 0, 1 << 12, &l->padding, err)) ||
        (st = st_cfg_int(b->cfg, b->sec, "groups", 1, 1, 1 << 16, &l->groups, err)) ||
        (st = st_cfg_int(b->cfg, b->sec, "batch_normalize", 0, 0, 1, &l->wp.batch_normalize,
                         err)) ||
        (st = st_layer_read_activation(b, ST_ACT_LOGISTIC, &l->wp.act, err)) ||
        (st = st_layer_only(b, "binary", "0", err)) || (st = st_layer_only(b, "xnor", "0", err)) ||
        (st = st_layer_only(b, "dilation", "1", err)))
        return st;
    if (pad)
        l->padding = l->size / 2;
    st_shape in = b->in;
    if (in.c % l->groups || l->filters % l->groups)
        return st_layer_bad_shape(b, err, "groups=%d must divide the input channels (%d) and "
                                  "filters (%d)", l->groups, in.c, l->filters);
    long ph = (long)in.h + 2L * l->padding, pw = (long)in.w + 2L * l->padding;
    if (ph < l->size || pw < l->size)
        return st_layer_bad_shape(b, err, "kernel %dx%d is larger than the padded input %ldx%ld",
                                  l->size, l->size, pw, ph);
    base->out.c = l->filters;
    base->out.h = (int)((ph - l->size) / l->stride + 1);
    base->out.w = (int)((pw - l->size) / l->stride + 1);
    size_t fan_in = (size_t)(in.c / l->groups) * l->size * l->size;
    if ((double)fan_in * l->filters > 2e9)
        return st_layer_bad_shape(b, err, "%d filters of %d x %d x %d is too many weights",
                                  l->filters, l->size, l->size, in.c / l->groups);
    base->flops = 2.0 * (double)l->filters * (double)fan_in * base->out.h * base->out.w;
    if ((st = st_layer_param(b, "weights", (size_t)l->filters * fan_in, ST_PARAM_WEIGHT,
                             ST_INIT_NORMAL, sqrtf(2.0f / (float)fan_in), &l->wp.weights, err)))
        return st;
    return st_wl_add_shift(b, &l->wp, l->filters, err);
}

static st_status conv_setup(const st_layer *base, st_setup *s, void **state, st_error *err)
{
    const conv_layer *l = (const conv_layer *)base;
    st_wl_state *ws = st_calloc(1, sizeof *ws, "convolution state", err);
    if (!ws)
        return ST_ENOMEM;
    *state = ws;
    st_conv_desc d = {
        .base.kind = ST_K_CONV,
        .ic = base->in.c, .ih = base->in.h, .iw = base->in.w,
        .oc = base->out.c, .oh = base->out.h, .ow = base->out.w,
        .kh = l->size, .kw = l->size, .sh = l->stride, .sw = l->stride,
        .ph = l->padding, .pw = l->padding, .groups = l->groups,
        .bias = !l->wp.batch_normalize,
        .act = l->wp.batch_normalize ? ST_ACT_LINEAR : l->wp.act,
    };
    return st_wl_setup(s, base, &l->wp, &d.base, "conv", ws, err);
}

static st_status conv_forward(const st_layer *base, void *state, const st_pass *p,
                              st_error *err)
{
    return st_wl_forward(&((const conv_layer *)base)->wp, state, p, err);
}

static st_status conv_backward(const st_layer *base, void *state, const st_pass *p,
                               st_error *err)
{
    return st_wl_backward(&((const conv_layer *)base)->wp, state, p, err);
}

static void conv_release(void *state)
{
    if (state)
        st_wl_release(state);
    free(state);
}

static int conv_bf16_io(const st_layer *base)
{
    return st_wl_bf16_io(&((const conv_layer *)base)->wp);
}

static void conv_describe(const st_layer *base, char *buf, size_t size)
{
    const conv_layer *l = (const conv_layer *)base;
    snprintf(buf, size, "conv  %5d %2d x%2d /%2d  %4d x%4d x%4d   ->  %4d x%4d x%4d  %5.3f BFLOPs",
             l->filters, l->size, l->size, l->stride, base->in.w, base->in.h, base->in.c,
             base->out.w, base->out.h, base->out.c, base->flops / 1e9);
}

static void conv_graph(const st_layer *base, st_graph_node *g)
{
    const conv_layer *l = (const conv_layer *)base;
    *g = (st_graph_node){.op = ST_GRAPH_CONV,
                         .conv = {l->size, l->stride, l->padding, l->groups,
                                  l->wp.batch_normalize, l->wp.act}};
}

/* Darknet's order: the biases (batch norm's shift), batch norm, the weights. */
static int conv_darknet(const st_layer *base, st_darknet_tensor t[ST_DARKNET_MAX_TENSORS])
{
    int n = 0;
    t[n++] = (st_darknet_tensor){"biases", ST_DARKNET_AS_IS};
    if (((const conv_layer *)base)->wp.batch_normalize)
        n += st_bn_darknet(t + n);
    t[n++] = (st_darknet_tensor){"weights", ST_DARKNET_AS_IS};
    return n;
}

const st_layer_ops st_conv_ops = {
    .type = "convolutional",
    .size = sizeof(conv_layer),
    .short_name = "conv",
    .ignored_keys = conv_ignored,
    .build = conv_build,
    .setup = conv_setup,
    .forward = conv_forward,
    .backward = conv_backward,
    .release = conv_release,
    .bf16_io = conv_bf16_io,
    .describe = conv_describe,
    .graph = conv_graph,
    .darknet = conv_darknet,
};
