/* test_gray.c - gray release end to end: each recipe of
 * docs/gray-release.md (by header, by percentage, by user hash, rollback)
 * and instance removal taking effect at the next acquire. */
#include "testutil.h"

#include "switchyard.h"

#include <stdio.h>
#include <string.h>

static sy_router *router_with(const char *json) {
    sy_router *r;
    sy_error err;
    ck_assert_int_eq(sy_router_new(NULL, &r, &err), 0);
    ck_assert_int_eq(sy_router_add_source(r, "gw", &err), 0);
    ck_assert_msg(sy_router_apply(r, "gw", json, strlen(json), NULL, &err) == 0,
                  "%s: %s", err.path, err.message);
    return r;
}

static void set_orders(sy_router *r, bool with_canary) {
    sy_kv v2[] = {{"version", "2.0"}};
    sy_instance list[] = {
        {"stable-1", "10.0.0.1", 8080, false, 1, SY_INSTANCE_UP, NULL, 0},
        {"stable-2", "10.0.0.2", 8080, false, 1, SY_INSTANCE_UP, NULL, 0},
        {"canary-1", "10.0.1.1", 8080, false, 1, SY_INSTANCE_UP, v2, 1}};
    ck_assert_int_eq(sy_router_set_instances(r, "orders", list,
                                             with_canary ? 3 : 2, NULL, NULL),
                     0);
}

/* Route and instance chosen for one request; returns the instance id (or
 * "" when none) and stores the route id in *route. */
static const char *pick(sy_router *r, const char *path, const char *hname,
                        const char *hvalue, uint64_t seed, const char **route) {
    static char inst[64], rid[64];
    sy_match_ctx *ctx;
    ck_assert_int_eq(sy_match_ctx_new(NULL, &ctx, NULL), 0);
    sy_header h = {{hname, hname ? strlen(hname) : 0},
                   {hvalue, hvalue ? strlen(hvalue) : 0}};
    sy_request req = SY_REQUEST_INIT;
    req.method = (sy_str){"GET", 3};
    req.host = (sy_str){"shop", 4};
    req.path = (sy_str){path, strlen(path)};
    req.headers = hname ? &h : NULL;
    req.header_count = hname ? 1 : 0;
    req.seed = seed;
    sy_snapshot *s = sy_router_acquire(r);
    sy_match *m;
    ck_assert_int_eq(sy_snapshot_match(s, ctx, &req, &m), 0);
    ck_assert_ptr_nonnull(m);
    snprintf(rid, sizeof rid, "%s", sy_route_id(sy_match_route(m)));
    if (route)
        *route = rid;
    sy_selection sel;
    inst[0] = '\0';
    if (sy_snapshot_select(s, ctx, m, &req, &sel, NULL) == 0)
        snprintf(inst, sizeof inst, "%s", sel.id);
    sy_snapshot_release(s);
    sy_match_ctx_free(ctx);
    return inst;
}

static const char *BY_HEADER =
    "[{\"id\":\"orders\",\"uri\":\"lb://orders\","
    "\"predicates\":[\"Path=/orders/**\"],"
    "\"metadata\":{\"version-header\":\"X-Version\"}}]";

START_TEST(recipe_by_header_sends_only_tagged_requests_to_the_canary) {
    sy_router *r = router_with(BY_HEADER);
    set_orders(r, true);
    for (uint64_t seed = 0; seed < 200; seed++) {
        ck_assert_str_eq(pick(r, "/orders/1", "X-Version", "2.0", seed, NULL),
                         "canary-1");
        const char *plain = pick(r, "/orders/1", NULL, NULL, seed, NULL);
        ck_assert_msg(strncmp(plain, "stable-", 7) == 0, "got %s", plain);
    }
    /* an unknown version gets no instance (503), not a random one */
    ck_assert_str_eq(pick(r, "/orders/1", "X-Version", "9.9", 1, NULL), "");
    sy_router_free(r);
}
END_TEST

/* A version header that is present with an empty value is a request
 * for version "": no instance has it, so no instance (503), whether the
 * host hands the empty value as {"", 0} (the gateway, nginx: a pointer
 * into their buffer) or as {NULL, 0} (the Python bindings). The second
 * was read as "no header" and went to the stable instances. */
