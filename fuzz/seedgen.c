/* seedgen: write the fuzz seeds that no singletrain command writes, from
 * real Fashion-MNIST images (fuzz/make-seeds.sh builds and runs it):
 *   seedgen cifar IDX_IMAGES IDX_LABELS N OUT
 *       N CIFAR-10 records: each image resized to 32 x 32, tinted into
 *       three planes, its label byte first
 *   seedgen images IDX_IMAGES INDEX SIZE OUTDIR
 *       image INDEX resized to SIZE x SIZE, in every format we can write:
 *       OUTDIR/rgb.png, grey.png, rgb.jpg, rgb.bmp, rgb.tga, rgb.hdr,
 *       grey.pgm, rgb.ppm (PNM by hand: stb_image_write has none)
 * The IDX files may be gzip-compressed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include <stb/stb_image_resize.h>
#include <stb/stb_image_write.h>

#define SIDE 28

/* Image (or label) i of an IDX file: skip the header and i records. */
static int idx_record(const char *path, long header, long i, unsigned char *out, long bytes)
{
    gzFile f = gzopen(path, "rb");
    if (!f) {
        fprintf(stderr, "seedgen: cannot open %s\n", path);
        return 1;
    }
    int ok = gzseek(f, header + i * bytes, SEEK_SET) >= 0 &&
             gzread(f, out, (unsigned)bytes) == (int)bytes;
    gzclose(f);
    if (!ok)
        fprintf(stderr, "seedgen: %s: cannot read record %ld\n", path, i);
    return !ok;
}

/* Image i resized to side x side, as RGB (tinted by i) or grey. */
static int load_image(const char *path, long i, int side, int rgb, unsigned char *out)
{
    unsigned char grey[SIDE * SIDE], *sized = malloc((size_t)side * side);
    int rc = !sized || idx_record(path, 16, i, grey, SIDE * SIDE) ||
             !stbir_resize_uint8(grey, SIDE, SIDE, 0, sized, side, side, 0, 1);
    for (int p = 0; !rc && p < side * side; p++) {
        if (!rgb) {
            out[p] = sized[p];
            continue;
        }
        out[3 * p] = sized[p];
        out[3 * p + 1] = (unsigned char)(sized[p] * (3 + i % 5) / 8);
        out[3 * p + 2] = (unsigned char)(255 - sized[p]);
    }
    free(sized);
    return rc;
}

static int write_pnm(const char *path, const char *magic, int side, int channels,
                     const unsigned char *pixels)
{
    FILE *f = fopen(path, "wb");
    size_t bytes = (size_t)side * side * channels;
    int ok = f && fprintf(f, "%s\n%d %d\n255\n", magic, side, side) > 0 &&
             fwrite(pixels, 1, bytes, f) == bytes;
    if (f && fclose(f) != 0)
        ok = 0;
    return !ok;
}

static int cmd_cifar(const char *images, const char *labels, long n, const char *out)
{
    FILE *f = fopen(out, "wb");
    if (!f)
        return 1;
    int rc = 0;
    for (long i = 0; i < n && !rc; i++) {
        unsigned char label, rgb[32 * 32 * 3], planar[3 * 32 * 32];
        rc = idx_record(labels, 8, i, &label, 1) || load_image(images, i, 32, 1, rgb);
        for (int c = 0; !rc && c < 3; c++)
            for (int p = 0; p < 32 * 32; p++)
                planar[c * 32 * 32 + p] = rgb[3 * p + c];
        if (!rc && (fwrite(&label, 1, 1, f) != 1 || fwrite(planar, 1, sizeof planar, f) !=
                                                        sizeof planar))
            rc = 1;
    }
    if (fclose(f) != 0)
        rc = 1;
    return rc;
}

static int cmd_images(const char *images, long index, int side, const char *dir)
{
    unsigned char *rgb = malloc((size_t)side * side * 3), *grey = malloc((size_t)side * side);
    float *hdr = malloc((size_t)side * side * 3 * sizeof *hdr);
    char path[4096];
    int rc = !rgb || !grey || !hdr || load_image(images, index, side, 1, rgb) ||
             load_image(images, index, side, 0, grey);
    for (int p = 0; !rc && p < side * side * 3; p++)
        hdr[p] = rgb[p] / 64.0f;
#define OUT(name) (snprintf(path, sizeof path, "%s/%s", dir, name), path)
    if (!rc)
        rc = !stbi_write_png(OUT("rgb.png"), side, side, 3, rgb, side * 3) ||
             !stbi_write_png(OUT("grey.png"), side, side, 1, grey, side) ||
             !stbi_write_jpg(OUT("rgb.jpg"), side, side, 3, rgb, 90) ||
             !stbi_write_bmp(OUT("rgb.bmp"), side, side, 3, rgb) ||
             !stbi_write_tga(OUT("rgb.tga"), side, side, 3, rgb) ||
             !stbi_write_hdr(OUT("rgb.hdr"), side, side, 3, hdr) ||
             write_pnm(OUT("grey.pgm"), "P5", side, 1, grey) ||
             write_pnm(OUT("rgb.ppm"), "P6", side, 3, rgb);
#undef OUT
    free(rgb);
    free(grey);
    free(hdr);
    return rc;
}

int main(int argc, char **argv)
{
    int rc = 2;
    if (argc == 6 && strcmp(argv[1], "cifar") == 0)
        rc = cmd_cifar(argv[2], argv[3], atol(argv[4]), argv[5]);
    else if (argc == 6 && strcmp(argv[1], "images") == 0)
        rc = cmd_images(argv[2], atol(argv[3]), atoi(argv[4]), argv[5]);
    else
        fprintf(stderr, "usage: seedgen cifar IDX_IMAGES IDX_LABELS N OUT\n"
                        "       seedgen images IDX_IMAGES INDEX SIZE OUTDIR\n");
    if (rc == 1)
        fprintf(stderr, "seedgen %s: failed\n", argv[1]);
    return rc;
}
