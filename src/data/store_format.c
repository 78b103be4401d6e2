/* The striped store's format (store_format.h): the block layout's
 * arithmetic, the index's bytes both ways (written by the packer, parsed
 * and checked by the reader), and the checks that the stripe files match an
 * index: their exact lengths, and every block's CRC, read back by min(N, 4)
 * threads each reading whole stripes with pread. The reader runs them at
 * open (the CRCs with verify=1), the packer on the stripes it has just
 * written. */
#include "store_format.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "base/fileio.h"
#include "data/store.h"

#define VERIFY_THREADS 4
#define VERIFY_PIECE ((size_t)1 << 20)         /* bytes read per pread */

/* ------------------------------------------------------------------ layout */

uint64_t store_block_used(const store_layout *L, uint64_t b)
{
    uint64_t first = b * L->per_block, n = L->count - first;
    return (n < L->per_block ? n : L->per_block) * store_record_size(L);
}

static uint64_t stripe_block_count(const store_layout *L, uint32_t k)
{
    return L->blocks > k ? (L->blocks - 1 - k) / L->stripes + 1 : 0;
}

uint64_t store_stripe_bytes(const store_layout *L, uint32_t k)
{
    uint64_t n = stripe_block_count(L, k);
    if (n == 0)
        return 0;
    return (n - 1) * L->unit + store_block_used(L, k + (n - 1) * L->stripes);
}

void store_stripe_name(char *buf, size_t size, const char *index, uint64_t generation,
                       uint32_t k)
{
    snprintf(buf, size, "%s.%016llx.%03u", index, (unsigned long long)generation, k);
}

static void put_u64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static uint64_t get_u64(const unsigned char *p)
{
    return (uint64_t)store_get_u32(p) | (uint64_t)store_get_u32(p + 4) << 32;
}

uint32_t store_crc(uint32_t crc, const unsigned char *p, uint64_t bytes)
{
    uLong c = crc;
    while (bytes) {
        uInt piece = bytes > (1u << 30) ? (1u << 30) : (uInt)bytes;
        c = crc32(c, p, piece);
        p += piece;
        bytes -= piece;
    }
    return (uint32_t)c;
}

/* ------------------------------------------------------------- the index */

unsigned char *store_index_encode(const store_layout *L, size_t *len, st_error *err)
{
    size_t n = HEADER_BYTES + 4 * (size_t)L->blocks + 4;
    unsigned char *d = st_calloc(n, 1, "store index", err);
    if (!d)
        return NULL;
    memcpy(d, ST_STORE_MAGIC, 8);
    store_put_u32(d + 8, ST_STORE_VERSION);
    store_put_u32(d + 12, HEADER_BYTES);
    put_u64(d + 16, L->generation);
    store_put_u32(d + 24, (uint32_t)L->shape.c);
    store_put_u32(d + 28, (uint32_t)L->shape.h);
    store_put_u32(d + 32, (uint32_t)L->shape.w);
    put_u64(d + 36, L->count);
    store_put_u32(d + 44, L->classes);
    store_put_u32(d + 48, L->stripes);
    put_u64(d + 52, L->unit);
    store_put_u32(d + 60, L->per_block);
    put_u64(d + 64, L->blocks);
    for (uint64_t b = 0; b < L->blocks; b++)
        store_put_u32(d + HEADER_BYTES + 4 * b, L->crc[b]);
    store_put_u32(d + n - 4, store_crc(0, d, n - 4));
    *len = n;
    return d;
}

