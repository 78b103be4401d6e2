/* [lrn]: Caffe-style local response normalization across channels:
 * y = x * (k + alpha/size * sum over `size` neighbouring channels of x^2)^-beta.
 * Keys size (odd, default 5), alpha (1e-4), beta (0.75), k (1). */
#include <stdio.h>
#include <stdlib.h>

#include "layer_blocks.h"

typedef struct lrn_layer {
    st_layer base;
    int size;
    float alpha, beta, k;
} lrn_layer;

static st_status lrn_build(st_build *b, st_layer *base, st_error *err)
{
    lrn_layer *l = (lrn_layer *)base;
    st_status st;
    if ((st = st_cfg_int(b->cfg, b->sec, "size", 5, 1, 1 << 12, &l->size, err)) ||
        (st = st_cfg_float(b->cfg, b->sec, "alpha", 1e-4f, 0.0f, 1e3f, &l->alpha, err)) ||
        (st = st_cfg_float(b->cfg, b->sec, "beta", 0.75f, 0.0f, 1e3f, &l->beta, err)) ||
        (st = st_cfg_float(b->cfg, b->sec, "k", 1.0f, 1e-6f, 1e6f, &l->k, err)))
        return st;
    if (l->size % 2 == 0) {
        st_cfg_option *o = st_cfg_find(b->sec, "size");
        return st_fail(err, ST_EINPUT, "%s:%d: [lrn] size=%d: expected an odd number",
                       b->cfg->path, o ? o->line : b->sec->line, l->size);
    }
    return ST_OK;
}

static st_status lrn_setup(const st_layer *base, st_setup *s, void **state, st_error *err)
{
    const lrn_layer *l = (const lrn_layer *)base;
    st_lrn_desc d = {{.kind = ST_K_LRN}, base->in.c, base->in.h, base->in.w, l->size, l->alpha,
                     l->beta, l->k};
    return st_slot_setup(s, base, &d.base, "lrn", state, err);
}

static void lrn_describe(const st_layer *base, char *buf, size_t size)
{
    const lrn_layer *l = (const lrn_layer *)base;
    snprintf(buf, size, "lrn          size %d     %4d x%4d x%4d   ->  %4d x%4d x%4d", l->size,
             base->in.w, base->in.h, base->in.c, base->out.w, base->out.h, base->out.c);
}

static void lrn_graph(const st_layer *base, st_graph_node *g)
{
    const lrn_layer *l = (const lrn_layer *)base;
    *g = (st_graph_node){.op = ST_GRAPH_LRN, .lrn = {l->size, l->alpha, l->beta, l->k}};
}

const st_layer_ops st_lrn_ops = {
    .type = "lrn",
    .size = sizeof(lrn_layer),
    .build = lrn_build,
    .setup = lrn_setup,
    ST_SLOT_PASSES,
    .describe = lrn_describe,
    .graph = lrn_graph,
};
