/* Reference across-channel LRN (Caffe's definition, see backend.h). The
 * forward keeps scale = k + alpha/size * sum x^2 in the workspace:
 *   dx_c = dy_c * scale_c^-beta
 *          - 2 alpha beta / size * x_c * sum_{j: c in window(j)} dy_j y_j / scale_j */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ref_internal.h"

static st_status lrn_forward(st_kernel *k, const st_kargs *a, st_error *err)
{
    (void)err;
    const st_lrn_desc *d = &((const ref_kernel *)k)->d.lrn;
    long S = (long)d->h * d->w, CS = (long)d->c * S;
    int pre = (d->size - 1) / 2;
    float *scale = a->workspace; /* [n, c, h, w] */
    for (int n = 0; n < a->n; n++)
        for (int c = 0; c < d->c; c++) {
            int lo = c - pre < 0 ? 0 : c - pre;
            int hi = c - pre + d->size - 1 >= d->c ? d->c - 1 : c - pre + d->size - 1;
            for (long i = 0; i < S; i++) {
                float s = 0.0f;
                for (int j = lo; j <= hi; j++) {
                    float x = a->src[n * CS + j * S + i];
                    s += x * x;
                }
                long at = n * CS + c * S + i;
                scale[at] = d->k + d->alpha / (float)d->size * s;
                a->dst[at] = a->src[at] * powf(scale[at], -d->beta);
            }
        }
    return ST_OK;
}

static st_status lrn_backward_data(st_kernel *k, const st_kargs *a, st_error *err)
{
    (void)err;
    const st_lrn_desc *d = &((const ref_kernel *)k)->d.lrn;
    long S = (long)d->h * d->w, CS = (long)d->c * S;
    int pre = (d->size - 1) / 2;
    const float *scale = a->workspace;
    float coef = 2.0f * d->alpha * d->beta / (float)d->size;
    for (int n = 0; n < a->n; n++)
        for (int c = 0; c < d->c; c++) {
            /* channels j whose window [j - pre, j - pre + size - 1] holds c */
            int lo = c - d->size + 1 + pre < 0 ? 0 : c - d->size + 1 + pre;
            int hi = c + pre >= d->c ? d->c - 1 : c + pre;
            for (long i = 0; i < S; i++) {
                long at = n * CS + c * S + i;
                float s = 0.0f;
                for (int j = lo; j <= hi; j++) {
                    long jt = n * CS + j * S + i;
                    s += a->diff_dst[jt] * a->dst[jt] / scale[jt];
                }
                float dx = a->diff_dst[at] * powf(scale[at], -d->beta) - coef * a->src[at] * s;
                a->diff_src[at] = a->accumulate ? a->diff_src[at] + dx : dx;
            }
        }
    return ST_OK;
}

/* The scale term, kept from forward for backward. */
static void lrn_setup(ref_kernel *k)
{
    const st_lrn_desc *d = &k->d.lrn;
    k->base.workspace_bytes = (size_t)d->base.n * d->c * d->h * d->w * sizeof(float);
}

const ref_kind ref_kind_lrn = {{lrn_forward, lrn_backward_data, NULL, ref_kernel_free}, lrn_setup};
