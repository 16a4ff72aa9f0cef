/* test_set_memory.c - a staged change costs memory in proportion to its
 * own size: the peak of the router's allocations while a set of
 * many one-route upserts is committed stays within a small bound per
 * change of what the same upserts cost as single calls, and a set over
 * SY_MAX_CHANGE_SET_SIZE changes is refused with SY_ELIMIT. */
#include "testutil.h"

#include "switchyard.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

/* Hooks that count the bytes the router holds now and at most. */
typedef struct bytes {
    size_t now, peak;
} bytes;

static void *b_malloc(void *d, size_t n) {
    bytes *b = d;
    size_t *p = malloc(n + 16);
    if (!p)
        return NULL;
    p[0] = n;
    b->now += n;
    if (b->now > b->peak)
        b->peak = b->now;
    return (char *)p + 16;
}

static void b_free(void *d, void *q) {
    bytes *b = d;
    size_t *p = (size_t *)(void *)((char *)q - 16);
    b->now -= p[0];
    free(p);
}

static void *b_realloc(void *d, void *q, size_t n) {
    if (!q)
        return b_malloc(d, n);
    bytes *b = d;
    size_t *p = (size_t *)(void *)((char *)q - 16);
    size_t old = p[0];
    size_t *np = realloc(p, n + 16);
    if (!np)
        return NULL;
    np[0] = n;
    b->now = b->now - old + n;
    if (b->now > b->peak)
        b->peak = b->now;
    return (char *)np + 16;
}

static int route_text(char *out, size_t cap, int i) {
    return snprintf(out, cap,
                    "{\"id\":\"r%d\",\"uri\":\"http://h:80\",\"predicates\":"
                    "[\"Path=/p/%d/**\"]}",
                    i, i);
}

#define UPSERTS 20000

/* The router's peak bytes over a commit of `n` upserts, staged in one set
 * (set) or made one by one (single), from a router holding one route;
 * *text: the bytes of the route texts. */
static size_t peak_of(bool set, int n, size_t *text) {
    bytes b = {0, 0};
    sy_allocator al = {b_malloc, b_realloc, b_free, &b};
    sy_router_options o = SY_ROUTER_OPTIONS_INIT;
    o.allocator = &al;
    sy_router *r;
    ck_assert_int_eq(sy_router_new(&o, &r, NULL), 0);
    ck_assert_int_eq(sy_router_add_source(r, "s", NULL), 0);
    char t[160];
    int len = route_text(t, sizeof t, -1);
    ck_assert_int_eq(sy_router_upsert_route(r, "s", t, (size_t)len, NULL), 0);
    size_t base = b.now;
    b.peak = b.now;
    *text = 0;
    sy_change_set *cs = NULL;
    if (set)
        ck_assert_int_eq(sy_change_set_new(r, &cs, NULL), 0);
    for (int i = 0; i < n; i++) {
        len = route_text(t, sizeof t, i);
        *text += (size_t)len;
        if (set)
            ck_assert_int_eq(
                sy_change_set_upsert_route(cs, "s", t, (size_t)len, NULL), 0);
        else
            ck_assert_int_eq(
                sy_router_upsert_route(r, "s", t, (size_t)len, NULL), 0);
    }
    if (set) {
        sy_error e;
        ck_assert_msg(sy_router_commit(r, cs, NULL, &e) == 0, "%s", e.message);
        sy_change_set_free(cs);
    }
    sy_snapshot *s = sy_router_acquire(r);
    ck_assert_uint_eq(sy_snapshot_route_count(s), (size_t)n + 1);
    sy_snapshot_release(s);
    sy_router_free(r);
    ck_assert_uint_eq(b.now, 0);
    return b.peak - base;
}

/* 20,000 upserts in one set: at most 2 KB per change beyond its text
 * over what the same upserts cost as single calls (before: ~57 KB per
 * change, 1.1 GB), and under 200 MB in all. */
