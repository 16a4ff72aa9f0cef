/* test_shadow.c - shadowed and unreachable routes (sy_document_shadowed,
 * sy_snapshot_shadowed): the cases an operator meets, what must not be
 * reported, and a randomized soundness check against the matcher: for
 * random route pairs the check calls shadowed, no random request takes
 * the shadowed route. */
#include "testutil.h"

#include "switchyard.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct found {
    char text[64][256];
    size_t n;
} found;

/* "id<by1,by2>" per shadowed route, "id!" per unreachable one. */
static int collect(void *data, const sy_shadow *s) {
    found *f = data;
    ck_assert_uint_lt(f->n, 64);
    char *t = f->text[f->n++];
    size_t o = (size_t)snprintf(t, 256, "%s", sy_route_id(s->route));
    if (!s->by_count) {
        snprintf(t + o, 256 - o, "!");
        ck_assert_ptr_nonnull(strstr(s->reason, "can match no request"));
        return 0;
    }
    o += (size_t)snprintf(t + o, 256 - o, "<");
    for (size_t i = 0; i < s->by_count; i++) {
        o += (size_t)snprintf(t + o, 256 - o, "%s%s", i ? "," : "",
                              sy_route_id(s->by[i]));
        ck_assert_uint_lt(s->by_rank[i], s->rank);
        ck_assert_ptr_nonnull(strstr(s->reason, sy_route_id(s->by[i])));
    }
    snprintf(t + o, 256 - o, ">");
    return 0;
}

static found check_doc(const char *json) {
    found f;
    memset(&f, 0, sizeof f);
    sy_document *d;
    sy_error err;
    sy_parse_options po = SY_PARSE_OPTIONS_INIT;
    ck_assert_msg(sy_document_parse(json, strlen(json), &po, &d, &err) == 0,
                  "%s: %s", err.path, err.message);
    ck_assert_int_eq(sy_document_shadowed(d, NULL, collect, &f, &err), 0);
    sy_document_free(d);
    return f;
}

/* The one line of a document of routes `a` then `b` (each a JSON route
 * body without id and uri), or "" when nothing is reported. */
static const char *pair(const char *a, const char *b) {
    static char out[256];
    char json[2048];
    snprintf(json, sizeof json,
             "[{\"id\":\"A\",\"uri\":\"http://a:1\",%s},"
             "{\"id\":\"B\",\"uri\":\"http://a:1\",%s}]",
             a, b);
    found f = check_doc(json);
    ck_assert_uint_le(f.n, 1);
    snprintf(out, sizeof out, "%s", f.n ? f.text[0] : "");
    return out;
}

#define P(x) "\"predicates\":[" x "]"
#define P2(x, y) "\"predicates\":[" x "," y "]"

START_TEST(a_wider_path_above_shadows_a_narrower_one) {
    ck_assert_str_eq(pair(P("\"Path=/api/**\""), P("\"Path=/api/users/{id}\"")),
                     "B<A>");
    ck_assert_str_eq(pair(P("\"Path=/api/{x}\""), P("\"Path=/api/users\"")),
                     "B<A>");
    ck_assert_str_eq(pair(P("\"Path=/**\""), P("\"Path=/a/*/b/**\"")), "B<A>");
    ck_assert_str_eq(pair(P("\"Path=/a/*/**\""), P("\"Path=/a/{x}/c/**\"")),
                     "B<A>");
}
END_TEST

START_TEST(a_narrower_or_different_path_above_shadows_nothing) {
    ck_assert_str_eq(pair(P("\"Path=/api/users/{id}\""), P("\"Path=/api/**\"")),
                     "");
    ck_assert_str_eq(pair(P("\"Path=/a/{x}/**\""), P("\"Path=/a/**\"")), "");
    ck_assert_str_eq(pair(P("\"Path=/a/b\""), P("\"Path=/a/c\"")), "");
    /* "/a/" matches "/a/;m", which "/a" does not (the empty last segment
     * carries matrix parameters: no trailing slash) */
    ck_assert_str_eq(pair(P("\"Path=/a\""), P("\"Path=/a/\"")), "");
    /* without matchTrailingSlash "/a" does not take "/a/" */
    ck_assert_str_eq(pair(P("\"Path=/a,false\""), P("\"Path=/a\"")), "");
    ck_assert_str_eq(pair(P("\"Path=/a\""), P("\"Path=/a,false\"")), "B<A>");
}
END_TEST

