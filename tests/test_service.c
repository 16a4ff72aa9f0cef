/* test_service.c - services, deltas, diffs and version-aware selection
 * (route model section 7). */
#include "hooks.h"
#include "service/service.h"
#include "switchyard.h"
#include "testutil.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

/* ---- helpers ---- */

typedef struct spec {
    const char *id;
    uint32_t weight;
    sy_instance_state state;
    const char *version, *zone, *hint;
    bool secure;
} spec;

static sy__alloc the_alloc(void) {
    sy__alloc a;
    sy__alloc_init(&a, NULL);
    return a;
}

/* Fill list[i] from sp[i]; metadata arrays come from md (3 per instance). */
static void fill(const spec *sp, size_t n, sy_instance *list, sy_kv *md) {
    for (size_t i = 0; i < n; i++) {
        sy_kv *m = md + 3 * i;
        size_t k = 0;
        if (sp[i].version)
            m[k++] = (sy_kv){"version", sp[i].version};
        if (sp[i].zone)
            m[k++] = (sy_kv){"zone", sp[i].zone};
        if (sp[i].hint)
            m[k++] = (sy_kv){"hint", sp[i].hint};
        list[i] = (sy_instance){.id = sp[i].id,
                                .host = "10.0.0.1",
                                .port = (uint16_t)(8000 + i),
                                .secure = sp[i].secure,
                                .weight = sp[i].weight,
                                .state = sp[i].state,
                                .metadata = k ? m : NULL,
                                .metadata_count = k};
    }
}

static sy__service *mk(const spec *sp, size_t n) {
    sy__alloc a = the_alloc();
    sy_instance *list = calloc(n ? n : 1, sizeof *list);
    sy_kv *md = calloc(3 * (n ? n : 1), sizeof *md);
    fill(sp, n, list, md);
    sy__service *s = NULL;
    sy_error err;
    int rc = sy__service_new(&a, "svc", list, n, &s, &err);
    ck_assert_msg(rc == 0, "sy__service_new: %s (%s)", err.message, err.path);
    free(list);
    free(md);
    return s;
}

static const char *pick(const sy__service *s, const sy__select_params *p) {
    sy_selection sel;
    sy_error err;
    int rc = sy__service_select(s, p, &sel, &err);
    ck_assert_msg(rc == 0, "select: %s", err.message);
    return sel.id;
}

static sy__select_params with_version(const char *v) {
    sy__select_params p = SY_SELECT_PARAMS_INIT;
    p.has_version = true;
    p.version = (sy_str){v, strlen(v)};
    return p;
}

static int vcmp(const char *a, const char *b) {
    return sy__service_version_cmp(a, strlen(a), b, strlen(b));
}

/* Index of id in a list of single-letter ids "a".."j" etc. */
static int idx_of(const char *id, const char *const *ids, int n) {
    for (int i = 0; i < n; i++)
        if (strcmp(id, ids[i]) == 0)
            return i;
    ck_abort_msg("unexpected id %s", id);
    return -1;
}

/* ---- versions ---- */

START_TEST(version_numeric_segments_compare_as_numbers) {
    static const struct {
        const char *a, *b;
        int want;
    } t[] = {
        {"1.10", "1.9", 1},
        {"1.9", "1.10", -1},
        {"2", "1.99", 1},
        {"10.0", "9.9.9", 1},
        {"1.2.3", "1.2.3", 0},
        {"1.100000000000000000000", "1.99999999999999999999", 1},
    };
    for (size_t i = 0; i < SY_ARRAY_LEN(t); i++)
        ck_assert_msg(vcmp(t[i].a, t[i].b) == t[i].want, "%s vs %s", t[i].a,
                      t[i].b);
}
END_TEST

START_TEST(version_missing_segment_is_smaller) {
    ck_assert_int_lt(vcmp("1.2", "1.2.1"), 0);
    ck_assert_int_gt(vcmp("1.2.0", "1.2"), 0);
    ck_assert_int_lt(vcmp("1", "1.0"), 0);
    ck_assert_int_lt(vcmp("1.2", "1.02.1"), 0); /* not bytewise */
}
END_TEST

START_TEST(version_numeric_segment_is_below_non_numeric_and_suffix_below_none) {
    ck_assert_int_lt(vcmp("1.9", "1.x"), 0);
    ck_assert_int_gt(vcmp("1.2", "1.2-rc1"), 0);
    ck_assert_int_lt(vcmp("1.2-rc1", "1.2-rc2"), 0);
    ck_assert_int_gt(vcmp("1.10-rc1", "1.9"), 0);
    ck_assert_int_gt(vcmp("1.0.RELEASE", "1.0.M1"), 0);
}
END_TEST

START_TEST(version_order_is_total_for_equal_numbers_spelled_differently) {
    ck_assert_int_ne(vcmp("1.01", "1.1"), 0);
    ck_assert_int_eq(vcmp("1.01", "1.1"), -vcmp("1.1", "1.01"));
}
END_TEST

/* ---- version selection ---- */

START_TEST(no_header_prefers_unversioned_instances) {
    spec sp[] = {{.id = "v2", .version = "2.0"},
                 {.id = "plain"},
                 {.id = "v1", .version = "1.0"}};
    sy__service *s = mk(sp, 3);
    sy__select_params p = SY_SELECT_PARAMS_INIT;
    for (int i = 0; i < 10; i++)
        ck_assert_str_eq(pick(s, &p), "plain");
    sy__service_unref(s);
}
END_TEST

START_TEST(no_header_without_unversioned_uses_latest_version) {
    spec sp[] = {{.id = "a", .version = "1.9"},
                 {.id = "b", .version = "1.10"},
                 {.id = "c", .version = "1.2.1"},
                 {.id = "d", .version = "1.11", .state = SY_INSTANCE_DOWN}};
    sy__service *s = mk(sp, 4);
    sy__select_params p = SY_SELECT_PARAMS_INIT;
    for (int i = 0; i < 10; i++)
        ck_assert_str_eq(pick(s, &p), "b");
    sy__service_unref(s);
}
END_TEST

START_TEST(header_keeps_instances_of_exactly_that_version) {
    spec sp[] = {{.id = "a", .version = "1.0"},
                 {.id = "b", .version = "2.0"},
                 {.id = "c", .version = "2.0"},
                 {.id = "d"}};
    sy__service *s = mk(sp, 4);
    sy__select_params p = with_version("2.0");
    int seen_b = 0, seen_c = 0;
    for (int i = 0; i < 10; i++) {
        const char *id = pick(s, &p);
        ck_assert(strcmp(id, "b") == 0 || strcmp(id, "c") == 0);
        seen_b += strcmp(id, "b") == 0;
        seen_c += strcmp(id, "c") == 0;
    }
    ck_assert_int_eq(seen_b, 5);
    ck_assert_int_eq(seen_c, 5);
    sy__service_unref(s);
}
END_TEST

START_TEST(unknown_version_without_fallback_is_no_instance) {
    spec sp[] = {{.id = "a", .version = "1.0"}, {.id = "b"}};
    sy__service *s = mk(sp, 2);
    sy__select_params p = with_version("3.0");
    sy_selection sel;
    sy_error err;
    ck_assert_int_eq(sy__service_select(s, &p, &sel, &err), SY_ENOINSTANCE);
    ck_assert_int_eq(err.code, SY_ENOINSTANCE);
    ck_assert_ptr_nonnull(strstr(err.message, "version 3.0"));
    sy__service_unref(s);
}
END_TEST

START_TEST(unknown_version_with_fallback_latest_uses_latest_up_version) {
    spec sp[] = {{.id = "a", .version = "1.9"},
                 {.id = "b", .version = "1.10"},
                 {.id = "c"},
                 {.id = "d", .version = "9.0", .state = SY_INSTANCE_DRAINING}};
    sy__service *s = mk(sp, 4);
    sy__select_params p = with_version("3.0");
    p.fallback = SY_VERSION_FALLBACK_LATEST;
    for (int i = 0; i < 5; i++)
        ck_assert_str_eq(pick(s, &p), "b");
    sy__service_unref(s);
}
END_TEST

START_TEST(fallback_latest_without_any_version_uses_unversioned) {
    spec sp[] = {{.id = "a"}, {.id = "b"}};
    sy__service *s = mk(sp, 2);
    sy__select_params p = with_version("3.0");
    p.fallback = SY_VERSION_FALLBACK_LATEST;
    const char *first = pick(s, &p);
    ck_assert_str_ne(first, pick(s, &p));
    sy__service_unref(s);
}
END_TEST

START_TEST(unknown_version_with_fallback_any_uses_every_up_instance) {
    spec sp[] = {{.id = "a", .version = "1.0"},
                 {.id = "b"},
                 {.id = "c", .version = "2.0"},
                 {.id = "d", .state = SY_INSTANCE_DOWN}};
    sy__service *s = mk(sp, 4);
    sy__select_params p = with_version("3.0");
    p.fallback = SY_VERSION_FALLBACK_ANY;
    static const char *const ids[] = {"a", "b", "c"};
    int seen[3] = {0};
    for (int i = 0; i < 9; i++)
        seen[idx_of(pick(s, &p), ids, 3)]++;
    ck_assert_int_eq(seen[0], 3);
    ck_assert_int_eq(seen[1], 3);
    ck_assert_int_eq(seen[2], 3);
    sy__service_unref(s);
}
END_TEST

