/* Pillow parity of the image module: the article's recipe (decode, convert RGB, thumbnail
 * LANCZOS, paste on white) on every hymenoptera image and on synthetic JPEG/PNG variants, and
 * Image.resize with every filter, against tests/ref/gen_image.py (Debian's Pillow 9.4). */
#include "image_ref.h"
#include "test.h"
#include "ftl/image.h"
#include "image/image_internal.h"
#include "util/alloc.h"
#include "util/fsutil.h"

#include <pthread.h>
#include <stdlib.h>

typedef struct parity_summary {
    int compared, exact, dct_scaled;
    double worst_mean;
    int worst_max;
    char worst_mean_file[512], worst_max_file[512];
} parity_summary;

static bool is_supported(ftl_image_format f) {
    return f == FTL_IMAGE_FORMAT_JPEG || f == FTL_IMAGE_FORMAT_PNG;
}

/* Runs the recipe on every row of `set` and compares with Pillow: identical thumbnail size and
 * offset always; the canvas within mean |diff| <= 1 and max |diff| <= 8, and byte-identical
 * when `require_exact`. */
static void run_recipe_set(const char *set, bool dct_scaling, bool require_exact,
                           parity_summary *sum) {
    image_ref_row *rows;
    int n = image_ref_load(set, &rows);
    ftl_image_prepper *p = NULL;
    int p_size = 0;
    uint8_t *canvas = NULL, *want = NULL;
    for (int i = 0; i < n; i++) {
        const image_ref_row *r = &rows[i];
        if (r->size != p_size) {
            ftl_image_prepper_free(p);
            free(canvas);
            free(want);
            REQUIRE_OK(ftl_image_prepper_init(&p, r->size));
            ftl_image_prepper_set_dct_scaling(p, dct_scaling);
            p_size = r->size;
            canvas = ftl_xmalloc((size_t)p_size * p_size * 3);
            want = ftl_xmalloc((size_t)p_size * p_size * 3);
        }
        char path[1024];
        image_ref_path(r, path, sizeof path);
        uint8_t *data = NULL;
        size_t size = 0;
        if (ftl_read_file(path, &data, &size) != FTL_OK) {
            ftl_test_fail(__FILE__, __LINE__, "cannot read %s: %s", path, ftl_last_error());
            continue;
        }
        ftl_image_info info;
        ftl_status st = ftl_image_prepper_run(p, data, size, canvas, &info);
        ftl_image_format fmt = ftl_image_sniff(data, size);
        free(data);
        if (!is_supported(fmt)) { /* GIF placeholder etc.: Pillow reads them, ftl refuses */
            CHECK_EQ_INT(st, FTL_E_UNSUPPORTED);
            CHECK_CONTAINS(ftl_last_error(), "unsupported image format");
            continue;
        }
        if (!r->ok) {
            if (st == FTL_OK)
                ftl_test_fail(__FILE__, __LINE__, "%s: Pillow fails (%s) but ftl decoded it",
                              r->path, r->note);
            continue;
        }
        if (st != FTL_OK) {
            ftl_test_fail(__FILE__, __LINE__, "%s: %s", r->path, ftl_last_error());
            continue;
        }
        if (info.thumb_width != r->w || info.thumb_height != r->h || info.offset_x != r->x ||
            info.offset_y != r->y) {
            ftl_test_fail(__FILE__, __LINE__, "%s: thumbnail %dx%d at (%d,%d), Pillow %dx%d at (%d,%d)",
                          r->path, info.thumb_width, info.thumb_height, info.offset_x,
                          info.offset_y, r->w, r->h, r->x, r->y);
            continue;
        }
        size_t nbytes = (size_t)p_size * p_size * 3;
        if (!image_ref_read("recipe.bin", r->offset, want, nbytes)) {
            ftl_test_fail(__FILE__, __LINE__, "recipe.bin is short (row %s)", r->path);
            continue;
        }
        pixel_diff d = pixel_diff_of(canvas, want, nbytes);
        sum->compared++;
        sum->exact += d.differing == 0;
        sum->dct_scaled += info.dct_scale > 1;
        if (d.mean_abs > sum->worst_mean) {
            sum->worst_mean = d.mean_abs;
            snprintf(sum->worst_mean_file, sizeof sum->worst_mean_file, "%s", r->path);
        }
        if (d.max_abs > sum->worst_max) {
            sum->worst_max = d.max_abs;
            snprintf(sum->worst_max_file, sizeof sum->worst_max_file, "%s", r->path);
        }
        if (info.dct_scale > 1)
            printf("  info: %s: decoded at 1/%d then reduced %dx%d: mean |diff| %.4f, max %d\n",
                   r->path, info.dct_scale, info.reduce_x / info.dct_scale,
                   info.reduce_y / info.dct_scale, d.mean_abs, d.max_abs);
        if (d.mean_abs > 1.0 || d.max_abs > 8 || (require_exact && d.differing))
            ftl_test_fail(__FILE__, __LINE__, "%s (S=%d, dct 1/%d): %zu bytes differ, mean %.4f, max %d",
                          r->path, r->size, info.dct_scale, d.differing, d.mean_abs, d.max_abs);
    }
    printf("  info: %s%s: %d canvases compared, %d byte-identical, %d DCT-scaled; worst mean "
           "|diff| %.4f (%s), worst max |diff| %d (%s)\n", set, dct_scaling ? " +dct" : "",
           sum->compared, sum->exact, sum->dct_scaled, sum->worst_mean,
           sum->worst_mean_file[0] ? sum->worst_mean_file : "-", sum->worst_max,
           sum->worst_max_file[0] ? sum->worst_max_file : "-");
    ftl_image_prepper_free(p);
    free(canvas);
    free(want);
    free(rows);
}

