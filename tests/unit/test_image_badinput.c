/* Bad input: the malformed files gen_image.py makes (error or not as Pillow decides, with a clear
 * message), the hymenoptera GIF placeholder, truncation sweeps and seeded corruption of valid
 * files. Run under ASan+UBSan too, so "no crash" includes no out-of-bounds access. */
#include "image_ref.h"
#include "test.h"
#include "ftl/image.h"
#include "util/alloc.h"
#include "util/fsutil.h"
#include "util/rng.h"

#include <stdlib.h>

static uint8_t *read_path(const char *path, size_t *size) {
    uint8_t *data = NULL;
    if (ftl_read_file(path, &data, size) != FTL_OK) {
        ftl_test_fail(__FILE__, __LINE__, "cannot read %s: %s", path, ftl_last_error());
        return NULL;
    }
    return data;
}

static uint8_t *read_ref(const char *rel, size_t *size) {
    char *path = ftl_format("%s/ref/image/%s", ftl_test_build_dir(), rel);
    uint8_t *d = read_path(path, size);
    free(path);
    return d;
}

TEST(image_gif_placeholder_is_refused_with_documented_message) {
    char *path = ftl_format("%s/data/hymenoptera/train/ants/imageNotFound.gif", ftl_test_shared_dir());
    size_t n;
    uint8_t *data = read_path(path, &n);
    free(path);
    REQUIRE(data);
    ftl_image_prepper *p;
    REQUIRE_OK(ftl_image_prepper_init(&p, 299));
    uint8_t *canvas = ftl_xmalloc(299 * 299 * 3);
    memset(canvas, 1, 299 * 299 * 3);
    ftl_image_info info;
    CHECK_EQ_INT(ftl_image_prepper_run(p, data, n, canvas, &info), FTL_E_UNSUPPORTED);
    CHECK_STR_EQ(ftl_last_error(), "unsupported image format GIF (ftl reads JPEG and PNG)");
    CHECK_EQ_INT(info.format, FTL_IMAGE_FORMAT_GIF);
    CHECK_EQ_INT(canvas[0], 1); /* untouched on failure */
    ftl_image img = {0};
    CHECK_EQ_INT(ftl_image_decode_rgb(data, n, &img), FTL_E_UNSUPPORTED);
    free(canvas);
    free(data);
    ftl_image_prepper_free(p);
}

/* Expected status and message fragment for each malformed file (NULL: any error). */
static const struct {
    const char *name;
    ftl_status status;
    const char *message;
} bad_expect[] = {
    {"empty.jpg", FTL_E_FORMAT, "empty file (0 bytes)"},
    {"random.bin", FTL_E_FORMAT, "not an image"},
    {"jpeg_soi_only.jpg", FTL_E_FORMAT, "JPEG"},
    {"jpeg_cut_header.jpg", FTL_E_FORMAT, "JPEG"},
    {"jpeg_cut_10pct.jpg", FTL_E_FORMAT, "truncated JPEG: premature end of data"},
    {"jpeg_cut_50pct.jpg", FTL_E_FORMAT, "truncated JPEG: premature end of data"},
    {"jpeg_cut_90pct.jpg", FTL_E_FORMAT, "truncated JPEG: premature end of data"},
    {"jpeg_no_eoi.jpg", FTL_E_FORMAT, "truncated JPEG: premature end of data"},
    {"jpeg_cut_last_byte.jpg", FTL_E_FORMAT, "truncated JPEG: premature end of data"},
    {"jpeg_progressive_cut_50pct.jpg", FTL_E_FORMAT, "truncated JPEG"},
    {"jpeg_progressive_no_eoi.jpg", FTL_E_FORMAT, "truncated JPEG"},
    {"jpeg_header_then_garbage.jpg", FTL_E_FORMAT, "JPEG"},
    {"jpeg_magic_then_garbage.jpg", FTL_E_FORMAT, "JPEG"},
    {"jpeg_dims_over_limit.jpg", FTL_E_UNSUPPORTED, "image too large: 20000x20000"},
    {"jpeg_claims_too_many_pixels.jpg", FTL_E_FORMAT, "truncated JPEG: the header says 10000x10000"},
    {"png_signature_only.png", FTL_E_FORMAT, "corrupt PNG"},
    {"png_cut_in_ihdr.png", FTL_E_FORMAT, "corrupt PNG"},
    {"png_cut_50pct.png", FTL_E_FORMAT, "truncated PNG"},
    {"png_bad_crc_ihdr.png", FTL_E_FORMAT, "CRC"},
    {"png_header_then_garbage.png", FTL_E_FORMAT, "PNG"},
    {"png_dims_over_limit.png", FTL_E_FORMAT, "PNG"},
    {"other.gif", FTL_E_UNSUPPORTED, "unsupported image format GIF (ftl reads JPEG and PNG)"},
    {"other.bmp", FTL_E_UNSUPPORTED, "unsupported image format BMP"},
    {"other.tif", FTL_E_UNSUPPORTED, "unsupported image format TIFF"},
    {"other.webp", FTL_E_UNSUPPORTED, "unsupported image format WEBP"},
    /* Pillow decodes these (libjpeg/zlib recover or the damage is outside what it checks). */
    {"jpeg_bitflip_data.jpg", FTL_OK, NULL},
    {"jpeg_bitflip_many.jpg", FTL_OK, NULL},
    {"jpeg_trailing_garbage.jpg", FTL_OK, NULL},
    {"png_bad_crc_idat.png", FTL_OK, NULL},
    {"png_no_iend.png", FTL_OK, NULL},
    {"png_cut_iend_crc.png", FTL_OK, NULL},
};

