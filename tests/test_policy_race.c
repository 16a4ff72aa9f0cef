/* test_policy_race.c - the policy store under threads (run under TSan in
 * CI): a bucket hands out exactly its tokens, a half-open breaker exactly
 * its permits, however many threads ask at once, and publishes running
 * beside them lose no state. */
#define _GNU_SOURCE /* MAP_ANONYMOUS, usleep */
#include "policy/breaker.h"
#include "policy/ratelimit.h"
#include "policy/store.h"
#include "testutil.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define T0 1700000000000LL
#define THREADS 4

typedef struct race {
    sy_router *r;
    const char *path;
    int per_thread;
    _Atomic int allowed, permitted;
    _Atomic bool go;
} race;

/* A clock that stands still: a bucket refills nothing during a race,
 * however slowly a sanitizer runs it. */
static int64_t frozen_ms(void *data) {
    (void)data;
    return 1700000000000;
}

static sy_router *router_of(const char *doc) {
    sy_router *r;
    sy_router_options o = SY_ROUTER_OPTIONS_INIT;
    o.clock_ms = frozen_ms;
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
        ck_assert_int_eq(
            sy_router_upsert_route(x->r, "s", doc, (size_t)n, NULL), 0);
    }
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
}

START_TEST(a_bucket_hands_out_exactly_its_tokens_to_racing_threads) {
    race x = {
        .path = "/rl",
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
    ck_assert_int_eq(
        sy_policy_store_breaker(sy_router_policy_store(x.r), "race", &bi, NULL),
        0);
    ck_assert_int_eq(bi.state, SY_BREAKER_OPEN);
    /* every thread asks at T0 + 1 s, past the wait: half-open admits 7,
     * whose failures (recorded at T0) open it again for an hour */
    run(&x);
    ck_assert_int_eq(atomic_load(&x.permitted), 7);
    ck_assert_int_eq(
        sy_policy_store_breaker(sy_router_policy_store(x.r), "race", &bi, NULL),
        0);
    ck_assert_int_eq(bi.state, SY_BREAKER_OPEN);
    sy_router_free(x.r);
}
END_TEST

/* Many keys churning through a small store: slots are taken over by other
 * keys while the old key's takers still race on them. Afterwards, with
 * every bucket full again, each key must get a bucket (remaining >= 0),
 * never a slot wedged on a state its key does not own (fail open, -1). */
#define CHURN_KEYS 509
#define CHURN_THREADS 8
typedef struct churn {
    sy_policy_store *st;
    sy__rl_cfg cfg;
    int id, ops, done;
    _Atomic bool *go;
} churn;

static void *churn_keys(void *arg) {
    churn *c = arg;
    while (!atomic_load(c->go))
        ;
    uint64_t until =
        sy__now_monotonic_us() + 3000000; /* sanitizer builds: fewer */
    int i = 0;
    for (; i < c->ops; i++) {
        if (!(i & 4095) && sy__now_monotonic_us() > until)
            break;
        char k[16];
        int n =
            snprintf(k, sizeof k, "k%d", (i * 7 + c->id * 131) % CHURN_KEYS);
        sy_ratelimit rl;
        sy__rl_take(c->st, &c->cfg,
                    sy__rl_bucket_key(&c->cfg, "r", k, (size_t)n),
                    T0 + (int64_t)(i / 4) * 1000, &rl);
    }
    c->done = i;
    return NULL;
}

START_TEST(slots_taken_over_by_racing_keys_stay_usable) {
    size_t len = sy_policy_store_bytes(64, 16);
    void *mem = aligned_alloc(64, len);
    sy_policy_store *st;
    ck_assert_int_eq(sy_policy_store_init(mem, len, 64, 16, &st, NULL), 0);
    _Atomic bool go = false;
    churn c[CHURN_THREADS];
    pthread_t t[CHURN_THREADS];
    for (int i = 0; i < CHURN_THREADS; i++) {
        c[i] = (churn){.st = st, .id = i, .ops = 1000000, .go = &go};
        c[i].cfg.rate = 1;
        c[i].cfg.burst = 1;
        c[i].cfg.requested = 1;
        c[i].cfg.status = 429;
        sy__rl_shape(&c[i].cfg);
        pthread_create(&t[i], NULL, churn_keys, &c[i]);
    }
    atomic_store(&go, true);
    for (int i = 0; i < CHURN_THREADS; i++)
        pthread_join(t[i], NULL);
    int done = 0;
    for (int i = 0; i < CHURN_THREADS; i++)
        done = c[i].done > done ? c[i].done : done;
    ck_assert_int_gt(done, 10000);
    int wedged = 0;
    for (int i = 0; i < CHURN_KEYS; i++) {
        char k[16];
        int n = snprintf(k, sizeof k, "k%d", i);
        sy_ratelimit rl;
        sy__rl_take(st, &c[0].cfg,
                    sy__rl_bucket_key(&c[0].cfg, "r", k, (size_t)n),
                    T0 + (done / 4 + 10) * 1000LL + i * 2000LL, &rl);
        ck_assert(rl.allowed);
        wedged += rl.remaining < 0;
    }
    ck_assert_int_eq(wedged, 0);
    free(mem);
}
END_TEST

/* A slot claimed for a key whose claimer was switched out between its
 * key CAS and its state's tag (the slot's state still another tag's):
 * takers make the state the key's in its place and hand out exactly the
 * bucket's tokens. They once tried 64 times and failed open, each: a
 * bucket of 777 gave 778 to four racing threads under TSan. */
START_TEST(a_claimers_unfinished_slot_is_finished_by_its_takers) {
    size_t len = sy_policy_store_bytes(64, 16);
    void *mem = aligned_alloc(64, len);
    sy_policy_store *st;
    ck_assert_int_eq(sy_policy_store_init(mem, len, 64, 16, &st, NULL), 0);
    sy__rl_cfg cfg = {.rate = 1, .burst = 5, .requested = 1, .status = 429};
    sy__rl_shape(&cfg);
    uint64_t key = 0;
    for (int i = 0; sy__bucket_tag(key) == 0;
         i++) { /* a tag the empty state lacks */
        char k[16];
        int n = snprintf(k, sizeof k, "k%d", i);
        key = sy__rl_bucket_key(&cfg, "r", k, (size_t)n);
    }
    sy__bucket *b = &sy__store_buckets(st)[sy__store_home(key, st->slots)];
    atomic_store(&b->key, key); /* the claimer's CAS, and no more */
    int allowed = 0, failed_open = 0;
    for (int i = 0; i < 8; i++) {
        sy_ratelimit rl;
        sy__rl_take(st, &cfg, key, T0, &rl);
        allowed += rl.allowed;
        failed_open += rl.remaining < 0;
    }
    ck_assert_int_eq(failed_open, 0);
    ck_assert_int_eq(allowed, 5);
    ck_assert_uint_eq(atomic_load(&b->state) & SY_BUCKET_TAG_MASK,
                      sy__bucket_tag(key));
    free(mem);
}
END_TEST

/* The tag is 4 bits (store format 6): two keys of one tag are common, so
 * a slot handed from one to the other must still change its state word,
 * or an old key's taker that read the new bucket's state would CAS its
 * draw in. A new bucket's time carries 40 bits of its key: the two new
 * states differ, both read as full, and neither is a taken bucket's. */
START_TEST(a_new_buckets_state_differs_between_keys_of_one_tag) {
    sy__bucket b = {0};
    int pairs = 0;
    for (uint64_t i = 1; i < 4096 && pairs < 64; i++) {
        uint64_t k1 = i * 0x9e3779b97f4a7c15ull, k2 = k1 ^ (i << 12);
        if (sy__bucket_tag(k1) != sy__bucket_tag(k2) || !k2)
            continue;
        pairs++;
        atomic_store(&b.key, k1);
        atomic_store(&b.state, sy__bucket_tag(k1) ^ 1); /* another's */
        sy__store_bucket_own(&b, k1);
        uint64_t s1 = atomic_load(&b.state);
        atomic_store(&b.key, k2);
        atomic_store(&b.state, sy__bucket_tag(k2) ^ 1);
        sy__store_bucket_own(&b, k2);
        uint64_t s2 = atomic_load(&b.state);
        ck_assert_uint_eq(s1 & SY_BUCKET_TAG_MASK, sy__bucket_tag(k1));
        ck_assert_uint_ne(s1, s2);
        /* full at any time past the base's first day */
        ck_assert_uint_lt(sy__bucket_time(s1), SY_BUCKET_UNITS_PER_MS * 269000);
        ck_assert_uint_lt(sy__bucket_time(s2), SY_BUCKET_UNITS_PER_MS * 269000);
    }
    ck_assert_int_eq(pairs, 64);
}
END_TEST

/* A breaker cycling closed -> open -> half-open -> closed while threads
 * record into its window: the failures and slow calls it reports never
 * exceed the window (a count cleared beside a racing record once wrapped
 * below zero and opened the breaker on successes). */
typedef struct flip {
    sy_router *r;
    int id;
    _Atomic int *bad;
    _Atomic bool *go;
    /* the calls' clock, one for all threads (a ms a call): with a clock of
     * each thread's own, a thread far ahead opened the breaker at a time
     * the others reached only after as many calls of their own, and on a
     * loaded machine the cycles came so slowly that 60 s gave 38 */
    _Atomic int64_t *clock;
} flip;

static void *flip_breaker(void *arg) {
    flip *x = arg;
    sy_match_ctx *ctx;
    ck_assert_int_eq(sy_match_ctx_new(NULL, &ctx, NULL), 0);
    sy_request req = SY_REQUEST_INIT;
    req.method = (sy_str){"GET", 3};
    req.path = (sy_str){"/cb", 3};
    while (!atomic_load(x->go))
        ;
    /* 400,000 calls or 3 s of them, whichever comes first, but on until
     * the breaker has cycled (the test's first check) when a loaded
     * machine, a sanitizer or the threads' interleaving gave few cycles in
     * them (CI once saw 45 in 400,000 calls a thread): 60 s at most */
    uint64_t t0 = sy__now_monotonic_us();
    for (int i = 0;; i++) {
        if (!(i & 1023) &&
            (i >= 400000 || sy__now_monotonic_us() > t0 + 3000000)) {
            sy_policy_stats ps;
            sy_policy_store_stats(sy_router_policy_store(x->r), &ps);
            if (ps.breaker_closed > 100 ||
                sy__now_monotonic_us() > t0 + 60000000)
                break;
        }
        sy_snapshot *s = sy_router_acquire(x->r);
        sy_match *m;
        ck_assert_int_eq(sy_snapshot_match(s, ctx, &req, &m), 0);
        int64_t now = T0 + atomic_fetch_add(x->clock, 1);
        sy_breaker_permit p;
        sy_match_breaker_acquire(m, now, &p, NULL);
        if (p.permitted) {
            bool fail = (i + x->id) % 3 == 0;
            sy_breaker_record(
                &p, fail ? SY_OUTCOME_CONNECT_FAILURE : SY_OUTCOME_SUCCESS, 200,
                i % 5 == 0 ? 50 : 1, now);
        }
        sy_breaker_info bi;
        if (!sy_policy_store_breaker(sy_router_policy_store(x->r), "flip", &bi,
                                     NULL) &&
            (bi.failures > 4 || bi.slow > 4))
            atomic_store(x->bad,
                         (int)(bi.failures > bi.slow ? bi.failures : bi.slow));
        sy_snapshot_release(s);
    }
    sy_match_ctx_free(ctx);
    return NULL;
}

START_TEST(a_cycling_breaker_counts_stay_within_its_window) {
    sy_router *r = router_of(
        "[{\"id\":\"cb\",\"uri\":\"http://b\",\"predicates\":"
        "[\"Path=/cb\"],\"filters\":[{\"name\":\"CircuitBreaker\","
        "\"args\":{\"name\":\"flip\",\"slidingWindowSize\":4,"
        "\"minimumNumberOfCalls\":4,\"failureRateThreshold\":50,"
        "\"slowCallDurationThreshold\":\"10ms\",\"slowCallRateThreshold\":"
        "50,\"waitDurationInOpenState\":1,"
        "\"permittedNumberOfCallsInHalfOpenState\":1}}]}]");
    _Atomic int bad = 0;
    _Atomic bool go = false;
    _Atomic int64_t clock = 0;
    flip f[THREADS];
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++) {
        f[i] = (flip){.r = r, .id = i, .bad = &bad, .go = &go, .clock = &clock};
        pthread_create(&t[i], NULL, flip_breaker, &f[i]);
    }
    atomic_store(&go, true);
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    sy_policy_stats ps;
    sy_policy_store_stats(sy_router_policy_store(r), &ps);
    ck_assert_uint_gt(ps.breaker_closed, 100); /* it did cycle */
    int seen = atomic_load(&bad);
    ck_assert_msg(seen == 0, "a count of %u in a window of 4", (unsigned)seen);
    sy_router_free(r);
}
END_TEST

