/* Where a run sits on its node (train.h's set-up): its threads, from the
 * node's topology (--bind, parallel/placement.h), and, with the workers
 * pinned on several NUMA nodes, the parameter server's memory beside the
 * workers that use it. */
#include "trainer_internal.h"

#include <stdio.h>
#include <stdlib.h>

#include "base/cores.h"

/* Where the workers run (--bind), from this node's topology, said once;
 * --bind none reads no topology (hwloc's environment may be broken, or
 * /sys hidden: the OS places the threads without it). Ranks that share a
 * node whose cores mpirun did not divide among them (each may use all of
 * them) take their share of the cores in the order of their local rank;
 * where mpirun does not say how many share it, auto pins nothing rather
 * than stack the ranks on the same cores. */
st_status trainer_place_threads(st_trainer *t, st_error *err)
{
    st_topology *topo = &t->topology;
    st_status st = t->o.bind == ST_BIND_NONE ? ST_OK : st_topology_load(topo, NULL, NULL, err);
    if (st != ST_OK)
        return st;
    if (topo->note[0])
        st_warn(&t->log, "topology of this machine: %s", topo->note);
    int own = st_usable_cores() < st_online_cores();
    int shares = own ? 1 : st_cluster_local_ranks();
    int share = shares > 1 ? st_cluster_local_rank() % shares : 0;
    st_bind mode = t->o.bind;
    if (mode == ST_BIND_AUTO && !own && st_cluster_launched() && !getenv("MPI_LOCALNRANKS"))
        mode = ST_BIND_NONE; /* ranks that may share this host's cores, unknown how many */
    st = st_place(topo, mode, t->o.threads, t->o.intra, share, shares, &t->placement, err);
    if (st == ST_OK && mode != t->o.bind)
        snprintf(t->placement.text, sizeof t->placement.text, "bind: none: launched by an "
                 "mpirun that says neither how many ranks share this host (MPI_LOCALNRANKS) "
                 "nor binds them (--bind cores pins anyway)");
    if (st == ST_OK)
        st_info(&t->log, "%s", t->placement.text);
    return st;
}

/* With the workers pinned on several NUMA nodes: each worker's slice of
 * the weights and of the solver state, which it reduces and updates, and
 * its gradient arena, which it writes, moved to its node (its activations
 * it allocates itself, pinned: they start there). */
st_status trainer_place_memory(st_trainer *t, st_error *err)
{
    const st_placement *p = &t->placement;
    const st_ps *ps = &t->ps;
    if (!p->bound || t->topology.n_numa < 2)
        return ST_OK;
    st_status st = ST_OK;
    for (int w = 0; st == ST_OK && w < p->workers && w < ps->n_workers; w++) {
        size_t b = ps->slice[w], e = ps->slice[w + 1];
        int node = p->numa[w];
        st = st_topology_move(&t->topology, ps->weights + b, (e - b) * sizeof(float), node,
                              err);
        for (int k = 0; st == ST_OK && ps->state && k < ps->state_planes; k++)
            st = st_topology_move(&t->topology, ps->state + (size_t)k * ps->count + b,
                                  (e - b) * sizeof(float), node, err);
        if (st == ST_OK && ps->grads && ps->grads[w])
            st = st_topology_move(&t->topology, ps->grads[w],
                                  sizeof(float) * st_ps_grad_floats(ps->table, w,
                                                                    ps->shared_from,
                                                                    ps->tail_applied),
                                  node, err);
    }
    if (st == ST_OK)
        st_info(&t->log, "memory: each worker's slices of the weights and solver state and "
                "its gradients on its NUMA node (%d nodes)", t->topology.n_numa);
    return st;
}