START_TEST(version_whose_instances_are_all_down_is_no_instance) {
    spec sp[] = {{.id = "a", .version = "1.0", .state = SY_INSTANCE_DOWN},
                 {.id = "b", .version = "2.0"}};
    sy__service *s = mk(sp, 2);
    sy__select_params p = with_version("1.0");
    sy_selection sel;
    sy_error err;
    ck_assert_int_eq(sy__service_select(s, &p, &sel, &err), SY_ENOINSTANCE);
    ck_assert_ptr_nonnull(strstr(err.message, "is up"));
    sy__service_unref(s);
}
END_TEST

/* ---- state ---- */

START_TEST(instances_not_up_are_never_selected) {
    spec sp[] = {{.id = "up1"},
                 {.id = "drain", .state = SY_INSTANCE_DRAINING},
                 {.id = "down", .state = SY_INSTANCE_DOWN},
                 {.id = "up2"}};
    sy__service *s = mk(sp, 4);
    sy__select_params p = SY_SELECT_PARAMS_INIT;
    for (int pol = SY_LB_ROUND_ROBIN; pol <= SY_LB_HASH; pol++) {
        p.policy = (sy__lb_policy)pol;
        for (int i = 0; i < 200; i++) {
            char key[16];
            snprintf(key, sizeof key, "k%d", i);
            p.hash_key = (sy_str){key, strlen(key)};
            p.seed = (uint64_t)i;
            const char *id = pick(s, &p);
            ck_assert(strncmp(id, "up", 2) == 0);
        }
    }
    sy__service_unref(s);
}
END_TEST

START_TEST(all_instances_down_is_no_instance) {
    spec sp[] = {{.id = "a", .state = SY_INSTANCE_DOWN},
                 {.id = "b", .state = SY_INSTANCE_DRAINING}};
    sy__service *s = mk(sp, 2);
    sy__select_params p = SY_SELECT_PARAMS_INIT;
    sy_selection sel;
    sy_error err;
    ck_assert_int_eq(sy__service_select(s, &p, &sel, &err), SY_ENOINSTANCE);
    ck_assert_ptr_nonnull(strstr(err.message, "is up"));
    sy__service_unref(s);
}
END_TEST

START_TEST(empty_or_unknown_service_is_no_instance) {
    sy__service *s = mk(NULL, 0);
    sy__select_params p = SY_SELECT_PARAMS_INIT;
    sy_selection sel;
    sy_error err;
    ck_assert_int_eq(sy__service_select(s, &p, &sel, &err), SY_ENOINSTANCE);
    ck_assert_ptr_nonnull(strstr(err.message, "no instances"));
    ck_assert_int_eq(sy__service_select(NULL, &p, &sel, &err), SY_ENOINSTANCE);
    ck_assert_ptr_nonnull(strstr(err.message, "unknown service"));
    sy__service_unref(s);
}
END_TEST

/* ---- hint and zone ---- */

START_TEST(hint_keeps_matching_instances) {
    spec sp[] = {{.id = "a", .hint = "gray"}, {.id = "b"}, {.id = "c"}};
    sy__service *s = mk(sp, 3);
    sy__select_params p = SY_SELECT_PARAMS_INIT;
    p.hint = (sy_str){"gray", 4};
    for (int i = 0; i < 5; i++)
        ck_assert_str_eq(pick(s, &p), "a");
    sy__service_unref(s);
}
END_TEST

START_TEST(hint_without_match_falls_back_to_whole_set) {
    spec sp[] = {{.id = "a", .hint = "gray"}, {.id = "b"}};
    sy__service *s = mk(sp, 2);
    sy__select_params p = SY_SELECT_PARAMS_INIT;
    p.hint = (sy_str){"blue", 4};
    int a = 0;
    for (int i = 0; i < 4; i++)
        a += strcmp(pick(s, &p), "a") == 0;
    ck_assert_int_eq(a, 2);
    sy__service_unref(s);
}
END_TEST

START_TEST(hint_applies_only_within_the_version_set) {
    spec sp[] = {{.id = "old", .version = "1.0", .hint = "gray"},
                 {.id = "new1", .version = "2.0"},
                 {.id = "new2", .version = "2.0"}};
    sy__service *s = mk(sp, 3);
    sy__select_params p = with_version("2.0");
    p.hint = (sy_str){"gray", 4};
    for (int i = 0; i < 6; i++)
        ck_assert_str_ne(pick(s, &p), "old");
    sy__service_unref(s);
}
END_TEST

START_TEST(zone_preference_keeps_matching_instances) {
    spec sp[] = {{.id = "a", .zone = "eu"},
                 {.id = "b", .zone = "us"},
                 {.id = "c", .zone = "eu"}};
    sy__service *s = mk(sp, 3);
    sy__select_params p = SY_SELECT_PARAMS_INIT;
    p.zone = (sy_str){"eu", 2};
    for (int i = 0; i < 10; i++)
        ck_assert_str_ne(pick(s, &p), "b");
    sy__service_unref(s);
}
END_TEST

START_TEST(zone_without_match_falls_back_to_whole_set) {
    spec sp[] = {{.id = "a", .zone = "eu"}, {.id = "b", .zone = "us"}};
    sy__service *s = mk(sp, 2);
    sy__select_params p = SY_SELECT_PARAMS_INIT;
    p.zone = (sy_str){"ap", 2};
    int a = 0;
    for (int i = 0; i < 4; i++)
        a += strcmp(pick(s, &p), "a") == 0;
    ck_assert_int_eq(a, 2);
    sy__service_unref(s);
}
END_TEST

START_TEST(zone_applies_after_hint) {
    spec sp[] = {{.id = "h-eu", .hint = "x", .zone = "eu"},
                 {.id = "h-us", .hint = "x", .zone = "us"},
                 {.id = "eu", .zone = "eu"}};
    sy__service *s = mk(sp, 3);
    sy__select_params p = SY_SELECT_PARAMS_INIT;
    p.hint = (sy_str){"x", 1};
    p.zone = (sy_str){"eu", 2};
    for (int i = 0; i < 4; i++)
        ck_assert_str_eq(pick(s, &p), "h-eu");
    p.zone = (sy_str){"ap", 2}; /* no zone match within the hint set */
    int us = 0;
    for (int i = 0; i < 4; i++) {
        const char *id = pick(s, &p);
        ck_assert_str_ne(id, "eu");
        us += strcmp(id, "h-us") == 0;
    }
    ck_assert_int_eq(us, 2);
    sy__service_unref(s);
}
END_TEST

START_TEST(zone_preference_among_1000_instances_picks_only_that_zone) {
    enum { N = 1000 };
    spec *sp = calloc(N, sizeof *sp);
    char(*ids)[16] = calloc(N, sizeof *ids);
    static const char *const zones[] = {"z0", "z1", "z2", "z3"};
    for (int i = 0; i < N; i++) {
        snprintf(ids[i], sizeof ids[i], "i%d", i);
        sp[i] = (spec){.id = ids[i],
                       .weight = (uint32_t)(i % 5),
                       .zone = zones[i % 4],
                       .version = i % 2 ? "2.0" : "1.0"};
    }
    sy__service *s = mk(sp, N);
    sy__select_params p = with_version("1.0");
    p.zone = (sy_str){"z2", 2};
    for (int pol = SY_LB_ROUND_ROBIN; pol <= SY_LB_HASH; pol++) {
        p.policy = (sy__lb_policy)pol;
        for (int i = 0; i < 500; i++) {
            char key[16];
            snprintf(key, sizeof key, "k%d", i);
            p.hash_key = (sy_str){key, strlen(key)};
            p.seed = (uint64_t)i;
            int n = atoi(pick(s, &p) + 1);
            ck_assert_int_eq(n % 4, 2);
        }
    }
    sy__service_unref(s);
    free(sp);
    free(ids);
}
END_TEST

/* ---- selection result ---- */

START_TEST(selection_reports_scheme_from_secure_flag_and_websocket) {
    spec sp[] = {{.id = "tls", .secure = true}};
    sy__service *s = mk(sp, 1);
    sy__select_params p = SY_SELECT_PARAMS_INIT;
    sy_selection sel;
    ck_assert_int_eq(sy__service_select(s, &p, &sel, NULL), 0);
    ck_assert_str_eq(sel.scheme, "https");
    ck_assert_str_eq(sel.service, "svc");
    ck_assert_str_eq(sel.host, "10.0.0.1");
    ck_assert_uint_eq(sel.port, 8000);
    p.websocket = true;
    ck_assert_int_eq(sy__service_select(s, &p, &sel, NULL), 0);
    ck_assert_str_eq(sel.scheme, "wss");
    sy__service_unref(s);
    spec plain[] = {{.id = "p"}};
    s = mk(plain, 1);
    ck_assert_int_eq(sy__service_select(s, &p, &sel, NULL), 0);
    ck_assert_str_eq(sel.scheme, "ws");
    p.websocket = false;
    ck_assert_int_eq(sy__service_select(s, &p, &sel, NULL), 0);
    ck_assert_str_eq(sel.scheme, "http");
    sy__service_unref(s);
}
END_TEST

/* ---- balancing ---- */

static const char *const abc[] = {"a", "b", "c"};

START_TEST(round_robin_weights_1_2_7_are_exact_per_cycle) {
    spec sp[] = {{.id = "a", .weight = 1},
                 {.id = "b", .weight = 2},
                 {.id = "c", .weight = 7}};
    sy__service *s = mk(sp, 3);
    sy__select_params p = SY_SELECT_PARAMS_INIT;
    for (int cycle = 0; cycle < 1000; cycle++) {
        int seen[3] = {0};
        for (int i = 0; i < 10; i++)
            seen[idx_of(pick(s, &p), abc, 3)]++;
        ck_assert_int_eq(seen[0], 1);
        ck_assert_int_eq(seen[1], 2);
        ck_assert_int_eq(seen[2], 7);
    }
    sy__service_unref(s);
}
END_TEST

