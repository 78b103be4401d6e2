/* Names listed in messages; see strlist.h. */
#include "base/strlist.h"

#include <string.h>

void st_strlist_append(char *buf, size_t size, const char *name, size_t i, size_t n,
                       const char *last_sep)
{
    const char *sep = i == 0 ? "" : i + 1 == n ? last_sep : ", ";
    strncat(buf, sep, size - strlen(buf) - 1);
    strncat(buf, name, size - strlen(buf) - 1);
}
