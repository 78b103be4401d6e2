/* Reading the striped store (store_format.h gives its layout): st_store_open
 * reads the index and checks it whole (magic, version, CRC, sizes, a
 * consistent header), then each stripe's exact length (the stripes are
 * beside the index, or, through a symbolic link, beside the file it
 * names); verify=1 also reads every block back and checks its CRC. The store is then a data source
 * (data.h) whose record is one preadv at its computed stripe and offset, so
 * any number of threads may read at once. */
#include "data/store.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "base/fileio.h"
#include "store_format.h"

typedef struct store_source {
    st_source base;
    store_layout L;
    int *fds;          /* [stripes] */
    char *index;       /* the index path, as given (messages) */
    char *stripes_at;  /* the stripes are named after it: index, or the file a
                          symbolic link index names (pack writes a store so) */
} store_source;

static st_status store_read(const st_source *src, long index, unsigned char *pixels,
                            int *label, st_error *err)
{
    const store_source *s = (const store_source *)src;
    const store_layout *L = &s->L;
    if (index < 0 || index >= src->count)
        return st_fail(err, ST_EINTERNAL, "%s: record %ld does not exist (%ld records)", s->index,
                       index, src->count);
    uint64_t rec = store_record_size(L), b = (uint64_t)index / L->per_block;
    uint64_t off = (b / L->stripes) * L->unit + ((uint64_t)index % L->per_block) * rec;
    uint32_t k = (uint32_t)(b % L->stripes);
    unsigned char lab[4];
    struct iovec iov[2] = {{lab, 4}, {pixels, (size_t)rec - 4}};
    ssize_t got;
    do
        got = preadv(s->fds[k], iov, 2, (off_t)off);
    while (got < 0 && errno == EINTR);
    if (got < 0 || (uint64_t)got != rec) {
        char name[4200];
        store_stripe_name(name, sizeof name, s->stripes_at, L->generation, k);
        if (got < 0)
            return st_fail(err, ST_EIO, "%s: reading record %ld from stripe %u (%s): %s",
                           s->index, index, k, name, strerror(errno));
        return st_fail(err, ST_EINPUT, "%s: truncated stripe %u (%s): record %ld is cut short",
                       s->index, k, name, index);
    }
    int32_t l = (int32_t)store_get_u32(lab);
    if (l < 0 || (uint32_t)l >= L->classes)
        return st_fail(err, ST_EINPUT, "%s: record %ld has label %d, not below the store's %u "
                       "classes: the store is corrupt", s->index, index, (int)l, L->classes);
    *label = (int)l;
    return ST_OK;
}

static void store_close(st_source *src)
{
    store_source *s = (store_source *)src;
    store_stripes_close(s->fds, s->L.stripes);
    free(s->fds);
    free(s->L.crc);
    free(s->index);
    free(s->stripes_at);
    free(s);
}

static const st_source_ops store_ops = {store_read, store_close};

/* A stripe that is one of the caller's outputs: writing it would ruin the
 * store. */
static st_status refuse_outputs(const store_source *s, const st_output_ids *outputs,
                                st_error *err)
{
    for (uint32_t k = 0; outputs && outputs->n && k < s->L.stripes; k++) {
        struct stat sb;
        const st_output_id *o = fstat(s->fds[k], &sb) == 0 ? st_output_ids_find(outputs, &sb)
                                                           : NULL;
        if (o) {
            char name[4200];
            store_stripe_name(name, sizeof name, s->stripes_at, s->L.generation, k);
            return st_fail(err, ST_EUSAGE, "%s %s is stripe %u of the store %s (%s): writing it "
                           "would destroy that input; give another file", o->what, o->path, k,
                           s->index, name);
        }
    }
    return ST_OK;
}

st_status st_store_open(st_source **out, const char *path, long limit, int classes, int verify,
                        const st_output_ids *outputs, st_error *err)
{
    char *index = NULL; /* the index file, whole */
    size_t len = 0;
    store_source *s = st_calloc(1, sizeof *s, "store source", err);
    st_status st = s ? ST_OK : ST_ENOMEM;
    struct stat ls;
    if (st == ST_OK && !(s->index = strdup(path)))
        st = st_fail(err, ST_ENOMEM, "out of memory opening %s", path);
    if (st == ST_OK && !(s->stripes_at = lstat(path, &ls) == 0 && S_ISLNK(ls.st_mode)
                                       ? realpath(path, NULL) : strdup(path)))
        st = st_fail(err, ST_ENOMEM, "%s: cannot resolve the link: %s", path, strerror(errno));
    if (st == ST_OK)
        st = st_read_text(path, "store index", HEADER_BYTES + 4 * MAX_BLOCKS + 4, &index, &len,
                          err);
    if (st == ST_OK)
        st = store_index_parse(path, (const unsigned char *)index, len, &s->L, err);
    if (st == ST_OK && classes > 0 && s->L.classes > (uint32_t)classes)
        st = st_fail(err, ST_EINPUT, "%s: the store has %u classes but the network has %d "
                     "outputs", path, s->L.classes, classes);
    if (st == ST_OK) {
        s->fds = st_calloc(s->L.stripes, sizeof *s->fds, "store stripe files", err);
        if (!s->fds)
            st = ST_ENOMEM;
        for (uint32_t k = 0; s->fds && k < s->L.stripes; k++)
            s->fds[k] = -1;
    }
    if (st == ST_OK)
        st = store_stripes_open(s->stripes_at, &s->L, s->fds, err);
    if (st == ST_OK)
        st = refuse_outputs(s, outputs, err);
    if (st == ST_OK && verify)
        st = store_blocks_verify(s->stripes_at, &s->L, s->fds, err);
    free(index);
    if (st != ST_OK) {
        if (s)
            store_close(&s->base);
        return st;
    }
    s->base.ops = &store_ops;
    s->base.count = (long)s->L.count;
    if (limit > 0 && limit < s->base.count)
        s->base.count = limit;
    s->base.shape = s->L.shape;
    s->base.classes = (int)s->L.classes;
    snprintf(s->base.name, sizeof s->base.name, "%s", path);
    *out = &s->base;
    return ST_OK;
}
