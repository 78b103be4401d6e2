/* The ONNX reader's ops: one reader per op, each turning its node into a
 * layer or folding it into the layer before, and their table (ox_ops),
 * from which an unsupported op's message lists the supported ones. */
#include "onnx_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/strlist.h"

/* ---- the ops ---- */

/* A weighted node's operands: its data (input 0), its weight (1) and,
 * where it may have one and has, its bias (2; else b NULL, bc 0). */
typedef struct ox_weighted {
    ox_value *in;
    const Onnx__TensorProto *wt, *bt;
    const float *w, *b;
    size_t wc, bc;
} ox_weighted;

static st_status ox_read_weighted(ox *x, int node, int may_have_bias, ox_weighted *v)
{
    memset(v, 0, sizeof *v);
    st_status st;
    if ((st = ox_read(x, node, 0, &v->in)) ||
        (st = ox_floats(x, node, 1, &v->wt, &v->w, &v->wc)))
        return st;
    if (may_have_bias && ox_input(x->g->node[node], 2))
        return ox_floats(x, node, 2, &v->bt, &v->b, &v->bc);
    return ST_OK;
}

/* The layer's tensors from v: the weights (rows: ox_tensor_add's) and the
 * bias if any. */
static void ox_add_weighted(ox *x, int node, ox_layer *c, const ox_weighted *v, size_t rows)
{
    const Onnx__NodeProto *n = x->g->node[node];
    ox_tensor_add(c, "weights", node, n->input[1], v->w, v->wc, rows);
    if (v->b)
        ox_tensor_add(c, "biases", node, n->input[2], v->b, v->bc, 0);
}

static st_status op_conv(ox *x, int node, int arg)
{
    const Onnx__NodeProto *n = x->g->node[node];
    ox_weighted v;
    long ks[2], strides[2] = {1, 1}, pads[4] = {0, 0, 0, 0}, dil[2] = {1, 1}, group;
    int has_k, has_s, has_p, has_d, l = 0;
    st_status st;
    if ((st = ox_known_attrs(x, node, "kernel_shape,strides,pads,dilations,group,auto_pad")) ||
        (st = ox_read_weighted(x, node, 1, &v)) ||
        (st = ox_ints_attr(x, node, "kernel_shape", 2, ks, &has_k)) ||
        (st = ox_ints_attr(x, node, "strides", 2, strides, &has_s)) ||
        (st = ox_ints_attr(x, node, "pads", 4, pads, &has_p)) ||
        (st = ox_ints_attr(x, node, "dilations", 2, dil, &has_d)) ||
        (st = ox_int_attr(x, node, "group", 1, 1, 1 << 16, &group)) ||
        (st = ox_string_attr(x, node, "auto_pad", "NOTSET")))
        return st;
    char dims[96];
    if (v.wt->n_dims != 4)
        return ox_node_fail(x, node, "weight '%s' has %zu dims: expected 4 (OIHW) of 2-D "
                            "convolution", n->input[1], v.wt->n_dims);
    if (v.wt->dims[0] < 1 || v.wt->dims[1] < 1 || v.wt->dims[2] < 1 || v.wt->dims[3] < 1)
        return ox_node_fail(x, node, "weight '%s' has dims %s: a size of 0 (expected filters, "
                            "channels, height and width of at least 1)", n->input[1],
                            ox_dims_text(v.wt, dims, sizeof dims));
    long o = (long)v.wt->dims[0], kh = (long)v.wt->dims[2], kw = (long)v.wt->dims[3];
    if (kh != kw || (has_k && (ks[0] != kh || ks[1] != kw)))
        return ox_node_fail(x, node, "kernel %ldx%ld: singletrain's convolutions are square, "
                            "with kernel_shape the weight's", kh, kw);
    if (strides[0] != strides[1] || strides[0] < 1)
        return ox_node_fail(x, node, "strides %ld,%ld: expected two equal strides", strides[0],
                            strides[1]);
    if (pads[0] != pads[1] || pads[0] != pads[2] || pads[0] != pads[3])
        return ox_node_fail(x, node, "pads %ld,%ld,%ld,%ld: expected the same padding on "
                            "every side", pads[0], pads[1], pads[2], pads[3]);
    if (dil[0] != 1 || dil[1] != 1)
        return ox_node_fail(x, node, "dilations %ld,%ld: the backends have dilation 1 only",
                            dil[0], dil[1]);
    if (v.b && v.bc != (size_t)o)
        return ox_node_fail(x, node, "bias '%s' has %zu values for %ld filters", n->input[2],
                            v.bc, o);
    if ((st = ox_take(x, node, v.in)) ||
        (st = ox_new_layer(x, node, "convolutional", OX_CONV, &l)))
        return st;
    ox_layer *c = &x->layers[l];
    ox_opt(c, "filters", "%ld", o);
    ox_opt(c, "size", "%ld", kh);
    ox_opt(c, "stride", "%ld", strides[0]);
    ox_opt(c, "padding", "%ld", pads[0]);
    ox_opt(c, "groups", "%ld", group);
    ox_add_weighted(x, node, c, &v, 0);
    return ox_output(x, node, l, 0);
}

