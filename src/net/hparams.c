/* Reading the [net] section and --data files; see hparams.h. */
#include "net/hparams.h"

#include <stdio.h>
#include <string.h>

/* Darknet [net] keys for augmentation, detection and GPU memory that
 * singletrain does not implement: accepted with one warning each. */
static const char *const net_ignored[] = {
    "angle", "saturation", "exposure", "hue", "aspect", "min_crop", "max_crop", "center",
    "clip", "random", "jitter", "flip", "mosaic", "blur", "letter_box", "mixup", "cutmix",
    "max_ratio", "min_ratio", "notruth", "time_steps", "track", "augment_speed",
    "sequential_subdivisions", "try_fix_nan", "loss_scale", "dynamic_minibatch",
    "optimized_memory", "workspace_size_limit_MB", "adversarial_lr", "max_chart_loss",
    "gaussian_noise", "label_smooth_eps", "resize", "inputs", NULL};

/* [net] keys that do not change what training computes (see
 * st_hparams_settings). */
static const char *const net_unsettled[] = {
    "batch", "subdivisions", "max_batches", "train", "train_labels", "test", "valid",
    "test_labels", "names", "labels", "classes", NULL};

/* Data keys and their slots; a slot named twice (test= and valid=) is an
 * error. */
static const struct {
    const char *key;
    size_t slot;
} data_keys[] = {
    {"train", offsetof(st_data_paths, train)},
    {"train_labels", offsetof(st_data_paths, train_labels)},
    {"test", offsetof(st_data_paths, test)},
    {"valid", offsetof(st_data_paths, test)},
    {"test_labels", offsetof(st_data_paths, test_labels)},
    {"names", offsetof(st_data_paths, names)},
    {"labels", offsetof(st_data_paths, names)},
};

/* Copy the data keys present in sec into d; *line gets the first one's line. */
static st_status read_data_keys(const st_cfg *cfg, st_cfg_section *sec, st_data_paths *d,
                                int *line, st_error *err)
{
    int seen[sizeof data_keys / sizeof data_keys[0]] = {0};
    for (size_t i = 0; i < sizeof data_keys / sizeof data_keys[0]; i++) {
        st_cfg_option *o = st_cfg_find(sec, data_keys[i].key);
        if (!o)
            continue;
        if (strlen(o->val) >= ST_PATH_MAX)
            return st_fail(err, ST_EINPUT, "%s:%d: %s= path is longer than %d bytes", cfg->path,
                           o->line, o->key, ST_PATH_MAX - 1);
        for (size_t j = 0; j < i; j++)
            if (seen[j] && data_keys[j].slot == data_keys[i].slot)
                return st_fail(err, ST_EINPUT, "%s:%d: %s= and %s= name the same thing: give "
                               "one", cfg->path, o->line, data_keys[j].key, data_keys[i].key);
        seen[i] = 1;
        strcpy((char *)d + data_keys[i].slot, o->val);
        if (line && (*line == 0 || o->line < *line))
            *line = o->line;
    }
    st_status st = st_cfg_int(cfg, sec, "classes", 0, 1, 1 << 24, &d->classes, err);
    st_cfg_option *c = st_cfg_find(sec, "classes");
    if (st == ST_OK && c && line && (*line == 0 || c->line < *line))
        *line = c->line;
    return st;
}

