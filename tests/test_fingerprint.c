/* test_fingerprint.c - canonical forms and fingerprints: equivalent
 * spellings of a route are equal, every change of meaning is not. */
#include "def/def.h"
#include "snapshot/diff.h"
#include "testutil.h"

#include "switchyard.h"
#include <cJSON.h>
#include <pthread.h>

#include <stdio.h>

/* Parse one route (JSON object text); the caller unrefs. */
static struct sy_route *route(const char *json) {
    struct sy_route *r = NULL;
    sy_error e;
    sy__error_clear(&e);
    int rc = sy__def_parse_route(json, strlen(json), NULL, "route", &r, &e);
    ck_assert_msg(rc == 0, "%s: %s: %s", json, e.path, e.message);
    return r;
}

static void assert_same(const char *a, const char *b) {
    struct sy_route *ra = route(a), *rb = route(b);
    ck_assert_msg(sy_route_fingerprint(ra) == sy_route_fingerprint(rb),
                  "differ:\n%s\n%s", sy_route_canonical(ra),
                  sy_route_canonical(rb));
    ck_assert_str_eq(sy_route_canonical(ra), sy_route_canonical(rb));
    sy__route_unref(ra);
    sy__route_unref(rb);
}

#define ROUTE(preds, filters)                                                  \
    "{\"id\":\"r\",\"uri\":\"http://b\",\"predicates\":[" preds                \
    "],\"filters\":[" filters "]}"

START_TEST(list_fields_as_arrays_or_comma_strings_are_equal) {
    const char *shortcut = ROUTE("\"Method=GET,POST\",\"Path=/a,/b\"", "");
    assert_same(shortcut,
                ROUTE("{\"name\":\"Method\",\"args\":{\"methods\":"
                      "[\"GET\",\"POST\"]}},{\"name\":\"Path\",\"args\":"
                      "{\"patterns\":[\"/a\",\"/b\"]}}",
                      ""));
    assert_same(shortcut, ROUTE("{\"name\":\"Method\",\"args\":{\"methods\":"
                                "\"GET, POST\"}},{\"name\":\"Path\",\"args\":"
                                "{\"patterns\":\"/a,/b\"}}",
                                ""));
}
END_TEST

/* A route whose predicates are all one-pattern Path and Host shortcuts
 * keeps no entries (route.h): rebuilt from its compiled patterns, they
 * give the canonical form, names, diffs and copies the entries gave. */
START_TEST(routes_that_keep_no_entries_rebuild_them) {
    struct sy_route *r = route(ROUTE("\"Host=**.x.org\",\"Path=/a/{x}\"", ""));
    struct sy_route *o =
        route(ROUTE("{\"name\":\"Host\",\"args\":{\"patterns\":"
                    "\"**.x.org\"}},\"Path=/a/{x}\"",
                    ""));
    ck_assert_ptr_null(r->predicates);
    ck_assert_ptr_nonnull(o->predicates);
    ck_assert_uint_eq(sy_route_fingerprint(r), sy_route_fingerprint(o));
    ck_assert_str_eq(sy_route_canonical(r), sy_route_canonical(o));
    ck_assert_str_eq(sy_route_predicate_name(r, 0), "Host");
    ck_assert_str_eq(sy_route_predicate_name(r, 1), "Path");
    ck_assert_uint_eq(sy__diff_route_changes(r, o), 0);
    struct sy_route *p = route(ROUTE("\"Host=**.x.org\",\"Path=/b/{x}\"", ""));
    ck_assert_ptr_null(p->predicates);
    ck_assert_uint_eq(sy__diff_route_changes(r, p), SY_CHANGED_PREDICATES);
    /* a copy (disabled) holds the entries again, the same text */
    struct sy_route *off = NULL;
    ck_assert_int_eq(sy__def_route_with_enabled(r, false, NULL, &off, NULL), 0);
    ck_assert_ptr_nonnull(off->predicates);
    ck_assert_str_eq(off->predicates[1].args[0].value, "/a/{x}");
    ck_assert_uint_eq(sy__diff_route_changes(r, off), SY_CHANGED_METADATA);
    sy__route_unref(off);
    sy__route_unref(p);
    sy__route_unref(o);
    sy__route_unref(r);
}
END_TEST

/* A router's first document leaves its routes' fingerprints and its
 * snapshot's route sequence to their first reader (def_route.c,
 * snapshot.c fp_lazy): the values are the ones a parse that computes
 * them gives, and a snapshot derived from one that was or was not asked
 * yet has the fingerprint of the same routes applied at once. */
static const char *const lazy_docs[3] = {
    "{\"routes\":[{\"id\":\"a\",\"uri\":\"http://x:1\",\"order\":2,"
    "\"predicates\":[\"Path=/a/{v}\"]},{\"id\":\"b\",\"uri\":\"lb://s\","
    "\"predicates\":[\"Host=*.b.org\",\"Method=GET\"]}]}",
    "{\"routes\":[{\"id\":\"a\",\"uri\":\"http://x:1\",\"order\":2,"
    "\"predicates\":[\"Path=/a/{v}\"]},{\"id\":\"b\",\"uri\":\"lb://s\","
    "\"predicates\":[\"Host=*.b.org\",\"Method=GET\"]},{\"id\":\"c\","
    "\"uri\":\"http://y\",\"order\":-1,\"predicates\":[\"Path=/c\"]}]}",
    "{\"routes\":[{\"id\":\"a\",\"uri\":\"http://x:1\",\"order\":2,"
    "\"predicates\":[\"Path=/a/{v}\"]},{\"id\":\"c\",\"uri\":\"http://z\","
    "\"order\":-1,\"predicates\":[\"Path=/c\"]}]}",
};

