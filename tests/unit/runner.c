/* Unit-test runner: runs every registered test (or those whose name contains argv[1]) and
 * prints one line per test and `N passed, N failed`; exits 1 on any failure. */
#include "test.h"
#include "ftl/nn.h"
#include "util/fsutil.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

typedef struct registered_test {
    const char *name;
    const char *file;
    ftl_test_fn fn;
} registered_test;

enum { MAX_TESTS = 4096 };
static registered_test tests[MAX_TESTS];
static int test_count;
static int current_failures, skipped;
static bool current_skipped_all; /* the whole test could not run here: a skip, not a pass */
static const char *current_name;
static char scratch_dir[4096];

void ftl_test_register(const char *name, const char *file, ftl_test_fn fn) {
    if (test_count < MAX_TESTS) tests[test_count++] = (registered_test){name, file, fn};
}

bool ftl_test_fail(const char *file, int line, const char *fmt, ...) {
    current_failures++;
    if (current_failures > 20) return false; /* keep a broken loop from flooding the log */
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    printf("  %s:%d: %s\n", file, line, msg);
    return false;
}

void ftl_test_skip(const char *what, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    const char *label = getenv("FTL_TEST_LABEL");
    printf("skip %s%s-%s: %s\n", label ? label : "", current_name, what, msg);
    skipped++;
    if (strcmp(what, "all") == 0) current_skipped_all = true;
}

const char *ftl_test_no_bf16_reason(void) {
    return ftl_nn_cpu_bf16_available() ? NULL : "this CPU has no bf16 kernels in oneDNN (bf16 needs AVX-512)";
}

const char *ftl_test_no_int8_reason(void) {
    return ftl_nn_cpu_int8_fast() ? NULL
                                  : "this CPU has no int8 dot-product instructions (VNNI or AMX): oneDNN's int8 kernels "
                                    "saturate there, so ftl refuses int8 (nn_int8_is_refused_where_its_kernels_saturate)";
}

const char *ftl_test_no_avx512_reason(void) {
    return ftl_nn_cpu_bf16_available() ? NULL : "oneDNN 2.6 has Winograd and bf16 kernels for AVX-512 only, this CPU has AVX2";
}

const char *ftl_test_shared_dir(void) {
    const char *s = getenv("SHARED");
    return s && *s ? s : "../shared";
}

const char *ftl_test_build_dir(void) {
    const char *s = getenv("BUILD");
    return s && *s ? s : "build";
}

const char *ftl_test_scratch_dir(void) {
    snprintf(scratch_dir, sizeof scratch_dir, "%s/test-tmp/%s", ftl_test_build_dir(), current_name);
    ftl_remove_tree(scratch_dir);
    if (ftl_make_dirs(scratch_dir) != FTL_OK) {
        fprintf(stderr, "cannot create scratch folder %s\n", scratch_dir);
        exit(2);
    }
    return scratch_dir;
}

static int compare_tests(const void *a, const void *b) {
    const registered_test *x = a, *y = b;
    int c = strcmp(x->file, y->file);
    return c ? c : strcmp(x->name, y->name);
}

int main(int argc, char **argv) {
    const char *filter = argc > 1 ? argv[1] : NULL;
    const char *label = getenv("FTL_TEST_LABEL");
    qsort(tests, (size_t)test_count, sizeof tests[0], compare_tests);
    int passed = 0, failed = 0;
    for (int i = 0; i < test_count; i++) {
        if (filter && !strstr(tests[i].name, filter)) continue;
        current_failures = 0;
        current_skipped_all = false;
        current_name = tests[i].name;
        tests[i].fn();
        fflush(stdout);
        if (current_failures == 0 && current_skipped_all) continue;
        if (current_failures == 0) {
            passed++;
            printf("ok %s%s\n", label ? label : "", tests[i].name);
        } else {
            failed++;
            printf("FAIL %s%s (%d checks failed)\n", label ? label : "", tests[i].name, current_failures);
        }
        fflush(stdout);
    }
    if (skipped) printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
    else printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