START_TEST(an_empty_version_header_is_present_however_the_host_spells_it) {
    sy_router *r = router_with(BY_HEADER);
    set_orders(r, true);
    ck_assert_str_eq(pick(r, "/orders/1", "X-Version", "", 1, NULL), "");
    ck_assert_str_eq(pick(r, "/orders/1", "X-Version", NULL, 1, NULL), "");
    sy_router_free(r);
}
END_TEST

static const char *BY_PERCENT =
    "[{\"id\":\"orders-canary\",\"uri\":\"lb://orders-canary\","
    "\"predicates\":[\"Path=/orders/**\",\"Weight=orders,10\"]},"
    "{\"id\":\"orders-stable\",\"uri\":\"lb://orders\","
    "\"predicates\":[\"Path=/orders/**\",\"Weight=orders,90\"]}]";

START_TEST(recipe_by_percentage_splits_traffic_by_weight) {
    sy_router *r = router_with(BY_PERCENT);
    int canary = 0, n = 20000;
    for (int seed = 0; seed < n; seed++) {
        const char *route;
        pick(r, "/orders/1", NULL, NULL, (uint64_t)seed * 7919u + 1, &route);
        canary += strcmp(route, "orders-canary") == 0;
    }
    /* 10% +- 1.5 points over 20,000 draws */
    ck_assert_msg(canary > n * 85 / 1000 && canary < n * 115 / 1000,
                  "canary share %d of %d", canary, n);
    /* the same seed always takes the same side */
    const char *a, *b;
    pick(r, "/orders/1", NULL, NULL, 42, &a);
    char first[64];
    snprintf(first, sizeof first, "%s", a);
    pick(r, "/orders/1", NULL, NULL, 42, &b);
    ck_assert_str_eq(first, b);
    sy_router_free(r);
}
END_TEST

static const char *BY_USER =
    "[{\"id\":\"orders-canary\",\"uri\":\"lb://orders\",\"order\":-1,"
    "\"predicates\":[\"Path=/orders/**\",\"Header=X-User-Id,.*[0-1]\"],"
    "\"metadata\":{\"version-header\":\"X-Never\",\"version-fallback\":"
    "\"latest\",\"lb-policy\":\"hash\",\"lb-hash-header\":\"X-User-Id\"}},"
    "{\"id\":\"orders-stable\",\"uri\":\"lb://orders\","
    "\"predicates\":[\"Path=/orders/**\"],"
    "\"metadata\":{\"lb-policy\":\"hash\",\"lb-hash-header\":\"X-User-Id\"}}]";

START_TEST(recipe_by_user_hash_keeps_each_user_on_one_side) {
    sy_router *r = router_with(BY_USER);
    set_orders(r, true);
    for (int u = 0; u < 100; u++) {
        char user[16];
        snprintf(user, sizeof user, "user%d", u);
        const char *route;
        char inst[64];
        snprintf(inst, sizeof inst, "%s",
                 pick(r, "/orders/1", "X-User-Id", user, 1, &route));
        bool canary_user = u % 10 <= 1;
        ck_assert_str_eq(route,
                         canary_user ? "orders-canary" : "orders-stable");
        /* sticky: other seeds, same user, same instance */
        for (uint64_t seed = 2; seed < 6; seed++)
            ck_assert_str_eq(
                pick(r, "/orders/1", "X-User-Id", user, seed, NULL), inst);
        if (!canary_user)
            ck_assert_msg(strncmp(inst, "stable-", 7) == 0, "%s -> %s", user,
                          inst);
    }
    sy_router_free(r);
}
END_TEST

START_TEST(recipe_rollback_returns_all_traffic_to_stable) {
    sy_router *r = router_with(
        "{\"version\":\"1\",\"routes\":[{\"id\":\"orders-stable\",\"uri\":"
        "\"lb://orders\",\"predicates\":[\"Path=/orders/**\"]}]}");
    const char *v2 =
        "{\"version\":\"2\",\"routes\":[{\"id\":\"orders-canary\",\"uri\":"
        "\"lb://orders-canary\",\"predicates\":[\"Path=/orders/**\","
        "\"Weight=orders,50\"]},{\"id\":\"orders-stable\",\"uri\":"
        "\"lb://orders\",\"predicates\":[\"Path=/orders/**\","
        "\"Weight=orders,50\"]}]}";
    ck_assert_int_eq(sy_router_apply(r, "gw", v2, strlen(v2), NULL, NULL), 0);
    int canary = 0;
    for (uint64_t seed = 0; seed < 200; seed++) {
        const char *route;
        pick(r, "/orders/1", NULL, NULL, seed, &route);
        canary += strcmp(route, "orders-canary") == 0;
    }
    ck_assert_int_gt(canary, 50);
    ck_assert_int_eq(sy_router_rollback(r, "gw", "1", NULL, NULL), 0);
    for (uint64_t seed = 0; seed < 200; seed++) {
        const char *route;
        pick(r, "/orders/1", NULL, NULL, seed, &route);
        ck_assert_str_eq(route, "orders-stable");
    }
    sy_router_free(r);
}
END_TEST