/* Gemm, MatMul: weights [in][out] (transpose) or [out][in]. */
static st_status op_fc(ox *x, int node, int gemm)
{
    const Onnx__NodeProto *n = x->g->node[node];
    ox_weighted v;
    long trans_a = 0, trans_b = 0;
    float alpha = 1, beta = 1;
    int l = 0;
    st_status st;
    if ((st = ox_known_attrs(x, node, gemm ? "alpha,beta,transA,transB" : "")) ||
        (st = ox_int_attr(x, node, "transA", 0, 0, 0, &trans_a)) ||
        (st = ox_int_attr(x, node, "transB", 0, 0, 1, &trans_b)) ||
        (st = ox_float_attr(x, node, "alpha", 1, &alpha)) ||
        (st = ox_float_attr(x, node, "beta", 1, &beta)) ||
        (st = ox_read_weighted(x, node, gemm, &v)))
        return st;
    if (alpha != 1 || beta != 1)
        return ox_node_fail(x, node, "alpha=%g beta=%g: only 1 and 1 are supported", alpha,
                            beta);
    if (!v.in->flat) /* Gemm takes [N, K]; MatMul of [N, C, H, W] multiplies each row of W */
        return ox_node_fail(x, node, "input '%s' is [N, C, H, W]: expected [N, K] (flatten it "
                            "first: Flatten with axis 1)", v.in->name);
    if (v.wt->n_dims != 2)
        return ox_node_fail(x, node, "weight '%s' has %zu dims: expected 2", n->input[1],
                            v.wt->n_dims);
    /* its inputs, the other dim, are checked against the layer it reads
     * after the build: 0 there is that layer's fault (a window larger than
     * its input), said by the build, or a count that does not fit */
    long out = (long)(trans_b ? v.wt->dims[0] : v.wt->dims[1]);
    char dims[64];
    if (out < 1)
        return ox_node_fail(x, node, "weight '%s' has dims %s%s: no outputs (expected at least "
                            "one)", n->input[1], ox_dims_text(v.wt, dims, sizeof dims),
                            trans_b ? " with transB=1" : "");
    if (v.b && (v.bc != (size_t)out || v.bt->n_dims > 2 ||
                (v.bt->n_dims == 2 && v.bt->dims[0] != 1)))
        return ox_node_fail(x, node, "bias '%s' has %zu values in %zu dims for %ld outputs: "
                            "expected [%ld] or [1, %ld] (no other broadcast)", n->input[2], v.bc,
                            v.bt->n_dims, out, out, out);
    if ((st = ox_take(x, node, v.in)) || (st = ox_new_layer(x, node, "connected", OX_FC, &l)))
        return st;
    ox_layer *c = &x->layers[l];
    ox_opt(c, "output", "%ld", out);
    ox_add_weighted(x, node, c, &v, trans_b ? 0 : (size_t)v.wt->dims[0]);
    return ox_output(x, node, l, 1);
}