static sy_router *lazy_router(void) {
    sy_router_options o = SY_ROUTER_OPTIONS_INIT;
    sy_router *r;
    ck_assert_int_eq(sy_router_new(&o, &r, NULL), 0);
    ck_assert_int_eq(sy_router_add_source(r, "s", NULL), 0);
    return r;
}

static uint64_t lazy_apply(sy_router *r, int doc, bool ask) {
    const char *d = lazy_docs[doc];
    ck_assert_int_eq(sy_router_apply(r, "s", d, strlen(d), NULL, NULL), 0);
    if (!ask)
        return 0;
    sy_snapshot *s = sy_router_acquire(r);
    uint64_t fp = sy_snapshot_fingerprint(s);
    sy_snapshot_release(s);
    return fp;
}

START_TEST(fingerprints_left_to_the_first_reader) {
    sy_router *r = lazy_router();
    lazy_apply(r, 1, false);
    sy_snapshot *s = sy_router_acquire(r);
    const sy_route *a = sy_snapshot_route_at(s, 0);
    ck_assert_uint_eq(atomic_load(&a->fingerprint), 0); /* not yet */
    const char *c = sy_route_canonical(a);
    uint64_t want = sy__hash64(c, strlen(c), 0x5359524f555445ull);
    ck_assert_uint_eq(sy_route_fingerprint(a), want);
    ck_assert_uint_eq(atomic_load(&a->fingerprint), want); /* kept */
    /* the same route parsed alone */
    struct sy_route *alone =
        route("{\"id\":\"c\",\"uri\":\"http://y\","
              "\"order\":-1,\"predicates\":[\"Path=/c\"]}");
    ck_assert_uint_eq(sy_route_fingerprint(alone), want);
    sy__route_unref(alone);
    sy_snapshot_release(s);
    uint64_t once = lazy_apply(r, 1, true);
    ck_assert_uint_ne(once, 0);
    uint64_t third = lazy_apply(r, 2, true);
    ck_assert_uint_ne(third, once);
    sy_router_free(r);
    /* the same tables reached through other histories, the snapshot
     * before asked (its sequence kept from then on) or not */
    for (int ask = 0; ask < 2; ask++) {
        r = lazy_router();
        lazy_apply(r, 0, ask);
        uint64_t got = lazy_apply(r, 1, ask);
        ck_assert_uint_eq(ask ? got : once, once);
        ck_assert_uint_eq(lazy_apply(r, 2, true), third);
        ck_assert_uint_eq(lazy_apply(r, 1, true), once);
        ck_assert_uint_eq(lazy_apply(r, 2, true), third);
        sy_router_free(r);
    }
}
END_TEST

START_TEST(canonical_form_is_compact_json_with_defaults) {
    struct sy_route *r =
        route("{\"uri\":\"HTTP://Backend\",\"id\":\"r\",\"order\":3,"
              "\"predicates\":[\"Path=/a/**\",\"Method=get\"],\"filters\":"
              "[\"StripPrefix\"],\"metadata\":{\"z\":1,\"a\":\"x\"}}");
    /* not kept by the parse: built when first asked, then kept */
    ck_assert_ptr_null(atomic_load(&r->canonical));
    ck_assert_str_eq(
        sy_route_canonical(r),
        "{\"id\":\"r\",\"uri\":\"http://backend:80\",\"order\":3,"
        "\"predicates\":[{\"name\":\"Path\",\"args\":{\"patterns\":[\"/a/**\"],"
        "\"matchTrailingSlash\":\"true\"}},{\"name\":\"Method\",\"args\":"
        "{\"methods\":[\"GET\"]}}],\"filters\":[{\"name\":\"StripPrefix\","
        "\"args\":{\"parts\":\"1\"}}],\"metadata\":{\"a\":\"x\",\"z\":\"1\"}}");
    ck_assert_ptr_eq(sy_route_canonical(r), atomic_load(&r->canonical));
    const char *c = sy_route_canonical(r);
    ck_assert_uint_eq(sy_route_fingerprint(r),
                      sy__hash64(c, strlen(c), 0x5359524f555445ull));
    sy__route_unref(r);
}
END_TEST