START_TEST(a_regex_above_is_compared_on_literal_paths_only) {
    ck_assert_str_eq(pair(P("\"Path=/v/{n:[0-9]+}\""), P("\"Path=/v/42\"")),
                     "B<A>");
    ck_assert_str_eq(pair(P("\"Path=/v/{n:[0-9]+}\""), P("\"Path=/v/x\"")), "");
    ck_assert_str_eq(pair(P("\"Path=/v/{n:[0-9]+}\""), P("\"Path=/v/{m}\"")),
                     "");
}
END_TEST

START_TEST(methods_must_be_a_subset) {
    ck_assert_str_eq(pair(P2("\"Path=/a\"", "\"Method=GET,POST\""),
                          P2("\"Path=/a\"", "\"Method=GET\"")),
                     "B<A>");
    ck_assert_str_eq(pair(P2("\"Path=/a\"", "\"Method=GET\""),
                          P2("\"Path=/a\"", "\"Method=GET,POST\"")),
                     "");
    ck_assert_str_eq(
        pair(P2("\"Path=/a\"", "\"Method=GET\""), P("\"Path=/a\"")), "");
    ck_assert_str_eq(pair(P2("\"Path=/a\"", "\"Method=PURGE,GET\""),
                          P2("\"Path=/a\"", "\"Method=PURGE\"")),
                     "B<A>");
}
END_TEST

START_TEST(a_condition_only_the_route_above_has_stops_the_shadow) {
    ck_assert_str_eq(
        pair(P2("\"Path=/a/**\"", "\"Header=X-Debug\""), P("\"Path=/a/b\"")),
        "");
    ck_assert_str_eq(
        pair(P2("\"Path=/a/**\"", "\"Query=debug\""), P("\"Path=/a/b\"")), "");
    ck_assert_str_eq(pair(P2("\"Path=/a/**\"", "\"Host=api.example.com\""),
                          P("\"Path=/a/b\"")),
                     "");
    ck_assert_str_eq(
        pair(P2("\"Path=/a/**\"", "\"Weight=g,50\""), P("\"Path=/a/b\"")), "");
}
END_TEST

START_TEST(a_condition_only_the_shadowed_route_has_narrows_it) {
    ck_assert_str_eq(
        pair(P("\"Path=/a/**\""), P2("\"Path=/a/b\"", "\"Header=X-Debug\"")),
        "B<A>");
    ck_assert_str_eq(pair(P2("\"Path=/a/**\"", "\"Header=X-V, v[0-9]\""),
                          P2("\"Path=/a/b\"", "\"Header=X-V, v[0-9]\"")),
                     "B<A>");
    ck_assert_str_eq(pair(P2("\"Path=/a/**\"", "\"Header=X-V, v[0-9]\""),
                          P2("\"Path=/a/b\"", "\"Header=X-V, v[0-8]\"")),
                     "");
    ck_assert_str_eq(pair(P("\"Host=**.example.com\""),
                          P2("\"Host=api.example.com\"", "\"Path=/x\"")),
                     "B<A>");
    ck_assert_str_eq(
        pair(P("\"Host={s}.example.com\""), P("\"Host=a.b.example.com\"")), "");
    ck_assert_str_eq(
        pair(P("\"After=2020-01-01T00:00:00Z\""),
             P("\"Between=2021-01-01T00:00:00Z,2022-01-01T00:00:00Z\"")),
        "B<A>");
    ck_assert_str_eq(
        pair(P("\"After=2021-06-01T00:00:00Z\""),
             P("\"Between=2021-01-01T00:00:00Z,2022-01-01T00:00:00Z\"")),
        "");
}
END_TEST

START_TEST(several_routes_above_may_share_the_shadow) {
    found f = check_doc("[{\"id\":\"a\",\"uri\":\"http://a:1\","
                        "\"predicates\":[\"Path=/a/**\"]},"
                        "{\"id\":\"b\",\"uri\":\"http://a:1\","
                        "\"predicates\":[\"Path=/b/**\"]},"
                        "{\"id\":\"ab\",\"uri\":\"http://a:1\","
                        "\"predicates\":[\"Path=/b/x,/a/y\"]}]");
    ck_assert_uint_eq(f.n, 1);
    ck_assert_str_eq(f.text[0], "ab<a,b>");
}
END_TEST

