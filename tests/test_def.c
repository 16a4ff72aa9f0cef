/* test_def.c - route documents: the valid/invalid corpus under
 * tests/data, shapes, strict and lenient modes, limits, syntax positions,
 * shortcut mapping, upstreams, metadata and the internal def.h calls. */
#include "base/factory.h"
#include "def/def_build.h"
#include "route/predicate_int.h"
#include "snapshot/diff.h"
#include "testutil.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>

static sy_document *parse_ok(const char *json, bool lenient) {
    sy_parse_options o = SY_PARSE_OPTIONS_INIT;
    o.lenient = lenient;
    sy_document *d = NULL;
    sy_error e;
    sy__error_clear(&e);
    int rc = sy_document_parse(json, strlen(json), &o, &d, &e);
    ck_assert_msg(rc == 0, "parse failed: %d %s: %s", rc, e.path, e.message);
    ck_assert_ptr_nonnull(d);
    return d;
}

static int parse_err(const char *json, const sy_parse_options *o, sy_error *e) {
    sy_document *d = (sy_document *)1;
    sy__error_clear(e);
    int rc = sy_document_parse(json, strlen(json), o, &d, e);
    ck_assert_int_ne(rc, 0);
    ck_assert_ptr_null(d);
    ck_assert_int_eq(e->code, rc);
    ck_assert(e->message[0] != '\0');
    return rc;
}

static const sy_route *route0(const sy_document *d) {
    ck_assert_uint_ge(sy_document_route_count(d), 1);
    return sy_document_route(d, 0);
}

/* ---- corpus ---- */

static int code_by_name(const char *name) {
    static const struct {
        const char *n;
        int c;
    } t[] = {{"SY_ESYNTAX", SY_ESYNTAX},   {"SY_ETYPE", SY_ETYPE},
             {"SY_EMISSING", SY_EMISSING}, {"SY_EDUPLICATE", SY_EDUPLICATE},
             {"SY_ERANGE", SY_ERANGE},     {"SY_EURI", SY_EURI},
             {"SY_EUNKNOWN", SY_EUNKNOWN}, {"SY_EARG", SY_EARG},
             {"SY_ESPEL", SY_ESPEL},       {"SY_ELIMIT", SY_ELIMIT},
             {"SY_EREGEX", SY_EREGEX},     {"SY_EPATTERN", SY_EPATTERN}};
    for (size_t i = 0; i < SY_ARRAY_LEN(t); i++)
        if (strcmp(t[i].n, name) == 0)
            return t[i].c;
    ck_abort_msg("unknown code name %s", name);
    return 0;
}

/* ---- timeouts: Spring Cloud Gateway's reading of the metadata ---- */

/* A one-route document: an http route with this metadata object. */
static void url_route_with_metadata(char *json, size_t n,
                                    const char *metadata) {
    snprintf(json, n,
             "{\"routes\":[{\"id\":\"a\",\"uri\":\"http://h:1\","
             "\"metadata\":%s}]}",
             metadata);
}

START_TEST(timeouts_are_read_as_spring_reads_them) {
    static const struct {
        const char *metadata;
        sy_timeout_kind kind;
        sy_timeout_setting setting;
        uint64_t ms;
    } good[] = {
        {"{}", SY_TIMEOUT_RESPONSE, SY_TIMEOUT_UNSET, 7},
        {"{}", SY_TIMEOUT_CONNECT, SY_TIMEOUT_UNSET, 7},
        {"{\"response-timeout\":250}", SY_TIMEOUT_RESPONSE, SY_TIMEOUT_MS, 250},
        {"{\"response-timeout\":\"250\"}", SY_TIMEOUT_RESPONSE, SY_TIMEOUT_MS,
         250},
        {"{\"response-timeout\":-1}", SY_TIMEOUT_RESPONSE, SY_TIMEOUT_NONE, 7},
        {"{\"response-timeout\":-1}", SY_TIMEOUT_CONNECT, SY_TIMEOUT_UNSET, 7},
        {"{\"connect-timeout\":0}", SY_TIMEOUT_CONNECT, SY_TIMEOUT_NONE, 7},
        {"{\"connect-timeout\":40}", SY_TIMEOUT_CONNECT, SY_TIMEOUT_MS, 40},
        /* whole numbers past 1e15 are read as written (not "1e+15"), up
         * to 2^53, the most a JSON number holds exactly */
        {"{\"response-timeout\":1000000000000000}", SY_TIMEOUT_RESPONSE,
         SY_TIMEOUT_MS, 1000000000000000},
        {"{\"connect-timeout\":9007199254740992}", SY_TIMEOUT_CONNECT,
         SY_TIMEOUT_MS, 9007199254740992},
        {"{\"response-timeout\":\"9223372036854775807\"}", SY_TIMEOUT_RESPONSE,
         SY_TIMEOUT_MS, 9223372036854775807},
    };
    for (size_t i = 0; i < SY_ARRAY_LEN(good); i++) {
        char json[256];
        url_route_with_metadata(json, sizeof json, good[i].metadata);
        sy_document *d = parse_ok(json, false);
        uint64_t ms = 7;
        ck_assert_int_eq(sy_route_timeout(route0(d), good[i].kind, &ms),
                         good[i].setting);
        ck_assert_uint_eq(ms, good[i].ms);
        sy_document_free(d);
    }
    static const struct {
        const char *metadata, *path, *needle;
    } bad[] = {
        {"{\"connect-timeout\":-5}", "routes[0].metadata.connect-timeout",
         "must not be negative"},
        {"{\"response-timeout\":0}", "routes[0].metadata.response-timeout",
         "times out every request"},
        {"{\"response-timeout\":\"5s\"}", "routes[0].metadata.response-timeout",
         "must be an integer"},
        {"{\"response-timeout\":1.5}", "routes[0].metadata.response-timeout",
         "must be an integer"},
        /* out of range says so, with the limit */
        {"{\"response-timeout\":10000000000000000}",
         "routes[0].metadata.response-timeout",
         "out of range as a JSON number: at most 9007199254740992"},
        {"{\"connect-timeout\":-1e300}", "routes[0].metadata.connect-timeout",
         "out of range as a JSON number"},
        {"{\"response-timeout\":\"9223372036854775808\"}",
         "routes[0].metadata.response-timeout",
         "out of range: at most 9223372036854775807"},
        /* a typo would leave a route meant to be off serving */
        {"{\"status\":\"Disabled\"}", "routes[0].metadata.status",
         "not 'Disabled'"},
        {"{\"status\":\"off\"}", "routes[0].metadata.status",
         "\"disabled\" or \"enabled\""},
    };
    for (size_t i = 0; i < SY_ARRAY_LEN(bad); i++) {
        char json[256];
        url_route_with_metadata(json, sizeof json, bad[i].metadata);
        sy_error e;
        ck_assert_int_eq(parse_err(json, NULL, &e), SY_EARG);
        ck_assert_str_eq(e.path, bad[i].path);
        ck_assert_msg(strstr(e.message, bad[i].needle), "%s", e.message);
    }
    ck_assert_int_eq(sy_route_timeout(NULL, SY_TIMEOUT_CONNECT, NULL),
                     SY_TIMEOUT_UNSET);
    /* the texts: 1e15 to 2^53 in integer form, the rest as cJSON prints */
    char json[256];
    url_route_with_metadata(json, sizeof json,
                            "{\"a\":1000000000000000,\"b\":-0,\"c\":250,"
                            "\"d\":-9007199254740992,\"e\":1e16}");
    sy_document *d = parse_ok(json, false);
    ck_assert_str_eq(sy_route_metadata(route0(d), "a"), "1000000000000000");
    ck_assert_str_eq(sy_route_metadata(route0(d), "b"), "-0");
    ck_assert_str_eq(sy_route_metadata(route0(d), "c"), "250");
    ck_assert_str_eq(sy_route_metadata(route0(d), "d"), "-9007199254740992");
    ck_assert_str_eq(sy_route_metadata(route0(d), "e"), "1e+16");
    sy_document_free(d);
}
END_TEST

/* ---- selection settings and every error of a route ---- */

START_TEST(selection_settings_are_checked_with_their_path) {
    static const struct {
        const char *metadata, *path, *needle;
        int code;
    } bad[] = {
        {"{\"lb-policy\":\"rr\"}", "routes[0].metadata.lb-policy", "'rr'",
         SY_EARG},
        {"{\"version-fallback\":\"newest\"}",
         "routes[0].metadata.version-fallback", "none, latest or any", SY_EARG},
        {"{\"version-header\":\"\"}", "routes[0].metadata.version-header",
         "header name", SY_EARG},
        {"{\"lb-hash-header\":\"a:b\",\"lb-policy\":\"hash\"}",
         "routes[0].metadata.lb-hash-header", "'a:b'", SY_EARG},
        {"{\"lb-hash-cookie\":\"\",\"lb-policy\":\"hash\"}",
         "routes[0].metadata.lb-hash-cookie", "cookie name", SY_EARG},
        {"{\"lb-zone\":\"\"}", "routes[0].metadata.lb-zone", "zone", SY_EARG},
        {"{\"lb-policy\":\"hash\"}", "routes[0].metadata.lb-policy",
         "lb-hash-header or lb-hash-cookie", SY_EARG},
        {"{\"lb-hash-header\":\"X-U\"}", "routes[0].metadata.lb-hash-header",
         "only with lb-policy hash", SY_EARG},
        {"{\"lb-policy\":\"hash\",\"lb-hash-header\":\"X\","
         "\"lb-hash-cookie\":\"c\"}",
         "routes[0].metadata.lb-hash-cookie", "exclude each other", SY_EARG},
        {"{\"version-default\":\"\"}", "routes[0].metadata.version-default",
         "latest, oldest or a version", SY_EARG},
        {"{\"version-default\":2}", "routes[0].metadata.version-default",
         "must be a string", SY_ETYPE},
        {"{\"lb-policy\":true}", "routes[0].metadata.lb-policy",
         "must be a string", SY_ETYPE},
    };
    for (size_t i = 0; i < SY_ARRAY_LEN(bad); i++) {
        char json[512];
        snprintf(json, sizeof json,
                 "{\"routes\":[{\"id\":\"a\",\"uri\":\"lb://s\","
                 "\"metadata\":%s}]}",
                 bad[i].metadata);
        sy_error e;
        int rc = parse_err(json, NULL, &e);
        ck_assert_msg(rc == bad[i].code, "%s: code %d", bad[i].metadata, rc);
        ck_assert_str_eq(e.path, bad[i].path);
        ck_assert_msg(strstr(e.message, bad[i].needle), "%s: %s",
                      bad[i].metadata, e.message);
    }
    /* every accepted spelling */
    static const char *const good[] = {
        "{\"lb-policy\":\"round-robin\"}",
        "{\"lb-policy\":\"random\",\"lb-zone\":\"eu-1\"}",
        "{\"lb-policy\":\"hash\",\"lb-hash-header\":\"X-User-Id\"}",
        "{\"lb-policy\":\"hash\",\"lb-hash-cookie\":\"JSESSIONID\"}",
        "{\"version-fallback\":\"none\",\"version-header\":\"X-Version\"}",
        "{\"version-fallback\":\"latest\"}",
        "{\"version-fallback\":\"any\",\"version-default\":\"oldest\"}",
        "{\"version-default\":\"latest\"}",
        "{\"version-default\":\"1.0\"}",
        "{\"owner\":7,\"lb-policyx\":\"whatever\"}",
    };
    for (size_t i = 0; i < SY_ARRAY_LEN(good); i++) {
        char json[512];
        snprintf(json, sizeof json,
                 "[{\"id\":\"a\",\"uri\":\"lb://s\",\"metadata\":%s}]",
                 good[i]);
        sy_document *d = parse_ok(json, false);
        sy_document_free(d);
    }
    /* run or refuse: where a key has no effect it is refused, not kept */
    static const struct {
        const char *uri, *metadata, *path, *needle;
    } idle[] = {
        {"http://h", "{\"lb-policy\":\"random\"}", "[0].metadata.lb-policy",
         "lb:// routes only"},
        {"https://h", "{\"version-header\":\"X-V\"}",
         "[0].metadata.version-header", "lb:// routes only"},
        {"forward:/x", "{\"response-timeout\":100}",
         "[0].metadata.response-timeout", "calls no upstream"},
        {"no://op", "{\"connect-timeout\":100}", "[0].metadata.connect-timeout",
         "calls no upstream"},
    };
    for (size_t i = 0; i < SY_ARRAY_LEN(idle); i++) {
        char json[512];
        snprintf(json, sizeof json,
                 "[{\"id\":\"a\",\"uri\":\"%s\",\"metadata\":%s}]", idle[i].uri,
                 idle[i].metadata);
        sy_error e;
        ck_assert_int_eq(parse_err(json, NULL, &e), SY_EARG);
        ck_assert_str_eq(e.path, idle[i].path);
        ck_assert_msg(strstr(e.message, idle[i].needle), "%s", e.message);
    }
}
END_TEST