START_TEST(shortcut_and_object_forms_are_equal) {
    assert_same(ROUTE("\"Cookie=c, v.*\"", ""),
                ROUTE("{\"name\":\"Cookie\",\"args\":{\"name\":\"c\","
                      "\"regexp\":\"v.*\"}}",
                      ""));
    assert_same(ROUTE("\"Cookie=c, v.*\"", ""),
                ROUTE("{\"name\":\"Cookie\",\"args\":{\"_genkey_0\":\"c\","
                      "\"_genkey_1\":\"v.*\"}}",
                      ""));
    assert_same(ROUTE("\"Path=/a,/b,false\"", ""),
                ROUTE("{\"name\":\"Path\",\"args\":{\"patterns\":\"/a\","
                      "\"p2\":\"/b\",\"matchTrailingSlash\":false}}",
                      ""));
    assert_same(ROUTE("\"Weight=g, 8\"", ""),
                ROUTE("{\"name\":\"Weight\",\"args\":{\"weight.weight\":8,"
                      "\"weight.group\":\"g\"}}",
                      ""));
    assert_same(ROUTE("", "\"AddResponseHeader=X-A, v, false\""),
                ROUTE("", "{\"name\":\"AddResponseHeader\",\"args\":{"
                          "\"override\":\"false\",\"value\":\"v\","
                          "\"name\":\"X-A\"}}"));
    assert_same(ROUTE("", "\"PreserveHostHeader\""),
                ROUTE("", "{\"name\":\"PreserveHostHeader\",\"args\":{}}"));
    assert_same(ROUTE("\"RemoteAddr=10.0.0.0/8,::1\"", ""),
                ROUTE("{\"name\":\"RemoteAddr\",\"args\":{\"sources\":"
                      "\"10.0.0.0/8\",\"x\":\"::1\"}}",
                      ""));
}
END_TEST

START_TEST(key_order_anywhere_does_not_matter) {
    assert_same("{\"id\":\"r\",\"uri\":\"http://b\",\"order\":1,"
                "\"metadata\":{\"a\":\"1\",\"b\":\"2\"}}",
                "{\"metadata\":{\"b\":\"2\",\"a\":\"1\"},\"order\":1,"
                "\"uri\":\"http://b\",\"id\":\"r\"}");
    assert_same(ROUTE("", "{\"name\":\"RequestRateLimiter\",\"args\":{"
                          "\"redis-rate-limiter.replenishRate\":\"1\","
                          "\"status-code\":\"429\"}}"),
                ROUTE("", "{\"name\":\"RequestRateLimiter\",\"args\":{"
                          "\"status-code\":\"429\","
                          "\"redis-rate-limiter.replenishRate\":\"1\"}}"));
}
END_TEST

START_TEST(defaults_written_or_omitted_are_equal) {
    assert_same(ROUTE("", "\"StripPrefix\""), ROUTE("", "\"StripPrefix=1\""));
    assert_same(ROUTE("\"Path=/a\"", ""), ROUTE("\"Path=/a,true\"", ""));
    assert_same(ROUTE("", "\"DedupeResponseHeader=X-A\""),
                ROUTE("", "\"DedupeResponseHeader=X-A, RETAIN_FIRST\""));
    assert_same(ROUTE("", "{\"name\":\"RequestSize\"}"),
                ROUTE("", "{\"name\":\"RequestSize\",\"args\":{\"maxSize\":"
                          "\"5MB\"}}"));
    assert_same(ROUTE("\"XForwardedRemoteAddr=10.0.0.0/8\"", ""),
                ROUTE("{\"name\":\"XForwardedRemoteAddr\",\"args\":{"
                      "\"sources\":\"10.0.0.0/8\",\"maxTrustedIndex\":1}}",
                      ""));
    assert_same("{\"id\":\"r\",\"uri\":\"http://b\"}",
                "{\"id\":\"r\",\"uri\":\"http://b\",\"order\":0,"
                "\"predicates\":[],\"filters\":[],\"metadata\":{}}");
}
END_TEST

START_TEST(normalised_values_are_equal) {
    assert_same(ROUTE("\"Method=get,Post\"", ""),
                ROUTE("\"Method=GET,POST\"", ""));
    assert_same(ROUTE("\"Path=/a,FALSE\"", ""), ROUTE("\"Path=/a,false\"", ""));
    assert_same(ROUTE("", "\"SetStatus=NOT_FOUND\""),
                ROUTE("", "\"SetStatus=404\""));
    assert_same(ROUTE("", "\"StripPrefix=002\""),
                ROUTE("", "\"StripPrefix=2\""));
    assert_same(
        ROUTE("\"After=2017-01-20T17:42:47.789-07:00[America/Denver]\"", ""),
        ROUTE("\"After=1484959367789\"", ""));
    assert_same(ROUTE("\"After=2017-01-21T00:42:47.789Z\"", ""),
                ROUTE("\"After=2017-01-21T01:42:47.789+01:00\"", ""));
    assert_same(ROUTE("", "\"RequestHeaderSize=1KB\""),
                ROUTE("", "\"RequestHeaderSize=1024\""));
    assert_same(ROUTE("", "{\"name\":\"Retry\",\"args\":{"
                          "\"backoff.firstBackoff\":\"1s\"}}"),
                ROUTE("", "{\"name\":\"Retry\",\"args\":{"
                          "\"backoff.firstBackoff\":\"PT1S\"}}"));
    assert_same("{\"id\":\"r\",\"uri\":\"http://b\"}",
                "{\"id\":\"r\",\"uri\":\"HTTP://B:80/some/path?q\"}");
    assert_same("{\"id\":\"r\",\"uri\":\"https://b\"}",
                "{\"id\":\"r\",\"uri\":\"https://b:443\"}");
    assert_same(
        "{\"id\":\"r\",\"uri\":\"no://op\",\"metadata\":{\"n\":1}}",
        "{\"id\":\"r\",\"uri\":\"no://op\",\"metadata\":{\"n\":\"1\"}}");
}
END_TEST

