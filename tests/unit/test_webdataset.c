/* WebDataset samples and labels (src/data/webdataset.c): a shard GNU tar writes from a folder laid
 * out as timm and DALI shards are, grouped by the WebDataset rule (KEY = the path up to the first
 * dot of the file name) against the table the files were written from; every bad label, duplicate
 * extension and scattered key a clear error naming the member (this file runs under ASan + UBSan too). */
#include "test.h"
#include "data/webdataset.h"
#include "tar_test_util.h"
#include "util/alloc.h"

#include <stdlib.h>
#include <string.h>

typedef struct expected_sample {
    const char *key;
    const char *exts; /* space-separated, in shard order */
    webdataset_label_kind kind;
    int32_t index;
    const char *name;
} expected_sample;

typedef struct shard_file {
    const char *path, *text; /* text NULL: 600 payload bytes */
} shard_file;

static const shard_file files[] = {
    {"train/a/000001.jpg", NULL},
    {"train/a/000001.cls", "3\n"},
    {"train/a/000002.png", NULL},
    {"train/a/000002.json", "{\"label\": 2, \"source\": \"web\"}"},
    {"README", "not a sample"},
    {"train/b/000003.jpg", NULL},
    {"train/b/000003.json", "{\"cls\": \"bees\"}"},
    {"train/b/000004.seg.png", NULL},
    {"train/b/000004.jpg", NULL},
    {"train/b/000004.cls", "  7 \r\n"},
    {"train/.hidden", "x"},
    {"train/c/000005.JPEG", NULL},
    {"train/c/000006.jpg", NULL},
    {"train/c/000006.json", "{\"label\": null, \"cls\": 4}"},
    {"train/c/000007.jpg", NULL},
    {"train/c/000007.cls", "-2"},
    {"train/c/000008.jpg", NULL},
    {"train/c/000008.json", "{\"label\": \"ants\", \"cls\": 0}"},
    {"train/c.d/000009.jpg", NULL},
    {"train/c.d/000009.json", "{\"label\": 3.0}"},
};

static const expected_sample expected[] = {
    {"train/a/000001", "jpg cls", WEBDATASET_LABEL_INDEX, 3, NULL},
    {"train/a/000002", "png json", WEBDATASET_LABEL_INDEX, 2, NULL},
    {"train/b/000003", "jpg json", WEBDATASET_LABEL_NAME, 0, "bees"},
    {"train/b/000004", "seg.png jpg cls", WEBDATASET_LABEL_INDEX, 7, NULL},
    {"train/c/000005", "JPEG", WEBDATASET_LABEL_ABSENT, 0, NULL},
    {"train/c/000006", "jpg json", WEBDATASET_LABEL_INDEX, 4, NULL},
    {"train/c/000007", "jpg cls", WEBDATASET_LABEL_INDEX, -2, NULL},
    {"train/c/000008", "jpg json", WEBDATASET_LABEL_NAME, 0, "ants"},
    {"train/c.d/000009", "jpg json", WEBDATASET_LABEL_INDEX, 3, NULL},
};

static void check_sample(const tar_index *t, const webdataset_sample *s, const expected_sample *e) {
    CHECK_STR_EQ(s->key, e->key);
    char exts[128] = "";
    for (size_t j = 0; j < s->part_count; j++) {
        size_t n = strlen(exts);
        snprintf(exts + n, sizeof exts - n, "%s%s", j ? " " : "", s->parts[j].ext);
        /* the member's name is KEY.EXT */
        char *name = ftl_format("%s.%s", s->key, s->parts[j].ext);
        CHECK_STR_EQ(t->members[s->parts[j].member].name, name);
        free(name);
    }
    CHECK_STR_EQ(exts, e->exts);
    webdataset_label label;
    if (webdataset_sample_label(t, s, &label) != FTL_OK) {
        ftl_test_fail(__FILE__, __LINE__, "%s: %s", e->key, ftl_last_error());
        return;
    }
    CHECK_EQ_INT(label.kind, e->kind);
    if (e->kind == WEBDATASET_LABEL_INDEX) CHECK_EQ_INT(label.index, e->index);
    if (e->kind == WEBDATASET_LABEL_NAME) CHECK_STR_EQ(label.name, e->name);
    if (e->kind != WEBDATASET_LABEL_ABSENT) {
        const char *from = t->members[label.member].name;
        CHECK(strncmp(from, e->key, strlen(e->key)) == 0 && from[strlen(e->key)] == '.');
    }
    webdataset_label_free(&label);
}

