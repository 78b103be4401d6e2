/* Learning-rate policies and the per-slice parameter update; see solver.h. */
#include "ops/solver.h"

#include <math.h>

const char *const st_lr_policy_names[] = {"constant", "step", "steps", "exp", "poly", "inv",
                                          NULL};

const st_solver_rule_info st_solver_rules[ST_SOLVER_RULE_COUNT] = {
#define ST_SOLVER_INFO(e, name, planes, flops, keys, whose) {name, planes, flops, keys, whose},
    ST_SOLVER_RULES(ST_SOLVER_INFO)
#undef ST_SOLVER_INFO
};

const char *const st_solver_rule_names[] = {
#define ST_SOLVER_NAME(e, name, planes, flops, keys, whose) name,
    ST_SOLVER_RULES(ST_SOLVER_NAME)
#undef ST_SOLVER_NAME
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
    return (unsigned)c->rule < ST_SOLVER_RULE_COUNT ? st_solver_rules[c->rule].planes : 1;
}

/* The rules on one tensor's range of n floats: weights w, gradient g, state
 * planes s0 (and s1); decay is 0 for tensors without weight decay. The SGD
 * expression is Darknet's, kept as it is so results stay bit for bit. */

static void sgd_range(const st_solver_cfg *c, float lr, float decay, float *w, float *m,
                      const float *g, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        m[i] = c->momentum * m[i] + (g[i] + decay * w[i]);
        w[i] -= lr * m[i];
    }
}

static void nesterov_range(const st_solver_cfg *c, float lr, float decay, float *w, float *v,
                           const float *g, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        float gd = g[i] + decay * w[i];
        float v_prev = v[i];
        v[i] = c->momentum * v[i] + lr * gd;
        w[i] -= (1.0f + c->momentum) * v[i] - c->momentum * v_prev;
    }
}

static void adagrad_range(const st_solver_cfg *c, float lr, float decay, float *w, float *h,
                          const float *g, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        float gd = g[i] + decay * w[i];
        h[i] += gd * gd;
        w[i] -= lr * gd / (sqrtf(h[i]) + c->delta);
    }
}

static void rmsprop_range(const st_solver_cfg *c, float lr, float decay, float *w, float *h,
                          const float *g, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        float gd = g[i] + decay * w[i];
        h[i] = c->rms_decay * h[i] + (1.0f - c->rms_decay) * gd * gd;
        w[i] -= lr * gd / (sqrtf(h[i]) + c->delta);
    }
}

/* h: running mean of gd^2, h2: running mean of u^2. One square root of the
 * ratio, as Caffe computes it, rather than a ratio of two. */
static void adadelta_range(const st_solver_cfg *c, float lr, float decay, float *w, float *h,
                           float *h2, const float *g, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        float gd = g[i] + decay * w[i];
        h[i] = c->momentum * h[i] + (1.0f - c->momentum) * gd * gd;
        float u = gd * sqrtf((h2[i] + c->delta) / (h[i] + c->delta));
        h2[i] = c->momentum * h2[i] + (1.0f - c->momentum) * u * u;
        w[i] -= lr * u;
    }
}

/* step: lr with the bias correction of iteration t already applied. */
static void adam_range(const st_solver_cfg *c, float step, float decay, float *w, float *m,
                       float *v, const float *g, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        float gd = g[i] + decay * w[i];
        m[i] = c->beta1 * m[i] + (1.0f - c->beta1) * gd;
        v[i] = c->beta2 * v[i] + (1.0f - c->beta2) * gd * gd;
        w[i] -= step * m[i] / (sqrtf(v[i]) + c->eps);
    }
}

/* Adam's lr * sqrt(1 - B2^t) / (1 - B1^t), t = iter + 1, in double: the
 * same value for every slice, and accurate while B^t is close to 1. */
static float adam_step(const st_solver_cfg *c, float lr, long iter)
{
    double t = (double)iter + 1.0;
    double correction = sqrt(1.0 - pow((double)c->beta2, t)) / (1.0 - pow((double)c->beta1, t));
    return (float)((double)lr * correction);
}

void st_solver_update(const st_solver_cfg *c, const st_param_table *t, float lr, long iter,
                      size_t begin, size_t end, float *w, float *state, size_t stride,
                      const float *g)
{
    st_solver_update_at(c, t, lr, iter, begin, end, w, state + begin, stride, g);
}

/* The update of [begin, end): plane k of arena float j at
 * state[k * stride + j - begin], its gradient at g[j - g_base]. */
static void update_range(const st_solver_cfg *c, const st_param_table *t, float lr, long iter,
                         size_t begin, size_t end, float *w, float *state, size_t stride,
                         const float *g, size_t g_base)
{
    float rate = c->rule == ST_SOLVER_ADAM ? adam_step(c, lr, iter) : lr;
    for (int i = 0; i < t->n; i++) {
        const st_param *p = &t->p[i];
        size_t b = p->offset > begin ? p->offset : begin;
        size_t e = p->offset + p->count < end ? p->offset + p->count : end;
        if (b >= e)
            continue;
        size_t n = e - b;
        if (p->kind == ST_PARAM_STAT) {
            float keep = p->keep;
            for (size_t j = b; j < e; j++)
                w[j] = keep * w[j] + (1.0f - keep) * g[j - g_base];
            continue;
        }
        float decay = p->kind == ST_PARAM_WEIGHT ? c->decay : 0.0f;
        /* planes 0 and 1 of float b (the second only for the rules that have it) */
        float *s0 = state + (b - begin);
        const float *gb = g + (b - g_base);
        switch (c->rule) {
        case ST_SOLVER_SGD:
            sgd_range(c, rate, decay, w + b, s0, gb, n);
            break;
        case ST_SOLVER_NESTEROV:
            nesterov_range(c, rate, decay, w + b, s0, gb, n);
            break;
        case ST_SOLVER_ADAGRAD:
            adagrad_range(c, rate, decay, w + b, s0, gb, n);
            break;
        case ST_SOLVER_RMSPROP:
            rmsprop_range(c, rate, decay, w + b, s0, gb, n);
            break;
        case ST_SOLVER_ADADELTA:
            adadelta_range(c, rate, decay, w + b, s0, s0 + stride, gb, n);
            break;
        case ST_SOLVER_ADAM:
            adam_range(c, rate, decay, w + b, s0, s0 + stride, gb, n);
            break;
        case ST_SOLVER_RULE_COUNT: /* not a rule: hparams.c reads only the table's */
            break;
        }
    }
}

void st_solver_update_at(const st_solver_cfg *c, const st_param_table *t, float lr, long iter,
                         size_t begin, size_t end, float *w, float *state, size_t stride,
                         const float *g)
{
    update_range(c, t, lr, iter, begin, end, w, state, stride, g, 0);
}

void st_solver_update_given(const st_solver_cfg *c, const st_param_table *t, float lr,
                            long iter, size_t begin, size_t end, float *w, float *state,
                            size_t stride, const float *g)
{
    update_range(c, t, lr, iter, begin, end, w, state + begin, stride, g, begin);
}