/* Every variant differs from the base and from each other. */
static const char *const variants[] = {
    ROUTE("\"Path=/a\"", "\"StripPrefix=1\""),
    "{\"id\":\"r2\",\"uri\":\"http://b\",\"predicates\":[\"Path=/a\"],"
    "\"filters\":[\"StripPrefix=1\"]}",
    "{\"id\":\"r\",\"uri\":\"http://c\",\"predicates\":[\"Path=/a\"],"
    "\"filters\":[\"StripPrefix=1\"]}",
    "{\"id\":\"r\",\"uri\":\"http://b:81\",\"predicates\":[\"Path=/a\"],"
    "\"filters\":[\"StripPrefix=1\"]}",
    "{\"id\":\"r\",\"uri\":\"https://b\",\"predicates\":[\"Path=/a\"],"
    "\"filters\":[\"StripPrefix=1\"]}",
    "{\"id\":\"r\",\"uri\":\"lb://b\",\"predicates\":[\"Path=/a\"],"
    "\"filters\":[\"StripPrefix=1\"]}",
    "{\"id\":\"r\",\"uri\":\"lb:ws://b\",\"predicates\":[\"Path=/a\"],"
    "\"filters\":[\"StripPrefix=1\"]}",
    "{\"id\":\"r\",\"uri\":\"http://b\",\"order\":1,\"predicates\":"
    "[\"Path=/a\"],\"filters\":[\"StripPrefix=1\"]}",
    "{\"id\":\"r\",\"uri\":\"http://b\",\"predicates\":[\"Path=/a\"],"
    "\"filters\":[\"StripPrefix=1\"],\"metadata\":{\"k\":\"v\"}}",
    "{\"id\":\"r\",\"uri\":\"http://b\",\"predicates\":[\"Path=/a\"],"
    "\"filters\":[\"StripPrefix=1\"],\"metadata\":{\"status\":\"disabled\"}}",
    ROUTE("\"Path=/A\"", "\"StripPrefix=1\""),
    ROUTE("\"Path=/a,false\"", "\"StripPrefix=1\""),
    ROUTE("\"Path=/a,/b\"", "\"StripPrefix=1\""),
    ROUTE("\"Path=/b,/a\"", "\"StripPrefix=1\""),
    ROUTE("\"Path=/a\",\"Method=GET\"", "\"StripPrefix=1\""),
    ROUTE("\"Method=GET\",\"Path=/a\"", "\"StripPrefix=1\""),
    ROUTE("\"Path=/a\"", "\"StripPrefix=2\""),
    ROUTE("\"Path=/a\"", "\"StripPrefix=1\",\"PreserveHostHeader\""),
    ROUTE("\"Path=/a\"", "\"PreserveHostHeader\",\"StripPrefix=1\""),
    ROUTE("\"Path=/a\"", ""),
    ROUTE("", "\"StripPrefix=1\""),
    ROUTE("\"Host=a.org\"", "\"StripPrefix=1\""),
    ROUTE("\"Path=/a\"", "\"PrefixPath=1\""),
    ROUTE("\"Path=/a\",\"Header=X-A\"", "\"StripPrefix=1\""),
    ROUTE("\"Path=/a\",\"Header=X-A, .*\"", "\"StripPrefix=1\""),
    ROUTE("\"Path=/a\",\"Header=X-a\"", "\"StripPrefix=1\""),
    ROUTE("\"Path=/a\",\"Weight=g,1\"", "\"StripPrefix=1\""),
    ROUTE("\"Path=/a\",\"Weight=g,2\"", "\"StripPrefix=1\""),
    ROUTE("\"Path=/a\",\"Weight=h,1\"", "\"StripPrefix=1\""),
    ROUTE("\"Path=/a\",\"After=1000\"", "\"StripPrefix=1\""),
    ROUTE("\"Path=/a\",\"After=1001\"", "\"StripPrefix=1\""),
    ROUTE("\"Path=/a\",\"Before=1000\"", "\"StripPrefix=1\""),
    ROUTE("\"Path=/a\"", "\"StripPrefix=1\",\"AddRequestHeader=X-A, a b\""),
    ROUTE("\"Path=/a\"", "\"StripPrefix=1\",\"AddRequestHeader=X-A, a  b\""),
    ROUTE("\"Path=/a\"", "\"StripPrefix=1\",\"AddRequestHeader=X-A, \\\"\""),
    ROUTE("\"Path=/a\"", "\"StripPrefix=1\",\"AddResponseHeader=X-A, v\""),
    ROUTE("\"Path=/a\"",
          "\"StripPrefix=1\",\"AddResponseHeader=X-A, v, false\""),
    ROUTE("\"Path=/a\"", "\"StripPrefix=1\",\"SetStatus=FOUND\""),
    ROUTE("\"Path=/a\"", "\"StripPrefix=1\",\"SetStatus=303\""),
    ROUTE("\"Path=/a\"", "{\"name\":\"RequestRateLimiter\",\"args\":{"
                         "\"redis-rate-limiter.replenishRate\":\"1\"}}"),
    ROUTE("\"Path=/a\"", "{\"name\":\"RequestRateLimiter\",\"args\":{"
                         "\"redis-rate-limiter.replenishRate\":\"2\"}}"),
    ROUTE("\"Path=/a\"", "{\"name\":\"RequestRateLimiter\",\"args\":{"
                         "\"redis-rate-limiter.replenishRate\":\"1\","
                         "\"status-code\":\"403\"}}"),
};

