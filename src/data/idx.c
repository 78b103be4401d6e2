/* IDX reader (the MNIST / Fashion-MNIST format): big-endian header of magic
 * 0x0000 08 <dims> and one 32-bit size per dimension, then unsigned bytes.
 * Files are read whole through zlib, which also reads plain files, and kept
 * in memory (reads are copies: safe from any thread). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "data/data.h"
#include "base/fileio.h"

/* zlib's messages are for the readers of compressed files, this one and
 * data.c's sniffing of a file's head (which calls here, never back). */
const char *st_zlib_message(const char *msg)
{
    const char *end = strncmp(msg, "<fd:", 4) == 0 ? strstr(msg, ">: ") : NULL;
    return end ? end + 3 : msg;
}

typedef struct idx_source {
    st_source base;
    unsigned char *pixels; /* [count, H, W] */
    unsigned char *labels; /* [count] */
} idx_source;

/* Read a whole (possibly gzip-compressed) file. */
static st_status read_all(const char *path, unsigned char **data, size_t *len, st_error *err)
{
    char why[160];
    int fd = st_open_regular(path, why, sizeof why);
    if (fd < 0)
        return st_fail(err, ST_EINPUT, "%s: cannot open IDX file: %s", path, why);
    gzFile f = gzdopen(fd, "rb");
    if (!f) {
        close(fd);
        return st_fail(err, ST_ENOMEM, "%s: zlib could not open it", path);
    }
    size_t cap = 1 << 20, n = 0;
    unsigned char *buf = malloc(cap);
    st_status st = ST_OK;
    while (buf) {
        if (n == cap) {
            unsigned char *b = cap > ((size_t)1 << 34) ? NULL : realloc(buf, cap * 2);
            if (!b) {
                st = st_fail(err, ST_ENOMEM, "%s: out of memory reading it (%zu bytes so far)",
                             path, n);
                break;
            }
            buf = b;
            cap *= 2;
        }
        unsigned chunk = cap - n > (1u << 30) ? (1u << 30) : (unsigned)(cap - n);
        int got = gzread(f, buf + n, chunk);
        if (got < 0) {
            int zerr;
            st = st_fail(err, ST_EINPUT, "%s: corrupt or truncated: %s", path,
                         st_zlib_message(gzerror(f, &zerr)));
            break;
        }
        if (got == 0)
            break;
        n += (size_t)got;
    }
    if (!buf && st == ST_OK)
        st = st_fail(err, ST_ENOMEM, "%s: out of memory reading it", path);
    /* Z_BUF_ERROR: the data ended inside the gzip stream (its end is cut off) */
    if (gzclose(f) == Z_BUF_ERROR && st == ST_OK)
        st = st_fail(err, ST_EINPUT, "%s: truncated: the gzip stream is cut short (after %zu "
                     "bytes of data)", path, n);
    if (st != ST_OK) {
        free(buf);
        return st;
    }
    *data = buf;
    *len = n;
    return ST_OK;
}

static uint32_t be32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* Check the header of an IDX file of `dims` dimensions; dim[] gets sizes. */
static st_status idx_header(const char *path, const unsigned char *d, size_t len, int dims,
                            uint32_t *dim, st_error *err)
{
    size_t head = 4 + 4 * (size_t)dims;
    if (len < 4 || d[0] != 0 || d[1] != 0 || d[2] != 0x08 || d[3] != dims)
        return st_fail(err, ST_EINPUT, "%s: not an IDX file of unsigned bytes with %d "
                       "dimension%s (expected magic 0x000008%02x)", path, dims,
                       dims > 1 ? "s" : "", dims);
    if (len < head)
        return st_fail(err, ST_EINPUT, "%s: truncated in the header (%zu bytes)", path, len);
    uint64_t total = 1, max_total = (uint64_t)1 << 40;
    for (int i = 0; i < dims; i++) {
        dim[i] = be32(d + 4 + 4 * i);
        if (dim[i] == 0)
            return st_fail(err, ST_EINPUT, "%s: dimension %d is %u: expected a non-empty "
                           "size", path, i, dim[i]);
        /* checked before multiplying: three 32-bit sizes can wrap 64 bits */
        if (total > max_total / dim[i])
            return st_fail(err, ST_EINPUT, "%s: dimension %d is %u: the sizes promise more "
                           "than 2^40 bytes of data", path, i, dim[i]);
        total *= dim[i];
    }
    if (len - head < total)
        return st_fail(err, ST_EINPUT, "%s: truncated: the header promises %llu bytes of data, "
                       "the file has %zu", path, (unsigned long long)total, len - head);
    if (len - head > total)
        return st_fail(err, ST_EINPUT, "%s: %zu bytes after the %llu the header promises",
                       path, len - head - (size_t)total, (unsigned long long)total);
    return ST_OK;
}

