/* Reference max and average pooling. Positions outside the input are
 * skipped: max over the valid ones (the argmax kept in the workspace for
 * backward), average over the valid ones. */
#include <float.h>
#include <stdlib.h>
#include <string.h>

#include "ref_internal.h"

typedef struct ref_pool {
    st_kernel base;
    st_pool_desc d;
} ref_pool;

/* Valid window rows [*y0, *y1) and columns [*x0, *x1) of output (oy, ox). */
static void window(const st_pool_desc *d, int oy, int ox, int *y0, int *y1, int *x0, int *x1)
{
    int ys = oy * d->sh - d->ph, xs = ox * d->sw - d->pw;
    *y0 = ys < 0 ? 0 : ys;
    *x0 = xs < 0 ? 0 : xs;
    *y1 = ys + d->kh > d->ih ? d->ih : ys + d->kh;
    *x1 = xs + d->kw > d->iw ? d->iw : xs + d->kw;
}

static st_status pool_forward(st_kernel *k, const st_kargs *a, st_error *err)
{
    (void)err;
    const st_pool_desc *d = &((const ref_pool *)k)->d;
    int *argmax = a->workspace; /* [n, c, oh, ow]: input offset within the plane */
    long planes = (long)a->n * d->c;
    for (long pl = 0; pl < planes; pl++) {
        const float *x = a->src + pl * d->ih * d->iw;
        float *y = a->dst + pl * d->oh * d->ow;
        for (int oy = 0; oy < d->oh; oy++)
            for (int ox = 0; ox < d->ow; ox++) {
                int y0, y1, x0, x1;
                window(d, oy, ox, &y0, &y1, &x0, &x1);
                long o = (long)oy * d->ow + ox;
                if (d->alg == ST_POOL_MAX) {
                    float best = -FLT_MAX;
                    int at = -1;
                    for (int iy = y0; iy < y1; iy++)
                        for (int ix = x0; ix < x1; ix++)
                            if (at < 0 || x[iy * d->iw + ix] > best) {
                                best = x[iy * d->iw + ix];
                                at = iy * d->iw + ix;
                            }
                    y[o] = at < 0 ? 0.0f : best;
                    if (argmax)
                        argmax[pl * d->oh * d->ow + o] = at;
                } else {
                    float s = 0.0f;
                    for (int iy = y0; iy < y1; iy++)
                        for (int ix = x0; ix < x1; ix++)
                            s += x[iy * d->iw + ix];
                    int cnt = (y1 - y0) * (x1 - x0);
                    y[o] = cnt > 0 ? s / (float)cnt : 0.0f;
                }
            }
    }
    return ST_OK;
}

static st_status pool_backward_data(st_kernel *k, const st_kargs *a, st_error *err)
{
    (void)err;
    const st_pool_desc *d = &((const ref_pool *)k)->d;
    const int *argmax = a->workspace;
    long planes = (long)a->n * d->c;
    if (!a->accumulate)
        memset(a->diff_src, 0, (size_t)(planes * d->ih * d->iw) * sizeof(float));
    for (long pl = 0; pl < planes; pl++) {
        float *dx = a->diff_src + pl * d->ih * d->iw;
        const float *dy = a->diff_dst + pl * d->oh * d->ow;
        for (int oy = 0; oy < d->oh; oy++)
            for (int ox = 0; ox < d->ow; ox++) {
                long o = (long)oy * d->ow + ox;
                if (d->alg == ST_POOL_MAX) {
                    int at = argmax[pl * d->oh * d->ow + o];
                    if (at >= 0)
                        dx[at] += dy[o];
                    continue;
                }
                int y0, y1, x0, x1;
                window(d, oy, ox, &y0, &y1, &x0, &x1);
                int cnt = (y1 - y0) * (x1 - x0);
                if (cnt <= 0)
                    continue;
                float g = dy[o] / (float)cnt;
                for (int iy = y0; iy < y1; iy++)
                    for (int ix = x0; ix < x1; ix++)
                        dx[iy * d->iw + ix] += g;
            }
    }
    return ST_OK;
}

static const st_kernel_ops ref_pool_ops = {
    .forward = pool_forward,
    .backward_data = pool_backward_data,
    .backward_weights = NULL,
    .destroy = ref_kernel_free,
};

st_status ref_pool_create(const st_pool_desc *d, st_kernel **k, st_error *err)
{
    ref_pool *p = ref_kernel_new(sizeof *p, &ref_pool_ops, &d->base, err);
    if (!p)
        return ST_ENOMEM;
    p->d = *d;
    if (d->alg == ST_POOL_MAX)
        p->base.workspace_bytes = (size_t)d->base.n * d->c * d->oh * d->ow * sizeof(int);
    *k = &p->base;
    return ST_OK;
}