START_TEST(a_route_of_no_predicates_above_shadows_everything_after_it) {
    /* no predicates: every request matches it (route model section 2) */
    ck_assert_str_eq(pair("\"predicates\":[]", P("\"Path=/a/b\"")), "B<A>");
    ck_assert_str_eq(pair("\"order\":0", P("\"Method=GET\"")), "B<A>");
    ck_assert_str_eq(pair("\"order\":0", "\"order\":1"), "B<A>");
    /* a catch-all below a narrower route is reached by the rest */
    ck_assert_str_eq(pair(P("\"Path=/a/**\""), "\"predicates\":[]"), "");
}
END_TEST

START_TEST(rank_follows_order_and_disabled_routes_are_left_out) {
    /* B has the lower order: it is tried first, A never shadows it */
    ck_assert_str_eq(
        pair("\"order\":1," P("\"Path=/a\""), "\"order\":0," P("\"Path=/**\"")),
        "A<B>");
    ck_assert_str_eq(
        pair("\"order\":1," P("\"Path=/**\""), "\"order\":0," P("\"Path=/a\"")),
        "");
    ck_assert_str_eq(
        pair("\"metadata\":{\"status\":\"disabled\"}," P("\"Path=/**\""),
             P("\"Path=/a\"")),
        "");
}
END_TEST

START_TEST(routes_that_match_nothing_are_reported) {
    ck_assert_str_eq(
        pair(P("\"Path=/z\""), P2("\"After=2030-01-01T00:00:00Z\"",
                                  "\"Before=2020-01-01T00:00:00Z\"")),
        "B!");
    ck_assert_str_eq(
        pair(P("\"Path=/z\""), P2("\"Method=GET\"", "\"Method=POST\"")), "B!");
    ck_assert_str_eq(pair(P("\"Path=/z\""), P("\"Path=foo\"")), "B!");
}
END_TEST

START_TEST(the_snapshot_reports_across_sources) {
    const char *one = "[{\"id\":\"all\",\"uri\":\"http://a:1\","
                      "\"predicates\":[\"Path=/**\"]}]";
    sy_router *r = sy_test_router(one, strlen(one));
    sy_error err;
    ck_assert_int_eq(sy_router_add_source(r, "t", &err), 0);
    const char *two = "{\"routes\":[{\"id\":\"x\",\"uri\":\"http://a:1\","
                      "\"predicates\":[\"Path=/x\"]}]}";
    ck_assert_int_eq(sy_router_apply(r, "t", two, strlen(two), NULL, &err), 0);
    sy_snapshot *s = sy_router_acquire(r);
    found f;
    memset(&f, 0, sizeof f);
    ck_assert_int_eq(sy_snapshot_shadowed(s, NULL, collect, &f, &err), 0);
    ck_assert_uint_eq(f.n, 1);
    ck_assert_str_eq(f.text[0], "x<all>");
    sy_snapshot_release(s);
    sy_router_free(r);
}
END_TEST

/* ---- randomized soundness ---- */

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static unsigned rnd(unsigned n) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (unsigned)(rng % n);
}

static const char *const seg_pool[] = {"a",  "b",        "*",  "{x}",
                                       "**", "{y:[ab]}", "a*", ""};
static const char *const host_pool[] = {"a.com",     "*.com",   "**",
                                        "{s}.a.com", "b.a.com", "**.com"};
static const char *const method_pool[] = {"GET", "POST", "PUT"};

/* A random route body: Path (1 or 2 patterns, matchTrailingSlash either
 * way), maybe Method, Host, Header, Query, time; written into buf. */
