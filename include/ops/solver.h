/* Update rules and learning-rate policies, applied to one slice of the
 * parameter arena at a time (see ps.h).
 *
 * Every rule is elementwise, so any split of the arena into slices gives
 * the same result bit for bit. g is the batch-averaged gradient; for
 * ST_PARAM_WEIGHT tensors the rules below see gd = g + decay * w (L2 weight
 * decay), for ST_PARAM_BIAS tensors (biases, batch-norm scales) gd = g
 * (with decay_mode=torch, gd = g + decay * w for them too).
 * State planes start at zero; plane k of a float at arena offset i is
 * state[k * stride + i].
 *
 *   sgd (Darknet; 1 plane m):  m = momentum * m + gd;  w -= lr * m
 *   nesterov (Caffe; 1 plane v):  v_prev = v;  v = momentum * v + lr * gd;
 *                              w -= (1 + momentum) * v - momentum * v_prev
 *   adagrad (Caffe; 1 plane h):  h += gd^2;  w -= lr * gd / (sqrt(h) + delta)
 *   rmsprop (Caffe; 1 plane h):  h = rms_decay * h + (1 - rms_decay) * gd^2;
 *                              w -= lr * gd / (sqrt(h) + delta)
 *   adadelta (Caffe; planes h, h2):  h = momentum * h + (1 - momentum) * gd^2;
 *                              u = gd * sqrt((h2 + delta) / (h + delta));
 *                              h2 = momentum * h2 + (1 - momentum) * u^2;
 *                              w -= lr * u
 *   adam (Caffe's AdamSolver; planes m, v):  m = B1 * m + (1 - B1) * gd;
 *                              v = B2 * v + (1 - B2) * gd^2;
 *                              w -= lr * sqrt(1 - B2^t) / (1 - B1^t)
 *                                      * m / (sqrt(v) + E),  t = iter + 1,
 *                              E = eps (eps_mode=caffe, the default) or
 *                              eps * sqrt(1 - B2^t) (eps_mode=torch: then
 *                              w -= lr * m^ / (sqrt(v^) + eps) with m^ =
 *                              m / (1 - B1^t), v^ = v / (1 - B2^t), as
 *                              torch.optim.Adam, Darknet's adam_gpu and
 *                              Kingma and Ba's Algorithm 1 have it)
 *
 * Running batch-norm statistics (ST_PARAM_STAT) are not learned, whatever
 * the rule: running = keep running + (1 - keep) batch average, keep the
 * tensor's own (st_param.keep: 0.99 unless its layer's bn_momentum= says
 * otherwise). */
#ifndef ST_SOLVER_H
#define ST_SOLVER_H

#include <stddef.h>

#include "ops/params.h"

#define ST_MAX_STEPS 64

/* The learning-rate policies, declared once: X(ENUM, policy= name). What
 * each gives at iteration t (from 0) of a run of T iterations (max_batches=,
 * else the run's length), lr the learning_rate= key, and the PyTorch
 * scheduler it equals step for step (scripts/torch_recipe.py builds it;
 * tests/e2e/test_schedule.sh compares the two):
 *   constant  lr                                     (no scheduler)
 *   step      lr * scale^(t / step)                  StepLR(step, gamma=scale)
 *   steps     lr * product of scales[i], steps[i] <= t
 *                                                    MultiStepLR(steps, gamma) when
 *                                                    every scale is gamma
 *   exp       lr * gamma^t                           ExponentialLR(gamma)
 *   poly      lr * (1 - t / T)^power, 0 past T       PolynomialLR(T, power)
 *   inv       lr * (1 + gamma * t)^-power (Caffe)    (LambdaLR)
 *   cosine    lr_min + (lr - lr_min) (1 + cos(pi t / T)) / 2
 *                                                    CosineAnnealingLR(T, eta_min=lr_min)
 *   onecycle  from lr / div up to lr at t = pct T - 1, then down to
 *             lr / div / final_div at t = T - 1, each half a cosine; held
 *             past T - 1                             OneCycleLR(lr, T, pct_start=pct,
 *                                                    div_factor=div, final_div_factor=
 *                                                    final_div, cycle_momentum=False)
 * Adding one: its row here, its case in solver.c's policy_rate (the
 * compiler names a missing one), its PyTorch twin in
 * scripts/torch_recipe.py, a recipe in tests/e2e/test_schedule.sh; a new
 * key also in st_lr_schedule, read in net/hparams.c's read_schedule and
 * compared between ranks in train/fingerprint.c. Four files, six with a
 * new key. */
