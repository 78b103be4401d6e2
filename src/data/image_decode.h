/* Decoding one image file (image_decode.c), as the image-list reader
 * (images.c) uses it: the header read without decoding, and the decode
 * under the lock the list's readers share. */
#ifndef ST_DATA_IMAGE_DECODE_H
#define ST_DATA_IMAGE_DECODE_H

#include <pthread.h>
#include <stddef.h>
#include <stdio.h>

#include "data/data.h"

#define ST_MAX_SIDE 65536              /* of the decode shape */
#define ST_MAX_IMAGE_PIXELS (1L << 25) /* of an image file: 32 megapixels */

/* An image's header as stbi_info reads it (without decoding); w 0 when it
 * cannot (the file is not an image stb_image knows, or corrupt). */
typedef struct st_image_head {
    int w, h, channels, bits16;
    size_t file_bytes;
} st_image_head;

void st_image_read_head(FILE *f, st_image_head *head);

/* The image at path into pixels (planar, sh); see st_image_decode
 * (data.h). lock: NULL, or shared by the threads that decode from one
 * list (see image_decode.c). */
st_status st_image_decode_locked(const char *path, st_shape sh, unsigned char *pixels,
                                 pthread_rwlock_t *lock, st_error *err);

#endif
