/* The shape of one sample (channels, height, width), shared by the data
 * sources, which produce samples, and the layers, which consume them. */
#ifndef ST_SHAPE_H
#define ST_SHAPE_H

#include <stddef.h>

typedef struct st_shape {
    int c, h, w;
} st_shape;

static inline size_t st_shape_count(st_shape s)
{
    return (size_t)s.c * (size_t)s.h * (size_t)s.w;
}

#endif
