/*
 * test_proxy_stress.c - the proxy API under concurrency (run under TSan in
 * CI): reader threads match, take targets with exclusions and report
 * outcomes while a writer commits change sets (a document and the
 * instance list of its service, together) and readers hold snapshots
 * across commits. Every target must name an instance of the route's own
 * generation: a route of version N only ever meets instances of version N.
 */
#include "testutil.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <switchyard.h>
#include <time.h>

#define READERS 4

static sy_router *router;
static atomic_bool stop;
static atomic_long targets, mismatches, failures;

static void *reader(void *arg) {
    (void)arg;
    sy_match_ctx *ctx;
    ck_assert_int_eq(sy_match_ctx_new(NULL, &ctx, NULL), 0);
    unsigned seed = 1;
    while (!atomic_load(&stop)) {
        sy_snapshot *s = sy_router_acquire(router);
        sy_request req = SY_REQUEST_INIT;
        req.method = (sy_str){"GET", 3};
        req.host = (sy_str){"h", 1};
        req.path = (sy_str){"/svc/x", 6};
        req.seed = ++seed;
        sy_match *m;
        ck_assert_int_eq(sy_snapshot_match(s, ctx, &req, &m), 0);
        if (m) {
            /* the route's uri names the generation it was built for */
            const char *want = sy_route_metadata(sy_match_route(m), "gen");
            const char *tried[1] = {NULL};
            for (int attempt = 0; attempt < 2; attempt++) {
                sy_target t;
                int rc = sy_match_target(m, tried, attempt, &t, NULL);
                if (rc == SY_ENOINSTANCE)
                    break;
                ck_assert_int_eq(rc, 0);
                atomic_fetch_add(&targets, 1);
                if (!want || !t.version || strcmp(want, t.version) != 0)
                    atomic_fetch_add(&mismatches, 1);
                sy_outcome o = (seed % 7 == 0) ? SY_OUTCOME_CONNECT_FAILURE
                                               : SY_OUTCOME_SUCCESS;
                sy_router_report_outcome(router, &t, o);
                if (o == SY_OUTCOME_SUCCESS)
                    break;
                tried[0] = t.instance_id;
            }
        } else {
            atomic_fetch_add(&failures, 1);
        }
        sy_snapshot_release(s);
    }
    sy_match_ctx_free(ctx);
    return NULL;
}

START_TEST(change_sets_and_outcomes_under_concurrency) {
    sy_router_options o = SY_ROUTER_OPTIONS_INIT;
    o.outlier.consecutive_failures = 2;
    o.outlier.base_ejection_ms = 5;
    ck_assert_int_eq(sy_router_new(&o, &router, NULL), 0);
    ck_assert_int_eq(sy_router_add_source(router, "main", NULL), 0);
    int rounds = 300 * sy_test_scale();
    pthread_t th[READERS];
    bool started = false;
    for (int g = 1; g <= rounds; g++) {
        char doc[256], ver[16];
        snprintf(ver, sizeof ver, "%d", g);
        snprintf(doc, sizeof doc,
                 "{\"version\":\"%d\",\"routes\":[{\"id\":\"r\","
                 "\"uri\":\"lb://svc\",\"predicates\":[\"Path=/svc/**\"],"
                 "\"metadata\":{\"gen\":\"%d\",\"version-header\":\"X-V\"}}]}",
                 g, g);
        sy_kv md[1] = {{"version", ver}};
        sy_instance list[3];
        char ids[3][16];
        for (int i = 0; i < 3; i++) {
            snprintf(ids[i], sizeof ids[i], "i%d-%d", g % 5, i);
            list[i] = (sy_instance){.id = ids[i],
                                    .host = "127.0.0.1",
                                    .port = (uint16_t)(1000 + i),
                                    .metadata = md,
                                    .metadata_count = 1};
        }
        sy_change_set *cs;
        ck_assert_int_eq(sy_change_set_new(router, &cs, NULL), 0);
        ck_assert_int_eq(
            sy_change_set_apply(cs, "main", doc, strlen(doc), NULL), 0);
        ck_assert_int_eq(sy_change_set_set_instances(cs, "svc", list, 3, NULL),
                         0);
        sy_error err;
        ck_assert_int_eq(sy_router_commit(router, cs, NULL, &err), 0);
        sy_change_set_free(cs);
        if (!started) {
            for (int i = 0; i < READERS; i++)
                pthread_create(&th[i], NULL, reader, NULL);
            started = true;
            /* the commits below take microseconds: wait until the readers
             * run, so that they overlap (bounded: 10 s) */
            for (int w = 0; w < 10000 && atomic_load(&targets) == 0; w++)
                nanosleep(&(struct timespec){0, 1000000}, NULL);
        }
    }
    atomic_store(&stop, true);
    for (int i = 0; i < READERS; i++)
        pthread_join(th[i], NULL);
    ck_assert_int_gt(atomic_load(&targets), 0);
    ck_assert_int_eq(atomic_load(&mismatches), 0);
    ck_assert_int_eq(atomic_load(&failures), 0);
    sy_metrics m;
    sy_router_metrics(router, &m);
    ck_assert_uint_eq(m.publishes, (uint64_t)rounds);
    sy_router_free(router);
}
END_TEST

static int load_doc(void *data, const char *source, sy_loaded *out,
                    sy_error *err) {
    (void)data;
    (void)source;
    (void)err;
    out->bytes = "[{\"id\":\"l\",\"uri\":\"http://l\"}]";
    out->len = strlen(out->bytes);
    out->release = NULL;
    return 0;
}

static void *notifier(void *arg) {
    sy_router *r = arg;
    for (int i = 0; i < 200; i++)
        ck_assert_int_eq(sy_router_notify(r, "pull", NULL), 0);
    return NULL;
}

/* Registering a loader while another thread notifies is no
 * data race (TSan) and every notification applies through a loader. */
START_TEST(loader_registration_races_no_notification) {
    sy_router *r;
    ck_assert_int_eq(sy_router_new(NULL, &r, NULL), 0);
    ck_assert_int_eq(sy_router_add_source(r, "pull", NULL), 0);
    ck_assert_int_eq(sy_router_set_loader(r, "pull", load_doc, NULL, NULL), 0);
    pthread_t th;
    pthread_create(&th, NULL, notifier, r);
    for (int i = 0; i < 200; i++)
        ck_assert_int_eq(sy_router_set_loader(r, "pull", load_doc,
                                              (void *)(intptr_t)i, NULL),
                         0);
    pthread_join(th, NULL);
    sy_snapshot *s = sy_router_acquire(r);
    ck_assert_ptr_nonnull(sy_snapshot_find_route(s, "l", NULL));
    sy_snapshot_release(s);
    sy_router_free(r);
}
END_TEST

int main(void) {
    Suite *s = suite_create("proxy_stress");
    TCase *tc = tcase_create("proxy_stress");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, change_sets_and_outcomes_under_concurrency);
    tcase_add_test(tc, loader_registration_races_no_notification);
    suite_add_tcase(s, tc);
    return sy_test_run(s);
}
