/* test_contention.c - promises that must hold however threads interleave,
 * run under TSan with the concurrency suites: a change set
 * committed by many threads is published once; the ejection cap holds
 * under concurrent outcome reports. */
#include "testutil.h"

#include "switchyard.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#define THREADS 8

static _Atomic long events;
static void count_event(void *d, const sy_report *rep) {
    (void)d;
    (void)rep;
    atomic_fetch_add(&events, 1);
}

typedef struct committer {
    sy_router *r;
    sy_change_set *cs;
    pthread_barrier_t *go;
    int rc;
} committer;

static void *commit_once(void *p) {
    committer *x = p;
    pthread_barrier_wait(x->go);
    x->rc = sy_router_commit(x->r, x->cs, NULL, NULL);
    return NULL;
}

static uint64_t generation_of(sy_router *r) {
    sy_snapshot *s = sy_router_acquire(r);
    uint64_t g = sy_snapshot_generation(s);
    sy_snapshot_release(s);
    return g;
}

/* THREADS threads commit one change set at the same moment: exactly one
 * publishes (one generation, one event per change); the others are told
 * it was committed already. */
START_TEST(a_change_set_committed_by_many_threads_is_published_once) {
    sy_router_options o = SY_ROUTER_OPTIONS_INIT;
    o.on_event = count_event;
    sy_router *r;
    ck_assert_int_eq(sy_router_new(&o, &r, NULL), 0);
    ck_assert_int_eq(sy_router_add_source(r, "s", NULL), 0);
    pthread_barrier_t go;
    pthread_barrier_init(&go, NULL, THREADS);
    for (int k = 0; k < 200 * sy_test_scale(); k++) {
        char route[96];
        int len = snprintf(route, sizeof route,
                           "{\"id\":\"r%d\",\"path\":\"/p%d\",\"uri\":"
                           "\"http://h:1\"}",
                           k, k);
        sy_change_set *cs;
        ck_assert_int_eq(sy_change_set_new(r, &cs, NULL), 0);
        ck_assert_int_eq(
            sy_change_set_upsert_route(cs, "s", route, (size_t)len, NULL), 0);
        char prev[16];
        snprintf(prev, sizeof prev, "r%d", k - 1);
        if (k)
            ck_assert_int_eq(sy_change_set_remove_route(cs, prev, NULL), 0);
        uint64_t g0 = generation_of(r);
        atomic_store(&events, 0);
        committer x[THREADS];
        pthread_t th[THREADS];
        for (int i = 0; i < THREADS; i++) {
            x[i] = (committer){r, cs, &go, 1};
            pthread_create(&th[i], NULL, commit_once, &x[i]);
        }
        int ok = 0, refused = 0;
        for (int i = 0; i < THREADS; i++) {
            pthread_join(th[i], NULL);
            ok += x[i].rc == 0;
            refused += x[i].rc == SY_EINVAL;
        }
        ck_assert_msg(ok == 1 && refused == THREADS - 1,
                      "round %d: %d commits published, %d refused", k, ok,
                      refused);
        ck_assert_uint_eq(generation_of(r), g0 + 1);
        ck_assert_int_eq(atomic_load(&events), k ? 2 : 1);
        sy_change_set_free(cs);
    }
    pthread_barrier_destroy(&go);
    sy_router_free(r);
}
END_TEST

/* ---- the ejection cap ---- */

#define INSTANCES 512 /* a wide service: a long ejected-share count */
#define CAP (INSTANCES / 2)

static int64_t fixed_now(void *d) {
    (void)d;
    return 1000000;
}

static uint64_t ejections_of(sy_router *r) {
    sy_metrics m;
    sy_router_metrics(r, &m);
    return m.ejections;
}

typedef struct reporter {
    sy_router *r;
    const sy_target *t;
    pthread_barrier_t *go;
} reporter;

static void *fail_once(void *p) {
    reporter *x = p;
    pthread_barrier_wait(x->go);
    sy_router_report_outcome(x->r, x->t, SY_OUTCOME_CONNECT_FAILURE);
    return NULL;
}

/* Threshold 1, cap 50 % of 512: 255 instances ejected one by one, then
 * THREADS threads fail THREADS other instances at once. Exactly one more
 * may go (before, each counted 255 and ejected its own). */
START_TEST(concurrent_failures_never_eject_past_the_cap) {
    sy_router_options o = SY_ROUTER_OPTIONS_INIT;
    o.clock_ms = fixed_now;
    o.outlier.consecutive_failures = 1;
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
    static sy_target t[INSTANCES];
    uint64_t ejected = 0;
    for (int k = 0; k < 100 * sy_test_scale(); k++) {
        /* fresh ids: fresh health records */
        for (int i = 0; i < INSTANCES; i++) {
            snprintf(ids[i], sizeof ids[i], "r%d-%d", k, i);
            in[i] = (sy_instance){ids[i], "10.0.0.1",     80,   false,
                                  1,      SY_INSTANCE_UP, NULL, 0};
        }
        ck_assert_int_eq(
            sy_router_set_instances(r, "svc", in, INSTANCES, NULL, NULL), 0);
        /* round robin over equal weights: every instance's target once */
        sy_snapshot *snap = sy_router_acquire(r);
        sy_request req = SY_REQUEST_INIT;
        req.method = (sy_str){"GET", 3};
        req.path = (sy_str){"/", 1};
        req.host = (sy_str){"h", 1};
        sy_match *m = NULL;
        ck_assert_int_eq(sy_snapshot_match(snap, ctx, &req, &m), 0);
        ck_assert_ptr_nonnull(m);
        for (int i = 0; i < INSTANCES; i++)
            ck_assert_int_eq(sy_match_target(m, NULL, 0, &t[i], NULL), 0);
        for (int i = 1; i < INSTANCES; i++)
            ck_assert_str_ne(t[i].instance_id, t[i - 1].instance_id);
        for (int i = 0; i < CAP - 1; i++)
            sy_router_report_outcome(r, &t[i], SY_OUTCOME_CONNECT_FAILURE);
        ejected += CAP - 1;
        ck_assert_uint_eq(ejections_of(r), ejected);
        reporter x[THREADS];
        pthread_t th[THREADS];
        for (int i = 0; i < THREADS; i++) {
            x[i] = (reporter){r, &t[CAP - 1 + i], &go};
            pthread_create(&th[i], NULL, fail_once, &x[i]);
        }
        for (int i = 0; i < THREADS; i++)
            pthread_join(th[i], NULL);
        ejected++;
        ck_assert_msg(ejections_of(r) == ejected,
                      "round %d: %llu ejected at once, the cap lets 1", k,
                      (unsigned long long)(ejections_of(r) - ejected + 1));
        sy_snapshot_release(snap);
    }
    pthread_barrier_destroy(&go);
    sy_match_ctx_free(ctx);
    sy_router_free(r);
}
END_TEST

int main(void) {
    Suite *s = suite_create("contention");
    TCase *tc = tcase_create("contention");
    tcase_add_test(tc, a_change_set_committed_by_many_threads_is_published_once);
    tcase_add_test(tc, concurrent_failures_never_eject_past_the_cap);
    suite_add_tcase(s, tc);
    return sy_test_run(s);
}
