/* Hybrid parallelism across nodes (--parallel hybrid --mp-group G) as
 * `plan` predicts it (cmd/plan.c), beside the run it predicts (sched_mp.c,
 * sched_aggregate.c): the layers st_net_hybrid_split names split over
 * groups of G nodes, G B images a group; per iteration the gradient of the
 * other layers is all-reduced over the N nodes, each block of the split
 * layers' (1/G of their gradient) over the N / G nodes holding it, and
 * each split layer's input, output and their gradients move within the
 * group (dist/allreduce_cost.h's st_mp_exchange_cost). Nothing of it
 * overlaps backward: a hybrid run has no --overlap. */
#ifndef ST_MP_COST_H
#define ST_MP_COST_H

#include "base/status.h"
#include "dist/allreduce_cost.h"
#include "net/net.h"

typedef struct st_mp_cost st_mp_cost;

/* net's layers split over groups of G nodes; *out NULL when G <= 1 (no
 * layer is split across nodes: the run is data-parallel between them). */
st_status st_mp_cost_create(st_mp_cost **out, const st_net *net, int G, st_error *err);
void st_mp_cost_free(st_mp_cost *c);

/* G, and the split layers' gradient bytes (*bytes) and count (*layers). */
int st_mp_cost_split(const st_mp_cost *c, double *bytes, int *layers);

/* One iteration's communication over n nodes (a multiple of G), `images`
 * a node, in *seconds (each all-reduce by its cheapest algorithm, then the
 * exchanges); returns the other layers' cheapest algorithm, -1 when they
 * have no gradient. */
int st_mp_cost_iteration(const st_mp_cost *c, int n, int images, const st_net_params *np,
                         double *seconds);

#endif
