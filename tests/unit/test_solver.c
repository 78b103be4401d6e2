/* The update rules: each of the six against values computed independently
 * (float64 Python from the published formulas, below), the same result for
 * any split of the arena into slices, the parameter server's two state
 * planes, the state partitioned over ranks (--rank-update partitioned),
 * decay_mode= (which tensors decay), and the [net] keys that choose and
 * tune a rule and the learning-rate schedule.
 *
 * The tiny parameter table: 0.weights (5 floats, ST_PARAM_WEIGHT, weight
 * decay 0.01), 0.biases (2, ST_PARAM_BIAS, no decay), 0.rolling_mean (1,
 * ST_PARAM_STAT), at arena offsets 0, 16 and 32 (48 floats with the
 * alignment gaps).
 *
 *   w0 = [0.53, -0.27, 1.07, -2.03, 0.17]   b0 = [0.33, -0.41]   stat0 = 1
 *   step 1: gw = [0.2, -0.1, 0.05, 0.4, -0.3]   gb = [0.1, -0.2]   stat 3
 *   step 2: gw = [-0.1, 0.3, 0.02, 0.2, -0.5]   gb = [0.05, 0.1]   stat 2
 *   step 3: gw = [0.15, 0.25, -0.04, -0.1, 0.35] gb = [-0.3, 0.2]  stat 5
 *
 *   sgd      lr 0.1,  momentum 0.9
 *   nesterov lr 0.1,  momentum 0.9
 *   adagrad  lr 0.1,  delta 1e-4
 *   rmsprop  lr 0.01, rms_decay 0.9375, delta 1e-4
 *   adadelta lr 1,    momentum 0.9375, delta 1e-6
 *   adam     lr 0.1,  B1 0.875, B2 0.9921875, eps 1e-4, t = 1, 2, 3
 *
 * The decays close to 1 are exact in binary (15/16, 7/8, 127/128): 0.99f
 * is 0.99000001, so 1 - 0.99f is off by 1e-6 relative and 1 - 0.999f by
 * 1.3e-5, an error of the input, not of the rule, and larger than the
 * tolerance. Every other input is within 3e-8 of its decimal value. delta
 * and eps are larger than the defaults so that where they enter (outside
 * the square root, as in Caffe) moves the results well past the tolerance.
 *
 * Step 1 of w[0] by hand, gd = 0.2 + 0.01 * 0.53 = 0.2053:
 *   sgd:      m = 0.2053;  w = 0.53 - 0.1 * 0.2053 = 0.50947
 *   nesterov: v = 0.1 * 0.2053 = 0.02053;  w = 0.53 - 1.9 * 0.02053 = 0.490993
 *   adagrad:  h = 0.2053^2 = 0.04214809;
 *             w = 0.53 - 0.1 * 0.2053 / (0.2053 + 1e-4) = 0.430048685
 *   rmsprop:  h = 0.0625 * 0.04214809 = 0.002634256, sqrt(h) = 0.051325;
 *             w = 0.53 - 0.01 * 0.2053 / (0.051325 + 1e-4) = 0.490077783
 *   adadelta: h = 0.002634256;  u = 0.2053 * sqrt(0 + 1e-6) / sqrt(h + 1e-6)
 *             = 0.2053 * 0.001 / 0.05133474 = 0.003999241;
 *             h2 = 0.0625 * u^2 = 9.9962e-7;  w = 0.53 - u = 0.526000759
 *   adam:     m = 0.125 * 0.2053 = 0.0256625;  v = 0.0078125 * 0.04214809
 *             = 0.00032928;  lr_t = 0.1 * sqrt(0.0078125) / 0.125 = 0.07071068;
 *             w = 0.53 - 0.07071068 * 0.0256625 / (0.01814583 + 1e-4)
 *             = 0.430548061
 * The rest (and these) from this Python, run with float64:
 *
 *   for t in range(3):
 *     for i in range(7):
 *       gd = g[t][i] + decay[i] * w[i]            # decay 0.01 on the weights, 0 on biases
 *       sgd:      s0[i] = mom*s0[i] + gd;  w[i] -= lr*s0[i]
 *       nesterov: vp = s0[i];  s0[i] = mom*s0[i] + lr*gd
 *                 w[i] -= (1 + mom)*s0[i] - mom*vp
 *       adagrad:  s0[i] += gd*gd;  w[i] -= lr*gd/(sqrt(s0[i]) + delta)
 *       rmsprop:  s0[i] = rms*s0[i] + (1 - rms)*gd*gd;  w[i] -= lr*gd/(sqrt(s0[i]) + delta)
 *       adadelta: s0[i] = mom*s0[i] + (1 - mom)*gd*gd
 *                 u = gd*sqrt(s1[i] + delta)/sqrt(s0[i] + delta)
 *                 s1[i] = mom*s1[i] + (1 - mom)*u*u;  w[i] -= lr*u
 *       adam:     s0[i] = b1*s0[i] + (1 - b1)*gd;  s1[i] = b2*s1[i] + (1 - b2)*gd*gd
 *                 w[i] -= lr*sqrt(1 - b2**(t+1))/(1 - b1**(t+1))*s0[i]/(sqrt(s1[i]) + eps)
 *     stat = 0.99*stat + 0.01*stat_batch[t]
 *
 * Rounding: the same Python with every operation rounded to float32 stays
 * within 1.9e-7 relative of the float64 values; the tolerance is 1e-6. */
#include <math.h>
#include <stdlib.h>

