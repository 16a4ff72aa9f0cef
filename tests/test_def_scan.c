/* test_def_scan.c - hostile documents: NUL bytes
 * anywhere in a string are rejected with their path and offset instead of
 * truncating the string; the size of a route, the number of routes and the
 * syntax are checked by the pre-scan before any tree is built. */
#include "def/def_build.h"
#include "def/def_scan.h"
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>

static int parse(const char *json, size_t len, bool lenient, sy_error *e) {
    sy_parse_options o = SY_PARSE_OPTIONS_INIT;
    o.lenient = lenient;
    sy_document *d = NULL;
    sy__error_clear(e);
    int rc = sy_document_parse(json, len, &o, &d, e);
    sy_document_free(d);
    return rc;
}

/* Each document holds one NUL byte, written \u0000, in the place named by
 * `path`; strict and lenient parses both reject it there. */
static const struct {
    const char *json, *path;
} nul_cases[] = {
    {"[{\"id\":\"a\\u0000b\",\"uri\":\"http://a\"}]", "[0].id"},
    {"[{\"id\":\"a\",\"uri\":\"http://a\\u0000.evil\"}]", "[0].uri"},
    {"[{\"id\":\"a\",\"uri\":\"http://a\",\"predicates\":[\"Path=/a\\u0000/b\"]"
     "}]",
     "[0].predicates[0]"},
    {"[{\"id\":\"a\",\"uri\":\"http://a\",\"predicates\":[{\"name\":\"Header\","
     "\"args\":{\"header\":\"X\",\"regexp\":\"a\\u0000|.*\"}}]}]",
     "[0].predicates[0].args.regexp"},
    {"[{\"id\":\"a\",\"uri\":\"http://a\",\"predicates\":[{\"name\":"
     "\"Pa\\u0000th\",\"args\":{}}]}]",
     "[0].predicates[0].name"},
    {"[{\"id\":\"a\",\"uri\":\"http://a\",\"filters\":[\"AddRequestHeader=X,"
     "v\\u0000w\"]}]",
     "[0].filters[0]"},
    {"[{\"id\":\"a\",\"uri\":\"http://a\",\"metadata\":{\"k\":\"v\\u0000\"}}]",
     "[0].metadata.k"},
    {"[{\"id\":\"a\",\"uri\":\"http://a\",\"metadata\":{\"k\\u0000\":1}}]",
     "[0].metadata"},
    {"{\"version\":\"1\\u0000\",\"routes\":[]}", "version"},
};

START_TEST(nul_escape_in_any_string_is_rejected_with_its_path) {
    for (size_t i = 0; i < sizeof nul_cases / sizeof nul_cases[0]; i++) {
        const char *j = nul_cases[i].json;
        for (int lenient = 0; lenient < 2; lenient++) {
            sy_error e;
            int rc = parse(j, strlen(j), lenient, &e);
            ck_assert_msg(rc == SY_EARG, "%s: rc %d (%s)", j, rc, e.message);
            ck_assert_msg(strcmp(e.path, nul_cases[i].path) == 0,
                          "%s: path '%s', want '%s'", j, e.path,
                          nul_cases[i].path);
            ck_assert_ptr_nonnull(strstr(e.message, "NUL"));
            /* located at the backslash of \u0000 */
            ck_assert_uint_eq(e.offset, (size_t)(strstr(j, "\\u0000") - j));
            ck_assert_uint_eq(e.line, 1);
        }
    }
}
END_TEST

START_TEST(raw_nul_byte_in_a_string_is_rejected) {
    static const char doc[] = "[{\"id\":\"a\0b\",\"uri\":\"http://a\"}]";
    sy_error e;
    ck_assert_int_eq(parse(doc, sizeof doc - 1, false, &e), SY_EARG);
    ck_assert_str_eq(e.path, "[0].id");
    ck_assert_uint_eq(e.offset, 9);
}
END_TEST

START_TEST(ids_differing_after_a_nul_do_not_collide_they_fail) {
    const char *j = "[{\"id\":\"a\\u0000b\",\"uri\":\"http://a\"},"
                    "{\"id\":\"a\\u0000c\",\"uri\":\"http://a\"}]";
    sy_error e;
    ck_assert_int_eq(parse(j, strlen(j), true, &e), SY_EARG);
    ck_assert_str_eq(e.path, "[0].id");
}
END_TEST

START_TEST(nul_in_a_single_route_and_in_default_filters_is_rejected) {
    const char *r = "{\"id\":\"a\",\"uri\":\"http://a\\u0000b\"}";
    struct sy_route *out = NULL;
    sy_error e;
    ck_assert_int_eq(sy__def_parse_route(r, strlen(r), NULL, "route", &out, &e),
                     SY_EARG);
    ck_assert_str_eq(e.path, "uri");
    const char *f = "[\"AddRequestHeader=X,a\\u0000\"]";
    ck_assert_int_eq(sy__def_parse_filters(f, strlen(f), NULL, &out, &e),
                     SY_EARG);
    ck_assert_str_eq(e.path, "[0]");
}
END_TEST

