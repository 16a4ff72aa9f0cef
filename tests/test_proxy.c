/*
 * test_proxy.c - what a proxy needs from the library: change
 * sets, route host data and keys, the target of a match, retries and
 * passive health, no-match reasons, re-entrancy, source status and
 * Prometheus metrics.
 */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <switchyard.h>

static sy_router *new_router(const sy_router_options *o) {
    sy_router *r;
    sy_error err;
    sy_router_options def = SY_ROUTER_OPTIONS_INIT;
    ck_assert_int_eq(sy_router_new(o ? o : &def, &r, &err), 0);
    ck_assert_int_eq(sy_router_add_source(r, "main", &err), 0);
    ck_assert_int_eq(sy_router_add_source(r, "extra", &err), 0);
    return r;
}

static int apply(sy_router *r, const char *src, const char *json) {
    sy_error err;
    int rc = sy_router_apply(r, src, json, strlen(json), NULL, &err);
    if (rc)
        fprintf(stderr, "apply: %s: %s\n", err.path, err.message);
    return rc;
}

static uint64_t generation(sy_router *r) {
    sy_metrics m;
    sy_router_metrics(r, &m);
    return m.generation;
}

/* A matching session: a snapshot held, a context, one request. */
typedef struct session {
    sy_match_ctx *ctx;
    sy_snapshot *snap;
    sy_request req;
    sy_header hdrs[4];
    sy_match *m;
} session;

static sy_match *match(session *s, sy_router *r, const char *method,
                       const char *host, const char *path) {
    if (!s->ctx)
        ck_assert_int_eq(sy_match_ctx_new(NULL, &s->ctx, NULL), 0);
    if (s->snap)
        sy_snapshot_release(s->snap);
    s->snap = sy_router_acquire(r);
    sy_request req = SY_REQUEST_INIT;
    req.method = (sy_str){method, strlen(method)};
    req.host = (sy_str){host, strlen(host)};
    req.path = (sy_str){path, strlen(path)};
    req.headers = s->hdrs;
    req.seed = 7;
    for (size_t i = 0; i < 4 && s->hdrs[i].name.ptr; i++)
        req.header_count = i + 1;
    s->req = req;
    ck_assert_int_eq(sy_snapshot_match(s->snap, s->ctx, &s->req, &s->m), 0);
    return s->m;
}

static void session_end(session *s) {
    sy_snapshot_release(s->snap);
    sy_match_ctx_free(s->ctx);
    memset(s, 0, sizeof *s);
}

static bool str_is(sy_str s, const char *want) {
    return s.len == strlen(want) && memcmp(s.ptr, want, s.len) == 0;
}

#define ROUTES_LB                                                              \
    "{\"version\":\"1\",\"routes\":["                                          \
    "{\"id\":\"orders\",\"uri\":\"lb://orders\","                              \
    "\"predicates\":[\"Path=/orders/**\"]}]}"

static const sy_instance *two_instances(void) {
    static const sy_kv md1[] = {{"version", "1.0"}, {"zone", "a"}};
    static const sy_kv md2[] = {{"version", "1.0"}, {"zone", "b"}};
    static sy_instance list[2];
    list[0] = (sy_instance){.id = "o1",
                            .host = "10.0.0.1",
                            .port = 8081,
                            .metadata = md1,
                            .metadata_count = 2};
    list[1] = (sy_instance){.id = "o2",
                            .host = "10.0.0.2",
                            .port = 8082,
                            .metadata = md2,
                            .metadata_count = 2};
    return list;
}

/* ---- change sets ---- */

START_TEST(change_set_publishes_documents_and_instances_once) {
    sy_router *r = new_router(NULL);
    sy_metrics before, after;
    sy_router_metrics(r, &before);
    sy_change_set *cs;
    sy_error err;
    ck_assert_int_eq(sy_change_set_new(r, &cs, &err), 0);
    ck_assert_int_eq(
        sy_change_set_apply(cs, "main", ROUTES_LB, strlen(ROUTES_LB), &err), 0);
    ck_assert_int_eq(
        sy_change_set_set_instances(cs, "orders", two_instances(), 2, &err), 0);
    const char *one = "{\"id\":\"x\",\"uri\":\"http://x:9000\","
                      "\"predicates\":[\"Path=/x\"]}";
    ck_assert_int_eq(
        sy_change_set_upsert_route(cs, "extra", one, strlen(one), &err), 0);
    ck_assert_uint_eq(sy_change_set_count(cs), 3);
    sy_report *rep;
    ck_assert_int_eq(sy_router_commit(r, cs, &rep, &err), 0);
    sy_report *again = NULL;
    ck_assert_int_eq(sy_router_commit(r, cs, &again, &err), SY_EINVAL);
    ck_assert_ptr_null(again);
    sy_change_set_free(cs);
    sy_router_metrics(r, &after);
    ck_assert_uint_eq(after.publishes, before.publishes + 1);
    ck_assert_uint_eq(after.generation, before.generation + 1);
    ck_assert_uint_eq(sy_report_part_count(rep), 3);
    ck_assert_str_eq(sy_report_source(sy_report_part(rep, 0)), "main");
    ck_assert_str_eq(sy_report_service(sy_report_part(rep, 1)), "orders");
    ck_assert_uint_eq(sy_report_generation(sy_report_part(rep, 2)),
                      after.generation);
    ck_assert_int_eq(sy_report_failed_change(rep), -1);
    sy_report_free(rep);
    /* the new route finds its instances in the very same snapshot */
    session s = {0};
    ck_assert_ptr_nonnull(match(&s, r, "GET", "h", "/orders/1"));
    sy_target t;
    ck_assert_int_eq(sy_match_target(s.m, NULL, 0, &t, &err), 0);
    ck_assert_str_eq(t.service, "orders");
    ck_assert_ptr_nonnull(match(&s, r, "GET", "h", "/x"));
    session_end(&s);
    sy_router_free(r);
}
END_TEST

/* A set of one change that fails says so the way any failed set does:
 * "change 0 (kind 'name'): " before the change's own message (the single
 * call's message has no prefix). */
START_TEST(a_failed_one_change_set_names_its_change) {
    sy_router *r = new_router(NULL);
    sy_change_set *cs;
    sy_error err;
    ck_assert_int_eq(sy_change_set_new(r, &cs, &err), 0);
    ck_assert_int_eq(sy_change_set_remove_route(cs, "nope", &err), 0);
    sy_report *rep = NULL;
    ck_assert_int_eq(sy_router_commit(r, cs, &rep, &err), SY_ENOTFOUND);
    ck_assert_str_eq(err.message, "change 0 (remove 'nope'): no route 'nope'");
    ck_assert_int_eq(sy_report_failed_change(rep), 0);
    sy_report_free(rep);
    ck_assert_int_eq(sy_router_check(r, cs, NULL, &err), SY_ENOTFOUND);
    ck_assert_str_eq(err.message, "change 0 (remove 'nope'): no route 'nope'");
    ck_assert_int_eq(sy_router_remove_route(r, "nope", &err), SY_ENOTFOUND);
    ck_assert_str_eq(err.message, "no route 'nope'");
    sy_change_set_free(cs);
    sy_router_free(r);
}
END_TEST

