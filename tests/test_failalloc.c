/* test_failalloc.c - failure atomicity: for every allocation point of
 * every writer call (apply, upsert, remove, disable, enable, rollback,
 * instance lists and instance deltas, a change set staged and committed,
 * a set's check and a failed commit of a set committed again),
 * an allocator that fails the Nth allocation either makes the call fail
 * cleanly (the live state is exactly the old one) or, when the call still
 * succeeds, leaves exactly the state and events of a run without failures;
 * nothing leaks either way. On the request side, a match and its target
 * (filter plan with RewritePath, instance pick) under a match context
 * whose Nth allocation fails either return SY_ENOMEM or exactly the
 * target of a run without failures (never an answer such as 500), and
 * outcome reports allocate nothing. A snapshot's id table that grows,
 * and a publish while its entries move, fail cleanly the same way. */
#include "testutil.h"

#include "switchyard.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Counting allocator (testutil.h): fails allocation number `fail_at`
 * (1-based) when armed; tracks live blocks to find leaks. */
typedef sy_test_alloc counting;

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

/* Everything a caller can observe of the live table: every route in rank
 * order (id, source, disabled, fingerprint), the snapshot fingerprint
 * (which covers the instances) and what a few requests match. Two states
 * with equal signatures serve the same. */
static void signature(sy_router *r, sy_match_ctx *ctx, char *out, size_t cap) {
    static const char *const paths[] = {"/a/1", "/a2/1", "/c/x", "/z/1"};
    sy_header h = {{"X-Id", 4}, {"7", 1}};
    size_t o = 0;
    sy_snapshot *s = sy_router_acquire(r);
    for (size_t i = 0; i < sy_snapshot_route_count(s); i++) {
        const sy_route *rt = sy_snapshot_route_at(s, i);
        const char *src = NULL;
        sy_snapshot_find_route(s, sy_route_id(rt), &src);
        o += (size_t)snprintf(out + o, cap - o, "%s@%s:%d:%llx;",
                              sy_route_id(rt), src ? src : "?",
                              sy_route_disabled(rt),
                              (unsigned long long)sy_route_fingerprint(rt));
        ck_assert_uint_lt(o, cap);
    }
    o += (size_t)snprintf(out + o, cap - o, "fp=%llx;",
                          (unsigned long long)sy_snapshot_fingerprint(s));
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
        sy_request req = SY_REQUEST_INIT;
        req.method = (sy_str){"GET", 3};
        req.host = (sy_str){"x.b.com", 7};
        req.path = (sy_str){paths[i], strlen(paths[i])};
        req.headers = &h;
        req.header_count = 1;
        req.seed = 42; /* Weight draws repeatable */
        sy_match *m = NULL;
        int rc = sy_snapshot_match(s, ctx, &req, &m);
        const char *id = rc == 0 && m ? sy_route_id(sy_match_route(m)) : "-";
        o += (size_t)snprintf(out + o, cap - o, "%s->%s;", paths[i], id);
        ck_assert_uint_lt(o, cap);
    }
    sy_snapshot_release(s);
}

typedef int (*change_fn)(sy_router *r, sy_error *err);

/* One kind of writer call: `setup` brings a fresh router (DOC1 applied to
 * "main") to the state the call starts from; `fn` is the call. */
typedef struct change {
    change_fn setup; /* may be NULL */
    change_fn fn;
} change;

static int change_apply(sy_router *r, sy_error *err) {
    return sy_router_apply(r, "main", DOC2, strlen(DOC2), NULL, err);
}

static int change_upsert(sy_router *r, sy_error *err) {
    const char *route = "{\"id\":\"a\",\"uri\":\"http://z:80\",\"predicates\":"
                        "[\"Path=/z/{y}\"]}";
    return sy_router_upsert_route(r, "main", route, strlen(route), err);
}

static int change_remove(sy_router *r, sy_error *err) {
    return sy_router_remove_route(r, "a", err);
}

static int change_disable(sy_router *r, sy_error *err) {
    return sy_router_set_route_enabled(r, "a", false, err);
}

static int change_enable(sy_router *r, sy_error *err) {
    return sy_router_set_route_enabled(r, "a", true, err);
}

static int change_rollback(sy_router *r, sy_error *err) {
    return sy_router_rollback(r, "main", "1", NULL, err);
}