START_TEST(every_change_of_meaning_changes_the_fingerprint) {
    size_t n = SY_ARRAY_LEN(variants);
    struct sy_route *rs[SY_ARRAY_LEN(variants)];
    for (size_t i = 0; i < n; i++)
        rs[i] = route(variants[i]);
    for (size_t i = 0; i < n; i++)
        for (size_t j = i + 1; j < n; j++)
            ck_assert_msg(
                sy_route_fingerprint(rs[i]) != sy_route_fingerprint(rs[j]),
                "equal fingerprints:\n%s\n%s", variants[i], variants[j]);
    for (size_t i = 0; i < n; i++)
        sy__route_unref(rs[i]);
}
END_TEST

/* What a diff reports changed in an updated route: each part exactly
 * (their canonical texts compared; no part hash is kept). */
START_TEST(part_changes_follow_their_part) {
    struct sy_route *base = route(variants[0]);
    struct sy_route *uri = route(variants[2]);
    struct sy_route *ord = route(variants[7]);
    struct sy_route *md = route(variants[8]);
    struct sy_route *pr = route(variants[10]);
    struct sy_route *fi = route(variants[16]);
    ck_assert_uint_eq(sy__diff_route_changes(base, uri), SY_CHANGED_URI);
    ck_assert_uint_eq(sy__diff_route_changes(base, ord), SY_CHANGED_ORDER);
    ck_assert_int_ne(base->order, ord->order);
    ck_assert_uint_eq(sy__diff_route_changes(base, md), SY_CHANGED_METADATA);
    ck_assert_uint_eq(sy__diff_route_changes(md, base), SY_CHANGED_METADATA);
    ck_assert_uint_eq(sy__diff_route_changes(base, pr), SY_CHANGED_PREDICATES);
    ck_assert_uint_eq(sy__diff_route_changes(base, fi), SY_CHANGED_FILTERS);
    ck_assert_uint_eq(sy__diff_route_changes(uri, fi),
                      SY_CHANGED_URI | SY_CHANGED_FILTERS);
    ck_assert_uint_eq(sy__diff_route_changes(base, base), 0);
    /* fields that differ but write the same canonical text: unchanged (a
     * host's case, a default port, a predicate's spelling) */
    struct sy_route *a = route("{\"id\":\"r\",\"uri\":\"http://B\","
                               "\"predicates\":[\"Path=/a\"]}");
    struct sy_route *b = route("{\"id\":\"r\",\"uri\":\"http://b:80\","
                               "\"predicates\":[{\"name\":\"Path\",\"args\":"
                               "{\"patterns\":\"/a\",\"matchTrailingSlash\":"
                               "\"true\"}}],\"metadata\":{\"k\":1}}");
    ck_assert_str_ne(a->up_host, b->up_host);
    sy__entry_view ta, tb; /* a keeps no entries: rebuilt (route.h) */
    ck_assert_uint_ne(sy__route_pred_entry(a, 0, &ta)->arg_count,
                      sy__route_pred_entry(b, 0, &tb)->arg_count);
    ck_assert_uint_eq(sy__diff_route_changes(a, b), SY_CHANGED_METADATA);
    /* a flag spelled two ways is one value; a count of entries is not */
    struct sy_route *c = route("{\"id\":\"r\",\"uri\":\"http://b\","
                               "\"predicates\":[\"Path=/a,true\"]}");
    struct sy_route *e = route("{\"id\":\"r\",\"uri\":\"http://b\","
                               "\"predicates\":[\"Path=/a,TRUE\"],"
                               "\"order\":2}");
    struct sy_route *f = route("{\"id\":\"r\",\"uri\":\"http://b\","
                               "\"predicates\":[\"Path=/a,true\","
                               "\"Method=GET\"]}");
    ck_assert_uint_eq(sy__diff_route_changes(c, e), SY_CHANGED_ORDER);
    ck_assert_uint_eq(sy__diff_route_changes(c, f), SY_CHANGED_PREDICATES);
    struct sy_route *all[] = {base, uri, ord, md, pr, fi, a, b, c, e, f};
    for (size_t i = 0; i < SY_ARRAY_LEN(all); i++)
        sy__route_unref(all[i]);
}
END_TEST

