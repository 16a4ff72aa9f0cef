/* test_router.c - the router: sources, apply, skip, strict/lenient, id
 * clashes, one-route changes, rollback, pull sources, events, retired cap,
 * metrics. Everything through the public API. */
#include "testutil.h"

#include "switchyard.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static sy_router *router_with(const char *const *sources, size_t n,
                              const sy_router_options *opts) {
    sy_router *r;
    sy_error err;
    sy_router_options def = SY_ROUTER_OPTIONS_INIT;
    ck_assert_int_eq(sy_router_new(opts ? opts : &def, &r, &err), 0);
    for (size_t i = 0; i < n; i++)
        ck_assert_int_eq(sy_router_add_source(r, sources[i], &err), 0);
    return r;
}

static int apply(sy_router *r, const char *src, const char *json,
                 sy_error *err) {
    return sy_router_apply(r, src, json, strlen(json), NULL, err);
}

/* The id of the route matching GET path on host h, or NULL. */
static const char *route_for(sy_router *r, const char *host, const char *path) {
    static char id[128];
    sy_match_ctx *ctx;
    ck_assert_int_eq(sy_match_ctx_new(NULL, &ctx, NULL), 0);
    sy_request req = SY_REQUEST_INIT;
    req.method = (sy_str){"GET", 3};
    req.host = (sy_str){host, strlen(host)};
    req.path = (sy_str){path, strlen(path)};
    sy_snapshot *s = sy_router_acquire(r);
    sy_match *m;
    ck_assert_int_eq(sy_snapshot_match(s, ctx, &req, &m), 0);
    const char *res = NULL;
    if (m) {
        snprintf(id, sizeof id, "%s", sy_route_id(sy_match_route(m)));
        res = id;
    }
    sy_snapshot_release(s);
    sy_match_ctx_free(ctx);
    return res;
}

static const char *const ONE[] = {"main"};
static const char *const TWO[] = {"first", "second"};

#define DOC_AB                                                                 \
    "{\"version\":\"1\",\"routes\":["                                          \
    "{\"id\":\"a\",\"uri\":\"http://a:80\",\"predicates\":[\"Path=/a/**\"]},"  \
    "{\"id\":\"b\",\"uri\":\"http://b:80\",\"predicates\":[\"Path=/b/**\"]}]}"

START_TEST(apply_publishes_routes_and_reports_counts) {
    sy_router *r = router_with(ONE, 1, NULL);
    sy_report *rep;
    sy_error err;
    ck_assert_int_eq(
        sy_router_apply(r, "main", DOC_AB, strlen(DOC_AB), &rep, &err), 0);
    ck_assert_str_eq(sy_report_version(rep), "1");
    ck_assert(!sy_report_skipped(rep));
    ck_assert_uint_eq(sy_diff_added_count(sy_report_diff(rep)), 2);
    ck_assert_uint_eq(sy_report_generation(rep), 1);
    sy_report_free(rep);
    ck_assert_str_eq(route_for(r, "h", "/a/x"), "a");
    ck_assert_str_eq(route_for(r, "h", "/b"), "b");
    ck_assert_ptr_null(route_for(r, "h", "/c"));
    sy_router_free(r);
}
END_TEST

START_TEST(same_bytes_is_skipped) {
    sy_router *r = router_with(ONE, 1, NULL);
    sy_report *rep;
    ck_assert_int_eq(apply(r, "main", DOC_AB, NULL), 0);
    ck_assert_int_eq(
        sy_router_apply(r, "main", DOC_AB, strlen(DOC_AB), &rep, NULL), 0);
    ck_assert(sy_report_skipped(rep));
    ck_assert(!sy_report_version_not_bumped(rep));
    ck_assert_uint_eq(sy_report_generation(rep), 1);
    sy_report_free(rep);
    ck_assert_str_eq(route_for(r, "h", "/a"), "a");
    sy_router_free(r);
}
END_TEST

/* A changed document whose version was not bumped is not lost. */
START_TEST(same_version_with_new_content_is_applied_and_reported) {
    sy_router *r = router_with(ONE, 1, NULL);
    sy_report *rep;
    ck_assert_int_eq(apply(r, "main", DOC_AB, NULL), 0);
    const char *v1 = "{\"version\":\"1\",\"routes\":[]}";
    ck_assert_int_eq(sy_router_apply(r, "main", v1, strlen(v1), &rep, NULL), 0);
    ck_assert(!sy_report_skipped(rep));
    ck_assert(sy_report_version_not_bumped(rep));
    ck_assert_uint_eq(sy_report_generation(rep), 2);
    sy_report_free(rep);
    ck_assert_ptr_null(route_for(r, "h", "/a"));
    sy_router_free(r);
}
END_TEST

START_TEST(skip_same_version_option_keeps_the_version_only_skip) {
    sy_router_options o = SY_ROUTER_OPTIONS_INIT;
    o.skip_same_version = true;
    sy_router *r = router_with(ONE, 1, &o);
    sy_report *rep;
    ck_assert_int_eq(apply(r, "main", DOC_AB, NULL), 0);
    const char *v1 = "{\"version\":\"1\",\"routes\":[]}";
    ck_assert_int_eq(sy_router_apply(r, "main", v1, strlen(v1), &rep, NULL), 0);
    ck_assert(sy_report_skipped(rep));
    sy_report_free(rep);
    ck_assert_str_eq(route_for(r, "h", "/a"), "a");
    sy_router_free(r);
}
END_TEST

START_TEST(strict_mode_rejects_the_document_and_keeps_serving) {
    sy_router *r = router_with(ONE, 1, NULL);
    ck_assert_int_eq(apply(r, "main", DOC_AB, NULL), 0);
    sy_error err;
    const char *bad = "{\"version\":\"2\",\"routes\":["
                      "{\"id\":\"a\",\"uri\":\"http://a:80\",\"predicates\":"
                      "[\"Path=/new/**\"]},"
                      "{\"id\":\"c\",\"uri\":\"nowhere\",\"predicates\":[]}]}";
    ck_assert_int_eq(apply(r, "main", bad, &err), SY_EURI);
    ck_assert_str_eq(err.path, "routes[1].uri");
    ck_assert_str_eq(route_for(r, "h", "/a/x"), "a");
    ck_assert_ptr_null(route_for(r, "h", "/new/x"));
    sy_metrics mt;
    sy_router_metrics(r, &mt);
    ck_assert_uint_eq(mt.generation, 1);
    sy_router_free(r);
}
END_TEST