START_TEST(change_set_failing_at_its_last_change_publishes_nothing) {
    sy_router *r = new_router(NULL);
    ck_assert_int_eq(apply(r, "main", ROUTES_LB), 0);
    uint64_t gen = generation(r);
    sy_change_set *cs;
    sy_error err;
    ck_assert_int_eq(sy_change_set_new(r, &cs, &err), 0);
    const char *doc2 = "[{\"id\":\"new\",\"uri\":\"http://n:1\","
                       "\"predicates\":[\"Path=/new\"]}]";
    ck_assert_int_eq(sy_change_set_apply(cs, "extra", doc2, strlen(doc2), &err),
                     0);
    ck_assert_int_eq(
        sy_change_set_set_instances(cs, "orders", two_instances(), 2, &err), 0);
    ck_assert_int_eq(sy_change_set_remove_route(cs, "orders", &err), 0);
    const char *bad = "{\"id\":\"b\",\"uri\":\"nowhere\"}";
    ck_assert_int_eq(
        sy_change_set_upsert_route(cs, "main", bad, strlen(bad), &err), 0);
    sy_report *rep = NULL;
    ck_assert_int_eq(sy_router_commit(r, cs, &rep, &err), SY_EURI);
    sy_change_set_free(cs);
    ck_assert_str_eq(err.path, "route.uri");
    ck_assert_ptr_nonnull(strstr(err.message, "change 3"));
    ck_assert_ptr_nonnull(rep);
    ck_assert_int_eq(sy_report_failed_change(rep), 3);
    sy_report_free(rep);
    /* nothing of the first three changes is visible */
    ck_assert_uint_eq(generation(r), gen);
    session s = {0};
    ck_assert_ptr_null(match(&s, r, "GET", "h", "/new"));
    ck_assert_ptr_nonnull(match(&s, r, "GET", "h", "/orders/1"));
    sy_target t;
    ck_assert_int_eq(sy_match_target(s.m, NULL, 0, &t, &err), SY_ENOINSTANCE);
    session_end(&s);
    /* and the source's status names the error */
    sy_source_status st;
    ck_assert_int_eq(sy_router_source_status(r, 0, &st, &err), 0);
    ck_assert_str_eq(st.name, "main");
    ck_assert_int_eq(st.last_result, SY_EURI);
    ck_assert_str_eq(st.last_error.path, "route.uri");
    ck_assert_uint_eq(st.failed_count, 1);
    ck_assert_uint_eq(st.applied_count, 1);
    sy_metrics m;
    sy_router_metrics(r, &m);
    ck_assert_uint_eq(m.failed_commits, 1);
    sy_router_free(r);
}
END_TEST

START_TEST(change_set_steps_see_the_steps_before_them) {
    sy_router *r = new_router(NULL);
    sy_change_set *cs;
    sy_error err;
    ck_assert_int_eq(sy_change_set_new(r, &cs, &err), 0);
    const char *doc = "[{\"id\":\"a\",\"uri\":\"http://a:1\","
                      "\"predicates\":[\"Path=/a\"]},"
                      "{\"id\":\"b\",\"uri\":\"http://b:1\","
                      "\"predicates\":[\"Path=/b\"]}]";
    ck_assert_int_eq(sy_change_set_apply(cs, "main", doc, strlen(doc), &err),
                     0);
    ck_assert_int_eq(sy_change_set_remove_route(cs, "a", &err), 0);
    ck_assert_int_eq(sy_change_set_set_route_enabled(cs, "b", false, &err), 0);
    ck_assert_int_eq(sy_router_commit(r, cs, NULL, &err), 0);
    sy_change_set_free(cs);
    session s = {0};
    ck_assert_ptr_null(match(&s, r, "GET", "h", "/a"));
    ck_assert_ptr_null(match(&s, r, "GET", "h", "/b"));
    sy_snapshot *snap = sy_router_acquire(r);
    ck_assert_uint_eq(sy_snapshot_route_count(snap), 1);
    ck_assert(sy_route_disabled(sy_snapshot_find_route(snap, "b", NULL)));
    sy_snapshot_release(snap);
    session_end(&s);
    sy_router_free(r);
}
END_TEST

START_TEST(change_set_of_another_router_is_refused) {
    sy_router *r1 = new_router(NULL), *r2 = new_router(NULL);
    sy_change_set *cs;
    sy_error err;
    ck_assert_int_eq(sy_change_set_new(r1, &cs, &err), 0);
    ck_assert_int_eq(sy_router_commit(r2, cs, NULL, &err), SY_EINVAL);
    ck_assert_int_eq(sy_change_set_apply(cs, NULL, "[]", 2, &err), SY_EINVAL);
    ck_assert_int_eq(sy_router_commit(r1, cs, NULL, &err), 0); /* empty */
    sy_change_set_free(cs);
    sy_router_free(r1);
    sy_router_free(r2);
}
END_TEST

/* A change set is published at most once: a failed commit may be retried,
 * a check does not count, and after a successful commit both a second
 * commit and a check are SY_EINVAL and publish nothing. */
START_TEST(change_set_is_committed_once_and_a_failed_commit_may_be_retried) {
    sy_router *r = new_router(NULL);
    sy_change_set *cs;
    sy_error err;
    ck_assert_int_eq(sy_change_set_new(r, &cs, &err), 0);
    ck_assert_int_eq(sy_change_set_set_route_enabled(cs, "w", false, &err), 0);
    uint64_t gen = generation(r);
    ck_assert_int_eq(sy_router_commit(r, cs, NULL, &err), SY_ENOTFOUND);
    ck_assert_int_eq(apply(r, "main",
                           "[{\"id\":\"w\",\"uri\":\"http://a\","
                           "\"predicates\":[\"Path=/w\"]}]"),
                     0);
    ck_assert_uint_eq(generation(r), gen + 1);
    ck_assert_int_eq(sy_router_check(r, cs, NULL, &err), 0);
    ck_assert_int_eq(sy_router_check(r, cs, NULL, &err), 0);
    ck_assert_uint_eq(generation(r), gen + 1);
    ck_assert_int_eq(sy_router_commit(r, cs, NULL, &err), 0); /* retried */
    ck_assert_uint_eq(generation(r), gen + 2);
    /* re-enable it elsewhere: a second commit must not disable it again */
    ck_assert_int_eq(sy_router_set_route_enabled(r, "w", true, &err), 0);
    ck_assert_uint_eq(generation(r), gen + 3);
    sy_report *rep = NULL;
    ck_assert_int_eq(sy_router_commit(r, cs, &rep, &err), SY_EINVAL);
    ck_assert_ptr_null(rep);
    ck_assert_str_eq(err.message, "the change set was committed already");
    ck_assert_int_eq(sy_router_check(r, cs, NULL, &err), SY_EINVAL);
    ck_assert_str_eq(err.message, "the change set was committed already");
    ck_assert_uint_eq(generation(r), gen + 3);
    session s = {0};
    ck_assert_ptr_nonnull(match(&s, r, "GET", "h", "/w"));
    session_end(&s);
    sy_change_set_free(cs);
    sy_router_free(r);
}
END_TEST

/* An allocator that fails allocation number `fail_at` (1-based) once
 * armed. */
typedef struct failing {
    long calls, fail_at;
} failing;

static void *f_malloc(void *d, size_t n) {
    failing *f = d;
    return f->fail_at && ++f->calls == f->fail_at ? NULL : malloc(n);
}

static void *f_realloc(void *d, void *p, size_t n) {
    failing *f = d;
    return f->fail_at && ++f->calls == f->fail_at ? NULL : realloc(p, n);
}

static void f_free(void *d, void *p) {
    (void)d;
    free(p);
}

