/* Names listed in messages, and the lines of a text; see strlist.h. */
#include "base/strlist.h"

#include <string.h>

void st_strlist_append(char *buf, size_t size, const char *name, size_t i, size_t n,
                       const char *last_sep)
{
    const char *sep = i == 0 ? "" : i + 1 == n ? last_sep : ", ";
    strncat(buf, sep, size - strlen(buf) - 1);
    strncat(buf, name, size - strlen(buf) - 1);
}

const char *st_next_line(const char **p, const char *end, size_t *len)
{
    const char *line = *p;
    if (line >= end)
        return NULL;
    const char *eol = memchr(line, '\n', (size_t)(end - line));
    *len = eol ? (size_t)(eol - line) : (size_t)(end - line);
    *p = eol ? eol + 1 : end;
    return line;
}
