/* Table-driven command-line parsing and help; see options.h. */
#include "options.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/cfg.h"

/* --help's columns: options from column 2, their help from HELP_INDENT,
 * wrapped before HELP_WIDTH. */
#define HELP_INDENT 27
#define HELP_WIDTH 79

/* text from column col (>= indent), wrapped at spaces, continued at indent */
static void print_wrapped(FILE *out, const char *text, int col, int indent)
{
    const char *p = text;
    while (*p) {
        while (*p == ' ')
            p++;
        int word = (int)strcspn(p, " ");
        if (!word)
            break;
        if (col > indent && col + 1 + word > HELP_WIDTH) {
            fprintf(out, "\n%*s", indent, "");
            col = indent;
        } else if (col > indent) {
            fputc(' ', out);
            col++;
        }
        fwrite(p, 1, (size_t)word, out);
        col += word;
        p += word;
    }
    fputc('\n', out);
}

void st_options_help(FILE *out, const char *usage, const st_option *opts, int n_opts,
                     const char *const *groups)
{
    for (const char *line = usage; *line;) { /* lines over HELP_WIDTH wrapped */
        size_t len = strcspn(line, "\n");
        char text[1024];
        if (len <= HELP_WIDTH || len >= sizeof text) {
            fprintf(out, "%.*s\n", (int)len, line);
        } else {
            int indent = (int)strspn(line, " ");
            memcpy(text, line, len);
            text[len] = '\0';
            fprintf(out, "%*s", indent, "");
            print_wrapped(out, text + indent, indent, indent);
        }
        line += len + (line[len] == '\n');
    }
    for (int g = 0; groups[g]; g++) {
        fprintf(out, "\n%s:\n", groups[g]);
        for (int i = 0; i < n_opts; i++) {
            const st_option *o = &opts[i];
            if (strcmp(o->group, groups[g]) != 0)
                continue;
            char left[64];
            int len = snprintf(left, sizeof left, "%c%c%s--%s%s%s", o->short_name ? '-' : ' ',
                               o->short_name ? o->short_name : ' ', o->short_name ? ", " : "  ",
                               o->name, o->arg ? " " : "", o->arg ? o->arg : "");
            if (len > HELP_INDENT - 4) { /* the help starts on the next line: on this
                                             one it would follow a single space */
                fprintf(out, "  %s\n%*s", left, HELP_INDENT, "");
            } else {
                fprintf(out, "  %-*s ", HELP_INDENT - 3, left);
            }
            print_wrapped(out, o->help, HELP_INDENT, HELP_INDENT);
        }
    }
}

static st_status bad_value(const st_option *o, const char *val, const char *expected,
                           st_error *err)
{
    if (o->short_name)
        return st_fail(err, ST_EUSAGE, "option -%c/--%s: expected %s, got '%s'", o->short_name,
                       o->name, expected, val);
    return st_fail(err, ST_EUSAGE, "option --%s: expected %s, got '%s'", o->name, expected,
                   val);
}

static st_status set_value(const st_option *o, void *target, const char *val, st_error *err)
{
    char *field = (char *)target + o->offset;
    char *end;
    char expected[96];
    errno = 0;
    switch (o->kind) {
    case ST_OPT_INT_AUTO:
        if (strcmp(val, "auto") == 0) {
            *(int *)field = ST_OPT_AUTO;
            return ST_OK;
        }
        /* fall through */
    case ST_OPT_INT:
    case ST_OPT_LONG: {
        long v = strtol(val, &end, 10);
        snprintf(expected, sizeof expected, "an integer from %ld to %ld%s", o->min, o->max,
                 o->kind == ST_OPT_INT_AUTO ? " or auto" : "");
        if (end == val || *end || errno == ERANGE || v < o->min || v > o->max)
            return bad_value(o, val, expected, err);
        if (o->kind != ST_OPT_LONG)
            *(int *)field = (int)v;
        else
            *(long *)field = v;
        return ST_OK;
    }
    case ST_OPT_U64: {
        unsigned long long v = strtoull(val, &end, 10);
        if (end == val || *end || errno == ERANGE || val[0] == '-')
            return bad_value(o, val, "a non-negative integer", err);
        *(uint64_t *)field = v;
        return ST_OK;
    }
    case ST_OPT_SIZE: {
        unsigned long long v = strtoull(val, &end, 10), unit = 1;
        if (*end == 'K' || *end == 'k')
            unit = 1ull << 10;
        else if (*end == 'M' || *end == 'm')
            unit = 1ull << 20;
        else if (*end == 'G' || *end == 'g')
            unit = 1ull << 30;
        if (unit > 1)
            end++;
        snprintf(expected, sizeof expected, "a size from %ld to %ld bytes (K, M, G allowed)",
                 o->min, o->max);
        if (end == val || *end || errno == ERANGE || val[0] == '-' ||
            v > (unsigned long long)o->max / unit || v * unit < (unsigned long long)o->min)
            return bad_value(o, val, expected, err);
        *(size_t *)field = (size_t)(v * unit);
        return ST_OK;
    }
    case ST_OPT_STRING:
        if (!*val)
            return bad_value(o, val, "a non-empty value", err);
        *(const char **)field = val;
        return ST_OK;
    case ST_OPT_FLAG:
        *(int *)field = 1;
        return ST_OK;
    }
    return st_fail(err, ST_EINTERNAL, "option --%s has no kind", o->name);
}

