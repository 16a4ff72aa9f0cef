/* testutil.h - small helpers shared by the Check suites. */
#ifndef SY_TESTUTIL_H
#define SY_TESTUTIL_H

#include <check.h>
#include <stddef.h>

/* Read a whole file (path relative to $SY_TEST_DATA unless absolute).
 * Returns a malloc'd NUL-terminated buffer; *len gets its length. */
char *sy_test_read(const char *path, size_t *len);
/* Full path of a file under $SY_TEST_DATA (static buffer). */
const char *sy_test_data(const char *rel);
/* $SY_STRESS_SCALE (>= 1). */
int sy_test_scale(void);
/* Run one suite, TAP to stdout; returns the process exit status. */
int sy_test_run(Suite *s);

#endif
