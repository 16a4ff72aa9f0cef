/* test_api_edges.c - edge cases of the public API: each test pins one
 * defect that was fixed, through the public API. */
#include "testutil.h"

#include "switchyard.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static sy_router *router_new(const sy_router_options *o, const char *source) {
    sy_router *r = NULL;
    sy_error e;
    ck_assert_msg(sy_router_new(o, &r, &e) == 0, "%s", e.message);
    if (source)
        ck_assert_int_eq(sy_router_add_source(r, source, NULL), 0);
    return r;
}

static int apply(sy_router *r, const char *source, const char *doc,
                 sy_error *err) {
    return sy_router_apply(r, source, doc, strlen(doc), NULL, err);
}

/* Match method/path on the live snapshot; the no-match reason in *why. */
static const char *match(sy_router *r, const char *method, const char *path,
                         const sy_header *h, size_t nh, sy_nomatch *why) {
    static char id[64];
    sy_request req = SY_REQUEST_INIT;
    req.method = (sy_str){method, strlen(method)};
    req.path = (sy_str){path, strlen(path)};
    req.host = (sy_str){"h", 1};
    req.headers = h;
    req.header_count = nh;
    sy_match_ctx *ctx;
    ck_assert_int_eq(sy_match_ctx_new(NULL, &ctx, NULL), 0);
    sy_snapshot *s = sy_router_acquire(r);
    sy_match *m = NULL;
    ck_assert_int_eq(sy_snapshot_match(s, ctx, &req, &m), 0);
    snprintf(id, sizeof id, "%s", m ? sy_route_id(sy_match_route(m)) : "");
    if (why)
        *why = sy_match_ctx_nomatch(ctx, NULL);
    sy_snapshot_release(s);
    sy_match_ctx_free(ctx);
    return id;
}

/* (a+)+b against "aaa...bx" backtracks until a match limit stops it. */
#define EVIL "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaabx"

/* The 405 check re-tests a method-missed route's other predicates: those
 * regexes are part of the request and draw on its CPU budget too. */
START_TEST(the_405_check_draws_on_the_request_budget) {
    sy_router_options o = SY_ROUTER_OPTIONS_INIT;
    o.regex_budget = 50000; /* far below one backtracking run */
    sy_router *r = router_new(&o, "s");
    ck_assert_int_eq(
        apply(r, "s",
              "[{\"id\":\"m\",\"uri\":\"http://m\",\"predicates\":"
              "[\"Path=/x\",\"Method=POST\",\"Header=X-A, (a+)+b\"]}]",
              NULL),
        0);
    sy_header h = {{"X-A", 3}, {EVIL, strlen(EVIL)}};
    sy_nomatch why;
    ck_assert_str_eq(match(r, "GET", "/x", &h, 1, &why), "");
    ck_assert_int_eq(why, SY_NOMATCH_BUDGET);
    /* a cheap header: the route's other predicates hold, 405 */
    h.value = (sy_str){"ab", 2};
    ck_assert_str_eq(match(r, "GET", "/x", &h, 1, &why), "");
    ck_assert_int_eq(why, SY_NOMATCH_METHOD);
    sy_router_free(r);
}
END_TEST

/* A commit whose every change held but whose publish was refused
 * (max_retired) must not blame change 0: no change failed. */
