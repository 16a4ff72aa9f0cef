/*
 * bench_policy.c - the policy/ cases of switchyard-bench: the per-request
 * cost of a local rate-limit check and of a breaker check (acquire and
 * record), in cache (one key, one breaker) and spread over 100,000
 * distinct keys / breakers (docs/policies.md).
 */
#include "bench_run.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define T0 1700000000000LL
#define KEYS 100000u

typedef struct policy_arg {
    const sy_snapshot *snap;
    sy_match_ctx *ctx;
    sy_request req;
    sy_header hdr;
    sy_match *m;
    char (*keys)[16]; /* KEYS keys, or NULL */
    char (*paths)[24];
    uint64_t i, allowed, permitted;
} policy_arg;

/* A router of `doc` with a store of `slots` bucket slots and `breakers`
 * breakers; NULL (a SKIPPED line) when refused. */
static sy_router *policy_router(const char *doc, uint32_t slots,
                                uint32_t breakers, void **mem) {
    sy_error e;
    size_t n = sy_policy_store_bytes(slots, breakers);
    sy_policy_store *st;
    *mem = aligned_alloc(64, (n + 63) & ~(size_t)63);
    sy_router_options o = SY_ROUTER_OPTIONS_INIT;
    o.limits.max_document_bytes = 256u << 20;
    sy_router *r = NULL;
    int rc = sy_policy_store_init(*mem, n, slots, breakers, &st, &e);
    o.policy_store = st;
    if (!rc)
        rc = sy_router_new(&o, &r, &e);
    if (!rc)
        rc = sy_router_add_source(r, "bench", &e);
    if (!rc)
        rc = sy_router_apply(r, "bench", doc, strlen(doc), NULL, &e);
    if (rc) {
        fail("policy router", rc, &e);
        if (r)
            sy_router_free(r);
        free(*mem);
        return NULL;
    }
    return r;
}

static void run_ratelimit(void *arg, uint64_t count) {
    policy_arg *a = arg;
    sy_ratelimit rl;
    for (uint64_t i = 0; i < count; i++, a->i++) {
        if (a->keys) /* the match reads the request at check time */
            a->hdr.value = (sy_str){a->keys[a->i % KEYS],
                                    strlen(a->keys[a->i % KEYS])};
        sy_match_ratelimit(a->m, T0, &rl, NULL);
        a->allowed += rl.allowed;
    }
}

static void run_breaker(void *arg, uint64_t count) {
    policy_arg *a = arg;
    sy_breaker_permit p;
    for (uint64_t i = 0; i < count; i++, a->i++) {
        if (a->paths) { /* a breaker per route: match the next one */
            const char *path = a->paths[a->i % KEYS];
            a->req.path = (sy_str){path, strlen(path)};
            sy_snapshot_match(a->snap, a->ctx, &a->req, &a->m);
        }
        sy_match_breaker_acquire(a->m, T0, &p, NULL);
        a->permitted += p.permitted;
        sy_breaker_record(&p, SY_OUTCOME_SUCCESS, 200, 1, T0);
    }
}

static void run_match_only(void *arg, uint64_t count) {
    policy_arg *a = arg;
    for (uint64_t i = 0; i < count; i++, a->i++) {
        const char *path = a->paths[a->i % KEYS];
        a->req.path = (sy_str){path, strlen(path)};
        sy_snapshot_match(a->snap, a->ctx, &a->req, &a->m);
        a->permitted += a->m != NULL;
    }
}

/* Time fn over the arg's router, as every other case: the median of
 * MATCH_REPS batches, ns per request. */
static void timed(const char *name, batch_fn fn, policy_arg *a) {
    uint64_t batch;
    double ns = measure(fn, a, MATCH_BATCH_NS, MATCH_REPS, &batch);
    result(name, 1, ns, "ns");
}

static void setup(policy_arg *a, sy_router *r, const char *path) {
    memset(a, 0, sizeof *a);
    a->snap = sy_router_acquire(r);
    sy_match_ctx_new(NULL, &a->ctx, NULL);
    a->req = (sy_request)SY_REQUEST_INIT;
    a->req.method = (sy_str){"GET", 3};
    a->req.host = (sy_str){"bench", 5};
    a->req.path = (sy_str){path, strlen(path)};
    a->req.remote_addr = (sy_str){"10.1.2.3", 8};
    a->req.now_ms = T0;
    a->req.seed = 1;
    a->hdr = (sy_header){{"X-Key", 5}, {"k", 1}};
    a->req.headers = &a->hdr;
    a->req.header_count = 1;
    sy_snapshot_match(a->snap, a->ctx, &a->req, &a->m);
}

