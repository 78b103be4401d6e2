/* The weights' bf16 copy shared by the workers; see bf16_weights.h. */
#include "parallel/bf16_weights.h"

#include <stdlib.h>

#include "base/arena.h"
#include "base/memory.h"
#include "ops/bf16.h"

struct st_bf16_weights {
    size_t count;
    uint16_t *bits; /* [count] */
};

size_t st_bf16_weights_bytes(size_t count)
{
    return st_align_up(count * sizeof(uint16_t), 64);
}

st_status st_bf16_weights_create(st_bf16_weights **out, size_t count, st_error *err)
{
    *out = NULL;
    st_bf16_weights *c = st_calloc(1, sizeof *c, "bf16 weights", err);
    if (!c)
        return ST_ENOMEM;
    c->count = count;
    c->bits = st_alloc_aligned(st_bf16_weights_bytes(count ? count : 1), "bf16 weights", err);
    if (!c->bits) {
        free(c);
        return ST_ENOMEM;
    }
    *out = c;
    return ST_OK;
}

void st_bf16_weights_free(st_bf16_weights *c)
{
    if (!c)
        return;
    st_free_aligned(c->bits);
    free(c);
}

const uint16_t *st_bf16_weights_data(const st_bf16_weights *c)
{
    return c->bits;
}

st_status st_bf16_weights_refresh(st_bf16_weights *c, const st_backend *be, st_bctx *ctx,
                                  const float *weights, size_t b, size_t e, st_error *err)
{
    if (!c || e <= b)
        return ST_OK;
    if (be->bf16_convert)
        return be->bf16_convert(ctx, weights + b, c->bits + b, e - b, err);
    st_bf16_convert(c->bits + b, weights + b, e - b);
    return ST_OK;
}
