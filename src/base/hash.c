/* FNV-1a hashing; see hash.h. */
#include "base/hash.h"

#include <string.h>

uint64_t st_hash_bytes(uint64_t h, const void *data, size_t len)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < len; i++)
        h = (h ^ p[i]) * 0x100000001b3ULL;
    return h;
}

uint64_t st_hash_string(uint64_t h, const char *s)
{
    return st_hash_bytes(h, s, strlen(s) + 1);
}