static st_status op_add(ox *x, int node, int arg)
{
    const Onnx__NodeProto *n = x->g->node[node];
    st_status st = ox_known_attrs(x, node, "");
    if (st != ST_OK)
        return st;
    if (n->n_input != 2 || !ox_input(n, 0) || !ox_input(n, 1))
        return ox_node_fail(x, node, "expected two inputs");
    int k = ox_find_value(x, n->input[0]) ? 1 : 0; /* the constant one, if any */
    if (!ox_find_value(x, n->input[k]) && ox_constant(x, n->input[k], node)) {
        ox_value *v;
        const Onnx__TensorProto *t;
        const float *b;
        size_t bc;
        if ((st = ox_read(x, node, 1 - (size_t)k, &v)) ||
            (st = ox_floats(x, node, (size_t)k, &t, &b, &bc)))
            return st;
        ox_layer *l = ox_foldable(x, v, 1 << OX_FC | 1 << OX_CONV);
        if (!l || l->bn || ox_tensor_find(l, "biases"))
            return ox_node_fail(x, node, "adds a constant: supported only as the bias of a "
                                "MatMul, Gemm or Conv without one, read by nothing else");
        /* ONNX broadcasts from the last axis: one value per channel is
         * [C] (or [1, C]) after an inner product, [C, 1, 1] after a conv */
        const int64_t *d = t->dims;
        size_t nd = t->n_dims;
        int per_channel = l->kind == OX_FC ? nd == 1 || (nd == 2 && d[0] == 1)
                                           : (nd == 3 && d[1] == 1 && d[2] == 1) ||
                                                 (nd == 4 && d[0] == 1 && d[2] == 1 && d[3] == 1);
        if (!per_channel)
            return ox_node_fail(x, node, "adds '%s' of %zu dims: a bias is one value per "
                                "channel, [C] after a MatMul or Gemm, [C, 1, 1] after a Conv",
                                n->input[k], nd);
        ox_tensor_add(l, "biases", node, n->input[k], b, bc, 0);
        l->uses--;
        return ox_output(x, node, v->layer, v->flat);
    }
    ox_value *a, *b;
    int l = 0;
    if ((st = ox_read(x, node, 0, &a)) || (st = ox_read(x, node, 1, &b)))
        return st;
    if (b->layer == x->n_layers - 1 && a->layer != b->layer) { /* the last layer first */
        ox_value *t = a;
        a = b;
        b = t;
    }
    if (b->layer < 0)
        return ox_node_fail(x, node, "adds the graph input '%s': singletrain's shortcut adds "
                            "an earlier layer's output", b->name);
    int from = b->layer;
    if ((st = ox_take(x, node, a)) || (st = ox_new_layer(x, node, "shortcut", OX_SHORTCUT, &l)))
        return st;
    x->layers[l].from = from;
    ox_opt(&x->layers[l], "from", "%d", from);
    return ox_output(x, node, l, a->flat);
}

static st_status op_activation(ox *x, int node, int act)
{
    ox_value *v;
    st_status st = ox_known_attrs(x, node, act == ST_ACT_LEAKY ? "alpha" : "");
    if (st == ST_OK && act == ST_ACT_LEAKY) {
        float alpha;
        st = ox_float_attr(x, node, "alpha", 0.01f, &alpha);
        if (st == ST_OK && alpha != 0.1f)
            st = ox_node_fail(x, node, "alpha=%g: singletrain's leaky activation has slope "
                              "0.1 (Darknet's)", alpha);
    }
    if (st == ST_OK)
        st = ox_read(x, node, 0, &v);
    if (st != ST_OK)
        return st;
    const int kinds = 1 << OX_FC | 1 << OX_CONV | 1 << OX_SHORTCUT;
    ox_layer *l = ox_foldable(x, v, kinds);
    ox_layer *pool = ox_foldable(x, v, 1 << OX_MAXPOOL);
    if (!l && pool && pool->src >= 0) { /* act(max(x)) = max(act(x)): act is monotone */
        ox_value under = {NULL, pool->src, 0, 0};
        l = ox_foldable(x, &under, kinds);
    }
    if (!l)
        return ox_node_fail(x, node, "singletrain applies an activation as part of the Conv, "
                            "Gemm, MatMul or Add that makes its input (or the input of the "
                            "MaxPool that does), and '%s' is not such an output read by this "
                            "node alone (or it has an activation already)", v->name);
    l->act = act;
    x->layers[v->layer].uses--;
    return ox_output(x, node, v->layer, v->flat);
}

