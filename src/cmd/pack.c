/* singletrain pack SRC OUT: decode a source once into a striped store
 * (store.h). SRC is anything st_source_open accepts (a store, IDX images,
 * CIFAR-10 .bin batches, an image list) or a data file of key=value lines
 * (train=, test=, train_labels=, ..., e.g. a Darknet .data file) naming
 * one; the options come from one table that also drives --help. */
#include "commands.h"
#include "base/cores.h"

#include <ctype.h>
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
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

#define DEFAULT_CLASSES 256

typedef struct pack_cli {
    int stripes;
    size_t stripe_unit;
    const char *labels, *names, *split, *image_size;
    int classes, channels, io_threads, skip_bad, quiet, help;
    long limit;
} pack_cli;

#define OPT(field) offsetof(pack_cli, field)

static const st_option options[] = {
    {"labels", 0, "FILE", "Source", "IDX images: their labels file (required)", ST_OPT_STRING,
     OPT(labels), 0, 0},
    {"names", 0, "FILE", "Source", "image lists: class names, one per line (a path's label is "
     "the name in it)", ST_OPT_STRING, OPT(names), 0, 0},
    {"split", 0, "train|test", "Source", "data files: pack train= (default) or test= (valid=)",
     ST_OPT_STRING, OPT(split), 0, 0},
    {"classes", 0, "N", "Source", "labels are below N (default: a data file's classes=, the "
     "count of --names, or 256)",
     ST_OPT_INT, OPT(classes), 1, 1 << 24},
    {"limit", 0, "N", "Source", "pack the first N records only", ST_OPT_LONG, OPT(limit), 1,
     0x7fffffffL},
    {"image-size", 0, "W,H", "Image lists", "resize every image to W x H (required)",
     ST_OPT_STRING, OPT(image_size), 0, 0},
    {"channels", 0, "1|3", "Image lists", "decode to 1 (grey) or 3 (RGB) channels (default 3)",
     ST_OPT_INT, OPT(channels), 1, 3},
    {"skip-bad-images", 0, NULL, "Image lists", "skip unreadable images, counting them "
     "(default: stop)", ST_OPT_FLAG, OPT(skip_bad), 0, 0},
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

typedef enum src_kind { KIND_STORE, KIND_IDX, KIND_CIFAR, KIND_LIST } src_kind;

/* What st_source_open will take path for (its rules, data.c). */
static src_kind source_kind(const char *path)
{
    unsigned char head[8] = {0};
    char why[160] = "";
    int got = st_file_head(path, head, (int)sizeof head, why, sizeof why);
    if (got == 8 && memcmp(head, ST_STORE_MAGIC, 8) == 0)
        return KIND_STORE;
    if (got >= 4 && head[0] == 0 && head[1] == 0 && head[2] == 0x08)
        return KIND_IDX;
    size_t first = strcspn(path, ",");
    if (first >= 4 && memcmp(path + first - 4, ".bin", 4) == 0)
        return KIND_CIFAR;
    return KIND_LIST;
}

/* The number of non-blank lines of a names file. */
static st_status count_names(const char *path, int *n, st_error *err)
{
    FILE *f;
    st_status st = st_fopen_input(path, "r", "names file", &f, err);
    if (st != ST_OK)
        return st;
    char line[4096];
    int count = 0, at_start = 1;
    while (fgets(line, sizeof line, f)) {
        int blank = 1;
        for (char *p = line; *p; p++)
            if (!isspace((unsigned char)*p))
                blank = 0;
        if (at_start && !blank)
            count++;
        at_start = strchr(line, '\n') != NULL; /* a long line continues */
    }
    fclose(f);
    if (count == 0)
        return st_fail(err, ST_EINPUT, "%s: no class names in the names file", path);
    *n = count;
    return ST_OK;
}

/* --image-size W,H */
static st_status parse_size(const char *v, int *w, int *h, st_error *err)
{
    char *end;
    errno = 0;
    long a = strtol(v, &end, 10), b = 0;
    int ok = end != v && (*end == ',' || *end == 'x') && errno == 0;
    if (ok) {
        const char *p = end + 1;
        b = strtol(p, &end, 10);
        ok = end != p && !*end && errno == 0;
    }
    if (!ok || a < 1 || b < 1 || a > 65536 || b > 65536)
        return st_fail(err, ST_EUSAGE, "option --image-size: expected W,H with sizes from 1 to "
                       "65536, got '%s'", v);
    *w = (int)a;
    *h = (int)b;
    return ST_OK;
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
    st_source_spec spec = {.path = src_arg, .labels = cli->labels, .names = cli->names,
                           .limit = cli->limit, .verify = 1};
    long skipped = 0;
    int w = 0, h = 0;
    st_status st = ST_OK;
    int test = cli->split && strcmp(cli->split, "test") == 0;
    if (cli->split && !test && strcmp(cli->split, "train") != 0)
        return st_fail(err, ST_EUSAGE, "option --split: expected train or test, got '%s'",
                       cli->split);
    if (cli->channels && cli->channels != 1 && cli->channels != 3)
        return st_fail(err, ST_EUSAGE, "option --channels: expected 1 or 3, got '%d'",
                       cli->channels);
    if (cli->image_size && (st = parse_size(cli->image_size, &w, &h, err)) != ST_OK)
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
    src_kind kind = source_kind(spec.path);
    if (kind == KIND_IDX && !spec.labels)
        return data_file ? st_fail(err, ST_EINPUT, "%s: %s names IDX images but there is no "
                                   "%s_labels=", src_arg, spec.path, test ? "test" : "train")
                         : st_fail(err, ST_EUSAGE, "%s: IDX images need their labels: give "
                                   "--labels FILE", spec.path);
    if (kind == KIND_LIST && !cli->image_size)
        return st_fail(err, ST_EUSAGE, "%s is read as an image list: give --image-size W,H "
                       "(and --channels 1 or 3)", spec.path);
    if (kind != KIND_IDX && cli->labels)
        st_warn(log, "--labels applies to IDX images only: ignored for %s", spec.path);
    if (kind != KIND_LIST && (cli->image_size || cli->channels || cli->names || cli->skip_bad))
        st_warn(log, "--image-size, --channels, --names and --skip-bad-images apply to image "
                "lists only: ignored for %s", spec.path);
    spec.classes = cli->classes ? cli->classes : d.classes ? d.classes : DEFAULT_CLASSES;
    if (!cli->classes && !d.classes && kind == KIND_LIST && spec.names &&
        (st = count_names(spec.names, &spec.classes, err)) != ST_OK)
        return st;
    spec.images = (st_image_opts){.shape = {cli->channels ? cli->channels : 3, h, w},
                                  .skip_bad = cli->skip_bad, .skipped = &skipped};
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
