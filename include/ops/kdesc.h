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

/* The kernel kinds, declared once: X(kind, stem, name) per kind. The stem
 * names everything a kind has: its descriptor st_<stem>_desc and the size
 * of its dst st_<stem>_dst_values (both below), the reference kind
 * ref_kind_<stem>, the oneDNN kind dn_kind_<stem> and the cpe kind
 * cpe_kind_<stem>, which each backend's kind-indexed table lists by this
 * macro (an undefined one fails the link, not a run); the name is for
 * messages.
 *
 * Adding a kind touches six files:
 *   1. include/ops/kdesc.h: its X line, its descriptor, its dst size;
 *   2. src/backends/ref/ref_<stem>.c: ref_kind_<stem>, the oracle;
 *   3. src/backends/dnnl/dnnl_<stem>.c: dn_kind_<stem>;
 *   4. src/backends/dnnl/dnnl_kernel.c: its src dims in dn_src_dims (a
 *      switch without a default: the compiler names the missing case);
 *   5. src/backends/cpe/cpe_kernels.c: cpe_kind_<stem> (on the MPE, the
 *      reference kernel costed by a roofline, unless CPE kernels exist);
 *   6. tests/unit/test_conformance.c: a case (its coverage check fails
 *      until every kind has one).
 * The layer that uses it is the layer recipe's (layers/layer.h). */
#define ST_KINDS(X)                                                                        \
    X(ST_K_CONV, conv, "conv")                                                             \
    X(ST_K_FC, fc, "fc")                                                                   \
    X(ST_K_POOL, pool, "pool")                                                             \
    X(ST_K_BNORM, bnorm, "bnorm")                                                          \
    X(ST_K_LRN, lrn, "lrn")                                                                \
    X(ST_K_ACT, act, "act")                                                                \
    X(ST_K_SOFTMAX, softmax, "softmax")

typedef enum st_kind {
#define ST_KIND_ENUM(kind, stem, name) kind,
    ST_KINDS(ST_KIND_ENUM)
#undef ST_KIND_ENUM
} st_kind;

/* How many kinds there are: not a member of st_kind, so that a switch over
 * the kinds needs no case for it. */
enum {
#define ST_KIND_ONE(kind, stem, name) +1
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
    /* --precision bf16's activations between layers: every consumer of
     * dst reads it rounded to bf16 (net/replica.c's plan), so dst's values
     * are rounded to bf16 (to nearest even, after the activation), and a
     * backend may store them as bf16 (st_kernel.dst_bf16 says it does, its
     * dst_layout how). Its gradients stay f32. */
    int dst_bf16;
} st_kdesc;

/* Values per sample of a kernel's dst (its logical size). */
size_t st_kdesc_dst_values(const st_kdesc *d);
/* The size of a kind's descriptor, and its name; 0 and "unknown" for a
 * value that is no kind. */
size_t st_kdesc_size(st_kind kind);
const char *st_kind_name(st_kind kind);

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

static inline size_t st_conv_dst_values(const st_conv_desc *c)
{
    return (size_t)c->oc * c->oh * c->ow;
}

/* Inner product; src [n, in] (any C x H x W flattened), weights [out, in]. */
typedef struct st_fc_desc {
    st_kdesc base;
    int in, out;
    int bias;
    st_act act;
} st_fc_desc;

static inline size_t st_fc_dst_values(const st_fc_desc *f)
{
    return (size_t)f->out;
}

typedef enum st_pool_alg { ST_POOL_MAX, ST_POOL_AVG } st_pool_alg;

/* Pooling; windows that reach outside the input ignore those positions (max
 * over the valid ones, average over the valid ones). */
typedef struct st_pool_desc {
    st_kdesc base;
    st_pool_alg alg;
    int c, ih, iw, oh, ow;
    int kh, kw, sh, sw, ph, pw;
} st_pool_desc;

static inline size_t st_pool_dst_values(const st_pool_desc *p)
{
    return (size_t)p->c * p->oh * p->ow;
}

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

static inline size_t st_bnorm_dst_values(const st_bnorm_desc *b)
{
    return (size_t)b->c * b->h * b->w;
}

/* Caffe's across-channel LRN: y = x * (k + alpha/size * sum x^2)^-beta, the
 * sum over channels [c - (size-1)/2, c + size/2]. */
typedef struct st_lrn_desc {
    st_kdesc base;
    int c, h, w;
    int size;
    float alpha, beta, k;
} st_lrn_desc;

static inline size_t st_lrn_dst_values(const st_lrn_desc *l)
{
    return (size_t)l->c * l->h * l->w;
}

/* Elementwise activation over count values per sample; src may equal dst and
 * diff_src may equal diff_dst. backward: diff_src = diff_dst * f'(dst).
 * dst has src's layout; dst_plain is not allowed. */
typedef struct st_act_desc {
    st_kdesc base;
    size_t count;
    st_act act;
} st_act_desc;

static inline size_t st_act_dst_values(const st_act_desc *a)
{
    return a->count;
}

/* Softmax over `groups` equal groups of count/groups values, of src/temp.
 * Forward only: the loss layer owns the gradient. */
typedef struct st_softmax_desc {
    st_kdesc base;
    int count;
    int groups;
    float temperature;
} st_softmax_desc;

static inline size_t st_softmax_dst_values(const st_softmax_desc *s)
{
    return (size_t)s->count;
}

/* Any kind's descriptor, for a copy of one whose kind is known only at run
 * time: base, and the kind's as its stem (conv, fc, pool, bnorm, ...);
 * st_kdesc_size(kind) bytes of it are the kind's. */
typedef union st_kdesc_any {
    st_kdesc base;
#define ST_KDESC_MEMBER(kind, stem, name) st_##stem##_desc stem;
    ST_KINDS(ST_KDESC_MEMBER)
#undef ST_KDESC_MEMBER
} st_kdesc_any;

/* Elementwise activation helpers shared by backends and plain-C layers. */
void st_act_forward(st_act act, float *x, size_t count);
/* dx = dy * f'(y), in place allowed (dx == dy). */
void st_act_backward(st_act act, const float *y, const float *dy, float *dx, size_t count);

#endif
