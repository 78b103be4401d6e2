/* The Darknet-format .cfg reader: text -> sections of key=value options with
 * line numbers, and strict typed getters. See include/base/cfg.h. */
#include "base/cfg.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/fileio.h"

/* A cfg is a few kilobytes; anything this large is not one. */
#define CFG_MAX_BYTES (16u << 20)

static char *cfg_strndup(const char *s, size_t n, st_error *err)
{
    char *d = st_calloc(n + 1, 1, "cfg text", err);
    if (d)
        memcpy(d, s, n);
    return d;
}

static void trim(const char **b, const char **e)
{
    while (*b < *e && isspace((unsigned char)**b))
        (*b)++;
    while (*e > *b && isspace((unsigned char)(*e)[-1]))
        (*e)--;
}

/* Cut an inline comment: '#' or ';' at the start or after whitespace. */
static const char *cut_comment(const char *b, const char *e)
{
    for (const char *p = b; p < e; p++)
        if ((*p == '#' || *p == ';') && (p == b || isspace((unsigned char)p[-1])))
            return p;
    return e;
}

static st_status add_section(st_cfg *cfg, const char *b, const char *e, int line,
                             st_error *err)
{
    st_cfg_section *secs = realloc(cfg->secs, (size_t)(cfg->n_secs + 1) * sizeof *secs);
    if (!secs)
        return st_fail(err, ST_ENOMEM, "out of memory reading %s", cfg->path);
    cfg->secs = secs;
    st_cfg_section *s = &secs[cfg->n_secs];
    memset(s, 0, sizeof *s);
    s->line = line;
    s->type = cfg_strndup(b, (size_t)(e - b), err);
    if (!s->type)
        return ST_ENOMEM;
    cfg->n_secs++;
    return ST_OK;
}

static st_status add_option(st_cfg *cfg, const char *kb, const char *ke, const char *vb,
                            const char *ve, int line, st_error *err)
{
    st_cfg_section *s = &cfg->secs[cfg->n_secs - 1];
    size_t klen = (size_t)(ke - kb);
    for (int i = 0; i < s->n_opts; i++)
        if (strlen(s->opts[i].key) == klen && memcmp(s->opts[i].key, kb, klen) == 0)
            return st_fail(err, ST_EINPUT,
                           "%s:%d: duplicate key '%s' in [%s] (first set at line %d)",
                           cfg->path, line, s->opts[i].key, s->type, s->opts[i].line);
    st_cfg_option *opts = realloc(s->opts, (size_t)(s->n_opts + 1) * sizeof *opts);
    if (!opts)
        return st_fail(err, ST_ENOMEM, "out of memory reading %s", cfg->path);
    s->opts = opts;
    st_cfg_option *o = &opts[s->n_opts];
    memset(o, 0, sizeof *o);
    o->line = line;
    o->key = cfg_strndup(kb, klen, err);
    o->val = cfg_strndup(vb, (size_t)(ve - vb), err);
    s->n_opts++;
    if (!o->key || !o->val)
        return ST_ENOMEM;
    return ST_OK;
}

static st_status parse_line(st_cfg *cfg, const char *b, const char *e, int line,
                            st_error *err)
{
    trim(&b, &e);
    if (b == e || *b == '#' || *b == ';')
        return ST_OK;
    if (*b == '[') {
        const char *close = memchr(b, ']', (size_t)(e - b));
        if (!close)
            return st_fail(err, ST_EINPUT, "%s:%d: section header without ']': expected [name]",
                           cfg->path, line);
        const char *rest = close + 1, *rest_end = cut_comment(rest, e);
        trim(&rest, &rest_end);
        if (rest != rest_end)
            return st_fail(err, ST_EINPUT, "%s:%d: text after section header: expected [name] alone",
                           cfg->path, line);
        const char *nb = b + 1, *ne = close;
        trim(&nb, &ne);
        if (nb == ne)
            return st_fail(err, ST_EINPUT, "%s:%d: empty section name: expected [name]",
                           cfg->path, line);
        return add_section(cfg, nb, ne, line, err);
    }
    const char *eq = memchr(b, '=', (size_t)(e - b));
    if (!eq)
        return st_fail(err, ST_EINPUT, "%s:%d: expected key=value or [section], got '%.*s'",
                       cfg->path, line, (int)(e - b > 60 ? 60 : e - b), b);
    if (cfg->n_secs == 0)
        return st_fail(err, ST_EINPUT, "%s:%d: option before any section: expected [net] first",
                       cfg->path, line);
    const char *kb = b, *ke = eq, *vb = eq + 1, *ve = cut_comment(eq + 1, e);
    trim(&kb, &ke);
    trim(&vb, &ve);
    if (kb == ke)
        return st_fail(err, ST_EINPUT, "%s:%d: missing key before '='", cfg->path, line);
    if (vb == ve)
        return st_fail(err, ST_EINPUT, "%s:%d: key '%.*s' has no value: expected key=value",
                       cfg->path, line, (int)(ke - kb), kb);
    for (const char *p = kb; p < ke; p++)
        if (isspace((unsigned char)*p))
            return st_fail(err, ST_EINPUT, "%s:%d: key '%.*s' contains a space", cfg->path,
                           line, (int)(ke - kb), kb);
    return add_option(cfg, kb, ke, vb, ve, line, err);
}

