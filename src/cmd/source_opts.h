/* The source options of pack and read: one table (ST_SOURCE_OPTIONS) and
 * one set of rules (st_source_cli_check, st_source_cli_spec), those
 * singletrain.1 gives pack, which read takes "as for pack": IDX images need
 * --labels and an image list --image-size; --channels is 1 or 3; the class
 * count is --classes, else a data file's classes=, else the count of an
 * image list's --names, else 256; an option that does not apply to the
 * source is a warning. */
#ifndef ST_SOURCE_OPTS_H
#define ST_SOURCE_OPTS_H

#include <stddef.h>

#include "base/log.h"
#include "base/status.h"
#include "data/data.h"
#include "options.h"

/* The options as given; 0 / NULL: not given. */
typedef struct st_source_cli {
    const char *labels, *names, *image_size;
    int classes, channels, skip_bad;
    long limit;
} st_source_cli;

/* The rows of the shared options in the table of a command whose options
 * struct type holds an st_source_cli named field: groups "Source" and
 * "Image lists". */
#define ST_SOURCE_OPTIONS(type, field)                                                           \
    {"labels", 0, "FILE", "Source", "IDX images: their labels file (required)", ST_OPT_STRING,  \
     offsetof(type, field.labels), 0, 0},                                                        \
    {"names", 0, "FILE", "Source", "image lists: class names, one per line (a path's label is " \
     "the name in it)", ST_OPT_STRING, offsetof(type, field.names), 0, 0},                      \
    {"classes", 0, "N", "Source", "labels are below N (default: a data file's classes= when "   \
     "SRC is one, the count of --names, or 256)", ST_OPT_INT, offsetof(type, field.classes), 1, \
     1 << 24},                                                                                   \
    {"limit", 0, "N", "Source", "the first N records only", ST_OPT_LONG,                         \
     offsetof(type, field.limit), 1, 0x7fffffffL},                                               \
    {"image-size", 0, "W,H", "Image lists", "resize every image to W x H (required)",            \
     ST_OPT_STRING, offsetof(type, field.image_size), 0, 0},                                     \
    {"channels", 0, "1|3", "Image lists", "decode to 1 (grey) or 3 (RGB) channels (default 3)", \
     ST_OPT_INT, offsetof(type, field.channels), 1, 3},                                          \
    {"skip-bad-images", 0, NULL, "Image lists", "skip unreadable images, counting them "         \
     "(default: stop)", ST_OPT_FLAG, offsetof(type, field.skip_bad), 0, 0}

/* The values alone, before any file is looked at: --channels is 1 or 3,
 * and --image-size W,H goes to *w, *h (0 without it). */
st_status st_source_cli_check(const st_source_cli *o, int *w, int *h, st_error *err);

/* The rest of spec, for the source at spec->path whose labels and names
 * files (o's, or a data file's) the caller has set in spec: IDX images
 * without labels and an image list without --image-size are refused, and
 * options that do not apply to the source are warned about on log; the
 * class count is o's, else data_classes (a data file's classes=, 0 for
 * none), else the count of an image list's names, else 256; the limit and
 * the image options (w x h from st_source_cli_check) are o's, unreadable
 * images counted in *skipped. A source st_source_open refuses (not a
 * readable regular file, a gzip file that does not decompress, binary data
 * of no known kind) is left to it: it says what is wrong. */
st_status st_source_cli_spec(const st_source_cli *o, int w, int h, int data_classes,
                             long *skipped, st_source_spec *spec, const st_log *log,
                             st_error *err);

#endif