static st_status idx_read(const st_source *s, long index, unsigned char *pixels, int *label,
                          st_error *err)
{
    (void)err;
    const idx_source *is = (const idx_source *)s;
    size_t per = st_record_bytes(s);
    memcpy(pixels, is->pixels + (size_t)index * per, per);
    *label = is->labels[index];
    return ST_OK;
}

static void idx_close(st_source *s)
{
    idx_source *is = (idx_source *)s;
    free(is->pixels);
    free(is->labels);
    free(is);
}

static const st_source_ops idx_ops = {idx_read, idx_close};

st_status st_idx_open(st_source **out, const char *images, const char *labels, long limit,
                      int classes, st_error *err)
{
    unsigned char *img = NULL, *lab = NULL;
    size_t img_len = 0, lab_len = 0;
    uint32_t idim[3] = {0}, ldim[1] = {0};
    idx_source *s = NULL;
    st_status st = read_all(images, &img, &img_len, err);
    if (st == ST_OK)
        st = read_all(labels, &lab, &lab_len, err);
    if (st == ST_OK)
        st = idx_header(images, img, img_len, 3, idim, err);
    if (st == ST_OK)
        st = idx_header(labels, lab, lab_len, 1, ldim, err);
    if (st == ST_OK && idim[0] != ldim[0])
        st = st_fail(err, ST_EINPUT, "%s has %u images but %s has %u labels", images, idim[0],
                     labels, ldim[0]);
    if (st == ST_OK && (idim[1] > 65536 || idim[2] > 65536))
        st = st_fail(err, ST_EINPUT, "%s: images of %u x %u are too large", images, idim[2],
                     idim[1]);
    long count = st == ST_OK ? (long)idim[0] : 0;
    if (limit > 0 && limit < count)
        count = limit;
    for (long i = 0; st == ST_OK && i < count; i++)
        if (lab[8 + i] >= classes)
            st = st_fail(err, ST_EINPUT, "%s: label %u of record %ld is not below the network's "
                         "%d classes", labels, lab[8 + i], i, classes);
    if (st == ST_OK) {
        s = st_calloc(1, sizeof *s, "IDX source", err);
        if (!s)
            st = ST_ENOMEM;
    }
    if (st == ST_OK) {
        size_t per = (size_t)idim[1] * idim[2];
        s->pixels = malloc((size_t)count * per);
        s->labels = malloc((size_t)count);
        if (!s->pixels || !s->labels) {
            st = st_fail(err, ST_ENOMEM, "out of memory holding %s", images);
        } else {
            memcpy(s->pixels, img + 16, (size_t)count * per);
            memcpy(s->labels, lab + 8, (size_t)count);
            s->base.ops = &idx_ops;
            s->base.count = count;
            s->base.shape = (st_shape){1, (int)idim[1], (int)idim[2]};
            s->base.classes = classes;
            snprintf(s->base.name, sizeof s->base.name, "%s", images);
        }
    }
    free(img);
    free(lab);
    if (st != ST_OK) {
        if (s)
            idx_close(&s->base);
        return st;
    }
    *out = &s->base;
    return ST_OK;
}