START_TEST(round_robin_is_smooth_like_nginx) {
    spec sp[] = {{.id = "a", .weight = 5},
                 {.id = "b", .weight = 1},
                 {.id = "c", .weight = 1}};
    sy__service *s = mk(sp, 3);
    sy__select_params p = SY_SELECT_PARAMS_INIT;
    static const char *const want[] = {"a", "a", "b", "a", "c", "a", "a"};
    for (int round = 0; round < 3; round++)
        for (size_t i = 0; i < SY_ARRAY_LEN(want); i++)
            ck_assert_str_eq(pick(s, &p), want[i]);
    sy__service_unref(s);
}
END_TEST

START_TEST(round_robin_breaks_ties_by_instance_order_like_nginx) {
    spec sp[] = {{.id = "a", .weight = 1}, {.id = "b", .weight = 3}};
    sy__service *s = mk(sp, 2);
    sy__select_params p = SY_SELECT_PARAMS_INIT;
    static const char *const want[] = {"b", "a", "b", "b"};
    for (int round = 0; round < 3; round++)
        for (size_t i = 0; i < SY_ARRAY_LEN(want); i++)
            ck_assert_str_eq(pick(s, &p), want[i]);
    sy__service_unref(s);
}
END_TEST

START_TEST(round_robin_1_2_7_has_no_long_runs) {
    spec sp[] = {{.id = "a", .weight = 1},
                 {.id = "b", .weight = 2},
                 {.id = "c", .weight = 7}};
    sy__service *s = mk(sp, 3);
    sy__select_params p = SY_SELECT_PARAMS_INIT;
    const char *prev = "";
    int run = 0, longest = 0;
    for (int i = 0; i < 100; i++) {
        const char *id = pick(s, &p);
        run = strcmp(id, prev) == 0 ? run + 1 : 1;
        longest = run > longest ? run : longest;
        prev = id;
    }
    /* 7 of 10 cannot avoid runs of 3, but never the plain-WRR run of 7. */
    ck_assert_int_le(longest, 3);
    sy__service_unref(s);
}
END_TEST

/* More distinct weights than the small class table holds (16): the
 * classes come from the sort, and each cycle is still exact. */
START_TEST(round_robin_with_40_distinct_weights_is_exact_per_cycle) {
    enum { N = 40 };
    static char ids[N][8];
    static const char *names[N];
    spec sp[N];
    int total = 0;
    for (int i = 0; i < N; i++) {
        snprintf(ids[i], sizeof ids[i], "i%d", i);
        names[i] = ids[i];
        /* weights 40, 1, 39, 2, ...: distinct, not in instance order */
        int w = i % 2 ? i / 2 + 1 : N - i / 2;
        sp[i] = (spec){.id = ids[i], .weight = (uint32_t)w};
        total += w;
    }
    sy__service *s = mk(sp, N);
    sy__select_params p = SY_SELECT_PARAMS_INIT;
    for (int cycle = 0; cycle < 20; cycle++) {
        int seen[N] = {0};
        for (int i = 0; i < total; i++)
            seen[idx_of(pick(s, &p), names, N)]++;
        for (int i = 0; i < N; i++)
            ck_assert_int_eq(seen[i], (int)sp[i].weight);
    }
    sy__service_unref(s);
}
END_TEST

START_TEST(round_robin_with_huge_weights_is_exact_per_cycle) {
    spec sp[] = {{.id = "a", .weight = 100000},
                 {.id = "b", .weight = 3},
                 {.id = "c", .weight = 1}};
    sy__service *s = mk(sp, 3);
    sy__select_params p = SY_SELECT_PARAMS_INIT;
    int seen[3] = {0}, longest = 0, run = 0;
    for (int i = 0; i < 100004; i++) {
        int k = idx_of(pick(s, &p), abc, 3);
        seen[k]++;
        run = k == 0 ? run + 1 : 0;
        longest = run > longest ? run : longest;
    }
    ck_assert_int_eq(seen[0], 100000);
    ck_assert_int_eq(seen[1], 3);
    ck_assert_int_eq(seen[2], 1);
    ck_assert_int_lt(longest, 60000); /* b and c are spread out */
    sy__service_unref(s);
}
END_TEST

START_TEST(random_follows_weights_1_2_7_within_tolerance) {
    spec sp[] = {{.id = "a", .weight = 1},
                 {.id = "b", .weight = 2},
                 {.id = "c", .weight = 7}};
    sy__service *s = mk(sp, 3);
    sy__select_params p = SY_SELECT_PARAMS_INIT;
    p.policy = SY_LB_RANDOM;
    int seen[3] = {0};
    for (int i = 0; i < 10000; i++) {
        p.seed = (uint64_t)i;
        seen[idx_of(pick(s, &p), abc, 3)]++;
    }
    /* binomial sigma <= 46 at n = 10k: allow about 4 sigma */
    ck_assert_int_lt(abs(seen[0] - 1000), 150);
    ck_assert_int_lt(abs(seen[1] - 2000), 180);
    ck_assert_int_lt(abs(seen[2] - 7000), 190);
    sy__service_unref(s);
}
END_TEST

START_TEST(random_is_deterministic_for_a_seed) {
    spec sp[] = {{.id = "a"}, {.id = "b"}, {.id = "c"}};
    sy__service *s = mk(sp, 3);
    sy__select_params p = SY_SELECT_PARAMS_INIT;
    p.policy = SY_LB_RANDOM;
    for (uint64_t seed = 0; seed < 50; seed++) {
        p.seed = seed;
        const char *first = pick(s, &p);
        ck_assert_str_eq(pick(s, &p), first);
    }
    sy__service_unref(s);
}
END_TEST

static const char *hash_pick(const sy__service *s, int key) {
    sy__select_params p = SY_SELECT_PARAMS_INIT;
    p.policy = SY_LB_HASH;
    char buf[32];
    snprintf(buf, sizeof buf, "user-%d", key);
    p.hash_key = (sy_str){buf, strlen(buf)};
    return pick(s, &p);
}

static sy__service *ten(int skip, bool eleven) {
    static const char *const ids[] = {"i0", "i1", "i2", "i3", "i4", "i5",
                                      "i6", "i7", "i8", "i9", "i10"};
    spec sp[11];
    size_t n = 0;
    for (int i = 0; i < (eleven ? 11 : 10); i++)
        if (i != skip)
            sp[n++] = (spec){.id = ids[i], .weight = (uint32_t)(i % 3 + 1)};
    return mk(sp, n);
}

START_TEST(hash_is_sticky_for_a_key) {
    sy__service *s = ten(-1, false);
    for (int k = 0; k < 100; k++)
        ck_assert_str_eq(hash_pick(s, k), hash_pick(s, k));
    sy__service_unref(s);
}
END_TEST

START_TEST(hash_spreads_keys_over_all_instances) {
    sy__service *s = ten(-1, false);
    int seen[10] = {0};
    for (int k = 0; k < 10000; k++)
        seen[atoi(hash_pick(s, k) + 1)]++;
    for (int i = 0; i < 10; i++)
        ck_assert_msg(seen[i] > 200, "instance %d got %d keys", i, seen[i]);
    sy__service_unref(s);
}
END_TEST

START_TEST(hash_removing_one_of_ten_moves_only_its_keys) {
    sy__service *full = ten(-1, false), *less = ten(4, false);
    int moved = 0;
    for (int k = 0; k < 5000; k++) {
        const char *before = hash_pick(full, k), *after = hash_pick(less, k);
        if (strcmp(before, "i4") != 0)
            ck_assert_str_eq(before, after);
        else
            moved++;
    }
    ck_assert_int_gt(moved, 0);
    sy__service_unref(full);
    sy__service_unref(less);
}
END_TEST

/* A large group (300 instances): the same guarantees. */
static sy__service *many(int skip) {
    static char ids[300][8];
    spec sp[300];
    size_t n = 0;
    for (int i = 0; i < 300; i++) {
        snprintf(ids[i], sizeof ids[i], "m%d", i);
        if (i != skip)
            sp[n++] = (spec){.id = ids[i], .weight = (uint32_t)(i % 4 + 1)};
    }
    return mk(sp, n);
}

START_TEST(hash_in_a_large_group_moves_only_the_removed_instance_keys) {
    sy__service *full = many(-1), *less = many(123);
    int moved = 0;
    for (int k = 0; k < 20000; k++) {
        char before[16];
        snprintf(before, sizeof before, "%s", hash_pick(full, k));
        const char *after = hash_pick(less, k);
        if (strcmp(before, "m123") != 0)
            ck_assert_str_eq(before, after);
        else
            moved++;
        ck_assert_str_eq(hash_pick(full, k), before); /* sticky */
    }
    ck_assert_int_gt(moved, 0);
    sy__service_unref(full);
    sy__service_unref(less);
}
END_TEST

/* Keys user-0 .. user-(keys-1) over instances w0, w1, ... of weights w[]:
 * each instance's count is within 5 binomial standard deviations of its
 * weight's share (the documented tolerance of SY_LB_HASH). */