/* MaxPool, AveragePool: window, strides, pads. */
static st_status op_pool(ox *x, int node, int max)
{
    ox_value *in;
    long ks[2], strides[2] = {1, 1}, pads[4] = {0, 0, 0, 0}, dil[2] = {1, 1}, ceil_mode, order,
         include;
    int has_k, has_s, has_p, has_d, l = 0;
    st_status st;
    if ((st = ox_known_attrs(x, node, max ? "kernel_shape,strides,pads,dilations,ceil_mode,"
                             "auto_pad,storage_order" : "kernel_shape,strides,pads,ceil_mode,"
                             "auto_pad,count_include_pad")) ||
        (st = ox_ints_attr(x, node, "kernel_shape", 2, ks, &has_k)) ||
        (st = ox_ints_attr(x, node, "strides", 2, strides, &has_s)) ||
        (st = ox_ints_attr(x, node, "pads", 4, pads, &has_p)) ||
        (st = ox_ints_attr(x, node, "dilations", 2, dil, &has_d)) ||
        (st = ox_int_attr(x, node, "ceil_mode", 0, 0, 0, &ceil_mode)) ||
        (st = ox_int_attr(x, node, "storage_order", 0, 0, 0, &order)) ||
        (st = ox_int_attr(x, node, "count_include_pad", 0, 0, 1, &include)) ||
        (st = ox_string_attr(x, node, "auto_pad", "NOTSET")) || (st = ox_read(x, node, 0, &in)))
        return st;
    if (!has_k || ks[0] < 1 || ks[1] < 1)
        return ox_node_fail(x, node, "kernel_shape: expected two positive sizes");
    if (dil[0] != 1 || dil[1] != 1)
        return ox_node_fail(x, node, "dilations %ld,%ld: only 1,1", dil[0], dil[1]);
    if (max) {
        if (ks[0] != ks[1] || strides[0] != strides[1] || strides[0] < 1)
            return ox_node_fail(x, node, "kernel %ldx%ld, strides %ld,%ld: singletrain's "
                                "max pooling has a square window and equal strides", ks[0],
                                ks[1], strides[0], strides[1]);
        if (pads[0] != pads[1] || pads[2] != pads[3] || pads[2] - pads[0] < 0 ||
            pads[2] - pads[0] > 1)
            return ox_node_fail(x, node, "pads %ld,%ld,%ld,%ld: expected top = left, bottom = "
                                "right, and bottom the top or one more", pads[0], pads[1],
                                pads[2], pads[3]);
        if ((st = ox_take(x, node, in)) ||
            (st = ox_new_layer(x, node, "maxpool", OX_MAXPOOL, &l)))
            return st;
        ox_opt(&x->layers[l], "size", "%ld", ks[0]);
        ox_opt(&x->layers[l], "stride", "%ld", strides[0]);
        ox_opt(&x->layers[l], "padding", "%ld", pads[0] + pads[2]);
        return ox_output(x, node, l, 0);
    }
    if (pads[0] || pads[1] || pads[2] || pads[3])
        return ox_node_fail(x, node, "pads: singletrain's average pooling is global (a window "
                            "the whole input, no padding)");
    if ((st = ox_take(x, node, in)) || (st = ox_new_layer(x, node, "avgpool", OX_AVG, &l)))
        return st;
    x->layers[l].pool_h = (int)ks[0];
    x->layers[l].pool_w = (int)ks[1];
    return ox_output(x, node, l, 0);
}

static st_status op_global_pool(ox *x, int node, int arg)
{
    ox_value *in;
    int l = 0;
    st_status st;
    if ((st = ox_known_attrs(x, node, "")) || (st = ox_read(x, node, 0, &in)) ||
        (st = ox_take(x, node, in)) || (st = ox_new_layer(x, node, "avgpool", OX_AVG, &l)))
        return st;
    return ox_output(x, node, l, 0);
}

