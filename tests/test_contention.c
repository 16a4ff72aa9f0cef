/* test_contention.c - promises that must hold however threads interleave
 * (issue 24), run under TSan with the concurrency suites: a change set
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

int main(void) {
    Suite *s = suite_create("contention");
    TCase *tc = tcase_create("contention");
    tcase_add_test(tc, a_change_set_committed_by_many_threads_is_published_once);
    suite_add_tcase(s, tc);
    return sy_test_run(s);
}
