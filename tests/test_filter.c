/* test_filter.c - compiling filters and computing the filter plan
 * (route model section 5): every pure filter's effect, ordering, {var}
 * expansion, short-circuits, host entries and compile errors. */
#include "base/regex.h"
#include "route/filter.h"
#include "testutil.h"

#include <cJSON.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#define ENTRY_PATH "routes[0].filters[0]"

static sy__alloc A;
static sy__compile_env ENV;
static sy_request REQ;
static sy_header HDRS[16];
static sy__capture VARS[8];
static size_t NVARS;
static sy__arena SCRATCH;
static pcre2_match_data *MD;
static sy__plan P;
static sy__filter *ROUTE[16], *DEFAULTS[16];
static size_t NROUTE, NDEFAULTS;
static sy_kv KVS[64];
static size_t NKVS;
static sy_error ERR;
static pcre2_general_context *GCTX;

static void setup(void) {
    sy__alloc_init(&A, NULL);
    ENV.alloc = &A;
    ENV.registry = NULL;
    sy_request r = SY_REQUEST_INIT;
    REQ = r;
    REQ.method = (sy_str){"GET", 3};
    REQ.path = (sy_str){"/", 1};
    REQ.headers = HDRS;
    NVARS = NROUTE = NDEFAULTS = NKVS = 0;
    sy__arena_init(&SCRATCH, &A, 512);
    /* the match data allocates as the filters do (ENV.alloc), as a
     * sy_match_ctx's does its budget's context (PCRE2's substitute mixes
     * the two) */
    GCTX = sy__re_general_context_new(&A);
    MD = pcre2_match_data_create(16, GCTX);
    memset(&P, 0, sizeof P);
    sy__error_clear(&ERR);
}

static void teardown(void) {
    for (size_t i = 0; i < NROUTE; i++)
        sy__filter_free(ROUTE[i], &A);
    for (size_t i = 0; i < NDEFAULTS; i++)
        sy__filter_free(DEFAULTS[i], &A);
    sy__arena_free(&SCRATCH);
    pcre2_match_data_free(MD);
    pcre2_general_context_free(GCTX);
}

static sy_str S(const char *s) {
    return (sy_str){s, strlen(s)};
}

static void eq(sy_str got, const char *want) {
    ck_assert_msg(got.len == strlen(want) &&
                      (got.len == 0 || memcmp(got.ptr, want, got.len) == 0),
                  "got \"%.*s\", want \"%s\"", (int)got.len,
                  got.ptr ? got.ptr : "", want);
}

static void header(const char *name, const char *value) {
    HDRS[REQ.header_count++] = (sy_header){S(name), S(value)};
}

static void var(const char *name, const char *value) {
    VARS[NVARS++] = (sy__capture){S(name), S(value)};
}

/* Build an entry: filter name then key, value pairs, NULL-terminated. */
static sy__def_entry entry_v(const char *name, va_list ap) {
    sy__def_entry e = {
        .f.spec = sy__factory_find(SY_FACTORY_FILTER, name, strlen(name)),
        .args = &KVS[NKVS]};
    const char *k;
    while ((k = va_arg(ap, const char *)) != NULL) {
        KVS[NKVS++] = (sy_kv){k, va_arg(ap, const char *)};
        e.arg_count++;
    }
    return e;
}

/* Compile and expect success. */
static sy__filter *filt(const char *name, ...) {
    va_list ap;
    va_start(ap, name);
    sy__def_entry e = entry_v(name, ap);
    va_end(ap);
    sy__filter *f = NULL;
    int rc = sy__filter_compile(&e, &ENV, ENTRY_PATH, &f, &ERR);
    ck_assert_msg(rc == 0, "%s: %d %s: %s", name, rc, ERR.path, ERR.message);
    ck_assert_ptr_nonnull(f);
    return f;
}

/* Compile and expect failure; returns the code. */
static int filt_err(const char *name, ...) {
    va_list ap;
    va_start(ap, name);
    sy__def_entry e = entry_v(name, ap);
    va_end(ap);
    sy__filter *f = (sy__filter *)&e; /* must be reset to NULL */
    int rc = sy__filter_compile(&e, &ENV, ENTRY_PATH, &f, &ERR);
    ck_assert_int_ne(rc, 0);
    ck_assert_ptr_null(f);
    return rc;
}

static void route(sy__filter *f) {
    ROUTE[NROUTE++] = f;
}
static void dflt(sy__filter *f) {
    DEFAULTS[NDEFAULTS++] = f;
}

static sy__plan *run(void) {
    int rc = sy__plan_compute(&P, (const sy__filter *const *)DEFAULTS,
                              NDEFAULTS, (const sy__filter *const *)ROUTE,
                              NROUTE, &REQ, VARS, NVARS, MD, &SCRATCH);
    ck_assert_int_eq(rc, 0);
    return &P;
}

static void has_header(size_t i, const char *name, const char *value) {
    ck_assert_uint_gt(P.header_count, i);
    eq(P.headers[i].name, name);
    eq(P.headers[i].value, value);
}

/* ---- end to end: tests/data/spring/routes.json (cases, each
 * naming its source): document and default filters in, route and upstream
 * path out, the indexed matcher agreeing with the linear scan ---- */

static const char *jstr(const cJSON *o, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static const char *matched_id(const sy_match *m) {
    return m ? sy_route_id(sy_match_route(m)) : "(none)";
}

static void e2e_request(const sy_snapshot *snap, sy_match_ctx *ix,
                        sy_match_ctx *lin, const cJSON *q, const char *src) {
    sy_header hdrs[8];
    sy_request req = SY_REQUEST_INIT;
    req.method = S(jstr(q, "method"));
    req.host = S(jstr(q, "host"));
    req.path = S(jstr(q, "path"));
    req.remote_addr = S(jstr(q, "remote"));
    req.now_ms = 1700000000000LL;
    const cJSON *h;
    cJSON_ArrayForEach(h, cJSON_GetObjectItemCaseSensitive(q, "headers")) {
        ck_assert_uint_lt(req.header_count, 8);
        hdrs[req.header_count++] =
            (sy_header){S(cJSON_GetArrayItem(h, 0)->valuestring),
                        S(cJSON_GetArrayItem(h, 1)->valuestring)};
    }
    req.headers = hdrs;
    sy_match *m = NULL, *l = NULL;
    ck_assert_int_eq(sy_snapshot_match(snap, ix, &req, &m), 0);
    ck_assert_int_eq(sy_snapshot_match_linear(snap, lin, &req, &l), 0);
    const char *want = jstr(q, "route");
    ck_assert_msg(strcmp(matched_id(m), matched_id(l)) == 0,
                  "%s: %s: indexed chose %s, linear %s", src, req.path.ptr,
                  matched_id(m), matched_id(l));
    ck_assert_msg(strcmp(matched_id(m), want ? want : "(none)") == 0,
                  "%s: %s (host %s): matched %s, want %s", src, req.path.ptr,
                  req.host.ptr, matched_id(m), want ? want : "(none)");
    const char *up = jstr(q, "upstream_path");
    if (up) {
        sy_str got = sy_match_path(m);
        ck_assert_msg(sy__str_eq(got, up, strlen(up)),
                      "%s: upstream path '%.*s', want '%s'", src, (int)got.len,
                      got.ptr, up);
    }
    cJSON_ArrayForEach(h, cJSON_GetObjectItemCaseSensitive(q, "headers_out")) {
        const char *name = cJSON_GetArrayItem(h, 0)->valuestring;
        const char *value = cJSON_GetArrayItem(h, 1)->valuestring;
        bool found = false;
        for (size_t i = 0; i < sy_match_header_count(m); i++) {
            sy_header x = sy_match_header(m, i);
            found = found || (sy__str_ieq(x.name, name, strlen(name)) &&
                              sy__str_eq(x.value, value, strlen(value)));
        }
        ck_assert_msg(found, "%s: no upstream header %s: %s", src, name, value);
    }
}

static void e2e_case(const cJSON *c, sy_match_ctx *ix, sy_match_ctx *lin) {
    const char *src = jstr(c, "source");
    char *dflt = NULL;
    const cJSON *d = cJSON_GetObjectItemCaseSensitive(c, "default_filters");
    if (d)
        dflt = cJSON_PrintUnformatted(d);
    sy_router_options o = SY_ROUTER_OPTIONS_INIT;
    o.default_filters = dflt;
    sy_router *r = NULL;
    sy_error err;
    ck_assert_msg(sy_router_new(&o, &r, &err) == 0, "%s: %s", src, err.message);
    ck_assert_int_eq(sy_router_add_source(r, "main", &err), 0);
    cJSON *doc = cJSON_CreateObject();
    cJSON_AddItemToObject(
        doc, "routes",
        cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(c, "routes"), true));
    char *json = cJSON_PrintUnformatted(doc);
    int rc = sy_router_apply(r, "main", json, strlen(json), NULL, &err);
    const char *want_err = jstr(c, "error");
    if (want_err) {
        int want = strcmp(want_err, "SY_EREGEX") == 0 ? SY_EREGEX : SY_EPATTERN;
        ck_assert_msg(rc == want, "%s: apply gave %d, want %s", src, rc,
                      want_err);
        ck_assert_msg(strncmp(err.path, "routes[0].predicates[0]", 23) == 0,
                      "%s: error at '%s'", src, err.path);
    } else {
        ck_assert_msg(rc == 0, "%s: apply: %s at %s", src, err.message,
                      err.path);
        sy_snapshot *snap = sy_router_acquire(r);
        const cJSON *q;
        cJSON_ArrayForEach(q, cJSON_GetObjectItemCaseSensitive(c, "requests"))
            e2e_request(snap, ix, lin, q, src);
        sy_snapshot_release(snap);
    }
    cJSON_free(json);
    cJSON_Delete(doc);
    cJSON_free(dflt);
    sy_router_free(r);
}

