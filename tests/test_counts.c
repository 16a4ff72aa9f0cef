/* test_counts.c - every count the API takes is checked before any size is
 * computed from it, the same way in every call: absurd counts
 * are SY_ELIMIT and change nothing (under ASan a count used before the
 * check shows as an overflow). */
#include "testutil.h"

#include "switchyard.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

static uint64_t generation_of(sy_router *r) {
    sy_snapshot *s = sy_router_acquire(r);
    uint64_t g = sy_snapshot_generation(s);
    sy_snapshot_release(s);
    return g;
}

/* The four calls that take an instance or delta list, on one router: the
 * single ones and the staging ones; each returns its code and err. */
enum { SET, UPDATE, STAGE_SET, STAGE_UPDATE, CALLS };
static const char *const call_name[CALLS] = {
    "sy_router_set_instances", "sy_router_update_instances",
    "sy_change_set_set_instances", "sy_change_set_update_instances"};

static int call(int which, sy_router *r, sy_change_set *cs,
                const sy_instance *in, const sy_instance_delta *d, size_t n,
                sy_error *e) {
    switch (which) {
    case SET: return sy_router_set_instances(r, "svc", in, n, NULL, e);
    case UPDATE: return sy_router_update_instances(r, "svc", d, n, NULL, e);
    case STAGE_SET: return sy_change_set_set_instances(cs, "svc", in, n, e);
    default: return sy_change_set_update_instances(cs, "svc", d, n, e);
    }
}

/* One real instance (and its delta), a count far beyond it: refused with
 * SY_ELIMIT before the list is read, nothing staged, nothing published. */
START_TEST(absurd_instance_counts_are_refused_by_every_call) {
    sy_router *r = sy_test_router(NULL, 0);
    sy_change_set *cs;
    ck_assert_int_eq(sy_change_set_new(r, &cs, NULL), 0);
    sy_kv md[1] = {{"zone", "a"}};
    sy_instance in[1] = {
        {"i1", "10.0.0.1", 80, false, 1, SY_INSTANCE_UP, md, 1}};
    sy_instance_delta d[1] = {{SY_INSTANCE_ADD, in[0]}};
    const size_t counts[] = {
        SIZE_MAX, SIZE_MAX / 2 + 1, SIZE_MAX / sizeof(sy_instance) + 1,
        SIZE_MAX / sizeof(sy_instance_delta) + 1, (size_t)SY_MAX_INSTANCES + 1};
    uint64_t g0 = generation_of(r);
    for (int which = 0; which < CALLS; which++)
        for (size_t k = 0; k < sizeof counts / sizeof *counts; k++) {
            sy_error e;
            memset(&e, 0, sizeof e);
            int rc = call(which, r, cs, in, d, counts[k], &e);
            ck_assert_msg(rc == SY_ELIMIT, "%s with count %zu: %d (%s)",
                          call_name[which], counts[k], rc, e.message);
            ck_assert_str_eq(e.path, which % 2 ? "deltas" : "instances");
        }
    ck_assert_uint_eq(sy_change_set_count(cs), 0);
    ck_assert_uint_eq(generation_of(r), g0);
    /* the same instance, counted right, is taken by each */
    for (int which = 0; which < CALLS; which++) {
        sy_error e;
        ck_assert_msg(call(which, r, cs, in, d, 1, &e) == 0, "%s: %s",
                      call_name[which], e.message);
    }
    ck_assert_uint_eq(sy_change_set_count(cs), 2);
    ck_assert_int_eq(sy_router_commit(r, cs, NULL, NULL), 0);
    sy_change_set_free(cs);
    sy_router_free(r);
}
END_TEST

/* An instance whose metadata count is absurd: the same SY_ELIMIT, naming
 * the instance, from every call; the limit itself is taken. */