#define ST_LR_POLICIES(X)                                                          \
    X(CONSTANT, "constant")                                                        \
    X(STEP, "step")                                                                \
    X(STEPS, "steps")                                                              \
    X(EXP, "exp")                                                                  \
    X(POLY, "poly")                                                                \
    X(INV, "inv")                                                                  \
    X(COSINE, "cosine")                                                            \
    X(ONECYCLE, "onecycle")

typedef enum st_lr_policy {
#define ST_LR_ENUM(e, name) ST_LR_##e,
    ST_LR_POLICIES(ST_LR_ENUM)
#undef ST_LR_ENUM
    ST_LR_POLICY_COUNT
} st_lr_policy;

extern const char *const st_lr_policy_names[]; /* cfg names, NULL-terminated */

/* The schedule of a run. Before the policy, one of two ramps (never both):
 * Darknet's burn_in= (t < burn_in: lr * (t / burn_in)^power, then the
 * policy at t, as if there had been none) or warmup= (t < warmup: lr *
 * (warmup_factor + (1 - warmup_factor) t / warmup), then the policy at
 * t - warmup over T - warmup iterations: PyTorch's
 * SequentialLR([LinearLR(start_factor=warmup_factor, total_iters=warmup),
 * POLICY], milestones=[warmup]), as torchvision's recipes use it). */
typedef struct st_lr_schedule {
    float learning_rate;
    st_lr_policy policy;
    float gamma, power, scale;
    int step;
    int n_steps;
    int steps[ST_MAX_STEPS];
    float scales[ST_MAX_STEPS];
    int burn_in;         /* iterations ramping up as (iter / burn_in)^power */
    int warmup;          /* iterations ramping up linearly, the policy after */
    float warmup_factor; /* the warm-up's first multiplier, in (0, 1] */
    float lr_min;        /* cosine: learning_rate_min= (eta_min) */
    float pct_start;     /* onecycle: the rising part of the cycle, in (0, 1) */
    float div_factor;    /* onecycle: lr / div_factor at the start */
    float final_div_factor; /* onecycle: lr / div_factor / final_div_factor at the end */
    long max_batches;    /* T: for poly, cosine and onecycle */
} st_lr_schedule;

/* The update rules, declared once: X(ENUM, solver= name, state planes,
 * flops per parameter of the update (the CPE kernel's count: the cpe
 * backend costs its update with it), the [net] keys it reads beyond
 * momentum= and decay=, whose those keys are in warnings).
 *
 * Adding a rule: its row here and its update in solver.c (a *_range
 * function and its case in update_range's switch, which the compiler names
 * when it lacks one); the cpe backend's update kernel
 * (cpe/kernels/stream.c) runs solver.c's arithmetic and costs it with the
 * row's flops; a new key is read in net/hparams.c's read_solver and
 * compared between ranks in train/fingerprint.c. Two files, four with a
 * new key. */
#define ST_SOLVER_RULES(X)                                                          \
    X(SGD, "sgd", 1, 6, "", "")                                                     \
    X(NESTEROV, "nesterov", 1, 10, "", "")                                          \
    X(ADAGRAD, "adagrad", 1, 9, "delta", "AdaGrad's")                               \
    X(RMSPROP, "rmsprop", 1, 12, "rms_decay delta", "RMSProp's")                    \
    X(ADADELTA, "adadelta", 2, 19, "delta", "AdaDelta's")                           \
    X(ADAM, "adam", 2, 16, "B1 B2 eps eps_mode", "Adam's")

typedef enum st_solver_rule {
#define ST_SOLVER_ENUM(e, name, planes, flops, keys, whose) ST_SOLVER_##e,
    ST_SOLVER_RULES(ST_SOLVER_ENUM)
#undef ST_SOLVER_ENUM
    ST_SOLVER_RULE_COUNT
} st_solver_rule;

/* A rule's row of ST_SOLVER_RULES, indexed by st_solver_rule. */
typedef struct st_solver_rule_info {
    const char *name;
    int planes;
    int flops;       /* per parameter of the update */
    const char *keys;  /* space-separated [net] keys it reads */
    const char *whose; /* "Adam's": the keys' owner in messages */
} st_solver_rule_info;

