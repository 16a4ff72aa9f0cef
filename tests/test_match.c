/*
 * test_match.c - matching through the public API, as the route model
 * (sections 3-5: order and first match, predicates, filters; see
 * docs/route-definitions.md) specifies it: first match by order
 * then document position, ties across sources by registration order,
 * disabled routes, routes without Path/Host, captured variables, the Host
 * port option, the filter plan, explain, snapshot lifetime across applies,
 * one-route changes, default filters, route lookup, generation and
 * fingerprint.
 *
 * Every match here is also run through the linear scan, which must agree.
 */
#include "route/route.h" /* literal_path */
#include "testutil.h"

#include <switchyard.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ------------------------------------------------------------------ */
/* Helpers                                                              */
/* ------------------------------------------------------------------ */

static sy_str S(const char *s) {
    return (sy_str){s, s ? strlen(s) : 0};
}

static bool eq(sy_str a, const char *b) {
    return a.ptr && a.len == strlen(b) && memcmp(a.ptr, b, a.len) == 0;
}

#define ck_assert_sy_str(a, b)                                                 \
    do {                                                                       \
        sy_str a_ = (a);                                                       \
        ck_assert_msg(eq(a_, (b)), "'%.*s' != '%s'", (int)a_.len,              \
                      a_.ptr ? a_.ptr : "(null)", (b));                        \
    } while (0)

static sy_router *new_router(const sy_router_options *o, const char *source) {
    sy_router *r = NULL;
    sy_error err = {0};
    ck_assert_msg(sy_router_new(o, &r, &err) == 0, "router: %s", err.message);
    if (source)
        ck_assert_int_eq(sy_router_add_source(r, source, &err), 0);
    return r;
}

static void apply(sy_router *r, const char *source, const char *json) {
    sy_error err = {0};
    int rc = sy_router_apply(r, source, json, strlen(json), NULL, &err);
    ck_assert_msg(rc == 0, "apply failed: %d %s at %s", rc, err.message,
                  err.path);
}

static sy_router *router_with(const char *json) {
    sy_router *r = new_router(NULL, "main");
    apply(r, "main", json);
    return r;
}

/* A request in a struct that owns its header array. */
typedef struct rq {
    sy_request req;
    sy_header hdr[8];
} rq;

static rq request(const char *method, const char *host, const char *path) {
    rq q;
    memset(&q, 0, sizeof q);
    sy_request init = SY_REQUEST_INIT;
    q.req = init;
    q.req.method = S(method);
    q.req.host = S(host);
    q.req.path = S(path);
    q.req.remote_addr = S("10.0.0.1");
    q.req.now_ms = 1700000000000LL;
    return q;
}

static void add_header(rq *q, const char *name, const char *value) {
    ck_assert_uint_lt(q->req.header_count, 8);
    q->hdr[q->req.header_count++] = (sy_header){S(name), S(value)};
    q->req.headers = q->hdr;
}

/* The per-test match contexts: one for the indexed matcher, one for the
 * linear scan, so that both results stay valid side by side. */
static sy_match_ctx *ctx_ix, *ctx_lin;

static void setup(void) {
    ck_assert_int_eq(sy_match_ctx_new(NULL, &ctx_ix, NULL), 0);
    ck_assert_int_eq(sy_match_ctx_new(NULL, &ctx_lin, NULL), 0);
}

static void teardown(void) {
    sy_match_ctx_free(ctx_ix);
    sy_match_ctx_free(ctx_lin);
    ctx_ix = ctx_lin = NULL;
}

/* Match on a snapshot with both matchers; they must pick the same route. */
static sy_match *match_on(const sy_snapshot *s, const rq *q) {
    sy_match *m = NULL, *l = NULL;
    ck_assert_int_eq(sy_snapshot_match(s, ctx_ix, &q->req, &m), 0);
    ck_assert_int_eq(sy_snapshot_match_linear(s, ctx_lin, &q->req, &l), 0);
    const sy_route *a = m ? sy_match_route(m) : NULL;
    const sy_route *b = l ? sy_match_route(l) : NULL;
    ck_assert_msg(a == b, "indexed chose %s, linear chose %s",
                  a ? sy_route_id(a) : "(none)", b ? sy_route_id(b) : "(none)");
    return m;
}

/* The id of the route matched on the router's current snapshot, or NULL.
 * The returned string is copied: the snapshot is released. */
static const char *match_id(sy_router *r, const rq *q) {
    static char buf[64];
    sy_snapshot *s = sy_router_acquire(r);
    sy_match *m = match_on(s, q);
    const char *id = NULL;
    if (m) {
        snprintf(buf, sizeof buf, "%s", sy_route_id(sy_match_route(m)));
        id = buf;
    }
    sy_snapshot_release(s);
    return id;
}

#define ck_assert_match(r, q, id)                                              \
    do {                                                                       \
        const char *got_ = match_id((r), (q));                                 \
        ck_assert_msg(got_ &&strcmp(got_, (id)) == 0, "matched %s, want %s",   \
                      got_ ? got_ : "(none)", (id));                           \
    } while (0)

#define ck_assert_no_match(r, q)                                               \
    do {                                                                       \
        const char *got_ = match_id((r), (q));                                 \
        ck_assert_msg(got_ == NULL, "matched %s, want none", got_);            \
    } while (0)

/* ------------------------------------------------------------------ */
/* Order and first match                                                */
/* ------------------------------------------------------------------ */

START_TEST(lower_order_wins_over_document_position) {
    sy_router *r =
        router_with("[{\"id\":\"wide\",\"uri\":\"http://a\",\"order\":1,"
                    "\"predicates\":[\"Path=/x/**\"]},"
                    " {\"id\":\"narrow\",\"uri\":\"http://b\",\"order\":0,"
                    "\"predicates\":[\"Path=/x/y\"]}]");
    rq q = request("GET", "h", "/x/y");
    ck_assert_match(r, &q, "narrow");
    q = request("GET", "h", "/x/z");
    ck_assert_match(r, &q, "wide");
    sy_router_free(r);
}
END_TEST

START_TEST(equal_order_keeps_document_position) {
    sy_router *r =
        router_with("[{\"id\":\"first\",\"uri\":\"http://a\","
                    "\"predicates\":[\"Path=/x/**\"]},"
                    " {\"id\":\"second\",\"uri\":\"http://b\",\"order\":0,"
                    "\"predicates\":[\"Path=/x/y\"]}]");
    rq q = request("GET", "h", "/x/y");
    ck_assert_match(r, &q, "first");
    sy_router_free(r);
}
END_TEST

START_TEST(negative_order_goes_before_the_default_order) {
    sy_router *r = router_with(
        "[{\"id\":\"all\",\"uri\":\"http://a\",\"predicates\":[\"Path=/**\"]},"
        " {\"id\":\"neg\",\"uri\":\"http://b\",\"order\":-5,"
        "\"predicates\":[\"Path=/x\"]}]");
    rq q = request("GET", "h", "/x");
    ck_assert_match(r, &q, "neg");
    q = request("GET", "h", "/y");
    ck_assert_match(r, &q, "all");
    sy_router_free(r);
}
END_TEST

START_TEST(no_matching_route_gives_no_match) {
    sy_router *r = router_with(
        "[{\"id\":\"a\",\"uri\":\"http://a\",\"predicates\":[\"Path=/a\"]}]");
    rq q = request("GET", "h", "/b");
    sy_snapshot *s = sy_router_acquire(r);
    sy_match *m = (sy_match *)1;
    ck_assert_int_eq(sy_snapshot_match(s, ctx_ix, &q.req, &m), 0);
    ck_assert_ptr_null(m);
    sy_snapshot_release(s);
    sy_router_free(r);
}
END_TEST

START_TEST(empty_predicate_list_matches_everything) {
    sy_router *r =
        router_with("[{\"id\":\"p\",\"uri\":\"http://a\",\"order\":1,"
                    "\"predicates\":[\"Path=/p\"]},"
                    " {\"id\":\"any\",\"uri\":\"http://b\",\"order\":2,"
                    "\"predicates\":[]}]");
    rq q = request("DELETE", "", "/anything/at/all");
    ck_assert_match(r, &q, "any");
    q = request("GET", "h", "/p");
    ck_assert_match(r, &q, "p");
    sy_router_free(r);
}
END_TEST

START_TEST(ties_across_sources_follow_registration_order) {
    sy_router *r = new_router(NULL, "first");
    sy_error err = {0};
    ck_assert_int_eq(sy_router_add_source(r, "second", &err), 0);
    /* applied in the opposite order of registration */
    apply(
        r, "second",
        "[{\"id\":\"s2\",\"uri\":\"http://b\",\"predicates\":[\"Path=/x\"]}]");
    apply(
        r, "first",
        "[{\"id\":\"s1\",\"uri\":\"http://a\",\"predicates\":[\"Path=/x\"]}]");
    rq q = request("GET", "h", "/x");
    ck_assert_match(r, &q, "s1");
    sy_router_free(r);
}
END_TEST

START_TEST(order_beats_source_registration_order) {
    sy_router *r = new_router(NULL, "first");
    sy_error err = {0};
    ck_assert_int_eq(sy_router_add_source(r, "second", &err), 0);
    apply(r, "first",
          "[{\"id\":\"s1\",\"uri\":\"http://a\",\"order\":3,"
          "\"predicates\":[\"Path=/x\"]}]");
    apply(r, "second",
          "[{\"id\":\"s2\",\"uri\":\"http://b\",\"order\":2,"
          "\"predicates\":[\"Path=/x\"]}]");
    rq q = request("GET", "h", "/x");
    ck_assert_match(r, &q, "s2");
    sy_router_free(r);
}
END_TEST

START_TEST(disabled_route_is_skipped) {
    sy_router *r = router_with(
        "[{\"id\":\"off\",\"uri\":\"http://a\",\"predicates\":[\"Path=/x\"],"
        "\"metadata\":{\"status\":\"disabled\"}},"
        " {\"id\":\"on\",\"uri\":\"http://b\",\"predicates\":[\"Path=/x\"]}]");
    rq q = request("GET", "h", "/x");
    ck_assert_match(r, &q, "on");
    sy_snapshot *s = sy_router_acquire(r);
    const sy_route *off = sy_snapshot_find_route(s, "off", NULL);
    ck_assert_ptr_nonnull(off);
    ck_assert(sy_route_disabled(off));
    ck_assert_uint_eq(sy_snapshot_route_count(s), 2);
    sy_snapshot_release(s);
    sy_router_free(r);
}
END_TEST

/* "enabled": false (SCG 4.2) is skipped as metadata.status "disabled" is,
 * and a change between the two spellings is no change to the route. */
START_TEST(enabled_false_route_is_skipped) {
    sy_router *r = router_with(
        "[{\"id\":\"off\",\"uri\":\"http://a\",\"predicates\":[\"Path=/x\"],"
        "\"enabled\":false},"
        " {\"id\":\"on\",\"uri\":\"http://b\",\"predicates\":[\"Path=/x\"]}]");
    rq q = request("GET", "h", "/x");
    ck_assert_match(r, &q, "on");
    const char *same =
        "[{\"id\":\"off\",\"uri\":\"http://a\",\"predicates\":[\"Path=/x\"],"
        "\"metadata\":{\"status\":\"disabled\"}},"
        " {\"id\":\"on\",\"uri\":\"http://b\",\"predicates\":[\"Path=/x\"]}]";
    sy_report *rep = NULL;
    ck_assert_int_eq(sy_router_apply(r, "main", same, strlen(same), &rep, NULL),
                     0);
    ck_assert_uint_eq(sy_diff_updated_count(sy_report_diff(rep)), 0);
    ck_assert_uint_eq(sy_diff_unchanged_count(sy_report_diff(rep)), 2);
    sy_report_free(rep);
    ck_assert_match(r, &q, "on");
    sy_router_free(r);
}
END_TEST

START_TEST(disabled_only_route_gives_no_match) {
    sy_router *r =
        router_with("[{\"id\":\"off\",\"uri\":\"http://a\",\"predicates\":[],"
                    "\"metadata\":{\"status\":\"disabled\"}}]");
    rq q = request("GET", "h", "/x");
    ck_assert_no_match(r, &q);
    sy_router_free(r);
}
END_TEST