static void teardown(policy_arg *a, sy_router *r, void *mem) {
    sy_match_ctx_free(a->ctx);
    sy_snapshot_release((sy_snapshot *)(uintptr_t)a->snap);
    sy_router_free(r);
    free(mem);
    free(a->keys);
    free(a->paths);
}

static void ratelimit_cases(void) {
    if (!want("policy/ratelimit") && !want("policy/ratelimit-100k-keys"))
        return;
    /* never empties: every check takes a token and is allowed */
    const char *doc =
        "[{\"id\":\"rl\",\"uri\":\"http://b\",\"predicates\":[\"Path=/rl\"],"
        "\"filters\":[{\"name\":\"RequestRateLimiter\",\"args\":{"
        "\"redis-rate-limiter.replenishRate\":\"1000000\","
        "\"redis-rate-limiter.burstCapacity\":\"2000000000\","
        "\"key-resolver\":\"#{@header:X-Key}\"}}]}]";
    void *mem;
    sy_router *r = policy_router(doc, 262144, 16, &mem);
    if (!r)
        return;
    policy_arg a;
    setup(&a, r, "/rl");
    if (!a.m) {
        comment("SKIPPED policy/ratelimit: no match");
    } else {
        if (want("policy/ratelimit"))
            timed("policy/ratelimit", run_ratelimit, &a);
        if (want("policy/ratelimit-100k-keys")) {
            a.keys = bench_xmalloc(KEYS * sizeof *a.keys);
            for (uint32_t i = 0; i < KEYS; i++)
                snprintf(a.keys[i], sizeof a.keys[i], "user-%u", i);
            timed("policy/ratelimit-100k-keys", run_ratelimit, &a);
        }
    }
    teardown(&a, r, mem);
}

static void breaker_cases(void) {
    if (want("policy/breaker")) {
        const char *doc =
            "[{\"id\":\"cb\",\"uri\":\"http://b\",\"predicates\":"
            "[\"Path=/cb\"],\"filters\":[\"CircuitBreaker=bench\"]}]";
        void *mem;
        sy_router *r = policy_router(doc, 64, 16, &mem);
        if (r) {
            policy_arg a;
            setup(&a, r, "/cb");
            timed("policy/breaker", run_breaker, &a);
            teardown(&a, r, mem);
        }
    }
    if (!want("policy/breaker-100k-names") &&
        !want("policy/breaker-100k-match-only"))
        return;
    /* 100,000 routes, each its own breaker: the cost is match + breaker;
     * policy/breaker-100k-match-only is the match alone, to subtract */
    bench_buf doc = {0};
    bench_buf_printf(&doc, "[");
    for (uint32_t i = 0; i < KEYS; i++)
        bench_buf_printf(&doc,
                         "%s{\"id\":\"r%u\",\"uri\":\"http://b\",\"predicates\":"
                         "[\"Path=/b/%u\"],\"filters\":[\"CircuitBreaker=cb%u\"]}",
                         i ? "," : "", i, i, i);
    bench_buf_printf(&doc, "]");
    void *mem;
    sy_router *r = policy_router(doc.ptr, 256, 131072, &mem);
    bench_buf_free(&doc);
    if (!r)
        return;
    policy_arg a;
    setup(&a, r, "/b/0");
    a.paths = bench_xmalloc(KEYS * sizeof *a.paths);
    for (uint32_t i = 0; i < KEYS; i++)
        snprintf(a.paths[i], sizeof a.paths[i], "/b/%u", i);
    if (want("policy/breaker-100k-names"))
        timed("policy/breaker-100k-names", run_breaker, &a);
    if (want("policy/breaker-100k-match-only"))
        timed("policy/breaker-100k-match-only", run_match_only, &a);
    teardown(&a, r, mem);
}

void case_policy(void) {
    ratelimit_cases();
    breaker_cases();
}
