/* test_instances.c - instances documents (sy_instances_parse): both
 * shapes, every field and its defaults, numeric versions as text, states
 * in any case, located errors for every bad input, and the parsed lists
 * fed to a router and selected from. */
#include "testutil.h"

#include "switchyard.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static sy_instances *parse_ok(const char *json) {
    sy_instances *d = NULL;
    sy_error e;
    memset(&e, 0, sizeof e);
    int rc = sy_instances_parse(json, strlen(json), NULL, &d, &e);
    ck_assert_msg(rc == 0, "parse failed: %d %s: %s", rc, e.path, e.message);
    ck_assert_ptr_nonnull(d);
    return d;
}

/* The error of a bad document: its code, path and a part of its message. */
static void parse_bad(const char *json, int code, const char *path,
                      const char *needle) {
    sy_instances *d = (sy_instances *)1;
    sy_error e;
    memset(&e, 0, sizeof e);
    int rc = sy_instances_parse(json, strlen(json), NULL, &d, &e);
    ck_assert_msg(rc == code, "%s: rc %d (%s: %s), want %d", json, rc, e.path,
                  e.message, code);
    ck_assert_int_eq(e.code, rc);
    ck_assert_ptr_null(d);
    ck_assert_msg(strcmp(e.path, path) == 0, "%s: path '%s', want '%s'", json,
                  e.path, path);
    ck_assert_msg(strstr(e.message, needle), "%s: message '%s' lacks '%s'",
                  json, e.message, needle);
}

static const char *meta(const sy_instance *x, const char *key) {
    for (size_t i = 0; i < x->metadata_count; i++)
        if (strcmp(x->metadata[i].key, key) == 0)
            return x->metadata[i].value;
    return NULL;
}

START_TEST(envelope_and_bare_map_give_the_same_lists) {
    const char *body =
        "{\"orders\":[{\"id\":\"o1\",\"host\":\"10.0.0.1\",\"port\":8080,"
        "\"weight\":3,\"state\":\"draining\",\"secure\":true,"
        "\"metadata\":{\"version\":\"1.2\",\"zone\":\"a\"}},"
        "{\"id\":\"o2\",\"host\":\"h2\",\"port\":1}],"
        "\"users\":[]}";
    char env[1024];
    snprintf(env, sizeof env, "{\"services\":%s}", body);
    const char *docs[] = {body, env};
    for (size_t t = 0; t < 2; t++) {
        sy_instances *d = parse_ok(docs[t]);
        ck_assert_uint_eq(sy_instances_service_count(d), 2);
        ck_assert_str_eq(sy_instances_service(d, 0), "orders");
        ck_assert_str_eq(sy_instances_service(d, 1), "users");
        ck_assert_uint_eq(sy_instances_count(d, 0), 2);
        ck_assert_uint_eq(sy_instances_count(d, 1), 0);
        const sy_instance *a = sy_instances_at(d, 0, 0);
        ck_assert_str_eq(a->id, "o1");
        ck_assert_str_eq(a->host, "10.0.0.1");
        ck_assert_uint_eq(a->port, 8080);
        ck_assert_uint_eq(a->weight, 3);
        ck_assert_int_eq(a->state, SY_INSTANCE_DRAINING);
        ck_assert(a->secure);
        ck_assert_uint_eq(a->metadata_count, 2);
        ck_assert_str_eq(meta(a, "version"), "1.2");
        ck_assert_str_eq(meta(a, "zone"), "a");
        /* defaults */
        const sy_instance *b = &sy_instances_list(d, 0)[1];
        ck_assert_str_eq(b->id, "o2");
        ck_assert_uint_eq(b->weight, 1);
        ck_assert_int_eq(b->state, SY_INSTANCE_UP);
        ck_assert(!b->secure);
        ck_assert_uint_eq(b->metadata_count, 0);
        ck_assert_uint_eq(sy_instances_find(d, "users"), 1);
        ck_assert_uint_eq(sy_instances_find(d, "nope"), SIZE_MAX);
        ck_assert_ptr_null(sy_instances_at(d, 0, 2));
        ck_assert_ptr_null(sy_instances_service(d, 2));
        sy_instances_free(d);
    }
}
END_TEST