START_TEST(spring_end_to_end_cases) {
    char *text = sy_test_read("spring/routes.json", NULL);
    cJSON *root = cJSON_Parse(text);
    ck_assert_ptr_nonnull(root);
    sy_match_ctx *ix = NULL, *lin = NULL;
    ck_assert_int_eq(sy_match_ctx_new(NULL, &ix, NULL), 0);
    ck_assert_int_eq(sy_match_ctx_new(NULL, &lin, NULL), 0);
    int n = 0;
    const cJSON *c;
    cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(root, "cases")) {
        e2e_case(c, ix, lin);
        n++;
    }
    ck_assert_int_ge(n, 10);
    sy_match_ctx_free(ix);
    sy_match_ctx_free(lin);
    cJSON_Delete(root);
    free(text);
}
END_TEST

/* The index must still choose what the linear scan chooses with Spring's
 * pattern forms (unrooted paths, "/" + "****", DOTALL regexes, several ** in a
 * host, empty labels, leading and trailing dots): random documents and
 * requests from a fixed seed. */
static uint64_t rng_state;
static unsigned rnd(unsigned n) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (unsigned)(rng_state % n);
}

static void random_name(char *b, size_t cap, bool host, bool pat) {
    static const char *const hp[] = {"a", "b", "*",  "**", "{x}", "a*",
                                     "?", "",  "ab", "b?", "*a*", "{x:a|bb}"};
    static const char *const hr[] = {"a", "b", "ab", "", "bb"};
    static const char *const pp[] = {"a",  "b",    "*",      "**",   "{x}",
                                     "a*", "****", "",       "{*r}", "{y:.*}",
                                     "?",  "b",    "{z:a?}", "a"};
    static const char *const pr[] = {"a",     "b",     "ab",   "",
                                     "x%0Ay", "a;m=1", "a%2Fb"};
    const char *sep = host ? "." : "/";
    int n = (int)rnd(5);
    b[0] = '\0';
    if (host ? rnd(4) == 0 : (!pat || rnd(5)))
        strncat(b, sep, cap - strlen(b) - 1);
    for (int i = 0; i < n; i++) {
        if (i)
            strncat(b, sep, cap - strlen(b) - 1);
        const char *t = host ? (pat ? hp[rnd(12)] : hr[rnd(5)])
                             : (pat ? pp[rnd(14)] : pr[rnd(7)]);
        strncat(b, t, cap - strlen(b) - 1);
    }
    if (rnd(4) == 0)
        strncat(b, sep, cap - strlen(b) - 1);
}

START_TEST(spring_pattern_forms_index_agrees_with_linear_scan) {
    rng_state = 0x9e3779b97f4a7c15ull;
    sy_match_ctx *ix = NULL, *lin = NULL;
    ck_assert_int_eq(sy_match_ctx_new(NULL, &ix, NULL), 0);
    ck_assert_int_eq(sy_match_ctx_new(NULL, &lin, NULL), 0);
    long checked = 0, matched = 0;
    for (int round = 0; round < 300; round++) {
        char doc[8192] = "[";
        int nr = 1 + (int)rnd(8);
        for (int i = 0; i < nr; i++) {
            char h[128], q[128], r[600];
            random_name(h, sizeof h, true, true);
            random_name(q, sizeof q, false, true);
            const char *path_pred = "{\"name\":\"Path\",\"args\":{"
                                    "\"_genkey_0\":\"%s\","
                                    "\"matchTrailingSlash\":\"%s\"}}";
            const char *host_pred =
                "{\"name\":\"Host\",\"args\":{\"_genkey_0\":\"%s\"}}";
            char pp[300], hp[200];
            snprintf(pp, sizeof pp, path_pred, q, rnd(2) ? "true" : "false");
            snprintf(hp, sizeof hp, host_pred, h);
            static const char *const extra[] = {"", ",\"Method=GET,POST\"",
                                                ",\"Query=q\""};
            unsigned k = rnd(3);
            snprintf(r, sizeof r,
                     "%s{\"id\":\"r%d\",\"uri\":\"http://x\","
                     "\"predicates\":[%s%s%s%s]}",
                     i ? "," : "", i, k != 1 ? hp : "", k == 2 ? "," : "",
                     k != 0 ? pp : "", extra[rnd(3)]);
            strncat(doc, r, sizeof doc - strlen(doc) - 2);
        }
        strcat(doc, "]");
        sy_router_options o = SY_ROUTER_OPTIONS_INIT;
        o.lenient = true; /* an invalid random pattern drops its route */
        sy_router *rt = NULL;
        ck_assert_int_eq(sy_router_new(&o, &rt, NULL), 0);
        ck_assert_int_eq(sy_router_add_source(rt, "m", NULL), 0);
        if (sy_router_apply(rt, "m", doc, strlen(doc), NULL, NULL) != 0) {
            sy_router_free(rt);
            continue;
        }
        sy_snapshot *snap = sy_router_acquire(rt);
        for (int j = 0; j < 40; j++) {
            char h[128], pa[128];
            random_name(h, sizeof h, true, false);
            random_name(pa, sizeof pa, false, false);
            sy_request req = SY_REQUEST_INIT;
            static const char *const methods[] = {"GET", "POST", "PUT"};
            req.method = S(methods[rnd(3)]);
            req.query = S(rnd(2) ? "q=1" : "");
            req.host = S(h);
            req.path = S(pa);
            sy_match *a = NULL, *b = NULL;
            ck_assert_int_eq(sy_snapshot_match(snap, ix, &req, &a), 0);
            ck_assert_int_eq(sy_snapshot_match_linear(snap, lin, &req, &b), 0);
            ck_assert_msg(strcmp(matched_id(a), matched_id(b)) == 0,
                          "host '%s' path '%s': indexed %s, linear %s in %s", h,
                          pa, matched_id(a), matched_id(b), doc);
            /* and the same variables (the value a name ends with) */
            for (size_t v = 0; b && v < sy_match_var_count(b); v++) {
                sy_str name, val;
                sy_match_var(b, v, &name, &val);
                char nm[64];
                snprintf(nm, sizeof nm, "%.*s", (int)name.len, name.ptr);
                sy_str got = sy_match_var_get(a, nm);
                sy_str want = sy_match_var_get(b, nm);
                ck_assert_msg(
                    got.len == want.len &&
                        (!got.len || memcmp(got.ptr, want.ptr, got.len) == 0),
                    "host '%s' path '%s': %s is '%.*s' indexed, "
                    "'%.*s' linear in %s",
                    h, pa, nm, (int)got.len, got.ptr, (int)want.len, want.ptr,
                    doc);
            }
            checked++;
            matched += b != NULL;
        }
        sy_snapshot_release(snap);
        sy_router_free(rt);
    }
    /* the generator must exercise both outcomes */
    ck_assert_int_gt(checked, 5000);
    ck_assert_int_gt(matched, checked / 10);
    ck_assert_int_lt(matched, checked - checked / 10);
    sy_match_ctx_free(ix);
    sy_match_ctx_free(lin);
}
END_TEST

