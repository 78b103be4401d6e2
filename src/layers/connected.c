/* [connected]: inner product over the flattened C x H x W input, then batch
 * norm or bias, then activation. Darknet semantics: weights [output, inputs]
 * initialized U(-1, 1) * sqrt(2 / inputs); default activation logistic.
 *
 * Model-parallel training (st_setup.mp, --parallel hybrid; a layer without
 * batch norm, whose statistics would then span the whole batch): the T
 * workers' shards form one batch of B samples in a shared buffer X [B, in];
 * worker r owns output neurons [o0, o1) (weight rows, contiguous) and
 * computes its block Y[:, o0:o1] over the whole batch, and its weight and
 * bias gradient rows from the block dY[:, o0:o1] (summed over the batch
 * once: nothing to aggregate), straight into the shared gradient arena, or
 * into its scratch and applied at once (st_mp_group.apply). The
 * gradient at its own shard's input it computes alone: its rows of dY are
 * its own. The blocks sit one after the other in one shared buffer, Y's
 * and then dY's: a row of Y is read, and then the same row of dY written,
 * only by the worker whose shard it is. Two barriers forward (X written,
 * Y written), one backward (dY written). Inference (the test phase) runs
 * data-parallel with the whole weight matrix. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layer_blocks.h"

typedef struct connected_layer {
    st_layer base;
    int outputs;
    st_wl_params wp;
} connected_layer;

static st_status connected_build(st_build *b, st_layer *base, st_error *err)
{
    connected_layer *l = (connected_layer *)base;
    st_status st;
    if ((st = st_cfg_int(b->cfg, b->sec, "output", 1, 1, 1 << 24, &l->outputs, err)) ||
        (st = st_cfg_int(b->cfg, b->sec, "batch_normalize", 0, 0, 1, &l->wp.batch_normalize,
                         err)) ||
        (st = st_layer_read_activation(b, ST_ACT_LOGISTIC, &l->wp.act, err)))
        return st;
    size_t inputs = st_shape_count(b->in);
    if ((double)inputs * l->outputs > 2e9)
        return st_layer_bad_shape(b, err, "%zu inputs x %d outputs is too many weights",
                                  inputs, l->outputs);
    base->out = (st_shape){l->outputs, 1, 1};
    base->flops = 2.0 * (double)inputs * l->outputs;
    if ((st = st_layer_param(b, "weights", inputs * (size_t)l->outputs, ST_PARAM_WEIGHT,
                             ST_INIT_UNIFORM, sqrtf(2.0f / (float)inputs), &l->wp.weights,
                             err)))
        return st;
    return st_wl_add_shift(b, &l->wp, l->outputs, err);
}

/* This worker's part of a model-parallel layer (training only). */
typedef struct connected_mp {
    const st_mp_group *g;
    int o0, o1;        /* its output neurons */
    st_kslot slice;    /* [B, in] -> [B, o1 - o0], bias and activation fused */
    int b_max;         /* samples of the largest batch */
    size_t grad_at;    /* with g->apply: its gradient rows [o1 - o0, in], then the
                          bias's [o1 - o0], at this offset of the arena's scratch */
    float *x;          /* shared [B, in] */
    float *blocks;     /* shared: worker k's block [B, o1_k - o0_k] of Y, then of dY,
                          at b_max * o0_k */
} connected_mp;

typedef struct connected_state {
    st_wl_state ws;  /* data-parallel: every pass without mp, and inference */
    connected_mp mp;  /* mp.g NULL: not model-parallel */
} connected_state;

static int connected_model_parallel(const st_layer *base)
{
    return !((const connected_layer *)base)->wp.batch_normalize;
}

/* Output neurons [*o0, *o1) of worker r of T. */
static void mp_neurons(int outputs, int r, int T, int *o0, int *o1)
{
    *o0 = (int)((long)outputs * r / T);
    *o1 = (int)((long)outputs * (r + 1) / T);
}