START_TEST(other_escapes_still_decode) {
    const char *j = "[{\"id\":\"a\\u00e9\\ud83d\\ude00\\n\",\"uri\":"
                    "\"http://a\"}]";
    sy_document *d = NULL;
    sy_error e;
    ck_assert_int_eq(sy_document_parse(j, strlen(j), NULL, &d, &e), 0);
    ck_assert_str_eq(sy_route_id(sy_document_route(d, 0)),
                     "a\xc3\xa9\xf0\x9f\x98\x80\n");
    sy_document_free(d);
}
END_TEST

/* A document of many tiny values is refused by the scan, before cJSON
 * builds a node (~64 bytes) for each 2-byte value. */
static char *zeros_doc(const char *head, size_t n, const char *tail,
                       size_t *len) {
    size_t hl = strlen(head), tl = strlen(tail);
    char *s = malloc(hl + 2 * n + tl + 1);
    ck_assert_ptr_nonnull(s);
    memcpy(s, head, hl);
    size_t o = hl;
    for (size_t i = 0; i < n; i++) {
        s[o++] = '0';
        s[o++] = ',';
    }
    o--; /* no comma after the last value */
    memcpy(s + o, tail, tl + 1);
    *len = o + tl;
    return s;
}

START_TEST(a_route_with_too_many_values_is_rejected_before_parsing) {
    size_t len;
    char *j = zeros_doc("[{\"id\":\"a\",\"uri\":\"http://a\",\"metadata\":"
                        "{\"big\":[",
                        SY_MAX_ROUTE_VALUES + 10, "]}}]", &len);
    sy_error e;
    for (int lenient = 0; lenient < 2; lenient++) {
        ck_assert_int_eq(parse(j, len, lenient, &e), SY_ELIMIT);
        ck_assert_str_eq(e.path, "[0]");
        /* stopped at the first value over the cap, not at the end */
        ck_assert_uint_lt(e.offset, len - 2 * 9);
    }
    /* the same array within the cap is accepted */
    free(j);
    j = zeros_doc("[{\"id\":\"a\",\"uri\":\"http://a\",\"metadata\":"
                  "{\"big\":[",
                  SY_MAX_ROUTE_VALUES - 100, "]}}]", &len);
    ck_assert_int_eq(parse(j, len, false, &e), 0);
    free(j);
}
END_TEST

START_TEST(a_single_route_with_too_many_values_is_rejected) {
    size_t len;
    char *j = zeros_doc("{\"id\":\"a\",\"uri\":\"http://a\",\"metadata\":"
                        "{\"big\":[",
                        SY_MAX_ROUTE_VALUES + 10, "]}}", &len);
    struct sy_route *out = NULL;
    sy_error e;
    ck_assert_int_eq(sy__def_parse_route(j, len, NULL, "route", &out, &e),
                     SY_ELIMIT);
    ck_assert_ptr_null(out);
    free(j);
}
END_TEST

START_TEST(too_many_routes_stop_the_scan_at_the_first_one_over) {
    size_t len;
    char *j = zeros_doc("[", 100000, "]", &len);
    sy_parse_options o = SY_PARSE_OPTIONS_INIT;
    o.limits.max_routes = 10;
    o.lenient = true;
    sy_document *d = NULL;
    sy_error e;
    ck_assert_int_eq(sy_document_parse(j, len, &o, &d, &e), SY_ELIMIT);
    ck_assert_str_eq(e.path, "");
    ck_assert_uint_eq(e.offset, 1 + 2 * 10); /* the 11th value */
    free(j);
    j = zeros_doc("{\"routes\":[", 100, "]}", &len);
    ck_assert_int_eq(sy_document_parse(j, len, &o, &d, &e), SY_ELIMIT);
    ck_assert_str_eq(e.path, "routes");
    free(j);
}
END_TEST

START_TEST(values_outside_the_routes_are_capped_too) {
    size_t len;
    char *j = zeros_doc("{\"routes\":[],\"version\":[",
                        SY_MAX_ROUTE_VALUES + 10, "]}", &len);
    sy_error e;
    ck_assert_int_eq(parse(j, len, false, &e), SY_ELIMIT);
    free(j);
}
END_TEST