START_TEST(document_fingerprint_follows_routes_in_order) {
    const char *ab = "[{\"id\":\"a\",\"uri\":\"no://op\"},"
                     "{\"id\":\"b\",\"uri\":\"no://op\"}]";
    const char *ba = "[{\"id\":\"b\",\"uri\":\"no://op\"},"
                     "{\"id\":\"a\",\"uri\":\"no://op\"}]";
    const char *env = "{\"version\":\"9\",\"routes\":[{\"id\":\"a\",\"uri\":"
                      "\"no://op\"},{\"uri\":\"no://op\",\"id\":\"b\"}]}";
    sy_document *d1, *d2, *d3, *d4;
    ck_assert_int_eq(sy_document_parse(ab, strlen(ab), NULL, &d1, NULL), 0);
    ck_assert_int_eq(sy_document_parse(ba, strlen(ba), NULL, &d2, NULL), 0);
    ck_assert_int_eq(sy_document_parse(env, strlen(env), NULL, &d3, NULL), 0);
    ck_assert_int_eq(sy_document_parse("[]", 2, NULL, &d4, NULL), 0);
    ck_assert_uint_ne(sy_document_fingerprint(d1), sy_document_fingerprint(d2));
    ck_assert_uint_eq(sy_document_fingerprint(d1), sy_document_fingerprint(d3));
    ck_assert_uint_ne(sy_document_fingerprint(d4), sy_document_fingerprint(d1));
    ck_assert_uint_eq(sy_document_checksum(d4), sy__hash64("[]", 2, 0));
    sy_document_free(d1);
    sy_document_free(d2);
    sy_document_free(d3);
    sy_document_free(d4);
}
END_TEST

/* Strings that need escapes, at every position of texts longer than a
 * word: the canonical form stays JSON that reads back as the route's own
 * id, metadata and arguments, and the fingerprint is its hash. */
START_TEST(canonical_form_escapes_at_every_position) {
    static const char *const specials[] = {"\\\"",    "\\\\",    "\\n",
                                           "\\u0001", "\\u001f", "\\u00e9"};
    static const char *const decoded[] = {"\"",   "\\",   "\n",
                                          "\x01", "\x1f", "\xc3\xa9"};
    /* texts of 3 to 23 bytes and more around the escape */
    for (size_t k = 0; k < SY_ARRAY_LEN(specials); k++)
        for (size_t at = 0; at <= 20; at++)
            for (size_t after = 0; after <= 20; after += 4) {
                char text[64], want[64], json[512];
                /* between '<' and '>': a shortcut's trim keeps it */
                snprintf(text, sizeof text, "<%.*s%s%.*s>", (int)at,
                         "abcdefghijklmnopqrstu", specials[k], (int)after,
                         "ABCDEFGHIJKLMNOPQRSTU");
                snprintf(want, sizeof want, "<%.*s%s%.*s>", (int)at,
                         "abcdefghijklmnopqrstu", decoded[k], (int)after,
                         "ABCDEFGHIJKLMNOPQRSTU");
                snprintf(json, sizeof json,
                         "{\"id\":\"%s\",\"uri\":\"http://b\",\"filters\":"
                         "[\"AddRequestParameter=x, %s\"],\"metadata\":"
                         "{\"%s\":\"%s\"}}",
                         text, text, text, text);
                struct sy_route *r = route(json);
                const char *c = sy_route_canonical(r);
                ck_assert_ptr_nonnull(c);
                ck_assert_uint_eq(
                    sy_route_fingerprint(r),
                    sy__hash64(c, strlen(c), 0x5359524f555445ull));
                cJSON *t = cJSON_Parse(c);
                ck_assert_msg(t != NULL, "not JSON: %s", c);
                ck_assert_str_eq(cJSON_GetObjectItem(t, "id")->valuestring,
                                 want);
                const cJSON *md = cJSON_GetObjectItem(t, "metadata");
                ck_assert_str_eq(md->child->string, want);
                ck_assert_str_eq(md->child->valuestring, want);
                const cJSON *args = cJSON_GetObjectItem(
                    cJSON_GetArrayItem(cJSON_GetObjectItem(t, "filters"), 0),
                    "args");
                ck_assert_str_eq(
                    cJSON_GetObjectItem(args, "value")->valuestring, want);
                cJSON_Delete(t);
                sy__route_unref(r);
            }
}
END_TEST

/* Golden values: fingerprints are promised equal on every machine and in
 * every release that keeps the canonical form, so they are pinned here
 * rather than recomputed with the library's own formula. A change to any
 * of these numbers is a change of the on-the-wire promise. */