START_TEST(numeric_versions_are_text_and_states_take_any_case) {
    sy_instances *d = parse_ok(
        "{\"services\":{\"s\":["
        "{\"id\":\"a\",\"host\":\"h\",\"port\":1,\"state\":\"UP\","
        "\"metadata\":{\"version\":2,\"canary\":true,\"big\":-12}},"
        "{\"id\":\"b\",\"host\":\"h\",\"port\":2,\"state\":\"Down\"},"
        "{\"id\":\"c\",\"host\":\"h\",\"port\":3,\"state\":\"DRAINING\"}]}}");
    const sy_instance *a = sy_instances_at(d, 0, 0);
    ck_assert_int_eq(a->state, SY_INSTANCE_UP);
    ck_assert_str_eq(meta(a, "version"), "2");
    ck_assert_str_eq(meta(a, "canary"), "true");
    ck_assert_str_eq(meta(a, "big"), "-12");
    ck_assert_int_eq(sy_instances_at(d, 0, 1)->state, SY_INSTANCE_DOWN);
    ck_assert_int_eq(sy_instances_at(d, 0, 2)->state, SY_INSTANCE_DRAINING);
    sy_instances_free(d);
}
END_TEST

START_TEST(every_bad_input_is_located) {
    parse_bad("[]", SY_ETYPE, "", "an instances document is an object");
    parse_bad("{\"s\":[", SY_ESYNTAX, "", "JSON syntax error");
    parse_bad("{\"s\":{}}", SY_ETYPE, "s", "must be an array");
    parse_bad("{\"services\":{\"s\":{}}}", SY_ETYPE, "services.s",
              "must be an array");
    parse_bad("{\"services\":{},\"version\":1}", SY_EARG, "version",
              "unknown key");
    parse_bad("{\"services\":{\"s\":[1]}}", SY_ETYPE, "services.s[0]",
              "must be an object");
    parse_bad("{\"s\":[{\"host\":\"h\",\"port\":1}]}", SY_EMISSING, "s[0].id",
              "id is missing");
    parse_bad("{\"s\":[{\"id\":\"\",\"host\":\"h\",\"port\":1}]}", SY_EMISSING,
              "s[0].id", "id is empty");
    parse_bad("{\"s\":[{\"id\":\"a\",\"port\":1}]}", SY_EMISSING, "s[0].host",
              "host is missing");
    parse_bad("{\"s\":[{\"id\":\"a\",\"host\":7,\"port\":1}]}", SY_ETYPE,
              "s[0].host", "must be a string");
    parse_bad("{\"s\":[{\"id\":\"a\",\"host\":\"h\"}]}", SY_EMISSING,
              "s[0].port", "port is missing");
    /* a string port is refused with its path, not read as port 0 */
    parse_bad("{\"services\":{\"s\":[{\"id\":\"a\",\"host\":\"h\",\"port\":1},"
              "{\"id\":\"b\",\"host\":\"h\",\"port\":\"8080\"}]}}",
              SY_ETYPE, "services.s[1].port", "not a string");
    parse_bad("{\"s\":[{\"id\":\"a\",\"host\":\"h\",\"port\":0}]}", SY_ERANGE,
              "s[0].port", "from 1 to 65535");
    parse_bad("{\"s\":[{\"id\":\"a\",\"host\":\"h\",\"port\":65536}]}",
              SY_ERANGE, "s[0].port", "from 1 to 65535");
    parse_bad("{\"s\":[{\"id\":\"a\",\"host\":\"h\",\"port\":80.5}]}", SY_ETYPE,
              "s[0].port", "integer");
    parse_bad("{\"s\":[{\"id\":\"a\",\"host\":\"h\",\"port\":1,\"weight\":0}]}",
              SY_ERANGE, "s[0].weight", "from 1");
    parse_bad("{\"s\":[{\"id\":\"a\",\"host\":\"h\",\"port\":1,"
              "\"weight\":\"2\"}]}",
              SY_ETYPE, "s[0].weight", "not a string");
    parse_bad("{\"s\":[{\"id\":\"a\",\"host\":\"h\",\"port\":1,"
              "\"state\":\"healthy\"}]}",
              SY_EARG, "s[0].state", "up, draining or down");
    parse_bad("{\"s\":[{\"id\":\"a\",\"host\":\"h\",\"port\":1,\"state\":1}]}",
              SY_ETYPE, "s[0].state", "must be a string");
    parse_bad("{\"s\":[{\"id\":\"a\",\"host\":\"h\",\"port\":1,"
              "\"secure\":\"yes\"}]}",
              SY_ETYPE, "s[0].secure", "true or false");
    parse_bad("{\"s\":[{\"id\":\"a\",\"host\":\"h\",\"port\":1,"
              "\"metadata\":[]}]}",
              SY_ETYPE, "s[0].metadata", "must be an object");
    parse_bad("{\"s\":[{\"id\":\"a\",\"host\":\"h\",\"port\":1,"
              "\"metadata\":{\"version\":1.10}}]}",
              SY_ETYPE, "s[0].metadata.version", "write it as a string");
    parse_bad("{\"s\":[{\"id\":\"a\",\"host\":\"h\",\"port\":1,"
              "\"metadata\":{\"zone\":{\"a\":1}}}]}",
              SY_ETYPE, "s[0].metadata.zone", "must be strings");
    parse_bad("{\"s\":[{\"id\":\"a\",\"host\":\"h\",\"port\":1,"
              "\"wieght\":2}]}",
              SY_EARG, "s[0].wieght", "unknown key 'wieght'");
    parse_bad("{\"s\":[{\"id\":\"a\",\"host\":\"h\",\"port\":1},"
              "{\"id\":\"a\",\"host\":\"h2\",\"port\":2}]}",
              SY_EDUPLICATE, "s[1].id", "already used in service 's'");
    parse_bad("{\"s\":[],\"s\":[]}", SY_EDUPLICATE, "s", "listed twice");
    parse_bad("{\"\":[]}", SY_EMISSING, "", "must not be empty");
    sy_instances *d = NULL;
    ck_assert_int_eq(sy_instances_parse(NULL, 1, NULL, &d, NULL), SY_EINVAL);
    ck_assert_int_eq(sy_instances_parse("{}", 2, NULL, NULL, NULL), SY_EINVAL);
    d = parse_ok("{}"); /* no services at all is fine */
    ck_assert_uint_eq(sy_instances_service_count(d), 0);
    sy_instances_free(d);
    sy_instances_free(NULL);
}
END_TEST

