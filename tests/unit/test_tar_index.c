/* The tar index (src/data/tar_index.c) against GNU tar: shards it writes in each format (ustar, GNU,
 * pax, v7; long names, sub-folders, 0-, 512- and 513-byte files, links, a FIFO) are listed as
 * `tar -tvf` lists them and every member's bytes are the original file's; shards Python's tarfile
 * writes (pax size records, base-256 sizes; tests/ref/gen_tar.sh) as tarfile reads them back; and
 * every kind of damage is a clear error naming the file and the member, never a crash (this file
 * runs under ASan + UBSan too). */
#include "test.h"
#include "data/tar_index.h"
#include "tar_test_util.h"
#include "util/alloc.h"
#include "util/fsutil.h"
#include "util/sha256.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The files every format can hold: names of at most 99 bytes, sub-folders, sizes around a block. */
static void make_basic_tree(const char *root) {
    tar_test_write_payload(root, "000001.jpg", 0, 1);
    tar_test_write_text(root, "000001.cls", "1\n");
    tar_test_write_payload(root, "sub/000002.jpg", 512, 2);
    tar_test_write_payload(root, "sub/deeper/000003.png", 513, 3);
    tar_test_write_text(root, "sub/deeper/000003.json", "{\"label\": 3}");
    tar_test_write_payload(root, "big/000004.jpg", 70001, 4);
    tar_test_write_payload(root, "big/000005.jpg", 1024, 5);
    tar_test_write_payload(root, "empty.bin", 0, 6);
}

/* "./" + 98 bytes: a name of exactly 100 bytes, which fills the name field with no NUL. */
static char *name_of_100_bytes(void) {
    char file[99];
    memset(file, 'n', 90);
    memcpy(file + 90, "0007.jpg", 9);
    return ftl_strdup(file);
}

/* ustar: a 100-byte name and a 154-byte path split into prefix and name. */
static void make_ustar_extras(const char *root) {
    char *file = name_of_100_bytes();
    tar_test_write_payload(root, file, 777, 7);
    free(file);
    char path[200];
    snprintf(path, sizeof path, "%.*s/%.*s/000008.jpg", 80, "pppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppp", 60,
             "qqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqq");
    tar_test_write_payload(root, path, 2048, 8);
}

/* GNU and pax: a 124-byte file name and a 275-byte path (over ustar's 100 and 255). */
static void make_long_name_extras(const char *root) {
    char file[140], path[300], a[101], b[101], c[61];
    memset(file, 'L', 120);
    memcpy(file + 120, ".jpg", 5);
    memset(a, 'a', 100), a[100] = '\0';
    memset(b, 'b', 100), b[100] = '\0';
    memset(c, 'c', 60), c[60] = '\0';
    char *long_file = ftl_format("long/%s", file);
    tar_test_write_payload(root, long_file, 513, 9);
    free(long_file);
    snprintf(path, sizeof path, "%s/%s/%s/000010.jpg", a, b, c);
    tar_test_write_payload(root, path, 511, 10);
}

/* GNU tar writes root/ in `format` (ustar, gnu, pax or v7) to DIR/NAME.tar; NULL when it cannot. */
static char *gnu_tar(const char *dir, const char *root, const char *format) {
    char *shard = ftl_format("%s/%s.tar", dir, format);
    if (!tar_test_sh("tar --format=%s --sort=name --owner=0 --group=0 -cf '%s' -C '%s' . 2>'%s.err'", format, shard, root, shard)) {
        free(shard);
        return NULL;
    }
    return shard;
}

static void check_format(const char *format, int extras) {
    const char *why = tar_test_no_gnu_tar_reason();
    if (why) {
        ftl_test_skip("all", "%s", why);
        return;
    }
    const char *dir = ftl_test_scratch_dir();
    char *root = ftl_format("%s/tree", dir);
    make_basic_tree(root);
    if (extras >= 1) make_ustar_extras(root);
    if (extras >= 2) make_long_name_extras(root);
    char *shard = gnu_tar(dir, root, format);
    tar_index *t = NULL;
    if (shard && tar_index_open(shard, &t) != FTL_OK) ftl_test_fail(__FILE__, __LINE__, "%s: %s", format, ftl_last_error());
    if (t) {
        tar_test_check_against_gnu_tar(t, shard, root, format);
        CHECK_EQ_INT(t->count, 8 + (extras >= 1 ? 2 : 0) + (extras >= 2 ? 2 : 0));
        CHECK(t->warning == NULL);
    }
    tar_index_close(t);
    free(shard);
    free(root);
}