START_TEST(a_refused_publish_blames_no_change) {
    sy_router_options o = SY_ROUTER_OPTIONS_INIT;
    o.max_retired = 1;
    sy_router *r = router_new(&o, "a");
    ck_assert_int_eq(sy_router_add_source(r, "b", NULL), 0);
    sy_snapshot *h0 = sy_router_acquire(r);
    ck_assert_int_eq(
        apply(r, "a", "[{\"id\":\"a1\",\"uri\":\"http://a:80\"}]", NULL), 0);
    sy_snapshot *h1 = sy_router_acquire(r);
    sy_change_set *cs;
    ck_assert_int_eq(sy_change_set_new(r, &cs, NULL), 0);
    const char *da = "[{\"id\":\"a2\",\"uri\":\"http://a:80\"}]";
    const char *db = "[{\"id\":\"b1\",\"uri\":\"http://b:80\"}]";
    ck_assert_int_eq(sy_change_set_apply(cs, "a", da, strlen(da), NULL), 0);
    ck_assert_int_eq(sy_change_set_apply(cs, "b", db, strlen(db), NULL), 0);
    sy_report *rep = NULL;
    sy_error err;
    ck_assert_int_eq(sy_router_commit(r, cs, &rep, &err), SY_EBUSY);
    ck_assert_msg(strncmp(err.message, "change 0", 8) != 0, "%s", err.message);
    ck_assert_ptr_nonnull(rep);
    ck_assert_int_eq(sy_report_failed_change(rep), -1);
    /* both sources tried and failed, not only the first */
    sy_source_status st;
    for (size_t i = 0; i < 2; i++) {
        ck_assert_int_eq(sy_router_source_status(r, i, &st, NULL), 0);
        ck_assert_int_eq(st.last_result, SY_EBUSY);
        ck_assert_uint_eq(st.failed_count, 1);
    }
    sy_report_free(rep);
    sy_change_set_free(cs);
    sy_snapshot_release(h0);
    sy_snapshot_release(h1);
    sy_router_free(r);
}
END_TEST

START_TEST(a_null_router_is_named_as_such) {
    sy_error e;
    ck_assert_int_eq(sy_router_add_source(NULL, "s", &e), SY_EINVAL);
    ck_assert_msg(strstr(e.message, "router") != NULL, "%s", e.message);
}
END_TEST

/* A route with a Method predicate but no Path or Host: a request with
 * another method is a 405 for the indexed matcher as for the linear one. */
START_TEST(a_method_only_route_answers_405_not_404) {
    sy_router *r = router_new(NULL, "s");
    ck_assert_int_eq(apply(r, "s",
                           "[{\"id\":\"m\",\"uri\":\"http://m\","
                           "\"predicates\":[\"Method=POST\"]}]",
                           NULL),
                     0);
    sy_nomatch why;
    ck_assert_str_eq(match(r, "POST", "/x", NULL, 0, &why), "m");
    ck_assert_int_eq(why, SY_NOMATCH_NONE);
    sy_request req = SY_REQUEST_INIT;
    req.method = (sy_str){"GET", 3};
    req.path = (sy_str){"/x", 2};
    req.host = (sy_str){"h", 1};
    sy_match_ctx *ctx;
    ck_assert_int_eq(sy_match_ctx_new(NULL, &ctx, NULL), 0);
    sy_snapshot *s = sy_router_acquire(r);
    sy_match *m = NULL;
    sy_str allow;
    ck_assert_int_eq(sy_snapshot_match_linear(s, ctx, &req, &m), 0);
    ck_assert_ptr_null(m);
    ck_assert_int_eq(sy_match_ctx_nomatch(ctx, &allow), SY_NOMATCH_METHOD);
    ck_assert_int_eq(sy_snapshot_match(s, ctx, &req, &m), 0);
    ck_assert_ptr_null(m);
    ck_assert_int_eq(sy_match_ctx_nomatch(ctx, &allow), SY_NOMATCH_METHOD);
    ck_assert_uint_eq(allow.len, 4);
    ck_assert(memcmp(allow.ptr, "POST", 4) == 0);
    sy_snapshot_release(s);
    sy_match_ctx_free(ctx);
    sy_router_free(r);
}
END_TEST

/* The Host header of an instance given with a bracketed IPv6 address is
 * "[v6]:port", not bracketed twice; the host to connect to is the bare
 * address (the gateway's uv_ip6_addr and getaddrinfo, and nginx's
 * "[%s]:port", failed every connection to "[::1]"). */