static void hash_shares_follow(const uint32_t *w, size_t n, int keys) {
    static const char *const ids[] = {"w0", "w1", "w2", "w3"};
    spec sp[4];
    double W = 0;
    for (size_t i = 0; i < n; i++) {
        sp[i] = (spec){.id = ids[i], .weight = w[i]};
        W += w[i];
    }
    sy__service *s = mk(sp, n);
    int got[4] = {0};
    for (int k = 0; k < keys; k++)
        got[atoi(hash_pick(s, k) + 1)]++;
    for (size_t i = 0; i < n; i++) {
        double p = w[i] / W, want = keys * p;
        double sd = sqrt(keys * p * (1 - p));
        ck_assert_msg(fabs(got[i] - want) <= 5 * sd,
                      "w%zu (weight %u): %d keys of %d, want %.1f +- %.1f", i,
                      w[i], got[i], keys, want, 5 * sd);
    }
    sy__service_unref(s);
}

START_TEST(hash_shares_follow_equal_weights) {
    hash_shares_follow((const uint32_t[]){1, 1, 1, 1}, 4, 20000);
}
END_TEST

START_TEST(hash_shares_follow_weights_1_2_7) {
    hash_shares_follow((const uint32_t[]){1, 2, 7}, 3, 20000);
}
END_TEST

START_TEST(hash_shares_follow_weights_1_1000_past_any_cap) {
    hash_shares_follow((const uint32_t[]){1, 1000}, 2, 200000);
    hash_shares_follow((const uint32_t[]){3, 4000000000u, 1}, 3, 200000);
}
END_TEST

/* Raising one instance's weight moves keys only to it; lowering it moves
 * keys only away from it. */
START_TEST(hash_weight_change_moves_keys_only_to_or_from_that_instance) {
    spec sp[5] = {{.id = "a", .weight = 1},
                  {.id = "b", .weight = 2},
                  {.id = "c", .weight = 3},
                  {.id = "d", .weight = 1},
                  {.id = "e", .weight = 5}};
    sy__service *before = mk(sp, 5);
    sp[2].weight = 9;
    sy__service *after = mk(sp, 5);
    int moved = 0;
    for (int k = 0; k < 20000; k++) {
        const char *x = hash_pick(before, k), *y = hash_pick(after, k);
        if (strcmp(x, y) != 0) {
            ck_assert_str_eq(y, "c"); /* heavier: keys only come to c */
            moved++;
        }
        ck_assert_str_eq(hash_pick(after, k), y);
    }
    ck_assert_int_gt(moved, 0);
    moved = 0;
    for (int k = 0; k < 20000; k++) {
        const char *x = hash_pick(after, k), *y = hash_pick(before, k);
        if (strcmp(x, y) != 0) {
            ck_assert_str_eq(x, "c"); /* lighter: keys only leave c */
            moved++;
        }
    }
    ck_assert_int_gt(moved, 0);
    sy__service_unref(before);
    sy__service_unref(after);
}
END_TEST

START_TEST(hash_adding_one_moves_only_keys_to_it) {
    sy__service *before = ten(-1, false), *after = ten(-1, true);
    int moved = 0;
    for (int k = 0; k < 5000; k++) {
        const char *a = hash_pick(before, k), *b = hash_pick(after, k);
        if (strcmp(a, b) != 0) {
            ck_assert_str_eq(b, "i10");
            moved++;
        }
    }
    ck_assert_int_gt(moved, 0);
    sy__service_unref(before);
    sy__service_unref(after);
}
END_TEST

START_TEST(hash_within_a_zone_is_stable_when_another_zone_changes) {
    /* Zone groups, a big one and a small one: both keep their keys when
     * an outsider leaves. */
    enum { N = 40 };
    char ids[N][16];
    spec sp[N];
    for (int i = 0; i < N; i++) {
        snprintf(ids[i], sizeof ids[i], "n%d", i);
        sp[i] = (spec){.id = ids[i], .zone = i < 30 ? "big" : "small"};
    }
    sy__service *a = mk(sp, N);
    sp[5].state = SY_INSTANCE_DOWN; /* in "big" */
    sy__service *b = mk(sp, N);
    for (int z = 0; z < 2; z++) {
        sy__select_params p = SY_SELECT_PARAMS_INIT;
        p.policy = SY_LB_HASH;
        p.zone = z ? (sy_str){"small", 5} : (sy_str){"big", 3};
        for (int k = 0; k < 2000; k++) {
            char key[16];
            snprintf(key, sizeof key, "k%d", k);
            p.hash_key = (sy_str){key, strlen(key)};
            const char *x = pick(a, &p), *y = pick(b, &p);
            int n = atoi(x + 1);
            ck_assert_int_eq(n < 30, z == 0);
            if (strcmp(x, "n5") != 0)
                ck_assert_str_eq(x, y);
        }
    }
    sy__service_unref(a);
    sy__service_unref(b);
}
END_TEST

START_TEST(hash_without_key_balances_by_round_robin) {
    spec sp[] = {{.id = "a"}, {.id = "b"}};
    sy__service *s = mk(sp, 2);
    sy__select_params p = SY_SELECT_PARAMS_INIT;
    p.policy = SY_LB_HASH;
    const char *first = pick(s, &p);
    ck_assert_str_ne(pick(s, &p), first);
    sy__service_unref(s);
}
END_TEST

/* ---- deltas ---- */

static sy_instance_delta delta(sy_instance_op op, const char *id) {
    sy_instance_delta d;
    memset(&d, 0, sizeof d);
    d.op = op;
    d.instance.id = id;
    return d;
}

START_TEST(delta_add_appends_a_new_instance) {
    spec sp[] = {{.id = "a"}};
    sy__service *s = mk(sp, 1), *t = NULL;
    sy_instance_delta d = delta(SY_INSTANCE_ADD, "b");
    d.instance.host = "h";
    d.instance.port = 9;
    ck_assert_int_eq(sy__service_apply_deltas(s, &d, 1, &t, NULL), 0);
    ck_assert_uint_eq(sy__service_count(t), 2);
    ck_assert_str_eq(sy__service_instance(t, 1)->id, "b");
    ck_assert_uint_eq(sy__service_count(s), 1);
    sy__service_unref(s);
    sy__service_unref(t);
}
END_TEST

START_TEST(delta_add_replaces_an_existing_id_in_place) {
    spec sp[] = {{.id = "a"}, {.id = "b"}};
    sy__service *s = mk(sp, 2), *t = NULL;
    sy_instance_delta d = delta(SY_INSTANCE_ADD, "a");
    d.instance.host = "new-host";
    d.instance.port = 1;
    ck_assert_int_eq(sy__service_apply_deltas(s, &d, 1, &t, NULL), 0);
    ck_assert_uint_eq(sy__service_count(t), 2);
    ck_assert_str_eq(sy__service_instance(t, 0)->host, "new-host");
    ck_assert_str_eq(sy__service_find(s, "a")->host, "10.0.0.1");
    sy__service_unref(s);
    sy__service_unref(t);
}
END_TEST

START_TEST(delta_remove_drops_the_instance) {
    spec sp[] = {{.id = "a"}, {.id = "b"}, {.id = "c"}};
    sy__service *s = mk(sp, 3), *t = NULL;
    sy_instance_delta d = delta(SY_INSTANCE_REMOVE, "b");
    ck_assert_int_eq(sy__service_apply_deltas(s, &d, 1, &t, NULL), 0);
    ck_assert_uint_eq(sy__service_count(t), 2);
    ck_assert_ptr_null(sy__service_find(t, "b"));
    sy__select_params p = SY_SELECT_PARAMS_INIT;
    for (int i = 0; i < 6; i++)
        ck_assert_str_ne(pick(t, &p), "b");
    sy__service_unref(s);
    sy__service_unref(t);
}
END_TEST

START_TEST(delta_weight_changes_the_share) {
    spec sp[] = {{.id = "a"}, {.id = "b"}};
    sy__service *s = mk(sp, 2), *t = NULL;
    sy_instance_delta d = delta(SY_INSTANCE_WEIGHT, "a");
    d.instance.weight = 3;
    ck_assert_int_eq(sy__service_apply_deltas(s, &d, 1, &t, NULL), 0);
    ck_assert_uint_eq(sy__service_find(t, "a")->weight, 3);
    sy__select_params p = SY_SELECT_PARAMS_INIT;
    int a = 0;
    for (int i = 0; i < 8; i++)
        a += strcmp(pick(t, &p), "a") == 0;
    ck_assert_int_eq(a, 6);
    sy__service_unref(s);
    sy__service_unref(t);
}
END_TEST

START_TEST(delta_state_takes_an_instance_out_at_once) {
    spec sp[] = {{.id = "a"}, {.id = "b"}};
    sy__service *s = mk(sp, 2), *t = NULL;
    sy_instance_delta d = delta(SY_INSTANCE_STATE, "a");
    d.instance.state = SY_INSTANCE_DRAINING;
    ck_assert_int_eq(sy__service_apply_deltas(s, &d, 1, &t, NULL), 0);
    sy__select_params p = SY_SELECT_PARAMS_INIT;
    for (int i = 0; i < 4; i++)
        ck_assert_str_eq(pick(t, &p), "b");
    sy__service_unref(s);
    sy__service_unref(t);
}
END_TEST

START_TEST(delta_unknown_id_is_not_found) {
    spec sp[] = {{.id = "a"}};
    sy__service *s = mk(sp, 1);
    static const sy_instance_op ops[] = {SY_INSTANCE_REMOVE, SY_INSTANCE_WEIGHT,
                                         SY_INSTANCE_STATE};
    for (size_t i = 0; i < SY_ARRAY_LEN(ops); i++) {
        sy_instance_delta d[2] = {delta(SY_INSTANCE_WEIGHT, "a"),
                                  delta(ops[i], "ghost")};
        sy__service *t = NULL;
        sy_error err;
        ck_assert_int_eq(sy__service_apply_deltas(s, d, 2, &t, &err),
                         SY_ENOTFOUND);
        ck_assert_str_eq(err.path, "deltas[1].instance.id");
        ck_assert_ptr_null(t);
    }
    sy__service_unref(s);
}
END_TEST