static const st_option *find_long(const st_option *opts, int n, const char *name, size_t len)
{
    for (int i = 0; i < n; i++)
        if (strlen(opts[i].name) == len && strncmp(opts[i].name, name, len) == 0)
            return &opts[i];
    return NULL;
}

static const st_option *find_short(const st_option *opts, int n, char c)
{
    for (int i = 0; i < n; i++)
        if (opts[i].short_name == c)
            return &opts[i];
    return NULL;
}

/* Options a table may hold (those of one command). */
#define MAX_OPTIONS 64

/* An option given a second time: which value wins is a guess either way. */
static st_status given_twice(const st_option *o, const char *first, const char *second,
                             st_error *err)
{
    char name[64];
    if (o->short_name)
        snprintf(name, sizeof name, "-%c/--%s", o->short_name, o->name);
    else
        snprintf(name, sizeof name, "--%s", o->name);
    if (!o->arg)
        return st_fail(err, ST_EUSAGE, "option %s given twice: give it once", name);
    return st_fail(err, ST_EUSAGE, "option %s given twice ('%s', then '%s'): give it once",
                   name, first, second);
}

st_status st_options_parse(const st_option *opts, int n_opts, void *target, int argc,
                           char **argv, const char **pos, int max_pos, int *n_pos,
                           st_error *err)
{
    const char *seen[MAX_OPTIONS] = {NULL}; /* each option's value, once given */
    if (n_opts > MAX_OPTIONS)
        return st_fail(err, ST_EINTERNAL, "%d options in one table, at most %d", n_opts,
                       MAX_OPTIONS);
    int only_positional = 0;
    *n_pos = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (only_positional || a[0] != '-' || a[1] == '\0') {
            if (*n_pos < max_pos)
                pos[*n_pos] = a;
            (*n_pos)++;
            continue;
        }
        if (strcmp(a, "--") == 0) {
            only_positional = 1;
            continue;
        }
        const st_option *o;
        const char *val = NULL;
        if (a[1] == '-') {
            const char *eq = strchr(a + 2, '=');
            size_t len = eq ? (size_t)(eq - a - 2) : strlen(a + 2);
            o = find_long(opts, n_opts, a + 2, len);
            if (!o)
                return st_fail(err, ST_EUSAGE, "unknown option '%.*s' (see --help)",
                               (int)(len + 2), a);
            if (eq && !o->arg)
                return st_fail(err, ST_EUSAGE, "option --%s takes no value", o->name);
            val = eq ? eq + 1 : NULL;
        } else {
            o = find_short(opts, n_opts, a[1]);
            if (!o)
                return st_fail(err, ST_EUSAGE, "unknown option '-%c' (see --help)", a[1]);
            if (a[2] && !o->arg)
                return st_fail(err, ST_EUSAGE, "option -%c takes no value (in '%s')", a[1], a);
            val = a[2] ? a + 2 : NULL;
        }
        if (o->arg && !val) {
            if (i + 1 >= argc && o->short_name)
                return st_fail(err, ST_EUSAGE, "option -%c/--%s needs a value (%s)",
                               o->short_name, o->name, o->arg);
            if (i + 1 >= argc)
                return st_fail(err, ST_EUSAGE, "option --%s needs a value (%s)", o->name,
                               o->arg);
            val = argv[++i];
        }
        if (seen[o - opts])
            return given_twice(o, seen[o - opts], val ? val : "", err);
        seen[o - opts] = val ? val : "";
        st_status st = set_value(o, target, val ? val : "", err);
        if (st != ST_OK)
            return st;
    }
    if (*n_pos > max_pos)
        return st_fail(err, ST_EUSAGE, "%d arguments where at most %d are expected (see --help)",
                       *n_pos, max_pos);
    return ST_OK;
}

/* Decimal only, as the integer options and the cfg's numbers
 * (st_decimal_length): strtod alone took "0x10" as 16. */
st_status st_option_real(const char *name, const char *v, double max, const char *expected,
                         double *out, st_error *err)
{
    if (!v)
        return ST_OK;
    char *end;
    errno = 0;
    double f = strtod(v, &end);
    if (end == v || *end || errno || !(f > 0.0 && f <= max) ||
        st_decimal_length(v) != (size_t)(end - v))
        return st_fail(err, ST_EUSAGE, "option --%s: expected %s, got '%s'", name, expected, v);
    *out = f;
    return ST_OK;
}

st_status st_option_choice(const char *name, const char *v, const char *const *names,
                           const char *expected, int *out, st_error *err)
{
    if (!v)
        return ST_OK;
    for (int i = 0; names[i]; i++)
        if (strcmp(v, names[i]) == 0) {
            *out = i;
            return ST_OK;
        }
    return st_fail(err, ST_EUSAGE, "option --%s: expected %s, got '%s'", name, expected, v);
}