TEST(image_malformed_files_fail_like_pillow_with_clear_messages) {
    image_ref_row *rows;
    int n = image_ref_load("bad", &rows);
    ftl_image_prepper *p;
    REQUIRE_OK(ftl_image_prepper_init(&p, 299));
    uint8_t *canvas = ftl_xmalloc(299 * 299 * 3), *want = ftl_xmalloc(299 * 299 * 3);
    int seen = 0;
    for (size_t e = 0; e < sizeof bad_expect / sizeof bad_expect[0]; e++) {
        const image_ref_row *r = NULL;
        for (int i = 0; i < n; i++)
            if (!strcmp(rows[i].path + 4, bad_expect[e].name)) r = &rows[i];
        if (!r) {
            ftl_test_fail(__FILE__, __LINE__, "bad/%s missing from recipe.tsv", bad_expect[e].name);
            continue;
        }
        seen++;
        size_t size;
        uint8_t *data = read_ref(r->path, &size);
        if (!data) continue;
        ftl_image_info info;
        ftl_status st = ftl_image_prepper_run(p, data, size, canvas, &info);
        free(data);
        const char *msg = ftl_last_error();
        printf("  info: %-34s Pillow: %-5s ftl: %s%s%s\n", bad_expect[e].name, r->ok ? "ok" : "error",
               ftl_status_name(st), st ? " - " : info.warning[0] ? " (libjpeg: " : "",
               st ? msg : info.warning[0] ? info.warning : "");
        if (st != bad_expect[e].status) {
            ftl_test_fail(__FILE__, __LINE__, "%s: status %s, expected %s (%s)", bad_expect[e].name,
                          ftl_status_name(st), ftl_status_name(bad_expect[e].status), msg);
            continue;
        }
        if (bad_expect[e].message) CHECK_CONTAINS(msg, bad_expect[e].message);
        /* Pillow's verdict agrees, except where ftl refuses formats on purpose. */
        bool other = !strncmp(bad_expect[e].name, "other.", 6);
        if (!other && (st == FTL_OK) != r->ok)
            ftl_test_fail(__FILE__, __LINE__, "%s: Pillow %s, ftl %s", bad_expect[e].name,
                          r->ok ? "decodes it" : r->note, ftl_status_name(st));
        if (st == FTL_OK && r->ok) { /* recovered files give Pillow's pixels */
            CHECK(image_ref_read("recipe.bin", r->offset, want, 299 * 299 * 3));
            pixel_diff d = pixel_diff_of(canvas, want, 299 * 299 * 3);
            if (d.differing)
                ftl_test_fail(__FILE__, __LINE__, "%s: %zu bytes differ from Pillow (max %d)",
                              bad_expect[e].name, d.differing, d.max_abs);
        }
    }
    CHECK_EQ_INT(seen, n); /* every malformed file has an expectation */
    free(canvas);
    free(want);
    free(rows);
    ftl_image_prepper_free(p);
}

/* Every strict prefix of a JPEG lacks its end-of-image marker: always "truncated" (as Pillow).
 * A PNG prefix either fails or, when only the ending is cut, decodes to the full image. */
