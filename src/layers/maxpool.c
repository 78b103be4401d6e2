/* [maxpool]: Darknet semantics. stride defaults to 1 and size to stride;
 * padding is the TOTAL padding (default size - 1), padding/2 of it on the
 * top/left; out = (in + padding - size) / stride + 1.
 * Positions outside the input never win the max. */
#include <stdio.h>
#include <stdlib.h>

#include "layer_blocks.h"

typedef struct maxpool_layer {
    st_layer base;
    int size, stride, padding;
} maxpool_layer;

static st_status maxpool_build(st_build *b, st_layer *base, st_error *err)
{
    maxpool_layer *l = (maxpool_layer *)base;
    st_status st;
    if ((st = st_cfg_int(b->cfg, b->sec, "stride", 1, 1, 1 << 12, &l->stride, err)) ||
        (st = st_cfg_int(b->cfg, b->sec, "size", l->stride, 1, 1 << 12, &l->size, err)) ||
        (st = st_cfg_int(b->cfg, b->sec, "padding", l->size - 1, 0, 1 << 12, &l->padding, err)))
        return st;
    long ph = (long)b->in.h + l->padding, pw = (long)b->in.w + l->padding;
    if (ph < l->size || pw < l->size)
        return st_layer_bad_shape(b, err, "window %dx%d is larger than the padded input %ldx%ld",
                                  l->size, l->size, pw, ph);
    if (l->padding - l->padding / 2 >= l->size)
        return st_layer_bad_shape(b, err, "padding=%d puts whole windows outside the input "
                                  "(expected padding <= 2 x size - 2)", l->padding);
    base->out.h = (int)((ph - l->size) / l->stride + 1);
    base->out.w = (int)((pw - l->size) / l->stride + 1);
    return ST_OK;
}

static st_status maxpool_setup(const st_layer *base, st_setup *s, void **state, st_error *err)
{
    const maxpool_layer *l = (const maxpool_layer *)base;
    st_pool_desc d = {{.kind = ST_K_POOL}, ST_POOL_MAX, base->in.c, base->in.h, base->in.w,
                      base->out.h, base->out.w, l->size, l->size, l->stride, l->stride,
                      l->padding / 2, l->padding / 2};
    return st_slot_setup(s, base, &d.base, "maxpool", state, err);
}

/* Each output is one of its window's inputs (or 0 for a window wholly
 * in the padding). */
static int maxpool_bf16_io(const st_layer *base)
{
    (void)base;
    return ST_BF16_PASSES;
}

static void maxpool_describe(const st_layer *base, char *buf, size_t size)
{
    const maxpool_layer *l = (const maxpool_layer *)base;
    snprintf(buf, size, "max          %d x %d / %d  %4d x%4d x%4d   ->  %4d x%4d x%4d", l->size,
             l->size, l->stride, base->in.w, base->in.h, base->in.c, base->out.w, base->out.h,
             base->out.c);
}

static void maxpool_graph(const st_layer *base, st_graph_node *g)
{
    const maxpool_layer *l = (const maxpool_layer *)base;
    *g = (st_graph_node){.op = ST_GRAPH_MAXPOOL,
                         .maxpool = {l->size, l->stride, l->padding / 2,
                                     l->padding - l->padding / 2}};
}

const st_layer_ops st_maxpool_ops = {
    .type = "maxpool",
    .size = sizeof(maxpool_layer),
    .short_name = "max",
    .build = maxpool_build,
    .setup = maxpool_setup,
    ST_SLOT_PASSES,
    .bf16_io = maxpool_bf16_io,
    .describe = maxpool_describe,
    .graph = maxpool_graph,
};