START_TEST(hash64_matches_pinned_values) {
    static const struct {
        const char *text;
        uint64_t seed, want;
    } golden[] = {
        {"", 0, 0xa5506ff52926ac13ull},
        {"a", 0, 0x4586d38d846aa67eull},
        {"abc", 7, 0x21487cdf38e87e8aull},
        {"abcd", 0, 0x1df82ffc4291d22bull},
        {"abcdefg", 0, 0x4d9844167cf19144ull},
        {"abcdefgh", 0, 0xee8f68fefe081092ull},
        {"0123456789abcde", 1, 0xe503bbcd9e1edcf9ull},
        {"0123456789abcdef", 0, 0xdd8f41f3e8df34daull},
        {"0123456789abcdefghijklmnopqrstuvwxyz", 0x5359524f555445ull,
         0x61f14d25b5158c1dull},
    };
    for (size_t i = 0; i < sizeof golden / sizeof golden[0]; i++) {
        uint64_t h =
            sy__hash64(golden[i].text, strlen(golden[i].text), golden[i].seed);
        ck_assert_msg(h == golden[i].want, "\"%s\": %#llx, want %#llx",
                      golden[i].text, (unsigned long long)h,
                      (unsigned long long)golden[i].want);
    }
}
END_TEST

START_TEST(route_fingerprints_match_pinned_values) {
    struct sy_route *a = route(variants[0]), *b = route(variants[0]);
    ck_assert_uint_eq(sy_route_fingerprint(a), sy_route_fingerprint(b));
    ck_assert_uint_eq(sy_route_fingerprint(a), 0x2e6c84144b43d063ull);
    sy__route_unref(a);
    sy__route_unref(b);
    struct sy_route *c =
        route(ROUTE("\"Path=/a/**\",\"Method=GET\"", "\"StripPrefix=1\""));
    ck_assert_uint_eq(sy_route_fingerprint(c), 0x6034c45c90a3c2d5ull);
    sy__route_unref(c);
}
END_TEST

START_TEST(document_fingerprint_matches_pinned_value) {
    static const char doc[] = "{\"version\":\"1\",\"routes\":[" ROUTE(
        "\"Path=/a\"", "") ","
                           "{\"id\":\"s\",\"uri\":\"lb://svc\",\"predicates\":"
                           "[\"Host=**.example.org\"]}]}";
    sy_document *d = NULL;
    sy_error e;
    sy_parse_options o = SY_PARSE_OPTIONS_INIT;
    ck_assert_int_eq(sy_document_parse(doc, strlen(doc), &o, &d, &e), 0);
    ck_assert_uint_eq(sy_document_fingerprint(d), 0x369719283e7ea903ull);
    sy_document_free(d);
}
END_TEST

/* The canonical form is built by the first sy_route_canonical of a
 * route, from any thread: racing first calls agree on one text. So is
 * the fingerprint the parse left to its first reader: half the threads
 * ask for it first. */
static _Atomic int fp_first;

static void *canonical_of(void *r) {
    if (atomic_fetch_add(&fp_first, 1) % 2)
        ck_assert_uint_ne(sy_route_fingerprint(r), 0);
    return (void *)(uintptr_t)sy_route_canonical(r);
}

START_TEST(racing_first_calls_get_one_canonical_text) {
    for (int round = 0; round < 20; round++) {
        struct sy_route *r = route(ROUTE("\"Path=/a/{x}\",\"Method=GET\"",
                                         "\"AddRequestHeader=X-A, b\""));
        pthread_t t[4];
        const char *got[4];
        for (int i = 0; i < 4; i++)
            ck_assert_int_eq(pthread_create(&t[i], NULL, canonical_of, r), 0);
        for (int i = 0; i < 4; i++) {
            void *v = NULL;
            ck_assert_int_eq(pthread_join(t[i], &v), 0);
            got[i] = v;
        }
        for (int i = 0; i < 4; i++) {
            ck_assert_ptr_nonnull(got[i]);
            ck_assert_ptr_eq(got[i], got[0]);
        }
        ck_assert_ptr_eq(sy_route_canonical(r), got[0]);
        ck_assert_uint_eq(
            sy_route_fingerprint(r),
            sy__hash64(got[0], strlen(got[0]), 0x5359524f555445ull));
        sy__route_unref(r);
    }
}
END_TEST

/* ---- snapshot fingerprints ---- */

#define FP_ROUTE(id, order)                                                    \
    "{\"id\":\"" id "\",\"uri\":\"http://b\",\"order\":" #order                \
    ",\"predicates\":[\"Path=/" id "\"]}"

static sy_router *fp_router(const char *doc) {
    return sy_test_router(doc, doc ? strlen(doc) : 0);
}

static uint64_t live_fp(sy_router *r) {
    sy_snapshot *s = sy_router_acquire(r);
    uint64_t fp = sy_snapshot_fingerprint(s);
    sy_snapshot_release(s);
    return fp;
}

static void fp_upsert(sy_router *r, const char *json) {
    sy_error e;
    ck_assert_msg(sy_router_upsert_route(r, "s", json, strlen(json), &e) == 0,
                  "%s", e.message);
}

/* Pinned: the formula (docs/api.md) is part of what a fleet compares;
 * changing it must be deliberate. */
START_TEST(snapshot_fingerprint_matches_pinned_value) {
    sy_router *empty = fp_router(NULL);
    sy_router *r = fp_router(
        "[" FP_ROUTE("a", 1) "," FP_ROUTE("b", 2) "," FP_ROUTE("c", 3) "]");
    uint64_t fe = live_fp(empty), fr = live_fp(r);
    sy_router_free(empty);
    sy_router_free(r);
    ck_assert_uint_eq(fe, 0x2ff12908d930f9bdull);
    ck_assert_uint_eq(fr, 0xa8e858f5e218f25cull);
}
END_TEST