/* ------------------------------------------------------------------ */

START_TEST(plan_starts_from_the_request) {
    REQ.path = S("/a/b");
    REQ.query = S("x=1");
    header("Accept", "*/*");
    run();
    ck_assert_int_eq(P.action, SY_ACTION_PROXY);
    ck_assert_int_eq(P.status, 0);
    eq(P.path, "/a/b");
    eq(P.query, "x=1");
    ck_assert_uint_eq(P.header_count, 1);
    ck_assert_ptr_ne(P.headers, HDRS);
    has_header(0, "Accept", "*/*");
    ck_assert(!P.preserve_host);
    ck_assert_uint_eq(P.resp_count, 0);
    ck_assert_uint_eq(P.host_filter_count, 0);
}
END_TEST

START_TEST(add_request_header_appends_a_header) {
    header("X-A", "1");
    route(filt("AddRequestHeader", "name", "X-A", "value", "2", NULL));
    run();
    ck_assert_uint_eq(P.header_count, 2);
    has_header(0, "X-A", "1");
    has_header(1, "X-A", "2");
    ck_assert_uint_eq(REQ.header_count, 1); /* the request is untouched */
}
END_TEST

START_TEST(add_request_header_expands_captured_vars) {
    var("segment", "42");
    var("host", "eu");
    route(filt("AddRequestHeader", "name", "X-Seg", "value",
               "id-{segment}@{host}", NULL));
    run();
    has_header(0, "X-Seg", "id-42@eu");
}
END_TEST

/* A {var} is a decoded capture: an encoded CR LF in the path must not
 * become a line break in a header (a header injected upstream, or a
 * response split): control bytes but HTAB go out percent-encoded. */
START_TEST(expansion_into_a_header_encodes_control_bytes) {
    var("segment", "a\r\nX-Evil: 1\x7f\tz");
    route(filt("AddRequestHeader", "name", "X-Seg", "value", "v-{segment}",
               NULL));
    run();
    has_header(0, "X-Seg", "v-a%0D%0AX-Evil: 1%7F\tz");
}
END_TEST

START_TEST(expansion_uses_the_last_capture_of_a_name) {
    var("x", "host-value");
    var("x", "path-value");
    route(filt("AddRequestHeader", "name", "X", "value", "{x}", NULL));
    run();
    has_header(0, "X", "path-value");
}
END_TEST

START_TEST(expansion_of_an_unknown_var_is_empty) {
    route(filt("AddRequestHeader", "name", "X", "value", "a{nope}b", NULL));
    run();
    has_header(0, "X", "ab");
}
END_TEST

START_TEST(expansion_leaves_braces_with_a_slash_alone) {
    var("a", "1");
    route(filt("AddRequestHeader", "name", "X", "value", "{a/b}{a}", NULL));
    run();
    has_header(0, "X", "{a/b}1");
}
END_TEST

START_TEST(add_request_headers_if_not_present_adds_missing_ones) {
    header("x-present", "yes");
    var("v", "7");
    route(filt("AddRequestHeadersIfNotPresent", "headers", "X-Present:no",
               "headers", "X-New:a{v}", "headers", "X-New:b", NULL));
    run();
    ck_assert_uint_eq(P.header_count, 3);
    has_header(0, "x-present", "yes");
    has_header(1, "X-New", "a7");
    has_header(2, "X-New", "b");
}
END_TEST

START_TEST(add_request_headers_if_not_present_adds_when_blank) {
    header("X-B", "  ");
    route(filt("AddRequestHeadersIfNotPresent", "headers", "X-B:v", NULL));
    run();
    ck_assert_uint_eq(P.header_count, 2);
    has_header(1, "X-B", "v");
}
END_TEST

START_TEST(add_request_headers_if_not_present_rejects_item_without_colon) {
    ck_assert_int_eq(
        filt_err("AddRequestHeadersIfNotPresent", "headers", "NoColon", NULL),
        SY_EARG);
    ck_assert_str_eq(ERR.path, ENTRY_PATH ".args.headers");
}
END_TEST

START_TEST(add_request_parameter_on_empty_query_has_no_separator) {
    route(filt("AddRequestParameter", "name", "a", "value", "b", NULL));
    run();
    eq(P.query, "a=b");
}
END_TEST

START_TEST(add_request_parameter_appends_with_ampersand) {
    REQ.query = S("x=1");
    var("v", "9");
    route(filt("AddRequestParameter", "name", "a", "value", "{v}", NULL));
    run();
    eq(P.query, "x=1&a=9");
}
END_TEST

/* A captured variable is decoded ("a b" from /sp/a%20b): written raw it
 * would put a space in the upstream request line. Encoded as java.net.URI
 * encodes it when SCG builds the query; '+', '&', '%' stay as written. */
START_TEST(add_request_parameter_encodes_what_cannot_stand_in_a_query) {
    var("v", "a b\"<\xc3\xa9>#|+&%41");
    route(filt("AddRequestParameter", "name", "n m", "value", "x-{v}", NULL));
    run();
    eq(P.query, "n%20m=x-a%20b%22%3C%C3%A9%3E%23%7C+&%41");
}
END_TEST

START_TEST(add_request_parameter_after_trailing_ampersand_adds_none) {
    REQ.query = S("x=1&");
    route(filt("AddRequestParameter", "name", "a", "value", "b", NULL));
    run();
    eq(P.query, "x=1&a=b");
}
END_TEST

START_TEST(add_response_header_adds_by_default) {
    var("v", "1");
    route(filt("AddResponseHeader", "name", "X-R", "value", "v{v}", NULL));
    run();
    ck_assert_uint_eq(P.resp_count, 1);
    ck_assert_int_eq(P.resp[0].kind, SY_RESP_ADD);
    eq(P.resp[0].name, "X-R");
    eq(P.resp[0].value, "v1");
}
END_TEST

START_TEST(add_response_header_without_override_adds_if_absent) {
    route(filt("AddResponseHeader", "name", "X-R", "value", "v", "override",
               "false", NULL));
    run();
    ck_assert_int_eq(P.resp[0].kind, SY_RESP_ADD_IF_ABSENT);
}
END_TEST

START_TEST(dedupe_response_header_is_a_response_op_with_strategy) {
    route(filt("DedupeResponseHeader", "name",
               "Access-Control-Allow-Origin Vary", NULL));
    route(filt("DedupeResponseHeader", "name", "Vary", "strategy",
               "RETAIN_LAST", NULL));
    run();
    ck_assert_uint_eq(P.resp_count, 2);
    ck_assert_int_eq(P.resp[0].kind, SY_RESP_DEDUPE);
    eq(P.resp[0].name, "Access-Control-Allow-Origin Vary");
    eq(P.resp[0].arg, "RETAIN_FIRST");
    eq(P.resp[1].arg, "RETAIN_LAST");
}
END_TEST

START_TEST(map_request_header_appends_every_value_to_target) {
    header("X-From", "a");
    header("x-from", "b");
    header("X-To", "z");
    route(filt("MapRequestHeader", "fromHeader", "X-From", "toHeader", "X-To",
               NULL));
    run();
    ck_assert_uint_eq(P.header_count, 5);
    has_header(3, "X-To", "a");
    has_header(4, "X-To", "b");
}
END_TEST

START_TEST(map_request_header_without_source_does_nothing) {
    route(filt("MapRequestHeader", "fromHeader", "X-From", "toHeader", "X-To",
               NULL));
    run();
    ck_assert_uint_eq(P.header_count, 0);
}
END_TEST