#include "testlib.h"

#include "ops/params.h"
#include "parallel/ps.h"
#include "parallel/ps_part.h"
#include "ops/solver.h"

#define N_RULES 6
#define N_STEPS 3
#define N_LEARNED 7 /* 5 weights, 2 biases */
#define REL_TOL 1e-6

/* Arena offsets of the 8 values checked: weights, biases, the statistic. */
static const size_t checked[N_LEARNED + 1] = {0, 1, 2, 3, 4, 16, 17, 32};

static const float w_init[N_LEARNED + 1] = {0.53f, -0.27f, 1.07f, -2.03f, 0.17f,
                                            0.33f, -0.41f, 1.0f};

static const float grad[N_STEPS][N_LEARNED + 1] = {
    {0.2f, -0.1f, 0.05f, 0.4f, -0.3f, 0.1f, -0.2f, 3.0f},
    {-0.1f, 0.3f, 0.02f, 0.2f, -0.5f, 0.05f, 0.1f, 2.0f},
    {0.15f, 0.25f, -0.04f, -0.1f, 0.35f, -0.3f, 0.2f, 5.0f},
};

static const float rule_lr[N_RULES] = {0.1f, 0.1f, 0.1f, 0.01f, 1.0f, 0.1f};

/* Weights after each step, in the order of `checked`. */
static const double expect_w[N_RULES][N_STEPS][N_LEARNED + 1] = {
    { /* sgd */
        {0.50947, -0.25973, 1.06393, -2.06797, 0.19983, 0.32, -0.39, 1.02},
        {0.50048353, -0.28022727, 1.05540307, -2.12007503, 0.27647717, 0.306, -0.382, 1.0298},
        {0.476895223, -0.323394586, 1.05067343, -2.15484948, 0.310183146, 0.3234, -0.3948,
         1.069502},
    },
    { /* nesterov */
        {0.490993, -0.250487, 1.058467, -2.102143, 0.226677, 0.311, -0.372, 1.02},
        {0.492430813, -0.298692375, 1.04773921, -2.16690463, 0.345408614, 0.2934, -0.3748,
         1.0298},
        {0.45573112, -0.362235135, 1.04644612, -2.1859649, 0.340314799, 0.33906, -0.40632,
         1.069502},
    },
    { /* adagrad */
        {0.430048685, -0.170097276, 0.970164474, -2.12997367, 0.269966488, 0.2300999,
         -0.310049975, 1.02},
        {0.472279737, -0.264620401, 0.926277248, -2.17254672, 0.355707096, 0.185418505,
         -0.354751344, 1.0298},
        {0.415895804, -0.326306042, 0.96762453, -2.14469494, 0.30365873, 0.279093503,
         -0.421395795, 1.069502},
    },
    { /* rmsprop */
        {0.490077783, -0.230155189, 1.03026187, -2.06995791, 0.209946435, 0.290159363,
         -0.37007984, 1.02},
        {0.507309172, -0.268046347, 1.01204146, -2.08747475, 0.244522285, 0.271873226,
         -0.388399477, 1.0298},
        {0.483827677, -0.293268923, 1.02886226, -2.07580961, 0.223156176, 0.309560028,
         -0.415877422, 1.069502},
    },
    { /* adadelta */
        {0.526000759, -0.266003031, 1.06600866, -2.03399978, 0.17399964, 0.326003196,
         -0.4060008, 1.02},
        {0.528433924, -0.271365361, 1.06339982, -2.03648328, 0.178893353, 0.323410436,
         -0.408595646, 1.0298},
        {0.524857417, -0.276246273, 1.06595167, -2.03471126, 0.174938398, 0.32920209,
         -0.412820461, 1.069502},
    },
    { /* adam */
        {0.430548061, -0.171089623, 0.971829768, -2.12970292, 0.26962216, 0.231118714,
         -0.310562503, 1.02},
        {0.402700095, -0.2206664, 0.880807293, -2.22140228, 0.367968161, 0.139182497,
         -0.285362371, 1.0298},
        {0.348400958, -0.290717682, 0.844905808, -2.2701559, 0.397829763, 0.175754543,
         -0.314631412, 1.069502},
    },
};

/* State planes 0 and 1 after step 3 (zero where the rule has no plane). */
static const double expect_state[N_RULES][2][N_LEARNED] = {
    {{0.235883065, 0.431673157, 0.0472964007, 0.34774452, -0.337059758, -0.174, 0.128}},
    {{0.0235636245, 0.0431571693, 0.00471705951, 0.0346968667, -0.0336128821, -0.0174, 0.0128}},
    {{0.0752456308, 0.1607135, 0.00551145486, 0.190922963, 0.461293116, 0.1025, 0.09}},
    {{0.00434815651, 0.00959514846, 0.000311998067, 0.0107164879, 0.0271772586, 0.00632080078,
      0.00528320313}},
    {{0.0043482583, 0.00958162392, 0.000311373231, 0.0107163627, 0.027169354, 0.00632080078,
      0.00528320313},
     {2.0249279e-06, 4.0513703e-06, 1.68089366e-06, 1.43645749e-06, 3.25958005e-06,
      3.36784614e-06, 2.38864629e-06}},
    {{0.0284346386, 0.0537708268, 0.00516062761, 0.0406073611, -0.0387308827, -0.0224609375,
      0.016796875},
     {0.000580486829, 0.00125051509, 4.27840503e-05, 0.00147304476, 0.00357864227,
      0.000799412727, 0.000697650909}},
};