extern const st_solver_rule_info st_solver_rules[ST_SOLVER_RULE_COUNT];
extern const char *const st_solver_rule_names[]; /* cfg names, NULL-terminated */

/* Which tensors weight decay applies to (decay_mode=). The arithmetic is
 * the same in both: gd = g + decay * w before the rule (for sgd, before
 * momentum: m = momentum * m + gd; w -= lr * m, torch.optim.SGD's with
 * dampening 0). darknet: ST_PARAM_WEIGHT tensors alone (convolution and
 * connected weights; Darknet and Caffe's usual decay_mult 0 on biases);
 * torch: every learned tensor, biases and batch-norm scales and shifts
 * too, as torch.optim.SGD(model.parameters(), weight_decay=decay) does. */
#define ST_DECAY_MODES(X) X(DARKNET, "darknet") X(TORCH, "torch")

typedef enum st_decay_mode {
#define ST_DECAY_ENUM(e, name) ST_DECAY_##e,
    ST_DECAY_MODES(ST_DECAY_ENUM)
#undef ST_DECAY_ENUM
} st_decay_mode;

extern const char *const st_decay_mode_names[]; /* cfg names, NULL-terminated */

/* Where Adam adds eps= (eps_mode=): to sqrt(v) before the bias correction
 * (caffe) or after it (torch); see adam above. */
#define ST_EPS_MODES(X) X(CAFFE, "caffe") X(TORCH, "torch")

typedef enum st_eps_mode {
#define ST_EPS_ENUM(e, name) ST_EPS_##e,
    ST_EPS_MODES(ST_EPS_ENUM)
#undef ST_EPS_ENUM
} st_eps_mode;

extern const char *const st_eps_mode_names[]; /* cfg names, NULL-terminated */

typedef struct st_solver_cfg {
    st_lr_schedule lr;
    st_solver_rule rule;
    float momentum;  /* sgd, nesterov; adadelta's history decay */
    float decay;     /* L2 weight decay: gd = g + decay * w */
    st_decay_mode decay_mode; /* which tensors decay= applies to */
    float beta1;     /* adam: B1= */
    float beta2;     /* adam: B2= */
    float eps;       /* adam: eps= */
    st_eps_mode eps_mode; /* adam: where eps is added */
    float rms_decay; /* rmsprop */
    float delta;     /* adagrad, rmsprop, adadelta: Caffe's delta= */
} st_solver_cfg;

/* Learning rate of iteration iter (from 0): Darknet's get_current_rate,
 * with the policies and the warm-up above. */
float st_lr_at(const st_lr_schedule *s, long iter);

/* Planes of solver state, each as long as the parameter arena: 1 for sgd,
 * nesterov, adagrad and rmsprop, 2 for adadelta and adam. */
int st_solver_state_per_param(const st_solver_cfg *c);

/* One iteration's update as st_solver_update takes it, for code that runs it
 * elsewhere (the cpe backend's core group). */
typedef struct st_solver_step {
    const st_solver_cfg *cfg;
    const st_param_table *table;
    float lr;
    long iter;
} st_solver_step;

/* Apply the update of iteration iter (from 0) to arena floats [begin, end)
 * of the parameters in t: weights w, solver state (planes stride floats
 * apart, st_solver_state_per_param of them), and g the batch-averaged
 * gradient. Writes w[begin, end) and the state planes' [begin, end) only. */
void st_solver_update(const st_solver_cfg *c, const st_param_table *t, float lr, long iter,
                      size_t begin, size_t end, float *w, float *state, size_t stride,
                      const float *g);

/* The same update with the state held only for [begin, end) (or a larger
 * range starting at begin): plane k of arena float j at
 * state[k * stride + j - begin]. Weights and gradient are indexed by arena
 * offset as above. st_solver_update is this with state + begin. */
void st_solver_update_at(const st_solver_cfg *c, const st_param_table *t, float lr, long iter,
                         size_t begin, size_t end, float *w, float *state, size_t stride,
                         const float *g);

/* The same update with the gradient of [begin, end) held apart from the
 * arena: g[j - begin] is arena float j's (a model-parallel layer's slice,
 * applied as its backward computes it). State as in st_solver_update. */
void st_solver_update_given(const st_solver_cfg *c, const st_param_table *t, float lr,
                            long iter, size_t begin, size_t end, float *w, float *state,
                            size_t stride, const float *g);

#endif
