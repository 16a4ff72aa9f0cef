/* test_policy.c - rate limits, circuit breakers, retries and run or
 * refuse (docs/policies.md): the policy calls against real routers. */
#include "policy/breaker.h"
#include "router/router_int.h"
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define T0 1700000000000LL /* a fixed "now" (epoch ms) */

/* ---- helpers ---- */

static bool streq(sy_str a, const char *b) {
    return a.len == strlen(b) && memcmp(a.ptr, b, a.len) == 0;
}

typedef struct fix {
    sy_router *r;
    sy_snapshot *s;
    sy_match_ctx *ctx;
    sy_match *m;
    sy_request req;
    sy_header hdr[4];
} fix;

/* A router of options o with doc applied to its source "s". */
static sy_router *router_opts(const char *doc, const sy_router_options *o) {
    sy_router *r;
    ck_assert_int_eq(sy_router_new(o, &r, NULL), 0);
    ck_assert_int_eq(sy_router_add_source(r, "s", NULL), 0);
    sy_error e;
    if (doc)
        ck_assert_msg(sy_router_apply(r, "s", doc, strlen(doc), NULL, &e) == 0,
                      "%s: %s", e.path, e.message);
    return r;
}

static sy_router *router_with(const char *doc, sy_policy_store *store,
                              const char *const *runs) {
    sy_router_options o = SY_ROUTER_OPTIONS_INIT;
    o.policy_store = store;
    o.host_runs = runs;
    return router_opts(doc, &o);
}

/* The same with host-registered key resolvers (reg). */
static sy_router *router_reg(const char *doc, const sy_registry *reg) {
    sy_router_options o = SY_ROUTER_OPTIONS_INIT;
    o.registry = reg;
    return router_opts(doc, &o);
}

static void fix_open(fix *f, sy_router *r) {
    memset(f, 0, sizeof *f);
    f->r = r;
    ck_assert_int_eq(sy_match_ctx_new(NULL, &f->ctx, NULL), 0);
    f->req = (sy_request)SY_REQUEST_INIT;
    f->req.method = (sy_str){"GET", 3};
    f->req.host = (sy_str){"api.example.com", 15};
    f->req.remote_addr = (sy_str){"10.0.0.1", 8};
}

/* Match `path` on the current snapshot (kept in f->s until fix_close). */
static sy_match *fix_match(fix *f, const char *path) {
    if (f->s)
        sy_snapshot_release(f->s);
    f->s = sy_router_acquire(f->r);
    f->req.path = (sy_str){path, strlen(path)};
    ck_assert_int_eq(sy_snapshot_match(f->s, f->ctx, &f->req, &f->m), 0);
    ck_assert_ptr_nonnull(f->m);
    return f->m;
}

static void fix_close(fix *f) {
    if (f->s)
        sy_snapshot_release(f->s);
    sy_match_ctx_free(f->ctx);
    sy_router_free(f->r);
}

static sy_ratelimit limit(fix *f, const char *path, int64_t now) {
    sy_ratelimit rl;
    ck_assert_int_eq(sy_match_ratelimit(fix_match(f, path), now, &rl, NULL), 0);
    return rl;
}

static int allowed_of(fix *f, const char *path, int n, int64_t now) {
    int k = 0;
    for (int i = 0; i < n; i++)
        k += limit(f, path, now).allowed;
    return k;
}

/* The error of parsing one route document. */
static sy_error parse_error(const char *doc, const sy_registry *reg) {
    sy_parse_options po = SY_PARSE_OPTIONS_INIT;
    po.registry = reg;
    sy_document *d = NULL;
    sy_error e;
    memset(&e, 0, sizeof e);
    int rc = sy_document_parse(doc, strlen(doc), &po, &d, &e);
    ck_assert_msg(rc != 0, "accepted: %s", doc);
    ck_assert_int_eq(rc, e.code);
    return e;
}

static void parses(const char *doc, const sy_registry *reg) {
    sy_parse_options po = SY_PARSE_OPTIONS_INIT;
    po.registry = reg;
    sy_document *d = NULL;
    sy_error e;
    ck_assert_msg(sy_document_parse(doc, strlen(doc), &po, &d, &e) == 0,
                  "%s: %s", e.path, e.message);
    sy_document_free(d);
}

#define RL_ROUTE(ARGS)                                                         \
    "[{\"id\":\"rl\",\"uri\":\"http://b\",\"predicates\":[\"Path=/rl/**\"],"   \
    "\"filters\":[{\"name\":\"RequestRateLimiter\",\"args\":{" ARGS "}}]}]"

/* ---- rate limiting ---- */

START_TEST(burst_of_one_lets_one_of_twenty_through) {
    fix f;
    fix_open(&f, router_with(RL_ROUTE("\"redis-rate-limiter.replenishRate\":"
                                      "\"1\",\"redis-rate-limiter."
                                      "burstCapacity\":\"1\",\"key-resolver\":"
                                      "\"#{@remoteAddrKeyResolver}\""),
                             NULL, NULL));
    ck_assert_int_eq(allowed_of(&f, "/rl/a", 20, T0), 1);
    sy_ratelimit rl = limit(&f, "/rl/a", T0);
    ck_assert(rl.limited && !rl.allowed && rl.headers);
    ck_assert_int_eq(rl.status, 429);
    ck_assert_int_eq(rl.remaining, 0);
    ck_assert_uint_eq(rl.replenish_rate, 1);
    ck_assert_uint_eq(rl.burst_capacity, 1);
    ck_assert_uint_eq(rl.requested_tokens, 1);
    ck_assert_str_eq(rl.key, "10.0.0.1");
    /* one second later one token is back */
    ck_assert_int_eq(allowed_of(&f, "/rl/a", 5, T0 + 1000), 1);
    fix_close(&f);
}
END_TEST

START_TEST(a_route_without_a_limiter_is_allowed_and_says_nothing_more) {
    fix f;
    fix_open(&f,
             router_with("[{\"id\":\"a\",\"uri\":\"http://b\"}]", NULL, NULL));
    sy_ratelimit rl;
    memset(&rl, 0xa5, sizeof rl);
    ck_assert_int_eq(sy_match_ratelimit(fix_match(&f, "/x"), T0, &rl, NULL), 0);
    ck_assert(!rl.limited && rl.allowed && !rl.headers && !rl.empty_key);
    ck_assert_int_eq(rl.status, 0);
    ck_assert_int_eq(rl.remaining, 0);
    ck_assert_uint_eq(rl.key_len, 0);
    ck_assert_uint_eq(sy_match_ratelimit_count(f.m), 0);
    sy_breaker_permit p;
    ck_assert_int_eq(sy_match_breaker_acquire(f.m, T0, &p, NULL), 0);
    ck_assert(!p.breaker && p.permitted);
    ck_assert_ptr_null(sy_match_retry_policy(f.m));
    fix_close(&f);
}
END_TEST

START_TEST(burst_of_zero_blocks_everything) {
    fix f;
    fix_open(&f, router_with(RL_ROUTE("\"redis-rate-limiter.replenishRate\":"
                                      "\"1\",\"redis-rate-limiter."
                                      "burstCapacity\":\"0\",\"key-resolver\":"
                                      "\"#{@routeKeyResolver}\""),
                             NULL, NULL));
    ck_assert_int_eq(allowed_of(&f, "/rl/a", 10, T0), 0);
    ck_assert_int_eq(allowed_of(&f, "/rl/a", 10, T0 + 60000), 0);
    fix_close(&f);
}
END_TEST

/* The largest values the args take are run as SCG runs them, never
 * turned into "no limit" (allowed with remaining -1). */
START_TEST(huge_bucket_sizes_are_run_or_refused_never_fail_open) {
    fix f;
    fix_open(&f, router_with(RL_ROUTE("\"redis-rate-limiter.replenishRate\":"
                                      "\"1000\",\"redis-rate-limiter."
                                      "burstCapacity\":\"2147483647\","
                                      "\"redis-rate-limiter.requestedTokens\":"
                                      "\"2147483647\",\"key-resolver\":"
                                      "\"#{@routeKeyResolver}\""),
                             NULL, NULL));
    sy_ratelimit rl = limit(&f, "/rl/a", T0);
    ck_assert(rl.allowed);
    ck_assert_int_eq(rl.remaining, 0);
    rl = limit(&f, "/rl/a", T0 + 1000);
    ck_assert(!rl.allowed); /* 1,000 of 2,147,483,647 back */
    ck_assert_int_eq(rl.remaining, 1000);
    fix_close(&f);
    /* a bucket refilling for longer than the store's clock can hold */
    sy_error e = parse_error(
        RL_ROUTE("\"redis-rate-limiter.replenishRate\":\"1\","
                 "\"redis-rate-limiter.burstCapacity\":\"2147483647\""),
        NULL);
    ck_assert_str_eq(e.path,
                     "[0].filters[0].args.redis-rate-limiter.burstCapacity");
    ck_assert_msg(strstr(e.message, "replenishRate"), "%s", e.message);
}
END_TEST

START_TEST(remaining_counts_down_and_headers_are_formatted) {
    fix f;
    fix_open(&f, router_with(RL_ROUTE("\"redis-rate-limiter.replenishRate\":"
                                      "\"10\",\"redis-rate-limiter."
                                      "burstCapacity\":\"20\",\"redis-rate-"
                                      "limiter.requestedTokens\":\"5\","
                                      "\"key-resolver\":\"#{@hostKeyResolver}"
                                      "\",\"status-code\":\"TOO_MANY_REQUESTS"
                                      "\""),
                             NULL, NULL));
    int64_t left[4];
    for (int i = 0; i < 4; i++)
        left[i] = limit(&f, "/rl/x", T0).remaining;
    ck_assert_int_eq(left[0], 15);
    ck_assert_int_eq(left[3], 0);
    sy_ratelimit rl = limit(&f, "/rl/x", T0);
    ck_assert(!rl.allowed);
    ck_assert_str_eq(rl.key, "api.example.com");
    char buf[128];
    sy_header h[4];
    ck_assert_uint_eq(sy_ratelimit_headers(&rl, h, buf, sizeof buf), 4);
    ck_assert(streq(h[0].name, "X-RateLimit-Remaining"));
    ck_assert(streq(h[0].value, "0"));
    ck_assert(streq(h[1].name, "X-RateLimit-Replenish-Rate"));
    ck_assert(streq(h[1].value, "10"));
    ck_assert(streq(h[2].name, "X-RateLimit-Burst-Capacity"));
    ck_assert(streq(h[2].value, "20"));
    ck_assert(streq(h[3].name, "X-RateLimit-Requested-Tokens"));
    ck_assert(streq(h[3].value, "5"));
    fix_close(&f);
}
END_TEST

START_TEST(each_key_has_its_own_bucket) {
    fix f;
    fix_open(&f, router_with(RL_ROUTE("\"redis-rate-limiter.replenishRate\":"
                                      "\"1\",\"key-resolver\":"
                                      "\"#{@header:X-User}\""),
                             NULL, NULL));
    sy_header h = {{"x-user", 6}, {"ann", 3}};
    f.req.headers = &h;
    f.req.header_count = 1;
    ck_assert_int_eq(allowed_of(&f, "/rl/a", 3, T0), 1);
    h.value = (sy_str){"bob", 3};
    ck_assert_int_eq(allowed_of(&f, "/rl/a", 3, T0), 1);
    sy_ratelimit rl = limit(&f, "/rl/a", T0);
    ck_assert_str_eq(rl.key, "bob");
    fix_close(&f);
}
END_TEST

/* Keys past the 255 bytes sy_ratelimit.key holds: each whole key has its
 * own bucket (cut to 255 bytes before, two keys sharing those bytes shared
 * one), locally and in Redis, where the key text is the first 238 bytes,
 * "~" and the 16 hex digits of the whole key's hash; keys of 255 bytes or
 * less keep SCG's key names. */
static int long_resolver(void *data, const sy_request *req,
                         const struct sy_route *route, char *buf, size_t cap,
                         size_t *len) {
    (void)route;
    size_t n = 300;
    if (cap < n + 1)
        return -1;
    memset(buf, 'k', n);
    buf[n++] = (char)(req->header_count ? req->headers[0].value.ptr[0] : '-');
    (void)data;
    *len = n;
    return 0;
}

START_TEST(keys_past_the_key_limit_have_their_own_buckets) {
    fix f;
    fix_open(&f, router_with(RL_ROUTE("\"redis-rate-limiter.replenishRate\":"
                                      "\"1\",\"redis-rate-limiter."
                                      "burstCapacity\":\"1\",\"key-resolver\":"
                                      "\"#{@header:X-User}\""),
                             NULL, NULL));
    char ann[300], bob[300];
    memset(ann, 'a', 255);
    memcpy(ann + 255, "-ann", 4);
    memcpy(bob, ann, 255);
    memcpy(bob + 255, "-bob", 4);
    sy_header h = {{"X-User", 6}, {ann, 259}};
    f.req.headers = &h;
    f.req.header_count = 1;
    sy_ratelimit a = limit(&f, "/rl/a", T0);
    ck_assert(a.allowed);
    ck_assert(!limit(&f, "/rl/a", T0).allowed);
    h.value = (sy_str){bob, 259};
    sy_ratelimit b = limit(&f, "/rl/a", T0);
    ck_assert_msg(b.allowed, "a key sharing its first 255 bytes with another "
                             "shares its bucket");
    ck_assert(!limit(&f, "/rl/a", T0).allowed);
    /* the key reported: 238 bytes, "~", 16 hex digits of the whole's hash */
    ck_assert_uint_eq(a.key_len, 255);
    ck_assert_uint_eq(strlen(a.key), 255);
    ck_assert_int_eq(memcmp(a.key, ann, 238), 0);
    ck_assert_int_eq(a.key[238], '~');
    ck_assert_uint_eq(strspn(a.key + 239, "0123456789abcdef"), 16);
    ck_assert_str_ne(a.key, b.key);
    /* a 255-byte key equal to a long key's text has a bucket of its own */
    char same[256];
    memcpy(same, b.key, 256);
    h.value = (sy_str){same, 255};
    sy_ratelimit s = limit(&f, "/rl/a", T0);
    ck_assert(s.allowed);
    ck_assert_str_eq(s.key, same);
    /* Redis: the key texts differ, and keep SCG's names up to 255 bytes */
    sy_redis_call ca, cb, c255;
    h.value = (sy_str){ann, 259};
    ck_assert_int_eq(
        sy_match_ratelimit_redis(fix_match(&f, "/rl/a"), 0, &ca, NULL), 0);
    h.value = (sy_str){bob, 259};
    ck_assert_int_eq(
        sy_match_ratelimit_redis(fix_match(&f, "/rl/a"), 0, &cb, NULL), 0);
    h.value = (sy_str){ann, 255};
    ck_assert_int_eq(
        sy_match_ratelimit_redis(fix_match(&f, "/rl/a"), 0, &c255, NULL), 0);
    ck_assert(ca.needed && cb.needed && c255.needed);
    ck_assert_str_ne(ca.tokens_key, cb.tokens_key);
    ck_assert_str_ne(ca.timestamp_key, cb.timestamp_key);
    ck_assert_str_eq(ca.key, a.key);
    char want[600];
    snprintf(want, sizeof want, "request_rate_limiter.{rl.%s}.tokens", a.key);
    ck_assert_str_eq(ca.tokens_key, want);
    snprintf(want, sizeof want, "request_rate_limiter.{rl.%.255s}.timestamp",
             ann);
    ck_assert_str_eq(c255.timestamp_key, want);
    f.req.headers = NULL;
    f.req.header_count = 0;
    fix_close(&f);

    /* a registered resolver's long key: the same */
    sy_registry *reg;
    ck_assert_int_eq(sy_registry_new(NULL, &reg, NULL), 0);
    sy_key_resolver kr = {long_resolver, NULL};
    ck_assert_int_eq(
        sy_registry_add_key_resolver(reg, "longKeyResolver", &kr, NULL), 0);
    const char *doc = RL_ROUTE("\"redis-rate-limiter.replenishRate\":\"1\","
                               "\"redis-rate-limiter.burstCapacity\":\"1\","
                               "\"key-resolver\":\"#{@longKeyResolver}\"");
    sy_router *r = router_reg(doc, reg);
    fix_open(&f, r);
    h = (sy_header){{"X", 1}, {"1", 1}};
    f.req.headers = &h;
    f.req.header_count = 1;
    a = limit(&f, "/rl/a", T0);
    ck_assert_msg(a.allowed && a.key_len == 255, "%zu", a.key_len);
    ck_assert(!limit(&f, "/rl/a", T0).allowed);
    h.value = (sy_str){"2", 1};
    ck_assert(limit(&f, "/rl/a", T0).allowed);
    f.req.headers = NULL;
    f.req.header_count = 0;
    fix_close(&f);
    sy_registry_free(reg);
}
END_TEST

START_TEST(path_variable_resolver_keys_by_the_capture) {
    fix f;
    fix_open(&f,
             router_with("[{\"id\":\"u\",\"uri\":\"http://b\",\"predicates\":"
                         "[\"Path=/u/{user}/"
                         "**\"],\"filters\":[{\"name\":\"RequestRateLimiter\","
                         "\"args\":{\"redis-rate-limiter.replenishRate\":\"1\","
                         "\"key-resolver\":"
                         "\"#{@pathVariable:user}\"}}]}]",
                         NULL, NULL));
    ck_assert_int_eq(allowed_of(&f, "/u/ann/x", 3, T0), 1);
    ck_assert_int_eq(allowed_of(&f, "/u/bob/x", 3, T0), 1);
    ck_assert_str_eq(limit(&f, "/u/bob/y", T0).key, "bob");
    fix_close(&f);
}
END_TEST

START_TEST(no_principal_is_an_empty_key_denied_with_403_and_no_headers) {
    fix f;
    /* no key-resolver: SCG's default, the principal's name */
    fix_open(&f, router_with(RL_ROUTE("\"redis-rate-limiter.replenishRate\":"
                                      "\"5\""),
                             NULL, NULL));
    sy_ratelimit rl = limit(&f, "/rl/a", T0);
    ck_assert(rl.limited && !rl.allowed && rl.empty_key && !rl.headers);
    ck_assert_int_eq(rl.status, 403);
    f.req.principal = (sy_str){"alice", 5};
    rl = limit(&f, "/rl/a", T0);
    ck_assert(rl.allowed && !rl.empty_key);
    ck_assert_str_eq(rl.key, "alice");
    fix_close(&f);
}
END_TEST

START_TEST(deny_empty_key_false_lets_keyless_requests_through) {
    fix f;
    fix_open(&f, router_with(RL_ROUTE("\"redis-rate-limiter.replenishRate\":"
                                      "\"1\",\"deny-empty-key\":\"false\","
                                      "\"empty-key-status\":\"451\""),
                             NULL, NULL));
    ck_assert_int_eq(allowed_of(&f, "/rl/a", 5, T0), 5);
    fix_close(&f);
}
END_TEST

static int user_resolver(void *data, const sy_request *req,
                         const struct sy_route *route, char *buf, size_t cap,
                         size_t *len) {
    (void)req, (void)route;
    *len = snprintf(buf, cap, "%s", (const char *)data);
    return 0;
}

START_TEST(a_registered_resolver_is_accepted_and_used) {
    sy_registry *reg;
    ck_assert_int_eq(sy_registry_new(NULL, &reg, NULL), 0);
    const char *doc = RL_ROUTE("\"redis-rate-limiter.replenishRate\":\"1\","
                               "\"key-resolver\":\"#{@userKeyResolver}\"");
    sy_error e = parse_error(doc, reg);
    ck_assert_int_eq(e.code, SY_EARG);
    ck_assert_str_eq(e.path, "[0].filters[0].args.key-resolver");
    sy_key_resolver kr = {user_resolver, "u-42"};
    ck_assert_int_eq(
        sy_registry_add_key_resolver(reg, "userKeyResolver", &kr, NULL), 0);
    ck_assert_int_eq(
        sy_registry_add_key_resolver(reg, "hostKeyResolver", &kr, NULL),
        SY_EEXIST);
    parses(doc, reg);
    sy_router *r = router_reg(doc, reg);
    fix f;
    fix_open(&f, r);
    sy_ratelimit rl = limit(&f, "/rl/a", T0);
    ck_assert_str_eq(rl.key, "u-42");
    ck_assert(rl.allowed);
    ck_assert(!limit(&f, "/rl/a", T0).allowed);
    fix_close(&f);
    sy_registry_free(reg);
}
END_TEST

START_TEST(buckets_survive_publishes_of_other_routes_and_reset_on_change) {
    const char *a = RL_ROUTE("\"redis-rate-limiter.replenishRate\":\"1\","
                             "\"redis-rate-limiter.burstCapacity\":\"2\","
                             "\"key-resolver\":\"#{@routeKeyResolver}\"");
    fix f;
    fix_open(&f, router_with(a, NULL, NULL));
    ck_assert_int_eq(allowed_of(&f, "/rl/a", 2, T0), 2);
    /* another route comes and goes: the bucket stays empty */
    const char *other = "{\"id\":\"o\",\"uri\":\"http://c\"}";
    ck_assert_int_eq(
        sy_router_upsert_route(f.r, "s", other, strlen(other), NULL), 0);
    ck_assert_int_eq(sy_router_remove_route(f.r, "o", NULL), 0);
    ck_assert_int_eq(allowed_of(&f, "/rl/a", 2, T0), 0);
    /* the limiter changes: a fresh (full) bucket at the next request */
    const char *b = RL_ROUTE("\"redis-rate-limiter.replenishRate\":\"1\","
                             "\"redis-rate-limiter.burstCapacity\":\"3\","
                             "\"key-resolver\":\"#{@routeKeyResolver}\"");
    ck_assert_int_eq(sy_router_apply(f.r, "s", b, strlen(b), NULL, NULL), 0);
    ck_assert_int_eq(allowed_of(&f, "/rl/a", 5, T0), 3);
    fix_close(&f);
}
END_TEST

START_TEST(routers_sharing_a_store_share_buckets) {
    size_t n = sy_policy_store_bytes(1024, 16);
    void *mem = aligned_alloc(64, (n + 63) & ~(size_t)63);
    sy_policy_store *st, *again;
    ck_assert_int_eq(sy_policy_store_init(mem, n, 1024, 16, &st, NULL), 0);
    ck_assert_int_eq(sy_policy_store_attach(mem, n, &again, NULL), 0);
    ck_assert_ptr_eq(st, again);
    ck_assert_int_eq(sy_policy_store_attach(mem, 64, &again, NULL), SY_EINVAL);
    ck_assert_int_eq(sy_policy_store_init(mem, 100, 1, 1, &again, NULL),
                     SY_ETOOSMALL);
    const char *doc = RL_ROUTE("\"redis-rate-limiter.replenishRate\":\"1\","
                               "\"redis-rate-limiter.burstCapacity\":\"3\","
                               "\"key-resolver\":\"#{@routeKeyResolver}\"");
    fix f, g;
    fix_open(&f, router_with(doc, st, NULL));
    fix_open(&g, router_with(doc, st, NULL));
    ck_assert_ptr_eq(sy_router_policy_store(f.r), st);
    ck_assert_int_eq(allowed_of(&f, "/rl/a", 2, T0), 2);
    ck_assert_int_eq(allowed_of(&g, "/rl/a", 2, T0), 1);
    sy_policy_stats ps;
    sy_policy_store_stats(st, &ps);
    ck_assert_uint_eq(ps.slots, 1024);
    ck_assert_uint_eq(ps.limited, 1);
    fix_close(&f);
    fix_close(&g);
    free(mem);
}
END_TEST

START_TEST(hundred_thousand_keys_in_a_small_store_fail_open) {
    fix f;
    sy_router *r;
    sy_router_options o = SY_ROUTER_OPTIONS_INIT;
    o.policy_slots = 64;
    ck_assert_int_eq(sy_router_new(&o, &r, NULL), 0);
    ck_assert_int_eq(sy_router_add_source(r, "s", NULL), 0);
    const char *doc = RL_ROUTE("\"redis-rate-limiter.replenishRate\":\"1\","
                               "\"key-resolver\":\"#{@header:K}\"");
    ck_assert_int_eq(sy_router_apply(r, "s", doc, strlen(doc), NULL, NULL), 0);
    fix_open(&f, r);
    char key[32];
    sy_header h = {{"K", 1}, {key, 0}};
    f.req.headers = &h;
    f.req.header_count = 1;
    int open = 0;
    for (int i = 0; i < 1000; i++) {
        h.value.len = (size_t)snprintf(key, sizeof key, "k%d", i);
        sy_ratelimit rl = limit(&f, "/rl/a", T0);
        ck_assert(rl.allowed);
        open += rl.remaining == -1;
    }
    ck_assert_int_gt(open, 0); /* past 64 live buckets: fail open */
    fix_close(&f);
}
END_TEST

