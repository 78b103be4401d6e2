/* Fuzz target: the striped-store reader (`singletrain pack` output). The
 * input is the index file, then each stripe file after an FZ_SEPARATOR, in
 * stripe order; the stripes are written under the names the index's
 * generation gives them. The index's last four bytes, the CRC-32 of the
 * rest, are recomputed before it is written, so that mutations reach the
 * header's checks instead of stopping at the checksum (the checksum test
 * itself is tests/unit/test_store.c's). The store is opened with st_store_open
 * without verification and every record is read; then with a limit of two
 * records, for a 10-class network, and with verification (every block's
 * CRC-32 read back on up to 4 threads). */
#include "fuzz_source.h"

#include <zlib.h>

#include "data/data.h"
#include "data/store.h"

#define INDEX_NAME "store"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len);

static uint64_t get_u64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
    fz_part part[FZ_MAX_PARTS];
    size_t n = fz_split(data, len, part, FZ_MAX_PARTS);
    fz_clear();

    uint8_t *index = malloc(part[0].len ? part[0].len : 1);
    if (!index)
        abort();
    memcpy(index, part[0].data, part[0].len);
    if (part[0].len >= 8) {
        size_t body = part[0].len - 4;
        uLong crc = crc32(0L, index, (uInt)body);
        for (int i = 0; i < 4; i++)
            index[body + (size_t)i] = (uint8_t)(crc >> (8 * i));
    }
    char path[256], stripe[512];
    fz_write(path, sizeof path, INDEX_NAME, index, part[0].len);
    uint64_t generation = part[0].len >= 24 ? get_u64(index + 16) : 0;
    free(index);
    for (size_t k = 1; k < n; k++) {
        char name[64];
        snprintf(name, sizeof name, "%s.%016llx.%03u", INDEX_NAME,
                 (unsigned long long)generation, (unsigned)(k - 1));
        fz_write(stripe, sizeof stripe, name, part[k].data, part[k].len);
    }

    struct {
        long limit;
        int classes, verify;
    } runs[] = {{0, 0, 0}, {2, 10, 0}, {0, 0, 1}};
    for (size_t r = 0; r < sizeof runs / sizeof runs[0]; r++) {
        st_source *s = NULL;
        st_error err = {0};
        st_status st = st_store_open(&s, path, runs[r].limit, runs[r].classes, runs[r].verify,
                                     NULL, &err);
        fz_check(st, &err, "st_store_open", INDEX_NAME);
        if (st != ST_OK)
            continue;
        if ((runs[r].limit && s->count > runs[r].limit) ||
            (runs[r].classes && s->classes > runs[r].classes))
            abort();
        fz_read_all(s, "store read", INDEX_NAME);
        st_source_close(s);
    }
    return 0;
}
