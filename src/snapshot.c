/* Snapshot files: header + weights; see snapshot.h.
 *
 * Layout (little-endian): magic "STSNAPSH", u32 version, u32 header bytes,
 * u64 network hash, u64 iteration, u64 float count, u32 CRC-32 of the
 * payload, u32 zero; then count floats. */
#include "snapshot.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <zlib.h>

#include "fileio.h"

static const char MAGIC[8] = {'S', 'T', 'S', 'N', 'A', 'P', 'S', 'H'};

typedef struct snapshot_header {
    char magic[8];
    uint32_t version;
    uint32_t header_bytes;
    uint64_t net_hash;
    uint64_t iteration;
    uint64_t count;
    uint32_t crc;
    uint32_t zero;
} snapshot_header;

typedef struct snapshot_out {
    const char *path;
    snapshot_header h;
    const float *weights;
} snapshot_out;

static uint32_t crc_of(const float *w, size_t count)
{
    uLong crc = crc32(0L, Z_NULL, 0);
    const unsigned char *p = (const unsigned char *)w;
    size_t bytes = count * sizeof *w;
    while (bytes) {
        uInt chunk = bytes > (1u << 30) ? (1u << 30) : (uInt)bytes;
        crc = crc32(crc, p, chunk);
        p += chunk;
        bytes -= chunk;
    }
    return (uint32_t)crc;
}

static st_status write_snapshot(FILE *f, void *ctx, st_error *err)
{
    snapshot_out *o = ctx;
    st_status st = st_fwrite(f, &o->h, sizeof o->h, o->path, err);
    if (st == ST_OK)
        st = st_fwrite(f, o->weights, (size_t)o->h.count * sizeof(float), o->path, err);
    return st;
}

st_status st_snapshot_save(const char *path, const st_net *net, const float *weights,
                           long iteration, st_error *err)
{
    snapshot_out o = {path, {{0}, 0, 0, 0, 0, 0, 0, 0}, weights};
    memcpy(o.h.magic, MAGIC, sizeof MAGIC);
    o.h.version = ST_SNAPSHOT_VERSION;
    o.h.header_bytes = sizeof o.h;
    o.h.net_hash = st_net_hash(net);
    o.h.iteration = (uint64_t)iteration;
    o.h.count = net->params.count;
    o.h.crc = crc_of(weights, net->params.count);
    return st_write_atomic(path, write_snapshot, &o, err);
}

st_status st_snapshot_load(const char *path, const st_net *net, float *weights,
                           long *iteration, st_error *err)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return st_fail(err, ST_EINPUT, "%s: cannot open snapshot: %s", path, strerror(errno));
    snapshot_header h;
    st_status st = ST_OK;
    if (fread(&h, sizeof h, 1, f) != 1)
        st = st_fail(err, ST_EINPUT, "%s: truncated snapshot header", path);
    else if (memcmp(h.magic, MAGIC, sizeof MAGIC) != 0)
        st = st_fail(err, ST_EINPUT, "%s: not a singletrain snapshot (bad magic)", path);
    else if (h.version != ST_SNAPSHOT_VERSION || h.header_bytes != sizeof h)
        st = st_fail(err, ST_EINPUT, "%s: snapshot format version %u, expected %u", path,
                     h.version, ST_SNAPSHOT_VERSION);
    else if (h.net_hash != st_net_hash(net) || h.count != net->params.count)
        st = st_fail(err, ST_EINPUT, "%s: snapshot of a different network (hash %016llx, "
                     "this network %016llx)", path, (unsigned long long)h.net_hash,
                     (unsigned long long)st_net_hash(net));
    else if (fread(weights, sizeof(float), (size_t)h.count, f) != h.count)
        st = st_fail(err, ST_EINPUT, "%s: truncated snapshot: expected %llu floats", path,
                     (unsigned long long)h.count);
    else if (fgetc(f) != EOF)
        st = st_fail(err, ST_EINPUT, "%s: trailing bytes after the snapshot", path);
    else if (crc_of(weights, (size_t)h.count) != h.crc)
        st = st_fail(err, ST_EINPUT, "%s: snapshot checksum mismatch: the file is corrupt",
                     path);
    fclose(f);
    if (st == ST_OK && iteration)
        *iteration = (long)h.iteration;
    return st;
}
