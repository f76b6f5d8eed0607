/* Outputs that are inputs (util/io_check), publishing without replacing (util/publish), and
 * temporaries locked by their writers and swept when the writer is gone (util/temporaries). */
#include "test.h"
#include "util/alloc.h"
#include "util/error.h"
#include "util/fsutil.h"
#include "util/io_check.h"
#include "util/publish.h"
#include "util/temporaries.h"

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char *touch(const char *dir, const char *name, const char *text) {
    char *p = ftl_format("%s/%s", dir, name);
    FILE *f = fopen(p, "wb");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
    return p;
}

static char *read_text(const char *path) {
    uint8_t *data;
    size_t size;
    if (ftl_read_file(path, &data, &size) != FTL_OK) return NULL;
    char *s = ftl_xmalloc(size + 1);
    memcpy(s, data, size);
    s[size] = 0;
    free(data);
    return s;
}

/* One output against one input: whether the check refuses, and the message names both. */
static bool refuses(const char *out, const char *in) {
    ftl_io_check *c = ftl_io_check_new("t");
    ftl_io_check_output(c, "OUT", out);
    ftl_io_check_input(c, "IN", in);
    ftl_status st = ftl_io_check_run(c);
    ftl_io_check_free(c);
    if (st == FTL_OK) return false;
    CHECK_EQ_INT(st, FTL_E_INVALID_ARG);
    CHECK(strstr(ftl_last_error(), out) && strstr(ftl_last_error(), in));
    return true;
}

TEST(io_check_resolves_links_dots_and_missing_folders) {
    const char *d = ftl_test_scratch_dir();
    char *data = touch(d, "data.parquet", "x");
    char *other = touch(d, "other.parquet", "y");
    char *sym = ftl_format("%s/sym.parquet", d), *hard = ftl_format("%s/hard.parquet", d);
    REQUIRE(symlink(data, sym) == 0 && link(data, hard) == 0);
    char *dots = ftl_format("%s/sub/../data.parquet", d);
    char *sub = ftl_format("%s/sub", d);
    mkdir(sub, 0777);
    CHECK(refuses(data, data));
    CHECK(refuses(sym, data));
    CHECK(refuses(hard, data));
    CHECK(refuses(dots, data));
    CHECK(!refuses(other, data));
    /* outputs that do not exist yet, under folders that do not exist yet, compared as resolved text */
    char *a = ftl_format("%s/new/x/m.ftl", d), *b = ftl_format("%s/new/y/../x/./m.ftl", d);
    ftl_io_check *c = ftl_io_check_new("t");
    ftl_io_check_output(c, "--out", a);
    ftl_io_check_output(c, "--log", b);
    CHECK(ftl_io_check_run(c) == FTL_E_INVALID_ARG && strstr(ftl_last_error(), "is also the output"));
    ftl_io_check_free(c);
    /* an output inside an input folder (a dataset of parts) */
    char *part = ftl_format("%s/part-0.parquet", sub);
    CHECK(refuses(part, sub));
    CHECK(ftl_io_same_path(sym, hard));
    CHECK(!ftl_io_same_path(data, other));
    free(data), free(other), free(sym), free(hard), free(dots), free(sub), free(a), free(b), free(part);
}

TEST(io_check_patterns_and_output_folders) {
    const char *d = ftl_test_scratch_dir();
    char *ck2 = touch(d, "c-2.ckpt", "x");
    char *pattern = ftl_format("%s/c-{epoch:03d}.ckpt", d), *plain = ftl_format("%s/c-{epoch}.ckpt", d);
    ftl_io_check *c = ftl_io_check_new("t");
    ftl_io_check_output_pattern(c, "--checkpoint", plain);
    ftl_io_check_input(c, "TRAIN", ck2);
    CHECK(ftl_io_check_run(c) == FTL_E_INVALID_ARG && strstr(ftl_last_error(), "would overwrite the input TRAIN"));
    ftl_io_check_free(c);
    c = ftl_io_check_new("t"); /* --resume under its own pattern continues after it */
    ftl_io_check_output_pattern(c, "--checkpoint", pattern);
    ftl_io_check_input(c, "--resume", ck2);
    ftl_io_check_allow_pattern_input(c, "--resume");
    CHECK(ftl_io_check_run(c) == FTL_OK);
    ftl_io_check_free(c);
    c = ftl_io_check_new("t"); /* a cache folder writes *.features.parquet there, nothing else */
    static const char *const suffixes[] = {"*.features.parquet", NULL};
    char *feat = touch(d, "a.features.parquet", "x"), *keep = touch(d, "a.parquet", "x");
    ftl_io_check_output_folder(c, "--cache-dir", d, suffixes);
    ftl_io_check_input(c, "TRAIN", keep);
    CHECK(ftl_io_check_run(c) == FTL_OK);
    ftl_io_check_input(c, "--val", feat);
    CHECK(ftl_io_check_run(c) == FTL_E_INVALID_ARG && strstr(ftl_last_error(), "would write over the input --val"));
    CHECK(ftl_io_check_writes_into(c, d));
    ftl_io_check_free(c);
    free(ck2), free(pattern), free(plain), free(feat), free(keep);
}