START_TEST(delta_remove_then_remove_again_is_not_found) {
    spec sp[] = {{.id = "a"}, {.id = "b"}};
    sy__service *s = mk(sp, 2), *t = NULL;
    sy_instance_delta d[2] = {delta(SY_INSTANCE_REMOVE, "a"),
                              delta(SY_INSTANCE_REMOVE, "a")};
    ck_assert_int_eq(sy__service_apply_deltas(s, d, 2, &t, NULL), SY_ENOTFOUND);
    sy__service_unref(s);
}
END_TEST

START_TEST(deltas_are_all_or_nothing) {
    spec sp[] = {{.id = "a"}, {.id = "b"}};
    sy__service *s = mk(sp, 2);
    sy__service *t = (sy__service *)&t; /* must stay untouched */
    sy_instance_delta d[3] = {delta(SY_INSTANCE_REMOVE, "a"),
                              delta(SY_INSTANCE_ADD, "c"),
                              delta(SY_INSTANCE_ADD, "d")};
    d[1].instance.host = "h";
    d[1].instance.port = 1;
    d[2].instance.host = ""; /* invalid */
    d[2].instance.port = 1;
    sy_error err;
    ck_assert_int_eq(sy__service_apply_deltas(s, d, 3, &t, &err), SY_EINVAL);
    ck_assert_str_eq(err.path, "deltas[2].instance.host");
    ck_assert_ptr_eq(t, (sy__service *)&t);
    ck_assert_uint_eq(sy__service_count(s), 2);
    ck_assert_ptr_nonnull(sy__service_find(s, "a"));
    ck_assert_ptr_null(sy__service_find(s, "c"));
    sy__service_unref(s);
}
END_TEST

START_TEST(round_robin_position_survives_deltas) {
    spec sp[] = {{.id = "a"}, {.id = "b"}, {.id = "c"}};
    sy__service *s = mk(sp, 3), *t = NULL;
    sy__select_params p = SY_SELECT_PARAMS_INIT;
    ck_assert_str_eq(pick(s, &p), "a");
    sy_instance_delta d = delta(SY_INSTANCE_ADD, "z");
    d.instance.host = "h";
    d.instance.port = 1;
    d.instance.state = SY_INSTANCE_DOWN;
    ck_assert_int_eq(sy__service_apply_deltas(s, &d, 1, &t, NULL), 0);
    ck_assert_str_eq(pick(t, &p), "b");
    ck_assert_str_eq(pick(t, &p), "c");
    sy__service_unref(s);
    sy__service_unref(t);
}
END_TEST

/* ---- diff ---- */

START_TEST(diff_reports_added_removed_and_changed_ids) {
    spec from_sp[] = {{.id = "same"},
                      {.id = "gone"},
                      {.id = "w", .weight = 1},
                      {.id = "m", .zone = "eu"}};
    /* mk numbers ports by position: keep every id at its position. */
    spec to_sp[] = {{.id = "same"},
                    {.id = "new"},
                    {.id = "w", .weight = 2},
                    {.id = "m", .zone = "us"}};
    sy__service *from = mk(from_sp, 4), *to = mk(to_sp, 4);
    sy__alloc a = the_alloc();
    sy__service_diff d;
    ck_assert_int_eq(sy__service_diff_compute(&a, from, to, &d, NULL), 0);
    ck_assert_uint_eq(d.added_count, 1);
    ck_assert_str_eq(d.added[0], "new");
    ck_assert_uint_eq(d.removed_count, 1);
    ck_assert_str_eq(d.removed[0], "gone");
    ck_assert_uint_eq(d.changed_count, 2);
    ck_assert_str_eq(d.changed[0], "w");
    ck_assert_str_eq(d.changed[1], "m");
    sy__service_diff_free(&d);
    sy__service_unref(from);
    sy__service_unref(to);
}
END_TEST

START_TEST(diff_outlives_its_services_and_handles_a_missing_side) {
    spec sp[] = {{.id = "a"}, {.id = "b"}};
    sy__service *s = mk(sp, 2);
    sy__alloc a = the_alloc();
    sy__service_diff d;
    ck_assert_int_eq(sy__service_diff_compute(&a, NULL, s, &d, NULL), 0);
    sy__service_unref(s);
    ck_assert_uint_eq(d.added_count, 2);
    ck_assert_str_eq(d.added[0], "a");
    ck_assert_str_eq(d.added[1], "b");
    ck_assert_uint_eq(d.removed_count + d.changed_count, 0);
    sy__service_diff_free(&d);
}
END_TEST

START_TEST(diff_of_equal_services_is_empty) {
    spec sp[] = {{.id = "a", .zone = "eu", .weight = 0}, {.id = "b"}};
    sy__service *x = mk(sp, 2);
    sp[0].weight = 1; /* 0 means 1: not a change */
    sy__service *y = mk(sp, 2);
    sy__alloc a = the_alloc();
    sy__service_diff d;
    ck_assert_int_eq(sy__service_diff_compute(&a, x, y, &d, NULL), 0);
    ck_assert_uint_eq(d.added_count + d.removed_count + d.changed_count, 0);
    sy__service_diff_free(&d);
    sy__service_unref(x);
    sy__service_unref(y);
}
END_TEST

/* ---- validation and copying ---- */

static int build_err(sy_instance *list, size_t n, sy_error *err) {
    sy__alloc a = the_alloc();
    sy__service *s = NULL;
    int rc = sy__service_new(&a, "svc", list, n, &s, err);
    ck_assert_ptr_null(s);
    return rc;
}

START_TEST(empty_id_is_invalid_with_its_path) {
    sy_instance l[2] = {{.id = "a", .host = "h", .port = 1},
                        {.id = "", .host = "h", .port = 1}};
    sy_error err;
    ck_assert_int_eq(build_err(l, 2, &err), SY_EINVAL);
    ck_assert_str_eq(err.path, "instances[1].id");
}
END_TEST

START_TEST(duplicate_id_is_reported_at_the_second_occurrence) {
    sy_instance l[3] = {{.id = "a", .host = "h", .port = 1},
                        {.id = "b", .host = "h", .port = 1},
                        {.id = "a", .host = "h", .port = 1}};
    sy_error err;
    ck_assert_int_eq(build_err(l, 3, &err), SY_EDUPLICATE);
    ck_assert_str_eq(err.path, "instances[2].id");
}
END_TEST

START_TEST(empty_host_and_zero_port_are_invalid) {
    sy_instance l[1] = {{.id = "a", .host = "", .port = 1}};
    sy_error err;
    ck_assert_int_eq(build_err(l, 1, &err), SY_EINVAL);
    ck_assert_str_eq(err.path, "instances[0].host");
    l[0] = (sy_instance){.id = "a", .host = NULL, .port = 1};
    ck_assert_int_eq(build_err(l, 1, &err), SY_EINVAL);
    ck_assert_str_eq(err.path, "instances[0].host");
    l[0] = (sy_instance){.id = "a", .host = "h", .port = 0};
    ck_assert_int_eq(build_err(l, 1, &err), SY_EINVAL);
    ck_assert_str_eq(err.path, "instances[0].port");
}
END_TEST

/* run or refuse: a host neither host connects to (a port or scheme in
 * it, a path, spaces, an IPv6 zone nginx cannot parse) was taken and
 * failed at every request; "[::1]" is the address ::1 (kept bare: the
 * gateway and nginx failed to connect to "[::1]"). */
START_TEST(a_host_no_host_can_connect_to_is_refused_with_its_path) {
    static const char *const bad[] = {
        "10.0.0.1:8080", "http://orders", "orders/v1",    "a b", "[::1",
        "[::1]:8080",    "[orders]",      "fe80::1%eth0", "1:2", "h\n"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        sy_instance l[2] = {{.id = "a", .host = "h", .port = 1},
                            {.id = "b", .host = bad[i], .port = 1}};
        sy_error err;
        ck_assert_msg(build_err(l, 2, &err) == SY_EINVAL, "%s taken", bad[i]);
        ck_assert_str_eq(err.path, "instances[1].host");
        ck_assert_ptr_nonnull(strstr(err.message, "instance \"b\""));
    }
    static const char *const good[][2] = {
        {"orders-1.svc.cluster.local", "orders-1.svc.cluster.local"},
        {"10.0.0.1", "10.0.0.1"},
        {"my_service", "my_service"},
        {"::1", "::1"},
        {"[::1]", "::1"},
        {"[2001:db8::7]", "2001:db8::7"}};
    sy__alloc a = the_alloc();
    for (size_t i = 0; i < sizeof good / sizeof *good; i++) {
        sy_instance l[1] = {{.id = "a", .host = good[i][0], .port = 1}};
        sy__service *s = NULL;
        sy_error err;
        ck_assert_msg(sy__service_new(&a, "svc", l, 1, &s, &err) == 0, "%s: %s",
                      good[i][0], err.message);
        ck_assert_str_eq(sy__service_instance(s, 0)->host, good[i][1]);
        sy__service_unref(s);
    }
    /* a delta's ADD is checked the same way, with its own path */
    sy_instance l[1] = {{.id = "a", .host = "h", .port = 1}};
    sy__service *s = NULL, *t = NULL;
    ck_assert_int_eq(sy__service_new(&a, "svc", l, 1, &s, NULL), 0);
    sy_instance_delta d = {SY_INSTANCE_ADD,
                           {.id = "b", .host = "h:80", .port = 1}};
    sy_error err;
    ck_assert_int_eq(sy__service_apply_deltas(s, &d, 1, &t, &err), SY_EINVAL);
    ck_assert_ptr_null(t);
    ck_assert_str_eq(err.path, "deltas[0].instance.host");
    sy__service_unref(s);
}
END_TEST