/* Stage one change of kind k (0..6) with no sy_error. */
static int stage_kind(sy_change_set *cs, int k) {
    static const sy_kv md[1] = {{"zone", "a"}};
    static const sy_instance inst = {.id = "i1",
                                     .host = "10.0.0.1",
                                     .port = 80,
                                     .metadata = md,
                                     .metadata_count = 1};
    const sy_instance_delta delta = {SY_INSTANCE_ADD, inst};
    switch (k) {
    case 0: return sy_change_set_apply(cs, "main", "[]", 2, NULL);
    case 1: return sy_change_set_upsert_route(cs, "main", "{}", 2, NULL);
    case 2: return sy_change_set_remove_route(cs, "r1", NULL);
    case 3: return sy_change_set_set_route_enabled(cs, "r1", false, NULL);
    case 4: return sy_change_set_rollback(cs, "main", "1", NULL);
    case 5: return sy_change_set_set_instances(cs, "svc", &inst, 1, NULL);
    default: return sy_change_set_update_instances(cs, "svc", &delta, 1, NULL);
    }
}

/* Out of memory is SY_ENOMEM, never an input error, also for a
 * caller that passes no sy_error; a failed staging stages nothing. */
START_TEST(staging_out_of_memory_is_enomem_without_an_error_too) {
    failing f = {0, 0};
    sy_allocator a = {f_malloc, f_realloc, f_free, &f};
    sy_router_options o = SY_ROUTER_OPTIONS_INIT;
    o.allocator = &a;
    sy_router *r = new_router(&o);
    for (int k = 0; k < 7; k++) {
        long failures = 0;
        for (long at = 1; at <= 12; at++) {
            sy_change_set *cs;
            f.fail_at = 0;
            ck_assert_int_eq(sy_change_set_new(r, &cs, NULL), 0);
            f.calls = 0;
            f.fail_at = at;
            int rc = stage_kind(cs, k);
            f.fail_at = 0;
            ck_assert_msg(rc == 0 || rc == SY_ENOMEM,
                          "change kind %d, allocation %ld failed: %d", k, at,
                          rc);
            ck_assert_uint_eq(sy_change_set_count(cs), rc ? 0 : 1);
            failures += rc != 0;
            sy_change_set_free(cs);
        }
        ck_assert_int_gt(failures, 0); /* the failures reached the call */
    }
    sy_router_free(r);
}
END_TEST

/* ---- host data and keys ---- */

typedef struct host_log {
    int attached, detached;
    uint32_t keys_seen[64];
} host_log;

static void *on_attach(void *data, const sy_route *route) {
    host_log *h = data;
    h->attached++;
    char *tag = malloc(64);
    snprintf(tag, 64, "%s#%d", sy_route_id(route), h->attached);
    return tag;
}

static void on_detach(void *data, const sy_route *route, void *host_data) {
    host_log *h = data;
    ck_assert_ptr_nonnull(host_data);
    ck_assert_int_eq(
        strncmp(host_data, sy_route_id(route), strlen(sy_route_id(route))), 0);
    h->detached++;
    free(host_data);
}

static const char *tag_of(sy_router *r, const char *id) {
    static char buf[64];
    sy_snapshot *s = sy_router_acquire(r);
    const sy_route *rt = sy_snapshot_find_route(s, id, NULL);
    snprintf(buf, sizeof buf, "%s",
             rt ? (const char *)sy_route_host_data(rt) : "-");
    sy_snapshot_release(s);
    return buf;
}

START_TEST(host_data_survives_unchanged_routes_and_is_freed_once) {
    host_log h = {0};
    sy_router_options o = SY_ROUTER_OPTIONS_INIT;
    o.route_attach = on_attach;
    o.route_detach = on_detach;
    o.callback_data = &h;
    sy_router *r = new_router(&o);
    const char *v1 = "{\"version\":\"1\",\"routes\":["
                     "{\"id\":\"a\",\"uri\":\"http://a:1\",\"predicates\":"
                     "[\"Path=/a\"]},"
                     "{\"id\":\"b\",\"uri\":\"http://b:1\",\"predicates\":"
                     "[\"Path=/b\"]}]}";
    const char *v2 = "{\"version\":\"2\",\"routes\":["
                     "{\"id\":\"a\",\"uri\":\"http://a:1\",\"predicates\":"
                     "[\"Path=/a\"]},"
                     "{\"id\":\"b\",\"uri\":\"http://b:2\",\"predicates\":"
                     "[\"Path=/b\"]}]}";
    ck_assert_int_eq(apply(r, "main", v1), 0);
    ck_assert_int_eq(h.attached, 2);
    ck_assert_str_eq(tag_of(r, "a"), "a#1");
    ck_assert_str_eq(tag_of(r, "b"), "b#2");
    /* keys: distinct, below the limit */
    sy_snapshot *s = sy_router_acquire(r);
    uint32_t ka = sy_route_key(sy_snapshot_find_route(s, "a", NULL));
    uint32_t kb = sy_route_key(sy_snapshot_find_route(s, "b", NULL));
    ck_assert_uint_ne(ka, kb);
    ck_assert_uint_lt(ka, sy_snapshot_route_key_limit(s));
    ck_assert_uint_lt(kb, sy_snapshot_route_key_limit(s));
    sy_snapshot_release(s);

    ck_assert_int_eq(apply(r, "main", v2), 0);
    ck_assert_str_eq(tag_of(r, "a"), "a#1"); /* unchanged: same data */
    ck_assert_str_eq(tag_of(r, "b"), "b#3"); /* updated: new data */
    s = sy_router_acquire(r);
    ck_assert_uint_eq(sy_route_key(sy_snapshot_find_route(s, "a", NULL)), ka);
    sy_snapshot_release(s);
    sy_router_reclaim(r);
    ck_assert_int_eq(h.detached, 1); /* the old b, once nobody can see it */

    /* a held snapshot keeps the old data alive */
    sy_snapshot *held = sy_router_acquire(r);
    ck_assert_int_eq(sy_router_remove_route(r, "a", NULL), 0);
    sy_router_reclaim(r);
    ck_assert_int_eq(h.detached, 1);
    ck_assert_str_eq((const char *)sy_route_host_data(
                         sy_snapshot_find_route(held, "a", NULL)),
                     "a#1");
    sy_snapshot_release(held);
    sy_router_reclaim(r);
    ck_assert_int_eq(h.detached, 2);
    /* a document no one publishes attaches nothing */
    ck_assert_int_ne(apply(r, "main", "[{\"id\":\"z\"}]"), 0);
    ck_assert_int_eq(h.attached, 3);
    sy_router_free(r);
    ck_assert_int_eq(h.detached, h.attached);
}
END_TEST

START_TEST(route_keys_are_reused_after_the_route_is_freed) {
    sy_router *r = new_router(NULL);
    ck_assert_int_eq(apply(r, "main",
                           "[{\"id\":\"a\",\"uri\":\"http://a:1\"},"
                           "{\"id\":\"b\",\"uri\":\"http://b:1\"}]"),
                     0);
    sy_snapshot *s = sy_router_acquire(r);
    uint32_t limit = sy_snapshot_route_key_limit(s);
    sy_snapshot_release(s);
    ck_assert_uint_eq(limit, 2);
    for (int i = 0; i < 20; i++) {
        char doc[128];
        snprintf(doc, sizeof doc,
                 "[{\"id\":\"a\",\"uri\":\"http://a:1\"},"
                 "{\"id\":\"b\",\"uri\":\"http://b:%d\"}]",
                 i + 2);
        ck_assert_int_eq(apply(r, "main", doc), 0);
    }
    s = sy_router_acquire(r);
    /* never more keys than routes alive at once (2 live + 1 retiring) */
    ck_assert_uint_le(sy_snapshot_route_key_limit(s), 3);
    sy_snapshot_release(s);
    sy_document *doc;
    const char *one = "[{\"id\":\"q\",\"uri\":\"http://q\"}]";
    ck_assert_int_eq(sy_document_parse(one, strlen(one), NULL, &doc, NULL), 0);
    ck_assert_uint_eq(sy_route_key(sy_document_route(doc, 0)), UINT32_MAX);
    sy_document_free(doc);
    sy_router_free(r);
}
END_TEST