static int change_instances(sy_router *r, sy_error *err) {
    sy_kv md[] = {{"version", "1.0"}};
    sy_instance in[] = {
        {"i1", "10.0.0.1", 80, false, 1, SY_INSTANCE_UP, md, 1},
        {"i2", "10.0.0.2", 80, false, 2, SY_INSTANCE_UP, NULL, 0}};
    return sy_router_set_instances(r, "svc", in, 2, NULL, err);
}

static int change_instance_deltas(sy_router *r, sy_error *err) {
    sy_instance_delta d[3];
    memset(d, 0, sizeof d);
    d[0].op = SY_INSTANCE_ADD;
    d[0].instance =
        (sy_instance){"i3", "10.0.0.3", 81, false, 1, SY_INSTANCE_UP, NULL, 0};
    d[1].op = SY_INSTANCE_REMOVE;
    d[1].instance.id = "i1";
    d[2].op = SY_INSTANCE_WEIGHT;
    d[2].instance.id = "i2";
    d[2].instance.weight = 9;
    return sy_router_update_instances(r, "svc", d, 3, NULL, err);
}

/* Stage a change of every kind into cs. */
static int stage_every_kind(sy_change_set *cs, sy_error *err) {
    const char *route = "{\"id\":\"a\",\"uri\":\"http://z:80\",\"predicates\":"
                        "[\"Path=/z/{y}\"]}";
    sy_kv md[] = {{"version", "1.0"}};
    sy_instance in[] = {
        {"i1", "10.0.0.1", 80, false, 1, SY_INSTANCE_UP, md, 1},
        {"i2", "10.0.0.2", 80, false, 2, SY_INSTANCE_UP, NULL, 0}};
    sy_instance_delta d[1];
    memset(d, 0, sizeof d);
    d[0].op = SY_INSTANCE_WEIGHT;
    d[0].instance.id = "i2";
    d[0].instance.weight = 7;
    int rc;
    if (!(rc = sy_change_set_apply(cs, "main", DOC2, strlen(DOC2), err)) &&
        !(rc = sy_change_set_rollback(cs, "main", "1", err)) &&
        !(rc = sy_change_set_upsert_route(cs, "main", route, strlen(route),
                                          err)) &&
        !(rc = sy_change_set_set_route_enabled(cs, "b", false, err)) &&
        !(rc = sy_change_set_set_instances(cs, "svc", in, 2, err)) &&
        !(rc = sy_change_set_update_instances(cs, "svc", d, 1, err)))
        rc = sy_change_set_remove_route(cs, "a", err);
    return rc;
}

/* A set of every kind of change, staged and committed: staging copies
 * under the same allocator. */
static int change_set_commit(sy_router *r, sy_error *err) {
    sy_change_set *cs;
    int rc = sy_change_set_new(r, &cs, err);
    if (rc)
        return rc;
    if (!(rc = stage_every_kind(cs, err)))
        rc = sy_router_commit(r, cs, NULL, err);
    sy_change_set_free(cs);
    return rc;
}

static int setup_two_versions(sy_router *r, sy_error *err) {
    return sy_router_apply(r, "main", DOC2, strlen(DOC2), NULL, err);
}

static void count_event(void *data, const sy_report *rep) {
    (void)rep;
    ++*(long *)data;
}

typedef struct world {
    counting c;
    sy_allocator al;
    sy_router *r;
    sy_match_ctx *ctx;
    long events;
} world;

/* Host data for every live route (route_attach): a block made for it in a
 * route without one (route.c sy__route_set_host_data) is an allocation
 * that may fail too; every attach must be matched by one detach of the
 * same data, whatever failed. */
static char host_token;
static long attached, detached;

static void *token_attach(void *data, const sy_route *rt) {
    (void)data;
    (void)rt;
    attached++;
    return &host_token;
}

static void token_detach(void *data, const sy_route *rt, void *host_data) {
    (void)data;
    (void)rt;
    ck_assert_ptr_eq(host_data, &host_token);
    detached++;
}

