/* Deterministic random numbers: xoshiro256** streams seeded through
 * splitmix64, so (seed, stream) pairs give independent reproducible streams
 * (weight init, data order, each dropout mask). No global state. */
#ifndef ST_RNG_H
#define ST_RNG_H

#include <stdint.h>

typedef struct st_rng {
    uint64_t s[4];
} st_rng;

/* A stream determined by (seed, stream); different streams do not overlap in
 * practice. */
void st_rng_seed(st_rng *r, uint64_t seed, uint64_t stream);

uint64_t st_rng_u64(st_rng *r);
float st_rng_uniform(st_rng *r);          /* [0, 1) */
float st_rng_normal(st_rng *r);           /* mean 0, standard deviation 1 */
uint64_t st_rng_below(st_rng *r, uint64_t n); /* [0, n), unbiased */

/* Mix several words into one stream id. */
uint64_t st_rng_mix(uint64_t a, uint64_t b);

#endif
