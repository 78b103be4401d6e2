/* The kernel descriptors' shared arithmetic; see kdesc.h. */
#include "ops/kdesc.h"

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
