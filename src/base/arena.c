/* Arena planning and allocation; see include/base/arena.h. */
#include "base/arena.h"

#include <stdlib.h>
#include <string.h>

#include "base/memory.h"

st_status st_arena_reserve(st_arena *a, const char *name, size_t bytes, size_t *offset,
                           st_error *err)
{
    if (a->base)
        return st_fail(err, ST_EINTERNAL, "arena view '%s' reserved after allocation", name);
    st_arena_view *v = realloc(a->views, (size_t)(a->n_views + 1) * sizeof *v);
    if (!v)
        return st_fail(err, ST_ENOMEM, "out of memory planning arena view '%s' (%zu bytes for "
                       "%d views)", name, (size_t)(a->n_views + 1) * sizeof *v, a->n_views + 1);
    a->views = v;
    st_arena_view *view = &v[a->n_views++];
    memset(view, 0, sizeof *view);
    strncpy(view->name, name, sizeof view->name - 1);
    view->offset = a->bytes;
    view->bytes = bytes;
    a->bytes += st_align_up(bytes, ST_ALIGN);
    *offset = view->offset;
    return ST_OK;
}

void st_arena_reserve_scratch(st_arena *a, size_t bytes)
{
    if (bytes > a->scratch_bytes)
        a->scratch_bytes = bytes;
}

size_t st_arena_total(const st_arena *a)
{
    return a->bytes + st_align_up(a->scratch_bytes, ST_ALIGN);
}

st_status st_arena_alloc(st_arena *a, const char *what, st_error *err)
{
    a->base = st_alloc_aligned(st_arena_total(a), what, err);
    return a->base ? ST_OK : ST_ENOMEM;
}

void st_arena_free(st_arena *a)
{
    st_free_aligned(a->base);
    free(a->views);
    memset(a, 0, sizeof *a);
}
