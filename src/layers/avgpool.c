/* [avgpool]: global average pooling, C x H x W -> C x 1 x 1, as Darknet's. */
#include <stdio.h>
#include <stdlib.h>

#include "layer_blocks.h"

static st_status avgpool_build(st_build *b, st_layer *l, st_error *err)
{
    l->out = (st_shape){b->in.c, 1, 1};
    return ST_OK;
}

static st_status avgpool_setup(const st_layer *base, st_setup *s, void **state, st_error *err)
{
    st_pool_desc d = {{.kind = ST_K_POOL}, ST_POOL_AVG, base->in.c, base->in.h, base->in.w, 1, 1,
                      base->in.h, base->in.w, 1, 1, 0, 0};
    return st_slot_setup(s, base, &d.base, "avgpool", state, err);
}

static void avgpool_describe(const st_layer *base, char *buf, size_t size)
{
    snprintf(buf, size, "avg                     %4d x%4d x%4d   ->  %4d", base->in.w,
             base->in.h, base->in.c, base->out.c);
}

static void avgpool_graph(const st_layer *base, st_graph_node *g)
{
    *g = (st_graph_node){.op = ST_GRAPH_AVGPOOL};
}

const st_layer_ops st_avgpool_ops = {
    .type = "avgpool",
    .size = sizeof(st_layer),
    .short_name = "avg",
    .build = avgpool_build,
    .setup = avgpool_setup,
    ST_SLOT_PASSES,
    .describe = avgpool_describe,
    .graph = avgpool_graph,
};
