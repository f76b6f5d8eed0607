/* Minimal unit-test framework: TEST(name) registers itself; CHECK* record a failure with file:line
 * and continue; REQUIRE* stop the test. The runner prints `N passed, N failed`. */
#ifndef FTL_TEST_H
#define FTL_TEST_H

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

typedef void (*ftl_test_fn)(void);
void ftl_test_register(const char *name, const char *file, ftl_test_fn fn);
/* Records a failure; returns false so macros can be used in conditions. */
bool ftl_test_fail(const char *file, int line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* A check that cannot run here: printed as `skip TEST-WHAT: reason`, counted as skipped, never as
 * passed (the rest of the test still runs and passes or fails). */
void ftl_test_skip(const char *what, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The reason bf16 cannot run on this CPU, or NULL when it can. */
const char *ftl_test_no_bf16_reason(void);
const char *ftl_test_no_int8_reason(void);
/* Why oneDNN's AVX-512 kernels (bf16, Winograd) cannot run here, or NULL. */
const char *ftl_test_no_avx512_reason(void);
/* Paths the tests use: ../shared (SHARED) and a scratch folder under the build folder. */
const char *ftl_test_shared_dir(void);
const char *ftl_test_build_dir(void);
/* A fresh empty scratch folder for the running test: BUILD/test-tmp/<test name>. */
const char *ftl_test_scratch_dir(void);

#define TEST(name)                                                                   \
    static void test_##name(void);                                                   \
    __attribute__((constructor)) static void register_##name(void) {                 \
        ftl_test_register(#name, __FILE__, test_##name);                             \
    }                                                                                \
    static void test_##name(void)

#define CHECK(cond) ((cond) ? true : ftl_test_fail(__FILE__, __LINE__, "CHECK(%s) failed", #cond))
#define REQUIRE(cond) do { if (!CHECK(cond)) return; } while (0)

#define CHECK_EQ_INT(a, b)                                                                        \
    do {                                                                                          \
        long long check_a_ = (long long)(a), check_b_ = (long long)(b);                           \
        if (check_a_ != check_b_)                                                                 \
            ftl_test_fail(__FILE__, __LINE__, "%s == %s failed: %lld != %lld", #a, #b, check_a_, check_b_); \
    } while (0)

#define CHECK_NEAR(a, b, tol)                                                                     \
    do {                                                                                          \
        double check_a_ = (double)(a), check_b_ = (double)(b);                                    \
        if (!(fabs(check_a_ - check_b_) <= (tol)))                                                \
            ftl_test_fail(__FILE__, __LINE__, "%s ~= %s failed: %.9g vs %.9g (tol %g)", #a, #b,   \
                          check_a_, check_b_, (double)(tol));                                     \
    } while (0)

#define CHECK_STR_EQ(a, b)                                                                        \
    do {                                                                                          \
        const char *check_a_ = (a), *check_b_ = (b);                                              \
        if (!check_a_ || !check_b_ || strcmp(check_a_, check_b_) != 0)                            \
            ftl_test_fail(__FILE__, __LINE__, "%s == %s failed: \"%s\" vs \"%s\"", #a, #b,        \
                          check_a_ ? check_a_ : "(null)", check_b_ ? check_b_ : "(null)");        \
    } while (0)

#define CHECK_CONTAINS(haystack, needle)                                                          \
    do {                                                                                          \
        const char *check_h_ = (haystack), *check_n_ = (needle);                                  \
        if (!check_h_ || !strstr(check_h_, check_n_))                                             \
            ftl_test_fail(__FILE__, __LINE__, "expected \"%s\" in \"%s\"", check_n_,               \
                          check_h_ ? check_h_ : "(null)");                                        \
    } while (0)

/* Asserts an ftl call succeeded, printing ftl_last_error() otherwise. */
#define CHECK_OK(expr)                                                                            \
    do {                                                                                          \
        ftl_status check_s_ = (expr);                                                             \
        if (check_s_ != FTL_OK)                                                                   \
            ftl_test_fail(__FILE__, __LINE__, "%s failed: %s", #expr, ftl_last_error());          \
    } while (0)
#define REQUIRE_OK(expr)                                                                          \
    do {                                                                                          \
        ftl_status check_s_ = (expr);                                                             \
        if (check_s_ != FTL_OK) {                                                                 \
            ftl_test_fail(__FILE__, __LINE__, "%s failed: %s", #expr, ftl_last_error());          \
            return;                                                                               \
        }                                                                                         \
    } while (0)

#endif
