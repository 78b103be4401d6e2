/* The striped store's format, shared by its reader (store_read.c) and its
 * packer (store_pack.c); see store.h for the idea.
 *
 * Files. The index OUT and the stripes OUT.<generation>.<k>, where the
 * generation is 16 lower-case hex digits and k = 0 .. N-1 is printed with at
 * least 3 digits (OUT.00c0ffee12345678.000). A record is an int32
 * little-endian label followed by C x H x W pixel bytes (planar). Block b
 * holds records [b R, min((b + 1) R, count)) with R = floor(unit / record)
 * records per block, and lives in stripe b % N at offset (b / N) x unit.
 * Every block but the last of its stripe is padded with zeros to the full
 * unit (the next block starts there); the last block of a stripe is not
 * padded, so stripe k is exactly (n_k - 1) x unit + used(last block) bytes,
 * n_k being its block count; a stripe without blocks (N > blocks) is an
 * empty file. A block's CRC-32 (zlib) covers its used bytes only, never the
 * padding.
 *
 * Index layout (every integer little-endian, no padding; 72-byte header):
 *     0  magic "STSTORE1" (8 bytes)
 *     8  u32 version (ST_STORE_VERSION)
 *    12  u32 header bytes (72)
 *    16  u64 generation (names the stripes)
 *    24  u32 C, 28 u32 H, 32 u32 W (record shape)
 *    36  u64 record count
 *    44  u32 classes (every label is in [0, classes): written as 1 + the
 *        largest label packed)
 *    48  u32 stripes N
 *    52  u64 stripe unit (bytes)
 *    60  u32 records per block R
 *    64  u64 block count B = ceil(count / R)
 *    72  u32 CRC-32 of each block, B of them
 *    72 + 4 B  u32 CRC-32 of every preceding index byte */
#ifndef ST_STORE_FORMAT_H
#define ST_STORE_FORMAT_H

#include <stddef.h>
#include <stdint.h>

#include "base/shape.h"
#include "base/status.h"

#define HEADER_BYTES 72u
#define MAX_STRIPES 1024u                      /* also --stripes' bound */
#define MAX_RECORD ((uint64_t)1 << 30)         /* bytes of one record */
#define MAX_UNIT ((uint64_t)1 << 40)
#define MAX_BLOCKS ((uint64_t)1 << 28)         /* a 1 GB index */

typedef struct store_layout {
    uint64_t generation;
    st_shape shape;
    uint64_t count;    /* records in the files (a reader's limit is not here) */
    uint32_t classes;
    uint32_t stripes;
    uint64_t unit;
    uint32_t per_block;
    uint64_t blocks;
    uint32_t *crc;     /* [blocks] */
} store_layout;

static inline uint64_t store_record_size(const store_layout *L)
{
    return 4 + (uint64_t)st_shape_count(L->shape);
}

static inline void store_put_u32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static inline uint32_t store_get_u32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Bytes of records in block b. */
uint64_t store_block_used(const store_layout *L, uint64_t b);

/* The exact length of stripe k: padded blocks, then the unpadded last one. */
uint64_t store_stripe_bytes(const store_layout *L, uint32_t k);

/* "INDEX.<generation>.<k>" into buf [size]. */
void store_stripe_name(char *buf, size_t size, const char *index, uint64_t generation,
                       uint32_t k);

/* crc continued over bytes of p (zlib's CRC-32, any length). */
uint32_t store_crc(uint32_t crc, const unsigned char *p, uint64_t bytes);

/* The index of L (header, block CRCs, its own CRC): *len bytes, malloc'd. */
unsigned char *store_index_encode(const store_layout *L, size_t *len, st_error *err);

/* Check an index's len bytes (read from path) and fill L (L->crc
 * allocated). */
st_status store_index_parse(const char *path, const unsigned char *d, size_t len,
                            store_layout *L, st_error *err);

/* Open every stripe of the store whose index is at index read-only into
 * fds [L->stripes] and check its exact length. fds[] must hold -1s; on
 * failure the opened ones are closed again. */
st_status store_stripes_open(const char *index, const store_layout *L, int *fds,
                             st_error *err);

/* Close the open ones of fds [n] (NULL: none), leaving -1s. */
void store_stripes_close(int *fds, uint32_t n);

/* Check every block's CRC, min(stripes, 4) threads reading whole stripes.
 * The reported failure is that of the lowest-numbered failing thread. */
st_status store_blocks_verify(const char *index, const store_layout *L, const int *fds,
                              st_error *err);

#endif
