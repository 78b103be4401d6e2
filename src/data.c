/* Batches from a source, and the seeded epoch order. */
#include "data.h"

#include <stdlib.h>
#include <string.h>

#include "rng.h"

void st_source_close(st_source *s)
{
    if (s)
        s->ops->close(s);
}

st_status st_source_batch(const st_source *s, const long *indices, int n, float *x,
                          int *labels, st_error *err)
{
    size_t per = st_shape_count(s->shape);
    for (int i = 0; i < n; i++) {
        st_status st = s->ops->read(s, indices[i], x + (size_t)i * per, &labels[i], err);
        if (st != ST_OK)
            return st;
    }
    return ST_OK;
}

st_status st_order_init(st_order *o, long n, uint64_t seed, st_error *err)
{
    o->n = n;
    o->seed = seed;
    o->perm = st_calloc((size_t)n, sizeof *o->perm, "epoch order", err);
    return o->perm ? ST_OK : ST_ENOMEM;
}

void st_order_shuffle(st_order *o, long epoch)
{
    st_rng rng;
    st_rng_seed(&rng, o->seed, 0x2000u + (uint64_t)epoch);
    for (long i = 0; i < o->n; i++)
        o->perm[i] = i;
    for (long i = o->n - 1; i > 0; i--) {
        long j = (long)st_rng_below(&rng, (uint64_t)i + 1);
        long t = o->perm[i];
        o->perm[i] = o->perm[j];
        o->perm[j] = t;
    }
}

void st_order_free(st_order *o)
{
    free(o->perm);
    memset(o, 0, sizeof *o);
}