TEST(tar_index_v7_matches_gnu_tar) { check_format("v7", 0); }
TEST(tar_index_ustar_matches_gnu_tar) { check_format("ustar", 1); }
TEST(tar_index_gnu_long_names_match_gnu_tar) { check_format("gnu", 2); }
TEST(tar_index_pax_long_names_match_gnu_tar) { check_format("pax", 2); }

TEST(tar_index_skips_links_and_fifos_and_names_them) {
    const char *why = tar_test_no_gnu_tar_reason();
    if (why) {
        ftl_test_skip("all", "%s", why);
        return;
    }
    const char *dir = ftl_test_scratch_dir();
    char *root = ftl_format("%s/tree", dir);
    tar_test_write_payload(root, "a/000001.jpg", 600, 1);
    REQUIRE(tar_test_sh("cd '%s' && ln a/000001.jpg a/000002.jpg && ln -s 000001.jpg a/000003.jpg && mkfifo a/000004.fifo", root));
    for (int f = 0; f < 2; f++) {
        const char *format = f ? "pax" : "gnu";
        char *shard = gnu_tar(dir, root, format);
        tar_index *t = NULL;
        if (shard && tar_index_open(shard, &t) != FTL_OK) ftl_test_fail(__FILE__, __LINE__, "%s: %s", format, ftl_last_error());
        if (t) {
            tar_test_check_against_gnu_tar(t, shard, root, format);
            CHECK_EQ_INT(t->count, 1);
            CHECK_EQ_INT(t->links_skipped, 2);
            CHECK_EQ_INT(t->others_skipped, 1);
            CHECK_CONTAINS(t->warning, "2 links (not followed) skipped");
            CHECK_CONTAINS(t->warning, "a/000002.jpg");
            CHECK_CONTAINS(t->warning, "a/000003.jpg");
            CHECK_CONTAINS(t->warning, "a/000004.fifo");
        }
        tar_index_close(t);
        free(shard);
    }
    free(root);
}

/* Python's tarfile shards (tests/ref/gen_tar.sh) against its own read-back listing. */
static void check_python_case(const char *name) {
    char *shard = ftl_format("%s/ref/tar/%s", ftl_test_build_dir(), name);
    char *list = ftl_format("%s.list", shard);
    size_t list_size;
    uint8_t *text = ftl_path_exists(list) ? tar_test_read(list, &list_size) : NULL;
    if (!text) {
        ftl_test_fail(__FILE__, __LINE__, "reference %s missing (run tests/ref/gen_tar.sh)", list);
        free(shard);
        free(list);
        return;
    }
    text = ftl_xrealloc(text, list_size + 1);
    text[list_size] = '\0';
    tar_index *t = NULL;
    if (tar_index_open(shard, &t) != FTL_OK) ftl_test_fail(__FILE__, __LINE__, "%s: %s", name, ftl_last_error());
    size_t i = 0;
    for (char *line = strtok((char *)text, "\n"); line && t; line = strtok(NULL, "\n"), i++) {
        char hex[65], member[1024];
        unsigned long long size;
        if (sscanf(line, "%64s %llu %1023s", hex, &size, member) != 3 || i >= t->count) {
            ftl_test_fail(__FILE__, __LINE__, "%s: listing line %zu '%s' (index has %zu members)", name, i, line, t->count);
            break;
        }
        CHECK_STR_EQ(t->members[i].name, member);
        CHECK_EQ_INT(t->members[i].size, size);
        uint8_t *data, digest[32];
        size_t n;
        char got[65];
        if (tar_index_read(t, i, &data, &n) != FTL_OK) {
            ftl_test_fail(__FILE__, __LINE__, "%s: %s", name, ftl_last_error());
            continue;
        }
        ftl_sha256 h;
        ftl_sha256_init(&h);
        ftl_sha256_update(&h, data, n);
        ftl_sha256_final(&h, digest);
        ftl_sha256_hex(digest, got);
        CHECK_STR_EQ(got, hex);
        free(data);
    }
    if (t) CHECK_EQ_INT(t->count, i);
    tar_index_close(t);
    free(text);
    free(list);
    free(shard);
}