/* Breaker entries freed and taken by new names while readers ask and
 * record through the routes that use them: a 16-entry store serves 120
 * names in turn, no reader ever finds its route's entry gone (store_full
 * stays 0), no new name inherits a state, and an open breaker that stays
 * published stays open however its neighbours' entries churn. */
typedef struct reuse {
    sy_router *r;
    _Atomic bool *stop;
    _Atomic int *bad, *started;
    _Atomic int asked;
} reuse;

static void *ask_churned(void *arg) {
    reuse *x = arg;
    sy_match_ctx *ctx;
    if (sy_match_ctx_new(NULL, &ctx, NULL))
        abort();
    sy_request req = SY_REQUEST_INIT;
    req.method = (sy_str){"GET", 3};
    while (!atomic_load(x->stop)) {
        sy_snapshot *s = sy_router_acquire(x->r);
        for (int k = 0; k < 2; k++) {
            req.path = k ? (sy_str){"/o", 2} : (sy_str){"/c", 2};
            sy_match *m = NULL;
            if (sy_snapshot_match(s, ctx, &req, &m) || !m) {
                atomic_fetch_add(x->bad, 1000);
                continue;
            }
            sy_breaker_permit p;
            sy_match_breaker_acquire(m, T0, &p, NULL);
            /* /c: fresh names, only successes: always closed; /o: open */
            if (!p.breaker || p.permitted != !k)
                atomic_fetch_add(x->bad, 1);
            if (p.permitted)
                sy_breaker_record(&p, SY_OUTCOME_SUCCESS, 200, 1, T0);
        }
        if (!atomic_fetch_add(&x->asked, 1))
            atomic_fetch_add(x->started, 1);
        sy_snapshot_release(s);
    }
    sy_match_ctx_free(ctx);
    return NULL;
}