/* SCG PrefixPathGatewayFilterFactoryTest testPrefixPath */
START_TEST(prefix_path_prepends_the_prefix) {
    REQ.path = S("/hello");
    route(filt("PrefixPath", "prefix", "/mypath", NULL));
    run();
    eq(P.path, "/mypath/hello");
    teardown();
    setup();
    REQ.path = S("/hello%20world");
    route(filt("PrefixPath", "prefix", "/foo", NULL));
    run();
    eq(P.path, "/foo/hello%20world");
}
END_TEST

/* SCG PrefixPathGatewayFilterFactoryTest
 * testPrefixPathWithVariable, testPrefixPathWithMultipleVariables */
START_TEST(prefix_path_expands_captured_vars) {
    REQ.path = S("/bar");
    var("id", "foo");
    route(filt("PrefixPath", "prefix", "/{id}", NULL));
    run();
    eq(P.path, "/foo/bar");
    teardown();
    setup();
    REQ.path = S("/test");
    var("id", "foo");
    var("hello", "world");
    var("product", "bar");
    route(filt("PrefixPath", "prefix", "/{id}/v1/{hello}/{product}", NULL));
    run();
    eq(P.path, "/foo/v1/world/bar/test");
}
END_TEST

/* SCG marks the exchange GATEWAY_ALREADY_PREFIXED, so a
 * chain's later PrefixPaths do nothing (defaults included). */
START_TEST(prefix_path_only_the_first_of_a_chain_applies) {
    REQ.path = S("/x");
    route(filt("PrefixPath", "prefix", "/one", NULL));
    route(filt("PrefixPath", "prefix", "/two", NULL));
    run();
    eq(P.path, "/one/x");
    teardown();
    setup();
    REQ.path = S("/x");
    dflt(filt("PrefixPath", "prefix", "/d", NULL));
    route(filt("PrefixPath", "prefix", "/r", NULL));
    run();
    eq(P.path, "/d/x");
}
END_TEST

/* The prefix is a UriTemplate too: its text is encoded as a path. */
START_TEST(prefix_path_encodes_the_prefix_text) {
    REQ.path = S("/x");
    var("v", "a b");
    route(filt("PrefixPath", "prefix", "/p%2F/{v}", NULL));
    run();
    eq(P.path, "/p%252F/a%20b/x");
}
END_TEST

START_TEST(preserve_host_header_sets_the_flag) {
    route(filt("PreserveHostHeader", NULL));
    run();
    ck_assert(P.preserve_host);
}
END_TEST

START_TEST(redirect_to_answers_with_status_and_url_as_given) {
    REQ.query = S("q=1");
    route(filt("RedirectTo", "status", "302", "url", "https://acme.org/x?y=%20",
               NULL));
    run();
    ck_assert_int_eq(P.action, SY_ACTION_REDIRECT);
    ck_assert_int_eq(P.status, 302);
    eq(P.redirect, "https://acme.org/x?y=%20");
}
END_TEST

START_TEST(redirect_to_with_request_params_appends_the_query) {
    REQ.query = S("a=1&b=2");
    route(filt("RedirectTo", "status", "301", "url", "https://acme.org/x",
               "includeRequestParams", "true", NULL));
    run();
    eq(P.redirect, "https://acme.org/x?a=1&b=2");
}
END_TEST

START_TEST(redirect_to_with_request_params_joins_an_existing_query) {
    REQ.query = S("a=1");
    route(filt("RedirectTo", "status", "MOVED_PERMANENTLY", "url",
               "/x?k=v#frag", "includeRequestParams", "true", NULL));
    run();
    ck_assert_int_eq(P.status, 301);
    eq(P.redirect, "/x?k=v&a=1#frag");
}
END_TEST

START_TEST(redirect_to_rejects_a_status_outside_3xx) {
    ck_assert_int_eq(
        filt_err("RedirectTo", "status", "200", "url", "https://x", NULL),
        SY_EARG);
    ck_assert_str_eq(ERR.path, ENTRY_PATH ".args.status");
}
END_TEST

START_TEST(remove_request_header_removes_all_case_insensitively) {
    header("X-Gone", "1");
    header("Keep", "k");
    header("x-gone", "2");
    route(filt("RemoveRequestHeader", "name", "X-GONE", NULL));
    run();
    ck_assert_uint_eq(P.header_count, 1);
    has_header(0, "Keep", "k");
}
END_TEST

START_TEST(remove_response_header_is_a_response_op) {
    route(filt("RemoveResponseHeader", "name", "Server", NULL));
    run();
    ck_assert_int_eq(P.resp[0].kind, SY_RESP_REMOVE);
    eq(P.resp[0].name, "Server");
}
END_TEST

START_TEST(remove_request_parameter_matches_the_decoded_name) {
    REQ.query = S("a%20b=1&c=2&a+b=3");
    route(filt("RemoveRequestParameter", "name", "a b", NULL));
    run();
    eq(P.query, "c=2");
}
END_TEST

START_TEST(remove_request_parameter_groups_and_reencodes_the_rest) {
    REQ.query = S("a=1&b=x&c=%41+b&a=2&flag&e=");
    route(filt("RemoveRequestParameter", "name", "b", NULL));
    run();
    eq(P.query, "a=1&a=2&c=A%20b&flag&e=");
}
END_TEST

START_TEST(remove_request_parameter_without_match_keeps_query_bytes) {
    REQ.query = S("x=%7e&y");
    route(filt("RemoveRequestParameter", "name", "z", NULL));
    run();
    eq(P.query, "x=%7e&y");
}
END_TEST

/* SCG: the name's values (matched by decoded name) replaced by one value,
 * the name added back last, the rest grouped and re-encoded as
 * RemoveRequestParameter does; the replacement is encoded, not expanded. */
START_TEST(rewrite_request_parameter_replaces_every_value_with_one) {
    REQ.query = S("a=1&b=x&a%20=3&a=2&flag");
    route(filt("RewriteRequestParameter", "name", "a", "replacement",
               "new v&{x}", NULL));
    run();
    eq(P.query, "b=x&a%20=3&flag&a=new%20v%26%7Bx%7D");
}
END_TEST

START_TEST(rewrite_request_parameter_without_match_keeps_query_bytes) {
    REQ.query = S("x=%7e&y");
    route(
        filt("RewriteRequestParameter", "name", "z", "replacement", "1", NULL));
    run();
    eq(P.query, "x=%7e&y");
    REQ.query = S("");
    run();
    eq(P.query, "");
}
END_TEST

START_TEST(rewrite_request_parameter_needs_a_replacement) {
    ck_assert_int_eq(filt_err("RewriteRequestParameter", "name", "a", NULL),
                     SY_EMISSING);
    ck_assert_str_eq(ERR.path, ENTRY_PATH ".args.replacement");
}
END_TEST

START_TEST(request_header_size_answers_431_with_error_header) {
    header("X-Big", "0123456789");
    route(filt("RequestHeaderSize", "maxSize", "10B", NULL));
    run();
    ck_assert_int_eq(P.action, SY_ACTION_RESPOND);
    ck_assert_int_eq(P.status, 431);
    ck_assert_uint_eq(P.resp_count, 1);
    ck_assert_int_eq(P.resp[0].kind, SY_RESP_ADD);
    eq(P.resp[0].name, "errorMessage");
    eq(P.resp[0].value, "Request Header/s size is larger than permissible "
                        "limit (10B). Request Header/s size for 'X-Big' is "
                        "15B.");
}
END_TEST

START_TEST(request_header_size_sums_all_values_of_one_name) {
    header("X-A", "12345");
    header("x-a", "12345");
    route(filt("RequestHeaderSize", "maxSize", "12B", "errorHeaderName",
               "X-Why", NULL));
    run();
    ck_assert_int_eq(P.status, 431);
    eq(P.resp[0].name, "X-Why");
}
END_TEST

START_TEST(request_header_size_within_limit_proxies) {
    header("X-A", "12345");
    route(filt("RequestHeaderSize", "maxSize", "8B", NULL));
    run();
    ck_assert_int_eq(P.action, SY_ACTION_PROXY);
    ck_assert_uint_eq(P.resp_count, 0);
}
END_TEST