TEST(image_truncation_sweep_fails_cleanly) {
    const char *files[] = {"synth/baseline_420.jpg", "synth/progressive.jpg", "synth/cmyk.jpg",
                           "synth/gray.jpg", "synth/rgb.png", "synth/interlaced_rgb.png",
                           "synth/palette_trns.png", "synth/rgb16.png", "synth/tiny_1x1.png"};
    ftl_image_prepper *p;
    REQUIRE_OK(ftl_image_prepper_init(&p, 64));
    uint8_t *full = ftl_xmalloc(64 * 64 * 3), *cut = ftl_xmalloc(64 * 64 * 3);
    int errors = 0, recovered = 0;
    for (size_t f = 0; f < sizeof files / sizeof files[0]; f++) {
        size_t n;
        uint8_t *data = read_ref(files[f], &n);
        if (!data) continue;
        REQUIRE_OK(ftl_image_prepper_run(p, data, n, full, NULL));
        bool jpeg = ftl_image_sniff(data, n) == FTL_IMAGE_FORMAT_JPEG;
        size_t step = n / 23 + 1;
        for (size_t len = 0; len < n; len += (len + 16 >= n || len < 64) ? 1 : step) {
            uint8_t *copy = ftl_xmalloc(len ? len : 1); /* exact size: ASan sees any overread */
            memcpy(copy, data, len);
            ftl_status st = ftl_image_prepper_run(p, copy, len, cut, NULL);
            free(copy);
            if (st == FTL_OK) {
                recovered++;
                if (jpeg) ftl_test_fail(__FILE__, __LINE__, "%s cut to %zu bytes decoded", files[f], len);
                else if (memcmp(cut, full, 64 * 64 * 3))
                    ftl_test_fail(__FILE__, __LINE__, "%s cut to %zu bytes decoded to other pixels",
                                  files[f], len);
                continue;
            }
            errors++;
            CHECK(st == FTL_E_FORMAT);
            CHECK(ftl_last_error()[0] != 0);
            if (jpeg && len > 400) CHECK_CONTAINS(ftl_last_error(), "truncated JPEG");
        }
        free(data);
    }
    printf("  info: %d truncated prefixes refused, %d PNG prefixes missing only their ending decoded\n",
           errors, recovered);
    CHECK(errors > 300);
    free(full);
    free(cut);
    ftl_image_prepper_free(p);
}

/* Seeded random damage (bit flips, overwritten runs, zeroed headers) to valid files: decode or
 * fail with a message, never crash (checked for memory errors under ASan), and leave the
 * prepper in a state that decodes the undamaged file exactly as before. */
TEST(image_random_corruption_never_crashes) {
    const char *files[] = {"synth/baseline_444.jpg", "synth/progressive.jpg", "synth/gray.jpg",
                           "synth/rgba.png", "synth/interlaced_palette1.png", "synth/gray16.png"};
    ftl_rng rng;
    ftl_rng_seed(&rng, 1234);
    ftl_image_prepper *p;
    REQUIRE_OK(ftl_image_prepper_init(&p, 48));
    uint8_t *canvas = ftl_xmalloc(48 * 48 * 3), *clean = ftl_xmalloc(48 * 48 * 3);
    uint8_t *again = ftl_xmalloc(48 * 48 * 3);
    int ok = 0, failed = 0;
    for (size_t f = 0; f < sizeof files / sizeof files[0]; f++) {
        size_t n;
        uint8_t *data = read_ref(files[f], &n);
        if (!data) continue;
        REQUIRE_OK(ftl_image_prepper_run(p, data, n, clean, NULL));
        for (int trial = 0; trial < 40; trial++) {
            uint8_t *copy = ftl_xmalloc(n);
            memcpy(copy, data, n);
            int kind = trial % 4;
            /* Bias damage toward the headers, where parsers make their decisions. */
            size_t span = kind == 0 ? (n < 1024 ? n : 1024) : n;
            int flips = 1 + (int)ftl_rng_below(&rng, 8);
            for (int i = 0; i < flips; i++) {
                size_t at = ftl_rng_below(&rng, span);
                if (kind == 3) copy[at] = (uint8_t)ftl_rng_next(&rng);
                else copy[at] ^= (uint8_t)(1u << ftl_rng_below(&rng, 8));
            }
            if (kind == 2) {
                size_t at = ftl_rng_below(&rng, n), len = ftl_rng_below(&rng, 64);
                for (size_t i = at; i < at + len && i < n; i++) copy[i] = 0xFF;
            }
            ftl_status st = ftl_image_prepper_run(p, copy, n, canvas, NULL);
            if (st == FTL_OK) ok++;
            else {
                failed++;
                CHECK(st == FTL_E_FORMAT || st == FTL_E_UNSUPPORTED);
                CHECK(ftl_last_error()[0] != 0);
                /* A failure must not leak into the next file (TurboJPEG handles do if reused). */
                if (ftl_image_prepper_run(p, data, n, again, NULL) != FTL_OK || memcmp(again, clean, 48 * 48 * 3))
                    ftl_test_fail(__FILE__, __LINE__, "%s: after a failed decode (%s) the clean file "
                                  "decodes differently", files[f], ftl_status_name(st));
            }
            free(copy);
        }
        free(data);
    }
    printf("  info: corrupted files: %d decoded anyway, %d refused\n", ok, failed);
    CHECK_EQ_INT(ok + failed, 240);
    free(canvas);
    free(clean);
    free(again);
    ftl_image_prepper_free(p);
}
