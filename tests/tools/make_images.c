/* make_images: write Fashion-MNIST images as PNG files, the way people keep
 * their own image datasets: OUT/<class>/<n>.png, plus OUT/list.txt (one
 * path per line, labels found in the paths) and OUT/names.txt (the class
 * names, which are not substrings of each other). For tests, benchmarks
 * and the guide's walk-through (docs/guide/getting-started.md); no downloads.
 * usage: make_images IDX_IMAGES IDX_LABELS OUT COUNT [SIZE [rgb]]
 *   SIZE: resize to SIZE x SIZE (default 28); rgb: three channels, tinted
 *   per class so colour carries information.
 * or:    make_images flat WIDTH HEIGHT OUT.png
 *   one RGB PNG of a single colour (tests/lib/flat_png.h): a 5000 x 5000
 *   image (75 MB of pixels) in about 85 kB of file, for the tests of
 *   large decodes. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <stb/stb_image_resize.h>
#include <stb/stb_image_write.h>

#include "flat_png.h"

#include "data/data.h"

static const char *const names[10] = {"top",    "trouser", "pullover", "dress", "coat",
                                      "sandal", "shirt",   "sneaker",  "bag",   "boot"};

static int make_dir(const char *path)
{
    if (mkdir(path, 0755) == 0 || errno == EEXIST)
        return 0;
    fprintf(stderr, "make_images: %s: %s\n", path, strerror(errno));
    return 1;
}

/* make_images flat W H OUT.png */
static int write_flat(long w, long h, const char *path)
{
    if (w < 1 || h < 1 || w > 65535 || h > 65535) {
        fprintf(stderr, "make_images: flat: sides from 1 to 65535, got %ld x %ld\n", w, h);
        return 2;
    }
    if (tl_write_flat_png(path, w, h) != 0) {
        fprintf(stderr, "make_images: cannot write %s\n", path);
        return 1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 5 && strcmp(argv[1], "flat") == 0)
        return write_flat(atol(argv[2]), atol(argv[3]), argv[4]);
    if (argc < 5) {
        fprintf(stderr, "usage: make_images IDX_IMAGES IDX_LABELS OUT COUNT [SIZE [rgb]]\n"
                        "   or: make_images flat WIDTH HEIGHT OUT.png\n");
        return 2;
    }
    const char *out = argv[3];
    long count = atol(argv[4]);
    int size = argc > 5 ? atoi(argv[5]) : 28, rgb = argc > 6 && strcmp(argv[6], "rgb") == 0;
    st_error err = {0};
    st_source *src = NULL;
    if (count < 1 || size < 1 || size > 4096 ||
        st_idx_open(&src, argv[1], argv[2], count, 10, &err) != ST_OK) {
        fprintf(stderr, "make_images: %s\n", err.msg[0] ? err.msg : "bad COUNT or SIZE");
        return 2;
    }
    char path[4096];
    int rc = make_dir(out);
    for (int c = 0; c < 10 && !rc; c++) {
        snprintf(path, sizeof path, "%s/%s", out, names[c]);
        rc = make_dir(path);
    }
    snprintf(path, sizeof path, "%s/names.txt", out);
    FILE *nf = rc ? NULL : fopen(path, "w");
    snprintf(path, sizeof path, "%s/list.txt", out);
    FILE *lf = rc ? NULL : fopen(path, "w");
    if (!nf || !lf) {
        fprintf(stderr, "make_images: cannot write %s/names.txt or list.txt\n", out);
        return 1;
    }
    for (int c = 0; c < 10; c++)
        fprintf(nf, "%s\n", names[c]);
    int w = src->shape.w, h = src->shape.h, ch = rgb ? 3 : 1;
    unsigned char *pix = malloc((size_t)w * h), *sized = malloc((size_t)size * size);
    unsigned char *img = malloc((size_t)size * size * ch);
    for (long i = 0; i < src->count && !rc; i++) {
        int label;
        if (src->ops->read(src, i, pix, &label, &err) != ST_OK) {
            fprintf(stderr, "make_images: %s\n", err.msg);
            rc = 1;
            break;
        }
        stbir_resize_uint8(pix, w, h, 0, sized, size, size, 0, 1);
        for (int p = 0; p < size * size; p++)
            for (int k = 0; k < ch; k++) /* a class tint in RGB */
                img[p * ch + k] = rgb ? (unsigned char)(sized[p] * (6 + (label + k) % 5) / 10)
                                      : sized[p];
        snprintf(path, sizeof path, "%s/%s/%ld.png", out, names[label], i);
        if (!stbi_write_png(path, size, size, ch, img, size * ch)) {
            fprintf(stderr, "make_images: cannot write %s\n", path);
            rc = 1;
        }
        fprintf(lf, "%s\n", path);
    }
    fclose(nf);
    if (fclose(lf) != 0)
        rc = 1;
    free(pix);
    free(sized);
    free(img);
    st_source_close(src);
    return rc;
}