START_TEST(syntax_is_strict_json) {
    static const char *const bad[] = {
        "[01]",
        "[1.]",
        "[.5]",
        "[+1]",
        "[-]",
        "[1e]",
        "[\"\\x\"]",
        "[\"\\u12\"]",
        "[\"\\udc00\"]",
        "[\"\\ud800x\"]",
        "[tru]",
        "[nul]",
        "[1,]",
        "{\"a\"}",
        "{\"a\":1,}",
        "[\"a\" \"b\"]",
        "[",
        "\"abc",
        "[]]",
        "{1:2}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        sy_error e;
        int rc = parse(bad[i], strlen(bad[i]), true, &e);
        ck_assert_msg(rc == SY_ESYNTAX, "%s: %d (%s)", bad[i], rc, e.message);
        ck_assert_msg(e.line == 1 && e.column >= 1, "%s: not located", bad[i]);
    }
}
END_TEST

START_TEST(byte_order_mark_and_whitespace_are_accepted) {
    const char *j =
        "\xEF\xBB\xBF \r\n\t[ {\"id\" : \"a\" , \"uri\":\"http://a\","
        "\"order\":-1.5e1} ] \n";
    sy_document *d = NULL;
    sy_error e;
    int rc = sy_document_parse(j, strlen(j), NULL, &d, &e);
    ck_assert_msg(rc == 0 || rc == SY_ERANGE || rc == SY_ETYPE, "%d %s", rc,
                  e.message);
    sy_document_free(d);
    j = "\xEF\xBB\xBF[{\"id\":\"a\",\"uri\":\"http://a\",\"order\":-15}]";
    ck_assert_int_eq(sy_document_parse(j, strlen(j), NULL, &d, &e), 0);
    ck_assert_int_eq(sy_route_order(sy_document_route(d, 0)), -15);
    sy_document_free(d);
}
END_TEST

START_TEST(the_first_routes_and_version_keys_are_the_ones_read) {
    const char *j = "{\"version\":\"7\",\"routes\":[{\"id\":\"a\",\"uri\":"
                    "\"http://a\"}],\"version\":\"8\",\"routes\":[]}";
    sy_document *d = NULL;
    sy_error e;
    ck_assert_int_eq(sy_document_parse(j, strlen(j), NULL, &d, &e), 0);
    ck_assert_str_eq(sy_document_version(d), "7");
    ck_assert_uint_eq(sy_document_route_count(d), 1);
    sy_document_free(d);
    j = "{\"rout\\u0065s\":[{\"id\":\"a\",\"uri\":\"http://a\"}]}";
    ck_assert_int_eq(sy_document_parse(j, strlen(j), NULL, &d, &e), 0);
    ck_assert_uint_eq(sy_document_route_count(d), 1);
    sy_document_free(d);
}
END_TEST

/* Walk two trees in step: the same types, keys, strings, numbers (double
 * and int), and cJSON's list links (the first child's prev is the last). */
static void same_tree(const cJSON *a, const cJSON *b) {
    ck_assert_int_eq(a->type, b->type);
    ck_assert(!a->string == !b->string);
    if (a->string)
        ck_assert_str_eq(a->string, b->string);
    ck_assert(!a->valuestring == !b->valuestring);
    if (a->valuestring)
        ck_assert_str_eq(a->valuestring, b->valuestring);
    ck_assert(a->valuedouble == b->valuedouble);
    ck_assert_int_eq(a->valueint, b->valueint);
    const cJSON *x = a->child, *y = b->child;
    if (x)
        ck_assert_ptr_nonnull(y);
    if (x)
        ck_assert(x->prev && y->prev);
    const cJSON *lx = NULL, *ly = NULL;
    for (; x && y; x = x->next, y = y->next) {
        same_tree(x, y);
        lx = x, ly = y;
    }
    ck_assert(!x && !y);
    if (lx) {
        ck_assert_ptr_eq(a->child->prev, lx);
        ck_assert_ptr_eq(b->child->prev, ly);
    }
}