START_TEST(request_size_answers_413_when_content_length_is_larger) {
    REQ.content_length = 6000000;
    route(filt("RequestSize", "maxSize", "5MB", NULL));
    run();
    ck_assert_int_eq(P.action, SY_ACTION_RESPOND);
    ck_assert_int_eq(P.status, 413);
    eq(P.resp[0].name, "errorMessage");
    eq(P.resp[0].value, "Request size is larger than permissible limit. "
                        "Request size is 6.0 MB where permissible limit is "
                        "5.2 MB");
}
END_TEST

START_TEST(request_size_default_limit_is_five_million_bytes) {
    REQ.content_length = 5000001;
    route(filt("RequestSize", NULL));
    run();
    ck_assert_int_eq(P.status, 413);
}
END_TEST

START_TEST(request_size_with_unknown_length_proxies) {
    REQ.content_length = -1;
    route(filt("RequestSize", "maxSize", "1B", NULL));
    run();
    ck_assert_int_eq(P.action, SY_ACTION_PROXY);
}
END_TEST

START_TEST(request_size_rejects_zero) {
    ck_assert_int_eq(filt_err("RequestSize", "maxSize", "0", NULL), SY_EARG);
    ck_assert_str_eq(ERR.path, ENTRY_PATH ".args.maxSize");
}
END_TEST

START_TEST(rewrite_path_uses_numbered_groups) {
    REQ.path = S("/foo/bar");
    route(
        filt("RewritePath", "regexp", "/foo/(.*)", "replacement", "/$1", NULL));
    run();
    eq(P.path, "/bar");
}
END_TEST

START_TEST(rewrite_path_reads_dollar_backslash_as_dollar) {
    REQ.path = S("/red/blue");
    route(filt("RewritePath", "regexp", "/red/?(?<segment>.*)", "replacement",
               "/$\\{segment}", NULL));
    run();
    eq(P.path, "/blue");
}
END_TEST

START_TEST(rewrite_path_replaces_every_match_unanchored) {
    REQ.path = S("/a-b/c-d");
    route(filt("RewritePath", "regexp", "-", "replacement", "_", NULL));
    run();
    eq(P.path, "/a_b/c_d");
}
END_TEST

START_TEST(rewrite_path_escaped_dollar_is_literal) {
    REQ.path = S("/x");
    route(filt("RewritePath", "regexp", "x", "replacement", "\\$1\\\\", NULL));
    run();
    eq(P.path, "/$1\\");
}
END_TEST

START_TEST(rewrite_path_takes_the_longest_existing_group_number) {
    REQ.path = S("/ab");
    route(filt("RewritePath", "regexp", "/(a)b", "replacement", "/$12", NULL));
    run();
    eq(P.path, "/a2");
}
END_TEST

START_TEST(rewrite_path_unset_group_is_empty) {
    REQ.path = S("/b");
    route(
        filt("RewritePath", "regexp", "/(a)?b", "replacement", "/[$1]", NULL));
    run();
    eq(P.path, "/[]");
}
END_TEST

START_TEST(rewrite_path_grows_the_output_when_needed) {
    REQ.path = S("/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa");
    route(
        filt("RewritePath", "regexp", "a", "replacement", "0123456789", NULL));
    run();
    ck_assert_uint_eq(P.path.len, 1 + 48 * 10);
    ck_assert(memcmp(P.path.ptr, "/0123456789012", 14) == 0);
}
END_TEST

/* An allocator that fails allocation number fail_at (1-based) when set. */
static long fail_at, fail_calls;

static void *failing_malloc(void *d, size_t n) {
    (void)d;
    return fail_at && ++fail_calls == fail_at ? NULL : malloc(n);
}

static void *failing_realloc(void *d, void *p, size_t n) {
    (void)d;
    return fail_at && ++fail_calls == fail_at ? NULL : realloc(p, n);
}

static void failing_free(void *d, void *p) {
    (void)d;
    free(p);
}

/* The scratch arena running out of memory while RewritePath
 * grows its output is SY_ENOMEM, never a 500 answer. */
START_TEST(rewrite_path_out_of_memory_is_enomem_not_an_answer) {
    REQ.path = S("/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa");
    route(
        filt("RewritePath", "regexp", "a", "replacement", "0123456789", NULL));
    sy_allocator fa = {failing_malloc, failing_realloc, failing_free, NULL};
    sy__alloc FA;
    sy__alloc_init(&FA, &fa);
    long failures = 0;
    for (long at = 1; at <= 8; at++) {
        sy__arena ar;
        sy__arena_init(&ar, &FA, 512);
        fail_calls = 0;
        fail_at = at;
        int rc = sy__plan_compute(&P, NULL, 0, (const sy__filter *const *)ROUTE,
                                  NROUTE, &REQ, VARS, NVARS, MD, &ar);
        fail_at = 0;
        if (rc) {
            ck_assert_int_eq(rc, SY_ENOMEM);
            failures++;
        } else {
            ck_assert_int_eq(P.action, SY_ACTION_PROXY);
            ck_assert_uint_eq(P.path.len, 1 + 48 * 10);
        }
        sy__arena_free(&ar);
    }
    ck_assert_int_ge(failures, 2); /* the first block and a growth */
}
END_TEST

START_TEST(rewrite_path_bad_regex_reports_offset) {
    ck_assert_int_eq(
        filt_err("RewritePath", "regexp", "/a(b", "replacement", "/", NULL),
        SY_EREGEX);
    ck_assert_str_eq(ERR.path, ENTRY_PATH ".args.regexp");
    ck_assert_uint_eq(ERR.offset, 4);
}
END_TEST

START_TEST(rewrite_path_unknown_group_name_is_rejected) {
    ck_assert_int_eq(filt_err("RewritePath", "regexp", "/(?<a>.*)",
                              "replacement", "/${b}", NULL),
                     SY_EARG);
    ck_assert_str_eq(ERR.path, ENTRY_PATH ".args.replacement");
}
END_TEST

START_TEST(rewrite_path_group_number_beyond_count_is_rejected) {
    ck_assert_int_eq(
        filt_err("RewritePath", "regexp", "/(a)", "replacement", "/$2", NULL),
        SY_EARG);
}
END_TEST

START_TEST(rewrite_path_trailing_escape_is_rejected) {
    ck_assert_int_eq(
        filt_err("RewritePath", "regexp", "/a", "replacement", "/b\\", NULL),
        SY_EARG);
}
END_TEST

START_TEST(rewrite_path_needs_groups_in_match_data) {
    sy__filter *f =
        filt("RewritePath", "regexp", "/(a)(?<n>b)", "replacement", "/", NULL);
    route(f);
    ck_assert_uint_eq(sy__filter_max_groups(f), 3);
    sy__filter *g = filt("PrefixPath", "prefix", "/p", NULL);
    route(g);
    ck_assert_uint_eq(sy__filter_max_groups(g), 0);
}
END_TEST

START_TEST(rewrite_location_response_header_is_an_op_with_its_entry) {
    route(filt("RewriteLocationResponseHeader", "stripVersion", "ALWAYS_STRIP",
               "hostValue", "api.example.com", NULL));
    run();
    ck_assert_uint_eq(P.resp_count, 1);
    ck_assert_int_eq(P.resp[0].kind, SY_RESP_REWRITE_LOCATION);
    eq(P.resp[0].name, "Location");
    eq(P.resp[0].value, "api.example.com");
    eq(P.resp[0].arg, "ALWAYS_STRIP");
    ck_assert_uint_eq(P.host_filter_count, 1);
    const sy_filter_entry *e = P.host_filters[0];
    ck_assert_str_eq(e->name, "RewriteLocationResponseHeader");
    ck_assert_uint_eq(e->arg_count, 4);
    ck_assert_str_eq(e->args[3].key, "protocols");
    ck_assert_str_eq(e->args[3].value, "https?|ftps?");
}
END_TEST

START_TEST(rewrite_location_response_header_checks_protocols_regex) {
    ck_assert_int_eq(
        filt_err("RewriteLocationResponseHeader", "protocols", "http(", NULL),
        SY_EREGEX);
    ck_assert_str_eq(ERR.path, ENTRY_PATH ".args.protocols");
}
END_TEST

