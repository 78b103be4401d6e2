/* stb_image and stb_image_resize for the fuzz build only: the same
 * headers Debian's libstb is built from, compiled here with the fuzzer's
 * coverage instrumentation and AddressSanitizer so that the decoder path
 * of fuzz/image.c is explored inside the decoder too (the uninstrumented
 * libstb is not linked into the fuzz targets). Not UBSan: stb_image's
 * shifts of negative values are its own, not the readers'. */
#define STB_IMAGE_IMPLEMENTATION
#define STB_IMAGE_RESIZE_IMPLEMENTATION
#include <stb/stb_image.h>
#include <stb/stb_image_resize.h>