START_TEST(redis_calls_use_scg_key_names_and_fail_open) {
    fix f;
    fix_open(&f, router_with(RL_ROUTE("\"redis-rate-limiter.replenishRate\":"
                                      "\"10\",\"redis-rate-limiter."
                                      "burstCapacity\":\"20\",\"key-resolver\":"
                                      "\"#{@remoteAddrKeyResolver}\""),
                             NULL, NULL));
    sy_match *m = fix_match(&f, "/rl/a");
    ck_assert_uint_eq(sy_match_ratelimit_count(m), 1);
    sy_redis_call c;
    ck_assert_int_eq(sy_match_ratelimit_redis(m, 0, &c, NULL), 0);
    ck_assert(c.needed);
    ck_assert_str_eq(c.tokens_key, "request_rate_limiter.{rl.10.0.0.1}.tokens");
    ck_assert_str_eq(c.timestamp_key,
                     "request_rate_limiter.{rl.10.0.0.1}.timestamp");
    ck_assert_str_eq(c.rate, "10");
    ck_assert_str_eq(c.capacity, "20");
    ck_assert_str_eq(c.requested, "1");
    ck_assert_int_eq(sy_match_ratelimit_redis(m, 1, &c, NULL), SY_ENOTFOUND);
    ck_assert_int_eq(sy_match_ratelimit_redis(m, 0, &c, NULL), 0);
    sy_ratelimit rl;
    sy_ratelimit_redis_result(&c, false, 0, 0, &rl);
    ck_assert(rl.allowed && rl.headers);
    ck_assert_int_eq(rl.remaining, -1);
    sy_ratelimit_redis_result(&c, true, 0, 3, &rl);
    ck_assert(!rl.allowed);
    ck_assert_int_eq(rl.status, 429);
    ck_assert_int_eq(rl.remaining, 3);
    ck_assert_ptr_nonnull(strstr(sy_ratelimit_redis_script(), "SETEX"));
    fix_close(&f);
}
END_TEST

/* The Redis key texts for route ids and keys of every length class: what
 * snprintf("request_rate_limiter.{%.300s.%.*s}%s") writes, cut to the
 * call's 576 bytes (the two keys are built from one text when both fit
 * whole, else each is cut); the ARGV texts of the limiter's numbers. */
START_TEST(redis_key_texts_match_snprintf_at_every_length) {
    static const size_t ids[] = {1, 40, 290, 299, 300, 301, 450};
    static const size_t keys[] = {1, 7, 200, 230, 255};
    char id[460], key[300], doc[2048], want[1024];
    for (size_t a = 0; a < sizeof ids / sizeof ids[0]; a++) {
        memset(id, 'i', ids[a]);
        id[ids[a]] = '\0';
        snprintf(doc, sizeof doc,
                 "[{\"id\":\"%s\",\"uri\":\"http://b\",\"predicates\":"
                 "[\"Path=/rl/**\"],\"filters\":[{\"name\":"
                 "\"RequestRateLimiter\",\"args\":{\"redis-rate-limiter."
                 "replenishRate\":\"4294967\",\"redis-rate-limiter."
                 "burstCapacity\":\"2147483647\",\"redis-rate-limiter."
                 "requestedTokens\":\"1000000\",\"key-resolver\":"
                 "\"#{@header:K}\"}}]}]",
                 id);
        fix f;
        fix_open(&f, router_with(doc, NULL, NULL));
        for (size_t b = 0; b < sizeof keys / sizeof keys[0]; b++) {
            for (size_t j = 0; j < keys[b]; j++)
                key[j] = (char)('a' + j % 26);
            sy_header h = {{"K", 1}, {key, keys[b]}};
            f.req.headers = &h;
            f.req.header_count = 1;
            sy_redis_call c;
            ck_assert_int_eq(
                sy_match_ratelimit_redis(fix_match(&f, "/rl/x"), 0, &c, NULL),
                0);
            ck_assert(c.needed);
            const char *suffix[2] = {".tokens", ".timestamp"};
            const char *got[2] = {c.tokens_key, c.timestamp_key};
            for (int k = 0; k < 2; k++) {
                snprintf(want, sizeof want,
                         "request_rate_limiter.{%.300s.%.*s}%s", id,
                         (int)c.key_len, c.key, suffix[k]);
                want[sizeof c.tokens_key - 1] = '\0';
                ck_assert_msg(strcmp(got[k], want) == 0, "id %zu, key %zu: %s",
                              ids[a], keys[b], got[k]);
            }
            ck_assert_str_eq(c.rate, "4294967");
            ck_assert_str_eq(c.capacity, "2147483647");
            ck_assert_str_eq(c.requested, "1000000");
        }
        f.req.headers = NULL;
        f.req.header_count = 0;
        fix_close(&f);
    }
}
END_TEST

/* SCG's script once (route-model.md section 9), on a bucket (last, stamp)
 * at `now`: the reference the batch reply is checked against. */
static void scg_draw(int64_t rate, int64_t cap, int64_t req, int64_t now,
                     int64_t *last, int64_t *stamp, bool *ok, int64_t *left) {
    int64_t ttl = (2 * cap) / rate; /* floor(2 * (capacity / rate)) */
    int64_t d = now - *stamp > 0 ? now - *stamp : 0;
    int64_t filled = *last + d * rate < cap ? *last + d * rate : cap;
    *ok = filled >= req;
    *left = *ok ? filled - req : filled;
    if (ttl > 0) {
        *last = *left;
        *stamp = now;
    }
}

/* A batch of N draws answered {allowed, tokens_left} (how many of the N
 * SCG runs allowed, the last run's tokens left: the batch script's
 * reply): each draw's decision is that of its own run of SCG's script, the
 * bucket running out mid-batch (the first k allowed with their own
 * remaining counts, the rest denied with what is left), the bucket not kept
 * between draws (ttl 0), requestedTokens > 1, a full and an empty bucket. */
START_TEST(redis_batch_reply_gives_each_draw_its_own_decision) {
    static const struct {
        int64_t rate, cap, req, last, stamp, now;
        size_t n;
    } cases[] = {
        {1, 10, 1, -1, 0, 100, 40}, /* a fresh bucket of 10: 10 of 40 */
        {1, 10, 1, 3, 99, 100, 8},  /* runs out mid-batch: 4 of 8 */
        {5, 20, 3, 2, 98, 100, 9},  /* requested 3, refilled 10: 4 of 9 */
        {1, 10, 1, 0, 100, 100, 5}, /* empty: none */
        {10, 4, 1, 0, 0, 100, 6},   /* ttl 0: each draw a full bucket */
        {10, 4, 5, 0, 0, 100, 3},   /* ttl 0, never enough: none */
        {2, 1, 1, 0, 0, 100, 3},    /* ttl 1 (2 x 1 / 2): 1 of 3 */
        {1, 0, 1, 0, 0, 100, 4},    /* burstCapacity 0: every draw denied */
        {1000, 2000000, 7, 5, 90, 100, 50}, /* plenty: all 50 */
        {1, 10, 1, 6, 100, 100, 1},         /* N = 1: SCG's own reply */
    };
    for (size_t t = 0; t < sizeof cases / sizeof cases[0]; t++) {
        sy_redis_call c;
        memset(&c, 0, sizeof c);
        c.needed = true;
        c.status = 429;
        c.replenish_rate = (uint32_t)cases[t].rate;
        c.burst_capacity = (uint32_t)cases[t].cap;
        c.requested_tokens = (uint32_t)cases[t].req;
        bool want_ok[64];
        int64_t want_left[64];
        int64_t last = cases[t].last < 0 ? cases[t].cap : cases[t].last;
        int64_t stamp = cases[t].stamp, k = 0, left = 0;
        for (size_t i = 0; i < cases[t].n; i++) {
            scg_draw(cases[t].rate, cases[t].cap, cases[t].req, cases[t].now,
                     &last, &stamp, &want_ok[i], &want_left[i]);
            if (want_ok[i] && (size_t)k == i) /* the allowed: a prefix */
                k++;
            ck_assert_msg(!want_ok[i] || (size_t)k == i + 1, "case %zu", t);
            left = want_left[i];
        }
        for (size_t i = 0; i < cases[t].n; i++) {
            sy_ratelimit rl;
            sy_ratelimit_redis_batch_result(&c, true, k, left, i, &rl);
            ck_assert_msg(rl.allowed == want_ok[i] && rl.limited && rl.headers,
                          "case %zu draw %zu", t, i);
            ck_assert_msg(rl.remaining == want_left[i],
                          "case %zu draw %zu: %lld, not %lld", t, i,
                          (long long)rl.remaining, (long long)want_left[i]);
            ck_assert_int_eq(rl.status, want_ok[i] ? 0 : 429);
            ck_assert_uint_eq(rl.requested_tokens, (uint32_t)cases[t].req);
            sy_ratelimit_redis_batch_result(&c, false, k, left, i, &rl);
            ck_assert(rl.allowed); /* fail open */
            ck_assert_int_eq(rl.remaining, -1);
        }
    }
    /* the mid-batch case in figures: 3 + 1 token, 8 draws */
    sy_redis_call c;
    memset(&c, 0, sizeof c);
    c.needed = true;
    c.status = 429;
    c.replenish_rate = 1;
    c.burst_capacity = 10;
    c.requested_tokens = 1;
    int64_t want[8] = {3, 2, 1, 0, 0, 0, 0, 0};
    for (size_t i = 0; i < 8; i++) {
        sy_ratelimit rl;
        sy_ratelimit_redis_batch_result(&c, true, 4, 0, i, &rl);
        ck_assert(rl.allowed == (i < 4));
        ck_assert_int_eq(rl.remaining, want[i]);
    }
    ck_assert_ptr_nonnull(
        strstr(sy_ratelimit_redis_batch_script(), "return { allowed, left }"));
}
END_TEST

/* ---- validation as SCG binds ---- */

