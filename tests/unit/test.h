/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * The unit-test harness: each tests/unit/test-<module>.c is one program whose
 * main() calls TEST_RUN(fn) for each test and ends with TEST_DONE(). A
 * failed CHECK prints file:line and the expression and marks the test
 * failed; the program exits 1 if any test failed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int test_failed_checks;
static int test_passed;
static int test_failed;

#define CHECK(expr)                                                                     \
        do {                                                                            \
                if (!(expr)) {                                                          \
                        fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #expr); \
                        test_failed_checks++;                                           \
                }                                                               \
        } while (0)

#define CHECK_STREQ(a, b)                                                               \
        do {                                                                            \
                const char *_a = (a), *_b = (b);                                        \
                if (!_a || !_b || strcmp(_a, _b) != 0) {                                \
                        fprintf(stderr, "%s:%d: CHECK failed: %s == %s\n  got:      %s\n  expected: %s\n", \
                                __FILE__, __LINE__, #a, #b, _a ? _a : "(null)", _b ? _b : "(null)"); \
                        test_failed_checks++;                                           \
                }                                                                       \
        } while (0)

#define TEST_RUN(fn)                                                                    \
        do {                                                                            \
                int _before = test_failed_checks;                                       \
                fn();                                                                   \
                if (test_failed_checks == _before) {                                    \
                        test_passed++;                                                  \
                } else {                                                                \
                        test_failed++;                                                  \
                        fprintf(stderr, "FAIL %s\n", #fn);                              \
                }                                                                       \
        } while (0)

#define TEST_DONE()                                                                     \
        do {                                                                            \
                printf("%s: %d passed, %d failed\n", __FILE__, test_passed, test_failed); \
                return test_failed ? 1 : 0;                                             \
        } while (0)
