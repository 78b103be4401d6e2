/* [dropout]: during training each value is zeroed with `probability` and the
 * rest scaled by 1/(1 - probability) (Darknet's inverted dropout); at test
 * time it is the identity. Masks come from a stream keyed by (seed, layer,
 * iteration, global sample index), so they do not depend on how the batch is
 * split over workers, and a resumed run draws the same masks. Elementwise,
 * it works in whatever layout its input comes in (a blocked layout's
 * padding stays zero), and its output has that layout. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layers/layer.h"
#include "base/rng.h"

typedef struct dropout_layer {
    st_layer base;
    float probability;
} dropout_layer;

typedef struct dropout_state {
    size_t per_sample; /* floats of one sample in the input's layout */
    size_t mask_off;   /* [n, per_sample] bytes: 1 = kept */
} dropout_state;

static st_status dropout_build(st_build *b, st_layer *base, st_error *err)
{
    dropout_layer *l = (dropout_layer *)base;
    return st_cfg_float(b->cfg, b->sec, "probability", 0.5f, 0.0f, 0.99f, &l->probability, err);
}

static st_status dropout_setup(const st_layer *base, st_setup *s, void **state, st_error *err)
{
    dropout_state *ds = st_calloc(1, sizeof *ds, "dropout state", err);
    if (!ds)
        return ST_ENOMEM;
    *state = ds;
    ds->per_sample = s->in_bytes[0] / sizeof(float) / (size_t)s->n;
    s->out_layout = s->in_layout[0];
    s->out_bytes = s->in_bytes[0];
    char name[32];
    snprintf(name, sizeof name, "%d.mask", base->index);
    return st_arena_reserve(s->arena, name, (size_t)s->n * ds->per_sample, &ds->mask_off, err);
}

static st_status dropout_forward(const st_layer *base, void *state, const st_pass *p,
                                 st_error *err)
{
    (void)err;
    const dropout_layer *l = (const dropout_layer *)base;
    const dropout_state *ds = state;
    size_t count = ds->per_sample;
    if (!p->training) {
        memcpy(p->dst, p->src[0], (size_t)p->n * count * sizeof(float));
        return ST_OK;
    }
    unsigned char *mask = st_arena_at(p->arena, ds->mask_off);
    float scale = 1.0f / (1.0f - l->probability);
    for (int n = 0; n < p->n; n++) {
        st_rng rng;
        uint64_t key = st_rng_mix(st_rng_mix((uint64_t)base->index, (uint64_t)p->iteration),
                                  (uint64_t)(p->sample0 + n));
        st_rng_seed(&rng, p->seed, key);
        const float *x = p->src[0] + (size_t)n * count;
        float *y = p->dst + (size_t)n * count;
        unsigned char *m = mask + (size_t)n * count;
        for (size_t i = 0; i < count; i++) {
            m[i] = st_rng_uniform(&rng) >= l->probability;
            y[i] = m[i] ? x[i] * scale : 0.0f;
        }
    }
    return ST_OK;
}

static st_status dropout_backward(const st_layer *base, void *state, const st_pass *p,
                                  st_error *err)
{
    (void)err;
    const dropout_layer *l = (const dropout_layer *)base;
    if (!p->diff_src[0])
        return ST_OK;
    const dropout_state *ds = state;
    const unsigned char *mask = st_arena_at(p->arena, ds->mask_off);
    float scale = 1.0f / (1.0f - l->probability);
    size_t total = (size_t)p->n * ds->per_sample;
    float *dx = p->diff_src[0];
    for (size_t i = 0; i < total; i++) {
        float g = mask[i] ? p->diff_dst[i] * scale : 0.0f;
        dx[i] = p->accumulate[0] ? dx[i] + g : g;
    }
    return ST_OK;
}

static void dropout_release(void *state)
{
    free(state);
}

static void dropout_describe(const st_layer *base, char *buf, size_t size)
{
    size_t n = st_shape_count(base->out);
    snprintf(buf, size, "dropout       p = %.2f               %4zu  ->  %4zu",
             ((const dropout_layer *)base)->probability, n, n);
}

static void dropout_graph(const st_layer *base, st_graph_node *g)
{
    *g = (st_graph_node){.op = ST_GRAPH_DROPOUT,
                         .dropout = {((const dropout_layer *)base)->probability}};
}

/* Work in plain C, each training pass: one pass over the output, its values
 * in and out and a mask byte (a quarter of a float). */
static void dropout_host_streams(const st_layer *base, int pass, st_stream_work *w)
{
    (void)pass;
    st_stream_work_add(w, 0.0, st_shape_count(base->out), 2.25);
}

const st_layer_ops st_dropout_ops = {
    .type = "dropout",
    .size = sizeof(dropout_layer),
    .host_streams = dropout_host_streams,
    .keeps_layout = 1,
    .build = dropout_build,
    .setup = dropout_setup,
    .forward = dropout_forward,
    .backward = dropout_backward,
    .release = dropout_release,
    .describe = dropout_describe,
    .graph = dropout_graph,
};
