/* Command-line parsing and --help, both from one option table. Accepts
 * "--name value", "--name=value", "-x value", "-xvalue" and "--" to end the
 * options. */
#include "cli.h"

#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

typedef enum opt_kind {
    OPT_INT,    /* int in [min, max] */
    OPT_LONG,   /* long in [min, max] */
    OPT_SEED,   /* unsigned 64-bit */
    OPT_STRING,
    OPT_FLAG,   /* int set to 1 */
    OPT_SYNC,   /* bsp | ssp:S | asp */
    OPT_QUIET,
    OPT_VERBOSE,
    OPT_HELP,
    OPT_VERSION,
} opt_kind;

typedef struct cli_option {
    const char *name;
    char short_name;
    const char *arg;   /* NULL for flags */
    const char *group;
    const char *help;
    opt_kind kind;
    size_t offset;     /* into st_cli */
    long min, max;
} cli_option;

#define TRAIN(field) offsetof(st_cli, train.field)

static const cli_option options[] = {
    {"threads", 't', "N", "Training", "worker threads, one model replica each (default: one "
     "per core)", OPT_INT, TRAIN(threads), 1, 4096},
    {"batch", 'b', "N", "Training", "images per update (default: batch= in [net])", OPT_INT,
     TRAIN(batch), 1, 1 << 20},
    {"intra", 0, "N", "Training", "intra-op threads per worker (default 1; all cores for one "
     "worker on networks over 16M parameters)", OPT_INT, TRAIN(intra), 1, 1024},
    {"sync", 0, "MODE", "Training", "bsp (default), ssp:S (at most S iterations ahead of the "
     "slowest worker) or asp", OPT_SYNC, TRAIN(sync), 0, 1 << 20},
    {"iters", 0, "N", "Training", "iterations to run (default: --epochs, else max_batches=)",
     OPT_LONG, TRAIN(iters), 1, LONG_MAX},
    {"epochs", 0, "N", "Training", "passes over the training set", OPT_LONG, TRAIN(epochs), 1,
     1 << 20},
    {"seed", 0, "N", "Training", "seed of weights, data order and dropout (default 1)",
     OPT_SEED, TRAIN(seed), 0, 0},
    {"backend", 0, "NAME", "Training", "compute backend: dnnl, ref or cpe (default dnnl)",
     OPT_STRING, TRAIN(backend), 0, 0},
    {"data", 0, "FILE", "Data", "data file (train=, train_labels=, test=, test_labels=) "
     "overriding [net], or 'synthetic'", OPT_STRING, TRAIN(data), 0, 0},
    {"train-images", 0, "N", "Data", "use the first N training images (synthetic: make N)",
     OPT_LONG, TRAIN(train_images), 1, LONG_MAX},
    {"test-images", 0, "N", "Data", "use the first N test images (synthetic: make N)",
     OPT_LONG, TRAIN(test_images), 1, LONG_MAX},
    {"test-interval", 0, "N", "Output", "test every N iterations (default: every epoch and "
     "at the end)", OPT_LONG, TRAIN(test_interval), 1, LONG_MAX},
    {"no-test", 0, NULL, "Output", "never run the test phase", OPT_FLAG, TRAIN(no_test), 0, 0},
    {"log-every", 0, "N", "Output", "progress line every N iterations (default 100)",
     OPT_LONG, TRAIN(log_every), 1, LONG_MAX},
    {"warmup", 0, "N", "Output", "leave the first N iterations out of the speed figures",
     OPT_LONG, TRAIN(warmup), 0, LONG_MAX},
    {"profile", 0, NULL, "Output", "print per-layer times and the time split at the end",
     OPT_FLAG, TRAIN(profile), 0, 0},
    {"snapshot-dir", 0, "DIR", "Output", "save the trained weights in DIR", OPT_STRING,
     TRAIN(snapshot_dir), 0, 0},
    {"dry-run", 0, NULL, "Output", "check the cfg, print the layer table and stop", OPT_FLAG,
     offsetof(st_cli, dry_run), 0, 0},
    {"quiet", 'q', NULL, "Output", "only warnings and errors", OPT_QUIET, 0, 0, 0},
    {"verbose", 'v', NULL, "Output", "more detail", OPT_VERBOSE, 0, 0, 0},
    {"help", 'h', NULL, "Other", "this help", OPT_HELP, 0, 0, 0},
    {"version", 0, NULL, "Other", "print the version", OPT_VERSION, 0, 0, 0},
};

#define N_OPTIONS (sizeof options / sizeof options[0])

static const char *const groups[] = {"Training", "Data", "Output", "Other"};

void st_cli_help(FILE *out)
{
    fprintf(out, "usage: singletrain [options] NET.cfg\n\n"
                 "Trains the Darknet-format network NET.cfg on CPUs.\n");
    for (size_t g = 0; g < sizeof groups / sizeof groups[0]; g++) {
        fprintf(out, "\n%s:\n", groups[g]);
        for (size_t i = 0; i < N_OPTIONS; i++) {
            const cli_option *o = &options[i];
            if (strcmp(o->group, groups[g]) != 0)
                continue;
            char left[64];
            snprintf(left, sizeof left, "%c%c%s--%s%s%s", o->short_name ? '-' : ' ',
                     o->short_name ? o->short_name : ' ', o->short_name ? ", " : "  ", o->name,
                     o->arg ? " " : "", o->arg ? o->arg : "");
            fprintf(out, "  %-24s %s\n", left, o->help);
        }
    }
    fprintf(out, "\nExit status: 0 success, 2 bad usage or input, 1 run-time failure.\n");
}

