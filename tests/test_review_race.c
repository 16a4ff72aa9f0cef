/* test_review_race.c - races found by the 0.2 library review (issue 9),
 * run under TSan with the concurrency suites. */
#include "testutil.h"

#include "switchyard.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#define THREADS 8
#define BASE_MS 1000

static _Atomic int64_t fake_now;
static int64_t clock_cb(void *d) {
    (void)d;
    return atomic_load(&fake_now);
}

typedef struct racer {
    sy_router *r;
    const sy_target *t;
    pthread_barrier_t *go;
} racer;

static void *fail_once(void *p) {
    racer *x = p;
    pthread_barrier_wait(x->go);
    sy_router_report_outcome(x->r, x->t, SY_OUTCOME_CONNECT_FAILURE);
    return NULL;
}

/* The instance route "/" selects, skipping the `nex` ids of `ex`. The
 * target stays valid while *snap is held. */
static void target_of(sy_router *r, sy_match_ctx *ctx, sy_snapshot **snap,
                      const char *const *ex, size_t nex, sy_target *t) {
    static const sy_request init = SY_REQUEST_INIT;
    sy_request req = init;
    req.method = (sy_str){"GET", 3};
    req.path = (sy_str){"/", 1};
    req.host = (sy_str){"h", 1};
    *snap = sy_router_acquire(r);
    sy_match *m = NULL;
    ck_assert_int_eq(sy_snapshot_match(*snap, ctx, &req, &m), 0);
    ck_assert_ptr_nonnull(m);
    sy_error e;
    ck_assert_msg(sy_match_target(m, ex, nex, t, &e) == 0, "%s", e.message);
}

#define INSTANCES 512 /* a wide service: a long ejected-share count */

/* Failures racing on one instance eject it once, for the first ejection's
 * time: the threads that lose the ejection must not lengthen the next. */
START_TEST(racing_failures_eject_once_for_the_base_time) {
    sy_router_options o = SY_ROUTER_OPTIONS_INIT;
    o.clock_ms = clock_cb;
    o.outlier.consecutive_failures = 1;
    o.outlier.base_ejection_ms = BASE_MS;
    o.outlier.max_ejection_ms = 100 * BASE_MS;
    o.outlier.max_ejected_percent = 50;
    sy_router *r;
    ck_assert_int_eq(sy_router_new(&o, &r, NULL), 0);
    ck_assert_int_eq(sy_router_add_source(r, "s", NULL), 0);
    const char *doc = "[{\"id\":\"k\",\"uri\":\"lb://svc\"}]";
    ck_assert_int_eq(sy_router_apply(r, "s", doc, strlen(doc), NULL, NULL), 0);
    sy_match_ctx *ctx;
    ck_assert_int_eq(sy_match_ctx_new(NULL, &ctx, NULL), 0);
    pthread_barrier_t go;
    pthread_barrier_init(&go, NULL, THREADS);
    static char ids[INSTANCES][32];
    static sy_instance in[INSTANCES];
    static const char *others[INSTANCES];
    int rounds = 100 * sy_test_scale();
    uint64_t ejections = 0;
    for (int k = 0; k < rounds; k++) {
        /* fresh instance ids: fresh health records */
        for (int i = 0; i < INSTANCES; i++) {
            snprintf(ids[i], sizeof ids[i], "%c%d-%d", i ? 'b' : 'a', k, i);
            in[i] = (sy_instance){ids[i], "10.0.0.1",     80,   false,
                                  1,      SY_INSTANCE_UP, NULL, 0};
            others[i] = ids[i];
        }
        ck_assert_int_eq(
            sy_router_set_instances(r, "svc", in, INSTANCES, NULL, NULL), 0);
        int64_t t0 = 1000000 + (int64_t)k * 1000 * BASE_MS;
        atomic_store(&fake_now, t0);
        sy_snapshot *snap;
        sy_target t;
        target_of(r, ctx, &snap, others + 1, INSTANCES - 1, &t);
        ck_assert_str_eq(t.instance_id, ids[0]);
        racer x = {r, &t, &go};
        pthread_t th[THREADS];
        for (int i = 0; i < THREADS; i++)
            pthread_create(&th[i], NULL, fail_once, &x);
        for (int i = 0; i < THREADS; i++)
            pthread_join(th[i], NULL);
        sy_metrics m;
        sy_router_metrics(r, &m);
        ck_assert_uint_eq(m.ejections, ++ejections);
        /* after the base time it is back: a success clears it, and one
         * failure (threshold 1) ejects it again */
        atomic_store(&fake_now, t0 + BASE_MS);
        sy_router_report_outcome(r, &t, SY_OUTCOME_SUCCESS);
        sy_router_report_outcome(r, &t, SY_OUTCOME_CONNECT_FAILURE);
        sy_router_metrics(r, &m);
        ck_assert_msg(m.ejections == ++ejections,
                      "round %d: still ejected %d ms after one ejection", k,
                      BASE_MS);
        sy_snapshot_release(snap);
    }
    pthread_barrier_destroy(&go);
    sy_match_ctx_free(ctx);
    sy_router_free(r);
}
END_TEST

int main(void) {
    Suite *s = suite_create("review_race");
    TCase *tc = tcase_create("review_race");
    tcase_add_test(tc, racing_failures_eject_once_for_the_base_time);
    suite_add_tcase(s, tc);
    return sy_test_run(s);
}
