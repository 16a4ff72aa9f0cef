/* test_policy_race.c - the policy store under threads (run under TSan in
 * CI): a bucket hands out exactly its tokens, a half-open breaker exactly
 * its permits, however many threads ask at once, and publishes running
 * beside them lose no state. */
#include "testutil.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#define T0 1700000000000LL
#define THREADS 4

typedef struct race {
    sy_router *r;
    const char *path;
    int per_thread;
    _Atomic int allowed, permitted;
    _Atomic bool go;
} race;

static sy_router *router_of(const char *doc) {
    sy_router *r;
    sy_router_options o = SY_ROUTER_OPTIONS_INIT;
    ck_assert_int_eq(sy_router_new(&o, &r, NULL), 0);
    ck_assert_int_eq(sy_router_add_source(r, "s", NULL), 0);
    ck_assert_int_eq(sy_router_apply(r, "s", doc, strlen(doc), NULL, NULL), 0);
    return r;
}

static void *take_tokens(void *arg) {
    race *x = arg;
    sy_match_ctx *ctx;
    ck_assert_int_eq(sy_match_ctx_new(NULL, &ctx, NULL), 0);
    sy_request req = SY_REQUEST_INIT;
    req.method = (sy_str){"GET", 3};
    req.path = (sy_str){x->path, strlen(x->path)};
    req.remote_addr = (sy_str){"10.0.0.9", 8};
    while (!atomic_load(&x->go))
        ;
    for (int i = 0; i < x->per_thread; i++) {
        sy_snapshot *s = sy_router_acquire(x->r);
        sy_match *m;
        ck_assert_int_eq(sy_snapshot_match(s, ctx, &req, &m), 0);
        ck_assert_ptr_nonnull(m);
        sy_ratelimit rl;
        sy_match_ratelimit(m, T0, &rl, NULL);
        atomic_fetch_add(&x->allowed, rl.allowed);
        sy_breaker_permit p;
        sy_match_breaker_acquire(m, T0 + 1000, &p, NULL);
        if (p.breaker && p.permitted) {
            atomic_fetch_add(&x->permitted, 1);
            sy_breaker_record(&p, SY_OUTCOME_CONNECT_FAILURE, 0, 1, T0);
        }
        sy_snapshot_release(s);
    }
    sy_match_ctx_free(ctx);
    return NULL;
}

static void run(race *x) {
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++)
        pthread_create(&t[i], NULL, take_tokens, x);
    atomic_store(&x->go, true);
    /* publishes beside the readers: other routes come and go */
    for (int i = 0; i < 20; i++) {
        char doc[128];
        int n = snprintf(doc, sizeof doc,
                         "{\"id\":\"o%d\",\"uri\":\"http://c\"}", i);
        ck_assert_int_eq(sy_router_upsert_route(x->r, "s", doc, (size_t)n,
                                                NULL),
                         0);
    }
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
}

START_TEST(a_bucket_hands_out_exactly_its_tokens_to_racing_threads) {
    race x = {.path = "/rl",
              .per_thread = 500,
              .r = router_of(
                  "[{\"id\":\"rl\",\"uri\":\"http://b\",\"predicates\":"
                  "[\"Path=/rl\"],\"filters\":[{\"name\":"
                  "\"RequestRateLimiter\",\"args\":{\"redis-rate-limiter."
                  "replenishRate\":\"1\",\"redis-rate-limiter.burstCapacity\":"
                  "\"777\",\"key-resolver\":\"#{@remoteAddrKeyResolver}\"}}]}]")};
    run(&x);
    ck_assert_int_eq(atomic_load(&x.allowed), 777);
    sy_router_free(x.r);
}
END_TEST

START_TEST(a_half_open_breaker_admits_exactly_its_permits) {
    race x = {.path = "/cb",
              .per_thread = 300,
              .r = router_of(
                  "[{\"id\":\"cb\",\"uri\":\"http://b\",\"predicates\":"
                  "[\"Path=/cb\"],\"filters\":[{\"name\":\"CircuitBreaker\","
                  "\"args\":{\"name\":\"race\",\"slidingWindowSize\":5,"
                  "\"minimumNumberOfCalls\":5,\"waitDurationInOpenState\":"
                  "\"1h\",\"permittedNumberOfCallsInHalfOpenState\":7}}]}]")};
    /* open it with five failures an hour before T0 */
    sy_match_ctx *ctx;
    ck_assert_int_eq(sy_match_ctx_new(NULL, &ctx, NULL), 0);
    sy_request req = SY_REQUEST_INIT;
    req.method = (sy_str){"GET", 3};
    req.path = (sy_str){"/cb", 3};
    sy_snapshot *s = sy_router_acquire(x.r);
    sy_match *m;
    ck_assert_int_eq(sy_snapshot_match(s, ctx, &req, &m), 0);
    for (int i = 0; i < 5; i++) {
        sy_breaker_permit p;
        sy_match_breaker_acquire(m, T0 - 3600000, &p, NULL);
        sy_breaker_record(&p, SY_OUTCOME_TIMEOUT, 0, 1, T0 - 3600000);
    }
    sy_snapshot_release(s);
    sy_match_ctx_free(ctx);
    sy_breaker_info bi;
    ck_assert_int_eq(sy_policy_store_breaker(sy_router_policy_store(x.r),
                                             "race", &bi, NULL),
                     0);
    ck_assert_int_eq(bi.state, SY_BREAKER_OPEN);
    /* every thread asks at T0 + 1 s, past the wait: half-open admits 7,
     * whose failures (recorded at T0) open it again for an hour */
    run(&x);
    ck_assert_int_eq(atomic_load(&x.permitted), 7);
    ck_assert_int_eq(sy_policy_store_breaker(sy_router_policy_store(x.r),
                                             "race", &bi, NULL),
                     0);
    ck_assert_int_eq(bi.state, SY_BREAKER_OPEN);
    sy_router_free(x.r);
}
END_TEST

int main(void) {
    Suite *s = suite_create("policy_race");
    TCase *tc = tcase_create("policy_race");
    tcase_add_test(tc, a_bucket_hands_out_exactly_its_tokens_to_racing_threads);
    tcase_add_test(tc, a_half_open_breaker_admits_exactly_its_permits);
    suite_add_tcase(s, tc);
    return sy_test_run(s);
}