START_TEST(freed_breaker_entries_are_reused_beside_readers) {
    sy_router *r;
    sy_router_options o = SY_ROUTER_OPTIONS_INIT;
    o.clock_ms = frozen_ms;
    o.policy_breakers = 16;
    ck_assert_int_eq(sy_router_new(&o, &r, NULL), 0);
    ck_assert_int_eq(sy_router_add_source(r, "s", NULL), 0);
    const char *open = "{\"id\":\"o\",\"uri\":\"http://b\",\"predicates\":"
                       "[\"Path=/o\"],\"filters\":[{\"name\":"
                       "\"CircuitBreaker\",\"args\":{\"name\":\"opened\","
                       "\"slidingWindowSize\":1,\"minimumNumberOfCalls\":1,"
                       "\"waitDurationInOpenState\":\"1h\"}}]}";
    ck_assert_int_eq(sy_router_upsert_route(r, "s", open, strlen(open), NULL),
                     0);
    sy_match_ctx *ctx;
    ck_assert_int_eq(sy_match_ctx_new(NULL, &ctx, NULL), 0);
    sy_request req = SY_REQUEST_INIT;
    req.method = (sy_str){"GET", 3};
    req.path = (sy_str){"/o", 2};
    sy_snapshot *s = sy_router_acquire(r);
    sy_match *m;
    ck_assert_int_eq(sy_snapshot_match(s, ctx, &req, &m), 0);
    sy_breaker_permit p;
    sy_match_breaker_acquire(m, T0, &p, NULL);
    sy_breaker_record(&p, SY_OUTCOME_CONNECT_FAILURE, 0, 1, T0);
    sy_snapshot_release(s);
    sy_match_ctx_free(ctx);
    _Atomic bool stop = false;
    _Atomic int bad = 0, started = 0;
    reuse x[THREADS];
    pthread_t t[THREADS];
    char doc[512];
    int n = snprintf(doc, sizeof doc,
                     "{\"id\":\"c\",\"uri\":\"http://b\",\"predicates\":"
                     "[\"Path=/c\"],\"filters\":[\"CircuitBreaker=n0\"]}");
    ck_assert_int_eq(sy_router_upsert_route(r, "s", doc, (size_t)n, NULL), 0);
    for (int i = 0; i < THREADS; i++) {
        x[i] = (reuse){.r = r, .stop = &stop, .bad = &bad, .started = &started};
        pthread_create(&t[i], NULL, ask_churned, &x[i]);
    }
    while (atomic_load(&started) < THREADS)
        sched_yield();
    /* a held snapshot keeps the routes removed since it was taken (and
     * their entries): after each publish the readers move on (two rounds
     * each: the second began after it), so a commit finds the entries of
     * the names before the last one free */
    for (int i = 1; i <= 120; i++) {
        int seen[THREADS];
        for (int k = 0; k < THREADS; k++)
            seen[k] = atomic_load(&x[k].asked);
        for (int k = 0; k < THREADS; k++)
            while (atomic_load(&x[k].asked) < seen[k] + 2)
                sched_yield();
        n = snprintf(doc, sizeof doc,
                     "{\"id\":\"c\",\"uri\":\"http://b\",\"predicates\":"
                     "[\"Path=/c\"],\"filters\":[{\"name\":"
                     "\"CircuitBreaker\",\"args\":{\"name\":\"n%d\","
                     "\"slidingWindowSize\":1,\"minimumNumberOfCalls\":1}}]}",
                     i);
        sy_error e;
        ck_assert_msg(sy_router_upsert_route(r, "s", doc, (size_t)n, &e) == 0,
                      "publish %d: %s: %s", i, e.path, e.message);
    }
    atomic_store(&stop, true);
    int asked = 0;
    for (int i = 0; i < THREADS; i++) {
        pthread_join(t[i], NULL);
        asked += atomic_load(&x[i].asked);
    }
    ck_assert_int_gt(asked, THREADS);
    ck_assert_int_eq(atomic_load(&bad), 0);
    sy_policy_stats ps;
    sy_policy_store_stats(sy_router_policy_store(r), &ps);
    ck_assert_uint_eq(ps.store_full, 0);
    ck_assert_uint_le(ps.breakers_used, 3);
    sy_router_free(r);
}
END_TEST