START_TEST(lenient_mode_drops_invalid_routes_and_keeps_valid_ones) {
    sy_router_options o = SY_ROUTER_OPTIONS_INIT;
    o.lenient = true;
    sy_router *r = router_with(ONE, 1, &o);
    const char *doc = "[{\"id\":\"ok\",\"uri\":\"http://a:80\",\"predicates\":"
                      "[\"Path=/ok\"]},"
                      "{\"id\":\"bad\",\"uri\":\"http://a:80\",\"predicates\":"
                      "[\"Nope=1\"]}]";
    sy_report *rep;
    ck_assert_int_eq(sy_router_apply(r, "main", doc, strlen(doc), &rep, NULL),
                     0);
    ck_assert_uint_eq(sy_report_issue_count(rep), 1);
    ck_assert_int_eq(sy_report_issue(rep, 0)->code, SY_EUNKNOWN);
    sy_report_free(rep);
    ck_assert_str_eq(route_for(r, "h", "/ok"), "ok");
    sy_router_free(r);
}
END_TEST

START_TEST(id_used_by_another_source_is_an_error_of_the_later_document) {
    sy_router *r = router_with(TWO, 2, NULL);
    ck_assert_int_eq(apply(r, "first",
                           "[{\"id\":\"x\",\"uri\":\"http://a:80\","
                           "\"predicates\":[\"Path=/x\"]}]",
                           NULL),
                     0);
    sy_error err;
    ck_assert_int_eq(apply(r, "second",
                           "[{\"id\":\"y\",\"uri\":\"http://b:80\"},"
                           "{\"id\":\"x\",\"uri\":\"http://b:80\"}]",
                           &err),
                     SY_EDUPLICATE);
    ck_assert_str_eq(err.path, "[1].id");
    ck_assert_ptr_nonnull(strstr(err.message, "first"));
    ck_assert_str_eq(route_for(r, "h", "/x"), "x");
    sy_router_free(r);
}
END_TEST

START_TEST(equal_orders_tie_break_by_source_registration_then_position) {
    sy_router *r = router_with(TWO, 2, NULL);
    /* applied in reverse order of registration */
    ck_assert_int_eq(apply(r, "second",
                           "[{\"id\":\"s2\",\"uri\":\"http://b:80\","
                           "\"predicates\":[\"Path=/p\"]}]",
                           NULL),
                     0);
    ck_assert_int_eq(apply(r, "first",
                           "[{\"id\":\"s1a\",\"uri\":\"http://a:80\","
                           "\"predicates\":[\"Path=/q\"]},"
                           "{\"id\":\"s1b\",\"uri\":\"http://a:80\","
                           "\"predicates\":[\"Path=/p\"]}]",
                           NULL),
                     0);
    ck_assert_str_eq(route_for(r, "h", "/p"), "s1b");
    /* a lower order beats registration order */
    ck_assert_int_eq(apply(r, "second",
                           "[{\"id\":\"s2\",\"uri\":\"http://b:80\","
                           "\"order\":-1,\"predicates\":[\"Path=/p\"]}]",
                           NULL),
                     0);
    ck_assert_str_eq(route_for(r, "h", "/p"), "s2");
    sy_router_free(r);
}
END_TEST

START_TEST(a_held_snapshot_keeps_its_routes_across_an_apply) {
    sy_router *r = router_with(ONE, 1, NULL);
    ck_assert_int_eq(apply(r, "main", DOC_AB, NULL), 0);
    sy_snapshot *old = sy_router_acquire(r);
    ck_assert_int_eq(apply(r, "main",
                           "{\"version\":\"2\",\"routes\":[{\"id\":\"c\","
                           "\"uri\":\"http://c:80\"}]}",
                           NULL),
                     0);
    ck_assert_uint_eq(sy_snapshot_route_count(old), 2);
    ck_assert_ptr_nonnull(sy_snapshot_find_route(old, "a", NULL));
    sy_snapshot *now = sy_router_acquire(r);
    ck_assert_uint_eq(sy_snapshot_route_count(now), 1);
    ck_assert_ptr_null(sy_snapshot_find_route(now, "a", NULL));
    ck_assert_uint_gt(sy_snapshot_generation(now), sy_snapshot_generation(old));
    sy_snapshot_release(now);
    sy_snapshot_release(old);
    sy_metrics mt;
    sy_router_reclaim(r);
    sy_router_metrics(r, &mt);
    ck_assert_uint_eq(mt.retired_snapshots, 0);
    sy_router_free(r);
}
END_TEST

START_TEST(an_apply_compiles_only_added_and_updated_routes) {
    sy_router *r = router_with(ONE, 1, NULL);
    ck_assert_int_eq(apply(r, "main", DOC_AB, NULL), 0);
    sy_snapshot *s1 = sy_router_acquire(r);
    const sy_route *a1 = sy_snapshot_find_route(s1, "a", NULL);
    /* same meaning for a, new position (c inserted before it) */
    const char *doc2 =
        "{\"version\":\"2\",\"routes\":["
        "{\"id\":\"c\",\"uri\":\"http://c:80\",\"predicates\":[\"Path=/a/x\"]},"
        "{\"id\":\"a\",\"uri\":\"http://a:80\",\"predicates\":[\"Path=/a/"
        "**\"]}]}";
    ck_assert_int_eq(apply(r, "main", doc2, NULL), 0);
    sy_snapshot *s2 = sy_router_acquire(r);
    /* the very same compiled object, now ranked after c */
    ck_assert_ptr_eq(sy_snapshot_find_route(s2, "a", NULL), a1);
    ck_assert_str_eq(sy_route_id(sy_snapshot_route_at(s2, 0)), "c");
    ck_assert_str_eq(route_for(r, "h", "/a/x"), "c");
    ck_assert_str_eq(route_for(r, "h", "/a/y"), "a");
    sy_snapshot_release(s1);
    sy_snapshot_release(s2);
    sy_router_free(r);
}
END_TEST