START_TEST(a_set_of_upserts_costs_memory_in_proportion_to_them) {
    size_t text, single = peak_of(false, UPSERTS, &text);
    size_t set = peak_of(true, UPSERTS, &text);
    size_t extra = set > single ? set - single : 0;
    printf("# %d upserts (%zu bytes of text): peak %zu bytes as single "
           "calls, %zu in one set (%zu a change beyond its text)\n",
           UPSERTS, text, single, set,
           extra > text ? (extra - text) / UPSERTS : 0);
    ck_assert_msg(extra <= text + (size_t)UPSERTS * 2048,
                  "a set of %d upserts peaks %zu bytes above the single "
                  "calls: %zu a change",
                  UPSERTS, extra, extra / UPSERTS);
    ck_assert_uint_lt(set, (size_t)200 << 20);
}
END_TEST

/* The same, measured as the process's peak RSS; not under a sanitizer (its
 * shadow memory and quarantine are not the library's; the test is reported as
 * skipped there). The first test of the process: nothing before it counts. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define SANITIZED 1
#endif
#endif

START_TEST(a_set_of_20000_upserts_peaks_under_200_mb_rss) {
    sy_router *r = sy_test_router(NULL, 0);
    sy_change_set *cs;
    ck_assert_int_eq(sy_change_set_new(r, &cs, NULL), 0);
    for (int i = 0; i < UPSERTS; i++) {
        char t[160];
        int len = route_text(t, sizeof t, i);
        ck_assert_int_eq(
            sy_change_set_upsert_route(cs, "s", t, (size_t)len, NULL), 0);
    }
    ck_assert_int_eq(sy_router_commit(r, cs, NULL, NULL), 0);
    sy_change_set_free(cs);
    sy_router_free(r);
    struct rusage ru;
    ck_assert_int_eq(getrusage(RUSAGE_SELF, &ru), 0);
    printf("# peak RSS %ld KB\n", ru.ru_maxrss);
    ck_assert_int_lt(ru.ru_maxrss, 200 * 1024);
}
END_TEST

/* SY_MAX_CHANGE_SET_SIZE changes are taken; one more is SY_ELIMIT, and
 * the set still commits what it holds. */
START_TEST(a_set_over_its_limit_is_refused) {
    sy_router *r = sy_test_router(NULL, 0);
    sy_change_set *cs;
    ck_assert_int_eq(sy_change_set_new(r, &cs, NULL), 0);
    for (size_t i = 0; i < SY_MAX_CHANGE_SET_SIZE; i++)
        ck_assert_int_eq(sy_change_set_remove_route(cs, "x", NULL), 0);
    sy_error e;
    ck_assert_int_eq(sy_change_set_remove_route(cs, "x", &e), SY_ELIMIT);
    ck_assert_ptr_nonnull(strstr(e.message, "at most"));
    ck_assert_int_eq(sy_change_set_set_instances(cs, "svc", NULL, 0, &e),
                     SY_ELIMIT);
    ck_assert_uint_eq(sy_change_set_count(cs), SY_MAX_CHANGE_SET_SIZE);
    sy_change_set_free(cs);
    sy_router_free(r);
}
END_TEST

int main(void) {
    Suite *s = suite_create("set_memory");
    TCase *tc = tcase_create("set_memory");
#ifndef SANITIZED
    tcase_add_test(tc, a_set_of_20000_upserts_peaks_under_200_mb_rss);
#else /* not run there: reported as skipped */
    sy_test_skip("a_set_of_20000_upserts_peaks_under_200_mb_rss",
                 "a sanitizer's shadow memory is in the RSS");
#endif
    tcase_add_test(tc, a_set_of_upserts_costs_memory_in_proportion_to_them);
    tcase_add_test(tc, a_set_over_its_limit_is_refused);
    suite_add_tcase(s, tc);
    return sy_test_run(s);
}
