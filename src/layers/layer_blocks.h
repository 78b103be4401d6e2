/* Pieces shared by several layer files: the batch-normalization block of
 * [convolutional], [connected] and [batchnorm] (st_bn_*), the activation
 * kernel a layer runs backward before its own kernels (st_act_slot), the
 * weighted-layer sequence of [convolutional] and [connected] (st_wl_*), and
 * the one-kernel layers (st_slot_*). Private to src/layers/; the names
 * carry the st_ prefix because the library exports them to the layer
 * files. */
#ifndef ST_LAYER_BLOCKS_H
#define ST_LAYER_BLOCKS_H

#include "layers/layer.h"

/* Parameter offsets of one batch-norm block over c channels. */
typedef struct st_bn_params {
    int c;
    size_t scales, biases, mean, var;
} st_bn_params;

/* Per-worker state: the kernel and the batch statistics kept for backward. */
typedef struct st_bn_state {
    st_kslot k;
    size_t mean_off, var_off; /* [c] each */
    long per_channel;         /* H x W of one sample */
} st_bn_state;

st_status st_bn_add_params(st_build *b, int c, st_bn_params *bp, st_error *err);
/* The block's tensors in a Darknet .weights file (scales, running mean and
 * variance; its biases come where the layer's biases do) into t; returns 3. */
int st_bn_darknet(st_darknet_tensor *t);
/* src_layout / dst_plain: see st_kslot_create; the kernel is bs->k. */
st_status st_bn_setup(st_setup *s, const st_layer *l, int c, int h, int w, st_act act,
                      const void *src_layout, int dst_plain, st_bn_state *bs, st_error *err);
/* y = act(bn(x)) with the batch statistics (training) or the running ones;
 * x, y [n, c, h, w] in the kernel's layouts. */
st_status st_bn_forward(const st_bn_params *bp, st_bn_state *bs, const st_pass *p,
                        const float *x, float *y, st_error *err);
/* dy: gradient at bn's output (the caller has applied the activation's
 * derivative); dx may equal dy; NULL dx computes only the parameter
 * gradients. Also writes the batch statistics into the running-statistic
 * slots of the worker's gradient arena, from which the solver updates them. */
st_status st_bn_backward(const st_bn_params *bp, st_bn_state *bs, const st_pass *p,
                         const float *x, const float *dy, float *dx, int accumulate,
                         st_error *err);

/* The activation applied after a layer's kernels, for the backward pass. */
typedef struct st_act_slot {
    st_act act;
    st_kslot k; /* k.k == NULL for linear */
} st_act_slot;

/* diff = diff * f'(out), in place; out, diff [n, count] in the layer's
 * output layout. */
st_status st_act_slot_backward(const st_act_slot *a, const st_pass *p, const float *out,
                               float *diff, st_error *err);

/* The weighted-layer (wl) sequence of [convolutional] and [connected]: one kernel
 * with weights (its descriptor supplied by the layer), then batch norm or a
 * bias, then the activation (fused into the last kernel's forward). */
typedef struct st_wl_params {
    size_t weights, biases; /* biases unused with batch norm */
    int batch_normalize;
    st_bn_params bn;
    st_act act;
} st_wl_params;

typedef struct st_wl_state {
    st_kslot main;
    st_bn_state bn;
    st_act_slot act;
    size_t pre_off;       /* batch norm's input, when batch_normalize */
    size_t pre_delta_off; /* its gradient, when not in the output's layout */
    int pre_delta;        /* batch norm backward cannot run in place */
} st_wl_state;

/* Register the biases or the batch-norm block for c output channels. */
st_status st_wl_add_shift(st_build *b, st_wl_params *wp, int c, st_error *err);
/* desc: the main kernel, built without bias and activation when
 * batch_normalize. Sets s->out_layout and s->out_bytes. */
st_status st_wl_setup(st_setup *s, const st_layer *l, const st_wl_params *wp, st_kdesc *desc,
                      const char *kernel_name, st_wl_state *ws, st_error *err);
st_status st_wl_forward(const st_wl_params *wp, st_wl_state *ws, const st_pass *p, st_error *err);
st_status st_wl_backward(const st_wl_params *wp, st_wl_state *ws, const st_pass *p, st_error *err);
void st_wl_release(st_wl_state *ws);
/* st_layer_ops.bf16_io of a layer of weights: it takes its input rounded
 * (its kernel rounds that operand), and gives its output rounded where no
 * batch norm follows and the activation's derivative is the output's
 * sign's (linear, relu, leaky). */
int st_wl_bf16_io(const st_wl_params *wp);

/* Layers without parameters whose state is one kernel slot (pooling, LRN,
 * softmax): create it (its dst is the layer's output), run it forward and
 * backward, release it. */
st_status st_slot_setup(st_setup *s, const st_layer *l, st_kdesc *d, const char *kernel_name,
                        void **state, st_error *err);
st_status st_slot_forward(const st_layer *l, void *state, const st_pass *p, st_error *err);
st_status st_slot_backward(const st_layer *l, void *state, const st_pass *p, st_error *err);
void st_slot_release(void *state);
/* Those three passes, in a layer's ops table. */
#define ST_SLOT_PASSES                                                                      \
    .forward = st_slot_forward, .backward = st_slot_backward, .release = st_slot_release

/* Read "activation" with Darknet's default (logistic) unless given. */
st_status st_layer_read_activation(st_build *b, st_act def, st_act *act, st_error *err);

#endif