/* flat (a kind of file, or NULL): a key=value file without sections
 * (Darknet's .data files); its options go into one section called flat. */
static st_status cfg_parse_text(st_cfg *cfg, const char *path, const char *text, size_t len,
                                const char *flat, st_error *err)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->path = cfg_strndup(path, strlen(path), err);
    if (!cfg->path)
        return ST_ENOMEM;
    if (flat && add_section(cfg, flat, flat + strlen(flat), 1, err) != ST_OK) {
        st_cfg_free(cfg);
        return ST_ENOMEM;
    }
    const char *nul = memchr(text, '\0', len);
    if (nul) {
        int line = 1;
        for (const char *p = text; p < nul; p++)
            line += *p == '\n';
        st_fail(err, ST_EINPUT, "%s:%d: contains a NUL byte: expected a text file", path, line);
        st_cfg_free(cfg);
        return ST_EINPUT;
    }
    const char *p = text, *end = text + len;
    if (len >= 3 && memcmp(text, "\xef\xbb\xbf", 3) == 0)
        p += 3; /* a UTF-8 byte order mark, as some editors write: not text */
    int line = 1;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *le = nl ? nl : end;
        st_status st = parse_line(cfg, p, le, line, err);
        if (st == ST_OK && flat && cfg->n_secs > 1)
            st = st_fail(err, ST_EINPUT, "%s:%d: a %s file has no sections: expected "
                         "key=value lines only", path, line, flat);
        if (st != ST_OK) {
            st_cfg_free(cfg);
            return st;
        }
        p = nl ? nl + 1 : end;
        line++;
    }
    if (cfg->n_secs == 0) {
        st_fail(err, ST_EINPUT, "%s: no sections: expected [net] followed by layer sections",
                path);
        st_cfg_free(cfg);
        return ST_EINPUT;
    }
    return ST_OK;
}

st_status st_cfg_add_section(st_cfg *cfg, const char *type, int line, st_error *err)
{
    return add_section(cfg, type, type + strlen(type), line, err);
}

st_status st_cfg_add_option(st_cfg *cfg, const char *key, const char *val, int line,
                            st_error *err)
{
    if (cfg->n_secs == 0)
        return st_fail(err, ST_EINTERNAL, "%s: option %s= added before any section", cfg->path,
                       key);
    return add_option(cfg, key, key + strlen(key), val, val + strlen(val), line, err);
}

st_status st_cfg_parse(st_cfg *cfg, const char *path, const char *text, size_t len,
                       st_error *err)
{
    return cfg_parse_text(cfg, path, text, len, NULL, err);
}

static st_status cfg_load_file(st_cfg *cfg, const char *path, const char *flat,
                               st_error *err)
{
    memset(cfg, 0, sizeof *cfg);
    char *text;
    size_t len;
    char what[64];
    snprintf(what, sizeof what, "%s file", flat ? flat : "");
    st_status st = st_read_text(path, flat ? what : "network cfg", CFG_MAX_BYTES, &text, &len,
                                err);
    if (st != ST_OK)
        return st;
    st = cfg_parse_text(cfg, path, text, len, flat, err);
    free(text);
    return st;
}

st_status st_cfg_load(st_cfg *cfg, const char *path, st_error *err)
{
    return cfg_load_file(cfg, path, NULL, err);
}

st_status st_cfg_load_flat(st_cfg *cfg, const char *path, const char *kind, st_error *err)
{
    return cfg_load_file(cfg, path, kind, err);
}

void st_cfg_free(st_cfg *cfg)
{
    for (int i = 0; i < cfg->n_secs; i++) {
        st_cfg_section *s = &cfg->secs[i];
        for (int j = 0; j < s->n_opts; j++) {
            free(s->opts[j].key);
            free(s->opts[j].val);
        }
        free(s->opts);
        free(s->type);
    }
    for (int i = 0; i < cfg->n_warned; i++)
        free(cfg->warned[i]);
    free(cfg->warned);
    free(cfg->secs);
    free(cfg->path);
    memset(cfg, 0, sizeof *cfg);
}

