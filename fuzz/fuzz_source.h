/* Shared by the fuzz targets of record readers (cifar, idx, store): read
 * every record of an opened source; a read may fail only as fz_check
 * allows, and a record read must carry a label below the class count. */
#ifndef ST_FUZZ_SOURCE_H
#define ST_FUZZ_SOURCE_H

#include "fuzz_files.h"

#include "data/data.h"

/* call: the reader's name in messages; name: the file a failure must name. */
static inline void fz_read_all(st_source *s, const char *call, const char *name)
{
    unsigned char *pixels = malloc(st_record_bytes(s) ? st_record_bytes(s) : 1);
    if (!pixels)
        abort();
    for (long i = 0; i < s->count; i++) {
        st_error err = {0};
        int label = -1;
        st_status st = s->ops->read(s, i, pixels, &label, &err);
        fz_check(st, &err, call, name);
        if (st == ST_OK && (label < 0 || label >= s->classes)) {
            fprintf(stderr, "fuzz: record %ld has label %d of %d classes\n", i, label,
                    s->classes);
            abort();
        }
    }
    free(pixels);
}

#endif