static void random_route(char *buf, size_t size, char pats[2][128],
                         size_t *npats) {
    size_t o = (size_t)snprintf(buf, size, "\"predicates\":[\"Path=");
    *npats = 1 + rnd(2);
    for (size_t k = 0; k < *npats; k++) {
        char *p = pats[k];
        size_t po = 0;
        unsigned nseg = rnd(4);
        bool multi = false;
        p[0] = '\0';
        for (unsigned i = 0; i < nseg; i++) {
            const char *s = seg_pool[rnd(8)];
            if (strcmp(s, "**") == 0 && (multi || i + 1 < nseg || rnd(4) == 0))
                s = "a";
            multi |= strcmp(s, "**") == 0;
            /* variable names differ by position: {x0}, {y1:[ab]} */
            const char *brace = strchr(s, '{');
            if (brace)
                po += (size_t)snprintf(p + po, 128 - po, "/{%c%u%s", brace[1],
                                       i, brace + 2);
            else
                po += (size_t)snprintf(p + po, 128 - po, "/%s", s);
        }
        if (!nseg)
            snprintf(p, 128, "/");
        o += (size_t)snprintf(buf + o, size - o, "%s%s", k ? "," : "", p);
    }
    if (rnd(3) == 0)
        o += (size_t)snprintf(buf + o, size - o, ",false");
    o += (size_t)snprintf(buf + o, size - o, "\"");
    if (rnd(2)) {
        unsigned m = 1 + rnd(7);
        o += (size_t)snprintf(buf + o, size - o, ",\"Method=");
        const char *sep = "";
        for (unsigned i = 0; i < 3; i++)
            if (m >> i & 1u) {
                o += (size_t)snprintf(buf + o, size - o, "%s%s", sep,
                                      method_pool[i]);
                sep = ",";
            }
        o += (size_t)snprintf(buf + o, size - o, "\"");
    }
    if (rnd(3) == 0)
        o += (size_t)snprintf(buf + o, size - o, ",\"Host=%s\"",
                              host_pool[rnd(6)]);
    if (rnd(4) == 0)
        o += (size_t)snprintf(buf + o, size - o, ",\"Header=X-A%s\"",
                              rnd(2) ? ", v[0-9]" : "");
    if (rnd(5) == 0)
        o += (size_t)snprintf(buf + o, size - o, ",\"Query=q\"");
    if (rnd(5) == 0)
        o += (size_t)snprintf(buf + o, size - o,
                              ",\"After=2020-0%u-01T00:00:00Z\"", 1 + rnd(9));
    snprintf(buf + o, size - o, "]");
}

static const char *const req_segs[] = {"a",   "b",   "c",  "",     ";m",
                                       "a;m", "%61", "ab", "b;x=1"};

/* A path: from one of the patterns (elements filled in), or random. */
static void random_path(char *out, size_t size, const char *pat) {
    size_t o = 0;
    out[0] = '\0';
    if (pat && rnd(4)) {
        const char *p = pat;
        while (*p == '/') {
            const char *e = strchr(p + 1, '/');
            size_t n = e ? (size_t)(e - p - 1) : strlen(p + 1);
            char seg[64];
            snprintf(seg, sizeof seg, "%.*s", (int)n, p + 1);
            if (strcmp(seg, "**") == 0) {
                for (unsigned k = rnd(3); k > 0; k--)
                    o += (size_t)snprintf(out + o, size - o, "/%s",
                                          req_segs[rnd(9)]);
            } else if (strchr(seg, '*') || strchr(seg, '{')) {
                static const char *const fill[] = {"a", "b", "ab", "", "x"};
                o += (size_t)snprintf(out + o, size - o, "/%s%s",
                                      seg[0] == 'a' ? "a" : "", fill[rnd(5)]);
            } else {
                o += (size_t)snprintf(out + o, size - o, "/%s%s", seg,
                                      rnd(6) == 0 ? ";m" : "");
            }
            p += 1 + n;
        }
    } else {
        for (unsigned k = rnd(4); k > 0; k--)
            o += (size_t)snprintf(out + o, size - o, "/%s", req_segs[rnd(9)]);
    }
    if (rnd(4) == 0)
        o += (size_t)snprintf(out + o, size - o, "/");
    if (o == 0)
        snprintf(out, size, "/");
}

static sy_router *router_of(const char *json) {
    sy_router *r;
    sy_error err;
    sy_router_options opts = SY_ROUTER_OPTIONS_INIT;
    ck_assert_int_eq(sy_router_new(&opts, &r, &err), 0);
    ck_assert_int_eq(sy_router_add_source(r, "s", &err), 0);
    ck_assert_msg(sy_router_apply(r, "s", json, strlen(json), NULL, &err) == 0,
                  "%s: %s: %s", json, err.path, err.message);
    return r;
}

