/* Pieces shared by several layer files: the batch-normalization block of
 * [convolutional], [connected] and [batchnorm], and the activation kernel a
 * layer runs backward before its own kernels. */
#ifndef ST_LAYER_BLOCKS_H
#define ST_LAYER_BLOCKS_H

#include "layers/layer.h"

/* Parameter offsets of one batch-norm block over c channels. */
typedef struct bn_params {
    int c;
    size_t scales, biases, mean, var;
} bn_params;

/* Per-worker state: the kernel and the batch statistics kept for backward. */
typedef struct bn_state {
    st_kslot k;
    size_t mean_off, var_off; /* [c] each */
    long per_channel;         /* H x W of one sample */
} bn_state;

st_status bn_add_params(st_build *b, int c, bn_params *bp, st_error *err);
/* src_layout / dst_plain: see st_kslot_create; the kernel is bs->k. */
st_status bn_setup(st_setup *s, const st_layer *l, int c, int h, int w, st_act act,
                   const void *src_layout, int dst_plain, bn_state *bs, st_error *err);
/* y = act(bn(x)) with the batch statistics (training) or the running ones. */
st_status bn_forward(const bn_params *bp, bn_state *bs, const st_pass *p, const float *x,
                     float *y, st_error *err);
/* dy: gradient at bn's output (the caller has applied the activation's
 * derivative); dx may equal dy; NULL dx computes only the parameter
 * gradients. Also writes the batch statistics into the running-statistic
 * slots of the worker's gradient arena, from which the solver updates them. */
st_status bn_backward(const bn_params *bp, bn_state *bs, const st_pass *p, const float *x,
                      const float *dy, float *dx, int accumulate, st_error *err);

/* The activation applied after a layer's kernels, for the backward pass. */
typedef struct act_slot {
    st_act act;
    st_kslot k; /* k.k == NULL for linear */
} act_slot;

/* count values per sample in the given layout. */
st_status act_setup(st_setup *s, const st_layer *l, st_act act, size_t count,
                    const void *layout, act_slot *a, st_error *err);
/* diff = diff * f'(out), in place. */
st_status act_backward(const act_slot *a, const st_pass *p, const float *out, float *diff,
                       st_error *err);
void act_release(act_slot *a);

/* The weighted-layer sequence of [convolutional] and [connected]: one kernel
 * with weights (its descriptor supplied by the layer), then batch norm or a
 * bias, then the activation (fused into the last kernel's forward). */
typedef struct wl_params {
    size_t weights, biases; /* biases unused with batch norm */
    int batch_normalize;
    bn_params bn;
    st_act act;
} wl_params;

typedef struct wl_state {
    st_kslot main;
    bn_state bn;
    act_slot act;
    size_t pre_off;       /* batch norm's input, when batch_normalize */
    size_t pre_delta_off; /* its gradient, when not in the output's layout */
    int pre_delta;        /* batch norm backward cannot run in place */
} wl_state;

/* Register the biases or the batch-norm block for c output channels. */
st_status wl_add_shift(st_build *b, wl_params *wp, int c, st_error *err);
/* desc: the main kernel, built without bias and activation when
 * batch_normalize. Sets s->out_layout and s->out_bytes. */
st_status wl_setup(st_setup *s, const st_layer *l, const wl_params *wp, st_kdesc *desc,
                   const char *kernel_name, wl_state *ws, st_error *err);
st_status wl_forward(const wl_params *wp, wl_state *ws, const st_pass *p, st_error *err);
st_status wl_backward(const wl_params *wp, wl_state *ws, const st_pass *p, st_error *err);
void wl_release(wl_state *ws);

/* Layers without parameters whose state is one kernel slot (pooling, LRN,
 * softmax): create it (its dst is the layer's output), run it forward and
 * backward, release it. */
st_status slot_setup(st_setup *s, const st_layer *l, st_kdesc *d, const char *kernel_name,
                     void **state, st_error *err);
st_status slot_forward(const st_layer *l, void *state, const st_pass *p, st_error *err);
st_status slot_backward(const st_layer *l, void *state, const st_pass *p, st_error *err);
void slot_release(void *state);

/* Read "activation" with Darknet's default (logistic) unless given. */
st_status read_activation(st_build *b, st_act def, st_act *act, st_error *err);

#endif
