/* test_ejection_race.c - concurrent outcome reports against one instance:
 * one ejection, one backoff step; run under TSan with the concurrency
 * suites. */
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
    sy_outcome outcome;
} racer;

static void *report_once(void *p) {
    racer *x = p;
    pthread_barrier_wait(x->go);
    sy_router_report_outcome(x->r, x->t, x->outcome);
    return NULL;
}

/* THREADS threads report `o` for t's instance at the same moment. */
static void race(sy_router *r, const sy_target *t, pthread_barrier_t *go,
                 sy_outcome o) {
    racer x = {r, t, go, o};
    pthread_t th[THREADS];
    for (int i = 0; i < THREADS; i++)
        pthread_create(&th[i], NULL, report_once, &x);
    for (int i = 0; i < THREADS; i++)
        pthread_join(th[i], NULL);
}

static uint64_t ejections_of(sy_router *r) {
    sy_metrics m;
    sy_router_metrics(r, &m);
    return m.ejections;
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

/* A router with route "/" -> lb://svc, a fake clock and threshold 1. */
typedef struct world {
    sy_router *r;
    sy_match_ctx *ctx;
    pthread_barrier_t go;
    char ids[INSTANCES][32];
    sy_instance in[INSTANCES];
    const char *others[INSTANCES];
    sy_snapshot *snap;
    sy_target t; /* instance 0 of the round */
} world;

static void world_open(world *w) {
    memset(w, 0, sizeof *w);
    sy_router_options o = SY_ROUTER_OPTIONS_INIT;
    o.clock_ms = clock_cb;
    o.outlier.consecutive_failures = 1;
    o.outlier.base_ejection_ms = BASE_MS;
    o.outlier.max_ejection_ms = 100 * BASE_MS;
    o.outlier.max_ejected_percent = 50;
    ck_assert_int_eq(sy_router_new(&o, &w->r, NULL), 0);
    ck_assert_int_eq(sy_router_add_source(w->r, "s", NULL), 0);
    const char *doc = "[{\"id\":\"k\",\"uri\":\"lb://svc\"}]";
    ck_assert_int_eq(sy_router_apply(w->r, "s", doc, strlen(doc), NULL, NULL),
                     0);
    ck_assert_int_eq(sy_match_ctx_new(NULL, &w->ctx, NULL), 0);
    pthread_barrier_init(&w->go, NULL, THREADS);
}

static void world_close(world *w) {
    pthread_barrier_destroy(&w->go);
    sy_match_ctx_free(w->ctx);
    sy_router_free(w->r);
}

/* Round k: fresh instance ids (fresh health records), the clock at the
 * round's start, w->t the target of instance 0 (w->snap held). */
static int64_t world_round(world *w, int k) {
    for (int i = 0; i < INSTANCES; i++) {
        snprintf(w->ids[i], sizeof w->ids[i], "%c%d-%d", i ? 'b' : 'a', k, i);
        w->in[i] = (sy_instance){w->ids[i], "10.0.0.1",     80,   false,
                                 1,         SY_INSTANCE_UP, NULL, 0};
        w->others[i] = w->ids[i];
    }
    ck_assert_int_eq(
        sy_router_set_instances(w->r, "svc", w->in, INSTANCES, NULL, NULL), 0);
    int64_t t0 = 1000000 + (int64_t)k * 1000 * BASE_MS;
    atomic_store(&fake_now, t0);
    target_of(w->r, w->ctx, &w->snap, w->others + 1, INSTANCES - 1, &w->t);
    ck_assert_str_eq(w->t.instance_id, w->ids[0]);
    return t0;
}

/* Failures racing on one instance eject it once, for the first ejection's
 * time: the threads that lose the ejection must not lengthen the next. */
START_TEST(racing_failures_eject_once_for_the_base_time) {
    static world w;
    world_open(&w);
    uint64_t ejections = 0;
    for (int k = 0; k < 100 * sy_test_scale(); k++) {
        int64_t t0 = world_round(&w, k);
        race(w.r, &w.t, &w.go, SY_OUTCOME_CONNECT_FAILURE);
        ck_assert_uint_eq(ejections_of(w.r), ++ejections);
        /* after the base time it is back: a success clears it, and one
         * failure (threshold 1) ejects it again */
        atomic_store(&fake_now, t0 + BASE_MS);
        sy_router_report_outcome(w.r, &w.t, SY_OUTCOME_SUCCESS);
        sy_router_report_outcome(w.r, &w.t, SY_OUTCOME_CONNECT_FAILURE);
        ck_assert_msg(ejections_of(w.r) == ++ejections,
                      "round %d: still ejected %d ms after one ejection", k,
                      BASE_MS);
        sy_snapshot_release(w.snap);
    }
    world_close(&w);
}
END_TEST

/* Successes racing after an ejection ran out take one step off the
 * ejection count, not one per thread. */
START_TEST(racing_successes_shorten_the_next_ejection_once) {
    static world w;
    world_open(&w);
    uint64_t ejections = 0;
    for (int k = 0; k < 100 * sy_test_scale(); k++) {
        int64_t t = world_round(&w, k);
        /* ejected twice in a row: the second for 2 x base */
        sy_router_report_outcome(w.r, &w.t, SY_OUTCOME_CONNECT_FAILURE);
        t += BASE_MS;
        atomic_store(&fake_now, t);
        sy_router_report_outcome(w.r, &w.t, SY_OUTCOME_CONNECT_FAILURE);
        ejections += 2;
        ck_assert_uint_eq(ejections_of(w.r), ejections);
        /* back after 2 x base; racing successes: count 2 -> 1 */
        t += 2 * BASE_MS;
        atomic_store(&fake_now, t);
        race(w.r, &w.t, &w.go, SY_OUTCOME_SUCCESS);
        /* so the next ejection lasts 2 x base again: after base it is
         * still out, and a failure then ejects nothing new */
        sy_router_report_outcome(w.r, &w.t, SY_OUTCOME_CONNECT_FAILURE);
        ck_assert_uint_eq(ejections_of(w.r), ++ejections);
        atomic_store(&fake_now, t + BASE_MS);
        sy_router_report_outcome(w.r, &w.t, SY_OUTCOME_SUCCESS);
        sy_router_report_outcome(w.r, &w.t, SY_OUTCOME_CONNECT_FAILURE);
        ck_assert_msg(ejections_of(w.r) == ejections,
                      "round %d: the ejection after racing successes lasted "
                      "only %d ms",
                      k, BASE_MS);
        sy_snapshot_release(w.snap);
    }
    world_close(&w);
}
END_TEST

int main(void) {
    Suite *s = suite_create("ejection_race");
    TCase *tc = tcase_create("ejection_race");
    tcase_add_test(tc, racing_failures_eject_once_for_the_base_time);
    tcase_add_test(tc, racing_successes_shorten_the_next_ejection_once);
    suite_add_tcase(s, tc);
    return sy_test_run(s);
}
