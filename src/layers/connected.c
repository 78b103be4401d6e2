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
 * data-parallel with the whole weight matrix.
 *
 * Across ranks (st_mp_group.nodes, --mp-group G; one worker per rank): the
 * layer's batch is the group's N samples, rank k's count[k] of them from
 * first[k]. Forward: X [N, in] all-gathered from the ranks' shards; rank
 * j computes its block Y[:, o0:o1] over the N samples; an all-to-all gives
 * each rank its own rows of every block, its shard's Y [n, out]. Backward:
 * an all-to-all takes each rank's rows of dY to the blocks' owners, dY[:,
 * o0:o1] over the N samples; the block's weight gradient from it and X;
 * the input gradient dX [N, in] = dY[:, o0:o1] W[o0:o1, :] is a partial
 * sum over the group, reduce-scattered to each rank's own samples. The
 * rank's weights outside its block are not read (they are not kept
 * current: parallel/, the trainer gathers them for tests and snapshots). */
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
                          at b_max * o0_k; across ranks, this rank's block of Y [N, o1 - o0]
                          and then of dY, at b_max * (o1 - o0) */
    /* across ranks: */
    int n_max;         /* samples of the rank's largest shard */
    float *rows;       /* [n_max, out]: the shard's rows of every block k, [n, o1_k - o0_k]
                          at n * o0_k */
    float *dx;         /* [b_max, in], the group's partial input gradient, then */
    float *dx_mine;    /* [n_max, in], the shard's, summed; NULL: no input gradient */
    int *ints;         /* [6 G]: the shards' first and count, two counts and displacements */
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

static int connected_mp_block(const st_layer *base, int r, int size, size_t ranges[4][2])
{
    const connected_layer *l = (const connected_layer *)base;
    size_t in = st_shape_count(base->in);
    int o0, o1;
    mp_neurons(l->outputs, r, size, &o0, &o1);
    ranges[0][0] = l->wp.weights + (size_t)o0 * in;
    ranges[0][1] = l->wp.weights + (size_t)o1 * in;
    ranges[1][0] = l->wp.biases + (size_t)o0;
    ranges[1][1] = l->wp.biases + (size_t)o1;
    return 2;
}

/* Across ranks: the buffers beside the shared ones mp_setup takes. */
static st_status mp_nodes_setup(const connected_layer *l, const st_setup *s, connected_mp *m,
                                st_error *err)
{
    const st_mp_group *g = s->mp;
    size_t in = st_shape_count(l->base.in), out = (size_t)l->outputs;
    int i = l->base.index;
    m->n_max = s->n;
    size_t rows = (size_t)m->n_max * out * sizeof(float);
    if (!(m->rows = g->shared(g->ctx, i, 2, rows, err)) ||
        !(m->ints = st_calloc(6 * (size_t)g->size, sizeof *m->ints, "model-parallel counts",
                              err)))
        return ST_ENOMEM;
    if (s->src_grad &&
        (!(m->dx = g->shared(g->ctx, i, 3, (size_t)m->b_max * in * sizeof(float), err)) ||
         !(m->dx_mine = g->shared(g->ctx, i, 4, (size_t)m->n_max * in * sizeof(float), err))))
        return ST_ENOMEM;
    return ST_OK;
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
    int width = m->o1 - m->o0;
    size_t bx = (size_t)b_max * in * sizeof(float), by = (size_t)b_max * out * sizeof(float);
    if (g->nodes) /* its own block of Y and of dY (a float without neurons) */
        by = width ? 2 * (size_t)b_max * (size_t)width * sizeof(float) : sizeof(float);
    if (!(m->x = g->shared(g->ctx, i, 0, bx, err)) ||
        !(m->blocks = g->shared(g->ctx, i, 1, by, err)))
        return ST_ENOMEM;
    st_status st = g->nodes ? mp_nodes_setup(l, s, m, err) : ST_OK;
    if (st != ST_OK)
        return st;
    if (width == 0) /* more workers than neurons: this one only meets the others */
        return ST_OK;
    st_setup whole = *s;
    whole.n = b_max;
    whole.batch_sizes = s->mp_batch_sizes;
    whole.n_batch_sizes = s->n_mp_batch_sizes;
    /* the input's gradient comes from the data-parallel kernel; across ranks,
     * the group's partial one from this block */
    whole.src_grad = g->nodes ? s->src_grad : 0;
    st_fc_desc d = {{.kind = ST_K_FC}, (int)in, width, 1, l->wp.act};
    char name[32];
    snprintf(name, sizeof name, "%d.fc_slice", i);
    st = st_kslot_create(&whole, &d.base, NULL, 1, 1, name, &m->slice, err);
    if (st == ST_OK && g->apply) { /* after the kernel's own scratch */
        m->grad_at = st_align_up(m->slice.k->scratch_bytes, ST_ALIGN);
        st_arena_reserve_scratch(s->arena, m->grad_at + (size_t)width * (in + 1) *
                                                            sizeof(float));
    }
    return st;
}

