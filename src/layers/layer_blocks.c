/* The batch-normalization block and activation slot shared by layers. */
#include "layer_blocks.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

st_status st_bn_add_params(st_build *b, int c, st_bn_params *bp, st_error *err)
{
    bp->c = c;
    /* PyTorch's momentum: running = (1 - m) running + m batch; the default
     * 1 - ST_STAT_KEEP is Darknet's 0.01, and 1 - (1 - keep) gives keep
     * back exactly (Sterbenz), so runs without the key are unchanged. */
    float m, keep;
    st_status st;
    if ((st = st_cfg_float(b->cfg, b->sec, "bn_momentum", 1.0f - ST_STAT_KEEP, 0.0f, 1.0f, &m,
                           err)))
        return st;
    keep = 1.0f - m;
    if ((st = st_layer_param(b, "scales", (size_t)c, ST_PARAM_BIAS, ST_INIT_ONE, 0, &bp->scales,
                             err)) ||
        (st = st_layer_param(b, "biases", (size_t)c, ST_PARAM_BIAS, ST_INIT_ZERO, 0,
                             &bp->biases, err)) ||
        (st = st_layer_stat(b, "rolling_mean", (size_t)c, ST_INIT_ZERO, keep, &bp->mean, err)) ||
        (st = st_layer_stat(b, "rolling_variance", (size_t)c, ST_INIT_ONE, keep, &bp->var,
                            err)))
        return st;
    return ST_OK;
}

int st_bn_darknet(st_darknet_tensor *t)
{
    t[0] = (st_darknet_tensor){"scales", ST_DARKNET_AS_IS};
    t[1] = (st_darknet_tensor){"rolling_mean", ST_DARKNET_AS_IS};
    t[2] = (st_darknet_tensor){"rolling_variance", ST_DARKNET_VARIANCE};
    return 3;
}

st_status st_bn_setup(st_setup *s, const st_layer *l, int c, int h, int w, st_act act,
                      const void *src_layout, int dst_plain, st_bn_state *bs, st_error *err)
{
    st_bnorm_desc d = {.base.kind = ST_K_BNORM, .c = c, .h = h, .w = w, .eps = ST_BN_EPS,
                       .act = act};
    char name[32];
    snprintf(name, sizeof name, "%d.bn", l->index);
    bs->per_channel = (long)h * w;
    st_status st = st_kslot_create(s, &d.base, src_layout, 0, dst_plain, name, &bs->k, err);
    if (st == ST_OK)
        st = st_setup_floats(s, l, "bn_mean", (size_t)c, &bs->mean_off, err);
    if (st == ST_OK)
        st = st_setup_floats(s, l, "bn_var", (size_t)c, &bs->var_off, err);
    return st;
}

st_status st_bn_forward(const st_bn_params *bp, st_bn_state *bs, const st_pass *p,
                        const float *x, float *y, st_error *err)
{
    float *mean = st_arena_at(p->arena, bs->mean_off);
    float *var = st_arena_at(p->arena, bs->var_off);
    if (!p->training) {
        memcpy(mean, p->params + bp->mean, (size_t)bp->c * sizeof *mean);
        memcpy(var, p->params + bp->var, (size_t)bp->c * sizeof *var);
    }
    st_kargs a = {.src = x, .dst = y, .weights = p->params + bp->scales,
                  .bias = p->params + bp->biases, .mean = mean, .var = var};
    return st_kslot_forward(&bs->k, p, &a, err);
}

st_status st_bn_backward(const st_bn_params *bp, st_bn_state *bs, const st_pass *p,
                         const float *x, const float *dy, float *dx, int accumulate,
                         st_error *err)
{
    float *mean = st_arena_at(p->arena, bs->mean_off);
    float *var = st_arena_at(p->arena, bs->var_off);
    st_kargs a = {.src = x, .weights = p->params + bp->scales, .bias = p->params + bp->biases,
                  .mean = mean, .var = var, .diff_dst = dy, .diff_src = dx,
                  .accumulate = accumulate, .diff_weights = p->grads + bp->scales,
                  .diff_bias = p->grads + bp->biases};
    st_status st = st_kslot_backward_data(&bs->k, p, &a, err);
    if (st != ST_OK)
        return st;
    /* The running statistics are updated from the sum over workers of
     * n * (batch statistic), scaled by 1/batch at aggregation: the average
     * of the workers' statistics weighted by their shard sizes. The running
     * variance is the unbiased one, as Caffe and PyTorch keep it. */
    double m = (double)p->n * bs->per_channel;
    double unbias = m > 1.0 ? m / (m - 1.0) : 1.0;
    for (int c = 0; c < bp->c; c++) {
        p->grads[bp->mean + c] = (float)p->n * mean[c];
        p->grads[bp->var + c] = (float)(p->n * var[c] * unbias);
    }
    return ST_OK;
}