TEST(tar_index_pax_size_record_and_base256_sizes_match_python_tarfile) {
    check_python_case("pax_size_record.tar");
    check_python_case("base256_size.tar");
}

/* A shard with long names in `format` (gnu: one header per member; pax: a pax header before each). */
static char *good_shard(const char *dir, const char *format, tar_index **t) {
    char *root = ftl_format("%s/tree", dir);
    if (!ftl_path_exists(root)) {
        make_basic_tree(root);
        make_long_name_extras(root);
    }
    char *shard = gnu_tar(dir, root, format);
    free(root);
    *t = NULL;
    if (shard && tar_index_open(shard, t) != FTL_OK) ftl_test_fail(__FILE__, __LINE__, "%s", ftl_last_error());
    return shard;
}

static const tar_member *member_named(const tar_index *t, const char *suffix) {
    for (size_t i = 0; i < t->count; i++) {
        size_t n = strlen(t->members[i].name), s = strlen(suffix);
        if (n >= s && strcmp(t->members[i].name + n - s, suffix) == 0) return &t->members[i];
    }
    ftl_test_fail(__FILE__, __LINE__, "no member ending in %s", suffix);
    return NULL;
}

/* Writes the first `keep` bytes of `data` (with `edit` applied: `len` bytes at `at`) and expects
 * tar_index_open to fail with `status` and a message holding each of the NULL-terminated needles. */
static void expect_failure(const char *path, const uint8_t *data, size_t keep, size_t at, const void *edit, size_t len,
                           ftl_status status, const char *const *needles) {
    uint8_t *copy = ftl_xmalloc(keep + 1);
    memcpy(copy, data, keep);
    if (edit) memcpy(copy + at, edit, len);
    tar_test_write_bytes(path, copy, keep);
    free(copy);
    tar_index *t = NULL;
    ftl_status st = tar_index_open(path, &t);
    if (st != status)
        ftl_test_fail(__FILE__, __LINE__, "%s: status %s, expected %s (%s)", path, ftl_status_name(st), ftl_status_name(status),
                      st == FTL_OK ? "accepted" : ftl_last_error());
    for (const char *const *n = needles; *n && st != FTL_OK; n++) CHECK_CONTAINS(ftl_last_error(), *n);
    CHECK(t == NULL);
    tar_index_close(t);
}

static void cut_short_cases(const char *dir, const char *format) {
    tar_index *t;
    char *shard = good_shard(dir, format, &t);
    if (!t) {
        free(shard);
        return;
    }
    size_t size;
    uint8_t *data = tar_test_read(shard, &size);
    const tar_member *m = member_named(t, "big/000004.jpg");
    char *cut = ftl_format("%s/cut.tar", dir);
    if (data && m) {
        /* inside a header: the name is not known yet, the offset is */
        char at[64];
        snprintf(at, sizeof at, "header at byte %llu", (unsigned long long)m->header_offset);
        expect_failure(cut, data, (size_t)m->header_offset + 100, 0, NULL, 0, FTL_E_FORMAT,
                       (const char *[]){cut, "ends inside the", at, "cut short", NULL});
        /* inside the data of a member */
        expect_failure(cut, data, (size_t)(m->data_offset + m->size / 2), 0, NULL, 0, FTL_E_FORMAT,
                       (const char *[]){cut, "member './big/000004.jpg'", "70001 bytes of data run past the end", "cut short", NULL});
        /* one byte short of the data */
        expect_failure(cut, data, (size_t)(m->data_offset + m->size - 1), 0, NULL, 0, FTL_E_FORMAT,
                       (const char *[]){"member './big/000004.jpg'", "run past the end", NULL});
    }
    const tar_member *last = &t->members[t->count - 1];
    if (data) {
        /* after a pax (or GNU long-name) header, before its member's header */
        const tar_member *p = member_named(t, "000010.jpg");
        if (p)
            expect_failure(cut, data, (size_t)p->header_offset + 1024, 0, NULL, 0, FTL_E_FORMAT,
                           (const char *[]){"the archive ends after the extended header", NULL});
        /* the end-of-archive blocks gone, or the last member's padding too: every member is still whole */
        size_t ends[2] = {(size_t)(last->data_offset + (last->size + 511) / 512 * 512), (size_t)(last->data_offset + last->size)};
        for (int i = 0; i < 2; i++) {
            tar_test_write_bytes(cut, data, ends[i]);
            tar_index *u = NULL;
            CHECK_OK(tar_index_open(cut, &u));
            if (u) CHECK_EQ_INT(u->count, t->count);
            tar_index_close(u);
        }
    }
    free(cut);
    free(data);
    tar_index_close(t);
    free(shard);
}

