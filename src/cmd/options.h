/* Command-line options from a table: parsing and --help for any command.
 * Accepts "--name value", "--name=value", "-x value", "-xvalue" and "--"
 * to end the options; everything else is positional. Errors are ST_EUSAGE
 * naming the option and what it expects. */
#ifndef ST_OPTIONS_H
#define ST_OPTIONS_H

#include <stddef.h>
#include <stdio.h>

#include "base/status.h"

typedef enum st_opt_kind {
    ST_OPT_INT,    /* int in [min, max] */
    ST_OPT_INT_AUTO, /* int in [min, max], or "auto", stored as ST_OPT_AUTO */
    ST_OPT_LONG,   /* long in [min, max] */
    ST_OPT_U64,    /* uint64_t */
    ST_OPT_SIZE,   /* size_t in [min, max], with an optional K, M or G suffix */
    ST_OPT_STRING, /* const char *, non-empty */
    ST_OPT_FLAG,   /* int set to 1; takes no value */
} st_opt_kind;

#define ST_OPT_AUTO (-1)

typedef struct st_option {
    const char *name;
    char short_name;   /* 0: none */
    const char *arg;   /* the value's name in --help; NULL for flags */
    const char *group; /* --help section */
    const char *help;
    st_opt_kind kind;
    size_t offset;     /* of the field in the target struct */
    long min, max;
} st_option;

/* Parse argv[1..argc) into target; positional arguments go to pos (up to
 * max_pos; more is an error), their count to *n_pos. An option given
 * twice is an error (which one was meant is a guess). */
st_status st_options_parse(const st_option *opts, int n_opts, void *target, int argc,
                           char **argv, const char **pos, int max_pos, int *n_pos,
                           st_error *err);

/* usage lines, then the options grouped in the order of groups (NULL-ended),
 * all wrapped to 79 columns. */
void st_options_help(FILE *out, const char *usage, const st_option *opts, int n_opts,
                     const char *const *groups);

/* A real option's value v (NULL: not given, nothing done) in (0, max]
 * into *out; otherwise ST_EUSAGE: "option --NAME: expected EXPECTED, got
 * 'v'". */
st_status st_option_real(const char *name, const char *v, double max, const char *expected,
                         double *out, st_error *err);

/* An option naming one of names (NULL-ended): v (NULL: not given, nothing
 * done) as its index into *out; otherwise ST_EUSAGE: "option --NAME:
 * expected EXPECTED, got 'v'". */
st_status st_option_choice(const char *name, const char *v, const char *const *names,
                           const char *expected, int *out, st_error *err);

#endif
