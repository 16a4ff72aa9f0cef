/* test_failalloc.c - failure atomicity: for every allocation point of an
 * apply (and of a one-route change and an instance update), an allocator
 * that fails the Nth allocation makes the call fail cleanly: the live
 * snapshot still matches as before, and nothing leaks. */
#include "testutil.h"

#include "switchyard.h"

#include <stdlib.h>
#include <string.h>

/* Counting allocator: fails allocation number `fail_at` (1-based) when
 * armed; tracks live blocks to find leaks. */
typedef struct counting {
    long calls;
    long fail_at; /* 0: never */
    long live;
} counting;

static void *c_malloc(void *d, size_t n) {
    counting *c = d;
    if (c->fail_at && ++c->calls == c->fail_at)
        return NULL;
    void *p = malloc(n);
    if (p)
        c->live++;
    return p;
}

static void *c_realloc(void *d, void *p, size_t n) {
    counting *c = d;
    if (c->fail_at && ++c->calls == c->fail_at)
        return NULL;
    void *q = realloc(p, n);
    if (q && !p)
        c->live++;
    return q;
}

static void c_free(void *d, void *p) {
    counting *c = d;
    if (p) {
        c->live--;
        free(p);
    }
}

static const char *DOC1 =
    "{\"version\":\"1\",\"routes\":["
    "{\"id\":\"a\",\"uri\":\"http://a:80\",\"predicates\":[\"Path=/a/{x}\","
    "\"Method=GET\"],\"filters\":[\"StripPrefix=1\"]},"
    "{\"id\":\"b\",\"uri\":\"lb://svc\",\"predicates\":[\"Host=**.b.com\"],"
    "\"metadata\":{\"k\":\"v\"}}]}";

static const char *DOC2 =
    "{\"version\":\"2\",\"routes\":["
    "{\"id\":\"a\",\"uri\":\"http://a:80\",\"predicates\":[\"Path=/a2/{x}\","
    "\"Header=X-Id,[0-9]+\"],\"filters\":[\"AddRequestHeader=X-A,{x}\"]},"
    "{\"id\":\"c\",\"uri\":\"http://c:80\",\"predicates\":[\"Path=/c/**\","
    "\"Weight=g,5\"]},"
    "{\"id\":\"d\",\"uri\":\"http://d:80\",\"predicates\":[\"Path=/c/**\","
    "\"Weight=g,5\"]}]}";

static const char *match_id(sy_router *r, sy_match_ctx *ctx, const char *path) {
    sy_request req = SY_REQUEST_INIT;
    req.method = (sy_str){"GET", 3};
    req.host = (sy_str){"x.b.com", 7};
    req.path = (sy_str){path, strlen(path)};
    sy_snapshot *s = sy_router_acquire(r);
    sy_match *m = NULL;
    int rc = sy_snapshot_match(s, ctx, &req, &m);
    const char *id = rc == 0 && m ? sy_route_id(sy_match_route(m)) : NULL;
    sy_snapshot_release(s);
    return id;
}

typedef int (*change_fn)(sy_router *r, sy_error *err);

static int change_apply(sy_router *r, sy_error *err) {
    return sy_router_apply(r, "main", DOC2, strlen(DOC2), NULL, err);
}

static int change_upsert(sy_router *r, sy_error *err) {
    const char *route = "{\"id\":\"a\",\"uri\":\"http://z:80\",\"predicates\":"
                        "[\"Path=/z/{y}\"]}";
    return sy_router_upsert_route(r, "main", route, strlen(route), err);
}

static int change_instances(sy_router *r, sy_error *err) {
    sy_kv md[] = {{"version", "1.0"}};
    sy_instance in[] = {
        {"i1", "10.0.0.1", 80, false, 1, SY_INSTANCE_UP, md, 1},
        {"i2", "10.0.0.2", 80, false, 2, SY_INSTANCE_UP, NULL, 0}};
    return sy_router_set_instances(r, "svc", in, 2, NULL, err);
}

/* Run `fn` with allocation N failing for N = 1, 2, ... until it succeeds;
 * every failure must leave the old routes serving and leak nothing. */
static void every_allocation_point(change_fn fn) {
    long points = 0;
    for (long n = 1;; n++) {
        counting c = {0, 0, 0};
        sy_allocator al = {c_malloc, c_realloc, c_free, &c};
        sy_router_options o = SY_ROUTER_OPTIONS_INIT;
        o.allocator = &al;
        sy_router *r;
        ck_assert_int_eq(sy_router_new(&o, &r, NULL), 0);
        ck_assert_int_eq(sy_router_add_source(r, "main", NULL), 0);
        ck_assert_int_eq(
            sy_router_apply(r, "main", DOC1, strlen(DOC1), NULL, NULL), 0);
        sy_match_ctx *ctx;
        ck_assert_int_eq(sy_match_ctx_new(&al, &ctx, NULL), 0);
        ck_assert_str_eq(match_id(r, ctx, "/a/1"), "a");

        c.calls = 0;
        c.fail_at = n;
        sy_error err;
        memset(&err, 0, sizeof err);
        int rc = fn(r, &err);
        bool hit = c.calls >= n;
        c.fail_at = 0;
        if (rc != 0) {
            ck_assert_msg(hit, "failed (%d: %s) without an injected failure",
                          rc, err.message);
            ck_assert_msg(err.code != 0, "allocation %ld: no error code", n);
            /* the live snapshot is the old one */
            const char *id = match_id(r, ctx, "/a/1");
            ck_assert_msg(id && strcmp(id, "a") == 0,
                          "allocation %ld: old route a lost", n);
            points++;
        }
        sy_match_ctx_free(ctx);
        sy_router_free(r);
        ck_assert_msg(c.live == 0, "allocation %ld: %ld blocks leaked", n,
                      c.live);
        if (rc == 0 && !hit)
            break; /* succeeded with no failure injected: all points seen */
        ck_assert_msg(n < 100000, "did not converge");
    }
    ck_assert_int_gt(points, 5);
}

START_TEST(apply_fails_cleanly_at_every_allocation) {
    every_allocation_point(change_apply);
}
END_TEST

START_TEST(upsert_fails_cleanly_at_every_allocation) {
    every_allocation_point(change_upsert);
}
END_TEST

START_TEST(instance_update_fails_cleanly_at_every_allocation) {
    every_allocation_point(change_instances);
}
END_TEST

int main(void) {
    Suite *s = suite_create("failalloc");
    TCase *tc = tcase_create("failalloc");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, apply_fails_cleanly_at_every_allocation);
    tcase_add_test(tc, upsert_fails_cleanly_at_every_allocation);
    tcase_add_test(tc, instance_update_fails_cleanly_at_every_allocation);
    suite_add_tcase(s, tc);
    return sy_test_run(s);
}