static st_status op_batchnorm(ox *x, int node, int arg)
{
    const Onnx__NodeProto *n = x->g->node[node];
    ox_value *in;
    const Onnx__TensorProto *t;
    const float *p[4];
    size_t c[4];
    float eps, momentum;
    long training, spatial;
    st_status st;
    if ((st = ox_known_attrs(x, node, "epsilon,momentum,training_mode,spatial")) ||
        (st = ox_float_attr(x, node, "epsilon", 1e-5f, &eps)) ||
        (st = ox_float_attr(x, node, "momentum", 0.9f, &momentum)) ||
        (st = ox_int_attr(x, node, "training_mode", 0, 0, 0, &training)) ||
        (st = ox_int_attr(x, node, "spatial", 1, 1, 1, &spatial)) ||
        (st = ox_read(x, node, 0, &in)))
        return st;
    for (size_t k = 0; k < 4; k++)
        if ((st = ox_floats(x, node, k + 1, &t, &p[k], &c[k])))
            return st;
    for (size_t i = 0; i < c[3]; i++)
        if (p[3][i] < 0)
            return ox_node_fail(x, node, "running variance '%s' holds %g at [%zu]: expected "
                                "values of at least 0", n->input[4], p[3][i], i);
    /* ONNX's momentum is the share of the running value kept, singletrain's
     * st_param.keep; bn_momentum= is PyTorch's, 1 - it (1 - (1 - keep) is
     * keep again for keep >= 0.5, ONNX's default 0.9 included) */
    if (!(momentum >= 0.0f && momentum <= 1.0f))
        return ox_node_fail(x, node, "momentum=%g: expected a number in 0..1 (the share of "
                            "the running statistics kept each batch)", momentum);
    if (fabsf(eps - ST_BN_EPS) > 1e-9f)
        return ox_node_fail(x, node, "epsilon=%g: singletrain's batch normalization adds %g",
                            eps, ST_BN_EPS);
    for (int k = 1; k < 4; k++)
        if (c[k] != c[0])
            return ox_node_fail(x, node, "scale, B, mean and var have %zu, %zu, %zu and %zu "
                                "values: expected one per channel", c[0], c[1], c[2], c[3]);
    static const char *const roles[4] = {"scales", "biases", "rolling_mean", "rolling_variance"};
    ox_layer *l = ox_foldable(x, in, 1 << OX_FC | 1 << OX_CONV);
    int at = 0;
    if (l && !l->bn) {
        at = in->layer;
        ox_tensor *bias = ox_tensor_find(l, "biases");
        if (bias) { /* y = w x + b, normalized: the mean less b, exact in training */
            if (bias->count != c[2])
                return ox_node_fail(x, node, "%zu channels after a layer of %zu", c[2],
                                    bias->count);
            float *mean = ox_new_floats(x, c[2]);
            if (!mean)
                return ST_ENOMEM;
            for (size_t i = 0; i < c[2]; i++)
                mean[i] = p[2][i] - bias->data[i];
            p[2] = mean;
            ox_tensor_drop(l, "biases");
        }
        l->bn = 1;
        l->uses--;
        ox_opt(l, "batch_normalize", "1");
    } else {
        if ((st = ox_take(x, node, in)) ||
            (st = ox_new_layer(x, node, "batchnorm", OX_BN, &at)))
            return st;
        l = &x->layers[at];
    }
    ox_opt(l, "bn_momentum", "%.9g", 1.0f - momentum);
    for (int k = 0; k < 4; k++)
        ox_tensor_add(l, roles[k], node, n->input[k + 1], p[k], c[k], 0);
    return ox_output(x, node, at, in->flat);
}