TEST(tar_index_cut_short_shards_are_refused_naming_the_member) {
    const char *why = tar_test_no_gnu_tar_reason();
    if (why) {
        ftl_test_skip("all", "%s", why);
        return;
    }
    const char *dir = ftl_test_scratch_dir();
    for (int f = 0; f < 2; f++) cut_short_cases(dir, f ? "pax" : "gnu");
}


TEST(tar_index_damaged_headers_are_refused_naming_the_offset) {
    const char *why = tar_test_no_gnu_tar_reason();
    if (why) {
        ftl_test_skip("all", "%s", why);
        return;
    }
    const char *dir = ftl_test_scratch_dir();
    tar_index *t;
    char *shard = good_shard(dir, "gnu", &t);
    REQUIRE(t);
    size_t size;
    uint8_t *data = tar_test_read(shard, &size);
    const tar_member *m = member_named(t, "sub/000002.jpg");
    char *bad = ftl_format("%s/bad.tar", dir);
    if (data && m) {
        char at[64];
        snprintf(at, sizeof at, "header at byte %llu", (unsigned long long)m->header_offset);
        /* a flipped byte in the name: the checksum no longer matches */
        uint8_t flipped = data[m->header_offset + 5] ^ 0x20;
        expect_failure(bad, data, size, (size_t)m->header_offset + 5, &flipped, 1, FTL_E_FORMAT,
                       (const char *[]){bad, at, "checksum field", "does not match", NULL});
        /* a flipped byte in the size field */
        uint8_t digit = data[m->header_offset + 130] ^ 0x01;
        expect_failure(bad, data, size, (size_t)m->header_offset + 130, &digit, 1, FTL_E_FORMAT,
                       (const char *[]){at, "checksum", NULL});
        /* garbage in the size field, with a checksum that matches it */
        uint8_t h[512];
        memcpy(h, data + m->header_offset, 512);
        memcpy(h + 124, "12x45678901", 12);
        tar_test_fix_checksum(h);
        expect_failure(bad, data, size, (size_t)m->header_offset, h, 512, FTL_E_FORMAT,
                       (const char *[]){bad, at, "size field '12x45678901'", "not an octal or base-256 number", NULL});
        /* a negative base-256 size */
        memcpy(h, data + m->header_offset, 512);
        memset(h + 124, 0xff, 12);
        tar_test_fix_checksum(h);
        expect_failure(bad, data, size, (size_t)m->header_offset, h, 512, FTL_E_FORMAT, (const char *[]){at, "is negative", NULL});
        /* an absurd size (base-256, 2^80) */
        memcpy(h, data + m->header_offset, 512);
        memset(h + 124, 0, 12);
        h[124] = 0x80, h[125] = 1;
        tar_test_fix_checksum(h);
        expect_failure(bad, data, size, (size_t)m->header_offset, h, 512, FTL_E_FORMAT, (const char *[]){at, "too large", NULL});
        /* a huge octal size: past the end of the file */
        memcpy(h, data + m->header_offset, 512);
        memcpy(h + 124, "77777777777", 12);
        tar_test_fix_checksum(h);
        expect_failure(bad, data, size, (size_t)m->header_offset, h, 512, FTL_E_FORMAT,
                       (const char *[]){"member './sub/000002.jpg'", "8589934591 bytes of data run past the end", NULL});
    }
    free(bad);
    free(data);
    tar_index_close(t);
    free(shard);
}