START_TEST(typos_and_bad_values_are_refused_where_they_are) {
    static const struct {
        const char *filter, *path, *why;
    } bad[] = {
        {"{\"name\":\"Retry\",\"args\":{\"retires\":\"3\"}}",
         "[0].filters[0].args.retires", "unknown argument"},
        /* YAML's nesting, written as JSON: refused, naming the dotted key */
        {"{\"name\":\"Retry\",\"args\":{\"backoff\":{\"firstBackoff\":"
         "\"10ms\"}}}",
         "[0].filters[0].args.backoff", "\"backoff.firstBackoff\""},
        {"{\"name\":\"Retry\",\"args\":{\"statuses\":\"BAD_GATEWY\"}}",
         "[0].filters[0].args.statuses", "BAD_GATEWY"},
        {"{\"name\":\"Retry\",\"args\":{\"retries\":\"0\"}}",
         "[0].filters[0].args.retries", "greater than 0"},
        {"{\"name\":\"Retry\",\"args\":{\"series\":\"SERVER_ERR\"}}",
         "[0].filters[0].args.series", "not a series"},
        {"{\"name\":\"Retry\",\"args\":{\"methods\":\"GETT\"}}",
         "[0].filters[0].args.methods", "not an HTTP method"},
        {"{\"name\":\"Retry\",\"args\":{\"jitter.randomFactor\":\"1.5\"}}",
         "[0].filters[0].args.jitter.randomFactor", "out of range"},
        {"{\"name\":\"Retry\",\"args\":{\"exceptions\":\"java.lang.Oops\"}}",
         "[0].filters[0].args.exceptions", "java.lang.Oops"},
        {"{\"name\":\"RequestRateLimiter\",\"args\":{\"redis-rate-limiter."
         "replenishRate\":\"1\",\"redis-rate-limiter.burstCapacity\":\"-5\"}}",
         "[0].filters[0].args.redis-rate-limiter.burstCapacity",
         "out of range"},
        {"{\"name\":\"RequestRateLimiter\",\"args\":{\"redis-rate-limiter."
         "burstCapacity\":\"5\"}}",
         "[0].filters[0].args.redis-rate-limiter.replenishRate", "missing"},
        {"{\"name\":\"RequestRateLimiter\",\"args\":{\"redis-rate-limiter."
         "replenishRate\":\"1\",\"deny-empty-key\":\"maybe\"}}",
         "[0].filters[0].args.deny-empty-key", ""},
        {"{\"name\":\"RequestRateLimiter\",\"args\":{\"redis-rate-limiter."
         "replenishRate\":\"1\",\"rate-limiter\":\"#{@myLimiter}\"}}",
         "[0].filters[0].args.rate-limiter", "redisRateLimiter"},
        {"{\"name\":\"CircuitBreaker\",\"args\":{\"fallbackUri\":"
         "\"forwrd:/x\"}}",
         "[0].filters[0].args.fallbackUri", "forward:"},
        {"{\"name\":\"CircuitBreaker\",\"args\":{\"statusCodes\":\"5OO\"}}",
         "[0].filters[0].args.statusCodes", "5OO"},
        {"{\"name\":\"CircuitBreaker\",\"args\":{\"failureRateThreshold\":"
         "\"0\"}}",
         "[0].filters[0].args.failureRateThreshold", "out of range"},
        {"{\"name\":\"CircuitBreaker\",\"args\":{\"slidingWindowType\":"
         "\"TIME_BASED\"}}",
         "[0].filters[0].args.slidingWindowType", "COUNT_BASED"},
        {"{\"name\":\"CircuitBreaker\",\"args\":{\"waitDurationInOpenState\":"
         "\"soon\"}}",
         "[0].filters[0].args.waitDurationInOpenState", "duration"},
        {"{\"name\":\"Retry\",\"args\":{\"series\":\"\",\"exceptions\":"
         "\"\"}}",
         "[0].filters[0].args.exceptions", "may not all be empty"},
        {"{\"name\":\"CircuitBreaker\",\"args\":{\"failureRateThreshold\":"
         "\"1e-50\"}}",
         "[0].filters[0].args.failureRateThreshold", "above 0"},
        {"{\"name\":\"CircuitBreaker\",\"args\":{\"slowCallRateThreshold\":"
         "\"1e-46\"}}",
         "[0].filters[0].args.slowCallRateThreshold", "above 0"},
        {"\"Retry=2\",\"AddRequestHeader=X-A,1\",\"Retry=3\"", "[0].filters[2]",
         "a route runs one Retry"},
        {"\"CircuitBreaker=a\",\"CircuitBreaker=b\"", "[0].filters[1]",
         "a route runs one CircuitBreaker"},
        {"{\"name\":\"CircuitBreaker\",\"args\":{\"nmae\":\"cb\"}}",
         "[0].filters[0].args.nmae", "unknown argument"},
        /* a resolver's name that no request can have: every request would
         * get an empty key (403), not a limit */
        {"{\"name\":\"RequestRateLimiter\",\"args\":{\"redis-rate-limiter."
         "replenishRate\":\"1\",\"key-resolver\":\"#{@header: X-User}\"}}",
         "[0].filters[0].args.key-resolver", "header name"},
        {"{\"name\":\"RequestRateLimiter\",\"args\":{\"redis-rate-limiter."
         "replenishRate\":\"1\",\"key-resolver\":\"#{@pathVariable:a b}\"}}",
         "[0].filters[0].args.key-resolver", "variable name"},
        /* a long known list still names the closest known argument */
        {"{\"name\":\"CircuitBreaker\",\"args\":{"
         "\"permittedNumberOfCallsInHalfOpenStat\":\"3\"}}",
         "[0].filters[0].args.permittedNumberOfCallsInHalfOpenStat",
         "did you mean permittedNumberOfCallsInHalfOpenState?"},
        {"{\"name\":\"RequestRateLimiter\",\"args\":{\"redis-rate-limiter."
         "replenishRate\":\"1\",\"redis-rate-limiter.burstCapacty\":\"2\"}}",
         "[0].filters[0].args.redis-rate-limiter.burstCapacty",
         "did you mean redis-rate-limiter.burstCapacity?"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char doc[600];
        snprintf(doc, sizeof doc,
                 "[{\"id\":\"r\",\"uri\":\"http://b\",\"filters\":[%s]}]",
                 bad[i].filter);
        sy_error e = parse_error(doc, NULL);
        ck_assert_msg(strcmp(e.path, bad[i].path) == 0, "%s: path %s", doc,
                      e.path);
        ck_assert_msg(strstr(e.message, bad[i].why), "%s: message %s", doc,
                      e.message);
    }
}
END_TEST

/* #{@pathVariable:NAME} reads a variable the route's Path or Host
 * patterns capture; a name none of them captures keys every request as
 * empty (deny-empty-key: 403 to all), never a limit: refused at the
 * resolver, naming it. */
START_TEST(a_path_variable_no_pattern_captures_is_refused) {
    static const struct {
        const char *preds, *var;
        bool ok;
    } cases[] = {
        {"\"Path=/u/{user}/**\"", "user", true},
        {"\"Path=/u/{user}/**\"", "nosuch", false},
        {"\"Path=/u/{user}\"", "use", false},
        {"\"Path=/a/{x},/b\"", "x", true},
        {"\"Path=/f/{*rest}\"", "rest", true},
        {"\"Path=/n/{id:[0-9]{2}}/x-{tail}\"", "id", true},
        {"\"Path=/n/{id:[0-9]{2}}/x-{tail}\"", "tail", true},
        {"\"Host={sub}.example.com\",\"Path=/h\"", "sub", true},
        {"\"Method=GET\"", "user", false},
        {"", "user", false},
    };
    for (size_t i = 0; i < SY_ARRAY_LEN(cases); i++) {
        char doc[600];
        snprintf(doc, sizeof doc,
                 "[{\"id\":\"r\",\"uri\":\"http://b\",\"predicates\":[%s],"
                 "\"filters\":[\"AddRequestHeader=X-A,1\",{\"name\":"
                 "\"RequestRateLimiter\",\"args\":{\"redis-rate-limiter."
                 "replenishRate\":\"1\",\"key-resolver\":"
                 "\"#{@pathVariable:%s}\"}}]}]",
                 cases[i].preds, cases[i].var);
        if (cases[i].ok) {
            parses(doc, NULL);
            continue;
        }
        sy_error e = parse_error(doc, NULL);
        ck_assert_int_eq(e.code, SY_EARG);
        ck_assert_msg(strcmp(e.path, "[0].filters[1].args.key-resolver") == 0,
                      "%s: path %s", doc, e.path);
        ck_assert_msg(strstr(e.message, cases[i].var) &&
                          strstr(e.message, "captures"),
                      "%s: message %s", doc, e.message);
    }
}
END_TEST

/* Past 64 args a typo was not looked at (the used bits stop there). */
START_TEST(a_typo_after_sixty_four_args_is_refused) {
    char doc[4096];
    size_t at = (size_t)snprintf(doc, sizeof doc,
                                 "[{\"id\":\"r\",\"uri\":\"http://b\","
                                 "\"filters\":[{\"name\":\"CircuitBreaker\","
                                 "\"args\":{");
    /* 64 spellings of statusCodes (a list: each is read) */
    for (int i = 0; i < 64; i++) {
        char name[40] = "statusCodes";
        for (int b = 0; b < 6; b++)
            if (i >> b & 1)
                name[b] = (char)(name[b] - 32); /* upper case */
        at += (size_t)snprintf(doc + at, sizeof doc - at, "\"%s\":\"500\",",
                               name);
    }
    snprintf(doc + at, sizeof doc - at, "\"zzTypo\":\"x\"}}]}]");
    sy_error e = parse_error(doc, NULL);
    ck_assert_msg(strcmp(e.path, "[0].filters[0].args.zzTypo") == 0, "%s: %s",
                  e.path, e.message);
}
END_TEST

START_TEST(scg_forms_are_accepted) {
    const char *docs[] = {
        /* Retry's 9-field shortcut (SCG 4.1.7+) */
        "[{\"id\":\"r\",\"uri\":\"http://b\",\"filters\":"
        "[\"Retry=3, BAD_GATEWAY, GET, 10ms, 50ms, 2, false, 0.5, 2s\"]}]",
        /* the 7-field one and relaxed names */
        "[{\"id\":\"r\",\"uri\":\"http://b\",\"filters\":"
        "[\"Retry=3,INTERNAL_SERVER_ERROR,GET,10ms,50ms,2,false\"]},"
        "{\"id\":\"r2\",\"uri\":\"http://b\",\"filters\":["
        "{\"name\":\"Retry\",\"args\":{\"retries\":2,\"series\":"
        "[\"server_error\",\"CLIENT_ERROR\"],\"methods\":\"GET,POST\","
        "\"exceptions\":\"java.io.IOException\",\"backoff.first-backoff\":"
        "\"100ms\"}}]}]",
        "[{\"id\":\"r\",\"uri\":\"http://b\",\"filters\":[{\"name\":"
        "\"RequestRateLimiter\",\"args\":{\"redis-rate-limiter.replenish-"
        "rate\":"
        "10,\"redis-rate-limiter.burst-capacity\":20,\"keyResolver\":"
        "\"#{@remoteAddrKeyResolver}\",\"rate-limiter\":"
        "\"#{@redisRateLimiter}\",\"denyEmptyKey\":false,\"emptyKeyStatus\":"
        "\"FORBIDDEN\",\"statusCode\":503}}]}]",
        "[{\"id\":\"r\",\"uri\":\"http://"
        "b\",\"filters\":[\"CircuitBreaker=cb\"]},"
        "{\"id\":\"r2\",\"uri\":\"http://b\",\"filters\":["
        "{\"name\":\"CircuitBreaker\",\"args\":{\"name\":\"cb2\","
        "\"fallbackUri\":"
        "\"forward:/fallback\",\"statusCodes\":[\"500\",\"BAD_GATEWAY\"],"
        "\"failureRateThreshold\":25.5,\"slowCallRateThreshold\":80,"
        "\"slowCallDurationThreshold\":\"2s\",\"slidingWindowSize\":10,"
        "\"minimumNumberOfCalls\":5,\"waitDurationInOpenState\":\"500ms\","
        "\"permittedNumberOfCallsInHalfOpenState\":3,\"timeoutDuration\":"
        "1500,\"warmupDuration\":\"10s\",\"resumeWithoutError\":true}}]}]",
    };
    for (size_t i = 0; i < sizeof docs / sizeof docs[0]; i++)
        parses(docs[i], NULL);
}
END_TEST

/* ---- retries ---- */

static const sy_retry_policy *retry_of(fix *f, const char *filters) {
    char doc[800];
    snprintf(doc, sizeof doc,
             "[{\"id\":\"r\",\"uri\":\"http://b\",\"filters\":[%s]}]", filters);
    fix_open(f, router_with(doc, NULL, NULL));
    return sy_match_retry_policy(fix_match(f, "/x"));
}

START_TEST(retry_follows_statuses_series_methods_and_exceptions) {
    fix f;
    const sy_retry_policy *p = retry_of(&f, "\"Retry=2, BAD_GATEWAY, POST\"");
    ck_assert_ptr_nonnull(p);
    sy_str post = {"POST", 4}, get = {"GET", 3};
    uint32_t d = 99;
    ck_assert(sy_retry_next(p, 0, post, SY_OUTCOME_5XX, 502, 0, 0, &d));
    ck_assert_uint_eq(d, 0);
    ck_assert(sy_retry_next(p, 1, post, SY_OUTCOME_5XX, 502, 0, 0, &d));
    ck_assert(!sy_retry_next(p, 2, post, SY_OUTCOME_5XX, 502, 0, 0, &d));
    ck_assert(!sy_retry_next(p, 0, get, SY_OUTCOME_5XX, 502, 0, 0, &d));
    /* SERVER_ERROR stays the default series */
    ck_assert(sy_retry_next(p, 0, post, SY_OUTCOME_5XX, 503, 0, 0, &d));
    ck_assert(!sy_retry_next(p, 0, post, SY_OUTCOME_SUCCESS, 404, 0, 0, &d));
    ck_assert(
        sy_retry_next(p, 0, post, SY_OUTCOME_CONNECT_FAILURE, 0, 0, 0, &d));
    ck_assert(sy_retry_next(p, 0, post, SY_OUTCOME_TIMEOUT, 0, 0, 0, &d));
    fix_close(&f);
    p = retry_of(&f,
                 "{\"name\":\"Retry\",\"args\":{\"series\":\"CLIENT_ERROR\","
                 "\"exceptions\":\"java.util.concurrent.TimeoutException\"}}");
    ck_assert(sy_retry_next(p, 0, get, SY_OUTCOME_SUCCESS, 404, 0, 0, &d));
    ck_assert(!sy_retry_next(p, 0, get, SY_OUTCOME_5XX, 500, 0, 0, &d));
    ck_assert(
        !sy_retry_next(p, 0, get, SY_OUTCOME_CONNECT_FAILURE, 0, 0, 0, &d));
    ck_assert(sy_retry_next(p, 0, get, SY_OUTCOME_TIMEOUT, 0, 0, 0, &d));
    fix_close(&f);
}
END_TEST

/* Status names as SCG reads them: its status parser upper-cases a name
 * (SetStatus, CircuitBreaker's statusCodes) and Retry's statuses bind as
 * an enum, which Spring Boot's lenient conversion reads (bad-gateway). */
START_TEST(status_names_are_read_as_scg_reads_them) {
    fix f;
    const sy_retry_policy *p = retry_of(
        &f, "{\"name\":\"Retry\",\"args\":{\"statuses\":[\"bad-gateway\","
            "\"GatewayTimeout\"],\"series\":[]}}");
    ck_assert_ptr_nonnull(p);
    sy_str get = {"GET", 3};
    uint32_t d;
    ck_assert(sy_retry_next(p, 0, get, SY_OUTCOME_5XX, 502, 0, 0, &d));
    ck_assert(sy_retry_next(p, 0, get, SY_OUTCOME_5XX, 504, 0, 0, &d));
    ck_assert(!sy_retry_next(p, 0, get, SY_OUTCOME_5XX, 503, 0, 0, &d));
    fix_close(&f);
    retry_of(&f, "\"SetStatus=not_found\"");
    ck_assert_int_eq(sy_match_status(f.m), 404);
    fix_close(&f);
    parses("[{\"id\":\"r\",\"uri\":\"http://b\",\"filters\":[{\"name\":"
           "\"CircuitBreaker\",\"args\":{\"name\":\"cb\",\"statusCodes\":"
           "[\"bad_gateway\",\"Service_Unavailable\"]}}]}]",
           NULL);
    /* SetStatus and statusCodes take no dashes: SCG's valueOf refuses them */
    sy_error e = parse_error("[{\"id\":\"r\",\"uri\":\"http://b\",\"filters\":"
                             "[\"SetStatus=not-found\"]}]",
                             NULL);
    ck_assert_int_eq(e.code, SY_EARG);
}
END_TEST

/* SCG binds statuses and methods as lists: a JSON array (a YAML list, as
 * `switchyard convert` writes it) is the list, not a field given twice; an
 * empty array is an empty list (Spring binds `series: []` as ""), not a
 * missing key that brings the SERVER_ERROR default back. */
START_TEST(retry_lists_as_arrays_and_empty_arrays_are_scgs) {
    fix f;
    const sy_retry_policy *p = retry_of(
        &f, "{\"name\":\"Retry\",\"args\":{\"statuses\":[\"BAD_GATEWAY\","
            "\"503\"],\"methods\":[\"GET\",\"POST\"],\"series\":[]}}");
    ck_assert_ptr_nonnull(p);
    sy_str post = {"POST", 4}, get = {"GET", 3};
    uint32_t d;
    ck_assert(sy_retry_next(p, 0, post, SY_OUTCOME_5XX, 502, 0, 0, &d));
    ck_assert(sy_retry_next(p, 0, get, SY_OUTCOME_5XX, 503, 0, 0, &d));
    ck_assert(!sy_retry_next(p, 0, get, SY_OUTCOME_5XX, 500, 0, 0, &d));
    fix_close(&f);
    /* the same list written three ways is one route (one fingerprint) */
    const char *forms[] = {
        "{\"name\":\"Retry\",\"args\":{\"statuses\":[\"502\",\"503\"]}}",
        "{\"name\":\"Retry\",\"args\":{\"statuses\":\"502, 503\"}}",
        "{\"name\":\"Retry\",\"args\":{\"statuses\":\"502,503\"}}"};
    uint64_t fp[3];
    for (int i = 0; i < 3; i++) {
        retry_of(&f, forms[i]);
        fp[i] = sy_route_fingerprint(sy_match_route(f.m));
        fix_close(&f);
    }
    ck_assert_uint_eq(fp[0], fp[1]);
    ck_assert_uint_eq(fp[0], fp[2]);
    /* every list empty: a Retry that never retries, refused as SCG does */
    sy_error e = parse_error(
        "[{\"id\":\"r\",\"uri\":\"http://b\",\"filters\":[{\"name\":"
        "\"Retry\",\"args\":{\"series\":[],\"exceptions\":[]}}]}]",
        NULL);
    ck_assert_int_eq(e.code, SY_EARG);
    ck_assert_str_eq(e.path, "[0].filters[0].args.exceptions");
}
END_TEST

START_TEST(retry_backoff_grows_by_factor_caps_and_jitters) {
    fix f;
    const sy_retry_policy *p =
        retry_of(&f, "\"Retry=5, BAD_GATEWAY, GET, 10ms, 50ms, 2, false\"");
    sy_str get = {"GET", 3};
    uint32_t want[] = {10, 20, 40, 50, 50}, d;
    for (uint32_t i = 0; i < 5; i++) {
        ck_assert(sy_retry_next(p, i, get, SY_OUTCOME_5XX, 502, 0, 0, &d));
        ck_assert_uint_eq(d, want[i]);
    }
    sy_retry_info ri;
    sy_retry_policy_info(p, &ri);
    ck_assert_uint_eq(ri.retries, 5);
    ck_assert_uint_eq(ri.first_backoff_ms, 10);
    ck_assert_uint_eq(ri.max_backoff_ms, 50);
    ck_assert_uint_eq(ri.factor, 2);
    ck_assert(!ri.based_on_previous);
    fix_close(&f);
    p = retry_of(&f, "\"Retry=3, BAD_GATEWAY, GET, 100ms, 1s, 2, true, 0.5, "
                     "250ms\"");
    uint32_t lo = UINT32_MAX, hi = 0;
    for (uint64_t rnd = 0; rnd < 200; rnd++) {
        ck_assert(sy_retry_next(p, 0, get, SY_OUTCOME_5XX, 502, 0,
                                rnd * 0x9e3779b97f4a7c15ull, &d));
        lo = d < lo ? d : lo;
        hi = d > hi ? d : hi;
    }
    /* 100 ms +- 50, never below firstBackoff (Reactor's jitter) */
    ck_assert_uint_ge(lo, 100);
    ck_assert_uint_le(hi, 150);
    ck_assert_uint_lt(lo, 110);
    ck_assert_uint_gt(hi, 140);
    /* the timeout: no retry whose delay would end past 250 ms */
    ck_assert(!sy_retry_next(p, 0, get, SY_OUTCOME_5XX, 502, 200, 0, &d));
    fix_close(&f);
    /* capped at maxBackoff, the jitter does not take it past the cap */
    p = retry_of(&f, "\"Retry=3, BAD_GATEWAY, GET, 100ms, 150ms, 2, true, "
                     "0.5\"");
    lo = UINT32_MAX, hi = 0;
    for (uint64_t rnd = 0; rnd < 200; rnd++) {
        ck_assert(sy_retry_next(p, 1, get, SY_OUTCOME_5XX, 502, 0,
                                rnd * 0x9e3779b97f4a7c15ull, &d));
        lo = d < lo ? d : lo;
        hi = d > hi ? d : hi;
    }
    ck_assert_uint_ge(lo, 100);
    ck_assert_uint_le(hi, 150);
    ck_assert_uint_lt(lo, 110);
    fix_close(&f);
}
END_TEST

/* Durations past what the breaker and the retry run with were clamped:
 * waitDurationInOpenState 50d ran as 49.7 days (4294967295 ms), and a
 * Retry delay was capped at one day (firstBackoff 2d waited 1d). Refused
 * past 4294967295 ms at the arg; a delay up to that is waited as given. */
START_TEST(long_durations_are_refused_or_run_not_clamped) {
    static const struct {
        const char *filter, *path;
    } bad[] = {
        {"{\"name\":\"CircuitBreaker\",\"args\":{\"waitDurationInOpenState\":"
         "\"50d\"}}",
         "[0].filters[0].args.waitDurationInOpenState"},
        {"{\"name\":\"CircuitBreaker\",\"args\":{\"timeoutDuration\":"
         "\"4294967296\"}}",
         "[0].filters[0].args.timeoutDuration"},
        {"{\"name\":\"Retry\",\"args\":{\"backoff.firstBackoff\":\"P50D\"}}",
         "[0].filters[0].args.backoff.firstBackoff"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char doc[600];
        snprintf(doc, sizeof doc,
                 "[{\"id\":\"r\",\"uri\":\"http://b\",\"filters\":[%s]}]",
                 bad[i].filter);
        sy_error e = parse_error(doc, NULL);
        ck_assert_int_eq(e.code, SY_ERANGE);
        ck_assert_msg(strcmp(e.path, bad[i].path) == 0, "%s: path %s", doc,
                      e.path);
    }
    fix f;
    const sy_retry_policy *p = retry_of(
        &f, "{\"name\":\"Retry\",\"args\":{\"statuses\":\"BAD_GATEWAY\","
            "\"backoff.firstBackoff\":\"2d\",\"backoff.factor\":\"2\"}}");
    sy_str get = {"GET", 3};
    uint32_t d;
    ck_assert(sy_retry_next(p, 0, get, SY_OUTCOME_5XX, 502, 0, 0, &d));
    ck_assert_uint_eq(d, 172800000u);
    ck_assert(sy_retry_next(p, 1, get, SY_OUTCOME_5XX, 502, 0, 0, &d));
    ck_assert_uint_eq(d, 345600000u);
    fix_close(&f);
}
END_TEST

/* A duration finer than a millisecond was cut to whole milliseconds:
 * backoff.firstBackoff 500us (SCG: 0.5, 1, 2, 4 ms with factor 2) ran
 * every retry at once (0 x factor^n), and warmupDuration PT0.0005S turned
 * the recovery off. Refused at the arg; whole milliseconds in any unit
 * are run as written. */
START_TEST(sub_millisecond_durations_are_refused_not_cut) {
    static const struct {
        const char *filter, *path;
    } bad[] = {
        {"{\"name\":\"Retry\",\"args\":{\"backoff.firstBackoff\":\"500us\"}}",
         "[0].filters[0].args.backoff.firstBackoff"},
        {"{\"name\":\"Retry\",\"args\":{\"timeout\":\"1500000ns\"}}",
         "[0].filters[0].args.timeout"},
        {"{\"name\":\"CircuitBreaker\",\"args\":{\"warmupDuration\":"
         "\"PT0.0005S\"}}",
         "[0].filters[0].args.warmupDuration"},
        {"{\"name\":\"CircuitBreaker\",\"args\":{\"timeoutDuration\":"
         "\"PT1.0001S\"}}",
         "[0].filters[0].args.timeoutDuration"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char doc[600];
        snprintf(doc, sizeof doc,
                 "[{\"id\":\"r\",\"uri\":\"http://b\",\"filters\":[%s]}]",
                 bad[i].filter);
        sy_error e = parse_error(doc, NULL);
        ck_assert_int_eq(e.code, SY_EARG);
        ck_assert_msg(strcmp(e.path, bad[i].path) == 0, "%s: path %s", doc,
                      e.path);
        ck_assert_msg(strstr(e.message, "whole milliseconds"), "%s: %s", doc,
                      e.message);
    }
    fix f;
    const sy_retry_policy *p = retry_of(
        &f, "{\"name\":\"Retry\",\"args\":{\"statuses\":\"BAD_GATEWAY\","
            "\"backoff.firstBackoff\":\"2000us\",\"backoff.maxBackoff\":"
            "\"PT0.0080S\",\"backoff.factor\":\"2\"}}");
    sy_str get = {"GET", 3};
    uint32_t want[] = {2, 4, 8}, d;
    for (uint32_t i = 0; i < 3; i++) {
        ck_assert(sy_retry_next(p, i, get, SY_OUTCOME_5XX, 502, 0, 0, &d));
        ck_assert_uint_eq(d, want[i]);
    }
    fix_close(&f);
}
END_TEST

/* ---- circuit breaking ---- */

#define CB_ROUTE(ARGS)                                                         \
    "[{\"id\":\"cb\",\"uri\":\"http://b\",\"filters\":[{\"name\":"             \
    "\"CircuitBreaker\",\"args\":{\"name\":\"orders\",\"fallbackUri\":"        \
    "\"forward:/fallback\"," ARGS "}}]}]"

static sy_breaker_permit ask(fix *f, int64_t now) {
    sy_breaker_permit p;
    ck_assert_int_eq(
        sy_match_breaker_acquire(fix_match(f, "/x"), now, &p, NULL), 0);
    ck_assert(p.breaker);
    return p;
}

static sy_breaker_state state_of(fix *f) {
    sy_breaker_info bi;
    ck_assert_int_eq(sy_policy_store_breaker(sy_router_policy_store(f->r),
                                             "orders", &bi, NULL),
                     0);
    return bi.state;
}

/* A host's clock and random source (sy_router_options.clock_ms,
 * .random), for the calls given now_ms 0 and random 0. */
static int64_t fake_now;
static int fake_random_calls;
static int64_t fake_clock(void *data) {
    (void)data;
    return fake_now;
}
static uint64_t fake_random(void *data) {
    (void)data;
    fake_random_calls++;
    return 0x9e3779b97f4a7c15ull;
}

static sy_router *clocked_router(const char *doc) {
    sy_router *r;
    sy_router_options o = SY_ROUTER_OPTIONS_INIT;
    o.clock_ms = fake_clock;
    o.random = fake_random;
    ck_assert_int_eq(sy_router_new(&o, &r, NULL), 0);
    ck_assert_int_eq(sy_router_add_source(r, "s", NULL), 0);
    ck_assert_int_eq(sy_router_apply(r, "s", doc, strlen(doc), NULL, NULL), 0);
    return r;
}

/* now_ms 0 in sy_breaker_record reads the clock sy_match_breaker_acquire
 * reads (the router's callback): a breaker opened by records on a host's
 * clock half-opens when that clock has passed waitDurationInOpenState.
 * The record read real time: the breaker opened at today's date and never
 * half-opened on a test's (or a replay's) clock. */
START_TEST(a_record_at_now_zero_reads_the_routers_clock) {
    fix f;
    fake_now = T0;
    fix_open(&f, clocked_router(CB_ROUTE("\"slidingWindowSize\":2,"
                                         "\"minimumNumberOfCalls\":2,"
                                         "\"waitDurationInOpenState\":\"1s\","
                                         "\"permittedNumberOfCallsInHalfOpen"
                                         "State\":1")));
    for (int i = 0; i < 2; i++) {
        sy_breaker_permit p = ask(&f, 0);
        ck_assert(p.permitted);
        ck_assert_int_eq(sy_breaker_record(&p, SY_OUTCOME_TIMEOUT, 0, 5, 0),
                         SY_BREAKER_FALLBACK);
    }
    ck_assert_int_eq(state_of(&f), SY_BREAKER_OPEN);
    fake_now = T0 + 999;
    ck_assert(!ask(&f, 0).permitted);
    fake_now = T0 + 1000; /* opened at T0 on the router's clock */
    sy_breaker_permit h = ask(&f, 0);
    ck_assert(h.permitted);
    ck_assert_int_eq(h.state, SY_BREAKER_HALF_OPEN);
    /* and the half-open one opens again at the router's time */
    fake_now = T0 + 1500;
    sy_breaker_record(&h, SY_OUTCOME_CONNECT_FAILURE, 0, 5, 0);
    ck_assert_int_eq(state_of(&f), SY_BREAKER_OPEN);
    fake_now = T0 + 2499;
    ck_assert(!ask(&f, 0).permitted);
    fake_now = T0 + 2500;
    ck_assert(ask(&f, 0).permitted);
    fix_close(&f);
}
END_TEST

/* sy_retry_next's random is used as given, 0 too: the policy alone is
 * passed (no router, no match), so it cannot reach a router's random
 * callback, and the call stays pure (the same arguments, the same delay:
 * a replay passes the recorded number). 0 is a draw like any other, the
 * jitter range's lowest delay; a host draws from its own source (the
 * Python binding's RetryPolicy.next does, from the router's random). */
START_TEST(retry_random_zero_is_a_draw_not_the_routers_source) {
    fix f;
    fake_random_calls = 0;
    char doc[400];
    snprintf(doc, sizeof doc,
             "[{\"id\":\"r\",\"uri\":\"http://b\",\"filters\":[\"Retry=3, "
             "BAD_GATEWAY, GET, 100ms, 1s, 2, false, 0.5\"]}]");
    fix_open(&f, clocked_router(doc));
    const sy_retry_policy *p = sy_match_retry_policy(fix_match(&f, "/x"));
    ck_assert_ptr_nonnull(p);
    int calls = fake_random_calls; /* the match may have drawn a seed */
    sy_str get = {"GET", 3};
    uint32_t d0, d;
    ck_assert(sy_retry_next(p, 0, get, SY_OUTCOME_5XX, 502, 0, 0, &d0));
    ck_assert_uint_eq(d0, 100); /* 100 ms - 50, kept at firstBackoff */
    for (int i = 0; i < 8; i++) {
        ck_assert(sy_retry_next(p, 0, get, SY_OUTCOME_5XX, 502, 0, 0, &d));
        ck_assert_uint_eq(d, d0);
    }
    ck_assert_int_eq(fake_random_calls, calls);
    /* the router's own draw, passed by the host, jitters */
    ck_assert(sy_retry_next(p, 0, get, SY_OUTCOME_5XX, 502, 0,
                            fake_random(NULL), &d));
    ck_assert_uint_ne(d, d0);
    ck_assert_uint_le(d, 150);
    fix_close(&f);
}
END_TEST

/* A document of n routes r<first>.. whose breakers are named b<k>..,
 * in buf. */
static const char *breaker_doc(char *buf, size_t cap, int first, int n,
                               int name0) {
    size_t o = (size_t)snprintf(buf, cap, "[");
    for (int i = 0; i < n; i++)
        o += (size_t)snprintf(buf + o, cap - o,
                              "%s{\"id\":\"r%d\",\"uri\":\"http://b\","
                              "\"predicates\":[\"Path=/r%d\"],\"filters\":[{"
                              "\"name\":\"CircuitBreaker\",\"args\":{\"name\":"
                              "\"b%d\"}}]}",
                              i ? "," : "", first + i, first + i, name0 + i);
    snprintf(buf + o, cap - o, "]");
    return buf;
}

static size_t live_routes(sy_router *r) {
    sy_snapshot *s = sy_router_acquire(r);
    size_t n = sy_snapshot_route_count(s);
    sy_snapshot_release(s);
    return n;
}

/* A router of its own store of `breakers` breaker entries, source "s". */
static sy_router *breaker_router(uint32_t breakers) {
    sy_router *r;
    sy_router_options o = SY_ROUTER_OPTIONS_INIT;
    o.policy_breakers = breakers;
    ck_assert_int_eq(sy_router_new(&o, &r, NULL), 0);
    ck_assert_int_eq(sy_router_add_source(r, "s", NULL), 0);
    return r;
}

START_TEST(a_breaker_the_store_has_no_entry_for_is_refused_at_commit) {
    sy_router *r = breaker_router(16);
    static char doc[8192];
    sy_error e;
    /* a check looks and claims nothing */
    sy_policy_stats st;
    sy_change_set *cs;
    ck_assert_int_eq(sy_change_set_new(r, &cs, NULL), 0);
    breaker_doc(doc, sizeof doc, 200, 1, 200);
    ck_assert_int_eq(sy_change_set_apply(cs, "s", doc, strlen(doc), NULL), 0);
    ck_assert_int_eq(sy_router_check(r, cs, NULL, &e), 0);
    sy_policy_store_stats(sy_router_policy_store(r), &st);
    ck_assert_uint_eq(st.breakers_used, 0);
    /* 20 names, 16 entries: the 17th breaker would never run (the first
     * 16 are given back with the refused commit) */
    breaker_doc(doc, sizeof doc, 0, 20, 0);
    ck_assert_int_eq(sy_router_apply(r, "s", doc, strlen(doc), NULL, &e),
                     SY_ELIMIT);
    ck_assert_str_eq(e.path, "[16].filters[0].args.name"); /* a bare array */
    ck_assert_ptr_nonnull(strstr(e.message, "policy_breakers"));
    ck_assert_uint_eq(live_routes(r), 0);
    sy_policy_store_stats(sy_router_policy_store(r), &st);
    ck_assert_uint_eq(st.breakers_used, 0);
    /* 16 names fit; other routes naming the same breakers need none */
    breaker_doc(doc, sizeof doc, 0, 16, 0);
    ck_assert_int_eq(sy_router_apply(r, "s", doc, strlen(doc), NULL, &e), 0);
    breaker_doc(doc, sizeof doc, 100, 16, 0);
    ck_assert_int_eq(sy_router_apply(r, "s", doc, strlen(doc), NULL, &e), 0);
    ck_assert_uint_eq(live_routes(r), 16);
    /* one new name more: refused, the live routes untouched */
    const char *one = "{\"id\":\"x\",\"uri\":\"http://b\",\"filters\":[{"
                      "\"name\":\"CircuitBreaker\",\"args\":{\"name\":"
                      "\"new\"}}]}";
    ck_assert_int_eq(sy_router_upsert_route(r, "s", one, strlen(one), &e),
                     SY_ELIMIT);
    ck_assert_str_eq(e.path, "route.filters[0].args.name");
    ck_assert_uint_eq(live_routes(r), 16);
    sy_policy_store_stats(sy_router_policy_store(r), &st);
    ck_assert_uint_eq(st.breakers_used, 16);
    /* a check of a new name on the full store: refused, nothing claimed */
    ck_assert_int_eq(sy_router_check(r, cs, NULL, &e), SY_ELIMIT);
    ck_assert_str_eq(e.path, "[0].filters[0].args.name");
    sy_change_set_free(cs);
    sy_router_free(r);
}
END_TEST

static size_t breakers_used(sy_router *r) {
    sy_policy_stats st;
    sy_policy_store_stats(sy_router_policy_store(r), &st);
    return (size_t)st.breakers_used;
}

static int upsert_breaker(sy_router *r, const char *id, const char *name,
                          int window) {
    char doc[256];
    int n = snprintf(doc, sizeof doc,
                     "{\"id\":\"%s\",\"uri\":\"http://b\",\"predicates\":"
                     "[\"Path=/%s\"],\"filters\":[{\"name\":\"CircuitBreaker\","
                     "\"args\":{\"name\":\"%s\",\"slidingWindowSize\":%d,"
                     "\"minimumNumberOfCalls\":1}}]}",
                     id, id, name, window);
    sy_error e;
    int rc = sy_router_upsert_route(r, "s", doc, (size_t)n, &e);
    ck_assert_msg(rc == 0, "%s %s: %s: %s", id, name, e.path, e.message);
    return rc;
}

/* A gateway sees routes come and go for days: the breaker entries of
 * removed routes, and of names a changed config left, are given back. */
START_TEST(removed_and_renamed_breakers_give_their_entries_back) {
    sy_router *r = breaker_router(16);
    sy_error e;
    char id[32], name[32];
    /* 200 routes added then removed, each with its own breaker name */
    for (int i = 0; i < 200; i++) {
        snprintf(id, sizeof id, "r%d", i);
        snprintf(name, sizeof name, "n%d", i);
        upsert_breaker(r, id, name, 10);
        ck_assert_uint_eq(breakers_used(r), 1);
        ck_assert_int_eq(sy_router_remove_route(r, id, &e), 0);
        ck_assert_uint_eq(breakers_used(r), 0);
    }
    /* one route whose breaker is renamed (and reconfigured) 200 times */
    for (int i = 0; i < 200; i++) {
        snprintf(name, sizeof name, "m%d", i);
        upsert_breaker(r, "a", name, 10 + i % 7);
        ck_assert_uint_eq(breakers_used(r), 1);
    }
    /* half a table of names replaced by another half, 20 times (the
     * names a document replaces are live until it is published: they and
     * the new ones need room together) */
    ck_assert_int_eq(sy_router_remove_route(r, "a", &e), 0);
    static char doc[8192];
    for (int k = 0; k < 20; k++) {
        breaker_doc(doc, sizeof doc, 0, 8, k * 8);
        ck_assert_msg(sy_router_apply(r, "s", doc, strlen(doc), NULL, &e) == 0,
                      "%s: %s", e.path, e.message);
        ck_assert_uint_eq(breakers_used(r), 8);
    }
    sy_router_free(r);
}
END_TEST

/* An entry stays while a snapshot can reach its route; once freed and
 * taken by another name, the new breaker starts closed with an empty
 * window, whatever the old one's state was. */
START_TEST(a_freed_entry_waits_for_readers_and_is_reused_clean) {
    sy_router *r = breaker_router(16);
    fix f;
    fix_open(&f, r);
    char id[32], name[32];
    /* 16 breakers, every one opened by a failure */
    for (int i = 0; i < 16; i++) {
        snprintf(id, sizeof id, "r%d", i);
        snprintf(name, sizeof name, "old%d", i);
        upsert_breaker(r, id, name, 1);
        char path[40];
        snprintf(path, sizeof path, "/%s", id);
        sy_breaker_permit p;
        sy_match_breaker_acquire(fix_match(&f, path), T0, &p, NULL);
        ck_assert(p.permitted);
        sy_breaker_record(&p, SY_OUTCOME_CONNECT_FAILURE, 0, 1, T0);
        sy_match_breaker_acquire(fix_match(&f, path), T0, &p, NULL);
        ck_assert(!p.permitted);
    }
    ck_assert_uint_eq(breakers_used(r), 16);
    sy_snapshot_release(f.s);
    f.s = NULL;
    /* a reader holds the snapshot that reaches old0's route */
    sy_snapshot *held = sy_router_acquire(r);
    sy_error e;
    ck_assert_int_eq(sy_router_remove_route(r, "r0", &e), 0);
    ck_assert_uint_eq(breakers_used(r), 16);
    const char *q = "{\"id\":\"q\",\"uri\":\"http://b\",\"filters\":"
                    "[\"CircuitBreaker=new\"]}";
    ck_assert_int_eq(sy_router_upsert_route(r, "s", q, strlen(q), &e),
                     SY_ELIMIT); /* old0 still reachable: no room */
    sy_breaker_info bi;
    ck_assert_int_eq(
        sy_policy_store_breaker(sy_router_policy_store(r), "old0", &bi, NULL),
        0);
    ck_assert_int_eq(bi.state, SY_BREAKER_OPEN);
    sy_snapshot_release(held);
    /* the next commit buries it */
    for (int i = 0; i < 16; i++) {
        snprintf(id, sizeof id, "r%d", i);
        if (i)
            ck_assert_int_eq(sy_router_remove_route(r, id, &e), 0);
        snprintf(id, sizeof id, "n%d", i);
        snprintf(name, sizeof name, "new%d", i);
        upsert_breaker(r, id, name, 1);
        ck_assert_int_eq(
            sy_policy_store_breaker(sy_router_policy_store(r), name, &bi, NULL),
            0);
        ck_assert_int_eq(bi.state, SY_BREAKER_CLOSED);
        ck_assert_uint_eq(bi.calls, 0);
        ck_assert_uint_eq(bi.failures, 0);
    }
    ck_assert_int_eq(
        sy_policy_store_breaker(sy_router_policy_store(r), "old0", &bi, NULL),
        SY_ENOTFOUND);
    ck_assert_uint_eq(breakers_used(r), 16);
    fix_close(&f);
}
END_TEST

/* Two routes name one breaker: removing one keeps its state. */
START_TEST(a_shared_breaker_stays_while_one_route_names_it) {
    fix f;
    fix_open(
        &f,
        router_with(
            "[{\"id\":\"a\",\"uri\":\"http://b\",\"predicates\":[\"Path=/x\"],"
            "\"filters\":[\"CircuitBreaker=shared\"]},"
            "{\"id\":\"b\",\"uri\":\"http://b\",\"predicates\":[\"Path=/y\"],"
            "\"filters\":[\"CircuitBreaker=shared\"]}]",
            NULL, NULL));
    sy_breaker_permit p;
    for (int i = 0; i < 100; i++) {
        sy_match_breaker_acquire(fix_match(&f, "/x"), T0, &p, NULL);
        sy_breaker_record(&p, SY_OUTCOME_CONNECT_FAILURE, 0, 1, T0);
    }
    ck_assert_int_eq(sy_router_remove_route(f.r, "a", NULL), 0);
    sy_match_breaker_acquire(fix_match(&f, "/y"), T0, &p, NULL);
    ck_assert(p.breaker);
    ck_assert(!p.permitted); /* b's breaker is the one a opened */
    ck_assert_uint_eq(breakers_used(f.r), 1);
    sy_snapshot_release(f.s); /* no reader reaches b after its removal */
    f.s = NULL;
    ck_assert_int_eq(sy_router_remove_route(f.r, "b", NULL), 0);
    ck_assert_uint_eq(breakers_used(f.r), 0);
    fix_close(&f);
}
END_TEST

/* The routers whose routes name breaker `name` (the owner bits of its
 * entry; 0 when it has none). */
static unsigned owners_of(sy_policy_store *st, const char *name) {
    sy__brk *b = sy__store_breaker(st, sy__brk_key(name, strlen(name)));
    unsigned n = 0;
    for (size_t w = 0; b && w < SY_OWNER_WORDS; w++)
        n += (unsigned)__builtin_popcountll(
            atomic_load(&sy__store_users(st, b)[w]));
    return n;
}

/* The live routes of r naming breaker `name`, checked against the store:
 * r's bit is set exactly when it has one. */
static unsigned uses_of(sy_router *r, const char *name) {
    uint64_t key = sy__brk_key(name, strlen(name));
    unsigned n = sy__router_brk_uses(r, key);
    sy__brk *b = sy__store_breaker(sy_router_policy_store(r), key);
    int o = r->brk_owner;
    bool bit =
        b &&
        (atomic_load(&sy__store_users(sy_router_policy_store(r), b)[o / 64]) >>
             (o % 64) &
         1);
    ck_assert_msg(bit == (n > 0), "%s: %u uses, bit %d", name, n, bit);
    return n;
}

/* The counts follow the routes through every kind of change: an update
 * keeping the name, a disable and an enable, unnamed breakers of the
 * default filters (one per route id), a document dropping them all, a
 * rollback bringing them back, a refused commit. */
START_TEST(breaker_counts_follow_every_kind_of_change) {
    sy_router *r = breaker_router(16);
    static const char v1[] =
        "{\"version\":\"1\",\"routes\":["
        "{\"id\":\"a\",\"uri\":\"http://b\",\"predicates\":[\"Path=/a\"],"
        "\"filters\":[\"CircuitBreaker=x\"]},"
        "{\"id\":\"b\",\"uri\":\"http://b\",\"predicates\":[\"Path=/b\"],"
        "\"filters\":[\"CircuitBreaker=x\"]},"
        "{\"id\":\"c\",\"uri\":\"http://b\",\"predicates\":[\"Path=/c\"],"
        "\"filters\":[{\"name\":\"CircuitBreaker\"}]}]}";
    static const char v2[] =
        "{\"version\":\"2\",\"routes\":[{\"id\":\"z\",\"uri\":\"http://b\"}]}";
    sy_error e;
    ck_assert_int_eq(sy_router_apply(r, "s", v1, strlen(v1), NULL, &e), 0);
    ck_assert_uint_eq(uses_of(r, "x"), 2);
    ck_assert_uint_eq(uses_of(r, "c"), 1);
    /* a's and b's breaker reconfigured under the same name (one change
     * set: routes naming one breaker give it the same settings), a
     * disabled, enabled */
    sy_change_set *cs;
    ck_assert_int_eq(sy_change_set_new(r, &cs, NULL), 0);
    for (int k = 0; k < 2; k++) {
        char q[256];
        int qn =
            snprintf(q, sizeof q,
                     "{\"id\":\"%s\",\"uri\":\"http://b\",\"predicates\":"
                     "[\"Path=/%s\"],\"filters\":[{\"name\":\"CircuitBreaker\","
                     "\"args\":{\"name\":\"x\",\"slidingWindowSize\":7}}]}",
                     k ? "b" : "a", k ? "b" : "a");
        ck_assert_int_eq(
            sy_change_set_upsert_route(cs, "s", q, (size_t)qn, NULL), 0);
    }
    ck_assert_int_eq(sy_router_commit(r, cs, NULL, &e), 0);
    sy_change_set_free(cs);
    sy_router_reclaim(r);
    ck_assert_uint_eq(uses_of(r, "x"), 2);
    ck_assert_int_eq(sy_router_set_route_enabled(r, "a", false, &e), 0);
    ck_assert_int_eq(sy_router_set_route_enabled(r, "b", false, &e), 0);
    sy_router_reclaim(r);
    ck_assert_uint_eq(uses_of(r, "x"), 2);
    ck_assert_int_eq(sy_router_set_route_enabled(r, "a", true, &e), 0);
    sy_router_reclaim(r);
    ck_assert_uint_eq(uses_of(r, "x"), 2);
    ck_assert_uint_eq(breakers_used(r), 2);
    /* a document without them: the entries go once buried */
    ck_assert_int_eq(sy_router_apply(r, "s", v2, strlen(v2), NULL, &e), 0);
    sy_router_reclaim(r);
    ck_assert_uint_eq(uses_of(r, "x"), 0);
    ck_assert_uint_eq(uses_of(r, "c"), 0);
    ck_assert_uint_eq(breakers_used(r), 0);
    /* the kept version 1 back, twice (a rollback of a rollback) */
    for (int k = 0; k < 2; k++) {
        ck_assert_int_eq(sy_router_rollback(r, "s", "1", NULL, &e), 0);
        sy_router_reclaim(r);
        ck_assert_uint_eq(uses_of(r, "x"), 2);
        ck_assert_uint_eq(uses_of(r, "c"), 1);
        ck_assert_int_eq(sy_router_rollback(r, "s", "2", NULL, &e), 0);
        sy_router_reclaim(r);
        ck_assert_uint_eq(breakers_used(r), 0);
    }
    ck_assert_int_eq(sy_router_rollback(r, "s", "1", NULL, &e), 0);
    /* a refused commit (a 17th name) gives back what it claimed */
    static char doc[8192];
    breaker_doc(doc, sizeof doc, 0, 15, 0);
    ck_assert_int_eq(sy_router_apply(r, "s", doc, strlen(doc), NULL, &e),
                     SY_ELIMIT);
    ck_assert_uint_eq(uses_of(r, "x"), 2);
    ck_assert_uint_eq(uses_of(r, "b0"), 0);
    ck_assert_uint_eq(breakers_used(r), 2);
    sy_router_free(r);
}
END_TEST

/* A publish refused after the new routes were attached (too many retired
 * snapshots held) gives their entries back with them. */
START_TEST(a_publish_refused_after_the_attach_gives_the_entries_back) {
    sy_router *r;
    sy_router_options o = SY_ROUTER_OPTIONS_INIT;
    o.policy_breakers = 16;
    o.max_retired = 1;
    ck_assert_int_eq(sy_router_new(&o, &r, NULL), 0);
    ck_assert_int_eq(sy_router_add_source(r, "s", NULL), 0);
    sy_snapshot *h1 = sy_router_acquire(r);
    upsert_breaker(r, "a", "one", 5);
    sy_snapshot *h2 = sy_router_acquire(r);
    char q[256];
    int n = snprintf(q, sizeof q,
                     "{\"id\":\"q\",\"uri\":\"http://b\",\"filters\":"
                     "[\"CircuitBreaker=two\"]}");
    sy_error e;
    ck_assert_int_eq(sy_router_upsert_route(r, "s", q, (size_t)n, &e),
                     SY_EBUSY);
    ck_assert_uint_eq(uses_of(r, "two"), 0);
    ck_assert_uint_eq(uses_of(r, "one"), 1);
    ck_assert_uint_eq(breakers_used(r), 1);
    sy_snapshot_release(h1);
    sy_snapshot_release(h2);
    ck_assert_int_eq(sy_router_upsert_route(r, "s", q, (size_t)n, &e), 0);
    ck_assert_uint_eq(uses_of(r, "two"), 1);
    sy_router_free(r);
}
END_TEST

/* Two routers on one store (two workers): a name both use stays, with
 * its state, while either has a route naming it. */
START_TEST(routers_sharing_a_store_count_each_others_routes) {
    size_t len = sy_policy_store_bytes(64, 16);
    void *mem = aligned_alloc(64, len);
    sy_policy_store *st;
    ck_assert_int_eq(sy_policy_store_init(mem, len, 64, 16, &st, NULL), 0);
    static const char doc[] =
        "[{\"id\":\"a\",\"uri\":\"http://b\",\"predicates\":[\"Path=/a\"],"
        "\"filters\":[{\"name\":\"CircuitBreaker\",\"args\":{\"name\":\"s\","
        "\"slidingWindowSize\":1,\"minimumNumberOfCalls\":1,"
        "\"waitDurationInOpenState\":\"1h\"}}]}]";
    fix f1, f2;
    fix_open(&f1, router_with(doc, st, NULL));
    fix_open(&f2, router_with(doc, st, NULL));
    ck_assert_uint_eq(owners_of(st, "s"), 2);
    sy_breaker_permit p;
    sy_match_breaker_acquire(fix_match(&f1, "/a"), T0, &p, NULL);
    sy_breaker_record(&p, SY_OUTCOME_CONNECT_FAILURE, 0, 1, T0);
    sy_snapshot_release(f1.s);
    f1.s = NULL;
    ck_assert_int_eq(sy_router_remove_route(f1.r, "a", NULL), 0);
    sy_router_reclaim(f1.r);
    ck_assert_uint_eq(owners_of(st, "s"), 1);
    sy_match_breaker_acquire(fix_match(&f2, "/a"), T0 + 1, &p, NULL);
    ck_assert(!p.permitted); /* still the breaker f1 opened */
    /* a router freed with its routes live gives them back too */
    fix_close(&f2);
    ck_assert_uint_eq(owners_of(st, "s"), 0);
    sy_policy_stats ps;
    sy_policy_store_stats(st, &ps);
    ck_assert_uint_eq(ps.breakers_used, 0);
    fix_close(&f1);
    free(mem);
}
END_TEST

/* A store serves SY_STORE_OWNERS routers at once: one more is refused,
 * located, until one is freed. */
START_TEST(a_store_serves_a_bounded_number_of_routers) {
    size_t len = sy_policy_store_bytes(64, 16);
    void *mem = aligned_alloc(64, len);
    sy_policy_store *st;
    ck_assert_int_eq(sy_policy_store_init(mem, len, 64, 16, &st, NULL), 0);
    sy_router_options o = SY_ROUTER_OPTIONS_INIT;
    o.policy_store = st;
    static sy_router *rs[SY_STORE_OWNERS];
    for (unsigned i = 0; i < SY_STORE_OWNERS; i++)
        ck_assert_int_eq(sy_router_new(&o, &rs[i], NULL), 0);
    sy_router *x;
    sy_error e;
    ck_assert_int_eq(sy_router_new(&o, &x, &e), SY_ELIMIT);
    ck_assert_str_eq(e.path, "policy_store");
    sy_router_free(rs[7]);
    ck_assert_int_eq(sy_router_new(&o, &rs[7], NULL), 0);
    for (unsigned i = 0; i < SY_STORE_OWNERS; i++)
        sy_router_free(rs[i]);
    free(mem);
}
END_TEST

START_TEST(a_breaker_or_retry_in_the_defaults_and_a_route_is_refused) {
    static const char *defs[2] = {
        "[{\"name\":\"CircuitBreaker\",\"args\":{\"name\":\"d\"}}]",
        "[{\"name\":\"Retry\",\"args\":{\"retries\":2}}]"};
    static const char *names[2] = {"CircuitBreaker", "Retry"};
    for (int k = 0; k < 2; k++) {
        sy_router *r;
        sy_router_options o = SY_ROUTER_OPTIONS_INIT;
        o.default_filters = defs[k];
        ck_assert_int_eq(sy_router_new(&o, &r, NULL), 0);
        ck_assert_int_eq(sy_router_add_source(r, "s", NULL), 0);
        char doc[512];
        snprintf(doc, sizeof doc,
                 "{\"version\":\"1\",\"routes\":[{\"id\":\"a\",\"uri\":"
                 "\"http://b\",\"filters\":[\"%s\"]},{\"id\":\"c\",\"uri\":"
                 "\"http://b\",\"filters\":[\"PrefixPath=/p\",{\"name\":"
                 "\"%s\"}]}]}",
                 k ? "PrefixPath=/q" : "Retry", names[k]);
        sy_error e;
        ck_assert_int_eq(sy_router_apply(r, "s", doc, strlen(doc), NULL, &e),
                         SY_EARG);
        ck_assert_str_eq(e.path, "routes[1].filters[1]");
        ck_assert_ptr_nonnull(strstr(e.message, names[k]));
        ck_assert_ptr_nonnull(strstr(e.message, "default filters"));
        ck_assert_uint_eq(live_routes(r), 0);
        /* a Retry beside the defaults' CircuitBreaker runs (the breaker
         * around the tries); a CircuitBreaker after the defaults' Retry
         * is refused (SCG would run it on every try) */
        char ok[256];
        snprintf(ok, sizeof ok,
                 "{\"id\":\"a\",\"uri\":\"http://b\",\"filters\":[\"%s\"]}",
                 k ? "CircuitBreaker" : "Retry");
        ck_assert_int_eq(sy_router_upsert_route(r, "s", ok, strlen(ok), &e),
                         k ? SY_EARG : 0);
        if (k) {
            ck_assert_str_eq(e.path, "route.filters[0]");
            ck_assert_ptr_nonnull(strstr(e.message, "after a Retry"));
            ok[0] = '\0';
            snprintf(ok, sizeof ok,
                     "{\"id\":\"a\",\"uri\":\"http://b\",\"filters\":"
                     "[\"PrefixPath=/q\"]}");
            ck_assert_int_eq(sy_router_upsert_route(r, "s", ok, strlen(ok), &e),
                             0);
        }
        snprintf(ok, sizeof ok,
                 "{\"id\":\"b\",\"uri\":\"http://b\",\"filters\":["
                 "{\"name\":\"%s\"}]}",
                 names[k]);
        ck_assert_int_eq(sy_router_upsert_route(r, "s", ok, strlen(ok), &e),
                         SY_EARG);
        ck_assert_str_eq(e.path, "route.filters[0]");
        ck_assert_uint_eq(live_routes(r), 1);
        sy_router_free(r);
    }
}
END_TEST

/* Lenient: the route whose policy cannot run beside the defaults' is an
 * issue of the document, left out as an invalid route is (its live
 * version goes); the rest of the document is applied. */
START_TEST(a_lenient_apply_leaves_out_a_route_nesting_a_default_policy) {
    sy_router *r;
    sy_router_options o = SY_ROUTER_OPTIONS_INIT;
    o.default_filters = "[{\"name\":\"Retry\",\"args\":{\"retries\":2}}]";
    o.lenient = true;
    ck_assert_int_eq(sy_router_new(&o, &r, NULL), 0);
    ck_assert_int_eq(sy_router_add_source(r, "s", NULL), 0);
    static const char v1[] =
        "{\"version\":\"1\",\"routes\":[{\"id\":\"a\",\"uri\":\"http://b\"},"
        "{\"id\":\"c\",\"uri\":\"http://b\",\"filters\":[\"PrefixPath=/p\"]}]}";
    static const char v2[] =
        "{\"version\":\"2\",\"routes\":[{\"id\":\"a\",\"uri\":\"http://b\"},"
        "{\"id\":\"c\",\"uri\":\"http://b\",\"filters\":[\"PrefixPath=/p\","
        "{\"name\":\"Retry\"}]},{\"id\":\"d\",\"uri\":\"http://b\"}]}";
    sy_error e;
    sy_report *rep = NULL;
    ck_assert_int_eq(sy_router_apply(r, "s", v1, strlen(v1), NULL, &e), 0);
    ck_assert_uint_eq(live_routes(r), 2);
    ck_assert_int_eq(sy_router_apply(r, "s", v2, strlen(v2), &rep, &e), 0);
    ck_assert_uint_eq(sy_report_issue_count(rep), 1);
    const sy_error *is = sy_report_issue(rep, 0);
    ck_assert_str_eq(is->path, "routes[1].filters[1]");
    ck_assert_ptr_nonnull(strstr(is->message, "default filters"));
    const sy_diff *d = sy_report_diff(rep);
    ck_assert_uint_eq(sy_diff_added_count(d), 1);   /* d */
    ck_assert_uint_eq(sy_diff_removed_count(d), 1); /* c, left out */
    ck_assert_str_eq(sy_diff_removed(d, 0), "c");
    sy_report_free(rep);
    sy_snapshot *s = sy_router_acquire(r);
    ck_assert_uint_eq(sy_snapshot_route_count(s), 2);
    ck_assert_ptr_nonnull(sy_snapshot_find_route(s, "a", NULL));
    ck_assert_ptr_nonnull(sy_snapshot_find_route(s, "d", NULL));
    ck_assert_ptr_null(sy_snapshot_find_route(s, "c", NULL));
    sy_snapshot_release(s);
    /* the same document again (its bytes and routes reused): the same */
    ck_assert_int_eq(sy_router_apply(r, "s", v2, strlen(v2), NULL, &e), 0);
    ck_assert_uint_eq(live_routes(r), 2);
    sy_router_free(r);
}
END_TEST

static sy_router *lenient_router(const char *defaults, uint32_t breakers) {
    sy_router *r;
    sy_router_options o = SY_ROUTER_OPTIONS_INIT;
    o.default_filters = defaults;
    o.lenient = true;
    o.policy_breakers = breakers;
    ck_assert_int_eq(sy_router_new(&o, &r, NULL), 0);
    ck_assert_int_eq(sy_router_add_source(r, "s", NULL), 0);
    return r;
}

static size_t source_routes(sy_router *r) {
    sy_source_status ss;
    ck_assert_int_eq(sy_router_source_status(r, 0, &ss, NULL), 0);
    return ss.routes;
}

/* A first document of routes without policies: the commit reads none of
 * them when nothing needs claiming (sy_document.policy_some), but a
 * default CircuitBreaker claims an entry per route all the same, and a
 * store too small for them refuses the document. */
START_TEST(a_default_breaker_claims_for_routes_without_policies) {
    static const char cb[] = "[{\"name\":\"CircuitBreaker\"}]";
    char doc[2048];
    size_t at = 0;
    for (int i = 0; i < 17; i++) /* 17 routes: one more than the store */
        at += (size_t)snprintf(doc + at, sizeof doc - at,
                               "%s{\"id\":\"r%d\",\"uri\":\"http://b\"}",
                               i ? "," : "[", i);
    snprintf(doc + at, sizeof doc - at, "]");
    sy_error e;
    sy_policy_stats st;
    sy_router *r = lenient_router(NULL, 16);
    ck_assert_int_eq(sy_router_apply(r, "s", doc, strlen(doc), NULL, &e), 0);
    sy_policy_store_stats(sy_router_policy_store(r), &st);
    ck_assert_uint_eq(st.breakers_used, 0);
    ck_assert_uint_eq(live_routes(r), 17);
    sy_router_free(r);
    r = lenient_router(cb, 16);
    ck_assert_int_eq(sy_router_apply(r, "s", doc, strlen(doc), NULL, &e),
                     SY_ELIMIT);
    ck_assert_uint_eq(live_routes(r), 0);
    /* the same routes less the last: an entry each */
    snprintf(strstr(doc, ",{\"id\":\"r16\""), 2, "]");
    ck_assert_int_eq(sy_router_apply(r, "s", doc, strlen(doc), NULL, &e), 0);
    sy_policy_store_stats(sy_router_policy_store(r), &st);
    ck_assert_uint_eq(st.breakers_used, 16);
    sy_router_free(r);
}
END_TEST

/* The left-out route again: a rollback to its version, the same bytes
 * after a one-route change (the memo), a change set of the document and
 * upserts; the source counts the routes it runs. */
START_TEST(a_left_out_nesting_route_stays_out_on_rollback_and_reapply) {
    sy_router *r =
        lenient_router("[{\"name\":\"Retry\",\"args\":{\"retries\":2}}]", 0);
    static const char v2[] =
        "{\"version\":\"2\",\"routes\":[{\"id\":\"a\",\"uri\":\"http://b\"},"
        "{\"id\":\"c\",\"uri\":\"http://b\",\"filters\":[\"PrefixPath=/p\","
        "{\"name\":\"Retry\"}]},{\"id\":\"d\",\"uri\":\"http://b\"}]}";
    static const char v3[] =
        "{\"version\":\"3\",\"routes\":[{\"id\":\"c\",\"uri\":\"http://b\"}]}";
    static const char up[] = "{\"id\":\"e\",\"uri\":\"http://b\"}";
    static const char nest[] = "{\"id\":\"f\",\"uri\":\"http://b\",\"filters\":"
                               "[{\"name\":\"Retry\"}]}";
    sy_error e;
    sy_report *rep = NULL;
    ck_assert_int_eq(sy_router_apply(r, "s", v2, strlen(v2), NULL, &e), 0);
    ck_assert_uint_eq(source_routes(r), 2);
    ck_assert_int_eq(sy_router_apply(r, "s", v3, strlen(v3), NULL, &e), 0);
    ck_assert_uint_eq(source_routes(r), 1);
    /* back to 2: c left out again, with its issue */
    ck_assert_int_eq(sy_router_rollback(r, "s", "2", &rep, &e), 0);
    ck_assert_uint_eq(sy_report_issue_count(rep), 1);
    ck_assert_str_eq(sy_report_issue(rep, 0)->path, "routes[1].filters[1]");
    ck_assert_uint_eq(sy_diff_removed_count(sy_report_diff(rep)), 1);
    ck_assert_uint_eq(sy_diff_added_count(sy_report_diff(rep)), 2);
    sy_report_free(rep);
    ck_assert_uint_eq(source_routes(r), 2);
    ck_assert_uint_eq(live_routes(r), 2);
    /* a one-route change, then the same bytes: applied again, e goes */
    ck_assert_int_eq(sy_router_upsert_route(r, "s", up, strlen(up), &e), 0);
    ck_assert_uint_eq(source_routes(r), 3);
    ck_assert_int_eq(sy_router_apply(r, "s", v2, strlen(v2), &rep, &e), 0);
    ck_assert_uint_eq(sy_report_issue_count(rep), 1);
    ck_assert_uint_eq(sy_diff_removed_count(sy_report_diff(rep)), 1);
    ck_assert_str_eq(sy_diff_removed(sy_report_diff(rep), 0), "e");
    sy_report_free(rep);
    ck_assert_uint_eq(source_routes(r), 2);
    /* the document and an upsert in one change set: both hold; a nesting
     * upsert fails the set (a one-route change is strict) */
    sy_change_set *cs;
    ck_assert_int_eq(sy_change_set_new(r, &cs, NULL), 0);
    ck_assert_int_eq(sy_change_set_apply(cs, "s", v3, strlen(v3), NULL), 0);
    ck_assert_int_eq(sy_change_set_upsert_route(cs, "s", up, strlen(up), NULL),
                     0);
    ck_assert_int_eq(sy_router_commit(r, cs, NULL, &e), 0);
    sy_change_set_free(cs);
    ck_assert_uint_eq(source_routes(r), 2); /* c, e */
    ck_assert_int_eq(sy_change_set_new(r, &cs, NULL), 0);
    ck_assert_int_eq(sy_change_set_apply(cs, "s", v2, strlen(v2), NULL), 0);
    ck_assert_int_eq(
        sy_change_set_upsert_route(cs, "s", nest, strlen(nest), NULL), 0);
    ck_assert_int_eq(sy_router_commit(r, cs, NULL, &e), SY_EARG);
    ck_assert_msg(strstr(e.message, "change 1 (upsert"), "%s: %s", e.path,
                  e.message);
    sy_change_set_free(cs);
    ck_assert_uint_eq(source_routes(r), 2);
    sy_snapshot *s = sy_router_acquire(r);
    ck_assert_ptr_nonnull(sy_snapshot_find_route(s, "e", NULL));
    ck_assert_ptr_nonnull(sy_snapshot_find_route(s, "c", NULL));
    sy_snapshot_release(s);
    sy_router_free(r);
}
END_TEST

/* Lenient leaves out routes that cannot run beside the defaults, not
 * routes a full policy store has no breaker entry for: that commit is
 * refused and the live route stays (docs/policies.md), as in a strict
 * router. The lenient check once took any refusal for the route's own
 * issue, so a renamed breaker on a full store dropped the live route. */
START_TEST(a_lenient_apply_on_a_full_breaker_store_is_refused) {
    sy_router *r = lenient_router(NULL, 16);
    static char doc[8192];
    sy_error e;
    breaker_doc(doc, sizeof doc, 0, 16, 0);
    ck_assert_int_eq(sy_router_apply(r, "s", doc, strlen(doc), NULL, &e), 0);
    breaker_doc(doc, sizeof doc, 0, 16, 1); /* r0 names b1.., r15 b16 */
    ck_assert_int_eq(sy_router_apply(r, "s", doc, strlen(doc), NULL, &e),
                     SY_ELIMIT);
    ck_assert_str_eq(e.path, "[15].filters[0].args.name");
    ck_assert_uint_eq(live_routes(r), 16);
    sy_snapshot *s = sy_router_acquire(r);
    ck_assert_ptr_nonnull(sy_snapshot_find_route(s, "r15", NULL));
    sy_snapshot_release(s);
    sy_router_free(r);
}
END_TEST

/* A lenient document none of whose routes can run is refused as one of
 * only invalid routes is, rather than emptying the source. */
START_TEST(a_lenient_document_of_only_nesting_routes_changes_nothing) {
    sy_router *r =
        lenient_router("[{\"name\":\"Retry\",\"args\":{\"retries\":2}}]", 0);
    static const char v1[] =
        "[{\"id\":\"a\",\"uri\":\"http://b\"},{\"id\":\"b\",\"uri\":"
        "\"http://b\"}]";
    static const char v2[] =
        "[{\"id\":\"a\",\"uri\":\"http://b\",\"filters\":[\"Retry=3\"]},"
        "{\"id\":\"b\",\"uri\":\"http://b\",\"filters\":[{\"name\":"
        "\"Retry\"}]}]";
    sy_error e;
    ck_assert_int_eq(sy_router_apply(r, "s", v1, strlen(v1), NULL, &e), 0);
    ck_assert_int_eq(sy_router_apply(r, "s", v2, strlen(v2), NULL, &e),
                     SY_EINVALIDDOC);
    ck_assert_ptr_nonnull(strstr(e.message, "no route of the document"));
    ck_assert_uint_eq(live_routes(r), 2);
    sy_router_free(r);
}
END_TEST

/* SCG's answers without a fallbackUri under resumeWithoutError: an empty
 * 200 for a connect failure (RESUME), the upstream's answer for a listed
 * status, still the error for a timeout; with a fallback, the fallback. */
START_TEST(resume_without_error_verdicts_are_scgs) {
    static const char *args[2] = {
        "\"resumeWithoutError\":true",
        "\"resumeWithoutError\":true,\"fallbackUri\":\"forward:/f\""};
    for (int k = 0; k < 2; k++) {
        char doc[512];
        snprintf(doc, sizeof doc,
                 "[{\"id\":\"x\",\"uri\":\"http://b\",\"predicates\":"
                 "[\"Path=/x\"],\"filters\":[{\"name\":\"CircuitBreaker\","
                 "\"args\":{\"name\":\"orders\",\"statusCodes\":[\"500\"],"
                 "%s}}]}]",
                 args[k]);
        fix f;
        fix_open(&f, router_with(doc, NULL, NULL));
        sy_breaker_permit p = ask(&f, T0);
        ck_assert_int_eq(
            sy_breaker_record(&p, SY_OUTCOME_CONNECT_FAILURE, 0, 1, T0),
            k ? SY_BREAKER_FALLBACK : SY_BREAKER_RESUME);
        p = ask(&f, T0);
        ck_assert_int_eq(sy_breaker_record(&p, SY_OUTCOME_5XX, 500, 1, T0),
                         k ? SY_BREAKER_FALLBACK : SY_BREAKER_PASS);
        p = ask(&f, T0);
        ck_assert_int_eq(sy_breaker_record(&p, SY_OUTCOME_TIMEOUT, 0, 1, T0),
                         SY_BREAKER_FALLBACK);
        p = ask(&f, T0);
        ck_assert_int_eq(sy_breaker_record(&p, SY_OUTCOME_5XX, 503, 1, T0),
                         SY_BREAKER_PASS);
        fix_close(&f);
    }
}
END_TEST

START_TEST(breaker_opens_half_opens_and_closes) {
    fix f;
    fix_open(&f, router_with(CB_ROUTE("\"slidingWindowSize\":4,"
                                      "\"minimumNumberOfCalls\":4,"
                                      "\"waitDurationInOpenState\":\"1s\","
                                      "\"permittedNumberOfCallsInHalfOpenState"
                                      "\":2,\"statusCodes\":\"500\""),
                             NULL, NULL));
    sy_breaker_permit p = ask(&f, T0);
    ck_assert(p.permitted);
    ck_assert_str_eq(p.name, "orders");
    ck_assert_str_eq(p.fallback, "/fallback");
    ck_assert_uint_eq(p.timeout_ms, 1000); /* SCG's time limit */
    ck_assert_int_eq(sy_breaker_record(&p, SY_OUTCOME_SUCCESS, 200, 5, T0),
                     SY_BREAKER_PASS);
    ck_assert_int_eq(sy_breaker_record(&(sy_breaker_permit){0}, 0, 0, 0, 0),
                     SY_BREAKER_PASS);
    p = ask(&f, T0);
    ck_assert_int_eq(sy_breaker_record(&p, SY_OUTCOME_5XX, 500, 5, T0),
                     SY_BREAKER_FALLBACK);
    p = ask(&f, T0);
    sy_breaker_record(&p, SY_OUTCOME_CONNECT_FAILURE, 0, 5, T0);
    ck_assert_int_eq(state_of(&f), SY_BREAKER_CLOSED); /* 3 calls < 4 */
    p = ask(&f, T0);
    sy_breaker_record(&p, SY_OUTCOME_SUCCESS, 200, 5, T0); /* 2 of 4: 50% */
    ck_assert_int_eq(state_of(&f), SY_BREAKER_OPEN);
    p = ask(&f, T0 + 999);
    ck_assert(!p.permitted);
    ck_assert_int_eq(p.state, SY_BREAKER_OPEN);
    /* after the wait: half-open, two permits */
    sy_breaker_permit h1 = ask(&f, T0 + 1000), h2 = ask(&f, T0 + 1001),
                      h3 = ask(&f, T0 + 1002);
    ck_assert(h1.permitted && h2.permitted && !h3.permitted);
    ck_assert_int_eq(state_of(&f), SY_BREAKER_HALF_OPEN);
    sy_breaker_record(&h1, SY_OUTCOME_SUCCESS, 200, 5, T0 + 1010);
    sy_breaker_record(&h2, SY_OUTCOME_SUCCESS, 204, 5, T0 + 1010);
    ck_assert_int_eq(state_of(&f), SY_BREAKER_CLOSED);
    /* a permit from before the transition changes nothing */
    sy_breaker_record(&p, SY_OUTCOME_TIMEOUT, 0, 5, T0 + 1020);
    sy_breaker_info bi;
    sy_policy_store_breaker(sy_router_policy_store(f.r), "orders", &bi, NULL);
    ck_assert_uint_eq(bi.failures, 0);
    sy_policy_stats ps;
    sy_policy_store_stats(sy_router_policy_store(f.r), &ps);
    ck_assert_uint_eq(ps.breaker_opened, 1);
    ck_assert_uint_eq(ps.breaker_half_opened, 1);
    ck_assert_uint_eq(ps.breaker_closed, 1);
    ck_assert_uint_ge(ps.breaker_rejected, 2);
    fix_close(&f);
}
END_TEST

/* now_ms 0 to sy_breaker_record and to the acquire: the time is read
 * when the state moves, so the breaker opens now, not at the epoch */
/* A default CircuitBreaker without a name is each route's own (SCG's
 * default name: the route id), one compiled filter for every route: the
 * entry it was last found at (its hint) is checked against the key of the
 * route asking, whichever asked before. A success at a failure's place in
 * the window takes the failure out. */
static sy_breaker_permit ask_path(fix *f, const char *path, int64_t now) {
    sy_breaker_permit p;
    ck_assert_int_eq(
        sy_match_breaker_acquire(fix_match(f, path), now, &p, NULL), 0);
    ck_assert(p.breaker);
    return p;
}

static sy_breaker_info info_of(fix *f, const char *name) {
    sy_breaker_info bi;
    ck_assert_int_eq(
        sy_policy_store_breaker(sy_router_policy_store(f->r), name, &bi, NULL),
        0);
    return bi;
}

START_TEST(a_default_breaker_is_each_routes_own_asked_in_turn) {
    sy_router *r;
    sy_router_options o = SY_ROUTER_OPTIONS_INIT;
    o.default_filters =
        "[{\"name\":\"CircuitBreaker\",\"args\":{\"slidingWindowSize\":2,"
        "\"minimumNumberOfCalls\":2,\"failureRateThreshold\":60,"
        "\"statusCodes\":\"500\"}}]";
    ck_assert_int_eq(sy_router_new(&o, &r, NULL), 0);
    ck_assert_int_eq(sy_router_add_source(r, "s", NULL), 0);
    static const char doc[] =
        "[{\"id\":\"a\",\"uri\":\"http://b\",\"predicates\":[\"Path=/a\"]},"
        "{\"id\":\"b\",\"uri\":\"http://b\",\"predicates\":[\"Path=/b\"]}]";
    sy_error e;
    ck_assert_msg(sy_router_apply(r, "s", doc, strlen(doc), NULL, &e) == 0,
                  "%s: %s", e.path, e.message);
    fix f;
    fix_open(&f, r);
    /* a fails twice: open; b asked between them stays closed */
    sy_breaker_permit p = ask_path(&f, "/a", T0);
    ck_assert_str_eq(p.name, "a");
    sy_breaker_record(&p, SY_OUTCOME_5XX, 500, 1, T0);
    p = ask_path(&f, "/b", T0);
    ck_assert_str_eq(p.name, "b");
    sy_breaker_record(&p, SY_OUTCOME_SUCCESS, 200, 1, T0);
    p = ask_path(&f, "/a", T0);
    sy_breaker_record(&p, SY_OUTCOME_5XX, 500, 1, T0);
    ck_assert_int_eq(info_of(&f, "a").state, SY_BREAKER_OPEN);
    for (int i = 0; i < 3; i++) {
        p = ask_path(&f, "/b", T0 + 1);
        ck_assert(p.permitted);
        ck_assert_int_eq(p.state, SY_BREAKER_CLOSED);
        sy_breaker_record(&p, SY_OUTCOME_SUCCESS, 200, 1, T0 + 1);
        p = ask_path(&f, "/a", T0 + 1);
        ck_assert(!p.permitted);
        ck_assert_int_eq(p.state, SY_BREAKER_OPEN);
    }
    ck_assert_int_eq(info_of(&f, "b").state, SY_BREAKER_CLOSED);
    ck_assert_uint_eq(info_of(&f, "b").calls, 4);
    /* b: one failure in a window of two (50 % < 60 %), then two
     * successes, the second at the failure's place */
    p = ask_path(&f, "/b", T0 + 2);
    sy_breaker_record(&p, SY_OUTCOME_5XX, 500, 1, T0 + 2);
    ck_assert_uint_eq(info_of(&f, "b").failures, 1);
    p = ask_path(&f, "/b", T0 + 2);
    sy_breaker_record(&p, SY_OUTCOME_SUCCESS, 200, 1, T0 + 2);
    ck_assert_uint_eq(info_of(&f, "b").failures, 1);
    p = ask_path(&f, "/b", T0 + 2);
    sy_breaker_record(&p, SY_OUTCOME_SUCCESS, 200, 1, T0 + 2);
    ck_assert_uint_eq(info_of(&f, "b").failures, 0);
    ck_assert_int_eq(info_of(&f, "b").state, SY_BREAKER_CLOSED);
    fix_close(&f);
}
END_TEST

START_TEST(a_breaker_told_no_time_reads_real_time) {
    fix f;
    fix_open(&f, router_with(CB_ROUTE("\"slidingWindowSize\":1,"
                                      "\"minimumNumberOfCalls\":1,"
                                      "\"waitDurationInOpenState\":\"60s\""),
                             NULL, NULL));
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    int64_t now = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
    sy_breaker_permit p = ask(&f, 0);
    ck_assert(p.permitted);
    sy_breaker_record(&p, SY_OUTCOME_CONNECT_FAILURE, 0, 1, 0);
    ck_assert_int_eq(state_of(&f), SY_BREAKER_OPEN);
    ck_assert(!ask(&f, now + 1000).permitted); /* opened at about now */
    ck_assert(!ask(&f, 0).permitted);
    ck_assert(ask(&f, now + 61000).permitted); /* after the wait */
    fix_close(&f);
}
END_TEST

START_TEST(half_open_failures_open_again) {
    fix f;
    fix_open(&f, router_with(CB_ROUTE("\"slidingWindowSize\":2,"
                                      "\"minimumNumberOfCalls\":2,"
                                      "\"waitDurationInOpenState\":100,"
                                      "\"permittedNumberOfCallsInHalfOpenState"
                                      "\":1"),
                             NULL, NULL));
    for (int i = 0; i < 2; i++) {
        sy_breaker_permit p = ask(&f, T0);
        sy_breaker_record(&p, SY_OUTCOME_TIMEOUT, 0, 5, T0);
    }
    ck_assert_int_eq(state_of(&f), SY_BREAKER_OPEN);
    sy_breaker_permit p = ask(&f, T0 + 100);
    ck_assert(p.permitted);
    sy_breaker_record(&p, SY_OUTCOME_CONNECT_FAILURE, 0, 5, T0 + 101);
    ck_assert_int_eq(state_of(&f), SY_BREAKER_OPEN);
    ck_assert(!ask(&f, T0 + 150).permitted);
    ck_assert(ask(&f, T0 + 201).permitted);
    fix_close(&f);
}
END_TEST

START_TEST(slow_calls_trip_the_slow_call_model) {
    fix f;
    fix_open(&f, router_with(CB_ROUTE("\"slidingWindowSize\":10,"
                                      "\"minimumNumberOfCalls\":10,"
                                      "\"slowCallRateThreshold\":50,"
                                      "\"slowCallDurationThreshold\":"
                                      "\"200ms\""),
                             NULL, NULL));
    for (int i = 0; i < 10; i++) {
        sy_breaker_permit p = ask(&f, T0);
        ck_assert_int_eq(sy_breaker_record(&p, SY_OUTCOME_SUCCESS, 200,
                                           i < 5 ? 300 : 200, T0),
                         SY_BREAKER_PASS);
    }
    ck_assert_int_eq(state_of(&f), SY_BREAKER_OPEN);
    fix_close(&f);
}
END_TEST

START_TEST(recovery_admits_a_growing_share_after_closing) {
    fix f;
    fix_open(&f, router_with(CB_ROUTE("\"slidingWindowSize\":1,"
                                      "\"minimumNumberOfCalls\":1,"
                                      "\"waitDurationInOpenState\":10,"
                                      "\"permittedNumberOfCallsInHalfOpenState"
                                      "\":1,\"warmupDuration\":\"10s\""),
                             NULL, NULL));
    sy_breaker_permit p = ask(&f, T0);
    sy_breaker_record(&p, SY_OUTCOME_CONNECT_FAILURE, 0, 1, T0);
    p = ask(&f, T0 + 10);
    sy_breaker_record(&p, SY_OUTCOME_SUCCESS, 200, 1, T0 + 10);
    ck_assert_int_eq(state_of(&f), SY_BREAKER_CLOSED);
    int early = 0, late = 0, after = 0;
    for (int i = 0; i < 1000; i++) {
        early += ask(&f, T0 + 10 + 1000).permitted; /* 10% in */
        late += ask(&f, T0 + 10 + 8000).permitted;  /* 80% in */
        after += ask(&f, T0 + 10 + 10000).permitted;
    }
    ck_assert_int_gt(early, 50);
    ck_assert_int_lt(early, 150);
    ck_assert_int_gt(late, 750);
    ck_assert_int_lt(late, 850);
    ck_assert_int_eq(after, 1000);
    fix_close(&f);
}
END_TEST

START_TEST(routes_naming_one_breaker_share_it_and_a_new_config_resets_it) {
    fix f;
    fix_open(
        &f,
        router_with(
            "[{\"id\":\"a\",\"uri\":\"http://b\",\"predicates\":[\"Path=/a\"],"
            "\"filters\":[\"CircuitBreaker=shared\"]},"
            "{\"id\":\"b\",\"uri\":\"http://b\",\"predicates\":[\"Path=/b\"],"
            "\"filters\":[\"CircuitBreaker=shared\"]}]",
            NULL, NULL));
    sy_breaker_permit p;
    for (int i = 0; i < 100; i++) {
        sy_match_breaker_acquire(fix_match(&f, i % 2 ? "/a" : "/b"), T0, &p,
                                 NULL);
        sy_breaker_record(&p, SY_OUTCOME_CONNECT_FAILURE, 0, 1, T0);
    }
    sy_match_breaker_acquire(fix_match(&f, "/a"), T0, &p, NULL);
    ck_assert(!p.permitted); /* 100 calls through two routes opened it */
    const char *other = "{\"id\":\"o\",\"uri\":\"http://c\"}";
    ck_assert_int_eq(
        sy_router_upsert_route(f.r, "s", other, strlen(other), NULL), 0);
    sy_match_breaker_acquire(fix_match(&f, "/b"), T0, &p, NULL);
    ck_assert(!p.permitted); /* still open after another route's publish */
    /* a alone given other settings: refused (the two routes would weigh
     * one window by different settings), nothing changes */
    const char *changed =
        "{\"id\":\"a\",\"uri\":\"http://b\",\"predicates\":[\"Path=/a\"],"
        "\"filters\":[{\"name\":\"CircuitBreaker\",\"args\":{\"name\":"
        "\"shared\",\"slidingWindowSize\":50}}]}";
    sy_error e;
    ck_assert_int_eq(
        sy_router_upsert_route(f.r, "s", changed, strlen(changed), &e),
        SY_EARG);
    ck_assert_str_eq(e.path, "route.filters[0]");
    ck_assert_msg(strstr(e.message, "slidingWindowSize 50, not 100") &&
                      strstr(e.message, "route 'b'"),
                  "%s", e.message);
    sy_match_breaker_acquire(fix_match(&f, "/a"), T0, &p, NULL);
    ck_assert(!p.permitted); /* still open */
    /* both in one change set: the new settings start it closed */
    const char *changed_b =
        "{\"id\":\"b\",\"uri\":\"http://b\",\"predicates\":[\"Path=/b\"],"
        "\"filters\":[{\"name\":\"CircuitBreaker\",\"args\":{\"name\":"
        "\"shared\",\"slidingWindowSize\":50}}]}";
    sy_change_set *cs;
    ck_assert_int_eq(sy_change_set_new(f.r, &cs, NULL), 0);
    ck_assert_int_eq(
        sy_change_set_upsert_route(cs, "s", changed, strlen(changed), NULL), 0);
    ck_assert_int_eq(
        sy_change_set_upsert_route(cs, "s", changed_b, strlen(changed_b), NULL),
        0);
    ck_assert_int_eq(sy_router_commit(f.r, cs, NULL, &e), 0);
    sy_change_set_free(cs);
    sy_match_breaker_acquire(fix_match(&f, "/a"), T0, &p, NULL);
    ck_assert(p.permitted); /* a changed policy starts closed */
    /* 50 failures through both open its window of 50 */
    for (int i = 0; i < 50; i++) {
        sy_match_breaker_acquire(fix_match(&f, i % 2 ? "/a" : "/b"), T0, &p,
                                 NULL);
        ck_assert(p.permitted);
        sy_breaker_record(&p, SY_OUTCOME_CONNECT_FAILURE, 0, 1, T0);
    }
    sy_match_breaker_acquire(fix_match(&f, "/b"), T0, &p, NULL);
    ck_assert(!p.permitted);
    fix_close(&f);
}
END_TEST

/* Routes naming one breaker share its window and state, so they must
 * agree on its settings (Resilience4j's are per breaker name): judged
 * each call by its own route's settings, one failure and three successes
 * would open it through /a (25%) and leave it closed through /b (100%).
 * A commit that would leave two live routes naming one breaker with
 * different settings is refused at the later route's CircuitBreaker,
 * naming the other route and the first setting that differs; routes
 * removed or changed to the new settings in the same change set do not
 * block, and routes of the same settings keep sharing. */
#define X_ROUTE(ID, RATE)                                                      \
    "{\"id\":\"" ID "\",\"uri\":\"http://b\",\"predicates\":[\"Path=/" ID      \
    "\"],\"filters\":[\"StripPrefix=0\",{\"name\":\"CircuitBreaker\","         \
    "\"args\":{\"name\":\"x\",\"slidingWindowSize\":4,"                        \
    "\"minimumNumberOfCalls\":4,\"failureRateThreshold\":" RATE "}}]}"

static int check_doc(sy_router *r, const char *doc, sy_error *e) {
    sy_change_set *cs;
    ck_assert_int_eq(sy_change_set_new(r, &cs, NULL), 0);
    ck_assert_int_eq(sy_change_set_apply(cs, "s", doc, strlen(doc), NULL), 0);
    int rc = sy_router_check(r, cs, NULL, e);
    sy_change_set_free(cs);
    return rc;
}

START_TEST(routes_naming_one_breaker_must_agree_on_its_settings) {
    sy_router *r = breaker_router(16);
    sy_error e;
    static const char both[] =
        "[" X_ROUTE("a", "25") "," X_ROUTE("b", "100") "]";
    /* one document's two routes */
    ck_assert_int_eq(check_doc(r, both, &e), SY_EARG);
    ck_assert_str_eq(e.path, "[1].filters[1]");
    ck_assert_msg(strstr(e.message, "'a'") &&
                      strstr(e.message, "failureRateThreshold"),
                  "%s", e.message);
    ck_assert_int_eq(sy_router_apply(r, "s", both, strlen(both), NULL, &e),
                     SY_EARG);
    ck_assert_str_eq(e.path, "[1].filters[1]");
    ck_assert_uint_eq(uses_of(r, "x"), 0);
    /* the parse alone: strict fails at the later route, lenient leaves
     * it out as an issue */
    sy_document *d;
    ck_assert_int_eq(sy_document_parse(both, strlen(both), NULL, &d, &e),
                     SY_EARG);
    ck_assert_str_eq(e.path, "[1].filters[1]");
    sy_parse_options po = SY_PARSE_OPTIONS_INIT;
    po.lenient = true;
    ck_assert_int_eq(sy_document_parse(both, strlen(both), &po, &d, &e), 0);
    ck_assert_uint_eq(sy_document_route_count(d), 1);
    ck_assert_uint_eq(sy_document_issue_count(d), 1);
    ck_assert_str_eq(sy_document_issue(d, 0)->path, "[1].filters[1]");
    sy_document_free(d);
    /* a live route and an upsert */
    static const char a25[] = "[" X_ROUTE("a", "25") "]";
    ck_assert_int_eq(sy_router_apply(r, "s", a25, strlen(a25), NULL, &e), 0);
    static const char b100[] = X_ROUTE("b", "100");
    ck_assert_int_eq(sy_router_upsert_route(r, "s", b100, strlen(b100), &e),
                     SY_EARG);
    ck_assert_str_eq(e.path, "route.filters[1]");
    ck_assert_msg(strstr(e.message, "'a'") &&
                      strstr(e.message, "failureRateThreshold"),
                  "%s", e.message);
    sy_snapshot *s = sy_router_acquire(r);
    ck_assert_uint_eq(sy_snapshot_route_count(s), 1); /* nothing changed */
    sy_snapshot_release(s);
    /* the same settings share */
    static const char b25[] = X_ROUTE("b", "25");
    ck_assert_int_eq(sy_router_upsert_route(r, "s", b25, strlen(b25), &e), 0);
    sy_router_reclaim(r);
    ck_assert_uint_eq(uses_of(r, "x"), 2);
    /* both changed in one change set: no block */
    sy_change_set *cs;
    static const char a100[] = X_ROUTE("a", "100");
    ck_assert_int_eq(sy_change_set_new(r, &cs, NULL), 0);
    ck_assert_int_eq(
        sy_change_set_upsert_route(cs, "s", a100, strlen(a100), NULL), 0);
    ck_assert_int_eq(sy_router_check(r, cs, NULL, &e), SY_EARG);
    ck_assert_int_eq(
        sy_change_set_upsert_route(cs, "s", b100, strlen(b100), NULL), 0);
    ck_assert_msg(sy_router_check(r, cs, NULL, &e) == 0, "%s: %s", e.path,
                  e.message);
    ck_assert_int_eq(sy_router_commit(r, cs, NULL, &e), 0);
    sy_change_set_free(cs);
    /* a route removed in the same change set does not block either */
    ck_assert_int_eq(sy_change_set_new(r, &cs, NULL), 0);
    ck_assert_int_eq(sy_change_set_remove_route(cs, "b", NULL), 0);
    static const char a25r[] = X_ROUTE("a", "25");
    ck_assert_int_eq(
        sy_change_set_upsert_route(cs, "s", a25r, strlen(a25r), NULL), 0);
    ck_assert_msg(sy_router_commit(r, cs, NULL, &e) == 0, "%s: %s", e.path,
                  e.message);
    sy_change_set_free(cs);
    /* two new routes of one change set, nothing live: the later is
     * refused, naming the earlier */
    static const char p1[] = "{\"id\":\"p\",\"uri\":\"http://b\",\"filters\":"
                             "[\"CircuitBreaker=y\"]}";
    static const char q1[] =
        "{\"id\":\"q\",\"uri\":\"http://b\",\"filters\":[{\"name\":"
        "\"CircuitBreaker\",\"args\":{\"name\":\"y\",\"slidingWindowSize\":"
        "5,\"minimumNumberOfCalls\":5}}]}";
    ck_assert_int_eq(sy_change_set_new(r, &cs, NULL), 0);
    ck_assert_int_eq(sy_change_set_upsert_route(cs, "s", p1, strlen(p1), NULL),
                     0);
    ck_assert_int_eq(sy_change_set_upsert_route(cs, "s", q1, strlen(q1), NULL),
                     0);
    ck_assert_int_eq(sy_router_commit(r, cs, NULL, &e), SY_EARG);
    ck_assert_str_eq(e.path, "route.filters[0]");
    ck_assert_msg(strstr(e.message, "slidingWindowSize 5, not 100") &&
                      strstr(e.message, "route 'p'"),
                  "%s", e.message);
    sy_change_set_free(cs);
    ck_assert_uint_eq(uses_of(r, "y"), 0);
    /* a document dropping the old settings' route for new ones: no block;
     * one keeping it beside a route of other settings: refused */
    ck_assert_int_eq(sy_router_apply(r, "s", "[" X_ROUTE("b", "25") "]",
                                     strlen("[" X_ROUTE("b", "25") "]"), NULL,
                                     &e),
                     0);
    static const char b25a100[] =
        "[" X_ROUTE("b", "25") "," X_ROUTE("a", "100") "]";
    ck_assert_int_eq(
        sy_router_apply(r, "s", b25a100, strlen(b25a100), NULL, &e), SY_EARG);
    ck_assert_str_eq(e.path, "[1].filters[1]");
    ck_assert_msg(strstr(e.message, "'b'"), "%s", e.message);
    sy_router_free(r);
}
END_TEST

/* Lenient mode leaves out a new route whose breaker settings clash with
 * a live route that stays (of this source, kept unchanged, or another
 * source's), as an issue at its CircuitBreaker naming that route; the
 * rest of the document is applied, and the router's settings map follows
 * what was published (later commits are judged by it). */
static sy_router *lenient_breaker_router(void) {
    sy_router *r;
    sy_router_options o = SY_ROUTER_OPTIONS_INIT;
    o.policy_breakers = 16;
    o.lenient = true;
    ck_assert_int_eq(sy_router_new(&o, &r, NULL), 0);
    ck_assert_int_eq(sy_router_add_source(r, "s", NULL), 0);
    ck_assert_int_eq(sy_router_add_source(r, "t", NULL), 0);
    return r;
}

static sy_snapshot *holds_routes(sy_router *r, const char *ids) {
    sy_snapshot *s = sy_router_acquire(r);
    char buf[64];
    snprintf(buf, sizeof buf, "%s", ids);
    size_t n = 0;
    for (char *t = strtok(buf, ","); t; t = strtok(NULL, ","), n++)
        ck_assert_msg(sy_snapshot_find_route(s, t, NULL) != NULL, "no route %s",
                      t);
    ck_assert_uint_eq(sy_snapshot_route_count(s), n);
    return s;
}

START_TEST(lenient_mode_leaves_out_a_route_whose_breaker_settings_clash) {
    sy_router *r = lenient_breaker_router();
    sy_error e;
    sy_report *rep;
    static const char a25[] = "[" X_ROUTE("a", "25") "]";
    ck_assert_int_eq(sy_router_apply(r, "s", a25, strlen(a25), NULL, &e), 0);
    /* a kept unchanged, b of other settings left out, c applied */
    static const char abc[] = "[" X_ROUTE("a", "25") "," X_ROUTE(
        "b", "100") ","
                    "{\"id\":\"c\",\"uri\":\"http://c\"}]";
    ck_assert_msg(sy_router_apply(r, "s", abc, strlen(abc), &rep, &e) == 0,
                  "%s: %s", e.path, e.message);
    ck_assert_uint_eq(sy_report_issue_count(rep), 1);
    const sy_error *is = sy_report_issue(rep, 0);
    ck_assert_int_eq(is->code, SY_EARG);
    ck_assert_str_eq(is->path, "[1].filters[1]");
    ck_assert_msg(strstr(is->message, "route 'a'") &&
                      strstr(is->message, "failureRateThreshold"),
                  "%s", is->message);
    sy_report_free(rep);
    sy_snapshot_release(holds_routes(r, "a,c"));
    sy_router_reclaim(r);
    ck_assert_uint_eq(uses_of(r, "x"), 1);
    /* a check says the same, and holds nothing */
    static const char abcd[] = "[" X_ROUTE("a", "25") "," X_ROUTE(
        "b", "100") ","
                    "{\"id\":\"c\",\"uri\":\"http://c\"},"
                    "{\"id\":\"d\",\"uri\":\"http://c\"}]";
    sy_change_set *cs;
    ck_assert_int_eq(sy_change_set_new(r, &cs, NULL), 0);
    ck_assert_int_eq(sy_change_set_apply(cs, "s", abcd, strlen(abcd), NULL), 0);
    ck_assert_int_eq(sy_router_check(r, cs, &rep, &e), 0);
    ck_assert_uint_eq(sy_report_part_count(rep), 1);
    const sy_report *part = sy_report_part(rep, 0);
    ck_assert_uint_eq(sy_report_issue_count(part), 1);
    ck_assert_str_eq(sy_report_issue(part, 0)->path, "[1].filters[1]");
    sy_report_free(rep);
    sy_change_set_free(cs);
    ck_assert_uint_eq(uses_of(r, "x"), 1);
    /* another source's route stays: an update of a to other settings is
     * left out (the live a goes, as an invalid route's id does) */
    static const char t25[] = "[" X_ROUTE("u", "25") "]";
    ck_assert_int_eq(sy_router_apply(r, "t", t25, strlen(t25), NULL, &e), 0);
    static const char a100c[] =
        "[" X_ROUTE("a", "100") ",{\"id\":\"c\",\"uri\":\"http://c\"}]";
    ck_assert_msg(sy_router_apply(r, "s", a100c, strlen(a100c), &rep, &e) == 0,
                  "%s: %s", e.path, e.message);
    ck_assert_uint_eq(sy_report_issue_count(rep), 1);
    is = sy_report_issue(rep, 0);
    ck_assert_str_eq(is->path, "[0].filters[1]");
    ck_assert_msg(strstr(is->message, "route 'u'"), "%s", is->message);
    sy_report_free(rep);
    sy_snapshot_release(holds_routes(r, "c,u"));
    sy_router_reclaim(r);
    ck_assert_uint_eq(uses_of(r, "x"), 1);
    /* the map follows what was published: with u gone, x's settings are
     * free again, and a document of 100s passes whole */
    static const char none[] = "[{\"id\":\"v\",\"uri\":\"http://c\"}]";
    ck_assert_int_eq(sy_router_apply(r, "t", none, strlen(none), NULL, &e), 0);
    static const char ab100[] =
        "[" X_ROUTE("a", "100") "," X_ROUTE("b", "100") "]";
    ck_assert_msg(sy_router_apply(r, "s", ab100, strlen(ab100), &rep, &e) == 0,
                  "%s: %s", e.path, e.message);
    ck_assert_uint_eq(sy_report_issue_count(rep), 0);
    sy_report_free(rep);
    sy_snapshot_release(holds_routes(r, "a,b,v"));
    sy_router_reclaim(r);
    ck_assert_uint_eq(uses_of(r, "x"), 2);
    /* and a 25 beside them is left out again, naming a live one */
    static const char w25[] =
        "[" X_ROUTE("w", "25") ",{\"id\":\"v\",\"uri\":\"http://c\"}]";
    ck_assert_msg(sy_router_apply(r, "t", w25, strlen(w25), &rep, &e) == 0,
                  "%s: %s", e.path, e.message);
    ck_assert_uint_eq(sy_report_issue_count(rep), 1);
    ck_assert_msg(strstr(sy_report_issue(rep, 0)->message, "route 'a'") ||
                      strstr(sy_report_issue(rep, 0)->message, "route 'b'"),
                  "%s", sy_report_issue(rep, 0)->message);
    sy_report_free(rep);
    sy_snapshot_release(holds_routes(r, "a,b,v"));
    sy_router_free(r);
}
END_TEST

/* A lenient change set is weighed whole: routes of its changes that give
 * one breaker clashing settings are left out, each an issue of its
 * change's part at its CircuitBreaker naming a route that stays, and the
 * rest applied. The settings that stay are the live routes' that stay as
 * they are, else those of the set's first route naming the breaker (in
 * change order, and document order within one). Strict refuses the whole
 * set at the later route. */
static const sy_error *part_issue(const sy_report *rep, size_t part,
                                  size_t count) {
    const sy_report *p = sy_report_part(rep, part);
    ck_assert_uint_eq(sy_report_issue_count(p), count);
    return count ? sy_report_issue(p, 0) : NULL;
}

static int commit_set(sy_router *r, const char *const *ops, bool dry,
                      sy_report **rep, sy_error *e) {
    /* ops: "s:JSON" applies a document to source s, "+s:JSON" upserts a
     * route into it, "-id" removes a route */
    sy_change_set *cs;
    ck_assert_int_eq(sy_change_set_new(r, &cs, NULL), 0);
    for (size_t i = 0; ops[i]; i++) {
        const char *o = ops[i];
        if (o[0] == '-') {
            ck_assert_int_eq(sy_change_set_remove_route(cs, o + 1, NULL), 0);
            continue;
        }
        bool up = o[0] == '+';
        char src[2] = {o[up], 0};
        const char *json = o + up + 2;
        ck_assert_int_eq(
            up ? sy_change_set_upsert_route(cs, src, json, strlen(json), NULL)
               : sy_change_set_apply(cs, src, json, strlen(json), NULL),
            0);
    }
    int rc =
        dry ? sy_router_check(r, cs, rep, e) : sy_router_commit(r, cs, rep, e);
    sy_change_set_free(cs);
    return rc;
}

#define PLAIN(ID) "{\"id\":\"" ID "\",\"uri\":\"http://c\"}"

START_TEST(a_lenient_change_set_leaves_out_routes_clashing_within_it) {
    sy_router *r = lenient_breaker_router();
    sy_error e;
    sy_report *rep;
    /* two documents of one set, nothing live: s's a (first) stays, t's u
     * is left out naming it; c and v applied. A check says the same and
     * holds nothing */
    const char *two_docs[] = {"s:[" X_ROUTE("a", "25") "," PLAIN("c") "]",
                              "t:[" PLAIN("v") "," X_ROUTE("u", "100") "]",
                              NULL};
    for (int dry = 1; dry >= 0; dry--) {
        ck_assert_msg(commit_set(r, two_docs, dry, &rep, &e) == 0, "%s: %s",
                      e.path, e.message);
        part_issue(rep, 0, 0);
        const sy_error *is = part_issue(rep, 1, 1);
        ck_assert_int_eq(is->code, SY_EARG);
        ck_assert_str_eq(is->path, "[1].filters[1]");
        ck_assert_msg(strstr(is->message, "route 'a'") &&
                          strstr(is->message, "failureRateThreshold 100"),
                      "%s", is->message);
        sy_report_free(rep);
        sy_router_reclaim(r);
        ck_assert_uint_eq(uses_of(r, "x"), dry ? 0 : 1);
    }
    sy_snapshot_release(holds_routes(r, "a,c,v"));
    /* upserts: b's 100s beside the live a are left out (the set goes on),
     * d's 25s join, c goes */
    const char *upserts[] = {"+s:" X_ROUTE("b", "100"),
                             "+s:" X_ROUTE("d", "25"), "-c", NULL};
    ck_assert_msg(commit_set(r, upserts, false, &rep, &e) == 0, "%s: %s",
                  e.path, e.message);
    const sy_error *is = part_issue(rep, 0, 1);
    ck_assert_str_eq(is->path, "route.filters[1]");
    ck_assert_msg(strstr(is->message, "route 'a'"), "%s", is->message);
    part_issue(rep, 1, 0);
    sy_report_free(rep);
    sy_snapshot_release(holds_routes(r, "a,d,v"));
    sy_router_reclaim(r);
    ck_assert_uint_eq(uses_of(r, "x"), 2);
    /* a change clashing with a route an earlier change of the set added:
     * a and d go, f's 100s come first and stay, t's g (25s, the old
     * settings) is left out naming f */
    const char *after[] = {"-a", "-d", "+s:" X_ROUTE("f", "100"),
                           "t:[" X_ROUTE("g", "25") "," PLAIN("v") "]", NULL};
    ck_assert_msg(commit_set(r, after, false, &rep, &e) == 0, "%s: %s", e.path,
                  e.message);
    is = part_issue(rep, 3, 1);
    ck_assert_str_eq(is->path, "[0].filters[1]");
    ck_assert_msg(strstr(is->message, "route 'f'"), "%s", is->message);
    sy_report_free(rep);
    sy_snapshot_release(holds_routes(r, "f,v"));
    sy_router_reclaim(r);
    ck_assert_uint_eq(uses_of(r, "x"), 1);
    /* the map follows what was published: f gone, the 25s come back */
    ck_assert_int_eq(sy_router_remove_route(r, "f", &e), 0);
    sy_router_reclaim(r);
    ck_assert_uint_eq(uses_of(r, "x"), 0);
    static const char g25[] = "[" X_ROUTE("g", "25") "," PLAIN("v") "]";
    ck_assert_int_eq(sy_router_apply(r, "t", g25, strlen(g25), &rep, &e), 0);
    ck_assert_uint_eq(sy_report_issue_count(rep), 0);
    sy_report_free(rep);
    /* a shared breaker's settings changed across two sources in one set:
     * nothing left out (every route naming it changes) */
    static const char s25[] = "[" X_ROUTE("a", "25") "]";
    ck_assert_int_eq(sy_router_apply(r, "s", s25, strlen(s25), NULL, &e), 0);
    const char *both[] = {"s:[" X_ROUTE("a", "100") "]",
                          "t:[" X_ROUTE("g", "100") "," PLAIN("v") "]", NULL};
    ck_assert_msg(commit_set(r, both, false, &rep, &e) == 0, "%s: %s", e.path,
                  e.message);
    part_issue(rep, 0, 0);
    part_issue(rep, 1, 0);
    sy_report_free(rep);
    sy_snapshot_release(holds_routes(r, "a,g,v"));
    sy_router_reclaim(r);
    ck_assert_uint_eq(uses_of(r, "x"), 2);
    /* a one-route commit has nothing else to keep: refused, as strict */
    static const char b25[] = X_ROUTE("b", "25");
    ck_assert_int_eq(sy_router_upsert_route(r, "s", b25, strlen(b25), &e),
                     SY_EARG);
    ck_assert_str_eq(e.path, "route.filters[1]");
    sy_router_free(r);

    /* an upsert left out keeps its live route: a alone gives 25s; b's
     * 100s come first in the set and a's 50s are left out, which keeps
     * the live a, so b is left out in turn: a stays as it was */
    r = lenient_breaker_router();
    ck_assert_int_eq(sy_router_apply(r, "s", s25, strlen(s25), NULL, &e), 0);
    const char *turn[] = {"+s:" X_ROUTE("b", "100"), "+s:" X_ROUTE("a", "50"),
                          "+s:" PLAIN("w"), NULL};
    ck_assert_msg(commit_set(r, turn, false, &rep, &e) == 0, "%s: %s", e.path,
                  e.message);
    is = part_issue(rep, 0, 1);
    ck_assert_msg(strstr(is->message, "route 'a'"), "%s", is->message);
    is = part_issue(rep, 1, 1);
    ck_assert_str_eq(is->path, "route.filters[1]");
    part_issue(rep, 2, 0);
    sy_report_free(rep);
    sy_snapshot_release(holds_routes(r, "a,w"));
    sy_router_reclaim(r);
    ck_assert_uint_eq(uses_of(r, "x"), 1);
    /* the live a still gives 25s: a 25 joins it, a 100 does not */
    ck_assert_int_eq(sy_router_upsert_route(r, "s", b25, strlen(b25), &e), 0);
    static const char c100[] = X_ROUTE("c", "100");
    ck_assert_int_eq(sy_router_upsert_route(r, "s", c100, strlen(c100), &e),
                     SY_EARG);
    sy_router_free(r);

    /* strict: the two documents refuse the whole set, at the later route */
    sy_router_options o = SY_ROUTER_OPTIONS_INIT;
    o.policy_breakers = 16;
    ck_assert_int_eq(sy_router_new(&o, &r, NULL), 0);
    ck_assert_int_eq(sy_router_add_source(r, "s", NULL), 0);
    ck_assert_int_eq(sy_router_add_source(r, "t", NULL), 0);
    ck_assert_int_eq(commit_set(r, two_docs, false, NULL, &e), SY_EARG);
    ck_assert_str_eq(e.path, "[1].filters[1]");
    ck_assert_msg(strstr(e.message, "route 'a'"), "%s", e.message);
    sy_snapshot_release(holds_routes(r, ""));
    sy_router_reclaim(r);
    ck_assert_uint_eq(uses_of(r, "x"), 0);
    sy_router_free(r);
}
END_TEST

/* Routers sharing one store (workers, processes) are told when they give
 * a breaker other settings than another router's live routes: the store
 * keeps the settings its routers' live routes give each name (the last
 * router to change them sets them); a commit of others is logged at WARN
 * at the route's CircuitBreaker, naming the other router, and not refused
 * (workers applying one change one after the other differ for a while,
 * and so do a reload's new workers beside the old ones draining). */
typedef struct warns {
    int n;
    char last[512];
} warns;

static void count_warns(void *data, sy_log_level level, const char *msg) {
    warns *w = data;
    if (level == SY_LOG_WARN && strstr(msg, "another router")) {
        w->n++;
        snprintf(w->last, sizeof w->last, "%s", msg);
    }
}

static sy_router *store_router(sy_policy_store *st, warns *w,
                               size_t max_retired) {
    sy_router *r;
    sy_router_options o = SY_ROUTER_OPTIONS_INIT;
    o.policy_store = st;
    o.on_log = count_warns;
    o.callback_data = w;
    o.max_retired = max_retired;
    ck_assert_int_eq(sy_router_new(&o, &r, NULL), 0);
    ck_assert_int_eq(sy_router_add_source(r, "s", NULL), 0);
    return r;
}

START_TEST(routers_sharing_a_store_are_told_of_other_breaker_settings) {
    size_t len = sy_policy_store_bytes(64, 16);
    void *mem = aligned_alloc(64, len);
    sy_policy_store *st;
    ck_assert_int_eq(sy_policy_store_init(mem, len, 64, 16, &st, NULL), 0);
    warns w1 = {0}, w2 = {0};
    sy_router *r1 = store_router(st, &w1, 0), *r2 = store_router(st, &w2, 0);
    sy_error e;
    static const char a25[] = "[" X_ROUTE("a", "25") "]";
    static const char a100[] = "[" X_ROUTE("a", "100") "]";
    static const char b25[] = "[" X_ROUTE("b", "25") "]";
    static const char b100[] = "[" X_ROUTE("b", "100") "]";
    ck_assert_int_eq(sy_router_apply(r1, "s", a25, strlen(a25), NULL, &e), 0);
    /* a check is not told (nothing is published) */
    ck_assert_int_eq(check_doc(r2, b100, &e), 0);
    ck_assert_int_eq(w2.n, 0);
    /* r2's 100s beside r1's 25s: applied, told, naming r1 */
    ck_assert_int_eq(sy_router_apply(r2, "s", b100, strlen(b100), NULL, &e), 0);
    ck_assert_int_eq(w2.n, 1);
    ck_assert_msg(strstr(w2.last, "[0].filters[1]: CircuitBreaker 'x'") &&
                      strstr(w2.last, "owner 0") &&
                      strstr(w2.last, "route 'b'"),
                  "%s", w2.last);
    ck_assert_uint_eq(owners_of(st, "x"), 2);
    /* r2's were the last change: r1 following them is not told, going
     * back is */
    ck_assert_int_eq(sy_router_apply(r1, "s", a100, strlen(a100), NULL, &e), 0);
    ck_assert_int_eq(w1.n, 0);
    ck_assert_int_eq(sy_router_apply(r1, "s", a25, strlen(a25), NULL, &e), 0);
    ck_assert_int_eq(w1.n, 1);
    /* r1's route gone, or r1 freed: its settings go with it */
    static const char none[] = "[{\"id\":\"n\",\"uri\":\"http://c\"}]";
    ck_assert_int_eq(sy_router_apply(r1, "s", none, strlen(none), NULL, &e), 0);
    ck_assert_int_eq(sy_router_apply(r2, "s", b25, strlen(b25), NULL, &e), 0);
    ck_assert_int_eq(w2.n, 1);
    ck_assert_int_eq(sy_router_apply(r1, "s", a100, strlen(a100), NULL, &e), 0);
    ck_assert_int_eq(w1.n, 2);
    sy_router_free(r1);
    ck_assert_int_eq(sy_router_apply(r2, "s", b100, strlen(b100), NULL, &e), 0);
    ck_assert_int_eq(w2.n, 1);
    /* a commit whose publish fails takes nothing in the store: r4's
     * readers hold its one retired snapshot (max_retired 1) when it
     * changes a's settings; the store keeps those of its live a */
    sy_router_free(r2);
    warns w4 = {0}, w5 = {0};
    sy_router *r4 = store_router(st, &w4, 1);
    static const char a25n[] =
        "[" X_ROUTE("a", "25") ",{\"id\":\"n\",\"uri\":\"http://c\"}]";
    static const char a100n[] =
        "[" X_ROUTE("a", "100") ",{\"id\":\"n\",\"uri\":\"http://c\"}]";
    ck_assert_int_eq(sy_router_apply(r4, "s", a25, strlen(a25), NULL, &e), 0);
    sy_router_reclaim(r4);
    sy_snapshot *held = sy_router_acquire(r4);
    ck_assert_int_eq(sy_router_apply(r4, "s", a25n, strlen(a25n), NULL, &e), 0);
    ck_assert_int_eq(sy_router_apply(r4, "s", a100n, strlen(a100n), NULL, &e),
                     SY_EBUSY);
    sy_router *r5 = store_router(st, &w5, 0);
    ck_assert_int_eq(sy_router_apply(r5, "s", b25, strlen(b25), NULL, &e), 0);
    ck_assert_int_eq(w5.n, 0);
    ck_assert_int_eq(sy_router_apply(r5, "s", b100, strlen(b100), NULL, &e), 0);
    ck_assert_int_eq(w5.n, 1);
    sy_snapshot_release(held);
    sy_router_free(r4);
    sy_router_free(r5);
    sy_policy_stats ps;
    sy_policy_store_stats(st, &ps);
    ck_assert_uint_eq(ps.breakers_used, 0);
    free(mem);
}
END_TEST

/* A commit whose publish fails leaves the store's breaker settings as
 * the routers' live routes give them, whatever another router sharing
 * the store does meanwhile. Part 1, the race: r1 changes a's settings
 * while its readers hold its one retired snapshot (max_retired 1: the
 * publish fails), and r2's commit of the same new settings runs inside
 * r1's commit (r1's allocator runs it once the store's settings word of
 * x moved, i.e. after r1 wrote it and before its publish failed). r1's
 * live a still gives the old settings, so r2 is told. Part 2: two
 * routers give x the same settings; one's change of them fails: a third
 * giving the old ones is not told (every live route gives those). */
typedef struct between {
    sy_policy_store *st;
    uint64_t word; /* x's settings word when armed */
    sy_router *r2; /* armed: applies doc once the word moves */
    const char *doc;
    int ran, rc;
} between;

static uint64_t settings_word(sy_policy_store *st, const char *name) {
    sy__brk *b = sy__store_breaker(st, sy__brk_key(name, strlen(name)));
    return b ? atomic_load(sy__store_setters(st, b) + SY_OWNER_WORDS) : 0;
}

static void between_step(between *bw) {
    if (bw->r2 && !bw->ran && settings_word(bw->st, "x") != bw->word) {
        bw->ran = 1;
        sy_error e;
        bw->rc =
            sy_router_apply(bw->r2, "s", bw->doc, strlen(bw->doc), NULL, &e);
    }
}

static void *between_malloc(void *data, size_t n) {
    between_step(data);
    return malloc(n);
}

static void *between_realloc(void *data, void *p, size_t n) {
    between_step(data);
    return realloc(p, n);
}

static void between_free(void *data, void *p) {
    (void)data;
    free(p);
}

START_TEST(a_failed_publish_leaves_the_store_settings_as_routes_give_them) {
    size_t len = sy_policy_store_bytes(64, 16);
    void *mem = aligned_alloc(64, len);
    sy_policy_store *st;
    ck_assert_int_eq(sy_policy_store_init(mem, len, 64, 16, &st, NULL), 0);
    between bw = {.st = st};
    warns w1 = {0}, w2 = {0};
    sy_allocator al = {between_malloc, between_realloc, between_free, &bw};
    sy_router_options o = SY_ROUTER_OPTIONS_INIT;
    o.policy_store = st;
    o.on_log = count_warns;
    o.callback_data = &w1;
    o.max_retired = 1;
    o.allocator = &al;
    sy_router *r1, *r2 = store_router(st, &w2, 0);
    ck_assert_int_eq(sy_router_new(&o, &r1, NULL), 0);
    ck_assert_int_eq(sy_router_add_source(r1, "s", NULL), 0);
    sy_error e;
    static const char a25[] = "[" X_ROUTE("a", "25") "]";
    static const char a25n[] =
        "[" X_ROUTE("a", "25") ",{\"id\":\"n\",\"uri\":\"http://c\"}]";
    static const char a100n[] =
        "[" X_ROUTE("a", "100") ",{\"id\":\"n\",\"uri\":\"http://c\"}]";
    static const char b100[] = "[" X_ROUTE("b", "100") "]";
    ck_assert_int_eq(sy_router_apply(r1, "s", a25, strlen(a25), NULL, &e), 0);
    sy_router_reclaim(r1);
    sy_snapshot *held = sy_router_acquire(r1);
    ck_assert_int_eq(sy_router_apply(r1, "s", a25n, strlen(a25n), NULL, &e), 0);
    bw.word = settings_word(st, "x");
    bw.r2 = r2;
    bw.doc = b100;
    ck_assert_int_eq(sy_router_apply(r1, "s", a100n, strlen(a100n), NULL, &e),
                     SY_EBUSY);
    if (!bw.ran) /* nothing moved inside r1's commit: r2's comes after */
        bw.rc = sy_router_apply(r2, "s", b100, strlen(b100), NULL, &e);
    bw.r2 = NULL;
    ck_assert_int_eq(bw.rc, 0);
    ck_assert_msg(w2.n == 1 && strstr(w2.last, "owner 1") &&
                      strstr(w2.last, "route 'b'"),
                  "r2 told %d times (r1's live a gives 25): %s", w2.n, w2.last);
    sy_snapshot_release(held);
    sy_router_reclaim(r1);
    /* r1 published: it follows r2's settings, and is not told */
    ck_assert_int_eq(sy_router_apply(r1, "s", a100n, strlen(a100n), NULL, &e),
                     0);
    ck_assert_int_eq(w1.n, 0);
    sy_router_free(r1);
    sy_router_free(r2);

    /* part 2: r3 and r4 give x 25; r3's change to 100 fails */
    warns w3 = {0}, w4 = {0}, w5 = {0};
    sy_router *r3 = store_router(st, &w3, 1), *r4 = store_router(st, &w4, 0);
    static const char b25[] = "[" X_ROUTE("b", "25") "]";
    static const char c25[] = "[" X_ROUTE("c", "25") "]";
    ck_assert_int_eq(sy_router_apply(r3, "s", a25, strlen(a25), NULL, &e), 0);
    ck_assert_int_eq(sy_router_apply(r4, "s", b25, strlen(b25), NULL, &e), 0);
    ck_assert_int_eq(w4.n, 0);
    sy_router_reclaim(r3);
    held = sy_router_acquire(r3);
    ck_assert_int_eq(sy_router_apply(r3, "s", a25n, strlen(a25n), NULL, &e), 0);
    ck_assert_int_eq(sy_router_apply(r3, "s", a100n, strlen(a100n), NULL, &e),
                     SY_EBUSY);
    sy_router *r5 = store_router(st, &w5, 0);
    ck_assert_int_eq(sy_router_apply(r5, "s", c25, strlen(c25), NULL, &e), 0);
    ck_assert_msg(w5.n == 0, "r5 told though every live route gives 25: %s",
                  w5.last);
    sy_snapshot_release(held);
    sy_router_free(r3);
    sy_router_free(r4);
    sy_router_free(r5);
    sy_policy_stats ps;
    sy_policy_store_stats(st, &ps);
    ck_assert_uint_eq(ps.breakers_used, 0);
    free(mem);
}
END_TEST

/* ---- run or refuse ---- */

START_TEST(a_host_refuses_what_it_does_not_run) {
    const char *const *nginx = sy_host_profile("nginx");
    ck_assert_ptr_nonnull(nginx);
    ck_assert_ptr_null(sy_host_profile("nope"));
    sy_router *r;
    sy_router_options o = SY_ROUTER_OPTIONS_INIT;
    o.host_runs = nginx;
    ck_assert_int_eq(sy_router_new(&o, &r, NULL), 0);
    ck_assert_int_eq(sy_router_add_source(r, "s", NULL), 0);
    const char *doc = "[{\"id\":\"a\",\"uri\":\"http://b\"},"
                      "{\"id\":\"b\",\"uri\":\"http://b\",\"filters\":"
                      "[\"StripPrefix=1\","
                      "\"RewriteLocationResponseHeader\"]}]";
    sy_error e;
    ck_assert_int_eq(sy_router_apply(r, "s", doc, strlen(doc), NULL, &e),
                     SY_ENOTRUN);
    ck_assert_str_eq(e.path, "[1].filters[1]");
    ck_assert_ptr_nonnull(strstr(e.message, "host 'nginx'"));
    ck_assert_ptr_nonnull(strstr(e.message, "RewriteLocationResponseHeader"));
    /* the nginx module runs forward: (an internal redirect); a uri scheme
     * a host does not run is refused at the uri (the gateway: ws:) */
    const char *fwd = "[{\"id\":\"f\",\"uri\":\"forward:/x\"}]";
    ck_assert_int_eq(sy_router_apply(r, "s", fwd, strlen(fwd), NULL, &e), 0);
    const char *cors = "[{\"id\":\"c\",\"uri\":\"http://b\",\"metadata\":"
                       "{\"cors\":{\"allowedOrigins\":\"*\"}}}]";
    ck_assert_int_eq(sy_router_apply(r, "s", cors, strlen(cors), NULL, &e),
                     SY_ENOTRUN);
    ck_assert_str_eq(e.path, "[0].metadata.cors");
    /* the same document passes where the host runs it */
    const char *const *gw = sy_host_profile("gateway");
    sy_router *g;
    o.host_runs = gw;
    ck_assert_int_eq(sy_router_new(&o, &g, NULL), 0);
    ck_assert_int_eq(sy_router_add_source(g, "s", NULL), 0);
    ck_assert_int_eq(sy_router_apply(g, "s", doc, strlen(doc), NULL, &e), 0);
    const char *ws = "[{\"id\":\"w\",\"uri\":\"ws://b\"}]";
    ck_assert_int_eq(sy_router_apply(g, "s", ws, strlen(ws), NULL, &e),
                     SY_ENOTRUN);
    ck_assert_str_eq(e.path, "[0].uri");
    /* and parse options refuse as the router does */
    sy_parse_options po = SY_PARSE_OPTIONS_INIT;
    po.host_runs = nginx;
    sy_document *d = NULL;
    ck_assert_int_eq(sy_document_parse(doc, strlen(doc), &po, &d, &e),
                     SY_ENOTRUN);
    /* default filters too */
    sy_router *x;
    o.host_runs = nginx;
    o.default_filters = "[\"RewriteLocationResponseHeader\"]";
    ck_assert_int_eq(sy_router_new(&o, &x, &e), SY_ENOTRUN);
    ck_assert_str_eq(e.path, "defaultFilters[0]");
    /* a part of a filter the host does not run: nginx's Retry without
     * backoff runs, with backoff it is refused at the arg */
    const char *rb = "[{\"id\":\"r\",\"uri\":\"http://b\",\"filters\":"
                     "[{\"name\":\"Retry\",\"args\":{\"retries\":2,"
                     "\"backoff.firstBackoff\":\"10ms\"}}]}]";
    ck_assert_int_eq(sy_router_apply(r, "s", rb, strlen(rb), NULL, &e),
                     SY_ENOTRUN);
    ck_assert_str_eq(e.path, "[0].filters[0].args.backoff");
    ck_assert_ptr_nonnull(strstr(e.message, "host 'nginx'"));
    ck_assert_int_eq(sy_router_apply(g, "s", rb, strlen(rb), NULL, &e), 0);
    const char *rn = "[{\"id\":\"r\",\"uri\":\"http://b\",\"filters\":"
                     "[\"Retry=2,BAD_GATEWAY\"]}]";
    ck_assert_int_eq(sy_router_apply(r, "s", rn, strlen(rn), NULL, &e), 0);
    /* nginx answers a connect failure 502: resumeWithoutError without a
     * fallbackUri (SCG's empty 200) is refused there, at the arg */
    const char *cr = "[{\"id\":\"r\",\"uri\":\"http://b\",\"filters\":"
                     "[{\"name\":\"CircuitBreaker\",\"args\":{\"name\":\"c\","
                     "\"resumeWithoutError\":true}}]}]";
    ck_assert_int_eq(sy_router_apply(r, "s", cr, strlen(cr), NULL, &e),
                     SY_ENOTRUN);
    ck_assert_str_eq(e.path, "[0].filters[0].args.resumeWithoutError");
    ck_assert_ptr_nonnull(strstr(e.message, "host 'nginx'"));
    ck_assert_int_eq(sy_router_apply(g, "s", cr, strlen(cr), NULL, &e), 0);
    const char *cf = "[{\"id\":\"r\",\"uri\":\"http://b\",\"filters\":"
                     "[{\"name\":\"CircuitBreaker\",\"args\":{\"name\":\"c\","
                     "\"resumeWithoutError\":true,\"fallbackUri\":"
                     "\"forward:/f\"}}]}]";
    ck_assert_int_eq(sy_router_apply(r, "s", cf, strlen(cf), NULL, &e), 0);
    /* nginx goes to a fallbackUri's path as written: one with {variables}
     * (SCG expands them; the gateway does) is refused there, at the arg */
    const char *cv = "[{\"id\":\"r\",\"uri\":\"http://b\",\"predicates\":"
                     "[\"Path=/c/{seg}\"],\"filters\":[{\"name\":"
                     "\"CircuitBreaker\",\"args\":{\"name\":\"c\","
                     "\"fallbackUri\":\"forward:/f/{seg}\"}}]}]";
    ck_assert_int_eq(sy_router_apply(r, "s", cv, strlen(cv), NULL, &e),
                     SY_ENOTRUN);
    ck_assert_str_eq(e.path, "[0].filters[0].args.fallbackUri");
    ck_assert_ptr_nonnull(strstr(e.message, "host 'nginx'"));
    ck_assert_int_eq(sy_router_apply(g, "s", cv, strlen(cv), NULL, &e), 0);
    sy_router_free(r);
    sy_router_free(g);
}
END_TEST

/* SCG expands {NAME} in a fallbackUri from the route's variables: a NAME
 * no Path or Host pattern captures would fail every fallback, refused at
 * the arg (the shortcut: at the filter); and `switchyard check`'s list of
 * every error of an invalid route names no false one for a variable the
 * route does capture (each filter is probed with the route's
 * predicates). */
START_TEST(fallback_variables_must_be_captured) {
    sy_error e = parse_error(
        "[{\"id\":\"r\",\"uri\":\"http://b\",\"predicates\":"
        "[\"Path=/c/{seg}\"],\"filters\":[{\"name\":\"CircuitBreaker\","
        "\"args\":{\"name\":\"c\",\"fallbackUri\":\"forward:/f/{segs}\"}}]}]",
        NULL);
    ck_assert_int_eq(e.code, SY_EARG);
    ck_assert_str_eq(e.path, "[0].filters[0].args.fallbackUri");
    ck_assert_ptr_nonnull(strstr(e.message, "{segs}"));
    e = parse_error("[{\"id\":\"r\",\"uri\":\"http://b\",\"predicates\":"
                    "[\"Path=/c/x\"],\"filters\":"
                    "[\"CircuitBreaker=c,forward:/f/{x}\"]}]",
                    NULL);
    ck_assert_str_eq(e.path, "[0].filters[0]");
    e = parse_error("[{\"id\":\"r\",\"uri\":\"http://b\",\"filters\":"
                    "[\"CircuitBreaker=c,forward:/f/{\"]}]",
                    NULL);
    ck_assert_ptr_nonnull(strstr(e.message, "'{' without"));
    parses("[{\"id\":\"r\",\"uri\":\"http://b\",\"predicates\":"
           "[\"Host={sub}.example.com\",\"Path=/c/{*rest}\"],\"filters\":"
           "[\"CircuitBreaker=c,forward:/f/{sub}{rest}\"]}]",
           NULL);
    /* one pattern of the Path without it: its requests lack {seg} */
    e = parse_error("[{\"id\":\"r\",\"uri\":\"http://b\",\"predicates\":"
                    "[\"Path=/c/{seg},/d/**\"],\"filters\":"
                    "[\"CircuitBreaker=c,forward:/f/{seg}\"]}]",
                    NULL);
    ck_assert_str_eq(e.path, "[0].filters[0]");
    ck_assert_ptr_nonnull(strstr(e.message, "not every request"));
    parses("[{\"id\":\"r\",\"uri\":\"http://b\",\"predicates\":"
           "[\"Path=/c/{seg},/d/{seg}/x,false\"],\"filters\":"
           "[\"CircuitBreaker=c,forward:/f/{seg}\"]}]",
           NULL);
    /* lenient: an invalid route's every error, none of them false */
    const char *doc =
        "[{\"id\":\"r\",\"uri\":\"http://b\",\"predicates\":"
        "[\"Path=/c/{seg}\"],\"filters\":[{\"name\":\"CircuitBreaker\","
        "\"args\":{\"name\":\"c\",\"fallbackUri\":\"forward:/f/{seg}\"}},"
        "{\"name\":\"RequestRateLimiter\",\"args\":{"
        "\"redis-rate-limiter.replenishRate\":1,"
        "\"key-resolver\":\"#{@pathVariable:seg}\"}},\"StripPrefix=x\"]},"
        "{\"id\":\"ok\",\"uri\":\"http://b\"}]";
    sy_parse_options po = SY_PARSE_OPTIONS_INIT;
    po.lenient = true;
    sy_document *d = NULL;
    ck_assert_int_eq(sy_document_parse(doc, strlen(doc), &po, &d, &e), 0);
    ck_assert_uint_eq(sy_document_route_count(d), 1);
    ck_assert_uint_eq(sy_document_issue_count(d), 1);
    ck_assert_str_eq(sy_document_issue(d, 0)->path, "[0].filters[2]");
    sy_document_free(d);
}
END_TEST

/* A host's list with an entry the library does not know is refused where
 * it is given: a misspelled "!PART" would let the host accept, and then
 * ignore, the part it cannot run. */
START_TEST(a_host_list_with_an_unknown_entry_is_refused) {
    static const char *const typo_part[] = {"host=x", "Retry", "!Retry.backof",
                                            NULL};
    static const char *const typo_item[] = {"CircuitBreakr", NULL};
    static const char *const empty_host[] = {"host=", "Retry", NULL};
    static const char *const fine[] = {
        "host=x", "Retry", "!Retry.backoff", "metadata.cors", "wss:", NULL};
    const char *const *bad[] = {typo_part, typo_item, empty_host};
    const char *what[] = {"!Retry.backof", "CircuitBreakr", "host="};
    for (size_t i = 0; i < 3; i++) {
        sy_router *r = NULL;
        sy_router_options o = SY_ROUTER_OPTIONS_INIT;
        o.host_runs = bad[i];
        sy_error e;
        ck_assert_int_eq(sy_router_new(&o, &r, &e), SY_EINVAL);
        ck_assert_ptr_null(r);
        ck_assert_msg(strstr(e.message, what[i]), "%s", e.message);
        sy_parse_options po = SY_PARSE_OPTIONS_INIT;
        po.host_runs = bad[i];
        sy_document *d = NULL;
        ck_assert_int_eq(sy_document_parse("[]", 2, &po, &d, &e), SY_EINVAL);
        ck_assert_msg(strstr(e.message, what[i]), "%s", e.message);
    }
    sy_router *r;
    sy_router_options o = SY_ROUTER_OPTIONS_INIT;
    o.host_runs = fine;
    ck_assert_int_eq(sy_router_new(&o, &r, NULL), 0);
    sy_router_free(r);
    /* the project's own lists pass */
    o.host_runs = sy_host_profile("nginx");
    ck_assert_int_eq(sy_router_new(&o, &r, NULL), 0);
    sy_router_free(r);
    o.host_runs = sy_host_profile("gateway");
    ck_assert_int_eq(sy_router_new(&o, &r, NULL), 0);
    sy_router_free(r);
}
END_TEST

/* SCG sets a forward: route's path to the uri's (ForwardPathFilter, order
 * 0), then runs the route's path filters on it; the hosts forward to the
 * uri's path as written: a path filter there would be accepted and its
 * effect dropped, so a host that runs forward: refuses it at the filter. */
START_TEST(a_path_filter_on_a_forward_route_is_refused) {
    const char *names[] = {"StripPrefix=1", "PrefixPath=/p", "SetPath=/s",
                           "RewritePath=/a, /b"};
    for (int h = 0; h < 2; h++)
        for (size_t i = 0; i < 4; i++) {
            char doc[300];
            snprintf(doc, sizeof doc,
                     "[{\"id\":\"f\",\"uri\":\"forward:/fb\",\"filters\":"
                     "[\"AddRequestHeader=X-A,1\",\"%s\"]}]",
                     names[i]);
            sy_parse_options po = SY_PARSE_OPTIONS_INIT;
            po.host_runs = sy_host_profile(h ? "nginx" : "gateway");
            sy_document *d = NULL;
            sy_error e;
            ck_assert_int_eq(sy_document_parse(doc, strlen(doc), &po, &d, &e),
                             SY_ENOTRUN);
            ck_assert_str_eq(e.path, "[0].filters[1]");
            ck_assert_msg(strstr(e.message, "forward:"), "%s", e.message);
            /* the same filter on the route that answers is run */
            snprintf(doc, sizeof doc,
                     "[{\"id\":\"f\",\"uri\":\"http://b\",\"filters\":"
                     "[\"%s\"]}]",
                     names[i]);
            ck_assert_int_eq(sy_document_parse(doc, strlen(doc), &po, &d, &e),
                             0);
            sy_document_free(d);
        }
}
END_TEST

/* The project's gateway and nginx module authenticate nobody: a limiter
 * keyed by the principal (SCG's default key-resolver, or named) with
 * deny-empty-key false would let every request through unlimited, so
 * they refuse it at that arg; deny-empty-key true (every request 403, as
 * SCG without Spring Security), another resolver, or a host that has a
 * principal (no "!RequestRateLimiter.principal": Python's) run it. */
START_TEST(a_principal_limiter_that_could_never_limit_is_refused) {
    const char *fmt =
        "[{\"id\":\"a\",\"uri\":\"http://b\",\"filters\":[{\"name\":"
        "\"RequestRateLimiter\",\"args\":{\"redis-rate-limiter."
        "replenishRate\":\"5\"%s}}]}]";
    const char *args[] = {",\"deny-empty-key\":\"false\"",
                          ",\"deny-empty-key\":false,\"key-resolver\":"
                          "\"#{@principalNameKeyResolver}\"",
                          "", ",\"deny-empty-key\":\"true\"",
                          ",\"deny-empty-key\":false,\"key-resolver\":"
                          "\"#{@remoteAddrKeyResolver}\""};
    for (int h = 0; h < 3; h++)
        for (size_t i = 0; i < 5; i++) {
            char doc[400];
            snprintf(doc, sizeof doc, fmt, args[i]);
            sy_parse_options po = SY_PARSE_OPTIONS_INIT;
            static const char *const has_principal[] = {
                "host=py", "RequestRateLimiter", NULL};
            po.host_runs = h == 2 ? has_principal
                                  : sy_host_profile(h ? "nginx" : "gateway");
            sy_document *d = NULL;
            sy_error e;
            int rc = sy_document_parse(doc, strlen(doc), &po, &d, &e);
            if (h < 2 && i < 2) {
                ck_assert_int_eq(rc, SY_ENOTRUN);
                ck_assert_str_eq(e.path, "[0].filters[0].args.deny-empty-key");
                ck_assert_msg(strstr(e.message, "principal") &&
                                  strstr(e.message, h ? "nginx" : "gateway"),
                              "%s", e.message);
            } else {
                ck_assert_msg(rc == 0, "host %d args %zu: %s", h, i, e.message);
                sy_document_free(d);
            }
        }
}
END_TEST

/* The mini-gateway writes X-Forwarded-* and Forwarded itself (with
 * --trusted-proxies) and drops every other, as SCG 4.3.5+: a request
 * header filter naming one would be accepted and its header dropped, so
 * the gateway's list refuses it at the name; nginx passes it on. */
START_TEST(a_forwarding_header_filter_is_refused_where_dropped) {
    struct {
        const char *filter, *path;
    } cases[] = {
        {"\"AddRequestHeader=X-Forwarded-Prefix, /api\"", "[0].filters[0]"},
        {"{\"name\":\"SetRequestHeader\",\"args\":{\"name\":"
         "\"forwarded\",\"value\":\"for=x\"}}",
         "[0].filters[0].args.name"},
        {"\"MapRequestHeader=X-A, X-Forwarded-Host\"", "[0].filters[0]"},
        {"{\"name\":\"AddRequestHeadersIfNotPresent\",\"args\":{"
         "\"headers\":\"X-A:1, X-Forwarded-For:10.0.0.1\"}}",
         "[0].filters[0].args.headers"},
        {"\"AddRequestHeader=X-Forwardedx, 1\"", NULL},
        {"\"AddResponseHeader=X-Forwarded-By, 1\"", NULL},
        {"\"AddRequestHeadersIfNotPresent=X-A:1,X-B:Forwarded\"", NULL},
    };
    for (int h = 0; h < 2; h++)
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
            char doc[400];
            snprintf(doc, sizeof doc,
                     "[{\"id\":\"a\",\"uri\":\"http://b\",\"filters\":"
                     "[%s]}]",
                     cases[i].filter);
            sy_parse_options po = SY_PARSE_OPTIONS_INIT;
            po.host_runs = sy_host_profile(h ? "nginx" : "gateway");
            sy_document *d = NULL;
            sy_error e;
            int rc = sy_document_parse(doc, strlen(doc), &po, &d, &e);
            if (!h && cases[i].path) {
                ck_assert_int_eq(rc, SY_ENOTRUN);
                ck_assert_str_eq(e.path, cases[i].path);
                ck_assert_msg(strstr(e.message, "forwarding"), "%s", e.message);
            } else {
                ck_assert_msg(rc == 0, "host %d case %zu: %s", h, i, e.message);
                sy_document_free(d);
            }
        }
}
END_TEST

/* A router with default filters defs (host_runs: the gateway's profile,
 * or NULL) and a source "s". */
static sy_router *defaults_router(const char *defs, bool gateway, int lenient) {
    sy_router_options o = SY_ROUTER_OPTIONS_INIT;
    o.host_runs = gateway ? sy_host_profile("gateway") : NULL;
    o.default_filters = defs;
    o.lenient = lenient;
    sy_router *r;
    ck_assert_int_eq(sy_router_new(&o, &r, NULL), 0);
    ck_assert_int_eq(sy_router_add_source(r, "s", NULL), 0);
    return r;
}

/* Apply doc, whose route [1] (id `route`) a default filter refuses at
 * `path` with `code` (its message naming the route and holding `word`):
 * strict, the apply fails and nothing is live; lenient, that route is
 * left out as the one issue and route [0] is live. */
static void default_refuses_route(sy_router *r, const char *doc, int lenient,
                                  int code, const char *path, const char *route,
                                  const char *word) {
    char named[64];
    snprintf(named, sizeof named, "'%s'", route);
    sy_error e;
    sy_report *rep = NULL;
    int rc = sy_router_apply(r, "s", doc, strlen(doc), &rep, &e);
    if (!lenient) {
        ck_assert_int_eq(rc, code);
        ck_assert_str_eq(e.path, path);
        ck_assert_msg(strstr(e.message, named) && strstr(e.message, "[1]") &&
                          strstr(e.message, word),
                      "%s", e.message);
        ck_assert_uint_eq(live_routes(r), 0);
    } else {
        ck_assert_int_eq(rc, 0);
        ck_assert_uint_eq(sy_report_issue_count(rep), 1);
        const sy_error *is = sy_report_issue(rep, 0);
        ck_assert_str_eq(is->path, path);
        ck_assert_msg(strstr(is->message, named), "%s", is->message);
        ck_assert_uint_eq(live_routes(r), 1);
    }
    sy_report_free(rep);
}

/* A default RequestRateLimiter reaches every route, whatever the route's
 * own filters: none, another filter, or a limiter of its own (then two).
 * The route's compile notes only its own limiters, so a walk that trusted
 * that note alone would skip the default's (accepted, never enforced). */
START_TEST(a_default_limiter_is_counted_on_every_route) {
    static const char defs[] =
        "[{\"name\":\"RequestRateLimiter\",\"args\":{\"redis-rate-limiter."
        "replenishRate\":\"1\",\"key-resolver\":"
        "\"#{@remoteAddrKeyResolver}\"}}]";
    static const char doc[] =
        "[{\"id\":\"bare\",\"uri\":\"http://b\",\"predicates\":"
        "[\"Path=/bare\"]},"
        "{\"id\":\"hdr\",\"uri\":\"http://b\",\"predicates\":"
        "[\"Path=/hdr\"],\"filters\":[\"AddRequestHeader=X-A,1\"]},"
        "{\"id\":\"own\",\"uri\":\"http://b\",\"predicates\":"
        "[\"Path=/own\"],\"filters\":[{\"name\":\"RequestRateLimiter\","
        "\"args\":{\"redis-rate-limiter.replenishRate\":\"5\","
        "\"key-resolver\":\"#{@remoteAddrKeyResolver}\"}}]}]";
    fix f;
    fix_open(&f, defaults_router(defs, false, 0));
    sy_error e;
    ck_assert_msg(sy_router_apply(f.r, "s", doc, strlen(doc), NULL, &e) == 0,
                  "%s: %s", e.path, e.message);
    ck_assert_uint_eq(sy_match_ratelimit_count(fix_match(&f, "/bare")), 1);
    ck_assert_uint_eq(sy_match_ratelimit_count(fix_match(&f, "/hdr")), 1);
    ck_assert_uint_eq(sy_match_ratelimit_count(fix_match(&f, "/own")), 2);
    fix_close(&f);
}
END_TEST

/* A default RequestRateLimiter keyed by #{@pathVariable:user}: a route
 * none of whose patterns captures {user} would give every request the
 * empty key (its status, 403), never a limit: refused at the default
 * filter, naming the route (lenient: that route left out). */
START_TEST(a_default_limiter_path_variable_a_route_lacks_is_refused) {
    static const char defs[] =
        "[{\"name\":\"RequestRateLimiter\",\"args\":{\"redis-rate-limiter."
        "replenishRate\":\"1\",\"key-resolver\":\"#{@pathVariable:user}\"}}]";
    static const char doc[] =
        "[{\"id\":\"u\",\"uri\":\"http://b\",\"predicates\":"
        "[\"Path=/u/{user}/**\"]},"
        "{\"id\":\"n\",\"uri\":\"http://b\",\"predicates\":[\"Path=/n\"]}]";
    for (int lenient = 0; lenient < 2; lenient++) {
        sy_router *r = defaults_router(defs, false, lenient);
        default_refuses_route(r, doc, lenient, SY_EARG,
                              "defaultFilters[0].args.key-resolver", "n",
                              "{user}");
        sy_router_free(r);
    }
}
END_TEST

/* A default filter's template {NAME} (AddRequestHeader=X-T,{tenant},
 * SetPath=/{seg}, ...) reaches every route: one whose requests do not all
 * have NAME was accepted and sent the header or path with "" there (SCG
 * fails those requests, 500); refused at the default filter, naming the
 * route (lenient: that route left out). A route that has it runs it. */
START_TEST(a_default_template_variable_a_route_lacks_is_refused) {
    static const char *const defs[] = {
        "[\"AddRequestHeader=X-A,1\",{\"name\":\"AddRequestHeader\",\"args\":"
        "{\"name\":\"X-T\",\"value\":\"t-{tenant}\"}}]",
        "[\"AddRequestHeader=X-A,1\",\"SetPath=/{tenant}/x\"]"};
    static const char *const where[] = {"defaultFilters[1].args.value",
                                        "defaultFilters[1]"};
    static const char doc[] =
        "[{\"id\":\"t\",\"uri\":\"http://b\",\"predicates\":"
        "[\"Host={tenant}.example.com\"]},"
        "{\"id\":\"n\",\"uri\":\"http://b\",\"predicates\":[\"Path=/n\"]}]";
    for (int lenient = 0; lenient < 2; lenient++)
        for (size_t i = 0; i < 2; i++) {
            sy_router *r = defaults_router(defs[i], false, lenient);
            default_refuses_route(r, doc, lenient, SY_EARG, where[i], "n",
                                  "{tenant}");
            sy_router_free(r);
        }
    static const char ok[] =
        "[{\"id\":\"t\",\"uri\":\"http://b\",\"predicates\":"
        "[\"Host={tenant}.example.com\"]}]";
    sy_router *r = defaults_router(defs[0], false, 0);
    sy_error e;
    ck_assert_msg(sy_router_apply(r, "s", ok, strlen(ok), NULL, &e) == 0,
                  "%s: %s", e.path, e.message);
    sy_router_free(r);
}
END_TEST

/* The same path filters among the router's default filters: SCG runs
 * them on a forward: route's path too, the hosts forward to the uri's
 * path as written; a host that runs forward: refuses the forward: route
 * at the default filter, naming the route (strict: the apply; lenient:
 * the route is left out, an issue). The routes that answer run them. */
START_TEST(a_default_path_filter_with_a_forward_route_is_refused) {
    static const char doc[] = "[{\"id\":\"a\",\"uri\":\"http://b\"},"
                              "{\"id\":\"f\",\"uri\":\"forward:/fb\"}]";
    static const char ok[] = "[{\"id\":\"a\",\"uri\":\"http://b\"}]";
    static const char fwd[] = "{\"id\":\"g\",\"uri\":\"forward:/x\"}";
    const char *names[] = {"StripPrefix=1", "PrefixPath=/p", "SetPath=/s",
                           "RewritePath=/a, /b"};
    for (int lenient = 0; lenient < 2; lenient++)
        for (size_t i = 0; i < 4; i++) {
            char defs[128];
            snprintf(defs, sizeof defs, "[\"AddRequestHeader=X-A,1\",\"%s\"]",
                     names[i]);
            sy_router *r = defaults_router(defs, true, lenient);
            default_refuses_route(r, doc, lenient, SY_ENOTRUN,
                                  "defaultFilters[1]", "f", "forward:");
            sy_error e;
            ck_assert_int_eq(sy_router_apply(r, "s", ok, strlen(ok), NULL, &e),
                             0);
            ck_assert_int_eq(
                sy_router_upsert_route(r, "s", fwd, strlen(fwd), &e),
                SY_ENOTRUN);
            ck_assert_str_eq(e.path, "defaultFilters[1]");
            ck_assert_msg(strstr(e.message, "'g'"), "%s", e.message);
            ck_assert_uint_eq(live_routes(r), 1);
            sy_router_free(r);
        }
    /* a router whose host declares nothing refuses nothing */
    sy_router *r = defaults_router("[\"StripPrefix=1\"]", false, 0);
    ck_assert_int_eq(sy_router_apply(r, "s", doc, strlen(doc), NULL, NULL), 0);
    ck_assert_uint_eq(live_routes(r), 2);
    sy_router_free(r);
}
END_TEST

START_TEST(route_host_runs_lists_every_host_run_item) {
    const char *doc =
        "[{\"id\":\"r\",\"uri\":\"lb:ws://s\",\"metadata\":{\"cors\":\"{}\","
        "\"connect-timeout\":100},\"filters\":[\"CircuitBreaker=c\","
        "\"StripPrefix=1\",\"Retry=3\"]}]";
    sy_document *d;
    ck_assert_int_eq(sy_document_parse(doc, strlen(doc), NULL, &d, NULL), 0);
    const char *names[8];
    size_t n = sy_route_host_runs(sy_document_route(d, 0), names, 8);
    ck_assert_uint_eq(n, 5);
    ck_assert_str_eq(names[0], "CircuitBreaker");
    ck_assert_str_eq(names[1], "Retry");
    ck_assert_str_eq(names[2], "ws:");
    ck_assert_str_eq(names[3], "metadata.connect-timeout");
    ck_assert_str_eq(names[4], "metadata.cors");
    ck_assert_uint_eq(sy_route_host_runs(sy_document_route(d, 0), NULL, 0), 5);
    sy_document_free(d);
}
END_TEST

/* A secure instance (https, wss) needs the host's TLS client: a host whose
 * list lacks "https:" refuses it at commit, located, in a whole list and
 * in a delta, and nothing changes; a plain instance passes, and so does a
 * secure one where the host runs https or declares nothing. */
START_TEST(a_secure_instance_is_refused_where_the_host_has_no_tls) {
    static const char *const plain_only[] = {"host=plain", "Retry", NULL};
    const char *doc = "[{\"id\":\"r\",\"uri\":\"lb://svc\","
                      "\"predicates\":[\"Path=/r\"]}]";
    sy_instance in[2] = {
        {.id = "a", .host = "127.0.0.1", .port = 80},
        {.id = "b", .host = "127.0.0.1", .port = 443, .secure = true}};
    sy_error e;
    for (int host = 0; host < 3; host++) {
        const char *const *runs = host == 0   ? plain_only
                                  : host == 1 ? sy_host_profile("nginx")
                                              : NULL;
        sy_router *r = router_with(doc, NULL, runs);
        int want = host == 0 ? SY_ENOTRUN : SY_OK;
        ck_assert_int_eq(sy_router_set_instances(r, "svc", in, 2, NULL, &e),
                         want);
        sy_snapshot *s = sy_router_acquire(r);
        if (host == 0) {
            ck_assert_str_eq(e.path, "instances[1].secure");
            ck_assert_ptr_nonnull(strstr(e.message, "instance 'b'"));
            ck_assert_ptr_nonnull(strstr(e.message, "host 'plain'"));
            ck_assert_ptr_nonnull(strstr(e.message, "\"https:\""));
            ck_assert_uint_eq(sy_snapshot_service_count(s), 0);
            /* the plain one alone passes */
            ck_assert_int_eq(sy_router_set_instances(r, "svc", in, 1, NULL, &e),
                             0);
        } else {
            ck_assert_uint_eq(sy_snapshot_service_count(s), 1);
        }
        sy_snapshot_release(s);
        /* a delta adding a secure instance; a weight change passes */
        sy_instance_delta d[2] = {{SY_INSTANCE_WEIGHT, in[0]},
                                  {SY_INSTANCE_ADD, in[1]}};
        d[0].instance.weight = 3;
        ck_assert_int_eq(sy_router_update_instances(r, "svc", d, 2, NULL, &e),
                         want);
        if (host == 0) {
            ck_assert_str_eq(e.path, "deltas[1].instance.secure");
            ck_assert_int_eq(
                sy_router_update_instances(r, "svc", d, 1, NULL, &e), 0);
        }
        sy_router_free(r);
    }
}
END_TEST

int main(void) {
    Suite *s = suite_create("policy");
    TCase *tc = tcase_create("policy");
    tcase_add_test(tc, burst_of_one_lets_one_of_twenty_through);
    tcase_add_test(tc, burst_of_zero_blocks_everything);
    tcase_add_test(tc, huge_bucket_sizes_are_run_or_refused_never_fail_open);
    tcase_add_test(tc,
                   a_route_without_a_limiter_is_allowed_and_says_nothing_more);
    tcase_add_test(tc, remaining_counts_down_and_headers_are_formatted);
    tcase_add_test(tc, each_key_has_its_own_bucket);
    tcase_add_test(tc, keys_past_the_key_limit_have_their_own_buckets);
    tcase_add_test(tc, path_variable_resolver_keys_by_the_capture);
    tcase_add_test(tc,
                   no_principal_is_an_empty_key_denied_with_403_and_no_headers);
    tcase_add_test(tc, deny_empty_key_false_lets_keyless_requests_through);
    tcase_add_test(tc, a_registered_resolver_is_accepted_and_used);
    tcase_add_test(
        tc, buckets_survive_publishes_of_other_routes_and_reset_on_change);
    tcase_add_test(tc, routers_sharing_a_store_share_buckets);
    tcase_add_test(tc, hundred_thousand_keys_in_a_small_store_fail_open);
    tcase_add_test(tc, redis_calls_use_scg_key_names_and_fail_open);
    tcase_add_test(tc, redis_batch_reply_gives_each_draw_its_own_decision);
    tcase_add_test(tc, redis_key_texts_match_snprintf_at_every_length);
    tcase_add_test(tc, typos_and_bad_values_are_refused_where_they_are);
    tcase_add_test(tc, a_typo_after_sixty_four_args_is_refused);
    tcase_add_test(tc, scg_forms_are_accepted);
    tcase_add_test(tc, retry_follows_statuses_series_methods_and_exceptions);
    tcase_add_test(tc, status_names_are_read_as_scg_reads_them);
    tcase_add_test(tc, retry_lists_as_arrays_and_empty_arrays_are_scgs);
    tcase_add_test(tc, retry_backoff_grows_by_factor_caps_and_jitters);
    tcase_add_test(tc, retry_random_zero_is_a_draw_not_the_routers_source);
    tcase_add_test(tc, a_record_at_now_zero_reads_the_routers_clock);
    tcase_add_test(tc, sub_millisecond_durations_are_refused_not_cut);
    tcase_add_test(tc, long_durations_are_refused_or_run_not_clamped);
    tcase_add_test(tc, breaker_opens_half_opens_and_closes);
    tcase_add_test(tc, a_breaker_told_no_time_reads_real_time);
    tcase_add_test(tc, a_default_breaker_is_each_routes_own_asked_in_turn);
    tcase_add_test(tc, resume_without_error_verdicts_are_scgs);
    tcase_add_test(tc, removed_and_renamed_breakers_give_their_entries_back);
    tcase_add_test(tc, a_freed_entry_waits_for_readers_and_is_reused_clean);
    tcase_add_test(tc, a_shared_breaker_stays_while_one_route_names_it);
    tcase_add_test(tc, breaker_counts_follow_every_kind_of_change);
    tcase_add_test(tc,
                   a_publish_refused_after_the_attach_gives_the_entries_back);
    tcase_add_test(tc, routers_sharing_a_store_count_each_others_routes);
    tcase_add_test(tc, a_store_serves_a_bounded_number_of_routers);
    tcase_add_test(tc,
                   a_breaker_the_store_has_no_entry_for_is_refused_at_commit);
    tcase_add_test(tc,
                   a_breaker_or_retry_in_the_defaults_and_a_route_is_refused);
    tcase_add_test(tc,
                   a_lenient_apply_leaves_out_a_route_nesting_a_default_policy);
    tcase_add_test(tc,
                   a_left_out_nesting_route_stays_out_on_rollback_and_reapply);
    tcase_add_test(tc, a_default_breaker_claims_for_routes_without_policies);
    tcase_add_test(tc, a_lenient_apply_on_a_full_breaker_store_is_refused);
    tcase_add_test(tc,
                   a_lenient_document_of_only_nesting_routes_changes_nothing);
    tcase_add_test(tc, half_open_failures_open_again);
    tcase_add_test(tc, slow_calls_trip_the_slow_call_model);
    tcase_add_test(tc, recovery_admits_a_growing_share_after_closing);
    tcase_add_test(
        tc, routes_naming_one_breaker_share_it_and_a_new_config_resets_it);
    tcase_add_test(tc, routes_naming_one_breaker_must_agree_on_its_settings);
    tcase_add_test(
        tc, a_failed_publish_leaves_the_store_settings_as_routes_give_them);
    tcase_add_test(tc,
                   a_lenient_change_set_leaves_out_routes_clashing_within_it);
    tcase_add_test(tc, a_host_refuses_what_it_does_not_run);
    tcase_add_test(tc, fallback_variables_must_be_captured);
    tcase_add_test(tc, route_host_runs_lists_every_host_run_item);
    tcase_add_test(tc, a_secure_instance_is_refused_where_the_host_has_no_tls);
    tcase_add_test(tc, a_host_list_with_an_unknown_entry_is_refused);
    tcase_add_test(tc, a_path_filter_on_a_forward_route_is_refused);
    tcase_add_test(tc, a_principal_limiter_that_could_never_limit_is_refused);
    tcase_add_test(tc, a_forwarding_header_filter_is_refused_where_dropped);
    tcase_add_test(tc, a_default_path_filter_with_a_forward_route_is_refused);
    tcase_add_test(tc, a_path_variable_no_pattern_captures_is_refused);
    tcase_add_test(tc,
                   a_default_limiter_path_variable_a_route_lacks_is_refused);
    tcase_add_test(tc, a_default_limiter_is_counted_on_every_route);
    tcase_add_test(tc, a_default_template_variable_a_route_lacks_is_refused);
    tcase_add_test(
        tc, lenient_mode_leaves_out_a_route_whose_breaker_settings_clash);
    tcase_add_test(tc,
                   routers_sharing_a_store_are_told_of_other_breaker_settings);
    suite_add_tcase(s, tc);
    return sy_test_run(s);
}