START_TEST(random_pairs_reported_shadowed_never_route_to_the_shadowed) {
    static const char *const methods[] = {"GET", "POST", "PUT", "DELETE"};
    static const char *const hosts[] = {"a.com", "b.a.com", "x.org", "a.com.",
                                        "c.b.a.com"};
    sy_match_ctx *ctx;
    ck_assert_int_eq(sy_match_ctx_new(NULL, &ctx, NULL), 0);
    size_t claims = 0, reached = 0, pairs = 6000u * (size_t)sy_test_scale();
    for (size_t t = 0; t < pairs; t++) {
        char a[1024], b[1024], pa[2][128], pb[2][128], json[2400];
        size_t na, nb;
        random_route(a, sizeof a, pa, &na);
        random_route(b, sizeof b, pb, &nb);
        snprintf(json, sizeof json,
                 "[{\"id\":\"A\",\"uri\":\"http://a:1\",%s},"
                 "{\"id\":\"B\",\"uri\":\"http://a:1\",%s}]",
                 a, b);
        found f = check_doc(json);
        if (f.n == 0 || strcmp(f.text[0], "B<A>") != 0)
            continue;
        claims++;
        sy_router *both = router_of(json);
        snprintf(json, sizeof json,
                 "[{\"id\":\"B\",\"uri\":\"http://a:1\",%s}]", b);
        sy_router *alone = router_of(json);
        sy_snapshot *s2 = sy_router_acquire(both),
                    *s1 = sy_router_acquire(alone);
        for (int q = 0; q < 200; q++) {
            char path[256];
            random_path(path, sizeof path, pb[rnd((unsigned)nb)]);
            sy_header hs[1] = {{{"X-A", 3}, {rnd(2) ? "v1" : "w", 2}}};
            sy_request req = SY_REQUEST_INIT;
            const char *m = methods[rnd(4)], *h = hosts[rnd(5)];
            req.method = (sy_str){m, strlen(m)};
            req.host = (sy_str){h, strlen(h)};
            req.path = (sy_str){path, strlen(path)};
            if (rnd(2))
                req.query = (sy_str){"q=1", 3};
            req.headers = hs;
            req.header_count = rnd(2);
            req.now_ms = 1600000000000ll + (int64_t)rnd(4) * 10000000000ll;
            sy_match *mt = NULL;
            ck_assert_int_eq(sy_snapshot_match(s1, ctx, &req, &mt), 0);
            if (!mt)
                continue;
            reached++;
            ck_assert_int_eq(sy_snapshot_match(s2, ctx, &req, &mt), 0);
            ck_assert_msg(mt &&
                              strcmp(sy_route_id(sy_match_route(mt)), "A") == 0,
                          "B reported shadowed by A, but %s %s (host %s) "
                          "goes to %s\nA: %s\nB: %s",
                          m, path, h,
                          mt ? sy_route_id(sy_match_route(mt)) : "none", a, b);
        }
        sy_snapshot_release(s1);
        sy_snapshot_release(s2);
        sy_router_free(both);
        sy_router_free(alone);
    }
    sy_match_ctx_free(ctx);
    fprintf(stderr,
            "# %zu pairs, %zu reported shadowed, %zu requests reached the "
            "shadowed route alone\n",
            pairs, claims, reached);
    /* the run must have tested something */
    ck_assert_uint_ge(claims, pairs / 100);
    ck_assert_uint_ge(reached, claims * 20);
}
END_TEST

int main(void) {
    Suite *s = suite_create("shadow");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, a_wider_path_above_shadows_a_narrower_one);
    tcase_add_test(tc, a_narrower_or_different_path_above_shadows_nothing);
    tcase_add_test(tc, a_regex_above_is_compared_on_literal_paths_only);
    tcase_add_test(tc, methods_must_be_a_subset);
    tcase_add_test(tc, a_condition_only_the_route_above_has_stops_the_shadow);
    tcase_add_test(tc, a_condition_only_the_shadowed_route_has_narrows_it);
    tcase_add_test(tc, several_routes_above_may_share_the_shadow);
    tcase_add_test(tc,
                   a_route_of_no_predicates_above_shadows_everything_after_it);
    tcase_add_test(tc, rank_follows_order_and_disabled_routes_are_left_out);
    tcase_add_test(tc, routes_that_match_nothing_are_reported);
    tcase_add_test(tc, the_snapshot_reports_across_sources);
    tcase_add_test(tc,
                   random_pairs_reported_shadowed_never_route_to_the_shadowed);
    suite_add_tcase(s, tc);
    return sy_test_run(s);
}
