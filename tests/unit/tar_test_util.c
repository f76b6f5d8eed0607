/* Helpers for the tar index and WebDataset unit tests (see tar_test_util.h). */
#include "tar_test_util.h"
#include "test.h"
#include "util/alloc.h"
#include "util/fsutil.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

const char *tar_test_no_gnu_tar_reason(void) {
    static int checked, missing;
    if (!checked) {
        missing = system("tar --version 2>/dev/null | grep -q 'GNU tar'") != 0;
        checked = 1;
    }
    return missing ? "GNU tar (the reference that makes the shards) is not installed" : NULL;
}

bool tar_test_sh(const char *fmt, ...) {
    char cmd[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    if (system(cmd) == 0) return true;
    return ftl_test_fail(__FILE__, __LINE__, "command failed: %s", cmd);
}

static void make_parent(const char *path) {
    char *folder = ftl_path_folder(path);
    if (ftl_make_dirs(folder) != FTL_OK) ftl_test_fail(__FILE__, __LINE__, "cannot make %s: %s", folder, ftl_last_error());
    free(folder);
}

void tar_test_write_bytes(const char *path, const void *data, size_t size) {
    make_parent(path);
    FILE *f = fopen(path, "wb");
    if (!f || (size && fwrite(data, 1, size, f) != size)) ftl_test_fail(__FILE__, __LINE__, "cannot write %s", path);
    if (f) fclose(f);
}

static void fill_payload(uint8_t *p, size_t size, unsigned seed) {
    for (size_t i = 0; i < size; i++) p[i] = (uint8_t)(i * 131u + seed * 7u + (i >> 8));
}

void tar_test_write_payload(const char *root, const char *relative, size_t size, unsigned seed) {
    uint8_t *p = ftl_xmalloc(size ? size : 1);
    fill_payload(p, size, seed);
    char *path = ftl_format("%s/%s", root, relative);
    tar_test_write_bytes(path, p, size);
    free(path);
    free(p);
}

void tar_test_write_text(const char *root, const char *relative, const char *text) {
    char *path = ftl_format("%s/%s", root, relative);
    tar_test_write_bytes(path, text, strlen(text));
    free(path);
}

uint8_t *tar_test_read(const char *path, size_t *size) {
    uint8_t *data = NULL;
    if (ftl_read_file(path, &data, size) != FTL_OK) {
        ftl_test_fail(__FILE__, __LINE__, "cannot read %s: %s", path, ftl_last_error());
        return NULL;
    }
    return data;
}

bool tar_test_list(const char *shard, tar_test_entry **entries, size_t *count, size_t *links, size_t *others) {
    *entries = NULL;
    *count = *links = *others = 0;
    char *cmd = ftl_format("LC_ALL=C tar --quoting-style=literal -tvf '%s'", shard);
    FILE *p = popen(cmd, "r");
    free(cmd);
    if (!p) return ftl_test_fail(__FILE__, __LINE__, "cannot run tar -tvf %s", shard);
    char line[16384];
    size_t cap = 0;
    while (fgets(line, sizeof line, p)) {
        line[strcspn(line, "\n")] = '\0';
        /* -rw-r--r-- root/root       513 2024-12-06 23:37 ./sub/000002.jpg */
        char mode[32], owner[256], date[32], time[32];
        unsigned long long size;
        int name_at = 0;
        if (sscanf(line, "%31s %255s %llu %31s %31s %n", mode, owner, &size, date, time, &name_at) != 5 || !name_at) {
            ftl_test_fail(__FILE__, __LINE__, "unexpected tar -tvf line: %s", line);
            continue;
        }
        if (mode[0] == 'h' || mode[0] == 'l') (*links)++;
        else if (mode[0] != '-' && mode[0] != 'd') (*others)++;
        if (mode[0] != '-') continue;
        if (*count == cap) {
            cap = cap ? 2 * cap : 16;
            *entries = ftl_xrealloc(*entries, cap * sizeof **entries);
        }
        (*entries)[(*count)++] = (tar_test_entry){ftl_strdup(line + name_at), size};
    }
    int rc = pclose(p);
    if (rc != 0) return ftl_test_fail(__FILE__, __LINE__, "tar -tvf %s exited with %d", shard, rc);
    return true;
}

void tar_test_entries_free(tar_test_entry *entries, size_t count) {
    for (size_t i = 0; i < count; i++) free(entries[i].name);
    free(entries);
}

void tar_test_check_against_gnu_tar(const tar_index *t, const char *shard, const char *root, const char *what) {
    tar_test_entry *e;
    size_t n, links, others;
    if (!tar_test_list(shard, &e, &n, &links, &others)) return;
    if (t->count != n) ftl_test_fail(__FILE__, __LINE__, "%s: the index has %zu members, tar -tvf lists %zu", what, t->count, n);
    if (t->links_skipped != links || t->others_skipped != others)
        ftl_test_fail(__FILE__, __LINE__, "%s: skipped %zu links and %zu others, tar -tvf lists %zu and %zu", what, t->links_skipped,
                      t->others_skipped, links, others);
    for (size_t i = 0; i < n && i < t->count; i++) {
        const tar_member *m = &t->members[i];
        if (strcmp(m->name, e[i].name) != 0 || m->size != e[i].size) {
            ftl_test_fail(__FILE__, __LINE__, "%s: member %zu is '%s' (%llu bytes), tar -tvf says '%s' (%llu bytes)", what, i, m->name,
                          (unsigned long long)m->size, e[i].name, e[i].size);
            continue;
        }
        uint8_t *got;
        size_t got_size, want_size;
        if (tar_index_read(t, i, &got, &got_size) != FTL_OK) {
            ftl_test_fail(__FILE__, __LINE__, "%s: reading '%s': %s", what, m->name, ftl_last_error());
            continue;
        }
        char *original = ftl_format("%s/%s", root, m->name);
        uint8_t *want = tar_test_read(original, &want_size);
        if (want && (got_size != want_size || memcmp(got, want, got_size) != 0))
            ftl_test_fail(__FILE__, __LINE__, "%s: the bytes of '%s' differ from %s", what, m->name, original);
        free(want);
        free(original);
        free(got);
    }
    tar_test_entries_free(e, n);
}

void tar_test_fix_checksum(uint8_t h[512]) {
    memset(h + 148, ' ', 8);
    unsigned sum = 0;
    for (int i = 0; i < 512; i++) sum += h[i];
    snprintf((char *)h + 148, 8, "%06o", sum); /* six digits, NUL, and the space left in place */
}

void tar_test_header(uint8_t h[512], const char *name, uint64_t size, char type) {
    memset(h, 0, 512);
    memcpy(h, name, strnlen(name, 100));
    memcpy(h + 100, "0000644", 8);
    memcpy(h + 108, "0000000", 8);
    memcpy(h + 116, "0000000", 8);
    snprintf((char *)h + 124, 12, "%011llo", (unsigned long long)size);
    memcpy(h + 136, "14530000000", 12);
    h[156] = (uint8_t)type;
    memcpy(h + 257, "ustar\0" "00", 8);
    tar_test_fix_checksum(h);
}

void tar_test_append(tar_test_bytes *b, const void *data, size_t size) {
    b->data = ftl_xrealloc(b->data, b->size + size + 1);
    if (size) memcpy(b->data + b->size, data, size);
    b->size += size;
}

void tar_test_append_member(tar_test_bytes *b, const char *name, char type, const void *data, size_t size, unsigned seed) {
    uint8_t h[512];
    tar_test_header(h, name, size, type);
    tar_test_append(b, h, 512);
    uint8_t *body = ftl_xcalloc(1, size + 512);
    if (data) memcpy(body, data, size);
    else fill_payload(body, size, seed);
    tar_test_append(b, body, (size + 511) / 512 * 512);
    free(body);
}

void tar_test_append_end(tar_test_bytes *b) {
    static const uint8_t zeros[1024];
    tar_test_append(b, zeros, sizeof zeros);
}