/* Between a shard's rows [n, out] (rows [first, + n) of the batch) and
 * the size parts' blocks, part k's [stride, o1_k - o0_k] at stride * o0_k
 * of blocks: gather (to_rows) or scatter. */
static void block_rows(float *blocks, int size, int stride, int outputs, int first, int n,
                       float *rows, int to_rows)
{
    for (int k = 0; k < size; k++) {
        int o0, o1;
        mp_neurons(outputs, k, size, &o0, &o1);
        size_t width = (size_t)(o1 - o0);
        float *block = blocks + (size_t)stride * (size_t)o0;
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

/* Between this worker's shard's rows and the workers' shared blocks. */
static void mp_rows(const connected_mp *m, int outputs, int first, int n, float *rows,
                    int to_rows)
{
    block_rows(m->blocks, m->g->size, m->b_max, outputs, first, n, rows, to_rows);
}

/* Across ranks: this iteration's shards of the group into m->ints' first
 * two [G] (first, count); into the next two pairs, counts and
 * displacements in floats: (ca, da) the shards' samples of per floats
 * each, (cb, db) block k's rows of this rank's n samples, [n, o1_k - o0_k]
 * at n * o0_k (st_mp_nodes' collectives take them by place in the
 * group). Returns N, the group's samples. */
static int mp_counts(const connected_mp *m, int outputs, int n, size_t per, int **first,
                     int **count, int **ca, int **da, int **cb, int **db)
{
    const st_mp_group *g = m->g;
    int G = g->size;
    *first = m->ints;
    *count = m->ints + G;
    *ca = m->ints + 2 * G;
    *da = m->ints + 3 * G;
    *cb = m->ints + 4 * G;
    *db = m->ints + 5 * G;
    int N = g->nodes->shard(g->ctx, *first, *count);
    for (int k = 0; k < G; k++) {
        int o0, o1;
        mp_neurons(outputs, k, G, &o0, &o1);
        (*ca)[k] = (int)((size_t)(*count)[k] * per);
        (*da)[k] = (int)((size_t)(*first)[k] * per);
        (*cb)[k] = n * (o1 - o0);
        (*db)[k] = n * o0;
    }
    return N;
}

/* Forward across ranks (see the top): every rank takes its part in every
 * collective, whatever failed. */
static st_status mp_nodes_forward(const connected_layer *l, connected_mp *m, const st_pass *p,
                                  st_error *err)
{
    const st_mp_group *g = m->g;
    size_t in = st_shape_count(l->base.in), width = (size_t)(m->o1 - m->o0);
    int *first, *count, *ca, *da, *cb, *db;
    int N = mp_counts(m, l->outputs, p->n, in, &first, &count, &ca, &da, &cb, &db);
    st_status st = g->nodes->allgather(g->ctx, p->src[0], m->x, ca, da, err);
    if (st == ST_OK && width > 0 && N > 0) {
        st_pass whole = *p;
        whole.n = N;
        size_t w_at = l->wp.weights + (size_t)m->o0 * in;
        st_kargs a = {.src = m->x, .dst = m->blocks, .weights = p->params + w_at,
                      .weights_bf16 = st_pass_weights_bf16(p, w_at),
                      .bias = p->params + l->wp.biases + m->o0};
        st = st_kslot_forward(&m->slice, &whole, &a, err);
    }
    for (int k = 0; k < g->size; k++) { /* to rank k, the block's rows of its shard */
        ca[k] = (int)((size_t)count[k] * width);
        da[k] = (int)((size_t)first[k] * width);
    }
    st_status xst = g->nodes->alltoall(g->ctx, m->blocks, ca, da, m->rows, cb, db, err);
    block_rows(m->rows, g->size, p->n, l->outputs, 0, p->n, p->dst, 1);
    return st != ST_OK ? st : xst;
}

/* Backward across ranks (see the top). */
static st_status mp_nodes_backward(const connected_layer *l, connected_state *cs,
                                   const st_pass *p, st_error *err)
{
    connected_mp *m = &cs->mp;
    const st_mp_group *g = m->g;
    size_t in = st_shape_count(l->base.in), width = (size_t)(m->o1 - m->o0);
    st_status st =
        p->n ? st_act_slot_backward(&cs->ws.act, p, p->dst, p->diff_dst, err) : ST_OK;
    block_rows(m->rows, g->size, p->n, l->outputs, 0, p->n, p->diff_dst, 0);
    int *first, *count, *ca, *da, *cb, *db;
    int N = mp_counts(m, l->outputs, p->n, width, &first, &count, &ca, &da, &cb, &db);
    float *dy = m->blocks + (size_t)m->b_max * width;
    st_status xst = g->nodes->alltoall(g->ctx, m->rows, cb, db, dy, ca, da, err);
    if (st == ST_OK)
        st = xst;
    st_pass whole = *p;
    whole.n = N;
    size_t w_at = l->wp.weights + (size_t)m->o0 * in, b_at = l->wp.biases + (size_t)m->o0;
    if (st == ST_OK && width > 0 && N > 0) {
        st_kargs a = {.src = m->x, .dst = dy, .weights = p->params + w_at, .diff_dst = dy,
                      .diff_weights = g->grads + w_at, .diff_bias = g->grads + b_at};
        st = st_kslot_backward_weights(&m->slice, &whole, &a, err);
    }
    if (!m->dx_mine)
        return st;
    if (st == ST_OK && width > 0 && N > 0) {
        st_kargs a = {.src = m->x, .dst = dy, .weights = p->params + w_at,
                      .weights_bf16 = st_pass_weights_bf16(p, w_at), .diff_dst = dy,
                      .diff_src = m->dx};
        st = st_kslot_backward_data(&m->slice, &whole, &a, err);
    } else if (N > 0) { /* no neurons here, or a failure: a zero part of the sum */
        memset(m->dx, 0, (size_t)N * in * sizeof(float));
    }
    for (int k = 0; k < g->size; k++)
        ca[k] = (int)((size_t)count[k] * in);
    xst = g->nodes->reduce_scatter(g->ctx, m->dx, m->dx_mine, ca, err);
    if (st == ST_OK)
        st = xst;
    float *dx = p->diff_src[0];
    size_t len = (size_t)p->n * in;
    if (st == ST_OK && dx && p->accumulate[0])
        for (size_t k = 0; k < len; k++)
            dx[k] += m->dx_mine[k];
    else if (st == ST_OK && dx)
        memcpy(dx, m->dx_mine, len * sizeof(float));
    return st;
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
        size_t w_at = l->wp.weights + (size_t)m->o0 * in;
        st_kargs a = {.src = m->x, .dst = m->blocks + (size_t)m->b_max * (size_t)m->o0,
                      .weights = p->params + w_at,
                      .weights_bf16 = st_pass_weights_bf16(p, w_at),
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
                      .weights_bf16 = st_pass_weights_bf16(p, l->wp.weights),
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
        return cs->mp.g->nodes ? mp_nodes_forward(l, &cs->mp, p, err)
                               : mp_forward(l, &cs->mp, p, err);
    return st_wl_forward(&l->wp, &cs->ws, p, err);
}

static st_status connected_backward(const st_layer *base, void *state, const st_pass *p,
                                    st_error *err)
{
    const connected_layer *l = (const connected_layer *)base;
    connected_state *cs = state;
    if (cs->mp.g)
        return cs->mp.g->nodes ? mp_nodes_backward(l, cs, p, err) : mp_backward(l, cs, p, err);
    return st_wl_backward(&l->wp, &cs->ws, p, err);
}

static void connected_release(void *state)
{
    connected_state *cs = state;
    if (cs) {
        st_wl_release(&cs->ws);
        st_kslot_release(&cs->mp.slice);
        free(cs->mp.ints);
    }
    free(cs);
}

static void connected_describe(const st_layer *base, char *buf, size_t size)
{
    snprintf(buf, size, "connected                            %4zu  ->  %4d",
             st_shape_count(base->in), base->out.c);
}

static void connected_graph(const st_layer *base, st_graph_node *g)
{
    const connected_layer *l = (const connected_layer *)base;
    *g = (st_graph_node){.op = ST_GRAPH_INNER, .inner = {l->wp.batch_normalize, l->wp.act}};
}

static int connected_bf16_io(const st_layer *base)
{
    return st_wl_bf16_io(&((const connected_layer *)base)->wp);
}

/* Darknet's order: the biases (batch norm's shift), the weights, batch norm. */
static int connected_darknet(const st_layer *base, st_darknet_tensor t[ST_DARKNET_MAX_TENSORS])
{
    int n = 0;
    t[n++] = (st_darknet_tensor){"biases", ST_DARKNET_AS_IS};
    t[n++] = (st_darknet_tensor){"weights", ST_DARKNET_TRANSPOSE};
    if (((const connected_layer *)base)->wp.batch_normalize)
        n += st_bn_darknet(t + n);
    return n;
}

const st_layer_ops st_connected_ops = {
    .type = "connected",
    .size = sizeof(connected_layer),
    .model_parallel = connected_model_parallel,
    .mp_block = connected_mp_block,
    .build = connected_build,
    .setup = connected_setup,
    .forward = connected_forward,
    .backward = connected_backward,
    .release = connected_release,
    .bf16_io = connected_bf16_io,
    .describe = connected_describe,
    .graph = connected_graph,
    .darknet = connected_darknet,
};