static st_status op_concat(ox *x, int node, int arg)
{
    const Onnx__NodeProto *n = x->g->node[node];
    long axis;
    int l = 0;
    st_status st;
    if ((st = ox_known_attrs(x, node, "axis")) ||
        (st = ox_int_attr(x, node, "axis", 1, -3, 1, &axis)))
        return st;
    if (axis != 1 && axis != -3)
        return ox_node_fail(x, node, "axis=%ld: singletrain concatenates channels (axis 1)",
                            axis);
    if (n->n_input < 1 || n->n_input > ST_MAX_SRC)
        return ox_node_fail(x, node, "%zu inputs: expected 1..%d", n->n_input, ST_MAX_SRC);
    char list[128] = "";
    size_t used = 0;
    int flat = 1; /* [N, K] values joined: [N, K1 + K2 ...] */
    for (size_t k = 0; k < n->n_input; k++) {
        ox_value *v;
        if ((st = ox_read(x, node, k, &v)))
            return st;
        flat &= v->flat;
        if (v->layer < 0)
            return ox_node_fail(x, node, "concatenates the graph input '%s': singletrain's "
                                "route joins earlier layers' outputs", v->name);
        used += (size_t)snprintf(list + used, sizeof list - used, "%s%d", k ? "," : "",
                                 v->layer);
    }
    if ((st = ox_new_layer(x, node, "route", OX_OTHER, &l)))
        return st;
    ox_opt(&x->layers[l], "layers", "%s", list);
    return ox_output(x, node, l, flat);
}

/* Identity: the same values under another name; of a constant, a
 * constant (read where it is used, ox_constant). */
static st_status op_identity(ox *x, int node, int arg)
{
    ox_value *v;
    st_status st;
    const char *in = ox_input(x->g->node[node], 0);
    if ((st = ox_known_attrs(x, node, "")))
        return st;
    if (in && !ox_find_value(x, in) && ox_constant(x, in, node))
        return ST_OK;
    if ((st = ox_read(x, node, 0, &v)))
        return st;
    if (v->layer >= 0)
        x->layers[v->layer].uses--;
    return ox_output(x, node, v->layer, v->flat);
}

/* Flatten and Reshape: the same values, read as [N, C*H*W]. */
static st_status op_flatten(ox *x, int node, int reshape)
{
    ox_value *v;
    long axis;
    int64_t shape[2];
    size_t dims = 0;
    st_status st;
    if ((st = ox_known_attrs(x, node, reshape ? "allowzero" : "axis")) ||
        (st = ox_int_attr(x, node, "axis", 1, 1, 1, &axis)) || (st = ox_read(x, node, 0, &v)) ||
        (reshape && (st = ox_ints(x, node, 1, shape, 2, &dims))))
        return st;
    if (reshape && (dims != 2 || shape[1] == 0 || shape[1] < -1 || shape[0] < -1 ||
                    (shape[0] == -1 && shape[1] == -1)))
        return ox_node_fail(x, node, "a reshape to %zu dims: singletrain reshapes only to "
                            "[N, C*H*W] (2 dims, the samples first)", dims);
    if (reshape && shape[1] > 0) {
        ox_count_check *c = realloc(x->checks, (size_t)(x->n_checks + 1) * sizeof *c);
        if (!c)
            return st_fail(x->err, ST_ENOMEM, "out of memory reading %s", x->path);
        x->checks = c;
        c[x->n_checks++] = (ox_count_check){node, v->layer, (long)shape[1]};
    }
    if (v->layer >= 0)
        x->layers[v->layer].uses--;
    return ox_output(x, node, v->layer, 1);
}

static st_status op_dropout(ox *x, int node, int arg)
{
    const Onnx__NodeProto *n = x->g->node[node];
    ox_value *v;
    float ratio = 0.5f;
    int l = 0;
    st_status st;
    if ((st = ox_known_attrs(x, node, "ratio,seed,is_test")) ||
        (st = ox_float_attr(x, node, "ratio", 0.5f, &ratio)) || (st = ox_read(x, node, 0, &v)))
        return st;
    if (ox_input(n, 1)) {
        const Onnx__TensorProto *t;
        const float *r;
        size_t c = 0;
        if ((st = ox_floats(x, node, 1, &t, &r, &c)))
            return st;
        if (c != 1)
            return ox_node_fail(x, node, "ratio has %zu values: expected one", c);
        ratio = r[0];
    }
    if (!(ratio >= 0 && ratio <= 0.99f))
        return ox_node_fail(x, node, "ratio %g: expected 0..0.99", ratio);
    if ((st = ox_take(x, node, v)) || (st = ox_new_layer(x, node, "dropout", OX_OTHER, &l)))
        return st;
    ox_opt(&x->layers[l], "probability", "%.9g", ratio);
    return ox_output(x, node, l, v->flat);
}

