/* singletrain pack SRC OUT: decode a source once into a striped store
 * (store.h). SRC is anything st_source_open accepts (a store, IDX images,
 * CIFAR-10 .bin batches, an image list) or a data file of key=value lines
 * (train=, test=, train_labels=, ..., e.g. a Darknet .data file) naming
 * one; the options come from one table that also drives --help, its
 * source options and their rules shared with read (source_opts.h). */
#include "commands.h"
#include "base/cores.h"

#include <ctype.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "data/data.h"
#include "base/fileio.h"
#include "net/hparams.h"
#include "base/log.h"
#include "options.h"
#include "base/signals.h"
#include "base/status.h"
#include "data/store.h"
#include "source_opts.h"

typedef struct pack_cli {
    st_source_cli src;
    int stripes;
    size_t stripe_unit;
    const char *split;
    int io_threads, quiet, help;
} pack_cli;

#define OPT(field) offsetof(pack_cli, field)

static const st_option options[] = {
    ST_SOURCE_OPTIONS(pack_cli, src),
    {"split", 0, "train|test", "Source", "data files: pack train= (default) or test= (valid=)",
     ST_OPT_STRING, OPT(split), 0, 0},
    {"stripes", 0, "N", "Layout", "stripe files (default: 32, or the block count when smaller)",
     ST_OPT_INT, OPT(stripes), 1, 1024},
    {"stripe-unit", 0, "BYTES", "Layout", "bytes per block, K/M/G allowed (default: 256M or "
     "less, below)", ST_OPT_SIZE, OPT(stripe_unit), 1, 1L << 40},
    {"io-threads", 0, "N", "Other", "threads reading and decoding SRC (default: one per CPU)",
     ST_OPT_INT, OPT(io_threads), 1, 256},
    {"quiet", 'q', NULL, "Other", "only warnings and errors", ST_OPT_FLAG, OPT(quiet), 0, 0},
    {"help", 'h', NULL, "Other", "this help", ST_OPT_FLAG, OPT(help), 0, 0},
};

#define N_OPTIONS ((int)(sizeof options / sizeof options[0]))

static const char *const groups[] = {"Source", "Image lists", "Layout", "Other", NULL};

static void pack_help(FILE *out)
{
    st_options_help(out,
                    "usage: singletrain pack SRC OUT [options]\n"
                    "\nDecodes SRC once into a striped store: the index OUT and the stripe files\n"
                    "OUT.<generation>.<k>; train on it with train=OUT in a data file or [net].\n"
                    "SRC is a packed store, IDX images (with --labels), CIFAR-10 .bin batches\n"
                    "(comma-separated), an image list (with --image-size; labels from --names\n"
                    "or a label after each path), or a data file of key=value lines such as\n"
                    "Darknet's .data (train=, test=, train_labels=, names=, classes=).\n",
                    options, N_OPTIONS, groups);
    fprintf(out,
            "\nLayout: a record is a 4-byte label and C x H x W pixel bytes; a block holds as\n"
            "many whole records as fit in the stripe unit; block b is stored in stripe\n"
            "b mod N. By default a block holds min(256 MB / record, records / N') records\n"
            "(at least one), N' being --stripes or 32, and N is --stripes or min(32, blocks),\n"
            "so that every stripe of a small dataset gets a block. The store records 1 + the\n"
            "largest label as its class count. OUT is replaced only once the new stripes\n"
            "are written and verified; a failed pack leaves it as it was. A second\n"
            "pack into the same OUT is refused while one runs (it holds OUT.lock).\n"
            "\nExit status: 0 success, 2 bad usage or input, 1 run-time failure, 128 + the\n"
            "signal when SIGINT or SIGTERM stopped it (its new stripes removed).\n");
}

/* Whether the first non-blank, non-comment line of path is key=value with
 * one of the data-file keys (st_data_paths_load's). */
