/* A tiny test harness: each test binary runs its cases and ends with the line
 * "N passed, N failed"; it exits non-zero when anything failed.
 *
 *     static void test_add(void) { CHECK(1 + 1 == 2); CHECK_NEAR(x, 1.0, 1e-6); }
 *     int main(void) { RUN(test_add); return test_summary(); }
 */
#ifndef ZT_TEST_H
#define ZT_TEST_H

#include <math.h>
#include <stdio.h>

static int test_passed, test_failed, test_case_failed;

/* A sweep that repeats one computation many times (finite differences over every parameter)
 * takes every TEST_SAN_STRIDE-th step under the sanitizers (make SAN=1): they catch a bad access
 * in the first pass of the code, and the plain build runs the whole sweep. */
#ifdef __SANITIZE_ADDRESS__
#define TEST_SAN_STRIDE 16
#else
#define TEST_SAN_STRIDE 1
#endif

#define CHECK(cond)                                                                  \
    do {                                                                             \
        if (!(cond)) {                                                               \
            fprintf(stderr, "  FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond);        \
            test_case_failed = 1;                                                    \
        }                                                                            \
    } while (0)

#define CHECK_MSG(cond, ...)                                                         \
    do {                                                                             \
        if (!(cond)) {                                                               \
            fprintf(stderr, "  FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);        \
            fprintf(stderr, __VA_ARGS__);                                            \
            fputc('\n', stderr);                                                     \
            test_case_failed = 1;                                                    \
        }                                                                            \
    } while (0)

#define CHECK_NEAR(a, b, tol)                                                        \
    do {                                                                             \
        double a_ = (a), b_ = (b);                                                   \
        if (!(fabs(a_ - b_) <= (tol)) ) {                                            \
            fprintf(stderr, "  FAIL %s:%d: %s = %.9g, %s = %.9g (tol %g)\n", __FILE__, \
                    __LINE__, #a, a_, #b, b_, (double)(tol));                        \
            test_case_failed = 1;                                                    \
        }                                                                            \
    } while (0)

#define RUN(fn)                                                                      \
    do {                                                                             \
        test_case_failed = 0;                                                        \
        fn();                                                                        \
        if (test_case_failed) {                                                      \
            test_failed++;                                                           \
            fprintf(stderr, "not ok %s\n", #fn);                                     \
        } else {                                                                     \
            test_passed++;                                                           \
            fprintf(stderr, "ok %s\n", #fn);                                         \
        }                                                                            \
    } while (0)

/* Writes text to path (a test fixture); a failure to write fails the test. */
static inline void test_write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (!f) return;
    fputs(text, f);
    fclose(f);
}

static inline int test_summary(void)
{
    printf("%d passed, %d failed\n", test_passed, test_failed);
    return test_failed ? 1 : 0;
}

#endif
