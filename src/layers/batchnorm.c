/* [batchnorm]: a standalone batch normalization with learned scales and
 * biases and running statistics (Darknet's batchnorm layer), no activation. */
#include <stdio.h>
#include <stdlib.h>

#include "layer_blocks.h"

typedef struct batchnorm_layer {
    st_layer base;
    st_bn_params bn;
} batchnorm_layer;

static st_status batchnorm_build(st_build *b, st_layer *base, st_error *err)
{
    return st_bn_add_params(b, b->in.c, &((batchnorm_layer *)base)->bn, err);
}

static st_status batchnorm_setup(const st_layer *base, st_setup *s, void **state,
                                 st_error *err)
{
    st_bn_state *bs = st_calloc(1, sizeof *bs, "batchnorm state", err);
    if (!bs)
        return ST_ENOMEM;
    *state = bs;
    st_status st = st_bn_setup(s, base, base->out.c, base->out.h, base->out.w, ST_ACT_LINEAR,
                               s->in_layout[0], s->dst_plain, bs, err);
    if (st == ST_OK) {
        s->out_layout = bs->k.k->dst_layout;
        s->out_bytes = bs->k.k->dst_bytes;
    }
    return st;
}

static st_status batchnorm_forward(const st_layer *base, void *state, const st_pass *p,
                                   st_error *err)
{
    return st_bn_forward(&((const batchnorm_layer *)base)->bn, state, p, p->src[0], p->dst,
                         err);
}

static st_status batchnorm_backward(const st_layer *base, void *state, const st_pass *p,
                                    st_error *err)
{
    return st_bn_backward(&((const batchnorm_layer *)base)->bn, state, p, p->src[0],
                          p->diff_dst, p->diff_src[0], p->accumulate[0], err);
}

static void batchnorm_release(void *state)
{
    if (state)
        st_kslot_release(&((st_bn_state *)state)->k);
    free(state);
}

static void batchnorm_describe(const st_layer *base, char *buf, size_t size)
{
    snprintf(buf, size, "batchnorm                %4d x%4d x%4d", base->in.w, base->in.h,
             base->in.c);
}

static void batchnorm_graph(const st_layer *base, st_graph_node *g)
{
    *g = (st_graph_node){.op = ST_GRAPH_BATCHNORM};
}

/* Darknet's [batchnorm] keeps no biases (it neither trains nor saves them). */
static int batchnorm_darknet(const st_layer *base, st_darknet_tensor t[ST_DARKNET_MAX_TENSORS])
{
    int n = st_bn_darknet(t);
    t[n++] = (st_darknet_tensor){"biases", ST_DARKNET_ABSENT};
    return n;
}

const st_layer_ops st_batchnorm_ops = {
    .type = "batchnorm",
    .size = sizeof(batchnorm_layer),
    .build = batchnorm_build,
    .setup = batchnorm_setup,
    .forward = batchnorm_forward,
    .backward = batchnorm_backward,
    .release = batchnorm_release,
    .describe = batchnorm_describe,
    .graph = batchnorm_graph,
    .darknet = batchnorm_darknet,
};
