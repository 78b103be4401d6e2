/* Where a run sits on its node (train.h's set-up): how many threads, -t
 * and --intra where left to choose, a warning when the ranks' threads
 * outnumber the cores; where they run, from the node's topology (--bind,
 * parallel/placement.h); and, with the workers pinned on several NUMA
 * nodes, the parameter server's memory beside the workers that use it. */
#include "trainer_internal.h"

#include <stdio.h>
#include <stdlib.h>

#include "base/cores.h"

void trainer_choose_threads(st_trainer *t)
{
    int cores = st_usable_cores();
    const char *why = NULL;
    if (t->o.threads == 0 && t->o.mp_group && t->o.mp_group != 1) {
        int ranks = st_cluster_local_ranks(); /* the rank's share of the host's cores */
        t->o.threads = 1;                     /* the option rules allow no other */
        if (t->o.intra == 0)
            t->o.intra = cores / ranks > 0 ? cores / ranks : 1;
        why = "one worker a rank: --mp-group";
    } else if (t->o.threads == 0 && t->o.intra == 0) {
        if (st_params_learned(&t->net.params) > TRAINER_MANY_PARAMETERS) {
            t->o.threads = 1;
            t->o.intra = cores;
            why = "one worker using every core: the network has more than 16M parameters";
        } else {
            t->o.threads = cores < t->batch ? cores : t->batch;
            t->o.intra = 1;
            why = "one worker per core";
        }
    } else if (t->o.threads == 0) {
        t->o.threads = cores / t->o.intra > 0 ? cores / t->o.intra : 1;
        if (t->o.threads > t->batch)
            t->o.threads = t->batch;
        why = "cores / --intra workers";
    } else if (t->o.intra == 0) {
        t->o.intra = 1;
    }
    if (why)
        st_info(&t->log, "threads: %d worker%s x %d (%s; -t and --intra choose)", t->o.threads,
                t->o.threads > 1 ? "s" : "", t->o.intra, why);
}

/* Warn once when the threads of this host's ranks outnumber its cores: they
 * would take turns on them. Each rank runs workers x intra-op threads; the
 * ranks on this host share its cores unless each is bound to its own (a
 * process whose affinity is smaller than the machine: mpirun's binding,
 * taskset), when its own cores are the ones to count. */
static void warn_oversubscribed(const st_trainer *t)
{
    int cores = st_usable_cores();
    int ranks = cores < st_online_cores() ? 1 : st_cluster_local_ranks();
    long threads = (long)t->o.threads * t->o.intra * ranks;
    if (threads <= cores)
        return;
    char of_ranks[64] = "", fits[160];
    if (ranks > 1)
        snprintf(of_ranks, sizeof of_ranks, " x %d ranks on this host", ranks);
    long workers = cores / ((long)t->o.intra * ranks), intra = cores / ranks;
    if (workers > 0)
        snprintf(fits, sizeof fits, "-t %ld gives each thread a core of its own", workers);
    else if (intra > 0)
        snprintf(fits, sizeof fits, "-t 1 --intra %ld gives each thread a core of its own",
                 intra);
    else /* -t 1 --intra 1 is too many already: the ranks are */
        snprintf(fits, sizeof fits, "more ranks than cores: even one thread a rank is too "
                 "many; start at most %d rank%s on this host for a core each", cores,
                 cores > 1 ? "s" : "");
    st_warn(&t->log, "%d worker%s x %d intra-op thread%s%s = %ld threads on %d usable core%s: "
            "they will take turns on the cores (%s)", t->o.threads, t->o.threads > 1 ? "s" : "",
            t->o.intra, t->o.intra > 1 ? "s" : "", of_ranks, threads, cores,
            cores > 1 ? "s" : "", fits);
}

/* Where the workers run (--bind), from this node's topology, said once;
 * --bind none reads no topology (hwloc's environment may be broken, or
 * /sys hidden: the OS places the threads without it). Ranks that share a
 * node whose cores mpirun did not divide among them (each may use all of
 * them) take their share of the cores in the order of their local rank;
 * where mpirun does not say how many share it, auto pins nothing rather
 * than stack the ranks on the same cores. */
st_status trainer_place_threads(st_trainer *t, st_error *err)
{
    warn_oversubscribed(t);
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