st_cfg_option *st_cfg_find(st_cfg_section *sec, const char *key)
{
    for (int i = 0; i < sec->n_opts; i++)
        if (strcmp(sec->opts[i].key, key) == 0) {
            sec->opts[i].used = 1;
            return &sec->opts[i];
        }
    return NULL;
}

const char *st_cfg_where(const st_cfg *cfg, int line, char *buf, size_t size)
{
    snprintf(buf, size, "%s:%d", cfg->path, line);
    return buf;
}

static st_status bad_value(const st_cfg *cfg, const st_cfg_section *sec,
                           const st_cfg_option *o, const char *expected, st_error *err)
{
    return st_fail(err, ST_EINPUT, "%s:%d: [%s] %s=%s: expected %s", cfg->path, o->line,
                   sec->type, o->key, o->val, expected);
}

static int parse_int(const char *s, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (end == s || errno == ERANGE)
        return 0;
    while (isspace((unsigned char)*end))
        end++;
    *out = v;
    return *end == '\0';
}

size_t st_decimal_length(const char *s)
{
    const char *p = s;
    p += *p == '+' || *p == '-';
    size_t ints = strspn(p, "0123456789");
    p += ints;
    size_t fraction = 0;
    if (*p == '.')
        fraction = strspn(++p, "0123456789");
    p += fraction;
    if (ints + fraction == 0)
        return 0;
    if (*p == 'e' || *p == 'E') {
        const char *e = p + 1;
        e += *e == '+' || *e == '-';
        if (!isdigit((unsigned char)*e))
            return 0;
        p = e + strspn(e, "0123456789");
    }
    return (size_t)(p - s);
}

/* Whether s is a decimal number (st_decimal_length), then blanks only. */
static int decimal_syntax(const char *s)
{
    size_t n = st_decimal_length(s);
    return n > 0 && (s[n] == '\0' || isspace((unsigned char)s[n]));
}

static int parse_float(const char *s, float *out)
{
    if (!decimal_syntax(s))
        return 0;
    char *end;
    errno = 0;
    float v = strtof(s, &end);
    if (end == s || errno == ERANGE || !isfinite(v))
        return 0;
    while (isspace((unsigned char)*end))
        end++;
    *out = v;
    return *end == '\0';
}

st_status st_cfg_int(const st_cfg *cfg, st_cfg_section *sec, const char *key, int def,
                     int lo, int hi, int *out, st_error *err)
{
    st_cfg_option *o = st_cfg_find(sec, key);
    if (!o) {
        *out = def;
        return ST_OK;
    }
    long v;
    char expected[96];
    snprintf(expected, sizeof expected, "an integer in %d..%d", lo, hi);
    if (!parse_int(o->val, &v) || v < lo || v > hi)
        return bad_value(cfg, sec, o, expected, err);
    *out = (int)v;
    return ST_OK;
}

st_status st_cfg_float(const st_cfg *cfg, st_cfg_section *sec, const char *key, float def,
                       float lo, float hi, float *out, st_error *err)
{
    st_cfg_option *o = st_cfg_find(sec, key);
    if (!o) {
        *out = def;
        return ST_OK;
    }
    float v;
    char expected[96];
    snprintf(expected, sizeof expected, "a number in %g..%g", lo, hi);
    if (!parse_float(o->val, &v) || v < lo || v > hi)
        return bad_value(cfg, sec, o, expected, err);
    *out = v;
    return ST_OK;
}

void st_cfg_string(st_cfg_section *sec, const char *key, const char *def, const char **out)
{
    st_cfg_option *o = st_cfg_find(sec, key);
    *out = o ? o->val : def;
}

/* Split on commas; call item(i, text) for each trimmed entry. */
static st_status cfg_list(const st_cfg *cfg, st_cfg_section *sec, const char *key, int max,
                          int *count, int (*item)(void *, int, const char *), void *ctx,
                          const char *what, st_error *err)
{
    st_cfg_option *o = st_cfg_find(sec, key);
    *count = 0;
    if (!o)
        return ST_OK;
    char expected[128];
    snprintf(expected, sizeof expected, "a comma-separated list of at most %d %s", max, what);
    const char *p = o->val;
    int n = 0;
    for (;;) {
        const char *comma = strchr(p, ',');
        const char *b = p, *e = comma ? comma : p + strlen(p);
        trim(&b, &e);
        char tok[64];
        if (n >= max || b == e || (size_t)(e - b) >= sizeof tok)
            return bad_value(cfg, sec, o, expected, err);
        memcpy(tok, b, (size_t)(e - b));
        tok[e - b] = '\0';
        if (!item(ctx, n, tok))
            return bad_value(cfg, sec, o, expected, err);
        n++;
        if (!comma)
            break;
        p = comma + 1;
    }
    *count = n;
    return ST_OK;
}

