/* Reference batch normalization per channel over N x H x W (the standard
 * definition, as oneDNN: biased batch variance, eps inside the square root),
 * with the exact gradient of that forward. Accumulation in double. */
#include <math.h>
#include <stdlib.h>

#include "ref_internal.h"

static st_status bnorm_forward(st_kernel *k, const st_kargs *a, st_error *err)
{
    (void)err;
    const st_bnorm_desc *d = &((const ref_kernel *)k)->d.bnorm;
    long S = (long)d->h * d->w, CS = (long)d->c * S;
    double m = (double)a->n * S;
    for (int c = 0; c < d->c; c++) {
        if (a->training) {
            double s = 0.0, ss = 0.0;
            for (int n = 0; n < a->n; n++)
                for (long i = 0; i < S; i++)
                    s += a->src[n * CS + c * S + i];
            double mean = s / m;
            for (int n = 0; n < a->n; n++)
                for (long i = 0; i < S; i++) {
                    double t = a->src[n * CS + c * S + i] - mean;
                    ss += t * t;
                }
            a->mean[c] = (float)mean;
            a->var[c] = (float)(ss / m);
        }
        float inv = 1.0f / sqrtf(a->var[c] + d->eps);
        float scale = a->weights[c] * inv, shift = a->bias[c] - a->mean[c] * scale;
        for (int n = 0; n < a->n; n++)
            for (long i = 0; i < S; i++)
                a->dst[n * CS + c * S + i] = a->src[n * CS + c * S + i] * scale + shift;
    }
    for (int n = 0; n < a->n; n++)
        st_act_forward(d->act, a->dst + n * CS, (size_t)CS);
    return ST_OK;
}

/* Data, scale and shift gradients in one pass (see backend.h). */
static st_status bnorm_backward(st_kernel *k, const st_kargs *a, st_error *err)
{
    (void)err;
    const st_bnorm_desc *d = &((const ref_kernel *)k)->d.bnorm;
    long S = (long)d->h * d->w, CS = (long)d->c * S;
    double m = (double)a->n * S;
    for (int c = 0; c < d->c; c++) {
        double inv = 1.0 / sqrt((double)a->var[c] + d->eps), mean = a->mean[c];
        double dbeta = 0.0, dgamma = 0.0;
        for (int n = 0; n < a->n; n++)
            for (long i = 0; i < S; i++) {
                double dy = a->diff_dst[n * CS + c * S + i];
                dbeta += dy;
                dgamma += dy * (a->src[n * CS + c * S + i] - mean) * inv;
            }
        if (a->diff_weights)
            a->diff_weights[c] = (float)dgamma;
        if (a->diff_bias)
            a->diff_bias[c] = (float)dbeta;
        if (!a->diff_src)
            continue;
        double g = a->weights[c] * inv;
        for (int n = 0; n < a->n; n++)
            for (long i = 0; i < S; i++) {
                long at = n * CS + c * S + i;
                double dy = a->diff_dst[at], dx;
                if (a->training) {
                    double xhat = (a->src[at] - mean) * inv;
                    dx = g * (dy - dbeta / m - xhat * dgamma / m);
                } else {
                    dx = g * dy;
                }
                a->diff_src[at] = (float)(a->accumulate ? a->diff_src[at] + dx : dx);
            }
    }
    return ST_OK;
}

const ref_kind ref_kind_bnorm = {{bnorm_forward, bnorm_backward, NULL, ref_kernel_free}, NULL};