/* The transform keys of [net]: records to network inputs (data.h). */
static st_status read_transform(const st_cfg *cfg, st_cfg_section *s, st_hparams *hp,
                                st_error *err)
{
    st_transform *t = &hp->transform;
    int n_mean = 0, size[2] = {0, 0}, n_size = 0;
    st_status st;
    if ((st = st_cfg_float_list(cfg, s, "input_mean", t->mean, ST_MAX_CHANNELS, &n_mean, err)) ||
        (st = st_cfg_float(cfg, s, "input_scale", 1.0f / 255.0f, -1e6f, 1e6f, &t->scale, err)) ||
        (st = st_cfg_int(cfg, s, "crop", 0, 0, 1, &t->crop, err)) ||
        (st = st_cfg_int(cfg, s, "crop_pad", 0, 0, 1024, &t->crop_pad, err)) ||
        (st = st_cfg_int(cfg, s, "mirror", 0, 0, 1, &t->mirror, err)) ||
        (st = st_cfg_int_list(cfg, s, "image_size", size, 2, &n_size, err)))
        return st;
    t->input = hp->input;
    st_cfg_option *o = st_cfg_find(s, "crop_pad");
    if (o && t->crop_pad > 0 && !t->crop)
        return st_fail(err, ST_EINPUT, "%s:%d: crop_pad=%d frames the record for a random crop: "
                       "expected crop=1 with it", cfg->path, o->line, t->crop_pad);
    o = st_cfg_find(s, "input_mean");
    if (o && n_mean != 1 && n_mean != hp->input.c)
        return st_fail(err, ST_EINPUT, "%s:%d: input_mean= has %d values: expected 1 or one per "
                       "channel (%d)", cfg->path, o->line, n_mean, hp->input.c);
    for (int c = n_mean; c < ST_MAX_CHANNELS; c++)
        t->mean[c] = n_mean == 1 ? t->mean[0] : 0.0f;
    hp->image_size = hp->input;
    o = st_cfg_find(s, "image_size");
    if (!o)
        return ST_OK;
    if (n_size != 2 || size[0] < hp->input.w || size[1] < hp->input.h || size[0] > 65536 ||
        size[1] > 65536)
        return st_fail(err, ST_EINPUT, "%s:%d: image_size=%s: expected W,H at least the input "
                       "%d,%d", cfg->path, o->line, o->val, hp->input.w, hp->input.h);
    hp->image_size.w = size[0];
    hp->image_size.h = size[1];
    return ST_OK;
}

/* key= as a number in lo..hi other than `excluded`, an end of the range
 * where the update divides by zero or never moves (why says which). */
static st_status read_float_except(const st_cfg *cfg, st_cfg_section *s, const char *key,
                                   float def, float lo, float hi, float excluded,
                                   const char *why, float *out, st_error *err)
{
    st_status st = st_cfg_float(cfg, s, key, def, lo, hi, out, err);
    if (st != ST_OK || *out != excluded)
        return st;
    st_cfg_option *o = st_cfg_find(s, key);
    return st_fail(err, ST_EINPUT, "%s:%d: [%s] %s=%s: expected a number in %g..%g other than "
                   "%g (%s)", cfg->path, o->line, s->type, o->key, o->val, lo, hi, excluded,
                   why);
}

/* The ramp keys: burn_in= (Darknet's) or warmup= and warmup_factor=. */
static st_status read_ramp(const st_cfg *cfg, st_cfg_section *s, st_lr_schedule *lr,
                           st_error *err)
{
    st_status st;
    if ((st = st_cfg_int(cfg, s, "burn_in", 0, 0, 1 << 30, &lr->burn_in, err)) ||
        (st = st_cfg_int(cfg, s, "warmup", 0, 0, 1 << 30, &lr->warmup, err)) ||
        (st = read_float_except(cfg, s, "warmup_factor", 1.0f / 3.0f, 0.0f, 1.0f, 0.0f,
                                "the warm-up would start at a rate of 0, which PyTorch's "
                                "LinearLR refuses", &lr->warmup_factor, err)))
        return st;
    st_cfg_option *b = st_cfg_find(s, "burn_in"), *w = st_cfg_find(s, "warmup"),
                  *p = st_cfg_find(s, "policy");
    if (lr->burn_in > 0 && lr->warmup > 0)
        return st_fail(err, ST_EINPUT, "%s:%d: [%s] warmup=%s and burn_in=%s at line %d are "
                       "two ramps of the learning rate: give one (warmup= is PyTorch's linear "
                       "warm-up, burn_in= Darknet's)", cfg->path, w->line, s->type, w->val,
                       b->val, b->line);
    if (lr->warmup > 0 && lr->policy == ST_LR_ONECYCLE)
        return st_fail(err, ST_EINPUT, "%s:%d: [%s] warmup=%s with policy=onecycle at line %d: "
                       "the cycle has its own warm-up (pct_start=): give no warmup=",
                       cfg->path, w->line, s->type, w->val, p->line);
    return ST_OK;
}