/* Two routers on one store (two workers), on two threads, each giving
 * breaker x its own settings (a 25%, b 100%) in a route it publishes and
 * takes away again: every commit passes (another router's settings are
 * told, not refused), the claims of the settings under the store's lock
 * race cleanly (TSan), and with both routers' routes gone and the
 * routers freed the store holds no entry, no bit. */
typedef struct settings_race {
    sy_router *me;
    const char *doc;
    _Atomic int *failed;
} settings_race;

#define SR_ROUTE(ID, RATE)                                                     \
    "[{\"id\":\"" ID "\",\"uri\":\"http://b\",\"filters\":[{\"name\":"         \
    "\"CircuitBreaker\",\"args\":{\"name\":\"x\",\"slidingWindowSize\":4,"     \
    "\"minimumNumberOfCalls\":4,\"failureRateThreshold\":" RATE "}}]},"        \
    "{\"id\":\"n\",\"uri\":\"http://c\"}]"

static void *race_settings(void *arg) {
    settings_race *x = arg;
    static const char none[] = "[{\"id\":\"n\",\"uri\":\"http://c\"}]";
    for (int i = 0; i < 300; i++) {
        *x->failed += sy_router_apply(x->me, "s", x->doc, strlen(x->doc), NULL,
                                      NULL) != 0;
        *x->failed +=
            sy_router_apply(x->me, "s", none, strlen(none), NULL, NULL) != 0;
        sy_router_reclaim(x->me);
    }
    return NULL;
}

