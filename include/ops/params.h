/* The parameter table: every learnable (and running-statistic) tensor of a
 * network as a named range of one flat float arena.
 *
 * The weights, each worker's gradient and the solver state all use the same
 * offsets, so the parameter server and the MPI layer can slice or send the
 * arena as one buffer. Each tensor starts on a 16-float (cache-line)
 * boundary; the gaps stay zero in every arena. */
#ifndef ST_PARAMS_H
#define ST_PARAMS_H

#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

typedef enum st_param_kind {
    ST_PARAM_WEIGHT, /* learned, with weight decay */
    ST_PARAM_BIAS,   /* learned, no weight decay (biases, batch-norm scales) */
    ST_PARAM_STAT,   /* running average of a batch statistic, not learned */
} st_param_kind;

typedef enum st_init_kind {
    ST_INIT_ZERO,
    ST_INIT_ONE,
    ST_INIT_NORMAL,  /* scale * N(0, 1) */
    ST_INIT_UNIFORM, /* scale * U(-1, 1) */
} st_init_kind;

typedef struct st_param {
    char name[48];   /* "3.weights": layer index and role */
    int layer;
    st_param_kind kind;
    st_init_kind init;
    float init_scale;
    size_t offset;   /* floats from the arena start, multiple of 16 */
    size_t count;    /* floats */
    /* ST_PARAM_STAT: the share of its running value kept each batch,
     * running = keep running + (1 - keep) batch (ONNX's momentum; PyTorch's
     * momentum is 1 - keep); 0 for the other kinds. */
    float keep;
} st_param;

typedef struct st_param_table {
    st_param *p;
    int n;
    size_t count; /* arena floats including alignment gaps */
    /* The starting weights [count] of a network that brings its own (an
     * ONNX model's initializers), owned; NULL: each tensor's init. */
    float *start;
} st_param_table;

#define ST_PARAM_ALIGN 16 /* floats: one 64-byte cache line */

/* A running statistic's keep unless its layer gives another (bn_momentum=):
 * Darknet's running = 0.99 running + 0.01 batch, PyTorch's momentum 0.01. */
#define ST_STAT_KEEP 0.99f

/* Append a tensor; a ST_PARAM_STAT's keep is ST_STAT_KEEP until its layer
 * sets another. */
st_status st_params_add(st_param_table *t, int layer, const char *role, size_t count,
                        st_param_kind kind, st_init_kind init, float init_scale, int *id,
                        st_error *err);
void st_params_free(st_param_table *t);

/* Fill a weights arena [t->count] with the initial values: t->start, or
 * else each tensor's init from seed. */
void st_params_init(const st_param_table *t, float *weights, uint64_t seed);

/* Learned floats (weights and biases, not statistics). */
size_t st_params_learned(const st_param_table *t);

/* Whether every float of x [n] is finite (no NaN, no infinity). */
int st_all_finite(const float *x, size_t n);

/* The first tensor of t (in table order) holding a non-finite float of
 * arena [t->count], and in *at that float's index in the tensor; NULL when
 * every one is finite. */
const st_param *st_params_nonfinite(const st_param_table *t, const float *arena, size_t *at);

#endif
