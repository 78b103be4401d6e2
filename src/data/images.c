/* Image-list reader: a text file naming one image per line, decoded on
 * demand with stb_image (JPEG, PNG, BMP, ...), resized with
 * stb_image_resize to the requested shape and laid out planar (CHW).
 *
 * Labels come from a names file (Darknet's labels=: the one class name that
 * occurs in the path) or from the line itself ("path label"). Every listed
 * file is checked for readability at open. The paths are kept in one
 * NUL-separated blob with an offset per entry. Reads only decode; the one
 * thing they write is the per-entry "bad" flag under skip_bad (atomic), so
 * they are safe from several threads. */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <stb/stb_image.h>
#include <stb/stb_image_resize.h>

#include "data/data.h"
#include "base/fileio.h"

#define MAX_SIDE 65536 /* of the decode shape */
#define MAX_IMAGE_PIXELS (1L << 25) /* of an image file: 32 megapixels */
#define IMAGE_HEAD_BYTES 4096 /* read to find an image's length */
#define HEADS_READ_MAX 20000 /* lists this long have every header read at open */

typedef struct images_source {
    st_source base;
    char *paths;          /* NUL-terminated paths, back to back */
    size_t *offset;       /* [count] into paths */
    int *labels;          /* [count] */
    int *lines;           /* [count] the list's line of each entry, for messages */
    unsigned char *bad;   /* [count] (skip_bad) set once an entry fails to decode */
    int skip_bad;
    long *skipped;        /* shared counter, may be NULL */
    const st_output_ids *outputs; /* at open only: the caller's outputs, or NULL */
    pthread_rwlock_t decode_lock; /* decodes hold it shared; a failed one retries
                                     holding it alone (see decode_file) */
    int lock_made;
} images_source;

/* ---- reading ---- */

static void count_skipped(const images_source *s)
{
    if (s->skipped)
        __atomic_fetch_add(s->skipped, 1, __ATOMIC_RELAXED);
}

/* Little-endian fields of an image header. */
static unsigned le16(const unsigned char *b) { return b[0] | (unsigned)b[1] << 8; }
static unsigned long le32(const unsigned char *b)
{
    return le16(b) | (unsigned long)le16(b + 2) << 16;
}

/* PNM header integer at *pos (after whitespace and # comments), or -1. */
static long pnm_int(const unsigned char *b, size_t n, size_t *pos)
{
    size_t i = *pos;
    while (i < n && (b[i] == '#' || strchr(" \t\r\n\v\f", b[i]))) {
        if (b[i] == '#')
            while (i < n && b[i] != '\n')
                i++;
        else
            i++;
    }
    long v = 0;
    size_t start = i;
    while (i < n && b[i] >= '0' && b[i] <= '9' && v < 1000000000)
        v = v * 10 + (b[i++] - '0');
    *pos = i;
    return i > start && i < n ? v : -1;
}

/* The fewest bytes a well-formed file of an uncompressed format needs, from
 * its header B (the first N bytes, the whole file when fewer than
 * IMAGE_HEAD_BYTES): binary PGM / PPM, BMP and
 * uncompressed TGA; -1 when the file ends inside such a header; 0 for other
 * formats and headers it cannot tell.
 * stb_image decodes such a file cut short as if its missing pixels were
 * zeros, so an interrupted copy would train silently. The last BMP row's
 * padding may be missing (some writers leave it out). */
