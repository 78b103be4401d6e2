/* The node's topology from hwloc, as plain arrays; see topology.h. */
#include "base/topology.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sys/stat.h>

#include <hwloc.h>

#include "base/fileio.h"
#include "base/memory.h"

/* An XML topology HWLOC_XMLFILE may name, at most (lstopo writes a few MB
 * for the largest machines): hwloc reads whatever it names to its end, and
 * /dev/zero has none. */
#define XMLFILE_MAX_BYTES ((long long)64 << 20)

/* hwloc's variables that make it read something else than this machine;
 * a topology it cannot read then is bad input, not a failure of ours. */
static const char *const hwloc_env[] = {"HWLOC_XMLFILE", "HWLOC_SYNTHETIC", "HWLOC_FSROOT",
                                        "HWLOC_COMPONENTS"};

void st_topology_free(st_topology *t)
{
    free(t->pu_os);
    free(t->pu_core);
    free(t->core_socket);
    free(t->core_numa);
    free(t->core_first_pu);
    free(t->core_pus);
    free(t->numa_os);
    free(t->numa_bytes);
    if (t->hw)
        hwloc_topology_destroy((hwloc_topology_t)t->hw);
    memset(t, 0, sizeof *t);
}

/* The position of obj in seen [*n] (appended when new); -1 for NULL. */
static int number_of(hwloc_obj_t obj, hwloc_obj_t *seen, int *n)
{
    if (!obj)
        return 0;
    for (int i = 0; i < *n; i++)
        if (seen[i] == obj)
            return i;
    seen[*n] = obj;
    return (*n)++;
}

/* The NUMA node whose cpuset holds the PU, numbered in seen; 0 when none
 * does (a machine hwloc shows without NUMA nodes). */
static int numa_of(hwloc_topology_t topo, hwloc_obj_t pu, hwloc_obj_t *seen, int *n)
{
    hwloc_obj_t node = NULL;
    while ((node = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_NUMANODE, node)))
        if (node->cpuset && hwloc_bitmap_isset(node->cpuset, pu->os_index))
            return number_of(node, seen, n);
    return 0;
}

/* What node os may give: MemFree and FilePages of its meminfo (kB). */
static double node_free_bytes(int os)
{
    char path[96], line[256];
    snprintf(path, sizeof path, "/sys/devices/system/node/node%d/meminfo", os);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0.0;
    double kb = 0.0;
    while (fgets(line, sizeof line, f)) {
        const char *k = strstr(line, "MemFree:");
        if (!k)
            k = strstr(line, "FilePages:");
        if (k)
            kb += strtod(strchr(k, ':') + 1, NULL);
    }
    fclose(f);
    return kb * 1024.0;
}

/* The numbered NUMA nodes' OS indexes and memory. */
static st_status fill_numa(st_topology *t, hwloc_obj_t *nodes, int synthetic, st_error *err)
{
    int n = t->n_numa;
    t->numa_os = st_calloc((size_t)n, sizeof *t->numa_os, "topology", err);
    t->numa_bytes = st_calloc((size_t)n, sizeof *t->numa_bytes, "topology", err);
    if (!t->numa_os || !t->numa_bytes)
        return ST_ENOMEM;
    for (int k = 0; k < n; k++) {
        hwloc_obj_t node = nodes[k];
        t->numa_os[k] = node ? (int)node->os_index : 0;
        t->numa_bytes[k] = synthetic ? (node ? (double)node->attr->numanode.local_memory : 0.0)
                                     : node_free_bytes(t->numa_os[k]);
    }
    return ST_OK;
}

static st_status fill(st_topology *t, hwloc_topology_t topo, st_error *err)
{
    int n = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PU);
    if (n < 1)
        return st_fail(err, ST_EINPUT, "topology (%s): no processing unit to run on",
                       t->source);
    size_t bytes = (size_t)n * sizeof(int);
    hwloc_obj_t *cores = calloc((size_t)n, sizeof *cores);
    hwloc_obj_t *sockets = calloc((size_t)n, sizeof *sockets);
    hwloc_obj_t *nodes = calloc((size_t)n, sizeof *nodes);
    t->pu_os = st_calloc(1, bytes, "topology", err);
    t->pu_core = st_calloc(1, bytes, "topology", err);
    t->core_socket = st_calloc(1, bytes, "topology", err);
    t->core_numa = st_calloc(1, bytes, "topology", err);
    t->core_first_pu = st_calloc(1, bytes, "topology", err);
    t->core_pus = st_calloc(1, bytes, "topology", err);
    st_status st = ST_OK;
    if (!cores || !sockets || !nodes || !t->pu_os || !t->pu_core || !t->core_socket ||
        !t->core_numa || !t->core_first_pu || !t->core_pus)
        st = st_fail(err, ST_ENOMEM, "out of memory for the topology");
    for (int i = 0; st == ST_OK && i < n; i++) {
        hwloc_obj_t pu = hwloc_get_obj_by_type(topo, HWLOC_OBJ_PU, (unsigned)i);
        hwloc_obj_t core = hwloc_get_ancestor_obj_by_type(topo, HWLOC_OBJ_CORE, pu);
        int before = t->n_cores;
        int c = number_of(core ? core : pu, cores, &t->n_cores);
        if (t->n_cores > before) { /* a new core */
            t->core_first_pu[c] = i;
            t->core_socket[c] = number_of(
                hwloc_get_ancestor_obj_by_type(topo, HWLOC_OBJ_PACKAGE, pu), sockets,
                &t->n_sockets);
            t->core_numa[c] = numa_of(topo, pu, nodes, &t->n_numa);
        }
        t->core_pus[c]++;
        t->pu_os[i] = (int)pu->os_index;
        t->pu_core[i] = c;
    }
    t->n_pus = n;
    if (t->n_sockets < 1)
        t->n_sockets = 1;
    if (t->n_numa < 1)
        t->n_numa = 1;
    if (st == ST_OK)
        st = fill_numa(t, nodes, t->hw == NULL, err);
    free(cores);
    free(sockets);
    free(nodes);
    return st;
}

