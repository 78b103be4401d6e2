/* What the `cpe` backend (src/backends/cpe.c) predicted: the SW26010 time
 * of each layer's CPE kernels, printed at the end of a run. */
#ifndef ST_CPE_BACKEND_H
#define ST_CPE_BACKEND_H

#include "backend.h"

/* One line per layer run on the CPEs (forward, backward-data and
 * backward-weights ms per iteration, flop per DMA byte, strategy), then the
 * iteration's total and one processor's images/s (4 core groups, each a
 * shard of images_per_iteration). ctx is a cpe backend context. */
void st_cpe_backend_report(const st_bctx *ctx, long iterations, int images_per_iteration,
                           void (*print)(void *pctx, const char *line), void *pctx);

#endif
