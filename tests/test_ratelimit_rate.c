/* test_ratelimit_rate.c - the local RequestRateLimiter runs the rate it
 * is configured with (docs/policies.md): over a simulated interval on a
 * fake clock, a key that asks as often as it may is granted burstCapacity
 * + replenishRate x time tokens, within one token (requestedTokens > 1:
 * the part of a draw left in the bucket too), at rates that divide a
 * second into whole microseconds and rates that do not, and the
 * X-RateLimit-Remaining it is told agrees with the tokens it gets. */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define T0 1700000000000LL /* a fixed "now" (epoch ms) */

typedef struct rig {
    sy_router *r;
    sy_snapshot *s;
    sy_match_ctx *ctx;
    sy_match *m;
} rig;

static void rig_open(rig *g, uint32_t rate, uint32_t burst, uint32_t req) {
    char doc[512];
    snprintf(doc, sizeof doc,
             "[{\"id\":\"rl\",\"uri\":\"http://b\",\"predicates\":"
             "[\"Path=/rl\"],\"filters\":[{\"name\":\"RequestRateLimiter\","
             "\"args\":{\"redis-rate-limiter.replenishRate\":\"%u\","
             "\"redis-rate-limiter.burstCapacity\":\"%u\","
             "\"redis-rate-limiter.requestedTokens\":\"%u\","
             "\"key-resolver\":\"#{@routeKeyResolver}\"}}]}]",
             rate, burst, req);
    sy_router_options o = SY_ROUTER_OPTIONS_INIT;
    sy_error e;
    ck_assert_int_eq(sy_router_new(&o, &g->r, NULL), 0);
    ck_assert_int_eq(sy_router_add_source(g->r, "s", NULL), 0);
    ck_assert_msg(sy_router_apply(g->r, "s", doc, strlen(doc), NULL, &e) == 0,
                  "%s: %s", e.path, e.message);
    ck_assert_int_eq(sy_match_ctx_new(NULL, &g->ctx, NULL), 0);
    g->s = sy_router_acquire(g->r);
    sy_request q = SY_REQUEST_INIT;
    q.method = (sy_str){"GET", 3};
    q.host = (sy_str){"b", 1};
    q.path = (sy_str){"/rl", 3};
    q.now_ms = T0;
    ck_assert_int_eq(sy_snapshot_match(g->s, g->ctx, &q, &g->m), 0);
    ck_assert_ptr_nonnull(g->m);
}

static void rig_close(rig *g) {
    sy_snapshot_release(g->s);
    sy_match_ctx_free(g->ctx);
    sy_router_free(g->r);
}

/* The headers of an answer say what its members say. */
static void headers_agree(const sy_ratelimit *rl, uint32_t rate) {
    sy_header h[4];
    char buf[128], want[32];
    ck_assert_uint_eq(sy_ratelimit_headers(rl, h, buf, sizeof buf), 4);
    snprintf(want, sizeof want, "%lld", (long long)rl->remaining);
    ck_assert_uint_eq(h[0].value.len, strlen(want));
    ck_assert(memcmp(h[0].value.ptr, want, h[0].value.len) == 0);
    snprintf(want, sizeof want, "%u", rate);
    ck_assert_uint_eq(h[1].value.len, strlen(want));
    ck_assert(memcmp(h[1].value.ptr, want, h[1].value.len) == 0);
}

typedef struct shape {
    uint32_t rate, burst, req;
    int64_t step_ms; /* the fake clock's tick */
    int ticks;
} shape;

/* Ask at every tick until denied. Each tick's tokens (what the first
 * answer says were there) are the last tick's left plus the tokens of the
 * tick's time, floor or ceiling (rate x step / 1000 need not be whole),
 * capped at burstCapacity; each allowed draw takes requestedTokens and
 * says so; the denial says what is left. Over the whole interval the
 * tokens granted are burstCapacity + rate x time, less what was left
 * unclaimed (< requestedTokens), within one token, unless a tick's tokens
 * overflowed the bucket. */