TEST(webdataset_groups_gnu_tar_shard_by_key_and_reads_labels) {
    const char *why = tar_test_no_gnu_tar_reason();
    if (why) {
        ftl_test_skip("all", "%s", why);
        return;
    }
    const char *dir = ftl_test_scratch_dir();
    char *root = ftl_format("%s/tree", dir), *list = ftl_format("%s/list", dir), *shard = ftl_format("%s/shard.tar", dir);
    FILE *f = fopen(list, "w");
    REQUIRE(f);
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        if (files[i].text) tar_test_write_text(root, files[i].path, files[i].text);
        else tar_test_write_payload(root, files[i].path, 600, (unsigned)i);
        fprintf(f, "%s\n", files[i].path);
    }
    fclose(f);
    tar_index *t = NULL;
    webdataset_sample_list *l = NULL;
    for (int format = 0; format < 2; format++) {
        /* the members in the listed order, as WebDataset writers add them */
        if (!tar_test_sh("tar --format=%s -cf '%s' -C '%s' --no-recursion -T '%s'", format ? "pax" : "gnu", shard, root, list)) break;
        if (tar_index_open(shard, &t) != FTL_OK || webdataset_samples(t, &l) != FTL_OK) {
            ftl_test_fail(__FILE__, __LINE__, "%s", ftl_last_error());
            break;
        }
        CHECK_EQ_INT(t->count, sizeof files / sizeof files[0]);
        CHECK_EQ_INT(l->count, sizeof expected / sizeof expected[0]);
        CHECK_EQ_INT(l->members_without_key, 2); /* README, train/.hidden */
        for (size_t i = 0; i < l->count && i < sizeof expected / sizeof expected[0]; i++) check_sample(t, &l->samples[i], &expected[i]);
        size_t member;
        CHECK(l->count >= 5 && webdataset_sample_find(&l->samples[4], "jpeg", &member) &&
              strcmp(t->members[member].name, "train/c/000005.JPEG") == 0);
        CHECK(l->count >= 5 && !webdataset_sample_find(&l->samples[4], "cls", &member));
        webdataset_samples_free(l);
        l = NULL;
        tar_index_close(t);
        t = NULL;
    }
    webdataset_samples_free(l);
    tar_index_close(t);
    free(shard);
    free(list);
    free(root);
}

/* A shard written by hand from (name, text) pairs; text NULL: 100 payload bytes. */
static tar_index *hand_shard(const char *path, const char *const *pairs) {
    tar_test_bytes b = {0};
    for (size_t i = 0; pairs[i]; i += 2)
        tar_test_append_member(&b, pairs[i], '0', pairs[i + 1], pairs[i + 1] ? strlen(pairs[i + 1]) : 100, (unsigned)i);
    tar_test_append_end(&b);
    tar_test_write_bytes(path, b.data, b.size);
    free(b.data);
    tar_index *t = NULL;
    if (tar_index_open(path, &t) != FTL_OK) ftl_test_fail(__FILE__, __LINE__, "%s", ftl_last_error());
    return t;
}