START_TEST(a_removed_instance_is_never_chosen_after_the_publish) {
    sy_router *r = router_with(BY_HEADER);
    set_orders(r, true);
    sy_snapshot *old = sy_router_acquire(r); /* an in-flight request */
    sy_instance_delta rm = {SY_INSTANCE_REMOVE, {0}};
    rm.instance.id = "stable-2";
    ck_assert_int_eq(
        sy_router_update_instances(r, "orders", &rm, 1, NULL, NULL), 0);
    for (uint64_t seed = 0; seed < 500; seed++)
        ck_assert_str_ne(pick(r, "/orders/1", NULL, NULL, seed, NULL),
                         "stable-2");
    /* the old snapshot may still finish on it */
    sy_match_ctx *ctx;
    ck_assert_int_eq(sy_match_ctx_new(NULL, &ctx, NULL), 0);
    sy_request req = SY_REQUEST_INIT;
    req.method = (sy_str){"GET", 3};
    req.path = (sy_str){"/orders/1", 9};
    int seen = 0;
    for (uint64_t seed = 0; seed < 50; seed++) {
        req.seed = seed;
        sy_match *m;
        ck_assert_int_eq(sy_snapshot_match(old, ctx, &req, &m), 0);
        sy_selection sel;
        ck_assert_int_eq(sy_snapshot_select(old, ctx, m, &req, &sel, NULL), 0);
        seen += strcmp(sel.id, "stable-2") == 0;
    }
    ck_assert_int_gt(seen, 0);
    sy_match_ctx_free(ctx);
    sy_snapshot_release(old);
    /* a downed instance is skipped at once as well */
    sy_instance_delta down = {SY_INSTANCE_STATE, {0}};
    down.instance.id = "stable-1";
    down.instance.state = SY_INSTANCE_DOWN;
    ck_assert_int_eq(
        sy_router_update_instances(r, "orders", &down, 1, NULL, NULL), 0);
    /* only the canary is left: unversioned requests fall to the latest */
    ck_assert_str_eq(pick(r, "/orders/1", NULL, NULL, 3, NULL), "canary-1");
    sy_router_free(r);
}
END_TEST

/* Every instance versioned: 1.0 (stable), 1.2 (previous canary), 2.0 (the
 * canary). Optionally an unversioned one too. */
static void set_all_versioned(sy_router *r, bool with_unversioned) {
    sy_kv v10[] = {{"version", "1.0"}}, v12[] = {{"version", "1.2"}},
          v20[] = {{"version", "2.0"}};
    sy_instance list[] = {
        {"v10-1", "10.0.0.1", 8080, false, 1, SY_INSTANCE_UP, v10, 1},
        {"v10-2", "10.0.0.2", 8080, false, 1, SY_INSTANCE_UP, v10, 1},
        {"v12-1", "10.0.0.3", 8080, false, 1, SY_INSTANCE_UP, v12, 1},
        {"v20-1", "10.0.1.1", 8080, false, 1, SY_INSTANCE_UP, v20, 1},
        {"plain", "10.0.2.1", 8080, false, 1, SY_INSTANCE_UP, NULL, 0}};
    ck_assert_int_eq(sy_router_set_instances(r, "orders", list,
                                             with_unversioned ? 5 : 4, NULL,
                                             NULL),
                     0);
}

/* The by-header route with metadata version-default / version-fallback
 * (NULL: not set). */
