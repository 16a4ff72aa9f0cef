/* testutil.h - small helpers shared by the Check suites. */
#ifndef SY_TESTUTIL_H
#define SY_TESTUTIL_H

#include "switchyard.h"

#include <check.h>
#include <stddef.h>

/* Check's ck_assert_msg (which every ck_assert_* expands to) calls
 * _mark_point on each assertion that holds: a message written to Check's
 * temporary file, the whole file read back at the test's end into a buffer
 * grown 8 KiB at a time, quadratic in the assertions a test makes (under
 * ASan most of a suite's time when it asserts in a loop). With CK_FORK=no
 * (tests/meson.build) nothing uses those points: a test that crashes takes
 * the runner with it. Here an assertion that holds does nothing; one that
 * fails fails as Check's, with the same message. */
#undef ck_assert_msg
#define ck_assert_msg(expr, ...)                                               \
    ((expr) ? (void)0                                                          \
            : _ck_assert_failed(__FILE__, __LINE__,                            \
                                "Assertion '" #expr "' failed", __VA_ARGS__))

/* Read a whole file (path relative to $SY_TEST_DATA unless absolute).
 * Returns a malloc'd NUL-terminated buffer; *len gets its length. */
char *sy_test_read(const char *path, size_t *len);
/* Full path of a file under $SY_TEST_DATA (static buffer). */
const char *sy_test_data(const char *rel);
/* $SY_STRESS_SCALE (>= 1). */
int sy_test_scale(void);
/* Run one suite, TAP to stdout; returns the process exit status. */
int sy_test_run(Suite *s);
/* A test this build cannot run (a sanitizer's build without the arena,
 * say): left unregistered, and told by sy_test_run as "ok N - name # SKIP
 * why", so it is counted as skipped, never as passed. `name` and `why`
 * must outlive the run (literals). */
void sy_test_skip(const char *name, const char *why);

/* Allocator hooks that count: `live` blocks now, `total` blocks ever, and
 * `calls` allocations since `calls` was last reset; when `fail_at` is set
 * (1-based), allocation number fail_at returns NULL. For leak checks and
 * fault injection. */
typedef struct sy_test_alloc {
    long calls, fail_at, live, total;
} sy_test_alloc;
sy_allocator sy_test_allocator(sy_test_alloc *c);

/* A router with default options and one source "s" holding `doc` (len
 * bytes; none when doc is NULL); the test fails with the apply's error
 * message if the document is refused. */
sy_router *sy_test_router(const char *doc, size_t len);

/* A host pattern of 65,520 labels "{a}" then 4 labels of five variables
 * each ("{a}-{a}-{a}-{a}-{a}"): the 65,536th variable, one past a
 * pattern's most, is in the 4th of those, which starts at offset
 * SY_TEST_VARS_OVER_AT. malloc'd; the caller frees it. */
#define SY_TEST_VARS_OVER_AT ((size_t)65520 * 4 + 3 * 20)
char *sy_test_host_over_vars(void);

#endif