START_TEST(rewrite_response_header_gives_pcre2_replacement) {
    route(filt("RewriteResponseHeader", "name", "X-R", "regexp",
               "pw=(?<p>[^&]+)", "replacement", "pw=$\\{p}\\$", NULL));
    run();
    ck_assert_int_eq(P.resp[0].kind, SY_RESP_REWRITE);
    eq(P.resp[0].name, "X-R");
    eq(P.resp[0].arg, "pw=(?<p>[^&]+)");
    eq(P.resp[0].value, "pw=${1}$$");
}
END_TEST

START_TEST(rewrite_response_header_bad_regex_is_rejected) {
    ck_assert_int_eq(filt_err("RewriteResponseHeader", "name", "X", "regexp",
                              "a[", "replacement", "b", NULL),
                     SY_EREGEX);
    ck_assert_str_eq(ERR.path, ENTRY_PATH ".args.regexp");
    ck_assert_uint_eq(ERR.offset, 2);
}
END_TEST

START_TEST(set_path_expands_and_encodes_vars) {
    REQ.path = S("/red/x");
    var("segment", "a b/c");
    route(filt("SetPath", "template", "/{segment}/end", NULL));
    run();
    eq(P.path, "/a%20b/c/end");
}
END_TEST

/* SCG SetPathGatewayFilterFactoryTests
 * setEncodedPathFilterWorks: the template's own text is encoded as a path
 * too, so a literal "%20" goes out as "%2520" and a space as "%20". */
START_TEST(set_path_encodes_the_template_text) {
    route(filt("SetPath", "template", "/baz/foo%20bar", NULL));
    run();
    eq(P.path, "/baz/foo%2520bar");
}
END_TEST

START_TEST(set_path_never_sends_a_raw_space) {
    route(filt("SetPath", "template", "/a b/{missing}", NULL));
    run();
    eq(P.path, "/a%20b/");
}
END_TEST

/* SCG SetPathGatewayFilterFactoryTests setPathFilterWithTemplateVarsWorks,
 * setPathFilterWithTemplatePrefixVarsWorks,
 * setPathFilterWithEncodedCharactersWorks */
START_TEST(set_path_ports_scg_template_cases) {
    var("id", "123");
    route(filt("SetPath", "template", "/bar/baz/{id}", NULL));
    run();
    eq(P.path, "/bar/baz/123");
    teardown();
    setup();
    var("org", "123");
    var("scope", "abc");
    route(filt("SetPath", "template", "/{org}/{scope}/function", NULL));
    run();
    eq(P.path, "/123/abc/function");
    teardown();
    setup();
    var("id", "12 3");
    route(filt("SetPath", "template", "/bar/baz/{id}", NULL));
    run();
    eq(P.path, "/bar/baz/12%203");
}
END_TEST

/* Spring's UriTemplate reads the template as a URI: '?' or '#' outside a
 * {var} ends its path. */
START_TEST(set_path_template_path_ends_at_a_query_mark) {
    REQ.query = S("q=1");
    var("v", "x?y");
    route(filt("SetPath", "template", "/a/{v}?z=1#f", NULL));
    run();
    eq(P.path, "/a/x%3Fy");
    eq(P.query, "q=1");
}
END_TEST

START_TEST(redirect_to_with_request_params_and_no_query_keeps_url) {
    route(filt("RedirectTo", "status", "307", "url", "https://acme.org/x",
               "includeRequestParams", "true", NULL));
    run();
    ck_assert_int_eq(P.status, 307);
    eq(P.redirect, "https://acme.org/x");
}
END_TEST

START_TEST(set_request_header_replaces_every_value) {
    header("X-S", "1");
    header("Other", "o");
    header("x-s", "2");
    var("v", "new");
    route(filt("SetRequestHeader", "name", "X-S", "value", "{v}", NULL));
    run();
    ck_assert_uint_eq(P.header_count, 2);
    has_header(0, "X-S", "new");
    has_header(1, "Other", "o");
}
END_TEST

START_TEST(set_request_header_adds_when_absent) {
    route(filt("SetRequestHeader", "name", "X-S", "value", "v", NULL));
    run();
    has_header(0, "X-S", "v");
}
END_TEST

START_TEST(set_response_header_is_a_set_op) {
    route(filt("SetResponseHeader", "name", "X-S", "value", "v", NULL));
    run();
    ck_assert_int_eq(P.resp[0].kind, SY_RESP_SET);
    eq(P.resp[0].value, "v");
}
END_TEST

START_TEST(set_request_host_header_replaces_host_and_preserves_it) {
    header("Host", "client.example");
    header("Accept", "*/*");
    route(filt("SetRequestHostHeader", "host", "upstream.example", NULL));
    run();
    ck_assert(P.preserve_host);
    ck_assert_uint_eq(P.header_count, 2);
    has_header(0, "Accept", "*/*");
    has_header(1, "Host", "upstream.example");
}
END_TEST

START_TEST(set_status_accepts_a_status_name) {
    route(filt("SetStatus", "status", "NOT_FOUND", NULL));
    run();
    ck_assert_int_eq(P.action, SY_ACTION_PROXY);
    ck_assert_int_eq(P.status, 404);
}
END_TEST

START_TEST(set_status_rejects_an_unknown_name) {
    ck_assert_int_eq(filt_err("SetStatus", "status", "NOPE", NULL), SY_EARG);
    ck_assert_str_eq(ERR.path, ENTRY_PATH ".args.status");
}
END_TEST

START_TEST(strip_prefix_drops_one_segment_by_default) {
    REQ.path = S("/name/blue/red");
    route(filt("StripPrefix", NULL));
    run();
    eq(P.path, "/blue/red");
}
END_TEST

START_TEST(strip_prefix_keeps_a_trailing_slash) {
    REQ.path = S("/a/b/c/");
    route(filt("StripPrefix", "parts", "2", NULL));
    run();
    eq(P.path, "/c/");
}
END_TEST

START_TEST(strip_prefix_of_all_segments_gives_root) {
    REQ.path = S("/a/b/");
    route(filt("StripPrefix", "parts", "2", NULL));
    run();
    eq(P.path, "/");
}
END_TEST

START_TEST(strip_prefix_beyond_the_segments_gives_root) {
    REQ.path = S("/a");
    route(filt("StripPrefix", "parts", "3", NULL));
    run();
    eq(P.path, "/");
}
END_TEST

START_TEST(strip_prefix_ignores_empty_segments) {
    REQ.path = S("//a//b///c");
    route(filt("StripPrefix", "parts", "1", NULL));
    run();
    eq(P.path, "/b/c");
}
END_TEST

START_TEST(strip_prefix_zero_normalises_only) {
    REQ.path = S("/a/b");
    route(filt("StripPrefix", "parts", "0", NULL));
    run();
    eq(P.path, "/a/b");
}
END_TEST

START_TEST(strip_prefix_rejects_a_non_number) {
    ck_assert_int_eq(filt_err("StripPrefix", "parts", "x", NULL), SY_EARG);
    ck_assert_str_eq(ERR.path, ENTRY_PATH ".args.parts");
}
END_TEST

/* The common case costs no copy: the result is a slice of the request's
 * path (the hosts send it without building it: the nginx module's
 * $switchyard_uri, docs/performance.md). */
START_TEST(strip_prefix_slices_the_path) {
    REQ.path = S("/svc3/x/y/?");
    REQ.path.len--; /* (a request line: more follows the path) */
    route(filt("StripPrefix", NULL));
    run();
    eq(P.path, "/x/y/");
    ck_assert_ptr_eq(P.path.ptr, REQ.path.ptr + 5);
}
END_TEST

/* SCG's StripPrefix written plainly (tokenize on '/', trim, drop the
 * blank ones and the first `parts`, join behind '/', a trailing '/' kept
 * unless the result is "/"): the reference the filter's slice and join
 * must both give. */