TEST(publish_never_replaces_without_overwrite) {
    const char *d = ftl_test_scratch_dir();
    char *final = touch(d, "m.ftl", "theirs");
    char *temp = touch(d, "m.ftl.tmp-1-1", "mine");
    ftl_status st = ftl_publish(temp, final, false);
    CHECK_EQ_INT(st, FTL_E_EXISTS);
    char *kept = ftl_format("%s/m-2.ftl", d);
    CHECK(strstr(ftl_last_error(), kept) != NULL);
    char *theirs = read_text(final), *mine = read_text(kept);
    CHECK_STR_EQ(theirs, "theirs");
    CHECK_STR_EQ(mine, "mine");
    CHECK(!ftl_path_exists(temp));
    free(theirs), free(mine), free(temp);
    /* the next free name: m-3.ftl */
    temp = touch(d, "m.ftl.tmp-1-2", "third");
    CHECK_EQ_INT(ftl_publish(temp, final, false), FTL_E_EXISTS);
    char *kept3 = ftl_format("%s/m-3.ftl", d);
    CHECK(ftl_path_exists(kept3));
    free(temp);
    /* replace: the last writer wins */
    temp = touch(d, "m.ftl.tmp-1-3", "last");
    CHECK_EQ_INT(ftl_publish(temp, final, true), FTL_OK);
    theirs = read_text(final);
    CHECK_STR_EQ(theirs, "last");
    free(theirs), free(temp), free(final), free(kept), free(kept3);
}

TEST(publish_folders_swap_or_keep) {
    const char *d = ftl_test_scratch_dir();
    char *final = ftl_format("%s/ds", d), *temp = ftl_format("%s/ds.tmp-1-1", d);
    REQUIRE(mkdir(final, 0777) == 0 && mkdir(temp, 0777) == 0);
    free(touch(final, "train.parquet", "old"));
    free(touch(temp, "train.parquet", "new"));
    CHECK_EQ_INT(ftl_publish(temp, final, false), FTL_E_EXISTS);
    char *kept = ftl_format("%s/ds-2/train.parquet", d), *now = ftl_format("%s/train.parquet", final);
    char *k = read_text(kept), *n = read_text(now);
    CHECK_STR_EQ(k, "new");
    CHECK_STR_EQ(n, "old");
    free(k), free(n);
    REQUIRE(mkdir(temp, 0777) == 0);
    free(touch(temp, "train.parquet", "newer"));
    CHECK_EQ_INT(ftl_publish(temp, final, true), FTL_OK);
    n = read_text(now);
    CHECK_STR_EQ(n, "newer");
    CHECK(!ftl_path_exists(temp)); /* the old folder swapped out and removed */
    free(n), free(kept), free(now), free(final), free(temp);
}

TEST(temporaries_names_and_locks) {
    CHECK(ftl_temp_name_matches("m.ftl.tmp-123-0"));
    CHECK(ftl_temp_name_matches("out.tmp-1-2.tmp-3-4"));
    CHECK(!ftl_temp_name_matches(".tmp-1-2"));
    CHECK(!ftl_temp_name_matches("m.ftl.tmp-123-0~"));
    CHECK(!ftl_temp_name_matches("m.ftl.tmp-12a-0"));
    CHECK(!ftl_temp_name_matches("m.ftl.tmp-123"));
    CHECK(!ftl_temp_name_matches("notes.tmp"));
    const char *d = ftl_test_scratch_dir();
    char *final = ftl_format("%s/out.parquet", d), *temp = NULL;
    int fd = -1;
    REQUIRE(ftl_temp_file_create(final, &temp, &fd) == FTL_OK);
    CHECK(ftl_temp_name_matches(ftl_path_file_name(temp)));
    /* another process cannot take the lock while this one holds it */
    pid_t child = fork();
    if (child == 0) {
        int f = open(temp, O_RDONLY);
        _exit(f >= 0 && flock(f, LOCK_EX | LOCK_NB) != 0 ? 0 : 1);
    }
    int status = 0;
    waitpid(child, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    close(fd);
    unlink(temp);
    free(temp), free(final);
}

TEST(temporaries_sweep_takes_only_dead_writers) {
    const char *d = ftl_test_scratch_dir();
    char *sub = ftl_format("%s/sweep", d);
    mkdir(sub, 0777);
    /* a dead writer's file and folder (nobody holds them), a live one (a child holds its lock),
     * and files of other programs that merely look alike */
    char *dead = touch(sub, "m.ftl.tmp-99999-0", "0123456789");
    char *dead_dir = ftl_format("%s/ds.tmp-99999-1", sub);
    mkdir(dead_dir, 0777);
    free(touch(dead_dir, "train.parquet", "01234"));
    char *live = touch(sub, "c.ckpt.tmp-1-7", "live");
    char *lookalikes[] = {touch(sub, "notes.tmp", "x"), touch(sub, "m.ftl.tmp-1", "x"), touch(sub, "m.ftl", "x")};
    int pipefd[2];
    REQUIRE(pipe(pipefd) == 0);
    pid_t child = fork();
    if (child == 0) {
        int f = open(live, O_RDONLY);
        char c = flock(f, LOCK_EX) == 0 ? 'y' : 'n';
        if (write(pipefd[1], &c, 1) != 1) _exit(1);
        pause(); /* holds the lock until killed */
        _exit(0);
    }
    char c = 0;
    REQUIRE(read(pipefd[0], &c, 1) == 1 && c == 'y');
    uint64_t bytes = ftl_temporaries_sweep(sub);
    CHECK_EQ_INT(bytes, 15);
    CHECK(!ftl_path_exists(dead) && !ftl_path_exists(dead_dir));
    CHECK(ftl_path_exists(live));
    for (int i = 0; i < 3; i++) CHECK(ftl_path_exists(lookalikes[i]));
    CHECK_EQ_INT(ftl_temporaries_sweep(sub), 0); /* once per folder and process */
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
    close(pipefd[0]), close(pipefd[1]);
    for (int i = 0; i < 3; i++) free(lookalikes[i]);
    free(dead), free(dead_dir), free(live), free(sub);
}