/* A router with DOC1 applied and the change's setup done. */
static void world_open(world *w, const change *ch) {
    memset(w, 0, sizeof *w);
    w->al = sy_test_allocator(&w->c);
    sy_router_options o = SY_ROUTER_OPTIONS_INIT;
    o.allocator = &w->al;
    o.on_event = count_event;
    o.route_attach = token_attach;
    o.route_detach = token_detach;
    o.callback_data = &w->events;
    attached = detached = 0;
    ck_assert_int_eq(sy_router_new(&o, &w->r, NULL), 0);
    ck_assert_int_eq(sy_router_add_source(w->r, "main", NULL), 0);
    ck_assert_int_eq(
        sy_router_apply(w->r, "main", DOC1, strlen(DOC1), NULL, NULL), 0);
    if (ch->setup)
        ck_assert_int_eq(ch->setup(w->r, NULL), 0);
    ck_assert_int_eq(sy_match_ctx_new(&w->al, &w->ctx, NULL), 0);
    w->events = 0;
}

static void world_close(world *w) {
    sy_match_ctx_free(w->ctx);
    sy_router_free(w->r);
    ck_assert_int_gt(attached, 0);
    ck_assert_int_eq(detached, attached);
}

/* Run the change with allocation N failing for N = 1, 2, ... until it
 * succeeds with no failure injected. A call that fails must leave the old
 * state serving; a call that succeeds despite the failure (it recovered,
 * or the failed allocation was optional) must leave exactly the state and
 * the events of a run without failures. Nothing may leak either way. */
static void every_allocation_point(const change *ch) {
    char before[4096], after[4096], now[4096];
    long want_events;
    world w;
    world_open(&w, ch);
    signature(w.r, w.ctx, before, sizeof before);
    ck_assert_int_eq(ch->fn(w.r, NULL), 0);
    signature(w.r, w.ctx, after, sizeof after);
    want_events = w.events;
    ck_assert_str_ne(before, after); /* the change is visible */
    world_close(&w);

    long points = 0, recovered = 0;
    for (long n = 1;; n++) {
        world_open(&w, ch);
        signature(w.r, w.ctx, now, sizeof now);
        ck_assert_str_eq(now, before);
        w.c.calls = 0;
        w.c.fail_at = n;
        sy_error err;
        memset(&err, 0, sizeof err);
        int rc = ch->fn(w.r, &err);
        bool hit = w.c.calls >= n;
        w.c.fail_at = 0;
        signature(w.r, w.ctx, now, sizeof now);
        if (rc != 0) {
            ck_assert_msg(hit, "failed (%d: %s) without an injected failure",
                          rc, err.message);
            ck_assert_msg(err.code != 0, "allocation %ld: no error code", n);
            ck_assert_msg(strcmp(now, before) == 0,
                          "allocation %ld: failed call changed the state:\n"
                          "%s\nwas\n%s",
                          n, now, before);
            points++;
        } else {
            ck_assert_msg(strcmp(now, after) == 0,
                          "allocation %ld: call succeeded under an injected "
                          "failure but the state is\n%s\nnot\n%s",
                          n, now, after);
            ck_assert_msg(w.events == want_events,
                          "allocation %ld: %ld events, want %ld", n, w.events,
                          want_events);
            recovered += hit;
        }
        world_close(&w);
        ck_assert_msg(w.c.live == 0, "allocation %ld: %ld blocks leaked", n,
                      w.c.live);
        if (rc == 0 && !hit)
            break; /* succeeded with no failure injected: all points seen */
        ck_assert_msg(n < 100000, "did not converge");
    }
    ck_assert_int_gt(points + recovered, 3);
}

#define FAILALLOC_TEST(name, setup, fn)                                        \
    START_TEST(name) {                                                         \
        const change ch = {setup, fn};                                         \
        every_allocation_point(&ch);                                           \
    }                                                                          \
    END_TEST

FAILALLOC_TEST(apply_fails_cleanly_at_every_allocation, NULL, change_apply)
FAILALLOC_TEST(upsert_fails_cleanly_at_every_allocation, NULL, change_upsert)
FAILALLOC_TEST(remove_fails_cleanly_at_every_allocation, NULL, change_remove)
FAILALLOC_TEST(disable_fails_cleanly_at_every_allocation, NULL, change_disable)
FAILALLOC_TEST(enable_fails_cleanly_at_every_allocation, change_disable,
               change_enable)
FAILALLOC_TEST(rollback_fails_cleanly_at_every_allocation, setup_two_versions,
               change_rollback)
FAILALLOC_TEST(instance_update_fails_cleanly_at_every_allocation, NULL,
               change_instances)
