/* [shortcut]: out = act(alpha * previous + beta * layer[from]), in plain C
 * (elementwise work that no library speeds up). Darknet semantics: `from`
 * is relative when negative; when the shapes differ, the smaller spatial
 * size is mapped onto the larger by an integer stride (Darknet's
 * shortcut_cpu) over the common channels, and the rest of the output is the
 * previous layer's output unscaled. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layers/layer.h"

typedef struct shortcut_layer {
    st_layer base;
    st_shape from;     /* shape of layer[src[1]] */
    float alpha, beta;
    st_act act;
} shortcut_layer;

static st_status shortcut_build(st_build *b, st_layer *base, st_error *err)
{
    shortcut_layer *l = (shortcut_layer *)base;
    st_status st;
    int from, act;
    if (!st_cfg_find(b->sec, "from"))
        return st_fail(err, ST_EINPUT, "%s:%d: [shortcut] needs from=LAYER", b->cfg->path,
                       b->sec->line);
    if ((st = st_cfg_int(b->cfg, b->sec, "from", 0, -1000000, 1000000, &from, err)) ||
        (st = st_layer_ref(b, "from", from, &base->src[1], err)) ||
        (st = st_cfg_enum(b->cfg, b->sec, "activation", st_act_names, ST_ACT_LINEAR, &act,
                          err)) ||
        (st = st_cfg_float(b->cfg, b->sec, "alpha", 1.0f, -1e6f, 1e6f, &l->alpha, err)) ||
        (st = st_cfg_float(b->cfg, b->sec, "beta", 1.0f, -1e6f, 1e6f, &l->beta, err)))
        return st;
    l->act = (st_act)act;
    base->n_src = 2;
    l->from = b->layers[base->src[1]]->out;
    st_shape o = base->out, f = l->from;
    int stride = f.w / o.w, sample = o.w / f.w;
    if (stride != f.h / o.h || sample != o.h / f.h)
        return st_layer_bad_shape(b, err, "from=%d has %d x %d x %d, which does not map onto "
                                  "%d x %d x %d by one integer stride", from, f.w, f.h, f.c,
                                  o.w, o.h, o.c);
    return ST_OK;
}

/* Whether the from-layer's shape is the output's (ResNet's identity shortcut). */
static int one_to_one(const shortcut_layer *l)
{
    st_shape f = l->from, o = l->base.out;
    return f.w == o.w && f.h == o.h && f.c == o.c;
}

/* Darknet's index mapping between the from-layer and the output (one
 * sample): for every mapped pair (o in the output, a in the from-layer),
 * y[o or a] += s * x[o or a], the flags saying which side each array is on
 * (s = 0 changes nothing and is skipped; equal shapes map one to one). */
static void mapped_axpy(const shortcut_layer *l, float s, const float *x, int x_is_from,
                        float *y, int y_is_from)
{
    st_shape f = l->from, o = l->base.out;
    if (s == 0.0f)
        return; /* alpha = 1: the outputs keep the previous layer's values */
    if (one_to_one(l)) { /* a plain axpy */
        size_t count = st_shape_count(o);
        for (size_t i = 0; i < count; i++)
            y[i] += s * x[i];
        return;
    }
    int stride = f.w / o.w < 1 ? 1 : f.w / o.w, sample = o.w / f.w < 1 ? 1 : o.w / f.w;
    int minw = f.w < o.w ? f.w : o.w, minh = f.h < o.h ? f.h : o.h, minc = f.c < o.c ? f.c : o.c;
    for (int k = 0; k < minc; k++)
        for (int j = 0; j < minh; j++)
            for (int i = 0; i < minw; i++) {
                size_t at_out = (size_t)i * sample + (size_t)o.w * ((size_t)j * sample + (size_t)o.h * k);
                size_t at_from = (size_t)i * stride + (size_t)f.w * ((size_t)j * stride + (size_t)f.h * k);
                y[y_is_from ? at_from : at_out] += s * x[x_is_from ? at_from : at_out];
            }
}

/* The identity-shaped shortcut adds its inputs element by element, so it
 * runs in any layout they share without padding (the backend says they
 * are one, and they hold exactly the tensor's values): its output and
 * gradients in it, no reorder to plain and back around it (a tenth of a
 * ResNet's iteration in oneDNN's reorders, measured). Otherwise, or when
 * its output must be plain, its inputs are asked plain. */