/* def_tree.c builds, from scanned text, the very tree cJSON parses. */
START_TEST(the_arena_tree_is_the_tree_cjson_parses) {
    static const char *const texts[] = {
        "{\"id\":\"a\",\"uri\":\"http://a\",\"order\":-7,\"predicates\":"
        "[\"Path=/a/{x}\",{\"name\":\"Header\",\"args\":{\"header\":\"X\","
        "\"regexp\":\"\\\\d+\"}}],\"filters\":[],\"metadata\":{\"n\":1.5,"
        "\"big\":3e9,\"neg\":-2147483649,\"t\":true,\"f\":false,\"z\":null,"
        "\"o\":{},\"a\":[],\"deep\":{\"k\":[1,[2,{\"q\":\"r\"}]]}}}",
        "  {\"id\" : "
        "\"\\u00e9\\u4e2d\\ud83d\\ude00\\n\\t\\\"\\\\\\/\\b\\f\\r\","
        "\"uri\":\"x\", \"id\":\"dup\"}\n",
        "[1, 2.25, -0, 0.1e-3, 12345678901234567890, \"\", [], {}]",
        ("[0,-0,123456789012345,-999999999999999,1234567890123456,"
         "2147483647,2147483648,-2147483648,-2147483649,10E2,7e0,5.0]"),
        "\"just a string\"",
        "17",
        "true",
        "null",
        "{\"\":\"empty key\",\"k\\u0041\":\"kA\"}",
    };
    sy__alloc a;
    sy__alloc_init(&a, NULL);
    sy__arena ar;
    sy__arena_init(&ar, &a, 64); /* small: trees span several chunks */
    for (size_t i = 0; i < sizeof texts / sizeof *texts; i++) {
        const char *t = texts[i];
        size_t n = strlen(t);
        sy_limits lim;
        sy__limits_resolve(&lim, NULL);
        sy__json_scan sc;
        sy_error e;
        ck_assert_int_eq(sy__json_scan_text(&a, t, n, &lim, false, &sc, &e), 0);
        sy__free(&a, sc.routes);
        const char *stop = NULL;
        cJSON *ref = cJSON_ParseWithLengthOpts(t, n, &stop, 0);
        ck_assert_ptr_nonnull(ref);
        cJSON *mine = NULL;
        sy__arena_reset(&ar);
        ck_assert_int_eq(sy__def_tree_parse(&ar, t, 0, n, &mine), 0);
        same_tree(mine, ref);
        char *p1 = cJSON_PrintUnformatted(mine),
             *p2 = cJSON_PrintUnformatted(ref);
        ck_assert_str_eq(p1, p2);
        cJSON_free(p1);
        cJSON_free(p2);
        cJSON_Delete(ref);
    }
    /* a number cJSON would cut at 63 characters is left to cJSON */
    char longnum[80];
    memset(longnum, '1', 70);
    longnum[70] = '\0';
    cJSON *mine = NULL;
    ck_assert_int_eq(sy__def_tree_parse(&ar, longnum, 0, 70, &mine),
                     SY_DEF_TREE_CJSON);
    sy__arena_free(&ar);
}
END_TEST

/* Strings are read a word at a time by the scan and the tree: an escape,
 * a quote or a NUL at every position of a long string, at every alignment
 * of the text, is found where it is (the tree equals cJSON's, a NUL is
 * reported at its byte), and a string cut by the end of the text is a
 * syntax error whatever its length. */
START_TEST(strings_are_read_right_at_every_position_and_alignment) {
    static const char *const escapes[] = {"\\\"",    "\\\\",           "\\n",
                                          "\\u00e9", "\\ud83d\\ude00", "\\/"};
    sy__alloc a;
    sy__alloc_init(&a, NULL);
    sy__arena ar;
    sy__arena_init(&ar, &a, 256);
    sy_limits lim;
    sy__limits_resolve(&lim, NULL);
    const char *plain = "abcdefghijklmnopqrstuvwxyz0123456789";
    for (size_t pad = 0; pad < 8; pad++)
        for (size_t at = 0; at <= 24; at++) {
            for (size_t k = 0; k < SY_ARRAY_LEN(escapes); k++) {
                char t[160];
                int n = snprintf(t, sizeof t, "%*s{\"k%.*s\":\"%.*s%s%.*s\"}",
                                 (int)pad, "", (int)at, plain, (int)at, plain,
                                 escapes[k], (int)(24 - at), plain + at);
                sy__json_scan sc;
                sy_error e;
                ck_assert_int_eq(
                    sy__json_scan_text(&a, t, (size_t)n, &lim, false, &sc, &e),
                    0);
                sy__free(&a, sc.routes);
                cJSON *ref = cJSON_Parse(t), *mine = NULL;
                ck_assert_ptr_nonnull(ref);
                sy__arena_reset(&ar);
                ck_assert_int_eq(
                    sy__def_tree_parse(&ar, t, 0, (size_t)n, &mine), 0);
                same_tree(mine, ref);
                cJSON_Delete(ref);
            }
            /* a raw NUL at byte `at` of the value */
            char t[160];
            int n = snprintf(t, sizeof t, "%*s[\"%.*sX%.*s\"]", (int)pad, "",
                             (int)at, plain, (int)(24 - at), plain + at);
            size_t off = pad + 2 + at;
            t[off] = '\0';
            sy__json_scan sc;
            sy_error e;
            sy__error_clear(&e);
            ck_assert_int_eq(
                sy__json_scan_text(&a, t, (size_t)n, &lim, false, &sc, &e),
                SY_EARG);
            sy__free(&a, sc.routes);
            ck_assert_uint_eq(e.offset, off);
            /* cut: no closing quote before the end of the text */
            n = snprintf(t, sizeof t, "%*s[\"%.*s", (int)pad, "", (int)at,
                         plain);
            sy__error_clear(&e);
            ck_assert_int_eq(
                sy__json_scan_text(&a, t, (size_t)n, &lim, false, &sc, &e),
                SY_ESYNTAX);
            sy__free(&a, sc.routes);
            ck_assert_uint_eq(e.offset, (size_t)n);
        }
    sy__arena_free(&ar);
}
END_TEST