static void expect_grouping_error(const char *path, const char *const *pairs, const char *const *needles) {
    tar_index *t = hand_shard(path, pairs);
    if (!t) return;
    webdataset_sample_list *l = NULL;
    ftl_status st = webdataset_samples(t, &l);
    if (st != FTL_E_FORMAT) ftl_test_fail(__FILE__, __LINE__, "%s grouped (status %s)", pairs[0], ftl_status_name(st));
    for (const char *const *n = needles; *n && st != FTL_OK; n++) CHECK_CONTAINS(ftl_last_error(), *n);
    CHECK(l == NULL);
    webdataset_samples_free(l);
    tar_index_close(t);
}

TEST(webdataset_refuses_duplicate_extensions_and_scattered_keys) {
    char *path = ftl_format("%s/shard.tar", ftl_test_scratch_dir());
    expect_grouping_error(path, (const char *[]){"a/x.jpg", NULL, "a/x.cls", "1", "a/x.JPG", NULL, NULL},
                          (const char *[]){path, "sample 'a/x' has two members of extension", "'a/x.jpg' and 'a/x.JPG'", NULL});
    expect_grouping_error(path, (const char *[]){"a.jpg", NULL, "b.jpg", NULL, "a.cls", "1", NULL},
                          (const char *[]){path, "key 'a' comes back after other samples", "'a.jpg' and 'a.cls'", "adjacent", NULL});
    /* the same file names in two folders are two keys, and an empty shard has no samples */
    const char *const *cases[] = {(const char *[]){"a/x.jpg", NULL, "b/x.jpg", NULL, "a/y.jpg", NULL, NULL}, (const char *[]){NULL}};
    for (int c = 0; c < 2; c++) {
        tar_index *t = hand_shard(path, cases[c]);
        webdataset_sample_list *l = NULL;
        if (t) CHECK_OK(webdataset_samples(t, &l));
        if (l) CHECK_EQ_INT(l->count, c ? 0 : 3);
        webdataset_samples_free(l);
        tar_index_close(t);
    }
    free(path);
}

typedef struct label_case {
    const char *member, *text;
    webdataset_label_kind kind;
    int32_t index;
    const char *error; /* NULL: valid */
} label_case;