FAILALLOC_TEST(instance_deltas_fail_cleanly_at_every_allocation,
               change_instances, change_instance_deltas)
FAILALLOC_TEST(change_set_fails_cleanly_at_every_allocation, NULL,
               change_set_commit)

/* A staged set (staged without failures): its check, then its commit,
 * with allocation N failing. The check publishes nothing whatever fails
 * (SY_ENOMEM or its clean answer, its report freed without a leak); a
 * commit that fails leaves the old state and the same set, committed
 * again, publishes exactly what a run without failures publishes, with
 * the same events (a failed commit claims nothing). */
START_TEST(change_set_check_and_retried_commit_fail_cleanly) {
    const change ch = {NULL, change_set_commit};
    char before[4096], after[4096], now[4096];
    world w;
    world_open(&w, &ch);
    signature(w.r, w.ctx, before, sizeof before);
    ck_assert_int_eq(change_set_commit(w.r, NULL), 0);
    signature(w.r, w.ctx, after, sizeof after);
    long want_events = w.events;
    world_close(&w);
    long check_points = 0, commit_points = 0;
    for (long n = 1;; n++) {
        world_open(&w, &ch);
        sy_change_set *cs;
        ck_assert_int_eq(sy_change_set_new(w.r, &cs, NULL), 0);
        ck_assert_int_eq(stage_every_kind(cs, NULL), 0);
        /* the check */
        sy_report *rep = NULL;
        sy_error err;
        w.c.calls = 0;
        w.c.fail_at = n;
        int rc = sy_router_check(w.r, cs, &rep, &err);
        bool hit = w.c.calls >= n;
        w.c.fail_at = 0;
        sy_report_free(rep);
        ck_assert_msg(rc == 0 || (hit && rc == SY_ENOMEM),
                      "check, allocation %ld: %d (%s)", n, rc,
                      rc ? err.message : "");
        check_points += rc != 0;
        signature(w.r, w.ctx, now, sizeof now);
        ck_assert_msg(strcmp(now, before) == 0,
                      "check, allocation %ld: the state changed", n);
        ck_assert_int_eq(w.events, 0);
        /* the commit, and once more when it failed */
        w.c.calls = 0;
        w.c.fail_at = n;
        rc = sy_router_commit(w.r, cs, NULL, &err);
        bool chit = w.c.calls >= n;
        w.c.fail_at = 0;
        if (rc) {
            ck_assert_msg(chit,
                          "commit failed (%d: %s) without an injected "
                          "failure",
                          rc, err.message);
            signature(w.r, w.ctx, now, sizeof now);
            ck_assert_msg(strcmp(now, before) == 0,
                          "commit, allocation %ld: a failed commit changed "
                          "the state",
                          n);
            commit_points++;
            w.events = 0;
            ck_assert_msg(sy_router_commit(w.r, cs, NULL, &err) == 0,
                          "allocation %ld: the retried commit: %s", n,
                          err.message);
        }
        signature(w.r, w.ctx, now, sizeof now);
        ck_assert_msg(strcmp(now, after) == 0,
                      "allocation %ld: the state after the commit is\n%s\n"
                      "not\n%s",
                      n, now, after);
        ck_assert_msg(w.events == want_events,
                      "allocation %ld: %ld events, want %ld", n, w.events,
                      want_events);
        sy_change_set_free(cs);
        world_close(&w);
        ck_assert_msg(w.c.live == 0, "allocation %ld: %ld blocks leaked", n,
                      w.c.live);
        if (!hit && !chit)
            break; /* neither call reached allocation n: all points seen */
        ck_assert_msg(n < 100000, "did not converge");
    }
    ck_assert_int_gt(check_points, 3);
    ck_assert_int_gt(commit_points, 3);
}
END_TEST

/* ---- the request side: a target and outcome reports ---- */

/* An lb:// route whose RewritePath output outgrows its first buffer (so
 * pcre2_substitute is asked again with more room) and two instances. */
static const char *DOC_TARGET =
    "[{\"id\":\"t\",\"uri\":\"lb://svc\",\"predicates\":[\"Path=/t/**\"],"
    "\"filters\":[{\"name\":\"RewritePath\",\"args\":{\"regexp\":"
    "\"/t/(?<rest>.*)\",\"replacement\":"
    "\"/r/${rest}/${rest}/${rest}/${rest}\"}}]}]";
