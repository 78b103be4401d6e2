/* The backends built into this binary, looked up by name. */
#include <stdio.h>
#include <string.h>

#include "backend.h"

extern const st_backend st_backend_ref;
extern const st_backend st_backend_dnnl;
extern const st_backend st_backend_cpe;

static const struct {
    const char *name;
    const st_backend *backend; /* NULL: known but not built */
} backends[] = {
    {"ref", &st_backend_ref},
    {"dnnl", &st_backend_dnnl},
    {"cpe", &st_backend_cpe},
};

#define N_BACKENDS (sizeof backends / sizeof backends[0])

const char *st_backend_list(void)
{
    static const char list[] = "ref, dnnl, cpe";
    return list;
}

st_status st_backend_find(const char *name, const st_backend **out, st_error *err)
{
    for (size_t i = 0; i < N_BACKENDS; i++) {
        if (strcmp(name, backends[i].name) != 0)
            continue;
        if (!backends[i].backend)
            return st_fail(err, ST_EUSAGE, "--backend %s: not built into this binary "
                           "(available: %s)", name, st_backend_list());
        *out = backends[i].backend;
        return ST_OK;
    }
    return st_fail(err, ST_EUSAGE, "--backend %s: unknown backend (expected ref, dnnl or cpe; "
                   "available in this binary: %s)", name, st_backend_list());
}

size_t st_kdesc_dst_values(const st_kdesc *d)
{
    switch (d->kind) {
    case ST_K_CONV: {
        const st_conv_desc *c = (const st_conv_desc *)d;
        return (size_t)c->oc * c->oh * c->ow;
    }
    case ST_K_FC: return (size_t)((const st_fc_desc *)d)->out;
    case ST_K_POOL: {
        const st_pool_desc *p = (const st_pool_desc *)d;
        return (size_t)p->c * p->oh * p->ow;
    }
    case ST_K_BNORM: {
        const st_bnorm_desc *b = (const st_bnorm_desc *)d;
        return (size_t)b->c * b->h * b->w;
    }
    case ST_K_LRN: {
        const st_lrn_desc *l = (const st_lrn_desc *)d;
        return (size_t)l->c * l->h * l->w;
    }
    case ST_K_ACT: return ((const st_act_desc *)d)->count;
    case ST_K_SOFTMAX: return (size_t)((const st_softmax_desc *)d)->count;
    }
    return 0;
}