START_TEST(unchanged_routes_are_shared_between_snapshots) {
    sy_router *r = router_with(ONE, 1, NULL);
    ck_assert_int_eq(apply(r, "main", DOC_AB, NULL), 0);
    sy_snapshot *s1 = sy_router_acquire(r);
    /* b written differently but meaning the same; a changed */
    const char *doc2 = "{\"version\":\"2\",\"routes\":["
                       "{\"id\":\"a\",\"uri\":\"http://"
                       "a2:80\",\"predicates\":[\"Path=/a/**\"]},"
                       "{\"predicates\":[{\"name\":\"Path\",\"args\":{"
                       "\"patterns\":\"/b/**\"}}],"
                       "\"uri\":\"http://b:80\",\"id\":\"b\"}]}";
    sy_report *rep;
    ck_assert_int_eq(sy_router_apply(r, "main", doc2, strlen(doc2), &rep, NULL),
                     0);
    const sy_diff *d = sy_report_diff(rep);
    ck_assert_uint_eq(sy_diff_unchanged_count(d), 1);
    ck_assert_uint_eq(sy_diff_updated_count(d), 1);
    unsigned mask;
    ck_assert_str_eq(sy_diff_updated(d, 0, &mask), "a");
    ck_assert_uint_eq(mask, SY_CHANGED_URI);
    sy_report_free(rep);
    sy_snapshot *s2 = sy_router_acquire(r);
    ck_assert_ptr_eq(sy_snapshot_find_route(s1, "b", NULL),
                     sy_snapshot_find_route(s2, "b", NULL));
    ck_assert_ptr_ne(sy_snapshot_find_route(s1, "a", NULL),
                     sy_snapshot_find_route(s2, "a", NULL));
    sy_snapshot_release(s1);
    sy_snapshot_release(s2);
    sy_router_free(r);
}
END_TEST

START_TEST(one_route_changes_are_visible_at_the_next_acquire) {
    sy_router *r = router_with(ONE, 1, NULL);
    ck_assert_int_eq(apply(r, "main", DOC_AB, NULL), 0);
    sy_error err;
    const char *c = "{\"id\":\"c\",\"uri\":\"http://c:80\",\"predicates\":"
                    "[\"Path=/c\"]}";
    ck_assert_int_eq(sy_router_upsert_route(r, "main", c, strlen(c), &err), 0);
    ck_assert_str_eq(route_for(r, "h", "/c"), "c");
    const char *a2 = "{\"id\":\"a\",\"uri\":\"http://a:80\",\"predicates\":"
                     "[\"Path=/a2\"]}";
    ck_assert_int_eq(sy_router_upsert_route(r, "main", a2, strlen(a2), &err),
                     0);
    ck_assert_ptr_null(route_for(r, "h", "/a/x"));
    ck_assert_str_eq(route_for(r, "h", "/a2"), "a");
    ck_assert_int_eq(sy_router_set_route_enabled(r, "c", false, &err), 0);
    ck_assert_ptr_null(route_for(r, "h", "/c"));
    ck_assert_int_eq(sy_router_set_route_enabled(r, "c", true, &err), 0);
    ck_assert_str_eq(route_for(r, "h", "/c"), "c");
    ck_assert_int_eq(sy_router_remove_route(r, "b", &err), 0);
    ck_assert_ptr_null(route_for(r, "h", "/b"));
    ck_assert_int_eq(sy_router_remove_route(r, "b", &err), SY_ENOTFOUND);
    const char *bad = "{\"id\":\"d\",\"uri\":\"x\"}";
    ck_assert_int_eq(sy_router_upsert_route(r, "main", bad, strlen(bad), &err),
                     SY_EURI);
    ck_assert_str_eq(err.path, "route.uri");
    sy_router_free(r);
}
END_TEST

START_TEST(rollback_restores_an_earlier_version) {
    sy_router *r = router_with(ONE, 1, NULL);
    ck_assert_int_eq(apply(r, "main", DOC_AB, NULL), 0);
    ck_assert_int_eq(apply(r, "main",
                           "{\"version\":\"2\",\"routes\":[{\"id\":\"c\","
                           "\"uri\":\"http://c:80\",\"predicates\":"
                           "[\"Path=/c\"]}]}",
                           NULL),
                     0);
    ck_assert_ptr_null(route_for(r, "h", "/a"));
    sy_report *rep;
    ck_assert_int_eq(sy_router_rollback(r, "main", "1", &rep, NULL), 0);
    ck_assert_str_eq(sy_report_version(rep), "1");
    sy_report_free(rep);
    ck_assert_str_eq(route_for(r, "h", "/a"), "a");
    ck_assert_ptr_null(route_for(r, "h", "/c"));
    sy_error err;
    ck_assert_int_eq(sy_router_rollback(r, "main", "nope", NULL, &err),
                     SY_ENOTFOUND);
    sy_router_free(r);
}
END_TEST

/* A kept document is its compiled routes, not its text: a rollback needs
 * nothing of the caller's buffer, reports the same diff an apply of the
 * text would, lenient issues included, and a later apply of the source
 * (no memo after a rollback) still shares what it can. */
START_TEST(rollback_needs_no_text_and_reports_like_an_apply) {
    sy_router_options o = SY_ROUTER_OPTIONS_INIT;
    o.lenient = true;
    sy_router *r = router_with(ONE, 1, &o);
    const char *v1 =
        "{\"version\":\"1\",\"routes\":["
        "{\"id\":\"a\",\"uri\":\"http://a:80\",\"predicates\":[\"Path=/a\"]},"
        "{\"id\":\"bad\",\"uri\":\"nope\"},"
        "{\"id\":\"b\",\"uri\":\"http://b:80\",\"predicates\":[\"Path=/b\"]}]}";
    size_t n1 = strlen(v1);
    char *buf = malloc(n1 + 1);
    ck_assert_ptr_nonnull(buf);
    memcpy(buf, v1, n1 + 1);
    sy_error err;
    ck_assert_int_eq(sy_router_apply(r, "main", buf, n1, NULL, &err), 0);
    memset(buf, '#', n1); /* the router kept no pointer into it */
    free(buf);
    const char *v2 =
        "{\"version\":\"2\",\"routes\":["
        "{\"id\":\"a\",\"uri\":\"http://a:80\",\"predicates\":[\"Path=/a\"]},"
        "{\"id\":\"c\",\"uri\":\"http://c:80\",\"predicates\":[\"Path=/c\"]}]}";
    ck_assert_int_eq(apply(r, "main", v2, &err), 0);
    ck_assert_ptr_null(route_for(r, "h", "/b"));
    sy_report *rep;
    ck_assert_int_eq(sy_router_rollback(r, "main", NULL, &rep, &err), 0);
    ck_assert_str_eq(sy_report_version(rep), "1");
    ck_assert_uint_eq(sy_report_issue_count(rep), 1);
    const sy_diff *d = sy_report_diff(rep);
    ck_assert_uint_eq(sy_diff_added_count(d), 1);     /* b */
    ck_assert_uint_eq(sy_diff_removed_count(d), 1);   /* c */
    ck_assert_uint_eq(sy_diff_unchanged_count(d), 1); /* a */
    sy_report_free(rep);
    ck_assert_str_eq(route_for(r, "h", "/a"), "a");
    ck_assert_str_eq(route_for(r, "h", "/b"), "b");
    ck_assert_ptr_null(route_for(r, "h", "/c"));
    /* the rollback is the newest kept document: "the one before" is 2 */
    ck_assert_int_eq(sy_router_rollback(r, "main", NULL, NULL, &err), 0);
    ck_assert_str_eq(route_for(r, "h", "/c"), "c");
    ck_assert_ptr_null(route_for(r, "h", "/b"));
    /* an apply after a rollback: v2 is live, so its text is unchanged */
    ck_assert_int_eq(sy_router_apply(r, "main", v2, strlen(v2), &rep, &err), 0);
    ck_assert(sy_report_skipped(rep));
    sy_report_free(rep);
    const char *v3 =
        "{\"version\":\"3\",\"routes\":["
        "{\"id\":\"a\",\"uri\":\"http://a:80\",\"predicates\":[\"Path=/a\"]},"
        "{\"id\":\"c\",\"uri\":\"http://c2:80\",\"predicates\":[\"Path=/"
        "c\"]}]}";
    ck_assert_int_eq(sy_router_apply(r, "main", v3, strlen(v3), &rep, &err), 0);
    d = sy_report_diff(rep);
    ck_assert_uint_eq(sy_diff_updated_count(d), 1);
    ck_assert_uint_eq(sy_diff_unchanged_count(d), 1);
    sy_report_free(rep);
    sy_router_free(r);
}
END_TEST