static st_status shortcut_setup(const st_layer *base, st_setup *s, void **state, st_error *err)
{
    (void)err;
    *state = NULL;
    const shortcut_layer *l = (const shortcut_layer *)base;
    const void *a = s->in_layout[0], *b = s->in_layout[1];
    if (!a && !b)
        return ST_OK;
    size_t values = (size_t)s->n * st_shape_count(base->out) * sizeof(float);
    if (!s->dst_plain && one_to_one(l) && a && b && s->backend->layouts_equal &&
        s->backend->layouts_equal(a, b) && s->in_bytes[0] == values &&
        s->in_bytes[1] == values) {
        s->out_layout = a;
        s->out_bytes = values;
        return ST_OK;
    }
    s->plain_inputs = 1;
    return ST_OK;
}

/* Whether [a, a + n) and [b, b + n) overlap. */
static int overlap(const float *a, const float *b, size_t n)
{
    return a < b + n && b < a + n;
}

/* The identity shortcut's forward with alpha = 1 and a linear or ReLU
 * activation in one pass: y = act(x + beta f), the general path's copy,
 * axpy and activation element by element, without its three passes over
 * memory; written for gcc to vectorize as fused_backward below (y apart
 * from x and f). x, f, y: [count] */
static __attribute__((noinline)) void fused_forward(const float *restrict x,
                                                    const float *restrict f, float *restrict y,
                                                    float beta, size_t count, int relu)
{
    for (size_t i = 0; i < count; i++) {
        float v = x[i] + beta * f[i];
        y[i] = relu ? (v > 0.0f ? v : 0.0f) : v;
    }
}

/* Whether an identity shortcut (alpha = 1, a linear or ReLU activation)
 * may take the fused passes. */
static int fused_kind(const shortcut_layer *l)
{
    return one_to_one(l) && l->alpha == 1.0f &&
           (l->act == ST_ACT_LINEAR || l->act == ST_ACT_RELU);
}

static st_status shortcut_forward(const st_layer *base, void *state, const st_pass *p,
                                  st_error *err)
{
    (void)state;
    (void)err;
    const shortcut_layer *l = (const shortcut_layer *)base;
    size_t out_n = st_shape_count(base->out), from_n = st_shape_count(l->from);
    size_t count = (size_t)p->n * out_n;
    if (fused_kind(l) && !overlap(p->dst, p->src[0], count) &&
        !overlap(p->dst, p->src[1], count)) {
        fused_forward(p->src[0], p->src[1], p->dst, l->beta, count, l->act == ST_ACT_RELU);
        return ST_OK;
    }
    memcpy(p->dst, p->src[0], count * sizeof(float));
    for (int n = 0; n < p->n; n++) {
        float *y = p->dst + (size_t)n * out_n;
        mapped_axpy(l, l->alpha - 1.0f, y, 0, y, 0); /* mapped outputs: alpha * previous */
        mapped_axpy(l, l->beta, p->src[1] + (size_t)n * from_n, 1, y, 0);
    }
    st_act_forward(l->act, p->dst, count);
    return ST_OK;
}

/* The identity shortcut's backward with alpha = 1 and a linear or ReLU
 * activation, in one pass over the gradient: g = act'(y) dy, diff_src[0] = g
 * and diff_src[1] = beta * g, each added to what is there when the pass
 * accumulates: the general path's sums, element by element in its order,
 * without its passes over memory (diff_dst is left as it came). Written
 * for gcc to vectorize: restrict pointers (the caller makes sure the four
 * buffers are distinct), the ReLU a select of a value loaded either way,
 * and a function of its own (noinline: it unswitches the loop on the flags
 * and vectorizes each version; inlined into its caller the loop stayed
 * scalar, a branch on each ReLU sign, a tenth of a ResNet's iteration).
 * y, dy, dprev, dfrom: [count] */
static __attribute__((noinline)) void
fused_backward(const float *restrict y, const float *restrict dy, float *restrict dprev,
               float *restrict dfrom, float beta, size_t count, int relu, int acc_prev,
               int acc_from)
{
    for (size_t i = 0; i < count; i++) {
        float d = dy[i], g = relu ? (y[i] > 0.0f ? d : 0.0f) : d;
        dprev[i] = acc_prev ? dprev[i] + g : g;
        dfrom[i] = acc_from ? dfrom[i] + beta * g : 0.0f + beta * g;
    }
}

/* Whether pass p of an identity shortcut (fused_kind) may take
 * fused_backward: both gradients wanted, in buffers apart from each other
 * and from dst and diff_dst (a layer added to itself takes the general
 * path). */
static int fusable(const shortcut_layer *l, const st_pass *p, size_t count)
{
    const float *a = p->diff_src[0], *b = p->diff_src[1];
    return fused_kind(l) && a && b && !overlap(a, b, count) &&
           !overlap(a, p->dst, count) && !overlap(a, p->diff_dst, count) &&
           !overlap(b, p->dst, count) && !overlap(b, p->diff_dst, count);
}

