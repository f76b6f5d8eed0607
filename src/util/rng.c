/* xoshiro256** (Blackman & Vigna) with splitmix64 seeding. */
#include "util/rng.h"

uint64_t ftl_splitmix64(uint64_t *state) {
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

void ftl_rng_seed(ftl_rng *rng, uint64_t seed) {
    uint64_t x = seed;
    for (int i = 0; i < 4; i++) rng->s[i] = ftl_splitmix64(&x);
}

static inline uint64_t rotate_left(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t ftl_rng_next(ftl_rng *rng) {
    uint64_t *s = rng->s;
    uint64_t result = rotate_left(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotate_left(s[3], 45);
    return result;
}

uint64_t ftl_rng_below(ftl_rng *rng, uint64_t bound) {
    /* Rejection sampling: discard draws from the incomplete last copy of [0, bound). */
    uint64_t limit = UINT64_MAX - UINT64_MAX % bound;
    uint64_t x;
    do x = ftl_rng_next(rng);
    while (x >= limit);
    return x % bound;
}

float ftl_rng_uniform(ftl_rng *rng) { return (float)(ftl_rng_next(rng) >> 40) * (1.0f / 16777216.0f); }

void ftl_rng_shuffle_u32(ftl_rng *rng, uint32_t *items, size_t n) {
    for (size_t i = n; i > 1; i--) {
        size_t j = (size_t)ftl_rng_below(rng, i);
        uint32_t t = items[i - 1];
        items[i - 1] = items[j];
        items[j] = t;
    }
}
