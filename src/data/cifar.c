/* CIFAR-10 binary reader: a comma-separated list of batch files
 * (data_batch_1.bin ... test_batch.bin), each a run of 3073-byte records of
 * one label byte and 3072 pixel bytes (3 x 32 x 32, planar R, G, B: already
 * the record layout). The records are read whole into one buffer and kept as
 * they are on disk; reads are copies out of read-only memory, so safe from
 * any thread. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "data/data.h"
#include "base/fileio.h"

enum { CIFAR_C = 3, CIFAR_H = 32, CIFAR_W = 32 };
#define CIFAR_PIXELS ((size_t)CIFAR_C * CIFAR_H * CIFAR_W) /* 3072 */
#define CIFAR_RECORD (1 + CIFAR_PIXELS)                    /* 3073 */

typedef struct cifar_source {
    st_source base;
    unsigned char *records; /* [count, 3073]: label byte, then the pixels */
} cifar_source;

static st_status cifar_read(const st_source *s, long index, unsigned char *pixels, int *label,
                            st_error *err)
{
    (void)err;
    const cifar_source *cs = (const cifar_source *)s;
    const unsigned char *r = cs->records + (size_t)index * CIFAR_RECORD;
    memcpy(pixels, r + 1, CIFAR_PIXELS);
    *label = r[0];
    return ST_OK;
}

static void cifar_close(st_source *s)
{
    cifar_source *cs = (cifar_source *)s;
    free(cs->records);
    free(cs);
}

static const st_source_ops cifar_ops = {cifar_read, cifar_close};

/* Append one batch file to s: check its size, then read its records (as many
 * as still fit under limit; 0: all) and check their labels. */
static st_status cifar_add(cifar_source *s, const char *path, long limit, int classes,
                           st_error *err)
{
    FILE *f;
    st_status st = st_fopen_input(path, "rb", "CIFAR batch", &f, err);
    if (st != ST_OK)
        return st;
    struct stat sb;
    long records = 0;
    if (fstat(fileno(f), &sb) != 0) {
        st = st_fail(err, ST_EINPUT, "%s: cannot stat: %s", path, strerror(errno));
    } else if (sb.st_size == 0) {
        st = st_fail(err, ST_EINPUT, "%s: empty: expected 3073-byte CIFAR-10 records", path);
    } else if ((size_t)sb.st_size % CIFAR_RECORD != 0) {
        st = st_fail(err, ST_EINPUT, "%s: truncated: %lld bytes is not a whole number of "
                     "%zu-byte records (1 label byte and 3 x 32 x 32 pixels)", path,
                     (long long)sb.st_size, CIFAR_RECORD);
    } else {
        records = (long)((size_t)sb.st_size / CIFAR_RECORD);
    }
    long take = records;
    if (st == ST_OK && limit > 0 && take > limit - s->base.count)
        take = limit - s->base.count;
    if (st == ST_OK && take > 0) {
        size_t have = (size_t)s->base.count * CIFAR_RECORD;
        size_t bytes = (size_t)take * CIFAR_RECORD;
        unsigned char *grown = realloc(s->records, have + bytes);
        if (!grown) {
            st = st_fail(err, ST_ENOMEM, "%s: out of memory holding its %ld records", path,
                         take);
        } else {
            s->records = grown;
            size_t got = fread(s->records + have, 1, bytes, f);
            if (got != bytes)
                st = st_fail(err, ST_EINPUT, "%s: read %zu of %zu bytes: %s", path, got, bytes,
                             ferror(f) ? strerror(errno) : "the file shrank while reading");
        }
        for (long i = 0; st == ST_OK && i < take; i++) {
            unsigned lab = s->records[have + (size_t)i * CIFAR_RECORD];
            if ((int)lab >= classes)
                st = st_fail(err, ST_EINPUT, "%s: record %ld has label %u: expected a label "
                             "below the network's %d classes", path, i, lab, classes);
        }
        if (st == ST_OK)
            s->base.count += take;
    }
    fclose(f);
    return st;
}

st_status st_cifar_open(st_source **out, const char *files, long limit, int classes,
                        st_error *err)
{
    cifar_source *s = st_calloc(1, sizeof *s, "CIFAR source", err);
    if (!s)
        return ST_ENOMEM;
    s->base.ops = &cifar_ops;
    s->base.shape = (st_shape){CIFAR_C, CIFAR_H, CIFAR_W};
    s->base.classes = classes;
    snprintf(s->base.name, sizeof s->base.name, "%s", files);

    st_status st = ST_OK;
    char *path = NULL;
    int n_files = 0;
    const char *p = files;
    while (st == ST_OK) {
        size_t len = strcspn(p, ",");
        const char *a = p, *b = p + len;
        while (a < b && (*a == ' ' || *a == '\t'))
            a++;
        while (b > a && (b[-1] == ' ' || b[-1] == '\t'))
            b--;
        if (a == b) {
            st = st_fail(err, ST_EINPUT, "%s: empty file name in the list: expected "
                         "comma-separated CIFAR-10 batch files", files);
            break;
        }
        free(path);
        path = malloc((size_t)(b - a) + 1);
        if (!path) {
            st = st_fail(err, ST_ENOMEM, "out of memory reading %s", files);
            break;
        }
        memcpy(path, a, (size_t)(b - a));
        path[b - a] = '\0';
        st = cifar_add(s, path, limit, classes, err);
        n_files++;
        if (p[len] != ',')
            break;
        p += len + 1;
    }
    free(path);
    if (st == ST_OK && s->base.count == 0)
        st = st_fail(err, ST_EINPUT, "%s: no records in %d file%s", files, n_files,
                     n_files == 1 ? "" : "s");
    if (st != ST_OK) {
        cifar_close(&s->base);
        return st;
    }
    *out = &s->base;
    return ST_OK;
}
