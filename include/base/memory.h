/* Memory for tensors: cache-line aligned, zeroed, and for large blocks
 * mapped from the kernel so pages are only backed when first touched
 * ("allocate on demand"); and the process's peak resident memory. */
#ifndef ST_MEMORY_H
#define ST_MEMORY_H

#include <stddef.h>

#include "base/status.h"

/* 64-byte aligned, zeroed; free with st_free_aligned. */
void *st_alloc_aligned(size_t bytes, const char *what, st_error *err);
void st_free_aligned(void *p);

/* Peak resident set size of this process in bytes (VmHWM), 0 if unknown. */
size_t st_peak_rss(void);

/* Current resident set size in bytes (VmRSS), 0 if unknown. */
size_t st_current_rss(void);

#endif