static size_t strip_ref(const char *p, size_t len, int parts, char *out) {
    size_t o = 0;
    int idx = 0;
    out[o++] = '/';
    for (size_t i = 0; i < len;) {
        size_t s = i;
        while (i < len && p[i] != '/')
            i++;
        size_t e = i++;
        while (s < e && (p[s] == ' ' || p[s] == '\t'))
            s++;
        while (e > s && (p[e - 1] == ' ' || p[e - 1] == '\t'))
            e--;
        if (e == s || idx++ < parts)
            continue;
        if (o > 1)
            out[o++] = '/';
        memcpy(out + o, p + s, e - s);
        o += e - s;
    }
    if (o > 1 && len && p[len - 1] == '/')
        out[o++] = '/';
    return o;
}

/* Every path of up to 7 bytes over '/', 'a', ' ' and '\t', parts 0-3. */
START_TEST(strip_prefix_agrees_with_scg_on_every_short_path) {
    static const char alphabet[] = "/a \t";
    sy__filter *f[4];
    for (int k = 0; k < 4; k++) {
        char n[2] = {(char)('0' + k), 0};
        f[k] = filt("StripPrefix", "parts", n, NULL);
    }
    char path[8], want[16];
    size_t checked = 0;
    for (size_t len = 0; len <= 7; len++) {
        size_t count = 1;
        for (size_t i = 0; i < len; i++)
            count *= 4;
        for (size_t c = 0; c < count; c++) {
            size_t x = c;
            for (size_t i = 0; i < len; i++, x /= 4)
                path[i] = alphabet[x % 4];
            for (int k = 0; k < 4; k++) {
                REQ.path = (sy_str){path, len};
                NROUTE = 0;
                route(f[k]);
                run();
                size_t wl = strip_ref(path, len, k, want);
                ck_assert_msg(P.path.len == wl &&
                                  memcmp(P.path.ptr, want, wl) == 0,
                              "StripPrefix=%d of \"%.*s\": got \"%.*s\", "
                              "want \"%.*s\"",
                              k, (int)len, path, (int)P.path.len, P.path.ptr,
                              (int)wl, want);
                checked++;
            }
        }
    }
    ck_assert_uint_eq(checked,
                      4 * (1 + 4 + 16 + 64 + 256 + 1024 + 4096 + 16384));
    NROUTE = 4; /* teardown frees the four */
    for (int k = 0; k < 4; k++)
        ROUTE[k] = f[k];
}
END_TEST

/* (route model section 5): defaults and route filters
 * interleave - default 1, route 1, default 2, route 2. */
START_TEST(default_filters_interleave_with_route_filters) {
    REQ.path = S("/foo/bar/get");
    dflt(filt("AddRequestHeader", "name", "X-A", "value", "1", NULL));
    dflt(filt("PrefixPath", "prefix", "/httpbin", NULL));
    route(filt("StripPrefix", "parts", "2", NULL));
    run();
    eq(P.path, "/httpbin/get");
    has_header(0, "X-A", "1");
}
END_TEST

START_TEST(default_filters_come_first_on_equal_positions) {
    REQ.path = S("/api/v1/x");
    dflt(filt("StripPrefix", "parts", "1", NULL));
    dflt(filt("AddRequestHeader", "name", "X-Order", "value", "default", NULL));
    route(filt("PrefixPath", "prefix", "/svc", NULL));
    route(filt("AddRequestHeader", "name", "X-Order", "value", "route", NULL));
    route(filt("AddRequestHeader", "name", "X-Order", "value", "last", NULL));
    run();
    eq(P.path, "/svc/v1/x");
    has_header(0, "X-Order", "default");
    has_header(1, "X-Order", "route");
    has_header(2, "X-Order", "last");
}
END_TEST

START_TEST(filters_see_the_edits_of_earlier_filters) {
    REQ.path = S("/a/b/c");
    route(filt("StripPrefix", "parts", "1", NULL));
    route(filt("RewritePath", "regexp", "^/b", "replacement", "/z", NULL));
    run();
    eq(P.path, "/z/c");
}
END_TEST

START_TEST(first_short_circuit_wins) {
    header("X-Big", "0123456789");
    REQ.content_length = 100;
    route(filt("RequestSize", "maxSize", "10B", NULL));
    route(filt("RequestHeaderSize", "maxSize", "5B", NULL));
    route(filt("RedirectTo", "status", "302", "url", "/elsewhere", NULL));
    route(filt("SetStatus", "status", "200", NULL));
    route(filt("AddResponseHeader", "name", "X-After", "value", "1", NULL));
    run();
    ck_assert_int_eq(P.action, SY_ACTION_RESPOND);
    ck_assert_int_eq(P.status, 413);
    ck_assert_ptr_null(P.redirect.ptr);
    ck_assert_uint_eq(P.resp_count, 2);
    eq(P.resp[1].name, "X-After");
}
END_TEST

START_TEST(short_circuit_overrides_an_earlier_set_status) {
    REQ.content_length = 100;
    route(filt("SetStatus", "status", "201", NULL));
    route(filt("RequestSize", "maxSize", "10B", NULL));
    run();
    ck_assert_int_eq(P.status, 413);
}
END_TEST

START_TEST(stateful_filters_are_handed_to_the_host_in_chain_order) {
    route(filt("CircuitBreaker", "name", "cb", "fallbackUri", "forward:/fb",
               NULL));
    route(filt("AddRequestHeader", "name", "X", "value", "1", NULL));
    route(filt("Retry", "retries", "3", NULL));
    route(filt("RequestRateLimiter", "redis-rate-limiter.replenishRate", "10",
               NULL));
    run();
    ck_assert_uint_eq(P.host_filter_count, 3);
    ck_assert_str_eq(P.host_filters[0]->name, "CircuitBreaker");
    ck_assert_uint_eq(P.host_filters[0]->arg_count, 2);
    ck_assert_str_eq(P.host_filters[0]->args[1].value, "forward:/fb");
    ck_assert_str_eq(P.host_filters[1]->name, "Retry");
    ck_assert_str_eq(P.host_filters[2]->name, "RequestRateLimiter");
    ck_assert_str_eq(P.host_filters[2]->args[0].key,
                     "redis-rate-limiter.replenishRate");
}
END_TEST

static int validate_calls;

static int validate_needs_key(void *data, const sy_kv *args, size_t n,
                              sy_error *err) {
    validate_calls++;
    ck_assert_ptr_eq(data, &validate_calls);
    for (size_t i = 0; i < n; i++)
        if (strcmp(args[i].key, "key") == 0)
            return 0;
    snprintf(err->path, sizeof err->path, "args.key");
    snprintf(err->message, sizeof err->message, "key is required");
    return SY_EMISSING;
}

static const sy_filter_factory host_factory = {
    NULL, SY_SHORTCUT_DEFAULT, validate_needs_key, &validate_calls};

START_TEST(host_filter_is_validated_and_handed_over) {
    validate_calls = 0;
    sy_kv args[] = {{"key", "v"}};
    sy__def_host_ref ref = {&host_factory, "MyAuth"};
    sy__def_entry e = {
        .f.ref = &ref, .args = args, .arg_count = 1, .host = true};
    sy__filter *f = NULL;
    ck_assert_int_eq(sy__filter_compile(&e, &ENV, ENTRY_PATH, &f, &ERR), 0);
    ck_assert_int_eq(validate_calls, 1);
    route(f);
    run();
    ck_assert_uint_eq(P.host_filter_count, 1);
    ck_assert_str_eq(P.host_filters[0]->name, "MyAuth");
    ck_assert_str_eq(P.host_filters[0]->args[0].value, "v");
}
END_TEST

START_TEST(host_filter_validation_failure_names_the_path) {
    sy_kv args[] = {{"other", "v"}};
    sy__def_host_ref ref = {&host_factory, "MyAuth"};
    sy__def_entry e = {
        .f.ref = &ref, .args = args, .arg_count = 1, .host = true};
    sy__filter *f = NULL;
    ck_assert_int_eq(sy__filter_compile(&e, &ENV, ENTRY_PATH, &f, &ERR),
                     SY_EMISSING);
    ck_assert_ptr_null(f);
    ck_assert_str_eq(ERR.path, ENTRY_PATH ".args.key");
    ck_assert_str_eq(ERR.message, "key is required");
}
END_TEST

