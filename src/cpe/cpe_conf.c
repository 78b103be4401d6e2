/* The reader of the SW26010 description files (cpe_conf.h): lines cut
 * into NAME VALUE UNIT SOURCE, numbers checked against each entry's range,
 * the DMA curve's rows, every entry exactly once. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/fileio.h"
#include "cpe/cpe.h"
#include "cpe_conf.h"

/* The largest description file read: a few kilobytes in practice. */
#define CONF_MAX_BYTES (1 << 20)

/* A line cut into its fields (pointers into the line, NUL-ended). */
typedef struct conf_line {
    char *name, *value, *unit, *source;
} conf_line;

static char *skip_space(char *s)
{
    while (*s == ' ' || *s == '\t' || *s == '\r')
        s++;
    return s;
}

static char *cut_word(char *s)
{
    while (*s && *s != ' ' && *s != '\t' && *s != '\r')
        s++;
    if (*s)
        *s++ = '\0';
    return s;
}

/* Split line (modified) into its fields; name NULL for a blank or comment
 * line. */
static void split_line(char *line, conf_line *f)
{
    memset(f, 0, sizeof *f);
    char *hash = strchr(line, '#');
    if (hash)
        *hash = '\0';
    char *s = skip_space(line);
    if (!*s)
        return;
    f->name = s;
    s = skip_space(cut_word(s));
    f->value = *s ? s : NULL;
    s = skip_space(cut_word(s));
    f->unit = *s ? s : NULL;
    s = skip_space(cut_word(s));
    size_t n = strlen(s);
    while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r'))
        s[--n] = '\0';
    f->source = *s ? s : NULL;
}

/* A finite decimal number (no hex, no inf or nan) filling all of text. */
static int parse_number(const char *text, double *out)
{
    if (!*text || strpbrk(text, "xXiInN"))
        return 0;
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    if (*end || errno != 0 || !isfinite(v))
        return 0;
    *out = v;
    return 1;
}

static int in_range(const cpe_conf_entry *e, double v)
{
    return (e->open_lo ? v > e->lo : v >= e->lo) && v <= e->hi;
}

static void range_text(const cpe_conf_entry *e, char *buf, size_t size)
{
    snprintf(buf, size, "%s %g and at most %g %s", e->open_lo ? "above" : "at least", e->lo,
             e->hi, e->unit);
}

/* A comma-separated list of numbers into the curve's row (e's kind). */
static st_status parse_curve(void *target, const cpe_conf_entry *e, char *value,
                             const char *where, st_error *err)
{
    st_cpe_dma_curve *curve = (st_cpe_dma_curve *)((char *)target + e->offset);
    double v[ST_CPE_DMA_CURVE_POINTS];
    int n = 0;
    char range[96];
    range_text(e, range, sizeof range);
    for (char *tok = value;; n++) {
        char *comma = strchr(tok, ',');
        if (comma)
            *comma = '\0';
        if (n == ST_CPE_DMA_CURVE_POINTS)
            return st_fail(err, ST_EINPUT, "%s: %s has more than %d points", where, e->name,
                           ST_CPE_DMA_CURVE_POINTS);
        if (!parse_number(tok, &v[n]) || !in_range(e, v[n]))
            return st_fail(err, ST_EINPUT, "%s: %s: point %d, '%s', is not a number %s", where,
                           e->name, n + 1, tok, range);
        if (!comma)
            break;
        tok = comma + 1;
    }
    n++;
    if (curve->points && curve->points != n)
        return st_fail(err, ST_EINPUT, "%s: %s has %d points where an earlier DMA curve row has %d",
                       where, e->name, n, curve->points);
    curve->points = n;
    double *col = e->kind == CPE_CONF_CURVE_BYTES ? curve->bytes
                  : e->kind == CPE_CONF_CURVE_GET ? curve->get_cycles
                                                  : curve->put_cycles;
    for (int i = 0; i < n; i++) {
        if (e->kind == CPE_CONF_CURVE_BYTES && i > 0 && !(v[i] > v[i - 1]))
            return st_fail(err, ST_EINPUT, "%s: %s must increase: point %d (%g) follows %g",
                           where, e->name, i + 1, v[i], v[i - 1]);
        col[i] = v[i];
    }
    return ST_OK;
}

static const cpe_conf_entry *find_entry(const cpe_conf *c, const char *name)
{
    for (int i = 0; i < c->count; i++)
        if (strcmp(c->entries[i].name, name) == 0)
            return &c->entries[i];
    return NULL;
}