START_TEST(routers_racing_to_give_a_breaker_settings_keep_the_store_whole) {
    size_t len = sy_policy_store_bytes(64, 16);
    void *mem = aligned_alloc(64, len);
    sy_policy_store *st;
    ck_assert_int_eq(sy_policy_store_init(mem, len, 64, 16, &st, NULL), 0);
    sy_router *r[2];
    sy_router_options o = SY_ROUTER_OPTIONS_INIT;
    o.policy_store = st;
    for (int k = 0; k < 2; k++) {
        ck_assert_int_eq(sy_router_new(&o, &r[k], NULL), 0);
        ck_assert_int_eq(sy_router_add_source(r[k], "s", NULL), 0);
    }
    _Atomic int failed = 0;
    settings_race x[2] = {{r[0], SR_ROUTE("a", "25"), &failed},
                          {r[1], SR_ROUTE("b", "100"), &failed}};
    pthread_t t[2];
    for (int k = 0; k < 2; k++)
        pthread_create(&t[k], NULL, race_settings, &x[k]);
    for (int k = 0; k < 2; k++)
        pthread_join(t[k], NULL);
    ck_assert_int_eq(atomic_load(&failed), 0);
    /* no route names x: no entry is left */
    ck_assert_ptr_null(sy__store_breaker(st, sy__brk_key("x", 1)));
    for (int k = 0; k < 2; k++)
        sy_router_free(r[k]);
    sy_policy_stats ps;
    sy_policy_store_stats(st, &ps);
    ck_assert_uint_eq(ps.breakers_used, 0);
    free(mem);
}
END_TEST

