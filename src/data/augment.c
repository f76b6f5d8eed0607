/* Augmentation draws: which rows are flipped. A pure function of (seed, pass, dataset row), so the
 * feature cache (which picks a row's stored orientation) and the per-batch backbone (which flips
 * the image itself) make the same choice, under any number of ranks and after any resume. */
#include "ftl/loader.h"
#include "util/rng.h"

bool ftl_augment_flip_draw(uint64_t seed, int64_t pass, int64_t row) {
    uint64_t x = seed ^ 0x9E3779B97F4A7C15ull;
    x = ftl_splitmix64(&x) ^ ((uint64_t)pass * 0xD6E8FEB86659FD93ull);
    x = ftl_splitmix64(&x) ^ (uint64_t)row;
    return (ftl_splitmix64(&x) >> 63) != 0;
}
