/* The kernel descriptors: what each heavy operation of a layer computes,
 * independent of who computes it (a backend, the emulated CPEs). A common
 * header with a kind tag, then the kind's fields; tensors are float, NCHW,
 * sample index outermost (backend.h says how the backends take them). Also
 * the elementwise activations and their formulas, which every backend and
 * the plain-C layers share. */
#ifndef ST_KDESC_H
#define ST_KDESC_H

#include <stddef.h>

typedef enum st_act {
    ST_ACT_LINEAR,
    ST_ACT_RELU,
    ST_ACT_LEAKY, /* slope 0.1 below zero, as Darknet */
    ST_ACT_LOGISTIC,
    ST_ACT_TANH,
    ST_ACT_COUNT
} st_act;

/* cfg names, indexed by st_act, NULL-terminated. */
extern const char *const st_act_names[];

/* The kernel kinds, declared once: X(kind, name) per kind, the name for
 * messages. Adding a kind: its descriptor below and its size in
 * st_kdesc_dst_values (kdesc.c), a case in every backend's kernel_create,
 * and a case in tests/unit/test_conformance.c (whose coverage test fails
 * until every kind has one). */
#define ST_KINDS(X)                                                                        \
    X(ST_K_CONV, "conv")                                                                   \
    X(ST_K_FC, "fc")                                                                       \
    X(ST_K_POOL, "pool")                                                                   \
    X(ST_K_BNORM, "bnorm")                                                                 \
    X(ST_K_LRN, "lrn")                                                                     \
    X(ST_K_ACT, "act")                                                                     \
    X(ST_K_SOFTMAX, "softmax")

typedef enum st_kind {
#define ST_KIND_ENUM(kind, name) kind,
    ST_KINDS(ST_KIND_ENUM)
#undef ST_KIND_ENUM
} st_kind;

/* How many kinds there are: not a member of st_kind, so that a switch over
 * the kinds needs no case for it. */
enum {
#define ST_KIND_ONE(kind, name) +1
    ST_K_COUNT = 0 ST_KINDS(ST_KIND_ONE)
#undef ST_KIND_ONE
};

typedef struct st_kdesc {
    st_kind kind;
    const char *name;       /* "<layer>.<kernel>", for messages and choice keys */
    int backward;           /* the backward passes will run (training) */
    int src_grad;           /* backward_data will run (the input needs a gradient) */
    int n;                  /* largest number of samples per call */
    const int *batch_sizes; /* every n a call will use, n among them */
    int n_batch_sizes;
    const void *src_layout; /* NULL: plain; else an earlier kernel's dst_layout */
    int dst_plain;          /* dst must be plain NCHW */
} st_kdesc;

/* Values per sample of a kernel's dst (its logical size). */
size_t st_kdesc_dst_values(const st_kdesc *d);

/* Convolution; weights [oc, ic/groups, kh, kw], bias [oc]. */
typedef struct st_conv_desc {
    st_kdesc base;
    int ic, ih, iw;
    int oc, oh, ow;
    int kh, kw, sh, sw;
    int ph, pw; /* top / left padding; bottom / right follow from oh, ow */
    int groups;
    int bias;
    st_act act;
} st_conv_desc;

/* Inner product; src [n, in] (any C x H x W flattened), weights [out, in]. */
typedef struct st_fc_desc {
    st_kdesc base;
    int in, out;
    int bias;
    st_act act;
} st_fc_desc;

typedef enum st_pool_alg { ST_POOL_MAX, ST_POOL_AVG } st_pool_alg;

/* Pooling; windows that reach outside the input ignore those positions (max
 * over the valid ones, average over the valid ones). */
typedef struct st_pool_desc {
    st_kdesc base;
    st_pool_alg alg;
    int c, ih, iw, oh, ow;
    int kh, kw, sh, sw, ph, pw;
} st_pool_desc;

/* Batch normalization over N x H x W per channel, biased batch variance,
 * y = gamma * (x - mean) / sqrt(var + eps) + beta, then act.
 * weights = gamma [c], bias = beta [c]. Training: mean / var [c] are written
 * with the batch statistics; inference: they are read. backward_data may
 * run in place (diff_src == diff_dst). */
typedef struct st_bnorm_desc {
    st_kdesc base;
    int c, h, w;
    float eps;
    st_act act;
} st_bnorm_desc;

/* Caffe's across-channel LRN: y = x * (k + alpha/size * sum x^2)^-beta, the
 * sum over channels [c - (size-1)/2, c + size/2]. */
typedef struct st_lrn_desc {
    st_kdesc base;
    int c, h, w;
    int size;
    float alpha, beta, k;
} st_lrn_desc;

/* Elementwise activation over count values per sample; src may equal dst and
 * diff_src may equal diff_dst. backward: diff_src = diff_dst * f'(dst).
 * dst has src's layout; dst_plain is not allowed. */
typedef struct st_act_desc {
    st_kdesc base;
    size_t count;
    st_act act;
} st_act_desc;

/* Softmax over `groups` equal groups of count/groups values, of src/temp.
 * Forward only: the loss layer owns the gradient. */
typedef struct st_softmax_desc {
    st_kdesc base;
    int count;
    int groups;
    float temperature;
} st_softmax_desc;

/* Elementwise activation helpers shared by backends and plain-C layers. */
void st_act_forward(st_act act, float *x, size_t count);
/* dx = dy * f'(y), in place allowed (dx == dy). */
void st_act_backward(st_act act, const float *y, const float *dy, float *dx, size_t count);

#endif