#define TARGET_PATH "/t/0123456789abcdefghijklmnopqrstuvwxyz"
#define TARGET_REST "0123456789abcdefghijklmnopqrstuvwxyz"
#define TARGET_WANT                                                            \
    "/r/" TARGET_REST "/" TARGET_REST "/" TARGET_REST "/" TARGET_REST

/* Match TARGET_PATH in a fresh context whose allocation N fails (0:
 * none) and take its target: the result, *t and whether allocation N was
 * reached. The context stays open in *ctx (its arena holds the target). */
static int target_under(sy_router *r, counting *c, const sy_allocator *al,
                        long n, sy_snapshot *s, sy_match_ctx **ctx,
                        sy_target *t, bool *hit) {
    ck_assert_int_eq(sy_match_ctx_new(al, ctx, NULL), 0);
    c->calls = 0;
    c->fail_at = n;
    sy_request req = SY_REQUEST_INIT;
    req.method = (sy_str){"GET", 3};
    req.host = (sy_str){"h", 1};
    req.path = (sy_str){TARGET_PATH, strlen(TARGET_PATH)};
    sy_match *m = NULL;
    int rc = sy_snapshot_match(s, *ctx, &req, &m);
    if (rc == 0) {
        ck_assert_ptr_nonnull(m);
        sy_error e;
        rc = sy_match_target(m, NULL, 0, t, &e);
        ck_assert_int_eq(sy_match_status(m), rc ? sy_match_status(m) : 0);
    }
    *hit = n && c->calls >= n;
    c->fail_at = 0;
    (void)r;
    return rc;
}

/* A router with DOC_TARGET and svc's instances (options `o`). */
static sy_router *target_router(const sy_router_options *o) {
    sy_router *r;
    ck_assert_int_eq(sy_router_new(o, &r, NULL), 0);
    ck_assert_int_eq(sy_router_add_source(r, "main", NULL), 0);
    ck_assert_int_eq(
        sy_router_apply(r, "main", DOC_TARGET, strlen(DOC_TARGET), NULL, NULL),
        0);
    ck_assert_int_eq(change_instances(r, NULL), 0);
    return r;
}

START_TEST(target_fails_cleanly_at_every_allocation) {
    counting c = {0};
    sy_allocator al = sy_test_allocator(&c);
    sy_router_options o = SY_ROUTER_OPTIONS_INIT;
    sy_router *r = target_router(&o);
    sy_snapshot *s = sy_router_acquire(r);
    long points = 0;
    for (long n = 1;; n++) {
        sy_match_ctx *ctx;
        sy_target t;
        bool hit;
        int rc = target_under(r, &c, &al, n, s, &ctx, &t, &hit);
        if (rc) {
            ck_assert_msg(hit, "failed (%d) without an injected failure", rc);
            ck_assert_msg(rc == SY_ENOMEM,
                          "allocation %ld: %d (%s), not SY_ENOMEM", n, rc,
                          sy_strerror(rc));
            points++;
        } else {
            /* recovered or not reached: exactly the target, never an
             * answer in its place */
            ck_assert_msg(t.path.len == strlen(TARGET_WANT) &&
                              memcmp(t.path.ptr, TARGET_WANT, t.path.len) == 0,
                          "allocation %ld: path %.*s", n, (int)t.path.len,
                          t.path.ptr);
            ck_assert_ptr_nonnull(t.instance_id);
        }
        sy_match_ctx_free(ctx);
        ck_assert_msg(c.live == 0, "allocation %ld: %ld blocks leaked", n,
                      c.live);
        if (rc == 0 && !hit)
            break;
        ck_assert_msg(n < 100000, "did not converge");
    }
    ck_assert_int_gt(points, 3);
    sy_snapshot_release(s);
    sy_router_free(r);
}
END_TEST

/* Outcome reports allocate nothing: with the first allocation of the
 * router's allocator failing, a failure still ejects and a success after
 * the ejection time still clears it. */
static _Atomic int64_t clock_now = 1000000;
static int64_t test_clock(void *d) {
    (void)d;
    return clock_now;
}

