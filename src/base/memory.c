/* Aligned tensor memory and resident-memory figures; see memory.h.
 *
 * Blocks of 1 MiB and more come from mmap: the kernel hands out zero pages
 * when they are first touched, so nothing is written (or resident) until
 * used. Every block starts with a 64-byte header holding its mapping size
 * (or 0 for small heap blocks), so st_free_aligned knows how to release it. */
#include "base/memory.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define HEADER 64
#define MAP_THRESHOLD (1u << 20)

void *st_alloc_aligned(size_t bytes, const char *what, st_error *err)
{
    size_t total = HEADER + (bytes + 63) / 64 * 64;
    char *base;
    if (total >= MAP_THRESHOLD) {
        base = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (base == MAP_FAILED)
            base = NULL;
        else
            *(size_t *)base = total;
    } else {
        base = aligned_alloc(64, total);
        if (base) {
            memset(base, 0, total);
            *(size_t *)base = 0;
        }
    }
    if (!base) {
        st_fail(err, ST_ENOMEM, "out of memory allocating %s (%zu bytes)", what, bytes);
        return NULL;
    }
    return base + HEADER;
}

void st_free_aligned(void *p)
{
    if (!p)
        return;
    char *base = (char *)p - HEADER;
    size_t mapped = *(size_t *)base;
    if (mapped)
        munmap(base, mapped);
    else
        free(base);
}

static size_t status_kb(const char *key)
{
    FILE *f = fopen("/proc/self/status", "r");
    if (!f)
        return 0;
    char line[256];
    size_t kb = 0, len = strlen(key);
    while (fgets(line, sizeof line, f))
        if (strncmp(line, key, len) == 0 && line[len] == ':') {
            kb = (size_t)strtoull(line + len + 1, NULL, 10);
            break;
        }
    fclose(f);
    return kb * 1024;
}

size_t st_peak_rss(void)
{
    return status_kb("VmHWM");
}

size_t st_current_rss(void)
{
    return status_kb("VmRSS");
}