static st_status mp_setup(const connected_layer *l, const st_setup *s, connected_mp *m,
                          st_error *err)
{
    const st_mp_group *g = s->mp;
    size_t in = st_shape_count(l->base.in), out = (size_t)l->outputs;
    int b_max = 0;
    for (int k = 0; k < s->n_mp_batch_sizes; k++)
        if (s->mp_batch_sizes[k] > b_max)
            b_max = s->mp_batch_sizes[k];
    m->g = g;
    m->b_max = b_max;
    mp_neurons(l->outputs, g->rank, g->size, &m->o0, &m->o1);
    int i = l->base.index;
    size_t bx = (size_t)b_max * in * sizeof(float), by = (size_t)b_max * out * sizeof(float);
    if (!(m->x = g->shared(g->ctx, i, 0, bx, err)) ||
        !(m->blocks = g->shared(g->ctx, i, 1, by, err)))
        return ST_ENOMEM;
    int width = m->o1 - m->o0;
    if (width == 0) /* more workers than neurons: this one only meets the others */
        return ST_OK;
    st_setup whole = *s;
    whole.n = b_max;
    whole.batch_sizes = s->mp_batch_sizes;
    whole.n_batch_sizes = s->n_mp_batch_sizes;
    whole.src_grad = 0; /* the input's gradient comes from the data-parallel kernel */
    st_fc_desc d = {{.kind = ST_K_FC}, (int)in, width, 1, l->wp.act};
    char name[32];
    snprintf(name, sizeof name, "%d.fc_slice", i);
    st_status st = st_kslot_create(&whole, &d.base, NULL, 1, 1, name, &m->slice, err);
    if (st == ST_OK && g->apply) { /* after the kernel's own scratch */
        m->grad_at = st_align_up(m->slice.k->scratch_bytes, ST_ALIGN);
        st_arena_reserve_scratch(s->arena, m->grad_at + (size_t)width * (in + 1) *
                                                            sizeof(float));
    }
    return st;
}

/* Between this shard's rows [n, out] (rows [first, + n) of the batch) and
 * the workers' blocks: gather (to_rows) or scatter. */
static void mp_rows(const connected_mp *m, int outputs, int first, int n, float *rows,
                    int to_rows)
{
    for (int k = 0; k < m->g->size; k++) {
        int o0, o1;
        mp_neurons(outputs, k, m->g->size, &o0, &o1);
        size_t width = (size_t)(o1 - o0);
        float *block = m->blocks + (size_t)m->b_max * (size_t)o0;
        for (int b = 0; b < n && width > 0; b++) {
            float *row = rows + (size_t)b * (size_t)outputs + o0;
            float *in_block = block + (size_t)(first + b) * width;
            if (to_rows)
                memcpy(row, in_block, width * sizeof(float));
            else
                memcpy(in_block, row, width * sizeof(float));
        }
    }
}

static st_status connected_setup(const st_layer *base, st_setup *s, void **state,
                                 st_error *err)
{
    const connected_layer *l = (const connected_layer *)base;
    connected_state *cs = st_calloc(1, sizeof *cs, "connected state", err);
    if (!cs)
        return ST_ENOMEM;
    *state = cs;
    st_fc_desc d = {{.kind = ST_K_FC}, (int)st_shape_count(base->in), l->outputs,
                    !l->wp.batch_normalize, l->wp.batch_normalize ? ST_ACT_LINEAR : l->wp.act};
    if (s->mp)
        s->dst_plain = 1; /* the shards' rows of Y, whose columns the workers write */
    st_status st = st_wl_setup(s, base, &l->wp, &d.base, "fc", &cs->ws, err);
    if (st == ST_OK && s->mp && s->training)
        st = mp_setup(l, s, &cs->mp, err);
    return st;
}

/* Forward over the whole batch (p->batch_n samples), this worker's shard
 * being rows [p->batch_first, + p->n). Every worker passes both barriers,
 * whatever fails. */
static st_status mp_forward(const connected_layer *l, connected_mp *m, const st_pass *p,
                            st_error *err)
{
    size_t in = st_shape_count(l->base.in);
    memcpy(m->x + (size_t)p->batch_first * in, p->src[0], (size_t)p->n * in * sizeof(float));
    m->g->barrier(m->g->ctx);
    st_status st = ST_OK;
    if (m->o1 > m->o0) {
        st_pass whole = *p;
        whole.n = p->batch_n;
        st_kargs a = {.src = m->x, .dst = m->blocks + (size_t)m->b_max * (size_t)m->o0,
                      .weights = p->params + l->wp.weights + (size_t)m->o0 * in,
                      .bias = p->params + l->wp.biases + m->o0};
        st = st_kslot_forward(&m->slice, &whole, &a, err);
    }
    m->g->barrier(m->g->ctx);
    mp_rows(m, l->outputs, p->batch_first, p->n, p->dst, 1);
    return st;
}