START_TEST(lenient_parse_lists_every_error_of_a_route) {
    const char *json =
        "{\"routes\":["
        "{\"id\":\"a\",\"uri\":\"ftp://x\",\"order\":\"x\","
        "\"predicates\":[\"Path=/a\",\"Paht=/b\",{\"name\":\"Header\","
        "\"args\":{\"header\":\"X\",\"regexp\":\"[0-9\"}}],"
        "\"filters\":[\"StripPrefix=-1\",\"AddRequestHeader=X\"],"
        "\"metadata\":{\"lb-policy\":\"rr\",\"version-fallback\":\"newest\"}},"
        "{\"id\":\"ok\",\"uri\":\"http://x\"},"
        "{\"uri\":\"http://x\",\"predicates\":\"Path=/x\"}]}";
    static const char *const paths[] = {
        "routes[0].uri",
        "routes[0].order",
        "routes[0].predicates[1]",
        "routes[0].predicates[2].args.regexp",
        "routes[0].filters[0]",
        "routes[0].filters[1]",
        "routes[0].metadata.lb-policy",
        "routes[0].metadata.version-fallback",
        "routes[2].id",
        "routes[2].predicates",
    };
    sy_document *d = parse_ok(json, true);
    ck_assert_uint_eq(sy_document_route_count(d), 1);
    ck_assert_str_eq(sy_route_id(route0(d)), "ok");
    ck_assert_uint_eq(sy_document_issue_count(d), SY_ARRAY_LEN(paths));
    for (size_t i = 0; i < SY_ARRAY_LEN(paths); i++) {
        const sy_error *e = sy_document_issue(d, i);
        ck_assert_msg(strcmp(e->path, paths[i]) == 0, "issue %zu: %s, want %s",
                      i, e->path, paths[i]);
        ck_assert_int_lt(e->code, 0);
        ck_assert(e->message[0]);
    }
    sy_document_free(d);
    /* strict mode still stops at the first error */
    sy_error e;
    ck_assert_int_eq(parse_err(json, NULL, &e), SY_EURI);
    ck_assert_str_eq(e.path, "routes[0].uri");
}
END_TEST

START_TEST(lenient_issue_paths_count_the_route_index_up) {
    /* the route's path "routes[i]" follows i across every carry (9 -> 10,
     * 19 -> 20, 99 -> 100, 109 -> 110, 999 -> 1000), in the build's errors
     * and the id check's */
    static const size_t bad[] = {9, 10, 20, 99, 100, 109, 110, 999, 1000};
    static const char *const paths[] = {
        "routes[9].order",   "routes[10].order",  "routes[20].order",
        "routes[99].order",  "routes[100].order", "routes[109].id",
        "routes[110].order", "routes[999].order", "routes[1000].order"};
    size_t n = 1002, cap = n * 64 + 64, len = 0;
    char *json = malloc(cap);
    ck_assert_ptr_nonnull(json);
    len += (size_t)snprintf(json + len, cap - len, "{\"routes\":[");
    for (size_t i = 0, k = 0; i < n; i++) {
        bool b = k < SY_ARRAY_LEN(bad) && bad[k] == i;
        k += b;
        len += (size_t)snprintf(json + len, cap - len,
                                "%s{\"id\":\"r%zu\",\"uri\":\"http://x\"%s}",
                                i ? "," : "", i == 109 ? (size_t)108 : i,
                                b && i != 109 ? ",\"order\":\"x\"" : "");
    }
    len += (size_t)snprintf(json + len, cap - len, "]}");
    ck_assert_uint_lt(len, cap);
    sy_document *d = parse_ok(json, true);
    ck_assert_uint_eq(sy_document_issue_count(d), SY_ARRAY_LEN(paths));
    for (size_t i = 0; i < SY_ARRAY_LEN(paths); i++)
        ck_assert_str_eq(sy_document_issue(d, i)->path, paths[i]);
    ck_assert_uint_eq(sy_document_route_count(d), n - SY_ARRAY_LEN(paths));
    sy_document_free(d);
    free(json);
}
END_TEST

START_TEST(lenient_errors_of_a_route_are_listed_once) {
    /* the same mistake in two entries: one issue per place, none twice */
    const char *json = "[{\"id\":\"a\",\"uri\":\"http://x\","
                       "\"predicates\":[\"Paht=/a\",\"Paht=/a\"]}]";
    sy_document *d = parse_ok(json, true);
    ck_assert_uint_eq(sy_document_issue_count(d), 2);
    ck_assert_str_eq(sy_document_issue(d, 0)->path, "[0].predicates[0]");
    ck_assert_str_eq(sy_document_issue(d, 1)->path, "[0].predicates[1]");
    sy_document_free(d);
}
END_TEST

START_TEST(corpus_valid_documents_parse_strictly) {
    DIR *dir = opendir(sy_test_data("valid"));
    ck_assert_ptr_nonnull(dir);
    int files = 0;
    struct dirent *de;
    while ((de = readdir(dir))) {
        size_t n = strlen(de->d_name);
        if (n < 5 || strcmp(de->d_name + n - 5, ".json") != 0)
            continue;
        char rel[512];
        snprintf(rel, sizeof rel, "valid/%s", de->d_name);
        size_t len;
        char *json = sy_test_read(rel, &len);
        ck_assert_ptr_nonnull(json);
        sy_parse_options o = SY_PARSE_OPTIONS_INIT;
        sy_document *d = NULL;
        sy_error e;
        sy__error_clear(&e);
        int rc = sy_document_parse(json, len, &o, &d, &e);
        ck_assert_msg(rc == 0, "%s: %s: %s", rel, e.path, e.message);
        ck_assert_uint_eq(sy_document_issue_count(d), 0);
        for (size_t i = 0; i < sy_document_route_count(d); i++) {
            const sy_route *r = sy_document_route(d, i);
            ck_assert(sy_route_canonical(r)[0] == '{');
            ck_assert_uint_ne(sy_route_fingerprint(r), 0);
        }
        sy_document_free(d);
        free(json);
        files++;
    }
    closedir(dir);
    ck_assert_int_ge(files, 10);
}
END_TEST

typedef void (*expect_fn)(const char *file, int code, const char *path,
                          const char *linecol);

static int for_each_expectation(expect_fn fn) {
    char *tsv = sy_test_read("invalid/expect.tsv", NULL);
    ck_assert_ptr_nonnull(tsv);
    int n = 0;
    char *save = NULL;
    for (char *line = strtok_r(tsv, "\n", &save); line;
         line = strtok_r(NULL, "\n", &save)) {
        if (line[0] == '#' || !line[0])
            continue;
        char *cols[4] = {NULL, NULL, NULL, NULL};
        int c = 0;
        char *s2 = NULL;
        for (char *t = strtok_r(line, "\t", &s2); t && c < 4;
             t = strtok_r(NULL, "\t", &s2))
            cols[c++] = t;
        ck_assert_int_ge(c, 3);
        const char *path = strcmp(cols[2], "\"\"") == 0 ? "" : cols[2];
        fn(cols[0], code_by_name(cols[1]), path, cols[3] ? cols[3] : "");
        n++;
    }
    free(tsv);
    return n;
}

static void expect_strict(const char *file, int code, const char *path,
                          const char *linecol) {
    char rel[512];
    snprintf(rel, sizeof rel, "invalid/%s", file);
    size_t len;
    char *json = sy_test_read(rel, &len);
    ck_assert_msg(json != NULL, "cannot read %s", rel);
    sy_parse_options o = SY_PARSE_OPTIONS_INIT;
    sy_document *d = NULL;
    sy_error e;
    sy__error_clear(&e);
    int rc = sy_document_parse(json, len, &o, &d, &e);
    ck_assert_msg(rc == code, "%s: got %d (%s: %s), want %d", file, rc, e.path,
                  e.message, code);
    ck_assert_msg(strcmp(e.path, path) == 0, "%s: path '%s', want '%s' (%s)",
                  file, e.path, path, e.message);
    ck_assert_msg(e.message[0], "%s: empty message", file);
    if (linecol[0]) {
        char got[32];
        snprintf(got, sizeof got, "%u:%u", e.line, e.column);
        ck_assert_msg(strcmp(got, linecol) == 0, "%s: at %s, want %s", file,
                      got, linecol);
    }
    free(json);
}

START_TEST(corpus_invalid_documents_fail_with_expected_code_and_path) {
    ck_assert_int_ge(for_each_expectation(expect_strict), 50);
}
END_TEST

static void expect_lenient(const char *file, int code, const char *path,
                           const char *linecol) {
    SY_UNUSED(linecol);
    if (strncmp(path, "routes[", 7) != 0 && path[0] != '[')
        return; /* document-level errors fail in both modes */
    char rel[512];
    snprintf(rel, sizeof rel, "invalid/%s", file);
    size_t len;
    char *json = sy_test_read(rel, &len);
    sy_parse_options o = SY_PARSE_OPTIONS_INIT;
    o.lenient = true;
    sy_document *d = NULL;
    int rc = sy_document_parse(json, len, &o, &d, NULL);
    ck_assert_msg(rc == 0, "%s: lenient parse failed %d", file, rc);
    ck_assert_uint_eq(sy_document_issue_count(d), 1);
    const sy_error *is = sy_document_issue(d, 0);
    ck_assert_int_eq(is->code, code);
    ck_assert_str_eq(is->path, path);
    sy_document_free(d);
    free(json);
}