/* ---- targets ---- */

START_TEST(target_of_url_routes_sets_host_header_from_the_upstream) {
    sy_router *r = new_router(NULL);
    ck_assert_int_eq(
        apply(r, "main",
              "[{\"id\":\"plain\",\"uri\":\"http://api.internal\","
              "\"predicates\":[\"Path=/plain/**\"]},"
              "{\"id\":\"port\",\"uri\":\"https://api.internal:8443\","
              "\"predicates\":[\"Path=/port/{x}\"],"
              "\"filters\":[\"SetPath=/v2/{x}\",\"AddRequestHeader=X-A,1\"]},"
              "{\"id\":\"keep\",\"uri\":\"http://api.internal:81\","
              "\"predicates\":[\"Path=/keep\"],"
              "\"filters\":[\"PreserveHostHeader\"]},"
              "{\"id\":\"v6\",\"uri\":\"http://[::1]:8080\","
              "\"predicates\":[\"Path=/v6\"]}]"),
        0);
    session s = {0};
    s.hdrs[0] = (sy_header){{"Host", 4}, {"gw.example.com", 14}};
    s.hdrs[1] = (sy_header){{"Accept", 6}, {"*/*", 3}};
    sy_target t;
    sy_error err;
    ck_assert_ptr_nonnull(match(&s, r, "GET", "gw.example.com", "/plain/a"));
    ck_assert_int_eq(sy_match_target(s.m, NULL, 0, &t, &err), 0);
    ck_assert_int_eq(t.kind, SY_UPSTREAM_URL);
    ck_assert_str_eq(t.scheme, "http");
    ck_assert_str_eq(t.host, "api.internal");
    ck_assert_uint_eq(t.port, 80);
    ck_assert(str_is(t.host_header, "api.internal"));
    ck_assert(str_is(t.path, "/plain/a"));
    ck_assert_ptr_null(t.instance_id);
    /* Host is not among the headers: host_header replaces it */
    ck_assert_uint_eq(t.header_count, 1);
    ck_assert(str_is(t.headers[0].name, "Accept"));

    ck_assert_ptr_nonnull(match(&s, r, "GET", "gw.example.com", "/port/7"));
    ck_assert_int_eq(sy_match_target(s.m, NULL, 0, &t, &err), 0);
    ck_assert_str_eq(t.scheme, "https");
    ck_assert_uint_eq(t.port, 8443);
    ck_assert(str_is(t.host_header, "api.internal:8443"));
    ck_assert(str_is(t.path, "/v2/7"));
    ck_assert_uint_eq(t.header_count, 2);

    ck_assert_ptr_nonnull(match(&s, r, "GET", "gw.example.com", "/keep"));
    ck_assert_int_eq(sy_match_target(s.m, NULL, 0, &t, &err), 0);
    ck_assert(str_is(t.host_header, "gw.example.com"));
    ck_assert_uint_eq(t.port, 81);

    ck_assert_ptr_nonnull(match(&s, r, "GET", "gw.example.com", "/v6"));
    ck_assert_int_eq(sy_match_target(s.m, NULL, 0, &t, &err), 0);
    ck_assert(str_is(t.host_header, "[::1]:8080"));
    session_end(&s);
    sy_router_free(r);
}
END_TEST

START_TEST(target_of_lb_routes_names_the_chosen_instance) {
    sy_router *r = new_router(NULL);
    ck_assert_int_eq(apply(r, "main", ROUTES_LB), 0);
    ck_assert_int_eq(
        sy_router_set_instances(r, "orders", two_instances(), 2, NULL, NULL),
        0);
    session s = {0};
    sy_target t;
    sy_error err;
    ck_assert_ptr_nonnull(match(&s, r, "GET", "h", "/orders/9"));
    ck_assert_int_eq(sy_match_target(s.m, NULL, 0, &t, &err), 0);
    ck_assert_int_eq(t.kind, SY_UPSTREAM_SERVICE);
    ck_assert_str_eq(t.service, "orders");
    ck_assert_str_eq(t.scheme, "http");
    bool one = strcmp(t.instance_id, "o1") == 0;
    ck_assert_str_eq(t.host, one ? "10.0.0.1" : "10.0.0.2");
    ck_assert_uint_eq(t.port, one ? 8081 : 8082);
    ck_assert_str_eq(t.version, "1.0");
    ck_assert_str_eq(t.zone, one ? "a" : "b");
    ck_assert_uint_eq(t.metadata_count, 2);
    ck_assert(str_is(t.host_header, one ? "10.0.0.1:8081" : "10.0.0.2:8082"));
    session_end(&s);
    sy_router_free(r);
}
END_TEST

START_TEST(target_refuses_answers_the_gateway_gives_itself) {
    sy_router *r = new_router(NULL);
    ck_assert_int_eq(apply(r, "main",
                           "[{\"id\":\"st\",\"uri\":\"http://a\","
                           "\"filters\":[\"SetStatus=418\","
                           "\"RedirectTo=302,http://else\"]}]"),
                     0);
    session s = {0};
    sy_target t;
    sy_error err;
    ck_assert_ptr_nonnull(match(&s, r, "GET", "h", "/"));
    ck_assert_int_eq(sy_match_action(s.m), SY_ACTION_REDIRECT);
    ck_assert_int_eq(sy_match_target(s.m, NULL, 0, &t, &err), SY_EINVAL);
    session_end(&s);
    sy_router_free(r);
}
END_TEST

/* ---- retries and passive health ---- */

START_TEST(retries_never_return_an_excluded_instance) {
    sy_router *r = new_router(NULL);
    ck_assert_int_eq(apply(r, "main", ROUTES_LB), 0);
    ck_assert_int_eq(
        sy_router_set_instances(r, "orders", two_instances(), 2, NULL, NULL),
        0);
    session s = {0};
    sy_target t;
    sy_error err;
    const char *tried[] = {"o1"};
    for (int i = 0; i < 50; i++) {
        ck_assert_ptr_nonnull(match(&s, r, "GET", "h", "/orders/1"));
        ck_assert_int_eq(sy_match_target(s.m, tried, 1, &t, &err), 0);
        ck_assert_str_eq(t.instance_id, "o2");
    }
    const char *both[] = {"o2", "o1"};
    ck_assert_int_eq(sy_match_target(s.m, both, 2, &t, &err), SY_ENOINSTANCE);
    ck_assert_ptr_nonnull(strstr(err.message, "tried"));
    session_end(&s);
    sy_router_free(r);
}
END_TEST

static int64_t fake_now = 1000000;
static int64_t fake_clock(void *data) {
    (void)data;
    return fake_now;
}

static int picks_of(sy_router *r, const char *id, int n) {
    session s = {0};
    int hits = 0;
    for (int i = 0; i < n; i++) {
        sy_target t;
        ck_assert_ptr_nonnull(match(&s, r, "GET", "h", "/orders/1"));
        ck_assert_int_eq(sy_match_target(s.m, NULL, 0, &t, NULL), 0);
        hits += strcmp(t.instance_id, id) == 0;
    }
    session_end(&s);
    return hits;
}

