/* Utilities: SHA-256 against the FIPS 180-4 example vectors, RNG invariants, atomic files. */
#include "test.h"
#include "util/alloc.h"
#include "util/error.h"
#include "util/fsutil.h"
#include "util/rng.h"
#include "util/sha256.h"

#include <stdlib.h>

static void sha256_hex_of(const void *data, size_t n, char out[65]) {
    ftl_sha256 h;
    uint8_t d[32];
    ftl_sha256_init(&h);
    ftl_sha256_update(&h, data, n);
    ftl_sha256_final(&h, d);
    ftl_sha256_hex(d, out);
}

TEST(sha256_known_vectors) {
    char hex[65];
    sha256_hex_of("", 0, hex);
    CHECK_STR_EQ(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    sha256_hex_of("abc", 3, hex);
    CHECK_STR_EQ(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    const char *two_blocks = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    sha256_hex_of(two_blocks, strlen(two_blocks), hex);
    CHECK_STR_EQ(hex, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

TEST(sha256_streaming_equals_one_shot) {
    /* A million 'a's, fed in uneven pieces: the FIPS long-message vector. */
    char *buf = malloc(1000000);
    memset(buf, 'a', 1000000);
    ftl_sha256 h;
    uint8_t d[32];
    char hex[65];
    ftl_sha256_init(&h);
    size_t off = 0, step = 1;
    while (off < 1000000) {
        size_t n = step < 1000000 - off ? step : 1000000 - off;
        ftl_sha256_update(&h, buf + off, n);
        off += n;
        step = step * 3 % 1013 + 1;
    }
    ftl_sha256_final(&h, d);
    ftl_sha256_hex(d, hex);
    CHECK_STR_EQ(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
    free(buf);
}

/* The SHA-extension rounds against the portable ones: the known vectors, and pseudo-random data of
 * every length around the block edges fed whole and in pieces. */
TEST(sha256_extensions_equal_portable_rounds) {
    if (!ftl_sha256_use_extensions(true)) {
        ftl_test_skip("sha256_extensions_equal_portable_rounds", "this CPU has no SHA extensions: only the portable rounds run");
        return;
    }
    char hex[65], want[65];
    sha256_hex_of("abc", 3, hex);
    CHECK_STR_EQ(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    enum { MAX = 4099 };
    uint8_t *data = malloc(MAX);
    uint64_t x = 7;
    for (int i = 0; i < MAX; i++) data[i] = (uint8_t)(ftl_splitmix64(&x) >> 56);
    for (size_t n = 0; n < MAX; n += n < 200 ? 1 : 61) {
        ftl_sha256_use_extensions(false);
        sha256_hex_of((const char *)data, n, want);
        ftl_sha256_use_extensions(true);
        sha256_hex_of((const char *)data, n, hex);
        CHECK_STR_EQ(hex, want);
        ftl_sha256 h; /* in two uneven pieces */
        uint8_t d[32];
        ftl_sha256_init(&h);
        ftl_sha256_update(&h, data, n / 3);
        ftl_sha256_update(&h, data + n / 3, n - n / 3);
        ftl_sha256_final(&h, d);
        ftl_sha256_hex(d, hex);
        CHECK_STR_EQ(hex, want);
    }
    free(data);
}

TEST(splitmix64_matches_reference_sequence) {
    /* First outputs of splitmix64 from state 0 (the generator's published test values). */
    uint64_t x = 0;
    CHECK(ftl_splitmix64(&x) == 0xE220A8397B1DCDAFull);
    CHECK(ftl_splitmix64(&x) == 0x6E789E6AA1B965F4ull);
    CHECK(ftl_splitmix64(&x) == 0x06C45D188009454Full);
}

TEST(rng_is_deterministic_and_unbiased_shuffle_is_permutation) {
    ftl_rng a, b;
    ftl_rng_seed(&a, 42);
    ftl_rng_seed(&b, 42);
    for (int i = 0; i < 100; i++) CHECK(ftl_rng_next(&a) == ftl_rng_next(&b));
    uint32_t items[1000];
    for (uint32_t i = 0; i < 1000; i++) items[i] = i;
    ftl_rng_shuffle_u32(&a, items, 1000);
    int seen[1000] = {0}, fixed_points = 0;
    for (uint32_t i = 0; i < 1000; i++) {
        REQUIRE(items[i] < 1000);
        seen[items[i]]++;
        fixed_points += items[i] == i;
    }
    for (int i = 0; i < 1000; i++) CHECK_EQ_INT(seen[i], 1);
    CHECK(fixed_points < 10); /* expected 1 for a random permutation */
    /* Uniformity of ftl_rng_below: 60000 draws over 6 bins, each within 5 sigma of 10000. */
    int bins[6] = {0};
    for (int i = 0; i < 60000; i++) bins[ftl_rng_below(&a, 6)]++;
    for (int i = 0; i < 6; i++) CHECK(abs(bins[i] - 10000) < 5 * 91);
}

TEST(atomic_file_appears_only_on_commit) {
    const char *dir = ftl_test_scratch_dir();
    char *path = ftl_format("%s/out.bin", dir);
    ftl_atomic_file f;
    REQUIRE_OK(ftl_atomic_open(&f, path));
    CHECK_OK(ftl_write_all(f.fp, "hello", 5, path));
    CHECK(!ftl_path_exists(path));
    char *temp = ftl_strdup(f.temp_path);
    CHECK(ftl_path_exists(temp));
    CHECK_OK(ftl_atomic_commit(&f));
    CHECK(ftl_path_exists(path));
    CHECK(!ftl_path_exists(temp));
    uint8_t *data;
    size_t n;
    CHECK_OK(ftl_read_file(path, &data, &n));
    CHECK_EQ_INT(n, 5);
    CHECK(memcmp(data, "hello", 5) == 0);
    free(data);
    /* An aborted write leaves the previous file untouched and no temporary. */
    REQUIRE_OK(ftl_atomic_open(&f, path));
    free(temp);
    temp = ftl_strdup(f.temp_path);
    CHECK_OK(ftl_write_all(f.fp, "xx", 2, path));
    ftl_atomic_abort(&f);
    CHECK(!ftl_path_exists(temp));
    CHECK_OK(ftl_read_file(path, &data, &n));
    CHECK_EQ_INT(n, 5);
    free(data);
    free(temp);
    free(path);
}

TEST(error_context_is_prepended) {
    ftl_status st = ftl_fail(FTL_E_FORMAT, "page header truncated");
    st = ftl_fail_context(st, "column '%s'", "image");
    st = ftl_fail_context(st, "%s: row group %d", "data.parquet", 3);
    CHECK_EQ_INT(st, FTL_E_FORMAT);
    CHECK_STR_EQ(ftl_last_error(), "data.parquet: row group 3: column 'image': page header truncated");
    CHECK_EQ_INT(ftl_status_exit_code(FTL_E_NOT_FOUND), 2);
    CHECK_EQ_INT(ftl_status_exit_code(FTL_E_FORMAT), 1);
    ftl_status missing = ftl_read_file("/nonexistent/ftl/file", &(uint8_t *){0}, &(size_t){0});
    CHECK_EQ_INT(missing, FTL_E_NOT_FOUND);
    CHECK_CONTAINS(ftl_last_error(), "/nonexistent/ftl/file");
}