static st_status op_lrn(ox *x, int node, int arg)
{
    ox_value *v;
    long size;
    float alpha, beta, bias;
    int l = 0;
    st_status st;
    if ((st = ox_known_attrs(x, node, "size,alpha,beta,bias")) ||
        (st = ox_int_attr(x, node, "size", 0, 1, 4095, &size)) ||
        (st = ox_float_attr(x, node, "alpha", 1e-4f, &alpha)) ||
        (st = ox_float_attr(x, node, "beta", 0.75f, &beta)) ||
        (st = ox_float_attr(x, node, "bias", 1.0f, &bias)) || (st = ox_read(x, node, 0, &v)))
        return st;
    if (size % 2 == 0)
        return ox_node_fail(x, node, "size=%ld: expected an odd size", size);
    if ((st = ox_take(x, node, v)) || (st = ox_new_layer(x, node, "lrn", OX_OTHER, &l)))
        return st;
    ox_opt(&x->layers[l], "size", "%ld", size);
    ox_opt(&x->layers[l], "alpha", "%.9g", alpha);
    ox_opt(&x->layers[l], "beta", "%.9g", beta);
    ox_opt(&x->layers[l], "k", "%.9g", bias);
    return ox_output(x, node, l, 0);
}

static st_status op_softmax(ox *x, int node, int arg)
{
    ox_value *v;
    long axis;
    int l = 0;
    st_status st;
    if ((st = ox_known_attrs(x, node, "axis")) ||
        (st = ox_int_attr(x, node, "axis", x->opset >= 13 ? -1 : 1, -4, 3, &axis)) ||
        (st = ox_read(x, node, 0, &v)))
        return st;
    /* singletrain's is over each sample's values: axis 1 or -1 of [N, K];
     * axis 1 of [N, C, H, W] before opset 13 (which flattens from the
     * axis), or from 13 on where H = W = 1 (checked after the build) */
    if (axis != 1 && !(axis == -1 && v->flat))
        return ox_node_fail(x, node, "axis=%ld of a %s tensor: singletrain's softmax is over "
                            "each sample's values (axis 1 of [N, classes])", axis,
                            v->flat ? "2-D" : "4-D");
    if ((st = ox_take(x, node, v)) || (st = ox_new_layer(x, node, "softmax", OX_SOFTMAX, &l)))
        return st;
    x->layers[l].flat_only = x->opset >= 13 && !v->flat;
    return ox_output(x, node, l, 1);
}

/* Transpose of a constant (PyTorch's bias-free Linear without constant
 * folding is MatMul(x, Transpose(W))): the permuted tensor, any perm of
 * up to OX_MAX_DIMS dims, computed here and read where it is used as a
 * constant (ox_constant). A layer's output is not transposed. */
#define OX_MAX_DIMS 8

