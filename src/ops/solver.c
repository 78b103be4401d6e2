/* Learning-rate policies and the per-slice parameter update; see solver.h. */
#include "ops/solver.h"

#include <math.h>

const char *const st_lr_policy_names[] = {
#define ST_LR_NAME(e, name) name,
    ST_LR_POLICIES(ST_LR_NAME)
#undef ST_LR_NAME
    NULL};

const char *const st_decay_mode_names[] = {
#define ST_DECAY_NAME(e, name) name,
    ST_DECAY_MODES(ST_DECAY_NAME)
#undef ST_DECAY_NAME
    NULL};

const char *const st_eps_mode_names[] = {
#define ST_EPS_NAME(e, name) name,
    ST_EPS_MODES(ST_EPS_NAME)
#undef ST_EPS_NAME
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

/* A cosine from `from` at pct 0 to `to` at pct 1 (PyTorch's
 * _annealing_cos), in double: near the end 1 + cos is a difference of
 * nearly equal numbers, which float would leave with 1e-4 of error. */
static double cos_anneal(double from, double to, double pct)
{
    return to + (from - to) / 2.0 * (cos(M_PI * pct) + 1.0);
}

/* OneCycleLR's two phases over T iterations, held at the end past T - 1.
 * A phase of no length (pct * T <= 1, or T too short for the second)
 * counts as done. */
static double onecycle_at(const st_lr_schedule *s, long t, long T)
{
    double top = s->learning_rate, start = top / s->div_factor,
           end = start / s->final_div_factor;
    double rise_end = (double)s->pct_start * (double)T - 1.0, fall_end = (double)T - 1.0;
    if ((double)t <= rise_end)
        return cos_anneal(start, top, rise_end > 0.0 ? (double)t / rise_end : 1.0);
    double pct = fall_end > rise_end ? ((double)t - rise_end) / (fall_end - rise_end) : 1.0;
    return cos_anneal(top, end, pct < 1.0 ? pct : 1.0);
}

/* The policy at iteration t of a run of T (0: unknown) iterations, in
 * double from the keys' float values: in float, poly's 1 - t / T near the
 * end of the run was 2e-6 off, which PyTorch's schedule is not. */
static double policy_rate(const st_lr_schedule *s, long t, long T)
{
    double lr = s->learning_rate;
    switch (s->policy) {
    case ST_LR_CONSTANT:
        return lr;
    case ST_LR_STEP:
        return lr * pow(s->scale, (double)(t / s->step));
    case ST_LR_STEPS:
        for (int i = 0; i < s->n_steps && s->steps[i] <= t; i++)
            lr *= s->scales[i];
        return lr;
    case ST_LR_EXP:
        return lr * pow(s->gamma, (double)t);
    case ST_LR_POLY: {
        double left = T > 0 ? 1.0 - (double)t / (double)T : 1.0;
        return lr * pow(left > 0.0 ? left : 0.0, s->power);
    }
    case ST_LR_INV:
        return lr * pow(1.0 + s->gamma * (double)t, -s->power);
    case ST_LR_COSINE:
        return cos_anneal(lr, s->lr_min, (double)t / (double)(T > 0 ? T : 1));
    case ST_LR_ONECYCLE:
        return onecycle_at(s, t, T > 0 ? T : 1);
    case ST_LR_POLICY_COUNT: /* not a policy: hparams.c reads only the table's */
        break;
    }
    return lr;
}

float st_lr_at(const st_lr_schedule *s, long iter)
{
    if (iter < s->burn_in)
        return (float)(s->learning_rate * pow((double)iter / (double)s->burn_in, s->power));
    if (iter < s->warmup) {
        double f = s->warmup_factor;
        return (float)(s->learning_rate * (f + (1.0 - f) * (double)iter / (double)s->warmup));
    }
    /* after a warm-up, the policy's run is what is left of T (at least 1) */
    long T = s->max_batches;
    if (T > 0 && s->warmup > 0)
        T = T > s->warmup ? T - s->warmup : 1;
    return (float)policy_rate(s, iter - s->warmup, T);
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

/* step: lr with the bias correction of iteration t already applied; eps:
 * what is added to sqrt(v) (adam_eps). */
static void adam_range(const st_solver_cfg *c, float step, float eps, float decay, float *w,
                       float *m, float *v, const float *g, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        float gd = g[i] + decay * w[i];
        m[i] = c->beta1 * m[i] + (1.0f - c->beta1) * gd;
        v[i] = c->beta2 * v[i] + (1.0f - c->beta2) * gd * gd;
        w[i] -= step * m[i] / (sqrtf(v[i]) + eps);
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

/* What Adam adds to sqrt(v) at iteration iter: eps (caffe), or eps times
 * sqrt(1 - B2^t) (torch), so that with adam_step's rate the update is
 * lr * m^ / (sqrt(v^) + eps), t = iter + 1. */
static float adam_eps(const st_solver_cfg *c, long iter)
{
    if (c->eps_mode == ST_EPS_CAFFE)
        return c->eps;
    double t = (double)iter + 1.0;
    return (float)((double)c->eps * sqrt(1.0 - pow((double)c->beta2, t)));
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
    float eps = c->rule == ST_SOLVER_ADAM ? adam_eps(c, iter) : 0.0f;
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
        float decay = p->kind == ST_PARAM_WEIGHT || c->decay_mode == ST_DECAY_TORCH
                          ? c->decay : 0.0f;
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
            adam_range(c, rate, eps, decay, w + b, s0, s0 + stride, gb, n);
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