/* Report `n` outcomes for instance `id` through a target that chose it. */
static void report(sy_router *r, const char *id, sy_outcome o, int n) {
    session s = {0};
    for (int done = 0; done < n;) {
        sy_target t;
        ck_assert_ptr_nonnull(match(&s, r, "GET", "h", "/orders/1"));
        const char *other[] = {strcmp(id, "o1") == 0 ? "o2" : "o1"};
        ck_assert_int_eq(sy_match_target(s.m, other, 1, &t, NULL), 0);
        ck_assert_str_eq(t.instance_id, id);
        sy_router_report_outcome(r, &t, o);
        done++;
    }
    session_end(&s);
}

START_TEST(failing_instance_is_ejected_and_returns_after_its_time) {
    sy_router_options o = SY_ROUTER_OPTIONS_INIT;
    o.clock_ms = fake_clock;
    o.outlier.consecutive_failures = 3;
    o.outlier.base_ejection_ms = 10000;
    o.outlier.max_ejection_ms = 15000;
    sy_router *r = new_router(&o);
    ck_assert_int_eq(apply(r, "main", ROUTES_LB), 0);
    ck_assert_int_eq(
        sy_router_set_instances(r, "orders", two_instances(), 2, NULL, NULL),
        0);
    report(r, "o1", SY_OUTCOME_CONNECT_FAILURE, 2);
    report(r, "o1", SY_OUTCOME_SUCCESS, 1); /* breaks the streak */
    report(r, "o1", SY_OUTCOME_5XX, 2);
    ck_assert_int_gt(picks_of(r, "o1", 20), 0);
    report(r, "o1", SY_OUTCOME_5XX, 1); /* third in a row */
    sy_metrics m;
    sy_router_metrics(r, &m);
    ck_assert_uint_eq(m.ejections, 1);
    ck_assert_int_eq(picks_of(r, "o1", 20), 0);
    /* carried across a publish of the same instances */
    ck_assert_int_eq(
        sy_router_set_instances(r, "orders", two_instances(), 2, NULL, NULL),
        0);
    ck_assert_int_eq(picks_of(r, "o1", 20), 0);
    fake_now += 9999;
    ck_assert_int_eq(picks_of(r, "o1", 20), 0);
    fake_now += 1;
    ck_assert_int_gt(picks_of(r, "o1", 20), 0); /* back by itself */
    /* a second ejection lasts longer: 2 x 10 s, capped at 15 s */
    report(r, "o1", SY_OUTCOME_TIMEOUT, 3);
    fake_now += 14999;
    ck_assert_int_eq(picks_of(r, "o1", 20), 0);
    fake_now += 1;
    ck_assert_int_gt(picks_of(r, "o1", 20), 0);
    sy_router_free(r);
}
END_TEST

START_TEST(ejections_are_capped_by_the_share_of_the_service) {
    sy_router_options o = SY_ROUTER_OPTIONS_INIT;
    o.clock_ms = fake_clock;
    o.outlier.consecutive_failures = 1;
    o.outlier.max_ejected_percent = 50;
    sy_router *r = new_router(&o);
    ck_assert_int_eq(apply(r, "main", ROUTES_LB), 0);
    ck_assert_int_eq(
        sy_router_set_instances(r, "orders", two_instances(), 2, NULL, NULL),
        0);
    report(r, "o1", SY_OUTCOME_CONNECT_FAILURE, 1);
    ck_assert_int_eq(picks_of(r, "o1", 10), 0);
    report(r, "o2", SY_OUTCOME_CONNECT_FAILURE, 3); /* over the cap */
    sy_metrics m;
    sy_router_metrics(r, &m);
    ck_assert_uint_eq(m.ejections, 1);
    ck_assert_uint_eq(m.outcomes, 4);
    ck_assert_int_eq(picks_of(r, "o2", 10), 10);
    sy_router_free(r);
}
END_TEST

/* ---- no-match reasons ---- */

START_TEST(method_mismatch_is_told_from_no_route) {
    sy_router *r = new_router(NULL);
    ck_assert_int_eq(
        apply(r, "main",
              "[{\"id\":\"w\",\"uri\":\"http://a\",\"predicates\":"
              "[\"Path=/items/**\",\"Method=POST,PUT\"]},"
              "{\"id\":\"d\",\"uri\":\"http://a\",\"predicates\":"
              "[\"Method=DELETE\",\"Path=/items/{id}\"]},"
              "{\"id\":\"h\",\"uri\":\"http://a\",\"predicates\":"
              "[\"Path=/other\",\"Method=GET\",\"Header=X-Need,yes\"]}]"),
        0);
    session s = {0};
    sy_str allow;
    ck_assert_ptr_null(match(&s, r, "GET", "h", "/items/3"));
    ck_assert_int_eq(sy_match_ctx_nomatch(s.ctx, &allow), SY_NOMATCH_METHOD);
    ck_assert(str_is(allow, "POST, PUT, DELETE"));
    ck_assert_ptr_null(match(&s, r, "GET", "h", "/nothing"));
    ck_assert_int_eq(sy_match_ctx_nomatch(s.ctx, &allow), SY_NOMATCH_NO_ROUTE);
    ck_assert_ptr_null(allow.ptr);
    /* the method fails, but so does another predicate: 404 */
    ck_assert_ptr_null(match(&s, r, "POST", "h", "/other"));
    ck_assert_int_eq(sy_match_ctx_nomatch(s.ctx, NULL), SY_NOMATCH_NO_ROUTE);
    ck_assert_ptr_nonnull(match(&s, r, "PUT", "h", "/items/3"));
    ck_assert_int_eq(sy_match_ctx_nomatch(s.ctx, NULL), SY_NOMATCH_NONE);
    session_end(&s);
    sy_router_free(r);
}
END_TEST

/* ---- re-entrancy ---- */

typedef struct reentry {
    sy_router *r;
    int apply_rc, commit_rc, metrics_routes, calls;
} reentry;

static void reenter(void *data, const sy_report *rep) {
    (void)rep;
    reentry *e = data;
    e->calls++;
    e->apply_rc = sy_router_apply(e->r, "main", "[]", 2, NULL, NULL);
    sy_change_set *cs;
    ck_assert_int_eq(sy_change_set_new(e->r, &cs, NULL), 0);
    e->commit_rc = sy_router_commit(e->r, cs, NULL, NULL);
    sy_change_set_free(cs);
    sy_metrics m;
    sy_router_metrics(e->r, &m); /* reading is fine */
    e->metrics_routes = (int)m.routes;
}

START_TEST(writer_calls_from_a_callback_fail_at_once) {
    reentry e = {0};
    sy_router_options o = SY_ROUTER_OPTIONS_INIT;
    o.on_event = reenter;
    o.callback_data = &e;
    sy_router *r = new_router(&o);
    e.r = r;
    ck_assert_int_eq(apply(r, "main", ROUTES_LB), 0);
    ck_assert_int_eq(e.calls, 1);
    ck_assert_int_eq(e.apply_rc, SY_EREENTRANT);
    ck_assert_int_eq(e.commit_rc, SY_EREENTRANT);
    ck_assert_int_eq(e.metrics_routes, 1);
    ck_assert_str_ne(sy_strerror(SY_EREENTRANT), sy_strerror(-999));
    ck_assert_str_ne(sy_strerror(SY_ETOOSMALL), sy_strerror(-999));
    ck_assert_int_eq(apply(r, "main", "[]"), 0); /* and later it works */
    sy_router_free(r);
}
END_TEST

/* ---- status and metrics ---- */

/* The value of the exposition line starting with `series `, or -1. */
static long long series(const char *text, const char *name) {
    size_t n = strlen(name);
    for (const char *p = text; p && *p;
         p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
        if (strncmp(p, name, n) == 0 && p[n] == ' ')
            return atoll(p + n + 1);
    }
    return -1;
}