static st_status op_transpose(ox *x, int node, int arg)
{
    const Onnx__NodeProto *n = x->g->node[node];
    const char *in = ox_input(n, 0);
    const Onnx__TensorProto *t;
    const float *src;
    size_t count;
    st_status st;
    if ((st = ox_known_attrs(x, node, "perm")))
        return st;
    if (in && ox_find_value(x, in))
        return ox_node_fail(x, node, "transposes '%s', a layer's output or the graph input: "
                            "singletrain transposes constants only (an initializer, at load)",
                            in);
    if ((st = ox_floats(x, node, 0, &t, &src, &count)))
        return st;
    size_t nd = t->n_dims;
    if (nd > OX_MAX_DIMS)
        return ox_node_fail(x, node, "input '%s' has %zu dims: expected at most %d", in, nd,
                            OX_MAX_DIMS);
    size_t perm[OX_MAX_DIMS], used = 0;
    const Onnx__AttributeProto *a = ox_attr(n, "perm");
    if (a && a->n_ints != nd)
        return ox_node_fail(x, node, "perm has %zu values for the %zu dims of '%s'",
                            a->n_ints, nd, in);
    for (size_t i = 0; i < nd; i++) {
        int64_t p = a ? a->ints[i] : (int64_t)(nd - 1 - i); /* default: reversed */
        if (p < 0 || p >= (int64_t)nd || (used & (size_t)1 << p))
            return ox_node_fail(x, node, "perm[%zu] = %lld: expected a permutation of 0..%zu",
                                i, (long long)p, nd - 1);
        used |= (size_t)1 << p;
        perm[i] = (size_t)p;
    }
    /* out[j0..j(nd-1)] = src at index i with i[perm[k]] = j[k] */
    size_t stride[OX_MAX_DIMS], pos[OX_MAX_DIMS] = {0};
    int64_t dims[OX_MAX_DIMS];
    for (size_t k = nd, s = 1; k-- > 0; s *= (size_t)t->dims[k])
        stride[k] = s;
    for (size_t k = 0; k < nd; k++)
        dims[k] = t->dims[perm[k]];
    float *dst = ox_new_floats(x, count);
    if (!dst)
        return ST_ENOMEM;
    for (size_t j = 0; j < count; j++) {
        size_t from = 0;
        for (size_t k = 0; k < nd; k++)
            from += pos[k] * stride[perm[k]];
        dst[j] = src[from];
        for (size_t k = nd; k-- > 0 && ++pos[k] == (size_t)dims[k];)
            pos[k] = 0;
    }
    return ox_add_derived(x, node, nd, dims, dst, count);
}

/* A Constant node: read where it is used (ox_constant). */
static st_status op_constant(ox *x, int node, int arg)
{
    return ST_OK;
}

/* The ops, each with its handler and the handler's argument; the list in
 * messages comes from it. Adding an op: a handler here, its row. */
static const struct {
    const char *op;
    st_status (*read)(ox *x, int node, int arg);
    int arg;
} ox_ops[] = {
    {"Conv", op_conv, 0},
    {"Gemm", op_fc, 1},
    {"MatMul", op_fc, 0},
    {"Add", op_add, 0},
    {"Relu", op_activation, ST_ACT_RELU},
    {"LeakyRelu", op_activation, ST_ACT_LEAKY},
    {"Sigmoid", op_activation, ST_ACT_LOGISTIC},
    {"Tanh", op_activation, ST_ACT_TANH},
    {"MaxPool", op_pool, 1},
    {"AveragePool", op_pool, 0},
    {"GlobalAveragePool", op_global_pool, 0},
    {"BatchNormalization", op_batchnorm, 0},
    {"Concat", op_concat, 0},
    {"Flatten", op_flatten, 0},
    {"Reshape", op_flatten, 1},
    {"Identity", op_identity, 0},
    {"Dropout", op_dropout, 0},
    {"LRN", op_lrn, 0},
    {"Softmax", op_softmax, 0},
    {"LogSoftmax", op_softmax, 0},
    {"Constant", op_constant, 0},
    {"Transpose", op_transpose, 0},
};

#define OX_N_OPS (sizeof ox_ops / sizeof ox_ops[0])

/* One node. */
st_status ox_node(ox *x, int node)
{
    const Onnx__NodeProto *n = x->g->node[node];
    const char *op = n->op_type ? n->op_type : "";
    if (n->domain && n->domain[0] && strcmp(n->domain, "ai.onnx") != 0)
        return ox_node_fail(x, node, "domain '%s': only the default ONNX domain", n->domain);
    st_status st = ox_unique_outputs(x, node);
    if (st != ST_OK)
        return st;
    for (size_t i = 0; i < OX_N_OPS; i++)
        if (strcmp(op, ox_ops[i].op) == 0)
            return ox_ops[i].read(x, node, ox_ops[i].arg);
    char list[512] = "";
    for (size_t i = 0; i < OX_N_OPS; i++)
        st_strlist_append(list, sizeof list, ox_ops[i].op, i, OX_N_OPS, ", ");
    return ox_node_fail(x, node, "unsupported op (supported: %s)%s", list,
                        strcmp(op, "Shape") == 0 ? "; a reshape computed from the input's "
                        "shape (PyTorch's x.view(x.size(0), -1)) is one: flatten with "
                        "torch.flatten(x, 1) instead" : "");
}