typedef struct kept_count {
    int attached, detached;
} kept_count;

static void *kept_attach(void *data, const sy_route *route) {
    (void)route;
    kept_count *h = data;
    h->attached++;
    return h;
}

static void kept_detach(void *data, const sy_route *route, void *host_data) {
    (void)route;
    kept_count *h = data;
    ck_assert_ptr_eq(host_data, h);
    h->detached++;
}

/* A route the history still holds loses its host data once no snapshot
 * can reach it (not only when freed); a rollback that puts it back
 * attaches it again; every attach has one detach by the router's free. */
START_TEST(kept_routes_are_detached_when_no_snapshot_reaches_them) {
    kept_count h = {0, 0};
    sy_router_options o = SY_ROUTER_OPTIONS_INIT;
    o.route_attach = kept_attach;
    o.route_detach = kept_detach;
    o.callback_data = &h;
    sy_router *r = router_with(ONE, 1, &o);
    sy_error err;
    ck_assert_int_eq(apply(r, "main", DOC_AB, &err), 0);
    ck_assert_int_eq(h.attached, 2);
    const char *v2 = "{\"version\":\"2\",\"routes\":[{\"id\":\"a\",\"uri\":"
                     "\"http://a:80\",\"predicates\":[\"Path=/a/**\"]}]}";
    ck_assert_int_eq(apply(r, "main", v2, &err), 0);
    /* b left; no reader holds an older snapshot: buried, detached */
    ck_assert_int_eq(h.detached, 1);
    ck_assert_int_eq(sy_router_rollback(r, "main", "1", NULL, &err), 0);
    ck_assert_int_eq(h.attached, 3); /* b again */
    ck_assert_str_eq(route_for(r, "h", "/b/x"), "b");
    /* a reader holding the snapshot with b keeps b attached */
    sy_snapshot *held = sy_router_acquire(r);
    ck_assert_int_eq(apply(r, "main", v2, &err), 0);
    ck_assert_int_eq(h.detached, 1);
    sy_snapshot_release(held);
    ck_assert_int_eq(apply(r, "main", DOC_AB, &err), 0); /* buries */
    ck_assert_int_eq(h.detached, 2);
    ck_assert_int_eq(h.attached, 4);
    sy_router_free(r);
    ck_assert_int_eq(h.detached, h.attached);
}
END_TEST

typedef struct loader_state {
    sy_router *r;
    int calls;
    int nested; /* notifications sent from inside the loader */
} loader_state;

static int counting_loader(void *data, const char *source, sy_loaded *out,
                           sy_error *err) {
    (void)err;
    loader_state *st = data;
    st->calls++;
    /* three notifications arrive while this apply runs */
    for (int i = 0; i < st->nested; i++)
        ck_assert_int_eq(sy_router_notify(st->r, source, NULL), 0);
    st->nested = 0;
    out->bytes = DOC_AB;
    out->len = strlen(DOC_AB);
    out->release = NULL;
    return 0;
}

START_TEST(notifications_during_an_apply_are_coalesced) {
    sy_router *r = router_with(ONE, 1, NULL);
    loader_state st = {r, 0, 3};
    ck_assert_int_eq(
        sy_router_set_loader(r, "main", counting_loader, &st, NULL), 0);
    ck_assert_int_eq(sy_router_notify(r, "main", NULL), 0);
    ck_assert_int_eq(st.calls, 2); /* the first, plus one for the three */
    ck_assert_str_eq(route_for(r, "h", "/a"), "a");
    sy_router_free(r);
}
END_TEST

static void count_events(void *data, const sy_report *rep) {
    int *n = data;
    if (!sy_report_skipped(rep))
        (*n)++;
}

START_TEST(every_publish_reaches_the_event_callback) {
    int events = 0;
    sy_router_options o = SY_ROUTER_OPTIONS_INIT;
    o.on_event = count_events;
    o.callback_data = &events;
    sy_router *r = router_with(ONE, 1, &o);
    ck_assert_int_eq(apply(r, "main", DOC_AB, NULL), 0);
    sy_instance in = {"i1", "10.0.0.1", 80, false, 1, SY_INSTANCE_UP, NULL, 0};
    ck_assert_int_eq(sy_router_set_instances(r, "svc", &in, 1, NULL, NULL), 0);
    ck_assert_int_eq(events, 2);
    sy_router_free(r);
}
END_TEST

START_TEST(retired_cap_refuses_to_publish_and_keeps_the_live_snapshot) {
    sy_router_options o = SY_ROUTER_OPTIONS_INIT;
    o.max_retired = 1;
    sy_router *r = router_with(ONE, 1, &o);
    sy_snapshot *h0 = sy_router_acquire(r);
    ck_assert_int_eq(apply(r, "main", DOC_AB, NULL), 0);
    sy_snapshot *h1 = sy_router_acquire(r);
    sy_error err;
    int rc = apply(r, "main",
                   "{\"version\":\"2\",\"routes\":[{\"id\":\"c\","
                   "\"uri\":\"http://c:80\"}]}",
                   &err);
    ck_assert_int_eq(rc, SY_EBUSY);
    ck_assert_str_eq(route_for(r, "h", "/a"), "a");
    sy_snapshot_release(h0);
    sy_snapshot_release(h1);
    ck_assert_int_eq(apply(r, "main",
                           "{\"version\":\"2\",\"routes\":[{\"id\":\"c\","
                           "\"uri\":\"http://c:80\"}]}",
                           &err),
                     0);
    sy_router_free(r);
}
END_TEST

