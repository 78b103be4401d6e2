/* Batches from a source through the transform, opening a source by its
 * content, and the seeded epoch order. */
#include "data/data.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "base/fileio.h"
#include "base/rng.h"
#include "data/store.h"

void st_source_close(st_source *s)
{
    if (s)
        s->ops->close(s);
}

st_status st_source_batch(const st_source *s, const st_transform *t, const long *indices,
                          int n, float *x, int *labels, int training, long sample0,
                          unsigned char *pixels, st_error *err)
{
    size_t per = st_shape_count(t->input);
    for (int i = 0; i < n; i++) {
        st_status st = s->ops->read(s, indices[i], pixels, &labels[i], err);
        if (st != ST_OK)
            return st;
        st_transform_apply(t, s->shape, pixels, x + (size_t)i * per, training, sample0 + i);
    }
    return ST_OK;
}

size_t st_records_buf_bytes(int cap, size_t input_values, size_t record_bytes)
{
    return (size_t)cap * (input_values * sizeof(float) + sizeof(int) + sizeof(long)) +
           record_bytes;
}

st_status st_records_buf_init(st_records_buf *b, int cap, size_t input_values,
                              size_t record_bytes, st_error *err)
{
    memset(b, 0, sizeof *b);
    b->cap = cap;
    b->x = st_calloc((size_t)cap * input_values, sizeof(float), "a chunk's inputs", err);
    b->labels = st_calloc((size_t)cap, sizeof(int), "a chunk's labels", err);
    b->indices = st_calloc((size_t)cap, sizeof(long), "a chunk's record indices", err);
    b->pixels = st_calloc(record_bytes, 1, "a record", err);
    return b->x && b->labels && b->indices && b->pixels ? ST_OK : ST_ENOMEM;
}

void st_records_buf_free(st_records_buf *b)
{
    free(b->x);
    free(b->labels);
    free(b->indices);
    free(b->pixels);
    memset(b, 0, sizeof *b);
}

st_status st_records_read_range(const st_source *s, const st_transform *t, st_records_buf *b,
                                long first, int n, st_error *err)
{
    for (int i = 0; i < n; i++)
        b->indices[i] = first + i;
    return st_source_batch(s, t, b->indices, n, b->x, b->labels, 0, first, b->pixels, err);
}

int st_file_head(const char *path, unsigned char *buf, int len, char *why, size_t why_len)
{
    char unreadable[160];
    int fd = st_open_regular(path, unreadable, sizeof unreadable);
    gzFile f = fd >= 0 ? gzdopen(fd, "rb") : NULL;
    if (!f) {
        if (fd >= 0)
            close(fd);
        return 0; /* the reader's opener says why */
    }
    int got = gzread(f, buf, (unsigned)len), zerr = Z_OK;
    const char *msg = st_zlib_message(gzerror(f, &zerr));
    if (got <= 0 && zerr != Z_OK && zerr != Z_ERRNO)
        snprintf(why, why_len, "%s", msg);
    gzclose(f);
    if (got <= 0) /* -1: a decompression error; 0: empty, or unreadable (the opener says) */
        return why[0] ? -1 : 0;
    return got;
}

static int ends_with(const char *s, size_t len, const char *suffix)
{
    size_t n = strlen(suffix);
    return len >= n && memcmp(s + len - n, suffix, n) == 0;
}

st_source_kind st_source_kind_of(const char *path, char *why, size_t why_len)
{
    size_t first = strcspn(path, ",");
    if (ends_with(path, first, ".bin"))
        return ST_SOURCE_CIFAR;
    st_regular_why(path, why, why_len);
    if (why[0])
        return ST_SOURCE_UNREADABLE;
    unsigned char head[512] = {0}; /* enough to tell text from binary */
    int got = st_file_head(path, head, (int)sizeof head, why, why_len);
    if (got < 0)
        return ST_SOURCE_BAD_GZIP;
    if (got >= 8 && memcmp(head, ST_STORE_MAGIC, 8) == 0)
        return ST_SOURCE_STORE;
    if (got >= 4 && head[0] == 0 && head[1] == 0 && head[2] == 0x08 &&
        (head[3] == 1 || head[3] == 3))
        return ST_SOURCE_IDX;
    if (got > 0 && memchr(head, '\0', (size_t)got))
        return ST_SOURCE_UNKNOWN;
    return ST_SOURCE_LIST;
}

st_status st_source_open(st_source **out, const st_source_spec *sp, st_error *err)
{
    char why[160] = "";
    switch (st_source_kind_of(sp->path, why, sizeof why)) {
    case ST_SOURCE_CIFAR:
        return st_cifar_open(out, sp->path, sp->limit, sp->classes, err);
    case ST_SOURCE_STORE:
        return st_store_open(out, sp->path, sp->limit, sp->classes, sp->verify,
                             sp->images.outputs, err);
    case ST_SOURCE_IDX:
        if (!sp->labels || !sp->labels[0])
            return st_fail(err, ST_EINPUT, "%s: IDX images need their labels file "
                           "(train_labels= or test_labels=)", sp->path);
        return st_idx_open(out, sp->path, sp->labels, sp->limit, sp->classes, err);
    case ST_SOURCE_LIST:
        return st_images_open(out, sp->path, sp->names, sp->limit, sp->classes, &sp->images,
                              err);
    case ST_SOURCE_UNREADABLE:
        return st_fail(err, ST_EINPUT, "%s: cannot open data: %s", sp->path, why);
    case ST_SOURCE_BAD_GZIP:
        return st_fail(err, ST_EINPUT, "%s: a gzip file that does not decompress: %s (corrupt "
                       "or truncated)", sp->path, why);
    case ST_SOURCE_UNKNOWN:
        break;
    }
    return st_fail(err, ST_EINPUT, "%s: not a data file singletrain knows: expected a packed "
                   "store, IDX images (magic 0x00000803), CIFAR-10 batches (.bin) or an image "
                   "list (text)", sp->path);
}

st_status st_order_init(st_order *o, long n, uint64_t seed, st_error *err)
{
    o->n = n;
    o->seed = seed;
    o->perm = st_calloc((size_t)n, sizeof *o->perm, "epoch order", err);
    return o->perm ? ST_OK : ST_ENOMEM;
}

void st_order_shuffle(st_order *o, long epoch)
{
    st_rng rng;
    st_rng_seed(&rng, o->seed, 0x2000u + (uint64_t)epoch);
    for (long i = 0; i < o->n; i++)
        o->perm[i] = i;
    for (long i = o->n - 1; i > 0; i--) {
        long j = (long)st_rng_below(&rng, (uint64_t)i + 1);
        long t = o->perm[i];
        o->perm[i] = o->perm[j];
        o->perm[j] = t;
    }
}

void st_order_free(st_order *o)
{
    free(o->perm);
    memset(o, 0, sizeof *o);
}