static sy_router *router_with_default(const char *version_default,
                                      const char *fallback) {
    char extra[128] = "", json[512];
    if (version_default)
        snprintf(extra, sizeof extra, ",\"version-default\":\"%s\"",
                 version_default);
    if (fallback)
        snprintf(extra + strlen(extra), sizeof extra - strlen(extra),
                 ",\"version-fallback\":\"%s\"", fallback);
    snprintf(json, sizeof json,
             "[{\"id\":\"orders\",\"uri\":\"lb://orders\","
             "\"predicates\":[\"Path=/orders/**\"],\"metadata\":{"
             "\"version-header\":\"X-Version\"%s}}]",
             extra);
    return router_with(json);
}

START_TEST(untagged_traffic_goes_to_the_latest_version_by_default) {
    /* the trap the docs warn about: with every instance versioned, requests
     * without the header reach the canary */
    sy_router *r = router_with_default(NULL, NULL);
    set_all_versioned(r, false);
    for (uint64_t seed = 0; seed < 20; seed++)
        ck_assert_str_eq(pick(r, "/orders/1", NULL, NULL, seed, NULL), "v20-1");
    sy_router_free(r);
    r = router_with_default("latest", NULL); /* the same, spelled out */
    set_all_versioned(r, false);
    ck_assert_str_eq(pick(r, "/orders/1", NULL, NULL, 1, NULL), "v20-1");
    sy_router_free(r);
}
END_TEST

START_TEST(version_default_oldest_keeps_untagged_traffic_on_stable) {
    sy_router *r = router_with_default("oldest", NULL);
    set_all_versioned(r, false);
    for (uint64_t seed = 0; seed < 20; seed++) {
        const char *got = pick(r, "/orders/1", NULL, NULL, seed, NULL);
        ck_assert_msg(strncmp(got, "v10-", 4) == 0, "got %s", got);
    }
    /* tagged traffic is unchanged */
    ck_assert_str_eq(pick(r, "/orders/1", "X-Version", "2.0", 1, NULL),
                     "v20-1");
    ck_assert_str_eq(pick(r, "/orders/1", "X-Version", "1.2", 1, NULL),
                     "v12-1");
    /* unversioned instances still come first for untagged traffic */
    set_all_versioned(r, true);
    ck_assert_str_eq(pick(r, "/orders/1", NULL, NULL, 1, NULL), "plain");
    sy_router_free(r);
}
END_TEST

START_TEST(version_default_pins_untagged_traffic_to_a_named_version) {
    sy_router *r = router_with_default("1.2", NULL);
    set_all_versioned(r, true); /* even with an unversioned instance */
    for (uint64_t seed = 0; seed < 20; seed++)
        ck_assert_str_eq(pick(r, "/orders/1", NULL, NULL, seed, NULL), "v12-1");
    ck_assert_str_eq(pick(r, "/orders/1", "X-Version", "2.0", 1, NULL),
                     "v20-1");
    sy_router_free(r);

    /* the pinned version is gone: version-fallback decides, as for a
     * request that asked for it */
    r = router_with_default("0.9", NULL);
    set_all_versioned(r, false);
    ck_assert_str_eq(pick(r, "/orders/1", NULL, NULL, 1, NULL), "");
    sy_router_free(r);
    r = router_with_default("0.9", "latest");
    set_all_versioned(r, false);
    ck_assert_str_eq(pick(r, "/orders/1", NULL, NULL, 1, NULL), "v20-1");
    sy_router_free(r);
}
END_TEST

START_TEST(a_service_without_instances_gives_no_instance_not_a_crash) {
    sy_router *r = router_with(BY_HEADER);
    ck_assert_str_eq(pick(r, "/orders/1", NULL, NULL, 1, NULL), "");
    sy_router_free(r);
}
END_TEST

/* lb-policy random with the default seed (0, "the router chooses"): the
 * draw comes from the router's random callback or from the context's own
 * generator, never from the constant 0 (which sent every request to one
 * instance). */
static const char *LB_RANDOM =
    "[{\"id\":\"r\",\"uri\":\"lb://pool\",\"predicates\":[\"Path=/**\"],"
    "\"metadata\":{\"lb-policy\":\"random\"}}]";

