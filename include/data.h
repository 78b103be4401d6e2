/* Data sources: records of (image [C, H, W] floats, label) read by index.
 *
 * A source is a small ops table over a concrete reader (IDX, synthetic; the
 * input-pipeline issue adds CIFAR, image lists and the striped store). The
 * epoch order is a seeded permutation, fresh every epoch. */
#ifndef ST_DATA_H
#define ST_DATA_H

#include <stdint.h>

#include "layer.h"
#include "status.h"

typedef struct st_source st_source;

typedef struct st_source_ops {
    /* Record index into x [C, H, W] and *label. */
    st_status (*read)(const st_source *s, long index, float *x, int *label, st_error *err);
    void (*close)(st_source *s);
} st_source_ops;

struct st_source {
    const st_source_ops *ops;
    char name[512]; /* file name(s), or "synthetic", for messages */
    long count;
    st_shape shape;
    int classes;    /* every label is in [0, classes) */
};

/* IDX images (ubyte, N x H x W) and labels (ubyte, N), gzip or plain. At most
 * limit records are kept (0: all); pixels are scaled to [0, 1]. Labels must
 * be below classes. */
st_status st_idx_open(st_source **out, const char *images, const char *labels, long limit,
                      int classes, st_error *err);

/* count deterministic records of the given shape, with learnable structure:
 * each class has its own pattern, each record adds its own noise. */
st_status st_synthetic_open(st_source **out, st_shape shape, int classes, long count,
                            uint64_t seed, st_error *err);

void st_source_close(st_source *s);

/* Read records indices[0..n) into x [n, C, H, W] and labels [n]. */
st_status st_source_batch(const st_source *s, const long *indices, int n, float *x,
                          int *labels, st_error *err);

/* The order in which an epoch visits the records. */
typedef struct st_order {
    long n;
    long *perm;
    uint64_t seed;
} st_order;

st_status st_order_init(st_order *o, long n, uint64_t seed, st_error *err);
/* A permutation of 0..n-1 that depends only on (seed, epoch). */
void st_order_shuffle(st_order *o, long epoch);
void st_order_free(st_order *o);

#endif