/* HWLOC_XMLFILE, when set: a regular file of at most XMLFILE_MAX_BYTES,
 * checked before hwloc reads it, which it would do without bound. */
static st_status check_xmlfile(st_error *err)
{
    const char *path = getenv("HWLOC_XMLFILE");
    if (!path)
        return ST_OK;
    char why[160];
    struct stat sb;
    st_regular_why(path, why, sizeof why);
    if (!why[0] && stat(path, &sb) == 0 && (long long)sb.st_size > XMLFILE_MAX_BYTES)
        snprintf(why, sizeof why, "%lld bytes, over the limit of %lld",
                 (long long)sb.st_size, XMLFILE_MAX_BYTES);
    if (why[0])
        return st_fail(err, ST_EINPUT, "environment variable HWLOC_XMLFILE=%s: %s: expected "
                       "an XML topology as lstopo writes one (or leave HWLOC_XMLFILE unset to "
                       "read this machine's)", path, why);
    return ST_OK;
}

/* hwloc's variables that are set, as "NAME=VALUE, ..." into vars [size];
 * its length, 0 when none is. */
static size_t hwloc_env_text(char *vars, size_t size)
{
    size_t len = 0;
    vars[0] = '\0';
    for (size_t i = 0; i < sizeof hwloc_env / sizeof *hwloc_env; i++) {
        const char *v = getenv(hwloc_env[i]);
        if (v && len < size)
            len += (size_t)snprintf(vars + len, size - len, "%s%s=%s", len ? ", " : "",
                                    hwloc_env[i], v);
    }
    return len;
}

/* hwloc cannot read the topology: with one of its variables set, bad
 * input naming them; else a failure of this machine's. */
static st_status load_failed(const char *source, st_error *err)
{
    char vars[512];
    if (hwloc_env_text(vars, sizeof vars))
        return st_fail(err, ST_EINPUT, "hwloc cannot read the topology that the environment "
                       "gives it (%s): expected what hwloc reads there (see hwloc(7)), or "
                       "leave the variable%s unset", vars, strchr(vars, ',') ? "s" : "");
    return st_fail(err, ST_EINTERNAL, "hwloc: cannot read the topology of %s", source);
}

/* hwloc prints complaints of its own on stderr ("[hwloc/linux] failed to
 * find sysfs cpu topology directory, aborting linux discovery." where /sys
 * is hidden); what matters of them is reported here, in this program's
 * words. HWLOC_HIDE_ERRORS=2 silences them: set while hwloc loads (unless
 * the user set it), and put back after, so the environment the process
 * hands on stays the user's. hwloc reads it once, at its first complaint
 * (so under mpirun, after MPICH's own topology, it may come too late).
 * Called on the set-up's thread, before the workers start. */
static int hide_hwloc_errors(void)
{
    if (getenv("HWLOC_HIDE_ERRORS"))
        return 0;
    return setenv("HWLOC_HIDE_ERRORS", "2", 1) == 0;
}

static void show_hwloc_errors(int hidden)
{
    if (hidden)
        unsetenv("HWLOC_HIDE_ERRORS");
}

/* Whether hwloc read this machine from Linux's /sys (its "Backend" info
 * on the root says "Linux"), not only from the processor (cpuid). */
static int read_from_sys(hwloc_topology_t topo)
{
    hwloc_obj_t root = hwloc_get_root_obj(topo);
    for (unsigned i = 0; root && i < root->infos_count; i++)
        if (strcmp(root->infos[i].name, "Backend") == 0 &&
            strcmp(root->infos[i].value, "Linux") == 0)
            return 1;
    return 0;
}

/* Restrict topo to the PUs of set; none left is an error naming what. */
static st_status restrict_to(hwloc_topology_t topo, hwloc_bitmap_t set, const char *what,
                             const char *source, st_error *err)
{
    hwloc_const_bitmap_t all = hwloc_topology_get_topology_cpuset(topo);
    if (!hwloc_bitmap_intersects(all, set))
        return st_fail(err, ST_EINPUT, "topology (%s): %s leaves no processing unit", source,
                       what);
    if (hwloc_topology_restrict(topo, set, 0) != 0)
        return st_fail(err, ST_EINTERNAL, "topology (%s): hwloc cannot restrict it to %s",
                       source, what);
    return ST_OK;
}