START_TEST(metrics_count_publishes_and_routes) {
    sy_router *r = router_with(ONE, 1, NULL);
    ck_assert_int_eq(apply(r, "main", DOC_AB, NULL), 0);
    sy_metrics mt;
    sy_router_metrics(r, &mt);
    ck_assert_uint_eq(mt.routes, 2);
    ck_assert_uint_eq(mt.publishes, 1);
    ck_assert_uint_eq(mt.generation, 1);
    ck_assert_uint_eq(mt.live_snapshots, 1);
    sy_router_free(r);
}
END_TEST

/* A source's status follows every publish (its fingerprint and route
 * count are worked out once per snapshot and kept until the next). */
START_TEST(source_status_follows_every_publish) {
    sy_router *r = router_with(TWO, 2, NULL);
    sy_error err;
    sy_source_status st, again;
    ck_assert_int_eq(sy_router_source_status(r, 0, &st, &err), 0);
    ck_assert_uint_eq(st.routes, 0);
    ck_assert_uint_eq(st.fingerprint, 0);
    ck_assert_int_eq(apply(r, "first", DOC_AB, NULL), 0);
    ck_assert_int_eq(sy_router_source_status(r, 0, &st, &err), 0);
    ck_assert_uint_eq(st.routes, 2);
    ck_assert_uint_ne(st.fingerprint, 0);
    ck_assert_int_eq(sy_router_source_status(r, 0, &again, &err), 0);
    ck_assert_uint_eq(again.fingerprint, st.fingerprint);
    ck_assert_int_eq(sy_router_source_status(r, 1, &again, &err), 0);
    ck_assert_uint_eq(again.routes, 0);

    const char *c = "{\"id\":\"c\",\"uri\":\"http://c:80\","
                    "\"predicates\":[\"Path=/c/**\"]}";
    ck_assert_int_eq(sy_router_upsert_route(r, "second", c, strlen(c), &err),
                     0);
    ck_assert_int_eq(sy_router_source_status(r, 1, &again, &err), 0);
    ck_assert_uint_eq(again.routes, 1);
    ck_assert_uint_ne(again.fingerprint, 0);
    ck_assert_int_eq(sy_router_source_status(r, 0, &again, &err), 0);
    ck_assert_uint_eq(again.fingerprint, st.fingerprint);

    const char *doc_a = "{\"version\":\"2\",\"routes\":[{\"id\":\"a\","
                        "\"uri\":\"http://a:80\",\"predicates\":"
                        "[\"Path=/a/**\"]}]}";
    ck_assert_int_eq(apply(r, "first", doc_a, NULL), 0);
    ck_assert_int_eq(sy_router_source_status(r, 0, &again, &err), 0);
    ck_assert_uint_eq(again.routes, 1);
    ck_assert_uint_ne(again.fingerprint, st.fingerprint);
    ck_assert_str_eq(again.version, "2");
    sy_router_free(r);
}
END_TEST

START_TEST(two_routers_with_the_same_routes_have_equal_fingerprints) {
    sy_router *a = router_with(ONE, 1, NULL), *b = router_with(ONE, 1, NULL);
    ck_assert_int_eq(apply(a, "main", DOC_AB, NULL), 0);
    ck_assert_int_eq(apply(b, "main",
                           "[{\"id\":\"a\",\"uri\":\"http://a:80\","
                           "\"predicates\":[{\"name\":\"Path\",\"args\":"
                           "{\"_genkey_0\":\"/a/**\"}}]},"
                           "{\"id\":\"b\",\"uri\":\"http://b:80\","
                           "\"predicates\":[\"Path=/b/**\"]}]",
                           NULL),
                     0);
    sy_snapshot *sa = sy_router_acquire(a), *sb = sy_router_acquire(b);
    ck_assert_uint_eq(sy_snapshot_fingerprint(sa), sy_snapshot_fingerprint(sb));
    sy_snapshot_release(sa);
    sy_snapshot_release(sb);
    ck_assert_int_eq(sy_router_remove_route(b, "b", NULL), 0);
    sb = sy_router_acquire(b);
    sa = sy_router_acquire(a);
    ck_assert_uint_ne(sy_snapshot_fingerprint(sa), sy_snapshot_fingerprint(sb));
    sy_snapshot_release(sa);
    sy_snapshot_release(sb);
    sy_router_free(a);
    sy_router_free(b);
}
END_TEST

typedef struct reader_arg {
    sy_router *r;
    volatile int *stop;
    long matches;
    long misses;
} reader_arg;

static void *reader(void *p) {
    reader_arg *a = p;
    sy_match_ctx *ctx;
    sy_match_ctx_new(NULL, &ctx, NULL);
    sy_request req = SY_REQUEST_INIT;
    req.method = (sy_str){"GET", 3};
    req.path = (sy_str){"/stable/x", 9};
    while (!__atomic_load_n(a->stop, __ATOMIC_ACQUIRE)) {
        sy_snapshot *s = sy_router_acquire(a->r);
        sy_match *m;
        sy_snapshot_match(s, ctx, &req, &m);
        if (m && strcmp(sy_route_id(sy_match_route(m)), "stable") == 0)
            a->matches++;
        else
            a->misses++;
        sy_snapshot_release(s);
    }
    sy_match_ctx_free(ctx);
    return NULL;
}