/* The policy and its keys (solver.h's ST_LR_POLICIES says what each
 * computes). Every key is read whatever the policy, as Darknet does. */
static st_status read_schedule(const st_cfg *cfg, st_cfg_section *s, st_lr_schedule *lr,
                               st_error *err)
{
    int policy, n_scales = 0;
    st_status st;
    if ((st = st_cfg_float(cfg, s, "learning_rate", 0.001f, 0.0f, 1e3f, &lr->learning_rate,
                           err)) ||
        (st = st_cfg_enum(cfg, s, "policy", st_lr_policy_names, ST_LR_CONSTANT, &policy, err)) ||
        (st = st_cfg_float(cfg, s, "gamma", 1.0f, 0.0f, 1e3f, &lr->gamma, err)) ||
        (st = st_cfg_float(cfg, s, "power", 4.0f, 0.0f, 1e3f, &lr->power, err)) ||
        (st = st_cfg_float(cfg, s, "scale", 1.0f, 0.0f, 1e3f, &lr->scale, err)) ||
        (st = st_cfg_int(cfg, s, "step", 1, 1, 1 << 30, &lr->step, err)) ||
        (st = st_cfg_int_list(cfg, s, "steps", lr->steps, ST_MAX_STEPS, &lr->n_steps, err)) ||
        (st = st_cfg_float_list(cfg, s, "scales", lr->scales, ST_MAX_STEPS, &n_scales, err)) ||
        (st = st_cfg_float(cfg, s, "learning_rate_min", 0.0f, 0.0f, 1e3f, &lr->lr_min, err)) ||
        (st = st_cfg_float(cfg, s, "pct_start", 0.3f, 0.0f, 1.0f, &lr->pct_start, err)) ||
        (st = read_float_except(cfg, s, "div_factor", 25.0f, 0.0f, 1e6f, 0.0f,
                                "the cycle starts at learning_rate / div_factor",
                                &lr->div_factor, err)) ||
        (st = read_float_except(cfg, s, "final_div_factor", 1e4f, 0.0f, 1e6f, 0.0f,
                                "the cycle ends at learning_rate / div_factor / "
                                "final_div_factor", &lr->final_div_factor, err)))
        return st;
    lr->policy = (st_lr_policy)policy;
    if ((st = read_ramp(cfg, s, lr, err)))
        return st;
    st_cfg_option *o = st_cfg_find(s, "pct_start");
    if (o && (lr->pct_start == 0.0f || lr->pct_start == 1.0f))
        return st_fail(err, ST_EINPUT, "%s:%d: [%s] pct_start=%s: expected a number in 0..1 "
                       "other than 0 and 1 (the cycle rises for that part of it, then falls)",
                       cfg->path, o->line, s->type, o->val);
    if (lr->policy == ST_LR_STEPS) {
        o = st_cfg_find(s, "steps");
        if (lr->n_steps == 0 || lr->n_steps != n_scales)
            return st_fail(err, ST_EINPUT, "%s:%d: policy=steps needs steps= and scales= lists "
                           "of the same length (got %d steps, %d scales)", cfg->path,
                           o ? o->line : s->line, lr->n_steps, n_scales);
        for (int i = 1; i < lr->n_steps; i++)
            if (lr->steps[i] < lr->steps[i - 1])
                return st_fail(err, ST_EINPUT, "%s:%d: steps= must not decrease (%d after %d)",
                               cfg->path, o->line, lr->steps[i], lr->steps[i - 1]);
    }
    return ST_OK;
}

/* Whether rule reads the [net] key (its row of ST_SOLVER_RULES). */
static int rule_reads(st_solver_rule rule, const char *key)
{
    const char *k = st_solver_rules[rule].keys;
    size_t len = strlen(key);
    while (*k) {
        if (strncmp(k, key, len) == 0 && (k[len] == ' ' || k[len] == '\0'))
            return 1;
        k += strcspn(k, " ");
        k += strspn(k, " ");
    }
    return 0;
}