START_TEST(metrics_text_parses_back) {
    sy_router *r = new_router(NULL);
    ck_assert_int_eq(apply(r, "main", ROUTES_LB), 0);
    ck_assert_int_eq(apply(r, "main", ROUTES_LB), 0); /* skipped */
    ck_assert_int_ne(apply(r, "extra", "[{]"), 0);
    ck_assert_int_eq(
        sy_router_set_instances(r, "orders", two_instances(), 2, NULL, NULL),
        0);
    size_t need = 0;
    sy_error err;
    char tiny[16];
    ck_assert_int_eq(sy_router_metrics_text(r, tiny, sizeof tiny, &need, &err),
                     SY_ETOOSMALL);
    ck_assert_uint_gt(need, sizeof tiny);
    char *buf = malloc(need);
    size_t len = 0;
    ck_assert_int_eq(sy_router_metrics_text(r, buf, need, &len, &err), 0);
    ck_assert_uint_eq(len, need - 1);
    ck_assert_uint_eq(strlen(buf), len);
    ck_assert_int_eq(series(buf, "switchyard_generation"), 2);
    ck_assert_int_eq(series(buf, "switchyard_routes"), 1);
    ck_assert_int_eq(series(buf, "switchyard_instances"), 2);
    ck_assert_int_eq(series(buf, "switchyard_commits_total"), 3);
    ck_assert_int_eq(series(buf, "switchyard_commits_failed_total"), 1);
    ck_assert_int_eq(series(buf, "switchyard_applies_skipped_total"), 1);
    ck_assert_int_eq(
        series(buf, "switchyard_source_applied_total{source=\"main\"}"), 1);
    ck_assert_int_eq(
        series(buf, "switchyard_source_failed_total{source=\"extra\"}"), 1);
    ck_assert_int_eq(
        series(buf, "switchyard_source_last_error_code{source=\"extra\"}"),
        -SY_ESYNTAX);
    /* every non-comment line is "name[{labels}] value" */
    for (char *line = strtok(buf, "\n"); line; line = strtok(NULL, "\n")) {
        if (line[0] == '#') {
            ck_assert(strncmp(line, "# HELP switchyard_", 18) == 0 ||
                      strncmp(line, "# TYPE switchyard_", 18) == 0);
            continue;
        }
        ck_assert_int_eq(strncmp(line, "switchyard_", 11), 0);
        char *sp = strrchr(line, ' ');
        ck_assert_ptr_nonnull(sp);
        char *end;
        strtod(sp + 1, &end);
        ck_assert_int_eq(*end, '\0');
    }
    free(buf);
    sy_source_status st;
    ck_assert_int_eq(sy_router_source_status(r, 0, &st, &err), 0);
    ck_assert_str_eq(st.version, "1");
    ck_assert_uint_eq(st.routes, 1);
    ck_assert_uint_eq(st.skipped_count, 1);
    ck_assert_uint_ne(st.fingerprint, 0);
    ck_assert_int_eq(sy_router_source_status(r, 2, &st, &err), SY_ENOTFOUND);
    ck_assert_uint_eq(sy_router_source_count(r), 2);
    sy_router_free(r);
}
END_TEST

START_TEST(delta_for_an_unknown_service_says_the_service_is_unknown) {
    sy_router *r = new_router(NULL);
    sy_instance_delta d = {SY_INSTANCE_STATE, {.id = "x"}};
    sy_error err;
    ck_assert_int_eq(sy_router_update_instances(r, "ghost", &d, 1, NULL, &err),
                     SY_ENOTFOUND);
    ck_assert_str_eq(err.path, "deltas[0].instance.id");
    ck_assert_ptr_nonnull(strstr(err.message, "service 'ghost' is unknown"));
    sy_instance dup[2] = {{.id = "a", .host = "h", .port = 1},
                          {.id = "a", .host = "h", .port = 2}};
    ck_assert_int_eq(sy_router_set_instances(r, "svc", dup, 2, NULL, &err),
                     SY_EDUPLICATE);
    ck_assert_ptr_nonnull(strstr(err.message, "instance id"));
    ck_assert_ptr_null(strstr(err.message, "route"));
    sy_router_free(r);
}
END_TEST

START_TEST(router_path_options_reach_matching) {
    sy_router_options o = SY_ROUTER_OPTIONS_INIT;
    o.escaped_slashes = SY_SLASHES_REJECT;
    o.merge_slashes = true;
    sy_router *r = new_router(&o);
    ck_assert_int_eq(apply(r, "main",
                           "[{\"id\":\"a\",\"uri\":\"http://a\","
                           "\"predicates\":[\"Path=/a/**\"]}]"),
                     0);
    session s = {0};
    ck_assert_ptr_null(match(&s, r, "GET", "h", "/a/x%2Fy"));
    ck_assert_int_eq(sy_match_ctx_nomatch(s.ctx, NULL), SY_NOMATCH_BAD_PATH);
    ck_assert_ptr_null(match(&s, r, "GET", "h", "/a/../../etc"));
    ck_assert_int_eq(sy_match_ctx_nomatch(s.ctx, NULL), SY_NOMATCH_BAD_PATH);
    ck_assert_ptr_nonnull(match(&s, r, "GET", "h", "//a//b/./c"));
    sy_target t;
    ck_assert_int_eq(sy_match_target(s.m, NULL, 0, &t, NULL), 0);
    ck_assert(str_is(t.path, "/a/b/c"));
    session_end(&s);
    sy_router_free(r);
}
END_TEST

START_TEST(check_runs_a_change_set_without_publishing_it) {
    sy_router *r = new_router(NULL);
    ck_assert_int_eq(apply(r, "main", ROUTES_LB), 0);
    uint64_t gen = generation(r);
    sy_change_set *cs;
    sy_error err;
    ck_assert_int_eq(sy_change_set_new(r, &cs, &err), 0);
    const char *dup = "[{\"id\":\"orders\",\"uri\":\"http://x\"}]";
    ck_assert_int_eq(sy_change_set_apply(cs, "extra", dup, strlen(dup), &err),
                     0);
    ck_assert_int_eq(sy_router_check(r, cs, NULL, &err), SY_EDUPLICATE);
    ck_assert_str_eq(err.path, "[0].id");
    sy_change_set_free(cs);
    ck_assert_int_eq(sy_change_set_new(r, &cs, &err), 0);
    const char *ok = "[{\"id\":\"other\",\"uri\":\"http://x\"}]";
    ck_assert_int_eq(sy_change_set_apply(cs, "extra", ok, strlen(ok), &err), 0);
    sy_report *rep;
    ck_assert_int_eq(sy_router_check(r, cs, &rep, &err), 0);
    ck_assert_uint_eq(sy_report_part_count(rep), 1);
    ck_assert_uint_eq(
        sy_diff_added_count(sy_report_diff(sy_report_part(rep, 0))), 1);
    sy_report_free(rep);
    ck_assert_uint_eq(generation(r), gen);
    sy_source_status st;
    ck_assert_int_eq(sy_router_source_status(r, 1, &st, &err), 0);
    ck_assert(!st.applied);
    ck_assert_uint_eq(st.failed_count, 0);
    ck_assert_int_eq(sy_router_commit(r, cs, NULL, &err), 0); /* still valid */
    ck_assert_uint_eq(generation(r), gen + 1);
    sy_change_set_free(cs);
    sy_router_free(r);
}
END_TEST

/* Re-applying a source's document restores its routes over
 * the one-route changes made since, instead of being skipped as "same". */