st_status store_index_parse(const char *path, const unsigned char *d, size_t len,
                            store_layout *L, st_error *err)
{
    size_t magic_len = strlen(ST_STORE_MAGIC);
    if (memcmp(d, ST_STORE_MAGIC, len < magic_len ? len : magic_len) != 0)
        return st_fail(err, ST_EINPUT, "%s: not a singletrain store (bad magic; expected \"%s\")",
                       path, ST_STORE_MAGIC);
    if (len < 16)
        return st_fail(err, ST_EINPUT, "%s: truncated index (%zu bytes)", path, len);
    uint32_t version = store_get_u32(d + 8), header = store_get_u32(d + 12);
    if (version != ST_STORE_VERSION)
        return st_fail(err, ST_EINPUT, "%s: store format version %u, expected %u (repack it "
                       "with this singletrain)", path, version, ST_STORE_VERSION);
    if (header != HEADER_BYTES)
        return st_fail(err, ST_EINPUT, "%s: index is corrupt: a header of %u bytes, expected %u",
                       path, header, HEADER_BYTES);
    if (len < HEADER_BYTES + 4)
        return st_fail(err, ST_EINPUT, "%s: truncated index (%zu bytes, the header alone is %u)",
                       path, len, HEADER_BYTES);
    L->generation = get_u64(d + 16);
    uint32_t c = store_get_u32(d + 24), h = store_get_u32(d + 28), w = store_get_u32(d + 32);
    L->shape = (st_shape){(int)c, (int)h, (int)w};
    L->count = get_u64(d + 36);
    L->classes = store_get_u32(d + 44);
    L->stripes = store_get_u32(d + 48);
    L->unit = get_u64(d + 52);
    L->per_block = store_get_u32(d + 60);
    L->blocks = get_u64(d + 64);
    uint64_t want = L->blocks <= MAX_BLOCKS ? HEADER_BYTES + 4 * L->blocks + 4 : 0;
    uint32_t stored = store_get_u32(d + len - 4), crc = store_crc(0, d, len - 4);
    if (crc != stored && len < want)
        return st_fail(err, ST_EINPUT, "%s: truncated index: %zu bytes, the header promises %llu",
                       path, len, (unsigned long long)want);
    if (crc != stored)
        return st_fail(err, ST_EINPUT, "%s: index is corrupt (checksum mismatch)", path);
    if (len != want)
        return st_fail(err, ST_EINPUT, "%s: index is corrupt: %zu bytes, the header promises "
                       "%llu", path, len, (unsigned long long)want);
    uint64_t rec = 4 + (uint64_t)c * h * w;
    const char *bad = NULL;
    if (c < 1 || h < 1 || w < 1 || c > (1u << 20) || h > (1u << 20) || w > (1u << 20) ||
        rec > MAX_RECORD)
        bad = "record shape";
    else if (L->count < 1 || L->classes < 1 || L->classes > (1u << 24))
        bad = "record or class count";
    else if (L->stripes < 1 || L->stripes > MAX_STRIPES)
        bad = "stripe count";
    else if (L->unit < rec || L->unit > MAX_UNIT || L->per_block != L->unit / rec)
        bad = "stripe unit or records per block";
    else if (L->blocks != (L->count - 1) / L->per_block + 1) /* count + R - 1 could wrap */
        bad = "block count";
    if (bad)
        return st_fail(err, ST_EINPUT, "%s: index is corrupt: inconsistent %s", path, bad);
    L->crc = st_calloc(L->blocks, sizeof *L->crc, "store block checksums", err);
    if (!L->crc)
        return ST_ENOMEM;
    for (uint64_t b = 0; b < L->blocks; b++)
        L->crc[b] = store_get_u32(d + HEADER_BYTES + 4 * b);
    return ST_OK;
}

/* ----------------------------------------------------------- the stripes */

void store_stripes_close(int *fds, uint32_t n)
{
    for (uint32_t k = 0; fds && k < n; k++)
        if (fds[k] >= 0) {
            close(fds[k]);
            fds[k] = -1;
        }
}

st_status store_stripes_open(const char *index, const store_layout *L, int *fds,
                             st_error *err)
{
    st_status st = ST_OK;
    char name[4200], why[160];
    for (uint32_t k = 0; st == ST_OK && k < L->stripes; k++) {
        store_stripe_name(name, sizeof name, index, L->generation, k);
        fds[k] = st_open_regular(name, why, sizeof why);
        struct stat sb;
        uint64_t want = store_stripe_bytes(L, k);
        if (fds[k] < 0)
            st = st_fail(err, ST_EINPUT, "%s: missing stripe %u of %u (%s): %s: the store is "
                         "incomplete", index, k, L->stripes, name, why);
        else if (fstat(fds[k], &sb) != 0)
            st = st_fail(err, ST_EIO, "%s: cannot stat stripe %s: %s", index, name,
                         strerror(errno));
        else if ((uint64_t)sb.st_size < want)
            st = st_fail(err, ST_EINPUT, "%s: truncated stripe %u (%s): %llu bytes, the index "
                         "says %llu", index, k, name, (unsigned long long)sb.st_size,
                         (unsigned long long)want);
        else if ((uint64_t)sb.st_size > want)
            st = st_fail(err, ST_EINPUT, "%s: stripe %u (%s) has %llu bytes, the index says "
                         "%llu: the store is corrupt", index, k, name,
                         (unsigned long long)sb.st_size, (unsigned long long)want);
    }
    if (st != ST_OK)
        store_stripes_close(fds, L->stripes);
    return st;
}