START_TEST(readers_never_miss_a_stable_route_while_documents_change) {
    sy_router *r = router_with(ONE, 1, NULL);
    char doc[512];
    snprintf(doc, sizeof doc,
             "{\"version\":\"0\",\"routes\":[{\"id\":\"stable\",\"uri\":"
             "\"http://s:80\",\"predicates\":[\"Path=/stable/**\"]}]}");
    ck_assert_int_eq(apply(r, "main", doc, NULL), 0);
    volatile int stop = 0;
    reader_arg args[3];
    pthread_t th[3];
    for (int i = 0; i < 3; i++) {
        args[i] = (reader_arg){r, &stop, 0, 0};
        pthread_create(&th[i], NULL, reader, &args[i]);
    }
    for (int v = 1; v <= 300; v++) {
        snprintf(doc, sizeof doc,
                 "{\"version\":\"%d\",\"routes\":[{\"id\":\"stable\",\"uri\":"
                 "\"http://s:80\",\"predicates\":[\"Path=/stable/**\"]},"
                 "{\"id\":\"churn%d\",\"uri\":\"http://c:80\",\"predicates\":"
                 "[\"Path=/churn/%d\"]}]}",
                 v, v, v);
        ck_assert_int_eq(apply(r, "main", doc, NULL), 0);
    }
    __atomic_store_n(&stop, 1, __ATOMIC_RELEASE);
    for (int i = 0; i < 3; i++) {
        pthread_join(th[i], NULL);
        ck_assert_int_eq(args[i].misses, 0);
    }
    sy_router_free(r);
}
END_TEST

/* The calls api.md lists as "any thread": status and metrics (which take
 * the writer lock briefly), the policy store's counters, parsing a
 * document and the first canonical text of a live route, from readers
 * while the writer publishes. Each read is whole (a source's version and
 * route count come from one publish) and none goes backwards; the
 * concurrency suite runs this under TSan. */
typedef struct status_arg {
    sy_router *r;
    volatile int *stop;
    long reads; /* atomics: the writer waits for some */
    int done;
    char failure[160];
} status_arg;

static void *status_reader(void *p) {
    status_arg *a = p;
    char own[1 << 14]; /* each thread its own buffer */
    uint64_t last_gen = 0;
    long last_version = -1;
    const char *doc = "[{\"id\":\"x\",\"uri\":\"http://x\"}]";
    while (!__atomic_load_n(a->stop, __ATOMIC_ACQUIRE) && !a->failure[0]) {
        sy_metrics m;
        sy_router_metrics(a->r, &m);
        if (m.generation < last_gen)
            snprintf(a->failure, sizeof a->failure, "generation %llu < %llu",
                     (unsigned long long)m.generation,
                     (unsigned long long)last_gen);
        last_gen = m.generation;
        size_t len = 0;
        if (sy_router_metrics_text(a->r, own, sizeof own, &len, NULL) != 0 ||
            len != strlen(own) || !strstr(own, "switchyard_"))
            snprintf(a->failure, sizeof a->failure, "metrics text: %zu", len);
        sy_source_status st;
        if (sy_router_source_count(a->r) != 1 ||
            sy_router_source_status(a->r, 0, &st, NULL) != 0)
            snprintf(a->failure, sizeof a->failure, "source status");
        else if (st.applied) {
            long v = strtol(st.version, NULL, 10);
            if (v < last_version || st.routes != 2)
                snprintf(a->failure, sizeof a->failure,
                         "version %ld after %ld, %zu routes", v, last_version,
                         st.routes);
            last_version = v;
        }
        sy_policy_stats ps;
        sy_policy_store_stats(sy_router_policy_store(a->r), &ps);
        sy_document *d = NULL;
        if (sy_document_parse(doc, strlen(doc), NULL, &d, NULL) != 0)
            snprintf(a->failure, sizeof a->failure, "parse");
        sy_document_free(d);
        sy_snapshot *s = sy_router_acquire(a->r);
        for (size_t i = 0; i < sy_snapshot_route_count(s); i++)
            if (!sy_route_canonical(sy_snapshot_route_at(s, i)))
                snprintf(a->failure, sizeof a->failure, "canonical");
        sy_snapshot_release(s);
        __atomic_fetch_add(&a->reads, 1, __ATOMIC_RELAXED);
    }
    __atomic_store_n(&a->done, 1, __ATOMIC_RELEASE);
    return NULL;
}

START_TEST(status_metrics_and_parses_run_on_any_thread_during_publishes) {
    sy_router *r = router_with(ONE, 1, NULL);
    volatile int stop = 0;
    status_arg args[2];
    pthread_t th[2];
    for (int i = 0; i < 2; i++) {
        args[i] = (status_arg){r, &stop, 0, 0, ""};
        ck_assert_int_eq(pthread_create(&th[i], NULL, status_reader, &args[i]),
                         0);
    }
    char doc[512];
    /* 200 publishes, and more until each reader has read 50 times (a
     * loaded machine may start them late) or stopped on a failure */
    for (int v = 1;; v++) {
        bool enough = v > 200;
        for (int i = 0; i < 2; i++)
            enough = enough &&
                     (__atomic_load_n(&args[i].reads, __ATOMIC_RELAXED) >= 50 ||
                      __atomic_load_n(&args[i].done, __ATOMIC_ACQUIRE));
        if (enough)
            break;
        snprintf(doc, sizeof doc,
                 "{\"version\":\"%d\",\"routes\":[{\"id\":\"stable\","
                 "\"uri\":\"http://s:80\",\"predicates\":[\"Path=/s/**\"]},"
                 "{\"id\":\"churn%d\",\"uri\":\"http://c:80\","
                 "\"predicates\":[\"Path=/c/%d\"]}]}",
                 v, v, v);
        ck_assert_int_eq(apply(r, "main", doc, NULL), 0);
    }
    __atomic_store_n(&stop, 1, __ATOMIC_RELEASE);
    for (int i = 0; i < 2; i++) {
        pthread_join(th[i], NULL);
        ck_assert_msg(!args[i].failure[0], "%s", args[i].failure);
        ck_assert_int_ge(args[i].reads, 50);
    }
    sy_router_free(r);
}
END_TEST

typedef struct event_log {
    int count;
    char last[64];
    size_t added, removed, updated;
} event_log;

static void log_event(void *data, const sy_report *rep) {
    event_log *e = data;
    const sy_diff *d = sy_report_diff(rep);
    e->count++;
    e->added = d ? sy_diff_added_count(d) : 0;
    e->removed = d ? sy_diff_removed_count(d) : 0;
    e->updated = d ? sy_diff_updated_count(d) : 0;
    snprintf(e->last, sizeof e->last, "%s",
             sy_report_source(rep) ? sy_report_source(rep) : "");
}