static long long uncompressed_bytes(const unsigned char *b, size_t n, const char **format)
{
    long long cut = n < IMAGE_HEAD_BYTES ? -1 : 0; /* the file ends inside the header */
    if (n >= 2 && b[0] == 'P' && (b[1] == '5' || b[1] == '6')) {
        size_t pos = 2;
        long w = pnm_int(b, n, &pos), h = pnm_int(b, n, &pos), max = pnm_int(b, n, &pos);
        *format = b[1] == '5' ? "PGM" : "PPM";
        if (w < 0 || h < 0 || max <= 0) /* cut inside the header? */
            return pos >= n ? cut : 0;
        return (long long)pos + 1 + (long long)w * h * (b[1] == '5' ? 1 : 3) * (max > 255 ? 2 : 1);
    }
    if (n >= 2 && b[0] == 'B' && b[1] == 'M') {
        *format = "BMP";
        unsigned long header = n >= 18 ? le32(b + 14) : 0;
        if (n < 18 || n < 14 + (header == 12 ? 12 : 20))
            return cut;
        long long w, h, bits, compression = 0;
        if (header == 12) {
            w = le16(b + 18), h = le16(b + 20), bits = le16(b + 24);
        } else if (header >= 40) {
            w = (int32_t)le32(b + 18), h = (int32_t)le32(b + 22), bits = le16(b + 28);
            compression = le32(b + 30);
        } else {
            return 0;
        }
        if (h < 0)
            h = -h;
        if (w <= 0 || h <= 0 || w > MAX_SIDE * 16 || h > MAX_SIDE * 16 || bits <= 0 ||
            bits > 64 || (compression != 0 && compression != 3 && compression != 6))
            return 0;
        long long row = (w * bits + 7) / 8, stride = (w * bits + 31) / 32 * 4;
        return (long long)le32(b + 10) + stride * (h - 1) + row;
    }
    /* TGA has no magic: taken as one only when no other format stb_image
     * knows matches the start. */
    static const char *const magics[] = {"\xff\xd8", "\x89PNG", "GIF8", "BM", "8BPS",
                                         "\x53\x80\xf6\x34", "P", "#?"};
    for (size_t m = 0; m < sizeof magics / sizeof magics[0]; m++)
        if (n >= strlen(magics[m]) && memcmp(b, magics[m], strlen(magics[m])) == 0)
            return 0;
    *format = "TGA";
    if (n < 18)
        return cut;
    if (b[1] > 1 || b[2] < 1 || b[2] > 3)
        return 0;
    long long palette = b[1] ? (long long)le16(b + 5) * ((b[7] + 7) / 8) : 0;
    long long w = le16(b + 12), h = le16(b + 14), bits = b[16];
    if (w == 0 || h == 0 || bits == 0)
        return 0;
    return 18 + b[0] + palette + w * h * ((bits + 7) / 8);
}

/* Past a GIF's chain of data sub-blocks starting at *pos (each a length
 * byte and that many bytes, 0 ending the chain): 0, or -1 when the file
 * ends inside it. */
static int skip_gif_sub_blocks(FILE *f, long *pos)
{
    for (;;) {
        int len = fseek(f, *pos, SEEK_SET) == 0 ? fgetc(f) : EOF;
        if (len == EOF)
            return -1;
        *pos += 1 + len;
        if (len == 0)
            return 0;
    }
}

/* Whether a GIF ends before its first image's data does: stb_image decodes
 * the first frame of a GIF cut inside it with the missing pixels left as
 * background. The blocks before it (extensions) are walked through their
 * length bytes; a block of another kind is left to the decoder. */
static int gif_cut_short(FILE *f)
{
    unsigned char h[13];
    if (fread(h, 1, sizeof h, f) != sizeof h || memcmp(h, "GIF8", 4) != 0)
        return 0;
    long pos = 13 + (h[10] & 0x80 ? 3L << ((h[10] & 7) + 1) : 0); /* + global palette */
    for (;;) {
        int block = fseek(f, pos, SEEK_SET) == 0 ? fgetc(f) : EOF;
        if (block == 0x21) { /* extension: a label, then sub-blocks */
            pos += 2;
            if (skip_gif_sub_blocks(f, &pos) != 0)
                return 1;
        } else if (block == 0x2C) { /* image: 9 bytes, a palette, the code size, data */
            unsigned char d[9];
            if (fread(d, 1, sizeof d, f) != sizeof d)
                return 1;
            pos += 10 + (d[8] & 0x80 ? 3L << ((d[8] & 7) + 1) : 0) + 1;
            return skip_gif_sub_blocks(f, &pos) != 0;
        } else {
            return block == EOF;
        }
    }
}

/* A file shorter than its uncompressed format needs, or a GIF cut inside
 * its first image (see above). */
static st_status check_length(FILE *f, const char *path, int w, int h, st_error *err)
{
    unsigned char head[IMAGE_HEAD_BYTES];
    size_t n = fread(head, 1, sizeof head, f);
    rewind(f);
    struct stat sb;
    const char *format = NULL;
    long long need = uncompressed_bytes(head, n, &format);
    if (need < 0)
        return st_fail(err, ST_EINPUT, "%s: cannot decode image: truncated: the file ends inside "
                       "its %s header (%zu bytes)", path, format, n);
    if (need > 0 && fstat(fileno(f), &sb) == 0 && (long long)sb.st_size < need)
        return st_fail(err, ST_EINPUT, "%s: cannot decode image: truncated: a %d x %d %s needs "
                       "at least %lld bytes, the file has %lld", path, w, h, format, need,
                       (long long)sb.st_size);
    int gif_cut = gif_cut_short(f);
    rewind(f);
    if (gif_cut)
        return st_fail(err, ST_EINPUT, "%s: cannot decode image: truncated: the file ends "
                       "inside the GIF's first image", path);
    return ST_OK;
}