static int is_data_file(const char *path)
{
    static const char *const keys[] = {"train", "train_labels", "test", "valid", "test_labels",
                                       "names", "labels", "classes", "backup", "top", "eval",
                                       NULL};
    char why[160];
    int fd = st_open_regular(path, why, sizeof why);
    FILE *f = fd >= 0 ? fdopen(fd, "rb") : NULL;
    if (!f) {
        if (fd >= 0)
            close(fd);
        return 0;
    }
    char line[4096];
    int found = 0;
    for (int n = 0; n < 1000 && fgets(line, sizeof line, f); n++) {
        char *b = line;
        while (isspace((unsigned char)*b))
            b++;
        if (!*b || *b == '#' || *b == ';')
            continue;
        char *eq = strchr(b, '=');
        if (eq) {
            char *e = eq;
            while (e > b && isspace((unsigned char)e[-1]))
                e--;
            for (int k = 0; keys[k]; k++)
                if ((size_t)(e - b) == strlen(keys[k]) && strncmp(b, keys[k], (size_t)(e - b)) == 0)
                    found = 1;
        }
        break;
    }
    fclose(f);
    return found;
}

/* OUT may be replaced only if it is absent or a store (not, by a typo, a
 * labels file), and its directory must take new files. */
static st_status check_out(const char *out, st_error *err)
{
    struct stat sb;
    if (stat(out, &sb) != 0)
        return st_check_output_path("OUT", out, err);
    if (S_ISDIR(sb.st_mode))
        return st_fail(err, ST_EUSAGE, "%s is a directory: OUT names the store's index file",
                       out);
    char head[8] = {0}, why[160];
    int fd = st_open_regular(out, why, sizeof why);
    if (!S_ISREG(sb.st_mode)) /* fd is -1 */
        return st_fail(err, ST_EUSAGE, "%s exists and is not a singletrain store (%s): refusing "
                       "to replace it", out, why);
    ssize_t got = fd >= 0 ? read(fd, head, sizeof head) : 0;
    if (fd >= 0)
        close(fd);
    if (got != 8 || memcmp(head, ST_STORE_MAGIC, 8) != 0)
        return st_fail(err, ST_EUSAGE, "%s exists and is not a singletrain store: refusing to "
                       "replace it", out);
    return st_check_output_path("OUT", out, err);
}

/* The file OUT names (fileio.h's outputs: a link's target, else OUT) into
 * target [size]. */
static st_status link_target(const char *out, char *target, size_t size, st_error *err)
{
    st_output_target t;
    st_status st = st_output_target_find("OUT", out, &t, err);
    if (st != ST_OK)
        return st;
    if (strlen(t.path) >= size)
        st = st_fail(err, ST_EUSAGE, "OUT %s: its target %s is too long a path", out, t.path);
    else
        snprintf(target, size, "%s", t.path);
    st_output_target_free(&t);
    return st;
}

