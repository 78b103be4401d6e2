/* Names listed in messages, names made safe to print, text appended to a
 * buffer, and the lines of a text; see strlist.h. */
#include "base/strlist.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void st_strlist_append(char *buf, size_t size, const char *name, size_t i, size_t n,
                       const char *last_sep)
{
    const char *sep = i == 0 ? "" : i + 1 == n ? last_sep : ", ";
    strncat(buf, sep, size - strlen(buf) - 1);
    strncat(buf, name, size - strlen(buf) - 1);
}

/* The length of the valid UTF-8 sequence at s (2 to 4 bytes) that is not
 * a C1 control, or 0. */
static size_t utf8_length(const unsigned char *s)
{
    size_t n = s[0] >= 0xc2 && s[0] <= 0xdf ? 2 : s[0] >= 0xe0 && s[0] <= 0xef ? 3
             : s[0] >= 0xf0 && s[0] <= 0xf4 ? 4 : 0;
    for (size_t i = 1; i < n; i++)
        if ((s[i] & 0xc0) != 0x80)
            return 0;
    if ((n == 2 && s[0] == 0xc2 && s[1] < 0xa0) ||  /* C1 controls */
        (n == 3 && s[0] == 0xe0 && s[1] < 0xa0) ||  /* overlong */
        (n == 3 && s[0] == 0xed && s[1] >= 0xa0) || /* surrogates */
        (n == 4 && s[0] == 0xf0 && s[1] < 0x90) ||  /* overlong */
        (n == 4 && s[0] == 0xf4 && s[1] >= 0x90))   /* above U+10FFFF */
        return 0;
    return n;
}

void st_str_printable(char *dst, size_t size, const char *src)
{
    const unsigned char *s = (const unsigned char *)src;
    size_t used = 0;
    while (*s) {
        size_t n = *s >= 0x20 && *s < 0x7f ? 1 : *s >= 0x80 ? utf8_length(s) : 0;
        if (used + (n ? n : 4) >= size)
            break;
        if (n) {
            memcpy(dst + used, s, n);
            used += n;
            s += n;
        } else {
            snprintf(dst + used, size - used, "\\x%02x", *s++);
            used += 4;
        }
    }
    if (size)
        dst[used] = 0;
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

void st_str_appendf(char *buf, size_t size, size_t *len, const char *fmt, ...)
{
    if (*len + 1 >= size)
        return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf + *len, size - *len, fmt, ap);
    va_end(ap);
    if (n > 0)
        *len = *len + (size_t)n < size ? *len + (size_t)n : size - 1;
}
