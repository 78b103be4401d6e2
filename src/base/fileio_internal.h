/* What fileio.c (files in) and fileio_out.c (files out) share. */
#ifndef ST_BASE_FILEIO_INTERNAL_H
#define ST_BASE_FILEIO_INTERNAL_H

#include <sys/stat.h>

/* What a file of mode m (stat's) is, when it is not a regular file: "a
 * directory", "a FIFO (named pipe)" ... */
const char *base_file_kind(mode_t m);

#endif