/* A route with a number of more than 63 characters is parsed by cJSON
 * (def_tree.c leaves it to it) and reads as cJSON reads it. */
START_TEST(a_route_with_a_very_long_number_still_parses) {
    char j[256];
    snprintf(j, sizeof j,
             "[{\"id\":\"a\",\"uri\":\"http://a\",\"metadata\":{\"n\":%s}}]",
             "1234567890123456789012345678901234567890123456789012345678901234"
             "5");
    sy_document *d = NULL;
    sy_error e;
    int rc = sy_document_parse(j, strlen(j), NULL, &d, &e);
    ck_assert_msg(rc == 0, "%s: %s", e.path, e.message);
    const char *v = sy_route_metadata(sy_document_route(d, 0), "n");
    ck_assert_ptr_nonnull(v);
    ck_assert_msg(strncmp(v, "1.23456789012345", 16) == 0, "%s", v);
    sy_document_free(d);

    /* and so is a single route upserted with one (its own tree) */
    sy_router *r = sy_test_router(NULL, 0);
    ck_assert_int_eq(sy_router_upsert_route(r, "s", j + 1, strlen(j) - 2, &e),
                     0);
    sy_snapshot *s = sy_router_acquire(r);
    const sy_route *rt = sy_snapshot_find_route(s, "a", NULL);
    ck_assert_ptr_nonnull(rt);
    v = sy_route_metadata(rt, "n");
    ck_assert_ptr_nonnull(v);
    ck_assert_msg(strncmp(v, "1.23456789012345", 16) == 0, "%s", v);
    sy_snapshot_release(s);
    sy_router_free(r);
}
END_TEST

/* The skip hook (sy__json_scan_routes): an element the hook claims is
 * skipped unread, whatever it holds; the spans still cover every element,
 * the hook sees each earlier element complete, and errors outside the
 * skipped bytes are found and located as without a hook. */
typedef struct hook_log {
    size_t calls, skip_index, skip_len;
    size_t seen_end[8];
} hook_log;

static size_t test_hook(void *data, const char *json, size_t len,
                        sy__json_scan *out, size_t index, size_t at,
                        uint32_t depth, size_t *values) {
    hook_log *h = data;
    (void)len;
    ck_assert_uint_eq(depth, 2);
    ck_assert_uint_eq(*values, 1); /* the element itself */
    ck_assert_int_eq(json[at], '{');
    ck_assert_uint_eq(out->routes[index].start, at);
    if (index)
        h->seen_end[index] = out->routes[index - 1].end;
    h->calls++;
    if (index != h->skip_index)
        return 0;
    out->routes[index].known = h;
    out->routes[index].aux = 77;
    return h->skip_len;
}

START_TEST(the_skip_hook_skips_what_it_claims_and_nothing_else) {
    /* element 1 holds a NUL escape: an error without the hook */
    const char *t = "{\"version\":\"1\",\"routes\":[{\"id\":\"a\"},"
                    "{\"id\":\"b\\u0000\"}, {\"id\":\"c\"}]}";
    const char *e1 = strstr(t, "{\"id\":\"b");
    size_t n = strlen(t), len1 = strlen("{\"id\":\"b\\u0000\"}");
    sy__alloc a;
    sy__alloc_init(&a, NULL);
    sy_limits lim;
    sy__limits_resolve(&lim, NULL);
    sy__json_scan sc;
    sy_error e;
    ck_assert_int_eq(sy__json_scan_text(&a, t, n, &lim, true, &sc, &e),
                     SY_EARG);
    ck_assert_str_eq(e.path, "routes[1].id");
    sy__free(&a, sc.routes);
    hook_log h = {0, 1, len1, {0}};
    sy__json_skip skip = {test_hook, &h, 2};
    ck_assert_int_eq(sy__json_scan_routes(&a, t, n, &lim, &skip, &sc, &e), 0);
    ck_assert_uint_eq(h.calls, 3);
    ck_assert_uint_eq(sc.route_count, 3);
    ck_assert_uint_eq(sc.routes[1].start, (size_t)(e1 - t));
    ck_assert_uint_eq(sc.routes[1].end, (size_t)(e1 - t) + len1);
    ck_assert_ptr_eq(sc.routes[1].known, &h);
    ck_assert_uint_eq(sc.routes[1].aux, 77);
    ck_assert_ptr_null(sc.routes[2].known);
    ck_assert_uint_eq(h.seen_end[1], sc.routes[0].end);
    ck_assert_uint_eq(h.seen_end[2], sc.routes[1].end);
    sy__free(&a, sc.routes);
    /* a syntax error after the skipped element: found, and located as a
     * scan that reads everything locates it */
    const char *u = "{\"version\":\"1\",\"routes\":[{\"id\":\"a\"},\n"
                    "{\"id\":\"b\\u0000\"},\n {\"id\":\"c\" 1}]}";
    hook_log h2 = {0, 1, len1, {0}};
    sy__json_skip skip2 = {test_hook, &h2, 0};
    ck_assert_int_eq(
        sy__json_scan_routes(&a, u, strlen(u), &lim, &skip2, &sc, &e),
        SY_ESYNTAX);
    sy__free(&a, sc.routes);
    ck_assert_uint_eq(e.line, 3);
    ck_assert_uint_eq(e.column, 12);
    ck_assert_uint_eq(e.offset, (size_t)(strstr(u, " 1}") - u) + 1);
}
END_TEST

