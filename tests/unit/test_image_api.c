/* Image module API: format sniffing, thumbnail sizes (values from Pillow 9.4's thumbnail()),
 * argument checks, the info the prepper reports. */
#include "test.h"
#include "ftl/image.h"
#include "image/image_internal.h"
#include "util/alloc.h"
#include "util/fsutil.h"

#include <stdlib.h>

TEST(image_sniff_by_magic_bytes) {
    static const struct {
        const char *bytes;
        size_t n;
        ftl_image_format want;
    } cases[] = {
        {"\xff\xd8\xff\xe0", 4, FTL_IMAGE_FORMAT_JPEG},
        {"\x89PNG\r\n\x1a\n", 8, FTL_IMAGE_FORMAT_PNG},
        {"GIF89a", 6, FTL_IMAGE_FORMAT_GIF},
        {"GIF87a", 6, FTL_IMAGE_FORMAT_GIF},
        {"BM\x36\x00", 4, FTL_IMAGE_FORMAT_BMP},
        {"RIFF\x10\0\0\0WEBPVP8 ", 16, FTL_IMAGE_FORMAT_WEBP},
        {"II*\0", 4, FTL_IMAGE_FORMAT_TIFF},
        {"MM\0*", 4, FTL_IMAGE_FORMAT_TIFF},
        {"\x89PNG\r\n\x1a", 7, FTL_IMAGE_FORMAT_UNKNOWN}, /* cut signature */
        {"\xff\xd8", 2, FTL_IMAGE_FORMAT_UNKNOWN},
        {"RIFF\x10\0\0\0WAVE", 12, FTL_IMAGE_FORMAT_UNKNOWN},
        {"hello", 5, FTL_IMAGE_FORMAT_UNKNOWN},
        {"", 0, FTL_IMAGE_FORMAT_UNKNOWN},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        CHECK_EQ_INT(ftl_image_sniff((const uint8_t *)cases[i].bytes, cases[i].n), cases[i].want);
    CHECK_EQ_INT(ftl_image_sniff(NULL, 10), FTL_IMAGE_FORMAT_UNKNOWN);
    CHECK_STR_EQ(ftl_image_format_name(FTL_IMAGE_FORMAT_JPEG), "JPEG");
    CHECK_STR_EQ(ftl_image_format_name(FTL_IMAGE_FORMAT_GIF), "GIF");
    CHECK_STR_EQ(ftl_image_format_name(FTL_IMAGE_FORMAT_UNKNOWN), "unknown");
    CHECK_STR_EQ(ftl_image_format_name((ftl_image_format)99), "unknown");
}

TEST(image_thumbnail_size_matches_pillow) {
    /* (w, h, S) -> Image.new('RGB', (w, h)).thumbnail((S, S)) in Pillow 9.4 */
    static const int cases[][5] = {
        {3000, 10, 299, 299, 1},   {10, 3000, 299, 1, 299},   {300, 300, 299, 299, 299},
        {1, 1, 299, 1, 1},         {299, 300, 299, 298, 299}, {1000, 999, 299, 299, 299},
        {640, 480, 224, 224, 168}, {5000, 1, 128, 128, 1},    {333, 334, 299, 298, 299},
        {2592, 1944, 299, 299, 224}, {500, 375, 299, 299, 224}, {400, 300, 299, 299, 224},
        {301, 1, 299, 299, 1},     {1, 301, 299, 1, 299},     {7, 5, 3, 3, 2},
        {1366, 768, 299, 299, 168}, {768, 1366, 299, 168, 299},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int w, h;
        ftl_image_thumbnail_size(cases[i][0], cases[i][1], cases[i][2], &w, &h);
        if (w != cases[i][3] || h != cases[i][4])
            ftl_test_fail(__FILE__, __LINE__, "%dx%d at S=%d: got %dx%d, Pillow %dx%d", cases[i][0],
                          cases[i][1], cases[i][2], w, h, cases[i][3], cases[i][4]);
    }
}

TEST(image_reduce_plan_follows_pillow_resize) {
    /* Image.resize(..., reducing_gap=2.0): factor int(src / dst / 2) per axis, box W/f x H/f. */
    ftl_thumb_plan p;
    ftl_thumb_plan_make(2592, 1944, 299, &p); /* 2592/299/2 = 4.33, 1944/224/2 = 4.34 */
    CHECK(p.resize);
    CHECK_EQ_INT(p.reduce_x, 4);
    CHECK_EQ_INT(p.reduce_y, 4);
    CHECK(p.box[2] == 648.0f && p.box[3] == 486.0f);
    ftl_thumb_plan_make(1000, 600, 299, &p); /* 1000/299/2 = 1.67: no reduce */
    CHECK_EQ_INT(p.reduce_x, 1);
    CHECK(p.box[2] == 1000.0f && p.box[3] == 600.0f);
    ftl_thumb_plan_make(3000, 10, 299, &p); /* 299x1: x 5.02 -> 5, y 10/1/2 = 5 */
    CHECK_EQ_INT(p.reduce_x, 5);
    CHECK_EQ_INT(p.reduce_y, 5);
    CHECK(p.box[3] == 2.0f);
    ftl_thumb_plan_make(1000, 1000, 299, &p); /* 3.34 -> 1.67: box 1000/1 */
    CHECK_EQ_INT(p.reduce_x, 1);
    ftl_thumb_plan_make(2000, 1000, 299, &p); /* x 3.34 -> 3, y 1000/150/2 = 3.33 -> 3 */
    CHECK_EQ_INT(p.reduce_x, 3);
    CHECK(p.box[2] == (float)(2000.0 / 3));
    ftl_thumb_plan_make(200, 100, 299, &p);
    CHECK(!p.resize);
    CHECK_EQ_INT(p.width, 200);
}

TEST(image_api_rejects_bad_arguments) {
    ftl_image_prepper *p = (ftl_image_prepper *)1;
    CHECK_EQ_INT(ftl_image_prepper_init(&p, 0), FTL_E_INVALID_ARG);
    CHECK(p == NULL);
    CHECK_EQ_INT(ftl_image_prepper_init(&p, 20000), FTL_E_INVALID_ARG);
    ftl_image img = {0}, out = {0};
    CHECK_EQ_INT(ftl_image_alloc(&img, 0, 5), FTL_E_INVALID_ARG);
    CHECK_EQ_INT(ftl_image_alloc(&img, 100000, 100000), FTL_E_INVALID_ARG);
    CHECK_EQ_INT(ftl_image_resize(&img, 10, 10, FTL_IMAGE_FILTER_BILINEAR, &out), FTL_E_INVALID_ARG);
    REQUIRE_OK(ftl_image_alloc(&img, 8, 8));
    memset(img.pixels, 7, 8 * 8 * 3);
    CHECK_EQ_INT(ftl_image_resize(&img, 0, 10, FTL_IMAGE_FILTER_BILINEAR, &out), FTL_E_INVALID_ARG);
    CHECK_CONTAINS(ftl_last_error(), "must be > 0");
    CHECK_EQ_INT(ftl_image_resize(&img, 4, 4, (ftl_image_filter)42, &out), FTL_E_INVALID_ARG);
    CHECK_EQ_INT(ftl_image_resize(&img, 4, 4, FTL_IMAGE_FILTER_LANCZOS, &img), FTL_E_INVALID_ARG);
    /* A flat image stays flat under every filter, up or down (weights are normalised). */
    for (int f = FTL_IMAGE_FILTER_BOX; f <= FTL_IMAGE_FILTER_LANCZOS; f++) {
        CHECK_OK(ftl_image_resize(&img, 5, 13, (ftl_image_filter)f, &out));
        for (int i = 0; i < 5 * 13 * 3; i++) CHECK_EQ_INT(out.pixels[i], 7);
    }
    CHECK_EQ_INT(ftl_image_thumbnail(&img, 0, &out), FTL_E_INVALID_ARG);
    ftl_image_free(&img);
    ftl_image_free(&out);
    ftl_image_free(&out); /* twice is fine */
}

static uint8_t *read_ref(const char *rel, size_t *size) {
    char *path = ftl_format("%s/ref/image/%s", ftl_test_build_dir(), rel);
    uint8_t *data = NULL;
    if (ftl_read_file(path, &data, size) != FTL_OK)
        ftl_test_fail(__FILE__, __LINE__, "missing %s (run tests/ref/gen_image.sh)", path);
    free(path);
    return data;
}

TEST(image_prepper_reports_what_it_did) {
    ftl_image_prepper *p;
    REQUIRE_OK(ftl_image_prepper_init(&p, 299));
    uint8_t *canvas = ftl_xmalloc(299 * 299 * 3);
    size_t n;
    uint8_t *big = read_ref("synth/big_2400x1800.jpg", &n);
    REQUIRE(big);
    ftl_image_info info;
    CHECK_OK(ftl_image_prepper_run(p, big, n, canvas, &info));
    CHECK_EQ_INT(info.format, FTL_IMAGE_FORMAT_JPEG);
    CHECK_EQ_INT(info.source_width, 2400);
    CHECK_EQ_INT(info.source_height, 1800);
    CHECK_EQ_INT(info.thumb_width, 299);
    CHECK_EQ_INT(info.thumb_height, 224);
    CHECK_EQ_INT(info.offset_y, 37);
    CHECK_EQ_INT(info.reduce_x, 4);
    CHECK_EQ_INT(info.dct_scale, 1);
    ftl_image_prepper_set_dct_scaling(p, true);
    CHECK_OK(ftl_image_prepper_run(p, big, n, canvas, &info));
    CHECK_EQ_INT(info.dct_scale, 2);
    CHECK_EQ_INT(info.source_width, 2400);
    CHECK_EQ_INT(info.thumb_height, 224);
    /* A PNG is never DCT-scaled; a small image is pasted as it is. */
    uint8_t *small = read_ref("synth/small_20x30.png", &n);
    REQUIRE(small);
    CHECK_OK(ftl_image_prepper_run(p, small, n, canvas, &info));
    CHECK_EQ_INT(info.format, FTL_IMAGE_FORMAT_PNG);
    CHECK_EQ_INT(info.dct_scale, 1);
    CHECK_EQ_INT(info.thumb_width, 20);
    CHECK_EQ_INT(info.offset_x, 139);
    CHECK_EQ_INT(info.reduce_x, 1);
    CHECK_STR_EQ(info.warning, "");
    /* NULL info is allowed. */
    CHECK_OK(ftl_image_prepper_run(p, small, n, canvas, NULL));
    free(big);
    free(small);
    free(canvas);
    ftl_image_prepper_free(p);
    ftl_image_prepper_free(NULL);
}

TEST(image_decode_rgb_small_images_match_their_canvas) {
    /* Images that fit are pasted unresampled, so decode_rgb must equal the canvas interior. */
    const char *names[] = {"synth/small_20x30.png", "synth/tiny_1x1.jpg", "synth/small_100x50.jpg"};
    ftl_image_prepper *p;
    REQUIRE_OK(ftl_image_prepper_init(&p, 299));
    uint8_t *canvas = ftl_xmalloc(299 * 299 * 3);
    ftl_image img = {0};
    for (int i = 0; i < 3; i++) {
        size_t n;
        uint8_t *data = read_ref(names[i], &n);
        if (!data) continue;
        ftl_image_info info;
        CHECK_OK(ftl_image_decode_rgb(data, n, &img));
        CHECK_OK(ftl_image_prepper_run(p, data, n, canvas, &info));
        CHECK_EQ_INT(img.width, info.thumb_width);
        for (int y = 0; y < img.height; y++)
            CHECK(!memcmp(img.pixels + (size_t)y * img.width * 3,
                          canvas + ((size_t)(info.offset_y + y) * 299 + info.offset_x) * 3,
                          (size_t)img.width * 3));
        CHECK(canvas[0] == 255 && canvas[299 * 299 * 3 - 1] == 255);
        free(data);
    }
    ftl_image_free(&img);
    free(canvas);
    ftl_image_prepper_free(p);
}

/* --augment flip's mirror: pixel (y, x) of the output is pixel (y, S-1-x) of the input, every
 * channel, for even and odd sizes, out of place and in place; twice is the identity. */
TEST(image_flip_horizontal_mirrors_every_row) {
    for (int size = 1; size <= 6; size++) {
        int count = 2;
        size_t n = (size_t)count * size * size * 3;
        uint8_t *in = malloc(n), *out = malloc(n), *again = malloc(n);
        REQUIRE(in && out && again);
        for (size_t i = 0; i < n; i++) in[i] = (uint8_t)(i * 37 + 11);
        ftl_image_flip_horizontal(in, out, count, size);
        int bad = 0;
        for (int k = 0; k < count; k++)
            for (int y = 0; y < size; y++)
                for (int x = 0; x < size; x++)
                    for (int c = 0; c < 3; c++) {
                        size_t o = (((size_t)k * size + y) * size + x) * 3 + c;
                        size_t i = (((size_t)k * size + y) * size + (size - 1 - x)) * 3 + c;
                        bad += out[o] != in[i];
                    }
        CHECK_EQ_INT(bad, 0);
        memcpy(again, out, n);
        ftl_image_flip_horizontal(again, again, count, size); /* in place */
        CHECK(memcmp(again, in, n) == 0);
        free(in), free(out), free(again);
    }
}