TEST(tar_index_bad_pax_records_are_refused) {
    const char *why = tar_test_no_gnu_tar_reason();
    if (why) {
        ftl_test_skip("all", "%s", why);
        return;
    }
    const char *dir = ftl_test_scratch_dir();
    tar_index *t;
    char *shard = good_shard(dir, "pax", &t);
    REQUIRE(t);
    size_t size;
    uint8_t *data = tar_test_read(shard, &size);
    const tar_member *m = member_named(t, "000010.jpg");
    char *bad = ftl_format("%s/bad.tar", dir);
    if (data && m) {
        REQUIRE(data[m->header_offset + 156] == 'x');
        size_t rec = (size_t)m->header_offset + 512; /* GNU tar's first record there: "NNN path=..." */
        char where[64];
        snprintf(where, sizeof where, "pax header at byte %llu", (unsigned long long)m->header_offset);
        /* GNU tar's first record is "NN path=..." or "NNN path=...": make its length larger than the header */
        size_t digits = strspn((const char *)data + rec, "0123456789");
        REQUIRE(digits >= 2 && digits <= 3);
        char longer[4] = "999";
        expect_failure(bad, data, size, rec, longer, digits, FTL_E_FORMAT,
                       (const char *[]){bad, where, "record 1", "says it is 99", "remain", NULL});
        /* one byte shorter than it is: no newline where the length says */
        char shorter[4];
        unsigned len = (unsigned)strtoul((const char *)data + rec, NULL, 10);
        snprintf(shorter, sizeof shorter, "%0*u", (int)digits, len - 1);
        expect_failure(bad, data, size, rec, shorter, digits, FTL_E_FORMAT,
                       (const char *[]){where, "does not end with a newline", NULL});
        /* not a length */
        expect_failure(bad, data, size, rec, "x", 1, FTL_E_FORMAT, (const char *[]){where, "does not start with 'LENGTH '", NULL});
    }
    /* a pax size record that is not a number, and one of 1 TiB on a small member (Python's tarfile) */
    tar_test_bytes b = {0};
    const char *record = "15 size=12ab34\n";
    tar_test_append_member(&b, "PaxHeaders/x", 'x', record, strlen(record), 0);
    tar_test_append_member(&b, "x.bin", '0', NULL, 100, 1);
    tar_test_append_end(&b);
    expect_failure(bad, b.data, b.size, 0, NULL, 0, FTL_E_FORMAT,
                   (const char *[]){"pax header at byte 0", "size record '12ab34' is not a decimal byte count", NULL});
    free(b.data);
    char *huge = ftl_format("%s/ref/tar/pax_huge_size.tar", ftl_test_build_dir());
    tar_index *u = NULL;
    if (!ftl_path_exists(huge)) ftl_test_fail(__FILE__, __LINE__, "reference %s missing (run tests/ref/gen_tar.sh)", huge);
    else if (tar_index_open(huge, &u) != FTL_E_FORMAT) ftl_test_fail(__FILE__, __LINE__, "%s accepted", huge);
    else CHECK_CONTAINS(ftl_last_error(), "member 'c/000001.bin' (header at byte 0): its 1099511627776 bytes of data run past the end");
    tar_index_close(u);
    free(huge);
    free(bad);
    free(data);
    tar_index_close(t);
    free(shard);
}

