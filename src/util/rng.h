/* Seedable, serialisable random numbers (xoshiro256** seeded by splitmix64): the same seed gives
 * the same shuffles, dropout masks and initial weights on every machine and thread count. */
#ifndef FTL_UTIL_RNG_H
#define FTL_UTIL_RNG_H

#include <stddef.h>
#include <stdint.h>

typedef struct ftl_rng {
    uint64_t s[4];
} ftl_rng;

uint64_t ftl_splitmix64(uint64_t *state);
void ftl_rng_seed(ftl_rng *rng, uint64_t seed);
uint64_t ftl_rng_next(ftl_rng *rng);
/* Uniform integer in [0, bound), without modulo bias; bound > 0. */
uint64_t ftl_rng_below(ftl_rng *rng, uint64_t bound);
/* Uniform float in [0, 1) with 24 random bits. */
float ftl_rng_uniform(ftl_rng *rng);
/* Fisher-Yates shuffle of n indices. */
void ftl_rng_shuffle_u32(ftl_rng *rng, uint32_t *items, size_t n);

#endif