START_TEST(unknown_filter_without_host_factory_is_rejected) {
    sy__def_host_ref ref = {NULL, "Nope"}; /* none registered */
    sy__def_entry e = {.f.ref = &ref, .host = true};
    sy__filter *f = NULL;
    ck_assert_int_eq(sy__filter_compile(&e, &ENV, ENTRY_PATH, &f, &ERR),
                     SY_EUNKNOWN);
    ck_assert_str_eq(ERR.path, ENTRY_PATH);
}
END_TEST

START_TEST(missing_required_argument_names_the_field) {
    ck_assert_int_eq(filt_err("AddRequestHeader", "name", "X", NULL),
                     SY_EMISSING);
    ck_assert_str_eq(ERR.path, ENTRY_PATH ".args.value");
}
END_TEST

int main(void) {
    Suite *s = suite_create("filter");
    TCase *tc = tcase_create("filter");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, plan_starts_from_the_request);
    tcase_add_test(tc, add_request_header_appends_a_header);
    tcase_add_test(tc, add_request_header_expands_captured_vars);
    tcase_add_test(tc, expansion_into_a_header_encodes_control_bytes);
    tcase_add_test(tc, expansion_uses_the_last_capture_of_a_name);
    tcase_add_test(tc, expansion_of_an_unknown_var_is_empty);
    tcase_add_test(tc, expansion_leaves_braces_with_a_slash_alone);
    tcase_add_test(tc, add_request_headers_if_not_present_adds_missing_ones);
    tcase_add_test(tc, add_request_headers_if_not_present_adds_when_blank);
    tcase_add_test(
        tc, add_request_headers_if_not_present_rejects_item_without_colon);
    tcase_add_test(tc, add_request_parameter_on_empty_query_has_no_separator);
    tcase_add_test(tc, add_request_parameter_appends_with_ampersand);
    tcase_add_test(tc,
                   add_request_parameter_encodes_what_cannot_stand_in_a_query);
    tcase_add_test(tc,
                   add_request_parameter_after_trailing_ampersand_adds_none);
    tcase_add_test(tc, add_response_header_adds_by_default);
    tcase_add_test(tc, add_response_header_without_override_adds_if_absent);
    tcase_add_test(tc, dedupe_response_header_is_a_response_op_with_strategy);
    tcase_add_test(tc, map_request_header_appends_every_value_to_target);
    tcase_add_test(tc, map_request_header_without_source_does_nothing);
    tcase_add_test(tc, prefix_path_prepends_the_prefix);
    tcase_add_test(tc, prefix_path_expands_captured_vars);
    tcase_add_test(tc, prefix_path_only_the_first_of_a_chain_applies);
    tcase_add_test(tc, prefix_path_encodes_the_prefix_text);
    tcase_add_test(tc, preserve_host_header_sets_the_flag);
    tcase_add_test(tc, redirect_to_answers_with_status_and_url_as_given);
    tcase_add_test(tc, redirect_to_with_request_params_appends_the_query);
    tcase_add_test(tc, redirect_to_with_request_params_joins_an_existing_query);
    tcase_add_test(tc, redirect_to_rejects_a_status_outside_3xx);
    tcase_add_test(tc, remove_request_header_removes_all_case_insensitively);
    tcase_add_test(tc, remove_response_header_is_a_response_op);
    tcase_add_test(tc, remove_request_parameter_matches_the_decoded_name);
    tcase_add_test(tc, remove_request_parameter_groups_and_reencodes_the_rest);
    tcase_add_test(tc,
                   remove_request_parameter_without_match_keeps_query_bytes);
    tcase_add_test(tc, rewrite_request_parameter_replaces_every_value_with_one);
    tcase_add_test(tc,
                   rewrite_request_parameter_without_match_keeps_query_bytes);
    tcase_add_test(tc, rewrite_request_parameter_needs_a_replacement);
    tcase_add_test(tc, request_header_size_answers_431_with_error_header);
    tcase_add_test(tc, request_header_size_sums_all_values_of_one_name);
    tcase_add_test(tc, request_header_size_within_limit_proxies);
    tcase_add_test(tc, request_size_answers_413_when_content_length_is_larger);
    tcase_add_test(tc, request_size_default_limit_is_five_million_bytes);
    tcase_add_test(tc, request_size_with_unknown_length_proxies);
    tcase_add_test(tc, request_size_rejects_zero);
    tcase_add_test(tc, rewrite_path_uses_numbered_groups);
    tcase_add_test(tc, rewrite_path_reads_dollar_backslash_as_dollar);
    tcase_add_test(tc, rewrite_path_replaces_every_match_unanchored);
    tcase_add_test(tc, rewrite_path_escaped_dollar_is_literal);
    tcase_add_test(tc, rewrite_path_takes_the_longest_existing_group_number);
    tcase_add_test(tc, rewrite_path_unset_group_is_empty);
    tcase_add_test(tc, rewrite_path_grows_the_output_when_needed);
    tcase_add_test(tc, rewrite_path_bad_regex_reports_offset);
    tcase_add_test(tc, rewrite_path_unknown_group_name_is_rejected);
    tcase_add_test(tc, rewrite_path_group_number_beyond_count_is_rejected);
    tcase_add_test(tc, rewrite_path_trailing_escape_is_rejected);
    tcase_add_test(tc, rewrite_path_needs_groups_in_match_data);
    tcase_add_test(tc, rewrite_path_out_of_memory_is_enomem_not_an_answer);
    tcase_add_test(tc,
                   rewrite_location_response_header_is_an_op_with_its_entry);
    tcase_add_test(tc, rewrite_location_response_header_checks_protocols_regex);
    tcase_add_test(tc, rewrite_response_header_gives_pcre2_replacement);
    tcase_add_test(tc, rewrite_response_header_bad_regex_is_rejected);
    tcase_add_test(tc, set_path_expands_and_encodes_vars);
    tcase_add_test(tc, set_path_encodes_the_template_text);
    tcase_add_test(tc, set_path_never_sends_a_raw_space);
    tcase_add_test(tc, set_path_ports_scg_template_cases);
    tcase_add_test(tc, set_path_template_path_ends_at_a_query_mark);
    tcase_add_test(tc, redirect_to_with_request_params_and_no_query_keeps_url);
    tcase_add_test(tc, set_request_header_replaces_every_value);
    tcase_add_test(tc, set_request_header_adds_when_absent);
    tcase_add_test(tc, set_response_header_is_a_set_op);
    tcase_add_test(tc, set_request_host_header_replaces_host_and_preserves_it);
    tcase_add_test(tc, set_status_accepts_a_status_name);
    tcase_add_test(tc, set_status_rejects_an_unknown_name);
    tcase_add_test(tc, strip_prefix_drops_one_segment_by_default);
    tcase_add_test(tc, strip_prefix_keeps_a_trailing_slash);
    tcase_add_test(tc, strip_prefix_of_all_segments_gives_root);
    tcase_add_test(tc, strip_prefix_beyond_the_segments_gives_root);
    tcase_add_test(tc, strip_prefix_ignores_empty_segments);
    tcase_add_test(tc, strip_prefix_zero_normalises_only);
    tcase_add_test(tc, strip_prefix_rejects_a_non_number);
    tcase_add_test(tc, strip_prefix_slices_the_path);
    tcase_add_test(tc, strip_prefix_agrees_with_scg_on_every_short_path);
    tcase_add_test(tc, default_filters_interleave_with_route_filters);
    tcase_add_test(tc, default_filters_come_first_on_equal_positions);
    tcase_add_test(tc, filters_see_the_edits_of_earlier_filters);
    tcase_add_test(tc, first_short_circuit_wins);
    tcase_add_test(tc, short_circuit_overrides_an_earlier_set_status);
    tcase_add_test(tc, stateful_filters_are_handed_to_the_host_in_chain_order);
    tcase_add_test(tc, host_filter_is_validated_and_handed_over);
    tcase_add_test(tc, host_filter_validation_failure_names_the_path);
    tcase_add_test(tc, unknown_filter_without_host_factory_is_rejected);
    tcase_add_test(tc, missing_required_argument_names_the_field);
    tcase_add_test(tc, spring_end_to_end_cases);
    tcase_add_test(tc, spring_pattern_forms_index_agrees_with_linear_scan);
    suite_add_tcase(s, tc);
    return sy_test_run(s);
}