#define GAP_WEIGHT 7.0f /* in the alignment gaps: no rule may touch it */

static st_solver_cfg rule_cfg(st_solver_rule rule)
{
    st_solver_cfg c;
    memset(&c, 0, sizeof c);
    c.rule = rule;
    c.momentum = rule == ST_SOLVER_ADADELTA ? 0.9375f : 0.9f;
    c.decay = 0.01f;
    c.beta1 = 0.875f;
    c.beta2 = 0.9921875f;
    c.eps = 1e-4f;
    c.rms_decay = 0.9375f;
    c.delta = rule == ST_SOLVER_ADADELTA ? 1e-6f : 1e-4f;
    return c;
}

/* The tiny table and its arenas: w [count], state [2 * count] (planes
 * count floats apart), g [count]. */
typedef struct tiny {
    st_param_table table;
    float *w, *state, *g;
} tiny;

static void tiny_init(tiny *s)
{
    st_error err = {0};
    int id;
    memset(s, 0, sizeof *s);
    assert_int_equal(st_params_add(&s->table, 0, "weights", 5, ST_PARAM_WEIGHT, ST_INIT_ZERO,
                                   0.0f, &id, &err), ST_OK);
    assert_int_equal(st_params_add(&s->table, 0, "biases", 2, ST_PARAM_BIAS, ST_INIT_ZERO, 0.0f,
                                   &id, &err), ST_OK);
    assert_int_equal(st_params_add(&s->table, 0, "rolling_mean", 1, ST_PARAM_STAT,
                                   ST_INIT_ZERO, 0.0f, &id, &err), ST_OK);
    assert_int_equal(s->table.count, 48);
    assert_int_equal(s->table.p[1].offset, checked[5]);
    assert_int_equal(s->table.p[2].offset, checked[7]);
    s->w = calloc(s->table.count, sizeof *s->w);
    s->state = calloc(2 * s->table.count, sizeof *s->state);
    s->g = calloc(s->table.count, sizeof *s->g);
    assert_non_null(s->w);
    assert_non_null(s->state);
    assert_non_null(s->g);
    for (size_t i = 0; i < s->table.count; i++)
        s->w[i] = GAP_WEIGHT;
    for (int k = 0; k <= N_LEARNED; k++)
        s->w[checked[k]] = w_init[k];
}

static void tiny_free(tiny *s)
{
    free(s->w);
    free(s->state);
    free(s->g);
    st_params_free(&s->table);
}

/* The gradient of step t; the gaps get a nonzero gradient too. */
static void tiny_set_grad(tiny *s, int t)
{
    for (size_t i = 0; i < s->table.count; i++)
        s->g[i] = 1.0f;
    for (int k = 0; k <= N_LEARNED; k++)
        s->g[checked[k]] = grad[t][k];
}

static void assert_close(double actual, double expected, const char *rule, const char *what,
                         int step, size_t offset)
{
    if (!(fabs(actual - expected) <= REL_TOL * fabs(expected))) /* NaN fails too */
        fail_msg("%s step %d %s at arena offset %zu: got %.9g, expected %.9g (relative "
                 "error %.2g, tolerance %.0g)", rule, step, what, offset, actual, expected,
                 expected != 0.0 ? fabs(actual - expected) / fabs(expected) : INFINITY, REL_TOL);
}

static void test_state_planes(void **state)
{
    (void)state;
    static const int planes[N_RULES] = {1, 1, 1, 1, 2, 2};
    for (int r = 0; r < N_RULES; r++) {
        st_solver_cfg c = rule_cfg((st_solver_rule)r);
        assert_int_equal(st_solver_state_per_param(&c), planes[r]);
    }
    assert_null(st_solver_rule_names[N_RULES]);
}

static void test_rules_hand_computed(void **state)
{
    (void)state;
    for (int r = 0; r < N_RULES; r++) {
        const char *name = st_solver_rule_names[r];
        st_solver_cfg c = rule_cfg((st_solver_rule)r);
        tiny s;
        tiny_init(&s);
        size_t n = s.table.count;
        for (int t = 0; t < N_STEPS; t++) {
            tiny_set_grad(&s, t);
            st_solver_update(&c, &s.table, rule_lr[r], t, 0, n, s.w, s.state, n, s.g);
            for (int k = 0; k <= N_LEARNED; k++)
                assert_close(s.w[checked[k]], expect_w[r][t][k], name, "weight", t + 1,
                             checked[k]);
        }
        for (int plane = 0; plane < 2; plane++)
            for (int k = 0; k < N_LEARNED; k++) {
                size_t at = (size_t)plane * n + checked[k];
                assert_close(s.state[at], expect_state[r][plane][k], name,
                             plane ? "state plane 1" : "state plane 0", N_STEPS, checked[k]);
            }
        /* outside the tensors, and the statistic's state, nothing moved */
        for (size_t i = 0; i < n; i++) {
            int in_tensor = 0;
            for (int k = 0; k <= N_LEARNED; k++)
                in_tensor |= checked[k] == i;
            if (!in_tensor && s.w[i] != GAP_WEIGHT)
                fail_msg("%s: gap weight at %zu changed to %g", name, i, s.w[i]);
            if ((!in_tensor || i == checked[N_LEARNED]) && (s.state[i] != 0.0f ||
                                                           s.state[n + i] != 0.0f))
                fail_msg("%s: state at %zu outside the learned tensors changed", name, i);
        }
        tiny_free(&s);
    }
}