static st_status bad_value(const cli_option *o, const char *val, const char *expected,
                           st_error *err)
{
    if (o->short_name)
        return st_fail(err, ST_EUSAGE, "option -%c/--%s: expected %s, got '%s'", o->short_name,
                       o->name, expected, val);
    return st_fail(err, ST_EUSAGE, "option --%s: expected %s, got '%s'", o->name, expected,
                   val);
}

static st_status set_value(st_cli *cli, const cli_option *o, const char *val, st_error *err)
{
    char *field = (char *)cli + o->offset;
    char *end;
    char expected[96];
    switch (o->kind) {
    case OPT_INT:
    case OPT_LONG: {
        errno = 0;
        long v = strtol(val, &end, 10);
        snprintf(expected, sizeof expected, "an integer from %ld to %ld", o->min, o->max);
        if (end == val || *end || errno == ERANGE || v < o->min || v > o->max)
            return bad_value(o, val, expected, err);
        if (o->kind == OPT_INT)
            *(int *)field = (int)v;
        else
            *(long *)field = v;
        return ST_OK;
    }
    case OPT_SEED: {
        errno = 0;
        unsigned long long v = strtoull(val, &end, 10);
        if (end == val || *end || errno == ERANGE || val[0] == '-')
            return bad_value(o, val, "a non-negative integer", err);
        *(uint64_t *)field = v;
        return ST_OK;
    }
    case OPT_STRING:
        if (!*val)
            return bad_value(o, val, "a non-empty value", err);
        *(const char **)field = val;
        return ST_OK;
    case OPT_FLAG: *(int *)field = 1; return ST_OK;
    case OPT_SYNC:
        if (strcmp(val, "bsp") == 0 || strcmp(val, "asp") == 0) {
            cli->train.sync = val[0] == 'b' ? ST_SYNC_BSP : ST_SYNC_ASP;
            return ST_OK;
        }
        if (strncmp(val, "ssp:", 4) == 0) {
            errno = 0;
            long v = strtol(val + 4, &end, 10);
            if (end != val + 4 && !*end && errno == 0 && v >= 0 && v <= o->max) {
                cli->train.sync = ST_SYNC_SSP;
                cli->train.staleness = (int)v;
                return ST_OK;
            }
        }
        return bad_value(o, val, "bsp, asp or ssp:S with S a staleness from 0 to 1048576", err);
    case OPT_QUIET: cli->level = ST_LOG_QUIET; return ST_OK;
    case OPT_VERBOSE: cli->level = ST_LOG_DEBUG; return ST_OK;
    case OPT_HELP: cli->help = 1; return ST_OK;
    case OPT_VERSION: cli->version = 1; return ST_OK;
    }
    return st_fail(err, ST_EINTERNAL, "option --%s has no kind", o->name);
}

static const cli_option *find_long(const char *name, size_t len)
{
    for (size_t i = 0; i < N_OPTIONS; i++)
        if (strlen(options[i].name) == len && strncmp(options[i].name, name, len) == 0)
            return &options[i];
    return NULL;
}

static const cli_option *find_short(char c)
{
    for (size_t i = 0; i < N_OPTIONS; i++)
        if (options[i].short_name == c)
            return &options[i];
    return NULL;
}

st_status st_cli_parse(st_cli *cli, int argc, char **argv, st_error *err)
{
    memset(cli, 0, sizeof *cli);
    cli->train = st_train_defaults();
    cli->level = ST_LOG_INFO;
    int n_positional = 0, only_positional = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (only_positional || a[0] != '-' || a[1] == '\0') {
            if (n_positional++ == 0)
                cli->cfg_path = a;
            continue;
        }
        if (strcmp(a, "--") == 0) {
            only_positional = 1;
            continue;
        }
        const cli_option *o;
        const char *val = NULL;
        if (a[1] == '-') {
            const char *eq = strchr(a + 2, '=');
            size_t len = eq ? (size_t)(eq - a - 2) : strlen(a + 2);
            o = find_long(a + 2, len);
            if (!o)
                return st_fail(err, ST_EUSAGE, "unknown option '%.*s' (see singletrain --help)",
                               (int)(len + 2), a);
            if (eq && !o->arg)
                return st_fail(err, ST_EUSAGE, "option --%s takes no value", o->name);
            val = eq ? eq + 1 : NULL;
        } else {
            o = find_short(a[1]);
            if (!o)
                return st_fail(err, ST_EUSAGE, "unknown option '-%c' (see singletrain --help)",
                               a[1]);
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
        st_status st = set_value(cli, o, val, err);
        if (st != ST_OK)
            return st;
    }
    if (cli->help || cli->version)
        return ST_OK;
    if (n_positional != 1)
        return st_fail(err, ST_EUSAGE, "expected one network cfg file, got %d arguments (usage: "
                       "singletrain [options] NET.cfg; see --help)", n_positional);
    return ST_OK;
}