/* scan_text with the routes split, under lim: its code; *e located. */
static int scan_with(const char *t, const sy_limits *lim, size_t *routes,
                     sy_error *e) {
    sy__alloc a;
    sy__alloc_init(&a, NULL);
    sy__json_scan sc;
    int rc = sy__json_scan_text(&a, t, strlen(t), lim, true, &sc, e);
    *routes = sc.route_count;
    sy__free(&a, sc.routes);
    return rc;
}

/* A bad value inside a route object (the fast check of a route element
 * gives up on it, and the element is read again) fails as the same value
 * does in an object outside the routes (read by the scan alone): the same
 * code and message, at the same place in the value. A good one passes
 * both ways. */
/* Values inside a route element, bad and good (the fast pass and the
 * checked tree parse give up on some good ones: a \u escape). */
static const char *const route_values[] = {
    "01",
    "1.",
    "-",
    "1e",
    "1x",
    "\"\\x\"",
    "\"\\u12\"",
    "\"\\udc00\"",
    "\"\\ud800x\"",
    "tru",
    "nul",
    "fals",
    "[1,]",
    "{\"a\"}",
    "{\"a\":1,}",
    "{1:2}",
    "[\"a\" \"b\"]",
    "\"a\\u0000\"",
    "{\"k\\u0000\":1}",
    "\"a\\\"b\"",
    "-0.5e+3",
    "[true,false,null,{},[]]",
    "\"\\ud83d\\ude00\\n\\/\"",
    "{\"a\":{\"b\":[1,{\"c\":\"d\"}]}}",
};

START_TEST(a_value_inside_a_route_is_checked_as_one_outside) {
    const char *const *vals = route_values;
    const char *head = "{\"routes\":[{\"m\":";
    const char *ohead = "{\"routes\":[],\"version\":{\"m\":";
    sy_limits lim;
    sy__limits_resolve(&lim, NULL);
    for (size_t i = 0; i < SY_ARRAY_LEN(route_values); i++) {
        char in[256], out[256];
        snprintf(in, sizeof in, "%s%s}]}", head, vals[i]);
        snprintf(out, sizeof out, "%s%s}}", ohead, vals[i]);
        sy_error ei, eo;
        size_t ni, no;
        int ri = scan_with(in, &lim, &ni, &ei);
        int ro = scan_with(out, &lim, &no, &eo);
        ck_assert_msg(ri == ro, "%s: %d inside, %d outside", vals[i], ri, ro);
        if (ro) {
            ck_assert_str_eq(ei.message, eo.message);
            ck_assert_uint_eq(ei.offset - strlen(head),
                              eo.offset - strlen(ohead));
        } else {
            ck_assert_uint_eq(ni, 1);
        }
    }
}
END_TEST

/* The limits hold inside a route element exactly as outside: a string of
 * max_string_bytes (escapes counting as the byte they make) passes, one
 * more fails with its path; nesting to max_depth passes, one more fails;
 * a route nested deeper than the fast check follows (63 levels) is read. */
START_TEST(limits_inside_a_route_hold_to_the_byte_and_the_level) {
    sy_limits lim;
    sy__limits_resolve(&lim, NULL);
    lim.max_string_bytes = 8;
    sy_error e;
    size_t n;
    ck_assert_int_eq(
        scan_with("[{\"id\":\"a\",\"k\":\"1234567\\n\"}]", &lim, &n, &e), 0);
    ck_assert_int_eq(
        scan_with("[{\"id\":\"a\",\"k\":\"12345678\\n\"}]", &lim, &n, &e),
        SY_ELIMIT);
    ck_assert_str_eq(e.path, "[0].k");
    ck_assert_int_eq(
        scan_with("[{\"id\":\"a\",\"12345678\\t\":1}]", &lim, &n, &e),
        SY_ELIMIT);
    ck_assert_str_eq(e.path, "[0]");
    sy__limits_resolve(&lim, NULL);
    lim.max_depth = 5; /* the array, the route, three more */
    ck_assert_int_eq(scan_with("[{\"a\":[{\"b\":[]}]}]", &lim, &n, &e), 0);
    ck_assert_int_eq(scan_with("[{\"a\":[{\"b\":[[]]}]}]", &lim, &n, &e),
                     SY_ELIMIT);
    ck_assert_str_eq(e.path, "");
    lim.max_depth = 200;
    char deep[512];
    size_t o = (size_t)snprintf(deep, sizeof deep, "[{\"id\":\"a\",\"m\":");
    for (int i = 0; i < 100; i++)
        deep[o++] = '[';
    for (int i = 0; i < 100; i++)
        deep[o++] = ']';
    memcpy(deep + o, "},{\"id\":\"b\"}]", 14);
    ck_assert_int_eq(scan_with(deep, &lim, &n, &e), 0);
    ck_assert_uint_eq(n, 2);
}
END_TEST