static int int_item(void *ctx, int i, const char *tok)
{
    long v;
    if (!parse_int(tok, &v) || v < -1000000000L || v > 1000000000L)
        return 0;
    ((int *)ctx)[i] = (int)v;
    return 1;
}

static int float_item(void *ctx, int i, const char *tok)
{
    return parse_float(tok, &((float *)ctx)[i]);
}

st_status st_cfg_int_list(const st_cfg *cfg, st_cfg_section *sec, const char *key, int *out,
                          int max, int *count, st_error *err)
{
    return cfg_list(cfg, sec, key, max, count, int_item, out, "integers", err);
}

st_status st_cfg_float_list(const st_cfg *cfg, st_cfg_section *sec, const char *key,
                            float *out, int max, int *count, st_error *err)
{
    return cfg_list(cfg, sec, key, max, count, float_item, out, "numbers", err);
}

st_status st_cfg_enum(const st_cfg *cfg, st_cfg_section *sec, const char *key,
                      const char *const *names, int def, int *out, st_error *err)
{
    st_cfg_option *o = st_cfg_find(sec, key);
    if (!o) {
        *out = def;
        return ST_OK;
    }
    char expected[256] = "one of ";
    for (int i = 0; names[i]; i++) {
        if (strcmp(o->val, names[i]) == 0) {
            *out = i;
            return ST_OK;
        }
        size_t len = strlen(expected);
        snprintf(expected + len, sizeof expected - len, "%s%s", i ? ", " : "", names[i]);
    }
    return bad_value(cfg, sec, o, expected, err);
}

static int listed(const char *const *keys, const char *key)
{
    for (int i = 0; keys && keys[i]; i++)
        if (strcmp(keys[i], key) == 0)
            return 1;
    return 0;
}

/* Returns 1 the first time a (type, key) pair is seen. */
static int first_warning(st_cfg *cfg, const char *type, const char *key)
{
    char tag[256];
    snprintf(tag, sizeof tag, "%s.%s", type, key);
    for (int i = 0; i < cfg->n_warned; i++)
        if (strcmp(cfg->warned[i], tag) == 0)
            return 0;
    char **w = realloc(cfg->warned, (size_t)(cfg->n_warned + 1) * sizeof *w);
    if (!w)
        return 1;
    cfg->warned = w;
    cfg->warned[cfg->n_warned] = strdup(tag);
    if (cfg->warned[cfg->n_warned])
        cfg->n_warned++;
    return 1;
}

st_status st_cfg_finish_section(st_cfg *cfg, st_cfg_section *sec, const char *kind,
                                const char *const *ignored, const st_log *log, st_error *err)
{
    for (int i = 0; i < sec->n_opts; i++) {
        st_cfg_option *o = &sec->opts[i];
        if (o->used)
            continue;
        if (!listed(ignored, o->key))
            return st_fail(err, ST_EINPUT, "%s:%d: unknown key '%s' in [%s]", cfg->path,
                           o->line, o->key, sec->type);
        o->used = 1;
        if (first_warning(cfg, kind, o->key))
            st_warn(log, "%s:%d: [%s] %s=%s is a Darknet option singletrain does not implement; ignored",
                     cfg->path, o->line, sec->type, o->key, o->val);
    }
    return ST_OK;
}

/* ---- settings as text ---- */

static int compare_keys(const void *a, const void *b)
{
    const st_cfg_option *x = *(const st_cfg_option *const *)a;
    const st_cfg_option *y = *(const st_cfg_option *const *)b;
    return strcmp(x->key, y->key);
}

/* Section i's options in key order, less the skipped ones (section 0):
 * pointers into cfg in *sorted, their count returned; -1 out of memory. */
static int sorted_options(const st_cfg *cfg, int i, const char *const *skip,
                          const st_cfg_option ***sorted)
{
    const st_cfg_section *sec = &cfg->secs[i];
    *sorted = malloc((size_t)(sec->n_opts ? sec->n_opts : 1) * sizeof **sorted);
    if (!*sorted)
        return -1;
    int n = 0;
    for (int j = 0; j < sec->n_opts; j++)
        if (i != 0 || !listed(skip, sec->opts[j].key))
            (*sorted)[n++] = &sec->opts[j];
    qsort(*sorted, (size_t)n, sizeof **sorted, compare_keys);
    return n;
}

