/* Hybrid parallelism across nodes, costed for `plan` (mp_cost.h): the
 * split layers' gradient bytes and each one's input and output bytes per
 * image, read from the network once (st_net_mp_layers); the
 * alpha-beta-gamma formulas are dist/allreduce_cost.h's. */
#include "parallel/mp_cost.h"

#include <stdlib.h>

#include "base/memory.h"

struct st_mp_cost {
    int G;
    double grad_bytes;      /* the whole gradient */
    double mp_bytes;        /* of it, the split layers' */
    int n_mp;
    size_t *in, *out;       /* [n_mp] each split layer's input and output values per image */
};

st_status st_mp_cost_create(st_mp_cost **out, const st_net *net, int G, st_error *err)
{
    *out = NULL;
    if (G <= 1)
        return ST_OK;
    st_mp_cost *c = st_calloc(1, sizeof *c, "the split layers' sizes", err);
    if (!c)
        return ST_ENOMEM;
    c->G = G;
    for (int k = 0; k < net->params.n; k++)
        c->grad_bytes += (double)(net->params.p[k].count * sizeof(float));
    int first;
    size_t shared_from;
    c->in = st_calloc(2 * (size_t)net->n_layers + 1, sizeof *c->in, "the split layers' sizes",
                      err);
    if (!c->in) {
        free(c);
        return ST_ENOMEM;
    }
    c->out = c->in + net->n_layers;
    c->n_mp = st_net_mp_layers(net, c->in, c->out);
    st_net_hybrid_split(net, &first, &shared_from);
    c->mp_bytes = (double)((net->params.count - shared_from) * sizeof(float));
    *out = c;
    return ST_OK;
}

void st_mp_cost_free(st_mp_cost *c)
{
    if (!c)
        return;
    free(c->in);
    free(c);
}

int st_mp_cost_split(const st_mp_cost *c, double *bytes, int *layers)
{
    *bytes = c->mp_bytes;
    *layers = c->n_mp;
    return c->G;
}

int st_mp_cost_iteration(const st_mp_cost *c, int n, int images, const st_net_params *np,
                         double *seconds)
{
    int G = c->G;
    double head = c->grad_bytes - c->mp_bytes, s = 0.0;
    *seconds = 0.0;
    int algorithm = head > 0 ? st_allreduce_cheapest(n, head, np, seconds) : -1;
    if (n / G > 1) {
        st_allreduce_cheapest(n / G, c->mp_bytes / G, np, &s);
        *seconds += s;
    }
    for (int k = 0; k < c->n_mp; k++) {
        double in = (double)(c->in[k] * sizeof(float)), out = (double)(c->out[k] * sizeof(float));
        *seconds += st_mp_exchange_cost(G, images * in, images * out, np);
    }
    return algorithm;
}