/* An image's header as stbi_info reads it (without decoding); w 0 when it
 * cannot (the file is not an image stb_image knows, or corrupt). */
typedef struct image_head {
    int w, h, channels, bits16;
    size_t file_bytes;
} image_head;

static void read_head(FILE *f, image_head *head)
{
    memset(head, 0, sizeof *head);
    struct stat sb;
    if (!stbi_info_from_file(f, &head->w, &head->h, &head->channels) || head->w < 1 ||
        head->h < 1) {
        head->w = head->h = 0;
        return;
    }
    head->bits16 = stbi_is_16_bit_from_file(f);
    head->file_bytes = fstat(fileno(f), &sb) == 0 ? (size_t)sb.st_size : 0;
}

/* What stb_image must not be given, read from the header into *head (f is
 * left at its start): more than MAX_IMAGE_PIXELS, which a few bytes can
 * claim and stb_image would allocate (gigabytes) before finding no data;
 * and a 16-bit PGM or PPM of other channels than the decode's, whose
 * conversion overruns stb_image's buffer (2.27, Debian 12's); and Radiance
 * HDR, a float format no training set uses, whose decoder the fuzzer found
 * taking over 20 s on a 12 x 12 file. */
static st_status check_header(FILE *f, const char *path, int channels, image_head *head,
                              st_error *err)
{
    read_head(f, head);
    int w = head->w, h = head->h, in_file = head->channels;
    if (!w)
        return ST_OK; /* the decoder will say why */
    if ((long)w * h > MAX_IMAGE_PIXELS)
        return st_fail(err, ST_EINPUT, "%s: cannot decode image: %d x %d pixels: expected at "
                       "most %ld (32 megapixels)", path, w, h, MAX_IMAGE_PIXELS);
    char magic[2] = {0};
    int pnm = fread(magic, 1, 2, f) == 2 && magic[0] == 'P' && (magic[1] == '5' || magic[1] == '6');
    rewind(f);
    if (stbi_is_hdr_from_file(f))
        return st_fail(err, ST_EINPUT, "%s: cannot decode image: a Radiance HDR file: expected "
                       "PNG, JPEG, BMP, GIF, TGA, PSD or PNM (8-bit images to train on)", path);
    if (pnm && in_file != channels && head->bits16)
        return st_fail(err, ST_EINPUT, "%s: cannot decode image: a 16-bit %s of %d channel%s: "
                       "expected %d channel%s (stb_image cannot convert 16-bit PGM / PPM)", path,
                       magic[1] == '5' ? "PGM" : "PPM", in_file, in_file == 1 ? "" : "s",
                       channels, channels == 1 ? "" : "s");
    return check_length(f, path, w, h, err);
}

/* Debian's libstb is built without STBI_FAILURE_USERMSG: its reasons are
 * terse codes. The common ones, said in words, the code kept. */
static const char *failure_reason(const char *code)
{
    static const char *const words[][2] = {
        {"outofdata", "the data ends early (cut short or corrupt; stb_image: outofdata)"},
        {"expected marker", "the JPEG data ends early (cut short or corrupt; stb_image: "
                            "expected marker)"},
        {"unknown image type", "not an image stb_image decodes (expected PNG, JPEG, BMP, GIF, "
                               "TGA, PSD or binary PNM) or corrupt"},
        {"outofmem", "out of memory (stb_image: outofmem)"},
        {"can't fopen", "cannot open the file (stb_image: can't fopen)"},
    };
    if (!code)
        return "unknown reason";
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++)
        if (strcmp(code, words[i][0]) == 0)
            return words[i][1];
    return code;
}

size_t st_image_decode_bytes(int w, int h, int channels_in_file, int bits16, size_t file_bytes,
                             int channels)
{
    size_t px = (size_t)w * (size_t)h, bpc = bits16 ? 2 : 1;
    size_t n = channels_in_file > 0 ? (size_t)channels_in_file : 4;
    /* stb_image (2.27), PNG: the file's compressed data, the inflated rows
     * (a filter byte each) and the pixels they become (an alpha channel
     * added there when `channels` asks for it), all at once; then the
     * pixels and their conversion to `channels` (and from 16 bits to 8).
     * JPEG's per-component planes and GIF's canvas, background and history
     * are no more. The resize to the record (stb_image_resize) takes a few
     * rows of floats on top. Measured on 5000 x 5000 RGB PNGs decoded to 3
     * channels (150.7 MB each here): a run's estimate 167.2 MB, its peak
     * 167.3 MB with one reader; 619.4 MB and 612.8 MB with four. */
    size_t out_n = (size_t)channels == n + 1 && channels != 3 ? n + 1 : n;
    size_t raw = (size_t)h + px * n * bpc, pixels = px * out_n * bpc;
    size_t conversion = pixels + px * (size_t)channels * bpc + (bits16 ? px * channels : 0);
    size_t decode = file_bytes + raw + pixels;
    return (decode > conversion ? decode : conversion) + (size_t)w * 4 * sizeof(float) * 8;
}