/* count values per sample in the given layout. */
static st_status act_setup(st_setup *s, const st_layer *l, st_act act, size_t count,
                           const void *layout, st_act_slot *a, st_error *err)
{
    memset(a, 0, sizeof *a);
    a->act = act;
    if (act == ST_ACT_LINEAR || !s->training)
        return ST_OK;
    st_act_desc d = {.base.kind = ST_K_ACT, .count = count, .act = act};
    char name[32];
    snprintf(name, sizeof name, "%d.act", l->index);
    return st_kslot_create(s, &d.base, layout, 0, 0, name, &a->k, err);
}

st_status st_act_slot_backward(const st_act_slot *a, const st_pass *p, const float *out,
                               float *diff, st_error *err)
{
    if (!a->k.k)
        return ST_OK;
    st_kargs args = {.dst = (float *)out, .diff_dst = diff, .diff_src = diff};
    return st_kslot_backward_data(&a->k, p, &args, err);
}

static void act_release(st_act_slot *a)
{
    st_kslot_release(&a->k);
}

st_status st_layer_read_activation(st_build *b, st_act def, st_act *act, st_error *err)
{
    int v;
    st_status st = st_cfg_enum(b->cfg, b->sec, "activation", st_act_names, (int)def, &v, err);
    *act = (st_act)v;
    return st;
}

st_status st_wl_add_shift(st_build *b, st_wl_params *wp, int c, st_error *err)
{
    if (wp->batch_normalize)
        return st_bn_add_params(b, c, &wp->bn, err);
    st_cfg_option *o = st_cfg_find(b->sec, "bn_momentum");
    if (o)
        return st_fail(err, ST_EINPUT, "%s:%d: [%s] bn_momentum=%s: the layer has no batch norm "
                       "(batch_normalize=1 gives it one)", b->cfg->path, o->line, b->sec->type,
                       o->val);
    return st_layer_param(b, "biases", (size_t)c, ST_PARAM_BIAS, ST_INIT_ZERO, 0, &wp->biases,
                          err);
}

st_status st_wl_setup(st_setup *s, const st_layer *l, const st_wl_params *wp, st_kdesc *desc,
                      const char *kernel_name, st_wl_state *ws, st_error *err)
{
    char name[32];
    snprintf(name, sizeof name, "%d.%s", l->index, kernel_name);
    desc->dst_bf16 = s->dst_bf16 && !wp->batch_normalize;
    st_status st = st_kslot_create(s, desc, s->in_layout[0], 1,
                                   s->dst_plain && !wp->batch_normalize, name, &ws->main, err);
    if (st != ST_OK)
        return st;
    const st_kernel *last = ws->main.k;
    if (wp->batch_normalize) {
        snprintf(name, sizeof name, "%d.pre_bn", l->index);
        st = st_arena_reserve(s->arena, name, last->dst_bytes, &ws->pre_off, err);
        if (st == ST_OK)
            st = st_bn_setup(s, l, l->out.c, l->out.h, l->out.w, wp->act, last->dst_layout,
                             s->dst_plain, &ws->bn, err);
        if (st != ST_OK)
            return st;
        /* In place only when batch norm's input and output share a layout. */
        const st_kernel *bn = ws->bn.k.k;
        ws->pre_delta = bn->dst_layout != last->dst_layout || bn->dst_bytes != last->dst_bytes;
        if (ws->pre_delta && s->training) {
            snprintf(name, sizeof name, "%d.pre_bn_delta", l->index);
            st = st_arena_reserve(s->arena, name, last->dst_bytes, &ws->pre_delta_off, err);
            if (st != ST_OK)
                return st;
        }
        last = bn;
    }
    s->out_layout = last->dst_layout;
    s->out_bytes = last->dst_bytes;
    s->out_stored_bf16 = last->dst_bf16;
    /* a batch norm that applies the activation's derivative itself leaves
     * no activation kernel to run backward */
    st_act act = last->act_in_backward ? ST_ACT_LINEAR : wp->act;
    return act_setup(s, l, act, st_shape_count(l->out), last->dst_layout, &ws->act, err);
}