/* A host no host can connect to is refused at the document's own path
 * (it was taken, and every request to it failed). */
START_TEST(bad_hosts_are_located_in_the_document) {
    parse_bad("{\"services\":{\"s\":[{\"id\":\"a\",\"host\":"
              "\"10.0.0.1:8080\",\"port\":1}]}}",
              SY_EARG, "services.s[0].host", "the port goes in port");
    parse_bad("{\"s\":[{\"id\":\"a\",\"host\":\"http://x\",\"port\":1}]}",
              SY_EARG, "s[0].host", "IPv6");
    parse_bad("{\"s\":[{\"id\":\"a\",\"host\":\"x/y\",\"port\":1}]}", SY_EARG,
              "s[0].host", "no scheme, path or spaces");
    sy_instances *d =
        parse_ok("{\"s\":[{\"id\":\"a\",\"host\":\"[::1]\",\"port\":1}]}");
    sy_instances_free(d);
}
END_TEST

/* "version": "" is refused at its path: it made a versioned instance
 * (the smallest version) that looks unversioned, kept out of untagged
 * traffic while another instance had no version. Other empty values
 * ("zone": "") stay text: no route asks for an empty zone or hint. */
START_TEST(an_empty_version_is_located_in_the_document) {
    parse_bad("{\"s\":[{\"id\":\"a\",\"host\":\"h\",\"port\":1,"
              "\"metadata\":{\"zone\":\"a\",\"version\":\"\"}}]}",
              SY_EARG, "s[0].metadata.version", "version is empty");
    sy_instances *d = parse_ok("{\"s\":[{\"id\":\"a\",\"host\":\"h\","
                               "\"port\":1,\"metadata\":{\"zone\":\"\"}}]}");
    sy_instances_free(d);
}
END_TEST

