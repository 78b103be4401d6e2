/* Reference max and average pooling. Positions outside the input are
 * skipped: max over the valid ones (the argmax kept in the workspace for
 * backward), average over the valid ones. */
#include <float.h>
#include <stdlib.h>
#include <string.h>

#include "ref_internal.h"

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
    const st_pool_desc *d = &((const ref_kernel *)k)->d.pool;
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
    const st_pool_desc *d = &((const ref_kernel *)k)->d.pool;
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

/* Max pooling keeps its argmax from forward for backward. */
static void pool_setup(ref_kernel *k)
{
    const st_pool_desc *d = &k->d.pool;
    if (d->alg == ST_POOL_MAX)
        k->base.workspace_bytes = (size_t)d->base.n * d->c * d->oh * d->ow * sizeof(int);
}

const ref_kind ref_kind_pool = {
    {pool_forward, pool_backward_data, NULL, ref_kernel_free}, pool_setup};