/* The image at path into pixels (planar, shape); see data.h. lock: NULL,
 * or shared by the threads that decode from one list, held shared during
 * a decode.
 *
 * Out of memory is told from a corrupt file here, not by stb_image's
 * failure reason: stb_image keeps one reason per thread, and some of its
 * allocations fail without setting one (the inflate buffer of a PNG), so
 * the reason left is a stale one, such as "no SOI" from the JPEG test that
 * ran first on a PNG; and with several readers a decode also fails for the
 * memory the others hold at that moment. Debian's libstb is compiled
 * without our STBI_MALLOC, so its allocations cannot be watched. So: a
 * decode that fails on a well-formed header (stbi_info read its size) is
 * tried once more holding the lock alone, once the other readers' decodes
 * have ended and freed their buffers; if it fails again, an allocation of
 * what such a decode takes at once (st_image_decode_bytes) is attempted:
 * if that fails, the image did not fit (ST_ENOMEM, never skipped as bad);
 * if it succeeds, the memory was there and the file is corrupt (ST_EINPUT).
 * A corrupt file is decoded twice; a valid one that needed the others'
 * memory is decoded after all. */
static st_status decode_file(const char *path, st_shape sh, unsigned char *pixels,
                             pthread_rwlock_t *lock, st_error *err)
{
    char why[160], buf[128];
    int fd = st_open_regular(path, why, sizeof why);
    FILE *f = fd >= 0 ? fdopen(fd, "rb") : NULL;
    if (!f && fd >= 0) {
        snprintf(why, sizeof why, "%s", strerror_r(errno, buf, sizeof buf));
        close(fd);
    }
    if (!f)
        return st_fail(err, ST_EIO, "%s: cannot read: %s", path, why);
    image_head head;
    st_status header = check_header(f, path, sh.c, &head, err);
    if (header != ST_OK) {
        fclose(f);
        return header;
    }
    int w = 0, h = 0, in_file = 0;
    if (lock)
        pthread_rwlock_rdlock(lock);
    unsigned char *img = stbi_load_from_file(f, &w, &h, &in_file, sh.c);
    if (!img && head.w && lock) { /* alone, once more */
        pthread_rwlock_unlock(lock);
        pthread_rwlock_wrlock(lock);
        rewind(f);
        img = stbi_load_from_file(f, &w, &h, &in_file, sh.c);
    }
    const char *reason = img ? NULL : stbi_failure_reason();
    size_t need = 0;
    if (!img && head.w) {
        need = st_image_decode_bytes(head.w, head.h, head.channels, head.bits16,
                                     head.file_bytes, sh.c);
        void *probe = malloc(need);
        if (probe)
            need = 0; /* it would have fitted: corrupt */
        free(probe);
    }
    fclose(f);
    st_status st = ST_OK;
    if (!img && need)
        st = st_fail(err, ST_ENOMEM, "%s: out of memory decoding this %d x %d image: it "
                     "takes about %.0f MB at once, which could not be had%s", path, head.w,
                     head.h, (double)need / 1e6,
                     lock ? " (with no other image being decoded)" : "");
    else if (!img)
        st = st_fail(err, ST_EINPUT, "%s: cannot decode image: %s", path,
                     failure_reason(reason));
    else if (w < 1 || h < 1) /* stb_image "decodes" a PNM of height 0 */
        st = st_fail(err, ST_EINPUT, "%s: cannot decode image: %d x %d pixels: expected at "
                     "least 1 x 1", path, w, h);
    const unsigned char *src = img;
    unsigned char *sized = NULL;
    if (st == ST_OK && (w != sh.w || h != sh.h)) {
        sized = malloc(st_shape_count(sh));
        if (!sized)
            st = st_fail(err, ST_ENOMEM, "%s: out of memory resizing %d x %d to %d x %d", path,
                         w, h, sh.w, sh.h);
        else if (!stbir_resize_uint8(img, w, h, 0, sized, sh.w, sh.h, 0, sh.c))
            st = st_fail(err, ST_ENOMEM, "%s: cannot resize %d x %d to %d x %d (out of "
                         "memory)", path, w, h, sh.w, sh.h);
        src = sized;
    }
    if (st == ST_OK) {
        size_t plane = (size_t)sh.h * sh.w;
        for (int c = 0; c < sh.c; c++) {
            unsigned char *dst = pixels + (size_t)c * plane;
            const unsigned char *from = src + c;
            for (size_t p = 0; p < plane; p++)
                dst[p] = from[p * (size_t)sh.c];
        }
    }
    free(sized);
    stbi_image_free(img);
    if (lock) /* held until the image is freed: a decode alone is alone */
        pthread_rwlock_unlock(lock);
    return st;
}