/* "version": "" made a versioned instance (the smallest version) that
 * looks unversioned: untagged traffic never reached it while another
 * instance had no version. */
START_TEST(an_empty_version_is_refused_with_its_path) {
    sy_kv md[2] = {{"zone", "a"}, {"version", ""}};
    sy_instance l[1] = {{.id = "a",
                         .host = "h",
                         .port = 1,
                         .metadata = md,
                         .metadata_count = 2}};
    sy_error err;
    ck_assert_int_eq(build_err(l, 1, &err), SY_EINVAL);
    ck_assert_str_eq(err.path, "instances[0].metadata[1].value");
    ck_assert_ptr_nonnull(strstr(err.message, "empty version"));
}
END_TEST

START_TEST(duplicate_metadata_key_is_reported) {
    sy_kv md[2] = {{"zone", "a"}, {"zone", "b"}};
    sy_instance l[1] = {{.id = "a",
                         .host = "h",
                         .port = 1,
                         .metadata = md,
                         .metadata_count = 2}};
    sy_error err;
    ck_assert_int_eq(build_err(l, 1, &err), SY_EDUPLICATE);
    ck_assert_str_eq(err.path, "instances[0].metadata[1].key");
}
END_TEST

START_TEST(instances_are_copied_and_weight_zero_becomes_one) {
    char id[] = "abc", host[] = "host", key[] = "zone", val[] = "eu";
    sy_kv md[1] = {{key, val}};
    sy_instance l[1] = {{.id = id,
                         .host = host,
                         .port = 80,
                         .metadata = md,
                         .metadata_count = 1}};
    sy__alloc a = the_alloc();
    sy__service *s = NULL;
    ck_assert_int_eq(sy__service_new(&a, "svc", l, 1, &s, NULL), 0);
    id[0] = host[0] = key[0] = val[0] = 'X';
    const sy_instance *in = sy__service_find(s, "abc");
    ck_assert_ptr_nonnull(in);
    ck_assert_str_eq(in->host, "host");
    ck_assert_uint_eq(in->weight, 1);
    ck_assert_str_eq(in->metadata[0].key, "zone");
    ck_assert_str_eq(in->metadata[0].value, "eu");
    ck_assert_str_eq(sy__service_name(s), "svc");
    sy__service_unref(s);
}
END_TEST

START_TEST(references_keep_the_service_alive) {
    spec sp[] = {{.id = "a"}};
    sy__service *s = mk(sp, 1);
    ck_assert_ptr_eq(sy__service_ref(s), s);
    sy__service_unref(s);
    sy__select_params p = SY_SELECT_PARAMS_INIT;
    ck_assert_str_eq(pick(s, &p), "a"); /* ASan would flag a free */
    sy__service_unref(s);
}
END_TEST

typedef struct rr_thread {
    const sy__service *s;
    int seen[3];
} rr_thread;

static void *rr_worker(void *arg) {
    rr_thread *t = arg;
    sy__select_params p = SY_SELECT_PARAMS_INIT;
    for (int i = 0; i < 50000; i++) {
        sy_selection sel;
        if (sy__service_select(t->s, &p, &sel, NULL) == 0)
            t->seen[sel.id[0] - 'a']++;
    }
    return NULL;
}

START_TEST(round_robin_stays_exact_across_concurrent_threads) {
    spec sp[] = {{.id = "a", .weight = 1},
                 {.id = "b", .weight = 2},
                 {.id = "c", .weight = 7}};
    sy__service *s = mk(sp, 3);
    rr_thread t[4];
    pthread_t th[4];
    for (int i = 0; i < 4; i++) {
        t[i] = (rr_thread){.s = s};
        ck_assert_int_eq(pthread_create(&th[i], NULL, rr_worker, &t[i]), 0);
    }
    int seen[3] = {0};
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        for (int k = 0; k < 3; k++)
            seen[k] += t[i].seen[k];
    }
    /* 200k picks = 20k whole cycles, whoever took which turn */
    ck_assert_int_eq(seen[0], 20000);
    ck_assert_int_eq(seen[1], 40000);
    ck_assert_int_eq(seen[2], 140000);
    sy__service_unref(s);
}
END_TEST

typedef struct fail_state {
    long budget;        /* allocations left; < 0 = unlimited */
    _Atomic long calls; /* allocations asked for */
} fail_state;

static void *fail_malloc(void *data, size_t n) {
    fail_state *f = data;
    atomic_fetch_add(&f->calls, 1);
    if (f->budget == 0)
        return NULL;
    if (f->budget > 0)
        f->budget--;
    return malloc(n);
}

static void *fail_realloc(void *data, void *p, size_t n) {
    fail_state *f = data;
    atomic_fetch_add(&f->calls, 1);
    if (f->budget == 0)
        return NULL;
    if (f->budget > 0)
        f->budget--;
    return realloc(p, n);
}

static void fail_free(void *data, void *p) {
    (void)data;
    free(p);
}

START_TEST(build_and_deltas_fail_cleanly_at_every_allocation) {
    spec sp[] = {{.id = "a", .version = "1.0", .zone = "eu", .hint = "x"},
                 {.id = "b", .version = "1.0", .zone = "us", .weight = 3},
                 {.id = "c", .zone = "eu"},
                 {.id = "d", .version = "2.0", .state = SY_INSTANCE_DOWN}};
    sy_instance list[4];
    sy_kv md[12];
    fill(sp, 4, list, md);
    fail_state f = {0};
    sy_allocator user = {fail_malloc, fail_realloc, fail_free, &f};
    sy__alloc a;
    sy__alloc_init(&a, &user);
    int failures = 0;
    for (long budget = 0;; budget++) {
        f.budget = budget;
        sy__service *s = NULL, *t = NULL;
        sy_error err;
        int rc = sy__service_new(&a, "svc", list, 4, &s, &err);
        if (rc == 0) {
            sy_instance_delta d = delta(SY_INSTANCE_REMOVE, "a");
            rc = sy__service_apply_deltas(s, &d, 1, &t, &err);
            sy__service_unref(s);
            sy__service_unref(t);
        }
        if (rc == 0)
            break;
        ck_assert_int_eq(rc, SY_ENOMEM);
        ck_assert_ptr_null(t);
        failures++;
    }
    ck_assert_int_gt(failures, 5); /* LeakSanitizer checks the cleanup */
}
END_TEST

/* ---- what a pick builds ---- */

/* 60 instances over zones z0 (30), z1 (20) and z2 (10), weights 1..4; instance
 * `heavier` (if >= 0) gets weight 9. Built with allocator `a`. */
static sy__service *zoned(const sy__alloc *a, int heavier) {
    static char ids[60][8];
    spec sp[60];
    for (int i = 0; i < 60; i++) {
        snprintf(ids[i], sizeof ids[i], "n%d", i);
        sp[i] = (spec){.id = ids[i],
                       .weight = i == heavier ? 9 : (uint32_t)(i % 4 + 1),
                       .zone = i < 30   ? "z0"
                               : i < 50 ? "z1"
                                        : "z2"};
    }
    sy_instance list[60];
    sy_kv md[180];
    fill(sp, 60, list, md);
    sy__service *s = NULL;
    sy_error err;
    ck_assert_int_eq(sy__service_new(a, "svc", list, 60, &s, &err), 0);
    return s;
}

/* Hash pick of key k with zone preference z ("" = none). */
static const char *zone_hash_pick(const sy__service *s, const char *z, int k) {
    sy__select_params p = SY_SELECT_PARAMS_INIT;
    p.policy = SY_LB_HASH;
    p.zone = (sy_str){z, strlen(z)};
    char buf[32];
    snprintf(buf, sizeof buf, "key-%d", k * 7919);
    p.hash_key = (sy_str){buf, strlen(buf)};
    return pick(s, &p);
}

static const char *const ZONES[] = {"", "z0", "z1", "z2"};

START_TEST(nothing_is_built_for_a_service_no_pick_used) {
    fail_state f = {.budget = -1};
    sy_allocator user = {fail_malloc, fail_realloc, fail_free, &f};
    sy__alloc a;
    sy__alloc_init(&a, &user);
    sy__service *v1 = zoned(&a, -1);
    sy__select_params rr = SY_SELECT_PARAMS_INIT;
    sy__select_params rnd = SY_SELECT_PARAMS_INIT;
    rnd.policy = SY_LB_RANDOM;
    /* the first round-robin pick of a group of several weights makes its
     * smooth cycle (service_select.c sy__svc_wrr_get), once */
    long before = f.calls;
    pick(v1, &rr);
    long cycle = f.calls - before;
    ck_assert_int_gt(cycle, 0);
    before = f.calls;
    for (int i = 0; i < 100; i++) {
        rnd.seed = (uint64_t)i + 1;
        pick(v1, &rr);
        pick(v1, &rnd);
    }
    ck_assert_int_eq(f.calls, before); /* balancing allocates nothing more */
    sy__service *v2 = zoned(&a, 7);
    before = f.calls;
    sy__service_inherit_rr(v2, v1);
    /* v1's cycle was used: v2's is made by the writer, the same work; v1
     * had no other state built: v2 builds none */
    ck_assert_int_eq(f.calls - before, cycle);
    before = f.calls;
    for (int i = 0; i < 100; i++)
        pick(v2, &rr);
    ck_assert_int_eq(f.calls, before); /* no reader builds v2's cycle */
    /* a hash pick needs nothing built: it allocates nothing */
    before = f.calls;
    for (int k = 0; k < 100; k++)
        zone_hash_pick(v2, "z2", k);
    ck_assert_int_eq(f.calls, before);
    sy__service_unref(v1);
    sy__service_unref(v2);
}
END_TEST

