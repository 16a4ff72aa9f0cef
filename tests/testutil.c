/* testutil.c - helpers shared by the Check suites. */
#define _DEFAULT_SOURCE /* mkstemp, unsetenv */
#include "testutil.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const char *sy_test_data(const char *rel) {
    static char buf[4096];
    const char *root = getenv("SY_TEST_DATA");
    if (rel[0] == '/' || !root)
        snprintf(buf, sizeof buf, "%s", rel);
    else
        snprintf(buf, sizeof buf, "%s/%s", root, rel);
    return buf;
}

char *sy_test_read(const char *path, size_t *len) {
    FILE *f = fopen(sy_test_data(path), "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    if (buf) {
        buf[n] = '\0';
        if (len)
            *len = (size_t)n;
    }
    return buf;
}

int sy_test_scale(void) {
    const char *s = getenv("SY_STRESS_SCALE");
    int v = s ? atoi(s) : 1;
    return v < 1 ? 1 : v;
}

/* Tests this build cannot run (sy_test_skip), told after the suite's own
 * TAP lines as "ok N # SKIP why": counted as skipped, never as passed. */
#define SKIPS_MAX 32
static const char *skip_name[SKIPS_MAX], *skip_why[SKIPS_MAX];
static int skips;

void sy_test_skip(const char *name, const char *why) {
    if (skips < SKIPS_MAX) {
        skip_name[skips] = name;
        skip_why[skips] = why;
        skips++;
    }
}

/* Copy Check's TAP from `path` to stdout with the skipped tests numbered
 * after its own, ahead of its plan ("1..N" becomes "1..N+skips"). */
static void relay_tap(const char *path) {
    FILE *f = fopen(path, "r");
    char line[4096];
    bool planned = false;
    while (f && fgets(line, sizeof line, f)) {
        int n;
        char end;
        if (!planned && sscanf(line, "1..%d%c", &n, &end) == 2 && end == '\n') {
            for (int i = 0; i < skips; i++)
                printf("ok %d - %s # SKIP %s\n", n + 1 + i, skip_name[i],
                       skip_why[i]);
            printf("1..%d\n", n + skips);
            planned = true;
        } else {
            fputs(line, stdout);
        }
    }
    if (f)
        fclose(f);
    fflush(stdout);
}

int sy_test_run(Suite *s) {
    SRunner *sr = srunner_create(s);
    /* with skipped tests and TAP on stdout: Check writes it to a file,
     * relayed with the skips */
    const char *tap = getenv("CK_TAP_LOG_FILE_NAME");
    char path[] = "/tmp/sy-tap-XXXXXX";
    int fd = skips && tap && strcmp(tap, "-") == 0 ? mkstemp(path) : -1;
    if (fd >= 0) {
        close(fd);
        unsetenv("CK_TAP_LOG_FILE_NAME");
        srunner_set_tap(sr, path);
    }
    srunner_run_all(sr, CK_SILENT);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    if (fd >= 0) {
        relay_tap(path);
        unlink(path);
    } else { /* no TAP on stdout: said all the same */
        for (int i = 0; i < skips; i++)
            printf("# SKIP %s: %s\n", skip_name[i], skip_why[i]);
    }
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

/* ---- counting allocator (testutil.h) ---- */

static void *ta_malloc(void *d, size_t n) {
    sy_test_alloc *c = d;
    if (c->fail_at && ++c->calls == c->fail_at)
        return NULL;
    void *p = malloc(n);
    c->live += p != NULL;
    c->total += p != NULL;
    return p;
}

static void *ta_realloc(void *d, void *p, size_t n) {
    sy_test_alloc *c = d;
    if (c->fail_at && ++c->calls == c->fail_at)
        return NULL;
    void *q = realloc(p, n);
    c->live += q && !p;
    c->total += q && !p;
    return q;
}

static void ta_free(void *d, void *p) {
    sy_test_alloc *c = d;
    c->live -= p != NULL;
    free(p);
}

sy_allocator sy_test_allocator(sy_test_alloc *c) {
    return (sy_allocator){ta_malloc, ta_realloc, ta_free, c};
}

sy_router *sy_test_router(const char *doc, size_t len) {
    sy_router *r;
    sy_router_options o = SY_ROUTER_OPTIONS_INIT;
    ck_assert_int_eq(sy_router_new(&o, &r, NULL), 0);
    ck_assert_int_eq(sy_router_add_source(r, "s", NULL), 0);
    sy_error e;
    if (doc)
        ck_assert_msg(sy_router_apply(r, "s", doc, len, NULL, &e) == 0, "%s",
                      e.message);
    return r;
}

char *sy_test_host_over_vars(void) {
    size_t simple = 65520, mixed = 4;
    char *src = malloc(simple * 4 + mixed * 20 + 1), *q = src;
    ck_assert_ptr_nonnull(src);
    for (size_t i = 0; i < simple; i++, q += 4)
        memcpy(q, "{a}.", 4);
    for (size_t i = 0; i < mixed; i++, q += 20)
        memcpy(q, "{a}-{a}-{a}-{a}-{a}.", 20);
    q[-1] = '\0';
    return src;
}
