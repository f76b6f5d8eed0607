/* prep's folder walk: the file-identity map against a linear search, and prep_source_scan on
 * trees of symlinks and hard links (loops, second ways within a class, one file or folder under
 * two classes or splits), checked against the trees' known real files. */
#include "test.h"
#include "data/prep_source.h"
#include "util/alloc.h"
#include "util/file_id_map.h"
#include "util/fsutil.h"
#include "util/rng.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

TEST(file_id_map_matches_a_linear_search) {
    enum { N = 4000 };
    static uint64_t dev[N], ino[N];
    static int64_t value[N];
    ftl_rng rng;
    ftl_rng_seed(&rng, 7);
    ftl_file_id_map map = {0};
    for (int i = 0; i < N; i++) { /* few devices, inodes that collide often: puts replace */
        dev[i] = ftl_rng_below(&rng, 3);
        ino[i] = ftl_rng_below(&rng, N);
        value[i] = i;
        ftl_file_id_map_put(&map, dev[i], ino[i], value[i]);
    }
    size_t distinct = 0;
    for (int i = 0; i < N; i++) {
        int64_t want = -1; /* the last value put for this key */
        bool first = true;
        for (int j = 0; j < N; j++)
            if (dev[j] == dev[i] && ino[j] == ino[i]) {
                want = value[j];
                first &= j >= i;
            }
        distinct += first;
        CHECK_EQ_INT(ftl_file_id_map_get(&map, dev[i], ino[i]), want);
    }
    CHECK_EQ_INT(map.count, distinct);
    CHECK(distinct < N); /* the replacing path was taken */
    CHECK_EQ_INT(ftl_file_id_map_get(&map, 3, 1), -1);
    CHECK_EQ_INT(ftl_file_id_map_get(&map, 0, N + 5), -1);
    ftl_file_id_map_free(&map);
    CHECK_EQ_INT(ftl_file_id_map_get(&map, dev[0], ino[0]), -1);
}

/* Test trees: folders, empty "image" files (the scan never decodes), symlinks and hard links. */
static bool make_parent(const char *path) {
    char *folder = ftl_path_folder(path);
    bool made = ftl_make_dirs(folder) == FTL_OK;
    free(folder);
    return made;
}
static void make_file(const char *root, const char *relative) {
    char *path = ftl_format("%s/%s", root, relative);
    if (!make_parent(path) || ftl_write_file_atomic(path, "", 0) != FTL_OK) ftl_test_fail(__FILE__, __LINE__, "cannot create %s", path);
    free(path);
}
static void make_symlink(const char *root, const char *relative, const char *target) {
    char *path = ftl_format("%s/%s", root, relative);
    if (!make_parent(path) || symlink(target, path) != 0) ftl_test_fail(__FILE__, __LINE__, "cannot link %s", path);
    free(path);
}
static void make_hard_link(const char *root, const char *relative, const char *existing) {
    char *path = ftl_format("%s/%s", root, relative), *old = ftl_format("%s/%s", root, existing);
    if (!make_parent(path) || link(old, path) != 0) ftl_test_fail(__FILE__, __LINE__, "cannot link %s", path);
    free(path);
    free(old);
}

/* "label:path,label:path" of the scanned items, in scan order. */
static char *items_text(const prep_source *s) {
    char *text = ftl_strdup("");
    for (int64_t i = 0; i < s->item_count; i++) {
        char *next = ftl_format("%s%s%d:%s", text, i ? "," : "", s->items[i].label, s->items[i].relative_path);
        free(text);
        text = next;
    }
    return text;
}

static bool any_contains(char *const *lines, int64_t count, const char *needle) {
    for (int64_t i = 0; i < count; i++)
        if (strstr(lines[i], needle)) return true;
    return false;
}

TEST(prep_scan_follows_links_but_reads_each_folder_and_file_once) {
    const char *root = ftl_test_scratch_dir();
    make_file(root, "ants/a.jpg");
    make_file(root, "ants/sub/c.png");
    make_symlink(root, "ants/loop", "..");             /* back to SRC */
    make_symlink(root, "ants/sub/up", "..");           /* back to the class folder */
    make_symlink(root, "ants/zz-again.jpg", "a.jpg");  /* second ways within the class */
    make_hard_link(root, "ants/zz-hard.jpg", "ants/a.jpg");
    make_symlink(root, "ants/zz-sub", "sub");
    make_file(root, "bees/b.jpg");
    make_file(root, "bees/g.gif");
    make_symlink(root, "bees/zz-g.gif", "g.gif");
    prep_source s;
    REQUIRE_OK(prep_source_scan(root, &s));
    char *items = items_text(&s);
    CHECK_STR_EQ(items, "0:ants/a.jpg,0:ants/sub/c.png,1:bees/b.jpg");
    CHECK_EQ_INT(s.unsupported_count, 1);
    CHECK(s.mislabel == NULL);
    CHECK_EQ_INT(s.loop_count, 2);
    char *loop1 = ftl_format("%s/ants/loop leads back to %s, a folder it is inside", root, root);
    char *loop2 = ftl_format("%s/ants/sub/up leads back to %s/ants, a folder it is inside", root, root);
    CHECK(any_contains(s.loops, s.loop_count, loop1));
    CHECK(any_contains(s.loops, s.loop_count, loop2));
    CHECK(any_contains(s.warnings, s.warning_count, "4 files or folders under"));
    CHECK(any_contains(s.warnings, s.warning_count, "ants/zz-again.jpg is "));
    free(loop1);
    free(loop2);
    free(items);
    prep_source_free(&s);
}