START_TEST(routes_without_path_or_host_are_found_in_rank_order) {
    sy_router *r =
        router_with("[{\"id\":\"path\",\"uri\":\"http://a\",\"order\":0,"
                    "\"predicates\":[\"Path=/x\"]},"
                    " {\"id\":\"hdr\",\"uri\":\"http://b\",\"order\":-1,"
                    "\"predicates\":[\"Header=X-A\"]},"
                    " {\"id\":\"get\",\"uri\":\"http://c\",\"order\":1,"
                    "\"predicates\":[\"Method=GET\"]},"
                    " {\"id\":\"purge\",\"uri\":\"http://d\",\"order\":2,"
                    "\"predicates\":[\"Method=PURGE\"]},"
                    " {\"id\":\"host\",\"uri\":\"http://e\",\"order\":3,"
                    "\"predicates\":[\"Host=**.example.com\"]}]");
    rq q = request("GET", "h", "/x");
    add_header(&q, "X-A", "1");
    ck_assert_match(r, &q, "hdr");
    q = request("GET", "h", "/x");
    ck_assert_match(r, &q, "path");
    q = request("GET", "h", "/y");
    ck_assert_match(r, &q, "get");
    q = request("PURGE", "h", "/y");
    ck_assert_match(r, &q, "purge");
    q = request("POST", "www.example.com", "/y");
    ck_assert_match(r, &q, "host");
    q = request("POST", "h", "/y");
    ck_assert_no_match(r, &q);
    sy_router_free(r);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Path details                                                         */
/* ------------------------------------------------------------------ */

START_TEST(trailing_slash_matches_by_default) {
    sy_router *r = router_with(
        "[{\"id\":\"a\",\"uri\":\"http://a\",\"predicates\":[\"Path=/a\"]}]");
    rq q = request("GET", "h", "/a/");
    ck_assert_match(r, &q, "a");
    sy_router_free(r);
}
END_TEST

START_TEST(trailing_slash_false_requires_exact_path) {
    sy_router *r = router_with("[{\"id\":\"a\",\"uri\":\"http://a\","
                               "\"predicates\":[\"Path=/a,false\"]}]");
    rq q = request("GET", "h", "/a/");
    ck_assert_no_match(r, &q);
    q = request("GET", "h", "/a");
    ck_assert_match(r, &q, "a");
    sy_router_free(r);
}
END_TEST

START_TEST(double_star_matches_zero_or_more_segments) {
    sy_router *r = router_with("[{\"id\":\"a\",\"uri\":\"http://"
                               "a\",\"predicates\":[\"Path=/a/**\"]}]");
    const char *yes[] = {"/a", "/a/", "/a/b", "/a/b/c"};
    for (size_t i = 0; i < 4; i++) {
        rq q = request("GET", "h", yes[i]);
        ck_assert_match(r, &q, "a");
    }
    rq q = request("GET", "h", "/ab");
    ck_assert_no_match(r, &q);
    sy_router_free(r);
}
END_TEST

START_TEST(leading_double_star_matches_any_prefix) {
    sy_router *r = router_with("[{\"id\":\"j\",\"uri\":\"http://a\","
                               "\"predicates\":[\"Path=/**/x.json\"]}]");
    rq q = request("GET", "h", "/x.json");
    ck_assert_match(r, &q, "j");
    q = request("GET", "h", "/a/b/x.json");
    ck_assert_match(r, &q, "j");
    q = request("GET", "h", "/a/b/y.json");
    ck_assert_no_match(r, &q);
    sy_router_free(r);
}
END_TEST

START_TEST(encoded_slash_stays_inside_its_segment) {
    sy_router *r = router_with("[{\"id\":\"one\",\"uri\":\"http://a\","
                               "\"predicates\":[\"Path=/f/{name}\"]}]");
    rq q = request("GET", "h", "/f/a%2Fb");
    sy_snapshot *s = sy_router_acquire(r);
    sy_match *m = match_on(s, &q);
    ck_assert_ptr_nonnull(m);
    /* the default SY_SLASHES_KEEP keeps it encoded in the capture too, so
     * no filter can turn it into a separator (docs/security.md) */
    ck_assert_sy_str(sy_match_var_get(m, "name"), "a%2Fb");
    q = request("GET", "h", "/f/a/b");
    ck_assert_ptr_null(match_on(s, &q));
    sy_snapshot_release(s);
    sy_router_free(r);
}
END_TEST

START_TEST(matrix_parameters_are_ignored_for_matching) {
    sy_router *r = router_with("[{\"id\":\"u\",\"uri\":\"http://a\","
                               "\"predicates\":[\"Path=/users/{id}\"]}]");
    rq q = request("GET", "h", "/users;v=1/42;x=y");
    sy_snapshot *s = sy_router_acquire(r);
    sy_match *m = match_on(s, &q);
    ck_assert_ptr_nonnull(m);
    ck_assert_sy_str(sy_match_var_get(m, "id"), "42");
    sy_snapshot_release(s);
    sy_router_free(r);
}
END_TEST

START_TEST(empty_segments_keep_their_separators) {
    sy_router *r = router_with("[{\"id\":\"ab\",\"uri\":\"http://"
                               "a\",\"predicates\":[\"Path=/a/b\"]}]");
    rq q = request("GET", "h", "/a//b");
    ck_assert_no_match(r, &q);
    sy_router_free(r);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Variables                                                            */
/* ------------------------------------------------------------------ */

START_TEST(path_variables_are_captured_in_order) {
    sy_router *r = router_with(
        "[{\"id\":\"o\",\"uri\":\"http://a\","
        "\"predicates\":[\"Path=/u/{user}/o/{order:[0-9]+}/{*rest}\"]}]");
    rq q = request("GET", "h", "/u/ann/o/42/x/y");
    sy_snapshot *s = sy_router_acquire(r);
    sy_match *m = match_on(s, &q);
    ck_assert_ptr_nonnull(m);
    ck_assert_uint_eq(sy_match_var_count(m), 3);
    sy_str n, v;
    sy_match_var(m, 0, &n, &v);
    ck_assert_sy_str(n, "user");
    ck_assert_sy_str(v, "ann");
    sy_match_var(m, 1, &n, &v);
    ck_assert_sy_str(n, "order");
    ck_assert_sy_str(v, "42");
    sy_match_var(m, 2, &n, &v);
    ck_assert_sy_str(n, "rest");
    ck_assert_sy_str(v, "/x/y");
    ck_assert_sy_str(sy_match_var_get(m, "order"), "42");
    ck_assert_ptr_null(sy_match_var_get(m, "nope").ptr);
    sy_snapshot_release(s);
    sy_router_free(r);
}
END_TEST

START_TEST(regex_variable_must_match_the_whole_segment) {
    sy_router *r = router_with("[{\"id\":\"o\",\"uri\":\"http://a\","
                               "\"predicates\":[\"Path=/o/{id:[0-9]+}\"]}]");
    rq q = request("GET", "h", "/o/42x");
    ck_assert_no_match(r, &q);
    q = request("GET", "h", "/o/42");
    ck_assert_match(r, &q, "o");
    sy_router_free(r);
}
END_TEST

START_TEST(catch_all_variable_is_empty_for_no_segments) {
    sy_router *r = router_with("[{\"id\":\"f\",\"uri\":\"http://a\","
                               "\"predicates\":[\"Path=/f/{*rest}\"]}]");
    rq q = request("GET", "h", "/f");
    sy_snapshot *s = sy_router_acquire(r);
    sy_match *m = match_on(s, &q);
    ck_assert_ptr_nonnull(m);
    sy_str v = sy_match_var_get(m, "rest");
    ck_assert_ptr_nonnull(v.ptr);
    ck_assert_uint_eq(v.len, 0);
    sy_snapshot_release(s);
    sy_router_free(r);
}
END_TEST

START_TEST(host_and_path_variables_follow_predicate_order) {
    sy_router *r =
        router_with("[{\"id\":\"t\",\"uri\":\"http://a\",\"predicates\":"
                    "[\"Host={tenant}.example.com\",\"Path=/items/{item}\"]}]");
    rq q = request("GET", "acme.example.com", "/items/7");
    sy_snapshot *s = sy_router_acquire(r);
    sy_match *m = match_on(s, &q);
    ck_assert_ptr_nonnull(m);
    ck_assert_uint_eq(sy_match_var_count(m), 2);
    sy_str n, v;
    sy_match_var(m, 0, &n, &v);
    ck_assert_sy_str(n, "tenant");
    ck_assert_sy_str(v, "acme");
    sy_match_var(m, 1, &n, &v);
    ck_assert_sy_str(n, "item");
    ck_assert_sy_str(v, "7");
    sy_snapshot_release(s);
    sy_router_free(r);
}
END_TEST

START_TEST(variables_come_from_the_first_matching_pattern) {
    sy_router *r =
        router_with("[{\"id\":\"t\",\"uri\":\"http://a\",\"predicates\":"
                    "[\"Path=/a/{x},/{y}/{z}\"]}]");
    rq q = request("GET", "h", "/a/b");
    sy_snapshot *s = sy_router_acquire(r);
    sy_match *m = match_on(s, &q);
    ck_assert_ptr_nonnull(m);
    ck_assert_uint_eq(sy_match_var_count(m), 1);
    ck_assert_sy_str(sy_match_var_get(m, "x"), "b");
    ck_assert_ptr_null(sy_match_var_get(m, "y").ptr);
    sy_snapshot_release(s);
    sy_router_free(r);
}
END_TEST

START_TEST(failed_route_leaves_no_variables_behind) {
    /* "a" captures {x} from the path, then fails on its Header predicate;
     * "b" wins and must report only its own variables */
    sy_router *r = router_with(
        "[{\"id\":\"a\",\"uri\":\"http://a\",\"predicates\":"
        "[\"Path=/p/{x}\",\"Header=X-Need\"]},"
        " {\"id\":\"b\",\"uri\":\"http://b\",\"predicates\":[\"Path=/p/*\"]}]");
    rq q = request("GET", "h", "/p/1");
    sy_snapshot *s = sy_router_acquire(r);
    sy_match *m = match_on(s, &q);
    ck_assert_ptr_nonnull(m);
    ck_assert_str_eq(sy_route_id(sy_match_route(m)), "b");
    ck_assert_uint_eq(sy_match_var_count(m), 0);
    sy_snapshot_release(s);
    sy_router_free(r);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Host                                                                 */
/* ------------------------------------------------------------------ */

START_TEST(host_patterns_use_dot_as_separator) {
    sy_router *r =
        router_with("[{\"id\":\"one\",\"uri\":\"http://a\",\"order\":1,"
                    "\"predicates\":[\"Host=*.example.com\"]},"
                    " {\"id\":\"any\",\"uri\":\"http://b\",\"order\":2,"
                    "\"predicates\":[\"Host=**.example.com\"]}]");
    rq q = request("GET", "www.example.com", "/");
    ck_assert_match(r, &q, "one");
    q = request("GET", "a.b.example.com", "/");
    ck_assert_match(r, &q, "any");
    q = request("GET", "example.com", "/");
    ck_assert_match(r, &q, "any");
    q = request("GET", "example.org", "/");
    ck_assert_no_match(r, &q);
    sy_router_free(r);
}
END_TEST

START_TEST(host_port_is_part_of_the_host_by_default) {
    sy_router *r = router_with("[{\"id\":\"h\",\"uri\":\"http://a\","
                               "\"predicates\":[\"Host=example.com\"]},"
                               " {\"id\":\"hp\",\"uri\":\"http://a\","
                               "\"predicates\":[\"Host=example.com:8080\"]}]");
    rq q = request("GET", "example.com:8080", "/");
    ck_assert_match(r, &q, "hp");
    q = request("GET", "example.com:9090", "/");
    ck_assert_no_match(r, &q);
    q = request("GET", "example.com", "/");
    ck_assert_match(r, &q, "h");
    sy_router_free(r);
}
END_TEST

START_TEST(strip_host_port_option_ignores_the_port) {
    sy_router_options o = SY_ROUTER_OPTIONS_INIT;
    o.strip_host_port = true;
    sy_router *r = new_router(&o, "main");
    apply(r, "main",
          "[{\"id\":\"h\",\"uri\":\"http://a\","
          "\"predicates\":[\"Host={sub}.example.com\"]},"
          " {\"id\":\"v6\",\"uri\":\"http://a\","
          "\"predicates\":[\"Host=[::1]\"]}]");
    rq q = request("GET", "api.example.com:8080", "/");
    sy_snapshot *s = sy_router_acquire(r);
    sy_match *m = match_on(s, &q);
    ck_assert_ptr_nonnull(m);
    ck_assert_str_eq(sy_route_id(sy_match_route(m)), "h");
    ck_assert_sy_str(sy_match_var_get(m, "sub"), "api");
    sy_snapshot_release(s);
    q = request("GET", "[::1]:8443", "/");
    ck_assert_match(r, &q, "v6");
    q = request("GET", "[::1]", "/");
    ck_assert_match(r, &q, "v6");
    sy_router_free(r);
}
END_TEST

/* A route the index walk proves whole (Path or Host patterns only) has
 * its captures taken from the request's segments on first read: each
 * reader (var_count, var, var_get, the filter plan) sees them, in host
 * and path lists alike, and the next match on the same context never
 * sees the last one's. */
START_TEST(walk_proven_captures_are_taken_when_read) {
    /* a first document is indexed in one piece (changes to a table that
     * has routes go to an overlay, whose lists the walk proves nothing
     * for), as the whole-route path needs */
    char doc[4096];
    int k = snprintf(
        doc, sizeof doc, "%s",
        "[{\"id\":\"p\",\"uri\":\"http://a\",\"predicates\":"
        "[\"Path=/u/{id}/x/{k}\"],\"filters\":[\"SetPath=/v/{k}/{id}\"]},"
        " {\"id\":\"h\",\"uri\":\"http://a\",\"predicates\":"
        "[\"Host={a}.{b}.example.com\"]},"
        " {\"id\":\"n\",\"uri\":\"http://a\",\"predicates\":[\"Path=/none\"]},"
        " {\"id\":\"q\",\"uri\":\"http://a\",\"predicates\":"
        "[\"Path=/q/{v}\",\"Query=t\"]}");
    for (int i = 0; i < 32; i++)
        k += snprintf(doc + k, sizeof doc - (size_t)k,
                      ",{\"id\":\"f%d\",\"uri\":\"http://a\","
                      "\"predicates\":[\"Path=/filler/%d/{x}\"]}",
                      i, i);
    snprintf(doc + k, sizeof doc - (size_t)k, "]");
    sy_router *r = router_with(doc);
    sy_snapshot *s = sy_router_acquire(r);
    sy_match *m = NULL;
    sy_str n, v;
    /* path: the plan first, then the variables */
    rq q = request("GET", "other.org", "/u/7/x/y");
    ck_assert_int_eq(sy_snapshot_match(s, ctx_ix, &q.req, &m), 0);
    ck_assert_ptr_nonnull(m);
    ck_assert_sy_str(sy_match_path(m), "/v/y/7");
    ck_assert_uint_eq(sy_match_var_count(m), 2);
    sy_match_var(m, 1, &n, &v);
    ck_assert_sy_str(n, "k");
    ck_assert_sy_str(v, "y");
    /* host: var_get first (labels are read from the end) */
    q = request("GET", "api.eu.example.com", "/z");
    ck_assert_int_eq(sy_snapshot_match(s, ctx_ix, &q.req, &m), 0);
    ck_assert_ptr_nonnull(m);
    ck_assert_str_eq(sy_route_id(sy_match_route(m)), "h");
    ck_assert_sy_str(sy_match_var_get(m, "b"), "eu");
    ck_assert_sy_str(sy_match_var_get(m, "a"), "api");
    ck_assert_uint_eq(sy_match_var_count(m), 2);
    /* a match read by nobody, then one without variables: none left */
    q = request("GET", "other.org", "/u/1/x/2");
    ck_assert_int_eq(sy_snapshot_match(s, ctx_ix, &q.req, &m), 0);
    q = request("GET", "other.org", "/none");
    ck_assert_int_eq(sy_snapshot_match(s, ctx_ix, &q.req, &m), 0);
    ck_assert_ptr_nonnull(m);
    ck_assert_uint_eq(sy_match_var_count(m), 0);
    ck_assert_ptr_null(sy_match_var_get(m, "id").ptr);
    /* nor after one whose predicates were evaluated */
    q = request("GET", "other.org", "/u/1/x/2");
    ck_assert_int_eq(sy_snapshot_match(s, ctx_ix, &q.req, &m), 0);
    q = request("GET", "other.org", "/q/w");
    q.req.query = S("t=1");
    ck_assert_int_eq(sy_snapshot_match(s, ctx_ix, &q.req, &m), 0);
    ck_assert_ptr_nonnull(m);
    ck_assert_str_eq(sy_route_id(sy_match_route(m)), "q");
    ck_assert_uint_eq(sy_match_var_count(m), 1);
    ck_assert_sy_str(sy_match_var_get(m, "v"), "w");
    ck_assert_ptr_null(sy_match_var_get(m, "id").ptr);
    /* an empty segment under a {var}: no match, though the walk got there */
    q = request("GET", "other.org", "/u//x/y");
    ck_assert_int_eq(sy_snapshot_match(s, ctx_ix, &q.req, &m), 0);
    ck_assert_ptr_null(m);
    q = request("GET", "other.org", "/u/7/x/");
    ck_assert_int_eq(sy_snapshot_match(s, ctx_ix, &q.req, &m), 0);
    ck_assert_ptr_null(m);
    sy_snapshot_release(s);
    sy_router_free(r);
}
END_TEST

/* A table of host routes only (an empty path trie): a request the
 * whole-host table answers has its path cut into segments only when a
 * predicate past a literal Path reads them (a {var}, a "**", the 405
 * check), and each reader gets the request's own segments, not the last
 * one's. */
START_TEST(a_host_table_cuts_the_path_only_for_its_readers) {
    char doc[8192];
    int k = snprintf(doc, sizeof doc, "[");
    for (int i = 0; i < 40; i++)
        k += snprintf(doc + k, sizeof doc - (size_t)k,
                      "%s{\"id\":\"h%d\",\"uri\":\"http://a\","
                      "\"predicates\":[\"Host=h%d.example.com\",%s]}",
                      i ? "," : "", i, i,
                      i % 3 == 0   ? "\"Path=/items/{id}\",\"Method=GET\""
                      : i % 3 == 1 ? "\"Path=/lit/a\""
                                   : "\"Path=/deep/**\"");
    snprintf(doc + k, sizeof doc - (size_t)k, "]");
    sy_router *r = router_with(doc);
    sy_snapshot *s = sy_router_acquire(r);
    static const struct {
        const char *method, *host, *path, *want, *var;
    } t[] = {
        {"GET", "h1.example.com", "/lit/a", "h1", NULL},
        {"GET", "h0.example.com", "/items/42", "h0", "42"},
        {"GET", "h1.example.com", "/lit/a", "h1", NULL},
        {"GET", "h3.example.com", "/items/7", "h3", "7"},
        {"GET", "h3.example.com", "/items/7/x", NULL, NULL},
        {"GET", "h2.example.com", "/deep/x/y", "h2", NULL},
        {"GET", "h2.example.com", "/deeper", NULL, NULL},
        {"GET", "h4.example.com", "/lit/b", NULL, NULL},
        {"POST", "h6.example.com", "/items/9", NULL, NULL}, /* 405 */
        {"GET", "h6.example.com", "/items/9", "h6", "9"},
        {"GET", "h9.example.com", "/items/", NULL, NULL},
    };
    for (size_t i = 0; i < SY_ARRAY_LEN(t); i++) {
        rq q = request(t[i].method, t[i].host, t[i].path);
        sy_match *m = match_on(s, &q);
        const char *got = m ? sy_route_id(sy_match_route(m)) : NULL;
        ck_assert_msg(t[i].want ? got && strcmp(got, t[i].want) == 0 : !got,
                      "%s %s%s: %s", t[i].method, t[i].host, t[i].path,
                      got ? got : "(none)");
        if (t[i].var)
            ck_assert_sy_str(sy_match_var_get(m, "id"), t[i].var);
        if (!strcmp(t[i].method, "POST")) {
            sy_str allow;
            ck_assert_int_eq(sy_match_ctx_nomatch(ctx_ix, &allow),
                             SY_NOMATCH_METHOD);
            ck_assert_sy_str(allow, "GET");
        }
    }
    sy_snapshot_release(s);
    sy_router_free(r);
}
END_TEST

/* The snapshot of a router (*r) with 20 routes "r0".."r19" whose
 * predicates are `preds` (a JSON array's items with one %d, the route's
 * number), then route "last" (order 1) whose one predicate is `last`. */
static sy_snapshot *snapshot_of(sy_router **r, const char *preds,
                                const char *last) {
    char doc[8192], one[512];
    int k = snprintf(doc, sizeof doc, "[");
    for (int i = 0; i < 20; i++) {
        snprintf(one, sizeof one, preds, i);
        k += snprintf(doc + k, sizeof doc - (size_t)k,
                      "%s{\"id\":\"r%d\",\"uri\":\"http://a\","
                      "\"predicates\":[%s]}",
                      i ? "," : "", i, one);
    }
    snprintf(doc + k, sizeof doc - (size_t)k,
             ",{\"id\":\"last\",\"uri\":\"http://a\",\"order\":1,"
             "\"predicates\":[%s]}]",
             last);
    *r = router_with(doc);
    return sy_router_acquire(*r);
}

/* A Header's presence behind a proven Host is decided inline from the
 * first value of that name when its first byte says so, else as the scan
 * decides it (trimmed, comma-separated, unquoted elements): both
 * matchers agree (match_on) and the route is the one wanted. */
START_TEST(header_presence_behind_a_host_as_the_scan_decides) {
    sy_router *r;
    sy_snapshot *s =
        snapshot_of(&r, "\"Header=X-Key\",\"Host=h%d.example.com\",\"Path=/p\"",
                    "\"Path=/p\"");
    static const struct {
        const char *name, *value, *want;
    } t[] = {
        {"X-Key", "k", "r3"},      {"x-key", "k", "r3"},
        {"X-Key", "", "last"},     {"X-Key", " ", "last"},
        {"X-Key", " k", "r3"},     {"X-Key", "\tk", "r3"},
        {"X-Key", ",", "last"},    {"X-Key", ",k", "r3"},
        {"X-Key", "\"\"", "last"}, {"X-Key", "\"k\"", "r3"},
        {"X-Kez", "k", "last"},    {NULL, NULL, "last"},
    };
    for (size_t i = 0; i < SY_ARRAY_LEN(t); i++) {
        rq q = request("GET", "h3.example.com", "/p");
        add_header(&q, "Accept", "*/*");
        if (t[i].name)
            add_header(&q, t[i].name, t[i].value);
        sy_match *m = match_on(s, &q);
        const char *got = m ? sy_route_id(sy_match_route(m)) : NULL;
        ck_assert_msg(got && strcmp(got, t[i].want) == 0, "%s: [%s]: %s",
                      t[i].name ? t[i].name : "(none)",
                      t[i].value ? t[i].value : "", got ? got : "(none)");
    }
    sy_snapshot_release(s);
    sy_router_free(r);
}
END_TEST

/* A walk-proven candidate whose later predicate (a Header's regex) is
 * tested under the budget takes its captures on first read: the route
 * found has them, and one that failed leaves none to the route found
 * after it. */
START_TEST(captures_of_a_walk_proven_candidate_after_its_header) {
    sy_router *r;
    sy_snapshot *s = snapshot_of(
        &r, "\"Method=POST\",\"Path=/o%d/{id}\",\"Header=X-V, v[12]\"",
        "\"Path=/o4/**\"");
    rq q = request("POST", "a.example.com", "/o4/77");
    add_header(&q, "X-V", "v2");
    sy_match *m = match_on(s, &q);
    ck_assert_ptr_nonnull(m);
    ck_assert_str_eq(sy_route_id(sy_match_route(m)), "r4");
    ck_assert_uint_eq(sy_match_var_count(m), 1);
    ck_assert_sy_str(sy_match_var_get(m, "id"), "77");
    q = request("POST", "a.example.com", "/o4/78");
    add_header(&q, "X-V", "v3");
    m = match_on(s, &q);
    ck_assert_ptr_nonnull(m);
    ck_assert_str_eq(sy_route_id(sy_match_route(m)), "last");
    ck_assert_uint_eq(sy_match_var_count(m), 0);
    ck_assert_ptr_null(sy_match_var_get(m, "id").ptr);
    q = request("POST", "a.example.com", "/o4//");
    add_header(&q, "X-V", "v1");
    m = match_on(s, &q);
    ck_assert_ptr_nonnull(m);
    ck_assert_str_eq(sy_route_id(sy_match_route(m)), "last");
    sy_snapshot_release(s);
    sy_router_free(r);
}
END_TEST

/* A Path of literal segments then "{*rest}" tested behind a Host (its
 * routes share the path, so the host places them): the rest is the path
 * from the '/' before it, "" for none, and a literal that differs or a
 * path too short fails it. */
START_TEST(literal_path_then_rest_behind_a_host) {
    sy_router *r;
    sy_snapshot *s = snapshot_of(
        &r, "\"Host=h%d.example.com\",\"Path=/a/b/{*rest}\"", "\"Path=/**\"");
    static const struct {
        const char *path, *want, *rest;
    } t[] = {
        {"/a/b/c/d", "r5", "/c/d"},
        {"/a/b", "r5", ""},
        {"/a/b/", "r5", "/"},
        {"/a/b/c/", "r5", "/c/"},
        {"/a/b//c", "r5", "//c"},
        {"/a/x/c", "last", NULL},
        {"/a", "last", NULL},
        {"/ab/c", "last", NULL},
        /* on the flat path (sy__pred_lit_rest_flat): a segment that only
         * starts with the literal, case, the shortest path */
        {"/a/bc", "last", NULL},
        {"/a/bc/d", "last", NULL},
        {"/A/b/c", "last", NULL},
        {"/a/B", "last", NULL},
        {"/", "last", NULL},
        {"/a/b/c/d/", "r5", "/c/d/"},
    };
    for (size_t i = 0; i < SY_ARRAY_LEN(t); i++) {
        rq q = request("GET", "h5.example.com", t[i].path);
        sy_match *m = match_on(s, &q);
        const char *got = m ? sy_route_id(sy_match_route(m)) : NULL;
        ck_assert_msg(got && strcmp(got, t[i].want) == 0, "%s: %s", t[i].path,
                      got ? got : "(none)");
        if (t[i].rest) {
            sy_str v = sy_match_var_get(m, "rest");
            ck_assert_msg(v.ptr && v.len == strlen(t[i].rest) &&
                              memcmp(v.ptr, t[i].rest, v.len) == 0,
                          "%s: rest [%.*s], want [%s]", t[i].path, (int)v.len,
                          v.ptr ? v.ptr : "", t[i].rest);
        }
    }
    sy_snapshot_release(s);
    sy_router_free(r);
}
END_TEST

/* Paths of other shapes than literals then a rest (a {var} or an empty
 * segment before the rest: not rest_flat, set at compile) are decided by
 * the segments behind a Host: a {var} read as a literal, or an empty one
 * taken as the flat test takes it, fails the route wanted. */
START_TEST(other_rest_shapes_behind_a_host) {
    static const struct {
        const char *preds, *path, *want, *var, *val;
    } t[] = {
        {"\"Host=h%d.example.com\",\"Path=/a/{x}/{*rest}\"", "/a/q/c/d", "r5",
         "rest", "/c/d"},
        {"\"Host=h%d.example.com\",\"Path=/a/{x}/{*rest}\"", "/a/q/c/d", "r5",
         "x", "q"},
        {"\"Host=h%d.example.com\",\"Path=/a/{x}/{*rest}\"", "/a/{x}/c", "r5",
         "x", "{x}"},
        {"\"Host=h%d.example.com\",\"Path=/a/*/{*rest}\"", "/a/b/c", "r5",
         "rest", "/c"},
        {"\"Host=h%d.example.com\",\"Path=/{*rest}\"", "/a/b", "r5", "rest",
         "/a/b"},
    };
    for (size_t i = 0; i < SY_ARRAY_LEN(t); i++) {
        sy_router *r;
        sy_snapshot *s = snapshot_of(&r, t[i].preds, "\"Path=/**\"");
        rq q = request("GET", "h5.example.com", t[i].path);
        sy_match *m = match_on(s, &q);
        const char *got = m ? sy_route_id(sy_match_route(m)) : NULL;
        ck_assert_msg(got && strcmp(got, t[i].want) == 0, "%zu %s: %s", i,
                      t[i].path, got ? got : "(none)");
        ck_assert_sy_str(sy_match_var_get(m, t[i].var), t[i].val);
        sy_snapshot_release(s);
        sy_router_free(r);
    }
}
END_TEST

/* A literals-then-rest Path decided in the quick loop (no walk captures
 * before it) keeps its capture when a later predicate is left to the
 * budgeted test (two headers of a Header regex's name): the route found
 * has the rest, one that failed leaves none. */
START_TEST(rest_capture_kept_past_a_budgeted_header) {
    sy_router *r;
    sy_snapshot *s =
        snapshot_of(&r,
                    "\"Host=h%d.example.com\",\"Path=/a/b/{*rest}\","
                    "\"Header=X-V, v[12]\"",
                    "\"Path=/**\"");
    static const struct {
        const char *v1, *v2, *want, *rest;
    } t[] = {
        {"v2", NULL, "r5", "/c/d"}, /* decided in the quick loop */
        {"v1", "v2", "r5", "/c/d"}, /* the Header left to test_header */
        {"v9", NULL, "last", NULL}, /* fails at the Header */
        {"v9", "v8", "last", NULL},
    };
    for (size_t i = 0; i < SY_ARRAY_LEN(t); i++) {
        rq q = request("GET", "h5.example.com", "/a/b/c/d");
        add_header(&q, "X-V", t[i].v1);
        if (t[i].v2)
            add_header(&q, "X-V", t[i].v2);
        sy_match *m = match_on(s, &q);
        const char *got = m ? sy_route_id(sy_match_route(m)) : NULL;
        ck_assert_msg(got && strcmp(got, t[i].want) == 0, "%zu: %s", i,
                      got ? got : "(none)");
        ck_assert_uint_eq(sy_match_var_count(m), (t[i].rest ? 1u : 0u));
        if (t[i].rest)
            ck_assert_sy_str(sy_match_var_get(m, "rest"), t[i].rest);
    }
    sy_snapshot_release(s);
    sy_router_free(r);
}
END_TEST

/* A Host of "*" then literal labels behind the Path that places its
 * route is decided on the unsplit host when that is one label, '.' and
 * the literals as written; any other host (an empty label, two labels
 * before, a case or a dot that differs) as the labels decide: both
 * matchers agree (match_on) and the route is the one wanted. */
START_TEST(star_then_literal_host_as_the_labels_decide) {
    sy_router *r;
    sy_snapshot *s = snapshot_of(&r, "\"Path=/p%d\",\"Host=*.t.example.org\"",
                                 "\"Path=/**\"");
    static const struct {
        const char *host, *want;
    } t[] = {
        {"eu.t.example.org", "r5"},
        {"e.t.example.org", "r5"},
        {"EU.t.example.org", "r5"},
        {"x.t.example.org", "r5"},
        {"eu..t.example.org", "r5"},
        {"eu.t..example.org", "r5"},
        {"eu.T.example.org", "last"},
        {"a.b.t.example.org", "last"},
        {".t.example.org", "last"},
        {"t.example.org", "last"},
        {"eu.t.example.org.", "last"},
        {"eu.t.example.orgx", "last"},
        {"eu.t.example.or", "last"},
        {"eu.txexample.org", "last"},
        {"", "last"},
    };
    for (size_t i = 0; i < SY_ARRAY_LEN(t); i++) {
        rq q = request("GET", t[i].host, "/p5");
        sy_match *m = match_on(s, &q);
        const char *got = m ? sy_route_id(sy_match_route(m)) : NULL;
        ck_assert_msg(got && strcmp(got, t[i].want) == 0, "[%s]: %s", t[i].host,
                      got ? got : "(none)");
    }
    sy_snapshot_release(s);
    sy_router_free(r);
}
END_TEST

/* A route whose Host the index proves and whose other predicates are
 * Methods and one literal Path is decided by that Path on the plain
 * path's text (SY_CAND_LIT): a path equal, with a trailing slash, under a
 * "/" then "**", a wildcard label's capture, a Path that fails and lets the
 * next candidate (or the fallback) through; anything else the shortcut does not
 * cover (a Header, another method, an odd host, a path not plain) as before.
 * Both matchers agree (match_on) and the route is the one wanted. */
START_TEST(a_literal_path_behind_a_proven_host_decides_it) {
    sy_router *r =
        router_with("[{\"id\":\"a\",\"uri\":\"http://a\",\"predicates\":["
                    "\"Method=GET,POST\",\"Host=a.example.com\",\"Path=/p\"]},"
                    "{\"id\":\"a2\",\"uri\":\"http://a\",\"predicates\":["
                    "\"Host=a.example.com\",\"Path=/p/q\"]},"
                    "{\"id\":\"r\",\"uri\":\"http://a\",\"predicates\":["
                    "\"Path=/r/**\",\"Host=r.example.com\"]},"
                    "{\"id\":\"w\",\"uri\":\"http://a\",\"predicates\":["
                    "\"Host={sub}.w.example.com\",\"Path=/w\"]},"
                    "{\"id\":\"x\",\"uri\":\"http://a\",\"predicates\":["
                    "\"Host=x.example.com\",\"Path=/x\",\"Header=X-A\"]},"
                    "{\"id\":\"m\",\"uri\":\"http://a\",\"predicates\":["
                    "\"Host=m.example.com\",\"Method=PURGE\",\"Path=/m\"]},"
                    "{\"id\":\"last\",\"uri\":\"http://a\",\"order\":1,"
                    "\"predicates\":[\"Path=/**\"]}]");
    sy_snapshot *s = sy_router_acquire(r);
    static const struct {
        const char *method, *host, *path, *want, *sub;
    } t[] = {
        {"GET", "a.example.com", "/p", "a", NULL},
        {"POST", "a.example.com", "/p", "a", NULL},
        {"PUT", "a.example.com", "/p", "last", NULL},
        {"GET", "a.example.com", "/p/", "a", NULL},
        {"GET", "a.example.com", "/p/q", "a2", NULL},
        {"PUT", "a.example.com", "/p/q", "a2", NULL},
        {"GET", "a.example.com", "/pq", "last", NULL},
        {"GET", "a.example.com", "/P", "last", NULL},
        {"GET", "a.example.com", "/", "last", NULL},
        {"GET", "a.example.com", "//p", "last", NULL},
        {"GET", "a.example.com", "/p%2F", "last", NULL},
        {"GET", "a.example.com", "/./p", "a", NULL},
        {"GET", "a.example.com.", "/p", "last", NULL},
        {"GET", "b.example.com", "/p", "last", NULL},
        {"GET", "r.example.com", "/r/x/y", "r", NULL},
        {"GET", "r.example.com", "/r", "r", NULL},
        {"GET", "r.example.com", "/rx", "last", NULL},
        {"GET", "eu.w.example.com", "/w", "w", "eu"},
        {"GET", "eu.w.example.com", "/w/", "w", "eu"},
        {"GET", "eu.w.example.com", "/w2", "last", NULL},
        {"GET", "x.example.com", "/x", "last", NULL},
        {"PURGE", "m.example.com", "/m", "m", NULL},
        {"GET", "m.example.com", "/m", "last", NULL},
    };
    for (size_t i = 0; i < SY_ARRAY_LEN(t); i++) {
        rq q = request(t[i].method, t[i].host, t[i].path);
        sy_match *m = match_on(s, &q);
        const char *got = m ? sy_route_id(sy_match_route(m)) : NULL;
        ck_assert_msg(got && strcmp(got, t[i].want) == 0, "%s %s%s: %s",
                      t[i].method, t[i].host, t[i].path, got ? got : "(none)");
        ck_assert_uint_eq(sy_match_var_count(m), t[i].sub ? 1 : 0);
        if (t[i].sub)
            ck_assert_sy_str(sy_match_var_get(m, "sub"), t[i].sub);
    }
    rq q = request("GET", "x.example.com", "/x");
    add_header(&q, "X-A", "1");
    sy_match *m = match_on(s, &q);
    ck_assert_ptr_nonnull(m);
    ck_assert_str_eq(sy_route_id(sy_match_route(m)), "x");
    sy_snapshot_release(s);
    sy_router_free(r);
}
END_TEST

/* ------------------------------------------------------------------ */
/* The filter plan                                                      */
/* ------------------------------------------------------------------ */

/* Router with one route `filters` (a JSON array) on Path=`pattern`. */
/* A literal Path just past predicate SY_ROUTE_LITERAL_MAX is not recorded
 * for the index (literal_path is 4 bits): the route is then tested as
 * usual and still matches exactly as the linear scan says. */
START_TEST(literal_path_past_the_limit_is_tested_as_usual) {
    char *json = malloc(8192);
    ck_assert_ptr_nonnull(json);
    size_t n = (size_t)snprintf(json, 8192,
                                "[{\"id\":\"late\",\"uri\":\"no://op\","
                                "\"predicates\":[");
    for (int i = 0; i < SY_ROUTE_LITERAL_MAX + 1; i++)
        n += (size_t)snprintf(json + n, 8192 - n, "\"Method=GET\",");
    /* "early": its Path is the last one the field holds */
    n += (size_t)snprintf(json + n, 8192 - n,
                          "\"Path=/a/b\"]},{\"id\":\"early\",\"uri\":"
                          "\"no://op\",\"predicates\":[");
    for (int i = 0; i < SY_ROUTE_LITERAL_MAX; i++)
        n += (size_t)snprintf(json + n, 8192 - n, "\"Method=GET\",");
    snprintf(json + n, 8192 - n,
             "\"Path=/x/y\"]},"
             "{\"id\":\"other\",\"uri\":\"no://op\",\"order\":1,"
             "\"predicates\":[\"Path=/a/**\"]}]");
    sy_router *r = router_with(json);
    free(json);
    rq q = request("GET", "h", "/a/b");
    sy_snapshot *s = sy_router_acquire(r);
    sy_match *m = match_on(s, &q);
    ck_assert_ptr_nonnull(m);
    ck_assert_str_eq(sy_route_id(sy_match_route(m)), "late");
    ck_assert_int_eq(sy_match_route(m)->literal_path, -1);
    q = request("GET", "h", "/x/y");
    m = match_on(s, &q);
    ck_assert_ptr_nonnull(m);
    ck_assert_str_eq(sy_route_id(sy_match_route(m)), "early");
    ck_assert_int_eq(sy_match_route(m)->literal_path, SY_ROUTE_LITERAL_MAX);
    sy_snapshot_release(s);
    q = request("GET", "h", "/a/c");
    ck_assert_str_eq(match_id(r, &q), "other");
    q = request("POST", "h", "/a/b");
    ck_assert_str_eq(match_id(r, &q), "other");
    sy_router_free(r);
}
END_TEST

static sy_router *route_with_filters(const char *pattern, const char *filters) {
    char doc[2048];
    snprintf(doc, sizeof doc,
             "[{\"id\":\"r\",\"uri\":\"http://up\",\"predicates\":"
             "[\"Path=%s\"],\"filters\":%s}]",
             pattern, filters);
    return router_with(doc);
}

typedef struct held {
    sy_router *r;
    sy_snapshot *s;
    sy_match *m;
} held;

static held match_held(sy_router *r, const rq *q) {
    held h = {r, sy_router_acquire(r), NULL};
    h.m = match_on(h.s, q);
    ck_assert_ptr_nonnull(h.m);
    return h;
}

static void held_free(held *h) {
    sy_snapshot_release(h->s);
    sy_router_free(h->r);
}

/* The value of the first upstream header of that name, or NULL. */
static const char *plan_header(sy_match *m, const char *name) {
    static char buf[256];
    for (size_t i = 0; i < sy_match_header_count(m); i++) {
        sy_header hd = sy_match_header(m, i);
        if (hd.name.len == strlen(name) &&
            strncasecmp(hd.name.ptr, name, hd.name.len) == 0) {
            snprintf(buf, sizeof buf, "%.*s", (int)hd.value.len, hd.value.ptr);
            return buf;
        }
    }
    return NULL;
}

START_TEST(plan_without_filters_keeps_path_query_and_headers) {
    sy_router *r = route_with_filters("/a/**", "[]");
    rq q = request("GET", "h", "/a/b");
    q.req.query = S("x=1&y=2");
    add_header(&q, "Accept", "text/html");
    held h = match_held(r, &q);
    ck_assert_int_eq(sy_match_action(h.m), SY_ACTION_PROXY);
    ck_assert_int_eq(sy_match_status(h.m), 0);
    ck_assert_sy_str(sy_match_path(h.m), "/a/b");
    ck_assert_sy_str(sy_match_query(h.m), "x=1&y=2");
    ck_assert_uint_eq(sy_match_header_count(h.m), 1);
    ck_assert_str_eq(plan_header(h.m, "Accept"), "text/html");
    ck_assert_ptr_null(sy_match_redirect(h.m).ptr);
    ck_assert(!sy_match_preserve_host(h.m));
    ck_assert_uint_eq(sy_match_response_op_count(h.m), 0);
    ck_assert_uint_eq(sy_match_host_filter_count(h.m), 0);
    held_free(&h);
}
END_TEST

START_TEST(strip_prefix_drops_leading_segments) {
    sy_router *r = route_with_filters("/a/**", "[\"StripPrefix=2\"]");
    rq q = request("GET", "h", "/a/b/c/d");
    q.req.query = S("k=v");
    held h = match_held(r, &q);
    ck_assert_sy_str(sy_match_path(h.m), "/c/d");
    ck_assert_sy_str(sy_match_query(h.m), "k=v");
    held_free(&h);
}
END_TEST

START_TEST(strip_prefix_of_every_segment_leaves_root) {
    sy_router *r = route_with_filters("/a/**", "[\"StripPrefix=2\"]");
    rq q = request("GET", "h", "/a/b");
    held h = match_held(r, &q);
    ck_assert_sy_str(sy_match_path(h.m), "/");
    held_free(&h);
}
END_TEST

START_TEST(strip_prefix_keeps_trailing_slash) {
    sy_router *r = route_with_filters("/a/**", "[\"StripPrefix=1\"]");
    rq q = request("GET", "h", "/a/b/");
    held h = match_held(r, &q);
    ck_assert_sy_str(sy_match_path(h.m), "/b/");
    held_free(&h);
}
END_TEST

START_TEST(prefix_path_prepends_the_prefix) {
    sy_router *r = route_with_filters("/x/**", "[\"PrefixPath=/pre\"]");
    rq q = request("GET", "h", "/x/y");
    held h = match_held(r, &q);
    ck_assert_sy_str(sy_match_path(h.m), "/pre/x/y");
    held_free(&h);
}
END_TEST

START_TEST(set_path_expands_captured_variables) {
    sy_router *r =
        route_with_filters("/u/{id}", "[\"SetPath=/users/{id}/profile\"]");
    rq q = request("GET", "h", "/u/42");
    held h = match_held(r, &q);
    ck_assert_sy_str(sy_match_path(h.m), "/users/42/profile");
    held_free(&h);
}
END_TEST

START_TEST(rewrite_path_replaces_with_named_groups) {
    sy_router *r = route_with_filters(
        "/api/**", "[\"RewritePath=/api/(?<rest>.*), /v2/${rest}\"]");
    rq q = request("GET", "h", "/api/a/b");
    held h = match_held(r, &q);
    ck_assert_sy_str(sy_match_path(h.m), "/v2/a/b");
    held_free(&h);
}
END_TEST

/* A router and a match context with different allocators (the router's
 * counts its blocks, the context's is the default): a rewrite with groups
 * (PCRE2 copies the match data with the match context's allocator) runs
 * and leaves the router's count as it found it. */
START_TEST(rewrite_path_with_router_and_context_on_different_allocators) {
    sy_test_alloc cnt = {0};
    sy_allocator al = sy_test_allocator(&cnt);
    sy_router_options o = SY_ROUTER_OPTIONS_INIT;
    o.allocator = &al;
    sy_router *r = new_router(&o, "main");
    apply(r, "main",
          "[{\"id\":\"r\",\"uri\":\"http://up\",\"predicates\":"
          "[\"Path=/api/**\"],\"filters\":"
          "[\"RewritePath=/api/(?<rest>.*), /v2/${rest}\"]}]");
    for (int round = 0; round < 2; round++) {
        sy_match_ctx *mine = NULL;
        sy_allocator own = sy_test_allocator(&(sy_test_alloc){0});
        ck_assert_int_eq(sy_match_ctx_new(round ? &own : NULL, &mine, NULL), 0);
        sy_snapshot *s = sy_router_acquire(r);
        rq q = request("GET", "h", "/api/a/b");
        sy_match *m = NULL;
        ck_assert_int_eq(sy_snapshot_match(s, mine, &q.req, &m), 0);
        ck_assert_ptr_nonnull(m);
        long live = cnt.live;
        ck_assert_sy_str(sy_match_path(m), "/v2/a/b");
        ck_assert_int_eq(cnt.live, live); /* the router's allocator unused */
        sy_snapshot_release(s);
        sy_match_ctx_free(mine);
    }
    sy_router_free(r);
    ck_assert_int_eq(cnt.live, 0);
}
END_TEST

START_TEST(add_request_header_expands_variables) {
    sy_router *r = route_with_filters(
        "/u/{id}", "[\"AddRequestHeader=X-User,user-{id}\"]");
    rq q = request("GET", "h", "/u/7");
    add_header(&q, "Accept", "*/*");
    held h = match_held(r, &q);
    ck_assert_uint_eq(sy_match_header_count(h.m), 2);
    sy_header first = sy_match_header(h.m, 0), second = sy_match_header(h.m, 1);
    ck_assert_sy_str(first.name, "Accept");
    ck_assert_sy_str(second.name, "X-User");
    ck_assert_sy_str(second.value, "user-7");
    held_free(&h);
}
END_TEST

START_TEST(set_and_remove_request_header) {
    sy_router *r =
        route_with_filters("/**", "[\"SetRequestHeader=X-Env,prod\","
                                  "\"RemoveRequestHeader=X-Secret\"]");
    rq q = request("GET", "h", "/");
    add_header(&q, "X-Env", "dev");
    add_header(&q, "X-Secret", "s3");
    held h = match_held(r, &q);
    ck_assert_str_eq(plan_header(h.m, "X-Env"), "prod");
    ck_assert_ptr_null(plan_header(h.m, "X-Secret"));
    ck_assert_uint_eq(sy_match_header_count(h.m), 1);
    held_free(&h);
}
END_TEST

START_TEST(add_request_parameter_appends_to_the_query) {
    sy_router *r =
        route_with_filters("/**", "[\"AddRequestParameter=added,1\"]");
    rq q = request("GET", "h", "/");
    q.req.query = S("x=2");
    held h = match_held(r, &q);
    ck_assert_sy_str(sy_match_query(h.m), "x=2&added=1");
    held_free(&h);
}
END_TEST

START_TEST(response_header_filters_become_response_ops) {
    sy_router *r =
        route_with_filters("/**", "[\"AddResponseHeader=X-A,1\","
                                  "\"AddResponseHeader=X-B,2,false\","
                                  "\"SetResponseHeader=X-C,3\","
                                  "\"RemoveResponseHeader=X-D\"]");
    rq q = request("GET", "h", "/");
    held h = match_held(r, &q);
    ck_assert_uint_eq(sy_match_response_op_count(h.m), 4);
    sy_response_op op = sy_match_response_op(h.m, 0);
    ck_assert_int_eq(op.kind, SY_RESP_ADD);
    ck_assert_sy_str(op.name, "X-A");
    ck_assert_sy_str(op.value, "1");
    op = sy_match_response_op(h.m, 1);
    ck_assert_int_eq(op.kind, SY_RESP_ADD_IF_ABSENT);
    ck_assert_sy_str(op.name, "X-B");
    op = sy_match_response_op(h.m, 2);
    ck_assert_int_eq(op.kind, SY_RESP_SET);
    ck_assert_sy_str(op.name, "X-C");
    ck_assert_sy_str(op.value, "3");
    op = sy_match_response_op(h.m, 3);
    ck_assert_int_eq(op.kind, SY_RESP_REMOVE);
    ck_assert_sy_str(op.name, "X-D");
    held_free(&h);
}
END_TEST

START_TEST(set_status_sets_the_response_status) {
    sy_router *r = route_with_filters("/**", "[\"SetStatus=418\"]");
    rq q = request("GET", "h", "/");
    held h = match_held(r, &q);
    ck_assert_int_eq(sy_match_action(h.m), SY_ACTION_PROXY);
    ck_assert_int_eq(sy_match_status(h.m), 418);
    held_free(&h);
}
END_TEST

START_TEST(request_header_size_answers_431_when_a_header_is_too_large) {
    sy_router *r = route_with_filters("/**", "[\"RequestHeaderSize=32B\"]");
    rq q = request("GET", "h", "/");
    add_header(&q, "X-Big", "0123456789012345678901234567890123456789");
    held h = match_held(r, &q);
    ck_assert_int_eq(sy_match_action(h.m), SY_ACTION_RESPOND);
    ck_assert_int_eq(sy_match_status(h.m), 431);
    held_free(&h);
}
END_TEST

START_TEST(request_header_size_lets_small_headers_through) {
    sy_router *r = route_with_filters("/**", "[\"RequestHeaderSize=32B\"]");
    rq q = request("GET", "h", "/");
    add_header(&q, "X-Small", "ok");
    held h = match_held(r, &q);
    ck_assert_int_eq(sy_match_action(h.m), SY_ACTION_PROXY);
    ck_assert_int_eq(sy_match_status(h.m), 0);
    held_free(&h);
}
END_TEST

START_TEST(request_size_answers_413_when_content_length_is_larger) {
    sy_router *r = route_with_filters(
        "/**", "[{\"name\":\"RequestSize\",\"args\":{\"maxSize\":\"100B\"}}]");
    rq q = request("POST", "h", "/");
    q.req.content_length = 101;
    held h = match_held(r, &q);
    ck_assert_int_eq(sy_match_action(h.m), SY_ACTION_RESPOND);
    ck_assert_int_eq(sy_match_status(h.m), 413);
    held_free(&h);
}
END_TEST

START_TEST(request_size_ignores_unknown_content_length) {
    sy_router *r = route_with_filters(
        "/**", "[{\"name\":\"RequestSize\",\"args\":{\"maxSize\":\"100B\"}}]");
    rq q = request("POST", "h", "/");
    q.req.content_length = -1;
    held h = match_held(r, &q);
    ck_assert_int_eq(sy_match_action(h.m), SY_ACTION_PROXY);
    held_free(&h);
}
END_TEST

START_TEST(redirect_to_answers_with_status_and_location) {
    sy_router *r = route_with_filters(
        "/old/**", "[\"RedirectTo=301,https://new.example/\"]");
    rq q = request("GET", "h", "/old/x");
    q.req.query = S("a=1");
    held h = match_held(r, &q);
    ck_assert_int_eq(sy_match_action(h.m), SY_ACTION_REDIRECT);
    ck_assert_int_eq(sy_match_status(h.m), 301);
    ck_assert_sy_str(sy_match_redirect(h.m), "https://new.example/");
    held_free(&h);
}
END_TEST

START_TEST(redirect_to_can_include_request_params) {
    sy_router *r = route_with_filters(
        "/old/**", "[\"RedirectTo=302,https://new.example/p,true\"]");
    rq q = request("GET", "h", "/old/x");
    q.req.query = S("a=1");
    held h = match_held(r, &q);
    ck_assert_int_eq(sy_match_status(h.m), 302);
    ck_assert_sy_str(sy_match_redirect(h.m), "https://new.example/p?a=1");
    held_free(&h);
}
END_TEST

START_TEST(preserve_host_header_is_reported) {
    sy_router *r = route_with_filters("/**", "[\"PreserveHostHeader\"]");
    rq q = request("GET", "h", "/");
    held h = match_held(r, &q);
    ck_assert(sy_match_preserve_host(h.m));
    held_free(&h);
}
END_TEST

START_TEST(stateful_filters_are_handed_to_the_host_in_order) {
    sy_router *r = route_with_filters(
        "/**", "[\"CircuitBreaker=cb\",\"StripPrefix=1\",\"Retry=3\"]");
    rq q = request("GET", "h", "/a/b");
    held h = match_held(r, &q);
    ck_assert_uint_eq(sy_match_host_filter_count(h.m), 2);
    ck_assert_str_eq(sy_match_host_filter(h.m, 0)->name, "CircuitBreaker");
    ck_assert_str_eq(sy_match_host_filter(h.m, 1)->name, "Retry");
    ck_assert_ptr_null(sy_match_host_filter(h.m, 2));
    ck_assert_sy_str(sy_match_path(h.m), "/b");
    held_free(&h);
}
END_TEST

/* More host entries than the plan holds in itself (four): the rest in
 * the scratch arena, all in the chain's order. */
#define RRL(RATE)                                                              \
    "{\"name\":\"RequestRateLimiter\",\"args\":{"                              \
    "\"redis-rate-limiter.replenishRate\":\"" RATE "\","                       \
    "\"key-resolver\":\"#{@routeKeyResolver}\"}}"
START_TEST(host_filters_past_the_fourth_keep_their_order) {
    sy_router *r = route_with_filters(
        "/**", "[\"CircuitBreaker=cb\"," RRL("5") ",\"StripPrefix=1\"," RRL(
                   "6") "," RRL("7") ",\"Retry=3\"]");
    rq q = request("GET", "h", "/a/b");
    held h = match_held(r, &q);
    static const char *const want[] = {"CircuitBreaker", "RequestRateLimiter",
                                       "RequestRateLimiter",
                                       "RequestRateLimiter", "Retry"};
    ck_assert_uint_eq(sy_match_host_filter_count(h.m), 5);
    for (size_t i = 0; i < 5; i++)
        ck_assert_str_eq(sy_match_host_filter(h.m, i)->name, want[i]);
    /* the limiters by their own args, in the chain's order */
    for (size_t i = 0; i < 3; i++) {
        const sy_filter_entry *e = sy_match_host_filter(h.m, i + 1);
        char rate[2] = {(char)('5' + i), 0};
        const char *got = NULL;
        for (size_t k = 0; k < e->arg_count; k++)
            if (!strcmp(e->args[k].key, "redis-rate-limiter.replenishRate"))
                got = e->args[k].value;
        ck_assert_str_eq(got, rate);
    }
    ck_assert_ptr_null(sy_match_host_filter(h.m, 5));
    ck_assert_sy_str(sy_match_path(h.m), "/b");
    held_free(&h);
}
END_TEST

START_TEST(route_filters_apply_in_list_order) {
    /* StripPrefix then PrefixPath: /a/b -> /b -> /p/b */
    sy_router *r =
        route_with_filters("/a/**", "[\"StripPrefix=1\",\"PrefixPath=/p\"]");
    rq q = request("GET", "h", "/a/b");
    held h = match_held(r, &q);
    ck_assert_sy_str(sy_match_path(h.m), "/p/b");
    held_free(&h);
}
END_TEST

START_TEST(default_filters_are_applied_before_route_filters) {
    sy_router_options o = SY_ROUTER_OPTIONS_INIT;
    o.default_filters = "[\"PrefixPath=/gw\",\"SetRequestHeader=X-From,gw\"]";
    sy_router *r = new_router(&o, "main");
    apply(
        r, "main",
        "[{\"id\":\"r\",\"uri\":\"http://up\",\"predicates\":[\"Path=/a/**\"],"
        "\"filters\":[\"StripPrefix=1\",\"SetRequestHeader=X-From,route\"]}]");
    rq q = request("GET", "h", "/a/b");
    held h = match_held(r, &q);
    /* defaults first: /a/b -> /gw/a/b -> /a/b (route-first gives /gw/b) */
    ck_assert_sy_str(sy_match_path(h.m), "/a/b");
    ck_assert_str_eq(plan_header(h.m, "X-From"), "route");
    held_free(&h);
}
END_TEST

START_TEST(default_filters_apply_to_every_route) {
    sy_router_options o = SY_ROUTER_OPTIONS_INIT;
    o.default_filters = "[\"AddResponseHeader=X-Gateway,sy\"]";
    sy_router *r = new_router(&o, "main");
    apply(r, "main",
          "[{\"id\":\"a\",\"uri\":\"http://up\",\"predicates\":[\"Path=/a\"]},"
          " {\"id\":\"b\",\"uri\":\"http://up\",\"predicates\":[\"Path=/b\"],"
          "\"filters\":[\"AddResponseHeader=X-Route,b\"]}]");
    rq q = request("GET", "h", "/b");
    held h = match_held(r, &q);
    ck_assert_uint_eq(sy_match_response_op_count(h.m), 2);
    ck_assert_sy_str(sy_match_response_op(h.m, 0).name, "X-Gateway");
    ck_assert_sy_str(sy_match_response_op(h.m, 1).name, "X-Route");
    sy_snapshot_release(h.s);
    h.s = sy_router_acquire(r);
    q = request("GET", "h", "/a");
    h.m = match_on(h.s, &q);
    ck_assert_ptr_nonnull(h.m);
    ck_assert_uint_eq(sy_match_response_op_count(h.m), 1);
    ck_assert_sy_str(sy_match_response_op(h.m, 0).value, "sy");
    held_free(&h);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Explain                                                              */
/* ------------------------------------------------------------------ */

typedef struct explained {
    char id[8][16];
    bool matched[8];
    int failed[8];
    char name[8][32];
    size_t n;
    size_t stop_after; /* 0: never stop */
} explained;

static int explain_cb(void *data, const sy_route *route, bool matched,
                      int failed_predicate, const char *failed_name) {
    explained *e = data;
    ck_assert_uint_lt(e->n, 8);
    snprintf(e->id[e->n], sizeof e->id[0], "%s", sy_route_id(route));
    e->matched[e->n] = matched;
    e->failed[e->n] = failed_predicate;
    snprintf(e->name[e->n], sizeof e->name[0], "%s",
             failed_name ? failed_name : "");
    e->n++;
    return e->stop_after && e->n >= e->stop_after;
}

static const char *explain_doc =
    "[{\"id\":\"later\",\"uri\":\"http://a\",\"order\":5,"
    "\"predicates\":[\"Path=/x\"]},"
    " {\"id\":\"post\",\"uri\":\"http://a\",\"predicates\":"
    "[\"Path=/x\",\"Method=POST\"]},"
    " {\"id\":\"off\",\"uri\":\"http://a\",\"predicates\":[\"Path=/x\"],"
    "\"metadata\":{\"status\":\"disabled\"}},"
    " {\"id\":\"other\",\"uri\":\"http://a\",\"predicates\":[\"Path=/y\"]},"
    " {\"id\":\"hit\",\"uri\":\"http://a\",\"predicates\":[\"Path=/x\"]}]";

START_TEST(explain_reports_every_route_in_rank_order) {
    sy_router *r = router_with(explain_doc);
    rq q = request("GET", "h", "/x");
    sy_snapshot *s = sy_router_acquire(r);
    explained e;
    memset(&e, 0, sizeof e);
    ck_assert_int_eq(sy_snapshot_explain(s, ctx_ix, &q.req, explain_cb, &e), 0);
    ck_assert_uint_eq(e.n, 5);
    ck_assert_str_eq(e.id[0], "post");
    ck_assert(!e.matched[0]);
    ck_assert_int_eq(e.failed[0], 1);
    ck_assert_str_eq(e.name[0], "Method");
    ck_assert_str_eq(e.id[1], "off");
    ck_assert(!e.matched[1]);
    ck_assert_int_eq(e.failed[1], -1);
    ck_assert_str_eq(e.name[1], "disabled");
    ck_assert_str_eq(e.id[2], "other");
    ck_assert(!e.matched[2]);
    ck_assert_int_eq(e.failed[2], 0);
    ck_assert_str_eq(e.name[2], "Path");
    ck_assert_str_eq(e.id[3], "hit");
    ck_assert(e.matched[3]);
    ck_assert_str_eq(e.id[4], "later");
    ck_assert(e.matched[4]);
    sy_snapshot_release(s);
    sy_router_free(r);
}
END_TEST

START_TEST(explain_stops_when_the_callback_says_so) {
    sy_router *r = router_with(explain_doc);
    rq q = request("GET", "h", "/x");
    sy_snapshot *s = sy_router_acquire(r);
    explained e;
    memset(&e, 0, sizeof e);
    e.stop_after = 2;
    ck_assert_int_eq(sy_snapshot_explain(s, ctx_ix, &q.req, explain_cb, &e), 0);
    ck_assert_uint_eq(e.n, 2);
    sy_snapshot_release(s);
    sy_router_free(r);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Snapshots and changes                                                */
/* ------------------------------------------------------------------ */

START_TEST(snapshot_held_across_apply_keeps_matching_old_routes) {
    sy_router *r = router_with(
        "[{\"id\":\"old\",\"uri\":\"http://a\",\"predicates\":[\"Path=/x\"]}]");
    sy_snapshot *before = sy_router_acquire(r);
    apply(
        r, "main",
        "[{\"id\":\"new\",\"uri\":\"http://a\",\"predicates\":[\"Path=/x\"]}]");
    rq q = request("GET", "h", "/x");
    sy_match *m = match_on(before, &q);
    ck_assert_ptr_nonnull(m);
    ck_assert_str_eq(sy_route_id(sy_match_route(m)), "old");
    ck_assert_match(r, &q, "new");
    sy_snapshot *after = sy_router_acquire(r);
    ck_assert_uint_lt(sy_snapshot_generation(before),
                      sy_snapshot_generation(after));
    /* the old snapshot still matches after the new one was used */
    m = match_on(before, &q);
    ck_assert_ptr_nonnull(m);
    ck_assert_str_eq(sy_route_id(sy_match_route(m)), "old");
    sy_snapshot_release(after);
    sy_snapshot_release(before);
    sy_router_free(r);
}
END_TEST

/* A 405's Allow names the routes that failed only on their Method,
 * whose slots a candidate no longer carries (the index's slot array, an
 * overlay group's after its keys): from the base index, from routes
 * upserted since (an overlay), both in one request's lists, and with a
 * removed route's dead entry in the base (the route read from the
 * slot). */
static void assert_allow(sy_router *r, const char *path, const char *a,
                         const char *b) {
    rq q = request("GET", "h", path);
    sy_snapshot *s = sy_router_acquire(r);
    ck_assert_ptr_null(match_on(s, &q));
    sy_str allow;
    ck_assert_int_eq(sy_match_ctx_nomatch(ctx_ix, &allow), SY_NOMATCH_METHOD);
    char got[64];
    snprintf(got, sizeof got, "%.*s", (int)allow.len, allow.ptr);
    ck_assert_msg(strstr(got, a) && (!b || strstr(got, b)) &&
                      !strstr(got, "GET"),
                  "%s: Allow %s", path, got);
    sy_snapshot_release(s);
}

START_TEST(allow_names_base_and_overlay_routes) {
    sy_router *r = router_with(
        "[{\"id\":\"a\",\"uri\":\"http://a\",\"predicates\":[\"Path=/a\"]},"
        " {\"id\":\"d\",\"uri\":\"http://d\","
        "\"predicates\":[\"Method=DELETE\",\"Path=/m\"]},"
        " {\"id\":\"x\",\"uri\":\"http://x\","
        "\"predicates\":[\"Method=PATCH\",\"Path=/x\"]}]");
    assert_allow(r, "/m", "DELETE", NULL);
    const char *o = "{\"id\":\"o\",\"uri\":\"http://o\","
                    "\"predicates\":[\"Method=POST\",\"Path=/o\"]}";
    ck_assert_int_eq(sy_router_upsert_route(r, "main", o, strlen(o), NULL), 0);
    const char *m = "{\"id\":\"m\",\"uri\":\"http://m\","
                    "\"predicates\":[\"Method=PUT\",\"Path=/m\"]}";
    ck_assert_int_eq(sy_router_upsert_route(r, "main", m, strlen(m), NULL), 0);
    assert_allow(r, "/o", "POST", NULL);
    assert_allow(r, "/m", "DELETE", "PUT");
    ck_assert_int_eq(sy_router_remove_route(r, "a", NULL), 0);
    assert_allow(r, "/x", "PATCH", NULL);
    assert_allow(r, "/m", "DELETE", "PUT");
    sy_router_free(r);
}
END_TEST

/* The one-list loop keeps a refused candidate itself and finds its slot
 * only on a miss: every route of the list its method refused is named,
 * in rank order, past a removed one and a matching path of another
 * method; a method one of them allows still finds its route. */
START_TEST(allow_names_every_refused_candidate_of_one_list) {
    sy_router *r =
        router_with("[{\"id\":\"d\",\"uri\":\"http://d\","
                    "\"predicates\":[\"Method=DELETE\",\"Path=/r/{x}\"]},"
                    " {\"id\":\"g\",\"uri\":\"http://g\","
                    "\"predicates\":[\"Method=HEAD\",\"Path=/r/{x}\"]},"
                    " {\"id\":\"p\",\"uri\":\"http://p\","
                    "\"predicates\":[\"Method=PATCH\",\"Path=/r/{x}\"]},"
                    " {\"id\":\"u\",\"uri\":\"http://u\","
                    "\"predicates\":[\"Method=PUT\",\"Path=/r/{x}/y\"]}]");
    ck_assert_int_eq(sy_router_remove_route(r, "g", NULL), 0);
    rq q = request("GET", "h", "/r/1");
    sy_snapshot *s = sy_router_acquire(r);
    ck_assert_ptr_null(match_on(s, &q));
    sy_str allow;
    ck_assert_int_eq(sy_match_ctx_nomatch(ctx_ix, &allow), SY_NOMATCH_METHOD);
    ck_assert_int_eq((int)allow.len, (int)strlen("DELETE, PATCH"));
    ck_assert(memcmp(allow.ptr, "DELETE, PATCH", allow.len) == 0);
    sy_snapshot_release(s);
    rq p = request("PATCH", "h", "/r/1");
    ck_assert_match(r, &p, "p");
    sy_router_free(r);
}
END_TEST

START_TEST(upsert_is_visible_at_the_next_acquire) {
    sy_router *r = router_with(
        "[{\"id\":\"a\",\"uri\":\"http://a\",\"predicates\":[\"Path=/a\"]}]");
    sy_snapshot *before = sy_router_acquire(r);
    const char *route =
        "{\"id\":\"b\",\"uri\":\"http://b\",\"predicates\":[\"Path=/b\"]}";
    ck_assert_int_eq(
        sy_router_upsert_route(r, "main", route, strlen(route), NULL), 0);
    rq q = request("GET", "h", "/b");
    ck_assert_ptr_null(match_on(before, &q));
    ck_assert_match(r, &q, "b");
    sy_snapshot_release(before);
    sy_router_free(r);
}
END_TEST

START_TEST(upsert_replaces_a_route_and_keeps_its_rank_position) {
    sy_router *r = router_with(
        "[{\"id\":\"a\",\"uri\":\"http://a\",\"predicates\":[\"Path=/a\"]},"
        " {\"id\":\"b\",\"uri\":\"http://b\",\"predicates\":[\"Path=/b\"]}]");
    /* b now also serves /a; a, defined first, still wins there */
    const char *route =
        "{\"id\":\"b\",\"uri\":\"http://b\",\"predicates\":[\"Path=/a,/b\"]}";
    ck_assert_int_eq(
        sy_router_upsert_route(r, "main", route, strlen(route), NULL), 0);
    rq q = request("GET", "h", "/a");
    ck_assert_match(r, &q, "a");
    /* and a replaced definition of a keeps a first */
    route = "{\"id\":\"a\",\"uri\":\"http://a2\",\"predicates\":[\"Path=/a\"]}";
    ck_assert_int_eq(
        sy_router_upsert_route(r, "main", route, strlen(route), NULL), 0);
    sy_snapshot *s = sy_router_acquire(r);
    ck_assert_str_eq(sy_route_id(sy_snapshot_route_at(s, 0)), "a");
    ck_assert_str_eq(sy_route_uri(sy_snapshot_route_at(s, 0)), "http://a2");
    sy_snapshot_release(s);
    ck_assert_match(r, &q, "a");
    sy_router_free(r);
}
END_TEST

START_TEST(remove_is_visible_at_the_next_acquire) {
    sy_router *r = router_with(
        "[{\"id\":\"a\",\"uri\":\"http://a\",\"predicates\":[\"Path=/x\"]},"
        " {\"id\":\"b\",\"uri\":\"http://b\",\"predicates\":[\"Path=/x\"]}]");
    sy_snapshot *before = sy_router_acquire(r);
    ck_assert_int_eq(sy_router_remove_route(r, "a", NULL), 0);
    rq q = request("GET", "h", "/x");
    ck_assert_str_eq(sy_route_id(sy_match_route(match_on(before, &q))), "a");
    ck_assert_match(r, &q, "b");
    sy_snapshot *s = sy_router_acquire(r);
    ck_assert_ptr_null(sy_snapshot_find_route(s, "a", NULL));
    sy_snapshot_release(s);
    sy_error err = {0};
    ck_assert_int_eq(sy_router_remove_route(r, "a", &err), SY_ENOTFOUND);
    sy_snapshot_release(before);
    sy_router_free(r);
}
END_TEST

START_TEST(set_route_enabled_toggles_matching) {
    sy_router *r = router_with(
        "[{\"id\":\"a\",\"uri\":\"http://a\",\"predicates\":[\"Path=/x\"]},"
        " {\"id\":\"b\",\"uri\":\"http://b\",\"predicates\":[\"Path=/x\"]}]");
    rq q = request("GET", "h", "/x");
    ck_assert_int_eq(sy_router_set_route_enabled(r, "a", false, NULL), 0);
    ck_assert_match(r, &q, "b");
    sy_snapshot *s = sy_router_acquire(r);
    ck_assert(sy_route_disabled(sy_snapshot_find_route(s, "a", NULL)));
    /* disabling keeps the route in its rank position */
    ck_assert_str_eq(sy_route_id(sy_snapshot_route_at(s, 0)), "a");
    sy_snapshot_release(s);
    ck_assert_int_eq(sy_router_set_route_enabled(r, "a", true, NULL), 0);
    ck_assert_match(r, &q, "a");
    sy_router_free(r);
}
END_TEST

START_TEST(enabling_a_route_disabled_in_its_document) {
    sy_router *r = router_with(
        "[{\"id\":\"a\",\"uri\":\"http://a\",\"predicates\":[\"Path=/x\"],"
        "\"metadata\":{\"status\":\"disabled\"}}]");
    rq q = request("GET", "h", "/x");
    ck_assert_no_match(r, &q);
    ck_assert_int_eq(sy_router_set_route_enabled(r, "a", true, NULL), 0);
    ck_assert_match(r, &q, "a");
    sy_router_free(r);
}
END_TEST

START_TEST(find_route_reports_the_defining_source) {
    sy_router *r = new_router(NULL, "public");
    ck_assert_int_eq(sy_router_add_source(r, "orders", NULL), 0);
    apply(r, "public",
          "[{\"id\":\"p\",\"uri\":\"http://a\",\"predicates\":[\"Path=/p\"]}]");
    apply(r, "orders",
          "[{\"id\":\"o\",\"uri\":\"http://a\",\"predicates\":[\"Path=/o\"]}]");
    sy_snapshot *s = sy_router_acquire(r);
    const char *src = NULL;
    const sy_route *rt = sy_snapshot_find_route(s, "o", &src);
    ck_assert_ptr_nonnull(rt);
    ck_assert_str_eq(sy_route_id(rt), "o");
    ck_assert_str_eq(src, "orders");
    rt = sy_snapshot_find_route(s, "p", &src);
    ck_assert_str_eq(src, "public");
    ck_assert_ptr_null(sy_snapshot_find_route(s, "missing", &src));
    ck_assert_ptr_nonnull(sy_snapshot_find_route(s, "o", NULL));
    sy_snapshot_release(s);
    sy_router_free(r);
}
END_TEST

START_TEST(route_id_is_unique_across_sources) {
    sy_router *r = new_router(NULL, "public");
    ck_assert_int_eq(sy_router_add_source(r, "orders", NULL), 0);
    apply(r, "public",
          "[{\"id\":\"x\",\"uri\":\"http://a\",\"predicates\":[\"Path=/p\"]}]");
    const char *doc =
        "[{\"id\":\"x\",\"uri\":\"http://b\",\"predicates\":[\"Path=/o\"]}]";
    sy_error err = {0};
    ck_assert_int_eq(sy_router_apply(r, "orders", doc, strlen(doc), NULL, &err),
                     SY_EDUPLICATE);
    rq q = request("GET", "h", "/p");
    ck_assert_match(r, &q, "x");
    sy_router_free(r);
}
END_TEST

START_TEST(generation_grows_with_every_publish) {
    sy_router *r = new_router(NULL, "main");
    sy_snapshot *s0 = sy_router_acquire(r);
    apply(r, "main",
          "[{\"id\":\"a\",\"uri\":\"http://a\",\"predicates\":[\"Path=/a\"]}]");
    sy_snapshot *s1 = sy_router_acquire(r);
    ck_assert_int_eq(sy_router_remove_route(r, "a", NULL), 0);
    sy_snapshot *s2 = sy_router_acquire(r);
    ck_assert_uint_lt(sy_snapshot_generation(s0), sy_snapshot_generation(s1));
    ck_assert_uint_lt(sy_snapshot_generation(s1), sy_snapshot_generation(s2));
    sy_snapshot_release(s0);
    sy_snapshot_release(s1);
    sy_snapshot_release(s2);
    sy_router_free(r);
}
END_TEST

START_TEST(same_document_twice_does_not_publish) {
    sy_router *r = new_router(NULL, "main");
    const char *doc =
        "{\"version\":\"7\",\"routes\":[{\"id\":\"a\",\"uri\":\"http://a\","
        "\"predicates\":[\"Path=/a\"]}]}";
    apply(r, "main", doc);
    sy_snapshot *s1 = sy_router_acquire(r);
    sy_report *rep = NULL;
    ck_assert_int_eq(sy_router_apply(r, "main", doc, strlen(doc), &rep, NULL),
                     0);
    ck_assert_ptr_nonnull(rep);
    ck_assert(sy_report_skipped(rep));
    sy_report_free(rep);
    sy_snapshot *s2 = sy_router_acquire(r);
    ck_assert_uint_eq(sy_snapshot_generation(s1), sy_snapshot_generation(s2));
    sy_snapshot_release(s1);
    sy_snapshot_release(s2);
    sy_router_free(r);
}
END_TEST

static const char *fp_doc =
    "[{\"id\":\"a\",\"uri\":\"http://a\",\"order\":2,"
    "\"predicates\":[\"Path=/a/**\"],\"filters\":[\"StripPrefix=1\"]},"
    " {\"id\":\"b\",\"uri\":\"lb://svc\",\"predicates\":"
    "[\"Host={s}.example.com\",\"Method=GET\"]}]";

START_TEST(same_routes_in_two_routers_have_equal_fingerprints) {
    sy_router *r1 = router_with(fp_doc);
    sy_router *r2 = new_router(NULL, "main");
    /* reached differently: one route first, then the whole document */
    const char *route =
        "{\"id\":\"b\",\"uri\":\"lb://svc\",\"predicates\":[\"Path=/zzz\"]}";
    ck_assert_int_eq(
        sy_router_upsert_route(r2, "main", route, strlen(route), NULL), 0);
    apply(r2, "main", fp_doc);
    sy_snapshot *s1 = sy_router_acquire(r1), *s2 = sy_router_acquire(r2);
    ck_assert_uint_eq(sy_snapshot_fingerprint(s1), sy_snapshot_fingerprint(s2));
    sy_snapshot_release(s1);
    sy_snapshot_release(s2);
    sy_router_free(r1);
    sy_router_free(r2);
}
END_TEST

START_TEST(fingerprint_changes_with_the_routes) {
    sy_router *r = router_with(fp_doc);
    sy_snapshot *s1 = sy_router_acquire(r);
    ck_assert_int_eq(sy_router_set_route_enabled(r, "a", false, NULL), 0);
    sy_snapshot *s2 = sy_router_acquire(r);
    ck_assert_uint_ne(sy_snapshot_fingerprint(s1), sy_snapshot_fingerprint(s2));
    ck_assert_int_eq(sy_router_set_route_enabled(r, "a", true, NULL), 0);
    sy_snapshot *s3 = sy_router_acquire(r);
    ck_assert_uint_eq(sy_snapshot_fingerprint(s1), sy_snapshot_fingerprint(s3));
    sy_snapshot_release(s1);
    sy_snapshot_release(s2);
    sy_snapshot_release(s3);
    sy_router_free(r);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Weight                                                               */
/* ------------------------------------------------------------------ */

START_TEST(weight_draw_is_fixed_by_the_request_seed) {
    sy_router *r =
        router_with("[{\"id\":\"w1\",\"uri\":\"http://a\",\"predicates\":"
                    "[\"Path=/w\",\"Weight=g,1\"]},"
                    " {\"id\":\"w2\",\"uri\":\"http://b\",\"predicates\":"
                    "[\"Path=/w\",\"Weight=g,1\"]}]");
    size_t n1 = 0, n2 = 0;
    for (uint64_t seed = 1; seed <= 400; seed++) {
        rq q = request("GET", "h", "/w");
        q.req.seed = seed;
        const char *a = match_id(r, &q);
        ck_assert_ptr_nonnull(a);
        char first[64];
        snprintf(first, sizeof first, "%s", a);
        ck_assert_str_eq(match_id(r, &q), first);
        if (strcmp(first, "w1") == 0)
            n1++;
        else
            n2++;
    }
    /* 1:1 weights: both members are drawn, roughly equally */
    ck_assert_uint_gt(n1, 120);
    ck_assert_uint_gt(n2, 120);
    sy_router_free(r);
}
END_TEST

/* A first document's weight members are found in document order and
 * placed by rank: here the document's positions 1 and 2 are the weight
 * routes, and slots 1 and 2 (ranks) are w2 and p, so a member noted by
 * its position instead of its slot would leave w1 out of the group. */
START_TEST(weight_members_of_a_first_document_out_of_rank_order) {
    sy_router *r = router_with(
        "[{\"id\":\"p\",\"uri\":\"http://c\",\"order\":2,\"predicates\":"
        "[\"Path=/p\"]},"
        " {\"id\":\"w1\",\"uri\":\"http://a\",\"order\":0,\"predicates\":"
        "[\"Path=/w\",\"Weight=g,1\"]},"
        " {\"id\":\"w2\",\"uri\":\"http://b\",\"order\":1,\"predicates\":"
        "[\"Path=/w\",\"Weight=g,1\"]}]");
    size_t n1 = 0, n2 = 0;
    for (uint64_t seed = 1; seed <= 400; seed++) {
        rq q = request("GET", "h", "/w");
        q.req.seed = seed;
        const char *a = match_id(r, &q);
        ck_assert_ptr_nonnull(a);
        n1 += strcmp(a, "w1") == 0;
        n2 += strcmp(a, "w2") == 0;
    }
    ck_assert_uint_gt(n1, 120);
    ck_assert_uint_gt(n2, 120);
    ck_assert_uint_eq(n1 + n2, 400);
    rq q = request("GET", "h", "/p");
    ck_assert_match(r, &q, "p");
    sy_router_free(r);
}
END_TEST

START_TEST(weight_zero_member_is_never_drawn) {
    sy_router *r =
        router_with("[{\"id\":\"w0\",\"uri\":\"http://a\",\"predicates\":"
                    "[\"Path=/w\",\"Weight=g,0\"]},"
                    " {\"id\":\"w1\",\"uri\":\"http://b\",\"predicates\":"
                    "[\"Path=/w\",\"Weight=g,5\"]}]");
    for (uint64_t seed = 1; seed <= 200; seed++) {
        rq q = request("GET", "h", "/w");
        q.req.seed = seed * 0x9e3779b97f4a7c15ull;
        ck_assert_match(r, &q, "w1");
    }
    sy_router_free(r);
}
END_TEST

START_TEST(weight_removed_member_leaves_no_stale_range) {
    sy_router *r =
        router_with("[{\"id\":\"w1\",\"uri\":\"http://a\",\"predicates\":"
                    "[\"Path=/w\",\"Weight=g,1\"]},"
                    " {\"id\":\"w2\",\"uri\":\"http://b\",\"predicates\":"
                    "[\"Path=/w\",\"Weight=g,3\"]}]");
    ck_assert_int_eq(sy_router_remove_route(r, "w2", NULL), 0);
    for (uint64_t seed = 1; seed <= 200; seed++) {
        rq q = request("GET", "h", "/w");
        q.req.seed = seed;
        ck_assert_match(r, &q, "w1");
    }
    sy_router_free(r);
}
END_TEST

START_TEST(weight_chosen_member_failing_its_path_does_not_fall_back) {
    /* w1 owns all of group g's range but only serves /one: a request for
     * /two draws w1, so w2 (weight 0) cannot take it either */
    sy_router *r =
        router_with("[{\"id\":\"w1\",\"uri\":\"http://a\",\"predicates\":"
                    "[\"Path=/one\",\"Weight=g,1\"]},"
                    " {\"id\":\"w2\",\"uri\":\"http://b\",\"predicates\":"
                    "[\"Path=/two\",\"Weight=g,0\"]}]");
    rq q = request("GET", "h", "/two");
    q.req.seed = 12345;
    ck_assert_no_match(r, &q);
    sy_router_free(r);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Other predicates through the matcher                                 */
/* ------------------------------------------------------------------ */

START_TEST(time_predicates_use_the_request_clock) {
    sy_router *r =
        router_with("[{\"id\":\"later\",\"uri\":\"http://a\",\"predicates\":"
                    "[\"Path=/t\",\"After=1700000001000\"]},"
                    " {\"id\":\"earlier\",\"uri\":\"http://a\",\"predicates\":"
                    "[\"Path=/t\",\"Before=1700000001000\"]}]");
    rq q = request("GET", "h", "/t");
    q.req.now_ms = 1700000000999LL;
    ck_assert_match(r, &q, "earlier");
    q.req.now_ms = 1700000001001LL;
    ck_assert_match(r, &q, "later");
    q.req.now_ms = 1700000001000LL; /* strict on both sides */
    ck_assert_no_match(r, &q);
    sy_router_free(r);
}
END_TEST

START_TEST(remote_addr_matches_cidrs) {
    sy_router *r =
        router_with("[{\"id\":\"lan\",\"uri\":\"http://a\",\"predicates\":"
                    "[\"RemoteAddr=10.0.0.0/8\"]}]");
    rq q = request("GET", "h", "/");
    q.req.remote_addr = S("10.9.8.7");
    ck_assert_match(r, &q, "lan");
    q.req.remote_addr = S("11.0.0.1");
    ck_assert_no_match(r, &q);
    sy_router_free(r);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Struct versioning and fingerprints                                   */
/* ------------------------------------------------------------------ */

/* A host built against a header without sy_request.content_length passes
 * the shorter size (the struct "only ever grows at the end", and the
 * matcher accepts it). Nothing past `size` may be read: the request's
 * Content-Length is then unknown and RequestSize must let it through. */
START_TEST(request_without_content_length_field_is_treated_as_unknown) {
    sy_router *r = route_with_filters(
        "/**", "[{\"name\":\"RequestSize\",\"args\":{\"maxSize\":\"100B\"}}]");
    rq q = request("POST", "h", "/");
    q.req.size = (uint32_t)offsetof(sy_request, content_length);
    /* what happens to lie past the host's (older, shorter) struct */
    q.req.content_length = 1000000;
    held h = match_held(r, &q);
    sy_action action = sy_match_action(h.m);
    int status = sy_match_status(h.m);
    held_free(&h); /* before asserting: no leak when it fails */
    ck_assert_int_eq(action, SY_ACTION_PROXY);
    ck_assert_int_eq(status, 0);
}
END_TEST

/* Same routes, same source, same rank order: equal fingerprints, however
 * the table was reached (here: a removed route left a gap in positions). */
START_TEST(fingerprint_does_not_depend_on_how_positions_were_reached) {
    sy_router *r1 = router_with(
        "[{\"id\":\"a\",\"uri\":\"http://a\",\"predicates\":[\"Path=/a\"]},"
        " {\"id\":\"x\",\"uri\":\"http://x\",\"predicates\":[\"Path=/x\"]}]");
    ck_assert_int_eq(sy_router_remove_route(r1, "x", NULL), 0);
    const char *b =
        "{\"id\":\"b\",\"uri\":\"http://b\",\"predicates\":[\"Path=/b\"]}";
    ck_assert_int_eq(sy_router_upsert_route(r1, "main", b, strlen(b), NULL), 0);
    sy_router *r2 = router_with(
        "[{\"id\":\"a\",\"uri\":\"http://a\",\"predicates\":[\"Path=/a\"]},"
        " {\"id\":\"b\",\"uri\":\"http://b\",\"predicates\":[\"Path=/b\"]}]");
    sy_snapshot *s1 = sy_router_acquire(r1), *s2 = sy_router_acquire(r2);
    ck_assert_uint_eq(sy_snapshot_route_count(s1), 2);
    ck_assert_uint_eq(sy_snapshot_route_count(s2), 2);
    for (size_t i = 0; i < 2; i++)
        ck_assert_uint_eq(sy_route_fingerprint(sy_snapshot_route_at(s1, i)),
                          sy_route_fingerprint(sy_snapshot_route_at(s2, i)));
    uint64_t f1 = sy_snapshot_fingerprint(s1), f2 = sy_snapshot_fingerprint(s2);
    sy_snapshot_release(s1);
    sy_snapshot_release(s2);
    sy_router_free(r1);
    sy_router_free(r2); /* before asserting: no leak when it fails */
    ck_assert_uint_eq(f1, f2);
}
END_TEST

static int64_t fixed_clock(void *data) {
    return *(const int64_t *)data;
}

START_TEST(request_without_time_uses_the_router_clock) {
    static int64_t now = 1700000005000LL;
    sy_router_options o = SY_ROUTER_OPTIONS_INIT;
    o.clock_ms = fixed_clock;
    o.callback_data = &now;
    sy_router *r = new_router(&o, "main");
    apply(r, "main",
          "[{\"id\":\"before\",\"uri\":\"http://a\",\"predicates\":"
          "[\"Before=1700000004000\"]},"
          " {\"id\":\"after\",\"uri\":\"http://a\",\"predicates\":"
          "[\"After=1700000004000\"]}]");
    rq q = request("GET", "h", "/");
    q.req.now_ms = 0; /* the router's clock */
    ck_assert_match(r, &q, "after");
    now = 1700000003000LL;
    ck_assert_match(r, &q, "before");
    /* a request that carries its own time ignores the clock */
    q.req.now_ms = 1700000009000LL;
    ck_assert_match(r, &q, "after");
    sy_router_free(r);
}
END_TEST

/* Found by fuzz_match: a request without a query (NULL slice) or with a
 * trailing '&' made the Query predicate compute pointers past the query
 * (undefined behaviour, caught by UBSan). */
START_TEST(query_predicate_handles_absent_and_trailing_separators) {
    sy_router *r = router_with(
        "[{\"id\":\"q\",\"uri\":\"http://a\",\"predicates\":[\"Query=x\"]}]");
    rq q = request("GET", "h", "/");
    ck_assert_ptr_null(match_id(r, &q)); /* query {NULL, 0} */
    q.req.query = S("x&");
    ck_assert_match(r, &q, "q");
    q.req.query = S("a=1&");
    ck_assert_ptr_null(match_id(r, &q));
    q.req.query = S("&&x");
    ck_assert_match(r, &q, "q");
    sy_router_free(r);
}
END_TEST

int main(void) {
    Suite *s = suite_create("match");
    TCase *tc = tcase_create("match");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, lower_order_wins_over_document_position);
    tcase_add_test(tc, equal_order_keeps_document_position);
    tcase_add_test(tc, negative_order_goes_before_the_default_order);
    tcase_add_test(tc, no_matching_route_gives_no_match);
    tcase_add_test(tc, empty_predicate_list_matches_everything);
    tcase_add_test(tc, ties_across_sources_follow_registration_order);
    tcase_add_test(tc, order_beats_source_registration_order);
    tcase_add_test(tc, disabled_route_is_skipped);
    tcase_add_test(tc, disabled_only_route_gives_no_match);
    tcase_add_test(tc, enabled_false_route_is_skipped);
    tcase_add_test(tc, routes_without_path_or_host_are_found_in_rank_order);
    tcase_add_test(tc, trailing_slash_matches_by_default);
    tcase_add_test(tc, trailing_slash_false_requires_exact_path);
    tcase_add_test(tc, double_star_matches_zero_or_more_segments);
    tcase_add_test(tc, leading_double_star_matches_any_prefix);
    tcase_add_test(tc, encoded_slash_stays_inside_its_segment);
    tcase_add_test(tc, matrix_parameters_are_ignored_for_matching);
    tcase_add_test(tc, empty_segments_keep_their_separators);
    tcase_add_test(tc, path_variables_are_captured_in_order);
    tcase_add_test(tc, regex_variable_must_match_the_whole_segment);
    tcase_add_test(tc, catch_all_variable_is_empty_for_no_segments);
    tcase_add_test(tc, host_and_path_variables_follow_predicate_order);
    tcase_add_test(tc, variables_come_from_the_first_matching_pattern);
    tcase_add_test(tc, failed_route_leaves_no_variables_behind);
    tcase_add_test(tc, host_patterns_use_dot_as_separator);
    tcase_add_test(tc, host_port_is_part_of_the_host_by_default);
    tcase_add_test(tc, strip_host_port_option_ignores_the_port);
    tcase_add_test(tc, walk_proven_captures_are_taken_when_read);
    tcase_add_test(tc, a_host_table_cuts_the_path_only_for_its_readers);
    tcase_add_test(tc, header_presence_behind_a_host_as_the_scan_decides);
    tcase_add_test(tc, captures_of_a_walk_proven_candidate_after_its_header);
    tcase_add_test(tc, literal_path_then_rest_behind_a_host);
    tcase_add_test(tc, rest_capture_kept_past_a_budgeted_header);
    tcase_add_test(tc, other_rest_shapes_behind_a_host);
    tcase_add_test(tc, plan_without_filters_keeps_path_query_and_headers);
    tcase_add_test(tc, strip_prefix_drops_leading_segments);
    tcase_add_test(tc, strip_prefix_of_every_segment_leaves_root);
    tcase_add_test(tc, strip_prefix_keeps_trailing_slash);
    tcase_add_test(tc, prefix_path_prepends_the_prefix);
    tcase_add_test(tc, set_path_expands_captured_variables);
    tcase_add_test(tc, rewrite_path_replaces_with_named_groups);
    tcase_add_test(
        tc, rewrite_path_with_router_and_context_on_different_allocators);
    tcase_add_test(tc, add_request_header_expands_variables);
    tcase_add_test(tc, set_and_remove_request_header);
    tcase_add_test(tc, add_request_parameter_appends_to_the_query);
    tcase_add_test(tc, response_header_filters_become_response_ops);
    tcase_add_test(tc, set_status_sets_the_response_status);
    tcase_add_test(tc,
                   request_header_size_answers_431_when_a_header_is_too_large);
    tcase_add_test(tc, request_header_size_lets_small_headers_through);
    tcase_add_test(tc, request_size_answers_413_when_content_length_is_larger);
    tcase_add_test(tc, request_size_ignores_unknown_content_length);
    tcase_add_test(tc, redirect_to_answers_with_status_and_location);
    tcase_add_test(tc, redirect_to_can_include_request_params);
    tcase_add_test(tc, preserve_host_header_is_reported);
    tcase_add_test(tc, stateful_filters_are_handed_to_the_host_in_order);
    tcase_add_test(tc, host_filters_past_the_fourth_keep_their_order);
    tcase_add_test(tc, route_filters_apply_in_list_order);
    tcase_add_test(tc, default_filters_are_applied_before_route_filters);
    tcase_add_test(tc, default_filters_apply_to_every_route);
    tcase_add_test(tc, explain_reports_every_route_in_rank_order);
    tcase_add_test(tc, explain_stops_when_the_callback_says_so);
    tcase_add_test(tc, snapshot_held_across_apply_keeps_matching_old_routes);
    tcase_add_test(tc, upsert_is_visible_at_the_next_acquire);
    tcase_add_test(tc, allow_names_base_and_overlay_routes);
    tcase_add_test(tc, allow_names_every_refused_candidate_of_one_list);
    tcase_add_test(tc, upsert_replaces_a_route_and_keeps_its_rank_position);
    tcase_add_test(tc, remove_is_visible_at_the_next_acquire);
    tcase_add_test(tc, set_route_enabled_toggles_matching);
    tcase_add_test(tc, enabling_a_route_disabled_in_its_document);
    tcase_add_test(tc, find_route_reports_the_defining_source);
    tcase_add_test(tc, route_id_is_unique_across_sources);
    tcase_add_test(tc, generation_grows_with_every_publish);
    tcase_add_test(tc, same_document_twice_does_not_publish);
    tcase_add_test(tc, same_routes_in_two_routers_have_equal_fingerprints);
    tcase_add_test(tc, fingerprint_changes_with_the_routes);
    tcase_add_test(tc, weight_draw_is_fixed_by_the_request_seed);
    tcase_add_test(tc, weight_members_of_a_first_document_out_of_rank_order);
    tcase_add_test(tc, weight_zero_member_is_never_drawn);
    tcase_add_test(tc, weight_removed_member_leaves_no_stale_range);
    tcase_add_test(tc,
                   weight_chosen_member_failing_its_path_does_not_fall_back);
    tcase_add_test(tc, time_predicates_use_the_request_clock);
    tcase_add_test(tc, remote_addr_matches_cidrs);
    tcase_add_test(tc, request_without_time_uses_the_router_clock);
    tcase_add_test(tc,
                   request_without_content_length_field_is_treated_as_unknown);
    tcase_add_test(tc,
                   fingerprint_does_not_depend_on_how_positions_were_reached);
    tcase_add_test(tc, query_predicate_handles_absent_and_trailing_separators);
    tcase_add_test(tc, literal_path_past_the_limit_is_tested_as_usual);
    tcase_add_test(tc, star_then_literal_host_as_the_labels_decide);
    tcase_add_test(tc, a_literal_path_behind_a_proven_host_decides_it);
    suite_add_tcase(s, tc);
    return sy_test_run(s);
}
