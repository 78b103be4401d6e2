/* Decoding one image file with stb_image, for the image-list reader
 * (images.c) and st_image_decode (data.h): what its header claims checked
 * before stb_image may allocate for it (pixels, length, formats whose
 * decoders misbehave), the decode under the list's lock, out of memory told
 * from a corrupt file, the resize and the planar layout. */
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

#include "image_decode.h"
#include "base/fileio.h"

#define IMAGE_HEAD_BYTES 4096 /* read to find an image's length */

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
        if (w <= 0 || h <= 0 || w > ST_MAX_SIDE * 16 || h > ST_MAX_SIDE * 16 || bits <= 0 ||
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

void st_image_read_head(FILE *f, st_image_head *head)
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
 * left at its start): more than ST_MAX_IMAGE_PIXELS, which a few bytes can
 * claim and stb_image would allocate (gigabytes) before finding no data;
 * and a 16-bit PGM or PPM of other channels than the decode's, whose
 * conversion overruns stb_image's buffer (2.27, Debian 12's); and Radiance
 * HDR, a float format no training set uses, whose decoder the fuzzer found
 * taking over 20 s on a 12 x 12 file. */
static st_status check_header(FILE *f, const char *path, int channels, st_image_head *head,
                              st_error *err)
{
    st_image_read_head(f, head);
    int w = head->w, h = head->h, in_file = head->channels;
    if (!w)
        return ST_OK; /* the decoder will say why */
    if ((long)w * h > ST_MAX_IMAGE_PIXELS)
        return st_fail(err, ST_EINPUT, "%s: cannot decode image: %d x %d pixels: expected at "
                       "most %ld (32 megapixels)", path, w, h, ST_MAX_IMAGE_PIXELS);
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

/* See image_decode.h. lock: NULL,
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
st_status st_image_decode_locked(const char *path, st_shape sh, unsigned char *pixels,
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
    st_image_head head;
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
    return st_image_decode_locked(path, sh, pixels, NULL, err);
}