START_TEST(one_route_changes_reach_the_event_callback_with_their_diff) {
    event_log ev = {0};
    sy_router_options o = SY_ROUTER_OPTIONS_INIT;
    o.on_event = log_event;
    o.callback_data = &ev;
    sy_router *r = router_with(ONE, 1, &o);
    const char *c = "{\"id\":\"c\",\"uri\":\"http://c:80\"}";
    ck_assert_int_eq(sy_router_upsert_route(r, "main", c, strlen(c), NULL), 0);
    ck_assert_int_eq(ev.count, 1);
    ck_assert_uint_eq(ev.added, 1);
    ck_assert_str_eq(ev.last, "main");
    const char *c2 = "{\"id\":\"c\",\"uri\":\"http://c2:80\"}";
    ck_assert_int_eq(sy_router_upsert_route(r, "main", c2, strlen(c2), NULL),
                     0);
    ck_assert_uint_eq(ev.updated, 1);
    ck_assert_int_eq(sy_router_set_route_enabled(r, "c", false, NULL), 0);
    ck_assert_int_eq(ev.count, 3);
    ck_assert_uint_eq(ev.updated, 1);
    ck_assert_int_eq(sy_router_remove_route(r, "c", NULL), 0);
    ck_assert_int_eq(ev.count, 4);
    ck_assert_uint_eq(ev.removed, 1);
    sy_router_free(r);
}
END_TEST

START_TEST(lenient_document_without_any_valid_route_changes_nothing) {
    sy_router_options o = SY_ROUTER_OPTIONS_INIT;
    o.lenient = true;
    sy_router *r = router_with(ONE, 1, &o);
    ck_assert_int_eq(apply(r, "main", DOC_AB, NULL), 0);
    sy_error err;
    sy_report *rep = NULL;
    const char *bad = "[{\"id\":\"x\",\"uri\":\"nope\"}]";
    ck_assert_int_eq(sy_router_apply(r, "main", bad, strlen(bad), &rep, &err),
                     SY_EINVALIDDOC);
    ck_assert_ptr_nonnull(rep);
    ck_assert_uint_eq(sy_report_issue_count(rep), 1);
    ck_assert_str_eq(sy_report_issue(rep, 0)->path, "[0].uri");
    sy_report_free(rep);
    ck_assert_str_eq(route_for(r, "h", "/a"), "a");
    /* an empty document is valid and empties the source */
    ck_assert_int_eq(apply(r, "main", "[]", NULL), 0);
    ck_assert_ptr_null(route_for(r, "h", "/a"));
    sy_router_free(r);
}
END_TEST

static int64_t fixed_clock(void *data) {
    return *(int64_t *)data;
}

START_TEST(requests_without_a_time_use_the_router_clock) {
    int64_t now = 1000;
    sy_router_options o = SY_ROUTER_OPTIONS_INIT;
    o.clock_ms = fixed_clock;
    o.callback_data = &now;
    sy_router *r = router_with(ONE, 1, &o);
    ck_assert_int_eq(apply(r, "main",
                           "[{\"id\":\"late\",\"uri\":\"http://a:80\","
                           "\"predicates\":[\"After=5000\"]}]",
                           NULL),
                     0);
    ck_assert_ptr_null(route_for(r, "h", "/"));
    now = 6000;
    ck_assert_str_eq(route_for(r, "h", "/"), "late");
    sy_router_free(r);
}
END_TEST

static uint64_t fixed_random(void *data) {
    return *(uint64_t *)data;
}

/* The route chosen for GET /w with the given seed. */
static const char *weighted(sy_router *r, uint64_t seed) {
    static char id[32];
    sy_match_ctx *ctx;
    ck_assert_int_eq(sy_match_ctx_new(NULL, &ctx, NULL), 0);
    sy_request req = SY_REQUEST_INIT;
    req.method = (sy_str){"GET", 3};
    req.path = (sy_str){"/w", 2};
    req.seed = seed;
    sy_snapshot *s = sy_router_acquire(r);
    sy_match *m;
    ck_assert_int_eq(sy_snapshot_match(s, ctx, &req, &m), 0);
    ck_assert_ptr_nonnull(m);
    snprintf(id, sizeof id, "%s", sy_route_id(sy_match_route(m)));
    sy_snapshot_release(s);
    sy_match_ctx_free(ctx);
    return id;
}

#define WEIGHTED                                                               \
    "[{\"id\":\"a\",\"uri\":\"http://a:80\",\"predicates\":"                   \
    "[\"Path=/w\",\"Weight=g,50\"]},"                                          \
    "{\"id\":\"b\",\"uri\":\"http://b:80\",\"predicates\":"                    \
    "[\"Path=/w\",\"Weight=g,50\"]}]"

START_TEST(requests_without_a_seed_draw_from_the_router_random_callback) {
    uint64_t next = 12345;
    sy_router_options o = SY_ROUTER_OPTIONS_INIT;
    o.random = fixed_random;
    o.callback_data = &next;
    sy_router *r = router_with(ONE, 1, &o);
    ck_assert_int_eq(apply(r, "main", WEIGHTED, NULL), 0);
    for (int i = 0; i < 20; i++) {
        next = (uint64_t)i * 7919u + 1;
        char want[32];
        snprintf(want, sizeof want, "%s", weighted(r, next));
        ck_assert_str_eq(weighted(r, 0), want);
    }
    sy_router_free(r);
}
END_TEST

START_TEST(requests_without_a_seed_and_no_callback_still_spread) {
    sy_router *r = router_with(ONE, 1, NULL);
    ck_assert_int_eq(apply(r, "main", WEIGHTED, NULL), 0);
    int a = 0;
    for (int i = 0; i < 200; i++)
        a += strcmp(weighted(r, 0), "a") == 0;
    ck_assert_int_gt(a, 40);
    ck_assert_int_lt(a, 160);
    sy_router_free(r);
}
END_TEST

typedef struct held_log {
    int calls;
    uint64_t generation;
} held_log;

static void on_held(void *data, uint64_t generation, uint64_t age_ms) {
    held_log *h = data;
    (void)age_ms;
    h->calls++;
    h->generation = generation;
}

START_TEST(a_snapshot_held_too_long_is_reported_once) {
    held_log h = {0, 0};
    sy_router_options o = SY_ROUTER_OPTIONS_INIT;
    o.retired_warn_ms = 1;
    o.on_retired_held = on_held;
    o.callback_data = &h;
    sy_router *r = router_with(ONE, 1, &o);
    ck_assert_int_eq(apply(r, "main", DOC_AB, NULL), 0);
    sy_snapshot *old = sy_router_acquire(r); /* generation 1 */
    ck_assert_int_eq(apply(r, "main", "[]", NULL), 0);
    struct timespec ts = {0, 20 * 1000 * 1000};
    nanosleep(&ts, NULL);
    sy_router_reclaim(r);
    ck_assert_int_eq(h.calls, 1);
    ck_assert_uint_eq(h.generation, 1);
    sy_router_reclaim(r);
    ck_assert_int_eq(h.calls, 1); /* once per snapshot */
    sy_metrics mt;
    sy_router_metrics(r, &mt);
    ck_assert_uint_eq(mt.retired_snapshots, 1);
    ck_assert_uint_ge(mt.oldest_retired_age_ms, 20);
    sy_snapshot_release(old);
    sy_router_reclaim(r);
    sy_router_metrics(r, &mt);
    ck_assert_uint_eq(mt.retired_snapshots, 0);
    sy_router_free(r);
}
END_TEST

