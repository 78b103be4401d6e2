/* Shared layer machinery: kernel slots and the helpers layer builders use. */
#include "layers/layer.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/clock.h"

st_status st_kslot_create(st_setup *s, st_kdesc *d, const void *src_layout, int on_input,
                          int dst_plain, const char *name, st_kslot *slot, st_error *err)
{
    memset(slot, 0, sizeof *slot);
    d->name = name;
    d->backward = s->training;
    d->src_grad = s->training && (!on_input || s->src_grad);
    d->n = s->n;
    d->batch_sizes = s->batch_sizes;
    d->n_batch_sizes = s->n_batch_sizes;
    d->src_layout = src_layout;
    d->dst_plain = dst_plain;
    st_status st = s->backend->kernel_create(s->bctx, d, &slot->k, err);
    if (st != ST_OK)
        return st;
    st_arena_reserve_scratch(s->arena, slot->k->scratch_bytes);
    if (slot->k->workspace_bytes == 0)
        return ST_OK;
    char view[48];
    snprintf(view, sizeof view, "%s.workspace", name);
    return st_arena_reserve(s->arena, view, slot->k->workspace_bytes, &slot->ws_off, err);
}

void st_kslot_release(st_kslot *slot)
{
    if (slot->k)
        slot->k->ops->destroy(slot->k);
    slot->k = NULL;
}

static void kslot_fill(const st_kslot *slot, const st_pass *p, st_kargs *a)
{
    a->workspace = slot->k->workspace_bytes ? st_arena_at(p->arena, slot->ws_off) : NULL;
    a->scratch = slot->k->scratch_bytes ? st_arena_scratch(p->arena) : NULL;
    a->n = p->n;
    a->training = p->training;
}

st_status st_kslot_forward(const st_kslot *slot, const st_pass *p, st_kargs *a,
                           st_error *err)
{
    kslot_fill(slot, p, a);
    return slot->k->ops->forward(slot->k, a, err);
}

st_status st_kslot_backward_data(const st_kslot *slot, const st_pass *p, st_kargs *a,
                                 st_error *err)
{
    kslot_fill(slot, p, a);
    return slot->k->ops->backward_data(slot->k, a, err);
}

st_status st_kslot_backward_weights(const st_kslot *slot, const st_pass *p, st_kargs *a,
                                    st_error *err)
{
    kslot_fill(slot, p, a);
    double t0 = p->time ? st_now() : 0.0;
    st_status st = slot->k->ops->backward_weights(slot->k, a, err);
    if (p->time)
        p->time->backward_weights += st_now() - t0;
    return st;
}

void st_layer_host_copy(const st_layer *l, int pass, st_stream_work *w)
{
    (void)pass;
    st_stream_work_add(w, 0.0, st_shape_count(l->out), 2.0);
}

st_status st_layer_bad_shape(const st_build *b, st_error *err, const char *fmt, ...)
{
    char what[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return st_fail(err, ST_EINPUT, "%s:%d: [%s] (layer %d, input %d x %d x %d): %s",
                   b->cfg->path, b->sec->line, b->sec->type, b->index, b->in.w, b->in.h,
                   b->in.c, what);
}

st_status st_layer_param(st_build *b, const char *role, size_t count, st_param_kind kind,
                         st_init_kind init, float scale, size_t *offset, st_error *err)
{
    int id;
    st_status st = st_params_add(b->params, b->index, role, count, kind, init, scale, &id, err);
    if (st == ST_OK)
        *offset = b->params->p[id].offset;
    return st;
}

st_status st_layer_stat(st_build *b, const char *role, size_t count, st_init_kind init,
                        float keep, size_t *offset, st_error *err)
{
    int id;
    st_status st = st_params_add(b->params, b->index, role, count, ST_PARAM_STAT, init, 0, &id,
                                 err);
    if (st == ST_OK) {
        b->params->p[id].keep = keep;
        *offset = b->params->p[id].offset;
    }
    return st;
}

st_status st_layer_ref(st_build *b, const char *key, int value, int *index, st_error *err)
{
    int at = value < 0 ? b->index + value : value;
    if (b->index == 0) {
        st_cfg_option *o = st_cfg_find(b->sec, key);
        return st_fail(err, ST_EINPUT, "%s:%d: [%s] %s=: the first layer has no earlier layer "
                       "to refer to", b->cfg->path, o ? o->line : b->sec->line, b->sec->type, key);
    }
    if (at < 0 || at >= b->index) {
        st_cfg_option *o = st_cfg_find(b->sec, key);
        return st_fail(err, ST_EINPUT,
                       "%s:%d: [%s] %s=%s: %d refers to layer %d; expected an earlier layer "
                       "(0..%d, or -1..-%d relative)",
                       b->cfg->path, o ? o->line : b->sec->line, b->sec->type, key,
                       o ? o->val : "?", value, at, b->index - 1, b->index);
    }
    *index = at;
    return ST_OK;
}

st_status st_layer_only(st_build *b, const char *key, const char *supported, st_error *err)
{
    st_cfg_option *o = st_cfg_find(b->sec, key);
    if (!o || strcmp(o->val, supported) == 0)
        return ST_OK;
    return st_fail(err, ST_EINPUT, "%s:%d: [%s] %s=%s is not supported by singletrain (only %s)",
                   b->cfg->path, o->line, b->sec->type, key, o->val, supported);
}

const uint16_t *st_pass_weights_bf16(const st_pass *p, size_t off)
{
    return p->params_bf16 ? p->params_bf16 + off : NULL;
}

st_status st_setup_floats(st_setup *s, const st_layer *l, const char *role, size_t count,
                          size_t *off, st_error *err)
{
    char view[48];
    snprintf(view, sizeof view, "%d.%s", l->index, role);
    return st_arena_reserve(s->arena, view, count * sizeof(float), off, err);
}
