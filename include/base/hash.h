/* FNV-1a, 64 bits: the hashes that identify a network (net.h) and what the
 * ranks of a multi-node run compare at start (train.h). Not cryptographic:
 * it tells apart what differs by mistake, not by design. */
#ifndef ST_HASH_H
#define ST_HASH_H

#include <stddef.h>
#include <stdint.h>

#define ST_HASH_START 0xcbf29ce484222325ULL

/* h extended by data [len] bytes; start from ST_HASH_START. */
uint64_t st_hash_bytes(uint64_t h, const void *data, size_t len);

/* h extended by the string s and its terminating zero (so that "ab" + "c"
 * and "a" + "bc" differ). */
uint64_t st_hash_string(uint64_t h, const char *s);

#endif