START_TEST(outcome_reports_allocate_nothing) {
    counting c = {0};
    sy_allocator al = sy_test_allocator(&c);
    sy_router_options o = SY_ROUTER_OPTIONS_INIT;
    o.allocator = &al;
    o.clock_ms = test_clock;
    o.outlier.consecutive_failures = 1;
    o.outlier.base_ejection_ms = 1000;
    sy_router *r = target_router(&o);
    sy_snapshot *s = sy_router_acquire(r);
    sy_match_ctx *ctx;
    sy_target t;
    bool hit;
    counting cc = {0};
    sy_allocator cal = sy_test_allocator(&cc);
    ck_assert_int_eq(target_under(r, &cc, &cal, 0, s, &ctx, &t, &hit), 0);
    c.calls = 0;
    c.fail_at = 1;
    sy_metrics m;
    sy_router_report_outcome(r, &t, SY_OUTCOME_CONNECT_FAILURE);
    sy_router_metrics(r, &m);
    ck_assert_uint_eq(m.ejections, 1);
    clock_now += 1000;
    sy_router_report_outcome(r, &t, SY_OUTCOME_SUCCESS);
    sy_router_report_outcome(r, &t, SY_OUTCOME_CONNECT_FAILURE);
    sy_router_metrics(r, &m);
    ck_assert_uint_eq(m.ejections, 2); /* cleared, then ejected again */
    ck_assert_int_eq(c.calls, 0);
    c.fail_at = 0;
    sy_match_ctx_free(ctx);
    sy_snapshot_release(s);
    sy_router_free(r);
    ck_assert_int_eq(c.live, 0);
}
END_TEST

/* ---- an id table that grows, and its move ---- */

/* 3,264 routes fill their id table (4,096 entries at most 80 %): the next
 * new id grows it, and its entries move over the next publishes. */
enum { GROW_N = 3264 };

static int grow_add(sy_router *r, sy_error *err) {
    const char *route = "{\"id\":\"x1\",\"uri\":\"http://x:80\","
                        "\"predicates\":[\"Path=/x1\"]}";
    return sy_router_upsert_route(r, "main", route, strlen(route), err);
}

/* One publish while the move runs: new ids, replaced and removed ones
 * spread over the old table (moved and not). */
static int grow_move(sy_router *r, sy_error *err) {
    sy_change_set *cs;
    int rc = sy_change_set_new(r, &cs, err);
    if (rc)
        return rc;
    char buf[160];
    for (int i = 0; !rc && i < 12; i++) {
        int k = i * 271 + 5, len;
        if (i % 3 == 2) {
            snprintf(buf, sizeof buf, "r%d", k);
            rc = sy_change_set_remove_route(cs, buf, err);
            continue;
        }
        len = snprintf(buf, sizeof buf,
                       "{\"id\":\"%s%d\",\"uri\":\"http://y:80\","
                       "\"predicates\":[\"Path=/y%d\"]}",
                       i % 3 ? "r" : "y", k, k);
        rc = sy_change_set_upsert_route(cs, "main", buf, (size_t)len, err);
    }
    if (!rc)
        rc = sy_router_commit(r, cs, NULL, err);
    sy_change_set_free(cs);
    return rc;
}

/* What the id table answers: every route in rank order found by its id
 * (the same route), an absent id not, and the fingerprint. */
static void grow_signature(sy_router *r, char *out, size_t cap) {
    sy_snapshot *s = sy_router_acquire(r);
    size_t n = sy_snapshot_route_count(s), found = 0;
    for (size_t i = 0; i < n; i++) {
        const sy_route *rt = sy_snapshot_route_at(s, i);
        found += sy_snapshot_find_route(s, sy_route_id(rt), NULL) == rt;
    }
    snprintf(out, cap, "n=%zu found=%zu none=%d fp=%llx", n, found,
             sy_snapshot_find_route(s, "x-none", NULL) != NULL,
             (unsigned long long)sy_snapshot_fingerprint(s));
    sy_snapshot_release(s);
}

static void grow_open(world *w, int (*setup)(sy_router *, sy_error *)) {
    memset(w, 0, sizeof *w);
    w->al = sy_test_allocator(&w->c);
    sy_router_options o = SY_ROUTER_OPTIONS_INIT;
    o.allocator = &w->al;
    ck_assert_int_eq(sy_router_new(&o, &w->r, NULL), 0);
    ck_assert_int_eq(sy_router_add_source(w->r, "main", NULL), 0);
    size_t cap = (size_t)GROW_N * 96 + 16, len = 0;
    char *d = malloc(cap);
    ck_assert_ptr_nonnull(d);
    len += (size_t)snprintf(d + len, cap - len, "[");
    for (int i = 0; i < GROW_N; i++)
        len += (size_t)snprintf(d + len, cap - len,
                                "%s{\"id\":\"r%d\",\"uri\":\"http://b\","
                                "\"predicates\":[\"Path=/p%d\"]}",
                                i ? "," : "", i, i);
    len += (size_t)snprintf(d + len, cap - len, "]");
    ck_assert_int_eq(sy_router_apply(w->r, "main", d, len, NULL, NULL), 0);
    free(d);
    if (setup)
        ck_assert_int_eq(setup(w->r, NULL), 0);
}