/* eps_mode=torch: Adam as torch.optim.Adam has it, w -= lr * m^ / (sqrt(v^)
 * + eps) with m^ = m / (1 - B1^t) and v^ = v / (1 - B2^t), on the inputs
 * of test_rules_hand_computed. Step 1 of w[0] by hand: m^ = 0.0256625 /
 * 0.125 = 0.2053, v^ = 0.00032928 / 0.0078125 = 0.04214809, sqrt(v^) =
 * 0.2053; w = 0.53 - 0.1 * 0.2053 / (0.2053 + 1e-4) = 0.430048685 (Caffe's
 * placement gives 0.430548061 there, 1.2e-3 relative away). The rest from
 * the Python of the header with that line for adam's update, in float64:
 *   mh = s0[i] / (1 - b1**(t+1));  vh = s1[i] / (1 - b2**(t+1))
 *   w[i] -= lr * mh / (sqrt(vh) + eps)
 * and its planes after step 3 (m and v: the decay of the moved weights
 * moves them too). */
static void test_adam_eps_torch(void **state)
{
    (void)state;
    static const double expect[N_STEPS][N_LEARNED] = {
        {0.430048685, -0.170097276, 0.970164474, -2.12997367, 0.269966488, 0.2300999,
         -0.310049975},
        {0.402080586, -0.21983055, 0.877815465, -2.22188979, 0.368480608, 0.137347894,
         -0.284737966},
        {0.347592745, -0.290050231, 0.841492007, -2.27074992, 0.398383712, 0.174029505,
         -0.314100868},
    };
    static const double expect_planes[2][N_LEARNED] = {
        {0.028433318, 0.053772957, 0.00515506641, 0.0406064556, -0.0387298656, -0.0224609375,
         0.016796875},
        {0.000580479329, 0.00125059334, 4.27909685e-05, 0.00147304657, 0.00357864405,
         0.000799412727, 0.000697650909},
    };
    st_solver_cfg c = rule_cfg(ST_SOLVER_ADAM);
    c.eps_mode = ST_EPS_TORCH;
    tiny s;
    tiny_init(&s);
    size_t n = s.table.count;
    for (int t = 0; t < N_STEPS; t++) {
        tiny_set_grad(&s, t);
        st_solver_update(&c, &s.table, rule_lr[ST_SOLVER_ADAM], t, 0, n, s.w, s.state, n, s.g);
        for (int k = 0; k < N_LEARNED; k++)
            assert_close(s.w[checked[k]], expect[t][k], "adam eps_mode=torch", "weight",
                         t + 1, checked[k]);
    }
    for (int plane = 0; plane < 2; plane++)
        for (int k = 0; k < N_LEARNED; k++)
            assert_close(s.state[(size_t)plane * n + checked[k]], expect_planes[plane][k],
                         "adam eps_mode=torch",
                         plane ? "state plane 1" : "state plane 0", N_STEPS, checked[k]);
    tiny_free(&s);
}

/* 3 steps over [0, n) in one call, and over the same range cut at `cuts`
 * (inside the weight tensor and inside the bias tensor): bit for bit equal. */
/* A running statistic follows its own tensor's keep (a layer's
 * bn_momentum=, st_param.keep), whatever the rule: keep 7/8 (PyTorch's
 * momentum 1/8, exact in binary) from stat0 = 1 over the batch statistics
 * 3, 2, 5 gives 1.25, 1.34375, 1.80078125 exactly; st_params_add's default
 * is ST_STAT_KEEP, Darknet's 0.99. */
static void test_stat_keep(void **state)
{
    (void)state;
    static const float expect[N_STEPS] = {1.25f, 1.34375f, 1.80078125f};
    for (int r = 0; r < N_RULES; r++) {
        st_solver_cfg c = rule_cfg((st_solver_rule)r);
        tiny s;
        tiny_init(&s);
        assert_true(s.table.p[2].keep == ST_STAT_KEEP);
        assert_true(s.table.p[0].keep == 0.0f);
        s.table.p[2].keep = 0.875f;
        size_t n = s.table.count;
        for (int t = 0; t < N_STEPS; t++) {
            tiny_set_grad(&s, t);
            st_solver_update(&c, &s.table, rule_lr[r], t, 0, n, s.w, s.state, n, s.g);
            if (s.w[checked[N_LEARNED]] != expect[t])
                fail_msg("%s step %d: running statistic %.9g, expected %.9g (keep 0.875)",
                         st_solver_rule_names[r], t + 1, s.w[checked[N_LEARNED]], expect[t]);
        }
        tiny_free(&s);
    }
}

static void test_slices_bitwise(void **state)
{
    (void)state;
    static const size_t cuts[] = {3, 17};
    for (int r = 0; r < N_RULES; r++) {
        st_solver_cfg c = rule_cfg((st_solver_rule)r);
        tiny whole, parts;
        tiny_init(&whole);
        tiny_init(&parts);
        size_t n = whole.table.count;
        for (int t = 0; t < N_STEPS; t++) {
            tiny_set_grad(&whole, t);
            tiny_set_grad(&parts, t);
            st_solver_update(&c, &whole.table, rule_lr[r], t, 0, n, whole.w, whole.state, n,
                             whole.g);
            size_t b = 0;
            for (size_t k = 0; k <= sizeof cuts / sizeof cuts[0]; k++) {
                size_t e = k < sizeof cuts / sizeof cuts[0] ? cuts[k] : n;
                st_solver_update(&c, &parts.table, rule_lr[r], t, b, e, parts.w, parts.state,
                                 n, parts.g);
                b = e;
            }
        }
        if (memcmp(whole.w, parts.w, n * sizeof *whole.w) != 0 ||
            memcmp(whole.state, parts.state, 2 * n * sizeof *whole.state) != 0)
            fail_msg("%s: updating [0,3) [3,17) [17,%zu) differs from one update of [0,%zu)",
                     st_solver_rule_names[r], n, n);
        tiny_free(&whole);
        tiny_free(&parts);
    }
}

