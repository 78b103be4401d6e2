/* Reading the [net] section and --data files; see hparams.h. */
#include "hparams.h"

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

static const char *const data_keys[] = {"train", "train_labels", "test", "test_labels", NULL};

static char *data_slot(st_data_paths *d, int i)
{
    switch (i) {
    case 0: return d->train;
    case 1: return d->train_labels;
    case 2: return d->test;
    default: return d->test_labels;
    }
}

/* Copy the data keys present in sec into d; *line gets the first one's line. */
static st_status read_data_keys(const st_cfg *cfg, st_cfg_section *sec, st_data_paths *d,
                                int *line, st_error *err)
{
    for (int i = 0; data_keys[i]; i++) {
        st_cfg_option *o = st_cfg_find(sec, data_keys[i]);
        if (!o)
            continue;
        if (strlen(o->val) >= ST_PATH_MAX)
            return st_fail(err, ST_EINPUT, "%s:%d: %s= path is longer than %d bytes", cfg->path,
                           o->line, o->key, ST_PATH_MAX - 1);
        strcpy(data_slot(d, i), o->val);
        if (line && (*line == 0 || o->line < *line))
            *line = o->line;
    }
    return ST_OK;
}

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
        (st = st_cfg_int(cfg, s, "burn_in", 0, 0, 1 << 30, &lr->burn_in, err)) ||
        (st = st_cfg_int_list(cfg, s, "steps", lr->steps, ST_MAX_STEPS, &lr->n_steps, err)) ||
        (st = st_cfg_float_list(cfg, s, "scales", lr->scales, ST_MAX_STEPS, &n_scales, err)))
        return st;
    lr->policy = (st_lr_policy)policy;
    if (lr->policy == ST_LR_STEPS) {
        st_cfg_option *o = st_cfg_find(s, "steps");
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
        (st = st_cfg_float(cfg, s, "momentum", 0.9f, 0.0f, 1.0f, &hp->solver.momentum, err)) ||
        (st = st_cfg_float(cfg, s, "decay", 0.0001f, 0.0f, 1.0f, &hp->solver.decay, err)) ||
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
    return st_cfg_finish_section(cfg, s, "net", net_ignored, log, err);
}

st_status st_data_paths_load(const char *path, st_data_paths *d, const st_log *log,
                             st_error *err)
{
    st_cfg cfg;
    st_status st = st_cfg_load_flat(&cfg, path, err);
    if (st != ST_OK)
        return st;
    st = read_data_keys(&cfg, &cfg.secs[0], d, NULL, err);
    if (st == ST_OK)
        st = st_cfg_finish_section(&cfg, &cfg.secs[0], "data", NULL, log, err);
    st_cfg_free(&cfg);
    return st;
}
