/* The node's topology as the placement of threads needs it, read with hwloc
 * (sockets, NUMA nodes, cores, hardware threads): only the processing units
 * (PUs) this process may run on, so cgroup cpusets, taskset and mpirun's
 * binding are respected. For tests, any of hwloc's synthetic topologies
 * ("pack:2 numa:2 core:8 pu:2"), optionally restricted to a set of PUs as a
 * cpuset would. Plain arrays, no hwloc type: the placement (parallel/
 * placement.h) is a pure function of this. */
#ifndef ST_TOPOLOGY_H
#define ST_TOPOLOGY_H

#include <stddef.h>

#include "base/status.h"

typedef struct st_topology {
    int n_pus, n_cores, n_sockets, n_numa;
    /* The allowed PUs in hwloc's logical order (a core's PUs together, cores
     * in socket order): their OS index (what affinity calls take) and core. */
    int *pu_os;     /* [n_pus] */
    int *pu_core;   /* [n_pus] */
    /* The cores with at least one allowed PU, numbered 0 .. n_cores - 1 in
     * that order: their socket and NUMA node (each numbered from 0 among
     * those with an allowed PU), their first PU (an index into pu_os) and
     * how many allowed PUs they have. */
    int *core_socket;   /* [n_cores] */
    int *core_numa;     /* [n_cores] */
    int *core_first_pu; /* [n_cores] */
    int *core_pus;      /* [n_cores] */
    /* The NUMA nodes, by that number: their OS index and the memory they
     * may give, in bytes (this machine: free and page cache, as
     * /sys/devices/system/node says; synthetic: what the description
     * gives them, 0 when nothing). */
    int *numa_os;       /* [n_numa] */
    double *numa_bytes; /* [n_numa] */
    char source[160];   /* "this machine" or the synthetic description */
    char note[160];     /* what is missing from this machine's topology (for a warning),
                           or "" */
    void *hw;           /* this machine: hwloc's topology, for the memory's placement */
} st_topology;

/* Load a topology: synthetic NULL is this machine, restricted to the PUs
 * this process may run on (its affinity); else hwloc's synthetic
 * description. allowed, when not NULL, restricts it further to a list of
 * PU OS indexes ("0-5,8,10-11", as a cpuset's cpus file writes them). A
 * description hwloc refuses, or a list that is malformed or leaves no PU,
 * is ST_EINPUT naming it; so is what hwloc's environment variables give it
 * instead of this machine (HWLOC_XMLFILE: a regular file of at most 64 MB,
 * checked before hwloc reads it) when hwloc cannot read it. hwloc's own
 * messages on stderr are silenced; what they would say, t->note says. */
st_status st_topology_load(st_topology *t, const char *synthetic, const char *allowed,
                           st_error *err);
void st_topology_free(st_topology *t);

/* Move the pages of [addr, addr + bytes) (those wholly inside) to NUMA
 * node numa of this machine's topology (hwloc's migrating membind); no-op
 * with one node or a synthetic topology. */
st_status st_topology_move(const st_topology *t, void *addr, size_t bytes, int numa,
                           st_error *err);

/* The NUMA node (by t's number) the first page wholly inside [addr, addr +
 * bytes) is on, touched or not; -1 when the kernel does not say. */
int st_topology_memory_node(const st_topology *t, const void *addr, size_t bytes);

#endif
