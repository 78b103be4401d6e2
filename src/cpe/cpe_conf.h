/* The reader both SW26010 description files share (cpe_conf.c): the model
 * file (cpe_model.c, include/cpe/model.h) and the machine description
 * (cpe_machine.c, include/cpe/machine.h). A file is lines of
 *     NAME  VALUE  UNIT  SOURCE...
 * ('#' starts a comment), each NAME from the reader's table exactly once,
 * VALUE a decimal number in the entry's range (a whole one for an integer
 * entry, a comma-separated list for a DMA curve's row). */
#ifndef CPE_CONF_H
#define CPE_CONF_H

#include <stddef.h>

#include "base/status.h"

typedef enum cpe_conf_kind {
    CPE_CONF_REAL,        /* a double at offset */
    CPE_CONF_INT,         /* a whole number, stored as an int at offset */
    CPE_CONF_CURVE_BYTES, /* a row of the st_cpe_dma_curve at offset */
    CPE_CONF_CURVE_GET,
    CPE_CONF_CURVE_PUT
} cpe_conf_kind;

/* One entry: its name and unit in the file, where it goes in the target
 * struct, its range [lo, hi] (lo excluded when open_lo). */
typedef struct cpe_conf_entry {
    const char *name, *unit;
    cpe_conf_kind kind;
    size_t offset;
    double lo, hi;
    int open_lo;
} cpe_conf_entry;

/* A kind of file: its table and the words its messages use. */
typedef struct cpe_conf {
    const cpe_conf_entry *entries;
    int count;
    const char *item;  /* what an entry is called: "constant", "key" */
    const char *file;  /* what the file is called: "SW26010 model file" */
    const char *known; /* the hint after an unknown name: "a NAME of the model: ..." */
    const char *whole; /* why every entry is needed: "a model gives every constant" */
} cpe_conf;

/* Parse text (NUL-ended), named origin in messages, into target (which
 * the caller zeroes); line[i] gets the line of entry i (when line is not NULL, count
 * ints). ST_EINPUT naming origin:LINE and the entry on a bad line, origin
 * and the entry when one is missing. */
st_status cpe_conf_parse(const cpe_conf *c, void *target, const char *text, const char *origin,
                         int *line, st_error *err);

/* The file at path, or (path NULL) builtin named builtin_origin. */
st_status cpe_conf_load(const cpe_conf *c, void *target, const char *path, const char *builtin,
                        const char *builtin_origin, int *line, st_error *err);

#endif