START_TEST(reapplying_a_document_undoes_one_route_changes) {
    sy_router *r = new_router(NULL);
    const char *doc = "{\"version\":\"7\",\"routes\":["
                      "{\"id\":\"a\",\"uri\":\"http://a\",\"predicates\":"
                      "[\"Path=/a\"]}]}";
    ck_assert_int_eq(apply(r, "main", doc), 0);
    const char *c = "{\"id\":\"c\",\"uri\":\"http://c\","
                    "\"predicates\":[\"Path=/c\"]}";
    ck_assert_int_eq(sy_router_upsert_route(r, "main", c, strlen(c), NULL), 0);
    ck_assert_int_eq(sy_router_remove_route(r, "a", NULL), 0);
    sy_report *rep;
    ck_assert_int_eq(sy_router_apply(r, "main", doc, strlen(doc), &rep, NULL),
                     0);
    ck_assert(!sy_report_skipped(rep));
    sy_report_free(rep);
    session s = {0};
    ck_assert_ptr_nonnull(match(&s, r, "GET", "h", "/a"));
    ck_assert_ptr_null(match(&s, r, "GET", "h", "/c"));
    session_end(&s);
    /* and now, with nothing changed since, the same bytes are skipped */
    ck_assert_int_eq(sy_router_apply(r, "main", doc, strlen(doc), &rep, NULL),
                     0);
    ck_assert(sy_report_skipped(rep));
    sy_report_free(rep);
    sy_router_free(r);
}
END_TEST

/* "%2F" captured in a variable must not become a real '/' after
 * SetPath (with the default SY_SLASHES_KEEP): no traversal upstream. */
START_TEST(encoded_slash_in_a_capture_stays_encoded_upstream) {
    sy_router *r = new_router(NULL);
    ck_assert_int_eq(
        apply(
            r, "main",
            "[{\"id\":\"one\",\"uri\":\"http://s\",\"predicates\":"
            "[\"Path=/files/{name}\"],\"filters\":[\"SetPath=/store/{name}\"]},"
            "{\"id\":\"rest\",\"uri\":\"http://s\",\"predicates\":"
            "[\"Path=/all/{*rest}\"],\"filters\":[\"SetPath=/store{rest}\"]}]"),
        0);
    session s = {0};
    sy_target t;
    ck_assert_ptr_nonnull(match(&s, r, "GET", "h", "/files/..%2F..%2Fetc"));
    ck_assert(str_is(sy_match_var_get(s.m, "name"), "..%2F..%2Fetc"));
    ck_assert_int_eq(sy_match_target(s.m, NULL, 0, &t, NULL), 0);
    ck_assert(str_is(t.path, "/store/..%2F..%2Fetc"));
    ck_assert_ptr_nonnull(match(&s, r, "GET", "h", "/all/a/..%5c..%2fx"));
    ck_assert_int_eq(sy_match_target(s.m, NULL, 0, &t, NULL), 0);
    ck_assert(str_is(t.path, "/store/a/..%5c..%2fx"));
    /* a plain space in a capture is still encoded as a path needs */
    ck_assert_ptr_nonnull(match(&s, r, "GET", "h", "/files/a%20b"));
    ck_assert_int_eq(sy_match_target(s.m, NULL, 0, &t, NULL), 0);
    ck_assert(str_is(t.path, "/store/a%20b"));
    session_end(&s);
    sy_router_free(r);
}
END_TEST

START_TEST(a_failed_remove_shows_in_its_source_status) {
    sy_router *r = new_router(NULL);
    ck_assert_int_eq(apply(r, "extra", ROUTES_LB), 0);
    sy_change_set *cs;
    sy_error err;
    ck_assert_int_eq(sy_change_set_new(r, &cs, &err), 0);
    ck_assert_int_eq(sy_change_set_remove_route(cs, "orders", &err), 0);
    ck_assert_int_eq(sy_change_set_set_route_enabled(cs, "orders", false, &err),
                     0); /* removed by the step before: not found */
    ck_assert_int_eq(sy_router_commit(r, cs, NULL, &err), SY_ENOTFOUND);
    sy_change_set_free(cs);
    sy_source_status st;
    ck_assert_int_eq(sy_router_source_status(r, 1, &st, &err), 0);
    ck_assert_str_eq(st.name, "extra");
    ck_assert_uint_eq(st.failed_count, 0); /* the route was gone: no owner */
    /* a failing enable of a live route is its source's failure */
    sy_router_options o = SY_ROUTER_OPTIONS_INIT;
    o.max_retired = 1;
    sy_router_free(r);
    r = new_router(&o);
    ck_assert_int_eq(apply(r, "extra", ROUTES_LB), 0);
    sy_snapshot *held1 = sy_router_acquire(r);
    ck_assert_int_eq(sy_router_set_route_enabled(r, "orders", false, NULL), 0);
    sy_snapshot *held2 = sy_router_acquire(r);
    ck_assert_int_eq(sy_router_set_route_enabled(r, "orders", true, &err),
                     SY_EBUSY);
    ck_assert_int_eq(sy_router_source_status(r, 1, &st, &err), 0);
    ck_assert_uint_eq(st.failed_count, 1);
    ck_assert_int_eq(st.last_result, SY_EBUSY);
    sy_snapshot_release(held1);
    sy_snapshot_release(held2);
    sy_router_free(r);
}
END_TEST

START_TEST(a_readdressed_instance_does_not_inherit_an_ejection) {
    sy_router_options o = SY_ROUTER_OPTIONS_INIT;
    o.clock_ms = fake_clock;
    o.outlier.consecutive_failures = 1;
    sy_router *r = new_router(&o);
    ck_assert_int_eq(apply(r, "main", ROUTES_LB), 0);
    ck_assert_int_eq(
        sy_router_set_instances(r, "orders", two_instances(), 2, NULL, NULL),
        0);
    report(r, "o1", SY_OUTCOME_CONNECT_FAILURE, 1);
    ck_assert_int_eq(picks_of(r, "o1", 10), 0);
    sy_instance moved[2];
    memcpy(moved, two_instances(), sizeof moved);
    moved[0].host = "10.0.9.9"; /* same id, another address */
    ck_assert_int_eq(sy_router_set_instances(r, "orders", moved, 2, NULL, NULL),
                     0);
    ck_assert_int_gt(picks_of(r, "o1", 10), 0);
    sy_router_free(r);
}
END_TEST

static int count_routes(void *data, const sy_route *route, bool matched,
                        int failed, const char *name) {
    (void)data;
    (void)route;
    (void)matched;
    (void)failed;
    (void)name;
    return 0;
}

START_TEST(explain_forgets_the_last_no_match_reason) {
    sy_router *r = new_router(NULL);
    ck_assert_int_eq(apply(r, "main",
                           "[{\"id\":\"w\",\"uri\":\"http://a\",\"predicates\":"
                           "[\"Path=/w\",\"Method=POST\"]}]"),
                     0);
    session s = {0};
    ck_assert_ptr_null(match(&s, r, "GET", "h", "/w"));
    ck_assert_int_eq(sy_match_ctx_nomatch(s.ctx, NULL), SY_NOMATCH_METHOD);
    ck_assert_int_eq(
        sy_snapshot_explain(s.snap, s.ctx, &s.req, count_routes, NULL), 0);
    ck_assert_int_eq(sy_match_ctx_nomatch(s.ctx, NULL), SY_NOMATCH_NONE);
    session_end(&s);
    sy_router_free(r);
}
END_TEST

/* The instance chosen for /orders/1 with ctx in snapshot snap ("" when
 * none: SY_ENOINSTANCE). */