/* Shards written by hand: the cases GNU tar never writes. */
TEST(tar_index_refuses_what_it_cannot_read_faithfully) {
    const char *dir = ftl_test_scratch_dir();
    char *path = ftl_format("%s/hand.tar", dir);
    tar_test_bytes b = {0};
    /* a global pax header that would rename every member */
    const char *global = "12 path=abc\n";
    tar_test_append_member(&b, "pax_global_header", 'g', global, strlen(global), 0);
    tar_test_append_member(&b, "x.bin", '0', NULL, 10, 1);
    tar_test_append_end(&b);
    expect_failure(path, b.data, b.size, 0, NULL, 0, FTL_E_UNSUPPORTED, (const char *[]){path, "global 'path' record", NULL});
    /* a global header with other records is fine */
    free(b.data), b = (tar_test_bytes){0};
    const char *comment = "19 comment=a shard\n";
    tar_test_append_member(&b, "pax_global_header", 'g', comment, strlen(comment), 0);
    tar_test_append_member(&b, "x.bin", '0', NULL, 10, 1);
    tar_test_append_end(&b);
    tar_test_write_bytes(path, b.data, b.size);
    tar_index *t = NULL;
    CHECK_OK(tar_index_open(path, &t));
    if (t) CHECK_EQ_INT(t->count, 1);
    tar_index_close(t);
    /* GNU sparse, old style and pax style */
    free(b.data), b = (tar_test_bytes){0};
    tar_test_append_member(&b, "s.bin", 'S', NULL, 10, 1);
    tar_test_append_end(&b);
    expect_failure(path, b.data, b.size, 0, NULL, 0, FTL_E_UNSUPPORTED, (const char *[]){"member 's.bin'", "sparse", NULL});
    free(b.data), b = (tar_test_bytes){0};
    const char *sparse = "22 GNU.sparse.major=1\n";
    tar_test_append_member(&b, "PaxHeaders/s", 'x', sparse, strlen(sparse), 0);
    tar_test_append_member(&b, "s.bin", '0', NULL, 10, 1);
    tar_test_append_end(&b);
    expect_failure(path, b.data, b.size, 0, NULL, 0, FTL_E_UNSUPPORTED, (const char *[]){"sparse", NULL});
    /* a long-name header over 1 MiB is damage, not a name */
    free(b.data), b = (tar_test_bytes){0};
    tar_test_append_member(&b, "././@LongLink", 'L', NULL, (1 << 20) + 1, 2);
    tar_test_append_member(&b, "x.bin", '0', NULL, 10, 1);
    tar_test_append_end(&b);
    expect_failure(path, b.data, b.size, 0, NULL, 0, FTL_E_FORMAT, (const char *[]){"GNU long-name header at byte 0", "1048577", NULL});
    /* a member with an empty name */
    free(b.data), b = (tar_test_bytes){0};
    tar_test_append_member(&b, "", '0', NULL, 10, 1);
    tar_test_append_end(&b);
    expect_failure(path, b.data, b.size, 0, NULL, 0, FTL_E_FORMAT, (const char *[]){"the member at byte 0 has an empty name", NULL});
    free(b.data);
    free(path);
}

TEST(tar_index_empty_compressed_and_foreign_files) {
    const char *dir = ftl_test_scratch_dir();
    char *path = ftl_format("%s/x.tar", dir);
    /* empty, and only end-of-archive blocks: no members */
    static const uint8_t zeros[10240];
    for (int i = 0; i < 2; i++) {
        tar_test_write_bytes(path, zeros, i ? sizeof zeros : 0);
        tar_index *t = NULL;
        CHECK_OK(tar_index_open(path, &t));
        if (t) CHECK_EQ_INT(t->count, 0);
        tar_index_close(t);
    }
    /* gzip: named as such */
    static const uint8_t gz[20] = {0x1f, 0x8b, 8, 0};
    expect_failure(path, gz, sizeof gz, 0, NULL, 0, FTL_E_UNSUPPORTED, (const char *[]){path, "compressed with gzip", NULL});
    /* a JPEG is not a tar file */
    char *jpeg = ftl_format("%s/data/hymenoptera/train/ants/0013035.jpg", ftl_test_shared_dir());
    size_t n;
    uint8_t *photo = tar_test_read(jpeg, &n);
    if (photo) expect_failure(path, photo, n, 0, NULL, 0, FTL_E_FORMAT, (const char *[]){path, "header at byte 0", "not a tar file", NULL});
    free(photo);
    free(jpeg);
    /* a folder, and a missing file */
    tar_index *t = NULL;
    CHECK(tar_index_open(dir, &t) == FTL_E_INVALID_ARG);
    CHECK_CONTAINS(ftl_last_error(), "is not a file");
    char *missing = ftl_format("%s/missing.tar", dir);
    CHECK(tar_index_open(missing, &t) == FTL_E_NOT_FOUND);
    CHECK_CONTAINS(ftl_last_error(), missing);
    CHECK(t == NULL);
    free(missing);
    free(path);
}