/* A service's build makes no smooth cycle (only a round-robin pick does),
 * and a pick that cannot have one (memory) still gives every instance its
 * weight's share of each cycle. */
START_TEST(round_robin_cycle_is_made_by_the_first_pick_or_skipped) {
    fail_state f = {.budget = -1};
    sy_allocator user = {fail_malloc, fail_realloc, fail_free, &f};
    sy__alloc a;
    sy__alloc_init(&a, &user);
    sy__service *s = zoned(&a, -1);
    sy__select_params rr = SY_SELECT_PARAMS_INIT;
    rr.zone = (sy_str){"z1", 2};
    f.budget = 0; /* no cycle can be made: the permutation */
    int seen[60] = {0};
    long W = 0; /* z1: n30..n49, weights i % 4 + 1 */
    for (int i = 30; i < 50; i++)
        W += i % 4 + 1;
    for (long t = 0; t < 2 * W; t++)
        seen[atoi(pick(s, &rr) + 1)]++;
    for (int i = 0; i < 60; i++)
        ck_assert_int_eq(seen[i], i >= 30 && i < 50 ? 2 * (i % 4 + 1) : 0);
    f.budget = -1; /* now the next pick makes it, and keeps to the cycle */
    long before = f.calls;
    memset(seen, 0, sizeof seen);
    for (long t = 0; t < W; t++)
        seen[atoi(pick(s, &rr) + 1)]++;
    ck_assert_int_gt(f.calls, before);
    for (int i = 30; i < 50; i++)
        ck_assert_int_eq(seen[i], i % 4 + 1);
    sy__service_unref(s);
}
END_TEST

typedef struct race_arg {
    const sy__service *s;
    pthread_barrier_t *go;
    char got[4][64][8]; /* zone x key -> id */
} race_arg;

static void *race_worker(void *arg) {
    race_arg *r = arg;
    pthread_barrier_wait(r->go);
    for (size_t z = 0; z < 4; z++)
        for (int k = 0; k < 64; k++)
            snprintf(r->got[z][k], sizeof r->got[z][k], "%s",
                     zone_hash_pick(r->s, ZONES[(z + (size_t)k) % 4], k));
    return NULL;
}

START_TEST(first_hash_picks_racing_on_threads_agree) {
    enum { T = 4 };
    sy__alloc a = the_alloc();
    for (int round = 0; round < 5; round++) {
        sy__service *s = zoned(&a, round), *ref = zoned(&a, round);
        pthread_barrier_t go;
        pthread_barrier_init(&go, NULL, T);
        static race_arg args[T];
        pthread_t th[T];
        for (int t = 0; t < T; t++) {
            args[t].s = s;
            args[t].go = &go;
            ck_assert_int_eq(
                pthread_create(&th[t], NULL, race_worker, &args[t]), 0);
        }
        for (int t = 0; t < T; t++)
            pthread_join(th[t], NULL);
        pthread_barrier_destroy(&go);
        for (size_t z = 0; z < 4; z++)
            for (int k = 0; k < 64; k++) {
                const char *want =
                    zone_hash_pick(ref, ZONES[(z + (size_t)k) % 4], k);
                for (int t = 0; t < T; t++)
                    ck_assert_str_eq(args[t].got[z][k], want);
            }
        sy__service_unref(s);
        sy__service_unref(ref);
    }
}
END_TEST

START_TEST(route_metadata_values_parse) {
    sy__lb_policy pol;
    sy__version_fallback fb;
    ck_assert_int_eq(sy__lb_policy_parse("hash", 4, &pol), 0);
    ck_assert_int_eq(pol, SY_LB_HASH);
    ck_assert_int_eq(sy__lb_policy_parse("round-robin", 11, &pol), 0);
    ck_assert_int_eq(pol, SY_LB_ROUND_ROBIN);
    ck_assert_int_eq(sy__lb_policy_parse("least", 5, &pol), SY_EINVAL);
    ck_assert_int_eq(sy__version_fallback_parse("latest", 6, &fb), 0);
    ck_assert_int_eq(fb, SY_VERSION_FALLBACK_LATEST);
    ck_assert_int_eq(sy__version_fallback_parse("any", 3, &fb), 0);
    ck_assert_int_eq(fb, SY_VERSION_FALLBACK_ANY);
    ck_assert_int_eq(sy__version_fallback_parse("lates", 5, &fb), SY_EINVAL);
}
END_TEST

START_TEST(bench_hook_measures_every_policy) {
    ck_assert_double_gt(sy__service_bench_select_ns("round-robin", 100, 1000),
                        0);
    ck_assert_double_gt(sy__service_bench_select_ns("random", 100, 1000), 0);
    ck_assert_double_gt(sy__service_bench_select_ns("hash", 100, 1000), 0);
    ck_assert_double_lt(sy__service_bench_select_ns("nope", 100, 1000), 0);
}
END_TEST

/* ---- per-source fingerprints (router_status.c) ---- */

/* What a source's fingerprint is by definition: its live routes in rank
 * order, hashed one after the other; 0 without routes. Worked out here
 * from the public snapshot API, route by route. */
static uint64_t expected_source_fp(sy_snapshot *s, const char *source,
                                   size_t *count) {
    uint64_t h = 0x5359u;
    size_t n = 0;
    for (size_t i = 0; i < sy_snapshot_route_count(s); i++) {
        const sy_route *rt = sy_snapshot_route_at(s, i);
        const char *src = NULL;
        ck_assert_ptr_eq(sy_snapshot_find_route(s, sy_route_id(rt), &src), rt);
        if (!src || strcmp(src, source) != 0)
            continue;
        h = sy__hash_mix(h, sy_route_fingerprint(rt));
        n++;
    }
    *count = n;
    return n ? h : 0;
}

START_TEST(source_fingerprints_in_one_pass_match_the_definition) {
    sy_router *r;
    sy_error err;
    ck_assert_int_eq(sy_router_new(NULL, &r, &err), 0);
    const char *names[] = {"a", "b", "c", "empty"};
    for (size_t k = 0; k < 4; k++)
        ck_assert_int_eq(sy_router_add_source(r, names[k], &err), 0);
    /* routes of a, b and c interleave in rank order (orders 0..8) */
    for (size_t k = 0; k < 3; k++) {
        char json[1024];
        size_t len = 0;
        len += (size_t)snprintf(json + len, sizeof json - len, "[");
        for (int j = 0; j < 3; j++)
            len += (size_t)snprintf(
                json + len, sizeof json - len,
                "%s{\"id\":\"%s-%d\",\"uri\":\"http://h%d\",\"order\":%d,"
                "\"predicates\":[\"Path=/%s/%d/**\"]}",
                j ? "," : "", names[k], j, j, j * 3 + (int)(2 - k), names[k],
                j);
        snprintf(json + len, sizeof json - len, "]");
        ck_assert_msg(
            sy_router_apply(r, names[k], json, strlen(json), NULL, &err) == 0,
            "%s: %s", err.path, err.message);
    }
    size_t need = 0;
    ck_assert_int_eq(sy_router_metrics_text(r, NULL, 0, &need, &err),
                     SY_ETOOSMALL);
    char *text = malloc(need);
    ck_assert_ptr_nonnull(text);
    ck_assert_int_eq(sy_router_metrics_text(r, text, need, NULL, &err), 0);
    sy_snapshot *s = sy_router_acquire(r);
    ck_assert_uint_eq(sy_snapshot_route_count(s), 9);
    for (size_t k = 0; k < 4; k++) {
        size_t count;
        uint64_t want = expected_source_fp(s, names[k], &count);
        ck_assert_uint_eq(count, k < 3 ? 3 : 0);
        ck_assert(k == 3 || want != 0);
        sy_source_status st;
        ck_assert_int_eq(sy_router_source_status(r, k, &st, &err), 0);
        ck_assert_str_eq(st.name, names[k]);
        ck_assert_uint_eq(st.fingerprint, want);
        ck_assert_uint_eq(st.routes, count);
        /* the scrape, which works out every source in one pass */
        char line[256];
        snprintf(line, sizeof line,
                 "switchyard_source_routes{source=\"%s\"} %zu\n", names[k],
                 count);
        ck_assert_msg(strstr(text, line), "missing %s", line);
        char *at = strstr(text, "switchyard_source_info{source=\"");
        bool found = false;
        char prefix[64], fp[64];
        snprintf(prefix, sizeof prefix, "switchyard_source_info{source=\"%s\"",
                 names[k]);
        snprintf(fp, sizeof fp, "fingerprint=\"%016llx\"",
                 (unsigned long long)want);
        for (; at; at = strstr(at + 1, "switchyard_source_info{source=\""))
            if (strncmp(at, prefix, strlen(prefix)) == 0) {
                char *eol = strchr(at, '\n');
                ck_assert_ptr_nonnull(eol);
                *eol = '\0';
                ck_assert_msg(strstr(at, fp), "%s lacks %s", at, fp);
                *eol = '\n';
                found = true;
            }
        ck_assert(found);
    }
    /* the three sources' fingerprints differ */
    size_t c;
    uint64_t fa = expected_source_fp(s, "a", &c),
             fb = expected_source_fp(s, "b", &c),
             fc = expected_source_fp(s, "c", &c);
    ck_assert(fa != fb && fb != fc && fa != fc);
    sy_snapshot_release(s);
    free(text);
    sy_router_free(r);
}
END_TEST