TEST(prep_scan_names_a_file_or_folder_under_two_classes) {
    const char *root = ftl_test_scratch_dir();
    char *src = ftl_format("%s/src", root);
    make_file(src, "ants/a.jpg");
    make_symlink(src, "bees/a-link.jpg", "../ants/a.jpg");
    make_hard_link(src, "bees/a-hard.jpg", "ants/a.jpg");
    make_file(src, "bees/b.jpg");
    make_file(root, "elsewhere/e.jpg");
    make_symlink(src, "ants/more", "../../elsewhere");
    make_symlink(src, "bees/more", "../../elsewhere");
    prep_source s;
    REQUIRE_OK(prep_source_scan(src, &s));
    REQUIRE(s.mislabel != NULL);
    CHECK_EQ_INT(s.mislabel_count, 3);
    char *first = ftl_format("%s/ants/a.jpg (class 'ants') and %s/bees/a-hard.jpg (class 'bees') are the same file", src, src);
    CHECK_CONTAINS(s.mislabel, first);
    /* the real files are listed once each, under the class that reached them first */
    char *items = items_text(&s);
    CHECK_STR_EQ(items, "0:ants/a.jpg,0:ants/more/e.jpg,1:bees/b.jpg");
    free(items);
    free(first);
    prep_source_free(&s);
    free(src);
}

TEST(prep_scan_names_what_is_in_both_train_and_val) {
    const char *root = ftl_test_scratch_dir();
    make_file(root, "train/ants/a.jpg");
    make_file(root, "train/bees/b.jpg");
    make_hard_link(root, "val/ants/a-again.jpg", "train/ants/a.jpg");
    make_symlink(root, "val/bees", "../train/bees");
    prep_source s;
    REQUIRE_OK(prep_source_scan(root, &s));
    REQUIRE(s.mislabel != NULL);
    CHECK_EQ_INT(s.mislabel_count, 2);
    /* class folders are claimed before any is searched: val/bees is named first */
    char *want = ftl_format("%s/train/bees (class 'bees' in train/) and %s/val/bees (class 'bees' in val/) are the same folder",
                            root, root);
    CHECK_CONTAINS(s.mislabel, want);
    free(want);
    prep_source_free(&s);

    const char *again = ftl_test_scratch_dir();
    make_file(again, "train/ants/a.jpg");
    make_symlink(again, "train/ants/v", "../../val");  /* a link to the other split's folder */
    make_file(again, "val/ants/c.jpg");
    REQUIRE_OK(prep_source_scan(again, &s));
    REQUIRE(s.mislabel != NULL);
    want = ftl_format("%s/val (the val/ folder) and %s/train/ants/v (class 'ants' in train/) are the same folder", again, again);
    CHECK_CONTAINS(s.mislabel, want);
    free(want);
    prep_source_free(&s);
}

TEST(prep_scan_two_class_folders_that_are_one_folder) {
    const char *root = ftl_test_scratch_dir();
    char *src = ftl_format("%s/src", root);
    make_file(root, "real/a.jpg");
    make_symlink(src, "c1", "../real");
    make_symlink(src, "c2", "../real");
    make_symlink(src, "c3", ".");  /* SRC itself: a loop */
    prep_source s;
    REQUIRE_OK(prep_source_scan(src, &s));
    char *items = items_text(&s);
    CHECK_STR_EQ(items, "0:c1/a.jpg");
    REQUIRE(s.mislabel != NULL);
    char *want = ftl_format("%s/c1 (class 'c1') and %s/c2 (class 'c2') are the same folder", src, src);
    CHECK_CONTAINS(s.mislabel, want);
    CHECK_EQ_INT(s.loop_count, 1);
    CHECK_EQ_INT(s.empty_class_count, 2);
    free(want);
    free(items);
    prep_source_free(&s);
    free(src);
}

TEST(prep_scan_still_stops_at_real_deep_trees) {
    const char *root = ftl_test_scratch_dir();
    char *deep = ftl_strdup("ants");
    for (int i = 0; i < 34; i++) {
        char *next = ftl_format("%s/d", deep);
        free(deep);
        deep = next;
    }
    char *file = ftl_format("%s/deep.jpg", deep);
    make_file(root, file);
    make_file(root, "ants/a.jpg");
    prep_source s;
    REQUIRE_OK(prep_source_scan(root, &s));
    char *items = items_text(&s);
    CHECK_STR_EQ(items, "0:ants/a.jpg");
    CHECK(any_contains(s.warnings, s.warning_count, "folders nested deeper than 32 levels are not searched"));
    CHECK_EQ_INT(s.loop_count, 0);
    free(items);
    free(file);
    free(deep);
    prep_source_free(&s);
}