START_TEST(parsed_lists_feed_a_router_and_selection) {
    sy_instances *d = parse_ok(
        "{\"services\":{\"orders\":["
        "{\"id\":\"v1\",\"host\":\"10.0.0.1\",\"port\":8080,"
        "\"metadata\":{\"version\":1}},"
        "{\"id\":\"v2\",\"host\":\"10.0.0.2\",\"port\":8080,\"state\":\"UP\","
        "\"metadata\":{\"version\":2}},"
        "{\"id\":\"gone\",\"host\":\"10.0.0.3\",\"port\":8080,"
        "\"state\":\"DOWN\",\"metadata\":{\"version\":3}}]}}");
    sy_router *r;
    ck_assert_int_eq(sy_router_new(NULL, &r, NULL), 0);
    ck_assert_int_eq(sy_router_add_source(r, "s", NULL), 0);
    const char *routes = "[{\"id\":\"o\",\"uri\":\"lb://orders\","
                         "\"predicates\":[\"Path=/o\"]}]";
    ck_assert_int_eq(
        sy_router_apply(r, "s", routes, strlen(routes), NULL, NULL), 0);
    for (size_t i = 0; i < sy_instances_service_count(d); i++)
        ck_assert_int_eq(sy_router_set_instances(r, sy_instances_service(d, i),
                                                 sy_instances_list(d, i),
                                                 sy_instances_count(d, i), NULL,
                                                 NULL),
                         0);
    sy_instances_free(d); /* the router copied everything */
    sy_match_ctx *ctx;
    ck_assert_int_eq(sy_match_ctx_new(NULL, &ctx, NULL), 0);
    static const struct {
        const char *version, *want;
    } cases[] = {{"2", "v2"}, {"1", "v1"}, {NULL, "v2"}, {"3", NULL}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        sy_header h = {{"version", 7},
                       {cases[i].version,
                        cases[i].version ? strlen(cases[i].version) : 0}};
        sy_request req = SY_REQUEST_INIT;
        req.method = (sy_str){"GET", 3};
        req.path = (sy_str){"/o", 2};
        req.headers = cases[i].version ? &h : NULL;
        req.header_count = cases[i].version ? 1 : 0;
        sy_snapshot *s = sy_router_acquire(r);
        sy_match *m;
        ck_assert_int_eq(sy_snapshot_match(s, ctx, &req, &m), 0);
        ck_assert_ptr_nonnull(m);
        sy_selection sel;
        int rc = sy_snapshot_select(s, ctx, m, &req, &sel, NULL);
        if (cases[i].want) {
            ck_assert_int_eq(rc, 0);
            ck_assert_str_eq(sel.id, cases[i].want);
        } else {
            ck_assert_int_eq(rc, SY_ENOINSTANCE); /* version 3 is down */
        }
        sy_snapshot_release(s);
    }
    sy_match_ctx_free(ctx);
    sy_router_free(r);
}
END_TEST

/* Counting allocator: every block handed out is given back. */
static long live_blocks, total_blocks;
static void *count_malloc(void *data, size_t n) {
    (void)data;
    live_blocks++;
    total_blocks++;
    return malloc(n);
}
static void *count_realloc(void *data, void *p, size_t n) {
    (void)data;
    if (!p) {
        live_blocks++;
        total_blocks++;
    }
    return realloc(p, n);
}
static void count_free(void *data, void *p) {
    (void)data;
    live_blocks--;
    free(p);
}

START_TEST(allocator_hooks_are_used_and_everything_is_freed) {
    sy_allocator a = {count_malloc, count_realloc, count_free, NULL};
    const char *json = "{\"s\":[{\"id\":\"a\",\"host\":\"h\",\"port\":1,"
                       "\"metadata\":{\"k\":\"v\"}}]}";
    live_blocks = total_blocks = 0;
    sy_instances *d = NULL;
    ck_assert_int_eq(sy_instances_parse(json, strlen(json), &a, &d, NULL), 0);
    ck_assert_int_gt(total_blocks, 0);
    sy_instances_free(d);
    ck_assert_int_eq(live_blocks, 0);
    /* and on an error half-way */
    const char *bad = "{\"s\":[{\"id\":\"a\",\"host\":\"h\",\"port\":1},"
                      "{\"id\":\"b\",\"host\":\"h\",\"port\":\"x\"}]}";
    ck_assert_int_eq(sy_instances_parse(bad, strlen(bad), &a, &d, NULL),
                     SY_ETYPE);
    ck_assert_int_eq(live_blocks, 0);
}
END_TEST

int main(void) {
    Suite *s = suite_create("instances");
    TCase *tc = tcase_create("instances");
    tcase_add_test(tc, envelope_and_bare_map_give_the_same_lists);
    tcase_add_test(tc, numeric_versions_are_text_and_states_take_any_case);
    tcase_add_test(tc, every_bad_input_is_located);
    tcase_add_test(tc, bad_hosts_are_located_in_the_document);
    tcase_add_test(tc, an_empty_version_is_located_in_the_document);
    tcase_add_test(tc, parsed_lists_feed_a_router_and_selection);
    tcase_add_test(tc, allocator_hooks_are_used_and_everything_is_freed);
    suite_add_tcase(s, tc);
    return sy_test_run(s);
}
