/* [crop]: Darknet's input-augmentation layer. Training: each sample is cut
 * to crop_height x crop_width at a random offset and mirrored left-right
 * with probability 1/2 when flip=1; testing: the centre crop. Values become
 * 2x - 1 (from [0, 1] to [-1, 1]) unless noadjust=1. The offsets and flips
 * come from a stream keyed by (seed, layer, iteration, sample), like dropout.
 * Darknet's CPU code draws one offset per batch and (a bug) always copies
 * the top-left corner; we implement what its GPU code does, per sample.
 * angle, saturation, exposure and shift are accepted with a warning. */
#include <stdio.h>
#include <stdlib.h>

#include "layers/layer.h"
#include "base/rng.h"

typedef struct crop_layer {
    st_layer base;
    int flip, noadjust;
} crop_layer;

typedef struct crop_state {
    size_t where_off; /* [n, 3] ints: row offset, column offset, mirrored */
} crop_state;

static const char *const crop_ignored[] = {"angle", "saturation", "exposure", "shift", NULL};

static st_status crop_build(st_build *b, st_layer *base, st_error *err)
{
    crop_layer *l = (crop_layer *)base;
    st_status st;
    if ((st = st_cfg_int(b->cfg, b->sec, "crop_height", 1, 1, 1 << 16, &base->out.h, err)) ||
        (st = st_cfg_int(b->cfg, b->sec, "crop_width", 1, 1, 1 << 16, &base->out.w, err)) ||
        (st = st_cfg_int(b->cfg, b->sec, "flip", 0, 0, 1, &l->flip, err)) ||
        (st = st_cfg_int(b->cfg, b->sec, "noadjust", 0, 0, 1, &l->noadjust, err)))
        return st;
    if (base->out.h > b->in.h || base->out.w > b->in.w)
        return st_layer_bad_shape(b, err, "crop %d x %d is larger than the input", base->out.w,
                                  base->out.h);
    return ST_OK;
}

static st_status crop_setup(const st_layer *base, st_setup *s, void **state, st_error *err)
{
    crop_state *cs = st_calloc(1, sizeof *cs, "crop state", err);
    if (!cs)
        return ST_ENOMEM;
    *state = cs;
    char name[32];
    snprintf(name, sizeof name, "%d.crop_at", base->index);
    return st_arena_reserve(s->arena, name, (size_t)s->n * 3 * sizeof(int), &cs->where_off,
                            err);
}

static st_status crop_forward(const st_layer *base, void *state, const st_pass *p,
                              st_error *err)
{
    (void)err;
    const crop_layer *l = (const crop_layer *)base;
    st_shape in = base->in, out = base->out;
    int *where = st_arena_at(p->arena, ((crop_state *)state)->where_off);
    float scale = l->noadjust ? 1.0f : 2.0f, shift = l->noadjust ? 0.0f : -1.0f;
    for (int n = 0; n < p->n; n++) {
        int *at = where + 3 * n;
        at[0] = (in.h - out.h) / 2;
        at[1] = (in.w - out.w) / 2;
        at[2] = 0;
        if (p->training) {
            st_rng rng;
            uint64_t key = st_rng_mix(st_rng_mix((uint64_t)base->index, (uint64_t)p->iteration),
                                      (uint64_t)(p->sample0 + n));
            st_rng_seed(&rng, p->seed, key);
            at[0] = (int)st_rng_below(&rng, (uint64_t)(in.h - out.h + 1));
            at[1] = (int)st_rng_below(&rng, (uint64_t)(in.w - out.w + 1));
            at[2] = l->flip && (st_rng_u64(&rng) & 1);
        }
        const float *x = p->src[0] + (size_t)n * st_shape_count(in);
        float *y = p->dst + (size_t)n * st_shape_count(out);
        for (int c = 0; c < out.c; c++)
            for (int i = 0; i < out.h; i++)
                for (int j = 0; j < out.w; j++) {
                    int col = at[2] ? at[1] + out.w - 1 - j : at[1] + j;
                    float v = x[((size_t)c * in.h + (size_t)(at[0] + i)) * in.w + (size_t)col];
                    y[((size_t)c * out.h + (size_t)i) * out.w + (size_t)j] = v * scale + shift;
                }
    }
    return ST_OK;
}

static st_status crop_backward(const st_layer *base, void *state, const st_pass *p,
                               st_error *err)
{
    (void)err;
    const crop_layer *l = (const crop_layer *)base;
    if (!p->diff_src[0])
        return ST_OK;
    st_shape in = base->in, out = base->out;
    const int *where = st_arena_at(p->arena, ((crop_state *)state)->where_off);
    float scale = l->noadjust ? 1.0f : 2.0f;
    for (int n = 0; n < p->n; n++) {
        const int *at = where + 3 * n;
        float *dx = p->diff_src[0] + (size_t)n * st_shape_count(in);
        const float *dy = p->diff_dst + (size_t)n * st_shape_count(out);
        if (!p->accumulate[0])
            for (size_t i = 0; i < st_shape_count(in); i++)
                dx[i] = 0.0f;
        for (int c = 0; c < out.c; c++)
            for (int i = 0; i < out.h; i++)
                for (int j = 0; j < out.w; j++) {
                    int col = at[2] ? at[1] + out.w - 1 - j : at[1] + j;
                    dx[((size_t)c * in.h + (size_t)(at[0] + i)) * in.w + (size_t)col] +=
                        scale * dy[((size_t)c * out.h + (size_t)i) * out.w + (size_t)j];
                }
    }
    return ST_OK;
}

static void crop_release(void *state)
{
    free(state);
}

static void crop_describe(const st_layer *base, char *buf, size_t size)
{
    snprintf(buf, size, "Crop Layer: %d x %d -> %d x %d x %d image", base->in.h, base->in.w,
             base->out.h, base->out.w, base->out.c);
}

const st_layer_ops st_crop_ops = {
    .type = "crop",
    .size = sizeof(crop_layer),
    .host_streams = st_layer_host_copy, /* a copy each way */
    .plain_input = 1,
    .ignored_keys = crop_ignored,
    .build = crop_build,
    .setup = crop_setup,
    .forward = crop_forward,
    .backward = crop_backward,
    .release = crop_release,
    .describe = crop_describe,
    /* a random crop and mirror per sample in training, a scaling */
    .no_graph = "no ONNX op does what it does in singletrain",
};