TEST(image_recipe_matches_pillow_hymenoptera_299) {
    parity_summary s = {0};
    run_recipe_set("hym299", false, true, &s);
    CHECK(s.compared >= 397);
}

TEST(image_recipe_matches_pillow_hymenoptera_128) {
    parity_summary s = {0};
    run_recipe_set("hym128", false, true, &s);
    CHECK(s.compared >= 60);
}

TEST(image_recipe_matches_pillow_synthetic_variants) {
    parity_summary a = {0}, b = {0};
    run_recipe_set("synth299", false, true, &a);
    run_recipe_set("synth64", false, true, &b);
    CHECK(a.compared >= 40);
    CHECK(b.compared >= 40);
}

TEST(image_recipe_with_dct_scaling_stays_within_tolerance) {
    parity_summary a = {0}, b = {0};
    run_recipe_set("hym299", true, false, &a);
    run_recipe_set("synth299", true, false, &b);
    CHECK(a.dct_scaled >= 1); /* the path must actually run: hymenoptera has a 2592x1944 photo */
    CHECK(b.dct_scaled >= 2); /* 2400x1800 (reduce 4) and 1300x5000 (reduce 8) */
}

/* The public building blocks compose to the same canvas as the prepper. */
TEST(image_decode_thumbnail_paste_equals_prepper) {
    image_ref_row *rows;
    int n = image_ref_load("synth299", &rows);
    ftl_image_prepper *p;
    REQUIRE_OK(ftl_image_prepper_init(&p, 299));
    uint8_t *a = ftl_xmalloc(299 * 299 * 3), *b = ftl_xmalloc(299 * 299 * 3);
    ftl_image img = {0}, thumb = {0};
    int compared = 0;
    for (int i = 0; i < n; i++) {
        if (!rows[i].ok) continue;
        char path[1024];
        image_ref_path(&rows[i], path, sizeof path);
        uint8_t *data;
        size_t size;
        if (ftl_read_file(path, &data, &size) != FTL_OK) continue;
        if (ftl_image_prepper_run(p, data, size, a, NULL) == FTL_OK) {
            CHECK_OK(ftl_image_decode_rgb(data, size, &img));
            CHECK_OK(ftl_image_thumbnail(&img, 299, &thumb));
            ftl_image_paste_centered(&thumb, 299, b);
            if (memcmp(a, b, sizeof(uint8_t) * 299 * 299 * 3))
                ftl_test_fail(__FILE__, __LINE__, "%s: building blocks differ from the prepper", path);
            compared++;
        }
        free(data);
    }
    CHECK(compared >= 40);
    ftl_image_free(&img);
    ftl_image_free(&thumb);
    ftl_image_prepper_free(p);
    free(a);
    free(b);
    free(rows);
}

static ftl_image_filter filter_named(const char *s) {
    if (!strcmp(s, "box")) return FTL_IMAGE_FILTER_BOX;
    if (!strcmp(s, "bilinear")) return FTL_IMAGE_FILTER_BILINEAR;
    if (!strcmp(s, "hamming")) return FTL_IMAGE_FILTER_HAMMING;
    if (!strcmp(s, "bicubic")) return FTL_IMAGE_FILTER_BICUBIC;
    return FTL_IMAGE_FILTER_LANCZOS;
}