/* ---- the store's writer lock (breaker claims and frees) ---- */

static uint64_t mono_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

typedef struct claimer {
    sy_policy_store *st;
    _Atomic bool done;
} claimer;

static void *claim_one(void *arg) {
    claimer *c = arg;
    ck_assert_ptr_nonnull(sy__store_breaker_hold(c->st, 42, 0));
    atomic_store(&c->done, true);
    return NULL;
}

/* A holder that is slow (preempted, stopped, a loaded machine) keeps the
 * lock however long it holds it: a claim waits for it. The lock once
 * passed a holder after a second, so two writers changed the counts at
 * once and the first one's unlock freed the second one's lock. */
START_TEST(a_slow_holder_keeps_the_breaker_lock) {
    static _Alignas(8) char mem[65536];
    sy_policy_store *st;
    ck_assert_int_eq(sy_policy_store_init(mem, sizeof mem, 64, 16, &st, NULL),
                     0);
    sy__store_brk_lock(st);
    claimer c = {.st = st};
    pthread_t t;
    pthread_create(&t, NULL, claim_one, &c);
    uint64_t t0 = mono_ms();
    while (mono_ms() - t0 < 1500) {
        ck_assert_msg(!atomic_load(&c.done),
                      "a claim passed a live holder after %llu ms",
                      (unsigned long long)(mono_ms() - t0));
        usleep(10000);
    }
    sy__store_brk_unlock(st);
    pthread_join(t, NULL);
    ck_assert(atomic_load(&c.done));
    sy__store_breaker_drop(st, 42, 0);
}
END_TEST

/* A store of 64 slots and 16 breakers in memory a forked child shares
 * (unmapped by the caller: munmap(st, *len)). */
static sy_policy_store *shared_store(size_t *len) {
    *len = sy_policy_store_bytes(64, 16);
    void *mem = mmap(NULL, *len, PROT_READ | PROT_WRITE,
                     MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    ck_assert_ptr_ne(mem, MAP_FAILED);
    sy_policy_store *st;
    ck_assert_int_eq(sy_policy_store_init(mem, *len, 64, 16, &st, NULL), 0);
    return st;
}

/* A process (an nginx worker) killed while it holds the lock blocks no
 * other: the next claim sees the holder is gone and takes the lock at
 * once. */
START_TEST(a_dead_holders_breaker_lock_is_passed) {
    size_t len;
    sy_policy_store *st = shared_store(&len);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        sy__store_brk_lock(st);
        _exit(0); /* dies holding it */
    }
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_int_ne(atomic_load(&st->brk_lock), 0);
    uint64_t t0 = mono_ms();
    ck_assert_ptr_nonnull(sy__store_breaker_hold(st, 42, 0));
    ck_assert_uint_lt(mono_ms() - t0, 500);
    sy__store_breaker_drop(st, 42, 0);
    sy_policy_stats ps;
    sy_policy_store_stats(st, &ps);
    ck_assert_uint_eq(ps.breakers_used, 0);
    ck_assert_uint_eq(atomic_load(&st->brk_lock), 0);
    munmap(st, len);
}
END_TEST