static const char *chosen(sy_match_ctx *ctx, const sy_snapshot *snap) {
    sy_request req = SY_REQUEST_INIT;
    req.method = (sy_str){"GET", 3};
    req.host = (sy_str){"h", 1};
    req.path = (sy_str){"/orders/1", 9};
    req.seed = 7;
    sy_match *m = NULL;
    ck_assert_int_eq(sy_snapshot_match(snap, ctx, &req, &m), 0);
    ck_assert_ptr_nonnull(m);
    sy_target t;
    sy_error err;
    int rc = sy_match_target(m, NULL, 0, &t, &err);
    if (rc == SY_ENOINSTANCE)
        return "";
    ck_assert_int_eq(rc, 0);
    return t.instance_id;
}

/* orders: the one instance `id`, or none (id NULL). */
static void set_one(sy_router *r, const char *id) {
    sy_instance in = {.id = id, .host = "10.0.0.1", .port = 8080};
    ck_assert_int_eq(
        sy_router_set_instances(r, "orders", &in, id ? 1 : 0, NULL, NULL), 0);
}

/* A context resolves a route's service once per snapshot (select.c): what
 * it resolved follows the snapshot the match is in, never an older one,
 * as the service's instances change, it goes and comes back, snapshots
 * alternate on one context, and a second router shares the context. */
START_TEST(the_service_a_context_resolved_follows_the_snapshot) {
    sy_router *r = new_router(NULL), *r2 = new_router(NULL);
    ck_assert_int_eq(apply(r, "main", ROUTES_LB), 0);
    ck_assert_int_eq(apply(r2, "main", ROUTES_LB), 0);
    sy_match_ctx *ctx;
    ck_assert_int_eq(sy_match_ctx_new(NULL, &ctx, NULL), 0);

    set_one(r, "a1");
    sy_snapshot *s1 = sy_router_acquire(r);
    ck_assert_str_eq(chosen(ctx, s1), "a1");
    ck_assert_str_eq(chosen(ctx, s1), "a1");
    set_one(r, "b1");
    sy_snapshot *s2 = sy_router_acquire(r);
    ck_assert_str_eq(chosen(ctx, s2), "b1");
    ck_assert_str_eq(chosen(ctx, s1), "a1"); /* the older one, still held */
    ck_assert_str_eq(chosen(ctx, s2), "b1");
    set_one(r, NULL); /* no instance left */
    sy_snapshot *s3 = sy_router_acquire(r);
    ck_assert_str_eq(chosen(ctx, s3), "");
    sy_snapshot_release(s1);
    sy_snapshot_release(s2);
    set_one(r, "c1"); /* back */
    sy_snapshot *s4 = sy_router_acquire(r);
    ck_assert_str_eq(chosen(ctx, s4), "c1");
    ck_assert_str_eq(chosen(ctx, s3), "");
    set_one(r2, "d1"); /* the same route text in another router */
    sy_snapshot *t1 = sy_router_acquire(r2);
    ck_assert_str_eq(chosen(ctx, t1), "d1");
    ck_assert_str_eq(chosen(ctx, s4), "c1");
    sy_snapshot_release(s3);
    sy_snapshot_release(s4);
    sy_snapshot_release(t1);
    sy_match_ctx_free(ctx);
    sy_router_free(r);
    sy_router_free(r2);
}
END_TEST

/* The target's headers leave Host out wherever it stands in the list
 * (first and last: a slice of the plan's list; elsewhere: a copy), the
 * others in order; with two, host_header is the last one's. */
START_TEST(the_target_leaves_host_out_wherever_it_stands) {
    sy_router *r = new_router(NULL);
    ck_assert_int_eq(apply(r, "main",
                           "[{\"id\":\"keep\",\"uri\":\"http://api:81\","
                           "\"predicates\":[\"Path=/keep\"],"
                           "\"filters\":[\"PreserveHostHeader\"]}]"),
                     0);
    static const char *const orders[][4] = {{"Host", "A", "B", NULL},
                                            {"A", "Host", "B", NULL},
                                            {"A", "B", "Host", NULL},
                                            {"Host", "A", "host", NULL},
                                            {"Host", NULL, NULL, NULL}};
    for (size_t c = 0; c < sizeof orders / sizeof orders[0]; c++) {
        session s = {0};
        size_t n = 0;
        for (; n < 4 && orders[c][n]; n++)
            s.hdrs[n] = (sy_header){{orders[c][n], strlen(orders[c][n])},
                                    {n ? "v2" : "v1", 2}};
        sy_target t;
        sy_error err;
        ck_assert_ptr_nonnull(match(&s, r, "GET", "h", "/keep"));
        ck_assert_int_eq(sy_match_target(s.m, NULL, 0, &t, &err), 0);
        size_t k = 0;
        const char *host = NULL;
        for (size_t i = 0; i < n; i++) {
            if (strcasecmp(orders[c][i], "host") == 0) {
                host = i ? "v2" : "v1";
                continue;
            }
            ck_assert_uint_gt(t.header_count, k);
            ck_assert(str_is(t.headers[k++].name, orders[c][i]));
        }
        ck_assert_uint_eq(t.header_count, k);
        ck_assert(str_is(t.host_header, host));
        session_end(&s);
    }
    sy_router_free(r);
}
END_TEST

int main(void) {
    Suite *s = suite_create("proxy");
    TCase *tc = tcase_create("proxy");
    tcase_add_test(tc, change_set_publishes_documents_and_instances_once);
    tcase_add_test(tc, change_set_failing_at_its_last_change_publishes_nothing);
    tcase_add_test(tc, a_failed_one_change_set_names_its_change);
    tcase_add_test(tc, change_set_steps_see_the_steps_before_them);
    tcase_add_test(tc, change_set_of_another_router_is_refused);
    tcase_add_test(
        tc, change_set_is_committed_once_and_a_failed_commit_may_be_retried);
    tcase_add_test(tc, staging_out_of_memory_is_enomem_without_an_error_too);
    tcase_add_test(tc, host_data_survives_unchanged_routes_and_is_freed_once);
    tcase_add_test(tc, route_keys_are_reused_after_the_route_is_freed);
    tcase_add_test(tc, target_of_url_routes_sets_host_header_from_the_upstream);
    tcase_add_test(tc, target_of_lb_routes_names_the_chosen_instance);
    tcase_add_test(tc, target_refuses_answers_the_gateway_gives_itself);
    tcase_add_test(tc, retries_never_return_an_excluded_instance);
    tcase_add_test(tc, failing_instance_is_ejected_and_returns_after_its_time);
    tcase_add_test(tc, ejections_are_capped_by_the_share_of_the_service);
    tcase_add_test(tc, method_mismatch_is_told_from_no_route);
    tcase_add_test(tc, writer_calls_from_a_callback_fail_at_once);
    tcase_add_test(tc, metrics_text_parses_back);
    tcase_add_test(tc, router_path_options_reach_matching);
    tcase_add_test(tc, check_runs_a_change_set_without_publishing_it);
    tcase_add_test(tc, reapplying_a_document_undoes_one_route_changes);
    tcase_add_test(tc, encoded_slash_in_a_capture_stays_encoded_upstream);
    tcase_add_test(tc, a_failed_remove_shows_in_its_source_status);
    tcase_add_test(tc, a_readdressed_instance_does_not_inherit_an_ejection);
    tcase_add_test(tc, explain_forgets_the_last_no_match_reason);
    tcase_add_test(tc, the_service_a_context_resolved_follows_the_snapshot);
    tcase_add_test(tc, the_target_leaves_host_out_wherever_it_stands);
    tcase_add_test(tc,
                   delta_for_an_unknown_service_says_the_service_is_unknown);
    suite_add_tcase(s, tc);
    return sy_test_run(s);
}
