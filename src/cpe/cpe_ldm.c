/* LDM: each CPE's scratch pad (the machine's ldm_bytes: 64 KB on the
 * SW26010), handed out by a stack allocator that
 * the launch empties. An allocation that does not fit stops the launch with
 * a message naming the kernel, the CPE, the request and what is in use. */
#include "cpe_internal.h"

void *st_cpe_ldm_alloc(st_cpe *cpe, size_t bytes, const char *what)
{
    size_t offset = (cpe->ldm_used + ST_CPE_LDM_ALIGN - 1) / ST_CPE_LDM_ALIGN * ST_CPE_LDM_ALIGN;
    size_t ldm = cpe->cg->ldm_bytes;
    if (offset > ldm || bytes > ldm - offset)
        cpe_fault(cpe,
                  "LDM allocation '%s' of %zu bytes does not fit: %zu of the %zu bytes of LDM "
                  "are in use",
                  what, bytes, cpe->ldm_used, ldm);
    cpe->ldm_used = offset + bytes;
    if (cpe->ldm_used > cpe->counts.ldm_peak)
        cpe->counts.ldm_peak = cpe->ldm_used;
    return cpe->ldm + offset;
}

size_t st_cpe_ldm_mark(const st_cpe *cpe)
{
    return cpe->ldm_used;
}

void st_cpe_ldm_release(st_cpe *cpe, size_t mark)
{
    if (mark > cpe->ldm_used)
        cpe_fault(cpe, "LDM release to mark %zu, above the %zu bytes in use", mark, cpe->ldm_used);
    cpe->ldm_used = mark;
}

int cpe_ldm_owns(const st_cpe *cpe, const void *p, size_t bytes)
{
    uintptr_t at = (uintptr_t)p, base = (uintptr_t)cpe->ldm;
    return at >= base && bytes <= cpe->ldm_used && at - base <= cpe->ldm_used - bytes;
}