/* Breaker documents of n routes r0.. naming <prefix>0.. */
static void apply_breakers(sy_router *r, const char *prefix, int n) {
    char doc[4096];
    size_t o = (size_t)snprintf(doc, sizeof doc, "[");
    for (int i = 0; i < n; i++)
        o += (size_t)snprintf(doc + o, sizeof doc - o,
                              "%s{\"id\":\"r%d\",\"uri\":\"http://b\","
                              "\"filters\":[\"CircuitBreaker=%s%d\"]}",
                              i ? "," : "", i, prefix, i);
    snprintf(doc + o, sizeof doc - o, "]");
    sy_error e;
    ck_assert_msg(sy_router_apply(r, "s", doc, strlen(doc), NULL, &e) == 0,
                  "%s: %s", e.path, e.message);
}

static size_t used_in(sy_policy_store *st) {
    sy_policy_stats ps;
    sy_policy_store_stats(st, &ps);
    return (size_t)ps.breakers_used;
}

/* A process killed with live routes (an nginx worker) never releases
 * them: the entries its routes named once stayed claimed for the store's
 * life, and a store shared by workers that die now and then filled up.
 * Its router's owner slot names its process: a claim finding the store
 * full, and the next router made (the new worker), reap it. */
START_TEST(a_killed_processes_breaker_entries_are_reaped) {
    size_t len;
    sy_policy_store *st = shared_store(&len);
    sy_router_options o = SY_ROUTER_OPTIONS_INIT;
    o.policy_store = st;
    sy_router *r;
    ck_assert_int_eq(sy_router_new(&o, &r, NULL), 0);
    ck_assert_int_eq(sy_router_add_source(r, "s", NULL), 0);
    for (int round = 0; round < 2; round++) {
        if (round) { /* r gives its entries back: the child's fill all */
            ck_assert_int_eq(sy_router_apply(r, "s", "[]", 2, NULL, NULL), 0);
            sy_router_reclaim(r);
            ck_assert_uint_eq(used_in(st), 0);
        }
        pid_t pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
            sy_router *c;
            if (sy_router_new(&o, &c, NULL) ||
                sy_router_add_source(c, "s", NULL))
                _exit(1);
            apply_breakers(c, round ? "late" : "gone", 16);
            _exit(0); /* killed: nothing released */
        }
        int status;
        ck_assert_int_eq(waitpid(pid, &status, 0), pid);
        ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        ck_assert_uint_eq(used_in(st), 16);
        if (round == 0) {
            /* a dry run sees the room a reap makes (claims nothing) */
            sy_change_set *cs;
            ck_assert_int_eq(sy_change_set_new(r, &cs, NULL), 0);
            const char *one = "[{\"id\":\"q\",\"uri\":\"http://b\","
                              "\"filters\":[\"CircuitBreaker=q\"]}]";
            ck_assert_int_eq(
                sy_change_set_apply(cs, "s", one, strlen(one), NULL), 0);
            sy_error e;
            ck_assert_msg(sy_router_check(r, cs, NULL, &e) == 0, "%s: %s",
                          e.path, e.message);
            sy_change_set_free(cs);
            /* the survivor's claim finds the store full: reaped */
            apply_breakers(r, "kept", 16);
            ck_assert_uint_eq(used_in(st), 16);
        } else {
            /* a new router (the respawned worker) reaps at its start */
            sy_router *n;
            ck_assert_int_eq(sy_router_new(&o, &n, NULL), 0);
            ck_assert_uint_eq(used_in(st), 0);
            sy_router_free(n);
        }
    }
    sy_router_free(r);
    ck_assert_uint_eq(used_in(st), 0);
    munmap(st, len);
}
END_TEST