/* The publish takes the routes a commit's only route-touching step added
 * as held without looking them up (commit.c held_adds): in change sets on
 * an empty router where a later step removes or replaces some of them,
 * exactly the published routes are attached (route_attach), and every
 * attached route is detached once when the router is freed. */
typedef struct attach_count {
    int attached, detached;
} attach_count;

static void *count_attach(void *data, const sy_route *rt) {
    (void)rt;
    ((attach_count *)data)->attached++;
    return NULL;
}

static void count_detach(void *data, const sy_route *rt, void *host_data) {
    (void)rt;
    (void)host_data;
    ((attach_count *)data)->detached++;
}

START_TEST(a_change_set_attaches_exactly_the_routes_it_publishes) {
    const char *abc =
        "{\"version\":\"1\",\"routes\":["
        "{\"id\":\"a\",\"uri\":\"http://a:80\",\"predicates\":[\"Path=/a\"]},"
        "{\"id\":\"b\",\"uri\":\"http://b:80\",\"predicates\":[\"Path=/b\"]},"
        "{\"id\":\"c\",\"uri\":\"http://c:80\",\"predicates\":[\"Path=/c\"]}]}";
    const char *b2 = "{\"id\":\"b\",\"uri\":\"http://b:81\","
                     "\"predicates\":[\"Path=/b\"]}";
    for (int variant = 0; variant < 3; variant++) {
        attach_count n = {0, 0};
        sy_router_options o = SY_ROUTER_OPTIONS_INIT;
        o.route_attach = count_attach;
        o.route_detach = count_detach;
        o.callback_data = &n;
        sy_router *r = router_with(ONE, 1, &o);
        sy_error err;
        sy_change_set *cs;
        ck_assert_int_eq(sy_change_set_new(r, &cs, &err), 0);
        ck_assert_int_eq(
            sy_change_set_apply(cs, "main", abc, strlen(abc), &err), 0);
        /* 0: a removed; 1: b replaced; 2: a removed, then the document
         * again (a comes back as a new route) */
        if (variant != 1)
            ck_assert_int_eq(sy_change_set_remove_route(cs, "a", &err), 0);
        if (variant == 1)
            ck_assert_int_eq(
                sy_change_set_upsert_route(cs, "main", b2, strlen(b2), &err),
                0);
        if (variant == 2)
            ck_assert_int_eq(
                sy_change_set_apply(cs, "main", abc, strlen(abc), &err), 0);
        ck_assert_int_eq(sy_router_commit(r, cs, NULL, &err), 0);
        sy_change_set_free(cs);
        sy_snapshot *s = sy_router_acquire(r);
        size_t live = sy_snapshot_route_count(s);
        sy_snapshot_release(s);
        ck_assert_uint_eq(live, variant == 0 ? 2 : 3);
        ck_assert_int_eq(n.attached, (int)live);
        if (variant == 0)
            ck_assert_ptr_null(route_for(r, "h", "/a"));
        else
            ck_assert_str_eq(route_for(r, "h", "/a"), "a");
        ck_assert_str_eq(route_for(r, "h", "/b"), "b");
        sy_router_free(r);
        ck_assert_int_eq(n.detached, n.attached);
    }
}
END_TEST

int main(void) {
    Suite *s = suite_create("router");
    TCase *tc = tcase_create("router");
    tcase_add_test(tc, apply_publishes_routes_and_reports_counts);
    tcase_add_test(tc, same_bytes_is_skipped);
    tcase_add_test(tc, same_version_with_new_content_is_applied_and_reported);
    tcase_add_test(tc, skip_same_version_option_keeps_the_version_only_skip);
    tcase_add_test(tc, strict_mode_rejects_the_document_and_keeps_serving);
    tcase_add_test(tc, lenient_mode_drops_invalid_routes_and_keeps_valid_ones);
    tcase_add_test(tc,
                   id_used_by_another_source_is_an_error_of_the_later_document);
    tcase_add_test(tc,
                   equal_orders_tie_break_by_source_registration_then_position);
    tcase_add_test(tc, a_held_snapshot_keeps_its_routes_across_an_apply);
    tcase_add_test(tc, unchanged_routes_are_shared_between_snapshots);
    tcase_add_test(tc, an_apply_compiles_only_added_and_updated_routes);
    tcase_add_test(tc, one_route_changes_are_visible_at_the_next_acquire);
    tcase_add_test(tc, rollback_restores_an_earlier_version);
    tcase_add_test(tc, rollback_needs_no_text_and_reports_like_an_apply);
    tcase_add_test(tc, kept_routes_are_detached_when_no_snapshot_reaches_them);
    tcase_add_test(tc, notifications_during_an_apply_are_coalesced);
    tcase_add_test(tc, every_publish_reaches_the_event_callback);
    tcase_add_test(tc,
                   retired_cap_refuses_to_publish_and_keeps_the_live_snapshot);
    tcase_add_test(tc, metrics_count_publishes_and_routes);
    tcase_add_test(tc, source_status_follows_every_publish);
    tcase_add_test(tc,
                   two_routers_with_the_same_routes_have_equal_fingerprints);
    tcase_add_test(tc,
                   readers_never_miss_a_stable_route_while_documents_change);
    tcase_add_test(tc,
                   one_route_changes_reach_the_event_callback_with_their_diff);
    tcase_add_test(tc,
                   lenient_document_without_any_valid_route_changes_nothing);
    tcase_add_test(tc, requests_without_a_time_use_the_router_clock);
    tcase_add_test(
        tc, requests_without_a_seed_draw_from_the_router_random_callback);
    tcase_add_test(tc, requests_without_a_seed_and_no_callback_still_spread);
    tcase_add_test(tc, a_snapshot_held_too_long_is_reported_once);
    tcase_add_test(tc, a_change_set_attaches_exactly_the_routes_it_publishes);
    tcase_add_test(
        tc, status_metrics_and_parses_run_on_any_thread_during_publishes);
    suite_add_tcase(s, tc);
    return sy_test_run(s);
}
