/*
 * ratelimit.h - RequestRateLimiter: its args as SCG binds them
 * (redis-rate-limiter.replenishRate / .burstCapacity / .requestedTokens,
 * key-resolver, rate-limiter, deny-empty-key, empty-key-status,
 * status-code), the local token bucket in the policy store, and the Redis
 * mode (SCG's key names and script, the reply turned into a decision).
 */
#ifndef SY_POLICY_RATELIMIT_H
#define SY_POLICY_RATELIMIT_H

#include "policy/keyresolve.h"
#include "policy/policy_args.h"
#include "policy/store.h"

typedef struct sy__rl_cfg {
    uint32_t rate, burst, requested;
    int status, empty_status;
    bool deny_empty;
    sy__keyres kr;
    uint64_t fp; /* of rate, burst, requested: the bucket's shape */
    /* requestedTokens' refill time in bucket units (store.h), set by
     * compile for the check: requested x 4,096,000,000 = step x rate +
     * step_rem (step_rem < rate) */
    uint64_t step, step_rem;
    /* rate, burst and requested as decimal text (Redis mode's ARGV 1, 2,
     * 4), NUL-ended, set with step */
    char argv[3][12];
} sy__rl_cfg;

/* Set cfg's step, step_rem and argv from its rate, burst and requested
 * (compile does). */
void sy__rl_shape(sy__rl_cfg *cfg);

/* Read and check the args (p) into cfg. */
int sy__rl_compile(sy__pargs *p, const sy_registry *reg, sy__rl_cfg *cfg);

/* The bucket key of (route id, cfg, key); inline: every check makes one. */
static inline uint64_t sy__rl_bucket_key(const sy__rl_cfg *cfg,
                                         const char *route_id, const char *key,
                                         size_t key_len) {
    uint64_t h = sy__store_hash(route_id, strlen(route_id), cfg->fp);
    h = sy__store_hash(key, key_len, h);
    return h ? h : 1;
}
/* Take cfg->requested tokens from the bucket at now_ms: out->allowed,
 * out->remaining (every other member of out is filled too). */
void sy__rl_take(sy_policy_store *st, const sy__rl_cfg *cfg,
                 uint64_t bucket_key, int64_t now_ms, sy_ratelimit *out);
/* Fill out's settings (limited, headers, rates, status) from cfg. */
void sy__rl_fill(const sy__rl_cfg *cfg, sy_ratelimit *out);
/* The decision for a request whose resolver gave no key. */
void sy__rl_empty_key(const sy__rl_cfg *cfg, sy_ratelimit *out);
/* Fill a Redis call for (route id, key). */
void sy__rl_redis_call(const sy__rl_cfg *cfg, const char *route_id,
                       sy_redis_call *call);

#endif