START_TEST(absurd_metadata_counts_are_refused_by_every_call) {
    sy_router *r = sy_test_router(NULL, 0);
    sy_change_set *cs;
    ck_assert_int_eq(sy_change_set_new(r, &cs, NULL), 0);
    static sy_kv md[SY_MAX_INSTANCE_METADATA];
    static char keys[SY_MAX_INSTANCE_METADATA][16];
    for (unsigned i = 0; i < SY_MAX_INSTANCE_METADATA; i++) {
        snprintf(keys[i], sizeof keys[i], "k%u", i);
        md[i] = (sy_kv){keys[i], "v"};
    }
    sy_instance in[2] = {
        {"i1", "10.0.0.1", 80, false, 1, SY_INSTANCE_UP, NULL, 0},
        {"i2", "10.0.0.2", 80, false, 1, SY_INSTANCE_UP, md, 1}};
    sy_instance_delta d[2] = {{SY_INSTANCE_ADD, in[0]},
                              {SY_INSTANCE_ADD, in[1]}};
    const size_t counts[] = {SIZE_MAX, SIZE_MAX / sizeof(sy_kv) + 1,
                             SY_MAX_INSTANCE_METADATA + 1};
    uint64_t g0 = generation_of(r);
    for (int which = 0; which < CALLS; which++)
        for (size_t k = 0; k < sizeof counts / sizeof *counts; k++) {
            in[1].metadata_count = d[1].instance.metadata_count = counts[k];
            sy_error e;
            memset(&e, 0, sizeof e);
            int rc = call(which, r, cs, in, d, 2, &e);
            ck_assert_msg(rc == SY_ELIMIT, "%s with %zu metadata: %d (%s)",
                          call_name[which], counts[k], rc, e.message);
            ck_assert_str_eq(e.path, which % 2 ? "deltas[1].instance.metadata"
                                               : "instances[1].metadata");
        }
    ck_assert_uint_eq(sy_change_set_count(cs), 0);
    ck_assert_uint_eq(generation_of(r), g0);
    in[1].metadata_count = d[1].instance.metadata_count =
        SY_MAX_INSTANCE_METADATA;
    for (int which = 0; which < CALLS; which++) {
        sy_error e;
        ck_assert_msg(call(which, r, cs, in, d, 2, &e) == 0, "%s: %s",
                      call_name[which], e.message);
    }
    ck_assert_int_eq(sy_router_commit(r, cs, NULL, NULL), 0);
    sy_change_set_free(cs);
    sy_router_free(r);
}
END_TEST

static int explained(void *data, const sy_route *route, bool matched,
                     int failed, const char *name) {
    (void)route;
    (void)failed;
    (void)name;
    *(int *)data += matched;
    return 0;
}

/* A request's header count: more than SY_MAX_REQUEST_HEADERS is SY_ELIMIT
 * from the match and from explain, before anything is sized from it (the
 * filter plan's header list would be); the limit itself is taken. */
START_TEST(absurd_request_header_counts_are_refused) {
    const char *doc = "[{\"id\":\"r\",\"uri\":\"http://h:1\","
                      "\"predicates\":[\"Path=/x/**\"],"
                      "\"filters\":[\"AddRequestHeader=X-A,1\"]}]";
    sy_router *r = sy_test_router(doc, strlen(doc));
    sy_match_ctx *ctx;
    ck_assert_int_eq(sy_match_ctx_new(NULL, &ctx, NULL), 0);
    sy_snapshot *snap = sy_router_acquire(r);
    static sy_header h[SY_MAX_REQUEST_HEADERS];
    for (size_t i = 0; i < SY_MAX_REQUEST_HEADERS; i++)
        h[i] = (sy_header){{"X-H", 3}, {"v", 1}};
    sy_request req = SY_REQUEST_INIT;
    req.method = (sy_str){"GET", 3};
    req.host = (sy_str){"h", 1};
    req.path = (sy_str){"/x/1", 4};
    req.headers = h;
    const size_t counts[] = {SIZE_MAX, SIZE_MAX - 7,
                             SIZE_MAX / sizeof(sy_header) + 1,
                             (size_t)SY_MAX_REQUEST_HEADERS + 1};
    for (size_t k = 0; k < sizeof counts / sizeof *counts; k++) {
        req.header_count = counts[k];
        sy_match *m = (sy_match *)&req; /* set to NULL or left alone */
        ck_assert_msg(sy_snapshot_match(snap, ctx, &req, &m) == SY_ELIMIT,
                      "match with %zu headers", counts[k]);
        ck_assert_int_eq(sy_snapshot_match_linear(snap, ctx, &req, &m),
                         SY_ELIMIT);
        int n = 0;
        ck_assert_int_eq(sy_snapshot_explain(snap, ctx, &req, explained, &n),
                         SY_ELIMIT);
        ck_assert_int_eq(n, 0);
    }
    req.header_count = SY_MAX_REQUEST_HEADERS;
    sy_match *m = NULL;
    ck_assert_int_eq(sy_snapshot_match(snap, ctx, &req, &m), 0);
    ck_assert_ptr_nonnull(m);
    ck_assert_uint_eq(sy_match_header_count(m), SY_MAX_REQUEST_HEADERS + 1);
    sy_snapshot_release(snap);
    sy_match_ctx_free(ctx);
    sy_router_free(r);
}
END_TEST

int main(void) {
    Suite *s = suite_create("counts");
    TCase *tc = tcase_create("counts");
    tcase_add_test(tc, absurd_instance_counts_are_refused_by_every_call);
    tcase_add_test(tc, absurd_metadata_counts_are_refused_by_every_call);
    tcase_add_test(tc, absurd_request_header_counts_are_refused);
    suite_add_tcase(s, tc);
    return sy_test_run(s);
}