static st_status parse_line(const cpe_conf *c, void *target, conf_line *f, const int seen[],
                            const char *where, st_error *err)
{
    const cpe_conf_entry *e = find_entry(c, f->name);
    if (!e)
        return st_fail(err, ST_EINPUT, "%s: unknown %s '%s' (expected NAME VALUE UNIT SOURCE "
                       "with %s)", where, c->item, f->name, c->known);
    int i = (int)(e - c->entries);
    if (seen[i])
        return st_fail(err, ST_EINPUT, "%s: %s is given again (first on line %d)", where,
                       e->name, seen[i]);
    if (!f->value || !f->unit || !f->source)
        return st_fail(err, ST_EINPUT, "%s: %s needs a value, a unit (%s) and a source",
                       where, e->name, e->unit);
    if (strcmp(f->unit, e->unit) != 0)
        return st_fail(err, ST_EINPUT, "%s: %s is in %s, not '%s'", where, e->name, e->unit,
                       f->unit);
    if (e->kind != CPE_CONF_REAL && e->kind != CPE_CONF_INT)
        return parse_curve(target, e, f->value, where, err);
    double v;
    char range[96];
    range_text(e, range, sizeof range);
    if (!parse_number(f->value, &v) || !in_range(e, v) || (e->kind == CPE_CONF_INT && v != floor(v)))
        return st_fail(err, ST_EINPUT, "%s: %s: '%s' is not a %snumber %s", where, e->name,
                       f->value, e->kind == CPE_CONF_INT ? "whole " : "", range);
    if (e->kind == CPE_CONF_INT)
        *(int *)((char *)target + e->offset) = (int)v;
    else
        *(double *)((char *)target + e->offset) = v;
    return ST_OK;
}

/* Every entry seen, and every curve of at least 2 points. */
static st_status check_complete(const cpe_conf *c, const void *target, const int seen[],
                                const char *origin, st_error *err)
{
    for (int i = 0; i < c->count; i++)
        if (!seen[i])
            return st_fail(err, ST_EINPUT, "%s: %s (%s) is missing: %s", origin,
                           c->entries[i].name, c->entries[i].unit, c->whole);
    for (int i = 0; i < c->count; i++) {
        const cpe_conf_entry *e = &c->entries[i];
        const st_cpe_dma_curve *curve = (const st_cpe_dma_curve *)((const char *)target + e->offset);
        if (e->kind == CPE_CONF_CURVE_BYTES && curve->points < 2)
            return st_fail(err, ST_EINPUT, "%s: the DMA curve needs at least 2 points", origin);
    }
    return ST_OK;
}

st_status cpe_conf_parse(const cpe_conf *c, void *target, const char *text, const char *origin,
                         int *line, st_error *err)
{
    int *seen = calloc((size_t)c->count, sizeof *seen);
    if (!seen)
        return st_fail(err, ST_ENOMEM, "out of memory reading %s", origin);
    st_status st = ST_OK;
    const char *at = text;
    for (int lineno = 1; st == ST_OK && *at; lineno++) {
        const char *nl = strchr(at, '\n');
        size_t len = nl ? (size_t)(nl - at) : strlen(at);
        char buf[1024], where[512];
        snprintf(where, sizeof where, "%s:%d", origin, lineno);
        if (len >= sizeof buf) {
            st = st_fail(err, ST_EINPUT, "%s: line longer than %zu characters", where,
                         sizeof buf - 1);
            break;
        }
        memcpy(buf, at, len);
        buf[len] = '\0';
        conf_line f;
        split_line(buf, &f);
        if (f.name) {
            st = parse_line(c, target, &f, seen, where, err);
            if (st == ST_OK)
                seen[find_entry(c, f.name) - c->entries] = lineno;
        }
        at = nl ? nl + 1 : at + len;
    }
    if (st == ST_OK)
        st = check_complete(c, target, seen, origin, err);
    if (st == ST_OK && line)
        memcpy(line, seen, (size_t)c->count * sizeof *seen);
    free(seen);
    return st;
}

st_status cpe_conf_load(const cpe_conf *c, void *target, const char *path, const char *builtin,
                        const char *builtin_origin, int *line, st_error *err)
{
    if (!path)
        return cpe_conf_parse(c, target, builtin, builtin_origin, line, err);
    char *text = NULL;
    size_t len = 0;
    st_status st = st_read_text(path, c->file, CONF_MAX_BYTES, &text, &len, err);
    if (st == ST_OK && strlen(text) != len)
        st = st_fail(err, ST_EINPUT, "%s: a NUL byte after %zu bytes: not a %s (text)", path,
                     strlen(text), c->file);
    if (st == ST_OK)
        st = cpe_conf_parse(c, target, text, path, line, err);
    free(text);
    return st;
}
