/* Names listed in a message ("ref, dnnl or cpe"), built from the table
 * that holds them, so that no list is written out by hand beside it;
 * names read from a file made safe to print; text appended to a buffer;
 * and the lines of a text held in memory. */
#ifndef ST_STRLIST_H
#define ST_STRLIST_H

#include <stddef.h>

/* Append name, the i-th of n, to the string buf [size] (truncated, always
 * terminated): after ", " if i > 0, or after last_sep (" or ", ", ") if it
 * is the last of n > 1. */
void st_strlist_append(char *buf, size_t size, const char *name, size_t i, size_t n,
                       const char *last_sep);

/* src as text safe to print on a terminal, into dst [size] (truncated
 * before an escape it would cut, always terminated): every byte below 0x20,
 * 0x7f, a byte that is not part of valid UTF-8 and the UTF-8 of the C1
 * controls (U+0080..U+009F) written as \xNN, so that a name read from a
 * file (an ONNX node's) cannot send the terminal escape sequences or forge
 * lines. Printable ASCII and other UTF-8 are kept. */
void st_str_printable(char *dst, size_t size, const char *src);

/* printf's output appended to the string buf [size] at *len (its length):
 * what does not fit is cut, buf staying terminated, *len its new length. */
void st_str_appendf(char *buf, size_t size, size_t *len, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* The next line of the text [*p, end): its start (NULL at the end), its
 * length without the newline in *len; *p moves past the newline. */
const char *st_next_line(const char **p, const char *end, size_t *len);

#endif