TEST(webdataset_labels_are_parsed_strictly) {
    static const label_case cases[] = {
        {"k.cls", "2147483647", WEBDATASET_LABEL_INDEX, INT32_MAX, NULL},
        {"k.cls", "-2147483648\n", WEBDATASET_LABEL_INDEX, INT32_MIN, NULL},
        {"k.cls", "+5", WEBDATASET_LABEL_INDEX, 5, NULL},
        {"k.cls", "007", WEBDATASET_LABEL_INDEX, 7, NULL},
        {"k.json", "{\"label\": 12, \"cls\": 12}", WEBDATASET_LABEL_INDEX, 12, NULL},
        {"k.json", "{\"caption\": \"an ant\"}", WEBDATASET_LABEL_ABSENT, 0, NULL},
        {"k.json", "{\"label\": null}", WEBDATASET_LABEL_ABSENT, 0, NULL},
        {"k.cls", "abc", 0, 0, "member 'k.cls': label 'abc' is not a decimal integer"},
        {"k.cls", "1 2", 0, 0, "label '1 2' is not a decimal integer"},
        {"k.cls", "3.0", 0, 0, "label '3.0' is not a decimal integer"},
        {"k.cls", "-", 0, 0, "label '-' is not a decimal integer"},
        {"k.cls", " \n", 0, 0, "member 'k.cls': the label is empty"},
        {"k.cls", "", 0, 0, "the label is empty"},
        {"k.cls", "2147483648", 0, 0, "label '2147483648' is out of range for a 32-bit label"},
        {"k.cls", "-2147483649", 0, 0, "out of range"},
        {"k.cls", "99999999999999999999999999999", 0, 0, "out of range"},
        {"k.cls", "\x01\xff", 0, 0, "label '\\x01\\xff' is not a decimal integer"},
        {"k.json", "[1]", 0, 0, "member 'k.json' is a JSON array, expected an object with a \"label\" or \"cls\" field"},
        {"k.json", "{\"label\": true}", 0, 0, "member 'k.json': \"label\" is a JSON boolean, expected an integer or a string"},
        {"k.json", "{\"cls\": [3]}", 0, 0, "\"cls\" is a JSON array"},
        {"k.json", "{\"label\": 3.5}", 0, 0, "\"label\" is 3.5, expected an integer in int32's range"},
        {"k.json", "{\"label\": 1e300}", 0, 0, "expected an integer in int32's range"},
        {"k.json", "{\"label\": -2147483649}", 0, 0, "expected an integer in int32's range"},
        {"k.json", "{\"label\": 3, \"cls\": 4}", 0, 0, "member 'k.json': \"label\" and \"cls\" differ"},
        {"k.json", "{\"label\": \"\"}", 0, 0, "\"label\" is an empty string"},
        {"k.json", "{\"label\": 3", 0, 0, "member 'k.json'"},
    };
    char *path = ftl_format("%s/shard.tar", ftl_test_scratch_dir());
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const label_case *c = &cases[i];
        tar_index *t = hand_shard(path, (const char *[]){"k.jpg", NULL, c->member, c->text, NULL});
        webdataset_sample_list *l = NULL;
        if (t && webdataset_samples(t, &l) != FTL_OK) ftl_test_fail(__FILE__, __LINE__, "case %zu: %s", i, ftl_last_error());
        if (l && l->count == 1) {
            webdataset_label label;
            ftl_status st = webdataset_sample_label(t, &l->samples[0], &label);
            if (c->error) {
                if (st != FTL_E_FORMAT) ftl_test_fail(__FILE__, __LINE__, "case %zu (%s) accepted", i, c->text);
                else {
                    CHECK_CONTAINS(ftl_last_error(), c->error);
                    CHECK_CONTAINS(ftl_last_error(), path);
                }
                CHECK(label.kind == WEBDATASET_LABEL_ABSENT && label.name == NULL);
            } else if (st != FTL_OK) {
                ftl_test_fail(__FILE__, __LINE__, "case %zu (%s): %s", i, c->text, ftl_last_error());
            } else {
                CHECK_EQ_INT(label.kind, c->kind);
                if (c->kind == WEBDATASET_LABEL_INDEX && label.index != c->index)
                    ftl_test_fail(__FILE__, __LINE__, "case %zu (%s): label %d, expected %d", i, c->text, label.index, c->index);
            }
            webdataset_label_free(&label);
        }
        webdataset_samples_free(l);
        tar_index_close(t);
    }
    free(path);
}

TEST(webdataset_label_files_over_1_mib_are_refused) {
    char *path = ftl_format("%s/shard.tar", ftl_test_scratch_dir());
    tar_test_bytes b = {0};
    tar_test_append_member(&b, "k.jpg", '0', NULL, 10, 1);
    char *big = ftl_xmalloc((1 << 20) + 2);
    memset(big, ' ', (1 << 20) + 1);
    big[0] = '1';
    tar_test_append_member(&b, "k.cls", '0', big, (1 << 20) + 1, 0);
    tar_test_append_end(&b);
    tar_test_write_bytes(path, b.data, b.size);
    tar_index *t = NULL;
    webdataset_sample_list *l = NULL;
    CHECK_OK(tar_index_open(path, &t));
    if (t) CHECK_OK(webdataset_samples(t, &l));
    if (l && l->count == 1) {
        webdataset_label label;
        CHECK(webdataset_sample_label(t, &l->samples[0], &label) == FTL_E_FORMAT);
        CHECK_CONTAINS(ftl_last_error(), "member 'k.cls' holds 1048577 bytes, more than the 1048576 a label file may hold");
    }
    webdataset_samples_free(l);
    tar_index_close(t);
    free(big);
    free(b.data);
    free(path);
}
