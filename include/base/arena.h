/* Arenas: one aligned allocation cut into named views.
 *
 * Sizes are planned first (st_arena_reserve returns each view's offset), then
 * the whole arena is allocated once. Views are 64-byte aligned so every
 * tensor starts on a cache line. One shared scratch region (the largest
 * request wins) serves temporaries that no two kernels hold at once. */
#ifndef ST_ARENA_H
#define ST_ARENA_H

#include <stddef.h>

#include "base/status.h"

#define ST_ALIGN 64

typedef struct st_arena_view {
    char name[48];
    size_t offset;
    size_t bytes;
} st_arena_view;

typedef struct st_arena {
    st_arena_view *views;
    int n_views;
    size_t bytes;         /* planned views, excluding scratch */
    size_t scratch_bytes; /* largest scratch request */
    char *base;           /* NULL until st_arena_alloc */
} st_arena;

/* Plan a view of bytes; its offset is stored in *offset. */
st_status st_arena_reserve(st_arena *a, const char *name, size_t bytes, size_t *offset,
                           st_error *err);

/* Ask for at least bytes of the shared scratch region. */
void st_arena_reserve_scratch(st_arena *a, size_t bytes);

/* Allocate (zeroed) what was planned. */
st_status st_arena_alloc(st_arena *a, const char *what, st_error *err);

void st_arena_free(st_arena *a);

static inline void *st_arena_at(const st_arena *a, size_t offset)
{
    return a->base + offset;
}

/* The scratch region (after st_arena_alloc). */
static inline void *st_arena_scratch(const st_arena *a)
{
    return a->base + a->bytes;
}

size_t st_arena_total(const st_arena *a);

static inline size_t st_align_up(size_t n, size_t align)
{
    return (n + align - 1) / align * align;
}

#endif