/* One warning per update-rule key given that the chosen rule ignores
 * (momentum= is left alone: Darknet cfgs give it whatever the rule). */
static void warn_unused_solver_keys(const st_cfg *cfg, st_cfg_section *s,
                                    const st_solver_cfg *c, const st_log *log)
{
    static const char *const keys[] = {"B1", "B2", "eps", "eps_mode", "rms_decay", "delta"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        st_cfg_option *o = st_cfg_find(s, keys[i]);
        if (!o || rule_reads(c->rule, keys[i]))
            continue;
        char whose[128] = ""; /* "AdaGrad's, RMSProp's and AdaDelta's" */
        int readers = 0, named = 0;
        for (int r = 0; r < ST_SOLVER_RULE_COUNT; r++)
            readers += rule_reads((st_solver_rule)r, keys[i]);
        for (int r = 0; r < ST_SOLVER_RULE_COUNT; r++) {
            if (!rule_reads((st_solver_rule)r, keys[i]))
                continue;
            size_t len = strlen(whose);
            snprintf(whose + len, sizeof whose - len, "%s%s",
                     named == 0 ? "" : named == readers - 1 ? " and " : ", ",
                     st_solver_rules[r].whose);
            named++;
        }
        st_warn(log, "%s:%d: [%s] %s= has no effect with solver=%s (it is %s)", cfg->path,
                o->line, s->type, keys[i], st_solver_rule_names[c->rule], whose);
    }
}

/* The update rule and its keys: solver= (Caffe's names), Darknet's adam=1
 * (the same as solver=adam), momentum=, decay=, decay_mode=, B1=, B2=, eps= (Darknet's
 * Adam), eps_mode=, rms_decay= and delta= (Caffe's). Every key is read whatever the
 * rule, so a Darknet cfg with B1= and no adam=1 still loads. */
static st_status read_solver(const st_cfg *cfg, st_cfg_section *s, st_solver_cfg *c,
                             const st_log *log, st_error *err)
{
    int rule, adam, decay_mode, eps_mode;
    st_status st;
    if ((st = st_cfg_enum(cfg, s, "solver", st_solver_rule_names, ST_SOLVER_SGD, &rule,
                          err)) ||
        (st = st_cfg_int(cfg, s, "adam", 0, 0, 1, &adam, err)) ||
        (st = st_cfg_float(cfg, s, "momentum", 0.9f, 0.0f, 1.0f, &c->momentum, err)) ||
        (st = st_cfg_float(cfg, s, "decay", 0.0001f, 0.0f, 1.0f, &c->decay, err)) ||
        (st = st_cfg_enum(cfg, s, "decay_mode", st_decay_mode_names, ST_DECAY_DARKNET,
                          &decay_mode, err)) ||
        (st = read_float_except(cfg, s, "B1", 0.9f, 0.0f, 1.0f, 1.0f,
                                "Adam's bias correction divides by 1 - B1^t", &c->beta1, err)) ||
        (st = read_float_except(cfg, s, "B2", 0.999f, 0.0f, 1.0f, 1.0f,
                                "Adam would never update", &c->beta2, err)) ||
        (st = read_float_except(cfg, s, "eps", 0.0000001f, 0.0f, 1.0f, 0.0f,
                                "Adam divides by sqrt(v) + eps", &c->eps, err)) ||
        (st = st_cfg_enum(cfg, s, "eps_mode", st_eps_mode_names, ST_EPS_CAFFE, &eps_mode,
                          err)) ||
        (st = read_float_except(cfg, s, "rms_decay", 0.99f, 0.0f, 1.0f, 1.0f,
                                "RMSProp's history would stay 0", &c->rms_decay, err)) ||
        (st = read_float_except(cfg, s, "delta", 1e-8f, 0.0f, 1.0f, 0.0f,
                                "AdaGrad, RMSProp and AdaDelta divide by it", &c->delta, err)))
        return st;
    c->rule = (st_solver_rule)rule;
    c->decay_mode = (st_decay_mode)decay_mode;
    c->eps_mode = (st_eps_mode)eps_mode;
    if (adam) {
        st_cfg_option *a = st_cfg_find(s, "adam"), *o = st_cfg_find(s, "solver");
        if (o && c->rule != ST_SOLVER_ADAM)
            return st_fail(err, ST_EINPUT, "%s:%d: [%s] adam=1 conflicts with solver=%s at line "
                           "%d: adam=1 means solver=adam; give one of them", cfg->path,
                           a->line, s->type, o->val, o->line);
        c->rule = ST_SOLVER_ADAM;
    }
    warn_unused_solver_keys(cfg, s, c, log);
    return ST_OK;
}