st_status st_image_decode(const char *path, st_shape sh, unsigned char *pixels, st_error *err)
{
    return decode_file(path, sh, pixels, NULL, err);
}

/* Decode entry i into pixels (planar, the source's shape). On failure the
 * message goes to err and the status is returned. */
static st_status decode(const images_source *s, long i, unsigned char *pixels, st_error *err)
{
    st_status st = decode_file(s->paths + s->offset[i], s->base.shape, pixels,
                               (pthread_rwlock_t *)&s->decode_lock, err);
    if (st != ST_OK)
        st_error_prefix(err, "%s:%d: ", s->base.name, s->lines[i]);
    return st;
}

static st_status images_read(const st_source *src, long index, unsigned char *pixels,
                             int *label, st_error *err)
{
    const images_source *s = (const images_source *)src;
    if (!s->skip_bad) {
        st_status st = decode(s, index, pixels, err);
        if (st == ST_OK)
            *label = s->labels[index];
        return st;
    }
    /* skip_bad: the first entry from index on (wrapping) that decodes. A
     * failure is counted once per entry and the entry is not tried again. */
    long n = s->base.count;
    for (long k = 0; k < n; k++) {
        long i = (index + k) % n;
        if (__atomic_load_n(&s->bad[i], __ATOMIC_RELAXED))
            continue;
        st_error local = {0};
        st_status st = decode(s, i, pixels, &local);
        if (st == ST_OK) {
            *label = s->labels[i];
            return ST_OK;
        }
        if (st == ST_ENOMEM)
            return st_fail(err, st, "%s", local.msg);
        if (!__atomic_exchange_n(&s->bad[i], 1, __ATOMIC_RELAXED))
            count_skipped(s);
    }
    return st_fail(err, ST_EINPUT, "%s: none of the %ld listed images can be decoded",
                   s->base.name, n);
}

static void images_close(st_source *src)
{
    images_source *s = (images_source *)src;
    if (s->lock_made)
        pthread_rwlock_destroy(&s->decode_lock);
    free(s->paths);
    free(s->offset);
    free(s->labels);
    free(s->lines);
    free(s->bad);
    free(s);
}

static const st_source_ops images_ops = {images_read, images_close};

/* ---- opening ---- */

/* The class names of a names file: one per line, trimmed, blank lines
 * skipped. */
typedef struct names_list {
    char **name;
    int *line;
    int n, cap;
} names_list;

static void names_free(names_list *nl)
{
    for (int i = 0; i < nl->n; i++)
        free(nl->name[i]);
    free(nl->name);
    free(nl->line);
    memset(nl, 0, sizeof *nl);
}

static int is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\v' || c == '\f';
}

/* Trim s in place; returns the start, *len the trimmed length. */
static char *trim(char *s, size_t *len)
{
    size_t n = strlen(s);
    while (n > 0 && is_space(s[n - 1]))
        n--;
    s[n] = '\0';
    while (*s && is_space(*s)) {
        s++;
        n--;
    }
    *len = n;
    return s;
}

