/* The parameter table and initial values; see include/ops/params.h. */
#include "ops/params.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/arena.h"
#include "base/rng.h"

st_status st_params_add(st_param_table *t, int layer, const char *role, size_t count,
                        st_param_kind kind, st_init_kind init, float init_scale, int *id,
                        st_error *err)
{
    if (count > ((size_t)1 << 31) || t->count + count > ((size_t)1 << 34))
        return st_fail(err, ST_EINPUT, "parameter %d.%s: %zu values is more than singletrain "
                       "supports", layer, role, count);
    st_param *p = realloc(t->p, (size_t)(t->n + 1) * sizeof *p);
    if (!p)
        return st_fail(err, ST_ENOMEM, "out of memory adding parameter %d.%s (%zu bytes for %d "
                       "parameters)", layer, role, (size_t)(t->n + 1) * sizeof *p, t->n + 1);
    t->p = p;
    st_param *e = &p[t->n];
    memset(e, 0, sizeof *e);
    snprintf(e->name, sizeof e->name, "%d.%s", layer, role);
    e->layer = layer;
    e->kind = kind;
    e->init = init;
    e->init_scale = init_scale;
    e->offset = t->count;
    e->count = count;
    e->keep = kind == ST_PARAM_STAT ? ST_STAT_KEEP : 0.0f;
    t->count += st_align_up(count, ST_PARAM_ALIGN);
    *id = t->n++;
    return ST_OK;
}

void st_params_free(st_param_table *t)
{
    free(t->p);
    free(t->start);
    memset(t, 0, sizeof *t);
}

void st_params_init(const st_param_table *t, float *weights, uint64_t seed)
{
    if (t->start) {
        memcpy(weights, t->start, t->count * sizeof *weights);
        return;
    }
    memset(weights, 0, t->count * sizeof *weights);
    for (int i = 0; i < t->n; i++) {
        const st_param *p = &t->p[i];
        float *w = weights + p->offset;
        st_rng rng;
        st_rng_seed(&rng, seed, 0x1000u + (uint64_t)i); /* one stream per tensor */
        for (size_t j = 0; j < p->count; j++) {
            switch (p->init) {
            case ST_INIT_ZERO: w[j] = 0.0f; break;
            case ST_INIT_ONE: w[j] = 1.0f; break;
            case ST_INIT_NORMAL: w[j] = p->init_scale * st_rng_normal(&rng); break;
            case ST_INIT_UNIFORM:
                w[j] = p->init_scale * (2.0f * st_rng_uniform(&rng) - 1.0f);
                break;
            }
        }
    }
}

size_t st_params_learned(const st_param_table *t)
{
    size_t n = 0;
    for (int i = 0; i < t->n; i++)
        if (t->p[i].kind != ST_PARAM_STAT)
            n += t->p[i].count;
    return n;
}

/* The exponent bits all ones is NaN or infinity. Branch-free, so it
 * vectorises. */
int st_all_finite(const float *x, size_t n)
{
    uint32_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &x[i], sizeof u);
        bad |= (uint32_t)((u & 0x7f800000u) == 0x7f800000u);
    }
    return !bad;
}

const st_param *st_params_nonfinite(const st_param_table *t, const float *arena, size_t *at)
{
    for (int i = 0; i < t->n; i++) {
        const float *x = arena + t->p[i].offset;
        if (st_all_finite(x, t->p[i].count))
            continue;
        for (*at = 0; *at < t->p[i].count && isfinite(x[*at]); (*at)++)
            ;
        return &t->p[i];
    }
    return NULL;
}