static void spread_over_four(sy_router *r, int *counts, int n) {
    sy_instance list[] = {
        {"i0", "10.0.0.1", 80, false, 1, SY_INSTANCE_UP, NULL, 0},
        {"i1", "10.0.0.2", 80, false, 1, SY_INSTANCE_UP, NULL, 0},
        {"i2", "10.0.0.3", 80, false, 1, SY_INSTANCE_UP, NULL, 0},
        {"i3", "10.0.0.4", 80, false, 1, SY_INSTANCE_UP, NULL, 0}};
    ck_assert_int_eq(sy_router_set_instances(r, "pool", list, 4, NULL, NULL),
                     0);
    sy_match_ctx *ctx;
    ck_assert_int_eq(sy_match_ctx_new(NULL, &ctx, NULL), 0);
    sy_request req = SY_REQUEST_INIT; /* seed 0 */
    req.method = (sy_str){"GET", 3};
    req.path = (sy_str){"/x", 2};
    sy_snapshot *s = sy_router_acquire(r);
    for (int i = 0; i < n; i++) {
        sy_match *m;
        ck_assert_int_eq(sy_snapshot_match(s, ctx, &req, &m), 0);
        ck_assert_ptr_nonnull(m);
        sy_selection sel;
        ck_assert_int_eq(sy_snapshot_select(s, ctx, m, &req, &sel, NULL), 0);
        counts[sel.id[1] - '0']++;
    }
    sy_snapshot_release(s);
    sy_match_ctx_free(ctx);
}

START_TEST(lb_random_with_seed_0_uses_the_context_generator) {
    sy_router *r = router_with(LB_RANDOM);
    int counts[4] = {0, 0, 0, 0};
    spread_over_four(r, counts, 1000);
    for (int i = 0; i < 4; i++)
        ck_assert_msg(counts[i] > 150 && counts[i] < 350,
                      "instance %d got %d of 1000", i, counts[i]);
    sy_router_free(r);
}
END_TEST

static uint64_t counting_random(void *data) {
    uint64_t *calls = data;
    return 0x9e3779b97f4a7c15ull * ++*calls;
}

START_TEST(lb_random_with_seed_0_uses_the_router_random_callback) {
    uint64_t calls = 0;
    sy_router_options o = SY_ROUTER_OPTIONS_INIT;
    o.random = counting_random;
    o.callback_data = &calls;
    sy_router *r;
    ck_assert_int_eq(sy_router_new(&o, &r, NULL), 0);
    ck_assert_int_eq(sy_router_add_source(r, "gw", NULL), 0);
    ck_assert_int_eq(
        sy_router_apply(r, "gw", LB_RANDOM, strlen(LB_RANDOM), NULL, NULL), 0);
    int counts[4] = {0, 0, 0, 0};
    spread_over_four(r, counts, 400);
    ck_assert_uint_eq(calls, 400); /* one draw per selection */
    for (int i = 0; i < 4; i++)
        ck_assert_msg(counts[i] > 40, "instance %d got %d of 400", i,
                      counts[i]);
    sy_router_free(r);
}
END_TEST

/* ---- a route that turns to hash after its instances were published ---- */

static const char *ORDERS_RR = "[{\"id\":\"orders\",\"uri\":\"lb://orders\","
                               "\"predicates\":[\"Path=/orders/**\"]}]";
static const char *ORDERS_HASH =
    "[{\"id\":\"orders\",\"uri\":\"lb://orders\","
    "\"predicates\":[\"Path=/orders/**\"],"
    "\"metadata\":{\"lb-policy\":\"hash\",\"lb-hash-header\":\"X-User\"}}]";

/* Twelve instances, weights 1..3; `skip` (if >= 0) left out. */
static void set_dozen(sy_router *r, int skip) {
    static char ids[12][16], hosts[12][16];
    sy_instance list[12];
    size_t n = 0;
    for (int i = 0; i < 12; i++) {
        snprintf(ids[i], sizeof ids[i], "o-%d", i);
        snprintf(hosts[i], sizeof hosts[i], "10.0.2.%d", i);
        if (i != skip)
            list[n++] = (sy_instance){
                ids[i],         hosts[i], 8080, false, (uint32_t)(i % 3 + 1),
                SY_INSTANCE_UP, NULL,     0};
    }
    ck_assert_int_eq(sy_router_set_instances(r, "orders", list, n, NULL, NULL),
                     0);
}

static void apply_doc(sy_router *r, const char *json) {
    sy_error err;
    ck_assert_msg(sy_router_apply(r, "gw", json, strlen(json), NULL, &err) == 0,
                  "%s: %s", err.path, err.message);
}

enum { USERS = 300 };