/* Image.resize((w, h), filter): byte-identical with every kernel variant this CPU has. */
TEST(image_resize_matches_pillow_all_filters_and_kernels) {
    resize_ref_row *rows;
    int n = resize_ref_load(&rows);
    const char *kernels[] = {"scalar", "avx2", "avx512"};
    int bilinear_224 = 0;
    for (int k = 0; k < 3; k++) {
        const ftl_resample_kernels *kern = ftl_resample_kernels_named(kernels[k]);
        if (!kern) {
            printf("  info: %s kernels not available on this CPU\n", kernels[k]);
            continue;
        }
        ftl_resample_kernels_force(kern);
        int exact = 0;
        for (int i = 0; i < n; i++) {
            const resize_ref_row *r = &rows[i];
            ftl_image src = {0}, dst = {0};
            REQUIRE_OK(ftl_image_alloc(&src, r->sw, r->sh));
            uint8_t *want = ftl_xmalloc((size_t)r->dw * r->dh * 3);
            CHECK(image_ref_read("resize.bin", r->src_offset, src.pixels, (size_t)r->sw * r->sh * 3));
            CHECK(image_ref_read("resize.bin", r->dst_offset, want, (size_t)r->dw * r->dh * 3));
            CHECK_OK(ftl_image_resize(&src, r->dw, r->dh, filter_named(r->filter), &dst));
            pixel_diff d = pixel_diff_of(dst.pixels, want, (size_t)r->dw * r->dh * 3);
            if (d.differing)
                ftl_test_fail(__FILE__, __LINE__, "%s kernels, %s (%s %dx%d -> %dx%d): %zu bytes "
                              "differ, max %d", kernels[k], r->name, r->filter, r->sw, r->sh,
                              r->dw, r->dh, d.differing, d.max_abs);
            exact += d.differing == 0;
            bilinear_224 += k == 0 && !strcmp(r->filter, "bilinear") && r->dw == 224 && r->sw == 299;
            ftl_image_free(&src);
            ftl_image_free(&dst);
            free(want);
        }
        printf("  info: %s kernels: %d/%d resize cases byte-identical with Pillow\n", kernels[k],
               exact, n);
    }
    ftl_resample_kernels_force(NULL);
    CHECK(bilinear_224 >= 30); /* the backbone's 299 -> 224 BILINEAR step is covered */
    free(rows);
}

/* Preppers on several threads at once (as `ftl prep` runs them) give the single-thread bytes. */
typedef struct thread_job {
    const image_ref_row *rows;
    int n, first;
    uint8_t *out; /* n canvases of 64x64x3 */
    int failures;
} thread_job;

static void *prep_thread(void *arg) {
    thread_job *j = arg;
    ftl_image_prepper *p;
    if (ftl_image_prepper_init(&p, 64) != FTL_OK) {
        j->failures = j->n;
        return NULL;
    }
    for (int k = 0; k < j->n; k++) {
        int i = (j->first + k) % j->n; /* each thread walks the files from a different start */
        char path[1024];
        image_ref_path(&j->rows[i], path, sizeof path);
        uint8_t *data;
        size_t size;
        if (ftl_read_file(path, &data, &size) != FTL_OK) {
            j->failures++;
            continue;
        }
        if (ftl_image_prepper_run(p, data, size, j->out + (size_t)i * 64 * 64 * 3, NULL) != FTL_OK)
            memset(j->out + (size_t)i * 64 * 64 * 3, 0, 64 * 64 * 3);
        free(data);
    }
    ftl_image_prepper_free(p);
    return NULL;
}

TEST(image_preppers_on_threads_match_single_thread) {
    image_ref_row *rows;
    int n = image_ref_load("synth64", &rows);
    REQUIRE(n > 0);
    enum { THREADS = 4 };
    thread_job jobs[THREADS];
    pthread_t tid[THREADS];
    for (int t = 0; t < THREADS; t++) {
        jobs[t] = (thread_job){rows, n, t * 7, ftl_xcalloc((size_t)n, 64 * 64 * 3), 0};
        REQUIRE(pthread_create(&tid[t], NULL, prep_thread, &jobs[t]) == 0);
    }
    for (int t = 0; t < THREADS; t++) pthread_join(tid[t], NULL);
    thread_job single = {rows, n, 0, ftl_xcalloc((size_t)n, 64 * 64 * 3), 0};
    prep_thread(&single);
    for (int t = 0; t < THREADS; t++) {
        CHECK_EQ_INT(jobs[t].failures, 0);
        CHECK(!memcmp(jobs[t].out, single.out, (size_t)n * 64 * 64 * 3));
        free(jobs[t].out);
    }
    free(single.out);
    free(rows);
}
