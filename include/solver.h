/* Update rules and learning-rate policies, applied to one slice of the
 * parameter arena at a time (see ps.h).
 *
 * SGD with momentum follows Darknet: m = momentum * m + (g + decay * w);
 * w -= lr * m, with g the batch-averaged gradient and decay applied to
 * weights only (not to biases or batch-norm scales). Running batch-norm
 * statistics are not learned: running = 0.99 running + 0.01 batch average. */
#ifndef ST_SOLVER_H
#define ST_SOLVER_H

#include <stddef.h>

#include "params.h"

#define ST_MAX_STEPS 64

typedef enum st_lr_policy {
    ST_LR_CONSTANT, /* lr */
    ST_LR_STEP,     /* lr * scale^(iter / step) */
    ST_LR_STEPS,    /* lr * product of scales[i] for steps[i] <= iter */
    ST_LR_EXP,      /* lr * gamma^iter */
    ST_LR_POLY,     /* lr * (1 - iter / max_batches)^power */
    ST_LR_INV,      /* lr * (1 + gamma * iter)^-power (Caffe) */
} st_lr_policy;

extern const char *const st_lr_policy_names[]; /* cfg names, NULL-terminated */

typedef struct st_lr_schedule {
    float learning_rate;
    st_lr_policy policy;
    float gamma, power, scale;
    int step;
    int n_steps;
    int steps[ST_MAX_STEPS];
    float scales[ST_MAX_STEPS];
    int burn_in;       /* iterations ramping up as (iter / burn_in)^power */
    long max_batches;  /* for poly */
} st_lr_schedule;

typedef struct st_solver_cfg {
    st_lr_schedule lr;
    float momentum;
    float decay;
} st_solver_cfg;

/* Learning rate of iteration iter (from 0), Darknet's get_current_rate. */
float st_lr_at(const st_lr_schedule *s, long iter);

/* Floats of solver state per parameter float (momentum: 1). */
int st_solver_state_per_param(const st_solver_cfg *c);

/* Apply one update to arena floats [begin, end) of the parameters in t:
 * weights w, solver state, and g the batch-averaged gradient. */
void st_solver_update(const st_solver_cfg *c, const st_param_table *t, float lr, size_t begin,
                      size_t end, float *w, float *state, const float *g);

#endif
