/* The kernel descriptors' shared arithmetic, from the kinds' list; see
 * kdesc.h. */
#include "ops/kdesc.h"

size_t st_kdesc_dst_values(const st_kdesc *d)
{
    switch (d->kind) {
#define KD_VALUES(kind, stem, name)                                                        \
    case kind: return st_##stem##_dst_values((const st_##stem##_desc *)d);
        ST_KINDS(KD_VALUES)
#undef KD_VALUES
    }
    return 0;
}

size_t st_kdesc_size(st_kind kind)
{
    static const size_t sizes[ST_K_COUNT] = {
#define KD_SIZE(kind, stem, name) [kind] = sizeof(st_##stem##_desc),
        ST_KINDS(KD_SIZE)
#undef KD_SIZE
    };
    return (unsigned)kind < ST_K_COUNT ? sizes[kind] : 0;
}

const char *st_kind_name(st_kind kind)
{
    static const char *const names[ST_K_COUNT] = {
#define KD_NAME(kind, stem, name) [kind] = name,
        ST_KINDS(KD_NAME)
#undef KD_NAME
    };
    return (unsigned)kind < ST_K_COUNT ? names[kind] : "unknown";
}