typedef struct verify_job {
    const store_layout *L;
    const int *fds;
    const char *index;
    uint32_t first, step; /* stripes first, first + step, ... */
    st_status st;
    st_error err;
} verify_job;

/* Read every block of this job's stripes and compare its CRC. */
static void verify_part(verify_job *j)
{
    const store_layout *L = j->L;
    unsigned char *buf = malloc(VERIFY_PIECE);
    char name[4200];
    if (!buf)
        j->st = st_fail(&j->err, ST_ENOMEM, "out of memory verifying %s", j->index);
    for (uint32_t k = j->first; j->st == ST_OK && k < L->stripes; k += j->step) {
        uint64_t n = stripe_block_count(L, k);
        for (uint64_t i = 0; j->st == ST_OK && i < n; i++) {
            uint64_t b = k + i * L->stripes, used = store_block_used(L, b), done = 0;
            uint32_t crc = 0;
            while (j->st == ST_OK && done < used) {
                size_t want = used - done < VERIFY_PIECE ? (size_t)(used - done) : VERIFY_PIECE;
                ssize_t got = pread(j->fds[k], buf, want, (off_t)(i * L->unit + done));
                if (got < 0 && errno == EINTR)
                    continue;
                store_stripe_name(name, sizeof name, j->index, L->generation, k);
                if (got < 0)
                    j->st = st_fail(&j->err, ST_EIO, "%s: reading stripe %u (%s): %s", j->index,
                                    k, name, strerror(errno));
                else if (got == 0)
                    j->st = st_fail(&j->err, ST_EINPUT, "%s: truncated stripe %u (%s): block "
                                    "%llu ends early", j->index, k, name,
                                    (unsigned long long)b);
                else {
                    crc = store_crc(crc, buf, (uint64_t)got);
                    done += (uint64_t)got;
                }
            }
            if (j->st == ST_OK && crc != L->crc[b]) {
                store_stripe_name(name, sizeof name, j->index, L->generation, k);
                j->st = st_fail(&j->err, ST_EINPUT, "%s: block %llu in stripe %u: checksum "
                                "mismatch: the store is corrupt (%s)", j->index,
                                (unsigned long long)b, k, name);
            }
        }
    }
    free(buf);
}

static void *verify_main(void *arg)
{
    verify_part(arg);
    return NULL;
}

st_status store_blocks_verify(const char *index, const store_layout *L, const int *fds,
                              st_error *err)
{
    uint32_t n = L->stripes < VERIFY_THREADS ? L->stripes : VERIFY_THREADS;
    verify_job jobs[VERIFY_THREADS];
    pthread_t tid[VERIFY_THREADS];
    int started[VERIFY_THREADS] = {0};
    memset(tid, 0, sizeof tid);
    for (uint32_t t = 0; t < n; t++) {
        jobs[t] = (verify_job){L, fds, index, t, n, ST_OK, {0}};
        /* thread 0 is this one; a thread that cannot start runs here too */
        if (t > 0)
            started[t] = pthread_create(&tid[t], NULL, verify_main, &jobs[t]) == 0;
    }
    for (uint32_t t = 0; t < n; t++)
        if (!started[t])
            verify_part(&jobs[t]);
    for (uint32_t t = 0; t < n; t++)
        if (started[t])
            pthread_join(tid[t], NULL);
    for (uint32_t t = 0; t < n; t++)
        if (jobs[t].st != ST_OK) {
            st_fail(err, jobs[t].st, "%s", jobs[t].err.msg);
            return jobs[t].st;
        }
    return ST_OK;
}