START_TEST(corpus_invalid_routes_become_issues_in_lenient_mode) {
    ck_assert_int_ge(for_each_expectation(expect_lenient), 50);
}
END_TEST

/* ---- shapes and modes ---- */

/* A {NAME} in a filter template (a header value, SetRequestHostHeader's
 * host, AddRequestParameter's value, SetPath, PrefixPath) that not every
 * request of the route has was accepted and expanded to "": SetPath=/{seg}
 * on Path=/x/{seg} and /y/... sent /y/1 upstream as "/", and AddRequestHeader
 * with {nope} sent "v-", where SCG fails the request (500). Refused at the
 * arg (the shortcut: at the filter), as a fallbackUri's {NAME} is. */
START_TEST(template_variables_must_be_captured) {
    static const struct {
        const char *preds, *filter, *path, *var;
    } bad[] = {
        {"\"Path=/x/{seg}\"", "\"AddRequestHeader=X-A, v-{nope}\"",
         "[0].filters[0]", "{nope}"},
        {"\"Path=/x/{seg},/y/**\"", "\"SetPath=/{seg}\"", "[0].filters[0]",
         "{seg}"},
        {"\"Path=/x/{seg}\"",
         "{\"name\":\"SetResponseHeader\",\"args\":{\"name\":\"X-B\","
         "\"value\":\"{seg}-{other:[a-z]+}\"}}",
         "[0].filters[0].args.value", "{other}"},
        {"\"Host={sub}.example.com\"",
         "{\"name\":\"PrefixPath\",\"args\":{\"prefix\":\"/{tenant}\"}}",
         "[0].filters[0].args.prefix", "{tenant}"},
        {"\"Path=/x/{seg}\"",
         "{\"name\":\"SetRequestHostHeader\",\"args\":{\"host\":"
         "\"{seg}.{zone}.internal\"}}",
         "[0].filters[0].args.host", "{zone}"},
        {"\"Path=/x/{seg}\"",
         "{\"name\":\"AddRequestParameter\",\"args\":{\"name\":\"p\","
         "\"value\":\"{ seg2 }\"}}",
         "[0].filters[0].args.value", "{seg2}"},
        {"\"Path=/x/{seg}\"",
         "{\"name\":\"AddRequestHeadersIfNotPresent\",\"args\":{\"headers\":"
         "[\"X-A:{seg}\",\"X-B:{nope}\"]}}",
         "[0].filters[0].args.headers", "{nope}"},
        {"\"Method=GET\"", "\"AddResponseHeader=X-C, {seg}\"", "[0].filters[0]",
         "{seg}"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char doc[600];
        snprintf(doc, sizeof doc,
                 "[{\"id\":\"r\",\"uri\":\"http://b\",\"predicates\":[%s],"
                 "\"filters\":[%s]}]",
                 bad[i].preds, bad[i].filter);
        sy_parse_options o = SY_PARSE_OPTIONS_INIT;
        sy_error e;
        ck_assert_int_eq(parse_err(doc, &o, &e), SY_EARG);
        ck_assert_msg(strcmp(e.path, bad[i].path) == 0, "%s: path %s", doc,
                      e.path);
        ck_assert_msg(strstr(e.message, bad[i].var) &&
                          strstr(e.message, "not every request"),
                      "%s: %s", doc, e.message);
    }
    /* every request has them: Host and Path captures, regex and catch-all
     * forms, the same name in each pattern; text that is no variable */
    sy_document_free(
        parse_ok("[{\"id\":\"r\",\"uri\":\"http://b\",\"predicates\":"
                 "[\"Host={sub}.example.com\",\"Path=/x/{seg:[0-9]+}/{*rest},"
                 "/y/{seg}/{*rest}\"],\"filters\":[\"SetPath=/{sub}/{seg}"
                 "{rest}\",\"AddRequestHeader=X-A, {sub}-{ seg }\","
                 "\"AddRequestHeader=X-J, a{/b}c {\",\"AddRequestHeader=X-E,"
                 " {}\"]}]",
                 false));
}
END_TEST

START_TEST(envelope_version_may_be_string_or_integer) {
    sy_document *d = parse_ok("{\"version\": \"v42\", \"routes\": []}", false);
    ck_assert_str_eq(sy_document_version(d), "v42");
    sy_document_free(d);
    d = parse_ok("{\"version\": 42, \"routes\": []}", false);
    ck_assert_str_eq(sy_document_version(d), "42");
    sy_document_free(d);
}
END_TEST

/* Found by fuzz_document under UBSan: a version too large for an integer
 * was cast to int64_t (undefined); it is now a type error. */
START_TEST(envelope_version_too_large_for_an_integer_is_a_type_error) {
    sy_error e;
    ck_assert_int_eq(
        parse_err("{\"version\": 1e300, \"routes\": []}", NULL, &e), SY_ETYPE);
    ck_assert_str_eq(e.path, "version");
    ck_assert_int_eq(
        parse_err("{\"version\": -88888888888888888888888, \"routes\": []}",
                  NULL, &e),
        SY_ETYPE);
}
END_TEST

START_TEST(bare_array_has_no_version_and_paths_start_with_index) {
    sy_document *d = parse_ok("[{\"id\":\"a\",\"uri\":\"http://x\"}]", false);
    ck_assert_ptr_null(sy_document_version(d));
    ck_assert_uint_eq(sy_document_route_count(d), 1);
    sy_document_free(d);
    sy_error e;
    parse_err("[{\"id\":\"a\",\"uri\":\"http://x\",\"predicates\":[\"X=1\"]}]",
              NULL, &e);
    ck_assert_str_eq(e.path, "[0].predicates[0]");
}
END_TEST

static const char *mixed =
    "{\"routes\": ["
    "{\"id\":\"a\",\"uri\":\"http://x\"},"
    "{\"id\":\"b\",\"uri\":\"ftp://x\"},"
    "{\"id\":\"c\",\"uri\":\"http://x\",\"predicates\":[\"Path=/c\"]},"
    "{\"id\":\"a\",\"uri\":\"http://y\"},"
    "{\"id\":\"d\",\"uri\":\"http://x\",\"filters\":[\"Nope\"]}]}";

START_TEST(lenient_keeps_valid_routes_and_lists_each_issue) {
    sy_document *d = parse_ok(mixed, true);
    ck_assert_uint_eq(sy_document_route_count(d), 2);
    ck_assert_str_eq(sy_route_id(sy_document_route(d, 0)), "a");
    ck_assert_str_eq(sy_route_id(sy_document_route(d, 1)), "c");
    ck_assert_uint_eq(sy_document_route(d, 1)->doc_index, 2);
    ck_assert_uint_eq(sy_document_issue_count(d), 3);
    ck_assert_int_eq(sy_document_issue(d, 0)->code, SY_EURI);
    ck_assert_str_eq(sy_document_issue(d, 0)->path, "routes[1].uri");
    ck_assert_int_eq(sy_document_issue(d, 1)->code, SY_EDUPLICATE);
    ck_assert_str_eq(sy_document_issue(d, 1)->path, "routes[3].id");
    ck_assert_int_eq(sy_document_issue(d, 2)->code, SY_EUNKNOWN);
    ck_assert_str_eq(sy_document_issue(d, 2)->path, "routes[4].filters[0]");
    ck_assert_ptr_null(sy_document_issue(d, 3));
    ck_assert_ptr_null(sy_document_route(d, 2));
    sy_document_free(d);
}
END_TEST

START_TEST(strict_fails_on_the_first_invalid_route) {
    sy_error e;
    ck_assert_int_eq(parse_err(mixed, NULL, &e), SY_EURI);
    ck_assert_str_eq(e.path, "routes[1].uri");
}
END_TEST

START_TEST(lenient_document_without_valid_routes_still_parses) {
    sy_document *d = parse_ok("[{\"id\":\"a\"}]", true);
    ck_assert_uint_eq(sy_document_route_count(d), 0);
    ck_assert_uint_eq(sy_document_issue_count(d), 1);
    sy_document_free(d);
}
END_TEST

START_TEST(lenient_mode_still_fails_on_syntax_errors) {
    sy_parse_options o = SY_PARSE_OPTIONS_INIT;
    o.lenient = true;
    sy_error e;
    ck_assert_int_eq(parse_err("[{]", &o, &e), SY_ESYNTAX);
}
END_TEST

/* Routes are built as the scan reads them (def.c route_hook), but a
 * route's failure is reported only when nothing the scan-first order
 * reported before it is wrong: a syntax error after it, a bad version or
 * default filters after the routes; and routes the hook leaves to the scan
 * (a \u escape) are still walked in document order. */
START_TEST(a_route_error_waits_for_the_scan_and_the_envelope) {
    sy_error e;
    ck_assert_int_eq(parse_err("[{\"id\":\"a\"},\n{\"id\":\"b\" x}]", NULL, &e),
                     SY_ESYNTAX);
    ck_assert_uint_eq(e.line, 2);
    ck_assert_uint_eq(e.column, 11);
    ck_assert_int_eq(
        parse_err("{\"routes\":[{\"id\":\"a\"}],\"version\":[1]}", NULL, &e),
        SY_ETYPE);
    ck_assert_str_eq(e.path, "version");
    ck_assert_int_eq(parse_err("{\"routes\":[{\"id\":\"a\"}],"
                               "\"default-filters\":[]}",
                               NULL, &e),
                     SY_EARG);
    ck_assert_str_eq(e.path, "default-filters");
    /* the first failing route in document order, whoever read it */
    ck_assert_int_eq(parse_err("[{\"id\":\"\\u0061\",\"uri\":\"http://x\"},"
                               "{\"id\":\"a\",\"uri\":\"http://y\"},"
                               "{\"id\":\"b\"}]",
                               NULL, &e),
                     SY_EDUPLICATE);
    ck_assert_str_eq(e.path, "[1].id");
    ck_assert_int_eq(parse_err("[{\"id\":\"a\",\"uri\":\"http://x\"},"
                               "{\"id\":\"\\u0062\"},"
                               "{\"id\":\"a\",\"uri\":\"http://y\"}]",
                               NULL, &e),
                     SY_EMISSING);
    ck_assert_str_eq(e.path, "[1].uri");
    /* lenient: the issues in document order across both readers */
    sy_document *d = parse_ok("[{\"id\":\"a\"},{\"id\":\"\\u0062\"},"
                              "{\"id\":\"c\",\"uri\":\"http://c\"},"
                              "{\"id\":\"c\",\"uri\":\"http://d\"}]",
                              true);
    ck_assert_uint_eq(sy_document_route_count(d), 1);
    ck_assert_uint_eq(sy_document_issue_count(d), 3);
    ck_assert_str_eq(sy_document_issue(d, 0)->path, "[0].uri");
    ck_assert_str_eq(sy_document_issue(d, 1)->path, "[1].uri");
    ck_assert_str_eq(sy_document_issue(d, 2)->path, "[3].id");
    sy_document_free(d);
}
END_TEST

START_TEST(syntax_error_reports_line_column_and_offset) {
    sy_error e;
    parse_err("[\n  {\"id\": \"a\",\n   \"uri\" \"x\"}]", NULL, &e);
    ck_assert_int_eq(e.code, SY_ESYNTAX);
    ck_assert_uint_eq(e.line, 3);
    ck_assert_uint_eq(e.column, 10);
    ck_assert_uint_eq(e.offset, 25);
    ck_assert_str_eq(e.path, "");
}
END_TEST

START_TEST(trailing_data_after_the_document_is_a_syntax_error) {
    sy_error e;
    ck_assert_int_eq(parse_err("[] []", NULL, &e), SY_ESYNTAX);
    ck_assert_uint_eq(e.column, 4);
    sy_document *d = NULL;
    const char buf[] = "[]\0garbage";
    ck_assert_int_eq(sy_document_parse(buf, sizeof buf - 1, NULL, &d, &e),
                     SY_ESYNTAX);
    ck_assert_int_eq(sy_document_parse(buf, 2, NULL, &d, &e), 0);
    sy_document_free(d);
}
END_TEST

START_TEST(input_need_not_be_nul_terminated) {
    const char *s = "[{\"id\":\"a\",\"uri\":\"http://x\"}]XXXX";
    sy_document *d = NULL;
    ck_assert_int_eq(sy_document_parse(s, strlen(s) - 4, NULL, &d, NULL), 0);
    ck_assert_uint_eq(sy_document_route_count(d), 1);
    sy_document_free(d);
}
END_TEST

START_TEST(bad_arguments_are_einval) {
    sy_document *d;
    sy_error e;
    ck_assert_int_eq(sy_document_parse(NULL, 3, NULL, &d, &e), SY_EINVAL);
    ck_assert_int_eq(sy_document_parse("[]", 2, NULL, NULL, &e), SY_EINVAL);
    sy_parse_options o = SY_PARSE_OPTIONS_INIT;
    o.size = 0;
    ck_assert_int_eq(sy_document_parse("[]", 2, &o, &d, &e), SY_EINVAL);
}
END_TEST

/* ---- limits ---- */

START_TEST(limit_on_document_bytes) {
    sy_parse_options o = SY_PARSE_OPTIONS_INIT;
    o.limits.max_document_bytes = 10;
    sy_error e;
    ck_assert_int_eq(parse_err("[          ]", &o, &e), SY_ELIMIT);
    sy_document *d = NULL;
    ck_assert_int_eq(sy_document_parse("[        ]", 10, &o, &d, &e), 0);
    sy_document_free(d);
}
END_TEST

START_TEST(limit_on_route_count) {
    sy_parse_options o = SY_PARSE_OPTIONS_INIT;
    o.limits.max_routes = 1;
    o.lenient = true;
    sy_error e;
    ck_assert_int_eq(
        parse_err("{\"routes\":[{\"id\":\"a\",\"uri\":\"no://op\"},"
                  "{\"id\":\"b\",\"uri\":\"no://op\"}]}",
                  &o, &e),
        SY_ELIMIT);
    ck_assert_str_eq(e.path, "routes");
}
END_TEST

/* A document's own default filters: no host runs them (they were
 * accepted and ignored); refused in every spelling, in lenient mode too. */
START_TEST(document_default_filters_are_refused) {
    static const char *const keys[] = {"default-filters", "defaultFilters",
                                       "default_filters"};
    sy_parse_options o = SY_PARSE_OPTIONS_INIT;
    o.lenient = true;
    for (size_t i = 0; i < SY_ARRAY_LEN(keys); i++) {
        char json[200];
        snprintf(json, sizeof json,
                 "{\"routes\":[{\"id\":\"a\",\"uri\":\"no://op\"}],"
                 "\"%s\":[\"AddResponseHeader=X,1\"]}",
                 keys[i]);
        sy_error e;
        ck_assert_int_eq(parse_err(json, &o, &e), SY_EARG);
        ck_assert_str_eq(e.path, keys[i]);
        ck_assert_ptr_nonnull(strstr(e.message, "not run"));
    }
    /* a route's own "default-filters" key stays an ignored route key */
    const char *ok = "{\"routes\":[{\"id\":\"a\",\"uri\":\"no://op\","
                     "\"x\":{\"default-filters\":1}}]}";
    sy_document_free(parse_ok(ok, false));
}
END_TEST

START_TEST(limit_on_string_length_names_the_path) {
    sy_parse_options o = SY_PARSE_OPTIONS_INIT;
    o.limits.max_string_bytes = 8;
    sy_error e;
    ck_assert_int_eq(
        parse_err("[{\"id\":\"a\",\"uri\":\"http://very-long-host\"}]", &o, &e),
        SY_ELIMIT);
    ck_assert_str_eq(e.path, "[0].uri");
    ck_assert_int_eq(parse_err("[{\"id\":\"a\",\"uri\":\"no://op\","
                               "\"metadata\":{\"a-very-long-key\":1}}]",
                               &o, &e),
                     SY_ELIMIT);
    ck_assert_str_eq(e.path, "[0].metadata");
}
END_TEST

START_TEST(limit_on_nesting_depth) {
    sy_parse_options o = SY_PARSE_OPTIONS_INIT;
    o.limits.max_depth = 4;
    sy_error e;
    const char *deep = "[{\"id\":\"a\",\"uri\":\"no://op\",\"metadata\":"
                       "{\"x\":[[1]]}}]";
    ck_assert_int_eq(parse_err(deep, &o, &e), SY_ELIMIT);
    ck_assert_uint_eq(e.offset, 44);
    ck_assert_uint_eq(e.line, 1);
    o.limits.max_depth = 5;
    sy_document *d = NULL;
    ck_assert_int_eq(sy_document_parse(deep, strlen(deep), &o, &d, &e), 0);
    sy_document_free(d);
}
END_TEST

START_TEST(default_depth_limit_is_32) {
    char buf[200];
    size_t n = 0;
    for (int i = 0; i < 33; i++)
        buf[n++] = '[';
    for (int i = 0; i < 33; i++)
        buf[n++] = ']';
    buf[n] = '\0';
    sy_error e;
    ck_assert_int_eq(parse_err(buf, NULL, &e), SY_ELIMIT);
    /* brackets inside strings do not count */
    sy_document *d =
        parse_ok("[{\"id\":\"[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[\","
                 "\"uri\":\"no://op\"}]",
                 false);
    sy_document_free(d);
}
END_TEST

/* ---- entries ---- */

static const sy__def_entry *pred(const sy_document *d, size_t r, size_t i) {
    const sy_route *rt = sy_document_route(d, r);
    ck_assert_uint_gt(rt->predicate_count, i);
    return &rt->predicates[i];
}

static const sy__def_entry *filt(const sy_document *d, size_t r, size_t i) {
    const sy_route *rt = sy_document_route(d, r);
    ck_assert_uint_gt(rt->more->filter_count, i);
    return &rt->more->filters[i];
}

START_TEST(shortcut_default_maps_genkeys_to_field_order) {
    sy_document *d =
        parse_ok("[{\"id\":\"a\",\"uri\":\"no://op\",\"predicates\":"
                 "[\"Cookie= chocolate ,  ch.p \"]}]",
                 false);
    const sy__def_entry *e = pred(d, 0, 0);
    ck_assert_str_eq(sy__def_name(e), "Cookie");
    ck_assert_ptr_nonnull(sy__def_spec(e));
    ck_assert_uint_eq(e->arg_count, 2);
    ck_assert_str_eq(e->args[0].key, "name");
    ck_assert_str_eq(e->args[0].value, "chocolate");
    ck_assert_str_eq(e->args[1].key, "regexp");
    ck_assert_str_eq(e->args[1].value, "ch.p");
    sy_document_free(d);
}
END_TEST

START_TEST(object_args_are_put_in_field_order) {
    sy_document *d = parse_ok(
        "[{\"id\":\"a\",\"uri\":\"no://op\",\"filters\":[{\"name\":"
        "\"AddResponseHeader\",\"args\":{\"override\":\"false\",\"value\":"
        "\"v\",\"name\":\"X-A\"}}]}]",
        false);
    const sy__def_entry *e = filt(d, 0, 0);
    ck_assert_uint_eq(e->arg_count, 3);
    ck_assert_str_eq(e->args[0].key, "name");
    ck_assert_str_eq(e->args[1].key, "value");
    ck_assert_str_eq(e->args[2].key, "override");
    sy_document_free(d);
}
END_TEST

START_TEST(gather_list_collects_every_value_in_order) {
    sy_document *d =
        parse_ok("[{\"id\":\"a\",\"uri\":\"no://op\",\"predicates\":"
                 "[\"Method=GET,,POST, PUT\",{\"name\":\"Host\",\"args\":"
                 "{\"z\":\"a.org\",\"a\":\"b.org\"}}]}]",
                 false);
    const sy__def_entry *e = pred(d, 0, 0);
    ck_assert_uint_eq(e->arg_count, 3);
    for (size_t i = 0; i < 3; i++)
        ck_assert_str_eq(e->args[i].key, "methods");
    ck_assert_str_eq(e->args[2].value, "PUT");
    e = pred(d, 0, 1);
    ck_assert_uint_eq(e->arg_count, 2);
    ck_assert_str_eq(e->args[0].key, "patterns");
    ck_assert_str_eq(e->args[0].value, "a.org");
    ck_assert_str_eq(e->args[1].value, "b.org");
    sy_document_free(d);
}
END_TEST

START_TEST(tail_flag_takes_a_last_boolean_value) {
    sy_document *d = parse_ok(
        "[{\"id\":\"a\",\"uri\":\"no://op\",\"predicates\":"
        "[\"Path=/a,/b,FALSE\",\"Path=/a,/b\",\"Path=/true,/b,true\"]}]",
        false);
    const sy__def_entry *e = pred(d, 0, 0);
    ck_assert_uint_eq(e->arg_count, 3);
    ck_assert_str_eq(e->args[2].key, "matchTrailingSlash");
    ck_assert_str_eq(e->args[2].value, "FALSE");
    ck_assert_str_eq(
        sy__def_arg_or_default(pred(d, 0, 1), "matchTrailingSlash"), "true");
    ck_assert_ptr_null(sy__def_arg(pred(d, 0, 1), "matchTrailingSlash"));
    e = pred(d, 0, 2);
    ck_assert_str_eq(e->args[0].value, "/true");
    ck_assert_str_eq(sy__def_arg(e, "matchTrailingSlash"), "true");
    sy_document_free(d);
}
END_TEST

START_TEST(filter_without_equals_has_no_args) {
    sy_document *d = parse_ok("[{\"id\":\"a\",\"uri\":\"no://op\",\"filters\":"
                              "[\"PreserveHostHeader\",\"StripPrefix\"]}]",
                              false);
    ck_assert_uint_eq(filt(d, 0, 0)->arg_count, 0);
    ck_assert_str_eq(sy__def_arg_or_default(filt(d, 0, 1), "parts"), "1");
    sy_document_free(d);
}
END_TEST

/* found by fuzz_document: entries without args under UBSan */
START_TEST(entries_without_args_have_an_empty_arg_list) {
    sy_document *d = parse_ok("[{\"id\":\"a\",\"uri\":\"no://op\",\"filters\":"
                              "[{\"name\":\"PreserveHostHeader\"},{\"name\":"
                              "\"CircuitBreaker\",\"args\":{}}]}]",
                              false);
    ck_assert_uint_eq(filt(d, 0, 0)->arg_count, 0);
    ck_assert_uint_eq(filt(d, 0, 1)->arg_count, 0);
    ck_assert_ptr_nonnull(strstr(sy_route_canonical(route0(d)),
                                 "{\"name\":\"CircuitBreaker\",\"args\":{}}"));
    sy_document_free(d);
}
END_TEST

START_TEST(json_numbers_and_booleans_become_text) {
    sy_document *d = parse_ok(
        "[{\"id\":\"a\",\"uri\":\"no://op\",\"predicates\":[{\"name\":"
        "\"Weight\",\"args\":{\"weight.group\":\"g\",\"weight.weight\":8}}],"
        "\"filters\":[{\"name\":\"AddResponseHeader\",\"args\":{\"name\":"
        "\"X\",\"value\":2.5,\"override\":false}}]}]",
        false);
    ck_assert_str_eq(sy__def_arg(pred(d, 0, 0), "weight.weight"), "8");
    ck_assert_str_eq(sy__def_arg(filt(d, 0, 0), "value"), "2.5");
    ck_assert_str_eq(sy__def_arg(filt(d, 0, 0), "override"), "false");
    sy_document_free(d);
}
END_TEST

START_TEST(open_args_filters_keep_extra_keys_sorted) {
    sy_document *d =
        parse_ok("[{\"id\":\"a\",\"uri\":\"no://op\",\"filters\":[{\"name\":"
                 "\"RequestRateLimiter\",\"args\":{\"status-code\":\"429\","
                 "\"redis-rate-limiter.replenishRate\":\"2\"}}]}]",
                 false);
    const sy__def_entry *e = filt(d, 0, 0);
    ck_assert_uint_eq(e->arg_count, 2);
    ck_assert_str_eq(e->args[0].key, "redis-rate-limiter.replenishRate");
    ck_assert_str_eq(e->args[1].key, "status-code");
    sy_document_free(d);
}
END_TEST

START_TEST(shortcut_arg_errors_name_the_field_in_the_message) {
    sy_error e;
    parse_err("[{\"id\":\"a\",\"uri\":\"no://op\",\"predicates\":"
              "[\"After=soon\"]}]",
              NULL, &e);
    ck_assert_str_eq(e.path, "[0].predicates[0]");
    ck_assert_ptr_nonnull(strstr(e.message, "datetime"));
}
END_TEST

START_TEST(spel_is_rejected_only_when_the_whole_value_is_an_expression) {
    sy_document *d =
        parse_ok("[{\"id\":\"a\",\"uri\":\"no://op\",\"predicates\":"
                 "[\"Path=/{b}\"],\"filters\":"
                 "[\"SetPath=/a#{b}/c\"]}]",
                 false);
    sy_document_free(d);
    sy_error e;
    ck_assert_int_eq(parse_err("[{\"id\":\"a\",\"uri\":\"no://op\",\"filters\":"
                               "[\"SetPath= #{b} \"]}]",
                               NULL, &e),
                     SY_ESPEL);
}
END_TEST

/* ---- routes ---- */

static void check_upstream(const char *uri, sy_upstream_kind kind,
                           const char *scheme, const char *host, int port,
                           const char *path) {
    char json[256];
    snprintf(json, sizeof json, "[{\"id\":\"a\",\"uri\":\"%s\"}]", uri);
    sy_document *d = parse_ok(json, false);
    sy_upstream u;
    sy_route_upstream(route0(d), &u);
    ck_assert_int_eq(u.kind, kind);
    ck_assert_str_eq(u.scheme, scheme);
    ck_assert_str_eq(u.host, host);
    ck_assert_int_eq(u.port, port);
    ck_assert_str_eq(u.path, path);
    ck_assert_str_eq(sy_route_uri(route0(d)), uri);
    sy_document_free(d);
}

START_TEST(upstream_of_every_uri_scheme) {
    check_upstream("http://h", SY_UPSTREAM_URL, "http", "h", 80, "");
    check_upstream("https://h", SY_UPSTREAM_URL, "https", "h", 443, "");
    check_upstream("ws://h", SY_UPSTREAM_URL, "ws", "h", 80, "");
    check_upstream("wss://h", SY_UPSTREAM_URL, "wss", "h", 443, "");
    check_upstream("http://h:8080/x?y", SY_UPSTREAM_URL, "http", "h", 8080, "");
    check_upstream("https://[::1]:8443", SY_UPSTREAM_URL, "https", "::1", 8443,
                   "");
    check_upstream("lb://orders", SY_UPSTREAM_SERVICE, "lb", "orders", 0, "");
    check_upstream("lb:ws://chat", SY_UPSTREAM_SERVICE, "lb:ws", "chat", 0, "");
    check_upstream("forward:/local", SY_UPSTREAM_FORWARD, "forward", "", 0,
                   "/local");
    check_upstream("no://op", SY_UPSTREAM_NONE, "no", "", 0, "");
}
END_TEST

/* The Host header a URL route sends (r->authority), and whether it (or
 * the host) is the uri's own bytes: only when it ends the uri, spelled as
 * the library would spell it. */
static void check_authority(const char *uri, const char *authority,
                            bool shared) {
    char json[256];
    snprintf(json, sizeof json, "[{\"id\":\"a\",\"uri\":\"%s\"}]", uri);
    sy_document *d = parse_ok(json, false);
    const struct sy_route *r = route0(d);
    ck_assert_str_eq(r->authority, authority);
    bool inside =
        r->authority >= r->uri && r->authority < r->uri + strlen(r->uri);
    ck_assert_msg(inside == shared, "%s: authority shared %d", uri, inside);
    sy_document_free(d);
}

START_TEST(authority_and_host_share_the_uri_only_when_they_end_it) {
    check_authority("http://svc:8080", "svc:8080", true);
    check_authority("http://svc:8080/x", "svc:8080", false);
    check_authority("http://svc:08080", "svc:8080", false);
    check_authority("http://u:p@svc:81", "svc:81", true);
    check_authority("https://[::1]:8443", "[::1]:8443", true);
    check_authority("https://[::1]", "[::1]", false);
    check_authority("http://svc:80", "svc", false);
    check_authority("http://svc", "svc", true); /* the host, which ends it */
    check_authority("wss://svc:443/chat", "svc", false);
    /* a service name that ends the uri is its bytes too */
    sy_document *d =
        parse_ok("[{\"id\":\"a\",\"uri\":\"lb://orders\"},{\"id\":\"b\","
                 "\"uri\":\"lb://orders:9\"}]",
                 false);
    const sy_route *r = sy_document_route(d, 0);
    ck_assert_str_eq(r->up_host, "orders");
    ck_assert_ptr_eq(r->up_host, r->uri + 5);
    r = sy_document_route(d, 1);
    ck_assert_str_eq(r->up_host, "orders");
    ck_assert(r->up_host < r->uri || r->up_host >= r->uri + strlen(r->uri));
    sy_document_free(d);
}
END_TEST

/* A simple route (id, uri, shortcut predicates) is one block: the arena
 * estimate covers it, the strings at the top of its chunk and
 * the objects below meet with less than 8 bytes to spare (the estimate
 * is exact but for its rounding), so 100,000 of them waste nothing. */
START_TEST(simple_routes_fill_their_block_exactly) {
    static const char *const uris[] = {
        "http://backend:80", "lb://svc",          "http://svc",
        "http://svc:8080",   "http://svc:8080/x", "https://svc:443/chat",
        "no://op",           "lb:ws://chat",      "http://svc/x/y"};
    static const char *const preds[] = {
        "Path=/user12345/ljj", "Path=/user1/{name}", "Path=/p1/**",
        "Path=/a/{x:[0-9]+}",  "Path=/f*.txt",       "Host=**.example.org",
        "Path=/a,/b/{c}",      "Method=GET",         "Host={sub}.a.org"};
    for (size_t u = 0; u < SY_ARRAY_LEN(uris); u++)
        for (size_t k = 0; k < SY_ARRAY_LEN(preds); k++) {
            char json[256];
            snprintf(json, sizeof json,
                     "[{\"id\":\"s%zu\",\"uri\":\"%s\",\"predicates\":"
                     "[\"%s\",\"Path=/x\"]}]",
                     u * 100 + k, uris[u], preds[k]);
            sy_document *d = parse_ok(json, false);
            const struct sy_route *r = route0(d);
            /* one chunk, the one in the route's block (its header is
             * cpred and fingerprint once built: route.h) */
            const sy__arena_chunk *c =
                sy__route_first_chunk((struct sy_route *)(uintptr_t)r);
            ck_assert(r->arena_embedded);
            ck_assert_msg(r->arena.head == c, "%s: %s chunk", uris[u],
                          preds[k]);
            /* the compiled objects at its bottom, the strings at its top
             * (the id, taken first, ends the block), after the objects */
            const char *data = (const char *)c->data;
            const char *objs = (const char *)r->cpred;
            const char *end = r->id + strlen(r->id) + 1;
            ck_assert_msg(objs >= data && objs < end, "%s %s: cpred", uris[u],
                          preds[k]);
            const char *low = objs + r->predicate_count * SY_PRED_OBJECT_BYTES;
            ck_assert(r->uri >= low && r->uri < end);
            ck_assert(r->id >= low && end - data < 512);
            sy_document_free(d);
        }
}
END_TEST

/* A cold candidate reads the route's fields and one cluster: the
 * compiled predicates lie at the top of the chunk in the route's block,
 * next to the texts a test reads (a literal's text, kept in the slot; a
 * Header's name, the entry's own argument), above the entries, `more` and
 * filter entries the build put at the bottom (docs/performance.md). */
START_TEST(predicate_objects_lie_next_to_their_texts) {
    sy_document *d = parse_ok(
        "[{\"id\":\"m0\",\"uri\":\"lb://svc0\",\"predicates\":"
        "[\"Host=svc0.example.com\",\"Path=/api/r0/**\",\"Method=GET\","
        "\"Header=X-Tenant, t\\\\d+\"],\"filters\":[\"StripPrefix=2\"]}]",
        false);
    const struct sy_route *r = route0(d);
    ck_assert(r->arena_embedded);
    const char *objs = (const char *)r->cpred;
    const char *end = objs + r->predicate_count * SY_PRED_OBJECT_BYTES;
    /* above what the build took from the bottom */
    ck_assert(objs > (const char *)r->predicates);
    ck_assert(objs > (const char *)r->more);
    const sy__pred *host = sy__route_cpred(r, 0), *path = sy__route_cpred(r, 1);
    const sy__pred *hdr = sy__route_cpred(r, 3);
    ck_assert(host->lit && path->lit && path->lit_rest);
    /* the text a literal test reads, without the pattern */
    ck_assert_ptr_eq(host->lit_src, sy__pattern_source(host->one));
    ck_assert_ptr_eq(path->lit_src, sy__pattern_source(path->one));
    ck_assert_uint_eq(sy__pred_max_groups(host), 1);
    ck_assert_uint_eq(sy__pred_var_count(path), 0);
    ck_assert_str_eq(host->lit_src, "svc0.example.com");
    /* the texts and the name right above the objects */
    const char *texts[] = {host->lit_src, path->lit_src, hdr->name};
    for (size_t i = 0; i < SY_ARRAY_LEN(texts); i++)
        ck_assert_msg(texts[i] >= end && texts[i] - end < 64, "text %zu", i);
    ck_assert_str_eq(hdr->name, "X-Tenant");
    ck_assert_ptr_eq(hdr->name, sy__def_arg(&r->predicates[3], "header"));
    sy_document_free(d);
}
END_TEST

/* A route's predicate and filter counts are 16-bit: 65,535 are kept whole,
 * one more is an error naming the list (the scan of a document caps a
 * route at 65,536 JSON values first; a tree given directly meets this). */
static cJSON *route_with(size_t npreds, size_t nfilters) {
    cJSON *o = cJSON_CreateObject(), *p = cJSON_CreateArray(),
          *f = cJSON_CreateArray();
    ck_assert_ptr_nonnull(o);
    cJSON_AddStringToObject(o, "id", "big");
    cJSON_AddStringToObject(o, "uri", "http://x");
    for (size_t i = 0; i < npreds; i++)
        cJSON_AddItemToArray(p, cJSON_CreateString("Method=GET"));
    for (size_t i = 0; i < nfilters; i++)
        cJSON_AddItemToArray(f, cJSON_CreateString("PreserveHostHeader"));
    cJSON_AddItemToObject(o, "predicates", p);
    cJSON_AddItemToObject(o, "filters", f);
    return o;
}

START_TEST(entry_counts_past_16_bits_are_an_error) {
    sy__alloc a;
    sy__alloc_default(&a);
    sy__def_ctx ctx = {&a, NULL, NULL, NULL, NULL, NULL, 0, NULL, NULL};
    struct sy_route *r = NULL;
    sy_error e;
    cJSON *o = route_with(65536, 1);
    ck_assert_int_eq(sy__def_build_route(&ctx, o, "routes[0]", &r, &e),
                     SY_ELIMIT);
    ck_assert_str_eq(e.path, "routes[0].predicates");
    ck_assert_ptr_nonnull(strstr(e.message, "more than 65535 predicates"));
    cJSON_Delete(o);
    o = route_with(1, 65536);
    ck_assert_int_eq(sy__def_build_route(&ctx, o, "routes[0]", &r, &e),
                     SY_ELIMIT);
    ck_assert_str_eq(e.path, "routes[0].filters");
    cJSON_Delete(o);
    o = route_with(65535, 65535);
    ck_assert_int_eq(sy__def_build_route(&ctx, o, "routes[0]", &r, &e), 0);
    ck_assert_uint_eq(sy_route_predicate_count(r), 65535);
    ck_assert_uint_eq(r->more->filter_count, 65535);
    sy__route_unref(r);
    cJSON_Delete(o);
}
END_TEST

START_TEST(schemes_are_read_in_any_case) {
    check_upstream("HTTP://h", SY_UPSTREAM_URL, "http", "h", 80, "");
    check_upstream("HttpS://h", SY_UPSTREAM_URL, "https", "h", 443, "");
    check_upstream("LB://svc", SY_UPSTREAM_SERVICE, "lb", "svc", 0, "");
    check_upstream("lb:wss://chat", SY_UPSTREAM_SERVICE, "lb:wss", "chat", 0,
                   "");
    check_upstream("Forward:/x", SY_UPSTREAM_FORWARD, "forward", "", 0, "/x");
    check_upstream("NO://op", SY_UPSTREAM_NONE, "no", "", 0, "");
    sy_error e;
    ck_assert_int_eq(
        parse_err("[{\"id\":\"a\",\"uri\":\"httpx://h\"}]", NULL, &e), SY_EURI);
    ck_assert_int_eq(
        parse_err("[{\"id\":\"a\",\"uri\":\"htt://h\"}]", NULL, &e), SY_EURI);
    ck_assert_int_eq(parse_err("[{\"id\":\"a\",\"uri\":\"l://h\"}]", NULL, &e),
                     SY_EURI);
}
END_TEST

START_TEST(metadata_is_sorted_and_non_strings_are_json_text) {
    sy_document *d = parse_ok(
        "[{\"id\":\"a\",\"uri\":\"no://op\",\"metadata\":{\"z\":\"s\","
        "\"n\":1,\"b\":true,\"o\":{\"k\": [1, \"x\"]},\"z\":\"last\"}}]",
        false);
    const sy_route *r = route0(d);
    ck_assert_uint_eq(sy_route_metadata_count(r), 4);
    ck_assert_str_eq(sy_route_metadata_at(r, 0).key, "b");
    ck_assert_str_eq(sy_route_metadata_at(r, 0).value, "true");
    ck_assert_str_eq(sy_route_metadata(r, "n"), "1");
    ck_assert_str_eq(sy_route_metadata(r, "o"), "{\"k\":[1,\"x\"]}");
    ck_assert_str_eq(sy_route_metadata(r, "z"), "last");
    ck_assert_ptr_null(sy_route_metadata(r, "missing"));
    ck_assert_ptr_null(sy_route_metadata_at(r, 4).key);
    ck_assert(!sy_route_disabled(r));
    sy_document_free(d);
}
END_TEST

START_TEST(metadata_status_disabled_disables_the_route) {
    sy_document *d = parse_ok("[{\"id\":\"a\",\"uri\":\"no://op\",\"metadata\":"
                              "{\"status\":\"disabled\"}}]",
                              false);
    ck_assert(sy_route_disabled(route0(d)));
    sy_document_free(d);
}
END_TEST

/* SCG 4.2's RouteDefinition.enabled: false disables the route, as
 * metadata.status "disabled" does (and is that in the route's metadata, so
 * the two spellings are one route to a diff); not a boolean, or saying the
 * opposite of an explicit status, is refused at the key. */
START_TEST(enabled_false_disables_the_route) {
    sy_document *d =
        parse_ok("[{\"id\":\"a\",\"uri\":\"no://op\",\"enabled\":false,"
                 "\"metadata\":{\"x\":\"1\",\"z\":\"2\"}},"
                 "{\"id\":\"b\",\"uri\":\"no://op\",\"enabled\":true},"
                 "{\"id\":\"c\",\"uri\":\"no://op\",\"enabled\":false,"
                 "\"metadata\":{\"status\":\"disabled\"}},"
                 "{\"id\":\"e\",\"uri\":\"no://op\",\"enabled\":null}]",
                 false);
    const sy_route *a = sy_document_route(d, 0);
    ck_assert(sy_route_disabled(a));
    ck_assert_str_eq(sy_route_metadata_at(a, 0).key, "status");
    ck_assert_str_eq(sy_route_metadata_at(a, 0).value, "disabled");
    ck_assert_str_eq(sy_route_metadata_at(a, 1).key, "x");
    ck_assert_str_eq(sy_route_metadata_at(a, 2).key, "z");
    ck_assert(!sy_route_disabled(sy_document_route(d, 1)));
    ck_assert(sy_route_disabled(sy_document_route(d, 2)));
    ck_assert(!sy_route_disabled(sy_document_route(d, 3)));
    sy_document_free(d);
    sy_error e;
    ck_assert_int_eq(parse_err("[{\"id\":\"a\",\"uri\":\"no://op\","
                               "\"enabled\":\"false\"}]",
                               NULL, &e),
                     SY_ETYPE);
    ck_assert_str_eq(e.path, "[0].enabled");
    ck_assert_int_eq(parse_err("[{\"id\":\"a\",\"uri\":\"no://op\","
                               "\"enabled\":false,\"metadata\":"
                               "{\"status\":\"enabled\"}}]",
                               NULL, &e),
                     SY_EARG);
    ck_assert_str_eq(e.path, "[0].enabled");
    ck_assert_int_eq(parse_err("[{\"id\":\"a\",\"uri\":\"no://op\","
                               "\"enabled\":true,\"metadata\":"
                               "{\"status\":\"disabled\"}}]",
                               NULL, &e),
                     SY_EARG);
    ck_assert_ptr_nonnull(strstr(e.message, "metadata.status"));
}
END_TEST

START_TEST(order_defaults_to_zero_and_accepts_int32) {
    sy_document *d =
        parse_ok("[{\"id\":\"a\",\"uri\":\"no://op\"},{\"id\":\"b\",\"uri\":"
                 "\"no://op\",\"order\":-2147483648}]",
                 false);
    ck_assert_int_eq(sy_route_order(sy_document_route(d, 0)), 0);
    ck_assert_int_eq(sy_route_order(sy_document_route(d, 1)), INT32_MIN);
    sy_document_free(d);
    sy_error e;
    ck_assert_int_eq(parse_err("[{\"id\":\"b\",\"uri\":\"no://op\",\"order\":"
                               "-2147483649}]",
                               NULL, &e),
                     SY_ERANGE);
}
END_TEST

START_TEST(route_accessors_report_predicates) {
    sy_document *d = parse_ok("[{\"id\":\"a\",\"uri\":\"no://op\","
                              "\"predicates\":[\"Path=/a\",\"Method=GET\"]}]",
                              false);
    const sy_route *r = route0(d);
    ck_assert_str_eq(sy_route_id(r), "a");
    ck_assert_uint_eq(sy_route_predicate_count(r), 2);
    ck_assert_str_eq(sy_route_predicate_name(r, 1), "Method");
    ck_assert_ptr_null(sy_route_predicate_name(r, 2));
    sy_document_free(d);
}
END_TEST

START_TEST(routes_outlive_their_document) {
    sy_document *d = parse_ok("[{\"id\":\"a\",\"uri\":\"lb://svc\"}]", false);
    struct sy_route *r = sy__route_ref(route0(d));
    sy_document_free(d);
    ck_assert_str_eq(sy_route_id(r), "a");
    sy_upstream u;
    sy_route_upstream(r, &u);
    ck_assert_str_eq(u.host, "svc");
    sy__route_unref(r);
}
END_TEST

START_TEST(checksum_follows_bytes_and_fingerprint_follows_meaning) {
    sy_document *a = parse_ok("[{\"id\":\"a\",\"uri\":\"http://x\"}]", false);
    sy_document *b =
        parse_ok("[ {\"uri\":\"http://x:80\", \"id\":\"a\"} ]", false);
    sy_document *c = parse_ok("[{\"id\":\"a\",\"uri\":\"http://y\"}]", false);
    ck_assert_uint_ne(sy_document_checksum(a), sy_document_checksum(b));
    ck_assert_uint_eq(sy_document_fingerprint(a), sy_document_fingerprint(b));
    ck_assert_uint_ne(sy_document_fingerprint(a), sy_document_fingerprint(c));
    sy_document_free(a);
    sy_document_free(b);
    sy_document_free(c);
}
END_TEST

/* ---- internal entry points ---- */

START_TEST(parse_route_prefixes_error_paths) {
    const char *ok = "{\"id\":\"a\",\"uri\":\"http://x\",\"predicates\":"
                     "[\"Path=/a\"]}";
    struct sy_route *r = NULL;
    ck_assert_int_eq(
        sy__def_parse_route(ok, strlen(ok), NULL, "route", &r, NULL), 0);
    ck_assert_str_eq(r->id, "a");
    sy__route_unref(r);
    const char *bad = "{\"id\":\"a\",\"uri\":\"http://x\",\"predicates\":"
                      "[\"Path=/a\", {\"name\":\"Method\"}]}";
    sy_error e;
    ck_assert_int_eq(
        sy__def_parse_route(bad, strlen(bad), NULL, "route", &r, &e),
        SY_EMISSING);
    ck_assert_str_eq(e.path, "route.predicates[1].args.methods");
    ck_assert_ptr_null(r);
}
END_TEST

START_TEST(route_with_enabled_toggles_status_and_fingerprint) {
    const char *js = "{\"id\":\"a\",\"uri\":\"http://x\",\"metadata\":"
                     "{\"a\":\"1\",\"z\":\"2\"}}";
    struct sy_route *r = NULL, *off = NULL, *on = NULL;
    ck_assert_int_eq(sy__def_parse_route(js, strlen(js), NULL, "", &r, NULL),
                     0);
    ck_assert_int_eq(sy__def_route_with_enabled(r, false, NULL, &off, NULL), 0);
    ck_assert(sy_route_disabled(off));
    ck_assert_str_eq(sy_route_metadata(off, "status"), "disabled");
    ck_assert_str_eq(sy_route_metadata_at(off, 1).key, "status");
    ck_assert_uint_ne(sy_route_fingerprint(off), sy_route_fingerprint(r));
    ck_assert_uint_eq(sy__diff_route_changes(off, r), SY_CHANGED_METADATA);
    ck_assert_int_eq(sy__def_route_with_enabled(off, true, NULL, &on, NULL), 0);
    ck_assert(!sy_route_disabled(on));
    ck_assert_ptr_null(sy_route_metadata(on, "status"));
    ck_assert_uint_eq(sy_route_fingerprint(on), sy_route_fingerprint(r));
    ck_assert_str_eq(sy_route_canonical(on), sy_route_canonical(r));
    sy__route_unref(r);
    sy__route_unref(off);
    sy__route_unref(on);
}
END_TEST

START_TEST(default_filters_parse_with_their_own_path) {
    const char *js = "[\"AddRequestHeader=X-A, 1\", {\"name\":\"StripPrefix\","
                     "\"args\":{\"parts\":\"x\"}}]";
    struct sy_route *r = NULL;
    sy_error e;
    ck_assert_int_eq(sy__def_parse_filters(js, strlen(js), NULL, &r, &e),
                     SY_EARG);
    ck_assert_str_eq(e.path, "defaultFilters[1].args.parts");
    js = "[\"AddRequestHeader=X-A, 1\", \"PreserveHostHeader\"]";
    ck_assert_int_eq(sy__def_parse_filters(js, strlen(js), NULL, &r, &e), 0);
    ck_assert_uint_eq(r->more->filter_count, 2);
    ck_assert_uint_eq(r->predicate_count, 0);
    sy__route_unref(r);
    ck_assert_int_eq(sy__def_parse_filters("{}", 2, NULL, &r, &e), SY_ETYPE);
    ck_assert_str_eq(e.path, "defaultFilters");
}
END_TEST

START_TEST(limits_resolve_fills_defaults) {
    sy_limits in = {0, 5, 0, 0}, out;
    sy__limits_resolve(&out, &in);
    ck_assert_uint_eq(out.max_document_bytes, (size_t)64 << 20);
    ck_assert_uint_eq(out.max_routes, 5);
    ck_assert_uint_eq(out.max_string_bytes, (size_t)64 << 10);
    ck_assert_uint_eq(out.max_depth, 32);
}
END_TEST

/* ---- registry ---- */

static int host_compile(void *data, const sy_kv *args, size_t n, void **state,
                        sy_error *err) {
    SY_UNUSED(data);
    SY_UNUSED(args);
    SY_UNUSED(n);
    SY_UNUSED(err);
    *state = NULL;
    return 0;
}

static bool host_test(void *state, const sy_request *req) {
    SY_UNUSED(state);
    SY_UNUSED(req);
    return true;
}

START_TEST(registry_rejects_clashing_names) {
    sy_registry *reg = NULL;
    ck_assert_int_eq(sy_registry_new(NULL, &reg, NULL), 0);
    sy_predicate_factory pf = {
        NULL, SY_SHORTCUT_DEFAULT, host_compile, host_test, NULL, NULL};
    sy_filter_factory ff = {NULL, SY_SHORTCUT_DEFAULT, NULL, NULL};
    sy_error e;
    ck_assert_int_eq(sy_registry_add_predicate(reg, "Path", &pf, &e),
                     SY_EEXIST);
    ck_assert_int_eq(sy_registry_add_predicate(reg, "Tenant", &pf, &e), 0);
    ck_assert_int_eq(sy_registry_add_predicate(reg, "Tenant", &pf, &e),
                     SY_EEXIST);
    ck_assert_int_eq(sy_registry_add_filter(reg, "StripPrefix", &ff, &e),
                     SY_EEXIST);
    ck_assert_int_eq(sy_registry_add_filter(reg, "Tenant", &ff, &e), 0);
    ck_assert_int_eq(sy_registry_add_filter(reg, "", &ff, &e), SY_EINVAL);
    ck_assert_ptr_nonnull(sy__registry_find_predicate(reg, "Tenant", 6));
    ck_assert_ptr_null(sy__registry_find_predicate(reg, "Tenan", 5));
    sy_registry_free(reg);
}
END_TEST

START_TEST(host_factories_map_shortcuts_and_accept_any_keys) {
    sy_registry *reg = NULL;
    ck_assert_int_eq(sy_registry_new(NULL, &reg, NULL), 0);
    static const char *const fields[] = {"tenant", "region", NULL};
    const char *dyn[] = {"tenant", "region", NULL};
    sy_predicate_factory pf = {
        dyn, SY_SHORTCUT_DEFAULT, host_compile, host_test, NULL, NULL};
    ck_assert_int_eq(sy_registry_add_predicate(reg, "Tenant", &pf, NULL), 0);
    dyn[0] = "changed"; /* the registry keeps its own copy */
    sy_filter_factory ff = {fields, SY_SHORTCUT_GATHER_LIST, NULL, NULL};
    ck_assert_int_eq(sy_registry_add_filter(reg, "Audit", &ff, NULL), 0);
    const char *js = "[{\"id\":\"a\",\"uri\":\"no://op\",\"predicates\":"
                     "[\"Tenant=acme,eu,extra\",{\"name\":\"Tenant\",\"args\":"
                     "{\"zz\":\"1\",\"tenant\":\"t\"}}],\"filters\":"
                     "[\"Audit=a,b\"]}]";
    sy_parse_options o = SY_PARSE_OPTIONS_INIT;
    o.registry = reg;
    sy_document *d = NULL;
    sy_error e;
    ck_assert_int_eq(sy_document_parse(js, strlen(js), &o, &d, &e), 0);
    const sy__def_entry *p = pred(d, 0, 0);
    ck_assert_ptr_null(sy__def_spec(p));
    ck_assert_ptr_nonnull(sy__def_host(p));
    ck_assert_str_eq(sy__def_arg(p, "tenant"), "acme");
    ck_assert_str_eq(sy__def_arg(p, "region"), "eu");
    ck_assert_str_eq(sy__def_arg(p, "_genkey_2"), "extra");
    ck_assert_str_eq(sy__def_arg(pred(d, 0, 1), "zz"), "1");
    const sy__def_entry *f = filt(d, 0, 0);
    ck_assert_uint_eq(f->arg_count, 2);
    ck_assert_str_eq(f->args[1].key, "tenant");
    ck_assert_str_eq(f->args[1].value, "b");
    sy_document_free(d);
    /* without the registry the names are unknown */
    ck_assert_int_eq(sy_document_parse(js, strlen(js), NULL, &d, &e),
                     SY_EUNKNOWN);
    sy_registry_free(reg);
}
END_TEST

/* ---- allocation ---- */

typedef sy_test_alloc counting;

START_TEST(every_allocation_goes_through_the_hooks_and_is_freed) {
    counting c = {0};
    sy_allocator al = sy_test_allocator(&c);
    sy_parse_options o = SY_PARSE_OPTIONS_INIT;
    o.allocator = &al;
    o.lenient = true;
    size_t len;
    char *json = sy_test_read("valid/filters-shortcut.json", &len);
    sy_document *d = NULL;
    ck_assert_int_eq(sy_document_parse(json, len, &o, &d, NULL), 0);
    ck_assert_int_gt(c.total, 0);
    sy_document_free(d);
    ck_assert_int_eq(c.live, 0);
    ck_assert_int_eq(sy_document_parse(mixed, strlen(mixed), &o, &d, NULL), 0);
    sy_document_free(d);
    ck_assert_int_eq(c.live, 0);
    free(json);
}
END_TEST

/* The built-in lookup (factory.c's hashed table): every name of each kind
 * finds its own spec, by length (the name may run on, as in a shortcut),
 * and nothing else finds one: the other kind, a case change, a prefix or a
 * longer name, an empty name, an embedded NUL. */
START_TEST(factory_lookup_finds_exactly_the_builtins) {
    static const char *const preds[] = {"After",
                                        "Before",
                                        "Between",
                                        "Cookie",
                                        "Header",
                                        "Host",
                                        "Method",
                                        "Path",
                                        "Query",
                                        "RemoteAddr",
                                        "XForwardedRemoteAddr",
                                        "Weight"};
    static const char *const filters[] = {"AddRequestHeader",
                                          "AddRequestHeadersIfNotPresent",
                                          "AddRequestParameter",
                                          "AddResponseHeader",
                                          "DedupeResponseHeader",
                                          "MapRequestHeader",
                                          "PrefixPath",
                                          "PreserveHostHeader",
                                          "RedirectTo",
                                          "RemoveRequestHeader",
                                          "RemoveResponseHeader",
                                          "RemoveRequestParameter",
                                          "RequestHeaderSize",
                                          "RequestSize",
                                          "RewritePath",
                                          "RewriteLocationResponseHeader",
                                          "RewriteResponseHeader",
                                          "SetPath",
                                          "SetRequestHeader",
                                          "SetResponseHeader",
                                          "SetRequestHostHeader",
                                          "SetStatus",
                                          "StripPrefix",
                                          "RewriteRequestParameter",
                                          "Retry",
                                          "RequestRateLimiter",
                                          "CircuitBreaker"};
    const char *const *lists[2] = {preds, filters};
    size_t counts[2] = {SY_ARRAY_LEN(preds), SY_ARRAY_LEN(filters)};
    for (int k = 0; k < 2; k++) {
        sy__factory_kind kind = k ? SY_FACTORY_FILTER : SY_FACTORY_PREDICATE;
        sy__factory_kind other = k ? SY_FACTORY_PREDICATE : SY_FACTORY_FILTER;
        for (size_t i = 0; i < counts[k]; i++) {
            const char *n = lists[k][i];
            size_t len = strlen(n);
            const sy__factory_spec *s = sy__factory_find(kind, n, len);
            ck_assert_msg(s != NULL, "%s not found", n);
            ck_assert_str_eq(s->name, n);
            ck_assert_int_eq(s->kind, kind);
            ck_assert_ptr_null(sy__factory_find(other, n, len));
            /* the canonical form's texts made from the names */
            char want[128];
            snprintf(want, sizeof want, "{\"name\":\"%s\",\"args\":{", n);
            ck_assert_str_eq(s->canon_head, want);
            ck_assert_uint_eq(s->canon_head_len, strlen(want));
            for (size_t f = 0; f < s->field_count; f++) {
                snprintf(want, sizeof want, "\"%s\":", s->fields[f].name);
                ck_assert_str_eq(s->fields[f].json_key, want);
                ck_assert_uint_eq(s->fields[f].json_key_len, strlen(want));
            }
            char buf[64];
            snprintf(buf, sizeof buf, "%s=a,b", n);
            ck_assert_ptr_eq(sy__factory_find(kind, buf, len), s);
            ck_assert_ptr_null(sy__factory_find(kind, buf, len + 1));
            ck_assert_ptr_null(sy__factory_find(kind, n, len - 1));
            snprintf(buf, sizeof buf, "%s", n);
            buf[0] = (char)(buf[0] + 32); /* lower case */
            ck_assert_ptr_null(sy__factory_find(kind, buf, len));
            memcpy(buf, n, len);
            buf[len / 2] = '\0';
            ck_assert_ptr_null(sy__factory_find(kind, buf, len));
        }
    }
    ck_assert_ptr_null(sy__factory_find(SY_FACTORY_PREDICATE, "", 0));
    ck_assert_ptr_null(sy__factory_find(SY_FACTORY_FILTER, "X", 1));
}
END_TEST

/* The entry memo of a document's parse (def_memo.c), the common reading
 * of built-in shortcuts (def_shortcut.c) and the canonical uri: every
 * route of a document whose entries repeat from route to route (built
 * again from the memo from their second sight on) equals the same route
 * parsed alone (no repeat: read the general or the common way), in its
 * canonical text, fingerprint and entries. */
START_TEST(repeated_entries_build_as_when_seen_once) {
    static const char *const preds[] = {
        "Path=/a/{id},/b/**,false",
        "Method=get,POST",
        "Header=X-Api-Key",
        "Path=/shared/**",
        "Header=X-Tenant, t\\\\d+",
        "Query=foo, ba.",
        "Host=API.Example.COM,*.b.org",
        "Cookie=sess, [a-z]+",
        "Path=/c,TRUE",
        "After=2017-01-20T17:42:47.789-07:00[America/Denver]",
        "RemoteAddr=192.168.1.1/24, 10.0.0.0/8",
        "XForwardedRemoteAddr=10.0.0.0/8",
        "Method= GET ,, HEAD ",
        "Host=Upper.Case.Host.Example.Org"};
    static const char *const filters[] = {
        "StripPrefix=2",
        "AddRequestHeader=X-A, b",
        "RemoveRequestHeader=X-Api-Key",
        "PrefixPath=/p",
        "SetStatus=404",
        "RewritePath=/r/(?<s>.*), /${s}",
        "PreserveHostHeader",
        "DedupeResponseHeader=Access-Control-Allow-Origin, RETAIN_FIRST"};
    static const char *const uris[] = {
        "http://API.Example.COM:8080", "lb://My-Service",
        "https://Upper.Case.Host.Name.Example/x", "forward:/x",
        "http://lower.example.com"};
    static const char *const canon_uris[] = {
        "\"uri\":\"http://api.example.com:8080\"",
        "\"uri\":\"lb://My-Service\"",
        "\"uri\":\"https://upper.case.host.name.example:443\"",
        "\"uri\":\"forward:/x\"", "\"uri\":\"http://lower.example.com:80\""};
    enum { N = 40 };
    size_t np = SY_ARRAY_LEN(preds), nf = SY_ARRAY_LEN(filters);
    char one[N][1024];
    size_t cap = N * 1024 + 64, len = 0;
    char *doc = malloc(cap);
    ck_assert_ptr_nonnull(doc);
    len += (size_t)snprintf(doc + len, cap - len, "[");
    for (size_t i = 0; i < N; i++) {
        /* the same texts in other places and company */
        size_t a = i % np, b = (i * 5 + 3) % np, f = (i * 3) % nf;
        int k = snprintf(one[i], sizeof one[i],
                         "{\"id\":\"r%zu\",\"uri\":\"%s\",\"predicates\":"
                         "[\"%s\",\"%s\"],\"filters\":[\"%s\",\"%s\"]}",
                         i, uris[i % SY_ARRAY_LEN(uris)], preds[a], preds[b],
                         filters[f], filters[(f + 1) % nf]);
        ck_assert(k > 0 && (size_t)k < sizeof one[i]);
        len += (size_t)snprintf(doc + len, cap - len, "%s%s", i ? "," : "",
                                one[i]);
    }
    len += (size_t)snprintf(doc + len, cap - len, "]");
    sy_document *d = parse_ok(doc, false);
    ck_assert_uint_eq(sy_document_route_count(d), N);
    for (size_t i = 0; i < N; i++) {
        char alone[1040];
        snprintf(alone, sizeof alone, "[%s]", one[i]);
        sy_document *d1 = parse_ok(alone, false);
        const sy_route *r = sy_document_route(d, i), *r1 = route0(d1);
        ck_assert_str_eq(sy_route_canonical(r), sy_route_canonical(r1));
        /* a URL's host in lower case (a word at a time past 8 bytes) */
        ck_assert_msg(
            strstr(sy_route_canonical(r), canon_uris[i % SY_ARRAY_LEN(uris)]),
            "%s", sy_route_canonical(r));
        ck_assert_uint_eq(sy_route_fingerprint(r), sy_route_fingerprint(r1));
        ck_assert_uint_eq(sy_route_predicate_count(r),
                          sy_route_predicate_count(r1));
        ck_assert_uint_eq(sy__def_route_changes(r, r1), 0);
        sy_document_free(d1);
    }
    sy_document_free(d);
    free(doc);
}
END_TEST

int main(void) {
    Suite *s = suite_create("def");
    TCase *tc = tcase_create("def");
    tcase_add_test(tc, corpus_valid_documents_parse_strictly);
    tcase_add_test(tc, a_route_error_waits_for_the_scan_and_the_envelope);
    tcase_add_test(tc, factory_lookup_finds_exactly_the_builtins);
    tcase_add_test(tc,
                   corpus_invalid_documents_fail_with_expected_code_and_path);
    tcase_add_test(tc, corpus_invalid_routes_become_issues_in_lenient_mode);
    tcase_add_test(tc, template_variables_must_be_captured);
    tcase_add_test(tc, envelope_version_may_be_string_or_integer);
    tcase_add_test(tc,
                   envelope_version_too_large_for_an_integer_is_a_type_error);
    tcase_add_test(tc, bare_array_has_no_version_and_paths_start_with_index);
    tcase_add_test(tc, lenient_keeps_valid_routes_and_lists_each_issue);
    tcase_add_test(tc, strict_fails_on_the_first_invalid_route);
    tcase_add_test(tc, lenient_document_without_valid_routes_still_parses);
    tcase_add_test(tc, lenient_mode_still_fails_on_syntax_errors);
    tcase_add_test(tc, syntax_error_reports_line_column_and_offset);
    tcase_add_test(tc, trailing_data_after_the_document_is_a_syntax_error);
    tcase_add_test(tc, input_need_not_be_nul_terminated);
    tcase_add_test(tc, bad_arguments_are_einval);
    tcase_add_test(tc, limit_on_document_bytes);
    tcase_add_test(tc, selection_settings_are_checked_with_their_path);
    tcase_add_test(tc, lenient_parse_lists_every_error_of_a_route);
    tcase_add_test(tc, lenient_issue_paths_count_the_route_index_up);
    tcase_add_test(tc, lenient_errors_of_a_route_are_listed_once);
    tcase_add_test(tc, limit_on_route_count);
    tcase_add_test(tc, document_default_filters_are_refused);
    tcase_add_test(tc, limit_on_string_length_names_the_path);
    tcase_add_test(tc, limit_on_nesting_depth);
    tcase_add_test(tc, default_depth_limit_is_32);
    tcase_add_test(tc, shortcut_default_maps_genkeys_to_field_order);
    tcase_add_test(tc, object_args_are_put_in_field_order);
    tcase_add_test(tc, gather_list_collects_every_value_in_order);
    tcase_add_test(tc, tail_flag_takes_a_last_boolean_value);
    tcase_add_test(tc, filter_without_equals_has_no_args);
    tcase_add_test(tc, entries_without_args_have_an_empty_arg_list);
    tcase_add_test(tc, json_numbers_and_booleans_become_text);
    tcase_add_test(tc, open_args_filters_keep_extra_keys_sorted);
    tcase_add_test(tc, shortcut_arg_errors_name_the_field_in_the_message);
    tcase_add_test(tc,
                   spel_is_rejected_only_when_the_whole_value_is_an_expression);
    tcase_add_test(tc, upstream_of_every_uri_scheme);
    tcase_add_test(tc, metadata_is_sorted_and_non_strings_are_json_text);
    tcase_add_test(tc, metadata_status_disabled_disables_the_route);
    tcase_add_test(tc, enabled_false_disables_the_route);
    tcase_add_test(tc, order_defaults_to_zero_and_accepts_int32);
    tcase_add_test(tc, route_accessors_report_predicates);
    tcase_add_test(tc, routes_outlive_their_document);
    tcase_add_test(tc, checksum_follows_bytes_and_fingerprint_follows_meaning);
    tcase_add_test(tc, parse_route_prefixes_error_paths);
    tcase_add_test(tc, route_with_enabled_toggles_status_and_fingerprint);
    tcase_add_test(tc, default_filters_parse_with_their_own_path);
    tcase_add_test(tc, limits_resolve_fills_defaults);
    tcase_add_test(tc, registry_rejects_clashing_names);
    tcase_add_test(tc, host_factories_map_shortcuts_and_accept_any_keys);
    tcase_add_test(tc, every_allocation_goes_through_the_hooks_and_is_freed);
    tcase_add_test(tc, authority_and_host_share_the_uri_only_when_they_end_it);
    tcase_add_test(tc, simple_routes_fill_their_block_exactly);
    tcase_add_test(tc, predicate_objects_lie_next_to_their_texts);
    tcase_add_test(tc, entry_counts_past_16_bits_are_an_error);
    tcase_add_test(tc, schemes_are_read_in_any_case);
    tcase_add_test(tc, timeouts_are_read_as_spring_reads_them);
    tcase_add_test(tc, repeated_entries_build_as_when_seen_once);
    suite_add_tcase(s, tc);
    return sy_test_run(s);
}