static st_status names_read(names_list *nl, const char *path, int classes, st_error *err)
{
    FILE *f;
    st_status st = st_fopen_input(path, "r", "class names", &f, err);
    if (st != ST_OK)
        return st;
    char *buf = NULL;
    size_t cap = 0;
    int line = 0;
    while (st == ST_OK && getline(&buf, &cap, f) >= 0) {
        line++;
        size_t len;
        char *name = trim(buf, &len);
        if (len == 0)
            continue;
        for (int i = 0; st == ST_OK && i < nl->n; i++)
            if (strcmp(nl->name[i], name) == 0)
                st = st_fail(err, ST_EINPUT, "%s:%d: class name \"%s\" repeats line %d: "
                             "expected distinct names", path, line, name, nl->line[i]);
        if (st != ST_OK)
            break;
        if (nl->n == nl->cap) {
            int cap2 = nl->cap ? 2 * nl->cap : 64;
            char **n2 = realloc(nl->name, (size_t)cap2 * sizeof *n2);
            if (n2)
                nl->name = n2;
            int *l2 = n2 ? realloc(nl->line, (size_t)cap2 * sizeof *l2) : NULL;
            if (l2)
                nl->line = l2;
            if (!n2 || !l2) {
                st = st_fail(err, ST_ENOMEM, "%s: out of memory reading class names", path);
                break;
            }
            nl->cap = cap2;
        }
        nl->name[nl->n] = strdup(name);
        if (!nl->name[nl->n]) {
            st = st_fail(err, ST_ENOMEM, "%s: out of memory reading class names", path);
            break;
        }
        nl->line[nl->n++] = line;
    }
    if (st == ST_OK && ferror(f))
        st = st_fail(err, ST_EINPUT, "%s: read failed: %s", path, strerror(errno));
    if (st == ST_OK && nl->n != classes)
        st = st_fail(err, ST_EINPUT, "%s: %d class name%s, but the network has %d classes: "
                     "expected one name per class", path, nl->n, nl->n == 1 ? "" : "s",
                     classes);
    free(buf);
    fclose(f);
    return st;
}

/* The label of path from the class names found in it. */
static st_status label_from_names(const names_list *nl, const char *list, int line,
                                  const char *path, const char *names, int *label,
                                  st_error *err)
{
    int found = -1;
    for (int i = 0; i < nl->n; i++) {
        if (!strstr(path, nl->name[i]))
            continue;
        if (found >= 0)
            return st_fail(err, ST_EINPUT, "%s:%d: %s: contains both class \"%s\" and class "
                           "\"%s\" from %s: expected exactly one class name in the path",
                           list, line, path, nl->name[found], nl->name[i], names);
        found = i;
    }
    if (found < 0)
        return st_fail(err, ST_EINPUT, "%s:%d: %s: contains none of the %d class names from "
                       "%s: expected exactly one", list, line, path, nl->n, names);
    *label = found;
    return ST_OK;
}

/* Split a trimmed "path label" line: the label is the last whitespace-
 * separated token (a non-negative integer); the path, everything before. */
static st_status label_from_line(char *text, const char *list, int line, int classes,
                                 int *label, st_error *err)
{
    size_t n = strlen(text);
    size_t start = n;
    while (start > 0 && !is_space(text[start - 1]))
        start--;
    const char *tok = text + start;
    size_t end = start;
    while (end > 0 && is_space(text[end - 1]))
        end--;
    if (start == 0 || end == 0)
        return st_fail(err, ST_EINPUT, "%s:%d: \"%s\": expected \"PATH LABEL\" (a path, then "
                       "an integer label; or give class names to label by path)", list, line,
                       text);
    long v = 0;
    int ok = *tok != '\0';
    for (const char *p = tok; ok && *p; p++) {
        if (*p < '0' || *p > '9')
            ok = 0;
        else if ((v = v * 10 + (*p - '0')) > 0x7fffffff)
            ok = 0;
    }
    if (!ok)
        return st_fail(err, ST_EINPUT, "%s:%d: %.*s: label \"%s\": expected a non-negative "
                       "integer after the path", list, line, (int)end, text, tok);
    if (v >= classes)
        return st_fail(err, ST_EINPUT, "%s:%d: %.*s: label %ld: expected a label below the "
                       "network's %d classes", list, line, (int)end, text, v, classes);
    text[end] = '\0';
    *label = (int)v;
    return ST_OK;
}

/* Append one entry to s (capacity *cap), from line of the list, and its
 * path to the blob (used bytes *blob_len, capacity *blob_cap). */