/* How many bytes this process has read (rchar of /proc/self/io), or -1. */
static long long bytes_read_so_far(void) {
    FILE *f = fopen("/proc/self/io", "r");
    if (!f) return -1;
    char line[128];
    long long v = -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "rchar: %lld", &v) == 1) break;
    fclose(f);
    return v;
}

TEST(tar_index_reads_headers_not_data) {
    const char *dir = ftl_test_scratch_dir();
    char *path = ftl_format("%s/big.tar", dir);
    tar_test_bytes b = {0};
    for (int i = 0; i < 4; i++) {
        char name[32];
        snprintf(name, sizeof name, "%06d.jpg", i);
        tar_test_append_member(&b, name, '0', NULL, 8 << 20, (unsigned)i);
    }
    tar_test_append_end(&b);
    tar_test_write_bytes(path, b.data, b.size);
    long long before = bytes_read_so_far();
    tar_index *t = NULL;
    CHECK_OK(tar_index_open(path, &t));
    long long after = bytes_read_so_far();
    if (before < 0 || after < 0) ftl_test_skip("io", "/proc/self/io cannot be read here");
    else CHECK(after - before < 64 * 1024); /* 5 headers of 512 bytes, of a 32 MiB file */
    if (t) {
        CHECK_EQ_INT(t->count, 4);
        uint8_t *data;
        size_t n;
        CHECK_OK(tar_index_read(t, 3, &data, &n));
        CHECK(n == (8u << 20) && memcmp(data, b.data + 3 * (512 + (8 << 20)) + 512, n) == 0);
        free(data);
        CHECK(tar_index_read(t, 4, &data, &n) == FTL_E_INVALID_ARG);
    }
    tar_index_close(t);
    free(b.data);
    free(path);
}

typedef struct reader_job {
    const tar_index *t;
    const uint8_t *shard;
    int start, failures;
} reader_job;

static void *read_all_members(void *arg) {
    reader_job *job = arg;
    for (size_t k = 0; k < 3 * job->t->count; k++) {
        size_t i = (k + (size_t)job->start) % job->t->count;
        uint8_t *data;
        size_t n;
        const tar_member *m = &job->t->members[i];
        if (tar_index_read(job->t, i, &data, &n) != FTL_OK || n != m->size || memcmp(data, job->shard + m->data_offset, n) != 0)
            job->failures++;
        free(data);
    }
    return NULL;
}

TEST(tar_index_reads_members_from_several_threads) {
    const char *dir = ftl_test_scratch_dir();
    char *path = ftl_format("%s/many.tar", dir);
    tar_test_bytes b = {0};
    for (int i = 0; i < 200; i++) {
        char name[32];
        snprintf(name, sizeof name, "s/%06d.jpg", i);
        tar_test_append_member(&b, name, '0', NULL, (size_t)(i * 97 % 3000), (unsigned)i);
    }
    tar_test_append_end(&b);
    tar_test_write_bytes(path, b.data, b.size);
    tar_index *t = NULL;
    CHECK_OK(tar_index_open(path, &t));
    if (t) {
        pthread_t threads[4];
        reader_job jobs[4];
        for (int i = 0; i < 4; i++) {
            jobs[i] = (reader_job){t, b.data, i * 50, 0};
            pthread_create(&threads[i], NULL, read_all_members, &jobs[i]);
        }
        for (int i = 0; i < 4; i++) {
            pthread_join(threads[i], NULL);
            CHECK_EQ_INT(jobs[i].failures, 0);
        }
    }
    tar_index_close(t);
    free(b.data);
    free(path);
}

TEST(tar_quote_escapes_and_cuts) {
    char out[32];
    tar_quote("a\nb'\xc3\xa9\xff", 7, out, sizeof out);
    CHECK_STR_EQ(out, "'a\\x0ab\\x27\xc3\xa9\\xff'");
    tar_quote("0123456789012345678901234567890123456789", 40, out, 16);
    CHECK_STR_EQ(out, "'0123456789...'");
    CHECK(strlen(out) < 16);
}