START_TEST(a_bracketed_ipv6_instance_is_not_bracketed_twice) {
    sy_router *r = router_new(NULL, "s");
    ck_assert_int_eq(
        apply(r, "s", "[{\"id\":\"k\",\"uri\":\"lb://svc\"}]", NULL), 0);
    const char *hosts[2] = {"[::1]", "::1"};
    for (size_t i = 0; i < 2; i++) {
        sy_instance in = {"i", hosts[i],       8080, false,
                          1,   SY_INSTANCE_UP, NULL, 0};
        ck_assert_int_eq(sy_router_set_instances(r, "svc", &in, 1, NULL, NULL),
                         0);
        sy_request req = SY_REQUEST_INIT;
        req.method = (sy_str){"GET", 3};
        req.path = (sy_str){"/", 1};
        req.host = (sy_str){"h", 1};
        sy_match_ctx *ctx;
        ck_assert_int_eq(sy_match_ctx_new(NULL, &ctx, NULL), 0);
        sy_snapshot *s = sy_router_acquire(r);
        sy_match *m = NULL;
        ck_assert_int_eq(sy_snapshot_match(s, ctx, &req, &m), 0);
        ck_assert_ptr_nonnull(m);
        sy_target t;
        ck_assert_int_eq(sy_match_target(m, NULL, 0, &t, NULL), 0);
        ck_assert_uint_eq(t.host_header.len, strlen("[::1]:8080"));
        ck_assert(memcmp(t.host_header.ptr, "[::1]:8080", 10) == 0);
        ck_assert_str_eq(t.host, "::1");
        sy_snapshot_release(s);
        sy_match_ctx_free(ctx);
    }
    sy_router_free(r);
}
END_TEST

static int not_bumped_logs;
static void count_not_bumped(void *d, sy_log_level lvl, const char *msg) {
    (void)d;
    (void)lvl;
    if (strstr(msg, "did not bump"))
        not_bumped_logs++;
}

/* "applied again ... did not bump the version" is logged only when the
 * document was applied: not by a check, not by a commit that failed. */
START_TEST(version_not_bumped_is_logged_only_when_applied) {
    sy_router_options o = SY_ROUTER_OPTIONS_INIT;
    o.on_log = count_not_bumped;
    sy_router *r = router_new(&o, "a");
    ck_assert_int_eq(apply(r, "a",
                           "{\"version\":\"1\",\"routes\":[{\"id\":\"r1\","
                           "\"uri\":\"http://a:80\"}]}",
                           NULL),
                     0);
    const char *again = "{\"version\":\"1\",\"routes\":[{\"id\":\"r2\","
                        "\"uri\":\"http://a:80\"}]}";
    not_bumped_logs = 0;
    sy_change_set *cs;
    ck_assert_int_eq(sy_change_set_new(r, &cs, NULL), 0);
    ck_assert_int_eq(sy_change_set_apply(cs, "a", again, strlen(again), NULL),
                     0);
    ck_assert_int_eq(sy_router_check(r, cs, NULL, NULL), 0);
    ck_assert_int_eq(not_bumped_logs, 0);
    ck_assert_int_eq(sy_change_set_remove_route(cs, "no-such-route", NULL), 0);
    ck_assert_int_eq(sy_router_commit(r, cs, NULL, NULL), SY_ENOTFOUND);
    ck_assert_int_eq(not_bumped_logs, 0);
    sy_change_set_free(cs);
    ck_assert_int_eq(apply(r, "a", again, NULL), 0);
    ck_assert_int_eq(not_bumped_logs, 1);
    sy_router_free(r);
}
END_TEST

/* SetRequestHostHeader: the target's Host header is the one the filter
 * set (SCG keeps it upstream), not the client's. */