/* The parameter server with 2 workers (2 slices) and 2 intra-op threads
 * finds plane 1 at ps->count and passes the iteration: the same as one
 * update of the whole arena. */
static void test_ps_apply_planes(void **state)
{
    (void)state;
    for (int r = 0; r < N_RULES; r++) {
        st_solver_cfg c = rule_cfg((st_solver_rule)r);
        int planes = st_solver_state_per_param(&c);
        tiny ref;
        tiny_init(&ref);
        size_t n = ref.table.count;
        st_ps ps;
        st_error err = {0};
        assert_int_equal(st_ps_init(&ps, &ref.table, 2, planes, &err), ST_OK);
        assert_true(ps.slice[1] > 0 && ps.slice[1] < n);
        memcpy(ps.weights, ref.w, n * sizeof *ref.w);
        for (int t = 0; t < N_STEPS; t++) {
            tiny_set_grad(&ref, t);
            st_solver_update(&c, &ref.table, rule_lr[r], t, 0, n, ref.w, ref.state, n, ref.g);
            memcpy(ps.grads[0], ref.g, n * sizeof *ref.g);
            for (int slice = 0; slice < 2; slice++)
                st_ps_apply(&ps, slice, &c, rule_lr[r], t, 2);
        }
        if (memcmp(ps.weights, ref.w, n * sizeof *ref.w) != 0 ||
            memcmp(ps.state, ref.state, (size_t)planes * n * sizeof *ref.state) != 0)
            fail_msg("%s: st_ps_apply over 2 slices differs from st_solver_update",
                     st_solver_rule_names[r]);
        st_ps_free(&ps);
        tiny_free(&ref);
    }
}

/* Hybrid on one node (ps.tail_applied): the model-parallel layers apply
 * the tail's gradient as they compute it (st_ps_apply_given), the slices
 * span only the head. Truth: the same steps with the tail's gradient in
 * worker 0's arena, reduced and applied with the rest (tail_applied 0):
 * the same weights and state bit for bit, for every rule. A non-finite
 * given gradient is refused and leaves its chunk as it was. */
static void test_ps_tail_applied(void **state)
{
    (void)state;
    for (int r = 0; r < N_RULES; r++) {
        st_solver_cfg c = rule_cfg((st_solver_rule)r);
        int planes = st_solver_state_per_param(&c);
        tiny ref;
        tiny_init(&ref);
        size_t n = ref.table.count, from = ref.table.p[1].offset; /* biases on: the tail */
        st_ps held, applied;
        st_error err = {0};
        assert_int_equal(st_ps_init_split(&held, &ref.table, 2, planes, from, 0, &err), ST_OK);
        assert_int_equal(st_ps_init_split(&applied, &ref.table, 2, planes, from, 1, &err),
                         ST_OK);
        assert_true(applied.tail_applied && !held.tail_applied);
        assert_int_equal(held.slice[2], n);
        assert_int_equal(applied.slice[2], from);
        assert_int_equal(st_ps_grad_floats(&ref.table, 0, from, 0), n);
        assert_int_equal(st_ps_grad_floats(&ref.table, 0, from, 1), from);
        assert_int_equal(st_ps_grad_floats(&ref.table, 1, from, 1), from);
        memcpy(held.weights, ref.w, n * sizeof *ref.w);
        memcpy(applied.weights, ref.w, n * sizeof *ref.w);
        float tail[64];
        assert_true(n - from <= sizeof tail / sizeof tail[0]);
        for (int t = 0; t < N_STEPS; t++) {
            tiny_set_grad(&ref, t);
            /* the batch's sums: four times the average (exact in binary) */
            for (size_t i = 0; i < n; i++)
                held.grads[0][i] = 4.0f * ref.g[i];
            memset(held.grads[1], 0, from * sizeof(float));
            memcpy(applied.grads[0], held.grads[0], from * sizeof(float));
            memset(applied.grads[1], 0, from * sizeof(float));
            memcpy(tail, held.grads[0] + from, (n - from) * sizeof(float));
            for (int slice = 0; slice < 2; slice++) {
                assert_true(st_ps_reduce_apply(&held, slice, 0.25f, &c, rule_lr[r], t, 1));
                assert_true(st_ps_reduce_apply(&applied, slice, 0.25f, &c, rule_lr[r], t, 1));
            }
            assert_true(st_ps_apply_given(&applied, from, n, tail, 0.25f, &c, rule_lr[r], t,
                                          1 + t % 2));
        }
        if (memcmp(held.weights, applied.weights, n * sizeof *ref.w) != 0 ||
            memcmp(held.state, applied.state, (size_t)planes * n * sizeof *ref.w) != 0)
            fail_msg("%s: the tail applied apart differs from the tail reduced in grads[0]",
                     st_solver_rule_names[r]);
        for (size_t i = 0; i < n - from; i++)
            tail[i] = 1.0f;
        tail[1] = NAN;
        memcpy(ref.w, applied.weights, n * sizeof *ref.w);
        assert_false(st_ps_apply_given(&applied, from, n, tail, 0.25f, &c, rule_lr[r], N_STEPS,
                                       1));
        if (memcmp(ref.w + from, applied.weights + from, (n - from) * sizeof *ref.w) != 0)
            fail_msg("%s: a non-finite given gradient changed the weights",
                     st_solver_rule_names[r]);
        st_ps_free(&held);
        st_ps_free(&applied);
        tiny_free(&ref);
    }
}