/* As every_allocation_point, for the id table's growth and move. */
static void grow_every_allocation_point(int (*setup)(sy_router *, sy_error *),
                                        int (*fn)(sy_router *, sy_error *)) {
    char before[256], after[256], now[256];
    world w;
    grow_open(&w, setup);
    grow_signature(w.r, before, sizeof before);
    ck_assert_int_eq(fn(w.r, NULL), 0);
    grow_signature(w.r, after, sizeof after);
    ck_assert_str_ne(before, after);
    sy_router_free(w.r);
    long points = 0;
    for (long n = 1;; n++) {
        grow_open(&w, setup);
        w.c.calls = 0;
        w.c.fail_at = n;
        sy_error err;
        memset(&err, 0, sizeof err);
        int rc = fn(w.r, &err);
        bool hit = w.c.calls >= n;
        w.c.fail_at = 0;
        grow_signature(w.r, now, sizeof now);
        ck_assert_str_eq(now, rc ? before : after);
        points += rc != 0;
        /* the next publishes finish the move: all found still */
        for (int i = 0; i < 6; i++) {
            char route[128];
            int len = snprintf(route, sizeof route,
                               "{\"id\":\"z%d\",\"uri\":\"http://z:80\","
                               "\"predicates\":[\"Path=/z%d\"]}",
                               i, i);
            ck_assert_int_eq(
                sy_router_upsert_route(w.r, "main", route, (size_t)len, NULL),
                0);
        }
        grow_signature(w.r, now, sizeof now);
        ck_assert_ptr_nonnull(strstr(now, "none=0"));
        ck_assert_msg(strstr(now, "found=") &&
                          atol(strstr(now, "found=") + 6) ==
                              atol(strstr(now, "n=") + 2),
                      "%s", now);
        sy_router_free(w.r);
        ck_assert_msg(w.c.live == 0, "allocation %ld: %ld blocks leaked", n,
                      w.c.live);
        if (rc == 0 && !hit)
            break;
        ck_assert_msg(n < 100000, "did not converge");
    }
    ck_assert_int_gt(points, 3);
}

START_TEST(id_table_growth_fails_cleanly_at_every_allocation) {
    grow_every_allocation_point(NULL, grow_add);
}
END_TEST

START_TEST(id_table_move_fails_cleanly_at_every_allocation) {
    grow_every_allocation_point(grow_add, grow_move);
}
END_TEST

int main(void) {
    Suite *s = suite_create("failalloc");
    TCase *tc = tcase_create("failalloc");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, apply_fails_cleanly_at_every_allocation);
    tcase_add_test(tc, upsert_fails_cleanly_at_every_allocation);
    tcase_add_test(tc, remove_fails_cleanly_at_every_allocation);
    tcase_add_test(tc, disable_fails_cleanly_at_every_allocation);
    tcase_add_test(tc, enable_fails_cleanly_at_every_allocation);
    tcase_add_test(tc, rollback_fails_cleanly_at_every_allocation);
    tcase_add_test(tc, instance_update_fails_cleanly_at_every_allocation);
    tcase_add_test(tc, instance_deltas_fail_cleanly_at_every_allocation);
    tcase_add_test(tc, change_set_fails_cleanly_at_every_allocation);
    tcase_add_test(tc, change_set_check_and_retried_commit_fail_cleanly);
    tcase_add_test(tc, target_fails_cleanly_at_every_allocation);
    tcase_add_test(tc, outcome_reports_allocate_nothing);
    tcase_add_test(tc, id_table_growth_fails_cleanly_at_every_allocation);
    tcase_add_test(tc, id_table_move_fails_cleanly_at_every_allocation);
    suite_add_tcase(s, tc);
    return sy_test_run(s);
}
