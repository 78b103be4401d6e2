/* Fuzz target: the image decoder path of image lists, "bytes of an image
 * file -> decoded, resized tensor" (st_image_decode: stb_image, then
 * stb_image_resize, then the planar [C, H, W] layout). The input is an
 * image file (PNG, JPEG, BMP, GIF, TGA, PNM, PSD, HDR, ...: whatever
 * stb_image reads). It is decoded to RGB 16 x 16 (a resize), to grey 5 x 3
 * (a resize that changes the aspect), and to grey at its own size when
 * that is small (no resize), each into a buffer of exactly that shape. */
#include "fuzz_files.h"

#include <stb/stb_image.h>

#include "data/data.h"

#define IMAGE_NAME "image"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len);

static void decode(const char *path, st_shape shape)
{
    unsigned char *pixels = malloc(st_shape_count(shape));
    if (!pixels)
        abort();
    st_error err = {0};
    st_status st = st_image_decode(path, shape, pixels, &err);
    fz_check(st, &err, "st_image_decode", IMAGE_NAME);
    free(pixels);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
    char path[256];
    fz_write(path, sizeof path, IMAGE_NAME, data, len);
    decode(path, (st_shape){3, 16, 16});
    decode(path, (st_shape){1, 5, 3});
    int w = 0, h = 0, c = 0;
    if (len <= INT32_MAX && stbi_info_from_memory(data, (int)len, &w, &h, &c) && w > 0 &&
        h > 0 && (long)w * h <= 4096)
        decode(path, (st_shape){1, h, w});
    return 0;
}