/* --rank-update partitioned: P ranks (simulated one after the other), each
 * updating only its parts of the 2 slices with its compact state
 * (ps_part.h), then the parts' weights put together as the all-gather
 * would, and the compact states as a snapshot gathers them: the weights
 * and the state of one update of the whole arena, bit for bit, for P = 1,
 * 2, 3 and 5 (parts of 0 floats included: a slice of 16 floats over 5
 * ranks), the parts tiling the arena and each rank holding no more than
 * its share of it. */
static void test_partitioned_state(void **state)
{
    (void)state;
    static const int ranks[] = {1, 2, 3, 5};
    for (int r = 0; r < N_RULES; r++)
        for (size_t k = 0; k < sizeof ranks / sizeof ranks[0]; k++) {
            st_solver_cfg c = rule_cfg((st_solver_rule)r);
            int planes = st_solver_state_per_param(&c), p = ranks[k];
            tiny ref;
            tiny_init(&ref);
            size_t n = ref.table.count, owned_total = 0;
            float *w0 = calloc(n, sizeof *w0), *w = calloc(n, sizeof *w);
            float *full_state = calloc((size_t)planes * n, sizeof *full_state);
            assert_non_null(w0);
            assert_non_null(w);
            assert_non_null(full_state);
            memcpy(w0, ref.w, n * sizeof *w0);
            for (int t = 0; t < N_STEPS; t++) {
                tiny_set_grad(&ref, t);
                st_solver_update(&c, &ref.table, rule_lr[r], t, 0, n, ref.w, ref.state, n,
                                 ref.g);
            }
            for (int q = 0; q < p; q++) {
                st_ps ps;
                st_ps_part part;
                st_error err = {0};
                assert_int_equal(st_ps_init(&ps, &ref.table, 2, 0, &err), ST_OK);
                assert_int_equal(st_ps_part_init(&part, &ps, p, q, planes, &err), ST_OK);
                memcpy(ps.weights, w0, n * sizeof *w0);
                for (int t = 0; t < N_STEPS; t++) {
                    tiny_set_grad(&ref, t);
                    memcpy(ps.grads[0], ref.g, n * sizeof *ref.g);
                    for (int slice = 0; slice < 2; slice++)
                        st_ps_part_apply(&part, &ps, slice, &c, rule_lr[r], t, 2);
                }
                size_t share = 0;
                for (int slice = 0; slice < 2; slice++) {
                    size_t b, e;
                    st_ps_part_range(&part, slice, &b, &e);
                    size_t len = ps.slice[slice + 1] - ps.slice[slice];
                    assert_true(b >= ps.slice[slice] && e <= ps.slice[slice + 1]);
                    assert_true(e - b <= (len + (size_t)p - 1) / (size_t)p);
                    share += (len + (size_t)p - 1) / (size_t)p;
                    /* the all-gather: rank q's part of the weights; the gather
                     * of the state: its compact planes into the whole arena's */
                    for (size_t j = b; j < e; j++) {
                        w[j] = ps.weights[j];
                        for (int plane = 0; plane < planes; plane++)
                            full_state[(size_t)plane * n + j] =
                                part.state[(size_t)plane * part.owned + part.local[slice] + j - b];
                    }
                }
                assert_true(part.owned <= share);
                owned_total += part.owned;
                st_ps_part_free(&part);
                st_ps_free(&ps);
            }
            assert_int_equal(owned_total, n);
            if (memcmp(w, ref.w, n * sizeof *w) != 0 ||
                memcmp(full_state, ref.state, (size_t)planes * n * sizeof *w) != 0)
                fail_msg("%s, %d ranks: the parts' updates differ from one update of the whole "
                         "arena", st_solver_rule_names[r], p);
            free(w0);
            free(w);
            free(full_state);
            tiny_free(&ref);
        }
}

/* decay_mode=torch decays the biases too (gd = g + decay * b), darknet
 * leaves them; the weights and the running statistic are the same in both.
 * sgd, lr 0.1, momentum 0.9, step 1 of b0 = [0.33, -0.41], gb = [0.1, -0.2]:
 *   torch:   gd = 0.1 + 0.01 * 0.33 = 0.1033;   b = 0.33 - 0.01033 = 0.31967
 *            gd = -0.2 - 0.0041 = -0.2041;      b = -0.41 + 0.02041 = -0.38959
 *   darknet: b = 0.33 - 0.01 = 0.32;  -0.41 + 0.02 = -0.39 */
