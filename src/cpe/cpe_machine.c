/* The machine description (include/cpe/machine.h): its table of keys,
 * units and ranges, read by the shared reader (cpe_conf.c), then the
 * checks between keys: the mesh is the CPE count, square for the mesh
 * GEMM, and the LDM takes the kernels' smallest blocking. */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "cpe/cpe.h"
#include "cpe/machine.h"
#include "cpe_conf.h"

#define M(field) offsetof(st_cpe_machine, field)

static const cpe_conf_entry machine_entries[] = {
    {"core_groups", "1", CPE_CONF_INT, M(core_groups), 1, 64, 0},
    {"cpes", "1", CPE_CONF_INT, M(cpes), 1, ST_CPE_MAX, 0},
    {"mesh_rows", "1", CPE_CONF_INT, M(mesh_rows), 1, ST_CPE_MESH_MAX, 0},
    {"mesh_cols", "1", CPE_CONF_INT, M(mesh_cols), 1, ST_CPE_MESH_MAX, 0},
    {"ldm_bytes", "B", CPE_CONF_INT, M(ldm_bytes), 1, 16 << 20, 0},
    {"clock_hz", "Hz", CPE_CONF_REAL, M(clock_hz), 0, 1e12, 1},
    {"vector_doubles", "1", CPE_CONF_INT, M(vector_doubles), 1, 64, 0},
    {"memory_bandwidth", "B/s", CPE_CONF_REAL, M(memory_bandwidth), 0, 1e15, 1},
    {"regcomm_p2p_bandwidth", "B/s", CPE_CONF_REAL, M(regcomm_p2p_bandwidth), 0, 1e15, 1},
    {"regcomm_bcast_bandwidth", "B/s", CPE_CONF_REAL, M(regcomm_bcast_bandwidth), 0, 1e15, 1},
    {"regcomm_latency_cycles", "cycles", CPE_CONF_REAL, M(regcomm_latency_cycles), 0, 1e6, 0},
    {"net_latency_s", "s", CPE_CONF_REAL, M(net_latency_s), 0, 1, 0},
    {"net_bandwidth", "B/s", CPE_CONF_REAL, M(net_bandwidth), 0, 1e15, 1},
    {"supernode_nodes", "nodes", CPE_CONF_REAL, M(supernode_nodes), 1, 1e9, 0},
    {"cross_supernode_factor", "1", CPE_CONF_REAL, M(cross_supernode_factor), 1, 1e6, 0},
    {"io_bandwidth", "B/s", CPE_CONF_REAL, M(io_bandwidth), 0, 1e18, 1},
};

enum { KEY_CPES = 1, KEY_MESH_ROWS, KEY_MESH_COLS, KEY_LDM_BYTES };

static const cpe_conf machine_conf = {
    machine_entries, (int)(sizeof machine_entries / sizeof machine_entries[0]),
    "key", "machine description",
    "a NAME of the machine: core_groups, cpes, mesh_rows, ... io_bandwidth; see "
    "data/sw26010/sw26010.machine",
    "a machine description gives every key",
};

/* The checks between keys; line[] the line of each key. */
static st_status machine_check(const st_cpe_machine *m, const int line[], const char *origin,
                               st_error *err)
{
    if (m->mesh_rows * m->mesh_cols != m->cpes)
        return st_fail(err, ST_EINPUT, "%s:%d: mesh_cols: a mesh of %d x %d is %d CPEs, not the "
                       "%d of cpes (line %d): the mesh holds every CPE of the core group",
                       origin, line[KEY_MESH_COLS], m->mesh_rows, m->mesh_cols,
                       m->mesh_rows * m->mesh_cols, m->cpes, line[KEY_CPES]);
    if (m->mesh_rows != m->mesh_cols)
        return st_fail(err, ST_EINPUT, "%s:%d: mesh_cols: %d, not the %d of mesh_rows (line %d): "
                       "the mesh GEMM (swDNN's register communication, an operand down each "
                       "column and one along each row) needs a square mesh",
                       origin, line[KEY_MESH_COLS], m->mesh_cols, m->mesh_rows,
                       line[KEY_MESH_ROWS]);
    if (m->ldm_bytes < ST_CPE_LDM_MIN_BYTES)
        return st_fail(err, ST_EINPUT, "%s:%d: ldm_bytes: %d B is less than the %d B the "
                       "kernels' smallest blocking needs (include/cpe/machine.h)", origin,
                       line[KEY_LDM_BYTES], m->ldm_bytes, ST_CPE_LDM_MIN_BYTES);
    if (m->ldm_bytes % ST_CPE_LDM_ALIGN != 0)
        return st_fail(err, ST_EINPUT, "%s:%d: ldm_bytes: %d B is not a multiple of %d, the "
                       "LDM's alignment (a vector register's width)", origin,
                       line[KEY_LDM_BYTES], m->ldm_bytes, ST_CPE_LDM_ALIGN);
    return ST_OK;
}

static st_status machine_read(st_cpe_machine *m, const char *path, const char *text,
                              const char *origin, st_error *err)
{
    int line[sizeof machine_entries / sizeof machine_entries[0]];
    memset(m, 0, sizeof *m);
    st_status st = cpe_conf_load(&machine_conf, m, path, text, origin, line, err);
    if (st == ST_OK)
        st = machine_check(m, line, path ? path : origin, err);
    return st;
}

st_status st_cpe_machine_parse(st_cpe_machine *m, const char *text, const char *origin,
                               st_error *err)
{
    return machine_read(m, NULL, text, origin, err);
}

st_status st_cpe_machine_load(st_cpe_machine *m, const char *path, st_error *err)
{
    return machine_read(m, path, st_cpe_machine_builtin, "the built-in SW26010 description",
                        err);
}