START_TEST(set_request_host_header_reaches_the_target) {
    sy_router *r = router_new(NULL, "s");
    ck_assert_int_eq(
        apply(r, "s",
              "[{\"id\":\"k\",\"uri\":\"http://up:8080\","
              "\"predicates\":[\"Path=/k\"],"
              "\"filters\":[\"SetRequestHostHeader=example.org\"]},"
              "{\"id\":\"p\",\"uri\":\"http://up:8080\","
              "\"predicates\":[\"Path=/p\"],"
              "\"filters\":[\"PreserveHostHeader\"]}]",
              NULL),
        0);
    const char *paths[2] = {"/k", "/p"}, *want[2] = {"example.org", "client"};
    for (size_t i = 0; i < 2; i++) {
        sy_request req = SY_REQUEST_INIT;
        req.method = (sy_str){"GET", 3};
        req.path = (sy_str){paths[i], strlen(paths[i])};
        req.host = (sy_str){"client", 6};
        sy_match_ctx *ctx;
        ck_assert_int_eq(sy_match_ctx_new(NULL, &ctx, NULL), 0);
        sy_snapshot *s = sy_router_acquire(r);
        sy_match *m = NULL;
        ck_assert_int_eq(sy_snapshot_match(s, ctx, &req, &m), 0);
        ck_assert_ptr_nonnull(m);
        ck_assert_str_eq(sy_route_id(sy_match_route(m)), i ? "p" : "k");
        sy_target t;
        ck_assert_int_eq(sy_match_target(m, NULL, 0, &t, NULL), 0);
        ck_assert_msg(
            t.host_header.len == strlen(want[i]) &&
                memcmp(t.host_header.ptr, want[i], t.host_header.len) == 0,
            "%s: Host %.*s, want %s", paths[i], (int)t.host_header.len,
            t.host_header.ptr, want[i]);
        for (size_t k = 0; k < t.header_count; k++)
            ck_assert(t.headers[k].name.len != 4 ||
                      strncasecmp(t.headers[k].name.ptr, "host", 4) != 0);
        sy_snapshot_release(s);
        sy_match_ctx_free(ctx);
    }
    sy_router_free(r);
}
END_TEST

/* sy_parse_options grows at the end (host_runs came in 0.3): a host built
 * against 0.2 passes the 0.2 size. sy_router_new and the single-route
 * parse took it; sy_document_parse refused it as "size is not set". The
 * fields past that size are never read: host_runs below would refuse the
 * Retry if it were. */
START_TEST(parse_options_of_an_older_size_are_accepted) {
    static const char *const runs_nothing[] = {NULL};
    const char *doc = "[{\"id\":\"a\",\"uri\":\"http://a\","
                      "\"filters\":[\"Retry=3\"]}]";
    sy_parse_options o = SY_PARSE_OPTIONS_INIT;
    o.host_runs = runs_nothing;
    o.size = (uint32_t)offsetof(sy_parse_options, host_runs);
    sy_document *d = NULL;
    sy_error e;
    ck_assert_msg(sy_document_parse(doc, strlen(doc), &o, &d, &e) == 0, "%s",
                  e.message);
    ck_assert_uint_eq(sy_document_route_count(d), 1);
    sy_document_free(d);
    /* the full size reads host_runs, and a size below the 0.2 struct is
     * still refused, located at the options */
    o.size = sizeof o;
    ck_assert_int_eq(sy_document_parse(doc, strlen(doc), &o, &d, &e),
                     SY_ENOTRUN);
    o.size = (uint32_t)offsetof(sy_parse_options, registry);
    ck_assert_int_eq(sy_document_parse(doc, strlen(doc), &o, &d, &e),
                     SY_EINVAL);
    ck_assert_ptr_null(d);
    ck_assert_msg(strstr(e.message, "sy_parse_options.size") != NULL, "%s",
                  e.message);
}
END_TEST

/* A call that fails leaves its out-pointer NULL, as sy_router_new and
 * sy_document_parse always did: a host that tests the pointer (the
 * README's `if (!m)` after a match) must not take a stale result of an
 * earlier match on the context, or garbage, for a route. */
