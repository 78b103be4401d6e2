/* The SW26010 model file (include/cpe/model.h): a table of every constant,
 * its unit, where it goes and its range (read by the shared reader,
 * cpe_conf.c), the cost model's parameters for a machine description, and
 * the cost model's defaults (the built-in files with the fitted constants
 * neutral). */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpe/model.h"
#include "cpe_conf.h"

#define CG(field) CPE_CONF_REAL, offsetof(st_sw26010_model, cg.field)
#define CURVE(kind) kind, offsetof(st_sw26010_model, cg.dma)
#define ORIGIN(field) CPE_CONF_REAL, offsetof(st_sw26010_model, dma_origin.field)
#define NET(field) CPE_CONF_REAL, offsetof(st_sw26010_model, cluster.field)
#define FIT(field) CPE_CONF_REAL, offsetof(st_sw26010_model, uncertainty.field)

static const cpe_conf_entry model_entries[] = {
    {"fma_latency_cycles", "cycles", CG(fma_latency_cycles), 0, 1e3, 0},
    {"loop_overhead_ops", "instructions", CG(loop_overhead_ops), 0, 1e3, 0},
    {"loop_entry_cycles", "cycles", CG(loop_entry_cycles), 0, 1e6, 0},
    {"gemm_block_cycles", "cycles", CG(gemm_block_cycles), 0, 1e6, 0},
    {"dma_curve_bytes", "B", CURVE(CPE_CONF_CURVE_BYTES), 1, 1e9, 1},
    {"dma_curve_get_cycles", "cycles", CURVE(CPE_CONF_CURVE_GET), 0, 1e9, 0},
    {"dma_curve_put_cycles", "cycles", CURVE(CPE_CONF_CURVE_PUT), 0, 1e9, 0},
    {"dma_curve_memory_bandwidth", "B/s", ORIGIN(memory_bandwidth), 0, 1e15, 1},
    {"dma_curve_clock_hz", "Hz", ORIGIN(clock_hz), 0, 1e12, 1},
    {"dma_curve_cpes", "1", ORIGIN(cpes), 1, ST_CPE_MAX, 0},
    {"dma_get_latency_cycles", "cycles", CG(dma_get_latency_cycles), 0, 1e9, 0},
    {"dma_put_latency_cycles", "cycles", CG(dma_put_latency_cycles), 0, 1e9, 0},
    {"dma_interleaved_share", "1", CG(dma_interleaved_share), 0, 1, 1},
    {"regcomm_recv_cycles", "cycles", CG(regcomm_recv_cycles), 0, 1e6, 0},
    {"float_msg_cycles", "cycles", CG(float_msg_cycles), 0, 1e3, 0},
    {"barrier_cycles", "cycles", CG(barrier_cycles), 0, 1e9, 0},
    {"launch_seconds", "s", CG(launch_seconds), 0, 1, 0},
    {"mpe_flops", "flop/s", CG(mpe_flops), 0, 1e15, 1},
    {"mpe_bandwidth", "B/s", CG(mpe_bandwidth), 0, 1e15, 1},
    {"allreduce_contention", "1", NET(allreduce_contention), 0, 1e6, 0},
    {"node_time_spread", "1", NET(node_time_spread), 0, 10, 0},
    {"uncertainty_pass", "1", FIT(pass), 0, 100, 0},
    {"uncertainty_explicit_fwd", "1", FIT(strategy_pass[0][0]), 0, 100, 0},
    {"uncertainty_explicit_bwd_data", "1", FIT(strategy_pass[0][1]), 0, 100, 0},
    {"uncertainty_explicit_bwd_weights", "1", FIT(strategy_pass[0][2]), 0, 100, 0},
    {"uncertainty_implicit_fwd", "1", FIT(strategy_pass[1][0]), 0, 100, 0},
    {"uncertainty_implicit_bwd_data", "1", FIT(strategy_pass[1][1]), 0, 100, 0},
    {"uncertainty_implicit_bwd_weights", "1", FIT(strategy_pass[1][2]), 0, 100, 0},
    {"uncertainty_speedup", "1", FIT(speedup), 0, 100, 0},
    {"uncertainty_share", "1", FIT(share), 0, 1, 0},
};

static const cpe_conf model_conf = {
    model_entries, (int)(sizeof model_entries / sizeof model_entries[0]),
    "constant", "SW26010 model file",
    "a NAME of the model: fma_latency_cycles, dma_curve_bytes, ... uncertainty_share; see "
    "data/sw26010/model.conf",
    "a model gives every constant",
};

st_status st_sw26010_model_parse(st_sw26010_model *m, const char *text, const char *origin,
                                 st_error *err)
{
    memset(m, 0, sizeof *m);
    return cpe_conf_parse(&model_conf, m, text, origin, NULL, err);
}

st_status st_sw26010_model_load(st_sw26010_model *m, const char *path, st_error *err)
{
    memset(m, 0, sizeof *m);
    return cpe_conf_load(&model_conf, m, path, st_sw26010_model_builtin,
                         "the built-in SW26010 model", NULL, err);
}

st_cpe_cost_params st_sw26010_cost_params(const st_sw26010_model *m, const st_cpe_machine *machine)
{
    st_cpe_cost_params p = m->cg;
    const st_sw26010_dma_origin *o = &m->dma_origin;
    p.clock_hz = machine->clock_hz;
    p.flops_per_cycle = 2.0 * machine->vector_doubles; /* a multiply-add per value */
    p.cpes = machine->cpes;
    p.regcomm_p2p_bandwidth = machine->regcomm_p2p_bandwidth;
    p.regcomm_bcast_bandwidth = machine->regcomm_bcast_bandwidth;
    p.regcomm_latency_cycles = machine->regcomm_latency_cycles;
    double clocks = machine->clock_hz / o->clock_hz;
    double occupancy = clocks * (o->memory_bandwidth / machine->memory_bandwidth) *
                       ((double)machine->cpes / o->cpes);
    for (int i = 0; i < p.dma.points; i++) {
        p.dma.get_cycles[i] *= occupancy;
        p.dma.put_cycles[i] *= occupancy;
    }
    p.dma_get_latency_cycles *= clocks;
    p.dma_put_latency_cycles *= clocks;
    return p;
}

/* A built-in file that does not parse: the build embeds checked files, so
 * a broken invariant. */
static void builtin_checked(st_status st, const st_error *err)
{
    if (st != ST_OK) {
        fprintf(stderr, "singletrain: %s\n", err->msg);
        abort();
    }
}

st_cpe_cost_params st_cpe_cost_params_default(void)
{
    st_cpe_machine machine;
    st_error err = {0};
    builtin_checked(st_cpe_machine_load(&machine, NULL, &err), &err);
    return st_sw26010_cost_params_neutral(&machine);
}

st_cpe_cost_params st_sw26010_cost_params_neutral(const st_cpe_machine *machine)
{
    st_sw26010_model m;
    st_error err = {0};
    builtin_checked(st_sw26010_model_load(&m, NULL, &err), &err);
    m.cg = st_sw26010_cost_params(&m, machine);
    /* Neutral where the fit on swCaffe's measurements decides: no saving
     * for interleaved transfers, no float penalty, swCandle's latency sum
     * split evenly. */
    m.cg.dma_interleaved_share = 1.0;
    m.cg.float_msg_cycles = 0.0;
    double latency = (m.cg.dma_get_latency_cycles + m.cg.dma_put_latency_cycles) / 2.0;
    m.cg.dma_get_latency_cycles = m.cg.dma_put_latency_cycles = latency;
    return m.cg;
}