st_status st_topology_load(st_topology *t, const char *synthetic, const char *allowed,
                           st_error *err)
{
    memset(t, 0, sizeof *t);
    snprintf(t->source, sizeof t->source, "%s", synthetic ? synthetic : "this machine");
    hwloc_topology_t topo;
    if (hwloc_topology_init(&topo) != 0)
        return st_fail(err, ST_ENOMEM, "hwloc: cannot create a topology");
    hwloc_bitmap_t set = hwloc_bitmap_alloc();
    st_status st = set ? ST_OK : st_fail(err, ST_ENOMEM, "out of memory for a cpuset");
    if (st == ST_OK && synthetic && hwloc_topology_set_synthetic(topo, synthetic) != 0)
        st = st_fail(err, ST_EINPUT, "topology '%s': not a synthetic description hwloc "
                     "reads (expected levels such as \"pack:2 core:12 pu:1\")", synthetic);
    if (st == ST_OK && !synthetic)
        st = check_xmlfile(err);
    if (st == ST_OK) {
        int hidden = hide_hwloc_errors();
        if (hwloc_topology_load(topo) != 0)
            st = load_failed(t->source, err);
        show_hwloc_errors(hidden);
    }
    char vars[512];
    if (st == ST_OK && !synthetic && !hwloc_env_text(vars, sizeof vars) && !read_from_sys(topo))
        snprintf(t->note, sizeof t->note, "hwloc could not read /sys/devices/system "
                 "(hidden?): the cores as the processor reports them, the NUMA nodes not known");
    if (st == ST_OK && !synthetic) { /* this process's affinity */
        if (hwloc_get_cpubind(topo, set, HWLOC_CPUBIND_THREAD) == 0 &&
            !hwloc_bitmap_iszero(set))
            st = restrict_to(topo, set, "this process's affinity", t->source, err);
    }
    if (st == ST_OK && allowed) {
        int bad = hwloc_bitmap_list_sscanf(set, allowed) != 0;
        for (const char *c = allowed; !bad && *c; c++) /* hwloc accepts trailing text */
            bad = !(*c == ',' || *c == '-' || (*c >= '0' && *c <= '9'));
        if (bad || hwloc_bitmap_iszero(set))
            st = st_fail(err, ST_EINPUT, "allowed processing units '%s': expected a list of "
                         "OS indexes such as 0-5,8", allowed);
        else
            st = restrict_to(topo, set, allowed, t->source, err);
    }
    if (st == ST_OK && !synthetic)
        t->hw = topo; /* kept: the memory's placement asks it */
    if (st == ST_OK)
        st = fill(t, topo, err);
    if (set)
        hwloc_bitmap_free(set);
    if (!t->hw)
        hwloc_topology_destroy(topo);
    if (st != ST_OK)
        st_topology_free(t);
    return st;
}

/* The pages wholly inside [addr, addr + bytes): their start, 0 bytes when
 * none. */
static size_t whole_pages(const void *addr, size_t bytes, char **start)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    uintptr_t a = (uintptr_t)addr, b = a + bytes;
    uintptr_t first = (a + page - 1) / page * page, end = b / page * page;
    *start = (char *)first;
    return end > first ? end - first : 0;
}

st_status st_topology_move(const st_topology *t, void *addr, size_t bytes, int numa,
                           st_error *err)
{
    if (!t->hw || t->n_numa < 2 || numa < 0 || numa >= t->n_numa)
        return ST_OK;
    hwloc_topology_t topo = t->hw;
    char *start;
    size_t len = whole_pages(addr, bytes, &start);
    hwloc_obj_t node = hwloc_get_numanode_obj_by_os_index(topo, (unsigned)t->numa_os[numa]);
    if (!len || !node)
        return ST_OK;
    if (hwloc_set_area_membind(topo, start, len, node->nodeset, HWLOC_MEMBIND_BIND,
                               HWLOC_MEMBIND_MIGRATE | HWLOC_MEMBIND_BYNODESET) != 0)
        return st_fail(err, ST_EIO, "cannot move %.1f MB to NUMA node %d: %s",
                       (double)len / 1e6, t->numa_os[numa], strerror(errno));
    return ST_OK;
}

int st_topology_memory_node(const st_topology *t, const void *addr, size_t bytes)
{
    if (!t->hw)
        return -1;
    char *start;
    size_t len = whole_pages(addr, bytes, &start);
    hwloc_bitmap_t set = hwloc_bitmap_alloc();
    int found = -1;
    if (set && len &&
        hwloc_get_area_memlocation(t->hw, start, (size_t)sysconf(_SC_PAGESIZE), set,
                                   HWLOC_MEMBIND_BYNODESET) == 0) {
        int os = hwloc_bitmap_first(set);
        for (int k = 0; k < t->n_numa && os >= 0; k++)
            if (t->numa_os[k] == os)
                found = k;
    }
    if (set)
        hwloc_bitmap_free(set);
    return found;
}