START_TEST(a_failed_call_leaves_its_out_pointer_null) {
    void *const stale = (void *)&stale;
    sy_router *r = router_new(NULL, "s");
    ck_assert_int_eq(apply(r, "s",
                           "[{\"id\":\"a\",\"uri\":\"http://a\","
                           "\"predicates\":[\"Path=/a\"]}]",
                           NULL),
                     0);
    sy_snapshot *s = sy_router_acquire(r);
    sy_match_ctx *ctx;
    ck_assert_int_eq(sy_match_ctx_new(NULL, &ctx, NULL), 0);
    sy_request req = SY_REQUEST_INIT;
    req.method = (sy_str){"GET", 3};
    req.path = (sy_str){"/a", 2};
    sy_match *m = NULL;
    ck_assert_int_eq(sy_snapshot_match(s, ctx, &req, &m), 0);
    ck_assert_ptr_nonnull(m); /* the result a failed match must not leave */
    req.header_count = SY_MAX_REQUEST_HEADERS + 1;
    ck_assert_int_eq(sy_snapshot_match(s, ctx, &req, &m), SY_ELIMIT);
    ck_assert_ptr_null(m);
    m = stale;
    ck_assert_int_eq(sy_snapshot_match_linear(s, ctx, &req, &m), SY_ELIMIT);
    ck_assert_ptr_null(m);
    req.header_count = 0;
    req.size = 4; /* shorter than any sy_request */
    m = stale;
    ck_assert_int_eq(sy_snapshot_match(s, ctx, &req, &m), SY_EINVAL);
    ck_assert_ptr_null(m);
    m = stale;
    ck_assert_int_eq(sy_snapshot_match(s, NULL, &req, &m), SY_EINVAL);
    ck_assert_ptr_null(m);

    sy_diff *d = stale;
    ck_assert_int_eq(sy_diff_snapshots(NULL, s, NULL, &d, NULL), SY_EINVAL);
    ck_assert_ptr_null(d);
    d = stale;
    ck_assert_int_eq(sy_diff_documents(NULL, NULL, NULL, &d, NULL), SY_EINVAL);
    ck_assert_ptr_null(d);
    sy_change_set *cs = stale;
    ck_assert_int_eq(sy_change_set_new(NULL, &cs, NULL), SY_EINVAL);
    ck_assert_ptr_null(cs);
    static uint64_t mem[8];
    sy_policy_store *st = stale;
    ck_assert_int_eq(sy_policy_store_init(mem, sizeof mem, 64, 16, &st, NULL),
                     SY_ETOOSMALL);
    ck_assert_ptr_null(st);
    st = stale;
    ck_assert_int_eq(sy_policy_store_attach(mem, sizeof mem, &st, NULL),
                     SY_EINVAL);
    ck_assert_ptr_null(st);

    sy_snapshot_release(s);
    sy_match_ctx_free(ctx);
    sy_router_free(r);
}
END_TEST

/* A failed apply gives no report "when not possible" (an unknown source:
 * *report NULL), and sy_report_diff has no diff for an instance change or
 * a skipped document: the accessors a host calls on what it got answer
 * "nothing" for NULL, as sy_report_failed_change and sy_report_part did,
 * instead of crashing the host's error path. */
START_TEST(report_and_diff_accessors_take_null) {
    sy_router *r = router_new(NULL, "s");
    sy_report *rep = (sy_report *)&rep;
    ck_assert_int_eq(sy_router_apply(r, "nope", "[]", 2, &rep, NULL),
                     SY_ENOTFOUND);
    ck_assert_ptr_null(rep);
    ck_assert_uint_eq(sy_report_issue_count(rep), 0);
    ck_assert_ptr_null(sy_report_issue(rep, 0));
    ck_assert_ptr_null(sy_report_source(rep));
    ck_assert_ptr_null(sy_report_version(rep));
    ck_assert(!sy_report_skipped(rep));
    ck_assert_uint_eq(sy_report_generation(rep), 0);
    ck_assert_ptr_null(sy_report_diff(rep));
    ck_assert_uint_eq(sy_report_parse_us(rep), 0);
    ck_assert_uint_eq(sy_report_publish_us(rep), 0);
    ck_assert_uint_eq(sy_report_instances_added_count(rep), 0);
    ck_assert_ptr_null(sy_report_instance_added(rep, 0));
    ck_assert_uint_eq(sy_report_instances_removed_count(rep), 0);
    ck_assert_ptr_null(sy_report_instance_removed(rep, 0));
    ck_assert_uint_eq(sy_report_instances_changed_count(rep), 0);
    ck_assert_ptr_null(sy_report_instance_changed(rep, 0));
    ck_assert_int_eq(sy_report_failed_change(rep), -1);

    sy_instance in = {.id = "i1", .host = "10.0.0.1", .port = 80};
    ck_assert_int_eq(sy_router_set_instances(r, "svc", &in, 1, &rep, NULL), 0);
    const sy_diff *d = sy_report_diff(rep); /* an instance change: none */
    ck_assert_ptr_null(d);
    ck_assert_uint_eq(sy_diff_added_count(d), 0);
    ck_assert_ptr_null(sy_diff_added(d, 0));
    ck_assert_uint_eq(sy_diff_removed_count(d), 0);
    ck_assert_ptr_null(sy_diff_removed(d, 0));
    ck_assert_uint_eq(sy_diff_updated_count(d), 0);
    unsigned changed = 7;
    ck_assert_ptr_null(sy_diff_updated(d, 0, &changed));
    ck_assert_uint_eq(changed, 0);
    ck_assert_uint_eq(sy_diff_unchanged_count(d), 0);
    ck_assert_uint_eq(sy_diff_reordered_count(d), 0);
    ck_assert_ptr_null(sy_diff_reordered(d, 0));
    ck_assert_uint_eq(sy_report_instances_added_count(rep), 1);
    sy_report_free(rep);
    sy_router_free(r);
}
END_TEST

