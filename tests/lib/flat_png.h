/* A PNG of one colour, W x H, RGB, written row by row through zlib: large
 * images (5000 x 5000: 75 MB of pixels) in a small file (about 85 kB) and
 * a few kB of memory, for the tests of large decodes (make_images flat,
 * test_readers.c). */
#ifndef TL_FLAT_PNG_H
#define TL_FLAT_PNG_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zlib.h>

/* A PNG chunk: length, type, data, CRC of type and data. */
static void tl_png_chunk(FILE *f, const char *type, const unsigned char *data, size_t len)
{
    unsigned char be[4] = {(unsigned char)(len >> 24), (unsigned char)(len >> 16),
                           (unsigned char)(len >> 8), (unsigned char)len};
    fwrite(be, 1, 4, f);
    fwrite(type, 1, 4, f);
    if (len)
        fwrite(data, 1, len, f);
    uLong crc = crc32(0, (const Bytef *)type, 4);
    if (len) /* crc32 of a NULL buffer is the initial value, not crc */
        crc = crc32(crc, data, (uInt)len);
    unsigned char c[4] = {(unsigned char)(crc >> 24), (unsigned char)(crc >> 16),
                          (unsigned char)(crc >> 8), (unsigned char)crc};
    fwrite(c, 1, 4, f);
}

/* path: w x h pixels of (90, 90, 200); 0 on success, -1 on a failed write. */
static int tl_write_flat_png(const char *path, long w, long h)
{
    FILE *f = fopen(path, "wb");
    size_t row_len = 1 + 3 * (size_t)w; /* a filter byte (none), then the pixels */
    unsigned char *row = calloc(row_len, 1), out[65536];
    if (!f || !row) {
        if (f)
            fclose(f);
        free(row);
        return -1;
    }
    for (size_t i = 1; i < row_len; i++)
        row[i] = (unsigned char)(i % 3 == 0 ? 200 : 90);
    fwrite("\x89PNG\r\n\x1a\n", 1, 8, f);
    unsigned char ihdr[13] = {(unsigned char)(w >> 24), (unsigned char)(w >> 16),
                              (unsigned char)(w >> 8),  (unsigned char)w,
                              (unsigned char)(h >> 24), (unsigned char)(h >> 16),
                              (unsigned char)(h >> 8),  (unsigned char)h,
                              8, 2, 0, 0, 0}; /* 8 bits, RGB */
    tl_png_chunk(f, "IHDR", ihdr, sizeof ihdr);
    z_stream z;
    memset(&z, 0, sizeof z);
    deflateInit(&z, 9);
    for (long y = 0; y <= h; y++) { /* y == h: the end of the stream */
        int flush = y < h ? Z_NO_FLUSH : Z_FINISH, ret;
        z.next_in = row;
        z.avail_in = y < h ? (uInt)row_len : 0;
        do {
            z.next_out = out;
            z.avail_out = sizeof out;
            ret = deflate(&z, flush);
            if (sizeof out - z.avail_out > 0)
                tl_png_chunk(f, "IDAT", out, sizeof out - z.avail_out);
        } while (z.avail_out == 0 || (flush == Z_FINISH && ret != Z_STREAM_END));
    }
    deflateEnd(&z);
    tl_png_chunk(f, "IEND", NULL, 0);
    free(row);
    return fclose(f) == 0 ? 0 : -1;
}

#endif
