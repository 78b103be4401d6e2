/* The source options pack and read share and their rules; see
 * source_opts.h. */
#include "source_opts.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/fileio.h"

#define DEFAULT_CLASSES 256

/* The number of non-blank lines of a names file. */
static st_status count_names(const char *path, int *n, st_error *err)
{
    FILE *f;
    st_status st = st_fopen_input(path, "r", "class names", &f, err);
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

st_status st_source_cli_check(const st_source_cli *o, int *w, int *h, st_error *err)
{
    *w = *h = 0;
    if (o->channels && o->channels != 1 && o->channels != 3)
        return st_fail(err, ST_EUSAGE, "option --channels: expected 1 or 3, got '%d'",
                       o->channels);
    return o->image_size ? parse_size(o->image_size, w, h, err) : ST_OK;
}

st_status st_source_cli_spec(const st_source_cli *o, int w, int h, int data_classes,
                             long *skipped, st_source_spec *spec, const st_log *log,
                             st_error *err)
{
    spec->limit = o->limit;
    spec->classes = o->classes ? o->classes : data_classes ? data_classes : DEFAULT_CLASSES;
    spec->images = (st_image_opts){.shape = {o->channels ? o->channels : 3, h, w},
                                   .skip_bad = o->skip_bad, .skipped = skipped};
    char why[160] = "";
    st_source_kind kind = st_source_kind_of(spec->path, why, sizeof why);
    if (kind == ST_SOURCE_UNREADABLE || kind == ST_SOURCE_BAD_GZIP || kind == ST_SOURCE_UNKNOWN)
        return ST_OK; /* st_source_open refuses it, saying why */
    if (kind == ST_SOURCE_IDX && !spec->labels)
        return st_fail(err, ST_EUSAGE, "%s: IDX images need their labels: give --labels FILE",
                       spec->path);
    if (kind == ST_SOURCE_LIST && !o->image_size)
        return st_fail(err, ST_EUSAGE, "%s is read as an image list: give --image-size W,H "
                       "(and --channels 1 or 3)", spec->path);
    if (kind != ST_SOURCE_IDX && o->labels)
        st_warn(log, "--labels applies to IDX images only: ignored for %s", spec->path);
    if (kind != ST_SOURCE_LIST && (o->image_size || o->channels || o->names || o->skip_bad))
        st_warn(log, "--image-size, --channels, --names and --skip-bad-images apply to image "
                "lists only: ignored for %s", spec->path);
    if (!o->classes && !data_classes && kind == ST_SOURCE_LIST && spec->names)
        return count_names(spec->names, &spec->classes, err);
    return ST_OK;
}