static st_status add_entry(images_source *s, long *cap, size_t *blob_len, size_t *blob_cap,
                           const char *path, size_t len, int label, int line, st_error *err)
{
    long n = s->base.count;
    if (n == *cap) {
        long cap2 = *cap ? 2 * *cap : 1024;
        size_t *o2 = realloc(s->offset, (size_t)cap2 * sizeof *o2);
        if (o2)
            s->offset = o2;
        int *l2 = o2 ? realloc(s->labels, (size_t)cap2 * sizeof *l2) : NULL;
        if (l2)
            s->labels = l2;
        int *n2 = l2 ? realloc(s->lines, (size_t)cap2 * sizeof *n2) : NULL;
        if (n2)
            s->lines = n2;
        if (!o2 || !l2 || !n2)
            return st_fail(err, ST_ENOMEM, "%s: out of memory holding %ld entries",
                           s->base.name, n);
        *cap = cap2;
    }
    if (*blob_len + len + 1 > *blob_cap) {
        size_t cap2 = *blob_cap ? 2 * *blob_cap : 65536;
        while (cap2 < *blob_len + len + 1)
            cap2 *= 2;
        char *b2 = realloc(s->paths, cap2);
        if (!b2)
            return st_fail(err, ST_ENOMEM, "%s: out of memory holding %ld paths",
                           s->base.name, n);
        s->paths = b2;
        *blob_cap = cap2;
    }
    memcpy(s->paths + *blob_len, path, len + 1);
    s->offset[n] = *blob_len;
    s->labels[n] = label;
    s->lines[n] = line;
    *blob_len += len + 1;
    s->base.count = n + 1;
    return ST_OK;
}

/* Parse the list into s: labels, readability, limit. */
static st_status parse_list(images_source *s, FILE *f, const char *list, const names_list *nl,
                            const char *names, long limit, int classes, st_error *err)
{
    st_status st = ST_OK;
    char *buf = NULL;
    size_t bufcap = 0, blob_len = 0, blob_cap = 0;
    long cap = 0, listed = 0;
    int line = 0;
    while (st == ST_OK && (limit <= 0 || s->base.count < limit) &&
           getline(&buf, &bufcap, f) >= 0) {
        line++;
        size_t len;
        char *text = trim(buf, &len);
        if (len == 0 || text[0] == '#')
            continue;
        int label = 0;
        if (nl)
            st = label_from_names(nl, list, line, text, names, &label, err);
        else
            st = label_from_line(text, list, line, classes, &label, err);
        if (st != ST_OK)
            break;
        const char *path = trim(text, &len);
        listed++;
        struct stat sb;
        const st_output_id *o = s->outputs && s->outputs->n && stat(path, &sb) == 0
                                    ? st_output_ids_find(s->outputs, &sb) : NULL;
        if (o) {
            st = st_fail(err, ST_EUSAGE, "%s %s is %s:%d's image %s: writing it would destroy "
                         "that input; give another file", o->what, o->path, list, line, path);
            break;
        }
        char why[160];
        st_regular_why(path, why, sizeof why);
        if (why[0]) {
            if (!s->skip_bad) {
                st = st_fail(err, ST_EINPUT, "%s:%d: %s: cannot read: %s", list, line, path,
                             why);
                break;
            }
            count_skipped(s);
            continue;
        }
        st = add_entry(s, &cap, &blob_len, &blob_cap, path, len, label, line, err);
    }
    if (st == ST_OK && ferror(f))
        st = st_fail(err, ST_EINPUT, "%s: read failed: %s", list, strerror(errno));
    if (st == ST_OK && listed == 0)
        st = st_fail(err, ST_EINPUT, "%s: no images listed: expected one path per line",
                     list);
    if (st == ST_OK && s->base.count == 0)
        st = st_fail(err, ST_EINPUT, "%s: none of the %ld listed images can be read", list,
                     listed);
    free(buf);
    return st;
}

/* The decodes' lock (see decode_file), preferring the one that waits to
 * hold it alone over new shared holders, which would otherwise starve it
 * while the other readers decode. */
static st_status make_decode_lock(images_source *s, st_error *err)
{
    pthread_rwlockattr_t attr;
    pthread_rwlockattr_init(&attr);
    pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    int e = pthread_rwlock_init(&s->decode_lock, &attr);
    pthread_rwlockattr_destroy(&attr);
    if (e != 0)
        return st_fail(err, ST_EINTERNAL, "%s: cannot create a lock: %s", s->base.name,
                       strerror(e));
    s->lock_made = 1;
    return ST_OK;
}

/* What one read may take while it decodes (st_source's read_bytes): the
 * largest decode of the list's images, from their headers (stbi_info reads
 * the size without decoding) when the list has at most HEADS_READ_MAX
 * entries, else the decode of the largest image a read accepts (32
 * megapixels of 4 channels). */