st_status st_cfg_settings(const st_cfg *cfg, const char *const *skip, char **text,
                          size_t *len, st_error *err)
{
    size_t cap = 64;
    for (int i = 0; i < cfg->n_secs; i++)
        for (int j = 0; j < cfg->secs[i].n_opts; j++)
            cap += 16 + strlen(cfg->secs[i].opts[j].key) + strlen(cfg->secs[i].opts[j].val);
    *text = st_calloc(cap, 1, "the cfg's settings", err);
    if (!*text)
        return ST_ENOMEM;
    size_t at = 0;
    for (int i = 0; i < cfg->n_secs; i++) {
        const st_cfg_option **opt;
        int n = sorted_options(cfg, i, skip, &opt);
        if (n < 0) {
            free(*text);
            *text = NULL;
            return st_fail(err, ST_ENOMEM, "out of memory listing the settings of %s",
                           cfg->path);
        }
        for (int j = 0; j < n; j++)
            at += (size_t)snprintf(*text + at, cap - at, "%d %s=%s\n", i, opt[j]->key,
                                   opt[j]->val);
        free(opt);
    }
    *len = at;
    return ST_OK;
}

/* One line of settings text: section, key and value (not NUL-terminated);
 * 0 when the line is not of that form. */
typedef struct setting {
    long section;
    const char *key, *val;
    int key_len, val_len;
} setting;

static int parse_setting(const char *p, const char *end, setting *s)
{
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    const char *sp = memchr(p, ' ', (size_t)((nl ? nl : end) - p));
    const char *eq = sp ? memchr(sp, '=', (size_t)((nl ? nl : end) - sp)) : NULL;
    if (!nl || !sp || !eq || sp == p || eq == sp + 1)
        return 0;
    s->section = 0;
    for (const char *d = p; d < sp; d++) {
        if (*d < '0' || *d > '9' || s->section > 1000000000L)
            return 0;
        s->section = s->section * 10 + (*d - '0');
    }
    s->key = sp + 1;
    s->key_len = (int)(eq - sp - 1);
    s->val = eq + 1;
    s->val_len = (int)(nl - eq - 1);
    return 1;
}

int st_cfg_settings_differ(const st_cfg *cfg, const char *const *skip, const char *text,
                           size_t len, const char *other, char *msg, size_t size)
{
    const char *p = text, *end = text + len;
    int differ = 0;
    for (int i = 0; i < cfg->n_secs && !differ; i++) {
        const st_cfg_section *sec = &cfg->secs[i];
        const st_cfg_option **opt;
        int n = sorted_options(cfg, i, skip, &opt);
        if (n < 0) {
            snprintf(msg, size, "%s: out of memory comparing its settings", cfg->path);
            return 1;
        }
        /* a merge of the two sorted lists of section i: the first key in
         * one and not the other, or with another value, is the difference */
        for (int j = 0; !differ;) {
            setting s;
            int theirs = p < end && parse_setting(p, end, &s) && s.section == i;
            if (j == n && !theirs)
                break;
            int order = j == n ? 1 : !theirs ? -1 : strncmp(opt[j]->key, s.key, (size_t)s.key_len);
            if (theirs && j < n && order == 0 && opt[j]->key[s.key_len] != '\0')
                order = 1;
            differ = 1;
            if (order < 0)
                snprintf(msg, size, "%s:%d: [%s] %s=%s, but %s has no %s=", cfg->path,
                         opt[j]->line, sec->type, opt[j]->key, opt[j]->val, other,
                         opt[j]->key);
            else if (order > 0)
                snprintf(msg, size, "%s:%d: [%s] has no %.*s=, but %s has %.*s=%.*s",
                         cfg->path, sec->line, sec->type, s.key_len, s.key, other, s.key_len,
                         s.key, s.val_len, s.val);
            else if ((int)strlen(opt[j]->val) != s.val_len ||
                     memcmp(opt[j]->val, s.val, (size_t)s.val_len) != 0)
                snprintf(msg, size, "%s:%d: [%s] %s=%s, but %s has %s=%.*s", cfg->path,
                         opt[j]->line, sec->type, opt[j]->key, opt[j]->val, other,
                         opt[j]->key, s.val_len, s.val);
            else {
                differ = 0;
                j++;
                p = s.val + s.val_len + 1;
            }
        }
        free(opt);
    }
    if (!differ && p < end) {
        snprintf(msg, size, "%s: %s has settings of sections this cfg does not have",
                 cfg->path, other);
        differ = 1;
    }
    return differ;
}