/* A process killed inside a free (its router's bit cleared, the entry not
 * yet freed, the lock still held): the lock is passed and the next reap
 * frees the entry no router uses, rather than keeping it for good. */
START_TEST(an_entry_a_dying_free_left_is_reaped) {
    size_t len;
    sy_policy_store *st = shared_store(&len);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        int o = sy__store_owner_take(st);
        sy__brk *b = sy__store_breaker_hold(st, 42, o);
        if (o < 0 || !b)
            _exit(1);
        sy__store_brk_lock(st); /* sy__store_breaker_drop, cut short */
        atomic_fetch_and(&sy__store_users(st, b)[o / 64], ~(1ull << (o % 64)));
        _exit(0);
    }
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    ck_assert_uint_eq(used_in(st), 1);
    sy_router_options o = SY_ROUTER_OPTIONS_INIT;
    o.policy_store = st;
    sy_router *r;
    ck_assert_int_eq(sy_router_new(&o, &r, NULL), 0); /* reaps */
    ck_assert_uint_eq(used_in(st), 0);
    sy_router_free(r);
    munmap(st, len);
}
END_TEST

/* The same with the dead holder not yet reaped by its parent (a zombie:
 * kill(pid, 0) still finds it): the lock is passed all the same, not
 * only once the parent waits for it (a host that never does would have
 * stalled every claim for good). */
START_TEST(a_zombie_holders_breaker_lock_is_passed) {
    size_t len;
    sy_policy_store *st = shared_store(&len);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        sy__store_brk_lock(st);
        _exit(0);
    }
    /* the child is a zombie once its exit is seen (not waited for) */
    siginfo_t si;
    memset(&si, 0, sizeof si);
    ck_assert_int_eq(waitid(P_PID, (id_t)pid, &si, WEXITED | WNOWAIT), 0);
    claimer c = {.st = st};
    pthread_t t;
    pthread_create(&t, NULL, claim_one, &c);
    uint64_t t0 = mono_ms();
    /* (the claimer passes the lock within a few yields; 10 s only bounds
     * the wait for a thread a loaded machine, TSan, may run late) */
    while (!atomic_load(&c.done) && mono_ms() - t0 < 10000)
        usleep(10000);
    bool passed = atomic_load(&c.done);
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid); /* lets a stuck one go */
    pthread_join(t, NULL);
    ck_assert_msg(passed, "a zombie's lock was held for 10 s");
    sy__store_breaker_drop(st, 42, 0);
    munmap(st, len);
}
END_TEST

int main(void) {
    Suite *s = suite_create("policy_race");
    TCase *tc = tcase_create("policy_race");
    /* threads racing on a loaded machine (and under TSan): more than
     * check's 4 s a test */
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, a_bucket_hands_out_exactly_its_tokens_to_racing_threads);
    tcase_add_test(tc, a_half_open_breaker_admits_exactly_its_permits);
    tcase_add_test(tc, slots_taken_over_by_racing_keys_stay_usable);
    tcase_add_test(tc, a_claimers_unfinished_slot_is_finished_by_its_takers);
    tcase_add_test(tc, a_new_buckets_state_differs_between_keys_of_one_tag);
    tcase_add_test(tc, a_cycling_breaker_counts_stay_within_its_window);
    tcase_add_test(tc, freed_breaker_entries_are_reused_beside_readers);
    tcase_add_test(
        tc, routers_racing_to_give_a_breaker_settings_keep_the_store_whole);
    tcase_add_test(tc, a_slow_holder_keeps_the_breaker_lock);
    tcase_add_test(tc, a_dead_holders_breaker_lock_is_passed);
    tcase_add_test(tc, a_zombie_holders_breaker_lock_is_passed);
    tcase_add_test(tc, a_killed_processes_breaker_entries_are_reaped);
    tcase_add_test(tc, an_entry_a_dying_free_left_is_reaped);
    suite_add_tcase(s, tc);
    return sy_test_run(s);
}
