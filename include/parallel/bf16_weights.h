/* The weights rounded to bf16, one copy for every worker (--precision
 * bf16): what the convolutions and inner products read as their bf16
 * weights (st_kargs.weights_bf16), instead of each kernel of each worker
 * converting the fp32 weights at every forward and backward-data call.
 *
 * The copy spans the whole parameter arena, in its order (the biases and
 * batch-norm parameters, under 1% of a network's, are converted with the
 * rest: the scheduler does not know which layer reads what). It is made
 * by the backend's own conversion (st_backend.bf16_convert), so a kernel
 * reading it gets the bits its own conversion would give, and kept
 * current where the weights change (parallel/scheduler.h):
 *   - at the start of every scheduler command (a BSP run, a test phase, an
 *     SSP / ASP run), worker r converts part r of the arena, then the
 *     workers meet: whatever changed the weights between commands (the
 *     start, --resume, --weights, the gathering of model-parallel blocks
 *     across ranks) is covered;
 *   - BSP: after worker r applies slice r (on one node or after the
 *     all-reduce; with --rank-update partitioned after the all-gather of
 *     the slice's new weights), it converts slice r, before `iter_end`,
 *     and with the model-parallel tail applied in backward (hybrid on one
 *     node) its part of the tail, which every worker finished updating
 *     before `mid`;
 *   - SSP / ASP: a worker applying its gradient to a slice converts it
 *     under the slice's lock.
 * Nothing converts it in between, so a forward reads the copy of the
 * weights it would have converted. */
#ifndef ST_BF16_WEIGHTS_H
#define ST_BF16_WEIGHTS_H

#include <stddef.h>
#include <stdint.h>

#include "backends/backend.h"
#include "base/status.h"

typedef struct st_bf16_weights st_bf16_weights;

/* The bytes the copy of an arena of count floats takes (the memory
 * estimate's "bf16 weights"). */
size_t st_bf16_weights_bytes(size_t count);

st_status st_bf16_weights_create(st_bf16_weights **out, size_t count, st_error *err);
void st_bf16_weights_free(st_bf16_weights *c);

/* The copy [count]. */
const uint16_t *st_bf16_weights_data(const st_bf16_weights *c);

/* Arena floats [b, e) of weights [count] converted into the copy, by the
 * backend be in the worker's context ctx (st_backend.bf16_convert; NULL:
 * st_bf16_convert). Nothing with c NULL (no copy kept). */
st_status st_bf16_weights_refresh(st_bf16_weights *c, const st_backend *be, st_bctx *ctx,
                                  const float *weights, size_t b, size_t e, st_error *err);

#endif