static st_status pack(const pack_cli *cli, const char *src_arg, const char *out,
                      const st_log *log, st_error *err)
{
    st_data_paths d;
    memset(&d, 0, sizeof d);
    st_source_spec spec = {.path = src_arg, .labels = cli->src.labels, .names = cli->src.names,
                           .verify = 1};
    long skipped = 0;
    int w, h;
    st_status st;
    int test = cli->split && strcmp(cli->split, "test") == 0;
    if (cli->split && !test && strcmp(cli->split, "train") != 0)
        return st_fail(err, ST_EUSAGE, "option --split: expected train or test, got '%s'",
                       cli->split);
    if ((st = st_source_cli_check(&cli->src, &w, &h, err)) != ST_OK)
        return st;
    char why[160] = "";
    if (strchr(src_arg, ',') == NULL)
        st_regular_why(src_arg, why, sizeof why);
    if (why[0])
        return st_fail(err, ST_EINPUT, "%s: cannot open SRC: %s", src_arg, why);
    if ((st = check_out(out, err)) != ST_OK)
        return st;
    /* OUT a symbolic link to a store: the store it names is replaced, its
     * stripes beside it (a store's stripes are found beside its index),
     * and the link stays */
    char target[ST_PATH_MAX];
    if ((st = link_target(out, target, sizeof target, err)) != ST_OK)
        return st;
    if (strcmp(target, out) != 0)
        st_info(log, "pack: OUT %s is a symbolic link: packing into the store it names, %s",
                out, target);
    out = target;
    int data_file = strchr(src_arg, ',') == NULL && is_data_file(src_arg);
    if (data_file) {
        if ((st = st_data_paths_load(src_arg, &d, log, err)) != ST_OK)
            return st;
        spec.path = test ? d.test : d.train;
        if (!spec.path[0])
            return st_fail(err, ST_EINPUT, "%s: no %s= in this data file (--split %s)", src_arg,
                           test ? "test= or valid" : "train", test ? "test" : "train");
        if (!spec.labels && (test ? d.test_labels : d.train_labels)[0])
            spec.labels = test ? d.test_labels : d.train_labels;
        if (!spec.names && d.names[0])
            spec.names = d.names;
        if (strchr(spec.path, ',') == NULL)
            st_regular_why(spec.path, why, sizeof why);
        if (why[0])
            return st_fail(err, ST_EINPUT, "%s: %s= %s: cannot open: %s", src_arg,
                           test ? "test" : "train", spec.path, why);
    } else if (cli->split) {
        st_warn(log, "--split applies to data files only: ignored for %s", src_arg);
    }
    if (data_file && !spec.labels &&
        st_source_kind_of(spec.path, why, sizeof why) == ST_SOURCE_IDX)
        return st_fail(err, ST_EINPUT, "%s: %s names IDX images but there is no %s_labels=",
                       src_arg, spec.path, test ? "test" : "train");
    if ((st = st_source_cli_spec(&cli->src, w, h, d.classes, &skipped, &spec, log, err)) !=
        ST_OK)
        return st;
    st_source *src = NULL;
    if ((st = st_source_open(&src, &spec, err)) != ST_OK)
        return st;
    st_info(log, "pack: %ld records of %d x %d x %d from %s into %s", src->count, src->shape.c,
            src->shape.h, src->shape.w, src->name, out);
    st_pack_opts po = {cli->stripes, cli->stripe_unit,
                       cli->io_threads ? cli->io_threads : st_usable_cores(), log,
                       st_signals_stop_flag()};
    st_signals_set_graceful(1); /* a signal now stops the writer, which removes its stripes */
    st = st_store_pack(src, out, &po, NULL, err);
    st_signals_set_graceful(0);
    if (skipped)
        st_warn(log, "%ld unreadable images of %s were skipped (the next readable image stands "
                "in for each)", skipped, src->name);
    st_source_close(src);
    return st;
}

int st_cmd_pack(int argc, char **argv)
{
    pack_cli cli;
    memset(&cli, 0, sizeof cli);
    st_error err = {0};
    const char *pos[2] = {NULL, NULL};
    int n_pos = 0;
    st_status st = st_options_parse(options, N_OPTIONS, &cli, argc, argv, pos, 2, &n_pos, &err);
    if (st == ST_OK && cli.help) {
        pack_help(stdout);
        return 0;
    }
    st_log log = st_log_default(cli.quiet ? ST_LOG_QUIET : ST_LOG_INFO);
    if (st == ST_OK && n_pos != 2)
        st = st_fail(&err, ST_EUSAGE, "expected SRC and OUT, got %d argument%s (usage: "
                     "singletrain pack SRC OUT [options]; see --help)", n_pos,
                     n_pos == 1 ? "" : "s");
    if (st == ST_OK)
        st = pack(&cli, pos[0], pos[1], &log, &err);
    int code = st_cmd_exit_code("pack", st, &err);
    if (st == ST_OK && st_signals_caught())
        st_warn(&log, "%s after the store was complete: %s is whole",
                strsignal(st_signals_caught()), pos[1]);
    if (st_signals_caught())
        return 128 + st_signals_caught();
    return code;
}