static int load_nothing(void *data, const char *source, sy_loaded *out,
                        sy_error *err) {
    (void)data, (void)source, (void)out, (void)err;
    return -1;
}

/* The single calls are one-change sets: a NULL or empty source name or
 * route id is SY_EINVAL there as when staged (sy_change_set_*), not "not
 * found", and the message names the argument (it said "unknown source
 * ''", or printed a NULL through %s). */
START_TEST(a_null_or_empty_name_is_einval_as_when_staged) {
    sy_router *r = router_new(NULL, "s");
    const char *route = "{\"id\":\"a\",\"uri\":\"http://a\"}";
    sy_change_set *cs;
    ck_assert_int_eq(sy_change_set_new(r, &cs, NULL), 0);
    const char *names[2] = {NULL, ""};
    for (int k = 0; k < 2; k++) {
        const char *n = names[k];
        sy_error e;
        int rc[7] = {
            sy_router_apply(r, n, "[]", 2, NULL, &e),
            sy_router_rollback(r, n, NULL, NULL, &e),
            sy_router_upsert_route(r, n, route, strlen(route), &e),
            sy_router_remove_route(r, n, &e),
            sy_router_set_route_enabled(r, n, false, &e),
            sy_router_set_loader(r, n, load_nothing, NULL, &e),
            sy_router_notify(r, n, &e),
        };
        for (int i = 0; i < 7; i++)
            ck_assert_msg(rc[i] == SY_EINVAL, "call %d, name %s: %d", i,
                          n ? "\"\"" : "NULL", rc[i]);
        ck_assert_msg(strstr(e.message, "NULL or empty") != NULL, "%s",
                      e.message);
        ck_assert_int_eq(sy_change_set_apply(cs, n, "[]", 2, &e), SY_EINVAL);
        ck_assert_int_eq(sy_change_set_remove_route(cs, n, &e), SY_EINVAL);
    }
    ck_assert_uint_eq(sy_change_set_count(cs), 0);
    sy_change_set_free(cs);
    sy_router_free(r);
}
END_TEST

static int compile_nothing(void *data, const sy_kv *args, size_t n,
                           void **state, sy_error *err) {
    (void)data, (void)args, (void)n, (void)err;
    *state = NULL;
    return 0;
}
static bool test_true(void *state, const sy_request *req) {
    (void)state, (void)req;
    return true;
}

/* A factory's shortcut_type outside sy_shortcut_type was registered and
 * then read as a gathered list (any value but DEFAULT): a value from a
 * newer header, or garbage, silently changed how shortcuts are split.
 * It is refused at registration, naming the value; nothing is added. */
START_TEST(an_unknown_shortcut_type_is_refused_at_registration) {
    sy_registry *g;
    ck_assert_int_eq(sy_registry_new(NULL, &g, NULL), 0);
    sy_predicate_factory p = {.compile = compile_nothing, .test = test_true};
    sy_filter_factory f = {0};
    sy_error e;
    p.shortcut_type = (sy_shortcut_type)3;
    ck_assert_int_eq(sy_registry_add_predicate(g, "Mine", &p, &e), SY_EINVAL);
    ck_assert_msg(strstr(e.message, "shortcut_type 3") != NULL, "%s",
                  e.message);
    f.shortcut_type = (sy_shortcut_type)-1;
    ck_assert_int_eq(sy_registry_add_filter(g, "MyF", &f, &e), SY_EINVAL);
    ck_assert_msg(strstr(e.message, "shortcut_type -1") != NULL, "%s",
                  e.message);
    /* nothing was added: the names are still free */
    p.shortcut_type = SY_SHORTCUT_GATHER_LIST_TAIL_FLAG;
    ck_assert_int_eq(sy_registry_add_predicate(g, "Mine", &p, &e), 0);
    f.shortcut_type = SY_SHORTCUT_GATHER_LIST;
    ck_assert_int_eq(sy_registry_add_filter(g, "MyF", &f, &e), 0);
    sy_registry_free(g);
}
END_TEST