/* The instance each user goes to. */
static void by_user(sy_router *r, char out[USERS][16]) {
    for (int u = 0; u < USERS; u++) {
        char user[16];
        snprintf(user, sizeof user, "u%d", u * 31);
        snprintf(out[u], sizeof out[u], "%s",
                 pick(r, "/orders/1", "X-User", user, 0, NULL));
        ck_assert_str_ne(out[u], "");
    }
}

START_TEST(a_route_turned_to_hash_after_the_instances_picks_by_hash) {
    /* later: round robin first, instances published, then the route alone
     * changes to hash */
    sy_router *later = router_with(ORDERS_RR);
    set_dozen(later, -1);
    char rr[USERS][16];
    by_user(later, rr); /* round robin: the user header plays no part */
    apply_doc(later, ORDERS_HASH);
    /* first: the hash route was there before the instances */
    sy_router *first = router_with(ORDERS_HASH);
    set_dozen(first, -1);
    static char a[USERS][16], b[USERS][16], again[USERS][16];
    by_user(later, a);
    by_user(first, b);
    by_user(later, again);
    int spread = 0, differs_from_rr = 0;
    for (int u = 0; u < USERS; u++) {
        ck_assert_str_eq(a[u], b[u]);     /* hashed as if always hash */
        ck_assert_str_eq(a[u], again[u]); /* sticky */
        spread += u == 0 || strcmp(a[u], a[0]) != 0;
        differs_from_rr += strcmp(a[u], rr[u]) != 0;
    }
    ck_assert_int_gt(spread, 1);
    ck_assert_int_gt(differs_from_rr, 0);
    /* an instance update after hash picks were made: users of the other
     * instances stay where they were, and both routers agree with a
     * router that starts from the new list */
    set_dozen(later, 5);
    set_dozen(first, 5);
    sy_router *fresh = router_with(ORDERS_HASH);
    set_dozen(fresh, 5);
    static char c[USERS][16], d[USERS][16], e[USERS][16];
    by_user(later, c);
    by_user(first, d);
    by_user(fresh, e);
    int moved = 0;
    for (int u = 0; u < USERS; u++) {
        ck_assert_str_eq(c[u], e[u]);
        ck_assert_str_eq(d[u], e[u]);
        ck_assert_str_ne(c[u], "o-5");
        if (strcmp(a[u], "o-5") != 0)
            ck_assert_str_eq(c[u], a[u]);
        else
            moved++;
    }
    ck_assert_int_gt(moved, 0);
    /* and back to round robin: the hash header no longer decides */
    apply_doc(later, ORDERS_RR);
    static char r2[USERS][16];
    by_user(later, r2);
    int differs = 0;
    for (int u = 0; u < USERS; u++)
        differs += strcmp(r2[u], c[u]) != 0;
    ck_assert_int_gt(differs, 0);
    sy_router_free(later);
    sy_router_free(first);
    sy_router_free(fresh);
}
END_TEST

int main(void) {
    Suite *s = suite_create("gray");
    TCase *tc = tcase_create("gray");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc,
                   recipe_by_header_sends_only_tagged_requests_to_the_canary);
    tcase_add_test(tc, recipe_by_percentage_splits_traffic_by_weight);
    tcase_add_test(tc, lb_random_with_seed_0_uses_the_context_generator);
    tcase_add_test(tc, lb_random_with_seed_0_uses_the_router_random_callback);
    tcase_add_test(tc, untagged_traffic_goes_to_the_latest_version_by_default);
    tcase_add_test(tc, version_default_oldest_keeps_untagged_traffic_on_stable);
    tcase_add_test(tc,
                   version_default_pins_untagged_traffic_to_a_named_version);
    tcase_add_test(
        tc, an_empty_version_header_is_present_however_the_host_spells_it);
    tcase_add_test(tc, recipe_by_user_hash_keeps_each_user_on_one_side);
    tcase_add_test(tc, recipe_rollback_returns_all_traffic_to_stable);
    tcase_add_test(tc, a_removed_instance_is_never_chosen_after_the_publish);
    tcase_add_test(tc,
                   a_service_without_instances_gives_no_instance_not_a_crash);
    tcase_add_test(tc,
                   a_route_turned_to_hash_after_the_instances_picks_by_hash);
    suite_add_tcase(s, tc);
    return sy_test_run(s);
}
