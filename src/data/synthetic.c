/* Synthetic records of any shape: record i of a source starting at record
 * `first` has label hash(seed, first + i) mod classes, and pixel j = 128 +
 * pattern(seed, label, j) + noise(seed, first + i, j), with pattern +-64 per
 * class and position and noise uniform in [-64, 64). Sources of one seed
 * share the class patterns, so a test split (another `first`) holds new
 * samples of the training split's classes. Nothing is stored; records are
 * generated when read, so any input size costs no memory. */
#include <stdio.h>
#include <stdlib.h>

#include "data/data.h"
#include "base/rng.h"

typedef struct synthetic_source {
    st_source base;
    uint64_t seed;
    uint64_t first; /* the record number of index 0 */
} synthetic_source;

static st_status synthetic_read(const st_source *s, long index, unsigned char *pixels,
                                int *label, st_error *err)
{
    (void)err;
    const synthetic_source *ss = (const synthetic_source *)s;
    st_rng rng;
    st_rng_seed(&rng, ss->seed, 0x3000000000ull + ss->first + (uint64_t)index);
    int c = (int)st_rng_below(&rng, (uint64_t)s->classes);
    *label = c;
    st_rng pattern;
    st_rng_seed(&pattern, ss->seed, 0x4000000000ull + (uint64_t)c);
    size_t per = st_record_bytes(s);
    uint64_t bits = 0;
    for (size_t j = 0; j < per; j++) {
        if (j % 64 == 0)
            bits = st_rng_u64(&pattern);
        int sign = (bits >> (j % 64)) & 1 ? 64 : -64;
        pixels[j] = (unsigned char)(128 + sign + (int)(st_rng_u64(&rng) >> 57) - 64);
    }
    return ST_OK;
}

static void synthetic_close(st_source *s)
{
    free(s);
}

static const st_source_ops synthetic_ops = {synthetic_read, synthetic_close};

st_status st_synthetic_open(st_source **out, st_shape shape, int classes, long count,
                            uint64_t seed, uint64_t first, st_error *err)
{
    synthetic_source *s = st_calloc(1, sizeof *s, "synthetic source", err);
    if (!s)
        return ST_ENOMEM;
    s->base.ops = &synthetic_ops;
    s->base.count = count;
    s->base.shape = shape;
    s->base.classes = classes;
    snprintf(s->base.name, sizeof s->base.name, "synthetic");
    s->seed = seed;
    s->first = first;
    *out = &s->base;
    return ST_OK;
}