/* sy_snapshot_service_count ... sy_snapshot_instance_health: the
 * services by name, their instances in order, and an ejection seen. */
START_TEST(snapshot_lists_services_instances_and_their_health) {
    sy_router_options o = SY_ROUTER_OPTIONS_INIT;
    o.outlier.consecutive_failures = 2;
    sy_router *r;
    ck_assert_int_eq(sy_router_new(&o, &r, NULL), 0);
    ck_assert_int_eq(sy_router_add_source(r, "s", NULL), 0);
    const char *doc = "[{\"id\":\"k\",\"uri\":\"lb://b\"}]";
    ck_assert_int_eq(sy_router_apply(r, "s", doc, strlen(doc), NULL, NULL), 0);
    sy_instance in[3] = {
        {"b1", "10.0.0.1", 80, false, 1, SY_INSTANCE_UP, NULL, 0},
        {"b2", "10.0.0.2", 80, false, 1, SY_INSTANCE_UP, NULL, 0},
        {"b3", "10.0.0.3", 80, false, 1, SY_INSTANCE_UP, NULL, 0}};
    ck_assert_int_eq(sy_router_set_instances(r, "b", in, 3, NULL, NULL), 0);
    ck_assert_int_eq(sy_router_set_instances(r, "a", in, 1, NULL, NULL), 0);
    sy_match_ctx *ctx;
    ck_assert_int_eq(sy_match_ctx_new(NULL, &ctx, NULL), 0);
    sy_snapshot *s = sy_router_acquire(r);
    sy_request req = SY_REQUEST_INIT;
    req.method = (sy_str){"GET", 3};
    req.path = (sy_str){"/", 1};
    sy_match *m = NULL;
    ck_assert_int_eq(sy_snapshot_match(s, ctx, &req, &m), 0);
    sy_target t;
    ck_assert_int_eq(sy_match_target(m, NULL, 0, &t, NULL), 0);
    sy_router_report_outcome(r, &t, SY_OUTCOME_CONNECT_FAILURE);
    sy_router_report_outcome(r, &t, SY_OUTCOME_CONNECT_FAILURE);
    ck_assert_uint_eq(sy_snapshot_service_count(s), 2);
    ck_assert_str_eq(sy_snapshot_service_name(s, 0), "a");
    ck_assert_str_eq(sy_snapshot_service_name(s, 1), "b");
    ck_assert_ptr_null(sy_snapshot_service_name(s, 2));
    ck_assert_uint_eq(sy_snapshot_instance_count(s, 1), 3);
    ck_assert_uint_eq(sy_snapshot_instance_count(s, 9), 0);
    int ejected = 0;
    for (size_t i = 0; i < 3; i++) {
        sy_instance_health h;
        ck_assert_int_eq(sy_snapshot_instance_health(s, 1, i, &h), 0);
        ck_assert_str_eq(h.instance->id, in[i].id);
        if (strcmp(h.instance->id, t.instance_id) == 0) {
            ck_assert_uint_eq(h.ejections, 1);
            ck_assert_int_gt(h.ejected_until_ms, 0);
            ejected++;
        } else {
            ck_assert_uint_eq(h.ejections, 0);
            ck_assert_int_eq(h.ejected_until_ms, 0);
        }
    }
    ck_assert_int_eq(ejected, 1);
    sy_instance_health h;
    ck_assert_int_eq(sy_snapshot_instance_health(s, 1, 3, &h), SY_EINVAL);
    sy_snapshot_release(s);
    sy_match_ctx_free(ctx);
    sy_router_free(r);
}
END_TEST

int main(void) {
    Suite *s = suite_create("service");
    TCase *tc = tcase_create("service");
    tcase_add_test(tc, version_numeric_segments_compare_as_numbers);
    tcase_add_test(tc, version_missing_segment_is_smaller);
    tcase_add_test(
        tc, version_numeric_segment_is_below_non_numeric_and_suffix_below_none);
    tcase_add_test(
        tc, version_order_is_total_for_equal_numbers_spelled_differently);
    tcase_add_test(tc, no_header_prefers_unversioned_instances);
    tcase_add_test(tc, no_header_without_unversioned_uses_latest_version);
    tcase_add_test(tc, header_keeps_instances_of_exactly_that_version);
    tcase_add_test(tc, unknown_version_without_fallback_is_no_instance);
    tcase_add_test(tc,
                   unknown_version_with_fallback_latest_uses_latest_up_version);
    tcase_add_test(tc, fallback_latest_without_any_version_uses_unversioned);
    tcase_add_test(tc,
                   unknown_version_with_fallback_any_uses_every_up_instance);
    tcase_add_test(tc, version_whose_instances_are_all_down_is_no_instance);
    tcase_add_test(tc, instances_not_up_are_never_selected);
    tcase_add_test(tc, all_instances_down_is_no_instance);
    tcase_add_test(tc, empty_or_unknown_service_is_no_instance);
    tcase_add_test(tc, hint_keeps_matching_instances);
    tcase_add_test(tc, hint_without_match_falls_back_to_whole_set);
    tcase_add_test(tc, hint_applies_only_within_the_version_set);
    tcase_add_test(tc, zone_preference_keeps_matching_instances);
    tcase_add_test(tc, zone_without_match_falls_back_to_whole_set);
    tcase_add_test(tc, zone_applies_after_hint);
    tcase_add_test(tc,
                   zone_preference_among_1000_instances_picks_only_that_zone);
    tcase_add_test(tc, selection_reports_scheme_from_secure_flag_and_websocket);
    tcase_add_test(tc, round_robin_weights_1_2_7_are_exact_per_cycle);
    tcase_add_test(tc, round_robin_is_smooth_like_nginx);
    tcase_add_test(tc, round_robin_breaks_ties_by_instance_order_like_nginx);
    tcase_add_test(tc, round_robin_cycle_is_made_by_the_first_pick_or_skipped);
    tcase_add_test(tc, round_robin_1_2_7_has_no_long_runs);
    tcase_add_test(tc, round_robin_with_40_distinct_weights_is_exact_per_cycle);
    tcase_add_test(tc, round_robin_with_huge_weights_is_exact_per_cycle);
    tcase_add_test(tc, random_follows_weights_1_2_7_within_tolerance);
    tcase_add_test(tc, random_is_deterministic_for_a_seed);
    tcase_add_test(tc, hash_is_sticky_for_a_key);
    tcase_add_test(tc, hash_spreads_keys_over_all_instances);
    tcase_add_test(tc, hash_removing_one_of_ten_moves_only_its_keys);
    tcase_add_test(tc, hash_adding_one_moves_only_keys_to_it);
    tcase_add_test(tc, hash_shares_follow_equal_weights);
    tcase_add_test(tc, hash_shares_follow_weights_1_2_7);
    tcase_add_test(tc, hash_shares_follow_weights_1_1000_past_any_cap);
    tcase_add_test(tc,
                   hash_weight_change_moves_keys_only_to_or_from_that_instance);
    tcase_add_test(tc,
                   hash_in_a_large_group_moves_only_the_removed_instance_keys);
    tcase_add_test(tc, hash_within_a_zone_is_stable_when_another_zone_changes);
    tcase_add_test(tc, hash_without_key_balances_by_round_robin);
    tcase_add_test(tc, delta_add_appends_a_new_instance);
    tcase_add_test(tc, delta_add_replaces_an_existing_id_in_place);
    tcase_add_test(tc, delta_remove_drops_the_instance);
    tcase_add_test(tc, delta_weight_changes_the_share);
    tcase_add_test(tc, delta_state_takes_an_instance_out_at_once);
    tcase_add_test(tc, delta_unknown_id_is_not_found);
    tcase_add_test(tc, delta_remove_then_remove_again_is_not_found);
    tcase_add_test(tc, deltas_are_all_or_nothing);
    tcase_add_test(tc, round_robin_position_survives_deltas);
    tcase_add_test(tc, diff_reports_added_removed_and_changed_ids);
    tcase_add_test(tc, diff_outlives_its_services_and_handles_a_missing_side);
    tcase_add_test(tc, diff_of_equal_services_is_empty);
    tcase_add_test(tc, empty_id_is_invalid_with_its_path);
    tcase_add_test(tc, duplicate_id_is_reported_at_the_second_occurrence);
    tcase_add_test(tc, empty_host_and_zero_port_are_invalid);
    tcase_add_test(tc, duplicate_metadata_key_is_reported);
    tcase_add_test(tc, instances_are_copied_and_weight_zero_becomes_one);
    tcase_add_test(tc, references_keep_the_service_alive);
    tcase_add_test(tc, round_robin_stays_exact_across_concurrent_threads);
    tcase_add_test(tc, build_and_deltas_fail_cleanly_at_every_allocation);
    tcase_add_test(tc, nothing_is_built_for_a_service_no_pick_used);
    tcase_add_test(tc, first_hash_picks_racing_on_threads_agree);
    tcase_add_test(tc, route_metadata_values_parse);
    tcase_add_test(tc, bench_hook_measures_every_policy);
    tcase_add_test(tc, source_fingerprints_in_one_pass_match_the_definition);
    tcase_add_test(tc, snapshot_lists_services_instances_and_their_health);
    tcase_add_test(tc, a_host_no_host_can_connect_to_is_refused_with_its_path);
    tcase_add_test(tc, an_empty_version_is_refused_with_its_path);
    suite_add_tcase(s, tc);
    return sy_test_run(s);
}