static void test_decay_mode(void **state)
{
    (void)state;
    static const double biases[2][2] = {{0.32, -0.39}, {0.31967, -0.38959}};
    for (int mode = ST_DECAY_DARKNET; mode <= ST_DECAY_TORCH; mode++) {
        st_solver_cfg c = rule_cfg(ST_SOLVER_SGD);
        c.decay_mode = (st_decay_mode)mode;
        tiny s;
        tiny_init(&s);
        size_t n = s.table.count;
        tiny_set_grad(&s, 0);
        st_solver_update(&c, &s.table, 0.1f, 0, 0, n, s.w, s.state, n, s.g);
        const char *name = st_decay_mode_names[mode];
        for (int k = 0; k < 5; k++) /* the weights: as test_rules_hand_computed's */
            assert_close(s.w[checked[k]], expect_w[ST_SOLVER_SGD][0][k], name, "weight", 1,
                         checked[k]);
        assert_close(s.w[checked[5]], biases[mode][0], name, "bias", 1, checked[5]);
        assert_close(s.w[checked[6]], biases[mode][1], name, "bias", 1, checked[6]);
        assert_close(s.w[checked[7]], expect_w[ST_SOLVER_SGD][0][7], name, "statistic", 1,
                     checked[7]);
        tiny_free(&s);
    }
}

/* ------------------------------------------------------------ [net] keys */

/* [net] on line 1, its first extra key on line 5. */
#define NET_HEAD "[net]\nheight=4\nwidth=4\nchannels=1\n"
#define NET_TAIL "[connected]\noutput=2\n"

static void parse_ok(const char *keys, st_hparams *hp)
{
    char text[512];
    snprintf(text, sizeof text, NET_HEAD "%s" NET_TAIL, keys);
    st_cfg cfg;
    st_net net;
    st_error err = {0};
    st_status st = tl_build("s.cfg", text, &cfg, hp, &net, &err);
    if (st != ST_OK)
        fail_msg("%s: status %d: %s", keys, st, err.msg);
    st_net_free(&net);
    st_cfg_free(&cfg);
}

static void parse_fails(const char *keys, const char *message)
{
    char text[512];
    snprintf(text, sizeof text, NET_HEAD "%s" NET_TAIL, keys);
    st_cfg cfg;
    st_hparams hp;
    st_net net;
    st_error err = {0};
    st_status st = tl_build("s.cfg", text, &cfg, &hp, &net, &err);
    if (st == ST_OK) {
        st_net_free(&net);
        st_cfg_free(&cfg);
        fail_msg("%s: accepted, expected \"%s\"", keys, message);
    }
    assert_int_equal(st, ST_EINPUT);
    tl_assert_contains(err.msg, message);
}

static void test_cfg_defaults(void **state)
{
    (void)state;
    st_hparams hp;
    parse_ok("", &hp);
    assert_int_equal(hp.solver.rule, ST_SOLVER_SGD);
    assert_float_equal(hp.solver.momentum, 0.9f, 0.0f);
    assert_float_equal(hp.solver.decay, 0.0001f, 0.0f);
    assert_float_equal(hp.solver.beta1, 0.9f, 0.0f);
    assert_float_equal(hp.solver.beta2, 0.999f, 0.0f);
    assert_float_equal(hp.solver.eps, 0.0000001f, 0.0f);
    assert_float_equal(hp.solver.rms_decay, 0.99f, 0.0f);
    assert_float_equal(hp.solver.delta, 1e-8f, 0.0f);
    assert_int_equal(hp.solver.decay_mode, ST_DECAY_DARKNET);
    assert_int_equal(hp.solver.lr.warmup, 0);
    assert_float_equal(hp.solver.lr.warmup_factor, 1.0f / 3.0f, 0.0f);
    assert_float_equal(hp.solver.lr.lr_min, 0.0f, 0.0f);
    assert_float_equal(hp.solver.lr.pct_start, 0.3f, 0.0f);
    assert_float_equal(hp.solver.lr.div_factor, 25.0f, 0.0f);
    assert_float_equal(hp.solver.lr.final_div_factor, 1e4f, 0.0f);
}

/* The schedule keys of issue 38 and decay_mode=; their values step by step
 * are tests/e2e/test_schedule.sh's, against PyTorch. */
static void test_cfg_schedule(void **state)
{
    (void)state;
    st_hparams hp;
    parse_ok("policy=cosine\nwarmup=5\nwarmup_factor=0.01\nlearning_rate_min=0.001\n"
             "decay_mode=torch\n", &hp);
    assert_int_equal(hp.solver.lr.policy, ST_LR_COSINE);
    assert_int_equal(hp.solver.lr.warmup, 5);
    assert_float_equal(hp.solver.lr.warmup_factor, 0.01f, 0.0f);
    assert_float_equal(hp.solver.lr.lr_min, 0.001f, 0.0f);
    assert_int_equal(hp.solver.decay_mode, ST_DECAY_TORCH);
    parse_ok("policy=onecycle\npct_start=0.25\ndiv_factor=10\nfinal_div_factor=100\n", &hp);
    assert_int_equal(hp.solver.lr.policy, ST_LR_ONECYCLE);
    assert_float_equal(hp.solver.lr.pct_start, 0.25f, 0.0f);
    assert_float_equal(hp.solver.lr.div_factor, 10.0f, 0.0f);
    assert_float_equal(hp.solver.lr.final_div_factor, 100.0f, 0.0f);
    parse_fails("decay_mode=caffe\n", "s.cfg:5: [net] decay_mode=caffe: expected one of "
                "darknet, torch");
    parse_fails("warmup=-1\n", "s.cfg:5: [net] warmup=-1: expected an integer in 0..");
    parse_fails("warmup_factor=0\n", "s.cfg:5: [net] warmup_factor=0: expected a number in "
                "0..1 other than 0");
    parse_fails("warmup_factor=1.5\n", "s.cfg:5: [net] warmup_factor=1.5: expected a number in "
                "0..1");
    parse_fails("burn_in=10\nwarmup=5\n", "s.cfg:6: [net] warmup=5 and burn_in=10 at line 5 "
                "are two ramps of the learning rate: give one");
    parse_fails("policy=onecycle\nwarmup=5\n", "s.cfg:6: [net] warmup=5 with policy=onecycle "
                "at line 5: the cycle has its own warm-up");
    parse_fails("pct_start=0\n", "s.cfg:5: [net] pct_start=0: expected a number in 0..1 "
                "other than 0 and 1");
    parse_fails("pct_start=1\n", "s.cfg:5: [net] pct_start=1: expected a number in 0..1 "
                "other than 0 and 1");
    parse_fails("div_factor=0\n", "s.cfg:5: [net] div_factor=0: expected a number in");
    parse_fails("final_div_factor=-1\n", "s.cfg:5: [net] final_div_factor=-1: expected a "
                "number in");
    parse_fails("learning_rate_min=-1\n", "s.cfg:5: [net] learning_rate_min=-1: expected a "
                "number in 0..1000");
}

