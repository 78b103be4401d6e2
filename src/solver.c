/* Learning-rate policies and the per-slice parameter update; see solver.h. */
#include "solver.h"

#include <math.h>

const char *const st_lr_policy_names[] = {"constant", "step", "steps", "exp", "poly", "inv",
                                          NULL};

float st_lr_at(const st_lr_schedule *s, long iter)
{
    if (iter < s->burn_in)
        return s->learning_rate * powf((float)iter / (float)s->burn_in, s->power);
    switch (s->policy) {
    case ST_LR_CONSTANT:
        return s->learning_rate;
    case ST_LR_STEP:
        return s->learning_rate * powf(s->scale, (float)(iter / s->step));
    case ST_LR_STEPS: {
        float rate = s->learning_rate;
        for (int i = 0; i < s->n_steps && s->steps[i] <= iter; i++)
            rate *= s->scales[i];
        return rate;
    }
    case ST_LR_EXP:
        return s->learning_rate * powf(s->gamma, (float)iter);
    case ST_LR_POLY: {
        float left = s->max_batches > 0 ? 1.0f - (float)iter / (float)s->max_batches : 1.0f;
        return s->learning_rate * powf(left > 0.0f ? left : 0.0f, s->power);
    }
    case ST_LR_INV:
        return s->learning_rate * powf(1.0f + s->gamma * (float)iter, -s->power);
    }
    return s->learning_rate;
}

int st_solver_state_per_param(const st_solver_cfg *c)
{
    (void)c;
    return 1;
}

#define BN_RUNNING_MOMENTUM 0.99f

static void sgd_range(const st_solver_cfg *c, float lr, float decay, float *w, float *m,
                      const float *g, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        m[i] = c->momentum * m[i] + (g[i] + decay * w[i]);
        w[i] -= lr * m[i];
    }
}

void st_solver_update(const st_solver_cfg *c, const st_param_table *t, float lr, size_t begin,
                      size_t end, float *w, float *state, const float *g)
{
    for (int i = 0; i < t->n; i++) {
        const st_param *p = &t->p[i];
        size_t b = p->offset > begin ? p->offset : begin;
        size_t e = p->offset + p->count < end ? p->offset + p->count : end;
        if (b >= e)
            continue;
        size_t n = e - b;
        switch (p->kind) {
        case ST_PARAM_WEIGHT:
            sgd_range(c, lr, c->decay, w + b, state + b, g + b, n);
            break;
        case ST_PARAM_BIAS:
            sgd_range(c, lr, 0.0f, w + b, state + b, g + b, n);
            break;
        case ST_PARAM_STAT:
            for (size_t j = b; j < e; j++)
                w[j] = BN_RUNNING_MOMENTUM * w[j] + (1.0f - BN_RUNNING_MOMENTUM) * g[j];
            break;
        }
    }
}