/* The checked tree parse (one read of a route element, def_tree.c) never
 * accepts what the scan rejects: for each value inside a route element it
 * either gives up (the scan then reads the element and finds what is
 * wrong) or accepts it, and then the scan accepts the same element, it
 * ends where the scan's element ends, counts the values the scan counts,
 * and its tree is cJSON's. It takes on every valid value but a \u escape;
 * its limits hold to the byte and the level as the scan's do. */
START_TEST(the_checked_tree_accepts_only_what_the_scan_accepts) {
    static const char *const more[] = {
        "1-2",     "\"\\u0041\"",       "truex",  "[,1]",
        "{,}",     "\"\\n\\/\\\\\\t\"", "\"",     "[",
        "{\"a\":", "12345678901234567", "2.5E-3", " 1 ",
    };
    size_t nv = SY_ARRAY_LEN(route_values), nm = SY_ARRAY_LEN(more);
    sy__alloc a;
    sy__alloc_init(&a, NULL);
    sy__arena ar;
    sy__arena_init(&ar, &a, 64);
    sy_limits lim;
    sy__limits_resolve(&lim, NULL);
    size_t taken = 0;
    for (size_t i = 0; i < nv + nm; i++) {
        const char *v = i < nv ? route_values[i] : more[i - nv];
        char in[256];
        int k = snprintf(in, sizeof in, "[{\"id\":\"a\",\"m\":%s}]", v);
        size_t len = (size_t)k, end = 0, values = 1;
        sy__def_tree_check chk = {lim.max_string_bytes, 1, lim.max_depth,
                                  &values};
        cJSON *mine = NULL;
        sy__arena_reset(&ar);
        int rc = sy__def_tree_parse_checked(&ar, in, 1, len, &chk, &end, &mine);
        sy_error e;
        sy__json_scan sc;
        int rs = sy__json_scan_text(&a, in, len, &lim, true, &sc, &e);
        if (rc) {
            ck_assert_ptr_null(mine);
            sy__free(&a, sc.routes);
            continue;
        }
        taken++;
        ck_assert_msg(rs == 0, "%s: accepted, the scan says %d", v, rs);
        ck_assert_uint_eq(sc.route_count, 1);
        ck_assert_uint_eq(end, sc.routes[0].end);
        sy__free(&a, sc.routes);
        const char *stop = NULL;
        cJSON *ref = cJSON_ParseWithLengthOpts(in + 1, end - 1, &stop, 0);
        ck_assert_ptr_nonnull(ref);
        same_tree(mine, ref);
        cJSON_Delete(ref);
        ck_assert_uint_ge(values, 3); /* the route, its id, m and in m */
    }
    ck_assert_uint_eq(taken, 8); /* the valid ones without \u */
    /* limits: string bytes (an escape counts as its byte), the level, the
     * values of a route */
    struct {
        const char *t;
        size_t max_bytes;
        uint32_t max_depth;
        size_t values;
        int rc;
    } cases[] = {
        {"[{\"k\":\"1234567\\n\"}]", 8, 32, 1, 0},
        {"[{\"k\":\"12345678\\n\"}]", 8, 32, 1, 1},
        {"[{\"12345678\\t\":1}]", 8, 32, 1, 1},
        {"[{\"a\":[{\"b\":[]}]}]", 64, 5, 1, 0},
        {"[{\"a\":[{\"b\":[[]]}]}]", 64, 5, 1, 1},
        {"[{\"a\":[1,2]}]", 64, 32, SY_MAX_ROUTE_VALUES - 3, 0},
        {"[{\"a\":[1,2]}]", 64, 32, SY_MAX_ROUTE_VALUES - 2, 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t end = 0, values = cases[i].values;
        sy__def_tree_check chk = {cases[i].max_bytes, 1, cases[i].max_depth,
                                  &values};
        cJSON *mine = NULL;
        sy__arena_reset(&ar);
        int rc = sy__def_tree_parse_checked(
            &ar, cases[i].t, 1, strlen(cases[i].t), &chk, &end, &mine);
        ck_assert_msg(!rc == !cases[i].rc, "case %zu: %d", i, rc);
        if (!rc)
            ck_assert_uint_eq(end, strlen(cases[i].t) - 1);
    }
    /* strings read a word at a time into the arena's room: an escape, a
     * quote or a NUL at every position of strings of every length, with
     * the arena's chunk filled to every point (64-byte chunks) */
    sy__arena ar2;
    sy__arena_init(&ar2, &a, 4096 + 64);
    for (size_t n = 0; n < 40; n++)
        for (size_t at = 0; at <= n; at++)
            for (int kind = 0; kind < 3; kind++) {
                /* kind 0: the escape \n at `at`; 1: a NUL byte there; 2: a
                 * quote there (the string ends early: a syntax error) */
                char in[128];
                size_t len = 0;
                memcpy(in, "[{\"k\":\"", 7);
                len = 7;
                for (size_t i = 0; i < n; i++) {
                    if (i == at && kind == 0) {
                        in[len++] = '\\';
                        in[len++] = 'n';
                    } else {
                        in[len++] = i == at ? (kind == 1 ? '\0' : '"') : 'x';
                    }
                }
                memcpy(in + len, "\",\"z\":1}]", 9);
                len += 9;
                size_t end = 0, values = 1;
                sy__def_tree_check chk = {lim.max_string_bytes, 1,
                                          lim.max_depth, &values};
                sy__json_scan sc;
                sy_error e;
                int rs = sy__json_scan_text(&a, in, len, &lim, true, &sc, &e);
                sy__free(&a, sc.routes);
                ck_assert_int_eq(rs != 0, at < n && kind != 0);
                for (size_t fill = 0; fill < 32; fill++) {
                    /* 64-byte chunks (most strings read again), and a
                     * chunk the node leaves room in (filled to each point) */
                    sy__arena *war = fill < 16 ? &ar : &ar2;
                    cJSON *mine = NULL;
                    sy__arena_reset(war);
                    ck_assert_ptr_nonnull(sy__arena_alloc_bytes(
                        war, fill < 16 ? fill : 4000 + fill));
                    values = 1;
                    int rc = sy__def_tree_parse_checked(war, in, 1, len, &chk,
                                                        &end, &mine);
                    ck_assert_int_eq(rc != 0, rs != 0);
                    if (rc)
                        continue;
                    ck_assert_uint_eq(end, len - 1);
                    const char *stop = NULL;
                    cJSON *ref =
                        cJSON_ParseWithLengthOpts(in + 1, end - 1, &stop, 0);
                    ck_assert_ptr_nonnull(ref);
                    same_tree(mine, ref);
                    cJSON_Delete(ref);
                }
            }
    size_t end = 0, values = 1;
    sy__def_tree_check chk = {64, 1, 32, &values};
    cJSON *mine = NULL;
    ck_assert_int_eq(sy__def_tree_parse_checked(&ar, "[{\"a\":[1,2]}]", 1, 13,
                                                &chk, &end, &mine),
                     0);
    ck_assert_uint_eq(values, 4); /* the route, [..], 1, 2 */
    sy__arena_free(&ar);
    sy__arena_free(&ar2);
}
END_TEST

int main(void) {
    Suite *s = suite_create("def_scan");
    TCase *tc = tcase_create("def_scan");
    tcase_add_test(tc, nul_escape_in_any_string_is_rejected_with_its_path);
    tcase_add_test(tc, raw_nul_byte_in_a_string_is_rejected);
    tcase_add_test(tc, ids_differing_after_a_nul_do_not_collide_they_fail);
    tcase_add_test(tc,
                   nul_in_a_single_route_and_in_default_filters_is_rejected);
    tcase_add_test(tc, other_escapes_still_decode);
    tcase_add_test(tc, a_route_with_too_many_values_is_rejected_before_parsing);
    tcase_add_test(tc, a_single_route_with_too_many_values_is_rejected);
    tcase_add_test(tc, too_many_routes_stop_the_scan_at_the_first_one_over);
    tcase_add_test(tc, values_outside_the_routes_are_capped_too);
    tcase_add_test(tc, syntax_is_strict_json);
    tcase_add_test(tc, byte_order_mark_and_whitespace_are_accepted);
    tcase_add_test(tc, the_first_routes_and_version_keys_are_the_ones_read);
    tcase_add_test(tc, the_arena_tree_is_the_tree_cjson_parses);
    tcase_add_test(tc, strings_are_read_right_at_every_position_and_alignment);
    tcase_add_test(tc, a_route_with_a_very_long_number_still_parses);
    tcase_add_test(tc, the_skip_hook_skips_what_it_claims_and_nothing_else);
    tcase_add_test(tc, a_value_inside_a_route_is_checked_as_one_outside);
    tcase_add_test(tc, limits_inside_a_route_hold_to_the_byte_and_the_level);
    tcase_add_test(tc, the_checked_tree_accepts_only_what_the_scan_accepts);
    suite_add_tcase(s, tc);
    return sy_test_run(s);
}