st_status st_hparams_parse(st_cfg *cfg, st_hparams *hp, const st_log *log, st_error *err)
{
    memset(hp, 0, sizeof *hp);
    st_cfg_section *s = &cfg->secs[0];
    if (strcmp(s->type, "net") != 0 && strcmp(s->type, "network") != 0)
        return st_fail(err, ST_EINPUT, "%s:%d: the first section is [%s]: expected [net]",
                       cfg->path, s->line, s->type);
    int max_batches;
    st_status st;
    if ((st = st_cfg_int(cfg, s, "batch", 1, 1, 1 << 20, &hp->batch, err)) ||
        (st = st_cfg_int(cfg, s, "subdivisions", 1, 1, 1 << 20, &hp->subdivisions, err)) ||
        (st = st_cfg_int(cfg, s, "height", 0, 1, 1 << 16, &hp->input.h, err)) ||
        (st = st_cfg_int(cfg, s, "width", 0, 1, 1 << 16, &hp->input.w, err)) ||
        (st = st_cfg_int(cfg, s, "channels", 0, 1, 1 << 16, &hp->input.c, err)) ||
        (st = read_solver(cfg, s, &hp->solver, log, err)) ||
        (st = st_cfg_int(cfg, s, "max_batches", 0, 0, 1 << 30, &max_batches, err)) ||
        (st = read_schedule(cfg, s, &hp->solver.lr, err)) ||
        (st = read_data_keys(cfg, s, &hp->data, &hp->data_line, err)))
        return st;
    if (hp->input.h == 0 || hp->input.w == 0 || hp->input.c == 0)
        return st_fail(err, ST_EINPUT, "%s:%d: [%s] needs height=, width= and channels= "
                       "(the input image shape)", cfg->path, s->line, s->type);
    if ((double)hp->input.h * hp->input.w * hp->input.c > (double)(1 << 28))
        return st_fail(err, ST_EINPUT, "%s:%d: input %d x %d x %d is larger than %d values",
                       cfg->path, s->line, hp->input.w, hp->input.h, hp->input.c, 1 << 28);
    hp->max_batches = max_batches;
    hp->solver.lr.max_batches = max_batches;
    if ((st = read_transform(cfg, s, hp, err)))
        return st;
    return st_cfg_finish_section(cfg, s, "net", net_ignored, log, err);
}

st_status st_data_paths_load(const char *path, st_data_paths *d, const st_log *log,
                             st_error *err)
{
    st_cfg cfg;
    st_status st = st_cfg_load_flat(&cfg, path, "data", err);
    if (st != ST_OK)
        return st;
    static const char *const darknet_only[] = {"backup", "top", "eval", NULL};
    st = read_data_keys(&cfg, &cfg.secs[0], d, NULL, err);
    if (st == ST_OK)
        st = st_cfg_finish_section(&cfg, &cfg.secs[0], "data", darknet_only, log, err);
    st_cfg_free(&cfg);
    return st;
}

st_status st_hparams_settings(const st_cfg *cfg, char **text, size_t *len, st_error *err)
{
    return st_cfg_settings(cfg, net_unsettled, text, len, err);
}

int st_hparams_settings_differ(const st_cfg *cfg, const char *text, size_t len,
                               const char *other, char *msg, size_t size)
{
    return st_cfg_settings_differ(cfg, net_unsettled, text, len, other, msg, size);
}
