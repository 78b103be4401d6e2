/* What the `cpe` backend (cpe_backend.c) predicted: the SW26010 time
 * of each kernel, per pass and per iteration, printed at the end of a run,
 * written as CSV on request (--cpe-report) and traced per iteration
 * (--cpe-trace); and the run's emulation mode (--cpe-cost-only). */
#ifndef ST_CPE_BACKEND_H
#define ST_CPE_BACKEND_H

#include "backends/backend.h"

/* Before training: run->cost_only makes every launch of ctx run in the
 * emulator's cost-only mode (counters and predicted times of the full
 * emulation, no arithmetic: the network's values are not computed);
 * run->report_path (or NULL) is where st_cpe_backend_report writes its CSV;
 * run->model_path (or NULL) the SW26010 model file whose constants cost
 * the launches (include/cpe/model.h; NULL keeps the built-in
 * data/sw26010/model.conf, which every context starts with). */
st_status st_cpe_backend_run_begin(st_bctx *ctx, const st_backend_run *run, st_error *err);

/* One line per kernel in layer order (where it runs, forward, backward-data
 * and backward-weights ms per iteration, flop per DMA byte, the convolution
 * strategy chosen per pass with both trials' ms and each one's dominant
 * cost, or why the implicit one cannot run), a line for the layout
 * transformations at a convolution's edges, the slice's gradient sum and
 * update, the core group's iteration, and one processor's images/s: the
 * machine's core groups (4 on the SW26010) each with a shard of
 * images_per_iteration, core group 0 summing their gradients of params
 * floats and updating them (worker 0's update of its slice, one of
 * workers, scaled). With a report path, also the CSV
 *   section,kernel,name,on,pass,strategy,runs,seconds,layout_seconds,chosen,note
 * section "kernel": one row per kernel and pass (per strategy for a
 * convolution: the seconds of its trial call with its dominant cost in
 * note ("DMA 61%": the largest of its compute, DMA wait, register
 * communication, barriers, launches, MPE work and layout transformations,
 * and its share), runs 0 and the reason in note where the strategy cannot
 * run; others the steady mean, strategy "-", and their dominant cost in
 * note the same way);
 * section "host": work in plain C costed on the MPE (the data layer,
 * dropout, route, shortcut, the loss), kernel holding the layer (-1: data);
 * section "summary": name and seconds columns hold images_per_core_group,
 * core_group_iteration_seconds, cg0_sum_of_4_seconds, update_seconds,
 * processor_iteration_seconds, processor_img_s and
 * cpe_sum_of_2_seconds_per_float (the CPEs' rate of adding two buffers).
 * ctx is a cpe backend context. */
st_status st_cpe_backend_report(st_bctx *ctx, int images_per_iteration, int workers,
                                size_t params, void (*print)(void *pctx, const char *line),
                                void *pctx, st_error *err);

/* Write every iteration's predicted ms per kernel and pass to a CSV at
 * path (iteration, kernel, forward_ms, bwd_data_ms, bwd_weights_ms), as
 * path.partial until st_cpe_backend_trace_finish renames it (fileio.h's
 * st_output: a device or FIFO is written in place). */
st_status st_cpe_backend_trace(st_bctx *ctx, const char *path, st_error *err);
st_status st_cpe_backend_trace_finish(st_bctx *ctx, st_error *err);

#endif