/* sy_match_ctx_nomatch names the reason of the last match on the context:
 * after a match refused for its header count (SY_ELIMIT) it still said
 * the previous request's 405 and Allow, which a host that reads it when m
 * is NULL (docs/embedding.md's walk-through did) answered to the wrong
 * request. */
START_TEST(a_refused_match_leaves_no_stale_nomatch_reason) {
    sy_router *r = router_new(NULL, "s");
    ck_assert_int_eq(apply(r, "s",
                           "[{\"id\":\"p\",\"uri\":\"http://p\","
                           "\"predicates\":[\"Method=POST\",\"Path=/p\"]}]",
                           NULL),
                     0);
    sy_snapshot *s = sy_router_acquire(r);
    sy_match_ctx *ctx;
    ck_assert_int_eq(sy_match_ctx_new(NULL, &ctx, NULL), 0);
    sy_request req = SY_REQUEST_INIT;
    req.method = (sy_str){"GET", 3};
    req.path = (sy_str){"/p", 2};
    sy_match *m;
    ck_assert_int_eq(sy_snapshot_match(s, ctx, &req, &m), 0);
    sy_str allow;
    ck_assert_int_eq(sy_match_ctx_nomatch(ctx, &allow), SY_NOMATCH_METHOD);
    req.header_count = SY_MAX_REQUEST_HEADERS + 1;
    ck_assert_int_eq(sy_snapshot_match(s, ctx, &req, &m), SY_ELIMIT);
    ck_assert_int_eq(sy_match_ctx_nomatch(ctx, &allow), SY_NOMATCH_NONE);
    ck_assert_ptr_null(allow.ptr);
    sy_snapshot_release(s);
    sy_match_ctx_free(ctx);
    sy_router_free(r);
}
END_TEST

/* An upstream host is written into sy_target.host_header, the Host line a
 * proxy sends: a route uri's host or an instance's host with a space, a
 * CR or LF, or a URI delimiter ('/', '?', '#', '@', ...) was accepted and
 * came back in that header (an instance "evil\r\nX-Injected: 1" even
 * bracketed as IPv6), a header injection from a config or discovery
 * source. Spring Cloud Gateway refuses such a uri (java.net.URI); here
 * each is refused, located: the route's uri (SY_EURI), the instance's
 * host (SY_EINVAL), an instances document's host (SY_EARG). */
