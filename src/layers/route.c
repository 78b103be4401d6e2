/* [route]: concatenate earlier layers' outputs along the channels, in plain C
 * (a copy per sample and input). layers= is a comma-separated list; negative
 * entries are relative (Darknet). All inputs need the same width and height. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layers/layer.h"

typedef struct route_layer {
    st_layer base;
    size_t part[ST_MAX_SRC]; /* values per sample of each input */
} route_layer;

static st_status route_build(st_build *b, st_layer *base, st_error *err)
{
    route_layer *l = (route_layer *)base;
    st_status st;
    int refs[ST_MAX_SRC], n;
    if ((st = st_cfg_int_list(b->cfg, b->sec, "layers", refs, ST_MAX_SRC, &n, err)))
        return st;
    if (n == 0)
        return st_fail(err, ST_EINPUT, "%s:%d: [route] needs layers=L1[,L2...]", b->cfg->path,
                       b->sec->line);
    base->n_src = n;
    for (int k = 0; k < n; k++) {
        if ((st = st_layer_ref(b, "layers", refs[k], &base->src[k], err)))
            return st;
        st_shape s = b->layers[base->src[k]]->out;
        l->part[k] = st_shape_count(s);
        if (k == 0) {
            base->in = s;
            base->out = s;
            continue;
        }
        if (s.w != base->out.w || s.h != base->out.h)
            return st_layer_bad_shape(b, err, "layer %d is %d x %d but layer %d is %d x %d: "
                                      "routed layers need the same width and height",
                                      base->src[k], s.w, s.h, base->src[0], base->out.w,
                                      base->out.h);
        if ((long)base->out.c + s.c > (1L << 28))
            return st_layer_bad_shape(b, err, "routing %d more channels onto %d makes more than "
                                      "%ld", s.c, base->out.c, 1L << 28);
        base->out.c += s.c;
    }
    return ST_OK;
}

/* Forward: each sample's output is its sources' samples one after another.
 * Backward: the output's gradient cut back into the sources' (added where
 * accumulate says, skipped where a source needs none). A route of one layer
 * whose output and gradient the replica made its source's (copies_input)
 * has nothing to do. */
static void route_copy(const route_layer *l, const st_pass *p, int backward)
{
    const st_layer *base = &l->base;
    if (base->n_src == 1 && (backward ? p->diff_src[0] == p->diff_dst : p->dst == p->src[0]))
        return;
    size_t out_n = st_shape_count(base->out);
    for (int n = 0; n < p->n; n++) {
        size_t at = (size_t)n * out_n;
        for (int k = 0; k < base->n_src; k++) {
            size_t part = l->part[k];
            if (!backward) {
                memcpy(p->dst + at, p->src[k] + (size_t)n * part, part * sizeof(float));
            } else if (p->diff_src[k]) {
                const float *dy = p->diff_dst + at;
                float *dx = p->diff_src[k] + (size_t)n * part;
                for (size_t i = 0; i < part; i++)
                    dx[i] = p->accumulate[k] ? dx[i] + dy[i] : dy[i];
            }
            at += part;
        }
    }
}

static st_status route_forward(const st_layer *base, void *state, const st_pass *p,
                               st_error *err)
{
    route_copy((const route_layer *)base, p, 0);
    return ST_OK;
}

static st_status route_backward(const st_layer *base, void *state, const st_pass *p,
                                st_error *err)
{
    route_copy((const route_layer *)base, p, 1);
    return ST_OK;
}

/* Work in plain C (route_copy), each training pass: per sample, a copy of
 * each input's part (a read and a write of each value; backward, the
 * gradient's part into the input's gradient). */
static void route_host_streams(const st_layer *base, int pass, st_stream_work *w)
{
    (void)pass;
    const route_layer *l = (const route_layer *)base;
    for (int k = 0; k < base->n_src; k++)
        st_stream_work_add(w, 1.0, l->part[k], 2.0);
}

static int route_copies_input(const st_layer *base)
{
    return base->n_src == 1;
}

static void route_describe(const st_layer *base, char *buf, size_t size)
{
    int len = snprintf(buf, size, "route ");
    for (int k = 0; k < base->n_src && len > 0 && (size_t)len < size; k++)
        len += snprintf(buf + len, size - (size_t)len, " %d", base->src[k]);
}

static void route_graph(const st_layer *base, st_graph_node *g)
{
    *g = (st_graph_node){.op = ST_GRAPH_CONCAT};
}

const st_layer_ops st_route_ops = {
    .type = "route",
    .size = sizeof(route_layer),
    .host_streams = route_host_streams,
    .plain_input = 1,
    .build = route_build,
    .forward = route_forward,
    .backward = route_backward,
    .copies_input = route_copies_input,
    .describe = route_describe,
    .graph = route_graph,
};