static void test_cfg_every_rule(void **state)
{
    (void)state;
    for (int r = 0; r < N_RULES; r++) {
        char keys[64];
        snprintf(keys, sizeof keys, "solver=%s\n", st_solver_rule_names[r]);
        st_hparams hp;
        parse_ok(keys, &hp);
        assert_int_equal(hp.solver.rule, r);
    }
}

static void test_cfg_adam(void **state)
{
    (void)state;
    st_hparams hp;
    parse_ok("solver=adam\nB1=0.8\nB2=0.99\neps=1e-6\nlearning_rate=0.001\n", &hp);
    assert_int_equal(hp.solver.rule, ST_SOLVER_ADAM);
    assert_float_equal(hp.solver.beta1, 0.8f, 0.0f);
    assert_float_equal(hp.solver.beta2, 0.99f, 0.0f);
    assert_float_equal(hp.solver.eps, 1e-6f, 0.0f);
    assert_int_equal(st_solver_state_per_param(&hp.solver), 2);
    assert_int_equal(hp.solver.eps_mode, ST_EPS_CAFFE);
    parse_ok("solver=adam\neps_mode=torch\n", &hp);
    assert_int_equal(hp.solver.eps_mode, ST_EPS_TORCH);
    parse_ok("adam=1\n", &hp); /* Darknet's way */
    assert_int_equal(hp.solver.rule, ST_SOLVER_ADAM);
    parse_ok("adam=1\nsolver=adam\n", &hp);
    assert_int_equal(hp.solver.rule, ST_SOLVER_ADAM);
    parse_ok("adam=0\n", &hp);
    assert_int_equal(hp.solver.rule, ST_SOLVER_SGD);
    parse_ok("solver=rmsprop\nrms_decay=0.9\ndelta=1e-6\n", &hp);
    assert_int_equal(hp.solver.rule, ST_SOLVER_RMSPROP);
    assert_float_equal(hp.solver.rms_decay, 0.9f, 0.0f);
    assert_float_equal(hp.solver.delta, 1e-6f, 0.0f);
}

static void test_cfg_errors(void **state)
{
    (void)state;
    parse_fails("solver=adamw\n", "s.cfg:5: [net] solver=adamw: expected one of sgd, nesterov, "
                "adagrad, rmsprop, adadelta, adam");
    parse_fails("solver=Adam\n", "s.cfg:5: [net] solver=Adam: expected one of");
    parse_fails("solver=sgd\nadam=1\n", "s.cfg:6: [net] adam=1 conflicts with solver=sgd at "
                "line 5");
    parse_fails("adam=1\nmomentum=0.9\nsolver=nesterov\n", "s.cfg:5: [net] adam=1 conflicts "
                "with solver=nesterov at line 7");
    parse_fails("adam=2\n", "s.cfg:5: [net] adam=2: expected an integer in 0..1");
    parse_fails("B1=1\n", "s.cfg:5: [net] B1=1: expected a number in 0..1 other than 1");
    parse_fails("B2=1.5\n", "s.cfg:5: [net] B2=1.5: expected a number in 0..1");
    parse_fails("eps=0\n", "s.cfg:5: [net] eps=0: expected a number in 0..1 other than 0");
    parse_fails("eps_mode=pytorch\n", "s.cfg:5: [net] eps_mode=pytorch: expected one of caffe, "
                "torch");
    parse_fails("rms_decay=-0.1\n", "s.cfg:5: [net] rms_decay=-0.1: expected a number in 0..1");
    parse_fails("delta=x\n", "s.cfg:5: [net] delta=x: expected a number in 0..1");
    parse_fails("solver=adam\nsolver=sgd\n", "s.cfg:6: duplicate key 'solver'");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_state_planes),
        cmocka_unit_test(test_rules_hand_computed),
        cmocka_unit_test(test_adam_eps_torch),
        cmocka_unit_test(test_stat_keep),
        cmocka_unit_test(test_slices_bitwise),
        cmocka_unit_test(test_ps_apply_planes),
        cmocka_unit_test(test_ps_tail_applied),
        cmocka_unit_test(test_partitioned_state),
        cmocka_unit_test(test_decay_mode),
        cmocka_unit_test(test_cfg_defaults),
        cmocka_unit_test(test_cfg_every_rule),
        cmocka_unit_test(test_cfg_adam),
        cmocka_unit_test(test_cfg_schedule),
        cmocka_unit_test(test_cfg_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