static void run_shape(const shape *c) {
    rig g;
    rig_open(&g, c->rate, c->burst, c->req);
    int64_t left = c->burst; /* a new bucket is full */
    uint64_t granted = 0;
    uint64_t per_floor = (uint64_t)c->rate * (uint64_t)c->step_ms / 1000;
    uint64_t per_ceil = ((uint64_t)c->rate * (uint64_t)c->step_ms + 999) / 1000;
    for (int t = 0; t <= c->ticks; t++) {
        int64_t now = T0 + (int64_t)t * c->step_ms;
        if (t) {
            int64_t lo = left + (int64_t)per_floor,
                    hi = left + (int64_t)per_ceil;
            sy_ratelimit rl;
            ck_assert_int_eq(sy_match_ratelimit(g.m, now, &rl, NULL), 0);
            int64_t there = rl.allowed ? rl.remaining + c->req : rl.remaining;
            int64_t cap = c->burst;
            ck_assert_msg(there >= (lo < cap ? lo : cap) &&
                              there <= (hi < cap ? hi : cap),
                          "rate %u burst %u req %u tick %d: %lld tokens, "
                          "want %lld..%lld",
                          c->rate, c->burst, c->req, t, (long long)there,
                          (long long)(lo < cap ? lo : cap),
                          (long long)(hi < cap ? hi : cap));
            if (!rl.allowed) {
                ck_assert_int_lt(rl.remaining, c->req);
                left = rl.remaining;
                continue;
            }
            granted += c->req;
            left = rl.remaining;
        }
        for (;;) {
            sy_ratelimit rl;
            ck_assert_int_eq(sy_match_ratelimit(g.m, now, &rl, NULL), 0);
            if (t == 0 && !granted)
                headers_agree(&rl, c->rate);
            if (!rl.allowed) {
                ck_assert_int_eq(rl.remaining, left);
                ck_assert_int_lt(rl.remaining, c->req);
                ck_assert_int_eq(rl.status, 429);
                headers_agree(&rl, c->rate);
                break;
            }
            ck_assert_int_eq(rl.remaining, left - (int64_t)c->req);
            left = rl.remaining;
            granted += c->req;
        }
    }
    /* tokens of the interval: burst + rate x time, when no tick's tokens
     * overflowed the bucket */
    if (c->req - 1 + per_ceil > c->burst) {
        rig_close(&g);
        return;
    }
    double want = (double)c->burst +
                  (double)c->rate * (double)(c->ticks * c->step_ms) / 1000.0;
    double got = (double)granted;
    ck_assert_msg(got <= want + 1.0 && got > want - (double)c->req - 1.0,
                  "rate %u burst %u req %u over %lld ms: %.0f tokens granted, "
                  "want %.1f (within 1, less < %u left unclaimed)",
                  c->rate, c->burst, c->req, (long long)(c->ticks * c->step_ms),
                  got, want, c->req);
    rig_close(&g);
}

/* Rates that do not divide a second into whole microseconds ran fast (a
 * token's refill time truncated: 150,000/s ran as 166,666/s, 600,000/s as
 * 1,000,000/s) and rates above 1,000,000/s ran at 1,000,000/s. */
START_TEST(fast_rates_run_as_configured) {
    static const shape cases[] = {
        {150000, 2000, 1, 1, 400},
        {150000, 1000, 7, 3, 200},
        {600000, 1000, 1, 1, 200},
        {600000, 700, 4, 1, 100},
        {2000000, 5000, 1, 1, 60},
        {2000000, 10000, 3, 2, 40},
        {1000000, 3000, 1, 1, 100},
        {1000000, 1, 1, 1, 500},
        {333333, 500, 1, 1, 300},
        {2147483647, 2147483647, 1000000, 1, 40},
        {1999999999, 4000000, 999999, 1, 40},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        run_shape(&cases[i]);
}
END_TEST

/* Slow rates, over about twenty simulated minutes on uneven ticks. */
START_TEST(slow_rates_run_as_configured) {
    static const shape cases[] = {
        {7, 10, 1, 37, 30000}, {7, 1, 1, 1, 100000}, {3, 5, 2, 53, 20000},
        {3, 1, 1, 997, 1500},  {1, 3, 1, 250, 4000}, {13, 40, 6, 71, 10000},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        run_shape(&cases[i]);
}
END_TEST

/* A drained bucket's tokens come back at the configured rate: at
 * 150,000/s 150 in a millisecond (the refill truncated to 6 us a token
 * gave 166), at 2,000,000/s 2,000 (one a microsecond gave 1,000). */
START_TEST(a_drained_bucket_refills_at_the_rate) {
    rig g;
    rig_open(&g, 150000, 300, 1);
    sy_ratelimit rl;
    int n = 0;
    do {
        ck_assert_int_eq(sy_match_ratelimit(g.m, T0, &rl, NULL), 0);
        n += rl.allowed;
    } while (rl.allowed);
    ck_assert_int_eq(n, 300);
    n = 0;
    do {
        ck_assert_int_eq(sy_match_ratelimit(g.m, T0 + 1, &rl, NULL), 0);
        n += rl.allowed;
    } while (rl.allowed);
    ck_assert_int_eq(n, 150);
    rig_close(&g);
    rig_open(&g, 2000000, 2000, 1);
    for (int t = 0; t < 3; t++) {
        n = 0;
        do {
            ck_assert_int_eq(sy_match_ratelimit(g.m, T0 + t, &rl, NULL), 0);
            n += rl.allowed;
        } while (rl.allowed);
        ck_assert_int_eq(n, 2000);
    }
    rig_close(&g);
}
END_TEST

int main(void) {
    Suite *s = suite_create("ratelimit_rate");
    TCase *tc = tcase_create("ratelimit_rate");
    tcase_add_test(tc, fast_rates_run_as_configured);
    tcase_add_test(tc, slow_rates_run_as_configured);
    tcase_add_test(tc, a_drained_bucket_refills_at_the_rate);
    suite_add_tcase(s, tc);
    return sy_test_run(s);
}