START_TEST(a_host_with_a_byte_no_host_has_is_refused) {
    sy_router *r = router_new(NULL, "s");
    static const char *const bad_uris[] = {
        "http://a b",         "http://a\\r\\nX-Evil:%201",
        "lb://svc\\r\\nX: 1", "https://a\\\"b",
        "http://a<b>",        "ws://a{b}:80"};
    char doc[256];
    sy_error e;
    for (size_t i = 0; i < sizeof bad_uris / sizeof *bad_uris; i++) {
        snprintf(doc, sizeof doc,
                 "[{\"id\":\"a\",\"uri\":\"%s\",\"predicates\":"
                 "[\"Path=/a\"]}]",
                 bad_uris[i]);
        ck_assert_msg(apply(r, "s", doc, &e) == SY_EURI, "%s: %d %s",
                      bad_uris[i], e.code, e.message);
        ck_assert_str_eq(e.path, "[0].uri");
        ck_assert_msg(strstr(e.message, "not allowed in a host") != NULL, "%s",
                      e.message);
    }
    static const char *const good_uris[] = {
        "http://a-b.example.com", "http://10.0.0.1:8080", "http://[::1]:81",
        "lb://orders_v2", "http://user@a:80/p?q#f"};
    for (size_t i = 0; i < sizeof good_uris / sizeof *good_uris; i++) {
        snprintf(doc, sizeof doc,
                 "[{\"id\":\"a\",\"uri\":\"%s\",\"predicates\":"
                 "[\"Path=/a\"]}]",
                 good_uris[i]);
        ck_assert_msg(apply(r, "s", doc, &e) == 0, "%s: %s", good_uris[i],
                      e.message);
    }
    sy_instance in[2] = {
        {.id = "i0", .host = "::1", .port = 80},
        {.id = "i1", .host = "evil\r\nX-Injected: 1", .port = 80}};
    ck_assert_int_eq(sy_router_set_instances(r, "svc", in, 2, NULL, &e),
                     SY_EINVAL);
    ck_assert_str_eq(e.path, "instances[1].host");
    in[1].host = "a b";
    sy_instance_delta d = {SY_INSTANCE_ADD, in[1]};
    ck_assert_int_eq(sy_router_update_instances(r, "svc", &d, 1, NULL, &e),
                     SY_EINVAL);
    ck_assert_str_eq(e.path, "deltas[0].instance.host");
    in[1].host = "[fe80::1]";
    ck_assert_int_eq(sy_router_set_instances(r, "svc", in, 2, NULL, &e), 0);
    const char *idoc = "{\"svc\":[{\"id\":\"i\",\"host\":\"h/x\","
                       "\"port\":80}]}";
    sy_instances *inst = (sy_instances *)&inst;
    ck_assert_int_eq(sy_instances_parse(idoc, strlen(idoc), NULL, &inst, &e),
                     SY_EARG);
    ck_assert_ptr_null(inst);
    ck_assert_str_eq(e.path, "svc[0].host");
    sy_router_free(r);
}
END_TEST

/* api.md: every _free and sy_snapshot_release take NULL (a host's
 * cleanup path frees what a failed call left NULL). */
START_TEST(every_free_takes_null) {
    sy_registry_free(NULL);
    sy_document_free(NULL);
    sy_match_ctx_free(NULL);
    sy_diff_free(NULL);
    sy_router_free(NULL);
    sy_change_set_free(NULL);
    sy_report_free(NULL);
    sy_instances_free(NULL);
    sy_snapshot_release(NULL);
    /* what a failed call leaves, freed as a host frees it */
    sy_document *d;
    ck_assert_int_eq(sy_document_parse("[", 1, NULL, &d, NULL), SY_ESYNTAX);
    sy_document_free(d);
    sy_instances *in;
    ck_assert_int_eq(sy_instances_parse("{", 1, NULL, &in, NULL), SY_ESYNTAX);
    sy_instances_free(in);
}
END_TEST

int main(void) {
    Suite *s = suite_create("api_edges");
    TCase *tc = tcase_create("api_edges");
    tcase_add_test(tc, the_405_check_draws_on_the_request_budget);
    tcase_add_test(tc, a_refused_publish_blames_no_change);
    tcase_add_test(tc, a_null_router_is_named_as_such);
    tcase_add_test(tc, a_method_only_route_answers_405_not_404);
    tcase_add_test(tc, a_bracketed_ipv6_instance_is_not_bracketed_twice);
    tcase_add_test(tc, version_not_bumped_is_logged_only_when_applied);
    tcase_add_test(tc, set_request_host_header_reaches_the_target);
    tcase_add_test(tc, parse_options_of_an_older_size_are_accepted);
    tcase_add_test(tc, a_failed_call_leaves_its_out_pointer_null);
    tcase_add_test(tc, report_and_diff_accessors_take_null);
    tcase_add_test(tc, a_null_or_empty_name_is_einval_as_when_staged);
    tcase_add_test(tc, an_unknown_shortcut_type_is_refused_at_registration);
    tcase_add_test(tc, a_refused_match_leaves_no_stale_nomatch_reason);
    tcase_add_test(tc, a_host_with_a_byte_no_host_has_is_refused);
    tcase_add_test(tc, every_free_takes_null);
    suite_add_tcase(s, tc);
    return sy_test_run(s);
}
