/* What the `cpe` backend (src/backends/cpe.c) predicted: the SW26010 time
 * of each kernel, per pass and per iteration, printed at the end of a run
 * and, on request, traced per iteration to a CSV file. */
#ifndef ST_CPE_BACKEND_H
#define ST_CPE_BACKEND_H

#include "backend.h"

/* One line per kernel in layer order (where it runs, forward, backward-data
 * and backward-weights ms per iteration, flop per DMA byte, the convolution
 * strategy chosen per pass with both trial times), the slice's gradient sum
 * and update, the iteration's total during and after the strategy trials,
 * and one processor's images/s (4 core groups, each a shard of
 * images_per_iteration and a quarter of the slice work, which this run
 * split over workers). ctx is a cpe backend context. */
void st_cpe_backend_report(const st_bctx *ctx, int images_per_iteration, int workers,
                           void (*print)(void *pctx, const char *line), void *pctx);

/* Write every iteration's predicted ms per kernel and pass to a CSV at
 * path (iteration, kernel, forward_ms, bwd_data_ms, bwd_weights_ms), as
 * path.partial until st_cpe_backend_trace_finish renames it. */
st_status st_cpe_backend_trace(st_bctx *ctx, const char *path, st_error *err);
st_status st_cpe_backend_trace_finish(st_bctx *ctx, st_error *err);

#endif