/* Equal content, equal fingerprint, whatever history led to it; another
 * rank order of the same routes is other content. */
START_TEST(snapshot_fingerprint_depends_on_content_not_history) {
    sy_router *r1 = fp_router(
        "[" FP_ROUTE("a", 1) "," FP_ROUTE("b", 2) "," FP_ROUTE("c", 3) "]");
    sy_router *r2 = fp_router(NULL);
    fp_upsert(r2, FP_ROUTE("c", 3));
    fp_upsert(r2, FP_ROUTE("x", 2));
    fp_upsert(r2, FP_ROUTE("b", 2));
    fp_upsert(r2, FP_ROUTE("a", 9));
    ck_assert_int_eq(sy_router_remove_route(r2, "x", NULL), 0);
    ck_assert_uint_ne(live_fp(r1), live_fp(r2)); /* a's order differs */
    fp_upsert(r2, FP_ROUTE("a", 1));
    ck_assert_uint_eq(live_fp(r1), live_fp(r2));
    /* hundreds of single changes that leave the content as it was */
    char buf[160];
    for (int i = 0; i < 600; i++) {
        snprintf(buf, sizeof buf,
                 "{\"id\":\"z%d\",\"uri\":\"http://b\",\"order\":%d,"
                 "\"predicates\":[\"Path=/z%d\"]}",
                 i % 300, i % 4, i);
        fp_upsert(r2, buf);
    }
    ck_assert_uint_ne(live_fp(r1), live_fp(r2));
    for (int i = 299; i >= 0; i--) {
        snprintf(buf, sizeof buf, "z%d", i);
        ck_assert_int_eq(sy_router_remove_route(r2, buf, NULL), 0);
    }
    ck_assert_uint_eq(live_fp(r1), live_fp(r2));
    /* the same routes in another rank order (equal orders, swapped
     * positions) */
    sy_router *r3 = fp_router("[" FP_ROUTE("a", 0) "," FP_ROUTE("b", 0) "]");
    sy_router *r4 = fp_router("[" FP_ROUTE("b", 0) "," FP_ROUTE("a", 0) "]");
    ck_assert_uint_ne(live_fp(r3), live_fp(r4));
    sy_router_free(r1);
    sy_router_free(r2);
    sy_router_free(r3);
    sy_router_free(r4);
}
END_TEST

/* A service whose instances came and went holds what a service never
 * seen holds: no instances. A router that watched it and one that read
 * the store later must agree (the etcd fleet test found them apart). */
START_TEST(an_emptied_service_counts_as_no_service) {
    sy_router *watched = fp_router("[" FP_ROUTE("a", 1) "]");
    sy_router *fresh = fp_router("[" FP_ROUTE("a", 1) "]");
    uint64_t before = live_fp(watched);
    sy_instance one = {.id = "u1", .host = "10.0.0.1", .port = 80, .weight = 1};
    sy_error e;
    ck_assert_int_eq(
        sy_router_set_instances(watched, "users", &one, 1, NULL, &e), 0);
    ck_assert_uint_ne(live_fp(watched), before);
    ck_assert_int_eq(
        sy_router_set_instances(watched, "users", NULL, 0, NULL, &e), 0);
    ck_assert_uint_eq(live_fp(watched), live_fp(fresh));
    ck_assert_uint_eq(live_fp(watched), before);
    sy_router_free(watched);
    sy_router_free(fresh);
}
END_TEST

int main(void) {
    Suite *s = suite_create("fingerprint");
    TCase *tc = tcase_create("fingerprint");
    tcase_add_test(tc, canonical_form_is_compact_json_with_defaults);
    tcase_add_test(tc, fingerprints_left_to_the_first_reader);
    tcase_add_test(tc, routes_that_keep_no_entries_rebuild_them);
    tcase_add_test(tc, canonical_form_escapes_at_every_position);
    tcase_add_test(tc, racing_first_calls_get_one_canonical_text);
    tcase_add_test(tc, list_fields_as_arrays_or_comma_strings_are_equal);
    tcase_add_test(tc, shortcut_and_object_forms_are_equal);
    tcase_add_test(tc, key_order_anywhere_does_not_matter);
    tcase_add_test(tc, defaults_written_or_omitted_are_equal);
    tcase_add_test(tc, normalised_values_are_equal);
    tcase_add_test(tc, every_change_of_meaning_changes_the_fingerprint);
    tcase_add_test(tc, part_changes_follow_their_part);
    tcase_add_test(tc, document_fingerprint_follows_routes_in_order);
    tcase_add_test(tc, hash64_matches_pinned_values);
    tcase_add_test(tc, route_fingerprints_match_pinned_values);
    tcase_add_test(tc, document_fingerprint_matches_pinned_value);
    tcase_add_test(tc, snapshot_fingerprint_matches_pinned_value);
    tcase_add_test(tc, snapshot_fingerprint_depends_on_content_not_history);
    tcase_add_test(tc, an_emptied_service_counts_as_no_service);
    suite_add_tcase(s, tc);
    return sy_test_run(s);
}
