/* The `cpe` backend's accounting (cpe_backend_internal.h): a unit of
 * work's predicted time per pass, charged launch by launch during training
 * and closed at each iteration's end into its trials and its steady state;
 * where a trial's time went (its split into parts, the dominant one); and
 * the names the report and the CSV give the passes, the convolution
 * strategies and the parts. Below the kernels, the layouts, the report and
 * cpe_backend.c's dispatch, which all charge or read it, so that the
 * backend's files call one way. */
#include <string.h>

#include "cpe_backend_internal.h"

const char *const cpe_conv_strategy_names[CONV_STRATEGIES] = {"explicit", "implicit"};
const char *const cpe_pass_names[PASSES] = {"fwd", "bwd_data", "bwd_weights"};

double cpe_account_seconds(const cpe_account *a)
{
    return a->cpe.time.total_s + a->mpe_s;
}

const char *const cpe_part_names[CPE_PARTS] = {"compute", "DMA", "register communication",
                                               "barriers", "launches", "MPE", "layout"};

cpe_split cpe_split_between(const cpe_account *before, const cpe_account *after, double layout)
{
    const st_cpe_time *a = &after->cpe.time, *b = &before->cpe.time;
    cpe_split split = {{a->compute_s - b->compute_s, a->dma_s - b->dma_s,
                        a->regcomm_s - b->regcomm_s, a->sync_s - b->sync_s,
                        a->launch_s - b->launch_s, after->mpe_s - before->mpe_s, layout}};
    return split;
}

cpe_part cpe_split_dominant(const cpe_split *split, double *share)
{
    cpe_part top = CPE_PART_COMPUTE;
    double sum = 0.0;
    for (int p = 0; p < CPE_PARTS; p++) {
        sum += split->s[p];
        if (split->s[p] > split->s[top])
            top = (cpe_part)p;
    }
    *share = sum > 0.0 ? split->s[top] / sum : 0.0;
    return top;
}

static void account_add(cpe_account *dst, const cpe_account *src)
{
    st_cpe_counters_add(&dst->cpe, &src->cpe);
    dst->mpe_s += src->mpe_s;
}

st_status cpe_charge(cpe_work *w, int pass, const st_cpe_counters *c, int training, st_status st)
{
    if (st == ST_OK && training)
        st_cpe_counters_add(&w->now[pass].cpe, c);
    return st;
}

void cpe_work_close(cpe_work *w, long iteration)
{
    for (int p = 0; p < PASSES; p++) {
        account_add(iteration < CONV_TRIALS ? &w->trials[p] : &w->steady[p], &w->now[p]);
        memset(&w->now[p], 0, sizeof w->now[p]);
    }
}
