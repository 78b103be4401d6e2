/* The reference backend (src/backends/ref/: plain C kernels, clarity first,
 * the test oracle) as code outside it may use it; everything else reaches
 * it through backend.h and the registry like any backend.
 *
 * Who uses it, and why:
 * - the cpe backend (src/backends/cpe/). Its MPE-side kernels are the
 *   reference ones: batch norm, LRN and softmax ran on the SW26010's MPE in
 *   plain C (swCaffe), so cpe_kernels.c creates them with
 *   st_backend_ref.kernel_create (with no context: the reference kernels
 *   need none) and costs them with the MPE roofline. cpe_backend.c also
 *   allocates its own kernels with ref_kernel_new, since they start as the
 *   reference kernels do (the kind's ops, a plain dst).
 * - the unit tests, which check the other backends' kernels against the
 *   reference kernels (test_conformance.c, test_cpe_kernels.c).
 * The reference backend's own helpers (its kinds' table, its GEMM, the
 * shared destroy and no-backward entry points) are private:
 * src/backends/ref/ref_internal.h. */
#ifndef ST_REF_H
#define ST_REF_H

#include "backends/backend.h"

/* The backend itself, as the registry lists it. kernel_create takes a NULL
 * context and an input in plain NCHW (src_layout NULL). */
extern const st_backend st_backend_ref;

/* Allocate a kernel struct of size bytes (st_kernel first), zeroed, with its
 * ops, kind and plain dst size ([d->n, st_kdesc_dst_values(d)] floats) set
 * from d; NULL (and err set) when out of memory. free() releases it. */
void *ref_kernel_new(size_t size, const st_kernel_ops *ops, const st_kdesc *d, st_error *err);

#endif