st_status st_wl_forward(const st_wl_params *wp, st_wl_state *ws, const st_pass *p, st_error *err)
{
    float *pre = wp->batch_normalize ? st_arena_at(p->arena, ws->pre_off) : p->dst;
    st_kargs a = {.src = p->src[0], .dst = pre, .weights = p->params + wp->weights,
                  .weights_bf16 = st_pass_weights_bf16(p, wp->weights),
                  .bias = wp->batch_normalize ? NULL : p->params + wp->biases};
    st_status st = st_kslot_forward(&ws->main, p, &a, err);
    if (st != ST_OK || !wp->batch_normalize)
        return st;
    return st_bn_forward(&wp->bn, &ws->bn, p, pre, p->dst, err);
}

st_status st_wl_backward(const st_wl_params *wp, st_wl_state *ws, const st_pass *p, st_error *err)
{
    st_status st = st_act_slot_backward(&ws->act, p, p->dst, p->diff_dst, err);
    if (st != ST_OK)
        return st;
    float *pre = p->dst, *pre_delta = p->diff_dst;
    if (wp->batch_normalize) {
        pre = st_arena_at(p->arena, ws->pre_off);
        if (ws->pre_delta)
            pre_delta = st_arena_at(p->arena, ws->pre_delta_off);
        st = st_bn_backward(&wp->bn, &ws->bn, p, pre, p->diff_dst, pre_delta, 0, err);
        if (st != ST_OK)
            return st;
    }
    st_kargs a = {.src = p->src[0], .dst = pre, .weights = p->params + wp->weights,
                  .weights_bf16 = st_pass_weights_bf16(p, wp->weights), .diff_dst = pre_delta, .diff_weights = p->grads + wp->weights,
                  .diff_bias = wp->batch_normalize ? NULL : p->grads + wp->biases};
    st = st_kslot_backward_weights(&ws->main, p, &a, err);
    if (st != ST_OK || !p->diff_src[0])
        return st;
    a.diff_src = p->diff_src[0];
    a.accumulate = p->accumulate[0];
    return st_kslot_backward_data(&ws->main, p, &a, err);
}

int st_wl_bf16_io(const st_wl_params *wp)
{
    int sign_only = wp->act == ST_ACT_LINEAR || wp->act == ST_ACT_RELU || wp->act == ST_ACT_LEAKY;
    return ST_BF16_TAKES | (!wp->batch_normalize && sign_only ? ST_BF16_GIVES : 0);
}

void st_wl_release(st_wl_state *ws)
{
    st_kslot_release(&ws->main);
    st_kslot_release(&ws->bn.k);
    act_release(&ws->act);
}

st_status st_slot_setup(st_setup *s, const st_layer *l, st_kdesc *d, const char *kernel_name,
                        void **state, st_error *err)
{
    st_kslot *slot = st_calloc(1, sizeof *slot, kernel_name, err);
    if (!slot)
        return ST_ENOMEM;
    *state = slot;
    char name[32];
    snprintf(name, sizeof name, "%d.%s", l->index, kernel_name);
    d->dst_bf16 = s->dst_bf16;
    st_status st = st_kslot_create(s, d, s->in_layout[0], 1, s->dst_plain, name, slot, err);
    if (st == ST_OK) {
        s->out_layout = slot->k->dst_layout;
        s->out_bytes = slot->k->dst_bytes;
        s->out_stored_bf16 = slot->k->dst_bf16;
    }
    return st;
}

st_status st_slot_forward(const st_layer *l, void *state, const st_pass *p, st_error *err)
{
    (void)l;
    st_kargs a = {.src = p->src[0], .dst = p->dst};
    return st_kslot_forward(state, p, &a, err);
}

st_status st_slot_backward(const st_layer *l, void *state, const st_pass *p, st_error *err)
{
    (void)l;
    if (!p->diff_src[0])
        return ST_OK;
    st_kargs a = {.src = p->src[0], .dst = p->dst, .diff_dst = p->diff_dst,
                  .diff_src = p->diff_src[0], .accumulate = p->accumulate[0]};
    return st_kslot_backward_data(state, p, &a, err);
}

void st_slot_release(void *state)
{
    if (state)
        st_kslot_release(state);
    free(state);
}
