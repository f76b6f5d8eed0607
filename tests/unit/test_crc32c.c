/* CRC-32C on both code paths (tables, SSE4.2) against published values and a bit-at-a-time
 * reference written from the definition, over lengths and alignments that cross every branch. */
#include "test.h"
#include "train_test_util.h"
#include "util/crc32c.h"
#include "util/rng.h"

#include <stdint.h>
#include <stdlib.h>


typedef uint32_t (*crc_fn)(uint32_t, const void *, size_t);

/* Whether the path can run here; a skip line when it cannot. */
static bool path_runs(const char *name) {
    if (strcmp(name, "hardware") != 0 || ftl_crc32c_hardware_available()) return true;
    ftl_test_skip(name, "this CPU has no SSE4.2 crc32 instruction");
    return false;
}

static void check_known_values(crc_fn crc, const char *name) {
    if (!path_runs(name)) return;
    /* "123456789" is the standard check value; the 32-byte vectors are RFC 3720's (iSCSI), B.4. */
    CHECK_EQ_INT(crc(0, "123456789", 9), 0xE3069283u);
    CHECK_EQ_INT(crc(0, "", 0), 0);
    uint8_t v[32];
    memset(v, 0, sizeof v);
    CHECK_EQ_INT(crc(0, v, 32), 0x8A9136AAu);
    memset(v, 0xff, sizeof v);
    CHECK_EQ_INT(crc(0, v, 32), 0x62A8AB43u);
    for (int i = 0; i < 32; i++) v[i] = (uint8_t)i;
    CHECK_EQ_INT(crc(0, v, 32), 0x46DD794Eu);
    for (int i = 0; i < 32; i++) v[i] = (uint8_t)(31 - i);
    CHECK_EQ_INT(crc(0, v, 32), 0x113FDB5Cu);
}

TEST(crc32c_known_values_portable) { check_known_values(ftl_crc32c_portable, "portable"); }
TEST(crc32c_known_values_hardware) { check_known_values(ftl_crc32c_hardware, "hardware"); }
TEST(crc32c_known_values_dispatch) { check_known_values(ftl_crc32c, "dispatch"); }

/* Random bytes at every offset 0..7 and lengths around the 8-byte words and the hardware path's
 * three 4 KiB streams (12288 bytes a round), each against the bitwise reference, in one call and
 * split in two at an uneven point. */
static void check_against_bitwise(crc_fn crc, const char *name) {
    if (!path_runs(name)) return;
    enum { MAX = 3 * 3 * 4096 + 64 };
    uint8_t *buf = malloc(MAX + 8);
    ftl_rng rng;
    ftl_rng_seed(&rng, 46);
    for (size_t i = 0; i < MAX + 8; i++) buf[i] = (uint8_t)ftl_rng_next(&rng);
    static const size_t lengths[] = {1, 7, 8, 9, 15, 16, 63, 4095, 4096, 12287, 12288, 12289, 12295, 24576, 24583, MAX};
    int mismatches = 0;
    for (size_t li = 0; li < sizeof lengths / sizeof lengths[0]; li++)
        for (size_t offset = 0; offset < 8; offset++) {
            const uint8_t *p = buf + offset;
            size_t n = lengths[li];
            uint32_t want = crc32c_bitwise(p, n), split = n / 3 + 1 < n ? n / 3 + 1 : n;
            uint32_t whole = crc(0, p, n), joined = crc(crc(0, p, split), p + split, n - split);
            if (whole != want || joined != want) {
                if (mismatches++ < 5)
                    ftl_test_fail(__FILE__, __LINE__, "%s: %zu bytes at offset %zu: %08x (split %08x), the definition %08x",
                                  name, n, offset, whole, joined, want);
            }
        }
    CHECK_EQ_INT(mismatches, 0);
    free(buf);
}

TEST(crc32c_matches_bitwise_definition_portable) { check_against_bitwise(ftl_crc32c_portable, "portable"); }
TEST(crc32c_matches_bitwise_definition_hardware) { check_against_bitwise(ftl_crc32c_hardware, "hardware"); }
TEST(crc32c_matches_bitwise_definition_dispatch) { check_against_bitwise(ftl_crc32c, "dispatch"); }