static st_status shortcut_backward(const st_layer *base, void *state, const st_pass *p,
                                   st_error *err)
{
    (void)state;
    (void)err;
    const shortcut_layer *l = (const shortcut_layer *)base;
    size_t out_n = st_shape_count(base->out), from_n = st_shape_count(l->from);
    if (fusable(l, p, (size_t)p->n * out_n)) {
        fused_backward(p->dst, p->diff_dst, p->diff_src[0], p->diff_src[1], l->beta,
                       (size_t)p->n * out_n, l->act == ST_ACT_RELU, p->accumulate[0],
                       p->accumulate[1]);
        return ST_OK;
    }
    st_act_backward(l->act, p->dst, p->diff_dst, p->diff_dst, (size_t)p->n * out_n);
    float *dprev = p->diff_src[0], *dfrom = p->diff_src[1];
    if (dprev) {
        for (int n = 0; n < p->n; n++) {
            float *dx = dprev + (size_t)n * out_n;
            const float *dy = p->diff_dst + (size_t)n * out_n;
            for (size_t i = 0; i < out_n; i++)
                dx[i] = p->accumulate[0] ? dx[i] + dy[i] : dy[i];
            mapped_axpy(l, l->alpha - 1.0f, dy, 0, dx, 0);
        }
    }
    if (dfrom) {
        if (!p->accumulate[1])
            memset(dfrom, 0, (size_t)p->n * from_n * sizeof *dfrom);
        for (int n = 0; n < p->n; n++)
            mapped_axpy(l, l->beta, p->diff_dst + (size_t)n * out_n, 0, dfrom + (size_t)n * from_n,
                        1);
    }
    return ST_OK;
}

/* The layer's work as elementary passes (layer.h's host_streams), as
 * Caffe's Eltwise (SUM) and ReLU layers make them: forward, the output
 * cleared, an axpy of each input (the other layer's per sample over the
 * mapped values when the shapes differ, costed as if contiguous) and the
 * activation when not linear; backward, the activation's gradient when not
 * linear, then each input's gradient a scaled copy of it (the other
 * layer's, when the shapes differ, cleared and added per sample). */
static void shortcut_host_streams(const st_layer *base, int pass, st_stream_work *w)
{
    const shortcut_layer *l = (const shortcut_layer *)base;
    size_t out_n = st_shape_count(base->out), from_n = st_shape_count(l->from);
    st_shape f = l->from, o = base->out;
    size_t mapped = (size_t)(f.c < o.c ? f.c : o.c) * (size_t)(f.h < o.h ? f.h : o.h) *
                    (size_t)(f.w < o.w ? f.w : o.w);
    int act = l->act != ST_ACT_LINEAR;
    if (pass == 0) {
        st_stream_work_add(w, 0.0, out_n, 1.0);
        st_stream_work_add(w, 0.0, out_n, 3.0);
        if (one_to_one(l))
            st_stream_work_add(w, 0.0, out_n, 3.0);
        else
            st_stream_work_add(w, 1.0, mapped, 3.0);
        if (act)
            st_stream_work_add(w, 0.0, out_n, 2.0);
        return;
    }
    if (act)
        st_stream_work_add(w, 0.0, out_n, 3.0);
    st_stream_work_add(w, 0.0, out_n, 2.0);
    if (one_to_one(l)) {
        st_stream_work_add(w, 0.0, out_n, 2.0);
        return;
    }
    st_stream_work_add(w, 0.0, from_n, 1.0);
    st_stream_work_add(w, 1.0, mapped, 3.0);
}

static void shortcut_describe(const st_layer *base, char *buf, size_t size)
{
    const shortcut_layer *l = (const shortcut_layer *)base;
    snprintf(buf, size, "res  %3d                %4d x%4d x%4d   ->  %4d x%4d x%4d", base->src[1],
             l->from.w, l->from.h, l->from.c, base->out.w, base->out.h, base->out.c);
}

static void shortcut_graph(const st_layer *base, st_graph_node *g)
{
    const shortcut_layer *l = (const shortcut_layer *)base;
    *g = (st_graph_node){.op = ST_GRAPH_ADD, .add = {l->alpha, l->beta, l->act}};
}

const st_layer_ops st_shortcut_ops = {
    .type = "shortcut",
    .size = sizeof(shortcut_layer),
    .host_streams = shortcut_host_streams,
    .shares_layout = 1,
    .short_name = "res",
    .build = shortcut_build,
    .setup = shortcut_setup,
    .forward = shortcut_forward,
    .backward = shortcut_backward,
    .describe = shortcut_describe,
    .graph = shortcut_graph,
};