/* Backward: this shard's input gradient needs only its own rows of dY,
 * all of them here, and the whole weight matrix (the data-parallel kernel);
 * the weight gradient of this worker's neurons needs their column of dY
 * over the whole batch: one barrier, after every worker wrote its rows.
 * The shared X and dY are next written in the next iteration's forward,
 * after the scheduler's barriers. */
static st_status mp_backward(const connected_layer *l, connected_state *cs, const st_pass *p,
                             st_error *err)
{
    connected_mp *m = &cs->mp;
    size_t in = st_shape_count(l->base.in);
    st_status st =
        p->n ? st_act_slot_backward(&cs->ws.act, p, p->dst, p->diff_dst, err) : ST_OK;
    mp_rows(m, l->outputs, p->batch_first, p->n, p->diff_dst, 0);
    if (st == ST_OK && p->n && p->diff_src[0]) {
        st_kargs a = {.src = p->src[0], .dst = p->dst, .weights = p->params + l->wp.weights,
                      .diff_dst = p->diff_dst, .diff_src = p->diff_src[0],
                      .accumulate = p->accumulate[0]};
        st = st_kslot_backward_data(&cs->ws.main, p, &a, err);
    }
    m->g->barrier(m->g->ctx);
    if (m->o1 == m->o0 || st != ST_OK)
        return st;
    st_pass whole = *p;
    whole.n = p->batch_n;
    size_t width = (size_t)(m->o1 - m->o0), w_at = l->wp.weights + (size_t)m->o0 * in,
           b_at = l->wp.biases + (size_t)m->o0;
    float *dy = m->blocks + (size_t)m->b_max * (size_t)m->o0, *dw, *db;
    if (m->g->apply) {
        dw = (float *)((char *)st_arena_scratch(p->arena) + m->grad_at);
        db = dw + width * in;
    } else {
        dw = m->g->grads + w_at;
        db = m->g->grads + b_at;
    }
    st_kargs a = {.src = m->x, .dst = dy, .weights = p->params + w_at, .diff_dst = dy,
                  .diff_weights = dw, .diff_bias = db};
    st = st_kslot_backward_weights(&m->slice, &whole, &a, err);
    if (st == ST_OK && m->g->apply) {
        m->g->apply(m->g->ctx, w_at, dw, width * in);
        m->g->apply(m->g->ctx, b_at, db, width);
    }
    return st;
}

static st_status connected_forward(const st_layer *base, void *state, const st_pass *p,
                                   st_error *err)
{
    const connected_layer *l = (const connected_layer *)base;
    connected_state *cs = state;
    if (cs->mp.g && p->training)
        return mp_forward(l, &cs->mp, p, err);
    return st_wl_forward(&l->wp, &cs->ws, p, err);
}

static st_status connected_backward(const st_layer *base, void *state, const st_pass *p,
                                    st_error *err)
{
    const connected_layer *l = (const connected_layer *)base;
    connected_state *cs = state;
    if (cs->mp.g)
        return mp_backward(l, cs, p, err);
    return st_wl_backward(&l->wp, &cs->ws, p, err);
}

static void connected_release(void *state)
{
    connected_state *cs = state;
    if (cs) {
        st_wl_release(&cs->ws);
        st_kslot_release(&cs->mp.slice);
    }
    free(cs);
}

static void connected_describe(const st_layer *base, char *buf, size_t size)
{
    snprintf(buf, size, "connected                            %4zu  ->  %4d",
             st_shape_count(base->in), base->out.c);
}

const st_layer_ops st_connected_ops = {
    .type = "connected",
    .size = sizeof(connected_layer),
    .model_parallel = connected_model_parallel,
    .build = connected_build,
    .setup = connected_setup,
    .forward = connected_forward,
    .backward = connected_backward,
    .release = connected_release,
    .describe = connected_describe,
};
