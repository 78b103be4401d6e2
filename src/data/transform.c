/* Records to network inputs: crop (from the record framed by crop_pad
 * zeros, as torchvision's RandomCrop with padding), mirror, mean and scale
 * (Caffe's transform_param); see data.h. */
#include <string.h>

#include "data/data.h"
#include "base/rng.h"

st_status st_transform_check(const st_transform *t, const st_source *s, const char *net_where,
                             st_error *err)
{
    st_shape a = s->shape, b = t->input;
    if (a.c == b.c && a.h == b.h && a.w == b.w)
        return ST_OK;
    if (a.c == b.c && t->crop && a.h + 2 * t->crop_pad >= b.h && a.w + 2 * t->crop_pad >= b.w)
        return ST_OK;
    return st_fail(err, ST_EINPUT, "%s: records are %d x %d x %d but %s expects width x height "
                   "x channels %d x %d x %d%s", s->name, a.w, a.h, a.c, net_where, b.w, b.h, b.c,
                   a.c == b.c && a.h >= b.h && a.w >= b.w
                       ? "; crop=1 in [net] would cut inputs from them"
                       : "");
}

/* x [C, H, W] from the window at (dy, dx) of the record framed by pad
 * pixels of 0 on each side (dy, dx in the framed record's coordinates). */
static void transform_framed(const st_transform *t, st_shape stored, const unsigned char *pixels,
                             float *x, int pad, int dy, int dx, int flip)
{
    st_shape in = t->input;
    for (int c = 0; c < in.c; c++) {
        float mean = t->mean[c < ST_MAX_CHANNELS ? c : 0], scale = t->scale;
        for (int y = 0; y < in.h; y++) {
            int sy = y + dy - pad;
            float *out = x + ((size_t)c * in.h + y) * in.w;
            for (int i = 0; i < in.w; i++) {
                int sx = (flip ? in.w - 1 - i : i) + dx - pad;
                unsigned char v = sy >= 0 && sy < stored.h && sx >= 0 && sx < stored.w
                                      ? pixels[((size_t)c * stored.h + (size_t)sy) * stored.w +
                                               (size_t)sx]
                                      : 0;
                out[i] = ((float)v - mean) * scale;
            }
        }
    }
}

void st_transform_apply(const st_transform *t, st_shape stored, const unsigned char *pixels,
                        float *x, int training, long sample)
{
    st_shape in = t->input;
    int pad = t->crop ? t->crop_pad : 0;
    int dy = (stored.h + 2 * pad - in.h) / 2, dx = (stored.w + 2 * pad - in.w) / 2, flip = 0;
    if (training && ((t->crop && (stored.h + 2 * pad > in.h || stored.w + 2 * pad > in.w)) ||
                     t->mirror)) {
        st_rng rng;
        st_rng_seed(&rng, t->seed, 0x5000000000ull + (uint64_t)sample);
        if (t->crop) {
            dy = (int)st_rng_below(&rng, (uint64_t)(stored.h + 2 * pad - in.h + 1));
            dx = (int)st_rng_below(&rng, (uint64_t)(stored.w + 2 * pad - in.w + 1));
        }
        flip = t->mirror && (st_rng_u64(&rng) & 1);
    }
    if (pad) {
        transform_framed(t, stored, pixels, x, pad, dy, dx, flip);
        return;
    }
    for (int c = 0; c < in.c; c++) {
        float mean = t->mean[c < ST_MAX_CHANNELS ? c : 0], scale = t->scale;
        for (int y = 0; y < in.h; y++) {
            const unsigned char *row =
                pixels + ((size_t)c * stored.h + (size_t)(y + dy)) * stored.w + dx;
            float *out = x + ((size_t)c * in.h + y) * in.w;
            if (flip)
                for (int i = 0; i < in.w; i++)
                    out[i] = ((float)row[in.w - 1 - i] - mean) * scale;
            else
                for (int i = 0; i < in.w; i++)
                    out[i] = ((float)row[i] - mean) * scale;
        }
    }
}