static void size_decodes(images_source *s)
{
    st_shape sh = s->base.shape;
    size_t largest = 0;
    int lw = 0, lh = 0;
    if (s->base.count > HEADS_READ_MAX) {
        int side = 1 << 12; /* 4096 x 8192: MAX_IMAGE_PIXELS */
        largest = st_image_decode_bytes(side, (int)(MAX_IMAGE_PIXELS / side), 4, 0, 0, sh.c);
        snprintf(s->base.read_bytes_why, sizeof s->base.read_bytes_why, "a bound: an image of "
                 "32 megapixels, the most a read takes; the %ld entries' headers are not read "
                 "at set-up (over %d)", s->base.count, HEADS_READ_MAX);
        s->base.read_bytes = largest;
        return;
    }
    for (long i = 0; i < s->base.count; i++) {
        char why[160];
        int fd = st_open_regular(s->paths + s->offset[i], why, sizeof why);
        FILE *f = fd >= 0 ? fdopen(fd, "rb") : NULL;
        if (!f) {
            if (fd >= 0)
                close(fd);
            continue; /* its read will say why */
        }
        image_head head;
        read_head(f, &head);
        fclose(f);
        if (!head.w || (long)head.w * head.h > MAX_IMAGE_PIXELS)
            continue; /* refused by its read, before decoding */
        size_t bytes = st_image_decode_bytes(head.w, head.h, head.channels, head.bits16,
                                             head.file_bytes, sh.c);
        if (bytes > largest) {
            largest = bytes;
            lw = head.w;
            lh = head.h;
        }
    }
    s->base.read_bytes = largest;
    if (largest)
        snprintf(s->base.read_bytes_why, sizeof s->base.read_bytes_why, "the largest image, "
                 "%d x %d, of the headers read at set-up", lw, lh);
}

st_status st_images_open(st_source **out, const char *list, const char *names, long limit,
                         int classes, const st_image_opts *o, st_error *err)
{
    if (!o)
        return st_fail(err, ST_EINTERNAL, "%s: image list opened without decode options",
                       list);
    st_shape sh = o->shape;
    if (sh.c != 1 && sh.c != 3)
        return st_fail(err, ST_EINPUT, "%s: images decode to %d channels: expected 1 (grey) "
                       "or 3 (RGB)", list, sh.c);
    if (sh.h <= 0 || sh.w <= 0 || sh.h > MAX_SIDE || sh.w > MAX_SIDE)
        return st_fail(err, ST_EINPUT, "%s: images resize to %d x %d: expected sides from 1 "
                       "to %d", list, sh.w, sh.h, MAX_SIDE);
    if (classes <= 0)
        return st_fail(err, ST_EINPUT, "%s: the network has %d classes: expected at least "
                       "one", list, classes);

    names_list nl = {0};
    int have_names = names && names[0];
    FILE *f = NULL;
    images_source *s = st_calloc(1, sizeof *s, "image-list source", err);
    st_status st = s ? ST_OK : ST_ENOMEM;
    if (st == ST_OK) {
        s->base.ops = &images_ops;
        s->base.shape = sh;
        s->base.classes = classes;
        s->skip_bad = o->skip_bad;
        s->skipped = o->skipped;
        s->outputs = o->outputs;
        snprintf(s->base.name, sizeof s->base.name, "%s", list);
    }
    if (st == ST_OK && have_names)
        st = names_read(&nl, names, classes, err);
    if (st == ST_OK)
        st = st_fopen_input(list, "r", "image list", &f, err);
    if (st == ST_OK)
        st = parse_list(s, f, list, have_names ? &nl : NULL, names, limit, classes, err);
    if (st == ST_OK && s->skip_bad) {
        s->bad = calloc((size_t)s->base.count, 1);
        if (!s->bad)
            st = st_fail(err, ST_ENOMEM, "%s: out of memory", list);
    }
    if (st == ST_OK)
        st = make_decode_lock(s, err);
    if (st == ST_OK)
        size_decodes(s);
    if (f)
        fclose(f);
    names_free(&nl);
    if (s)
        s->outputs = NULL; /* the caller's, for the open only */
    if (st != ST_OK) {
        if (s)
            images_close(&s->base);
        return st;
    }
    *out = &s->base;
    return ST_OK;
}

/* ---- class names for other commands ---- */

st_status st_class_names_read(const char *path, int classes, char ***names, st_error *err)
{
    names_list nl = {0};
    *names = NULL;
    st_status st = names_read(&nl, path, classes, err);
    if (st != ST_OK) {
        names_free(&nl);
        return st;
    }
    *names = nl.name;
    free(nl.line);
    return ST_OK;
}

void st_class_names_free(char **names, int classes)
{
    for (int i = 0; names && i < classes; i++)
        free(names[i]);
    free(names);
}
